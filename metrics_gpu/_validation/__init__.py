"""The one place that checks inputs.

Every bad input gets a ``ValueError`` that names the argument, the problem and
an offending value with its position. Checks that cost a pass over the data
(ranges, finiteness, signs) are skipped with ``validate=False``; the backends
then guard instead: an out-of-range label is counted as invalid, never used as
an index. Validation never computes a metric.
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, get_args

import numpy as np

from metrics_gpu.backends.selection import is_device_array, resolve_backend
from metrics_gpu._formulas.labels import warn
from metrics_gpu.backends.kernel_sources import SCORE_MAX_TOP_K
from metrics_gpu._formulas.state import Bfloat16Bits, bfloat16_dtype
from metrics_gpu._common.types import (
    Average,
    ConfusionMatrixOption,
    KappaWeights,
    MultiClass,
    Normalize,
    RankingAverage,
)
from metrics_gpu.backends.counting import record

AVERAGE_OPTIONS = (None, *get_args(Average))
NORMALIZE_OPTIONS = (None, *get_args(Normalize))
KAPPA_WEIGHTS = (None, *get_args(KappaWeights))

# K inferred from the data beyond this (2**28: 2 GiB per per-class int64
# array) means sparse ids rather than class codes; an explicit num_classes is
# taken as asked, within MAX_STATE_BYTES.
MAX_INFERRED_CLASSES = 1 << 28
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


@dataclass(frozen=True)
class LabelInputs:
    """Checked label inputs, ready for a backend pass."""

    y_true: Any
    y_pred: Any
    sample_weight: Any
    num_classes: int
    num_classes_given: bool
    ignore_index: int | None
    guard: bool
    backend: Any
    source: Any = None  # the caller's y_true: results go back to its framework and device
    deterministic: bool = False


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


def _float_label_hint(value: float, name: str, targets: bool) -> str:
    """Why a float is no class code, and what to pass instead (``targets``: the
    argument holds the true classes, whatever the function calls it)."""
    if not math.isfinite(value):
        return ""
    if float(value).is_integer():  # beyond 2**62: an id, not a code
        return " (map arbitrary labels, such as sparse ids, with metrics_gpu.encode_labels)"
    if targets:
        return (f", which looks like a score or probability, not a class code: {name} takes "
                "the true classes (as integer codes 0..K-1); scores go in the scores argument")
    return (f", which looks like a score or probability, not a class code: pass (N, K) "
            f"scores as {name} (their argmax is taken), or class codes such as "
            "scores.argmax(axis=1) (or scores > threshold for binary scores)")


def _negative_label_hint(value: int, targets: bool, true_name: str = "y_true") -> str:
    """Negative targets are usually padding, which ``ignore_index`` leaves out."""
    if targets:
        return (f"; to leave out the samples with this target (padding, such as -100), pass "
                f"ignore_index={value}, or map arbitrary labels with metrics_gpu.encode_labels")
    return (f"; ignore_index leaves out samples by their {true_name} only, so predictions "
            "must be class codes (map arbitrary labels with metrics_gpu.encode_labels)")


def _as_label_array(values, name: str, backend, validate: bool, targets: bool = False):
    """1-D integer (or bool) label codes; (N, 1) columns are flattened.
    ``targets``: the argument holds the true classes (its messages say so)."""
    array = _to_backend(values, backend)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array.reshape(-1)
    if array.ndim != 1:
        raise ValueError(
            f"{name} must be a 1-D array of class codes, got shape {tuple(array.shape)}"
        )
    kind = array.dtype.kind
    if kind in "iub":
        return array
    if kind == "f":
        xp = backend.xp
        # Beyond 2**62 a float is no class code (and would not fit int64).
        representable = xp.isfinite(array) & (xp.abs(array) < 2.0**62)
        if validate:
            i = _first_true(~representable | (array != xp.round(array)), backend)
            if i is not None:
                value = array[i].item()
                raise ValueError(
                    f"{name} must hold integer class codes; found {value!r} at index {i}"
                    f"{_float_label_hint(value, name, targets)}"
                )
            return array.astype(np.int64)
        # Unchecked: what cannot be a code becomes -1, which the guard counts as invalid.
        return xp.where(representable, array, -1).astype(np.int64)
    raise ValueError(
        f"{name} must hold integer class codes 0..K-1, got dtype {array.dtype}; "
        "map arbitrary labels (strings, sparse ids) with metrics_gpu.encode_labels"
    )


@dataclass(frozen=True)
class GroupCodes:
    """Checked ``groups=``: a code 0..G-1 per sample, on the labels' backend."""

    codes: Any
    num_groups: int
    names: list


def check_groups(groups, n: int, backend, num_groups=None, codes_only: bool = False
                 ) -> GroupCodes:
    """``groups`` (one group per sample) as codes 0..G-1 on ``backend``.

    Integer codes are kept as they are, so that a group keeps its id when the
    data lack it: G is ``num_groups`` (every code must be below it) or the
    largest code + 1. Other values (strings, categories; host arrays) are
    encoded in sorted order, named by their values. Several columns (a list
    or tuple of 1-D arrays, or an (N, C) host array) form their intersection:
    one group per combination present, named by a tuple. ``codes_only``:
    integer codes alone (a stream, whose batches must agree on the ids).
    """
    num_groups = check_num_classes(num_groups, "num_groups")
    columns = None
    if isinstance(groups, (list, tuple)) and groups and not np.isscalar(groups[0]):
        columns = [to_numpy(column) for column in groups]   # several columns
    elif getattr(groups, "ndim", 1) == 2 and groups.shape[1] > 1:
        host = to_numpy(groups)
        columns = [host[:, j] for j in range(host.shape[1])]
    codes_message = ("groups must hold integer codes 0..num_groups-1 in a stream (each batch "
                     "must give a group the same id); map categories to codes first "
                     "(metrics_gpu.encode_labels)")
    if codes_only and columns is not None:
        raise ValueError(codes_message)
    if columns is not None:
        if num_groups is not None:
            raise ValueError("num_groups applies to integer group codes, not to several "
                             "group columns (their combinations are counted as found)")
        for j, column in enumerate(columns):
            if column.ndim != 1 or column.shape[0] != n:
                raise ValueError(f"groups column {j} must be 1-D with one group per sample "
                                 f"({n}), got shape {column.shape}")
        inverse = []
        levels = []
        for column in columns:
            values, codes = np.unique(column, return_inverse=True)
            levels.append(values)
            inverse.append(codes.reshape(-1))
        combined, codes = np.unique(np.stack(inverse, axis=1), axis=0, return_inverse=True)
        names = [tuple(level[i].item() for level, i in zip(levels, row)) for row in combined]
        return GroupCodes(backend.asarray(codes.reshape(-1).astype(np.int64)), len(names), names)
    array = _to_backend(groups, backend)
    if codes_only and array.dtype.kind not in "iu":
        raise ValueError(codes_message)
    if getattr(array, "ndim", 1) == 2 and array.shape[1] == 1:
        array = array.reshape(-1)
    if getattr(array, "ndim", 1) != 1 or array.shape[0] != n:
        raise ValueError(f"groups must hold one group per sample: a 1-D array of length {n}, "
                         f"got shape {tuple(getattr(array, 'shape', ()))}")
    kind = array.dtype.kind
    if kind in "iu":
        codes = array
        if n and int(codes.min()) < 0:
            i = _first_true(codes < 0, backend)
            raise ValueError(f"groups must hold codes 0..G-1; found {codes[i].item()} at "
                             f"sample {i}")
        largest = int(codes.max()) if n else -1
        if num_groups is not None and largest >= num_groups:
            i = _first_true(codes >= num_groups, backend)
            raise ValueError(f"groups must hold codes below num_groups={num_groups}; found "
                             f"{largest} (first out of range at sample {i})")
        size = num_groups if num_groups is not None else largest + 1
        return GroupCodes(codes.astype(np.int64), size, list(range(size)))
    if kind == "f" or kind == "b":
        raise ValueError(f"groups must hold integer codes or categories (strings), got dtype "
                         f"{array.dtype}")
    if num_groups is not None:
        raise ValueError("num_groups applies to integer group codes; categories are "
                         "counted as found")
    values, codes = np.unique(to_numpy(array), return_inverse=True)
    return GroupCodes(backend.asarray(codes.reshape(-1).astype(np.int64)), int(values.size),
                      [v.item() if hasattr(v, "item") else v for v in values])


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


def _label_range(labels, name: str, backend, num_classes, ignore_index, *,
                 targets: bool = False, true_name: str = "y_true", shape=None) -> int:
    """Check ``labels`` against ``[0, num_classes)``; return max + 1 (0 if none counted).

    ``targets``: ``labels`` are the true classes, whose ``ignore_index``
    samples are not counted (``true_name``: what the caller calls them).
    ``shape``: the caller's shape of ``labels`` where they were flattened
    (label maps), so that a message names the position in it.

    Reduced where the labels live: a few numbers are read back, never the labels.
    """
    if labels.dtype.kind == "b":
        if labels.size == 0:
            return 0
        any_true = bool(labels.any())
        if num_classes == 1 and any_true:
            i = _first_true(labels, backend)
            raise ValueError(
                f"{name} contains True (class 1) at index {i}, outside 0..0 (num_classes=1)"
            )
        return int(any_true) + 1
    counted = labels
    if ignore_index is not None and targets:
        counted = labels[backend.xp.not_equal(labels, ignore_index)]
    if counted.size == 0:
        return 0
    low, high = int(counted.min()), int(counted.max())
    if low >= 0 and (num_classes is None or high < num_classes):
        return high + 1
    counts_ignored = ignore_index is not None and targets
    if low < 0:
        bad = labels < 0
        if counts_ignored:
            bad &= labels != ignore_index
        i = _first_true(bad, backend)
        assert i is not None, "the minimum is a negative label"
        value = labels[i].item()
        raise ValueError(
            f"{name} contains the negative label {value!r} at {_position(i, shape)}; labels "
            f"must be class codes 0..K-1{_negative_label_hint(value, targets, true_name)}"
        )
    if num_classes is not None and high >= num_classes:
        bad = labels >= num_classes
        if counts_ignored:
            bad &= labels != ignore_index
        i = _first_true(bad, backend)
        assert i is not None, "the maximum is outside the classes"
        raise ValueError(
            f"{name} contains the label {labels[i].item()!r} at {_position(i, shape)}, outside "
            f"0..{num_classes - 1} (num_classes={num_classes})"
        )
    return int(high) + 1


def _largest_label(labels, backend, ignore_index) -> int:
    """The largest counted label, reduced where the labels live (one number read back)."""
    if ignore_index is not None:
        labels = labels[labels != ignore_index]
    return int(labels.max()) if labels.size else -1



def _map_shape(shape: tuple[int, ...], flattened) -> tuple[int, ...] | None:
    """The caller's shape of targets that :func:`flatten_positions` flattened
    (label maps, or the targets of channel-first scores), for messages that
    name a position in it; None for targets that were 1-D (or (N, 1))."""
    if len(shape) > 1 and flattened.ndim == 1 and math.prod(shape[1:]) > 1:
        return shape
    return None


