"""The certified global mechanism: release f(clip z) + Lap(G·R/ε), pure (ε, 0, R), never ⊥.

Why it is private. Let B = [lower, upper] be a public box, fixed before any private input (the
training embeddings' range plus a margin, recorded in the model's card), and G ≥ sup over B of
‖J_f‖_{∞→1}, certified by this process (:func:`~privcore.lipschitz.global_box.certified_global_constant`).

* Clipping keeps neighbours neighbours: clip_B(z)_i = min(max(z_i, lower_i), upper_i) is monotone and
  1-Lipschitz in each coordinate, so ‖clip z − clip z'‖∞ ≤ ‖z − z'‖∞ ≤ R, and both points lie in B,
  however far outside B z or z' was. Clipping is exact in floating point (each output is one of its
  inputs), so this holds for the values computed.
* On B the sensitivity is G·R: B is convex, so the segment from clip z to clip z' stays in B; f is
  piecewise affine and continuous, so ‖f(x) − f(x')‖₁ ≤ sup over the segment of ‖J_f‖_{∞→1}·‖x − x'‖∞
  ≤ G·R (the Clarke mean-value inequality; LipMIP's G is the sup over the generalised Jacobian, which
  also covers segments along region boundaries).
* Float safety, exactly as PTR's release (:func:`~privcore.mechanisms.ptr.propose_test_release`): f is
  evaluated by :meth:`~privcore.lipschitz.rounding.CertifiedNet.within` in float64 within ℓ1 distance
  η = 2⁻²⁴·G·R of the exact f (η public: a function of G and R only), so what is computed has
  sensitivity ≤ G·R + 2η (:func:`~privcore.lipschitz.rounding.sensitivity_with_rounding`, rounded up).
* Noise: the project's exact discrete Laplace on a grid (:func:`~privcore.mechanisms.sampling.plan_laplace`,
  OS CSPRNG unless seeded) at scale (G·R + 2η)/ε per coordinate: ε-DP for that ℓ1 sensitivity (Dwork &
  Roth 2014, Thm. 3.6; Mironov 2012 for the grid). So every pair within ℓ∞ distance R of the embedding
  gets (ε, 0, R)-semantic-neighbourhood privacy (posthoc paper, Def. 1; the sampler's 2⁻³⁰⁰ residue
  aside, as for every Laplace release here).

Against PTR at the same total guarantee: PTR's (2ε, δ/2, R) costs Lap(Δp·R/ε), this mechanism at 2ε
costs Lap(G·R/(2ε)): the noise ratio is G/(2Δp) (below 1 for every shipped release-aware obfuscator,
bench/global_mechanism.py), with δ = 0, no ⊥ and no per-image solve. Its cost: G is a worst case over
the whole box, where PTR's Δp is a typical local constant.

The noise scale never depends on z (G, R, ε and the box are public); a z outside the box is released
as its clipped point, with the same noise. Nothing read from disk sets the scale: a card's G is only a
hint that :func:`card_global_constant` verifies (docs/TRUST.md); :func:`global_release` refuses any
constant this process did not certify.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from privcore.errors import CheckpointError
from privcore.lipschitz.global_box import (
    DEFAULT_TIME_LIMIT,
    ClipBox,
    GlobalConstant,
    certified_global_constant,
    is_certified,
)
from privcore.lipschitz.network import ReluNetwork, as_network
from privcore.lipschitz.rounding import CertifiedNet, rounding_allowance, sensitivity_with_rounding
from privcore.mechanisms.guarantee import Guarantee, Norm, Space
from privcore.mechanisms.sampling import (
    NoisePlan,
    RngLike,
    add_noise,
    as_random_bits,
    check_sampler_epsilon,
    plan_laplace,
)
from privcore.validation import check_positive

__all__ = [
    "GlobalPlan",
    "GlobalRelease",
    "GlobalScales",
    "card_clip_box",
    "card_global_constant",
    "card_global_hint",
    "card_plan",
    "global_plan",
    "global_release",
    "global_scales",
]

#: the registry name of the certified global mechanism (the guarantee names it)
MECHANISM = "Global"


def _guarantee(eps: float, r: float, g: float, how: str, mechanism: str = MECHANISM) -> Guarantee:
    eta = rounding_allowance(g * r)
    return Guarantee(
        epsilon=eps,
        delta=0.0,
        radius=r,
        space=Space.EMBEDDING,
        norm=Norm.LINF,
        mechanism=mechanism,
        definition="(ε, 0, R)-semantic-neighbourhood privacy (posthoc Def. 1 with δ = 0)",
        calibration=(
            f"Laplace: (G·R + 2η)/ε with G = {g:.7g} ({how}) over the public clipping box, "
            f"η = 2⁻²⁴·G·R = {eta:.3g} (bound on f's float64 rounding, ℓ1)"
        ),
    )


@dataclass(frozen=True, kw_only=True)
class GlobalScales:
    """The mechanism's numbers for given parameters, before any z (dashboards, tables).

    ``noise_scale`` = G·R/ε (the formula); ``sensitivity`` = G·R + 2η rounded up, what the sampler is
    calibrated to; ``noise_scale_effective`` what it draws (slightly larger,
    :mod:`privcore.mechanisms.sampling`)."""

    noise_scale: float
    noise_scale_effective: float
    sensitivity: float
    rounding: float
    global_lipschitz: float
    guarantee: Guarantee
    plan: NoisePlan


def global_scales(*, epsilon: float, radius: float, global_lipschitz: float, numel: int = 8,
                  how: str = "") -> GlobalScales:
    """:func:`global_release`'s scales for ``global_lipschitz`` = G (display only: a release takes a
    certified :class:`GlobalConstant`, never a number)."""
    eps = check_sampler_epsilon(epsilon)
    r = check_positive("radius", radius)
    g = check_positive("global_lipschitz", global_lipschitz)
    eta = rounding_allowance(g * r)
    sens = sensitivity_with_rounding(lipschitz=g, radius=r, rounding=eta)
    plan = plan_laplace(sensitivity=sens, epsilon=eps, numel=numel)
    return GlobalScales(noise_scale=g * r / eps, noise_scale_effective=plan.effective, sensitivity=sens,
                        rounding=eta, global_lipschitz=g, guarantee=_guarantee(eps, r, g, how or "given"),
                        plan=plan)


@dataclass(frozen=True, kw_only=True)
class GlobalRelease:
    """Outcome of :func:`global_release`: ``value`` = f(clip z) + noise, covered by ``guarantee`` =
    (ε, 0, R). Every other field is public (a function of G, R, ε and the box, never of z); ``plan`` is
    the sampler's plan (grid, integer scale) that drew the noise."""

    value: np.ndarray
    noise_scale: float
    noise_scale_effective: float
    sensitivity: float
    rounding: float
    global_lipschitz: float
    how: str
    box: ClipBox
    radius: float
    epsilon: float
    guarantee: Guarantee
    constant: GlobalConstant
    plan: NoisePlan

    def parameters(self) -> dict[str, Any]:
        """The public parameters of the release, JSON-ready (the API's ``document()["parameters"]``)."""
        return {
            "mechanism": "global",
            "epsilon": self.epsilon,
            "radius": self.radius,
            "global_lipschitz": self.global_lipschitz,
            "global_lipschitz_how": self.how,
            "global_lipschitz_source": self.constant.source,
            "clip_box": self.box.to_dict(),
            "noise_scale": self.noise_scale,
            "noise_scale_effective": self.noise_scale_effective,
            "sensitivity": self.sensitivity,
        }


