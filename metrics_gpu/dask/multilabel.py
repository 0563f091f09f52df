"""Multilabel-indicator input on Dask: the label functions' (N, L) path (per
chunk a :class:`MultilabelSums` of per-label counts and per-row sums, merged,
read by the in-memory formulas) and the row-separable multilabel ranking
metrics (LRAP, ranking loss, coverage, DCG, NDCG)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from metrics_gpu._formulas import labels as F
from metrics_gpu._functional import confusion as _confusion
from metrics_gpu._functional import rates as _rates
from metrics_gpu._functional.labels import classification_report_of
from metrics_gpu._multilabel import counts as ML
from metrics_gpu._multilabel.ranking import (
    dcg_rows,
    each_row,
    ndcg_rows,
    row_average_precision,
    row_coverage,
    row_ranking_loss,
)
from metrics_gpu._multilabel.stream import MultilabelMetrics
from metrics_gpu._pipeline.stages import is_host_scalar
from metrics_gpu._validation import (
    ALL_ZERO_WEIGHT,
    AVERAGE_OPTIONS,
    MULTILABEL,
    MultilabelInputs,
    check_beta,
    check_bool,
    check_indicator_inputs,
    check_log_base,
    check_multilabel_inputs,
    check_option,
    check_rank_cutoff,
    check_sample_weight,
    check_score_kind,
    check_zero_division,
    to_numpy,
)
from metrics_gpu.backends.selection import resolve_backend
from metrics_gpu.dask.graph import (
    _aligned,
    _in_chunk,
    _per_chunk,
    _result,
    _shape,
    _tree,
    _unsupported,
    da,
)

# -- multilabel-indicator input: per-label counts and per-row sums ---------------------


@dataclass(frozen=True)
class MultilabelSums:
    """What the multilabel label functions read of some rows; host arrays,
    merged by adding them.

    ``tp``, ``fp``, ``fn``, ``tn``: per selected label, weighted (int64
    without weights, float64 with them), as
    :func:`metrics_gpu._multilabel.counts.multilabel_counts` counts them.
    ``wrong_labels[e]``: the number (weight) of the rows with ``e`` wrong
    labels out of all L, what subset accuracy and Hamming loss read.
    ``rates[name]``: for ``average="samples"``, the per-row rate ``name``
    summed as ``[weighted sum over the rows where it is defined, their
    weight, the weight of the rows where it is 0/0, the number of those]``
    (float64). ``rows``: the number of rows.
    """

    tp: np.ndarray
    fp: np.ndarray
    fn: np.ndarray
    tn: np.ndarray
    wrong_labels: np.ndarray
    rates: dict
    rows: int


# The per-row rates of average="samples": the in-memory formulas' (numerator,
# denominator) pairs, F-beta's of beta.
_SAMPLE_RATES: dict[str, Callable[..., F.Terms]] = {
    "precision": F.precision_terms, "recall": F.recall_terms, "f-score": F.fbeta_terms,
    "jaccard": F.jaccard_terms, "specificity": F.specificity_terms}

_NOT_INDICATOR = (
    f"y_true and y_pred must be {MULTILABEL} matrices of one shape (0 and 1 only, one column "
    "per label); one of them holds other values here (threshold scores first, e.g. "
    "y_score >= 0.5; flatten label maps of class codes: y.reshape(-1))"
)


def _multilabel_of_chunk(y_true, y_pred, sample_weight, *, index, offset, columns, rates,
                         beta, num_classes, ignore_index, validate,
                         scores=None) -> MultilabelSums | None:
    """One chunk's :class:`MultilabelSums`, computed where it lives (NumPy or
    CuPy), after the in-memory checks of its indicators and weights (weights
    all 0 are refused for the whole data, on the merged sums); ``scores``:
    ``(kind, threshold)`` of (N, L) score predictions, cut as in memory."""
    if y_true.shape[0] == 0:
        return None
    try:
        inputs = check_multilabel_inputs(y_true, y_pred, num_classes=num_classes,
                                         ignore_index=ignore_index, validate=validate,
                                         scores=scores, takes_ignore_index=False)
        if inputs is None:
            raise ValueError(_NOT_INDICATOR)
        weight = check_sample_weight(sample_weight, y_true.shape[0], inputs.backend, validate)
    except ValueError as error:
        raise _in_chunk(error, index, offset) from error
    counts = ML.multilabel_counts(replace(inputs, sample_weight=weight), columns)
    xp = counts.xp
    mass = None if weight is None else weight.astype(xp.float64)
    wrong_labels = xp.bincount(counts.sample_errors, weights=mass,
                               minlength=counts.num_labels + 1)
    sums = {}
    if rates:
        per_row = counts.sample_counts()
        if mass is None:
            mass = xp.ones(counts.num_samples, dtype=xp.float64)
        for name in rates:
            terms = _SAMPLE_RATES[name]
            numerator, denominator = (terms(per_row, beta) if name == "f-score"
                                      else terms(per_row))
            values, undefined = F.divide(numerator, denominator, xp)
            defined_mass = xp.where(undefined, 0.0, mass)
            sums[name] = xp.stack([
                xp.sum(xp.where(undefined, 0.0, values) * defined_mass), xp.sum(defined_mass),
                xp.sum(xp.where(undefined, mass, 0.0)),
                xp.sum(undefined).astype(xp.float64)])

    def host(array):
        return np.asarray(inputs.backend.to_host(array))

    return MultilabelSums(tp=host(counts.tp), fp=host(counts.fp), fn=host(counts.fn),
                          tn=host(counts.tn), wrong_labels=host(wrong_labels),
                          rates={name: host(value) for name, value in sums.items()},
                          rows=counts.num_samples)


def _merge_multilabel(*parts: MultilabelSums | None) -> MultilabelSums | None:
    present = [p for p in parts if p is not None]
    if len(present) <= 1:
        return present[0] if present else None

    def total(field):
        return functools.reduce(np.add, (getattr(p, field) for p in present))

    return MultilabelSums(total("tp"), total("fp"), total("fn"), total("tn"),
                          total("wrong_labels"),
                          rates={name: functools.reduce(np.add, (p.rates[name] for p in present))
                                 for name in present[0].rates},
                          rows=sum(p.rows for p in present))


def _counts_of(sums: MultilabelSums) -> ML.MultilabelCounts:
    """The merged sums as the in-memory :class:`~metrics_gpu._multilabel.counts.MultilabelCounts`:
    the per-label counts, and as samples the rows grouped by their number of
    wrong labels, weighted by the group's count (weight): what subset
    accuracy and Hamming loss read. No per-row set counts: ``average="samples"``
    reads ``sums.rates``."""
    num_labels = int(sums.wrong_labels.shape[0]) - 1
    return ML.MultilabelCounts(
        tp=sums.tp, fp=sums.fp, fn=sums.fn, tn=sums.tn, sample_intersection=None,
        sample_true=None, sample_pred=None, sample_errors=np.arange(num_labels + 1),
        sample_weight=sums.wrong_labels, num_selected=int(sums.tp.shape[0]),
        num_labels=num_labels, xp=np)


def _samples_mean(rate: np.ndarray, zero_division):
    """The mean over the rows of a per-row rate, from its sums, by the
    in-memory rule (:func:`metrics_gpu._formulas.labels.nan_average` of
    :func:`metrics_gpu._formulas.labels.divide`'s values, weighted by the rows'
    weights): the rows where the rate is defined enter as one value, their
    weighted mean, of their weight; the rows where it is 0/0 all take
    ``zero_division``'s value (NaN: left out) and enter as another, of theirs."""
    total, defined, undefined, n_undefined = rate
    fill = F.divide(np.zeros(1), np.zeros(1), np, zero_division)[0][0]
    values = np.array([total / defined if defined else np.nan,
                       fill if n_undefined else np.nan])
    return np.float64(F.nan_average(values, np, np.array([defined, undefined])))


