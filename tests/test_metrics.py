"""Image metrics (privcore.attacks.metrics) against direct computations on known images."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.signal import correlate2d

from privcore.attacks.metrics import (
    PAPER_PSNR_OFFSET_DB,
    image_metrics,
    l1_error,
    l2_error,
    paper_psnr,
    psnr,
    ssim,
)


def _direct_ssim(a: np.ndarray, b: np.ndarray, data_range: float = 1.0) -> float:
    """Wang et al. (2004) SSIM written out: 11-tap Gaussian σ = 1.5, reflect padding, population moments."""
    d = np.arange(11) - 5.0
    g = np.exp(-0.5 * (d / 1.5) ** 2)
    g /= g.sum()
    w = np.outer(g, g)

    def filt(z: np.ndarray) -> np.ndarray:
        return correlate2d(np.pad(z, 5, mode="reflect"), w, mode="valid")

    mx, my = filt(a), filt(b)
    sxx, syy, sxy = filt(a * a) - mx**2, filt(b * b) - my**2, filt(a * b) - mx * my
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    smap = ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx**2 + my**2 + c1) * (sxx + syy + c2))
    return float(smap.mean())


@pytest.mark.parametrize("side", [8, 28])
def test_ssim_matches_the_formula_written_out(side: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.random((4, 1, side, side))
    y = np.clip(x + 0.15 * rng.standard_normal(x.shape), 0.0, 1.0)
    got = ssim(x, y)
    want = np.array([_direct_ssim(x[i, 0], y[i, 0]) for i in range(4)])
    np.testing.assert_allclose(got, want, atol=1e-12)


@pytest.mark.parametrize("side", [8, 28])
def test_float32_ssim_is_within_1e_6_of_the_formula_and_other_dtypes_are_refused(side: int) -> None:
    """The live attack reading's SSIM (float32 arithmetic) against the float64 formula written out, on
    noisy and on far-off reconstructions."""
    rng = np.random.default_rng(5)
    x = rng.random((6, 1, side, side))
    y = np.concatenate([np.clip(x[:3] + 0.15 * rng.standard_normal(x[:3].shape), 0.0, 1.0),
                        rng.random((3, 1, side, side))])
    want = np.array([_direct_ssim(x[i, 0], y[i, 0]) for i in range(6)])
    np.testing.assert_allclose(ssim(x, y, dtype=torch.float32), want, atol=1e-6)
    got = image_metrics(x, y, ssim_dtype=torch.float32)
    np.testing.assert_allclose(got.ssim, want, atol=1e-6)
    np.testing.assert_allclose(got.l2, image_metrics(x, y).l2, atol=1e-12)  # the others stay float64
    with pytest.raises(ValueError, match=r"dtype must be .*, got torch\.float16"):
        ssim(x, y, dtype=torch.float16)


def test_ssim_multichannel_is_the_channel_mean() -> None:
    rng = np.random.default_rng(1)
    x = rng.random((2, 3, 12, 12))
    y = np.clip(x + 0.1 * rng.standard_normal(x.shape), 0.0, 1.0)
    want = [np.mean([_direct_ssim(x[i, c], y[i, c]) for c in range(3)]) for i in range(2)]
    np.testing.assert_allclose(ssim(x, y), want, atol=1e-12)


def test_ssim_identity_is_one_and_is_symmetric() -> None:
    rng = np.random.default_rng(2)
    x = rng.random((3, 1, 8, 8))
    y = rng.random((3, 1, 8, 8))
    np.testing.assert_allclose(ssim(x, x), 1.0, atol=1e-12)
    np.testing.assert_allclose(ssim(x, y), ssim(y, x), atol=1e-12)
    assert np.all(ssim(x, y) < 0.5)  # unrelated noise images are dissimilar


def test_pixel_errors_on_a_known_offset() -> None:
    x = torch.full((2, 1, 8, 8), 0.25, dtype=torch.float32)
    y = x + torch.tensor([0.1, 0.2]).view(2, 1, 1, 1)
    np.testing.assert_allclose(l1_error(x, y), [0.1, 0.2], rtol=1e-6)
    np.testing.assert_allclose(l2_error(x, y), [0.01, 0.04], rtol=1e-5)
    # PSNR = 10 log10(1 / MSE) = 20 dB and 10·log10(25) ≈ 13.98 dB
    np.testing.assert_allclose(psnr(x, y), [20.0, 10 * math.log10(25.0)], rtol=1e-5)
    np.testing.assert_allclose(psnr(x, y, data_range=255.0), psnr(x, y) + PAPER_PSNR_OFFSET_DB, rtol=1e-7)


def test_psnr_perfect_reconstruction_is_infinite_and_summary_skips_it() -> None:
    x = np.random.default_rng(3).random((2, 1, 8, 8))
    y = x.copy()
    y[1] += 0.1
    p = psnr(x, y)
    assert math.isinf(p[0]) and p[0] > 0
    summary = image_metrics(x, y).summary()
    assert summary["psnr"] == pytest.approx(20.0, rel=1e-6)
    assert summary["psnr_paper"] == pytest.approx(20.0 + 20 * math.log10(255), rel=1e-6)


def test_paper_psnr_reproduces_the_papers_table_scale() -> None:
    # Table 5 (MNIST, ε = 1, R = 0.1) reports an MSE of 0.0471; 10·log10(255²/0.0471) = 61.40 dB,
    # beside Table 6's 61.87 (a mean of per-image PSNRs sits above the PSNR of the mean MSE).
    assert float(paper_psnr(10 * math.log10(1 / 0.0471))) == pytest.approx(61.40, abs=0.01)


def test_image_metrics_batches_agree_with_one_batch() -> None:
    rng = np.random.default_rng(4)
    x = rng.random((10, 1, 8, 8))
    y = np.clip(x + 0.2 * rng.standard_normal(x.shape), 0, 1)
    small = image_metrics(x, y, batch_size=3)
    whole = image_metrics(x, y, batch_size=100)
    for name in ("ssim", "psnr", "l1", "l2"):
        np.testing.assert_allclose(getattr(small, name), getattr(whole, name), atol=1e-12)
    assert small.n == 10
    # (H, W) and (N, H, W) inputs are read as single-channel images
    np.testing.assert_allclose(ssim(x[0, 0], y[0, 0]), small.ssim[:1], atol=1e-12)
    np.testing.assert_allclose(l1_error(x[:, 0], y[:, 0]), small.l1, atol=1e-12)


def test_metric_inputs_are_checked() -> None:
    x = np.zeros((2, 1, 8, 8))
    with pytest.raises(ValueError, match="differ in shape"):
        ssim(x, np.zeros((2, 1, 8, 9)))
    with pytest.raises(ValueError, match="finite"):
        psnr(x, np.full((2, 1, 8, 8), np.nan))
    with pytest.raises(ValueError, match="data_range"):
        psnr(x, x, data_range=0.0)
    with pytest.raises(ValueError, match="at least 6"):
        ssim(np.zeros((1, 1, 4, 4)), np.zeros((1, 1, 4, 4)))
