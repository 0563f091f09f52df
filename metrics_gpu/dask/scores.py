"""The score and ranking metrics on Dask: per chunk a
:class:`metrics_gpu.ClassificationMetrics` state, merged, reported
(:func:`classification_metrics`, :class:`DaskStreamingReport`), and the
scikit-learn-style functions read from that report (log loss, Brier score,
top-k accuracy, calibration error, binned ROC AUC and average precision)."""

from __future__ import annotations

import math
import warnings

import numpy as np

from metrics_gpu._formulas import labels as F
from metrics_gpu._pipeline.mapping import as_lists
from metrics_gpu._streaming.metrics import ClassificationMetrics, StreamingReport
from metrics_gpu._validation import (
    IGNORED_POSITION,
    check_bool,
    check_k,
    check_multiclass_roc_labels_argument,
    check_option,
    check_score_inputs,
    check_score_labels,
    to_numpy,
)
from metrics_gpu.backends.kernel_sources import STREAM_NO_ERROR, STREAM_ORDINAL_SHIFT
from metrics_gpu.backends.selection import get_backend_implementation, resolve_backend
from metrics_gpu.dask.multilabel import _is_indicator_shape, multilabel_state_graph
from metrics_gpu.dask.graph import (
    _aligned,
    _in_chunk,
    _per_chunk,
    _result,
    _shape,
    _tree,
    _unsupported,
)

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


def _score_columns(y_score, name: str) -> int:
    """K of (N, K) scores; 2 for (N,) scores of class 1."""
    shape = _shape(y_score)
    if len(shape) == 1 or (len(shape) == 2 and shape[1] == 1):
        return 2
    if len(shape) != 2 or shape[1] < 2:
        raise ValueError(f"{name} must be (N,) or (N, K) scores, got shape {shape}")
    return int(shape[1])


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
    if _is_indicator_shape(y_true) and max_fpr is None and labels is None:
        return _multilabel_auc(y_true, y_score, metric="roc_auc", average=average,
                               sample_weight=sample_weight, thresholds=thresholds,
                               scores=scores, ignore_index=ignore_index, validate=validate,
                               compute=compute)
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
    if _is_indicator_shape(y_true) and pos_label == 1:
        return _multilabel_auc(y_true, y_score, metric="average_precision", average=average,
                               sample_weight=sample_weight, thresholds=thresholds,
                               scores=scores, ignore_index=ignore_index, validate=validate,
                               compute=compute)
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


def _multilabel_ranked(report, *, metric, average):
    """A binned ROC AUC / AP of a :class:`metrics_gpu.MultilabelReport`: per label
    for ``average=None``, else its average."""
    if average is None:
        return np.asarray(report.per_label[metric], dtype=np.float64)
    return np.float64(report[f"{metric}_{average}"])


def _multilabel_auc(y_true, y_score, *, metric, average, sample_weight, thresholds, scores,
                    ignore_index, validate, compute):
    """(N, L) indicators: the binned ROC AUC / AP of each label, or their macro
    (over the labels where defined), weighted or micro average, from a
    :class:`metrics_gpu.MultilabelMetrics` state per chunk (``thresholds=H``)."""
    if average == "samples":
        raise ValueError(f"average='samples' of (N, L) {metric} is not supported by "
                         "metrics_gpu.dask: it ranks the labels of each row, which the "
                         "binned state does not keep (the label-ranking metrics, "
                         "label_ranking_average_precision_score ..., are per row)")
    check_option(average, (None, "micro", "macro", "weighted"), "average")
    check_option(scores, ("probabilities", "logits"), "scores")
    spec = dict(num_labels=int(_shape(y_true)[1]), scores=scores, thresholds=thresholds,
                ignore_index=ignore_index)
    return multilabel_state_graph(y_true, y_score, sample_weight, spec=spec,
                                  check=check_bool(validate, "validate"), compute=compute,
                                  pick=_multilabel_ranked,
                                  options=dict(metric=metric, average=average))


# Public names present themselves as metrics_gpu.dask, which re-exports them
# (docs/api.rst's autosummary; pickling by reference).
for _public in (DaskStreamingReport, classification_metrics, log_loss, brier_score_loss,
                top_k_accuracy_score, expected_calibration_error, roc_auc_score,
                average_precision_score):
    _public.__module__ = "metrics_gpu.dask"
del _public
