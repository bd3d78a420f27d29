"""Attacks on releases and their measurement (posthoc paper Sec. 6; auditing à la Jagielski et al. 2020).

* :mod:`privcore.attacks.metrics` — SSIM, PSNR, ℓ1, ℓ2 of reconstructions (Tables 3–6), batched.
* :mod:`privcore.attacks.audit` — empirical lower bounds on ε from many releases of a pair.

The attacker network itself is an architecture like the others, :mod:`privcore.nets.attacker` (trained by
:func:`privcore.train.attacker.train_reconstruction_attacker`).

Exports are loaded lazily (PEP 562), so ``import privcore.attacks.audit`` does not pay for
torchmetrics. Each part appends its names to ``_EXPORTS`` (name → submodule).
"""

from __future__ import annotations

from privcore._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    # privcore.attacks.audit
    "AuditResult": "audit",
    "audit_pair": "audit",
    "clopper_pearson_upper": "audit",
    "epsilon_lower_bound": "audit",
    "laplace_llr_statistic": "audit",
    "projection_statistic": "audit",
    # privcore.attacks.metrics
    "ImageMetrics": "metrics",
    "image_metrics": "metrics",
    "l1_error": "metrics",
    "l2_error": "metrics",
    "mean_image_baseline": "metrics",
    "paper_psnr": "metrics",
    "psnr": "metrics",
    "ssim": "metrics",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
