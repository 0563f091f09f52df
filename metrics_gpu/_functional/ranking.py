"""Exact ranking metrics: ROC and precision-recall curves, ROC AUC, average
precision, and the multiclass AUC-mu.

Every metric here reduces to binary problems, each one ranked scan
(:mod:`metrics_gpu._formulas.ranking`: scores sorted descending and stable, the
cumulative weights of positives and negatives, a run of tied scores as one
point):

1. A curve keeps one point per distinct score (the backend's
   ``binary_curve_points``: the reference over ``xp`` on the NumPy backend,
   a sort plus two passes of ``kernels/ranking.cu`` on the kernel backends;
   its length depends on the data, so that is one sync).
2. ROC AUC (McClish's standardised partial area for ``max_fpr``) and average
   precision come from the backend's ``binary_rank_areas``: the reference over
   ``xp`` on the NumPy backend, a sort plus the segmented scans of
   ``kernels/ranking.cu`` on the kernel backends. No host sync.
3. One-vs-rest and the multilabel per-label averages (macro, weighted,
   None) rank every column at once: the backend's ``label_rank_areas``
   (one binary problem per column on the NumPy backend, the reference; on
   the kernel backends a segment per column in the same launches).
   One-vs-one (Hand & Till) and AUC-mu (Kleiman & Page) run the binary
   problem per pair of classes; a pair ranks only the samples of its two
   classes (:func:`_class_members`).

Memory is O(N) per binary problem, O(N K) for the micro average (all N K
scores ranked at once) and for AUC-mu's expected costs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from itertools import combinations
from typing import Any

import numpy as np

from metrics_gpu._formulas import labels as F
from metrics_gpu.backends.selection import on_caller_stream
from metrics_gpu._multilabel.ranking import each_row, row_average_precision, row_roc_auc
from metrics_gpu._pipeline.stages import output
from metrics_gpu._formulas.ranking import (
    positive_negative_weights,
    rate,
    stable_argsort,
)
from metrics_gpu._common.types import ArrayLike, MultiClass, RankingAverage
from metrics_gpu._validation import (
    ALL_ZERO_WEIGHT,
    RANKING_AVERAGE_OPTIONS,
    IndicatorInputs,
    check_average_precision_pos_label,
    check_binary_scores,
    check_bool,
    check_cost_matrix,
    check_curve_pos_label,
    check_drop_intermediate,
    check_indicator_inputs,
    check_max_fpr,
    check_multi_class,
    check_multiclass_roc_labels,
    check_multiclass_scores,
    check_per_class_scores,
    _check_label_value,
    check_auc_mu_scores,
    check_ranking_average,
    check_ranking_class_codes,
    check_ranking_inputs,
    check_some_weight,
    is_label_indicator,
    present_labels,
)

_ONE_CLASS = ("Only one class is present in y_true. ROC AUC score is not defined in that "
              "case.")
_NO_NEGATIVES = "No negative samples in y_true, false positive value should be meaningless"
_NO_POSITIVES = "No positive samples in y_true, true positive value should be meaningless"
_NO_PAIR = ("Only one class of labels is present in y_true, so there is no pair of classes; "
            "one-vs-one ROC AUC is not defined in that case.")
_NO_POSITIVE_CLASS = ("No positive class found in y_true, recall is set to one for all "
                      "thresholds.")


# -- curves: points of the ranked scan -----------------------------------------


def _exact_runs(sums, seen, xp):
    """Points that add no weight repeat the sum of the last point that did, exactly.

    A parallel scan (CuPy's cumsum) may round ``x + 0`` differently at different
    positions; scikit-learn's sequential sums repeat ``x``, and drop_intermediate
    looks for runs of equal values. ``seen`` counts the samples of non-zero
    weight: equal counts, equal sums. A no-op for a sequential scan.
    """
    return sums[xp.searchsorted(seen, seen, side="left")]


# -- one binary problem: the backend's ranked scan ---------------------------------


def _binary_roc_auc(backend, scores, is_positive, sample_weight=None, max_fpr=None):
    """ROC AUC of one binary problem, a 0-d array where the scores live (no sync).
    NaN when the positive or the negative weight is 0."""
    return backend.binary_rank_areas(scores, is_positive, sample_weight, max_fpr)[0]


def _binary_average_precision(backend, scores, is_positive, sample_weight=None):
    """Average precision of one binary problem (0 without positive weight)."""
    return backend.binary_rank_areas(scores, is_positive, sample_weight)[1]


def _two_class_auc(backend, positive_scores, negative_scores, positive_weight,
                   negative_weight):
    """P(positive ranked above negative) + ½ P(tie), weighted: the binary ROC
    AUC of the two samples together. Weights None mean 1."""
    xp = backend.xp
    scores = xp.concatenate([positive_scores, negative_scores])
    is_positive = xp.concatenate([xp.ones(positive_scores.shape[0], dtype=bool),
                                  xp.zeros(negative_scores.shape[0], dtype=bool)])
    weight = (None if positive_weight is None
              else xp.concatenate([positive_weight, negative_weight]))
    return _binary_roc_auc(backend, scores, is_positive, weight)


# -- curves --------------------------------------------------------------------------


def _binary_curve(inputs, pos_label):
    """``(fps, tps, thresholds)`` of ``y_true == pos_label``: one point per distinct
    score among the samples of non-zero weight (scikit-learn leaves the others out)."""
    xp = inputs.backend.xp
    is_positive = xp.equal(inputs.y_true, pos_label)
    scores, weight = inputs.y_score, inputs.sample_weight
    if weight is not None:
        kept = xp.not_equal(weight, 0)
        is_positive, scores, weight = is_positive[kept], scores[kept], weight[kept]
    fps, tps, negatives_seen, positives_seen, thresholds = inputs.backend.binary_curve_points(
        scores, is_positive, weight)
    return _exact_runs(fps, negatives_seen, xp), _exact_runs(tps, positives_seen, xp), thresholds


def _keep(mask, xp):
    """Indices where ``mask`` holds, the first and last point always kept."""
    edge = xp.ones(1, dtype=bool)
    return xp.nonzero(xp.concatenate([edge, mask, edge]))[0]


def exact_float64(values, xp, *, from_bits: bool | None = None):
    """``values`` as float64, exactly, on any backend. CuPy compiles its own
    kernels with -ftz=true, so its float32 -> float64 conversion turns
    subnormals into 0; those are widened from their bits instead (integer and
    float64 operations are not flushed). ``from_bits`` forces that path
    (default: for float32 arrays of a device backend)."""
    wide = values.astype(np.float64)
    if from_bits is None:
        from_bits = xp is not np and values.dtype == np.float32
    if not from_bits:
        return wide
    bits = values.view(np.uint32)
    exponent = xp.bitwise_and(bits, np.uint32(0x7F800000))
    mantissa = xp.bitwise_and(bits, np.uint32(0x007FFFFF))
    subnormal = xp.equal(exponent, 0)  # and the zeros, which it keeps
    magnitude = xp.multiply(mantissa.astype(np.float64), 2.0**-149)
    negative = xp.equal(xp.right_shift(bits, np.uint32(31)), 1)
    return xp.where(subnormal, xp.where(negative, -magnitude, magnitude), wide)


@on_caller_stream
def roc_curve(y_true: ArrayLike, y_score: ArrayLike, *, pos_label: int | None = None,
              sample_weight: ArrayLike | None = None,
              drop_intermediate: bool = True) -> tuple[ArrayLike, ArrayLike, ArrayLike]:
    """Receiver operating characteristic: false and true positive rates per threshold.

    As ``sklearn.metrics.roc_curve``: one point per distinct score (ties are
    one point), a first point (0, 0) at threshold ``inf``, samples of zero
    weight left out.

    Parameters
    ----------
    y_true : array-like of shape (N,)
        Binary labels; with ``pos_label`` given, any integer labels (that
        class against the rest).
    y_score : array-like of shape (N,)
        Scores: higher means more likely positive.
    pos_label : int, optional
        The positive class. ``None`` means 1, which needs labels within
        {0, 1} or {-1, 1}.
    sample_weight : array-like of shape (N,), optional
        Non-negative weights.
    drop_intermediate : bool, default True
        Drop the thresholds whose point is collinear with its neighbours
        (they change neither the area nor the plotted curve).

    Returns
    -------
    fpr, tpr : array of shape (M + 1,), float64
        Increasing rates; NaN (with an ``UndefinedMetricWarning``) when
        ``y_true`` has no negatives (``fpr``) or no positives (``tpr``).
    thresholds : array of shape (M + 1,), float64
        Decreasing; ``thresholds[0]`` is ``inf``.

    See Also
    --------
    roc_auc_score : The area under this curve (without a sync).
    precision_recall_curve : Precision and recall per threshold.

    Notes
    -----
    Arrays come back in the input's framework and on its device. Syncs: the
    distinct labels, the number of points and the two totals are read back.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu._functional.ranking import roc_curve
    >>> fpr, tpr, thresholds = roc_curve(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8]))
    >>> fpr
    array([0. , 0. , 0.5, 0.5, 1. ])
    >>> tpr
    array([0. , 0.5, 0.5, 1. , 1. ])
    >>> thresholds
    array([ inf, 0.8 , 0.4 , 0.35, 0.1 ])
    """
    drop_intermediate = check_drop_intermediate(drop_intermediate)
    inputs = check_ranking_inputs(y_true, y_score, sample_weight)
    classes = present_labels(inputs)
    check_binary_scores(inputs, "roc_curve", classes)
    pos_label = check_curve_pos_label(pos_label, classes)
    check_some_weight(inputs)
    xp = inputs.backend.xp
    fps, tps, thresholds = _binary_curve(inputs, pos_label)
    if drop_intermediate and fps.shape[0] > 2:
        # A second difference of 0 in both rates: the point is on the line
        # through its neighbours.
        corners = _keep(xp.not_equal(xp.diff(fps, 2), 0) | xp.not_equal(xp.diff(tps, 2), 0), xp)
        fps, tps, thresholds = fps[corners], tps[corners], thresholds[corners]
    start = xp.zeros(1, dtype=np.float64)
    fps, tps = xp.concatenate([start, fps]), xp.concatenate([start, tps])
    thresholds = xp.concatenate([xp.full(1, xp.inf), exact_float64(thresholds, xp)])
    if float(fps[-1]) <= 0:
        F.warn(_NO_NEGATIVES, F.UndefinedMetricWarning)
    if float(tps[-1]) <= 0:
        F.warn(_NO_POSITIVES, F.UndefinedMetricWarning)
    fpr, tpr = rate(fps, fps[-1], xp), rate(tps, tps[-1], xp)
    return output(fpr, inputs), output(tpr, inputs), output(thresholds, inputs)


@on_caller_stream
def precision_recall_curve(
    y_true: ArrayLike, y_score: ArrayLike, *, pos_label: int | None = None,
    sample_weight: ArrayLike | None = None, drop_intermediate: bool = False,
) -> tuple[ArrayLike, ArrayLike, ArrayLike]:
    """Precision and recall per threshold, as ``sklearn.metrics.precision_recall_curve``.

    Parameters
    ----------
    y_true : array-like of shape (N,)
        Binary labels; with ``pos_label`` given, any integer labels (that
        class against the rest).
    y_score : array-like of shape (N,)
        Scores: higher means more likely positive.
    pos_label : int, optional
        The positive class. ``None`` means 1, which needs labels within
        {0, 1} or {-1, 1}.
    sample_weight : array-like of shape (N,), optional
        Non-negative weights.
    drop_intermediate : bool, default False
        Keep only the first and last threshold of each run of equal recall
        (the vertical segments of the plotted curve).

    Returns
    -------
    precision : array of shape (M + 1,), float64
        Precision of ``score >= thresholds[i]`` (0 where nothing is
        predicted), then 1.
    recall : array of shape (M + 1,), float64
        Decreasing, then 0. All 1 (with a ``UserWarning``) when ``y_true`` has
        no positive weight.
    thresholds : array of shape (M,)
        The distinct scores, increasing, in ``y_score``'s dtype.

    See Also
    --------
    average_precision_score : The summary of this curve (without a sync).
    roc_curve : False and true positive rates per threshold.

    Notes
    -----
    Arrays come back in the input's framework and on its device. Syncs: the
    distinct labels, the number of points and the positive total are read back.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu._functional.ranking import precision_recall_curve
    >>> precision, recall, thresholds = precision_recall_curve(
    ...     np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8]))
    >>> precision
    array([0.5       , 0.66666667, 0.5       , 1.        , 1.        ])
    >>> recall
    array([1. , 1. , 0.5, 0.5, 0. ])
    >>> thresholds
    array([0.1 , 0.35, 0.4 , 0.8 ])
    """
    drop_intermediate = check_drop_intermediate(drop_intermediate)
    inputs = check_ranking_inputs(y_true, y_score, sample_weight)
    classes = present_labels(inputs)
    check_binary_scores(inputs, "precision_recall_curve", classes)
    pos_label = check_curve_pos_label(pos_label, classes)
    check_some_weight(inputs)
    xp = inputs.backend.xp
    fps, tps, thresholds = _binary_curve(inputs, pos_label)
    if drop_intermediate and fps.shape[0] > 2:
        # The first and last point of each run of equal true positives.
        ends = _keep(xp.not_equal(xp.diff(tps[:-1]), 0) | xp.not_equal(xp.diff(tps[1:]), 0), xp)
        fps, tps, thresholds = fps[ends], tps[ends], thresholds[ends]
    predicted = tps + fps
    defined = xp.not_equal(predicted, 0)
    precision = xp.where(defined, tps / xp.where(defined, predicted, 1.0), 0.0)
    if float(tps[-1]) == 0:
        F.warn(_NO_POSITIVE_CLASS, UserWarning)
        recall = xp.ones(tps.shape, dtype=np.float64)
    else:
        recall = tps / tps[-1]
    precision = xp.concatenate([xp.flip(precision), xp.ones(1, dtype=np.float64)])
    recall = xp.concatenate([xp.flip(recall), xp.zeros(1, dtype=np.float64)])
    return output(precision, inputs), output(recall, inputs), output(xp.flip(thresholds), inputs)


# -- scores --------------------------------------------------------------------------


@on_caller_stream
def roc_auc_score(y_true: ArrayLike, y_score: ArrayLike, *,
                  average: RankingAverage | None = "macro",
                  sample_weight: ArrayLike | None = None, max_fpr: float | None = None,
                  multi_class: MultiClass = "raise", labels: ArrayLike | None = None,
                  validate: bool = True) -> Any:
    """Area under the ROC curve, as ``sklearn.metrics.roc_auc_score``.

    Parameters
    ----------
    y_true : array-like of shape (N,) or (N, L)
        Class codes. Binary: the larger of the two labels is the positive
        class. Multiclass: the score columns are the classes present, sorted
        (or ``labels``). Multilabel: an (N, L) 0/1 indicator matrix, L >= 2,
        each label column a binary problem of its score column.
    y_score : array-like of shape (N,), (N, K) or (N, L)
        Binary: the positive class's scores. Multiclass: probabilities whose
        rows sum to 1 (``ValueError`` otherwise, as scikit-learn).
        Multilabel: any finite scores, one column per label.
    average : {'macro', 'weighted', 'micro', 'samples', None}, default 'macro'
        Multiclass averaging (ignored for binary ``y_true``): 'macro' the mean
        over classes (or pairs), 'weighted' by class weight ('ovr') or pair
        prevalence ('ovo'), 'micro' one problem over all N K scores ('ovr'
        only), None the per-class AUCs ('ovr' only). Multilabel: the same
        over label columns ('weighted' by each label's positive weight),
        'micro' one problem over all N L scores, and 'samples' the mean over
        rows (weighted by ``sample_weight``) of each row's AUC over its L
        labels; a label (or row) with one class present is NaN with an
        ``UndefinedMetricWarning``.
    sample_weight : array-like of shape (N,), optional
        Non-negative weights; not with ``multi_class='ovo'`` (as scikit-learn).
    max_fpr : float in (0, 1], optional
        Binary and multilabel (each binary problem): McClish's standardised
        partial AUC up to this false positive rate.
    multi_class : {'raise', 'ovr', 'ovo'}, default 'raise'
        'ovr': each class against the rest; 'ovo': Hand & Till's mean of the
        pairwise AUCs, each pair the mean of its two one-way AUCs.
    labels : array-like of class codes, optional
        Multiclass: the class of each score column, sorted; ``y_true`` must be
        within them.
    validate : bool, default True
        False skips what reads data back on a GPU: scores and weights are not
        checked (NaN, infinities, negative weights), and with ``(N,)`` scores
        the labels are not read either: the greatest label (found on the
        device) is the positive class, one class gives NaN without a
        warning, and a third class is not refused. The sort's one read
        remains.

    Returns
    -------
    auc : float or array of shape (K,)
        float64 (a ``numpy.float64`` for NumPy inputs, else a 0-d array of
        the input's framework, on its device), or a (K,) array for
        ``average=None``. NaN with an ``UndefinedMetricWarning`` when
        ``y_true`` has one class (as scikit-learn 1.9, which no longer raises
        there), a class of 'ovr' is absent, or 'ovo' has no pair of present
        classes (scikit-learn: NaN for 'macro', ZeroDivisionError for
        'weighted'). Weights that are all 0 raise a ``ValueError`` as
        scikit-learn's, except the 'weighted' one-vs-rest average, which is 0
        as scikit-learn's.

    See Also
    --------
    roc_curve : The curve whose area this is.
    average_precision_score : The area under the precision-recall curve.
    multiclass_auc_mu : Kleiman and Page's multiclass AUC, with costs.

    Notes
    -----
    Syncs to find the classes of ``y_true`` (and, with weights, the class
    weight totals); a binary area reads one number back more, where its
    sort's two parts meet (scores of at most 32 bits, no weights).
    ``validate=False`` with ``(N,)`` scores leaves that read alone.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu._functional.ranking import roc_auc_score
    >>> float(roc_auc_score(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8])))
    0.75
    >>> y_score = np.array([[0.7, 0.2, 0.1], [0.4, 0.3, 0.3], [0.1, 0.8, 0.1],
    ...                     [0.2, 0.3, 0.5], [0.4, 0.4, 0.2], [0.1, 0.2, 0.7]])
    >>> round(float(roc_auc_score(np.array([0, 0, 1, 1, 2, 2]), y_score, multi_class="ovr")), 6)
    0.833333
    >>> y_labels = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0], [0, 0, 1]])  # multilabel
    >>> y_score = np.array([[0.9, 0.2, 0.6], [0.3, 0.7, 0.4], [0.8, 0.5, 0.3], [0.1, 0.6, 0.7]])
    >>> roc_auc_score(y_labels, y_score, average=None)
    array([1.  , 0.75, 1.  ])
    """
    check_ranking_average(average)
    max_fpr = check_max_fpr(max_fpr)
    multi_class = check_multi_class(multi_class)
    validate = check_bool(validate, "validate")
    if is_label_indicator(y_true):
        indicators = check_indicator_inputs(y_true, y_score, sample_weight,
                                            function="roc_auc_score", validate=validate,
                                            allow_all_zero=True)
        return output(_multilabel_average(indicators, "roc_auc", average, max_fpr), indicators)
    inputs = check_ranking_inputs(y_true, y_score, sample_weight, validate=validate)
    if not validate and inputs.y_score.ndim == 1:
        # Binary, unread: the greatest label against the others, on the device.
        labels_on_device = inputs.y_true
        is_positive = labels_on_device == labels_on_device.max()
        return output(_binary_roc_auc(inputs.backend, inputs.y_score, is_positive,
                                      inputs.sample_weight, max_fpr), inputs)
    classes = present_labels(inputs)
    scores = inputs.y_score
    if classes.size > 2 or (scores.ndim == 2 and scores.shape[1] > 2):
        if max_fpr is not None and max_fpr != 1:
            raise ValueError(
                "Partial AUC computation not available in multiclass setting, 'max_fpr' must be "
                f"set to `None`, received `max_fpr={max_fpr}` instead"
            )
        if multi_class == "raise":
            raise ValueError(
                f"multi_class must be in ('ovo', 'ovr') for multiclass y_true (classes "
                f"{classes.tolist()}, y_score of shape {tuple(scores.shape)})"
            )
        return _multiclass_roc_auc(inputs, classes, labels, multi_class, average)
    if classes.size < 2:
        F.warn(_ONE_CLASS, F.UndefinedMetricWarning)
        return output(math.nan, inputs)
    check_binary_scores(inputs, "roc_auc_score")
    xp = inputs.backend.xp
    # scikit-learn's label_binarize: the larger label is the positive class.
    is_positive = xp.equal(inputs.y_true, classes[-1])
    if inputs.sample_weight is not None:
        check_some_weight(inputs)
        positive_weight, negative_weight = positive_negative_weights(
            is_positive, inputs.sample_weight, xp)
        totals = _host(xp.stack([xp.sum(negative_weight), xp.sum(positive_weight)]), inputs)
        _warn_undefined_rates(*totals)
    auc = _binary_roc_auc(inputs.backend, inputs.y_score, is_positive, inputs.sample_weight,
                          max_fpr)
    return output(auc, inputs)


def _host(array, inputs) -> np.ndarray:
    return np.asarray(inputs.backend.to_host(array))


def _warn_undefined_rates(negative_total, positive_total) -> None:
    """scikit-learn's roc_curve warnings, in its order."""
    if negative_total <= 0:
        F.warn(_NO_NEGATIVES, F.UndefinedMetricWarning)
    if positive_total <= 0:
        F.warn(_NO_POSITIVES, F.UndefinedMetricWarning)


