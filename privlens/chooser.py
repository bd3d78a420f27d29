"""The mechanism chooser: every mechanism side by side at the sidebar's total ε.

Pure Python, no Streamlit, no privacy maths: every noise scale and guarantee comes from
:mod:`privcore.mechanisms` (``global_scales``, ``ptr_scales``, the IP mechanisms' calibrations), every
accuracy from the committed experiment tables (:mod:`privlens.live`). :func:`compare` lines up, for
the current model and (ε, δ, R, α), what one sent release of each mechanism costs and gives:

* its guarantee at the same **total** ε — Global (ε, 0, R); PTR, run at ε/2, (ε, δ/2, R) (posthoc
  Thm 4.4); the IP mechanisms (ε, δ) or (ε, 0) at α on the input;
* its noise scale per coordinate — Global G·R/ε, PTR Δp·R/(ε/2); so at the same total ε the ratio is
  G/(2Δp) (docs/DESIGN.md, "Beyond the papers");
* the probability that it releases at all — 1 for Global; for PTR this image's, from its certified φ,
  only once φ is known (certifying costs time, the page asks first);
* its measured accuracy with its interval, or "not measured".

It then names the one to use: the least noise among the mechanisms whose guarantee covers the same
pairs (the posthoc family's ℓ∞ ball of radius R on the embedding), provided its guarantee is the
same or stronger than theirs — otherwise the least noise among those with the strongest guarantee,
saying what the noisier-but-weaker option would give. The IP mechanisms protect another neighbourhood
(α on the input): they are shown, never ranked against the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from privcore.mechanisms import Guarantee, global_scales, ptr_scales, registry
from privlens.live import Reading

__all__ = ["Choice", "Comparison", "compare"]

#: What the IP rows say instead of a rank.
NOT_COMPARABLE = "different guarantee (α on the input): not comparable"


@dataclass(frozen=True, kw_only=True)
class Choice:
    """One mechanism in the comparison. ``noise_scale`` is the Laplace scale per coordinate of the
    released embedding (None for the IP mechanisms, whose noise is on pixels or logits: ``noise`` says
    it in words); ``probability`` P[released] (None: not known yet); ``guarantee`` the one a sent
    release spends (None when the mechanism cannot run: ``note`` says why)."""

    name: str
    label: str
    runs_at: str
    guarantee: Guarantee | None
    comparable: bool
    noise_scale: float | None
    noise: str
    calibration: str
    probability: float | None
    probability_text: str
    accuracy: Reading | None
    note: str = ""

    @property
    def guarantee_text(self) -> str:
        """(ε, δ, radius) of one sent release."""
        g = self.guarantee
        return "—" if g is None else f"({g.epsilon:g}, {g.delta:g}, {g.radius:g})"

    @property
    def neighbourhood_text(self) -> str:
        """The pairs the guarantee covers, compactly: "ℓ∞ ≤ 0.25 on z", "ℓ2 ≤ 0.1 on pixels"."""
        g = self.guarantee
        if g is None or g.norm is None or g.space is None:
            return "—" if g is None else g.neighbourhood.describe()
        where = "z" if g.space.value == "embedding" else "pixels"
        return f"{g.norm.symbol} ≤ {g.radius:g} on {where}"

    @property
    def accuracy_text(self) -> str:
        """The measured accuracy with its interval, n and the δ it was measured at, or "not measured"."""
        a = self.accuracy
        if a is None:
            return "not measured"
        said = [a.interval_text] if a.low is not None else []
        if a.n is not None:
            said.append(f"n = {a.n}")
        if a.delta is not None:
            said.append(f"at δ = {a.delta:g}")
        return f"{a.value:.3f}" + (" " + ", ".join(said) if said else "")


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """The chooser's rows (registry order), the ``recommended`` mechanism (None when no posthoc
    mechanism can run), why, and the noise ratio Global/PTR (= G/(2Δp)) when both are known."""

    choices: tuple[Choice, ...]
    recommended: str | None
    reason: str
    ratio: float | None

    def choice(self, name: str) -> Choice:
        """The row of mechanism ``name``."""
        return next(c for c in self.choices if c.name == name)

    def _name(self, c: Choice) -> str:
        return ("★ " if c.name == self.recommended else "") + c.label

    def rows(self) -> list[dict[str, str]]:
        """The table the pages show first, narrow enough for a laptop screen (strings only; ★ marks the
        recommended mechanism)."""
        return [
            {
                "mechanism": self._name(c),
                "noise per coordinate": c.noise,
                "P[released]": c.probability_text,
                "accuracy [interval]": c.accuracy_text,
            }
            for c in self.choices
        ]

    def details(self) -> list[dict[str, str]]:
        """The rest of each row: the guarantee and the pairs it covers, the ε the mechanism runs at, the
        constant its noise is calibrated to, how the accuracy was read, and whether it is ranked."""
        return [
            {
                "mechanism": self._name(c),
                "guarantee (ε, δ, radius)": c.guarantee_text,
                "neighbourhood": c.neighbourhood_text,
                "runs at": c.runs_at,
                "calibrated to": c.calibration or "—",
                "accuracy read": "—" if c.accuracy is None else c.accuracy.how,
                "ranked": "yes" if c.comparable else "no: another neighbourhood",
            }
            for c in self.choices
        ]


def _at_least_as_strong(a: Guarantee, b: Guarantee) -> bool:
    """``a`` says at least what ``b`` says: it covers every pair ``b`` covers, with ε and δ no larger."""
    return b.neighbourhood.within(a.neighbourhood) and a.epsilon <= b.epsilon and a.delta <= b.delta


def _unavailable(name: str, label: str, runs_at: str, accuracy: Reading | None, note: str) -> Choice:
    """The row of a mechanism that cannot run for this model (``note`` says why)."""
    return Choice(name=name, label=label, runs_at=runs_at, guarantee=None, comparable=True, noise_scale=None,
                  noise="—", calibration="", probability=None, probability_text="—", accuracy=accuracy,
                  note=note)


def compare(
    *,
    epsilon: float,
    delta: float,
    radius: float,
    alpha: float,
    global_lipschitz: float | None,
    global_how: str = "",
    delta_p: float | None,
    ptr_probability: float | None = None,
    ip_noise: Mapping[str, tuple[Guarantee, str] | str] | None = None,
    accuracy: Mapping[str, Reading | None] | None = None,
    numel: int = 8,
    unknown_probability: str = "not certified yet",
) -> Comparison:
    """The comparison at the total ``epsilon`` (module docstring). ``global_lipschitz``: the G this
    process certified (None: not available, e.g. no clipping box in the card); ``delta_p``: the card's
    Δp (None: PTR cannot run); ``ptr_probability``: P[PTR releases this image] at (ε/2, δ) from its
    certified φ, None when not certified yet; ``ip_noise``: per IP mechanism its (guarantee, noise in
    words) or why it cannot run (None: the IP rows are left out); ``accuracy``: per mechanism its
    reading at this ε (absent or None: not measured); ``unknown_probability``: what PTR's P[released]
    reads while φ is unknown."""
    accuracy = accuracy or {}
    choices: list[Choice] = []
    spec = {m.name: m for m in registry.MECHANISMS}

    g_spec = spec["Global"]
    if global_lipschitz is None:
        choices.append(_unavailable("Global", g_spec.label, f"ε = {epsilon:g}", accuracy.get("Global"),
                                    "no certified G for this model (its card records no clipping box)"))
    else:
        gs = global_scales(
            epsilon=g_spec.mechanism_epsilon(epsilon),
            radius=radius,
            global_lipschitz=global_lipschitz,
            numel=numel,
            how=global_how,
        )
        how = f" ({global_how})" if global_how else ""
        runs_at = f"ε = {g_spec.mechanism_epsilon(epsilon):g} (all of it)"
        choices.append(
            Choice(
                name="Global",
                label=g_spec.label,
                runs_at=runs_at,
                guarantee=gs.guarantee,
                comparable=True,
                noise_scale=gs.noise_scale,
                noise=f"{gs.noise_scale:.4g} = G·R/ε",
                calibration=f"G = {global_lipschitz:.7g}{how}",
                probability=1.0,
                probability_text="100 % (never ⊥)",
                accuracy=accuracy.get("Global"),
            )
        )

    p_spec = spec["PTR"]
    half = p_spec.mechanism_epsilon(epsilon)
    ptr_note, ps = "", None
    if delta_p is None:
        ptr_note = "no Δp is stored with this model"
    else:
        try:
            ps = ptr_scales(epsilon=half, delta=delta, radius=radius, delta_p=delta_p)
        except ValueError as exc:
            ptr_note = f"refused: {exc}"
    if ps is None:
        choices.append(_unavailable("PTR", p_spec.label, f"ε/2 = {half:g}", accuracy.get("PTR"), ptr_note))
    else:
        prob_text = (
            unknown_probability if ptr_probability is None else f"{100 * ptr_probability:.1f} % (else ⊥)"
        )
        choices.append(
            Choice(
                name="PTR",
                label=p_spec.label,
                runs_at=f"ε/2 = {half:g} (test and noise)",
                guarantee=ps.guarantee,
                comparable=True,
                noise_scale=ps.release_scale,
                noise=f"{ps.release_scale:.4g} = Δp·R/(ε/2)",
                calibration=f"Δp = {delta_p:.7g} (the card's; φ certified per image)",
                probability=ptr_probability,
                probability_text=prob_text,
                accuracy=accuracy.get("PTR"),
            )
        )

    for name, plan in (ip_noise or {}).items():
        ip_spec = spec[name]
        ready = not isinstance(plan, str)
        runs_at = f"ε = {ip_spec.mechanism_epsilon(epsilon):g} at α = {alpha:g}"
        choices.append(
            Choice(
                name=name,
                label=ip_spec.label,
                runs_at=runs_at,
                guarantee=plan[0] if ready else None,
                comparable=False,
                noise_scale=None,
                noise=plan[1].split(" (")[0] if ready else "—",
                calibration=plan[1].partition(" (")[2].rstrip(")") if ready else "",
                probability=1.0 if ready else None,
                probability_text="100 %" if ready else "—",
                accuracy=accuracy.get(name),
                note=NOT_COMPARABLE if ready else str(plan),
            )
        )

    recommended, reason = _recommend([c for c in choices if c.comparable and c.noise_scale is not None])
    by_name = {c.name: c for c in choices}
    g_row, p_row = by_name["Global"], by_name["PTR"]
    ratio = (
        g_row.noise_scale / p_row.noise_scale
        if g_row.noise_scale is not None and p_row.noise_scale is not None and p_row.noise_scale > 0
        else None
    )
    return Comparison(choices=tuple(choices), recommended=recommended, reason=reason, ratio=ratio)


def _recommend(candidates: list[Choice]) -> tuple[str | None, str]:
    """The least-noise candidate whose guarantee is the same or stronger than every other's; else the
    least-noise one among those with the strongest guarantee (module docstring)."""
    if not candidates:
        return None, "No mechanism that releases the embedding can run for this model at these settings."
    least = min(candidates, key=lambda c: (c.noise_scale, c.name != "Global"))
    others = [c for c in candidates if c is not least]
    assert least.guarantee is not None
    if all(_at_least_as_strong(least.guarantee, c.guarantee) for c in others if c.guarantee is not None):
        if not others:
            return least.name, f"{least.label} is the only one that can run here."
        words = "; ".join(
            f"{c.label} adds more noise ({c.noise_scale:.4g} against {least.noise_scale:.4g})"
            + (
                " for the same guarantee"
                if _at_least_as_strong(c.guarantee, least.guarantee)
                else f" for a weaker guarantee (δ = {c.guarantee.delta:g} against {least.guarantee.delta:g})"
            )
            + (" and may refuse (⊥)" if c.name == "PTR" else "")
            for c in others
            if c.guarantee is not None
        )
        return least.name, f"The least noise at the same or a stronger guarantee: {words}."
    strongest = [
        c
        for c in candidates
        if all(_at_least_as_strong(c.guarantee, o.guarantee) for o in candidates if o is not c)
    ]
    if not strongest:
        return None, "No mechanism here has both the least noise and the strongest guarantee."
    best = min(strongest, key=lambda c: c.noise_scale)
    return best.name, (
        f"{best.label} has the strongest guarantee; {least.label} adds less noise "
        f"({least.noise_scale:.4g} against {best.noise_scale:.4g}) but for a weaker guarantee "
        f"(δ = {least.guarantee.delta:g}{', and it may refuse (⊥)' if least.name == 'PTR' else ''})."
    )
