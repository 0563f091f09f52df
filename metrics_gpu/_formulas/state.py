"""Accumulated state: what a backend produces and every formula reads.

Two shapes of state exist:

* a dense confusion matrix ``C`` (K x K, rows = actual, columns = predicted),
  used while ``K * K`` fits comfortably in memory, and
* :class:`ClassStatistics`: per-class sufficient statistics in O(K) memory
  (true positives, support, predicted counts, the total, the misclassified
  weight, and the two disagreement moments weighted kappa needs). Every label
  metric except the dense matrix itself is a function of these.

A dense matrix is reduced to :class:`ClassStatistics` by
:func:`statistics_from_matrix`, so both paths meet in one set of formulas.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

# Dense confusion matrices are used up to this many cells (K <= 2048): at that
# size the matrix is 32 MiB of int64, small next to the inputs that need it,
# and the O(K^2) reductions cost less than one pass over 1e7 labels. Above it,
# per-class statistics keep memory O(K) (docs/conventions.md, "Inputs and the counts").
DENSE_MATRIX_MAX_CELLS = 2048 * 2048


class RowArgmax:
    """``y_pred`` given as ``(N, K)`` scores: a row argmax the backends take
    while they accumulate (the kernels fuse it; NumPy reduces chunk by chunk),
    so no ``(N,)`` labels are ever stored.

    Stands in for the ``(N,)`` labels (shape, dtype) without computing them.
    """

    ndim = 1
    dtype = np.dtype(np.int64)

    def __init__(self, scores):
        self.scores = scores
        self.shape = (scores.shape[0],)

    def __len__(self):
        return self.shape[0]


def bfloat16_dtype():
    """NumPy's bfloat16 type (ml_dtypes'), or None when ml_dtypes is not installed."""
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


class Bfloat16Bits:
    """bfloat16 scores on a kernel backend: their 16-bit patterns (``bits``,
    uint16, a view of the caller's tensor), which the kernels widen in
    registers, so no float32 copy of ``(N, K)`` scores is ever made. CuPy has
    no bfloat16 type: this stands in for the array (shape, strides, and
    ml_dtypes' ``bfloat16`` as dtype where it is installed); checks read its
    values through :meth:`widened`, a few rows at a time.
    """

    def __init__(self, bits):
        self.bits = bits

    @property
    def dtype(self):
        return bfloat16_dtype()

    shape = property(lambda self: self.bits.shape)
    ndim = property(lambda self: self.bits.ndim)
    size = property(lambda self: self.bits.size)
    strides = property(lambda self: self.bits.strides)

    def __getitem__(self, index) -> Bfloat16Bits:
        return Bfloat16Bits(self.bits[index])

    def reshape(self, *shape) -> Bfloat16Bits:
        return Bfloat16Bits(self.bits.reshape(*shape))

    def transpose(self, *axes) -> Bfloat16Bits:
        return Bfloat16Bits(self.bits.transpose(*axes))

    def widened(self):
        """The values as float32 (exact: a bfloat16 is the top half of a
        float32), in a new array of this one's size."""
        return (self.bits.astype(np.uint32) << 16).view(np.float32)

    def item(self):
        return self.widened().item()

    def any_nonfinite(self) -> bool:
        """Whether a value is NaN or infinite: two reductions of the patterns,
        no temporary. Non-finite is an exponent of all ones: as uint16 at least
        0xFF80 when negative, as int16 at least 0x7F80 when positive."""
        if self.bits.size == 0:
            return False
        return bool((self.bits.max() >= 0xFF80) | (self.bits.view(np.int16).max() >= 0x7F80))


def use_dense_matrix(num_classes: int) -> bool:
    """True when a K x K confusion matrix is the cheaper state for ``num_classes``."""
    return num_classes * num_classes <= DENSE_MATRIX_MAX_CELLS


@dataclass(frozen=True)
class ClassStatistics:
    """Per-class sufficient statistics of a labelled sample, in O(K) memory.

    Counts are int64 for unweighted input and float64 for weighted input.

    Attributes
    ----------
    true_positives : (K,) array
        Samples (or weight) with true class k predicted as k: ``C[k, k]``.
    support : (K,) array
        Samples (or weight) whose true class is k: row sums of ``C``.
    predicted : (K,) array
        Samples (or weight) predicted as k: column sums of ``C``.
    total : 0-d array
        All counted samples (or weight).
    observed : (K,) bool array
        Class k occurs in ``y_true`` or ``y_pred`` of a counted sample, whatever
        its weight (scikit-learn's "present labels").
    invalid : int
        Samples skipped because a label was out of range (only with
        ``validate=False``; with validation such input raises instead).
    linear_disagreement, quadratic_disagreement : 0-d array or None
        ``sum_n w_n |t_n - p_n|`` and ``sum_n w_n (t_n - p_n)**2`` over class
        positions; only filled when weighted kappa asks for them.
    misclassified : 0-d array or None
        ``sum_n w_n [t_n != p_n]``, summed by the counting pass itself (the
        count type of the others). ``total - sum(true_positives)`` loses it
        when one class holds nearly all the weight: a misclassified weight
        below the rounding of that class's float64 counts is absorbed by them.
        None where a state does not carry it (the difference is used then).
    negatives : (K,) array or None
        Weight of the samples whose true class is not k, set by :meth:`take`
        (the classes left out still count); None: the other classes' supports.
    """

    true_positives: Any
    support: Any
    predicted: Any
    total: Any
    observed: Any
    invalid: int = 0
    linear_disagreement: Any = None
    quadratic_disagreement: Any = None
    misclassified: Any = None
    negatives: Any = None

    @property
    def num_classes(self) -> int:
        return int(self.support.shape[0])

    def take(self, classes) -> ClassStatistics:
        """Restrict the per-class arrays to ``classes`` (in that order).

        Totals are kept: this is scikit-learn's ``labels=`` for set-wise metrics
        (precision, recall, F, Jaccard), whose per-class counts come from all
        samples; so are each class's negatives, from every other class. The
        kappa disagreements do not survive a selection.
        """
        negatives = self.negatives
        if negatives is None:
            negatives = sum_of_others(self.support, _namespace(self.support))
        return replace(
            self,
            true_positives=self.true_positives[classes],
            support=self.support[classes],
            predicted=self.predicted[classes],
            observed=self.observed[classes],
            linear_disagreement=None,
            quadratic_disagreement=None,
            misclassified=None,
            negatives=negatives[classes],
        )

    def merge(self, other: ClassStatistics) -> ClassStatistics:
        """State of the union of two disjoint samples."""
        if self.num_classes != other.num_classes:
            raise ValueError(
                f"cannot merge statistics of {self.num_classes} and "
                f"{other.num_classes} classes"
            )

        def add(a, b):
            return None if a is None or b is None else a + b

        return ClassStatistics(
            true_positives=self.true_positives + other.true_positives,
            support=self.support + other.support,
            predicted=self.predicted + other.predicted,
            total=self.total + other.total,
            observed=self.observed | other.observed,
            invalid=self.invalid + other.invalid,
            linear_disagreement=add(self.linear_disagreement, other.linear_disagreement),
            quadratic_disagreement=add(
                self.quadratic_disagreement, other.quadratic_disagreement
            ),
            misclassified=add(self.misclassified, other.misclassified),
            negatives=add(self.negatives, other.negatives),
        )


def sum_of_others(values, xp):
    """``sum_{j != k} values_j`` for each k, as the sum of the values before k
    plus the sum of those after it (non-negative terms only: exactly 0 when
    the others are 0, and no cancellation against ``values_k``)."""
    values = xp.asarray(values, dtype=xp.float64)
    return exclusive_cumsum(values, xp) + exclusive_cumsum(values[::-1], xp)[::-1]


def exclusive_cumsum(values, xp):
    """``sum_{j < k} values_j`` for each k (the first is 0), along the first axis."""
    values = xp.asarray(values, dtype=xp.float64)
    return xp.concatenate([xp.zeros((1,) + values.shape[1:]),
                           xp.cumsum(values[:-1], axis=0)])[:values.shape[0]]


def _namespace(array):
    """NumPy for host arrays, CuPy for device ones (without importing it otherwise)."""
    if isinstance(array, (np.ndarray, np.generic)):
        return np
    import cupy

    return cupy


def off_diagonal_sum(matrix, xp):
    """Sum of the cells off the diagonal of a square matrix, without forming
    ``matrix.sum() - trace`` (which cancels when the diagonal holds nearly
    everything): the flat matrix past its first cell, as rows of K + 1, holds
    the K cells between two diagonal cells in each row's first K columns."""
    k = matrix.shape[0]
    if k < 2:
        return matrix.reshape(-1)[:0].sum()
    return xp.ascontiguousarray(matrix).reshape(-1)[1:].reshape(k - 1, k + 1)[:, :k].sum()


def statistics_from_matrix(matrix, observed, xp, *, invalid: int = 0,
                           moments: bool = False, selected=None) -> ClassStatistics:
    """Reduce a dense confusion matrix to :class:`ClassStatistics`.

    The misclassified weight is the sum of the cells off the diagonal; with
    ``moments=True`` the kappa disagreement moments are computed with the
    matrix's own row/column indices as class positions (O(K^2) work); with a
    boolean ``selected`` mask, both run over the selected rows and columns
    only, with their ranks among the selected classes as positions.
    """
    support = matrix.sum(axis=1)
    chosen_cells = matrix
    if selected is not None:
        chosen = xp.asarray(selected, dtype=bool)
        chosen_cells = xp.where(chosen[:, None] & chosen[None, :], matrix, 0)
    stats = ClassStatistics(
        true_positives=xp.diagonal(matrix).copy(),
        support=support,
        predicted=matrix.sum(axis=0),
        # The sum of the supports, as on the statistics path: then a class that
        # holds every sample has exactly 0 negatives, whatever the weights.
        total=support.sum(),
        observed=observed,
        invalid=invalid,
        misclassified=off_diagonal_sum(chosen_cells, xp),
    )
    if not moments:
        return stats
    positions = xp.arange(matrix.shape[0], dtype=xp.float64)
    weighted = matrix.astype(xp.float64, copy=False)
    if selected is not None:
        chosen = xp.asarray(selected, dtype=bool)
        positions = xp.cumsum(chosen) - 1.0
        weighted = xp.where(chosen[:, None] & chosen[None, :], weighted, 0.0)
    distance = xp.abs(positions[:, None] - positions[None, :])
    return replace(
        stats,
        linear_disagreement=(weighted * distance).sum(),
        quadratic_disagreement=(weighted * distance * distance).sum(),
    )


# -- score sums: the state of the fused pass over (N, K) scores ---------------

# Fixed slots of the score-sum buffer; then one slot per k of top_k (weighted
# hits), then the calibration bins: weight, confidence sum, correct sum (each
# n_bins long). kernels/scores.cu writes the same layout (enum ScoreSlot;
# tests/test_kernel_interface.py holds the two to each other).
SCORE_SLOTS = (
    "weight",       # sum of w over counted rows
    "correct",      # sum of w [argmax == t] (ties to the lowest index, as numpy.argmax)
    "nll",          # sum of w * -log p_t (softmax of logits, or clipped probabilities)
    "brier",        # sum of w * sum_j (p_j - [j == t])^2
    "hinge",        # sum of w * max(0, 1 - (z_t - max_{j != t} z_j)) (Crammer-Singer)
    "one_vs_all",   # sum of w * (sum_j softplus(z_j) - z_t) (CatBoost MultiClassOneVsAll * K)
    "invalid",      # rows whose target is out of range (counted, never indexed)
)
SCORE_SLOT = {name: index for index, name in enumerate(SCORE_SLOTS)}


def stream_count_cells(k: int) -> int:
    """Cells of a streaming state's ``counts``: true positives, support and
    predicted counts (K each), the total, and the misclassified weight
    (kernels/streaming.cu writes the same layout)."""
    return 3 * k + 2


def stream_total_cell(k: int) -> int:
    """The cell of a streaming state's ``counts`` that holds the total (its
    bound against 2**63 - 1 is read there)."""
    return 3 * k


def score_sums_size(num_top_k: int, n_bins: int) -> int:
    return len(SCORE_SLOTS) + num_top_k + 3 * n_bins


@dataclass(frozen=True)
class ScoreSums:
    """Weighted sums of one read of ``(N, K)`` scores: every score metric's state.

    ``buffer`` is one float64 vector (layout :data:`SCORE_SLOTS`, then top-k
    hits, then the bins) on the backend's device; sums of two passes add.
    """

    buffer: Any
    top_k: tuple
    n_bins: int
    num_classes: int
    from_logits: bool

    def slot(self, name: str):
        return self.buffer[SCORE_SLOT[name]]

    @property
    def top_k_hits(self):
        start = len(SCORE_SLOTS)
        return self.buffer[start:start + len(self.top_k)]

    def bins(self):
        """``(weight, confidence sum, correct sum)`` per calibration bin."""
        start = len(SCORE_SLOTS) + len(self.top_k)
        b = self.n_bins
        return (self.buffer[start:start + b], self.buffer[start + b:start + 2 * b],
                self.buffer[start + 2 * b:start + 3 * b])
