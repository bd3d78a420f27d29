"""Load: concurrent browser sessions on the Release page (upload → certify → move ε), with server RSS/CPU.

    .venv/bin/python bench/load.py                       # 8 sessions, 1 round, local server
    .venv/bin/python bench/load.py --sessions 1 --rounds 3
    .venv/bin/python bench/load.py --url http://127.0.0.1:8501   # a running server (loopback only)
    .venv/bin/python bench/load.py --app-root /tmp/before --app-root . --passes 2   # A/B, interleaved
    .venv/bin/python bench/load.py --variant base= --variant nogc=--runner.postScriptGC=false

Starts ``streamlit run app.py`` on 127.0.0.1 on a free port (its own process group, a fresh φ cache
directory so every upload is really certified, killed at the end) unless ``--url`` names a running
server, which must be on a loopback address. Then ``--sessions`` headless Chromium sessions (Debian's
``/usr/bin/chromium`` driven by Playwright, one browser context each) run at the same time, each
``--rounds`` times:

1. ``open``: load the Release page (a shared deep link, ε = 1) until it has settled (the default
   sample's outcome shown);
2. ``upload → outcome``: choose "Upload your own", upload an image — a shipped sample from
   ``data/samples`` (a different one per session and round; past the twelve shipped ones, a mirrored
   or transposed copy, so that every upload is a new image) — and wait for the PTR outcome
   ("Released." or ⊥); ``upload → settled`` also waits for the pictures;
3. ``ε → outcome``: one step of the sidebar's ε slider (1 → 1.5), wait for the re-rendered outcome
   (its noise scale changed, the URL followed) with everything settled.

Every action has a bounded time-out (``--action-timeout``); a session whose action timed out or
failed skips the rest of that round. The whole run stops by itself after ``--deadline`` seconds.
Requests to anything but the server's loopback host are aborted (and counted). Records per action
p50/p95/max, errors (a Python exception shown, a refused upload, a failed certification, a page
error), time-outs, the server's RSS (sampled from /proc every 0.25 s) and CPU seconds (/proc, all
threads), the client's (Chromium's) CPU seconds, and the load average before and after; prints a
table and writes JSON to ``artifacts/load-<time>.json`` (gitignored). With ``--profile`` it also
records the server with py-spy (if installed; not a project requirement) during the measured phase
and writes the collapsed stacks beside the JSON.

The machine is shared and has two cores: absolute times move with the load average printed beside
them; compare code versions or server options side by side in one run (``--app-root`` A and B,
``--variant``, ``--passes`` to alternate them).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ACTIONS = ("open", "upload → outcome", "upload → settled", "ε → outcome")
GATE = "Use this image anyway"
OUTCOME = re.compile(r"Released \(|⊥ \(nothing released\)")
MAX_SESSIONS, MAX_ROUNDS, MAX_DEADLINE_S = 32, 20, 3600.0
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")

SETTLED_JS = """() => !document.querySelector('[data-testid="stStatusWidget"]')
    && document.querySelectorAll('[data-stale="true"]').length === 0
    && [...document.images].every(img => img.complete)"""


#: The values of every "noise scale" metric on the page, and the number of released/⊥ messages.
SCALES_JS = """() => [...document.querySelectorAll('[data-testid="stMetric"]')]
    .filter(m => m.innerText.includes('noise scale'))
    .map(m => (m.querySelector('[data-testid="stMetricValue"]') || m).innerText.trim())"""
OUTCOMES_JS = """() => [...document.querySelectorAll('[data-testid="stAlert"]')]
    .filter(a => /Released \\(|⊥ \\(nothing released\\)/.test(a.innerText)).length"""

# ------------------------------------------------------------------------------- /proc helpers


def loadavg() -> str:
    """The first three fields of /proc/loadavg."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _stat(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()  # fields from "state" on (the name may hold spaces)


def cpu_seconds(pid: int, *, children: bool = True) -> float | None:
    """User + system CPU seconds of a process (all its threads) and, with ``children``, of its
    waited-for children (leave them out when summing over a process tree)."""
    f = _stat(pid)
    if f is None:
        return None
    utime, stime, cutime, cstime = (int(v) for v in f[11:15])
    return (utime + stime + (cutime + cstime if children else 0)) / CLK_TCK


def rss_bytes(pid: int) -> int | None:
    """Resident set size of a process."""
    f = _stat(pid)
    return None if f is None else int(f[21]) * PAGE_SIZE


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            f = _stat(int(entry.name))
            if f is not None:
                kids.setdefault(int(f[1]), []).append(int(entry.name))
    return kids


def descendants(pid: int, *, exclude: set[int] = frozenset()) -> list[int]:  # type: ignore[assignment]
    """All processes below ``pid`` (not ``pid`` itself), skipping the subtrees rooted in ``exclude``."""
    kids, out, todo = _children(), [], [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            if child not in exclude:
                out.append(child)
                todo.append(child)
    return out


def process_kind(pid: int) -> str:
    """ "chromium <type>" (browser, renderer, gpu-process, utility, zygote) or the program's name."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "?"
    words = cmdline.split()
    name = Path(words[0]).name if words else "?"
    kind = re.search(r"--type=(\S+)", cmdline)
    return f"chromium {kind.group(1) if kind else 'browser'}" if "chrom" in cmdline[:200] else name


def listening_pid(port: int) -> int | None:
    """The pid of the (readable) process listening on TCP ``port``, found through /proc/net/tcp{,6}."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if int(parts[1].rsplit(":", 1)[1], 16) == port and parts[3] == "0A":  # 0A = LISTEN
                inodes.add(parts[9])
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                if os.readlink(fd) in {f"socket:[{i}]" for i in inodes}:
                    return int(entry.name)
        except OSError:
            continue
    return None


class Sampler:
    """Samples a process's RSS every ``period`` seconds in a daemon thread (peak and last value)."""

    def __init__(self, pid: int | None, period: float = 0.25) -> None:
        self.pid, self.period = pid, period
        self.peak = self.last = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = rss_bytes(self.pid) if self.pid else None
            if rss is not None:
                self.last, self.peak = rss, max(self.peak, rss)
            self._stop.wait(self.period)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


# ------------------------------------------------------------------------------- server


def loopback_url(url: str) -> str:
    """``url`` without a trailing slash if its host is a loopback address; ValueError otherwise."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"url must be http(s)://<loopback host>:<port>, got {url!r}")
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(parsed.hostname, None)}
    except socket.gaierror as exc:
        raise ValueError(f"url's host {parsed.hostname!r} does not resolve: {exc}") from None
    remote = sorted(a for a in addresses if not ipaddress.ip_address(a.split("%")[0]).is_loopback)
    if remote:
        raise ValueError(
            f"url's host {parsed.hostname!r} resolves to non-loopback {remote}; this load test only "
            "sends traffic to 127.0.0.0/8 or ::1"
        )
    return url.rstrip("/")


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(url: str, proc: subprocess.Popen | None, timeout: float) -> None:
    """Wait for Streamlit's health endpoint (or the server's exit)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"no healthy server at {url} after {timeout:.0f} s")


