"""Counts past 2^31 and 2^32, without allocating them.

* The launch code shared by the cuda and emulated backends is run on labels
  whose length passes 2^36 (mapped address space, never backed by memory):
  the launches it would make are recorded instead of run, and must split the
  samples into segments that cover them exactly, each within the per-block
  limit of the kernels' 32-bit shared counters, with every length and offset
  passed as a 64-bit integer.
* The kernels' sample indices (grid-stride loops, block offsets) are checked
  in the sources: a block or thread index multiplied in 32 bits wraps past
  2^32 samples.
"""

from __future__ import annotations

import mmap
import re

import numpy as np
import pytest

from metrics_gpu.backends.kernel_sources import kernel_directory
from metrics_gpu._formulas.state import RowArgmax
from metrics_gpu.backends.launchers import base as launch_base
from conftest import skip_unavailable

PAST_2_36 = 2**36 + 5
PAST_2_33 = 2**33 + 5


def _huge_labels(dtype, length):
    """Zero labels of ``length`` elements in an anonymous mapping without swap
    reservation: address space only, no memory until a page is read (and
    then the shared zero page)."""
    size = length * np.dtype(dtype).itemsize
    try:
        mapping = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
                            | getattr(mmap, "MAP_NORESERVE", 0x4000))
    except (OSError, OverflowError, AttributeError) as error:
        pytest.skip(f"cannot map {size:,} bytes of address space: {error}")
    return np.frombuffer(mapping, dtype=dtype, count=length)


def _huge_scores(dtype, rows, columns):
    """``(rows, columns)`` scores that are one real row repeated (zero row stride)."""
    row = np.zeros(columns, dtype=dtype)
    return np.lib.stride_tricks.as_strided(row, shape=(rows, columns),
                                           strides=(0, row.itemsize), writeable=False)


@pytest.fixture
def recorded(monkeypatch):
    """The emulated backend with launches recorded, not run."""
    skip_unavailable("emulated")
    from metrics_gpu.backends.selection import get_backend_implementation

    backend = get_backend_implementation("emulated")
    launches = []

    def record(source, expression, grid, block, args, shared_bytes=0):
        launches.append((expression, grid, args))

    monkeypatch.setattr(backend.device, "launch", record)
    return backend, launches


def _check_segments(launches, n, base_pointer, itemsize, grid_of):
    """The launches cover [0, n) in order, each within the per-block limit."""
    start = 0
    for expression, grid, args in launches:
        segment, total = args[3], args[14]
        pointer = int(args[0].ctypes.data)
        assert isinstance(segment, np.int64), f"{expression}: length passed as {type(segment)}"
        assert isinstance(total, np.int64) and int(total) == n
        assert 0 < int(segment) <= grid * launch_base.MAX_SAMPLES_PER_BLOCK
        assert grid == grid_of
        assert pointer == base_pointer + start * itemsize
        start += int(segment)
    assert start == n
    assert len(launches) == -(-n // (grid_of * launch_base.MAX_SAMPLES_PER_BLOCK))


@pytest.mark.parametrize("kind", ["confusion", "statistics"])
def test_label_launches_split_past_2_36_samples(recorded, kind):
    backend, launches = recorded
    y_true = _huge_labels(np.int8, PAST_2_36)
    y_pred = _huge_labels(np.int8, PAST_2_36)
    if kind == "confusion":
        matrix, _, _ = backend.accumulate_confusion(y_true, y_pred, num_classes=5)
        assert matrix.shape == (5, 5)
    else:
        backend.class_statistics(y_true, y_pred, num_classes=5, moments=True)
    grid = backend._grid(PAST_2_36)
    assert len(launches) > 1  # the per-block limit splits it
    _check_segments(launches, PAST_2_36, int(y_true.ctypes.data), 1, grid)


def test_fused_argmax_launches_take_64_bit_rows(recorded):
    """(N, K) scores as a zero-stride view: the row count and the strides in
    elements reach the kernel as 64-bit integers."""
    backend, launches = recorded
    y_true = _huge_labels(np.int32, PAST_2_33)
    scores = _huge_scores(np.float32, PAST_2_33, 3)
    backend.accumulate_confusion(y_true, RowArgmax(scores), num_classes=3)
    grid = backend._grid(PAST_2_33 * 4)  # 4 lanes per row of 3 columns
    _check_segments(launches, PAST_2_33, int(y_true.ctypes.data), 4, grid)
    for _, _, args in launches:
        row_stride, column_stride = args[10], args[11]
        assert isinstance(row_stride, np.int64) and isinstance(column_stride, np.int64)
        assert (int(row_stride), int(column_stride)) == (0, 1)


def test_score_pass_takes_64_bit_row_counts(recorded):
    backend, launches = recorded
    y_true = _huge_labels(np.int32, PAST_2_33)
    scores = _huge_scores(np.float32, PAST_2_33, 3)
    backend.fused_logits_pass(y_true, scores, n_bins=4, top_k=(2,))
    ((expression, _, args),) = launches
    sizes = args[3:7]  # n, K, row and column strides
    assert all(isinstance(a, np.int64) for a in sizes), expression
    assert [int(a) for a in sizes] == [PAST_2_33, 3, 0, 1]


# -- the kernels' index arithmetic --------------------------------------------------------

SOURCES = sorted(p for p in kernel_directory().glob("*.cu*"))
WIDE = r"(?:int64|long long|uint64|unsigned long long|size_t)"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_kernel_sample_indices_are_64_bit(path):
    """A product with ``blockIdx.x`` or ``gridDim.x`` is cast to 64 bits first, and a variable
    that takes a global thread or warp index, or the grid's thread count, is
    64-bit: in 32 bits they wrap past 2^32 samples."""
    problems = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        code = line.split("//")[0]
        for match in re.finditer(r"(\(\s*\w[\w ]*\)\s*)?(?:blockIdx|gridDim)\.x\s*\*", code):
            cast = match.group(1) or ""
            if not re.fullmatch(rf"\(\s*{WIDE}\s*\)\s*", cast):
                problems.append(f"{number}: block or grid index multiplied in 32 bits: {line.strip()}")
        declared = re.search(r"\b([A-Za-z_][\w ]*?)\s+(\w+)\s*=\s*[^;]*"
                             r"(grid_threads\(\)|global_warp_base\(\)|blockIdx\.x\s*\*)", code)
        if declared and not re.search(rf"\b{WIDE}$", declared.group(1).replace("const ", "").strip()):
            problems.append(f"{number}: {declared.group(2)} is {declared.group(1)!r}: {line.strip()}")
    assert not problems, "\n".join(problems)


def test_index_check_catches_a_32_bit_index():
    """The source check above flags the two ways a 32-bit index is written."""
    bad = ["  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += grid_threads()) {",
           "  const unsigned int stride = grid_threads();"]
    good = ["  for (int64 i = (int64)blockIdx.x * blockDim.x + threadIdx.x; i < n;",
            "  const int64 stride = grid_threads();"]
    checker = test_kernel_sample_indices_are_64_bit

    class Source:
        def __init__(self, lines):
            self.text = "\n".join(lines)

        def read_text(self):
            return self.text

    for line in bad:
        with pytest.raises(AssertionError):
            checker(Source([line]))
    checker(Source(good))
