"""Classification metrics of ``dask.array`` inputs: a small state per chunk,
merged in a tree, the metric computed on the merged state.

Install the ``[dask]`` extra: ``pip install '.[dask]'`` in a checkout, or the
wheel file with ``[dask]``. Importing :mod:`metrics_gpu` never imports Dask;
only this module does.

Every function builds a graph of three stages and gathers nothing but the
last, small state:

    one state per chunk (on the worker that holds the chunk, with the chunk's
    array module: NumPy, or CuPy on a GPU) -> a tree of merges (up to
    :data:`SPLIT_EVERY` states per task) -> the metric of the merged state

A chunk of the data never travels to the client: only the per-chunk states,
copied to the host as small NumPy arrays, travel between workers, and the
merged state (or the metric) to the client.

**Label metrics** (:func:`accuracy_score` ... :func:`label_report`) take the
arguments of their in-memory namesakes in :mod:`metrics_gpu` and give the
same results. Each is a function of the weighted confusion matrix, so a
chunk's state is its confusion *cells*: the distinct (true, predicted) pairs
present, each with its sample count and its weight sum (a pair whose weights
are all 0 is present, as in memory). Merging concatenates the cells and sums
the counts and weights of equal pairs. The metric is the in-memory function
applied to the merged cells as samples: ``y_true`` the cells' true codes,
``y_pred`` their predicted codes, ``sample_weight`` their weight sums (their
counts without weights). ``(N, K)`` scores as ``y_pred`` are reduced by a
row argmax in each chunk (ties to the first maximum, as in memory), which
makes K the number of classes. Inputs are validated chunk by chunk with the
in-memory checks (a ``ValueError`` names the chunk and its first sample's
position); what only the whole data decides (``labels=`` present,
``average='binary'`` on multiclass data, weights all 0) is checked on the
merged cells.

**Multilabel input.** ``(N, L)`` 0/1 indicator matrices (L >= 2, chunked
along the rows only: an input chunked along the label axis is refused with
a ``ValueError`` naming it) go to the multilabel forms of
:func:`accuracy_score` (subset accuracy), :func:`zero_one_loss`,
:func:`hamming_loss`, :func:`precision_recall_fscore_support`,
:func:`precision_score`, :func:`recall_score`, :func:`f1_score`,
:func:`fbeta_score`, :func:`jaccard_score`, :func:`specificity_score` and
:func:`multilabel_confusion_matrix` (``samplewise=False`` only), with the
arguments and results of their in-memory namesakes. A chunk's state is O(L):
per selected label its weighted tp, fp, fn and tn; the rows' count (weight)
per number of wrong labels; and for ``average="samples"`` the per-row rates
of the in-memory formulas, summed as the weighted sum where defined, the
weight of the rows where defined and where 0/0, and the number of the latter,
from which every ``zero_division`` gives the in-memory mean. Merging adds
the states; the metric is the in-memory formula of the merged counts. The
row-separable ranking metrics :func:`label_ranking_average_precision_score`,
:func:`label_ranking_loss`, :func:`coverage_error`, :func:`dcg_score` and
:func:`ndcg_score` sum the weighted values of the in-memory row functions
and the weight per chunk. Weights all 0 are refused for the whole data, not
per chunk. Not for multilabel input on Dask: ``classification_report`` and
``label_report`` (and what refuses it in memory).

**Score metrics** (:func:`classification_metrics`, :func:`log_loss`,
:func:`brier_score_loss`, :func:`top_k_accuracy_score`,
:func:`expected_calibration_error`, and the binned :func:`roc_auc_score` and
:func:`average_precision_score`) keep one
:class:`metrics_gpu.ClassificationMetrics` state per chunk, merged with
``merge``; see each function for the arguments the state supports. The
exact ROC AUC and average precision rank every score against every other,
which needs all N scores in one place: on Dask they are the binned values of
``thresholds=H`` probability bins, whose error against the exact values is
bounded (``roc_auc_error_bound``, ``average_precision_error_bound`` in
:func:`classification_metrics`).

Every function is lazy: it returns a ``dask.delayed.Delayed`` whose
``compute()`` gives the value, or the value itself with ``compute=True``
(then only the merged state is gathered, and the metric, with its warnings,
runs in the client). Lazily, the last step runs on a worker: its warnings
(``UndefinedMetricWarning`` ...) are emitted there, and its errors are
raised by ``compute()``. Results are NumPy values on the host.

Chunks and alignment: the data must have known chunk sizes along axis 0.
``y_pred``, scores and ``sample_weight`` are rechunked to ``y_true``'s
chunks along axis 0, and to whole rows along the other axes (rechunking
moves data between workers, not to the client); arrays that are not Dask
arrays are chunked like ``y_true``.

GPUs: start a ``dask_cuda.LocalCUDACluster`` (one worker per GPU) and make
the chunks CuPy arrays, ``x.map_blocks(cupy.asarray)``; each chunk's state is
then computed on its worker's GPU (one pass of the kernels, as in memory)
and copied to the host as a few small arrays. This path is written for CuPy
chunks but is untested here without a GPU.

Examples
--------
>>> import dask.array as da
>>> import numpy as np
>>> from metrics_gpu import dask as mgd
>>> y_true = da.from_array(np.array([0, 1, 2, 2, 1, 0]), chunks=4)
>>> y_pred = da.from_array(np.array([0, 2, 2, 2, 1, 1]), chunks=4)
>>> lazy = mgd.accuracy_score(y_true, y_pred)
>>> round(float(lazy.compute()), 4)
0.6667
>>> mgd.confusion_matrix(y_true, y_pred, compute=True)
array([[1, 1, 0],
       [0, 1, 1],
       [0, 0, 2]])
"""

from __future__ import annotations

import functools
import inspect
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from metrics_gpu._common.extras import install_hint

try:
    import dask
    import dask.array as da
    from dask.delayed import Delayed, delayed
except ImportError as error:  # pragma: no cover - the [dask] extra is missing
    raise ImportError(
        f"metrics_gpu.dask needs Dask: {install_hint('dask')} "
        f"(importing it failed: {error})"
    ) from error

