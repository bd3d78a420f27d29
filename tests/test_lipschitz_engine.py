"""Exact local Lipschitz engine (LipMIP on Gurobi and HiGHS): exactness, soundness, agreement.

Every comparison is against something independent of the MILP encoding: brute force over all
activation patterns with an LP feasibility check per pattern (tiny nets), closed forms for
affine nets, and finite differences / autograd Jacobians at sampled points.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from privcore.lipschitz import (
    ReluNetwork,
    as_network,
    build_milp,
    decide_exact,
    global_upper_bound,
    interval_upper_bound,
    local_lipschitz,
    lp_upper_bound,
    operator_norm,
    sampled_lower_bound,
)
from privcore.lipschitz.backends import solve
from privcore.lipschitz.norms import Norms
from tests._nets import random_net
from tests._reference import brute_force_lipschitz

NORMS = [("linf", "l1"), ("linf", "linf"), ("l1", "l1"), ("l1", "linf")]
SOLVERS = ["gurobi", "highs"]


TINY = [(2, 4, 3, 2), (3, 5, 2), (2, 3, 3, 3), (3, 4, 4, 2)]


@pytest.mark.parametrize("solver", [*SOLVERS, "enumeration"])
@pytest.mark.parametrize("norms", NORMS, ids=lambda n: f"{n[0]}->{n[1]}")
def test_exact_equals_brute_force_on_tiny_nets(solver: str, norms: tuple[str, str]) -> None:
    """The MILP optimum equals the max pattern-Jacobian norm over patterns feasible in the box."""
    rng = np.random.default_rng(11)
    n_checked = 0
    kw = dict(input_norm=norms[0], output_norm=norms[1])
    for k, dims in enumerate(TINY):
        net = random_net(100 + k, dims)
        for radius in (0.3, 1.5):
            center = rng.standard_normal(dims[0])
            cert = local_lipschitz(net, center, radius, solver=solver, **kw)
            truth = brute_force_lipschitz(net, center, radius, **kw)
            assert cert.exact and cert.status == "optimal" and cert.solver == solver
            assert cert.upper == pytest.approx(truth, rel=1e-6, abs=1e-9)
            assert cert.lower <= cert.upper
            n_checked += cert.n_unstable > 0
    assert n_checked >= 5  # the sample really exercises unstable neurons


def test_solvers_agree_on_random_nets() -> None:
    """Gurobi and HiGHS return the same optimum (to the 1e-6 gap) on nets too big for brute force."""
    rng = np.random.default_rng(5)
    for k, dims in enumerate([(4, 8, 6), (5, 6, 6, 4), (8, 10, 8)]):
        net = random_net(200 + k, dims)
        for radius in (0.2, 0.7):
            center = rng.standard_normal(dims[0])
            milp = build_milp(net, center, radius)
            a = solve(milp, solver="gurobi", mip_gap=1e-9)
            b = solve(milp, solver="highs", mip_gap=1e-9)
            assert a.status == b.status == "optimal"
            assert a.upper == pytest.approx(b.upper, rel=1e-6)


@pytest.mark.parametrize("norms", NORMS, ids=lambda n: f"{n[0]}->{n[1]}")
def test_soundness_sampled_pairs_and_gradients(norms: tuple[str, str]) -> None:
    """No sampled pair's difference quotient nor autograd Jacobian in the ball exceeds ``upper``."""
    rng = np.random.default_rng(3)
    p_in = np.inf if norms[0] == "linf" else 1
    p_out = 1 if norms[1] == "l1" else np.inf
    for k, dims in enumerate([(4, 8, 6), (3, 6, 5, 3)]):
        torch.manual_seed(k)
        layers: list[torch.nn.Module] = []
        for i in range(len(dims) - 1):
            layers += [torch.nn.Linear(dims[i], dims[i + 1]).double(), torch.nn.ReLU()]
        module = torch.nn.Sequential(*layers[:-1])
        center = rng.standard_normal(dims[0])
        radius = 0.5
        cert = local_lipschitz(module, center, radius, input_norm=norms[0], output_norm=norms[1])
        tol = 1e-7 * (1 + cert.upper)
        x = center + rng.uniform(-radius, radius, size=(2000, dims[0]))
        y = center + rng.uniform(-radius, radius, size=(2000, dims[0]))
        with torch.no_grad():
            fx = module(torch.from_numpy(x)).numpy()
            fy = module(torch.from_numpy(y)).numpy()
        quot = np.linalg.norm(fx - fy, ord=p_out, axis=1) / np.linalg.norm(x - y, ord=p_in, axis=1)
        assert quot.max() <= cert.upper + tol
        for pt in x[:200]:
            jac = torch.autograd.functional.jacobian(module, torch.from_numpy(pt)).numpy()
            assert operator_norm(jac, input_norm=norms[0], output_norm=norms[1]) <= cert.upper + tol
        assert cert.lower <= cert.upper + tol


