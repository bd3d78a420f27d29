"""The clipped global Gaussian mechanism: f(clip z) + N(0, σ²I), (ε, δ, R), never ⊥.

Why it is private (as the global Laplace mechanism, :mod:`privcore.mechanisms.global_mechanism`, with
ℓ2 on the output). Clipping to the card's public box B keeps pairs within ℓ∞ distance R; on the convex
box, ‖f(x) − f(x')‖₂ ≤ G₂·‖x − x'‖∞ with G₂ ≥ sup over B of ‖J_f‖_{∞→2} (the Clarke mean-value
inequality, as for ∞→1). f is evaluated in float64 within ℓ2 distance η = 2⁻²⁴·G₂·R of the exact f, so
the computed output's ℓ2 sensitivity is ≤ Δ = G₂·R + 2η (rounded up). σ is Balle & Wang's analytic
Gaussian for (ε, δ) at Δ (2018, Thm 8), and the project's exact discrete Gaussian sampler draws at
σ_eff ≥ σ, calibrated for (ε, δ) at Δ itself (:func:`~privcore.mechanisms.sampling.plan_gaussian`).

G₂, computed here from the weights and memoised per model and box (:func:`certified_l2_constant`):
LipMIP's value over a box is the largest ‖J_D‖ over the activation patterns D whose region meets it
(Jordan & Dimakis 2020, Thm 3.2, for any norm pair). Since ‖·‖₂ ≤ ‖·‖₁, every pattern with ∞→2 norm
above τ is among those with ∞→1 norm above τ (:func:`~privcore.lipschitz.patterns.threshold_pattern_table`),
so with τ a sampled witness: those candidates in decreasing ∞→2 norm, each region tested against the box
(:func:`~privcore.lipschitz.regions.polytope_in_box`); the first that meets it gives ``exact``, and a
deadline or an unsolved LP leaves a certified ``pattern-bound``. Where the table does not apply, the
certified ∞→1 constant G ≥ G₂ (``l1-bound``). Never inf.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from privcore._inflight import Memo
from privcore.mechanisms.posthoc import (
    Posthoc,
    classes,
    clipped_outputs,
    embedding,
    model_block,
    out_dim,
    predict,
)
from privcore.mechanisms.protocol import (
    DELTA,
    EPSILON,
    RADIUS,
    Options,
    Outlook,
    Release,
    Setting,
    Simulation,
)

__all__ = ["GlobalGauss", "L2Constant", "certified_l2_constant", "inf_to_two"]

#: exact ∞→2 norms by sign enumeration up to this input dimension (2^(d−1) vectors)
_MAX_SIGN_DIM = 16
_CHUNK = 512


def inf_to_two(jac: np.ndarray) -> tuple[np.ndarray, bool]:
    """‖J‖_{∞→2} = max over sign vectors s of ‖J s‖₂ for a stack (k, m, d), and whether it is exact
    (d ≤ 16); past that min(‖J‖_{∞→1}, √d·‖J‖₂), an upper bound."""
    jac = np.asarray(jac, dtype=np.float64)
    d = jac.shape[-1]
    if d <= _MAX_SIGN_DIM:
        half = ((np.arange(1 << (d - 1))[:, None] >> np.arange(d)) & 1) * 2.0 - 1.0  # s and −s alike
        return np.sqrt(np.max(np.sum(np.square(jac @ half.T), axis=-2), axis=-1)), True
    from privcore.lipschitz.norms import DEFAULT_NORMS

    spectral = np.linalg.norm(jac, ord=2, axis=(-2, -1)) * math.sqrt(d)
    return np.minimum(np.asarray(DEFAULT_NORMS.of(jac)), spectral), False


@dataclass(frozen=True, kw_only=True)
class L2Constant:
    """G₂ ≥ sup over ``box`` of ‖J_f‖_{∞→2} for the network with ``model_digest``, certified by this
    process (module docstring); ``how``: exact, pattern-bound or l1-bound; ``lower`` a witness."""

    value: float
    how: str
    lower: float
    box: Any
    model_digest: str
    seconds: float


#: G₂ per (model digest, box digest), computed once across threads (the warm-up and a page ask together)
_MEMO = Memo(max_entries=64)


def _pattern_jacobians(net: Any, bits: np.ndarray) -> np.ndarray:
    """J_D for each 0/1 pattern row of ``bits`` (k, n_hidden): (k, m, d)."""
    jac = np.broadcast_to(net.weights[0], (bits.shape[0], *net.weights[0].shape))
    start = 0
    for w, width in zip(net.weights[1:], net.hidden_widths, strict=True):
        s = bits[:, start:start + width].astype(np.float64)
        start += width
        jac = np.matmul(w, s[:, :, None] * jac)
    return np.asarray(jac)


def _witness(net: Any, box: Any, n: int = 4096, seed: int = 0) -> float:
    """max ‖J(x)‖_{∞→2} over sampled points of the box (the centre, uniform points, vertices)."""
    rng = np.random.default_rng(seed)
    lo, hi = box.lower, box.upper
    pts = np.vstack([(lo + hi)[None] / 2.0, rng.uniform(lo, hi, size=(n, box.dim)),
                     np.where(rng.random((n // 2, box.dim)) < 0.5, lo, hi)])
    vals, _ = inf_to_two(net.jacobians(pts))
    return float(np.max(vals))


def _row_bound(jac: np.ndarray) -> np.ndarray:
    """A cheap upper bound on ‖J‖_{∞→2} per matrix of a stack: √Σ_i ‖row_i‖₁² (|row_i·s| ≤ ‖row_i‖₁)."""
    return np.sqrt(np.sum(np.square(np.abs(jac).sum(axis=-1)), axis=-1))


def _by_patterns(net: Any, box: Any, tau: float, deadline: float) -> tuple[float, str] | None:
    """max(τ, the largest ∞→2 norm of a pattern meeting the box) as (bound, how), or None where the
    threshold table does not apply (module docstring). Candidates are ranked by a cheap upper bound and
    their exact norms computed lazily, a chunk at a time, best first: a candidate is tested only once
    every candidate not yet computed is known to lie below it."""
    import heapq

    from privcore.lipschitz.bounds import forward_bounds
    from privcore.lipschitz.box_patterns import _row_refuted
    from privcore.lipschitz.codes import to_bits
    from privcore.lipschitz.norms import DEFAULT_NORMS
    from privcore.lipschitz.patterns import stable_masks, threshold_pattern_table
    from privcore.lipschitz.regions import polytope_in_box, region_rows

    table = threshold_pattern_table(net, tau, DEFAULT_NORMS, last_bound=_row_bound)
    if table is None:
        return None
    on, off = stable_masks(forward_bounds(net, box.lower, box.upper))
    keep = table.consistent(on, off)
    codes, upper = table.codes[keep], np.asarray(table.norms[keep], dtype=np.float64)
    for s0 in range(0, codes.size, 8 * _CHUNK):  # a tighter bound than ∞→1, for the ranking
        sl = slice(s0, s0 + 8 * _CHUNK)
        jac = _pattern_jacobians(net, to_bits(codes[sl], net.n_hidden))
        upper[sl] = np.minimum(upper[sl], _row_bound(jac))
    order = np.argsort(-upper, kind="stable")
    codes, upper = codes[order], upper[order] * (1.0 + 1e-12)
    all_exact, first = True, net.hidden_widths[0]
    heap: list[tuple[float, int, np.ndarray]] = []
    prefix_empty: dict[bytes, bool] = {}
    i = 0
    while True:
        rest = upper[i] if i < codes.size else tau  # every candidate not yet computed is ≤ rest
        if heap and -heap[0][0] > rest:
            value, _, bits = heapq.heappop(heap)
            value = -value
            if value <= tau:
                break
            if time.perf_counter() > deadline:
                return value, "pattern-bound"
            G, h = region_rows(net, bits[None])
            if _row_refuted(G, h, box.lower, box.upper)[0]:
                continue
            if len(net.weights) > 2:  # the first layer's rows alone: one LP per first-layer pattern
                key = bits[:first].astype(np.uint8).tobytes()
                if key not in prefix_empty:
                    prefix_empty[key] = not polytope_in_box(G[0, :first], h[0, :first], box.lower,
                                                            box.upper)[0]
                if prefix_empty[key]:
                    continue
            meets, point = polytope_in_box(G[0], h[0], box.lower, box.upper)
            if meets:
                return value, "exact" if (all_exact and point is not None) else "pattern-bound"
        elif i < codes.size:
            bits = to_bits(codes[i:i + _CHUNK], net.n_hidden)
            values, exact = inf_to_two(_pattern_jacobians(net, bits))
            all_exact &= exact
            for k in range(bits.shape[0]):
                heapq.heappush(heap, (-float(values[k]), i + k, bits[k]))
            i += bits.shape[0]
        else:
            break
    return tau, "exact" if all_exact else "pattern-bound"


def certified_l2_constant(f: Any, box: Any, *, time_limit: float = 60.0) -> L2Constant:
    """G₂ over ``box`` for ``f`` (a torch module of Linear/ReLU layers or a ReluNetwork), computed
    here from the weights (module docstring), memoised per model digest and box."""
    from privcore.lipschitz.global_box import certified_global_constant, publish_bound
    from privcore.lipschitz.network import as_network

    net = as_network(f)

    def compute() -> L2Constant:
        start = time.perf_counter()
        lower = _witness(net, box)
        found = _by_patterns(net, box, lower, start + time_limit) if lower > 0 else None
        if found is None:
            value, how = certified_global_constant(f, box, time_limit=time_limit).value, "l1-bound"
        else:
            value, how = found
        return L2Constant(value=publish_bound(max(value, 0.0)), how=how, lower=lower, box=box,
                          model_digest=net.digest, seconds=time.perf_counter() - start)

    return _MEMO.get((net.digest, box.digest), compute)


def _guarantee(eps: float, dlt: float, r: float, g2: float, sigma: float, how: str, name: str) -> Any:
    from privcore.lipschitz.rounding import rounding_allowance
    from privcore.mechanisms.guarantee import Guarantee, Norm, Space

    eta = rounding_allowance(g2 * r)
    return Guarantee(
        epsilon=eps, delta=dlt, radius=r, space=Space.EMBEDDING, norm=Norm.LINF, mechanism=name,
        definition="(ε, δ, R)-semantic-neighbourhood privacy (posthoc Def. 1)",
        calibration=(f"analytic Gaussian σ = {sigma:.6g} at ℓ2 sensitivity G₂·R + 2η with G₂ = {g2:.7g} "
                     f"(∞→2, {how}) over the public clipping box, η = 2⁻²⁴·G₂·R = {eta:.3g}"),
    )


@dataclass(frozen=True, kw_only=True)
class GlobalGauss(Posthoc):
    """f(clip z) + N(0, σ²I) with σ the analytic Gaussian's at ℓ2 sensitivity G₂·R: (ε, δ, R), never ⊥."""

    name: str = "Global-Gauss"
    label: str = "Global Gaussian (certified)"
    parameters: tuple = (EPSILON, DELTA, RADIUS)
    needs: str = "the obfuscator and its card's public clipping box; G₂ (∞→2) over the box, certified here"
    description: str = "f(clip z) + N(0, σ²I), σ analytic for (ε, δ) at G₂·R: never ⊥, nothing per image"
    source: str = "docs/DESIGN.md, \"Beyond the papers\"; Balle & Wang 2018"
    guarantee: str = "(ε, δ, R)"

    uses_options: ClassVar[frozenset[str]] = frozenset({"time_limit", "rng"})

    def _scales(self, pipe: Any, setting: Setting, time_limit: float | None) -> tuple[Any, float, float, Any]:
        from privcore.errors import CheckpointError
        from privcore.lipschitz.rounding import rounding_allowance, sensitivity_with_rounding
        from privcore.mechanisms.gaussian_calibration import analytic_gaussian_sigma
        from privcore.mechanisms.global_mechanism import card_clip_box
        from privcore.mechanisms.sampling import plan_gaussian

        box = card_clip_box(pipe.cards["obfuscator"])
        if box is None:
            raise CheckpointError(f"{pipe.dataset}/{pipe.obfuscator_name}: the card records no clipping box")
        constant = certified_l2_constant(pipe.obfuscator, box, time_limit=60.0 if time_limit is None
                                         else time_limit)
        r = self.radius(pipe, setting)
        sens = sensitivity_with_rounding(lipschitz=constant.value, radius=r,
                                         rounding=rounding_allowance(constant.value * r))
        sigma = analytic_gaussian_sigma(epsilon=setting.epsilon, delta=setting.delta, sensitivity=sens)
        plan = plan_gaussian(sigma=sigma, sensitivity=sens, epsilon=setting.epsilon, delta=setting.delta,
                             numel=out_dim(pipe))
        return constant, r, sigma, plan

    def spent(self, setting: Setting) -> Any:
        from dataclasses import replace

        g = _guarantee(setting.epsilon, setting.delta, float(setting.radius), 1.0, 1.0, "", self.name)
        return replace(g, calibration="")  # G₂ and σ do not enter (ε, δ, R)

    def outlook(self, target: Any, setting: Setting, *, time_limit: float | None = 60.0,
                certification: Any = None) -> Outlook:
        constant, r, sigma, plan = self._scales(target, setting, time_limit)
        return Outlook(mechanism=self.name,
                       guarantee=_guarantee(setting.epsilon, setting.delta, r, constant.value, sigma,
                                            constant.how, self.name),
                       noise_scale=sigma, noise_scale_effective=float(plan.effective),
                       noise=(f"Gaussian σ = {sigma:.4g} per coordinate (G₂ = {constant.value:.4g}, "
                              f"{constant.how})"),
                       release_probability=1.0,
                       public={"radius": r, "global_lipschitz_l2": constant.value,
                               "global_lipschitz_l2_how": constant.how, "clip_box": constant.box.to_dict()})

    def simulate(self, target: Any, inputs: Any, setting: Setting, rng: Any, *,
                 certificates: Any = None) -> Simulation:
        sim = self.simulate_release(target, inputs, setting, rng)
        return replace(sim, predicted=classes(target, sim.values, sim.told_scale))

    def told_scale(self, release: Release) -> tuple[float, bool]:
        return float(release.noise_scale_effective) / math.sqrt(2.0), True

    def simulate_release(self, target: Any, inputs: Any, setting: Setting, rng: Any) -> Simulation:
        constant, _, _, plan = self._scales(target, setting, None)
        out = clipped_outputs(target, constant.box, np.asarray(inputs, dtype=np.float64))
        sigma = float(plan.effective)
        values = out + rng.normal(0.0, sigma, size=out.shape)
        # told as the Laplace scale of the same variance (b = σ/√2), as the release classifier is
        return Simulation(predicted=None, released=np.ones(len(out), bool), values=values,
                          noise_scale_effective=sigma, told_scale=sigma / math.sqrt(2.0), gaussian=True)

    def release(self, target: Any, x: Any, setting: Setting, options: Options | None = None) -> Release:
        from privcore.lipschitz.network import as_network
        from privcore.lipschitz.rounding import rounding_allowance
        from privcore.mechanisms.global_mechanism import _certified_net
        from privcore.mechanisms.sampling import add_noise, as_random_bits

        opts = Options() if options is None else options
        self.check_options(opts)
        z = embedding(target, x)
        constant, r, sigma, plan = self._scales(target, setting, opts.time_limit)
        net = as_network(target.obfuscator)
        if net.digest != constant.model_digest:
            raise ValueError("G₂ was certified for another model; nothing released")
        eta = rounding_allowance(constant.value * r)
        output = _certified_net(target.obfuscator, net).within(constant.box.clip(z), eta=eta, p=2).value
        bits = as_random_bits(opts.rng)
        value = tuple(float(v) for v in np.asarray(add_noise(output, plan, bits)).ravel())
        # the release classifier is told a Laplace scale: the one with the same variance (b = σ/√2)
        told = float(plan.effective) / math.sqrt(2.0)
        return Release(mechanism=self.name, released=True, value=value,
                       prediction=functools.partial(predict, target, value, told),
                       guarantee=_guarantee(setting.epsilon, setting.delta, r, constant.value, sigma,
                                            constant.how, self.name),
                       epsilon=setting.epsilon, delta=setting.delta, noise_scale=sigma,
                       noise_scale_effective=float(plan.effective),
                       public={"radius": r, "global_lipschitz_l2": constant.value,
                               "global_lipschitz_l2_how": constant.how, "clip_box": constant.box.to_dict()},
                       model=model_block(target), mechanism_result=constant)
