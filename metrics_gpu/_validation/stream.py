"""Streaming inputs: one batch of the streaming state's update
(:class:`metrics_gpu.ClassificationMetrics`) checked and laid out as the
:class:`~metrics_gpu.backends.stream_batch.StreamBatch` the kernels read."""

from __future__ import annotations

import math

import numpy as np

from metrics_gpu._formulas.state import Bfloat16Bits
from metrics_gpu.backends.counting import record
from metrics_gpu.backends.stream_batch import StreamBatch
from metrics_gpu._validation.common import (
    _bfloat16_bits,
    _check_finite_scores,
    _to_backend,
    check_sample_weight,
    integer_weight_limit,
)
from metrics_gpu._validation.labels import _label_range
from metrics_gpu._validation.scores import (
    declared_probabilities_refused,
    first_non_probability_row,
)


# Targets the streaming kernels read as they are (training loops give int64, or
# int32); other integer types are converted first (one copy of N values).
STREAM_TARGET_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
STREAM_SCORE_DTYPES = ("float16", "bfloat16", "float32", "float64")


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
