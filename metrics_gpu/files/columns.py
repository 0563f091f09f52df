"""The columns of an evaluation opened: a file's reader by its suffix, a column
sharded over several files read as one (:class:`ShardedReader`), the named
columns with their rows matched (:func:`open_columns`), and a groups column
as codes (:class:`GroupColumn`). A column of names is read through the
``Vocabulary`` set on its reader (a sharded column's, shared by its
shards)."""

from __future__ import annotations

import bisect
import os
from pathlib import Path

import numpy as np

from metrics_gpu._common.options import OPTIONS
from metrics_gpu.files.arrow import ArrowReader, _PartitionReader
from metrics_gpu.files.readers import ColumnReader, NpyReader, ReadThreads, TextReader
from metrics_gpu.files.sources import (
    SUFFIXES,
    TEXT_SUFFIXES,
    FileProblem,
    Source,
    _Shard,
    _source_shards,
    split_source,
)

ROLE_OF = {"y_true": "labels", "y_pred": "labels", "scores": "scores",
           "sample_weight": "weights", "groups": "groups"}
MULTILABEL_ROLE_OF = {"y_true": "indicators", "y_pred": "indicators",
                      "scores": "label_scores", "sample_weight": "weights"}

NO_ROWS = "holds no rows (a header only, or an empty column): there is nothing to report"


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
            elif reader.holds_names != first[1].holds_names:
                named, coded = (shard, first[0]) if reader.holds_names else (first[0], shard)
                raise self.problem(f"{named.label} holds names (strings), but {coded.label} "
                                   "holds numbers (the files of one column hold the same "
                                   "kind of values)")
            elif (reader.width, reader.dtype) != (first[1].width, first[1].dtype):
                raise self.problem(f"{shard.label} holds {_layout(reader)}, but "
                                   f"{first[0].label} holds {_layout(first[1])} (the files "
                                   "of one column hold the same type and width)")
        if first is None:
            raise self.problem(f"{NO_ROWS} (its {len(shards):,} files are all empty)")
        reader = first[1]
        self.dtype, self.width = reader.dtype, reader.width
        self.binary_column = getattr(reader, "binary_column", False)
        self.holds_names = reader.holds_names  # each shard's read through self.vocabulary
        self.column_names = reader.column_names
        known = [shard.rows for shard in shards]
        self.rows = None if None in known else sum(r for r in known if r is not None)

    def _open(self, shard: _Shard) -> ColumnReader:
        reader = _file_reader(self.argument, shard.path, shard.selector, self.role,
                              from_logits=self.from_logits, threads=self.threads,
                              allow_empty=True, fragment=shard.fragment, schema=shard.schema)
        reader.vocabulary = self.vocabulary  # one vocabulary over the shards
        return reader

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


class GroupColumn(ColumnReader):
    """A groups column as codes 0..G-1: whole numbers as they are, categories
    (``categories``, sorted: :func:`find_groups`) by their position. A column
    of names (``inner.holds_names``) gives their codes in its vocabulary,
    taken through ``lut`` (the code of each name: its number, or its
    category's position)."""

    def __init__(self, inner: ColumnReader, categories: np.ndarray | None,
                 lut: np.ndarray | None = None):
        super().__init__(inner.argument, inner.path, inner.selector, "groups")
        self.inner, self.categories, self.lut = inner, categories, lut
        self.rows, self.width, self.dtype = inner.rows, None, np.dtype(np.int64)
        self._raw: np.ndarray | None = None

    def read(self, out: np.ndarray) -> int:
        if self._raw is None or len(self._raw) < len(out):
            self._raw = self.inner.empty(len(out))
        rows = self.inner.read(self._raw[:len(out)])
        values = self._raw[:rows]
        # (find_groups found every value a number, unless categories are strings)
        if self.lut is not None:
            out[:rows] = self.lut[values]
        elif self.categories is None:
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
