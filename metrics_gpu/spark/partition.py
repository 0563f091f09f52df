"""What each Spark task runs: the Arrow record batches of one partition into
the states (:class:`metrics_gpu.ClassificationMetrics`, or
:class:`metrics_gpu.MultilabelMetrics`), and one row back: the partition, its
rows, the backend that counted, the pickled ``state_dict`` of each state, or
the first bad value of the partition named by column and row.

Arrow only (no Spark import but :class:`pyspark.TaskContext`, read for the
partition id): the driver (:mod:`metrics_gpu.spark.driver`) plans the
columns and the states, this module reads them.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from metrics_gpu._multilabel.stream import MultilabelMetrics
from metrics_gpu._streaming.metrics import ClassificationMetrics
from metrics_gpu._validation import to_numpy
from metrics_gpu.backends.selection import backend_for_host_data, use_backend

# What each task returns: one row per partition.
RESULT_SCHEMA = "partition int, rows long, backend string, state binary, error string"
_RESULT_TYPE = pa.schema([("partition", pa.int32()), ("rows", pa.int64()),
                          ("backend", pa.string()), ("state", pa.binary()),
                          ("error", pa.string())])


class RowProblem(ValueError):
    """A bad value of a partition: the column and its row within the batch."""

    def __init__(self, column: str, row: int, problem: str) -> None:
        super().__init__(problem)
        self.column, self.row, self.problem = column, row, problem


@dataclass(frozen=True)
class PartitionPlan:
    """How a task reads its batches: the columns by role (``y_true``,
    ``y_pred``, ``scores``, ``sample_weight``, ``groups``), the user's name of
    each (for messages), the label and group vocabularies, and the states'
    arguments. Pickled to every task."""

    task: str                                  # "multiclass" or "multilabel"
    columns: dict[str, str]                    # role -> column of the planned frame
    names: dict[str, str]                      # role -> the user's column name
    classes: tuple | None = None               # label values by position (None: codes)
    ignore_value: Any = None                   # y_true's value to leave out
    group_values: tuple | None = None          # group categories (None: integer codes)
    label_spec: dict | None = None             # ClassificationMetrics of (y_true, y_pred)
    score_spec: dict | None = None             # ClassificationMetrics of (y_true, scores)
    multilabel_spec: dict | None = None        # MultilabelMetrics of (y_true, preds)
    width: int | None = None                   # K (or L): the scores' row length
    backend: str = "auto"


def partition_states(plan: PartitionPlan, batches: Iterator[pa.RecordBatch],
                     partition: int | None = None) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function: every batch of the partition into fresh
    states, then one row (:data:`RESULT_SCHEMA`). ``partition``: the
    partition id (default: the task's, from :class:`pyspark.TaskContext`)."""
    if partition is None:
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = -1 if context is None else context.partitionId()
    backend = backend_for_host_data(plan.backend)
    states = _new_states(plan)
    starts: list[int] = []  # the first row of each update call, within the partition
    rows = 0
    error = None
    try:
        with use_backend(backend):
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                try:
                    arrays = _batch_arrays(plan, batch)
                except RowProblem as problem:
                    error = _named(plan, problem.column, partition, rows + problem.row,
                                   problem.problem)
                    break
                try:
                    _update(plan, states, _on_backend(arrays, backend))
                except ValueError as failure:
                    error = (f"partition {partition}, rows {rows}..{rows + batch.num_rows - 1} "
                             f"of the partition: {failure}")
                    break
                starts.append(rows)
                rows += batch.num_rows
        if error is None and rows:
            error = _first_invalid(plan, states, partition, starts)
    except ValueError as failure:  # an argument the states refuse at their construction
        error = f"partition {partition}: {failure}"
    state = None
    if error is None and rows:
        state = pickle.dumps({name: _host_state(s.state_dict()) for name, s in states.items()},
                             protocol=pickle.HIGHEST_PROTOCOL)
    yield pa.RecordBatch.from_pylist(
        [{"partition": partition, "rows": rows, "backend": backend, "state": state,
          "error": error}], schema=_RESULT_TYPE)


def _new_states(plan: PartitionPlan) -> dict[str, Any]:
    if plan.task == "multilabel":
        return {"multilabel": MultilabelMetrics(**(plan.multilabel_spec or {}))}
    states: dict[str, Any] = {}
    if plan.label_spec is not None:
        states["labels"] = ClassificationMetrics(**plan.label_spec)
    if plan.score_spec is not None:
        states["scores"] = ClassificationMetrics(**plan.score_spec)
        # The scores of a declared kind are checked row by row by the state.
        states["scores"]._warns_of_probabilities = False
    return states


