"""Every metric formula, once, over the accumulated counts and an array namespace.

The backends produce :class:`~metrics_gpu._formulas.state.ClassStatistics`; this module
turns them into numbers. The functional API, the report, the command line and
the seed entry points all call these functions, each with its own convention
where the sources differ (zero division, macro F), passed as arguments rather
than written again.

Notation (per class k): ``tp`` true positives, ``fp = predicted - tp``,
``fn = support - tp``, ``negatives`` the other classes' supports,
``tn = negatives - fp``.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from dataclasses import dataclass, replace
from types import FrameType
from typing import Any, Callable, get_args

import numpy as np

from metrics_gpu._formulas.state import ClassStatistics, ScoreSums, exclusive_cumsum, sum_of_others
from metrics_gpu._common.types import CalibrationNorm


class UndefinedMetricWarning(UserWarning):
    """A metric is ill-defined (a zero denominator) and was set by convention."""


@dataclass(frozen=True)
class Counts:
    """Float64 view of :class:`ClassStatistics` with the derived fp/fn/tn.

    ``negatives`` (per class) and ``misclassified`` are sums of their own
    terms, not differences of larger sums: a class that holds every sample
    has exactly 0 negatives whatever order float weights were added in (where
    ``total - support`` may be a rounding residue of either sign), and a
    misclassified weight below the rounding of a dominant class's counts is
    not lost.

    ``correct`` (the sum of the true positives) and, over every class (no
    selection: ``negatives`` not given), ``total`` (the sum of the supports)
    are one reduction of the two stacked: the same additions in the same
    order over terms with tp_k <= support_k, so that correct <= total
    whatever the float weights (rounding is monotone), and accuracy, the
    losses and the rates stay in their range. A total counted apart (the
    streaming state's cell) can round below the correct weight.
    """

    tp: Any
    support: Any
    predicted: Any
    total: Any
    xp: Any
    negatives: Any
    misclassified: Any
    correct: Any = None

    def __post_init__(self):
        if self.correct is None:  # counts made otherwise (multilabel): tp summed here
            object.__setattr__(self, "correct", self.tp.sum(axis=0))

    @classmethod
    def from_statistics(cls, stats: ClassStatistics, xp) -> Counts:
        f64 = xp.float64
        tp = stats.true_positives.astype(f64)
        support = stats.support.astype(f64)
        correct, supports = xp.stack([tp, support]).sum(axis=1)
        if stats.negatives is None:
            total, negatives = supports, sum_of_others(support, xp)
        else:  # selected classes (ClassStatistics.take): every class's total
            total = xp.asarray(stats.total, dtype=f64)
            negatives = xp.asarray(stats.negatives, dtype=f64)
        # A weight, so at least 0: made as a total less the correct weight
        # (selected classes; a stream's groups: -4.4e-16 for all-correct rows
        # of float weights), it can round below 0, and kappa then passed 1.
        misclassified = xp.maximum(
            total - correct if stats.misclassified is None
            else xp.asarray(stats.misclassified, dtype=f64), 0.0)
        return cls(tp=tp, support=support, predicted=stats.predicted.astype(f64), total=total,
                   xp=xp, negatives=negatives, misclassified=misclassified, correct=correct)

    @property
    def fp(self):
        return self.predicted - self.tp

    @property
    def fn(self):
        return self.support - self.tp

    @property
    def tn(self):
        """The other classes' weight not predicted as k, at least 0 (fp, a
        difference of sums, can round above the negatives)."""
        return self.xp.maximum(self.negatives - self.fp, 0.0)


def inner(a, b, xp):
    """``sum_k a_k b_k`` over the first (class) axis: a dot product for (K,)
    arrays, one per column for the (K, B) arrays of bootstrap replicates."""
    if getattr(a, "ndim", 1) <= 1 and getattr(b, "ndim", 1) <= 1:
        return xp.dot(a, b)
    return (a * b).sum(axis=0)


# -- zero division and averaging ----------------------------------------------


def divide(numerator, denominator, xp, zero_division: Any = float("nan")):
    """``numerator / denominator`` with 0/0 (any x/0) set to ``zero_division``.

    ``zero_division`` is a number (NaN = no guard, the oneDAL convention) or
    ``"warn"`` (0.0, as scikit-learn). Returns ``(result, zero_mask)``.
    """
    numerator = xp.asarray(numerator, dtype=xp.float64)
    denominator = xp.asarray(denominator, dtype=xp.float64)
    zero = denominator == 0
    fill = 0.0 if zero_division == "warn" else float(zero_division)
    result = numerator / xp.where(zero, 1.0, denominator)
    return xp.where(zero, fill, result), zero


_PACKAGE_DIRECTORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def normalized_confusion(cm, normalize: str, xp):
    """scikit-learn's ``normalize`` of a confusion matrix: over rows ("true"),
    columns ("pred") or everything ("all"); 0/0 is 0."""
    with np.errstate(all="ignore"):
        if normalize == "true":
            cm = cm / cm.sum(axis=1, keepdims=True)
        elif normalize == "pred":
            cm = cm / cm.sum(axis=0, keepdims=True)
        else:
            cm = cm / cm.sum()
    return xp.nan_to_num(cm)


def softmax_rows(z, xp):
    """Each row's softmax, exp(z - max z) / sum (the probabilities of logits)."""
    e = xp.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def binary_decisions(rows, from_logits: bool, cut: float, xp):
    """The classes a two-class state built with a threshold predicts for its
    ``(M, 2)`` score rows: 1 where the class-1 probability passes the
    threshold, read in float64 as the logits' margin ``z1 - z0`` (whose
    sigmoid is that probability) or as ``p1`` itself, against ``cut``
    (:func:`metrics_gpu._validation.score_cut`). The kernels' rule
    (kernels/streaming.cu, kCfgBinaryDecision)."""
    chosen = rows[:, 1].astype(np.float64)
    margin = chosen - rows[:, 0].astype(np.float64) if from_logits else chosen
    return xp.greater(margin, cut).astype(np.int64)


def defined_averages(per_class, positives):
    """``(macro, weighted)`` of a per-class ranking metric (NumPy): over the
    classes where it is defined (not NaN), weighted by their positives' weight."""
    per_class, positives = np.asarray(per_class), np.asarray(positives)
    defined = ~np.isnan(per_class)
    with _quiet(np):
        macro = per_class[defined].sum() / defined.sum()
        weighted = (positives[defined] * per_class[defined]).sum() / positives[defined].sum()
    return macro, weighted


def warn(message: str, category: type[Warning]) -> None:
    """``warnings.warn`` attributed to the first caller outside metrics_gpu,
    however deep in the package (and its decorators) the warning is raised."""
    frame: FrameType | None = sys._getframe(1)
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIRECTORY):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def warn_undefined(metric: str, modifier: str, n_values: int, samplewise: bool = False) -> None:
    """scikit-learn's UndefinedMetricWarning text for an ill-defined P/R/F/Jaccard
    (``samplewise``: values per sample, multilabel ``average="samples"``)."""
    counted, over = ("label", "sample") if samplewise else ("sample", "label")
    where = "due to" if n_values == 1 else f"in {over}s with"
    warn(
        f"{metric} is ill-defined and being set to 0.0 {where} no {modifier} {counted}s. "
        "Use `zero_division` parameter to control this behavior.",
        UndefinedMetricWarning,
    )


