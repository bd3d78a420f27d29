"""Digit-style preprocessing of a hand-drawn upload: what MNIST did to its digits (LeCun et al. 1998).

A drawing photographed or painted by a user is dark ink on a light page, anywhere in the frame and
of any size; the training digits are light ink on black, size-normalised into a box and centred by
their centre of mass. Downscaled as it is to 8×8 or 28×28 such a drawing becomes a faint smudge.
:func:`digit_style` takes the upload decoded at a working resolution (a few times the model's) and

1. inverts it when its border is light (a light background),
2. crops it to the ink (pixels above a fraction of the brightest),
3. scales the crop, keeping its aspect, so its longer side fills ``fill`` of the frame,
4. places it so its centre of mass is at the frame's centre (padding with the background, 0),
5. averages it down to the model's size,

and says which steps it took. Deterministic, on the user's own input: it releases nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from privcore.validation import check_in_range

__all__ = ["Preprocessed", "digit_style"]


@dataclass(frozen=True)
class Preprocessed:
    """The model-ready image (C, H, W) in [0, 1] and the steps taken, in words."""

    tensor: torch.Tensor
    steps: tuple[str, ...]


def digit_style(
    x: torch.Tensor, *, target_hw: Sequence[int], fill: float = 20 / 28, ink: float = 0.25
) -> Preprocessed:
    """Digit-style preprocessing of ``x`` (C, H, W) in [0, 1] at a working resolution, to
    ``target_hw`` (see the module docstring). ``fill`` is the share of the frame the ink's longer side
    takes (MNIST: 20/28); ``ink`` the fraction of the brightest value above which a pixel is ink.
    ValueError when nothing stands out as ink."""
    f = check_in_range("fill", fill, 0.0, 1.0, high_open=False)
    t = check_in_range("ink", ink, 0.0, 1.0)
    th, tw = (int(v) for v in target_hw)
    if x.ndim != 3 or th < 1 or tw < 1:
        raise ValueError(
            f"x must be (C, H, W) and target_hw two positive sizes, got {tuple(x.shape)}, {(th, tw)}"
        )
    img = x.detach().to(torch.float64).clamp(0.0, 1.0)
    c, h, w = img.shape
    steps = []
    grey = img.mean(dim=0)
    border = torch.cat([grey[0], grey[-1], grey[:, 0], grey[:, -1]])
    if float(border.median()) > 0.5:
        grey, border = 1.0 - grey, 1.0 - border
        steps.append("inverted (light background)")
    ink_map = (grey - float(border.median())).clamp_min(0.0)  # the background becomes 0
    peak = float(ink_map.max())
    if peak <= 0.0:
        raise ValueError("no ink found: the image is uniform, nothing to crop or centre")
    mask = ink_map > t * peak
    rows, cols = torch.nonzero(mask.any(dim=1)).flatten(), torch.nonzero(mask.any(dim=0)).flatten()
    r0, r1, c0, c1 = int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1
    crop = ink_map[None, r0:r1, c0:c1]
    # in shares of the image, not pixels: x is a working copy at a few times the model's size, whose
    # pixel count is neither the upload's nor the model's
    steps.append(
        f"cropped to the ink (a box {100 * (c1 - c0) / w:.0f} % of the image's width and "
        f"{100 * (r1 - r0) / h:.0f} % of its height)"
    )
    # the working frame: the target size times k, so the crop is resampled once, with area averaging
    k = max(1, min(h // th, w // tw, 8))
    fh, fw = th * k, tw * k
    scale = f * min(fh, fw) / max(r1 - r0, c1 - c0)
    nh, nw = max(1, min(fh, round((r1 - r0) * scale))), max(1, min(fw, round((c1 - c0) * scale)))
    glyph = F.interpolate(crop[None], size=(nh, nw), mode="area")[0]
    steps.append(f"scaled to fill {f:.0%} of the frame")
    mass = glyph[0]
    total = float(mass.sum())
    cy = float((mass.sum(dim=1) * torch.arange(nh, dtype=mass.dtype)).sum()) / total if total else nh / 2
    cx = float((mass.sum(dim=0) * torch.arange(nw, dtype=mass.dtype)).sum()) / total if total else nw / 2
    top = min(max(round(fh / 2 - cy - 0.5), 0), fh - nh)
    left = min(max(round(fw / 2 - cx - 0.5), 0), fw - nw)
    frame = torch.zeros(1, fh, fw, dtype=img.dtype)
    frame[:, top : top + nh, left : left + nw] = glyph
    steps.append("centred by its centre of mass and padded")
    out = F.adaptive_avg_pool2d(frame[None], (th, tw))[0]
    out = out / float(out.max()) if float(out.max()) > 0 else out  # full contrast, as the training data
    return Preprocessed(out.expand(c, th, tw).to(torch.float32).clamp(0.0, 1.0).contiguous(), tuple(steps))
