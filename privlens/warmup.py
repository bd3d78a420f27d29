"""What a server process prepares in the background after its first page, and how it keeps out of the
way of the pages.

* :func:`warm_up` (once per process, a daemon thread at the process's priority that pauses while a page
  runs, then at the lowest for the pattern tables): the default model's G and domain check (what the
  first Release page needs), the start of its φ table for PTR's live accuracy (:mod:`privlens.evaluation`,
  a thread of its own), the Trade-offs page's opening curve and answer, the Attack page's no-release
  baseline, the Lipschitz page's opening table (the first shipped sample's), the slow imports, the Attack
  page's opening reading, the Mechanism lab's baselines, then the exact certifier's pattern tables of
  every shipped obfuscator (:func:`privcore.lipschitz.pattern_store.precompute_pattern_tables`). Everything
  is computed here from the weights and the data, into privcore's in-memory memos; a page asking for a
  result being computed waits for it (``privcore._inflight``) instead of computing it again, except
  during the pattern tables, which run at the lowest priority: a page computes beside those.
* :func:`import_early` (once per process, from the top of the first run): torch, in a daemon thread that
  does not wait for the script runs (third-party modules only, :data:`EARLY_IMPORTS`), then torch's threads
  per operation for the whole process (:data:`TORCH_THREADS`).
* :func:`script_run` wraps each run of the app's script (and each fragment rerun). While one runs the
  warm-up waits at its next pause point (:func:`wait_for_quiet`), so it does not take the interpreter
  from the page the user waits for. Its import steps are exclusive the other way round too: a run
  starting meanwhile waits for the step to end, because two threads importing the same modules at
  once can deadlock on their import locks (importlib's ``_DeadlockError``, seen once on a fresh
  server's first Attack page).
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import streamlit as st

from privlens import background
from privlens.pipelines import GLOBAL_TIME_LIMIT_S, _catalogue, models_dir
from privlens.settings import Settings

__all__ = ["EARLY_IMPORTS", "IMPORT_STEPS", "TORCH_THREADS", "import_early", "opening_settings", "script_run",
           "torch_threads", "wait_for_quiet", "warm_up"]

LOG = logging.getLogger("privlens")

#: the longest the warm-up waits at one point for the script runs to end (then it goes on regardless)
QUIET_WAIT_S = 5.0

#: Modules the background work and later pages need, imported by the warm-up in steps of at most about a
#: second each (torchmetrics pulls in torchvision and torch._dynamo), none while a script run is in progress.
IMPORT_STEPS: tuple[tuple[str, ...], ...] = (
    ("torch", "privcore.models.pipeline", "privcore.mechanisms.global_mechanism", "highspy"),
    # not scikit-learn (~1.7 s): only the digits need it (data and split); their first page imports it
    ("privcore.inputs.domain", "privcore.data.split"),
    ("streamlit.emojis",),  # ~0.5 s: the first alert with a body (st.success, st.info…) reads its table
    ("torch._dynamo",),  # ~1.2 s of privcore.attacks.metrics' ~1.8 s (torchmetrics → torchvision.models)
    ("torchvision",),
    ("privcore.attacks.metrics",),
)

#: Imported from the start of the process's first run, alongside it (:func:`import_early`): third-party
#: packages only, which import no module of this project, so no cycle of import locks can form with a page.
EARLY_IMPORTS: tuple[str, ...] = ("torch",)

#: torch's threads per operation in the server process (``$PRIVLENS_TORCH_THREADS`` sets another number):
#: the pages, the background workers and the warm-up run side by side on a few shared cores, where one
#: operation split over two threads waits for the slower of them (on the loaded 2-core machine, the release
#: classifier on 2 000 vectors took 70–200 ms on two threads and 2–15 ms on one)
TORCH_THREADS = 1

_STATE = threading.Condition()
_running = 0  # script runs in progress
_importing = False  # an import step of the warm-up in progress


def _wake() -> None:
    with _STATE:
        _STATE.notify_all()


background.on_exit(_wake)  # at exit the warm-up stops at its next step (background: the step may end)


@contextmanager
def script_run() -> Iterator[None]:
    """Around a run of the app's script or of a fragment (nested runs count once each): waits while an
    import step of the warm-up ends (at most :data:`QUIET_WAIT_S`), then holds the warm-up at its next
    pause point until the run ends."""
    global _running
    with _STATE:
        _STATE.wait_for(lambda: not _importing, timeout=QUIET_WAIT_S)
        _running += 1
    try:
        yield
    finally:
        with _STATE:
            _running -= 1
            _STATE.notify_all()


def wait_for_quiet() -> None:
    """Block until no script run is in progress (at most :data:`QUIET_WAIT_S`): the warm-up's pause."""
    with _STATE:
        _STATE.wait_for(lambda: _running == 0 or _exiting(), timeout=QUIET_WAIT_S)


