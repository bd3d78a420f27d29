"""Persistent, authenticated cache of Lipschitz certificates and φ.

One SQLite database in WAL mode (concurrent readers and one writer at a time across processes,
every write an atomic transaction) under ``$PRIVLENS_CACHE_DIR`` or ``<repo>/.cache/lipschitz``.
The cache is an accelerator, never a source of truth: whatever fails a check is recomputed.

**Nothing private on disk.** A row is found by a keyed hash, HMAC-SHA256 under a per-installation
secret, of the canonical key (model digest, the centre's exact float64 bytes, radius, norms, …):
without the secret nobody can test whether an embedding is cached. Values hold only results (φ,
R*, the bisection's decisions, certificate bounds), never an embedding, an image or a point of
the ball; a φ read back gets its centre from the query. Deleted rows are zeroed
(``secure_delete``); a database in an older format (whose values held embeddings) is dropped and
vacuumed on first open.

**Authenticated.** Every row carries an HMAC over (format version, kind, key, creation time,
value) under the same secret. A row that fails verification is deleted, counted in
:attr:`LipschitzCache.rejected` and reported with a warning naming the database file; the caller
recomputes. A recomputed plain checksum is worthless to a forger. A database file SQLite
reports as corrupt is moved aside (``cache.sqlite3.corrupt-<unix time>``, with its WAL/SHM) and
rebuilt, so later calls and ``len()`` work again.

**The secret** is ``cache.secret`` (32 bytes from :func:`secrets.token_bytes`), created on first
use with owner-only permissions. :func:`rotate_secret` (or ``python -m privcore cache
rotate-secret``) replaces it; every existing entry then is a miss and is removed.

**Permissions.** The directory is 0700 and every cache file in it 0600; a directory open to other
users disables the cache with a warning (:mod:`~privcore.lipschitz.cache_files`).

**Retention.** Each row records its creation time. Rows older than the expiry are never returned
and are purged on every write; when the stored values exceed the size limit the oldest rows are
evicted. Defaults: 7 days (φ of a private image should not outlive its use by long; a miss
costs one certification) and 256 MiB (a φ is ~1 kB). Override
with ``$PRIVLENS_CACHE_TTL_DAYS`` and ``$PRIVLENS_CACHE_MAX_MB`` (positive numbers) or the
``ttl_seconds`` / ``max_bytes`` arguments.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import math
import os
import secrets
import sqlite3
import stat
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from privcore.lipschitz.cache_files import (
    CacheDisabled,
    SecretFile,
    move_aside,
    private_umask,
    secure_directory,
)
from privcore.validation import check_int, check_positive

__all__ = [
    "CACHE_VERSION",
    "DEFAULT_MAX_MB",
    "DEFAULT_TTL_DAYS",
    "LipschitzCache",
    "default_cache_dir",
    "resolve_cache",
    "rotate_secret",
]

#: bump when the meaning or format of a cached value changes: older rows are stale and recomputed
#: (3: keyed-hash ids, HMAC-authenticated rows, no centre in φ or argmax in certificates)
CACHE_VERSION = 3
#: default size limit of the stored values, MiB (``$PRIVLENS_CACHE_MAX_MB``)
DEFAULT_MAX_MB = 256.0
#: default expiry of a row, days (``$PRIVLENS_CACHE_TTL_DAYS``)
DEFAULT_TTL_DAYS = 7.0

_DB_NAME = "cache.sqlite3"
_SECRET_NAME = "cache.secret"
_LOCK_NAME = "cache.lock"
_ROW_OVERHEAD = 256  # bytes per row besides the value (id, tag, columns, index)
_COLUMNS = ["id", "kind", "key", "value", "version", "created", "size", "checksum"]
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS entries (id TEXT PRIMARY KEY, kind TEXT NOT NULL, key TEXT NOT NULL, "
    "value TEXT NOT NULL, version INTEGER NOT NULL, created REAL NOT NULL, size INTEGER NOT NULL, "
    "checksum TEXT NOT NULL)"
)
T = TypeVar("T")


def default_cache_dir() -> Path:
    """``$PRIVLENS_CACHE_DIR`` if set, else ``<repo>/.cache/lipschitz`` from a checkout, else the
    user's cache folder (:func:`privcore._paths.cache_dir`)."""
    from privcore._paths import cache_dir

    return cache_dir()