@dataclass(frozen=True)
class _ClassTotals:
    """Per score column, on the host: samples and weight (samples without weights)."""

    counts: np.ndarray
    weights: np.ndarray


def _class_positions(inputs, columns: np.ndarray):
    """Each sample's column: the position of its label in ``columns`` (sorted)."""
    xp = inputs.backend.xp
    return xp.searchsorted(inputs.backend.asarray(columns), inputs.y_true)


def _class_totals(codes, sample_weight, num_classes: int, inputs) -> _ClassTotals:
    """Class sizes and weights in one read-back (one sync)."""
    xp = inputs.backend.xp
    counts = xp.bincount(codes, minlength=num_classes).astype(np.float64)
    if sample_weight is None:
        host = _host(counts, inputs)
        return _ClassTotals(host.astype(np.int64), host)
    weights = xp.bincount(codes, weights=sample_weight.astype(np.float64), minlength=num_classes)
    host = _host(xp.stack([counts, weights]), inputs)
    return _ClassTotals(host[0].astype(np.int64), host[1])


def _multiclass_roc_auc(inputs, classes, labels, multi_class, average):
    """scikit-learn's ``_multiclass_roc_auc_score``, its checks in its order."""
    check_multiclass_scores(inputs, classes)
    options = (("micro",) if multi_class == "ovr" else ()) + ("macro", "weighted", None)
    check_ranking_average(average, options, "multiclass")
    if average is None and multi_class == "ovo":
        raise NotImplementedError("average=None is not implemented for multi_class='ovo'.")
    num_columns = inputs.y_score.shape[1]
    columns = check_multiclass_roc_labels(labels, classes, num_columns)
    codes = _class_positions(inputs, columns)
    if multi_class == "ovo":
        if inputs.sample_weight is not None:
            raise ValueError(
                "sample_weight is not supported for multiclass one-vs-one ROC AUC, "
                "'sample_weight' must be None in this case."
            )
        totals = _class_totals(codes, None, num_columns, inputs)
        return output(_one_vs_one_roc_auc(inputs.backend, inputs.y_score, codes, totals,
                                           average), inputs)
    totals = _class_totals(codes, inputs.sample_weight, num_columns, inputs)
    if average == "micro":
        return output(_micro_average(inputs, codes, "roc_auc"), inputs)
    return output(_average_one_vs_rest(inputs, codes, totals, "roc_auc", average), inputs)


