"""Live readings side by side: each simulating mechanism's live accuracy at a setting not seen before, and
the Trade-offs solver, on two trees (not a test: it prints).

    nice -n 5 .venv/bin/python bench/live_readings.py --ref 12d1799 --rounds 3

Each pass is a fresh process on one tree (``--ref``: a ``git worktree`` of that revision, A; the working
tree, B), interleaved A, B, A, B …, with torch's threads set as that tree's dashboard server sets them
(``privlens.warmup.torch_threads`` where the tree has it, else torch's default). In a pass, on the
default dataset and model at the opening setting: the test split's inputs are prepared once (untimed),
every mechanism that needs no per-image certificate is read at total ε = 4.3 (n = 2 000 test images ×
3 draws, as the Release page's comparison rows), then again at 4.7 (the next new setting: what a
step of the sidebar asks), and ``smallest_epsilon`` answers accuracy ≥ 0.9 for the default mechanism
(the Trade-offs page's opening question, up to 36 readings). The table gives the medians, B/A and n,
with the 1-minute load average at the start and end: the machine is shared, so only ratios measured
side by side in one run mean anything.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ab import ab_trees, print_medians  # noqa: E402  (bench/ab.py: the A/B table)

PASS = r"""
import dataclasses, json, time
import torch
try:
    from privlens.warmup import torch_threads
    torch.set_num_threads(torch_threads())
except ImportError:
    pass
from privcore.defaults import DEFAULT_DATASET, default_model
from privcore.mechanisms import accuracy_metric, live_accuracy, registry, smallest_epsilon
from privcore.mechanisms.utility import evaluation_inputs
from privlens import pipelines
from privlens import mechanism_view as mv
from privlens.settings import Settings

dataset = DEFAULT_DATASET
model = default_model(dataset)
s = Settings(dataset=dataset, model=model)
out = {"threads": torch.get_num_threads()}
for mech in registry.MECHANISMS:
    if mech.needs_certificate:
        continue
    post = mech.family == "posthoc"
    target = (pipelines.load(dataset, model, pipelines.models_dir()) if post
              else mech.load(dataset=dataset, model=None, models_dir=pipelines.models_dir()))
    evaluation_inputs(mech, target, dataset, n=2000)
    at = mv.setting(mech, s)
    for i, eps in enumerate((4.3, 4.7)):
        t = time.perf_counter()
        live_accuracy(mech, target, dataclasses.replace(at, epsilon=eps), dataset=dataset, model=model,
                      n=2000)
        out[f"{mech.name}, {'first' if i == 0 else 'next'} new ε"] = time.perf_counter() - t
mech = registry.get(s.mechanism)
target = pipelines.load(dataset, model, pipelines.models_dir())
metric = accuracy_metric(mech, target, mv.setting(mech, s), dataset=dataset, model=model, n=2000)
t = time.perf_counter()
smallest_epsilon(metric, 0.9, eps_min=0.1, eps_max=100.0)
out["Trade-offs solver (accuracy ≥ 0.9)"] = time.perf_counter() - t
print("RESULT " + json.dumps(out))
"""


def load1() -> float:
    """The 1-minute load average."""
    return float(Path("/proc/loadavg").read_text().split()[0])


def one_pass(root: Path) -> dict[str, float]:
    """One fresh process on ``root``: the seconds of each reading (module docstring)."""
    proc = subprocess.run([sys.executable, "-c", PASS], cwd=root, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(root)}, timeout=1800)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"pass on {root} failed:\n{proc.stderr[-2000:]}")
    return json.loads(line[len("RESULT "):])


def main() -> None:
    """Run the passes (interleaved A/B with ``--ref``) and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", help="git revision to compare with (A); B is the current tree")
    parser.add_argument("--rounds", type=int, default=3, help="passes per tree")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="privlens-live-bench-"))
    with ab_trees(args.ref, ROOT, work) as trees:
        results: dict[str, dict[str, list[float]]] = {label: {} for label, _ in trees}
        load_start = load1()
        for r in range(args.rounds):
            for label, root in trees:
                res = one_pass(root)
                print(f"round {r + 1}/{args.rounds}, {label}, load {load1():.2f}, torch threads "
                      f"{res.pop('threads')}", flush=True)
                for name, seconds in res.items():
                    results[label].setdefault(name, []).append(seconds)
        load_end = load1()
    labels = [label for label, _ in trees]
    names = list(dict.fromkeys(n for label in labels for n in results[label]))
    print(f"\nload average (1 min): start {load_start:.2f}, end {load_end:.2f}")
    print_medians({label: results[label] for label in labels}, names, first="reading", width=42)

if __name__ == "__main__":
    main()
