"""oneDAL's metric bundles: ``multiclass_quality_metrics`` and
``binary_quality_metrics`` (oneDAL's multi-class and binary quality-metric
sets), with oneDAL's conventions, stated in each docstring."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from metrics_gpu import _formulas as F
from metrics_gpu._backend import on_caller_stream
from metrics_gpu._stages import accumulate, output
from metrics_gpu._validation import (
    check_beta,
    check_label_inputs,
    check_option,
)

# -- oneDAL, multi-class -----------------------------------------------------


@dataclass(frozen=True)
class MulticlassQualityMetrics:
    """oneDAL's multi-class result: the confusion matrix and its 8 metrics."""

    confusion_matrix: np.ndarray
    average_accuracy: float
    error_rate: float
    micro_precision: float
    micro_recall: float
    micro_fscore: float
    macro_precision: float
    macro_recall: float
    macro_fscore: float

    def as_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in MULTICLASS_QUALITY_METRIC_NAMES}


MULTICLASS_QUALITY_METRIC_NAMES = (
    "average_accuracy", "error_rate", "micro_precision", "micro_recall",
    "micro_fscore", "macro_precision", "macro_recall", "macro_fscore",
)


@on_caller_stream
def multiclass_quality_metrics(y_true, y_pred, *, num_classes=None, beta=1.0,
                               sample_weight=None, ignore_index=None, validate=True,
                               deterministic=False):
    """oneDAL's quality metrics for multi-class classifiers.

    Over all K classes (``num_classes``, or max label + 1), with oneDAL's
    formulas and no zero-division guard (0/0 is NaN, as in oneDAL):

    * average_accuracy = (1/K) sum_i (tp_i + tn_i) / N
    * error_rate = (1/K) sum_i (fp_i + fn_i) / N (not 1 - accuracy)
    * micro P/R = sum tp / sum (tp + fp), sum tp / sum (tp + fn)
    * macro P/R = (1/K) sum tp_i / (tp_i + fp_i), (1/K) sum tp_i / (tp_i + fn_i)
    * micro/macro F-score = (b^2 + 1) P R / (b^2 P + R) of the micro/macro P and R
      (the harmonic form, NOT scikit-learn's mean of per-class F).

    ``sample_weight`` is an extension (oneDAL counts only).

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import multiclass_quality_metrics
    >>> m = multiclass_quality_metrics(np.array([0, 1, 2, 0, 1, 2]), np.array([0, 2, 1, 0, 0, 1]))
    >>> round(float(m.macro_fscore), 4), round(float(m.average_accuracy), 4)
    (0.2667, 0.5556)
    """
    beta = check_beta(beta)
    inputs = check_label_inputs(y_true, y_pred, num_classes=num_classes,
                                sample_weight=sample_weight, ignore_index=ignore_index,
                                validate=validate, deterministic=deterministic)
    stats, cm = accumulate(inputs, matrix=True)
    c = F.Counts.from_statistics(stats, np)
    with F._quiet(np):
        micro_p = F.micro_rate(F.precision_terms(c), np)
        micro_r = F.micro_rate(F.recall_terms(c), np)
        macro_p = F.precision(c).mean()
        macro_r = F.recall(c).mean()
    values = dict(
        average_accuracy=F.class_accuracy(c).mean(),
        error_rate=F.class_error_rate(c).mean(),
        micro_precision=micro_p,
        micro_recall=micro_r,
        micro_fscore=F.fbeta_from_rates(micro_p, micro_r, beta, np),
        macro_precision=macro_p,
        macro_recall=macro_r,
        macro_fscore=F.fbeta_from_rates(macro_p, macro_r, beta, np),
    )
    return MulticlassQualityMetrics(
        confusion_matrix=output(cm, inputs),
        **{name: output(value, inputs) for name, value in values.items()},
    )


# -- oneDAL, binary ----------------------------------------------------------


@dataclass(frozen=True)
class BinaryQualityMetrics:
    """oneDAL's binary result: the 2 x 2 matrix in oneDAL's layout and 6 metrics."""

    confusion_matrix: np.ndarray
    accuracy: float
    precision: float
    recall: float
    fscore: float
    specificity: float
    auc: float

    def as_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in BINARY_QUALITY_METRIC_NAMES}


BINARY_QUALITY_METRIC_NAMES = ("accuracy", "precision", "recall", "fscore", "specificity", "auc")


@on_caller_stream
def binary_quality_metrics(y_true, y_pred, *, beta=1.0, pos_label=1, sample_weight=None,
                           validate=True, deterministic=False):
    """oneDAL's quality metrics for binary classifiers.

    Labels are 0/1 codes (or bool); class ``pos_label`` is oneDAL's C1. The
    matrix has oneDAL's layout: row "actual C1" = (tp, fn), row "actual C2" =
    (fp, tn). No zero-division guard (0/0 is NaN). ``auc`` is oneDAL's
    single-threshold value (TPR + TNR) / 2, i.e. balanced accuracy, not a
    ranking AUC.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import binary_quality_metrics
    >>> m = binary_quality_metrics(np.array([1, 1, 0, 0, 1]), np.array([1, 0, 0, 1, 1]))
    >>> m.confusion_matrix
    array([[2, 1],
           [1, 1]])
    >>> float(m.auc)
    0.5833333333333333
    """
    beta = check_beta(beta)
    check_option(pos_label, (0, 1), "pos_label")
    inputs = check_label_inputs(y_true, y_pred, num_classes=2, sample_weight=sample_weight,
                                validate=validate, deterministic=deterministic)
    stats, cm = accumulate(inputs, matrix=True)
    negative = 1 - pos_label
    order = inputs.backend.xp.asarray([pos_label, negative])
    layout = cm[order[:, None], order[None, :]]
    c = F.Counts.from_statistics(stats.take(np.array([pos_label])), np)
    with F._quiet(np):
        rates = {
            "accuracy": F.accuracy(F.Counts.from_statistics(stats, np)),
            "precision": F.precision(c)[0],
            "recall": F.recall(c)[0],
            "fscore": F.fbeta_from_counts(c, beta)[0],
            "specificity": F.specificity(c)[0],
        }
        rates["auc"] = (rates["recall"] + rates["specificity"]) / 2
    return BinaryQualityMetrics(confusion_matrix=output(layout, inputs),
                                **{k: output(v, inputs) for k, v in rates.items()})


