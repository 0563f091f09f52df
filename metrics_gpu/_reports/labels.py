"""The full label report: every label metric from one pass over the data.

:func:`label_report` accumulates the state once (a dense confusion matrix
while K is small, per-class statistics otherwise) and evaluates every row of
:data:`metrics_gpu._formulas.labels.REPORT_METRICS` and
:data:`~metrics_gpu._formulas.labels.PER_CLASS_METRICS` on it in one reduction (one
kernel launch on the cuda and emulated backends, ``reduce_metrics.cu``).
"""

from __future__ import annotations

import copy
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from metrics_gpu._formulas import labels as F
from metrics_gpu.backends.selection import on_caller_stream
from metrics_gpu._common.docs import shared_parameters
from metrics_gpu._pipeline.mapping import MetricMapping, descriptions, format_number, strict_json
from metrics_gpu._pipeline.stages import Evaluation, accumulate, evaluate, one_pass
from metrics_gpu._common.types import ArrayLike, ConfusionMatrixOption, Normalize
from metrics_gpu._validation import (
    MULTILABEL_INSTEAD,
    check_confusion_matrix_option,
    check_groups,
    check_label_inputs,
    refuse_multilabel,
)
from metrics_gpu.groups import GroupMetrics, group_metrics, group_tables
from metrics_gpu.intervals import (
    DEFAULT_RESAMPLES,
    IntervalOptions,
    LabelIntervals,
    check_interval_options,
    interval_legend,
    interval_table,
)
from metrics_gpu.plot import plot_confusion_matrix, plot_per_class
from metrics_gpu._reports.html import render_html

# The text report lists per-class rows and the matrix only up to this many
# classes; beyond it they are in to_dict() but would drown the summary.
MAX_PRINTED_CLASSES = 50


