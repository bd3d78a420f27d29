"""The Ray executor (issue 8) on a local Ray runtime with two CPUs, started once for this module:
certificates identical to the local executor's (solver included, also through the cache), a killed
job resumes from the cache, a point that keeps failing is reported and nothing is returned for it,
transient failures and dead workers are retried.

Needs the optional dependency (``pip install -r requirements-ray.txt``); skipped without it. Ray's
start-up took 4-5 s of this module's ~30 s on the loaded two-core development machine."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from privcore.executors import JobProgress, LocalExecutor, RayExecutor, run_points  # noqa: E402
from privcore.lipschitz import Certifier, LipschitzCache, certify_batch  # noqa: E402
from privcore.lipschitz.batch import _certify_chunk, _Job, certify_batch_detailed  # noqa: E402
from tests._nets import random_net  # noqa: E402


@pytest.fixture(scope="module")
def executor() -> Iterator[RayExecutor]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, address="local",
             runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}})
    # this module's task functions travel by value (Ray workers cannot import tests/)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        yield RayExecutor(max_retries=2)
    finally:
        ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
        ray.shutdown()


def fields(cert: Any) -> dict:
    """Everything a certificate says except its wall time."""
    d = asdict(cert)
    d.pop("seconds")
    return d


def certify_unless_poison(job: tuple[_Job, bytes], chunk: list[np.ndarray]) -> Any:
    """The real certification task, except that it raises on every attempt for one centre."""
    inner, poison = job
    if any(c.tobytes() == poison for c in chunk):
        raise RuntimeError("solver crashed on this point")
    return _certify_chunk(inner, chunk)


def fail_first_attempt(shared: dict, chunk: list[int]) -> list[int]:
    """Raises (``how="raise"``) or kills its worker (``how="die"``) the first time it sees a chunk."""
    marker = Path(shared["dir"]) / f"{shared['how']}-{chunk[0]}"
    if not marker.exists():
        marker.touch()
        if shared["how"] == "die":
            os._exit(3)
        raise ConnectionError("transient")
    return [x * 10 for x in chunk]


@pytest.mark.parametrize(
    ("dims", "solver", "radius"),
    [((4, 8, 3), "auto", 0.4), ((5, 12, 10, 4), "auto", 0.4), ((5, 12, 10, 4), "highs", 0.15)],
    ids=["enumeration", "auto-milp", "highs"],
)
def test_certificates_through_ray_are_the_local_executors(
    executor: RayExecutor, dims: tuple[int, ...], solver: str, radius: float, tmp_path: Path
) -> None:
    net = random_net(7, dims)
    centers = np.random.default_rng(7).standard_normal((8, dims[0]))
    local = certify_batch_detailed(net, centers, radius, Certifier(solver=solver, time_limit=None),
                                   executor=LocalExecutor(workers=1), progress=False)
    seen: list[JobProgress] = []
    on_disk = Certifier(solver=solver, time_limit=None, cache=tmp_path)
    remote = certify_batch_detailed(net, centers, radius, on_disk, executor=executor, progress=seen.append)
    assert [fields(c) for c in remote.certificates] == [fields(c) for c in local.certificates]
    assert remote.executor == "ray" and remote.failures == {} and remote.n_computed == 8
    assert remote.solvers == local.solvers and sum(remote.solvers.values()) == 8
    if solver == "highs":
        assert remote.solvers == {"highs": 8}
    # the solver that produced each certificate survives the cache, read by the driver ...
    cached = certify_batch_detailed(net, centers, radius, on_disk, executor=executor, progress=False)
    assert cached.n_cached == 8 and cached.n_computed == 0 and cached.tasks == 0
    assert [asdict(c) for c in cached.certificates] == [asdict(c) for c in remote.certificates]
    # ... and by the workers (the driver skips nothing when it has no cache of its own to read)
    job = _Job(net=net, radius=radius, kw=dict(certifier="exact", solver=solver, time_limit=None,
                                               input_norm="linf", output_norm="l1", threads=1),
               cache=LipschitzCache(tmp_path))
    out = run_points(_certify_chunk, list(centers), executor=executor, shared=job)
    assert [p.computed for p in out.results] == [False] * 8
    assert [asdict(p.certificate) for p in out.results] == [asdict(c) for c in remote.certificates]
    assert seen[-1].points_done == seen[-1].points_total == 8 and seen[-1].tasks_done == seen[-1].tasks_total
    assert all(w["host"] for w in remote.workers)


def test_a_killed_ray_job_resumes_from_the_cache(executor: RayExecutor, tmp_path: Path) -> None:
    net = random_net(8, (5, 12, 10, 4))
    centers = np.random.default_rng(8).standard_normal((16, 5))
    reference = certify_batch(net, centers, 0.4, workers=1, progress=False)
    small = RayExecutor(max_retries=2, chunk_size=1)

    class Killed(Exception):
        pass

    def kill(p: JobProgress) -> None:
        if p.tasks_done == 3:
            raise Killed

    with pytest.raises(Killed):
        certify_batch(net, centers, 0.4, Certifier(time_limit=None, cache=tmp_path), executor=small,
                      progress=kill)
    done_before = len(LipschitzCache(tmp_path))  # tasks running when killed may have finished
    assert 3 <= done_before < 16
    out = certify_batch_detailed(net, centers, 0.4, Certifier(time_limit=None, cache=tmp_path),
                                 executor=small, progress=False)
    assert out.failures == {} and out.n_cached == done_before
    assert out.n_computed == 16 - done_before  # solver calls of the second run: only what was missing
    assert [fields(c) for c in out.certificates] == [fields(c) for c in reference]


def test_a_point_that_keeps_failing_on_ray_is_reported_never_returned(
    executor: RayExecutor, tmp_path: Path
) -> None:
    net = random_net(9, (4, 8, 3))
    centers = np.random.default_rng(9).standard_normal((6, 4))
    job = _Job(net=net, radius=0.2, kw=dict(certifier="exact", solver="auto", time_limit=None,
                                            input_norm="linf", output_norm="l1", threads=1),
               cache=LipschitzCache(tmp_path))
    ex = RayExecutor(max_retries=1, chunk_size=3)
    out = run_points(certify_unless_poison, list(centers), executor=ex, shared=(job, centers[4].tobytes()))
    assert list(out.failures) == [4] and "RuntimeError: solver crashed on this point" in out.failures[4]
    assert out.results[4] is None
    assert all(out.results[i] is not None and out.results[i].certificate.exact for i in (0, 1, 2, 3, 5))
    assert len(LipschitzCache(tmp_path)) == 5  # the point's neighbours finished and were cached


@pytest.mark.parametrize("how", ["raise", "die"])
def test_transient_failures_and_dead_workers_are_retried_by_ray(
    executor: RayExecutor, how: str, tmp_path: Path
) -> None:
    out = run_points(fail_first_attempt, list(range(4)), executor=RayExecutor(max_retries=2, chunk_size=2),
                     shared={"dir": str(tmp_path), "how": how})
    assert out.results == [0, 10, 20, 30] and out.failures == {} and out.tasks == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{how}-0", f"{how}-2"]  # each chunk failed once


def test_compute_phis_through_ray_matches_local(executor: RayExecutor, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from privcore.experiments.ptr_common import compute_phis_detailed, ptr_setup

    torch.manual_seed(1)
    f = torch.nn.Sequential(torch.nn.Linear(3, 6), torch.nn.ReLU(), torch.nn.Linear(6, 2)).double()
    z = np.random.default_rng(10).standard_normal((5, 3))
    setup = ptr_setup(radius=0.1, delta_p=3.0, epsilons=(1.0,), grid_steps=4)
    local = compute_phis_detailed(f, z, setup, workers=1, cache=tmp_path / "local")
    remote = compute_phis_detailed(f, z, setup, executor=executor, cache=tmp_path / "ray")
    assert [asdict(p) for p in remote.phis] == [asdict(p) for p in local.phis]
    assert [d["solvers"] for d in remote.decided_by] == [d["solvers"] for d in local.decided_by]
    assert remote.executor == "ray" and remote.failures == {}