def import_quietly(names: Sequence[str]) -> None:
    """Import ``names`` when no script run is in progress, holding new runs back meanwhile."""
    global _importing
    with _STATE:
        _STATE.wait_for(lambda: _running == 0, timeout=QUIET_WAIT_S)
        _importing = True
    try:
        _import_all(names)
    finally:
        with _STATE:
            _importing = False
            _STATE.notify_all()


def _import_all(names: Sequence[str]) -> None:
    """Import ``names`` in turn until the interpreter exits; a failure is logged (the page that needs the
    module imports it again and reports)."""
    for name in names:
        if _exiting():
            return
        try:
            importlib.import_module(name)
        except Exception:
            LOG.warning("warm-up import of %s failed", name, exc_info=True)


def _exiting() -> bool:
    """The interpreter is shutting down (the main thread has ended: importing now fails)."""
    return background.exiting()


def _enabled() -> bool:
    """Whether to go on: not at exit, and not turned off (``PRIVLENS_WARM_UP=off``)."""
    return background.enabled()


def prepare_default(directory: str, dataset: str, model: str) -> None:
    """G and G₂ of ``dataset/model``, its dataset's domain check and its IP classifiers, made in this
    process into in-memory memos and caches, which the pages read (the library's memo of G,
    :func:`privcore.inputs.domain.check`, :func:`privlens.mechanism_view.ip_models`); then the Release and
    Trade-offs pages' opening views. An accelerator only: a failure is left for the page to report."""
    try:
        from privcore.inputs import domain_check
        from privcore.mechanisms import (
            card_clip_box,
            card_global_constant,
            certified_l2_constant,
            load_ip_cached,
        )
        from privcore.models import load_pipeline

        pipe = load_pipeline(dataset, obfuscator=model, models_dir=directory)
        wait_for_quiet()
        if not _enabled():
            return
        card_global_constant(pipe.obfuscator, pipe.cards["obfuscator"], time_limit=GLOBAL_TIME_LIMIT_S)
        wait_for_quiet()
        box = card_clip_box(pipe.cards["obfuscator"])
        if _enabled() and box is not None:  # Global-Gauss's G₂ (Home and the comparison show its noise)
            certified_l2_constant(pipe.obfuscator, box, time_limit=GLOBAL_TIME_LIMIT_S)
        wait_for_quiet()
        if _enabled():
            domain_check(dataset, pipe)
        wait_for_quiet()
        if _enabled():
            load_ip_cached(dataset, directory)  # the Release page's comparison lists the IP mechanisms too
        prepare_opening(dataset, model)
        prepare_tradeoffs(dataset, model)
    except Exception:  # the page computes it again and says why
        LOG.warning("%s/%s not prepared ahead", dataset, model, exc_info=True)


def opening_settings(dataset: str, model: str) -> Settings:
    """The settings a new session opens on for ``dataset/model``: the defaults with the dataset's R, as
    the sidebar sets them (:func:`privlens.ui.default_settings`,
    :func:`privlens.settings.settings_from_query`), so that what the warm-up prepares is what the pages
    ask for."""
    radius = Settings.radius
    try:
        from privcore.data import get_spec

        radius = float(get_spec(dataset).radius)
    except (ImportError, ValueError):
        pass
    return Settings(dataset=dataset, model=model, radius=radius)


