"""The chunk loop: prediction files streamed through
:class:`metrics_gpu.ClassificationMetrics` (:func:`evaluate_files`), with the
passes that find the classes and the groups first, and on the numpy backend
the updates in worker processes."""

from __future__ import annotations

import copy
import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from metrics_gpu._common.types import ScoresAre
from metrics_gpu._formulas.labels import reported_top_k
from metrics_gpu._validation import check_int_range, check_top_k, probabilities_read_as_logits
from metrics_gpu.files.columns import NO_ROWS, OPTIONS, GroupColumn, open_columns
from metrics_gpu.files.exact import (
    _ExactScores,
    _ranked_scores,
    exact_auc_bytes,
    exact_or_binned,
    exact_ranking,
    exact_score_dtype,
)
from metrics_gpu.files.readers import ColumnReader, ReadThreads, Vocabulary
from metrics_gpu.files.sources import FileProblem, Source
from metrics_gpu.files.staging import _CudaStaging, _HostStaging, _Prefetch
from metrics_gpu.backends.selection import backend_for_host_data, get_backend, use_backend
from metrics_gpu.files.workers import UpdateWorkers, shared_empty, worker_count
from metrics_gpu._streaming.metrics import ClassificationMetrics, MAX_THRESHOLDS, SCORE_KINDS

# Rows per chunk: at most 2^20, and at most 64 MB per buffer set (two sets
# live at once on the host: read and computed; three with cuda: read, copied
# and computed), so memory is bounded at any K.
MAX_CHUNK_ROWS = 1 << 20
CHUNK_BYTES = 64 << 20
# The binned ranking histogram (2, K, H) of float64 / uint64 counts: at most 256 MB.
HISTOGRAM_BYTES = 256 << 20
# Without --num-classes, the first pass marks the codes present in a table of
# this size at most.
MAX_FOUND_CLASSES = 1 << 24
AUC_MODES = ("auto", "exact", "binned")


def _array_module(array):
    import cupy

    return cupy.get_array_module(array)


@dataclass
class FileEvaluation:
    """What :func:`evaluate_files` read: the streaming states, the exact ranking
    values (when computed), and how the rows map to classes."""

    labels: Any                    # ClassificationMetrics of (y_true, y_pred), or None
    scores: Any                    # ClassificationMetrics of (y_true, scores), or None
    exact: dict | None
    class_codes: np.ndarray | None  # the class of each position, when remapped
    rows: int
    backend: str
    auc: str | None                # "exact", "binned" or None (no scores)
    chunk_rows: int
    readers: dict = field(default_factory=dict)
    # Seconds of each stage, in order ("backend", "opening", ...), and the
    # reader threads and worker processes: the report's --verbose lines.
    timings: dict = field(default_factory=dict)
    scores_are: str | None = None  # how the scores were read: "logits", "probabilities"
    group_names: list | None = None  # the categories of a groups column, when not codes
    # The name of each class (by code): the labels' names, or --classes FILE's.
    class_names: list[str] | None = None