def _one_vs_rest(inputs, codes, totals: _ClassTotals, metric: str):
    """The binary metric of each score column against the rest, as a (K,) array,
    every column from one call of the backend's ``label_rank_areas`` (on a
    kernel backend, the same launches for any K).

    ROC AUC of a class that is absent or alone is NaN (scikit-learn's
    one-class case); zero-weight positives or negatives make it NaN too.
    Average precision of a class with no positive weight is 0. The warnings
    and errors come first, column by column, as scikit-learn gives them.
    """
    xp = inputs.backend.xp
    n_samples, num_columns = inputs.y_score.shape
    # Where scikit-learn computes a weighted curve it rejects no weight.
    _label_checks(metric, None if inputs.sample_weight is None else n_samples, totals.counts,
                  n_samples, totals.weights, float(totals.weights.sum()))
    relevant = xp.equal(codes[:, None], xp.arange(num_columns)[None, :])
    areas = inputs.backend.label_rank_areas(inputs.y_score, relevant, inputs.sample_weight)
    return areas[0 if metric == "roc_auc" else 1]


def _micro_average(inputs, codes, metric: str):
    """One binary problem over all N K (sample, class) scores: the sample's own
    class is the positive."""
    xp = inputs.backend.xp
    n_samples, num_columns = inputs.y_score.shape
    is_positive = (codes[:, None] == xp.arange(num_columns)[None, :]).reshape(-1)
    check_some_weight(inputs)
    weight = inputs.sample_weight
    if weight is not None:
        weight = xp.repeat(weight, num_columns)
    scores = inputs.y_score.reshape(-1)
    if metric == "roc_auc":
        if weight is not None:
            total = float(_host(xp.sum(inputs.sample_weight.astype(np.float64)), inputs))
            _warn_undefined_rates((num_columns - 1) * total, total)
        return _binary_roc_auc(inputs.backend, scores, is_positive, weight)
    if weight is not None:
        positive_total = xp.sum(xp.where(is_positive, weight.astype(np.float64), 0.0))
        if float(_host(positive_total, inputs)) <= 0:
            F.warn(_NO_POSITIVE_CLASS, UserWarning)
    return _binary_average_precision(inputs.backend, scores, is_positive, weight)


