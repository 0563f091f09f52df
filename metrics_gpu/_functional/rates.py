"""Set-wise rates of label-coded predictions (scikit-learn's functional API):
precision, recall, F-beta, Jaccard and specificity, per class, label or
sample, averaged as asked.

Their formulas over counts (``_prfs_of_counts``, ``_averaged_rate``) are in
:mod:`metrics_gpu._formulas.labels`, which the multilabel stream reads too.
The pipeline and its conventions are described in
:mod:`metrics_gpu._functional.labels`.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np

from metrics_gpu._formulas import labels as F
from metrics_gpu._formulas.labels import _averaged_rate, _prfs_of_counts, _warn_prf_undefined
from metrics_gpu._functional.confusion import (
    SAMPLES_OUTSIDE_MULTILABEL,
    _multilabel_columns,
    _PassOptions,
    _selected_classes,
)
from metrics_gpu._multilabel import counts as ML
from metrics_gpu.backends.selection import on_caller_stream
from metrics_gpu._common.docs import shared_parameters
from metrics_gpu._pipeline.stages import (
    accumulate,
    evaluate,
    one_pass,
    output,
    planned_label_values,
    reduces_on_device,
)
from metrics_gpu._formulas.state import ClassStatistics
from metrics_gpu._common.types import ArrayLike, Average, ZeroDivision
from metrics_gpu._validation import (
    check_score_kind,
    AVERAGE_OPTIONS,
    MULTILABEL,
    MultilabelInputs,
    check_beta,
    check_option,
    check_zero_division,
)


def _set_wise_classes(inputs, stats, labels, average, pos_label) -> np.ndarray:
    """scikit-learn's ``_check_set_wise_labels`` on class codes."""
    present = np.flatnonzero(stats.observed)
    if isinstance(pos_label, (bool, np.bool_)):
        pos_label = int(pos_label)  # bool labels: True is class 1
    if average == "binary":
        if present.size > 2:
            raise ValueError(
                "Target is multiclass but average='binary'. Please choose another "
                "average setting, one of [None, 'micro', 'macro', 'weighted']."
            )
        if not isinstance(pos_label, (int, np.integer)) or pos_label < 0 or pos_label >= inputs.num_classes:
            raise ValueError(
                f"pos_label={pos_label!r} is not a valid class code for "
                f"{inputs.num_classes} classes"
            )
        if pos_label not in present and present.size >= 2:
            raise ValueError(
                f"pos_label={pos_label} is not a valid label. It should be one of "
                f"{present.tolist()}"
            )
        return np.array([pos_label])
    _warn_pos_label_ignored(pos_label, average)
    return _selected_classes(inputs, stats, labels)


def _warn_pos_label_ignored(pos_label, average) -> None:
    if pos_label not in (None, 1):
        F.warn(
            f"Note that pos_label (set to {pos_label!r}) is ignored when average != "
            f"'binary' (got {average!r}). You may use labels=[pos_label] to specify a "
            "single positive class.",
            UserWarning,
        )


def _prfs(stats: ClassStatistics, classes, *, beta, average, warn_for, zero_division,
          weighted):
    """Precision, recall, F-beta and support of ``classes``, averaged as asked,
    on the host (the caller moves them to the input's device).

    Weighted supports are float64 whatever the weights' dtype, as scikit-learn's.
    """
    c = F.Counts.from_statistics(stats.take(classes), np)
    support = stats.support[classes]
    if weighted:
        support = support.astype(np.float64)
    return _prfs_of_counts(c, support, beta=beta, average=average, warn_for=warn_for,
                           zero_division=zero_division)


