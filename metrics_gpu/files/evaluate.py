"""Prediction files of any size: one reader per format, and the chunk loop that
streams them through the accumulators of :class:`metrics_gpu.ClassificationMetrics`.

A column is named ``path`` or ``path:selector``:

* ``.npy``: read in chunks (not memory-mapped: mapped pages would count in
  the resident memory of a file larger than it), each chunk's bytes split into
  pieces that several threads read at once with ``os.preadv`` straight into
  the chunk buffer (:class:`ReadThreads`: ``readers``, ``--readers``,
  ``METRICS_GPU_READERS``; 1 reads the stream as one);
* ``.npz``: ``file.npz:name`` (the member, read as a stream, compressed or not);
* ``.csv`` / ``.txt``: comma- or whitespace-separated, an optional header row;
  ``file.csv:name`` picks a column by its header name, ``file.csv:a,b,c``
  several (the columns of ``(N, K)`` scores); no selector: every column;
  blank lines are skipped (LF or CRLF line ends);
* ``.parquet`` / ``.pq``, ``.arrow`` / ``.feather`` / ``.ipc`` (Arrow IPC file
  or stream): through pyarrow (the ``[io]`` extra); ``file.parquet:column``,
  a list or fixed-size-list column for ``(N, K)`` scores, or ``a,b,c``.

A column may also be sharded over several files (:class:`ShardedReader`),
read one after the other as one column: a directory (its files of these
suffixes, hidden and ``_``-prefixed names such as ``_SUCCESS`` skipped; a
directory of Parquet files under Hive partitions ``key=value/`` through
``pyarrow.dataset``, the partition keys selectable as columns), a glob
(``preds/part-*.npy``), or a list of sources. Directories and globs are read
in the natural order of their paths (``part-2`` before ``part-10``), a list
in its own order; ``dir:selector`` and ``glob:selector`` select in every file.

Every problem with a file is a :class:`FileProblem` (a ``ValueError``) whose
message names the option, the file and the problem, in one line. A value is
named by its row, counted from 0 over the values (a header row and blank
lines are not rows), whatever the chunk size; in a text file also by its line
number as an editor shows it (from 1, the header and blank lines counted):
``row 3 (line 6)``.

The loop (:func:`evaluate_files`) reads chunk ``i + 1`` in a background thread
while chunk ``i`` is computed. On the ``cuda`` backend each chunk is read
straight into a pinned host buffer, copied to the device on a stream of its
own and added on the compute stream once the copy's event fires (three
buffer sets: the read, the copy and the update of consecutive chunks overlap,
with no host sync in the loop). Memory is bounded by the chunk size, whatever
the file size: only the O(K) (or K x K) state and two chunks (three pinned
and three on the device with cuda) live at once.
"""

from __future__ import annotations

import bisect
import concurrent.futures
import copy
import glob
import itertools
import math
import os
import queue
import re
import threading
import time
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence, Union

import numpy as np

from metrics_gpu._common.extras import install_hint
from metrics_gpu._formulas.labels import defined_averages, reported_top_k, softmax_rows
from metrics_gpu._pipeline.mapping import (
    MetricMapping,
    as_lists,
    format_number,
    plain,
    strict_json,
    whole,
)
from metrics_gpu._common.types import ScoresAre
from metrics_gpu._validation import (
    binary_score_rows,
    label_probabilities_read_as_logits,
    probabilities_read_as_logits,
)

ARROW_SUFFIXES = (".parquet", ".pq", ".arrow", ".feather", ".ipc")
TEXT_SUFFIXES = (".csv", ".txt")
SUFFIXES = (".npy", ".npz", *TEXT_SUFFIXES, *ARROW_SUFFIXES)
IO_INSTALL_HINT = f"install the [io] extra: {install_hint('io')}"
ROLES = ("labels", "scores", "weights", "indicators", "label_scores", "groups")
# Roles whose rows may be several columns: (N, K) class scores, and the
# multilabel (N, L) 0/1 indicators (labels' dtypes and checks) and per-label
# scores (floats, no row-sum check, no (N,) widening).
MATRIX_ROLES = ("scores", "indicators", "label_scores")
# Whether a role's values are class codes (checked as whole numbers, read as integers).
LABEL_ROLES = ("labels", "indicators")
SCORE_DTYPES = (np.float16, np.float32, np.float64)
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
# Text rows are parsed in pieces of this many lines.
TEXT_BLOCK_ROWS = 1 << 16
# Parallel .npy reads: a chunk's bytes are split into one piece per reader
# thread, none smaller than this (a smaller read costs more in its call and
# thread hand-off than it gains from the overlap).
READ_PIECE_BYTES = 1 << 20
# Reader threads by default: one per core, at most this many (past about 8
# concurrent reads, one NVMe drive or the page cache copy no faster).
MAX_DEFAULT_READERS = 8
READERS_ENVIRONMENT = "METRICS_GPU_READERS"
# Names a directory's listing skips: hidden files and the marker and metadata
# files that Spark, Hadoop and Dask write beside the data (_SUCCESS, _metadata).
SKIPPED_PREFIXES = (".", "_")

# A column's source: ``path[:selector]`` (a file, a directory, a glob), or a
# list of them (shards read one after the other).
Source = Union[str, "os.PathLike[str]", Sequence[str]]


class FileProblem(ValueError):
    """A prediction file that cannot be used: missing, unreadable, wrong type or shape."""


# -- naming a column --------------------------------------------------------------


def split_source(text: str) -> tuple[Path, str | None]:
    """``"path"`` or ``"path:selector"`` -> ``(path, selector)``. A path that
    exists as given (a file or a directory) is never split (names may hold a
    colon); a glob's selector follows it (``preds/*.parquet:label``)."""
    path = Path(text)
    if path.exists() or ":" not in text:
        return path, None
    head, selector = text.rsplit(":", 1)
    return Path(head), (selector or None)


@dataclass
class _Shard:
    """One file of a sharded column: where it is, how messages name it, and its
    rows once known (from its header up front, else when reading ends it)."""

    path: Path
    selector: str | None
    label: str
    rows: int | None = None
    # A Hive-partitioned Parquet file: its pyarrow.dataset fragment and the
    # dataset's schema (the file's columns and the partition keys).
    fragment: Any = None
    schema: Any = None


def _natural_key(text: str) -> tuple:
    """Sort key of a path in natural order: runs of digits compare as numbers
    (``part-2`` before ``part-10``); the text itself breaks ties (``01`` / ``1``)."""
    parts = re.split(r"(\d+)", text)
    return tuple(int(part) if i % 2 else part for i, part in enumerate(parts)), text


def _is_glob(text: str) -> bool:
    return any(character in text for character in "*?[")


def _skipped(relative: Path) -> bool:
    """Whether a directory listing leaves the file out: a hidden or ``_``-prefixed
    name anywhere in its path below the directory (``_SUCCESS``, ``.part.crc``)."""
    return any(part.startswith(SKIPPED_PREFIXES) for part in relative.parts)


def _source_shards(source: Source, argument: str) -> tuple[str, list[_Shard]] | None:
    """The files of a sharded source, in reading order, and how messages name
    the source: None for one file (or a path that does not exist: the single
    file reader says so). A directory or glob matching no file is a
    :class:`FileProblem` naming it."""
    if not isinstance(source, (str, os.PathLike)):
        items = [os.fspath(item) for item in source]
        if not items:
            raise FileProblem(f"{argument}: no file given")
        if len(items) == 1:
            return _source_shards(items[0], argument)
        shards: list[_Shard] = []
        for item in items:
            sharded = _source_shards(item, argument)
            if sharded is None:
                path, selector = split_source(item)
                shards.append(_Shard(path, selector, str(path)))
            else:  # named by their whole path: two directories may hold part-0.npy
                shards += [_Shard(s.path, s.selector, str(s.path), fragment=s.fragment,
                                  schema=s.schema) for s in sharded[1]]
        name = " ".join(items) if len(items) <= 3 else \
            f"{items[0]} ... {items[-1]} ({len(items):,} sources)"
        return name, shards
    path, selector = split_source(os.fspath(source))
    if path.is_file():
        return None
    if path.is_dir():
        return str(path), _directory_shards(path, selector, argument)
    if _is_glob(str(path)):
        matches = [Path(m) for m in glob.glob(str(path), recursive=True)]
        matches = sorted((m for m in matches if m.is_file() and not _skipped(Path(m.name))),
                         key=lambda m: _natural_key(str(m)))
        if not matches:
            raise FileProblem(f"{argument} {path}: no file matches this pattern")
        return str(path), [_Shard(m, selector, str(m)) for m in matches]
    return None


def _directory_shards(root: Path, selector: str | None, argument: str) -> list[_Shard]:
    """A directory's files with a supported suffix, in the natural order of their
    names; below Hive partition directories (``key=value/``), every Parquet file
    under it, as fragments of one ``pyarrow.dataset`` (the keys are columns)."""
    children = sorted(root.iterdir(), key=lambda child: _natural_key(child.name))
    partitioned = any(child.is_dir() and "=" in child.name and not _skipped(Path(child.name))
                      for child in children)
    if not partitioned:
        files = [child for child in children if child.is_file()
                 and not _skipped(Path(child.name)) and child.suffix.lower() in SUFFIXES]
        if not files:
            raise FileProblem(f"{argument} {root}: the directory holds no file to read "
                              f"({', '.join(SUFFIXES)}; hidden and _ names skipped)")
        return [_Shard(f, selector, f.name) for f in files]
    files = sorted((f for f in root.rglob("*") if f.is_file()
                    and f.suffix.lower() in (".parquet", ".pq")
                    and not _skipped(f.relative_to(root))),
                   key=lambda f: _natural_key(f.relative_to(root).as_posix()))
    if not files:
        raise FileProblem(f"{argument} {root}: the partitioned directory holds no Parquet "
                          "file (hidden and _ names skipped)")
    try:
        pa = _pyarrow()
    except FileProblem as error:
        raise FileProblem(f"{argument} {root}: {error}") from None
    import pyarrow.dataset as ds

    try:
        dataset = ds.dataset([str(f) for f in files], format="parquet",
                             partitioning=ds.partitioning(flavor="hive"),
                             partition_base_dir=str(root))
        fragments = {Path(fragment.path): fragment for fragment in dataset.get_fragments()}
    except (pa.ArrowException, OSError) as error:
        raise FileProblem(f"{argument} {root}: not a readable Parquet dataset ({error})") \
            from None
    return [_Shard(f, selector, f.relative_to(root).as_posix(), fragment=fragments[f],
                   schema=dataset.schema) for f in files]


def source_files(source: Source, argument: str = "") -> list[tuple[Path, str | None]]:
    """The ``(path, selector)`` of each file of ``source`` (one file, a directory,
    a glob or a list of them), in the order they are read."""
    sharded = _source_shards(source, argument)
    if sharded is None:
        return [split_source(os.fspath(source if isinstance(source, (str, os.PathLike))
                                       else source[0]))]
    return [(shard.path, shard.selector) for shard in sharded[1]]


# -- parallel positional reads --------------------------------------------------------


def reader_count(readers: int | None = None) -> int:
    """Threads that read a ``.npy`` column's chunks: ``readers``, else the
    environment's ``METRICS_GPU_READERS``, else one per core up to
    :data:`MAX_DEFAULT_READERS`."""
    from metrics_gpu.files.workers import available_cores, chosen_count

    count = chosen_count(readers, "readers", READERS_ENVIRONMENT, 1024)
    return count if count is not None else max(1, min(MAX_DEFAULT_READERS, available_cores()))


class ReadThreads:
    """The reader threads of one evaluation, shared by all its ``.npy`` columns
    and passes: one :class:`concurrent.futures.ThreadPoolExecutor` (no pool
    per chunk), shut down by :meth:`close`. One reader: no pool, each column
    read as one stream."""

    def __init__(self, readers: int | None = None):
        self.count = reader_count(readers)
        self.executor = (concurrent.futures.ThreadPoolExecutor(
            self.count, thread_name_prefix="metrics-gpu-read") if self.count > 1 else None)

    def close(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=True)
            self.executor = None

    def __enter__(self) -> ReadThreads:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _pread_into(fd: int, view: memoryview, offset: int) -> int:
    """Read ``view``'s bytes from ``fd`` at ``offset`` (the file position is not
    used, so threads share ``fd``), again after a short read, until ``view``
    is full or the file ends; the bytes read."""
    done = 0
    while done < view.nbytes:
        if hasattr(os, "preadv"):  # straight into the buffer
            got = os.preadv(fd, [view[done:]], offset + done)
        else:  # macOS before 11: a copy of each read
            data = os.pread(fd, view.nbytes - done, offset + done)
            got = len(data)
            view[done:done + got] = data
        if not got:
            break
        done += got
    return done


