"""Multilabel inputs: "multilabel-indicator" pairs of (N, L) 0/1 matrices (or
an indicator matrix beside declared (N, L) scores), their refusal where a
function takes none, and the (N, L) indicators or relevance of the multilabel
ranking metrics."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from metrics_gpu.backends.selection import resolve_backend
from metrics_gpu._validation.common import (
    _check_finite_scores,
    _first_nonfinite,
    _first_true,
    _position,
    _row_chunks,
    _shape_of,
    _to_backend,
    check_ignore_index,
    check_num_classes,
    check_sample_weight,
)


MULTILABEL = "multilabel-indicator"


def cell_ignore_value(ignore_index: int | None, dtype) -> int | None:
    """``ignore_index`` as a cell of a target of ``dtype`` can hold it, or
    None where none can (bool, or an integer type without that value): then
    no cell is ignored."""
    if ignore_index is None or dtype.kind == "b":
        return None
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if not info.min <= ignore_index <= info.max:
            return None
    return ignore_index


def scores_above(scores, cut: float):
    """``scores > cut`` compared by value, as kernels/multilabel.cu compares
    (each score widened exactly to float64, against the float64 ``cut``):
    the one threshold rule of every backend. Never with ``cut`` rounded to
    the scores' type (NumPy's reading of a Python float beside float32 or
    float16 scores), which can move a score equal to the rounded threshold
    to the other side. Float scores are compared in their own type with
    ``cut`` rounded down to the largest value of that type not above it (x >
    cut exactly when x > that value): no float64 copy of the scores; any
    other type in float64."""
    dtype = scores.dtype
    if dtype.kind == "f" and dtype in (np.float16, np.float32, np.float64):
        with np.errstate(over="ignore"):  # a cut beyond the type's range: its infinity
            below = np.asarray(cut, dtype=dtype)
        if float(below) > cut:
            below = np.nextafter(below, np.asarray(-np.inf, dtype=dtype))
        return scores > dtype.type(below)
    return scores.astype(np.float64) > cut


@dataclass(frozen=True)
class MultilabelInputs:
    """Checked ``(N, L)`` indicator matrices (0/1 of any dtype, on the
    backend, as given: a kernel reads them so) and their weights; ``y_pred``
    may instead hold scores of the declared kind (``mode``), a label
    predicted where its score exceeds ``cut`` (:func:`scores_above`).
    ``ignore_index``: the value of the ``y_true`` cells that are left out,
    as ``y_true``'s dtype holds it (None: no cell is)."""

    y_true: Any
    y_pred: Any
    sample_weight: Any
    backend: Any
    source: Any = None  # the caller's y_true: results go back to its framework and device
    mode: str = "labels"  # or "probabilities", "logits" (the scores= of the call)
    cut: float = 0.5  # a score above it predicts the label (score_cut)
    ignore_index: int | None = None

    @property
    def num_labels(self) -> int:
        return int(self.y_true.shape[1])

    def counted(self):
        """The cells that count, a bool matrix (those of ``y_true`` other than
        ``ignore_index``), or None when every cell does."""
        return None if self.ignore_index is None else self.y_true != self.ignore_index

    def masks(self):
        """``(y_true, y_pred)`` as bool matrices (a copy of each non-bool one;
        scores cut at ``cut``), False in both at the ignored cells."""
        true = self.y_true if self.y_true.dtype.kind == "b" else self.y_true == 1
        if self.mode != "labels":
            pred = scores_above(self.y_pred, self.cut)
        else:
            pred = self.y_pred if self.y_pred.dtype.kind == "b" else self.y_pred != 0
        counted = self.counted()
        return true, pred if counted is None else pred & counted


MULTILABEL_SCORE_KINDS = ("probabilities", "logits")


def score_cut(threshold: float, scores: str) -> float:
    """The value a score must exceed to predict its label: the threshold
    itself for probabilities, ``log(t / (1 - t))`` (in float64) for logits
    (sigmoid(x) > t), without a sigmoid per cell. Scores are compared with
    it by value (:func:`scores_above`; the kernels widen every score to
    float64)."""
    if scores == "probabilities":
        return threshold
    if threshold <= 0.0:
        return -math.inf
    if threshold >= 1.0:
        return math.inf
    return math.log(threshold / (1.0 - threshold))


