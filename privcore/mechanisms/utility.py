"""What a mechanism's releases are worth at a setting: accuracy on an evaluation split, live.

:func:`live_accuracy` answers "what accuracy do I keep at this (mechanism, model, ε, δ, R or α)?" for
any registered mechanism: it simulates ``draws`` noise draws for
every evaluation image (:meth:`~privcore.mechanisms.protocol.Mechanism.simulate`, at the effective
scale the release sampler draws at, numpy's generator: evaluation, never a release) and scores the
release classifier's class. A mechanism that needs a per-image certificate (PTR's φ) is scored from a
table of them for the evaluation images (:func:`certify_evaluation`, once per model and what the
certificate depends on; PTR: R), which then serves every ε and δ. The interval is a 95 % percentile
bootstrap over images of per-image mean correctness (draws of one image are not independent trials),
so it covers the split's sampling and the noise together. Results are memoised per (mechanism, model,
setting, split, n, draws, seed, certificates).

The evaluation split is the dataset's test split (:data:`SPLIT`): no choice of a model, margin or
default was made on it (those are made on the validation split), and these numbers choose nothing:
they are shown. The committed result tables remain the designated single read of test.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from privcore._inflight import MISSING, Memo
from privcore.mechanisms.protocol import Mechanism, Setting

__all__ = ["DRAWS", "SPLIT", "Utility", "certify_evaluation", "evaluation_inputs", "live_accuracy",
           "peek_accuracy"]

#: the split live numbers are computed on
SPLIT = "test"
#: noise draws per image
DRAWS = 3
#: bootstrap resamples of the interval
_RESAMPLES = 1000
#: per-image scores with at most this many distinct values are resampled through their counts
_FEW_VALUES = 64


@dataclass(frozen=True, kw_only=True)
class Utility:
    """Accuracy of ``mechanism`` at ``setting`` on ``n`` images of ``split`` × ``draws`` draws, with its
    95 % interval [``low``, ``high``]; ``release_rate`` the share released (1 without ⊥) and
    ``chance`` 1/classes."""

    mechanism: str
    model: str
    setting: Setting
    accuracy: float
    low: float
    high: float
    n: int
    draws: int
    release_rate: float
    chance: float
    split: str = SPLIT

    @property
    def value(self) -> float:
        """The accuracy (the name every reading with an interval shares)."""
        return self.accuracy

    @property
    def near_chance(self) -> bool:
        """Whether the interval reaches within 0.1 of chance: a user should be told before Send."""
        return self.low <= self.chance + 0.1

    def text(self) -> str:
        """``0.854 [0.837, 0.870] (n = 1000 test images × 3 draws)``."""
        return (f"{self.accuracy:.3f} [{self.low:.3f}, {self.high:.3f}] (n = {self.n} {self.split} images × "
                f"{self.draws} draws)")


def _interval(per_image: np.ndarray, seed: int) -> tuple[float, float]:
    if per_image.size < 2 or np.all(per_image == per_image[0]):
        v = float(per_image.mean()) if per_image.size else float("nan")
        return v, v
    rng = np.random.default_rng(seed)
    values, counts = np.unique(per_image, return_counts=True)
    if values.size <= _FEW_VALUES:
        # a resample's mean depends only on how often it draws each distinct value (an accuracy's k/draws),
        # and those counts are multinomial: the same bootstrap distribution as resampling image by image
        drawn = rng.multinomial(per_image.size, counts / per_image.size, size=_RESAMPLES)
        means = drawn @ values / per_image.size
    else:
        means = per_image[rng.integers(0, per_image.size, size=(_RESAMPLES, per_image.size))].mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


_INPUTS: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
_LOCK = threading.Lock()


def evaluation_inputs(mechanism: Mechanism, target: Any, dataset: str, *, n: int | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """The prepared inputs (embeddings for the posthoc family, images for inference privacy) and labels
    of the first ``n`` (None: all) images of ``dataset``'s evaluation split, memoised per model."""
    import torch

    from privcore.data import load_dataset

    key = (mechanism.family, id(target), dataset, n)
    with _LOCK:
        if key in _INPUTS:
            return _INPUTS[key]
    ds = load_dataset(dataset)
    x, y = ds.x_test, ds.y_test
    if n is not None:
        x, y = x[:n], y[:n]
    if mechanism.family == "posthoc":
        with torch.no_grad():
            inputs = target.embed(x).double().cpu().numpy()
    else:  # read-only, shared by every reading (an output-noise mechanism keeps their noise-free scores)
        inputs = x.numpy().copy()
        inputs.setflags(write=False)
    out = (inputs, y.numpy().astype(np.int64))
    with _LOCK:
        _INPUTS[key] = out
    return out


