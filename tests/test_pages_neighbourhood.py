"""Neighbourhood page (AppTest): decoded R-ball pictures and labels that follow the R slider and axes."""

from __future__ import annotations

import pytest

from tests._dashboard import app, default_radius, isolate


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    isolate(monkeypatch, tmp_path_factory)


def _pictures(at) -> list[str]:
    """Media URLs of the page's pictures (content-addressed: they change when the pixels do)."""
    images = [e for e in at.main if type(e).__name__ == "Image"]
    assert len(images) == 2  # the R-ball walk and the corners
    return [img.proto.imgs[0].url for img in images]


def test_r_slider_and_axes_change_the_pictures() -> None:
    at = app("neighbourhood")
    table = at.dataframe[0].value
    columns = list(table.columns)
    R = default_radius()
    assert (columns[0], columns[-1]) == (f"{-R:+.3g}", f"{R:+.3g}")  # offsets span [−R, R]
    assert len(table) == 4  # four latent axes by default
    before = _pictures(at)
    at.select_slider(key="w_radius_nb").set_value(0.5).run()
    assert not at.exception
    assert at.session_state["privlens_settings"].radius == 0.5  # shared with the sidebar
    assert list(at.dataframe[0].value.columns)[-1] == "+0.5"
    assert _pictures(at) != before
    at.multiselect(key="nb_axes").set_value([0]).run()
    assert len(at.dataframe[0].value) == 1


def test_what_r_protects_is_shown_for_the_embedder() -> None:
    at = app("neighbourhood")
    assert not at.exception
    assert any("What R protects" in h.value for h in at.subheader)
    text = " ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.caption)
    assert "not the class" in text or "No measurement for this embedder yet" in text
