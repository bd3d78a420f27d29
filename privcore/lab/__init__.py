"""Mechanism lab: learned ε-DP mechanisms with Lipschitz networks (Shavit & Gjura 2019).

Public interface for callers such as the dashboard: the explorer (:mod:`privcore.lab.explore`:
shipped models, fresh datasets, comparisons, the Fig. 5 curves) and the query names
(:data:`QUERIES`). Loaded lazily (PEP 562), so importing a submodule does not pay for the rest.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "QUERIES": "queries",
    "available_models": "explore",
    "compare": "explore",
    "fig5_curves": "explore",
    "fresh_dataset": "explore",
    "load_model": "explore",
    "query_label": "explore",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"privcore.lab.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'privcore.lab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
