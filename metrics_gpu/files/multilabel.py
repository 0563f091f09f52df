"""Multilabel prediction files: whether the files are a multilabel problem
(:func:`detect_multilabel`), their chunk loop through
:class:`metrics_gpu.MultilabelMetrics` (:func:`evaluate_multilabel_files`)
and its report (:class:`MultilabelFileReport`)."""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import numpy as np

from metrics_gpu._common.types import ScoresAre
from metrics_gpu._functional.ranking import average_precision_score, roc_auc_score
from metrics_gpu._multilabel.ranking import LABEL_RANKING_METRICS, ndcg_rows, ndcg_score
from metrics_gpu._pipeline.mapping import MetricMapping, format_number, plain, strict_json, whole
from metrics_gpu._validation import check_indicator_inputs, label_probabilities_read_as_logits
from metrics_gpu.files.columns import (
    MULTILABEL_ROLE_OF,
    ROLE_OF,
    NO_ROWS,
    OPTIONS,
    open_column,
    open_columns,
)
from metrics_gpu.files.evaluate import (
    AUC_MODES,
    CHUNK_BYTES,
    MAX_CHUNK_ROWS,
    _chunks_in_workers,
    _row_bytes,
    group_column,
    histogram_thresholds,
)
from metrics_gpu.groups import GroupMetrics, GroupValues
from metrics_gpu.intervals import PROPORTION_METHODS, ConfidenceInterval, proportion_interval
from metrics_gpu.backends.launchers.multilabel import ROW
from metrics_gpu.files.exact import (
    CHUNK_STATE_BYTES,
    EXACT_OVERHEAD_BYTES,
    KERNEL_RANK_BYTES,
    NUMPY_RANK_BYTES,
    KeptRows,
    exact_or_binned,
)
from metrics_gpu.files.readers import ColumnReader, ReadThreads
from metrics_gpu.files.report import PredictionReport
from metrics_gpu.files.sources import FileProblem, Source
from metrics_gpu.files.staging import _CudaStaging, _HostStaging, _Prefetch
from metrics_gpu.backends.selection import backend_for_host_data, get_backend, use_backend
from metrics_gpu._multilabel.stream import MultilabelMetrics
from metrics_gpu.files.workers import worker_count
from metrics_gpu._streaming.metrics import SCORE_KINDS
from metrics_gpu._reports.html import render_multilabel_html
from metrics_gpu._reports.labels import MAX_PRINTED_CLASSES

TASKS = ("multiclass", "multilabel")
# The bins of the binned ROC AUC / AP when --auc binned (or auto, when the
# exact values do not fit) and --thresholds is not given: the command's default.
DEFAULT_THRESHOLDS = 1000
# The metrics of the groups' table in text, Markdown and HTML (JSON has them all).
GROUP_HEADLINE = ("subset_accuracy", "hamming_loss", "f1_macro", "f1_samples",
                  "label_ranking_average_precision_score")
# Groups x labels of the per-group states (each O(L)): at most this many.
MAX_GROUP_LABELS = 1 << 24
# What each reason bit of the multilabel state's checks means, by the column it names.
MULTILABEL_PROBLEMS = {
    "y_true": "a target other than 0/1{ignore}",
    "labels": "a prediction other than 0/1",
    "probabilities": ("a value outside [0, 1] (or NaN), not a probability as --scores-are "
                      "probabilities declares (for logits, pass --scores-are logits)"),
    "logits": "a non-finite logit",
    "sample_weight": "a negative or non-finite weight",
}
# The multilabel report's metric names (MultilabelReport's, F1 only: the
# command's beta is 1) and their meanings, built from the families and averages.
MULTILABEL_FAMILIES = {
    "precision": "precision", "recall": "recall", "f1": "F1",
    "jaccard": "Jaccard index (intersection over union)"}
MULTILABEL_AVERAGES = {
    "micro": "of every label's tp / fp / fn pooled",
    "macro": "unweighted mean over the labels",
    "weighted": "mean over the labels weighted by their support",
    "samples": "mean over the rows of each row's set-wise value"}
MULTILABEL_DESCRIPTIONS = {
    "subset_accuracy": "fraction of rows whose every label is right",
    "hamming_loss": "fraction of label cells predicted wrongly",
    "zero_one_loss": "1 - subset accuracy",
    **{f"{family}_{average}": f"{meaning}, {how}"
       for family, meaning in MULTILABEL_FAMILIES.items()
       for average, how in MULTILABEL_AVERAGES.items()},
    **{f"{name}_{average}": f"binned {title}, {how}"
       for name, title in (("roc_auc", "ROC AUC"), ("average_precision", "average precision"))
       for average, how in (("macro", "unweighted mean over the labels where defined"),
                            ("weighted", "mean over the labels weighted by their positives"),
                            ("micro", "of every label's scores pooled"))},
    **{f"{name}_{average}error_bound": f"bound on |binned - exact| {title}"
       + (f" ({average[:-1]})" if average else " (macro)")
       for name, title in (("roc_auc", "ROC AUC"), ("average_precision", "average precision"))
       for average in ("", "weighted_", "micro_")},
}
# The exact ROC AUC / AP (--auc exact: the scores kept, the in-memory functions)
# and the label-ranking metrics, by name.
EXACT_AVERAGES = {
    "macro": "unweighted mean over the labels (NaN when a label has one class, as "
             "scikit-learn's)",
    "weighted": "mean over the labels weighted by their positives",
    "micro": "of every label's scores pooled",
    "samples": "mean over the rows of each row's value over its L labels (ROC AUC: NaN "
               "when a row has one class, as scikit-learn's)"}
EXACT_DESCRIPTIONS = {
    f"{name}_{average}": f"exact {title}, {how}"
    for name, title in (("roc_auc", "ROC AUC"), ("average_precision", "average precision"))
    for average, how in EXACT_AVERAGES.items()}