def _named(plan: PartitionPlan, role: str, partition: int, row: int, problem: str) -> str:
    return (f"column {plan.names[role]!r} ({role}): row {row} of partition {partition} "
            f"(counting from 0 within the partition) holds {problem}")


# -- Arrow columns -> NumPy arrays ----------------------------------------------------


def _batch_arrays(plan: PartitionPlan, batch: pa.RecordBatch) -> dict[str, np.ndarray]:
    """The batch's columns as the states read them (class positions, (N, K)
    scores ...); a bad value raises :class:`RowProblem`."""
    column = {role: batch.column(batch.schema.get_field_index(name))
              for role, name in plan.columns.items()}
    out: dict[str, np.ndarray] = {}
    if plan.task == "multilabel":
        out["y_true"] = _rows(column["y_true"], "y_true", plan.width, integer=True)
        preds = "scores" if "scores" in column else "y_pred"
        out["preds"] = _rows(column[preds], preds, plan.width, integer=preds == "y_pred")
    else:
        out["y_true"] = _labels(plan, column["y_true"], "y_true")
        if "y_pred" in column:
            out["y_pred"] = _labels(plan, column["y_pred"], "y_pred")
        if "scores" in column:
            scores = column["scores"]
            out["scores"] = (_rows(scores, "scores", plan.width, integer=False)
                             if _is_list(scores.type) else _numbers(scores, "scores"))
    if "sample_weight" in column:
        out["sample_weight"] = _numbers(column["sample_weight"], "sample_weight")
    if "groups" in column:
        groups = column["groups"]
        out["groups"] = (_positions(groups, plan.group_values, "groups", "groups")
                         if plan.group_values is not None else _numbers(groups, "groups"))
    return out


def _is_list(kind: pa.DataType) -> bool:
    return (pa.types.is_list(kind) or pa.types.is_large_list(kind)
            or pa.types.is_fixed_size_list(kind))


def _first_null(array: pa.Array, role: str) -> None:
    if array.null_count:
        row = int(np.flatnonzero(np.asarray(array.is_null()))[0])
        raise RowProblem(role, row, "a null")


def _numbers(array: pa.Array, role: str) -> np.ndarray:
    """A column of numbers (no null) as a NumPy array, without a copy where
    Arrow's buffer is one."""
    _first_null(array, role)
    kind = array.type
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)
            or pa.types.is_boolean(kind) or pa.types.is_decimal(kind)):
        raise RowProblem(role, 0, f"a value of Arrow type {kind}, not a number")
    if pa.types.is_decimal(kind):
        array = array.cast(pa.float64())
    return array.to_numpy(zero_copy_only=False)


def _labels(plan: PartitionPlan, array: pa.Array, role: str) -> np.ndarray:
    """Labels as the states read them: class codes as they are, or positions
    in ``plan.classes``; y_true's ``ignore_value`` as -1 where positions are
    taken."""
    if plan.classes is None:
        codes = _numbers(array, role)
        if codes.dtype.kind == "f":  # whole numbers (MLlib's labels are doubles)
            whole = np.isfinite(codes) & (codes == np.floor(codes))
            if not whole.all():
                row = int(np.flatnonzero(~whole)[0])
                raise RowProblem(role, row, f"the label {codes[row]!r}, not a whole number")
            codes = codes.astype(np.int64)
        return codes
    return _positions(array, plan.classes, role, "classes",
                      plan.ignore_value if role == "y_true" else None)


def _positions(array: pa.Array, values: tuple, role: str, option: str,
               ignored: Any = None) -> np.ndarray:
    """Each value's position in ``values`` (int64; ``ignored``: -1); a value
    not among them raises :class:`RowProblem`."""
    _first_null(array, role)
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    kind = array.type
    if pa.types.is_large_string(kind):
        array, kind = array.cast(pa.string()), pa.string()
    try:
        vocabulary = pa.array(list(values), type=kind)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
        vocabulary = pa.array(list(values)).cast(kind, safe=False)
    found = pc.index_in(array, value_set=vocabulary)
    positions = found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    missing = positions < 0
    if ignored is not None:
        skipped = np.asarray(pc.equal(array, pa.scalar(ignored, type=kind)).fill_null(False))
        positions[skipped] = -1
        missing &= ~skipped
    if missing.any():
        row = int(np.flatnonzero(missing)[0])
        shown = list(values) if len(values) <= 10 else [*values[:10], "..."]
        raise RowProblem(role, row, f"{array[row].as_py()!r}, which is not among the "
                         f"{option} ({len(values)}: {shown})")
    return positions