def _warn_prf_undefined(warn_for, undefined, n_values, samplewise: bool = False) -> None:
    """scikit-learn's warnings for precision, recall and F ill-defined by 0/0
    (``samplewise``: the values are per sample, multilabel ``average="samples"``)."""
    for metric, modifier, warn in zip(("precision", "recall", "f-score"),
                                      ("predicted", "true", "true nor predicted"), undefined):
        if metric in warn_for and warn:
            warn_undefined(metric.capitalize(), modifier, n_values, samplewise)


def class_mean(values, xp):
    """Mean over classes; NaN when there are none, without NumPy's empty-slice
    warning (which only ``warnings.catch_warnings``, a process-wide and not
    thread-safe switch, could silence)."""
    if values.shape[0]:
        return values.mean(axis=0)
    return xp.full(values.shape[1:], math.nan) if values.ndim > 1 else xp.float64(math.nan)


def nan_average(values, xp, weights=None):
    """Mean ignoring NaN entries; NaN if all are NaN (scikit-learn ``_nanaverage``).

    With weights summing to zero the plain mean is used, as scikit-learn does.
    """
    values = xp.asarray(values, dtype=xp.float64)
    if values.ndim > 1:
        return _nan_average_columns(values, xp, weights)
    if values.shape[0] == 0:
        return xp.float64(math.nan)
    keep = ~xp.isnan(values)
    if not bool(keep.any()):
        return xp.float64(math.nan)
    kept = values[keep]
    if weights is not None:
        kept_weights = xp.asarray(weights, dtype=xp.float64)[keep]
        weight_sum = kept_weights.sum()
        if weight_sum != 0:
            return (kept * kept_weights).sum() / weight_sum
    return kept.mean()


def _nan_average_columns(values, xp, weights=None):
    """:func:`nan_average` of each column of a (K, B) array (bootstrap replicates)."""
    keep = ~xp.isnan(values)
    kept = xp.where(keep, values, 0.0)
    count = keep.sum(axis=0)
    with _quiet(xp):
        mean = xp.where(count > 0, kept.sum(axis=0) / xp.maximum(count, 1), math.nan)
        if weights is None:
            return mean
        kept_weights = xp.where(keep, xp.asarray(weights, dtype=xp.float64), 0.0)
        weight_sum = kept_weights.sum(axis=0)
        weighted = (kept * kept_weights).sum(axis=0) / xp.where(weight_sum != 0, weight_sum, 1.0)
        return xp.where(weight_sum != 0, weighted, mean)


# -- per-class formulas ------------------------------------------------------


# Each rate is a (numerator, denominator) pair of count arrays, so that
# averaging code can sum them for 'micro' and see the zero denominators.
Terms = tuple[Any, Any]


def precision_terms(c: Counts) -> Terms:
    return c.tp, c.predicted


def recall_terms(c: Counts) -> Terms:
    return c.tp, c.support


def fbeta_terms(c: Counts, beta: float) -> Terms:
    """(1+b^2) tp / ((1+b^2) tp + b^2 fn + fp) = (1+b^2) tp / (b^2 support + predicted)."""
    beta2 = beta * beta
    return (1 + beta2) * c.tp, beta2 * c.support + c.predicted


def jaccard_terms(c: Counts) -> Terms:
    return c.tp, c.tp + c.fp + c.fn


def specificity_terms(c: Counts) -> Terms:
    """True negative rate tn / (tn + fp)."""
    return c.tn, c.negatives


def micro_rate(terms: Terms, xp, zero_division=float("nan")):
    """A rate of the summed counts: sum(numerator) / sum(denominator)."""
    numerator, denominator = terms
    return divide(numerator.sum(axis=0), denominator.sum(axis=0), xp, zero_division)[0]


def precision(c: Counts, zero_division=float("nan")):
    return divide(*precision_terms(c), c.xp, zero_division)[0]


def recall(c: Counts, zero_division=float("nan")):
    return divide(*recall_terms(c), c.xp, zero_division)[0]


def fbeta_from_counts(c: Counts, beta: float, zero_division=float("nan")):
    """F-beta from counts; beta = inf is recall and beta = 0 is precision, as scikit-learn."""
    if math.isinf(beta):
        return recall(c, zero_division)
    if beta == 0:
        return precision(c, zero_division)
    return divide(*fbeta_terms(c, beta), c.xp, zero_division)[0]


def fbeta_from_rates(p, r, beta: float, xp):
    """F-beta as the weighted harmonic mean of a precision and a recall.

    oneDAL's and pyActLearn's micro/macro F: (1+b^2) P R / (b^2 P + R).
    No guard: 0/0 is NaN, as in those sources.
    """
    beta2 = beta * beta
    p = xp.asarray(p, dtype=xp.float64)
    r = xp.asarray(r, dtype=xp.float64)
    with _quiet(xp):
        return (1 + beta2) * p * r / (beta2 * p + r)


def jaccard(c: Counts, zero_division=float("nan")):
    return divide(*jaccard_terms(c), c.xp, zero_division)[0]


def specificity(c: Counts, zero_division=float("nan")):
    return divide(*specificity_terms(c), c.xp, zero_division)[0]


def false_positive_rate(c: Counts, zero_division=float("nan")):
    return divide(c.fp, c.negatives, c.xp, zero_division)[0]


def class_accuracy(c: Counts):
    """One-vs-rest accuracy of each class: (tp + tn) / total, the total as
    (tp + tn) + (fp + fn), from the same cells (so at most 1)."""
    right, wrong = c.tp + c.tn, c.fp + c.fn
    return divide(right, right + wrong, c.xp)[0]


def class_error_rate(c: Counts):
    """One-vs-rest error of each class: (fp + fn) / total, the total as
    (tp + tn) + (fp + fn), from the same cells (so at most 1)."""
    right, wrong = c.tp + c.tn, c.fp + c.fn
    return divide(wrong, right + wrong, c.xp)[0]


def prevalence(c: Counts):
    return divide(c.support, c.total, c.xp)[0]


def g_measure(c: Counts, zero_division=0.0):
    """Geometric mean of precision and recall, sqrt(P R) (pyActLearn)."""
    return c.xp.sqrt(precision(c, zero_division) * recall(c, zero_division))


# -- averaged rates of counts (the functional API's and the multilabel stream's) --