def _average_one_vs_rest(inputs, codes, totals: _ClassTotals, metric: str, average):
    """scikit-learn's ``_average_binary_score``: per-class values (None), their
    mean ('macro') or their mean weighted by each class's weight as the positive
    ('weighted'), where classes of zero weight count 0 (their NaN must not
    spread) and no weight at all gives 0 without computing anything."""
    xp = inputs.backend.xp
    if average == "weighted" and abs(totals.weights.sum()) <= 1e-8:
        return 0.0
    per_class = _one_vs_rest(inputs, codes, totals, metric)
    if average is None:
        return per_class
    if average == "macro":
        return xp.mean(per_class)
    weight = xp.asarray(totals.weights)
    per_class = xp.where(xp.equal(weight, 0), 0.0, per_class)
    return xp.sum(per_class * weight) / xp.sum(weight)


def _class_members(codes, counts: np.ndarray, xp) -> list:
    """The sample indices of each class, in input order (one stable sort, no sync:
    the class sizes are known on the host)."""
    order = stable_argsort(codes, xp)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    return [order[bounds[c]:bounds[c + 1]] for c in range(counts.size)]


def _one_vs_one_roc_auc(backend, scores, codes, totals: _ClassTotals, average):
    """Hand & Till (2001): the mean over pairs of present classes (a, b) of
    ½ (AUC of a against b on column a + AUC of b against a on column b);
    'weighted' weighs a pair by the fraction of samples in a or b."""
    xp = backend.xp
    members = _class_members(codes, totals.counts, xp)
    present = np.flatnonzero(totals.counts)
    n_samples = int(totals.counts.sum())
    if present.size < 2:
        # scikit-learn averages an empty list of pairs: NaN for 'macro' (with a
        # RuntimeWarning) and ZeroDivisionError for 'weighted'; both are NaN here.
        F.warn(_NO_PAIR, F.UndefinedMetricWarning)
        return xp.full((), xp.nan)
    pair_values, prevalence = [], []
    for a, b in combinations(present.tolist(), 2):
        in_a, in_b = members[a], members[b]
        a_over_b = _two_class_auc(backend, scores[in_a, a], scores[in_b, a], None, None)
        b_over_a = _two_class_auc(backend, scores[in_b, b], scores[in_a, b], None, None)
        pair_values.append(xp.divide(a_over_b + b_over_a, 2))
        prevalence.append((totals.counts[a] + totals.counts[b]) / n_samples)
    pair_values = xp.stack(pair_values)
    if average == "weighted":
        weight = xp.asarray(np.asarray(prevalence))
        return xp.sum(pair_values * weight) / xp.sum(weight)
    return xp.mean(pair_values)


