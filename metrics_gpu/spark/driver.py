"""The driver's side of :func:`report`: the columns read and planned, the
classes and groups found in one aggregate where they are not given, one
``mapInArrow`` pass over the partitions (:mod:`metrics_gpu.spark.partition`),
the tasks' states merged and reported. The one module that imports Spark."""

from __future__ import annotations

import functools
import pickle
from collections.abc import Sequence
from typing import Any

import numpy as np

from metrics_gpu._common.extras import install_hint
from metrics_gpu._formulas.labels import reported_top_k
from metrics_gpu._multilabel.stream import MultilabelMetrics, MultilabelReport
from metrics_gpu._streaming.metrics import SCORE_KINDS, ClassificationMetrics
from metrics_gpu.backends.selection import backend_for_host_data
from metrics_gpu.files.evaluate import FileEvaluation, histogram_thresholds
from metrics_gpu.files.report import PredictionReport
from metrics_gpu.intervals import DEFAULT_RESAMPLES, check_interval_options

try:
    from pyspark.sql import functions as SF
    from pyspark.sql import types as T
except ImportError as error:  # pragma: no cover - the [spark] extra is missing
    raise ImportError(
        f"metrics_gpu.spark needs PySpark and pyarrow: {install_hint('spark')} "
        f"(importing it failed: {error})"
    ) from error

from metrics_gpu.spark.partition import RESULT_SCHEMA, PartitionPlan, partition_states

TASKS = ("auto", "multiclass", "multilabel")
_ROLES = ("y_true", "y_pred", "scores", "sample_weight", "groups")
_BATCH_ROWS = "spark.sql.execution.arrow.maxRecordsPerBatch"


