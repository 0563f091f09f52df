"""oneDAL's metric bundles: ``multiclass_quality_metrics`` and
``binary_quality_metrics`` (oneDAL's multi-class and binary quality-metric
sets), with oneDAL's conventions, stated in each docstring."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from metrics_gpu._formulas import labels as F
from metrics_gpu.backends.selection import on_caller_stream
from metrics_gpu._common.docs import shared_parameters
from metrics_gpu._pipeline.stages import accumulate, output
from metrics_gpu._common.types import ArrayLike
from metrics_gpu._validation import (
    check_beta,
    check_label_inputs,
    check_option,
)

# -- oneDAL, multi-class -----------------------------------------------------


@dataclass(frozen=True)
class MulticlassQualityMetrics:
    """oneDAL's multi-class result: the confusion matrix and its 8 metrics.

    Every value lives where the inputs live: NumPy arrays and
    ``numpy.float64`` scalars for NumPy inputs, else arrays (0-d for the
    scalars) of the input's framework, on its device. Formulas in
    :func:`multiclass_quality_metrics`; 0/0 is NaN.

    Attributes
    ----------
    confusion_matrix : array of shape (K, K)
        Rows = actual, columns = predicted (integer counts, or summed
        weights).
    average_accuracy : float
        Mean over classes of (tp + tn) / N.
    error_rate : float
        Mean over classes of (fp + fn) / N.
    micro_precision, micro_recall : float
        From the counts summed over classes.
    micro_fscore : float
        F-beta of micro precision and micro recall.
    macro_precision, macro_recall : float
        Means of the per-class values.
    macro_fscore : float
        F-beta of macro precision and macro recall (not the mean of
        per-class F).
    """

    confusion_matrix: ArrayLike
    average_accuracy: Any
    error_rate: Any
    micro_precision: Any
    micro_recall: Any
    micro_fscore: Any
    macro_precision: Any
    macro_recall: Any
    macro_fscore: Any

    def as_dict(self) -> dict[str, Any]:
        """The 8 metrics by name, in oneDAL's order (the matrix left out)."""
        return {name: getattr(self, name) for name in MULTICLASS_QUALITY_METRIC_NAMES}


MULTICLASS_QUALITY_METRIC_NAMES = (
    "average_accuracy", "error_rate", "micro_precision", "micro_recall",
    "micro_fscore", "macro_precision", "macro_recall", "macro_fscore",
)


@on_caller_stream
@shared_parameters
def multiclass_quality_metrics(y_true: ArrayLike, y_pred: ArrayLike, *,
                               num_classes: int | None = None, beta: float = 1.0,
                               sample_weight: ArrayLike | None = None,
                               ignore_index: int | None = None, validate: bool = True,
                               deterministic: bool = False) -> MulticlassQualityMetrics:
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

    Parameters
    ----------
    y_true : array-like of shape (N,)
        The true class codes (integers in [0, K)).
    {y_pred_labels}
    num_classes : int, optional
        K, the number of classes; the codes must lie in [0, K). Omitted: the
        largest label + 1 (or the columns of (N, K) scores); every class up
        to it counts, present or not (a class never predicted makes the
        macro precision NaN, one without samples the macro recall).
    beta : float, default 1.0
        The non-negative beta of the micro and macro F-scores.
    {sample_weight}
    {ignore_index}
    {validate}
    {deterministic}

    Returns
    -------
    MulticlassQualityMetrics
        The K x K confusion matrix and the 8 metrics, where the inputs live.

    See Also
    --------
    binary_quality_metrics : oneDAL's binary bundle.
    label_report : Every label metric, with scikit-learn's conventions.
    overall_performance : pyActLearn's overall values of a matrix.

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
    """oneDAL's binary result: the 2 x 2 matrix in oneDAL's layout and 6 metrics.

    Every value lives where the inputs live: NumPy arrays and
    ``numpy.float64`` scalars for NumPy inputs, else arrays (0-d for the
    scalars) of the input's framework, on its device. 0/0 is NaN.

    Attributes
    ----------
    confusion_matrix : array of shape (2, 2)
        oneDAL's layout: row "actual C1" = (tp, fn), row "actual C2" =
        (fp, tn), C1 being ``pos_label``.
    accuracy : float
        (tp + tn) / N.
    precision, recall, specificity : float
        tp / (tp + fp), tp / (tp + fn), tn / (tn + fp).
    fscore : float
        F-beta of precision and recall.
    auc : float
        oneDAL's single-threshold (recall + specificity) / 2, i.e. balanced
        accuracy, not a ranking AUC.
    """

    confusion_matrix: ArrayLike
    accuracy: Any
    precision: Any
    recall: Any
    fscore: Any
    specificity: Any
    auc: Any

    def as_dict(self) -> dict[str, Any]:
        """The 6 metrics by name, in oneDAL's order (the matrix left out)."""
        return {name: getattr(self, name) for name in BINARY_QUALITY_METRIC_NAMES}


BINARY_QUALITY_METRIC_NAMES = ("accuracy", "precision", "recall", "fscore", "specificity", "auc")


@on_caller_stream
@shared_parameters
def binary_quality_metrics(y_true: ArrayLike, y_pred: ArrayLike, *, beta: float = 1.0,
                           pos_label: int = 1, sample_weight: ArrayLike | None = None,
                           validate: bool = True,
                           deterministic: bool = False) -> BinaryQualityMetrics:
    """oneDAL's quality metrics for binary classifiers.

    Labels are 0/1 codes (or bool); class ``pos_label`` is oneDAL's C1. The
    matrix has oneDAL's layout: row "actual C1" = (tp, fn), row "actual C2" =
    (fp, tn). No zero-division guard (0/0 is NaN). ``auc`` is oneDAL's
    single-threshold value (TPR + TNR) / 2, i.e. balanced accuracy, not a
    ranking AUC.

    Parameters
    ----------
    y_true : array-like of shape (N,)
        The true classes: 0/1 codes (or bool).
    y_pred : array-like of shape (N,) or (N, 2)
        Predicted 0/1 codes (or bool), or (N, 2) scores or logits, reduced by
        a fused argmax (ties to the lowest index).
    beta : float, default 1.0
        The non-negative beta of the F-score.
    pos_label : {0, 1}, default 1
        The positive class, oneDAL's C1.
    {sample_weight}
    {validate}
    {deterministic}

    Returns
    -------
    BinaryQualityMetrics
        The 2 x 2 matrix in oneDAL's layout and the 6 metrics, where the
        inputs live.

    See Also
    --------
    multiclass_quality_metrics : oneDAL's multi-class bundle.
    roc_auc_score : A ranking AUC, from scores.
    label_report : Every label metric, with scikit-learn's conventions.

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