_NETS: OrderedDict[str, CertifiedNet] = OrderedDict()
_LOCK = threading.Lock()


def _certified_net(f: Any, net: ReluNetwork) -> CertifiedNet:
    """The float64 evaluator of ``f`` (the rounding analysis of :mod:`privcore.lipschitz.rounding`),
    checked once per model digest to hold exactly the layers the engine certified G for."""
    with _LOCK:
        hit = _NETS.get(net.digest)
    if hit is not None:
        return hit
    if isinstance(f, ReluNetwork):
        layers: list[Any] = []
        for i, (w, b) in enumerate(zip(f.weights, f.biases, strict=True)):
            layers += [(w, b)] + ([None] if i < len(f.weights) - 1 else [])
        cnet = CertifiedNet.from_layers(layers)
    else:
        cnet = CertifiedNet.from_module(f)
    affine = [layer for layer in cnet.layers if layer is not None]
    relus = [layer is None for layer in cnet.layers]
    same = (
        len(affine) == len(net.weights)
        and relus == [False, *([True, False] * (len(net.weights) - 1))]
        and all(np.array_equal(w, nw) and np.array_equal(b, nb)
                for (w, b), nw, nb in zip(affine, net.weights, net.biases, strict=True))
    )
    if not same:
        raise TypeError(
            "f must be an alternating chain of Linear and ReLU layers (no two Linear layers in a row): the "
            "certified G is for the engine's parse of f, and the release must evaluate that same function"
        )
    with _LOCK:
        _NETS[net.digest] = cnet
        while len(_NETS) > 32:
            _NETS.popitem(last=False)
    return cnet


