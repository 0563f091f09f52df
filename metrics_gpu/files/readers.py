"""The readers of one file's column, chunk by chunk: :class:`ColumnReader`
(each role's dtype, shape and value checks), ``.npy`` and ``.npz`` files
(:class:`NpyReader`, a chunk read in pieces at once by :class:`ReadThreads`)
and ``.csv`` and ``.txt`` files (:class:`TextReader`); the names of a column
of class names or group categories and their codes (:class:`Vocabulary`)."""

from __future__ import annotations

import concurrent.futures
import itertools
import math
import os
import re
import zipfile
from pathlib import Path

import numpy as np

from metrics_gpu._validation import (
    allowed_non_probability_rows,
    binary_score_rows,
    count_non_probability_rows,
    declared_probabilities_refused,
    first_non_probability_row,
)
from metrics_gpu.files.sources import FileProblem
from metrics_gpu.files.workers import available_cores, chosen_count
from metrics_gpu.backends.selection import get_backend_implementation

ROLES = ("labels", "scores", "weights", "indicators", "label_scores", "groups")
# Roles whose rows may be several columns: (N, K) class scores, and the
# multilabel (N, L) 0/1 indicators (labels' dtypes and checks) and per-label
# scores (floats, no row-sum check, no (N,) widening).
MATRIX_ROLES = ("scores", "indicators", "label_scores")
# Whether a role's values are class codes (checked as whole numbers, read as integers).
LABEL_ROLES = ("labels", "indicators")
SCORE_DTYPES = (np.float16, np.float32, np.float64)
# Parallel .npy reads: a chunk's bytes are split into one piece per reader
# thread, none smaller than this (a smaller read costs more in its call and
# thread hand-off than it gains from the overlap).
READ_PIECE_BYTES = 1 << 20
# Reader threads by default: one per core, at most this many (past about 8
# concurrent reads, one NVMe drive or the page cache copy no faster).
MAX_DEFAULT_READERS = 8
READERS_ENVIRONMENT = "METRICS_GPU_READERS"


# -- parallel positional reads --------------------------------------------------------


def reader_count(readers: int | None = None) -> int:
    """Threads that read a ``.npy`` column's chunks: ``readers``, else the
    environment's ``METRICS_GPU_READERS``, else one per core up to
    :data:`MAX_DEFAULT_READERS`."""
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


# -- class names ----------------------------------------------------------------------

# While a vocabulary is being found, the distinct names collected block by
# block are merged once they hold this many names past the merged ones (the
# memory of the pass stays about twice the vocabulary's).
MERGE_NAMES = 1 << 16


class Vocabulary:
    """The names of a column of class names (or of group categories) and their
    codes: ``names[code]``.

    Fixed (``names`` given, in code order: ``--classes FILE``, whose option
    and path ``option`` names in messages), or found: readers of the columns
    that share it :meth:`add` the distinct names of each block they read (a
    first pass, whose codes are not used), and :meth:`found` fixes the names,
    sorted (as :func:`numpy.unique` and scikit-learn's ``LabelEncoder``).
    Names are compared as they are (a text file's fields stripped of spaces);
    an empty name is refused where it is read."""

    def __init__(self, names=None, *, option: str | None = None):
        self.option = option
        self.names: np.ndarray | None = None
        self._parts: list[np.ndarray] = []
        self._merged = np.zeros(0, str)
        self._pending = 0
        self._arrow_values = None
        if names is not None:
            self._fix(np.asarray(list(names), dtype=str))

    def _fix(self, names: np.ndarray) -> None:
        self.names = names
        self._order = np.argsort(names, kind="stable")
        self._sorted = names[self._order]

    def add(self, distinct: np.ndarray) -> None:
        """The distinct names of a block (while finding)."""
        if self.names is not None:
            raise RuntimeError("the vocabulary is fixed: its names are not collected")
        self._parts.append(distinct)
        self._pending += distinct.size
        if self._pending > max(MERGE_NAMES, self._merged.size):
            self._merge()

    def _merge(self) -> None:
        self._merged = np.unique(np.concatenate([self._merged, *self._parts]))
        self._parts, self._pending = [], 0

    def found(self) -> np.ndarray:
        """Fix the names collected: their sorted union."""
        if self.names is None:
            self._merge()
            self._fix(self._merged)
        assert self.names is not None
        return self.names

    def codes(self, values: np.ndarray) -> np.ndarray:
        """The codes of ``values`` (a NumPy string array) as int32, -1 where a
        value is not a name: a binary search of the sorted names, vectorised."""
        if self.names is None:
            raise RuntimeError("the vocabulary is being found: no codes yet")
        if not self._sorted.size:
            return np.full(values.shape, -1, np.int32)
        at = np.searchsorted(self._sorted, values)
        clipped = np.minimum(at, self._sorted.size - 1)
        known = self._sorted[clipped] == values
        return np.where(known, self._order[clipped], -1).astype(np.int32)

    def arrow_values(self, pa):
        """The names as an Arrow string array (the value set of ``pyarrow.compute.index_in``)."""
        if self._arrow_values is None:
            assert self.names is not None
            self._arrow_values = pa.array(self.names.tolist(), type=pa.string())
        return self._arrow_values


