"""CatBoost's multiclass metrics: ``catboost_metric(spec, y_true, approx)``
parses CatBoost's metric strings and returns what
``catboost.utils.eval_metric`` returns, with CatBoost's conventions; its AUC
ranks CatBoost's own softmax (fmath's exp), so ties fall as in CatBoost.

The per-class formulas it uses (``catboost_f``, ``catboost_total_f1``,
``catboost_kappa``) live with every other formula in :mod:`metrics_gpu._formulas.labels`,
and its argument checks in :mod:`metrics_gpu._validation`.
"""

from __future__ import annotations

import dataclasses
import math
from functools import lru_cache
from typing import Any

import numpy as np

from metrics_gpu._formulas import labels as F
from metrics_gpu.backends.selection import on_caller_stream
from metrics_gpu._functional.ranking import _auc_mu, _binary_roc_auc, _class_totals
from metrics_gpu._pipeline.stages import accumulate, output
from metrics_gpu._functional.scores import _score_pass
from metrics_gpu._common.types import ArrayLike
from metrics_gpu._validation import (
    check_auc_mu_scores,
    check_beta,
    check_catboost_auc_type,
    check_cost_matrix,
    check_label_inputs,
    check_option,
    check_ranking_class_codes,
    check_ranking_inputs,
    check_score_inputs,
)

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
def catboost_metric(spec: str, y_true: ArrayLike, approx: ArrayLike, *,
                    weight: ArrayLike | None = None, validate: bool = True,
                    deterministic: bool = False) -> Any:
    """A CatBoost multiclass metric, as CatBoost computes it.

    Parameters
    ----------
    spec : str
        CatBoost's metric string, e.g. ``"TotalF1:average=Macro"``,
        ``"Precision"``, ``"WKappa"``, ``"Accuracy:use_weights=false"``.
    y_true : array-like of shape (N,)
        Class codes (integers, or floats holding integers).
    approx : array-like of shape (N, K)
        Raw per-class scores, K >= 2; predictions are their row argmax.
    weight : array-like of shape (N,), optional
        Object weights. CatBoost stores weights as float32, so they are
        rounded to float32 first, which reproduces CatBoost's results to
        float64 precision.
    validate : bool, default True
        Check labels, scores and weights (passes with a host sync on a GPU);
        False skips those checks for the label and loss metrics (labels out
        of range are then left out, never written out of bounds). AUC checks
        its inputs either way.
    deterministic : bool, default False
        Label metrics with float weights on a GPU: accumulate them in 64-bit
        fixed point instead of float64 atomics, bit-identical run to run (as
        :func:`label_report`). The score metrics (MultiClass,
        MultiClassOneVsAll, HingeLoss, AUC) do not use it.

    Returns
    -------
    value : float, array of shape (K,) or list of float
        A (K,) array for the per-class metrics (Precision, Recall, F1, F),
        else a float64 scalar, both where the inputs live (NumPy for NumPy
        inputs, else the input's framework, on its device). AUC is read back:
        a Python float for ``type=Mu``, a list of K Python floats for
        ``type=OneVsAll``.

    See Also
    --------
    multiclass_auc_mu : AUC-mu on any scores, with a cost matrix.
    label_report : Every label metric, with scikit-learn's conventions.
    log_loss, hinge_loss : scikit-learn's losses of scores or logits.

    Notes
    -----
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
    ``AUC:type=OneVsAll`` one AUC per class, ranked by CatBoost's softmax
    (0 for a class with no samples or with every sample). AUC ignores
    weights unless ``use_weights=true`` (CatBoost's documented default).

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
                                allow_all_zero_weight=True, pred_name="approx",
                                weight_name="weight")
    inputs = _catboost_weights(inputs)
    if weight is not None and not use_weights:  # still check it, as CatBoost would
        check_label_inputs(y_true, scores, sample_weight=weight, validate=validate,
                           deterministic=deterministic, allow_all_zero_weight=True,
                           pred_name="approx", weight_name="weight")
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
        auc_type = params.get("type", "Mu")
        if auc_type not in ("Mu", "OneVsAll"):
            raise ValueError(f"AUC type must be Mu or OneVsAll in {spec!r}, got {auc_type!r}")
        cost = params.get("misclass_cost_matrix")
        if cost is not None and auc_type != "Mu":
            raise ValueError(f"misclass_cost_matrix applies to AUC:type=Mu only, in {spec!r}")
        return _catboost_auc(y_true, approx, weight, auc_type, cost)
    inputs = check_score_inputs(y_true, approx, name="approx", kind="logits",
                                sample_weight=weight, validate=validate,
                                allow_all_zero_weight=True, weight_name="weight")
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
        return output(F.catboost_one_vs_all(sums, inputs.backend.xp), inputs)
    sums = _score_pass(inputs, from_logits=False, terms=("hinge",))
    return output(F.score_mean(sums, "hinge"), inputs)


# -- CatBoost's AUC ------------------------------------------------------------------

# fmath's expd (herumi, BSD-3), CatBoost's vectorised exp: 2**(i / 2048) from a
# table, times a third-degree correction. The steps below are the intrinsics'
# steps, without fused multiply-adds, so the results are bit-identical.
_EXPD_TABLE_BITS = 11
_EXPD_SIZE = 1 << _EXPD_TABLE_BITS
_EXPD_ADJUST = (1 << (_EXPD_TABLE_BITS + 10)) - (1 << _EXPD_TABLE_BITS)
_EXPD_SCALE = _EXPD_SIZE / math.log(2.0)
_EXPD_INVERSE_SCALE = 1 / _EXPD_SCALE
_EXPD_ROUND = float(3 << 51)  # adding it leaves round(x * scale) in the low mantissa bits
_EXPD_C1, _EXPD_C2, _EXPD_C3 = 1.0, 0.16666666685227835064, 3.0000000027955394
_EXPD_VECTOR_MIN = -708.39641853226408
# AVX2 lanes hold four doubles: CatBoost's row of K exps is done four at a
# time, the last K % 4 one by one (which flush to 0 below the minimum).
_EXPD_LANES = 4


@lru_cache(maxsize=1)
def _expd_table() -> np.ndarray:
    mantissa = (1 << 52) - 1
    return np.array([np.float64(math.pow(2.0, i * (1.0 / _EXPD_SIZE))).view(np.uint64)
                     & np.uint64(mantissa) for i in range(_EXPD_SIZE)], dtype=np.uint64)


def _fmath_expd(x, xp, *, lanes: bool):
    """fmath's ``expd_v`` on float64 ``x`` (vector lanes clamp at the minimum,
    the scalar tail returns 0 below it)."""
    if lanes:
        x = xp.maximum(x, _EXPD_VECTOR_MIN)
    shifted = x * _EXPD_SCALE + _EXPD_ROUND
    bits = shifted.view(np.uint64)
    table = xp.asarray(_expd_table())
    fraction = table[(bits & np.uint64(_EXPD_SIZE - 1)).astype(np.intp)]
    t = (shifted - _EXPD_ROUND) * _EXPD_INVERSE_SCALE - x
    exponent = ((bits + np.uint64(_EXPD_ADJUST)) >> np.uint64(_EXPD_TABLE_BITS)) << np.uint64(52)
    y = (_EXPD_C3 - t) * (t * t) * _EXPD_C2 - t + _EXPD_C1
    value = y * (exponent | fraction).view(np.float64)
    if not lanes:
        value = xp.where(x <= _EXPD_VECTOR_MIN, 0.0, value)
    return value


def _catboost_softmax(approx, xp):
    """CatBoost's ``CalcSoftmax``: exp(a - max a) by fmath, summed in column order, divided."""
    shifted = approx - xp.max(approx, axis=1, keepdims=True)
    vector_columns = shifted.shape[1] - shifted.shape[1] % _EXPD_LANES
    exps = xp.concatenate([_fmath_expd(shifted[:, :vector_columns], xp, lanes=True),
                           _fmath_expd(shifted[:, vector_columns:], xp, lanes=False)], axis=1)
    total = xp.zeros(exps.shape[0], dtype=np.float64)
    for k in range(exps.shape[1]):
        total = total + exps[:, k]
    return exps / total[:, None]


