"""Stored region labels are LP-duality certificates, and only what verifies here is used.

privcore/lipschitz/region_certs.py: an EMPTY label needs a ``y ≥ 0`` with
``−yᵀh' − D‖Gᵀy‖₁ > margin`` (then the region misses the table domain X = [−D, D]^d), a box side
is the weak-duality bound ``yᵀh' + D‖±e_i − Gᵀy‖₁`` recomputed from ``y``. The checks: brute force
against a reference LP (scipy) and points sampled from the network, on tiny random nets and on a
small domain where many regions exist in ℝ^d but not in X; stored sets tampered every way an
attacker holding the cache secret could (rows written through the cache's own API, so authentic),
after which the loaded table holds only true labels and decides as a process without any store;
and a round trip on a shipped obfuscator.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import linprog

from privcore.lipschitz import region_certs as rc
from privcore.lipschitz.bounds import box_around, forward_bounds, jacobian_norms
from privcore.lipschitz.cache import LipschitzCache
from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.norms import Norms
from privcore.lipschitz.pattern_search import pattern_nearest_violation
from privcore.lipschitz.pattern_store import (
    CERT_KIND,
    clear_pattern_tables,
    realised_pattern_table,
    region_certificate_key,
    resolve_regions,
    store_certificates,
    use_certificate_store,
)
from privcore.lipschitz.patterns import RegionMemo, threshold_pattern_table
from privcore.lipschitz.regions import _region_rows_batch
from tests._nets import random_net

NORMS = Norms()


@pytest.fixture(autouse=True)
def _store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LipschitzCache:
    """A private cache as the certificate store, no table in memory."""
    monkeypatch.setenv("PRIVLENS_CACHE_DIR", str(tmp_path / "cache"))
    store = LipschitzCache(tmp_path / "cache")
    previous = use_certificate_store(store)
    clear_pattern_tables()
    yield store
    clear_pattern_tables()
    use_certificate_store(previous)


def rows_of(net: ReluNetwork):
    return lambda codes: _region_rows_batch(net, codes)


def reference_range(net: ReluNetwork, code: int, domain: float) -> np.ndarray | None:
    """Per coordinate (min, max) of x_i over the region of ``code`` (rows relaxed as the engine
    does) within [−domain, domain]^d by scipy's LP, or None when that set is empty."""
    G, h = _region_rows_batch(net, np.array([code]))
    d = net.in_dim
    if linprog(np.zeros(d), A_ub=G[0], b_ub=rc.relaxed(h[0]), bounds=[(-domain, domain)] * d,
               method="highs").status == 2:
        return None
    out = np.empty((d, 2))
    for i in range(d):
        for j, sign in enumerate((1.0, -1.0)):
            res = linprog(sign * np.eye(d)[i], A_ub=G[0], b_ub=rc.relaxed(h[0]),
                          bounds=[(-domain, domain)] * d, method="highs")
            if res.status == 2:
                return None
            assert res.status == 0
            out[i, j] = sign * res.fun
    return out


