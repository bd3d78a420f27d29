"""Dashboard speed in a real browser: cold start, every page, an ε or δ step, upload → outcome.

    nice -n 5 .venv/bin/python bench/dashboard_browser.py                       # this tree, 1 pass
    nice -n 5 .venv/bin/python bench/dashboard_browser.py --ref HEAD~3 --rounds 3   # A = HEAD~3, B = tree

Each pass starts ``streamlit run app.py`` (headless, 127.0.0.1, a free port, a fresh φ cache
directory, its own process group, killed at the end) and drives Debian's headless Chromium
(Playwright) through one session:

1. cold start: process start → the home page idle;
2. every entry of the navigation, clicked in turn → that page idle;
3. on the Release page (``--query``, PTR by default, so φ is certified for the default sample):
   ``--steps`` moves of the ε slider and as many of the δ slider, one step each (→, ←, → …; with
   ``--onward`` →, →, → …: a setting not seen before at every step) → idle;
4. ``--uploads`` uploads of distinct shipped samples of the tree's default dataset (``data/samples``,
   digits before issue 33.1, real MNIST after) → the outcome shown (the
   "P[this image is released]" metric naming the file) and the page idle.

Each page and step is timed twice: to the first idle, and to idle with every number in ("…, all numbers
in": no "computing…" left in the main area, where a view fills in numbers computed in the background).

"Idle" is: no running indicator (``stStatusWidget``), no stale element, every picture loaded, the
main area changed since the action, and no DOM mutation for ``--quiet`` ms; the time is the action
to the last DOM mutation before that quiet window (what the user sees settle).

Every tree first gets its bytecode written (``compileall``, as ``make run`` does), so that a baseline
checkout without ``__pycache__`` is not slower for that alone.

With ``--ref <rev>`` the same passes also run on a ``git worktree`` of that revision (A), interleaved
with the current tree (B), pass by pass (A, B, A, B …); the table gives the medians, B/A and n per
figure and the 1-minute load average at the start and end. The machine is shared: only ratios
measured side by side in one run mean anything.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ab import ab_trees, print_medians
from load import (  # bench/load.py: the server and image helpers
    CHROMIUM,
    CHROMIUM_ARGS,
    GATE,
    Server,
    default_dataset,
    start_server,
    upload_images,
)

ROOT = Path(__file__).resolve().parents[1]

#: Installed before any page script: the time of the last DOM mutation in the page.
OBSERVER_JS = """
window.__pl = {last: performance.now()};
new MutationObserver(() => { window.__pl.last = performance.now(); }).observe(document, {
  subtree: true, childList: true, characterData: true, attributes: true,
  attributeFilter: ['data-stale', 'src', 'data-testid'],
});
"""

#: Idle after an action at page time ``a.t`` whose main text was ``a.before``: ``{ms, quiet}`` or null.
IDLE_JS = """a => {
  const s = window.__pl, now = performance.now();
  if (!s) return null;
  if (document.querySelector('[data-testid="stStatusWidget"]')) return null;
  if (document.querySelector('[data-stale="true"]')) return null;
  if (![...document.images].every(img => img.complete)) return null;
  const main = document.querySelector('[data-testid="stMain"]');
  const text = main ? main.innerText.trim() : '';
  if (!text || text === a.before) return null;
  if (a.needs && !a.needs.every(n => text.includes(n))) return null;
  if (a.absent && a.absent.some(n => text.includes(n))) return null;
  if (now - s.last < a.quiet) return null;
  return {ms: Math.max(0, s.last - a.t), quiet: now - s.last};
}"""

#: what a number computed in the background says until it is in
PENDING = "computing…"

MAIN_TEXT_JS = """() => { const m = document.querySelector('[data-testid="stMain"]');
  return m ? m.innerText.trim() : ''; }"""


def load1() -> float:
    """The 1-minute load average."""
    return float(Path("/proc/loadavg").read_text().split()[0])


def start(root: Path, cache_dir: Path, log_path: Path) -> tuple[Server, float]:
    """``streamlit run app.py`` from ``root`` (as ``make run``); returns the server and its start time."""
    t0 = time.perf_counter()
    return start_server(root, cache_dir, log_path), t0


def idle(page: Any, t: float, before: str, *, quiet_ms: float, timeout_s: float,
         needs: tuple[str, ...] = (), absent: tuple[str, ...] = ()) -> float:
    """Seconds from page time ``t`` (ms) to the last DOM mutation before the page went idle (with every
    text of ``needs`` and none of ``absent`` in the main area)."""
    arg = {"t": t, "before": before, "quiet": quiet_ms, "needs": list(needs), "absent": list(absent)}
    handle = page.wait_for_function(IDLE_JS, arg=arg, timeout=timeout_s * 1000, polling=50)
    return float(handle.json_value()["ms"]) / 1000.0


def act(page: Any, action: Any, *, quiet_ms: float, timeout_s: float, needs: tuple[str, ...] = (),
        complete: list[float] | None = None) -> float:
    """Run ``action`` (a callable) and time it to idle; with ``complete``, also append the time to the
    page idle with every number in (no :data:`PENDING` text left: rows computed in the background)."""
    before = page.evaluate(MAIN_TEXT_JS)
    t = float(page.evaluate("performance.now()"))
    action()
    seconds = idle(page, t, before, quiet_ms=quiet_ms, timeout_s=timeout_s, needs=needs)
    if complete is not None:
        complete.append(idle(page, t, before, quiet_ms=quiet_ms, timeout_s=timeout_s, needs=needs,
                             absent=(PENDING,)))
    return seconds


def one_pass(
    root: Path, work: Path, tag: str, args: argparse.Namespace, images: list[Path]
) -> dict[str, list[float]]:
    """One server and one browser session on ``root``: every figure of the module docstring."""
    from playwright.sync_api import sync_playwright

    out: dict[str, list[float]] = {}
    q, T = args.quiet, args.timeout

    def note(name: str, seconds: float) -> None:
        out.setdefault(name, []).append(seconds)
        print(f"  [{tag}] {name:<34} {seconds:7.3f} s", flush=True)

    cache = Path(tempfile.mkdtemp(prefix="phi-cache-", dir=work))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        server = None
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1400})
            page.add_init_script(OBSERVER_JS)
            server, t0 = start(root, cache, work / f"server-{tag}.log")
            page.goto(f"{server.url}/?{args.query}", timeout=T * 1000)
            page.wait_for_function(IDLE_JS, arg={"t": 0, "before": "", "quiet": q, "needs": []},
                                   timeout=T * 1000, polling=50)
            quiet_for = float(page.evaluate("performance.now() - window.__pl.last")) / 1000.0
            note("cold start → home idle", time.perf_counter() - quiet_for - t0)

            nav = page.locator('[data-testid="stSidebarNav"]')
            links = nav.locator("a")
            titles = [t.strip().splitlines()[-1] for t in links.all_inner_texts()]  # after the icon's name
            for i in [*range(1, len(titles)), 0]:  # every page, then Home again (warm)
                done: list[float] = []
                note(f"page {titles[i]}", act(page, links.nth(i).click, quiet_ms=q, timeout_s=T,
                                              complete=done))
                note(f"page {titles[i]}, all numbers in", done[0])
            links.nth(titles.index("Release")).click()
            page.locator("h1", has_text="Release").wait_for(timeout=T * 1000)
            page.locator('[data-testid="stMetric"]', has_text="P[this image is released]").wait_for(
                timeout=T * 1000)
            page.wait_for_function(IDLE_JS, arg={"t": 0, "before": "", "quiet": q, "needs": []},
                                   timeout=T * 1000, polling=50)

            for i in range(args.steps):
                key = "ArrowRight" if i % 2 == 0 or args.onward else "ArrowLeft"
                for field in ("epsilon", "delta"):
                    slider = page.locator(f'.st-key-w_{field} input[type="range"]').first
                    slider.focus()
                    done = []
                    name = "ε step" if field == "epsilon" else "δ step"
                    note(name, act(page, lambda s=slider, k=key: s.press(k), quiet_ms=q, timeout_s=T,
                                   complete=done))
                    note(f"{name}, all numbers in", done[0])

            main = page.locator('[data-testid="stMain"]')
            main.get_by_text("Upload your own").click()
            uploader = page.locator('[data-testid="stFileUploader"] input[type="file"]')
            uploader.wait_for(state="attached", timeout=T * 1000)
            page.wait_for_function(IDLE_JS, arg={"t": 0, "before": "", "quiet": q, "needs": []},
                                   timeout=T * 1000, polling=50)
            for image in images:
                def upload(path: Path = image) -> None:
                    uploader.set_input_files(str(path))
                seconds = act(page, upload, quiet_ms=q, timeout_s=T,
                              needs=(image.name, "P[this image is released]"))
                gate = page.get_by_role("button", name=GATE)
                if gate.count():
                    print(f"  [{tag}] {image.name}: the domain check asked for confirmation; not counted")
                    continue
                note("upload → outcome", seconds)
        finally:
            browser.close()
            if server is not None:
                server.stop()
    return out


def main() -> None:
    """Run the passes (interleaved A/B with ``--ref``) and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", help="git revision to compare with (A); B is the current tree")
    parser.add_argument("--rounds", type=int, default=1, help="passes per tree")
    parser.add_argument("--steps", type=int, default=10, help="ε moves and δ moves per pass")
    parser.add_argument("--onward", action="store_true",
                        help="every step to the right (a new setting each time) instead of →, ←, → …")
    parser.add_argument("--uploads", type=int, default=3, help="uploads per pass")
    parser.add_argument("--query", default="mech=PTR&eps=1.0&delta=0.001", help="the first URL's settings")
    parser.add_argument("--quiet", type=float, default=400.0, help="ms without DOM mutation = idle")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per action at most")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="privlens-browser-bench-"))
    with ab_trees(args.ref, ROOT, work) as trees:
        for _, root in trees:  # every tree as `make run` leaves it: bytecode written
            subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", "app.py", "pages",
                            "privlens", "privcore"], cwd=root, check=True, stdout=subprocess.DEVNULL)
        # each tree uploads samples of its own default dataset (what its first-time user would)
        images: dict[Path, list[Path]] = {}
        for i, (_, root) in enumerate(trees):
            (work / f"uploads{i}").mkdir()
            images[root] = upload_images(args.uploads, work / f"uploads{i}", default_dataset(root))
        results: dict[str, dict[str, list[float]]] = {label: {} for label, _ in trees}
        load_start = load1()
        print(f"load average (1 min) at start: {load_start:.2f}; work folder {work}", flush=True)
        for r in range(args.rounds):
            for label, root in trees:
                print(f"round {r + 1}/{args.rounds}, {label}, load {load1():.2f}", flush=True)
                for name, values in one_pass(root, work, f"{label} r{r + 1}", args, images[root]).items():
                    results[label].setdefault(name, []).extend(values)
        load_end = load1()

    labels = [label for label, _ in trees]
    names = list(dict.fromkeys(n for label in labels for n in results[label]))
    for suffix in ("", ", all numbers in"):
        both = [n for n in names if n.endswith(" step" + suffix) and not n.startswith("ε or δ")]
        if both:
            for label in labels:
                results[label]["ε or δ step" + suffix] = [v for n in both for v in results[label].get(n, [])]
            names.append("ε or δ step" + suffix)
    print(f"\nload average (1 min): start {load_start:.2f}, end {load_end:.2f}")
    print_medians({label: results[label] for label in labels}, names, first="figure", width=36)

if __name__ == "__main__":
    main()
