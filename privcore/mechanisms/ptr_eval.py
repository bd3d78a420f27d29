"""What PTR's releases are worth, for evaluation only: φ of every evaluation image once, then any (ε, δ).

φ(z) (posthoc Alg. 1) depends on the model, z, R, Δp and the bisection grid (R_max, tol), never on ε
or δ (:mod:`privcore.mechanisms.phi`). So a :class:`PhiTable` — φ for each of the first images of an
evaluation split, certified by this process with the exact certifier through the authenticated φ cache
(:func:`~privcore.mechanisms.phi_cache.cached_phi_source`: a row read back is decided again before it
is used) — serves every (ε, δ) at its R: :meth:`PTR.simulate <privcore.mechanisms.ptr_release.PTR.simulate>`
draws the test's noise and the release's noise at the exact samplers' scales
(:func:`~privcore.mechanisms.ptr.ptr_plans`) for each image. A table only scores releases; it is never
handed to a release, which certifies its own image (docs/TRUST.md).

An image whose certification fails (a solver time-out) is counted as ⊥: a release of it would refuse.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from privcore.errors import CertificationError, ParameterError

__all__ = ["PhiKey", "PhiTable", "certify_table"]


@dataclass(frozen=True, kw_only=True)
class PhiKey:
    """What φ depends on: the obfuscator's ``digest``, the ``certifier``, R, Δp and the grid
    (``r_max``, ``tol``)."""

    digest: str
    certifier: str
    radius: float
    delta_p: float
    r_max: float
    tol: float


@dataclass(frozen=True, kw_only=True)
class PhiTable:
    """φ of the first ``len(table)`` of ``planned`` evaluation images at ``key`` (private to the
    evaluation: never published, never used by a release); ``zeta`` the grid's spacing, ``refused`` the
    indices whose certification failed (⊥), ``cached`` how many came from the φ cache (each verified)."""

    key: PhiKey
    zeta: float
    phi: tuple[float, ...]
    planned: int
    refused: tuple[int, ...] = ()
    cached: int = 0

    def __len__(self) -> int:
        return len(self.phi)

    @property
    def complete(self) -> bool:
        """Whether every planned image has its φ."""
        return len(self.phi) >= self.planned

    def testable(self) -> np.ndarray:
        """Per image, whether its certification succeeded (False: a release refuses, ⊥)."""
        ok = np.ones(len(self.phi), bool)
        ok[list(self.refused)] = False
        return ok


Progress = Callable[[PhiTable], None]


def certify_table(f: Any, inputs: np.ndarray, key: PhiKey, *, cache: Any = True, time_limit: float = 60.0,
                  progress: Progress | None = None) -> PhiTable:
    """φ of every row of ``inputs`` (embeddings, n × d) for the obfuscator ``f`` at ``key`` (its digest
    must be f's), through the φ cache; ``progress(table so far)`` after each image (what it raises
    propagates: that is how a caller stops the computation)."""
    from privcore.lipschitz.certifier import Certifier
    from privcore.lipschitz.network import as_network
    from privcore.mechanisms.phi import grid_spacing
    from privcore.mechanisms.phi_cache import cached_phi_source

    net = as_network(f)
    if net.digest != key.digest:
        raise ParameterError(f"the φ table's key names model digest {key.digest!r}, f's is {net.digest!r}")
    oracle = Certifier(kind=key.certifier, time_limit=time_limit, cache=cache)
    zeta = grid_spacing(key.radius, key.r_max, key.tol)
    rows = np.asarray(inputs, dtype=np.float64)
    phis: list[float] = []
    refused: list[int] = []
    cached = 0
    for i, z in enumerate(rows):
        try:
            res, source = cached_phi_source(net, z, radius=key.radius, delta_p=key.delta_p, r_max=key.r_max,
                                            tol=key.tol, certifier=oracle, cache=cache)
            phis.append(float(res.phi))
            cached += source == "cache"
        except CertificationError:
            phis.append(0.0)
            refused.append(i)
        if progress is not None:
            progress(PhiTable(key=key, zeta=zeta, phi=tuple(phis), planned=len(rows), refused=tuple(refused),
                              cached=cached))
    return PhiTable(key=key, zeta=zeta, phi=tuple(phis), planned=len(rows), refused=tuple(refused),
                    cached=cached)
