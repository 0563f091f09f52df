"""The reports of a streaming state: :class:`StreamingReport` (what
:meth:`ClassificationMetrics.compute` returns) and :class:`StepReport` (one
batch's, from :meth:`ClassificationMetrics.__call__`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from metrics_gpu._formulas import labels as F
from metrics_gpu.backends.selection import caller_stream
from metrics_gpu._pipeline.mapping import MetricMapping, plain, strict_json, whole
from metrics_gpu._reports.labels import intervals_dict, metric_legend, with_old_keys
from metrics_gpu._validation import to_numpy
from metrics_gpu._common.types import Normalize
from metrics_gpu.groups import GroupMetrics, group_metrics
from metrics_gpu.intervals import (
    IntervalOptions,
    LabelIntervals,
    histogram_intervals,
    interval_table,
)
from metrics_gpu.plot import (  # matplotlib itself is imported inside the functions
    binned_curves,
    chosen_curves,
    plot_confusion_matrix,
    plot_precision_recall,
    plot_reliability,
    plot_roc,
)

if TYPE_CHECKING:
    from metrics_gpu._streaming.metrics import ClassificationMetrics
    from metrics_gpu.backends import Backend


def _metric_places(spec: Mapping[str, Any], kind: str) -> dict[str, tuple[bool, int]]:
    """Each scalar metric of a state's report and its place: (True for the
    score values, index). Known from the spec alone (nothing read)."""
    places = {row.name: (False, F.SLOT[row.name]) for row in F.REPORT_METRICS}
    if kind == "scores":
        for name in ("cross_entropy", "perplexity", "brier_score", "hinge_loss"):
            places[name] = (True, F.STREAM_SLOT[name])
        head = len(F.STREAM_SCORE_SLOTS)
        shown = F.reported_top_k(spec["top_k"], spec["num_classes"])
        for i, top in enumerate(spec["top_k"]):
            if top in shown:
                places[f"top_{top}_accuracy"] = (True, head + i)
        for name in ("expected_calibration_error", "max_calibration_error"):
            places[name] = (True, F.STREAM_SLOT[name])
        if spec["thresholds"]:
            for name in F.STREAM_SCORE_SLOTS[F.STREAM_SLOT["roc_auc"]:]:
                places[name] = (True, F.STREAM_SLOT[name])
    return places


class StreamingReport(MetricMapping):
    """Every metric of a :class:`ClassificationMetrics` state.

    A read-only :class:`collections.abc.Mapping` of the scalar metrics:
    ``report[name]`` (and ``report.metrics``, ``items()``, ``values()``)
    gives each in the framework of the state's inputs, without a host sync
    (0-d CuPy arrays or torch tensors on a GPU; NumPy scalars or torch CPU
    tensors on the host); ``keys()``, ``len`` and ``in`` read nothing. The
    names: the label metrics of :data:`metrics_gpu.REPORT_METRICS`, and for
    score states ``cross_entropy``, ``perplexity``, ``brier_score``,
    ``hinge_loss``, ``top_{k}_accuracy``, ``expected_calibration_error``,
    ``max_calibration_error`` and, with thresholds, the binned ``roc_auc`` /
    ``average_precision`` (``_macro``, ``_weighted``, ``_micro``,
    ``_error_bound``). As in every report type, the entries are the scalar
    metrics only: ``per_class``, ``calibration`` and ``confusion_matrix``
    hold the arrays, ``total`` and ``invalid`` the counts, and
    :meth:`to_dict` reads everything back as Python numbers (NaN as None).
    The repr reads its few values back from a GPU. Reports compare by
    identity.

    Parameters
    ----------
    metrics : ClassificationMetrics
        The state reported, which must hold an update.
    label_values, score_values : array
        What its compute launches wrote (layouts of :mod:`metrics_gpu._formulas.labels`;
        ``score_values`` is None for a state of labels).

    See Also
    --------
    ClassificationMetrics.compute : Where a report comes from.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import ClassificationMetrics
    >>> metrics = ClassificationMetrics(2)
    >>> metrics.update(np.array([0, 1, 1, 1]), np.array([0, 1, 0, 1]))
    >>> report = metrics.compute()
    >>> float(report["accuracy"]), report.to_dict()["per_class"]["support"]
    (0.75, [1, 3])
    """

    def __init__(self, metrics: ClassificationMetrics, label_values: Any,
                 score_values: Any) -> None:
        state = metrics._held_state()
        self._backend: Backend = state.backend
        self._like = metrics._like
        self._spec = metrics._spec
        self._kind = state.kind
        self._label_values = label_values
        self._score_values = score_values
        arrays = state.arrays
        k = metrics.num_classes
        counts = arrays["counts"]
        # Copies, as the values are the report's own: the state's later
        # updates (or a step state's next batch) leave the report as it was.
        self._support = (counts.view(np.int64) if counts.dtype == np.uint64
                         else counts)[k:2 * k].copy()
        matrix = arrays.get("matrix")
        self._matrix = None if matrix is None else (
            matrix.view(np.int64) if matrix.dtype == np.uint64 else matrix).copy()
        self._checks = arrays["checks"].copy()
        self._histogram = None if "histogram" not in arrays else arrays["histogram"].copy()
        self._places = _metric_places(self._spec, self._kind)
        self._names = tuple(self._places)
        self._intervals: LabelIntervals | None = None
        self._groups: GroupMetrics | None = None
        self._label_host: np.ndarray | None = None
        groups = arrays.get("groups")
        self._group_table = None if groups is None else groups.copy()

    def _out(self, value: Any) -> Any:
        return self._backend.to_framework(value, self._like)

    def _metric_names(self) -> tuple[str, ...]:
        return self._names

    def _metric_value(self, name: str) -> Any:
        scores, index = self._places[name]
        return self._out((self._score_values if scores else self._label_values)[index])

    def _headline(self) -> list[tuple[str, Any]]:
        return [("kind", self._kind), ("samples", whole(self.total)),
                ("classes", self._spec["num_classes"])]

    @property
    def metrics(self) -> dict[str, Any]:
        """Every scalar metric by name (values in the inputs' framework): ``dict(report)``."""
        return {name: self._metric_value(name) for name in self._names}

    @property
    def total(self) -> Any:
        """Counted samples (the sum of their weights when weighted)."""
        return self._out(self._label_values[F.SLOT["total"]])

    @property
    def invalid(self) -> Any:
        """Samples left out (bad targets, predictions, scores or weights)."""
        return self._out(self._checks[:1].view(np.int64)[0])

    @property
    def per_class(self) -> dict[str, Any]:
        """Per-class arrays (K each): precision, recall, f1, specificity,
        jaccard, support, and with thresholds roc_auc and average_precision."""
        k = self._spec["num_classes"]
        columns = F.label_metric_columns(self._label_values, k)
        out = {name: self._out(columns[i]) for i, name in enumerate(F.LABEL_METRIC_COLUMNS)}
        out["support"] = self._out(self._support)
        if self._kind == "scores" and self._spec["thresholds"]:
            head = (len(F.STREAM_SCORE_SLOTS) + len(self._spec["top_k"])
                    + 3 * self._spec["n_bins"])
            out["roc_auc"] = self._out(self._score_values[head:head + k])
            out["average_precision"] = self._out(self._score_values[head + k:head + 2 * k])
        return out

    @property
    def calibration(self) -> dict[str, Any] | None:
        """Per calibration bin: proportion of the weight, mean confidence, accuracy."""
        if self._kind != "scores":
            return None
        b = self._spec["n_bins"]
        head = len(F.STREAM_SCORE_SLOTS) + len(self._spec["top_k"])
        values = self._score_values
        return {name: self._out(values[head + i * b:head + (i + 1) * b])
                for i, name in enumerate(("proportion", "confidence", "accuracy"))}

    @property
    def confusion_matrix(self) -> Any:
        """The K x K matrix (rows actual, columns predicted), or None when not kept."""
        return None if self._matrix is None else self._out(self._matrix)

    @property
    def intervals(self) -> LabelIntervals | None:
        """The label metrics' confidence intervals (``compute(confidence_level=...)``),
        else None: :class:`metrics_gpu.intervals.LabelIntervals`."""
        return self._intervals

    @property
    def groups(self) -> GroupMetrics | None:
        """Every label metric per group (a state built with ``num_groups``), else None:
        :class:`metrics_gpu.groups.GroupMetrics`."""
        return self._groups

    def _host_label_values(self) -> np.ndarray:
        """The label values buffer on the host (one read-back, kept)."""
        if self._label_host is None:
            self._label_host = np.asarray(self._backend.to_host(self._label_values))
        return self._label_host

    def _host_label_metrics(self) -> dict[str, float]:
        values = self._host_label_values()
        return {row.name: float(values[F.SLOT[row.name]]) for row in F.REPORT_METRICS}

    def _add_groups(self, options: IntervalOptions | None) -> None:
        table = np.asarray(self._backend.to_host(self._group_table))
        if table.dtype == np.uint64:
            table = table.view(np.int64)
        overall = self._host_label_metrics()
        self._groups = group_metrics(table, list(range(table.shape[0])), overall, options,
                                     self._backend)

    def _add_intervals(self, options: IntervalOptions | None) -> None:
        if options is None:
            return
        if self._matrix is None:
            raise ValueError("confidence_level: this state keeps no K x K confusion matrix, "
                             "which the intervals are drawn from; build ClassificationMetrics "
                             "with confusion_matrix=True")
        matrix = np.asarray(self._backend.to_host(self._matrix))
        values = self._host_label_metrics()
        k = self._spec["num_classes"]
        columns = F.label_metric_columns(self._host_label_values(), k)
        found = interval_table(
            matrix, options, values,
            {name: columns[i] for i, name in enumerate(F.LABEL_METRIC_COLUMNS)}, self._backend)
        if self._histogram is not None:
            # The binned ROC AUC / AP of each class (and the binary ones), from
            # the score histogram's cells.
            metrics, per_class = histogram_intervals(to_numpy(self._histogram), options,
                                                     self._backend)
            found = replace(found, metrics={**found.metrics, **metrics},
                            per_class={**found.per_class, **per_class})
        self._intervals = found

    def _host_values(self) -> dict[str, Any]:
        """:meth:`to_dict`'s layout with NumPy values, NaN kept (one read-back)."""
        out = {"total": to_numpy(self.total), "invalid": to_numpy(self.invalid),
               "metrics": {name: to_numpy(v) for name, v in self.metrics.items()},
               "per_class": {name: to_numpy(v) for name, v in self.per_class.items()}}
        if self.calibration is not None:
            out["calibration"] = {name: to_numpy(v) for name, v in self.calibration.items()}
        out["confusion_matrix"] = (None if self._matrix is None
                                   else to_numpy(self.confusion_matrix))
        return out

    def _interval_dict(self) -> dict[str, Any] | None:
        return None if self._intervals is None else intervals_dict(self._intervals)

    def to_dict(self, descriptions: bool = False) -> dict[str, Any]:
        """Every value as plain Python numbers and lists (one read-back): ``total``,
        ``invalid``, ``metrics`` (the entries), ``per_class``, ``calibration``
        (score states) and ``confusion_matrix`` (None when not kept).

        An undefined value (NaN) or an infinity is ``None``, so that
        ``json.dumps(report.to_dict(), allow_nan=False)`` works.
        ``descriptions=True`` adds ``"descriptions"`` (each metric name's
        one-line meaning) and ``"metric_groups"`` (the label metric names by
        convention: scikit-learn's, then the per-class averages of oneDAL and
        pyActLearn). With groups, ``"groups"`` holds the metrics of each
        group. The keys of the last release stay one more, named in
        ``"deprecated"`` (:func:`metrics_gpu._reports.labels.with_old_keys`).
        """
        out = plain(self._host_values())
        if self._intervals is not None:
            out["intervals"] = self._interval_dict()
        if descriptions:
            out.update(metric_legend(self._names))
        return with_old_keys(out, None if self._groups is None else self._groups.to_dict())

    def to_json(self, descriptions: bool = True, **kwargs: Any) -> str:
        """:meth:`to_dict` as strict JSON text, with the descriptions by default
        (``kwargs`` go to :func:`json.dumps`): NaN and infinities are ``null``."""
        return strict_json(self.to_dict(descriptions=descriptions), **kwargs)

    # -- pictures (metrics_gpu.plot, the [plot] extra) ----------------------------------

    def plot_confusion_matrix(self, ax: Any = None, normalize: Normalize | None = None,
                              max_classes: int = 20, **kwargs: Any) -> Any:
        """Draw the confusion matrix (:func:`metrics_gpu.plot.plot_confusion_matrix`).

        Parameters
        ----------
        ax : matplotlib Axes, optional
            Where to draw; default a new figure.
        normalize : {None, "true", "pred", "all"}, default None
            Divide by the row sums, the column sums or the total.
        max_classes : int, default 20
            With more classes, only the most confused are shown.
        **kwargs
            Passed to :func:`metrics_gpu.plot.plot_confusion_matrix`.

        Returns
        -------
        matplotlib Axes

        Raises
        ------
        ValueError
            The state kept no matrix.

        See Also
        --------
        confusion_matrix : The matrix itself.
        """
        if self._matrix is None:
            raise ValueError("confusion_matrix: this state kept no K x K matrix; build "
                             "ClassificationMetrics with confusion_matrix=True")
        return plot_confusion_matrix(to_numpy(self._matrix), ax=ax, normalize=normalize,
                                     max_classes=max_classes, **kwargs)

    def plot_reliability(self, ax: Any = None, **kwargs: Any) -> Any:
        """Draw the reliability diagram of the calibration bins, with the
        expected calibration error (:func:`metrics_gpu.plot.plot_reliability`).

        Parameters
        ----------
        ax : matplotlib Axes, optional
            Where to draw; default a new figure.
        **kwargs
            Passed to :func:`metrics_gpu.plot.plot_reliability`.

        Returns
        -------
        matplotlib Axes

        Raises
        ------
        ValueError
            The state holds labels (a diagram needs scores).

        See Also
        --------
        calibration : The bins drawn.
        """
        calibration = self.calibration
        if calibration is None:
            raise ValueError("preds: a reliability diagram needs a state of (N, K) scores; "
                             "this one holds labels")
        bins = {name: to_numpy(values) for name, values in calibration.items()}
        kwargs.setdefault("expected_calibration_error",
                          float(to_numpy(self.metrics["expected_calibration_error"])))
        return plot_reliability(bins["proportion"], bins["confidence"], bins["accuracy"],
                                ax=ax, **kwargs)

    @property
    def histogram(self) -> Any:
        """The ``(2, K, H)`` probability histogram of a state built with
        ``thresholds=H`` (as the state held it at compute), or None."""
        return self._histogram

    def curves(self) -> tuple[list[dict], list[dict]]:
        """Each class's binned ROC and precision-recall curve.

        Returns
        -------
        roc, pr : list of dict
            Per class, :func:`metrics_gpu.plot.binned_curves` of the state's
            histogram (NumPy arrays), with ``"auc"`` and
            ``"average_precision"`` added from ``per_class``.

        Raises
        ------
        ValueError
            Not a state of scores built with ``thresholds=H``.

        See Also
        --------
        plot_roc, plot_precision_recall : Draw them.
        """
        if self._histogram is None:
            held = "holds labels" if self._kind != "scores" else "has no score histogram"
            raise ValueError(f"thresholds: this state {held}; build ClassificationMetrics "
                             "with thresholds=H and update it with (N, K) scores for the "
                             "ROC and precision-recall curves")
        roc, pr = binned_curves(to_numpy(self._histogram))
        per_class = self.per_class
        auc, ap = to_numpy(per_class["roc_auc"]), to_numpy(per_class["average_precision"])
        for k, (roc_curve, pr_curve) in enumerate(zip(roc, pr)):
            roc_curve["auc"], pr_curve["average_precision"] = float(auc[k]), float(ap[k])
        return roc, pr

    def plot_roc(self, ax: Any = None, classes: Sequence[int] | None = None,
                 **kwargs: Any) -> Any:
        """Draw the binned ROC curves (:meth:`curves`, through
        :func:`metrics_gpu.plot.plot_roc`).

        Parameters
        ----------
        ax : matplotlib Axes, optional
            Where to draw; default a new figure.
        classes : sequence of int, optional
            The class codes to draw; default class 1 for K = 2, every class
            and the macro average for K <= 10, the macro average of all
            classes alone beyond.
        **kwargs
            Passed to :func:`metrics_gpu.plot.plot_roc`.

        Returns
        -------
        matplotlib Axes

        See Also
        --------
        curves : The curves drawn.
        plot_precision_recall : The precision-recall curves.
        """
        roc, _ = self.curves()
        return plot_roc(chosen_curves(roc, classes, kwargs), ax=ax, **kwargs)

    def plot_precision_recall(self, ax: Any = None, classes: Sequence[int] | None = None,
                              **kwargs: Any) -> Any:
        """Draw the binned precision-recall curves, as :meth:`plot_roc` draws
        the ROC curves (:func:`metrics_gpu.plot.plot_precision_recall`).

        Parameters
        ----------
        ax : matplotlib Axes, optional
            Where to draw; default a new figure.
        classes : sequence of int, optional
            The class codes to draw (default as :meth:`plot_roc`).
        **kwargs
            Passed to :func:`metrics_gpu.plot.plot_precision_recall`.

        Returns
        -------
        matplotlib Axes

        See Also
        --------
        curves : The curves drawn.
        plot_roc : The ROC curves.
        """
        _, pr = self.curves()
        return plot_precision_recall(chosen_curves(pr, classes, kwargs), ax=ax, **kwargs)



class StepReport(StreamingReport):
    """The metrics of one batch, from :meth:`ClassificationMetrics.__call__`.

    Every name, value, array and method of :class:`StreamingReport`, of the
    batch alone. The names are known at once (nothing read); the values are
    computed on the device the first time one is read, or at the next call,
    whichever comes first, then held: 0-d tensors on the inputs' device for
    torch inputs, with no host sync until they are read on the host. What a
    step logger takes as it is (``self.log_dict(metrics(y, logits))`` in
    Lightning)."""

    # What the report's computing sets (StreamingReport.__init__); read
    # before it, any of them computes the batch's values first.
    _COMPUTED = frozenset({
        "_backend", "_like", "_kind", "_label_values", "_score_values", "_support",
        "_matrix", "_checks", "_histogram", "_intervals", "_groups", "_label_host",
        "_group_table"})

    def __init__(self, step: ClassificationMetrics) -> None:
        self._batch_state: ClassificationMetrics | None = step
        self._spec = step._spec
        places = step._step_places
        if places is None:  # the same for every batch of the step state: kept on it
            places = step._step_places = _metric_places(step._spec, step._held_state().kind)
        self._places = places
        self._names = tuple(places)

    def _computed(self) -> None:
        """The batch's values, computed from its state (two launches) unless
        they are already; the state is then zeroed (memsets, on the same
        stream after the report's copies), ready for the next batch."""
        step = self._batch_state
        if step is None:
            return
        self._batch_state = None
        with caller_stream(step._like):
            label_values, score_values = step._held_state().compute()
            StreamingReport.__init__(self, step, label_values, score_values)
            step.reset()

    def __getattr__(self, name: str) -> Any:
        # Only for the attributes the computing sets (and only before it).
        if name in StepReport._COMPUTED and self.__dict__.get("_batch_state") is not None:
            self._computed()
            return getattr(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


__all__ = ["StepReport", "StreamingReport"]