def _prfs_of_counts(c: Counts, support, *, beta, average, warn_for, zero_division,
                    sample_weight=None):
    """:func:`metrics_gpu._functional.rates._prfs` of counts ``c`` (NumPy): per
    class or label, or with ``average="samples"`` per sample (multilabel;
    ``sample_weight`` then weighs the mean)."""

    def rate(terms):
        numerator, denominator = terms
        if average == "micro":
            numerator, denominator = numerator.sum(keepdims=True), denominator.sum(keepdims=True)
        return divide(numerator, denominator, np, zero_division)

    precision, p_zero = rate(precision_terms(c))
    recall, r_zero = rate(recall_terms(c))
    if math.isinf(beta) or beta == 0:
        # F is recall (precision) itself; scikit-learn warns only under that name.
        f_score = recall if beta else precision
        f_zero = np.zeros_like(p_zero)
    else:
        f_score, f_zero = rate(fbeta_terms(c, beta))
    if zero_division == "warn":
        _warn_prf_undefined(warn_for, (p_zero.any(), r_zero.any(), f_zero.any()), p_zero.size,
                            samplewise=average == "samples")
    if average is None:
        return precision, recall, f_score, support
    weights = (c.support if average == "weighted"
               else sample_weight if average == "samples" else None)
    return (
        np.float64(nan_average(precision, np, weights)),
        np.float64(nan_average(recall, np, weights)),
        np.float64(nan_average(f_score, np, weights)),
        None,
    )


def _averaged_rate(terms, name, modifier, c: Counts, *, average, zero_division,
                   sample_weight=None):
    """The rate ``terms`` of counts ``c`` (NumPy) per class, label or sample,
    averaged as asked (``sample_weight`` weighs ``average="samples"``)."""
    num, den = terms(c)
    if average == "micro":
        num, den = num.sum(keepdims=True), den.sum(keepdims=True)
    values, zero = divide(num, den, np, zero_division)
    if zero_division == "warn" and zero.any():
        warn_undefined(name, modifier, zero.size, samplewise=average == "samples")
    if average is None:
        return values
    weights = (c.support if average == "weighted"
               else sample_weight if average == "samples" else None)
    return nan_average(values, np, weights)


# -- overall formulas --------------------------------------------------------


def accuracy(c: Counts):
    """Fraction (or weight) of samples on the diagonal: sum(tp) / total (at
    most 1: see :class:`Counts`)."""
    return divide(c.correct, c.total, c.xp)[0]


def misclassified(c: Counts):
    """Weight of samples off the diagonal, as the counting pass summed it."""
    return c.misclassified


def balanced_accuracy(c: Counts, adjusted: bool = False):
    """Mean recall over classes that occur in y_true (scikit-learn).

    ``adjusted`` rescales so that chance scores 0: (score - 1/K') / (1 - 1/K'),
    K' the number of classes with support.
    """
    xp = c.xp
    per_class = recall(c)
    score = nan_average(per_class, xp)
    if adjusted:
        score = adjust_for_chance(score, (~xp.isnan(per_class)).sum(axis=0), xp)
    return score


def adjust_for_chance(score, n_scored, xp):
    """Balanced accuracy rescaled so that chance scores 0:
    (score - 1/K') / (1 - 1/K'), K' = ``n_scored`` classes with support (NaN if none)."""
    with _quiet(xp):
        chance = xp.where(xp.greater(n_scored, 0), 1.0 / xp.maximum(n_scored, 1), math.nan)
        return (score - chance) / (1 - chance)


def weighted_recall_average(c: Counts, class_weight=None):
    """sum_k w_k recall_k / sum_k w_k over classes with support.

    The overview paper's "balanced accuracy weighted". With the default
    weights (class frequency, support / total) it equals accuracy.
    """
    xp = c.xp
    weights = c.support if class_weight is None else xp.asarray(class_weight, dtype=xp.float64)
    return nan_average(recall(c), xp, weights=weights)


def matthews_corrcoef(c: Counts, zero_division: float = 0.0):
    """Multiclass MCC (Gorodkin's R_K) on the covariance form.

    (c s - sum t p) / sqrt((s^2 - sum p^2)(s^2 - sum t^2)) with c = sum(tp),
    s = total, t = support, p = predicted; ``zero_division`` when the
    denominator is 0 (scikit-learn and CatBoost: 0.0).

    Written without its differences of squares, which cancel when one class
    holds nearly all the weight: s^2 - sum p^2 = sum_{i != j} p_i p_j
    (likewise for t). The covariance has two forms whose terms split s^2
    between them (s^2 = c s + m s = sum t p + sum_{i != j} t_i p_j, m the
    misclassified weight): c s - sum t p, and sum_{i != j} t_i p_j - m s.
    Each cancels where its terms are near s^2 (the first when nearly all the
    weight is correct in one class, the second when nearly all of it is
    misclassified), so the one with the smaller terms is taken; its rounding
    is then at most about eps s^2 / 2 and often far less. A constant y_true
    (or y_pred) still gives exactly 0.
    """
    xp = c.xp
    # On weights scaled by the total's power of two (MCC does not change when
    # the weights are scaled): products of two weights neither overflow nor
    # underflow, and exact sums stay exact.
    scale = scaled_by_total(c.total, xp)
    t, p, s = scale(c.support), scale(c.predicted), scale(c.total)
    correct, misclassified = scale(c.correct), scale(c.misclassified)
    correct_terms = (correct * s, inner(t, p, xp))
    misclassified_terms = (unequal_pairs(t, p, xp), misclassified * s)
    cov_pp = unequal_pairs(p, p, xp)
    cov_tt = unequal_pairs(t, t, xp)
    if t.ndim > 1:
        # Bootstrap replicates (one per column): the same two forms, each
        # replicate taking its smaller one, in plain float64 sums (their
        # rounding is far below the replicates' spread).
        cov_tp = xp.where(xp.maximum(*correct_terms) <= xp.maximum(*misclassified_terms),
                          correct_terms[0] - correct_terms[1],
                          misclassified_terms[0] - misclassified_terms[1])
        return _correlation(cov_tp, cov_pp, cov_tt, xp, zero_division)
    # The chosen form's products and sums are evaluated exactly (error-free
    # transformations): with exact counts (integer weights below 2**53) the
    # covariance is then exact however much its terms cancel.
    if bool(xp.maximum(*correct_terms) <= xp.maximum(*misclassified_terms)):
        cov_tp = accurate_sum([*two_product(correct, s, xp), *two_product(-t, p, xp)], xp)
    else:
        cov_tp = accurate_sum([*two_product(p, exclusive_cumsum(t, xp), xp),
                               *two_product(t, exclusive_cumsum(p, xp), xp),
                               *two_product(-misclassified, s, xp)], xp)
    return _correlation(cov_tp, cov_pp, cov_tt, xp, zero_division)


def _correlation(cov_tp, cov_pp, cov_tt, xp, zero_division):
    """cov_tp / sqrt(cov_pp cov_tt), within [-1, 1] (a correlation: a perfect
    prediction's covariance may round a little above its variances)."""
    value = divide(cov_tp, xp.sqrt(cov_pp * cov_tt), xp, zero_division)[0]
    return xp.clip(value, -1.0, 1.0)


def two_product(a, b, xp):
    """``(a * b, its rounding error)``, both exact (Dekker's product with
    Veltkamp's split, no fused multiply-add): for values well inside float64's
    range, as weights scaled by scaled_by_total are."""
    a = xp.asarray(a, dtype=xp.float64)
    b = xp.asarray(b, dtype=xp.float64)
    split = 134217729.0  # 2**27 + 1
    a_big, b_big = split * a, split * b
    a_high = a_big - (a_big - a)
    b_high = b_big - (b_big - b)
    a_low, b_low = a - a_high, b - b_high
    product = a * b
    error = ((a_high * b_high - product) + a_high * b_low + a_low * b_high) + a_low * b_low
    return product, error


