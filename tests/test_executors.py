"""Executors (issue 8) without Ray: the local executor's retries and failure reports, kill-and-resume
through the cache, progress numbers, the one place --executor is parsed, and Ray being optional.

The Ray executor's own tests are in tests/test_ray.py (they need the optional dependency)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from privcore.errors import CertificationError
from privcore.executors import (
    JobProgress,
    LocalExecutor,
    RayNotInstalledError,
    chunk_size_for,
    executor_from_options,
    run_points,
)
from privcore.lipschitz import Certifier, LipschitzCache, certify_batch, local_lipschitz
from privcore.lipschitz import batch as batch_mod
from privcore.lipschitz.batch import certify_batch_detailed
from tests._nets import random_net

REPO = Path(__file__).resolve().parents[1]


def fields(cert: Any) -> dict:
    """Everything a certificate says except its wall time."""
    d = asdict(cert)
    d.pop("seconds")
    return d


# --- picklable task functions for the spawned local workers ---------------------------------------


def square_unless_poison(shared: dict, chunk: list[int]) -> list[int]:
    """Squares; raises on ``shared['poison']`` (every attempt)."""
    if shared["poison"] in chunk:
        raise ValueError(f"poisoned item {shared['poison']}")
    return [x * x for x in chunk]


def die_once_per_chunk(shared: dict, chunk: list[int]) -> list[int]:
    """Kills its worker process the first time it sees a chunk (marker file), then succeeds;
    always kills it for ``shared['fatal']``."""
    if shared.get("fatal") in chunk:
        os._exit(3)
    marker = Path(shared["dir"]) / f"seen-{chunk[0]}"
    if not marker.exists():
        marker.touch()
        os._exit(3)
    return [x + 100 for x in chunk]


# --- progress ---------------------------------------------------------------------------------------


def test_job_progress_rate_and_eta_follow_their_formulas() -> None:
    p = JobProgress(description="x", tasks_done=3, tasks_total=10, points_done=40, points_total=100,
                    points_skipped=10, failed_points=2, elapsed_s=6.0)
    assert p.points_per_s == pytest.approx(30 / 6.0)  # cache hits are not throughput
    assert p.eta_s == pytest.approx(60 / 5.0)
    assert p.fraction == pytest.approx(0.4)
    assert p.describe() == "tasks 3/10 · 40/100 pts · 5 pt/s · ETA 12 s · 2 failed"
    fresh = JobProgress(description="x", tasks_done=0, tasks_total=4, points_done=0, points_total=8)
    assert fresh.eta_s is None and fresh.points_per_s == 0.0
    done = JobProgress(description="x", tasks_done=4, tasks_total=4, points_done=8, points_total=8,
                       elapsed_s=1)
    assert done.eta_s == 0.0 and done.fraction == 1.0


def test_chunk_size_default_and_override() -> None:
    assert chunk_size_for(100, 2) == 13  # ceil(100 / (4·2)): four tasks per worker
    assert chunk_size_for(10_000, 2) == 32  # capped: a task stays short
    assert chunk_size_for(3, 8) == 1
    assert chunk_size_for(100, 2, chunk_size=7) == 7
    with pytest.raises(ValueError, match="chunk_size"):
        chunk_size_for(10, 2, chunk_size=0)


def test_run_points_reports_progress_for_every_task_and_the_skipped_points() -> None:
    seen: list[JobProgress] = []
    out = run_points(square_unless_poison, list(range(10)), executor=LocalExecutor(workers=1, chunk_size=3),
                     shared={"poison": -1}, progress=seen.append, skipped=5)
    assert out.results == [x * x for x in range(10)] and out.failures == {} and out.tasks == 4
    assert [p.tasks_done for p in seen] == [0, 1, 2, 3, 4]
    assert [p.points_done for p in seen] == [5, 8, 11, 14, 15]
    assert all(p.points_total == 15 and p.tasks_total == 4 for p in seen)


# --- failures and retries, locally -------------------------------------------------------------------


def test_a_point_that_keeps_failing_is_isolated_and_reported_in_process() -> None:
    calls: list[list[int]] = []

    def fn(shared: dict, chunk: list[int]) -> list[int]:
        calls.append(list(chunk))
        return square_unless_poison(shared, chunk)

    out = run_points(fn, list(range(8)), executor=LocalExecutor(workers=1, chunk_size=4, max_retries=1),
                     shared={"poison": 5})
    assert out.failures == {5: "ValueError: poisoned item 5"}
    assert out.results == [0, 1, 4, 9, 16, None, 36, 49]  # nothing for the failing point
    # chunk [4..7] ran twice (one retry), then each of its points alone; 5 twice again
    assert calls.count([4, 5, 6, 7]) == 2 and calls.count([5]) == 2
    assert calls.count([4]) == calls.count([6]) == calls.count([7]) == 1 and calls.count([0, 1, 2, 3]) == 1


def test_a_transient_exception_is_retried_and_succeeds() -> None:
    attempts: dict[int, int] = {}

    def flaky(shared: Any, chunk: list[int]) -> list[int]:
        attempts[chunk[0]] = attempts.get(chunk[0], 0) + 1
        if attempts[chunk[0]] == 1:
            raise RuntimeError("transient")
        return chunk

    out = run_points(flaky, list(range(6)), executor=LocalExecutor(workers=1, chunk_size=2))
    assert out.results == list(range(6)) and out.failures == {}
    assert attempts == {0: 2, 2: 2, 4: 2}


def test_dead_local_workers_are_replaced_and_a_fatal_point_is_reported(tmp_path: Path) -> None:
    ex = LocalExecutor(workers=2, chunk_size=2, max_retries=1)
    shared = {"dir": str(tmp_path), "fatal": 5}
    out = run_points(die_once_per_chunk, list(range(8)), executor=ex, shared=shared)
    assert set(out.failures) == {5} and "died" in out.failures[5]
    assert out.results == [100, 101, 102, 103, 104, None, 106, 107]


def test_certify_batch_raises_listing_failed_points_after_caching_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    net = random_net(1, (4, 6, 3))
    centers = np.random.default_rng(1).standard_normal((5, 4))
    poison = centers[3].copy()
    real = batch_mod.local_lipschitz

    def failing(net: Any, c: np.ndarray, r: float, **kw: Any) -> Any:
        if np.array_equal(c, poison):
            raise RuntimeError("solver crashed")
        return real(net, c, r, **kw)

    monkeypatch.setattr(batch_mod, "local_lipschitz", failing)
    with pytest.raises(CertificationError, match=r"1 of 5 points .*indices \[3\].*solver crashed"):
        certify_batch(net, centers, 0.2, Certifier(time_limit=None, cache=tmp_path), workers=1,
                      progress=False)
    assert len(LipschitzCache(tmp_path)) == 4  # the others finished and are cached; 3 is not
    out = certify_batch_detailed(net, centers, 0.2, Certifier(time_limit=None, cache=tmp_path), workers=1,
                                 progress=False)
    assert list(out.failures) == [3] and out.certificates[3] is None
    assert out.n_cached == 4 and out.n_computed == 0
    assert all(c is not None and c.exact for i, c in enumerate(out.certificates) if i != 3)


def test_a_killed_job_resumes_from_the_cache_without_recomputing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    net = random_net(2, (4, 8, 3))
    centers = np.random.default_rng(2).standard_normal((9, 4))
    reference = certify_batch(net, centers, 0.25, workers=1, progress=False)
    calls: list[bytes] = []
    real = batch_mod.local_lipschitz

    def counting(net: Any, c: np.ndarray, r: float, **kw: Any) -> Any:
        calls.append(np.asarray(c).tobytes())
        return real(net, c, r, **kw)

    monkeypatch.setattr(batch_mod, "local_lipschitz", counting)

    class Killed(Exception):
        pass

    def kill_after_two_tasks(p: JobProgress) -> None:
        if p.tasks_done == 2:
            raise Killed

    ex = LocalExecutor(workers=1, chunk_size=3)
    with pytest.raises(Killed):
        certify_batch(net, centers, 0.25, Certifier(time_limit=None, cache=tmp_path), executor=ex,
                      progress=kill_after_two_tasks)
    assert len(calls) == 6 and len(LipschitzCache(tmp_path)) == 6
    calls.clear()
    out = certify_batch_detailed(net, centers, 0.25, Certifier(time_limit=None, cache=tmp_path), executor=ex,
                                 progress=False)
    assert calls == [c.tobytes() for c in centers[6:]]  # only the three unfinished points were solved
    assert (out.n_cached, out.n_computed, out.failures) == (6, 3, {})
    assert [fields(c) for c in out.certificates] == [fields(c) for c in reference]


def test_local_executor_on_two_processes_matches_in_process_exactly(tmp_path: Path) -> None:
    net = random_net(4, (5, 12, 4))  # 12 hidden neurons
    centers = np.random.default_rng(4).standard_normal((6, 5))
    one = certify_batch_detailed(net, centers, 0.3, Certifier(solver="highs", time_limit=None), workers=1,
                                 progress=False)
    two = certify_batch_detailed(net, centers, 0.3,
                                 Certifier(solver="highs", time_limit=None, cache=tmp_path),
                                 executor=LocalExecutor(workers=2, chunk_size=2), progress=False)
    assert [fields(c) for c in two.certificates] == [fields(c) for c in one.certificates]
    assert two.solvers == {"highs": 6} and two.tasks == 3 and two.executor == "local"
    assert two.workers and all({"host", "gurobi", "gurobi_size_limit"} <= set(w) for w in two.workers)
    direct = local_lipschitz(net, centers[0], 0.3, solver="highs")
    assert fields(two.certificates[0]) == {**fields(direct), "argmax": None}  # batches keep no ball point


def test_compute_phis_records_how_each_point_was_decided(tmp_path: Path) -> None:
    from privcore.experiments.ptr_common import compute_phis, compute_phis_detailed, ptr_setup
    from privcore.mechanisms import cached_phi

    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    f = torch.nn.Sequential(torch.nn.Linear(3, 6), torch.nn.ReLU(), torch.nn.Linear(6, 2)).double()
    z = np.random.default_rng(5).standard_normal((4, 3))
    setup = ptr_setup(radius=0.1, delta_p=3.0, epsilons=(1.0,), grid_steps=4)
    first = compute_phis_detailed(f, z, setup, workers=1, cache=tmp_path / "a")
    direct = [cached_phi(f, zi, certifier=Certifier(kind="exact"), cache=None, **setup.grid()) for zi in z]
    assert [asdict(p) for p in first.phis] == [asdict(p) for p in direct]
    assert first.failures == {} and first.errors == []
    for d in first.decided_by:
        assert d is not None and sum(d["decisions"].values()) >= 1
        assert d["solvers"] and "cache" not in d["solvers"]
    again = compute_phis_detailed(f, z, setup, workers=1, cache=tmp_path / "a")
    # a cached φ is used after one decision re-checks its pass at R* (docs/TRUST.md)
    assert all(d is not None and d["solvers"][0] == "cache" and sum(d["decisions"].values()) <= 1
               for d in again.decided_by)
    assert again.solvers["cache"] == 4
    phis, errors = compute_phis(f, z, setup, workers=1, cache=tmp_path / "a")
    assert [asdict(p) for p in phis] == [asdict(p) for p in direct] and errors == []


# --- the --executor option and Ray being optional ---------------------------------------------------


def test_executor_options_are_parsed_in_one_place() -> None:
    ex = executor_from_options("local", workers=3, chunk_size=5)
    assert isinstance(ex, LocalExecutor) and (ex.workers, ex.chunk_size) == (3, 5)
    with pytest.raises(ValueError, match="executor"):
        executor_from_options("dask")
    with pytest.raises(ValueError, match="address"):
        executor_from_options("local", address="10.0.0.1:6379")
    with pytest.raises(ValueError, match="workers"):
        LocalExecutor(workers=0)


def test_without_ray_local_works_and_ray_fails_naming_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(RayNotInstalledError, match=r"pip install -r requirements-ray\.txt"):
        executor_from_options("ray")
    net = random_net(6, (3, 5, 2))
    certs = certify_batch(net, np.zeros((3, 3)), 0.1, executor=executor_from_options("local", workers=1),
                          progress=False)
    assert len(certs) == 3 and all(c.exact for c in certs)
    from privcore.cli import app

    result = CliRunner().invoke(app, ["experiment", "table1", "--tiny", "--executor", "ray", "--no-progress"])
    assert result.exit_code == 2 and "requirements-ray.txt" in result.output
    result = CliRunner().invoke(app, ["train", "delta-p", "--executor", "ray", "--no-progress"])
    assert result.exit_code == 2 and "requirements-ray.txt" in result.output


def test_importing_privcore_never_imports_ray() -> None:
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "import privcore, privcore.cli, privcore.executors, privcore.lipschitz, privcore.train.delta_p\n"
        "import privcore.experiments.ptr_common\n"
        "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_inf_and_nan_free_progress_for_empty_jobs() -> None:
    out = run_points(square_unless_poison, [], executor=LocalExecutor(workers=2), shared={"poison": 0})
    assert out.results == [] and out.failures == {} and out.tasks == 0
    p = JobProgress(description="", tasks_done=0, tasks_total=0, points_done=0, points_total=0)
    assert p.fraction == 1.0 and p.eta_s == 0.0 and not math.isnan(p.points_per_s)


# --- scripts without a main guard (issue 19) ---------------------------------------------------------

_SCRIPT = """
import operator, sys
sys.path.insert(0, {root!r})
from privcore.executors import LocalExecutor, run_points

