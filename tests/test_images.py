"""privcore.inputs.images: every upload is either the exact model input or a clear refusal.

Exact checks use hand-built PNGs (a 20-line encoder below) so that the expected pixel values are
known without going through the code under test.
"""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
import torch
from PIL import Image, ImageFile

from privcore.inputs.images import decode_image, encode_png, load_image


def _chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def make_png(
    arr: np.ndarray, *, bit_depth: int = 8, width: int | None = None, height: int | None = None
) -> bytes:
    """A PNG (filter 0, no interlace) of a (H, W) or (H, W, C) integer array; C = 1, 2, 3, 4."""
    arr = np.asarray(arr)
    if arr.ndim == 2:
        arr = arr[..., None]
    h, w, c = arr.shape
    colour_type = {1: 0, 2: 4, 3: 2, 4: 6}[c]
    dtype = ">u2" if bit_depth == 16 else "u1"
    raw = b"".join(b"\x00" + arr[r].astype(dtype).tobytes() for r in range(h))
    ihdr = struct.pack(">IIBBBBB", width or w, height or h, bit_depth, colour_type, 0, 0, 0)
    body = _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(raw)) + _chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


def pil_bytes(arr: np.ndarray, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format=fmt, **kw)
    return buf.getvalue()


GREY8 = (1, 8, 8)


def test_8bit_grey_png_is_read_exactly() -> None:
    rng = np.random.default_rng(0)
    arr = rng.integers(0, 256, size=(8, 8), dtype=np.uint8)
    out = decode_image(make_png(arr), target_shape=GREY8)
    assert out.tensor.dtype == torch.float32 and tuple(out.tensor.shape) == GREY8
    np.testing.assert_allclose(out.tensor[0].numpy(), arr / 255.0, rtol=0, atol=1e-7)
    assert out.source_format == "PNG" and out.source_size == (8, 8) and out.bit_depth == 8


def test_16bit_grey_png_full_precision_not_clipped() -> None:
    # Pillow's convert("L") would clip every value > 255 to 1.0; these must come out as v / 65535.
    vals = np.array([[0, 1000, 65535, 300], [40000, 257, 12345, 65534]] * 2, dtype=np.uint16)
    out = decode_image(make_png(vals, bit_depth=16), target_shape=(1, 4, 4))
    np.testing.assert_allclose(out.tensor[0].numpy(), vals / 65535.0, rtol=0, atol=1e-7)
    assert out.bit_depth == 16 and any("16-bit" in n for n in out.notes)


def test_16bit_colour_png_within_one_8bit_level() -> None:
    rng = np.random.default_rng(1)
    rgb = rng.integers(0, 65536, size=(4, 4, 3), dtype=np.uint16)
    out = decode_image(make_png(rgb, bit_depth=16), target_shape=(3, 4, 4))
    exact = rgb.transpose(2, 0, 1) / 65535.0
    assert np.max(np.abs(out.tensor.numpy() - exact)) <= 1 / 255
    assert any("16-bit colour" in n for n in out.notes)


def test_colour_to_grey_uses_bt601_luma() -> None:
    rgb = np.zeros((2, 2, 3), dtype=np.uint8)
    rgb[0, 0] = (255, 0, 0)
    rgb[0, 1] = (0, 255, 0)
    rgb[1, 0] = (0, 0, 255)
    rgb[1, 1] = (10, 200, 90)
    out = decode_image(make_png(rgb), target_shape=(1, 2, 2))
    expected = (rgb / 255.0) @ np.array([0.299, 0.587, 0.114])
    np.testing.assert_allclose(out.tensor[0].numpy(), expected, atol=1e-7)
    assert any("grey" in n for n in out.notes)


def test_grey_to_three_channels() -> None:
    arr = np.arange(16, dtype=np.uint8).reshape(4, 4) * 16
    t = load_image(make_png(arr), target_shape=(3, 4, 4))
    for k in range(3):
        np.testing.assert_allclose(t[k].numpy(), arr / 255.0, atol=1e-7)


@pytest.mark.parametrize("background", [0.0, 1.0, 0.25])
def test_alpha_composited_on_background(background: float) -> None:
    rgba = np.zeros((2, 2, 4), dtype=np.uint8)
    rgba[..., :3] = 200
    rgba[..., 3] = [[0, 255], [51, 204]]
    out = decode_image(make_png(rgba), target_shape=(1, 2, 2), background=background)
    a = rgba[..., 3] / 255.0
    expected = a * (200 / 255.0) + (1 - a) * background
    np.testing.assert_allclose(out.tensor[0].numpy(), expected, atol=1e-6)
    assert any("transparency" in n for n in out.notes)


