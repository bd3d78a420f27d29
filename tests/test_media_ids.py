"""Media ids name nothing private (issue 30, item 2).

Streamlit serves every image and download at ``/media/<id>`` to anyone, without a session; its own id
is a plain hash of the bytes, so whoever holds a candidate image could compute the id offline and
learn from a 200 that someone has it open. :mod:`privlens.media` keys the id under a per-process secret
and the session. Checked here on the function, through Streamlit's storage, and end to end: a real
browser opens the Release page with an upload, and every ``/media/`` URL it registers is fetched
with a plain HTTP client (no session): none is Streamlit's content hash of what it serves, and the
content hash itself answers 404.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import urllib.error
import urllib.request
from email.message import Message
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests._dashboard import ROOT, sample_png
from tests.test_browser import ARGS, CHROMIUM, _settled, server, upload  # noqa: F401  (server is a fixture)

_PARTIAL_HASH_THRESHOLD = 1_048_576  # Streamlit 1.67.0, memory_media_file_storage.py
_PARTIAL_HASH_SAMPLE_SIZE = 65_536


def streamlit_content_id(data: bytes, mimetype: str, filename: str | None = None) -> str:
    """Streamlit 1.67.0's own media id (``memory_media_file_storage._calculate_file_id``), recomputed
    here: the app, which other tests run in this process, replaces that function."""
    try:
        h = hashlib.blake2b(digest_size=16, usedforsecurity=False)
    except (TypeError, ValueError):  # FIPS builds: Streamlit falls back to MD5
        h = hashlib.new("md5", usedforsecurity=False)
    h.update(f"{len(data)}:".encode())
    if len(data) > _PARTIAL_HASH_THRESHOLD:
        n = _PARTIAL_HASH_SAMPLE_SIZE
        mid = (len(data) - n) // 2
        for part in (data[:n], data[mid : mid + n], data[-n:]):
            h.update(part)
    else:
        h.update(data)
    h.update(mimetype.encode())
    if filename is not None:
        h.update(filename.encode())
    return h.hexdigest()


def _fresh_python(code: str) -> str:
    """stdout of ``code`` in a new interpreter (a new server process, as far as secrets go)."""
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    return out.stdout.strip()


def test_the_recomputed_content_id_is_streamlits() -> None:
    """The browser test below is only as good as this reimplementation: compare it with Streamlit's
    own function in an interpreter where nothing replaced it."""
    code = (
        "from streamlit.runtime.memory_media_file_storage import _calculate_file_id as f\n"
        "big = bytes(range(256)) * 5000\n"
        "print(f(b'abc', 'image/png'), f(b'abc', 'text/html', 'r.html'), f(big, 'application/octet-stream'))"
    )
    expected = _fresh_python(code).split()
    big = bytes(range(256)) * 5000
    got = [
        streamlit_content_id(b"abc", "image/png"),
        streamlit_content_id(b"abc", "text/html", "r.html"),
        streamlit_content_id(big, "application/octet-stream"),
    ]
    assert got == expected


# ------------------------------------------------------------------------------------ the keyed id

PNG = sample_png()


def test_the_id_is_not_the_content_hash_and_is_keyed_per_session() -> None:
    from privlens.media import media_file_id

    ours = media_file_id(PNG, "image/png", "input.png", salt="session:a")
    assert re.fullmatch(r"[0-9a-f]{64}", ours)
    assert ours not in {streamlit_content_id(PNG, "image/png", n) for n in (None, "input.png")}
    assert media_file_id(PNG, "image/png", "input.png", salt="session:a") == ours  # reruns reuse it
    assert media_file_id(PNG, "image/png", "input.png", salt="session:b") != ours  # another user
    assert media_file_id(PNG, "image/png", None, salt="session:a") != ours
    assert media_file_id(PNG, "image/jpeg", "input.png", salt="session:a") != ours
    assert media_file_id(PNG, "image/png", "input.png", salt="session:a", secret=b"k" * 32) != ours
    # outside a script run (a deferred download): a fresh salt, a new id every time
    assert media_file_id(PNG, "image/png") != media_file_id(PNG, "image/png")


def test_two_server_processes_give_the_same_file_different_ids() -> None:
    code = (
        "from pathlib import Path; from privlens.media import media_file_id; "
        f"print(media_file_id(Path({str(_sample_path())!r}).read_bytes(), 'image/png', salt='session:a'))"
    )
    first, second = _fresh_python(code), _fresh_python(code)
    assert re.fullmatch(r"[0-9a-f]{64}", first) and first != second
    assert streamlit_content_id(PNG, "image/png") not in (first, second)


def _sample_path() -> Path:
    return sorted((ROOT / "data" / "samples" / "digits").glob("*.png"))[0]


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch):
    """:func:`privlens.media.install` in this process, Streamlit's own function restored afterwards."""
    from streamlit.runtime import memory_media_file_storage as mms

    from privlens import media

    monkeypatch.setattr(mms, "_calculate_file_id", mms._calculate_file_id)
    media.install()
    media.install()  # idempotent: app.py calls it on every run
    return mms


