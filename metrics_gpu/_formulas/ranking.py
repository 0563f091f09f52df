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
:func:`multilabel_rank_areas` takes the same areas of every column of an
(N, L) matrix at once, in a number of array calls that does not grow with L.
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


def rank_areas_from_sums(areas, totals, xp, max_fpr=None):
    """``[ROC AUC, average precision]`` from the summed pieces of
    ``kernels/ranking.cu`` (full area, area up to ``max_fpr``, precision steps)
    and the (positive, negative) weight totals, as :func:`binary_rank_areas`."""
    partial = max_fpr is not None and max_fpr != 1
    auc = mcclish_standardised(areas[1], max_fpr, xp) if partial else areas[0]
    has_positives, has_negatives = xp.greater(totals[0], 0), xp.greater(totals[1], 0)
    auc = xp.where(has_positives & has_negatives, auc, xp.nan)
    average_precision = xp.where(has_positives, xp.maximum(areas[2], 0.0), 0.0)
    return xp.stack([auc, average_precision])


def step_average_precision(tps, fps, xp):
    """Σ (R_n - R_{n-1}) P_n over the thresholds; 0 when there is no positive
    weight (scikit-learn then sets recall to 1 and the last precision is 0)."""
    predicted = tps + fps
    some_predicted = xp.greater(predicted, 0)
    precision = xp.where(some_predicted, tps / xp.where(some_predicted, predicted, 1.0), 0.0)
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


# NumPy's block of columns in multilabel_rank_areas: 2**20 scores, each
# temporary 8 MiB or less.
HOST_BLOCK_SCORES = 2**20


def _previous(values, xp):
    """Each row's values one position on, 0 in front: the point before each
    position of an (L, N) scan, (0, 0) before the first."""
    zero = xp.zeros((values.shape[0], 1), dtype=values.dtype)
    return xp.concatenate([zero, values[:, :-1]], axis=1)


