"""The report of a file evaluation: :class:`PredictionReport` (a mapping of
the metrics; text, JSON, Markdown, HTML and pictures) and :func:`report_files`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from metrics_gpu._pipeline.mapping import MetricMapping, as_lists, plain, strict_json
from metrics_gpu.files.evaluate import FileEvaluation, evaluate_files
from metrics_gpu.files.sources import Source
from metrics_gpu._formulas.labels import REPORT_METRICS
from metrics_gpu.intervals import DEFAULT_RESAMPLES, check_interval_options
from metrics_gpu._reports.labels import (
    grouped_metric_rows,
    markdown_table,
    metric_legend,
    stream_label_report,
    with_old_keys,
)
from metrics_gpu import plot
from metrics_gpu._reports.html import render_html


class PredictionReport(MetricMapping):
    """The report of prediction files (:func:`evaluate_files`): every label
    metric (:attr:`labels`, a :class:`metrics_gpu.LabelReport`), and with
    scores the score metrics, calibration bins and ROC AUC / average precision
    (exact, or binned with their error bounds).

    A read-only :class:`collections.abc.Mapping` of the scalar metrics as
    Python floats: the label metrics (``labels``' entries), then with scores
    the scalar entries of :attr:`scores` (``cross_entropy``,
    ``top_{k}_accuracy``, ``roc_auc_macro`` ...). As in every report type,
    the per-class arrays, the matrix and the calibration bins are attributes
    (``labels.per_class``, ``scores["per_class"]`` ...), and :meth:`to_dict`
    holds everything, NaN as None.

    ``plot_confusion_matrix``, ``plot_roc``, ``plot_precision_recall`` and
    ``plot_reliability`` draw with matplotlib (the ``[plot]`` extra) and
    return the Axes; :meth:`save_plots` writes them all as PNG files.
    """

    def __init__(self, evaluation: FileEvaluation, class_names=None, intervals=None):
        self.evaluation = evaluation
        codes = evaluation.class_codes
        if class_names is None:  # the labels' names, or --classes FILE's
            class_names = evaluation.class_names
        if class_names is None and codes is not None:
            class_names = [str(code) for code in codes.tolist()]
        self.labels = stream_label_report(evaluation.labels or evaluation.scores,
                                          class_codes=codes, class_names=class_names,
                                          intervals=intervals,
                                          group_names=evaluation.group_names)
        self.streaming = None if evaluation.scores is None else evaluation.scores.compute()
        self._scores: dict[str, Any] | None = None

    @property
    def rows(self) -> int:
        return self.evaluation.rows

    @property
    def auc(self) -> str | None:
        """How ROC AUC / AP were computed: "exact", "binned", or None without scores."""
        return self.evaluation.auc

    @property
    def scores(self) -> dict[str, Any] | None:
        """Score metrics by name as Python numbers (None without scores):
        cross-entropy, perplexity, Brier, hinge, top-k accuracies, calibration
        errors, ROC AUC and average precision (binary / macro / weighted /
        micro, with ``..._error_bound``), and ``per_class`` ROC AUC / AP."""
        if self.streaming is None:
            return None
        if self._scores is None:
            stream = as_lists(self.streaming._host_values())  # NaN kept
            label_names = {row.name for row in _report_metrics()}
            values = {name: value for name, value in stream["metrics"].items()
                      if name not in label_names}
            per_class = {name: stream["per_class"][name]
                         for name in ("roc_auc", "average_precision")
                         if name in stream["per_class"]}
            exact = self.evaluation.exact
            if exact is not None:
                for name in list(values):
                    if name.startswith(("roc_auc", "average_precision")):
                        del values[name]  # binned ones kept for the curves only
                for name, value in exact.items():
                    if name.startswith("per_class_"):
                        per_class[name[len("per_class_"):]] = np.asarray(value).tolist()
                    else:
                        values[name] = float(value)
            values["per_class"] = per_class
            values["calibration"] = stream.get("calibration")
            self._scores = values
        return self._scores

    def _metric_names(self) -> tuple[str, ...]:
        scores = self.scores or {}
        return (*self.labels.keys(), *(name for name in scores
                                       if name not in ("per_class", "calibration")))

    def _metric_value(self, name: str) -> Any:
        return self.labels[name] if name in self.labels else (self.scores or {})[name]

    def _headline(self) -> list[tuple[str, Any]]:
        return [("rows", self.rows), ("classes", int(self.labels.classes.size))]

    def to_dict(self, descriptions: bool = False) -> dict[str, Any]:
        """The report as plain Python values: :meth:`LabelReport.to_dict`'s,
        with ``rows``, ``backend`` and, with scores, ``auc_method`` and
        ``scores`` (:attr:`scores`). NaN and infinities are ``None`` (strict
        JSON). ``descriptions=True`` adds ``"descriptions"`` (each metric
        name's one-line meaning) and ``"metric_groups"`` (the label metrics
        by convention); with ``--groups``, ``"groups"`` holds the metrics of
        each group. The keys of the last release stay one more, named in
        ``"deprecated"``. Classes given by name (label files of names, or
        ``classes``) add ``"class_names"``, in code order (the order of the
        matrix's rows); ``per_class`` is keyed by the names whatever."""
        out = self.labels.to_dict()
        if self.evaluation.class_names is not None:  # classes by name: in code order
            out["class_names"] = list(self.labels.class_names)
        out["rows"] = self.rows
        out["backend"] = self.evaluation.backend
        if self.streaming is not None:
            out["auc_method"] = self.auc
            out["scores"] = plain(self.scores)
        if descriptions:
            out.update(metric_legend(self.keys()))
        return with_old_keys(out, out["groups"] if self.labels.groups is not None else None)

    def to_json(self, descriptions: bool = True, **kwargs) -> str:
        """:meth:`to_dict` as strict JSON text, with the descriptions by default
        (``kwargs`` go to :func:`json.dumps`): NaN and infinities are ``null``."""
        return strict_json(self.to_dict(descriptions=descriptions), **kwargs)

    def _score_lines(self, digits: int) -> list[tuple[str, str]]:
        rows: list[tuple[str, str]] = []
        values = self.scores
        if values is None:  # no scores: no lines
            return rows
        for name, value in values.items():
            if name in ("per_class", "calibration") or name.endswith("_error_bound"):
                continue
            text = f"{value:.{digits}f}"
            bound = values.get(_bound_name(name))
            if bound is not None and self.auc == "binned" and bound == bound:
                text += f" ± {bound:.{digits}f}"
            rows.append((name, text))
        return rows

    def _scores_heading(self) -> str:
        # Without thresholds or kept scores (metrics_gpu.spark's thresholds=None)
        # there is no ROC AUC: the heading says so instead of "None".
        how = self.auc if self.auc is not None else "not computed"
        return f"scores (ROC AUC and average precision: {how}"

    def to_text(self, digits: int = 4) -> str:
        text = self.labels.to_text(digits)
        if self.streaming is None:
            return text
        lines = ["", self._scores_heading()
                 + (", ± the error bound of the binning)" if self.auc == "binned" else ")")]
        rows = self._score_lines(digits)
        width = max(len(name) for name, _ in rows)
        lines += [f"{name:<{width}}  {value}" for name, value in rows]
        return text + "\n".join(lines) + "\n"

    def to_markdown(self, digits: int = 4) -> str:
        """The metrics as one Markdown table: the label metrics by group (as
        :meth:`LabelReport.to_markdown`), then the score metrics."""
        groups = grouped_metric_rows(self.labels.metrics, digits)
        if self.streaming is not None:
            groups.append((self._scores_heading() + ")", self._score_lines(digits)))
        return markdown_table(groups)

    # -- pictures -------------------------------------------------------------------

    def plot_confusion_matrix(self, ax=None, **kwargs):
        """The confusion matrix (see :func:`metrics_gpu.plot.plot_confusion_matrix`)."""
        return self.labels.plot_confusion_matrix(ax=ax, **kwargs)

    def curves(self) -> tuple[list[dict], list[dict]]:
        """Each class's ROC and precision-recall curve, at the bin edges of the
        binned histogram (:meth:`metrics_gpu.StreamingReport.curves`), with the
        report's ROC AUC / AP (exact ones when computed) in ``"auc"`` and
        ``"average_precision"``."""
        scores = self.scores
        if self.streaming is None or scores is None:
            raise ValueError("the ROC and precision-recall curves need scores (--scores)")
        roc, pr = self.streaming.curves()
        per_class = scores["per_class"]
        for k, (roc_curve, pr_curve) in enumerate(zip(roc, pr)):
            roc_curve["auc"] = per_class["roc_auc"][k]
            pr_curve["average_precision"] = per_class["average_precision"][k]
        return roc, pr

    def plot_roc(self, ax=None, classes=None, **kwargs):
        """ROC curves (:func:`metrics_gpu.plot.plot_roc`): class 1 for K = 2,
        every class and the macro average up to K = 10, the macro average alone
        beyond, or the class positions ``classes``. Returns the Axes."""
        roc, _ = self.curves()
        chosen = plot.chosen_curves(roc, classes, kwargs, names=self.labels.class_names)
        return plot.plot_roc(chosen, ax=ax, **kwargs)

    def plot_precision_recall(self, ax=None, classes=None, **kwargs):
        """Precision-recall curves, chosen as :meth:`plot_roc`'s. Returns the Axes."""
        _, pr = self.curves()
        chosen = plot.chosen_curves(pr, classes, kwargs, names=self.labels.class_names)
        return plot.plot_precision_recall(chosen, ax=ax, **kwargs)

    def plot_reliability(self, ax=None, **kwargs):
        """The reliability diagram of the calibration bins."""
        if self.streaming is None:
            raise ValueError("the reliability diagram needs scores (--scores)")
        bins = self.scores["calibration"]
        kwargs.setdefault("expected_calibration_error",
                          self.scores["expected_calibration_error"])
        return plot.plot_reliability(np.asarray(bins["proportion"]),
                                     np.asarray(bins["confidence"]),
                                     np.asarray(bins["accuracy"]), ax=ax, **kwargs)

    def figures(self) -> dict[str, Any]:
        """Every picture this report has, by file stem: the confusion matrix
        (counts and row-normalized) and, with scores, ROC, precision-recall and
        the reliability diagram."""
        drawings = {}
        if self.labels.confusion_matrix is not None:
            drawings["confusion_matrix"] = lambda: self.plot_confusion_matrix()
            drawings["confusion_matrix_normalized"] = \
                lambda: self.plot_confusion_matrix(normalize="true")
        if self.labels.intervals is not None and self.labels.classes.size <= 40:
            # F1 per class with its interval as an error bar.
            drawings["per_class_f1"] = lambda: self.labels.plot_per_class("f1")
        groups = self.labels.groups
        if groups is not None:
            drawings["groups_accuracy"] = lambda: groups.plot("accuracy")
            drawings["groups_macro_f1"] = lambda: groups.plot("macro_f1")
        if self.streaming is not None:
            drawings["reliability"] = self.plot_reliability
            if self.streaming.histogram is not None:
                drawings["roc"] = self.plot_roc
                drawings["precision_recall"] = self.plot_precision_recall
        return drawings

    def save_plots(self, directory, *, dpi: int = 100) -> list[Path]:
        """Write every picture as ``directory/<name>.png``. Every one is drawn
        before any is written: a failure leaves the directory as it was."""
        import io as bytes_io

        rendered = {}
        for name, draw in self.figures().items():
            ax = draw()
            buffer = bytes_io.BytesIO()
            ax.figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
            rendered[name] = buffer.getvalue()
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, data in rendered.items():
            path = directory / f"{name}.png"
            path.write_bytes(data)
            paths.append(path)
        return paths

    def to_html(self, **options) -> str:
        """The report as one self-contained HTML page: metrics, per-class table,
        confusion matrix, pictures (with matplotlib), the files read
        (:func:`metrics_gpu._reports.html.render_html`; ``options`` go to it)."""
        return render_html(self, **options)


def _bound_name(name: str) -> str:
    for family in ("roc_auc", "average_precision"):
        if name.startswith(family):
            return f"{family}_error_bound"
    return ""


def _report_metrics():
    return REPORT_METRICS


def report_files(sources: dict[str, Source | None], *, class_names=None,
                 confidence_level: float | None = None, method: str = "percentile",
                 n_resamples: int | None = None, rng=None, **options) -> PredictionReport:
    """:func:`evaluate_files`, as a :class:`PredictionReport`; with
    ``confidence_level``, the label metrics' intervals (:func:`metrics_gpu.label_report`'s
    ``method``, ``n_resamples`` and ``rng``)."""
    intervals = check_interval_options(
        confidence_level, method, DEFAULT_RESAMPLES if n_resamples is None else n_resamples,
        rng)
    return PredictionReport(evaluate_files(sources, **options), class_names=class_names,
                            intervals=intervals)
