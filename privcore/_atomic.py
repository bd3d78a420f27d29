"""Atomic file writes for results, models and tables: never a half-written file.

A run killed mid-write, a full disk or a serialiser that raises halfway must leave the previous
file, or none, where a reader (the dashboard, a resumed run, ``experiment report``) looks; an
experiment interrupted by a full disk once left an empty ``table1.csv`` behind. Every writer of
privcore's results, checkpoints, resume files and tables goes through this module:

1. write a temporary file in the destination's directory (same file system, so the rename below
   is atomic), named ``.<name>.<random>.part<suffix>`` (the real suffix last, for writers that pick
   a format from it: plotly's ``write_image``, PIL's ``save``);
2. flush it and ``fsync`` it, so its bytes are on disk before its name is;
3. ``os.replace`` it over the destination (POSIX rename: readers see the old or the new file);
4. ``fsync`` the directory, so the rename itself survives a power loss.

Any exception before step 3 (``OSError(ENOSPC)`` included, and ``KeyboardInterrupt``) deletes the
temporary file and re-raises; the destination is untouched.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_open", "atomic_path", "atomic_write_bytes", "atomic_write_text", "fsync_directory"]

#: permissions of written files (mkstemp's own default is 0600)
DEFAULT_MODE = 0o644


def fsync_directory(directory: str | os.PathLike[str]) -> None:
    """Flush a directory's entries (a rename in it) to disk; a no-op where directories cannot be
    opened (Windows) or synced (some network file systems)."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(directory, flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: str | os.PathLike[str], *, mode: int = DEFAULT_MODE) -> Iterator[Path]:
    """Yield a temporary path next to ``path`` for a writer that wants a file name; when the block
    ends normally the file is synced and renamed over ``path`` (module docstring). On an exception
    it is deleted and ``path`` keeps its previous content (or stays absent)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=f".part{path.suffix}")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        if not tmp.is_file():
            raise FileNotFoundError(f"the writer did not create {tmp} (nothing replaced {path})")
        _fsync_file(tmp)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


@contextmanager
def atomic_open(
    path: str | os.PathLike[str],
    mode: str = "w",
    *,
    encoding: str | None = "utf-8",
    newline: str | None = None,
    perm: int = DEFAULT_MODE,
) -> Iterator[IO[Any]]:
    """``open(path, mode)`` for writing ("w" or "wb"), atomically: the file appears under ``path``,
    complete and synced, only when the block ends normally."""
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', got {mode!r}")
    binary = mode == "wb"
    with atomic_path(path, mode=perm) as tmp:
        with open(
            tmp, mode, encoding=None if binary else encoding, newline=None if binary else newline
        ) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, mode: int = DEFAULT_MODE) -> None:
    """Replace ``path`` with ``data`` atomically."""
    with atomic_open(path, "wb", perm=mode) as fh:
        fh.write(data)


def atomic_write_text(
    path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8", mode: int = DEFAULT_MODE
) -> None:
    """Replace ``path`` with ``text`` atomically."""
    with atomic_open(path, "w", encoding=encoding, perm=mode) as fh:
        fh.write(text)