def test_affine_nets_equal_closed_form() -> None:
    """For an affine net L is the operator norm of W everywhere; the MILP (both solvers) agrees with
    the mechanisms engineer's exact ‖W‖∞→1 and with brute-force ℓ∞→ℓ1 enumeration."""
    from tests._affine import affine_linf_to_l1_norm

    rng = np.random.default_rng(8)
    for m, n in [(3, 5), (8, 8), (6, 2)]:
        w = rng.standard_normal((m, n))
        lin = torch.nn.Linear(n, m).double()
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w))
        brute = max(np.abs(w @ np.array(s)).sum() for s in itertools.product((-1.0, 1.0), repeat=n))
        assert affine_linf_to_l1_norm(w) == pytest.approx(brute, rel=1e-12)
        for solver in (*SOLVERS, "auto"):
            center = rng.standard_normal(n)
            for ni, no in NORMS:
                cert = local_lipschitz(lin, center, 0.3, input_norm=ni, output_norm=no, solver=solver)
                assert cert.exact
                assert cert.upper == pytest.approx(operator_norm(w, input_norm=ni, output_norm=no), rel=1e-6)
            cert = local_lipschitz(lin, center, 0.3, solver=solver)
            assert cert.upper == pytest.approx(brute, rel=1e-6)
        assert operator_norm(w, input_norm="l1", output_norm="l1") == pytest.approx(np.abs(w).sum(0).max())
        row_sums = np.abs(w).sum(1).max()
        assert operator_norm(w, input_norm="linf", output_norm="linf") == pytest.approx(row_sums)
        assert operator_norm(w, input_norm="l1", output_norm="linf") == pytest.approx(np.abs(w).max())


def test_linf_output_is_not_the_l1_output_norm() -> None:
    """LipMIP's 'l1Ball1' dual set computes ‖J‖∞→∞, which can be m times smaller than ‖J‖∞→1:
    an all-ones column map makes the gap exactly m."""
    m = 6
    w = np.ones((m, 1))
    net = ReluNetwork.from_arrays([w], [np.zeros(m)])
    a = local_lipschitz(net, np.zeros(1), 1.0, solver="highs")
    b = local_lipschitz(net, np.zeros(1), 1.0, output_norm="linf", solver="highs")
    assert a.upper == pytest.approx(m) and b.upper == pytest.approx(1.0)


def test_time_out_gives_valid_upper_bound_not_exact() -> None:
    """A tiny time limit: ``exact=False`` and ``upper`` is still ≥ the true constant (from a full solve)."""
    net = random_net(7, (8, 10, 8))
    center = np.random.default_rng(0).standard_normal(8)
    full = local_lipschitz(net, center, 0.5, solver="gurobi", time_limit=120)
    assert full.exact
    for solver in SOLVERS:
        cert = local_lipschitz(net, center, 0.5, solver=solver, time_limit=0.001)
        assert not cert.exact and cert.status == "time_limit"
        assert cert.upper >= full.upper * (1 - 1e-6)
        assert cert.lower <= full.upper * (1 + 1e-6)


