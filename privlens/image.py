"""The image the pages work on: the session's current image of each dataset (a shipped sample or an
upload), identified by the SHA-256 of its bytes (the decoded tensor by :func:`image_digest`) and decoded
once per session (:func:`decode`), with optional digit-style preprocessing (:func:`digit_styled`). Per
user, in ``st.session_state``; never in a shared cache. No maths: decoding and preprocessing are
privcore's."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import streamlit as st

from privcore.inputs import DecodedImage, decode_image
from privcore.inputs import digit_styled as _digit_styled
from privlens.memo import memo
from privlens.samples import Sample, list_samples
from privlens.settings import md_literal

IMAGE_KEY = "privlens_images"
#: the 1-pixel frame drawn around a model-input picture, so a blank white (or black) input stays visible
FRAME_GREY = 160


def framed(png: bytes) -> bytes:
    """``png`` with a 1-pixel grey frame around it (:data:`FRAME_GREY`), for display only: a blank white
    input is otherwise invisible on the white page. Downloads and reports keep the unframed picture."""
    import io

    from PIL import Image, ImageOps

    with Image.open(io.BytesIO(png)) as im:
        im.load()
        fill = FRAME_GREY if im.mode in ("L", "P", "1", "I", "I;16") else (FRAME_GREY,) * len(im.getbands())
        out = ImageOps.expand(im, border=1, fill=fill)
    buf = io.BytesIO()
    out.save(buf, format="PNG")
    return buf.getvalue()


@dataclass(frozen=True)
class CurrentImage:
    """The image the pages work on: its name (user-supplied for an upload: show it with
    :func:`privlens.settings.md_literal`), decoded model input and session-local digest."""

    name: str
    decoded: DecodedImage
    digest: str
    source: str  # "sample" or "upload"

    @property
    def tensor(self) -> Any:
        """(C, H, W) float tensor in [0, 1]."""
        return self.decoded.tensor


def samples(dataset: str) -> tuple[Sample, ...]:
    """Shipped samples of ``dataset``."""
    return list_samples(dataset)


def content_digest(data: bytes) -> str:
    """SHA-256 of an upload's bytes: what identifies it (two files with one name and size differ)."""
    return hashlib.sha256(data).hexdigest()


def image_digest(image: Any) -> str:
    """SHA-256 of an image tensor's shape, dtype and bytes: a session-local key, never released."""
    arr = image.detach().cpu().numpy() if hasattr(image, "detach") else np.asarray(image)
    arr = np.ascontiguousarray(arr)
    h = hashlib.sha256(f"{arr.shape}|{arr.dtype}".encode())
    h.update(arr.tobytes())
    return h.hexdigest()


def set_image(
    dataset: str,
    *,
    name: str,
    data: bytes,
    source: str,
    invert: bool = False,
    sha256: str | None = None,
    digit_style: bool = False,
) -> None:
    """Make ``data`` the current image of ``dataset`` for this session (decoded lazily, once);
    ``digit_style`` applies :func:`privcore.inputs.preprocess.digit_style` to it."""
    images = st.session_state.setdefault(IMAGE_KEY, {})
    data = bytes(data)
    images[dataset] = {
        "name": name,
        "data": data,
        "source": source,
        "invert": bool(invert),
        "sha256": sha256 or content_digest(data),
        "digit_style": bool(digit_style),
    }


def digit_styled(
    data: bytes, shape: Sequence[int], *, invert: bool = False, sha256: str | None = None
) -> DecodedImage:
    """:func:`privcore.inputs.digit_styled` (what ``privcore release --digit-style`` does too) on this
    session's decodes (:func:`decode`), once per bytes, shape and inversion. ValueError when it cannot
    be used."""
    c, h, w = (int(v) for v in shape)

    def dec(d: bytes, target: tuple[int, int, int], inv: bool) -> DecodedImage:
        return decode(d, target, invert=inv, sha256=sha256)

    key = (sha256 or content_digest(data), (c, h, w), bool(invert))
    return memo(
        "privlens_digit_style", key, lambda: _digit_styled(data, (c, h, w), invert=invert, decode=dec),
        max_entries=16,
    )


def current_image(
    dataset: str, image_shape: Sequence[int], *, background: float = 0.0
) -> CurrentImage | None:
    """The session's current image for ``dataset`` (default: its first shipped sample)."""
    images = st.session_state.setdefault(IMAGE_KEY, {})
    entry = images.get(dataset)
    if entry is None:
        shipped = samples(dataset)
        if not shipped:
            return None
        data = shipped[0].data()
        entry = {"name": shipped[0].name, "data": data, "source": "sample", "sha256": content_digest(data)}
        images[dataset] = entry
    if "sha256" not in entry:
        entry["sha256"] = content_digest(entry["data"])
    try:
        if entry.get("digit_style"):
            decoded = digit_styled(
                entry["data"], image_shape, invert=bool(entry.get("invert", False)), sha256=entry["sha256"]
            )
        else:
            decoded = decode(
                entry["data"],
                tuple(int(v) for v in image_shape),
                background=float(background),
                invert=bool(entry.get("invert", False)),
                sha256=entry["sha256"],
            )
    except ValueError:
        images.pop(dataset, None)
        return None
    return CurrentImage(entry["name"], decoded, image_digest(decoded.tensor), entry["source"])


def require_image(dataset: str, image_shape: Sequence[int], *, background: float = 0.0) -> CurrentImage:
    """The current image with its caption shown; stops the page with an explanation when there is none."""
    image = current_image(dataset, image_shape, background=background)
    if image is None:
        st.error("No image: pick one on the Release page.")
        st.stop()
    st.markdown(image_caption(image))
    return image


DECODED_KEY = "privlens_decoded"


def decode(
    data: bytes,
    shape: Sequence[int],
    *,
    background: float = 0.0,
    invert: bool = False,
    sha256: str | None = None,
) -> DecodedImage:
    """:func:`privcore.inputs.images.decode_image`, once per session for the same bytes (by SHA-256), shape,
    background and inversion: the Release page's check of a new upload and every later use of it
    share one decode. ValueError (the reason) for a refused file."""
    key = (sha256 or content_digest(data), tuple(int(v) for v in shape), float(background), bool(invert))
    return memo(
        DECODED_KEY,
        key,
        lambda: decode_image(data, target_shape=key[1], background=key[2], invert=key[3]),
        max_entries=16,
    )


def image_caption(img: CurrentImage) -> str:
    """One line: where the current image came from (its name shown verbatim, never rendered)."""
    kind = "shipped sample" if img.source == "sample" else "your upload"
    return f"Current image: {md_literal(img.name)} ({kind}). Change it on the Release page."