def check_score_kind(scores, threshold, *, allow_none: bool = False) -> tuple[str, float] | None:
    """``(scores, threshold)`` checked: one of MULTILABEL_SCORE_KINDS and a finite number
    (None for ``scores=None`` where ``allow_none``)."""
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or \
            not math.isfinite(threshold):
        raise ValueError(f"threshold must be a finite number, got {threshold!r}")
    if scores is None and allow_none:
        return None
    if scores not in MULTILABEL_SCORE_KINDS:
        raise ValueError(f"scores must be one of {MULTILABEL_SCORE_KINDS}"
                         f"{' or None' if allow_none else ''}, got {scores!r}")
    return scores, float(threshold)


def _indicator_cells(rows, xp, ignore=None):
    """Which cells hold 0 or 1 (or ``ignore``, a :func:`cell_ignore_value`)."""
    cells = xp.equal(rows, 0) | xp.equal(rows, 1)
    return cells if ignore is None else cells | xp.equal(rows, ignore)


def _is_indicator(array, xp, ignore=None) -> bool:
    """scikit-learn's ``type_of_target(...) == "multilabel-indicator"`` of an
    array on its backend: 2-D, more than one column, values 0 and 1 only
    (and ``ignore``, a :func:`cell_ignore_value`, the cells of a target left
    out). Bool reads nothing; integers and floats cost one flag read back
    (whether every value is 0 or 1) per :data:`CHECK_CHUNK_ELEMENTS` (bounded
    memory for memory-mapped label maps, which usually answer at the first
    chunk)."""
    if array.ndim != 2 or array.shape[1] < 2 or array.shape[0] == 0:
        return False
    kind = array.dtype.kind
    if kind == "b":
        return True
    if kind not in "iuf":
        return False
    return all(bool(_indicator_cells(rows, xp, ignore).all())
               for _, rows in _row_chunks(array, chunked=True))


def _first_stray_target(true, ignore_index, backend) -> tuple[int, Any]:
    """``(flat index, value)`` of the first cell of ``true`` holding neither
    0, 1 nor ``ignore_index`` (one such cell exists)."""
    ignore = cell_ignore_value(ignore_index, true.dtype)
    i = _first_true(~_indicator_cells(true, backend.xp, ignore), backend)
    assert i is not None, "a target with a stray value was asked for it"
    return i, true.reshape(-1)[i].item()


def _ignore_hint(value, ignore_index, takes_ignore_index: bool = True) -> str:
    """What to do with a stray target ``value`` (:func:`_first_stray_target`)
    (``takes_ignore_index``: whether the caller takes it)."""
    if takes_ignore_index and ignore_index is None and float(value).is_integer():
        return (f"to leave out the cells holding {value!r} (padding), pass "
                f"ignore_index={int(value)}")
    return "map the other values to 0 or 1 (or to ignore_index) first"


def _stray_targets(true, ignore_index, backend, names: tuple[str, str],
                   refusing: tuple[str, str] | None, takes_ignore_index: bool = True) -> str:
    """The message of a ``y_true`` holding a value other than 0, 1 (and
    ``ignore_index``) beside a 0/1 ``y_pred`` of its shape: multilabel
    input with cells it cannot read, refused rather than read as label maps
    of a two-class problem. ``refusing``: ``(function, what to use)`` of a
    function that takes no multilabel input; else the advice is
    :func:`_ignore_hint`'s (``takes_ignore_index``: whether to suggest it)."""
    i, value = _first_stray_target(true, ignore_index, backend)
    allowed = "0 and 1" if ignore_index in (None, 0, 1) else \
        f"0, 1 and ignore_index={ignore_index} (a cell left out)"
    stray = f"{names[0]} holds {value!r} at {_position(i, true.shape)}"
    flatten = (". Label maps (one class code per position) are read as such once flattened: "
               f"pass {names[0]}.reshape(-1) and {names[1]}.reshape(-1)")
    if refusing is not None:
        function, instead = refusing
        return (f"{function} does not support {MULTILABEL} input: {names[1]} of shape "
                f"{tuple(true.shape)} holds only 0 and 1 (one column per label) and {stray}, "
                f"which a {MULTILABEL} {names[0]} does not hold (it holds {allowed}); "
                f"{instead}{flatten}")
    return (f"{names[1]} of shape {tuple(true.shape)} holds only 0 and 1, a {MULTILABEL} "
            f"matrix (one column per label), but {stray}: a {MULTILABEL} {names[0]} holds "
            f"{allowed}; {_ignore_hint(value, ignore_index, takes_ignore_index)}{flatten}")


