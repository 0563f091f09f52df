"""Counter-based random draws for the bootstrap of count tables.

A Poisson-bootstrap replicate of a count table is one independent
Poisson(n_c) draw per cell c (n_c the cell's count). Each draw here is a pure
function of ``(seed, cell, replicate)``: Philox4x32-10 (Salmon et al.,
"Parallel random numbers: as easy as 1, 2, 3", SC 2011) turns the counter
``(cell low, cell high, replicate, attempt)`` and the 64-bit key of the seed
into four 32-bit words, two uniforms in (0, 1) per call. The Poisson sampler
is numpy's own pair of algorithms: multiplication of uniforms below 10 and
Hörmann's transformed rejection with squeeze (PTRS, 1993) from 10 up, with
the logarithm and log-gamma written out of correctly rounded operations
(:func:`log`), so that a kernel doing the same operations in the same order
(no fused multiply-add) draws the same integers. No draw depends on another:
any subset of the cells or replicates, in any order or chunking, gives the
same numbers.
"""

from __future__ import annotations

import math

import numpy as np

_MASK32 = np.uint64(0xFFFFFFFF)
_PHILOX_M0, _PHILOX_M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_PHILOX_W0, _PHILOX_W1 = 0x9E3779B9, 0xBB67AE85
PHILOX_ROUNDS = 10


def seed_key(seed: int) -> tuple[int, int]:
    """The Philox key (two 32-bit words) of a seed: its low 64 bits."""
    seed = int(seed) & 0xFFFFFFFFFFFFFFFF
    return seed & 0xFFFFFFFF, seed >> 32


def philox4x32(counter, key: tuple[int, int]):
    """Philox4x32-10 of counters ``(4, ...)`` (uint32 words) under ``key``:
    four arrays of 32-bit words (as uint64)."""
    c0, c1, c2, c3 = (np.asarray(word, dtype=np.uint64) & _MASK32 for word in counter)
    k0, k1 = key
    for round_ in range(PHILOX_ROUNDS):
        if round_:
            k0, k1 = (k0 + _PHILOX_W0) & 0xFFFFFFFF, (k1 + _PHILOX_W1) & 0xFFFFFFFF
        product0 = _PHILOX_M0 * c0
        product1 = _PHILOX_M1 * c2
        hi0, lo0 = product0 >> np.uint64(32), product0 & _MASK32
        hi1, lo1 = product1 >> np.uint64(32), product1 & _MASK32
        c0, c1, c2, c3 = hi1 ^ c1 ^ np.uint64(k0), lo1, hi0 ^ c3 ^ np.uint64(k1), lo0
    return c0, c1, c2, c3


def _open_uniform(high, low):
    """A double in (0, 1) from 53 bits of two 32-bit words: (m + 1/2) 2**-53."""
    bits = ((high >> np.uint64(5)) << np.uint64(26)) | (low >> np.uint64(6))
    return (bits.astype(np.float64) + 0.5) * 2.0 ** -53


def uniform_pair(cells, replicates, attempt, key):
    """Two uniforms in (0, 1) for each (cell, replicate) at one attempt."""
    cells = np.asarray(cells, dtype=np.uint64)
    words = philox4x32((cells & _MASK32, cells >> np.uint64(32),
                        np.asarray(replicates, dtype=np.uint64),
                        np.full(np.shape(cells), attempt, dtype=np.uint64)), key)
    return _open_uniform(words[0], words[1]), _open_uniform(words[2], words[3])


# -- the logarithm, from correctly rounded operations -------------------------

_LN2_HIGH = 6.93147180369123816490e-01  # ln 2 to 32 bits: e * this is exact
_LN2_LOW = 1.90821492927058770002e-10
_SQRT_HALF = 0.70710678118654752440
# 1 / (2 i + 1): log(1 + f) = 2 atanh(s) = 2 s (1 + s^2/3 + s^4/5 + ...), s = f / (2 + f).
_ATANH_TERMS = tuple(1.0 / (2 * i + 1) for i in range(1, 13))


def log(x):
    """Natural logarithm of positive finite doubles to about one ulp, by a fixed
    sequence of IEEE operations (kernels/resample.cu ``det_log`` repeats it)."""
    mantissa, exponent = np.frexp(np.asarray(x, dtype=np.float64))
    low = mantissa < _SQRT_HALF
    mantissa = np.where(low, mantissa * 2.0, mantissa)
    e = (exponent - low).astype(np.float64)
    f = mantissa - 1.0
    s = f / (2.0 + f)
    z = s * s
    series = np.full(np.shape(z), _ATANH_TERMS[-1])
    for term in reversed(_ATANH_TERMS[:-1]):
        series = series * z + term
    atanh_tail = s * (z * series)
    # 2 atanh(s) = 2 s + 2 s z series, and 2 s = f - s f.
    return e * _LN2_HIGH + ((f - s * f) + (atanh_tail * 2.0 + e * _LN2_LOW))