@dataclass(frozen=True, kw_only=True, eq=False)
class GlobalPlan:
    """Everything a global release at one (f, G, ε, R) computes before it sees z, made once per process
    (:func:`global_plan`): the float64 evaluator of f, η, the sensitivity, the sampler's plan and the
    guarantee. ``a_priori`` is :meth:`~privcore.lipschitz.rounding.CertifiedNet.error_bound` in ℓ1 over
    the box (every clipped z has |x_i| ≤ max(|lower_i|, |upper_i|)): when it is ≤ η, f̂(clip z) is
    within η of f(clip z) for every z, and a release evaluates f in plain float64; otherwise each
    release checks its own running-error bound (:meth:`~privcore.lipschitz.rounding.CertifiedNet.within`).
    Every number here is public: a function of G, R, ε, the box and the weights."""

    constant: GlobalConstant
    cnet: CertifiedNet
    epsilon: float
    radius: float
    rounding: float
    sensitivity: float
    a_priori: float
    noise: NoisePlan
    guarantee: Guarantee

    def evaluate(self, x: np.ndarray) -> np.ndarray:
        """f̂(x) for a point x of the box, within ℓ1 distance η of f(x) (ValueError otherwise)."""
        if self.a_priori <= self.rounding:
            return self.cnet(x)
        return self.cnet.within(x, eta=self.rounding, p=1).value

    def release(self, z: Any, rng: RngLike = None) -> GlobalRelease:
        """f(clip z) + the plan's noise (:func:`global_release`); z is checked, f evaluated, before any
        noise is drawn."""
        x = self.constant.box.clip(z)
        bits = as_random_bits(rng)
        try:
            output = self.evaluate(x)
        except ValueError as exc:
            raise ValueError(
                f"f(clip z) could not be certified within the rounding budget η = 2⁻²⁴·G·radius = "
                f"{self.rounding:.3g}: {exc}"
            ) from exc
        c = self.constant
        value = add_noise(output, self.noise, bits)
        return GlobalRelease(value=value, noise_scale=c.value * self.radius / self.epsilon,
                             noise_scale_effective=self.noise.effective, sensitivity=self.sensitivity,
                             rounding=self.rounding, global_lipschitz=c.value, how=c.how.value, box=c.box,
                             radius=self.radius, epsilon=self.epsilon, guarantee=self.guarantee, constant=c,
                             plan=self.noise)


_PLANS: OrderedDict[tuple[Any, ...], GlobalPlan] = OrderedDict()