def _samples_prfs(sums: MultilabelSums, *, beta, warn_for, zero_division):
    """``average="samples"`` of :func:`metrics_gpu._formulas.labels._prfs_of_counts`,
    from the summed per-row rates: with ``beta`` inf (0), F is recall
    (precision) itself and warns only under that name."""
    precision, recall = sums.rates["precision"], sums.rates["recall"]
    if math.isinf(beta) or beta == 0:
        f_score, f_undefined = (recall if beta else precision), False
    else:
        f_score = sums.rates["f-score"]
        f_undefined = bool(f_score[3])
    if zero_division == "warn":
        F._warn_prf_undefined(
            warn_for, (bool(precision[3]), bool(recall[3]), f_undefined), sums.rows,
            samplewise=True)
    return (*(_samples_mean(rate, zero_division) for rate in (precision, recall, f_score)),
            None)


def _subset_value(sums, counts, arguments, *, formula):
    """Subset accuracy, zero-one and Hamming loss: in-memory formulas of the counts."""
    if "normalize" in arguments:
        return formula(counts, normalize=arguments["normalize"])
    return formula(counts)


def _matrices_value(sums, counts, arguments):
    return ML.confusion_matrices(counts)


def _prfs_value(sums, counts, arguments, *, pick=None, warn_for=None):
    """Precision, recall, F (``pick``: one of them) as in memory
    (``warn_for``: the function's, else the ``warn_for`` argument)."""
    beta, average = arguments.get("beta", 1.0), arguments["average"]
    zero_division = arguments["zero_division"]
    warn_for = arguments["warn_for"] if warn_for is None else warn_for
    if average == "samples":
        result = _samples_prfs(sums, beta=beta, warn_for=warn_for, zero_division=zero_division)
    else:
        result = _rates._multilabel_prfs(counts, beta=beta, average=average,
                                                  warn_for=warn_for,
                                                  zero_division=zero_division)
    return result if pick is None else result[pick]