def test_relaxations_bracket_and_are_monotone() -> None:
    """lower ≤ exact ≤ lp ≤ interval ≤ global, and lp/interval grow under ball inclusion (nested
    balls with moved centres: B(z', r') ⊆ B(z, r) whenever ‖z − z'‖∞ + r' ≤ r)."""
    rng = np.random.default_rng(21)
    for k, dims in enumerate([(4, 8, 6), (3, 6, 5, 3), (8, 10, 8)]):
        net = random_net(300 + k, dims)
        z = rng.standard_normal(dims[0])
        glob = global_upper_bound(net)
        prev_lp = prev_int = None
        for r in (0.05, 0.2, 0.5, 1.0):
            exact = local_lipschitz(net, z, r).upper
            lp = lp_upper_bound(net, z, r)
            itv = interval_upper_bound(net, z, r)
            low = sampled_lower_bound(net, z, r).value
            assert low <= exact * (1 + 1e-6) and exact <= lp * (1 + 1e-6) and lp <= itv + 1e-12
            assert itv <= glob * (1 + 1e-12)
            if prev_lp is not None:
                assert prev_lp <= lp * (1 + 1e-7) and prev_int <= itv
            prev_lp, prev_int = lp, itv
            # a smaller ball with a shifted centre, inside B(z, r)
            shift = rng.uniform(-1, 1, dims[0]) * r / 2
            inner_r = r / 2 - 1e-12
            assert lp_upper_bound(net, z + shift, inner_r) <= lp * (1 + 1e-7)
            assert interval_upper_bound(net, z + shift, inner_r) <= itv


def test_certificate_reports_model_size_and_solver() -> None:
    net = random_net(9, (8, 10, 8))
    center = np.zeros(8)
    cert = local_lipschitz(net, center, 0.5, solver="gurobi")
    assert cert.solver == "gurobi"
    assert cert.n_unstable > 0 and cert.n_variables > 0 and cert.n_constraints > 0
    assert isinstance(cert.seconds, float) and cert.model_hash == net.digest
    auto = local_lipschitz(net, center, 0.5)  # 10 hidden neurons: exact pattern enumeration
    assert auto.solver == "enumeration" and auto.exact
    assert auto.upper == pytest.approx(cert.upper, rel=1e-6)
    interval = local_lipschitz(net, center, 0.5, certifier="interval")
    assert interval.solver == "interval" and interval.upper >= auto.upper  # the exact value (enumeration)
    with pytest.raises(ValueError, match="input_norm"):
        local_lipschitz(net, center, 0.5, input_norm="l2")
    with pytest.raises(ValueError, match="radius"):
        local_lipschitz(net, center, -1.0)
    with pytest.raises(ValueError, match="dimension 8"):
        local_lipschitz(net, np.zeros(3), 0.5)


def test_auto_falls_back_to_highs_beyond_the_licence() -> None:
    """A model over 2000 variables/constraints goes to HiGHS under the pip licence."""
    from privcore.lipschitz.backends import choose_solver, gurobi_size_limit

    limit = gurobi_size_limit()
    net = random_net(1, (8, 400, 8), bias=0.0)
    milp = build_milp(net, np.zeros(8), 1.0)
    small = build_milp(random_net(1, (8, 10, 8)), np.zeros(8), 1.0)
    assert choose_solver(small) == "gurobi"
    if limit is not None:
        assert milp.n_constraints > limit
        assert choose_solver(milp) == "highs"


def test_torch_module_and_parsed_network_give_the_same_certificate() -> None:
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    net = as_network(module)
    center = np.array([0.1, -0.2, 0.3, 0.0])
    a = local_lipschitz(module, center, 0.4, solver="highs")
    b = local_lipschitz(net, center, 0.4, solver="highs")
    assert a.upper == b.upper and a.model_hash == b.model_hash


