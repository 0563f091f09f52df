"""The ranking metrics' formulas (as :mod:`metrics_gpu._formulas.labels` holds the
label metrics'): the ranked scan of one binary problem, written once over the
array namespace ``xp`` (NumPy, or CuPy). It is the numpy backend's ranking,
the reference of ``kernels/ranking.cu`` and the source of the curves' points.

:func:`ranked_scan` sorts the scores, descending and stable, and takes the
cumulative weights of positives (``tps``) and of negatives (``fps``) in that
order, in float64. A run of tied scores is one point of a curve, at its last
position (scikit-learn's ``_binary_clf_curve``). A score needs no compaction:
:func:`tie_group_totals` gives every position the totals of its tie group's
end, and the sums run over all positions, the zero-width steps inside a group
adding nothing: the trapezoid under the ROC curve (:func:`roc_area`, with
McClish's standardised partial area for ``max_fpr``) and the step sum of
average precision (:func:`step_average_precision`). No host sync.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

@dataclass(frozen=True)
class RankedScan:
    """Scores sorted descending, with the weights ranked at or above each position."""

    scores: Any      # (n,) sorted descending, in the input's dtype
    tps: Any         # (n,) float64 cumulative weight of positives
    fps: Any         # (n,) float64 cumulative weight of negatives
    group_last: Any  # (n,) bool: the last position of a run of equal scores
    positives_seen: Any = None  # (n,) int64 count of positives of non-zero weight (curves)
    negatives_seen: Any = None


def stable_argsort(values, xp):
    # CuPy's sort is always stable (and takes no kind other than its default).
    return xp.argsort(values, kind="stable") if xp is np else xp.argsort(values)


def descending_order(scores, xp, *, stable: bool = True):
    """Stable descending order: tied scores keep their input order (as
    scikit-learn's ``argsort(stable=True, descending=True)``, so cumulative
    float weights add up in the same order). ``stable=False``: ties in any
    order, for sums taken only at the ends of tie groups of counts (exact in
    any order): NumPy's default sort, several times faster than its stable
    one on floats (CuPy's sort is stable either way)."""
    if not stable and xp is np:
        return np.argsort(scores)[::-1]
    last = scores.shape[0] - 1
    return last - xp.flip(stable_argsort(xp.flip(scores), xp))


def ranked_scan(scores, positive_weight, negative_weight, xp, *,
                 count_samples: bool = False) -> RankedScan:
    order = descending_order(scores, xp)
    ranked = scores[order]
    positive_weight, negative_weight = positive_weight[order], negative_weight[order]
    # float64 sums: exact counts up to 2**53, and scikit-learn's dtype.
    tps = xp.cumsum(positive_weight, dtype=np.float64)
    fps = xp.cumsum(negative_weight, dtype=np.float64)
    group_last = xp.concatenate([ranked[1:] != ranked[:-1],
                                 xp.ones(min(ranked.shape[0], 1), dtype=bool)])
    if not count_samples:
        return RankedScan(ranked, tps, fps, group_last)
    return RankedScan(ranked, tps, fps, group_last,
                       xp.cumsum(positive_weight > 0, dtype=np.int64),
                       xp.cumsum(negative_weight > 0, dtype=np.int64))


def tie_group_totals(scan: RankedScan, xp):
    """``tps`` and ``fps`` at the end of each position's tie group (no compaction, no sync).

    The end of the group of the value at descending position i is where that
    value first appears in the ascending (reversed) scores.
    """
    group_end = tie_group_ends(scan.scores, xp)
    return scan.tps[group_end], scan.fps[group_end]


def tie_group_ends(ranked, xp):
    """The last position of each position's tie group in descending ``ranked``
    scores: where its value first appears in the ascending (reversed) ones."""
    return (ranked.shape[0] - 1) - xp.searchsorted(xp.flip(ranked), ranked, side="left")


def positive_negative_weights(is_positive, sample_weight, xp):
    """Per-sample weight as a positive and as a negative, float64 (0/1 without weights)."""
    positive = is_positive.astype(np.float64)
    if sample_weight is None:
        return positive, 1.0 - positive
    weight = sample_weight.astype(np.float64)
    return positive * weight, (1.0 - positive) * weight


def rate(counts, total, xp):
    """``counts / total``; NaN everywhere when the total is 0 (scikit-learn's
    undefined rate), without a division by zero."""
    defined = xp.greater(total, 0)
    return xp.where(defined, counts / xp.where(defined, total, 1.0), xp.nan)


# -- areas -------------------------------------------------------------------------


def roc_area(tps, fps, xp, max_fpr=None):
    """Trapezoid under the ROC curve through (0, 0) and the given points; with
    ``max_fpr`` < 1, McClish's standardised partial area up to it."""
    start = xp.zeros(1, dtype=np.float64)
    tpr = xp.concatenate([start, rate(tps, tps[-1], xp)])
    fpr = xp.concatenate([start, rate(fps, fps[-1], xp)])
    x0, x1, y0, y1 = fpr[:-1], fpr[1:], tpr[:-1], tpr[1:]
    full = (x1 - x0) * (y1 + y0) / 2
    if max_fpr is None or max_fpr == 1:
        return xp.sum(full)
    # Segments wholly left of max_fpr count in full; the one that crosses it is
    # cut at max_fpr, its end interpolated linearly (as numpy.interp).
    crossing = (x0 < max_fpr) & (x1 > max_fpr)
    slope = (y1 - y0) / xp.where(crossing, x1 - x0, 1.0)
    y_cut = slope * (max_fpr - x0) + y0
    cut = (max_fpr - x0) * (y0 + y_cut) / 2
    partial = xp.sum(xp.where(x1 <= max_fpr, full, xp.where(crossing, cut, 0.0)))
    standardised = mcclish_standardised(partial, max_fpr, xp)
    # Undefined rates make the whole curve undefined, as scikit-learn's.
    return xp.where(xp.isnan(tpr[-1]) | xp.isnan(fpr[-1]), xp.nan, standardised)


def mcclish_standardised(partial, max_fpr, xp):
    """McClish's standardised partial AUC up to ``max_fpr``: 0.5 for a random
    ranking, 1 for a perfect one (scikit-learn's ``max_fpr``)."""
    min_area, max_area = 0.5 * max_fpr ** 2, max_fpr
    return 0.5 * (1 + xp.divide(xp.subtract(partial, min_area), max_area - min_area))


def step_average_precision(tps, fps, xp):
    """Σ (R_n - R_{n-1}) P_n over the thresholds; 0 when there is no positive
    weight (scikit-learn then sets recall to 1 and the last precision is 0)."""
    predicted = tps + fps
    precision = xp.where(predicted > 0, tps / xp.where(predicted > 0, predicted, 1.0), 0.0)
    del predicted  # (N,) float64 arrays: the pooled micro average has N K of them
    total = tps[-1]
    recall = tps / xp.where(total > 0, total, 1.0)
    gain = xp.diff(recall, prepend=xp.zeros(1, dtype=np.float64))
    del recall
    return xp.where(total > 0, xp.maximum(xp.sum(gain * precision), 0.0), 0.0)


def check_rank_arrays(scores, is_positive, sample_weight) -> int:
    """The number of ranked samples: ``(N,)`` scores, mask and weights, N >= 1
    (a kernel sized from one of them must not read past another)."""
    n = int(scores.shape[0])
    if n == 0 or scores.ndim != 1:
        raise ValueError(f"scores must be (N,) with N >= 1, got shape {tuple(scores.shape)}")
    for name, array in (("is_positive", is_positive), ("sample_weight", sample_weight)):
        if array is not None and tuple(array.shape) != (n,):
            raise ValueError(f"{name} must have shape ({n},) like the scores, got "
                             f"{tuple(array.shape)}")
    return n


def label_pair_summary(labels, xp):
    """``(least, greatest, third)`` of non-empty labels, where they live (three
    reductions, no sync): ``third`` is whether a value other than those two
    is present."""
    low, high = xp.min(labels), xp.max(labels)
    return low, high, xp.any((labels != low) & (labels != high))


def binary_curve_points(scores, is_positive, sample_weight, xp):
    """One point per distinct score, in descending score order: ``(fps, tps,
    negatives_seen, positives_seen, thresholds)``, the cumulative negative and
    positive weights and sample counts up to and with each tie group, and its
    score (in the scores' dtype). Its length depends on the data (a sync on a
    GPU)."""
    check_rank_arrays(scores, is_positive, sample_weight)
    positive_weight, negative_weight = positive_negative_weights(is_positive, sample_weight, xp)
    scan = ranked_scan(scores, positive_weight, negative_weight, xp, count_samples=True)
    ends = xp.nonzero(scan.group_last)[0]
    return (scan.fps[ends], scan.tps[ends], scan.negatives_seen[ends],
            scan.positives_seen[ends], scan.scores[ends])


def binary_rank_areas(scores, is_positive, sample_weight, xp, max_fpr=None):
    """``[ROC AUC, average precision]`` of one binary problem, float64 where the
    scores live (no sync). ROC AUC is McClish's standardised partial area for
    ``max_fpr`` < 1, and NaN when the positive or the negative weight is 0;
    average precision is 0 when the positive weight is 0.

    The scan of :func:`ranked_scan` and :func:`tie_group_totals`, each array
    dropped once used: the class and weight are gathered in rank order before
    they become float64 weights (the same products, ranked), the order and
    the ranked scores go once the sums and the tie groups are taken. The
    pooled micro average ranks N K scores in one problem, so its peak is the
    report's.
    """
    check_rank_arrays(scores, is_positive, sample_weight)
    # Without weights the sums are counts, exact in any order within a tie.
    order = descending_order(scores, xp, stable=sample_weight is not None)
    ranked = scores[order]
    ranked_positive = is_positive[order]
    ranked_weight = None if sample_weight is None else sample_weight[order]
    del order
    positive_weight, negative_weight = positive_negative_weights(ranked_positive,
                                                                 ranked_weight, xp)
    del ranked_positive, ranked_weight
    # float64 sums: exact counts up to 2**53, and scikit-learn's dtype.
    tps = xp.cumsum(positive_weight, dtype=np.float64)
    del positive_weight
    fps = xp.cumsum(negative_weight, dtype=np.float64)
    del negative_weight
    # NumPy: the groups' last positions (compacted: a read of the flags, no
    # sort); elsewhere each position's group end (no sync). The same points,
    # the compacted curve without its repeats.
    group_end = (np.flatnonzero(np.append(ranked[1:] != ranked[:-1], True)) if xp is np
                 else tie_group_ends(ranked, xp))
    del ranked
    tps = tps[group_end]
    fps = fps[group_end]
    del group_end
    average_precision = step_average_precision(tps, fps, xp)
    return xp.stack([roc_area(tps, fps, xp, max_fpr), average_precision])