def _rate_value(sums, counts, arguments, *, rate, name, modifier):
    """Jaccard and specificity as in memory (``name``, ``modifier``: its warning's words)."""
    average, zero_division = arguments["average"], arguments["zero_division"]
    if average != "samples":
        return F._averaged_rate(_SAMPLE_RATES[rate], name, modifier,
                                              counts.label_counts(), average=average,
                                              zero_division=zero_division)
    if zero_division == "warn" and sums.rates[rate][3]:
        F.warn_undefined(name, modifier, sums.rows, samplewise=True)
    return _samples_mean(sums.rates[rate], zero_division)


def _report_value(sums, counts, arguments):
    """classification_report of multilabel input as in memory: each label's
    precision, recall, F1 and support, then the micro, macro, weighted and
    samples averages (:func:`_prfs_value` of each), in the in-memory layout."""
    columns = _label_columns(arguments["labels"], int(sums.wrong_labels.shape[0]) - 1)
    classes = np.arange(counts.num_labels) if columns is None else np.asarray(columns)

    def rates_of(average):
        return _prfs_value(sums, counts, {**arguments, "average": average, "beta": 1.0,
                                          "warn_for": ("precision", "recall", "f-score")})

    return classification_report_of(
        classes, rates_of, ("micro", "macro", "weighted", "samples"), False,
        target_names=arguments["target_names"], labels_given=arguments["labels"] is not None,
        digits=arguments["digits"], output_dict=arguments["output_dict"])


@dataclass(frozen=True)
class _MultilabelRead:
    """How a label function reads multilabel input: its ``value(sums, counts,
    arguments)`` of the merged sums; whether it takes ``labels=`` (columns);
    ``rates``: for a set-wise function (``average=``, ``zero_division=``), the
    per-row rates its ``average="samples"`` reads (None: not set-wise)."""

    value: Callable
    labels: bool = False
    rates: tuple[str, ...] | None = None
    every_average: bool = False  # every average at once (classification_report)