def flatten_positions(y_true, y_pred, backend, pred_name: str = "y_pred",
                      true_name: str = "y_true"):
    """Channel-first batches as one sample per position (torchmetrics'
    ``multidim_average="global"``): ``(N, K, d1, ...)`` scores with
    ``(N, d1, ...)`` targets become ``(N * d1 * ..., K)`` and ``(N * d1 * ...,)``;
    ``(N, d1, ...)`` label maps with targets of the same shape are flattened.
    Other inputs are returned on the backend as they are (their own checks
    name what is wrong with them)."""
    true = _to_backend(y_true, backend)
    pred = _scores_to_backend(y_pred, backend)
    if pred.ndim >= 3 and true.ndim == pred.ndim - 1:
        expected = (pred.shape[0], *pred.shape[2:])
        if tuple(true.shape) != expected:
            raise ValueError(
                f"{pred_name} of shape {tuple(pred.shape)} holds (N, K, d1, ...) scores, so "
                f"{true_name} must have shape {expected} (one target per position), got "
                f"{tuple(true.shape)}"
            )
        classes = pred.shape[1]
        pred = pred.transpose(0, *range(2, pred.ndim), 1).reshape(-1, classes)
        true = true.reshape(-1)
    elif (pred.ndim >= 2 and true.ndim == pred.ndim and pred.dtype.kind in "iub"
          and tuple(true.shape) == tuple(pred.shape) and pred.shape[-1] != 1):
        true, pred = true.reshape(-1), pred.reshape(-1)
    return true, pred


# -- multilabel indicators ---------------------------------------------------------

MULTILABEL = "multilabel-indicator"


def cell_ignore_value(ignore_index: int | None, dtype) -> int | None:
    """``ignore_index`` as a cell of a target of ``dtype`` can hold it, or
    None where none can (bool, or an integer type without that value): then
    no cell is ignored."""
    if ignore_index is None or dtype.kind == "b":
        return None
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if not info.min <= ignore_index <= info.max:
            return None
    return ignore_index


def scores_above(scores, cut: float):
    """``scores > cut`` compared by value, as kernels/multilabel.cu compares
    (each score widened exactly to float64, against the float64 ``cut``):
    the one threshold rule of every backend. Never with ``cut`` rounded to
    the scores' type (NumPy's reading of a Python float beside float32 or
    float16 scores), which can move a score equal to the rounded threshold
    to the other side. Float scores are compared in their own type with
    ``cut`` rounded down to the largest value of that type not above it (x >
    cut exactly when x > that value): no float64 copy of the scores; any
    other type in float64."""
    dtype = scores.dtype
    if dtype.kind == "f" and dtype in (np.float16, np.float32, np.float64):
        with np.errstate(over="ignore"):  # a cut beyond the type's range: its infinity
            below = np.asarray(cut, dtype=dtype)
        if float(below) > cut:
            below = np.nextafter(below, np.asarray(-np.inf, dtype=dtype))
        return scores > dtype.type(below)
    return scores.astype(np.float64) > cut


@dataclass(frozen=True)
class MultilabelInputs:
    """Checked ``(N, L)`` indicator matrices (0/1 of any dtype, on the
    backend, as given: a kernel reads them so) and their weights; ``y_pred``
    may instead hold scores of the declared kind (``mode``), a label
    predicted where its score exceeds ``cut`` (:func:`scores_above`).
    ``ignore_index``: the value of the ``y_true`` cells that are left out,
    as ``y_true``'s dtype holds it (None: no cell is)."""

    y_true: Any
    y_pred: Any
    sample_weight: Any
    backend: Any
    source: Any = None  # the caller's y_true: results go back to its framework and device
    mode: str = "labels"  # or "probabilities", "logits" (the scores= of the call)
    cut: float = 0.5  # a score above it predicts the label (score_cut)
    ignore_index: int | None = None

    @property
    def num_labels(self) -> int:
        return int(self.y_true.shape[1])

    def counted(self):
        """The cells that count, a bool matrix (those of ``y_true`` other than
        ``ignore_index``), or None when every cell does."""
        return None if self.ignore_index is None else self.y_true != self.ignore_index

    def masks(self):
        """``(y_true, y_pred)`` as bool matrices (a copy of each non-bool one;
        scores cut at ``cut``), False in both at the ignored cells."""
        true = self.y_true if self.y_true.dtype.kind == "b" else self.y_true == 1
        if self.mode != "labels":
            pred = scores_above(self.y_pred, self.cut)
        else:
            pred = self.y_pred if self.y_pred.dtype.kind == "b" else self.y_pred != 0
        counted = self.counted()
        return true, pred if counted is None else pred & counted


MULTILABEL_SCORE_KINDS = ("probabilities", "logits")


def score_cut(threshold: float, scores: str) -> float:
    """The value a score must exceed to predict its label: the threshold
    itself for probabilities, ``log(t / (1 - t))`` (in float64) for logits
    (sigmoid(x) > t), without a sigmoid per cell. Scores are compared with
    it by value (:func:`scores_above`; the kernels widen every score to
    float64)."""
    if scores == "probabilities":
        return threshold
    if threshold <= 0.0:
        return -math.inf
    if threshold >= 1.0:
        return math.inf
    return math.log(threshold / (1.0 - threshold))


def check_score_kind(scores, threshold, *, allow_none: bool = False) -> tuple[str, float] | None:
    """``(scores, threshold)`` checked: one of MULTILABEL_SCORE_KINDS and a finite number
    (None for ``scores=None`` where ``allow_none``)."""
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or \
            not math.isfinite(threshold):
        raise ValueError(f"threshold must be a finite number, got {threshold!r}")
    if scores is None and allow_none:
        return None
    if scores not in MULTILABEL_SCORE_KINDS:
        raise ValueError(f"scores must be one of {MULTILABEL_SCORE_KINDS}"
                         f"{' or None' if allow_none else ''}, got {scores!r}")
    return scores, float(threshold)


def _shape_of(values) -> tuple[int, ...]:
    """The shape of an input without converting it (a sequence: NumPy's reading)."""
    shape = getattr(values, "shape", None)
    return tuple(np.shape(values) if shape is None else shape)


def _indicator_cells(rows, xp, ignore=None):
    """Which cells hold 0 or 1 (or ``ignore``, a :func:`cell_ignore_value`)."""
    cells = xp.equal(rows, 0) | xp.equal(rows, 1)
    return cells if ignore is None else cells | xp.equal(rows, ignore)


def _is_indicator(array, xp, ignore=None) -> bool:
    """scikit-learn's ``type_of_target(...) == "multilabel-indicator"`` of an
    array on its backend: 2-D, more than one column, values 0 and 1 only
    (and ``ignore``, a :func:`cell_ignore_value`, the cells of a target left
    out). Bool reads nothing; integers and floats cost one flag read back
    (whether every value is 0 or 1) per :data:`CHECK_CHUNK_ELEMENTS` (bounded
    memory for memory-mapped label maps, which usually answer at the first
    chunk)."""
    if array.ndim != 2 or array.shape[1] < 2 or array.shape[0] == 0:
        return False
    kind = array.dtype.kind
    if kind == "b":
        return True
    if kind not in "iuf":
        return False
    return all(bool(_indicator_cells(rows, xp, ignore).all())
               for _, rows in _row_chunks(array, chunked=True))


def _first_stray_target(true, ignore_index, backend) -> tuple[int, Any]:
    """``(flat index, value)`` of the first cell of ``true`` holding neither
    0, 1 nor ``ignore_index`` (one such cell exists)."""
    ignore = cell_ignore_value(ignore_index, true.dtype)
    i = _first_true(~_indicator_cells(true, backend.xp, ignore), backend)
    assert i is not None, "a target with a stray value was asked for it"
    return i, true.reshape(-1)[i].item()


def _ignore_hint(value, ignore_index, takes_ignore_index: bool = True) -> str:
    """What to do with a stray target ``value`` (:func:`_first_stray_target`)
    (``takes_ignore_index``: whether the caller takes it)."""
    if takes_ignore_index and ignore_index is None and float(value).is_integer():
        return (f"to leave out the cells holding {value!r} (padding), pass "
                f"ignore_index={int(value)}")
    return "map the other values to 0 or 1 (or to ignore_index) first"


def _stray_targets(true, ignore_index, backend, names: tuple[str, str],
                   refusing: tuple[str, str] | None, takes_ignore_index: bool = True) -> str:
    """The message of a ``y_true`` holding a value other than 0, 1 (and
    ``ignore_index``) beside a 0/1 ``y_pred`` of its shape: multilabel
    input with cells it cannot read, refused rather than read as label maps
    of a two-class problem. ``refusing``: ``(function, what to use)`` of a
    function that takes no multilabel input; else the advice is
    :func:`_ignore_hint`'s (``takes_ignore_index``: whether to suggest it)."""
    i, value = _first_stray_target(true, ignore_index, backend)
    allowed = "0 and 1" if ignore_index in (None, 0, 1) else \
        f"0, 1 and ignore_index={ignore_index} (a cell left out)"
    stray = f"{names[0]} holds {value!r} at {_position(i, true.shape)}"
    flatten = (". Label maps (one class code per position) are read as such once flattened: "
               f"pass {names[0]}.reshape(-1) and {names[1]}.reshape(-1)")
    if refusing is not None:
        function, instead = refusing
        return (f"{function} does not support {MULTILABEL} input: {names[1]} of shape "
                f"{tuple(true.shape)} holds only 0 and 1 (one column per label) and {stray}, "
                f"which a {MULTILABEL} {names[0]} does not hold (it holds {allowed}); "
                f"{instead}{flatten}")
    return (f"{names[1]} of shape {tuple(true.shape)} holds only 0 and 1, a {MULTILABEL} "
            f"matrix (one column per label), but {stray}: a {MULTILABEL} {names[0]} holds "
            f"{allowed}; {_ignore_hint(value, ignore_index, takes_ignore_index)}{flatten}")