@dataclass
class Server:
    """A Streamlit server started by this script (``proc``) or found at ``url``."""

    url: str
    pid: int | None
    proc: subprocess.Popen | None = None
    log: Any = None
    root: str = ""

    def stop(self) -> None:
        """Kill the server's process group (only one this script started)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=20)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        if self.log is not None:
            self.log.close()


def start_server(root: Path, cache_dir: Path, log_path: Path, extra: tuple[str, ...] = ()) -> Server:
    """``streamlit run app.py [extra…]`` from ``root`` on 127.0.0.1:<free port>, φ cached in ``cache_dir``."""
    port = free_port()
    env = dict(os.environ, PRIVLENS_CACHE_DIR=str(cache_dir), PYTHONPATH=str(root))
    env.pop("PRIVLENS_RESULTS_DIR", None)
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        "app.py",
        "--server.headless=true",
        f"--server.port={port}",
        "--server.address=127.0.0.1",
        "--browser.gatherUsageStats=false",
        *extra,
    ]
    log = open(log_path, "w")  # closed by Server.stop
    proc = subprocess.Popen(
        cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    server = Server(url=f"http://127.0.0.1:{port}", pid=proc.pid, proc=proc, log=log, root=str(root))
    try:
        wait_healthy(server.url, proc, timeout=180)
    except BaseException:
        server.stop()
        raise
    return server


def snapshot(root: Path, folder: Path, ref: str) -> Path:
    """A fixed copy of ``root`` in ``folder``, so that every pass of a run serves the same code while
    others edit the tree: the commit ``ref`` (``git archive``), or with ref "WORKTREE" the tracked and
    untracked-but-not-ignored files as they are now."""
    folder.mkdir(parents=True)
    if ref != "WORKTREE":
        archive = subprocess.run(["git", "archive", ref], cwd=root, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
        return folder
    names = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, capture_output=True, check=True
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, names):
        src = root / name
        if src.is_file():
            dst = folder / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    return folder


# ------------------------------------------------------------------------------- images


def default_dataset(root: Path = ROOT) -> str:
    """The embedded default dataset of the checkout ``root`` (digits before privcore/defaults.py existed)."""
    defaults = root / "privcore" / "defaults.py"
    if not defaults.is_file():
        return "digits"
    return defaults.read_text(encoding="utf-8").split('DEFAULT_DATASET = "', 1)[1].split('"', 1)[0]


def upload_images(count: int, folder: Path, dataset: str | None = None) -> list[Path]:
    """``count`` distinct upload files: the shipped samples (of ``dataset`` only, when given), then
    mirrored/transposed copies of them."""
    import numpy as np
    from PIL import Image

    shipped = sorted((ROOT / "data" / "samples").glob(f"{dataset or '*'}/*.png"))
    if not shipped:
        raise SystemExit("no shipped samples under data/samples")
    variants = (("", None), ("-mirrored", np.fliplr), ("-flipped", np.flipud), ("-transposed", np.transpose))
    out: list[Path] = []
    for i in range(count):
        sample = shipped[i % len(shipped)]
        suffix, transform = variants[(i // len(shipped)) % len(variants)]
        if i >= len(shipped) * len(variants):
            suffix += f"-again{i // (len(shipped) * len(variants))}"  # repeats an image: may hit φ's cache
        path = folder / f"u{i:03d}-{sample.parent.name}-{sample.stem}{suffix}.png"
        if transform is None:
            shutil.copyfile(sample, path)
        else:
            with Image.open(sample) as im:
                arr = np.asarray(im)
            Image.fromarray(np.ascontiguousarray(transform(arr))).save(path)
        out.append(path)
    return out


# ------------------------------------------------------------------------------- sessions


@dataclass
class Record:
    """What one session saw: per action the seconds, and the errors and time-outs."""

    session: int
    times: dict[str, list[float]] = field(default_factory=lambda: {a: [] for a in ACTIONS})
    errors: list[str] = field(default_factory=list)
    timeouts: list[str] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    confirmed: int = 0  # uploads the domain checks flagged, confirmed with "Use this image anyway"


class ActionFailed(Exception):
    """An action saw an error on the page (counted as an error, not a time-out)."""


async def _settled(page: Any, timeout_ms: float) -> None:
    await page.wait_for_timeout(200)
    await page.wait_for_function(SETTLED_JS, timeout=timeout_ms, polling=100)  # not every frame ("raf")
    await page.wait_for_timeout(200)


async def _check_page(page: Any, what: str) -> None:
    """Raise ActionFailed if the page shows a Python exception, a refusal or a failed certification."""
    if await page.locator('[data-testid="stException"]').count():
        text = await page.locator('[data-testid="stException"]').first.inner_text()
        raise ActionFailed(f"{what}: exception shown: {text[:200]}")
    for phrase in (
        "This file cannot be used",
        "could not be certified",
        "Certification failed",
        "Connection error",
    ):
        if await page.get_by_text(phrase).count():
            raise ActionFailed(f"{what}: page shows {phrase!r}")


async def _one_outcome(page: Any, what: str, grace_ms: float = 5000) -> None:
    """Raise ActionFailed unless the page shows exactly one outcome (one noise scale, one released/⊥
    message) within ``grace_ms``: elements of an earlier run left beside the new ones mix two
    releases on one page."""
    try:
        await page.wait_for_function(
            f"() => ({SCALES_JS})().length === 1 && ({OUTCOMES_JS})() === 1", timeout=grace_ms, polling=100
        )
    except Exception:
        scales = await page.evaluate(SCALES_JS)
        raise ActionFailed(
            f"{what}: the page shows {await page.evaluate(OUTCOMES_JS)} outcome messages and noise scales "
            f"{scales}: elements of an earlier run were left on it"
        ) from None


async def _screenshot(page: Any, prefix: Path | None, name: str) -> None:
    """A screenshot and the text of a failed action's page (best effort: the page may be gone)."""
    if prefix is None:
        return
    try:
        await page.screenshot(path=f"{prefix}-{name}.png", full_page=True, timeout=10_000)
        text = await page.locator("body").inner_text(timeout=10_000)
        Path(f"{prefix}-{name}.txt").write_text(f"{page.url}\n\n{text}")
    except Exception:  # a screenshot is a diagnostic only
        pass


