"""Blank and out-of-domain checks before anything is computed for a release (issue 16, item 5).

A near-constant image, or one whose VAE reconstruction error or embedding distance lies beyond the
test data's 99.9th percentile (:mod:`privcore.domain`), gets a warning saying why, and the page
stops until the user confirms it for this image. The profile is computed once per process from the
dataset's own data; nothing here releases anything.
"""

from __future__ import annotations

import logging

import streamlit as st

from privcore import inputs
from privcore.domain import DomainProfile
from privcore.errors import PrivcoreError
from privlens import pipelines
from privlens.image import CurrentImage
from privlens.session import md_literal

LOG = logging.getLogger("privlens")
CONFIRMED_KEY = "privlens_confirmed_images"


@st.cache_resource(show_spinner="Profiling the test data (once per dataset)…", max_entries=4)
def _profile(dataset: str, model: str, directory: str) -> DomainProfile:
    return inputs.domain_profile(dataset, pipelines.load(dataset, model, directory))


def concerns(dataset: str, image: CurrentImage) -> list[str]:
    """Why ``image`` may not be a valid input for ``dataset``'s models (empty when none):
    :func:`privcore.inputs.concerns`, what ``privcore release`` checks too."""
    try:
        models = pipelines.catalogue().get(dataset, ())
        pipe = pipelines.load(dataset, models[0], pipelines.models_dir()) if models else None
    except (PrivcoreError, OSError, ValueError, ImportError) as exc:  # the checks need the data and a VAE
        LOG.warning("no domain profile for %s: %s", dataset, exc)
        pipe = None
    if pipe is None:
        return inputs.concerns(image.tensor)
    return inputs.concerns(
        image.tensor, pipe=pipe, profile=lambda: _profile(dataset, models[0], pipelines.models_dir())
    )


def confirm(dataset: str, image: CurrentImage, *, key: str) -> None:
    """Warn about :func:`concerns` and stop the page until the user confirms this image (by its digest);
    nothing is computed or released before that."""
    found = concerns(dataset, image)
    if not found:
        return
    confirmed: set[str] = st.session_state.setdefault(CONFIRMED_KEY, set())
    reasons = "\n".join(f"* {r}" for r in found)
    st.warning(
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