def test_grey_alpha_and_palette_transparency() -> None:
    la = np.stack([np.full((2, 2), 255, np.uint8), np.array([[0, 255], [255, 0]], np.uint8)], -1)
    out = decode_image(make_png(la), target_shape=(1, 2, 2), background=0.0)
    np.testing.assert_allclose(out.tensor[0].numpy(), [[0, 1], [1, 0]], atol=1e-7)
    pal = Image.fromarray(np.array([[0, 1], [1, 0]], np.uint8), mode="P")
    pal.putpalette([255, 255, 255, 0, 0, 0] + [0] * 762)
    pal.info["transparency"] = 0
    buf = io.BytesIO()
    pal.save(buf, format="PNG", transparency=0)
    out = decode_image(buf.getvalue(), target_shape=(1, 2, 2), background=0.5)
    np.testing.assert_allclose(out.tensor[0].numpy(), [[0.5, 0], [0, 0.5]], atol=1e-7)


def test_box_downscale_is_block_mean_and_padding_keeps_aspect() -> None:
    rng = np.random.default_rng(2)
    arr = rng.integers(0, 256, size=(16, 16), dtype=np.uint8)
    out = decode_image(make_png(arr), target_shape=GREY8)
    blocks = (arr / 255.0).reshape(8, 2, 8, 2).mean(axis=(1, 3))
    np.testing.assert_allclose(out.tensor[0].numpy(), blocks, atol=1e-6)
    wide = np.full((4, 8), 255, np.uint8)  # 8 wide, 4 high: padded to 8×8 with background 0
    t = load_image(make_png(wide), target_shape=GREY8)[0].numpy()
    np.testing.assert_allclose(t[2:6], 1.0, atol=1e-7)
    np.testing.assert_allclose(t[:2], 0.0, atol=1e-7)
    np.testing.assert_allclose(t[6:], 0.0, atol=1e-7)


def test_invert_and_dark_on_light_hint() -> None:
    arr = np.full((8, 8), 255, np.uint8)
    arr[3:5, 3:5] = 0
    plain = decode_image(make_png(arr), target_shape=GREY8, background=0.0)
    assert any("invert" in n for n in plain.notes)
    inv = decode_image(make_png(arr), target_shape=GREY8, background=0.0, invert=True)
    np.testing.assert_allclose(inv.tensor.numpy(), 1.0 - plain.tensor.numpy(), atol=1e-7)


def test_jpeg_exif_orientation_applied() -> None:
    arr = np.zeros((32, 32, 3), np.uint8)
    arr[:, :16] = 255  # left half white
    img = Image.fromarray(arr)
    exif = img.getexif()
    exif[0x0112] = 6  # rotate 90° clockwise for display
    data = pil_bytes(arr, "JPEG", exif=exif.tobytes(), quality=95)
    t = load_image(data, target_shape=(1, 32, 32))[0].numpy()
    assert t[:8].mean() > 0.9 and t[-8:].mean() < 0.1  # the white half is now on top


# ------------------------------------------------------------------------------------ refusals


def test_empty_and_not_an_image() -> None:
    with pytest.raises(ValueError, match="empty"):
        decode_image(b"", target_shape=GREY8)
    with pytest.raises(ValueError, match=r"not an image.*PNG, JPEG"):
        decode_image(b"hello, this is a text file\n" * 10, target_shape=GREY8)


@pytest.mark.parametrize("fmt,name", [("GIF", "GIF"), ("BMP", "BMP"), ("TIFF", "TIFF"), ("WEBP", "WebP")])
def test_other_formats_named_and_refused(fmt: str, name: str) -> None:
    data = pil_bytes(np.zeros((8, 8), np.uint8) if fmt != "WEBP" else np.zeros((8, 8, 3), np.uint8), fmt)
    with pytest.raises(ValueError, match=rf"a {name} file; allowed formats: PNG, JPEG"):
        decode_image(data, target_shape=GREY8)


