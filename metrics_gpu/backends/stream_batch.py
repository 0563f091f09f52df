"""The description of a checked streaming batch that the launchers read:
:class:`StreamBatch` (which the checks of a streaming update build, above this
floor) and the two-class rows of a binary head's one column of scores."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from metrics_gpu._formulas.state import Bfloat16Bits


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
