"""Persistent certificate/φ cache: round trips; forged, corrupt, stale or expired entries are never
trusted; nothing private on disk (HMAC keys, no embeddings, owner-only files); size limit and
expiry; secret rotation; a corrupt file moved aside; concurrent processes; batch certification."""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import sqlite3
import stat
import time
import warnings
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from privcore.lipschitz import (
    Certifier,
    LipschitzCache,
    ReluNetwork,
    certify_batch,
    default_cache_dir,
    local_lipschitz,
)
from privcore.lipschitz import cache as cache_module
from privcore.lipschitz.cache import (
    CACHE_VERSION,
    DEFAULT_MAX_MB,
    DEFAULT_TTL_DAYS,
    _canonical,
    rotate_secret,
)
from privcore.lipschitz.certifier import certificate_from_dict, certificate_key
from privcore.lipschitz.norms import Norms
from privcore.mechanisms.phi_cache import cached_phi, phi_key
from tests._nets import random_net


def test_round_trip_is_exact_and_keys_are_separate(tmp_path: Path) -> None:
    cache = LipschitzCache(tmp_path)
    key = {"model": "abc", "center": "0" * 64, "radius": 0.1}
    value = {"upper": 1.0 / 3.0, "lower": 0.1 + 0.2, "inf": float("inf"), "tuple": [1.5, 2.5]}
    cache.put("certificate", key, value)
    assert cache.get("certificate", key) == value  # floats round-trip bit-exactly
    assert cache.get("phi", key) is None  # another kind
    assert cache.get("certificate", {**key, "radius": 0.1 + 1e-17 + 1e-16}) is None
    assert len(cache) == 1


def test_certificate_cache_round_trip_and_reuse(tmp_path: Path) -> None:
    net = random_net(1, (4, 6, 3))
    center = np.array([0.1, 0.2, -0.3, 0.0])
    cert = Certifier(cache=tmp_path)
    first = cert.certify(net, center, 0.3)
    again = Certifier(cache=tmp_path).certify(net, center, 0.3)
    assert again == first  # the stored certificate, identical (seconds included)
    key = certificate_key(net.digest, center, 0.3, kind="exact", norms=Norms())
    assert certificate_from_dict(LipschitzCache(tmp_path).get("certificate", key)) == first
    db = sqlite3.connect(tmp_path / "cache.sqlite3")
    keys = " ".join(k for (k,) in db.execute("SELECT key FROM entries"))
    db.close()
    assert center.astype("<f8").tobytes().hex() not in keys  # keys never spell out the embedding


@pytest.mark.parametrize("damage", ["value", "checksum", "version", "json", "key"])
def test_corrupt_or_stale_entries_are_ignored_and_recomputed(tmp_path: Path, damage: str) -> None:
    net = random_net(2, (4, 6, 3))
    z = np.array([0.3, -0.2, 0.1, 0.5])
    kw = dict(radius=0.1, delta_p=10.0, r_max=0.5, tol=0.05)
    good = cached_phi(net, z, certifier=Certifier(), cache=tmp_path, **kw)
    db = sqlite3.connect(tmp_path / "cache.sqlite3")
    (value,) = db.execute("SELECT value FROM entries WHERE kind = 'phi'").fetchone()
    if damage == "value":  # a lie that keeps valid JSON: φ inflated, tag not updated
        forged = json.loads(value)
        forged["phi"] = 99.0
        db.execute("UPDATE entries SET value = ? WHERE kind = 'phi'", (json.dumps(forged),))
    elif damage == "checksum":
        db.execute("UPDATE entries SET checksum = 'deadbeef' WHERE kind = 'phi'")
    elif damage == "version":
        db.execute("UPDATE entries SET version = ? WHERE kind = 'phi'", (CACHE_VERSION - 1,))
    elif damage == "json":
        db.execute("UPDATE entries SET value = '{not json' WHERE kind = 'phi'")
    else:
        db.execute("UPDATE entries SET key = '{}' WHERE kind = 'phi'")
    db.commit()
    db.close()
    cert = Certifier()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        again = cached_phi(net, z, certifier=cert, cache=tmp_path, **kw)
    assert again == good and again.phi != 99.0
    assert sum(cert.stats.values()) > 0  # recomputed, not read


