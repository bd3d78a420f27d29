"""The release ledger on disk: one authenticated, owner-only file per browser. No Streamlit.

A browser holds a random 256-bit *ledger token* (:func:`new_token`, made server-side with
:mod:`secrets`). The server keeps that browser's ledger in ``<dir>/<name>.ledger``, where ``name`` is
HMAC-SHA256 of the token under a server secret (``<dir>/ledger.secret``, 32 random bytes, 0600): the
file name reveals nothing about the token, and only the token's holder can make the server open the
file (no request ever names a file). Each file carries an HMAC-SHA256 of its rows, bound to its name,
under the same secret: a file that was edited, damaged, copied from another name or written under
another secret is refused (:class:`LedgerRefused`), moved aside and reported, never used.

Files are written atomically and synced (:mod:`privcore._atomic`: temporary file, fsync, rename,
fsync of the directory) with mode 0600 in a 0700 directory (privcore's cache rules,
:func:`privcore.lipschitz.cache_files.secure_directory`); a read-modify-write holds an exclusive lock.
A row holds only what the Accountant composes: a random id, the time, the image's file name and
short key, the release's label and its public guarantee (:meth:`Guarantee.to_dict`); never an image,
an embedding or an outcome.

The directory is ``$PRIVLENS_LEDGER_DIR``, else ``<checkout>/.state/ledgers``, else
``$XDG_STATE_HOME/privlens/ledgers`` (``~/.local/state`` when unset).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import math
import os
import re
import secrets
import stat
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from privcore._atomic import atomic_write_bytes
from privcore.lipschitz.cache_files import CacheDisabled, SecretFile, private_umask, secure_directory

__all__ = [
    "EXPORT_FORMAT",
    "FORMAT",
    "LedgerRefused",
    "LedgerStore",
    "LedgerUnavailable",
    "default_dir",
    "export_doc",
    "merge",
    "new_row",
    "new_token",
    "parse_export",
    "row_from_data",
    "row_to_data",
    "valid_token",
]

FORMAT = "privlens.ledger/1"
EXPORT_FORMAT = "privlens.ledger-export/1"
#: the most rows a file or an import may hold, and the largest import read (bytes)
MAX_ROWS = 100_000
MAX_IMPORT_BYTES = 16 * 1024 * 1024
_TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")
_ID = re.compile(r"[0-9a-f]{32}")
_KEY = re.compile(r"[0-9A-Za-z_.:-]{1,64}")
_NUMBERS = ("epsilon", "delta", "radius")


class LedgerUnavailable(Exception):
    """The ledger directory or secret cannot be made private or read: nothing can be kept on disk."""


class LedgerRefused(Exception):
    """A ledger file failed its checks (authentication, format): it is not used."""


def new_token() -> str:
    """A fresh ledger token: 256 random bits, URL-safe base64 (43 characters)."""
    return secrets.token_urlsafe(32)


def valid_token(value: object) -> bool:
    """Whether ``value`` has the form of a token :func:`new_token` makes."""
    return isinstance(value, str) and _TOKEN.fullmatch(value) is not None


def default_dir() -> Path:
    """Where ledgers live (module docstring)."""
    from privcore._paths import checkout_root

    env = os.environ.get("PRIVLENS_LEDGER_DIR")
    if env:
        return Path(env).expanduser()
    root = checkout_root()
    if root is not None:
        return root / ".state" / "ledgers"
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base).expanduser() / "privlens" / "ledgers"


# ------------------------------------------------------------------------------- rows


def new_row(*, image: str, image_key: str, label: str, guarantee: Any) -> dict[str, Any]:
    """A ledger row for one release, with a fresh random id and the time (UTC)."""
    return {
        "id": secrets.token_hex(16),
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "image": str(image),
        "image_key": str(image_key),
        "label": str(label),
        "guarantee": guarantee,
    }


def row_to_data(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row as JSON data: the guarantee's plain fields, an infinite number written as ``"inf"``."""
    g = row["guarantee"].to_dict()
    g = {k: ("inf" if isinstance(v, float) and math.isinf(v) else v) for k, v in g.items()}
    return {k: str(row[k]) for k in ("id", "at", "image", "image_key", "label")} | {"guarantee": g}