async def _metric(page: Any, label: str, timeout_ms: float) -> str:
    box = page.locator('[data-testid="stMetric"]', has_text=label)
    return (await box.locator('[data-testid="stMetricValue"]').inner_text(timeout=timeout_ms)).strip()


async def run_session(
    browser: Any,
    *,
    index: int,
    sessions: int,
    base: str,
    images: list[Path],
    rounds: int,
    timeout_s: float,
    query: str,
    shots: Path | None = None,
) -> Record:
    """One browser context doing ``rounds`` × (open → upload → outcome → move ε → outcome)."""
    from playwright.async_api import TimeoutError as PlaywrightTimeout
    from playwright.async_api import expect

    rec = Record(session=index)
    ms = timeout_s * 1000.0
    host = urllib.parse.urlsplit(base).hostname
    # Playwright's default window and reduced motion: the browsers share the server's two cores here, and
    # a tall page or CSS animations cost them compositing CPU (2.1–2.5 s → 0.7 s in the GPU process for
    # one session × 4 rounds) without changing a byte the server sends.
    context = await browser.new_context(viewport={"width": 1280, "height": 800}, reduced_motion="reduce")

    async def only_loopback(route: Any) -> None:
        if urllib.parse.urlsplit(route.request.url).hostname == host:
            await route.continue_()
        else:
            rec.blocked.append(route.request.url[:120])
            await route.abort()

    await context.route("**/*", only_loopback)
    try:
        for r in range(rounds):
            page = await context.new_page()
            page_errors: list[str] = []
            page.on("pageerror", lambda exc, errs=page_errors: errs.append(str(exc)[:200]))
            action = "open"
            try:
                t0 = time.perf_counter()
                await page.goto(f"{base}/release?{query}", timeout=ms)
                await expect(page.locator("h1", has_text="Release")).to_be_visible(timeout=ms)
                await expect(page.get_by_text("Upload your own")).to_be_visible(timeout=ms)
                await _settled(page, ms)
                rec.times["open"].append(time.perf_counter() - t0)
                await _check_page(page, action)

                await page.get_by_text("Upload your own").click(timeout=ms)
                upload = page.locator('[data-testid="stFileUploader"] input[type="file"]')
                await upload.wait_for(state="attached", timeout=ms)
                await _settled(page, ms)

                action = "upload → outcome"
                outcome = page.locator('[data-testid="stAlert"]', has_text=OUTCOME)
                image = images[(r * sessions + index) % len(images)]  # distinct per session and round
                t0 = time.perf_counter()
                await upload.set_input_files(str(image), timeout=ms)
                # an image the domain checks flag waits for the user's confirmation before anything is
                # computed for release: confirm it as a user would (counted in `confirmed`)
                gate = page.get_by_role("button", name=GATE)
                await expect(outcome.first.or_(gate)).to_be_visible(timeout=ms)
                if await gate.count() and not await outcome.count():
                    rec.confirmed += 1
                    await gate.click(timeout=ms)
                    await expect(outcome.first).to_be_visible(timeout=ms)
                rec.times[action].append(time.perf_counter() - t0)
                action = "upload → settled"
                await _settled(page, ms)
                rec.times[action].append(time.perf_counter() - t0)
                await _check_page(page, action)
                await _one_outcome(page, action)
                if image.name not in await page.content():
                    raise ActionFailed(f"{action}: the page does not show the upload {image.name}")
                rec.outcomes.append((await outcome.first.inner_text()).split(".")[0][:40])
                scale = await _metric(page, "noise scale Δp·R/ε", ms)

                action = "ε → outcome"
                slider = page.locator('[data-testid="stSidebar"] .st-key-w_epsilon input[type="range"]')
                t0 = time.perf_counter()
                await slider.focus(timeout=ms)
                await slider.press("ArrowRight", timeout=ms)  # ε: 1 → 1.5
                await expect(page).to_have_url(re.compile(r"eps=1\.5"), timeout=ms)
                await page.wait_for_function(
                    f"old => ({SCALES_JS})().some(v => v !== old)", arg=scale, timeout=ms, polling=100
                )
                await expect(outcome.first).to_be_visible(timeout=ms)
                await _settled(page, ms)
                await _one_outcome(page, action)
                rec.times[action].append(time.perf_counter() - t0)
                await _check_page(page, action)
                if page_errors:
                    raise ActionFailed(f"page errors: {page_errors[:3]}")
            except (PlaywrightTimeout, AssertionError) as exc:
                rec.timeouts.append(f"round {r}, {action}: {str(exc).splitlines()[0][:200]}")
                await _screenshot(page, shots, f"s{index:02d}-r{r}-timeout")
            except ActionFailed as exc:
                rec.errors.append(f"round {r}, {exc}")
                await _screenshot(page, shots, f"s{index:02d}-r{r}-error")
            except Exception as exc:  # a crashed page or a lost connection: an error, and go on
                rec.errors.append(f"round {r}, {action}: {type(exc).__name__}: {str(exc)[:200]}")
                await _screenshot(page, shots, f"s{index:02d}-r{r}-error")
            finally:
                await page.close()
    finally:
        await context.close()
    return rec