def find_classes(sources: dict[str, Source | None], *, ignore_index=None, chunk_rows: int,
                 progress: Callable | None = None,
                 threads: ReadThreads | None = None) -> tuple[int, np.ndarray | None]:
    """One pass over the label files (``y_true`` and ``y_pred``) for the classes
    present: ``(K, None)`` when they are 0..K-1, else ``(P, codes)`` with the
    P codes present (the report is over those, as scikit-learn's). ``threads``:
    the evaluation's reader threads (None: each file read as one stream)."""
    readers = open_columns({name: sources.get(name) for name in ("y_true", "y_pred")},
                           threads=threads)
    total_rows = 0
    try:
        present = np.zeros(0, bool)
        prefetch = _Prefetch(readers, _HostStaging(readers, chunk_rows).buffer_sets)
        staging = prefetch.buffer_sets
        try:
            for i, rows in prefetch:
                total_rows += rows
                seen = []
                keep = None
                y_true = staging[i]["y_true"][:rows]
                if ignore_index is not None:
                    keep = y_true != ignore_index
                for name in readers:
                    values = staging[i][name][:rows]
                    values = values if keep is None else values[keep]
                    if values.size and values.min() < 0:
                        first = int(np.argmax(values < 0))
                        raise FileProblem(
                            f"{OPTIONS[name]} {readers[name].path}: holds the negative label "
                            f"{values[first]} (labels are class codes 0..K-1; pass "
                            "--ignore-index for a padding value)")
                    if values.size and values.max() >= MAX_FOUND_CLASSES:
                        raise FileProblem(
                            f"{OPTIONS[name]} {readers[name].path}: holds the label "
                            f"{values.max()}; pass --num-classes for class codes beyond "
                            f"{MAX_FOUND_CLASSES - 1:,} (the classes are not searched for)")
                    seen.append(values)
                for values in seen:
                    if values.size:
                        counts = np.bincount(values, minlength=present.size)
                        if counts.size > present.size:
                            present = np.concatenate(
                                [present, np.zeros(counts.size - present.size, bool)])
                        present |= counts > 0
                prefetch.release(i)
                if progress is not None:
                    progress(rows)
        finally:
            prefetch.close()
    finally:
        for reader in readers.values():
            reader.close()
    if total_rows == 0:
        raise FileProblem(f"--y-true {readers['y_true'].path}: {NO_ROWS}")
    if not present.any():
        raise FileProblem(f"--y-true {readers['y_true'].path}: every row is --ignore-index "
                          f"{ignore_index}: there is nothing to report")
    if present.all():
        return present.size, None
    return int(present.sum()), np.flatnonzero(present)


def _read_through(readers: dict[str, ColumnReader], chunk_rows: int,
                  progress: Callable | None = None) -> int:
    """Read ``readers`` to their end (a pass whose values are not kept: the
    readers collect what they find); the rows read."""
    total_rows = 0
    prefetch = _Prefetch(readers, _HostStaging(readers, chunk_rows).buffer_sets)
    try:
        for i, rows in prefetch:
            total_rows += rows
            prefetch.release(i)
            if progress is not None:
                progress(rows)
    finally:
        prefetch.close()
    return total_rows


def find_names(sources: dict[str, Source | None], names: tuple[str, ...], *, chunk_rows: int,
               progress: Callable | None = None,
               threads: ReadThreads | None = None) -> Vocabulary:
    """One pass over the columns ``names`` of ``sources`` that hold names (the
    labels ``y_true`` and ``y_pred``, or ``groups``) for their vocabulary: the
    sorted union of the names of every file (the distinct names of each block
    found by Arrow's kernels or :func:`numpy.unique`)."""
    readers = open_columns({name: sources.get(name) for name in names}, threads=threads)
    vocabulary = Vocabulary()
    try:
        for reader in readers.values():
            reader.vocabulary = vocabulary
        total_rows = _read_through(readers, chunk_rows, progress)
    finally:
        for reader in readers.values():
            reader.close()
    if total_rows == 0:
        first = next(iter(readers.values()))
        raise FileProblem(f"{first.argument} {first.path}: {NO_ROWS}")
    vocabulary.found()
    return vocabulary


def _class_vocabulary(columns: dict[str, ColumnReader], sources, classes, *,
                      num_classes: int | None, ignore_index: int | None, chunk_rows: int,
                      progress: Callable[[str, int | None], Callable[[int], None]] | None,
                      threads: ReadThreads) -> Vocabulary | None:
    """The classes' vocabulary: ``classes`` (fixed), else for label columns of
    names the one :func:`find_names` finds, set on their readers; None for
    integer codes without ``classes``. A :class:`FileProblem`: label columns
    of names beside ones of codes, ``--ignore-index`` with names, a
    ``num_classes`` other than the number of names."""
    labels = {name: columns[name] for name in ("y_true", "y_pred") if name in columns}
    named = [name for name, reader in labels.items() if reader.holds_names]
    fixed = classes if classes is None or isinstance(classes, Vocabulary) \
        else checked_classes(classes)
    if not named:
        if fixed is not None and fixed.names is not None and num_classes is not None \
                and num_classes != fixed.names.size:
            raise FileProblem(f"--num-classes is {num_classes}, but {fixed.option} names "
                              f"{fixed.names.size:,} classes")
        return fixed  # None, or the names of the codes 0..K-1
    if len(named) != len(labels):
        coded = next(name for name in labels if name not in named)
        raise FileProblem(
            f"{OPTIONS[coded]} {labels[coded].path} holds integer class codes, but "
            f"{OPTIONS[named[0]]} {labels[named[0]].path} holds class names (strings): give "
            "both as names or both as codes")
    if ignore_index is not None:
        raise FileProblem(f"--ignore-index {ignore_index} is a class code, but "
                          f"{OPTIONS[named[0]]} {labels[named[0]].path} holds class names "
                          "(strings): leave the rows out of the files instead")
    vocabulary = fixed
    if vocabulary is None:
        vocabulary = find_names(
            sources, tuple(labels), chunk_rows=chunk_rows, threads=threads,
            progress=None if progress is None else progress("finding the classes",
                                                            labels["y_true"].rows))
    for reader in labels.values():
        reader.vocabulary = vocabulary
    assert vocabulary.names is not None
    size = vocabulary.names.size
    if num_classes is not None and num_classes != size:
        where = (f"{vocabulary.option} names {size:,}" if fixed is not None else
                 f"the label files hold {size:,} class names (to name classes the files "
                 "lack, give them all in --classes FILE)")
        raise FileProblem(f"--num-classes is {num_classes}, but {where}")
    return vocabulary


