"""End to end in a real headless Chromium (Debian's /usr/bin/chromium driven by Playwright).

The app is started exactly as the README says (``make run PORT=<free port>``); the browser opens a
shared deep link to the Release page, uploads a sample image, sees its numbers (nothing drawn before Send),
moves ε and sees the page re-render (and the URL follow), then uploads a file that is not an image and
sees the refusal; a bad link (``?eps=-1``) releases nothing, and nothing is drawn or charged until Send.
Screenshots go to ``artifacts/screenshots/``. The server's process group is killed
at the end, always.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from privcore.defaults import OPENING_EPSILON
from tests._dashboard import ROOT, sample_png

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
SHOTS = ROOT / "artifacts" / "screenshots"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(port: int, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"no healthy server on port {port} after {timeout:.0f} s")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    """``make run PORT=<port>`` in its own process group, once per test module (each test opens its own
    browser session); yields the base URL; kills the group."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is missing: `make test` installs it (apt-get install chromium)")
    port = _free_port()
    # `make test` creates the install stamp first; run straight from a checkout, skip the reinstall.
    cmd = ["make", "run", f"PORT={port}"]
    if not (ROOT / ".venv" / ".installed").exists():
        cmd = ["make", "-o", "install", "run", f"PORT={port}"]
    env = dict(os.environ, PRIVLENS_CACHE_DIR=str(tmp_path_factory.getbasetemp() / "phi-cache"))
    env.pop("PRIVLENS_RESULTS_DIR", None)
    SHOTS.mkdir(parents=True, exist_ok=True)
    log = open(SHOTS.parent / "browser-server.log", "w")  # closed in the finally below
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        _wait_healthy(port, proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()


def upload(page, path: Path) -> None:
    """Give the page's file uploader ``path`` (a loaded machine may take a while to draw it)."""
    uploader = page.locator('[data-testid="stFileUploader"] input[type="file"]')
    uploader.set_input_files(str(path), timeout=120_000)


def _settled(page) -> None:
    """Wait until Streamlit has finished the current run: no running indicator, no stale element
    left from the previous run, every picture loaded."""
    page.wait_for_timeout(300)
    page.wait_for_function(
        """() => !document.querySelector('[data-testid="stStatusWidget"]')
                 && document.querySelectorAll('[data-stale="true"]').length === 0
                 && [...document.images].every(img => img.complete)""",
        timeout=90_000,
    )
    page.wait_for_timeout(300)


def _metric(page, label: str) -> str:
    box = page.locator('[data-testid="stMetric"]', has_text=label)
    return box.locator('[data-testid="stMetricValue"]').inner_text(timeout=120_000).strip()


def test_upload_release_and_move_epsilon(server: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    image = tmp_path / "my-digit.png"
    image.write_bytes(sample_png())
    bad = tmp_path / "notes.png"
    bad.write_bytes(b"these are my notes, not a picture\n" * 8)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1700})
            link = f"{server}/release?dataset=digits&mech=PTR&eps=1.0&R=0.25"  # a shared deep link
            page.goto(link, timeout=120_000)
            expect(page.locator("h1", has_text="Release")).to_be_visible(timeout=90_000)
            expect(page.get_by_text("Settings", exact=True)).to_be_visible()  # the shared sidebar is there
            page.get_by_text("Upload your own").click()
            upload(page, image)
            ready = page.locator('[data-testid="stMetric"]', has_text="P[this image is released]")
            expect(ready).to_be_visible(timeout=120_000)  # what the release would be: no draw before Send
            _settled(page)
            outcome = page.locator(
                '[data-testid="stAlert"]', has_text=re.compile(r"Released \(|⊥ \(nothing released\)")
            )
            assert outcome.count() == 0
            assert "my-digit.png" in page.content()
            scale_before = _metric(page, "noise scale Δp·R/ε")
            phi = _metric(page, "φ (private, yours only)")
            page.screenshot(path=str(SHOTS / "01-release-uploaded.png"), full_page=True)

            slider = page.locator('[data-testid="stSidebar"] .st-key-w_epsilon input[type="range"]')
            slider.focus()
            slider.press("ArrowRight")  # the total ε: 1 → 1.5 (PTR's: 0.5 → 0.75)
            expect(page).to_have_url(re.compile(r"eps=1\.5"), timeout=120_000)
            _settled(page)
            scale_after = _metric(page, "noise scale Δp·R/ε")
            assert float(scale_after) == pytest.approx(float(scale_before) / 1.5, rel=2e-3)
            assert _metric(page, "φ (private, yours only)") == phi  # φ reused: no new certification
            expect(ready).to_be_visible()
            page.screenshot(path=str(SHOTS / "02-release-epsilon-moved.png"), full_page=True)

            upload(page, bad)
            expect(page.get_by_text("This file cannot be used")).to_be_visible(timeout=120_000)
            _settled(page)
            assert page.locator('[data-testid="stMetric"]').count() == 0  # nothing released
            page.screenshot(path=str(SHOTS / "03-release-bad-upload.png"), full_page=True)
        finally:
            browser.close()
    assert shutil.which("make")


