"""Release page (AppTest): an accuracy with n and interval at every setting of a mechanism that needs no
per-image certificate, computed live, and a plain warning before Send where it is close to guessing."""

from __future__ import annotations

from tests._dashboard import app


def _accuracy(at) -> str:
    return next(m.value for m in at.metric if m.label.startswith("model accuracy at this ε"))


def test_the_default_opening_shows_a_live_accuracy_with_n_and_interval() -> None:
    at = app("release", dataset=None)  # the embedded default: MNIST, N-global, Global at the opening ε
    value = _accuracy(at)
    assert value not in ("—", "") and 0.0 <= float(value) <= 1.0
    captions = " ".join(c.value for c in at.caption)
    assert "n = 1000 test images × 3 noise draws" in captions and "interval [" in captions
    at.select_slider(key="w_epsilon").set_value(0.5).run()
    warnings = " ".join(w.value for w in at.warning)
    assert "close to guessing" in warnings  # about 0.15 at total ε = 0.5: within 0.1 of chance (0.1)


def test_every_slider_position_of_global_gauss_has_an_accuracy_and_no_warning_when_useful() -> None:
    at = app("release", query={"mech": "Global-Gauss", "eps": "10"}, dataset=None)
    assert _accuracy(at) not in ("—", "")
    assert not any("close to guessing" in w.value for w in at.warning)
    at.select_slider(key="w_epsilon").set_value(3.0).run()  # a value no experiment ran at
    assert _accuracy(at) not in ("—", "")
