"""privlens: the Streamlit entry point (``make run``, i.e. ``streamlit run app.py``).

Navigation over the pages in ``pages/`` and the sidebar every page shares (dataset, model,
mechanism, ε, δ, R or α); the settings live in the session and in the URL query, so a view can
be shared. Every page runs inside :func:`privlens.ui.error_boundary` (no traceback reaches the
browser). Layout only: all computation is in ``privcore``.
"""

from __future__ import annotations

import time
from pathlib import Path

import streamlit as st

from privcore.mechanisms import registry
from privlens import ledger_session, media, netguard, ui, warmup

_start = time.perf_counter()
# no look-up of this machine's IPs on the network (the launcher did this before the server started;
# here for a bare `streamlit run app.py`, from its first run on)
netguard.install()
# before any element: media ids keyed per process and session, never a hash of the (private) content;
# raises, and nothing is shown, where Streamlit's storage is not the one it knows (privlens/media.py)
media.install()
# the tab icon is a local SVG (inlined as a data: URL); a ":material/...:" icon is fetched from Google
st.set_page_config(page_title="privlens", page_icon=str(media.PAGE_ICON), layout="wide")
warmup.import_early()  # torch, loaded while the first page is drawn (once per process)

PAGES_DIR = Path(__file__).resolve().parent / "pages"
PAGES = {
    "": [
        st.Page(PAGES_DIR / "home.py", title="Home", icon=":material/home:", default=True),
    ],
    # the section names the registry's posthoc mechanisms (the Release page releases each of them)
    f"Posthoc privacy ({', '.join(registry.names(family='posthoc'))})": [
        st.Page(PAGES_DIR / "release.py", title="Release", icon=":material/upload:"),
        st.Page(PAGES_DIR / "tradeoffs.py", title="Trade-offs", icon=":material/insights:"),
        st.Page(PAGES_DIR / "neighbourhood.py", title="Neighbourhood", icon=":material/blur_on:"),
        st.Page(PAGES_DIR / "attack.py", title="Attack", icon=":material/person_search:"),
        st.Page(PAGES_DIR / "lipschitz.py", title="Lipschitz", icon=":material/functions:"),
    ],
    "Inference privacy": [
        st.Page(PAGES_DIR / "inference_privacy.py", title="Inference privacy", icon=":material/shield:"),
    ],
    "Accounting": [
        st.Page(PAGES_DIR / "accountant.py", title="Accountant", icon=":material/receipt_long:"),
    ],
    "Learned mechanisms": [
        st.Page(PAGES_DIR / "mechanism_lab.py", title="Mechanism lab", icon=":material/science:"),
    ],
}

page = st.navigation(PAGES)


def run_page(_settings: object = None) -> None:
    """The page, in its error boundary, below the sidebar that ``app.py`` rendered (a live page's run
    is a fragment with the ε and δ widgets, :func:`privlens.ui.live_section`: moving them reruns it only)."""
    st.session_state[ui.NAV_FLAG] = True  # the page must not render the sidebar a second time
    # a fragment rerun runs the page again: Streamlit lets a page run once per run of app.py
    page._can_be_called = True
    try:
        with warmup.script_run(), ui.error_boundary(f"The {page.title} page"):  # also a fragment's rerun
            page.run()
    finally:
        st.session_state[ui.NAV_FLAG] = False


# every page runs inside the error boundary: an error no page handled is shown as "<page> failed: nothing
# was released", its traceback logged on the server (and .streamlit/config.toml hides Streamlit's own)
# while this run is in progress the warm-up thread waits (privlens.warmup.script_run)
with warmup.script_run(), ui.error_boundary(f"The {page.title} page"):
    # ?page=… opens that page; a path or ?page= that names no page is said at the top, naming it (before
    # the sidebar, which rewrites the URL to its settings)
    ui.go_to_requested_page(PAGES, page)
    # on the pages whose numbers follow ε and δ, an ε or δ step reruns the page, not the app
    ui.sidebar(live=page.url_path in ui.LIVE_PAGES)
    # the browser keeps its ledger token (a cookie): its ledger survives a reload and a server restart
    ledger_session.hand_token()
    try:
        ui.stop_on_url_problems(page.title)  # a bad link releases nothing: error at the top, st.stop()
        ui.live_section(run_page)
    finally:
        # server time of this run (script start to end), read by bench/dashboard.py
        st.session_state[ui.RUN_TIME_KEY] = time.perf_counter() - _start
        # after the page is drawn (once per process): its imports would compete with the first page's
        warmup.warm_up()