def multilabel_pair(y_true, y_pred, backend, names: tuple[str, str] = ("y_true", "y_pred"), *,
                    num_classes=None, validate: bool = True, ignore_index=None,
                    refusing: tuple[str, str] | None = None, takes_ignore_index: bool = True):
    """``(y_true, y_pred)`` on ``backend`` when both are ``(N, L)`` indicator
    matrices of one shape (scikit-learn's "multilabel-indicator"; ``y_true``
    may also hold ``ignore_index``, the cells left out), else None.

    Costs nothing unless ``y_true`` is 2-D with more than one column (then one
    value read per non-bool input: :func:`_is_indicator`). Same-shape pairs
    with other values stay label maps (one class code per position), and
    ``(N, K, d1, ...)`` scores stay channel-first scores; a ``y_true``
    indicator beside a ``y_pred`` of another shape (or of scores) is an error
    naming both shapes, never a silent multiclass reading. So is a 0/1
    ``y_pred`` beside a ``y_true`` of its shape holding other values than
    0, 1 and ``ignore_index`` (padding, say): it would be a two-class label
    map, as scikit-learn refuses it (``refusing``: ``(function, what to
    use)`` of a caller that takes no multilabel input; else the advice is to
    pass ``ignore_index``, where the caller ``takes_ignore_index``).

    With ``validate=False`` and a ``num_classes`` other than L, a non-bool
    pair is taken for label maps of that many classes without reading it
    (validate=False reads nothing back where K is known).
    """
    true_shape = _shape_of(y_true)
    if len(true_shape) != 2 or true_shape[1] < 2:
        return None
    true = _to_backend(y_true, backend)
    if (not validate and num_classes is not None and num_classes != true_shape[1]
            and true.dtype.kind != "b"):
        return None
    pred_shape = _shape_of(y_pred)
    if len(pred_shape) > 2:
        return None  # channel-first scores with (N, d1) targets
    if not _is_indicator(true, backend.xp, cell_ignore_value(ignore_index, true.dtype)):
        if pred_shape == tuple(true.shape) and true.dtype.kind in "iuf":
            pred = _to_backend(y_pred, backend)
            if _is_indicator(pred, backend.xp):
                raise ValueError(_stray_targets(true, ignore_index, backend, names, refusing,
                                                takes_ignore_index))
        return None
    pred = _to_backend(y_pred, backend)
    same_shape = tuple(pred.shape) == tuple(true.shape)
    if same_shape and _is_indicator(pred, backend.xp):
        return true, pred
    if same_shape and pred.dtype.kind in "iub":
        return None  # a label map with class codes beyond 1
    raise ValueError(
        f"{names[0]} of shape {tuple(true.shape)} is a {MULTILABEL} matrix (0/1 per "
        f"label), so {names[1]} must be one too, of the same shape; got {names[1]} of "
        f"shape {tuple(pred.shape)}"
        + (" with values other than 0 and 1 (for scores, declare them: "
           "scores='probabilities' or 'logits', with threshold=)" if same_shape else "")
    )


