"""The mechanism chooser: every mechanism of the registry side by side at the sidebar's total ε.

Pure Python, no Streamlit, no privacy maths, no mechanism's name: every noise scale, probability and
guarantee comes from each mechanism's own :class:`~privcore.mechanisms.protocol.Outlook`, every
accuracy from the committed experiment tables (:mod:`privlens.live`). :func:`compare` lines up, for
the current model and (ε, δ, R, α), what one sent release of each mechanism costs and gives:

* its guarantee at the same **total** ε (a mechanism that spends it in parts runs at its share);
* its noise scale per coordinate, as a formula in the total ε (:mod:`privlens.mechanism_text`), and the
  noise's standard deviation, which the ranking compares (Laplace √2·b, Gaussian σ);
* the probability that it releases at all — 1 for one that never refuses; for one that needs a
  per-image certification, this image's, only once it is certified (the page asks first);
* its measured accuracy with its interval, "computing…" while a live reading is computed in the
  background, or "not measured".

It then names the one to use: the least noise among the mechanisms whose guarantee covers the same
pairs (the posthoc family's ℓ∞ ball of radius R on the embedding), provided its guarantee is the
same or stronger than theirs — otherwise the least noise among those with the strongest guarantee,
saying what the noisier-but-weaker option would give. The inference-privacy mechanisms protect another
neighbourhood (α on the input), and the local-DP baselines every pair of inputs with their noise on the
pixels or on z rather than on f(z): they are shown, never ranked against the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from privcore.mechanisms import Guarantee, Space
from privlens import mechanism_text as mt
from privlens.live import Reading

__all__ = ["Choice", "Comparison", "Entry", "compare"]

#: What the IP rows say instead of a rank.
NOT_COMPARABLE = "different guarantee (α on the input): not comparable"
#: What a row whose guarantee covers every pair of inputs (local DP) says instead of a rank.
ALL_PAIRS = "a stronger guarantee (every pair of inputs), noise not on f(z): not ranked by noise"


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
    noise_sd: float | None = None
    symbol: str = ""
    share: float = 1.0
    may_refuse: bool = False
    needs_certificate: bool = False
    pending: bool = False

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
        """The measured accuracy with its interval, n and the δ it was measured at, "computing…" while its
        live reading is computed, or "not measured"."""
        a = self.accuracy
        if a is None:
            return "computing…" if self.pending else "not measured"
        said = [a.interval_text] if a.low is not None else []
        if a.n is not None:
            said.append(f"n = {a.n}")
        if a.delta is not None:
            said.append(f"at δ = {a.delta:g}")
        return f"{a.value:.3f}" + (" " + ", ".join(said) if said else "")


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """The chooser's rows (registry order), the ``recommended`` mechanism (None when no posthoc
    mechanism can run), why, and the noise ratio of the recommended one to another with the same kind
    of noise (e.g. G/(2Δp)) in ``ratio_text`` when both are known."""

    choices: tuple[Choice, ...]
    recommended: str | None
    reason: str
    ratio: float | None
    ratio_text: str = ""

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
                "accuracy read": c.accuracy.how if c.accuracy is not None
                else "computing now, in the background" if c.pending else "—",
                "ranked": "yes" if c.comparable else "no: another neighbourhood",
            }
            for c in self.choices
        ]


def _at_least_as_strong(a: Guarantee, b: Guarantee) -> bool:
    """``a`` says at least what ``b`` says: it covers every pair ``b`` covers, with ε and δ no larger."""
    return b.neighbourhood.within(a.neighbourhood) and a.epsilon <= b.epsilon and a.delta <= b.delta


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One mechanism for :func:`compare`: the registry's ``mechanism``, its ``outlook`` at the settings
    or why it cannot run, its measured ``accuracy``, and whether it is still ``pending`` (its live
    reading, or with a string outlook the outlook itself, is being computed)."""

    mechanism: Any
    outlook: Any
    accuracy: Reading | None = None
    pending: bool = False


def _choice(e: Entry, *, epsilon: float, alpha: float, unknown_probability: str) -> Choice:
    choice = _choice_of(e, epsilon=epsilon, alpha=alpha, unknown_probability=unknown_probability)
    return replace(choice, pending=e.pending and e.accuracy is None)


