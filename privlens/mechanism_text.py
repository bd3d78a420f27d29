"""How the pages name what a mechanism's outlook holds, and where its measured accuracy is read: pure
Python, no Streamlit, no privacy maths, and no mechanism's name.

* :data:`CONSTANTS` — the public constants a posthoc mechanism's noise is calibrated to, by their key
  in :attr:`Outlook.public <privcore.mechanisms.protocol.Outlook.public>`: the symbol, which constant it
  is (G over the public box, certified and used for the noise, is not the Lipschitz page's G over all
  activation patterns), and the noise scale's formula; :func:`constant_of` finds an outlook's;
* :func:`noise_formula` — the noise scale as a formula, in the mechanism's own ε or in the total;
* :func:`epsilon_note` — the ε a mechanism that spends the total in parts runs at, in words;
* :func:`accuracy` — a mechanism's measured accuracy at the settings, from the experiment table that
  measures it (:data:`privcore.experiments.MEASURES`; the ``ip`` table names its mechanism per row).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from privlens import live
from privlens.results import load_results, reading
from privlens.settings import Settings

__all__ = [
    "CONSTANTS",
    "Constant",
    "accuracy",
    "attack_reading",
    "attacked",
    "constant_of",
    "epsilon_note",
    "live_accuracy",
    "live_accuracy_job",
    "live_accuracy_soon",
    "measuring",
    "noise_formula",
    "noise_name",
    "runs_at",
]


@dataclass(frozen=True, kw_only=True)
class Constant:
    """A public constant a mechanism's noise is calibrated to: its ``key`` in the outlook's public
    numbers, ``symbol``, ``label`` (a metric's), ``what`` it is, and the ``noise`` it scales
    ("laplace": b = constant·R/ε; "gaussian": the analytic σ at ℓ2 sensitivity constant·R)."""

    key: str
    symbol: str
    label: str
    what: str
    noise: str
    how_key: str = ""


CONSTANTS: tuple[Constant, ...] = (
    Constant(key="global_lipschitz", symbol="G", label="G (certified)", noise="laplace",
             how_key="global_lipschitz_how",
             what="G ≥ sup ‖J_f‖ (ℓ∞→ℓ1) over the public box, certified by this server, used for the noise"),
    Constant(key="global_lipschitz_l2", symbol="G₂", label="G₂ (certified)", noise="gaussian",
             how_key="global_lipschitz_l2_how",
             what="G₂ ≥ sup ‖J_f‖ (ℓ∞→ℓ2) over the public box, certified by this server, used for the noise"),
    Constant(key="delta_p", symbol="Δp", label="Δp", noise="laplace",
             what="Δp, the proposed sensitivity μ + 3σ from training embeddings (the card's), used for the "
                  "noise when the image's test passes"),
)


def constant_of(public: dict[str, Any]) -> Constant | None:
    """The constant an outlook's (or a release's) public numbers calibrate the noise to, if known."""
    return next((c for c in CONSTANTS if c.key in public), None)


def noise_formula(mech: Any, constant: Constant | None, *, total: bool) -> str:
    """The noise scale as a formula: in the mechanism's own ε (``total`` False: "Δp·R/ε") or in the
    sidebar's total ε ("Δp·R/(ε/2)" for a mechanism that runs at half of it); "σ" for Gaussian noise."""
    if constant is None:
        return ""
    if constant.noise == "gaussian":
        return f"σ(ε, δ) at {constant.symbol}·R" if total else "σ"
    share = mech.epsilon_share
    eps = "ε" if share == 1 or not total else f"(ε/{1 / share:g})"
    return f"{constant.symbol}·R/{eps}"


def noise_name(constant: Constant | None) -> str:
    """"Laplace" or "Gaussian"."""
    return "Gaussian" if constant is not None and constant.noise == "gaussian" else "Laplace"


def runs_at(mech: Any, epsilon: float) -> str:
    """The ε the mechanism's own formulas run at for a sent release that spends the total ``epsilon``."""
    own = mech.mechanism_epsilon(epsilon)
    if mech.epsilon_share == 1:
        return f"ε = {own:g} (all of it)"
    return f"ε/{1 / mech.epsilon_share:g} = {own:g}"


def epsilon_note(mech: Any, s: Settings) -> str:
    """The ε of a mechanism that spends the total in parts, in words ("" for one that spends it whole)."""
    if mech.epsilon_share == 1:
        return ""
    own = mech.mechanism_epsilon(s.epsilon)
    k = f"{1 / mech.epsilon_share:g}"
    g = mech.spent(mech.setting(epsilon=s.epsilon, delta=s.delta, radius=s.radius))
    split = f" ({mech.epsilon_split})" if mech.epsilon_split else ""
    return (
        f"{mech.name} runs at ε/{k} = {own:g}{split}: its statement is ({k}·ε/{k}, "
        f"{mech.guarantee.strip('()').split(', ')[1]}, R) = ({g.epsilon:g}, {g.delta:g}, {g.radius:g}) "
        f"({mech.source})."
    )


def measuring(mech: Any) -> str | None:
    """The experiment table that measures ``mech``'s accuracy (None: none does)."""
    from privcore.experiments import MEASURES

    if mech.family == "inference":
        return "ip"
    return next((e for e, name in MEASURES.items() if name == mech.name and e != "attack"), None)


#: test images of a live reading (the first ones of the split): ±0.02 at 95 % or better, in about a second
LIVE_IMAGES = 2000


@dataclass(frozen=True)
class LiveAccuracy:
    """A live accuracy reading (None while a mechanism's per-image certificates are being computed and
    none is scored yet), whether its interval reaches within 0.1 of chance, and ``progress``: the
    certificates' progress in words ("" for a mechanism that needs none), with the ``job`` behind it."""

    reading: live.Reading | None
    near_chance: bool
    chance: float
    progress: str = ""
    job: Any = None


