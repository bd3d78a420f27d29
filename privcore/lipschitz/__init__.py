"""Local Lipschitz constants of ReLU networks: exact (LipMIP), bounds, PTR oracle, cache.

Public API (see each function's docstring for the paper and section it follows):

* :func:`local_lipschitz` — a :class:`Certificate` for L(f, B(z, r)) (exact: LipMIP on Gurobi or
  HiGHS, or activation-pattern enumeration for the paper's small obfuscators; or the
  ``lp``/``interval`` relaxations).
* :class:`Certifier` — the sensitivity oracle for posthoc PTR (``__call__`` and an exact
  ``decide``), and :func:`cached_phi` — φ(z) through the persistent cache.
* :func:`certify_batch` — many points on several cores with a progress bar.
* Cheap bounds: :func:`interval_upper_bound`, :func:`global_upper_bound`,
  :func:`sampled_lower_bound`; :func:`operator_norm`; :func:`max_pattern_norm` — the largest
  Jacobian norm over activation patterns (branch and bound; a certified global bound, or per box
  with its stable neurons fixed).
* :func:`as_network` / :class:`ReluNetwork` — parse a Linear/ReLU torch module (refuses anything
  else); :func:`model_hash`.

The region is always the ℓ∞ box B(z, r); ``input_norm`` ∈ {"linf", "l1"} and ``output_norm`` ∈
{"l1", "linf"} choose the Jacobian's operator norm (default ℓ∞→ℓ1, DESIGN.md).
"""

from privcore.lipschitz.backends import SolveResult, choose_solver, gurobi_available, gurobi_size_limit
from privcore.lipschitz.batch import certify_batch
from privcore.lipschitz.bounds import (
    global_upper_bound,
    interval_upper_bound,
    operator_norm,
    sampled_lower_bound,
)
from privcore.lipschitz.cache import LipschitzCache, default_cache_dir
from privcore.lipschitz.certifier import Certifier, cached_phi
from privcore.lipschitz.engine import Certificate, Decision, decide_exact, local_lipschitz, lp_upper_bound
from privcore.lipschitz.milp import LipschitzMILP, build_milp
from privcore.lipschitz.network import ReluNetwork, UnsupportedNetworkError, as_network, model_hash
from privcore.lipschitz.pattern_bnb import PatternNormBound, max_pattern_norm

__all__ = [
    "Certificate",
    "Certifier",
    "Decision",
    "LipschitzCache",
    "LipschitzMILP",
    "PatternNormBound",
    "ReluNetwork",
    "SolveResult",
    "UnsupportedNetworkError",
    "as_network",
    "build_milp",
    "cached_phi",
    "certify_batch",
    "choose_solver",
    "decide_exact",
    "default_cache_dir",
    "global_upper_bound",
    "gurobi_available",
    "gurobi_size_limit",
    "interval_upper_bound",
    "local_lipschitz",
    "lp_upper_bound",
    "max_pattern_norm",
    "model_hash",
    "operator_norm",
    "sampled_lower_bound",
]