from metrics_gpu._functional import labels as _classification
from metrics_gpu._formulas import labels as F
from metrics_gpu._multilabel import counts as ML
from metrics_gpu.backends.selection import resolve_backend
from metrics_gpu.backends.kernel_sources import STREAM_NO_ERROR, STREAM_ORDINAL_SHIFT
from metrics_gpu._multilabel.ranking import (
    dcg_rows,
    each_row,
    ndcg_rows,
    row_average_precision,
    row_coverage,
    row_ranking_loss,
)
from metrics_gpu._pipeline.mapping import as_lists
from metrics_gpu._pipeline.stages import is_host_scalar
from metrics_gpu._formulas.state import RowArgmax
from metrics_gpu._streaming.metrics import ClassificationMetrics, StreamingReport
from metrics_gpu._validation import (
    ALL_ZERO_WEIGHT,
    AVERAGE_OPTIONS,
    IGNORED_POSITION,
    MULTILABEL,
    MultilabelInputs,
    check_beta,
    check_bool,
    check_indicator_inputs,
    check_k,
    check_groups,
    check_label_inputs,
    check_log_base,
    check_multiclass_roc_labels_argument,
    check_multilabel_inputs,
    check_option,
    check_rank_cutoff,
    check_sample_weight,
    check_score_inputs,
    check_score_labels,
    check_zero_division,
    to_numpy,
)
from metrics_gpu._reports.labels import LabelReport
from metrics_gpu._reports.labels import label_report as _label_report

# States merged by one task of the tree: a chunk's state is O(K^2) numbers at
# most (K x K cells, or the streaming state), so eight of them are a small task.
SPLIT_EVERY = 8

__all__ = [
    "SPLIT_EVERY", "DaskStreamingReport", "accuracy_score", "average_precision_score",
    "balanced_accuracy_score", "brier_score_loss", "classification_metrics",
    "classification_report",
    "cohen_kappa_score", "confusion_matrix", "coverage_error", "dcg_score",
    "expected_calibration_error", "f1_score",
    "fbeta_score", "hamming_loss", "jaccard_score", "label_ranking_average_precision_score",
    "label_ranking_loss", "label_report", "log_loss",
    "matthews_corrcoef", "multilabel_confusion_matrix", "ndcg_score",
    "precision_recall_fscore_support", "precision_score",
    "recall_score", "roc_auc_score", "specificity_score", "top_k_accuracy_score",
    "zero_one_loss",
]


# -- the graph: aligned chunks -> a state per chunk -> a tree of merges -> a value ------


def _as_dask(array, name: str, rows=None):
    """``array`` as a Dask array with known chunk sizes along axis 0."""
    if array is None:
        return None
    if not isinstance(array, da.Array):
        shape = np.shape(array)
        # Chunked like y_true when it has as many rows (else the caller names the mismatch).
        array = da.asarray(array) if rows is None or shape[:1] != (sum(rows),) else \
            da.from_array(array, chunks=(rows,) + tuple(-1 for _ in shape[1:]))
    if array.ndim == 0:
        raise ValueError(f"{name} must be an array of one entry per sample, got a scalar")
    if any(math.isnan(size) for size in array.chunks[0]):
        raise ValueError(
            f"{name} has unknown chunk sizes along axis 0 (after boolean indexing, for "
            f"example); call {name}.compute_chunk_sizes() first"
        )
    return array


def _aligned(y_true, others: dict):
    """``y_true`` and the other inputs chunked alike along axis 0 (``y_true``'s
    chunks), whole along the other axes; the first sample of each chunk."""
    y_true = _as_dask(y_true, "y_true")
    rows = y_true.chunks[0]
    n = y_true.shape[0]
    aligned = {}
    for name, array in others.items():
        array = _as_dask(array, name, rows)
        if array is not None:
            if array.shape[0] != n:
                raise ValueError(f"y_true has {n} samples but {name} has {array.shape[0]}")
            array = array.rechunk((rows,) + tuple((size,) for size in array.shape[1:]))
        aligned[name] = array
    y_true = y_true.rechunk((rows,) + tuple((size,) for size in y_true.shape[1:]))
    offsets = tuple(int(v) for v in np.concatenate([[0], np.cumsum(rows)[:-1]]))
    return y_true, aligned, offsets


def _per_chunk(state_of_chunk, arrays, offsets, **options) -> list:
    """One task per chunk: ``state_of_chunk(*chunks, index=, offset=, **options)``."""
    blocks = [None if a is None else a.to_delayed().ravel() for a in arrays]
    return [
        delayed(state_of_chunk, pure=True)(
            *(None if b is None else b[i] for b in blocks), index=i, offset=offsets[i],
            **options)
        for i in range(len(offsets))
    ]


def _tree(states: list, merge, *args):
    """Merge the states ``SPLIT_EVERY`` at a time, level by level, to one
    (``merge(*args, *states)``)."""
    while len(states) > 1:
        states = [
            group[0] if len(group) == 1 else delayed(merge, pure=True)(*args, *group)
            for group in (states[i:i + SPLIT_EVERY] for i in range(0, len(states), SPLIT_EVERY))
        ]
    return states[0]


def _result(merged: Delayed, finish, *args, compute: bool):
    """The value of ``finish(merged state, *args)``: lazily, one more task; with
    ``compute=True`` the merged state is gathered and finished here."""
    if not isinstance(compute, bool):
        raise ValueError(f"compute must be True or False, got {compute!r}")
    if compute:
        (state,) = dask.compute(merged)
        return finish(state, *args)
    return delayed(finish, pure=True)(merged, *args)


def _in_chunk(error: ValueError, index: int, offset: int) -> ValueError:
    return ValueError(f"{error} [positions within chunk {index} along axis 0, which starts at "
                      f"sample {offset} of the whole array]")


# -- label metrics: confusion cells ------------------------------------------------


@dataclass(frozen=True)
class ConfusionCells:
    """The distinct (true, predicted) pairs of some samples, sorted, with the
    number of samples of each pair and (weighted) their weight sum. Host arrays."""

    true: np.ndarray
    pred: np.ndarray
    count: np.ndarray             # int64
    weight: np.ndarray | None     # int64 for integer weights, else float64
    group: np.ndarray | None = None  # with groups=: cells are (group, true, predicted)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.true, self.pred, self.count, self.weight,
                                      self.group) if a is not None)


