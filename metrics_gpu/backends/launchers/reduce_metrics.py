"""Launchers of ``kernels/reduce_metrics.cu``: every label metric in one
launch, from per-class statistics or from a dense matrix, into one float64
buffer (layout :data:`metrics_gpu._formulas.labels.LABEL_METRIC_SLOTS`)."""

from __future__ import annotations

import math

import numpy as np

from metrics_gpu._formulas.labels import SLOT, label_metric_size
from metrics_gpu.backends.kernel_sources import KernelModule
from metrics_gpu._formulas.state import ClassStatistics
from metrics_gpu.backends.launchers.base import (
    BLOCKS_PER_MULTIPROCESSOR,
    WARP_SIZE,
    LaunchBase,
    native_byte_order,
)

SOURCE = "reduce_metrics.cu"
# The reduction kernels' shared buffers and launch bounds are sized for blocks
# of at most this many threads (kMaxBlockThreads in reduce_metrics.cu).
REDUCE_MAX_BLOCK_THREADS = 256
# Columns of a tile of label_metrics_from_matrix: a lane each
# (kTileColumns).
REDUCE_TILE_COLUMNS = WARP_SIZE

# Partial sums per block of label_metrics_from_matrix (kMatrixMoments):
# the linear and quadratic kappa moments and the cells off the diagonal.
MATRIX_MOMENTS = 3

# Count types of the reduction: int64 counts, float64 weighted counts.
COUNT_TYPES = {"int64": "long long", "float64": "double"}
REDUCE_KERNELS = ("label_metrics_from_statistics", "label_metrics_from_matrix")


def reduce_expression(kernel: str, count_type: str) -> str:
    return f"{kernel}<{count_type}>"


MODULE = KernelModule(SOURCE, tuple(
    reduce_expression(kernel, count_type)
    for kernel in REDUCE_KERNELS for count_type in COUNT_TYPES.values()))


def matrix_tiles(num_classes: int, multiprocessor_count: int,
                 block_threads: int) -> tuple[int, int, int]:
    """``(tile_rows, row_tiles, column_tiles)`` of ``label_metrics_from_matrix``
    on a K x K matrix: tiles of REDUCE_TILE_COLUMNS columns by ``tile_rows``
    rows, a block each, as many as BLOCKS_PER_MULTIPROCESSOR per SM (two waves
    of the 4 blocks an SM holds at once on sm_80 / sm_90) where the matrix has
    rows for them: a tile has at least a row per warp of the block."""
    column_tiles = max(1, math.ceil(num_classes / REDUCE_TILE_COLUMNS))
    wanted = math.ceil(multiprocessor_count * BLOCKS_PER_MULTIPROCESSOR / column_tiles)
    fewest_rows = max(1, block_threads // WARP_SIZE)
    row_tiles = max(1, min(wanted, num_classes // fewest_rows))
    tile_rows = max(1, math.ceil(num_classes / row_tiles))
    return tile_rows, max(1, math.ceil(num_classes / tile_rows)), column_tiles


def launch_metrics_from_statistics(backend: LaunchBase, true_positives, support, predicted,
                                   total, misclassified, num_classes: int, mask, linear,
                                   quadratic, out) -> None:
    """``label_metrics_from_statistics`` into ``out``: one block; the counts
    (``total`` and ``misclassified`` one cell each, ``misclassified`` None
    when the state has none) are contiguous int64 or float64 device arrays,
    ``mask`` uint8 or None, the kappa moments (1,) float64 arrays or None."""
    backend.launch(
        SOURCE, reduce_expression("label_metrics_from_statistics", COUNT_TYPES[support.dtype.name]),
        1, min(backend.device.block_threads, REDUCE_MAX_BLOCK_THREADS),
        [true_positives, support, predicted, total, misclassified, np.int64(num_classes), mask,
         linear, quadratic, out],
    )


class ReduceLaunchers(LaunchBase):
    """Every label metric in one launch."""

    def _mask(self, selected):
        if selected is None:
            return None
        mask = self.xp.ascontiguousarray(native_byte_order(selected))
        return mask.view(np.uint8) if mask.dtype == np.bool_ else mask.astype(np.uint8)

    def label_metrics(self, stats: ClassStatistics, *, selected=None):
        """Every label metric of ``stats`` in one launch: a float64 device buffer.

        Layout and conventions: :data:`metrics_gpu._formulas.labels.LABEL_METRIC_SLOTS`
        (NumPy reference :func:`~metrics_gpu._formulas.labels.label_metric_values`).
        """
        xp = self.xp
        dtype = np.dtype(np.float64 if stats.support.dtype.kind == "f" else np.int64)

        def counts(array):
            return xp.ascontiguousarray(xp.asarray(array, dtype=dtype).reshape(-1))

        def moment(value):
            return None if value is None else xp.asarray(value, dtype=np.float64).reshape(1)

        num_classes = stats.num_classes
        out = self.zeros(label_metric_size(num_classes), np.float64)
        launch_metrics_from_statistics(
            self, counts(stats.true_positives), counts(stats.support), counts(stats.predicted),
            counts(stats.total),
            None if stats.misclassified is None else counts(stats.misclassified),
            num_classes, self._mask(selected),
            moment(stats.linear_disagreement), moment(stats.quadratic_disagreement), out)
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
        block = min(device.block_threads, REDUCE_MAX_BLOCK_THREADS)
        tile_rows, row_tiles, column_tiles = matrix_tiles(size, device.multiprocessor_count,
                                                          block)
        grid = row_tiles * column_tiles
        true_positives, support, predicted = (self.zeros(size, dtype) for _ in range(3))
        out = self.zeros(label_metric_size(size), np.float64)
        self.launch(
            SOURCE, reduce_expression("label_metrics_from_matrix", COUNT_TYPES[dtype.name]),
            grid, block,
            [matrix, np.int64(size), self._mask(selected), np.int32(bool(moments)),
             np.int64(tile_rows), true_positives, support, predicted,
             self.zeros((row_tiles + column_tiles) * size, dtype),
             self.zeros(MATRIX_MOMENTS * grid, np.float64),
             self.zeros(column_tiles + row_tiles + 1, np.uint32), out],
        )
        stats = ClassStatistics(
            true_positives=true_positives, support=support, predicted=predicted,
            # The kernel's sum of the supports and of the cells off the
            # diagonal, read from the buffer (float64) rather than reduced again.
            total=out[SLOT["total"]], observed=observed, invalid=invalid,
            misclassified=out[SLOT["misclassified"]],
        )
        return out, stats

