"""Persistence of pattern tables: the Lipschitz disk cache, and complete tables shipped with the models.

A threshold table and what is resolved of its regions so far live in the Lipschitz disk cache
(:mod:`privcore.lipschitz.cache`; keyed by model digest, τ and norms, authenticated); a complete
table can ship with the models (``python -m privcore tables build`` writes
``models/pattern-tables/``), so a later process, or a fresh clone, loads it in milliseconds. A
stored table that fails any check is rebuilt, never trusted. :func:`realised_pattern_table` is the
entry point: the table of patterns above τ with their regions resolved on demand.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from pathlib import Path

import numpy as np

from privcore._atomic import atomic_write_text
from privcore.lipschitz.codes import codes_from_b64, codes_to_b64
from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.norms import DEFAULT_NORMS, Norms
from privcore.lipschitz.patterns import (
    _CHUNK,
    _GLOBAL,
    _LOCK,
    _THRESHOLD,
    PatternTable,
    RegionMemo,
    threshold_pattern_table,
)
from privcore.lipschitz.regions import _region_rows_batch

__all__ = [
    "SHIPPED_TABLE_VERSION",
    "TABLE_FORMAT",
    "clear_pattern_tables",
    "pattern_table_key",
    "precompute_pattern_tables",
    "realised_pattern_table",
    "resolve_regions",
    "shipped_obfuscators",
    "shipped_table_path",
    "table_from_dict",
    "table_to_dict",
    "threshold_table_due",
    "write_shipped_table",
]

#: version of the stored pattern-table format and of the enumeration behind it: bump it whenever
#: either changes, so older stored tables become stale and are rebuilt
TABLE_FORMAT = 1
#: version mixed into a shipped table file's checksum. Shipped tables are part of the repository, like
#: the weights they describe, so they carry their own version rather than the disk cache's
#: CACHE_VERSION: a change to the cache's format must not invalidate (or re-sign) the model files
SHIPPED_TABLE_VERSION = 2
#: a lazily grown region memo is written back to disk at most this often (seconds), once it holds
#: new entries
_SAVE_EVERY_S = 5.0
_REALISED: OrderedDict[tuple, PatternTable | None] = OrderedDict()
_STORES: dict[str, object] = {}


def _table_store():
    """The on-disk store of pattern tables: the Lipschitz cache's default directory
    (:func:`privcore.lipschitz.cache.default_cache_dir`), or None when ``$PRIVLENS_PATTERN_TABLES``
    is ``off``."""
    from privcore.lipschitz.cache import LipschitzCache, default_cache_dir

    if os.environ.get("PRIVLENS_PATTERN_TABLES", "").lower() in ("off", "0", "no"):
        return None
    directory = str(default_cache_dir())
    with _LOCK:
        store = _STORES.get(directory)
        if store is None:
            store = _STORES[directory] = LipschitzCache(directory)
    return store


def pattern_table_key(net: ReluNetwork, threshold: float, norms: Norms) -> dict:
    """Disk-cache key of a realised-pattern table: network digest, threshold, norms, format."""
    return {"model": net.digest, "threshold": float(threshold), "input_norm": norms.input,
            "output_norm": norms.output, "format": TABLE_FORMAT}


def _b64(a: np.ndarray, dtype: str) -> str:
    import base64

    return base64.b64encode(np.ascontiguousarray(a, dtype=dtype).tobytes()).decode("ascii")


def _unb64(text: str, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    import base64

    raw = base64.b64decode(text.encode("ascii"), validate=True)
    a = np.frombuffer(raw, dtype=dtype)
    if a.size != int(np.prod(shape)):
        raise ValueError("array of the wrong size")
    return a.reshape(shape).astype(dtype.lstrip("<"), copy=True)


def table_to_dict(table: PatternTable, *, in_dim: int) -> dict:
    """A JSON-able form of a threshold table and of its region memo (what is resolved so far)."""
    memo = table.regions
    if memo is None or table.index is not None:
        raise ValueError("only a whole threshold table with its region memo is stored")
    with memo.lock:
        state = memo.state.copy()
        boxed = state == RegionMemo.BOXED
        lower, upper = memo.lower[boxed], memo.upper[boxed]
    return {"format": TABLE_FORMAT, "n_hidden": int(table.n_hidden), "in_dim": int(in_dim),
            "floor": float(table.floor), "count": int(table.codes.size),
            "codes": codes_to_b64(table.codes, table.n_hidden), "norms": _b64(table.norms, "<f8"),
            "state": _b64(state, "i1"),
            "box_lower": _b64(lower, "<f8"), "box_upper": _b64(upper, "<f8")}


def table_from_dict(d: dict, net: ReluNetwork, threshold: float, *, key: tuple | None = None) -> PatternTable:
    """Inverse of :func:`table_to_dict`, checked against ``net`` and ``threshold``: raises
    ValueError on anything inconsistent (format, sizes, code range, duplicate codes, norms not
    sorted or not above the threshold, non-finite or inverted boxes)."""
    if d.get("format") != TABLE_FORMAT or d.get("n_hidden") != net.n_hidden or d.get("in_dim") != net.in_dim:
        raise ValueError("stored table of another format or network shape")
    if d.get("floor") != float(threshold):
        raise ValueError("stored table of another threshold")
    n, dim = int(d["count"]), net.in_dim
    codes = codes_from_b64(d["codes"], n, net.n_hidden)
    norms = _unb64(d["norms"], "<f8", (n,))
    state = _unb64(d["state"], "i1", (n,))
    if not np.all(np.isfinite(norms)) or np.any(norms <= threshold) or np.any(np.diff(norms) > 0):
        raise ValueError("stored norms not finite, not above the threshold or not sorted")
    if not np.all(np.isin(state, (RegionMemo.UNKNOWN, RegionMemo.EMPTY, RegionMemo.BOXED))):
        raise ValueError("stored region states invalid")
    boxed = state == RegionMemo.BOXED
    lower = _unb64(d["box_lower"], "<f8", (int(boxed.sum()), dim))
    upper = _unb64(d["box_upper"], "<f8", (int(boxed.sum()), dim))
    if np.isnan(lower).any() or np.isnan(upper).any() or np.any(lower > upper):
        raise ValueError("stored region boxes invalid")
    memo = RegionMemo(n, dim, key=key)
    memo.state[:] = state
    memo.lower[boxed], memo.upper[boxed] = lower, upper
    return PatternTable(codes=codes, norms=norms, n_hidden=net.n_hidden, floor=float(threshold), regions=memo)


def _save_table(net: ReluNetwork, table: PatternTable, norms: Norms, *, force: bool = False) -> None:
    """Write the table and its region memo to the disk store when it holds new entries (throttled
    to every ``_SAVE_EVERY_S`` unless ``force``). Best effort: the store is an accelerator."""
    import time

    memo = table.regions
    store = _table_store()
    if memo is None or store is None:
        return
    now = time.monotonic()
    with memo.lock:
        if not force and (memo.unsaved == 0 or now - memo.saved_at < _SAVE_EVERY_S):
            return
        memo.unsaved, memo.saved_at = 0, now
    key = pattern_table_key(net, table.floor, norms)
    store.put("pattern_table", key, table_to_dict(table, in_dim=net.in_dim))


def realised_pattern_table(
    net: ReluNetwork, threshold: float, norms: Norms, *, build: bool = True
) -> PatternTable | None:
    """:func:`threshold_pattern_table` with a region memo (:class:`RegionMemo`) that the searches
    fill on demand: a pattern's region is tested for emptiness and boxed only when a search first
    reaches it, so the first φ costs the enumeration above the threshold and the LPs of the
    patterns near its own embedding, not an LP sweep of every pattern.

    Looked up in memory (per model, norms and threshold), then in the disk cache
    (:func:`_table_store`: a later process loads the table, with everything resolved so far, in
    milliseconds), then among the tables shipped with the models (:func:`shipped_table_path`,
    written by :func:`write_shipped_table`), else built. A stored or shipped table that fails its
    checks (checksum, format, network digest, threshold, or :func:`table_from_dict`'s consistency
    checks) is ignored, and the table rebuilt: never trusted. ``build=False`` only looks it up
    (None when no table is stored or shipped for this model, norms and threshold)."""
    key = (net.digest, norms, float(threshold))
    with _LOCK:
        if key in _REALISED:
            _REALISED.move_to_end(key)
            return _REALISED[key]
    store = _table_store()
    disk_key = pattern_table_key(net, threshold, norms)
    table = None
    if store is not None:
        hit = store.get("pattern_table", disk_key)
        if hit is not None:
            try:
                table = table_from_dict(hit, net, threshold, key=key)
            except (ValueError, KeyError, TypeError):
                store.delete("pattern_table", disk_key)
                store.rejected += 1
    if table is None:
        table = _shipped_table(net, threshold, disk_key, key)
        if table is not None:
            _save_table(net, table, norms, force=True)
    if table is None and build:
        above = threshold_pattern_table(net, threshold, norms)
        if above is not None:
            table = PatternTable(codes=above.codes, norms=above.norms, n_hidden=above.n_hidden,
                                 floor=above.floor, regions=RegionMemo(above.codes.size, net.in_dim, key=key))
            _save_table(net, table, norms, force=True)
    if table is None and not build:
        return None  # not looked for yet: remember nothing, a later call may build it
    with _LOCK:
        table = _REALISED.setdefault(key, table)
        while len(_REALISED) > 64:
            _REALISED.popitem(last=False)
    return table


#: look-ups at one (model, norms, threshold) served by a box's own pattern table before the
#: threshold table is built for them all (:func:`~privcore.lipschitz.pattern_search._table_for`)
BUILD_AFTER = 8
_LOOKUPS: OrderedDict[tuple, int] = OrderedDict()


def threshold_table_due(net: ReluNetwork, threshold: float, norms: Norms) -> bool:
    """Count one more look-up at this threshold; True once more than :data:`BUILD_AFTER` have come
    (then the threshold table is worth building: the workload repeats the threshold)."""
    key = (net.digest, norms, float(threshold))
    with _LOCK:
        uses = _LOOKUPS.pop(key, 0) + 1
        _LOOKUPS[key] = uses
        while len(_LOOKUPS) > 1024:
            _LOOKUPS.popitem(last=False)
    return uses > BUILD_AFTER


def shipped_table_path(key: dict, models_dir: str | os.PathLike | None = None) -> Path:
    """Where a table shipped with the models lives: ``<models>/pattern-tables/<sha256(key)[:32]>.json``
    (``models`` = :func:`privcore._paths.models_dir`, as :mod:`privcore.pipeline`)."""
    from privcore.lipschitz.cache import _canonical

    if models_dir is None:
        from privcore._paths import models_dir as default_models_dir

        models_dir = default_models_dir()
    name = hashlib.sha256(_canonical(key).encode()).hexdigest()[:32]
    return Path(models_dir) / "pattern-tables" / f"{name}.json"


def _shipped_table(net: ReluNetwork, threshold: float, disk_key: dict, key: tuple) -> PatternTable | None:
    """The shipped table for ``disk_key`` if one exists and passes every check, else None (with a
    warning when a file exists but fails: it is ignored and the table rebuilt)."""
    import json
    import warnings

    from privcore.lipschitz.cache import _canonical, _checksum

    path = shipped_table_path(disk_key)
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
        key_json, value_json = _canonical(doc["key"]), _canonical(doc["value"])
        expected = _checksum(key_json, value_json, SHIPPED_TABLE_VERSION)
        if doc["key"] != disk_key or doc.get("checksum") != expected:
            raise ValueError("key or checksum mismatch")
        return table_from_dict(doc["value"], net, threshold, key=key)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        warnings.warn(f"shipped pattern table {path} ignored ({exc}); rebuilding it", RuntimeWarning,
                      stacklevel=3)
        return None


def write_shipped_table(
    net: ReluNetwork, threshold: float, *, norms: Norms = DEFAULT_NORMS,
    models_dir: str | os.PathLike | None = None,
) -> Path:
    """Build the complete realised-pattern table of ``net`` at ``threshold`` (every region
    resolved) and write it next to the models (:func:`shipped_table_path`), checksummed, for
    :func:`realised_pattern_table` to load on a fresh clone. Returns the path written."""
    import json

    from privcore.lipschitz.cache import _canonical, _checksum

    table = realised_pattern_table(net, threshold, norms)
    if table is None:
        raise ValueError(f"{net.describe()} has no threshold pattern table (too wide)")
    resolve_regions(net, table, norms)
    key = pattern_table_key(net, threshold, norms)
    value = table_to_dict(table, in_dim=net.in_dim)
    doc = {"key": key, "value": value,
           "checksum": _checksum(_canonical(key), _canonical(value), SHIPPED_TABLE_VERSION)}
    path = shipped_table_path(key, models_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(doc, sort_keys=True, separators=(",", ":")))
    return path


def shipped_obfuscators(models_dir: str | os.PathLike | None = None) -> list[tuple[str, ReluNetwork, float]]:
    """``(name, network, Δp)`` of every shipped obfuscator whose card has a proposed Δp, the
    dashboard's default variant (ARL-C-N) of each dataset first."""
    import warnings

    from privcore.lipschitz.network import as_network
    from privcore.nets.checkpoint import load_checkpoint

    if models_dir is None:
        from privcore._paths import models_dir as default_models_dir

        models_dir = default_models_dir()
    cards = sorted(Path(models_dir).glob("*/obfuscator-*.json"),
                   key=lambda p: (not p.stem.endswith("-ARL-C-N"), p.parent.name, p.stem))
    out = []
    for card in cards:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obf = load_checkpoint(card.with_suffix(""), kind="obfuscator")
        dp = (obf.card.get("delta_p") or {}).get("proposed")
        if dp is not None:
            out.append((f"{card.parent.name}/{card.stem.removeprefix('obfuscator-')}",
                        as_network(obf["obfuscator"]), float(dp)))
    return out


