"""Decoding and checking user images before anything else sees them (privlens issue #6).

An upload is untrusted bytes. :func:`decode_image` turns it into the float tensor in [0, 1] that
the models were trained on, or raises a ``ValueError`` that says what is wrong and what is
allowed; nothing downstream (embedding, certification, release) runs on a refused upload.

Checks, in order (each before any pixel is decoded):

1. size in bytes ≤ ``max_bytes``;
2. format by magic bytes: PNG or JPEG only (GIF, WebP, TIFF, BMP, ... are named and refused);
3. header: width × height ≤ ``max_pixels``, read from the PNG IHDR / JPEG SOF bytes before
   Pillow is called, and again from Pillow's lazy ``Image.open`` (header only) before decoding
   (decompression-bomb safe; Pillow's own ``Image.MAX_IMAGE_PIXELS`` guard is a third line);
4. full decode (PNG also ``verify()``-ed: chunk CRCs) — corrupt or truncated files are refused.

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
  from 32×32 bitmaps — bilinear when enlarging.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from privcore.validation import check_in_range, check_int

__all__ = [
    "ALLOWED_FORMATS",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_PIXELS",
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

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_OTHER_FORMATS: tuple[tuple[bytes, int, str], ...] = (
    (b"GIF87a", 0, "GIF"),
    (b"GIF89a", 0, "GIF"),
    (b"WEBP", 8, "WebP"),
    (b"II*\x00", 0, "TIFF"),
    (b"MM\x00*", 0, "TIFF"),
    (b"BM", 0, "BMP"),
    (b"\x00\x00\x01\x00", 0, "ICO"),
    (b"%PDF", 0, "PDF"),
    (b"8BPS", 0, "Photoshop"),
    (b"ftypheic", 4, "HEIC"),
    (b"ftypavif", 4, "AVIF"),
    (b"PK\x03\x04", 0, "ZIP archive"),
    (b"<svg", 0, "SVG"),
    (b"<?xml", 0, "XML/SVG"),
)
_LUMA = np.array([0.299, 0.587, 0.114])


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


def _sniff(data: bytes) -> str | None:
    """Name of the format the magic bytes announce ("PNG", "JPEG", "GIF", ...), None if unknown."""
    if data.startswith(_PNG_MAGIC):
        return "PNG"
    if data.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    head = data[:64].lstrip()
    for magic, offset, name in _OTHER_FORMATS:
        if data[offset : offset + len(magic)] == magic or (offset == 0 and head.startswith(magic)):
            return name
    return None


def _png_header(data: bytes) -> tuple[int, int, int, int] | None:
    """(width, height, bit depth, colour type) from a PNG's IHDR chunk, None if malformed."""
    if len(data) < 33 or data[12:16] != b"IHDR":
        return None
    w = int.from_bytes(data[16:20], "big")
    h = int.from_bytes(data[20:24], "big")
    return w, h, data[24], data[25]