def checked_classes(names, option: str = "classes=") -> Vocabulary:
    """A fixed :class:`Vocabulary` of ``names`` (class 0 first), checked: at
    least one, none empty or repeated."""
    names = [str(name) for name in names]
    if not names:
        raise ValueError(f"{option}: no class names")
    seen: dict[str, int] = {}
    for code, name in enumerate(names):
        if not name:
            raise ValueError(f"{option}: the name of class {code} is empty")
        if name in seen:
            raise ValueError(f"{option}: class {code} repeats the name {name!r} of class "
                             f"{seen[name]}")
        seen[name] = code
    return Vocabulary(names, option=option)


def _as_numbers(values: np.ndarray) -> np.ndarray | None:
    """Group values as float64 where every one is a number (text included), else None."""
    if values.dtype.kind in "iubf":
        return values.astype(np.float64)
    try:
        return values.astype(np.float64)
    except (ValueError, TypeError):
        return None


@dataclass
class FoundGroups:
    """What :func:`find_groups` found of a groups column: G, the category of
    each code (None for integer codes) and, for a column of names, their
    vocabulary and the group code of each name (``lut``)."""

    count: int
    categories: np.ndarray | None
    vocabulary: Vocabulary | None = None
    lut: np.ndarray | None = None


def find_groups(sources: dict[str, Source | None], *, chunk_rows: int,
                threads: ReadThreads | None = None) -> FoundGroups:
    """G of a groups column (one pass) and, for categories, their values in
    sorted order, as :func:`metrics_gpu.groups` encodes them: whole numbers
    are codes 0..G-1 (G = the largest + 1, categories None); any other value
    (strings, fractions) makes every value a category, named by its value. A
    column of names (strings, Arrow dictionaries, a text file's) is read
    through a :class:`Vocabulary` (:func:`find_names`): its distinct names
    decide as above (names that are all numbers are those numbers)."""
    readers = open_columns({"groups": sources["groups"]}, threads=threads)
    path = readers["groups"].path
    if readers["groups"].holds_names:
        for reader in readers.values():
            reader.close()
        vocabulary = find_names(sources, ("groups",), chunk_rows=chunk_rows, threads=threads)
        assert vocabulary.names is not None
        count, categories, lut = _group_codes(vocabulary.names, path)
        return FoundGroups(count, categories, vocabulary, lut)
    found = []
    try:
        prefetch = _Prefetch(readers, _HostStaging(readers, chunk_rows).buffer_sets)
        staging = prefetch.buffer_sets
        try:
            for i, rows in prefetch:
                if rows:
                    found.append(np.unique(staging[i]["groups"][:rows]))
                prefetch.release(i)
        finally:
            prefetch.close()
    finally:
        for reader in readers.values():
            reader.close()
    values = np.unique(np.concatenate(found)) if found else np.zeros(0, np.int64)
    count, categories, _ = _group_codes(values, path)
    return FoundGroups(count, categories)