_PRFS = ("precision", "recall", "f-score")
_MULTILABEL_READS = {
    "accuracy_score": _MultilabelRead(functools.partial(_subset_value,
                                                        formula=ML.exact_matches)),
    "zero_one_loss": _MultilabelRead(functools.partial(_subset_value,
                                                       formula=ML.exact_mismatches)),
    "hamming_loss": _MultilabelRead(functools.partial(_subset_value, formula=ML.hamming_loss)),
    "multilabel_confusion_matrix": _MultilabelRead(_matrices_value, labels=True),
    "precision_recall_fscore_support": _MultilabelRead(_prfs_value, labels=True, rates=_PRFS),
    "precision_score": _MultilabelRead(
        functools.partial(_prfs_value, pick=0, warn_for=("precision",)), labels=True,
        rates=_PRFS),
    "recall_score": _MultilabelRead(
        functools.partial(_prfs_value, pick=1, warn_for=("recall",)), labels=True,
        rates=_PRFS),
    "f1_score": _MultilabelRead(
        functools.partial(_prfs_value, pick=2, warn_for=("f-score",)), labels=True,
        rates=_PRFS),
    "fbeta_score": _MultilabelRead(
        functools.partial(_prfs_value, pick=2, warn_for=("f-score",)), labels=True,
        rates=_PRFS),
    "jaccard_score": _MultilabelRead(
        functools.partial(_rate_value, rate="jaccard", name="Jaccard",
                          modifier="true or predicted"), labels=True, rates=("jaccard",)),
    "classification_report": _MultilabelRead(_report_value, labels=True, rates=_PRFS,
                                             every_average=True),
    "specificity_score": _MultilabelRead(
        functools.partial(_rate_value, rate="specificity", name="Specificity",
                          modifier="negative"), labels=True, rates=("specificity",)),
}


def _is_indicator_shape(y_true) -> bool:
    """Whether ``y_true`` is (N, L), L >= 2: multilabel input on Dask (its
    values are checked chunk by chunk)."""
    shape = _shape(y_true)
    return len(shape) == 2 and shape[1] >= 2


def _rows_only(arrays: dict) -> None:
    """Refuse (N, L) Dask inputs chunked along the label axis: a row's L
    labels are read together (rechunking them is the caller's choice)."""
    for name, array in arrays.items():
        if isinstance(array, da.Array) and array.ndim >= 2 and len(array.chunks[1]) > 1:
            raise ValueError(
                f"{name} is chunked along the label axis (axis 1, chunks {array.chunks[1]}): "
                "multilabel input must be chunked along rows only, each chunk whole rows "
                f"of all {array.shape[1]} labels; rechunk it first: {name}.rechunk({{1: -1}})")


def _label_columns(labels, num_labels: int):
    """``labels=`` of multilabel input checked as in memory, before any data:
    column indices in [0, L), or None for all."""
    stand_in = MultilabelInputs(y_true=np.zeros((0, num_labels), dtype=bool), y_pred=None,
                                sample_weight=None, backend=resolve_backend(labels))
    return _confusion._multilabel_columns(stand_in, labels)


def _refuse_samplewise(samplewise) -> None:
    if not isinstance(samplewise, (bool, np.bool_)):
        raise ValueError(f"samplewise must be True or False, got {samplewise!r}")
    if samplewise:
        raise _unsupported(
            "samplewise", samplewise, "leave samplewise=False (for one chunk's matrices, "
            "call metrics_gpu.multilabel_confusion_matrix on its rows)",
            "one 2x2 matrix per sample is an (N, 2, 2) array, as large as the data, which "
            "metrics_gpu.dask never gathers")


