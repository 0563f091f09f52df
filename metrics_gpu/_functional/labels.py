"""scikit-learn-compatible functional API over label-coded predictions.

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

import math
from collections.abc import Collection
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from metrics_gpu._formulas import labels as F
from metrics_gpu._multilabel import counts as ML
from metrics_gpu.backends.selection import on_caller_stream
from metrics_gpu._common.docs import shared_parameters
from metrics_gpu._pipeline.stages import (
    accumulate,
    check_label_call,
    class_positions,
    evaluate,
    host_counts,
    one_pass,
    output,
    planned_label_values,
    reduces_on_device,
)
from metrics_gpu._formulas.state import ClassStatistics, statistics_from_matrix, use_dense_matrix
from metrics_gpu._common.types import ArrayLike, Average, KappaWeights, Normalize, ZeroDivision
from metrics_gpu._validation import (
    check_score_kind,
    AVERAGE_OPTIONS,
    KAPPA_WEIGHTS,
    NORMALIZE_OPTIONS,
    MULTILABEL,
    LabelInputs,
    MultilabelInputs,
    check_beta,
    check_class_weight,
    check_labels_argument,
    check_multilabel_inputs,
    check_option,
    check_zero_division,
    refuse_multilabel,
)


@dataclass(frozen=True)
class _PassOptions:
    """The arguments of the data pass that every function here takes, handed
    on as one: scikit-learn's ``sample_weight`` and this package's four."""

    num_classes: int | None
    sample_weight: ArrayLike | None
    ignore_index: int | None
    validate: bool
    deterministic: bool
    # (scores, threshold) of (N, L) multilabel scores in y_pred: check_score_kind's
    scores: tuple[str, float] | None = None

    def keywords(self) -> dict[str, Any]:
        """The options as keyword arguments (of :func:`check_label_call`,
        :func:`one_pass`)."""
        return {field.name: getattr(self, field.name) for field in fields(self)
                if field.name != "scores"}

    def check(self, y_true: ArrayLike, y_pred: ArrayLike, *, labels: ArrayLike | None = None,
              pos_label: int | None = None,
              names: tuple[str, str] = ("y_true", "y_pred"),
              ) -> tuple[LabelInputs, np.ndarray | None]:
        """:func:`check_label_call` of ``y_true`` and ``y_pred`` with these options
        (``names``: the function's names of the two, for the messages)."""
        return check_label_call(y_true, y_pred, labels=labels, pos_label=pos_label,
                                names=names, **self.keywords())

    def multilabel(self, y_true: ArrayLike, y_pred: ArrayLike) -> MultilabelInputs | None:
        """The checked pair when it is "multilabel-indicator" input, else None
        (:func:`check_multilabel_inputs`)."""
        return check_multilabel_inputs(y_true, y_pred, sample_weight=self.sample_weight,
                                       num_classes=self.num_classes,
                                       ignore_index=self.ignore_index, validate=self.validate,
                                       scores=self.scores)


def _selected_classes(inputs: LabelInputs, stats: ClassStatistics, labels) -> np.ndarray:
    if labels is not None:
        return labels
    if inputs.num_classes_given:
        return np.arange(inputs.num_classes)
    return np.flatnonzero(stats.observed)


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


def _warn_prf_undefined(warn_for, undefined, n_values, samplewise: bool = False) -> None:
    """scikit-learn's warnings for precision, recall and F ill-defined by 0/0
    (``samplewise``: the values are per sample, multilabel ``average="samples"``)."""
    for metric, modifier, warn in zip(("precision", "recall", "f-score"),
                                      ("predicted", "true", "true nor predicted"), undefined):
        if metric in warn_for and warn:
            F.warn_undefined(metric.capitalize(), modifier, n_values, samplewise)


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


def _prfs_of_counts(c: F.Counts, support, *, beta, average, warn_for, zero_division,
                    sample_weight=None):
    """:func:`_prfs` of counts ``c`` (NumPy): per class or label, or with
    ``average="samples"`` per sample (multilabel; ``sample_weight`` then
    weighs the mean)."""

    def rate(terms):
        numerator, denominator = terms
        if average == "micro":
            numerator, denominator = numerator.sum(keepdims=True), denominator.sum(keepdims=True)
        return F.divide(numerator, denominator, np, zero_division)

    precision, p_zero = rate(F.precision_terms(c))
    recall, r_zero = rate(F.recall_terms(c))
    if math.isinf(beta) or beta == 0:
        # F is recall (precision) itself; scikit-learn warns only under that name.
        f_score = recall if beta else precision
        f_zero = np.zeros_like(p_zero)
    else:
        f_score, f_zero = rate(F.fbeta_terms(c, beta))
    if zero_division == "warn":
        _warn_prf_undefined(warn_for, (p_zero.any(), r_zero.any(), f_zero.any()), p_zero.size,
                            samplewise=average == "samples")
    if average is None:
        return precision, recall, f_score, support
    weights = (c.support if average == "weighted"
               else sample_weight if average == "samples" else None)
    return (
        np.float64(F.nan_average(precision, np, weights)),
        np.float64(F.nan_average(recall, np, weights)),
        np.float64(F.nan_average(f_score, np, weights)),
        None,
    )


# -- multilabel-indicator input ----------------------------------------------------

# scikit-learn's text, after what was asked (the average or ``samplewise``).
SAMPLES_OUTSIDE_MULTILABEL = (
    "{asked} needs multilabel-indicator input ((N, L) matrices of 0 and 1): "
    "Samplewise metrics are not available outside of multilabel classification."
)


def _multilabel_columns(inputs: MultilabelInputs, labels) -> np.ndarray | None:
    """scikit-learn's ``labels=`` of multilabel input: label (column) indices
    in [0, L), in their order; None for all."""
    if labels is None:
        return None
    columns = check_labels_argument(labels, None, inputs.backend)
    if columns.max() >= inputs.num_labels:
        raise ValueError(
            "All labels must be in [0, n labels) for multilabel targets. "
            f"Got {columns.max()} > {inputs.num_labels - 1}"
        )
    return columns


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


# -- confusion matrix --------------------------------------------------------


@on_caller_stream
@shared_parameters
def confusion_matrix(y_true: ArrayLike, y_pred: ArrayLike, *, labels: ArrayLike | None = None,
                     num_classes: int | None = None, sample_weight: ArrayLike | None = None,
                     normalize: Normalize | None = None, ignore_index: int | None = None,
                     validate: bool = True, deterministic: bool = False) -> ArrayLike:
    """Confusion matrix: rows are actual classes, columns are predicted classes.

    Parameters
    ----------
    {y_true_labels}
    {y_pred_labels}
    {labels}
    {num_classes}
    {sample_weight}
    normalize : {"true", "pred", "all"} or None, default None
        Divide by row sums, column sums or the total; 0/0 gives 0. None:
        the counts.
    {ignore_index}
    {validate}
    {deterministic}

    Returns
    -------
    C : array of shape (n_classes, n_classes)
        Entry (i, j) counts the samples of class i predicted as class j, the
        classes being ``labels``, else the K of ``num_classes``, else those
        present. int64 counts (float64 with float weights or ``normalize``);
        NumPy for NumPy inputs, else the inputs' framework on their device.

    See Also
    --------
    label_report : Every label metric from one pass, the matrix included.
    classification_report : Per-class precision, recall and F1.
    multiclass_quality_metrics : oneDAL's metrics, with the matrix.

    Notes
    -----
    With ``deterministic=True`` each float weight is scaled by a power of two
    chosen from max|w| and N, then rounded to a 64-bit integer; integer adds
    are associative, so the order of the GPU's atomics cannot change the sum.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import confusion_matrix
    >>> confusion_matrix(np.array([0, 1, 2, 2]), np.array([0, 2, 2, 1]))
    array([[1, 0, 0],
           [0, 0, 1],
           [0, 1, 1]])
    """
    refuse_multilabel(y_true, y_pred, "confusion_matrix",
                      "use multilabel_confusion_matrix (one 2x2 matrix per label)",
                      num_classes=num_classes, validate=validate, ignore_index=ignore_index)
    check_option(normalize, NORMALIZE_OPTIONS, "normalize")
    if validate is False and labels is None and normalize is None:
        # K known: the streaming update's matrix (one launch, nothing read back).
        passed = one_pass(y_true, y_pred, kind="labels", num_classes=num_classes,
                          sample_weight=sample_weight, ignore_index=ignore_index,
                          validate=False, deterministic=deterministic, keep_matrix=True,
                          computes="matrix")
        if passed is not None:
            matrix = passed.state.arrays["matrix"]
            return output(matrix.view(np.int64) if matrix.dtype == np.uint64 else matrix,
                          passed)
    options = _PassOptions(num_classes, sample_weight, ignore_index, validate, deterministic)
    inputs, labels = options.check(y_true, y_pred, labels=labels)
    xp = inputs.backend.xp
    classes = labels
    cm: Any = None  # the backend's (or NumPy's) matrix
    if labels is None and not inputs.num_classes_given:
        # scikit-learn's default: the classes present in either input (their
        # flags are read back: the shape depends on them).
        stats, cm = accumulate(inputs)
        classes = np.flatnonzero(stats.observed)
        if cm is not None and classes.size < cm.shape[0]:
            index = xp.asarray(classes)
            cm = cm[index[:, None], index[None, :]]
    if cm is None:
        lut = None if classes is None else class_positions(classes, inputs.num_classes)
        _, cm = accumulate(inputs, class_lut=lut, matrix=True)
    if labels is not None and inputs.y_true.size and not _any_true_in(inputs, labels):
        raise ValueError("At least one label specified must be in y_true")
    if normalize is not None:
        cm = F.normalized_confusion(cm, normalize, xp)
    return output(cm, inputs)


def _any_true_in(inputs: LabelInputs, labels: np.ndarray) -> bool:
    """scikit-learn's check that some listed label occurs in y_true, among the
    counted samples (a target equal to ignore_index is not in y_true)."""
    host = inputs.backend.to_host(inputs.y_true)
    found = np.isin(host, labels)
    if inputs.ignore_index is not None:
        found &= host != inputs.ignore_index
    return bool(found.any())


@on_caller_stream
@shared_parameters
def multilabel_confusion_matrix(y_true: ArrayLike, y_pred: ArrayLike, *,
                                sample_weight: ArrayLike | None = None,
                                labels: ArrayLike | None = None,
                                samplewise: bool = False, ignore_index: int | None = None,
                                validate: bool = True,
                                scores: str | None = None, threshold: float = 0.5) -> ArrayLike:
    """One 2x2 confusion matrix per label (or class, or sample), as scikit-learn's.

    Multilabel-indicator input (``(N, L)`` matrices of 0 and 1, one column
    per label) gives one matrix per label, or per sample with
    ``samplewise=True``; class codes ``(N,)`` give one one-vs-rest matrix
    per class.

    Parameters
    ----------
    y_true : array-like of shape (N,) or (N, L)
        The true class codes, or an indicator matrix (0/1, int, bool or float).
    y_pred : array-like of shape (N,) or (N, L)
        The predicted class codes, or an indicator matrix of ``y_true``'s shape.
    sample_weight : array-like of shape (N,), optional
        Non-negative weight of each sample; the counts are then float64
        (scikit-learn's ``samplewise`` counts keep the weights' type).
    labels : array-like of int, optional
        The labels (columns) or classes to report, in their order; default
        all columns, or the classes present.
    samplewise : bool, default False
        Multilabel input only: one matrix per sample, over the labels.
    {ignore_index}
    {validate}
    {multilabel_scores}

    Returns
    -------
    multi_confusion : array of shape (n_outputs, 2, 2)
        ``[[tn, fp], [fn, tp]]`` per output: int64 counts without weights.
        NumPy for NumPy inputs, else the inputs' framework on their device.

    See Also
    --------
    confusion_matrix : The K x K matrix of single-label input.
    classification_report : Per-label precision, recall and F1.

    Notes
    -----
    Multilabel input is detected as scikit-learn's ``type_of_target``:
    2-D, more than one column, values 0 and 1 only; for integer and float
    dtypes that costs one value read back (a sync on a GPU), bool none.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import multilabel_confusion_matrix
    >>> y_true = np.array([[1, 0, 1], [0, 1, 0]])
    >>> y_pred = np.array([[1, 0, 0], [0, 1, 1]])
    >>> multilabel_confusion_matrix(y_true, y_pred)
    array([[[1, 0],
            [0, 1]],
    <BLANKLINE>
           [[1, 0],
            [0, 1]],
    <BLANKLINE>
           [[0, 1],
            [1, 0]]])
    """
    if not isinstance(samplewise, (bool, np.bool_)):
        raise ValueError(f"samplewise must be True or False, got {samplewise!r}")
    options = _PassOptions(None, sample_weight, ignore_index, validate, False,
                           check_score_kind(scores, threshold, allow_none=True))
    multilabel = options.multilabel(y_true, y_pred)
    if multilabel is not None:
        counts = ML.counts_of(multilabel, _multilabel_columns(multilabel, labels),
                              per_row=bool(samplewise))
        return output(ML.confusion_matrices(counts, samplewise=bool(samplewise)), multilabel)
    if samplewise:
        raise ValueError(SAMPLES_OUTSIDE_MULTILABEL.format(asked="samplewise=True"))
    inputs, labels = options.check(y_true, y_pred, labels=labels)
    stats, _ = accumulate(inputs)
    classes = _selected_classes(inputs, stats, labels)
    tp, true_sum, pred_sum = (np.asarray(counts)[classes] for counts in (
        stats.true_positives, stats.support, stats.predicted))
    total = np.asarray(stats.total)
    if inputs.sample_weight is not None:  # scikit-learn's weighted bincounts: float64
        tp, true_sum, pred_sum, total = (np.asarray(a, dtype=np.float64)
                                         for a in (tp, true_sum, pred_sum, total))
    fp, fn = pred_sum - tp, true_sum - tp
    matrices = np.stack([total - tp - fp - fn, fp, fn, tp], axis=1).reshape(-1, 2, 2)
    return output(matrices, inputs)


# -- counting metrics ---------------------------------------------------------


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


def _averaged_rate(terms, name, modifier, c: F.Counts, *, average, zero_division,
                   sample_weight=None):
    """The rate ``terms`` of counts ``c`` (NumPy) per class, label or sample,
    averaged as asked (``sample_weight`` weighs ``average="samples"``)."""
    num, den = terms(c)
    if average == "micro":
        num, den = num.sum(keepdims=True), den.sum(keepdims=True)
    values, zero = F.divide(num, den, np, zero_division)
    if zero_division == "warn" and zero.any():
        F.warn_undefined(name, modifier, zero.size, samplewise=average == "samples")
    if average is None:
        return values
    weights = (c.support if average == "weighted"
               else sample_weight if average == "samples" else None)
    return F.nan_average(values, np, weights)


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