#: what a per-image certificate table holds, in words (the progress line and the reading say it)
CERTIFICATE_NAME = "φ"


def live_accuracy(mech: Any, target: Any, s: Settings, *, dataset: str, model: str) -> LiveAccuracy | None:
    """``mech``'s accuracy at exactly the sidebar's setting, computed now on the test split
    (:func:`privcore.mechanisms.utility.live_accuracy`: n images × draws, 95 % interval; memoised per
    setting). A mechanism that needs a per-image certificate is scored from its table for the test
    images (:mod:`privlens.evaluation`, computed in the background: the images certified so far, with the
    progress); its reading is None until the first :data:`privlens.evaluation.STEP` are."""
    from privcore.mechanisms import live_accuracy as compute
    from privlens import evaluation
    from privlens.mechanism_view import setting

    at = setting(mech, s)
    job = evaluation.job(mech, target, at, dataset=dataset, model=model) if mech.needs_certificate else None
    if mech.needs_certificate and job is None:
        return None  # its tables are turned off: the committed results stand in
    if job is None:
        u = compute(mech, target, at, dataset=dataset, model=model, n=LIVE_IMAGES)
        how = (f"computed now: n = {u.n} test images × {u.draws} noise draws, 95 % bootstrap interval over "
               "images")
        return LiveAccuracy(reading=live.Reading(value=u.accuracy, low=u.low, high=u.high, how=how,
                                                 delta=u.setting.delta, n=u.n),
                            near_chance=u.near_chance, chance=u.chance)
    progress = job.text(CERTIFICATE_NAME)
    if job.table is None:
        return LiveAccuracy(reading=None, near_chance=False, chance=float("nan"), progress=progress, job=job)
    u = compute(mech, target, at, dataset=dataset, model=model, certificates=job.table)
    share = "" if job.table.complete else f" (of {job.table.planned} planned: the rest are being certified)"
    how = (f"computed now from each image's certified {CERTIFICATE_NAME} (exact certifier) and simulated "
           f"test and release noise: n = {u.n} test images{share} × {u.draws} draws, 95 % bootstrap interval "
           f"over images; released {u.release_rate:.0%} of the time")
    return LiveAccuracy(reading=live.Reading(value=u.accuracy, low=u.low, high=u.high, how=how,
                                             delta=u.setting.delta, n=u.n),
                        near_chance=u.near_chance, chance=u.chance, progress=progress, job=job)


def live_accuracy_soon(mech: Any, target: Any, s: Settings, *, dataset: str, model: str,
                       wait_s: float = 0.0) -> tuple[LiveAccuracy | None, bool]:
    """:func:`live_accuracy`, computed in a background thread once per setting
    (:func:`privlens.background.soon`) for a view that must not wait for it: the reading and False once
    it is computed (None where it failed: the committed results stand in), else None and True (pending:
    "computing…"). A mechanism that needs a per-image certificate reads its table here (its table is the
    background work); with background work off it is all computed here."""
    job = live_accuracy_job(mech, target, s, dataset=dataset, model=model, wait_s=wait_s)
    if job is None:
        return live_accuracy(mech, target, s, dataset=dataset, model=model), False
    return (job.value, False) if job.done.is_set() else (None, True)


def live_accuracy_job(mech: Any, target: Any, s: Settings, *, dataset: str, model: str,
                      wait_s: float = 0.0) -> Any:
    """The background job (:func:`privlens.background.soon`) of :func:`live_accuracy_soon`, one per
    setting in the process; None where the reading is computed in the caller's thread (a mechanism that
    needs a per-image certificate, or background work off)."""
    from privlens import background
    from privlens.mechanism_view import setting

    if mech.needs_certificate or not background.enabled():
        return None
    key = ("live-accuracy", mech.name, id(target), setting(mech, s), dataset, model)
    return background.soon(key, lambda: live_accuracy(mech, target, s, dataset=dataset, model=model),
                           name=f"privlens-accuracy-{mech.name}", wait_s=wait_s)


def accuracy(mech: Any, s: Settings, *, dataset: str, model: str, delta: float) -> live.Reading | None:
    """``mech``'s measured accuracy at the sidebar's total ε (its own ε where the table records that),
    from the committed experiment table that measures it; None when none does or it was not measured
    there. ``model``: the obfuscator (posthoc) or the classifier (inference)."""
    table = measuring(mech)
    own = mech.mechanism_epsilon(s.epsilon)
    if table == "ip":
        return reading(dataset, "ip", live.ip_accuracy_at, mechanism=mech.name, model=model,
                       epsilon=s.epsilon, alpha=s.alpha, delta=delta)
    if table == "table1":
        return reading(dataset, "table1", live.accuracy_at, model=model, certifier=s.certifier,
                       epsilon=own, delta=delta)
    if table is not None:
        name = table if load_results(dataset, table) is not None else table.replace("-", "_")  # older name
        return reading(dataset, name, live.global_accuracy_at, model=model, epsilon=s.epsilon,
                       radius=s.radius)
    return None


def attacked(mech: Any) -> bool:
    """Whether the ``attack`` experiment attacks ``mech``'s releases (at its own ε)."""
    from privcore.experiments import MEASURES

    return MEASURES.get("attack") == mech.name


def attack_reading(dataset: str, *, radius: float, epsilon: float) -> live.Reading | None:
    """The attack experiment's SSIM at (R, the attacked mechanism's own ε), or None."""
    return reading(dataset, "attack", live.attack_at, radius=radius, epsilon=epsilon)