RANKING_DESCRIPTIONS = {
    "label_ranking_average_precision_score": "label ranking average precision (LRAP): "
    "each row's relevant labels' precision at their rank, averaged",
    "label_ranking_loss": "fraction of (relevant, irrelevant) label pairs ranked wrongly, "
                          "averaged over the rows",
    "coverage_error": "labels ranked at least as high as a row's lowest relevant label, "
                      "averaged over the rows",
    "ndcg_score": "normalized discounted cumulative gain of each row's labels ranked by "
                  "their scores, averaged"}
# Bytes per kept cell of the public in-memory calls on (N, L) scores, beyond the
# ranking itself (NUMPY_RANK_BYTES / KERNEL_RANK_BYTES a cell): the targets as
# float64 weights and their per-label sums (_multilabel_average), the 0/1
# targets checked as bool, and the micro average's flattened copies. Measured
# (tests/test_cli_multilabel.py, VmHWM on the NumPy backend): 24 leaves the
# estimate 1.03 times the growth of 200k x 10 float32 scores; 32 gives 1.1-1.3.
EXACT_CELL_BYTES = 32


def exact_multilabel_bytes(rows: int, labels: int, score_dtype, *, weighted: bool = False,
                           backend: str = "numpy", chunk_rows: int = 0,
                           row_bytes: int = 0) -> int:
    """Peak memory of a multilabel report with exact ROC AUC / AP over ``rows``
    x L scores, beyond what the process held before it, where the backend
    computes (as :func:`metrics_gpu.files.exact_auc_bytes` for multiclass).

    Kept while reading: every row's L targets (int8), scores (``score_dtype``,
    as read: ROC AUC / AP do not change under the sigmoid) and weight
    (float64). Then the larger of reading (the buffer sets of ``chunk_rows``
    rows of ``row_bytes`` and :data:`CHUNK_STATE_BYTES`) and the in-memory
    calls on the kept arrays, the largest of which ranks the N L cells at once
    (the micro average, or every label's column): :data:`EXACT_CELL_BYTES`, the
    weights repeated (weighted: twice, the repeat and the weighted targets)
    and the ranking's bytes a cell.
    """
    score_bytes = np.dtype(score_dtype).itemsize
    weight_bytes = 8 if weighted else 0
    kept = rows * (labels * (1 + score_bytes) + weight_bytes)
    rank_bytes = NUMPY_RANK_BYTES if backend == "numpy" else KERNEL_RANK_BYTES
    ranking = rows * labels * (EXACT_CELL_BYTES + 2 * weight_bytes + rank_bytes)
    chunk = min(chunk_rows, rows)
    reading = CHUNK_STATE_BYTES + chunk * 2 * row_bytes
    return EXACT_OVERHEAD_BYTES + kept + max(reading, ranking)


class RowGains:
    """The NDCG of streamed (N, L) rows: the weighted sum of each row's value
    (the in-memory :func:`metrics_gpu.ndcg_score`'s row function, ``ndcg_rows``)
    and the weight, added chunk by chunk; merged by adding, with
    ``state_dict`` / ``load_state_dict`` / ``merge`` as the streaming states
    (the worker processes' copies). A chunk the in-memory check refuses is
    counted in ``refused`` (the multilabel state names its row)."""

    def __init__(self) -> None:
        self.sums = np.zeros(2)
        self.refused = 0

    def update(self, y_true, scores, sample_weight=None) -> None:
        try:
            inputs = check_indicator_inputs(y_true, scores, sample_weight,
                                            function="ndcg_score", min_labels=2,
                                            allow_all_zero=True, graded=True)
            per_row = ndcg_rows(inputs, k=None, ignore_ties=False)
        except ValueError:
            self.refused += 1
            return
        xp, weight = inputs.backend.xp, inputs.sample_weight
        to_host = inputs.backend.to_host
        if weight is None:
            self.sums += [float(to_host(xp.sum(per_row))), per_row.shape[0]]
        else:
            self.sums += [float(to_host(xp.sum(per_row * weight))),
                          float(to_host(xp.sum(weight)))]

    def value(self) -> float:
        return float(self.sums[0] / self.sums[1]) if self.sums[1] > 0 else math.nan

    def state_dict(self) -> dict[str, Any]:
        return {"sums": self.sums.copy(), "refused": self.refused}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.sums, self.refused = np.array(state["sums"], dtype=np.float64), state["refused"]

    def merge(self, other: RowGains) -> None:
        self.sums += other.sums
        self.refused += other.refused


class _KeptIndicators(KeptRows):
    """Every row's (N, L) targets (int8), scores (their own dtype) and weights,
    kept where the backend computes, for the exact ROC AUC / AP and NDCG of
    the in-memory functions at the end."""

    def __init__(self, xp, rows: int | None, labels: int, dtype, weighted: bool):
        super().__init__(xp, rows, (((labels,), np.int8), ((labels,), np.dtype(dtype)),
                                    ((), np.float64) if weighted else None))


def exact_multilabel_values(y_true, scores, sample_weight=None) -> dict[str, Any]:
    """The exact per-label ROC AUC and AP, their macro / weighted / micro /
    samples averages and the NDCG of kept (N, L) arrays: the public in-memory
    functions' values (:func:`metrics_gpu.roc_auc_score`,
    :func:`metrics_gpu.average_precision_score`, :func:`metrics_gpu.ndcg_score`),
    each averages' call as it is. Returns the scalars by name and ``per_label``."""
    values: dict[str, Any] = {}
    per_label: dict[str, Any] = {}
    for name, function in (("roc_auc", roc_auc_score),
                           ("average_precision", average_precision_score)):
        per_label[name] = np.asarray(_host(function(y_true, scores, average=None,
                                                    sample_weight=sample_weight)),
                                     dtype=np.float64)
        for average in EXACT_AVERAGES:
            with warnings.catch_warnings():
                if average == "samples":  # a row of one class (NaN) is no news per run
                    warnings.simplefilter("ignore")
                values[f"{name}_{average}"] = float(_host(function(
                    y_true, scores, average=average,  # type: ignore[arg-type]
                    sample_weight=sample_weight)))
    if y_true.shape[1] >= 2:
        values["ndcg_score"] = float(_host(ndcg_score(y_true, scores,
                                                      sample_weight=sample_weight)))
    return {"values": values, "per_label": per_label}


