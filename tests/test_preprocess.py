"""privcore.inputs.preprocess.digit_style: a dark drawing on a light page, small and off-centre, becomes a
light, size-normalised digit centred by mass on black, as the training data."""

from __future__ import annotations

import pytest
import torch

from privcore.inputs.preprocess import digit_style


def _drawing() -> torch.Tensor:
    """A 64×64 light page with a dark vertical stroke (a "1") in the top-left corner."""
    page = torch.full((1, 64, 64), 0.95)
    page[0, 4:20, 6:9] = 0.05
    return page


def test_a_small_dark_stroke_on_a_light_page_becomes_a_centred_light_digit() -> None:
    out = digit_style(_drawing(), target_hw=(8, 8), fill=0.875)
    assert out.tensor.shape == (1, 8, 8) and out.tensor.dtype == torch.float32
    assert out.steps[0] == "inverted (light background)" and (
        out.steps[1] == "cropped to the ink (a box 5 % of the image's width and 25 % of its height)"
    )
    t = out.tensor[0]
    assert float(t.max()) == pytest.approx(1.0)  # light ink at full contrast
    assert float(t[:, 0].max()) < 0.05 and float(t[:, -1].max()) < 0.05  # on black, away from the sides
    ys, xs = torch.meshgrid(torch.arange(8.0), torch.arange(8.0), indexing="ij")
    m = float(t.sum())
    assert abs(float((t * ys).sum()) / m - 3.5) < 0.75 and abs(float((t * xs).sum()) / m - 3.5) < 0.75
    rows = torch.nonzero(t.max(dim=1).values > 0.25).flatten()
    assert int(rows[-1]) - int(rows[0]) + 1 >= 6  # the stroke's length fills most of the frame
    # without preprocessing the same drawing would be a faint smudge in one corner
    naive = torch.nn.functional.adaptive_avg_pool2d(1 - _drawing()[None], (8, 8))[0, 0]
    assert float(naive[4:, 4:].max()) < 0.06 and float(naive.max()) < 0.6  # background grey, no ink


def test_light_on_dark_is_not_inverted_and_blank_is_refused() -> None:
    dark = torch.zeros(1, 32, 32)
    dark[0, 10:22, 14:18] = 1.0
    out = digit_style(dark, target_hw=(8, 8))
    assert not any("inverted" in s for s in out.steps)
    with pytest.raises(ValueError, match="no ink"):
        digit_style(torch.full((1, 32, 32), 0.3), target_hw=(8, 8))
    with pytest.raises(ValueError, match="fill"):
        digit_style(dark, target_hw=(8, 8), fill=0.0)
