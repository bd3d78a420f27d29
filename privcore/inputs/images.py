"""Decoding and checking user images before anything else sees them.

An upload is untrusted bytes. :func:`decode_image` turns it into the float tensor in [0, 1] that
the models were trained on, or raises a ``ValueError`` that says what is wrong and what is
allowed; nothing downstream (embedding, certification, release) runs on a refused upload.

Checks, in order (each before any pixel is decoded):

1. size in bytes ≤ ``max_bytes``;
2. format by magic bytes: PNG or JPEG only (GIF, WebP, TIFF, BMP, ... are named and refused);
3. header: width × height ≤ ``max_pixels``, read from the PNG IHDR / JPEG SOF bytes before
   Pillow is called, and again from Pillow's lazy ``Image.open`` (header only) before decoding
   (decompression-bomb safe; Pillow's own ``Image.MAX_IMAGE_PIXELS`` guard is a third line);
4. memory: the working memory of the whole decode, estimated from the header and the target
   shape, ≤ ``max_memory`` (:data:`MEMORY_BUDGET_BYTES`). Every array is bounded by the source
   pixels, one strip of rows or the output — none by the padded square (a 94-byte 1×40 000 PNG
   once asked for a 40 000² float64 square, 11.9 GiB); a ``MemoryError`` is a refusal too;
5. full decode (PNG also ``verify()``-ed: chunk CRCs) — corrupt or truncated files are refused.

Conversions (each reported in :attr:`DecodedImage.notes`, so the page can say so):

* JPEG EXIF orientation is applied (what the user's viewer shows is what the model sees);
* 16-bit grey PNG is read at full precision as v / 65535 (Pillow's ``convert("L")`` would clip
  every value above 255 to white); 16-bit colour PNG is reduced by Pillow to its high byte, an
  error below 1/255, the resolution of the 8-bit datasets;
* an alpha channel is composited over the dataset's background value (``background``);
* colour is turned into grey for one-channel datasets with the ITU-R BT.601 luma weights
  (0.299, 0.587, 0.114), and grey is repeated for three-channel ones;
* a non-square image is padded with the background to a square (no distortion), then resized
  to the model's size: box (area) filter when shrinking — how scikit-learn's 8×8 digits were made
  from 32×32 bitmaps — bilinear when enlarging. Padding and resizing are one linear map, applied
  strip by strip with Pillow's resampling coefficients without building the square.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from privcore.inputs.formats import jpeg_size, png_header, sniff
from privcore.inputs.resample import STRIP_BYTES, raw_pixels, resample
from privcore.validation import check_bool, check_in_range, check_int

if TYPE_CHECKING:  # torch is imported where a tensor is made: a page that decodes nothing never loads it
    import torch

__all__ = [
    "ALLOWED_FORMATS",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_PIXELS",
    "MEMORY_BUDGET_BYTES",
    "DecodedImage",
    "decode_image",
    "encode_png",
    "load_image",
]

#: Formats accepted for upload (Pillow format names).
ALLOWED_FORMATS: tuple[str, ...] = ("PNG", "JPEG")
#: Default upload limit: 10 MiB.
DEFAULT_MAX_BYTES = 10 * 1024 * 1024
#: Default pixel limit (width × height, from the header): 4096 × 4096.
DEFAULT_MAX_PIXELS = 4096 * 4096
#: Memory budget of one decode: the working memory it needs (Pillow's image, the raw pixel array, one strip
#: of float rows, the resampling weights and the output, estimated from the header before any pixel is
#: decoded) must fit, or the upload is refused. 384 MiB admits the default 4096 × 4096 limit in colour.
MEMORY_BUDGET_BYTES = 384 * 1024 * 1024
#: Bytes a source pixel can hold at once: Pillow's image (≤ 4, RGBA or 32-bit grey), a converted copy
#: (palette, CMYK, EXIF rotation: ≤ 4), and its ``tobytes`` chunks and joined buffer behind the numpy view
#: (≤ 4 + 4); and a source row: the line pointers of both Pillow images (8 + 8). Measured peaks (RSS):
#: 20 bytes a pixel for a 1 × 16 777 216 RGBA PNG, 27 for the same as a palette PNG; 11.4 for 4096² RGBA.
_SOURCE_BYTES_PER_PIXEL = 16
_SOURCE_BYTES_PER_ROW = 16


@dataclass(frozen=True, kw_only=True)
class DecodedImage:
    """An accepted upload: the model-ready ``tensor`` (float32, shape ``target_shape``, values in
    [0, 1]) and what was done to get it (``notes``, plain sentences for the user)."""

    tensor: torch.Tensor
    source_format: str
    source_size: tuple[int, int]
    source_mode: str
    bit_depth: int
    notes: tuple[str, ...]


def _fmt_bytes(n: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


def _check_target_shape(target_shape: Sequence[int], max_memory: int) -> tuple[int, int, int]:
    if isinstance(target_shape, str | bytes) or not isinstance(target_shape, Sequence):
        raise TypeError(
            f"target_shape must be a sequence (channels, height, width), got {type(target_shape).__name__} "
            f"{target_shape!r}"
        )
    if len(target_shape) != 3:
        raise ValueError(f"target_shape must be (channels, height, width), got {tuple(target_shape)!r}")
    names = ("target_shape channels", "target_shape height", "target_shape width")
    c, h, w = (check_int(n, v, minimum=1) for n, v in zip(names, target_shape, strict=True))
    if c not in (1, 3):
        raise ValueError(f"target_shape channels must be 1 or 3, got {c}")
    need = _plan_bytes(1, 1, (c, h, w), square=h == w)[0]
    if need > max_memory:
        raise ValueError(
            f"target_shape {(c, h, w)!r} is too large: decoding into it needs {_fmt_bytes(need)}; the memory "
            f"budget is {_fmt_bytes(max_memory)} (allowed: channels × height × width up to about "
            f"{max(0, max_memory - _plan_bytes(1, 1, (1, 1, 1), square=True)[0]) // 40:,} values)"
        )
    return c, h, w


def _plan_bytes(
    width: int, height: int, target: tuple[int, int, int], *, square: bool
) -> tuple[int, dict[str, int]]:
    """Working memory decoding a ``width``×``height`` image into ``target`` holds at once (an upper bound),
    and its parts: Pillow's image and the raw pixel array (≤ 16 bytes a pixel with the transient copies),
    one strip of float rows with its temporaries, the resampling weights and the output arrays."""
    c, h, w = target
    side_h, side_w = (max(width, height),) * 2 if square and width != height else (height, width)
    bilinear = side_h < h or side_w < w
    weights = 16 * (h + w) + (16 * (side_h + side_w + 2 * (h + w)) if bilinear else 0)
    parts = {
        "decoded pixels": _SOURCE_BYTES_PER_PIXEL * width * height + _SOURCE_BYTES_PER_ROW * height,
        "float strips": 5 * STRIP_BYTES,
        "resampling weights": weights,
        "output": 5 * 8 * c * h * w,
    }
    return sum(parts.values()), parts


@dataclass(frozen=True)
class _Limits:
    """The size limits of one decode: pixels, and the working memory for a target (c, h, w)."""

    max_pixels: int
    max_memory: int
    target: tuple[int, int, int]

    def check(self, width: int, height: int) -> None:
        """ValueError when a ``width``×``height`` image exceeds the pixel limit or the memory budget."""
        if width * height > self.max_pixels:
            raise ValueError(
                f"the image is too large: {width}×{height} = {width * height:,} pixels; "
                f"the limit is {self.max_pixels:,} pixels"
            )
        c, h, w = self.target
        need, parts = _plan_bytes(width, height, self.target, square=h == w)
        if need > self.max_memory:
            detail = ", ".join(f"{k} {_fmt_bytes(v)}" for k, v in parts.items())
            raise ValueError(
                f"the image is too large to decode within the memory budget: {width}×{height} pixels into "
                f"{c}×{h}×{w} needs {_fmt_bytes(need)} ({detail}); the limit is {_fmt_bytes(self.max_memory)}"
            )


def _checked_bytes(data: Any, max_bytes: int, name: str) -> tuple[bytes, str]:
    """``data`` as bytes and its sniffed format (PNG or JPEG), or the error naming what is wrong."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) == 0:
        raise ValueError(f"{name} is empty (0 bytes); allowed: a PNG or JPEG image")
    if len(data) > max_bytes:
        raise ValueError(
            f"the file is too large: {_fmt_bytes(len(data))}; the limit is {_fmt_bytes(max_bytes)}"
        )
    kind = sniff(data)
    if kind not in ALLOWED_FORMATS:
        what = f"a {kind} file" if kind else "not an image (unrecognised content)"
        raise ValueError(f"{name} is {what}; allowed formats: PNG, JPEG")
    return data, kind


