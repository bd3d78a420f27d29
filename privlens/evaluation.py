"""The per-image certificates of live accuracy (PTR's φ table), computed in the background: pure Python.

A mechanism that needs a per-image certificate is scored from a table of them for the first
:data:`TABLE_IMAGES` test images (:func:`privcore.mechanisms.certify_evaluation`), which depends on the
model and on what :meth:`Mechanism.certificate_key` says (PTR: R and the grid), never on ε or δ. One
daemon thread per key computes it, once per process, one table at a time, and pauses between images
while a page runs (:func:`privlens.warmup.wait_for_quiet`): no page ever waits for it. :func:`job`
starts or finds it; a page shows its progress ("φ for k of n test images") and scores the images
certified so far, in steps of :data:`STEP` images so a reading does not change on every rerun.

The test images are public data, so their φ go to privcore's disk cache in every deployment (each row
read back is decided again before it is used); a user's image never enters this table.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Any

from privlens import background

__all__ = ["STEP", "TABLE_IMAGES", "Job", "job", "settle", "table_images"]

LOG = logging.getLogger("privlens")

#: test images of a certificate table: ±0.045 at 95 % or better, certified in a few minutes on two cores
#: (``$PRIVLENS_CERTIFIED_IMAGES`` sets another number: the test suite's few; 0 turns the tables off)
TABLE_IMAGES = 500
#: a partial table is scored in steps of this many images (and once complete)
STEP = 50


@dataclass(kw_only=True)
class Job:
    """The background computation of one certificate table: ``done`` of ``planned`` images so far,
    ``table`` the latest snapshot to score (a multiple of :data:`STEP` images, or the whole table),
    ``error`` why it stopped, if it did."""

    planned: int
    done: int = 0
    table: Any = None
    error: str | None = None
    started: bool = False
    finished: bool = False
    thread: threading.Thread | None = field(default=None, repr=False)

    def text(self, what: str) -> str:
        """"φ for 120 of 500 test images" (``what``: the certificate's name), with the error if any."""
        head = f"{what} for {self.done} of {self.planned} test images"
        if self.error is not None:
            return f"{head}: stopped ({self.error})"
        if not self.started:
            return head + ", waiting for another table to finish"
        return head + ("" if self.finished else ", computing in the background")


_JOBS: dict[tuple, Job] = {}
_LOCK = threading.Lock()
#: one table is computed at a time (two cores: more would only slow the pages and each other)
_ONE_AT_A_TIME = threading.Lock()


class _Stopped(Exception):
    """The interpreter is exiting: the table is left unfinished."""


def table_images() -> int:
    """:data:`TABLE_IMAGES`, or ``$PRIVLENS_CERTIFIED_IMAGES`` when that is an integer ≥ 0 (0: no tables)."""
    text = os.environ.get("PRIVLENS_CERTIFIED_IMAGES", "")
    return int(text) if text.isdigit() else TABLE_IMAGES


def job(mech: Any, target: Any, setting: Any, *, dataset: str, model: str,
        n: int | None = None) -> Job | None:
    """The job computing ``mech``'s certificate table for the first ``n`` (None: :func:`table_images`) test
    images of ``dataset/model`` at ``setting``, started if new; None for a mechanism that certifies nothing
    per image, or with the tables turned off (n = 0)."""
    n = table_images() if n is None else n
    cert_key = mech.certificate_key(target, setting)
    if cert_key is None or n <= 0:
        return None
    key = (mech.name, dataset, model, cert_key, n)
    with _LOCK:
        found = _JOBS.get(key)
        if found is not None:
            return found
        new = _JOBS[key] = Job(planned=n)
    # always a thread, also where background work is off (the test suite): a page never waits for it
    new.thread = background.start(lambda: _run(new, mech, target, setting, dataset, n),
                                  name=f"privlens-certificates-{mech.name}-{model}")
    return new


def settle(timeout: float) -> bool:
    """Wait (at most ``timeout`` seconds each) for every table started in this process; whether all are
    finished (for tests and benchmarks that must not see the background's work)."""
    with _LOCK:
        jobs = list(_JOBS.values())
    for j in jobs:
        if j.thread is not None:
            j.thread.join(timeout=timeout)
    return all(j.finished for j in jobs)


def _run(job: Job, mech: Any, target: Any, setting: Any, dataset: str, n: int) -> None:
    from privcore.mechanisms import certify_evaluation
    from privlens.warmup import wait_for_quiet

    def progress(table: Any) -> None:
        job.done = len(table)
        if len(table) % STEP == 0 or table.complete:
            job.table = table
        if background.exiting():
            raise _Stopped
        wait_for_quiet()

    try:
        with _ONE_AT_A_TIME:
            job.started = True
            job.table = certify_evaluation(mech, target, setting, dataset=dataset, n=n, progress=progress)
        job.done = len(job.table)
    except _Stopped:
        job.error = "the server is shutting down"
    except Exception as exc:  # shown on the page; the committed tables stay as the fallback
        LOG.warning("certificate table of %s on %s not computed", mech.name, dataset, exc_info=True)
        job.error = f"{type(exc).__name__}: {exc}"
    finally:
        job.finished = True