def _canonical(obj: Any) -> str:
    """Canonical JSON (sorted keys, no spaces; floats in shortest round-trip form)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=True)


def _now() -> float:
    return time.time()


def _mac(secret: bytes, label: str, *parts: Any) -> str:
    """HMAC-SHA256 under ``secret`` of a domain label and length-prefixed parts."""
    h = hmac.new(secret, label.encode(), hashlib.sha256)
    for part in parts:
        b = part if isinstance(part, bytes) else str(part).encode()
        h.update(len(b).to_bytes(8, "big"))
        h.update(b)
    return h.hexdigest()


def _env_positive(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number in (0, ∞), got {raw!r}") from None
    return check_positive(name, value)


#: retries of an operation SQLite refused as busy or locked (about 5 s of waiting in all)
_BUSY_RETRIES = 8


def _is_busy(exc: BaseException) -> bool:
    """SQLITE_BUSY / SQLITE_LOCKED: another process holds the database; worth waiting for."""
    if not isinstance(exc, sqlite3.Error):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def _is_corrupt(exc: sqlite3.Error) -> bool:
    """SQLITE_CORRUPT / SQLITE_NOTADB (a damaged or foreign file), not a busy or full database."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
    return type(exc) is sqlite3.DatabaseError


def _rollback(conn: sqlite3.Connection) -> None:
    with contextlib.suppress(sqlite3.Error):
        conn.execute("ROLLBACK")


