"""When a release leaves the device must not depend on φ (issue 30, item 9), δ defaults to at most
1e-5 in the API and the CLI (item 5), and every Ray option warns that a cluster has no
authentication (item 9). No timing is measured: the send step is shown to do no certification
work, and the fixed budget is driven by a stand-in clock."""

from __future__ import annotations

import inspect
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import privcore
import privcore.api as api
import privcore.mechanisms.ptr_release as ptr_release
from privcore.errors import ParameterError, ParameterTypeError


@pytest.fixture(scope="module")
def image() -> np.ndarray:
    from sklearn.datasets import load_digits

    return load_digits().images[3] / 16


@pytest.fixture(scope="module")
def cert(image: np.ndarray, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return privcore.certify(image, dataset="digits", cache=tmp_path_factory.mktemp("cache"))


@pytest.fixture
def certification_work(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Counts every query of a Lipschitz certifier and every φ computation, cached or not."""
    import privcore.mechanisms.phi as phi_mod
    import privcore.mechanisms.phi_cache as phi_cache
    import privcore.mechanisms.ptr as ptr
    from privcore.lipschitz.certifier import Certifier
    from privlens import evaluation

    assert evaluation.settle(120.0)  # a φ table a page test started in the background does no work here
    calls: Counter = Counter()

    def counted(name: str, real: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(Certifier, "_prepare", counted("certifier query", Certifier._prepare))
    monkeypatch.setattr(phi_cache, "cached_phi", counted("cached_phi", phi_cache.cached_phi))
    monkeypatch.setattr(phi_mod, "compute_phi", counted("compute_phi", phi_mod.compute_phi))
    monkeypatch.setattr(ptr, "compute_phi", counted("compute_phi", ptr.compute_phi))
    return calls


def test_releasing_with_a_certification_does_no_certification_work(
    image: np.ndarray, cert: Any, certification_work: Counter, tmp_path: Path
) -> None:
    out = privcore.release(image, dataset="digits", epsilon=10.0, mechanism="ptr", certification=cert,
                           rng=np.random.default_rng(0))
    assert certification_work == Counter()  # the send step: embedding, test and noise only
    assert out.certification is cert and out.delta == 1e-5
    # the one call certifies (here through the counted functions) and releases the same thing
    one_call = privcore.release(image, dataset="digits", epsilon=10.0, mechanism="ptr", cache=tmp_path,
                                rng=np.random.default_rng(0))
    assert certification_work["cached_phi"] == 1 and certification_work["certifier query"] >= 1
    assert one_call.document() == out.document() and one_call.certification.phi == cert.phi


def test_a_certification_of_something_else_is_refused(
    image: np.ndarray, cert: Any, certification_work: Counter
) -> None:
    def release(img: Any = image, **kw: Any) -> Any:
        return privcore.release(img, dataset="digits", epsilon=kw.pop("epsilon", 1.0), mechanism="ptr",
                                certification=cert,
                                **kw)

    with pytest.raises(ParameterError, match="another image"):
        release(np.clip(image + 0.25, 0, 1))
    with pytest.raises(ParameterError, match=r"radius .* this release asks for 0\.3"):
        release(radius=0.3)
    with pytest.raises(ParameterError, match="certifier 'exact', this release asks for 'lp'"):
        release(certifier="lp")
    with pytest.raises(ParameterError, match=r"certify with epsilon_min=1\.0, delta_min=1e-11"):
        release(delta=1e-11)  # its search range was sized for δ ≥ 1e-10
    with pytest.raises(ParameterTypeError, match="certification must be a Certification"):
        privcore.release(image, dataset="digits", epsilon=1.0, mechanism="ptr", certification={"phi": 99.0})
    assert certification_work == Counter()


class _Clock:
    """A stand-in for time.monotonic / time.sleep: work advances it by hand, sleeping by the amount."""

    def __init__(self) -> None:
        self.t, self.slept = 100.0, []

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds


def test_min_seconds_returns_after_a_fixed_budget_or_releases_nothing(
    image: np.ndarray, cert: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _Clock()
    monkeypatch.setattr(api, "_monotonic", clock.monotonic)
    monkeypatch.setattr(api, "_sleep", clock.sleep)
    real_matching = ptr_release._matching

    def working(seconds: float, real: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            clock.t += seconds  # the work this step takes
            return real(*args, **kwargs)

        return run

    monkeypatch.setattr(ptr_release, "_matching", working(3.0, real_matching))
    out = privcore.release(image, dataset="digits", epsilon=10.0, mechanism="ptr", certification=cert,
                           min_seconds=10)
    assert clock.t == 110.0 and clock.slept == [7.0] and out.certification is cert
    with pytest.raises(api.DeadlineExceededError, match=r"took 3\.0 s, more than min_seconds = 2: nothing"):
        privcore.release(image, dataset="digits", epsilon=10.0, mechanism="ptr", certification=cert,
                         min_seconds=2)
    # the one call: certification counts against the budget too
    monkeypatch.setattr(ptr_release, "certify_embedding", working(50.0, lambda *a, **k: cert))
    with pytest.raises(api.DeadlineExceededError, match=r"took 50\.0 s"):
        privcore.release(image, dataset="digits", epsilon=10.0, mechanism="ptr", min_seconds=30)
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ParameterError, match=r"min_seconds must be in \(0, ∞\)"):
            privcore.release(image, dataset="digits", epsilon=10.0, mechanism="ptr", certification=cert,
                             min_seconds=bad)


def _cli_commands() -> dict[str, Any]:
    """Every command of ``privcore`` by its path (``train delta-p``), as click sees it."""
    import typer

    from privcore.cli import app

    out: dict[str, Any] = {}

    def walk(cmd: Any, path: str) -> None:
        out[path] = cmd
        for name, sub in getattr(cmd, "commands", {}).items():  # a group (typer's own click)
            walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(app), "")
    return out


def test_default_delta_is_at_most_1e_5_and_its_range_is_the_dashboards(monkeypatch, capsys, tmp_path) -> None:
    import shutil

    from privcore.cli import main

    # the CLI reads and checks the image before it calls the API (issue 33): a real one
    shutil.copy(Path(__file__).resolve().parents[1] / "data" / "samples" / "digits" / "0-24.png",
                tmp_path / "digit.png")
    monkeypatch.chdir(tmp_path)

    assert inspect.signature(privcore.release).parameters["delta"].default == api.DEFAULT_DELTA <= 1e-5
    cli_delta = {p.name: p for p in _cli_commands()["release"].params}["delta"]
    assert not cli_delta.required and cli_delta.default == api.DEFAULT_DELTA
    seen: dict[str, Any] = {}

    class _Out:
        released = False

        def document(self) -> dict[str, Any]:
            return {"outcome": "bottom"}

    def fake_release(image: Any, **kwargs: Any) -> _Out:
        seen.update(kwargs)
        return _Out()

    monkeypatch.setattr(api, "release", fake_release)
    main(["release", "--dataset", "digits", "digit.png", "--epsilon", "1", "--min-seconds", "30"])
    assert seen["delta"] == 1e-5 and seen["min_seconds"] == 30.0
    monkeypatch.undo()
    assert api.DELTA_RANGE == (1e-12, 0.5)
    for bad in (0.6, 1e-13, 0.0):
        with pytest.raises(ParameterError, match=rf"delta must be in \[1e-12, 0.5\], got {bad}"):
            privcore.release(np.zeros((8, 8)), dataset="digits", epsilon=1.0, delta=bad)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(["release", "--dataset", "digits", "none.png", "--epsilon", "1", "--delta", "0.9"])
    assert exit_.value.code == 2 and "delta must be in [1e-12, 0.5], got 0.9" in capsys.readouterr().err


def test_every_ray_option_warns_that_a_cluster_has_no_authentication() -> None:
    options = [
        (path, p)
        for path, cmd in _cli_commands().items()
        for p in cmd.params
        if p.name in ("executor", "address")
    ]
    assert {path for path, _ in options} >= {"experiment", "train delta-p", "train all"}, options
    for path, p in options:
        text = " ".join(p.help.split())
        assert "no authentication" in text and "trusts what its workers return" in text, (path, p.name)
        assert "cluster you control, on a private network" in text, (path, p.name)
