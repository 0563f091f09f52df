"""Ranking inputs: labels with (N,) or (N, K) scores, and the arguments of the
ranking metrics (``pos_label``, ``average``, ``labels=``, AUC-mu's costs)."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, get_args

import numpy as np

from metrics_gpu.backends.selection import is_device_array, resolve_backend
from metrics_gpu._formulas.tolerance import float_eps
from metrics_gpu._common.types import MultiClass, RankingAverage
from metrics_gpu._validation.common import (
    ALL_ZERO_WEIGHT,
    _check_finite_scores,
    _first_index,
    _first_true,
    _to_backend,
    check_sample_weight,
)
from metrics_gpu._validation.labels import _as_label_array, _label_range


# The checks of metrics_gpu._functional.ranking (ROC / PR curves, ROC AUC, average
# precision, AUC-mu). Messages follow scikit-learn's where it has one for the
# case, with the offending value and its position added.

RANKING_AVERAGE_OPTIONS = (None, *get_args(RankingAverage))
MULTI_CLASS_OPTIONS = get_args(MultiClass)
# np.allclose(1, row_sum), scikit-learn's test that multiclass scores are
# probabilities; the relative tolerance widens to K * eps for scores of lower
# precision (float16 rows rounded from sums of 1 reach 1 +- K * eps / 2).
_ROW_SUM_RTOL, _ROW_SUM_ATOL = 1e-5, 1e-8


@dataclass(frozen=True)
class RankingInputs:
    """Checked ``(y_true, y_score, sample_weight)`` of a ranking metric, on one backend."""

    y_true: Any           # (N,) integer (or bool) labels
    y_score: Any          # (N,) scores, or (N, K) per-class scores
    sample_weight: Any    # (N,) or None
    backend: Any
    source: Any = None    # the caller's y_true: results go back to its framework and device
    score_eps: float = 0.0  # eps of the caller's score type (before any widening)


def check_ranking_inputs(y_true, y_score, sample_weight=None, score_name: str = "y_score",
                         weight_name: str = "sample_weight",
                         validate: bool = True) -> RankingInputs:
    """Labels, finite scores ((N,), (N, 1) flattened, or (N, K)) and weights of one length.

    Reads back one flag per check (and an index when a check fails), never the
    data. ``score_name`` and ``weight_name`` are the caller's names of
    ``y_score`` and ``sample_weight``, for the messages. Without ``validate``
    the scores and weights are not read (shapes and types are still checked;
    float labels still are, integer ones never need a read).
    """
    backend = resolve_backend(y_true, y_score, sample_weight)
    labels = _as_label_array(y_true, "y_true", backend, validate=True, targets=True)
    scores = _to_backend(y_score, backend)
    score_eps = float_eps(scores.dtype)
    if scores.dtype.name == "bfloat16":
        scores = scores.astype(np.float32)  # exact; NumPy cannot sort bfloat16
    if scores.dtype.kind not in "fiub":
        raise ValueError(f"{score_name} must hold numeric scores, got dtype {scores.dtype}")
    if scores.ndim == 2 and scores.shape[1] == 1:
        scores = scores.reshape(-1)
    if scores.ndim not in (1, 2):
        raise ValueError(
            f"{score_name} must be (N,) scores or (N, K) per-class scores, got shape "
            f"{tuple(scores.shape)}"
        )
    n = labels.shape[0]
    if n == 0:
        raise ValueError(f"y_true and {score_name} are empty; at least one sample is required")
    if scores.shape[0] != n:
        raise ValueError(f"y_true has {n} samples but {score_name} has {scores.shape[0]}")
    if validate and scores.dtype.kind == "f":
        _check_finite_scores(scores, backend, score_name)
    weight = check_sample_weight(sample_weight, n, backend, validate=validate,
                                 allow_all_zero=True, name=weight_name)
    return RankingInputs(labels, scores, weight, backend, source=y_true, score_eps=score_eps)


def present_labels(inputs: RankingInputs) -> np.ndarray:
    """The distinct labels of ``y_true``, sorted, in its dtype, on the host.

    Binary labels (the usual case) are found without a sort: the backend's
    ``label_pair_summary`` gives the least and greatest label and whether a
    third is present (on a GPU one read of the labels and one sync). Only a
    third class costs a ``unique`` (a sort, and a second sync).
    """
    labels, backend = inputs.y_true, inputs.backend
    low, high, third = backend.label_pair_summary(labels)
    if third:
        return np.asarray(backend.to_host(backend.xp.unique(labels)))
    return np.array([low] if low == high else [low, high], dtype=labels.dtype)


# What a binary ranking function's caller may want for multiclass y_true.
_ONE_VS_REST = {
    "roc_curve": "roc_auc_score(y_true, y_score, multi_class='ovr')",
    "precision_recall_curve": "average_precision_score(y_true, y_score, average='macro')",
}


def check_binary_scores(inputs: RankingInputs, function: str, classes=None) -> None:
    """Binary metrics rank one score per sample (scikit-learn's column_or_1d).

    With the present ``classes`` given, (N, K) scores of multiclass ``y_true``
    are named as such: a binary metric needs one class against the rest.
    """
    if inputs.y_score.ndim != 1 and classes is not None and classes.size > 2:
        average = _ONE_VS_REST.get(function)
        raise ValueError(
            f"y_true has {classes.size} classes {classes.tolist()}, but {function} is a binary "
            "metric: pass pos_label=k with the scores of class k (y_score[:, k]) to rank one "
            "class against the rest"
            + (f", or use {average} for a one-vs-rest average" if average else "")
        )
    if inputs.y_score.ndim != 1:
        raise ValueError(
            f"{function} needs 1-D y_score for binary y_true (the scores of the positive "
            f"class, e.g. y_score[:, 1]); got shape {tuple(inputs.y_score.shape)}"
        )


def check_curve_pos_label(pos_label, classes: np.ndarray):
    """scikit-learn's ``_check_pos_label_consistency`` for binary curves, on class codes.

    ``y_true`` must be binary unless ``pos_label`` picks the positive class;
    ``pos_label=None`` means 1 when the labels are within {0, 1} or {-1, 1}.
    """
    if pos_label is None:
        if classes.size > 2:
            raise ValueError(
                f"y_true has {classes.size} classes {classes.tolist()}: multiclass format is not "
                "supported; pass pos_label to rank one class against the rest"
            )
        values = set(classes.astype(np.int64).tolist())
        if not (values <= {0, 1} or values <= {-1, 1}):
            shown = ", ".join(repr(v) for v in classes.tolist())
            raise ValueError(
                f"y_true takes value in {{{shown}}} and pos_label is not specified: either make "
                "y_true take value in {0, 1} or {-1, 1} or pass pos_label explicitly."
            )
        return 1
    return _check_label_value(pos_label, "pos_label")


def _check_label_value(value, name: str):
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer():
        # typeshed's Real.__trunc__ returns an Integral-like, not int, so no int()
        # overload matches; every finite Real converts (NumPy floats by __int__).
        return int(value)  # type: ignore[call-overload]
    raise ValueError(f"{name} must be a class code (an integer), got {value!r}")


def check_average_precision_pos_label(pos_label, classes: np.ndarray) -> int:
    """scikit-learn's checks of ``pos_label`` in ``average_precision_score``."""
    pos_label = _check_label_value(pos_label, "pos_label")
    if classes.size > 2:
        if pos_label != 1:
            raise ValueError(
                "Parameter pos_label is fixed to 1 for multiclass y_true. Do not set pos_label "
                f"or set pos_label to 1 (got {pos_label})."
            )
    elif classes.size == 2 and pos_label not in classes:
        raise ValueError(
            f"pos_label={pos_label} is not a valid label. It should be one of "
            f"{classes.tolist()}"
        )
    return pos_label


def check_ranking_average(average, options=RANKING_AVERAGE_OPTIONS, problem: str = ""):
    if average not in options:
        where = f" for {problem} problems" if problem else ""
        raise ValueError(f"average must be one of {options}{where}, got {average!r}")
    return average


def check_max_fpr(max_fpr):
    """``max_fpr``: None, or a number in (0, 1] (the end of the partial ROC AUC)."""
    if max_fpr is None:
        return None
    if (not isinstance(max_fpr, numbers.Real) or isinstance(max_fpr, bool)
            or not 0 < max_fpr <= 1):
        raise ValueError(f"max_fpr must be a number in (0, 1] or None, got {max_fpr!r}")
    return float(max_fpr)


def check_drop_intermediate(drop_intermediate) -> bool:
    if not isinstance(drop_intermediate, (bool, np.bool_)):
        raise ValueError(f"drop_intermediate must be True or False, got {drop_intermediate!r}")
    return bool(drop_intermediate)


def check_multiclass_scores(inputs: RankingInputs, classes: np.ndarray) -> None:
    """(N, K) scores whose rows sum to 1, as scikit-learn's multiclass ROC AUC requires.

    The row sums are reduced where the scores live; one flag is read back
    (and the first bad row when there is one).
    """
    scores = inputs.y_score
    if scores.ndim != 2:
        raise ValueError(
            "`y_score` needs to be of shape `(n_samples, n_classes)`, since `y_true` contains "
            f"{classes.size} classes {classes.tolist()}. Got `y_score.shape="
            f"{tuple(scores.shape)}`."
        )
    xp = inputs.backend.xp
    sums = scores.sum(axis=1, dtype=np.float64)  # widened in the reduction, no (N, K) copy
    rtol = max(_ROW_SUM_RTOL, scores.shape[1] * inputs.score_eps)
    i = _first_true(xp.abs(1 - sums) > _ROW_SUM_ATOL + rtol * xp.abs(sums), inputs.backend)
    if i is not None:
        raise ValueError(
            "Target scores need to be probabilities for multiclass roc_auc, i.e. they should "
            f"sum up to 1.0 over classes; row {i} of y_score sums to {sums[i].item()!r}"
        )


def check_multi_class(multi_class) -> MultiClass:
    if multi_class not in MULTI_CLASS_OPTIONS:
        raise ValueError(f"multi_class must be one of {MULTI_CLASS_OPTIONS}, got {multi_class!r}")
    return multi_class


def check_multiclass_roc_labels(labels, classes: np.ndarray, n_columns: int) -> np.ndarray:
    """scikit-learn's ``labels=`` of multiclass ROC AUC: the class of each score column.

    Without ``labels`` the columns are the classes present in ``y_true``, sorted.
    """
    if labels is None:
        if classes.size != n_columns:
            raise ValueError(
                f"Number of classes in y_true ({classes.size}: {classes.tolist()}) not equal to "
                f"the number of columns in 'y_score' ({n_columns})"
            )
        return classes
    array = check_multiclass_roc_labels_argument(labels, n_columns)
    missing = np.setdiff1d(classes, array)
    if missing.size:
        raise ValueError(
            f"'y_true' contains labels not in parameter 'labels': {missing.tolist()}"
        )
    return array


def check_multiclass_roc_labels_argument(labels, n_columns: int) -> np.ndarray:
    """The checks of :func:`check_multiclass_roc_labels` that read no data:
    distinct, ordered integer codes, one per score column."""
    array = np.asarray(labels)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array.reshape(-1)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"labels must be a non-empty 1-D list of class codes, got {labels!r}")
    if array.dtype.kind not in "iub":
        raise ValueError(f"labels must be integer class codes, got dtype {array.dtype}")
    array = array.astype(np.int64)
    if np.unique(array).size != array.size:
        raise ValueError(f"Parameter 'labels' must be unique, got {array.tolist()}")
    if np.any(np.diff(array) < 0):
        raise ValueError(f"Parameter 'labels' must be ordered, got {array.tolist()}")
    if array.size != n_columns:
        raise ValueError(
            f"Number of given labels, {array.size}, not equal to the number of columns in "
            f"'y_score', {n_columns}"
        )
    return array