def test_bad_link_releases_nothing_and_nothing_is_charged_before_send(server: str, tmp_path: Path) -> None:
    """``/release?eps=-1``: an error at the top names the parameter, its value and the range, and no
    certification or outcome appears; fixed in the sidebar, the page says the (shared) server holds the
    image and only a sent release goes to the recipient, the Accountant's ledger stays empty until Send
    is pressed (which draws), then holds one release."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1300})
            page.goto(f"{server}/release?eps=-1", timeout=120_000)
            main = page.locator('[data-testid="stMain"]')
            error = main.locator('[data-testid="stAlert"]').first
            expect(error).to_contain_text("eps='-1'", timeout=90_000)
            expect(error).to_contain_text("a number in [0.01, 100]")
            _settled(page)
            assert page.locator('[data-testid="stMetric"]').count() == 0  # nothing certified or released
            assert "eps=-1" in page.url  # the link keeps what must be fixed
            page.screenshot(path=str(SHOTS / "04-release-bad-link.png"), full_page=True)

            page.get_by_role("button", name="Continue with the sidebar's values").click()
            preview = main.get_by_text("The server holds your image for this session", exact=False)
            expect(preview).to_be_visible(timeout=120_000)
            _settled(page)
            expect(page).to_have_url(re.compile(rf"eps={re.escape(str(OPENING_EPSILON))}"), timeout=30_000)
            page.screenshot(path=str(SHOTS / "05-release-preview.png"), full_page=True)

            nav = page.locator('[data-testid="stSidebarNav"]')
            nav.get_by_role("link", name="Accountant").click()
            expect(page.get_by_text("Nothing released yet", exact=False)).to_be_visible(timeout=120_000)
            nav.get_by_role("link", name="Release").click()
            page.get_by_role("button", name=re.compile(r"Send (this release|⊥)")).click(timeout=90_000)
            expect(main.get_by_text("Sent: release #1 is in the session ledger", exact=False)).to_be_visible(
                timeout=120_000
            )
            _settled(page)
            page.screenshot(path=str(SHOTS / "06-release-sent.png"), full_page=True)
            with page.expect_download(timeout=120_000) as download:
                page.get_by_role("button", name="Session report (HTML)").click()
            assert download.value.suggested_filename == "privlens-session-report.html"
            saved = tmp_path / download.value.suggested_filename
            download.value.save_as(saved)
            report = saved.read_text(encoding="utf-8")
            ok = "privlens session report" in report and "privlens.release/1" in report  # the sent release
            current = f"current \\u03b5 = {OPENING_EPSILON:g}"
            assert ok and current in report and "(sent)" in report, "report lacks parts"
            report_page = browser.new_page()
            report_page.goto(saved.as_uri())  # it opens
            expect(report_page.locator("h1")).to_have_text("privlens session report")
            report_page.close()
            nav.get_by_role("link", name="Accountant").click()
            expect(page.get_by_text("Composed per image", exact=True)).to_be_visible(timeout=120_000)
            _settled(page)
            page.screenshot(path=str(SHOTS / "07-accountant-one-release.png"), full_page=True)
        finally:
            browser.close()


def test_upload_on_the_inference_privacy_page(server: str, tmp_path: Path) -> None:
    """An upload on the Inference-privacy page shows what each IP mechanism would release, with its
    guarantee and no draw; Send draws and charges one of them, which then shows its release."""
    from playwright.sync_api import expect, sync_playwright

    image = tmp_path / "my-digit.png"
    image.write_bytes(sample_png())
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 2200})
            page.goto(f"{server}/inference_privacy?dataset=digits&mech=Gauss-Input&delta=1e-05",
                      timeout=120_000)
            main = page.locator('[data-testid="stMain"]')
            expect(main.get_by_text("Upload your own")).to_be_visible(timeout=90_000)
            main.get_by_text("Upload your own").click()
            upload(page, image)
            from privcore.mechanisms import registry

            columns = len(registry.names(page="inference_privacy"))  # one per mechanism of the page
            assert columns == 4  # Gauss-Input, Gauss-Output, Lap-Output, LDP-Image
            expect(main.get_by_text("Guarantee if sent", exact=False)).to_have_count(columns, timeout=120_000)
            expect(main.get_by_text("nothing is drawn yet", exact=False)).to_have_count(columns)
            page.get_by_role("button", name="Send Gauss-Input").click()
            released = main.get_by_text("the noisy image it released", exact=False)
            expect(released).to_be_visible(timeout=120_000)
            page.get_by_role("button", name="Send Lap-Output").click()
            expect(page.get_by_role("button", name="Send another Lap-Output")).to_be_visible(timeout=120_000)
            _settled(page)
            assert "my-digit.png" in page.content()
            page.screenshot(path=str(SHOTS / "08-inference-privacy-upload.png"), full_page=True)
        finally:
            browser.close()
