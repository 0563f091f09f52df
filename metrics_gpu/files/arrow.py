"""The readers of Parquet, Arrow IPC and Feather columns, batch by batch through
pyarrow: :class:`ArrowReader`, and :class:`_PartitionReader` for a Parquet
file of a Hive-partitioned directory."""

from __future__ import annotations

import numpy as np

from metrics_gpu.files.readers import MATRIX_ROLES, ColumnReader
from metrics_gpu.files.sources import FileProblem, _pyarrow

# Text rows are parsed in pieces of this many lines.
TEXT_BLOCK_ROWS = 1 << 16


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
        elif role in ("labels", "groups") and _holds_text(pa, types[0]):
            dtype, tail = np.dtype(str), ()  # names: read as their codes (_names_codes)
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
        if self.pa.types.is_dictionary(arrow_type):  # a categorical of numbers: its values'
            arrow_type = arrow_type.value_type
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
            if self.holds_names:
                columns.append(self._names_codes(column))
            elif pa.types.is_list(column.type) or pa.types.is_large_list(column.type) or \
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

    def _names_codes(self, column) -> np.ndarray:
        """A column of names (strings, or a dictionary of strings) as their codes
        in the vocabulary, by Arrow's kernels: a dictionary's entries are
        looked up once and its indices taken through them. While the
        vocabulary is being found, the distinct names (of a dictionary, those
        its indices use) are added, and the codes are zeros."""
        pa = self.pa
        compute = pa.compute
        indices = None
        names = column
        if pa.types.is_dictionary(column.type):
            names, indices = column.dictionary, column.indices
        if not (pa.types.is_string(names.type) or pa.types.is_large_string(names.type)):
            names = names.cast(pa.string())  # string views
        vocabulary = self._name_vocabulary()
        if vocabulary.names is None:
            used = names if indices is None else names.take(compute.unique(indices))
            distinct = np.asarray(compute.unique(used).to_numpy(zero_copy_only=False), str)
            if (distinct == "").any():
                raise self._empty_name(self.position + self._first_empty(column))
            vocabulary.add(distinct)
            return np.zeros(len(column), np.int32)
        codes = compute.fill_null(compute.index_in(
            names, value_set=vocabulary.arrow_values(pa)), -1)
        codes = np.asarray(codes.to_numpy(zero_copy_only=False), np.int32)
        if indices is not None:
            codes = codes[np.asarray(indices.to_numpy(zero_copy_only=False))]
        if codes.size and codes.min() < 0:
            first = int(np.argmax(codes < 0))
            raise self._unknown_name(self.position + first, str(column[first].as_py()))
        return codes

    def _first_empty(self, column) -> int:
        """The first row of ``column`` that holds the empty name (messages only)."""
        values = np.asarray(column.to_numpy(zero_copy_only=False), str)
        return int(np.argmax(values == ""))

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


def _holds_text(pa, arrow_type) -> bool:
    """Whether a column of ``arrow_type`` holds names: strings, or a
    dictionary (a categorical) of strings."""
    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    is_view = getattr(pa.types, "is_string_view", None)
    return bool(pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
                or (is_view is not None and is_view(arrow_type)))


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
