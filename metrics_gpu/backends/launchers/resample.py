"""Launcher of ``kernels/resample.cu``: the Poisson draws of the bootstrap of a
count table (:mod:`metrics_gpu.intervals`), one thread per (cell, replicate).
:mod:`metrics_gpu._formulas.resample` is the NumPy reference: the same draws, bit for bit."""

from __future__ import annotations

import numpy as np

from metrics_gpu._formulas import resample as _resample
from metrics_gpu.backends.kernel_sources import KernelModule
from metrics_gpu.backends.launchers.base import BLOCKS_PER_MULTIPROCESSOR, LaunchBase

SOURCE = "resample.cu"
EXPRESSION = "poisson_table_draws"
MODULE = KernelModule(SOURCE, (EXPRESSION,))
BLOCK_THREADS = 256


class ResampleLaunchers(LaunchBase):
    """The bootstrap's draws."""

    def poisson_table_draws(self, counts, cells, first_replicate: int, num_replicates: int,
                            key: tuple[int, int]):
        """Poisson(count) draws of each cell for replicates ``first_replicate`` ..
        ``first_replicate + num_replicates - 1``: a (cells, replicates) int64
        device array. ``counts`` and ``cells`` (the cells' flat ids) are (J,)
        int64 host or device arrays."""
        counts = self.asarray(np.asarray(counts, dtype=np.int64) if isinstance(
            counts, np.ndarray) else counts, dtype=np.int64)
        cells = self.asarray(np.asarray(cells, dtype=np.int64) if isinstance(
            cells, np.ndarray) else cells, dtype=np.int64)
        if first_replicate < 0 or first_replicate + num_replicates > 1 << 32:
            raise ValueError("n_resamples: replicate ids must fit in 32 bits")
        size = int(counts.shape[0])
        draws = self.zeros((size, num_replicates), np.int64)
        total = size * num_replicates
        if total == 0:
            return draws
        thresholds = self.upload(np.asarray(_resample.EXP_MINUS, dtype=np.float64))
        grid = max(1, min(-(-total // BLOCK_THREADS),
                          self.device.multiprocessor_count * BLOCKS_PER_MULTIPROCESSOR))
        self.launch(SOURCE, EXPRESSION, grid, BLOCK_THREADS, [
            counts, cells, thresholds, np.int64(size), np.uint32(first_replicate),
            np.int32(num_replicates), np.uint32(key[0]), np.uint32(key[1]), draws])
        return draws