def _rows(array: pa.Array, role: str, width: int | None, *, integer: bool) -> np.ndarray:
    """A list column as (N, width) rows: the flat values and the offsets, each
    row checked to hold ``width`` values (no null)."""
    assert width is not None  # the driver sets it for every list column
    _first_null(array, role)
    kind = array.type
    if not _is_list(kind):
        raise RowProblem(role, 0, f"a value of Arrow type {kind}, not an array of numbers")
    n = len(array)
    if pa.types.is_fixed_size_list(kind):
        lengths = np.full(n, kind.list_size, np.int64)
        values = array.flatten()
    else:
        offsets = np.asarray(array.offsets, dtype=np.int64)
        lengths = np.diff(offsets)
        values = array.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    wrong = lengths != width
    if wrong.any():
        row = int(np.flatnonzero(wrong)[0])
        raise RowProblem(role, row, f"an array of {int(lengths[row])} values where every row "
                         f"holds {width}")
    if values.null_count:
        flat = int(np.flatnonzero(np.asarray(values.is_null()))[0])
        raise RowProblem(role, flat // width, "a null inside its array")
    element = values.type
    if not (pa.types.is_integer(element) or pa.types.is_floating(element)
            or pa.types.is_boolean(element)):
        raise RowProblem(role, 0, f"an array of Arrow type {element}, not of numbers")
    if integer and pa.types.is_floating(element):
        raise RowProblem(role, 0, f"an array of {element} where 0/1 labels are integers")
    return values.to_numpy(zero_copy_only=False).reshape(n, width)


# -- the states -------------------------------------------------------------------------


def _on_backend(arrays: dict[str, np.ndarray], backend: str) -> dict[str, Any]:
    """The arrays where the backend counts: copied to the GPU for ``cuda``."""
    if backend != "cuda":
        return arrays
    import cupy

    return {name: cupy.asarray(value) for name, value in arrays.items()}


def _update(plan: PartitionPlan, states: dict[str, Any], arrays: dict[str, Any]) -> None:
    weight = arrays.get("sample_weight")
    if plan.task == "multilabel":
        states["multilabel"].update(arrays["y_true"], arrays["preds"], weight)
        return
    grouped = {} if "groups" not in arrays else {"groups": arrays["groups"]}
    if "labels" in states:
        states["labels"].update(arrays["y_true"], arrays["y_pred"], weight, **grouped)
    if "scores" in states:
        states["scores"].update(arrays["y_true"], arrays["scores"], weight, **grouped)


def _first_invalid(plan: PartitionPlan, states: dict[str, Any], partition: int,
                   starts: list[int]) -> str | None:
    """The first value a state left out (its deferred checks), by column and row."""
    if plan.task == "multilabel":
        first = states["multilabel"].first_invalid()
        if first is None:
            return None
        count, row, arguments = first
        roles = ["scores" if name == "preds" and "scores" in plan.columns else
                 "y_pred" if name == "preds" else name for name in arguments]
        problem = ("a value the multilabel state refuses (targets 0/1"
                   + (f" or ignore_index={plan.ignore_value}" if plan.ignore_value is not None
                      else "") + ", predictions of the declared kind, weights >= 0 and finite)"
                   + f"; {count} row(s) of the partition were left out")
        return " and ".join(_named(plan, role, partition, row, problem) for role in roles)
    found = []
    for name, state in states.items():
        first = state.first_invalid()
        if first is not None:
            argument, call, sample, problem, invalid = first
            role = {"y_true": "y_true", "sample_weight": "sample_weight",
                    "preds": "y_pred" if name == "labels" else "scores"}[argument]
            if role == "y_true" and plan.classes is not None:
                problem = "a target outside the classes"
            found.append((starts[call] + sample, role, problem, invalid))
    if not found:
        return None
    row, role, problem, invalid = min(found)
    return _named(plan, role, partition, row,
                  f"{problem}; {invalid} row(s) of the partition were left out")


def _host_state(state: dict) -> dict:
    """A state_dict with host NumPy arrays (a GPU state copied off the device)."""
    return {name: value if value is None or isinstance(value, (int, str, dict)) else
            np.asarray(to_numpy(value)) for name, value in state.items()}
