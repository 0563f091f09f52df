"""What the checks of every input kind share: a caller's arrays put on the
backend (and back, :func:`to_numpy`), class counts and a state's size, sample
weights, the arguments and options of the metrics, and the helpers that find
an offending value and name its position."""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Iterable
from typing import get_args

import numpy as np

from metrics_gpu.backends.selection import is_device_array
from metrics_gpu.backends.kernel_sources import SCORE_MAX_TOP_K
from metrics_gpu._formulas.state import Bfloat16Bits, bfloat16_dtype
from metrics_gpu._common.types import (
    Average,
    ConfusionMatrixOption,
    KappaWeights,
    Normalize,
)


AVERAGE_OPTIONS = (None, *get_args(Average))
NORMALIZE_OPTIONS = (None, *get_args(Normalize))
KAPPA_WEIGHTS = (None, *get_args(KappaWeights))

# A check that needs a mask over (N, K) scores builds it this many elements
# at a time (16 MiB of bool): bounded memory for memory-mapped scores.
CHECK_CHUNK_ELEMENTS = 1 << 24

# An accumulated state beyond this is refused, with what it would need, rather
# than left to fail in the allocator (8 GiB: a dense matrix of 2**30 int64
# cells, or per-class statistics for about 3.4e8 classes).
MAX_STATE_BYTES = 8 << 30
# Per-class statistics: true positives, support and predicted counts (8 bytes
# each) and the observed flag, per class.
CLASS_STATISTICS_BYTES = 3 * 8 + 1


