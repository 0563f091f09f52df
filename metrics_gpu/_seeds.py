"""The source systems' own metric bundles, each with its own conventions.

Conventions that differ between the sources are not blended: each entry point
follows its source, states how in its docstring, and takes every formula from
:mod:`metrics_gpu._formulas` with that source's zero-division rule.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from metrics_gpu import _formulas as F
from metrics_gpu._backend import is_device_array, on_caller_stream, resolve_backend
from metrics_gpu._stages import accumulate, output
from metrics_gpu._scores import _score_pass
from metrics_gpu._state import ClassStatistics
from metrics_gpu._validation import (
    check_beta,
    check_confusion_matrix,
    check_label_inputs,
    check_option,
    check_score_inputs,
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


def per_class_performance(cm) -> np.ndarray:
    """pyActLearn's per-class performance array, shape (K, 13).

    Columns in the seed's order (:data:`PER_CLASS_PERFORMANCE_COLUMNS`): tp,
    tn, fp, fn, accuracy, misclassification, recall, false positive rate,
    specificity, precision, prevalence, F1, G = sqrt(P R). ``cm`` has rows =
    actual, columns = predicted. Standard meanings: fp = column sum - tp, fn =
    row sum - tp (the seed's prose swaps the two; its code does not). As in
    pyActLearn, recall/FPR/specificity/precision/F1 are 0 when undefined;
    accuracy, misclassification and prevalence are not guarded.

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


def overall_performance(cm) -> np.ndarray:
    """pyActLearn's 9 overall values, in the seed's order (:data:`OVERALL_PERFORMANCE_NAMES`).

    average accuracy (mean of per-class (tp + tn) / N), weighed accuracy
    (sum_k accuracy_k * prevalence_k, not divided by K, as pyActLearn's code),
    micro P/R/F, macro P/R (means of the guarded per-class values), macro F
    (harmonic mean of macro P and macro R) and exact matching ratio (trace /
    N). Micro values and both F values are not guarded: 0/0 is NaN, as in
    pyActLearn.

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


# -- CatBoost ----------------------------------------------------------------

# name -> (allowed parameters, per class?)
_CATBOOST_LABEL_METRICS = {
    "Precision": ({"use_weights", "hints"}, True),
    "Recall": ({"use_weights", "hints"}, True),
    "F1": ({"use_weights", "hints"}, True),
    "F": ({"use_weights", "hints", "beta"}, True),
    "TotalF1": ({"use_weights", "hints", "average"}, False),
    "MCC": ({"use_weights", "hints"}, False),
    "Accuracy": ({"use_weights", "hints"}, False),
    "HammingLoss": ({"use_weights", "hints"}, False),
    "ZeroOneLoss": ({"use_weights", "hints"}, False),
    "Kappa": ({"use_weights", "hints"}, False),
    "WKappa": ({"use_weights", "hints"}, False),
}
# Score metrics: name -> (allowed parameters, default use_weights), as
# CatBoost's documentation gives them (AUC ignores weights unless asked).
_CATBOOST_SCORE_METRICS = {
    "MultiClass": ({"use_weights", "hints"}, True),
    "MultiClassOneVsAll": ({"use_weights", "hints"}, True),
    "HingeLoss": ({"use_weights", "hints"}, True),
    "AUC": ({"use_weights", "hints", "type", "misclass_cost_matrix"}, False),
}


def parse_catboost_spec(spec: str) -> tuple[str, dict[str, str]]:
    """Split ``"Name:key=value;key=value"`` into the name and its parameters."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"spec must be a CatBoost metric string, got {spec!r}")
    name, _, rest = spec.strip().partition(":")
    params: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in rest.split(";"))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"spec parameter {item!r} in {spec!r} is not key=value")
        params[key.strip()] = value.strip()
    return name.strip(), params


def _parse_bool(value: str, key: str, spec: str) -> bool:
    lowered = value.lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise ValueError(f"{key} must be true or false in {spec!r}, got {value!r}")