class LabelReport(MetricMapping):
    """Every label metric of one evaluation.

    :func:`label_report` reads nothing back from a GPU: the numbers are
    converted to NumPy, all at once, on the first access to any attribute
    below or to a metric (one copy of O(K) numbers, the report's only host
    sync; ``len``, ``in`` and iterating over the names read nothing).

    A read-only :class:`collections.abc.Mapping` of the overall metrics:
    ``report["macro_f1"]``, ``report.keys()`` (the names of
    :data:`metrics_gpu.REPORT_METRICS`, in its order), ``items()``,
    ``values()``, ``dict(report)``, as Python floats. As in every report
    type, the entries are the scalar metrics only; the per-class arrays, the
    confusion matrix and the counts are the attributes below, and
    :meth:`to_dict` holds everything. Reports compare by identity.

    Attributes
    ----------
    metrics : dict of str to float
        Overall metrics by name (see :data:`metrics_gpu.REPORT_METRICS`).
    per_class : dict of str to ndarray
        Per-class arrays by column name (precision, recall, f1, specificity,
        jaccard, support), aligned with ``classes``.
    classes : ndarray
        Class codes the report covers.
    total : int or float
        Number of counted samples (sum of weights when weighted).
    invalid : int
        Samples left out for out-of-range labels (``validate=False`` only).
    confusion_matrix : ndarray or None
        Dense matrix over ``classes`` when K is small enough to hold one.
    class_names : list of str
        Row names of the per-class table.
    intervals : LabelIntervals or None
        With ``confidence_level``: a :class:`metrics_gpu.intervals.ConfidenceInterval`
        per metric (``intervals.metrics``) and per per-class column
        (``intervals.per_class``, arrays aligned with ``classes``).
    groups : GroupMetrics or None
        With ``groups=``: every metric per group, with fairlearn's
        ``group_min``, ``group_max``, ``difference`` and ``ratio``.
    weighted : bool
        Whether the samples were weighted (the supports are then weight sums).
    """

    def __init__(self, resolve: Callable[[], dict[str, Any]], weighted: bool = False):
        # Until the first access, the function that reads the numbers back;
        # dropped once it has run (it holds the device buffers).
        self._resolve: Callable[[], dict[str, Any]] | None = resolve
        self._fields: dict[str, Any] | None = None
        self.weighted = weighted

    def _field(self, name: str) -> Any:
        if self._fields is None:
            assert self._resolve is not None  # set until the fields are read
            self._fields = self._resolve()
            self._resolve = None
        return self._fields[name]

    @property
    def metrics(self) -> dict[str, float]:
        return self._field("metrics")

    @property
    def per_class(self) -> dict[str, np.ndarray]:
        return self._field("per_class")

    @property
    def classes(self) -> np.ndarray:
        return self._field("classes")

    @property
    def total(self) -> int | float:
        return self._field("total")

    @property
    def invalid(self) -> int:
        return self._field("invalid")

    @property
    def confusion_matrix(self) -> np.ndarray | None:
        return self._field("confusion_matrix")

    @property
    def class_names(self) -> list[str]:
        return self._field("class_names")

    @property
    def intervals(self) -> LabelIntervals | None:
        return self._field("intervals")

    @property
    def groups(self) -> GroupMetrics | None:
        return self._field("groups")

    def _metric_names(self) -> tuple[str, ...]:
        return _LABEL_METRIC_NAMES

    def _metric_value(self, name: str) -> float:
        return self.metrics[name]

    def _headline(self) -> list[tuple[str, Any]]:
        return [("samples", self.total), ("classes", int(self.classes.size))]

    def to_dict(self, descriptions: bool = False) -> dict[str, Any]:
        """The report as plain Python numbers, lists and dicts (JSON-ready).

        An undefined value (NaN) or an infinity is ``None``, so that
        ``json.dumps(report.to_dict(), allow_nan=False)`` works.
        ``descriptions=True`` adds ``"descriptions"``: each metric name's
        one-line meaning, and ``"metric_groups"``: the names by convention
        (scikit-learn's, then oneDAL's and pyActLearn's per-class averages).
        With ``groups=``, ``"groups"`` holds the metrics of each group. The
        keys of the last release stay one more, named in ``"deprecated"``
        (:func:`with_old_keys`).
        """
        out = {
            "total": _plain(self.total),
            "invalid": int(self.invalid),
            "num_classes": int(self.classes.size),
            "metrics": {name: _plain(value) for name, value in self.metrics.items()},
            "per_class": {
                name: {column: _plain(values[i]) for column, values in self.per_class.items()}
                for i, name in enumerate(self.class_names)
            },
            "confusion_matrix": None if self.confusion_matrix is None
            else self.confusion_matrix.tolist(),
        }
        if self.intervals is not None:
            out["intervals"] = intervals_dict(self.intervals)
        if descriptions:
            out.update(metric_legend(self.metrics))
        return with_old_keys(out, None if self.groups is None else self.groups.to_dict())

    def to_json(self, descriptions: bool = True, **kwargs: Any) -> str:
        """:meth:`to_dict` as strict JSON text, with the ``descriptions`` table
        by default (``kwargs`` go to :func:`json.dumps`): NaN and infinities
        are ``null``."""
        return strict_json(self.to_dict(descriptions=descriptions), **kwargs)

    def to_text(self, digits: int = 4) -> str:
        """The metrics by group (scikit-learn's, then the per-class averages of
        oneDAL and pyActLearn, with a legend), then the per-class table while
        K <= 50, as aligned text."""
        lines = [
            f"samples: {_plain(self.total)}  classes: {self.classes.size}"
            + (f"  invalid (left out): {self.invalid}" if self.invalid else ""),
        ]
        if self.intervals is not None:
            lines.append(interval_legend(self.intervals))
        for title, rows in grouped_metric_rows(self.metrics, digits, self.intervals):
            width = max(len(name) for name, _ in rows)
            lines += ["", f"{title}:"] + [f"  {name:<{width}}  {text}" for name, text in rows]
        lines += textwrap.wrap(f"({F.PER_CLASS_AVERAGES_LEGEND})", width=88,
                               initial_indent="  ", subsequent_indent="   ")
        if self.classes.size <= MAX_PRINTED_CLASSES:
            columns = list(self.per_class)
            name_width = max([len("class")] + [len(n) for n in self.class_names])
            lines += ["", f"{'class':>{name_width}} " + "".join(f"{c:>12}" for c in columns)]
            for i, name in enumerate(self.class_names):
                cells = "".join(
                    f"{_plain(self.per_class[c][i]):>12}" if c == "support"
                    else f"{self.per_class[c][i]:>12.{digits}f}"
                    for c in columns
                )
                lines.append(f"{name:>{name_width}} {cells}")
        else:
            lines += ["", f"(per-class table of {self.classes.size} classes: use --format json)"]
        if self.groups is not None:
            lines += ["", f"by group ({len(self.groups.groups)} groups):",
                      self.groups.to_text(digits).rstrip("\n")]
        return "\n".join(lines) + "\n"

    def to_markdown(self, digits: int = 4) -> str:
        """The overall metrics as a Markdown table, by group (as :meth:`to_text`),
        each with its one-line meaning."""
        table = markdown_table(grouped_metric_rows(self.metrics, digits, self.intervals))
        if self.intervals is not None:
            table = f"{interval_legend(self.intervals)}\n\n{table}"
        return table

    def plot_confusion_matrix(self, ax: Any = None, normalize: Normalize | None = None,
                              max_classes: int = 20, **kwargs: Any) -> Any:
        """Draw the report's confusion matrix, ticks named by ``class_names``
        (:func:`metrics_gpu.plot.plot_confusion_matrix`, the ``[plot]`` extra;
        ``kwargs`` go to it). Returns the matplotlib Axes.

        Raises ``ValueError`` when the report kept no matrix (pass
        ``confusion_matrix=True`` to :func:`label_report`).
        """
        if self.confusion_matrix is None:
            raise ValueError("confusion_matrix: this report kept no K x K matrix; build it "
                             "with label_report(..., confusion_matrix=True)")
        kwargs.setdefault("class_names", self.class_names)
        return plot_confusion_matrix(self.confusion_matrix, ax=ax, normalize=normalize,
                                     max_classes=max_classes, **kwargs)

    def plot_per_class(self, metric: str = "f1", ax: Any = None, **kwargs: Any) -> Any:
        """A bar per class of ``per_class[metric]``, with error bars when the report
        has intervals (:func:`metrics_gpu.plot.plot_per_class`). Returns the Axes."""
        if metric not in self.per_class or metric == "support":
            raise ValueError(f"metric: {metric!r} is not a per-class rate of the report (one "
                             f"of {', '.join(F.LABEL_METRIC_COLUMNS)})")
        interval = None if self.intervals is None else self.intervals.per_class.get(metric)
        kwargs.setdefault("names", self.class_names)
        return plot_per_class(self.per_class[metric], metric=metric, ax=ax,
                              low=None if interval is None else interval.low,
                              high=None if interval is None else interval.high, **kwargs)

    def to_html(self, **options: Any) -> str:
        """The report as one self-contained HTML page: metrics, per-class table,
        confusion matrix (:func:`metrics_gpu._reports.html.render_html`;
        ``options`` go to it)."""
        return render_html(self, **options)