def accurate_sum(parts, xp):
    """The sum of every value of ``parts`` (arrays or scalars) to about one
    rounding of the result: a pairwise cascade of error-free additions
    (Knuth's TwoSum) whose errors are added at the end, so that large terms
    that cancel leave the small ones their digits (kernels/reduce_metrics.cu
    ``block_sum_exact``)."""
    values = xp.concatenate([xp.asarray(v, dtype=xp.float64).reshape(-1) for v in parts])
    errors = []
    while values.shape[0] > 1:
        if values.shape[0] % 2:
            values = xp.concatenate([values, xp.zeros(1)])
        a, b = values[0::2], values[1::2]
        total = a + b
        b_part = total - a
        errors.append((a - (total - b_part)) + (b - b_part))
        values = total
    error = xp.concatenate(errors).sum() if errors else 0.0
    return values[0] + error if values.shape[0] else xp.float64(0.0)


def scaled_by_total(total, xp):
    """``values -> values * 2**-e`` for ``total = m 2**e`` (frexp: m in [0.5, 1),
    e = 0 for a total of 0): weights scaled exactly to at most about 1, so that
    a product of two of them neither overflows (huge weights) nor underflows
    to 0 (subnormal ones) (kernels/reduce_metrics.cu ``scaled``)."""
    exponent = -xp.frexp(xp.asarray(total, dtype=xp.float64))[1]
    return lambda values: xp.ldexp(xp.asarray(values, dtype=xp.float64), exponent)


def unequal_pairs(a, b, xp):
    """``sum_{i != j} a_i b_j`` as ``sum_j b_j A_<j + a_j B_<j`` (running sums
    of the values before j): non-negative terms for non-negative a and b, so
    no cancellation against the pairs i = j, and exactly 0 when a and b are
    both confined to one and the same class."""
    return inner(b, exclusive_cumsum(a, xp), xp) + inner(a, exclusive_cumsum(b, xp), xp)


def kappa_disagreements(c: Counts, stats: ClassStatistics, weights: str | None):
    """Observed and chance-expected weighted disagreement for Cohen's kappa.

    kappa = 1 - observed / expected with observed = sum_ij w_ij C_ij and
    expected = sum_ij w_ij t_i p_j / s, both returned multiplied by s 2**-2e
    (``total = m 2**e``; see the comment below); w = 1 - I (None), |i - j| (linear)
    or (i - j)^2 (quadratic), i and j the class positions 0..K-1. The
    observed ones are sums of the counting pass (the misclassified weight,
    the moments); the expected ones are O(K) from the statistics, as sums of
    non-negative terms where they can be, so that a class holding nearly all
    the weight does not cancel the others' share to 0.
    """
    xp = c.xp
    # On weights scaled by the total's power of two (scaled_by_total): both
    # disagreements come multiplied by s 2**-2e, and no product of two weights
    # overflows (huge weights) or underflows to 0 (subnormal ones, where kappa
    # became 1 - x/0).
    scale = scaled_by_total(c.total, xp)
    s = scale(c.total)
    t, p = scale(c.support), scale(c.predicted)
    if weights is None:
        return scale(c.misclassified) * s, unequal_pairs(t, p, xp)
    positions = xp.arange(t.shape[0], dtype=xp.float64).reshape((-1,) + (1,) * (t.ndim - 1))
    t_total, p_total = t.sum(axis=0), p.sum(axis=0)
    if weights == "quadratic":
        observed = scale(stats.quadratic_disagreement) * s
        # sum_ij t_i p_j (i - j)^2 about the mean position of y_true, so the
        # terms stay small and the cross term nearly vanishes: no cancellation
        # between terms of size total^2 K^2 when the classes in use have high codes.
        centre = divide(inner(t, positions, xp), t_total, xp, 0.0)[0]
        offset = positions - centre
        cross = (
            p_total * inner(t, offset * offset, xp)
            + t_total * inner(p, offset * offset, xp)
            - 2 * inner(t, offset, xp) * inner(p, offset, xp)
        )
    else:
        observed = scale(stats.linear_disagreement) * s
        # sum_{i<j} t_i (j - i) = sum over the gaps m below j of T_{<=m}: a scan
        # of the running sums; likewise for p. Both terms are non-negative.
        t_gaps = exclusive_cumsum(xp.cumsum(t, axis=0), xp)
        p_gaps = exclusive_cumsum(xp.cumsum(p, axis=0), xp)
        cross = inner(p, t_gaps, xp) + inner(t, p_gaps, xp)
    return observed, cross


def kappa_undefined(c: Counts) -> bool:
    """True when kappa is 0/0: no samples, or y_true and y_pred both hold one and
    the same single class. Decided from the support pattern, not from a float
    expected disagreement that rounding may leave a hair above 0."""
    xp = c.xp
    if c.support.ndim > 1:
        return kappa_undefined_columns(c)
    if c.total == 0:
        return True
    both = (c.support > 0) & (c.predicted > 0)
    return int((c.support > 0).sum()) == 1 and bool(xp.array_equal(c.predicted > 0, both)) \
        and int(both.sum()) == 1


def kappa_undefined_columns(c: Counts):
    """:func:`kappa_undefined` of each column of (K, B) replicates, as a (B,) mask."""
    supported, predicted = c.support > 0, c.predicted > 0
    one_class = (supported.sum(axis=0) == 1) & (predicted.sum(axis=0) == 1) \
        & ((supported & predicted).sum(axis=0) == 1)
    return (c.total == 0) | one_class


def cohen_kappa(c: Counts, stats: ClassStatistics, weights: str | None = None,
                replace_undefined_by: float = math.nan):
    """Cohen's kappa 1 - observed / expected disagreement (scikit-learn).

    ``replace_undefined_by`` when kappa is 0/0 (:func:`kappa_undefined`).
    """
    if c.support.ndim > 1:
        undefined = kappa_undefined_columns(c)
        observed, expected = kappa_disagreements(c, stats, weights)
        with _quiet(c.xp):
            return c.xp.where(undefined, replace_undefined_by, 1 - observed / expected)
    if kappa_undefined(c):
        return c.xp.float64(replace_undefined_by)
    observed, expected = kappa_disagreements(c, stats, weights)
    return 1 - observed / expected


# -- CatBoost's conventions --------------------------------------------------


def catboost_f(c: Counts, beta: float = 1.0):
    """CatBoost's per-class F: precision and recall default to 1 when undefined,
    F = 0 when both are 0 (``caching_metric.cpp``)."""
    xp = c.xp
    p = precision(c, 1.0)
    r = recall(c, 1.0)
    beta2 = beta * beta
    return divide((1 + beta2) * p * r, beta2 * p + r, xp, 0.0)[0]


def catboost_total_f1(c: Counts, average: str):
    """CatBoost ``TotalF1``: per class 2 tp / (support + predicted), 0 if both 0.

    Weighted (CatBoost's default) by support, Macro over all K classes, Micro
    from summed counts.
    """
    xp = c.xp
    if average == "Micro":
        return micro_rate(fbeta_terms(c, 1.0), xp, 0.0)
    per_class = divide(*fbeta_terms(c, 1.0), xp, 0.0)[0]
    if average == "Macro":
        return per_class.mean(axis=0)
    return divide(inner(per_class, c.support, xp), c.support.sum(axis=0), xp, 0.0)[0]