def check_multilabel_inputs(y_true, y_pred, *, sample_weight=None, num_classes=None,
                            ignore_index=None, validate=True,
                            names: tuple[str, str] = ("y_true", "y_pred"),
                            scores: tuple[str, float] | None = None,
                            takes_ignore_index: bool = True) -> MultilabelInputs | None:
    """:class:`MultilabelInputs` when ``y_true`` and ``y_pred`` are one
    "multilabel-indicator" pair (:func:`multilabel_pair`), else None.

    ``num_classes``, if given, must be L. ``ignore_index`` (not 0 or 1) is
    the value of the ``y_true`` cells left out one by one, as
    :class:`~metrics_gpu.MultilabelMetrics` leaves them out. ``scores``
    (:func:`check_score_kind`'s): ``y_pred`` holds (N, L) scores of that
    kind, cut at the threshold; then ``y_true`` must be an indicator matrix
    (an error otherwise), and with ``validate`` the scores are checked
    (finite; probabilities in [0, 1]). ``takes_ignore_index``: whether the
    caller takes ``ignore_index`` (a message may then suggest it).
    """
    if not is_label_indicator(y_true):
        if scores is not None:
            raise ValueError(
                f"scores={scores[0]!r} declares (N, L) multilabel scores in {names[1]}, so "
                f"{names[0]} must be an (N, L) indicator matrix (0/1 per label); got shape "
                f"{_shape_of(y_true)}. (N, K) class scores of single-label input go in "
                f"{names[1]} without scores=")
        return None
    if not isinstance(validate, bool):
        raise ValueError(f"validate must be True or False, got {validate!r}")
    backend = resolve_backend(y_true, y_pred, sample_weight)
    num_classes = check_num_classes(num_classes)
    ignore_index = check_ignore_index(ignore_index)
    if scores is not None:
        true, pred = _scores_pair(y_true, y_pred, backend, names, scores[0], validate,
                                  ignore_index, takes_ignore_index)
    else:
        pair = multilabel_pair(y_true, y_pred, backend, names, num_classes=num_classes,
                               validate=validate, ignore_index=ignore_index,
                               takes_ignore_index=takes_ignore_index)
        if pair is None:
            return None
        true, pred = pair
    n, labels = true.shape
    if num_classes is not None and num_classes != labels:
        raise ValueError(
            f"{names[0]} is a {MULTILABEL} matrix with {labels} labels (columns) but "
            f"num_classes={num_classes}"
        )
    if ignore_index in (0, 1):
        raise ValueError(
            f"ignore_index={ignore_index} is a target value of {MULTILABEL} input: "
            f"ignore_index leaves out the cells of {names[0]} holding another value "
            "(padding, such as -100), one by one")
    weight = check_sample_weight(sample_weight, n, backend, validate, allow_all_zero=False,
                                 true_name=names[0])
    ignore = cell_ignore_value(ignore_index, true.dtype)
    if scores is None:
        return MultilabelInputs(y_true=true, y_pred=pred, sample_weight=weight,
                                backend=backend, source=y_true, ignore_index=ignore)
    kind, threshold = scores
    return MultilabelInputs(y_true=true, y_pred=pred, sample_weight=weight, backend=backend,
                            source=y_true, mode=kind, cut=score_cut(threshold, kind),
                            ignore_index=ignore)


def _scores_pair(y_true, y_pred, backend, names, kind: str, validate: bool,
                 ignore_index: int | None = None, takes_ignore_index: bool = True):
    """``(y_true, y_pred)`` on ``backend``: an indicator matrix (0/1, or
    ``ignore_index``) beside (N, L) scores of the declared ``kind`` (finite;
    probabilities in [0, 1])."""
    true = _to_backend(y_true, backend)
    if not _is_indicator(true, backend.xp, cell_ignore_value(ignore_index, true.dtype)):
        where = ""
        if true.ndim == 2 and true.shape[1] > 1 and true.dtype.kind in "iuf" and true.size:
            first, value = _first_stray_target(true, ignore_index, backend)
            where = (f"; found {value!r} at {_position(first, true.shape)} "
                     f"({_ignore_hint(value, ignore_index, takes_ignore_index)})")
        raise ValueError(
            f"scores={kind!r} declares (N, L) multilabel scores in {names[1]}, so {names[0]} "
            "must be an (N, L) indicator matrix holding only 0 and 1"
            + ("" if ignore_index is None else f" (and ignore_index={ignore_index})") + where)
    pred = _to_backend(y_pred, backend)
    if tuple(pred.shape) != tuple(true.shape):
        raise ValueError(
            f"{names[1]} must be (N, L) scores of {names[0]}'s shape {tuple(true.shape)}; got "
            f"shape {tuple(pred.shape)}")
    if pred.dtype.kind not in "fiub":
        raise ValueError(f"{names[1]} must hold numeric scores, got dtype {pred.dtype}")
    if validate:
        if pred.dtype.kind == "f":
            _check_finite_scores(pred, backend, names[1])
        if kind == "probabilities":
            i = _first_true((pred < 0) | (pred > 1), backend)
            if i is not None:
                raise ValueError(
                    f"{names[1]}: scores='probabilities' declares probabilities in [0, 1]; "
                    f"found {pred.reshape(-1)[i].item()!r} at {_position(i, pred.shape)} "
                    "(scores='logits' for logits)")
    return true, pred