def _one_pass_values(y_true, y_pred, options: _PassOptions | None, *, sample_weight=None,
                     num_classes=None, ignore_index=None, deterministic=False) -> Any:
    """The label values (:data:`metrics_gpu._formulas.labels.LABEL_METRIC_SLOTS`, in
    the inputs' framework) of a ``validate=False`` call whose K is known
    without reading the data: from its layout's launch plan (an update and a
    reduction launch on a buffer of the call's own), else through one fresh
    streaming state (which keeps the plan). None where the call needs the
    checked path. The pass options come as ``options`` or one by one."""
    if options is not None:
        sample_weight, num_classes = options.sample_weight, options.num_classes
        ignore_index, deterministic = options.ignore_index, options.deterministic
    values = planned_label_values(y_true, y_pred, sample_weight, num_classes, ignore_index,
                                  deterministic)
    if values is not None:
        return values
    passed = one_pass(y_true, y_pred, kind="labels", num_classes=num_classes,
                      sample_weight=sample_weight, ignore_index=ignore_index, validate=False,
                      deterministic=deterministic)
    if passed is None:
        return None
    values, _ = passed.compute(scores=False)
    return output(values, passed)


# -- multilabel-indicator input ----------------------------------------------------


def _check_multilabel_average(average, pos_label) -> None:
    """scikit-learn's ``_check_set_wise_labels`` of multilabel input."""
    if average == "binary":
        raise ValueError(
            f"Target is {MULTILABEL} but average='binary'. Please choose another average "
            "setting, one of [None, 'micro', 'macro', 'weighted', 'samples']."
        )
    _warn_pos_label_ignored(pos_label, average)


def _multilabel_host_counts(inputs: MultilabelInputs, labels, beta: float = 1.0
                            ) -> ML.MultilabelCounts | ML.MultilabelTotals:
    """The counts of the labels selected by ``labels=``, on the host (the
    set-wise formulas run there; the caller moves results back); ``beta``:
    the F-score's, which a kernel pass sums per sample."""
    return ML.counts_of(inputs, _multilabel_columns(inputs, labels), beta=beta).on_host(
        inputs.backend)


def _samples_rates(counts: ML.MultilabelCounts | ML.MultilabelTotals, rates, *,
                   zero_division, beta: float = 1.0) -> tuple[list, list] | None:
    """``(values, undefined)`` of the sample rates ``rates`` (``average="samples"``)
    from a kernel pass's sums, or None: per-sample counts (or sums that
    cannot answer, :meth:`ML.MultilabelTotals.samples_rate`)."""
    if not isinstance(counts, ML.MultilabelTotals) or not set(rates) <= set(ML.SAMPLE_RATE_SLOTS):
        return None  # specificity: no row sum of its own
    assert "f_score" not in rates or counts.beta == beta, "the rows summed another F-beta"
    found = [counts.samples_rate(rate, zero_division) for rate in rates]
    answered = [value for value in found if value is not None]
    if len(answered) < len(found):
        return None
    return [value for value, _ in answered], [undefined for _, undefined in answered]


def _multilabel_prfs(counts: ML.MultilabelCounts | ML.MultilabelTotals, *, beta, average,
                     warn_for, zero_division):
    """:func:`_prfs` of multilabel counts: per label, or per sample for
    ``average="samples"``."""
    if average == "samples":
        summed = _samples_rates(counts, ("precision", "recall", ML.f_score_rate(beta)),
                                zero_division=zero_division, beta=beta)
        if summed is not None:
            (precision, recall, f_score), undefined = summed
            if zero_division == "warn":
                f_undefined = ML.f_score_rate(beta) == "f_score" and undefined[2] > 0
                _warn_prf_undefined(warn_for, (undefined[0] > 0, undefined[1] > 0, f_undefined),
                                    counts.num_samples, samplewise=True)
            return precision, recall, f_score, None
        if isinstance(counts, ML.MultilabelTotals):
            counts = counts.per_row_counts()
        return _prfs_of_counts(counts.sample_counts(), None, beta=beta, average=average,
                               warn_for=warn_for, zero_division=zero_division,
                               sample_weight=counts.sample_weight)
    return _prfs_of_counts(counts.label_counts(), counts.tp + counts.fn, beta=beta,
                           average=average, warn_for=warn_for, zero_division=zero_division)


# -- set-wise metrics (precision, recall, F, Jaccard, specificity) ----------------