def _checksum(key: str, value: str, version: int) -> str:
    """The plain SHA-256 over (version, key, value) that anyone can recompute: the attacker's tool."""
    return hashlib.sha256(f"{version}\0{key}\0{value}".encode()).hexdigest()


def _phi_row(db_path: Path) -> tuple[str, str]:
    db = sqlite3.connect(db_path)
    ident, value = db.execute("SELECT id, value FROM entries WHERE kind = 'phi'").fetchone()
    db.close()
    return ident, value


def test_forged_phi_with_a_recomputed_plain_checksum_is_refused_reported_and_recomputed(
    tmp_path: Path,
) -> None:
    """The attack of issue 18: φ edited to 99 and the SHA-256 checksum recomputed over (version,
    key, value) — by someone who even knows the embedding, hence the canonical key. The row fails
    its HMAC: it is deleted, counted, reported naming the file, and φ is recomputed."""
    net = random_net(2, (4, 6, 3))
    z = np.array([0.3, -0.2, 0.1, 0.5])
    kw = dict(radius=0.1, delta_p=10.0, r_max=0.5, tol=0.05)
    good = cached_phi(net, z, certifier=Certifier(), cache=tmp_path, **kw)
    assert good.phi < 99.0
    key_json = _canonical(phi_key(net.digest, z, certifier=Certifier(), **kw))
    db_path = tmp_path / "cache.sqlite3"
    ident, value = _phi_row(db_path)
    forged = json.dumps(dict(json.loads(value), phi=99.0))
    db = sqlite3.connect(db_path)
    (stored_key,) = db.execute("SELECT key FROM entries WHERE id = ?", (ident,)).fetchone()
    for key in (key_json, stored_key):  # the canonical key, or whatever the row's key column says
        db.execute("UPDATE entries SET value = ?, checksum = ? WHERE id = ?",
                   (forged, _checksum(key, forged, CACHE_VERSION), ident))
        db.commit()
        cache = LipschitzCache(tmp_path)
        cert = Certifier()
        with pytest.warns(RuntimeWarning, match=r"cache\.sqlite3.*failed verification"):
            again = cached_phi(net, z, certifier=cert, cache=cache, **kw)
        assert again == good and sum(cert.stats.values()) > 0  # recomputed, not read
        assert cache.rejected == 1
        ident, value = _phi_row(db_path)  # the recomputed φ replaced the forged row
        assert json.loads(value)["phi"] == good.phi
    db.close()


def test_a_phi_bound_to_another_model_or_certifier_is_never_served(tmp_path: Path) -> None:
    """Even an authentic row is used only for the model, certifier and grid it names."""
    net = random_net(2, (4, 6, 3))
    other = ReluNetwork.from_arrays([w.copy() for w in net.weights[:-1]] + [net.weights[-1] / 100],
                                    [b.copy() for b in net.biases])
    z = np.array([0.3, -0.2, 0.1, 0.5])
    kw = dict(radius=0.1, delta_p=10.0, r_max=0.5, tol=0.05)
    a = cached_phi(net, z, certifier=Certifier(), cache=tmp_path, **kw)
    cert = Certifier()
    b = cached_phi(other, z, certifier=cert, cache=tmp_path, **kw)
    assert sum(cert.stats.values()) > 0 and b.model_digest == other.digest != a.model_digest
    lp = cached_phi(net, z, certifier=Certifier(kind="lp"), cache=tmp_path, **kw)
    assert lp.certifier == "lp" and a.certifier == "exact"
    assert len(LipschitzCache(tmp_path)) == 3


def _all_bytes(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file())


