"""The engine and LipMIP's MILP as one portfolio: the cheaper first, or both at once.

:func:`portfolio_lipschitz` answers what :func:`~privcore.lipschitz.engine.local_lipschitz` answers,
L(f, B(center, radius)) with a certified bracket, from two peers: the engine (``solver="auto"``:
closed form, pattern enumeration, or the split step and the MILP) and LipMIP's MILP alone (Jordan &
Dimakis, NeurIPS 2020; Gurobi when it fits its licence, else HiGHS). :func:`predict_costs` predicts
each peer's seconds from the query:

* the engine: ``2^u`` box patterns (u unstable neurons) times the measured time of one exact
  Jacobian norm (timed here, so the machine's load at this moment is in it: on a stack of the box's
  patterns where norms are enumerated together, on the centre's pattern where each is a branch and
  bound), plus a fixed part (sampling, LPs); where the box is too wide to enumerate, the engine is the
  split step and the MILP, and is predicted as the MILP;
* the MILP: :func:`~privcore.lipschitz.milp_cost.milp_seconds`, exponential in its binaries and
  scaled by the machine's load.

Then either

* **sequential** (the default where fewer than two cores are idle): the peer predicted cheaper runs
  first, the other with all that is left of the time limit. Each peer's budget is ``b = max(MIN_BUDGET,
  BUDGET_FACTOR × its prediction)``; the first gets ``max(b_first, limit − b_second)`` (all the time the
  second is not predicted to need), and the whole limit where ``b_second`` exceeds it. Without a time
  limit they alternate, each budget ×4 per round. Overhead: when the faster peer is the one predicted
  cheaper and finishes within its budget, none beyond the timed norms; when the faster peer is the
  other, at most the first peer's budget. Or
* **race** (two idle cores, both predictions above ``RACE_MIN_SECONDS`` and within ``RACE_RATIO`` of
  each other, or ``race=True``): the MILP in a spawned process, the engine here; the first *exact*
  answer wins and the other is stopped (the process terminated; the engine at its next deadline
  check, :mod:`~privcore.lipschitz.deadline`). Overhead: the process start (about a second).

Soundness is each peer's own: every value is a certificate computed from the weights by
``local_lipschitz`` (here or in the spawned process, which is handed the weights and returns plain
numbers; its model hash, radius and norms are checked against the query's). A peer that runs out of
its budget contributes only its certified bracket; the answer is exact only when one peer's is.
Nothing is refused that the MILP would answer, since the MILP is always one of the two.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import threading
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from privcore.lipschitz.backends import gurobi_available
from privcore.lipschitz.ball import Ball
from privcore.lipschitz.blas import blas_threads, query_threads
from privcore.lipschitz.codes import to_bits
from privcore.lipschitz.deadline import cancel_on
from privcore.lipschitz.engine import Certificate, local_lipschitz
from privcore.lipschitz.lazy_patterns import lazy_applies
from privcore.lipschitz.milp_cost import cores, milp_binaries, milp_seconds
from privcore.lipschitz.patterns import MAX_PATTERNS, stable_masks
from privcore.validation import check_positive

__all__ = [
    "BUDGET_FACTOR",
    "MIN_BUDGET",
    "RACE_MIN_SECONDS",
    "RACE_RATIO",
    "CostEstimate",
    "portfolio_lipschitz",
    "predict_costs",
]

#: the first peer's budget is this multiple of its predicted seconds (at least MIN_BUDGET)
BUDGET_FACTOR = 2.0
#: the shortest first budget (seconds)
MIN_BUDGET = 0.25
#: a race starts a process (about a second): only where both peers are predicted to take longer
RACE_MIN_SECONDS = 2.0
#: ... and their predictions are this close (otherwise the prediction is trusted)
RACE_RATIO = 4.0
#: the engine's fixed part: sampling the ball, screening, a few LPs (seconds)
_ENGINE_FIXED = 0.005
#: exact norms the sampled lower bound evaluates besides the table (distinct patterns met)
_SAMPLED_NORMS = 8
#: patterns whose norms are timed together for the prediction, where norms are enumerated as a stack
_TIMED_STACK = 8


@dataclass(frozen=True, kw_only=True)
class CostEstimate:
    """Predicted seconds of each peer on one query, and what the prediction used: ``patterns`` the
    engine enumerates (0: too wide, the engine is the split step and the MILP), ``norm_seconds`` one
    exact Jacobian norm as timed, ``binaries`` of the MILP."""

    engine: float
    milp: float
    patterns: int
    norm_seconds: float
    binaries: int

    @property
    def engine_first(self) -> bool:
        """Is the engine predicted no dearer than the MILP (ties go to the engine, which ends in the
        MILP where it cannot enumerate)?"""
        return self.engine <= self.milp


def _norm_seconds(ball: Ball, patterns: int) -> float:
    """Seconds per exact Jacobian norm, timed here: on a stack of up to ``_TIMED_STACK`` of the box's
    patterns where the norms are enumerated together (one matrix product for the stack), else on the
    centre's pattern alone (a branch and bound per matrix)."""
    net = ball.net
    count = 1 if lazy_applies(net, ball.norms) else min(patterns, _TIMED_STACK)
    on, off = stable_masks(ball.fwd)
    free = np.flatnonzero(~(on | off))
    bits = np.repeat(on[None, :].astype(np.float64), count, axis=0)
    bits[:, free] = to_bits(np.arange(count, dtype=np.int64), free.size)
    jac = net.jacobians(np.zeros((count, net.in_dim)), net.split_pattern(bits))
    t0 = time.perf_counter()
    ball.norms.bracket(jac)
    return (time.perf_counter() - t0) / count