def prepare_opening(dataset: str, model: str) -> None:
    """The opening view's live accuracy of every mechanism (the Release page's reading and comparison at
    the default settings on ``dataset/model``), computed by the functions those pages call, on the same
    process-wide model objects: the page's first visit then reads the memo. For a mechanism with a
    per-image certificate this starts its table (:mod:`privlens.evaluation`, a thread of its own)."""
    from privcore.mechanisms import registry
    from privlens import mechanism_text, pipelines

    s = opening_settings(dataset, model)
    for mech in registry.MECHANISMS:
        wait_for_quiet()
        if not _enabled():
            continue
        try:
            posthoc = mech.family == "posthoc"
            # a posthoc pipeline as the pages hold it (their cache can outlive the library's)
            target = (pipelines.load(dataset, model, pipelines.models_dir()) if posthoc
                      else mech.load(dataset=dataset, model=None, models_dir=pipelines.models_dir()))
            name = model if posthoc else str(target.model.name)
            mechanism_text.live_accuracy(mech, target, s, dataset=dataset, model=name)
        except Exception:  # the page computes it again and says why
            LOG.warning("%s on %s/%s not prepared ahead", mech.name, dataset, model, exc_info=True)


def prepare_tradeoffs(dataset: str, model: str) -> None:
    """The Trade-offs page's opening view on ``dataset/model``: the default mechanism's accuracy curve and
    its smallest-ε answer for the default accuracy target, computed by the functions that page calls
    (:mod:`privlens.tradeoff_view`, memoised per process)."""
    from privcore.mechanisms import registry
    from privlens import mechanism_view, tradeoff_view

    s = opening_settings(dataset, model)
    mech = registry.get(s.mechanism)
    at = mechanism_view.setting(mech, s)
    wait_for_quiet()
    if not _enabled():
        return
    try:
        tradeoff_view.line(mech, model, at, dataset=dataset)
        wait_for_quiet()
        bound = tradeoff_view.METRICS["accuracy"].default
        question = {"dataset": dataset, "metric": "accuracy", "bound": bound}
        # the page's own background job (one per question): a page asking meanwhile waits for this one
        while _enabled() and tradeoff_view.solve_soon(mech, model, at, wait_s=1.0, **question)[1]:
            pass
    except Exception:  # the page computes it again and says why
        LOG.warning("the Trade-offs view of %s/%s not prepared ahead", dataset, model, exc_info=True)


def prepare_attack(dataset: str, model: str) -> None:
    """The Attack page's opening reading on ``dataset/model``: the default mechanism's live attack at the
    default setting (:func:`privlens.attack_view.live_reading_soon`, the page's own job), waited for
    here so that the warm-up's next steps do not compete with it. Public inputs only (the test split and
    the shipped attacker)."""
    from privcore.mechanisms import registry
    from privlens import attack_view, pipelines

    s = opening_settings(dataset, model)
    mech = registry.get(s.mechanism)
    wait_for_quiet()
    if not _enabled():
        return
    try:
        target = pipelines.load(dataset, model, pipelines.models_dir()) if mech.family == "posthoc" else None
        job = attack_view.live_reading_job(mech, target, s, dataset=dataset, model=model)
        while _enabled() and not job.wait(1.0):
            pass
    except Exception:  # the page computes it again and says why
        LOG.warning("the Attack page's reading on %s/%s not prepared ahead", dataset, model, exc_info=True)


def prepare_baseline(dataset: str) -> None:
    """The Attack page's no-release baseline on ``dataset`` (:func:`privlens.baselines.no_release_baseline`;
    its first call imports the image metrics, torchmetrics and torchvision)."""
    from privlens.baselines import no_release_baseline

    wait_for_quiet()
    if not _enabled():
        return
    try:
        no_release_baseline(dataset)
    except Exception:  # the page computes it again and says why
        LOG.warning("the no-release baseline of %s not prepared ahead", dataset, exc_info=True)


def prepare_lipschitz(dataset: str, model: str) -> None:
    """The Lipschitz page's opening table on ``dataset/model``: the first shipped sample's certified radius
    table at the default R and the weights' global bound, into the page's process-wide memo
    (:func:`privlens.lipschitz_view.prepare_sample`). Public inputs only, never an upload."""
    from privlens import lipschitz_view, pipelines
    from privlens.deployment import image_cache

    wait_for_quiet()
    if not _enabled():
        return
    try:
        pipe = pipelines.load(dataset, model, pipelines.models_dir())
        lipschitz_view.prepare_sample(dataset, pipe, opening_settings(dataset, model).radius,
                                      cache=image_cache())
    except Exception:  # the page certifies it again and says why
        LOG.warning("the Lipschitz table of %s/%s not prepared ahead", dataset, model, exc_info=True)