@on_caller_stream
def average_precision_score(y_true: ArrayLike, y_score: ArrayLike, *,
                            average: RankingAverage | None = "macro", pos_label: int = 1,
                            sample_weight: ArrayLike | None = None,
                            validate: bool = True) -> Any:
    """Average precision Σ (R_n - R_{n-1}) P_n, as ``sklearn.metrics.average_precision_score``.

    Not interpolated (no trapezoid): each threshold's precision weighted by
    the recall it adds.

    Parameters
    ----------
    y_true : array-like of shape (N,) or (N, L)
        Class codes. Binary (``pos_label`` is the positive class), or
        multiclass: each class present against the rest, the score columns
        being those classes, sorted. Multilabel: an (N, L) 0/1 indicator
        matrix, L >= 2, each label column a binary problem.
    y_score : array-like of shape (N,), (N, K) or (N, L)
        Binary: the positive class's scores. Multiclass: one column per class
        present (any scores, not only probabilities). Multilabel: one column
        per label.
    average : {'macro', 'weighted', 'micro', 'samples', None}, default 'macro'
        Multiclass and multilabel averaging (ignored for binary ``y_true``);
        'samples' averages each sample's AP over the classes (multiclass: 1 /
        the rank of its own class; multilabel: the row's AP over its L labels,
        0 with a ``UserWarning`` for a row without relevant labels, the
        ``label_ranking_average_precision_score`` of the row otherwise).
    pos_label : int, default 1
        Binary only; must be 1 for multiclass and multilabel ``y_true``.
    sample_weight : array-like of shape (N,), optional
        Non-negative weights.
    validate : bool, default True
        False skips what reads data back on a GPU: scores and weights are not
        checked (NaN, infinities, negative weights), and with ``(N,)`` scores
        the labels are not read either: ``pos_label`` is the positive class
        whatever the others, and no positive weight gives 0 without a
        warning. The sort's one read remains.

    Returns
    -------
    average_precision : float or array of shape (K,)
        float64 (a ``numpy.float64`` for NumPy inputs, else a 0-d array of
        the input's framework, on its device), or a (K,) array for
        ``average=None``. 0 with a ``UserWarning`` when the positive class has
        no weight.

    See Also
    --------
    precision_recall_curve : The curve this summarises.
    roc_auc_score : The area under the ROC curve.

    Notes
    -----
    Syncs once to find the classes of ``y_true`` (and, with weights, the class
    weight totals); the sums themselves are computed without a sync.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu._functional.ranking import average_precision_score
    >>> round(float(average_precision_score(np.array([0, 0, 1, 1]),
    ...                                     np.array([0.1, 0.4, 0.35, 0.8]))), 6)
    0.833333
    >>> y_score = np.array([[0.7, 0.2, 0.1], [0.4, 0.3, 0.3], [0.1, 0.8, 0.1],
    ...                     [0.2, 0.3, 0.5], [0.4, 0.4, 0.2], [0.1, 0.2, 0.7]])
    >>> round(float(average_precision_score(np.array([0, 0, 1, 1, 2, 2]), y_score)), 6)
    0.777778
    """
    check_ranking_average(average, RANKING_AVERAGE_OPTIONS)
    validate = check_bool(validate, "validate")
    if is_label_indicator(y_true):
        if _check_label_value(pos_label, "pos_label") != 1:
            raise ValueError(
                "Parameter pos_label is fixed to 1 for multilabel-indicator y_true. Do not set "
                f"pos_label or set pos_label to 1 (got {pos_label!r})."
            )
        indicators = check_indicator_inputs(y_true, y_score, sample_weight,
                                            function="average_precision_score",
                                            validate=validate, allow_all_zero=True)
        return output(_multilabel_average(indicators, "average_precision", average), indicators)
    inputs = check_ranking_inputs(y_true, y_score, sample_weight, validate=validate)
    if not validate and inputs.y_score.ndim == 1:
        # Binary, unread: pos_label against the others.
        return output(_binary_average_precision(inputs.backend, inputs.y_score,
                                                inputs.y_true == pos_label,
                                                inputs.sample_weight), inputs)
    classes = present_labels(inputs)
    pos_label = check_average_precision_pos_label(pos_label, classes)
    xp = inputs.backend.xp
    if classes.size > 2:
        check_per_class_scores(inputs, classes)
        codes = _class_positions(inputs, classes)
        totals = _class_totals(codes, inputs.sample_weight, classes.size, inputs)
        if average == "micro":
            return output(_micro_average(inputs, codes, "average_precision"), inputs)
        if average == "samples":
            return output(_samples_average_precision(inputs, codes), inputs)
        return output(_average_one_vs_rest(inputs, codes, totals, "average_precision", average),
                       inputs)
    check_binary_scores(inputs, "average_precision_score")
    is_positive = inputs.backend.xp.equal(inputs.y_true, pos_label)
    if inputs.sample_weight is None:
        has_positives = pos_label in classes
    else:
        check_some_weight(inputs)
        positive_weight, _ = positive_negative_weights(is_positive, inputs.sample_weight, xp)
        has_positives = float(_host(xp.sum(positive_weight), inputs)) > 0
    if not has_positives:
        F.warn(_NO_POSITIVE_CLASS, UserWarning)
    ap = _binary_average_precision(inputs.backend, inputs.y_score, is_positive,
                                   inputs.sample_weight)
    return output(ap, inputs)