def multilabel_pair(y_true, y_pred, backend, names: tuple[str, str] = ("y_true", "y_pred"), *,
                    num_classes=None, validate: bool = True, ignore_index=None,
                    refusing: tuple[str, str] | None = None, takes_ignore_index: bool = True):
    """``(y_true, y_pred)`` on ``backend`` when both are ``(N, L)`` indicator
    matrices of one shape (scikit-learn's "multilabel-indicator"; ``y_true``
    may also hold ``ignore_index``, the cells left out), else None.

    Costs nothing unless ``y_true`` is 2-D with more than one column (then one
    value read per non-bool input: :func:`_is_indicator`). Same-shape pairs
    with other values stay label maps (one class code per position), and
    ``(N, K, d1, ...)`` scores stay channel-first scores; a ``y_true``
    indicator beside a ``y_pred`` of another shape (or of scores) is an error
    naming both shapes, never a silent multiclass reading. So is a 0/1
    ``y_pred`` beside a ``y_true`` of its shape holding other values than
    0, 1 and ``ignore_index`` (padding, say): it would be a two-class label
    map, as scikit-learn refuses it (``refusing``: ``(function, what to
    use)`` of a caller that takes no multilabel input; else the advice is to
    pass ``ignore_index``, where the caller ``takes_ignore_index``).

    With ``validate=False`` and a ``num_classes`` other than L, a non-bool
    pair is taken for label maps of that many classes without reading it
    (validate=False reads nothing back where K is known).
    """
    true_shape = _shape_of(y_true)
    if len(true_shape) != 2 or true_shape[1] < 2:
        return None
    true = _to_backend(y_true, backend)
    if (not validate and num_classes is not None and num_classes != true_shape[1]
            and true.dtype.kind != "b"):
        return None
    pred_shape = _shape_of(y_pred)
    if len(pred_shape) > 2:
        return None  # channel-first scores with (N, d1) targets
    if not _is_indicator(true, backend.xp, cell_ignore_value(ignore_index, true.dtype)):
        if pred_shape == tuple(true.shape) and true.dtype.kind in "iuf":
            pred = _to_backend(y_pred, backend)
            if _is_indicator(pred, backend.xp):
                raise ValueError(_stray_targets(true, ignore_index, backend, names, refusing,
                                                takes_ignore_index))
        return None
    pred = _to_backend(y_pred, backend)
    same_shape = tuple(pred.shape) == tuple(true.shape)
    if same_shape and _is_indicator(pred, backend.xp):
        return true, pred
    if same_shape and pred.dtype.kind in "iub":
        return None  # a label map with class codes beyond 1
    raise ValueError(
        f"{names[0]} of shape {tuple(true.shape)} is a {MULTILABEL} matrix (0/1 per "
        f"label), so {names[1]} must be one too, of the same shape; got {names[1]} of "
        f"shape {tuple(pred.shape)}"
        + (" with values other than 0 and 1 (for scores, declare them: "
           "scores='probabilities' or 'logits', with threshold=)" if same_shape else "")
    )


def check_multilabel_inputs(y_true, y_pred, *, sample_weight=None, num_classes=None,
                            ignore_index=None, validate=True,
                            names: tuple[str, str] = ("y_true", "y_pred"),
                            scores: tuple[str, float] | None = None,
                            takes_ignore_index: bool = True) -> MultilabelInputs | None:
    """:class:`MultilabelInputs` when ``y_true`` and ``y_pred`` are one
    "multilabel-indicator" pair (:func:`multilabel_pair`), else None.

    ``num_classes``, if given, must be L. ``ignore_index`` (not 0 or 1) is
    the value of the ``y_true`` cells left out one by one, as
    :class:`~metrics_gpu.MultilabelMetrics` leaves them out. ``scores``
    (:func:`check_score_kind`'s): ``y_pred`` holds (N, L) scores of that
    kind, cut at the threshold; then ``y_true`` must be an indicator matrix
    (an error otherwise), and with ``validate`` the scores are checked
    (finite; probabilities in [0, 1]). ``takes_ignore_index``: whether the
    caller takes ``ignore_index`` (a message may then suggest it).
    """
    if not is_label_indicator(y_true):
        if scores is not None:
            raise ValueError(
                f"scores={scores[0]!r} declares (N, L) multilabel scores in {names[1]}, so "
                f"{names[0]} must be an (N, L) indicator matrix (0/1 per label); got shape "
                f"{_shape_of(y_true)}. (N, K) class scores of single-label input go in "
                f"{names[1]} without scores=")
        return None
    if not isinstance(validate, bool):
        raise ValueError(f"validate must be True or False, got {validate!r}")
    backend = resolve_backend(y_true, y_pred, sample_weight)
    num_classes = check_num_classes(num_classes)
    ignore_index = check_ignore_index(ignore_index)
    if scores is not None:
        true, pred = _scores_pair(y_true, y_pred, backend, names, scores[0], validate,
                                  ignore_index, takes_ignore_index)
    else:
        pair = multilabel_pair(y_true, y_pred, backend, names, num_classes=num_classes,
                               validate=validate, ignore_index=ignore_index,
                               takes_ignore_index=takes_ignore_index)
        if pair is None:
            return None
        true, pred = pair
    n, labels = true.shape
    if num_classes is not None and num_classes != labels:
        raise ValueError(
            f"{names[0]} is a {MULTILABEL} matrix with {labels} labels (columns) but "
            f"num_classes={num_classes}"
        )
    if ignore_index in (0, 1):
        raise ValueError(
            f"ignore_index={ignore_index} is a target value of {MULTILABEL} input: "
            f"ignore_index leaves out the cells of {names[0]} holding another value "
            "(padding, such as -100), one by one")
    weight = check_sample_weight(sample_weight, n, backend, validate, allow_all_zero=False,
                                 true_name=names[0])
    ignore = cell_ignore_value(ignore_index, true.dtype)
    if scores is None:
        return MultilabelInputs(y_true=true, y_pred=pred, sample_weight=weight,
                                backend=backend, source=y_true, ignore_index=ignore)
    kind, threshold = scores
    return MultilabelInputs(y_true=true, y_pred=pred, sample_weight=weight, backend=backend,
                            source=y_true, mode=kind, cut=score_cut(threshold, kind),
                            ignore_index=ignore)


def _scores_pair(y_true, y_pred, backend, names, kind: str, validate: bool,
                 ignore_index: int | None = None, takes_ignore_index: bool = True):
    """``(y_true, y_pred)`` on ``backend``: an indicator matrix (0/1, or
    ``ignore_index``) beside (N, L) scores of the declared ``kind`` (finite;
    probabilities in [0, 1])."""
    true = _to_backend(y_true, backend)
    if not _is_indicator(true, backend.xp, cell_ignore_value(ignore_index, true.dtype)):
        where = ""
        if true.ndim == 2 and true.shape[1] > 1 and true.dtype.kind in "iuf" and true.size:
            first, value = _first_stray_target(true, ignore_index, backend)
            where = (f"; found {value!r} at {_position(first, true.shape)} "
                     f"({_ignore_hint(value, ignore_index, takes_ignore_index)})")
        raise ValueError(
            f"scores={kind!r} declares (N, L) multilabel scores in {names[1]}, so {names[0]} "
            "must be an (N, L) indicator matrix holding only 0 and 1"
            + ("" if ignore_index is None else f" (and ignore_index={ignore_index})") + where)
    pred = _to_backend(y_pred, backend)
    if tuple(pred.shape) != tuple(true.shape):
        raise ValueError(
            f"{names[1]} must be (N, L) scores of {names[0]}'s shape {tuple(true.shape)}; got "
            f"shape {tuple(pred.shape)}")
    if pred.dtype.kind not in "fiub":
        raise ValueError(f"{names[1]} must hold numeric scores, got dtype {pred.dtype}")
    if validate:
        if pred.dtype.kind == "f":
            _check_finite_scores(pred, backend, names[1])
        if kind == "probabilities":
            i = _first_true((pred < 0) | (pred > 1), backend)
            if i is not None:
                raise ValueError(
                    f"{names[1]}: scores='probabilities' declares probabilities in [0, 1]; "
                    f"found {pred.reshape(-1)[i].item()!r} at {_position(i, pred.shape)} "
                    "(scores='logits' for logits)")
    return true, pred


def refuse_multilabel(y_true, y_pred, function: str | None, instead: str,
                      names: tuple[str, str] = ("y_true", "y_pred"), *,
                      num_classes=None, validate=True, ignore_index=None) -> None:
    """A ValueError when ``y_true`` and ``y_pred`` are "multilabel-indicator"
    input, which ``function`` does not support (``instead``: what to use;
    ``num_classes``, ``validate`` and ``ignore_index`` as :func:`multilabel_pair`
    takes them: a 0/1 ``y_pred`` beside a ``y_true`` of its shape holding
    other values is refused too, never read as a two-class label map)."""
    if not is_label_indicator(y_true):
        return
    what = "this function" if function is None else function
    backend = resolve_backend(y_true, y_pred)
    ignore_index = check_ignore_index(ignore_index)
    pair = multilabel_pair(y_true, y_pred, backend, names,
                           num_classes=check_num_classes(num_classes), validate=validate,
                           ignore_index=ignore_index, refusing=(what, instead))
    if pair is None:
        return
    held = "0 and 1" if ignore_index is None else f"0, 1 and ignore_index={ignore_index}"
    raise ValueError(
        f"{what} does not support {MULTILABEL} input: {names[0]} and {names[1]} of shape "
        f"{tuple(pair[0].shape)} hold only {held} (one column per label); {instead}. "
        "Binary label maps (one class code per position) are read as such once "
        "flattened: pass y_true.reshape(-1) and y_pred.reshape(-1)"
    )


MULTILABEL_INSTEAD = (
    "use multilabel_confusion_matrix for per-label counts, or the multilabel forms of "
    "accuracy_score, hamming_loss, precision/recall/f1/fbeta/jaccard_score and "
    "classification_report"
)


def check_label_inputs(y_true, y_pred, *, num_classes=None, sample_weight=None,
                       ignore_index=None, validate=True, extra_classes=0,
                       deterministic=False, allow_all_zero_weight=True,
                       true_name: str = "y_true", pred_name: str = "y_pred",
                       weight_name: str = "sample_weight") -> LabelInputs:
    """Check ``y_true``/``y_pred`` (labels, or ``(N, K)`` scores reduced by argmax).

    ``extra_classes`` is the smallest K a caller needs regardless of the data
    (``max(labels) + 1`` for scikit-learn's ``labels=``). ``true_name``,
    ``pred_name`` and ``weight_name`` are the caller's names of ``y_true``,
    ``y_pred`` and ``sample_weight`` (cohen_kappa_score's ``y1`` and ``y2``,
    CatBoost's ``approx`` and ``weight``), for the messages.
    """
    if not isinstance(validate, bool):
        raise ValueError(f"validate must be True or False, got {validate!r}")
    if not isinstance(deterministic, bool):
        raise ValueError(f"deterministic must be True or False, got {deterministic!r}")
    backend = resolve_backend(y_true, y_pred, sample_weight)
    source = y_true
    num_classes = check_num_classes(num_classes)
    ignore_index = check_ignore_index(ignore_index)
    given = num_classes is not None

    refuse_multilabel(y_true, y_pred, None, MULTILABEL_INSTEAD, (true_name, pred_name),
                      num_classes=num_classes, validate=validate, ignore_index=ignore_index)
    true_shape = _shape_of(y_true)
    y_true, pred = flatten_positions(y_true, y_pred, backend, pred_name, true_name)
    map_shape = _map_shape(true_shape, y_true)
    y_true = _as_label_array(y_true, true_name, backend, validate, targets=True)
    if pred.ndim == 2 and pred.shape[1] > 1:
        scores = _as_scores(pred, pred_name, backend, validate)
        if num_classes is not None and num_classes != scores.shape[1]:
            raise ValueError(
                f"{pred_name} has {scores.shape[1]} score columns but num_classes={num_classes}"
            )
        num_classes = int(scores.shape[1])
        y_pred_labels = backend.argmax_scores(scores)
        scores_given = True
    else:
        y_pred_labels = _as_label_array(pred, pred_name, backend, validate)
        scores_given = False

    n = y_true.shape[0]
    if n == 0 or y_pred_labels.shape[0] == 0:
        raise ValueError(
            f"{true_name} and {pred_name} are empty; at least one sample is required")
    if y_pred_labels.shape[0] != n:
        raise ValueError(
            f"{true_name} has {n} samples but {pred_name} has {y_pred_labels.shape[0]}"
        )
    weight = check_sample_weight(sample_weight, n, backend, validate, allow_all_zero_weight,
                                 y_true, ignore_index, name=weight_name, true_name=true_name)

    if validate:
        high_true = _label_range(y_true, true_name, backend, num_classes, ignore_index,
                                 targets=True, shape=map_shape)
        high_pred = 0 if scores_given else _label_range(
            y_pred_labels, pred_name, backend, num_classes, None, true_name=true_name,
            shape=map_shape
        )
        if num_classes is None:
            num_classes = max(high_true, high_pred, extra_classes, 1)
    elif num_classes is None:
        # Unchecked: K from the largest label; negative ones are left to the
        # backend's guard, which counts them as invalid.
        high_true = _largest_label(y_true, backend, ignore_index)
        high_pred = _largest_label(y_pred_labels, backend, None)
        num_classes = max(high_true + 1, high_pred + 1, extra_classes, 1)
    if not given and num_classes > MAX_INFERRED_CLASSES:
        raise ValueError(
            f"the largest label, {num_classes - 1}, implies {num_classes:,} classes; labels "
            "that look like sparse ids should be mapped with metrics_gpu.encode_labels "
            "(or pass num_classes explicitly)"
        )
    if y_true.dtype.kind == "b" or y_pred_labels.dtype.kind == "b":
        num_classes = max(num_classes, 2) if not given else num_classes
    check_state_size(num_classes)
    return LabelInputs(
        y_true=y_true,
        y_pred=y_pred_labels,
        sample_weight=weight,
        num_classes=num_classes,
        num_classes_given=given or scores_given,
        ignore_index=ignore_index,
        guard=not validate,
        backend=backend,
        source=source,
        deterministic=deterministic,
    )



