"""Attacks on releases and their measurement (posthoc paper Sec. 6; auditing à la Jagielski et al. 2020).

* :mod:`privcore.attacks.metrics` — SSIM, PSNR, ℓ1, ℓ2 of reconstructions (Tables 3–6), batched.
* :mod:`privcore.attacks.audit` — empirical lower bounds on ε from many releases of a pair.
* :mod:`privcore.attacks.reconstruction` — the attacker network and its training.

Each part appends its exports below (one block per module).
"""

from privcore.attacks.audit import (
    AuditResult,
    audit_pair,
    clopper_pearson_upper,
    epsilon_lower_bound,
    laplace_llr_statistic,
    projection_statistic,
)
from privcore.attacks.metrics import (
    ImageMetrics,
    image_metrics,
    l1_error,
    l2_error,
    paper_psnr,
    psnr,
    ssim,
)

__all__ = [
    "AuditResult",
    "ImageMetrics",
    "audit_pair",
    "clopper_pearson_upper",
    "epsilon_lower_bound",
    "image_metrics",
    "l1_error",
    "l2_error",
    "laplace_llr_statistic",
    "paper_psnr",
    "projection_statistic",
    "psnr",
    "ssim",
]