def sampled(net: ReluNetwork, n: int, scale: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Points and the codes of their (strict) activation patterns."""
    x = np.random.default_rng(seed).uniform(-scale, scale, size=(n, net.in_dim))
    pre = net.preactivations(x)
    strict = np.all(np.hstack([np.abs(p) > 1e-9 for p in pre]), axis=1)
    bits = np.hstack([(p > 0) for p in pre]).astype(np.int64)
    return x[strict], (bits << np.arange(net.n_hidden, dtype=np.int64)).sum(axis=1)[strict]


def resolved_table(net: ReluNetwork, tau: float):
    table = realised_pattern_table(net, tau, NORMS)
    resolve_regions(net, table, NORMS)
    return table


# -- the checks themselves, on hand-made regions --------------------------------------------------


def test_empty_certificate_proves_emptiness_on_the_domain_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """1-d region x ≥ 5 (row −x ≤ −5): empty on [−2, 2], not on [−10, 10]; y = 1 proves the first
    (c = 5 − 2 = 3), not the second. x ≤ −1 ∧ x ≥ 1 is empty everywhere (y = (½, ½))."""
    G, h = np.array([[[-1.0]]]), np.array([[-5.0]])
    one = (np.array([[0]]), np.array([[1.0]]))
    monkeypatch.setattr(rc, "TABLE_DOMAIN", 2.0)
    assert rc.empty_verified(G, h, *one)[0]
    for bad in ([[0.0]], [[-1.0]], [[np.nan]], [[np.inf]]):  # zero, negative, not finite
        assert not rc.empty_verified(G, h, one[0], np.array(bad))[0]
    assert not rc.empty_verified(G, h, np.array([[3]]), one[1])[0]  # a row that does not exist
    monkeypatch.setattr(rc, "TABLE_DOMAIN", 10.0)
    assert not rc.empty_verified(G, h, *one)[0]
    monkeypatch.setattr(rc, "TABLE_DOMAIN", 0.5)  # x ≥ −1 meets [−0.5, 0.5]: y = −1 would "prove" it empty
    assert not rc.empty_verified(np.array([[[-1.0]]]), np.array([[1.0]]), one[0], np.array([[-1.0]]))[0]
    monkeypatch.setattr(rc, "TABLE_DOMAIN", 10.0)
    G2, h2 = np.array([[[1.0], [-1.0]]]), np.array([[-1.0, -1.0]])
    assert rc.empty_verified(G2, h2, np.array([[0, 1]]), np.array([[0.5, 0.5]]))[0]
    assert rc.empty_verified(G2, h2, np.array([[0, 1]]), np.array([[5e3, 5e3]]))[0]  # y's scale is free
    assert not rc.empty_verified(G2, h2, np.array([[0, 1]]), np.array([[0.5, 0.0]]))[0]


def test_any_nonnegative_y_bounds_a_box_side_never_below_the_region() -> None:
    """Region 1 ≤ x ≤ 3: the dual y = (0, 1) gives the upper side 3, (1, 0) the lower side 1 (up
    to the outward rounding and padding); every other y ≥ 0 gives a looser bound, never a tighter
    one, and a bound ≥ D is +inf (nothing on X)."""
    G, h = np.array([[[-1.0], [1.0]]]), np.array([[-1.0, 3.0]])
    rows = np.array([[0, 1]])
    up = rc.side_bounds(G, h, np.array([0]), rows, np.array([[0.0, 1.0]]))[0]
    low = rc.side_bounds(G, h, np.array([1]), rows, np.array([[1.0, 0.0]]))[0]
    assert 3.0 <= up < 3.0 + 1e-5 and 1.0 - 1e-5 < -low <= 1.0
    rng = np.random.default_rng(0)
    for y in rng.exponential(size=(200, 2)) * rng.choice([1e-3, 1.0, 1e3], size=(200, 1)):
        assert rc.side_bounds(G, h, np.array([0]), rows, y[None])[0] >= 3.0
        assert -rc.side_bounds(G, h, np.array([1]), rows, y[None])[0] <= 1.0
    assert rc.side_bounds(G, h, np.array([0]), rows, np.array([[0.0, 0.0]]))[0] == np.inf  # bound D
    assert rc.side_bounds(G, h, np.array([0]), rows, np.array([[0.0, -1.0]]))[0] == np.inf
    assert rc.side_bounds(G, h, np.array([0]), rows, np.array([[-1.0, 0.0]]))[0] == np.inf  # would say x ≤ 1
    assert rc.side_bounds(G, h, np.array([2]), rows, np.array([[0.0, 1.0]]))[0] == np.inf  # no x_1


# -- brute force on tiny random nets --------------------------------------------------------------


@pytest.mark.parametrize("domain", [None, 1.0])
@pytest.mark.parametrize("seed,dims", [(11, (3, 5, 4, 2)), (12, (2, 4, 4, 3)), (13, (3, 6, 5, 2))])
def test_verified_labels_hold_against_the_reference_lp_and_sampled_points(
    seed: int, dims: tuple[int, ...], domain: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every verified EMPTY region has no point in X (reference LP); every verified box contains
    the reference LP's min and max over region ∩ X and every sampled point of X with that pattern;
    every EMPTY label the engine resolved verifies. ``domain=1``: a small X, where many regions
    exist in ℝ^d but not in X (their certificates say EMPTY)."""
    if domain is not None:
        monkeypatch.setattr(rc, "TABLE_DOMAIN", domain)
    D = rc.TABLE_DOMAIN
    net = random_net(seed, dims)
    tau = float(np.quantile(threshold_pattern_table(net, 0.0, NORMS).norms, 0.3))
    table = resolved_table(net, tau)
    certs = rc.certify(table.codes, table.state, rows_of(net))
    got = rc.verify(certs, table.codes, rows_of(net), net.in_dim)
    assert got.rejected == 0
    assert np.all(got.empty[table.state == RegionMemo.EMPTY])  # nearly all: here all of them
    assert got.empty.sum() + got.boxed.sum() == table.codes.size
    if domain is not None:
        assert np.any(got.empty & (table.state == RegionMemo.BOXED))  # exist in ℝ^d, not in X
    for i in range(table.codes.size):
        ref = reference_range(net, int(table.codes[i]), D)
        if got.empty[i]:
            assert ref is None, i
        elif ref is not None:
            assert got.boxed[i]
            assert np.all(got.lower[i] <= ref[:, 0]) and np.all(ref[:, 1] <= got.upper[i]), i
    x, codes = sampled(net, 20000, min(D, 4.0), seed)
    position = {int(c): i for i, c in enumerate(table.codes)}
    hits = 0
    for xi, code in zip(x, codes, strict=True):
        i = position.get(int(code))
        if i is not None:
            hits += 1
            assert got.boxed[i] and np.all(got.lower[i] <= xi) and np.all(xi <= got.upper[i])
    assert hits > 100


# -- stored, tampered, loaded ------------------------------------------------------------------------


CENTRES = np.random.default_rng(4).standard_normal((4, 3)) * 0.7


def _distances(net: ReluNetwork, tau: float) -> np.ndarray:
    """The exact distance from each centre to the nearest region with ‖J_D‖ > τ (the search that
    settles every PTR decision at τ), through the table in memory (rounded to 1e-9: LPs on balls
    of other radii may move the last bits)."""
    out = []
    for c in CENTRES:
        nv = pattern_nearest_violation(net, c, 2.0, tau, forward_bounds(net, *box_around(c, 2.0)), NORMS,
                                       max_lps=100_000)
        assert nv is not None
        out.append(nv.distance)
    return np.round(np.array(out), 9)


@pytest.fixture(scope="module")
def case() -> tuple[ReluNetwork, float, np.ndarray, dict]:
    """A net whose threshold table the searches use (the global table is switched off, as for the
    shipped 20-neuron obfuscators), τ at the 80th percentile of sampled Jacobian norms (1471
    patterns, about 100 realised), the distances of a process without any store, and the true
    region of every code on X (reference LP: None where it misses X)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("privcore.lipschitz.patterns.MAX_GLOBAL_NEURONS", 0)
        net = random_net(21, (3, 7, 6, 2))
        x = np.random.default_rng(0).standard_normal((4000, 3))
        tau = float(np.quantile(jacobian_norms(net, x, NORMS)[0], 0.8))
        previous = use_certificate_store(False)
        clear_pattern_tables()
        fresh = _distances(net, tau)
        assert np.isfinite(fresh).all() and np.any(fresh > 0)
        codes = realised_pattern_table(net, tau, NORMS).codes
        truth = {int(c): reference_range(net, int(c), rc.TABLE_DOMAIN) for c in codes}
        use_certificate_store(previous)
        clear_pattern_tables()
        yield net, tau, fresh, truth


@pytest.fixture()
def stored(case, _store: LipschitzCache, monkeypatch: pytest.MonkeyPatch
           ) -> tuple[ReluNetwork, float, dict, np.ndarray, dict]:
    """``case``'s table resolved here and its certificates stored (the stored value returned)."""
    monkeypatch.setattr("privcore.lipschitz.patterns.MAX_GLOBAL_NEURONS", 0)
    net, tau, fresh, truth = case
    table = resolved_table(net, tau)
    assert store_certificates(net, table) is not None
    value = _store.get(CERT_KIND, region_certificate_key(net.digest, tau, NORMS))
    assert value is not None
    clear_pattern_tables()
    return net, tau, value, fresh, truth


def _load(net: ReluNetwork, tau: float):
    clear_pattern_tables()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = realised_pattern_table(net, tau, NORMS)
    return table, [str(w.message) for w in caught]


def _assert_true_labels(table, truth: dict) -> None:
    """Every label held is true: EMPTY only where the region misses X, every box around its region."""
    for i, code in enumerate(table.codes.tolist()):
        ref = truth[code]
        if table.state[i] == RegionMemo.EMPTY:
            assert ref is None, code
        elif table.state[i] == RegionMemo.BOXED and ref is not None:
            assert np.all(table.box_lower[i] <= ref[:, 0]) and np.all(ref[:, 1] <= table.box_upper[i]), code


def test_round_trip_loads_every_label_verified_and_decides_as_a_fresh_process(stored) -> None:
    net, tau, _, fresh, truth = stored
    table, messages = _load(net, tau)
    assert not messages
    assert np.all(table.state != RegionMemo.UNKNOWN)  # every label verified
    empty_on_x = sum(ref is None for ref in truth.values())
    assert (table.state == RegionMemo.EMPTY).sum() == empty_on_x  # all of them, nothing more
    _assert_true_labels(table, truth)
    assert np.array_equal(_distances(net, tau), fresh)


def _edit(value: dict, net: ReluNetwork, **changes: np.ndarray) -> dict:
    certs = rc.RegionCertificates.from_value(value, d=net.in_dim, k=net.n_hidden)
    fields = {name: getattr(certs, name) for name in rc._FIELDS}
    fields.update(changes)
    return rc.RegionCertificates(**fields).to_value(d=net.in_dim, k=net.n_hidden)


def _tampered(stored, how: str) -> dict:
    net, _, value, _, truth = stored
    certs = rc.RegionCertificates.from_value(value, d=net.in_dim, k=net.n_hidden)
    live = np.array([c for c, ref in truth.items() if ref is not None], dtype=np.int64)  # meet X
    m = certs.m
    rng = np.random.default_rng(7)
    if how == "made-up y on non-empty regions":
        rows = np.tile(np.arange(m), (live.size, 1))
        return _edit(value, net, empty_codes=np.r_[certs.empty_codes, live],
                     empty_rows=np.r_[certs.empty_rows, rows], empty_y=np.r_[certs.empty_y, rng.exponential(
                         size=(live.size, m))])
    if how == "another region's y":
        pick = rng.integers(0, certs.empty_codes.size, size=live.size)
        return _edit(value, net, empty_codes=np.r_[certs.empty_codes, live],
                     empty_rows=np.r_[certs.empty_rows, certs.empty_rows[pick]],
                     empty_y=np.r_[certs.empty_y, certs.empty_y[pick]])
    if how == "every y scaled, some negated":
        sign = np.where(rng.random(certs.empty_codes.size) < 0.5, -1.0, 1.0)[:, None]
        return _edit(value, net, empty_y=certs.empty_y * sign * 1e3, side_y=certs.side_y * 1e-3)
    if how == "zero y":
        return _edit(value, net, empty_codes=np.r_[certs.empty_codes, live],
                     empty_rows=np.r_[certs.empty_rows, np.zeros((live.size, m), dtype=np.int64)],
                     empty_y=np.r_[certs.empty_y, np.zeros((live.size, m))])
    if how == "box sides shrunk":  # the y of each side replaced: the bound moves, never inside the region
        y = certs.side_y * rng.uniform(0.0, 1.0, size=certs.side_y.shape)
        edited = _edit(value, net, side_y=y)
        edited["lower"] = edited["upper"] = "AAAA"  # a would-be box on disk is never read
        return edited
    if how == "patterns dropped":
        keep = rng.random(certs.empty_codes.size) < 0.5
        return _edit(value, net, empty_codes=certs.empty_codes[keep], empty_rows=certs.empty_rows[keep],
                     empty_y=certs.empty_y[keep], boxed_codes=certs.boxed_codes[::2])
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["made-up y on non-empty regions", "another region's y",
                                 "every y scaled, some negated", "zero y", "box sides shrunk",
                                 "patterns dropped"])
