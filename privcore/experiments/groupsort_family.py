"""The GroupSort candidate family of ``experiment frontier-groupsort``, fixed before any was trained
(constants only, so that the report reads it without the experiment's imports)."""

from __future__ import annotations

from typing import Any

__all__ = ["FAMILIES", "family"]

_GS: dict[str, Any] = {"obfuscator_activation": "maxmin", "obfuscator_hidden": (16, 16)}
#: per dataset, the family in order: checkpoint name → (target total ε, output dimension, recipe
#: overrides); a dataset not named here gets MNIST's (:func:`family`). MaxMin (16, 16) and (32, 32)
#: against the sampled Ĝ, and (16, 16) with ∞-normalised weights against the construction's bound
FAMILIES: dict[str, dict[str, tuple[float, int, dict[str, Any]]]] = {
    "mnist": {
        "N-global-e2o2gs": (2.0, 2, _GS),
        "N-global-e2o2gsw": (2.0, 2, {**_GS, "obfuscator_hidden": (32, 32)}),
        "N-global-e2o2gsl": (2.0, 2, {**_GS, "noise_bound": "construction"}),
    },
}


def family(dataset: str) -> dict[str, tuple[float, int, dict[str, Any]]]:
    """The GroupSort family of ``dataset`` (:data:`FAMILIES`, else MNIST's)."""
    return FAMILIES.get(dataset, FAMILIES["mnist"])
