"""No request leaves the machine (issue 30, item 8): a privacy tool that asks a third party for anything
tells it who is using the tool, and when.

The server itself: started with ``make run``'s own command line on every interface (``HOST=0.0.0.0``),
with an audit hook (``sys.addaudithook``, loaded by a ``sitecustomize``) that records every name lookup
and every connect or send to a host other than the loopback. Streamlit, left alone, looks up the
machine's internal IP (a UDP connect to a public resolver) and its external IP (an HTTP request to
checkip.amazonaws.com) when it prints its URLs and when a cross-origin WebSocket arrives.

A real headless Chromium tours every page of the dashboard on ``make run`` (the sidebar's navigation,
page by page, each settled) and records every request the pages make — documents, scripts, styles,
fonts, images, fetches, websockets — and every resource URL in the final DOM of each page (the tab
icon included: Chromium fetches a favicon itself, outside the page's requests). Any host other than
the loopback fails the test. Requests to other hosts are aborted, never sent, so the test is the same
offline and online. Chromium's own background traffic (updates, safe browsing) is kept out by the
launch flags and is not the page's doing.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests._dashboard import ROOT
from tests.test_browser import (  # noqa: F401  (server is a fixture)
    ARGS,
    CHROMIUM,
    _free_port,
    _settled,
    _wait_healthy,
    server,
)

LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
LOCAL_SCHEMES = {"data", "blob", "about", "javascript"}  # never a network request
# every resource a page can name in its DOM (icons, styles, scripts, images, media, frames)
RESOURCES_JS = """() => [...document.querySelectorAll(
    'link[href], script[src], img[src], img[srcset], source[src], source[srcset], iframe[src], '
    + 'video[src], video[poster], audio[src], object[data], embed[src], image[href], use[href]')]
  .flatMap(e => [e.href && (e.href.baseVal ?? e.href), e.src, e.poster, e.data,
                 ...(e.srcset || '').split(',').map(s => s.trim().split(/\\s+/)[0])])
  .filter(u => typeof u === 'string' && u.length > 0)
  .map(u => new URL(u, document.baseURI).href)"""


def is_local(url: str) -> bool:
    """Whether fetching ``url`` stays on this machine."""
    parts = urlsplit(url)
    if parts.scheme in LOCAL_SCHEMES:
        return True
    return (parts.hostname or "") in LOOPBACK


def test_is_local() -> None:
    assert is_local("http://127.0.0.1:8501/media/x.png") and is_local("ws://localhost:1/_stcore/stream")
    assert is_local("http://[::1]:8501/") and is_local("data:image/svg+xml,<svg/>") and is_local("blob:x")
    assert not is_local("https://fonts.gstatic.com/s/i/x/24px.svg")
    assert not is_local("http://127.0.0.1.evil.example/") and not is_local("//cdn.example/x.js")


@pytest.mark.browser
def test_a_tour_of_every_page_asks_no_other_host(server: str) -> None:  # noqa: F811
    from playwright.sync_api import expect, sync_playwright

    requested: list[tuple[str, str]] = []  # (page, url)
    named: list[tuple[str, str]] = []
    where = ["first load"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1300})
            context.on("request", lambda r: requested.append((where[0], r.url)))
            context.on("websocket", lambda ws: requested.append((where[0], ws.url)))
            context.route(
                "**/*", lambda route: route.continue_() if is_local(route.request.url) else route.abort()
            )
            page = context.new_page()
            page.on("websocket", lambda ws: requested.append((where[0], ws.url)))
            page.goto(server, timeout=120_000)
            nav = page.locator('[data-testid="stSidebarNav"]')
            # app.py's navigation (not the pages/ folder's, which Streamlit shows until app.py has run)
            expect(nav.get_by_role("link", name="Home", exact=True)).to_be_visible(timeout=90_000)
            _settled(page)
            titles = [t.strip() for t in nav.get_by_role("link").all_inner_texts()]
            titles = [t.splitlines()[-1].strip() for t in titles if t]
            assert len(titles) >= 9 and "Home" in titles, titles  # app.py's navigation, every page
            for title in titles:
                where[0] = title
                nav.get_by_role("link", name=title, exact=True).click()
                expect(page.locator('[data-testid="stMain"] h1').first).to_be_visible(timeout=120_000)
                _settled(page)
                named += [(title, u) for u in page.evaluate(RESOURCES_JS)]
        finally:
            browser.close()
    assert any(u.startswith(server) for _, u in requested), "no request recorded at all"
    outside: dict[str, set[str]] = {}
    for title, url in requested + named:
        if not is_local(url):
            outside.setdefault(url, set()).add(title)
    assert not outside, "requests leaving the machine: " + "; ".join(
        f"{url} (on {', '.join(sorted(pages))})" for url, pages in sorted(outside.items())
    )


# --------------------------------------------------------------------------- the server's own requests

#: Loaded by the server's interpreter before anything else (PYTHONPATH): appends one line per name
#: lookup, connect or send whose destination is not this machine's loopback (or a wildcard to bind).
AUDIT_SITECUSTOMIZE = r"""
import ipaddress, os, socket, sys

