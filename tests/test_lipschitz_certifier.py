"""The PTR sensitivity oracle: exact decisions, monotone memo, certifier kinds, φ, time-outs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from privcore.errors import CertificationError
from privcore.lipschitz import (
    Certifier,
    ReluNetwork,
    as_network,
    build_milp,
    interval_upper_bound,
    local_lipschitz,
    lp_upper_bound,
)
from privcore.lipschitz.backends import solve
from privcore.lipschitz.bounds import box_around, forward_bounds
from privcore.lipschitz.norms import Norms
from privcore.lipschitz.pattern_search import pattern_nearest_violation
from privcore.mechanisms.phi_cache import cached_phi
from privcore.mechanisms.ptr import compute_phi, propose_test_release
from tests._nets import mip_value, random_net
from tests._reference import brute_force_lipschitz


def test_exact_decide_matches_brute_force_in_any_query_order() -> None:
    """decide(r, τ) == [L(r) ≤ τ] for many (r, τ), asked in random order of one certifier, so that
    the memo's monotone facts (pass at r ⇒ pass below; fail at r ⇒ fail above) are exercised."""
    rng = np.random.default_rng(0)
    for seed, dims in enumerate([(2, 4, 3, 2), (3, 5, 4), (3, 4, 4, 2)]):
        net = random_net(40 + seed, dims)
        center = rng.standard_normal(dims[0])
        radii = [0.05, 0.2, 0.4, 0.8, 1.6]
        values = {r: brute_force_lipschitz(net, center, r) for r in radii}
        taus = sorted({v * f for v in values.values() for f in (0.97, 1.03)})
        queries = [(r, t) for r in radii for t in taus]
        cert = Certifier(kind="exact", time_limit=30)
        for i in rng.permutation(len(queries)):
            r, tau = queries[i]
            assert cert.decide(net, center, r, tau) == (values[r] <= tau), (dims, r, tau, values[r])
        assert cert.stats.get("memo", 0) > 0


