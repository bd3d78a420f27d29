"""Deployment setting (``PRIVLENS_DEPLOYMENT``): in ``shared`` mode per-image φ never reaches the
disk cache; in every mode a session is told nothing about a cache hit it did not create (AppTest,
two sessions of the Release page on the shipped digits models); and the Release and
Inference-privacy pages say where the image is in the deployment's own terms (issue 30, item 7)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from privcore.lipschitz.certifier import Certifier
from privlens import evaluation
from privlens.deployment import DEFAULT_DEPLOYMENT, custody_text, deployment, image_cache, loopback_only
from tests._dashboard import ROOT, app, isolate, texts


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path_factory)
    monkeypatch.setenv("PRIVLENS_CACHE_DIR", str(tmp_path / "cache"))  # empty: hits only from this test
    # about the user's image: PTR's φ table of the (public) test images, which goes to the disk cache in
    # every deployment (docs/TRUST.md), would add rows and decisions of its own
    monkeypatch.setenv("PRIVLENS_CERTIFIED_IMAGES", "0")
    assert evaluation.settle(300.0)  # one an earlier test started has finished


def test_the_setting_is_validated_and_defaults_to_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRIVLENS_DEPLOYMENT", raising=False)
    assert deployment() == DEFAULT_DEPLOYMENT == "shared" and image_cache() is None
    monkeypatch.setenv("PRIVLENS_DEPLOYMENT", " Personal ")
    assert deployment() == "personal" and image_cache() is True
    monkeypatch.setenv("PRIVLENS_DEPLOYMENT", "multi-user")
    allowed = r"PRIVLENS_DEPLOYMENT must be one of 'shared', 'personal', got 'multi-user'"
    with pytest.raises(ValueError, match=allowed):
        deployment()


def _session(monkeypatch: pytest.MonkeyPatch) -> tuple[AppTest, str, int]:
    """A fresh browser session on the Release page at R = 0.2: (app, status label, decisions made)."""
    calls = [0]
    real = Certifier.decide

    def counting(self, *a, **k):
        calls[0] += 1
        return real(self, *a, **k)

    with monkeypatch.context() as m:
        m.setattr(Certifier, "decide", counting)
        at = app("release", query={"mech": "PTR", "R": "0.2"})  # φ is PTR's: the per-image certification
    (status,) = at.status
    assert status.state == "complete"
    shown = texts(at) + status.label
    assert "cache" not in shown.lower() and " s)" not in status.label  # no source, no duration
    return at, status.label, calls[0]


def _rows(cache_dir: Path) -> dict[str, int]:
    db_path = cache_dir / "cache.sqlite3"
    if not db_path.exists():
        return {}
    db = sqlite3.connect(db_path)
    rows = dict(db.execute("SELECT kind, COUNT(*) FROM entries GROUP BY kind").fetchall())
    db.close()
    return rows


def test_shared_mode_keeps_per_image_phi_off_the_disk(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PRIVLENS_DEPLOYMENT", "shared")
    _, first, made = _session(monkeypatch)
    assert made > 0 and first.startswith("Certified (")
    rows = _rows(tmp_path / "cache")
    assert "phi" not in rows and "certificate" not in rows, rows  # model-level tables only
    _, second, made_again = _session(monkeypatch)  # another user, same image: certified anew
    assert made_again == made and second == first


def test_personal_mode_reuses_the_disk_and_says_nothing_about_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PRIVLENS_DEPLOYMENT", "personal")
    _, first, made = _session(monkeypatch)
    assert made > 0 and _rows(tmp_path / "cache").get("phi") == 1
    _, second, made_again = _session(monkeypatch)  # a later session: φ read from the disk …
    assert made_again <= 1 < made  # (privcore decides U(z, R*) ≤ Δp of a disk hit once more, no bisection)
    assert second == first  # … reported word for word as the computation was


def test_a_misconfigured_deployment_releases_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVLENS_DEPLOYMENT", "everyone")
    at = app("release", query={"R": "0.2"})
    assert any("PRIVLENS_DEPLOYMENT" in e.value and "Nothing was released" in e.value for e in at.error)
    assert not at.metric and not at.success


@pytest.mark.parametrize(
    "address,loopback",
    [
        ("127.0.0.1", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("127.0.1.1", True),
        ("0.0.0.0", False),  # every interface
        ("", False),  # unset: Streamlit listens on every interface
        (None, False),
        ("192.168.1.5", False),
        ("example.org", False),
    ],
)
def test_loopback_only_is_the_loopback_interface(address: str | None, loopback: bool) -> None:
    assert loopback_only(address) is loopback


def test_the_wording_says_where_the_image_is_in_each_deployment() -> None:
    for address in ("127.0.0.1", "0.0.0.0", None):
        shared = custody_text("shared", address=address)
        assert "The server holds your image for this session" in shared
        assert "Only a release you send goes to the recipient" in shared
        assert "left your device" not in shared
        remote = custody_text("personal", address=address)
        if address == "127.0.0.1":  # personal on localhost: the one place where it is true
            assert "Nothing has left your device" in remote
        else:
            assert "left your device" not in remote and "The server holds your image" in remote
        assert "Only a release you send goes to the recipient" in remote
    with pytest.raises(ValueError, match="mode must be one of"):
        custody_text("everyone", address="127.0.0.1")


def _where(at: AppTest) -> str:
    (text,) = [c.value for c in at.caption if "your image" in c.value and "recipient" in c.value]
    return text


@pytest.mark.parametrize("mode", ["shared", "personal"])
def test_both_pages_say_where_the_image_is(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """The repository's .streamlit/config.toml listens on 127.0.0.1 (what ``make run`` does)."""
    from streamlit import config

    monkeypatch.setenv("PRIVLENS_DEPLOYMENT", mode)
    at = app("release")
    for page in ("release", "inference_privacy"):
        at.switch_page(str(ROOT / "pages" / f"{page}.py")).run()
        assert not at.exception, page
        assert _where(at) == custody_text(mode, address="127.0.0.1"), page
        assert ("left your device" in texts(at)) is (mode == "personal"), page
    before = config.get_option("server.address")
    try:  # a personal deployment listening on every interface: the image did leave the device
        config.set_option("server.address", "0.0.0.0")
        at.run()
        assert "left your device" not in texts(at) and "The server holds your image" in _where(at)
    finally:
        config.set_option("server.address", before)
