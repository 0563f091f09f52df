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

from metrics_gpu.files.columns import OPTIONS, ShardedReader, open_column, open_columns
from metrics_gpu.files.evaluate import (
    AUC_MODES,
    CHUNK_BYTES,
    MAX_CHUNK_ROWS,
    FileEvaluation,
    _row_bytes,
    _stream,
    evaluate_files,
)
from metrics_gpu.files.exact import (
    KERNEL_RANK_BYTES,
    NUMPY_RANK_BYTES,
    exact_auc_bytes,
    exact_ranking,
    exact_score_dtype,
)
from metrics_gpu.files.multilabel import (
    TASKS,
    MultilabelFileReport,
    detect_multilabel,
    evaluate_multilabel_files,
)
from metrics_gpu.files.readers import (
    MAX_DEFAULT_READERS,
    READERS_ENVIRONMENT,
    ColumnReader,
    ReadThreads,
    reader_count,
)
from metrics_gpu.files.report import PredictionReport, report_files
from metrics_gpu.files.sources import SUFFIXES, FileProblem, Source, source_files

# The modules, each on the ones above it: sources (a column's files),
# readers (a file's reader: .npy, .npz, text), arrow (Parquet, Arrow IPC),
# columns (opening the columns, sharded ones), staging (the chunks' buffers),
# exact (exact ROC AUC / AP), evaluate (the chunk loop), report
# (PredictionReport), multilabel (multilabel files); workers (worker
# processes) stands alone. _row_bytes and _stream: bench/files.py times the
# reading and the loop alone.
__all__ = [
    "AUC_MODES",
    "CHUNK_BYTES",
    "KERNEL_RANK_BYTES",
    "MAX_CHUNK_ROWS",
    "MAX_DEFAULT_READERS",
    "NUMPY_RANK_BYTES",
    "OPTIONS",
    "READERS_ENVIRONMENT",
    "SUFFIXES",
    "TASKS",
    "ColumnReader",
    "FileEvaluation",
    "FileProblem",
    "MultilabelFileReport",
    "PredictionReport",
    "ReadThreads",
    "ShardedReader",
    "Source",
    "detect_multilabel",
    "evaluate_files",
    "evaluate_multilabel_files",
    "exact_auc_bytes",
    "exact_ranking",
    "exact_score_dtype",
    "open_column",
    "open_columns",
    "reader_count",
    "report_files",
    "source_files",
]
