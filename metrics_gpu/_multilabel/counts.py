"""Multilabel-indicator input: one count structure, and the formulas over it.

``y_true`` and ``y_pred`` are ``(N, L)`` 0/1 matrices (scikit-learn's
"multilabel-indicator", detected in :mod:`metrics_gpu._validation`). One
vectorized pass over them (:func:`multilabel_counts`, written against the
array namespace ``xp``, so that CuPy arrays are counted where they live)
gives:

* per label: tp, fp, fn, tn, weighted by ``sample_weight``
  (:func:`multilabel_confusion_matrix` and every per-label average);
* per sample: |true & pred|, |true|, |pred|, |true | pred| over the selected
  labels (``average="samples"``), and the number of wrong labels over all of
  them (subset accuracy, zero-one and Hamming loss).

A cell of ``y_true`` equal to ``ignore_index`` counts nowhere, as
:class:`~metrics_gpu.MultilabelMetrics` leaves it out: in no label's tp, fp,
fn or tn, in no sample's sets (its rates are over its other cells), and not
in the Hamming loss's cells; a sample whose other cells all match is an exact
match (one whose cells are all ignored too: its rates are 0/0). Its weight
counts in every average over samples.

On a kernel backend (CUDA, emulated) the same sums come from one launch of
``kernels/multilabel.cu`` (:func:`kernel_totals`): per label tp, fp, fn, tn
and, in place of the per-sample counts, their sums over rows
(:class:`MultilabelTotals`: subset accuracy, Hamming loss and each set-wise
rate's ``average="samples"``), read back as O(L) numbers; only
``samplewise=True`` (one matrix per sample) keeps the per-sample arrays.

Every metric is a formula over those counts. Precision, recall, F and
Jaccard take the multiclass path's formulas and its one ``zero_division``
rule (:mod:`metrics_gpu._formulas.labels`), over a :class:`~metrics_gpu._formulas.labels.Counts`
built from these counts (:meth:`MultilabelCounts.label_counts`,
:meth:`MultilabelCounts.sample_counts`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from metrics_gpu._formulas import labels as F
from metrics_gpu._validation import MultilabelInputs
from metrics_gpu._multilabel.inputs import _ignore_value, kernel_input
from metrics_gpu.backends.launchers.multilabel import (
    CHECK_SLOTS,
    NO_ROW,
    PREDICTION_MODES,
    ROW,
    ROW_SLOTS,
    WEIGHT_DTYPES,
    refused_arguments,
)


@dataclass(frozen=True)
class MultilabelCounts:
    """The sufficient statistics of multilabel input, from one pass.

    Per-label counts are int64 without weights, float64 with weights, as
    scikit-learn's ``multilabel_confusion_matrix``; per-sample counts are
    unweighted int64 (the weights are kept beside them).
    """

    tp: Any  # (L',) per selected label, weighted
    fp: Any
    fn: Any
    tn: Any
    sample_intersection: Any  # (N,) |true & pred| over the selected labels
    sample_true: Any  # (N,) |true|
    sample_pred: Any  # (N,) |pred|
    sample_errors: Any  # (N,) labels wrong, over all L labels
    sample_weight: Any  # (N,) or None
    num_selected: int  # L', the labels selected
    num_labels: int  # L, all labels
    xp: Any
    # With ignored cells (ignore_index): the cells counted in each row, over
    # the selected labels and over all L; None: every cell counts.
    sample_cells: Any = None
    row_cells: Any = None

    @property
    def num_samples(self) -> int:
        return int(self.sample_errors.shape[0])

    @property
    def sample_union(self):
        return self.sample_true + self.sample_pred - self.sample_intersection

    def _weighted(self, per_sample):
        """Per-sample counts times each sample's weight (scikit-learn's
        ``samplewise`` counts)."""
        return per_sample if self.sample_weight is None else per_sample * self.sample_weight

    def on_host(self, backend) -> MultilabelCounts:
        """These counts as NumPy arrays (on a GPU, one copy of O(L + N) numbers)."""
        if self.xp is np:
            return self
        arrays: dict[str, Any] = {name: None if value is None else np.asarray(backend.to_host(value))
                  for name, value in vars(self).items()
                  if name not in ("num_selected", "num_labels", "xp")}
        return replace(self, xp=np, **arrays)

    def total_weight(self):
        """N, or the summed weights."""
        return self.num_samples if self.sample_weight is None else self.sample_weight.sum()

    def matched_weight(self):
        """The number (weight) of samples whose every label is right."""
        return self._weighted((self.sample_errors == 0).astype(self.xp.float64)).sum()

    def wrong_cells(self):
        """The wrong labels, each weighted by its sample's weight."""
        return self._weighted(self.sample_errors).sum()

    def cells(self):
        """N x L, weighted: scikit-learn's N L mean(w); with ignored cells,
        the counted cells, each weighted by its sample's weight."""
        if self.row_cells is not None:
            return self._weighted(self.row_cells).sum()
        mean_weight = 1.0 if self.sample_weight is None else self.sample_weight.mean()
        return self.num_samples * self.num_labels * mean_weight

    def label_counts(self) -> F.Counts:
        """Per selected label, as the multiclass formulas read them."""
        return _as_counts(self.tp, self.fp, self.fn, self.tn, self.xp)

    def sample_counts(self) -> F.Counts:
        """Per sample (weighted, as scikit-learn's ``samplewise``), as the
        multiclass formulas read them."""
        tp, fp, fn, tn = self.samplewise()
        return _as_counts(tp, fp, fn, tn, self.xp)

    def samplewise(self):
        """``(tp, fp, fn, tn)`` of each sample over the selected labels."""
        tp = self._weighted(self.sample_intersection)
        fp = self._weighted(self.sample_pred - self.sample_intersection)
        fn = self._weighted(self.sample_true - self.sample_intersection)
        cells = self.xp.full_like(self.sample_true, self.num_selected) \
            if self.sample_cells is None else self.sample_cells
        tn = self._weighted(cells) - tp - fp - fn
        return tp, fp, fn, tn