def _multilabel_graph(metric, y_true, y_pred, sample_weight, arguments: dict, *, compute):
    """The graph of a label function on (N, L) indicators: per chunk its
    :class:`MultilabelSums`, merged, read as in memory. ``arguments``: every
    other argument of ``metric``, defaults included."""
    name = metric.__name__
    read = _MULTILABEL_READS.get(name)
    if read is None:
        raise ValueError(
            f"metrics_gpu.dask.{name} does not take (N, L) {MULTILABEL} input (y_true of "
            f"shape {_shape(y_true)}); on Dask, multilabel indicators go to "
            f"{', '.join(sorted(_MULTILABEL_READS))} and the label ranking metrics. Flatten "
            "label maps of class codes first: y.reshape(-1)")
    _rows_only({"y_true": y_true, "y_pred": y_pred})
    y_true, aligned, offsets = _aligned(y_true, {"y_pred": y_pred,
                                                 "sample_weight": sample_weight})
    y_pred, weight = aligned["y_pred"], aligned["sample_weight"]
    if y_pred.shape != y_true.shape:
        raise ValueError(
            f"y_true of shape {y_true.shape} is an (N, L) {MULTILABEL} matrix on Dask (0/1 per "
            f"label), so y_pred must be one too, of the same shape; got y_pred of shape "
            f"{y_pred.shape}")
    arguments = dict(arguments)
    if arguments.get("ignore_index") is not None:
        raise ValueError(
            f"metrics_gpu.dask.{name}: ignore_index of (N, L) {MULTILABEL} input (its cells "
            "left out one by one) is not made for Dask yet: compute in memory "
            f"(metrics_gpu.{name} takes it), or update a MultilabelMetrics(L, "
            "ignore_index=...) with each chunk")
    if read.every_average:  # classification_report: its own checks, in order
        digits = arguments["digits"]
        arguments["zero_division"] = check_zero_division(arguments["zero_division"])
        if not isinstance(digits, (int, np.integer)) or isinstance(digits, bool) or digits < 0:
            raise ValueError(f"digits must be a non-negative integer, got {digits!r}")
    elif read.rates is not None:  # the in-memory checks of the set-wise arguments, in order
        average = check_option(arguments["average"], AVERAGE_OPTIONS, "average")
        if "beta" in arguments:
            arguments["beta"] = check_beta(arguments["beta"])
        arguments["zero_division"] = check_zero_division(arguments["zero_division"])
        _rates._check_multilabel_average(average, arguments["pos_label"])
    scores = check_score_kind(arguments.get("scores"), arguments.get("threshold", 0.5),
                              allow_none=True)
    columns = _label_columns(arguments["labels"], int(y_true.shape[1])) if read.labels else None
    rates = read.rates if read.rates is not None and (
        read.every_average or arguments["average"] == "samples") else ()
    beta = arguments.get("beta", 1.0)
    if "f-score" in rates and (math.isinf(beta) or beta == 0):
        rates = tuple(rate for rate in rates if rate != "f-score")  # F is R (P) itself
    validate = check_bool(arguments.get("validate", True), "validate")
    states = _per_chunk(_multilabel_of_chunk, (y_true, y_pred, weight), offsets,
                        columns=columns, rates=rates, beta=beta,
                        num_classes=arguments.get("num_classes"),
                        ignore_index=arguments.get("ignore_index"), validate=validate,
                        scores=scores)
    return _result(_tree(states, _merge_multilabel), _multilabel_value, name, arguments,
                   weight is not None, validate, compute=compute)


def _multilabel_value(sums: MultilabelSums | None, name: str, arguments: dict, weighted: bool,
                      validate: bool):
    """The value of label function ``name`` of the merged sums; the checks
    that only the whole data decides (rows present, weights not all 0)."""
    if sums is None:
        raise ValueError("y_true and y_pred are empty; at least one sample is required")
    if weighted and validate and not sums.wrong_labels.any():
        raise ValueError(ALL_ZERO_WEIGHT.format(n=sums.rows))
    value = _MULTILABEL_READS[name].value(sums, _counts_of(sums), arguments)
    return np.float64(value) if is_host_scalar(value) else value


# -- multilabel ranking metrics: per-row values, summed ---------------------------------
#
# Each row's value needs only that row (its L labels, ranked by their
# scores), so a chunk's state is three numbers: the weighted sum of its rows'
# values (the in-memory row functions of metrics_gpu._multilabel.ranking),
# their weight and their number; merging adds them; the metric is the sum
# over the weight (the in-memory weighted mean).


def _lrap_rows(inputs):
    return each_row(inputs, row_average_precision)


def _ranking_loss_rows(inputs):
    return each_row(inputs, row_ranking_loss)


def _coverage_rows(inputs):
    return each_row(inputs, row_coverage)



def _row_sums_of_chunk(y_true, y_score, sample_weight, *, index, offset, function,
                       min_labels, graded, rows_of) -> np.ndarray | None:
    """``[weighted sum of the rows' values, their weight, their number]`` of
    one chunk (float64, host), after the in-memory checks of its inputs
    (weights all 0 are refused for the whole data, on the merged sums)."""
    if y_true.shape[0] == 0:
        return None
    try:
        inputs = check_indicator_inputs(y_true, y_score, sample_weight, function=function,
                                        min_labels=min_labels, allow_all_zero=True,
                                        graded=graded)
        per_row = rows_of(inputs)
    except ValueError as error:
        raise _in_chunk(error, index, offset) from error
    xp, weight = inputs.backend.xp, inputs.sample_weight
    if weight is None:
        total, mass = xp.sum(per_row), per_row.shape[0]
    else:
        total, mass = xp.sum(per_row * weight), xp.sum(weight)
    return np.array([float(inputs.backend.to_host(total)), float(inputs.backend.to_host(mass)),
                     per_row.shape[0]])