def _check_header(data: bytes, kind: str, limits: _Limits) -> int:
    """Check the size the file's own header states, before PIL reads anything; its PNG bit depth (8
    for JPEG)."""
    if kind == "PNG":
        header = png_header(data)
        if header is None:
            raise ValueError("the PNG file is corrupt: its header (IHDR) is missing or truncated")
        pw, ph, bit_depth, _ = header
        limits.check(pw, ph)
        return int(bit_depth)
    size = jpeg_size(data)
    if size is None:
        raise ValueError("the JPEG file is corrupt: no frame header (SOF) before the image data")
    limits.check(*size)
    return 8


def _open(data: bytes, kind: str, max_pixels: int) -> Any:
    """PIL's image object for ``data`` (header only), every failure a ValueError naming it."""
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            return Image.open(io.BytesIO(data), formats=list(ALLOWED_FORMATS))  # header only
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ValueError(
            f"the image is too large to decode safely ({exc}); the limit is {max_pixels:,} pixels"
        ) from exc
    except UnidentifiedImageError as exc:
        raise ValueError(f"the {kind} file is corrupt: its header cannot be read; nothing was read") from exc
    except (OSError, SyntaxError, EOFError, ValueError) as exc:
        raise ValueError(f"the {kind} file is corrupt or truncated ({exc}); nothing was read") from exc