# -- (N, K) scores: the fused score pass ---------------------------------------

SCORE_KINDS = ("probabilities", "logits", "decision")


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


# With scikit-learn's labels=, targets become column positions; a row whose
# target is ignore_index becomes this position (neither a column nor the -1
# of a code not in labels), which the backends skip as their ignore_index.
IGNORED_POSITION = -2


@dataclass(frozen=True)
class ScoreInputs:
    """Checked ``(y_true, scores)``, ready for the fused score pass."""

    y_true: Any           # (N,) positions of the target among the score columns
    scores: Any           # (N, K); 1-D binary scores arrive as two columns
    sample_weight: Any
    num_classes: int
    ignore_index: int | None  # the target (with labels=, the position) of skipped rows
    guard: bool
    backend: Any
    source: Any = None    # the caller's y_true: results go back to its framework
    binary_column: bool = False  # the caller gave one column (the positive class)


def _first_outside_unit_range(values, backend) -> tuple[tuple[int, ...], float] | None:
    """The index and value of the first score outside [0, 1], or None: two
    reductions (no temporaries) per chunk of rows (:func:`_row_chunks`), a
    mask only where one fails. NaN is not found here (the finiteness checks
    name it)."""
    xp = backend.xp
    for start, rows in _row_chunks(values):
        if not (rows.size and bool(xp.less(rows.min(), 0) | xp.greater(rows.max(), 1))):
            continue
        i = _first_true(xp.less(rows, 0) | xp.greater(rows, 1), backend)
        if i is None:
            continue
        in_chunk = np.unravel_index(i, rows.shape)
        return (start + int(in_chunk[0]), *(int(v) for v in in_chunk[1:])), \
            rows[in_chunk].item()
    return None


def _check_probability_range(values, name: str, backend, takes_logits: bool,
                             logits_option: str = "from_logits=True") -> None:
    """Refuse a score outside [0, 1], naming the first. ``takes_logits``: the
    caller also reads logits, which ``logits_option`` (the caller's way to
    say so) selects; the message suggests it."""
    first = _first_outside_unit_range(values, backend)
    if first is None:
        return
    index, found = first
    hint = f"; for logits (raw scores), pass {logits_option}" if takes_logits else ""
    raise ValueError(
        f"{name} must hold probabilities in [0, 1]; found {found!r} at "
        f"{'index' if values.ndim == 1 else 'row, column'} "
        f"{index[0] if values.ndim == 1 else index}{hint}"
    )


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

# Scores read as logits warn when at least this share of their rows are rows
# of probabilities (not every row: a few rows of a half-precision softmax may
# miss any tolerance, and a few rows of a file may be damaged). Logits almost
# never have a single row in [0, 1] summing to 1.
PROBABILITY_ROWS_SHARE = 0.99


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


def _format_value(value: float) -> str:
    """A score or row sum for a message: six significant digits (1.00038,
    0.999649), not a float32's widened repr (1.0003776550292969); a value
    that these would round to 0 or 1 (1.0000001, just outside [0, 1]) as the
    shortest text of its float32 (or float64) value."""
    text = f"{value:.6g}"
    if float(text) in (0.0, 1.0) and value not in (0.0, 1.0):
        single = np.float32(value)
        text = str(single) if float(single) == value else repr(value)
    return text


def first_non_probability_row(values, backend, dtype=None) -> tuple[int, str, bool] | None:
    """The first row of ``values`` that is not a row of probabilities, what
    is wrong with it, and whether only its sum is (its values are in [0, 1]);
    None when every row is. ``(N, K)`` rows must hold values
    in [0, 1] summing to 1 within :func:`probability_sum_tolerance` of their
    type; an ``(N,)`` column (the positive class's probability) values in
    [0, 1]. Reductions per chunk of rows; a mask only where one fails.
    ``dtype``: the type the rows were given in, where ``values`` are widened
    (bfloat16 rows read as float32)."""
    first = _first_outside_unit_range(values, backend)
    outside = None
    if first is not None:
        index, found = first
        where = "" if values.ndim == 1 else f" in column {index[1]}"
        outside = index[0], f"{_format_value(found)}{where}, outside [0, 1]", False
    if values.ndim != 2:
        return outside
    xp = backend.xp
    tolerance = probability_sum_tolerance(values.dtype if dtype is None else dtype)
    # Only the rows before the first value out of range can come first.
    for start, rows in _row_chunks(values if outside is None else values[:outside[0]],
                                   chunked=True):
        sums = rows.sum(axis=1, dtype=np.float64)
        i = _first_true(xp.abs(sums - 1) > tolerance, backend)
        if i is not None:
            return start + i, (f"values in [0, 1] summing to {_format_value(sums[i].item())}, "
                               f"not 1 (within {tolerance:.2g})"), True
    return outside


def declared_probabilities_refused(where: str, problem: str, sum_only: bool, *,
                                   declared: str, logits_option: str) -> str:
    """The message for scores declared probabilities (``declared``: the
    caller's words, ``scores='probabilities'`` or ``--scores-are
    probabilities``) of which ``where`` holds ``problem``. A row that fails
    only the sum is probabilities rounded or not normalized: the fix is to
    divide each row by its sum, not to read them as logits (which gives wrong
    metrics); values outside [0, 1] are logits, which ``logits_option``
    declares."""
    if sum_only:
        return (f"{where} holds {problem}: rows of probabilities, as {declared} declares, "
                "must sum to 1; if these are probabilities (rounded, or not normalized), "
                "divide each row by its sum before passing them (read as logits they would "
                "give wrong metrics)")
    return (f"{where} holds {problem}: not probabilities, as {declared} declares (for "
            f"logits, {logits_option})")


def count_non_probability_rows(values, backend, dtype=None, limit=None, *,
                               sums: bool = True) -> int:
    """How many rows of ``values`` are not rows of probabilities (the rule of
    :func:`first_non_probability_row`; NaN rows are not); counting stops at the
    first chunk that takes the count past ``limit``. ``sums=False``: per-label
    probabilities (multilabel), every value in [0, 1] and no sum. Three row
    reductions per chunk of rows, one count read back each."""
    xp = backend.xp
    tolerance = probability_sum_tolerance(values.dtype if dtype is None else dtype)
    count = 0
    for _, rows in _row_chunks(values, chunked=True):
        if rows.ndim == 1:
            ok = xp.greater_equal(rows, 0) & xp.less_equal(rows, 1)
        else:
            ok = xp.greater_equal(rows.min(axis=1), 0) & xp.less_equal(rows.max(axis=1), 1)
            if sums:
                gap = xp.abs(xp.subtract(rows.sum(axis=1, dtype=np.float64), 1))
                ok &= xp.less_equal(gap, tolerance)
        count += int(rows.shape[0]) - int(xp.count_nonzero(ok))
        if limit is not None and count > limit:
            break
    return count


def allowed_non_probability_rows(rows: int) -> int:
    """How many of ``rows`` rows may fail and the scores still look like
    probabilities: the rows past :data:`PROBABILITY_ROWS_SHARE`."""
    return rows - math.ceil(PROBABILITY_ROWS_SHARE * rows - 1e-9)


def probability_rows(values, backend, dtype=None, *, sums: bool = True) -> int | None:
    """How many rows of scores are rows of probabilities, when at least
    :data:`PROBABILITY_ROWS_SHARE` of them (not empty) are; else None (the
    count stops early: logits fail from their first rows). ``sums``: as
    :func:`count_non_probability_rows`."""
    n = int(values.shape[0]) if values.ndim else 0
    if not values.size or not n:
        return None
    allowed = allowed_non_probability_rows(n)
    failed = count_non_probability_rows(values, backend, dtype, limit=allowed, sums=sums)
    return None if failed > allowed else n - failed


def probabilities_read_as_logits(name: str, option: str, *, rows: int | None = None,
                                 total: int | None = None, binary: bool = False,
                                 default: bool = True) -> str:
    """The warning for scores read as logits that look like probabilities,
    naming the ``option`` that declares them. ``rows`` of ``total`` rows are
    rows of probabilities (every row when not given or equal). ``binary``:
    ``(N,)`` scores of the positive class, where a logit above 0 predicts it,
    so probabilities read as logits predict it for every sample: the label
    metrics are wrong too, not only the score metrics. ``default``: logits
    are the caller's default kind (said so in the message)."""
    every = rows is None or rows == total
    read = "read as logits (the default)" if default else "read as logits"
    if binary:
        share = "every score is" if every else f"{rows:,} of {total:,} scores are"
        return (f"{name}: {share} in [0, 1], as probabilities of the positive class are, "
                f"but the scores are {read}, where a score above 0 "
                "predicts the positive class: every sample with a score above 0 is predicted "
                f"positive; pass {option} if they are probabilities, else the label metrics "
                "(accuracy, F1, every predicted label) and the score metrics are wrong")
    share = "every row is" if every else f"{rows:,} of {total:,} rows are"
    return (f"{name}: {share} in [0, 1] and {'sums' if every else 'sum'} to 1 (within "
            f"{HALF_PRECISION_SUM_TOLERANCE:.2g}), as probabilities do, but the scores are "
            f"{read}; pass {option} if they are probabilities, else "
            "the score metrics are wrong")


def label_probabilities_read_as_logits(name: str, option: str, *, rows: int | None = None,
                                       total: int | None = None) -> str:
    """The warning for multilabel scores read as logits (the default) whose
    rows (``rows`` of ``total``; every row when not given or equal) hold
    values in [0, 1] only, as per-label probabilities do; ``option`` declares
    them. Read as logits, a label is predicted where sigmoid(x) passes the
    threshold: at 0.5, every label of a probability above 0."""
    share = ("every score is" if rows is None or rows == total
             else f"the scores of {rows:,} of {total:,} rows are")
    return (f"{name}: {share} in [0, 1], as probabilities are, but the scores are read as "
            "logits (the default), a label predicted where sigmoid(score) passes the "
            f"threshold; pass {option} if they are probabilities, else the metrics (every "
            "predicted label included) are wrong")


