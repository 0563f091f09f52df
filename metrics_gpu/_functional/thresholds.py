"""Counts per threshold and the curves read from them: scikit-learn's
``confusion_matrix_at_thresholds`` and ``det_curve``, and ``auc``, the
trapezoid of any curve's points.

The counts are the points of the one ranked scan of
:func:`metrics_gpu._functional.ranking._binary_curve` (the backend's
``binary_curve_points``, as ``roc_curve`` and ``precision_recall_curve``):
one point per distinct score, samples of zero weight left out. No second sort.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from metrics_gpu._functional.confusion import CallerPlacement
from metrics_gpu._functional.ranking import _binary_curve, _keep, exact_float64
from metrics_gpu._pipeline.stages import output
from metrics_gpu._common.types import ArrayLike
from metrics_gpu._validation import (
    check_binary_scores,
    check_curve_pos_label,
    check_drop_intermediate,
    check_ranking_inputs,
    check_some_weight,
    present_labels,
    to_numpy,
)
from metrics_gpu.backends.selection import on_caller_stream

_DET_ONE_CLASS = ("Only one class is present in y_true. Detection error tradeoff curve is not "
                  "defined in that case.")


def _curve_counts(y_true, y_score, pos_label, sample_weight, function: str):
    """The checked inputs and ``(fps, tps, thresholds)`` of the ranked scan, and
    the present classes."""
    inputs = check_ranking_inputs(y_true, y_score, sample_weight)
    classes = present_labels(inputs)
    check_binary_scores(inputs, function, classes)
    pos_label = check_curve_pos_label(pos_label, classes)
    check_some_weight(inputs)
    return inputs, classes, _binary_curve(inputs, pos_label)


@on_caller_stream
def confusion_matrix_at_thresholds(
    y_true: ArrayLike, y_score: ArrayLike, *, pos_label: int | None = None,
    sample_weight: ArrayLike | None = None,
) -> tuple[ArrayLike, ArrayLike, ArrayLike, ArrayLike, ArrayLike]:
    """The binary confusion matrix at every distinct score, as
    ``sklearn.metrics.confusion_matrix_at_thresholds``.

    Sample ``i`` is predicted positive at threshold ``t`` when
    ``y_score[i] >= t``.

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
        Non-negative weights; samples of weight 0 are left out.

    Returns
    -------
    tns, fps, fns, tps : array of shape (M,), float64
        Weighted true negatives, false positives, false negatives and true
        positives at each threshold.
    thresholds : array of shape (M,)
        The distinct scores, decreasing, in ``y_score``'s dtype.

    See Also
    --------
    roc_curve, det_curve : Rates from the same counts.

    Notes
    -----
    Arrays come back in the input's framework and on its device. Syncs: the
    distinct labels and the number of points are read back.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import confusion_matrix_at_thresholds
    >>> tns, fps, fns, tps, thresholds = confusion_matrix_at_thresholds(
    ...     np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8]))
    >>> tps
    array([1., 1., 2., 2.])
    >>> tns
    array([2., 1., 1., 0.])
    >>> thresholds
    array([0.8 , 0.4 , 0.35, 0.1 ])
    """
    inputs, _, (fps, tps, thresholds) = _curve_counts(
        y_true, y_score, pos_label, sample_weight, "confusion_matrix_at_thresholds")
    tns, fns = fps[-1] - fps, tps[-1] - tps
    return tuple(output(value, inputs) for value in (tns, fps, fns, tps, thresholds))


@on_caller_stream
def det_curve(y_true: ArrayLike, y_score: ArrayLike, pos_label: int | None = None,
              sample_weight: ArrayLike | None = None,
              drop_intermediate: bool = False) -> tuple[ArrayLike, ArrayLike, ArrayLike]:
    """Detection error tradeoff: false positive and false negative rates per
    threshold, as ``sklearn.metrics.det_curve``.

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
        Non-negative weights; samples of weight 0 are left out.
    drop_intermediate : bool, default False
        Keep only the first and last threshold of each run of equal true
        positives (the horizontal segments of the plotted curve).

    Returns
    -------
    fpr : array of shape (M,), float64
        Decreasing false positive rates, from the first threshold with no
        false positive on.
    fnr : array of shape (M,), float64
        Increasing false negative rates, up to the last threshold with none.
    thresholds : array of shape (M,), float64
        Increasing; the last may be ``inf`` (nothing predicted positive).

    Raises
    ------
    ValueError
        When ``y_true`` does not hold exactly two classes (as scikit-learn).

    See Also
    --------
    roc_curve : The false and true positive rates of the same counts.
    confusion_matrix_at_thresholds : The counts themselves.

    Notes
    -----
    Arrays come back in the input's framework and on its device. Syncs: the
    distinct labels, the number of points and the ends of the curve are read
    back.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import det_curve
    >>> fpr, fnr, thresholds = det_curve(np.array([0, 0, 1, 1]),
    ...                                  np.array([0.1, 0.4, 0.35, 0.8]))
    >>> fpr
    array([0.5, 0.5, 0. ])
    >>> fnr
    array([0. , 0.5, 0.5])
    >>> thresholds
    array([0.35, 0.4 , 0.8 ])
    """
    drop_intermediate = check_drop_intermediate(drop_intermediate)
    inputs, classes, (fps, tps, thresholds) = _curve_counts(
        y_true, y_score, pos_label, sample_weight, "det_curve")
    xp = inputs.backend.xp
    # The point at inf, where nothing is predicted positive.
    start = xp.zeros(1, dtype=np.float64)
    fps, tps = xp.concatenate([start, fps]), xp.concatenate([start, tps])
    thresholds = xp.concatenate([xp.full(1, xp.inf), exact_float64(thresholds, xp)])
    if drop_intermediate and fps.shape[0] > 2:
        ends = _keep(xp.not_equal(xp.diff(tps[:-1]), 0) | xp.not_equal(xp.diff(tps[1:]), 0), xp)
        fps, tps, thresholds = fps[ends], tps[ends], thresholds[ends]
    if classes.size != 2:
        raise ValueError(_DET_ONE_CLASS)
    fns = tps[-1] - tps
    # From the last point with no false positive to the first with no false
    # negative (as scikit-learn: one point of each run kept).
    first = int(xp.searchsorted(fps, fps[0:1], side="right")[0]) - 1
    last = int(xp.searchsorted(tps, tps[-1:], side="left")[0]) + 1
    with np.errstate(divide="ignore", invalid="ignore"):
        fpr = xp.flip(fps[first:last]) / fps[-1]
        fnr = xp.flip(fns[first:last]) / tps[-1]
    return output(fpr, inputs), output(fnr, inputs), output(xp.flip(thresholds[first:last]), inputs)


def auc(x: ArrayLike, y: ArrayLike) -> Any:
    """Area under a curve by the trapezoidal rule, as ``sklearn.metrics.auc``.

    Parameters
    ----------
    x : array-like of shape (M,)
        Monotonic (increasing or decreasing) abscissae, at least two.
    y : array-like of shape (M,)
        Ordinates.

    Returns
    -------
    area : float
        Computed on the host (the points of a curve are few; device arrays
        are copied back, a sync): a ``numpy.float64`` for NumPy inputs, else
        a 0-d array of ``x``'s framework on its device.

    Raises
    ------
    ValueError
        When the lengths differ, fewer than two points are given, or ``x``
        is neither increasing nor decreasing.

    See Also
    --------
    roc_auc_score : The ROC area from the scores, without the curve.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import auc, roc_curve
    >>> fpr, tpr, _ = roc_curve(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8]))
    >>> float(auc(fpr, tpr))
    0.75
    """
    x_in, y_in = x, y
    points: dict[str, Any] = {}
    for name, values in (("x", x), ("y", y)):
        array = to_numpy(values)
        if array.ndim == 2 and array.shape[1] == 1:
            array = array.ravel()
        if array.ndim != 1:
            raise ValueError(f"{name} must be 1-D, got an array of shape {array.shape}")
        points[name] = array
    x, y = points["x"], points["y"]
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must have the same length, got {x.shape[0]} and {y.shape[0]}")
    if x.shape[0] < 2:
        raise ValueError("At least 2 points are needed to compute area under curve, but "
                         f"x.shape = {x.shape[0]}")
    direction = 1
    dx = np.diff(x)
    if np.any(dx < 0):
        if not np.all(dx <= 0):
            raise ValueError(f"x is neither increasing nor decreasing : {x}.")
        direction = -1
    return output(np.float64(direction * np.trapezoid(y, x)), CallerPlacement.of(x_in, y_in))
