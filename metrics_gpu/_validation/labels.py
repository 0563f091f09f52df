"""Label inputs: targets and predictions as class codes 0..K-1 (or (N, K)
scores reduced by argmax), ``groups=``, scikit-learn's ``labels=``, and the
arbitrary labels of ``encode_labels``."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from metrics_gpu.backends.selection import resolve_backend
from metrics_gpu._validation.common import (
    _as_scores,
    _first_index,
    _first_true,
    _position,
    _scores_to_backend,
    _shape_of,
    _to_backend,
    check_ignore_index,
    check_num_classes,
    check_sample_weight,
    check_state_size,
    to_numpy,
)
from metrics_gpu._validation.multilabel import MULTILABEL_INSTEAD, refuse_multilabel


# K inferred from the data beyond this (2**28: 2 GiB per per-class int64
# array) means sparse ids rather than class codes; an explicit num_classes is
# taken as asked, within MAX_STATE_BYTES.
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