def check_score_inputs(y_true, scores, *, name: str = "y_score", kind: str = "probabilities",
                       sample_weight=None, labels=None, ignore_index=None, validate=True,
                       binary_threshold=None, allow_all_zero_weight=True,
                       takes_logits: bool = False,
                       weight_name: str = "sample_weight") -> ScoreInputs:
    """Check targets and ``(N, K)`` scores (or ``(N,)`` scores of class 1).

    ``kind`` says what the scores are: ``"probabilities"`` (in [0, 1]; rows
    that do not sum to 1 warn, as scikit-learn), ``"logits"`` or
    ``"decision"`` values (any finite number). One column of binary scores
    becomes two: ``[1 - p, p]`` for probabilities, ``[threshold, z]`` else
    (``binary_threshold``, default 0). ``labels`` (scikit-learn's) lists the
    class codes of the columns; targets are mapped to column positions, and
    the rows whose target is ``ignore_index`` to :data:`IGNORED_POSITION`.
    ``takes_logits`` says that the caller has ``from_logits=``, which a
    probability out of [0, 1] then suggests. Scores of kind ``"logits"``
    that look like probabilities (:func:`probability_rows`) warn, with
    ``validate`` only (without it nothing is read). ``weight_name`` is the caller's
    name of ``sample_weight`` (CatBoost's ``weight``), for the messages.
    """
    if not isinstance(validate, bool):
        raise ValueError(f"validate must be True or False, got {validate!r}")
    check_option(kind, SCORE_KINDS, "kind")
    backend = resolve_backend(y_true, scores, sample_weight)
    xp = backend.xp
    ignore_index = check_ignore_index(ignore_index)
    source = y_true
    true_shape = _shape_of(y_true)
    y_true, scores = flatten_positions(y_true, scores, backend, name)
    map_shape = _map_shape(true_shape, y_true)
    targets = _as_label_array(y_true, "y_true", backend, validate, targets=True)
    values = _as_scores(scores, name, backend, validate)
    binary_column = values.ndim == 1 or (values.ndim == 2 and values.shape[1] == 1)
    if values.ndim not in (1, 2):
        raise ValueError(f"{name} must be (N,) or (N, K) scores, got shape {tuple(values.shape)}")
    n = targets.shape[0]
    if n == 0:
        raise ValueError("y_true is empty; at least one sample is required")
    if values.shape[0] != n:
        raise ValueError(f"y_true has {n} samples but {name} has {values.shape[0]} rows")
    if values.ndim == 2 and values.shape[1] == 0:
        raise ValueError(
            f"{name} has no score columns (shape {tuple(values.shape)}); scores need at least "
            "one column: (N, K) per-class scores, or the (N,) or (N, 1) scores of class 1 of "
            "a binary problem"
        )
    weight = check_sample_weight(sample_weight, n, backend, validate, allow_all_zero_weight,
                                 targets, ignore_index, name=weight_name)
    if validate and kind == "probabilities":
        _check_probability_range(values, name, backend, takes_logits)
    if validate and kind == "logits":
        # Probabilities read as logits (the default of the calls that take
        # both): a few reductions with the checks' reads; none without them.
        found = probability_rows(values.reshape(n) if binary_column else values, backend)
        if found is not None:
            import warnings

            warnings.warn(probabilities_read_as_logits(name, "from_logits=False", rows=found,
                                                       total=n, binary=binary_column,
                                                       default=False),
                          UserWarning, stacklevel=3)
    if binary_column:
        column = values.reshape(n)
        if column.dtype.kind in "iub":
            column = column.astype(np.float64)
        if kind == "probabilities":
            values = xp.stack([1 - column, column], axis=1)
        else:
            threshold = xp.full(column.shape, 0 if binary_threshold is None else binary_threshold,
                                dtype=column.dtype)
            values = xp.stack([threshold, column], axis=1)
    num_classes = int(values.shape[1])
    if validate and kind == "probabilities" and not binary_column:
        rtol = math.sqrt(score_dtype_eps(values.dtype))  # scikit-learn's tolerance
        if any(bool(xp.any(xp.greater(
                xp.abs(xp.subtract(rows.sum(axis=1, dtype=np.float64), 1)), rtol)))
               for _, rows in _row_chunks(values)):
            # Attributed to the caller's line, however deep the check ran.
            warn("The y_prob values do not sum to one. Make sure to pass probabilities.",
                 UserWarning)
    classes = check_score_labels(labels, num_classes, name, backend)
    if classes is not None:
        lookup = np.full(int(classes[-1]) + 2, -1, dtype=np.int64)
        lookup[classes] = np.arange(num_classes)
        codes = targets.astype(np.int64)
        # Codes outside the table read its last slot, -1 (not a column).
        outside = xp.less(codes, 0) | xp.greater(codes, classes[-1])
        positions = xp.take(backend.asarray(lookup), xp.where(outside, -1, codes))
        if ignore_index is not None:
            # The ignored rows are those whose target (not column) is
            # ignore_index; they get a position no column or unknown code has.
            ignored = xp.equal(targets, ignore_index)
            positions = xp.where(ignored, IGNORED_POSITION, positions)
            ignore_index = IGNORED_POSITION
        if validate:
            i = _first_true(xp.equal(positions, -1), backend)
            if i is not None:
                value = targets[i].item()
                hint = _negative_label_hint(value, True) if value < 0 else ""
                raise ValueError(
                    f"y_true contains {value!r} at {_position(i, map_shape)}, which is not in "
                    f"labels {classes.tolist()}{hint}"
                )
        targets = positions
    elif validate:
        _label_range(targets, "y_true", backend, num_classes, ignore_index, targets=True,
                     shape=map_shape)
    return ScoreInputs(
        y_true=targets, scores=values, sample_weight=weight, num_classes=num_classes,
        ignore_index=ignore_index, guard=not validate, backend=backend, source=source,
        binary_column=binary_column,
    )


def check_score_labels(labels, num_columns: int, name: str, backend) -> np.ndarray | None:
    """scikit-learn's ``labels=`` of the score functions: the class codes of
    the ``num_columns`` score columns, sorted; None: the columns are the codes
    ``0..K-1``. Read before any data (metrics_gpu.dask checks it so)."""
    if labels is None:
        return None
    classes = np.sort(check_labels_argument(labels, None, backend))
    if classes.size != num_columns:
        raise ValueError(f"labels has {classes.size} classes but {name} has {num_columns} columns")
    return classes


def check_labels_argument(labels, num_classes: int | None, backend):
    """scikit-learn's ``labels=``: 1-D non-empty distinct class codes."""
    if labels is None:
        return None
    array = np.asarray(backend.to_host(_to_backend(labels, backend)))
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"labels must be a non-empty 1-D list of class codes, got {labels!r}")
    if array.dtype.kind not in "iub":
        raise ValueError(
            f"labels must be integer class codes, got dtype {array.dtype} "
            "(map arbitrary labels with metrics_gpu.encode_labels)"
        )
    array = array.astype(np.int64)
    if (array < 0).any():
        i = _first_index(array < 0)
        raise ValueError(f"labels contains the negative code {array[i]} at index {i}")
    if num_classes is not None and (array >= num_classes).any():
        i = _first_index(array >= num_classes)
        raise ValueError(
            f"labels contains {array[i]} at index {i}, outside 0..{num_classes - 1} "
            f"(num_classes={num_classes})"
        )
    if np.unique(array).size != array.size:
        raise ValueError(f"labels must be distinct, got {array.tolist()}")
    return array


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


# -- arbitrary labels (encode_labels) -----------------------------------------------


def _value_kind(value_type: type) -> str | None:
    """What a label of this type sorts with: "string" or "number"; None for
    any other object (whether it sorts is NumPy's to say)."""
    if issubclass(value_type, (str, bytes)):
        return "string"
    if issubclass(value_type, (numbers.Number, np.bool_)):
        return "number"
    return None


def _is_missing(value) -> bool:
    """None, NaN, and the other markers not equal to themselves."""
    if value is None:
        return True
    try:
        return bool(value != value)
    except TypeError:  # pandas.NA, whose comparisons are themselves missing
        return True
    except ValueError:  # an array as a label: not missing (nor sortable)
        return False


def _first_missing(objects: np.ndarray) -> int | None:
    """The index of the first missing label of an object array. Integers,
    bools and strings cannot be missing: a scan only when another type is present."""
    if all(issubclass(t, (numbers.Integral, np.bool_, str, bytes))
           for t in set(map(type, objects))):
        return None
    return next((j for j, value in enumerate(objects) if _is_missing(value)), None)


def _label_kinds(array: np.ndarray, name: str) -> set[str]:
    """The kinds of the labels of one 1-D array; a missing label raises."""
    if array.dtype.kind in "fc":
        missing = np.isnan(array)
        if missing.any():
            raise ValueError(f"{name} has NaN at index {_first_index(missing)}; a missing "
                             "label is no class: drop or fill it first")
    if array.dtype.kind != "O":
        return {"string"} if array.dtype.kind in "US" else \
            {"number"} if array.dtype.kind in "iubfc" else set()
    j = _first_missing(array)
    if j is not None:
        value = array[j]
        shown = "None" if value is None else "NaN" if isinstance(
            value, (float, complex, np.inexact)) else repr(value)
        raise ValueError(f"{name} has {shown} at index {j}; a missing label is no class: "
                         "drop or fill it first")
    kinds = {kind for kind in map(_value_kind, set(map(type, array))) if kind is not None}
    if len(kinds) > 1:
        first = {kind: next(j for j, v in enumerate(array) if _value_kind(type(v)) == kind)
                 for kind in kinds}
        raise ValueError(
            f"{name} mixes string and number labels (a number, {array[first['number']]!r}, "
            f"at index {first['number']}; a string, {array[first['string']]!r}, at index "
            f"{first['string']}); encode one kind only"
        )
    return kinds


def float_integer_limit(dtype) -> int:
    """The largest integer up to which every integer is a float of ``dtype``."""
    return 2 ** (np.finfo(dtype).nmant + 1)


def _float_rounds_integers(objects: np.ndarray, dtype: np.dtype) -> bool:
    """Whether the floats NumPy made of a sequence may round one of its integers."""
    limit = float_integer_limit(dtype)
    return any(isinstance(v, numbers.Integral) and abs(int(v)) > limit for v in objects)


