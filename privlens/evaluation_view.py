"""The progress of a live accuracy's per-image certificates on a page (:mod:`privlens.evaluation`): a
small fragment that redraws itself every few seconds while the table is computed in the background, and
reruns the page once when it is complete, so the reading appears without a click. Nothing waits for it."""

from __future__ import annotations

from typing import Any

import streamlit as st

__all__ = ["REFRESH_S", "progress"]

#: seconds between two redraws of the progress bar
REFRESH_S = 3.0


def progress(now: Any) -> None:
    """Show ``now``'s certificate progress (a :class:`privlens.mechanism_text.LiveAccuracy`; nothing for
    one without certificates or None)."""
    if now is None or not now.progress:
        return
    if now.job.finished:
        if now.job.error is not None:
            st.caption(now.progress)
        return
    _bar(now.job, scored=now.reading is not None)


@st.fragment(run_every=REFRESH_S)
def _bar(job: Any, *, scored: bool) -> None:
    from privlens.mechanism_text import CERTIFICATE_NAME

    if job.finished:
        st.rerun(scope="app")
    st.progress(min(1.0, job.done / max(job.planned, 1)), text=job.text(CERTIFICATE_NAME))
    if not scored:
        st.caption("The accuracy appears once the first images are certified; the committed experiment "
                   "results are shown meanwhile where they exist.")