def test_over_byte_limit_names_size_and_limit() -> None:
    data = make_png(np.zeros((8, 8), np.uint8))
    with pytest.raises(ValueError, match=rf"too large: {len(data)} bytes; the limit is 10 bytes"):
        decode_image(data, target_shape=GREY8, max_bytes=10)


def test_huge_png_header_refused_before_any_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    # A 4-pixel IDAT behind a header that claims 100000 × 100000: a decompression bomb.
    data = make_png(np.zeros((2, 2), np.uint8), width=100_000, height=100_000)

    def no_decode(*a, **k):  # any pixel decoding would be a failure of the check order
        raise AssertionError("decoded pixels before checking the header")

    monkeypatch.setattr(ImageFile.ImageFile, "load", no_decode)
    monkeypatch.setattr(Image, "open", no_decode)
    with pytest.raises(ValueError, match=r"100000×100000 = 10,000,000,000 pixels; the limit is 16,777,216"):
        decode_image(data, target_shape=GREY8)


def test_huge_jpeg_header_refused_before_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    data = bytearray(pil_bytes(np.zeros((16, 16), np.uint8), "JPEG"))
    sof = data.find(b"\xff\xc0")
    assert sof > 0
    data[sof + 5 : sof + 9] = struct.pack(">HH", 60000, 60000)  # height, width
    monkeypatch.setattr(ImageFile.ImageFile, "load", lambda *a, **k: pytest.fail("decoded a bomb"))
    with pytest.raises(ValueError, match=r"60000×60000 = 3,600,000,000 pixels"):
        decode_image(bytes(data), target_shape=GREY8)
    small = pil_bytes(np.zeros((64, 64), np.uint8), "PNG")
    with pytest.raises(ValueError, match=r"64×64 = 4,096 pixels; the limit is 1,000 pixels"):
        decode_image(small, target_shape=GREY8, max_pixels=1000)


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_truncated_files_refused(fmt: str) -> None:
    rng = np.random.default_rng(3)
    data = pil_bytes(rng.integers(0, 256, (64, 64), dtype=np.uint8), fmt)
    for cut in (len(data) // 2, len(data) - 20):
        with pytest.raises(ValueError, match="corrupt"):
            decode_image(data[:cut], target_shape=GREY8)


def test_png_bad_crc_refused() -> None:
    data = bytearray(make_png(np.arange(64, dtype=np.uint8).reshape(8, 8)))
    idat = data.find(b"IDAT")
    data[idat + 6] ^= 0xFF  # flip a byte of the compressed data: the chunk CRC no longer matches
    with pytest.raises(ValueError, match="corrupt"):
        decode_image(bytes(data), target_shape=GREY8)


def test_bad_parameters() -> None:
    png = make_png(np.zeros((8, 8), np.uint8))
    with pytest.raises(ValueError, match="channels must be 1 or 3"):
        decode_image(png, target_shape=(2, 8, 8))
    with pytest.raises(ValueError, match=r"background must be in \[0, 1\]"):
        decode_image(png, target_shape=GREY8, background=2.0)
    with pytest.raises(TypeError, match="data must be bytes"):
        decode_image("not bytes", target_shape=GREY8)  # type: ignore[arg-type]


def test_encode_png_round_trip_and_scale() -> None:
    rng = np.random.default_rng(4)
    x = torch.from_numpy(rng.random((1, 8, 8))).float()
    back = load_image(encode_png(x), target_shape=GREY8)
    np.testing.assert_allclose(back.numpy(), np.rint(x.numpy() * 255) / 255, atol=1e-7)
    big = Image.open(io.BytesIO(encode_png(x, scale=4)))
    assert big.size == (32, 32)
    rgb = torch.from_numpy(rng.random((3, 5, 5))).float()
    assert Image.open(io.BytesIO(encode_png(rgb))).mode == "RGB"
    with pytest.raises(ValueError, match="finite"):
        encode_png(torch.full((1, 2, 2), float("nan")))


# ------------------------------------------------------------------------- image bombs, memory


def _pil_png(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG", optimize=True)
    return buf.getvalue()


@pytest.mark.parametrize("height", [16_000, 40_000])
def test_long_thin_png_is_padded_and_resized_without_building_the_square(height: int) -> None:
    # A 1×height white line: padding it to a height² float64 square first asked for 2 GB (16 000) or
    # 12.8 GB (40 000). The pad-and-resize map is applied to the image alone: the column holding the line
    # averages it over its box of height/8 padded columns.
    import tracemalloc

    data = _pil_png(np.full((height, 1), 255, np.uint8))
    assert len(data) < 200  # a few hundred bytes
    tracemalloc.start()
    try:
        out = decode_image(data, target_shape=GREY8)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, peak  # numpy's arrays (Pillow's own are not traced): < 64 MiB, not gigabytes
    expected = np.zeros((8, 8))
    expected[:, ((height - 1) // 2) // (height // 8)] = 1.0 / (height // 8)
    np.testing.assert_allclose(out.tensor[0].numpy(), expected, rtol=1e-6, atol=1e-9)
    assert any(f"padded from 1×{height} to a {height}×{height} square" in n for n in out.notes)


def test_pad_and_resize_match_pillow_on_the_padded_square() -> None:
    # The reference builds the padded square and resizes it with Pillow (box shrinking, bilinear
    # enlarging), as decode_image did before it stopped building the square.
    rng = np.random.default_rng(5)
    for trial in range(60):
        ih, iw = (int(v) for v in rng.integers(1, 40, size=2))
        if trial % 4 == 0:
            ih, iw = int(rng.integers(1, 4)), int(rng.integers(40, 200))
        h = int(rng.integers(1, 30))
        w = h if trial % 3 else int(rng.integers(1, 30))
        bg = float(rng.choice([0.0, 1.0, 0.3]))
        arr = rng.integers(0, 256, size=(ih, iw), dtype=np.uint8)
        px = arr / 255.0
        if ih != iw and h == w:
            side = max(ih, iw)
            sq = np.full((side, side), bg)
            sq[(side - ih) // 2 : (side - ih) // 2 + ih, (side - iw) // 2 : (side - iw) // 2 + iw] = px
            px = sq
        if px.shape != (h, w):
            shrink = px.shape[0] >= h and px.shape[1] >= w
            filt = Image.Resampling.BOX if shrink else Image.Resampling.BILINEAR
            px = np.asarray(Image.fromarray(px.astype(np.float32)).resize((w, h), resample=filt))
        got = decode_image(make_png(arr), target_shape=(1, h, w), background=bg).tensor[0].numpy()
        np.testing.assert_allclose(got, np.clip(px, 0, 1), rtol=0, atol=1e-6, err_msg=str((ih, iw, h, w, bg)))


def test_memory_budget_refuses_before_any_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    from privcore.inputs.images import MEMORY_BUDGET_BYTES

    assert MEMORY_BUDGET_BYTES == 384 * 2**20
    data = make_png(np.zeros((2000, 2000), np.uint8))  # 4 MB of pixels behind a 4 KiB file
    monkeypatch.setattr(ImageFile.ImageFile, "load", lambda *a, **k: pytest.fail("decoded past the budget"))
    with pytest.raises(ValueError, match=r"2000×2000 pixels into 1×8×8 needs 101 MiB .* the limit is 64 MiB"):
        decode_image(data, target_shape=GREY8, max_memory=64 * 2**20)
    monkeypatch.undo()
    assert decode_image(data, target_shape=GREY8).source_size == (2000, 2000)  # within the default budget


def test_memory_error_is_a_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    import privcore.inputs.images as images

    def out_of_memory(*a, **k):
        raise MemoryError("Unable to allocate 11.9 GiB for an array")

    monkeypatch.setattr(images, "resample", out_of_memory)
    with pytest.raises(ValueError, match=r"8×8 pixels\) could not be decoded: the server ran out of memory"):
        decode_image(make_png(np.zeros((8, 8), np.uint8)), target_shape=GREY8)


def test_huge_target_shape_is_a_value_error_naming_it() -> None:
    png = make_png(np.zeros((8, 8), np.uint8))
    with pytest.raises(ValueError, match=r"target_shape \(3, 100000, 100000\) is too large.*384 MiB"):
        decode_image(png, target_shape=(3, 100_000, 100_000))
    with pytest.raises(TypeError, match="target_shape must be a sequence"):
        decode_image(png, target_shape=8)  # type: ignore[arg-type]


@pytest.mark.parametrize("invert", ["no", 1, None, 0.0])
def test_invert_must_be_a_bool(invert: object) -> None:
    with pytest.raises(TypeError, match=r"invert must be True or False, got"):
        decode_image(make_png(np.zeros((8, 8), np.uint8)), target_shape=GREY8, invert=invert)  # type: ignore[arg-type]