# Stirling's series of log Gamma (numpy's random_loggam coefficients).
_LOGGAM_TERMS = (8.333333333333333e-02, -2.777777777777778e-03, 7.936507936507937e-04,
                 -5.952380952380952e-04, 8.417508417508418e-04, -1.917526917526918e-03,
                 6.410256410256410e-03, -2.955065359477124e-02, 1.796443723688307e-01,
                 -1.39243221690590e+00)
_HALF_LOG_TWO_PI = 0.91893853320467274178


def log_factorial(k):
    """log(k!) of integers k >= 0 (as doubles): Stirling's series at k + 1 + n,
    shifted down by n = max(0, 6 - k) logarithms."""
    x = np.asarray(k, dtype=np.float64) + 1.0
    shift = np.maximum(7.0 - np.floor(x), 0.0)
    x0 = x + shift
    x2 = (1.0 / x0) * (1.0 / x0)
    series = np.full(np.shape(x0), _LOGGAM_TERMS[-1])
    for term in reversed(_LOGGAM_TERMS[:-1]):
        series = series * x2 + term
    result = series / x0 + _HALF_LOG_TWO_PI + (x0 - 0.5) * log(x0) - x0
    shifted = np.flatnonzero(shift > 0)
    if shifted.size:
        # Only the few k < 6 are shifted: the rest skip the logarithms.
        part, x_shifted = result[shifted], x0[shifted]
        for step in range(1, 7):
            part = np.where(shift[shifted] >= step, part - log(x_shifted - step), part)
        result[shifted] = part
    return np.where(x <= 2.0, 0.0, result)


# -- Poisson draws ----------------------------------------------------------

# exp(-n) for the multiplication method's means n < 10 (the table's counts are
# integers), the same doubles as the kernel's table.
MULTIPLICATION_LIMIT = 10
EXP_MINUS = tuple(math.exp(-n) for n in range(MULTIPLICATION_LIMIT))


def poisson(means, cells, replicates, key):
    """One Poisson(mean) draw per element: ``means`` integer counts (int64),
    ``cells`` and ``replicates`` the counter of each draw (same shape)."""
    means = np.asarray(means, dtype=np.int64)
    cells = np.asarray(cells, dtype=np.uint64)
    replicates = np.asarray(replicates, dtype=np.uint64)
    draws = np.zeros(means.shape, dtype=np.int64)
    small = (means > 0) & (means < MULTIPLICATION_LIMIT)
    if small.any():
        draws[small] = _poisson_small(means[small], cells[small], replicates[small], key)
    large = means >= MULTIPLICATION_LIMIT
    if large.any():
        draws[large] = _poisson_ptrs(means[large], cells[large], replicates[large], key)
    return draws


def _poisson_small(means, cells, replicates, key):
    """Multiplication method: the number of uniforms whose running product stays
    above exp(-mean), two uniforms per Philox call."""
    threshold = np.asarray(EXP_MINUS)[means]
    draws = np.zeros(means.shape, dtype=np.int64)
    product = np.ones(means.shape)
    active = np.arange(means.shape[0])
    attempt = 0
    while active.size:
        first, second = uniform_pair(cells[active], replicates[active], attempt, key)
        product[active] *= first
        above = product[active] > threshold[active]
        draws[active[above]] += 1
        active, second = active[above], second[above]
        product[active] *= second
        above = product[active] > threshold[active]
        draws[active[above]] += 1
        active = active[above]
        attempt += 1
    return draws


def _poisson_ptrs(means, cells, replicates, key):
    """Hörmann's PTRS for means >= 10 (numpy's random_poisson_ptrs); each
    attempt one Philox call (U, V)."""
    lam = means.astype(np.float64)
    slam = np.sqrt(lam)
    loglam = log(lam)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    invalpha = 1.1239 + 1.1328 / (b - 3.4)
    vr = 0.9277 - 3.6224 / (b - 2.0)
    draws = np.zeros(means.shape, dtype=np.int64)
    pending = np.arange(means.shape[0])
    attempt = 0
    while pending.size:
        u, v = uniform_pair(cells[pending], replicates[pending], attempt, key)
        u = u - 0.5
        us = 0.5 - np.abs(u)
        ap, bp, lp = a[pending], b[pending], lam[pending]
        k = np.floor((2.0 * ap / us + bp) * u + lp + 0.43)
        quick = (us >= 0.07) & (v <= vr[pending])
        rejected = (k < 0) | ((us < 0.013) & (v > us))
        accept = quick.copy()
        slow = np.flatnonzero(~quick & ~rejected)
        if slow.size:
            # The logarithms only where the squeeze did not decide (about 1 in 10).
            index = pending[slow]
            ks, uss = k[slow], us[slow]
            lhs = log(v[slow]) + log(invalpha[index]) - log(ap[slow] / (uss * uss) + bp[slow])
            rhs = -lp[slow] + ks * loglam[index] - log_factorial(ks)
            accept[slow] = lhs <= rhs
        draws[pending[accept]] = k[accept].astype(np.int64)
        pending = pending[~accept]
        attempt += 1
    return draws