def _decoded_pixels(im: Any, data: bytes, kind: str, bit_depth: int, *, target: tuple[int, int, int],
                    background: float) -> tuple[np.ndarray, list[str]]:
    """Verify and load ``im`` (PNG CRCs; JPEG EXIF orientation), then resample it to ``target``."""
    from PIL import Image, ImageOps

    fmt = im.format or kind
    n_frames = int(getattr(im, "n_frames", 1) or 1)
    try:
        if fmt == "PNG":
            im.verify()  # chunk structure and CRCs; the object is unusable afterwards
            im = Image.open(io.BytesIO(data), formats=["PNG"])
        im.load()
        if fmt == "JPEG":
            im = ImageOps.exif_transpose(im)
    except (OSError, SyntaxError, EOFError, ValueError, Image.DecompressionBombError) as exc:
        raise ValueError(f"the {kind} file is corrupt or truncated ({exc}); nothing was read") from exc
    raw, scale, clip, has_alpha, notes = raw_pixels(im, bit_depth)
    del im
    if n_frames > 1:
        notes.insert(0, f"animated {fmt} with {n_frames} frames: only the first frame is used.")
    return resample(raw, scale=scale, clip=clip, has_alpha=has_alpha, target=target, background=background,
                    notes=notes)


def _finish(pixels: np.ndarray, notes: list[str], *, invert: bool, background: float) -> np.ndarray:
    """Clip to [0, 1]; invert when asked, else note a border far from the dataset's background."""
    pixels = np.clip(pixels, 0.0, 1.0)
    if invert:
        notes.append("inverted (v ↦ 1 − v).")
        return 1.0 - pixels
    edges = (pixels[0], pixels[-1], pixels[:, 0], pixels[:, -1])
    border = float(np.median(np.concatenate([e.ravel() for e in edges])))
    if abs(border - background) > 0.5:
        notes.append(
            f"the image's border ({border:.2f}) is far from the dataset's background "
            f"({background:g}): if it is dark-on-light, invert it."
        )
    return pixels