def _checked_setting(epsilon: float, radius: float, constant: Any) -> tuple[float, float]:
    eps = check_sampler_epsilon(epsilon)
    r = check_positive("radius", radius)
    if not is_certified(constant):
        raise TypeError(
            "constant must be a GlobalConstant certified in this process (certified_global_constant or "
            f"card_global_constant), got {type(constant).__name__}: a stored G is only a hint"
        )
    return eps, r


def global_plan(f: Any, *, epsilon: float, radius: float, constant: GlobalConstant,
                mechanism: str = MECHANISM) -> GlobalPlan:
    """The :class:`GlobalPlan` of :func:`global_release` for the obfuscator ``f`` (checked as it now is:
    :func:`~privcore.lipschitz.network.as_network` tells a change of its weights), memoised per
    (constant, ε, R, mechanism) in this process. TypeError for a constant this process did not certify,
    ValueError for one certified for another network."""
    eps, r = _checked_setting(epsilon, radius, constant)
    return _plan(f, as_network(f), constant, eps, r, mechanism)


def card_plan(f: Any, card: Mapping[str, Any], *, epsilon: float, radius: float, where: str,
              time_limit: float = DEFAULT_TIME_LIMIT, mechanism: str = MECHANISM) -> GlobalPlan:
    """:func:`global_plan` with :func:`card_global_constant`'s G for ``f`` and its ``card``, ``f`` parsed
    once (one check of its weights per call). CheckpointError naming ``where`` (the model) when the card
    gives no certified G (no box, a bad box)."""
    eps = check_sampler_epsilon(epsilon)
    r = check_positive("radius", radius)
    net = as_network(f)
    try:
        constant = _card_constant(f, net, card, time_limit)
    except ValueError as exc:
        raise CheckpointError(f"{where}: {exc}") from exc
    return _plan(f, net, constant, eps, r, mechanism)


def _plan(f: Any, net: ReluNetwork, constant: GlobalConstant, eps: float, r: float, mechanism: str
          ) -> GlobalPlan:
    """The memoised plan for ``f`` whose parse, as it now is, is ``net``."""
    if net.digest != constant.model_digest:
        raise ValueError(
            f"constant was certified for model {constant.model_digest[:12]}…, not for f "
            f"({net.digest[:12]}…); nothing released"
        )
    key = (id(constant), eps, r, mechanism)
    with _LOCK:
        hit = _PLANS.get(key)
    if hit is not None and hit.constant is constant:
        return hit
    cnet = _certified_net(f, net)
    g, box = constant.value, constant.box
    eta = rounding_allowance(g * r)  # public: a function of G and R only
    sens = sensitivity_with_rounding(lipschitz=g, radius=r, rounding=eta)
    try:
        a_priori = cnet.error_bound(p=1, input_bound=np.maximum(np.abs(box.lower), np.abs(box.upper)))
    except ValueError:  # the a-priori bound overflows: every release checks its own
        a_priori = math.inf
    noise = plan_laplace(sensitivity=sens, epsilon=eps, numel=max(1, cnet.out_dim))
    plan = GlobalPlan(constant=constant, cnet=cnet, epsilon=eps, radius=r, rounding=eta, sensitivity=sens,
                      a_priori=a_priori, noise=noise,
                      guarantee=_guarantee(eps, r, g, constant.how.value, mechanism))
    with _LOCK:
        _PLANS[key] = plan
        while len(_PLANS) > 64:
            _PLANS.popitem(last=False)
    return plan


def global_release(
    f: Any,
    z: Any,
    *,
    epsilon: float,
    radius: float,
    constant: GlobalConstant,
    rng: RngLike = None,
    mechanism: str = MECHANISM,
) -> GlobalRelease:
    """Release f(clip z) + Lap((G·R + 2η)/ε) per coordinate: (ε, 0, R)-private (module docstring).

    ``f``: the obfuscator (a torch module of Linear/ReLU layers, or a
    :class:`~privcore.lipschitz.network.ReluNetwork`); ``z``: its embedding (the box's dimension);
    ``constant``: G from :func:`~privcore.lipschitz.global_box.certified_global_constant` (or
    :func:`card_global_constant`) for this very network, in this process: anything else raises.
    Every parameter is validated and f(clip z) evaluated before any noise is drawn; an error raises
    and nothing is released. ``rng``: None for the OS CSPRNG (releases); a seed only for tests.
    What does not depend on z is computed once per process (:func:`global_plan`)."""
    plan = global_plan(f, epsilon=epsilon, radius=radius, constant=constant, mechanism=mechanism)
    return plan.release(z, rng)


