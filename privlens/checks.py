"""Blank and out-of-domain checks before anything is computed for a release (issue 16, item 5).

A near-constant image, or one whose VAE reconstruction error or embedding distance lies beyond the
test data's 99.9th percentile (:mod:`privcore.domain`), gets a warning saying why, and the page
stops until the user confirms it for this image. The profile is computed once per process from the
dataset's own data; nothing here releases anything.
"""

from __future__ import annotations

import logging

import streamlit as st
import torch

from privcore.domain import DomainProfile, blank_reason
from privcore.errors import PrivcoreError
from privlens import pipelines
from privlens.image import CurrentImage
from privlens.session import md_literal

LOG = logging.getLogger("privlens")
CONFIRMED_KEY = "privlens_confirmed_images"


@st.cache_resource(show_spinner="Profiling the test data (once per dataset)…", max_entries=4)
def _profile(dataset: str, model: str, directory: str) -> DomainProfile:
    from privcore.data import load_dataset

    pipe = pipelines.load(dataset, model, directory)
    ds = load_dataset(dataset)
    return DomainProfile.from_data(train=ds.x_train, held_out=ds.x_test, embed=pipe.embed, decode=pipe.decode)


def concerns(dataset: str, image: CurrentImage) -> list[str]:
    """Why ``image`` may not be a valid input for ``dataset``'s models (empty when none)."""
    out = []
    blank = blank_reason(image.tensor)
    if blank is not None:
        out.append(blank)
    try:
        models = pipelines.catalogue().get(dataset, ())
        if not models:
            return out
        pipe = pipelines.load(dataset, models[0], pipelines.models_dir())
        profile = _profile(dataset, models[0], pipelines.models_dir())
    except (PrivcoreError, OSError, ValueError, ImportError) as exc:  # the checks need the data and a VAE
        LOG.warning("no domain profile for %s: %s", dataset, exc)
        return out
    x = image.tensor
    z = pipe.embed(x)
    recon = pipe.decode(torch.as_tensor(z, dtype=torch.float32).reshape(1, -1))
    return out + profile.check(x, z, recon)


def confirm(dataset: str, image: CurrentImage, *, key: str) -> None:
    """Warn about :func:`concerns` and stop the page until the user confirms this image (by its digest);
    nothing is computed or released before that."""
    found = concerns(dataset, image)
    if not found:
        return
    confirmed: set[str] = st.session_state.setdefault(CONFIRMED_KEY, set())
    reasons = "\n".join(f"* {r}" for r in found)
    st.warning(
        f"**{md_literal(image.name)} does not look like the {dataset} images the models were built for:**\n\n"
        f"{reasons}\n\nIts release would still be private, but its prediction is likely meaningless.",
        icon=":material/warning:",
    )
    if image.digest in confirmed:
        st.caption("You confirmed this image; it is used as it is.")
        return
    if st.button("Use this image anyway", key=f"{key}_confirm_{image.digest[:12]}"):
        confirmed.add(image.digest)
        st.rerun()
    st.info("Nothing is computed or released for this image until you confirm it.")
    st.stop()