@on_caller_stream
def catboost_metric(spec, y_true, approx, *, weight=None, validate=True, deterministic=False):
    """A CatBoost multiclass metric, as CatBoost computes it.

    Parameters
    ----------
    spec : str
        CatBoost's metric string, e.g. ``"TotalF1:average=Macro"``,
        ``"Precision"``, ``"WKappa"``, ``"Accuracy:use_weights=false"``.
    y_true : (N,) class codes (integers, or floats holding integers)
    approx : (N, K) raw per-class scores; predictions are their row argmax.
    weight : (N,) optional object weights. CatBoost stores weights as float32,
        so they are rounded to float32 first, which reproduces CatBoost's
        results to float64 precision.

    Returns
    -------
    A (K,) array for the per-class metrics (Precision, Recall, F1, F), else a
    float64 scalar.

    Conventions (CatBoost's, from its ``caching_metric.cpp`` / ``kappa.cpp``):
    Precision is 0 when nothing is predicted as the class; Recall is 1 when
    the class has no samples; F uses those with undefined values set to 1 and
    is 0 when P + R = 0; TotalF1 per class is 2 tp / (support + predicted)
    (0 when both are 0), averaged Weighted (default, by support), Macro (over
    all K) or Micro; MCC is 0 when undefined; Kappa and WKappa (quadratic
    weights, whatever CatBoost's doc cites) are -1 when the expected
    disagreement is 0. ``use_weights=false`` sets every weight to 1 as
    CatBoost's documentation says (CatBoost's ``utils.eval_metric`` helper
    applies the weights regardless of that flag).

    Score metrics on the raw approxes: ``MultiClass`` is the mean of -log
    softmax(a)[t] (the loss, positive, as ``eval_metric`` returns it),
    ``MultiClassOneVsAll`` the mean over rows of -(1/K) sum_j log of
    sigmoid(a_j) for the target and of 1 - sigmoid(a_j) for the others,
    ``HingeLoss`` the Crammer-Singer hinge, ``AUC:type=Mu`` (default; with
    ``misclass_cost_matrix``) Kleiman and Page's AUC-mu as a float, and
    ``AUC:type=OneVsAll`` a (K,) array. AUC ignores weights unless
    ``use_weights=true`` (CatBoost's documented default).

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import catboost_metric
    >>> approx = np.array([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [0.5, 0.2, 0.9], [1.0, 0.0, 0.0]])
    >>> float(catboost_metric("TotalF1:average=Macro", np.array([0, 1, 2, 2]), approx))
    0.7777777777777777
    """
    name, params = parse_catboost_spec(spec)
    if name not in _CATBOOST_LABEL_METRICS and name not in _CATBOOST_SCORE_METRICS:
        raise ValueError(
            f"unknown CatBoost metric {name!r} in spec {spec!r}; available: "
            f"{sorted(_CATBOOST_LABEL_METRICS) + sorted(_CATBOOST_SCORE_METRICS)}"
        )
    allowed, default_weights = (
        _CATBOOST_SCORE_METRICS[name] if name in _CATBOOST_SCORE_METRICS
        else (_CATBOOST_LABEL_METRICS[name][0], True))
    unknown = set(params) - allowed
    if unknown:
        raise ValueError(
            f"CatBoost metric {name} does not take {sorted(unknown)} in {spec!r}; "
            f"valid parameters: {sorted(allowed)}"
        )
    use_weights = _parse_bool(params.get("use_weights", "true" if default_weights else "false"),
                              "use_weights", spec)
    if name in _CATBOOST_SCORE_METRICS:
        return _catboost_score_metric(name, params, spec, y_true, approx,
                                      weight if use_weights else None, validate)
    # Device arrays (CuPy, torch, JAX) keep their place; lists become NumPy.
    scores = approx if hasattr(approx, "shape") and hasattr(approx, "ndim") else np.asarray(approx)
    if scores.ndim != 2 or scores.shape[1] < 2:
        raise ValueError(
            f"approx must be (N, K) raw scores with K >= 2 classes, got shape {tuple(scores.shape)}"
        )
    # CatBoost evaluates weights that are all 0 (its 0 / 0 conventions apply).
    inputs = check_label_inputs(y_true, scores, sample_weight=weight if use_weights else None,
                                validate=validate, deterministic=deterministic,
                                allow_all_zero_weight=True, pred_name="approx")
    inputs = _catboost_weights(inputs)
    if weight is not None and not use_weights:  # still check it, as CatBoost would
        check_label_inputs(y_true, scores, sample_weight=weight, validate=validate,
                           deterministic=deterministic, allow_all_zero_weight=True,
                           pred_name="approx")
    stats, _ = accumulate(inputs, moments=name == "WKappa")
    c = F.Counts.from_statistics(stats, np)
    if name == "Precision":
        return output(F.precision(c, 0.0), inputs)
    if name == "Recall":
        return output(F.recall(c, 1.0), inputs)
    if name == "F1":
        return output(F.catboost_f(c, 1.0), inputs)
    if name == "F":
        if "beta" not in params:
            raise ValueError(f"CatBoost metric F needs beta, e.g. 'F:beta=2', got {spec!r}")
        try:
            beta = float(params["beta"])
        except ValueError:
            raise ValueError(f"beta must be a number in {spec!r}") from None
        return output(F.catboost_f(c, check_beta(beta)), inputs)
    if name == "TotalF1":
        average = check_option(params.get("average", "Weighted"),
                               ("Weighted", "Macro", "Micro"), "average")
        return output(F.catboost_total_f1(c, average), inputs)
    if name == "MCC":
        return output(F.matthews_corrcoef(c), inputs)
    if name == "Accuracy":
        return output(F.accuracy(c), inputs)
    if name in ("HammingLoss", "ZeroOneLoss"):
        return output(1 - F.accuracy(c), inputs)
    return output(F.catboost_kappa(c, stats, "quadratic" if name == "WKappa" else None),
                   inputs)