def _samples_average_precision(inputs, codes):
    """'samples': one positive per sample (its class), so its AP is 1 / the number
    of classes scored at least as high; averaged with the sample weights."""
    xp = inputs.backend.xp
    scores = inputs.y_score
    own = xp.take_along_axis(scores, codes[:, None], axis=1)
    rank = xp.sum(scores >= own, axis=1)
    per_sample = 1.0 / rank
    check_some_weight(inputs)  # scikit-learn: a mean over no weight raises
    weight = inputs.sample_weight
    if weight is None:
        return xp.mean(per_sample)
    weight = weight.astype(np.float64)
    return xp.sum(xp.where(weight == 0, 0.0, per_sample) * weight) / xp.sum(weight)


# -- multilabel indicators ----------------------------------------------------------


def _indicator_binary(backend, scores, is_positive, weight, metric: str, max_fpr,
                      count: int, size: int, positive_weight: float, total_weight: float):
    """One binary problem of an indicator matrix (a label column, a row, or all
    of it), with scikit-learn's warnings: ROC AUC of one class present is NaN
    (without a pass), average precision without positive weight is 0.
    ``count``: positives among ``size``; the weights are totals on the host.
    Weights all 0 raise where a problem is computed (scikit-learn's order)."""
    n = None if weight is None else weight.shape[0]
    if not _indicator_checks(metric, n, count, size, positive_weight, total_weight):
        return backend.xp.full((), backend.xp.nan)
    if metric == "roc_auc":
        return _binary_roc_auc(backend, scores, is_positive, weight, max_fpr)
    return _binary_average_precision(backend, scores, is_positive, weight)