def test_lp_tightening_keeps_the_optimum_and_encloses_the_truth(monkeypatch: pytest.MonkeyPatch) -> None:
    """OBBT bounds still contain every sampled pre-activation and |Jᵀc| signal, make more neurons
    stable, and the MILP built on them has the same optimum as with interval bounds."""
    from privcore.lipschitz import engine
    from privcore.lipschitz.bounds import box_around, forward_bounds
    from privcore.lipschitz.tighten import tighten_bounds

    rng = np.random.default_rng(12)
    net = random_net(3, (4, 12, 12, 3))
    center = rng.standard_normal(4)
    lo, hi = box_around(center, 0.5)
    fwd = forward_bounds(net, lo, hi)
    tight = tighten_bounds(net, center, 0.5, fwd, Norms())
    assert tight.fwd.n_unstable < fwd.n_unstable
    pts = rng.uniform(lo, hi, size=(3000, 4))
    for pre, low, up in zip(net.preactivations(pts), tight.fwd.lower, tight.fwd.upper, strict=True):
        assert np.all(pre >= low) and np.all(pre <= up)
    cs = rng.choice((-1.0, 1.0), size=(3000, 3))
    jac = net.jacobians(pts)
    t = np.einsum("nkd,nk->nd", jac, cs)  # Jᵀc at each point
    assert np.all(np.abs(t) <= tight.signal[0] + 1e-9)
    plain = solve(build_milp(net, center, 0.5, fwd=fwd), solver="gurobi", mip_gap=1e-9)
    tightened = solve(build_milp(net, center, 0.5, fwd=tight.fwd, signal_bounds=tight.signal), solver="highs",
                      mip_gap=1e-9)
    assert tightened.upper == pytest.approx(plain.upper, rel=1e-6)
    # a deadline already past keeps the interval bounds (each bound is valid on its own)
    untouched = tighten_bounds(net, center, 0.5, fwd, Norms(), deadline=0.0)
    assert untouched.n_lps == 0 and untouched.fwd.n_unstable == fwd.n_unstable
    for a, b in zip(untouched.fwd.upper, fwd.upper, strict=True):
        assert np.array_equal(a, b)
    # through the engine (forced to tighten) the incumbent's pattern is read against the tightened
    # stable set and verified in float64: lower meets upper
    monkeypatch.setattr(engine, "TIGHTEN_MIN_UNSTABLE", 1)
    for solver in SOLVERS:
        cert = local_lipschitz(net, center, 0.5, solver=solver)
        assert cert.upper == pytest.approx(plain.upper, rel=1e-6)
        assert cert.lower >= cert.upper * (1 - 1e-9)


@pytest.mark.parametrize("kind", ["interval", "lp"])
def test_relaxed_certifiers_are_capped_by_the_global_pattern_bound(kind: str) -> None:
    """``lp``/``interval`` U = min(relaxation, G): ≥ the exact value, ≤ G at every radius, and monotone
    in the radius (G is one constant per model, so the cap keeps docs/DESIGN.md's inclusion argument)."""
    from privcore.lipschitz.engine import global_bound, relaxed_upper_bound

    net = random_net(7, (3, 4, 4, 2))
    G = global_bound(net)
    bits = np.array(list(itertools.product((0.0, 1.0), repeat=8)))
    jacs = net.jacobians(np.zeros((bits.shape[0], 3)), net.split_pattern(bits))
    brute_g = float(np.max(operator_norm(jacs)))
    assert brute_g <= G <= brute_g * (1 + 1e-8)
    center = np.random.default_rng(3).standard_normal(3)
    prev = 0.0
    for radius in (0.05, 0.3, 1.0, 3.0, 10.0, 100.0):
        u = relaxed_upper_bound(net, center, radius, kind=kind)
        cert = local_lipschitz(net, center, radius, certifier=kind)
        assert cert.upper == pytest.approx(u, rel=1e-12)
        assert brute_force_lipschitz(net, center, radius) <= u * (1 + 1e-9) + 1e-12
        assert prev <= u <= G
        prev = u
    plain = interval_upper_bound if kind == "interval" else lp_upper_bound
    assert plain(net, center, 100.0) > G  # the cap matters at large radii


