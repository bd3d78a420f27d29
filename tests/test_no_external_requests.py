"""No request leaves the machine (issue 30, item 8): a privacy tool that asks a third party for anything
tells it who is using the tool, and when.

A real headless Chromium tours every page of the dashboard on ``make run`` (the sidebar's navigation,
page by page, each settled) and records every request the pages make — documents, scripts, styles,
fonts, images, fetches, websockets — and every resource URL in the final DOM of each page (the tab
icon included: Chromium fetches a favicon itself, outside the page's requests). Any host other than
the loopback fails the test. Requests to other hosts are aborted, never sent, so the test is the same
offline and online. Chromium's own background traffic (updates, safe browsing) is kept out by the
launch flags and is not the page's doing.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.test_browser import ARGS, CHROMIUM, _settled, server  # noqa: F401  (server is a fixture)

pytestmark = pytest.mark.browser

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