def _choice_of(e: Entry, *, epsilon: float, alpha: float, unknown_probability: str) -> Choice:
    mech, o = e.mechanism, e.outlook
    runs_at = mt.runs_at(mech, epsilon) + (f" at α = {alpha:g}" if "alpha" in mech.parameter_names else "")
    if isinstance(o, str):  # ranked where its guarantee would be over R on the embedding
        wait = "computing…" if e.pending else "—"  # a pending outlook: its constant is being certified
        return Choice(name=mech.name, label=mech.label, runs_at=runs_at, guarantee=None,
                      comparable=mech.family == "posthoc" and "radius" in mech.parameter_names,
                      noise_scale=None, noise=wait, calibration="", probability=None, probability_text=wait,
                      accuracy=e.accuracy, note="" if e.pending else o)
    g = o.guarantee
    if g.all_pairs or g.space is not Space.EMBEDDING:  # other pairs than R on the embedding: shown only
        note = ALL_PAIRS if g.all_pairs else NOT_COMPARABLE
        return Choice(name=mech.name, label=mech.label, runs_at=runs_at, guarantee=g,
                      comparable=False, noise_scale=None, noise=o.noise.split(" (")[0],
                      calibration=o.noise.partition(" (")[2].rstrip(")"), probability=o.release_probability,
                      probability_text="100 %" if o.release_probability == 1.0 else "—", accuracy=e.accuracy,
                      note=note)
    const = mt.constant_of(o.public)
    p = o.release_probability
    how = "" if const is None else o.public.get(const.how_key, "")
    calibration = "" if const is None else (
        f"{const.symbol} = {o.public[const.key]:.7g}" + (f" ({how})" if how else "")
        + ("; the image's certificate decides ⊥" if mech.needs_certificate else ""))
    gaussian = const is not None and const.noise == "gaussian"
    return Choice(
        name=mech.name, label=mech.label, runs_at=runs_at, guarantee=o.guarantee, comparable=True,
        noise_scale=o.noise_scale, noise=f"{o.noise_scale:.4g} = {mt.noise_formula(mech, const, total=True)}",
        calibration=calibration, probability=p,
        probability_text=("100 % (never ⊥)" if p == 1.0 else unknown_probability if p is None
                          else f"{100 * p:.1f} % (else ⊥)"),
        accuracy=e.accuracy, noise_sd=o.noise_scale * (1.0 if gaussian else 2**0.5),
        symbol="" if const is None or gaussian else const.symbol, share=mech.epsilon_share,
        may_refuse=p != 1.0, needs_certificate=mech.needs_certificate,
    )


def compare(
    entries: Sequence[Entry],
    *,
    epsilon: float,
    alpha: float,
    unknown_probability: str = "not certified yet",
) -> Comparison:
    """The comparison at the total ``epsilon`` (module docstring) of ``entries`` (registry order);
    ``unknown_probability``: what P[released] reads while a needed certification is not made yet."""
    choices = [_choice(e, epsilon=epsilon, alpha=alpha, unknown_probability=unknown_probability)
               for e in entries]
    recommended, reason = _recommend([c for c in choices if c.comparable and c.noise_sd is not None])
    ratio, ratio_text = None, ""
    best = next((c for c in choices if c.name == recommended), None)
    if best is not None and best.symbol:  # the same kind of noise: the ratio of the two formulas
        other = next((c for c in choices if c is not best and c.symbol and c.noise_scale), None)
        if other is not None and best.noise_scale is not None:
            ratio = best.noise_scale / other.noise_scale
            k = best.share / other.share
            ratio_text = f"{best.symbol}/({k:g}{other.symbol})" if k != 1 else f"{best.symbol}/{other.symbol}"
            why = [w for w, yes in (("δ = 0", best.guarantee.delta == 0),
                                    ("no per-image certification", other.needs_certificate
                                     and not best.needs_certificate)) if yes]
            ratio_text = (f" At the same total ε, {best.label}'s noise is {ratio_text} = **{ratio:.3f}×** "
                          f"{other.label}'s" + (f", with {' and '.join(why)}." if why else "."))
    return Comparison(choices=tuple(choices), recommended=recommended, reason=reason, ratio=ratio,
                      ratio_text=ratio_text)


def _recommend(candidates: list[Choice]) -> tuple[str | None, str]:
    """The least-noise candidate whose guarantee is the same or stronger than every other's; else the
    least-noise one among those with the strongest guarantee (module docstring)."""
    if not candidates:
        return None, "No mechanism that releases the embedding can run for this model at these settings."
    least = min(candidates, key=lambda c: (c.noise_sd, c.may_refuse))
    others = [c for c in candidates if c is not least]
    assert least.guarantee is not None
    if all(_at_least_as_strong(least.guarantee, c.guarantee) for c in others if c.guarantee is not None):
        if not others:
            return least.name, f"{least.label} is the only one that can run here."
        words = "; ".join(
            f"{c.label} adds more noise (s.d. {c.noise_sd:.4g} against {least.noise_sd:.4g})"
            + (
                " for the same guarantee"
                if _at_least_as_strong(c.guarantee, least.guarantee)
                else f" for a weaker guarantee (δ = {c.guarantee.delta:g} against {least.guarantee.delta:g})"
            )
            + (" and may refuse (⊥)" if c.may_refuse else "")
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
    best = min(strongest, key=lambda c: c.noise_sd)
    return best.name, (
        f"{best.label} has the strongest guarantee; {least.label} adds less noise "
        f"(s.d. {least.noise_sd:.4g} against {best.noise_sd:.4g}) but for a weaker guarantee "
        f"(δ = {least.guarantee.delta:g}{', and it may refuse (⊥)' if least.may_refuse else ''})."
    )
