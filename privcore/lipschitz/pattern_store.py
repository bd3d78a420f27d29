"""Pattern tables held by this process: enumerated here from the weights; region labels resolved
here or re-derived here from stored LP-duality certificates.

A threshold table (every activation pattern with ‖J_D‖ > τ) and the region memo the searches fill
decide passes: a table missing a pattern, or marking a realised region empty, would let a ball
whose L exceeds Δp pass PTR's test. So the table is always enumerated in this process from the
weights (:func:`threshold_pattern_table`, about a second for a shipped obfuscator; codes and norms
are never stored), and a region label is trusted only when this process computed it with its own
LPs or re-derived it from a certificate (docs/TRUST.md). :func:`realised_pattern_table` is the
entry point: the table of patterns above τ with its regions resolved on demand;
:func:`precompute_pattern_tables` builds them in a warm-up thread.

Persistence (:mod:`privcore.lipschitz.region_certs`): once a table is fully resolved by
:func:`resolve_regions` with ``save=True`` (the warm-up does this in the background), a dual vector
per label is put into the Lipschitz cache (kind ``"pattern_certs"``, key: model digest, τ, norms,
table domain, format; HMAC-authenticated like every row, :func:`store_certificates`). A later
process enumerates its table, reads that row, and pre-fills the memo with exactly the labels whose
certificates verify against the rows it computes from the weights (numpy sums, tens of ms); the
rest stay UNKNOWN and are resolved by LPs as without a store. A row that cannot be parsed is
reported and deleted; certificates that do not verify are reported and ignored. No store
(:func:`use_certificate_store` with False, or no cache database yet) changes nothing but speed.
"""

from __future__ import annotations

import atexit
import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from privcore._inflight import MISSING, InFlight
from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.norms import DEFAULT_NORMS, Norms
from privcore.lipschitz.patterns import (
    _BOX_WORK,
    _CHUNK,
    _GLOBAL,
    _LOCK,
    _THRESHOLD,
    TABLE_DOMAIN,
    PatternTable,
    RegionMemo,
    threshold_pattern_table,
)
from privcore.lipschitz.region_certs import CERT_FORMAT, RegionCertificates, certify, verify
from privcore.lipschitz.regions import _region_rows_batch

__all__ = [
    "CERT_KIND",
    "clear_pattern_tables",
    "load_certificates",
    "precompute_pattern_tables",
    "realised_pattern_table",
    "region_certificate_key",
    "resolve_regions",
    "shipped_obfuscators",
    "store_certificates",
    "threshold_table_due",
    "use_certificate_store",
]

