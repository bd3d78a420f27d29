"""Choosing the image the pages work on: a shipped sample or an upload, shared by every page.

The same widgets on the Release and Inference-privacy pages (``key`` keeps their states apart); the
choice is the session's current image of the dataset (:func:`privlens.image.set_image`), so an upload
made on one page is the image of every page. An upload is identified by its bytes and decoded once
(:func:`privlens.image.decode`); a file that cannot be used stops the page with the reason, and nothing
is released.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import streamlit as st

from privcore.inputs import DEFAULT_MAX_BYTES, DEFAULT_MAX_PIXELS, encode_png, note_text
from privlens.image import (
    IMAGE_KEY,
    CurrentImage,
    content_digest,
    current_image,
    decode,
    digit_styled,
    framed,
    samples,
    set_image,
)
from privlens.settings import md_literal

__all__ = ["material_note", "pick_image", "show_notes"]

#: notes that change what the model sees materially (shown as warnings; the others as a caption)
MATERIAL = ("the image has transparency", "inverted", "colour converted", "the image's border", "animated")
#: padding that fills more than this share of the model's square is material (a thin strip)
PADDING_SHARE = 0.5
_PADDED = re.compile(r"padded from (\d+)×(\d+) to a (\d+)×(\d+) square")


def material_note(note: str) -> bool:
    """Whether a decode note (:attr:`~privcore.inputs.images.DecodedImage.notes`) changes the result
    materially: transparency composited, inverted, colour converted, a border that suggests inverting,
    an animation cut to its first frame, or padding that fills over half the square. A resize, a
    lossless bit-depth note or the user's own digit-style steps are not."""
    if note.startswith(MATERIAL):
        return True
    m = _PADDED.search(note)
    if m is None:
        return False
    iw, ih, sw, sh = (int(v) for v in m.groups())
    return 1.0 - (iw * ih) / max(1, sw * sh) > PADDING_SHARE


def show_notes(notes: Sequence[str]) -> None:
    """What was done to the upload: material changes as warnings, the harmless ones (resized …) in one
    caption."""
    plain = []
    for note in notes:
        if material_note(note):
            st.warning(note_text(note), icon=":material/warning:")
        else:
            plain.append(note)
    if plain:
        st.caption("Prepared for the model: " + " ".join(plain))


def pick_image(dataset: str, shape: Sequence[int], *, key: str) -> CurrentImage:
    """The source radio, the sample selector or the uploader, and the resulting current image of
    ``dataset`` decoded to ``shape`` (C, H, W); stops the page with a message when there is none."""
    shape = tuple(int(v) for v in shape)
    images = st.session_state.setdefault(IMAGE_KEY, {})
    current = images.get(dataset)
    source_default = 1 if current is not None and current.get("source") == "upload" else 0
    source = st.radio(
        "Image source",
        ("Shipped sample", "Upload your own"),
        index=source_default,
        horizontal=True,
        key=f"{key}_source",
        label_visibility="collapsed",
    )
    if source == "Shipped sample":
        shipped = samples(dataset)
        if not shipped:
            st.warning(f"No sample images ship for {dataset}; upload one instead.")
            st.stop()
        names = [x.name for x in shipped]
        chosen = current["name"] if current is not None and current["name"] in names else names[0]
        pick = st.selectbox(
            f"Sample from the {dataset} test set (label-index)",
            names,
            index=names.index(chosen),
            key=f"{key}_sample",
        )
        if current is None or current["name"] != pick or current["source"] != "sample":
            sample = shipped[names.index(pick)]
            set_image(dataset, name=sample.name, data=sample.data(), source="sample")
    else:
        c, h, w = shape
        upload = st.file_uploader(
            f"PNG or JPEG, at most {DEFAULT_MAX_BYTES // (1 << 20)} MiB and {DEFAULT_MAX_PIXELS:,} pixels; "
            f"it is converted to what the model sees ({'grey' if c == 1 else 'colour'}, {w}×{h}).",
            type=["png", "jpg", "jpeg"],
            key=f"{key}_upload",
        )
        invert = st.checkbox(
            "Invert (for dark-on-light drawings)",
            key=f"{key}_invert",
            help="The training images are light on a dark background.",
        )
        if upload is None:
            if current is None or current.get("source") != "upload":
                st.info("Choose a file to see its release.")
                st.stop()
            st.caption(
                f"Showing your earlier upload {md_literal(current['name'])} (kept for this session only); "
                "choose a file to replace it."
            )
        else:
            # an upload is identified by its bytes (a new file with the previous one's name and size is new)
            # and decoded once: this check and every later use share decode's result
            data = upload.getvalue()
            digest = content_digest(data)
            try:
                decode(data, shape, invert=invert, sha256=digest)
            except ValueError as exc:
                st.error(f"**This file cannot be used: {md_literal(exc, limit=500)}.** Nothing was released.")
                st.stop()
            styled = st.checkbox(
                "Digit-style preprocessing (invert a light page, crop to the ink, centre by mass, pad)",
                key=f"{key}_digit",
                help="For hand-drawn digits: what MNIST did to its training digits. Previewed below.",
            )
            if styled:
                try:
                    after = digit_styled(data, shape, invert=invert, sha256=digest)
                except ValueError as exc:
                    st.error(
                        f"**Digit-style preprocessing failed: {md_literal(exc, limit=300)}.** "
                        "Nothing was released; untick it to use the image as it is."
                    )
                    st.stop()
                before = decode(data, shape, invert=invert, sha256=digest)
                scale = max(1, 96 // shape[2])
                p = st.columns(4)
                p[0].image(framed(encode_png(before.tensor, scale=scale)), caption="without it (not used)",
                           width=96)
                p[1].image(framed(encode_png(after.tensor, scale=scale)), caption="digit-style (used)",
                           width=96)
            state = (
                (current or {}).get("source"),
                (current or {}).get("sha256"),
                (current or {}).get("invert"),
            )
            if (
                state != ("upload", digest, bool(invert))
                or bool((current or {}).get("digit_style")) != styled
            ):
                set_image(
                    dataset,
                    name=upload.name,
                    data=data,
                    source="upload",
                    invert=invert,
                    sha256=digest,
                    digit_style=styled,
                )

    image = current_image(dataset, shape)
    if image is None:
        st.error("The current image could not be decoded; pick another one. Nothing was released.")
        st.stop()
    return image