def precompute_pattern_tables(
    models_dir: str | os.PathLike | None = None, *, resolve: bool = False, norms: Norms = DEFAULT_NORMS
) -> list[str]:
    """Make the realised-pattern table of every shipped obfuscator (at its card's Δp) ready in this
    process: loaded when stored or shipped, else enumerated (seconds) and stored; with ``resolve``
    every region is resolved as well (tens of seconds per retrained model when nothing is stored).
    For a background warm-up thread: the searches share the tables in memory. Returns the models
    done."""
    done = []
    for name, net, dp in shipped_obfuscators(models_dir):
        table = realised_pattern_table(net, dp, norms)
        if table is not None:
            if resolve:
                resolve_regions(net, table, norms)
            done.append(name)
    return done


def clear_pattern_tables() -> None:
    """Forget every pattern table held in memory (the disk cache and shipped tables stay)."""
    with _LOCK:
        _GLOBAL.clear()
        _THRESHOLD.clear()
        _REALISED.clear()
        _LOOKUPS.clear()


def resolve_regions(net: ReluNetwork, table: PatternTable, norms: Norms) -> None:
    """Resolve every still-unknown region of ``table`` (emptiness and bounding box; about 2d + 1
    LPs each) and store the result: what :func:`realised_pattern_table` otherwise does on demand."""
    memo = table.regions
    if memo is None:
        return
    todo = np.flatnonzero(table.state == RegionMemo.UNKNOWN)
    if todo.size == 0:
        return
    for s0 in range(0, todo.size, _CHUNK):
        sel = todo[s0 : s0 + _CHUNK]
        G, h = _region_rows_batch(net, table.codes[sel])
        for k, p in enumerate(table.positions[sel]):
            memo.resolve(int(p), G[k], h[k])
    _save_table(net, table, norms, force=True)