def _source_text(reader: ColumnReader) -> str:
    return str(reader.path) + ("" if reader.selector is None else f":{reader.selector}")


def _host(value):
    return value.get() if hasattr(value, "get") and not isinstance(value, np.ndarray) \
        else np.asarray(value)


def _column_count(reader: ColumnReader) -> int:
    return reader.width or 1


def detect_multilabel(sources: dict[str, Source | None]) -> str | None:
    """Why the files are a multilabel problem, or None: ``--y-true`` holds L >= 2
    columns (never multiclass class codes) and the prediction file (``--y-pred``,
    else ``--scores``) as many. A label matrix beside a prediction file of
    another width is a :class:`FileProblem` (neither task can read it);
    a file that does not open is left to the report's own reading to name."""
    predicted = "y_pred" if sources.get("y_pred") is not None else "scores"
    truth_source, predicted_source = sources.get("y_true"), sources.get(predicted)
    if truth_source is None or predicted_source is None:
        return None
    try:
        truth = open_column(truth_source, OPTIONS["y_true"], "indicators")
    except FileProblem:
        return None
    truth.close()
    if truth.width is None:
        return None
    try:
        # Opened as labels or class scores: any width, any numeric dtype.
        prediction = open_column(predicted_source, OPTIONS[predicted], "indicators")
    except FileProblem:
        return None
    prediction.close()
    if _column_count(prediction) != truth.width:
        raise FileProblem(
            f"{OPTIONS['y_true']} {truth.path} holds (N, {truth.width}) rows, multilabel "
            f"targets, but {OPTIONS[predicted]} {prediction.path} holds "
            f"{_column_count(prediction)} column(s): give (N, {truth.width}) predictions "
            "(--task multilabel), or one column of class codes in --y-true (multiclass)")
    return (f"{OPTIONS['y_true']} holds an (N, {truth.width}) matrix and "
            f"{OPTIONS[predicted]} one of the same shape")