def _catboost_auc(y_true, approx, weight, auc_type, cost_matrix):
    """What ``catboost.utils.eval_metric(y_true, approx, "AUC:type=...", weight=weight)`` returns.

    ``auc_type="Mu"``: a float, :func:`multiclass_auc_mu` on the raw ``approx``
    (``cost_matrix`` is ``misclass_cost_matrix``: CatBoost's string
    ``"M00/M01/.../M(K-1)(K-1)"`` or a K x K array; None for CatBoost's default).
    ``auc_type="OneVsAll"``: a list of K floats, class k's ROC AUC against the
    rest ranked by CatBoost's softmax probability of k (computed with its fmath
    exp, so that ties fall as in CatBoost); 0 for a class with no samples or
    with every sample, NaN when the class's (or the rest's) weight is 0.

    Weights are rounded to float32 first, as CatBoost stores them. Inputs are
    CatBoost's: ``y_true`` (N,) class codes (float or int), ``approx`` (N, K) raw
    scores, on the host. Syncs (the results are Python floats).
    """
    auc_type = check_catboost_auc_type(auc_type)
    inputs = check_ranking_inputs(y_true, approx, weight, score_name="approx",
                                  weight_name="weight")
    num_classes = check_auc_mu_scores(inputs, name="approx")
    check_ranking_class_codes(inputs, num_classes)
    xp = inputs.backend.xp
    codes = inputs.y_true.astype(np.int64)
    counts = _class_totals(codes, None, num_classes, inputs).counts
    weight = inputs.sample_weight
    if weight is not None:
        weight = weight.astype(np.float32).astype(np.float64)
    scores = inputs.y_score.astype(np.float64)
    if auc_type == "Mu":
        cost_matrix = check_cost_matrix(cost_matrix, num_classes, inputs.backend)
        return float(_auc_mu(inputs.backend, scores, codes, weight, counts, cost_matrix))
    if cost_matrix is not None:
        raise ValueError("cost_matrix (misclass_cost_matrix) applies to AUC:type=Mu only")
    probabilities = _catboost_softmax(scores, xp)
    n_samples = scores.shape[0]
    values = []
    for k in range(num_classes):
        if counts[k] in (0, n_samples):
            values.append(0.0)
            continue
        values.append(float(_binary_roc_auc(inputs.backend, probabilities[:, k], codes == k,
                                            weight)))
    return values