_LABEL_METRIC_NAMES = tuple(row.name for row in F.REPORT_METRICS)


def _plain(value):
    value = np.asarray(value).item()
    if isinstance(value, float) and not np.isfinite(value):
        return None  # strict JSON: NaN and infinities are null
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def markdown_table(groups: list[tuple[str, list[tuple[str, str]]]]) -> str:
    """Groups of formatted ``(name, value)`` rows as one Markdown table, each
    row with its metric's one-line meaning, then the legend of the per-class
    averages."""
    lines = ["| metric | value | meaning |", "| --- | --- | --- |"]
    for title, rows in groups:
        lines.append(f"| **{title}** | | |")
        lines += [f"| {name} | {text} | {_cell(F.metric_description(name) or '')} |"
                  for name, text in rows]
    lines.append(f"\n{F.PER_CLASS_AVERAGES_GROUP}: {F.PER_CLASS_AVERAGES_LEGEND}.")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Text in a Markdown table cell (its pipes escaped)."""
    return text.replace("|", "\\|")


def grouped_metric_rows(metrics, digits: int, intervals: LabelIntervals | None = None
                        ) -> list[tuple[str, list[tuple[str, str]]]]:
    """The label ``metrics`` present, formatted, by the groups of
    :func:`metrics_gpu._formulas.labels.label_metric_groups` (empty groups left out);
    with ``intervals``, each value followed by its ``[low, high]``."""
    def text(name):
        value = format_number(metrics[name], digits)
        interval = None if intervals is None else intervals.metrics.get(name)
        if interval is None:
            return value
        return (f"{value} [{format_number(interval.low, digits)}, "
                f"{format_number(interval.high, digits)}]")

    out = []
    for title, names in F.label_metric_groups():
        rows = [(name, text(name)) for name in names if name in metrics]
        if rows:
            out.append((title, rows))
    return out


def intervals_dict(intervals: LabelIntervals) -> dict[str, Any]:
    """A report's intervals as plain numbers (NaN is None)."""
    return {
        "metrics": {name: ci.to_dict() for name, ci in intervals.metrics.items()},
        "per_class": {name: ci.to_dict() for name, ci in intervals.per_class.items()},
        "n_resamples": intervals.n_resamples, "seed": intervals.seed,
    }