async def _load(
    base: str,
    *,
    sessions: int,
    rounds: int,
    images: list[Path],
    timeout_s: float,
    query: str,
    deadline_s: float,
    shots: Path | None = None,
) -> tuple[list[Record], bool]:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            tasks = [
                asyncio.create_task(
                    run_session(
                        browser,
                        index=i,
                        sessions=sessions,
                        base=base,
                        images=images,
                        rounds=rounds,
                        timeout_s=timeout_s,
                        query=query,
                        shots=shots,
                    )
                )
                for i in range(sessions)
            ]
            done, pending = await asyncio.wait(tasks, timeout=deadline_s)
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            records = []
            for i, t in enumerate(tasks):
                if t in done and t.exception() is None:
                    records.append(t.result())
                else:
                    why = "stopped at the deadline" if t in pending else f"crashed: {t.exception()!r}"
                    records.append(Record(session=i, errors=[f"session {why}"]))
            return records, bool(pending)
        finally:
            await browser.close()


async def _warm(base: str, timeout_s: float, query: str) -> float:
    """One untimed page view (models load, pattern tables, the default sample's φ): its seconds."""
    from playwright.async_api import async_playwright, expect

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            t0 = time.perf_counter()
            await page.goto(f"{base}/release?{query}", timeout=timeout_s * 1000)
            await expect(page.locator('[data-testid="stAlert"]', has_text=OUTCOME)).to_be_visible(
                timeout=timeout_s * 1000
            )
            await _settled(page, timeout_s * 1000)
            return time.perf_counter() - t0
        finally:
            await browser.close()


