"""Launch code shared by the ``cuda`` and ``emulated`` backends.

A :class:`KernelBackend` is given a *device* (:class:`~.cuda.CudaDevice` on a
GPU, :class:`~.emulated.EmulatedDevice` on the CPU) and does everything else
the same way on both: it picks the kernel from the shape of the problem (K,
weights, the shared-memory budget), sizes the grid from the SM count,
allocates the state, launches, and returns the same state the NumPy backend
returns (:class:`~metrics_gpu._state.ClassStatistics`, or a dense matrix).

Kernel choice for a dense K x K matrix (M = matrix positions):

* M = 2, unweighted: ``confusion_binary`` (ballot/popc, no atomics per sample);
* M*M counters fit the per-block shared-memory budget (with the opt-in beyond
  48 KiB, 227 KiB on an H100): ``confusion_shared`` (privatised per block,
  warp-aggregated increments when M*M <= 64);
* otherwise ``confusion_global`` (global atomics off the diagonal; the
  diagonal per block in shared memory when a block has many more samples
  than classes).

Huge K uses ``class_statistics`` (O(K) memory; the 3K counts per block in
shared memory while they fit). Every label metric of the
report then comes from one launch of ``reduce_metrics.cu`` (from the matrix or
from the statistics) into one float64 buffer. Nothing here synchronises with
the host: every count stays on the device until the caller converts it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from metrics_gpu import _ranking_formulas
from metrics_gpu._formulas import SLOT, label_metric_size
from metrics_gpu._kernels import (
    COUNT_TYPES,
    LABEL_TYPES,
    PACKED_RANK_SCORE_TYPE,
    PACKED_RANK_TYPES,
    RANK_SCORE_TYPES,
    SCORE_MAX_TOP_K,
    SCORE_TARGET_TYPES,
    SCORE_TYPES,
    STREAM_ORDINAL_SHIFT,
    accumulate_expression,
    label_summary_expression,
    rank_areas_expression,
    rank_gather_expression,
    reduce_expression,
    score_pass_expression,
    stream_update_expression,
)
from metrics_gpu._state import (
    Bfloat16Bits,
    ClassStatistics,
    RowArgmax,
    ScoreSums,
    score_sums_size,
    statistics_from_matrix,
)
from metrics_gpu.backends.numpy_backend import row_argmax
from metrics_gpu.testing import record

SOURCE = "confusion.cu"
REDUCE_SOURCE = "reduce_metrics.cu"
# Blocks per SM the grid is sized for: 8 blocks of the device's block size
# (256 threads on a GPU) fill the 2048 threads an SM holds on every arch.
BLOCKS_PER_MULTIPROCESSOR = 8
# A block's 32-bit shared counters must not wrap: each launch gives a block
# fewer than 2^31 samples (the host splits larger inputs into launches).
MAX_SAMPLES_PER_BLOCK = 1 << 31
# Shared memory the system keeps per resident block (CUDA's occupancy rule).
SHARED_RESERVED_PER_BLOCK = 1024
# Warp-aggregated shared increments pay off while few cells take every
# sample (K <= 8): merged lanes replace contended atomics on one address.
AGGREGATE_MAX_CELLS = 64
# Static shared memory of label_metrics_from_matrix (reduction scratch of
# 24 x 32 doubles, the routing buffer of 3 x 256 doubles, a row sum per warp,
# ticket, totals: 12.3 KiB), rounded up: the dynamic part must fit beside it
# in the block's budget.
REDUCE_STATIC_SHARED_BYTES = 13 * 1024
# The reduction kernels' shared buffers are sized for blocks of at most this
# many threads (kMaxBlockThreads in reduce_metrics.cu).
REDUCE_MAX_BLOCK_THREADS = 256
# Threads of a warp (kernels/common.cuh kWarpSize): the most lanes a score row
# takes (shuffles span at most a warp), and the row tile of fused_logits_wide.
WARP_SIZE = 32
SCORES_SOURCE = "scores.cu"
# kernels/scores.cu: the block size its reduction scratch is sized for, the
# launch bound of its kernels and of streaming.cu's (kScoreBlockThreads). Its
# top-k limit is _kernels.SCORE_MAX_TOP_K (kMaxTopK).
SCORE_MAX_BLOCK_THREADS = 256
# Columns per lane before a row takes more lanes: about 8 keeps each lane's
# loads independent while a warp still covers 4+ rows for K <= 32.
SCORE_COLUMNS_PER_LANE = 8
# Contiguous rows of at least this many columns take fused_logits_wide (a
# tile of threads per row, 16-byte loads): a warp per row, or the whole block
# per row from SCORE_BLOCK_ROW_COLUMNS. Chosen from the kernels' shapes (at
# 256 columns a warp has two 16-byte loads of float per lane; at 8192 a
# block of 256 threads has eight), not yet timed on a GPU.
SCORE_WIDE_COLUMNS = 256
SCORE_BLOCK_ROW_COLUMNS = 8192
# Contiguous rows of at most this many columns take fused_logits_staged (a
# thread per row, the block's rows copied through shared memory), when its
# tile fits in the 48 KiB a block has without opting in.
SCORE_STAGED_COLUMNS = 32
SCORE_STAGED_SHARED_BYTES = 48 * 1024

RANKING_SOURCE = "ranking.cu"
# kernels/ranking.cu: positions per thread (kRankItems) and its launch bound
# (kRankBlockThreads); a tile is block * RANK_ITEMS_PER_THREAD positions.
RANK_ITEMS_PER_THREAD = 8
RANK_MAX_BLOCK_THREADS = 256


def top_k_shared_bytes(num_top_k: int, block: int) -> int:
    """Dynamic shared memory of the top-k buckets (kernels/scores.cu
    top_k_bucket): num_top_k + 1 doubles per thread, none without top_k.
    With 1024 bins (24 KiB) and 8 values (18 KiB at 256 threads) a block
    stays inside the 48 KiB every GPU gives without opting in."""
    return (num_top_k + 1) * block * 8 if num_top_k else 0


def score_group(num_columns: int) -> int:
    """Lanes per row in the fused score pass: a power of two, at most a warp."""
    wanted = -(-num_columns // SCORE_COLUMNS_PER_LANE)
    return min(WARP_SIZE, 1 << max(0, (wanted - 1).bit_length()))


@dataclass(frozen=True)
class ScoreMapping:
    """How the fused score pass lays rows onto threads."""
    kernel: str        # a name of _kernels.SCORE_PASS_KERNELS
    group: int         # threads per row: lanes (fused_logits_pass, 1 staged) or a tile
    tile_bytes: int = 0  # dynamic shared memory of fused_logits_staged's rows


def reads_wide_rows(num_columns: int, column_stride: int, address: int, itemsize: int) -> bool:
    """Whether rows of scores are read 16 bytes a load (kernels/scores.cu
    scan_row_wide): contiguous rows of many columns, at an element-aligned
    address (each row's first columns up to a 16-byte boundary go alone)."""
    return num_columns >= SCORE_WIDE_COLUMNS and column_stride == 1 and address % itemsize == 0


def score_mapping(num_columns: int, row_stride: int, column_stride: int, address: int,
                  itemsize: int, block: int, shared_bytes: int) -> ScoreMapping:
    """The fused pass's kernel and threads per row for ``(N, num_columns)``
    scores (strides in elements; ``shared_bytes`` of bins and top-k buckets
    beside): rows that reads_wide_rows go to ``fused_logits_wide``, a warp or
    the block per row; contiguous rows of few columns to
    ``fused_logits_staged`` when its tile fits; others to
    ``fused_logits_pass``, ``score_group`` lanes per row."""
    if reads_wide_rows(num_columns, column_stride, address, itemsize):
        tile = block if num_columns >= SCORE_BLOCK_ROW_COLUMNS else WARP_SIZE
        return ScoreMapping("fused_logits_wide", tile)
    widened = 8 if itemsize == 8 else 4  # float64 stays double, the rest become float
    tile_bytes = num_columns * (block + 1) * widened
    if (1 <= num_columns <= SCORE_STAGED_COLUMNS and column_stride == 1
            and row_stride == num_columns
            and shared_bytes + tile_bytes <= SCORE_STAGED_SHARED_BYTES):
        return ScoreMapping("fused_logits_staged", 1, tile_bytes)
    return ScoreMapping("fused_logits_pass", score_group(num_columns))


def native_byte_order(array):
    """``array`` in the machine's byte order: kernels read raw memory, so a
    big-endian NumPy array (``'>i4'``, ``'>f8'``) is converted first (one copy);
    native arrays (every CuPy array) pass through."""
    dtype = getattr(array, "dtype", None)
    if dtype is None or dtype.isnative:
        return array
    return array.astype(dtype.newbyteorder("="))


@dataclass(frozen=True)
class _Weights:
    array: Any             # device array, or None
    c_type: str            # weight C type in the instantiation
    fixed: bool            # deterministic fixed point

    @property
    def integer_counts(self) -> bool:
        """Accumulated as 64-bit integers (counts, integer weights, fixed point)."""
        return self.fixed or self.c_type in ("mg::unit_weight", "long long")


def _ignore_arguments(ignore_index, label_dtype):
    """(ignore_index, has_ignore_index) as the kernels compare them.

    Kernels compare labels read as int64; a uint64 label >= 2**63 reads as its
    two's complement, so the value is wrapped the same way. A value the label
    dtype cannot hold never matches (as NumPy's comparison by value).
    """
    if ignore_index is None:
        return np.int64(0), np.int32(0)
    label_dtype = np.dtype(label_dtype)
    low, high = (0, 1) if label_dtype.kind == "b" else (
        np.iinfo(label_dtype).min, np.iinfo(label_dtype).max)
    if not low <= ignore_index <= high:
        return np.int64(0), np.int32(0)
    wrapped = (int(ignore_index) + 2**63) % 2**64 - 2**63
    return np.int64(wrapped), np.int32(1)


@dataclass(frozen=True)
class _Pass:
    """One accumulation pass: inputs as the kernels read them, and its shape."""

    device: Any            # the CudaDevice or EmulatedDevice that launches
    true: Any              # device arrays, as the kernels read them
    true_type: str
    pred: Any              # labels, or (N, K) scores
    pred_type: str
    scores: bool
    row_stride: int        # scores: strides in elements
    column_stride: int
    group: int             # scores: lanes per row
    weights: _Weights
    num_classes: int       # K: labels must lie in [0, K)
    size: int              # M: matrix positions (K, or the class_lut's)
    ignore: tuple          # (ignore_index, has_ignore_index) as the kernels compare them
    lut: Any               # class_lut on the device, or None
    max_weight_bits: Any   # fixed point: (1,) uint64 device array (max |w|), else None
    n: int

    @property
    def work_items(self) -> int:
        """Threads' worth of work: a sample, or a score row per `group` lanes."""
        return self.n * self.group if self.scores else self.n

    def arguments(self, start: int, stop: int) -> list:
        """The leading kernel arguments (MG_ACCUMULATE_PARAMETERS) of one segment."""
        true, pred = self.true[start:stop], self.pred[start:stop]
        vector_loads = not self.scores and (
            self.device.data_pointer(true) % 16 == 0 and self.device.data_pointer(pred) % 16 == 0)
        weight = None if self.weights.array is None else self.weights.array[start:stop]
        return [
            true, pred, weight, np.int64(stop - start), np.int64(self.num_classes), self.lut,
            np.int64(self.size), *self.ignore, np.int32(vector_loads),
            np.int64(self.row_stride), np.int64(self.column_stride), np.int32(self.group),
            self.max_weight_bits, np.int64(self.n),
        ]


# -- the streaming state (metrics_gpu.ClassificationMetrics) -------------------

STREAMING_SOURCE = "streaming.cu"
# kernels/streaming.cu enum StreamConfig: the int64 config vector, packed once
# per (state, input layout) and kept on the device.
STREAM_CONFIG = (
    "classes", "inner", "image_stride", "inner_stride", "column_stride", "group",
    "ignore_index", "has_ignore", "from_logits", "clip_eps_bits", "num_top_k",
    *(f"top_k_{i}" for i in range(SCORE_MAX_TOP_K)),
    "bins", "thresholds", "matrix", "privatize", "wide_rows",
)
STREAM_WEIGHT_TYPES = {"int64": "long long", "float32": "float", "float64": "double"}


class StreamWorkspace:
    """What a streaming state owns on a kernel backend besides its state:
    the per-block partials and tickets of the update, the packed configs, and
    the compute outputs. Allocated once; an update allocates nothing more
    unless a batch brings a new input layout (one config) or more rows than
    any before (larger partials)."""

    def __init__(self) -> None:
        # Device arrays (None until the first launch that needs them).
        self.configs: dict[tuple, Any] = {}  # packed config vector per input layout
        self.partials: Any = None
        self.partial_rows = 0
        self.update_ticket: Any = None
        self.moments: Any = None   # the kappa moments as doubles, written by each update
        self.ones: Any = None      # weights of 1.0 for unweighted batches into float counts
        self.compute: tuple | None = None   # (pooled, ticket, score out, label out)


def _stream_scalar_args(spec, batch, group, clip_eps, privatize, thresholds, score_sums=True,
                        wide_rows=False):
    """The config vector of one (state, input layout); ``batch`` None gives
    the one compute reads for a state restored before any update."""
    if batch is None:
        from metrics_gpu._validation import StreamBatch

        batch = StreamBatch(y_true=np.zeros(0, np.int64), preds=None, sample_weight=None, n=0,
                            score_dtype="float64")
    ignore, has_ignore = _ignore_arguments(spec["ignore_index"], batch.y_true.dtype)
    top_k = list(spec["top_k"]) if score_sums else []  # a state without score sums has none
    values = dict(
        classes=spec["num_classes"], inner=batch.inner, image_stride=batch.image_stride,
        inner_stride=batch.inner_stride, column_stride=batch.column_stride, group=group,
        ignore_index=int(ignore), has_ignore=int(has_ignore), from_logits=int(spec["from_logits"]),
        clip_eps_bits=int(np.float64(clip_eps).view(np.int64)), num_top_k=len(top_k),
        bins=spec["n_bins"] if score_sums else 0, thresholds=thresholds if score_sums else 0,
        matrix=int(spec["keep_matrix"]), privatize=int(privatize), wide_rows=int(wide_rows),
        **{f"top_k_{i}": v for i, v in enumerate(top_k + [0] * (SCORE_MAX_TOP_K - len(top_k)))},
    )
    return np.array([values[name] for name in STREAM_CONFIG], dtype=np.int64)


class KernelBackend:
    """A backend whose heavy primitives are the raw kernels of ``kernels/``."""

    # The functional API takes its metrics from one reduction launch.
    reduces_on_device = True

    def __init__(self, device):
        self.device = device
        self.name = device.name
        self.xp = device.xp

    # -- arrays --------------------------------------------------------------

    def asarray(self, array, dtype=None):
        if isinstance(array, np.ndarray):
            array = native_byte_order(array)
        return native_byte_order(self.device.asarray(array, dtype=dtype))

    def to_host(self, array):
        """A NumPy copy (on a GPU a device-to-host copy, and so a sync)."""
        record(host_transfers=1)
        if isinstance(array, RowArgmax):
            scores = array.scores
            if isinstance(scores, Bfloat16Bits):  # the patterns, as NumPy's bfloat16
                return row_argmax(self.device.to_host(scores.bits).view(scores.dtype))
            return row_argmax(self.device.to_host(scores))
        return self.device.to_host(array)

    # -- what a call costs: every launch and allocation goes through these -----

    def launch(self, source: str, expression: str, grid: int, block: int, args,
               shared_bytes: int = 0) -> None:
        """Launch one kernel instantiation (counted by metrics_gpu.testing)."""
        record(launches=1)
        self.device.launch(source, expression, grid, block, args, shared_bytes)

    def zeros(self, shape, dtype):
        """A zeroed device array (counted as one allocation)."""
        record(device_allocations=1)
        return self.device.zeros(shape, dtype)

    def contiguous(self, array):
        """A C-contiguous copy of a device array (one allocation)."""
        record(device_allocations=1)
        return self.xp.ascontiguousarray(array)

    def upload(self, host_array):
        """A host NumPy array copied to the device (one allocation)."""
        record(device_allocations=1)
        return self.device.asarray(host_array)

    def to_framework(self, value, like):
        """A result in the framework and on the device of the caller's input ``like``."""
        return self.device.to_framework(value, like)

    def argmax_scores(self, scores) -> RowArgmax:
        """Defer the row argmax to the accumulation kernel (one read of the scores)."""
        return RowArgmax(scores)

    # -- inputs as the kernels read them --------------------------------------

    def _labels(self, array):
        """A contiguous label array and its C type (bool read as unsigned char)."""
        xp = self.xp
        array = xp.ascontiguousarray(native_byte_order(array))
        if array.dtype == np.bool_:
            array = array.view(np.uint8)
        return array, LABEL_TYPES[array.dtype.name]

    def _label_pair(self, y_true, y_pred):
        true, true_type = self._labels(y_true)
        if isinstance(y_pred, RowArgmax):
            if true_type not in SCORE_TARGET_TYPES:
                true, true_type = self._labels(true.astype(np.int64))
            return (true, true_type) + self._scores(y_pred.scores)
        pred, pred_type = self._labels(y_pred)
        if true_type != pred_type:
            # One instantiation per label type, not per pair: mixed dtypes
            # are read as int64 (one conversion pass; documented).
            true, true_type = self._labels(true.astype(np.int64))
            pred, pred_type = self._labels(pred.astype(np.int64))
        return true, true_type, pred, pred_type, 0, 0

    def _scores(self, scores):
        """Scores, their C type, and (row, column) strides in elements. float16
        and bfloat16 go as their 16-bit patterns (:class:`Bfloat16Bits` as it
        comes), which the kernels widen in registers."""
        if isinstance(scores, Bfloat16Bits):
            scores, name = scores.bits, "bfloat16"
        else:
            scores = native_byte_order(scores)
            name = scores.dtype.name
        if name not in SCORE_TYPES:
            scores = scores.astype(np.float64 if scores.dtype.itemsize > 4 else np.float32)
            name = scores.dtype.name
        itemsize = scores.dtype.itemsize
        strides = scores.strides
        if any(s % itemsize for s in strides):
            scores = self.xp.ascontiguousarray(scores)
            strides = scores.strides
        if name in ("float16", "bfloat16"):
            scores = scores.view(np.uint16)
        return scores, SCORE_TYPES[name], strides[0] // itemsize, strides[1] // itemsize

    def _weights(self, sample_weight, deterministic: bool) -> _Weights:
        if sample_weight is None:
            return _Weights(None, "mg::unit_weight", False)
        xp = self.xp
        weight = xp.ascontiguousarray(native_byte_order(sample_weight))
        if weight.dtype.kind in "iub":
            if weight.dtype != np.int64:
                weight = weight.astype(np.int64)
            return _Weights(weight, "long long", False)
        if weight.dtype not in (np.float32, np.float64) or (
                deterministic and weight.dtype != np.float64):
            weight = weight.astype(np.float64)
        c_type = "float" if weight.dtype == np.float32 else "double"
        return _Weights(weight, c_type, deterministic)

    # -- launch geometry -----------------------------------------------------

    def _grid(self, work_items: int, shared_bytes: int = 0) -> int:
        per_multiprocessor = BLOCKS_PER_MULTIPROCESSOR
        if shared_bytes:
            # Blocks whose shared memory an SM holds at once (1 KiB of each
            # block's is the system's): a larger grid would only add a wave.
            per_multiprocessor = max(1, min(
                per_multiprocessor,
                self.device.shared_memory_per_multiprocessor
                // (shared_bytes + SHARED_RESERVED_PER_BLOCK)))
        grid = self.device.multiprocessor_count * per_multiprocessor
        return max(1, min(grid, math.ceil(work_items / self.device.block_threads)))

    def _segments(self, n: int, grid: int):
        """(start, stop) launches, each giving a block fewer than 2^31 samples."""
        step = grid * MAX_SAMPLES_PER_BLOCK
        for start in range(0, n, step):
            yield start, min(start + step, n)

    # -- the accumulation pass -----------------------------------------------

    def _prepare(self, y_true, y_pred, sample_weight, *, num_classes, ignore_index, class_lut,
                 deterministic) -> _Pass:
        true, true_type, pred, pred_type, row_stride, column_stride = self._label_pair(
            y_true, y_pred)
        weights = self._weights(sample_weight, deterministic)
        lut = None
        if class_lut is not None:
            lut = self.xp.ascontiguousarray(self.device.asarray(class_lut, dtype=np.int64))
        n = true.shape[0]
        max_weight_bits = None
        if weights.fixed:
            max_weight_bits = self.zeros(1, np.uint64)
            self.launch(SOURCE, "max_abs_weight<double>", self._grid(n),
                               self.device.block_threads,
                               [weights.array, np.int64(n), max_weight_bits])
        scores = isinstance(y_pred, RowArgmax)
        return _Pass(
            device=self.device, true=true, true_type=true_type, pred=pred, pred_type=pred_type,
            scores=scores, row_stride=row_stride, column_stride=column_stride,
            # Lanes per score row: the power of two >= K, at most a warp.
            group=min(WARP_SIZE, 1 << max(0, (num_classes - 1).bit_length())) if scores else 0,
            weights=weights, num_classes=num_classes,
            size=num_classes if class_lut is None else int(np.max(class_lut, initial=-1)) + 1,
            # Judged on the caller's dtype, before any conversion of the labels.
            ignore=_ignore_arguments(ignore_index, y_true.dtype),
            lut=lut, max_weight_bits=max_weight_bits, n=n,
        )

    def _zero_weight_seen(self, weights, size):
        return self.zeros(size if weights.array is not None else 1, np.uint8)

    def _fixed_to_float(self, counts, max_weight_bits, total):
        out = self.zeros(counts.shape, np.float64)
        count = int(np.prod(counts.shape))
        self.launch(SOURCE, "fixed_point_to_float64", self._grid(count), self.device.block_threads,
                           [counts, np.int64(count), max_weight_bits, np.int64(total), out])
        return out

    def accumulate_confusion(self, y_true, y_pred, *, num_classes, sample_weight=None,
                             ignore_index=None, class_lut=None, guard=False,
                             deterministic=False):
        """Dense confusion matrix (rows actual, columns predicted) in one pass.

        Returns ``(matrix, observed, n_invalid)`` like the NumPy backend; the
        matrix is int64 without weights or with integer weights, else float64.
        ``deterministic=True`` accumulates float weights in 64-bit fixed point
        (weights scaled by ``2**(62 - e)``, ``2**e`` the power of two just above
        max|w| times the one just above N): integer atomics are associative,
        so the result is bit-identical run to run, with an absolute error per
        weight of at most ``max|w| * N * 2**-61``.
        Samples out of range are counted in ``n_invalid`` whatever ``guard``.
        """
        del guard  # the kernels always check the range; validation decides if it raises
        device = self.device
        run = self._prepare(y_true, y_pred, sample_weight, num_classes=num_classes,
                            ignore_index=ignore_index, class_lut=class_lut,
                            deterministic=deterministic)
        weights, size, n, max_bits = run.weights, run.size, run.n, run.max_weight_bits
        invalid = self.zeros(1, np.uint64)
        matrix = self.zeros(size * size,
                              np.uint64 if weights.integer_counts else np.float64)
        seen = self._zero_weight_seen(weights, size)
        shared_bytes = size * size * (4 if weights.array is None else 8)
        if size == 2 and weights.array is None:
            kernel, extra, shared = "confusion_binary", [matrix, invalid], 0
        elif shared_bytes <= device.shared_memory_per_block_optin:
            aggregate = np.int32(weights.array is None and size * size <= AGGREGATE_MAX_CELLS)
            kernel, extra, shared = ("confusion_shared", [matrix, seen, invalid, aggregate],
                                     shared_bytes)
        else:
            # The diagonal per block in shared memory, when a block has many
            # more samples than diagonal cells to zero and flush.
            diagonal_bytes = size * (4 if weights.array is None else 8)
            shared_diagonal = (diagonal_bytes <= device.shared_memory_per_block_optin
                               and n >= self._grid(run.work_items, diagonal_bytes) * size)
            shared = diagonal_bytes if shared_diagonal else 0
            kernel, extra = "confusion_global", [matrix, seen, invalid,
                                                 np.int32(shared_diagonal)]
        expression = accumulate_expression(kernel, run.true_type, run.pred_type,
                                           weights.c_type, weights.fixed)
        grid = self._grid(run.work_items, shared)
        for start, stop in self._segments(n, grid):
            self.launch(SOURCE, expression, grid, device.block_threads,
                          run.arguments(start, stop) + extra, shared)
        if weights.fixed:
            matrix = self._fixed_to_float(matrix, max_bits, n)
        elif matrix.dtype == np.uint64:
            matrix = matrix.view(np.int64)
        matrix = matrix.reshape(size, size)
        observed = (matrix.sum(axis=0) > 0) | (matrix.sum(axis=1) > 0)
        if weights.array is not None:
            observed |= seen.astype(bool)
        return matrix, observed, device.scalar(invalid[0])

    def class_statistics(self, y_true, y_pred, *, num_classes, sample_weight=None,
                         ignore_index=None, class_lut=None, guard=False, moments=False,
                         deterministic=False) -> ClassStatistics:
        """Per-class statistics in O(K) memory (``class_statistics`` kernel).

        The kappa moments are exact 128-bit integers for counts, integer
        weights and ``deterministic=True``; float64 sums otherwise.
        """
        del guard
        xp, device = self.xp, self.device
        run = self._prepare(y_true, y_pred, sample_weight, num_classes=num_classes,
                            ignore_index=ignore_index, class_lut=class_lut,
                            deterministic=deterministic)
        weights, size, n, max_bits = run.weights, run.size, run.n, run.max_weight_bits
        integer_counts = weights.integer_counts
        count_dtype = np.uint64 if integer_counts else np.float64
        true_positives = self.zeros(size, count_dtype)
        support = self.zeros(size, count_dtype)
        predicted = self.zeros(size, count_dtype)
        seen = self._zero_weight_seen(weights, size)
        invalid = self.zeros(1, np.uint64)
        exact_moments = self.zeros(4, np.uint64)
        float_moments = self.zeros(2, np.float64)
        # The 3K counts privatised per block in shared memory when a block
        # has many more samples than cells to zero and flush at its end: as
        # 32-bit cells for counts (8 bytes for weights), or unweighted as
        # 16-bit fields, two per word, when only those fit (mode 2).
        budget = device.shared_memory_per_block_optin
        shared, privatize = 3 * size * (4 if weights.array is None else 8), 1
        if shared > budget and weights.array is None:
            shared, privatize = 4 * ((3 * size + 1) // 2), 2
        if shared > budget or n < self._grid(run.work_items, shared) * 3 * size:
            shared, privatize = 0, 0
        grid = self._grid(run.work_items, shared)
        expression = accumulate_expression("class_statistics", run.true_type, run.pred_type,
                                           weights.c_type, weights.fixed)
        for start, stop in self._segments(n, grid):
            self.launch(SOURCE, expression, grid, device.block_threads,
                          run.arguments(start, stop)
                          + [true_positives, support, predicted, seen, invalid,
                             np.int32(bool(moments)), exact_moments, float_moments,
                             np.int32(privatize)], shared)
        if weights.fixed:
            true_positives, support, predicted = (
                self._fixed_to_float(a, max_bits, n) for a in (true_positives, support, predicted)
            )
        elif integer_counts:
            true_positives, support, predicted = (
                a.view(np.int64) for a in (true_positives, support, predicted)
            )
        observed = (support > 0) | (predicted > 0)
        if weights.array is not None:
            observed |= seen.astype(bool)
        linear = quadratic = None
        if moments:
            if integer_counts:
                words = exact_moments.astype(np.float64)
                linear = words[0] + words[1] * 2.0**64
                quadratic = words[2] + words[3] * 2.0**64
                if weights.fixed:
                    scale = self._fixed_to_float(xp.ones(1, dtype=np.uint64), max_bits, n)[0]
                    linear, quadratic = linear * scale, quadratic * scale
            else:
                linear, quadratic = float_moments[0], float_moments[1]
        return ClassStatistics(
            true_positives=true_positives,
            support=support,
            predicted=predicted,
            total=support.sum(),
            observed=observed,
            invalid=device.scalar(invalid[0]),
            linear_disagreement=linear,
            quadratic_disagreement=quadratic,
        )

    def statistics_from_matrix(self, matrix, observed, *, invalid=0, moments=False):
        return statistics_from_matrix(matrix, observed, self.xp, invalid=invalid,
                                      moments=moments)

    # -- every label metric in one launch -------------------------------------

    def _mask(self, selected):
        if selected is None:
            return None
        mask = self.xp.ascontiguousarray(native_byte_order(selected))
        return mask.view(np.uint8) if mask.dtype == np.bool_ else mask.astype(np.uint8)

    def label_metrics(self, stats: ClassStatistics, *, selected=None):
        """Every label metric of ``stats`` in one launch: a float64 device buffer.

        Layout and conventions: :data:`metrics_gpu._formulas.LABEL_METRIC_SLOTS`
        (NumPy reference :func:`~metrics_gpu._formulas.label_metric_values`).
        """
        xp, device = self.xp, self.device
        dtype = np.dtype(np.float64 if stats.support.dtype.kind == "f" else np.int64)

        def counts(array):
            return xp.ascontiguousarray(xp.asarray(array, dtype=dtype).reshape(-1))

        def moment(value):
            return None if value is None else xp.asarray(value, dtype=np.float64).reshape(1)

        num_classes = stats.num_classes
        out = self.zeros(label_metric_size(num_classes), np.float64)
        self.launch(
            REDUCE_SOURCE, reduce_expression("label_metrics_from_statistics", COUNT_TYPES[dtype.name]),
            1, min(device.block_threads, REDUCE_MAX_BLOCK_THREADS),
            [counts(stats.true_positives), counts(stats.support), counts(stats.predicted),
             counts(stats.total), np.int64(num_classes), self._mask(selected),
             moment(stats.linear_disagreement), moment(stats.quadratic_disagreement), out],
        )
        return out

    def label_metrics_from_matrix(self, matrix, observed, *, selected=None, invalid=0,
                                  moments=True):
        """Statistics and every label metric of a dense matrix, in one launch.

        Returns ``(buffer, statistics)``; the kappa moments are computed over
        the ``selected`` classes with their ranks as positions.
        """
        xp, device = self.xp, self.device
        dtype = np.dtype(np.float64 if matrix.dtype.kind == "f" else np.int64)
        matrix = xp.ascontiguousarray(matrix, dtype=dtype)
        size = matrix.shape[0]
        shared_bytes = size * (dtype.itemsize + 8)
        if shared_bytes + REDUCE_STATIC_SHARED_BYTES > device.shared_memory_per_block:
            stats = statistics_from_matrix(matrix, observed, xp, invalid=invalid, moments=moments,
                                           selected=selected)
            return self.label_metrics(stats, selected=selected), stats
        grid = max(1, min(size, device.multiprocessor_count))
        true_positives, support, predicted = (self.zeros(size, dtype) for _ in range(3))
        out = self.zeros(label_metric_size(size), np.float64)
        self.launch(
            REDUCE_SOURCE, reduce_expression("label_metrics_from_matrix", COUNT_TYPES[dtype.name]),
            grid, min(device.block_threads, REDUCE_MAX_BLOCK_THREADS),
            [matrix, np.int64(size), self._mask(selected), np.int32(bool(moments)),
             true_positives, support, predicted, self.zeros(grid * size, dtype),
             self.zeros(2 * grid, np.float64), self.zeros(1, np.uint32), out],
            shared_bytes,
        )
        stats = ClassStatistics(
            true_positives=true_positives, support=support, predicted=predicted,
            # The kernel's sum of the supports, read from the buffer (float64)
            # rather than reduced again.
            total=out[SLOT["total"]], observed=observed, invalid=invalid,
        )
        return out, stats

    # -- the fused pass over (N, K) scores -----------------------------------

    def fused_logits_pass(self, y_true, scores, *, sample_weight=None, ignore_index=None,
                          from_logits=True, clip_eps=2.220446049250313e-16, top_k=(),
                          n_bins=0, one_vs_all=False, terms=None,
                          deterministic=False) -> ScoreSums:
        """Every score sum of ``(N, K)`` scores in one launch of kernels/scores.cu.

        The same sums as :meth:`NumpyBackend.fused_logits_pass`; each block
        writes its partial sums and the backend adds them in a fixed order
        (no host sync). ``terms`` is accepted and ignored: one read of the
        scores gives every term.

        Calibration bins of unweighted rows, and of weighted rows with
        ``deterministic=True`` (one more launch: max|w|), are summed in 64-bit
        fixed point: bit-identical run to run, counts exact, and each row's
        terms off by at most ``max|w| * N * 2**-61``. Weighted bins are
        otherwise double atomics (their last bits may vary run to run).
        """
        del terms
        device, xp = self.device, self.xp
        top_k = tuple(int(v) for v in top_k)
        if len(top_k) > SCORE_MAX_TOP_K:
            raise ValueError(f"at most {SCORE_MAX_TOP_K} top_k values per pass, got {len(top_k)}")
        true, true_type = self._labels(y_true)
        if true_type not in SCORE_TARGET_TYPES:
            true, true_type = self._labels(true.astype(np.int64))
        values, score_type, row_stride, column_stride = self._scores(scores)
        weight, weight_type = None, "mg::unit_weight"
        if sample_weight is not None:
            weight = xp.ascontiguousarray(sample_weight, dtype=np.float64)
            weight_type = "double"
        n, num_columns = int(values.shape[0]), int(values.shape[1])
        ignore = _ignore_arguments(ignore_index, true.dtype)
        block = min(device.block_threads, SCORE_MAX_BLOCK_THREADS)
        shared_bytes = 3 * n_bins * 8 + top_k_shared_bytes(len(top_k), block)
        mapping = score_mapping(num_columns, row_stride, column_stride,
                                device.data_pointer(values), values.dtype.itemsize, block,
                                shared_bytes)
        group = mapping.group
        shared_bytes += mapping.tile_bytes
        grid = max(1, min(self._grid(n * group, shared_bytes), -(-n * group // block)))
        _check_rows_per_block(n, grid)
        slots = score_sums_size(len(top_k), n_bins)
        partials = self.zeros(grid * slots, np.float64)
        limits = device.asarray(np.array(top_k or (0,), dtype=np.int64))
        fixed_bins = bool(n_bins) and (weight is None or deterministic)
        max_weight_bits = None
        if fixed_bins and weight is not None:
            max_weight_bits = self.zeros(1, np.uint64)
            self.launch(SOURCE, "max_abs_weight<double>", self._grid(n), device.block_threads,
                          [weight, np.int64(n), max_weight_bits])
        self.launch(
            SCORES_SOURCE,
            score_pass_expression(true_type, score_type, weight_type, mapping.kernel), grid, block,
            [true, values, weight, np.int64(n), np.int64(num_columns), np.int64(row_stride),
             np.int64(column_stride), np.int32(group), *ignore, np.int32(bool(from_logits)),
             np.float64(clip_eps), np.int32(bool(one_vs_all)), limits, np.int32(len(top_k)),
             np.int32(n_bins), np.int32(fixed_bins), max_weight_bits, partials],
            shared_bytes,
        )
        buffer = partials.reshape(grid, slots).sum(axis=0)
        return ScoreSums(buffer, top_k, n_bins, num_columns, bool(from_logits))

    # -- ranking: a sort, then the tie-aware segmented scans ------------------

    def _rank_scores(self, scores):
        """Scores as kernels/ranking.cu reads them (an order-preserving type),
        and the values to sort."""
        xp = self.xp
        scores = xp.ascontiguousarray(native_byte_order(scores))
        if scores.dtype == np.uint64:
            # Flipping the top bit maps unsigned order onto signed order exactly.
            scores = (scores ^ np.uint64(1 << 63)).view(np.int64)
        elif scores.dtype.kind in "iub":
            scores = scores.astype(np.int64)
        elif scores.dtype.name not in RANK_SCORE_TYPES:
            scores = scores.astype(np.float64)
        kernel_view = scores.view(np.uint16) if scores.dtype == np.float16 else scores
        return scores, kernel_view, RANK_SCORE_TYPES[scores.dtype.name]

    def label_pair_summary(self, labels) -> tuple:
        """As :meth:`NumpyBackend.label_pair_summary`, in one read of integer or
        bool labels (kernels/ranking.cu label_pair_summary: the first label,
        one other and whether a third appears, per block) and one read-back
        of the blocks' rows; other dtypes take three reductions."""
        xp = self.xp
        if labels.dtype.name not in LABEL_TYPES and labels.dtype != np.bool_:
            low, high, third = _ranking_formulas.label_pair_summary(labels, xp)
            low, high, third = self.to_host(xp.stack([low, high, third.astype(labels.dtype)]))
            return low, high, bool(third)
        array, label_type = self._labels(labels.reshape(-1))
        n = int(array.size)
        if n == 0:
            raise ValueError("labels is empty: label_pair_summary needs at least one label")
        block = min(self.device.block_threads, RANK_MAX_BLOCK_THREADS)
        grid = self._grid(n)
        rows = xp.empty((grid, 4), dtype=np.uint64)
        self.launch(RANKING_SOURCE, label_summary_expression(label_type), grid, block,
                    [array, np.int64(n), rows])
        words = np.asarray(self.to_host(rows))
        # (first, other) back from 64-bit words to the labels' dtype (two's
        # complement wraps back to the same bits).
        pairs = words[:, :2].view(np.int64).astype(labels.dtype)
        values = {pairs[0, 0].item(), *pairs[words[:, 2] != 0, 1].tolist()}
        third = bool(words[:, 3].any()) or len(values) > 2
        low, high = min(values), max(values)
        return np.asarray(low, labels.dtype), np.asarray(high, labels.dtype), third

    def binary_rank_areas(self, scores, is_positive, sample_weight=None, max_fpr=None):
        """``[ROC AUC, average precision]`` of ``(N,)`` scores, as
        :meth:`NumpyBackend.binary_rank_areas`: a sort (CuPy/CUB on a GPU),
        then the two passes of kernels/ranking.cu over tiles of ranked
        positions, with an O(tiles) scan between them. O(N) memory.

        Unweighted scores of at most 32 bits sort packed 32-bit (score,
        class) keys in two parts, scores >= 0 and the others (one read-back:
        where the parts meet), and read them in order; others take a stable
        argsort and a gather.
        """
        device, xp = self.device, self.xp
        n = _ranking_formulas.check_rank_arrays(scores, is_positive, sample_weight)
        positive = self._rank_positive(is_positive)
        block = min(device.block_threads, RANK_MAX_BLOCK_THREADS)
        tiles = -(-n // (block * RANK_ITEMS_PER_THREAD))
        ranked_positive = xp.empty(n, dtype=np.uint8)
        tile_state = xp.empty((tiles, 4), dtype=np.float64)
        packed = self._packed_rank_scores(scores) if sample_weight is None else None
        if packed is not None:
            values, packed_type = packed
            # 32-bit keys, those of scores >= 0 in front: the one read-back
            # (the split) says where the two parts to sort meet.
            keys = xp.empty(n, dtype=np.uint32)
            split_counts = self.zeros(2, np.uint64)
            self.launch(RANKING_SOURCE, f"rank_pack_keys<{packed_type}>",
                        min(tiles, self._grid(n)), block,
                        [values, positive, np.int64(n), keys, split_counts])
            split = int(self.to_host(split_counts)[0])
            front = xp.sort(keys[:split]) if split > 0 else None
            back = xp.sort(keys[split:]) if split < n else None
            ranked_scores = xp.empty(n, dtype=np.uint32)
            ranked_weight, score_type = None, PACKED_RANK_SCORE_TYPE
            self.launch(RANKING_SOURCE, "rank_unpack_keys", tiles, block,
                        [front, back, np.int64(split), np.int64(n), ranked_scores,
                         ranked_positive, tile_state])
        else:
            ranked_scores, ranked_weight, score_type, _ = self._gather_ranked(
                scores, positive, sample_weight, block, tiles, ranked_positive, tile_state)
        offsets, carry, totals = _rank_tile_scan(tile_state, xp)
        tile_areas = xp.empty((tiles, 3), dtype=np.float64)
        # Unweighted, the full area also as an exact integer of counts (the
        # partial area up to max_fpr stays in float64).
        exact_area = ranked_weight is None and (max_fpr is None or max_fpr == 1)
        tile_twice_area = xp.empty((tiles, 2), dtype=np.uint64) if exact_area else None
        self.launch(
            RANKING_SOURCE, rank_areas_expression(score_type), tiles, block,
            [ranked_scores, ranked_positive, ranked_weight, np.int64(n), offsets, carry, totals,
             np.float64(1.0 if max_fpr is None else max_fpr), tile_areas, tile_twice_area],
        )
        areas = tile_areas.sum(axis=0)
        if tile_twice_area is not None:
            areas[0] = _exact_roc_area(tile_twice_area, totals, xp)
        return _ranking_formulas.rank_areas_from_sums(areas, totals, xp, max_fpr)

    def binary_curve_points(self, scores, is_positive, sample_weight=None):
        """As :meth:`NumpyBackend.binary_curve_points`: a stable argsort and
        pass 1 of kernels/ranking.cu (rank_gather), then rank_curve_points
        twice over the tiles (the points per tile, then the points), with
        O(tiles) scans between them and one read-back (the curve's length).
        No full-length scan on the host side. Cumulative weights are summed
        in a fixed order, not sequentially: weighted sums may differ from a
        sequential scan in their last bits."""
        xp = self.xp
        n = _ranking_formulas.check_rank_arrays(scores, is_positive, sample_weight)
        positive = self._rank_positive(is_positive)
        block = min(self.device.block_threads, RANK_MAX_BLOCK_THREADS)
        tiles = -(-n // (block * RANK_ITEMS_PER_THREAD))
        ranked_positive = xp.empty(n, dtype=np.uint8)
        tile_state = xp.empty((tiles, 4), dtype=np.float64)
        ranked_scores, ranked_weight, score_type, reversed_order = self._gather_ranked(
            scores, positive, sample_weight, block, tiles, ranked_positive, tile_state)
        weight_offsets = _rank_tile_scan(tile_state, xp)[0]
        expression = f"rank_curve_points<{score_type}>"
        tile_counts = xp.empty((tiles, 3), dtype=np.int64)
        ranked = [ranked_scores, ranked_positive, ranked_weight, np.int64(n), weight_offsets]
        self.launch(RANKING_SOURCE, expression, tiles, block,
                    [*ranked, None, tile_counts, None, None])
        inclusive = xp.cumsum(tile_counts, axis=0)
        count_offsets = xp.ascontiguousarray(
            xp.concatenate([xp.zeros((1, 3), dtype=np.int64), inclusive[:-1]]))
        m = int(self.to_host(inclusive[-1, 0]))
        points = xp.empty((m, 4), dtype=np.float64)
        positions = xp.empty(m, dtype=np.int64)
        self.launch(RANKING_SOURCE, expression, tiles, block,
                    [*ranked, count_offsets, None, points, positions])
        # Ranked position i holds sample n - 1 - reversed_order[n - 1 - i].
        thresholds = scores[(n - 1) - reversed_order[(n - 1) - positions]]
        return (points[:, 0], points[:, 1], points[:, 2].astype(np.int64),
                points[:, 3].astype(np.int64), thresholds)

    def _rank_positive(self, is_positive):
        """The class mask as the rank kernels read it: one byte a sample, 0 or 1."""
        positive = self.xp.ascontiguousarray(native_byte_order(is_positive))
        return positive.view(np.uint8) if positive.dtype == np.bool_ else (
            positive != 0).view(np.uint8)

    def _packed_rank_scores(self, scores):
        """``(scores, C type)`` for the packed-key path, or None: float32 and
        float16 as they are, integers and bools of at most 32 bits as int32."""
        scores = native_byte_order(scores)
        name = scores.dtype.name
        if scores.dtype.kind in "iub" and scores.dtype.itemsize <= 4 and name != "uint32":
            scores, name = scores.astype(np.int32, copy=False), "int32"
        if name not in PACKED_RANK_TYPES:
            return None
        scores = self.xp.ascontiguousarray(scores)
        return (scores.view(np.uint16) if name == "float16" else scores), PACKED_RANK_TYPES[name]

    def _gather_ranked(self, scores, positive, sample_weight, block, tiles, ranked_positive,
                       tile_state):
        """Pass 1 after a stable argsort: ``(ranked scores, ranked weights, C type,
        the argsort of the reversed scores)``."""
        xp = self.xp
        scores, kernel_scores, score_type = self._rank_scores(scores)
        n = int(scores.shape[0])
        weight, weight_type = None, "mg::unit_weight"
        if sample_weight is not None:
            weight = xp.ascontiguousarray(sample_weight, dtype=np.float64)
            weight_type = "double"
        # Stable ascending order of the reversed scores: read backwards, a
        # stable descending order (ties in input order, as scikit-learn's).
        # float16 is sorted as its exact float32 widening (same order and
        # ties): a type every sort of CuPy's takes.
        keys = scores.astype(np.float32) if scores.dtype == np.float16 else scores
        reversed_order = _ranking_formulas.stable_argsort(xp.flip(keys), xp).astype(np.int64, copy=False)
        ranked_scores = xp.empty(n, dtype=kernel_scores.dtype)
        ranked_weight = None if weight is None else xp.empty(n, dtype=np.float64)
        self.launch(
            RANKING_SOURCE, rank_gather_expression(score_type, weight_type), tiles, block,
            [kernel_scores, positive, weight, reversed_order, np.int64(n), ranked_scores,
             ranked_positive, ranked_weight, tile_state],
        )
        return ranked_scores, ranked_weight, score_type, reversed_order

    # -- the streaming state (metrics_gpu.ClassificationMetrics) --------------

    def stream_update(self, state: dict, workspace: StreamWorkspace, batch, *, spec: dict,
                      ordinal: int, clip_eps: float) -> None:
        """One launch of ``streaming_update``: the batch added to ``state``.

        No host sync, and no allocation once the workspace has seen the
        batch's layout and size. The launch's last block also writes the
        state's kappa moments as doubles into the workspace.
        """
        device = self.device
        k = spec["num_classes"]
        integer = state["counts"].dtype == np.uint64
        score_sums = state.get("scores") is not None
        weight, weight_type = batch.sample_weight, "mg::unit_weight"
        if weight is not None:
            weight_type = STREAM_WEIGHT_TYPES[weight.dtype.name]
            if not integer and weight_type == "long long":
                weight, weight_type = self.contiguous(weight.astype(np.float64)), "double"
        elif not integer:
            weight, weight_type = self._unit_float_weights(workspace, batch.n), "double"
        count_type = "unsigned long long" if integer else "double"
        true_type = LABEL_TYPES[batch.y_true.dtype.name]
        if batch.scores:
            pred_type = SCORE_TYPES[batch.score_dtype]
            half = batch.score_dtype in ("float16", "bfloat16")
            preds = batch.preds.view(np.uint16) if half else batch.preds
            group = score_group(k)
            # A warp per row with 16-byte loads, as fused_logits_wide's warp tile.
            wide_rows = group == WARP_SIZE and reads_wide_rows(
                k, batch.column_stride, device.data_pointer(preds), preds.dtype.itemsize)
        else:
            pred_type, preds, group, wide_rows = true_type, batch.preds, 1, False
        # Rows per update the checks' keys hold (kernels/streaming.cu kOrdinalShift).
        if batch.n >= 1 << STREAM_ORDINAL_SHIFT:
            raise ValueError(f"an update takes fewer than 2**{STREAM_ORDINAL_SHIFT} samples, "
                             f"got {batch.n}")
        block = min(device.block_threads, SCORE_MAX_BLOCK_THREADS)
        n_bins = spec["n_bins"] if score_sums else 0
        score_bytes = 3 * n_bins * 8 + top_k_shared_bytes(
            len(spec["top_k"]) if score_sums else 0, block)
        cell_bytes = (3 * k + 1) * 8
        work = batch.n * group
        grid = max(1, min(self._grid(work, score_bytes), -(-work // block)))
        # Privatised counts pay off when a block has many more rows than cells
        # to flush into the state at its end.
        privatize = (score_bytes + cell_bytes <= device.shared_memory_per_block_optin
                     and batch.n >= grid * (3 * k + 1))
        shared = score_bytes + (cell_bytes if privatize else 0)
        if privatize:
            grid = max(1, min(grid, self._grid(work, shared)))
        _check_rows_per_block(batch.n, grid)
        key = (batch.inner, batch.image_stride, batch.inner_stride, batch.column_stride, group,
               str(batch.y_true.dtype), clip_eps, privatize, batch.scores, wide_rows)
        config = workspace.configs.get(key)
        if config is None:
            config = workspace.configs[key] = self.upload(_stream_scalar_args(
                spec, batch, group, clip_eps, privatize, spec["thresholds"], score_sums,
                wide_rows))
        if workspace.update_ticket is None:
            workspace.update_ticket = self.zeros(1, np.uint32)
            workspace.moments = self.zeros(2, np.float64)
        if score_sums and workspace.partial_rows < grid:
            # Sized once for the largest grid this device launches.
            workspace.partial_rows = max(grid, self._grid(1 << STREAM_ORDINAL_SHIFT,
                                                          score_bytes))
            workspace.partials = self.zeros(
                workspace.partial_rows * score_sums_size(len(spec["top_k"]), n_bins), np.float64)
        self.launch(
            STREAMING_SOURCE,
            stream_update_expression(true_type, pred_type, weight_type, count_type),
            grid, block,
            [batch.y_true, preds, weight, np.int64(batch.n), np.int64(ordinal), config,
             state["counts"], state.get("matrix"), state["moments"] if integer else None,
             None if integer else state["moments"], state.get("histogram"),
             state.get("scores"), workspace.partials if score_sums else None,
             workspace.update_ticket, state["checks"], workspace.moments],
            shared,
        )

    def _unit_float_weights(self, workspace: StreamWorkspace, n: int):
        """Weights of 1.0 for an unweighted batch into a state of float counts
        (kept and grown in the workspace)."""
        ones = workspace.ones
        if ones is None or ones.shape[0] < n:
            ones = workspace.ones = self.upload(np.ones(max(n, 1), dtype=np.float64))
        return ones[:n]

    def stream_compute(self, state: dict, workspace: StreamWorkspace, *, spec: dict,
                       labels: bool = True, scores: bool = True):
        """A state's metrics in at most two launches: ``streaming_compute``
        (score metrics, binned ranking, and the kappa moments as doubles) when
        ``scores``, then ``label_metrics_from_statistics`` when ``labels``.
        Returns ``(label values, score values)`` on the device (layouts of
        :mod:`metrics_gpu._formulas`)."""
        from metrics_gpu._formulas import stream_score_size

        device = self.device
        k = spec["num_classes"]
        integer = state["counts"].dtype == np.uint64
        score_state = state.get("scores")
        top_k = len(spec["top_k"]) if score_state is not None else 0
        n_bins = spec["n_bins"] if score_state is not None else 0
        thresholds = spec["thresholds"] if score_state is not None else 0
        if workspace.moments is None:
            workspace.moments = self.zeros(2, np.float64)
        if workspace.compute is None:
            workspace.compute = (
                self.zeros(max(2 * thresholds, 1), np.float64), self.zeros(1, np.uint32),
                self.zeros(stream_score_size(top_k, n_bins, k, thresholds), np.float64),
                self.zeros(label_metric_size(k), np.float64),
            )
        pooled, ticket, score_out, label_out = workspace.compute
        if scores:
            # Any config of an update holds what compute reads (K, top_k, bins,
            # thresholds); a state loaded before its first update gets its own.
            config = next(iter(workspace.configs.values()), None)
            if config is None:
                config = workspace.configs[("compute",)] = self.upload(_stream_scalar_args(
                    spec, None, 1, 0.0, False, thresholds, score_state is not None))
            # Classes per block of the binned ranking areas: streaming_compute's
            # launch bound (kScoreBlockThreads).
            block = min(device.block_threads, SCORE_MAX_BLOCK_THREADS)
            grid = max(1, -(-k // block)) if thresholds else 1
            self.launch(
                STREAMING_SOURCE,
                f"streaming_compute<{'unsigned long long' if integer else 'double'}>",
                grid, block,
                [config, score_state, state.get("histogram") if thresholds else None,
                 state["moments"] if integer else None, None if integer else state["moments"],
                 workspace.moments, pooled, ticket, score_out],
            )
        if labels:
            counts = state["counts"].view(np.int64) if integer else state["counts"]
            self.launch(
                REDUCE_SOURCE,
                reduce_expression("label_metrics_from_statistics", COUNT_TYPES[counts.dtype.name]),
                1, min(device.block_threads, REDUCE_MAX_BLOCK_THREADS),
                [counts[:k], counts[k:2 * k], counts[2 * k:3 * k], counts[3 * k:], np.int64(k),
                 None, workspace.moments[0:1], workspace.moments[1:2], label_out],
            )
        return label_out, score_out

    def clear(self, array) -> None:
        """Zero a device array in place (a memset, no kernel)."""
        self.device.clear(array)

    def copy_into(self, target, source) -> None:
        """Copy a device array into another of the same size (no kernel)."""
        self.device.copy_into(target, source)


def _check_rows_per_block(n: int, grid: int) -> None:
    """Score passes count a block's unweighted rows in 32-bit calibration
    cells (kernels/scores.cu BinCell): fewer than MAX_SAMPLES_PER_BLOCK rows
    a block. (2^31 rows for each block of a full grid is more than any
    device memory holds; the check names the limit should one be passed.)"""
    if n >= grid * MAX_SAMPLES_PER_BLOCK:
        raise ValueError(f"{n} rows in one score pass exceed {grid} blocks x 2**31 rows; "
                         "pass the scores in smaller parts")


def _exact_roc_area(tile_twice_area, totals, xp):
    """The unweighted ROC area from rank_areas' per-tile 128-bit sums of
    (F - F_head)(T + T_head) (tiles, 2 uint64 words): the tiles added exactly
    as 32-bit limbs (fewer than 2^32 tiles: no uint64 sum overflows), then
    to float64 and divided by 2 P Q: a few roundings in all, not one per tie
    group (0 when P or Q is 0: the caller's NaN). No sync."""
    words = tile_twice_area
    mask = np.uint64(0xFFFFFFFF)
    limbs = xp.stack([words[:, 0] & mask, words[:, 0] >> np.uint64(32),
                      words[:, 1] & mask, words[:, 1] >> np.uint64(32)])
    sums = limbs.sum(axis=1)  # each < 2^64
    # Σ sums[i] 2^(32 i): the limbs carried into two exact 64-bit words
    # (the sum is below 2^107), then converted.
    low = sums[0] + ((sums[1] & mask) << np.uint64(32))
    carry = (sums[1] >> np.uint64(32)) + (low < sums[0]).astype(np.uint64)
    high = sums[2] + carry + ((sums[3] & mask) << np.uint64(32))
    twice_area = high.astype(np.float64) * 2.0 ** 64 + low.astype(np.float64)
    pairs = totals[0] * totals[1]
    return xp.where(pairs > 0, twice_area / (2.0 * xp.where(pairs > 0, pairs, 1.0)), 0.0)


def _rank_tile_scan(tile_state, xp):
    """Between the passes of kernels/ranking.cu, over tiles (no sync):
    ``(offsets, carry, totals)``: each tile's exclusive (positive, negative)
    sums, the sums before the head of the group open at its first position,
    and the totals.

    The group open at tile t's start began at the last head of the last
    earlier tile that has one (tile 0 always does: position 0 is a head).
    """
    sums, before_last_head = tile_state[:, :2], tile_state[:, 2:]
    inclusive = xp.cumsum(sums, axis=0)
    offsets = xp.concatenate([xp.zeros((1, 2)), inclusive[:-1]])
    # The k-th tile with a head is where the count of such tiles first reaches k.
    heads_so_far = xp.cumsum(before_last_head[:, 0] >= 0)
    last = xp.searchsorted(heads_so_far, heads_so_far[:-1], side="left")
    carry = xp.concatenate([xp.zeros((1, 2)), offsets[last] + before_last_head[last]])
    return (xp.ascontiguousarray(offsets), xp.ascontiguousarray(carry),
            xp.ascontiguousarray(inclusive[-1]))