_REALISED: OrderedDict[tuple, PatternTable | None] = OrderedDict()
_BUILDING = InFlight()  # a second caller of a table being built waits for it
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

    Held in memory per model, norms and threshold, and enumerated here from the weights; region
    labels with a stored certificate that verifies here are filled in at once
    (:func:`load_certificates`). ``build=False`` only looks it up (None when this process has not
    built it yet)."""
    key = (net.digest, norms, float(threshold))

    def lookup() -> Any:
        with _LOCK:
            if key in _REALISED:
                _REALISED.move_to_end(key)
                return _REALISED[key]
        return MISSING if build else None

    def compute() -> PatternTable | None:
        above = threshold_pattern_table(net, threshold, norms)
        table = None
        if above is not None:
            table = PatternTable(codes=above.codes, norms=above.norms, n_hidden=above.n_hidden,
                                 floor=above.floor, regions=RegionMemo(above.codes.size, net.in_dim, key=key),
                                 lower=above.lower)
            load_certificates(net, table)
        with _LOCK:
            table = _REALISED.setdefault(key, table)
            while len(_REALISED) > 64:
                _REALISED.popitem(last=False)
        return table

    return _BUILDING.run(key, lookup, compute)


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
    norms: Norms = DEFAULT_NORMS, save: bool = True, pause: Callable[[], object] | None = None,
) -> list[str]:
    """Make the realised-pattern table of every shipped obfuscator (at its card's Δp) ready in this
    process: enumerated from the weights (about a second each), with the labels of stored
    certificates that verify; then the regions of the tables ``resolve`` names
    (``"dataset/variant"``, in that order; True: all) are resolved as well (seconds to tens of
    seconds per model when nothing was stored), so that model's certifications need no region LP,
    and with ``save`` their certificates are stored for the next process (as many LPs again, in
    this thread). For a background warm-up thread: the searches share the tables in memory;
    ``pause()`` is called before each model and each batch of regions (the caller may block there
    while the work in front of the user runs). Returns the models enumerated."""
    done = {}
    for name, net, dp in shipped_obfuscators(models_dir):
        if pause is not None:
            pause()
        table = realised_pattern_table(net, dp, norms)
        if table is not None:
            done[name] = (net, table)
    me = threading.current_thread()
    _RESOLVING.add(me)
    try:
        for name in done if resolve is True else (resolve or ()):
            if name in done and not _STOP.is_set():
                resolve_regions(done[name][0], done[name][1], norms, save=save, pause=pause)
    finally:
        _RESOLVING.discard(me)
    return list(done)


def clear_pattern_tables() -> None:
    """Forget every pattern table held in memory (stored certificates stay where they are)."""
    with _LOCK:
        _GLOBAL.clear()
        _BOX_WORK.clear()
        _THRESHOLD.clear()
        _REALISED.clear()
        _LOOKUPS.clear()
        _SETTLED.clear()


def resolve_regions(net: ReluNetwork, table: PatternTable, norms: Norms, *, save: bool = False,
                    pause: Callable[[], object] | None = None) -> None:
    """Resolve every still-unknown region of ``table`` (emptiness and bounding box; about 2d + 1
    LPs each): what the searches otherwise do on demand. With ``save``, a table that is then fully
    resolved and whose labels did not all come from the store gets its certificates stored
    (:func:`store_certificates`: about as many LPs again; for background threads only). ``pause()``
    is called before each batch of regions."""
    memo = table.regions
    if memo is None:
        return
    todo = np.flatnonzero(table.state == RegionMemo.UNKNOWN)
    for s0 in range(0, todo.size, _CHUNK):
        if pause is not None:
            pause()
        sel = todo[s0 : s0 + _CHUNK]
        G, h = _region_rows_batch(net, table.codes[sel])
        for k, p in enumerate(table.positions[sel]):
            if _STOP.is_set():  # the interpreter is exiting
                return
            memo.resolve(int(p), G[k], h[k])
    if save and table.index is None:
        with _LOCK:
            settled = memo.key in _SETTLED
        if not settled:
            store_certificates(net, table)


# -- stored certificates of region labels (privcore.lipschitz.region_certs) --------------------------

#: the cache kind of a table's region certificates
CERT_KIND = "pattern_certs"
#: where certificates are read and written: True (the default Lipschitz cache, ``$PRIVLENS_CACHE_DIR``),
#: a directory or :class:`~privcore.lipschitz.cache.LipschitzCache`, or None/False (none)
_STORE: Any = True
#: tables (memo keys) whose labels all came from the store or were stored by this process
_SETTLED: set[tuple] = set()


def use_certificate_store(cache: Any) -> Any:
    """Read and write region certificates in ``cache`` (as :func:`~privcore.lipschitz.cache.resolve_cache`
    takes it; None/False: no store, every label is resolved by LPs). Returns the previous setting."""
    global _STORE
    previous, _STORE = _STORE, cache
    return previous


_DEFAULT_STORES: dict[str, Any] = {}


def _store():
    """The store now: the default cache of ``$PRIVLENS_CACHE_DIR`` (one instance per directory,
    so a disabled cache warns once), or what :func:`use_certificate_store` set."""
    from privcore.lipschitz.cache import LipschitzCache, default_cache_dir, resolve_cache

    if _STORE is True:
        directory = str(default_cache_dir())
        with _LOCK:
            return _DEFAULT_STORES.setdefault(directory, LipschitzCache(directory))
    return resolve_cache(_STORE)


def region_certificate_key(digest: str, threshold: float, norms: Norms) -> dict:
    """The cache key of a table's region certificates (stored only as an HMAC, like every key)."""
    return {"model": digest, "threshold": float(threshold), "input_norm": norms.input,
            "output_norm": norms.output, "domain": TABLE_DOMAIN, "format": CERT_FORMAT}


def _rows_of(net: ReluNetwork):
    return lambda codes: _region_rows_batch(net, codes)


def load_certificates(net: ReluNetwork, table: PatternTable) -> int:
    """Fill ``table``'s unknown region labels from the store: only those whose certificate verifies
    against rows computed here (:func:`~privcore.lipschitz.region_certs.verify`). A row that is
    not a certificate set of this format is reported and deleted; certificates that fail are
    reported and ignored (their regions stay UNKNOWN). Returns the labels filled."""
    memo = table.regions
    store = _store()
    if memo is None or memo.key is None or store is None or not store.path.exists():
        return 0
    digest, norms, threshold = memo.key
    key = region_certificate_key(digest, threshold, norms)
    value = store.get(CERT_KIND, key)
    if value is None:
        return 0
    try:
        certs = RegionCertificates.from_value(value, d=net.in_dim, k=net.n_hidden)
    except (ValueError, TypeError):
        warnings.warn(f"Lipschitz cache {store.path}: a {CERT_KIND!r} entry is not a certificate set "
                      "of this format; deleted, its regions are resolved here", RuntimeWarning, stacklevel=2)
        store.delete(CERT_KIND, key)
        return 0
    got = verify(certs, table.codes, _rows_of(net), net.in_dim)
    with memo.lock:
        unknown = memo.state == RegionMemo.UNKNOWN
        empty, boxed = got.empty & unknown, got.boxed & unknown
        memo.state[empty] = RegionMemo.EMPTY
        memo.lower[boxed], memo.upper[boxed] = got.lower[boxed], got.upper[boxed]
        memo.state[boxed] = RegionMemo.BOXED
        complete = not np.any(memo.state == RegionMemo.UNKNOWN)
    if complete:
        with _LOCK:
            _SETTLED.add(memo.key)
    if got.rejected:
        warnings.warn(f"Lipschitz cache {store.path}: {got.rejected} region certificates did not verify "
                      "and were ignored (their regions are resolved here; was the entry edited?)",
                      RuntimeWarning, stacklevel=2)
    return int(empty.sum() + boxed.sum())


def store_certificates(net: ReluNetwork, table: PatternTable) -> RegionCertificates | None:
    """Compute certificates of every resolved label of ``table`` (LPs: about one per EMPTY and 2d
    per BOXED region; stops early at interpreter exit) and put them into the store. None (nothing
    stored) when there is no store or the table is not a fully resolved threshold table."""
    memo = table.regions
    store = _store()
    if memo is None or memo.key is None or table.index is not None or store is None:
        return None
    with memo.lock:
        state = memo.state.copy()
    if np.any(state == RegionMemo.UNKNOWN):
        return None
    certs = certify(table.codes, state, _rows_of(net), stop=_STOP.is_set)
    if _STOP.is_set():
        return None
    digest, norms, threshold = memo.key
    store.put(CERT_KIND, region_certificate_key(digest, threshold, norms),
              certs.to_value(d=net.in_dim, k=net.n_hidden))
    with _LOCK:
        _SETTLED.add(memo.key)
    return certs
