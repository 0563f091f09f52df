"""The parameters many public functions share, documented once.

A public function's numpydoc ``Parameters`` section names a shared parameter
as a line holding only ``{name}`` (e.g. ``    {sample_weight}``);
:func:`shared_parameters` replaces that line with the text below, indented
as the line was. Any other text of the docstring is left as written (braces
in examples included), and a ``{name}`` that is not listed here fails at
import, not in a user's help page.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from typing import TypeVar

PARAMETERS = {
    "y_true_labels": """\
y_true : array-like of shape (N,)
    The true class codes (integers; K from num_classes, or the classes
    present).""",
    "y_pred_labels": """\
y_pred : array-like of shape (N,) or (N, K)
    Predicted class codes, or (N, K) scores or logits, reduced by a fused
    argmax (ties to the lowest index; no (N,) labels are stored).""",
    "y_true_multilabel": """\
y_true : array-like of shape (N,) or (N, L)
    The true class codes (integers; K from num_classes, or the classes
    present), or a multilabel indicator matrix: (N, L) 0/1 values, one
    column per label (int, bool or float; scikit-learn's
    "multilabel-indicator", then scored as scikit-learn scores it).""",
    "y_pred_multilabel": """\
y_pred : array-like of shape (N,), (N, K) or (N, L)
    Predicted class codes, or (N, K) scores or logits, reduced by a fused
    argmax (ties to the lowest index); with an indicator ``y_true``, an
    indicator matrix of its shape. Telling a 2-D 0/1 pair from label maps
    reads one value back (a sync on a GPU); bool reads none, nor does
    ``validate=False`` with a ``num_classes`` other than L (label maps).""",
    "labels": """\
labels : array-like of class codes, optional
    Select and order the classes (scikit-learn); samples whose true or
    predicted class is not listed are left out.""",
    "labels_set_wise": """\
labels : array-like of class codes, optional
    The classes to score and their order (scikit-learn), when ``average``
    is not "binary"; the averages run over them. Samples are not left out:
    one of another class still counts as a false positive or a false
    negative of a listed class.""",
    "num_classes": """\
num_classes : int, optional
    K, the number of classes; the codes must lie in [0, K). Given (or
    implied by (N, K) scores), the results have K classes; omitted, the
    classes present in either input, as scikit-learn.""",
    "sample_weight": """\
sample_weight : array-like of shape (N,), optional
    Non-negative weight of each sample. Counts stay integers without weights
    or with integer weights (exact), else float64.""",
    "ignore_index": """\
ignore_index : int, optional
    Samples whose target equals this value are left out (a padding or
    void class). Of a multilabel indicator ``y_true`` (0, 1 or this value;
    0 and 1 refused), the cells holding it are left out one by one, as
    :class:`MultilabelMetrics` leaves them out: such a cell counts in no
    label and in no sample's rates, nor in the Hamming loss's cells; a
    sample whose other cells all match is an exact match (and its rates
    are 0/0 where all its cells are ignored).""",
    "validate": """\
validate : bool, default True
    False skips the checks that cost a pass (and a host sync on a GPU):
    out-of-range samples are then left out and counted, never written out
    of bounds. Where K is known without reading the data (``num_classes``,
    or ``(N, K)`` scores), the label metrics then read nothing back on a
    GPU, so scikit-learn's warnings that need counts (zero division,
    classes absent from ``y_true``) are not given; and a later call with
    inputs of the same layout (types, dtypes, trailing shape, strides,
    device) reuses its launches (docs/usage.md, "In-loop validation").""",
    "multilabel_scores": """\
scores : {"probabilities", "logits"}, optional
    Multilabel input only: ``y_pred`` holds (N, L) scores of this kind, and
    a label is predicted where its score is above ``threshold`` (a logit
    ``x`` where its sigmoid is: ``x > log(t / (1 - t))``, that cut computed
    in float64). One rule on every backend: the score's value (widened
    exactly to float64, whatever its dtype) against the threshold's, never
    the threshold rounded to the scores' dtype (a float32 0.3, which is
    0.30000001..., is above threshold=0.3; a float32 0.7, 0.69999999..., is
    not above threshold=0.7). None: ``y_pred`` holds 0/1 labels. Declared,
    never guessed from the values; with ``validate`` the scores are
    checked (finite; probabilities in [0, 1]).
threshold : float, default 0.5
    The probability a label's score must exceed (with ``scores``); a score
    equal to it predicts no label.""",
    "deterministic": """\
deterministic : bool, default False
    Float weights on a GPU: True accumulates them in 64-bit fixed point
    instead of float64 atomics, whose order varies, so the result is
    bit-identical run to run (error at most ``max|w| * N * 2**-61`` per
    weight). Counts, integer weights and the NumPy backend are exact and
    deterministic either way.""",
    "zero_division": """\
zero_division : {"warn", 0.0, 1.0, np.nan}, default "warn"
    The value of a ratio whose denominator is 0; "warn" gives 0 and warns
    (scikit-learn's UndefinedMetricWarning).""",
    "average": """\
average : {"binary", "micro", "macro", "weighted", "samples"} or None, default "binary"
    None: one value per class. "binary": the class ``pos_label`` of a
    two-class problem. "micro": from the summed counts. "macro": the
    unweighted mean over classes. "weighted": the mean weighted by support.
    "samples" (multilabel-indicator input only): the mean over samples of
    each sample's value over its labels.""",
    "pos_label": """\
pos_label : int, default 1
    The positive class when ``average="binary"``.""",
}

_MARKER = re.compile(r"^([ \t]*)\{(\w+)\}[ \t]*$", re.M)

Function = TypeVar("Function", bound=Callable)


def expand(doc: str) -> str:
    """``doc`` with each ``{name}`` line replaced by the shared text of ``name``."""

    def replace(match: re.Match) -> str:
        indent, name = match.groups()
        if name not in PARAMETERS:
            raise KeyError(f"no shared documentation for parameter {name!r}")
        return textwrap.indent(PARAMETERS[name], indent)

    return _MARKER.sub(replace, doc)


def shared_parameters(function: Function) -> Function:
    """Decorator: expand the shared parameters in ``function``'s docstring."""
    if function.__doc__:
        function.__doc__ = expand(function.__doc__)
    return function