def _group_codes(values: np.ndarray, path) -> tuple[int, np.ndarray | None, np.ndarray]:
    """G, the categories (None for integer codes) and the group code of each
    of ``values`` (the distinct values of a groups column, sorted)."""
    numbers = _as_numbers(values)
    if numbers is None:
        return int(values.size), values.astype(str), np.arange(values.size)
    if not np.isfinite(numbers).all():
        raise FileProblem(f"--groups {path}: holds "
                          f"{numbers[~np.isfinite(numbers)][0]} where a group should be")
    if (numbers == np.floor(numbers)).all():
        if numbers.size and numbers.min() < 0:
            raise FileProblem(f"--groups {path}: holds the negative group "
                              f"{int(numbers.min())} (groups are codes 0..G-1)")
        return (int(numbers.max()) + 1 if numbers.size else 0), None, numbers.astype(np.int64)
    categories = np.unique(numbers)
    return int(categories.size), categories, np.searchsorted(categories, numbers)


def group_column(reader: ColumnReader, sources: dict[str, Source | None],
                 num_groups: int | None, *, chunk_rows: int,
                 threads: ReadThreads | None = None) -> tuple[GroupColumn, int, list | None]:
    """The groups column ``reader`` as codes 0..G-1: the column, G, and the
    groups' names (None for integer codes). A pass (:func:`find_groups`)
    finds G unless ``num_groups`` gives it for integer codes; categories and
    names always take one."""
    found = FoundGroups(0, None)
    if num_groups is None or reader.holds_names or reader.dtype.kind not in "iu":
        found = find_groups(sources, chunk_rows=chunk_rows, threads=threads)
    group_names = None
    if found.categories is not None:
        if num_groups is not None:
            raise FileProblem(f"--num-groups applies to integer group codes; --groups "
                              f"{reader.path} holds categories ({found.count} found)")
        group_names = found.categories.tolist()
    reader.vocabulary = found.vocabulary
    count = found.count if num_groups is None else num_groups
    return GroupColumn(reader, found.categories, found.lut), count, group_names