def test_a_tampered_store_holds_only_true_labels_and_decides_as_a_fresh_process(
    stored, how: str, _store: LipschitzCache
) -> None:
    net, tau, _, fresh, truth = stored
    _store.put(CERT_KIND, region_certificate_key(net.digest, tau, NORMS), _tampered(stored, how))
    table, messages = _load(net, tau)
    _assert_true_labels(table, truth)
    if how in ("made-up y on non-empty regions", "another region's y", "zero y"):
        assert any("did not verify" in m for m in messages)
    if how == "patterns dropped":
        assert np.any(table.state == RegionMemo.UNKNOWN)
    assert np.array_equal(_distances(net, tau), fresh)
    _assert_true_labels(table, truth)  # and after the searches filled the rest


def test_a_store_that_is_not_a_certificate_set_is_reported_deleted_and_ignored(
    stored, _store: LipschitzCache
) -> None:
    net, tau, value, fresh, _ = stored
    key = region_certificate_key(net.digest, tau, NORMS)
    for bad in ({**value, "format": 99}, {**value, "empty_y": "not base64!"},
                {**value, "empty_y": value["empty_y"][:-8]}, {**value, "rows": net.n_hidden + 1}):
        _store.put(CERT_KIND, key, bad)
        table, messages = _load(net, tau)
        assert any("not a certificate set" in m for m in messages)
        assert np.all(table.state == RegionMemo.UNKNOWN)
        assert _store.get(CERT_KIND, key) is None
    assert np.array_equal(_distances(net, tau), fresh)


def test_labels_are_keyed_by_the_code_enumerated_here(stored, _store: LipschitzCache) -> None:
    """Certificates of codes that this process does not enumerate (a table for a lower τ, here
    made up codes) are ignored; certificates stored for another model are checked against this
    model's rows, so at most true labels come through."""
    net, tau, value, fresh, truth = stored
    certs = rc.RegionCertificates.from_value(value, d=net.in_dim, k=net.n_hidden)
    foreign = np.arange(certs.empty_codes.size, dtype=np.int64) + (1 << net.n_hidden)
    key = region_certificate_key(net.digest, tau, NORMS)
    _store.put(CERT_KIND, key, _edit(value, net, empty_codes=foreign))
    table, _ = _load(net, tau)
    assert not np.any(table.state == RegionMemo.EMPTY)
    other = random_net(22, (3, 7, 6, 2))
    table_other = resolved_table(other, tau)
    store_certificates(other, table_other)
    moved = _store.get(CERT_KIND, region_certificate_key(other.digest, tau, NORMS))
    assert moved is not None
    _store.put(CERT_KIND, region_certificate_key(net.digest, tau, NORMS), moved)
    table, _ = _load(net, tau)
    _assert_true_labels(table, truth)
    assert np.array_equal(_distances(net, tau), fresh)


def test_no_store_or_no_database_changes_nothing(stored, tmp_path: Path) -> None:
    net, tau, _, fresh, _ = stored
    use_certificate_store(False)
    table, _ = _load(net, tau)
    assert np.all(table.state == RegionMemo.UNKNOWN)
    use_certificate_store(tmp_path / "elsewhere")
    table, _ = _load(net, tau)
    assert np.all(table.state == RegionMemo.UNKNOWN)
    assert not (tmp_path / "elsewhere").exists()  # a lookup creates no cache
    assert np.array_equal(_distances(net, tau), fresh)


@pytest.mark.slow
def test_round_trip_of_a_shipped_obfuscator() -> None:
    """digits ARL-C-N: resolve, store, clear, load: every label verifies (the engine's EMPTY labels
    and, beyond them, regions that exist only outside X), and the nearest violations at the
    card's Δp equal a process without a store."""
    from privcore.lipschitz.pattern_store import shipped_obfuscators

    ((_, net, dp),) = [s for s in shipped_obfuscators() if s[0] == "digits/ARL-C-N"]
    table = resolved_table(net, dp)
    engine_empty = set(table.codes[table.state == RegionMemo.EMPTY].tolist())
    store_certificates(net, table)
    loaded, messages = _load(net, dp)
    assert not messages and np.all(loaded.state != RegionMemo.UNKNOWN)
    assert engine_empty <= set(loaded.codes[loaded.state == RegionMemo.EMPTY].tolist())
    centres = np.random.default_rng(0).normal(size=(4, net.in_dim))
    def distances() -> list[float]:
        return [pattern_nearest_violation(net, c, 0.5, dp, forward_bounds(net, *box_around(c, 0.5)), NORMS,
                                          max_lps=100_000).distance for c in centres]
    warm = distances()
    use_certificate_store(False)
    clear_pattern_tables()
    assert np.allclose(distances(), warm, rtol=0.0, atol=1e-9)