_JPEG_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from the first JPEG start-of-frame marker, None if none is found."""
    i = 2
    n = len(data)
    while i + 4 <= n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length field
            i += 2
            continue
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if marker in _JPEG_SOF:
            if i + 9 > n:
                return None
            return int.from_bytes(data[i + 7 : i + 9], "big"), int.from_bytes(data[i + 5 : i + 7], "big")
        if marker == 0xDA or length < 2:  # start of scan before any frame header: malformed
            return None
        i += 2 + length
    return None


def _fmt_bytes(n: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


def _check_target_shape(target_shape: Sequence[int]) -> tuple[int, int, int]:
    if len(target_shape) != 3:
        raise ValueError(f"target_shape must be (channels, height, width), got {tuple(target_shape)!r}")
    names = ("channels", "height", "width")
    c, h, w = (check_int(n, v, minimum=1) for n, v in zip(names, target_shape, strict=True))
    if c not in (1, 3):
        raise ValueError(f"target_shape channels must be 1 or 3, got {c}")
    return c, h, w


def _to_float_channels(im: object, bit_depth: int) -> tuple[np.ndarray, np.ndarray | None, list[str]]:
    """Pixels as float64 (H, W, C) in [0, 1] with C ∈ {1, 3}, plus alpha (H, W) or None."""
    from PIL import Image

    assert isinstance(im, Image.Image)
    notes: list[str] = []
    mode = im.mode
    if mode in ("I;16", "I;16B", "I;16L", "I;16N"):
        arr = np.asarray(im, dtype=np.float64) / 65535.0
        notes.append("16-bit grey PNG read at full precision (value / 65535).")
        return arr[..., None], None, notes
    if mode == "I":
        # Pillow opens some 16-bit grey PNGs as 32-bit "I"; the PNG header says the true depth.
        scale = 65535.0 if bit_depth == 16 else 255.0
        arr = np.asarray(im, dtype=np.float64) / scale
        if bit_depth == 16:
            notes.append("16-bit grey PNG read at full precision (value / 65535).")
        return np.clip(arr, 0.0, 1.0)[..., None], None, notes
    if mode == "F":
        return np.clip(np.asarray(im, dtype=np.float64), 0.0, 1.0)[..., None], None, notes
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
    arr = np.asarray(im, dtype=np.float64) / 255.0
    if arr.ndim == 2:
        arr = arr[..., None]
    alpha = None
    if im.mode in ("LA", "RGBA"):
        alpha = arr[..., -1]
        arr = arr[..., :-1]
    return arr, alpha, notes


def _resize_channel(plane: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Resize one float plane to (height, width): box filter shrinking, bilinear enlarging."""
    from PIL import Image

    h, w = size
    if plane.shape == (h, w):
        return plane
    shrinking = plane.shape[0] >= h and plane.shape[1] >= w
    resample = Image.Resampling.BOX if shrinking else Image.Resampling.BILINEAR
    out = Image.fromarray(plane.astype(np.float32)).resize((w, h), resample=resample)
    return np.asarray(out, dtype=np.float64)