def test_nothing_private_is_stored(tmp_path: Path) -> None:
    """Neither the embedding (bytes, hex, decimal) nor its plain SHA-256 nor a point of the ball
    (a certificate's argmax) reaches any file; keys are HMACs under the installation secret."""
    net = random_net(4, (4, 6, 3))
    z = np.array([0.123456789, -0.2, 0.31, 0.5])
    kw = dict(radius=0.1, delta_p=10.0, r_max=0.5, tol=0.05)
    cert = Certifier(cache=tmp_path)
    fresh = local_lipschitz(net, z, 0.3)
    assert fresh.argmax is not None  # the engine found a point of the ball …
    stored = cert.certify(net, z, 0.3)
    assert stored.argmax is None and stored.upper == fresh.upper  # … which is never kept
    phi = cached_phi(net, z, certifier=Certifier(), cache=tmp_path, **kw)
    again = cached_phi(net, z, certifier=Certifier(), cache=LipschitzCache(tmp_path), **kw)
    assert again == phi and again.center == tuple(z)  # the centre comes from the query
    raw = z.astype("<f8").tobytes()
    blob = _all_bytes(tmp_path)
    for needle in (raw, raw.hex().encode(), hashlib.sha256(raw).hexdigest().encode(), b"0.123456789",
                   repr(fresh.argmax[0]).encode()):
        assert needle not in blob
    db = sqlite3.connect(tmp_path / "cache.sqlite3")
    values = [json.loads(v) for (v,) in db.execute("SELECT value FROM entries")]
    db.close()
    assert values and all("center" not in v and v.get("argmax") is None for v in values)


def test_files_are_private_to_the_owner(tmp_path: Path) -> None:
    """Directory 0700, database/WAL/SHM/secret 0600 whatever the umask; an existing directory and
    files with wider permissions are tightened when the cache opens them."""
    old = os.umask(0o022)
    try:
        directory = tmp_path / "fresh" / "cache"
        cache = LipschitzCache(directory)
        cache.put("certificate", {"k": 1}, {"v": 1.0})
        assert cache.get("certificate", {"k": 1}) == {"v": 1.0}
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
        names = {p.name for p in directory.iterdir()}
        assert {"cache.sqlite3", "cache.sqlite3-wal", "cache.sqlite3-shm", "cache.secret"} <= names
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in directory.iterdir())
        assert len((directory / "cache.secret").read_bytes()) == 32
        del cache
        os.chmod(directory, 0o755)
        for p in directory.iterdir():
            os.chmod(p, 0o644)
        (directory / "unrelated.txt").write_text("not the cache's")  # left alone
        assert LipschitzCache(directory).get("certificate", {"k": 1}) == {"v": 1.0}
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in directory.glob("cache.*"))
        assert stat.S_IMODE((directory / "unrelated.txt").stat().st_mode) == 0o644
    finally:
        os.umask(old)


def test_a_directory_open_to_others_disables_the_cache(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # sticky and world-writable, like /tmp: never chmod-ed, never trusted
    cache = LipschitzCache(shared)
    with pytest.warns(RuntimeWarning, match="disabled"):
        cache.put("certificate", {"k": 1}, {"v": 1.0})
    assert cache.get("certificate", {"k": 1}) is None and len(cache) == 0
    assert not list(shared.iterdir())


def test_expired_rows_are_never_returned_and_are_purged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1_000_000.0]
    monkeypatch.setattr(cache_module, "_now", lambda: clock[0])
    cache = LipschitzCache(tmp_path, ttl_seconds=100.0)
    cache.put("certificate", {"k": "old"}, {"v": 1.0})
    clock[0] += 60
    cache.put("certificate", {"k": "new"}, {"v": 2.0})
    assert cache.get("certificate", {"k": "old"}) == {"v": 1.0} and len(cache) == 2
    clock[0] += 50  # "old" is 110 s old, "new" 50 s
    assert cache.get("certificate", {"k": "old"}) is None and cache.expired == 1
    assert cache.get("certificate", {"k": "new"}) == {"v": 2.0}
    clock[0] += 60
    assert len(cache) == 0  # expired rows are not counted …
    cache.put("certificate", {"k": "newest"}, {"v": 3.0})
    db = sqlite3.connect(tmp_path / "cache.sqlite3")
    (rows,) = db.execute("SELECT COUNT(*) FROM entries").fetchone()
    db.close()
    assert rows == 1  # … and a write purges them


def test_over_the_size_limit_the_oldest_rows_are_evicted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1_000_000.0]
    monkeypatch.setattr(cache_module, "_now", lambda: clock[0])
    value = {"payload": "x" * 700}
    row = len(_canonical(value)) + 256
    cache = LipschitzCache(tmp_path, max_bytes=3 * row + 10)
    for i in range(6):
        clock[0] += 1
        cache.put("certificate", {"i": i}, value)
        assert cache.stored_bytes() <= cache.max_bytes
    assert [cache.get("certificate", {"i": i}) is not None for i in range(6)] == [False] * 3 + [True] * 3


