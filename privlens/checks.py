"""The domain check before anything is computed for a release.

:func:`privcore.inputs.domain.check` — the measured check the CLI and the API run too: the upload's own pixels
(tiny, strip, blank, colour, light background) and the model input's scores, thresholds calibrated on
the dataset's validation split once per process — names why an image may not be like the dataset's.
The warning is shown beside the image the model will see, and the page stops until the user confirms it
for this image. Nothing here releases anything.
"""

from __future__ import annotations

import logging

import streamlit as st

from privcore import inputs
from privcore.errors import PrivcoreError
from privcore.inputs import encode_png
from privlens import pipelines
from privlens.image import IMAGE_KEY, CurrentImage, framed
from privlens.memo import memo
from privlens.settings import md_literal

LOG = logging.getLogger("privlens")
CONFIRMED_KEY = "privlens_confirmed_images"
#: The model's-eye image is shown about this many pixels wide.
EYE_WIDTH = 112


def concerns(dataset: str, image: CurrentImage) -> list[str]:
    """Why ``image`` may not be a valid input for ``dataset``'s models (empty when none):
    :func:`privcore.inputs.concerns` on the model input and the file it came from, what ``privcore
    release`` checks too; once per session and image."""
    entry = st.session_state.get(IMAGE_KEY, {}).get(dataset) or {}
    data = entry.get("data")
    invert, styled = bool(entry.get("invert", False)), bool(entry.get("digit_style", False))
    try:
        models = pipelines.catalogue().get(dataset, ())
        pipe = pipelines.load(dataset, models[0], pipelines.models_dir()) if models else None
    except (PrivcoreError, OSError, ValueError, ImportError) as exc:  # the check needs a VAE
        LOG.warning("no domain check for %s: %s", dataset, exc)
        pipe = None

    def compute() -> list[str]:
        with st.spinner(f"Checking the image against the {dataset} validation images (calibrated once)…"):
            return inputs.concerns(image.tensor, pipe=pipe, dataset=dataset, upload=data, invert=invert,
                                   digit_style=styled)

    key = (dataset, image.digest, entry.get("sha256"), invert, styled, pipe is None)
    return memo("privlens_domain_checks", key, compute, max_entries=16)


def model_eye(image: CurrentImage) -> bytes:
    """The model input of ``image`` as a PNG, enlarged by pixel repetition to about :data:`EYE_WIDTH`, in a
    1-pixel grey frame (a blank white input stays visible on the white page)."""
    h, w = (int(v) for v in image.tensor.shape[-2:])
    return framed(encode_png(image.tensor, scale=max(1, EYE_WIDTH // max(h, w))))


def confirm(dataset: str, image: CurrentImage, *, key: str) -> None:
    """Warn about :func:`concerns` beside the model's-eye image (:func:`model_eye`) and stop the page
    until the user confirms this image (by its digest); nothing is computed or released before that."""
    found = concerns(dataset, image)
    if not found:
        return
    confirmed: set[str] = st.session_state.setdefault(CONFIRMED_KEY, set())
    reasons = "\n".join(f"* {r}" for r in found)
    eye, text = st.columns([1, 4])
    h, w = (int(v) for v in image.tensor.shape[-2:])
    eye.image(model_eye(image), caption=f"What the model sees ({w}×{h}, enlarged)", width=EYE_WIDTH)
    text.warning(
        f"**{inputs.concern_heading(md_literal(image.name), dataset)}**\n\n{reasons}\n\n"
        f"{inputs.CONCERN_CONSEQUENCE}",
        icon=":material/warning:",
    )
    if image.digest in confirmed:
        st.caption(inputs.CONFIRMED)
        return
    if st.button("Use this image anyway", key=f"{key}_confirm_{image.digest[:12]}"):
        confirmed.add(image.digest)
        st.rerun()
    st.info(inputs.UNCONFIRMED)
    st.stop()