# The set-wise rates of a sample (``average="samples"``): the row-sum slots of
# kernels/multilabel.cu holding the weighted sum of the defined values, and
# the number of rows where the rate is 0/0.
SAMPLE_RATE_SLOTS = {"precision": ("precision", "rows_no_predicted"),
                     "recall": ("recall", "rows_no_true"),
                     "f_score": ("f_score", "rows_no_labels"),
                     "jaccard": ("jaccard", "rows_no_labels")}


def f_score_rate(beta: float) -> str:
    """The sample rate F-beta is: recall for beta = inf, precision for beta = 0."""
    return "recall" if math.isinf(beta) else "precision" if beta == 0 else "f_score"


def samples_mean(defined_sum: float, defined_weight: float, weight: float,
                 zero_division: float) -> np.float64:
    """The weighted mean over rows of a rate whose 0/0 rows take
    ``zero_division`` (NaN: those rows are left out of the mean), from the
    sums over rows: of the defined values (weighted), of the defined rows'
    weights, of all weights."""
    if math.isnan(zero_division):
        return np.float64(defined_sum / defined_weight if defined_weight > 0 else math.nan)
    return np.float64((defined_sum + zero_division * (weight - defined_weight)) / weight
                      if weight > 0 else math.nan)


@dataclass(frozen=True)
class MultilabelTotals:
    """The sums of one pass of ``kernels/multilabel.cu`` on the host: per
    selected label tp, fp, fn, tn (int64 without weights, float64 with
    them), and the sums over rows (``ROW_SLOTS``) in place of
    :class:`MultilabelCounts`' per-sample arrays. ``inputs`` and ``columns``
    are kept for the one case the sums cannot answer (:meth:`samples_rate`)."""

    tp: Any
    fp: Any
    fn: Any
    tn: Any
    rows: Any  # (len(ROW_SLOTS),) float64
    num_selected: int
    num_labels: int
    inputs: MultilabelInputs
    columns: Any
    beta: float  # the F-score's whose row values are summed
    xp: Any = np

    @property
    def num_samples(self) -> int:
        return int(self._row("rows"))

    def _row(self, name: str) -> float:
        return self.rows[ROW[name]]

    def on_host(self, backend) -> MultilabelTotals:
        return self

    def label_counts(self) -> F.Counts:
        return _as_counts(self.tp, self.fp, self.fn, self.tn, np)

    def total_weight(self):
        return self._row("weight")

    def matched_weight(self):
        return self._row("exact")

    def wrong_cells(self):
        return self._row("wrong_cells")

    def cells(self):
        return self._row("counted_cells")

    def samples_rate(self, rate: str, zero_division) -> tuple[np.float64, int] | None:
        """``(the weighted mean over samples of ``rate``, the number of
        samples where it is 0/0)``, ``zero_division`` "warn" read as 0; None
        where the sums cannot give scikit-learn's value: ``zero_division``
        NaN with the defined samples all of weight 0 (its mean is then the
        unweighted one)."""
        value_slot, undefined_slot = SAMPLE_RATE_SLOTS[rate]
        undefined = int(self._row(undefined_slot))
        defined_weight = self._row(value_slot + "_defined")
        zero = 0.0 if zero_division == "warn" else float(zero_division)
        if math.isnan(zero) and defined_weight == 0 and undefined < self._row("rows"):
            return None
        return samples_mean(self._row(value_slot), defined_weight, self.total_weight(),
                            zero), undefined

    def per_row_counts(self) -> MultilabelCounts:
        """The per-sample counts of the same input (a second pass)."""
        return multilabel_counts(self.inputs, self.columns).on_host(self.inputs.backend)


