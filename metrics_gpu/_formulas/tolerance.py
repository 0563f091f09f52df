"""How exact scores of a floating-point type are: the eps of a score type and
how far from 1 a row of probabilities of that type may sum (the checks and the
NumPy backend hold rows to it, as kernels/streaming.cu does)."""

from __future__ import annotations

import math

import numpy as np


def float_eps(dtype) -> float:
    """Machine epsilon of a float dtype (bfloat16 included); 0 for other (exact) types."""
    dtype = np.dtype(dtype)
    if dtype.name == "bfloat16":
        return 2.0**-7  # 8 significand bits; np.finfo does not know ml_dtypes' types
    return float(np.finfo(dtype).eps) if dtype.kind == "f" else 0.0


def score_dtype_eps(dtype) -> float:
    """The eps scikit-learn 1.9 uses for probabilities of ``dtype`` (clip of log
    loss, tolerance of row sums): float16 and float32 keep their own type there,
    every other type is converted to float64 first. bfloat16 takes float32's:
    its values are float32 values exactly, and 16-bit scores must give what
    the same scores widened to float32 give."""
    dtype = np.dtype(dtype)
    if dtype.name == "bfloat16":
        dtype = np.dtype(np.float32)
    return float_eps(dtype if dtype in (np.float16, np.float32) else np.float64)


# bfloat16 keeps 8 significant bits: each probability rounds by up to 2**-9 of
# itself, so a row of them sums to 1 only within about 2**-8; its own eps
# (2**-7) sets its rows' tolerance as sqrt(eps) sets the other types' (below).
BFLOAT16_EPS = 2.0 ** -7

# The least tolerance of a row sum, whatever the type the row is given in:
# probabilities are most often made in half precision (AMP or bfloat16
# inference) and widened to float32 or float64 for saving, and such rows sum
# to 1 only within the half type's rounding, not the type they arrive in.
# A softmax rounded to bfloat16 (unit roundoff u = 2**-9) is off by at most
# u * sum(p) = u from rounding its outputs, plus u or two more where the
# exponentials and their sum were rounded to bfloat16 too: about 3u = 5.9e-3
# at worst (3.2e-3 seen from torch), under 2**-7 = 7.8e-3, bfloat16's eps;
# float16's softmax (u = 2**-11) is off by under 4e-4. Logits or
# unnormalized scores miss 1 by far more than 2**-7.
HALF_PRECISION_SUM_TOLERANCE = BFLOAT16_EPS


def probability_sum_tolerance(dtype) -> float:
    """How far from 1 a row of probabilities of ``dtype`` (or its name) may sum:
    :data:`HALF_PRECISION_SUM_TOLERANCE` (rows made in float16 or bfloat16 and
    widened), or sqrt(eps) of the type (:func:`score_dtype_eps`, scikit-learn's
    tolerance, sqrt(:data:`BFLOAT16_EPS`) for bfloat16) where larger.
    kernels/streaming.cu holds rows to the same (probability_tolerance)."""
    if (dtype if isinstance(dtype, str) else np.dtype(dtype).name) == "bfloat16":
        own = math.sqrt(BFLOAT16_EPS)
    else:
        own = math.sqrt(score_dtype_eps(dtype))
    return max(own, HALF_PRECISION_SUM_TOLERANCE)