# ------------------------------------------------------------------------------- one pass


def percentiles(values: list[float]) -> dict[str, float | int | None]:
    """n, p50, p95 (linear interpolation) and max."""
    import numpy as np

    if not values:
        return {"n": 0, "p50": None, "p95": None, "max": None}
    a = np.asarray(values, dtype=float)
    return {
        "n": len(values),
        "p50": float(np.percentile(a, 50)),
        "p95": float(np.percentile(a, 95)),
        "max": float(a.max()),
    }


def run_pass(
    args: argparse.Namespace,
    root: Path | None,
    label: str,
    out_dir: Path,
    stamp: str,
    extra: tuple[str, ...] = (),
) -> dict:
    """Start (or find) the server, warm it, run the sessions, measure; a JSON-ready dict."""
    tmp = Path(tempfile.mkdtemp(prefix="privlens-load-"))
    server = None
    try:
        if args.url:
            base = loopback_url(args.url)
            wait_healthy(base, None, timeout=30)
            port = urllib.parse.urlsplit(base).port or (443 if base.startswith("https") else 80)
            server = Server(url=base, pid=listening_pid(port))
        else:
            assert root is not None
            log = out_dir / f"load-{stamp}-{label}-server.log"
            server = start_server(root, tmp / "phi-cache", log, extra)
        query = urllib.parse.urlencode(
            {"dataset": args.dataset, "model": args.model, "eps": "1.0", "delta": "0.05"}
        )
        n_uploads = args.sessions * args.rounds
        (tmp / "uploads").mkdir()
        images = upload_images(n_uploads, tmp / "uploads")

        warm_s, warm_error = None, None
        if not args.no_warm:
            try:
                warm_s = asyncio.run(_warm(server.url, args.action_timeout * 3, query))
            except Exception as exc:  # the sessions will meet the same problem and count it
                warm_error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
                print(f"warm-up failed: {warm_error}", flush=True)
            time.sleep(args.settle)  # the warm-up thread's imports finish; the load average reads the run

        profiler = None
        profile_path = out_dir / f"load-{stamp}-{label}-pyspy.txt"
        if args.profile and server.pid:
            spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
            if Path(spy).exists():
                profiler = subprocess.Popen(
                    [
                        spy,
                        "record",
                        "--pid",
                        str(server.pid),
                        "--rate",
                        str(args.profile_rate),
                        "--format",
                        "raw",
                        "--output",
                        str(profile_path),
                        "--nonblocking",
                        *(["--gil"] if args.profile == "gil" else []),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
                time.sleep(1.0)
            else:
                print("py-spy not found: no profile (install it into .venv for yourself; not a requirement)")

        me = os.getpid()
        not_client = {me} | ({server.proc.pid} if server.proc is not None else set())
        if profiler is not None:
            not_client.add(profiler.pid)
        client_before = sum(
            cpu_seconds(p, children=False) or 0.0 for p in descendants(me, exclude=not_client)
        )
        load_before = loadavg()
        cpu_before = cpu_seconds(server.pid) if server.pid else None
        rss_before = rss_bytes(server.pid) if server.pid else None
        t0 = time.perf_counter()
        client_cpu: dict[int, tuple[str, float]] = {}

        def client_cpu_sampler(stop: threading.Event) -> None:
            # Chromium's processes come and go; keep each one's last CPU reading and its kind
            while not stop.is_set():
                for p in descendants(me, exclude=not_client):
                    c = cpu_seconds(p, children=False)
                    if c is not None:
                        if p not in client_cpu and args.client_nice:
                            with contextlib.suppress(OSError):  # it may have exited
                                os.setpriority(os.PRIO_PROCESS, p, args.client_nice)
                        client_cpu[p] = (client_cpu[p][0] if p in client_cpu else process_kind(p), c)
                stop.wait(0.5)

        stop = threading.Event()
        watcher = threading.Thread(target=client_cpu_sampler, args=(stop,), daemon=True)
        watcher.start()
        with Sampler(server.pid) as rss:
            records, hit_deadline = asyncio.run(
                _load(
                    server.url,
                    sessions=args.sessions,
                    rounds=args.rounds,
                    images=images,
                    timeout_s=args.action_timeout,
                    query=query,
                    deadline_s=args.deadline,
                    shots=out_dir / f"load-{stamp}-{label}",
                )
            )
        wall = time.perf_counter() - t0
        stop.set()
        watcher.join(timeout=5)
        cpu_after = cpu_seconds(server.pid) if server.pid else None
        load_after = loadavg()
        if profiler is not None:
            profiler.send_signal(signal.SIGINT)
            try:
                profiler.wait(timeout=60)
            except subprocess.TimeoutExpired:
                profiler.kill()
                profiler.wait(timeout=10)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    actions = {a: percentiles([t for rec in records for t in rec.times[a]]) for a in ACTIONS}
    server_cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    uploads_done = actions["upload → outcome"]["n"]
    return {
        "label": label,
        "root": str(root) if root is not None else None,
        "snapshot": args.snapshot if root is not None else None,
        "streamlit_args": list(extra),
        "url": server.url,
        "server_pid_found": server.pid is not None,
        "sessions": args.sessions,
        "rounds": args.rounds,
        "client_nice": args.client_nice,
        "warm_up_s": warm_s,
        "warm_up_error": warm_error,
        "wall_s": wall,
        "hit_deadline": hit_deadline,
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "actions": actions,
        "errors": sum(len(r.errors) for r in records),
        "timeouts": sum(len(r.timeouts) for r in records),
        "blocked_requests": sorted({u for r in records for u in r.blocked}),
        "confirmed_uploads": sum(r.confirmed for r in records),
        "outcomes": {
            o: sum(r.outcomes.count(o) for r in records) for o in {o for r in records for o in r.outcomes}
        },
        "server": {
            "cpu_s": server_cpu,
            "cpu_s_per_upload": None if server_cpu is None or not uploads_done else server_cpu / uploads_done,
            "rss_before_mb": None if rss_before is None else rss_before / 2**20,
            "rss_peak_mb": rss.peak / 2**20 if rss.peak else None,
            "rss_after_mb": rss.last / 2**20 if rss.last else None,
        },
        "client_cpu_s": sum(c for _, c in client_cpu.values()) - client_before,
        "client_cpu_s_by_kind": {
            k: sum(c for kind, c in client_cpu.values() if kind == k)
            for k in {k for k, _ in client_cpu.values()}
        },
        "profile": str(profile_path) if profiler is not None else None,
        "profile_mode": args.profile,
        "profile_summary": summarise_profile(profile_path)
        if profiler is not None and profile_path.exists()
        else None,
        "records": [asdict(r) for r in records],
    }


# ------------------------------------------------------------------------------- report

#: Where the server's samples go: the share of samples whose stack contains each marker.
PROFILE_MARKERS = {
    "script runs (ScriptRunner)": "ScriptRunner._run_script ",
    "  pages (app.py and below)": "<module> (app.py:",
    "  certification (cached_phi)": "cached_phi (",
    "  post-run gc.collect": "ScriptRunner._on_script_finished (",
    "image decoding (decode_image)": "decode_image (",
    "event loop / HTTP / websocket": "BaseEventLoop.run_forever (",
}


def summarise_profile(path: Path, top: int = 15) -> dict[str, Any]:
    """Shares of the py-spy samples (raw collapsed stacks) by :data:`PROFILE_MARKERS`, and the
    innermost frames (file and line) that hold the most samples."""
    from collections import Counter

    total, marked, leaves = 0, Counter(), Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        for name, marker in PROFILE_MARKERS.items():
            if marker in stack:
                marked[name] += n
        leaves[stack.rsplit(";", 1)[-1]] += n
    return {
        "samples": total,
        "shares": {k: marked[k] / total if total else 0.0 for k in PROFILE_MARKERS},
        "top_self": [(f, n / total) for f, n in leaves.most_common(top)] if total else [],
    }


def _fmt(v: float | None, unit: str = "s") -> str:
    return "—" if v is None else f"{v:.2f}{unit}"


def args_profile_kind(res: dict) -> str:
    """ "every thread" or "GIL holder only", as recorded."""
    return "GIL holder only" if res.get("profile_mode") == "gil" else "every thread, idle included"


def print_table(results: list[dict]) -> None:
    """One block per pass: per action n/p50/p95/max, then errors, time-outs, server CPU and RSS."""
    for res in results:
        srv = res["server"]
        print(
            f"\n== {res['label']}: {res['sessions']} sessions × {res['rounds']} rounds at {res['url']}"
            + (f", browsers at nice {res['client_nice']}" if res["client_nice"] else "")
            + f"  (load average before {res['loadavg_before']}, after {res['loadavg_after']};"
            f" warm-up {_fmt(res['warm_up_s'])}; wall {_fmt(res['wall_s'])})"
        )
        print(f"   {'action':<20}{'n':>4}{'p50':>9}{'p95':>9}{'max':>9}")
        for a, st in res["actions"].items():
            print(f"   {a:<20}{st['n']:>4}{_fmt(st['p50']):>9}{_fmt(st['p95']):>9}{_fmt(st['max']):>9}")
        print(
            f"   errors {res['errors']}, time-outs {res['timeouts']}, blocked non-loopback URLs "
            f"{len(res['blocked_requests'])} {res['blocked_requests'][:3]}, outcomes {res['outcomes']}, "
            f"flagged uploads confirmed {res['confirmed_uploads']}"
            + (", STOPPED AT THE DEADLINE" if res["hit_deadline"] else "")
        )
        print(
            f"   server CPU {_fmt(srv['cpu_s'])} ({_fmt(srv['cpu_s_per_upload'])} per upload), RSS "
            f"{_fmt(srv['rss_before_mb'], ' MB')} before, peak {_fmt(srv['rss_peak_mb'], ' MB')}, "
            f"after {_fmt(srv['rss_after_mb'], ' MB')}; client (Chromium) CPU {_fmt(res['client_cpu_s'])}"
            + " ("
            + ", ".join(f"{k} {v:.1f}s" for k, v in sorted(res["client_cpu_s_by_kind"].items()))
            + ")"
        )
        if res["profile_summary"]:
            prof = res["profile_summary"]
            print(f"   py-spy ({args_profile_kind(res)}): {prof['samples']} samples in {res['profile']}")
            for name, share in prof["shares"].items():
                print(f"     {share:6.1%}  {name}")
            print("     innermost frames:")
            for frame, share in prof["top_self"][:8]:
                print(f"     {share:6.1%}  {frame[:120]}")
        if res["warm_up_error"]:
            print(f"   warm-up failed: {res['warm_up_error']}")
        for rec in res["records"]:
            for msg in rec["errors"] + rec["timeouts"]:
                print(f"   session {rec['session']}: {msg}")


def _passes(
    args: argparse.Namespace,
    roots: list[Path | None],
    labels: list[str],
    variants: list[tuple[str, tuple[str, ...]]],
    stamp: str,
) -> list[dict]:
    """Every root × variant, ``--passes`` times, alternating."""
    results = []
    for n in range(args.passes):
        for root, label in zip(roots, labels, strict=True):
            for name, extra in variants:
                tag = "-".join(x for x in (label, name, f"pass{n + 1}" if args.passes > 1 else "") if x)
                print(f"[{time.strftime('%H:%M:%S')}] pass {tag}: load average {loadavg()}", flush=True)
                results.append(run_pass(args, root, tag, args.out, stamp, extra))
    return results


def main() -> None:
    """Parse the options, run the passes, print and write the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sessions", type=int, default=8, help=f"concurrent browser sessions, 1–{MAX_SESSIONS}"
    )
    parser.add_argument("--rounds", type=int, default=1, help=f"rounds per session, 1–{MAX_ROUNDS}")
    parser.add_argument("--url", help="a running server's base URL (loopback only); default: start one")
    parser.add_argument(
        "--app-root",
        action="append",
        type=Path,
        help="start the server from this checkout (repeat to compare; default: this one)",
    )
    parser.add_argument(
        "--variant",
        action="append",
        metavar="LABEL=ARGS",
        help="a server variant: extra `streamlit run` options, e.g. 'nogc=--runner.postScriptGC=false' "
        "('base=' for none); repeat to compare",
    )
    parser.add_argument(
        "--snapshot",
        metavar="REF",
        help="serve a copy of each root taken at the start: a commit (e.g. HEAD) or WORKTREE (its files "
        "as they are now), so that every pass serves the same code while others edit the tree",
    )
    parser.add_argument("--passes", type=int, default=1, help="repeat the roots/variants A, B, A, B… (1–5)")
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--model", default="ARL-C-N")
    parser.add_argument("--action-timeout", type=float, default=60.0, help="seconds per action (1–600)")
    parser.add_argument("--deadline", type=float, default=900.0, help="seconds per pass, all sessions")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds of rest after the warm-up")
    parser.add_argument("--no-warm", action="store_true", help="no untimed page view before the sessions")
    parser.add_argument(
        "--profile",
        choices=("all", "gil"),
        help="record the server with py-spy (if installed): every thread, or only the one holding the GIL",
    )
    parser.add_argument("--profile-rate", type=int, default=100)
    parser.add_argument(
        "--client-nice",
        type=int,
        default=0,
        help="run the browsers at this niceness (0–19; the server keeps its own): separates the server's "
        "latency from the load generator's own CPU on a small machine",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "artifacts", help="folder for the JSON")
    args = parser.parse_args()

    if not 1 <= args.sessions <= MAX_SESSIONS:
        parser.error(f"--sessions must be in [1, {MAX_SESSIONS}], got {args.sessions}")
    if not 1 <= args.rounds <= MAX_ROUNDS:
        parser.error(f"--rounds must be in [1, {MAX_ROUNDS}], got {args.rounds}")
    if not 1 <= args.passes <= 5:
        parser.error(f"--passes must be in [1, 5], got {args.passes}")
    if not 0 <= args.client_nice <= 19:
        parser.error(f"--client-nice must be in [0, 19], got {args.client_nice}")
    if not 1.0 <= args.action_timeout <= 600.0:
        parser.error(f"--action-timeout must be in [1, 600] s, got {args.action_timeout}")
    if not 1.0 <= args.deadline <= MAX_DEADLINE_S:
        parser.error(f"--deadline must be in [1, {MAX_DEADLINE_S:.0f}] s, got {args.deadline}")
    variants: list[tuple[str, tuple[str, ...]]] = []
    for v in args.variant or ["="]:
        name, _, extra = v.partition("=")
        if not re.fullmatch(r"[A-Za-z0-9_.-]*", name) or any(not a.startswith("--") for a in extra.split()):
            parser.error(f"--variant must be LABEL=--option=value …, got {v!r}")
        variants.append((name, tuple(extra.split())))
    if args.url:
        if args.app_root or args.variant:
            parser.error("--url excludes --app-root and --variant (this script does not start that server)")
        try:
            loopback_url(args.url)
        except ValueError as exc:
            parser.error(str(exc))
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} is missing: apt-get install -y chromium")

    roots = [None] if args.url else [p.resolve() for p in (args.app_root or [ROOT])]
    labels = [("url" if r is None else (r.name or "root")) for r in roots]
    if len(set(labels)) < len(labels):
        labels = [f"{chr(ord('A') + i)}-{lab}" for i, lab in enumerate(labels)]
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    snapshots = None
    if args.snapshot and not args.url:
        snapshots = Path(tempfile.mkdtemp(prefix="privlens-load-snapshot-"))
        roots = [snapshot(r, snapshots / f"{i}-{r.name}", args.snapshot) for i, r in enumerate(roots)]  # type: ignore[union-attr]
    try:
        results = _passes(args, roots, labels, variants, stamp)
    finally:
        if snapshots is not None:
            shutil.rmtree(snapshots, ignore_errors=True)
    print_table(results)
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    doc = {
        "format": "privlens.load/1",
        "commit": commit,
        "cores": os.cpu_count(),
        "argv": sys.argv[1:],
        "passes": results,
    }
    path = args.out / f"load-{stamp}.json"
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False))
    print(f"\nwritten: {path}")


if __name__ == "__main__":
    main()
