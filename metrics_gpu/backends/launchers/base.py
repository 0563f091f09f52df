"""What every launcher of :mod:`metrics_gpu.backends.launchers` shares.

:class:`LaunchBase` holds the device (:class:`~metrics_gpu.backends.cuda.CudaDevice`
on a GPU, :class:`~metrics_gpu.backends.emulated.EmulatedDevice` on the CPU)
and does for every kernel source alike: device arrays, the counted launch and
allocation (:mod:`metrics_gpu.testing`), the grid from the SM count, and the
inputs as the kernels read them (labels and scores in the C types the
instantiations take). Nothing here synchronises with the host.

Device arithmetic beside the launches (and in the checks and formulas that
run on device arrays) takes the namespace's ufunc where one operand is a
scalar: ``xp.greater(counts, 0)``, not ``counts > 0``; ``xp.equal(codes,
column)``, ``xp.divide(value, 2)``, ``xp.right_shift(words, np.uint64(32))``.
CuPy's forward operators hand an operand that is not a CuPy array (a Python
or NumPy scalar) to NumPy's ufunc (``a > 0`` is ``numpy.greater(a, 0)``),
which comes back through ``__array_ufunc__``, and that imports
``cupyx.scipy.special``: the first one of a process loads cupyx and
scipy.sparse, 0.33 s of a first ``accuracy_score`` on an H100. Reflected
arithmetic (``2.0 * a``), in-place and array-array operators run CuPy's ufunc
directly; a comparison has no reflected form (``0 < a`` is ``a > 0``).
tests/test_first_call.py holds the first call of each public function in
common use to it, on a stand-in for CuPy.
"""

from __future__ import annotations

import copy
import math

import numpy as np

from metrics_gpu.backends.kernel_sources import LABEL_TYPES, SCORE_TYPES
from metrics_gpu._formulas.state import Bfloat16Bits, RowArgmax
from metrics_gpu.backends.numpy_backend import row_argmax
from metrics_gpu.backends.counting import record

# Blocks per SM the grid is sized for: 8 blocks of the device's block size
# (256 threads on a GPU) fill the 2048 threads an SM holds on every arch.
BLOCKS_PER_MULTIPROCESSOR = 8
# A block's 32-bit shared counters must not wrap: each launch gives a block
# fewer than 2^31 samples (the host splits larger inputs into launches).
MAX_SAMPLES_PER_BLOCK = 1 << 31
# Shared memory the system keeps per resident block (CUDA's occupancy rule).
SHARED_RESERVED_PER_BLOCK = 1024
# Threads of a warp (kernels/common.cuh kWarpSize): the most lanes a score row
# takes (shuffles span at most a warp), and the row tile of fused_logits_wide.
WARP_SIZE = 32


def native_byte_order(array):
    """``array`` in the machine's byte order: kernels read raw memory, so a
    big-endian NumPy array (``'>i4'``, ``'>f8'``) is converted first (one copy);
    native arrays (every CuPy array) pass through."""
    dtype = getattr(array, "dtype", None)
    if dtype is None or dtype.isnative:
        return array
    return array.astype(dtype.newbyteorder("="))


def ignore_arguments(ignore_index, label_dtype):
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


def recording_launcher(launcher):
    """``(launcher, launches)``: a shallow copy of ``launcher`` whose launches
    are listed in ``launches`` (as ``(source, expression, grid, block, args,
    shared_bytes)``), not issued: what a plan issues later on other buffers
    (the functional API's, :mod:`metrics_gpu._pipeline.planned`). Its allocations are
    the launcher's own."""
    launches = []
    recorder = copy.copy(launcher)

    def launch(source, expression, grid, block, args, shared_bytes=0, stream=None):
        launches.append((source, expression, grid, block, args, shared_bytes))

    recorder.launch = launch
    return recorder, launches


class LaunchBase:
    """A device, and what every kernel launcher does with it."""

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
               shared_bytes: int = 0, stream=None) -> None:
        """Launch one kernel instantiation (counted by metrics_gpu.testing);
        on ``stream`` (the device's, e.g. the caller's torch stream as a CuPy
        one) where given, else the device's current stream."""
        record(launches=1)
        if stream is None:
            self.device.launch(source, expression, grid, block, args, shared_bytes)
        else:
            self.device.launch(source, expression, grid, block, args, shared_bytes, stream=stream)

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

    def clear(self, array) -> None:
        """Zero a device array in place (a memset, no kernel)."""
        self.device.clear(array)

    def copy_into(self, target, source) -> None:
        """Copy a device array into another of the same size (no kernel)."""
        self.device.copy_into(target, source)


def check_rows_per_block(n: int, grid: int) -> None:
    """Score passes count a block's unweighted rows in 32-bit calibration
    cells (kernels/scores.cu BinCell): fewer than MAX_SAMPLES_PER_BLOCK rows
    a block. (2^31 rows for each block of a full grid is more than any
    device memory holds; the check names the limit should one be passed.)"""
    if n >= grid * MAX_SAMPLES_PER_BLOCK:
        raise ValueError(f"{n} rows in one score pass exceed {grid} blocks x 2**31 rows; "
                         "pass the scores in smaller parts")