def test_limits_follow_the_environment_and_are_validated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = LipschitzCache(tmp_path)
    assert cache.max_bytes == int(DEFAULT_MAX_MB * 2**20) and cache.ttl_seconds == DEFAULT_TTL_DAYS * 86400
    monkeypatch.setenv("PRIVLENS_CACHE_MAX_MB", "0.5")
    monkeypatch.setenv("PRIVLENS_CACHE_TTL_DAYS", "1.5")
    cache = LipschitzCache(tmp_path)
    assert cache.max_bytes == 2**19 and cache.ttl_seconds == 1.5 * 86400
    monkeypatch.setenv("PRIVLENS_CACHE_TTL_DAYS", "forever")
    with pytest.raises(ValueError, match=r"PRIVLENS_CACHE_TTL_DAYS.*'forever'"):
        LipschitzCache(tmp_path)
    monkeypatch.setenv("PRIVLENS_CACHE_TTL_DAYS", "-1")
    with pytest.raises(ValueError, match=r"PRIVLENS_CACHE_TTL_DAYS must be in \(0, ∞\)"):
        LipschitzCache(tmp_path)
    with pytest.raises(ValueError, match="max_bytes"):
        LipschitzCache(tmp_path, max_bytes=0, ttl_seconds=1.0)


def test_rotating_the_secret_turns_every_entry_into_a_miss(tmp_path: Path) -> None:
    cache, other = LipschitzCache(tmp_path), LipschitzCache(tmp_path)  # e.g. two processes
    cache.put("certificate", {"k": 1}, {"v": 1.0})
    assert other.get("certificate", {"k": 1}) == {"v": 1.0}
    old = (tmp_path / "cache.secret").read_bytes()
    rotate_secret(tmp_path)
    assert (tmp_path / "cache.secret").read_bytes() != old
    assert stat.S_IMODE((tmp_path / "cache.secret").stat().st_mode) == 0o600
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a miss, not a forgery
        assert cache.get("certificate", {"k": 1}) is None and other.get("certificate", {"k": 1}) is None
    assert cache.rejected == other.rejected == 0
    other.put("certificate", {"k": 1}, {"v": 2.0})  # the other instance writes with the new secret
    assert cache.get("certificate", {"k": 1}) == {"v": 2.0}


def test_entries_are_bound_to_the_secret(tmp_path: Path) -> None:
    """Copying a database next to another installation's secret gives misses, never hits."""
    LipschitzCache(tmp_path / "a").put("certificate", {"k": 1}, {"v": 1.0})
    (tmp_path / "b").mkdir(mode=0o700)
    for name in ("cache.sqlite3", "cache.sqlite3-wal"):
        (tmp_path / "b" / name).write_bytes((tmp_path / "a" / name).read_bytes())
    assert LipschitzCache(tmp_path / "b").get("certificate", {"k": 1}) is None


def test_corrupt_database_is_moved_aside_and_rebuilt(tmp_path: Path) -> None:
    """A file that is not a database (or whose pages are damaged while a connection is open) is
    renamed *.corrupt-<time>, reported, and a new database serves later calls and len()."""
    (tmp_path / "cache.sqlite3").write_bytes(b"this is not a database" * 100)
    cache = LipschitzCache(tmp_path)
    with pytest.warns(RuntimeWarning, match="corrupt.*moved aside"):
        assert cache.get("certificate", {"k": 1}) is None
    assert cache.recovered == 1 and len(list(tmp_path.glob("cache.sqlite3.corrupt-*"))) == 1
    cache.put("certificate", {"k": 1}, {"v": 1.0})
    assert cache.get("certificate", {"k": 1}) == {"v": 1.0} and len(cache) == 1
    # damage a live database under an open connection
    for i in range(50):
        cache.put("certificate", {"k": i}, {"v": float(i), "pad": "y" * 2000})
    db = sqlite3.connect(tmp_path / "cache.sqlite3")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    with open(tmp_path / "cache.sqlite3", "r+b") as fh:
        fh.seek(0)
        fh.write(b"\xff" * 100)  # the header
    with pytest.warns(RuntimeWarning, match="corrupt"):
        assert len(cache) == 0
    assert len(list(tmp_path.glob("cache.sqlite3.corrupt-*"))) == 2
    cache.put("certificate", {"k": 1}, {"v": 3.0})
    assert LipschitzCache(tmp_path).get("certificate", {"k": 1}) == {"v": 3.0}
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in tmp_path.glob("cache.*"))