def _text(data: Mapping[str, Any], name: str, limit: int, pattern: re.Pattern[str] | None = None) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value or len(value) > limit:
        raise ValueError(f"{name!r} must be a text of 1 to {limit} characters")
    if pattern is not None and pattern.fullmatch(value) is None:
        raise ValueError(f"{name!r} has an unexpected form")
    return value


def row_from_data(data: object) -> dict[str, Any]:
    """A row from JSON data, every field checked and the guarantee parsed again (validated by
    :meth:`Guarantee.from_dict`); ValueError says what is wrong."""
    from privcore.mechanisms import Guarantee

    if not isinstance(data, dict):
        raise ValueError("a release must be a JSON object")
    extra = sorted(set(data) - {"id", "at", "image", "image_key", "label", "guarantee"})
    if extra:
        raise ValueError(f"unknown fields {extra}")
    g = data.get("guarantee")
    if not isinstance(g, dict):
        raise ValueError("'guarantee' must be a JSON object")
    g = dict(g)
    for name in _NUMBERS:
        if g.get(name) == "inf":
            g[name] = math.inf
        elif not isinstance(g.get(name), int | float) or isinstance(g.get(name), bool):
            raise ValueError(f"guarantee {name!r} must be a number")
    try:
        guarantee = Guarantee.from_dict(g)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"its guarantee is not valid ({exc})") from None
    return {
        "id": _text(data, "id", 32, _ID),
        "at": _text(data, "at", 40),
        "image": _text(data, "image", 500),
        "image_key": _text(data, "image_key", 64, _KEY),
        "label": _text(data, "label", 1000),
        "guarantee": guarantee,
    }


def _rows_from(items: object) -> list[dict[str, Any]]:
    if not isinstance(items, list) or len(items) > MAX_ROWS:
        raise ValueError(f"'releases' must be a list of at most {MAX_ROWS} releases")
    rows = []
    for n, item in enumerate(items):
        try:
            rows.append(row_from_data(item))
        except ValueError as exc:
            raise ValueError(f"release {n + 1}: {exc}") from None
    if len({r["id"] for r in rows}) != len(rows):
        raise ValueError("two releases share one id")
    return rows


def merge(
    current: Sequence[Mapping[str, Any]], incoming: Sequence[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], int]:
    """``current`` followed by every row of ``incoming`` it lacks, and how many were added. A row
    whose id is in ``current`` with other content is added under a new id (both count): a merge only
    ever adds spending."""
    out = [dict(r) for r in current]
    seen = {r["id"]: row_to_data(r) for r in out}
    added = 0
    for row in incoming:
        data = row_to_data(row)
        if seen.get(row["id"]) == data:
            continue
        new = dict(row)
        if row["id"] in seen:
            new["id"] = secrets.token_hex(16)
        seen[new["id"]] = row_to_data(new)
        out.append(new)
        added += 1
    return out, added


