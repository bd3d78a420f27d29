"""The mechanisms privcore releases with: one table of :class:`~privcore.mechanisms.protocol.Mechanism`
objects, which the API, the CLI (``--mechanism``), the experiments and the dashboard dispatch through.

========================  =====================  ===========================================
mechanism                 guarantee of a release  needs from the model
========================  =====================  ===========================================
Global (certified)        (ε, 0, R)              obfuscator, card's clipping box; G (∞→1) certified
                                                 here (docs/DESIGN.md, "Beyond the papers")
Global-Gauss              (ε, δ, R)              obfuscator, card's clipping box; G₂ (∞→2)
                                                 certified here; analytic Gaussian
PTR                       (ε, δ/2, R)            obfuscator, Δp; φ certified per image
                                                 (posthoc Alg. 1, Thm 4.4; runs at ε/2)
Gauss-Input               {(ε, δ), α} ℓ2         a classifier fine-tuned on input noise
Gauss-Output              {(ε, δ), α} ℓ2         an ℓ2→ℓ2 Lipschitz classifier (constant ≤ 1)
Lap-Output                {(ε, 0), α} ℓ1         an ℓ1→ℓ1 Lipschitz classifier (constant ≤ 1)
LDP-Image                 ε-LDP, every pair      the pixel classifier ip-cnn (posthoc Table 2)
LDP-Embedding             ε-LDP, every pair      embedder, obfuscator; B from training embeddings
                                                 (posthoc Table 2)
========================  =====================  ===========================================

ε is always the total of one sent release's guarantee. Adding a mechanism: its module (a
:class:`~privcore.mechanisms.protocol.Mechanism` subclass) and one entry in :data:`MECHANISMS`.
"""

from __future__ import annotations

from privcore.errors import ParameterError
from privcore.mechanisms.global_gauss import GlobalGauss
from privcore.mechanisms.inference_release import GaussInputRelease, GaussOutputRelease, LapOutputRelease
from privcore.mechanisms.ldp import LDPEmbeddingRelease, LDPImageRelease
from privcore.mechanisms.posthoc import GlobalLaplace
from privcore.mechanisms.protocol import Mechanism
from privcore.mechanisms.ptr_release import PTR

__all__ = ["MECHANISMS", "Mechanism", "MechanismSpec", "get", "names"]

#: the type of a registry entry (the name the dashboard's type hints use)
MechanismSpec = Mechanism

MECHANISMS: tuple[Mechanism, ...] = (
    GlobalLaplace(),
    PTR(),
    GaussInputRelease(),
    GaussOutputRelease(),
    LapOutputRelease(),
    GlobalGauss(),
    LDPImageRelease(),
    LDPEmbeddingRelease(),
)


def names(*, family: str | None = None, page: str | None = None) -> tuple[str, ...]:
    """The mechanisms' names in table order, optionally only one ``family`` or dashboard ``page``."""
    return tuple(m.name for m in MECHANISMS
                 if (family is None or m.family == family) and (page is None or m.page == page))


def get(name: str) -> Mechanism:
    """The mechanism named ``name`` (case-insensitive); ParameterError naming the choices otherwise."""
    wanted = str(name).strip().lower()
    for m in MECHANISMS:
        if m.name.lower() == wanted:
            return m
    raise ParameterError(f"mechanism must be one of {', '.join(names())} (any case), got {name!r}")