def check_ranking_class_codes(inputs: RankingInputs, num_classes: int) -> None:
    """Labels must be class codes ``0..K-1`` of the ``K`` score columns."""
    _label_range(inputs.y_true, "y_true", inputs.backend, num_classes, None, targets=True)


def check_cost_matrix(cost_matrix, num_classes: int, backend=None) -> np.ndarray | None:
    """AUC-mu's misclassification costs: K x K, finite, 0 on the diagonal (CatBoost's rule).

    Returned on the host (K x K numbers; a device matrix is read back once). A
    string is CatBoost's ``misclass_cost_matrix``: the K * K entries, row by
    row, separated by ``/``.
    """
    if cost_matrix is None:
        return None
    if isinstance(cost_matrix, str):
        cost_matrix = _parse_cost_matrix(cost_matrix)
    if backend is not None and is_device_array(cost_matrix):
        cost_matrix = backend.to_host(backend.asarray(cost_matrix))
    try:
        matrix = np.asarray(cost_matrix, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"cost_matrix must be a K x K matrix of numbers, got {cost_matrix!r}") \
            from None
    if matrix.shape != (num_classes, num_classes):
        raise ValueError(
            f"cost_matrix must be {num_classes} x {num_classes} (one row and column per score "
            f"column), got shape {matrix.shape}"
        )
    bad = ~np.isfinite(matrix)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise ValueError(
            f"cost_matrix must be finite; found {matrix[row, col].item()!r} at row {row}, "
            f"column {col}"
        )
    diagonal = np.diagonal(matrix)
    if np.any(diagonal != 0):
        i = _first_index(diagonal != 0)
        raise ValueError(
            f"cost_matrix must be 0 on the diagonal (a correct prediction costs nothing); "
            f"found {diagonal[i].item()!r} at row {i}, column {i}"
        )
    return matrix