def test_streamlits_storage_hands_out_keyed_ids(keyed, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through Streamlit's own storage, in two sessions' script runs."""
    import threading
    from types import SimpleNamespace

    from streamlit.runtime.media_file_storage import MediaFileKind
    from streamlit.runtime.scriptrunner_utils.script_run_context import SCRIPT_RUN_CONTEXT_ATTR_NAME

    storage = keyed.MemoryMediaFileStorage("/media")
    ids = {}
    for session in ("a", "b"):
        ctx = SimpleNamespace(session_id=f"session-{session}")
        monkeypatch.setattr(threading.current_thread(), SCRIPT_RUN_CONTEXT_ATTR_NAME, ctx, raising=False)
        ids[session] = storage.load_and_get_id(PNG, "image/png", MediaFileKind.DOWNLOADABLE, "input.png")
        again = storage.load_and_get_id(PNG, "image/png", MediaFileKind.DOWNLOADABLE, "input.png")
        assert again == ids[session]  # one file per session, whatever the reruns
        assert storage.get_file(ids[session] + ".png").content == PNG
    assert ids["a"] != ids["b"]
    assert streamlit_content_id(PNG, "image/png", "input.png") not in ids.values()


def test_a_download_button_and_an_image_in_an_app(keyed) -> None:
    """``st.download_button`` and ``st.image`` in an app: keyed ids (64 hex digits; Streamlit's are
    32), stable across reruns."""
    from streamlit.testing.v1 import AppTest

    def script() -> None:
        from pathlib import Path

        import streamlit as st

        from privlens import media

        media.install()
        data = sorted(Path("data/samples/digits").glob("*.png"))[0].read_bytes()
        st.download_button("Input (PNG)", data, file_name="input.png", mime="image/png")
        st.image(data)

    at = AppTest.from_function(script, default_timeout=60)
    runs = []
    for _ in range(2):
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        runs.append([at.get("download_button")[0].proto.url, at.get("image")[0].proto.imgs[0].url])
    first, second = runs
    assert first == second and all(u.startswith("/mock/media/") for u in first), runs
    assert all(re.fullmatch(r"[0-9a-f]{64}", _media_id(u)) for u in first), first
    assert _media_id(first[0]) != streamlit_content_id(PNG, "image/png", "input.png")


def test_it_fails_closed(keyed, monkeypatch: pytest.MonkeyPatch) -> None:
    """Streamlit's internals changed, or a host's own media storage: an error, never content ids."""
    from types import SimpleNamespace

    from streamlit import runtime

    from privlens import media

    original = keyed.MemoryMediaFileStorage.load_and_get_id

    def load_and_get_id(self, path_or_data, mimetype, kind, filename=None):  # an "upgraded" Streamlit
        return hashlib.md5(path_or_data).hexdigest()

    monkeypatch.setattr(keyed.MemoryMediaFileStorage, "load_and_get_id", load_and_get_id)
    with pytest.raises(media.MediaIdError, match="_calculate_file_id"):
        media.install()
    monkeypatch.setattr(keyed.MemoryMediaFileStorage, "load_and_get_id", original)
    monkeypatch.delattr(keyed, "_calculate_file_id")
    with pytest.raises(media.MediaIdError, match=r"streamlit==1\.67\.0"):
        media.install()
    monkeypatch.setattr(keyed, "_calculate_file_id", media._keyed_file_id, raising=False)
    media.install()

    other = SimpleNamespace(media_file_mgr=SimpleNamespace(_storage=object()))
    monkeypatch.setattr(runtime, "exists", lambda: True)
    monkeypatch.setattr(runtime, "get_instance", lambda: other)
    with pytest.raises(media.MediaIdError, match="not Streamlit's MemoryMediaFileStorage"):
        media.install()


# ------------------------------------------------------------------------------------ end to end


def _is_media(url: str) -> bool:
    """A file Streamlit's media storage serves (not its own bundled /static/media/ fonts)."""
    return urlsplit(url).path.startswith("/media/")


def _media_id(url: str) -> str:
    """The id in ``.../media/<id>.<ext>``."""
    name = urlsplit(url).path.rsplit("/media/", 1)[1]
    return name.split(".", 1)[0]


def _fetch(url: str) -> tuple[int, bytes, Message]:
    """GET with no cookie and no session: what an outsider gets."""
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read(), r.headers
    except urllib.error.HTTPError as err:
        return err.code, b"", err.headers


def _content_ids(data: bytes, headers: Message) -> set[str]:
    """Every id Streamlit would give these bytes: with the served MIME type, with and without the
    served file name (a download is hashed with its ``file_name``, an image without)."""
    mimetype = headers.get_content_type()
    names: set[str | None] = {None}
    if headers.get("Content-Disposition"):
        disposition = Message()
        disposition["Content-Disposition"] = headers["Content-Disposition"]
        names.add(disposition.get_filename())
    return {streamlit_content_id(data, mimetype, name) for name in names}


@pytest.mark.browser
def test_no_media_url_is_a_content_hash(server: str, tmp_path: Path) -> None:  # noqa: F811
    """The Release page with an upload (sent, where the page has a Send button), every picture and
    every download: each URL is fetched as soon as the page registers it, by a client with no session."""
    from playwright.sync_api import expect, sync_playwright

    image = tmp_path / "private.png"
    image.write_bytes(sample_png())
    requested: set[str] = set()
    served: dict[str, str] = {}  # url -> content type, for every URL that answered 200
    derivable: list[str] = []  # URLs whose id is Streamlit's content hash of what they serve
    answered: list[str] = []  # an outsider's offline guess that the server answers

    def check(urls) -> None:
        for url in sorted(set(urls) - set(served)):
            status, data, headers = _fetch(url)
            if status != 200:  # replaced by a later run of the page: no longer served to anyone
                continue
            served[url] = headers.get_content_type()
            ids = _content_ids(data, headers)
            if _media_id(url) in ids:
                derivable.append(urlsplit(url).path)
            ext = Path(urlsplit(url).path).suffix
            for guess in ids:  # what an outsider holding the file would compute, and ask for
                if _fetch(f"{server}/media/{guess}{ext}")[0] != 404:
                    answered.append(guess + ext)

    def registered(page) -> set[str]:
        dom = page.eval_on_selector_all(
            "img[src], a[href], source[src], link[href]", "els => els.map(e => e.src || e.href)"
        )
        return {u for u in [*dom, *requested] if _is_media(u)}

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1700}, accept_downloads=True)
            context.on("request", lambda r: requested.add(r.url))
            page = context.new_page()
            page.goto(f"{server}/release?dataset=digits&eps=1.0&R=0.25", timeout=120_000)
            main = page.locator('[data-testid="stMain"]')
            expect(main.locator("h1", has_text="Release")).to_be_visible(timeout=90_000)
            main.get_by_text("Upload your own").click()
            upload(page, image)
            expect(main.get_by_text("private.png", exact=False).first).to_be_visible(timeout=120_000)
            expect(main.locator("img").first).to_be_visible(timeout=120_000)
            _settled(page)
            check(registered(page))
            send = main.get_by_role("button", name=re.compile(r"\bSend\b"))
            if send.count():  # the sent release's pictures and downloads too
                send.first.click()
                expect(main.get_by_text("Sent", exact=False).first).to_be_visible(timeout=120_000)
                _settled(page)
                check(registered(page))
            buttons = main.locator('[data-testid="stDownloadButton"] button:visible')
            n_buttons = buttons.count()
            assert n_buttons >= 2, "the Release page offers its input and its report for download"
            for i in range(n_buttons):
                with page.expect_download(timeout=120_000) as download:
                    buttons.nth(i).click()
                check([download.value.url])
                _settled(page)
            check(registered(page))
        finally:
            browser.close()
    pictures = [u for u, kind in served.items() if kind.startswith("image/")]
    assert len(pictures) >= 2 and len(served) > len(pictures), served  # pictures and downloads
    assert not derivable, f"Streamlit's content hash of what they serve: {derivable} (of {len(served)})"
    assert not answered, f"an outsider's offline guess answers: {answered}"