def card_clip_box(card: Mapping[str, Any]) -> ClipBox | None:
    """The public clipping box an obfuscator card records (``global_lipschitz.clip_box``), or None.
    A box is a parameter (any box gives the guarantee once G is certified for it), so reading it from
    disk is safe."""
    block = card.get("global_lipschitz") if isinstance(card, Mapping) else None
    if not isinstance(block, Mapping) or not isinstance(block.get("clip_box"), Mapping):
        return None
    return ClipBox.from_dict(block["clip_box"])


def card_global_hint(card: Mapping[str, Any]) -> float | None:
    """The G a card stores (``global_lipschitz.value``): a hint to verify, never used as is. None when
    there is none or it is no finite number > 0 (0, negative, NaN, ∞, a string, a bool): a bad hint is
    ignored and G computed from the weights, as without one."""
    block = card.get("global_lipschitz") if isinstance(card, Mapping) else None
    value = block.get("value") if isinstance(block, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        hint = float(value)
    except OverflowError:  # an integer beyond float64
        return None
    return hint if math.isfinite(hint) and hint > 0 else None


_CARD_CONSTANTS: OrderedDict[tuple[Any, ...], GlobalConstant] = OrderedDict()


def _card_key(digest: str, card: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """The memo key of a card's G for the model with ``digest``: the box's values as given and the hint
    (None where they are not hashable; such a card is read in full every time)."""
    block = card.get("global_lipschitz") if isinstance(card, Mapping) else None
    box = block.get("clip_box") if isinstance(block, Mapping) else None
    if not isinstance(box, Mapping):
        return None
    try:
        key = (digest, tuple(box["lower"]), tuple(box["upper"]), card_global_hint(card))
        hash(key)
    except (KeyError, TypeError):
        return None
    return key


def _card_constant(f: Any, net: ReluNetwork, card: Mapping[str, Any], time_limit: float) -> GlobalConstant:
    """:func:`card_global_constant` for ``f`` whose parse, as it now is, is ``net``: memoised per (model
    digest, the card's box values, its hint), so a card is read and its box validated once; equal keys
    hold equal numbers, hence the same float64 box (and the constant carries the box it certifies)."""
    key = _card_key(net.digest, card)
    with _LOCK:
        hit = None if key is None else _CARD_CONSTANTS.get(key)
    if hit is not None:
        return hit
    box = card_clip_box(card)
    if box is None:
        raise ValueError(
            "the card records no clipping box (global_lipschitz.clip_box); write one with "
            "`privcore global compute --dataset D --variant V`"
        )
    constant = certified_global_constant(f, box, hint=card_global_hint(card), time_limit=time_limit)
    if key is not None and constant.model_digest == net.digest:
        with _LOCK:
            _CARD_CONSTANTS[key] = constant
            while len(_CARD_CONSTANTS) > 64:
                _CARD_CONSTANTS.popitem(last=False)
    return constant


def card_global_constant(f: Any, card: Mapping[str, Any], *, time_limit: float = DEFAULT_TIME_LIMIT
                         ) -> GlobalConstant:
    """G for ``f`` over the box its ``card`` records: the card's G when this process verifies it, else
    computed here (:func:`~privcore.lipschitz.global_box.certified_global_constant`, memoised). ValueError
    when the card has no box (``privcore global compute`` writes one)."""
    return _card_constant(f, as_network(f), card, time_limit)
