"""User-supplied text in a real browser (headless Chromium on ``make run``): a URL parameter or a file name
that is a Markdown link or HTML is shown as text, never rendered as a link (GFM turns even bare URLs
into links, so escaping punctuation is not enough; the pages show such values as code spans)."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

import pytest

from tests._dashboard import sample_png
from tests.test_browser import ARGS, CHROMIUM, _settled, server, upload  # noqa: F401  (server is a fixture)

pytestmark = pytest.mark.browser

EVIL_LINK = "[click here](https://evil.example/login)"
EVIL_HTML = "<a href='https://evil.example/x'>PTR</a>"


def test_url_values_and_file_names_are_never_links(server: str, tmp_path: Path) -> None:  # noqa: F811
    from playwright.sync_api import expect, sync_playwright

    image = tmp_path / "[see this](https:⁄⁄evil.example) https-evil.example.png"
    image.write_bytes(sample_png())
    query = urllib.parse.urlencode({"dataset": "digits", "model": EVIL_LINK, "mech": EVIL_HTML})
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1400})
            page.goto(f"{server}/release?{query}", timeout=60_000)
            main = page.locator('[data-testid="stMain"]')
            expect(main.get_by_text("is not allowed", exact=False).first).to_be_visible(timeout=90_000)
            _settled(page)
            shown = main.inner_text()
            assert EVIL_LINK in shown and EVIL_HTML in shown  # the values are shown, as text
            assert page.locator('a[href*="evil.example"]').count() == 0
            page.get_by_role("button", name="Continue with the sidebar's values").click()

            page.get_by_text("Upload your own").click()
            upload(page, image)
            expect(page.locator('[data-testid="stMetric"]').first).to_be_visible(timeout=120_000)
            _settled(page)
            # the same session on another page: the name in the current-image caption
            page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name="Neighbourhood").click()
            expect(page.get_by_text("see this", exact=False).first).to_be_visible(timeout=90_000)
            _settled(page)
            assert page.locator('a[href*="evil.example"]').count() == 0
        finally:
            browser.close()


def test_a_page_path_that_does_not_exist_is_named(server: str) -> None:  # noqa: F811
    """``/nonsense`` (Streamlit runs Home for it, with at most a generic dialog): an error at the top names
    the path and the known pages; a ``?page=`` that is no page, the same."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1200})
            for url, shown in (("/nonsense", "/nonsense"), ("/?page=nonsense", "?page=nonsense")):
                page.goto(f"{server}{url}", timeout=60_000)
                main = page.locator('[data-testid="stMain"]')
                error = main.locator('[data-testid="stAlert"]', has_text="does not exist")
                expect(error).to_contain_text(f"The page {shown} does not exist", timeout=90_000)
                expect(error).to_contain_text("Release (/release)")
                expect(error).to_contain_text("Mechanism lab (/mechanism_lab)")
                expect(main.locator("h1", has_text="privlens")).to_be_visible()  # Home, below the error
        finally:
            browser.close()
