"""The full label report: every label metric from one pass over the data.

:func:`label_report` accumulates the state once (a dense confusion matrix
while K is small, per-class statistics otherwise) and evaluates every row of
:data:`metrics_gpu._formulas.REPORT_METRICS` and
:data:`~metrics_gpu._formulas.PER_CLASS_METRICS` on it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from metrics_gpu import _formulas as F
from metrics_gpu._classification import _accumulate, _class_lut
from metrics_gpu._state import statistics_from_matrix, use_dense_matrix
from metrics_gpu._validation import check_label_inputs

# The text report lists per-class rows and the matrix only up to this many
# classes; beyond it they are in to_dict() but would drown the summary.
MAX_PRINTED_CLASSES = 50


@dataclass
class LabelReport:
    """Every label metric of one evaluation.

    Attributes
    ----------
    metrics : dict
        Overall metrics by name (see :data:`metrics_gpu.REPORT_METRICS`).
    per_class : dict
        Per-class arrays by column name (precision, recall, f1, specificity,
        jaccard, support), aligned with ``classes``.
    classes : ndarray
        Class codes the report covers.
    total : float
        Number of counted samples (sum of weights when weighted).
    invalid : int
        Samples left out for out-of-range labels (``validate=False`` only).
    confusion_matrix : ndarray or None
        Dense matrix over ``classes`` when K is small enough to hold one.
    """

    metrics: dict[str, float]
    per_class: dict[str, np.ndarray]
    classes: np.ndarray
    total: float
    invalid: int
    confusion_matrix: np.ndarray | None = None
    class_names: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
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

    def to_json(self, **kwargs) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    def to_text(self, digits: int = 4) -> str:
        lines = [
            f"samples: {_plain(self.total)}  classes: {self.classes.size}"
            + (f"  invalid (left out): {self.invalid}" if self.invalid else ""),
            "",
        ]
        width = max(len(name) for name in self.metrics)
        for name, value in self.metrics.items():
            lines.append(f"{name:<{width}}  {value:.{digits}f}")
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
        return "\n".join(lines) + "\n"

    def to_markdown(self, digits: int = 4) -> str:
        lines = ["| metric | value |", "| --- | --- |"]
        lines += [f"| {name} | {value:.{digits}f} |" for name, value in self.metrics.items()]
        return "\n".join(lines) + "\n"


def _plain(value):
    value = np.asarray(value).item()
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def label_report(y_true, y_pred, *, num_classes=None, sample_weight=None,
                 ignore_index=None, validate=True, class_names=None) -> LabelReport:
    """Every label metric of ``y_true`` vs ``y_pred`` from one pass over the data.

    Classes covered: all ``num_classes`` codes if given (or implied by
    ``(N, K)`` scores), else the classes present in either input. Averages
    and kappa positions are over those classes, as in scikit-learn.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import label_report
    >>> r = label_report(np.array([0, 1, 2, 2, 2]), np.array([0, 0, 2, 2, 1]))
    >>> round(r.metrics["accuracy"], 2), round(r.metrics["macro_f1"], 4)
    (0.6, 0.4889)
    """
    inputs = check_label_inputs(y_true, y_pred, num_classes=num_classes,
                                sample_weight=sample_weight, ignore_index=ignore_index,
                                validate=validate)
    backend = inputs.backend
    dense = use_dense_matrix(inputs.num_classes)
    stats, cm = _accumulate(inputs, moments=not dense)
    classes = (np.arange(inputs.num_classes) if inputs.num_classes_given
               else np.flatnonzero(stats.observed))
    if cm is not None:
        cm = cm[np.ix_(classes, classes)]
        stats = statistics_from_matrix(cm, stats.observed[classes], np,
                                       invalid=stats.invalid, moments=True)
    elif classes.size != inputs.num_classes:
        stats, _ = _accumulate(inputs, class_lut=_class_lut(classes, inputs.num_classes),
                               moments=True)
    counts = F.Counts.from_statistics(stats, np)
    with F._quiet(np):
        metrics = {row.name: float(row.formula(counts, stats)) for row in F.REPORT_METRICS}
        per_class = {name: np.asarray(formula(counts)) for name, formula in F.PER_CLASS_METRICS}
    per_class["support"] = np.asarray(stats.support)
    if class_names is None:
        class_names = [str(code) for code in classes.tolist()]
    elif len(class_names) != classes.size:
        raise ValueError(
            f"class_names has {len(class_names)} names but the report covers "
            f"{classes.size} classes"
        )
    return LabelReport(
        metrics=metrics, per_class=per_class, classes=classes,
        total=_plain(stats.total), invalid=int(stats.invalid),
        confusion_matrix=cm, class_names=list(class_names),
    )