def test_exact_decide_through_the_milp_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A net too wide for enumeration: decisions come from the split search, or (splitting switched
    off) from cheap bounds or LipMIP with early stops, and agree with the full MILP's optimum on
    both sides of it."""
    net = random_net(3, (4, 12, 12, 3))
    center = np.random.default_rng(1).standard_normal(4)
    value = mip_value(net, center, 0.5)
    hows = set()
    for factor in (0.5, 0.99, 1.01, 2.0):
        cert = Certifier(kind="exact", solver="gurobi")
        assert cert.decide(net, center, 0.5, value * factor) == (factor > 1)
        hows |= set(cert.stats)
    assert "split" in hows
    monkeypatch.setattr("privcore.lipschitz.decide.SPLIT_SECONDS", 0.0)
    hows = set()
    for solver in ("gurobi", "highs"):
        cert = Certifier(kind="exact", solver=solver)
        assert cert.decide(net, center, 0.5, value * 1.01) is True
        assert cert.decide(net, center, 0.5, value * 0.999) is False
        hows |= set(cert.stats)
    assert hows & {"mip-bound", "mip-optimal", "lp", "interval"}


def test_nearest_violation_settles_every_radius() -> None:
    """The distance d* to the nearest region with ‖J_D‖ > τ decides L(r) ≤ τ ⇔ r < d* (brute force)."""
    rng = np.random.default_rng(2)
    checked = 0
    for seed, dims in enumerate([(2, 4, 3, 2), (3, 6, 2), (3, 4, 4, 2)]):
        net = random_net(60 + seed, dims)
        center = rng.standard_normal(dims[0])
        tau = 1.02 * brute_force_lipschitz(net, center, 0.3)
        fwd = forward_bounds(net, *box_around(center, 2.0))
        nv = pattern_nearest_violation(net, center, 2.0, tau, fwd, Norms())
        assert nv is not None
        for r in np.linspace(0.05, 2.0, 12):
            if math.isfinite(nv.distance) and abs(r - nv.distance) < 1e-6:
                continue
            expect = brute_force_lipschitz(net, center, r) <= tau
            assert expect == (r < nv.distance), (dims, r, nv.distance)
            checked += not expect
    assert checked > 0  # some radii really fail


@pytest.mark.parametrize("kind", ["lp", "interval"])
def test_relaxed_kinds_decide_their_own_value(kind: str) -> None:
    """For lp/interval, decide == [U_kind ≤ τ] (never [L ≤ τ]) with U_kind = min(relaxation, G): with
    τ between L and U_kind the relaxation fails although the exact constant passes; at large radii
    the global pattern bound G caps U (and τ ≥ G passes every ball)."""
    from privcore.lipschitz.ball import Ball
    from privcore.lipschitz.engine import global_bound, relaxed_upper_bound

    rng = np.random.default_rng(3)
    capped = 0
    for seed, dims in enumerate([(4, 8, 6), (3, 6, 5, 3)]):
        net = random_net(80 + seed, dims)
        center = rng.standard_normal(dims[0])
        for r in (0.1, 0.4, 20.0):
            u = relaxed_upper_bound(net, center, r, kind=kind)
            ball = Ball.of(net, center, r)
            plain = lp_upper_bound(net, center, r) if kind == "lp" else ball.relaxed_interval
            assert u == min(plain, global_bound(net))
            capped += u < plain
            exact = local_lipschitz(net, center, r).upper
            cert = Certifier(kind=kind)
            assert cert(net, center, r) == pytest.approx(u, rel=1e-9)
            for tau in (0.9 * exact, (exact + u) / 2, 0.999 * u, 1.001 * u):
                fresh = Certifier(kind=kind)
                assert fresh.decide(net, center, r, tau) == (u <= tau)
                assert cert.decide(net, center, r, tau) == (u <= tau)
    assert capped > 0


def test_phi_with_engine_equals_straightforward_bisection() -> None:
    """compute_phi with the engine's fast decide gives the same φ and R* as a fresh full MILP per
    step (exact), and as plain U_kind evaluations (lp, interval), and each of its decisions is that
    oracle's answer at its radius (the memo's fail radius may change which radii are asked);
    R*_exact ≥ R*_lp ≥ R*_interval."""
    net = random_net(5, (4, 6, 5, 3))
    rng = np.random.default_rng(4)

    def straightforward(f: ReluNetwork, c: np.ndarray, r: float) -> float:
        return mip_value(f, c, r)

    plain = {
        "lp": lambda f, c, r: lp_upper_bound(f, c, r),
        "interval": lambda f, c, r: interval_upper_bound(f, c, r),
    }
    for _ in range(3):
        z = rng.standard_normal(4)
        delta_p = max(1.15 * mip_value(net, z, 0.1), 0.5)
        kw = dict(radius=0.1, delta_p=delta_p, r_max=1.0, tol=0.01)
        stars = {}
        for kind in ("exact", "lp", "interval"):
            fast = compute_phi(net, z, lipschitz=Certifier(kind=kind), **kw)
            slow = compute_phi(net, z, lipschitz=straightforward if kind == "exact" else plain[kind], **kw)
            assert (fast.phi, fast.r_star) == (slow.phi, slow.r_star)
            truth = straightforward if kind == "exact" else plain[kind]
            assert all(ok == (truth(net, z, r) <= delta_p) for r, ok in fast.evaluations)
            stars[kind] = fast.r_star or 0.0
        assert stars["exact"] >= stars["lp"] >= stars["interval"]


@pytest.mark.parametrize("dims", [(4, 6, 5, 3), (3, 8, 8, 8, 3)])
def test_fail_radius_is_a_radius_where_l_exceeds_the_threshold(dims: tuple[int, ...]) -> None:
    """After a failing decision the certifier knows a fail radius ρ ≤ that radius at which the
    plain MILP's L exceeds τ, and answers a decision at ρ from its memo; before any, it knows none."""
    net = random_net(9, dims)
    rng = np.random.default_rng(5)
    found = 0
    for _ in range(4):
        z = rng.standard_normal(dims[0])
        low, high = mip_value(net, z, 0.05), mip_value(net, z, 1.0)
        if high <= low * 1.01:
            continue
        tau = (low + high) / 2
        cert = Certifier()
        assert cert.fail_radius(net, z, tau) is None
        assert not cert.decide(net, z, 1.0, tau)
        rho = cert.fail_radius(net, z, tau)
        assert rho is not None and rho <= 1.0
        assert mip_value(net, z, rho) > tau
        memo = cert.stats.get("memo", 0)
        assert not cert.decide(net, z, rho, tau) and cert.stats["memo"] == memo + 1
        assert cert.fail_radius(net, z, high * 1.01) is None
        found += 1
    assert found >= 2