def _segment_sums(values, starts, cell, n_cells: int, xp):
    """Sums of ``values`` (sorted by cell) per cell: exact in int64 for integers
    (a running sum, differenced), float64 for floats."""
    if values.dtype.kind == "f":
        return xp.bincount(cell, weights=values, minlength=n_cells)
    running = xp.cumsum(values.astype(np.int64))
    ends = running[xp.concatenate([starts[1:], xp.asarray([values.shape[0]])]) - 1]
    ends[1:] -= ends[:-1].copy()
    return ends


def _group_cells(true, pred, count, weight, xp, to_host, group=None) -> ConfusionCells:
    """Group samples (or cells) by their (true, predicted) pair, and by their
    group first when ``group`` is given (host values of any sortable kind)."""
    keys = [pred.astype(np.int64), true.astype(np.int64)]
    if group is None:
        order = xp.lexsort(xp.stack(keys))
    else:
        # Groups may be categories (strings): sorted on the host with the labels.
        host_keys = [np.asarray(to_host(k)) for k in keys]
        order = xp.asarray(np.lexsort([*host_keys, np.asarray(group)]))
        group = np.asarray(group)[np.asarray(to_host(order))]
    true, pred = true[order], pred[order]
    first = xp.ones(true.shape[0], dtype=bool)
    first[1:] = (true[1:] != true[:-1]) | (pred[1:] != pred[:-1])
    if group is not None:
        first[1:] |= xp.asarray(group[1:] != group[:-1])
    starts = xp.flatnonzero(first)
    cell = xp.cumsum(first) - 1
    n_cells = int(starts.shape[0])
    if count is None:
        count = xp.diff(xp.concatenate([starts, xp.asarray([true.shape[0]])])).astype(np.int64)
    else:
        count = _segment_sums(count[order], starts, cell, n_cells, xp)
    if weight is not None:
        weight = _segment_sums(weight[order], starts, cell, n_cells, xp)
    return ConfusionCells(
        np.asarray(to_host(true[starts])), np.asarray(to_host(pred[starts])),
        np.asarray(to_host(count)), None if weight is None else np.asarray(to_host(weight)),
        None if group is None else group[np.asarray(to_host(starts))])


def _cells_of_chunk(y_true, y_pred, sample_weight, groups=None, *, index, offset, num_classes,
                    ignore_index, validate, deterministic,
                    num_groups=None) -> ConfusionCells | None:
    """The confusion cells of one chunk, computed where it lives (NumPy or CuPy),
    after the in-memory checks of its labels, scores, weights and groups."""
    if y_true.shape[0] == 0:
        return None
    try:
        inputs = check_label_inputs(y_true, y_pred, num_classes=num_classes,
                                    sample_weight=sample_weight, ignore_index=ignore_index,
                                    validate=validate, deterministic=deterministic,
                                    allow_all_zero_weight=True)
        if groups is not None:
            check_groups(groups, int(inputs.y_true.shape[0]), inputs.backend, num_groups)
            groups = np.asarray(inputs.backend.to_host(groups)) if hasattr(
                groups, "__cuda_array_interface__") else np.asarray(groups)
    except ValueError as error:
        raise _in_chunk(error, index, offset) from error
    backend = inputs.backend
    xp = backend.xp
    pred = inputs.y_pred
    if isinstance(pred, RowArgmax):
        pred = xp.argmax(pred.scores, axis=1)  # ties to the first maximum, as in memory
    return _group_cells(inputs.y_true, pred, None, inputs.sample_weight, xp, backend.to_host,
                        groups)


def _merge_cells(*parts: ConfusionCells | None) -> ConfusionCells | None:
    present = [p for p in parts if p is not None]
    if len(present) <= 1:
        return present[0] if present else None
    weighted = present[0].weight is not None

    def joined(field):
        return np.concatenate([getattr(p, field) for p in present])

    return _group_cells(joined("true"), joined("pred"), joined("count"),
                        joined("weight") if weighted else None, np, np.asarray,
                        joined("group") if present[0].group is not None else None)


def _integer_support(result, arguments):
    """precision_recall_fscore_support: int64 supports, as without weights in memory."""
    precision, recall, fscore, support = result
    return precision, recall, fscore, None if support is None else support.astype(np.int64)


def _integer_support_text(result, arguments):
    """classification_report: integer supports in the text, as without weights."""
    if arguments.get("output_dict", False):
        return result
    lines = []
    for line in result.split("\n"):
        last = line.rpartition(" ")[2]
        try:
            support = float(last)
        except ValueError:
            lines.append(line)
            continue
        lines.append(line[:len(line) - max(9, len(last))] + f"{int(support):>9}")
    return "\n".join(lines)


# The in-memory result of counts as integer weights differs from the unweighted
# one only in these types (every other function gives the same type either way).
_AS_UNWEIGHTED = {
    "precision_recall_fscore_support": _integer_support,
    "classification_report": _integer_support_text,
    "multilabel_confusion_matrix": lambda result, arguments: result.astype(np.int64),
}


def _metric_of_cells(cells, metric, arguments: dict, weighted: bool):
    """The in-memory ``metric`` of the merged cells, as of the samples."""
    if cells is None:  # no sample at all: the in-memory error
        empty = np.zeros(0, dtype=np.int64)
        return metric(empty, empty, **arguments)
    weight = cells.weight if weighted else cells.count
    if cells.group is not None:
        arguments = {**arguments, "groups": cells.group}
    result = metric(cells.true, cells.pred, sample_weight=weight, **arguments)
    if metric is _label_report:
        return _resolved_report(result, cells, arguments, weighted)
    fix = _AS_UNWEIGHTED.get(metric.__name__)
    return result if weighted or fix is None else fix(result, arguments)


def _resolved_report(report: LabelReport, cells, arguments, weighted) -> LabelReport:
    """A :class:`LabelReport` read to the host (it travels from a worker). With
    ``validate=False``, ``invalid`` counts samples, not cells."""
    fields = {name: getattr(report, name) for name in (
        "metrics", "per_class", "classes", "total", "invalid", "confusion_matrix",
        "class_names", "intervals", "groups")}
    if arguments.get("validate", True) is False and fields["invalid"]:
        counted = cells.count
        if arguments.get("ignore_index") is not None:
            counted = counted[cells.true != arguments["ignore_index"]]
        valid = report if not weighted else _label_report(
            cells.true, cells.pred, sample_weight=cells.count, **arguments)
        fields["invalid"] = int(counted.sum()) - int(valid.total)
    return LabelReport(functools.partial(dict, fields))


