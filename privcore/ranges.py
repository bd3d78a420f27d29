"""The ranges of the release parameters, closed (ends included) and defined here only.

The API (:func:`privcore.api.release` / :func:`~privcore.api.certify`), the CLI (``privcore release`` /
``certify``: checks and ``--help``) and the dashboard (``privlens.settings.PARAMS``: sliders, shared
links and their messages) all read them; :mod:`privcore.validation` checks against them. No imports,
so the CLI's ``--help`` can quote them without loading numpy.
"""

__all__ = ["ALPHA_RANGE", "CERTIFIERS", "DELTA_RANGE", "EPSILON_RANGE", "RADIUS_RANGE"]

#: ε: the *total* ε of one sent release's guarantee (PTR runs at half of it, Thm 4.4).
EPSILON_RANGE: tuple[float, float] = (0.01, 100.0)
#: δ a mechanism runs at (PTR's guarantee then spends δ/2).
DELTA_RANGE: tuple[float, float] = (1e-12, 0.5)
#: R, the ℓ∞ radius on the embedding of the posthoc mechanisms.
RADIUS_RANGE: tuple[float, float] = (1e-3, 2.0)
#: α, the input radius of inference privacy.
ALPHA_RANGE: tuple[float, float] = (1e-4, 10.0)
#: The certifiers of local Lipschitz constants (PTR's φ): exact (LipMIP), the LP relaxation, intervals.
CERTIFIERS: tuple[str, ...] = ("exact", "lp", "interval")
