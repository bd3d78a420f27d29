"""The attack on the sidebar's setting as the pages show it: the live reading of
:func:`privcore.mechanisms.live_attack` (SSIM, PSNR, ℓ1, ℓ2 with 95 % intervals, beside the no-release
baseline) as a table, and the metrics of one sent release's reconstruction
(:func:`privcore.mechanisms.attack_release`). View glue: no privacy maths."""

from __future__ import annotations

from typing import Any

import pandas as pd

from privlens import mechanism_view as mv
from privlens import pipelines
from privlens.settings import Settings

__all__ = ["LIVE_IMAGES", "METRIC_TEXT", "live_reading", "live_reading_job", "live_reading_soon",
           "noise_free", "reading_caption", "reading_table", "sent_attack", "sent_caption"]

#: test images of a live attack reading (the first ones of the split): SSIM's 11×11 window dominates the
#: cost (in float64 5 s per 1 000 images and draw, profiled on two cores shared by about eight busy
#: processes; the reading computes it in float32, about 9× faster); 300 × 3 draws give SSIM intervals
#: near ±0.01
LIVE_IMAGES = 300
#: per metric: its name on the page, which way is better for the attacker, its decimals
METRIC_TEXT = {
    "ssim": ("SSIM", "higher = closer to the image", 3),
    "psnr": ("PSNR (dB)", "higher = closer to the image", 2),
    "l1": ("ℓ1 (mean absolute pixel error)", "lower = closer to the image", 4),
    "l2": ("ℓ2 (mean squared pixel error)", "lower = closer to the image", 4),
}


def live_reading(mech: Any, target: Any, s: Settings, *, dataset: str, model: str) -> Any:
    """The live attack on ``mech``'s releases of ``target`` at exactly the sidebar's setting (memoised
    per setting by privcore); ``target`` None for a mechanism that releases no embedding."""
    from privcore.mechanisms import live_attack

    return live_attack(mech, target, mv.setting(mech, s), dataset=dataset, model=model, n=LIVE_IMAGES,
                       models_dir=pipelines.models_dir())


def live_reading_soon(mech: Any, target: Any, s: Settings, *, dataset: str, model: str,
                      wait_s: float = 0.0) -> tuple[Any, bool]:
    """:func:`live_reading`, computed in a background thread once per setting
    (:func:`privlens.background.soon`) for a page that must not wait for it: the reading and False once
    it is in (None where it failed), else None and True ("computing…"). With background work off it is
    computed here."""
    from privlens import background

    if not background.enabled():
        return live_reading(mech, target, s, dataset=dataset, model=model), False
    job = live_reading_job(mech, target, s, dataset=dataset, model=model, wait_s=wait_s)
    return (job.value, False) if job.done.is_set() else (None, True)


def live_reading_job(mech: Any, target: Any, s: Settings, *, dataset: str, model: str,
                     wait_s: float = 0.0) -> Any:
    """The background job (:func:`privlens.background.soon`) computing :func:`live_reading`, one per
    setting in the process: the page's and the warm-up's (:func:`privlens.warmup.prepare_attack`)."""
    from privlens import background

    key = ("live-attack", mech.name, id(target), mv.setting(mech, s), dataset, model)
    return background.soon(key, lambda: live_reading(mech, target, s, dataset=dataset, model=model),
                           name=f"privlens-attack-{mech.name}", wait_s=wait_s)


def reading_table(reading: Any) -> pd.DataFrame:
    """One row per metric: the attacker's mean [95 % interval], the baseline's, and which way is better."""
    rows = []
    for key, (name, better, digits) in METRIC_TEXT.items():
        rows.append({"metric": name, "attacker, from a release": reading.metrics[key].text(digits),
                     "no release (training mean image)": reading.baseline[key].text(digits),
                     "better for the attacker": better})
    return pd.DataFrame(rows)


def reading_caption(reading: Any) -> str:
    """n, draws, the interval, the told scale and the ⊥ convention, in words."""
    noise = "Gaussian" if reading.gaussian else "Laplace"
    return (f"Computed now: {reading.sample_text}, means with 95 % bootstrap intervals over images. Each "
            f"release was simulated and decoded by the model's attacker, told the public noise scale "
            f"({noise}, Laplace-equivalent b = {reading.told_scale:.4g}); {reading.convention}. The baseline "
            "is what an attacker gets from nothing: the training mean image as the guess for every image.")


def sent_attack(mech: Any, target: Any, release: Any, image: Any) -> Any:
    """The attacker's reconstruction of one sent release and its metrics against the user's image, or None."""
    from privcore.mechanisms import attack_release

    return attack_release(mech, target, release, image, models_dir=pipelines.models_dir())


def noise_free(view: mv.View) -> Any:
    """The attacker's reconstruction of the view's released vector without noise (ε = ∞, told b = 0) and
    its metrics against the view's image, or None without a shipped scale-told attacker."""
    from privcore.mechanisms import image_noise_free_attack

    return image_noise_free_attack(view.mech, view.target, view.x, view.image.tensor,
                                   models_dir=pipelines.models_dir())


def sent_caption(sent: Any) -> str:
    """``SSIM 0.412 · PSNR 12.31 dB · ℓ1 0.1210 · ℓ2 0.0512`` against the user's image."""
    m = sent.metrics
    return (f"Against your image: SSIM {m['ssim']:.3f} · PSNR {m['psnr']:.2f} dB · ℓ1 {m['l1']:.4f} · "
            f"ℓ2 {m['l2']:.4f} (one image, one draw; the attacker told b = {sent.told_scale:.4g})")