def live_accuracy(mechanism: Mechanism, target: Any, setting: Setting, *, dataset: str, model: str,
                  n: int | None = None, draws: int = DRAWS, seed: int = 0,
                  certificates: Any = None) -> Utility:
    """The accuracy of ``mechanism`` on ``target`` at ``setting`` (module docstring): memoised. For a
    mechanism that needs a per-image certificate, ``certificates`` is :func:`certify_evaluation`'s table
    (possibly partial): the first ``len(certificates)`` images of its planned ``n`` are scored."""
    if certificates is not None:
        n = int(certificates.planned)
    key = (mechanism, _Held(target), setting, dataset, model, n, draws, seed, certificates)
    return _READINGS.get(key, lambda: _live(mechanism, target, setting, dataset, model, n, draws, seed,
                                            certificates))


def peek_accuracy(mechanism: Mechanism, target: Any, setting: Setting, *, dataset: str, model: str,
                  n: int | None = None, draws: int = DRAWS, seed: int = 0) -> Utility | None:
    """:func:`live_accuracy`'s reading if it has been computed in this process, else None (computes
    nothing: for a view that must not wait)."""
    hit = _READINGS.peek((mechanism, _Held(target), setting, dataset, model, n, draws, seed, None))
    return None if hit is MISSING else hit


def certify_evaluation(mechanism: Mechanism, target: Any, setting: Setting, *, dataset: str, n: int,
                       progress: Callable[[Any], None] | None = None) -> Any:
    """The per-image certificates :func:`live_accuracy` needs for ``mechanism`` at ``setting`` on the first
    ``n`` evaluation images (:meth:`~privcore.mechanisms.protocol.Mechanism.certify_inputs`: computed by
    this process, for evaluation only; ``progress(table so far)`` after each image)."""
    inputs, _ = evaluation_inputs(mechanism, target, dataset, n=n)
    return mechanism.certify_inputs(target, inputs, setting, progress=progress)


class _Held:
    """A target compared by identity, so the memo keys on the loaded model, not its contents."""

    __slots__ = ("target",)

    def __init__(self, target: Any) -> None:
        self.target = target

    def __hash__(self) -> int:
        return id(self.target)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Held) and other.target is self.target


#: readings per (mechanism, model object, setting, split size, draws, seed, certificates), each computed
#: once across threads (the dashboard's warm-up and a page may ask at the same time)
_READINGS = Memo(max_entries=256)


def _live(mechanism: Mechanism, target: Any, setting: Setting, dataset: str, model: str, n: int | None,
          draws: int, seed: int, certificates: Any) -> Utility:
    inputs, labels = evaluation_inputs(mechanism, target, dataset, n=n)
    if certificates is not None:
        inputs, labels = inputs[:len(certificates)], labels[:len(certificates)]
    given = {} if certificates is None else {"certificates": certificates}
    # seeded by the setting itself (not hash(), which changes from process to process)
    rng = np.random.default_rng([seed, zlib.crc32(repr((mechanism.name, setting)).encode())])
    correct = np.zeros((draws, labels.size))
    released = np.zeros((draws, labels.size))
    for d in range(draws):
        sim = mechanism.simulate(target, inputs, setting, rng, **given)
        released[d] = sim.released
        correct[d] = (np.asarray(sim.predicted) == labels) & np.asarray(sim.released, bool)
    per_image = correct.mean(axis=0)
    low, high = _interval(per_image, seed)
    classes = int(labels.max()) + 1 if labels.size else 1
    return Utility(mechanism=mechanism.name, model=model, setting=setting, accuracy=float(per_image.mean()),
                   low=low, high=high, n=int(labels.size), draws=draws,
                   release_rate=float(released.mean()), chance=1.0 / max(classes, 1))