def _add_row_sums(*parts: np.ndarray | None) -> np.ndarray | None:
    present = [p for p in parts if p is not None]
    return functools.reduce(np.add, present) if present else None


def _row_mean(sums: np.ndarray | None, function: str, weighted: bool) -> np.float64:
    """The weighted mean of the rows' values, as in memory."""
    if sums is None:
        raise ValueError(f"{function}: y_true and y_score are empty; at least one sample is "
                         "required")
    total, mass, rows = sums
    if weighted and mass == 0:
        raise ValueError(ALL_ZERO_WEIGHT.format(n=int(rows)))
    return np.float64(total / mass)


def _row_metric_graph(y_true, y_score, sample_weight, *, function, rows_of, min_labels=2,
                      graded=False, compute):
    """The graph of a row-separable multilabel ranking metric: per chunk the
    sums of :func:`_row_sums_of_chunk`, added, their mean."""
    _rows_only({"y_true": y_true, "y_score": y_score})
    y_true, aligned, offsets = _aligned(y_true, {"y_score": y_score,
                                                 "sample_weight": sample_weight})
    y_score, weight = aligned["y_score"], aligned["sample_weight"]
    if y_true.ndim == 2 and y_score.shape != y_true.shape:
        raise ValueError(f"{function}: y_true and y_score must have the same shape (N, L); got "
                         f"{y_true.shape} and {y_score.shape}")
    states = _per_chunk(_row_sums_of_chunk, (y_true, y_score, weight), offsets,
                        function=function, min_labels=min_labels, graded=graded,
                        rows_of=rows_of)
    return _result(_tree(states, _add_row_sums), _row_mean, function, weight is not None,
                   compute=compute)


_RANKING_PARAMETERS = """
    Parameters
    ----------
    y_true : Dask array of shape (N, L)
        {y_true}
    y_score : Dask array of shape (N, L)
        Finite scores; higher ranks a label first.
    sample_weight : Dask array of shape (N,), optional
        Finite, non-negative weights, not all 0.{extra}
    compute : bool, default False
        False: a ``dask.delayed.Delayed`` of the value; True: the value.

    Returns
    -------
    {returns} : numpy.float64, or a ``Delayed`` of it
        The value of the in-memory function of all the rows (within
        rounding: the rows' values are summed chunk by chunk).

    Notes
    -----
    Arrays that are not Dask arrays are chunked like ``y_true``; ``y_score``
    and ``sample_weight`` are rechunked to ``y_true``'s rows. (N, L) inputs
    chunked along the label axis are refused (a ``ValueError`` naming the
    argument): rechunk them with ``x.rechunk({{1: -1}})``. A chunk's bad
    input raises the in-memory error, naming the chunk.
"""

_INDICATOR_TRUE = "Label indicators: 1 (or True) where a label is relevant, else 0."


def _ranking_doc(summary: str, *, y_true: str = _INDICATOR_TRUE, extra: str = "",
                 returns: str = "score"):
    def document(function):
        function.__doc__ = summary.rstrip() + "\n" + _RANKING_PARAMETERS.format(
            y_true=y_true, extra=extra, returns=returns)
        return function
    return document


@_ranking_doc("""Label ranking average precision of Dask arrays, as
    :func:`metrics_gpu.label_ranking_average_precision_score`.

    Each chunk sums the weighted per-row values of the in-memory row function
    (ties at their worst rank; 1 for a row whose labels are all relevant or all
    irrelevant) and their weight; the sums are merged in a tree.
""")
def label_ranking_average_precision_score(y_true, y_score, *, sample_weight=None,
                                          compute=False):
    return _row_metric_graph(y_true, y_score, sample_weight,
                             function="label_ranking_average_precision_score",
                             rows_of=_lrap_rows, min_labels=1, compute=compute)


@_ranking_doc("""Ranking loss of Dask arrays, as :func:`metrics_gpu.label_ranking_loss`.

    Each chunk sums the weighted per-row fractions of mis-ordered (relevant,
    irrelevant) label pairs (a tie is mis-ordered) and their weight; the sums
    are merged in a tree.
""", returns="loss")
def label_ranking_loss(y_true, y_score, *, sample_weight=None, compute=False):
    return _row_metric_graph(y_true, y_score, sample_weight, function="label_ranking_loss",
                             rows_of=_ranking_loss_rows, compute=compute)


