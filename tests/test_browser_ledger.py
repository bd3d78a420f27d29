"""The ledger in a real headless Chromium: two sends survive a reload, a shared link opened in the same
tab, and a kill -9 of the server followed by a restart (the browser's ledger cookie brings them back).

The server is started directly (``python -m privlens``, what ``make run`` runs) so that the test can kill
and restart it; its ledgers go to a folder of this test's own. Screenshots go to ``artifacts/screenshots/``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._dashboard import ROOT
from tests.test_browser import ARGS, CHROMIUM, SHOTS, _free_port, _settled, _wait_healthy

pytestmark = pytest.mark.browser


class _Server:
    """``python -m privlens`` on one port, in its own process group; :meth:`kill` is a kill -9."""

    def __init__(self, port: int, env: dict[str, str], log: Path) -> None:
        self.port, self.env, self.log = port, env, log
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        cmd = [sys.executable, "-m", "privlens", "--server.address=127.0.0.1", f"--server.port={self.port}",
               "--server.headless=true", "--browser.gatherUsageStats=false"]
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        _wait_healthy(self.port, self.proc)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=20)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[_Server]:
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is missing: `make test` installs it (apt-get install chromium)")
    env = dict(os.environ, PRIVLENS_LEDGER_DIR=str(tmp_path / "ledgers"),
               PRIVLENS_CACHE_DIR=str(tmp_path / "phi-cache"))
    env.pop("PRIVLENS_RESULTS_DIR", None)
    SHOTS.mkdir(parents=True, exist_ok=True)
    srv = _Server(_free_port(), env, SHOTS.parent / "browser-ledger-server.log")
    srv.start()
    try:
        yield srv
    finally:
        srv.kill()


def test_sends_survive_a_reload_a_shared_link_and_a_server_restart(server: _Server) -> None:
    from playwright.sync_api import expect, sync_playwright

    base = f"http://127.0.0.1:{server.port}"
    restored = "Your ledger was restored: 2 releases"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1500})
            page.goto(f"{base}/release?dataset=digits&mech=PTR&eps=1.0", timeout=120_000)
            main = page.locator('[data-testid="stMain"]')
            for n in (1, 2):
                send = page.get_by_role("button", name=re.compile(r"Send (this|another) release"))
                send.click(timeout=120_000)
                sent = main.get_by_text(f"Sent: release #{n} is in the session ledger", exact=False)
                expect(sent).to_be_visible(timeout=120_000)
                _settled(page)
            cookies = [c for c in page.context.cookies() if c["name"].startswith("privlens_ledger_")]
            assert len(cookies) == 1 and cookies[0]["sameSite"] == "Strict" and len(cookies[0]["value"]) == 43
            assert cookies[0]["value"] not in page.url

            page.reload(timeout=120_000)  # a browser reload: a new session
            page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name="Accountant").click()
            expect(page.get_by_text(restored, exact=False)).to_be_visible(timeout=120_000)
            expect(page.get_by_text("Composed per image", exact=True)).to_be_visible()
            _settled(page)
            page.screenshot(path=str(SHOTS / "10-ledger-after-reload.png"), full_page=True)

            page.goto(f"{base}/accountant?dataset=digits&eps=2.0", timeout=120_000)  # a link, same tab
            expect(page.get_by_text(restored, exact=False)).to_be_visible(timeout=120_000)

            server.kill()  # kill -9 after the releases were delivered
            server.start()
            page.goto(f"{base}/accountant?dataset=digits", timeout=120_000)
            expect(page.get_by_text(restored, exact=False)).to_be_visible(timeout=120_000)
            _settled(page)
            page.screenshot(path=str(SHOTS / "11-ledger-after-server-restart.png"), full_page=True)

            fresh = browser.new_page()  # another browser profile's page has no cookie: a new ledger, said
            fresh.goto(f"{base}/accountant?dataset=digits", timeout=120_000)
            expect(fresh.get_by_text("this browser brought no ledger key", exact=False)).to_be_visible(
                timeout=120_000
            )
        finally:
            browser.close()