def evaluate_files(sources: dict[str, Source | None], *, num_classes: int | None = None,
                   ignore_index: int | None = None, scores_are: ScoresAre = "logits",
                   top_k=(1, 5), n_bins: int = 15, auc: str = "auto", thresholds: int = 1000,
                   backend: str | None = None, chunk_rows: int | None = None, curves: bool = False,
                   progress: Callable[[str, int | None], Callable[[int], None]] | None = None,
                   num_groups: int | None = None, readers: int | None = None,
                   workers: int | None = None,
                   scores_option: str = OPTIONS["scores"],
                   classes=None) -> FileEvaluation:
    """Stream prediction files through :class:`metrics_gpu.ClassificationMetrics`.

    ``sources`` names the columns (``y_true``, and ``y_pred`` and / or
    ``scores``, optionally ``sample_weight``) as ``path[:selector]``: a file, a
    directory or a glob of shards, or a list of them (:class:`ShardedReader`;
    rows are matched by their position over the shards). Label
    metrics come from ``y_pred`` when given, else from the argmax of the
    scores. K is ``num_classes``, or the scores' width, or found by a first
    pass over the label files (the classes present, as scikit-learn). With
    scores, ROC AUC / average precision are exact (every row kept where the
    backend computes) when ``auc="exact"``, or ``"auto"`` and they fit in
    half the free memory; otherwise binned over ``thresholds`` bins with the
    error bound beside them (the binned histogram is kept with exact AUC too
    when ``curves``: the ROC and precision-recall curves are drawn from it).
    ``chunk_rows``: rows per chunk (default: 2^20, less where a chunk's
    columns would pass 64 MB). ``progress(description, total)`` makes a
    callback that is told the rows of each chunk. ``backend``: None for the
    one in force (:func:`metrics_gpu.get_backend`); "auto" is the GPU when
    CuPy and a device are present. With ``sources["groups"]`` (integer group
    codes, a column of one group per row), both states count each group's
    matrix too: G is ``num_groups``, or the largest code + 1 (one extra pass
    over the groups column). ``readers``: threads that read each chunk of a
    ``.npy`` file in pieces at once (default ``METRICS_GPU_READERS``, else one
    per core up to 8; 1 reads each file as one stream), one pool for the
    whole evaluation (:class:`ReadThreads`). ``workers``: on the numpy backend,
    processes that update the states chunk by chunk on every core
    (:func:`metrics_gpu.files.workers.worker_count`: default
    ``METRICS_GPU_CPU_WORKERS``, else one per core for a large file; 1: the
    calling process alone). ``scores_option``: the command-line option that
    named the scores, in messages (``--y-pred`` where the command took (N, K)
    scores given there as scores).

    Labels may be class names (strings: a Parquet / Arrow string or
    dictionary column, a text column whose first value is not a number, a
    string ``.npy``), in ``y_true`` and ``y_pred`` both: one vocabulary for
    both and every shard, ``classes`` (the names in code order, or the
    ``Vocabulary`` of ``--classes FILE``), else the sorted names found by a
    first pass (the scores' columns are in that order: scikit-learn's
    ``classes_``). ``classes`` with integer codes names the codes 0..K-1.
    ``num_classes`` must then equal the number of names. A groups column of
    names is read through a vocabulary too (:func:`find_groups`).
    """
    if auc not in AUC_MODES:
        raise ValueError(f"auc must be one of {AUC_MODES}, got {auc!r}")
    if scores_are not in SCORE_KINDS:
        raise ValueError(f"scores_are must be one of {SCORE_KINDS}, got {scores_are!r}")
    top_k = check_top_k(top_k, allow_empty=True)
    thresholds = check_int_range(thresholds, "thresholds", 2, MAX_THRESHOLDS)
    if chunk_rows is not None:
        chunk_rows = check_int_range(chunk_rows, "chunk_rows", 1, 1 << 40)
    if sources.get("y_pred") is None and sources.get("scores") is None:
        raise ValueError("give --y-pred (labels) or --scores (or both)")
    if classes is not None and not isinstance(classes, Vocabulary):
        classes = checked_classes(classes)
    clock = time.perf_counter()
    timings: dict[str, Any] = {}

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[stage] = now - clock
        clock = now

    backend = backend_for_host_data(get_backend() if backend is None else backend)
    lap("backend")
    from_logits = scores_are == "logits"
    threads = ReadThreads(readers)
    try:
        columns = open_columns(sources, from_logits=from_logits, threads=threads,
                               options={**OPTIONS, "scores": scores_option})
    except BaseException:
        threads.close()
        raise
    lap("opening")
    try:
        score_reader = columns.get("scores")
        class_codes = None
        vocabulary = _class_vocabulary(
            columns, sources, classes, num_classes=num_classes, ignore_index=ignore_index,
            chunk_rows=chunk_rows or MAX_CHUNK_ROWS, threads=threads, progress=progress)
        class_names = None
        if vocabulary is not None:
            if classes is None:
                lap("finding the classes")
            assert vocabulary.names is not None
            class_names = vocabulary.names.tolist()
            num_classes = len(class_names)
            if score_reader is not None:
                _check_score_columns(score_reader, vocabulary)
        if num_classes is None and score_reader is not None:
            num_classes = score_reader.width
        if score_reader is not None and num_classes != score_reader.width:
            given = (f"--num-classes is {num_classes}" if vocabulary is None else
                     f"{vocabulary.option} names {num_classes:,} classes"
                     if vocabulary.option is not None else
                     f"the label files hold {num_classes:,} class names (give every class, "
                     "in the order of the score columns, in --classes FILE)")
            raise FileProblem(f"{score_reader.argument} {score_reader.path}: "
                              f"{score_reader.width} score columns, but {given}")
        if num_classes is None:
            rows = columns["y_true"].rows
            num_classes, class_codes = find_classes(
                sources, ignore_index=ignore_index, chunk_rows=chunk_rows or MAX_CHUNK_ROWS,
                progress=None if progress is None else progress("finding the classes", rows),
                threads=threads)
            lap("finding the classes")
        rows = next((r.rows for r in columns.values() if r.rows is not None), None)
        if chunk_rows is None:
            chunk_rows = max(1, min(MAX_CHUNK_ROWS, CHUNK_BYTES // _row_bytes(columns)))
        auc_mode = None
        if score_reader is not None:
            auc_mode = _auc_mode(auc, rows, num_classes, score_reader, backend, columns,
                                 from_logits=from_logits, ignore_index=ignore_index,
                                 chunk_rows=chunk_rows)
        # Remapped codes are positions 0..P-1: ignored targets become -1.
        state_ignore = ignore_index if class_codes is None or ignore_index is None else -1
        common: dict[str, Any] = dict(ignore_index=state_ignore, validate="deferred")
        group_names = None
        if "groups" in columns:
            columns["groups"], count, group_names = group_column(
                columns["groups"], sources, num_groups, chunk_rows=chunk_rows, threads=threads)
            common["num_groups"] = count
        label_state = (ClassificationMetrics(num_classes, **common)
                       if "y_pred" in columns else None)
        score_state = None
        if score_reader is not None:
            score_state = ClassificationMetrics(
                num_classes, top_k=reported_top_k(top_k, num_classes), n_bins=n_bins,
                thresholds=(histogram_thresholds(thresholds, num_classes)
                            if auc_mode == "binned" or curves else None),
                scores=scores_are, **common)
        lut = None
        if class_codes is not None:
            lut = np.full(int(class_codes.max()) + 1, -1, np.int64)
            lut[class_codes] = np.arange(class_codes.size)
        if score_state is not None:
            # The columns check every row of the file (_check_declared_kind),
            # not the first batch only: one warning, theirs.
            score_state._warns_of_probabilities = False
        values = None if rows is None else rows * sum(
            math.prod(r.shape_tail) for r in columns.values())
        processes = worker_count(values, workers) if backend == "numpy" else 1
        timings.update(readers=threads.count, workers=processes)
        lap("setting up")
        with use_backend(backend):
            exact = _stream(columns, backend, chunk_rows, label_state, score_state, lut,
                            ignore_index, auc_mode, from_logits, num_classes,
                            None if progress is None else progress("reading", rows),
                            workers=processes, timings=timings)
        lap("reading and updating")
        for name, state in (("y_pred", label_state), ("scores", score_state)):
            _raise_first_invalid(state, columns, name, chunk_rows)
        if score_reader is not None and from_logits and score_reader.looks_like_probabilities():
            checked = score_reader.rows_checked
            warnings.warn(probabilities_read_as_logits(
                f"{score_reader.argument} {score_reader.path}", "--scores-are probabilities",
                rows=checked - score_reader.rows_not_probabilities, total=checked,
                binary=score_reader.binary_column), UserWarning, stacklevel=2)
        exact_values = None
        if exact is not None:
            # A second bar: ranking takes about as long as reading, and a bar
            # left at 100% meanwhile looks like a hang.
            kept = exact.arrays()
            ranking = None if progress is None else progress(
                "ranking (exact ROC AUC / AP)", _ranked_scores(*kept[1].shape))
            with use_backend(backend):
                exact_values = exact_ranking(*kept, ignore_index=ignore_index,
                                             progress=ranking)
            del kept, exact
            lap("ranking (exact AUC)")
        total_rows = columns["y_true"].position
        if total_rows == 0:
            raise FileProblem(f"--y-true {columns['y_true'].path}: {NO_ROWS}")
    finally:
        for reader in columns.values():
            reader.close()
        threads.close()
    return FileEvaluation(label_state, score_state, exact_values, class_codes, total_rows,
                          backend, auc_mode, chunk_rows, columns, timings,
                          None if score_reader is None else scores_are, group_names,
                          class_names)


def _check_score_columns(score_reader: ColumnReader, vocabulary: Vocabulary) -> None:
    """Scores of named columns whose names are the classes' must be in the
    classes' order (a score column is the class of its position)."""
    named = score_reader.column_names
    assert vocabulary.names is not None
    class_names = vocabulary.names.tolist()
    if named is None or list(named) == class_names or sorted(named) != sorted(class_names):
        return
    order = ("the sorted order of the names found" if vocabulary.option is None
             else f"the order of {vocabulary.option}")
    raise FileProblem(f"{score_reader.argument} {score_reader.path}: the score columns "
                      f"{list(named)} are the classes in another order than theirs "
                      f"({class_names}, {order}): name the columns in that order")


def _auc_mode(auc: str, rows: int | None, num_classes: int, score_reader: ColumnReader,
              backend: str, readers, *, from_logits: bool, ignore_index: int | None,
              chunk_rows: int) -> str:
    if auc == "binned":
        return "binned"
    if rows is None:
        if auc == "exact":
            return "exact"  # no row count to check: the memory error, if any, says it
        return "binned"
    needed = exact_auc_bytes(
        rows, num_classes, exact_score_dtype(score_reader.dtype, from_logits),
        weighted="sample_weight" in readers, ignore_index=ignore_index is not None,
        backend=backend, chunk_rows=chunk_rows, row_bytes=_row_bytes(readers))
    return exact_or_binned(auc, needed, backend, score_reader, f"{rows:,} x {num_classes}")


def _row_bytes(readers) -> int:
    """Bytes of one row of every column, as the chunk buffers hold them."""
    return sum(r.dtype.itemsize * math.prod(r.shape_tail) for r in readers.values())


def _stream(readers, backend: str, chunk_rows: int, label_state, score_state, lut,
            ignore_index, auc_mode, from_logits: bool, num_classes: int, progress,
            workers: int = 1, timings: dict | None = None):
    """The loop: each chunk into the states (and the exact-ranking store); on
    the numpy backend with ``workers`` > 1, in worker processes. ``timings``
    gets the seconds to the first chunk's update (on a GPU, with the kernels'
    compiles where the cache is cold)."""
    start = time.perf_counter()
    exact = None
    if auc_mode == "exact":
        xp: Any = np
        if backend == "cuda":
            import cupy

            xp = cupy
        score_reader = readers["scores"]
        exact = _ExactScores(xp, score_reader.rows, num_classes,
                             exact_score_dtype(score_reader.dtype, from_logits),
                             "sample_weight" in readers, from_logits)
    if backend == "numpy" and workers > 1:
        _stream_in_workers(readers, workers, chunk_rows, label_state, score_state, lut,
                           ignore_index, exact, progress)
        return exact
    staging = (_CudaStaging if backend == "cuda" else _HostStaging)(readers, chunk_rows)
    device_lut = None
    prefetch = _Prefetch(readers, staging.buffer_sets)
    try:
        for i, rows in prefetch:
            batch = staging.batch(i, rows)
            if lut is not None and device_lut is None:
                device_lut = _to_device(lut, backend)
            y_true = _update_chunk(batch, label_state, score_state, device_lut, ignore_index)
            if timings is not None and "first chunk" not in timings:
                timings["first chunk"] = time.perf_counter() - start
            if exact is not None:
                exact.add(y_true, batch["scores"], batch.get("sample_weight"))
            prefetch.release(i, staging.done(i))
            if progress is not None:
                progress(rows)
    finally:
        prefetch.close()
    return exact


def _update_chunk(batch: dict[str, Any], label_state, score_state, lut, ignore_index,
                  ordinal: int | None = None):
    """One chunk into the states (class codes remapped by ``lut``); ``ordinal``:
    the chunk's position in the file, where it is not the states' own count
    (a worker process's chunks). Returns the targets as the states read them."""
    y_true, weight = batch["y_true"], batch.get("sample_weight")
    grouped = {} if "groups" not in batch else {"groups": batch["groups"]}
    if lut is not None:
        y_true = _remap(y_true, lut, ignore_index)  # ignored -> -1
    if label_state is not None:
        y_pred = batch["y_pred"]
        if lut is not None:
            y_pred = _remap(y_pred, lut, None)
        if ordinal is not None:
            label_state._updates = ordinal
        label_state.update(y_true, y_pred, weight, **grouped)
    if score_state is not None:
        if ordinal is not None:
            score_state._updates = ordinal
        score_state.update(y_true, batch["scores"], weight, **grouped)
    return y_true


def _stream_in_workers(readers, workers: int, chunk_rows: int, label_state, score_state, lut,
                       ignore_index, exact, progress) -> None:
    """The loop of :func:`_stream` with the updates in ``workers`` forked
    processes (:func:`_chunks_in_workers`)."""

    def update(batch: dict[str, Any], ordinal: int, first_row: int) -> None:  # in a worker
        _update_chunk(batch, label_state, score_state, lut, ignore_index, ordinal)

    def in_parent(batch: dict[str, Any]) -> None:  # the exact ranking keeps every row here
        y_true = batch["y_true"] if lut is None else _remap(batch["y_true"], lut, ignore_index)
        exact.add(y_true, batch["scores"], batch.get("sample_weight"))

    states = [state for state in (label_state, score_state) if state is not None]
    chunks, _ = _chunks_in_workers(readers, workers, chunk_rows, states, update,
                                   None if exact is None else in_parent, progress)
    for state in states:
        state._updates = chunks


def _chunks_in_workers(readers, workers: int, chunk_rows: int, states: list, update,
                       in_parent, progress) -> tuple[int, int]:
    """Every chunk through ``update(batch, ordinal, first row)`` in ``workers``
    forked processes (:class:`metrics_gpu.files.workers.UpdateWorkers`): the reader
    thread fills buffer sets in shared memory, a worker updates its own copy
    of ``states`` with each chunk it takes, and each state is merged at the
    end with the workers' copies (``merge`` of a copy that loads the
    worker's ``state_dict``). ``in_parent(batch)``, when given, sees every
    chunk here too. Each chunk keeps its ordinal and its first row, so that a
    left-out row is named as in one process. Returns (chunks, rows)."""
    empty = [copy.deepcopy(state) for state in states]
    depth = workers + 2  # each worker busy, and the reader two sets ahead
    buffer_sets = [{name: shared_empty((chunk_rows, *r.shape_tail), r.dtype)
                    for name, r in readers.items()} for _ in range(depth)]

    def apply(i: int, rows: int, ordinal: int, first_row: int) -> None:  # in a worker
        update({name: buffer[:rows] for name, buffer in buffer_sets[i].items()}, ordinal,
               first_row)

    def finish() -> list:  # in a worker: its states
        return [state.state_dict() for state in states]

    pool = UpdateWorkers(workers, apply, finish)  # forked before the reader thread starts
    prefetch = _Prefetch(readers, buffer_sets)
    chunks = rows_read = 0
    try:
        for i, rows in prefetch:
            pool.submit(i, rows, chunks, rows_read)
            chunks += 1
            rows_read += rows
            if in_parent is not None:
                in_parent({name: buffer[:rows] for name, buffer in buffer_sets[i].items()})
            for j, done in pool.completed(block=pool.in_flight >= workers):
                prefetch.release(j)
                if progress is not None:
                    progress(done)
        while pool.in_flight:
            for j, done in pool.completed(block=True):
                prefetch.release(j)
                if progress is not None:
                    progress(done)
        parts = pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        prefetch.close()
    for state, template, part_states in zip(states, empty, zip(*parts)):
        for part_state in part_states:
            part = copy.deepcopy(template)
            part.load_state_dict(part_state)
            state.merge(part)
    return chunks, rows_read


def _to_device(array: np.ndarray, backend: str):
    if backend == "cuda":
        import cupy

        return cupy.asarray(array)
    return array


def _remap(codes, lut, ignore_index):
    """Class codes -> positions among the classes present; ``ignore_index`` -> -1
    (a position may equal the code being ignored)."""
    xp = np if isinstance(codes, np.ndarray) else _array_module(codes)
    inside = (codes >= 0) & (codes < lut.size)
    positions = xp.where(inside, lut[xp.clip(codes, 0, lut.size - 1)], -1)
    if ignore_index is not None:
        positions = xp.where(codes == ignore_index, -1, positions)
    return positions


def histogram_thresholds(thresholds: int, num_classes: int) -> int:
    """The binned ranking histogram's H: ``thresholds``, less where (2, K, H)
    counts would pass :data:`HISTOGRAM_BYTES`."""
    return max(2, min(thresholds, HISTOGRAM_BYTES // (16 * num_classes)))


def _raise_first_invalid(state, readers, name: str, chunk_rows: int) -> None:
    """A bad value the states found, as the file and row it came from."""
    if state is None:
        return
    first = state.first_invalid()
    if first is None:
        return
    argument, call, sample, problem, invalid = first
    column = {"y_true": "y_true", "preds": name, "sample_weight": "sample_weight"}[argument]
    reader = readers[column]
    # Every chunk but the last holds chunk_rows rows (the readers fill them).
    row = reader.row_name(call * chunk_rows + sample)
    raise FileProblem(f"{reader.argument} {reader.path}: {row} holds {problem} "
                      f"({invalid:,} bad rows in all)")