_LIKELIHOOD_REPLACE = ("Use the `replace_undefined_by` param to control this behavior. To "
                       "suppress this warning or turn it into an error, see Python's "
                       "`warnings` module and `warnings.catch_warnings()`.")


def likelihood_ratios(tn, fp, fn, tp, replace: dict[str, float] | None = None
                      ) -> tuple[float, float]:
    """scikit-learn's ``class_likelihood_ratios`` of one binary confusion matrix
    (host numbers): ``LR+ = (tp / (tp + fn)) / (fp / (tn + fp))`` and
    ``LR- = (fn / (tp + fn)) / (tn / (tn + fp))``, with its warnings. An
    undefined ratio (fp = 0, tn = 0) is NaN or ``replace[...]``. In float64:
    the products of integer counts may pass int64's range."""
    tn, fp, fn, tp = (np.float64(count) for count in (tn, fp, fn, tp))
    support_pos, support_neg = tp + fn, tn + fp
    if support_pos == 0:
        warn("No samples of the positive class are present in `y_true`. "
             "`positive_likelihood_ratio` and `negative_likelihood_ratio` are both set to "
             "`np.nan`. " + _LIKELIHOOD_REPLACE, UndefinedMetricWarning)
    with _quiet(np):
        positive = (tp * support_neg) / (fp * support_pos)
        negative = (fn * support_neg) / (tn * support_pos)
    if fp == 0:
        beginning = ("No samples were predicted for the positive class and "
                     "`positive_likelihood_ratio` is " if tp == 0
                     else "`positive_likelihood_ratio` is ill-defined and ")
        # scikit-learn's message ends here (the rest of its text is a separate statement).
        warn(beginning + "set to `np.nan`. Use the `replace_undefined_by` param to ",
             UndefinedMetricWarning)
        positive = np.float64(np.nan if replace is None else replace["LR+"])
    if tn == 0:
        warn("`negative_likelihood_ratio` is ill-defined and set to `np.nan`. "
             + _LIKELIHOOD_REPLACE, UndefinedMetricWarning)
        negative = np.float64(np.nan if replace is None else replace["LR-"])
    return float(positive), float(negative)


def catboost_kappa(c: Counts, stats: ClassStatistics, weights: str | None):
    """CatBoost ``Kappa`` / ``WKappa`` (quadratic): -1 when the expected
    disagreement is 0 (``kappa.cpp``)."""
    return cohen_kappa(c, stats, weights, replace_undefined_by=-1.0)



# -- score metrics: formulas over the fused pass's sums (ScoreSums) ----------
# Each takes the weighted sums of one read of the scores; ``xp`` is the array
# module the sums live in. Means are sums over the total weight (0/0 = NaN).


def _per_weight(total, sums: ScoreSums):
    """``total`` over the counted weight; 0/0 (every row ignored) is NaN, quietly."""
    with _quiet(np):  # host sums warn; CuPy's never do
        return total / sums.slot("weight")


def score_mean(sums: ScoreSums, slot: str, normalize: bool = True):
    """The weighted mean of one per-row term (or its weighted sum)."""
    total = sums.slot(slot)
    return _per_weight(total, sums) if normalize else total


def log_loss(sums: ScoreSums, normalize: bool = True):
    """Mean of -log p_t: scikit-learn's ``log_loss`` (cross-entropy)."""
    return score_mean(sums, "nll", normalize)


def perplexity(sums: ScoreSums, xp):
    """exp(cross-entropy): inf past about 709, the float64 value, not an error."""
    with np.errstate(over="ignore"):
        return xp.exp(log_loss(sums))


def brier_halved(num_classes: int, scale_by_half="auto") -> bool:
    """Whether a Brier score of ``num_classes`` columns is halved: scikit-learn's
    ``scale_by_half``, whose ``"auto"`` (every report's rule, and the default of
    :func:`metrics_gpu.brier_score_loss`) halves K < 3, which makes the binary
    case the mean of (p - y)^2 (kernels/streaming.cu streaming_compute applies
    the same rule to the stream's value)."""
    return num_classes < 3 if scale_by_half == "auto" else bool(scale_by_half)


def brier_score(sums: ScoreSums, xp, scale_by_half="auto"):
    """Mean of sum_j (p_j - [j == t])^2, halved as :func:`brier_halved` says."""
    value = score_mean(sums, "brier")
    return xp.divide(value, 2) if brier_halved(sums.num_classes, scale_by_half) else value


def class_prior(class_weight, xp):
    """The weighted class frequencies ``W_k / W``: the prediction of the model
    that knows only the prior, the baseline of the D^2 scores."""
    with _quiet(np):
        return class_weight / class_weight.sum()


def prior_log_loss(class_weight, clip_eps: float, xp):
    """Weighted sum of -log p_t when every row predicts :func:`class_prior`
    (clipped to ``[eps, 1 - eps]`` as the loss clips): ``-sum_k W_k log p_k``,
    a class without weight adding 0. A prior above 1/2 is logged as
    ``log1p(-(W - W_k) / W)``, ``W - W_k`` summed from the other classes
    (``log(p_k)`` near 1 would keep only the digits of ``p_k``'s rounding)."""
    prior = class_prior(class_weight, xp)
    with _quiet(np):
        log_prior = xp.where(prior > 0.5,
                             xp.log1p(-sum_of_others(class_weight, xp) / class_weight.sum()),
                             xp.log(prior))
    log_prior = xp.clip(log_prior, math.log(clip_eps), math.log1p(-clip_eps))
    return -xp.sum(xp.where(class_weight > 0, class_weight * log_prior, 0.0))


def prior_brier(class_weight, xp):
    """Weighted sum of sum_j (p_j - [j == t])^2 when every row predicts
    :func:`class_prior`: ``W sum_k p_k (1 - p_k) = sum_k p_k (W - W_k)``,
    with ``W - W_k`` summed from the other classes (``1 - p_k`` would cancel
    to 0 beside a class of nearly all the weight) and ``p_k`` taken first
    (``W_k (W - W_k)`` underflows for weights near 1e-160)."""
    return xp.sum(class_prior(class_weight, xp) * sum_of_others(class_weight, xp))