def _catboost_weights(inputs):
    """CatBoost holds weights as float32: round them as it does."""
    if inputs.sample_weight is None or inputs.sample_weight.dtype.kind != "f":
        return inputs
    return dataclasses.replace(
        inputs, sample_weight=inputs.sample_weight.astype(np.float32).astype(np.float64))


def _catboost_score_metric(name, params, spec, y_true, approx, weight, validate):
    """MultiClass, MultiClassOneVsAll, HingeLoss and AUC on raw approxes."""
    if name == "AUC":
        from metrics_gpu._ranking import _catboost_auc

        auc_type = params.get("type", "Mu")
        if auc_type not in ("Mu", "OneVsAll"):
            raise ValueError(f"AUC type must be Mu or OneVsAll in {spec!r}, got {auc_type!r}")
        cost = params.get("misclass_cost_matrix")
        if cost is not None and auc_type != "Mu":
            raise ValueError(f"misclass_cost_matrix applies to AUC:type=Mu only, in {spec!r}")
        return _catboost_auc(y_true, approx, weight, auc_type, cost)
    inputs = check_score_inputs(y_true, approx, name="approx", kind="logits",
                                sample_weight=weight, validate=validate,
                                allow_all_zero_weight=True)
    if inputs.binary_column or inputs.num_classes < 2:
        raise ValueError(
            f"approx must be (N, K) raw scores with K >= 2 classes, got shape "
            f"{tuple(getattr(approx, 'shape', np.shape(approx)))}"
        )
    inputs = _catboost_weights(inputs)
    if name == "MultiClass":
        return output(F.log_loss(_score_pass(inputs, from_logits=True, terms=("nll",))), inputs)
    if name == "MultiClassOneVsAll":
        sums = _score_pass(inputs, from_logits=True, one_vs_all=True, terms=("one_vs_all",))
        return output(F.catboost_one_vs_all(sums), inputs)
    sums = _score_pass(inputs, from_logits=False, terms=("hinge",))
    return output(F.score_mean(sums, "hinge"), inputs)


__all__ = [
    "BinaryQualityMetrics", "MulticlassQualityMetrics", "binary_quality_metrics",
    "catboost_metric", "multiclass_quality_metrics", "overall_performance",
    "per_class_performance", "parse_catboost_spec",
    "PER_CLASS_PERFORMANCE_COLUMNS", "OVERALL_PERFORMANCE_NAMES",
]
