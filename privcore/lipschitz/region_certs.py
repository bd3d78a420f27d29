"""LP-duality certificates for the region labels of a realised-pattern table, checked on load.

A threshold table's region memo (:class:`~privcore.lipschitz.patterns.RegionMemo`) says, per
pattern, EMPTY (the region meets no ball: the pattern is dropped) or BOXED (the region lies in a
box: balls far from it skip its LP). Both labels decide passes, so one read from disk is used only
when this process has re-derived it (docs/TRUST.md). That check must cost far less than the LPs it
replaces, so what is stored is a dual vector per label, and the labels are recomputed from the
weights and those vectors by a few numpy sums (:func:`verify`):

* The tables serve only balls inside ``X = [−D, D]^d``, ``D = TABLE_DOMAIN``
  (:func:`~privcore.lipschitz.pattern_search.in_table_domain`), so a label only has to hold on X.
* Rows. Region ``R = {x : G x ≤ h'}`` with ``(G, h)`` recomputed here from the weights and the
  pattern's code (:func:`~privcore.lipschitz.regions.region_rows`) and ``h' = h + 1e-9·(1 + |h|)``
  (:func:`relaxed`), the relaxation the engine's own emptiness and box LPs use as their allowance
  for the rounding of the rows: a certificate claims what those LPs claim, on X.
* EMPTY. For ``y ≥ 0`` and every ``x ∈ X``: ``yᵀ(G x − h') ≥ −yᵀh' − D‖Gᵀy‖₁ =: c``. So ``c > 0``
  means some row is violated at every point of X: ``R ∩ X = ∅``. The label is accepted when ``c``,
  computed in float64 from the stored ``y``, exceeds ``MARGIN·(Σ y_j|h'_j| + D Σ_j y_j‖G_j‖₁ + 1)``
  with ``MARGIN = 1e-11``: ``y`` has ``m ≤ d + 1`` entries, so ``c`` is built from sums of at most
  ``m + d ≤ 2d + 1`` products and one multiplication by D, whose rounding error is below
  ``γ_{2d+3} ≈ (2d + 3)·2⁻⁵³`` times that same sum of absolute values (Higham, Accuracy and
  Stability of Numerical Algorithms, §3.1; any summation order), 2.1e-15 for d = 8 and under 2.3e-14
  up to d = 100; the constant 1 covers underflow of tiny products (absolute errors ~1e-308). So the
  margin is ≥ 400 times the worst rounding, and a ``c`` that passes is positive in exact arithmetic.
* BOXED. For ``y ≥ 0``, ``s = ±1`` and every ``x ∈ R ∩ X``: ``s·x_i = (s e_i − Gᵀy)ᵀx + yᵀG x ≤
  yᵀh' + D‖s e_i − Gᵀy‖₁`` (weak duality). This holds for *every* ``y ≥ 0``: a stored ``y`` can make
  a bound loose, never wrong, so a box side is the bound recomputed from ``y`` (rounded outwards by
  the same margin, D added to its scale for the ``e_i`` term, then padded by the engine's
  ``_BOX_PAD`` as :func:`~privcore.lipschitz.regions._region_box` pads its LP optima), never a
  number read from disk. A side whose bound is ``≥ D`` says nothing on
  X and is ±inf, as the engine's unbounded sides are. BOXED itself asserts nothing else: the
  searches still run the region's distance LP (a BOXED region that is in fact empty only costs an
  LP), so a BOXED label without side certificates is a box of ±inf.
* Codes (which patterns have ‖J_D‖ > τ) are never stored: the table is enumerated here from the
  weights (:func:`~privcore.lipschitz.patterns.threshold_pattern_table`) and a certificate only
  attaches to a code of that enumeration; the rest start UNKNOWN and are resolved by the engine's
  own LPs, as without a store.

Obtaining ``y`` (:func:`certify`) is untrusted work: HiGHS's row duals of ``min s : G x − s ≤ h',
x ∈ X`` (EMPTY; the optimum is ``max c`` over ``1ᵀy = 1``) and of ``min ∓x_i : G x ≤ h', x ∈ X``
(box sides), kept only when :func:`verify` accepts them. A basic optimal dual has at most ``d + 1``
non-zero entries, stored sparsely (row index, value) with the values in float64 (bytes in
:func:`RegionCertificates.to_value`).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from privcore.lipschitz.patterns import TABLE_DOMAIN
from privcore.lipschitz.regions import _BOX_PAD, _dense_lp

__all__ = ["CERT_FORMAT", "RegionCertificates", "certify", "relaxed", "verify"]

#: bump when the meaning or layout of a stored certificate set changes
CERT_FORMAT = 1
#: relative margin by which a certificate's float64 sums must clear zero (module docstring)
MARGIN = 1e-11
_FIELDS = {  # name: (dtype, entries per item as a multiple of m, or 0 for one per item)
    "empty_codes": ("<i8", 0), "empty_rows": ("u1", 1), "empty_y": ("<f8", 1),
    "boxed_codes": ("<i8", 0),
    "side_codes": ("<i8", 0), "side_kind": ("u1", 0), "side_rows": ("u1", 1), "side_y": ("<f8", 1),
}


def relaxed(h: np.ndarray) -> np.ndarray:
    """The rows' right-hand sides as the engine's region LPs relax them: ``h + 1e-9·(1 + |h|)``."""
    return h + 1e-9 * (1.0 + np.abs(h))


@dataclass(frozen=True, eq=False)
class RegionCertificates:
    """Certificates of one table's region labels, keyed by pattern code (module docstring).

    ``empty_*``: per certificate a code and ``y`` (its non-zero row indices and values, ``m`` per
    row, zero-padded). ``boxed_codes``: patterns labelled BOXED; ``side_*``: per box side a code,
    ``kind = 2i`` (a bound on ``x_i``) or ``2i + 1`` (on ``−x_i``) and ``y``."""

    empty_codes: np.ndarray
    empty_rows: np.ndarray
    empty_y: np.ndarray
    boxed_codes: np.ndarray
    side_codes: np.ndarray
    side_kind: np.ndarray
    side_rows: np.ndarray
    side_y: np.ndarray

    @property
    def m(self) -> int:
        return int(self.empty_rows.shape[1])

    def to_value(self, *, d: int, k: int) -> dict:
        """A JSON-able dict: the arrays as base64 of their little-endian bytes."""
        value: dict = {"format": CERT_FORMAT, "domain": TABLE_DOMAIN, "in_dim": d, "rows": k, "m": self.m}
        for name, (dtype, _) in _FIELDS.items():
            value[name] = base64.b64encode(np.ascontiguousarray(getattr(self, name), dtype=dtype).tobytes()
                                           ).decode("ascii")
        return value

    @classmethod
    def from_value(cls, value: dict, *, d: int, k: int) -> RegionCertificates:
        """Parse :meth:`to_value`'s dict (ValueError when it is not one for ``d`` inputs and ``k``
        rows). Only the layout is checked here; what the values prove is :func:`verify`'s business."""
        if not isinstance(value, dict) or value.get("format") != CERT_FORMAT:
            raise ValueError("not a region certificate set of this format")
        if value.get("domain") != TABLE_DOMAIN or value.get("in_dim") != d or value.get("rows") != k:
            raise ValueError("region certificates for another domain or shape")
        m = value.get("m")
        if not isinstance(m, int) or not 1 <= m <= d + 1:  # the rounding margin assumes m ≤ d + 1
            raise ValueError("bad certificate width")
        arrays = {}
        for name, (dtype, per) in _FIELDS.items():
            text = value.get(name)
            if not isinstance(text, str):
                raise ValueError(f"missing {name}")
            raw = np.frombuffer(base64.b64decode(text.encode("ascii"), validate=True), dtype=dtype)
            arrays[name] = raw.reshape(-1, m) if per else raw
        lengths = {"empty": {"empty_codes", "empty_rows", "empty_y"},
                   "side": {"side_codes", "side_kind", "side_rows", "side_y"}}
        for group in lengths.values():
            if len({arrays[n].shape[0] for n in group}) != 1:
                raise ValueError("certificate arrays of different lengths")
        return cls(**{n: a.astype(np.int64) if n.endswith(("codes", "rows", "kind")) else a.astype(np.float64)
                      for n, a in arrays.items()})


