"""Persistent certificate/φ cache: round trips, corruption and staleness are never trusted,
concurrent processes, and batch certification on two cores."""

from __future__ import annotations

import json
import multiprocessing as mp
import sqlite3
import warnings
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from privcore.lipschitz import (
    Certifier,
    LipschitzCache,
    ReluNetwork,
    cached_phi,
    certify_batch,
    default_cache_dir,
)
from privcore.lipschitz.cache import CACHE_VERSION
from privcore.lipschitz.certifier import certificate_from_dict, certificate_key


def random_net(seed: int, dims: tuple[int, ...]) -> ReluNetwork:
    rng = np.random.default_rng(seed)
    ws = [rng.standard_normal((dims[i + 1], dims[i])) * np.sqrt(2.0 / dims[i]) for i in range(len(dims) - 1)]
    bs = [rng.standard_normal(dims[i + 1]) * 0.3 for i in range(len(dims) - 1)]
    return ReluNetwork.from_arrays(ws, bs)


def test_round_trip_is_exact_and_keys_are_separate(tmp_path: Path) -> None:
    cache = LipschitzCache(tmp_path)
    key = {"model": "abc", "center_sha256": "0" * 64, "radius": 0.1}
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
    key = certificate_key(net.digest, center, 0.3, kind="exact", input_norm="linf", output_norm="l1")
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
    if damage == "value":  # a lie that keeps valid JSON: φ inflated, checksum not updated
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
    again = cached_phi(net, z, certifier=cert, cache=tmp_path, **kw)
    assert again == good and again.phi != 99.0
    assert sum(cert.stats.values()) > 0  # recomputed, not read


def test_unreadable_database_is_a_miss_not_an_error(tmp_path: Path) -> None:
    (tmp_path / "cache.sqlite3").write_bytes(b"this is not a database" * 100)
    cache = LipschitzCache(tmp_path)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert cache.get("certificate", {"k": 1}) is None
        cache.put("certificate", {"k": 1}, {"v": 1.0})  # best effort, no exception


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
    par = certify_batch(net, centers, 0.3, workers=2, progress=False, cache=tmp_path)
    assert [c.upper for c in par] == pytest.approx([c.upper for c in seq], rel=1e-9)
    assert all(c.exact for c in par)
    cache = LipschitzCache(tmp_path)
    hits_before = cache.hits
    again = certify_batch(net, centers, 0.3, workers=2, progress=False, cache=cache)
    assert cache.hits - hits_before == len(centers)
    assert [asdict(c) for c in again] == [asdict(c) for c in par]
    lp = certify_batch(net, centers, 0.3, certifier="lp", workers=1, progress=False)
    assert all(a.upper >= b.upper * (1 - 1e-7) for a, b in zip(lp, seq, strict=True))
    with pytest.raises(ValueError, match="shape"):
        certify_batch(net, np.zeros((2, 3)), 0.3, progress=False)