def test_an_older_database_holding_embeddings_is_dropped_and_scrubbed(tmp_path: Path) -> None:
    """CACHE_VERSION 2 stored φ with its centre: the first open drops that table and vacuums the
    file, so the old bytes are gone, not just unlinked."""
    marker = "0.987654321987"
    db = sqlite3.connect(tmp_path / "cache.sqlite3")
    db.execute("CREATE TABLE entries (id TEXT PRIMARY KEY, kind TEXT NOT NULL, key TEXT NOT NULL, "
               "value TEXT NOT NULL, version INTEGER NOT NULL, checksum TEXT NOT NULL)")
    for i in range(20):
        db.execute("INSERT INTO entries VALUES (?,?,?,?,?,?)",
                   (str(i), "phi", "{}", json.dumps({"center": [float(marker)] * 50, "i": i}), 2, "x"))
    db.commit()
    db.close()
    assert marker.encode() in (tmp_path / "cache.sqlite3").read_bytes()
    cache = LipschitzCache(tmp_path)
    assert len(cache) == 0
    cache.put("certificate", {"k": 1}, {"v": 1.0})
    assert marker.encode() not in _all_bytes(tmp_path)
    with sqlite3.connect(cache.path) as check:  # rebuilt with incremental vacuum (2), like a new file
        assert check.execute("PRAGMA auto_vacuum").fetchone()[0] == 2


def test_default_directory_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVLENS_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert default_cache_dir() == tmp_path / "elsewhere"
    monkeypatch.delenv("PRIVLENS_CACHE_DIR")
    assert default_cache_dir().parts[-2:] == (".cache", "lipschitz")


def _writer(directory: str, worker: int, n: int) -> None:
    cache = LipschitzCache(directory)
    for i in range(n):
        cache.put("certificate", {"worker": worker, "i": i}, {"upper": float(worker * 1000 + i)})
        cache.get("certificate", {"worker": 1 - worker, "i": i})


def test_concurrent_processes_share_one_cache(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w, 60)) for w in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    cache = LipschitzCache(tmp_path)
    for w in (0, 1):
        for i in range(60):
            assert cache.get("certificate", {"worker": w, "i": i}) == {"upper": float(w * 1000 + i)}
    assert cache.rejected == 0


def test_batch_on_two_workers_matches_sequential_and_fills_the_cache(tmp_path: Path) -> None:
    net = random_net(3, (5, 6, 4))
    centers = np.random.default_rng(0).standard_normal((5, 5))
    seq = certify_batch(net, centers, 0.3, workers=1, progress=False)
    par = certify_batch(net, centers, 0.3, Certifier(time_limit=None, cache=tmp_path), workers=2,
                        progress=False)
    assert [c.upper for c in par] == pytest.approx([c.upper for c in seq], rel=1e-9)
    assert all(c.exact for c in par)
    cache = LipschitzCache(tmp_path)
    hits_before = cache.hits
    again = certify_batch(net, centers, 0.3, Certifier(time_limit=None, cache=cache), workers=2,
                          progress=False)
    assert cache.hits - hits_before == len(centers)
    assert [asdict(c) for c in again] == [asdict(c) for c in par]
    lp = certify_batch(net, centers, 0.3, Certifier(kind="lp"), workers=1, progress=False)
    assert all(a.upper >= b.upper * (1 - 1e-7) for a, b in zip(lp, seq, strict=True))
    with pytest.raises(ValueError, match="shape"):
        certify_batch(net, np.zeros((2, 3)), 0.3, progress=False)
    with pytest.raises(TypeError, match=r"Certifier\(kind='exact'"):  # a kind string is not a Certifier
        certify_batch(net, centers, 0.3, "lp", progress=False)
    with pytest.raises(TypeError, match=r"\['cache', 'solver'\].*one Certifier"):  # nor are its keywords
        certify_batch(net, centers, 0.3, solver="highs", cache=tmp_path, progress=False)