def _precision_recall_fscore(y_true: ArrayLike, y_pred: ArrayLike, options: _PassOptions, *,
                             beta: float, labels: ArrayLike | None, pos_label: int,
                             average: Average | None, warn_for: Collection[str],
                             zero_division: ZeroDivision) -> tuple[Any, Any, Any, Any]:
    """The pipeline of :func:`precision_recall_fscore_support`, which its
    single-metric forms (precision, recall, F) share."""
    check_option(average, AVERAGE_OPTIONS, "average")
    beta = check_beta(beta)
    zero_division = check_zero_division(zero_division)
    multilabel = options.multilabel(y_true, y_pred)
    if multilabel is not None:
        _check_multilabel_average(average, pos_label)
        counts = _multilabel_host_counts(multilabel, labels, beta)
        precision, recall, f_score, support = _multilabel_prfs(
            counts, beta=beta, average=average, warn_for=warn_for, zero_division=zero_division)
        return (output(precision, multilabel), output(recall, multilabel),
                output(f_score, multilabel),
                None if support is None else output(support, multilabel))
    if average == "samples":
        raise ValueError(SAMPLES_OUTSIDE_MULTILABEL.format(asked="average='samples'"))
    if (options.validate is False and labels is None and beta == 1.0
            and average in ("micro", "macro", "weighted")
            and (zero_division == "warn" or zero_division == 0.0)):
        values = _one_pass_values(y_true, y_pred, options)
        if values is not None:  # no zero-division warning: it would read counts back
            _warn_pos_label_ignored(pos_label, average)
            return (values[F.SLOT[f"{average}_precision"]], values[F.SLOT[f"{average}_recall"]],
                    values[F.SLOT[f"{average}_f1"]], None)
    inputs, labels = options.check(y_true, y_pred, labels=labels,
                                   pos_label=pos_label if average == "binary" else None)
    if (reduces_on_device(inputs) and labels is None and beta == 1.0
            and average in ("micro", "macro", "weighted")
            and (zero_division == "warn" or zero_division == 0.0)):
        _warn_pos_label_ignored(pos_label, average)
        return _prfs_from_reduction(inputs, average, warn_for, zero_division)
    stats, _ = accumulate(inputs)
    classes = _set_wise_classes(inputs, stats, labels, average, pos_label)
    precision, recall, f_score, support = _prfs(
        stats, classes, beta=beta, average=average, warn_for=warn_for,
        weighted=inputs.sample_weight is not None, zero_division=zero_division)
    return (output(precision, inputs), output(recall, inputs), output(f_score, inputs),
            None if support is None else output(support, inputs))


def _prfs_from_reduction(inputs, average, warn_for, zero_division):
    """Averaged precision, recall and F1 from the one-launch reduction (0/0 = 0).

    With ``zero_division='warn'`` the class counts behind scikit-learn's
    warnings are read back (eight numbers); otherwise nothing is.
    """
    evaluation = evaluate(inputs, moments=False)
    if zero_division == "warn":
        counts = dict(zip(F.LABEL_METRIC_COUNTS, np.asarray(inputs.backend.to_host(
            evaluation.values[len(F.REPORT_METRICS):len(F.LABEL_METRIC_SLOTS)])).tolist()))
        selected = counts["selected_classes"]
        if average == "micro":  # the summed denominators are 0
            undefined = (counts["unpredicted_classes"] == selected,
                         counts["supported_classes"] == 0,
                         counts["absent_classes"] == selected)
        else:
            undefined = (counts["unpredicted_classes"] > 0,
                         counts["supported_classes"] < selected,
                         counts["absent_classes"] > 0)
        _warn_prf_undefined(warn_for, undefined, 1 if average == "micro" else int(selected))
    return tuple(output(evaluation.slot(f"{average}_{name}"), inputs)
                 for name in ("precision", "recall", "f1")) + (None,)