def decode_image(
    data: bytes,
    *,
    target_shape: Sequence[int],
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    background: float = 0.0,
    invert: bool = False,
) -> DecodedImage:
    """Check and decode an uploaded PNG/JPEG into the model's input (see the module docstring).

    ``target_shape`` is (channels, height, width) of the dataset; ``background`` the dataset's
    background value in [0, 1] (0 = black for MNIST-style data), used for alpha compositing and
    padding; ``invert`` maps v ↦ 1 − v last (dark-on-light drawings for light-on-dark datasets).
    Raises ``ValueError`` naming the problem and the allowed range; never returns partial data.
    """
    from PIL import Image, ImageOps, UnidentifiedImageError

    c, h, w = _check_target_shape(target_shape)
    max_bytes = check_int("max_bytes", max_bytes, minimum=1)
    max_pixels = check_int("max_pixels", max_pixels, minimum=1)
    background = check_in_range("background", background, 0.0, 1.0, low_open=False, high_open=False)
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    data = bytes(data)

    if len(data) == 0:
        raise ValueError("the upload is empty (0 bytes); allowed: a PNG or JPEG image")
    if len(data) > max_bytes:
        raise ValueError(
            f"the file is too large: {_fmt_bytes(len(data))}; the limit is {_fmt_bytes(max_bytes)}"
        )
    kind = _sniff(data)
    if kind not in ALLOWED_FORMATS:
        what = f"a {kind} file" if kind else "not an image (unrecognised content)"
        raise ValueError(f"the upload is {what}; allowed formats: PNG, JPEG")

    bit_depth = 8
    if kind == "PNG":
        header = _png_header(data)
        if header is None:
            raise ValueError("the PNG file is corrupt: its header (IHDR) is missing or truncated")
        pw, ph, bit_depth, _ = header

    def too_large(width: int, height: int) -> ValueError:
        return ValueError(
            f"the image is too large: {width}×{height} = {width * height:,} pixels; "
            f"the limit is {max_pixels:,} pixels"
        )

    if kind == "PNG" and pw * ph > max_pixels:
        raise too_large(pw, ph)
    if kind == "JPEG":
        size = _jpeg_size(data)
        if size is None:
            raise ValueError("the JPEG file is corrupt: no frame header (SOF) before the image data")
        if size[0] * size[1] > max_pixels:
            raise too_large(*size)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            im = Image.open(io.BytesIO(data), formats=list(ALLOWED_FORMATS))  # header only
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ValueError(
            f"the image is too large to decode safely ({exc}); the limit is {max_pixels:,} pixels"
        ) from exc
    except UnidentifiedImageError as exc:
        raise ValueError(f"the {kind} file is corrupt: its header cannot be read; nothing was read") from exc
    except (OSError, SyntaxError, EOFError, ValueError) as exc:
        raise ValueError(f"the {kind} file is corrupt or truncated ({exc}); nothing was read") from exc
    width, height = im.size
    if width * height > max_pixels:
        raise too_large(width, height)
    if width < 1 or height < 1:
        raise ValueError(f"the image has no pixels ({width}×{height}); allowed: at least 1×1")
    source_mode = im.mode
    fmt = im.format or kind
    n_frames = int(getattr(im, "n_frames", 1) or 1)
    try:
        if fmt == "PNG":
            im.verify()  # chunk structure and CRCs; the object is unusable afterwards
            im = Image.open(io.BytesIO(data), formats=["PNG"])
        im.load()
        if fmt == "JPEG":
            im = ImageOps.exif_transpose(im)
    except (OSError, SyntaxError, EOFError, ValueError, MemoryError, Image.DecompressionBombError) as exc:
        raise ValueError(f"the {kind} file is corrupt or truncated ({exc}); nothing was read") from exc

    notes: list[str] = []
    if n_frames > 1:
        notes.append(f"animated {fmt} with {n_frames} frames: only the first frame is used.")
    pixels, alpha, conv_notes = _to_float_channels(im, bit_depth)
    notes.extend(conv_notes)

    if alpha is not None:
        if np.all(alpha >= 1.0):
            notes.append("the alpha channel is fully opaque and was dropped.")
        else:
            pixels = alpha[..., None] * pixels + (1.0 - alpha[..., None]) * background
            notes.append(
                f"the image has transparency: it was composited over the dataset's background "
                f"(value {background:g}), which is how the model will see it."
            )

    if c == 1 and pixels.shape[-1] == 3:
        if not (np.allclose(pixels[..., 0], pixels[..., 1]) and np.allclose(pixels[..., 1], pixels[..., 2])):
            notes.append("colour converted to grey (ITU-R BT.601 luma) for this grey-scale dataset.")
        pixels = (pixels @ _LUMA)[..., None]
    elif c == 3 and pixels.shape[-1] == 1:
        pixels = np.repeat(pixels, 3, axis=-1)
        notes.append("grey image repeated on the three colour channels.")

    ih, iw = pixels.shape[:2]
    if ih != iw and (h == w):
        side = max(ih, iw)
        padded = np.full((side, side, pixels.shape[-1]), background, dtype=np.float64)
        top, left = (side - ih) // 2, (side - iw) // 2
        padded[top : top + ih, left : left + iw] = pixels
        pixels = padded
        notes.append(f"padded from {iw}×{ih} to a {side}×{side} square with the background (no stretching).")
    if pixels.shape[:2] != (h, w):
        notes.append(f"resized from {pixels.shape[1]}×{pixels.shape[0]} to {w}×{h}, the model's input size.")
        pixels = np.stack([_resize_channel(pixels[..., k], (h, w)) for k in range(pixels.shape[-1])], axis=-1)

    pixels = np.clip(pixels, 0.0, 1.0)
    if invert:
        pixels = 1.0 - pixels
        notes.append("inverted (v ↦ 1 − v).")
    else:
        edges = (pixels[0], pixels[-1], pixels[:, 0], pixels[:, -1])
        border = np.concatenate([e.ravel() for e in edges])
        if abs(float(np.median(border)) - background) > 0.5:
            notes.append(
                f"the image's border ({float(np.median(border)):.2f}) is far from the dataset's background "
                f"({background:g}): if it is dark-on-light, invert it."
            )

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
    background: float = 0.0,
    invert: bool = False,
) -> torch.Tensor:
    """The model-ready tensor of :func:`decode_image` (float32, ``target_shape``, values in [0, 1])."""
    return decode_image(
        data,
        target_shape=target_shape,
        max_bytes=max_bytes,
        max_pixels=max_pixels,
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
    arr = image.detach().cpu().numpy() if isinstance(image, torch.Tensor) else np.asarray(image)
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