def multilabel_rank_areas(scores, relevant, sample_weight, xp):
    """``[ROC AUC, average precision]`` of every column of ``(N, L)`` scores
    against its column of ``relevant``, ``(2, L)`` float64 where the scores
    live (no sync): :func:`binary_rank_areas` (full area) of each label at
    once, in a number of array calls that does not grow with L.

    Each column is sorted descending (stable where weights make the order
    of the sums matter; without weights the sums are counts, exact in any
    order); the cumulative positive and negative weights run along it. The
    columns laid end to end, a tie group starts where a score differs from
    the one before it in its column (or at the column's first position), and
    every position takes the totals at its group's end (one
    ``searchsorted`` of the running group number). A step from the previous
    position's totals adds nothing inside a group, so the sums over all
    positions are those over the groups' ends: the trapezoid under the ROC
    curve and the step sum of average precision, as the 1-D functions take
    them. Without weights, twice the ROC area is an exact sum of integer
    counts, (F - F_prev)(T + T_prev), divided once by 2 P Q (as the kernels'
    exact route): in float64 up to N = 2**26 (every product and sum an
    integer below 2**53), in int64 beyond (exact while N < 4e9). ROC AUC
    is NaN for a label whose positive or negative weight is 0; average
    precision is 0 without positive weight.

    Memory: O(N L), a few temporaries the size of the scores (the order,
    the ranked scores and classes, the cumulative sums, the group ends and
    the totals gathered at them), each dropped once used. On NumPy the
    columns go in blocks of :data:`HOST_BLOCK_SCORES` scores (at least one
    column a block): temporaries that stay in the CPU's caches, several
    times faster than one pass over a large matrix, the calls growing with
    N L / HOST_BLOCK_SCORES only; elsewhere (CuPy) one pass over all of them.
    """
    n, num_labels = scores.shape
    if n == 0 or tuple(relevant.shape) != (n, num_labels):
        raise ValueError(f"scores must be (N, L) with N >= 1 and relevant of the same shape, "
                         f"got {tuple(scores.shape)} and {tuple(relevant.shape)}")
    if sample_weight is not None and tuple(sample_weight.shape) != (n,):
        raise ValueError(f"sample_weight must have shape ({n},), got "
                         f"{tuple(sample_weight.shape)}")
    if xp is np and num_labels > 1 and n * num_labels > HOST_BLOCK_SCORES:
        step = max(1, HOST_BLOCK_SCORES // n)
        return np.concatenate([
            _column_rank_areas(scores[:, first:first + step], relevant[:, first:first + step],
                               sample_weight, xp)
            for first in range(0, num_labels, step)], axis=1)
    return _column_rank_areas(scores, relevant, sample_weight, xp)


def _column_rank_areas(scores, relevant, sample_weight, xp):
    """:func:`multilabel_rank_areas` of one block of columns, in one pass."""
    n, num_labels = scores.shape
    # (L, N), contiguous: a label's positions follow each other.
    columns = xp.ascontiguousarray(scores.T)
    if sample_weight is None and xp is np:
        order = np.argsort(columns, axis=1)[:, ::-1]  # ties in any order: counts
    else:
        flipped = xp.flip(columns, axis=1)
        ascending = (xp.argsort(flipped, axis=1, kind="stable") if xp is np
                     else xp.argsort(flipped, axis=1))
        del flipped
        order = xp.subtract(n - 1, xp.flip(ascending, axis=1))
        del ascending
    ranked = xp.take_along_axis(columns, order, axis=1)
    positive = xp.not_equal(
        xp.take_along_axis(xp.ascontiguousarray(relevant.T), order, axis=1), 0)
    ranked_weight = None if sample_weight is None else sample_weight[order]
    del order
    # The group number of each position, the columns end to end; its last
    # occurrence is the group's end.
    starts = xp.concatenate([xp.ones((num_labels, 1), dtype=bool),
                             ranked[:, 1:] != ranked[:, :-1]], axis=1)
    del ranked
    group = xp.cumsum(starts.reshape(-1), dtype=np.int64)
    del starts
    group_end = xp.subtract(xp.searchsorted(group, group, side="right"), 1)
    del group
    # Counts: float64 while every product and sum of twice the area is an
    # integer below 2**53 (2 N**2 <= 2**53), int64 beyond.
    count_type = np.float64 if n <= 2**26 else np.int64
    if ranked_weight is None:
        tps = xp.cumsum(positive, axis=1, dtype=count_type)
        del positive
        fps = xp.arange(1, n + 1, dtype=count_type)[None, :] - tps
    else:
        positive_weight, negative_weight = positive_negative_weights(positive, ranked_weight, xp)
        del positive, ranked_weight
        tps = xp.cumsum(positive_weight, axis=1, dtype=np.float64)
        del positive_weight
        fps = xp.cumsum(negative_weight, axis=1, dtype=np.float64)
        del negative_weight
    tps = tps.reshape(-1)[group_end].reshape(num_labels, n)
    fps = fps.reshape(-1)[group_end].reshape(num_labels, n)
    del group_end
    positive_total, negative_total = tps[:, -1], fps[:, -1]
    if sample_weight is None:
        twice_area = xp.sum((fps - _previous(fps, xp)) * (tps + _previous(tps, xp)), axis=1)
        pairs = positive_total.astype(np.float64) * negative_total.astype(np.float64)
        some_pairs = xp.greater(pairs, 0)
        auc = twice_area.astype(np.float64) / xp.multiply(2.0, xp.where(some_pairs, pairs, 1.0))
        del twice_area
        tps, fps = tps.astype(np.float64, copy=False), fps.astype(np.float64, copy=False)
        positive_total = positive_total.astype(np.float64, copy=False)
        negative_total = negative_total.astype(np.float64, copy=False)
    else:
        tpr = rate(tps, positive_total[:, None], xp)
        fpr = rate(fps, negative_total[:, None], xp)
        auc = xp.sum(xp.divide((fpr - _previous(fpr, xp)) * (tpr + _previous(tpr, xp)), 2), axis=1)
        del tpr, fpr
    has_positives = xp.greater(positive_total, 0)
    auc = xp.where(has_positives & xp.greater(negative_total, 0), auc, xp.nan)
    # Average precision: Σ (R - R_before) P at the groups' ends, as
    # step_average_precision.
    predicted = tps + fps
    del fps
    some_predicted = xp.greater(predicted, 0)
    precision = xp.where(some_predicted, tps / xp.where(some_predicted, predicted, 1.0), 0.0)
    del predicted
    recall = tps / xp.where(has_positives, positive_total, 1.0)[:, None]
    del tps
    gain = recall - _previous(recall, xp)
    del recall
    average_precision = xp.where(has_positives,
                                 xp.maximum(xp.sum(gain * precision, axis=1), 0.0), 0.0)
    return xp.stack([auc, average_precision])