def refuse_multilabel(y_true, y_pred, function: str | None, instead: str,
                      names: tuple[str, str] = ("y_true", "y_pred"), *,
                      num_classes=None, validate=True, ignore_index=None) -> None:
    """A ValueError when ``y_true`` and ``y_pred`` are "multilabel-indicator"
    input, which ``function`` does not support (``instead``: what to use;
    ``num_classes``, ``validate`` and ``ignore_index`` as :func:`multilabel_pair`
    takes them: a 0/1 ``y_pred`` beside a ``y_true`` of its shape holding
    other values is refused too, never read as a two-class label map)."""
    if not is_label_indicator(y_true):
        return
    what = "this function" if function is None else function
    backend = resolve_backend(y_true, y_pred)
    ignore_index = check_ignore_index(ignore_index)
    pair = multilabel_pair(y_true, y_pred, backend, names,
                           num_classes=check_num_classes(num_classes), validate=validate,
                           ignore_index=ignore_index, refusing=(what, instead))
    if pair is None:
        return
    held = "0 and 1" if ignore_index is None else f"0, 1 and ignore_index={ignore_index}"
    raise ValueError(
        f"{what} does not support {MULTILABEL} input: {names[0]} and {names[1]} of shape "
        f"{tuple(pair[0].shape)} hold only {held} (one column per label); {instead}. "
        "Binary label maps (one class code per position) are read as such once "
        "flattened: pass y_true.reshape(-1) and y_pred.reshape(-1)"
    )


MULTILABEL_INSTEAD = (
    "use multilabel_confusion_matrix for per-label counts, or the multilabel forms of "
    "accuracy_score, hamming_loss, precision/recall/f1/fbeta/jaccard_score and "
    "classification_report"
)


# -- multilabel ranking metrics: (N, L) indicators (or relevance) with scores ----------


@dataclass(frozen=True)
class IndicatorInputs:
    """Checked ``(y_true, y_score, sample_weight)`` of a multilabel ranking metric."""

    y_true: Any           # (N, L) bool: relevant labels (float64 relevance for DCG)
    y_score: Any          # (N, L) numeric scores, their own dtype (ranks need only order)
    sample_weight: Any    # (N,) or None
    backend: Any
    source: Any = None    # the caller's y_true: results go back to its framework and device


def is_label_indicator(y_true) -> bool:
    """Whether ``y_true`` may be an (N, L) label indicator matrix, L >= 2, by
    its shape only (nothing is read; (N, 1) columns stay binary labels, as
    scikit-learn's ``type_of_target`` has them). An array of class codes is
    ruled out with two builtin calls, before any backend is resolved (the
    functional hot path's budget)."""
    shape = getattr(y_true, "shape", None)
    if shape is None:
        try:
            shape = np.shape(y_true)
        except ValueError:  # ragged nested lists: not a matrix
            return False
    return len(shape) == 2 and shape[1] >= 2