def metric_legend(names) -> dict[str, Any]:
    """What a JSON report says of its metric ``names``: ``"descriptions"``
    (name -> one-line meaning) and ``"metric_groups"`` (title -> the label
    metric names of that convention: the display grouping)."""
    groups = {title: list(members) for title, members in F.label_metric_groups()}
    return {"descriptions": descriptions(names), "metric_groups": groups}


# The JSON keys renamed after 0.1.0, kept one release more with a note in
# "deprecated" (docs/conventions.md, "Renamed JSON keys").
OLD_GROUP_METRICS = ('"group_metrics" is deprecated and goes in the next release: the '
                     'metrics of each group are under "groups"')
OLD_GROUPS = ('"groups" as the label metric names by convention is deprecated: they are '
              'under "metric_groups"; from the next release "groups" holds only the '
              'metrics of each group (groups=, --groups)')


def with_old_keys(out: dict[str, Any], by_group: dict[str, Any] | None) -> dict[str, Any]:
    """A report's :meth:`to_dict` ``out`` with its per-group metrics
    ``by_group`` (None without groups) under ``"groups"``, and for one release
    the old keys beside the new ones (copies, equal): ``"group_metrics"`` (the
    per-group metrics), or, without groups, ``"groups"`` (the display grouping
    ``"metric_groups"``); ``"deprecated"`` (old key -> what to read instead)
    names them. Calling it again on its own ``out`` changes nothing."""
    out.pop("deprecated", None)
    out.pop("group_metrics", None)
    if by_group is not None:
        out["groups"] = by_group
        out["group_metrics"] = copy.deepcopy(by_group)
        out["deprecated"] = {"group_metrics": OLD_GROUP_METRICS}
    elif "metric_groups" in out:
        out["groups"] = copy.deepcopy(out["metric_groups"])
        out["deprecated"] = {"groups": OLD_GROUPS}
    return out