def _as_counts(tp, fp, fn, tn, xp) -> F.Counts:
    f64 = xp.float64
    tp, fp, fn, tn = (xp.asarray(a, dtype=f64) for a in (tp, fp, fn, tn))
    return F.Counts(tp=tp, support=tp + fn, predicted=tp + fp, total=(tp + fp + fn + tn).sum(),
                    xp=xp, negatives=tn + fp, misclassified=(fp + fn).sum())


# Float32 sums of 0/1 cells are exact while every partial sum is below 2**24.
_EXACT_FLOAT32_COUNT = 1 << 24
# Rows of at most this many labels are counted by BLAS (NumPy's integer sums
# along rows pay per row: 3x slower at L = 10 on 1e6 rows); longer rows by
# NumPy, which then wins (1.7x at L = 100: no float32 copy).
_BLAS_COUNT_LABELS = 32


def _cell_counts(mask, xp, columns: bool):
    """``(per row, per column or None)`` counts of the True cells of a bool
    (N, L) matrix, int64. Short rows: float32 matrix-vector products over one
    float32 copy (exact: every partial sum is an integer below 2**24, the
    rows taken in blocks of fewer), which BLAS runs several times faster
    than NumPy's integer sums along short rows."""
    rows, num_labels = mask.shape
    if num_labels > _BLAS_COUNT_LABELS:
        return (mask.sum(axis=1, dtype=xp.int64),
                mask.sum(axis=0, dtype=xp.int64) if columns else None)
    cells = mask.astype(xp.float32)
    per_row = (cells @ xp.ones(num_labels, dtype=xp.float32)).astype(xp.int64)
    if not columns:
        return per_row, None
    per_column = xp.zeros(num_labels, dtype=xp.int64)
    step = _EXACT_FLOAT32_COUNT - 1
    for begin in range(0, rows, step):
        block = cells[begin:begin + step]
        per_column += (xp.ones(block.shape[0], dtype=xp.float32) @ block).astype(xp.int64)
    return per_row, per_column