def d2_score(loss_sum, baseline_sum, xp):
    """``1 - loss / baseline``: the fraction of the baseline's loss explained
    (scikit-learn's D^2; a zero baseline gives -inf or NaN, as there)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1 - xp.divide(loss_sum, baseline_sum)


def top_k_accuracy(sums: ScoreSums, normalize: bool = True):
    """Weighted share (or weight) of rows whose true class ranks within each k."""
    hits = sums.top_k_hits
    return _per_weight(hits, sums) if normalize else hits


def reported_top_k(top_k, num_classes: int) -> tuple:
    """The ``k`` of ``top_k`` whose top-k accuracy a report shows: those below K
    (with k >= K every row's target is among the k highest scores, so the value
    is 1 whatever the scores)."""
    return tuple(k for k in top_k if k < num_classes)


def catboost_one_vs_all(sums: ScoreSums, xp):
    """CatBoost ``MultiClassOneVsAll``: -(1/K) sum_j log of sigmoid(+-a_j), averaged."""
    return xp.divide(score_mean(sums, "one_vs_all"), sums.num_classes)


CALIBRATION_NORMS = get_args(CalibrationNorm)


def calibration_bins(sums: ScoreSums, xp):
    """``(proportion, confidence, accuracy)`` per bin; empty bins give NaN means."""
    weight, confidence, correct = sums.bins()
    with _quiet(xp):
        return _per_weight(weight, sums), confidence / weight, correct / weight


def calibration_error(sums: ScoreSums, norm: str, xp):
    """Expected (``l1``: sum_b prop_b |acc_b - conf_b|), root-mean-square
    (``l2``) or maximum (``max`` over non-empty bins) calibration error, as
    torchmetrics' ``CalibrationError`` defines them."""
    proportion, confidence, accuracy = calibration_bins(sums, xp)
    gap = xp.where(xp.greater(proportion, 0), xp.abs(accuracy - confidence), 0.0)
    if norm == "l1":
        return (proportion * gap).sum()
    if norm == "l2":
        return xp.sqrt((proportion * gap * gap).sum())
    return gap.max()


# -- helpers -----------------------------------------------------------------


class _quiet:
    """Silence floating-point warnings where 0/0 = NaN is the documented result."""

    def __init__(self, xp):
        self._errstate = getattr(xp, "errstate", None)
        self._state = None

    def __enter__(self):
        if self._errstate is not None:
            self._state = self._errstate(divide="ignore", invalid="ignore")
            self._state.__enter__()

    def __exit__(self, *exc):
        if self._state is not None:
            self._state.__exit__(*exc)


@dataclass(frozen=True)
class MetricDefinition:
    """One row of the metric table: a name, its formula and where it comes from."""

    name: str
    formula: Callable[[Counts, ClassStatistics], Any]
    higher_is_better: bool
    sources: dict
    description: str


def _row(name, formula, higher_is_better, description, **sources):
    return MetricDefinition(name, formula, higher_is_better, sources, description)


# The overall label metrics of the report, in print order. Conventions follow
# scikit-learn (zero_division=0 without warning inside the report).
REPORT_METRICS: tuple[MetricDefinition, ...] = (
    _row("accuracy", lambda c, s: accuracy(c), True,
         "fraction of samples predicted correctly",
         sklearn="accuracy_score", catboost="Accuracy", overview="accuracy",
         pyactlearn="exact matching ratio"),
    _row("balanced_accuracy", lambda c, s: balanced_accuracy(c), True,
         "mean recall over classes with support",
         sklearn="balanced_accuracy_score", overview="balanced accuracy"),
    _row("micro_precision", lambda c, s: micro_rate(precision_terms(c), c.xp, 0.0), True,
         "sum tp / sum predicted", sklearn="precision_score(average='micro')",
         onedal="microPrecision", pyactlearn="precision (micro)"),
    _row("micro_recall", lambda c, s: micro_rate(recall_terms(c), c.xp, 0.0), True,
         "sum tp / sum support", sklearn="recall_score(average='micro')",
         onedal="microRecall", pyactlearn="recall (micro)"),
    _row("micro_f1", lambda c, s: catboost_total_f1(c, "Micro"), True,
         "F1 of the summed counts (= accuracy for single-label data)",
         sklearn="f1_score(average='micro')", onedal="microFscore", catboost="TotalF1:average=Micro"),
    _row("macro_precision", lambda c, s: nan_average(precision(c, 0.0), c.xp), True,
         "mean of per-class precision", sklearn="precision_score(average='macro')"),
    _row("macro_recall", lambda c, s: nan_average(recall(c, 0.0), c.xp), True,
         "mean of per-class recall", sklearn="recall_score(average='macro')"),
    _row("macro_f1", lambda c, s: nan_average(fbeta_from_counts(c, 1.0, 0.0), c.xp), True,
         "mean of per-class F1 (scikit-learn's macro F1)",
         sklearn="f1_score(average='macro')", overview="macro F1 (mean of per-class F1)"),
    _row("macro_f1_harmonic", lambda c, s: fbeta_from_rates(
        nan_average(precision(c, 0.0), c.xp), nan_average(recall(c, 0.0), c.xp), 1.0, c.xp), True,
         "harmonic mean of macro precision and macro recall (oneDAL / pyActLearn / overview macro F1)",
         onedal="macroFscore", pyactlearn="f-1 score (macro)", overview="macro F1 (harmonic of macro P and R)"),
    _row("weighted_precision", lambda c, s: nan_average(precision(c, 0.0), c.xp, c.support), True,
         "support-weighted mean of per-class precision", sklearn="precision_score(average='weighted')"),
    _row("weighted_recall", lambda c, s: nan_average(recall(c, 0.0), c.xp, c.support), True,
         "support-weighted mean of per-class recall", sklearn="recall_score(average='weighted')"),
    _row("weighted_f1", lambda c, s: nan_average(fbeta_from_counts(c, 1.0, 0.0), c.xp, c.support), True,
         "support-weighted mean of per-class F1", sklearn="f1_score(average='weighted')",
         catboost="TotalF1 (average=Weighted)"),
    _row("macro_jaccard", lambda c, s: nan_average(jaccard(c, 0.0), c.xp), True,
         "mean of per-class Jaccard index", sklearn="jaccard_score(average='macro')"),
    _row("macro_specificity", lambda c, s: nan_average(specificity(c, 0.0), c.xp), True,
         "mean of per-class true negative rate", pyactlearn="specificity"),
    _row("matthews_corrcoef", lambda c, s: matthews_corrcoef(c), True,
         "multiclass Matthews correlation coefficient (R_K)",
         sklearn="matthews_corrcoef", catboost="MCC", overview="MCC"),
    _row("cohen_kappa", lambda c, s: cohen_kappa(c, s, None), True,
         "Cohen's kappa", sklearn="cohen_kappa_score", catboost="Kappa", overview="Cohen's kappa"),
    _row("linear_weighted_kappa", lambda c, s: cohen_kappa(c, s, "linear"), True,
         "Cohen's kappa with |i - j| weights", sklearn="cohen_kappa_score(weights='linear')"),
    _row("quadratic_weighted_kappa", lambda c, s: cohen_kappa(c, s, "quadratic"), True,
         "Cohen's kappa with (i - j)^2 weights", sklearn="cohen_kappa_score(weights='quadratic')",
         catboost="WKappa", overview="quadratic weighted kappa"),
    _row("average_accuracy", lambda c, s: class_mean(class_accuracy(c), c.xp), True,
         "mean one-vs-rest accuracy over classes", onedal="averageAccuracy",
         pyactlearn="average accuracy"),
    _row("error_rate", lambda c, s: class_mean(class_error_rate(c), c.xp), False,
         "mean one-vs-rest error over classes", onedal="errorRate"),
    _row("hamming_loss", lambda c, s: 1 - accuracy(c), False,
         "fraction of samples predicted wrongly", sklearn="hamming_loss", catboost="HammingLoss"),
    _row("zero_one_loss", lambda c, s: 1 - accuracy(c), False,
         "1 - accuracy", sklearn="zero_one_loss", catboost="ZeroOneLoss"),
)

