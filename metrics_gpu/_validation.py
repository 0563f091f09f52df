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
from dataclasses import dataclass
from typing import Any

import numpy as np

from metrics_gpu._backend import resolve_backend

AVERAGE_OPTIONS = (None, "micro", "macro", "weighted", "binary")
NORMALIZE_OPTIONS = (None, "true", "pred", "all")
KAPPA_WEIGHTS = (None, "linear", "quadratic")

# K inferred from the data beyond this (2**28: 2 GiB per per-class int64
# array) means sparse ids rather than class codes; an explicit num_classes is
# taken as asked.
MAX_INFERRED_CLASSES = 1 << 28


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
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _first_index(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _first_true(mask, backend) -> int | None:
    """Flat index of the first True in ``mask``, or None. Found where the mask
    lives (a flag and one index read back): checks never copy the data to the host."""
    if not bool(mask.any()):
        return None
    return int(backend.xp.flatnonzero(mask)[0])


def check_num_classes(num_classes, name: str = "num_classes") -> int | None:
    if num_classes is None:
        return None
    if not _is_int(num_classes) or num_classes < 1:
        raise ValueError(f"{name} must be a positive integer, got {num_classes!r}")
    return int(num_classes)


def check_ignore_index(ignore_index) -> int | None:
    if ignore_index is None:
        return None
    if not _is_int(ignore_index):
        raise ValueError(f"ignore_index must be an integer or None, got {ignore_index!r}")
    return int(ignore_index)


def _as_label_array(values, name: str, backend, validate: bool):
    """1-D integer (or bool) label codes; (N, 1) columns are flattened."""
    array = backend.asarray(values)
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
                raise ValueError(
                    f"{name} must hold integer class codes; found {array[i].item()!r} at "
                    f"index {i} (map arbitrary labels with metrics_gpu.encode_labels)"
                )
            return array.astype(np.int64)
        # Unchecked: what cannot be a code becomes -1, which the guard counts as invalid.
        return xp.where(representable, array, -1).astype(np.int64)
    raise ValueError(
        f"{name} must hold integer class codes 0..K-1, got dtype {array.dtype}; "
        "map arbitrary labels (strings, sparse ids) with metrics_gpu.encode_labels"
    )


def _as_scores(values, name: str, backend, validate: bool):
    array = backend.asarray(values)
    # bfloat16 (ml_dtypes, as JAX and torch export it to NumPy) has kind 'V'.
    bfloat16 = array.dtype.name == "bfloat16"
    if array.dtype.kind not in "fiu" and not bfloat16:
        raise ValueError(f"{name} scores must be numeric, got dtype {array.dtype}")
    if validate and (array.dtype.kind == "f" or bfloat16):
        checked = array.astype(np.float32) if bfloat16 else array
        i = _first_true(~backend.xp.isfinite(checked), backend)
        if i is not None:
            row, col = np.unravel_index(i, array.shape)
            raise ValueError(
                f"{name} must hold finite scores; found {array[row, col].item()!r} at "
                f"row {row}, column {col}"
            )
    return array


def check_sample_weight(sample_weight, n_samples: int, backend, validate: bool):
    if sample_weight is None:
        return None
    weight = backend.asarray(sample_weight)
    if weight.ndim != 1:
        raise ValueError(
            f"sample_weight must be 1-D, got shape {tuple(weight.shape)}"
        )
    if weight.shape[0] != n_samples:
        raise ValueError(
            f"sample_weight has {weight.shape[0]} entries but y_true has {n_samples} samples"
        )
    if weight.dtype.kind not in "fiub":
        raise ValueError(f"sample_weight must be numeric, got dtype {weight.dtype}")
    if validate and weight.dtype.kind == "f":
        i = _first_true(~backend.xp.isfinite(weight), backend)
        if i is not None:
            raise ValueError(
                f"sample_weight must be finite; found {weight[i].item()!r} at index {i}"
            )
    if validate and weight.dtype.kind in "if":
        i = _first_true(weight < 0, backend)
        if i is not None:
            raise ValueError(
                f"sample_weight must be non-negative; found {weight[i].item()!r} at index {i}"
            )
    return weight


def _label_range(labels, name: str, backend, num_classes, ignore_index) -> int:
    """Check ``labels`` against ``[0, num_classes)``; return max + 1 (0 if none counted).

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
    counted = labels if ignore_index is None or name != "y_true" else labels[labels != ignore_index]
    if counted.size == 0:
        return 0
    low, high = int(counted.min()), int(counted.max())
    if low >= 0 and (num_classes is None or high < num_classes):
        return high + 1
    counts_ignored = ignore_index is not None and name == "y_true"
    if low < 0:
        bad = labels < 0
        if counts_ignored:
            bad &= labels != ignore_index
        i = _first_true(bad, backend)
        raise ValueError(
            f"{name} contains the negative label {labels[i].item()!r} at index {i}; labels must be "
            "class codes 0..K-1 (map arbitrary labels with metrics_gpu.encode_labels)"
        )
    if num_classes is not None and high >= num_classes:
        bad = labels >= num_classes
        if counts_ignored:
            bad &= labels != ignore_index
        i = _first_true(bad, backend)
        raise ValueError(
            f"{name} contains the label {labels[i].item()!r} at index {i}, outside 0..{num_classes - 1} "
            f"(num_classes={num_classes})"
        )
    return int(high) + 1


def _largest_label(labels, backend, ignore_index) -> int:
    """The largest counted label, reduced where the labels live (one number read back)."""
    if ignore_index is not None:
        labels = labels[labels != ignore_index]
    return int(labels.max()) if labels.size else -1


def check_label_inputs(y_true, y_pred, *, num_classes=None, sample_weight=None,
                       ignore_index=None, validate=True, extra_classes=0,
                       deterministic=False) -> LabelInputs:
    """Check ``y_true``/``y_pred`` (labels, or ``(N, K)`` scores reduced by argmax).

    ``extra_classes`` is the smallest K a caller needs regardless of the data
    (``max(labels) + 1`` for scikit-learn's ``labels=``).
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

    y_true = _as_label_array(y_true, "y_true", backend, validate)
    pred = backend.asarray(y_pred)
    if pred.ndim == 2 and pred.shape[1] > 1:
        scores = _as_scores(pred, "y_pred", backend, validate)
        if num_classes is not None and num_classes != scores.shape[1]:
            raise ValueError(
                f"y_pred has {scores.shape[1]} score columns but num_classes={num_classes}"
            )
        num_classes = int(scores.shape[1])
        y_pred_labels = backend.argmax_scores(scores)
        scores_given = True
    else:
        y_pred_labels = _as_label_array(pred, "y_pred", backend, validate)
        scores_given = False

    n = y_true.shape[0]
    if n == 0 or y_pred_labels.shape[0] == 0:
        raise ValueError("y_true and y_pred are empty; at least one sample is required")
    if y_pred_labels.shape[0] != n:
        raise ValueError(
            f"y_true has {n} samples but y_pred has {y_pred_labels.shape[0]}"
        )
    weight = check_sample_weight(sample_weight, n, backend, validate)

    if validate:
        high_true = _label_range(y_true, "y_true", backend, num_classes, ignore_index)
        high_pred = 0 if scores_given else _label_range(
            y_pred_labels, "y_pred", backend, num_classes, None
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


def check_labels_argument(labels, num_classes: int | None, backend):
    """scikit-learn's ``labels=``: 1-D non-empty distinct class codes."""
    if labels is None:
        return None
    array = np.asarray(backend.to_host(backend.asarray(labels)))
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
