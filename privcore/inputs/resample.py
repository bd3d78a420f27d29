"""From decoded pixels to the model's input, strip by strip: values in [0, 1], alpha over the
background, colour ↔ grey, and padding to a square plus resizing as one linear map with Pillow's own
resampling coefficients (see :mod:`privcore.inputs.images` for the conversions and why)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Float64 values converted at a time (one strip of rows or, for very wide images, of columns).
STRIP_BYTES = 8 * 1024 * 1024
_LUMA = np.array([0.299, 0.587, 0.114])


def raw_pixels(im: object, bit_depth: int) -> tuple[np.ndarray, float, bool, bool, list[str]]:
    """The decoded pixels as an integer/float array (H, W, bands) with how to read them.

    Returns ``(raw, scale, clip, has_alpha, notes)``: a band's value in [0, 1] is raw / scale (clipped to
    [0, 1] when ``clip``); with ``has_alpha`` the last band is the alpha channel. Conversions Pillow must
    do (palette, CMYK, ...) happen here, on the whole image; the float arithmetic happens strip by strip.
    """
    from PIL import Image

    assert isinstance(im, Image.Image)
    notes: list[str] = []
    mode = im.mode
    if mode in ("I;16", "I;16B", "I;16L", "I;16N"):
        notes.append("16-bit grey PNG read at full precision (value / 65535).")
        return np.asarray(im)[..., None], 65535.0, False, False, notes
    if mode == "I":
        # Pillow opens some 16-bit grey PNGs as 32-bit "I"; the PNG header says the true depth.
        if bit_depth == 16:
            notes.append("16-bit grey PNG read at full precision (value / 65535).")
        return np.asarray(im)[..., None], 65535.0 if bit_depth == 16 else 255.0, True, False, notes
    if mode == "F":
        return np.asarray(im)[..., None], 1.0, True, False, notes
    if bit_depth == 16 and mode in ("RGB", "RGBA", "LA", "L"):
        notes.append("16-bit colour PNG reduced to 8 bits per channel (error below 1/255).")
    if mode == "P":
        im = im.convert("RGBA") if "transparency" in im.info else im.convert("RGB")
    elif mode in ("1", "CMYK", "YCbCr", "LAB", "HSV"):
        im = im.convert("RGB") if mode != "1" else im.convert("L")
    elif mode == "PA":
        im = im.convert("RGBA")
    elif mode == "La":
        im = im.convert("LA")
    elif mode == "RGBa":
        im = im.convert("RGBA")
    elif mode not in ("L", "LA", "RGB", "RGBA"):
        im = im.convert("RGBA")
    raw = np.asarray(im)
    if raw.ndim == 2:
        raw = raw[..., None]
    return raw, 255.0, False, im.mode in ("LA", "RGBA"), notes


@dataclass(frozen=True)
class _Axis:
    """Pillow's resampling of one axis (``precompute_coeffs`` of its ``Resample.c``) for an image that
    occupies [offset, offset + size) of a padded line of ``padded`` samples, without building that line.

    Output ``k`` is Σ weight·value over the image samples [lo[k], hi[k]) (image coordinates); ``weights[k]``
    is one float (box filter: every weight of the run is equal) or an array (bilinear). Weights are
    normalised over the padded line, so the padding holds the remaining 1 − Σ weight (the background).
    """

    lo: tuple[int, ...]
    hi: tuple[int, ...]
    weights: tuple[float | np.ndarray, ...]

    @staticmethod
    def build(*, padded: int, out: int, offset: int, size: int, box: bool) -> _Axis:
        scale = padded / out
        filterscale = max(scale, 1.0)
        support = (0.5 if box else 1.0) * filterscale
        ss = 1.0 / filterscale

        def kernel(x: np.ndarray) -> np.ndarray:
            if box:
                return ((x > -0.5) & (x <= 0.5)).astype(np.float64)
            return np.maximum(1.0 - np.abs(x), 0.0)

        lo: list[int] = []
        hi: list[int] = []
        weights: list[float | np.ndarray] = []
        for k in range(out):
            center = (k + 0.5) * scale
            xmin = max(int(center - support + 0.5), 0)
            xmax = min(int(center + support + 0.5), padded)
            if box and xmax - xmin > 4:
                # the box kernel is 1 on one contiguous run of [xmin, xmax) that can miss only its first
                # point: find the run's ends instead of evaluating every point (O(1) memory per output)
                ends = kernel((np.array([xmin, xmax - 1], dtype=np.float64) - center + 0.5) * ss)
                a, b = xmin + (0 if ends[0] else 1), xmax - (0 if ends[1] else 1)
                total = float(b - a)
                a, b = min(max(a, offset), offset + size), max(min(b, offset + size), offset)
                lo.append(a - offset)
                hi.append(max(a, b) - offset)
                weights.append(1.0 / total)
                continue
            vals = kernel((np.arange(xmin, xmax, dtype=np.float64) - center + 0.5) * ss)
            total = float(vals.sum())
            if total:
                vals = vals / total
            a, b = min(max(xmin, offset), offset + size), max(min(xmax, offset + size), offset)
            b = max(a, b)
            lo.append(a - offset)
            hi.append(b - offset)
            weights.append(vals[a - xmin : b - xmin].copy())
        return _Axis(tuple(lo), tuple(hi), tuple(weights))

    @property
    def nbytes(self) -> int:
        """Memory held by the weights."""
        return sum(w.nbytes if isinstance(w, np.ndarray) else 8 for w in self.weights) + 16 * len(self.lo)

    def add_to(self, out: np.ndarray, block: np.ndarray, start: int, *, axis: int) -> None:
        """``out`` += this axis' resampling of ``block``, whose samples along ``axis`` (0 or 1) are the image
        samples start, start + 1, …; ``out`` has the output axis in place of that axis."""
        n = block.shape[axis]
        for k, (lo, hi, w) in enumerate(zip(self.lo, self.hi, self.weights, strict=True)):
            a, b = max(lo, start), min(hi, start + n)
            if a >= b:
                continue
            seg = block[a - start : b - start] if axis == 0 else block[:, a - start : b - start]
            if isinstance(w, np.ndarray):
                part = np.tensordot(w[a - lo : b - lo], seg, axes=([0], [axis]))
            else:
                part = seg.sum(axis=axis) * w
            if axis == 0:
                out[k] += part
            else:
                out[:, k] += part


@dataclass
class _Seen:
    """What the strips showed so far: every alpha opaque, every colour pixel grey."""

    opaque: bool = True
    grey: bool = True


def _strip(vals: np.ndarray, *, scale: float, clip: bool, colour: int, has_alpha: bool, channels: int,
           background: float, seen: _Seen) -> np.ndarray:
    """One strip of raw values as the model's channels in [0, 1]: scaled, alpha composited over
    ``background``, colour ↔ grey; ``seen`` records whether alpha was opaque and colour grey."""
    vals /= scale
    if clip:
        np.clip(vals, 0.0, 1.0, out=vals)
    pixels = vals[..., :colour]
    if has_alpha:
        alpha = vals[..., colour:]
        if seen.opaque and not np.all(alpha >= 1.0):
            seen.opaque = False
        pixels = alpha * pixels + (1.0 - alpha) * background
    if channels == 1 and colour == 3:
        p0, p1, p2 = pixels[..., 0], pixels[..., 1], pixels[..., 2]
        if seen.grey and not (np.allclose(p0, p1) and np.allclose(p1, p2)):
            seen.grey = False
        return (pixels @ _LUMA)[..., None]
    if channels == 3 and colour == 1:
        return np.repeat(pixels, 3, axis=-1)
    return pixels


def resample(
    raw: np.ndarray,
    *,
    scale: float,
    clip: bool,
    has_alpha: bool,
    target: tuple[int, int, int],
    background: float,
    notes: list[str],
) -> tuple[np.ndarray, list[str]]:
    """The model's (h, w, c) float64 input from the raw pixels, one strip at a time.

    Per strip: values in [0, 1], alpha composited over ``background``, colour ↔ grey; then the
    strip's share of the padded, resized image is added to the output. Padding a non-square image to
    a square and resizing it are one linear map, applied without building the square (it can be
    huge: a 1×40 000 image pads to 40 000²), with Pillow's own coefficients (box when shrinking,
    bilinear when enlarging) — the same result as padding, then ``Image.resize``, to float rounding.
    """
    c, h, w = target
    ih, iw, bands = raw.shape
    colour = bands - int(has_alpha)
    pad = h == w and ih != iw
    side_h, side_w = (max(ih, iw),) * 2 if pad else (ih, iw)
    top, left = (side_h - ih) // 2, (side_w - iw) // 2
    box = side_h >= h and side_w >= w
    rows = _Axis.build(padded=side_h, out=h, offset=top, size=ih, box=box)
    cols = _Axis.build(padded=side_w, out=w, offset=left, size=iw, box=box)

    per_value = max(1, STRIP_BYTES // 8)
    col_step = min(iw, max(1, per_value // bands))
    row_step = max(1, min(ih, per_value // (col_step * bands), per_value // (w * max(c, colour))))
    acc = np.zeros((h, w, c), dtype=np.float64)
    seen = _Seen()
    for r0 in range(0, ih, row_step):
        for c0 in range(0, iw, col_step):
            vals = raw[r0 : r0 + row_step, c0 : c0 + col_step].astype(np.float64)
            pixels = _strip(vals, scale=scale, clip=clip, colour=colour, has_alpha=has_alpha, channels=c,
                            background=background, seen=seen)
            if pad:
                pixels = pixels - background  # the map is affine: background + Σ weight·(v − background)
            part = np.zeros((pixels.shape[0], w, c), dtype=np.float64)
            cols.add_to(part, pixels, c0, axis=1)
            rows.add_to(acc, part, r0, axis=0)
    if pad:
        acc += background

    if has_alpha:
        notes.append(
            "the alpha channel is fully opaque and was dropped."
            if seen.opaque
            else f"the image has transparency: it was composited over the dataset's background "
            f"(value {background:g}), which is how the model will see it."
        )
    if c == 1 and colour == 3 and not seen.grey:
        notes.append("colour converted to grey (ITU-R BT.601 luma) for this grey-scale dataset.")
    elif c == 3 and colour == 1:
        notes.append("grey image repeated on the three colour channels.")
    if pad:
        notes.append(
            f"padded from {iw}×{ih} to a {side_w}×{side_h} square with the background (no stretching)."
        )
    if (side_h, side_w) != (h, w):
        notes.append(f"resized from {side_w}×{side_h} to {w}×{h}, the model's input size.")
    return acc, notes