@on_caller_stream
@shared_parameters
def precision_recall_fscore_support(
    y_true: ArrayLike, y_pred: ArrayLike, *, beta: float = 1.0, labels: ArrayLike | None = None,
    pos_label: int = 1, average: Average | None = None,
    warn_for: Collection[str] = ("precision", "recall", "f-score"),
    sample_weight: ArrayLike | None = None, zero_division: ZeroDivision = "warn",
    num_classes: int | None = None, ignore_index: int | None = None, validate: bool = True,
    deterministic: bool = False,
    scores: str | None = None, threshold: float = 0.5,
) -> tuple[Any, Any, Any, Any]:
    """Precision, recall, F-beta and support per class or averaged (scikit-learn).

    Parameters
    ----------
    {y_true_multilabel}
    {y_pred_multilabel}
    beta : float, default 1.0
        The weight of recall against precision in the F score (beta > 1
        favours recall); 0 gives precision, ``math.inf`` recall.
    {labels_set_wise}
    {pos_label}
    average : {"binary", "micro", "macro", "weighted", "samples"} or None, default None
        None: one value per class. "binary": the class ``pos_label`` only;
        the data must have at most two classes. "micro": from the summed
        counts. "macro": the unweighted mean of the per-class values.
        "weighted": their mean weighted by support. "samples"
        (multilabel-indicator input only): the mean over samples (weighted
        by ``sample_weight``) of each sample's value over its labels.
    warn_for : collection of str, default ("precision", "recall", "f-score")
        The metrics whose 0/0 warns under ``zero_division="warn"``
        (scikit-learn's; its single-metric functions warn for their own).
    sample_weight : array-like of shape (N,), optional
        Non-negative weight of each sample. The support is then float64,
        whatever the weights' dtype, as scikit-learn's.
    {zero_division}
    {num_classes}
    {ignore_index}
    {validate}
    {deterministic}
    {multilabel_scores}

    Returns
    -------
    precision, recall, fbeta_score : float or array of shape (n_classes,)
        Per class with ``average=None``, else averaged: NumPy for NumPy
        inputs, else the inputs' framework on their device.
    support : array of shape (n_classes,) or None
        The number (weight) of samples of each class in ``y_true`` with
        ``average=None``; None when averaged.

    See Also
    --------
    precision_score, recall_score, fbeta_score, f1_score : One of the three.
    classification_report : All three per class, with their averages.
    label_report : Every label metric from one pass.

    Notes
    -----
    F is computed from counts: (1 + b^2) tp / ((1 + b^2) tp + b^2 fn + fp),
    b = ``beta``. Values made NaN by ``zero_division=np.nan`` drop out of the
    averages.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import precision_recall_fscore_support
    >>> y_true, y_pred = np.array([0, 1, 2, 0, 1, 2]), np.array([0, 2, 1, 0, 0, 1])
    >>> p, r, f, s = precision_recall_fscore_support(y_true, y_pred, average="macro")
    >>> round(float(p), 4), round(float(r), 4), round(float(f), 4), s
    (0.2222, 0.3333, 0.2667, None)
    """
    options = _PassOptions(num_classes, sample_weight, ignore_index, validate, deterministic,
                           check_score_kind(scores, threshold, allow_none=True))
    return _precision_recall_fscore(y_true, y_pred, options, beta=beta, labels=labels,
                                    pos_label=pos_label, average=average, warn_for=warn_for,
                                    zero_division=zero_division)


@on_caller_stream
@shared_parameters
def precision_score(y_true: ArrayLike, y_pred: ArrayLike, *, labels: ArrayLike | None = None,
                    pos_label: int = 1, average: Average | None = "binary",
                    sample_weight: ArrayLike | None = None, zero_division: ZeroDivision = "warn",
                    num_classes: int | None = None, ignore_index: int | None = None,
                    validate: bool = True, deterministic: bool = False,
                    scores: str | None = None, threshold: float = 0.5) -> Any:
    """Precision tp / (tp + fp), per class or averaged; see
    :func:`precision_recall_fscore_support` for ``average`` and ``zero_division``.

    Parameters
    ----------
    {y_true_multilabel}
    {y_pred_multilabel}
    {labels_set_wise}
    {pos_label}
    {average}
    {sample_weight}
    {zero_division}
    {num_classes}
    {ignore_index}
    {validate}
    {deterministic}
    {multilabel_scores}

    Returns
    -------
    precision : float or array of shape (n_classes,)
        Per class with ``average=None``, else averaged: NumPy for NumPy
        inputs, else the inputs' framework on their device.

    See Also
    --------
    recall_score : tp / (tp + fn).
    precision_recall_fscore_support : Precision, recall and F from one pass.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import precision_score
    >>> precision_score(np.array([0, 1, 2, 0, 1, 2]), np.array([0, 2, 1, 0, 0, 1]), average=None)
    array([0.66666667, 0.        , 0.        ])
    """
    options = _PassOptions(num_classes, sample_weight, ignore_index, validate, deterministic,
                           check_score_kind(scores, threshold, allow_none=True))
    precision, _, _, _ = _precision_recall_fscore(
        y_true, y_pred, options, beta=1.0, labels=labels, pos_label=pos_label, average=average,
        warn_for=("precision",), zero_division=zero_division)
    return precision