def export_doc(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The Accountant's download: every row as data, under :data:`EXPORT_FORMAT` (no MAC, no token)."""
    return {"format": EXPORT_FORMAT, "releases": [row_to_data(r) for r in rows]}


def parse_export(raw: bytes) -> list[dict[str, Any]]:
    """The rows of an exported ledger (:func:`export_doc`), every row checked as :func:`row_from_data`;
    ValueError in plain words for anything else."""
    if len(raw) > MAX_IMPORT_BYTES:
        raise ValueError(f"the file is larger than {MAX_IMPORT_BYTES // 2**20} MiB")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"the file is not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != EXPORT_FORMAT:
        raise ValueError(f"the file is not a privlens ledger export (format {EXPORT_FORMAT!r} expected)")
    if set(doc) != {"format", "releases"}:
        raise ValueError(f"unknown fields {sorted(set(doc) - {'format', 'releases'})}")
    return _rows_from(doc["releases"])


# ------------------------------------------------------------------------------- files


def _canonical(rows: Sequence[Mapping[str, Any]]) -> bytes:
    return json.dumps([row_to_data(r) for r in rows], sort_keys=True, ensure_ascii=True,
                      separators=(",", ":"), allow_nan=False).encode()


class LedgerStore:
    """The ledgers in ``directory`` (:func:`default_dir` when None); :meth:`load`, :meth:`save` and
    :meth:`update` by token. :class:`LedgerUnavailable` when the directory or secret is not private."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_dir()
        try:
            secure_directory(self.directory)
            self._secret = SecretFile(self.directory / "ledger.secret").read()
        except (CacheDisabled, OSError) as exc:
            raise LedgerUnavailable(str(exc).replace("PRIVLENS_CACHE_DIR", "PRIVLENS_LEDGER_DIR")) from None

    def _mac(self, purpose: bytes, data: bytes) -> str:
        return hmac.new(self._secret, purpose + b"\0" + data, hashlib.sha256).hexdigest()

    def cookie_name(self) -> str:
        """The browser cookie holding the token: one name per server secret, so two installations on
        one host never take each other's tokens."""
        return "privlens_ledger_" + self._mac(b"cookie", b"")[:12]

    def path(self, token: str) -> Path:
        """The file of ``token``'s ledger (which need not exist)."""
        if not valid_token(token):
            raise ValueError("not a ledger token")
        return self.directory / f"{self._mac(b'file', token.encode())}.ledger"

    def signature(self, token: str) -> tuple[int, int, int] | None:
        """(inode, mtime, size) of ``token``'s file, None when absent: cheap change detection."""
        try:
            st = os.stat(self.path(token), follow_symlinks=False)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def load(self, token: str) -> list[dict[str, Any]] | None:
        """``token``'s rows; None when it has no file; :class:`LedgerRefused` (the file moved aside to
        ``*.refused-<time>``) when the file is not ours, not private, or fails its checks."""
        path = self.path(token)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._refuse(path, f"it cannot be opened ({exc.strerror})")
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            raw = fh.read(MAX_IMPORT_BYTES + 1)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            self._refuse(path, "it is not a regular file owned by this server's user")
        if stat.S_IMODE(st.st_mode) & 0o077:
            self._refuse(path, f"other users could change it (mode {stat.S_IMODE(st.st_mode):04o})")
        try:
            doc = json.loads(raw.decode("utf-8"))
            ok = isinstance(doc, dict) and set(doc) == {"format", "releases", "mac"}
            ok = ok and doc["format"] == FORMAT and isinstance(doc["mac"], str)
        except (UnicodeDecodeError, json.JSONDecodeError):
            ok = False
        if not ok:
            self._refuse(path, "it is not a privlens ledger file")
        try:
            rows = _rows_from(doc["releases"])
        except ValueError as exc:
            self._refuse(path, f"a release in it cannot be read ({exc})")
        expected = self._mac(FORMAT.encode() + b"\0" + path.name.encode(), _canonical(rows))
        if not hmac.compare_digest(expected, doc["mac"]):
            self._refuse(path, "its authentication code does not match (edited, damaged, or not written "
                         "for this browser by this server)")
        return rows

    def _refuse(self, path: Path, why: str) -> NoReturn:
        aside = path.with_name(f"{path.name}.refused-{time.strftime('%Y%m%dT%H%M%S')}")
        with contextlib.suppress(OSError):
            os.replace(path, aside)
        raise LedgerRefused(why)

    def save(self, token: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """Replace ``token``'s ledger with ``rows``, atomically and synced, 0600 (OSError as raised)."""
        path = self.path(token)
        doc = {
            "format": FORMAT,
            "releases": [row_to_data(r) for r in rows],
            "mac": self._mac(FORMAT.encode() + b"\0" + path.name.encode(), _canonical(rows)),
        }
        data = json.dumps(doc, ensure_ascii=False, allow_nan=False, indent=1).encode("utf-8")
        atomic_write_bytes(path, data, mode=0o600)  # mkstemp's file: 0600 from its creation

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """An exclusive lock over the directory's ledgers (between threads and processes)."""
        with private_umask():
            fd = os.open(self.directory / "ledger.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock
