"""The pattern search's pruning: never-realised patterns, region boxes, propagation, nearest violation.

Every pruning step must be a proof: the checks compare with an independent LP (scipy's
``linprog`` on the region rows of tests/_reference.py), with points sampled from
the network itself, and with the plain LipMIP optimum.
"""

from __future__ import annotations

import sqlite3
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import linprog

from privcore.lipschitz import Certifier, ReluNetwork, build_milp
from privcore.lipschitz.backends import solve
from privcore.lipschitz.bounds import box_around, forward_bounds, jacobian_norms
from privcore.lipschitz.codes import to_bits
from privcore.lipschitz.norms import Norms
from privcore.lipschitz.pattern_search import nonempty_threshold_table, pattern_nearest_violation
from privcore.lipschitz.pattern_store import clear_pattern_tables, realised_pattern_table
from privcore.lipschitz.patterns import RegionMemo, threshold_pattern_table
from privcore.lipschitz.regions import _box_refutes, _region_rows_batch
from privcore.mechanisms.ptr import compute_phi
from tests._nets import random_net
from tests._reference import _region_rows, pattern_region_feasible


@pytest.fixture(autouse=True)
def _private_table_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts with no table in memory, an empty disk cache and an empty models directory."""
    monkeypatch.setenv("PRIVLENS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PRIVCORE_MODELS_DIR", str(tmp_path / "models"))
    clear_pattern_tables()
    yield
    clear_pattern_tables()


def split(net: ReluNetwork, code: int) -> list[np.ndarray]:
    bits = to_bits(np.array([code], dtype=np.int64), net.n_hidden)[0]
    return np.split(bits, np.cumsum(net.hidden_widths)[:-1])


def reference_distance(net: ReluNetwork, code: int, center: np.ndarray) -> float:
    """ℓ∞ distance from ``center`` to the closed region of a pattern (scipy LP; inf if empty)."""
    G, h = _region_rows(net, split(net, code))
    d = net.in_dim
    eye = np.eye(d)
    A = np.block([[G, np.zeros((G.shape[0], 1))], [eye, -np.ones((d, 1))], [-eye, -np.ones((d, 1))]])
    res = linprog(np.r_[np.zeros(d), 1.0], A_ub=A, b_ub=np.r_[h, center, -center],
                  bounds=[(None, None)] * d + [(0, None)], method="highs")
    return float(res.fun) if res.status == 0 else np.inf


def test_nonempty_table_keeps_exactly_the_realised_patterns_and_boxes_hold_them() -> None:
    """The filtered table lists the patterns above τ whose region is non-empty (scipy LP on a wide
    box), and every point sampled from the network whose pattern is above τ lies in its box."""
    rng = np.random.default_rng(0)
    for seed, dims in enumerate([(3, 5, 4, 2), (2, 4, 4, 3), (4, 6, 5, 2)]):
        net = random_net(10 + seed, dims)
        full = threshold_pattern_table(net, 0.0, Norms())
        tau = float(np.quantile(full.norms, 0.5))
        above = threshold_pattern_table(net, tau, Norms())
        table = nonempty_threshold_table(net, tau, Norms())
        wide = np.full(dims[0], 1e4)
        realised = {int(c) for c in above.codes
                    if pattern_region_feasible(net, -wide, wide, split(net, int(c)))}
        assert set(table.codes.tolist()) == realised
        assert 0 < len(realised) < above.codes.size  # the filter is exercised
        assert np.all(np.diff(table.norms) <= 0) and table.floor == tau
        x = rng.standard_normal((20000, dims[0])) * 3.0
        pre = net.preactivations(x)
        strict = np.all(np.hstack([np.abs(p) > 1e-9 for p in pre]), axis=1)
        bits = np.hstack([(p > 0) for p in pre]).astype(np.int64)
        codes = (bits << np.arange(net.n_hidden, dtype=np.int64)).sum(axis=1)
        position = {int(c): i for i, c in enumerate(table.codes)}
        norms, _ = jacobian_norms(net, x, Norms())
        hits = 0
        for xi, code, ok, v in zip(x, codes, strict, norms, strict=True):
            if not ok or v <= tau * (1 + 1e-9):
                continue
            i = position[int(code)]  # a realised pattern above τ is always listed
            assert np.all(table.box_lower[i] <= xi) and np.all(xi <= table.box_upper[i])
            hits += 1
        assert hits > 100


def test_propagation_only_refutes_regions_that_miss_the_ball() -> None:
    """``_box_refutes`` is a proof: whenever it says a region misses B(z, r), the scipy LP agrees,
    with and without a bounding box; and it does refute a good share of the far regions."""
    rng = np.random.default_rng(1)
    net = random_net(20, (3, 6, 5, 2))
    codes = np.arange(1 << net.n_hidden, dtype=np.int64)
    G, h = _region_rows_batch(net, codes)
    refuted = missed = 0
    for _ in range(4):
        center = rng.standard_normal(3)
        radius = float(rng.uniform(0.05, 0.6))
        dead = _box_refutes(G, h, center, radius)
        lo, hi = box_around(center, radius)
        for code in codes[::7]:
            meets = pattern_region_feasible(net, lo, hi, split(net, int(code)), slack=0.0)
            refuted += bool(dead[code])
            missed += not meets
            assert not (dead[code] and meets), (center, radius, code)
        box_lo, box_hi = lo - 1.0, hi + 1.0  # any box containing the ball gives the same answer
        again = _box_refutes(G, h, center, radius, np.broadcast_to(box_lo, (codes.size, 3)),
                             np.broadcast_to(box_hi, (codes.size, 3)))
        assert np.array_equal(again, dead)
    assert refuted > 0.3 * missed > 0


def test_nearest_violation_through_the_filtered_table_is_the_true_distance() -> None:
    """18 hidden neurons (no full table: the filtered threshold table is used): the distance found
    equals the smallest scipy-LP distance over the table's patterns (that the table keeps every
    realised pattern is the first test's business), and the plain MILP passes 1e-4 before it and
    fails 1e-4 beyond it."""
    net = random_net(21, (3, 9, 9, 2))
    centers = np.random.default_rng(5).standard_normal((3, 3))
    values = [solve(build_milp(net, c, 0.2), solver="gurobi", mip_gap=1e-9).upper for c in centers]
    tau = 1.4 * max(values)  # one τ, as PTR uses one Δp for every image (65 patterns above it)
    table = nonempty_threshold_table(net, tau, Norms())
    for center in centers:
        fwd = forward_bounds(net, *box_around(center, 3.0))
        nv = pattern_nearest_violation(net, center, 3.0, tau, fwd, Norms(),
                                       max_lps=4096)
        assert nv is not None and np.isfinite(nv.distance)
        truth = min(reference_distance(net, int(c), center) for c in table.codes)
        assert abs(nv.distance - truth) <= 1e-7 * (1 + truth)
        for factor, passes in ((1 - 1e-4, True), (1 + 1e-4, False)):
            r = nv.distance * factor
            value = solve(build_milp(net, center, r), solver="gurobi", mip_gap=1e-9).upper
            assert (value <= tau) == passes


def assert_same_phi(fast, slow, value_at, delta_p: float) -> None:
    """The engine's φ and R* are the reference's, and each of its decisions is the reference's answer
    at its radius (``value_at(r) ≤ Δp``; the memo's fail radius may change which radii are asked)."""
    assert (fast.phi, fast.r_star) == (slow.phi, slow.r_star)
    known = dict(slow.evaluations)
    assert all(ok == (known[r] if r in known else value_at(r) <= delta_p) for r, ok in fast.evaluations)


def test_phi_through_the_filtered_table_equals_straightforward_bisection() -> None:
    """φ on an 18-neuron net: the engine's decisions equal a fresh full MILP per bisection step."""
    net = random_net(22, (3, 9, 9, 2))
    rng = np.random.default_rng(6)

    def straightforward(f: ReluNetwork, c: np.ndarray, r: float) -> float:
        res = solve(build_milp(f, c, r), solver="gurobi", mip_gap=1e-9)
        assert res.status == "optimal"
        return res.upper

    for _ in range(2):
        z = rng.standard_normal(3)
        delta_p = 1.1 * straightforward(net, z, 0.1)
        kw = dict(radius=0.1, delta_p=delta_p, r_max=1.0, tol=0.01)
        cert = Certifier(kind="exact", solver="gurobi")
        fast = compute_phi(net, z, lipschitz=cert, **kw)
        slow = compute_phi(net, z, lipschitz=straightforward, **kw)
        assert_same_phi(fast, slow, partial(straightforward, net, z), delta_p)
        assert set(cert.stats) <= {"enumeration", "interval", "sampled", "memo"}


def _same_table(a, b) -> None:
    """Identical patterns, norms, region states and boxes (bit for bit)."""
    assert np.array_equal(a.codes, b.codes) and np.array_equal(a.norms, b.norms) and a.floor == b.floor
    assert np.array_equal(a.state, b.state)
    assert np.array_equal(a.box_lower, b.box_lower) and np.array_equal(a.box_upper, b.box_upper)


def _net_and_tau() -> tuple[ReluNetwork, float]:
    """A small net and a τ above which some realised patterns (and many empty ones) lie."""
    net = random_net(30, (3, 7, 7, 2))
    norms, _ = jacobian_norms(net, np.random.default_rng(0).standard_normal((2000, 3)), Norms())
    return net, float(np.quantile(norms, 0.8))


def test_meets_space_records_empty_regions_and_remembers_non_empty_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One feasibility LP per region, as the reference LP says: an empty region is recorded (and
    stored), a non-empty one only remembered in memory without a box; asking again changes nothing."""
    monkeypatch.setattr("privcore.lipschitz.patterns.MAX_GLOBAL_NEURONS", 0)
    net, tau = _net_and_tau()
    table = realised_pattern_table(net, tau, norms=Norms())
    memo = table.regions
    lo, hi = np.full(3, -1e4), np.full(3, 1e4)
    sel = np.arange(0, table.codes.size, max(1, table.codes.size // 80))
    G, h = _region_rows_batch(net, table.codes[sel])
    answers = []
    for k, pos in enumerate(sel):
        bits = to_bits(table.codes[pos : pos + 1], net.n_hidden)[0].astype(float)
        pattern = [bits[:7], bits[7:]]
        ok = memo.meets_space(int(pos), G[k], h[k])
        assert ok == pattern_region_feasible(net, lo, hi, pattern)
        assert memo.state[pos] == (RegionMemo.UNKNOWN if ok else RegionMemo.EMPTY)
        assert memo.nonempty[pos] == ok and not np.isfinite(memo.lower[pos]).any()
        answers.append(ok)
        assert memo.meets_space(int(pos), G[k], h[k]) == ok and memo.state[pos] == (0 if ok else -1)
    assert any(answers) and not all(answers)


def test_lazy_regions_equal_the_eager_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """A search resolves only the regions it reaches, each exactly as the eager build does."""
    # the searches use the threshold table, as on the shipped (20-neuron) obfuscators
    monkeypatch.setattr("privcore.lipschitz.patterns.MAX_GLOBAL_NEURONS", 0)
    net, tau = _net_and_tau()
    kw = dict(norms=Norms())
    lazy = realised_pattern_table(net, tau, **kw)
    assert np.all(lazy.state == RegionMemo.UNKNOWN)
    center = np.random.default_rng(3).standard_normal(3)
    fwd = forward_bounds(net, *box_around(center, 1.0))
    nv = pattern_nearest_violation(net, center, 1.0, tau, fwd, max_lps=4096, **kw)
    assert nv is not None and np.isfinite(nv.distance)
    known = (lazy.state != RegionMemo.UNKNOWN) | lazy.regions.nonempty
    assert 0 < known.sum() < lazy.codes.size  # resolved on demand, not all
    state, lower, upper = lazy.state.copy(), lazy.box_lower.copy(), lazy.box_upper.copy()
    clear_pattern_tables()
    fresh = nonempty_threshold_table(net, tau, **kw)  # built and resolved from scratch
    pos = {int(c): i for i, c in enumerate(fresh.codes)}
    for i in np.flatnonzero(known):
        code = int(lazy.codes[i])
        if state[i] == RegionMemo.EMPTY:
            assert code not in pos
        elif state[i] == RegionMemo.UNKNOWN:  # known non-empty, box not computed yet
            assert code in pos
        else:
            j = pos[code]
            assert np.array_equal(lower[i], fresh.box_lower[j])
            assert np.array_equal(upper[i], fresh.box_upper[j])


def test_phi_from_a_partly_resolved_table_equals_the_milp_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Decisions through a table with only some regions resolved (here the bulk resolution starts
    after the first search) equal a fresh full MILP per bisection step, on random small nets."""
    monkeypatch.setattr("privcore.lipschitz.pattern_search.RESOLVE_AFTER", 1)
    monkeypatch.setattr("privcore.lipschitz.pattern_store.BUILD_AFTER", 0)  # the first φ uses the table
    rng = np.random.default_rng(8)

    def straightforward(f: ReluNetwork, c: np.ndarray, r: float) -> float:
        res = solve(build_milp(f, c, r), solver="gurobi", mip_gap=1e-9)
        assert res.status == "optimal"
        return res.upper

    kw = dict(norms=Norms())
    for seed in (31, 32):
        net = random_net(seed, (3, 9, 9, 2))
        zs = rng.standard_normal((3, 3))
        delta_p = 1.1 * max(straightforward(net, z, 0.1) for z in zs)
        grid = dict(radius=0.1, delta_p=delta_p, r_max=1.0, tol=0.01)
        compute_phi(net, zs[0], lipschitz=Certifier(kind="exact", solver="gurobi"), **grid)
        table = realised_pattern_table(net, delta_p, **kw)
        assert np.any(table.state != RegionMemo.UNKNOWN)
        for z in zs[1:]:
            cert = Certifier(kind="exact", solver="gurobi")
            fast = compute_phi(net, z, lipschitz=cert, **grid)
            slow = compute_phi(net, z, lipschitz=straightforward, **grid)
            assert_same_phi(fast, slow, partial(straightforward, net, z), delta_p)


def test_warm_up_builds_the_table_in_memory_and_stores_only_certificates(tmp_path: Path) -> None:
    """The dashboard's warm-up (``precompute_pattern_tables``) builds each shipped obfuscator's
    table in this process, equal to a fresh eager build without a store; what reaches the cache is
    one row of region certificates (no table: codes and norms are enumerated by every process, and
    a label is used only after its certificate verifies, tests/test_region_certs.py), and nothing
    reaches the models directory. A next process loads every label from it."""
    import shutil

    from privcore.lipschitz.pattern_store import (
        precompute_pattern_tables,
        shipped_obfuscators,
        use_certificate_store,
    )

    models = tmp_path / "models"
    (models / "digits").mkdir(parents=True)
    repo_models = Path(__file__).resolve().parents[1] / "models" / "digits"
    for suffix in (".json", ".safetensors"):
        shutil.copy(repo_models / f"obfuscator-ARL{suffix}", models / "digits" / f"obfuscator-ARL{suffix}")
    ((name, net, dp),) = shipped_obfuscators(models)
    assert name == "digits/ARL"
    kw = dict(norms=Norms())
    pauses: list[int] = []  # the warm-up's pause points: before the model and each batch of regions
    assert precompute_pattern_tables(models, resolve=True, pause=lambda: pauses.append(1)) == ["digits/ARL"]
    assert len(pauses) >= 2
    warm = realised_pattern_table(net, dp, build=False, **kw)
    assert warm is not None and np.all(warm.state != RegionMemo.UNKNOWN)
    clear_pattern_tables()
    assert realised_pattern_table(net, dp, build=False, **kw) is None  # memory only
    previous = use_certificate_store(False)
    try:
        fresh = nonempty_threshold_table(net, dp, **kw)
    finally:
        use_certificate_store(previous)
    _same_table(warm.subset(np.flatnonzero(warm.state != RegionMemo.EMPTY)), fresh)
    assert sorted(p.name for p in models.iterdir()) == ["digits"]
    con = sqlite3.connect(tmp_path / "cache" / "cache.sqlite3")
    kinds = dict(con.execute("SELECT kind, COUNT(*) FROM entries GROUP BY kind").fetchall())
    con.close()
    assert kinds == {"pattern_certs": 1}
    clear_pattern_tables()
    loaded = realised_pattern_table(net, dp, **kw)  # the next process
    assert np.all(loaded.state != RegionMemo.UNKNOWN)
    assert np.all(loaded.state[warm.state == RegionMemo.EMPTY] == RegionMemo.EMPTY)


@pytest.mark.parametrize("variant", [
    "digits/ARL-C-N",
    "digits/Encoder",
    pytest.param("digits/C-N", marks=pytest.mark.slow),
    pytest.param("fashion-mnist/ARL-C-N", marks=pytest.mark.slow),
])
def test_tables_of_shipped_obfuscators_hold_every_sampled_violating_point(
    variant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shipped obfuscator's table, built and fully resolved here, is sound: a point sampled
    around the origin whose Jacobian norm exceeds Δp has its pattern listed as realised (never
    EMPTY) with the point inside the pattern's box, and a sample of EMPTY / boxed labels agrees
    with a reference LP on the table domain."""
    from privcore.lipschitz.pattern_store import resolve_regions, shipped_obfuscators
    from privcore.lipschitz.patterns import TABLE_DOMAIN

    monkeypatch.delenv("PRIVCORE_MODELS_DIR")  # the repository's models/
    rng = np.random.default_rng(5)
    kw = dict(norms=Norms())
    shipped = {name: (net, dp) for name, net, dp in shipped_obfuscators()}
    assert {"digits/ARL-C-N", "fashion-mnist/ARL-C-N"} <= set(shipped)
    for name, (net, dp) in [(variant, shipped[variant])]:
        clear_pattern_tables()
        table = realised_pattern_table(net, dp, **kw)
        resolve_regions(net, table, **kw)
        assert np.all(table.state != RegionMemo.UNKNOWN), name
        x = rng.standard_normal((20000, net.in_dim)) * 2.0
        pre = net.preactivations(x)
        strict = np.all(np.hstack([np.abs(p) > 1e-9 for p in pre]), axis=1)
        bits = np.hstack([(p > 0) for p in pre]).astype(np.int64)
        codes = (bits << np.arange(net.n_hidden, dtype=np.int64)).sum(axis=1)
        norms, _ = jacobian_norms(net, x, Norms())
        position = {int(c): i for i, c in enumerate(table.codes)}
        hits = 0
        for xi, code, ok, v in zip(x, codes, strict, norms, strict=True):
            if not ok or v <= dp * (1 + 1e-9):
                continue
            i = position[int(code)]
            hits += 1
            assert table.state[i] != RegionMemo.EMPTY, name
            assert np.all(table.box_lower[i] <= xi + 1e-9) and np.all(xi <= table.box_upper[i] + 1e-9), name
        if name == "digits/ARL-C-N":
            assert hits > 10, hits  # exercised where sampled points break Δp
        # region labels against the reference LP (scipy): an EMPTY region has no point in the domain
        # where tables are used (a proof the engine relies on); a boxed one has a point in its box
        wide = np.full(net.in_dim, TABLE_DOMAIN)
        for kind in (RegionMemo.EMPTY, RegionMemo.BOXED):
            idx = np.flatnonzero(table.state == kind)
            for i in rng.choice(idx, size=min(20, idx.size), replace=False):
                pattern = split(net, int(table.codes[i]))
                if kind == RegionMemo.EMPTY:
                    assert not pattern_region_feasible(net, -wide, wide, pattern), (name, int(i))
                else:
                    lo, hi = (np.clip(b, -1e9, 1e9) for b in (table.box_lower[i], table.box_upper[i]))
                    assert pattern_region_feasible(net, lo, hi, pattern), (name, int(i))
    clear_pattern_tables()


def test_balls_outside_the_table_domain_decide_without_the_realised_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Far from the origin (outside TABLE_DOMAIN) the engine does not use realised-pattern tables,
    whose EMPTY labels are only proofs inside the domain, and still decides exactly (MILP reference)."""
    from privcore.lipschitz import pattern_search as pat
    from privcore.lipschitz.engine import decide_exact as decide
    from privcore.lipschitz.pattern_search import in_table_domain
    from privcore.lipschitz.patterns import TABLE_DOMAIN

    net = random_net(41, (3, 9, 9, 2))
    used: list[bool] = []
    real = pat.realised_pattern_table
    def spy(*a: object, **k: object) -> object:
        used.append(True)
        return real(*a, **k)

    monkeypatch.setattr(pat, "realised_pattern_table", spy)
    assert in_table_domain(np.zeros(3), TABLE_DOMAIN)
    assert not in_table_domain(np.zeros(3), TABLE_DOMAIN + 1e-6)
    far = np.array([2.0 * TABLE_DOMAIN, 0.3, -0.2])
    ref = solve(build_milp(net, far, 0.5), solver="gurobi", mip_gap=1e-9).upper
    for tau in (0.9 * ref, 1.1 * ref):
        d = decide(net, far, 0.5, tau, input_norm="linf", output_norm="l1")
        assert d.passed == (ref <= tau)
    assert not used
    decide(net, np.zeros(3), 0.5, 0.5 * ref, input_norm="linf", output_norm="l1")
    assert used  # near the origin the table is used


def test_a_new_threshold_uses_the_box_table_until_it_repeats(monkeypatch: pytest.MonkeyPatch) -> None:
    """Budget: a decision at a threshold not seen before, on a box that can be enumerated, uses the
    box's own patterns instead of building the threshold table (seconds at paper size); once the
    threshold has come back more than BUILD_AFTER times the table is built, once, and shared. Every
    decision is exact either way (plain LipMIP reference at 0.97·L and 1.03·L)."""
    from privcore.lipschitz import decide_exact
    from privcore.lipschitz import pattern_store as store
    from tests._nets import mip_value

    builds: list[float] = []
    real = store.threshold_pattern_table

    net = random_net(7, (4, 10, 10, 2))

    def spy(other: ReluNetwork, threshold: float, norms: Norms) -> object:
        if other.digest == net.digest:  # not another test's background work on its own models
            builds.append(threshold)
        return real(other, threshold, norms)

    monkeypatch.setattr(store, "threshold_pattern_table", spy)
    assert net.n_hidden > 16  # no global table: the threshold table is the shared one
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((12, 4)) * 0.5
    kw = dict(input_norm="linf", output_norm="l1")
    for z in centres[:2]:
        ref = mip_value(net, z, 0.1)
        for tau in (0.97 * ref, 1.03 * ref):
            assert decide_exact(net, z, 0.1, tau, **kw).passed == (ref <= tau)
    assert builds == []  # four one-off thresholds: no table built
    tau = mip_value(net, centres[2], 0.1)
    for z in centres[2:]:
        ref = mip_value(net, z, 0.1)
        assert decide_exact(net, z, 0.1, tau, **kw).passed == (ref <= tau)
    assert builds == [tau]  # the repeated threshold: built once, then shared


def test_a_ball_uses_its_own_patterns_until_they_cost_the_global_table() -> None:
    """Small balls enumerate their unstable neurons; the model's 2^n table comes once their tables
    add up to it, and the values are the same either way."""
    from privcore.lipschitz.pattern_search import pattern_value
    from privcore.lipschitz.patterns import _GLOBAL, global_pattern_table

    clear_pattern_tables()
    net = random_net(11, (3, 7, 2))
    rng = np.random.default_rng(12)
    values, built_after = [], None
    for i in range(80):
        center = rng.standard_normal(3)
        fwd = forward_bounds(net, *box_around(center, 0.5))
        pv = pattern_value(net, center, 0.5, fwd, Norms())
        assert pv is not None
        values.append((center, pv.value))
        if built_after is None and _GLOBAL:
            built_after = i
    assert built_after is not None and built_after > 0  # not built by the first ball
    clear_pattern_tables()
    for center, v in values[:5]:  # from the global table: the same values
        fwd = forward_bounds(net, *box_around(center, 0.5))
        assert global_pattern_table(net, Norms()) is not None
        assert pattern_value(net, center, 0.5, fwd, Norms()).value == v
