"""What an upload's first bytes say, read before Pillow sees them: the format by its magic bytes,
and the pixel size from a PNG's IHDR or a JPEG's start-of-frame marker (decompression-bomb checks
in :func:`privcore.inputs.images.decode_image` run on these numbers)."""

from __future__ import annotations

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


def sniff(data: bytes) -> str | None:
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


def png_header(data: bytes) -> tuple[int, int, int, int] | None:
    """(width, height, bit depth, colour type) from a PNG's IHDR chunk, None if malformed."""
    if len(data) < 33 or data[12:16] != b"IHDR":
        return None
    w = int.from_bytes(data[16:20], "big")
    h = int.from_bytes(data[20:24], "big")
    return w, h, data[24], data[25]


_JPEG_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})


def jpeg_size(data: bytes) -> tuple[int, int] | None:
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