@on_caller_stream
@shared_parameters
def label_report(y_true: ArrayLike, y_pred: ArrayLike, *, num_classes: int | None = None,
                 sample_weight: ArrayLike | None = None, ignore_index: int | None = None,
                 validate: bool = True, deterministic: bool = False,
                 class_names: Sequence[str] | None = None,
                 confusion_matrix: ConfusionMatrixOption = "auto",
                 confidence_level: float | None = None, method: str = "percentile",
                 n_resamples: int = DEFAULT_RESAMPLES, rng: Any = None,
                 sampling: str = "poisson", groups: Any = None,
                 num_groups: int | None = None, cluster: Any = None) -> LabelReport:
    """Every label metric of ``y_true`` vs ``y_pred`` from one pass over the data.

    Classes covered: all ``num_classes`` codes if given (or implied by
    ``(N, K)`` scores), else the classes present in either input. Averages
    and kappa positions are over those classes, as in scikit-learn.

    With ``validate=False`` and K known (scores, or ``num_classes``), the
    report is one pass of the streaming state: on a GPU one update launch and
    one reduction launch, no host sync (pass ``confusion_matrix=False`` in a
    training loop: no K x K buffer). Samples a check would refuse are then
    left out and counted in ``invalid``: labels out of range, rows of scores
    with a NaN or an infinity, negative or non-finite weights.

    Parameters
    ----------
    {y_true_labels}
    {y_pred_labels}
    {num_classes}
    {sample_weight}
    {ignore_index}
    {validate}
    {deterministic}
    class_names : sequence of str, optional
        One name per class covered, in order, for the per-class table (a
        wrong count raises a ``ValueError``); default the class codes.
    confusion_matrix : "auto" or bool, default "auto"
        Keep the K x K matrix in the report ("auto": while K <= 2048; no label
        metric needs it).
    confidence_level : float, optional
        Give every metric an interval at this level (e.g. 0.95), in
        ``report.intervals``, in the text, Markdown and JSON. They come from
        the confusion matrix (kept for them whatever ``confusion_matrix``
        says), so their cost does not grow with N: see
        :mod:`metrics_gpu.intervals`. Weights must be whole numbers.
    method : str, default "percentile"
        ``"percentile"``, ``"basic"`` or ``"bca"`` (bootstrap, every metric and
        per-class column), or ``"wilson"``, ``"clopper-pearson"``,
        ``"agresti-coull"``, ``"jeffreys"`` (binomial, the metrics that are
        proportions: accuracy, micro precision / recall, the error rates, per
        class precision, recall and specificity).
    n_resamples : int, default 9999
        Bootstrap replicates.
    rng : int, numpy.random.Generator or None
        The bootstrap's seed: the same seed gives the same intervals on every
        backend. None draws one (``report.intervals.seed`` tells it).
    sampling : "poisson"
        How a replicate is drawn: each sample Poisson(1) times, i.e. each cell
        of the matrix Poisson(its count).
    groups : array_like, or a list of them, optional
        One group per sample (integer codes 0..G-1, or categories such as
        strings; several columns: their intersection): ``report.groups``
        holds every metric per group over the report's classes (see
        :mod:`metrics_gpu.groups`), with intervals when ``confidence_level``
        is given (the bootstrap's for every metric, per group and per group
        minus the overall, none for ``difference()``: see
        :data:`metrics_gpu.groups.DIFFERENCE_WITHOUT_INTERVAL`; the binomial
        methods' for accuracy).
        ``y_pred`` must then be labels.
    num_groups : int, optional
        G for integer codes, so that a group the data lack keeps its id (and
        shows as empty, NaN); default the largest code + 1.
    cluster : array_like, optional
        The unit each sample belongs to (a patient, a site, a document;
        integer codes or categories), when samples of a unit are not
        independent: the bootstrap then resamples whole units (each drawn
        Poisson(1) times with all its samples) and BCa's jackknife leaves one
        unit out. Needs a bootstrap ``method``; not with ``groups`` yet.

    Returns
    -------
    LabelReport
        Read back from a GPU on the first access to any of its attributes.

    See Also
    --------
    logits_report : Every score metric, from one read of the scores.
    multiclass_quality_metrics : oneDAL's bundle, with oneDAL's conventions.
    per_class_performance : pyActLearn's per-class table of a matrix.
    classification_report : scikit-learn's per-class text report.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import label_report
    >>> r = label_report(np.array([0, 1, 2, 2, 2]), np.array([0, 0, 2, 2, 1]))
    >>> round(r.metrics["accuracy"], 2), round(r.metrics["macro_f1"], 4)
    (0.6, 0.4889)
    """
    confusion_matrix = check_confusion_matrix_option(confusion_matrix)
    interval_options = None if confidence_level is None else check_interval_options(
        confidence_level, method, n_resamples, rng, sampling)
    # The intervals are the matrix's: kept for them, shown only if asked.
    shown = confusion_matrix
    keep_matrix: ConfusionMatrixOption = True if interval_options is not None else shown
    if getattr(y_true, "ndim", 2) == 2:  # (the in-loop call's budget: no call for (N,) labels)
        refuse_multilabel(y_true, y_pred, "label_report", MULTILABEL_INSTEAD,
                          num_classes=num_classes, validate=validate, ignore_index=ignore_index)
    if cluster is not None and interval_options is None:
        raise ValueError("cluster: the units of the bootstrap; give confidence_level too")
    if cluster is not None and groups is not None:
        raise ValueError("cluster= with groups= is not made yet: give one of them")
    passed = None if groups is not None or cluster is not None else one_pass(
        y_true, y_pred, kind="labels", num_classes=num_classes, sample_weight=sample_weight,
        ignore_index=ignore_index, validate=validate, deterministic=deterministic,
        keep_matrix=keep_matrix)
    group_input = unit_tables = None
    if passed is not None:
        backend, all_classes = passed.backend, True
        evaluation = _stream_evaluation(passed.state, None, passed.compute(scores=False)[0])
    else:
        inputs = check_label_inputs(y_true, y_pred, num_classes=num_classes,
                                    sample_weight=sample_weight, ignore_index=ignore_index,
                                    validate=validate, deterministic=deterministic)
        backend, all_classes = inputs.backend, inputs.num_classes_given
        evaluation = evaluate(inputs)
        if keep_matrix is False:
            evaluation = replace(evaluation, matrix=None)
        elif keep_matrix is True and evaluation.matrix is None:
            evaluation = replace(evaluation, matrix=accumulate(inputs, matrix=True)[1])
        if groups is not None:
            codes = check_groups(groups, int(inputs.y_true.shape[0]), backend, num_groups)
            group_input = (group_tables(inputs, codes), codes.names)
        if cluster is not None:
            try:
                units = check_groups(cluster, int(inputs.y_true.shape[0]), backend)
            except ValueError as error:
                raise ValueError(str(error).replace("groups", "cluster")) from None
            unit_tables = group_tables(inputs, units)
    return _report(backend, evaluation, all_classes=all_classes, class_names=class_names,
                   intervals=interval_options, show_matrix=shown is not False,
                   groups=group_input, clusters=None if cluster is None else unit_tables,
                   weighted=sample_weight is not None)


