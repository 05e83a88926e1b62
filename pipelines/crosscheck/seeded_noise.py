"""NumPy twin of pipelines/seeded_noise.h/.cc: seeded N(0, 1) numbers, bit for bit.

Element i of stream s under seed k is a pure function of (k, s, i):

  key     = mix64(seed * 0x9E3779B97F4A7C15 + mix64(stream))
  word(n) = mix64(key + n * 0x9E3779B97F4A7C15)              (splitmix64 finaliser)
  pair j: u1 = ((word(2j) >> 11) + 1) * 2^-53, u2 = (word(2j+1) >> 11) * 2^-53
          r = sqrt(-2 ln u1); z[2j] = r cos(2 pi u2), z[2j+1] = r sin(2 pi u2)

All 64-bit arithmetic wraps (numpy uint64). Box-Muller is done in float64 and the result
cast (round to nearest) to float32, like the C++ static_cast<float>.

The integer part is vectorised. ln, cos and sin go through Python's math module, i.e. the
C library's scalar functions, the same ones the C++ calls: NumPy's own float64 log/sin/cos
(SIMD, e.g. AVX-512) differ from glibc in the last bit for a large fraction of inputs, and
that difference survives the float32 cast often enough to break bit-for-bit equality.
sqrt and the multiplications are correctly rounded IEEE operations in both, so NumPy is fine
for them.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_MASK64 = (1 << 64) - 1
_TWO_PI = 6.283185307179586476925286766559
_INV53 = 1.0 / 9007199254740992.0  # 2^-53


def StreamOf(name: str) -> int:
    """64-bit FNV-1a of the UTF-8 bytes of a name (the stream of a named tensor)."""
    h = 0xCBF29CE484222325
    for byte in name.encode("utf-8"):
        h ^= byte
        h = (h * 0x100000001B3) & _MASK64
    return h


def _mix64(z: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser on uint64 (scalar or array), with wraparound."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def SeededNormal(seed: int, stream: int, shape: Sequence[int] | Iterable[int]) -> np.ndarray:
    """A float32 array of the given shape filled with N(0, 1) numbers."""
    shape = tuple(int(s) for s in shape)
    n = 1
    for s in shape:
        n *= s
    if n == 0:
        return np.zeros(shape, dtype=np.float32)
    with np.errstate(over="ignore"):
        seed64 = np.uint64(int(seed) & _MASK64)
        stream64 = np.uint64(int(stream) & _MASK64)
        key = _mix64(seed64 * _GOLDEN + _mix64(stream64))
        pairs = (n + 1) // 2
        j = np.arange(pairs, dtype=np.uint64)
        a = _mix64(key + (np.uint64(2) * j) * _GOLDEN)
        b = _mix64(key + (np.uint64(2) * j + np.uint64(1)) * _GOLDEN)
    u1 = ((a >> np.uint64(11)) + np.uint64(1)).astype(np.float64) * _INV53
    u2 = (b >> np.uint64(11)).astype(np.float64) * _INV53
    # The C library's log, cos and sin (see the module docstring).
    log_u1 = np.fromiter(map(math.log, u1.tolist()), dtype=np.float64, count=pairs)
    angle = (_TWO_PI * u2).tolist()
    cos_a = np.fromiter(map(math.cos, angle), dtype=np.float64, count=pairs)
    sin_a = np.fromiter(map(math.sin, angle), dtype=np.float64, count=pairs)
    r = np.sqrt(-2.0 * log_u1)
    out = np.empty(2 * pairs, dtype=np.float32)
    out[0::2] = (r * cos_a).astype(np.float32)
    out[1::2] = (r * sin_a).astype(np.float32)
    return out[:n].reshape(shape)