def test_time_out_fails_the_query_and_releases_nothing() -> None:
    """A MILP that runs out of time raises CertificationError in decide and in __call__, and
    propose_test_release lets it propagate (no release)."""
    net = random_net(3, (5, 16, 16, 3))
    center = np.random.default_rng(1).standard_normal(5)
    # between the sampled lower bound and the exact value: only the MILP can decide
    cert = Certifier(kind="exact", solver="gurobi", time_limit=1e-3)
    with pytest.raises(CertificationError, match="time"):
        cert.decide(net, center, 0.4, 13.5)
    with pytest.raises(CertificationError, match="not completed"):
        cert(net, center, 0.4)
    with pytest.raises(CertificationError):
        propose_test_release(net_module(net), center, epsilon=1.0, delta=0.05, radius=0.4, delta_p=13.5,
                             r_max=0.8, tol=0.1, lipschitz=cert, rng=0)


def net_module(net: ReluNetwork) -> torch.nn.Sequential:
    layers: list[torch.nn.Module] = []
    for i, (w, b) in enumerate(zip(net.weights, net.biases, strict=True)):
        lin = torch.nn.Linear(w.shape[1], w.shape[0]).double()
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(np.array(w)))
            lin.bias.copy_(torch.from_numpy(np.array(b)))
        layers.append(lin)
        if i < len(net.weights) - 1:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def test_propose_test_release_with_certifier_and_cached_phi(tmp_path) -> None:
    """The oracle plugs into PTR; cached_phi returns the stored φ the second time after one decision
    (its pass at R*, re-checked: here this certifier's memo answers it), and the release is
    reproducible with a fixed seed."""
    module = net_module(random_net(8, (4, 6, 4)))
    z = np.array([0.2, -0.1, 0.4, 0.0])
    cert = Certifier(kind="exact")
    delta_p = 1.2 * local_lipschitz(module, z, 0.2).upper
    kw = dict(radius=0.2, delta_p=delta_p, r_max=2.0, tol=0.01)
    phi = cached_phi(module, z, certifier=cert, cache=tmp_path, **kw)
    n_before = sum(cert.stats.values())
    again = cached_phi(module, z, certifier=cert, cache=tmp_path, **kw)
    assert again == phi and sum(cert.stats.values()) == n_before + 1 and cert.stats["memo"] >= 1
    assert phi.phi > 0
    a = propose_test_release(module, z, epsilon=5.0, delta=0.05, lipschitz=cert, rng=7, phi=phi, **kw)
    b = propose_test_release(module, z, epsilon=5.0, delta=0.05, lipschitz=cert, rng=7, phi=again, **kw)
    assert a.released == b.released and a.phi == phi.phi
    if a.released:
        assert np.array_equal(a.value, b.value)


def test_phi_of_a_net_with_its_last_layer_divided_by_100_is_refused(tmp_path) -> None:
    """Issue 18's attack through the product's path (cached_phi, then PTR with the φ): refused,
    naming the model digest; the same φ serves the net it was certified for."""
    net = random_net(8, (4, 6, 4))
    module = net_module(net)
    weights = [*net.weights[:-1], net.weights[-1] / 100]
    scaled = net_module(ReluNetwork.from_arrays(weights, [*net.biases[:-1], net.biases[-1] / 100]))
    z = np.array([0.2, -0.1, 0.4, 0.0])
    delta_p = 0.5 * local_lipschitz(module, z, 0.2).upper
    kw = dict(radius=0.2, delta_p=delta_p, r_max=2.0, tol=0.01, epsilon=1.0, delta=0.05, rng=0)
    grid = {k: kw[k] for k in ("radius", "delta_p", "r_max", "tol")}
    forged = cached_phi(scaled, z, certifier=Certifier(), cache=tmp_path, **grid)
    honest = cached_phi(module, z, certifier=Certifier(), cache=tmp_path, **grid)
    assert forged.phi > 0 == honest.phi and forged.model_digest == as_network(scaled).digest
    with pytest.raises(ValueError, match="model digest"):
        propose_test_release(module, z, lipschitz=Certifier(), phi=forged, **kw)
    with pytest.raises(ValueError, match="certifier"):
        propose_test_release(module, z, lipschitz=Certifier(kind="lp"), phi=honest, **kw)
    assert propose_test_release(scaled, z, lipschitz=Certifier(), phi=forged, **kw).phi_result is forged