def decode_image(
    data: bytes,
    *,
    target_shape: Sequence[int],
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    max_memory: int = MEMORY_BUDGET_BYTES,
    background: float = 0.0,
    invert: bool = False,
    name: str = "the upload",
) -> DecodedImage:
    """Check and decode an uploaded PNG/JPEG into the model's input (see the module docstring).

    ``target_shape`` is (channels, height, width) of the dataset; ``background`` the dataset's
    background value in [0, 1] (0 = black for MNIST-style data), used for alpha compositing and
    padding; ``invert`` (a bool) maps v ↦ 1 − v last (dark-on-light drawings for light-on-dark
    datasets). ``max_memory`` bounds the working memory (bytes) of the whole decode, checked from
    the header before any pixel is decoded. Raises ``ValueError`` naming the problem and the allowed
    range (``TypeError`` for a wrong type); never returns partial data. ``name`` is what the messages
    call the file (the CLI: "the IMAGE argument").
    """
    import torch

    max_memory = check_int("max_memory", max_memory, minimum=1)
    target = _check_target_shape(target_shape, max_memory)
    limits = _Limits(max_pixels=check_int("max_pixels", max_pixels, minimum=1), max_memory=max_memory,
                     target=target)
    max_bytes = check_int("max_bytes", max_bytes, minimum=1)
    background = check_in_range("background", background, 0.0, 1.0, low_open=False, high_open=False)
    invert = check_bool("invert", invert)
    data, kind = _checked_bytes(data, max_bytes, name)
    bit_depth = _check_header(data, kind, limits)
    im = _open(data, kind, limits.max_pixels)
    width, height = im.size
    if width < 1 or height < 1:
        raise ValueError(f"the image has no pixels ({width}×{height}); allowed: at least 1×1")
    limits.check(width, height)
    source_mode, fmt = im.mode, im.format or kind
    try:
        pixels, notes = _decoded_pixels(im, data, kind, bit_depth, target=target, background=background)
    except MemoryError as exc:
        raise ValueError(
            f"the image ({width}×{height} pixels) could not be decoded: the server ran out of memory; "
            f"nothing was read (budget {_fmt_bytes(max_memory)} per decode)"
        ) from exc
    pixels = _finish(pixels, notes, invert=invert, background=background)
    tensor = torch.from_numpy(np.ascontiguousarray(pixels.transpose(2, 0, 1))).to(torch.float32).contiguous()
    if not torch.isfinite(tensor).all():  # pragma: no cover - defensive: every step above is finite
        raise ValueError("the decoded image contains non-finite values")
    return DecodedImage(
        tensor=tensor,
        source_format=fmt,
        source_size=(int(width), int(height)),
        source_mode=source_mode,
        bit_depth=int(bit_depth),
        notes=tuple(notes),
    )


def load_image(
    data: bytes,
    *,
    target_shape: Sequence[int],
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    max_memory: int = MEMORY_BUDGET_BYTES,
    background: float = 0.0,
    invert: bool = False,
) -> torch.Tensor:
    """The model-ready tensor of :func:`decode_image` (float32, ``target_shape``, values in [0, 1])."""
    return decode_image(
        data,
        target_shape=target_shape,
        max_bytes=max_bytes,
        max_pixels=max_pixels,
        max_memory=max_memory,
        background=background,
        invert=invert,
    ).tensor


def encode_png(image: torch.Tensor | np.ndarray, *, scale: int = 1) -> bytes:
    """An image in [0, 1] of shape (C, H, W), (H, W) or (1, C, H, W) as 8-bit PNG bytes.

    ``scale`` enlarges by pixel repetition (nearest neighbour) so tiny images stay crisp in a
    download; values are clipped to [0, 1] and rounded to the nearest 8-bit level.
    """
    from PIL import Image

    scale = check_int("scale", scale, minimum=1)
    arr = image.detach().cpu().numpy() if hasattr(image, "detach") else np.asarray(image)
    arr = np.asarray(arr, dtype=np.float64)
    while arr.ndim > 3 and arr.shape[0] == 1:
        arr = arr[0]
    if arr.ndim == 3:
        if arr.shape[0] not in (1, 3):
            raise ValueError(f"image must have 1 or 3 channels first, got shape {arr.shape}")
        arr = arr[0] if arr.shape[0] == 1 else arr.transpose(1, 2, 0)
    if arr.ndim not in (2, 3):
        raise ValueError(f"image must be (C, H, W) or (H, W), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("image must contain only finite values")
    u8 = np.rint(np.clip(arr, 0.0, 1.0) * 255.0).astype(np.uint8)
    if scale > 1:
        u8 = np.repeat(np.repeat(u8, scale, axis=0), scale, axis=1)
    buf = io.BytesIO()
    Image.fromarray(u8).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()