def read_classes_file(path, option: str = "--classes") -> Vocabulary:
    """The class names of ``path``: one a line, in code order (the first line
    is class 0); spaces around a name are dropped, and blank lines at the end.
    An empty line between names, a repeated name or no name at all is a
    :class:`FileProblem` naming the line."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise FileProblem(f"{option} {path}: cannot read it ({error})") from None
    names = [line.strip() for line in lines]
    while names and not names[-1]:
        names.pop()
    if not names:
        raise FileProblem(f"{option} {path}: holds no class names (one a line, in code order)")
    seen: dict[str, int] = {}
    for number, name in enumerate(names, start=1):
        if not name:
            raise FileProblem(f"{option} {path}: line {number:,} is empty (one class name a "
                              "line: the line's place is the class code)")
        if name in seen:
            raise FileProblem(f"{option} {path}: line {number:,} repeats the class name "
                              f"{name!r} of line {seen[name]:,}")
        seen[name] = number
    return Vocabulary(names, option=f"{option} {path}")


# -- readers ------------------------------------------------------------------------


class ColumnReader:
    """One column of a prediction file, read front to back in chunks.

    ``rows`` is the number of rows (None when only a full read can tell: text
    files, Arrow streams); ``width`` is None for a ``(N,)`` column, K for
    ``(N, K)`` scores; ``dtype`` is the type :meth:`read` returns (labels come
    out as integers, whatever the file held).

    A column of labels or groups that holds names (strings, Arrow
    dictionaries of strings) has ``holds_names``: :meth:`read` gives their
    codes in ``vocabulary`` (int32), set before reading (a fixed
    :class:`Vocabulary`, or one being found, to which each block's distinct
    names are added).
    """

    rows: int | None
    width: int | None
    dtype: np.dtype
    binary_column = False  # (N,) or (N, 1) scores of the positive class
    holds_names = False  # labels or groups given as names: read as their codes
    vocabulary: Vocabulary | None = None

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
        return bool(self.rows_checked) and (
            self.rows_not_probabilities <= allowed_non_probability_rows(self.rows_checked))

    def _check_declared_kind(self, values: np.ndarray) -> None:
        """Scores as declared (``--scores-are``), checked block by block as they
        are read (the reader thread: inside the pass, no device sync)."""
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

    # Names read as codes.
    def _name_vocabulary(self) -> Vocabulary:
        if self.vocabulary is None:
            raise RuntimeError(f"{self.argument} {self.path}: a column of names is read "
                               "once its vocabulary is set")
        return self.vocabulary

    def _empty_name(self, row: int) -> FileProblem:
        what = "group" if self.role == "groups" else "label"
        return self.problem(f"{self.row_name(row)} holds an empty {what} (every row needs "
                            f"its {what}; leave the row out of the files)")

    def _unknown_name(self, row: int, value: str) -> FileProblem:
        if value == "":
            return self._empty_name(row)
        vocabulary = self._name_vocabulary()
        assert vocabulary.names is not None
        where = (f"not one of the {vocabulary.names.size:,} classes of {vocabulary.option}"
                 if vocabulary.option is not None else
                 "not among the names its first pass found (did the file change?)")
        what = "group" if self.role == "groups" else "label"
        return self.problem(f"{self.row_name(row)} holds the {what} {value!r}, {where}")

    def _codes_of_names(self, values: np.ndarray) -> np.ndarray:
        """A block of names (a NumPy string array) as codes: while the
        vocabulary is being found, its distinct names added (zeros returned)."""
        values = values.astype(str, copy=False)  # bytes (S) as ASCII
        vocabulary = self._name_vocabulary()
        if vocabulary.names is None:
            distinct = np.unique(values)
            if distinct.size and distinct[0] == "":  # (sorted: the empty name first)
                raise self._empty_name(self.position + int(np.argmax(values == "")))
            vocabulary.add(distinct)
            return np.zeros(values.shape, np.int32)
        codes = vocabulary.codes(values)
        if codes.size and codes.min() < 0:
            first = int(np.argmax(codes < 0))
            raise self._unknown_name(self.position + first, str(values[first]))
        return codes

    # Shared checks of the values read, by role.
    def _checked(self, values: np.ndarray) -> np.ndarray:
        """Values of a block as this column's dtype and shape, with the checks of its role."""
        if self.holds_names:
            if values.dtype.kind not in "US":  # codes already (an Arrow column's)
                return values.astype(self.dtype, copy=False)
            return self._codes_of_names(values)
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
        elif self.role in ("labels", "groups") and kind in "US":
            # Names (strings): read as their codes in the vocabulary.
            if shape_tail not in ((), (1,)):
                raise self.problem(f"{self.role} must be one column, got rows of shape "
                                   f"{shape_tail}")
            self.holds_names = True
            self.dtype, self.width = np.dtype(np.int32), None
        elif self.role == "labels":
            if kind not in "iubf":
                raise self.problem(f"labels must be integer class codes or class names "
                                   f"(strings), got dtype {dtype}")
            if shape_tail not in ((), (1,)):
                raise self.problem(f"labels must be one column, got rows of shape {shape_tail}")
            self.dtype = np.dtype(np.int64) if kind in "fb" or dtype.itemsize > 8 else dtype
            if kind == "u" and dtype.itemsize == 8:
                self.dtype = np.dtype(np.int64)
            self.width = None
        elif self.role == "groups":
            # Integer codes, or categories (other numbers, Python objects):
            # read as they are, encoded by GroupColumn once a pass has found
            # them (strings are names, above).
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
        # Groups are text (names, or numbers that find_groups reads as codes);
        # labels are names where the column's first value is not a number.
        if role == "groups" or (role == "labels" and self._first_value_is_name()):
            self._set_layout(np.dtype(str), tail)
            self._parse_dtype = str
            return
        self._set_layout(np.dtype(np.int64 if role in LABEL_ROLES else np.float64), tail)
        self._parse_dtype = np.float64

    def _first_value_is_name(self) -> bool:
        """Whether the first row's value of the (one) column selected is not a
        number (the column then holds names); the row is kept for :meth:`read`."""
        if not self.pending:
            for line in self.file:
                if line.strip():
                    self.pending.append(line)
                    break
        if not self.pending:
            return False  # no rows: said as such when read
        fields = self.pending[0].split(self.delimiter)
        index = self.columns[0]
        return index < len(fields) and not _is_number(fields[index].strip().strip('"'))

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
                                usecols=self.columns, ndmin=2, **self._text_options())
        except ValueError:
            raise self._parse_problem(lines) from None
        values = values[:, 0] if values.shape[1] == 1 else values
        if self._parse_dtype is str:
            values = _unquoted(np.char.strip(values))  # as the header's fields
        rows = len(lines)
        out[:rows] = self._checked(values)
        self.position += rows
        return rows

    def _text_options(self) -> dict:
        """np.loadtxt's options beyond the delimiter: names may be quoted."""
        return {"quotechar": '"'} if self._parse_dtype is str else {}

    def _parse_problem(self, lines: list[str]) -> FileProblem:
        """The first of ``lines`` that does not parse, named by its row and line."""
        for i, line in enumerate(lines):
            try:
                np.loadtxt([line], dtype=self._parse_dtype, delimiter=self.delimiter,
                           usecols=self.columns, ndmin=2, **self._text_options())
            except ValueError as error:
                reason = re.sub(r" at row \d+, column \d+\.?$", "", str(error))
                hint = ("; its first value is a number, so the column holds class codes "
                        "(a column of class names starts with a name)"
                        if self.role == "labels" else "")
                return self.problem(f"cannot parse {self.row_name(self.position + i)} "
                                    f"{line.strip()!r}: {reason}{hint}")
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


def _unquoted(values: np.ndarray) -> np.ndarray:
    """Text fields without their spaces' quotes: a field quoted after a space
    (``a, "b"``) keeps its quotes in :func:`numpy.loadtxt`, which unquotes
    only a field that starts with one."""
    quoted = (np.char.startswith(values, '"') & np.char.endswith(values, '"')
              & (np.char.str_len(values) >= 2))
    if quoted.any():
        values = values.copy()
        values[quoted] = np.char.strip(values[quoted], '"')
    return values


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
