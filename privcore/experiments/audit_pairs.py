"""The pairs of inputs the privacy audit (:mod:`privcore.experiments.audit`) releases from.

Worst-case pairs (``pair = "worst-case"``):

* Lap-Output / Gauss-Output: model outputs whose difference has exactly the sensitivity μα
  (ℓ1 for Laplace, ℓ2 for Gauss), all in one coordinate; the mechanism is what adds the noise,
  so this pair attains the proof's bound whatever the model.
* Gauss-Input: an image and the same image moved by α (ℓ2) along one pixel.
* LDP-Image: the all-black and all-white image (ℓ1 distance = number of pixels).
* LDP-Embedding: the opposite corners ±B·1 of the clipping box.
* Global / Global-Gauss: a one-hidden-layer ReLU net with f(z) = z on the public box [−1, 1] (so G = G₂ =
  1, certified by the mechanism itself), the pair z_a = 0, z_b = R, released through the mechanism
  protocol's own ``release`` (clipping, certified evaluation, calibration and the exact sampler):
  ‖f(z_a) − f(z_b)‖ = G·R, the sensitivity the noise covers, so the pair is worst case.
* PTR: a one-dimensional f(z) = Δp·z with a sensitivity oracle that certifies Δp exactly on
  [−c, c] and 2Δp outside, and the pair z_b = 0, z_a = R, with c chosen so that φ(z_b) sits on
  the test threshold. Then φ differs by R (the test part is worst case) *and* ‖f(z_a) − f(z_b)‖₁ =
  Δp·R (the release part is worst case): the audit can see up to the 2ε of Theorem 4.4.

Per-mechanism parameters are the dataset's (output dimension, image shape, radius); the noise
calibration is invariant to the scale of μ, so μ = 1 is used for the synthetic pairs.

Model pairs (``pair = "model"``, quick and full modes, when the shipped models exist): a real
test input and the neighbour at distance α (IP) or R (PTR) that moves the model's output most,
chosen from the Jacobian at the input — for Lap-Output one pixel by α (ℓ1), for Gauss-Output
α along the top singular vector (ℓ2), for PTR R·s with s ∈ {±1}^k maximising ‖J_f s‖₁ — run
through the shipped model and the mechanism. These show how far a realistic pair sits below
the worst case that the calibration must cover.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from privcore.attacks.audit import laplace_llr_statistic, projection_statistic
from privcore.experiments.runner import RunContext

__all__ = ["AUDIT_MODELS", "AuditCase", "global_worst_cases", "model_audits", "ptr_worst_case",
           "worst_case_audits"]

Draw = Callable[[int, np.random.Generator], Any]

#: the shipped model each mechanism's model pair (``pair = "model"``) runs through
AUDIT_MODELS = {"Lap-Output": "ip-lipschitz-l1", "Gauss-Output": "ip-lipschitz-l2", "PTR": "ARL-C-N"}


@dataclass(frozen=True)
class AuditCase:
    """One audit: two release samplers, the statistic, and the claim under test."""

    mechanism: str
    pair: str
    epsilon_claimed: float
    delta_claimed: float
    distance: float
    draw_a: Draw
    draw_b: Draw
    statistic: Callable[[Any], np.ndarray]
    n_releases: int
    control: bool = False


def _tiled(mech: Any, v: np.ndarray) -> Draw:
    def draw(n: int, rng: np.random.Generator) -> np.ndarray:
        return mech(np.broadcast_to(v, (n, *v.shape)).copy(), rng=rng)

    return draw


class _BandOracle:
    """Certifies L(f, B(z, r)) = Δp when B(z, r) ⊆ [−c, c] and 2Δp otherwise, for f(z) = Δp·z on
    [−c, c] (steeper outside). Monotone under ball inclusion (max(|z − r|, |z + r|) grows with the
    ball), as compute_phi requires; exact for the f it describes."""

    def __init__(self, delta_p: float, c: float) -> None:
        self.delta_p, self.c = delta_p, c

    def __call__(self, f: Any, center: np.ndarray, radius: float, /) -> float:
        return self.delta_p if abs(float(center[0])) + radius <= self.c else 2.0 * self.delta_p


def ptr_worst_case(
    *, epsilon: float, delta: float, radius: float, n_releases: int, delta_p: float = 1.0
) -> AuditCase:
    """The PTR audit case of the module docstring (φ(z_b) on the threshold, φ(z_a) = φ(z_b) − R)."""
    from privcore.mechanisms.ptr import compute_phi, propose_test_release, ptr_scales

    threshold = ptr_scales(epsilon=epsilon, delta=delta, radius=radius, delta_p=delta_p).threshold
    c = threshold + radius + 1e-3 * radius
    oracle = _BandOracle(delta_p, c)
    grid = dict(radius=radius, delta_p=delta_p, r_max=c + radius, tol=1e-4 * radius)

    def f(z: Any) -> Any:
        return delta_p * z

    za, zb = np.array([radius]), np.array([0.0])
    phis = {
        id(za): compute_phi(f, za, lipschitz=oracle, **grid),
        id(zb): compute_phi(f, zb, lipschitz=oracle, **grid),
    }

    def sampler(z: np.ndarray) -> Draw:
        phi = phis[id(z)]

        def draw(n: int, rng: np.random.Generator) -> np.ndarray:
            out = np.full((n, 1), np.nan)  # ⊥ rows stay NaN
            for i in range(n):
                res = propose_test_release(
                    f, z, epsilon=epsilon, delta=delta, lipschitz=oracle, rng=rng, phi=phi, **grid
                )
                if res.released:
                    out[i] = res.value
            return out

        return draw

    return AuditCase(
        mechanism="PTR",
        pair="worst-case",
        epsilon_claimed=2.0 * epsilon,  # Theorem 4.4: (2ε, δ/2, R)
        delta_claimed=delta / 2.0,
        distance=radius,
        draw_a=sampler(za),
        draw_b=sampler(zb),
        statistic=projection_statistic(f(za), f(zb)),
        n_releases=n_releases,
    )


@dataclass(frozen=True)
class _SyntheticPipeline:
    """What a posthoc mechanism needs from a pipeline, for the audit's synthetic f (no classifier: the
    audit reads the released vector itself)."""

    obfuscator: Any
    cards: dict[str, Any]
    radius: float
    dataset: str = "audit"
    obfuscator_name: str = "identity-on-box"
    latent_dim: int = 1

    def classify(self, v: Any, noise_scale: float = 0.0) -> Any:
        import torch

        return torch.zeros((len(v), 2))


def _identity_on_box(radius: float) -> _SyntheticPipeline:
    """f(z) = ½(z + 2) − ½(−z + 2) = z on [−1, 1] (both hidden units active there); box [−1, 1]."""
    import torch
    from torch import nn

    f = nn.Sequential(nn.Linear(1, 2), nn.ReLU(), nn.Linear(2, 1)).double()
    with torch.no_grad():
        f[0].weight.copy_(torch.tensor([[1.0], [-1.0]], dtype=torch.float64))
        f[0].bias.copy_(torch.tensor([2.0, 2.0], dtype=torch.float64))
        f[2].weight.copy_(torch.tensor([[0.5, -0.5]], dtype=torch.float64))
        f[2].bias.zero_()
    card = {"global_lipschitz": {"clip_box": {"lower": [-1.0], "upper": [1.0]}},
            "weights": {"sha256": "audit"}}
    return _SyntheticPipeline(obfuscator=f, cards={"obfuscator": card}, radius=radius)


def global_worst_cases(*, epsilon: float, delta: float, radius: float, n_releases: int) -> list[AuditCase]:
    """The Global and Global-Gauss audit cases of the module docstring at total ε (and δ for the
    Gaussian), through the registry's mechanisms."""
    from privcore.mechanisms import registry
    from privcore.mechanisms.protocol import Options

    pipe = _identity_on_box(min(radius, 1.0))
    za, zb = np.array([0.0]), np.array([pipe.radius])
    cases = []
    for name, stat in (("Global", laplace_llr_statistic), ("Global-Gauss", projection_statistic)):
        mech = registry.get(name)
        setting = mech.setting(epsilon=epsilon, delta=delta, radius=pipe.radius)

        def sampler(z: np.ndarray, mech: Any = mech, setting: Any = setting) -> Draw:
            def draw(n: int, rng: np.random.Generator) -> np.ndarray:
                options = Options(rng=rng)
                return np.array([mech.release(pipe, z, setting, options).value for _ in range(n)])

            return draw

        cases.append(AuditCase(mech.name, "worst-case", epsilon, setting.delta, pipe.radius, sampler(za),
                               sampler(zb), stat(za, zb), n_releases))
    return cases


