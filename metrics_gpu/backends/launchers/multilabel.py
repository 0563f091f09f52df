"""Launcher of ``kernels/multilabel.cu``: the multilabel state's update (one
launch per batch; :mod:`metrics_gpu._multilabel_stream` holds the state and
the NumPy reference of the same update)."""

from __future__ import annotations

import numpy as np

from metrics_gpu._kernels import KernelModule
from metrics_gpu.backends.launchers.base import BLOCKS_PER_MULTIPROCESSOR, LaunchBase

SOURCE = "multilabel.cu"
EXPRESSION = "multilabel_update"
MODULE = KernelModule(SOURCE, (EXPRESSION,))

# The kernel's element codes (enum ElementCode): one instantiation reads
# every input type. int8 is read as uint8: 0 and 1 have the same bits, and
# any other value stays something else.
ELEMENT_CODES = {"bool": 0, "uint8": 0, "int8": 0, "int32": 1, "int64": 2, "float32": 3,
                 "float64": 4, "float16": 5}
BFLOAT16_CODE = 6  # a torch bfloat16 tensor, read as its 16-bit patterns
WEIGHT_DTYPES = ("float32", "float64")
# How a prediction is read (enum PredictionMode).
PREDICTION_MODES = {"labels": 0, "probabilities": 1, "logits": 2}
# The row sums (enum RowSlot), in order.
ROW_SLOTS = ("weight", "exact", "wrong_cells", "counted_cells", "precision",
             "precision_undefined", "recall", "recall_undefined", "f_score",
             "f_score_undefined", "jaccard", "jaccard_undefined", "rows")
# Why rows were left out (enum CheckBit): the argument named by each bit.
CHECK_BITS = {1: "y_true", 2: "preds", 4: "sample_weight"}
# checks: rows left out, the first of them (none: all ones), the reasons.
CHECK_SLOTS = 3
NO_ROW = np.iinfo(np.uint64).max
# A thread per row up to this many labels (a warp's rows are one contiguous
# span), else a warp per row.
THREAD_PER_ROW_LABELS = 32
# Static shared memory of the kernel (the block's row sums), rounded up.
STATIC_SHARED_BYTES = 256


def launch_geometry(device, rows: int, num_labels: int) -> tuple[int, int, int, int]:
    """``(grid, block, lanes per row, dynamic shared bytes)`` of an update of
    ``rows`` rows: the device's block size (whole warps), at most
    BLOCKS_PER_MULTIPROCESSOR blocks per SM (grid-stride beyond), per-label
    counts privatised in shared memory when 4 L of them fit the block's
    default budget."""
    block = device.block_threads
    lanes = 1 if num_labels <= THREAD_PER_ROW_LABELS else 32
    rows_per_block = block // lanes
    grid = max(1, min(-(-rows // rows_per_block),
                      device.multiprocessor_count * BLOCKS_PER_MULTIPROCESSOR))
    shared = 4 * num_labels * 8
    if shared + STATIC_SHARED_BYTES > device.shared_memory_per_block:
        shared = 0
    return grid, block, lanes, shared


def update_arguments(y_true, true_code: int, true_stride: int, preds, pred_code: int,
                     pred_stride: int, mode: int, cut: float, weight, weight_code: int,
                     ignore: float | None, rows: int, num_labels: int, lanes: int, shared: int,
                     weighted: bool, f_beta2: float, row_offset: int, thresholds: int, counts,
                     row_sums, checks, histogram) -> list:
    """The kernel's arguments, in order (arrays or address scalars for the pointers)."""
    return [y_true, np.int32(true_code), np.int64(true_stride), preds, np.int32(pred_code),
            np.int64(pred_stride), np.int32(mode), np.float64(cut), weight,
            np.int32(weight_code), np.int32(ignore is not None),
            np.float64(0.0 if ignore is None else ignore), np.int64(rows),
            np.int64(num_labels), np.int32(lanes), np.int32(shared > 0), np.int32(weighted),
            np.float64(f_beta2), np.int64(row_offset), np.int32(thresholds), counts, row_sums,
            checks, histogram]


class MultilabelLaunchers(LaunchBase):
    """The multilabel state's update."""

    def multilabel_update(self, y_true, true_code: int, preds, pred_code: int, weight, *,
                          mode: int, cut: float, ignore: float | None, f_beta2: float,
                          row_offset: int, counts, row_sums, checks, histogram=None) -> None:
        """Add a batch to the state arrays (``counts`` 4 L uint64 or float64,
        ``row_sums``, ``checks``, and ``histogram`` (2 L H, the counts' type)
        or None): ``y_true`` and ``preds`` (N, L) backend arrays with
        contiguous rows of their element codes, ``weight`` (N,) float32 /
        float64 or None."""
        rows, num_labels = y_true.shape
        grid, block, lanes, shared = launch_geometry(self.device, rows, num_labels)
        weight_code = 0 if weight is None else ELEMENT_CODES[weight.dtype.name]
        self.launch(SOURCE, EXPRESSION, grid, block, update_arguments(
            y_true, true_code, y_true.strides[0] // y_true.itemsize, preds, pred_code,
            preds.strides[0] // preds.itemsize, mode, cut, weight, weight_code, ignore, rows,
            num_labels, lanes, shared, counts.dtype == np.float64, f_beta2, row_offset,
            0 if histogram is None else histogram.size // (2 * num_labels), counts, row_sums,
            checks, histogram), shared)