def test_certifier_validates_its_parameters() -> None:
    with pytest.raises(ValueError, match="kind"):
        Certifier(kind="fast")
    with pytest.raises(ValueError, match="solver"):
        Certifier(solver="cplex")
    with pytest.raises(ValueError, match="time_limit"):
        Certifier(time_limit=0)
    cert = Certifier()
    net = random_net(1, (3, 4, 2))
    with pytest.raises(ValueError, match="threshold"):
        cert.decide(net, np.zeros(3), 0.1, -1.0)
    with pytest.raises(ValueError, match="dimension 3"):
        cert.decide(net, np.zeros(2), 0.1, 1.0)


def test_threshold_table_lists_exactly_the_patterns_above_the_threshold() -> None:
    """The branch-and-bound over layers (for nets too wide for the full table) returns the same
    patterns and norms above τ as the full enumeration, for every norm pair and depth."""
    from privcore.lipschitz.patterns import global_pattern_table, threshold_pattern_table

    for dims in [(4, 6, 5, 3), (3, 4, 4, 4, 2), (5, 8, 3)]:
        net = random_net(1, dims)
        for ni, no in [("linf", "l1"), ("linf", "linf"), ("l1", "l1"), ("l1", "linf")]:
            full = global_pattern_table(net, Norms(input=ni, output=no))
            for q in (0.6, 0.95):
                tau = float(np.quantile(full.norms, q))
                part = threshold_pattern_table(net, tau, Norms(input=ni, output=no))
                assert set(part.codes.tolist()) == set(full.codes[full.norms > tau].tolist())
                assert np.allclose(part.norms, full.norms[full.norms > tau])
                assert part.floor == tau and np.all(part.norms > tau)


def test_decisions_through_the_threshold_table_match_the_milp() -> None:
    """18 hidden neurons (no full table) on a ball where most are unstable: the decision uses the
    patterns above τ and agrees with the MILP's optimum on both sides."""
    net = random_net(21, (3, 9, 9, 2))
    center = np.random.default_rng(5).standard_normal(3)
    for radius in (0.6, 1.0):  # 13 unstable neurons (box table), 15 (patterns above τ only)
        value = mip_value(net, center, radius)
        for factor in (0.98, 1.02):
            cert = Certifier(kind="exact", solver="gurobi")
            assert cert.decide(net, center, radius, value * factor) == (factor > 1)
            assert set(cert.stats) <= {"enumeration", "interval", "sampled"}


def test_milp_near_tie_is_not_failed_for_a_tolerance_artefact() -> None:
    """A ball 1e-6 short of the nearest region with ‖J‖ > Δp (found by the benchmark): with default
    tolerances Gurobi's optimum exceeds Δp (a binary 1e-6 from integral reaches the region), but
    float64 does not confirm its incumbent; the engine re-solves with 1e-9 tolerances and passes,
    as the exact enumeration does."""
    from privcore.lipschitz import decide

    torch.manual_seed(0)
    net = as_network(torch.nn.Sequential(torch.nn.Linear(8, 10), torch.nn.ReLU(), torch.nn.Linear(10, 8)))
    z = np.array([0.5686936343726542, 0.5231636795840767, 0.07324378807615324, 1.4019747168037942,
                  0.696041515436999, 0.790990286222508, -0.3451767266334448, -0.2388051617205514])
    radius, delta_p = 0.594482421875, 3.696424221698249
    assert Certifier().decide(net, z, radius, delta_p) is True  # enumeration
    plain = solve(build_milp(net, z, radius), solver="gurobi", mip_gap=1e-9)
    assert plain.upper > delta_p  # the artefact, with default tolerances
    # the MILP's path alone: no pattern search or split search ahead of it
    steps = ("interval", "closed_form", "sampled", "lp", "lp_tightened", "milp")
    dec = decide.decide_exact(net, z, radius, delta_p, solver="gurobi", steps=steps, threads=2)
    assert dec.passed and dec.how == "mip-strict"
