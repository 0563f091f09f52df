"""The label metrics of multiclass input on Dask: per chunk its confusion
cells (:class:`ConfusionCells`, per group with ``groups=``), merged, and the
in-memory function of the merged cells; the public label functions, which
send (N, L) indicator input to :mod:`metrics_gpu.dask.multilabel`."""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass

import numpy as np

from metrics_gpu._formulas.state import RowArgmax
from metrics_gpu._functional import confusion as _confusion
from metrics_gpu._functional import labels as _classification
from metrics_gpu._functional import rates as _rates
from metrics_gpu._reports.labels import LabelReport
from metrics_gpu._reports.labels import label_report as _label_report
from metrics_gpu._validation import check_groups, check_label_inputs
from metrics_gpu.dask.graph import _aligned, _in_chunk, _per_chunk, _result, _tree
from metrics_gpu.dask.multilabel import (
    _MULTILABEL_READS,
    _is_indicator_shape,
    _multilabel_graph,
    _refuse_samplewise,
)

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
    function.__module__ = "metrics_gpu.dask"
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


# -- the label functions ---------------------------------------------------------------


accuracy_score = _label_metric(_classification.accuracy_score)
balanced_accuracy_score = _label_metric(_classification.balanced_accuracy_score)
cohen_kappa_score = _label_metric(_classification.cohen_kappa_score)
confusion_matrix = _label_metric(_confusion.confusion_matrix)
f1_score = _label_metric(_rates.f1_score)
fbeta_score = _label_metric(_rates.fbeta_score)
hamming_loss = _label_metric(_classification.hamming_loss)
jaccard_score = _label_metric(_rates.jaccard_score)
matthews_corrcoef = _label_metric(_classification.matthews_corrcoef)
precision_recall_fscore_support = _label_metric(_rates.precision_recall_fscore_support)
precision_score = _label_metric(_rates.precision_score)
recall_score = _label_metric(_rates.recall_score)
specificity_score = _label_metric(_rates.specificity_score)
zero_one_loss = _label_metric(_classification.zero_one_loss)
multilabel_confusion_matrix = _label_metric(_confusion.multilabel_confusion_matrix)
classification_report = _label_metric(_classification.classification_report)
label_report = _label_metric(_label_report)


# A public name presents itself as metrics_gpu.dask, which re-exports it
# (pickling by reference); the label functions are set so by _label_metric.
ConfusionCells.__module__ = "metrics_gpu.dask"
