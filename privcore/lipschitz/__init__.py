"""Local Lipschitz constants of ReLU networks: exact (LipMIP), bounds, PTR oracle, cache.

Public API (see each function's docstring for the paper and section it follows):

* :func:`local_lipschitz` — a :class:`Certificate` for L(f, B(z, r)) (exact: LipMIP on Gurobi or
  HiGHS, or activation-pattern enumeration for the paper's small obfuscators; or the
  ``lp``/``interval`` relaxations).
* :class:`Certifier` — the sensitivity oracle for posthoc PTR (``__call__`` and an exact
  ``decide``); φ(z) through the persistent cache is
  :func:`privcore.mechanisms.cached_phi` (this package never imports the mechanisms).
* :func:`certify_batch` — many points on several cores with a progress bar.
* Cheap bounds: :func:`interval_upper_bound`, :func:`pair_interval_bound` (per vertex pair, CROWN-style
  bounds of :mod:`privcore.lipschitz.clarke`), :func:`global_upper_bound`, :func:`sampled_lower_bound`;
  :func:`relaxed_upper_bound` — the ``lp``/``interval`` certifiers' U; :func:`operator_norm`;
  :func:`max_pattern_norm` — the largest
  Jacobian norm over activation patterns (branch and bound; a certified global bound, or per box
  with its stable neurons fixed).
* :class:`ClipBox`, :func:`certified_global_constant` — G, a certified bound on L over a public box
  (exact by pattern enumeration on the box where it applies; :mod:`privcore.lipschitz.global_box`),
  for the global mechanism of :mod:`privcore.mechanisms.global_mechanism`.
* :func:`as_network` / :class:`ReluNetwork` — parse a Linear/ReLU torch module (refuses anything
  else); :func:`model_hash`.

The region is always the ℓ∞ box B(z, r); ``input_norm`` ∈ {"linf", "l1"} and ``output_norm`` ∈
{"l1", "linf"} choose the Jacobian's operator norm (default ℓ∞→ℓ1, docs/DESIGN.md).

Exports are loaded lazily (PEP 562), so that ``python -m privcore --help`` does not import torch.
"""

from __future__ import annotations

from privcore._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "Certificate": "engine",
    "ClipBox": "global_box",
    "GlobalConstant": "global_box",
    "Certifier": "certifier",
    "Decision": "engine",
    "LipschitzCache": "cache",
    "LipschitzMILP": "milp",
    "PatternNormBound": "pattern_bnb",
    "ReluNetwork": "network",
    "SolveResult": "backends",
    "UnsupportedNetworkError": "network",
    "as_network": "network",
    "build_milp": "milp",
    "certified_global_constant": "global_box",
    "certify_batch": "batch",
    "compute_global_constant": "global_box",
    "choose_solver": "backends",
    "decide_exact": "engine",
    "default_cache_dir": "cache",
    "global_upper_bound": "bounds",
    "gurobi_available": "backends",
    "gurobi_size_limit": "backends",
    "interval_upper_bound": "bounds",
    "local_lipschitz": "engine",
    "lp_upper_bound": "engine",
    "max_pattern_norm": "pattern_bnb",
    "model_hash": "network",
    "operator_norm": "norms",
    "pair_interval_bound": "pair_interval",
    "portfolio_lipschitz": "portfolio",
    "predict_costs": "portfolio",
    "relaxed_upper_bound": "engine",
    "sampled_lower_bound": "bounds",
    "verify_global_constant": "global_box",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
