"""Confusion matrices of label-coded predictions (scikit-learn's functional API).

:func:`confusion_matrix` (K x K) and :func:`multilabel_confusion_matrix` (one
2x2 matrix per label, class or sample), with the helpers that every label
function shares: the options of the data pass (:class:`_PassOptions`),
scikit-learn's class selection, and the checks of multilabel ``labels=``.
The pipeline and its conventions are described in
:mod:`metrics_gpu._functional.labels`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from metrics_gpu._formulas import labels as F
from metrics_gpu._multilabel import counts as ML
from metrics_gpu.backends.selection import on_caller_stream, resolve_backend
from metrics_gpu._common.docs import shared_parameters
from metrics_gpu._pipeline.stages import (
    accumulate,
    check_label_call,
    class_positions,
    one_pass,
    output,
)
from metrics_gpu._formulas.state import ClassStatistics
from metrics_gpu._common.types import ArrayLike, Normalize
from metrics_gpu._validation import (
    check_score_kind,
    NORMALIZE_OPTIONS,
    LabelInputs,
    MultilabelInputs,
    check_labels_argument,
    check_multilabel_inputs,
    check_option,
    refuse_multilabel,
)


@dataclass(frozen=True)
class CallerPlacement:
    """Where a result computed on the host from a call's arrays goes (the
    ``Placement`` of :func:`output`): the framework and device of ``source``."""

    backend: Any
    source: Any

    @classmethod
    def of(cls, source, *arrays) -> CallerPlacement:
        return cls(resolve_backend(source, *arrays), source)


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
