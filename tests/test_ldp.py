"""LDP baselines (posthoc paper, Table 2): scales, clipping, layout safety, guarantee, empirical DP audit.

Statistical tests use fixed seeds and a false-alarm level of 1e-3 (see test_inference_mechanisms).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from privcore.mechanisms import LDPEmbedding, LDPImage
from tests.test_inference_mechanisms import bins, dp_violations

ALPHA = 1e-3


def test_scales_are_the_table_2_formulas() -> None:
    assert LDPImage(epsilon=2.0).scale_for(784) == pytest.approx(392.0)
    assert LDPImage(epsilon=0.5, values_per_image=64).scale == pytest.approx(128.0)
    assert LDPEmbedding(epsilon=2.0, bound=3.0).scale_for(8) == pytest.approx(24.0)


def test_guarantees_are_pure_epsilon_over_all_pairs() -> None:
    for mech in (LDPImage(epsilon=1.5), LDPEmbedding(epsilon=1.5, bound=1.0)):
        g = mech.guarantee
        assert (g.epsilon, g.delta, g.all_pairs) == (1.5, 0.0, True)
        assert "any two inputs" in g.describe()


def test_inputs_are_clipped_before_the_noise() -> None:
    """At ε = 10⁶ the noise is ~10⁻⁵: the output sits on the clipped values."""
    img = LDPImage(epsilon=1e6)(np.array([[2.0, -1.0, 0.25]]), rng=0)
    assert np.allclose(img, [[1.0, 0.0, 0.25]], atol=1e-3)
    emb = LDPEmbedding(epsilon=1e6, bound=2.0)(np.array([5.0, -9.0, 1.0]), rng=0)
    assert np.allclose(emb, [2.0, -2.0, 1.0], atol=1e-3)


def test_ambiguous_image_layouts_are_refused() -> None:
    """A lone H×W image must not be read as H images of W pixels (H-fold too little noise)."""
    with pytest.raises(ValueError, match=r"batch of images"):
        LDPImage(epsilon=1.0)(np.zeros(10))
    with pytest.raises(ValueError, match="values_per_image is 784"):
        LDPImage(epsilon=1.0, values_per_image=784)(np.zeros((28, 28)))
    assert LDPImage(epsilon=1.0, values_per_image=784)(np.zeros((1, 28, 28)), rng=0).shape == (1, 28, 28)
    assert LDPImage(epsilon=1.0, values_per_image=5)(np.zeros(5), rng=0).shape == (5,)
    with pytest.raises(ValueError, match="values_per_image"):
        _ = LDPImage(epsilon=1.0).scale
    with pytest.raises(ValueError, match=r"shape \(k,\) or \(N, k\)"):
        LDPEmbedding(epsilon=1.0, bound=1.0)(np.zeros((2, 3, 4)))


def test_image_noise_has_scale_d_over_epsilon() -> None:
    """KS on (output − clipped input) against Laplace(d/ε_eff), false alarm 1e-3; torch in, torch out."""
    mech = LDPImage(epsilon=4.0)
    x = torch.rand(200, 1, 8, 8)
    y = mech(x, rng=9)
    assert isinstance(y, torch.Tensor) and y.shape == x.shape
    noise = (y.double() - x.double()).numpy().ravel()
    plan = mech.noise_plan(64, x.numel())
    assert plan.nominal == pytest.approx(16.0)
    # float32 output rounding adds < 1e-5 relative; far below what KS can see at this sample size
    assert stats.kstest(noise, stats.laplace(scale=plan.effective).cdf).pvalue > ALPHA


def test_ldp_embedding_satisfies_the_dp_inequality_for_the_farthest_pair() -> None:
    """z = −B vs z = +B (k = 1): histogram ratios within e^ε (false alarm 1e-3); half noise is caught."""
    eps, bound, n = 1.0, 1.0, 200_000
    mech = LDPEmbedding(epsilon=eps, bound=bound)
    a = mech(np.full((n, 1), -bound), rng=1).ravel()
    b = mech(np.full((n, 1), bound), rng=2).ravel()
    sets = bins(-10.0, 10.0, 0.5)
    assert dp_violations(a, b, sets, eps, 0.0) == []
    weak = LDPEmbedding(epsilon=2 * eps, bound=bound)
    wa = weak(np.full((n, 1), -bound), rng=3).ravel()
    wb = weak(np.full((n, 1), bound), rng=4).ravel()
    assert dp_violations(wa, wb, sets, eps, 0.0)


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        ({"epsilon": 0.0}, ValueError, "epsilon"),
        ({"epsilon": math.nan}, ValueError, "epsilon"),
        ({"epsilon": 1.0, "bound": -1.0}, ValueError, "bound"),
        ({"epsilon": 1.0, "bound": "1"}, TypeError, "bound"),
    ],
)
def test_bad_parameters_raise(kwargs: dict, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        LDPEmbedding(**{"bound": 1.0, **kwargs})


def test_image_values_per_image_must_be_a_positive_int() -> None:
    with pytest.raises(ValueError, match="values_per_image"):
        LDPImage(epsilon=1.0, values_per_image=0)
    with pytest.raises(TypeError, match="values_per_image"):
        LDPImage(epsilon=1.0, values_per_image=7.5)  # type: ignore[arg-type]