# How the reports print and describe the label metrics: scikit-learn's
# definitions (the rows with a scikit-learn name) first, then the averages of
# per-class one-vs-rest rates of oneDAL and pyActLearn, whose names mislead
# (average_accuracy counts true negatives: near 1 with many classes).
SKLEARN_GROUP = "overall (scikit-learn definitions)"
PER_CLASS_AVERAGES_GROUP = "per-class averages (oneDAL, pyActLearn conventions)"
PER_CLASS_AVERAGES_LEGEND = (
    "one-vs-rest rates averaged over classes: average_accuracy and error_rate count "
    "true negatives, so with many classes they sit near 1 and 0 whatever accuracy is"
)


def label_metric_groups() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The report's label metric names in print order, by group (see above)."""
    sklearn = tuple(row.name for row in REPORT_METRICS if "sklearn" in row.sources)
    others = tuple(row.name for row in REPORT_METRICS if "sklearn" not in row.sources)
    return (SKLEARN_GROUP, sklearn), (PER_CLASS_AVERAGES_GROUP, others)


# Per-class columns of the report.
PER_CLASS_METRICS: tuple[tuple[str, Callable[[Counts], Any]], ...] = (
    ("precision", lambda c: precision(c, 0.0)),
    ("recall", lambda c: recall(c, 0.0)),
    ("f1", lambda c: fbeta_from_counts(c, 1.0, 0.0)),
    ("specificity", lambda c: specificity(c, 0.0)),
    ("jaccard", lambda c: jaccard(c, 0.0)),
    ("support", lambda c: c.support),
)


# -- every label metric at once ------------------------------------------------

# Layout of the label-metric buffer: kernels/reduce_metrics.cu writes it in one
# launch and label_metric_values below is its NumPy reference. First one value
# per slot (the report's metrics, then the counts the functional API needs for
# its options and warnings), then one column of K values per per-class metric.
LABEL_METRIC_COUNTS = (
    "total", "correct", "selected_classes", "supported_classes", "unpredicted_classes",
    "absent_classes", "classes_without_negatives", "kappa_undefined", "misclassified",
)
LABEL_METRIC_SLOTS = tuple(row.name for row in REPORT_METRICS) + LABEL_METRIC_COUNTS
LABEL_METRIC_COLUMNS = tuple(name for name, _ in PER_CLASS_METRICS if name != "support")
SLOT = {name: index for index, name in enumerate(LABEL_METRIC_SLOTS)}


def label_metric_size(num_classes: int) -> int:
    """Length of the buffer for K classes."""
    return len(LABEL_METRIC_SLOTS) + len(LABEL_METRIC_COLUMNS) * num_classes


def label_metric_columns(values, num_classes: int):
    """The per-class columns of a buffer, shape (columns, K), in LABEL_METRIC_COLUMNS order."""
    return values[len(LABEL_METRIC_SLOTS):].reshape(len(LABEL_METRIC_COLUMNS), num_classes)


def label_metric_values(stats: ClassStatistics, selected=None):
    """Every label metric of ``stats`` as one float64 NumPy buffer (see LABEL_METRIC_SLOTS).

    Averages, the report's metrics and kappa positions run over the
    ``selected`` classes (a boolean mask; all when None), whose statistics'
    moments must use their ranks as positions; the per-class columns cover
    all K classes. Conventions are the report's: a 0/0 rate is 0.
    """
    all_counts = Counts.from_statistics(stats, np)
    per_class = dict(PER_CLASS_METRICS)
    if selected is None:
        chosen = stats
    else:
        classes = np.flatnonzero(np.asarray(selected, dtype=bool))
        chosen = replace(stats.take(classes),
                         linear_disagreement=stats.linear_disagreement,
                         quadratic_disagreement=stats.quadratic_disagreement,
                         misclassified=stats.misclassified)
    c = Counts.from_statistics(chosen, np)
    with _quiet(np):
        metrics = [row.formula(c, chosen) for row in REPORT_METRICS]
        columns = [per_class[name](all_counts) for name in LABEL_METRIC_COLUMNS]
    counts = [
        c.total, c.correct, c.tp.shape[0], (c.support > 0).sum(), (c.predicted == 0).sum(),
        ((c.support == 0) & (c.predicted == 0)).sum(), (c.negatives == 0).sum(),
        kappa_undefined(c), c.misclassified,
    ]
    head = np.array([float(v) for v in metrics + counts], dtype=np.float64)
    return np.concatenate([head, np.asarray(columns, dtype=np.float64).reshape(-1)])


# -- the streaming state's score metrics (ClassificationMetrics.compute) -------

# Layout of the score-metric buffer of a streaming state: kernels/streaming.cu
# streaming_compute writes it in one launch and stream_score_values below is
# its NumPy reference. These slots, then one value per k of top_k (top-k
# accuracy), the calibration proportion, confidence and accuracy per bin
# (n_bins each), and with thresholds five columns of K values: each class's
# binned ROC AUC, average precision, their error bounds and its positives.
STREAM_SCORE_SLOTS = (
    "accuracy", "cross_entropy", "perplexity", "brier_score", "hinge_loss",
    "expected_calibration_error", "max_calibration_error", "total_weight",
    "roc_auc", "roc_auc_macro", "roc_auc_weighted", "roc_auc_micro", "roc_auc_error_bound",
    "average_precision", "average_precision_macro", "average_precision_weighted",
    "average_precision_micro", "average_precision_error_bound",
)
STREAM_SLOT = {name: index for index, name in enumerate(STREAM_SCORE_SLOTS)}
STREAM_CLASS_COLUMNS = ("roc_auc", "average_precision", "roc_auc_error_bound",
                        "average_precision_error_bound", "positives")

# One line of meaning for each scalar score metric of the reports (the label
# metrics' lines are the descriptions of REPORT_METRICS rows; see
# metric_description for both, and for top_{k}_accuracy).
SCORE_METRIC_DESCRIPTIONS = {
    "cross_entropy": "mean -log p(true class) (log loss)",
    "perplexity": "exp(cross_entropy)",
    "brier_score": "mean squared distance of the probabilities to the one-hot target, "
                   "summed over the classes; halved for K = 2 (the mean of (p - y)^2, as "
                   "scikit-learn's brier_score_loss)",
    "hinge_loss": "Crammer-Singer multiclass hinge loss of the scores as given",
    "expected_calibration_error": "weighted mean |accuracy - confidence| over the "
                                  "confidence bins",
    "max_calibration_error": "largest |accuracy - confidence| over the non-empty bins",
    "roc_auc": "ROC AUC: class 1's with two classes, else roc_auc_macro",
    "roc_auc_macro": "mean one-vs-rest ROC AUC over the classes where it is defined",
    "roc_auc_weighted": "one-vs-rest ROC AUC averaged with each class's positives as weight",
    "roc_auc_micro": "ROC AUC of every class's one-vs-rest scores pooled",
    "roc_auc_error_bound": "bound on |binned - exact| ROC AUC (score ties within a bin)",
    "average_precision": "average precision: class 1's with two classes, else "
                         "average_precision_macro",
    "average_precision_macro": "mean one-vs-rest average precision over the classes with "
                               "positives",
    "average_precision_weighted": "one-vs-rest average precision averaged with each "
                                  "class's positives as weight",
    "average_precision_micro": "average precision of every class's one-vs-rest scores pooled",
    "average_precision_error_bound": "bound on |binned - exact| average precision",
}