def test_plain_sequential_chains_are_read_without_torch_fx(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.fx patches nn.Module.__call__ process-wide while tracing, which broke the dashboard's
    module calls in other threads; plain (nested) Sequential chains never trace, custom modules do."""
    import torch.fx

    from privcore.lipschitz.network import as_network

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(),
                              torch.nn.Sequential(torch.nn.Identity(), torch.nn.Linear(4, 2)))

    class Custom(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = torch.nn.Linear(3, 4), torch.nn.Linear(4, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(torch.relu(self.a(x)))

    custom = Custom()
    traced = []
    real = torch.fx.symbolic_trace
    monkeypatch.setattr(torch.fx, "symbolic_trace", lambda m, *a, **k: traced.append(m) or real(m, *a, **k))
    parsed = as_network(net)
    assert traced == [] and [w.shape for w in parsed.weights] == [(4, 3), (2, 4)]
    x = torch.randn(5, 3, dtype=torch.float64)
    np.testing.assert_allclose(parsed.forward(x.numpy()), net.double()(x).detach().numpy(), atol=1e-12)
    as_network(custom)
    assert traced == [custom]  # anything but a plain chain still goes through fx


def test_the_plain_chain_reader_never_certifies_a_forward_it_does_not_compute() -> None:
    """A Linear subclass whose forward differs from Linear's only where the equivalence check does
    not probe (far from the origin) used to be read as its weights; fx refuses it. Hooks (which
    neither reader sees) and a forward set on the instance are refused too."""
    from privcore.lipschitz.network import UnsupportedNetworkError, as_network

    class Gated(torch.nn.Linear):
        def forward(self, x: torch.Tensor) -> torch.Tensor:  # doubles its output for |x|∞ > 20
            y = super().forward(x)
            return y * (1 + (x.abs().amax(dim=-1, keepdim=True) > 20).to(y.dtype))

    def doubling(m: torch.nn.Module, inputs: tuple, out: torch.Tensor) -> torch.Tensor:
        return out * (1 + (inputs[0].abs().amax(dim=-1, keepdim=True) > 20).to(out.dtype))

    torch.manual_seed(0)
    with pytest.raises(UnsupportedNetworkError):
        as_network(torch.nn.Sequential(Gated(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)))

    hooked = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    as_network(hooked)  # parsed and memoised without a hook ...
    handle = hooked[0].register_forward_hook(doubling)
    with pytest.raises(UnsupportedNetworkError, match=r"'0'.*forward hook"):
        as_network(hooked)  # ... and refused once one is added (the memo does not stand in)
    handle.remove()
    as_network(hooked)

    handle = torch.nn.modules.module.register_module_forward_hook(doubling)
    try:
        with pytest.raises(UnsupportedNetworkError, match="global"):
            as_network(torch.nn.Sequential(torch.nn.Linear(3, 2)))
    finally:
        handle.remove()

    patched = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    plain_forward = patched.forward
    patched.forward = lambda x: 2 * plain_forward(x) if x.abs().max() > 20 else plain_forward(x)
    with pytest.raises(UnsupportedNetworkError, match="forward set on the instance"):
        as_network(patched)


def test_threads_bound_numpys_blas_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """``threads`` limits the BLAS pool while the engine works, and the limit is lifted after."""
    from threadpoolctl import threadpool_info

    import privcore.lipschitz.engine as engine

    def blas() -> list[int]:
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    seen: list[list[int]] = []
    real = engine.sampled_lower_bound

    def spy(*args: object, **kw: object) -> object:
        seen.append(blas())
        return real(*args, **kw)

    monkeypatch.setattr(engine, "sampled_lower_bound", spy)
    before = blas()
    net = random_net(3, (4, 6, 3))
    local_lipschitz(net, np.zeros(4), 0.3, threads=1)
    assert seen and all(n == 1 for n in seen[0])
    assert blas() == before


def test_a_query_naming_no_threads_runs_on_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """``threads=None`` (what the dashboard and the CLI pass) bounds BLAS and the solvers by
    ``DEFAULT_THREADS``, in the value API and in a decision alike."""
    from threadpoolctl import threadpool_info

    import privcore.lipschitz.decide as decide
    import privcore.lipschitz.engine as engine
    from privcore.lipschitz.blas import DEFAULT_THREADS

    def blas() -> list[int]:
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    seen: list[tuple[object, list[int]]] = []
    for module in (engine, decide):
        real = module.solve

        def spy(*args: object, _real=real, **kw: object) -> object:
            seen.append((kw.get("threads"), blas()))
            return _real(*args, **kw)

        monkeypatch.setattr(module, "solve", spy)
    net = random_net(3, (4, 12, 3))
    center = np.random.default_rng(3).standard_normal(4)
    cert = local_lipschitz(net, center, 0.5, solver="highs")
    decide_exact(net, center, 0.5, cert.upper * 0.99, steps=("milp",))
    assert len(seen) >= 2
    assert all(t == DEFAULT_THREADS and all(n <= DEFAULT_THREADS for n in b) for t, b in seen)