def check_label_arrays(arrays: tuple) -> list[np.ndarray]:
    """``encode_labels``' inputs: 1-D host arrays (an ``(N, 1)`` column
    flattened), all of one kind, strings or numbers, without a missing label.

    A missing label (NaN, None, pandas.NA) raises, naming the array and the
    position: no class stands for it (scikit-learn's ``LabelEncoder`` makes
    NaN a class, and ``np.unique`` of an object array one class per NaN). A
    sequence whose integers NumPy would round to floats stays an array of
    Python numbers, which compare exactly.
    """
    if not arrays:
        raise ValueError("encode_labels needs at least one array of labels")
    hosts, kinds = [], {}
    for i, values in enumerate(arrays):
        name = f"encode_labels argument {i}"
        # A sequence is read as Python objects too: NumPy would turn [1, "a"]
        # into strings, and [2**63 + 1, 1] into floats.
        objects = None if hasattr(values, "dtype") else np.asarray(values, dtype=object)
        array = np.asarray(values)
        if array.ndim == 2 and array.shape[1] == 1:
            array = array.reshape(-1)
            objects = None if objects is None else objects.reshape(-1)
        if array.ndim != 1:
            raise ValueError(f"{name} must be 1-D, got shape {array.shape}")
        if objects is not None:
            found = _label_kinds(objects, name)
            if array.dtype.kind in "fc" and _float_rounds_integers(objects, array.dtype):
                array = objects
        else:
            found = _label_kinds(array, name)
        if array.size and found:
            kinds[i] = found.pop()
        hosts.append(array)
    if len(set(kinds.values())) > 1:
        held = ", ".join(f"argument {i} {kind}s" for i, kind in kinds.items())
        raise ValueError(f"encode_labels got a mix of string and number labels ({held}); "
                         "encode one kind only")
    return hosts


# -- ranking inputs ------------------------------------------------------------
# The checks of metrics_gpu._functional.ranking (ROC / PR curves, ROC AUC, average
# precision, AUC-mu). Messages follow scikit-learn's where it has one for the
# case, with the offending value and its position added.

RANKING_AVERAGE_OPTIONS = (None, *get_args(RankingAverage))
MULTI_CLASS_OPTIONS = get_args(MultiClass)
# np.allclose(1, row_sum), scikit-learn's test that multiclass scores are
# probabilities; the relative tolerance widens to K * eps for scores of lower
# precision (float16 rows rounded from sums of 1 reach 1 +- K * eps / 2).
_ROW_SUM_RTOL, _ROW_SUM_ATOL = 1e-5, 1e-8


@dataclass(frozen=True)
class RankingInputs:
    """Checked ``(y_true, y_score, sample_weight)`` of a ranking metric, on one backend."""

    y_true: Any           # (N,) integer (or bool) labels
    y_score: Any          # (N,) scores, or (N, K) per-class scores
    sample_weight: Any    # (N,) or None
    backend: Any
    source: Any = None    # the caller's y_true: results go back to its framework and device
    score_eps: float = 0.0  # eps of the caller's score type (before any widening)


def check_ranking_inputs(y_true, y_score, sample_weight=None, score_name: str = "y_score",
                         weight_name: str = "sample_weight",
                         validate: bool = True) -> RankingInputs:
    """Labels, finite scores ((N,), (N, 1) flattened, or (N, K)) and weights of one length.

    Reads back one flag per check (and an index when a check fails), never the
    data. ``score_name`` and ``weight_name`` are the caller's names of
    ``y_score`` and ``sample_weight``, for the messages. Without ``validate``
    the scores and weights are not read (shapes and types are still checked;
    float labels still are, integer ones never need a read).
    """
    backend = resolve_backend(y_true, y_score, sample_weight)
    labels = _as_label_array(y_true, "y_true", backend, validate=True, targets=True)
    scores = _to_backend(y_score, backend)
    score_eps = float_eps(scores.dtype)
    if scores.dtype.name == "bfloat16":
        scores = scores.astype(np.float32)  # exact; NumPy cannot sort bfloat16
    if scores.dtype.kind not in "fiub":
        raise ValueError(f"{score_name} must hold numeric scores, got dtype {scores.dtype}")
    if scores.ndim == 2 and scores.shape[1] == 1:
        scores = scores.reshape(-1)
    if scores.ndim not in (1, 2):
        raise ValueError(
            f"{score_name} must be (N,) scores or (N, K) per-class scores, got shape "
            f"{tuple(scores.shape)}"
        )
    n = labels.shape[0]
    if n == 0:
        raise ValueError(f"y_true and {score_name} are empty; at least one sample is required")
    if scores.shape[0] != n:
        raise ValueError(f"y_true has {n} samples but {score_name} has {scores.shape[0]}")
    if validate and scores.dtype.kind == "f":
        _check_finite_scores(scores, backend, score_name)
    weight = check_sample_weight(sample_weight, n, backend, validate=validate,
                                 allow_all_zero=True, name=weight_name)
    return RankingInputs(labels, scores, weight, backend, source=y_true, score_eps=score_eps)


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


def present_labels(inputs: RankingInputs) -> np.ndarray:
    """The distinct labels of ``y_true``, sorted, in its dtype, on the host.

    Binary labels (the usual case) are found without a sort: the backend's
    ``label_pair_summary`` gives the least and greatest label and whether a
    third is present (on a GPU one read of the labels and one sync). Only a
    third class costs a ``unique`` (a sort, and a second sync).
    """
    labels, backend = inputs.y_true, inputs.backend
    low, high, third = backend.label_pair_summary(labels)
    if third:
        return np.asarray(backend.to_host(backend.xp.unique(labels)))
    return np.array([low] if low == high else [low, high], dtype=labels.dtype)


# What a binary ranking function's caller may want for multiclass y_true.
_ONE_VS_REST = {
    "roc_curve": "roc_auc_score(y_true, y_score, multi_class='ovr')",
    "precision_recall_curve": "average_precision_score(y_true, y_score, average='macro')",
}


def check_binary_scores(inputs: RankingInputs, function: str, classes=None) -> None:
    """Binary metrics rank one score per sample (scikit-learn's column_or_1d).

    With the present ``classes`` given, (N, K) scores of multiclass ``y_true``
    are named as such: a binary metric needs one class against the rest.
    """
    if inputs.y_score.ndim != 1 and classes is not None and classes.size > 2:
        average = _ONE_VS_REST.get(function)
        raise ValueError(
            f"y_true has {classes.size} classes {classes.tolist()}, but {function} is a binary "
            "metric: pass pos_label=k with the scores of class k (y_score[:, k]) to rank one "
            "class against the rest"
            + (f", or use {average} for a one-vs-rest average" if average else "")
        )
    if inputs.y_score.ndim != 1:
        raise ValueError(
            f"{function} needs 1-D y_score for binary y_true (the scores of the positive "
            f"class, e.g. y_score[:, 1]); got shape {tuple(inputs.y_score.shape)}"
        )


def check_curve_pos_label(pos_label, classes: np.ndarray):
    """scikit-learn's ``_check_pos_label_consistency`` for binary curves, on class codes.

    ``y_true`` must be binary unless ``pos_label`` picks the positive class;
    ``pos_label=None`` means 1 when the labels are within {0, 1} or {-1, 1}.
    """
    if pos_label is None:
        if classes.size > 2:
            raise ValueError(
                f"y_true has {classes.size} classes {classes.tolist()}: multiclass format is not "
                "supported; pass pos_label to rank one class against the rest"
            )
        values = set(classes.astype(np.int64).tolist())
        if not (values <= {0, 1} or values <= {-1, 1}):
            shown = ", ".join(repr(v) for v in classes.tolist())
            raise ValueError(
                f"y_true takes value in {{{shown}}} and pos_label is not specified: either make "
                "y_true take value in {0, 1} or {-1, 1} or pass pos_label explicitly."
            )
        return 1
    return _check_label_value(pos_label, "pos_label")


def _check_label_value(value, name: str):
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer():
        # typeshed's Real.__trunc__ returns an Integral-like, not int, so no int()
        # overload matches; every finite Real converts (NumPy floats by __int__).
        return int(value)  # type: ignore[call-overload]
    raise ValueError(f"{name} must be a class code (an integer), got {value!r}")


def check_average_precision_pos_label(pos_label, classes: np.ndarray) -> int:
    """scikit-learn's checks of ``pos_label`` in ``average_precision_score``."""
    pos_label = _check_label_value(pos_label, "pos_label")
    if classes.size > 2:
        if pos_label != 1:
            raise ValueError(
                "Parameter pos_label is fixed to 1 for multiclass y_true. Do not set pos_label "
                f"or set pos_label to 1 (got {pos_label})."
            )
    elif classes.size == 2 and pos_label not in classes:
        raise ValueError(
            f"pos_label={pos_label} is not a valid label. It should be one of "
            f"{classes.tolist()}"
        )
    return pos_label


def check_ranking_average(average, options=RANKING_AVERAGE_OPTIONS, problem: str = ""):
    if average not in options:
        where = f" for {problem} problems" if problem else ""
        raise ValueError(f"average must be one of {options}{where}, got {average!r}")
    return average


def check_max_fpr(max_fpr):
    """``max_fpr``: None, or a number in (0, 1] (the end of the partial ROC AUC)."""
    if max_fpr is None:
        return None
    if (not isinstance(max_fpr, numbers.Real) or isinstance(max_fpr, bool)
            or not 0 < max_fpr <= 1):
        raise ValueError(f"max_fpr must be a number in (0, 1] or None, got {max_fpr!r}")
    return float(max_fpr)


def check_drop_intermediate(drop_intermediate) -> bool:
    if not isinstance(drop_intermediate, (bool, np.bool_)):
        raise ValueError(f"drop_intermediate must be True or False, got {drop_intermediate!r}")
    return bool(drop_intermediate)


def check_multiclass_scores(inputs: RankingInputs, classes: np.ndarray) -> None:
    """(N, K) scores whose rows sum to 1, as scikit-learn's multiclass ROC AUC requires.

    The row sums are reduced where the scores live; one flag is read back
    (and the first bad row when there is one).
    """
    scores = inputs.y_score
    if scores.ndim != 2:
        raise ValueError(
            "`y_score` needs to be of shape `(n_samples, n_classes)`, since `y_true` contains "
            f"{classes.size} classes {classes.tolist()}. Got `y_score.shape="
            f"{tuple(scores.shape)}`."
        )
    xp = inputs.backend.xp
    sums = scores.sum(axis=1, dtype=np.float64)  # widened in the reduction, no (N, K) copy
    rtol = max(_ROW_SUM_RTOL, scores.shape[1] * inputs.score_eps)
    i = _first_true(xp.abs(1 - sums) > _ROW_SUM_ATOL + rtol * xp.abs(sums), inputs.backend)
    if i is not None:
        raise ValueError(
            "Target scores need to be probabilities for multiclass roc_auc, i.e. they should "
            f"sum up to 1.0 over classes; row {i} of y_score sums to {sums[i].item()!r}"
        )


def check_multi_class(multi_class) -> MultiClass:
    if multi_class not in MULTI_CLASS_OPTIONS:
        raise ValueError(f"multi_class must be one of {MULTI_CLASS_OPTIONS}, got {multi_class!r}")
    return multi_class


def check_multiclass_roc_labels(labels, classes: np.ndarray, n_columns: int) -> np.ndarray:
    """scikit-learn's ``labels=`` of multiclass ROC AUC: the class of each score column.

    Without ``labels`` the columns are the classes present in ``y_true``, sorted.
    """
    if labels is None:
        if classes.size != n_columns:
            raise ValueError(
                f"Number of classes in y_true ({classes.size}: {classes.tolist()}) not equal to "
                f"the number of columns in 'y_score' ({n_columns})"
            )
        return classes
    array = check_multiclass_roc_labels_argument(labels, n_columns)
    missing = np.setdiff1d(classes, array)
    if missing.size:
        raise ValueError(
            f"'y_true' contains labels not in parameter 'labels': {missing.tolist()}"
        )
    return array


