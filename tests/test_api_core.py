"""The API on a loaded pipeline and an embedding, the dashboard's way in (issue 31, item 2):
``certify_embedding`` / ``release_embedding`` are what ``certify`` / ``release`` run; a progress
callback hears every decision and can cancel (nothing cached or released); an injected certifier
is the one asked; bad arguments are refused before anything is computed."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
import torch

import privcore
import privcore.mechanisms.ptr as ptr_module
from privcore.api import certify_embedding, release_embedding
from privcore.errors import CertificationError, ParameterError, ParameterTypeError
from privcore.lipschitz import Certifier


@pytest.fixture(scope="module")
def image() -> np.ndarray:
    from sklearn.datasets import load_digits

    return load_digits().images[3] / 16


@pytest.fixture(scope="module")
def pipe():
    from privcore.models.pipeline import load_pipeline

    return load_pipeline("digits", "ARL-C-N", device="cpu")


def _z(pipe, image: np.ndarray) -> np.ndarray:
    return pipe.embed(torch.from_numpy(image[None].astype(np.float32))).double().numpy().reshape(-1)


@dataclass(frozen=True, kw_only=True)
class _Asked(Certifier):
    """A certifier that remembers every radius it was asked about."""

    asked: list = field(default_factory=list, compare=False, repr=False)

    def decide(self, f, center, radius, threshold, /) -> bool:
        self.asked.append(float(radius))
        return super().decide(f, center, radius, threshold)


class _Cancelled(Exception):
    pass


def test_progress_is_called_once_per_decision(image: np.ndarray) -> None:
    calls: list[tuple[float, bool]] = []
    cert = privcore.certify(image, dataset="digits", cache=False, progress=lambda r,
                            ok: calls.append((r, ok)))
    assert cert.n_decisions >= 2 and calls == list(cert.phi_result.evaluations)


def test_a_raise_from_progress_releases_nothing_and_caches_nothing(
    image: np.ndarray, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    draws: list[int] = []
    real = ptr_module.propose_test_release
    monkeypatch.setattr(ptr_module, "propose_test_release", lambda *a, **k: draws.append(1) or real(*a, **k))

    def cancel(radius: float, passed: bool) -> None:
        raise _Cancelled

    with pytest.raises(_Cancelled):
        privcore.release(image, dataset="digits", epsilon=10.0, mechanism="ptr", cache=tmp_path,
                         progress=cancel)
    assert draws == []  # nothing drawn, nothing released
    calls: list[float] = []
    cert = privcore.certify(image, dataset="digits", cache=tmp_path, progress=lambda r, ok: calls.append(r))
    assert len(calls) == cert.n_decisions  # computed again: the cancelled call cached no φ
    again: list[float] = []
    privcore.certify(image, dataset="digits", cache=tmp_path, progress=lambda r, ok: again.append(r))
    assert again == []  # this one's φ was cached (a verified hit makes no bisection decision)


def test_an_injected_certifier_is_the_one_asked(pipe, image: np.ndarray) -> None:
    oracle = _Asked(kind="interval", time_limit=60)
    z = _z(pipe, image)
    cert = certify_embedding(pipe, z, certifier=oracle, cache=False)
    assert cert.certifier == "interval" and oracle.asked == [r for r, _ in cert.phi_result.evaluations]
    out = release_embedding(pipe, z, epsilon=10.0, mechanism="ptr", certifier=oracle, certification=cert,
                            rng=np.random.default_rng(0))
    assert out.certification is cert and out.document()["parameters"]["certifier"] == "interval"
    assert len(oracle.asked) == cert.n_decisions  # releasing with the certification decided nothing


def test_release_and_release_embedding_are_one_code_path(pipe, image: np.ndarray, tmp_path) -> None:
    z = _z(pipe, image)
    for mechanism in ("global", "ptr"):
        one = privcore.release(image, dataset="digits", epsilon=5.0, mechanism=mechanism, cache=tmp_path,
                               rng=np.random.default_rng(7))
        two = release_embedding(pipe, z, epsilon=5.0, mechanism=mechanism, cache=tmp_path,
                                rng=np.random.default_rng(7))
        assert one.document() == two.document()
        raw = "GlobalRelease" if mechanism == "global" else "PTRResult"
        assert type(two.mechanism_result).__name__ == raw
    cert = certify_embedding(pipe, z, cache=tmp_path)
    assert cert.phi == privcore.certify(image, dataset="digits",
                                        cache=tmp_path).phi and cert.zeta == cert.phi_result.zeta


def test_a_broken_injected_certifier_is_stopped_by_the_backstop(pipe) -> None:
    """digits test image 27 has L(f, B(z, R)) = 0.843 > Δp = 0.826: a certifier that passes every
    decision makes φ > 0, which the backstop refuses; nothing is released."""
    from privcore.data.registry import load_dataset

    @dataclass(frozen=True, kw_only=True)
    class Passing(Certifier):
        def decide(self, f, center, radius, threshold, /) -> bool:
            return True

    z = _z(pipe, np.asarray(load_dataset("digits").x_test[27])[0])
    with pytest.raises(CertificationError, match="above Δp"):
        release_embedding(pipe, z, epsilon=10.0, mechanism="ptr", certifier=Passing(), cache=False)


def test_bad_arguments_are_refused_before_anything_is_computed(pipe, image: np.ndarray,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import privcore.mechanisms.phi_cache as phi_cache

    def never(*a, **k):
        raise AssertionError("computed before checking")

    monkeypatch.setattr(phi_cache, "cached_phi", never)
    z = _z(pipe, image)
    with pytest.raises(ParameterTypeError, match="certifier must be one of"):
        certify_embedding(pipe, z, certifier=42)
    with pytest.raises(ParameterTypeError, match="progress must be callable"):
        privcore.certify(image, dataset="digits", progress="bar")
    with pytest.raises(ParameterError, match="certifier must be one of"):
        release_embedding(pipe, z, epsilon=1.0, mechanism="ptr", certifier="milp")
    with pytest.raises(ParameterError, match=r"z must be one image's embedding \(8 numbers\)"):
        certify_embedding(pipe, z[:4])
    with pytest.raises(ParameterError, match="epsilon must be in"):
        release_embedding(pipe, z, epsilon=0.0, mechanism="ptr")
    with pytest.raises(ParameterError, match="certification applies to mechanism 'PTR' only"):
        release_embedding(pipe, z, epsilon=1.0, certification=object())
