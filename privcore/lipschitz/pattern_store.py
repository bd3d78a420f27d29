"""Pattern tables held by this process: built here from the weights, never read from disk.

A threshold table (every activation pattern with ‖J_D‖ > τ) and the region memo the searches fill
decide passes: a table missing a pattern, or marking a realised region empty, would let a ball
whose L exceeds Δp pass PTR's test. So a table is trusted only when this process enumerated it
from the weights (:func:`threshold_pattern_table`, about a second for a shipped obfuscator) and
resolved its regions with its own LPs; it lives in memory, per model, norms and τ, and nothing
of it is written to or read from a models directory or the cache (docs/TRUST.md).
:func:`realised_pattern_table` is the entry point: the table of patterns above τ with its
regions resolved on demand; :func:`precompute_pattern_tables` builds them in a warm-up thread.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

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
    "clear_pattern_tables",
    "precompute_pattern_tables",
    "realised_pattern_table",
    "resolve_regions",
    "shipped_obfuscators",
    "threshold_table_due",
]

_REALISED: OrderedDict[tuple, PatternTable | None] = OrderedDict()
#: set at interpreter exit: background resolution stops between two region LPs, so no daemon thread is
#: inside HiGHS while the process finalises (which aborts it: "terminate called without an active
#: exception")
_STOP = threading.Event()
_RESOLVING: set[threading.Thread] = set()


@atexit.register
def _stop_background_resolution() -> None:
    _STOP.set()
    for thread in list(_RESOLVING):
        thread.join(timeout=10.0)


def realised_pattern_table(
    net: ReluNetwork, threshold: float, norms: Norms, *, build: bool = True
) -> PatternTable | None:
    """:func:`threshold_pattern_table` with a region memo (:class:`RegionMemo`) that the searches
    fill on demand: a pattern's region is tested for emptiness and boxed only when a search first
    reaches it, so the first φ costs the enumeration above the threshold and the LPs of the
    patterns near its own embedding, not an LP sweep of every pattern.

    Held in memory per model, norms and threshold, and built here from the weights: never read
    from disk (module docstring). ``build=False`` only looks it up (None when this process has
    not built it yet)."""
    key = (net.digest, norms, float(threshold))
    with _LOCK:
        if key in _REALISED:
            _REALISED.move_to_end(key)
            return _REALISED[key]
    if not build:
        return None
    above = threshold_pattern_table(net, threshold, norms)
    table = None
    if above is not None:
        table = PatternTable(codes=above.codes, norms=above.norms, n_hidden=above.n_hidden,
                             floor=above.floor, regions=RegionMemo(above.codes.size, net.in_dim, key=key))
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
    models_dir: str | os.PathLike | None = None, *, resolve: bool | Sequence[str] = False,
    norms: Norms = DEFAULT_NORMS,
) -> list[str]:
    """Make the realised-pattern table of every shipped obfuscator (at its card's Δp) ready in this
    process: enumerated from the weights (about a second each); then the regions of the tables
    ``resolve`` names (``"dataset/variant"``, in that order; True: all) are resolved as well
    (seconds to tens of seconds per model), so that model's certifications need no region LP.
    For a background warm-up thread: the searches share the tables in memory. Returns the models
    enumerated."""
    done = {}
    for name, net, dp in shipped_obfuscators(models_dir):
        table = realised_pattern_table(net, dp, norms)
        if table is not None:
            done[name] = (net, table)
    me = threading.current_thread()
    _RESOLVING.add(me)
    try:
        for name in done if resolve is True else (resolve or ()):
            if name in done and not _STOP.is_set():
                resolve_regions(done[name][0], done[name][1], norms)
    finally:
        _RESOLVING.discard(me)
    return list(done)


def clear_pattern_tables() -> None:
    """Forget every pattern table held in memory."""
    with _LOCK:
        _GLOBAL.clear()
        _THRESHOLD.clear()
        _REALISED.clear()
        _LOOKUPS.clear()


def resolve_regions(net: ReluNetwork, table: PatternTable, norms: Norms) -> None:
    """Resolve every still-unknown region of ``table`` (emptiness and bounding box; about 2d + 1
    LPs each): what the searches otherwise do on demand."""
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
            if _STOP.is_set():  # the interpreter is exiting
                return
            memo.resolve(int(p), G[k], h[k])
