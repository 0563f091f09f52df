"""Score inputs: targets with (N, K) scores (or a binary problem's one column)
for the fused score pass, and the tests and messages of scores that are, or
look like, probabilities."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from metrics_gpu.backends.selection import resolve_backend
from metrics_gpu._formulas.labels import warn
from metrics_gpu._formulas.tolerance import (
    HALF_PRECISION_SUM_TOLERANCE,
    probability_sum_tolerance,
    score_dtype_eps,
)
from metrics_gpu._validation.common import (
    _as_scores,
    _first_true,
    _position,
    _row_chunks,
    _shape_of,
    _to_backend,
    check_ignore_index,
    check_option,
    check_sample_weight,
)
from metrics_gpu._validation.labels import (
    _as_label_array,
    _label_range,
    _map_shape,
    _negative_label_hint,
    check_labels_argument,
    flatten_positions,
)


SCORE_KINDS = ("probabilities", "logits", "decision")


# With scikit-learn's labels=, targets become column positions; a row whose
# target is ignore_index becomes this position (neither a column nor the -1
# of a code not in labels), which the backends skip as their ignore_index.
IGNORED_POSITION = -2


@dataclass(frozen=True)
class ScoreInputs:
    """Checked ``(y_true, scores)``, ready for the fused score pass."""

    y_true: Any           # (N,) positions of the target among the score columns
    scores: Any           # (N, K); 1-D binary scores arrive as two columns
    sample_weight: Any
    num_classes: int
    ignore_index: int | None  # the target (with labels=, the position) of skipped rows
    guard: bool
    backend: Any
    source: Any = None    # the caller's y_true: results go back to its framework
    binary_column: bool = False  # the caller gave one column (the positive class)


def _first_outside_unit_range(values, backend) -> tuple[tuple[int, ...], float] | None:
    """The index and value of the first score outside [0, 1], or None: two
    reductions (no temporaries) per chunk of rows (:func:`_row_chunks`), a
    mask only where one fails. NaN is not found here (the finiteness checks
    name it)."""
    xp = backend.xp
    for start, rows in _row_chunks(values):
        if not (rows.size and bool(xp.less(rows.min(), 0) | xp.greater(rows.max(), 1))):
            continue
        i = _first_true(xp.less(rows, 0) | xp.greater(rows, 1), backend)
        if i is None:
            continue
        in_chunk = np.unravel_index(i, rows.shape)
        return (start + int(in_chunk[0]), *(int(v) for v in in_chunk[1:])), \
            rows[in_chunk].item()
    return None


def _check_probability_range(values, name: str, backend, takes_logits: bool,
                             logits_option: str = "from_logits=True") -> None:
    """Refuse a score outside [0, 1], naming the first. ``takes_logits``: the
    caller also reads logits, which ``logits_option`` (the caller's way to
    say so) selects; the message suggests it."""
    first = _first_outside_unit_range(values, backend)
    if first is None:
        return
    index, found = first
    hint = f"; for logits (raw scores), pass {logits_option}" if takes_logits else ""
    raise ValueError(
        f"{name} must hold probabilities in [0, 1]; found {found!r} at "
        f"{'index' if values.ndim == 1 else 'row, column'} "
        f"{index[0] if values.ndim == 1 else index}{hint}"
    )


# Scores read as logits warn when at least this share of their rows are rows
# of probabilities (not every row: a few rows of a half-precision softmax may
# miss any tolerance, and a few rows of a file may be damaged). Logits almost
# never have a single row in [0, 1] summing to 1.
PROBABILITY_ROWS_SHARE = 0.99


def _format_value(value: float) -> str:
    """A score or row sum for a message: six significant digits (1.00038,
    0.999649), not a float32's widened repr (1.0003776550292969); a value
    that these would round to 0 or 1 (1.0000001, just outside [0, 1]) as the
    shortest text of its float32 (or float64) value."""
    text = f"{value:.6g}"
    if float(text) in (0.0, 1.0) and value not in (0.0, 1.0):
        single = np.float32(value)
        text = str(single) if float(single) == value else repr(value)
    return text


def first_non_probability_row(values, backend, dtype=None) -> tuple[int, str, bool] | None:
    """The first row of ``values`` that is not a row of probabilities, what
    is wrong with it, and whether only its sum is (its values are in [0, 1]);
    None when every row is. ``(N, K)`` rows must hold values
    in [0, 1] summing to 1 within :func:`probability_sum_tolerance` of their
    type; an ``(N,)`` column (the positive class's probability) values in
    [0, 1]. Reductions per chunk of rows; a mask only where one fails.
    ``dtype``: the type the rows were given in, where ``values`` are widened
    (bfloat16 rows read as float32)."""
    first = _first_outside_unit_range(values, backend)
    outside = None
    if first is not None:
        index, found = first
        where = "" if values.ndim == 1 else f" in column {index[1]}"
        outside = index[0], f"{_format_value(found)}{where}, outside [0, 1]", False
    if values.ndim != 2:
        return outside
    xp = backend.xp
    tolerance = probability_sum_tolerance(values.dtype if dtype is None else dtype)
    # Only the rows before the first value out of range can come first.
    for start, rows in _row_chunks(values if outside is None else values[:outside[0]],
                                   chunked=True):
        sums = rows.sum(axis=1, dtype=np.float64)
        i = _first_true(xp.abs(sums - 1) > tolerance, backend)
        if i is not None:
            return start + i, (f"values in [0, 1] summing to {_format_value(sums[i].item())}, "
                               f"not 1 (within {tolerance:.2g})"), True
    return outside


def declared_probabilities_refused(where: str, problem: str, sum_only: bool, *,
                                   declared: str, logits_option: str) -> str:
    """The message for scores declared probabilities (``declared``: the
    caller's words, ``scores='probabilities'`` or ``--scores-are
    probabilities``) of which ``where`` holds ``problem``. A row that fails
    only the sum is probabilities rounded or not normalized: the fix is to
    divide each row by its sum, not to read them as logits (which gives wrong
    metrics); values outside [0, 1] are logits, which ``logits_option``
    declares."""
    if sum_only:
        return (f"{where} holds {problem}: rows of probabilities, as {declared} declares, "
                "must sum to 1; if these are probabilities (rounded, or not normalized), "
                "divide each row by its sum before passing them (read as logits they would "
                "give wrong metrics)")
    return (f"{where} holds {problem}: not probabilities, as {declared} declares (for "
            f"logits, {logits_option})")


def count_non_probability_rows(values, backend, dtype=None, limit=None, *,
                               sums: bool = True) -> int:
    """How many rows of ``values`` are not rows of probabilities (the rule of
    :func:`first_non_probability_row`; NaN rows are not); counting stops at the
    first chunk that takes the count past ``limit``. ``sums=False``: per-label
    probabilities (multilabel), every value in [0, 1] and no sum. Three row
    reductions per chunk of rows, one count read back each."""
    xp = backend.xp
    tolerance = probability_sum_tolerance(values.dtype if dtype is None else dtype)
    count = 0
    for _, rows in _row_chunks(values, chunked=True):
        if rows.ndim == 1:
            ok = xp.greater_equal(rows, 0) & xp.less_equal(rows, 1)
        else:
            ok = xp.greater_equal(rows.min(axis=1), 0) & xp.less_equal(rows.max(axis=1), 1)
            if sums:
                gap = xp.abs(xp.subtract(rows.sum(axis=1, dtype=np.float64), 1))
                ok &= xp.less_equal(gap, tolerance)
        count += int(rows.shape[0]) - int(xp.count_nonzero(ok))
        if limit is not None and count > limit:
            break
    return count


def allowed_non_probability_rows(rows: int) -> int:
    """How many of ``rows`` rows may fail and the scores still look like
    probabilities: the rows past :data:`PROBABILITY_ROWS_SHARE`."""
    return rows - math.ceil(PROBABILITY_ROWS_SHARE * rows - 1e-9)


def probability_rows(values, backend, dtype=None, *, sums: bool = True) -> int | None:
    """How many rows of scores are rows of probabilities, when at least
    :data:`PROBABILITY_ROWS_SHARE` of them (not empty) are; else None (the
    count stops early: logits fail from their first rows). ``sums``: as
    :func:`count_non_probability_rows`."""
    n = int(values.shape[0]) if values.ndim else 0
    if not values.size or not n:
        return None
    allowed = allowed_non_probability_rows(n)
    failed = count_non_probability_rows(values, backend, dtype, limit=allowed, sums=sums)
    return None if failed > allowed else n - failed


def probabilities_read_as_logits(name: str, option: str, *, rows: int | None = None,
                                 total: int | None = None, binary: bool = False,
                                 default: bool = True) -> str:
    """The warning for scores read as logits that look like probabilities,
    naming the ``option`` that declares them. ``rows`` of ``total`` rows are
    rows of probabilities (every row when not given or equal). ``binary``:
    ``(N,)`` scores of the positive class, where a logit above 0 predicts it,
    so probabilities read as logits predict it for every sample: the label
    metrics are wrong too, not only the score metrics. ``default``: logits
    are the caller's default kind (said so in the message)."""
    every = rows is None or rows == total
    read = "read as logits (the default)" if default else "read as logits"
    if binary:
        share = "every score is" if every else f"{rows:,} of {total:,} scores are"
        return (f"{name}: {share} in [0, 1], as probabilities of the positive class are, "
                f"but the scores are {read}, where a score above 0 "
                "predicts the positive class: every sample with a score above 0 is predicted "
                f"positive; pass {option} if they are probabilities, else the label metrics "
                "(accuracy, F1, every predicted label) and the score metrics are wrong")
    share = "every row is" if every else f"{rows:,} of {total:,} rows are"
    return (f"{name}: {share} in [0, 1] and {'sums' if every else 'sum'} to 1 (within "
            f"{HALF_PRECISION_SUM_TOLERANCE:.2g}), as probabilities do, but the scores are "
            f"{read}; pass {option} if they are probabilities, else "
            "the score metrics are wrong")


def label_probabilities_read_as_logits(name: str, option: str, *, rows: int | None = None,
                                       total: int | None = None) -> str:
    """The warning for multilabel scores read as logits (the default) whose
    rows (``rows`` of ``total``; every row when not given or equal) hold
    values in [0, 1] only, as per-label probabilities do; ``option`` declares
    them. Read as logits, a label is predicted where sigmoid(x) passes the
    threshold: at 0.5, every label of a probability above 0."""
    share = ("every score is" if rows is None or rows == total
             else f"the scores of {rows:,} of {total:,} rows are")
    return (f"{name}: {share} in [0, 1], as probabilities are, but the scores are read as "
            "logits (the default), a label predicted where sigmoid(score) passes the "
            f"threshold; pass {option} if they are probabilities, else the metrics (every "
            "predicted label included) are wrong")


def renamed_proba(y_proba, y_pred):
    """scikit-learn 1.9's rename of ``y_pred`` to ``y_proba`` (``log_loss``,
    ``d2_log_loss_score``): ``y_pred`` still works, with its FutureWarning;
    both at once is a ValueError."""
    if isinstance(y_pred, str) and y_pred == "deprecated":
        return y_proba
    if y_proba is not None:
        raise ValueError("Cannot use both `y_pred` and `y_proba`. `y_pred` is deprecated, use "
                         "`y_proba` instead.")
    warn("`y_pred` was renamed to `y_proba` in version 1.9 and will be removed in 1.11. Use "
         "`y_proba` instead.", FutureWarning)
    return y_pred


def one_hot_target_codes(y_true, scores, labels=None, name: str = "y_proba"):
    """scikit-learn's label-indicator ``y_true`` of ``log_loss``: ``(N, K)``
    one-hot rows (0/1, one 1 each) become the ``(N,)`` codes of their 1s,
    column ``k`` being class ``k``. Any other ``y_true`` is returned as it is.
    One flag read back (and a row index when a row is not one-hot)."""
    shape = _shape_of(y_true)
    if len(shape) != 2 or shape[1] == 1:
        return y_true
    backend = resolve_backend(y_true, scores)
    xp = backend.xp
    indicator = _to_backend(y_true, backend)
    if indicator.dtype.kind not in "biuf":
        raise ValueError(f"y_true of shape {tuple(indicator.shape)} must be a 0/1 label "
                         f"indicator matrix, got dtype {indicator.dtype}")
    if labels is not None:
        raise ValueError("labels cannot be given with a label indicator y_true: its columns "
                         "are the classes 0..K-1 of the score columns")
    width = shape[1]
    score_shape = _shape_of(scores)
    score_columns = 2 if len(score_shape) == 1 or score_shape[1] == 1 else score_shape[1]
    if width != score_columns:
        raise ValueError(f"y_true and {name} contain different number of classes: {width} vs "
                         f"{score_columns} (y_true is a label indicator matrix of shape "
                         f"{tuple(shape)})")
    ones = xp.equal(indicator, 1)
    row = _first_true(~(ones | xp.equal(indicator, 0)).all(axis=1)
                      | xp.not_equal(ones.sum(axis=1), 1), backend)
    if row is not None:
        raise ValueError(f"y_true is a label indicator matrix, but row {row} is not one-hot "
                         "(one 1, the rest 0); only one class per sample is supported")
    # In y_true's framework, where the results go.
    return backend.to_framework(xp.argmax(ones, axis=1), y_true)


def check_score_inputs(y_true, scores, *, name: str = "y_score", kind: str = "probabilities",
                       sample_weight=None, labels=None, ignore_index=None, validate=True,
                       binary_threshold=None, allow_all_zero_weight=True,
                       takes_logits: bool = False,
                       weight_name: str = "sample_weight") -> ScoreInputs:
    """Check targets and ``(N, K)`` scores (or ``(N,)`` scores of class 1).

    ``kind`` says what the scores are: ``"probabilities"`` (in [0, 1]; rows
    that do not sum to 1 warn, as scikit-learn), ``"logits"`` or
    ``"decision"`` values (any finite number). One column of binary scores
    becomes two: ``[1 - p, p]`` for probabilities, ``[threshold, z]`` else
    (``binary_threshold``, default 0). ``labels`` (scikit-learn's) lists the
    class codes of the columns; targets are mapped to column positions, and
    the rows whose target is ``ignore_index`` to :data:`IGNORED_POSITION`.
    ``takes_logits`` says that the caller has ``from_logits=``, which a
    probability out of [0, 1] then suggests. Scores of kind ``"logits"``
    that look like probabilities (:func:`probability_rows`) warn, with
    ``validate`` only (without it nothing is read). ``weight_name`` is the caller's
    name of ``sample_weight`` (CatBoost's ``weight``), for the messages.
    """
    if not isinstance(validate, bool):
        raise ValueError(f"validate must be True or False, got {validate!r}")
    check_option(kind, SCORE_KINDS, "kind")
    backend = resolve_backend(y_true, scores, sample_weight)
    xp = backend.xp
    ignore_index = check_ignore_index(ignore_index)
    source = y_true
    true_shape = _shape_of(y_true)
    y_true, scores = flatten_positions(y_true, scores, backend, name)
    map_shape = _map_shape(true_shape, y_true)
    targets = _as_label_array(y_true, "y_true", backend, validate, targets=True)
    values = _as_scores(scores, name, backend, validate)
    binary_column = values.ndim == 1 or (values.ndim == 2 and values.shape[1] == 1)
    if values.ndim not in (1, 2):
        raise ValueError(f"{name} must be (N,) or (N, K) scores, got shape {tuple(values.shape)}")
    n = targets.shape[0]
    if n == 0:
        raise ValueError("y_true is empty; at least one sample is required")
    if values.shape[0] != n:
        raise ValueError(f"y_true has {n} samples but {name} has {values.shape[0]} rows")
    if values.ndim == 2 and values.shape[1] == 0:
        raise ValueError(
            f"{name} has no score columns (shape {tuple(values.shape)}); scores need at least "
            "one column: (N, K) per-class scores, or the (N,) or (N, 1) scores of class 1 of "
            "a binary problem"
        )
    weight = check_sample_weight(sample_weight, n, backend, validate, allow_all_zero_weight,
                                 targets, ignore_index, name=weight_name)
    if validate and kind == "probabilities":
        _check_probability_range(values, name, backend, takes_logits)
    if validate and kind == "logits":
        # Probabilities read as logits (the default of the calls that take
        # both): a few reductions with the checks' reads; none without them.
        found = probability_rows(values.reshape(n) if binary_column else values, backend)
        if found is not None:
            warnings.warn(probabilities_read_as_logits(name, "from_logits=False", rows=found,
                                                       total=n, binary=binary_column,
                                                       default=False),
                          UserWarning, stacklevel=3)
    if binary_column:
        column = values.reshape(n)
        if column.dtype.kind in "iub":
            column = column.astype(np.float64)
        if kind == "probabilities":
            values = xp.stack([1 - column, column], axis=1)
        else:
            threshold = xp.full(column.shape, 0 if binary_threshold is None else binary_threshold,
                                dtype=column.dtype)
            values = xp.stack([threshold, column], axis=1)
    num_classes = int(values.shape[1])
    if validate and kind == "probabilities" and not binary_column:
        rtol = math.sqrt(score_dtype_eps(values.dtype))  # scikit-learn's tolerance
        if any(bool(xp.any(xp.greater(
                xp.abs(xp.subtract(rows.sum(axis=1, dtype=np.float64), 1)), rtol)))
               for _, rows in _row_chunks(values)):
            # Attributed to the caller's line, however deep the check ran.
            warn("The y_prob values do not sum to one. Make sure to pass probabilities.",
                 UserWarning)
    classes = check_score_labels(labels, num_classes, name, backend)
    if classes is not None:
        lookup = np.full(int(classes[-1]) + 2, -1, dtype=np.int64)
        lookup[classes] = np.arange(num_classes)
        codes = targets.astype(np.int64)
        # Codes outside the table read its last slot, -1 (not a column).
        outside = xp.less(codes, 0) | xp.greater(codes, classes[-1])
        positions = xp.take(backend.asarray(lookup), xp.where(outside, -1, codes))
        if ignore_index is not None:
            # The ignored rows are those whose target (not column) is
            # ignore_index; they get a position no column or unknown code has.
            ignored = xp.equal(targets, ignore_index)
            positions = xp.where(ignored, IGNORED_POSITION, positions)
            ignore_index = IGNORED_POSITION
        if validate:
            i = _first_true(xp.equal(positions, -1), backend)
            if i is not None:
                value = targets[i].item()
                hint = _negative_label_hint(value, True) if value < 0 else ""
                raise ValueError(
                    f"y_true contains {value!r} at {_position(i, map_shape)}, which is not in "
                    f"labels {classes.tolist()}{hint}"
                )
        targets = positions
    elif validate:
        _label_range(targets, "y_true", backend, num_classes, ignore_index, targets=True,
                     shape=map_shape)
    return ScoreInputs(
        y_true=targets, scores=values, sample_weight=weight, num_classes=num_classes,
        ignore_index=ignore_index, guard=not validate, backend=backend, source=source,
        binary_column=binary_column,
    )


def check_score_labels(labels, num_columns: int, name: str, backend) -> np.ndarray | None:
    """scikit-learn's ``labels=`` of the score functions: the class codes of
    the ``num_columns`` score columns, sorted; None: the columns are the codes
    ``0..K-1``. Read before any data (metrics_gpu.dask checks it so)."""
    if labels is None:
        return None
    classes = np.sort(check_labels_argument(labels, None, backend))
    if classes.size != num_columns:
        raise ValueError(f"labels has {classes.size} classes but {name} has {num_columns} columns")
    return classes