def _report(backend, evaluation: Evaluation, *, all_classes: bool, class_names,
            intervals: IntervalOptions | None = None, show_matrix: bool = True,
            groups: tuple[np.ndarray, list] | None = None, clusters=None,
            weighted: bool = False) -> LabelReport:
    """The report of an evaluation, read back on first access. Per-class values
    and the matrix are indexed by position among the evaluated classes (the
    class codes themselves unless ``evaluation.class_codes`` names them)."""
    stats = evaluation.stats
    size = stats.num_classes
    if class_names is not None:
        class_names = list(class_names)

    def resolve() -> dict[str, Any]:
        # The conversion to host numbers, once: the buffer, supports, matrix.
        values = np.asarray(backend.to_host(evaluation.values))
        if evaluation.class_codes is not None:
            classes, positions = evaluation.class_codes, np.arange(size)
        elif all_classes:
            classes = positions = np.arange(size)
        else:
            classes = positions = np.flatnonzero(np.asarray(backend.to_host(stats.observed)))
        columns = F.label_metric_columns(values, size)
        per_class = {name: columns[i][positions] for i, name in enumerate(F.LABEL_METRIC_COLUMNS)}
        per_class["support"] = np.asarray(backend.to_host(stats.support))[positions]
        cm = None
        if evaluation.matrix is not None:
            cm = np.asarray(backend.to_host(evaluation.matrix))[np.ix_(positions, positions)]
        names = class_names
        if names is None:
            names = [str(code) for code in classes.tolist()]
        elif len(names) != classes.size:
            raise ValueError(
                f"class_names has {len(names)} names but the report covers "
                f"{classes.size} classes"
            )
        metrics = {row.name: float(values[F.SLOT[row.name]]) for row in F.REPORT_METRICS}
        found = None
        if intervals is not None:
            if cm is None:
                raise ValueError("confidence_level: this report keeps no K x K confusion "
                                 "matrix (K > 2048, or a state built with "
                                 "confusion_matrix=False), which the intervals are drawn from")
            units = None if clusters is None else clusters[:, positions][:, :, positions]
            found = interval_table(cm, intervals, metrics, per_class, backend, units)
        by_group = None
        if groups is not None:
            tables, group_names = groups
            by_group = group_metrics(tables[:, positions][:, :, positions], group_names,
                                     metrics, intervals, backend)
        return {
            "metrics": metrics,
            "per_class": per_class, "classes": classes,
            "total": _plain(values[F.SLOT["total"]]),
            "invalid": int(np.asarray(backend.to_host(stats.invalid))),
            "confusion_matrix": cm if show_matrix else None, "class_names": names,
            "intervals": found, "groups": by_group,
        }

    report = LabelReport(resolve, weighted)
    if intervals is not None or groups is not None:
        # The intervals and groups read the matrix back anyway: bad counts
        # (float weights) raise here, at the call, not at first use.
        report._field("intervals")
    if class_names is not None and not (all_classes and len(class_names) == size):
        report._field("class_names")  # a wrong class_names fails here, not at first use
    return report


