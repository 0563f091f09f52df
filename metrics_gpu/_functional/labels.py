"""scikit-learn-compatible functional API over label-coded predictions.

This module holds the counting metrics (accuracy, zero-one and Hamming loss,
balanced accuracy, MCC, Cohen's kappa) and ``classification_report``; the
confusion matrices are in :mod:`metrics_gpu._functional.confusion`, the set-wise
rates (precision, recall, F, Jaccard, specificity) in
:mod:`metrics_gpu._functional.rates`. What follows holds for all three.

Each public function is a short pipeline of the stages of
:mod:`metrics_gpu._pipeline.stages`::

    check (metrics_gpu._validation) -> accumulate (a backend, once)
    -> select classes -> formulas (metrics_gpu._formulas.labels) -> output

Class selection follows scikit-learn: ``labels=`` if given, else all
``num_classes`` classes if that is given (or implied by ``(N, K)`` scores),
else the classes present in ``y_true`` or ``y_pred``.

Beyond scikit-learn's arguments every function takes ``num_classes``,
``ignore_index``, ``validate`` and ``deterministic`` (their text is written
once, in :mod:`metrics_gpu._common.docs`); with ``sample_weight`` they reach the
data pass together, as one :class:`_PassOptions`.

On the cuda and emulated backends the scalar label metrics (accuracy,
zero-one and Hamming loss, balanced accuracy, MCC, kappa without
``labels=``, and micro/macro/weighted precision, recall and F1 with
``zero_division`` 0 or 'warn') are read from the one-launch reduction of
``kernels/reduce_metrics.cu`` and returned on the device; scikit-learn's
warnings (balanced accuracy, undefined kappa, ``zero_division='warn'``) read
a few counts back to decide. The other options evaluate their formulas on the
host from O(K) statistics (one copy) and return the result on the input's
device; ``confusion_matrix`` stays on the device throughout.

With ``validate=False`` and K known without reading the data, the scalar
label metrics (and kappa without ``labels`` whose undefined value is NaN)
take the streaming state's one pass instead (:func:`_one_pass_values`): an
update and a reduction launch, nothing read back, and from the second call
of an input layout its launch plan (:mod:`metrics_gpu._pipeline.planned`).

Return types are ``Any`` where a result lives where the inputs live: a NumPy
``float64`` (or array) for NumPy arrays and sequences, a 0-d (or 1-d) array
or tensor of the inputs' framework (CuPy, torch, JAX) on their device
otherwise (docs/gpu.md, "Backends").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from metrics_gpu._formulas import labels as F
from metrics_gpu._functional.confusion import (
    CallerPlacement,
    confusion_matrix,
    _any_true_in,
    _multilabel_columns,
    _PassOptions,
    _selected_classes,
)
from metrics_gpu._functional.rates import (
    _multilabel_host_counts,
    _multilabel_prfs,
    _one_pass_values,
    _prfs,
)
from metrics_gpu._multilabel import counts as ML
from metrics_gpu.backends.selection import on_caller_stream
from metrics_gpu._common.docs import shared_parameters
from metrics_gpu._pipeline.stages import (
    accumulate,
    class_positions,
    evaluate,
    host_counts,
    output,
    reduces_on_device,
)
from metrics_gpu._formulas.state import ClassStatistics, statistics_from_matrix, use_dense_matrix
from metrics_gpu._common.types import ArrayLike, KappaWeights, ZeroDivision
from metrics_gpu._validation import (
    check_score_kind,
    KAPPA_WEIGHTS,
    LabelInputs,
    check_class_weight,
    check_option,
    check_likelihood_replacement,
    check_zero_division,
    to_numpy,
    refuse_multilabel,
)


# -- counting metrics ---------------------------------------------------------


def _one_pass_slot(y_true, y_pred, sample_weight, num_classes, ignore_index, deterministic,
                   slot: str) -> Any:
    """One slot of :func:`_one_pass_values`, or None."""
    values = _one_pass_values(y_true, y_pred, None, sample_weight=sample_weight,
                              num_classes=num_classes, ignore_index=ignore_index,
                              deterministic=deterministic)
    return None if values is None else values[F.SLOT[slot]]


def _prediction_tally(y_true: ArrayLike, y_pred: ArrayLike, options: _PassOptions, *,
                      correct: bool, normalize: bool) -> Any:
    """The pipeline of accuracy (``correct``) and of the zero-one loss (not
    ``correct``): the fraction of correct (wrong) predictions, or with
    ``normalize=False`` their number or weight."""
    inputs, _ = options.check(y_true, y_pred)
    if reduces_on_device(inputs):
        evaluation = evaluate(inputs, moments=False)
        if normalize:
            value = evaluation.slot("accuracy" if correct else "zero_one_loss")
        elif correct:
            value = evaluation.slot("correct")
        else:
            value = evaluation.slot("total") - evaluation.slot("correct")
        return output(value, inputs)
    c = host_counts(inputs)
    if normalize:
        return output(F.accuracy(c) if correct else 1 - F.accuracy(c), inputs)
    return output(c.tp.sum() if correct else F.misclassified(c), inputs)


@on_caller_stream
@shared_parameters
def accuracy_score(y_true: ArrayLike, y_pred: ArrayLike, *, normalize: bool = True,
                   sample_weight: ArrayLike | None = None, num_classes: int | None = None,
                   ignore_index: int | None = None, validate: bool = True,
                   deterministic: bool = False,
                   scores: str | None = None, threshold: float = 0.5) -> Any:
    """Fraction (``normalize=False``: number or weight) of correct predictions.

    Parameters
    ----------
    {y_true_multilabel}
    {y_pred_multilabel}
    normalize : bool, default True
        True: the fraction of correct predictions; False: their number (their
        summed weight with ``sample_weight``).
    {sample_weight}
    {num_classes}
    {ignore_index}
    {validate}
    {deterministic}
    {multilabel_scores}

    Returns
    -------
    score : float
        A NumPy float64, or for torch, CuPy or JAX inputs a 0-d tensor or
        array of theirs on their device.

    See Also
    --------
    zero_one_loss : The fraction of wrong predictions.
    balanced_accuracy_score : The mean recall over the classes.
    label_report : Every label metric from one pass.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import accuracy_score
    >>> float(accuracy_score(np.array([0, 1, 2, 3]), np.array([0, 2, 1, 3])))
    0.5

    Multilabel indicators (one 0/1 column per label) score subset accuracy:
    a sample counts only when all its labels are right.

    >>> float(accuracy_score(np.array([[0, 1, 1], [1, 0, 1]]), np.array([[0, 1, 1], [1, 1, 1]])))
    0.5
    """
    options = _PassOptions(num_classes, sample_weight, ignore_index, validate, deterministic,
                           check_score_kind(scores, threshold, allow_none=True))
    multilabel = options.multilabel(y_true, y_pred)
    if multilabel is not None:  # subset accuracy
        counts = ML.counts_of(multilabel)
        return output(ML.exact_matches(counts, normalize=normalize), multilabel)
    slot = "accuracy" if normalize else "correct"
    if validate is False:
        value = _one_pass_slot(y_true, y_pred, sample_weight, num_classes, ignore_index,
                               deterministic, slot)
        if value is not None:
            return value
    return _prediction_tally(y_true, y_pred, options, correct=True, normalize=normalize)


@on_caller_stream
@shared_parameters
def zero_one_loss(y_true: ArrayLike, y_pred: ArrayLike, *, normalize: bool = True,
                  sample_weight: ArrayLike | None = None, num_classes: int | None = None,
                  ignore_index: int | None = None, validate: bool = True,
                  deterministic: bool = False,
                  scores: str | None = None, threshold: float = 0.5) -> Any:
    """Fraction (``normalize=False``: number or weight) of wrong predictions.

    Parameters
    ----------
    {y_true_multilabel}
    {y_pred_multilabel}
    normalize : bool, default True
        True: the fraction of wrong predictions; False: their number (their
        summed weight with ``sample_weight``).
    {sample_weight}
    {num_classes}
    {ignore_index}
    {validate}
    {deterministic}
    {multilabel_scores}

    Returns
    -------
    loss : float
        A NumPy float64, or for torch, CuPy or JAX inputs a 0-d tensor or
        array of theirs on their device.

    See Also
    --------
    accuracy_score : The fraction of correct predictions.
    hamming_loss : The same for single-label data.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import zero_one_loss
    >>> float(zero_one_loss(np.array([1, 2, 3, 4]), np.array([2, 2, 3, 4])))
    0.25
    """
    options = _PassOptions(num_classes, sample_weight, ignore_index, validate, deterministic,
                           check_score_kind(scores, threshold, allow_none=True))
    multilabel = options.multilabel(y_true, y_pred)
    if multilabel is not None:  # samples with a wrong label
        counts = ML.counts_of(multilabel)
        return output(ML.exact_mismatches(counts, normalize=normalize), multilabel)
    if validate is False:
        value = _one_pass_slot(y_true, y_pred, sample_weight, num_classes, ignore_index,
                               deterministic, "zero_one_loss" if normalize else "misclassified")
        if value is not None:
            return value
    return _prediction_tally(y_true, y_pred, options, correct=False, normalize=normalize)


@on_caller_stream
@shared_parameters
def hamming_loss(y_true: ArrayLike, y_pred: ArrayLike, *, sample_weight: ArrayLike | None = None,
                 num_classes: int | None = None, ignore_index: int | None = None,
                 validate: bool = True, deterministic: bool = False,
                 scores: str | None = None, threshold: float = 0.5) -> Any:
    """Fraction of wrongly predicted labels (= zero-one loss for single-label data).

    Parameters
    ----------
    {y_true_multilabel}
    {y_pred_multilabel}
    {sample_weight}
    {num_classes}
    {ignore_index}
    {validate}
    {deterministic}
    {multilabel_scores}

    Returns
    -------
    loss : float
        A NumPy float64, or for torch, CuPy or JAX inputs a 0-d tensor or
        array of theirs on their device.

    See Also
    --------
    zero_one_loss : The same value (and the count, ``normalize=False``).
    accuracy_score : The fraction of correct predictions.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import hamming_loss
    >>> float(hamming_loss(np.array([1, 2, 3, 4]), np.array([2, 2, 3, 4])))
    0.25
    """
    options = _PassOptions(num_classes, sample_weight, ignore_index, validate, deterministic,
                           check_score_kind(scores, threshold, allow_none=True))
    multilabel = options.multilabel(y_true, y_pred)
    if multilabel is not None:  # wrong labels over all N x L
        return output(ML.hamming_loss(ML.counts_of(multilabel)), multilabel)
    if validate is False:
        value = _one_pass_slot(y_true, y_pred, sample_weight, num_classes, ignore_index,
                               deterministic, "hamming_loss")
        if value is not None:
            return value
    return _prediction_tally(y_true, y_pred, options, correct=False, normalize=True)


@on_caller_stream
@shared_parameters
def balanced_accuracy_score(y_true: ArrayLike, y_pred: ArrayLike, *,
                            sample_weight: ArrayLike | None = None, adjusted: bool = False,
                            num_classes: int | None = None, ignore_index: int | None = None,
                            validate: bool = True, deterministic: bool = False) -> Any:
    """Mean recall over the classes that occur in ``y_true`` (scikit-learn).

    Classes predicted but absent from ``y_true`` are left out with a warning,
    as scikit-learn does.

    Parameters
    ----------
    {y_true_labels}
    {y_pred_labels}
    {sample_weight}
    adjusted : bool, default False
        True maps chance to 0: (score - 1/K') / (1 - 1/K'), K' the number of
        classes that occur in ``y_true``; a perfect score stays 1.
    {num_classes}
    {ignore_index}
    {validate}
    {deterministic}

    Returns
    -------
    score : float
        A NumPy float64, or for torch, CuPy or JAX inputs a 0-d tensor or
        array of theirs on their device.

    See Also
    --------
    balanced_accuracy_weighted : The weighted mean of per-class recall.
    recall_score : Per-class recall.
    accuracy_score : The fraction of correct predictions.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import balanced_accuracy_score
    >>> float(balanced_accuracy_score(np.array([0, 1, 0, 0, 1, 0]), np.array([0, 1, 0, 0, 0, 1])))
    0.625
    """
    refuse_multilabel(y_true, y_pred, "balanced_accuracy_score",
                      "score each label's column, e.g. balanced_accuracy_score(y_true[:, j], "
                      "y_pred[:, j]), or use recall_score(..., average='macro')",
                      num_classes=num_classes, validate=validate, ignore_index=ignore_index)
    if validate is False and not adjusted:
        value = _one_pass_slot(y_true, y_pred, sample_weight, num_classes, ignore_index,
                               deterministic, "balanced_accuracy")
        if value is not None:
            return value
    options = _PassOptions(num_classes, sample_weight, ignore_index, validate, deterministic)
    inputs, _ = options.check(y_true, y_pred)
    if reduces_on_device(inputs):
        evaluation = evaluate(inputs, moments=False)
        stats = evaluation.stats
        score = evaluation.slot("balanced_accuracy")
        if adjusted:
            score = F.adjust_for_chance(score, evaluation.slot("supported_classes"),
                                        inputs.backend.xp)
    else:
        stats, _ = accumulate(inputs)
        score = F.balanced_accuracy(F.Counts.from_statistics(stats, np), adjusted=adjusted)
    # scikit-learn's warning; on a device this reads one flag back. xp.equal,
    # not `== 0`: CuPy sends an array and a scalar through NumPy's ufunc, whose
    # first use imports cupyx and scipy (metrics_gpu/backends/launchers/base.py).
    if bool((stats.observed & inputs.backend.xp.equal(stats.support, 0)).any()):
        F.warn("y_pred contains classes not in y_true", UserWarning)
    return output(score, inputs)


@on_caller_stream
@shared_parameters
def balanced_accuracy_weighted(y_true: ArrayLike, y_pred: ArrayLike, *,
                               class_weight: ArrayLike | None = None,
                               sample_weight: ArrayLike | None = None,
                               num_classes: int | None = None, ignore_index: int | None = None,
                               validate: bool = True, deterministic: bool = False) -> Any:
    """Weighted mean of per-class recall: sum_k w_k recall_k / sum_k w_k.

    The overview paper's "balanced accuracy weighted". Its printed formula is
    ambiguous in the sources we have (it divides by w_k while its prose
    multiplies), so we fix this reading: user ``class_weight`` or, by
    default, each class's frequency in ``y_true``, which makes the value
    equal to accuracy. Classes without support have no recall and are left
    out.

    Parameters
    ----------
    {y_true_labels}
    {y_pred_labels}
    class_weight : array-like of shape (K,), optional
        One non-negative weight w_k per class code, K = ``num_classes`` (or
        the largest code + 1 when omitted). Default: each class's frequency
        in ``y_true``.
    {sample_weight}
    {num_classes}
    {ignore_index}
    {validate}
    {deterministic}

    Returns
    -------
    score : float
        A NumPy float64, or for torch, CuPy or JAX inputs a 0-d tensor or
        array of theirs on their device.

    See Also
    --------
    balanced_accuracy_score : The unweighted mean of per-class recall.
    recall_score : Per-class recall.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import balanced_accuracy_weighted
    >>> y_true, y_pred = np.array([0, 0, 0, 1]), np.array([0, 0, 1, 1])
    >>> float(balanced_accuracy_weighted(y_true, y_pred))  # = accuracy
    0.75
    >>> float(balanced_accuracy_weighted(y_true, y_pred, class_weight=[1.0, 1.0]))
    0.8333333333333333
    """
    refuse_multilabel(y_true, y_pred, "balanced_accuracy_weighted",
                      "score each label's column, e.g. balanced_accuracy_weighted(y_true[:, j], "
                      "y_pred[:, j])",
                      num_classes=num_classes, validate=validate, ignore_index=ignore_index)
    options = _PassOptions(num_classes, sample_weight, ignore_index, validate, deterministic)
    inputs, _ = options.check(y_true, y_pred)
    c = host_counts(inputs)
    weights = check_class_weight(class_weight, inputs.num_classes)
    return output(F.weighted_recall_average(c, weights), inputs)


@on_caller_stream
@shared_parameters
def matthews_corrcoef(y_true: ArrayLike, y_pred: ArrayLike, *,
                      sample_weight: ArrayLike | None = None, num_classes: int | None = None,
                      ignore_index: int | None = None, validate: bool = True,
                      deterministic: bool = False) -> Any:
    """Multiclass Matthews correlation coefficient; 0.0 when undefined (scikit-learn).

    Parameters
    ----------
    {y_true_labels}
    {y_pred_labels}
    {sample_weight}
    {num_classes}
    {ignore_index}
    {validate}
    {deterministic}

    Returns
    -------
    mcc : float
        In [-1, 1]: a NumPy float64, or for torch, CuPy or JAX inputs a 0-d
        tensor or array of theirs on their device.

    See Also
    --------
    cohen_kappa_score : Agreement corrected for chance.
    label_report : Every label metric from one pass.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import matthews_corrcoef
    >>> round(float(matthews_corrcoef(np.array([1, 1, 1, 0]), np.array([1, 0, 1, 1]))), 4)
    -0.3333
    """
    refuse_multilabel(y_true, y_pred, "matthews_corrcoef",
                      "score each label's column, e.g. matthews_corrcoef(y_true[:, j], "
                      "y_pred[:, j]), from multilabel_confusion_matrix's counts",
                      num_classes=num_classes, validate=validate, ignore_index=ignore_index)
    if validate is False:
        value = _one_pass_slot(y_true, y_pred, sample_weight, num_classes, ignore_index,
                               deterministic, "matthews_corrcoef")
        if value is not None:
            return value
    options = _PassOptions(num_classes, sample_weight, ignore_index, validate, deterministic)
    inputs, _ = options.check(y_true, y_pred)
    if reduces_on_device(inputs):
        return output(evaluate(inputs, moments=False).slot("matthews_corrcoef"), inputs)
    return output(F.matthews_corrcoef(host_counts(inputs)), inputs)


@on_caller_stream
def class_likelihood_ratios(y_true: ArrayLike, y_pred: ArrayLike, *,
                            labels: ArrayLike | None = None,
                            sample_weight: ArrayLike | None = None,
                            replace_undefined_by: float | dict = np.nan) -> tuple[float, float]:
    """Positive and negative likelihood ratios of a binary problem, as
    ``sklearn.metrics.class_likelihood_ratios``.

    ``LR+ = (tp / (tp + fn)) / (fp / (tn + fp))`` and
    ``LR- = (fn / (tp + fn)) / (tn / (tn + fp))``, from the 2 x 2 matrix of
    :func:`confusion_matrix` (the second class positive).

    Parameters
    ----------
    y_true, y_pred : array-like of shape (N,)
        Labels of at most two classes, together.
    labels : array-like of two class codes, optional
        The negative and the positive class, in that order; default the
        classes present, sorted.
    sample_weight : array-like of shape (N,), optional
        Non-negative weight of each sample.
    replace_undefined_by : np.nan, 1.0 or dict, default np.nan
        The value of a ratio that divides by 0 (no false positives for LR+,
        no true negatives for LR-): NaN, 1.0 for both, or
        ``{"LR+": v1, "LR-": v2}`` with ``v1 >= 1`` and ``0 <= v2 <= 1`` (or
        NaN). Either way an ``UndefinedMetricWarning`` says so.

    Returns
    -------
    (positive_likelihood_ratio, negative_likelihood_ratio) : tuple of float
        ``numpy.float64`` for NumPy inputs, else 0-d arrays of the input's
        framework on its device (the ratios are computed on the host from the
        matrix read back: a sync).

    See Also
    --------
    confusion_matrix : The counts the ratios are read from.
    specificity_score : tn / (tn + fp), the denominator of LR+ being 1 - it.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import class_likelihood_ratios
    >>> class_likelihood_ratios(np.array([0, 1, 0, 1, 0]), np.array([1, 1, 0, 0, 0]))
    (np.float64(1.5), np.float64(0.75))
    """
    replace = check_likelihood_replacement(replace_undefined_by)
    refuse_multilabel(y_true, y_pred, "class_likelihood_ratios",
                      "score each label's column, e.g. class_likelihood_ratios(y_true[:, j], "
                      "y_pred[:, j])")
    present = to_numpy(confusion_matrix(y_true, y_pred, sample_weight=sample_weight))
    if present.shape[0] > 2:
        raise ValueError("class_likelihood_ratios only supports binary classification problems, "
                         "got targets of type: multiclass")
    cm = present if labels is None else to_numpy(
        confusion_matrix(y_true, y_pred, labels=labels, sample_weight=sample_weight))
    if cm.shape != (2, 2):
        raise ValueError("class_likelihood_ratios needs the 2 x 2 confusion matrix of two "
                         f"classes, got {cm.shape[0]} class(es) in y_true, y_pred and labels")
    tn, fp, fn, tp = cm.ravel()
    placement = CallerPlacement.of(y_true, y_pred, sample_weight)
    return tuple(output(ratio, placement)
                 for ratio in F.likelihood_ratios(tn, fp, fn, tp, replace))


@on_caller_stream
@shared_parameters
def cohen_kappa_score(y1: ArrayLike, y2: ArrayLike, *, labels: ArrayLike | None = None,
                      weights: KappaWeights | None = None,
                      sample_weight: ArrayLike | None = None,
                      replace_undefined_by: float = np.nan, num_classes: int | None = None,
                      ignore_index: int | None = None, validate: bool = True,
                      deterministic: bool = False) -> Any:
    """Cohen's kappa, optionally with linear or quadratic disagreement weights.

    Weights use class positions in the selected class list (scikit-learn):
    ``labels`` if given, else all ``num_classes`` codes if given, else the
    classes present.

    Parameters
    ----------
    y1 : array-like of shape (N,)
        The first rater's class codes (integers), in the place of ``y_true``:
        ``labels`` must occur in it and ``ignore_index`` is matched against it.
    y2 : array-like of shape (N,) or (N, K)
        The second rater's class codes, or (N, K) scores or logits reduced by
        a fused argmax (ties to the lowest index).
    {labels}
    weights : {"linear", "quadratic"} or None, default None
        Disagreement weights from the distance of the two class positions:
        None (unweighted), ``|i - j|`` or ``(i - j)**2``.
    {sample_weight}
    replace_undefined_by : float, default np.nan
        Returned (with an UndefinedMetricWarning) when kappa is 0/0: no
        disagreement is expected by chance.
    {num_classes}
    ignore_index : int, optional
        Samples whose ``y1`` equals this value are left out (a padding or
        void class).
    {validate}
    {deterministic}

    Returns
    -------
    kappa : float
        A NumPy float64, or for torch, CuPy or JAX inputs a 0-d tensor or
        array of theirs on their device.

    See Also
    --------
    matthews_corrcoef : The correlation of the two labelings.
    label_report : Every label metric (kappa and its weighted forms) from one pass.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import cohen_kappa_score
    >>> float(cohen_kappa_score(np.array([0, 1, 0, 2, 1]), np.array([0, 1, 0, 2, 0])))
    0.6875
    """
    refuse_multilabel(y1, y2, "cohen_kappa_score",
                      "score each label's column, e.g. cohen_kappa_score(y1[:, j], y2[:, j])",
                      names=("y1", "y2"), num_classes=num_classes, validate=validate,
                      ignore_index=ignore_index)
    check_option(weights, KAPPA_WEIGHTS, "weights")
    # validate=False, K known: the reduction's value, whose 0/0 is NaN (no
    # warning: the undefined case is not read back).
    if validate is False and labels is None and replace_undefined_by != replace_undefined_by:
        value = _one_pass_slot(y1, y2, sample_weight, num_classes, ignore_index, deterministic,
                               _KAPPA_SLOTS[weights])
        if value is not None:
            return value
    options = _PassOptions(num_classes, sample_weight, ignore_index, validate, deterministic)
    inputs, labels = options.check(y1, y2, labels=labels, names=("y1", "y2"))
    if labels is None and reduces_on_device(inputs):
        evaluation = evaluate(inputs, moments=weights is not None)
        # The undefined case is decided (and warned about) on the host: one flag.
        if bool(evaluation.slot("kappa_undefined")):
            _warn_kappa_undefined(replace_undefined_by)
            return output(np.float64(replace_undefined_by), inputs)
        return output(evaluation.slot(_KAPPA_SLOTS[weights]), inputs)
    stats = _kappa_statistics(inputs, labels, moments=weights is not None)
    if labels is not None and not _any_true_in(inputs, labels):
        raise ValueError(
            "At least one label in `labels` must be present in `y1` (even though "
            "`cohen_kappa_score` is otherwise agnostic to the order of `y1` and `y2`)."
        )
    c = F.Counts.from_statistics(stats, np)
    if F.kappa_undefined(c):
        _warn_kappa_undefined(replace_undefined_by)
    return output(F.cohen_kappa(c, stats, weights, replace_undefined_by), inputs)


_KAPPA_SLOTS = {None: "cohen_kappa", "linear": "linear_weighted_kappa",
                "quadratic": "quadratic_weighted_kappa"}


def _warn_kappa_undefined(replace_undefined_by) -> None:
    F.warn(
        "cohen_kappa_score is undefined (no disagreement is expected by chance); "
        f"returning replace_undefined_by={replace_undefined_by}",
        F.UndefinedMetricWarning,
    )


def _kappa_statistics(inputs: LabelInputs, labels, *, moments: bool) -> ClassStatistics:
    """Statistics over the selected classes only, positions 0..m-1 (for kappa)."""
    backend = inputs.backend
    if labels is not None:
        return accumulate(inputs, class_lut=class_positions(labels, inputs.num_classes),
                           moments=moments)[0]
    if use_dense_matrix(inputs.num_classes):
        stats, cm = accumulate(inputs)
        cm = np.asarray(backend.to_host(cm))
        classes = (np.arange(inputs.num_classes) if inputs.num_classes_given
                   else np.flatnonzero(stats.observed))
        return statistics_from_matrix(
            cm[np.ix_(classes, classes)], stats.observed[classes], np,
            invalid=stats.invalid, moments=moments,
        )
    stats, _ = accumulate(inputs, moments=moments)
    if inputs.num_classes_given or bool(stats.observed.all()):
        return stats
    # Huge K with absent classes: positions must skip them, a second pass.
    classes = np.flatnonzero(stats.observed)
    return accumulate(inputs, class_lut=class_positions(classes, inputs.num_classes),
                       moments=moments)[0]


# -- classification report ---------------------------------------------------


@on_caller_stream
@shared_parameters
def classification_report(y_true: ArrayLike, y_pred: ArrayLike, *,
                          labels: ArrayLike | None = None, target_names: ArrayLike | None = None,
                          sample_weight: ArrayLike | None = None, digits: int = 2,
                          output_dict: bool = False, zero_division: ZeroDivision = "warn",
                          num_classes: int | None = None, ignore_index: int | None = None,
                          validate: bool = True, deterministic: bool = False,
                          scores: str | None = None, threshold: float = 0.5,
                          ) -> str | dict[str, Any]:
    """Per-class precision, recall, F1 and support with their averages (scikit-learn).

    Text layout and dictionary keys are scikit-learn's. One pass over the
    data serves every line.

    Parameters
    ----------
    {y_true_multilabel}
    {y_pred_multilabel}
    labels : array-like of class codes, optional
        The classes to report and their order (see
        :func:`precision_recall_fscore_support`); the averages run over them.
        Unless they cover every class present, the micro average is reported
        as "micro avg" rather than "accuracy".
    target_names : array-like of str, optional
        The name of each reported class (default: its code). A length that
        does not match the classes warns when ``labels`` is given, else
        raises.
    sample_weight : array-like of shape (N,), optional
        Non-negative weight of each sample. The support is then float64,
        whatever the weights' dtype, as scikit-learn's.
    digits : int, default 2
        Decimal places of the text (not of ``output_dict``'s floats).
    output_dict : bool, default False
        True: a dictionary instead of the text.
    {zero_division}
    {num_classes}
    {ignore_index}
    {validate}
    {deterministic}
    {multilabel_scores}

    Returns
    -------
    report : str or dict
        The text; or with ``output_dict`` a dict from each class name and
        each average ("accuracy" or "micro avg", "macro avg", "weighted avg")
        to its ``{"precision": ..., "recall": ..., "f1-score": ...,
        "support": ...}`` (Python floats), "accuracy" itself a float.

    See Also
    --------
    precision_recall_fscore_support : The numbers of each line.
    label_report : Every label metric from one pass, as a report object.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import classification_report
    >>> print(classification_report(np.array([0, 1, 2, 2, 2]), np.array([0, 0, 2, 2, 1])))
                  precision    recall  f1-score   support
    <BLANKLINE>
               0       0.50      1.00      0.67         1
               1       0.00      0.00      0.00         1
               2       1.00      0.67      0.80         3
    <BLANKLINE>
        accuracy                           0.60         5
       macro avg       0.50      0.56      0.49         5
    weighted avg       0.70      0.60      0.61         5
    <BLANKLINE>
    """
    zero_division = check_zero_division(zero_division)
    if not isinstance(digits, (int, np.integer)) or isinstance(digits, bool) or digits < 0:
        raise ValueError(f"digits must be a non-negative integer, got {digits!r}")
    labels_given = labels is not None
    warn_for = ("precision", "recall", "f-score")
    options = _PassOptions(num_classes, sample_weight, ignore_index, validate, deterministic,
                           check_score_kind(scores, threshold, allow_none=True))
    multilabel = options.multilabel(y_true, y_pred)
    if multilabel is not None:
        counts = _multilabel_host_counts(multilabel, labels)
        columns = _multilabel_columns(multilabel, labels)
        classes = np.arange(multilabel.num_labels) if columns is None else columns
        micro_is_accuracy = False  # scikit-learn: never for multilabel input
        average_options: tuple[str, ...] = ("micro", "macro", "weighted", "samples")

        def rates_of(average):
            return _multilabel_prfs(counts, beta=1.0, average=average, warn_for=warn_for,
                                    zero_division=zero_division)
    else:
        inputs, labels = options.check(y_true, y_pred, labels=labels)
        stats, _ = accumulate(inputs)
        classes = _selected_classes(inputs, stats, labels)
        present = np.flatnonzero(stats.observed)
        micro_is_accuracy = not labels_given or set(classes.tolist()) >= set(present.tolist())
        average_options = ("micro", "macro", "weighted")
        weighted = inputs.sample_weight is not None

        def rates_of(average):
            return _prfs(stats, classes, beta=1.0, average=average, warn_for=warn_for,
                         weighted=weighted, zero_division=zero_division)
    return classification_report_of(classes, rates_of, average_options, micro_is_accuracy,
                                    target_names=target_names, labels_given=labels_given,
                                    digits=digits, output_dict=output_dict)


def classification_report_of(classes: np.ndarray, rates_of, average_options: tuple[str, ...],
                             micro_is_accuracy: bool, *, target_names, labels_given: bool,
                             digits: int, output_dict: bool) -> str | dict[str, Any]:
    """:func:`classification_report`'s text or dictionary of the reported
    ``classes`` and ``rates_of(average)`` (precision, recall, F1, support:
    per class for None), the averages ``average_options`` ("micro" as
    "accuracy" where ``micro_is_accuracy``): the one layout, shared with
    :func:`metrics_gpu.dask.classification_report`'s multilabel input."""
    if target_names is not None and len(target_names) != classes.size:
        if labels_given:
            F.warn(
                f"labels size, {classes.size}, does not match size of target_names, "
                f"{len(target_names)}", UserWarning,
            )
        else:
            raise ValueError(
                f"Number of classes, {classes.size}, does not match size of target_names, "
                f"{len(target_names)}. Try specifying the labels parameter"
            )
    if target_names is None:
        target_names = [str(label) for label in classes.tolist()]
    p, r, f, s = rates_of(None)
    headers = ["precision", "recall", "f1-score", "support"]
    rows = list(zip(target_names, p, r, f, s))
    averages = []
    for average in average_options:
        heading = "accuracy" if average == "micro" and micro_is_accuracy else f"{average} avg"
        avg_p, avg_r, avg_f, _ = rates_of(average)
        averages.append((heading, avg_p, avg_r, avg_f, np.sum(s)))
    if output_dict:
        report: dict[str, Any] = {
            name: dict(zip(headers, [float(v) for v in values]))
            for name, *values in rows
        }
        for heading, *values in averages:
            report[heading] = dict(zip(headers, [float(v) for v in values]))
        if "accuracy" in report:
            report["accuracy"] = report["accuracy"]["precision"]
        return report
    width = max(max(len(name) for name in target_names), len("weighted avg"), digits)
    head_fmt = "{:>{width}s} " + " {:>9}" * len(headers)
    text = head_fmt.format("", *headers, width=width) + "\n\n"
    row_fmt = "{:>{width}s} " + " {:>9.{digits}f}" * 3 + " {:>9}\n"
    for row in rows:
        text += row_fmt.format(*row, width=width, digits=digits)
    text += "\n"
    for heading, *values in averages:
        if heading == "accuracy":
            fmt = "{:>{width}s} " + " {:>9.{digits}}" * 2 + " {:>9.{digits}f}" + " {:>9}\n"
            text += fmt.format(heading, "", "", *values[2:], width=width, digits=digits)
        else:
            text += row_fmt.format(heading, *values, width=width, digits=digits)
    return text