def _indicator_checks(metric: str, weighted_n, count: int, size: int, positive_weight: float,
                      total_weight: float) -> bool:
    """The warnings and the error of one binary problem, on the host; False
    where its ROC AUC is NaN without a pass (one class). ``weighted_n``: the
    number of sample weights, None without weights."""
    if metric == "roc_auc" and count in (0, size):
        F.warn(_ONE_CLASS, F.UndefinedMetricWarning)
        return False
    if weighted_n is not None and total_weight <= 0:
        raise ValueError(ALL_ZERO_WEIGHT.format(n=weighted_n))
    if metric == "roc_auc":
        if weighted_n is not None:
            _warn_undefined_rates(total_weight - positive_weight, positive_weight)
    elif positive_weight <= 0:
        F.warn(_NO_POSITIVE_CLASS, UserWarning)
    return True


def _label_checks(metric: str, weighted_n, counts: np.ndarray, size: int,
                  weights: np.ndarray, total_weight: float) -> None:
    """:func:`_indicator_checks` of every column, in column order, for the
    columns that warn or raise only (host arrays: no Python loop over the
    others, which matters at a large K)."""
    if metric == "roc_auc":
        flagged = (counts == 0) | (counts == size)
        if weighted_n is not None:
            flagged = flagged | (total_weight <= 0) | (total_weight - weights <= 0) | (
                weights <= 0)
    else:
        flagged = weights <= 0
        if weighted_n is not None and total_weight <= 0:
            flagged = np.ones_like(flagged)
    for c in np.flatnonzero(flagged):
        _indicator_checks(metric, weighted_n, int(counts[c]), size, float(weights[c]),
                          total_weight)


def _multilabel_average(inputs: IndicatorInputs, metric: str, average, max_fpr=None):
    """scikit-learn's ``_average_binary_score`` over an (N, L) indicator matrix.

    'micro': one problem of all N L scores (weights repeated per label);
    'macro' / 'weighted' / None: one problem per label column ('weighted' by
    each label's positive weight, 0 without any, labels of zero weight
    counting 0); 'samples': one problem per row over its L labels, without
    weights inside, averaged with the sample weights (rows of zero weight
    counting 0). ``max_fpr`` applies to every problem. Syncs once for the
    per-problem totals.
    """
    xp, backend = inputs.backend.xp, inputs.backend
    relevant, scores, weight = inputs.y_true, inputs.y_score, inputs.sample_weight
    n, num_labels = relevant.shape
    as_weight = relevant.astype(np.float64)
    if weight is not None:
        as_weight = as_weight * weight[:, None]
    label_counts = xp.sum(relevant, axis=0).astype(np.float64)
    label_weights = xp.sum(as_weight, axis=0)
    total = xp.sum(weight) if weight is not None else xp.asarray(float(n))
    host = _host(xp.concatenate([label_counts, label_weights, total[None]]), inputs)
    counts, weights, total_weight = host[:num_labels], host[num_labels:-1], float(host[-1])
    if average == "weighted" and math.isclose(weights.sum(), 0, rel_tol=1e-5, abs_tol=1e-8):
        return 0.0  # scikit-learn: before anything is computed
    if average == "micro":
        repeated = None if weight is None else xp.repeat(weight, num_labels)
        return _indicator_binary(backend, scores.reshape(-1), relevant.reshape(-1), repeated,
                                 metric, max_fpr, int(counts.sum()), n * num_labels,
                                 float(weights.sum()), total_weight * num_labels)
    if average == "samples":
        per_row = _samples_problems(inputs, metric, max_fpr)
        if weight is None:
            return xp.mean(per_row)
        if total_weight <= 0:  # scikit-learn: ZeroDivisionError in its np.average
            raise ValueError(ALL_ZERO_WEIGHT.format(n=n))
        return xp.sum(xp.where(weight == 0, 0.0, per_row) * weight) / xp.sum(weight)
    per_label = _label_columns(backend, scores, relevant, weight, metric, max_fpr, counts,
                               weights, total_weight)
    if average is None:
        return per_label
    if average == "macro":
        return xp.mean(per_label)
    label_weight = xp.asarray(weights)
    per_label = xp.where(xp.equal(label_weight, 0), 0.0, per_label)
    return xp.sum(per_label * label_weight) / xp.sum(label_weight)


def _label_columns(backend, scores, relevant, weight, metric: str, max_fpr, counts: np.ndarray,
                   weights: np.ndarray, total_weight: float):
    """Each label column's binary problem (:func:`_label_checks`: the
    warnings, NaN and errors of :func:`_indicator_binary`, in label order),
    every column from one call of the backend's ``label_rank_areas`` (on a
    kernel backend, the same launches for any number of labels)."""
    n = relevant.shape[0]
    _label_checks(metric, None if weight is None else n, counts, n, weights, total_weight)
    areas = backend.label_rank_areas(scores, relevant, weight, max_fpr)
    return areas[0 if metric == "roc_auc" else 1]


def _samples_problems(inputs: IndicatorInputs, metric: str, max_fpr):
    """Each row's metric over its L labels, unweighted, from the rows' ranks
    at once: average precision (LRAP's, except that a row without relevant
    labels is 0) and ROC AUC (NaN for a row of one class); the partial ROC
    AUC (``max_fpr``) one row at a time through the binary area."""
    xp, backend = inputs.backend.xp, inputs.backend
    relevant, scores = inputs.y_true, inputs.y_score
    num_labels = relevant.shape[1]
    row_counts = _host(xp.sum(relevant, axis=1), inputs)
    if metric == "average_precision":
        if np.any(row_counts == 0):
            F.warn(_NO_POSITIVE_CLASS, UserWarning)
        return each_row(inputs, partial(row_average_precision, empty_rows=0.0))
    if max_fpr is None or max_fpr == 1:
        if np.any((row_counts == 0) | (row_counts == num_labels)):
            F.warn(_ONE_CLASS, F.UndefinedMetricWarning)
        return each_row(inputs, row_roc_auc)
    return xp.stack([
        _indicator_binary(backend, scores[i], relevant[i], None, metric, max_fpr,
                          int(row_counts[i]), num_labels, float(row_counts[i]),
                          float(num_labels))
        for i in range(relevant.shape[0])
    ])


