"""The JSON a user downloads after a release from the Release page: pure Python, no Streamlit.

Both documents are built by :meth:`privcore.api.Release.document`, the one builder of a release's
JSON (the API's and the CLI's too), so a file from the dashboard and one from ``privcore release`` carry
the same keys. Only what the mechanism outputs and public parameters: never φ, the image or anything
else computed from the private input.
"""

from __future__ import annotations

from typing import Any

__all__ = ["global_document", "release_document"]


def release_document(
    result: Any,
    *,
    dataset: str,
    model: str,
    model_digest: str,
    epsilon: float,
    delta: float,
    certifier: str,
) -> dict[str, Any]:
    """The downloadable JSON of one posthoc-PTR outcome (posthoc Alg. 1 output) run at ``epsilon``
    (PTR's own ε) and ``delta``: :meth:`privcore.api.Release.document`, the one builder of a release's
    JSON (the API's and the CLI's too).

    Contains the mechanism, the outcome (the noisy vector, or ⊥ as ``null``), the guarantee of
    Thm 4.4 with its text and the public parameters (ε, δ, R, Δp, R_max, tol, noise scales,
    certifier, model). Deliberately absent: φ, φ̂, R*, the bisection trace, the image, its digest or
    name — all computed from the private input without noise, hence not covered by the guarantee.
    """
    from privcore.api import Release

    return Release.of_ptr(result, epsilon=epsilon, delta=delta, certifier=certifier,
                          model={"dataset": dataset, "obfuscator": model, "digest": model_digest}).document()


def global_document(result: Any, *, dataset: str, model: str, model_digest: str) -> dict[str, Any]:
    """The downloadable JSON of one release of the certified global mechanism (a
    :class:`privcore.mechanisms.GlobalRelease`), through :meth:`privcore.api.Release.document` with the
    public parameters ``privcore.release(…, mechanism="global")`` records: R, G and how it was
    certified, the clipping box and the sensitivity. Nothing in it depends on the image but the value."""
    from privcore.api import Release

    return Release.of_global(result, model={"dataset": dataset, "obfuscator": model,
                                            "digest": model_digest}).document()
