"""Dashboard speed: an ε/δ-only rerun of the Release page against the first certification of the image.

    .venv/bin/python bench/dashboard.py [--repeats 20] [--dataset digits] [--model ARL-C-N]

Measured side by side in one run, on a fresh φ cache (so the first certification really solves):

1. through Streamlit's AppTest (the real app.py and Release page): the server time of the run that
   certifies a sample image, then of ``--repeats`` runs that only move ε or δ (app.py records its own
   run time in the session); the number of Lipschitz decisions made during those reruns is counted
   and must be 0;
2. by direct calls: ``cached_phi`` (cold) against ``propose_test_release(..., phi=φ)``.

Prints both, the medians and the ratios. The target is an ε/δ rerun under 100 ms of server time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _entry(folder: Path) -> str:
    """An AppTest entry that runs app.py from a folder without pages/ (see tests/_entry/run_app.py)."""
    path = folder / "run_app.py"
    path.write_text(f"import runpy\nrunpy.run_path({str(ROOT / 'app.py')!r}, run_name='__main__')\n")
    return str(path)


def main() -> None:
    """Run both measurements and print them with their ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--model", default="ARL-C-N")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="privlens-bench-"))
    os.environ["PRIVLENS_CACHE_DIR"] = str(tmp / "phi-cache")

    from streamlit.testing.v1 import AppTest

    from privcore.lipschitz.certifier import Certifier
    from privcore.mechanisms import propose_test_release
    from privcore.mechanisms.phi_cache import cached_phi
    from privlens import pipelines, ui, warmup
    from privlens.image import samples
    from privlens.settings import DELTA_GRID, EPSILON_GRID

    decisions = {"n": 0}
    real_decide = Certifier.decide

    def counting_decide(self, *a, **k):
        decisions["n"] += 1
        return real_decide(self, *a, **k)

    Certifier.decide = counting_decide  # type: ignore[method-assign]

    # ---------------------------------------------------------------- 1. through the app
    query = {"dataset": args.dataset, "model": args.model, "mech": "PTR", "eps": "1.0", "delta": "0.05"}
    at = AppTest.from_file(_entry(tmp), default_timeout=600)
    at.query_params.update(query)
    at.run()  # home page; loads nothing heavy
    at.switch_page(str(ROOT / "pages" / "release.py"))
    t0 = time.perf_counter()
    at.run()
    first_wall = time.perf_counter() - t0
    if at.exception:
        raise SystemExit(f"the Release page failed: {[e.value for e in at.exception]}")
    first_server = float(at.session_state[ui.RUN_TIME_KEY])
    first_decisions = decisions["n"]
    if first_decisions == 0:
        raise SystemExit("the first run made no Lipschitz decision: the φ cache was not fresh")
    # warm: let the background import of slow modules finish (it competes for the CPU), and one ε
    # move before timing (first noise plan, first attacker call)
    warmup.warm_up().join(timeout=300)
    at.select_slider(key="w_epsilon").set_value(2.0).run()
    decisions["n"] = 0
    eps_values = [e for e in EPSILON_GRID if e >= 0.5]
    delta_values = [d for d in DELTA_GRID if d >= 1e-6]
    server, wall = [], []
    for i in range(args.repeats):
        if i % 2 == 0:
            widget, value = "w_epsilon", eps_values[(i // 2) % len(eps_values)]
        else:
            widget, value = "w_delta", delta_values[(i // 2) % len(delta_values)]
        t0 = time.perf_counter()
        at.select_slider(key=widget).set_value(value).run()
        wall.append(time.perf_counter() - t0)
        server.append(float(at.session_state[ui.RUN_TIME_KEY]))
        if at.exception:
            raise SystemExit(f"rerun failed: {[e.value for e in at.exception]}")
    rerun_decisions = decisions["n"]

    # ---------------------------------------------------------------- 2. direct calls
    pipe = pipelines._load(args.dataset, args.model, pipelines.models_dir())
    sample = samples(args.dataset)[0]  # the image the Release page certified above
    from privcore.inputs.images import load_image
    from privcore.mechanisms import ptr_search_range
    from privlens.mechanism_view import DELTA_MIN, EPSILON_MIN

    x = load_image(sample.data(), target_shape=pipe.image_shape)
    z = pipe.embed(x).double().numpy()
    radius = float(pipe.radius)
    r_max, tol = ptr_search_range(radius, epsilon_min=EPSILON_MIN, delta_min=DELTA_MIN)
    kw = dict(radius=radius, delta_p=float(pipe.proposed_delta_p), r_max=r_max, tol=tol)
    t0 = time.perf_counter()
    cache = str(tmp / "direct-cache")  # cold again
    phi = cached_phi(pipe.obfuscator, z, certifier=Certifier(kind="exact"), cache=cache, **kw)
    phi_seconds = time.perf_counter() - t0
    release_times = []
    for i in range(args.repeats):
        eps = eps_values[i % len(eps_values)]
        t0 = time.perf_counter()
        propose_test_release(pipe.obfuscator, z, epsilon=eps, delta=0.05, lipschitz=Certifier(), phi=phi,
                             **kw)
        release_times.append(time.perf_counter() - t0)
    Certifier.decide = real_decide  # type: ignore[method-assign]

    med_server, med_wall, med_release = (statistics.median(v) for v in (server, wall, release_times))
    print(f"dataset {args.dataset}, model {args.model}, {args.repeats} ε/δ moves, φ cache fresh ({tmp})")
    print("through the app (AppTest, real app.py + Release page):")
    ms = 1000.0
    print(f"  first certification run : server {first_server * ms:8.1f} ms   wall {first_wall * ms:8.1f} ms"
          f"   ({first_decisions} Lipschitz decisions)")
    print(f"  ε/δ-only rerun          : server median {med_server * ms:6.1f} ms,"
          f" max {max(server) * ms:6.1f} ms   wall median {med_wall * ms:6.1f} ms"
          f"   ({rerun_decisions} Lipschitz decisions)")
    print(f"  ratio first / rerun (server medians): {first_server / med_server:8.1f}×")
    print(f"  target: rerun < 100 ms server time -> {'met' if med_server < 0.1 else 'NOT met'}"
          f" (median), {'met' if max(server) < 0.1 else 'not met'} (max)")
    print("direct calls:")
    print(f"  cached_phi, cold        : {phi_seconds * ms:8.1f} ms  ({phi.n_decisions} decisions,"
          f" φ = {phi.phi:.4g})")
    print(f"  propose_test_release(φ) : median {med_release * 1000:6.3f} ms")
    print(f"  ratio                   : {phi_seconds / med_release:8.0f}×")
    if rerun_decisions:
        raise SystemExit("an ε/δ rerun made Lipschitz decisions: φ was not reused")


if __name__ == "__main__":
    main()