def check_indicator_inputs(y_true, y_score, sample_weight=None, *, function: str,
                           min_labels: int = 1, validate: bool = True,
                           allow_all_zero: bool = False, graded: bool = False) -> IndicatorInputs:
    """An (N, L) 0/1 indicator (any int, bool or float dtype), (N, L) finite
    scores and (N,) finite non-negative weights, not all 0, on one backend.

    Reads back one flag per check (and a position when a check fails), never
    the data. Without ``validate`` scores and weights are not read (shapes and
    types still are); the indicator's values always are. ``min_labels``: the
    fewest label columns ``function`` takes (scikit-learn's ranking loss and
    coverage error refuse one column, as a binary target). ``allow_all_zero``
    leaves weights that are all 0 to the caller (scikit-learn's weighted
    multilabel ROC AUC and average precision are 0 there). ``graded``: y_true
    holds any finite relevance values (DCG), returned as float64.
    """
    backend = resolve_backend(y_true, y_score, sample_weight)
    xp = backend.xp
    labels = _to_backend(y_true, backend)
    if graded and labels.ndim != 2:
        raise ValueError(
            f"{function}: y_true must be an (N, L) matrix of true relevance (one row of L "
            f"documents or labels per sample), got shape {tuple(labels.shape)}"
        )
    if labels.ndim != 2:
        raise ValueError(
            f"{function}: y_true must be an (N, L) label indicator matrix (1 where a label is "
            f"relevant, else 0), got shape {tuple(labels.shape)}"
        )
    if labels.shape[1] < min_labels:
        raise ValueError(
            f"{function}: y_true has {labels.shape[1]} label column(s); at least {min_labels} "
            "are needed (scikit-learn: binary format is not supported)"
        )
    if labels.dtype.kind not in "biuf":
        raise ValueError(f"{function}: y_true must be numeric, got dtype {labels.dtype}")
    if graded:
        labels = labels.astype(np.float64)
        i = _first_nonfinite(labels, backend)
        if i is not None:
            raise ValueError(
                f"{function}: y_true must hold finite relevance values; found "
                f"{labels.reshape(-1)[i].item()!r} at {_position(i, labels.shape)}"
            )
    elif labels.dtype.kind != "b":
        i = _first_true(xp.not_equal(labels, 0) & xp.not_equal(labels, 1), backend)
        if i is not None:
            raise ValueError(
                f"{function}: y_true must hold 0/1 label indicators; found "
                f"{labels.reshape(-1)[i].item()!r} at {_position(i, labels.shape)}. "
                f"{function} takes no ignore_index (each row is ranked, or each label "
                "scored, over all its cells): leave out the rows holding other values "
                "first, e.g. y_true[keep], y_score[keep] with keep = ((y_true == 0) | "
                "(y_true == 1)).all(axis=1)"
            )
        labels = xp.not_equal(labels, 0)
    scores = _to_backend(y_score, backend)
    if scores.dtype.name == "bfloat16" or scores.dtype == np.float16:
        scores = scores.astype(np.float32)  # exact; NumPy cannot sort bfloat16
    if scores.dtype.kind not in "fiub":
        raise ValueError(f"{function}: y_score must hold numeric scores, got dtype {scores.dtype}")
    if tuple(scores.shape) != tuple(labels.shape):
        raise ValueError(
            f"{function}: y_true and y_score must have the same shape (N, L); got "
            f"{tuple(labels.shape)} and {tuple(scores.shape)}"
        )
    n = labels.shape[0]
    if n == 0 or labels.shape[1] == 0:
        raise ValueError(
            f"{function}: y_true and y_score are empty (shape {tuple(labels.shape)}); at least "
            "one sample and one label are required"
        )
    if validate and scores.dtype.kind == "f":
        _check_finite_scores(scores, backend, f"{function}: y_score")
    weight = check_sample_weight(sample_weight, n, backend, validate=validate,
                                 allow_all_zero=allow_all_zero)
    if weight is not None:
        weight = weight.astype(np.float64)
    return IndicatorInputs(labels, scores, weight, backend, source=y_true)



def check_rank_cutoff(k):
    """``k`` of the DCG scores: an integer >= 1, or None (every label)."""
    if k is None:
        return None
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"k must be an integer >= 1 or None, got {k!r}")
    return int(k)


def check_log_base(log_base) -> float:
    """``log_base`` of the DCG discount: a number > 0."""
    if (isinstance(log_base, bool) or not isinstance(log_base, numbers.Real)
            or not float(log_base) > 0):
        raise ValueError(f"log_base must be a number > 0, got {log_base!r}")
    return float(log_base)