def _read_pieces(fd: int, view: memoryview, offset: int, threads: ReadThreads) -> int:
    """Fill ``view`` from ``fd`` at ``offset`` in pieces read at once by
    ``threads`` (at least :data:`READ_PIECE_BYTES` each); the bytes read before
    the first one missing (the file ended early)."""
    size = view.nbytes
    pieces = max(1, min(threads.count, size // READ_PIECE_BYTES))
    if pieces == 1 or threads.executor is None:
        return _pread_into(fd, view, offset)
    bounds = [size * i // pieces for i in range(pieces + 1)]
    futures = [threads.executor.submit(_pread_into, fd, view[start:stop], offset + start)
               for start, stop in zip(bounds, bounds[1:])]
    concurrent.futures.wait(futures)  # every piece done (or failed) before the buffer is used
    done = size
    for start, stop, future in zip(bounds, bounds[1:], futures):
        got = future.result()  # raises a piece's OSError
        if got < stop - start:
            done = min(done, start + got)
    return done


# -- readers ------------------------------------------------------------------------


class ColumnReader:
    """One column of a prediction file, read front to back in chunks.

    ``rows`` is the number of rows (None when only a full read can tell: text
    files, Arrow streams); ``width`` is None for a ``(N,)`` column, K for
    ``(N, K)`` scores; ``dtype`` is the type :meth:`read` returns (labels come
    out as integers, whatever the file held).
    """

    rows: int | None
    width: int | None
    dtype: np.dtype
    binary_column = False  # (N,) or (N, 1) scores of the positive class

    def __init__(self, argument: str, path: Path, selector: str | None, role: str, *,
                 from_logits: bool = True):
        self.argument, self.path, self.selector, self.role = argument, path, selector, role
        self.from_logits = from_logits  # (N,) scores: logits, else probabilities
        self.position = 0  # rows read so far

    def problem(self, message: str) -> FileProblem:
        return FileProblem(f"{self.argument} {self.path}: {message}")

    def row_name(self, row: int) -> str:
        """How messages name the value of ``row`` (counted from 0 over the values)."""
        return f"row {row:,}"

    @property
    def shape_tail(self) -> tuple[int, ...]:
        return () if self.width is None else (self.width,)

    def empty(self, rows: int) -> np.ndarray:
        return np.empty((rows, *self.shape_tail), self.dtype)

    def read(self, out: np.ndarray) -> int:
        """Fill ``out[:m]`` with the next ``m <= len(out)`` rows; 0 at the end."""
        raise NotImplementedError

    def close(self) -> None:
        pass

    # Scores read as logits: the rows checked so far, and how many of them
    # were not rows of probabilities (per-label scores: rows with a value
    # outside [0, 1]); nearly all rows that are: warned of at the end
    # (:meth:`looks_like_probabilities`).
    rows_checked = 0
    rows_not_probabilities = 0
    # The names of the columns read, where the file has them (a header, Arrow
    # columns): the multilabel report's label names.
    column_names: list[str] | None = None

    def looks_like_probabilities(self) -> bool:
        """Whether the scores read (as logits) look like probabilities: at least
        :data:`metrics_gpu._validation.PROBABILITY_ROWS_SHARE` of their rows."""
        from metrics_gpu._validation import allowed_non_probability_rows

        return bool(self.rows_checked) and (
            self.rows_not_probabilities <= allowed_non_probability_rows(self.rows_checked))

    def _check_declared_kind(self, values: np.ndarray) -> None:
        """Scores as declared (``--scores-are``), checked block by block as they
        are read (the reader thread: inside the pass, no device sync)."""
        from metrics_gpu.backends.selection import get_backend_implementation
        from metrics_gpu._validation import (
            allowed_non_probability_rows,
            count_non_probability_rows,
            declared_probabilities_refused,
            first_non_probability_row,
        )

        host = get_backend_implementation("numpy")
        # Per-label scores: the multilabel state checks the values; only logits
        # that look like probabilities are counted here.
        per_label = self.role == "label_scores"
        if per_label and not self.from_logits:
            return
        if self.binary_column:  # (N,) or (N, 1): the positive class's scores
            values = values.reshape(-1)
        if not self.from_logits:
            bad = first_non_probability_row(values, host)
            if bad is not None:
                row, problem, sum_only = bad
                raise self.problem(declared_probabilities_refused(
                    self.row_name(self.position + row), problem, sum_only,
                    declared="--scores-are probabilities",
                    logits_option="pass --scores-are logits"))
            return
        if not values.shape[0]:
            return
        # Past the share the whole file allows (where its rows are known),
        # the scores are logits: the rest is not counted.
        limit = None if self.rows is None else allowed_non_probability_rows(self.rows)
        if limit is not None and self.rows_not_probabilities > limit:
            return
        self.rows_checked += int(values.shape[0])
        self.rows_not_probabilities += count_non_probability_rows(
            values, host, limit=None if limit is None else limit - self.rows_not_probabilities,
            sums=not per_label)

    # Shared checks of the values read, by role.
    def _checked(self, values: np.ndarray) -> np.ndarray:
        """Values of a block as this column's dtype and shape, with the checks of its role."""
        if self.role in ("scores", "label_scores"):
            self._check_declared_kind(values)
        if self.role in LABEL_ROLES:
            if values.dtype.kind == "f":
                finite = np.isfinite(values)
                if not finite.all():
                    flat = int(np.argmin(finite.reshape(-1)))
                    row = self.position + flat // max(1, values[:1].size)
                    raise self.problem(f"{self.row_name(row)} holds "
                                       f"{values.reshape(-1)[flat].item()} "
                                       "where a label should be")
                whole = values == np.floor(values)
                if not whole.all():
                    flat = int(np.argmin(whole.reshape(-1)))
                    row = self.position + flat // max(1, values[:1].size)
                    hint = (" (per-label scores go in --scores)"
                            if self.role == "indicators" and self.argument == "--y-pred" else "")
                    raise self.problem(f"{self.row_name(row)} holds the non-integer label "
                                       f"{values.reshape(-1)[flat].item()}{hint}")
            return values.astype(self.dtype, copy=False)
        if self.role == "scores" and values.ndim == 1:
            rows = binary_score_rows(values.reshape(-1), self.from_logits, np)
            return rows.astype(self.dtype, copy=False)
        return values.astype(self.dtype, copy=False)

    def _set_layout(self, dtype: np.dtype, shape_tail: tuple[int, ...]) -> None:
        """Check the file's dtype and shape for this column's role; set ``dtype``, ``width``."""
        kind = dtype.kind
        dtype = dtype.newbyteorder("=")  # big-endian files come out in native order
        self.binary_column = self.role == "scores" and shape_tail in ((), (1,))
        if self.role == "indicators":
            if kind not in "iubf":
                raise self.problem(f"multilabel labels must be 0/1 numbers, got dtype {dtype}")
            if len(shape_tail) > 1:
                raise self.problem(f"multilabel labels must be (N, L), got rows of shape "
                                   f"{shape_tail}")
            self.dtype = np.dtype(np.int64) if kind == "f" or dtype.itemsize > 8 else dtype
            if kind == "b":
                self.dtype = np.dtype(np.uint8)  # 0/1 bytes, as the multilabel kernel reads bool
            self.width = shape_tail[0] if shape_tail not in ((), (1,)) else None
        elif self.role == "label_scores":
            if kind != "f":
                raise self.problem(f"per-label scores must be floating point, got dtype {dtype} "
                                   "(0/1 label predictions go in --y-pred)")
            if len(shape_tail) > 1:
                raise self.problem(f"per-label scores must be (N, L), got rows of shape "
                                   f"{shape_tail}")
            self.width = shape_tail[0] if shape_tail not in ((), (1,)) else None
            self.dtype = dtype
        elif self.role == "labels":
            if kind not in "iubf":
                raise self.problem(f"labels must be integer class codes, got dtype {dtype}")
            if shape_tail not in ((), (1,)):
                raise self.problem(f"labels must be one column, got rows of shape {shape_tail}")
            self.dtype = np.dtype(np.int64) if kind in "fb" or dtype.itemsize > 8 else dtype
            if kind == "u" and dtype.itemsize == 8:
                self.dtype = np.dtype(np.int64)
            self.width = None
        elif self.role == "groups":
            # Integer codes, or categories (strings, other numbers): read as
            # they are, encoded by GroupColumn once a pass has found them.
            if kind not in "iubfUSO":
                raise self.problem(f"groups must be numbers or strings, got dtype {dtype}")
            if shape_tail not in ((), (1,)):
                raise self.problem(f"groups must be one column, got rows of shape {shape_tail}")
            self.dtype = (np.dtype(np.int64) if kind in "iub" else
                          np.dtype(np.float64) if kind == "f" else dtype)
            self.width = None
        elif self.role == "weights":
            if kind not in "iuf":
                raise self.problem(f"weights must be numbers, got dtype {dtype}")
            if shape_tail not in ((), (1,)):
                raise self.problem(f"weights must be one column, got rows of shape {shape_tail}")
            self.dtype = np.dtype(np.float64) if kind == "f" and dtype.itemsize < 4 else dtype
            self.width = None
        else:
            if kind != "f":
                raise self.problem(f"scores must be floating point, got dtype {dtype}")
            if len(shape_tail) > 1:
                raise self.problem(f"scores must be (N,) or (N, K), got rows of shape "
                                   f"{shape_tail}")
            # (N,) scores: the positive class's, as (N, 2) rows the state reads.
            self.width = 2 if self.binary_column else shape_tail[0]
            if self.width < 2:
                raise self.problem("scores need at least 2 columns (one per class)")
            self.dtype = dtype  # float16 too: the state reads it in place




def _npy_header_problem(error: Exception) -> str:
    message = str(error)
    if "magic string" in message:
        return "not a .npy file (it does not start with NumPy's magic string)"
    if isinstance(error, EOFError) or message.startswith("EOF"):
        return "the file is truncated: its header ends early"
    return f"not a readable .npy array ({message or type(error).__name__})"


def _readinto(stream, out: np.ndarray) -> int:
    """Read bytes into ``out`` until it is full or the stream ends; bytes read."""
    view = out.reshape(-1).view(np.uint8).data  # a memoryview of its bytes
    done = 0
    while done < view.nbytes:
        got = stream.readinto(view[done:])
        if not got:
            break
        done += got
    return done


class NpyReader(ColumnReader):
    """A ``.npy`` file, or a member of an ``.npz`` archive, read as a byte stream;
    with ``threads`` of more than one reader, a ``.npy`` file's chunks are read
    in pieces at once (:func:`_read_pieces`). ``allow_empty``: 0 rows are not an
    error (a shard of a sharded column)."""

    rows: int  # from the header

    def __init__(self, argument, path, selector, role, *, from_logits=True,
                 threads: ReadThreads | None = None, allow_empty: bool = False):
        super().__init__(argument, path, selector, role, from_logits=from_logits)
        self.stream = self._open()
        try:
            version = np.lib.format.read_magic(self.stream)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(self.stream)
            else:
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(self.stream)
        except (ValueError, OSError, EOFError) as error:
            self.close()
            raise self.problem(_npy_header_problem(error)) from None
        if dtype.hasobject:
            self.close()
            raise self.problem("holds Python objects (pickled), which are not read")
        if not shape or (shape[0] == 0 and not allow_empty):
            self.close()
            raise self.problem("holds no values" if shape else "holds a scalar, not a column")
        if fortran and len(shape) > 1:
            self.close()
            raise self.problem("is Fortran-ordered; save it C-ordered (np.ascontiguousarray)")
        self.file_dtype = dtype
        self.rows = int(shape[0])
        self._set_layout(dtype, tuple(shape[1:]))
        self._row_bytes = dtype.itemsize * math.prod(shape[1:])
        # No conversion (same dtype, no (N,) binary scores to widen): read in place.
        self._direct = dtype == self.dtype and not (role == "scores" and self.binary_column)
        # (a big-endian file's dtype differs from its native output dtype: converted)
        self._check_size()
        # Positional reads by several threads: .npy files (an .npz member is a
        # stream, perhaps compressed), where the platform has pread.
        self._threads = (threads if threads is not None and threads.executor is not None
                         and path.suffix == ".npy" and hasattr(os, "pread") else None)
        self._data_offset = self.stream.tell() if path.suffix == ".npy" else 0

    def _open(self):
        if self.path.suffix == ".npz":
            try:
                archive = zipfile.ZipFile(self.path)
            except (zipfile.BadZipFile, OSError) as error:
                raise self.problem(f"not a readable .npz archive ({error})") from None
            names = [n[:-4] for n in archive.namelist() if n.endswith(".npy")]
            name = self.selector
            if name is None:
                if len(names) != 1:
                    archive.close()
                    raise self.problem(f"name the array: {self.path}:NAME, one of {names}")
                name = names[0]
            if name not in names:
                archive.close()
                raise self.problem(f"has no array {name!r}; it holds {names}")
            self.archive = archive
            return archive.open(name + ".npy")
        if self.selector is not None:
            raise self.problem(".npy files hold one array: no ':name' to select")
        return open(self.path, "rb", buffering=0)

    def _check_size(self) -> None:
        if self.path.suffix != ".npy":
            return
        expected = self.stream.tell() + self.rows * self._row_bytes
        size = self.path.stat().st_size
        if size < expected:
            self.close()
            raise self.problem(f"the file is truncated: {size:,} bytes where its header "
                               f"promises {expected:,}")

    def read(self, out: np.ndarray) -> int:
        rows = min(len(out), self.rows - self.position)
        if rows <= 0:
            return 0
        if self._direct:  # straight from the file into the caller's (pinned) buffer
            got = self._read_bytes(out[:rows])
            if self.role in ("scores", "label_scores") and got == rows * self._row_bytes:
                self._check_declared_kind(out[:rows])
        else:
            raw = np.empty((rows, self._row_bytes // self.file_dtype.itemsize), self.file_dtype)
            got = self._read_bytes(raw)
        if got != rows * self._row_bytes:
            raise self.problem(f"the file is truncated: it ends inside row "
                               f"{self.position + got // self._row_bytes}")
        if not self._direct:
            out[:rows] = self._checked(raw[:, 0] if raw.shape[1] == 1 else raw)
        self.position += rows
        return rows

    def _read_bytes(self, out: np.ndarray) -> int:
        """Fill ``out`` (C-contiguous) with the next rows' bytes; the bytes read."""
        if self._threads is None:
            return _readinto(self.stream, out)
        view = out.reshape(-1).view(np.uint8).data
        offset = self._data_offset + self.position * self._row_bytes
        try:
            return _read_pieces(self.stream.fileno(), view, offset, self._threads)
        except OSError as error:
            raise self.problem(f"cannot read it ({error.strerror or error})") from None

    def close(self) -> None:
        self.stream.close()
        archive = getattr(self, "archive", None)
        if archive is not None:
            archive.close()


class TextReader(ColumnReader):
    """A ``.csv`` (comma) or ``.txt`` (whitespace) file, with an optional header row."""

    def __init__(self, argument, path, selector, role, *, from_logits=True):
        super().__init__(argument, path, selector, role, from_logits=from_logits)
        self.delimiter = "," if path.suffix == ".csv" else None
        try:
            self.file = open(path, encoding="utf-8")
            first = self.file.readline()
        except (OSError, UnicodeDecodeError) as error:
            raise self.problem(f"cannot read it ({error})") from None
        fields = [f.strip() for f in first.split(self.delimiter)]
        if not first.strip():
            self.file.close()
            raise self.problem("holds no values (the first line is empty)")
        header = not all(_is_number(f) for f in fields)
        self.header = header
        self.pending = [] if header else [first]
        if selector is None:
            self.columns = list(range(len(fields)))
        else:
            if not header:
                self.file.close()
                raise self.problem(
                    f"has no header row to find {selector!r} in: its first line holds "
                    f"{len(fields)} unnamed column(s) of numbers (give the file without "
                    ":COLUMN for its one column, or add a header line naming them)")
            names = selector.split(",")
            missing = [n for n in names if n not in fields]
            if missing:
                self.file.close()
                raise self.problem(f"has no column {missing[0]!r}; its columns are {fields}")
            self.columns = [fields.index(n) for n in names]
        if header:
            self.column_names = [fields[i] for i in self.columns]
        tail = () if len(self.columns) == 1 else (len(self.columns),)
        if len(self.columns) > 1 and role not in MATRIX_ROLES:
            self.file.close()
            raise self.problem(f"has {len(self.columns)} columns {fields if header else ''}; "
                               f"name one: {path}:COLUMN")
        self.rows = None
        if role == "groups":  # codes or categories: the text as it is (GroupColumn reads it)
            self._set_layout(np.dtype(object), tail)
            self._parse_dtype = str
            return
        self._set_layout(np.dtype(np.int64 if role in LABEL_ROLES else np.float64), tail)
        self._parse_dtype = np.float64

    def read(self, out: np.ndarray) -> int:
        # Blank lines are skipped, and every chunk but the last still gets
        # len(out) rows: the columns of one chunk must stay the same rows, and
        # the rows of a chunk cannot depend on where the blank lines fall.
        lines, self.pending = self.pending, []
        while len(lines) < len(out):
            block = list(itertools.islice(self.file, len(out) - len(lines)))
            if not block:
                break
            lines += [line for line in block if line.strip()]
        if not lines:
            return 0
        try:
            values = np.loadtxt(lines, dtype=self._parse_dtype, delimiter=self.delimiter,
                                usecols=self.columns, ndmin=2)
        except ValueError:
            raise self._parse_problem(lines) from None
        values = values[:, 0] if values.shape[1] == 1 else values
        rows = len(lines)
        out[:rows] = self._checked(values)
        self.position += rows
        return rows

    def _parse_problem(self, lines: list[str]) -> FileProblem:
        """The first of ``lines`` that does not parse, named by its row and line."""
        for i, line in enumerate(lines):
            try:
                np.loadtxt([line], dtype=self._parse_dtype, delimiter=self.delimiter,
                           usecols=self.columns, ndmin=2)
            except ValueError as error:
                reason = re.sub(r" at row \d+, column \d+\.?$", "", str(error))
                return self.problem(f"cannot parse {self.row_name(self.position + i)} "
                                    f"{line.strip()!r}: {reason}")
        return self.problem(f"cannot parse the rows from {self.row_name(self.position)}")

    def row_name(self, row: int) -> str:
        return f"row {row:,} (line {self.line_of(row):,})"

    def line_of(self, row: int) -> int:
        """The line number (from 1, as an editor shows it) of the value of ``row``:
        read again from the start (messages only, so no bookkeeping per chunk)."""
        seen, number = -1, 0
        with open(self.path, encoding="utf-8", errors="replace") as file:
            for number, line in enumerate(file, start=1):
                if number == 1 and self.header:
                    continue
                if line.strip():
                    seen += 1
                    if seen == row:
                        return number
        return number + 1  # past the end (not reached for a row that was read)

    def close(self) -> None:
        self.file.close()


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _pyarrow():
    try:
        import pyarrow
        import pyarrow.ipc
        import pyarrow.parquet
    except ImportError:
        raise FileProblem(f"reading Parquet / Arrow files needs pyarrow: {IO_INSTALL_HINT}") \
            from None
    return pyarrow


class ArrowReader(ColumnReader):
    """Parquet, Arrow IPC (file or stream) and Feather, batch by batch, through pyarrow."""

    def __init__(self, argument, path, selector, role, *, from_logits=True,
                 allow_empty: bool = False):
        super().__init__(argument, path, selector, role, from_logits=from_logits)
        try:
            pa = _pyarrow()
        except FileProblem as error:
            raise self.problem(str(error)) from None
        self.pa = pa
        self._source = None  # the IPC file's handle, closed by close()
        schema = self._open_file()
        names = schema.names
        if selector is None:
            if len(names) != 1 and role not in ("indicators", "label_scores"):
                raise self.problem(f"has {len(names)} columns {names}; name one: {path}:COLUMN")
            self.names = names  # multilabel: every column, one per label
        else:
            self.names = selector.split(",")
            missing = [n for n in self.names if n not in names]
            if missing:
                raise self.problem(f"has no column {missing[0]!r}; its columns are {names}")
        types = [schema.field(n).type for n in self.names]
        tail: tuple[int, ...] | None
        if len(self.names) > 1:
            self.column_names = list(self.names)
            if role not in MATRIX_ROLES:
                raise self.problem(f"{len(self.names)} columns name (N, K) scores; {role} are "
                                   "one column")
            dtype, tail = self._numpy_type(types[0]), (len(self.names),)
            if any(self._numpy_type(t) != dtype for t in types):
                raise self.problem(f"the score columns {self.names} differ in type: "
                                   f"{[str(t) for t in types]}")
        elif pa.types.is_list(types[0]) or pa.types.is_large_list(types[0]) or \
                pa.types.is_fixed_size_list(types[0]):
            dtype = self._numpy_type(types[0].value_type)
            tail = (types[0].list_size,) if pa.types.is_fixed_size_list(types[0]) else None
        else:
            dtype, tail = self._numpy_type(types[0]), ()
        if tail is None:  # a variable-size list: its width from the first row
            # (an empty shard has none: its layout is not used)
            tail = () if allow_empty and self.rows == 0 else (self._first_list_length(),)
        self._set_layout(dtype, tail)
        self._batches = self._batch_iterator()
        self._left: np.ndarray | None = None  # rows of the last batch not handed out yet

    def _open_file(self):
        """Open the file; set ``rows`` (None where only a full read tells); its schema."""
        pa, path = self.pa, self.path
        try:
            if path.suffix in (".parquet", ".pq"):
                # No pre-buffering: it would keep every column chunk read in the pool.
                self.parquet = pa.parquet.ParquetFile(path, pre_buffer=False,
                                                      buffer_size=1 << 22)
                schema = self.parquet.schema_arrow
                self.rows = self.parquet.metadata.num_rows
            else:
                self.parquet = None
                # Rows counted through a memory map (only the batches' headers are
                # touched), data read through a plain file: the pages of a mapped
                # file would count in the resident memory.
                try:
                    with pa.memory_map(str(path)) as mapped:
                        counter = pa.ipc.open_file(mapped)
                        self.rows = sum(counter.get_batch(i).num_rows
                                        for i in range(counter.num_record_batches))
                    self._source = pa.OSFile(str(path))
                    self.ipc = pa.ipc.open_file(self._source)
                except pa.ArrowInvalid:
                    if self._source is not None:
                        self._source.close()
                    self._source = pa.OSFile(str(path))
                    self.ipc = pa.ipc.open_stream(self._source)
                    self.rows = None
                schema = self.ipc.schema
        except (pa.ArrowException, OSError) as error:
            raise self.problem(f"not a readable {path.suffix[1:]} file ({error})") from None
        return schema

    def _numpy_type(self, arrow_type) -> np.dtype:
        try:
            return np.dtype(arrow_type.to_pandas_dtype())
        except (NotImplementedError, TypeError):
            return np.dtype(object)

    def _first_list_length(self) -> int:
        for batch in self._batch_iterator():
            if batch.num_rows:
                return len(batch.column(0)[0])
        raise self.problem("holds no rows")

    def _batch_iterator(self):
        if self.parquet is not None:
            yield from self.parquet.iter_batches(batch_size=self._batch_rows(),
                                                 columns=self.names, use_threads=True)
        elif hasattr(self.ipc, "get_batch"):
            for i in range(self.ipc.num_record_batches):
                yield self.ipc.get_batch(i).select(self.names)
        else:
            for batch in self.ipc:
                yield batch.select(self.names)

    def _batch_rows(self) -> int:
        """Rows per Parquet batch: about 8 MB of values."""
        width = getattr(self, "width", None) or 1
        return max(1024, min(TEXT_BLOCK_ROWS, (8 << 20) // (8 * width)))

    def _values(self, batch) -> np.ndarray:
        """A record batch's selected columns as a NumPy array (checks nulls and list widths)."""
        pa = self.pa
        columns = []
        for i, name in enumerate(self.names):
            column = batch.column(i)
            if column.null_count:
                row = self.position + int(np.argmax(
                    np.asarray(column.is_null().to_numpy(zero_copy_only=False))))
                raise self.problem(f"column {name!r} holds a null at row {row}")
            if pa.types.is_list(column.type) or pa.types.is_large_list(column.type) or \
                    pa.types.is_fixed_size_list(column.type):
                flat = column.flatten().to_numpy(zero_copy_only=False)
                width = self.width
                if width is None:  # one-element lists of labels or weights: a (N,) column
                    width = 1
                if flat.size != len(column) * width or (
                        not pa.types.is_fixed_size_list(column.type)
                        and (np.diff(np.asarray(column.offsets)) != width).any()):
                    raise self.problem(f"the lists of column {name!r} are not all {width} long")
                columns.append(flat.reshape(len(column), *self.shape_tail))
            else:
                columns.append(column.to_numpy(zero_copy_only=False))
        return columns[0] if len(columns) == 1 else np.stack(columns, axis=1)

    def read(self, out: np.ndarray) -> int:
        done = 0
        while done < len(out):
            if self._left is None or not len(self._left):
                batch = next(self._batches, None)
                if batch is None:
                    break
                try:
                    values = self._values(batch)
                except self.pa.ArrowException as error:
                    raise self.problem(f"cannot read it ({error})") from None
                self._left = self._checked(values)
            take = min(len(out) - done, len(self._left))
            out[done:done + take] = self._left[:take]
            self._left = self._left[take:]
            done += take
            self.position += take
        return done

    def close(self) -> None:
        self._batches = iter(())
        self._left = None
        if self.parquet is not None:
            self.parquet.close()
        if self._source is not None:
            self._source.close()


class _PartitionReader(ArrowReader):
    """A Parquet file of a Hive-partitioned directory, through its
    ``pyarrow.dataset`` fragment: its columns and the partition keys (the
    same value in every row of the file) under the dataset's schema."""

    def __init__(self, argument, path, selector, role, *, fragment, schema, from_logits=True,
                 allow_empty: bool = False):
        self.fragment, self.dataset_schema = fragment, schema
        super().__init__(argument, path, selector, role, from_logits=from_logits,
                         allow_empty=allow_empty)

    def _open_file(self):
        self.parquet = None
        try:
            self.rows = self.fragment.count_rows()  # from the footer's metadata
        except (self.pa.ArrowException, OSError) as error:
            raise self.problem(f"not a readable parquet file ({error})") from None
        return self.dataset_schema

    def _batch_iterator(self):
        yield from self.fragment.to_batches(schema=self.dataset_schema, columns=self.names,
                                            batch_size=self._batch_rows(), use_threads=True)


class ShardedReader(ColumnReader):
    """One column over several files (shards), read one after the other as if
    they were one file: row ``i`` of the column is row ``i`` over the shards in
    order, and a chunk may span shards.

    ``rows`` is the sum of the shards' (None when one's is known only by
    reading it); ``width`` and ``dtype`` are every shard's (two shards that
    differ are a :class:`FileProblem` naming both). Shards of 0 rows are
    skipped (one empty file alone is an error; every shard empty too). Each
    shard's header is read up front (the checks above), then a shard is
    opened when reading reaches it and closed when it ends: one file open at
    a time. Errors while reading a shard name the shard's path and its own
    row; :meth:`row_name` names the shard and the row in it. ``partners``:
    the readers of other columns sharded in as many files, whose
    corresponding shards must hold as many rows (checked when both counts are
    known: up front in :func:`open_columns`, else when a shard ends).
    """

    def __init__(self, argument: str, name: str, shards: list[_Shard], role: str, *,
                 from_logits: bool = True, threads: ReadThreads | None = None):
        super().__init__(argument, Path(name), None, role, from_logits=from_logits)
        self.name, self.shards, self.threads = name, shards, threads
        selectors = {shard.selector for shard in shards}
        self.selector = selectors.pop() if len(selectors) == 1 else None
        self.partners: list[ShardedReader] = []
        self.rank = 0  # the column's place among the sharded ones (messages' order)
        self.counts: list[int | None] = [None] * len(shards)  # rows read, once a shard ends
        self._starts: list[int] = []  # the first row of each shard reached
        self._done_readers: list[ColumnReader | None] = []  # for row names (closed)
        self._reader: ColumnReader | None = None
        first: tuple[_Shard, ColumnReader] | None = None
        for shard in shards:
            if shard.path.suffix.lower() in TEXT_SUFFIXES and shard.path.is_file() \
                    and shard.path.stat().st_size == 0:
                shard.rows = 0  # an empty text file: no header, no rows
                continue
            reader = self._open(shard)
            reader.close()
            shard.rows = reader.rows
            if shard.rows == 0:
                continue
            if first is None:
                first = shard, reader
            elif (reader.width, reader.dtype) != (first[1].width, first[1].dtype):
                raise self.problem(f"{shard.label} holds {_layout(reader)}, but "
                                   f"{first[0].label} holds {_layout(first[1])} (the files "
                                   "of one column hold the same type and width)")
        if first is None:
            raise self.problem(f"{NO_ROWS} (its {len(shards):,} files are all empty)")
        reader = first[1]
        self.dtype, self.width = reader.dtype, reader.width
        self.binary_column = getattr(reader, "binary_column", False)
        self.column_names = reader.column_names
        known = [shard.rows for shard in shards]
        self.rows = None if None in known else sum(r for r in known if r is not None)

    def _open(self, shard: _Shard) -> ColumnReader:
        return _file_reader(self.argument, shard.path, shard.selector, self.role,
                            from_logits=self.from_logits, threads=self.threads,
                            allow_empty=True, fragment=shard.fragment, schema=shard.schema)

    def shard_rows(self, index: int) -> int | None:
        """Rows of shard ``index``: read, or known from its header; None if neither yet."""
        count = self.counts[index]
        return self.shards[index].rows if count is None else count

    def _current(self) -> ColumnReader | None:
        """The reader of the shard being read, opened when reading reaches it
        (empty shards passed); None after the last."""
        while self._reader is None:
            index = len(self._starts)
            if index == len(self.shards):
                return None
            self._starts.append(self.position)
            if self.shards[index].rows == 0:
                self._done_readers.append(None)
                self._ended(index, 0)
            else:
                self._reader = self._open(self.shards[index])
        return self._reader

    def _ended(self, index: int, rows: int) -> None:
        """Shard ``index`` read to its end: its rows checked against the partners'."""
        self.counts[index] = rows
        for partner in self.partners:
            theirs = partner.shard_rows(index)
            if theirs is not None and theirs != rows:
                raise _shard_mismatch(*sorted((self, partner), key=lambda r: -r.rank),
                                      index=index)

    def read(self, out: np.ndarray) -> int:
        done = 0
        while done < len(out):
            reader = self._current()
            if reader is None:
                break
            checked, failed = reader.rows_checked, reader.rows_not_probabilities
            got = reader.read(out[done:])
            self.rows_checked += reader.rows_checked - checked
            self.rows_not_probabilities += reader.rows_not_probabilities - failed
            if got == 0:  # the shard ended
                reader.close()
                self._reader = None
                # A text file's rows are named by their lines too (read again
                # by path); other readers are dropped with their metadata.
                self._done_readers.append(reader if isinstance(reader, TextReader) else None)
                self._ended(len(self._starts) - 1, reader.position)
                continue
            done += got
            self.position += got
        return done

    def row_name(self, row: int) -> str:
        """``part-00003.npy row 17``: the shard (by its path as listed) and the row in it."""
        index = max(0, bisect.bisect_right(self._starts, row) - 1)
        if index >= len(self._starts):
            return f"row {row:,}"
        local = row - self._starts[index]
        reader = (self._done_readers[index] if index < len(self._done_readers)
                  else self._reader)
        inner = f"row {local:,}" if reader is None else reader.row_name(local)
        return f"{self.shards[index].label} {inner}"

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None


def _layout(reader: ColumnReader) -> str:
    """A reader's values as the messages of a sharded column compare them."""
    return (f"{reader.dtype} values, {reader.width} per row" if reader.width is not None
            else f"{reader.dtype} values")


def _shard_mismatch(reader: ShardedReader, other: ShardedReader, *,
                    index: int) -> FileProblem:
    """Corresponding shards of two columns that hold different numbers of rows
    (``reader``'s named first: the later column, as the row-count messages do)."""
    return FileProblem(
        f"{reader.argument} {reader.shards[index].path}: {reader.shard_rows(index):,} rows, but "
        f"{other.argument} {other.shards[index].path} has {other.shard_rows(index):,} (file "
        f"{index + 1:,} of {len(reader.shards):,} of each; the rows of columns sharded in as "
        "many files are matched file by file)")


def _file_reader(argument: str, path: Path, selector: str | None, role: str, *,
                 from_logits: bool = True, threads: ReadThreads | None = None,
                 allow_empty: bool = False, fragment=None, schema=None) -> ColumnReader:
    """The reader of one file, by its suffix (the checks every file passes first)."""
    if not path.is_file():
        raise FileProblem(f"{argument} {path}: no such file")
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise FileProblem(f"{argument} {path}: unsupported file type {suffix or '(none)'!r} "
                          f"(use one of {', '.join(SUFFIXES)})")
    if not os.access(path, os.R_OK):
        raise FileProblem(f"{argument} {path}: permission denied")
    if path.stat().st_size == 0:
        raise FileProblem(f"{argument} {path}: the file is empty")
    if fragment is not None:
        return _PartitionReader(argument, path, selector, role, fragment=fragment,
                                schema=schema, from_logits=from_logits, allow_empty=allow_empty)
    if suffix in (".npy", ".npz"):
        return NpyReader(argument, path, selector, role, from_logits=from_logits,
                         threads=threads, allow_empty=allow_empty)
    if suffix in TEXT_SUFFIXES:
        return TextReader(argument, path, selector, role, from_logits=from_logits)
    return ArrowReader(argument, path, selector, role, from_logits=from_logits,
                       allow_empty=allow_empty)


def open_column(source: Source, argument: str, role: str, *, from_logits: bool = True,
                threads: ReadThreads | None = None) -> ColumnReader:
    """The reader of ``source`` for an option of the command line
    (``argument``, named in every error) and a ``role`` of :data:`ROLES`:
    ``path`` or ``path:selector`` of one file (its format's reader), or of a
    directory or a glob, or a list of sources (a :class:`ShardedReader`).
    ``threads``: the evaluation's :class:`ReadThreads` (``.npy`` files)."""
    sharded = _source_shards(source, argument)
    if sharded is not None:
        name, shards = sharded
        return ShardedReader(argument, name, shards, role, from_logits=from_logits,
                             threads=threads)
    path, selector = split_source(os.fspath(source if isinstance(source, (str, os.PathLike))
                                            else source[0]))
    return _file_reader(argument, path, selector, role, from_logits=from_logits,
                        threads=threads)


# -- the chunk loop -----------------------------------------------------------------

OPTIONS = {"y_true": "--y-true", "y_pred": "--y-pred", "scores": "--scores",
           "sample_weight": "--sample-weight", "groups": "--groups"}
ROLE_OF = {"y_true": "labels", "y_pred": "labels", "scores": "scores",
           "sample_weight": "weights", "groups": "groups"}
MULTILABEL_ROLE_OF = {"y_true": "indicators", "y_pred": "indicators",
                      "scores": "label_scores", "sample_weight": "weights"}
AUC_MODES = ("auto", "exact", "binned")
# Fraction of the free memory (host, or GPU) that exact ranking may take.
EXACT_MEMORY_FRACTION = 0.5


def open_columns(sources: dict[str, Source | None], *, from_logits: bool = True,
                 roles: dict[str, str] = ROLE_OF,
                 threads: ReadThreads | None = None,
                 options: dict[str, str] = OPTIONS) -> dict[str, ColumnReader]:
    """Readers of the named columns (``y_true``, ``y_pred``, ``scores``,
    ``sample_weight``; None ones left out), with their row counts checked;
    ``roles``: each column's role (:data:`ROLE_OF`, or :data:`MULTILABEL_ROLE_OF`);
    ``threads``: the evaluation's reader threads; ``options``: the option that
    named each column (:data:`OPTIONS`), in messages. Columns sharded in as many
    files are matched file by file (:class:`ShardedReader`'s ``partners``):
    shards whose rows are known up front are compared here."""
    readers: dict[str, ColumnReader] = {}
    try:
        for name, source in sources.items():
            if source is not None:
                readers[name] = open_column(source, options[name], roles[name],
                                            from_logits=from_logits, threads=threads)
        _match_shards([r for r in readers.values() if isinstance(r, ShardedReader)])
        known = [(name, r) for name, r in readers.items() if r.rows is not None]
        for name, reader in known[1:]:
            first_name, first = known[0]
            if reader.rows != first.rows:
                raise FileProblem(
                    f"{reader.argument} {reader.path}: {reader.rows:,} rows, but "
                    f"{first.argument} {first.path} has {first.rows:,}")
    except BaseException:
        for reader in readers.values():
            reader.close()
        raise
    return readers


def _match_shards(sharded: list[ShardedReader]) -> None:
    """Make the readers sharded in as many files partners, and compare their
    corresponding shards' rows where both are known (the others are compared
    when reading ends a shard)."""
    for rank, reader in enumerate(sharded):
        reader.rank = rank
        reader.partners = [other for other in sharded
                           if other is not reader and len(other.shards) == len(reader.shards)]
    for reader in sharded:
        for other in reader.partners:
            if other.rank < reader.rank:  # each pair once, the later one named first
                continue
            for index in range(len(reader.shards)):
                mine, theirs = reader.shard_rows(index), other.shard_rows(index)
                if mine is not None and theirs is not None and mine != theirs:
                    raise _shard_mismatch(other, reader, index=index)


class _Prefetch:
    """Reads chunk after chunk into rotating buffer sets in a background thread.

    ``free`` holds the sets the loop has handed back (with, on a GPU, the event
    after which its pinned memory may be written again); ``filled`` the sets
    read, in order. The last item is 0 rows (the end) or the reader's error.
    """

    def __init__(self, readers: dict[str, ColumnReader], buffer_sets: list[dict]):
        self.readers, self.buffer_sets = readers, buffer_sets
        self.free: queue.Queue = queue.Queue()
        self.filled: queue.Queue = queue.Queue()
        for i in range(len(buffer_sets)):
            self.free.put((i, None))
        self.thread = threading.Thread(target=self._run, name="metrics-gpu-reader",
                                       daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while True:
                i, ready = self.free.get()
                if i is None:
                    return
                if ready is not None:
                    ready.synchronize()  # the copy out of this pinned set is done
                rows = {name: reader.read(self.buffer_sets[i][name])
                        for name, reader in self.readers.items()}
                counts = set(rows.values())
                if len(counts) > 1:
                    short = min(rows, key=rows.__getitem__)
                    long_ = max(rows, key=rows.__getitem__)
                    raise FileProblem(
                        f"{OPTIONS[short]} {self.readers[short].path}: ends after "
                        f"{self.readers[short].position:,} rows, but "
                        f"{OPTIONS[long_]} {self.readers[long_].path} has more")
                count = counts.pop()
                self.filled.put((i, count))
                if count == 0:
                    return
        except BaseException as error:  # handed to the loop, raised there
            self.filled.put((None, error))

    def __iter__(self):
        while True:
            i, rows = self.filled.get()
            if i is None:
                raise rows
            if rows == 0:
                return
            yield i, rows

    def release(self, i: int, ready=None) -> None:
        self.free.put((i, ready))

    def close(self) -> None:
        self.free.put((None, None))
        self.thread.join()


class _HostStaging:
    """numpy and emulated backends: the chunk as read is the batch."""

    depth = 2

    def __init__(self, readers: dict[str, ColumnReader], rows: int):
        self.buffer_sets = [{name: r.empty(rows) for name, r in readers.items()}
                            for _ in range(self.depth)]

    def batch(self, i: int, rows: int) -> dict[str, Any]:
        return {name: buffer[:rows] for name, buffer in self.buffer_sets[i].items()}

    def done(self, i: int):
        return None


class _CudaStaging:
    """cuda: pinned host buffers, host-to-device copies on their own stream,
    three buffer sets. The update of chunk i (compute stream), the copy of
    chunk i + 1 (copy stream) and the read of chunk i + 2 (reader threads)
    overlap, each in a set of its own; events order them, the host never
    waits on the GPU in the loop. (On the host backends the reader and the
    update share the CPU's cores: two sets, the read of i + 1 beside the
    update of i, and a third would only add a chunk of memory.)"""

    depth = 3

    def __init__(self, readers: dict[str, ColumnReader], rows: int):
        import cupy
        import cupyx

        self.cupy = cupy
        self.buffer_sets = [{name: cupyx.empty_pinned((rows, *r.shape_tail), r.dtype)
                             for name, r in readers.items()} for _ in range(self.depth)]
        self.device_sets = [{name: cupy.empty((rows, *r.shape_tail), r.dtype)
                             for name, r in readers.items()} for _ in range(self.depth)]
        self.copy_stream = cupy.cuda.Stream(non_blocking=True)
        self.copied = [None] * self.depth
        self.consumed = [None] * self.depth

    def batch(self, i: int, rows: int) -> dict[str, Any]:
        stream = self.copy_stream
        if self.consumed[i] is not None:  # the update that read these device buffers
            stream.wait_event(self.consumed[i])
        out = {}
        for name, host in self.buffer_sets[i].items():
            device = self.device_sets[i][name][:rows]
            device.set(host[:rows], stream=stream)  # async: the source is pinned
            out[name] = device
        self.copied[i] = stream.record()
        self.cupy.cuda.get_current_stream().wait_event(self.copied[i])
        return out

    def done(self, i: int):
        self.consumed[i] = self.cupy.cuda.get_current_stream().record()
        return self.copied[i]  # the pinned set may be refilled once its copy is done


def _free_memory(backend_name: str) -> int:
    """Bytes free where exact ranking would run: the GPU's, or the host's."""
    if backend_name == "cuda":
        import cupy

        return int(cupy.cuda.runtime.memGetInfo()[0])
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def exact_score_dtype(score_dtype, from_logits: bool) -> np.dtype:
    """The dtype in which the exact path keeps the probabilities of scores read
    as ``score_dtype`` (logits or probabilities): the one place that decides
    it, for :class:`_ExactScores` and for the bytes :func:`exact_auc_bytes`
    counts.

    The softmax of logits is formed and kept in float64: rounded to a 16- or
    32-bit type, distinct probabilities would tie (or swap) and the "exact"
    values would carry an error no bound reports. Probabilities given are
    ranked as they are, in their own type (no rounding: exact, and no larger).
    """
    return np.dtype(np.float64) if from_logits else np.dtype(score_dtype)


# The constants of exact_auc_bytes, measured as resident memory (VmHWM) of
# reports on the NumPy backend (tests/test_exact_ranking.py holds the estimate
# to a real run).
#
# Bytes one ranked binary problem takes per score beyond its inputs (scores,
# mask, weights), at its peak. The NumPy reference (_ranking_formulas) holds six
# float64 arrays at once (the tie-group totals, the rates, a trapezoid or
# precision step; the order and ranked scores are gone by then): 48-49 bytes
# allocated (tracemalloc) for float16/32/64, weighted or not, about 54 resident (the
# allocator's reuse of freed blocks is not perfect), 58 with room. The kernels' path
# (kernels/ranking.cu) holds a 32-bit key or an int64 order, the ranked scores,
# class and weight, and per-tile sums: 13-26 bytes allocated on the emulator;
# 40 leaves room for the sort's temporary storage on a GPU (CUB's, not
# measured here).
NUMPY_RANK_BYTES = 58
KERNEL_RANK_BYTES = 40
# Reading, per row of a chunk beside the buffer sets and the softmax's three
# (rows, K) arrays: the states' per-row temporaries (labels, argmax, masks),
# about 112 bytes; and a bound of theirs that does not grow with the chunk
# (the NumPy backend works in sub-chunks of its own).
CHUNK_ROW_TEMPORARY_BYTES = 112
CHUNK_STATE_BYTES = 24 << 20
# The states, the report and the allocator's slack, at any size.
EXACT_OVERHEAD_BYTES = 8 << 20


def exact_auc_bytes(rows: int, num_classes: int, score_dtype, *, weighted: bool = False,
                    ignore_index: bool = False, backend: str = "numpy", chunk_rows: int = 0,
                    row_bytes: int = 0) -> int:
    """Peak memory of a report with exact ROC AUC / AP over ``rows`` x K scores,
    beyond what the process held before it, where the backend computes.

    Kept while reading: every row's target (int64), probabilities (``score_dtype``,
    see :func:`exact_score_dtype`) and weight (float64). Then the larger of
    reading (the buffer sets of ``chunk_rows`` rows of ``row_bytes`` and the
    chunk's temporaries) and ranking: the micro average ranks the N K pooled
    scores in one problem (their one-vs-rest mask, the weights repeated, and
    the ranking's own arrays, :data:`NUMPY_RANK_BYTES` or
    :data:`KERNEL_RANK_BYTES` a score); a class's problem is N of them, less.
    With ``ignore_index`` the rows kept are copied first.
    """
    score_bytes = np.dtype(score_dtype).itemsize
    weight_bytes = 8 if weighted else 0
    kept = rows * (8 + num_classes * score_bytes + weight_bytes)
    rank_bytes = NUMPY_RANK_BYTES if backend == "numpy" else KERNEL_RANK_BYTES
    ranking = rows * num_classes * (1 + weight_bytes + rank_bytes)
    if ignore_index:
        ranking += rows + kept  # the mask, then the rows kept
    # A chunk's pages are touched only as far as rows are read into them: one
    # buffer set for a file of one chunk, at most the staging's depth.
    chunk = min(chunk_rows, rows)
    depth = _CudaStaging.depth if backend == "cuda" else _HostStaging.depth
    buffer_sets = min(depth, -(-rows // chunk)) if chunk else 1
    reading = CHUNK_STATE_BYTES + chunk * (buffer_sets * row_bytes
                                           + 3 * num_classes * score_bytes
                                           + CHUNK_ROW_TEMPORARY_BYTES)
    return EXACT_OVERHEAD_BYTES + kept + max(reading, ranking)


def _format_bytes(count: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if count < 1024 or unit == "TB":
            return f"{count:,.0f} {unit}" if unit == "bytes" else f"{count:,.1f} {unit}"
        count /= 1024
    return ""


class _ExactScores:
    """Every row's targets, probabilities and weights, kept where the backend
    computes, for the exact ranking metrics at the end. ``dtype`` is the kept
    probabilities' (:func:`exact_score_dtype`)."""

    def __init__(self, xp, rows: int | None, num_classes: int, dtype, weighted: bool,
                 from_logits: bool):
        self.xp, self.from_logits, self.filled = xp, from_logits, 0
        self.dtype = np.dtype(dtype)
        # Unknown rows (text files, Arrow streams): (targets, probabilities,
        # weights) per chunk, joined at the end.
        self.parts: list[tuple] | None = None if rows is not None else []
        if rows is not None:
            self.targets = xp.empty(rows, np.int64)
            self.probabilities = xp.empty((rows, num_classes), dtype)
            self.weights = xp.empty(rows, np.float64) if weighted else None

    def add(self, y_true, scores, weight) -> None:
        xp = self.xp
        probabilities = (softmax_rows(scores.astype(self.dtype), xp) if self.from_logits
                         else scores)
        if self.parts is not None:
            self.parts.append((y_true.astype(np.int64), probabilities.astype(self.dtype),
                               None if weight is None else weight.astype(np.float64)))
            return
        stop = self.filled + len(y_true)
        self.targets[self.filled:stop] = y_true
        self.probabilities[self.filled:stop] = probabilities
        if self.weights is not None:
            self.weights[self.filled:stop] = weight
        self.filled = stop

    def arrays(self):
        if self.parts is not None:
            xp = self.xp
            targets = xp.concatenate([p[0] for p in self.parts])
            probabilities = xp.concatenate([p[1] for p in self.parts])
            weights = (None if self.parts[0][2] is None
                       else xp.concatenate([p[2] for p in self.parts]))
            return targets, probabilities, weights
        return self.targets, self.probabilities, self.weights


def _ranked_scores(rows: int, num_classes: int) -> int:
    """Scores :func:`exact_ranking` ranks: each class's column, then all N K pooled."""
    return 2 * rows * num_classes


def exact_ranking(y_true, probabilities, sample_weight=None, *, ignore_index=None,
                  progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Exact ROC AUC and average precision of every class against the rest, and
    their averages, with the names and conventions of the binned ones of
    :class:`metrics_gpu.StreamingReport`: macro over the classes where a value
    is defined, weighted by the positives' weight, micro over every class's
    one-vs-rest pairs pooled; ``roc_auc`` / ``average_precision`` are class
    1's for K = 2, else the macro averages. Error bounds are 0.

    One sort per class gives both of its values, and one sort of the N K
    pooled scores both micro averages (the backend's ``binary_rank_areas``).
    ``progress`` is told the scores ranked, :func:`_ranked_scores` in all.
    """
    from metrics_gpu.backends.selection import resolve_backend
    from metrics_gpu._validation import to_numpy

    backend = resolve_backend(probabilities)
    xp = backend.xp
    # Host arrays may resolve to a GPU backend (set_backend, METRICS_GPU_BACKEND).
    y_true, probabilities = backend.asarray(y_true), backend.asarray(probabilities)
    if sample_weight is not None:
        sample_weight = backend.asarray(sample_weight)
    rows, k = probabilities.shape
    if ignore_index is not None:
        keep = y_true != ignore_index
        y_true, probabilities = y_true[keep], probabilities[keep]
        sample_weight = None if sample_weight is None else sample_weight[keep]
        del keep
    positives = np.asarray(to_numpy(xp.bincount(y_true, sample_weight, minlength=k)),
                           dtype=np.float64)[:k]
    negatives = positives.sum() - positives
    areas = []  # [ROC AUC, AP] of each class with positives, where the scores live
    for c in range(k):
        if positives[c] > 0:
            areas.append(backend.binary_rank_areas(probabilities[:, c], y_true == c,
                                                   sample_weight))
        if progress is not None:
            progress(rows)
    auc = np.full(k, math.nan)
    ap = np.full(k, math.nan)
    if areas:
        scored = positives > 0
        per_class = np.asarray(to_numpy(xp.stack(areas)), dtype=np.float64)
        ap[scored] = per_class[:, 1]
        auc[scored] = np.where(negatives[scored] > 0, per_class[:, 0], math.nan)
    del areas
    # The pooled problem: the sample's own class is the positive of its K scores.
    onehot = (y_true[:, None] == xp.arange(k)[None, :]).reshape(-1)
    flat_weight = None if sample_weight is None else xp.repeat(sample_weight, k)
    micro = np.asarray(to_numpy(backend.binary_rank_areas(
        probabilities.reshape(-1), onehot, flat_weight)), dtype=np.float64)
    del onehot, flat_weight
    if progress is not None:
        progress(rows * k)
    out: dict[str, Any] = {}
    for name, values, micro_value in (("roc_auc", auc, micro[0]),
                                      ("average_precision", ap, micro[1])):
        macro, weighted = defined_averages(values, positives)
        out[name] = values[1] if k == 2 else macro
        out[f"{name}_macro"], out[f"{name}_weighted"] = macro, weighted
        out[f"{name}_micro"], out[f"{name}_error_bound"] = float(micro_value), 0.0
        out[f"per_class_{name}"] = values
    return out


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


NO_ROWS = "holds no rows (a header only, or an empty column): there is nothing to report"


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


def _as_numbers(values: np.ndarray) -> np.ndarray | None:
    """Group values as float64 where every one is a number (text included), else None."""
    if values.dtype.kind in "iubf":
        return values.astype(np.float64)
    try:
        return values.astype(np.float64)
    except (ValueError, TypeError):
        return None


def find_groups(sources: dict[str, Source | None], *, chunk_rows: int,
                threads: ReadThreads | None = None) -> tuple[int, np.ndarray | None]:
    """G of a groups column (one pass) and, for categories, their values in
    sorted order, as :func:`metrics_gpu.groups` encodes them: whole numbers
    are codes 0..G-1 (G = the largest + 1, categories None); any other value
    (strings, fractions) makes every value a category, named by its value."""
    readers = open_columns({"groups": sources["groups"]}, threads=threads)
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
    numbers = _as_numbers(values)
    if numbers is None:
        return int(values.size), values.astype(str)
    if not np.isfinite(numbers).all():
        raise FileProblem(f"--groups {readers['groups'].path}: holds "
                          f"{numbers[~np.isfinite(numbers)][0]} where a group should be")
    if (numbers == np.floor(numbers)).all():
        if numbers.size and numbers.min() < 0:
            raise FileProblem(f"--groups {readers['groups'].path}: holds the negative group "
                              f"{int(numbers.min())} (groups are codes 0..G-1)")
        return (int(numbers.max()) + 1 if numbers.size else 0), None
    categories = np.unique(numbers)
    return int(categories.size), categories


class GroupColumn(ColumnReader):
    """A groups column as codes 0..G-1: whole numbers as they are, categories
    (``categories``, sorted: :func:`find_groups`) by their position."""

    def __init__(self, inner: ColumnReader, categories: np.ndarray | None):
        super().__init__(inner.argument, inner.path, inner.selector, "groups")
        self.inner, self.categories = inner, categories
        self.rows, self.width, self.dtype = inner.rows, None, np.dtype(np.int64)
        self._raw: np.ndarray | None = None

    def read(self, out: np.ndarray) -> int:
        if self._raw is None or len(self._raw) < len(out):
            self._raw = self.inner.empty(len(out))
        rows = self.inner.read(self._raw[:len(out)])
        values = self._raw[:rows]
        # (find_groups found every value a number, unless categories are strings)
        if self.categories is None:
            out[:rows] = values if values.dtype.kind in "iub" else values.astype(np.float64)
        elif self.categories.dtype.kind == "f":
            out[:rows] = np.searchsorted(self.categories, values.astype(np.float64))
        else:
            out[:rows] = np.searchsorted(self.categories, values.astype(str))
        self.position += rows
        return rows

    def row_name(self, row: int) -> str:
        return self.inner.row_name(row)

    def close(self) -> None:
        self.inner.close()


def evaluate_files(sources: dict[str, Source | None], *, num_classes: int | None = None,
                   ignore_index: int | None = None, scores_are: ScoresAre = "logits",
                   top_k=(1, 5), n_bins: int = 15, auc: str = "auto", thresholds: int = 1000,
                   backend: str | None = None, chunk_rows: int | None = None, curves: bool = False,
                   progress: Callable[[str, int | None], Callable[[int], None]] | None = None,
                   num_groups: int | None = None, readers: int | None = None,
                   workers: int | None = None,
                   scores_option: str = OPTIONS["scores"]) -> FileEvaluation:
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
    """
    from metrics_gpu.backends.selection import backend_for_host_data, get_backend, use_backend
    from metrics_gpu.files.workers import worker_count
    from metrics_gpu._streaming.metrics import MAX_THRESHOLDS, SCORE_KINDS, ClassificationMetrics
    from metrics_gpu._validation import check_int_range, check_top_k

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
        if num_classes is None and score_reader is not None:
            num_classes = score_reader.width
        if score_reader is not None and num_classes != score_reader.width:
            raise FileProblem(f"{score_reader.argument} {score_reader.path}: "
                              f"{score_reader.width} score "
                              f"columns, but --num-classes is {num_classes}")
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
            found, categories = None, None
            if num_groups is None or columns["groups"].dtype.kind not in "iu":
                found, categories = find_groups(sources, chunk_rows=chunk_rows,
                                                threads=threads)
            if categories is not None:
                if num_groups is not None:
                    raise FileProblem(f"--num-groups applies to integer group codes; --groups "
                                      f"{columns['groups'].path} holds categories "
                                      f"({found} found)")
                group_names = categories.tolist()
            common["num_groups"] = found if num_groups is None else num_groups
            columns["groups"] = GroupColumn(columns["groups"], categories)
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
                          None if score_reader is None else scores_are, group_names)


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
    free = _free_memory(backend)
    fits = needed <= EXACT_MEMORY_FRACTION * free
    if auc == "exact" and not fits:
        where = "the GPU" if backend == "cuda" else "this machine"
        raise FileProblem(
            f"{score_reader.argument} {score_reader.path}: --auc exact needs about "
            f"{_format_bytes(needed)} "
            f"for {rows:,} x {num_classes} scores, and {_format_bytes(free)} are free on "
            f"{where} (it takes at most {EXACT_MEMORY_FRACTION:.0%}); use --auc binned "
            "(the error bound is printed beside each value)")
    return "exact" if fits else "binned"


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
    from metrics_gpu.files.workers import UpdateWorkers, shared_empty

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


# -- the report of a file evaluation -------------------------------------------------

class PredictionReport(MetricMapping):
    """The report of prediction files (:func:`evaluate_files`): every label
    metric (:attr:`labels`, a :class:`metrics_gpu.LabelReport`), and with
    scores the score metrics, calibration bins and ROC AUC / average precision
    (exact, or binned with their error bounds).

    A read-only :class:`collections.abc.Mapping` of the scalar metrics as
    Python floats: the label metrics (``labels``' entries), then with scores
    the scalar entries of :attr:`scores` (``cross_entropy``,
    ``top_{k}_accuracy``, ``roc_auc_macro`` ...). As in every report type,
    the per-class arrays, the matrix and the calibration bins are attributes
    (``labels.per_class``, ``scores["per_class"]`` ...), and :meth:`to_dict`
    holds everything, NaN as None.

    ``plot_confusion_matrix``, ``plot_roc``, ``plot_precision_recall`` and
    ``plot_reliability`` draw with matplotlib (the ``[plot]`` extra) and
    return the Axes; :meth:`save_plots` writes them all as PNG files.
    """

    def __init__(self, evaluation: FileEvaluation, class_names=None, intervals=None):
        from metrics_gpu._reports.labels import stream_label_report

        self.evaluation = evaluation
        codes = evaluation.class_codes
        if class_names is None and codes is not None:
            class_names = [str(code) for code in codes.tolist()]
        self.labels = stream_label_report(evaluation.labels or evaluation.scores,
                                          class_codes=codes, class_names=class_names,
                                          intervals=intervals,
                                          group_names=evaluation.group_names)
        self.streaming = None if evaluation.scores is None else evaluation.scores.compute()
        self._scores: dict[str, Any] | None = None

    @property
    def rows(self) -> int:
        return self.evaluation.rows

    @property
    def auc(self) -> str | None:
        """How ROC AUC / AP were computed: "exact", "binned", or None without scores."""
        return self.evaluation.auc

    @property
    def scores(self) -> dict[str, Any] | None:
        """Score metrics by name as Python numbers (None without scores):
        cross-entropy, perplexity, Brier, hinge, top-k accuracies, calibration
        errors, ROC AUC and average precision (binary / macro / weighted /
        micro, with ``..._error_bound``), and ``per_class`` ROC AUC / AP."""
        if self.streaming is None:
            return None
        if self._scores is None:
            stream = as_lists(self.streaming._host_values())  # NaN kept
            label_names = {row.name for row in _report_metrics()}
            values = {name: value for name, value in stream["metrics"].items()
                      if name not in label_names}
            per_class = {name: stream["per_class"][name]
                         for name in ("roc_auc", "average_precision")
                         if name in stream["per_class"]}
            exact = self.evaluation.exact
            if exact is not None:
                for name in list(values):
                    if name.startswith(("roc_auc", "average_precision")):
                        del values[name]  # binned ones kept for the curves only
                for name, value in exact.items():
                    if name.startswith("per_class_"):
                        per_class[name[len("per_class_"):]] = np.asarray(value).tolist()
                    else:
                        values[name] = float(value)
            values["per_class"] = per_class
            values["calibration"] = stream.get("calibration")
            self._scores = values
        return self._scores

    def _metric_names(self) -> tuple[str, ...]:
        scores = self.scores or {}
        return (*self.labels.keys(), *(name for name in scores
                                       if name not in ("per_class", "calibration")))

    def _metric_value(self, name: str) -> Any:
        return self.labels[name] if name in self.labels else (self.scores or {})[name]

    def _headline(self) -> list[tuple[str, Any]]:
        return [("rows", self.rows), ("classes", int(self.labels.classes.size))]

    def to_dict(self, descriptions: bool = False) -> dict[str, Any]:
        """The report as plain Python values: :meth:`LabelReport.to_dict`'s,
        with ``rows``, ``backend`` and, with scores, ``auc_method`` and
        ``scores`` (:attr:`scores`). NaN and infinities are ``None`` (strict
        JSON). ``descriptions=True`` adds ``"descriptions"`` (each metric
        name's one-line meaning) and ``"groups"`` (the label metrics by
        convention)."""
        from metrics_gpu._reports.labels import metric_legend

        out = self.labels.to_dict()
        out["rows"] = self.rows
        out["backend"] = self.evaluation.backend
        if self.streaming is not None:
            out["auc_method"] = self.auc
            out["scores"] = plain(self.scores)
        if descriptions:
            out.update(metric_legend(self.keys()))
        return out

    def to_json(self, descriptions: bool = True, **kwargs) -> str:
        """:meth:`to_dict` as strict JSON text, with the descriptions by default
        (``kwargs`` go to :func:`json.dumps`): NaN and infinities are ``null``."""
        return strict_json(self.to_dict(descriptions=descriptions), **kwargs)

    def _score_lines(self, digits: int) -> list[tuple[str, str]]:
        rows: list[tuple[str, str]] = []
        values = self.scores
        if values is None:  # no scores: no lines
            return rows
        for name, value in values.items():
            if name in ("per_class", "calibration") or name.endswith("_error_bound"):
                continue
            text = f"{value:.{digits}f}"
            bound = values.get(_bound_name(name))
            if bound is not None and self.auc == "binned" and bound == bound:
                text += f" ± {bound:.{digits}f}"
            rows.append((name, text))
        return rows

    def to_text(self, digits: int = 4) -> str:
        text = self.labels.to_text(digits)
        if self.streaming is None:
            return text
        lines = ["", f"scores (ROC AUC and average precision: {self.auc}"
                 + (", ± the error bound of the binning)" if self.auc == "binned" else ")")]
        rows = self._score_lines(digits)
        width = max(len(name) for name, _ in rows)
        lines += [f"{name:<{width}}  {value}" for name, value in rows]
        return text + "\n".join(lines) + "\n"

    def to_markdown(self, digits: int = 4) -> str:
        """The metrics as one Markdown table: the label metrics by group (as
        :meth:`LabelReport.to_markdown`), then the score metrics."""
        from metrics_gpu._reports.labels import grouped_metric_rows, markdown_table

        groups = grouped_metric_rows(self.labels.metrics, digits)
        if self.streaming is not None:
            groups.append((f"scores (ROC AUC and average precision: {self.auc})",
                           self._score_lines(digits)))
        return markdown_table(groups)

    # -- pictures -------------------------------------------------------------------

    def plot_confusion_matrix(self, ax=None, **kwargs):
        """The confusion matrix (see :func:`metrics_gpu.plot.plot_confusion_matrix`)."""
        return self.labels.plot_confusion_matrix(ax=ax, **kwargs)

    def curves(self) -> tuple[list[dict], list[dict]]:
        """Each class's ROC and precision-recall curve, at the bin edges of the
        binned histogram (:meth:`metrics_gpu.StreamingReport.curves`), with the
        report's ROC AUC / AP (exact ones when computed) in ``"auc"`` and
        ``"average_precision"``."""
        scores = self.scores
        if self.streaming is None or scores is None:
            raise ValueError("the ROC and precision-recall curves need scores (--scores)")
        roc, pr = self.streaming.curves()
        per_class = scores["per_class"]
        for k, (roc_curve, pr_curve) in enumerate(zip(roc, pr)):
            roc_curve["auc"] = per_class["roc_auc"][k]
            pr_curve["average_precision"] = per_class["average_precision"][k]
        return roc, pr

    def plot_roc(self, ax=None, classes=None, **kwargs):
        """ROC curves (:func:`metrics_gpu.plot.plot_roc`): class 1 for K = 2,
        every class and the macro average up to K = 10, the macro average alone
        beyond, or the class positions ``classes``. Returns the Axes."""
        from metrics_gpu import plot

        roc, _ = self.curves()
        chosen = plot.chosen_curves(roc, classes, kwargs, names=self.labels.class_names)
        return plot.plot_roc(chosen, ax=ax, **kwargs)

    def plot_precision_recall(self, ax=None, classes=None, **kwargs):
        """Precision-recall curves, chosen as :meth:`plot_roc`'s. Returns the Axes."""
        from metrics_gpu import plot

        _, pr = self.curves()
        chosen = plot.chosen_curves(pr, classes, kwargs, names=self.labels.class_names)
        return plot.plot_precision_recall(chosen, ax=ax, **kwargs)

    def plot_reliability(self, ax=None, **kwargs):
        """The reliability diagram of the calibration bins."""
        from metrics_gpu import plot

        if self.streaming is None:
            raise ValueError("the reliability diagram needs scores (--scores)")
        bins = self.scores["calibration"]
        kwargs.setdefault("expected_calibration_error",
                          self.scores["expected_calibration_error"])
        return plot.plot_reliability(np.asarray(bins["proportion"]),
                                     np.asarray(bins["confidence"]),
                                     np.asarray(bins["accuracy"]), ax=ax, **kwargs)

    def figures(self) -> dict[str, Any]:
        """Every picture this report has, by file stem: the confusion matrix
        (counts and row-normalized) and, with scores, ROC, precision-recall and
        the reliability diagram."""
        drawings = {}
        if self.labels.confusion_matrix is not None:
            drawings["confusion_matrix"] = lambda: self.plot_confusion_matrix()
            drawings["confusion_matrix_normalized"] = \
                lambda: self.plot_confusion_matrix(normalize="true")
        if self.labels.intervals is not None and self.labels.classes.size <= 40:
            # F1 per class with its interval as an error bar.
            drawings["per_class_f1"] = lambda: self.labels.plot_per_class("f1")
        groups = self.labels.groups
        if groups is not None:
            drawings["groups_accuracy"] = lambda: groups.plot("accuracy")
            drawings["groups_macro_f1"] = lambda: groups.plot("macro_f1")
        if self.streaming is not None:
            drawings["reliability"] = self.plot_reliability
            if self.streaming.histogram is not None:
                drawings["roc"] = self.plot_roc
                drawings["precision_recall"] = self.plot_precision_recall
        return drawings

    def save_plots(self, directory, *, dpi: int = 100) -> list[Path]:
        """Write every picture as ``directory/<name>.png``. Every one is drawn
        before any is written: a failure leaves the directory as it was."""
        import io as bytes_io

        rendered = {}
        for name, draw in self.figures().items():
            ax = draw()
            buffer = bytes_io.BytesIO()
            ax.figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
            rendered[name] = buffer.getvalue()
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, data in rendered.items():
            path = directory / f"{name}.png"
            path.write_bytes(data)
            paths.append(path)
        return paths

    def to_html(self, **options) -> str:
        """The report as one self-contained HTML page: metrics, per-class table,
        confusion matrix, pictures (with matplotlib), the files read
        (:func:`metrics_gpu._reports.html.render_html`; ``options`` go to it)."""
        from metrics_gpu._reports.html import render_html

        return render_html(self, **options)


def _bound_name(name: str) -> str:
    for family in ("roc_auc", "average_precision"):
        if name.startswith(family):
            return f"{family}_error_bound"
    return ""


def _report_metrics():
    from metrics_gpu._formulas.labels import REPORT_METRICS

    return REPORT_METRICS


def report_files(sources: dict[str, Source | None], *, class_names=None,
                 confidence_level: float | None = None, method: str = "percentile",
                 n_resamples: int | None = None, rng=None, **options) -> PredictionReport:
    """:func:`evaluate_files`, as a :class:`PredictionReport`; with
    ``confidence_level``, the label metrics' intervals (:func:`metrics_gpu.label_report`'s
    ``method``, ``n_resamples`` and ``rng``)."""
    from metrics_gpu.intervals import DEFAULT_RESAMPLES, check_interval_options

    intervals = check_interval_options(
        confidence_level, method, DEFAULT_RESAMPLES if n_resamples is None else n_resamples,
        rng)
    return PredictionReport(evaluate_files(sources, **options), class_names=class_names,
                            intervals=intervals)


# -- multilabel files -----------------------------------------------------------------

TASKS = ("multiclass", "multilabel")
# What each reason bit of the multilabel state's checks means, by the column it names.
MULTILABEL_PROBLEMS = {
    "y_true": "a target other than 0/1{ignore}",
    "labels": "a prediction other than 0/1",
    "probabilities": ("a value outside [0, 1] (or NaN), not a probability as --scores-are "
                      "probabilities declares (for logits, pass --scores-are logits)"),
    "logits": "a non-finite logit",
    "sample_weight": "a negative or non-finite weight",
}
# The multilabel report's metric names (MultilabelReport's, F1 only: the
# command's beta is 1) and their meanings, built from the families and averages.
MULTILABEL_FAMILIES = {
    "precision": "precision", "recall": "recall", "f1": "F1",
    "jaccard": "Jaccard index (intersection over union)"}
MULTILABEL_AVERAGES = {
    "micro": "of every label's tp / fp / fn pooled",
    "macro": "unweighted mean over the labels",
    "weighted": "mean over the labels weighted by their support",
    "samples": "mean over the rows of each row's set-wise value"}
MULTILABEL_DESCRIPTIONS = {
    "subset_accuracy": "fraction of rows whose every label is right",
    "hamming_loss": "fraction of label cells predicted wrongly",
    "zero_one_loss": "1 - subset accuracy",
    **{f"{family}_{average}": f"{meaning}, {how}"
       for family, meaning in MULTILABEL_FAMILIES.items()
       for average, how in MULTILABEL_AVERAGES.items()},
    **{f"{name}_{average}": f"binned {title}, {how}"
       for name, title in (("roc_auc", "ROC AUC"), ("average_precision", "average precision"))
       for average, how in (("macro", "unweighted mean over the labels where defined"),
                            ("weighted", "mean over the labels weighted by their positives"),
                            ("micro", "of every label's scores pooled"))},
    **{f"{name}_{average}error_bound": f"bound on |binned - exact| {title}"
       + (f" ({average[:-1]})" if average else " (macro)")
       for name, title in (("roc_auc", "ROC AUC"), ("average_precision", "average precision"))
       for average in ("", "weighted_", "micro_")},
}


def _column_count(reader: ColumnReader) -> int:
    return reader.width or 1


def detect_multilabel(sources: dict[str, Source | None]) -> str | None:
    """Why the files are a multilabel problem, or None: ``--y-true`` holds L >= 2
    columns (never multiclass class codes) and the prediction file (``--y-pred``,
    else ``--scores``) as many. A label matrix beside a prediction file of
    another width is a :class:`FileProblem` (neither task can read it);
    a file that does not open is left to the report's own reading to name."""
    predicted = "y_pred" if sources.get("y_pred") is not None else "scores"
    truth_source, predicted_source = sources.get("y_true"), sources.get(predicted)
    if truth_source is None or predicted_source is None:
        return None
    try:
        truth = open_column(truth_source, OPTIONS["y_true"], "indicators")
    except FileProblem:
        return None
    truth.close()
    if truth.width is None:
        return None
    try:
        # Opened as labels or class scores: any width, any numeric dtype.
        prediction = open_column(predicted_source, OPTIONS[predicted], "indicators")
    except FileProblem:
        return None
    prediction.close()
    if _column_count(prediction) != truth.width:
        raise FileProblem(
            f"{OPTIONS['y_true']} {truth.path} holds (N, {truth.width}) rows, multilabel "
            f"targets, but {OPTIONS[predicted]} {prediction.path} holds "
            f"{_column_count(prediction)} column(s): give (N, {truth.width}) predictions "
            "(--task multilabel), or one column of class codes in --y-true (multiclass)")
    return (f"{OPTIONS['y_true']} holds an (N, {truth.width}) matrix and "
            f"{OPTIONS[predicted]} one of the same shape")


def evaluate_multilabel_files(sources: dict[str, Source | None], *, threshold: float = 0.5,
                              scores_are: ScoresAre = "logits", thresholds: int | None = None,
                              ignore_index: int | None = None, backend: str | None = None,
                              chunk_rows: int | None = None, detected: str | None = None,
                              progress: Callable[[str, int | None], Callable[[int], None]]
                              | None = None,
                              readers: int | None = None,
                              workers: int | None = None) -> MultilabelFileReport:
    """Stream multilabel files through :class:`metrics_gpu.MultilabelMetrics`.

    ``sources``: ``y_true`` ((N, L) 0/1 targets), one of ``y_pred`` ((N, L)
    0/1 predictions) or ``scores`` ((N, L) scores, ``scores_are``, positive
    above ``threshold``), optionally ``sample_weight`` ((N,)). ``thresholds``:
    the bins of the binned per-label ROC AUC / AP (scores only; None: none).
    The chunks, the reading thread and the staging are those of
    :func:`evaluate_files`; a row the state leaves out (a target other than
    0/1 or ``ignore_index``, a refused prediction or weight) is a
    :class:`FileProblem` naming the file and the row. ``sources``,
    ``readers`` and ``workers`` as :func:`evaluate_files`'.
    """
    from metrics_gpu.backends.selection import backend_for_host_data, get_backend, use_backend
    from metrics_gpu._multilabel.stream import MultilabelMetrics
    from metrics_gpu.files.workers import worker_count
    from metrics_gpu._streaming.metrics import SCORE_KINDS

    if scores_are not in SCORE_KINDS:
        raise ValueError(f"scores_are must be one of {SCORE_KINDS}, got {scores_are!r}")
    if (sources.get("y_pred") is None) == (sources.get("scores") is None):
        raise ValueError("--task multilabel takes --y-pred ((N, L) 0/1 predictions) or "
                         "--scores ((N, L) scores, positive above --threshold): one of them")
    if thresholds is not None and sources.get("scores") is None:
        raise ValueError("--thresholds (binned ROC AUC / AP per label) needs --scores: "
                         "0/1 predictions have no ranking")
    if ignore_index is not None and ignore_index in (0, 1):
        raise ValueError(f"--ignore-index {ignore_index}: with --task multilabel it must be "
                         "a value other than the targets 0 and 1")
    predicted = "y_pred" if sources.get("y_pred") is not None else "scores"
    backend = backend_for_host_data(get_backend() if backend is None else backend)
    from_logits = scores_are == "logits"
    threads = ReadThreads(readers)
    try:
        columns = open_columns(sources, from_logits=from_logits, roles=MULTILABEL_ROLE_OF,
                               threads=threads)
    except BaseException:
        threads.close()
        raise
    try:
        truth, prediction = columns["y_true"], columns[predicted]
        labels = _column_count(truth)
        if _column_count(prediction) != labels:
            raise FileProblem(
                f"{OPTIONS[predicted]} {prediction.path}: {_column_count(prediction)} "
                f"column(s), but {OPTIONS['y_true']} {truth.path} has {labels} (multilabel "
                "targets and predictions are both (N, L))")
        if chunk_rows is None:
            chunk_rows = max(1, min(MAX_CHUNK_ROWS, CHUNK_BYTES // _row_bytes(columns)))
        bins = None if thresholds is None else histogram_thresholds(thresholds, labels)
        state = MultilabelMetrics(labels, threshold=threshold, scores=scores_are,
                                  ignore_index=ignore_index, thresholds=bins, validate=False)
        # The reader checks every row (_check_declared_kind) and warns once.
        state._warns_of_probabilities = False
        rows = next((r.rows for r in columns.values() if r.rows is not None), None)
        values = None if rows is None else rows * sum(
            math.prod(r.shape_tail) for r in columns.values())
        processes = worker_count(values, workers) if backend == "numpy" else 1
        with use_backend(backend):
            _stream_multilabel(columns, backend, chunk_rows, state, predicted,
                               None if progress is None else progress("reading", rows),
                               workers=processes)
        total_rows = truth.position
        if total_rows == 0:
            raise FileProblem(f"--y-true {truth.path}: {NO_ROWS}")
        _raise_first_left_out(state, columns, predicted, scores_are, ignore_index)
        if predicted == "scores" and from_logits and prediction.looks_like_probabilities():
            checked = prediction.rows_checked
            warnings.warn(label_probabilities_read_as_logits(
                f"{prediction.argument} {prediction.path}", "--scores-are probabilities",
                rows=checked - prediction.rows_not_probabilities, total=checked),
                UserWarning, stacklevel=2)
        names = truth.column_names or prediction.column_names
        return MultilabelFileReport(state.compute(), rows=total_rows, backend=backend,
                                    label_names=names, threshold=threshold,
                                    predictions=predicted, detected=detected,
                                    thresholds=bins, scores_are=scores_are)
    finally:
        for reader in columns.values():
            reader.close()
        threads.close()


def _stream_multilabel(readers, backend: str, chunk_rows: int, state, predicted: str,
                       progress, workers: int = 1) -> None:
    """The loop of :func:`_stream` for the multilabel state: each chunk, as
    (rows, L) targets and predictions, into one update (on the numpy backend
    with ``workers`` > 1, in worker processes)."""
    if backend == "numpy" and workers > 1:

        def update(batch: dict[str, Any], ordinal: int, first_row: int) -> None:  # in a worker
            rows = len(batch["y_true"])
            state._updates, state._rows_seen = ordinal, first_row
            state.update(batch["y_true"].reshape(rows, -1), batch[predicted].reshape(rows, -1),
                         batch.get("sample_weight"))

        chunks, rows = _chunks_in_workers(readers, workers, chunk_rows, [state], update, None,
                                          progress)
        state._updates, state._rows_seen = chunks, rows
        return
    staging = (_CudaStaging if backend == "cuda" else _HostStaging)(readers, chunk_rows)
    prefetch = _Prefetch(readers, staging.buffer_sets)
    try:
        for i, rows in prefetch:
            batch = staging.batch(i, rows)
            state.update(batch["y_true"].reshape(rows, -1),
                         batch[predicted].reshape(rows, -1), batch.get("sample_weight"))
            prefetch.release(i, staging.done(i))
            if progress is not None:
                progress(rows)
    finally:
        prefetch.close()


def _raise_first_left_out(state, readers, predicted: str, scores_are: str,
                          ignore_index: int | None) -> None:
    """The rows the multilabel state left out, as the files and the first row."""
    invalid = state.first_invalid()
    if invalid is None:
        return
    left_out, first, arguments = invalid
    columns = {"y_true": "y_true", "preds": predicted, "sample_weight": "sample_weight"}
    parts = []
    for argument in arguments:
        column = columns[argument]
        key = ("labels" if column == "y_pred" else scores_are) if argument == "preds" else column
        problem = MULTILABEL_PROBLEMS[key].format(
            ignore="" if ignore_index is None else f" or --ignore-index {ignore_index}")
        parts.append((column, problem))
    first_column = parts[0][0]
    row = readers[first_column].row_name(first)
    if len(parts) == 1:
        column, problem = parts[0]
        raise FileProblem(f"{OPTIONS[column]} {readers[column].path}: {row} holds {problem} "
                          f"({left_out:,} bad rows in all)")
    named = " or ".join(f"{OPTIONS[c]} {readers[c].path} ({p})" for c, p in parts)
    raise FileProblem(f"{named}: {row} is the first of {left_out:,} rows holding such values")


class MultilabelFileReport(MetricMapping):
    """The report of multilabel prediction files (:func:`evaluate_multilabel_files`):
    the :class:`metrics_gpu.MultilabelReport` of the streamed state
    (:attr:`metrics`), with the rows read, the label names and how the
    predictions were read.

    A read-only mapping of the scalar metrics (subset accuracy, Hamming loss,
    precision / recall / F1 / Jaccard micro, macro, weighted and samples, and
    with ``thresholds`` the binned ROC AUC / AP macro, weighted and micro with
    their error bounds); ``per_label`` and ``confusion_matrix`` as attributes,
    everything in :meth:`to_dict`. :meth:`save_plots` writes the per-label F1
    bars and, with ``thresholds``, the per-label ROC and precision-recall curves.
    """

    def __init__(self, metrics, *, rows: int, backend: str, label_names, threshold: float,
                 predictions: str, detected: str | None, thresholds: int | None,
                 scores_are: str):
        self.metrics, self.rows, self.backend = metrics, rows, backend
        self.threshold, self.predictions, self.detected = threshold, predictions, detected
        self.thresholds, self.scores_are = thresholds, scores_are
        labels = len(metrics.per_label["support"])
        self.label_names = ([str(name) for name in label_names] if label_names is not None
                            and len(label_names) == labels else [str(i) for i in range(labels)])
        per_label = metrics.per_label
        self.per_label = {("f1" if name == "f_score" else name): np.asarray(values)
                          for name, values in per_label.items()}
        values = {name: metrics[name] for name in metrics if not name.startswith("f_score")}
        self._values = values

    @property
    def total(self) -> Any:
        """The rows' total weight (the row count without weights)."""
        return self.metrics.total

    def _metric_names(self) -> tuple[str, ...]:
        return tuple(self._values)

    def _metric_value(self, name: str) -> Any:
        return self._values[name]

    def _headline(self) -> list[tuple[str, Any]]:
        return [("rows", self.rows), ("labels", len(self.label_names))]

    def to_dict(self, descriptions: bool = False) -> dict[str, Any]:
        """The report as plain Python values (NaN as None): ``task``,
        ``task_detected`` (why the files were read as multilabel, or None when
        ``--task`` said it), ``rows``, ``total``, ``labels``, ``label_names``,
        how the predictions were read, ``metrics``, ``per_label`` (lists, one
        value a label) and ``confusion_matrix`` ((L, 2, 2): ``[[tn, fp], [fn,
        tp]]`` per label); ``descriptions=True`` adds each metric's meaning."""
        out: dict[str, Any] = {
            "task": "multilabel", "task_detected": self.detected, "rows": self.rows,
            "total": whole(self.total), "labels": len(self.label_names),
            "label_names": self.label_names, "backend": self.backend,
            "predictions": self._predictions_read(),
            "auc_method": None if self.thresholds is None else "binned",
            "thresholds": self.thresholds,
            "metrics": plain(self._values),
            "per_label": plain(self.per_label),
            "confusion_matrix": plain(self.metrics.confusion_matrix),
        }
        if descriptions:
            out["descriptions"] = {name: MULTILABEL_DESCRIPTIONS[name] for name in self._values
                                   if name in MULTILABEL_DESCRIPTIONS}
        return out

    def to_json(self, descriptions: bool = True, **kwargs) -> str:
        """:meth:`to_dict` as strict JSON text, with the descriptions by default."""
        return strict_json(self.to_dict(descriptions=descriptions), **kwargs)

    def _predictions_read(self) -> str:
        if self.predictions == "y_pred":
            return "0/1 labels"
        return f"{self.scores_are}, positive above {self.threshold:g}" + (
            " (sigmoid)" if self.scores_are == "logits" else "")

    def _task_line(self) -> str:
        return "task: multilabel" + (f" (detected: {self.detected}; pass --task to choose)"
                                     if self.detected else "")

    def _groups(self, digits: int) -> list[tuple[str, list[tuple[str, str]]]]:
        """The scalar metrics, formatted, by group: whole rows, per-label
        averages by family, binned ranking values with their bounds."""
        values = self._values

        def number(name: str) -> str:
            return format_number(values[name], digits)

        groups = [("whole rows", [(name, number(name)) for name in
                            ("subset_accuracy", "hamming_loss", "zero_one_loss")])]
        groups.append(("over the labels (micro / macro / weighted / samples)",
                       [(f"{family}_{average}", number(f"{family}_{average}"))
                        for family in MULTILABEL_FAMILIES for average in MULTILABEL_AVERAGES]))
        if self.thresholds is not None:
            rows = []
            for name in ("roc_auc", "average_precision"):
                for average, bound in (("macro", ""), ("weighted", "weighted_"),
                                       ("micro", "micro_")):
                    text = number(f"{name}_{average}")
                    error = values[f"{name}_{bound}error_bound"]
                    if error == error:
                        text += f" ± {format_number(error, digits)}"
                    rows.append((f"{name}_{average}", text))
            groups.append((f"ROC AUC and average precision (binned, {self.thresholds} "
                           "thresholds, ± the error bound of the binning)", rows))
        return groups

    def _label_columns(self) -> list[str]:
        columns = ["precision", "recall", "f1", "jaccard", "support"]
        if self.thresholds is not None:
            columns += ["roc_auc", "average_precision"]
        return columns

    def to_text(self, digits: int = 4) -> str:
        """The metrics by group, then the per-label table while L <= 50, as aligned text."""
        from metrics_gpu._reports.labels import MAX_PRINTED_CLASSES

        lines = [self._task_line(),
                 f"rows: {self.rows:,}  labels: {len(self.label_names)}  "
                 f"total weight: {format_number(whole(self.total), digits)}  "
                 f"predictions: {self._predictions_read()}"]
        for title, rows in self._groups(digits):
            width = max(len(name) for name, _ in rows)
            lines += ["", f"{title}:"] + [f"  {name:<{width}}  {text}" for name, text in rows]
        if len(self.label_names) <= MAX_PRINTED_CLASSES:
            columns = self._label_columns()
            name_width = max([len("label")] + [len(n) for n in self.label_names])
            cells_of = {c: max(12, len(c) + 2) for c in columns}
            lines += ["", f"{'label':>{name_width}} "
                      + "".join(f"{c:>{cells_of[c]}}" for c in columns)]
            for i, name in enumerate(self.label_names):
                cells = "".join(f"{format_number(whole(self.per_label[c][i]), digits):>{cells_of[c]}}"
                                if c == "support" else
                                f"{format_number(self.per_label[c][i], digits):>{cells_of[c]}}"
                                for c in columns)
                lines.append(f"{name:>{name_width}} {cells}")
        else:
            lines += ["", f"(per-label table of {len(self.label_names)} labels: use --format "
                      "json)"]
        return "\n".join(lines) + "\n"

    def to_markdown(self, digits: int = 4) -> str:
        """The metrics as one Markdown table (group rows, each metric with its
        meaning), then the per-label table."""
        lines = [self._task_line(), "", "| metric | value | meaning |", "| --- | --- | --- |"]
        for title, rows in self._groups(digits):
            lines.append(f"| **{title}** | | |")
            lines += [f"| {name} | {text} | {MULTILABEL_DESCRIPTIONS.get(name, '')} |"
                      for name, text in rows]
        columns = self._label_columns()
        lines += ["", "| label | " + " | ".join(columns) + " |",
                  "| --- |" + " --- |" * len(columns)]
        for i, name in enumerate(self.label_names):
            lines.append(f"| {name} | " + " | ".join(
                format_number(whole(self.per_label[c][i]) if c == "support"
                              else self.per_label[c][i], digits) for c in columns) + " |")
        return "\n".join(lines) + "\n"

    # -- pictures -------------------------------------------------------------------

    def figures(self) -> dict[str, Any]:
        """Every picture by file stem: ``per_label_f1`` (a bar a label) and, with
        ``thresholds``, ``roc`` and ``precision_recall`` (every label and the
        macro curve up to 10 labels, the macro curve alone beyond)."""
        drawings: dict[str, Any] = {
            "per_label_f1": lambda: self.metrics.plot_per_label("f_score",
                                                                names=self.label_names)}
        if self.thresholds is not None:
            drawings["roc"] = self.metrics.plot_roc
            drawings["precision_recall"] = self.metrics.plot_precision_recall
        return drawings

    save_plots = PredictionReport.save_plots

    def to_html(self, **options) -> str:
        raise ValueError("--format html is not made for --task multilabel yet: use text, "
                         "json or markdown")