def check_per_class_scores(inputs: RankingInputs, classes: np.ndarray) -> None:
    """Multiclass average precision: one score column per class present in ``y_true``."""
    shape = tuple(inputs.y_score.shape)
    if shape != (inputs.y_true.shape[0], classes.size):
        raise ValueError(
            "`y_score` needs to be of shape `(n_samples, n_classes)`, since `y_true` contains "
            f"multiple classes ({classes.size}: {classes.tolist()}). Got `y_score.shape={shape}`."
        )


def check_auc_mu_scores(inputs: RankingInputs, name: str = "y_score") -> int:
    """AUC-mu ranks (N, K) per-class scores, K >= 2; returns K."""
    shape = tuple(inputs.y_score.shape)
    if len(shape) != 2 or shape[1] < 2:
        raise ValueError(f"{name} must be (N, K) per-class scores with K >= 2, got shape {shape}")
    return shape[1]


def check_some_weight(inputs: RankingInputs) -> None:
    """A ranked problem needs a sample of non-zero weight (one flag read back).

    Ranking inputs allow all-zero weights at first, because scikit-learn
    decides late: its weighted one-vs-rest average of no weight is 0, every
    other ranking metric of no weight raises."""
    weight = inputs.sample_weight
    if weight is not None and not bool(weight.any()):
        raise ValueError(ALL_ZERO_WEIGHT.format(n=weight.shape[0]))


def _parse_cost_matrix(text: str) -> np.ndarray:
    """CatBoost's ``M[0,0]/M[0,1]/.../M[K-1,K-1]`` as a K x K matrix."""
    try:
        values = [float(item) for item in text.split("/")]
    except ValueError:
        raise ValueError(
            f"misclass_cost_matrix must be numbers separated by '/', got {text!r}"
        ) from None
    size = math.isqrt(len(values))
    if size * size != len(values):
        raise ValueError(
            f"misclass_cost_matrix must hold K * K numbers (row by row), got {len(values)} "
            f"in {text!r}"
        )
    return np.array(values, dtype=np.float64).reshape(size, size)


def check_catboost_auc_type(auc_type) -> str:
    if auc_type not in ("Mu", "OneVsAll"):
        raise ValueError(f"auc_type must be 'Mu' or 'OneVsAll', got {auc_type!r}")
    return auc_type
