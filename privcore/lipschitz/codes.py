"""Activation-pattern codes: a pattern of ``n`` hidden neurons as one integer, bit ``j`` = neuron ``j`` on.

Codes are numpy ``int64`` while ``n ≤ FAST_BITS`` (vectorised bit operations) and Python integers
in an ``object`` array beyond: numpy's fixed-width shifts silently wrap past bit 63, so an int64
code cannot hold neuron 64 (an unstable neuron there once lost its "on" state and the engine
reported a constant below the true one). Every function here takes ``n`` and picks the
representation itself, so no caller shifts bits by hand.
"""

from __future__ import annotations

import base64

import numpy as np

__all__ = [
    "FAST_BITS",
    "code_dtype",
    "codes_from_b64",
    "codes_from_bits",
    "codes_to_b64",
    "consistent_mask",
    "join_codes",
    "layer_codes",
    "pack",
    "to_bits",
]

#: widest pattern held in an int64 code (bit 63 is the sign; 62 leaves room for ``|`` and ``<<``)
FAST_BITS = 62


def code_dtype(n: int) -> np.dtype:
    """int64 for patterns of at most FAST_BITS neurons, else object (Python integers)."""
    return np.dtype(np.int64) if n <= FAST_BITS else np.dtype(object)


def pack(mask: np.ndarray) -> int:
    """The code of one boolean pattern, as a Python integer (exact at any width)."""
    return sum(1 << int(j) for j in np.flatnonzero(np.asarray(mask, dtype=bool)))


def codes_from_bits(bits: np.ndarray) -> np.ndarray:
    """Codes of the rows of a 0/1 matrix ``(N, n)``."""
    bits = np.asarray(bits) > 0.5
    n = bits.shape[1]
    if n <= FAST_BITS:
        return (bits.astype(np.int64) << np.arange(n, dtype=np.int64)).sum(axis=1, dtype=np.int64)
    packed = np.packbits(bits, axis=1, bitorder="little")
    return np.array([int.from_bytes(row.tobytes(), "little") for row in packed] or [], dtype=object)


def to_bits(codes: np.ndarray, n: int) -> np.ndarray:
    """The patterns of ``codes`` as a float 0/1 matrix ``(N, n)``."""
    codes = np.asarray(codes)
    if codes.dtype != object:
        if n > FAST_BITS:
            raise ValueError(f"int64 codes hold at most {FAST_BITS} neurons, asked for {n}")
        return ((codes[:, None] >> np.arange(n, dtype=np.int64)) & 1).astype(np.float64)
    width = (n + 7) // 8
    raw = b"".join(int(c).to_bytes(width, "little") for c in codes)
    packed = np.frombuffer(raw, dtype=np.uint8).reshape(codes.shape[0], width)
    return np.unpackbits(packed, axis=1, count=n, bitorder="little").astype(np.float64)


def layer_codes(width: int, offset: int, n: int) -> np.ndarray:
    """The codes of all 2^width patterns of one layer whose neurons start at bit ``offset``."""
    if offset + width <= FAST_BITS:
        return np.arange(1 << width, dtype=np.int64) << np.int64(offset)
    return np.array([p << offset for p in range(1 << width)], dtype=code_dtype(n))


def join_codes(left: np.ndarray, right: np.ndarray, n: int) -> np.ndarray:
    """All ``l | r`` (flattened, ``left`` major) for codes on disjoint bits."""
    dtype = code_dtype(n)
    return (left.astype(dtype)[:, None] | right.astype(dtype)[None, :]).reshape(-1)


def consistent_mask(codes: np.ndarray, must_on: np.ndarray, must_off: np.ndarray) -> np.ndarray:
    """Boolean mask of the codes whose pattern has every ``must_on`` neuron on and every ``must_off`` off."""
    on, off = pack(must_on), pack(must_off)
    if codes.dtype != object:
        return ((codes & np.int64(on)) == on) & ((codes & np.int64(off)) == 0)
    return np.fromiter(((c & on) == on and (c & off) == 0 for c in codes), dtype=bool, count=codes.size)


def codes_to_b64(codes: np.ndarray, n: int) -> str:
    """Storage form: little-endian int64 for ≤ FAST_BITS neurons, else each pattern's packed bits."""
    if n <= FAST_BITS:
        raw = np.ascontiguousarray(codes, dtype="<i8").tobytes()
    else:
        raw = np.packbits(to_bits(codes, n) > 0.5, axis=1, bitorder="little").tobytes()
    return base64.b64encode(raw).decode("ascii")


def codes_from_b64(text: str, count: int, n: int) -> np.ndarray:
    """Inverse of :func:`codes_to_b64`; ValueError on a wrong size, a code ≥ 2^n or a repeated code."""
    raw = base64.b64decode(text.encode("ascii"), validate=True)
    if n <= FAST_BITS:
        if len(raw) != 8 * count:
            raise ValueError("stored pattern codes of the wrong size")
        codes = np.frombuffer(raw, dtype="<i8").astype(np.int64)
        bad = np.any(codes < 0) or np.any(codes >= (np.int64(1) << np.int64(n)))
    else:
        width = (n + 7) // 8
        if len(raw) != width * count:
            raise ValueError("stored pattern codes of the wrong size")
        packed = np.frombuffer(raw, dtype=np.uint8).reshape(count, width)
        codes = np.array([int.from_bytes(row.tobytes(), "little") for row in packed], dtype=object)
        bad = any(c >> n for c in codes)
    if bad or len(set(codes.tolist())) != count:
        raise ValueError("stored pattern codes out of range or repeated")
    return codes