def counts_of(inputs: MultilabelInputs, columns=None, *, beta: float = 1.0,
              per_row: bool = False) -> MultilabelCounts | MultilabelTotals:
    """The counts of ``inputs`` as their backend computes them: one kernel
    launch on a kernel backend (:func:`kernel_totals`), unless ``per_row``
    (the per-sample arrays themselves are asked for); NumPy's BLAS counts
    (:func:`multilabel_counts`) otherwise."""
    if per_row or inputs.backend.name == "numpy":
        return multilabel_counts(inputs, columns)
    return kernel_totals(inputs, columns, beta=beta)


def kernel_totals(inputs: MultilabelInputs, columns=None, *, beta: float = 1.0
                  ) -> MultilabelTotals:
    """:class:`MultilabelTotals` of ``inputs`` from one launch of
    ``kernels/multilabel.cu`` over the labels ``columns`` (host indices; None:
    all), read back in one copy; ``beta`` is the F-score's (its row sums).
    Scores (``inputs.mode``) are cut in the kernel, not copied as a mask.

    The state starts as one host block (the first left-out row is all ones),
    sent in one copy. Rows the kernel leaves out (only weights can be, past
    the checks: weights or scores with ``validate=False``) are an error,
    never dropped."""
    backend = inputs.backend
    true, pred = inputs.y_true, inputs.y_pred
    if columns is not None:
        index = backend.asarray(np.asarray(columns, dtype=np.int64))
        true, pred = true[:, index], pred[:, index]
    true, true_code = kernel_input(true, backend, "y_true")
    pred, pred_code = kernel_input(pred, backend, "y_pred")
    ignore = None if inputs.ignore_index is None else _ignore_value(inputs.ignore_index,
                                                                     true.dtype)
    weight = inputs.sample_weight
    if weight is not None and weight.dtype.name not in WEIGHT_DTYPES:
        weight = weight.astype(np.float64)
    num_selected = int(true.shape[1])
    count_end = 4 * num_selected
    row_end = count_end + len(ROW_SLOTS)
    state = np.zeros(row_end + CHECK_SLOTS, np.uint64)
    state[row_end + 1] = NO_ROW
    block = backend.asarray(state)
    counts = block[:count_end]
    backend.multilabel_update(
        true, true_code, pred, pred_code, weight, mode=PREDICTION_MODES[inputs.mode],
        cut=inputs.cut,
        ignore=ignore, f_beta2=beta * beta if f_score_rate(beta) == "f_score" else 1.0,
        row_offset=0, counts=counts if weight is None else counts.view(np.float64),
        row_sums=block[count_end:row_end].view(np.float64), checks=block[row_end:])
    host = np.asarray(backend.to_host(block))
    left_out, first, reasons = (int(v) for v in host[row_end:])
    if left_out:
        arguments = " and ".join(refused_arguments(reasons))
        raise ValueError(
            f"{arguments.replace('preds', 'y_pred')}: {left_out} row(s) hold a value this "
            f"function refuses, the first is row {first} (weights must be finite and >= 0, "
            "probabilities in [0, 1], logits finite; validate=False does not check them "
            "beforehand)")
    per_label = host[:count_end].view(np.float64) if weight is not None else \
        host[:count_end].astype(np.int64)
    tp, fp, fn, tn = per_label.reshape(4, num_selected)
    return MultilabelTotals(tp=tp, fp=fp, fn=fn, tn=tn,
                            rows=host[count_end:row_end].view(np.float64).copy(),
                            num_selected=num_selected, num_labels=inputs.num_labels,
                            inputs=inputs, columns=columns, beta=beta)


