"""privcore's privacy mechanisms: inference privacy, extended PTR, LDP baselines, calibration, sampling.

Papers: Tian et al., "inference privacy" (Lap-Output, Gauss-Output, Gauss-Input); the posthoc
privacy paper (extended Propose-Test-Release, Algorithm 1, Theorem 4.4; LDP baselines, Table 2);
the certified global mechanism f(clip z) + Lap(G·R/ε) (docs/DESIGN.md "Beyond the papers");
Balle & Wang 2018 (analytic Gaussian); Canonne, Kamath & Steinke 2020 and Mironov 2012 (exact
noise on a grid). Accounting lives in :mod:`privcore.mechanisms.accounting`.

Exports are loaded lazily (PEP 562): importing ``privcore.mechanisms.registry`` (the CLI's
``--mechanism``) or one mechanism does not import every other one (scipy's optimiser, the
certifier).
"""

from __future__ import annotations

from privcore._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "LedgerEntry": "accounting",
    "PrivacyLedger": "accounting",
    "RelationTotal": "accounting",
    "basic_composition": "accounting",
    "chaining": "accounting",
    "chaining_hops": "accounting",
    "common_neighbourhood": "accounting",
    "group_privacy": "accounting",
    "parallel_composition": "accounting",
    "post_processing": "accounting",
    "Utility": "utility",
    "live_accuracy": "utility",
    "certify_evaluation": "utility",
    "PhiTable": "ptr_eval",
    "peek_accuracy": "utility",
    "Crossing": "tradeoff",
    "Curve": "tradeoff",
    "Estimate": "tradeoff",
    "Metric": "tradeoff",
    "accuracy_curve": "tradeoff",
    "accuracy_metric": "tradeoff",
    "attack_metric": "tradeoff",
    "smallest_epsilon": "tradeoff",
    "AttackReading": "attack_live",
    "SentAttack": "attack_live",
    "attack_release": "attack_live",
    "live_attack": "attack_live",
    "noise_free_attack": "attack_live",
    "image_noise_free_attack": "attack_live",
    # the mechanism protocol and its registry entries (privcore.mechanisms.registry holds the table)
    "Mechanism": "protocol",
    "Options": "protocol",
    "Outlook": "protocol",
    "Release": "protocol",
    "Setting": "protocol",
    "GlobalLaplace": "posthoc",
    "PTR": "ptr_release",
    "GaussInputRelease": "inference_release",
    "GaussOutputRelease": "inference_release",
    "LapOutputRelease": "inference_release",
    "load_ip_cached": "inference_release",
    "analytic_gaussian_delta": "gaussian_calibration",
    "analytic_gaussian_sigma": "gaussian_calibration",
    "cks_zcdp_delta": "gaussian_calibration",
    "classic_gaussian_sigma": "gaussian_calibration",
    "discrete_gaussian_sigma_floor": "gaussian_calibration",
    "gaussian_sigma": "gaussian_calibration",
    "GlobalPlan": "global_mechanism",
    "GlobalRelease": "global_mechanism",
    "GlobalScales": "global_mechanism",
    "card_clip_box": "global_mechanism",
    "certified_l2_constant": "global_gauss",
    "card_global_constant": "global_mechanism",
    "card_global_hint": "global_mechanism",
    "card_plan": "global_mechanism",
    "global_plan": "global_mechanism",
    "global_release": "global_mechanism",
    "global_scales": "global_mechanism",
    "ANY_METRIC": "guarantee",
    "Guarantee": "guarantee",
    "Neighbourhood": "guarantee",
    "Norm": "guarantee",
    "Space": "guarantee",
    "GaussInput": "inference",
    "GaussOutput": "inference",
    "LapOutput": "inference",
    "LDPEmbedding": "ldp",
    "LDPImage": "ldp",
    "cached_phi": "phi_cache",
    "DecidingSensitivityOracle": "ptr",
    "PTRResult": "ptr",
    "PTRScales": "ptr",
    "PhiResult": "ptr",
    "SensitivityOracle": "ptr",
    "bisection_decisions": "ptr",
    "compute_phi": "ptr",
    "propose_delta_p": "ptr",
    "propose_test_release": "ptr",
    "ptr_scales": "ptr",
    "release_probability": "ptr",
    "MIN_EPSILON": "sampling",
    "NoisePlan": "sampling",
    "RandomBits": "sampling",
    "add_noise": "sampling",
    "discrete_gaussian_integers": "sampling",
    "discrete_laplace_integers": "sampling",
    "plan_gaussian": "sampling",
    "plan_laplace": "sampling",
    "ptr_search_range": "search_range",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
