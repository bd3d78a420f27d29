"""Secure, exact-on-a-grid Laplace and Gaussian noise (Mironov 2012; Canonne, Kamath & Steinke 2020).

Randomness
    ``rng=None`` takes every bit from the operating system's CSPRNG (``os.urandom``). An ``int``
    seed or a ``numpy.random.Generator`` gives reproducible bits *for tests and experiments only*:
    whoever knows the seed can subtract the noise. Everything after the bits (:class:`RandomBits`)
    is one shared code path. :func:`add_noise` takes the OS CSPRNG's draws through a pool of blocks
    made by the same exact sampler, each draw handed out once (:mod:`privcore.mechanisms.noise_pool`).

Why a grid (Mironov 2012)
    Textbook ``x + scale * laplace()`` in floating point leaks x through the low-order bits of the
    output: the set of reachable doubles depends on x. Here every output is fl(j·g) for an integer
    j = k + N, where g is a power of two fixed by the public parameters, k = rint(x/g) (exact) and
    N is integer noise. The output is a function of j alone, so it is post-processing of an
    integer-valued mechanism and whatever x's low bits were, the set of possible outputs is the
    same. Rounding x to the grid moves each coordinate by ≤ g/2, hence adds ≤ numel·g to the ℓ1 and
    ≤ √numel·g to the ℓ2 sensitivity (numel = number of values in the array, an upper bound on the
    values per record, so this is safe whatever the batch layout).

Laplace: exact two-sided geometric on gℤ
    N has P(N = n) ∝ exp(−|n|/t), t an integer, i.e. discrete Laplace of scale b_eff = t·g. Its
    privacy loss for an integer shift of ℓ1 norm m is ≤ m/t, so with
    b_eff ≥ (Δ + numel·g) / (ε − 2⁻³⁶) the mechanism is ε-DP for ℓ1 sensitivity Δ (the 2⁻³⁶ absorbs
    the floating-point error bounded below). ``NoisePlan.effective`` is that b_eff; the relative
    inflation over the paper's Δ/ε is (numel·g/Δ + 2⁻³⁶/ε), ≈ 1e-9 for usual parameters.
    Sampling follows CKS20 Algorithm 2: |N| = t·V + U with U ∈ {0..t−1}, P(U = u) ∝ e^{−u/t}
    (uniform integer, accepted with probability e^{−u/t}) and V ~ Geometric(1 − e⁻¹) (count of
    Bernoulli(e⁻¹) successes), random sign, (−, 0) rejected. This replaces the
    ``floor(t·E1) − floor(t·E2)`` construction: at t ≈ 2³⁰ the float product t·E has an absolute
    error ~t·E·2⁻⁵³ against buckets of width 1, i.e. pmf errors ~2⁻²⁰, whereas here every float
    comparison is against a probability ≥ e⁻¹ with 53-bit uniforms (relative error ≤ 2⁻⁵⁰).

Gaussian: discrete Gaussian on gℤ (CKS20 Algorithm 3)
    N ~ N_ℤ(0, s²) with s = σ_eff/g, by rejection from discrete Laplace(t = ⌊s⌋ + 1) with
    acceptance exp(−(|y| − s²/t)²/(2s²)). What CKS20 prove that we rely on: integer shifts of ℓ2
    norm ≤ Δ' give ρ = Δ'²/(2σ²)-zCDP (same as the continuous Gaussian) and ρ-zCDP ⇒ (ε, δ)-DP by
    their Corollary 13. I could not retrieve their multivariate (ε, δ) theorem (which, as I
    recall it, matches the continuous analytic bound up to a τ ~ d·exp(−2π²s²) that vanishes at
    s ≈ 2³⁰), so the sampler uses the proven route: σ_eff = max(σ_nominal,
    discrete_gaussian_sigma_floor(ε − 2⁻³⁶, δ(1 − 2⁻³⁶) − 2⁻³⁰⁰, Δ + √numel·g)). With the analytic
    calibration that is 6–13 % above the paper's σ at δ = 1e-5; with the classic one (ε < 1) it is
    usually the nominal σ itself. The numbers are in ``NoisePlan``.

Floating-point error budget (applies to both samplers)
    exp, log, division and 53-bit uniforms give every acceptance probability to within a relative
    2⁻⁴⁸; the resulting pmf is within a factor (1 ± 2⁻⁴⁰) of the exact one at every outcome whose
    geometric part V ≤ 2¹² and Gaussian exponent ≤ 256, i.e. everywhere except on an event of
    probability < 2⁻³⁰⁰. The 2⁻³⁶ slack on ε (and the relative/absolute slack on δ) covers the
    (1 ± 2⁻⁴⁰) factor; the 2⁻³⁰⁰ event is the only residue (a pure-ε Laplace statement is therefore
    formally (ε, 2⁻³⁰⁰)), far below anything observable.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, TypeAlias

import numpy as np

from privcore.errors import PrivcoreError
from privcore.mechanisms.noise_pool import SECURE_POOL
from privcore.validation import check_delta, check_epsilon, check_finite_array, check_int, check_positive

__all__ = [
    "MAX_NUMEL",
    "MIN_EPSILON",
    "NoisePlan",
    "RandomBits",
    "RngLike",
    "add_noise",
    "as_random_bits",
    "check_sampler_epsilon",
    "discrete_gaussian_integers",
    "discrete_laplace_integers",
    "plan_gaussian",
    "plan_laplace",
]

#: ε below this cannot be served by the exact samplers (the numerical slack would dominate).
MIN_EPSILON = 2.0**-20
#: most values one plan or one call of the integer samplers may cover (2 GiB of int64 noise)
MAX_NUMEL = 2**28
#: noise scales (Laplace b, Gaussian σ) must lie in [2^-960, 2^1000]: the grid g ≥ b·2⁻⁴¹ then stays
#: a normal float64, and t·g, |N|·g < 2^52·g and PTR's test thresholds stay far from overflow
_SCALE_MIN_EXP, _SCALE_MAX_EXP = -960, 1000
#: δ below this leaves no room for the sampler's absolute slack 2⁻³⁰⁰ (module docstring)
_MIN_DELTA = 2.0**-299
_EPS_SLACK = 2.0**-36
_DELTA_REL_SLACK = 2.0**-36
_DELTA_ABS_SLACK = 2.0**-300
_ROUND_UP = 1.0 + 2.0**-50
_SHIFT_BASE = 30
_SHIFT_MAX = 40
_T_MAX = 2**42  # keeps |N| < 2^52 unless V > 1000 (probability e^-1000): then we raise
_N_LIMIT = 2.0**52
_EXP_MINUS_ONE = math.exp(-1.0)
_TWO_M53 = 2.0**-53


class RandomBits:
    """A stream of uniform 64-bit words: OS CSPRNG by default, reproducible when seeded explicitly.

    ``RandomBits()`` / ``RandomBits(None)``: ``os.urandom``. ``RandomBits(seed: int ≥ 0)``: a fresh
    PCG64 stream for that seed. ``RandomBits(numpy.random.Generator)``: draws from (and advances)
    that generator. Seeded streams are for tests and reproducible experiments, never for releases.
    """

    __slots__ = ("_gen",)

    def __init__(self, rng: int | np.random.Generator | None = None) -> None:
        if rng is None:
            self._gen: np.random.Generator | None = None
        elif isinstance(rng, np.random.Generator):
            self._gen = rng
        elif isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
            seed = check_int("rng", rng, minimum=0)
            self._gen = np.random.Generator(np.random.PCG64(seed))
        else:
            raise TypeError(
                "rng must be None (OS CSPRNG), a non-negative int seed, a numpy.random.Generator "
                f"or a RandomBits, got {type(rng).__name__}"
            )

    @property
    def secure(self) -> bool:
        """True when the bits come from the operating system's CSPRNG."""
        return self._gen is None

    def words(self, n: int) -> np.ndarray:
        """``n`` independent uniform uint64 words."""
        if n <= 0:
            return np.empty(0, dtype=np.uint64)
        if self._gen is None:
            return np.frombuffer(os.urandom(8 * n), dtype=np.uint64)
        return self._gen.integers(0, 2**64, size=n, dtype=np.uint64, endpoint=False)

    def uniform53(self, n: int) -> np.ndarray:
        """``n`` uniforms on the grid {k·2⁻⁵³ : 0 ≤ k < 2⁵³} (exact, no rounding)."""
        return (self.words(n) >> np.uint64(11)).astype(np.float64) * _TWO_M53

    def bits(self, n: int) -> np.ndarray:
        """``n`` independent fair bits as uint8 0/1."""
        w = self.words((n + 63) // 64)
        return np.unpackbits(w.view(np.uint8))[:n]

    def uint32(self, n: int) -> np.ndarray:
        """``n`` independent uniform 32-bit integers (two per word), as uint64."""
        return self.words((n + 1) // 2).view(np.uint32)[:n].astype(np.uint64)


def _bernoulli(p: np.ndarray, a: np.ndarray, k: int, bits: RandomBits) -> np.ndarray:
    """Exact Bernoulli(p) per entry from k uniform bits ``a`` (uint64 < 2^k), refined lazily.

    Compares W = (a + B)/2^k with p, B ~ U[0, 1) on 53 bits drawn only on a tie a = ⌊p·2^k⌋
    (probability 2^-k): P[W < p] = p up to B's 2⁻⁵³ granularity, with about k bits per draw.
    """
    scaled = np.ldexp(p, k)  # exact
    head = np.floor(scaled)
    a_float = a.astype(np.float64)  # exact: k ≤ 53
    out = a_float < head
    tie = np.flatnonzero(a_float == head)
    if tie.size:
        out[tie] = bits.uniform53(tie.size) < (scaled[tie] - head[tie])
    return out


RngLike: TypeAlias = "int | np.random.Generator | RandomBits | None"


def as_random_bits(rng: RngLike) -> RandomBits:
    """Return ``rng`` if it already is a :class:`RandomBits`, else wrap it (see that class)."""
    return rng if isinstance(rng, RandomBits) else RandomBits(rng)


@dataclass(frozen=True, kw_only=True)
class NoisePlan:
    """How the exact sampler realises a paper noise level (see the module docstring).

    ``nominal`` is the paper's scale (Laplace b or Gaussian σ); ``effective`` is what is actually
    drawn (≥ nominal), on the output grid ``grid`` (a power of two); ``grid_scale`` is effective/grid
    (the integer t for Laplace, the real s for the discrete Gaussian). ``numel`` is the largest
    array the plan may be used for. ``bound`` names what fixed ``effective``.
    """

    kind: Literal["laplace", "gaussian"]
    nominal: float
    effective: float
    grid: float
    grid_scale: float
    numel: int
    epsilon: float
    delta: float
    sensitivity: float
    bound: str

    @property
    def inflation(self) -> float:
        """effective / nominal (≥ 1)."""
        return self.effective / self.nominal

    def describe(self) -> str:
        """One line for the dashboard."""
        what = "Laplace scale" if self.kind == "laplace" else "Gaussian σ"
        return (
            f"{what}: paper {self.nominal:.6g}, drawn {self.effective:.6g} "
            f"(×{self.inflation:.9f}; {self.bound}) on the grid 2^{round(math.log2(self.grid))}"
        )


def check_sampler_epsilon(epsilon: float) -> float:
    """ε finite and ≥ :data:`MIN_EPSILON` (below it the samplers' numerical slack would dominate)."""
    eps = check_epsilon(epsilon)
    if eps < MIN_EPSILON:
        raise ValueError(f"epsilon must be in [{MIN_EPSILON:.3g}, ∞) for the exact samplers, got {epsilon!r}")
    return eps


def _shift_for(ratio: float) -> int:
    """Grid exponent offset so that the rounding slack is ≤ 2⁻³⁰ of the sensitivity, within limits."""
    if ratio > 2.0**_SHIFT_MAX:  # also inf: the offset is capped anyway
        return _SHIFT_MAX
    need = _SHIFT_BASE + math.ceil(math.log2(ratio)) if ratio > 1.0 else _SHIFT_BASE
    return max(_SHIFT_BASE, min(_SHIFT_MAX, need))


def _check_numel(numel: int) -> int:
    n = check_int("numel", numel, minimum=1)
    if n > MAX_NUMEL:
        raise ValueError(f"numel must be in [1, 2^28 = {MAX_NUMEL}] for the exact samplers, got {numel!r}")
    return n


def _check_scale(what: str, scale: float, params: str) -> None:
    """Refuse a noise scale outside [2^-960, 2^1000] (float64 grid arithmetic would under/overflow)."""
    if not (2.0**_SCALE_MIN_EXP <= scale <= 2.0**_SCALE_MAX_EXP):
        raise ValueError(
            f"the {what} for {params} is {scale:.3g}, outside the exact samplers' range "
            f"[2^{_SCALE_MIN_EXP}, 2^{_SCALE_MAX_EXP}]; nothing released"
        )


def _grid_search_failed(params: str) -> ValueError:
    return ValueError(f"no sampling grid keeps the integer noise below 2^42 for {params}; nothing released")


def plan_laplace(*, sensitivity: float, epsilon: float, numel: int) -> NoisePlan:
    """Plan ε-DP discrete-Laplace noise for ℓ1 sensitivity Δ on arrays of ≤ ``numel`` values.

    Paper scale b = Δ/ε (the Laplace mechanism, Dwork & Roth 2014 Thm 3.6). Effective scale
    t·g ≥ (Δ + numel·g)/(ε − 2⁻³⁶), g = 2^(⌊log₂ b⌋ − shift) (module docstring). ValueError, naming
    the parameters, when b lies outside [2^-960, 2^1000], numel > 2^28 or numel/ε > 2^41 (no grid
    keeps t ≤ 2^42 there).
    """
    sens = check_positive("sensitivity", sensitivity)
    eps = check_sampler_epsilon(epsilon)
    n = _check_numel(numel)
    params = f"sensitivity={sensitivity!r}, epsilon={epsilon!r}, numel={numel!r}"
    nominal = sens / eps
    _check_scale("Laplace scale sensitivity/epsilon", nominal, params)
    eps_cal = eps - _EPS_SLACK
    if n / eps_cal * _ROUND_UP > _T_MAX / 2:  # t ≥ numel/ε at every grid: no grid would do
        raise ValueError(f"numel/epsilon must be ≤ 2^41 for the exact Laplace sampler, got {params}")
    exponent = math.floor(math.log2(nominal)) - _shift_for(n / eps)
    for _ in range(2 * _SHIFT_MAX):  # t ≈ b/g + numel/ε halves its first term per step
        grid = math.ldexp(1.0, exponent)
        required = (sens + n * grid) / eps_cal * _ROUND_UP
        t = math.ceil(required / grid)
        while t * grid < required:
            t += 1
        if t <= _T_MAX:
            break
        exponent += 1
    else:
        raise _grid_search_failed(params)
    return NoisePlan(
        kind="laplace",
        nominal=nominal,
        effective=t * grid,
        grid=grid,
        grid_scale=float(t),
        numel=n,
        epsilon=eps,
        delta=0.0,
        sensitivity=sens,
        bound="discrete Laplace, ε-DP incl. grid rounding",
    )


def plan_gaussian(*, sigma: float, sensitivity: float, epsilon: float, delta: float, numel: int) -> NoisePlan:
    """Plan (ε, δ)-DP discrete-Gaussian noise for ℓ2 sensitivity Δ, never below the paper's ``sigma``.

    σ_eff = max(σ, discrete_gaussian_sigma_floor(ε − 2⁻³⁶, δ(1 − 2⁻³⁶) − 2⁻³⁰⁰, Δ + √numel·g))
    (CKS20 zCDP route; module docstring). ValueError when σ or σ_eff lies outside [2^-960, 2^1000],
    numel > 2^28 or δ < 2^-299 (below the sampler's absolute δ slack).
    """
    sig = check_positive("sigma", sigma)
    sens = check_positive("sensitivity", sensitivity)
    eps = check_sampler_epsilon(epsilon)
    dlt = check_delta(delta)
    if dlt < _MIN_DELTA:
        raise ValueError(f"delta must be in [2^-299, 1) for the exact Gaussian sampler, got {delta!r}")
    n = _check_numel(numel)
    params = (
        f"sigma={sigma!r}, sensitivity={sensitivity!r}, epsilon={epsilon!r}, delta={delta!r}, numel={numel!r}"
    )
    _check_scale("Gaussian σ", sig, params)
    # here, not at module level: scipy.special (~0.1 s) is not needed by the Laplace releases
    from privcore.mechanisms.gaussian_calibration import discrete_gaussian_sigma_floor

    eps_cal = eps - _EPS_SLACK
    dlt_cal = dlt * (1.0 - _DELTA_REL_SLACK) - _DELTA_ABS_SLACK
    root_n = math.sqrt(n) * _ROUND_UP
    exponent = math.floor(math.log2(sig)) - _shift_for(root_n * sig / sens)
    for _ in range(_SCALE_MAX_EXP - _SCALE_MIN_EXP + 2 * _SHIFT_MAX):
        grid = math.ldexp(1.0, exponent)
        sens_eff = (sens + root_n * grid) * _ROUND_UP
        floor_sigma = discrete_gaussian_sigma_floor(epsilon=eps_cal, delta=dlt_cal, sensitivity=sens_eff)
        effective = max(sig, floor_sigma)
        _check_scale("discrete Gaussian σ", effective, params)
        if math.floor(effective / grid) + 1 <= _T_MAX:
            break
        exponent += 1
    else:
        raise _grid_search_failed(params)
    bound = (
        "paper σ (already covers the proven discrete bound)"
        if effective == sig
        else "CKS20 zCDP bound for the discrete Gaussian incl. grid rounding"
    )
    return NoisePlan(
        kind="gaussian",
        nominal=sig,
        effective=effective,
        grid=grid,
        grid_scale=effective / grid,
        numel=n,
        epsilon=eps,
        delta=dlt,
        sensitivity=sens,
        bound=bound,
    )


_CHUNK = 1 << 16
_EXP_M1_ARRAY = np.full(2 * _CHUNK, _EXP_MINUS_ONE)


def _first_accepted(need: int, acceptance: float, propose) -> np.ndarray:
    """Concatenate ``propose(m)`` batches (each returns its accepted draws, in draw order) until
    ``need`` are in hand; return the first ``need``. The cut ignores the values, so they stay i.i.d."""
    parts = []
    have = 0
    while have < need:
        m = int((need - have) / acceptance * 1.03) + 64
        got = propose(m)
        parts.append(got)
        have += got.size
    return np.concatenate(parts)[:need] if len(parts) > 1 else parts[0][:need]


def _geometric(t: int, n: int, bits: RandomBits) -> np.ndarray:
    """n draws of Y ≥ 0 with P(Y = y) ∝ exp(−y/t) (CKS20 Alg. 2, one-sided part), as int64.

    Y = t·V + U: U ∈ {0..t−1} with P(U = u) ∝ e^{−u/t} by rejection (uniform integer from the top
    bits of a word, accepted with probability e^{−u/t}); V the number of Bernoulli(e⁻¹) successes
    before a failure, read off as run lengths of one long Bernoulli stream.
    """
    width = t.bit_length()
    shift = np.uint64(64 - width)
    t_float = float(t)

    spare = min(53, 64 - width)
    spare_mask = np.uint64((1 << spare) - 1)

    def propose_u(m: int) -> np.ndarray:
        w = bits.words(m)
        u = (w >> shift).astype(np.int64)  # top bits: uniform on [0, 2^width)
        ok = u < t
        # the word's remaining low bits drive the acceptance test (independent of u)
        ok &= _bernoulli(np.exp(u.astype(np.float64) / -t_float), w & spare_mask, spare, bits)
        return u[ok]

    u = _first_accepted(n, (t / 2.0**width) * (1.0 - _EXP_MINUS_ONE), propose_u)
    runs = []
    have = 0
    carry = 0
    while have < n:
        m = int((n - have) / (1.0 - _EXP_MINUS_ONE) * 1.03) + 64
        fails = np.flatnonzero(
            ~_bernoulli(
                _EXP_M1_ARRAY[:m] if m <= _EXP_M1_ARRAY.size else np.full(m, _EXP_MINUS_ONE),
                bits.uint32(m),
                32,
                bits,
            )
        )
        if fails.size == 0:
            carry += m
            continue
        run = np.diff(fails, prepend=-1) - 1  # successes before each failure
        run[0] += carry
        carry = m - 1 - int(fails[-1])
        runs.append(run)
        have += run.size
    v = np.concatenate(runs)[:n] if len(runs) > 1 else runs[0][:n]
    if v.max(initial=0) > 1000:  # probability < e^-1000: refuse rather than risk int overflow
        raise PrivcoreError("noise sampler hit an astronomically unlikely tail; nothing released, retry")
    return v * t + u


def _laplace_chunk(t: int, n: int, bits: RandomBits) -> np.ndarray:
    def propose(m: int) -> np.ndarray:
        y = _geometric(t, m, bits)
        negative = bits.bits(m).astype(bool)
        keep = ~(negative & (y == 0))  # (−, 0) is rejected so that 0 is not counted twice
        return np.where(negative, -y, y)[keep]

    return _first_accepted(n, 1.0 - 0.5 / t, propose)


#: at most this many draws go through the scalar sampler (:func:`_laplace_scalar`): below it numpy's
#: per-call cost outweighs its vector speed
SCALAR_MAX = 64
_WORD_BLOCK = 32  # words fetched at a time by the scalar sampler (≈ 4 per draw)


def _word_stream(bits: RandomBits, first: int) -> Iterator[int]:
    """The words of ``bits`` as Python ints, fetched in blocks (the scalar sampler's source)."""
    size = max(first, _WORD_BLOCK)
    while True:
        yield from bits.words(size).tolist()
        size = _WORD_BLOCK


#: e⁻¹·2³² and its floor: the Bernoulli(e⁻¹) trials of V compare 32-bit uniforms with them
_E32 = math.ldexp(_EXP_MINUS_ONE, 32)
_E32_HEAD = math.floor(_E32)


def _laplace_scalar(t: int, n: int, bits: RandomBits) -> list[int]:
    """n draws of P(N = k) ∝ exp(−|k|/t), one at a time in Python integers: the algorithm of
    :func:`_laplace_chunk` (CKS20 Alg. 2: |N| = t·V + U, random sign, (−, 0) rejected) with the same
    acceptance tests (:func:`_bernoulli`) on the same kinds of bits, so the same distribution; for
    small n it avoids numpy's per-call cost. U: the top ``width`` bits of a word, accepted when < t
    and, on the word's spare low bits, with probability e^{−u/t}; V: Bernoulli(e⁻¹) successes on
    32-bit halves of words before the first failure; the sign: one bit of a word."""
    width = t.bit_length()
    shift = 64 - width
    spare = min(53, 64 - width)
    mask = (1 << spare) - 1
    minus_t = -float(t)
    word = _word_stream(bits, 4 * n + 8).__next__
    exp, ldexp, floor = math.exp, math.ldexp, math.floor
    out: list[int] = []
    while len(out) < n:
        while True:  # U ∈ {0..t−1}, P(U = u) ∝ e^{−u/t}: _bernoulli(e^{−u/t}) on the spare bits
            w = word()
            u = w >> shift
            if u >= t:
                continue
            scaled = ldexp(exp(u / minus_t), spare)  # exact scaling
            head = floor(scaled)
            a = w & mask
            if a < head or (a == head and (word() >> 11) * _TWO_M53 < scaled - head):
                break
        v = 0
        while True:  # V: Bernoulli(e⁻¹) successes before the first failure, two trials per word
            w = word()
            a = w & 0xFFFFFFFF
            if a > _E32_HEAD or (a == _E32_HEAD and (word() >> 11) * _TWO_M53 >= _E32 - _E32_HEAD):
                break
            a = w >> 32
            v += 1
            if a > _E32_HEAD or (a == _E32_HEAD and (word() >> 11) * _TWO_M53 >= _E32 - _E32_HEAD):
                break
            v += 1
        if v > 1000:  # probability < e^-1000: refuse rather than risk int overflow
            raise PrivcoreError("noise sampler hit an astronomically unlikely tail; nothing released, retry")
        y = t * v + u
        if word() & 1:
            if y:  # (−, 0) is rejected so that 0 is not counted twice
                out.append(-y)
        else:
            out.append(y)
    return out


def _check_count(n: int) -> int:
    n = check_int("n", n, minimum=0)
    if n > MAX_NUMEL:
        raise ValueError(f"n must be in [0, 2^28 = {MAX_NUMEL}] draws per call, got {n!r}")
    return n


def discrete_laplace_integers(t: int, n: int, rng: RngLike = None) -> np.ndarray:
    """n i.i.d. integers with P(N = k) ∝ exp(−|k|/t) (CKS20 Algorithm 2), int64. ``t`` ≥ 1 integer."""
    t = check_int("t", t, minimum=1)
    n = _check_count(n)
    if t > _T_MAX:
        raise ValueError(f"t must be ≤ 2^42 for exact int64/float64 arithmetic, got {t}")
    bits = as_random_bits(rng)
    if n <= SCALAR_MAX:
        return np.array(_laplace_scalar(t, n, bits), dtype=np.int64)
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        out[start:stop] = _laplace_chunk(t, stop - start, bits)
    return out


def discrete_gaussian_integers(s: float, n: int, rng: RngLike = None) -> np.ndarray:
    """n i.i.d. integers with P(N = k) ∝ exp(−k²/(2s²)) (CKS20 Algorithm 3), int64."""
    s = check_positive("s", s)
    n = _check_count(n)
    t = math.floor(s) + 1
    if t > _T_MAX:
        raise ValueError(f"s must be < 2^42 for exact int64/float64 arithmetic, got {s!r}")
    bits = as_random_bits(rng)
    centre = s * s / t

    def propose(m: int) -> np.ndarray:
        y = _laplace_chunk(t, m, bits)
        # exp(−(|y| − s²/t)²/(2s²)) as exp(−u²/2), u = gap/s: the same value, but no 0/0 when s² underflows
        u = (np.abs(y).astype(np.float64) - centre) / s
        return y[_bernoulli(np.exp(-0.5 * (u * u)), bits.uint32(m), 32, bits)]

    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        out[start:stop] = _first_accepted(stop - start, 0.75, propose)
    return out


def _plan_integers(plan: NoisePlan, n: int, bits: RandomBits) -> np.ndarray:
    """n noise integers of ``plan``'s kind and scale, each checked to lie in the exact-arithmetic range
    (|N| < 2⁵²) when drawn: from the OS CSPRNG through the secure pool
    (:data:`~privcore.mechanisms.noise_pool.SECURE_POOL`: the same exact sampler, drawn in blocks),
    from a seeded stream directly (a seed reproduces its draws)."""
    if plan.kind == "laplace":
        t = int(plan.grid_scale)

        def sample(m: int) -> np.ndarray:
            return discrete_laplace_integers(t, m, bits)
    else:
        s = plan.grid_scale

        def sample(m: int) -> np.ndarray:
            return discrete_gaussian_integers(s, m, bits)

    def draw(m: int) -> np.ndarray:
        out = sample(m)
        if out.size and np.abs(out).max() >= _N_LIMIT:
            raise PrivcoreError("noise sampler left the exact-arithmetic range; nothing released, retry")
        return out

    if bits.secure:
        return SECURE_POOL.take((plan.kind, plan.grid_scale), n, draw)
    return draw(n)


def add_noise(values: np.ndarray, plan: NoisePlan, rng: RngLike = None) -> np.ndarray:
    """Return fl(g·(rint(values/g) + N)) with N drawn per ``plan``: float64, same shape as ``values``.

    ``values`` must be finite, below 2^1000·``plan.grid`` in magnitude and hold at most
    ``plan.numel`` entries (the plan's rounding slack is computed for that many). Raises before
    drawing anything on any bad input; ValueError after drawing when a noisy value overflows
    float64 (a function of the noisy output alone, so refusing it reveals nothing more).
    """
    if not isinstance(plan, NoisePlan):
        raise TypeError(f"plan must be a NoisePlan, got {type(plan).__name__}")
    x = check_finite_array("values", values)
    if x.size > plan.numel:
        raise ValueError(f"values has {x.size} entries but the noise plan covers at most {plan.numel}")
    with np.errstate(over="ignore"):
        scaled = x / plan.grid
        if not np.abs(scaled).max(initial=0.0) < 2.0**1000:
            raise ValueError(
                f"values too large for the noise grid 2^{round(math.log2(plan.grid))} "
                f"(max |value| = {np.max(np.abs(x)):.3g}); nothing released"
            )
        noise = _plan_integers(plan, x.size, as_random_bits(rng))
        # rint(x/g)·g is x rounded to the grid and N·g the noise, both exact (|N| < 2^52): one rounding
        out = np.asarray(np.rint(scaled) * plan.grid + noise.reshape(x.shape) * plan.grid)
    if not np.isfinite(out).all():  # post-processing of the noisy integers: refusing leaks nothing more
        raise ValueError("values plus noise overflowed float64; nothing released")
    return out
