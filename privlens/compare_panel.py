"""The mechanism chooser on the Release and Inference-privacy pages: Streamlit glue around
:func:`privlens.chooser.compare`, which holds the logic (no maths here either).

It gathers, for every mechanism of the registry, its outlook at the sidebar's settings through
:mod:`privlens.mechanism_view` — the posthoc ones on the current model (their constants certified by
this process), the inference ones on their classifiers — and, for a mechanism that needs a per-image
certification, this image's only when the session already has it or the user asks for it (certifying
costs time: a button, then the progress bar of :func:`privlens.mechanism_view.certify`); and the
live accuracies (:mod:`privlens.mechanism_text`): the page's own mechanism's computed with the page,
every other one's in the background, its row "computing…" until it is in. It shows the table, the
recommended mechanism with the reason and a button to use it. While rows are being computed the table
redraws itself every second, and an invisible watcher draws the page once more as soon as the last is in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from privcore.errors import CheckpointError, PrivcoreError
from privcore.mechanisms import registry
from privlens import background, chooser, evaluation_view, pipelines, ui
from privlens import mechanism_text as mt
from privlens import mechanism_view as mv
from privlens.image import CurrentImage
from privlens.settings import Settings

__all__ = ["panel"]

#: certificate keys of the images whose certification the user asked for from the comparison
CERTIFY_KEY = "privlens_compare_certify"
#: seconds between two redraws of the table while a row's live accuracy is being computed
POLL_S = 1.0
#: seconds between two looks, drawing nothing, whether every row is in (:func:`_watch`)
WATCH_S = 0.25


def _ask_certify(key: tuple) -> None:
    st.session_state.setdefault(CERTIFY_KEY, set()).add(key)


def _offer_certification(view: mv.View) -> None:
    name = view.mech.name.lower().replace("-", "_")
    st.button(
        f"Also certify for {view.mech.label}",
        key=f"compare_certify_{name}",
        icon=":material/verified:",
        on_click=_ask_certify,
        args=(view.certificate_key,),
        help=f"{view.mech.label}'s P[released] for this image needs its certification (a few seconds to a "
        "minute, once per image and R). Nothing is drawn or sent.",
    )


def _outlook_or_why(mech: Any, target: Any, at: Any) -> Any:
    """``mech``'s outlook on ``target`` at ``at``, or why it cannot run (a string)."""
    try:
        return mech.outlook(target, at, time_limit=mv.TIME_LIMIT_S)
    except CheckpointError as exc:
        return str(exc)
    except (ValueError, PrivcoreError) as exc:
        return f"refused: {exc}"


def _posthoc(mech: Any, s: Settings, loaded: pipelines.Loaded, image: CurrentImage | None, *, view: Any,
             certification: Any, outlook: Any, allow_certify: bool, soon: bool) -> tuple[Any, Any, Any]:
    """``mech``'s outlook on the loaded model (or why it cannot run), with P[release] from the image's
    certification where the page or the session has it or the user asked for it; the view to offer a
    certification for (None: nothing to offer); and the background job still computing the outlook, or
    None (``soon``: a constant certified on a model's first use takes seconds)."""
    if view is not None and view.mech is mech and outlook is not None:
        return outlook, None, None
    at = mv.setting(mech, s)
    if soon and background.enabled():
        job = background.soon(("outlook", mech.name, id(loaded.pipeline), at),
                              lambda: _outlook_or_why(mech, loaded.pipeline, at),
                              name=f"privlens-outlook-{mech.name}")
        if not job.done.is_set():
            return None, None, job
        look = job.value if job.error is None else f"not computed: {job.error}"
    else:
        look = _outlook_or_why(mech, loaded.pipeline, at)
    if isinstance(look, str) or not mech.needs_certificate or image is None:
        return look, None, None
    mine = view if view is not None and view.mech is mech else mv.posthoc(s, loaded, image, mech, quiet=True)
    if mine is None:
        return look, None, None
    cert = certification if mine is view else mv.known_certificate(mine)
    if cert is None and allow_certify:
        if mine.certificate_key not in st.session_state.get(CERTIFY_KEY, set()):
            return look, mine, None
        cert = mv.certify(mine)
    if cert is None:
        return look, None, None
    try:
        return mv.outlook(mine, s, cert), None, None
    except (ValueError, PrivcoreError):
        return look, None, None