def check_multiclass_roc_labels_argument(labels, n_columns: int) -> np.ndarray:
    """The checks of :func:`check_multiclass_roc_labels` that read no data:
    distinct, ordered integer codes, one per score column."""
    array = np.asarray(labels)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array.reshape(-1)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"labels must be a non-empty 1-D list of class codes, got {labels!r}")
    if array.dtype.kind not in "iub":
        raise ValueError(f"labels must be integer class codes, got dtype {array.dtype}")
    array = array.astype(np.int64)
    if np.unique(array).size != array.size:
        raise ValueError(f"Parameter 'labels' must be unique, got {array.tolist()}")
    if np.any(np.diff(array) < 0):
        raise ValueError(f"Parameter 'labels' must be ordered, got {array.tolist()}")
    if array.size != n_columns:
        raise ValueError(
            f"Number of given labels, {array.size}, not equal to the number of columns in "
            f"'y_score', {n_columns}"
        )
    return array


def check_ranking_class_codes(inputs: RankingInputs, num_classes: int) -> None:
    """Labels must be class codes ``0..K-1`` of the ``K`` score columns."""
    _label_range(inputs.y_true, "y_true", inputs.backend, num_classes, None, targets=True)


def check_cost_matrix(cost_matrix, num_classes: int, backend=None) -> np.ndarray | None:
    """AUC-mu's misclassification costs: K x K, finite, 0 on the diagonal (CatBoost's rule).

    Returned on the host (K x K numbers; a device matrix is read back once). A
    string is CatBoost's ``misclass_cost_matrix``: the K * K entries, row by
    row, separated by ``/``.
    """
    if cost_matrix is None:
        return None
    if isinstance(cost_matrix, str):
        cost_matrix = _parse_cost_matrix(cost_matrix)
    if backend is not None and is_device_array(cost_matrix):
        cost_matrix = backend.to_host(backend.asarray(cost_matrix))
    try:
        matrix = np.asarray(cost_matrix, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"cost_matrix must be a K x K matrix of numbers, got {cost_matrix!r}") \
            from None
    if matrix.shape != (num_classes, num_classes):
        raise ValueError(
            f"cost_matrix must be {num_classes} x {num_classes} (one row and column per score "
            f"column), got shape {matrix.shape}"
        )
    bad = ~np.isfinite(matrix)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise ValueError(
            f"cost_matrix must be finite; found {matrix[row, col].item()!r} at row {row}, "
            f"column {col}"
        )
    diagonal = np.diagonal(matrix)
    if np.any(diagonal != 0):
        i = _first_index(diagonal != 0)
        raise ValueError(
            f"cost_matrix must be 0 on the diagonal (a correct prediction costs nothing); "
            f"found {diagonal[i].item()!r} at row {i}, column {i}"
        )
    return matrix


def check_per_class_scores(inputs: RankingInputs, classes: np.ndarray) -> None:
    """Multiclass average precision: one score column per class present in ``y_true``."""
    shape = tuple(inputs.y_score.shape)
    if shape != (inputs.y_true.shape[0], classes.size):
        raise ValueError(
            "`y_score` needs to be of shape `(n_samples, n_classes)`, since `y_true` contains "
            f"multiple classes ({classes.size}: {classes.tolist()}). Got `y_score.shape={shape}`."
        )


def check_auc_mu_scores(inputs: RankingInputs, name: str = "y_score") -> int:
    """AUC-mu ranks (N, K) per-class scores, K >= 2; returns K."""
    shape = tuple(inputs.y_score.shape)
    if len(shape) != 2 or shape[1] < 2:
        raise ValueError(f"{name} must be (N, K) per-class scores with K >= 2, got shape {shape}")
    return shape[1]


def check_some_weight(inputs: RankingInputs) -> None:
    """A ranked problem needs a sample of non-zero weight (one flag read back).

    Ranking inputs allow all-zero weights at first, because scikit-learn
    decides late: its weighted one-vs-rest average of no weight is 0, every
    other ranking metric of no weight raises."""
    weight = inputs.sample_weight
    if weight is not None and not bool(weight.any()):
        raise ValueError(ALL_ZERO_WEIGHT.format(n=weight.shape[0]))


def _parse_cost_matrix(text: str) -> np.ndarray:
    """CatBoost's ``M[0,0]/M[0,1]/.../M[K-1,K-1]`` as a K x K matrix."""
    try:
        values = [float(item) for item in text.split("/")]
    except ValueError:
        raise ValueError(
            f"misclass_cost_matrix must be numbers separated by '/', got {text!r}"
        ) from None
    size = math.isqrt(len(values))
    if size * size != len(values):
        raise ValueError(
            f"misclass_cost_matrix must hold K * K numbers (row by row), got {len(values)} "
            f"in {text!r}"
        )
    return np.array(values, dtype=np.float64).reshape(size, size)


def check_catboost_auc_type(auc_type) -> str:
    if auc_type not in ("Mu", "OneVsAll"):
        raise ValueError(f"auc_type must be 'Mu' or 'OneVsAll', got {auc_type!r}")
    return auc_type


# -- batches of the streaming state (metrics_gpu.ClassificationMetrics) ---------

# Targets the streaming kernels read as they are (training loops give int64, or
# int32); other integer types are converted first (one copy of N values).
STREAM_TARGET_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
STREAM_SCORE_DTYPES = ("float16", "bfloat16", "float32", "float64")


@dataclass(frozen=True)
class StreamBatch:
    """One update's inputs as the streaming state reads them (no value checked
    unless the state validates eagerly)."""

    y_true: Any            # (M,) int32 or int64, contiguous: one target per sample
    preds: Any             # (M,) labels of y_true's dtype, or the scores as given
    sample_weight: Any     # (M,) int64, float32 or float64, or None
    n: int                 # M samples (positions, for channel-first scores)
    # The largest weight the caller's integer dtype holds (1 without weights):
    # n * weight_limit bounds the batch's counts without reading a weight.
    weight_limit: int = 1
    score_dtype: str | None = None  # numpy name of the scores' type; None for labels
    # Scores: element strides of (image, position, class) and positions per image.
    inner: int = 1
    image_stride: int = 0
    inner_stride: int = 0
    column_stride: int = 1
    # A binary head's one column (preds (M,)), the positive class's scores of
    # a K = 2 state, logits or probabilities: read as the (M, 2) rows of
    # binary_score_rows (the kernels build each row in registers).
    binary_column: bool = False
    column_logits: bool = True

    @property
    def scores(self) -> bool:
        return self.score_dtype is not None

    def rows(self, xp):
        """The scores as ``(M, K)`` rows, float (bfloat16 widened; a binary
        head's column as its two-class rows)."""
        values = self.preds
        if self.binary_column:
            return binary_score_rows(values, self.column_logits, xp)
        if values.ndim > 2:
            values = xp.moveaxis(values, 1, -1)
        values = values.reshape(-1, values.shape[-1])
        if self.score_dtype == "bfloat16":
            # On a kernel backend the scores are bfloat16 bit patterns (uint16):
            # widened as patterns, not converted as integers.
            values = (Bfloat16Bits(values).widened() if values.dtype == np.uint16
                      else values.astype(np.float32))
        return values


def _collapsed_positions(shape, strides):
    """(positions, stride) of dims 2.. of a scores array when one stride walks
    them all, else None."""
    spatial_shape, spatial_strides = shape[2:], strides[2:]
    if not spatial_shape:
        return 1, 0
    for i in range(len(spatial_shape) - 1):
        step = spatial_strides[i + 1] * spatial_shape[i + 1]
        if spatial_shape[i] > 1 and spatial_strides[i] != step:
            return None
    return math.prod(spatial_shape), spatial_strides[-1]


def binary_score_rows(column, from_logits: bool, xp):
    """``(N,)`` scores of the positive class as the ``(N, 2)`` rows of a
    two-class state: ``[0, z]`` for a logit z (the row's softmax is
    ``[1 - sigmoid(z), sigmoid(z)]``), ``[1 - p, p]`` for a probability p
    (a p outside [0, 1] makes a row that is not probabilities, refused as
    such). Class 1 is predicted where z > 0 or p > 1/2: a tie goes to class
    0, the first column of the row's maximum, as ``preds > threshold`` does.
    One copy; float16 as float32, as the kernels build the rows (there
    ``1 - p`` of a float16 p is exact)."""
    if column.dtype == np.float16:
        column = column.astype(np.float32)
    rows = xp.empty((column.shape[0], 2), column.dtype)
    rows[:, 1] = column
    rows[:, 0] = 0 if from_logits else 1 - column
    return rows


