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

Every metric is a formula over those counts. Precision, recall, F and
Jaccard take the multiclass path's formulas and its one ``zero_division``
rule (:mod:`metrics_gpu._formulas`), over a :class:`~metrics_gpu._formulas.Counts`
built from these counts (:meth:`MultilabelCounts.label_counts`,
:meth:`MultilabelCounts.sample_counts`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from metrics_gpu import _formulas as F
from metrics_gpu._validation import MultilabelInputs


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
        tn = self._weighted(self.xp.full_like(self.sample_true, self.num_selected)) - tp - fp - fn
        return tp, fp, fn, tn


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


def multilabel_counts(inputs: MultilabelInputs, columns=None) -> MultilabelCounts:
    """:class:`MultilabelCounts` of ``inputs``; ``columns`` (label indices,
    host) selects the labels of the per-label and per-sample set counts
    (subset accuracy and Hamming loss always read every label)."""
    xp = inputs.backend.xp
    true, pred = inputs.y_true, inputs.y_pred
    sample_errors = None
    if columns is not None:
        sample_errors = _cell_counts(true != pred, xp, columns=False)[0]
        index = xp.asarray(columns)
        true, pred = true[:, index], pred[:, index]
    both = true & pred
    weight = inputs.sample_weight
    unweighted = weight is None
    sample_intersection, tp = _cell_counts(both, xp, unweighted)
    sample_true, true_sum = _cell_counts(true, xp, unweighted)
    sample_pred, pred_sum = _cell_counts(pred, xp, unweighted)
    if sample_errors is None:  # every label: |true xor pred| from the three counts
        sample_errors = sample_true + sample_pred - 2 * sample_intersection
    if weight is None:
        total = true.shape[0]
    else:
        # float64 whatever the weights' type, as scikit-learn's per-label sums
        weight64 = weight.astype(xp.float64)
        tp, true_sum, pred_sum = (weight64 @ m.astype(xp.float64) for m in (both, true, pred))
        total = weight64.sum()
    fp, fn = pred_sum - tp, true_sum - tp
    return MultilabelCounts(
        tp=tp, fp=fp, fn=fn, tn=total - tp - fp - fn,
        sample_intersection=sample_intersection, sample_true=sample_true,
        sample_pred=sample_pred, sample_errors=sample_errors, sample_weight=weight,
        num_selected=int(true.shape[1]), num_labels=int(inputs.y_true.shape[1]), xp=xp,
    )


# -- formulas over the counts -----------------------------------------------------


def confusion_matrices(c: MultilabelCounts, samplewise: bool = False):
    """``(n_outputs, 2, 2)`` ``[[tn, fp], [fn, tp]]`` per label (per sample
    with ``samplewise``), as ``sklearn.metrics.multilabel_confusion_matrix``."""
    tp, fp, fn, tn = c.samplewise() if samplewise else (c.tp, c.fp, c.fn, c.tn)
    return c.xp.stack([tn, fp, fn, tp], axis=1).reshape(-1, 2, 2)


def exact_matches(c: MultilabelCounts, normalize: bool = True):
    """Subset accuracy: the fraction (``normalize=False``: the number or
    weight) of samples whose every label is right."""
    correct = (c.sample_errors == 0).astype(c.xp.float64)
    matched = c._weighted(correct).sum()
    return matched / c.total_weight() if normalize else matched


def exact_mismatches(c: MultilabelCounts, normalize: bool = True):
    """The zero-one loss: the fraction (number, weight) of samples with a wrong label."""
    if normalize:
        return 1 - exact_matches(c)
    return c.total_weight() - exact_matches(c, normalize=False)


def hamming_loss(c: MultilabelCounts):
    """The fraction of wrong labels, over all N x L (weighted: scikit-learn's
    sum(w * wrong) / (N * L * mean(w)))."""
    wrong = c._weighted(c.sample_errors).sum()
    mean_weight = 1.0 if c.sample_weight is None else c.sample_weight.mean()
    return wrong / (c.num_samples * c.num_labels * mean_weight)