@on_caller_stream
@shared_parameters
def recall_score(y_true: ArrayLike, y_pred: ArrayLike, *, labels: ArrayLike | None = None,
                 pos_label: int = 1, average: Average | None = "binary",
                 sample_weight: ArrayLike | None = None, zero_division: ZeroDivision = "warn",
                 num_classes: int | None = None, ignore_index: int | None = None,
                 validate: bool = True, deterministic: bool = False,
                 scores: str | None = None, threshold: float = 0.5) -> Any:
    """Recall tp / (tp + fn), per class or averaged; see
    :func:`precision_recall_fscore_support`.

    Parameters
    ----------
    {y_true_multilabel}
    {y_pred_multilabel}
    {labels_set_wise}
    {pos_label}
    {average}
    {sample_weight}
    {zero_division}
    {num_classes}
    {ignore_index}
    {validate}
    {deterministic}
    {multilabel_scores}

    Returns
    -------
    recall : float or array of shape (n_classes,)
        Per class with ``average=None``, else averaged: NumPy for NumPy
        inputs, else the inputs' framework on their device.

    See Also
    --------
    precision_score : tp / (tp + fp).
    specificity_score : The recall of the negatives, tn / (tn + fp).
    balanced_accuracy_score : The mean recall over the classes of ``y_true``.
    precision_recall_fscore_support : Precision, recall and F from one pass.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import recall_score
    >>> recall_score(np.array([0, 1, 2, 0, 1, 2]), np.array([0, 2, 1, 0, 0, 1]), average=None)
    array([1., 0., 0.])
    """
    options = _PassOptions(num_classes, sample_weight, ignore_index, validate, deterministic,
                           check_score_kind(scores, threshold, allow_none=True))
    _, recall, _, _ = _precision_recall_fscore(
        y_true, y_pred, options, beta=1.0, labels=labels, pos_label=pos_label, average=average,
        warn_for=("recall",), zero_division=zero_division)
    return recall


@on_caller_stream
@shared_parameters
def fbeta_score(y_true: ArrayLike, y_pred: ArrayLike, *, beta: float,
                labels: ArrayLike | None = None, pos_label: int = 1,
                average: Average | None = "binary", sample_weight: ArrayLike | None = None,
                zero_division: ZeroDivision = "warn", num_classes: int | None = None,
                ignore_index: int | None = None, validate: bool = True,
                deterministic: bool = False,
                scores: str | None = None, threshold: float = 0.5) -> Any:
    """F-beta score, per class or averaged; macro = mean of per-class F-beta
    (scikit-learn); see :func:`precision_recall_fscore_support`.

    Parameters
    ----------
    {y_true_multilabel}
    {y_pred_multilabel}
    beta : float
        The weight of recall against precision (beta > 1 favours recall); 0
        gives precision, ``math.inf`` recall.
    {labels_set_wise}
    {pos_label}
    {average}
    {sample_weight}
    {zero_division}
    {num_classes}
    {ignore_index}
    {validate}
    {deterministic}
    {multilabel_scores}

    Returns
    -------
    fbeta_score : float or array of shape (n_classes,)
        Per class with ``average=None``, else averaged: NumPy for NumPy
        inputs, else the inputs' framework on their device.

    See Also
    --------
    f1_score : beta = 1.
    precision_recall_fscore_support : Precision, recall and F from one pass.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import fbeta_score
    >>> y_true, y_pred = np.array([0, 1, 2, 0, 1, 2]), np.array([0, 2, 1, 0, 0, 1])
    >>> round(float(fbeta_score(y_true, y_pred, average="macro", beta=0.5)), 4)
    0.2381
    """
    options = _PassOptions(num_classes, sample_weight, ignore_index, validate, deterministic,
                           check_score_kind(scores, threshold, allow_none=True))
    _, _, f_score, _ = _precision_recall_fscore(
        y_true, y_pred, options, beta=beta, labels=labels, pos_label=pos_label, average=average,
        warn_for=("f-score",), zero_division=zero_division)
    return f_score


