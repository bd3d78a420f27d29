"""privcore's privacy mechanisms: inference privacy, extended PTR, LDP baselines, calibration, sampling.

Papers: Tian et al., "inference privacy" (Lap-Output, Gauss-Output, Gauss-Input); the posthoc
privacy paper (extended Propose-Test-Release, Algorithm 1, Theorem 4.4; LDP baselines, Table 2);
the certified global mechanism f(clip z) + Lap(G·R/ε) (issue 31, docs/DESIGN.md "Beyond the papers");
Balle & Wang 2018 (analytic Gaussian); Canonne, Kamath & Steinke 2020 and Mironov 2012 (exact
noise on a grid). Accounting lives in :mod:`privcore.accounting`.
"""

from privcore.mechanisms.gaussian_calibration import (
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
    cks_zcdp_delta,
    classic_gaussian_sigma,
    discrete_gaussian_sigma_floor,
    gaussian_sigma,
)
from privcore.mechanisms.global_mechanism import (
    GlobalRelease,
    GlobalScales,
    card_clip_box,
    card_global_constant,
    card_global_hint,
    global_release,
    global_scales,
)
from privcore.mechanisms.guarantee import ANY_METRIC, Guarantee, Neighbourhood, Norm, Space
from privcore.mechanisms.inference import GaussInput, GaussOutput, LapOutput
from privcore.mechanisms.ldp import LDPEmbedding, LDPImage
from privcore.mechanisms.phi_cache import cached_phi
from privcore.mechanisms.ptr import (
    DecidingSensitivityOracle,
    PhiResult,
    PTRResult,
    PTRScales,
    SensitivityOracle,
    bisection_decisions,
    compute_phi,
    propose_delta_p,
    propose_test_release,
    ptr_scales,
)
from privcore.mechanisms.sampling import (
    MIN_EPSILON,
    NoisePlan,
    RandomBits,
    add_noise,
    discrete_gaussian_integers,
    discrete_laplace_integers,
    plan_gaussian,
    plan_laplace,
)
from privcore.mechanisms.search_range import ptr_search_range

__all__ = [
    "ANY_METRIC",
    "MIN_EPSILON",
    "DecidingSensitivityOracle",
    "GaussInput",
    "GaussOutput",
    "GlobalRelease",
    "GlobalScales",
    "Guarantee",
    "LDPEmbedding",
    "LDPImage",
    "LapOutput",
    "Neighbourhood",
    "NoisePlan",
    "Norm",
    "PTRResult",
    "PTRScales",
    "PhiResult",
    "RandomBits",
    "SensitivityOracle",
    "Space",
    "add_noise",
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "bisection_decisions",
    "cached_phi",
    "card_clip_box",
    "card_global_constant",
    "card_global_hint",
    "cks_zcdp_delta",
    "classic_gaussian_sigma",
    "compute_phi",
    "discrete_gaussian_integers",
    "discrete_gaussian_sigma_floor",
    "discrete_laplace_integers",
    "gaussian_sigma",
    "global_release",
    "global_scales",
    "plan_gaussian",
    "plan_laplace",
    "propose_delta_p",
    "propose_test_release",
    "ptr_scales",
    "ptr_search_range",
]