@_ranking_doc("""Coverage error of Dask arrays, as :func:`metrics_gpu.coverage_error`.

    Each chunk sums the weighted per-row counts of labels scored at least as
    high as the row's lowest-scored relevant label (0 without relevant
    labels) and their weight; the sums are merged in a tree.
""", returns="coverage_error")
def coverage_error(y_true, y_score, *, sample_weight=None, compute=False):
    return _row_metric_graph(y_true, y_score, sample_weight, function="coverage_error",
                             rows_of=_coverage_rows, compute=compute)


_GAIN_EXTRA = """
    k : int, optional
        Only the k best-ranked labels count.{log_base}
    ignore_ties : bool, default False
        Rank tied scores in NumPy's ``argsort`` order (reversed) instead of
        averaging over their orders."""


@_ranking_doc("""Discounted cumulative gain of Dask arrays, as :func:`metrics_gpu.dcg_score`.

    Each chunk sums the weighted per-row gains of the in-memory row function
    and their weight; the sums are merged in a tree.
""", y_true="True relevance (any finite numbers; 0/1 label indicators included).",
              extra=_GAIN_EXTRA.format(log_base="""
    log_base : float, default 2
        Base of the logarithm of the discount (> 0)."""), returns="dcg")
def dcg_score(y_true, y_score, *, k=None, log_base=2, sample_weight=None, ignore_ties=False,
              compute=False):
    k, log_base = check_rank_cutoff(k), check_log_base(log_base)
    ignore_ties = check_bool(ignore_ties, "ignore_ties")
    return _row_metric_graph(y_true, y_score, sample_weight, function="dcg_score",
                             rows_of=functools.partial(dcg_rows, k=k, log_base=log_base,
                                                       ignore_ties=ignore_ties),
                             graded=True, compute=compute)


@_ranking_doc("""Normalized discounted cumulative gain of Dask arrays, as
    :func:`metrics_gpu.ndcg_score`.

    Each chunk sums the weighted per-row NDCG of the in-memory row function (0
    for a row whose ideal DCG is 0) and their weight; the sums are merged in a
    tree.
""", y_true="True relevance: finite and non-negative.",
              extra=_GAIN_EXTRA.format(log_base=""), returns="ndcg")
def ndcg_score(y_true, y_score, *, k=None, sample_weight=None, ignore_ties=False,
               compute=False):
    k = check_rank_cutoff(k)
    ignore_ties = check_bool(ignore_ties, "ignore_ties")
    return _row_metric_graph(y_true, y_score, sample_weight, function="ndcg_score",
                             rows_of=functools.partial(ndcg_rows, k=k, ignore_ties=ignore_ties),
                             graded=True, compute=compute)


# -- the streaming state: every metric of MultilabelMetrics ---------------------------


def _host_state(state: dict) -> dict:
    """A state_dict with host NumPy arrays (a CuPy state is copied off the GPU)."""
    return {name: value if name in ("version", "spec", "updates", "rows_seen") else
            np.asarray(to_numpy(value)) for name, value in state.items()}


def _multilabel_state_of_chunk(y_true, preds, sample_weight, *, index, offset, spec,
                               check) -> dict | None:
    """One chunk's :class:`metrics_gpu.MultilabelMetrics` state, as host arrays;
    with ``check``, a row the state leaves out raises, naming the chunk and
    the row in the whole array."""
    if y_true.shape[0] == 0:
        return None
    metrics = MultilabelMetrics(**spec, validate=False)
    metrics._warns_of_probabilities = False  # a warning per chunk would say nothing more
    try:
        metrics.update(y_true, preds, sample_weight)
    except ValueError as error:
        raise _in_chunk(error, index, offset) from error
    invalid = metrics.first_invalid() if check else None
    if invalid is not None:
        count, first, arguments = invalid
        raise ValueError(
            f"{count} row(s) of chunk {index} along axis 0 hold a value of "
            f"{' and '.join(arguments)} that the multilabel state refuses (targets must be "
            "0/1 or ignore_index; label predictions 0/1; probabilities in [0, 1]; logits "
            f"finite; weights finite and >= 0): the first is row {offset + first} of the "
            "whole array")
    return _host_state(metrics.state_dict())