_CHUNK_ARGUMENTS = {"num_classes": None, "ignore_index": None, "validate": True,
                    "deterministic": False}
_COMPUTE = inspect.Parameter("compute", inspect.Parameter.KEYWORD_ONLY, default=False)


def _label_metric(metric):
    """The Dask version of the in-memory label function ``metric``: same
    arguments, plus ``compute``."""
    signature = inspect.signature(metric)
    first, second = list(signature.parameters)[:2]

    def function(*args, compute=False, **kwargs):
        bound = signature.bind(*args, **kwargs)
        arguments = dict(bound.arguments)
        y_true, y_pred = arguments.pop(first), arguments.pop(second)
        sample_weight = arguments.pop("sample_weight", None)
        _refuse_samplewise(arguments.get("samplewise", False))
        if _is_indicator_shape(y_true):
            bound.apply_defaults()
            return _multilabel_graph(metric, y_true, y_pred, sample_weight,
                                     {name: value for name, value in bound.arguments.items()
                                      if name not in (first, second, "sample_weight")},
                                     compute=compute)
        y_true, aligned, offsets = _aligned(y_true, {"y_pred": y_pred,
                                                     "sample_weight": sample_weight})
        y_true, y_pred = _label_vector(y_true, "y_true"), aligned["y_pred"]
        if y_pred.ndim == 2 and y_pred.shape[1] == 1:
            y_pred = y_pred[:, 0]
        if y_pred.ndim == 2:  # (N, K) scores: K classes
            k = int(y_pred.shape[1])
            given = arguments.get("num_classes")
            if given is not None and given != k:
                raise ValueError(f"y_pred has {k} score columns but num_classes={given}")
            arguments["num_classes"] = k
        elif y_pred.ndim != 1:
            raise ValueError(f"y_pred must be (N,) class codes or (N, K) scores, got shape "
                             f"{y_pred.shape}")
        chunk = {name: arguments.get(name, default) for name, default in _CHUNK_ARGUMENTS.items()}
        weight = aligned["sample_weight"]
        if arguments.get("cluster") is not None:
            raise ValueError("cluster= is not made for metrics_gpu.dask yet: the cluster "
                             "bootstrap needs each unit's matrix (in memory: label_report)")
        groups = arguments.pop("groups", None)
        if groups is not None:
            # Each chunk's cells carry their group; the report of the merged
            # cells counts them per group (groups= of the in-memory report).
            _, with_groups, _ = _aligned(y_true, {"groups": groups})
            groups = with_groups["groups"]
            chunk["num_groups"] = arguments.get("num_groups")
        states = _per_chunk(_cells_of_chunk, (y_true, y_pred, weight, groups), offsets, **chunk)
        return _result(_tree(states, _merge_cells), _metric_of_cells, metric, arguments,
                       weight is not None, compute=compute)

    name = metric.__name__
    summary = inspect.getdoc(metric).split("\n\n")[0]
    function.__name__ = function.__qualname__ = name
    function.__module__ = __name__
    function.__signature__ = signature.replace(
        parameters=[*signature.parameters.values(), _COMPUTE])
    function.__doc__ = (
        f"{summary}\n\nThe Dask version of :func:`metrics_gpu.{name}`: the same arguments "
        "and result, from the confusion cells of each chunk (see :mod:`metrics_gpu.dask`). "
        "``y_pred`` and ``sample_weight`` (Dask arrays, or arrays chunked here) are rechunked "
        "to ``y_true``'s chunks along axis 0 when theirs differ."
        + (" (N, L) multilabel-indicator input: from each chunk's per-label counts and "
           "per-row sums instead (see :mod:`metrics_gpu.dask`, \"Multilabel input\"); its "
           "arrays must be chunked along rows only." if name in _MULTILABEL_READS else "")
        + "\n\ncompute : bool, default False\n    False: a ``dask.delayed.Delayed`` of the "
        "result; True: the result.\n"
    )
    return function