def report(df, *, y_true: str = "label", y_pred: str | None = None, scores: str | None = None,
           sample_weight: str | None = None, groups: str | None = None, task: str = "auto",
           classes: Sequence | None = None, num_classes: int | None = None,
           ignore_index: Any = None, scores_are: str = "probabilities", top_k=(1, 5),
           n_bins: int = 15, thresholds: int | None = 1000, num_groups: int | None = None,
           class_names: Sequence[str] | None = None, threshold: float = 0.5,
           confidence_level: float | None = None, method: str = "percentile",
           n_resamples: int | None = None, rng: Any = None,
           backend: str = "auto") -> PredictionReport | MultilabelReport:
    """The report of a Spark DataFrame's predictions, in one pass over its partitions.

    Each task reads its partition's Arrow record batches (``mapInArrow``)
    into a :class:`metrics_gpu.ClassificationMetrics` state (or a
    :class:`metrics_gpu.MultilabelMetrics` one), on the executor's GPU where
    CuPy and a device are present (``backend="auto"``), else with NumPy, and
    returns the state's ``state_dict``; the driver merges them (``merge`` is
    exact: the merged state is the state of all the rows) and reports. Only
    the O(K) (or K x K, K x H) states travel to the driver, never a row.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
        The predictions, one row per sample (classic or Spark Connect).
    y_true : str, default "label"
        The targets' column: class codes (integers, or whole-valued
        floating-point numbers such as MLlib's ``label``), or labels of any
        other type (strings) with ``classes`` or found by the aggregate
        (below). For ``task="multilabel"``: an ``array<int>`` of 0/1 per row.
    y_pred : str, optional
        Predicted labels, read as ``y_true`` (MLlib's ``prediction``); for
        multilabel, an ``array<int>`` of 0/1.
    scores : str, optional
        ``(N, K)`` scores: an ``array<float>`` / ``array<double>`` column or a
        Spark ML vector (MLlib's ``probability``, ``rawPrediction``; read
        through :func:`pyspark.ml.functions.vector_to_array`), column ``k``
        the class at position ``k``; or a numeric column of class 1's score
        for a binary problem (K = 2). Label metrics come from ``y_pred`` when
        given, else from the scores' argmax. One of ``y_pred``, ``scores``
        is needed.
    sample_weight : str, optional
        A numeric column of weights (>= 0).
    groups : str, optional
        Each row's group: integer codes 0..G-1 (G = ``num_groups``, else the
        largest + 1), or categories of any other type (named by their value,
        sorted); ``report.labels.groups`` holds every label metric per group.
    task : {"auto", "multiclass", "multilabel"}, default "auto"
        "auto": multilabel when ``y_true`` is an array column.
    classes : sequence, optional
        The label values by position (the class of score column ``k`` is
        ``classes[k]``). Default: the label columns' codes as they are when
        they are integers and K is known (``num_classes``, the scores'
        width), else the distinct values of ``y_true`` and ``y_pred`` (less
        ``ignore_index``), sorted as scikit-learn's, found by one aggregate
        before the pass (with scores, their columns must then be in that
        order: a ``StringIndexer``'s label order is by frequency, pass its
        ``labels`` here).
    num_classes : int, optional
        K (L for multilabel). Default: ``len(classes)``, the scores' width,
        or the classes found.
    ignore_index : optional
        A value of ``y_true`` to leave out (for multilabel, a target cell
        value other than 0 and 1).
    scores_are : {"probabilities", "logits"}, default "probabilities"
        What the scores are (MLlib's ``probability`` is probabilities, its
        ``rawPrediction`` is not).
    top_k, n_bins : as :class:`metrics_gpu.ClassificationMetrics`.
    thresholds : int or None, default 1000
        H bins of the binned ROC AUC and average precision, reported with
        their error bound against the exact values (the exact ones need
        every score in one place; the pass never gathers the rows). None:
        no AUC.
    num_groups : int, optional
        G for integer group codes.
    class_names : sequence of str, optional
        The classes' names in the report (default: the label values).
    threshold : float, default 0.5
        Multilabel: a score counts as positive above it.
    confidence_level, method, n_resamples, rng
        The label metrics' intervals, as :func:`metrics_gpu.label_report`'s.
    backend : str, default "auto"
        The executors' backend: "auto" (the GPU when CuPy and a device are
        present), "numpy", "cuda" or "emulated".

    Returns
    -------
    metrics_gpu.files.PredictionReport or metrics_gpu.MultilabelReport
        Multiclass: the report ``metrics-gpu report`` gives for files, with
        ``labels`` (a :class:`metrics_gpu.LabelReport`, the in-memory
        :func:`metrics_gpu.label_report`'s of the same rows) and the score
        metrics (``streaming``: the merged state's
        :class:`metrics_gpu.StreamingReport`). Multilabel: the merged
        :class:`metrics_gpu.MultilabelMetrics` state's report.

    Raises
    ------
    ValueError
        A column missing or of a type not read; a bad value (a null, a label
        outside ``classes``, a score row of another length, a NaN, a negative
        weight ...), naming the column, the partition and the row within
        the partition; a DataFrame without rows.
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    if scores_are not in SCORE_KINDS:
        raise ValueError(f"scores_are must be one of {SCORE_KINDS}, got {scores_are!r}")
    if y_pred is None and scores is None:
        raise ValueError("give y_pred (a column of predicted labels) or scores (a column of "
                         "scores), or both")
    backend_for_host_data(backend)  # a name that cannot run is refused here, not per task
    names = {role: name for role, name in zip(_ROLES, (y_true, y_pred, scores, sample_weight,
                                                       groups)) if name is not None}
    fields = _fields(df, names)
    multilabel = isinstance(fields["y_true"].dataType, T.ArrayType)
    if task == "auto":
        task = "multilabel" if multilabel else "multiclass"
    if (task == "multilabel") != multilabel:
        raise ValueError(f"task={task!r}, but the y_true column {y_true!r} is of type "
                         f"{fields['y_true'].dataType.simpleString()} (multilabel targets are "
                         "an array of 0/1 per row, multiclass ones a label per row)")
    intervals = check_interval_options(
        confidence_level, method, DEFAULT_RESAMPLES if n_resamples is None else n_resamples,
        rng)
    if task == "multilabel":
        return _multilabel(df, names, fields, num_classes=num_classes, scores_are=scores_are,
                           threshold=threshold, ignore_index=ignore_index,
                           thresholds=thresholds, backend=backend)
    return _multiclass(df, names, fields, classes=classes, num_classes=num_classes,
                       ignore_index=ignore_index, scores_are=scores_are, top_k=top_k,
                       n_bins=n_bins, thresholds=thresholds, num_groups=num_groups,
                       class_names=class_names, intervals=intervals, backend=backend)


# -- columns --------------------------------------------------------------------------


def _fields(df, names: dict[str, str]) -> dict[str, Any]:
    schema = getattr(df, "schema", None)
    if schema is None or not hasattr(df, "mapInArrow"):
        raise ValueError(f"df must be a Spark DataFrame (pyspark.sql.DataFrame), got "
                         f"{type(df).__name__}")
    by_name = {field.name: field for field in schema.fields}
    fields = {}
    for role, name in names.items():
        if name not in by_name:
            raise ValueError(f"{role}={name!r}: no such column; the DataFrame has "
                             f"{list(by_name)}")
        fields[role] = by_name[name]
    return fields


def _is_vector(kind) -> bool:
    return type(kind).__name__ == "VectorUDT"


def _is_integral(kind) -> bool:
    return isinstance(kind, (T.ByteType, T.ShortType, T.IntegerType, T.LongType))


def _is_code(kind) -> bool:
    """Labels read as class codes: integers, or whole-valued floats."""
    return _is_integral(kind) or isinstance(kind, (T.FloatType, T.DoubleType))


def _row_column(field, role: str):
    """A column of (N, K) rows: an array of numbers as it is, a vector as an array."""
    kind = field.dataType
    if _is_vector(kind):
        from pyspark.ml.functions import vector_to_array

        return vector_to_array(SF.col(field.name), "float64")
    if isinstance(kind, T.ArrayType) and isinstance(kind.elementType, T.NumericType):
        return SF.col(field.name)
    raise ValueError(f"{role}={field.name!r}: a column of type {kind.simpleString()}; "
                     "expected an array of numbers or a Spark ML vector")


def _width_expression(field, role: str):
    """max(size) of an array or vector column, for the aggregate."""
    return SF.max(SF.size(_row_column(field, role)))


# -- the pass -------------------------------------------------------------------------


def _aggregate(df, expressions: dict[str, Any]) -> dict[str, Any]:
    """One aggregate job for every value the plan needs first (none: no job)."""
    if not expressions:
        return {}
    row = df.agg(*[expression.alias(name) for name, expression in expressions.items()]).first()
    return row.asDict()


def _run(df, columns: dict[str, Any], plan: PartitionPlan) -> list:
    """The pass: a row per partition (sorted by partition), the first bad
    value raised as a ValueError."""
    planned = df.select(*[column.alias(role) for role, column in columns.items()])
    results = planned.mapInArrow(functools.partial(partition_states, plan),
                                 RESULT_SCHEMA).collect()
    results = sorted(results, key=lambda row: row["partition"])
    for row in results:
        if row["error"] is not None:
            raise ValueError(row["error"])
    present = [row for row in results if row["rows"]]
    if not present:
        raise ValueError(f"the DataFrame has no rows ({len(results)} partitions, all empty): "
                         "there is nothing to report")
    return present


def _merged(template, results: list, name: str):
    merged = template()
    for row in results:
        part = template()
        part.load_state_dict(pickle.loads(row["state"])[name])
        merged.merge(part)
    return merged


def _batch_rows(df) -> int:
    try:
        return int(df.sparkSession.conf.get(_BATCH_ROWS, "10000"))
    except Exception:  # a session that does not say (Spark Connect before 3.4)
        return 10000


# -- multiclass -----------------------------------------------------------------------


def _multiclass(df, names, fields, *, classes, num_classes, ignore_index, scores_are, top_k,
                n_bins, thresholds, num_groups, class_names, intervals,
                backend) -> PredictionReport:
    label_roles = [role for role in ("y_true", "y_pred") if role in fields]
    codes = all(_is_code(fields[role].dataType) for role in label_roles)
    if not codes and any(_is_code(fields[role].dataType) for role in label_roles):
        kinds = ", ".join(f"{role}={names[role]!r} is {fields[role].dataType.simpleString()}"
                          for role in label_roles)
        raise ValueError(f"{kinds}: the targets and the predictions must both be class codes "
                         "or both be labels of one type (cast one column to the other's type)")
    for role in label_roles:
        if isinstance(fields[role].dataType, (T.ArrayType, T.MapType, T.StructType)) or \
                _is_vector(fields[role].dataType):
            raise ValueError(f"{role}={names[role]!r}: a column of type "
                             f"{fields[role].dataType.simpleString()}; multiclass labels are "
                             "one value per row")
    columns: dict[str, Any] = {role: SF.col(names[role]) for role in names}
    score_field = fields.get("scores")
    binary_column = score_field is not None and isinstance(score_field.dataType, T.NumericType)
    expressions: dict[str, Any] = {}
    if score_field is not None and not binary_column:
        columns["scores"] = _row_column(score_field, "scores")
    if classes is not None:
        classes = tuple(classes)
        if len(set(classes)) != len(classes) or not classes:
            raise ValueError(f"classes must be distinct label values, at least one; got "
                             f"{list(classes)}")
    width = 2 if binary_column else None
    if num_classes is None and classes is not None:
        num_classes = len(classes)
    if score_field is not None and not binary_column and num_classes is None:
        expressions["width"] = _width_expression(score_field, "scores")
    find_classes = classes is None and (not codes or (num_classes is None and width is None
                                                      and score_field is None))
    if find_classes:
        for role in label_roles:
            column = SF.col(names[role])
            if role == "y_true" and ignore_index is not None:
                column = SF.when(column != SF.lit(ignore_index), column)
            expressions[f"classes_{role}"] = SF.collect_set(column)
    group_field = fields.get("groups")
    group_codes = group_field is not None and _is_integral(group_field.dataType)
    if group_field is not None and not (group_codes and num_groups is not None):
        expressions["groups"] = (SF.max(SF.col(names["groups"])) if group_codes
                                 else SF.collect_set(SF.col(names["groups"])))
    found = _aggregate(df, expressions)
    if find_classes:
        values: set[Any] = set()
        for role in label_roles:
            values.update(found[f"classes_{role}"] or ())
        if not values:
            raise ValueError(f"y_true={names['y_true']!r}: no label found (the DataFrame has "
                             "no rows, or every one is ignore_index): there is nothing to report")
        classes = tuple(sorted(values))
        if num_classes is None:
            num_classes = len(classes)
    if "width" in found:
        if found["width"] is None:
            raise ValueError("the DataFrame has no rows: there is nothing to report")
        width = int(found["width"])
    elif score_field is not None and width is None:
        width = num_classes
    if num_classes is None:
        num_classes = width
    if width is not None and width != num_classes and not binary_column:
        raise ValueError(f"scores={names['scores']!r} holds rows of {width} scores, but there "
                         f"are {num_classes} classes"
                         + (f" ({list(classes)})" if classes is not None else ""))
    if binary_column and num_classes != 2:
        raise ValueError(f"scores={names['scores']!r} is one column (class 1's score, a binary "
                         f"problem), but there are {num_classes} classes")
    group_values = None
    if group_field is not None:
        if group_codes:
            if num_groups is None:
                top = found["groups"]
                num_groups = 1 if top is None else int(top) + 1
        else:
            group_values = tuple(sorted(found["groups"] or ()))
            num_groups = max(1, len(group_values))
    state_ignore = ignore_index if classes is None or ignore_index is None else -1
    common: dict[str, Any] = dict(ignore_index=state_ignore, validate="deferred")
    if group_field is not None:
        common["num_groups"] = num_groups
    label_spec = dict(num_classes=num_classes, **common) if "y_pred" in fields else None
    score_spec = None
    if score_field is not None:
        score_spec = dict(num_classes=num_classes, top_k=reported_top_k(top_k, num_classes),
                          n_bins=n_bins, scores=scores_are,
                          thresholds=(None if thresholds is None
                                      else histogram_thresholds(thresholds, num_classes)),
                          **common)
    specs = [spec for spec in (label_spec, score_spec) if spec is not None]
    for spec in specs:
        ClassificationMetrics(**spec)  # the arguments' errors, before the pass
    plan = PartitionPlan(task="multiclass", columns={role: role for role in columns},
                         names=names, classes=classes, ignore_value=ignore_index,
                         group_values=group_values, label_spec=label_spec,
                         score_spec=score_spec, width=width, backend=backend)
    results = _run(df, columns, plan)
    labels = None if label_spec is None else _merged(
        lambda: ClassificationMetrics(**label_spec), results, "labels")
    scored = None if score_spec is None else _merged(
        lambda: ClassificationMetrics(**score_spec), results, "scores")
    class_codes = None
    if classes is not None:
        if all(isinstance(c, (int, float, np.number)) and not isinstance(c, bool)
               and float(c).is_integer() for c in classes):
            class_codes = np.asarray(classes, dtype=np.float64).astype(np.int64)
        elif class_names is None:
            class_names = [str(c) for c in classes]
    evaluation = FileEvaluation(
        labels, scored, None, class_codes, sum(int(row["rows"]) for row in results),
        ", ".join(sorted({row["backend"] for row in results})),
        None if scored is None else ("binned" if thresholds is not None else None),
        _batch_rows(df), scores_are=None if scored is None else scores_are,
        group_names=None if group_values is None else [str(g) for g in group_values])
    return PredictionReport(evaluation, class_names=class_names, intervals=intervals)


# -- multilabel -----------------------------------------------------------------------


def _multilabel(df, names, fields, *, num_classes, scores_are, threshold, ignore_index,
                thresholds, backend) -> MultilabelReport:
    for role in ("groups",):
        if role in names:
            raise ValueError(f"{role}= is not supported for multilabel targets")
    columns: dict[str, Any] = {"y_true": _row_column(fields["y_true"], "y_true")}
    preds = "scores" if "scores" in names else "y_pred"
    columns[preds] = _row_column(fields[preds], preds)
    if "sample_weight" in names:
        columns["sample_weight"] = SF.col(names["sample_weight"])
    width = num_classes
    if width is None:
        width = _aggregate(df, {"width": _width_expression(fields["y_true"], "y_true")})["width"]
        if width is None:
            raise ValueError("the DataFrame has no rows: there is nothing to report")
        width = int(width)
    spec = dict(num_labels=width, threshold=threshold, scores=scores_are,
                ignore_index=ignore_index,
                thresholds=None if thresholds is None or preds == "y_pred" else thresholds,
                validate="deferred")
    MultilabelMetrics(**spec)
    plan = PartitionPlan(task="multilabel", columns={role: role for role in columns},
                         names=names, ignore_value=ignore_index, multilabel_spec=spec,
                         width=width, backend=backend)
    results = _run(df, columns, plan)
    return _merged(lambda: MultilabelMetrics(**spec), results, "multilabel").compute()