@on_caller_stream
@shared_parameters
def f1_score(y_true: ArrayLike, y_pred: ArrayLike, *, labels: ArrayLike | None = None,
             pos_label: int = 1, average: Average | None = "binary",
             sample_weight: ArrayLike | None = None, zero_division: ZeroDivision = "warn",
             num_classes: int | None = None, ignore_index: int | None = None,
             validate: bool = True, deterministic: bool = False,
             scores: str | None = None, threshold: float = 0.5) -> Any:
    """F1 score, per class or averaged; macro = mean of per-class F1 (scikit-learn).

    For the harmonic mean of macro precision and macro recall (oneDAL,
    pyActLearn, the overview paper) see :func:`multiclass_quality_metrics`.

    Parameters
    ----------
    {y_true_multilabel}
    {y_pred_multilabel}
    {labels_set_wise}
    {pos_label}
    {average}
    {sample_weight}
    {zero_division}
    {num_classes}
    {ignore_index}
    {validate}
    {deterministic}
    {multilabel_scores}

    Returns
    -------
    f1_score : float or array of shape (n_classes,)
        Per class with ``average=None``, else averaged: NumPy for NumPy
        inputs, else the inputs' framework on their device.

    See Also
    --------
    fbeta_score : F with another weight of recall against precision.
    precision_recall_fscore_support : Precision, recall and F from one pass.
    label_report : Every label metric (macro F1 among them) from one pass.
    multiclass_quality_metrics : oneDAL's macro F, from macro precision and recall.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import f1_score
    >>> y_true, y_pred = np.array([0, 1, 2, 0, 1, 2]), np.array([0, 2, 1, 0, 0, 1])
    >>> round(float(f1_score(y_true, y_pred, average="macro")), 4)
    0.2667
    """
    options = _PassOptions(num_classes, sample_weight, ignore_index, validate, deterministic,
                           check_score_kind(scores, threshold, allow_none=True))
    _, _, f_score, _ = _precision_recall_fscore(
        y_true, y_pred, options, beta=1.0, labels=labels, pos_label=pos_label, average=average,
        warn_for=("f-score",), zero_division=zero_division)
    return f_score


def _rate_score(terms, name, modifier, y_true, y_pred, options: _PassOptions, *, labels,
                pos_label, average, zero_division):
    """Shared pipeline of Jaccard and specificity: a per-class rate, averaged."""
    check_option(average, AVERAGE_OPTIONS, "average")
    zero_division = check_zero_division(zero_division)
    multilabel = options.multilabel(y_true, y_pred)
    if multilabel is not None:
        _check_multilabel_average(average, pos_label)
        counts = _multilabel_host_counts(multilabel, labels)
        if average == "samples":
            summed = _samples_rates(counts, (name.lower(),), zero_division=zero_division)
            if summed is not None:
                (value,), (undefined,) = summed
                if zero_division == "warn" and undefined:
                    F.warn_undefined(name, modifier, counts.num_samples, samplewise=True)
                return output(value, multilabel)
            if isinstance(counts, ML.MultilabelTotals):
                counts = counts.per_row_counts()
            return output(_averaged_rate(terms, name, modifier, counts.sample_counts(),
                                         average=average, zero_division=zero_division,
                                         sample_weight=counts.sample_weight), multilabel)
        return output(_averaged_rate(terms, name, modifier, counts.label_counts(),
                                     average=average, zero_division=zero_division), multilabel)
    if average == "samples":
        raise ValueError(SAMPLES_OUTSIDE_MULTILABEL.format(asked="average='samples'"))
    if (options.validate is False and labels is None and average == "macro"
            and (zero_division == "warn" or zero_division == 0.0)):
        values = _one_pass_values(y_true, y_pred, options)
        if values is not None:  # no zero-division warning: it would read counts back
            return values[F.SLOT[f"macro_{name.lower()}"]]
    inputs, labels = options.check(y_true, y_pred, labels=labels,
                                   pos_label=pos_label if average == "binary" else None)
    stats, _ = accumulate(inputs)
    classes = _set_wise_classes(inputs, stats, labels, average, pos_label)
    c = F.Counts.from_statistics(stats.take(classes), np)
    return output(_averaged_rate(terms, name, modifier, c, average=average,
                                 zero_division=zero_division), inputs)