def test_the_cli_reaches_rotation_purge_and_info(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from privcore.cli import app

    cache = LipschitzCache(tmp_path)
    cache.put("certificate", {"k": 1}, {"v": 1.0})
    runner = CliRunner()
    out = runner.invoke(app, ["cache", "info", "--dir", str(tmp_path)])
    assert out.exit_code == 0 and "rows        1" in out.output
    out = runner.invoke(app, ["cache", "rotate-secret", "--dir", str(tmp_path)])
    assert out.exit_code == 0 and cache.get("certificate", {"k": 1}) is None and len(cache) == 0
    assert runner.invoke(app, ["cache", "purge", "--dir", str(tmp_path)]).exit_code == 0


def test_a_busy_database_is_waited_for_not_reported_empty(tmp_path: Path) -> None:
    """SQLite can refuse at once with "database is locked" (no busy handler where waiting could
    deadlock), e.g. while killed workers of a batch still write: the cache retries with backoff
    instead of answering with its fallback; a database that stays locked still falls back, warned."""
    import sqlite3

    cache = LipschitzCache(tmp_path)
    calls = []

    def flaky(conn: object, secret: bytes) -> int:
        calls.append(1)
        if len(calls) <= 2:
            raise sqlite3.OperationalError("database is locked")
        return 7

    assert cache._run(flaky, what="count", fallback=0) == 7 and len(calls) == 3

    def locked(conn: object, secret: bytes) -> int:
        raise sqlite3.OperationalError("database is locked")

    with pytest.warns(RuntimeWarning, match="count failed .database is locked"):
        assert cache._run(locked, what="count", fallback=0) == 0


def _hold_write_lock(cache: LipschitzCache) -> sqlite3.Connection:
    holder = sqlite3.connect(cache.path, timeout=5, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    return holder


def test_opening_the_cache_never_waits_for_a_writer(tmp_path: Path) -> None:
    """Readers in WAL mode run beside a writer: a fresh handle (a new process, the driver after a
    killed batch) reads while another process holds the write lock, never falling back to empty."""
    LipschitzCache(tmp_path).put("certificate", {"k": 1}, {"v": 1.0})
    holder = _hold_write_lock(LipschitzCache(tmp_path))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fresh = LipschitzCache(tmp_path)
            assert len(fresh) == 1 and fresh.get("certificate", {"k": 1}) == {"v": 1.0}
    finally:
        holder.execute("ROLLBACK")


_INTERRUPTED_WRITER = """
import sys, time
sys.path.insert(0, {root!r})
from privcore.lipschitz.cache import LipschitzCache
cache = LipschitzCache({directory!r})
len(cache)
print("ready", flush=True)
try:
    sys.stdin.readline()
    cache.put("certificate", {{"k": 2}}, {{"v": 2.0}})
    print("written", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
time.sleep(120)  # alive, like a Ray worker after a cancelled task
"""


def test_a_writer_interrupted_while_waiting_for_the_lock_releases_it(tmp_path: Path) -> None:
    """A cancelled Ray task gets a KeyboardInterrupt; raised the instant BEGIN returns after a busy
    wait, it must not leave the transaction (the database's write lock) open in a live worker."""
    import signal
    import subprocess
    import sys

    cache = LipschitzCache(tmp_path)
    cache.put("certificate", {"k": 1}, {"v": 1.0})
    script = _INTERRUPTED_WRITER.format(root=str(Path(__file__).resolve().parents[1]),
                                        directory=str(tmp_path))
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        holder = _hold_write_lock(cache)
        child.stdin.write("go\n")
        child.stdin.flush()
        time.sleep(0.5)  # the child waits in BEGIN IMMEDIATE's busy handler
        child.send_signal(signal.SIGINT)
        time.sleep(0.3)
        holder.execute("COMMIT")  # the child's BEGIN now succeeds, and the interrupt is raised
        assert child.stdout.readline().strip() in ("interrupted", "written")
        probe = sqlite3.connect(cache.path, timeout=2, isolation_level=None)
        probe.execute("BEGIN IMMEDIATE")  # "database is locked" if the child kept the transaction
        probe.execute("ROLLBACK")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            cache.put("certificate", {"k": 3}, {"v": 3.0})
        assert cache.get("certificate", {"k": 3}) == {"v": 3.0}
    finally:
        child.kill()
        child.wait()