def _merge_multilabel_states(spec: dict, *states: dict | None) -> dict | None:
    present = [state for state in states if state is not None]
    if len(present) <= 1:
        return present[0] if present else None
    merged = MultilabelMetrics(**spec)
    merged.load_state_dict(present[0])
    for state in present[1:]:
        other = MultilabelMetrics(**spec)
        other.load_state_dict(state)
        merged.merge(other)
    return _host_state(merged.state_dict())


def _multilabel_report(state: dict | None, spec: dict, pick=None, options=None):
    """The :class:`metrics_gpu.MultilabelReport` of the merged state (NumPy
    values), or ``pick(report, **options)``."""
    if state is None:
        raise ValueError("y_true and preds are empty; at least one sample is required")
    metrics = MultilabelMetrics(**spec)
    metrics.load_state_dict(state)
    report = metrics.compute()
    return report if pick is None else pick(report, **(options or {}))


def multilabel_state_graph(y_true, preds, sample_weight, *, spec: dict, check: bool, compute,
                           pick=None, options=None):
    """The graph of a :class:`metrics_gpu.MultilabelMetrics` state per chunk of
    (N, L) rows, merged in a tree, reported (``pick``: one value of the report)."""
    _rows_only({"y_true": y_true, "preds": preds})
    y_true, aligned, offsets = _aligned(y_true, {"preds": preds, "sample_weight": sample_weight})
    preds = aligned["preds"]
    if y_true.ndim != 2 or preds.shape != y_true.shape:
        raise ValueError(f"y_true and preds must be (N, L) arrays of one shape; got "
                         f"{y_true.shape} and {preds.shape}")
    MultilabelMetrics(**spec)  # the arguments' errors, now
    states = _per_chunk(_multilabel_state_of_chunk, (y_true, preds, aligned["sample_weight"]),
                        offsets, spec=spec, check=check)
    return _result(_tree(states, _merge_multilabel_states, spec), _multilabel_report, spec,
                   pick, options, compute=compute)


def multilabel_metrics(y_true, preds, num_labels, *, sample_weight=None, threshold=0.5,
                       scores="logits", beta=1.0, zero_division=0.0, ignore_index=None,
                       thresholds=None, ranking=False, compute=False):
    """Every metric of :class:`metrics_gpu.MultilabelMetrics` over Dask arrays:
    the in-memory state's :class:`metrics_gpu.MultilabelReport` (NumPy values).

    One state per chunk of (N, L) rows (its ``update``), merged in a tree,
    computed once: subset accuracy, Hamming loss, precision / recall / F /
    Jaccard micro, macro, weighted, samples and per label, the per-label
    confusion matrices; with ``thresholds=H`` the binned ROC AUC / AP (per
    label, macro, weighted, micro) with their error bounds; with
    ``ranking=True`` LRAP, ranking loss and coverage error. A row the state
    refuses raises ``ValueError`` naming its chunk and its row.

    Parameters
    ----------
    y_true, preds, sample_weight : Dask arrays (others are chunked like ``y_true``)
        (N, L) 0/1 targets, (N, L) 0/1 predictions or scores of kind
        ``scores``, (N,) weights; chunked along the rows only.
    num_labels, threshold, scores, beta, zero_division, ignore_index, thresholds, ranking
        As :class:`metrics_gpu.MultilabelMetrics`.
    compute : bool, default False
        False: a ``Delayed`` of the report; True: the report.
    """
    spec = dict(num_labels=num_labels, threshold=threshold, scores=scores, beta=beta,
                zero_division=zero_division, ignore_index=ignore_index, thresholds=thresholds,
                ranking=ranking)
    return multilabel_state_graph(y_true, preds, sample_weight, spec=spec, check=True,
                                  compute=compute)


# Public names present themselves as metrics_gpu.dask, which re-exports them
# (docs/api.rst's autosummary; pickling by reference).
for _public in (MultilabelSums, label_ranking_average_precision_score, label_ranking_loss,
                coverage_error, dcg_score, ndcg_score, multilabel_metrics):
    _public.__module__ = "metrics_gpu.dask"
del _public