@on_caller_stream
@shared_parameters
def jaccard_score(y_true: ArrayLike, y_pred: ArrayLike, *, labels: ArrayLike | None = None,
                  pos_label: int = 1, average: Average | None = "binary",
                  sample_weight: ArrayLike | None = None, zero_division: ZeroDivision = "warn",
                  num_classes: int | None = None, ignore_index: int | None = None,
                  validate: bool = True, deterministic: bool = False,
                  scores: str | None = None, threshold: float = 0.5) -> Any:
    """Jaccard index tp / (tp + fp + fn), per class or averaged (scikit-learn).

    Parameters
    ----------
    {y_true_multilabel}
    {y_pred_multilabel}
    {labels_set_wise}
    {pos_label}
    {average}
    {sample_weight}
    {zero_division}
    {num_classes}
    {ignore_index}
    {validate}
    {deterministic}
    {multilabel_scores}

    Returns
    -------
    score : float or array of shape (n_classes,)
        Per class with ``average=None``, else averaged: NumPy for NumPy
        inputs, else the inputs' framework on their device.

    See Also
    --------
    f1_score : 2 tp / (2 tp + fp + fn); per class F1 = 2 J / (1 + J).
    precision_recall_fscore_support : Precision, recall and F from one pass.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import jaccard_score
    >>> jaccard_score(np.array([0, 1, 2, 2]), np.array([0, 2, 1, 2]), average=None)
    array([1.        , 0.        , 0.33333333])
    """
    options = _PassOptions(num_classes, sample_weight, ignore_index, validate, deterministic,
                           check_score_kind(scores, threshold, allow_none=True))
    return _rate_score(F.jaccard_terms, "Jaccard", "true or predicted", y_true, y_pred, options,
                       labels=labels, pos_label=pos_label, average=average,
                       zero_division=zero_division)


@on_caller_stream
@shared_parameters
def specificity_score(y_true: ArrayLike, y_pred: ArrayLike, *, labels: ArrayLike | None = None,
                      pos_label: int = 1, average: Average | None = "binary",
                      sample_weight: ArrayLike | None = None,
                      zero_division: ZeroDivision = "warn", num_classes: int | None = None,
                      ignore_index: int | None = None, validate: bool = True,
                      deterministic: bool = False,
                      scores: str | None = None, threshold: float = 0.5) -> Any:
    """Specificity (true negative rate) tn / (tn + fp), per class or averaged.

    Same arguments and averaging as :func:`recall_score`; 'micro' sums tn and
    fp over the classes.

    Parameters
    ----------
    {y_true_multilabel}
    {y_pred_multilabel}
    {labels_set_wise}
    {pos_label}
    {average}
    {sample_weight}
    {zero_division}
    {num_classes}
    {ignore_index}
    {validate}
    {deterministic}
    {multilabel_scores}

    Returns
    -------
    specificity : float or array of shape (n_classes,)
        Per class with ``average=None``, else averaged: NumPy for NumPy
        inputs, else the inputs' framework on their device.

    See Also
    --------
    recall_score : The true positive rate, tp / (tp + fn).
    balanced_accuracy_score : The mean recall over the classes.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import specificity_score
    >>> specificity_score(np.array([0, 1, 2, 2]), np.array([0, 2, 1, 2]), average=None)
    array([1.        , 0.66666667, 0.5       ])
    """
    options = _PassOptions(num_classes, sample_weight, ignore_index, validate, deterministic,
                           check_score_kind(scores, threshold, allow_none=True))
    return _rate_score(F.specificity_terms, "Specificity", "negative", y_true, y_pred, options,
                       labels=labels, pos_label=pos_label, average=average,
                       zero_division=zero_division)