_LOG = os.environ["PRIVLENS_NET_AUDIT"]
_EVENTS = {"socket.connect", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo",
           "socket.gethostbyname", "socket.gethostbyname_ex", "socket.gethostbyaddr",
           "http.client.connect", "urllib.Request"}


def _local(host):
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    host = str(host).strip("[]")
    if host == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False
    return ip.is_loopback or ip.is_unspecified


def _hook(event, args):
    if event not in _EVENTS:
        return
    if event == "urllib.Request":
        host = args[0].split("/")[2] if "://" in args[0] else args[0]
    elif event in ("socket.connect", "socket.sendto", "socket.sendmsg"):
        sock, addr = args[0], args[1]
        if getattr(sock, "family", None) == getattr(socket, "AF_UNIX", None) or not isinstance(addr, tuple):
            return
        host = addr[0]
    else:
        host = args[1] if event == "http.client.connect" else args[0]
    if not _local(host):
        with open(_LOG, "a", encoding="utf-8") as f:
            f.write(f"{event} {host!r}\n")


sys.addaudithook(_hook)
with open(_LOG + ".loaded", "w", encoding="utf-8") as f:
    f.write(str(os.getpid()))
"""


def _audited_env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose Python processes load the audit hook, and the log it writes."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(AUDIT_SITECUSTOMIZE, encoding="utf-8")
    log = tmp_path / "outbound.log"
    path = os.pathsep.join(p for p in (str(site), str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PRIVLENS_NET_AUDIT=str(log), PYTHONPATH=path), log


def test_the_audit_hook_records_lookups_and_connects_off_the_machine(tmp_path: Path) -> None:
    env, log = _audited_env(tmp_path)
    code = (
        "import socket\n"
        "for host in ('localhost', '127.0.0.1', '0.0.0.0', None):\n"
        "    try: socket.getaddrinfo(host, 80)\n"
        "    except OSError: pass\n"
        "try: socket.getaddrinfo('checkip.example.invalid', 80)\n"
        "except OSError: pass\n"
        "for dest in (('127.0.0.1', 9), ('192.0.2.1', 1)):\n"
        "    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:\n"
        "        try: s.connect(dest)\n"
        "        except OSError: pass\n"
    )
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
    assert log.read_text(encoding="utf-8").splitlines() == [
        "socket.getaddrinfo 'checkip.example.invalid'", "socket.connect '192.0.2.1'"]


def make_run_command(host: str, port: int) -> list[str]:
    """The command ``make run HOST=host PORT=port`` starts the server with, read from the Makefile's run
    recipe (its ``$(PY)`` line, continuations joined), with this interpreter for ``$(PY)``."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^run:.*\n((?:\t.*\n)+)", text, re.MULTILINE)
    assert recipe, "the Makefile has no run target"
    joined = re.sub(r"\\\n\s*", " ", recipe.group(1))
    (line,) = [ln.strip() for ln in joined.splitlines() if ln.strip().startswith("$(PY) ")]
    line = line.replace("$(HOST)", host).replace("$(PORT)", str(port))
    assert "$(" not in line.replace("$(PY)", ""), line
    return [sys.executable if w == "$(PY)" else w for w in shlex.split(line)]


def _websocket_handshake(port: int, origin: str) -> bytes:
    """Open the dashboard's WebSocket with a foreign Origin (the server's origin check); the answer's
    first bytes."""
    request = (
        f"GET /_stcore/stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        f"Origin: {origin}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request.encode())
        try:
            return s.recv(4096)
        except OSError:
            return b""


def test_make_run_command_is_read_from_the_makefile() -> None:
    cmd = make_run_command("0.0.0.0", 8765)
    assert cmd[0] == sys.executable and "--server.address=0.0.0.0" in cmd and "--server.port=8765" in cmd


def test_the_server_on_every_interface_sends_nothing_out(tmp_path: Path) -> None:
    """``HOST=0.0.0.0 make run``: starting, printing its URLs, serving a page and answering a
    cross-origin WebSocket, the server looks up no name and connects to no host off this machine."""
    env, log = _audited_env(tmp_path)
    env["PRIVLENS_CACHE_DIR"] = str(tmp_path / "phi-cache")
    env.pop("PRIVLENS_RESULTS_DIR", None)
    port = _free_port()
    out = tmp_path / "server.log"
    with open(out, "w") as sink:
        proc = subprocess.Popen(make_run_command("0.0.0.0", port), cwd=ROOT, env=env, stdout=sink,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_healthy(port, proc)
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as r:
            assert r.status == 200
        for origin in ("http://evil.example", f"http://192.0.2.7:{port}"):
            _websocket_handshake(port, origin)
        time.sleep(2.0)  # anything the handshakes started (a lookup in a thread) has had time to start
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    printed = out.read_text(encoding="utf-8", errors="replace")
    assert Path(f"{log}.loaded").exists(), "the audit hook was not loaded in the server"
    assert "You can now view your Streamlit app" in printed, printed  # the URLs were printed
    attempts = log.read_text(encoding="utf-8") if log.exists() else ""
    assert attempts == "", f"the server tried to reach other hosts:\n{attempts}\nserver output:\n{printed}"