def _delta(mech: Any, s: Settings) -> float:
    """The δ ``mech`` runs at under ``s`` (the experiment tables' δ column is that one)."""
    return float(s.delta) if mech.uses_delta else 0.0


@dataclass(frozen=True, kw_only=True)
class _Rows:
    """The comparison's entries, the certifications to offer, the certificate progress to show, and
    the background jobs still computing a row (``waiting``: any)."""

    entries: list[chooser.Entry]
    offers: list[mv.View]
    progress: list[mt.LiveAccuracy]
    jobs: list[background.Job]

    @property
    def waiting(self) -> bool:
        """Whether a row is still being computed in the background."""
        return bool(self.jobs)


def _rows(s: Settings, loaded: pipelines.Loaded, image: CurrentImage | None, *, view: mv.View | None,
          certification: Any, outlook: Any, allow_certify: bool) -> _Rows:
    """Every mechanism's entry. The page's own mechanism's live accuracy is computed here (the page shows
    it already); every other one's in the background (:func:`privlens.mechanism_text.live_accuracy_soon`):
    "computing…" until it is in."""
    own = view.mech if view is not None else s.spec
    entries: list[chooser.Entry] = []
    offers: list[mv.View] = []
    progress: list[mt.LiveAccuracy] = []
    jobs: list[background.Job] = []
    ip = mv.inference_views(s, loaded.dataset, None)
    for mech in registry.MECHANISMS:
        if mech.family == "posthoc":
            look, offer, computing = _posthoc(mech, s, loaded, image, view=view, soon=mech is not own,
                                              certification=certification, outlook=outlook,
                                              allow_certify=allow_certify)
            offers += [] if offer is None else [offer]
            model, target = loaded.model, loaded.pipeline
            if computing is not None:  # its constant is being certified: the whole row fills in later
                jobs.append(computing)
                entries.append(chooser.Entry(mechanism=mech, outlook="computing…", pending=True))
                continue
        else:
            here = ip.get(mech.name, "not available")
            if mv.ip_models(loaded.dataset, quiet=True) is None:
                continue  # no IP classifiers shipped: the rows are left out
            look = here if isinstance(here, str) else mv.outlook(here, s)
            model, target = ("", None) if isinstance(here, str) else (here.model, here.target)
        g = None if isinstance(look, str) else look.guarantee
        live, pending = None, False
        if not isinstance(look, str) and target is not None:
            job = None if mech is own else mt.live_accuracy_job(mech, target, s, dataset=loaded.dataset,
                                                                model=model)
            if job is None:
                live = mt.live_accuracy(mech, target, s, dataset=loaded.dataset, model=model)
            elif job.done.is_set():
                live = job.value
            else:
                pending = True
                jobs.append(job)
        delta = _delta(mech, s) if g is None else g.delta
        progress += [] if live is None or not live.progress else [live]
        acc = live.reading if live is not None and live.reading is not None else (
            None if pending or (isinstance(look, str) and mech.family != "posthoc")
            else mt.accuracy(mech, s, dataset=loaded.dataset, model=model, delta=delta))
        entries.append(chooser.Entry(mechanism=mech, outlook=look, accuracy=acc, pending=pending))
    return _Rows(entries=entries, offers=offers, progress=progress, jobs=jobs)


def panel(
    s: Settings,
    loaded: pipelines.Loaded,
    image: CurrentImage | None,
    *,
    view: mv.View | None = None,
    certification: Any = None,
    outlook: Any = None,
    allow_certify: bool = True,
) -> None:
    """Show the comparison for the settings, the loaded model and ``image``. ``view``, ``certification``
    and ``outlook``: the page's own mechanism's, reused as they are. While a row's live accuracy is being
    computed in the background the table redraws itself every :data:`POLL_S` seconds (a fragment) and the
    page once when every row is in."""
    args = dict(view=view, certification=certification, outlook=outlook, allow_certify=allow_certify)
    initial = _rows(s, loaded, image, **args)
    handed = [initial]  # the first draw uses the rows computed here; a redraw computes them again

    @st.fragment(run_every=POLL_S if initial.waiting else None)
    def _table() -> None:
        if handed:
            rows = handed.pop()
        else:
            rows = _rows(s, loaded, image, **args)
            if initial.waiting and not rows.waiting:
                st.rerun()  # every row is in: draw the page once more, without polling
        _show(s, loaded, image, rows)

    _table()
    if initial.waiting:
        # the jobs of the first draw: a look is a check of their flags, nothing computed (a row whose
        # constant comes in starts its reading's job; the page then drawn watches that one)
        _watch(lambda: all(job.done.is_set() for job in initial.jobs))