def _is_int(value) -> bool:
    if type(value) is int:  # the common case, without the ABC's check
        return True
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _first_index(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _first_true(mask, backend) -> int | None:
    """Flat index of the first True in ``mask``, or None. Found where the mask
    lives (a flag and one index read back): checks never copy the data to the host."""
    if not bool(mask.any()):
        return None
    return int(backend.xp.flatnonzero(mask)[0])


def _row_chunks(array, *, chunked: bool = False):
    """``(first row, rows)`` of ``array`` for a check that reads its values:
    :data:`CHECK_CHUNK_ELEMENTS` at a time (small temporaries) with ``chunked``
    and always for :class:`Bfloat16Bits`, whose rows come widened to float32
    (so that no check copies (N, K) scores whole); else the array itself."""
    bits = isinstance(array, Bfloat16Bits)
    if not (chunked or bits) or array.ndim == 0:
        yield 0, array
        return
    step = max(1, CHECK_CHUNK_ELEMENTS // max(math.prod(array.shape[1:]), 1))
    for start in range(0, array.shape[0], step):
        rows = array[start:start + step]
        yield start, rows.widened() if bits else rows


def _first_nonfinite(array, backend) -> int | None:
    """Flat index of the first NaN or infinity in a float array, or None.

    A sum is finite only if every term is (NaN and infinities propagate), so
    the usual case costs one reduction and no temporary (float16 and bfloat16
    are summed as float32 in the reduction's buffer, not converted whole;
    bfloat16 patterns take two reductions of their own); a non-finite sum (or
    one that overflowed) then looks for the index, a chunk of rows at a time
    so that its masks stay small (memory-mapped scores).
    """
    xp = backend.xp
    if isinstance(array, Bfloat16Bits):
        if not array.any_nonfinite():
            return None
    else:
        # Finite scores near the type's limit overflow the sum (inf, or NaN
        # from both signs): the chunks then decide, and NumPy's warning would
        # be about this sum, not the caller's scores.
        with np.errstate(over="ignore", invalid="ignore"):
            total = array.sum(dtype=np.float32) if array.dtype.itemsize < 4 else array.sum()
        if bool(xp.isfinite(total)):
            return None
    row_size = math.prod(array.shape[1:])
    for start, rows in _row_chunks(array, chunked=True):
        i = _first_true(~xp.isfinite(rows), backend)
        if i is not None:
            return start * row_size + i
    return None


def check_num_classes(num_classes, name: str = "num_classes") -> int | None:
    if num_classes is None:
        return None
    if not _is_int(num_classes) or num_classes < 1:
        raise ValueError(f"{name} must be a positive integer, got {num_classes!r}")
    return int(num_classes)


def _in_bytes(size: int) -> str:
    scaled: float = size  # in the unit of the loop
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if scaled < 1024 or unit == "EiB":
            return f"{size:,} bytes" if unit == "bytes" else f"{scaled:,.1f} {unit}"
        scaled /= 1024
    raise AssertionError("unreachable")


def check_state_size(num_classes: int, *, matrix: bool = False) -> None:
    """Refuse a state for ``num_classes`` classes beyond :data:`MAX_STATE_BYTES`,
    saying what it would need: the K x K matrix with ``matrix``, else the
    per-class statistics every label metric needs."""
    if matrix:
        cells = num_classes * num_classes
        need = 8 * cells
        what = f"a confusion matrix of {num_classes} x {num_classes} classes needs {cells:,} cells"
        advice = ("pass labels= to select classes, or use the per-class metrics, which need "
                  "O(K) memory")
    else:
        need = CLASS_STATISTICS_BYTES * num_classes
        what = (f"num_classes={num_classes} needs per-class statistics of "
                f"{CLASS_STATISTICS_BYTES} bytes per class")
        advice = ("num_classes is the number of classes K, labels being codes 0..K-1; map "
                  "sparse ids to codes with metrics_gpu.encode_labels")
    if need > MAX_STATE_BYTES:
        raise ValueError(
            f"{what} ({_in_bytes(need)}), more than the {_in_bytes(MAX_STATE_BYTES)} a "
            f"metric state may take; {advice}"
        )


def check_ignore_index(ignore_index) -> int | None:
    if ignore_index is None:
        return None
    if not _is_int(ignore_index):
        raise ValueError(f"ignore_index must be an integer or None, got {ignore_index!r}")
    return int(ignore_index)


def host_tensor(values):
    """A torch CPU tensor as NumPy, as a model hands it over: detached from
    autograd (read without a copy, as torchmetrics does) and bfloat16 widened
    to float32 (exact; NumPy has no bfloat16 of its own: (N, K) scores keep
    their 16 bits through :func:`_scores_to_backend`). Anything else as it is."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(values, torch.Tensor) or values.is_cuda:
        return values
    values = values.detach()
    if values.dtype == torch.bfloat16:
        values = values.float()
    return values.numpy()


def _to_backend(values, backend):
    """``values`` on the backend. Host data no GPU can hold (strings, objects)
    stays on the host, so that the dtype checks name it, not CuPy."""
    if isinstance(values, Bfloat16Bits):  # scores read as something else: their values
        return values.widened()
    values = host_tensor(values)
    if not is_device_array(values):
        host = np.asarray(values)
        if host.dtype.kind in "OUSV" and host.dtype.name != "bfloat16":
            return host
        if not host.dtype.isnative:
            # Big-endian data ('>i4', '>f8'): one copy in native order, so that
            # dtype tables and kernels downstream see the values.
            host = host.astype(host.dtype.newbyteorder("="))
        values = host
    return backend.asarray(values)


def _bfloat16_bits(values, backend):
    """A torch bfloat16 tensor of scores (2-D or more: never labels) as its
    16-bit patterns (uint16) on a kernel backend, else None: the tensor's own
    memory (through DLPack on a GPU; a CPU tensor on the emulated device as it
    is, on the cuda one copied to the GPU as 16-bit data, as any host data
    is). The kernels widen the patterns in registers (CuPy has no bfloat16),
    so a model's bfloat16 logits are read in place, never converted."""
    torch = sys.modules.get("torch")
    if (torch is None or backend.name == "numpy" or not isinstance(values, torch.Tensor)
            or values.dtype != torch.bfloat16 or values.ndim < 2):
        return None
    bits = values.detach().view(torch.int16)
    return backend.asarray(bits if bits.is_cuda else bits.numpy()).view(np.uint16)


def _scores_to_backend(values, backend):
    """``values`` on the backend as :func:`_to_backend` puts them, except the
    ``(N, K)`` (or channel-first) scores of a torch bfloat16 tensor, which stay
    16-bit, zero-copy: their patterns (:class:`Bfloat16Bits`) on a kernel
    backend, ml_dtypes' bfloat16 on the NumPy backend (which widens a chunk at
    a time). Without ml_dtypes (NumPy then has no bfloat16 type to check them
    as) they are widened to float32, as every other bfloat16 input is
    (labels, weights, one column of scores)."""
    if isinstance(values, Bfloat16Bits):
        return values
    torch = sys.modules.get("torch")
    if (torch is None or not isinstance(values, torch.Tensor) or values.dtype != torch.bfloat16
            or values.ndim < 2 or values.shape[1] < 2 or bfloat16_dtype() is None):
        return _to_backend(values, backend)
    bits = _bfloat16_bits(values, backend)
    if bits is not None:
        return Bfloat16Bits(bits)
    if not values.is_cuda:
        return values.detach().view(torch.int16).numpy().view(bfloat16_dtype())
    return _to_backend(values, backend)


def to_numpy(value) -> np.ndarray:
    """A NumPy array of a caller's value (torch tensors and CuPy arrays copied back)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if hasattr(value, "get") and not isinstance(value, np.ndarray):
        return value.get()
    return np.asarray(value)


def _as_scores(values, name: str, backend, validate: bool):
    array = _scores_to_backend(values, backend)
    # bfloat16 (ml_dtypes, as JAX and torch export it to NumPy) has kind 'V'.
    bfloat16 = array.dtype.name == "bfloat16"
    if array.dtype.kind not in "fiu" and not bfloat16:
        raise ValueError(f"{name} scores must be numeric, got dtype {array.dtype}")
    if validate and (array.dtype.kind == "f" or bfloat16):
        i = _first_nonfinite(array, backend)
        if i is not None:
            row, col = np.unravel_index(i, array.shape)
            raise ValueError(
                f"{name} must hold finite scores; found {array[row, col].item()!r} at "
                f"row {row}, column {col}"
            )
    return array


ALL_ZERO_WEIGHT = "sample_weight must hold at least one non-zero weight; all {n} are 0"

# Integer weights are counted exactly in 64-bit integers while no sum can
# reach 2**63 (max|w| * N below it); beyond, in float64, as scikit-learn counts
# every weight. Never wrapped.
EXACT_INTEGER_LIMIT = 1 << 63


def integer_weight_limit(dtype) -> int:
    """The largest |w| an integer (or bool) weight of ``dtype`` can hold."""
    if np.dtype(dtype).kind == "b":
        return 1
    info = np.iinfo(dtype)
    return max(int(info.max), -int(info.min))


def integer_weights_fit(weight, limit: int, held: int = 0) -> bool:
    """Whether integer weights (each at most ``limit`` in magnitude, as their
    dtype holds) added to counts already holding ``held`` keep every sum below
    2**63: ``held + max|w| * N < 2**63``. The dtype's range proves it for most
    inputs (int32 weights below 2**32 samples); otherwise max|w| is reduced
    where the weights live (one number read back, a sync on a GPU)."""
    n = int(weight.shape[0])
    if held + limit * n < EXACT_INTEGER_LIMIT:
        return True
    largest = max(int(weight.max()), -int(weight.min())) if n else 0
    return held + largest * n < EXACT_INTEGER_LIMIT


def _exact_or_float_weights(weight, backend):
    """Integer ``weight`` as it is when its sums cannot pass 2**63, else float64;
    float weights as float32 or float64 (float16 and long double are summed in
    float64, as scikit-learn does)."""
    if weight.dtype.kind == "f" and weight.dtype not in (np.float32, np.float64):
        return weight.astype(np.float64)
    if weight.dtype.kind not in "iu":
        return weight
    if integer_weights_fit(weight, integer_weight_limit(weight.dtype)):
        return weight
    return weight.astype(np.float64)


def check_sample_weight(sample_weight, n_samples: int, backend, validate: bool,
                        allow_all_zero: bool = True, labels=None, ignore_index=None,
                        name: str = "sample_weight", true_name: str = "y_true"):
    """``(N,)`` finite, non-negative weights on ``backend``.

    With ``validate`` and not ``allow_all_zero`` (the scikit-learn-compatible
    functions), weights that are all 0 on the counted samples (``labels`` not
    ``ignore_index``) are rejected, as scikit-learn 1.9 rejects them: a rate
    over no weight is undefined. Streaming states and CatBoost's metrics allow
    them (a batch of zero weight adds nothing). ``name`` is the caller's name
    of the weights (CatBoost's ``weight``), for the messages."""
    if sample_weight is None:
        return None
    weight = _to_backend(sample_weight, backend)
    if weight.ndim != 1:
        raise ValueError(
            f"{name} must be 1-D, got shape {tuple(weight.shape)}"
        )
    if weight.shape[0] != n_samples:
        raise ValueError(
            f"{name} has {weight.shape[0]} entries but {true_name} has {n_samples} samples"
        )
    if weight.dtype.kind not in "fiub":
        raise ValueError(f"{name} must be numeric, got dtype {weight.dtype}")
    if validate and weight.dtype.kind == "f":
        i = _first_nonfinite(weight, backend)
        if i is not None:
            raise ValueError(
                f"{name} must be finite; found {weight[i].item()!r} at index {i}"
            )
    if validate and weight.dtype.kind in "if":
        i = _first_true(backend.xp.less(weight, 0), backend)
        if i is not None:
            raise ValueError(
                f"{name} must be non-negative; found {weight[i].item()!r} at index {i}"
            )
    if validate and not allow_all_zero:
        counted = weight
        if ignore_index is not None and labels is not None:
            counted = weight[labels != ignore_index]
        if counted.size and not bool(counted.any()):
            raise ValueError(ALL_ZERO_WEIGHT.format(n=counted.size))
    return _exact_or_float_weights(weight, backend)


def _shape_of(values) -> tuple[int, ...]:
    """The shape of an input without converting it (a sequence: NumPy's reading)."""
    shape = getattr(values, "shape", None)
    return tuple(np.shape(values) if shape is None else shape)


def check_option(value, options, name: str):
    if value not in options:
        raise ValueError(f"{name} must be one of {options}, got {value!r}")
    return value


def check_zero_division(zero_division):
    """scikit-learn's ``zero_division``: "warn", 0, 1 or NaN."""
    if isinstance(zero_division, str):
        if zero_division == "warn":
            return zero_division
    elif isinstance(zero_division, numbers.Real) and not isinstance(zero_division, bool):
        if zero_division in (0, 1) or math.isnan(zero_division):
            return float(zero_division)
    raise ValueError(
        f"zero_division must be 'warn', 0.0, 1.0 or np.nan, got {zero_division!r}"
    )


def check_likelihood_replacement(replace_undefined_by) -> dict[str, float] | None:
    """scikit-learn's ``replace_undefined_by`` of ``class_likelihood_ratios``:
    NaN (None returned: leave NaN), 1.0 (both ratios 1), or a dict
    ``{"LR+": v1, "LR-": v2}`` with ``1 <= v1`` (or NaN) and ``0 <= v2 <= 1`` (or NaN)."""
    if isinstance(replace_undefined_by, numbers.Real) and not isinstance(replace_undefined_by, bool):
        if math.isnan(replace_undefined_by):
            return None
        if replace_undefined_by == 1.0:
            return {"LR+": 1.0, "LR-": 1.0}
    elif isinstance(replace_undefined_by, dict):
        positive = replace_undefined_by.get("LR+")
        negative = replace_undefined_by.get("LR-")
        if (isinstance(positive, numbers.Real) and not isinstance(positive, bool)
                and isinstance(negative, numbers.Real) and not isinstance(negative, bool)
                and not float(positive) < 1.0
                and not (float(negative) < 0.0 or float(negative) > 1.0)):
            return {"LR+": float(positive), "LR-": float(negative)}
        raise ValueError(
            "The dictionary passed as `replace_undefined_by` needs to be in the form "
            "`{'LR+': `value_1`, 'LR-': `value_2`}` where the value for `LR+` ranges "
            "from `1.0` to `np.inf` or is `np.nan` and the value for `LR-` ranges from "
            f"`0.0` to `1.0` or is `np.nan`; got `{replace_undefined_by}`."
        )
    raise ValueError("replace_undefined_by must be np.nan, 1.0 or a dict {'LR+': value_1, "
                     f"'LR-': value_2}}, got {replace_undefined_by!r}")


def check_beta(beta, name: str = "beta") -> float:
    if type(beta) is float and beta >= 0.0:  # the common case, without the checks' calls
        return beta
    if (
        not isinstance(beta, numbers.Real)
        or isinstance(beta, bool)
        or math.isnan(beta)
        or beta < 0
    ):
        raise ValueError(f"{name} must be a non-negative number, got {beta!r}")
    return float(beta)


def check_class_weight(class_weight, num_classes: int):
    if class_weight is None:
        return None
    try:
        array = np.asarray(class_weight, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            f"class_weight must be one non-negative number per class, got {class_weight!r}"
        ) from None
    if array.shape != (num_classes,):
        raise ValueError(
            f"class_weight must have one entry per class ({num_classes}), "
            f"got shape {array.shape}"
        )
    bad = ~np.isfinite(array) | (array < 0)
    if bad.any():
        i = _first_index(bad)
        raise ValueError(
            f"class_weight must be finite and non-negative; found {array[i].item()!r} at index {i}"
        )
    return array


def check_confusion_matrix(matrix, name: str = "confusion_matrix"):
    array = np.asarray(matrix)
    if array.ndim != 2 or array.shape[0] != array.shape[1] or array.shape[0] == 0:
        raise ValueError(f"{name} must be a square K x K matrix, got shape {array.shape}")
    if array.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be numeric, got dtype {array.dtype}")
    bad = ~np.isfinite(array) | (array < 0)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise ValueError(
            f"{name} must hold finite non-negative counts; found {array[row, col].item()!r} "
            f"at row {row}, column {col}"
        )
    return array


def _check_finite_scores(scores, backend, name: str) -> None:
    """A ValueError naming ``name`` and the first NaN or infinity in
    ``scores`` (one flag read back, and its position when there is one)."""
    i = _first_nonfinite(scores, backend)
    if i is not None:
        raise ValueError(f"{name} must hold finite scores; found "
                         f"{scores.reshape(-1)[i].item()!r} at {_position(i, scores.shape)}")


def _position(flat_index: int, shape) -> str:
    """Where a flat index lies: "index i" in 1-D (or ``shape`` None), "row r,
    column c" in 2-D, "position (i, j, ...)" beyond."""
    if shape is None or len(shape) == 1:
        return f"index {flat_index}"
    position = tuple(int(i) for i in np.unravel_index(flat_index, tuple(shape)))
    if len(position) == 2:
        return f"row {position[0]}, column {position[1]}"
    return f"position {position}"


# -- arguments of the score metrics and of the streaming state ------------------

# Calibration bins live in shared memory (3 doubles each) on the GPU.
MAX_BINS = 1024


def check_bool(value, name: str) -> bool:
    if value is True or value is False:
        return value
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_k(k) -> int:
    """``k`` of :func:`top_k_accuracy_score`: one positive integer."""
    if not _is_int(k) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    return int(k)


def check_top_k(top_k, *, allow_empty: bool = False) -> tuple:
    """``top_k``: a positive integer or a sequence of them (at most
    :data:`~metrics_gpu.backends.kernel_sources.SCORE_MAX_TOP_K`, the kernels' limit); empty (or
    None) only with ``allow_empty``."""
    values: tuple | None
    if type(top_k) is tuple and 0 < len(top_k) <= SCORE_MAX_TOP_K:
        for k in top_k:  # the common case, checked without the general path's calls
            if type(k) is not int or k < 1:
                break
        else:
            return top_k
    if _is_int(top_k):
        values = (top_k,)
    elif top_k is None and allow_empty:
        values = ()
    elif isinstance(top_k, Iterable) and not isinstance(top_k, (str, bytes)):
        values = tuple(top_k)
    else:
        values = None
    if values is None or (not values and not allow_empty) or any(
            not _is_int(k) or k < 1 for k in values):
        raise ValueError(
            f"top_k must be a positive integer or a sequence of them, got {top_k!r}"
        )
    if len(values) > SCORE_MAX_TOP_K:
        raise ValueError(f"top_k takes at most {SCORE_MAX_TOP_K} values, got {len(values)}")
    return tuple(int(k) for k in values)


def check_bins(n_bins) -> int:
    if type(n_bins) is int and 1 <= n_bins <= MAX_BINS:
        return n_bins
    if not _is_int(n_bins) or not 1 <= n_bins <= MAX_BINS:
        raise ValueError(f"n_bins must be an integer in 1..{MAX_BINS}, got {n_bins!r}")
    return int(n_bins)


def check_int_range(value, name: str, low: int, high: int, *, allow_none: bool = False):
    """An integer in ``low..high`` (None gives 0 with ``allow_none``)."""
    if value is None and allow_none:
        return 0
    if not _is_int(value) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in {low}..{high}"
                         f"{' or None' if allow_none else ''}, got {value!r}")
    return int(value)


CONFUSION_MATRIX_OPTIONS = ("auto", True, False)


def check_confusion_matrix_option(value) -> ConfusionMatrixOption:
    """``confusion_matrix`` of the reports and the streaming state: "auto"
    (the K x K matrix while it is the dense state, K <= 2048), True or False."""
    if value is None or value not in CONFUSION_MATRIX_OPTIONS or isinstance(value, (int, float)) \
            and not isinstance(value, bool):
        raise ValueError(f"confusion_matrix must be one of {CONFUSION_MATRIX_OPTIONS}, got "
                         f"{value!r}")
    return value