def _gather(G: np.ndarray, h: np.ndarray, rows: np.ndarray, y: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(G_J, h'_J, y, ok)`` for row indices ``rows`` (n, m) of the regions ``G`` (n, k, d): rows
    out of range and ``y`` that is not finite and ≥ 0 make ``ok`` False (their ``y`` zeroed)."""
    ok = np.all((rows >= 0) & (rows < G.shape[1]), axis=1)
    ok &= np.all(np.isfinite(y) & (y >= 0.0), axis=1)
    rows = np.where(ok[:, None], rows, 0)
    y = np.where(ok[:, None], y, 0.0)
    n = np.arange(G.shape[0])[:, None]
    return G[n, rows], relaxed(h)[n, rows], y, ok


def _scale(Gj: np.ndarray, hj: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``Σ y_j|h'_j| + D Σ_j y_j‖G_j‖₁``: what a certificate's sums are rounded relative to."""
    with np.errstate(over="ignore", invalid="ignore"):
        return (y * np.abs(hj)).sum(axis=1) + TABLE_DOMAIN * (y * np.abs(Gj).sum(axis=2)).sum(axis=1)


def empty_verified(G: np.ndarray, h: np.ndarray, rows: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per certificate, True when ``y`` proves ``{x ∈ X : G x ≤ h'} = ∅`` (module docstring);
    ``G`` (n, k, d) and ``h`` (n, k) are the rows recomputed here of each certificate's region."""
    Gj, hj, y, ok = _gather(G, h, rows, y)
    with np.errstate(over="ignore", invalid="ignore"):
        c = -(y * hj).sum(axis=1) - TABLE_DOMAIN * np.abs(np.einsum("nm,nmd->nd", y, Gj)).sum(axis=1)
        return ok & (c > MARGIN * (_scale(Gj, hj, y) + 1.0))


def side_bounds(G: np.ndarray, h: np.ndarray, kind: np.ndarray, rows: np.ndarray, y: np.ndarray
                ) -> np.ndarray:
    """Per certificate, ``v`` with ``s·x_i ≤ v`` on ``{x ∈ X : G x ≤ h'}`` (``kind = 2i`` for
    ``s = 1``, ``2i + 1`` for ``s = −1``), rounded outwards and padded; +inf when it says nothing
    on X (``v ≥ D``) or the certificate is malformed."""
    n, d = G.shape[0], G.shape[2]
    Gj, hj, y, ok = _gather(G, h, rows, y)
    ok &= (kind >= 0) & (kind < 2 * d)
    e = np.zeros((n, d))
    e[np.arange(n), np.where(ok, kind // 2, 0)] = np.where(kind % 2 == 0, 1.0, -1.0)
    with np.errstate(over="ignore", invalid="ignore"):
        resid = np.abs(e - np.einsum("nm,nmd->nd", y, Gj)).sum(axis=1)
        v = (y * hj).sum(axis=1) + TABLE_DOMAIN * resid
        v = v + MARGIN * (_scale(Gj, hj, y) + TABLE_DOMAIN + 1.0)
        v = v + _BOX_PAD * (1.0 + np.abs(v))
        return np.where(ok & np.isfinite(v) & (v < TABLE_DOMAIN), v, np.inf)


@dataclass(frozen=True)
class Verified:
    """What a certificate set proves about the regions ``G``/``h`` it was checked against: per
    region, EMPTY proven, BOXED listed, and the box (±inf where nothing is proven)."""

    empty: np.ndarray
    boxed: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    rejected: int


def verify(certs: RegionCertificates, codes: np.ndarray,
           rows_of: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], d: int) -> Verified:
    """Check ``certs`` against the regions of ``codes`` (this process's enumeration), whose rows
    ``rows_of(codes)`` computes from the weights: per code, EMPTY when an empty-certificate
    verifies; else BOXED when listed, its box from its side certificates. Certificates of codes
    not in ``codes`` are ignored; ``rejected`` counts the empty-certificates of listed codes that
    did not verify. Vectorised over all certificates."""
    n = codes.shape[0]
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]

    def position(c: np.ndarray) -> np.ndarray:  # -1 where c is not one of codes
        if n == 0:
            return np.full(c.shape, -1)
        i = np.minimum(np.searchsorted(sorted_codes, c), n - 1)
        return np.where(sorted_codes[i] == c, order[i], -1)

    empty, boxed = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    lower, upper = np.full((n, d), -np.inf), np.full((n, d), np.inf)
    rejected = 0
    pe = position(certs.empty_codes)
    sel = np.flatnonzero(pe >= 0)
    for s0 in range(0, sel.size, 4096):
        part = sel[s0 : s0 + 4096]
        G, h = rows_of(certs.empty_codes[part])
        ok = empty_verified(G, h, certs.empty_rows[part], certs.empty_y[part])
        empty[pe[part[ok]]] = True
        rejected += int((~ok).sum())
    pb = position(certs.boxed_codes)
    boxed[pb[pb >= 0]] = True
    ps = position(certs.side_codes)
    sel = np.flatnonzero((ps >= 0) & boxed[np.maximum(ps, 0)])
    for s0 in range(0, sel.size, 4096):
        part = sel[s0 : s0 + 4096]
        G, h = rows_of(certs.side_codes[part])
        v = side_bounds(G, h, certs.side_kind[part], certs.side_rows[part], certs.side_y[part])
        i, up = certs.side_kind[part] // 2, certs.side_kind[part] % 2 == 0
        fin = np.isfinite(v)  # an infinite bound changes nothing; several bounds of a side: the tightest
        np.minimum.at(upper, (ps[part[fin & up]], i[fin & up]), v[fin & up])
        np.maximum.at(lower, (ps[part[fin & ~up]], i[fin & ~up]), -v[fin & ~up])
    boxed &= ~empty
    lower[~boxed], upper[~boxed] = -np.inf, np.inf
    return Verified(empty=empty, boxed=boxed, lower=lower, upper=upper, rejected=rejected)


def _sparse(y: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``m`` largest entries of ``y`` (indices, values; zero-padded)."""
    idx = np.argsort(-y, kind="stable")[:m]
    idx = idx[y[idx] > 0.0]
    rows, vals = np.zeros(m, dtype=np.int64), np.zeros(m)
    rows[: idx.size], vals[: idx.size] = np.sort(idx), y[np.sort(idx)]
    return rows, vals


def _row_duals(solver) -> np.ndarray | None:
    """``y = −λ ≥ 0`` from HiGHS's row duals λ (≤ 0 on binding ``≤`` rows of a minimisation), or
    None when the LP did not end optimal."""
    import highspy

    if solver.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    return np.maximum(-np.asarray(solver.getSolution().row_dual, dtype=np.float64), 0.0)


def _empty_dual(G: np.ndarray, h: np.ndarray) -> np.ndarray | None:
    """Candidate ``y`` for EMPTY: the duals of ``min s : G x − s ≤ h', x ∈ X``."""
    import highspy

    k, d = G.shape
    inf = highspy.kHighsInf
    solver = _dense_lp(np.hstack([G, -np.ones((k, 1))]), relaxed(h), np.r_[np.zeros(d), 1.0],
                       np.r_[np.full(d, -TABLE_DOMAIN), -inf], np.r_[np.full(d, TABLE_DOMAIN), inf])
    solver.run()
    y = _row_duals(solver)
    return None if y is None else y / max(float(y.sum()), 1e-300)


def _side_duals(G: np.ndarray, h: np.ndarray) -> list[np.ndarray | None] | None:
    """Candidate ``y`` for the 2d box sides (kind order), or None when HiGHS finds ``R ∩ X`` empty."""
    import highspy

    d = G.shape[1]
    solver = _dense_lp(G, relaxed(h), np.zeros(d), np.full(d, -TABLE_DOMAIN), np.full(d, TABLE_DOMAIN))
    idx = np.arange(d, dtype=np.int32)
    out: list[np.ndarray | None] = []
    for kind in range(2 * d):
        cost = np.zeros(d)
        cost[kind // 2] = -1.0 if kind % 2 == 0 else 1.0  # minimise −x_i (upper side) or x_i (lower)
        solver.changeColsCost(d, idx, cost)
        solver.run()
        if solver.getModelStatus() == highspy.HighsModelStatus.kInfeasible:
            return None
        out.append(_row_duals(solver))
    return out


def certify(codes: np.ndarray, state: np.ndarray,
            rows_of: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], *,
            stop: Callable[[], bool] = lambda: False) -> RegionCertificates:
    """Certificates for the resolved labels (``state`` −1 EMPTY, 1 BOXED, 0 skipped) of the
    regions of ``codes`` (rows from ``rows_of``), by LPs over X (1 per EMPTY, 2d per BOXED
    region), keeping only what :func:`verify`'s checks accept: an EMPTY label without a verifying
    ``y`` is left out (it loads UNKNOWN); a BOXED region found empty on X gets an EMPTY
    certificate instead; a box side whose bound is ≥ D is left out (±inf on load, as the engine's
    unbounded sides). ``stop()`` is asked between regions (interpreter exit)."""
    parts = []
    for s0 in range(0, max(codes.shape[0], 1), 4096):  # one (empty) part for no codes
        sl = slice(s0, s0 + 4096)
        G, h = rows_of(codes[sl])
        parts.append(_certify(G, h, codes[sl], state[sl], stop))
    return RegionCertificates(**{name: np.concatenate([getattr(p, name) for p in parts])
                                 for name in _FIELDS})


def _certify(G: np.ndarray, h: np.ndarray, codes: np.ndarray, state: np.ndarray, stop: Callable[[], bool]
             ) -> RegionCertificates:
    d = G.shape[2]
    m = min(d + 1, G.shape[1])  # a basic optimal dual has at most d + 1 non-zero entries
    e_codes, e_rows, e_y, b_codes, s_codes, s_kind, s_rows, s_y = ([] for _ in range(8))
    for j in range(codes.shape[0]):
        if stop():
            break
        if state[j] == 0:
            continue
        sides = None
        if state[j] == 1:
            sides = _side_duals(G[j], h[j])
            if sides is not None:
                b_codes.append(int(codes[j]))
        if sides is None:  # EMPTY, or a BOXED region that does not meet X
            y = _empty_dual(G[j], h[j])
            if y is None:
                continue
            rows, vals = _sparse(y, m)
            if empty_verified(G[j : j + 1], h[j : j + 1], rows[None], vals[None])[0]:
                e_codes.append(int(codes[j]))
                e_rows.append(rows)
                e_y.append(vals)
            continue
        for kind, y in enumerate(sides):
            if y is None:
                continue
            rows, vals = _sparse(y, m)
            v = side_bounds(G[j : j + 1], h[j : j + 1], np.array([kind]), rows[None], vals[None])[0]
            if np.isfinite(v):
                s_codes.append(int(codes[j]))
                s_kind.append(kind)
                s_rows.append(rows)
                s_y.append(vals)

    def arr(x: list, shape: tuple, dtype: type) -> np.ndarray:
        return np.array(x, dtype=dtype).reshape(shape)

    return RegionCertificates(
        empty_codes=arr(e_codes, (-1,), np.int64), empty_rows=arr(e_rows, (-1, m), np.int64),
        empty_y=arr(e_y, (-1, m), np.float64), boxed_codes=arr(b_codes, (-1,), np.int64),
        side_codes=arr(s_codes, (-1,), np.int64), side_kind=arr(s_kind, (-1,), np.int64),
        side_rows=arr(s_rows, (-1, m), np.int64), side_y=arr(s_y, (-1, m), np.float64))