def multilabel_counts(inputs: MultilabelInputs, columns=None) -> MultilabelCounts:
    """:class:`MultilabelCounts` of ``inputs``; ``columns`` (label indices,
    host) selects the labels of the per-label and per-sample set counts
    (subset accuracy and Hamming loss always read every label). Ignored
    cells (``inputs.ignore_index``) are False in both masks, and left out
    of the cells each label and row counts (its tn)."""
    xp = inputs.backend.xp
    true, pred = inputs.masks()
    counted = inputs.counted()
    sample_errors = row_cells = None
    if counted is not None:
        row_cells = _cell_counts(counted, xp, columns=False)[0]
    if columns is not None:
        sample_errors = _cell_counts(true != pred, xp, columns=False)[0]
        index = xp.asarray(columns)
        true, pred = true[:, index], pred[:, index]
        counted = None if counted is None else counted[:, index]
    both = true & pred
    weight = inputs.sample_weight
    unweighted = weight is None
    sample_intersection, tp = _cell_counts(both, xp, unweighted)
    sample_true, true_sum = _cell_counts(true, xp, unweighted)
    sample_pred, pred_sum = _cell_counts(pred, xp, unweighted)
    sample_cells = None
    if counted is not None:
        sample_cells, label_cells = _cell_counts(counted, xp, unweighted)
    if sample_errors is None:  # every label: |true xor pred| from the three counts
        sample_errors = sample_true + sample_pred - 2 * sample_intersection
    if weight is None:
        total = true.shape[0] if counted is None else label_cells
    else:
        # float64 whatever the weights' type, as scikit-learn's per-label sums
        weight64 = weight.astype(xp.float64)
        tp, true_sum, pred_sum = (weight64 @ m.astype(xp.float64) for m in (both, true, pred))
        total = weight64.sum() if counted is None else weight64 @ counted.astype(xp.float64)
    fp, fn = pred_sum - tp, true_sum - tp
    return MultilabelCounts(
        tp=tp, fp=fp, fn=fn, tn=total - tp - fp - fn,
        sample_intersection=sample_intersection, sample_true=sample_true,
        sample_pred=sample_pred, sample_errors=sample_errors, sample_weight=weight,
        num_selected=int(true.shape[1]), num_labels=int(inputs.y_true.shape[1]), xp=xp,
        sample_cells=sample_cells, row_cells=row_cells,
    )


# -- formulas over the counts -----------------------------------------------------


def confusion_matrices(c: MultilabelCounts | MultilabelTotals, samplewise: bool = False):
    """``(n_outputs, 2, 2)`` ``[[tn, fp], [fn, tp]]`` per label (per sample
    with ``samplewise``), as ``sklearn.metrics.multilabel_confusion_matrix``."""
    if samplewise:
        assert isinstance(c, MultilabelCounts), "samplewise needs the per-sample counts"
        tp, fp, fn, tn = c.samplewise()
    else:
        tp, fp, fn, tn = c.tp, c.fp, c.fn, c.tn
    return c.xp.stack([tn, fp, fn, tp], axis=1).reshape(-1, 2, 2)


def exact_matches(c: MultilabelCounts | MultilabelTotals, normalize: bool = True):
    """Subset accuracy: the fraction (``normalize=False``: the number or
    weight) of samples whose every label is right."""
    matched = c.matched_weight()
    return matched / c.total_weight() if normalize else matched


def exact_mismatches(c: MultilabelCounts | MultilabelTotals, normalize: bool = True):
    """The zero-one loss: the fraction (number, weight) of samples with a wrong label."""
    if normalize:
        return 1 - exact_matches(c)
    return c.total_weight() - exact_matches(c, normalize=False)


def hamming_loss(c: MultilabelCounts | MultilabelTotals):
    """The fraction of wrong labels, over all N x L (weighted: scikit-learn's
    sum(w * wrong) / (N * L * mean(w))); over the cells kept where some are
    ignored, NaN where none is (as :class:`~metrics_gpu.MultilabelMetrics`)."""
    cells = c.cells()
    return c.wrong_cells() / cells if cells > 0 else np.float64(math.nan)
