"""What a global release costs beyond the obfuscator's forward pass, per image: this checkout, and
optionally a git revision side by side in the same run.

    .venv/bin/python bench/release_overhead.py                  # this checkout, N = 2000
    .venv/bin/python bench/release_overhead.py --rev main       # this checkout against main, side by side
    .venv/bin/python bench/release_overhead.py -n 5000 --dataset digits --model ARL-C-N --seeded

Each tree runs in its own worker process (importing its own ``privcore``, checked), which loads the
pipeline as :mod:`bench.default_release` does, certifies G once (the first release, not timed) and
then, round by round as the parent asks, times N/rounds calls of each kind:

* ``release``: :func:`privcore.api.core.release_embedding` (mechanism ``global``) on one embedding:
  the OS CSPRNG as a release draws it (``--seeded``: a seeded numpy generator, tests' way);
* ``forward``: the obfuscator's torch forward pass f(z) on the same embedding;
* ``as_network``: :func:`privcore.lipschitz.network.as_network` on the obfuscator (the check that its
  weights are those G was certified for).

Rounds alternate the trees (A B, then B A, …) so that both see the same machine load. Prints per tree
the median over rounds of µs per call in CPU time of the worker (``time.process_time``: less sensitive
than the wall clock to other processes on a shared machine) and in wall-clock time, the overhead
(release − forward), the ratio release / forward, the ratios this / base, and the 1-minute load average
before and after; then per tree the overhead of each round (release − forward in that round), its median
and a distribution-free 95 % interval of that median (order statistics). torch runs on one thread. No
timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("release", "forward", "as_network")
CLOCKS = ("cpu", "wall")


def worker(args: argparse.Namespace) -> int:
    """Serve rounds: read ``round`` lines on stdin, answer one JSON line of µs per call per clock and kind."""
    import numpy as np
    import torch

    import privcore
    from privcore.api import _pipeline
    from privcore.api.core import release_embedding
    from privcore.defaults import DEFAULT_DATASET, default_model
    from privcore.lipschitz.network import as_network

    torch.set_num_threads(1)
    dataset = args.dataset or DEFAULT_DATASET
    model = args.model or default_model(dataset)
    pipe = _pipeline(dataset, model, None)
    z = np.random.default_rng(0).standard_normal(int(pipe.latent_dim)) * 0.5
    rng = np.random.default_rng(1) if args.seeded else None
    first = time.perf_counter()
    release_embedding(pipe, z, epsilon=args.epsilon, mechanism="global", rng=rng)  # certifies G
    first = time.perf_counter() - first
    zt = torch.as_tensor(z, dtype=torch.float32)[None]

    def release() -> None:
        release_embedding(pipe, z, epsilon=args.epsilon, mechanism="global", rng=rng)

    def forward() -> None:
        with torch.no_grad():
            pipe.obfuscator(zt)

    def identity() -> None:
        as_network(pipe.obfuscator)

    fns = {"release": release, "forward": forward, "as_network": identity}
    for fn in fns.values():  # warm-up
        for _ in range(50):
            fn()
    print(json.dumps({"privcore": privcore.__file__, "label": f"{dataset}/{model}", "first_ms": first * 1e3}),
          flush=True)
    for line in sys.stdin:
        per_round = int(line.split()[1])
        out: dict[str, float] = {}
        for name, fn in fns.items():
            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(per_round):
                fn()
            out[f"cpu {name}"] = (time.process_time() - cpu) / per_round * 1e6
            out[f"wall {name}"] = (time.perf_counter() - wall) / per_round * 1e6
        print(json.dumps(out), flush=True)
    return 0


def _start(tree: Path, args: argparse.Namespace) -> tuple[subprocess.Popen, dict]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--epsilon", str(args.epsilon)]
    cmd += ["--dataset", args.dataset] if args.dataset else []
    cmd += ["--model", args.model] if args.model else []
    cmd += ["--seeded"] if args.seeded else []
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("PRIVCORE_MODELS_DIR", None)  # each tree's own shipped models
    proc = subprocess.Popen(cmd, cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    hello = json.loads(proc.stdout.readline())
    where = Path(hello["privcore"]).resolve()
    if tree.resolve() not in where.parents:
        raise SystemExit(f"{tree}: the worker imports privcore from {where}, not from the tree")
    return proc, hello


def _round(proc: subprocess.Popen, per_round: int) -> dict[str, float]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(f"round {per_round}\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def _worktree(rev: str, base: Path) -> None:
    subprocess.run(["git", "worktree", "add", "--quiet", "--detach", str(base), rev], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _median_interval(values: list[float]) -> tuple[float, float]:
    """A distribution-free interval for the median of sorted ``values``: order statistics whose ranks
    cover it with probability ≥ 95 % (binomial(n, ½)); the whole range when n is too small for that."""
    from scipy.stats import binom

    n = len(values)
    k = int(binom.ppf(0.025, n, 0.5))  # P(Binomial ≤ k − 1) ≤ 2.5 %: the k-th value from each end
    if k < 1:
        return values[0], values[-1]
    return values[k - 1], values[n - k]


def _report(label: str, times: dict[str, dict[str, list[float]]], trees: dict[str, Path]) -> None:
    med = {t: {k: statistics.median(v) for k, v in times[t].items()} for t in trees}
    print(f"{'tree':<6} {'clock':<5} {'release':>9} {'forward':>8} {'overhead':>9} {'ratio':>6} "
          f"{'as_network':>11}   (µs per call, median of rounds)")
    for t in trees:
        for c in CLOCKS:
            rel, fwd, ident = (med[t][f"{c} {k}"] for k in KINDS)
            print(f"{t:<6} {c:<5} {rel:>9.1f} {fwd:>8.1f} {rel - fwd:>9.1f} {rel / fwd:>6.1f} {ident:>11.1f}")
    for t in trees:
        parts = []
        for c in CLOCKS:
            per_round = sorted(r - f for r, f in zip(times[t][f"{c} release"], times[t][f"{c} forward"],
                                                    strict=True))
            lo, hi = _median_interval(per_round)
            parts.append(f"{c} {statistics.median(per_round):.1f} [{lo:.1f}, {hi:.1f}]")
        print(f"{t:<6} overhead per round, median [95 % interval of the median]: {'; '.join(parts)} "
              f"(n = {len(per_round)} rounds)")
    if "base" in trees:
        for c in CLOCKS:
            over = {t: med[t][f"{c} release"] - med[t][f"{c} forward"] for t in trees}
            print(f"this/base {c}: release {med['this'][f'{c} release'] / med['base'][f'{c} release']:.3f}, "
                  f"overhead {over['this'] / over['base']:.3f}, forward "
                  f"{med['this'][f'{c} forward'] / med['base'][f'{c} forward']:.3f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=2000, help="calls of each kind per tree (default 2000)")
    ap.add_argument("--rounds", type=int, default=10, help="rounds the calls are split into (default 10)")
    ap.add_argument("--dataset", default=None, help="dataset (default: the embedded default)")
    ap.add_argument("--model", default=None, help="obfuscator variant (default: the dataset's default)")
    ap.add_argument("--epsilon", type=float, default=2.0, help="ε of each release (default 2)")
    ap.add_argument("--seeded", action="store_true", help="seeded noise (tests' way), not the OS CSPRNG")
    ap.add_argument("--rev", default=None, help="a git revision to time side by side (a detached worktree)")
    ap.add_argument("--base", type=Path, default=Path("/tmp/release-overhead-base"), help="its checkout")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)
    trees = {"this": ROOT}
    made = False
    if args.rev is not None:
        if not (args.base / "privcore").is_dir():
            _worktree(args.rev, args.base)
            made = True
        trees["base"] = args.base
    procs: dict[str, subprocess.Popen] = {}
    try:
        hello = {}
        for t, tree in trees.items():
            procs[t], hello[t] = _start(tree, args)
        per_round = max(1, args.n // args.rounds)
        times = {t: {f"{c} {k}": [] for c in CLOCKS for k in KINDS} for t in trees}
        before = os.getloadavg()[0]
        for r in range(args.rounds):
            for t in (list(trees) if r % 2 == 0 else list(reversed(trees))):
                for key, value in _round(procs[t], per_round).items():
                    times[t][key].append(value)
        after = os.getloadavg()[0]
    finally:
        for proc in procs.values():
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait()
        if made:
            subprocess.run(["git", "worktree", "remove", "--force", str(args.base)], cwd=ROOT, check=False)
            shutil.rmtree(args.base, ignore_errors=True)
    label = hello["this"]["label"]
    firsts = ", ".join(f"{t} {hello[t]['first_ms']:.0f} ms" for t in trees)
    print(f"{label}: {per_round * args.rounds} calls of each kind per tree, {args.rounds} alternating "
          f"rounds; noise {'seeded' if args.seeded else 'OS CSPRNG'}; first release (certifies G): {firsts}")
    print(f"this = {ROOT}" + (f"; base = {args.rev} ({args.base})" if args.rev else "")
          + f"; {os.cpu_count()} CPUs, 1-min load average {before:.2f} before, {after:.2f} after")
    _report(label, times, trees)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
