"""Launchers of ``kernels/multilabel.cu``: the multilabel state's update (one
launch per batch; :mod:`metrics_gpu._multilabel.stream` holds the state and
the NumPy reference of the same update), and the label-ranking sums (LRAP,
ranking loss, coverage error: one launch; :mod:`metrics_gpu._multilabel.ranking`
holds their array-namespace reference)."""

from __future__ import annotations

import numpy as np

from metrics_gpu.backends.kernel_sources import KernelModule
from metrics_gpu.backends.launchers.base import BLOCKS_PER_MULTIPROCESSOR, LaunchBase

SOURCE = "multilabel.cu"
RANKING_EXPRESSION = "multilabel_ranking"
# The sums of the ranking kernel (enum RankingSum), in order.
RANKING_SUM_SLOTS = ("average_precision", "loss", "coverage", "weight")
# The ranking kernel's largest block (kMaxWarpsPerBlock warps: its queues).
RANKING_MAX_BLOCK_THREADS = 256
# The update kernel's largest block and the blocks per SM of its launch
# bound (kUpdateBlockThreads, kUpdateMinBlocks).
UPDATE_MAX_BLOCK_THREADS = 256
UPDATE_MIN_BLOCKS = 4

# The kernel's element codes (enum ElementCode), by index. int8 is read as
# uint8 (0 and 1 have the same bits, and any other value stays something
# else), bool as uint8.
ELEMENT_CODE_NAMES = ("uint8", "int32", "int64", "float32", "float64", "float16", "bfloat16")
ELEMENT_CODES = {**{name: code for code, name in enumerate(ELEMENT_CODE_NAMES)},
                 "bool": 0, "int8": 0}
_ENUM_NAMES = ("mg::kUint8", "mg::kInt32", "mg::kInt64", "mg::kFloat32", "mg::kFloat64",
               "mg::kFloat16", "mg::kBfloat16")
# The update's instantiations: the usual (y_true, preds) element types read
# as known types (bool / uint8, int64 or float32 targets; 0/1 labels, float32,
# float16 or bfloat16 scores), any other pair through the codes at run time
# (kernels/multilabel.cu element_as: the runtime switch took 170-210
# instructions a cell).
UPDATE_TRUE_TYPES = ("uint8", "int64", "float32")
UPDATE_PRED_TYPES = ("uint8", "float32", "float16", "bfloat16")
UPDATE_ANY_EXPRESSION = "multilabel_update<mg::kAnyElement, mg::kAnyElement>"
UPDATE_EXPRESSIONS = {
    (ELEMENT_CODES[true], ELEMENT_CODES[pred]):
        f"multilabel_update<{_ENUM_NAMES[ELEMENT_CODES[true]]}, "
        f"{_ENUM_NAMES[ELEMENT_CODES[pred]]}>"
    for true in UPDATE_TRUE_TYPES for pred in UPDATE_PRED_TYPES}
MODULE = KernelModule(SOURCE, (*UPDATE_EXPRESSIONS.values(), UPDATE_ANY_EXPRESSION,
                               RANKING_EXPRESSION))
BFLOAT16_CODE = ELEMENT_CODES["bfloat16"]  # a torch bfloat16 tensor, read as its patterns
WEIGHT_DTYPES = ("float32", "float64")
# How a prediction is read (enum PredictionMode), by index.
PREDICTION_MODE_NAMES = ("labels", "probabilities", "logits")
PREDICTION_MODES = {name: mode for mode, name in enumerate(PREDICTION_MODE_NAMES)}
# The row sums (enum RowSlot), in order.
ROW_SLOTS = ("weight", "exact", "wrong_cells", "counted_cells", "precision",
             "precision_defined", "recall", "recall_defined", "f_score",
             "f_score_defined", "jaccard", "jaccard_defined", "rows",
             "rows_no_predicted", "rows_no_true", "rows_no_labels")
ROW = {name: i for i, name in enumerate(ROW_SLOTS)}  # a row sum's index, by name
# Why rows were left out (enum CheckBit): bit 1 << i of checks[2] names argument i.
CHECKED_ARGUMENTS = ("y_true", "preds", "sample_weight")
CHECK_BITS = {1 << i: name for i, name in enumerate(CHECKED_ARGUMENTS)}