def check_stream_batch(y_true, preds, sample_weight, *, num_classes: int, backend,
                       ignore_index=None, eager: bool = False, contiguous=None,
                       pred_name: str = "preds", allow_empty: bool = False,
                       probabilities: bool = False) -> StreamBatch:
    """Shapes and types of one streaming update (free: nothing is read); with
    ``eager`` also the values (ranges, finiteness, weights, and with
    ``probabilities`` that score rows are probabilities: a few syncs on a
    GPU), raising ``ValueError`` before anything is added. ``allow_empty``:
    a batch of no sample is one (a state's last batch, a rank without data),
    not an error.

    ``contiguous(array)`` makes a contiguous copy (the caller counts it as an
    allocation); it is needed only for layouts the kernels cannot stride.
    """
    contiguous = contiguous or backend.xp.ascontiguousarray

    def converted(array, dtype):
        """``array`` as ``dtype``: a copy, counted as an allocation on a device."""
        if array.dtype == dtype:
            return array
        if backend.name != "numpy":
            record(device_allocations=1)
        return array.astype(dtype)

    true = _to_backend(y_true, backend)
    bits = _bfloat16_bits(preds, backend)
    pred = _to_backend(preds, backend) if bits is None else bits
    if true.dtype.kind not in "iub":
        raise ValueError(
            f"y_true must hold integer class codes 0..{num_classes - 1}, got dtype {true.dtype}"
        )
    # A binary head's one channel of scores, floating point: (N,) or (N, 1)
    # for (N,) targets, (N, 1, d1, ...) or (N, d1, ...) for (N, d1, ...) label
    # maps. The positive class's scores, read as two-column rows.
    true_shape, pred_shape = tuple(true.shape), tuple(pred.shape)
    binary_column = (num_classes == 2 and true.ndim >= 1
                     and (bits is not None or pred.dtype.kind == "f")
                     and pred_shape in (true_shape, (true_shape[0], 1, *true_shape[1:])))
    if binary_column:
        if bits is not None:  # (N, 1, ...) bfloat16: widened, as one column always is
            pred = _to_backend(preds, backend)
        bits = None
        pred, true = pred.reshape(-1), true.reshape(-1)
        if not pred.flags.c_contiguous:
            pred = contiguous(pred)
    score_name = pred.dtype.name if bits is None else "bfloat16"
    label_map = (bits is None and pred.ndim >= 2 and pred.ndim == true.ndim
                 and pred.dtype.kind in "iub")
    if binary_column:
        if pred.dtype.name not in STREAM_SCORE_DTYPES:
            raise ValueError(f"{pred_name} of a binary head are scores and must be floating "
                             f"point ({', '.join(STREAM_SCORE_DTYPES)}), got dtype {pred.dtype}")
        layout = dict(score_dtype=pred.dtype.name, image_stride=1, inner_stride=0,
                      column_stride=0, binary_column=True, column_logits=not probabilities)
        n = int(true.size)
    elif pred.ndim >= 2 and not label_map:
        if score_name not in STREAM_SCORE_DTYPES:
            raise ValueError(
                f"{pred_name} of shape {tuple(pred.shape)} are scores and must be floating point "
                f"({', '.join(STREAM_SCORE_DTYPES)}), got dtype {pred.dtype}"
            )
        if pred.shape[1] != num_classes:
            raise ValueError(
                f"{pred_name} has {pred.shape[1]} score columns but num_classes={num_classes}"
            )
        expected = (pred.shape[0], *pred.shape[2:])
        if pred.ndim == 2 and true.ndim == 1 and true.shape[0] != pred.shape[0]:
            raise ValueError(f"y_true has {true.shape[0]} samples but {pred_name} has "
                             f"{pred.shape[0]}")
        column = pred.ndim == 2 and tuple(true.shape) == (pred.shape[0], 1)
        if tuple(true.shape) != expected and not column:
            raise ValueError(
                f"{pred_name} of shape {tuple(pred.shape)} needs y_true of shape {expected} (one "
                f"target per {'row' if pred.ndim == 2 else 'position'}), got {tuple(true.shape)}"
            )
        itemsize = pred.dtype.itemsize
        strides = [s // itemsize for s in pred.strides]
        collapsed = (None if any(s % itemsize for s in pred.strides)
                     else _collapsed_positions(pred.shape, strides))
        if collapsed is None:
            pred = contiguous(pred)
            strides = [s // itemsize for s in pred.strides]
            collapsed = _collapsed_positions(pred.shape, strides)
        inner, inner_stride = collapsed
        layout = dict(score_dtype=score_name, inner=inner, image_stride=strides[0],
                      inner_stride=inner_stride, column_stride=strides[1])
        n = math.prod(expected)
    else:
        if label_map:
            if tuple(true.shape) != tuple(pred.shape):
                raise ValueError(f"y_true of shape {tuple(true.shape)} and {pred_name} of shape "
                                 f"{tuple(pred.shape)} must match")
        elif pred.ndim != 1:
            raise ValueError(
                f"{pred_name} must be (N,) labels, (N, K) scores or (N, K, d1, ...) scores; got "
                f"shape {tuple(pred.shape)} for y_true of shape {tuple(true.shape)}"
            )
        elif true.size != pred.shape[0]:
            raise ValueError(f"y_true has {true.size} samples but {pred_name} has "
                             f"{pred.shape[0]}")
        if pred.dtype.kind not in "iub":
            raise ValueError(f"{pred_name} given as labels must hold integer class codes, got "
                             f"dtype {pred.dtype} (scores are (N, K))")
        layout = {}
        n = int(true.size)
    if n == 0 and not allow_empty:
        raise ValueError(f"y_true and {pred_name} are empty; at least one sample is required")
    # Targets (and labels) of another type, or not contiguous: one copy each.
    if not true.flags.c_contiguous:
        true = contiguous(true)
    true = true.reshape(-1)
    if true.dtype not in STREAM_TARGET_DTYPES:
        true = converted(true, np.dtype(np.int64))
    if not layout:
        if not pred.flags.c_contiguous:
            pred = contiguous(pred)
        pred = pred.reshape(-1)
        if pred.dtype != true.dtype:  # the kernels read both as one type
            true, pred = converted(true, np.dtype(np.int64)), converted(pred, np.dtype(np.int64))
    weight, weight_limit = None, 1
    if sample_weight is not None:
        weight = _to_backend(sample_weight, backend)
        if weight.size != n:
            raise ValueError(f"sample_weight has {weight.size} entries but the batch has {n} "
                             "samples (one weight per target)")
        if not weight.flags.c_contiguous:
            weight = contiguous(weight)
        weight = weight.reshape(-1)
        if weight.dtype.kind in "iub":
            weight_limit = integer_weight_limit(weight.dtype)
            weight = converted(weight, np.dtype(np.int64))
        elif weight.dtype.kind != "f":
            raise ValueError(f"sample_weight must be numeric, got dtype {weight.dtype}")
        elif weight.dtype not in (np.float32, np.float64):
            weight = converted(weight, np.dtype(np.float64))
    if eager and n:
        _label_range(true, "y_true", backend, num_classes, ignore_index, targets=True)
        if layout:
            values = pred if bits is None else Bfloat16Bits(pred)  # read in chunks
            _check_finite_scores(values, backend, pred_name)
            if probabilities:
                rows = StreamBatch(true, pred, None, n, **layout).rows(backend.xp)
                bad = first_non_probability_row(rows, backend, layout["score_dtype"])
                if bad is not None:
                    row, problem, sum_only = bad
                    raise ValueError(declared_probabilities_refused(
                        f"{pred_name} row {row} (of {n} score rows)", problem, sum_only,
                        declared="scores='probabilities'",
                        logits_option="build the state with scores='logits'"))
        else:
            _label_range(pred, pred_name, backend, num_classes, None)
        if weight is not None:
            check_sample_weight(weight, n, backend, validate=True, allow_all_zero=True)
    return StreamBatch(y_true=true, preds=pred, sample_weight=weight, n=n,
                       weight_limit=weight_limit, **layout)


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


# -- multilabel ranking metrics: (N, L) indicators (or relevance) with scores ----------


@dataclass(frozen=True)
class IndicatorInputs:
    """Checked ``(y_true, y_score, sample_weight)`` of a multilabel ranking metric."""

    y_true: Any           # (N, L) bool: relevant labels (float64 relevance for DCG)
    y_score: Any          # (N, L) numeric scores, their own dtype (ranks need only order)
    sample_weight: Any    # (N,) or None
    backend: Any
    source: Any = None    # the caller's y_true: results go back to its framework and device


def is_label_indicator(y_true) -> bool:
    """Whether ``y_true`` may be an (N, L) label indicator matrix, L >= 2, by
    its shape only (nothing is read; (N, 1) columns stay binary labels, as
    scikit-learn's ``type_of_target`` has them). An array of class codes is
    ruled out with two builtin calls, before any backend is resolved (the
    functional hot path's budget)."""
    shape = getattr(y_true, "shape", None)
    if shape is None:
        try:
            shape = np.shape(y_true)
        except ValueError:  # ragged nested lists: not a matrix
            return False
    return len(shape) == 2 and shape[1] >= 2


def check_indicator_inputs(y_true, y_score, sample_weight=None, *, function: str,
                           min_labels: int = 1, validate: bool = True,
                           allow_all_zero: bool = False, graded: bool = False) -> IndicatorInputs:
    """An (N, L) 0/1 indicator (any int, bool or float dtype), (N, L) finite
    scores and (N,) finite non-negative weights, not all 0, on one backend.

    Reads back one flag per check (and a position when a check fails), never
    the data. Without ``validate`` scores and weights are not read (shapes and
    types still are); the indicator's values always are. ``min_labels``: the
    fewest label columns ``function`` takes (scikit-learn's ranking loss and
    coverage error refuse one column, as a binary target). ``allow_all_zero``
    leaves weights that are all 0 to the caller (scikit-learn's weighted
    multilabel ROC AUC and average precision are 0 there). ``graded``: y_true
    holds any finite relevance values (DCG), returned as float64.
    """
    backend = resolve_backend(y_true, y_score, sample_weight)
    xp = backend.xp
    labels = _to_backend(y_true, backend)
    if graded and labels.ndim != 2:
        raise ValueError(
            f"{function}: y_true must be an (N, L) matrix of true relevance (one row of L "
            f"documents or labels per sample), got shape {tuple(labels.shape)}"
        )
    if labels.ndim != 2:
        raise ValueError(
            f"{function}: y_true must be an (N, L) label indicator matrix (1 where a label is "
            f"relevant, else 0), got shape {tuple(labels.shape)}"
        )
    if labels.shape[1] < min_labels:
        raise ValueError(
            f"{function}: y_true has {labels.shape[1]} label column(s); at least {min_labels} "
            "are needed (scikit-learn: binary format is not supported)"
        )
    if labels.dtype.kind not in "biuf":
        raise ValueError(f"{function}: y_true must be numeric, got dtype {labels.dtype}")
    if graded:
        labels = labels.astype(np.float64)
        i = _first_nonfinite(labels, backend)
        if i is not None:
            raise ValueError(
                f"{function}: y_true must hold finite relevance values; found "
                f"{labels.reshape(-1)[i].item()!r} at {_position(i, labels.shape)}"
            )
    elif labels.dtype.kind != "b":
        i = _first_true(xp.not_equal(labels, 0) & xp.not_equal(labels, 1), backend)
        if i is not None:
            raise ValueError(
                f"{function}: y_true must hold 0/1 label indicators; found "
                f"{labels.reshape(-1)[i].item()!r} at {_position(i, labels.shape)}. "
                f"{function} takes no ignore_index (each row is ranked, or each label "
                "scored, over all its cells): leave out the rows holding other values "
                "first, e.g. y_true[keep], y_score[keep] with keep = ((y_true == 0) | "
                "(y_true == 1)).all(axis=1)"
            )
        labels = xp.not_equal(labels, 0)
    scores = _to_backend(y_score, backend)
    if scores.dtype.name == "bfloat16" or scores.dtype == np.float16:
        scores = scores.astype(np.float32)  # exact; NumPy cannot sort bfloat16
    if scores.dtype.kind not in "fiub":
        raise ValueError(f"{function}: y_score must hold numeric scores, got dtype {scores.dtype}")
    if tuple(scores.shape) != tuple(labels.shape):
        raise ValueError(
            f"{function}: y_true and y_score must have the same shape (N, L); got "
            f"{tuple(labels.shape)} and {tuple(scores.shape)}"
        )
    n = labels.shape[0]
    if n == 0 or labels.shape[1] == 0:
        raise ValueError(
            f"{function}: y_true and y_score are empty (shape {tuple(labels.shape)}); at least "
            "one sample and one label are required"
        )
    if validate and scores.dtype.kind == "f":
        _check_finite_scores(scores, backend, f"{function}: y_score")
    weight = check_sample_weight(sample_weight, n, backend, validate=validate,
                                 allow_all_zero=allow_all_zero)
    if weight is not None:
        weight = weight.astype(np.float64)
    return IndicatorInputs(labels, scores, weight, backend, source=y_true)



def check_rank_cutoff(k):
    """``k`` of the DCG scores: an integer >= 1, or None (every label)."""
    if k is None:
        return None
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"k must be an integer >= 1 or None, got {k!r}")
    return int(k)


def check_log_base(log_base) -> float:
    """``log_base`` of the DCG discount: a number > 0."""
    if (isinstance(log_base, bool) or not isinstance(log_base, numbers.Real)
            or not float(log_base) > 0):
        raise ValueError(f"log_base must be a number > 0, got {log_base!r}")
    return float(log_base)
