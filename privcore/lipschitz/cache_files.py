"""The Lipschitz cache's files on disk: a private directory and the installation secret.

:class:`~privcore.lipschitz.cache.LipschitzCache` keeps its database, secret and lock in one
directory. This module makes that directory 0700 and every ``cache.*`` file in it 0600 (a 077 umask
around creation, existing ones chmod-ed), refuses a directory that stays open to other users, not
ours or sticky like /tmp (:class:`CacheDisabled`: the cache is then off, with a warning), moves a
corrupt database aside (:func:`move_aside`), and reads, creates and rotates the secret
(:class:`SecretFile`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import sqlite3
import stat
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

__all__ = ["SECRET_BYTES", "CacheDisabled", "SecretFile", "move_aside", "private_umask", "secure_directory"]

#: length of the installation secret (HMAC-SHA256 key)
SECRET_BYTES = 32
_UMASK_LOCK = threading.Lock()


class CacheDisabled(Exception):
    """The cache directory or secret cannot be made private: every operation is a miss."""


@contextlib.contextmanager
def private_umask() -> Iterator[None]:
    """Umask 077 while the cache creates files (process-wide, so held briefly and serialised)."""
    with _UMASK_LOCK:
        old = os.umask(0o077)
        try:
            yield
        finally:
            os.umask(old)


def secure_directory(directory: Path) -> None:
    """Create ``directory`` 0700 and make it and every ``cache.*`` file in it private, or raise
    :class:`CacheDisabled` (not ours, or sticky like /tmp)."""
    with private_umask():
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.stat(directory)
    if st.st_uid == os.getuid() and not st.st_mode & stat.S_ISVTX:
        with contextlib.suppress(OSError):
            os.chmod(directory, 0o700)
        st = os.stat(directory)
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise CacheDisabled(
            f"cache directory {directory} is not private to this user (owner uid {st.st_uid}, "
            f"mode {stat.S_IMODE(st.st_mode):04o}); choose another with PRIVLENS_CACHE_DIR"
        )
    for entry in os.scandir(directory):  # ours only: the directory may hold other things
        if entry.name.startswith(("cache.", ".cache.")) and entry.is_file(follow_symlinks=False):
            with contextlib.suppress(OSError):
                if stat.S_IMODE(entry.stat(follow_symlinks=False).st_mode) & 0o077:
                    os.chmod(entry.path, 0o600)


def move_aside(path: Path, lock: Path, *, seen_inode: int | None, suffix: str) -> Path | None:
    """Move the database at ``path`` (with its WAL/SHM) to ``<path>.<suffix>`` under the lock file
    ``lock``, once whichever process sees it corrupt first; None when nothing was moved: the file is
    gone, another process already moved the one we saw (inode ``seen_inode``), or the file we failed
    to open (``seen_inode`` None) was replaced by a good one meanwhile."""
    with private_umask():
        lock_fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        try:
            current = os.stat(path).st_ino
        except FileNotFoundError:
            return None
        if seen_inode is not None and current != seen_inode:
            return None
        if seen_inode is None and _readable(path):
            return None
        aside = Path(f"{path}.{suffix}")
        os.replace(path, aside)
        for tail in ("-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.replace(f"{path}{tail}", f"{aside}{tail}")
        return aside
    finally:
        os.close(lock_fd)


def _readable(path: Path) -> bool:
    try:
        conn = sqlite3.connect(path, timeout=5.0)
        try:
            return conn.execute("PRAGMA quick_check").fetchone() == ("ok",)
        finally:
            conn.close()
    except sqlite3.Error:
        return False


class SecretFile:
    """The installation secret at ``path``: :meth:`read` creates it on first use (the first writer
    of several processes wins) and reloads it when another process rotated it; :meth:`rotate`
    replaces it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._state: tuple[tuple[int, int, int], bytes] | None = None

    def read(self) -> bytes:
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            self._write(replace=False)
            st = os.stat(self.path, follow_symlinks=False)
        ident = (st.st_ino, st.st_mtime_ns, st.st_size)
        if self._state is not None and self._state[0] == ident:
            return self._state[1]
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise CacheDisabled(f"cache secret {self.path} is not a regular file owned by this user")
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(self.path, 0o600)
        fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as fh:
            secret = fh.read()
        if len(secret) != SECRET_BYTES:
            warnings.warn(
                f"Lipschitz cache secret {self.path} is damaged ({len(secret)} bytes); "
                "a new one is made and every entry recomputed",
                RuntimeWarning,
                stacklevel=4,
            )
            self._write(replace=True)
            return self.read()
        self._state = (ident, secret)
        return secret

    def rotate(self) -> None:
        self._write(replace=True)
        self._state = None

    def _write(self, *, replace: bool) -> None:
        """Write a fresh secret atomically: a 0600 temporary file, then link (first writer wins) or
        replace (rotation)."""
        tmp = self.path.parent / f".{self.path.name}.{os.getpid()}.{secrets.token_hex(8)}.tmp"
        with private_umask():
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(secrets.token_bytes(SECRET_BYTES))
                fh.flush()
                os.fsync(fh.fileno())
            if replace:
                os.replace(tmp, self.path)
            else:
                try:
                    os.link(tmp, self.path)  # atomic and never overwrites: the first writer wins
                except FileExistsError:
                    pass
                except OSError:  # a filesystem without hard links
                    if not self.path.exists():
                        os.replace(tmp, self.path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