def _watch(ready: Any) -> None:
    """Every :data:`WATCH_S` seconds, a fragment that draws nothing (so the browser shows no change while
    it looks) draws the page once more as soon as ``ready()``: the first draw's background rows in,
    without waiting for the table's next redraw."""

    @st.fragment(run_every=WATCH_S)
    def _look() -> None:
        if ready():
            st.rerun()

    _look()


def _show(s: Settings, loaded: pipelines.Loaded, image: CurrentImage | None, rows: _Rows) -> None:
    """The comparison's caption, table, recommendation and buttons."""
    entries, offers = rows.entries, rows.offers
    cmp = chooser.compare(
        entries,
        epsilon=s.epsilon,
        alpha=s.alpha,
        **({} if image is not None else {"unknown_probability": "per image: on the Release page"}),
    )
    st.caption(
        f"One sent release of each mechanism at the sidebar's **total ε = {s.epsilon:g}** (δ = {s.delta:g}, "
        f"R = {s.radius:g}; α = {s.alpha:g} for the inference-privacy mechanisms), for {loaded.dataset}/"
        f"{loaded.model}. Noise: the scale per coordinate of the released vector (Laplace b or Gaussian σ). "
        "Accuracy: computed now at exactly this setting on the test split for every mechanism that needs no "
        "per-image certificate (n images × noise draws, 95 % interval); for one that needs a certificate per "
        "image (PTR's φ), from the certificates of the test images, computed once per model and R in the "
        "background (progress below; the reading covers the images certified so far), and until then the "
        "committed experiment results at this ε with their interval, n and the δ they were measured at "
        "(between measured points: interpolated in log ε, labelled so, with no interval and no n; else "
        '"not measured"). Nothing here is released.'
    )
    for now in rows.progress:
        evaluation_view.progress(now)
    if rows.waiting:
        st.caption("“computing…”: that mechanism's accuracy at exactly these settings (n test images × noise "
                   "draws), or the constant its noise is calibrated to (certified from the model's weights "
                   "on its first use), is being computed now in the background; its row fills in when it is "
                   "ready. The recommendation is made among the rows that are in.")
    other = [
        f"{registry.get(c.name).label} at δ = {c.accuracy.delta:g}"
        for c in cmp.choices
        if c.accuracy is not None and c.accuracy.other_delta(_delta(registry.get(c.name), s))
    ]
    if other:
        st.caption(
            f"Measured at another δ than these settings' δ = {s.delta:g}, where no experiment ran: "
            f"{', '.join(other)}. A smaller δ makes a mechanism with a per-image test refuse (⊥) more "
            "often and the Gaussian mechanisms add more noise (a larger δ the reverse), so the accuracy at "
            "these settings differs from the one "
            "shown."
        )
    # static tables (as the Inference privacy page's): drawn with the page, where a data grid redraws its
    # cells a few hundred ms after every ε or δ step
    st.table(pd.DataFrame(cmp.rows()), hide_index=True)
    notes = [f"{c.label}: {c.note}." for c in cmp.choices if c.note and c.comparable]
    st.caption(
        " ".join(notes) + (" " if notes else "") + "The inference-privacy mechanisms protect other pairs "
        "(inputs within α on the pixels, not embeddings within R): a different guarantee, not comparable, "
        "so they are shown and never ranked. Their noise is on pixels or logits, not on the embedding. The "
        "local-DP baselines protect every pair of inputs (a stronger guarantee) with their noise on the "
        "pixels or on z, not on f(z): shown, not ranked by noise."
    )
    details = pd.DataFrame(cmp.details())
    if cmp.recommended is None:
        st.warning(cmp.reason)
    else:
        label = registry.get(cmp.recommended).label
        st.success(f"**Recommended: {label}.** {cmp.reason}{cmp.ratio_text}", icon=":material/recommend:")
    with st.expander("Guarantees, calibrations and how each number was read"):
        st.table(details, hide_index=True)
    for offer in offers:
        _offer_certification(offer)
    if cmp.recommended is not None and cmp.recommended != s.mechanism and s.is_posthoc:
        st.button(
            f"Use {registry.get(cmp.recommended).label}",
            key="use_recommended",
            type="primary",
            on_click=ui.apply_settings,  # the sidebar's mechanism follows
            kwargs={"mechanism": cmp.recommended},
        )