@contextlib.contextmanager
def _write_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """BEGIN IMMEDIATE … COMMIT; rolled back on any exception, including one raised the instant
    BEGIN returns (a cancelled Ray task's KeyboardInterrupt lands there after a busy wait)."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise


class LipschitzCache:
    """Key → JSON value store, keyed by HMAC and authenticated (see module docstring).

    ``get(kind, key)`` / ``put(kind, key, value)``: ``key`` is a dict of JSON-able fields (model
    hash, centre bytes as hex, radius, norms, Δp, …) that is never stored, ``value`` a JSON-able
    dict (floats round-trip exactly; NaN refused). Safe to use from several threads and processes
    at once. ``max_bytes`` / ``ttl_seconds``: size limit and expiry (None: environment or default).
    Counters: ``hits``, ``misses``, ``rejected`` (failed verification), ``expired``,
    ``recovered`` (corrupt database files moved aside).
    """

    def __init__(
        self,
        directory: str | os.PathLike | None = None,
        *,
        max_bytes: int | None = None,
        ttl_seconds: float | None = None,
    ) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.path = self.directory / _DB_NAME
        self.secret_path = self.directory / _SECRET_NAME
        self.max_bytes = (
            int(_env_positive("PRIVLENS_CACHE_MAX_MB", DEFAULT_MAX_MB) * 2**20)
            if max_bytes is None
            else check_int("max_bytes", max_bytes, minimum=1)
        )
        self.ttl_seconds = (
            _env_positive("PRIVLENS_CACHE_TTL_DAYS", DEFAULT_TTL_DAYS) * 86400.0
            if ttl_seconds is None
            else check_positive("ttl_seconds", ttl_seconds)
        )
        self._local = threading.local()
        self._lock = threading.RLock()
        self._secret_file = SecretFile(self.secret_path)
        self._checked_dir = False
        self._warned_disabled = False
        self.hits = 0
        self.misses = 0
        self.rejected = 0
        self.expired = 0
        self.recovered = 0

    def __repr__(self) -> str:
        return f"LipschitzCache({str(self.directory)!r})"

    def __getstate__(self) -> dict:
        return {"directory": str(self.directory), "max_bytes": self.max_bytes,
                "ttl_seconds": self.ttl_seconds}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["directory"], max_bytes=state["max_bytes"], ttl_seconds=state["ttl_seconds"])

    # -- connections ---------------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        """This thread's connection, reopened after a fork or when the file was moved aside."""
        if not (self._checked_dir and self.directory.is_dir()):
            secure_directory(self.directory)
            self._checked_dir = True
        conn = getattr(self._local, "conn", None)
        if conn is not None and getattr(self._local, "pid", None) == os.getpid():
            try:
                if os.stat(self.path).st_ino == self._local.ino:
                    if conn.in_transaction:  # left open by an operation interrupted mid-rollback
                        _rollback(conn)
                    return conn
            except FileNotFoundError:
                pass
            self._close_local()
        with private_umask():
            if not self.path.exists():
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            try:
                conn.execute("PRAGMA busy_timeout=30000")
                conn.execute("PRAGMA secure_delete=ON")
                # setting auto_vacuum takes the write lock, so only on a new (empty) file, where it
                # applies: a reader must not wait for writers just to open the database
                if conn.execute("PRAGMA page_count").fetchone()[0] == 0:
                    conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                self._migrate(conn)
                conn.execute(_SCHEMA)
                conn.execute("CREATE INDEX IF NOT EXISTS entries_created ON entries (created)")
            except BaseException:
                conn.close()
                raise
        for suffix in ("", "-wal", "-shm"):  # created by SQLite with the database's mode; make sure
            with contextlib.suppress(FileNotFoundError):
                p = Path(f"{self.path}{suffix}")
                if stat.S_IMODE(os.stat(p).st_mode) & 0o077:
                    os.chmod(p, 0o600)
        self._local.conn, self._local.pid, self._local.ino = conn, os.getpid(), os.stat(self.path).st_ino
        return conn

    def _close_local(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None and getattr(self._local, "pid", None) == os.getpid():
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> None:
        """Drop a table in an older format (its keys and values may hold embeddings) and vacuum the
        file so the old bytes are gone, not just unlinked."""
        cols = [row[1] for row in conn.execute("PRAGMA table_info(entries)")]
        if not cols or cols == _COLUMNS:
            return
        with _write_transaction(conn):
            cols = [row[1] for row in conn.execute("PRAGMA table_info(entries)")]
            if cols and cols != _COLUMNS:
                conn.execute("DROP TABLE entries")
        with contextlib.suppress(sqlite3.OperationalError):  # another process may hold a read lock
            conn.execute("PRAGMA auto_vacuum=INCREMENTAL")  # applied by the VACUUM that follows
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _recover(self, exc: sqlite3.Error) -> None:
        """Move a corrupt database aside (once, whichever process sees it first) and start afresh."""
        seen = getattr(self._local, "ino", None) if getattr(self._local, "conn", None) is not None else None
        self._close_local()
        aside = move_aside(self.path, self.directory / _LOCK_NAME, seen_inode=seen,
                           suffix=f"corrupt-{int(_now())}-{secrets.token_hex(2)}")
        if aside is None:
            return
        self.recovered += 1
        warnings.warn(
            f"Lipschitz cache {self.path} is corrupt ({exc}); moved aside to {aside.name} and rebuilt",
            RuntimeWarning,
            stacklevel=4,
        )

    def _run(self, op: Callable[[sqlite3.Connection, bytes], T], *, what: str, fallback: T) -> T:
        """Run ``op(connection, secret)``; a corrupt file is moved aside and the op retried once;
        any other error is a warning and ``fallback`` (the cache is best effort)."""
        busy_waits = 0
        for attempt in (0, 1):
            try:
                conn = self._connect()
                return op(conn, self._secret_file.read())
            except CacheDisabled as exc:
                if not self._warned_disabled:
                    self._warned_disabled = True
                    warnings.warn(f"Lipschitz cache disabled: {exc}", RuntimeWarning, stacklevel=3)
                return fallback
            except sqlite3.Error as exc:
                error: Exception = exc
                # SQLite answers "locked" at once, without its busy handler, when waiting could
                # deadlock (a read upgrading to a write while another process writes): wait and retry
                while _is_busy(error) and busy_waits < _BUSY_RETRIES:
                    time.sleep(0.02 * 2**busy_waits)
                    busy_waits += 1
                    try:
                        return op(self._connect(), self._secret_file.read())
                    except sqlite3.Error as again:
                        error = again
                if attempt == 0 and _is_corrupt(error):
                    try:
                        self._recover(error)
                        continue
                    except OSError as move_error:
                        error = move_error
            except OSError as exc:
                error = exc
            warnings.warn(f"Lipschitz cache {self.path}: {what} failed ({error})", RuntimeWarning,
                          stacklevel=3)
            return fallback
        return fallback

    # -- entries -------------------------------------------------------------------------------------
    @staticmethod
    def _ids(secret: bytes, kind: str, key_json: str) -> tuple[str, str]:
        return _mac(secret, "privlens-cache-id", kind, key_json), _mac(secret, "privlens-cache-key", key_json)

    @staticmethod
    def _tag(secret: bytes, version: Any, kind: str, key_json: str, created: float, value: str) -> str:
        return _mac(secret, "privlens-cache-entry", version, kind, key_json, repr(float(created)), value)

    def get(self, kind: str, key: dict) -> dict | None:
        """The stored value for ``key``, or None when absent, expired, stale or not authentic (a
        forged or damaged row is deleted, counted in ``rejected`` and reported with a warning)."""
        key_json = _canonical(key)

        def op(conn: sqlite3.Connection, secret: bytes) -> tuple[str, dict | None]:
            ident, key_mac = self._ids(secret, kind, key_json)
            row = conn.execute(
                "SELECT kind, key, value, version, created, checksum FROM entries WHERE id = ?", (ident,)
            ).fetchone()
            if row is None:
                return "miss", None
            r_kind, r_key, r_value, r_version, r_created, r_tag = row
            if r_version != CACHE_VERSION:
                conn.execute("DELETE FROM entries WHERE id = ?", (ident,))
                return "miss", None
            authentic = (
                isinstance(r_value, str)
                and isinstance(r_created, float | int)
                and isinstance(r_tag, str)
                and r_kind == kind
                and r_key == key_mac
                and hmac.compare_digest(
                    r_tag, self._tag(secret, r_version, kind, key_json, r_created, r_value)
                )
            )
            value = None
            if authentic:
                try:
                    value = json.loads(r_value)
                except ValueError:
                    value = None
            if not isinstance(value, dict):
                conn.execute("DELETE FROM entries WHERE id = ?", (ident,))
                return "rejected", None
            if r_created + self.ttl_seconds < _now():
                conn.execute("DELETE FROM entries WHERE id = ?", (ident,))
                return "expired", None
            return "hit", value

        how, value = self._run(op, what="read", fallback=("miss", None))
        with self._lock:
            if how == "hit":
                self.hits += 1
            else:
                self.misses += 1
                self.rejected += how == "rejected"
                self.expired += how == "expired"
        if how == "rejected":
            warnings.warn(
                f"Lipschitz cache {self.path}: a {kind!r} entry failed verification (HMAC) and was "
                "deleted; it is recomputed, never trusted (was the file edited?)",
                RuntimeWarning,
                stacklevel=2,
            )
        return value

    def put(self, kind: str, key: dict, value: dict) -> None:
        """Store ``value`` under ``key`` atomically (last writer wins), purge expired rows and evict
        the oldest beyond the size limit; best effort on I/O errors."""
        if any(isinstance(v, float) and math.isnan(v) for v in value.values()):
            raise ValueError("refusing to cache a NaN")
        key_json = _canonical(key)
        value_json = _canonical(value)

        def op(conn: sqlite3.Connection, secret: bytes) -> None:
            ident, key_mac = self._ids(secret, kind, key_json)
            created = _now()
            tag = self._tag(secret, CACHE_VERSION, kind, key_json, created, value_json)
            size = len(value_json.encode()) + _ROW_OVERHEAD
            with _write_transaction(conn):
                conn.execute(
                    "INSERT OR REPLACE INTO entries (id, kind, key, value, version, created, size, checksum) "
                    "VALUES (?,?,?,?,?,?,?,?)",
                    (ident, kind, key_mac, value_json, CACHE_VERSION, created, size, tag),
                )
                removed = self._purge(conn, created)
            if removed:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("PRAGMA incremental_vacuum")

        self._run(op, what="write", fallback=None)

    def _purge(self, conn: sqlite3.Connection, now: float) -> int:
        """Delete expired rows, then the oldest while the stored size exceeds ``max_bytes``."""
        removed = conn.execute("DELETE FROM entries WHERE created < ?", (now - self.ttl_seconds,)).rowcount
        (total,) = conn.execute("SELECT COALESCE(SUM(size), 0) FROM entries").fetchone()
        if total > self.max_bytes:
            removed += conn.execute(
                "DELETE FROM entries WHERE id IN (SELECT id FROM (SELECT id, SUM(size) OVER "
                "(ORDER BY created DESC, id DESC ROWS UNBOUNDED PRECEDING) AS newer FROM entries) "
                "WHERE newer > ?)",
                (self.max_bytes,),
            ).rowcount
        return removed

    def purge(self) -> int:
        """Remove expired rows (and the oldest beyond the size limit) now; returns how many."""

        def op(conn: sqlite3.Connection, secret: bytes) -> int:
            with _write_transaction(conn):
                return self._purge(conn, _now())

        return self._run(op, what="purge", fallback=0)

    def delete(self, kind: str, key: dict) -> None:
        """Remove one entry (no error if absent)."""
        key_json = _canonical(key)
        self._run(
            lambda conn, secret: conn.execute(
                "DELETE FROM entries WHERE id = ?", (self._ids(secret, kind, key_json)[0],)
            ),
            what="delete",
            fallback=None,
        )

    def clear(self) -> None:
        """Remove every entry."""
        self._run(lambda conn, secret: conn.execute("DELETE FROM entries"), what="clear", fallback=None)

    def rotate_secret(self) -> None:
        """Replace the installation secret: every existing entry becomes a miss (and is removed);
        other processes pick the new secret up on their next operation."""
        secure_directory(self.directory)
        self._secret_file.rotate()
        self.clear()

    def __len__(self) -> int:
        """Rows not yet expired (whether or not they would verify)."""
        return int(
            self._run(
                lambda conn, secret: conn.execute(
                    "SELECT COUNT(*) FROM entries WHERE created >= ?", (_now() - self.ttl_seconds,)
                ).fetchone()[0],
                what="count",
                fallback=0,
            )
        )

    def stored_bytes(self) -> int:
        """Sum of the rows' accounted sizes (what the size limit applies to)."""
        return int(
            self._run(
                lambda conn, secret: conn.execute("SELECT COALESCE(SUM(size), 0) FROM entries").fetchone()[0],
                what="size",
                fallback=0,
            )
        )


def rotate_secret(directory: str | os.PathLike | None = None) -> None:
    """Rotate the secret of the cache in ``directory`` (default: :func:`default_cache_dir`)."""
    LipschitzCache(directory).rotate_secret()


def resolve_cache(cache: Any) -> LipschitzCache | None:
    """``None``/``False`` → no cache; ``True`` → the default directory; a path → that directory;
    a :class:`LipschitzCache` → itself."""
    if cache is None or cache is False:
        return None
    if cache is True:
        return LipschitzCache()
    if isinstance(cache, LipschitzCache):
        return cache
    if isinstance(cache, str | os.PathLike):
        return LipschitzCache(cache)
    raise TypeError(
        f"cache must be None, True, a directory path or a LipschitzCache, got {type(cache).__name__}"
    )
