"""Persistent cache of Lipschitz certificates and of φ, shared by processes and sessions.

One SQLite database in WAL mode (concurrent readers and one writer at a time across processes,
every write an atomic transaction) under ``$PRIVLENS_CACHE_DIR`` or ``<repo>/.cache/lipschitz``.
Each row stores the canonical JSON of its key fields, the JSON value, a format version and a
SHA-256 checksum over all three. A row whose checksum, version, key or value fails to check —
a torn write, a bit flip, an entry from an older engine — is ignored (and deleted) and the value
recomputed: the cache is an accelerator, never a source of truth.

Keys hold a SHA-256 of the embedding, not the embedding; the stored φ (a PhiResult) does hold
its centre, like any private intermediate of the user's own images: the directory belongs on
the user's device, with the user's file permissions.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import threading
import warnings
from pathlib import Path
from typing import Any

__all__ = ["CACHE_VERSION", "LipschitzCache", "default_cache_dir", "resolve_cache"]

#: bump when the meaning of a cached value changes: older rows become stale and are recomputed
CACHE_VERSION = 2


def default_cache_dir() -> Path:
    """``$PRIVLENS_CACHE_DIR`` if set, else ``<repo>/.cache/lipschitz``."""
    env = os.environ.get("PRIVLENS_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parents[2] / ".cache" / "lipschitz"


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=True)


def _checksum(key: str, value: str, version: int) -> str:
    return hashlib.sha256(f"{version}\0{key}\0{value}".encode()).hexdigest()


class LipschitzCache:
    """Key → JSON value store with integrity checks (see module docstring).

    ``get(kind, key)`` / ``put(kind, key, value)``: ``key`` is a dict of JSON-able fields (model
    hash, centre bytes as hex, radius, norms, Δp, …), ``value`` a JSON-able dict. Floats round-trip
    exactly (shortest repr). Safe to use from several threads and processes at once.
    """

    def __init__(self, directory: str | os.PathLike | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.path = self.directory / "cache.sqlite3"
        self._local = threading.local()
        self.hits = 0
        self.misses = 0
        self.rejected = 0

    def __repr__(self) -> str:
        return f"LipschitzCache({str(self.directory)!r})"

    def __getstate__(self) -> dict:
        return {"directory": str(self.directory)}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["directory"])

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is not None and getattr(self._local, "pid", None) == os.getpid():
            return conn
        self.directory.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS entries (id TEXT PRIMARY KEY, kind TEXT NOT NULL, key TEXT NOT NULL, "
            "value TEXT NOT NULL, version INTEGER NOT NULL, checksum TEXT NOT NULL)"
        )
        self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    @staticmethod
    def _id(kind: str, key_json: str) -> str:
        return hashlib.sha256(f"{kind}\0{key_json}".encode()).hexdigest()

    def get(self, kind: str, key: dict) -> dict | None:
        """The stored value for ``key``, or None when absent, stale or corrupt."""
        key_json = _canonical(key)
        ident = self._id(kind, key_json)
        try:
            row = self._connect().execute(
                "SELECT kind, key, value, version, checksum FROM entries WHERE id = ?", (ident,)
            ).fetchone()
        except sqlite3.Error as exc:
            warnings.warn(f"Lipschitz cache unreadable ({exc}); recomputing", RuntimeWarning, stacklevel=2)
            self.misses += 1
            return None
        if row is None:
            self.misses += 1
            return None
        r_kind, r_key, r_value, r_version, r_sum = row
        ok = (
            r_kind == kind
            and r_key == key_json
            and r_version == CACHE_VERSION
            and isinstance(r_value, str)
            and r_sum == _checksum(r_key, r_value, r_version)
        )
        value = None
        if ok:
            try:
                value = json.loads(r_value)
            except ValueError:
                ok = False
        if not ok or not isinstance(value, dict):
            self.rejected += 1
            self.misses += 1
            self.delete(kind, key)
            return None
        self.hits += 1
        return value

    def put(self, kind: str, key: dict, value: dict) -> None:
        """Store ``value`` under ``key`` atomically (last writer wins; best effort on I/O errors)."""
        key_json = _canonical(key)
        value_json = _canonical(value)
        if any(isinstance(v, float) and math.isnan(v) for v in value.values()):
            raise ValueError("refusing to cache a NaN")
        row = (
            self._id(kind, key_json),
            kind,
            key_json,
            value_json,
            CACHE_VERSION,
            _checksum(key_json, value_json, CACHE_VERSION),
        )
        try:
            self._connect().execute(
                "INSERT OR REPLACE INTO entries (id, kind, key, value, version, checksum) "
                "VALUES (?,?,?,?,?,?)",
                row,
            )
        except sqlite3.Error as exc:
            warnings.warn(f"Lipschitz cache not written ({exc})", RuntimeWarning, stacklevel=2)

    def delete(self, kind: str, key: dict) -> None:
        """Remove one entry (no error if absent)."""
        try:
            self._connect().execute("DELETE FROM entries WHERE id = ?", (self._id(kind, _canonical(key)),))
        except sqlite3.Error:
            pass

    def clear(self) -> None:
        """Remove every entry."""
        self._connect().execute("DELETE FROM entries")

    def __len__(self) -> int:
        return int(self._connect().execute("SELECT COUNT(*) FROM entries").fetchone()[0])


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
