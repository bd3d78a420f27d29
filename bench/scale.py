"""Scaling benchmark of batch certification across executors (not a test: it prints timings).

One job — exact local Lipschitz certificates L(f, B(z_i, r)) (ℓ∞ → ℓ1, ``certify_batch``,
``solver="auto"``) of a shipped digits obfuscator at ``n`` test embeddings — run in the same process
one executor after the other, each with a fresh temporary cache (so every point is solved and its
certificate written, as in a real job):

* local, 1 worker (in this process, after a 2-image warm-up job) and 2 workers (spawned
  processes; the pool start is part of each job, as it is for every call of ``certify_batch``);
* Ray with 1 and with 2 workers (a local runtime with that many CPUs; its start and one small
  warm-up job — worker processes importing torch/privcore — are reported separately and excluded
  from the timed job, as on a long-lived cluster).

Prints images/s per executor, the scaling efficiency throughput_k / (k · throughput_1) of each
executor kind, and checks that every executor produced identical certificates (wall time aside).
The machine's load average is printed before and after: on a shared machine the numbers move.

    .venv/bin/python bench/scale.py --quick    # 40 images, under ~2 min
    .venv/bin/python bench/scale.py            # 100 images
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privcore.executors import LocalExecutor, RayExecutor
from privcore.lipschitz import Certifier
from privcore.lipschitz.batch import certify_batch_detailed


def embeddings(dataset: str, variant: str, n: int) -> tuple[Any, np.ndarray, float]:
    """The obfuscator (CPU), ``n`` test embeddings and the card's R."""
    from privcore.data.registry import load_dataset
    from privcore.experiments.ptr_common import embed
    from privcore.lipschitz import as_network
    from privcore.models.pipeline import load_pipeline

    pipe = load_pipeline(dataset, variant, device="cpu")
    ds = load_dataset(dataset)
    z = embed(pipe, ds.x_test[:n])
    return as_network(pipe.obfuscator), z, float(pipe.radius)


def timed_job(net: Any, z: np.ndarray, radius: float, executor: Any) -> tuple[float, Any]:
    """Wall seconds of one certify_batch job with a fresh cache, and its outcome."""
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        out = certify_batch_detailed(net, z, radius, Certifier(time_limit=None, cache=tmp), executor=executor,
                                     progress=False)
        return time.perf_counter() - start, out


def main() -> None:
    """Run the benchmark and print one line per executor, then the efficiencies."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="40 images (default 100)")
    ap.add_argument("--n", type=int, default=0, help="images (overrides --quick)")
    ap.add_argument("--dataset", default="digits")
    ap.add_argument("--variant", default="ARL-C-N")
    ap.add_argument("--radius-multiple", type=float, default=4.0,
                    help="certify at this multiple of the card's R (4: a few tenths of a second per image)")
    ap.add_argument("--chunk-size", type=int, default=0, help="points per task (0: the executors' default)")
    args = ap.parse_args()
    n = args.n or (40 if args.quick else 100)
    chunk = args.chunk_size or None
    net, z, card_r = embeddings(args.dataset, args.variant, n)
    radius = card_r * args.radius_multiple
    print(f"job: {n} exact certificates, {args.dataset}/{args.variant} (layers "
          f"{[w.shape for w in net.weights]}), r = {args.radius_multiple:g}·R = {radius:g}, solver auto")
    print(f"machine: {os.cpu_count()} logical CPUs, load average before {os.getloadavg()}")
    rows: list[tuple[str, int, float, Any]] = []
    for workers in (1, 2):
        ex = LocalExecutor(workers=workers, chunk_size=chunk)
        # in this process: a warm-up job starts Gurobi's environment, as Ray's warm-up does on its workers
        warm = timed_job(net, z[:2], radius, ex)[0] if workers == 1 else 0.0
        secs, out = timed_job(net, z, radius, ex)
        rows.append(("local", workers, secs, out))
        note = f"warm-up job {warm:.1f} s not counted" if workers == 1 else "process pool start counted"
        print(f"  local  {workers} worker(s): {n / secs:6.2f} images/s  ({secs:.2f} s, {out.tasks} tasks; "
              f"{note})")
    for workers in (1, 2):
        start = time.perf_counter()
        with RayExecutor(num_cpus=workers, chunk_size=chunk) as ex:
            cpus = ex.parallelism  # starts the runtime
            assert cpus == workers, f"the Ray runtime has {cpus} CPUs, expected {workers}"
            started = time.perf_counter() - start
            warm, _ = timed_job(net, z[: 2 * workers], radius, ex)
            secs, out = timed_job(net, z, radius, ex)
        rows.append(("ray", workers, secs, out))
        print(f"  ray    {workers} worker(s): {n / secs:6.2f} images/s  ({secs:.2f} s, {out.tasks} tasks; "
              f"runtime start {started:.1f} s, warm-up job {warm:.1f} s not counted)")
    print(f"load average after {os.getloadavg()}")
    tput = {(kind, w): n / secs for kind, w, secs, _ in rows}
    for kind in ("local", "ray"):
        eff = tput[(kind, 2)] / (2 * tput[(kind, 1)])
        print(f"scaling efficiency {kind}: throughput_2 / (2 · throughput_1) = {eff:.2f}")
    print(f"ray / local throughput, 2 workers: {tput[('ray', 2)] / tput[('local', 2)]:.2f}")

    def strip(c: Any) -> dict:
        d = asdict(c)
        d.pop("seconds")
        return d

    ref = [strip(c) for c in rows[0][3].certificates]
    same = all([strip(c) for c in out.certificates] == ref for *_, out in rows)
    solvers = rows[0][3].solvers
    print(f"identical certificates across executors: {same}; solvers {solvers}; "
          f"failures {sum(len(out.failures) for *_, out in rows)}")
    if not same:
        raise SystemExit("certificates differ between executors")


if __name__ == "__main__":
    main()