def predict_costs(ball: Ball) -> CostEstimate:
    """Each peer's predicted seconds on ``ball`` (module docstring); costs one exact norm (or a stack of
    up to ``_TIMED_STACK`` enumerated together)."""
    k = milp_binaries(ball)
    milp = milp_seconds(ball)
    u = ball.n_unstable
    if (1 << min(u, 62)) > MAX_PATTERNS:
        return CostEstimate(engine=milp, milp=milp, patterns=0, norm_seconds=0.0, binaries=k)
    patterns = 1 << u
    t = _norm_seconds(ball, patterns)
    engine = _ENGINE_FIXED + (patterns + _SAMPLED_NORMS) * t
    return CostEstimate(engine=engine, milp=milp, patterns=patterns, norm_seconds=t, binaries=k)


def _milp_solver() -> str:
    return "gurobi" if gurobi_available() else "highs"


def _idle_cores() -> float:
    return cores() - os.getloadavg()[0]


def _should_race(est: CostEstimate, race: bool | None) -> bool:
    if race is not None:
        return race and est.patterns > 0
    if est.patterns == 0 or _idle_cores() < 2.0:
        return False
    lo, hi = sorted((est.engine, est.milp))
    return lo >= RACE_MIN_SECONDS and hi <= RACE_RATIO * lo


def portfolio_lipschitz(
    net: Any,
    center: Any,
    radius: float,
    *,
    input_norm: str = "linf",
    output_norm: str = "l1",
    time_limit: float | None = None,
    threads: int | None = None,
    race: bool | None = None,
) -> Certificate:
    """L(f, B(center, radius)) from the cheaper of the engine and the MILP, or from both raced
    (module docstring). ``race``: None decides by the idle cores and the predictions, True races
    wherever the engine enumerates, False never races. ``time_limit`` bounds the whole query; on a
    time-out the certificate is ``exact=False`` with the tightest certified bracket either peer
    found (``status="time_limit"``). ``solver`` names the peer that answered."""
    start = time.perf_counter()
    if time_limit is not None:
        time_limit = check_positive("time_limit", time_limit)
    threads = query_threads(threads)
    ball = Ball.of(net, center, radius, input_norm=input_norm, output_norm=output_norm)
    kw = dict(threads=threads, **ball.norms.kwargs)
    if ball.n_unstable == 0:  # the closed form: nothing to choose
        return local_lipschitz(ball.net, ball.center, ball.radius, time_limit=time_limit, **kw)
    with blas_threads(threads):
        est = predict_costs(ball)
    milp_solver = _milp_solver()
    if _should_race(est, race):
        return _race(ball, milp_solver, time_limit, threads, start)
    peers = ["auto", milp_solver] if est.engine_first else [milp_solver, "auto"]
    preds = [est.engine, est.milp] if est.engine_first else [est.milp, est.engine]
    budgets = [max(MIN_BUDGET, BUDGET_FACTOR * p) for p in preds]
    found: list[Certificate] = []
    while True:
        for i, solver in enumerate(peers):
            left = None if time_limit is None else time_limit - (time.perf_counter() - start)
            if left is not None and left <= 0:
                return _bracket(ball, found, start)
            if left is None:
                budget = budgets[i]
            elif i == 1:
                budget = left
            elif budgets[1] > left:  # the second is not predicted to finish in any case
                budget = left
            else:  # leave the second peer what it is predicted to need, and no more
                budget = max(budgets[0], left - budgets[1])
            cert = local_lipschitz(ball.net, ball.center, ball.radius, solver=solver, time_limit=budget, **kw)
            if cert.exact:
                return _stamped(cert, start)
            found.append(cert)
        budgets = [4.0 * b for b in budgets]


