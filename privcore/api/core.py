"""The API on a loaded model: :func:`release_with`, :func:`release_embedding` and :func:`certify_embedding`.

:func:`privcore.api.release` loads what the mechanism needs (:meth:`Mechanism.load`), prepares the
image (:meth:`Mechanism.prepare`) and calls :func:`release_with`; the dashboard, which holds its pipeline
and z = g(x) already, calls :func:`release_embedding`. Every release, whoever asks, dispatches through
the registry (:mod:`privcore.mechanisms.registry`) and so runs the same validations, the same backstops
and the same mechanism code. The API's entry points and what they promise: :mod:`privcore.api`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from privcore.errors import PrivcoreError
from privcore.mechanisms.protocol import DEFAULT_DELTA, RELEASE_FORMAT, Mechanism, Options, Release, Setting
from privcore.mechanisms.ptr_release import CERTIFIERS, Certification, certify_embedding, check_certifier
from privcore.validation import DELTA_RANGE, RADIUS_RANGE, check_range

__all__ = [
    "CERTIFIERS",
    "DEFAULT_DELTA",
    "RELEASE_FORMAT",
    "Certification",
    "DeadlineExceededError",
    "Release",
    "certify_embedding",
    "check_certify_arguments",
    "check_release_arguments",
    "check_release_delta",
    "release_embedding",
    "release_with",
]

#: What a progress callback receives after each decision "U(z, r) ≤ Δp?": (r, passed).
Progress = Callable[[float, bool], None]


class DeadlineExceededError(PrivcoreError):
    """``release(…, min_seconds=T)`` needed more than T seconds: nothing was released (returning
    late would let the send time depend on φ)."""


def check_release_delta(value: Any) -> float:
    """δ of a release: in :data:`DELTA_RANGE` (ParameterError naming it, its value and the range)."""
    return check_range("delta", value, DELTA_RANGE)


def check_certify_arguments(*, radius: Any, certifier: Any, progress: Any = None) -> str:
    """The arguments of a certification checked before anything is computed; the certifier's kind."""
    from privcore.mechanisms.ptr_release import check_progress

    kind = check_certifier(certifier)
    if radius is not None:
        check_range("radius", radius, RADIUS_RANGE)
    check_progress(progress)
    return kind


def check_release_arguments(*, epsilon: Any, delta: Any = DEFAULT_DELTA, mechanism: Any, radius: Any = None,
                            alpha: Any = None, certifier: Any = "exact", time_limit: Any = 60.0,
                            cache: Any = True, certification: Any = None, progress: Any = None,
                            rng: Any = None) -> tuple[Mechanism, Setting, Options]:
    """Every argument of a release checked before anything is computed: the registry's mechanism, its
    validated :class:`Setting` (ε the total of the guarantee) and the :class:`Options`."""
    from privcore.mechanisms.registry import get as get_mechanism
    from privcore.validation import check_positive

    mech = get_mechanism(mechanism)
    setting = mech.setting(epsilon=epsilon, delta=delta, radius=radius, alpha=alpha)
    if time_limit is not None:
        check_positive("time_limit", time_limit)
    options = Options(certifier=certifier, time_limit=time_limit, cache=cache, certification=certification,
                      progress=progress, rng=rng)
    mech.check_options(options)
    if "certifier" in mech.uses_options:
        check_certify_arguments(radius=radius, certifier=certifier, progress=progress)
    return mech, setting, options


def release_with(mechanism: Mechanism, target: Any, x: Any, setting: Setting, options: Options) -> Release:
    """One release of ``x`` (the mechanism's prepared input) with a loaded ``target``: one draw."""
    return mechanism.release(target, x, setting, options)


def release_embedding(
    pipe: Any,
    z: Any,
    *,
    epsilon: float,
    delta: float = DEFAULT_DELTA,
    mechanism: str = "global",
    radius: float | None = None,
    certifier: Any = "exact",
    time_limit: float | None = 60.0,
    cache: Any = True,
    rng: Any = None,
    certification: Certification | None = None,
    progress: Progress | None = None,
) -> Release:
    """:func:`privcore.api.release` of a posthoc mechanism for an embedding ``z = pipe.embed(image)`` of
    a loaded pipeline, with the same arguments and checks (all before anything is computed) but
    ``min_seconds``; ``epsilon`` is the total of the guarantee."""
    from privcore.errors import ParameterError

    mech, setting, options = check_release_arguments(
        epsilon=epsilon, delta=delta, mechanism=mechanism, radius=radius, certifier=certifier,
        time_limit=time_limit, cache=cache, certification=certification, progress=progress, rng=rng)
    if mech.family != "posthoc":
        raise ParameterError(f"mechanism {mech.name!r} releases a classifier's output, not an embedding's: "
                             "use privcore.release(image, mechanism=…)")
    return release_with(mech, pipe, z, setting, options)