def stream_label_report(metrics, *, class_codes=None, class_names=None,
                        intervals: IntervalOptions | None = None,
                        group_names=None) -> LabelReport:
    """The label report of a :class:`metrics_gpu.ClassificationMetrics` state
    (its K classes; ``class_codes``: the class each position stands for, when
    the stream's labels were remapped to positions), with its intervals and,
    for a state with groups, its groups (named by ``group_names``, default
    their codes)."""
    if metrics._state is None:
        raise ValueError("the stream holds no update: there is nothing to report")
    evaluation = _stream_evaluation(metrics._state,
                                    None if class_codes is None else np.asarray(class_codes))
    groups = None
    table = metrics._state.arrays.get("groups")
    if table is not None:
        table = np.asarray(metrics._backend.to_host(table))
        table = table.view(np.int64) if table.dtype == np.uint64 else table
        groups = (table, list(range(table.shape[0])) if group_names is None
                  else list(group_names))
    return _report(metrics._backend, evaluation, all_classes=True, class_names=class_names,
                   intervals=intervals, groups=groups)


def _stream_evaluation(state, class_codes, values=None) -> Evaluation:
    """The label metrics of a streaming state (one reduction launch on a GPU,
    unless its label ``values`` are given: a launch plan's, issued already)."""
    if values is None:
        values, _ = state.compute(scores=False)
    matrix = state.arrays.get("matrix")
    if matrix is not None and matrix.dtype == np.uint64:
        matrix = matrix.view(np.int64)
    return Evaluation(values, state.statistics(), matrix, class_codes)