# -- AUC-mu ---------------------------------------------------------------------------


def _expected_costs(scores, cost_matrix, xp):
    """``d[n, r] = Σ_k M[r, k] scores[n, k]``, the expected cost of predicting r.

    Added in column order, as CatBoost's loop (the ties that AUC-mu sees
    depend on the rounding). Without a matrix, CatBoost's shortcut for the
    default costs (1 off the diagonal): the row total minus the class's score.
    """
    if cost_matrix is None:
        total = scores[:, 0]
        for k in range(1, scores.shape[1]):
            total = total + scores[:, k]
        return total[:, None] - scores
    matrix = xp.asarray(cost_matrix)
    costs = xp.zeros(scores.shape, dtype=np.float64)
    for k in range(scores.shape[1]):
        costs = costs + scores[:, k:k + 1] * matrix[:, k][None, :]
    return costs


def _auc_mu(backend, scores, codes, sample_weight, counts: np.ndarray, cost_matrix):
    """AUC-mu (Kleiman & Page, ICML 2019) as CatBoost's ``CalcMuAuc``.

    For each pair of classes i < j, samples of i and j are ranked by
    ``d_i - d_j`` (the cost of predicting i minus that of predicting j, its sign
    flipped when ``M[i, j] + M[j, i] < 0``) and A(i, j) is the weighted
    probability that a sample of j ranks above one of i, ties counting ½
    (exactly ½ when ``M[i, j] + M[j, i] = 0``). The result is
    2 / (K (K - 1)) Σ A(i, j); pairs with an absent class add 0.
    """
    xp = backend.xp
    num_classes = scores.shape[1]
    costs = _expected_costs(scores, cost_matrix, xp)
    members = _class_members(codes, counts, xp)
    weight = None if sample_weight is None else sample_weight.astype(np.float64)
    total = xp.zeros((), dtype=np.float64)
    for i, j in combinations(range(num_classes), 2):
        if counts[i] == 0 or counts[j] == 0:
            continue
        direction = 2.0 if cost_matrix is None else cost_matrix[i, j] + cost_matrix[j, i]
        if direction == 0:
            total = total + 0.5
            continue
        margin = costs[:, i] - costs[:, j]
        if direction < 0:
            margin = -margin
        in_i, in_j = members[i], members[j]
        total = total + _two_class_auc(
            backend, margin[in_j], margin[in_i],
            None if weight is None else weight[in_j], None if weight is None else weight[in_i],
        )
    return xp.divide(2.0 * total, num_classes * (num_classes - 1))


@on_caller_stream
def multiclass_auc_mu(y_true: ArrayLike, y_score: ArrayLike,
                      cost_matrix: ArrayLike | str | None = None, *,
                      sample_weight: ArrayLike | None = None) -> Any:
    """AUC-mu of Kleiman & Page (ICML 2019), as CatBoost's ``AUC:type=Mu``.

    The mean over pairs of classes i < j of the AUC that separates class j
    from class i when samples are ranked by ``d_i - d_j``, where
    ``d_r = Σ_k M[r, k] y_score[:, k]`` is the expected cost of predicting
    class r. Ties count ½.

    Parameters
    ----------
    y_true : array-like of shape (N,)
        Class codes 0..K-1.
    y_score : array-like of shape (N, K)
        Used as given, in float64: AUC-mu is not invariant to a softmax.
        CatBoost's ``AUC:type=Mu`` ranks its raw approxes (pass those to
        reproduce it); the paper ranks probability estimates.
    cost_matrix : array-like of shape (K, K) or str, optional
        ``M[i, j]``: the cost of predicting class i when the truth is j; finite,
        0 on the diagonal (CatBoost's ``"M00/M01/..."`` string is read too).
        Default: 1 off the diagonal. A pair with
        ``M[i, j] + M[j, i] = 0`` scores ½; a negative sum reverses its ranking.
    sample_weight : array-like of shape (N,), optional
        Non-negative weights (CatBoost stores them as float32; round them so to
        reproduce it exactly).

    Returns
    -------
    auc_mu : float
        float64 (a ``numpy.float64`` for NumPy inputs, else a 0-d array of
        the input's framework, on its device). A class without samples leaves
        its pairs at 0 while still counting them, as CatBoost (with an
        ``UndefinedMetricWarning``); a pair whose weights are all 0 makes the
        result NaN.

    See Also
    --------
    roc_auc_score : One-vs-rest and one-vs-one (Hand & Till) multiclass AUC.
    catboost_metric : ``"AUC:type=Mu"`` as CatBoost evaluates it.

    Notes
    -----
    Syncs once (the class sizes); the areas are computed without a sync.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu._functional.ranking import multiclass_auc_mu
    >>> y_score = np.array([[0.7, 0.2, 0.1], [0.4, 0.3, 0.3], [0.1, 0.8, 0.1],
    ...                     [0.2, 0.3, 0.5], [0.4, 0.4, 0.2], [0.1, 0.2, 0.7]])
    >>> round(float(multiclass_auc_mu(np.array([0, 0, 1, 1, 2, 2]), y_score)), 6)
    0.833333
    """
    inputs = check_ranking_inputs(y_true, y_score, sample_weight)
    num_classes = check_auc_mu_scores(inputs)
    check_ranking_class_codes(inputs, num_classes)
    cost_matrix = check_cost_matrix(cost_matrix, num_classes, inputs.backend)
    codes = inputs.y_true.astype(np.int64)
    counts = _class_totals(codes, None, num_classes, inputs).counts
    absent = np.flatnonzero(counts == 0)
    if absent.size:
        F.warn(
            f"AUC-mu: classes {absent.tolist()} have no samples in y_true; their pairs count "
            "as 0 and still count in the mean over K (K - 1) / 2 pairs (CatBoost's convention)",
            F.UndefinedMetricWarning,
        )
    value = _auc_mu(inputs.backend, inputs.y_score.astype(np.float64), codes,
                    inputs.sample_weight, counts, cost_matrix)
    return output(value, inputs)
