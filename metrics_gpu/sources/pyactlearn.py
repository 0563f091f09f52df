"""pyActLearn's ``per_class_performance(cm)`` and ``overall_performance(cm)``
on a K x K confusion matrix, with pyActLearn's columns and conventions."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from metrics_gpu._formulas import labels as F
from metrics_gpu.backends.selection import is_device_array, resolve_backend
from metrics_gpu._pipeline.stages import output
from metrics_gpu._formulas.state import ClassStatistics
from metrics_gpu._common.types import ArrayLike
from metrics_gpu._validation import check_confusion_matrix

# -- pyActLearn --------------------------------------------------------------

PER_CLASS_PERFORMANCE_COLUMNS = (
    "true_positive", "true_negative", "false_positive", "false_negative", "accuracy",
    "misclassification", "recall", "false_positive_rate", "specificity", "precision",
    "prevalence", "f1", "g_measure",
)
OVERALL_PERFORMANCE_NAMES = (
    "average_accuracy", "weighed_accuracy", "micro_precision", "micro_recall",
    "micro_fscore", "macro_precision", "macro_recall", "macro_fscore",
    "exact_matching_ratio",
)


@dataclass(frozen=True)
class _ResultPlace:
    """Where a result computed from a given matrix goes (what ``_output`` reads)."""

    backend: object
    source: object


def _matrix_on_host(cm):
    """A K x K confusion matrix from any framework or device, checked, on the
    host (it is small), and the place its results go back to."""
    backend = resolve_backend(cm)
    host = backend.to_host(backend.asarray(cm)) if is_device_array(cm) else cm
    return check_confusion_matrix(host, "cm"), _ResultPlace(backend, cm)


def _counts_of_matrix(matrix: np.ndarray) -> F.Counts:
    observed = np.ones(matrix.shape[0], dtype=bool)
    stats = ClassStatistics(
        true_positives=np.diagonal(matrix).copy(), support=matrix.sum(axis=1),
        predicted=matrix.sum(axis=0), total=matrix.sum(), observed=observed,
    )
    return F.Counts.from_statistics(stats, np)


def per_class_performance(cm: ArrayLike) -> ArrayLike:
    """pyActLearn's per-class performance array, shape (K, 13).

    Standard meanings: fp = column sum - tp, fn = row sum - tp (the seed's
    prose swaps the two; its code does not). As in pyActLearn,
    recall/FPR/specificity/precision/F1 are 0 when undefined; accuracy,
    misclassification and prevalence are not guarded.

    Parameters
    ----------
    cm : array-like of shape (K, K)
        A confusion matrix, rows = actual, columns = predicted: finite
        non-negative counts (or summed weights), of any framework (it is read
        to the host once).

    Returns
    -------
    table : array of shape (K, 13), float64
        One row per class, columns in the seed's order
        (:data:`PER_CLASS_PERFORMANCE_COLUMNS`): tp, tn, fp, fn, accuracy,
        misclassification, recall, false positive rate, specificity,
        precision, prevalence, F1, G = sqrt(P R). NumPy for a NumPy or list
        ``cm``, else an array of ``cm``'s framework, on its device.

    See Also
    --------
    overall_performance : pyActLearn's overall values of the same matrix.
    confusion_matrix : The matrix of labels or scores.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import per_class_performance
    >>> per_class_performance(np.array([[2, 1], [0, 3]]))[:, [0, 2, 3, 9]]
    array([[2.  , 0.  , 1.  , 1.  ],
           [3.  , 1.  , 0.  , 0.75]])
    """
    matrix, place = _matrix_on_host(cm)
    return output(_per_class_table(_counts_of_matrix(matrix)), place)


def _per_class_table(c: F.Counts) -> np.ndarray:
    with F._quiet(np):
        p = F.precision(c, 0.0)
        r = F.recall(c, 0.0)
        columns = (
            c.tp, c.tn, c.fp, c.fn,
            F.class_accuracy(c),
            F.class_error_rate(c),
            r,
            F.false_positive_rate(c, 0.0),
            F.specificity(c, 0.0),
            p,
            F.prevalence(c),
            F.divide(2 * p * r, p + r, np, 0.0)[0],
            F.g_measure(c, 0.0),
        )
    return np.stack(columns, axis=1)


def overall_performance(cm: ArrayLike) -> ArrayLike:
    """pyActLearn's 9 overall values, in the seed's order (:data:`OVERALL_PERFORMANCE_NAMES`).

    Micro values and both F values are not guarded: 0/0 is NaN, as in
    pyActLearn.

    Parameters
    ----------
    cm : array-like of shape (K, K)
        A confusion matrix, rows = actual, columns = predicted: finite
        non-negative counts (or summed weights), of any framework (it is read
        to the host once).

    Returns
    -------
    values : array of shape (9,), float64
        average accuracy (mean of per-class (tp + tn) / N), weighed accuracy
        (sum_k accuracy_k * prevalence_k, not divided by K, as pyActLearn's
        code), micro P/R/F, macro P/R (means of the guarded per-class
        values), macro F (harmonic mean of macro P and macro R) and exact
        matching ratio (trace / N). NumPy for a NumPy or list ``cm``, else
        an array of ``cm``'s framework, on its device.

    See Also
    --------
    per_class_performance : pyActLearn's per-class table of the same matrix.
    multiclass_quality_metrics : oneDAL's overall values, from labels.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import overall_performance
    >>> overall_performance(np.array([[2, 1], [0, 3]]))[[0, 8]]
    array([0.83333333, 0.83333333])
    """
    matrix, place = _matrix_on_host(cm)
    c = _counts_of_matrix(matrix)
    table = _per_class_table(c)
    accuracy, prevalence = table[:, 4], table[:, 10]
    with F._quiet(np):
        micro_p = F.micro_rate(F.precision_terms(c), np)
        micro_r = F.micro_rate(F.recall_terms(c), np)
        macro_p = table[:, 9].mean()
        macro_r = table[:, 6].mean()
        values = (
            accuracy.mean(),
            np.dot(accuracy, prevalence),
            micro_p,
            micro_r,
            F.fbeta_from_rates(micro_p, micro_r, 1.0, np),
            macro_p,
            macro_r,
            F.fbeta_from_rates(macro_p, macro_r, 1.0, np),
            F.accuracy(c),
        )
    return output(np.array(values, dtype=np.float64), place)


