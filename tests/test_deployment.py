"""Deployment setting (``PRIVLENS_DEPLOYMENT``): in ``shared`` mode per-image φ never reaches the
disk cache; in every mode a session is told nothing about a cache hit it did not create (AppTest,
two sessions of the Release page on the shipped digits models)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from privcore.lipschitz.certifier import Certifier
from privlens.deployment import DEFAULT_DEPLOYMENT, deployment, image_cache
from tests._dashboard import app, isolate, texts


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path_factory)
    monkeypatch.setenv("PRIVLENS_CACHE_DIR", str(tmp_path / "cache"))  # empty: hits only from this test


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
        at = app("release", query={"R": "0.2"})
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
    assert made_again == 0
    assert second == first  # … reported word for word as the computation was


def test_a_misconfigured_deployment_releases_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVLENS_DEPLOYMENT", "everyone")
    at = app("release", query={"R": "0.2"})
    assert any("PRIVLENS_DEPLOYMENT" in e.value and "Nothing was released" in e.value for e in at.error)
    assert not at.metric and not at.success
