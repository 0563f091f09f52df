"""Multilabel ranking metrics: label ranking average precision (LRAP), label
ranking loss and coverage error, with scikit-learn's tie rules.

Each sample ranks its L labels by score. scikit-learn's rules, kept exactly:

* ties count at their worst position ("max" ranks): a label's rank is the
  number of labels scored at least as high as it;
* LRAP is 1 for a row whose labels are all relevant or all irrelevant, the
  ranking loss 0, and the coverage of a row without relevant labels is 0;
* a tied (relevant, irrelevant) pair is mis-ordered for the ranking loss
  (so ``[[0, 1]]`` scored ``[[0.5, 0.5]]`` loses 1.0).

Written once over the array namespace ``xp`` with only a sort along the
rows, ``cumsum`` and ``take_along_axis``: O(N L log L) work, no loop over the
rows in Python (scikit-learn's LRAP and ranking loss loop over them). Rows go
in chunks of :data:`CHUNK_ELEMENTS` scores, so the sort's temporaries stay
O(chunk) whatever N. That is the NumPy backend's path and the reference of
the kernel backends' one: the three metrics' weighted sums from one launch
of ``kernels/multilabel.cu`` (:func:`ranking_sums`: a warp per row, no
sort), of which the array path is the reference in the tests.
:func:`label_ranking_metrics` returns the three from one check of the
inputs and one launch (or, on the array path, one sort per row for LRAP and
the ranking loss together).

:func:`check_indicator_inputs` is also the check of the multilabel ROC AUC
and average precision of :mod:`metrics_gpu._functional.ranking`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from metrics_gpu.backends.selection import on_caller_stream
from metrics_gpu._pipeline.stages import output
from metrics_gpu._common.types import ArrayLike
from metrics_gpu._validation import (
    IndicatorInputs,
    _first_true,
    _position,
    check_bool,
    check_indicator_inputs,
    check_log_base,
    check_rank_cutoff,
)
from metrics_gpu._multilabel.inputs import kernel_input
from metrics_gpu.backends.launchers.multilabel import RANKING_SUM_SLOTS

# Scores sorted at a time: the ranks take about six int64 temporaries of the
# chunk's size (~200 MB at 2**22 scores), independent of N.
CHUNK_ELEMENTS = 1 << 22

# What label_ranking_metrics returns, in the order of the kernel's sums
# (RANKING_SUM_SLOTS, whose last is the weight).
LABEL_RANKING_METRICS = ("label_ranking_average_precision_score", "label_ranking_loss",
                         "coverage_error")


# -- ranks within each row ------------------------------------------------------------


@dataclass(frozen=True)
class RowRanks:
    """Per row of a chunk, each label in ascending score order.

    ``relevant[r, p]``: whether the p-th lowest scored label is relevant;
    ``at_least[r, p]``: labels scored at least as high as it (its "max" rank);
    ``relevant_at_least[r, p]``: relevant ones among those; ``n_relevant[r]``.
    """

    relevant: Any
    at_least: Any
    relevant_at_least: Any
    n_relevant: Any


def row_ranks(relevant, scores, xp) -> RowRanks:
    """:class:`RowRanks` of (rows, L) indicators and scores: one sort per row.

    A run of tied scores is one group; every label of a group sees the same
    counts, those of the group's first position ``start``: ``L - start``
    labels, and the relevant ones minus those below it. ``start`` of each
    position comes from the groups' first positions, compacted to the front of
    the row by a second sort, indexed by the group's number (a ``cumsum``):
    no searchsorted, no segmented scan.
    """
    num_labels = scores.shape[1]
    order = xp.argsort(scores, axis=1)
    sorted_relevant = xp.take_along_axis(relevant, order, axis=1)
    start = tie_groups(xp.take_along_axis(scores, order, axis=1), xp, ends=False)[0]
    relevant_below = xp.cumsum(sorted_relevant, axis=1) - sorted_relevant
    n_relevant = xp.sum(sorted_relevant, axis=1)
    relevant_at_least = n_relevant[:, None] - xp.take_along_axis(relevant_below, start, axis=1)
    return RowRanks(sorted_relevant, num_labels - start, relevant_at_least, n_relevant)


def tie_groups(sorted_scores, xp, *, ends: bool = True):
    """``(start, end)``: for each position of rows sorted ascending, the first
    and last position of its run of equal scores (its tie group).

    The groups' first positions are compacted to the front of each row by a
    second sort (the other positions pushed past the end as L), then indexed
    by each position's group number (a ``cumsum`` of the first-of-group
    flags); a group ends before the next one starts (``end`` is None without
    ``ends``).
    """
    rows, num_labels = sorted_scores.shape
    first_of_group = xp.concatenate(
        [xp.ones((rows, 1), dtype=bool), sorted_scores[:, 1:] != sorted_scores[:, :-1]], axis=1)
    positions = xp.broadcast_to(xp.arange(num_labels, dtype=np.int64), (rows, num_labels))
    if xp is np:  # running maxima along the rows (CuPy has no ufunc.accumulate): no sort
        start = np.maximum.accumulate(np.where(first_of_group, positions, 0), axis=1)
        if not ends:
            return start, None
        last_of_group = np.concatenate([first_of_group[:, 1:], np.ones((rows, 1), bool)],
                                       axis=1)
        end = np.minimum.accumulate(
            np.where(last_of_group, positions, num_labels)[:, ::-1], axis=1)[:, ::-1]
        return start, end
    group_starts = xp.sort(xp.where(first_of_group, positions, num_labels), axis=1)
    group = xp.subtract(xp.cumsum(first_of_group, axis=1), 1)
    start = xp.take_along_axis(group_starts, group, axis=1)
    if not ends:
        return start, None
    next_starts = xp.concatenate(
        [group_starts, xp.full((rows, 1), num_labels, dtype=group_starts.dtype)], axis=1)
    end = xp.subtract(xp.take_along_axis(next_starts, xp.add(group, 1), axis=1), 1)
    return start, end


def _row_chunks(inputs: IndicatorInputs):
    """``(relevant, scores)`` of :data:`CHUNK_ELEMENTS` scores at a time."""
    n, num_labels = inputs.y_true.shape
    step = max(1, CHUNK_ELEMENTS // num_labels)
    for begin in range(0, n, step):
        yield inputs.y_true[begin:begin + step], inputs.y_score[begin:begin + step]


def each_row(inputs: IndicatorInputs, row_metric):
    """``row_metric(relevant, scores, xp)`` of every row, as one (N,) float64 array."""
    xp = inputs.backend.xp
    parts = [row_metric(relevant, scores, xp) for relevant, scores in _row_chunks(inputs)]
    return parts[0] if len(parts) == 1 else xp.concatenate(parts)


def ranking_sums(backend, y_true, scores, weight) -> np.ndarray:
    """The weighted sums over rows of LRAP, ranking loss and coverage error,
    and of the weights (``RANKING_SUM_SLOTS``), from one launch of
    ``kernels/multilabel.cu`` on a kernel backend, read back in one copy:
    ``y_true`` (N, L) 0/1 and ``scores`` backend arrays, ``weight`` (N,)
    float64 or None."""
    true, true_code = kernel_input(y_true, backend, "y_true")
    score, score_code = kernel_input(scores, backend, "y_score")
    sums = backend.zeros(len(RANKING_SUM_SLOTS), np.float64)
    backend.multilabel_ranking(true, true_code, score, score_code, weight, sums)
    return np.asarray(backend.to_host(sums))


def _ranking_metric(inputs: IndicatorInputs, row_metric, slot: int):
    """The weighted mean of a row metric: the kernel's sums on a kernel
    backend (``slot``: the metric's among them), else the rows of the array
    path."""
    if inputs.backend.name == "numpy":
        per_row = each_row(inputs, row_metric)
        return output(_weighted_mean(per_row, inputs.sample_weight, inputs.backend.xp), inputs)
    sums = ranking_sums(inputs.backend, inputs.y_true, inputs.y_score, inputs.sample_weight)
    return output(_mean_of_sums(sums, slot), inputs)


def _weighted_mean(per_row, sample_weight, xp):
    """scikit-learn's ``np.average(per_row, weights=sample_weight)``."""
    if sample_weight is None:
        return xp.mean(per_row)
    return xp.sum(per_row * sample_weight) / xp.sum(sample_weight)


def _mean_of_sums(sums: np.ndarray, slot: int) -> np.float64:
    """The weighted mean of the metric in ``slot`` of :func:`ranking_sums`."""
    return np.float64(sums[slot] / sums[-1])


def ranked_average_precision(ranks: RowRanks, xp, *, empty_rows: float = 1.0):
    """:func:`row_average_precision` of rows already ranked (:func:`row_ranks`)."""
    num_labels = ranks.relevant.shape[1]
    ratio = ranks.relevant_at_least / ranks.at_least
    total = xp.sum(xp.where(ranks.relevant, ratio, 0.0), axis=1)
    n_relevant = ranks.n_relevant
    value = total / xp.maximum(n_relevant, 1)
    value = xp.where(xp.equal(n_relevant, num_labels), 1.0, value)
    return xp.where(xp.equal(n_relevant, 0), empty_rows, value)


def row_average_precision(relevant, scores, xp, *, empty_rows: float = 1.0):
    """Each row's label ranking average precision: the mean over its relevant
    labels of (relevant labels ranked at least as high) / (labels ranked at
    least as high). Rows with every label relevant give 1 and rows with none
    ``empty_rows`` (LRAP: 1; the 'samples' average precision: 0)."""
    return ranked_average_precision(row_ranks(relevant, scores, xp), xp, empty_rows=empty_rows)


def row_roc_auc(relevant, scores, xp):
    """Each row's ROC AUC over its L labels: the (relevant, irrelevant) pairs
    ordered right, a tie counting ½, over the number of pairs; NaN for a row
    with one class (scikit-learn's per-row binary ROC AUC, unweighted)."""
    num_labels = scores.shape[1]
    order = xp.argsort(scores, axis=1)
    sorted_relevant = xp.take_along_axis(relevant, order, axis=1)
    start, end = tie_groups(xp.take_along_axis(scores, order, axis=1), xp)
    relevant_before = xp.cumsum(sorted_relevant, axis=1) - sorted_relevant  # before each position
    relevant_below = xp.take_along_axis(relevant_before, start, axis=1)  # below the group
    relevant_through = xp.take_along_axis(relevant_before + sorted_relevant, end, axis=1)
    irrelevant_below = start - relevant_below
    irrelevant_tied = (end - start + 1) - (relevant_through - relevant_below)
    right = xp.sum(xp.where(sorted_relevant, irrelevant_below + 0.5 * irrelevant_tied, 0.0),
                   axis=1)
    n_relevant = xp.sum(sorted_relevant, axis=1)
    pairs = n_relevant * (num_labels - n_relevant)
    return xp.where(pairs == 0, xp.nan, right / xp.maximum(pairs, 1))


def ranked_ranking_loss(ranks: RowRanks, xp):
    """:func:`row_ranking_loss` of rows already ranked (:func:`row_ranks`)."""
    num_labels = ranks.relevant.shape[1]
    irrelevant_at_least = ranks.at_least - ranks.relevant_at_least
    wrong = xp.sum(xp.where(ranks.relevant, irrelevant_at_least, 0), axis=1)
    n_relevant = ranks.n_relevant
    pairs = n_relevant * (num_labels - n_relevant)
    return xp.where(pairs == 0, 0.0, wrong / xp.maximum(pairs, 1))


def row_ranking_loss(relevant, scores, xp):
    """Each row's (relevant, irrelevant) pairs with the irrelevant label scored
    at least as high, over the number of such pairs; 0 for rows with every or
    no label relevant."""
    return ranked_ranking_loss(row_ranks(relevant, scores, xp), xp)


def row_coverage(relevant, scores, xp):
    """Each row's labels scored at least as high as its lowest relevant label
    (0 without relevant labels). A min and a count: no sort needed."""
    widened = scores.astype(np.float64)
    lowest = xp.min(xp.where(relevant, widened, xp.inf), axis=1)
    return xp.sum(widened >= lowest[:, None], axis=1).astype(np.float64)


def row_label_ranking_metrics(relevant, scores, xp) -> tuple:
    """Each row's LRAP, ranking loss and coverage error (in the order of
    :data:`LABEL_RANKING_METRICS`): the first two from one :func:`row_ranks`."""
    ranks = row_ranks(relevant, scores, xp)
    return (ranked_average_precision(ranks, xp), ranked_ranking_loss(ranks, xp),
            row_coverage(relevant, scores, xp))


def label_ranking_rows(inputs: IndicatorInputs) -> tuple:
    """:func:`row_label_ranking_metrics` of every row: three (N,) float64 arrays."""
    xp = inputs.backend.xp
    parts = [row_label_ranking_metrics(relevant, scores, xp)
             for relevant, scores in _row_chunks(inputs)]
    return tuple(metric[0] if len(parts) == 1 else xp.concatenate(metric)
                 for metric in zip(*parts))


# -- the public functions ---------------------------------------------------------------


@on_caller_stream
def label_ranking_average_precision_score(y_true: ArrayLike, y_score: ArrayLike, *,
                                          sample_weight: ArrayLike | None = None) -> Any:
    """Label ranking average precision (LRAP), as
    ``sklearn.metrics.label_ranking_average_precision_score``.

    For each sample and each of its relevant labels, the fraction of the
    labels scored at least as high that are relevant; averaged over the
    relevant labels, then over the samples.

    Parameters
    ----------
    y_true : array-like of shape (N, L)
        Label indicators: 1 (or True) where a label is relevant, else 0.
    y_score : array-like of shape (N, L)
        Finite scores; higher ranks a label first. Tied scores all take the
        worst (largest) rank of their run, as scikit-learn's "max" ranks.
    sample_weight : array-like of shape (N,), optional
        Finite, non-negative weights, not all 0 (scikit-learn gives NaN then).

    Returns
    -------
    score : float
        float64 in (0, 1] (a ``numpy.float64`` for NumPy inputs, else a 0-d
        array of the input's framework, on its device). A sample whose labels
        are all relevant or all irrelevant scores 1.

    See Also
    --------
    label_ranking_loss : The fraction of mis-ordered label pairs.
    coverage_error : How deep the ranking goes to cover every relevant label.
    average_precision_score : ``average='samples'`` is LRAP, except that a
        sample without relevant labels scores 0 there.

    Notes
    -----
    One sort per row (O(N L log L)), a chunk of rows at a time. Syncs only
    for the checks of the inputs.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import label_ranking_average_precision_score
    >>> y_true = np.array([[1, 0, 0], [0, 0, 1]])
    >>> y_score = np.array([[0.75, 0.5, 1], [1, 0.2, 0.1]])
    >>> round(float(label_ranking_average_precision_score(y_true, y_score)), 6)
    0.416667
    >>> float(label_ranking_average_precision_score([[1, 0]], [[0.5, 0.5]]))  # a tie
    0.5
    """
    inputs = check_indicator_inputs(y_true, y_score, sample_weight,
                                    function="label_ranking_average_precision_score")
    return _ranking_metric(inputs, row_average_precision, 0)


@on_caller_stream
def label_ranking_loss(y_true: ArrayLike, y_score: ArrayLike, *,
                       sample_weight: ArrayLike | None = None) -> Any:
    """Ranking loss, as ``sklearn.metrics.label_ranking_loss``.

    For each sample, the (relevant, irrelevant) label pairs in which the
    irrelevant label is scored at least as high (a tie is an error), over the
    number of such pairs; averaged over the samples.

    Parameters
    ----------
    y_true : array-like of shape (N, L), L >= 2
        Label indicators: 1 (or True) where a label is relevant, else 0.
    y_score : array-like of shape (N, L)
        Finite scores; higher ranks a label first.
    sample_weight : array-like of shape (N,), optional
        Finite, non-negative weights, not all 0 (scikit-learn raises
        ZeroDivisionError then).

    Returns
    -------
    loss : float
        float64 in [0, 1] (a ``numpy.float64`` for NumPy inputs, else a 0-d
        array of the input's framework, on its device). A sample whose labels
        are all relevant or all irrelevant loses 0.

    See Also
    --------
    label_ranking_average_precision_score : Ranking-based average precision.
    coverage_error : How deep the ranking goes to cover every relevant label.

    Notes
    -----
    One sort per row (O(N L log L)), a chunk of rows at a time. Syncs only
    for the checks of the inputs.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import label_ranking_loss
    >>> y_true = np.array([[1, 0, 0], [0, 0, 1]])
    >>> y_score = np.array([[0.75, 0.5, 1], [1, 0.2, 0.1]])
    >>> float(label_ranking_loss(y_true, y_score))
    0.75
    >>> float(label_ranking_loss([[0, 1]], [[0.5, 0.5]]))  # a tie is mis-ordered
    1.0
    """
    inputs = check_indicator_inputs(y_true, y_score, sample_weight, function="label_ranking_loss",
                                    min_labels=2)
    return _ranking_metric(inputs, row_ranking_loss, 1)


@on_caller_stream
def coverage_error(y_true: ArrayLike, y_score: ArrayLike, *,
                   sample_weight: ArrayLike | None = None) -> Any:
    """Coverage error, as ``sklearn.metrics.coverage_error``.

    For each sample, the number of labels scored at least as high as its
    lowest-scored relevant label (how far down the ranking one must go to
    cover every relevant label; ties at their worst rank); averaged over the
    samples. The best value is the mean number of relevant labels.

    Parameters
    ----------
    y_true : array-like of shape (N, L), L >= 2
        Label indicators: 1 (or True) where a label is relevant, else 0.
    y_score : array-like of shape (N, L)
        Finite scores; higher ranks a label first.
    sample_weight : array-like of shape (N,), optional
        Finite, non-negative weights, not all 0 (scikit-learn raises
        ZeroDivisionError then).

    Returns
    -------
    coverage_error : float
        float64 (a ``numpy.float64`` for NumPy inputs, else a 0-d array of the
        input's framework, on its device). A sample without relevant labels
        counts 0 (scikit-learn's extension of Tsoumakas et al., whose
        definition is 1 less).

    See Also
    --------
    label_ranking_loss : The fraction of mis-ordered label pairs.
    label_ranking_average_precision_score : Ranking-based average precision.

    Notes
    -----
    A minimum and a count per row, no sort. Syncs only for the checks of the
    inputs.

    Examples
    --------
    >>> from metrics_gpu import coverage_error
    >>> float(coverage_error([[1, 0, 0], [0, 1, 1]], [[1, 0, 0], [0, 1, 1]]))
    1.5
    """
    inputs = check_indicator_inputs(y_true, y_score, sample_weight, function="coverage_error",
                                    min_labels=2)
    return _ranking_metric(inputs, row_coverage, 2)


@on_caller_stream
def label_ranking_metrics(y_true: ArrayLike, y_score: ArrayLike, *,
                          sample_weight: ArrayLike | None = None) -> dict[str, Any]:
    """Label ranking average precision, ranking loss and coverage error,
    from one call.

    The values of :func:`label_ranking_average_precision_score`,
    :func:`label_ranking_loss` and :func:`coverage_error` of the same
    arguments, for the cost of about one of them: the inputs are checked
    once, a kernel backend launches one kernel and reads back one set of
    sums, the NumPy backend sorts each row once for the first two.

    Parameters
    ----------
    y_true : array-like of shape (N, L), L >= 2
        Label indicators: 1 (or True) where a label is relevant, else 0. At
        least 2 columns, as the ranking loss and coverage error need
        (:func:`label_ranking_average_precision_score` alone takes 1).
    y_score : array-like of shape (N, L)
        Finite scores; higher ranks a label first. Tied scores all take the
        worst (largest) rank of their run, as scikit-learn's "max" ranks.
    sample_weight : array-like of shape (N,), optional
        Finite, non-negative weights, not all 0.

    Returns
    -------
    metrics : dict
        ``{"label_ranking_average_precision_score": ..., "label_ranking_loss":
        ..., "coverage_error": ...}``, each float64 as its function returns it
        (a ``numpy.float64`` for NumPy inputs, else a 0-d array of the input's
        framework, on its device).

    See Also
    --------
    label_ranking_average_precision_score : The first value alone.
    label_ranking_loss : The second value alone.
    coverage_error : The third value alone.
    MultilabelMetrics : The three over batches (``ranking=True``).

    Notes
    -----
    The same formulas as the three functions: each value equals theirs (on
    the cuda backend up to the order of the kernel's float64 atomic sums).
    One sort per row (O(N L log L)), a chunk of rows at a time; on a GPU one
    launch of ``kernels/multilabel.cu`` (a warp per row, no sort). Syncs for
    the checks of the inputs and, on a kernel backend, to read back the sums.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import label_ranking_metrics
    >>> y_true = np.array([[1, 0, 0], [0, 0, 1]])
    >>> y_score = np.array([[0.75, 0.5, 1], [1, 0.2, 0.1]])
    >>> metrics = label_ranking_metrics(y_true, y_score)
    >>> round(float(metrics["label_ranking_average_precision_score"]), 6)
    0.416667
    >>> float(metrics["label_ranking_loss"]), float(metrics["coverage_error"])
    (0.75, 2.5)
    >>> float(label_ranking_metrics([[0, 1]], [[0.5, 0.5]])["label_ranking_loss"])  # a tie
    1.0
    """
    inputs = check_indicator_inputs(y_true, y_score, sample_weight,
                                    function="label_ranking_metrics", min_labels=2)
    if inputs.backend.name == "numpy":
        xp = inputs.backend.xp
        means = [_weighted_mean(per_row, inputs.sample_weight, xp)
                 for per_row in label_ranking_rows(inputs)]
    else:
        sums = ranking_sums(inputs.backend, inputs.y_true, inputs.y_score, inputs.sample_weight)
        means = [_mean_of_sums(sums, slot) for slot in range(len(LABEL_RANKING_METRICS))]
    return {name: output(mean, inputs) for name, mean in zip(LABEL_RANKING_METRICS, means)}


# -- discounted cumulative gain ------------------------------------------------------------


def _discounts(num_labels: int, k, log_base: float, backend):
    """scikit-learn's discounts ``1 / log_base(rank + 1)``, 0 from rank k + 1
    on, and their cumulative sums after a leading 0, computed as it computes
    them (on the host: L numbers), then placed on the backend."""
    discount = 1 / (np.log(np.arange(num_labels) + 2) / np.log(log_base))
    if k is not None:
        discount[k:] = 0
    cumulative = np.concatenate([[0.0], np.cumsum(discount)])
    return backend.asarray(discount), backend.asarray(cumulative)


def row_dcg(relevance, scores, xp, *, discounts, ignore_ties: bool = False):
    """Each row's discounted cumulative gain of ``relevance`` ranked by ``scores``.

    With ties (McSherry & Najork, as scikit-learn): a run of tied scores over
    ranks [a, b] gives each of its labels the mean discount of those ranks,
    so the result is the mean over the orders of the tie. ``ignore_ties``:
    NumPy's ``argsort`` order reversed, as scikit-learn takes it.
    """
    discount, cumulative = discounts
    num_labels = scores.shape[1]
    if ignore_ties:
        order = xp.flip(xp.argsort(scores, axis=1), axis=1)
        return xp.sum(xp.take_along_axis(relevance, order, axis=1) * discount[None, :], axis=1)
    order = xp.argsort(scores, axis=1)
    start, end = tie_groups(xp.take_along_axis(scores, order, axis=1), xp)
    # Ascending positions [start, end] are the descending ranks
    # [L - 1 - end, L - 1 - start]: their discounts sum to a difference of
    # the cumulative sums.
    group_discount = (xp.take(cumulative, num_labels - start)
                      - xp.take(cumulative, num_labels - 1 - end))
    gains = xp.take_along_axis(relevance, order, axis=1) * group_discount / xp.add(end - start, 1)
    return xp.sum(gains, axis=1)


def row_ndcg(relevance, scores, xp, *, discounts, ignore_ties: bool = False):
    """Each row's DCG over the DCG of the ideal order (``relevance`` ranked by
    itself); 0 where the ideal DCG is 0."""
    gain = row_dcg(relevance, scores, xp, discounts=discounts, ignore_ties=ignore_ties)
    ideal = row_dcg(relevance, relevance, xp, discounts=discounts, ignore_ties=True)
    no_gain = xp.equal(ideal, 0)
    return xp.where(no_gain, 0.0, gain / xp.where(no_gain, 1.0, ideal))


@on_caller_stream
def dcg_score(y_true: ArrayLike, y_score: ArrayLike, *, k: int | None = None,
              log_base: float = 2, sample_weight: ArrayLike | None = None,
              ignore_ties: bool = False) -> Any:
    """Discounted cumulative gain, as ``sklearn.metrics.dcg_score``.

    Each row's true relevance summed in the order of its scores, the label at
    rank r discounted by ``1 / log_base(r + 1)``; averaged over the rows.

    Parameters
    ----------
    y_true : array-like of shape (N, L), L >= 2
        True relevance (any finite numbers; 0/1 label indicators included).
    y_score : array-like of shape (N, L)
        Finite scores; higher ranks a label first.
    k : int, optional
        Only the k best-ranked labels count (their discounts; the rest are 0).
    log_base : float, default 2
        Base of the logarithm of the discount (> 0).
    sample_weight : array-like of shape (N,), optional
        Finite, non-negative weights, not all 0 (scikit-learn raises
        ZeroDivisionError then).
    ignore_ties : bool, default False
        Rank tied scores in NumPy's ``argsort`` order (reversed) instead of
        averaging over their orders: faster, and what scikit-learn does.

    Returns
    -------
    dcg : float
        float64 (a ``numpy.float64`` for NumPy inputs, else a 0-d array of the
        input's framework, on its device).

    See Also
    --------
    ndcg_score : DCG over the DCG of the ideal ranking, in [0, 1].

    Notes
    -----
    One or two sorts per row (O(N L log L)), a chunk of rows at a time.
    Syncs only for the checks of the inputs.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import dcg_score
    >>> true_relevance = np.asarray([[10, 0, 0, 1, 5]])
    >>> scores = np.asarray([[.1, .2, .3, 4, 70]])
    >>> round(float(dcg_score(true_relevance, scores)), 6)
    9.499458
    >>> float(dcg_score(true_relevance, np.asarray([[1, 0, 0, 0, 1]]), k=1))  # a tie at the top
    7.5
    """
    k, log_base = check_rank_cutoff(k), check_log_base(log_base)
    ignore_ties = check_bool(ignore_ties, "ignore_ties")
    inputs = check_indicator_inputs(y_true, y_score, sample_weight, function="dcg_score",
                                    min_labels=2, graded=True)
    xp = inputs.backend.xp
    per_row = dcg_rows(inputs, k=k, log_base=log_base, ignore_ties=ignore_ties)
    return output(_weighted_mean(per_row, inputs.sample_weight, xp), inputs)


@on_caller_stream
def ndcg_score(y_true: ArrayLike, y_score: ArrayLike, *, k: int | None = None,
               sample_weight: ArrayLike | None = None, ignore_ties: bool = False) -> Any:
    """Normalized discounted cumulative gain, as ``sklearn.metrics.ndcg_score``.

    Each row's DCG (:func:`dcg_score`, base 2) over the DCG of its ideal
    ranking (the labels ordered by their true relevance); 0 for a row whose
    ideal DCG is 0. Averaged over the rows.

    Parameters
    ----------
    y_true : array-like of shape (N, L), L >= 2
        True relevance: finite and non-negative.
    y_score : array-like of shape (N, L)
        Finite scores; higher ranks a label first.
    k : int, optional
        Only the k best-ranked labels count.
    sample_weight : array-like of shape (N,), optional
        Finite, non-negative weights, not all 0.
    ignore_ties : bool, default False
        Rank tied scores in NumPy's ``argsort`` order (reversed) instead of
        averaging over their orders.

    Returns
    -------
    ndcg : float
        float64 in [0, 1] (a ``numpy.float64`` for NumPy inputs, else a 0-d
        array of the input's framework, on its device).

    See Also
    --------
    dcg_score : The gain without normalisation.

    Notes
    -----
    Two or three sorts per row (O(N L log L)), a chunk of rows at a time.
    Syncs only for the checks of the inputs.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import ndcg_score
    >>> true_relevance = np.asarray([[10, 0, 0, 1, 5]])
    >>> scores = np.asarray([[.1, .2, .3, 4, 70]])
    >>> round(float(ndcg_score(true_relevance, scores)), 6)
    0.695694
    >>> float(ndcg_score(true_relevance, np.asarray([[1, 0, 0, 0, 1]]), k=1))  # a tie at the top
    0.75
    """
    k = check_rank_cutoff(k)
    ignore_ties = check_bool(ignore_ties, "ignore_ties")
    inputs = check_indicator_inputs(y_true, y_score, sample_weight, function="ndcg_score",
                                    min_labels=2, graded=True)
    xp = inputs.backend.xp
    per_row = ndcg_rows(inputs, k=k, ignore_ties=ignore_ties)
    return output(_weighted_mean(per_row, inputs.sample_weight, xp), inputs)


def dcg_rows(inputs: IndicatorInputs, *, k, log_base: float, ignore_ties: bool):
    """:func:`row_dcg` of every row (the stage :func:`dcg_score` and the Dask
    version average)."""
    discounts = _discounts(inputs.y_true.shape[1], k, log_base, inputs.backend)
    return each_row(inputs, partial(row_dcg, discounts=discounts, ignore_ties=ignore_ties))


def ndcg_rows(inputs: IndicatorInputs, *, k, ignore_ties: bool):
    """:func:`row_ndcg` of every row, after scikit-learn's refusal of negative
    relevance (the stage :func:`ndcg_score` and the Dask version average)."""
    i = _first_true(inputs.backend.xp.less(inputs.y_true, 0), inputs.backend)
    if i is not None:
        raise ValueError(
            "ndcg_score should not be used on negative y_true values; found "
            f"{inputs.y_true.reshape(-1)[i].item()!r} at {_position(i, inputs.y_true.shape)}"
        )
    discounts = _discounts(inputs.y_true.shape[1], k, 2.0, inputs.backend)
    return each_row(inputs, partial(row_ndcg, discounts=discounts, ignore_ties=ignore_ties))
