"""Score-based metrics: one fused read of ``(N, K)`` scores per call.

Every function here is the same pipeline: check the inputs
(:func:`check_score_inputs`), one pass of the backend's
``fused_logits_pass`` (kernels/scores.cu on a GPU, the chunked NumPy
reference on a CPU) giving weighted sums, then a formula of
:mod:`metrics_gpu._formulas.labels` over those sums. :func:`logits_report` asks the
one pass for everything at once.

Classes are the score columns ``0..K-1`` (or scikit-learn's ``labels=``, the
class codes of the columns in sorted order). Unlike scikit-learn, ``y_true``
need not contain every class: a validation batch rarely does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from metrics_gpu._formulas import labels as F
from metrics_gpu.backends.selection import on_caller_stream, resolve_backend
from metrics_gpu._common.docs import shared_parameters
from metrics_gpu._pipeline.mapping import MetricMapping, plain, strict_json, whole
from metrics_gpu._pipeline.mapping import descriptions as metric_descriptions
from metrics_gpu._pipeline.stages import one_pass, output
from metrics_gpu._formulas.state import ScoreSums
from metrics_gpu._common.types import ArrayLike, CalibrationNorm
from metrics_gpu._validation import (
    ScoreInputs,
    check_bins,
    check_bool,
    check_k,
    check_option,
    check_score_inputs,
    check_top_k,
    one_hot_target_codes,
    renamed_proba,
    score_dtype_eps,
    to_numpy,
)
from metrics_gpu.plot import plot_reliability

DEFAULT_TOP_K = (1, 5)
DEFAULT_BINS = 15


def _clip_eps(scores) -> float:
    """scikit-learn's clip for log loss: the eps of float16 and float32 scores,
    else of float64 (it computes on those two types as they are and on every
    other type as float64)."""
    return score_dtype_eps(scores.dtype)


def _score_pass(inputs: ScoreInputs, *, from_logits: bool, top_k=(), n_bins: int = 0,
                one_vs_all: bool = False, terms=None, deterministic: bool = False) -> ScoreSums:
    """The fused pass; ``terms`` names the per-row terms read (None: all), which
    the NumPy backend alone computes selectively."""
    return inputs.backend.fused_logits_pass(
        inputs.y_true, inputs.scores, sample_weight=inputs.sample_weight,
        ignore_index=inputs.ignore_index, from_logits=from_logits,
        clip_eps=_clip_eps(inputs.scores), top_k=top_k, n_bins=n_bins, one_vs_all=one_vs_all,
        terms=terms, deterministic=deterministic,
    )


@on_caller_stream
@shared_parameters
def log_loss(y_true: ArrayLike, y_proba: ArrayLike | None = None, *, normalize: bool = True,
             sample_weight: ArrayLike | None = None, labels: ArrayLike | None = None,
             from_logits: bool = False, ignore_index: int | None = None,
             validate: bool = True, y_pred: Any = "deprecated") -> Any:
    """Log loss (cross-entropy): the mean of ``-log p[i, y_true[i]]``.

    Probabilities are clipped to ``[eps, 1 - eps]`` with the eps of float16
    and float32 input (each its own) and of float64 otherwise, and rows that
    do not sum to 1 warn, as scikit-learn 1.9 does. Unlike scikit-learn,
    ``y_true`` need not hold every class.

    Parameters
    ----------
    y_true : array-like of shape (N,) or (N, K)
        Class codes: each row's score column (its position among ``labels``
        when given); or, as scikit-learn, a one-hot label indicator matrix
        (column k is class k; rows of several or no 1s are refused).
    y_proba : array-like of shape (N, K) or (N,)
        Probabilities, or (N,) probabilities of class 1 (binary); with
        ``from_logits=True``, raw logits (softmax taken in the pass, never
        materialised), or (N,) logits of class 1 against 0. Required (None
        raises a ``ValueError``).
    normalize : bool, default True
        The mean (True) or the weighted sum (False), as scikit-learn.
    sample_weight : array-like of shape (N,), optional
        Non-negative weight of each sample.
    labels : array-like of class codes, optional
        The class codes of the columns (scikit-learn's), default ``0..K-1``.
    from_logits : bool, default False
        The scores are logits.
    {ignore_index}
    validate : bool, default True
        Check ranges, finiteness and row sums (each a reduction on the device
        with a few numbers read back), and with ``from_logits=True`` warn when
        the scores look like probabilities; False checks nothing and does not warn.
    y_pred : array-like, deprecated
        scikit-learn's former name of ``y_proba`` (renamed in 1.9): accepted
        with its ``FutureWarning``; giving both is a ``ValueError``.

    Returns
    -------
    loss : float
        A ``numpy.float64`` for NumPy inputs; else a 0-d array of the
        input's framework, on its device.

    See Also
    --------
    logits_report : Cross-entropy and perplexity with every other score
        metric, from one read of the scores.
    brier_score_loss : The squared error of the same probabilities.
    expected_calibration_error : How far the confidences are from the
        accuracy.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import log_loss
    >>> round(float(log_loss(np.array([0, 1, 1]), np.array([[.9, .1], [.2, .8], [.3, .7]]))), 6)
    0.228393
    >>> round(float(log_loss(np.array([0, 1]), np.array([[2.0, 0.0], [0.0, 1.0]]),
    ...                      from_logits=True)), 6)
    0.220095
    """
    y_proba = renamed_proba(y_proba, y_pred)
    if y_proba is None:
        raise ValueError("y_proba is required: (N, K) probabilities or logits")
    y_true = one_hot_target_codes(y_true, y_proba, labels)
    from_logits = check_bool(from_logits, "from_logits")
    normalize = check_bool(normalize, "normalize")
    if from_logits and normalize and labels is None:
        value = _one_pass_score(y_true, y_proba, sample_weight, ignore_index, validate,
                                "cross_entropy", ())
        if value is not None:
            return value
    inputs = check_score_inputs(y_true, y_proba, name="y_proba",
                                kind="logits" if from_logits else "probabilities",
                                sample_weight=sample_weight, labels=labels,
                                ignore_index=ignore_index, validate=validate, takes_logits=True,
                                allow_all_zero_weight=False)
    sums = _score_pass(inputs, from_logits=from_logits, terms=("nll",))
    return output(F.log_loss(sums, normalize), inputs)


@on_caller_stream
@shared_parameters
def brier_score_loss(y_true: ArrayLike, y_proba: ArrayLike, *,
                     sample_weight: ArrayLike | None = None, pos_label: int | None = None,
                     labels: ArrayLike | None = None,
                     scale_by_half: Literal["auto"] | bool = "auto",
                     ignore_index: int | None = None, validate: bool = True) -> Any:
    """Brier score: the mean of ``sum_j (p[i, j] - [j == y_true[i]])**2``.

    As scikit-learn 1.9: (N, K) probabilities or (N,) probabilities of the
    positive class. Unlike scikit-learn, ``y_true`` need not hold every
    class.

    Parameters
    ----------
    y_true : array-like of shape (N,)
        Class codes: each row's score column (its position among ``labels``
        when given).
    y_proba : array-like of shape (N, K) or (N,)
        Probabilities, or (N,) probabilities of the positive class.
    sample_weight : array-like of shape (N,), optional
        Non-negative weight of each sample.
    pos_label : {0, 1}, optional
        Binary 1-D input: the class the column is for, 1 by default.
    labels : array-like of class codes, optional
        The class codes of the columns (scikit-learn's), default ``0..K-1``.
    scale_by_half : "auto" or bool, default "auto"
        Halve the sum; ``"auto"`` halves it for 1-D input and for K = 2
        (which makes the binary case the mean of ``(p - y)**2``).
    {ignore_index}
    validate : bool, default True
        Check ranges, finiteness and row sums (each a reduction on the device
        with a few numbers read back); False checks nothing.

    Returns
    -------
    score : float
        A ``numpy.float64`` for NumPy inputs; else a 0-d array of the
        input's framework, on its device.

    See Also
    --------
    log_loss : The cross-entropy of the same probabilities.
    logits_report : The Brier score (by the ``"auto"`` rule) with every other
        score metric, from one read of the scores.
    expected_calibration_error : Calibration over confidence bins.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import brier_score_loss
    >>> round(float(brier_score_loss(np.array([0, 1, 1]), np.array([0.1, 0.9, 0.6]))), 6)
    0.06
    """
    if scale_by_half != "auto":
        check_bool(scale_by_half, "scale_by_half")
    inputs = _brier_inputs(y_true, y_proba, sample_weight, pos_label, labels, ignore_index,
                           validate)
    sums = _score_pass(inputs, from_logits=False, terms=("brier",))
    return output(F.brier_score(sums, inputs.backend.xp, scale_by_half), inputs)


def _brier_inputs(y_true, y_proba, sample_weight, pos_label, labels, ignore_index,
                  validate) -> ScoreInputs:
    """The checked probabilities of the Brier score, class ``pos_label``'s
    column last for binary (N,) input."""
    if pos_label is not None and pos_label not in (0, 1):
        raise ValueError(f"pos_label must be 0 or 1 (class codes), got {pos_label!r}")
    inputs = check_score_inputs(y_true, y_proba, name="y_proba", kind="probabilities",
                                sample_weight=sample_weight, labels=labels,
                                ignore_index=ignore_index, validate=validate,
                                allow_all_zero_weight=False)
    if pos_label == 0 and inputs.binary_column:
        # The column is class 0's probability: swap the two columns.
        inputs = _swap_binary_columns(inputs)
    return inputs


def _swap_binary_columns(inputs: ScoreInputs) -> ScoreInputs:
    return replace(inputs, scores=inputs.scores[:, ::-1])


_D2_FEW_SAMPLES = "D^2 score is not well-defined with less than two samples."


def _few_samples(y_proba) -> bool:
    """scikit-learn's D^2 of fewer than two samples: NaN, with a warning."""
    shape = getattr(y_proba, "shape", None)
    shape = np.shape(y_proba) if shape is None else tuple(shape)
    if len(shape) >= 1 and shape[0] < 2:
        F.warn(_D2_FEW_SAMPLES, F.UndefinedMetricWarning)
        return True
    return False


def _class_weight(inputs: ScoreInputs):
    """The weight of each score column's class in ``y_true`` (a bincount where
    the targets live, no sync)."""
    xp = inputs.backend.xp
    weight = inputs.sample_weight
    return xp.bincount(inputs.y_true.astype(np.int64), minlength=int(inputs.scores.shape[1]),
                       weights=None if weight is None else weight.astype(np.float64)
                       ).astype(np.float64)


@on_caller_stream
def d2_log_loss_score(y_true: ArrayLike, y_proba: ArrayLike | None = None, *,
                      sample_weight: ArrayLike | None = None, labels: ArrayLike | None = None,
                      y_pred: Any = "deprecated") -> Any:
    """D^2 of the log loss: ``1 - log_loss / log_loss of the class prior``, as
    ``sklearn.metrics.d2_log_loss_score``.

    The baseline predicts for every sample the weighted class frequencies of
    ``y_true``. 1 is best; 0 is no better than the prior; it may be negative.
    Unlike scikit-learn, ``y_true`` need not hold every class (a class
    without weight adds nothing to the baseline; one class alone leaves the
    baseline about 0 and the score hugely negative).

    Parameters
    ----------
    y_true : array-like of shape (N,) or (N, K)
        Class codes (positions among ``labels`` when given), or one-hot rows
        as :func:`log_loss` reads them.
    y_proba : array-like of shape (N, K) or (N,)
        Probabilities, or (N,) probabilities of class 1 (binary).
    sample_weight : array-like of shape (N,), optional
        Non-negative weight of each sample.
    labels : array-like of class codes, optional
        The class codes of the columns (scikit-learn's), default ``0..K-1``.
    y_pred : array-like, deprecated
        scikit-learn's former name of ``y_proba``, with its ``FutureWarning``.

    Returns
    -------
    d2 : float
        A ``numpy.float64`` for NumPy inputs; else a 0-d array of the
        input's framework, on its device. NaN, with an
        ``UndefinedMetricWarning``, for fewer than two samples.

    See Also
    --------
    log_loss : The numerator.
    d2_brier_score : The same fraction for the Brier score.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import d2_log_loss_score
    >>> round(float(d2_log_loss_score(np.array([0, 1, 1]),
    ...                               np.array([[.9, .1], [.2, .8], [.3, .7]]))), 6)
    0.641182
    """
    y_proba = renamed_proba(y_proba, y_pred)
    if y_proba is None:
        raise ValueError("y_proba is required: (N, K) probabilities")
    if _few_samples(y_proba):
        return float("nan")
    y_true = one_hot_target_codes(y_true, y_proba, labels)
    inputs = check_score_inputs(y_true, y_proba, name="y_proba", kind="probabilities",
                                sample_weight=sample_weight, labels=labels,
                                allow_all_zero_weight=False)
    sums = _score_pass(inputs, from_logits=False, terms=("nll",))
    xp = inputs.backend.xp
    # scikit-learn clips the prior (float64 whatever the scores) at float64's eps.
    baseline = F.prior_log_loss(_class_weight(inputs), float(np.finfo(np.float64).eps), xp)
    return output(F.d2_score(F.log_loss(sums, normalize=False), baseline, xp), inputs)


@on_caller_stream
def d2_brier_score(y_true: ArrayLike, y_proba: ArrayLike, *,
                   sample_weight: ArrayLike | None = None, pos_label: int | None = None,
                   labels: ArrayLike | None = None) -> Any:
    """D^2 of the Brier score (the Brier skill score): ``1 - Brier / Brier of
    the class prior``, as ``sklearn.metrics.d2_brier_score``.

    The baseline predicts for every sample the weighted class frequencies of
    ``y_true``; the scale of the Brier score cancels in the ratio. Unlike
    scikit-learn, ``y_true`` need not hold every class; one class alone makes
    the baseline 0 and the score ``-inf`` (or NaN for a perfect prediction).

    Parameters
    ----------
    y_true : array-like of shape (N,)
        Class codes (positions among ``labels`` when given).
    y_proba : array-like of shape (N, K) or (N,)
        Probabilities, or (N,) probabilities of the positive class.
    sample_weight : array-like of shape (N,), optional
        Non-negative weight of each sample.
    pos_label : {0, 1}, optional
        Binary 1-D input: the class the column is for, 1 by default.
    labels : array-like of class codes, optional
        The class codes of the columns (scikit-learn's), default ``0..K-1``.

    Returns
    -------
    d2 : float
        A ``numpy.float64`` for NumPy inputs; else a 0-d array of the
        input's framework, on its device. NaN, with an
        ``UndefinedMetricWarning``, for fewer than two samples.

    See Also
    --------
    brier_score_loss : The numerator.
    d2_log_loss_score : The same fraction for the log loss.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import d2_brier_score
    >>> round(float(d2_brier_score(np.array([0, 1, 1, 0]), np.array([0.1, 0.9, 0.6, 0.3]))), 6)
    0.73
    """
    if _few_samples(y_proba):
        return float("nan")
    inputs = _brier_inputs(y_true, y_proba, sample_weight, pos_label, labels, None, True)
    sums = _score_pass(inputs, from_logits=False, terms=("brier",))
    xp = inputs.backend.xp
    baseline = F.prior_brier(_class_weight(inputs), xp)
    return output(F.d2_score(sums.slot("brier"), baseline, xp), inputs)


@on_caller_stream
@shared_parameters
def hinge_loss(y_true: ArrayLike, pred_decision: ArrayLike, *, labels: ArrayLike | None = None,
               sample_weight: ArrayLike | None = None, ignore_index: int | None = None,
               validate: bool = True) -> Any:
    """Average hinge loss; multiclass is Crammer-Singer, as scikit-learn.

    Per row ``max(0, 1 - (z[t] - max_{j != t} z[j]))`` over the decision
    values ``pred_decision`` (N, K); (N,) binary decision values ``d`` give
    ``max(0, 1 - y d)`` with ``y`` in {-1, +1}. Unlike scikit-learn,
    ``y_true`` need not hold every class (the columns are the classes); so
    binary ``y_true`` of class 1 only counts as +1 here, where scikit-learn's
    LabelBinarizer, fitted on that one class, makes it -1.

    Parameters
    ----------
    y_true : array-like of shape (N,)
        Class codes: each row's score column (its position among ``labels``
        when given).
    pred_decision : array-like of shape (N, K) or (N,)
        Decision values (any finite numbers), or (N,) binary decision values
        of class 1.
    labels : array-like of class codes, optional
        The class codes of the columns (scikit-learn's), default ``0..K-1``.
    sample_weight : array-like of shape (N,), optional
        Non-negative weight of each sample.
    {ignore_index}
    validate : bool, default True
        Check ranges and finiteness (each a reduction on the device with a
        few numbers read back); False skips those checks.

    Returns
    -------
    loss : float
        A ``numpy.float64`` for NumPy inputs; else a 0-d array of the
        input's framework, on its device.

    See Also
    --------
    logits_report : The hinge loss with every other score metric, from one
        read of the scores.
    log_loss : The cross-entropy of probabilities or logits.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import hinge_loss
    >>> round(float(hinge_loss(np.array([1, 0, 1]), np.array([2.0, -0.5, 0.3]))), 6)
    0.4
    """
    inputs = check_score_inputs(y_true, pred_decision, name="pred_decision", kind="decision",
                                sample_weight=sample_weight, labels=labels,
                                ignore_index=ignore_index, validate=validate,
                                allow_all_zero_weight=False)
    sums = _score_pass(inputs, from_logits=False, terms=("hinge",))
    return output(F.score_mean(sums, "hinge"), inputs)


@on_caller_stream
@shared_parameters
def top_k_accuracy_score(y_true: ArrayLike, y_score: ArrayLike, *, k: int = 2,
                         normalize: bool = True, sample_weight: ArrayLike | None = None,
                         labels: ArrayLike | None = None, ignore_index: int | None = None,
                         validate: bool = True) -> Any:
    """Share of rows whose true class is among the ``k`` highest scores.

    Ties as scikit-learn: among equal scores the higher class index ranks
    first. (N,) binary scores: with k = 1, class 1 when the score exceeds
    0.5 for scores in [0, 1], else 0 (scikit-learn's threshold); k >= 2 hits
    every row. ``k`` >= K warns (``UndefinedMetricWarning``: a perfect
    score), as scikit-learn.

    Parameters
    ----------
    y_true : array-like of shape (N,)
        Class codes: each row's score column (its position among ``labels``
        when given).
    y_score : array-like of shape (N, K) or (N,)
        Scores of any kind (probabilities, logits, decision values), or (N,)
        binary scores of class 1.
    k : int, default 2
        How many of the highest scores count as a hit.
    normalize : bool, default True
        The share of the weight that is a hit (True) or the hits' weight
        (False), as scikit-learn.
    sample_weight : array-like of shape (N,), optional
        Non-negative weight of each sample.
    labels : array-like of class codes, optional
        The class codes of the columns (scikit-learn's), default ``0..K-1``.
    {ignore_index}
    validate : bool, default True
        Check ranges and finiteness (each a reduction on the device with a
        few numbers read back); False skips those checks.

    Returns
    -------
    score : float
        A ``numpy.float64`` for NumPy inputs; else a 0-d array of the
        input's framework, on its device.

    See Also
    --------
    logits_report : Accuracy and several top-k accuracies at once, from one
        read of the scores.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import top_k_accuracy_score
    >>> scores = np.array([[0.5, 0.2, 0.2], [0.3, 0.4, 0.2], [0.2, 0.4, 0.3], [0.7, 0.2, 0.1]])
    >>> float(top_k_accuracy_score(np.array([0, 1, 2, 2]), scores, k=2))
    0.75
    """
    k = check_k(k)
    normalize = check_bool(normalize, "normalize")
    if normalize and labels is None and k < (getattr(y_score, "shape", None) or (0, 0))[-1]:
        value = _one_pass_score(y_true, y_score, sample_weight, ignore_index, validate,
                                len(F.STREAM_SCORE_SLOTS), (k,))
        if value is not None:
            return value
    threshold = None
    values = y_score
    if getattr(values, "ndim", np.ndim(values)) == 1:
        threshold = _binary_threshold(values)
    inputs = check_score_inputs(y_true, values, name="y_score", kind="decision",
                                sample_weight=sample_weight, labels=labels,
                                ignore_index=ignore_index, validate=validate,
                                binary_threshold=threshold,
                                # scikit-learn counts 0 hits of no weight; a share of it raises.
                                allow_all_zero_weight=not normalize)
    if k >= inputs.num_classes:
        F.warn(f"'k' ({k}) greater than or equal to 'n_classes' ({inputs.num_classes}) will "
               "result in a perfect score and is therefore meaningless.",
               F.UndefinedMetricWarning)
    sums = _score_pass(inputs, from_logits=False, top_k=(k,), terms=())
    return output(F.top_k_accuracy(sums, normalize)[0], inputs)


def _binary_threshold(scores):
    """scikit-learn's binary rule (class 1 when the score exceeds 0.5 for
    scores in [0, 1], else 0) as the score of a class-0 column: the next
    float above the threshold, since equal scores rank class 1 first."""
    backend = resolve_backend(scores)
    values = backend.asarray(scores)
    dtype = values.dtype if values.dtype.kind == "f" else np.dtype(np.float64)
    xp = backend.xp
    probabilities = bool(xp.greater_equal(values.min(), 0) & xp.less_equal(values.max(), 1))
    threshold = np.asarray(0.5 if probabilities else 0.0, dtype=dtype)
    return np.nextafter(threshold, np.asarray(np.inf, dtype=dtype))


@on_caller_stream
@shared_parameters
def expected_calibration_error(y_true: ArrayLike, y_proba: ArrayLike, *,
                               n_bins: int = DEFAULT_BINS,
                               norm: CalibrationNorm = "l1",
                               sample_weight: ArrayLike | None = None, from_logits: bool = False,
                               ignore_index: int | None = None, validate: bool = True,
                               deterministic: bool = False) -> Any:
    """Calibration error of the top-class probability over equal-width bins.

    Each row's confidence is its largest probability (softmax of logits with
    ``from_logits=True``) and it is correct when that class (the lowest index
    on ties) is the target. Bin b holds confidences in ``[b/B, (b+1)/B)``
    (1.0 in the last). (N,) binary probabilities are read as ``[1 - p, p]``
    (top-class confidence, unlike torchmetrics' binary variant, which bins p
    itself).

    Parameters
    ----------
    y_true : array-like of shape (N,)
        Class codes: each row's score column.
    y_proba : array-like of shape (N, K) or (N,)
        Probabilities (logits with ``from_logits=True``), or (N,)
        probabilities of class 1.
    n_bins : int, default 15
        B, the number of equal-width confidence bins.
    norm : {"l1", "l2", "max"}, default "l1"
        ``"l1"`` is the expected calibration error
        ``sum_b prop_b |acc_b - conf_b|``, ``"l2"`` its root-mean-square
        form and ``"max"`` the maximum calibration error over non-empty bins,
        as torchmetrics' ``MulticlassCalibrationError`` defines them.
    sample_weight : array-like of shape (N,), optional
        Non-negative weight of each sample.
    from_logits : bool, default False
        The scores are logits (softmax taken in the pass).
    {ignore_index}
    validate : bool, default True
        Check ranges, finiteness and row sums (each a reduction on the device
        with a few numbers read back), and with ``from_logits=True`` warn when
        the scores look like probabilities; False skips those checks and does
        not warn.
    deterministic : bool, default False
        On a GPU the bins of unweighted rows are summed in 64-bit fixed point,
        bit-identical run to run; ``deterministic=True`` does the same for
        weighted rows (each row's weighted terms off by at most
        ``max|w| * N * 2**-61``), else their last bits may vary run to run.

    Returns
    -------
    error : float
        A ``numpy.float64`` for NumPy inputs; else a 0-d array of the
        input's framework, on its device.

    See Also
    --------
    logits_report : The expected and maximum calibration errors and the bins
        themselves, with every other score metric, from one read.
    brier_score_loss : A calibration-sensitive proper score.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import expected_calibration_error
    >>> p = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])
    >>> round(float(expected_calibration_error(np.array([0, 1, 1, 1]), p, n_bins=5)), 6)
    0.35
    """
    n_bins = check_bins(n_bins)
    check_option(norm, F.CALIBRATION_NORMS, "norm")
    from_logits = check_bool(from_logits, "from_logits")
    deterministic = check_bool(deterministic, "deterministic")
    inputs = check_score_inputs(y_true, y_proba, name="y_proba",
                                kind="logits" if from_logits else "probabilities",
                                sample_weight=sample_weight, ignore_index=ignore_index,
                                validate=validate, takes_logits=True,
                                allow_all_zero_weight=False)
    sums = _score_pass(inputs, from_logits=from_logits, n_bins=n_bins, terms=(),
                       deterministic=deterministic)
    return output(F.calibration_error(sums, norm, inputs.backend.xp), inputs)


@dataclass(frozen=True, repr=False)
class LogitsReport(MetricMapping):
    """Every score metric of one read of the logits (see :func:`logits_report`).

    Scalars and arrays live where the inputs live (NumPy, CuPy, torch).

    A read-only :class:`collections.abc.Mapping` of the scalar metrics:
    ``report["cross_entropy"]``, ``keys()`` (``accuracy``,
    ``top_{k}_accuracy`` for each ``k``, ``cross_entropy``, ``perplexity``,
    ``brier_score``, ``hinge_loss``, ``expected_calibration_error``,
    ``max_calibration_error``: the names of
    :class:`metrics_gpu.StreamingReport`), ``items()``, ``values()``, with the
    attributes' values (nothing read back). As in every report type, the
    entries are the scalar metrics only; the calibration bins and the counts
    are attributes, and :meth:`to_dict` holds everything as Python numbers.
    The repr reads its few values back from a GPU.

    Attributes
    ----------
    accuracy : float
        Weighted share of rows whose top class (the lowest index on ties) is
        the target.
    top_k_accuracy : dict of int to float
        Top-k accuracy for each ``k`` of ``top_k`` below K (a k >= K would
        be 1 whatever the scores: left out).
    cross_entropy : float
        Mean ``-log p[i, y_true[i]]`` (:func:`log_loss`).
    perplexity : float
        ``exp(cross_entropy)``.
    brier_score : float
        Mean ``sum_j (p[i, j] - [j == y_true[i]])**2``, halved for K = 2
        (scikit-learn's ``scale_by_half="auto"``: the mean of ``(p - y)**2``,
        :func:`brier_score_loss`'s default).
    hinge_loss : float
        Crammer-Singer hinge loss of the scores as given, logits or
        probabilities (:func:`hinge_loss`).
    expected_calibration_error : float
        :func:`expected_calibration_error` with ``norm="l1"``.
    max_calibration_error : float
        :func:`expected_calibration_error` with ``norm="max"``.
    calibration_proportion : array of shape (n_bins,)
        Share of the weight in each confidence bin.
    calibration_confidence : array of shape (n_bins,)
        Mean top-class probability per bin (NaN for an empty bin).
    calibration_accuracy : array of shape (n_bins,)
        Accuracy per bin (NaN for an empty bin).
    total_weight : float
        Weight of the rows counted (their number without weights).
    n_invalid : int
        Rows left out as invalid (``validate=False`` only: a target out of
        range, a NaN or an infinity in the scores).
    """

    accuracy: Any
    top_k_accuracy: dict[int, Any]
    cross_entropy: Any
    perplexity: Any
    brier_score: Any
    hinge_loss: Any
    expected_calibration_error: Any
    max_calibration_error: Any
    calibration_proportion: Any
    calibration_confidence: Any
    calibration_accuracy: Any
    total_weight: Any
    n_invalid: Any

    def _metric_names(self) -> tuple[str, ...]:
        return ("accuracy", *(f"top_{k}_accuracy" for k in self.top_k_accuracy),
                *_LOGITS_METRICS)

    def _metric_value(self, name: str) -> Any:
        if name.startswith("top_") and name != "top_k_accuracy":
            return self.top_k_accuracy[int(name[len("top_"):-len("_accuracy")])]
        return getattr(self, name)

    def _headline(self) -> list[tuple[str, Any]]:
        return [("total_weight", whole(self.total_weight))]

    def to_dict(self, descriptions: bool = False) -> dict[str, Any]:
        """Every value as plain Python numbers (one read-back from a GPU), laid
        out as :meth:`metrics_gpu.StreamingReport.to_dict`: ``total`` (the
        total weight), ``invalid``, ``metrics`` (the entries),
        ``calibration`` (``proportion``, ``confidence``, ``accuracy`` per bin).
        NaN and infinities are ``None`` (strict JSON). ``descriptions=True``
        adds each metric name's one-line meaning."""
        out = {"total": whole(plain(self.total_weight)), "invalid": plain(self.n_invalid),
               "metrics": plain(dict(self.items())),
               "calibration": plain({"proportion": self.calibration_proportion,
                                     "confidence": self.calibration_confidence,
                                     "accuracy": self.calibration_accuracy})}
        if descriptions:
            out["descriptions"] = metric_descriptions(self)
        return out

    def to_json(self, descriptions: bool = True, **kwargs: Any) -> str:
        """:meth:`to_dict` as strict JSON text, with the descriptions by default
        (``kwargs`` go to :func:`json.dumps`): NaN and infinities are ``null``."""
        return strict_json(self.to_dict(descriptions=descriptions), **kwargs)

    def plot_reliability(self, ax: Any = None, **kwargs: Any) -> Any:
        """Draw the reliability diagram of the calibration bins, with the
        expected calibration error (:func:`metrics_gpu.plot.plot_reliability`,
        the ``[plot]`` extra; ``kwargs`` go to it). Returns the matplotlib Axes."""
        kwargs.setdefault("expected_calibration_error",
                          float(to_numpy(self.expected_calibration_error)))
        return plot_reliability(to_numpy(self.calibration_proportion),
                                to_numpy(self.calibration_confidence),
                                to_numpy(self.calibration_accuracy), ax=ax, **kwargs)


_LOGITS_METRICS = ("cross_entropy", "perplexity", "brier_score", "hinge_loss",
                   "expected_calibration_error", "max_calibration_error")


@on_caller_stream
@shared_parameters
def logits_report(y_true: ArrayLike, scores: ArrayLike, *, from_logits: bool = True,
                  top_k: int | Iterable[int] = DEFAULT_TOP_K, n_bins: int = DEFAULT_BINS,
                  sample_weight: ArrayLike | None = None, ignore_index: int | None = None,
                  validate: bool = True, deterministic: bool = False) -> LogitsReport:
    """Every score metric of ``(N, K)`` logits or probabilities, from one read.

    Accuracy, top-k accuracy, cross-entropy, perplexity, Brier score, hinge
    loss and calibration: what a validation step wants of a classifier's
    outputs, without the softmax, argmax, top-k and binning passes (and their
    ``(N, K)`` temporaries) that computing them one by one costs. No host
    sync on a GPU with ``validate=False``. Every value is bit-identical run
    to run, except the calibration bins of weighted rows without
    ``deterministic=True`` (see :func:`expected_calibration_error`).

    Parameters
    ----------
    y_true : array-like of shape (N,)
        Class codes: each row's score column.
    scores : array-like of shape (N, K) or (N,)
        Logits (``from_logits=True``) or probabilities, or (N,) scores of
        class 1.
    from_logits : bool, default True
        The scores are logits (softmax taken in the pass, never
        materialised); False: probabilities.
    top_k : int or iterable of int, default (1, 5)
        The ``k`` of the top-k accuracies (those >= K are left out: 1 by
        construction).
    n_bins : int, default 15
        The number of equal-width calibration bins.
    sample_weight : array-like of shape (N,), optional
        Non-negative weight of each sample.
    {ignore_index}
    validate : bool, default True
        Check ranges, finiteness and row sums (each a reduction on the device
        with a few numbers read back), and with ``from_logits=True`` warn
        when the scores look like probabilities (at least 99% of the rows in
        [0, 1] summing to 1, or every (N,) score in [0, 1]: pass
        ``from_logits=False`` for probabilities). False skips those checks and
        reads nothing back, so it does not warn: rows whose target is out of
        range or whose scores hold a NaN or an infinity are then left out and
        counted in ``n_invalid``.
    deterministic : bool, default False
        Sum the calibration bins of weighted rows in 64-bit fixed point on a
        GPU, bit-identical run to run (see
        :func:`expected_calibration_error`).

    Returns
    -------
    LogitsReport
        Its values live where the inputs live (NumPy, CuPy, torch).

    See Also
    --------
    log_loss, brier_score_loss, hinge_loss, top_k_accuracy_score,
    expected_calibration_error : The same metrics one at a time.
    label_report : Every label metric, from one pass over labels or scores.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import logits_report
    >>> logits = np.array([[2.0, 0.5, 0.1], [0.2, 0.1, 1.5], [0.3, 2.2, 0.0], [1.0, 1.1, 0.9]])
    >>> report = logits_report(np.array([0, 2, 1, 0]), logits, top_k=(1, 2), n_bins=5)
    >>> float(report.accuracy), float(report.top_k_accuracy[2])
    (0.75, 1.0)
    """
    top_k = check_top_k(top_k)
    n_bins = check_bins(n_bins)
    from_logits = check_bool(from_logits, "from_logits")
    deterministic = check_bool(deterministic, "deterministic")
    passed = one_pass(y_true, scores, kind="scores", sample_weight=sample_weight,
                      ignore_index=ignore_index, validate=validate, deterministic=deterministic,
                      top_k=top_k, n_bins=n_bins, from_logits=from_logits, pred_name="scores")
    if passed is not None:
        return _one_pass_logits_report(passed, top_k, n_bins, int(scores.shape[1]))
    inputs = check_score_inputs(y_true, scores, name="scores",
                                kind="logits" if from_logits else "probabilities",
                                sample_weight=sample_weight, ignore_index=ignore_index,
                                validate=validate, takes_logits=True)
    sums = _score_pass(inputs, from_logits=from_logits, top_k=top_k, n_bins=n_bins,
                       deterministic=deterministic)
    xp = inputs.backend.xp
    hits = F.top_k_accuracy(sums)
    proportion, confidence, accuracy = F.calibration_bins(sums, xp)

    def out(value):
        return output(value, inputs)

    shown = F.reported_top_k(top_k, inputs.num_classes)
    return LogitsReport(
        accuracy=out(F.score_mean(sums, "correct")),
        top_k_accuracy={k: out(hits[i]) for i, k in enumerate(top_k) if k in shown},
        cross_entropy=out(F.log_loss(sums)),
        perplexity=out(F.perplexity(sums, xp)),
        brier_score=out(F.brier_score(sums, xp)),
        hinge_loss=out(F.score_mean(sums, "hinge")),
        expected_calibration_error=out(F.calibration_error(sums, "l1", xp)),
        max_calibration_error=out(F.calibration_error(sums, "max", xp)),
        calibration_proportion=out(proportion),
        calibration_confidence=out(confidence),
        calibration_accuracy=out(accuracy),
        total_weight=out(sums.slot("weight")),
        n_invalid=inputs.backend.to_framework(  # a count: int64 (output() gives floats)
            xp.asarray(sums.slot("invalid")).astype(np.int64)[()], inputs.source),
    )


def _one_pass_score(y_true, scores, sample_weight, ignore_index, validate, slot,
                    top_k: tuple) -> Any:
    """A score metric (``slot``: a name of :data:`metrics_gpu._formulas.labels.STREAM_SCORE_SLOTS`
    or a position in the score values) of a ``validate=False`` call on
    ``(N, K)`` logits: the streaming state's one pass (an update and a compute
    launch, nothing read back; a layout's later calls issue its launch plan).
    Rows a check would refuse (targets out of range, non-finite scores) are
    left out. None where the call needs its own pass."""
    if validate is not False:
        return None
    passed = one_pass(y_true, scores, kind="scores", sample_weight=sample_weight,
                      ignore_index=ignore_index, validate=False, top_k=top_k,
                      pred_name="scores")
    if passed is None:
        return None
    values, _ = passed.results(labels=False)
    return values[F.STREAM_SLOT[slot] if isinstance(slot, str) else slot]


def _one_pass_logits_report(passed, top_k, n_bins, num_classes: int) -> LogitsReport:
    """The report from a one-pass streaming state of ``num_classes`` classes (two
    launches on a GPU, no sync): its fields are views of the score values, in
    the inputs' framework."""
    values, n_invalid = passed.results(labels=False)
    slot = F.STREAM_SLOT
    head = len(F.STREAM_SCORE_SLOTS)
    bins = head + len(top_k)
    shown = F.reported_top_k(top_k, num_classes)
    return LogitsReport(
        accuracy=values[slot["accuracy"]],
        top_k_accuracy={k: values[head + i] for i, k in enumerate(top_k) if k in shown},
        cross_entropy=values[slot["cross_entropy"]],
        perplexity=values[slot["perplexity"]],
        brier_score=values[slot["brier_score"]],
        hinge_loss=values[slot["hinge_loss"]],
        expected_calibration_error=values[slot["expected_calibration_error"]],
        max_calibration_error=values[slot["max_calibration_error"]],
        calibration_proportion=values[bins:bins + n_bins],
        calibration_confidence=values[bins + n_bins:bins + 2 * n_bins],
        calibration_accuracy=values[bins + 2 * n_bins:bins + 3 * n_bins],
        total_weight=values[slot["total_weight"]],
        n_invalid=n_invalid,
    )


__all__ = [
    "LogitsReport", "brier_score_loss", "expected_calibration_error", "hinge_loss", "log_loss",
    "logits_report", "top_k_accuracy_score",
]