def work():
    ex = LocalExecutor(workers=2, chunk_size=2)
    print("done", run_points(operator.add, list(range(8)), executor=ex, shared=[]).results, flush=True)

def certify():
    import numpy as np
    import torch
    from privcore.lipschitz import Certifier, certify_batch
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    certs = certify_batch(net, np.zeros((4, 3)), 0.1, Certifier(kind="interval"), workers=2, progress=False)
    print("certified", len(certs), flush=True)

def isolated():
    ex = LocalExecutor(workers=2, chunk_size=1)
    list(ex.map_chunks(operator.add, [[1], [2]], shared=[], isolated=True))

{call}
"""


def _run_script(tmp_path: Path, call: str) -> Any:
    import subprocess
    import sys

    script = tmp_path / "batch.py"
    script.write_text(_SCRIPT.format(root=str(Path(__file__).resolve().parents[1]), call=call))
    cmd = [sys.executable, str(script)]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120), script


@pytest.mark.parametrize("guarded", [False, True])
def test_a_script_without_main_guard_runs_in_process_not_hanging(tmp_path: Path, guarded: bool) -> None:
    out, script = _run_script(tmp_path, 'if __name__ == "__main__":\n    work()' if guarded else "work()")
    assert out.returncode == 0, out.stderr[-2000:]
    # the script ran once: spawned children did not re-run it (they would print again, or hang)
    assert out.stdout.count("done [0, 1, 2, 3, 4, 5, 6, 7]") == 1
    warned = "without a main guard" in out.stderr and str(script) in out.stderr
    assert warned is not guarded, out.stderr[-2000:]


def test_certify_batch_with_a_certifier_from_an_unguarded_script(tmp_path: Path) -> None:
    out, _ = _run_script(tmp_path, "certify()")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("certified 4") == 1 and "without a main guard" in out.stderr


def test_isolated_work_from_an_unguarded_script_is_refused_with_the_fix(tmp_path: Path) -> None:
    out, script = _run_script(tmp_path, "isolated()")
    assert out.returncode == 1 and "RuntimeError: this work needs separate worker processes" in out.stderr
    assert f'if __name__ == "__main__":` in {script}' in out.stderr