def metric_description(name: str) -> str | None:
    """The one-line meaning of a report's metric name, None for a name no report has."""
    for row in REPORT_METRICS:
        if row.name == name:
            return row.description
    if name in SCORE_METRIC_DESCRIPTIONS:
        return SCORE_METRIC_DESCRIPTIONS[name]
    k = name[len("top_"):-len("_accuracy")] if name.startswith("top_") else ""
    if name.endswith("_accuracy") and k.isdigit():
        return f"fraction of samples whose target is among the {k} highest scores"
    return None


def stream_score_size(num_top_k: int, n_bins: int, num_classes: int, thresholds: int) -> int:
    columns = len(STREAM_CLASS_COLUMNS) * num_classes if thresholds else 0
    return len(STREAM_SCORE_SLOTS) + num_top_k + 3 * n_bins + columns


def binned_rank_areas(positive, negative):
    """ROC AUC and average precision of binary problems from score histograms
    (bins in ascending score order along the last axis; one problem per row of
    2-D input), with their error bounds.

    Thresholds sweep the bins from the top: a positive and a negative in one
    bin count 1/2 (as tied scores), and AP is the step rule over bins,
    sum_b (P_b / P) * precision at b. Against the exact values of the unbinned
    scores: |AUC - exact| <= sum_b P_b N_b / (2 P N), and |AP - exact| <=
    max(upper - AP, AP - lower) / P, where ``upper`` and ``lower`` bound the
    exact sum_i w_i * precision_i over the positives in any order of the
    samples inside each bin (ties included). With A and F the positive and
    negative weight strictly above bin b, T = A + P_b and C = A + F + N_b: a
    positive's exact precision (A + x) / (A + F + x + y), x <= P_b and y >= 0
    the positive and negative weight of the bin ranked with it or before it,
    is at most T / (A + F + P_b) (every positive of the bin first, tied); and
    for the positive at cumulative positive weight W of the bin, x >= W and
    y <= N_b give at least (A + W) / (C + W), increasing in W, so the bin's
    positives sum to at least its integral over [0, P_b],
    P_b - (F + N_b) log(1 + P_b / C) (any sample weights). The binned value
    sums P_b T / (C + P_b). See docs/conventions.md.
    Returns ``(auc, auc_bound, ap, ap_bound)``; NaN where undefined (no
    positive, or for AUC no negative).
    """
    positive = np.asarray(positive, dtype=np.float64)
    negative = np.asarray(negative, dtype=np.float64)
    p_total, n_total = positive.sum(axis=-1), negative.sum(axis=-1)
    tp = np.flip(np.cumsum(np.flip(positive, -1), axis=-1), -1)  # positives at or above
    fp = np.flip(np.cumsum(np.flip(negative, -1), axis=-1), -1)
    above = tp - positive                                          # positives strictly above
    area = (negative * (above + 0.5 * positive)).sum(axis=-1)
    ties = (positive * negative).sum(axis=-1)
    with _quiet(np):
        has = positive > 0
        precision = np.where(has, tp / (tp + fp), 0.0)
        # Per bin: the largest and smallest exact sum over its positives (see above).
        upper = np.where(has, tp / (tp + fp - negative), 0.0) - precision
        below = fp  # F + N_b: the negative weight a positive of the bin can have above it
        lowest = np.where(below > 0, positive - below * np.log1p(positive / (above + fp)),
                          positive)
        lower = positive * precision - np.where(has, lowest, 0.0)
        defined = (p_total > 0) & (n_total > 0)
        auc = np.where(defined, area / (p_total * n_total), math.nan)
        auc_bound = np.where(defined, 0.5 * ties / (p_total * n_total), math.nan)
        ap = np.where(p_total > 0, (positive * precision).sum(axis=-1) / p_total, math.nan)
        ap_bound = np.where(p_total > 0, np.maximum((positive * upper).sum(axis=-1),
                                                    lower.sum(axis=-1)) / p_total, math.nan)
    return auc, auc_bound, ap, ap_bound


def stream_score_values(sums: ScoreSums, histogram=None):
    """Every score metric of a streaming state as one float64 NumPy buffer
    (layout :data:`STREAM_SCORE_SLOTS`), from its score sums and, with
    thresholds, its ``(2, K, H)`` histogram (rows whose target is k, then
    the others). Macro and weighted averages of the binned ranking metrics
    run over the classes where they are defined (weighted: by positives);
    micro pools every class's one-vs-rest histogram; ``roc_auc`` and
    ``average_precision`` are class 1's for K = 2, else the macro average.
    """
    xp = np
    k = sums.num_classes
    values = np.full(stream_score_size(len(sums.top_k), sums.n_bins, k,
                                       0 if histogram is None else histogram.shape[2]), math.nan)
    slot = STREAM_SLOT
    with _quiet(np):
        values[slot["accuracy"]] = score_mean(sums, "correct")
        values[slot["cross_entropy"]] = log_loss(sums)
        values[slot["perplexity"]] = perplexity(sums, xp)
        values[slot["brier_score"]] = brier_score(sums, xp)
        values[slot["hinge_loss"]] = score_mean(sums, "hinge")
        values[slot["total_weight"]] = sums.slot("weight")
        head = len(STREAM_SCORE_SLOTS)
        values[head:head + len(sums.top_k)] = top_k_accuracy(sums)
        head += len(sums.top_k)
        if sums.n_bins:
            values[slot["expected_calibration_error"]] = calibration_error(sums, "l1", xp)
            values[slot["max_calibration_error"]] = calibration_error(sums, "max", xp)
            proportion, confidence, accuracy_ = calibration_bins(sums, xp)
            values[head:head + 3 * sums.n_bins] = np.concatenate([proportion, confidence,
                                                                  accuracy_])
        head += 3 * sums.n_bins
    if histogram is None:
        return values
    histogram = np.asarray(histogram, dtype=np.float64)
    auc, auc_bound, ap, ap_bound = binned_rank_areas(histogram[0], histogram[1])
    positives = histogram[0].sum(axis=1)
    values[head:head + 5 * k] = np.concatenate([auc, ap, auc_bound, ap_bound, positives])
    for name, per_class, bound in (("roc_auc", auc, auc_bound),
                                   ("average_precision", ap, ap_bound)):
        values[slot[f"{name}_macro"]], values[slot[f"{name}_weighted"]] = \
            defined_averages(per_class, positives)
        # The bound of an average: the mean of the per-class bounds.
        values[slot[f"{name}_error_bound"]] = defined_averages(bound, positives)[0]
        micro = binned_rank_areas(histogram[0].sum(axis=0), histogram[1].sum(axis=0))
        values[slot[f"{name}_micro"]] = float(micro[0] if name == "roc_auc" else micro[2])
        values[slot[name]] = per_class[1] if k == 2 else values[slot[f"{name}_macro"]]
    return values