def refused_arguments(reasons: int) -> tuple[str, ...]:
    """The arguments named by the reason bits of checks[2]."""
    return tuple(name for bit, name in CHECK_BITS.items() if int(reasons) & bit)
# checks: rows left out, the first of them (none: all ones), the reasons.
CHECK_SLOTS = 3
NO_ROW = np.iinfo(np.uint64).max
# A thread per row up to this many labels (a warp's rows are one contiguous
# span), else a warp per row.
THREAD_PER_ROW_LABELS = 32
# Static shared memory of the kernel (the block's row sums), rounded up.
STATIC_SHARED_BYTES = 256


def launch_geometry(device, rows: int, num_labels: int,
                    thresholds: int = 0) -> tuple[int, int, int, int, bool]:
    """``(grid, block, lanes per row, dynamic shared bytes, shared histogram)``
    of an update of ``rows`` rows: the device's block size (whole warps) up
    to UPDATE_MAX_BLOCK_THREADS (the kernel's launch bound), at most
    BLOCKS_PER_MULTIPROCESSOR blocks per SM (grid-stride beyond), per-label
    counts privatised in shared memory when 4 L of them fit the block's
    default budget, and the 2 L H thresholds histogram with them when it
    fits too, in a share of the SM's shared memory that leaves room for
    UPDATE_MIN_BLOCKS blocks (the kernel's launch bound)."""
    block = min(device.block_threads, UPDATE_MAX_BLOCK_THREADS)
    lanes = 1 if num_labels <= THREAD_PER_ROW_LABELS else 32
    rows_per_block = block // lanes
    grid = max(1, min(-(-rows // rows_per_block),
                      device.multiprocessor_count * BLOCKS_PER_MULTIPROCESSOR))
    shared = 4 * num_labels * 8
    if shared + STATIC_SHARED_BYTES > device.shared_memory_per_block:
        return grid, block, lanes, 0, False
    histogram = 2 * num_labels * thresholds * 8
    budget = min(device.shared_memory_per_block,
                 device.shared_memory_per_multiprocessor // UPDATE_MIN_BLOCKS)
    if thresholds > 0 and shared + histogram + STATIC_SHARED_BYTES <= budget:
        return grid, block, lanes, shared + histogram, True
    return grid, block, lanes, shared, False


def update_arguments(y_true, true_code: int, true_stride: int, preds, pred_code: int,
                     pred_stride: int, mode: int, cut: float, weight, weight_code: int,
                     ignore: float | None, rows: int, num_labels: int, lanes: int, shared: int,
                     shared_histogram: bool, weighted: bool, f_beta2: float, row_offset: int,
                     thresholds: int, counts, row_sums, checks, histogram) -> list:
    """The kernel's arguments, in order (arrays or address scalars for the pointers)."""
    return [y_true, np.int32(true_code), np.int64(true_stride), preds, np.int32(pred_code),
            np.int64(pred_stride), np.int32(mode), np.float64(cut), weight,
            np.int32(weight_code), np.int32(ignore is not None),
            np.float64(0.0 if ignore is None else ignore), np.int64(rows),
            np.int64(num_labels), np.int32(lanes), np.int32(shared > 0),
            np.int32(shared_histogram), np.int32(weighted),
            np.float64(f_beta2), np.int64(row_offset), np.int32(thresholds), counts, row_sums,
            checks, histogram]


def launch_update(backend, y_true, true_code: int, true_stride: int, preds, pred_code: int,
                  pred_stride: int, mode: int, cut: float, weight, weight_code: int,
                  ignore: float | None, rows: int, num_labels: int, weighted: bool,
                  f_beta2: float, row_offset: int, thresholds: int, counts, row_sums, checks,
                  histogram, stream=None) -> None:
    """One launch of the update (``y_true``, ``preds``, ``weight``: arrays or
    address scalars; ``stream``: the caller's, or the device's current one)."""
    grid, block, lanes, shared, shared_histogram = launch_geometry(
        backend.device, rows, num_labels, thresholds)
    expression = UPDATE_EXPRESSIONS.get((true_code, pred_code), UPDATE_ANY_EXPRESSION)
    backend.launch(SOURCE, expression, grid, block, update_arguments(
        y_true, true_code, true_stride, preds, pred_code, pred_stride, mode, cut, weight,
        weight_code, ignore, rows, num_labels, lanes, shared, shared_histogram, weighted,
        f_beta2, row_offset,
        thresholds, counts, row_sums, checks, histogram), shared, stream=stream)


# Shared bytes a warp stages per label of its row: the score as a double, the relevance.
RANKING_STAGED_BYTES = 9
# Static shared memory of the ranking kernel (the warps' queues, the block's sums).
RANKING_STATIC_SHARED_BYTES = 8 * 64 * 4 + 64


def ranking_geometry(device, num_labels: int) -> tuple[int, int]:
    """``(block, dynamic shared bytes)`` of the ranking kernel: a warp per
    row, each warp's row staged in shared memory (as few warps a block as
    that takes, down to 2 within the default per-block budget); 0 bytes
    (rows read from global memory) for rows too long for 2 warps."""
    block = min(device.block_threads, RANKING_MAX_BLOCK_THREADS)
    budget = device.shared_memory_per_block - RANKING_STATIC_SHARED_BYTES
    per_warp = -(-num_labels * RANKING_STAGED_BYTES // 8) * 8
    while block > 64 and (block // 32) * per_warp > budget:
        block //= 2
    shared = (block // 32) * per_warp
    return (block, shared) if shared <= budget else (min(device.block_threads,
                                                         RANKING_MAX_BLOCK_THREADS), 0)


class MultilabelLaunchers(LaunchBase):
    """The multilabel state's update and the label-ranking sums."""

    def multilabel_ranking(self, y_true, true_code: int, scores, score_code: int, weight,
                           sums) -> None:
        """Add each row's LRAP, ranking loss and coverage error (weighted) and
        its weight to ``sums`` (len(RANKING_SUM_SLOTS) float64): ``y_true``
        and ``scores`` (N, L) backend arrays with contiguous rows of their
        element codes, ``weight`` (N,) float32 / float64 or None."""
        rows, num_labels = y_true.shape
        block, shared = ranking_geometry(self.device, num_labels)
        grid = max(1, min(-(-rows // (block // 32)),
                          self.device.multiprocessor_count * BLOCKS_PER_MULTIPROCESSOR))
        self.launch(SOURCE, RANKING_EXPRESSION, grid, block, [
            y_true, np.int32(true_code), np.int64(y_true.strides[0] // y_true.itemsize),
            scores, np.int32(score_code), np.int64(scores.strides[0] // scores.itemsize),
            weight, np.int32(0 if weight is None else ELEMENT_CODES[weight.dtype.name]),
            np.int64(rows), np.int64(num_labels), np.int32(shared > 0), sums], shared)

    def multilabel_update(self, y_true, true_code: int, preds, pred_code: int, weight, *,
                          mode: int, cut: float, ignore: float | None, f_beta2: float,
                          row_offset: int, counts, row_sums, checks, histogram=None) -> None:
        """Add a batch to the state arrays (``counts`` 4 L uint64 or float64,
        ``row_sums``, ``checks``, and ``histogram`` (2 L H, the counts' type)
        or None): ``y_true`` and ``preds`` (N, L) backend arrays with
        contiguous rows of their element codes, ``weight`` (N,) float32 /
        float64 or None."""
        rows, num_labels = y_true.shape
        launch_update(
            self, y_true, true_code, y_true.strides[0] // y_true.itemsize, preds, pred_code,
            preds.strides[0] // preds.itemsize, mode, cut, weight,
            0 if weight is None else ELEMENT_CODES[weight.dtype.name], ignore, rows, num_labels,
            counts.dtype == np.float64, f_beta2, row_offset,
            0 if histogram is None else histogram.size // (2 * num_labels), counts, row_sums,
            checks, histogram)