def _label_vector(array, name: str):
    """(N,) class codes; an (N, 1) column is flattened."""
    if array.ndim == 2 and array.shape[1] == 1:
        return array[:, 0]
    if array.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of class codes, got shape {array.shape} "
                         "(flatten label maps first: y.reshape(-1))")
    return array


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
                         beta, num_classes, ignore_index, validate) -> MultilabelSums | None:
    """One chunk's :class:`MultilabelSums`, computed where it lives (NumPy or
    CuPy), after the in-memory checks of its indicators and weights (weights
    all 0 are refused for the whole data, on the merged sums)."""
    if y_true.shape[0] == 0:
        return None
    try:
        inputs = check_multilabel_inputs(y_true, y_pred, num_classes=num_classes,
                                         ignore_index=ignore_index, validate=validate,
                                         takes_ignore_index=False)
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
    """``average="samples"`` of :func:`metrics_gpu._functional.labels._prfs_of_counts`,
    from the summed per-row rates: with ``beta`` inf (0), F is recall
    (precision) itself and warns only under that name."""
    precision, recall = sums.rates["precision"], sums.rates["recall"]
    if math.isinf(beta) or beta == 0:
        f_score, f_undefined = (recall if beta else precision), False
    else:
        f_score = sums.rates["f-score"]
        f_undefined = bool(f_score[3])
    if zero_division == "warn":
        _classification._warn_prf_undefined(
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
        result = _classification._multilabel_prfs(counts, beta=beta, average=average,
                                                  warn_for=warn_for,
                                                  zero_division=zero_division)
    return result if pick is None else result[pick]


def _rate_value(sums, counts, arguments, *, rate, name, modifier):
    """Jaccard and specificity as in memory (``name``, ``modifier``: its warning's words)."""
    average, zero_division = arguments["average"], arguments["zero_division"]
    if average != "samples":
        return _classification._averaged_rate(_SAMPLE_RATES[rate], name, modifier,
                                              counts.label_counts(), average=average,
                                              zero_division=zero_division)
    if zero_division == "warn" and sums.rates[rate][3]:
        F.warn_undefined(name, modifier, sums.rows, samplewise=True)
    return _samples_mean(sums.rates[rate], zero_division)


@dataclass(frozen=True)
class _MultilabelRead:
    """How a label function reads multilabel input: its ``value(sums, counts,
    arguments)`` of the merged sums; whether it takes ``labels=`` (columns);
    ``rates``: for a set-wise function (``average=``, ``zero_division=``), the
    per-row rates its ``average="samples"`` reads (None: not set-wise)."""

    value: Callable
    labels: bool = False
    rates: tuple[str, ...] | None = None


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
    return _classification._multilabel_columns(stand_in, labels)


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
    if read.rates is not None:  # the in-memory checks of the set-wise arguments, in order
        average = check_option(arguments["average"], AVERAGE_OPTIONS, "average")
        if "beta" in arguments:
            arguments["beta"] = check_beta(arguments["beta"])
        arguments["zero_division"] = check_zero_division(arguments["zero_division"])
        _classification._check_multilabel_average(average, arguments["pos_label"])
    columns = _label_columns(arguments["labels"], int(y_true.shape[1])) if read.labels else None
    rates = read.rates if read.rates is not None and arguments["average"] == "samples" else ()
    beta = arguments.get("beta", 1.0)
    if "f-score" in rates and (math.isinf(beta) or beta == 0):
        rates = tuple(rate for rate in rates if rate != "f-score")  # F is R (P) itself
    validate = check_bool(arguments.get("validate", True), "validate")
    states = _per_chunk(_multilabel_of_chunk, (y_true, y_pred, weight), offsets,
                        columns=columns, rates=rates, beta=beta,
                        num_classes=arguments.get("num_classes"),
                        ignore_index=arguments.get("ignore_index"), validate=validate)
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


# -- the label functions ---------------------------------------------------------------


accuracy_score = _label_metric(_classification.accuracy_score)
balanced_accuracy_score = _label_metric(_classification.balanced_accuracy_score)
cohen_kappa_score = _label_metric(_classification.cohen_kappa_score)
confusion_matrix = _label_metric(_classification.confusion_matrix)
f1_score = _label_metric(_classification.f1_score)
fbeta_score = _label_metric(_classification.fbeta_score)
hamming_loss = _label_metric(_classification.hamming_loss)
jaccard_score = _label_metric(_classification.jaccard_score)
matthews_corrcoef = _label_metric(_classification.matthews_corrcoef)
precision_recall_fscore_support = _label_metric(_classification.precision_recall_fscore_support)
precision_score = _label_metric(_classification.precision_score)
recall_score = _label_metric(_classification.recall_score)
specificity_score = _label_metric(_classification.specificity_score)
zero_one_loss = _label_metric(_classification.zero_one_loss)
multilabel_confusion_matrix = _label_metric(_classification.multilabel_confusion_matrix)
classification_report = _label_metric(_classification.classification_report)
label_report = _label_metric(_label_report)


# -- score metrics: the streaming state ----------------------------------------------


def _host_state(state: dict) -> dict:
    """A state_dict with host NumPy arrays (a CuPy state is copied off the GPU)."""
    return {name: value if name in ("version", "spec", "kind", "updates") else
            np.asarray(to_numpy(value)) for name, value in state.items()}


def _state_of_chunk(y_true, preds, sample_weight, *, index, offset, spec,
                    check, functional=False) -> dict | None:
    """One chunk's :class:`ClassificationMetrics` state, as host arrays.

    ``check``: the arguments of the in-memory checks of scores to run first,
    which also map the targets to their columns with ``labels=`` (None: the
    state's deferred checks only). The check keys of the state name the
    chunk as the update ordinal. ``functional``: the state of a functional
    score metric, which says what the in-memory function says of its scores
    (nothing of logits that look like probabilities)."""
    if y_true.shape[0] == 0:
        return None
    if check is not None:
        try:
            inputs = check_score_inputs(y_true, preds, sample_weight=sample_weight, **check)
        except ValueError as error:
            raise _in_chunk(error, index, offset) from error
        y_true, preds, sample_weight = inputs.y_true, inputs.scores, inputs.sample_weight
    metrics = ClassificationMetrics(**spec)
    if functional:
        metrics._warns_of_probabilities = False
    metrics.update(y_true, preds, sample_weight)
    state = _host_state(metrics.state_dict())
    checks = state["checks"].copy()
    found = checks[1:] != STREAM_NO_ERROR
    checks[1:][found] |= np.int64(index) << np.int64(STREAM_ORDINAL_SHIFT)
    state["checks"] = checks
    return state


def _merge_states(spec: dict, *states: dict | None) -> dict | None:
    present = [s for s in states if s is not None]
    if len(present) <= 1:
        return present[0] if present else None
    merged = ClassificationMetrics(**spec)
    merged.load_state_dict(present[0])
    for state in present[1:]:
        other = ClassificationMetrics(**spec)
        other.load_state_dict(state)
        merged.merge(other)
    return merged.state_dict()


def _report_of_state(state, spec: dict, offsets: tuple, positions: int, pick=None,
                     options=None):
    """The :class:`DaskStreamingReport` of the merged state, or ``pick(values,
    **options)`` of its values (``to_dict``'s layout, NaN kept). A deferred
    check's error names the sample's position in the whole array
    (``positions`` samples per row of ``y_true``)."""
    if state is None:
        raise ValueError("y_true and preds are empty; at least one sample is required")
    metrics = ClassificationMetrics(**spec)
    metrics.load_state_dict(state)
    first = metrics.first_invalid() if metrics.validate == "deferred" else None
    if first is not None:
        name, chunk, sample, problem, invalid = first
        raise ValueError(
            f"{name} of chunk {chunk} along axis 0 holds {problem} at sample "
            f"{offsets[chunk] * positions + sample} of the whole array (counting every "
            f"position); {invalid} sample(s) were left out in all")
    report = metrics.compute()
    if pick is None:
        return DaskStreamingReport.of(report)
    return pick(as_lists(report._host_values()), **options)


# The keys of the dictionary classification_metrics returned before it
# returned a report: still answered, with a DeprecationWarning.
_LEGACY_KEYS = ("total", "invalid", "metrics", "per_class", "calibration", "confusion_matrix")


class DaskStreamingReport(StreamingReport):
    """What :func:`classification_metrics` returns: the
    :class:`metrics_gpu.StreamingReport` of the merged state, on the host
    (NumPy values): the same mapping of metric names, attributes and
    ``to_dict()`` as the in-memory ``ClassificationMetrics(...).compute()``.

    For code written when the function returned ``to_dict()``'s dictionary,
    ``report["metrics"]``, ``report["per_class"]`` (and ``"total"``,
    ``"invalid"``, ``"calibration"``, ``"confusion_matrix"``) still give that
    dictionary's entries, with a ``DeprecationWarning``; they are not among
    the keys. Use ``report.to_dict()[...]``, or the metric names directly.
    """

    @classmethod
    def of(cls, report: StreamingReport) -> DaskStreamingReport:
        """``report`` as a :class:`DaskStreamingReport`: the same values, copied
        to the host and served by the numpy backend, so that the report holds
        no device array nor kernel backend (a worker pickles it to the client;
        the emulated backend's libraries cannot be pickled)."""
        from metrics_gpu.backends.selection import get_backend_implementation

        legacy = cls.__new__(cls)
        legacy.__dict__.update(report.__dict__)
        backend = report._backend
        for name in ("_label_values", "_score_values", "_support", "_matrix", "_checks",
                     "_histogram"):
            value = getattr(report, name)
            setattr(legacy, name, None if value is None else np.asarray(backend.to_host(value)))
        legacy._backend = get_backend_implementation("numpy")
        legacy._like = None
        return legacy

    def __getitem__(self, name: str):
        if name in _LEGACY_KEYS and name not in self._metric_names():
            warnings.warn(
                f"classification_metrics now returns a StreamingReport, a mapping of metric "
                f"names: report[{name!r}] is its old dictionary's entry; use "
                f"report.to_dict()[{name!r}] (or report[metric name])",
                DeprecationWarning, stacklevel=2)
            return self.to_dict()[name]
        return super().__getitem__(name)


def _score_graph(y_true, preds, sample_weight, *, spec, check, compute, pick=None,
                 options=None):
    """The graph of a streaming-state metric: a state per chunk, merged,
    reported (``pick``: one functional metric of the report)."""
    y_true, aligned, offsets = _aligned(y_true, {"preds": preds, "sample_weight": sample_weight})
    states = _per_chunk(_state_of_chunk, (y_true, aligned["preds"], aligned["sample_weight"]),
                        offsets, spec=spec, check=check, functional=pick is not None)
    return _result(_tree(states, _merge_states, spec), _report_of_state, spec, offsets,
                   math.prod(y_true.shape[1:]), pick, options, compute=compute)


def classification_metrics(y_true, preds, num_classes, *, sample_weight=None, top_k=(1, 5),
                           n_bins=15, thresholds=None, scores="logits", ignore_index=None,
                           confusion_matrix="auto", compute=False):
    """Every metric of :class:`metrics_gpu.ClassificationMetrics` over Dask arrays,
    as the in-memory state's report: a :class:`DaskStreamingReport` (a
    :class:`metrics_gpu.StreamingReport` of NumPy values, the same metric
    names and ``to_dict()``; before, this function returned ``to_dict()``'s
    dictionary, whose keys ``report["metrics"]`` ... still answer, deprecated).

    One state per chunk (``update`` of the chunk, ``validate="deferred"``),
    merged in a tree, computed once. ``preds``: ``(N,)`` labels, ``(N, K)``
    scores, or channel-first ``(N, K, d1, ...)`` scores with ``(N, d1, ...)``
    targets (chunked along axis 0 only). A bad sample raises ``ValueError`` at
    compute time, naming its chunk and its position in the whole array.
    ``thresholds=H`` adds the binned ROC AUC and average precision with their
    error bounds (``roc_auc_error_bound``, ``average_precision_error_bound``).

    Parameters
    ----------
    y_true, preds, sample_weight : Dask arrays (others are chunked like ``y_true``)
    num_classes, top_k, n_bins, thresholds, scores, ignore_index, confusion_matrix
        As :class:`metrics_gpu.ClassificationMetrics` (the K x K matrix,
        kept while K <= 2048 with "auto", is part of every chunk's state:
        pass ``confusion_matrix=False`` for large K).
    compute : bool, default False
        False: a ``Delayed`` of the report; True: the report.
    """
    spec = dict(num_classes=num_classes, top_k=top_k, n_bins=n_bins, thresholds=thresholds,
                scores=scores, ignore_index=ignore_index, confusion_matrix=confusion_matrix,
                validate="deferred")
    ClassificationMetrics(**spec)  # the arguments' errors, now
    return _score_graph(y_true, preds, sample_weight, spec=spec, check=None, compute=compute)


def _shape(array) -> tuple:
    return tuple(getattr(array, "shape", np.shape(array)))


def _score_columns(y_score, name: str) -> int:
    """K of (N, K) scores; 2 for (N,) scores of class 1."""
    shape = _shape(y_score)
    if len(shape) == 1 or (len(shape) == 2 and shape[1] == 1):
        return 2
    if len(shape) != 2 or shape[1] < 2:
        raise ValueError(f"{name} must be (N,) or (N, K) scores, got shape {shape}")
    return int(shape[1])


def _unsupported(name: str, value, supported: str, why: str) -> ValueError:
    return ValueError(f"{name}={value!r} is not supported by metrics_gpu.dask ({why}); "
                      f"{supported}")


def _column_labels(labels, y_score, name: str):
    """``labels=`` checked as in memory, before any data; None when they are
    the columns' own codes 0..K-1 (no mapping to do)."""
    k = _score_columns(y_score, name)
    classes = check_score_labels(labels, k, name, resolve_backend(labels))
    return None if classes is None or np.array_equal(classes, np.arange(k)) else classes


def _score_metric(y_true, y_score, *, name, kind, sample_weight, ignore_index, validate,
                  compute, pick, options, top_k=(), n_bins=1, thresholds=None, labels=None):
    """A scikit-learn-style score metric from the merged streaming state.

    ``labels``: the sorted class codes of the columns (:func:`_column_labels`);
    each chunk's targets are then mapped to their columns by the in-memory
    check, which runs even with ``validate=False`` (unchecked, as in memory),
    and the rows whose target is ``ignore_index`` to a position of their own."""
    validate = check_bool(validate, "validate")
    ignored = ignore_index
    if labels is not None and ignore_index is not None:
        ignored = IGNORED_POSITION
    spec = dict(num_classes=_score_columns(y_score, name), top_k=top_k, n_bins=n_bins,
                # Decision scores (top-k) are ranked as they are, which the
                # state's logits do; its probabilities must be probabilities.
                thresholds=thresholds,
                scores="probabilities" if kind == "probabilities" else "logits",
                ignore_index=ignored, confusion_matrix=False,
                validate="deferred" if validate else False)
    ClassificationMetrics(**spec)
    check = None
    if validate or labels is not None:
        check = dict(name=name, kind=kind, validate=validate, labels=labels,
                     ignore_index=ignore_index)
    options = dict(options, weighted=sample_weight is not None)
    return _score_graph(y_true, y_score, sample_weight, spec=spec, check=check, compute=compute,
                        pick=pick, options=options)


def _mean_or_sum(report, *, metric, normalize=True, weighted, scale=1.0, count=False):
    """A mean metric of the report (times ``scale``); its weighted sum with
    ``normalize=False`` (a whole number of samples for a ``count`` without
    weights)."""
    total = report["total"]
    if weighted and total == 0:
        raise ValueError("sample_weight must hold at least one non-zero weight; all are 0")
    # metric None: a top-k accuracy with k >= K (every row a hit; reports omit it).
    value = 1.0 if metric is None else report["metrics"][metric] * scale
    if normalize:
        return np.float64(value)
    value *= total
    return np.float64(round(value) if count and not weighted else value)


def log_loss(y_true, y_proba, *, normalize=True, sample_weight=None, labels=None,
             from_logits=False, ignore_index=None, validate=True, compute=False):
    """Log loss (cross-entropy) of Dask arrays, as :func:`metrics_gpu.log_loss`.

    ``y_proba``: (N, K) probabilities or (N,) probabilities of class 1; with
    ``from_logits=True``, logits. Each chunk is checked as in memory
    (``validate``); the value is the merged streaming state's
    ``cross_entropy``. ``labels``: the class codes of the columns, as in
    memory (default ``0..K-1``).
    """
    labels = _column_labels(labels, y_proba, "y_proba")
    from_logits = check_bool(from_logits, "from_logits")
    normalize = check_bool(normalize, "normalize")
    return _score_metric(y_true, y_proba, name="y_proba",
                         kind="logits" if from_logits else "probabilities",
                         sample_weight=sample_weight, ignore_index=ignore_index,
                         validate=validate, compute=compute, pick=_mean_or_sum,
                         options=dict(metric="cross_entropy", normalize=normalize),
                         labels=labels)


def brier_score_loss(y_true, y_proba, *, sample_weight=None, pos_label=None, labels=None,
                     scale_by_half="auto", ignore_index=None, validate=True, compute=False):
    """Brier score of Dask arrays, as :func:`metrics_gpu.brier_score_loss`.

    (N, K) probabilities or (N,) probabilities of class 1; ``scale_by_half``
    as in memory ("auto": halved for (N,) input and K = 2). ``labels``: the
    class codes of the columns, as in memory. ``pos_label`` (None or 1) is
    as in memory's default only.
    """
    if pos_label not in (None, 1):
        raise _unsupported("pos_label", pos_label, "pass pos_label=None or 1",
                           "(N,) scores are class 1's, (N, K) the classes 0..K-1")
    labels = _column_labels(labels, y_proba, "y_proba")
    if scale_by_half != "auto":
        check_bool(scale_by_half, "scale_by_half")
    k = _score_columns(y_proba, "y_proba")
    # The report's value is halved by the "auto" rule: rescaled to the one asked.
    scale = ((0.5 if F.brier_halved(k, scale_by_half) else 1.0)
             / (0.5 if F.brier_halved(k) else 1.0))
    return _score_metric(y_true, y_proba, name="y_proba", kind="probabilities",
                         sample_weight=sample_weight, ignore_index=ignore_index,
                         validate=validate, compute=compute, pick=_mean_or_sum,
                         options=dict(metric="brier_score", scale=scale), labels=labels)


def top_k_accuracy_score(y_true, y_score, *, k=2, normalize=True, sample_weight=None,
                         labels=None, ignore_index=None, validate=True, compute=False):
    """Top-k accuracy of Dask arrays, as :func:`metrics_gpu.top_k_accuracy_score`,
    for (N, K) scores (any real values; (N,) binary scores are not supported).
    Ties as in memory: among equal scores the higher class index ranks first.
    ``labels``: the class codes of the columns, as in memory."""
    k = check_k(k)
    normalize = check_bool(normalize, "normalize")
    shape = _shape(y_score)
    if len(shape) != 2 or shape[1] < 2:
        raise ValueError(f"y_score must be (N, K) scores with K >= 2 on Dask, got shape {shape}")
    labels = _column_labels(labels, y_score, "y_score")
    if k >= shape[1]:
        from metrics_gpu._formulas import labels as F
        F.warn(f"'k' ({k}) greater than or equal to 'n_classes' ({shape[1]}) will "
               "result in a perfect score and is therefore meaningless.",
               F.UndefinedMetricWarning)
    return _score_metric(y_true, y_score, name="y_score", kind="decision",
                         sample_weight=sample_weight, ignore_index=ignore_index,
                         validate=validate, compute=compute, pick=_mean_or_sum,
                         options=dict(metric=f"top_{k}_accuracy" if k < shape[1] else None,
                                      normalize=normalize, count=True),
                         top_k=(k,), labels=labels)


def expected_calibration_error(y_true, y_proba, *, n_bins=15, norm="l1", sample_weight=None,
                               from_logits=False, ignore_index=None, validate=True,
                               deterministic=False, compute=False):
    """Calibration error of Dask arrays, as :func:`metrics_gpu.expected_calibration_error`,
    for ``norm="l1"`` (expected) and ``norm="max"`` (maximum); the state keeps
    no ``"l2"``. ``deterministic`` is accepted for the signature's sake (each
    chunk's host state is deterministic; a GPU chunk's weighted bins follow
    the streaming state's rule)."""
    check_option(norm, ("l1", "l2", "max"), "norm")
    if norm == "l2":
        raise ValueError("norm='l2' is not supported by metrics_gpu.dask (the streaming state "
                         "reports the 'l1' and 'max' calibration errors); pass norm='l1' or "
                         "norm='max'")
    check_bool(deterministic, "deterministic")
    from_logits = check_bool(from_logits, "from_logits")
    metric = "expected_calibration_error" if norm == "l1" else "max_calibration_error"
    return _score_metric(y_true, y_proba, name="y_proba",
                         kind="logits" if from_logits else "probabilities",
                         sample_weight=sample_weight, ignore_index=ignore_index,
                         validate=validate, compute=compute, pick=_mean_or_sum,
                         options=dict(metric=metric), n_bins=n_bins)


_EXACT_RANKING = (
    "{function} on Dask arrays needs thresholds=H: the exact value ranks every score against "
    "every other, which needs all N scores in one place, and metrics_gpu.dask never gathers "
    "the data. Pass thresholds (e.g. thresholds=1024) for the binned value from a (2, K, H) "
    "histogram of each class's probability per chunk; its error against the exact value is "
    "bounded by {metric}_error_bound, which classification_metrics(..., thresholds=H) "
    "reports, and shrinks as H grows"
)


def _ranked(report, *, metric, average, binary, weighted, pos_label=1):
    """A binned ranking metric of the report: class 1's for K = 2, else the
    average asked (None: per class)."""
    if weighted and report["total"] == 0:
        raise ValueError("sample_weight must hold at least one non-zero weight; all are 0")
    if binary:
        return np.float64(report["per_class"][metric][pos_label])
    if average is None:
        return np.asarray(report["per_class"][metric], dtype=np.float64)
    return np.float64(report["metrics"][f"{metric}_{average}"])


def roc_auc_score(y_true, y_score, *, average="macro", sample_weight=None, max_fpr=None,
                  multi_class="raise", labels=None, thresholds=None, scores="probabilities",
                  ignore_index=None, validate=True, compute=False):
    """Binned ROC AUC of Dask arrays (``thresholds=H`` required).

    Binary (K = 2: (N,) probabilities of class 1, or (N, 2) scores): class 1's
    AUC. Multiclass (N, K) scores: one-vs-rest (``multi_class="ovr"``),
    ``average`` 'macro', 'weighted' or 'micro', or None for each class's.
    ``scores``: what the columns are, "probabilities" (binned as they are)
    or "logits" (softmax per row). The error against the exact
    ``metrics_gpu.roc_auc_score`` of the same scores is bounded by
    ``roc_auc_error_bound`` of :func:`classification_metrics` with the same
    ``thresholds``. ``labels``: for multiclass scores, the class codes of
    the columns, as in memory (ignored for binary scores, as in memory). Not
    supported: ``max_fpr``, ``multi_class="ovo"``. Unlike in memory, classes
    absent from ``y_true`` leave the averages (they are not an error), and a
    target outside ``labels`` is named by its chunk's check.
    """
    if thresholds is None:
        raise ValueError(_EXACT_RANKING.format(function="roc_auc_score", metric="roc_auc"))
    if max_fpr is not None:
        raise _unsupported("max_fpr", max_fpr, "leave max_fpr=None",
                           "the binned AUC is the full area")
    check_option(multi_class, ("raise", "ovr", "ovo"), "multi_class")
    check_option(average, (None, "micro", "macro", "weighted"), "average")
    binary = _score_columns(y_score, "y_score") == 2
    if not binary and multi_class == "raise":
        raise ValueError(f"multi_class must be in ('ovo', 'ovr') for multiclass y_score of "
                         f"shape {_shape(y_score)}")
    if not binary and multi_class == "ovo":
        raise _unsupported("multi_class", multi_class, "pass multi_class='ovr'",
                           "the state holds one-vs-rest histograms")
    check_option(scores, ("probabilities", "logits"), "scores")
    if binary or labels is None:
        labels = None
    else:
        labels = _column_labels(check_multiclass_roc_labels_argument(labels, _shape(y_score)[1]),
                                y_score, "y_score")
    return _score_metric(y_true, y_score, name="y_score", kind=scores,
                         sample_weight=sample_weight, ignore_index=ignore_index,
                         validate=validate, compute=compute, pick=_ranked,
                         options=dict(metric="roc_auc", average=average, binary=binary),
                         thresholds=thresholds, labels=labels)


def average_precision_score(y_true, y_score, *, average="macro", pos_label=1,
                            sample_weight=None, thresholds=None, scores="probabilities",
                            ignore_index=None, validate=True, compute=False):
    """Binned average precision of Dask arrays (``thresholds=H`` required).

    Binary (K = 2: (N,) probabilities of class 1, or (N, 2) scores): class
    ``pos_label``'s AP. Multiclass (N, K): one-vs-rest, ``average`` 'macro',
    'weighted', 'micro', or None for each class's. The error against the
    exact values is bounded by ``average_precision_error_bound`` of
    :func:`classification_metrics`. Not supported: ``average="samples"``;
    ``pos_label`` other than 1 for multiclass scores (as in memory) or (N,)
    scores.
    """
    if thresholds is None:
        raise ValueError(_EXACT_RANKING.format(function="average_precision_score",
                                               metric="average_precision"))
    if average == "samples":
        raise ValueError("average='samples' is not supported by metrics_gpu.dask (it ranks "
                         "the classes of each sample, which the binned state does not keep)")
    check_option(average, (None, "micro", "macro", "weighted"), "average")
    check_option(scores, ("probabilities", "logits"), "scores")
    k = _score_columns(y_score, "y_score")
    if pos_label not in (0, 1) or (pos_label == 0 and (k != 2 or len(_shape(y_score)) == 1)):
        raise _unsupported("pos_label", pos_label, "pass pos_label=1",
                           "pos_label=0 needs (N, 2) scores")
    return _score_metric(y_true, y_score, name="y_score", kind=scores,
                         sample_weight=sample_weight, ignore_index=ignore_index,
                         validate=validate, compute=compute, pick=_ranked,
                         options=dict(metric="average_precision", average=average,
                                      binary=k == 2, pos_label=int(pos_label)),
                         thresholds=thresholds)


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
