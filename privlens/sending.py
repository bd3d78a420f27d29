"""Draw at Send: the one place where the dashboard draws noise that can leave a session, shared by
the Release (Global, posthoc PTR) and Inference-privacy pages.

**Why the noise is drawn when the user sends, and not before.** A guarantee bounds what *one*
draw of the mechanism reveals. If a page showed a draw before it was sent ("preview, free until you
send") and let the user draw again, the user could keep drawing until an outcome suited them and
send that one: for an image with φ = 0, PTR releases with probability at most δ/2 per draw (2.43 %
at ε = 1, δ = 0.05), but the first release among k = 5 free previews is sent with probability
1 − (1 − 0.0243)^5 = 11.6 % (63 % for k = 40), while the ledger charges one release. What is sent
is then not an output of the mechanism, and (ε, δ) does not hold for it. There are two ways out:
charge every draw that is shown, or draw nothing until the user sends. We draw at Send:

* it is what the user means: a value they see is a value that has been sent, so "what would leave
  your device" and "what was charged" are the same thing, and no draw is wasted budget;
* charging shown draws would spend budget on every rerun, slider move and page visit that shows one
  (or hide the value behind a click, which is the same as drawing at send);
* what a user needs to decide whether to send — the guarantee, the noise scale, the probability that
  PTR releases at all (computed from the certified φ, the data owner's own information) and
  noise-free summaries — does not need a draw, so the page shows those before Send.

So before Send a page holds no drawn value (no noise, no ⊥/released outcome, no reconstruction of
one) — neither on screen nor in the session. :func:`send` draws once through the caller's function
(which calls the library's secure sampler) and charges the session's ledger in the same call: the
number of draws of a page equals the number of its ledger entries. The charge is written to disk
(atomic, fsync'd: :mod:`privlens.ledger_session`) before :func:`send` returns, and a draw whose
charge cannot be written is discarded unseen. Only then does the page show the outcome, and offer
its downloads (the JSON, the report), which are post-processing of a release already charged.
"Send another" is a new draw, charged again.

Sent releases are kept for the whole session (a list, never evicted), each under a unique id
(continuing the browser's ledger count: a reload does not number from 1 again) and the settings key it
was drawn at: a sent release is never redrawn, so returning to a setting after any number of
slider moves shows the release that was sent there.
No privacy maths here: draws and guarantees come from :mod:`privcore.mechanisms`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import streamlit as st

from privcore.errors import PrivcoreError
from privlens import ui
from privlens.deployment import custody_text, deployment
from privlens.image import CurrentImage
from privlens.ledger_session import NotRecorded

__all__ = ["SENT_KEY", "SentRelease", "custody", "failure", "latest", "send", "sent_releases"]

SENT_KEY = "privlens_sent_releases"
FAILED_KEY = "privlens_send_failed"


@dataclass(frozen=True)
class SentRelease:
    """One release that has left the session: its session-unique ``id``, the ``page`` and settings
    ``key`` it was drawn at (session-local, never released itself), the mechanism's ``outcome``
    (what was sent), the ``guarantee`` it spends and its ledger ``label``."""

    id: int
    page: str
    key: Hashable
    outcome: Any
    guarantee: Any
    label: str


def sent_releases() -> list[SentRelease]:
    """Every release sent in this session, oldest first (kept for the whole session)."""
    return st.session_state.setdefault(SENT_KEY, [])


def latest(page: str, key: Hashable) -> SentRelease | None:
    """The newest release sent from ``page`` at the settings ``key``; None when none was."""
    sent = st.session_state.get(SENT_KEY, [])
    return next((r for r in reversed(sent) if r.page == page and r.key == key), None)


def send(
    *,
    page: str,
    key: Hashable,
    image: CurrentImage,
    draw: Callable[[], Any],
    describe: Callable[[Any, int], tuple[Any, str]],
) -> SentRelease | None:
    """Draw once and charge the session's ledger for it, in one step (a Send button's callback).

    ``draw()`` makes the one draw (the library's secure sampler); ``describe(outcome, id)`` gives the
    guarantee it spends and its ledger label. When ``draw`` refuses (ValueError, PrivcoreError:
    parameters the sampler cannot honour, an output that cannot be certified — raised before any
    noise is drawn), nothing is charged or kept and :func:`failure` says why on the next render.
    """
    st.session_state.setdefault(FAILED_KEY, {}).pop(page, None)
    try:
        outcome = draw()
    except (ValueError, PrivcoreError) as exc:
        st.session_state[FAILED_KEY][page] = str(exc)
        return None
    sent = sent_releases()
    number = max(max((r.id for r in sent), default=0), len(ui.ledger_rows())) + 1
    guarantee, label = describe(outcome, number)
    try:  # durable (fsync'd) before anything is kept or shown: a crash after this is charged
        ui.record_release(image=image, guarantee=guarantee, label=label)
    except NotRecorded as exc:  # the draw is discarded unseen: what is never shown needs no charge
        st.session_state[FAILED_KEY][page] = f"The release could not be charged, so it was not sent: {exc}."
        return None
    release = SentRelease(id=number, page=page, key=key, outcome=outcome, guarantee=guarantee, label=label)
    sent.append(release)
    return release


def failure(page: str) -> str | None:
    """Why the last Send on ``page`` drew nothing (once: the message is then forgotten)."""
    return st.session_state.setdefault(FAILED_KEY, {}).pop(page, None)


def custody() -> str:
    """Where the user's image is before anything is sent, in this deployment's terms
    (:func:`privlens.deployment.custody_text`); a misconfigured deployment reads as ``shared``,
    the careful wording."""
    try:
        mode = deployment()
    except ValueError:
        mode = "shared"
    return custody_text(mode, address=st.get_option("server.address"))