def worst_case_audits(
    *,
    epsilons: tuple[float, ...],
    n_fast: int,
    n_ptr: int,
    image_shape: tuple[int, ...],
    n_classes: int,
    latent_dim: int,
    radius: float,
    max_values: int = 10_000_000,
) -> list[AuditCase]:
    """Every mechanism's worst-case audit (module docstring) at each ε, plus the half-noise controls."""
    from privcore.mechanisms import GaussInput, GaussOutput, LapOutput, LDPEmbedding, LDPImage

    d_img = int(np.prod(image_shape))
    n_img = max(1000, min(n_fast, max_values // d_img))
    cases: list[AuditCase] = []
    alpha_lap, alpha_gauss, mu, bound, ip_delta = 1.0, 0.1, 1.0, 3.0, 1e-5
    ya = np.zeros(n_classes)
    for eps in epsilons:
        lap = LapOutput(epsilon=eps, alpha=alpha_lap, lipschitz=mu)
        yb = ya.copy()
        yb[0] = mu * alpha_lap
        cases.append(
            AuditCase(
                "Lap-Output",
                "worst-case",
                eps,
                0.0,
                alpha_lap,
                _tiled(lap, ya),
                _tiled(lap, yb),
                laplace_llr_statistic(ya, yb),
                n_fast,
            )
        )
        gout = GaussOutput(epsilon=eps, delta=ip_delta, alpha=alpha_gauss, lipschitz=mu)
        yb = ya.copy()
        yb[0] = mu * alpha_gauss
        cases.append(
            AuditCase(
                "Gauss-Output",
                "worst-case",
                eps,
                ip_delta,
                alpha_gauss,
                _tiled(gout, ya),
                _tiled(gout, yb),
                projection_statistic(ya, yb),
                n_fast,
            )
        )
        gin = GaussInput(epsilon=eps, delta=ip_delta, alpha=alpha_gauss)
        xa = np.full(image_shape, 0.5)
        xb = xa.copy()
        xb.flat[0] += alpha_gauss
        cases.append(
            AuditCase(
                "Gauss-Input",
                "worst-case",
                eps,
                ip_delta,
                alpha_gauss,
                _tiled(gin, xa),
                _tiled(gin, xb),
                projection_statistic(xa, xb),
                n_img,
            )
        )
        ldp = LDPImage(epsilon=eps)
        xa, xb = np.zeros(image_shape), np.ones(image_shape)
        cases.append(
            AuditCase(
                "LDP-Image",
                "worst-case",
                eps,
                0.0,
                float(d_img),
                _tiled(ldp, xa),
                _tiled(ldp, xb),
                laplace_llr_statistic(xa, xb),
                n_img,
            )
        )
        emb = LDPEmbedding(epsilon=eps, bound=bound)
        za, zb = np.full(latent_dim, -bound), np.full(latent_dim, bound)
        cases.append(
            AuditCase(
                "LDP-Embedding",
                "worst-case",
                eps,
                0.0,
                2 * bound * latent_dim,
                _tiled(emb, za),
                _tiled(emb, zb),
                laplace_llr_statistic(za, zb),
                n_fast,
            )
        )
        cases.append(ptr_worst_case(epsilon=eps, delta=0.05, radius=radius, n_releases=n_ptr))
        # each a full release through the protocol (ms): fewer than the other cases' bare noise draws
        cases += global_worst_cases(epsilon=eps, delta=ip_delta, radius=radius, n_releases=min(n_ptr, 20_000))
    # controls: the noise of ε = 2 while claiming ε = 1 (half the Laplace scale / half σ)
    lap = LapOutput(epsilon=2.0, alpha=alpha_lap, lipschitz=mu)
    yb = ya.copy()
    yb[0] = mu * alpha_lap
    cases.append(
        AuditCase(
            "Lap-Output (half noise)",
            "worst-case",
            1.0,
            0.0,
            alpha_lap,
            _tiled(lap, ya),
            _tiled(lap, yb),
            laplace_llr_statistic(ya, yb),
            n_fast,
            control=True,
        )
    )
    gout = GaussOutput(epsilon=1.0, delta=ip_delta, alpha=alpha_gauss / 2, lipschitz=mu)
    yb = ya.copy()
    yb[0] = mu * alpha_gauss
    cases.append(
        AuditCase(
            "Gauss-Output (half noise)",
            "worst-case",
            1.0,
            ip_delta,
            alpha_gauss,
            _tiled(gout, ya),
            _tiled(gout, yb),
            projection_statistic(ya, yb),
            2 * n_fast,
            control=True,
        )
    )
    return cases


def _jacobian(fn: Any, x: np.ndarray) -> np.ndarray:
    """Jacobian of ``fn`` (torch → torch, one input) at ``x``, as (out, in) float64."""
    import torch

    t = torch.as_tensor(x, dtype=torch.float32)
    jac = torch.autograd.functional.jacobian(lambda v: fn(v[None])[0], t)
    return jac.reshape(jac.shape[0], -1).double().numpy()


def model_audits(ctx: RunContext, *, epsilon: float, n_fast: int, n_ptr: int) -> tuple[list[AuditCase], str]:
    """Audits on real pairs through the shipped models (module docstring); ([], reason) without them."""
    import copy
    import itertools

    import torch

    from privcore.data import load_dataset
    from privcore.errors import PrivcoreError
    from privcore.mechanisms import GaussOutput, LapOutput
    from privcore.models.pipeline import load_ip_models

    cases: list[AuditCase] = []
    ds = load_dataset(ctx.dataset)
    x0 = ds.x_test[0].numpy().astype(np.float64)
    try:
        ip = load_ip_models(ctx.dataset, models_dir=ctx.models_dir, device="cpu")
    except (PrivcoreError, OSError) as exc:
        return [], f"model pairs skipped: {exc}"
    alpha_lap, alpha_gauss = 1.0, 0.1
    if AUDIT_MODELS["Lap-Output"] in ip.models:
        m = ip[AUDIT_MODELS["Lap-Output"]]
        jac = _jacobian(m.model, x0)
        flat = x0.ravel()
        room = np.minimum(alpha_lap, np.maximum(1.0 - flat, flat))  # the largest move inside [0, 1]
        pix = int(np.argmax(np.abs(jac).sum(axis=0) * room))
        xb = flat.copy()
        xb[pix] += room[pix] if 1.0 - flat[pix] >= flat[pix] else -room[pix]
        xb = xb.reshape(x0.shape)
        ya, yb = (
            m(torch.as_tensor(x0[None])).double().numpy()[0],
            m(torch.as_tensor(xb[None])).double().numpy()[0],
        )
        mech = LapOutput(epsilon=epsilon, alpha=alpha_lap, lipschitz=float(m.lipschitz["l1"]))
        cases.append(
            AuditCase(
                "Lap-Output",
                "model",
                epsilon,
                0.0,
                float(np.abs(xb - x0).sum()),
                _tiled(mech, ya),
                _tiled(mech, yb),
                laplace_llr_statistic(ya, yb),
                n_fast,
            )
        )
    if AUDIT_MODELS["Gauss-Output"] in ip.models:
        m = ip[AUDIT_MODELS["Gauss-Output"]]
        jac = _jacobian(m.model, x0)
        v = np.linalg.svd(jac, full_matrices=False)[2][0].reshape(x0.shape)
        xb = np.clip(x0 + alpha_gauss * v, 0.0, 1.0)
        ya, yb = (
            m(torch.as_tensor(x0[None])).double().numpy()[0],
            m(torch.as_tensor(xb[None])).double().numpy()[0],
        )
        mech = GaussOutput(epsilon=epsilon, delta=1e-5, alpha=alpha_gauss, lipschitz=float(m.lipschitz["l2"]))
        cases.append(
            AuditCase(
                "Gauss-Output",
                "model",
                epsilon,
                1e-5,
                float(np.linalg.norm(xb - x0)),
                _tiled(mech, ya),
                _tiled(mech, yb),
                projection_statistic(ya, yb),
                n_fast,
            )
        )
    try:
        pipe = ctx.pipeline(AUDIT_MODELS["PTR"])
    except (PrivcoreError, OSError) as exc:
        return cases, f"PTR model pair skipped: {exc}"
    if pipe.delta_p is None:
        return cases, "PTR model pair skipped: no Δp in the ARL-C-N card"
    from privcore.experiments.ptr_common import compute_phis, embed, ptr_setup
    from privcore.mechanisms import propose_test_release

    za = embed(pipe, ds.x_test[:1])[0]
    jac = _jacobian(copy.deepcopy(pipe.obfuscator).cpu(), za)
    signs = np.array(list(itertools.product((-1.0, 1.0), repeat=za.size)))
    s_best = signs[int(np.argmax(np.abs(signs @ jac.T).sum(axis=1)))]
    zb = za + pipe.radius * s_best
    setup = ptr_setup(
        radius=pipe.radius, delta_p=pipe.proposed_delta_p, epsilons=(epsilon,), certifier=ctx.certifier
    )
    phis, errors = compute_phis(pipe.obfuscator, np.stack([za, zb]), setup, workers=1)
    if errors or any(p is None for p in phis):
        return cases, f"PTR model pair skipped: certification failed ({errors[:1]})"
    from privcore.lipschitz import Certifier

    oracle = Certifier(kind=ctx.certifier)
    f = pipe.obfuscator
    with torch.no_grad():
        fa = pipe.obfuscate(torch.as_tensor(za[None])).double().cpu().numpy()[0]
        fb = pipe.obfuscate(torch.as_tensor(zb[None])).double().cpu().numpy()[0]

    def sampler(z: np.ndarray, phi: Any) -> Draw:
        def draw(n: int, rng: np.random.Generator) -> np.ndarray:
            out = np.full((n, fa.size), np.nan)
            for i in range(n):
                res = propose_test_release(
                    f,
                    z,
                    epsilon=epsilon,
                    delta=setup.delta,
                    lipschitz=oracle,
                    rng=rng,
                    phi=phi,
                    **setup.grid(),
                )
                if res.released:
                    out[i] = res.value
            return out

        return draw

    cases.append(
        AuditCase(
            "PTR",
            "model",
            2.0 * epsilon,
            setup.delta / 2.0,
            pipe.radius,
            sampler(za, phis[0]),
            sampler(zb, phis[1]),
            projection_statistic(fa, fb),
            n_ptr,
        )
    )
    return cases, ""
