"""What a global release costs beyond the obfuscator's forward pass, per image, in one process.

    .venv/bin/python bench/release_overhead.py              # default dataset and model, N = 2000
    .venv/bin/python bench/release_overhead.py -n 5000 --dataset digits --model ARL-C-N

Loads the pipeline as :mod:`bench.default_release` does, certifies G once (the first release, not
timed), then times, interleaved in rounds so that both see the same machine load:

* ``release``: :func:`privcore.api.core.release_embedding` (mechanism ``global``, seeded noise) on one
  embedding, N times;
* ``forward``: the obfuscator's torch forward pass f(z) on the same embedding, N times;
* ``as_network``: :func:`privcore.lipschitz.network.as_network` on the obfuscator, N times: the model's
  identity (digest and parse), which a global release asks for twice.

Prints the median over rounds of µs per call for each, the overhead (release − forward) and the
ratio release / forward, in CPU time of this process (``time.process_time``: less sensitive than the
wall clock to other processes on a shared machine) and in wall-clock time; torch runs on one thread.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=2000, help="calls of each kind (default 2000)")
    ap.add_argument("--rounds", type=int, default=10, help="rounds the calls are split into (default 10)")
    ap.add_argument("--dataset", default=None, help="dataset (default: the embedded default)")
    ap.add_argument("--model", default=None, help="obfuscator variant (default: the dataset's default)")
    ap.add_argument("--epsilon", type=float, default=2.0, help="ε of each release (default 2)")
    args = ap.parse_args(argv)

    import numpy as np
    import torch

    from privcore.api import _pipeline
    from privcore.api.core import release_embedding
    from privcore.defaults import DEFAULT_DATASET, default_model
    from privcore.lipschitz.network import as_network

    torch.set_num_threads(1)
    dataset = args.dataset or DEFAULT_DATASET
    model = args.model or default_model(dataset)
    pipe = _pipeline(dataset, model, None)
    z = np.random.default_rng(0).standard_normal(int(pipe.latent_dim)) * 0.5
    rng = np.random.default_rng(1)
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

    kinds = (("release", release), ("forward", forward), ("as_network", identity))
    per_round = max(1, args.n // args.rounds)
    clocks = {"cpu": time.process_time, "wall": time.perf_counter}
    times: dict[tuple[str, str], list[float]] = {(c, name): [] for c in clocks for name, _ in kinds}
    for _, fn in kinds:  # warm-up
        for _ in range(50):
            fn()
    for _ in range(args.rounds):
        for name, fn in kinds:
            start = {c: clock() for c, clock in clocks.items()}
            for _ in range(per_round):
                fn()
            for c, clock in clocks.items():
                times[c, name].append((clock() - start[c]) / per_round * 1e6)
    print(f"{dataset}/{model}: first release (certifies G) {first * 1e3:.1f} ms; "
          f"{per_round * args.rounds} calls each, median of {args.rounds} rounds, µs per call")
    for c in clocks:
        rel, fwd, ident = (statistics.median(times[c, name]) for name in ("release", "forward", "as_network"))
        print(f"{c:4s}  release {rel:7.1f}  forward {fwd:6.1f}  overhead {rel - fwd:7.1f}  "
              f"ratio {rel / fwd:5.1f}  as_network {ident:6.1f} (twice per release)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
