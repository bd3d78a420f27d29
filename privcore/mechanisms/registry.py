"""The mechanisms privcore releases with, in one table (issue 31).

The library, the API and CLI (``mechanism=``), the dashboard's mechanism picker and the ledger all
list mechanisms from :data:`MECHANISMS`; :func:`get` resolves a name. Each entry says what a sent
release guarantees, which parameters it takes, what it needs from the model, and how its own ε
relates to the *total* ε of the sent release's guarantee (``epsilon_share``: PTR runs at half the
total, since Thm 4.4's statement for PTR at ε is (2ε, δ/2, R); the others spend all of it). Every
``guarantee`` below is written in the total ε.

========================  =====================  ===========================================
mechanism                 guarantee of a release  needs from the model
========================  =====================  ===========================================
Global (certified)        (ε, 0, R)              obfuscator, card's clipping box; G certified
                                                 here (docs/DESIGN.md, "Beyond the papers")
PTR (run at ε/2)          (ε, δ/2, R)            obfuscator, Δp; φ certified per image
                                                 (posthoc Alg. 1, Thm 4.4)
Gauss-Input               {(ε, δ), α} ℓ2         a classifier fine-tuned on input noise
Gauss-Output              {(ε, δ), α} ℓ2         an ℓ2→ℓ2 Lipschitz classifier (constant ≤ 1)
Lap-Output                {(ε, 0), α} ℓ1         an ℓ1→ℓ1 Lipschitz classifier (constant ≤ 1)
========================  =====================  ===========================================

Adding a mechanism: its module under :mod:`privcore.mechanisms`, one entry here, and its release
branch in :func:`privcore.api.release` (or the dashboard page named by ``page``).
"""

from __future__ import annotations

from dataclasses import dataclass

from privcore.errors import ParameterError

__all__ = ["MECHANISMS", "MechanismSpec", "get", "names"]


@dataclass(frozen=True, kw_only=True)
class MechanismSpec:
    """One mechanism: ``name`` (the key, as in URLs and ``--mechanism``; matched case-insensitively),
    ``label`` (what a person reads), ``family`` ("posthoc": image → embedding → obfuscator;
    "inference": image → IP classifier), the ``guarantee`` of one sent release in terms of the
    total ε, ``parameters`` it takes, ``uses_delta``, ``epsilon_share`` (its own ε per unit of total
    ε), what it ``needs`` from the model, a one-line ``description``, the ``source`` it implements,
    and the dashboard ``page`` that releases it."""

    name: str
    label: str
    family: str
    guarantee: str
    parameters: tuple[str, ...]
    uses_delta: bool
    epsilon_share: float
    needs: str
    description: str
    source: str
    page: str

    def mechanism_epsilon(self, total_epsilon: float) -> float:
        """The ε this mechanism runs at for a sent release whose guarantee spends ``total_epsilon``."""
        return float(total_epsilon) * self.epsilon_share


MECHANISMS: tuple[MechanismSpec, ...] = (
    MechanismSpec(
        name="Global", label="Global (certified)", family="posthoc", guarantee="(ε, 0, R)",
        parameters=("epsilon", "radius"), uses_delta=False, epsilon_share=1.0,
        needs="the obfuscator and its card's public clipping box; G over the box, certified by this process",
        description="f(clip z) + Lap(G·R/ε): one certified constant for the whole box, never ⊥, no δ",
        source="docs/DESIGN.md, \"Beyond the papers\"", page="release",
    ),
    MechanismSpec(
        name="PTR", label="PTR", family="posthoc", guarantee="(ε, δ/2, R)",
        parameters=("epsilon", "delta", "radius"), uses_delta=True, epsilon_share=0.5,
        needs="the obfuscator and its card's Δp; φ certified per image (exact local Lipschitz constants)",
        description=("extended Propose-Test-Release at ε/2: f(z) + Lap(Δp·R/(ε/2)) when the noisy test "
                     "passes, else ⊥"),
        source="posthoc paper, Alg. 1 and Thm 4.4", page="release",
    ),
    MechanismSpec(
        name="Gauss-Input", label="Gauss-Input", family="inference", guarantee="{(ε, δ), α} in ℓ2",
        parameters=("epsilon", "delta", "alpha"), uses_delta=True, epsilon_share=1.0,
        needs="a classifier fine-tuned on Gaussian input noise",
        description="C(x + N(0, σ²I)) with σ calibrated to α in ℓ2 on the input",
        source="IP paper, Def. 5", page="inference_privacy",
    ),
    MechanismSpec(
        name="Gauss-Output", label="Gauss-Output", family="inference", guarantee="{(ε, δ), α} in ℓ2",
        parameters=("epsilon", "delta", "alpha"), uses_delta=True, epsilon_share=1.0,
        needs="a classifier with a certified ℓ2→ℓ2 Lipschitz constant ≤ 1",
        description="C(x) + N(0, σ²I) with σ calibrated to μ₂·α",
        source="IP paper, Def. 4", page="inference_privacy",
    ),
    MechanismSpec(
        name="Lap-Output", label="Lap-Output", family="inference", guarantee="{(ε, 0), α} in ℓ1",
        parameters=("epsilon", "alpha"), uses_delta=False, epsilon_share=1.0,
        needs="a classifier with a certified ℓ1→ℓ1 Lipschitz constant ≤ 1",
        description="C(x) + Lap(μ₁·α/ε)",
        source="IP paper, Def. 3", page="inference_privacy",
    ),
)


def names(*, family: str | None = None, page: str | None = None) -> tuple[str, ...]:
    """The mechanisms' names in table order, optionally only one ``family`` or dashboard ``page``."""
    return tuple(m.name for m in MECHANISMS
                 if (family is None or m.family == family) and (page is None or m.page == page))


def get(name: str) -> MechanismSpec:
    """The entry named ``name`` (case-insensitive); ParameterError naming the choices otherwise."""
    wanted = str(name).strip().lower()
    for m in MECHANISMS:
        if m.name.lower() == wanted:
            return m
    raise ParameterError(f"mechanism must be one of {', '.join(names())} (any case), got {name!r}")