def prepare_lab() -> None:
    """Load each shipped lab model and fit the data-blind baselines the Mechanism lab compares it with
    (:func:`privcore.lab.compare`, memoised per process; about a second the first time)."""
    try:
        from privcore.lab import available_models, compare, fresh_dataset, load_model

        models = available_models()
        data = fresh_dataset(seed=7)
        for _, row in models.drop_duplicates(["kind", "query", "loss"]).iterrows():
            wait_for_quiet()
            if not _enabled():
                return
            compare(load_model(str(row["path"])), data, epsilon=float(row["epsilon"]), loss=str(row["loss"]))
    except Exception:  # the page computes it again and says why
        LOG.warning("lab baselines not prepared ahead", exc_info=True)


@st.cache_resource(show_spinner=False)
def warm_up() -> threading.Thread:
    """Start the background preparation (module docstring) in a daemon thread, once per process; return
    the thread. ``PRIVLENS_WARM_UP=off`` (the test suite's many short-lived dashboards) leaves out all
    but the imports."""
    # privcore.lipschitz is imported here, in the script's thread (~0.3 s, once per process): its circular
    # modules (package __init__ → engine → patterns) are the ones that deadlocked
    try:
        from privcore.lipschitz.pattern_store import precompute_pattern_tables
    except ImportError:  # pragma: no cover - the pages that need it report the problem
        precompute_pattern_tables = None
    directory = models_dir()
    # the default model of each dataset, the default dataset first, fully resolved in the background:
    # their certifications then need no region LP (and their verified labels are stored: docs/TRUST.md)
    first = [f"{ds}/{names[0]}" for ds, names in _catalogue(directory).items() if names]

    def run() -> None:
        import_quietly(IMPORT_STEPS[0])
        import_quietly(IMPORT_STEPS[1])
        if first and _enabled():
            prepare_default(directory, *first[0].split("/", 1))
            # a step of its own, not an import step (a page starting meanwhile is not held back): it
            # imports the image metrics, which the import steps below then find loaded
            prepare_baseline(first[0].split("/", 1)[0])
            prepare_lipschitz(*first[0].split("/", 1))
        for step in IMPORT_STEPS[2:]:
            import_quietly(step)
        if first and _enabled():  # after the imports: the attack's metrics need torchmetrics
            prepare_attack(*first[0].split("/", 1))
        if not _enabled():
            return
        prepare_lab()
        if precompute_pattern_tables is None or not _enabled():
            return
        background.lower_priority()  # minutes of speculative work from here on: the pages come first
        try:
            precompute_pattern_tables(directory, resolve=first, pause=wait_for_quiet)
        except Exception:  # an accelerator only: certification builds what it needs
            LOG.warning("pattern tables not precomputed", exc_info=True)

    # at the process's priority up to the pattern tables: bounded work that the next page needs, which a
    # loaded machine would never give a thread at the lowest priority (the pages would then compute it
    # themselves); it pauses while a page runs (wait_for_quiet)
    return background.start(run, name="privlens-warm-up", yielding=False)


@st.cache_resource(show_spinner=False)
def import_early() -> threading.Thread:
    """Import :data:`EARLY_IMPORTS` in a daemon thread, once per process, without waiting for the script
    runs: started at the top of the first run, torch (about a second) is loaded while the browser draws
    the home page, instead of when the first page that needs a model asks for it; then torch's threads per
    operation are set for the process (:func:`torch_threads`)."""

    def run() -> None:
        _import_all(EARLY_IMPORTS)
        _limit_torch_threads()

    return background.start(run, name="privlens-early-imports", yielding=False)


def torch_threads() -> int:
    """:data:`TORCH_THREADS`, or ``$PRIVLENS_TORCH_THREADS`` when that is an integer ≥ 1."""
    text = os.environ.get("PRIVLENS_TORCH_THREADS", "").strip()
    return int(text) if text.isdigit() and int(text) >= 1 else TORCH_THREADS


def _limit_torch_threads() -> None:
    """Set torch's threads per operation for the whole process to :func:`torch_threads` (torch imported)."""
    try:
        import torch

        torch.set_num_threads(torch_threads())
    except Exception:  # an accelerator only: torch keeps its own default
        LOG.warning("torch's thread count not set", exc_info=True)
