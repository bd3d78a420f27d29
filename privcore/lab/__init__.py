"""Mechanism lab: learned ε-DP mechanisms with Lipschitz networks (Shavit & Gjura 2019).

Public interface for callers such as the dashboard: the explorer (:mod:`privcore.lab.explore`:
shipped models, fresh datasets, comparisons, the Fig. 5 curves) and the query names
(:data:`QUERIES`). Loaded lazily (PEP 562), so importing a submodule does not pay for the rest.
"""

from __future__ import annotations

from privcore._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "QUERIES": "queries",
    "available_models": "explore",
    "compare": "explore",
    "fig5_curves": "explore",
    "fresh_dataset": "explore",
    "load_model": "explore",
    "query_label": "explore",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