def _stamped(cert: Certificate, start: float) -> Certificate:
    """``cert`` with the portfolio's own seconds (prediction and any peer that ran before)."""
    return replace(cert, seconds=time.perf_counter() - start)


def _bracket(ball: Ball, found: list[Certificate], start: float) -> Certificate:
    """Neither peer finished: the tightest certified bracket they found (``exact=False``)."""
    upper = min((c.upper for c in found), default=ball.interval)
    lower = min(max((c.lower for c in found), default=0.0), upper)
    best = min(found, key=lambda c: c.upper) if found else None
    return Certificate(upper=upper, lower=lower, exact=False, solver="portfolio", status="time_limit",
                       seconds=time.perf_counter() - start, certifier="exact", radius=ball.radius,
                       n_unstable=ball.n_unstable, n_variables=best.n_variables if best else 0,
                       n_constraints=best.n_constraints if best else 0, model_hash=ball.net.digest,
                       **ball.norms.kwargs)


# -- the race -------------------------------------------------------------------------------------

def _milp_worker(weights: list[np.ndarray], biases: list[np.ndarray], center: np.ndarray, radius: float,
                 norms: dict[str, str], solver: str, time_limit: float | None, conn: Any) -> None:
    """The MILP peer, in its own process: the certificate as JSON (plain numbers, no pickle back)."""
    from privcore.lipschitz.network import ReluNetwork

    net = ReluNetwork.from_arrays(weights, biases)
    cert = local_lipschitz(net, center, radius, solver=solver, time_limit=time_limit, threads=1, **norms)
    out = asdict(cert)
    out["argmax"] = None if cert.argmax is None else list(cert.argmax)
    conn.send_bytes(json.dumps(out).encode())
    conn.close()


def _from_worker(data: bytes, ball: Ball) -> Certificate | None:
    """The spawned peer's certificate, if it is one for this query (model, radius, norms)."""
    try:
        raw = json.loads(data.decode())
        raw["argmax"] = None if raw.get("argmax") is None else tuple(float(v) for v in raw["argmax"])
        cert = Certificate(**raw)
    except (ValueError, TypeError):
        return None
    same = (cert.model_hash == ball.net.digest and cert.radius == ball.radius
            and (cert.input_norm, cert.output_norm) == (ball.norms.input, ball.norms.output))
    return cert if same and cert.certifier == "exact" else None


def _race(ball: Ball, milp_solver: str, time_limit: float | None, threads: int, start: float) -> Certificate:
    """The MILP in a spawned process, the engine here; the first exact answer wins."""
    ctx = mp.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    args = ([np.array(w) for w in ball.net.weights], [np.array(b) for b in ball.net.biases], ball.center,
            ball.radius, ball.norms.kwargs, milp_solver, time_limit)
    proc = ctx.Process(target=_milp_worker, args=(*args, send), daemon=True)
    proc.start()
    send.close()
    stop = threading.Event()
    box: dict[str, Certificate | None] = {}

    def watch() -> None:
        try:
            data = receive.recv_bytes()
        except (EOFError, OSError):
            return
        box["milp"] = cert = _from_worker(data, ball)
        if cert is not None and cert.exact:
            stop.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        left = None if time_limit is None else max(1e-3, time_limit - (time.perf_counter() - start))
        with cancel_on(stop):
            engine = local_lipschitz(ball.net, ball.center, ball.radius, solver="auto", time_limit=left,
                                     threads=threads, **ball.norms.kwargs)
        if engine.exact:
            return _stamped(engine, start)
        left = None if time_limit is None else max(0.0, time_limit - (time.perf_counter() - start)) + 1.0
        watcher.join(left)
        milp = box.get("milp")
        if milp is not None and milp.exact:
            return _stamped(milp, start)
        return _bracket(ball, [c for c in (engine, milp) if c is not None], start)
    finally:
        if proc.is_alive():
            proc.terminate()
        proc.join(5.0)
        receive.close()
