"""Image-reconstruction metrics of the posthoc paper's Tables 3–6: SSIM, PSNR, ℓ1 and ℓ2, batched.

All four are computed per image by torchmetrics or by one line of torch, and averaged by the
caller. SSIM is Wang et al. (2004) with torchmetrics' convention: 11-tap Gaussian window σ = 1.5,
K1 = 0.01, K2 = 0.03, population (co)variances, images reflect-padded by 5 pixels and the SSIM map
averaged over every pixel (so 8×8 digits work; skimage instead crops the border, which differs by
~0.005 on 28×28 images). PSNR is 10·log10(range²/MSE). Conventions, chosen so
that our numbers line up with the paper's tables (``docs/RESULTS.md``):

* ``l1`` is the mean absolute pixel error and ``l2`` the mean *squared* pixel error (MSE), per
  pixel. The paper's Table 5 values are below its Table 4 values for the same images, which is
  impossible for an RMSE (RMSE ≥ MAE) but expected for an MSE; so "ℓ2" there is the MSE.
* ``psnr`` uses the true data range (1 for pixels in [0, 1]). The paper's ~60 dB values match
  10·log10(255²/MSE) on [0, 1] images, i.e. a data range of 255 applied to unit-range pixels;
  :func:`paper_psnr` converts ours to that convention (+20·log10(255) ≈ +48.13 dB) for side by side
  comparison only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torchmetrics.functional.image import peak_signal_noise_ratio, structural_similarity_index_measure

from privcore.errors import ParameterError
from privcore.validation import check_positive

__all__ = [
    "PAPER_PSNR_OFFSET_DB",
    "ImageMetrics",
    "image_metrics",
    "l1_error",
    "l2_error",
    "mean_image_baseline",
    "paper_psnr",
    "psnr",
    "ssim",
]

#: 20·log10(255): what the paper's PSNR adds to a unit-range PSNR (see module docstring).
PAPER_PSNR_OFFSET_DB = 20.0 * math.log10(255.0)
_SSIM_PAD = 5  # half-width of torchmetrics' 11-tap window for σ = 1.5 (reflect padding needs H, W > 5)


def _as_images(name: str, x: Any, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """A ``dtype`` CPU tensor of shape (N, C, H, W) from (N, C, H, W), (N, H, W) or (H, W) input."""
    t = x.detach() if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
    if t.dtype == torch.bool or t.is_complex():
        raise TypeError(f"{name} must hold real pixel values, got dtype {t.dtype}")
    t = t.to(device="cpu", dtype=dtype)
    if t.ndim == 2:
        t = t[None, None]
    elif t.ndim == 3:
        t = t[:, None]
    if t.ndim != 4 or t.shape[0] == 0:
        raise ValueError(
            f"{name} must have shape (N, C, H, W), (N, H, W) or (H, W) with N ≥ 1, got {tuple(t.shape)}"
        )
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} must contain only finite numbers")
    return t


def _pair(reference: Any, reconstruction: Any,
          dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    ref = _as_images("reference", reference, dtype)
    rec = _as_images("reconstruction", reconstruction, dtype)
    if ref.shape != rec.shape:
        raise ValueError(
            f"reference and reconstruction differ in shape: {tuple(ref.shape)} vs {tuple(rec.shape)}"
        )
    return ref, rec


def ssim(reference: Any, reconstruction: Any, *, data_range: float = 1.0,
         dtype: torch.dtype = torch.float64) -> np.ndarray:
    """Per-image SSIM (Wang et al. 2004; posthoc paper Table 3), shape (N,); images ≥ 6×6.

    Gaussian window σ = 1.5 (11 taps), reflect padding, mean over the whole map (module docstring).
    ``dtype`` is the arithmetic's: ``torch.float32`` is about 9× faster on CPU (its convolutions are
    vectorised, float64's are not) and within 1e-6 of float64 on [0, 1] images.
    """
    if dtype not in (torch.float32, torch.float64):
        raise ParameterError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
    ref, rec = _pair(reference, reconstruction, dtype)
    rng = check_positive("data_range", data_range)
    if min(ref.shape[-2:]) < _SSIM_PAD + 1:
        side = _SSIM_PAD + 1
        raise ValueError(f"images must be at least {side}×{side} for SSIM, got {tuple(ref.shape[-2:])}")
    out = structural_similarity_index_measure(
        rec, ref, gaussian_kernel=True, sigma=1.5, data_range=rng, reduction="none"
    )
    return out.numpy().astype(np.float64)


def psnr(reference: Any, reconstruction: Any, *, data_range: float = 1.0) -> np.ndarray:
    """Per-image PSNR in dB, 10·log10(range²/MSE) (posthoc paper Table 6, true range), shape (N,).

    A perfect reconstruction (MSE = 0) gives ``inf``.
    """
    ref, rec = _pair(reference, reconstruction)
    rng = check_positive("data_range", data_range)
    out = peak_signal_noise_ratio(rec, ref, data_range=rng, reduction="none", dim=(1, 2, 3)).numpy()
    mse = l2_error(ref, rec)
    return np.where(mse == 0.0, np.inf, out.astype(np.float64))


def l1_error(reference: Any, reconstruction: Any) -> np.ndarray:
    """Per-image mean absolute pixel error (posthoc paper Table 4), shape (N,)."""
    ref, rec = _pair(reference, reconstruction)
    return (ref - rec).abs().mean(dim=(1, 2, 3)).numpy()


def l2_error(reference: Any, reconstruction: Any) -> np.ndarray:
    """Per-image mean squared pixel error, MSE (posthoc paper Table 5's "ℓ2"), shape (N,)."""
    ref, rec = _pair(reference, reconstruction)
    return ((ref - rec) ** 2).mean(dim=(1, 2, 3)).numpy()


def paper_psnr(psnr_db: Any) -> Any:
    """Our unit-range PSNR expressed in the paper's convention (data range 255 on [0, 1] pixels)."""
    return np.asarray(psnr_db, dtype=np.float64) + PAPER_PSNR_OFFSET_DB


@dataclass(frozen=True, kw_only=True)
class ImageMetrics:
    """Per-image SSIM, PSNR (dB, data range as given), ℓ1 (MAE) and ℓ2 (MSE), each of shape (N,)."""

    ssim: np.ndarray
    psnr: np.ndarray
    l1: np.ndarray
    l2: np.ndarray

    @property
    def n(self) -> int:
        """Number of images."""
        return int(self.ssim.shape[0])

    def summary(self) -> dict[str, float]:
        """Means and standard deviations (``ssim``, ``ssim_std``, ...) and ``psnr_paper``.

        The PSNR mean is over finite values (a perfect reconstruction has infinite PSNR).
        """
        out: dict[str, float] = {}
        for name in ("ssim", "psnr", "l1", "l2"):
            v = getattr(self, name)
            finite = v[np.isfinite(v)]
            out[name] = float(finite.mean()) if finite.size else math.inf
            out[f"{name}_std"] = float(finite.std()) if finite.size else 0.0
        out["psnr_paper"] = float(paper_psnr(out["psnr"]))
        return out


def image_metrics(
    reference: Any, reconstruction: Any, *, data_range: float = 1.0, batch_size: int = 1024,
    ssim_dtype: torch.dtype = torch.float64,
) -> ImageMetrics:
    """SSIM, PSNR, ℓ1 and ℓ2 of every reconstruction against its reference (posthoc paper Sec. 6);
    SSIM in ``ssim_dtype`` arithmetic (:func:`ssim`), the others in float64."""
    ref, rec = _pair(reference, reconstruction)
    parts: dict[str, list[np.ndarray]] = {"ssim": [], "psnr": [], "l1": [], "l2": []}
    for start in range(0, ref.shape[0], max(1, int(batch_size))):
        a, b = ref[start : start + batch_size], rec[start : start + batch_size]
        parts["ssim"].append(ssim(a, b, data_range=data_range, dtype=ssim_dtype))
        parts["psnr"].append(psnr(a, b, data_range=data_range))
        parts["l1"].append(l1_error(a, b))
        parts["l2"].append(l2_error(a, b))
    return ImageMetrics(**{k: np.concatenate(v) for k, v in parts.items()})


def mean_image_baseline(train: Any, test: Any, *, data_range: float = 1.0,
                        ssim_dtype: torch.dtype = torch.float64) -> ImageMetrics:
    """The no-release baseline: the metrics of the training mean image against each test image.

    An attacker who receives nothing (⊥, or no release at all) can still output the average
    training image; a reconstruction scoring no better than this has learned nothing about the
    particular image from the release (posthoc paper Sec. 6 reports the attacker's scores alone).
    ``train``, ``test``: (N, C, H, W) images in [0, ``data_range``]; uses training data only for
    the guess. SSIM in ``ssim_dtype`` arithmetic (:func:`ssim`).
    """
    tr = torch.as_tensor(train, dtype=torch.float32)
    te = torch.as_tensor(test, dtype=torch.float32)
    if tr.ndim != 4 or tr.shape[0] == 0 or te.ndim != 4 or tr.shape[1:] != te.shape[1:]:
        raise ValueError(
            f"train and test must be non-empty (N, C, H, W) images of one shape, got {tuple(tr.shape)} "
            f"and {tuple(te.shape)}"
        )
    guess = tr.mean(dim=0, keepdim=True).expand_as(te)
    return image_metrics(te, guess, data_range=data_range, ssim_dtype=ssim_dtype)