def evaluate_multilabel_files(sources: dict[str, Source | None], *, threshold: float = 0.5,
                              scores_are: ScoresAre = "logits", thresholds: int | None = None,
                              auc: str = "auto",
                              ignore_index: int | None = None, backend: str | None = None,
                              chunk_rows: int | None = None, detected: str | None = None,
                              progress: Callable[[str, int | None], Callable[[int], None]]
                              | None = None,
                              readers: int | None = None,
                              workers: int | None = None,
                              num_groups: int | None = None,
                              confidence_level: float | None = None,
                              interval_method: str = "wilson") -> MultilabelFileReport:
    """Stream multilabel files through :class:`metrics_gpu.MultilabelMetrics`.

    ``sources``: ``y_true`` ((N, L) 0/1 targets), one of ``y_pred`` ((N, L)
    0/1 predictions) or ``scores`` ((N, L) scores, ``scores_are``, positive
    above ``threshold``), optionally ``sample_weight`` ((N,)). ``thresholds``:
    the bins of the binned per-label ROC AUC / AP and their curves (scores
    only). With scores, ``auc`` as :func:`evaluate_files`': "exact" keeps
    every row's targets and scores where the backend computes
    (:func:`exact_multilabel_bytes`, at most half the free memory) and gives
    the in-memory :func:`metrics_gpu.roc_auc_score` /
    :func:`metrics_gpu.average_precision_score` (per label, macro, weighted,
    micro, samples) and :func:`metrics_gpu.ndcg_score` of them; "binned" the
    binned values of ``thresholds`` bins (1000 when None); "auto" exact when
    it fits. Scores also give the label-ranking metrics (LRAP, ranking loss,
    coverage error) of :class:`metrics_gpu.MultilabelMetrics` ``(ranking=True)``,
    when there is no ``ignore_index`` (a row's ranking is over all its labels)
    and L >= 2.
    The chunks, the reading thread and the staging are those of
    :func:`evaluate_files`; a row the state leaves out (a target other than
    0/1 or ``ignore_index``, a refused prediction or weight) is a
    :class:`FileProblem` naming the file and the row. ``sources``,
    ``readers`` and ``workers`` as :func:`evaluate_files`'. With
    ``sources["groups"]`` (one group per row: integer codes 0..G-1, G
    ``num_groups`` or the largest + 1, or categories, as :func:`evaluate_files`
    finds them), one more state per group (its rows of each chunk), whose
    metrics (the label and label-ranking metrics; not ROC AUC / AP) are the
    report's :attr:`MultilabelFileReport.groups`. ``confidence_level``: the
    intervals (``interval_method``, one of the proportion methods) of the
    metrics that are proportions of whole counts (:func:`proportion_intervals`).
    """
    if scores_are not in SCORE_KINDS:
        raise ValueError(f"scores_are must be one of {SCORE_KINDS}, got {scores_are!r}")
    if auc not in AUC_MODES:
        raise ValueError(f"auc must be one of {AUC_MODES}, got {auc!r}")
    if confidence_level is not None and interval_method not in PROPORTION_METHODS:
        raise ValueError(
            f"--interval-method {interval_method} is not made for --task multilabel: the "
            "multilabel state keeps per-label counts and row sums, not the tables a bootstrap "
            "redraws; its intervals are those of the metrics that are proportions, "
            f"--interval-method {' / '.join(PROPORTION_METHODS)}")
    if (sources.get("y_pred") is None) == (sources.get("scores") is None):
        raise ValueError("--task multilabel takes --y-pred ((N, L) 0/1 predictions) or "
                         "--scores ((N, L) scores, positive above --threshold): one of them")
    if thresholds is not None and sources.get("scores") is None:
        raise ValueError("--thresholds (binned ROC AUC / AP per label) needs --scores: "
                         "0/1 predictions have no ranking")
    if auc == "exact" and sources.get("scores") is None:
        raise ValueError("--auc exact (ROC AUC / AP per label) needs --scores: 0/1 "
                         "predictions have no ranking")
    if auc == "exact" and ignore_index is not None:
        raise ValueError("--auc exact takes no --ignore-index with --task multilabel: the "
                         "in-memory ROC AUC / AP rank every cell of a label (use --auc binned, "
                         "which leaves the ignored cells out)")
    if ignore_index is not None and ignore_index in (0, 1):
        raise ValueError(f"--ignore-index {ignore_index}: with --task multilabel it must be "
                         "a value other than the targets 0 and 1")
    predicted = "y_pred" if sources.get("y_pred") is not None else "scores"
    backend = backend_for_host_data(get_backend() if backend is None else backend)
    from_logits = scores_are == "logits"
    threads = ReadThreads(readers)
    try:
        columns = open_columns(sources, from_logits=from_logits,
                               roles={**MULTILABEL_ROLE_OF, "groups": ROLE_OF["groups"]},
                               threads=threads)
    except BaseException:
        threads.close()
        raise
    try:
        truth, prediction = columns["y_true"], columns[predicted]
        labels = _column_count(truth)
        if _column_count(prediction) != labels:
            raise FileProblem(
                f"{OPTIONS[predicted]} {prediction.path}: {_column_count(prediction)} "
                f"column(s), but {OPTIONS['y_true']} {truth.path} has {labels} (multilabel "
                "targets and predictions are both (N, L))")
        if chunk_rows is None:
            chunk_rows = max(1, min(MAX_CHUNK_ROWS, CHUNK_BYTES // _row_bytes(columns)))
        rows = next((r.rows for r in columns.values() if r.rows is not None), None)
        auc_mode = None
        if predicted == "scores":
            auc_mode = _auc_mode(auc, rows, labels, prediction, backend, columns,
                                 ignore_index=ignore_index, chunk_rows=chunk_rows)
            if auc_mode == "binned" and thresholds is None:
                thresholds = DEFAULT_THRESHOLDS
        bins = None if thresholds is None else histogram_thresholds(thresholds, labels)
        ranking = (predicted == "scores" and ignore_index is None and labels >= 2
                   and prediction.dtype.kind == "f")
        state = MultilabelMetrics(labels, threshold=threshold, scores=scores_are,
                                  ignore_index=ignore_index, thresholds=bins, ranking=ranking,
                                  validate=False)
        # The reader checks every row (_check_declared_kind) and warns once.
        state._warns_of_probabilities = False
        group_names, group_states = None, []
        if "groups" in columns:
            columns["groups"], count, group_names = group_column(
                columns["groups"], sources, num_groups, chunk_rows=chunk_rows, threads=threads)
            if count * labels > MAX_GROUP_LABELS:
                raise FileProblem(f"--groups {columns['groups'].path}: {count:,} groups of "
                                  f"{labels:,} labels make more than {MAX_GROUP_LABELS:,} "
                                  "per-group label states")
            group_names = group_names if group_names is not None else list(range(count))
            group_states = [MultilabelMetrics(labels, threshold=threshold, scores=scores_are,
                                              ignore_index=ignore_index, ranking=ranking,
                                              validate=False) for _ in range(count)]
            for group_state in group_states:
                group_state._warns_of_probabilities = False
        gains = RowGains() if ranking and auc_mode != "exact" else None
        kept = None
        if auc_mode == "exact":
            kept = _KeptIndicators(_array_module(backend), prediction.rows, labels,
                                   prediction.dtype, "sample_weight" in columns)
        values = None if rows is None else rows * sum(
            math.prod(r.shape_tail) for r in columns.values())
        processes = worker_count(values, workers) if backend == "numpy" else 1
        with use_backend(backend):
            _stream_multilabel(columns, backend, chunk_rows, state, predicted,
                               None if progress is None else progress("reading", rows),
                               workers=processes, kept=kept, group_states=group_states,
                               gains=gains)
        total_rows = truth.position
        if total_rows == 0:
            raise FileProblem(f"--y-true {truth.path}: {NO_ROWS}")
        _raise_first_left_out(state, columns, predicted, scores_are, ignore_index)
        if predicted == "scores" and from_logits and prediction.looks_like_probabilities():
            checked = prediction.rows_checked
            warnings.warn(label_probabilities_read_as_logits(
                f"{prediction.argument} {prediction.path}", "--scores-are probabilities",
                rows=checked - prediction.rows_not_probabilities, total=checked),
                UserWarning, stacklevel=2)
        exact = None
        if kept is not None:
            with use_backend(backend):
                exact = exact_multilabel_values(*kept.arrays())
            del kept
        groups = None
        if group_names is not None:
            groups = _group_metrics(state, group_states, group_names,
                                    "sample_weight" in columns)
        names = truth.column_names or prediction.column_names
        computed = state.compute()
        # Without the scores kept, NDCG summed row by row.
        gained = None if gains is None else {"ndcg_score": gains.value()}
        intervals = None
        if confidence_level is not None:
            intervals = proportion_intervals(state, computed, confidence_level, interval_method)
        return MultilabelFileReport(computed, intervals=intervals, gained=gained, rows=total_rows, backend=backend,
                                    label_names=names, threshold=threshold,
                                    predictions=predicted, detected=detected,
                                    thresholds=bins, scores_are=scores_are, auc=auc_mode,
                                    exact=exact, ranking=ranking, groups=groups,
                                    files={OPTIONS[name]: _source_text(reader)
                                           for name, reader in columns.items()})
    finally:
        for reader in columns.values():
            reader.close()
        threads.close()


def _array_module(backend: str):
    if backend == "cuda":
        import cupy

        return cupy
    return np


def _auc_mode(auc: str, rows: int | None, labels: int, score_reader: ColumnReader,
              backend: str, readers, *, ignore_index: int | None, chunk_rows: int) -> str:
    """"exact" or "binned", as :func:`metrics_gpu.files.evaluate._auc_mode`
    decides for multiclass: exact when asked, or "auto" and the kept scores
    fit in :data:`EXACT_MEMORY_FRACTION` of the free memory."""
    if auc == "binned" or ignore_index is not None:
        return "binned"
    if rows is None:
        return "exact" if auc == "exact" else "binned"
    needed = exact_multilabel_bytes(rows, labels, score_reader.dtype,
                                    weighted="sample_weight" in readers, backend=backend,
                                    chunk_rows=chunk_rows, row_bytes=_row_bytes(readers))
    return exact_or_binned(auc, needed, backend, score_reader, f"{rows:,} x {labels}")


# The multilabel metrics that are proportions of whole counts: (numerator, trials)
# of the state's row sums (ROW) and per-label counts, and whether the metric is
# 1 - the proportion.
PROPORTIONS = {
    "subset_accuracy": ("exact", "weight", False),
    "zero_one_loss": ("exact", "weight", True),
    "hamming_loss": ("wrong_cells", "counted_cells", False),
    "precision_micro": ("tp", "predicted", False),
    "recall_micro": ("tp", "support", False),
}


def proportion_intervals(state, report, confidence_level: float,
                         method: str) -> dict[str, ConfidenceInterval]:
    """Intervals (:func:`metrics_gpu.intervals.proportion_interval`) of the
    multilabel metrics that are binomial proportions of whole counts: subset
    accuracy and zero-one loss (rows), Hamming loss (label cells), micro
    precision and recall (every label's tp pooled), and each label's
    precision and recall (``per_label_precision`` / ``per_label_recall``).
    Weights must be whole numbers (frequency weights): a ``ValueError``
    says so otherwise."""
    rows = state._host_state()["rows"]
    matrix = np.asarray(report.confusion_matrix, dtype=np.float64)
    tp, fp, fn = matrix[:, 1, 1], matrix[:, 0, 1], matrix[:, 1, 0]
    totals = {"exact": rows[ROW["exact"]], "weight": rows[ROW["weight"]],
              "wrong_cells": rows[ROW["wrong_cells"]],
              "counted_cells": rows[ROW["counted_cells"]], "tp": tp.sum(),
              "predicted": (tp + fp).sum(), "support": (tp + fn).sum()}
    out: dict[str, ConfidenceInterval] = {}
    try:
        for name, (count, trials, complement) in PROPORTIONS.items():
            interval = proportion_interval(totals[count], totals[trials],
                                           confidence_level=confidence_level, method=method)
            if complement:
                interval = ConfidenceInterval(
                    1.0 - interval.value, 1.0 - interval.high, 1.0 - interval.low,
                    interval.standard_error, interval.confidence_level, interval.method)
            out[name] = interval
        out["per_label_precision"] = proportion_interval(
            tp, tp + fp, confidence_level=confidence_level, method=method)
        out["per_label_recall"] = proportion_interval(
            tp, tp + fn, confidence_level=confidence_level, method=method)
    except ValueError as error:
        raise ValueError(f"--confidence-level of --task multilabel: {error} (the intervals "
                         "are binomial: whole-number weights only)") from None
    return out


def _update_groups(group_states: list, batch: dict[str, Any], predicted: str) -> None:
    """Each group's rows of a chunk into its state (a boolean selection per
    group present in the chunk)."""
    codes = batch["groups"]
    rows = len(codes)
    y_true = batch["y_true"].reshape(rows, -1)
    preds = batch[predicted].reshape(rows, -1)
    weight = batch.get("sample_weight")
    xp = np if isinstance(codes, np.ndarray) else _array_module("cuda")
    present = np.unique(np.asarray(codes.get() if xp is not np else codes))
    if present.size and (present[0] < 0 or present[-1] >= len(group_states)):
        bad = present[0] if present[0] < 0 else present[-1]
        raise FileProblem(f"--groups: holds the group {bad}, outside 0..{len(group_states) - 1} "
                          "(--num-groups)")
    for group in present.tolist():
        rows_of = xp.equal(codes, group)
        group_states[group].update(y_true[rows_of], preds[rows_of],
                                   None if weight is None else weight[rows_of])


def _group_metrics(state, group_states: list, names: list, weighted: bool) -> GroupMetrics:
    """The groups' metrics as :class:`metrics_gpu.groups.GroupMetrics` (fairlearn's
    terms): every scalar metric of each group's state (NaN for a group without
    rows), its rows' weight, and the overall values."""
    overall_report = state.compute()
    metric_names = [name for name in overall_report if not name.startswith(
        ("f_score", "roc_auc", "average_precision"))]
    values = np.full((len(group_states), len(metric_names)), math.nan)
    counts = np.zeros(len(group_states))
    f1 = np.full((len(group_states), state.num_labels), math.nan)
    for g, group_state in enumerate(group_states):
        if group_state._arrays is None:
            continue
        report = group_state.compute()
        values[g] = [float(report[name]) for name in metric_names]
        counts[g] = float(report.total)
        f1[g] = np.asarray(report.per_label["f_score"], dtype=np.float64)
    return GroupMetrics(
        groups=list(names), counts=counts if weighted else counts.astype(np.int64),
        overall={name: float(overall_report[name]) for name in metric_names},
        by_group={name: GroupValues(list(names), values[:, i])
                  for i, name in enumerate(metric_names)},
        per_class={"f1": f1})


def _stream_multilabel(readers, backend: str, chunk_rows: int, state, predicted: str,
                       progress, workers: int = 1, kept: _KeptIndicators | None = None,
                       group_states: list | None = None, gains: RowGains | None = None) -> None:
    """The loop of :func:`_stream` for the multilabel state: each chunk, as
    (rows, L) targets and predictions, into one update (on the numpy backend
    with ``workers`` > 1, in worker processes), and into ``kept`` (the exact
    ROC AUC / AP's store) in this process."""

    def keep(batch: dict[str, Any]) -> None:
        assert kept is not None
        rows = len(batch["y_true"])
        kept.add(batch["y_true"].reshape(rows, -1), batch[predicted].reshape(rows, -1),
                 batch.get("sample_weight"))

    if backend == "numpy" and workers > 1:

        def update(batch: dict[str, Any], ordinal: int, first_row: int) -> None:  # in a worker
            rows = len(batch["y_true"])
            state._updates, state._rows_seen = ordinal, first_row
            state.update(batch["y_true"].reshape(rows, -1), batch[predicted].reshape(rows, -1),
                         batch.get("sample_weight"))
            if group_states:
                _update_groups(group_states, batch, predicted)
            if gains is not None:
                gains.update(batch["y_true"].reshape(rows, -1),
                             batch[predicted].reshape(rows, -1), batch.get("sample_weight"))

        extra = [] if gains is None else [gains]
        chunks, rows = _chunks_in_workers(readers, workers, chunk_rows,
                                          [state, *(group_states or []), *extra], update,
                                          None if kept is None else keep, progress)
        state._updates, state._rows_seen = chunks, rows
        return
    staging = (_CudaStaging if backend == "cuda" else _HostStaging)(readers, chunk_rows)
    prefetch = _Prefetch(readers, staging.buffer_sets)
    try:
        for i, rows in prefetch:
            batch = staging.batch(i, rows)
            state.update(batch["y_true"].reshape(rows, -1),
                         batch[predicted].reshape(rows, -1), batch.get("sample_weight"))
            if group_states:
                _update_groups(group_states, batch, predicted)
            if gains is not None:
                gains.update(batch["y_true"].reshape(rows, -1),
                             batch[predicted].reshape(rows, -1), batch.get("sample_weight"))
            if kept is not None:
                keep(batch)
            prefetch.release(i, staging.done(i))
            if progress is not None:
                progress(rows)
    finally:
        prefetch.close()


def _raise_first_left_out(state, readers, predicted: str, scores_are: str,
                          ignore_index: int | None) -> None:
    """The rows the multilabel state left out, as the files and the first row."""
    invalid = state.first_invalid()
    if invalid is None:
        return
    left_out, first, arguments = invalid
    columns = {"y_true": "y_true", "preds": predicted, "sample_weight": "sample_weight"}
    parts = []
    for argument in arguments:
        column = columns[argument]
        key = ("labels" if column == "y_pred" else scores_are) if argument == "preds" else column
        problem = MULTILABEL_PROBLEMS[key].format(
            ignore="" if ignore_index is None else f" or --ignore-index {ignore_index}")
        parts.append((column, problem))
    first_column = parts[0][0]
    row = readers[first_column].row_name(first)
    if len(parts) == 1:
        column, problem = parts[0]
        raise FileProblem(f"{OPTIONS[column]} {readers[column].path}: {row} holds {problem} "
                          f"({left_out:,} bad rows in all)")
    named = " or ".join(f"{OPTIONS[c]} {readers[c].path} ({p})" for c, p in parts)
    raise FileProblem(f"{named}: {row} is the first of {left_out:,} rows holding such values")


class MultilabelFileReport(MetricMapping):
    """The report of multilabel prediction files (:func:`evaluate_multilabel_files`):
    the :class:`metrics_gpu.MultilabelReport` of the streamed state
    (:attr:`metrics`), with the rows read, the label names and how the
    predictions were read.

    A read-only mapping of the scalar metrics (subset accuracy, Hamming loss,
    precision / recall / F1 / Jaccard micro, macro, weighted and samples; with
    scores the label-ranking metrics and ROC AUC / AP: exact (``auc ==
    "exact"``: macro, weighted, micro and samples, and NDCG, the in-memory
    functions' values) or binned (macro, weighted and micro with their error
    bounds)); ``per_label`` and ``confusion_matrix`` as attributes, everything
    in :meth:`to_dict`. :meth:`save_plots` writes the per-label F1 bars and,
    with ``thresholds``, the per-label ROC and precision-recall curves.
    """

    def __init__(self, metrics, *, rows: int, backend: str, label_names, threshold: float,
                 predictions: str, detected: str | None, thresholds: int | None,
                 scores_are: str, auc: str | None = None, exact: dict | None = None,
                 ranking: bool = False, files: dict[str, str] | None = None,
                 groups: GroupMetrics | None = None,
                 intervals: dict[str, ConfidenceInterval] | None = None,
                 gained: dict[str, float] | None = None):
        self.metrics, self.rows, self.backend = metrics, rows, backend
        self.threshold, self.predictions, self.detected = threshold, predictions, detected
        self.thresholds, self.scores_are = thresholds, scores_are
        self.auc = auc if auc is not None else (None if thresholds is None else "binned")
        self.ranking = ranking
        self.files = dict(files or {})  # option -> the source read, for the HTML page
        self.groups = groups  # GroupMetrics with --groups: every label metric per group
        self.intervals = intervals  # with --confidence-level: the proportions' intervals
        labels = len(metrics.per_label["support"])
        self.label_names = ([str(name) for name in label_names] if label_names is not None
                            and len(label_names) == labels else [str(i) for i in range(labels)])
        per_label = metrics.per_label
        self.per_label = {("f1" if name == "f_score" else name): np.asarray(values)
                          for name, values in per_label.items()}
        values = {name: metrics[name] for name in metrics if not name.startswith("f_score")}
        if exact is not None:
            # The binned values (with --thresholds) are kept for the curves only.
            values = {name: value for name, value in values.items()
                      if not name.startswith(("roc_auc", "average_precision"))}
            values.update(exact["values"])
            self.per_label = {name: value for name, value in self.per_label.items()
                              if not name.startswith(("roc_auc", "average_precision"))}
            self.per_label.update(exact["per_label"])
        values.update(gained or {})
        self._values = values

    @property
    def confusion_matrix(self) -> Any:
        """(L, 2, 2): ``[[tn, fp], [fn, tp]]`` per label."""
        return self.metrics.confusion_matrix

    @property
    def total(self) -> Any:
        """The rows' total weight (the row count without weights)."""
        return self.metrics.total

    def _metric_names(self) -> tuple[str, ...]:
        return tuple(self._values)

    def _metric_value(self, name: str) -> Any:
        return self._values[name]

    def _headline(self) -> list[tuple[str, Any]]:
        return [("rows", self.rows), ("labels", len(self.label_names))]

    def to_dict(self, descriptions: bool = False) -> dict[str, Any]:
        """The report as plain Python values (NaN as None): ``task``,
        ``task_detected`` (why the files were read as multilabel, or None when
        ``--task`` said it), ``rows``, ``total``, ``labels``, ``label_names``,
        how the predictions were read, ``metrics``, ``per_label`` (lists, one
        value a label) and ``confusion_matrix`` ((L, 2, 2): ``[[tn, fp], [fn,
        tp]]`` per label); ``descriptions=True`` adds each metric's meaning."""
        out: dict[str, Any] = {
            "task": "multilabel", "task_detected": self.detected, "rows": self.rows,
            "total": whole(self.total), "labels": len(self.label_names),
            "label_names": self.label_names, "backend": self.backend,
            "predictions": self._predictions_read(),
            "auc_method": self.auc,
            "thresholds": self.thresholds,
            "metrics": plain(self._values),
            "per_label": plain(self.per_label),
            "confusion_matrix": plain(self.metrics.confusion_matrix),
        }
        if self.groups is not None:
            out["groups"] = self.groups.to_dict()
        if self.intervals is not None:
            out["intervals"] = {name: interval.to_dict()
                                for name, interval in self.intervals.items()}
        if descriptions:
            out["descriptions"] = {name: self.description(name) for name in self._values
                                   if self.description(name)}
        return out

    def description(self, name: str) -> str:
        """A metric's one-line meaning ("" for none)."""
        if self.auc == "exact" and name in EXACT_DESCRIPTIONS:
            return EXACT_DESCRIPTIONS[name]
        return MULTILABEL_DESCRIPTIONS.get(name) or RANKING_DESCRIPTIONS.get(name, "")

    def to_json(self, descriptions: bool = True, **kwargs) -> str:
        """:meth:`to_dict` as strict JSON text, with the descriptions by default."""
        return strict_json(self.to_dict(descriptions=descriptions), **kwargs)

    def ranking_note(self) -> str:
        """Why scores gave no label-ranking metrics, when they did not ("" else)."""
        if self.predictions != "scores" or self.ranking:
            return ""
        return ("(no label-ranking metrics: a row's ranking is over all of its labels, "
                "which --ignore-index leaves out, and needs L >= 2 float scores)")

    def _predictions_read(self) -> str:
        if self.predictions == "y_pred":
            return "0/1 labels"
        return f"{self.scores_are}, positive above {self.threshold:g}" + (
            " (sigmoid)" if self.scores_are == "logits" else "")

    def _task_line(self) -> str:
        return "task: multilabel" + (f" (detected: {self.detected}; pass --task to choose)"
                                     if self.detected else "")

    def _groups(self, digits: int) -> list[tuple[str, list[tuple[str, str]]]]:
        """The scalar metrics, formatted, by group: whole rows, per-label
        averages by family, binned ranking values with their bounds."""
        values = self._values

        intervals = self.intervals or {}

        def number(name: str) -> str:
            text = format_number(values[name], digits)
            if name in intervals:
                interval = intervals[name]
                text += (f" [{format_number(interval.low, digits)}, "
                         f"{format_number(interval.high, digits)}]")
            return text

        groups = [("whole rows", [(name, number(name)) for name in
                            ("subset_accuracy", "hamming_loss", "zero_one_loss")])]
        groups.append(("over the labels (micro / macro / weighted / samples)",
                       [(f"{family}_{average}", number(f"{family}_{average}"))
                        for family in MULTILABEL_FAMILIES for average in MULTILABEL_AVERAGES]))
        ranked = [name for name in (*LABEL_RANKING_METRICS, "ndcg_score") if name in values]
        if ranked:
            groups.append(("label ranking (each row's labels ranked by their scores)",
                           [(name, number(name)) for name in ranked]))
        if self.auc == "exact":
            groups.append(("ROC AUC and average precision (exact)",
                           [(f"{name}_{average}", number(f"{name}_{average}"))
                            for name in ("roc_auc", "average_precision")
                            for average in EXACT_AVERAGES]))
        elif self.thresholds is not None:
            rows = []
            for name in ("roc_auc", "average_precision"):
                for average, bound in (("macro", ""), ("weighted", "weighted_"),
                                       ("micro", "micro_")):
                    text = number(f"{name}_{average}")
                    error = values[f"{name}_{bound}error_bound"]
                    if error == error:
                        text += f" ± {format_number(error, digits)}"
                    rows.append((f"{name}_{average}", text))
            groups.append((f"ROC AUC and average precision (binned, {self.thresholds} "
                           "thresholds, ± the error bound of the binning)", rows))
        return groups

    def _label_columns(self) -> list[str]:
        columns = ["precision", "recall", "f1", "jaccard", "support"]
        if "roc_auc" in self.per_label:
            columns += ["roc_auc", "average_precision"]
        return columns

    def to_text(self, digits: int = 4) -> str:
        """The metrics by group, then the per-label table while L <= 50, as aligned text."""
        lines = [self._task_line(),
                 f"rows: {self.rows:,}  labels: {len(self.label_names)}  "
                 f"total weight: {format_number(whole(self.total), digits)}  "
                 f"predictions: {self._predictions_read()}"]
        note = self.ranking_note()
        if note:
            lines.append(note)
        if self.intervals:
            first = next(iter(self.intervals.values()))
            lines.append(f"[low, high]: {first.confidence_level:g} confidence intervals "
                         f"({first.method}, binomial) of the metrics that are proportions")
        for title, rows in self._groups(digits):
            width = max(len(name) for name, _ in rows)
            lines += ["", f"{title}:"] + [f"  {name:<{width}}  {text}" for name, text in rows]
        if len(self.label_names) <= MAX_PRINTED_CLASSES:
            columns = self._label_columns()
            name_width = max([len("label")] + [len(n) for n in self.label_names])
            cells_of = {c: max(12, len(c) + 2) for c in columns}
            lines += ["", f"{'label':>{name_width}} "
                      + "".join(f"{c:>{cells_of[c]}}" for c in columns)]
            for i, name in enumerate(self.label_names):
                cells = "".join(f"{format_number(whole(self.per_label[c][i]), digits):>{cells_of[c]}}"
                                if c == "support" else
                                f"{format_number(self.per_label[c][i], digits):>{cells_of[c]}}"
                                for c in columns)
                lines.append(f"{name:>{name_width}} {cells}")
        else:
            lines += ["", f"(per-label table of {len(self.label_names)} labels: use --format "
                      "json)"]
        if self.groups is not None:
            lines += ["", "by group:"] + [
                "  " + "  ".join(f"{cell:>{max(12, len(head))}}" if i else f"{cell:<{width}}"
                                 for i, (cell, head) in enumerate(zip(row, table[0])))
                for table in [self.group_table(digits)]
                for width in [max(len(row[0]) for row in table)] for row in table]
        return "\n".join(lines) + "\n"

    def group_table(self, digits: int = 4) -> list[list[str]]:
        """The groups as rows of text cells: a header (``group``, ``count``, the
        headline metrics), each group, then ``group_min``, ``group_max``,
        ``difference`` and ``ratio`` (fairlearn's, between the groups)."""
        groups = self.groups
        assert groups is not None
        names = [name for name in GROUP_HEADLINE if name in groups.by_group]
        rows = [["group", "count", *names]]
        for i, group in enumerate(groups.groups):
            rows.append([str(group), format_number(whole(groups.counts[i]), digits),
                         *(format_number(groups.by_group[name].values[i], digits)
                           for name in names)])
        for title, values in (("group_min", groups.group_min()),
                              ("group_max", groups.group_max()),
                              ("difference", groups.difference()),
                              ("ratio", groups.ratio())):
            rows.append([title, "", *(format_number(values[name], digits) for name in names)])
        return rows

    def to_markdown(self, digits: int = 4) -> str:
        """The metrics as one Markdown table (group rows, each metric with its
        meaning), then the per-label table."""
        lines = [self._task_line(), "", "| metric | value | meaning |", "| --- | --- | --- |"]
        for title, rows in self._groups(digits):
            lines.append(f"| **{title}** | | |")
            lines += [f"| {name} | {text} | {self.description(name)} |"
                      for name, text in rows]
        columns = self._label_columns()
        lines += ["", "| label | " + " | ".join(columns) + " |",
                  "| --- |" + " --- |" * len(columns)]
        for i, name in enumerate(self.label_names):
            lines.append(f"| {name} | " + " | ".join(
                format_number(whole(self.per_label[c][i]) if c == "support"
                              else self.per_label[c][i], digits) for c in columns) + " |")
        if self.groups is not None:
            table = self.group_table(digits)
            lines += ["", "| " + " | ".join(table[0]) + " |",
                      "| --- |" + " --- |" * (len(table[0]) - 1)]
            lines += ["| " + " | ".join(row) + " |" for row in table[1:]]
        return "\n".join(lines) + "\n"

    # -- pictures -------------------------------------------------------------------

    def figures(self) -> dict[str, Any]:
        """Every picture by file stem: ``per_label_f1`` (a bar a label) and, with
        ``thresholds``, ``roc`` and ``precision_recall`` (every label and the
        macro curve up to 10 labels, the macro curve alone beyond)."""
        drawings: dict[str, Any] = {
            "per_label_f1": lambda: self.metrics.plot_per_label("f_score",
                                                                names=self.label_names)}
        groups = self.groups
        if groups is not None:
            drawings["groups_subset_accuracy"] = lambda: groups.plot("subset_accuracy")
            drawings["groups_f1_macro"] = lambda: groups.plot("f1_macro")
        if self.thresholds is not None:
            drawings["roc"] = self.metrics.plot_roc
            drawings["precision_recall"] = self.metrics.plot_precision_recall
        return drawings

    save_plots = PredictionReport.save_plots

    def metric_rows(self, digits: int = 4) -> list[tuple[str, list[tuple[str, str, str]]]]:
        """The metrics by group, as the text report groups them: (heading,
        [(name, formatted value, meaning)])."""
        return [(title, [(name, text, self.description(name)) for name, text in rows])
                for title, rows in self._groups(digits)]

    def label_columns(self) -> list[str]:
        """The per-label table's columns (``support`` among them)."""
        return self._label_columns()

    def input_rows(self) -> list[tuple[str, str]]:
        """What the page's inputs table lists: the files, how the predictions
        were read, the rows, labels, backend and ROC AUC / AP method."""
        rows = [(option, source) for option, source in self.files.items()]
        rows += [("task", self._task_line()[len("task: "):]),
                 ("predictions", self._predictions_read()), ("rows read", f"{self.rows:,}"),
                 ("labels", f"{len(self.label_names):,}"), ("backend", self.backend)]
        if self.auc is not None:
            rows.append(("ROC AUC / average precision", self.auc))
        note = self.ranking_note()
        if note:
            rows.append(("label ranking", note.strip("()")))
        return rows

    def to_html(self, **options) -> str:
        """The report as one self-contained HTML page
        (:func:`metrics_gpu._reports.html.render_multilabel_html`; ``options``
        go to it)."""
        return render_multilabel_html(self, **options)
