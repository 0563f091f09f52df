"""Launchers of ``kernels/scores.cu``: the fused pass over ``(N, K)`` scores
(every score sum in one read), its row mappings, instantiations and arguments."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from metrics_gpu.backends.kernel_sources import SCORE_MAX_TOP_K, SCORE_TARGET_TYPES, SCORE_TYPES, KernelModule
from metrics_gpu._formulas.state import ScoreSums, score_sums_size
from metrics_gpu.backends.launchers.base import (
    WARP_SIZE,
    LaunchBase,
    check_rows_per_block,
    ignore_arguments,
)
from metrics_gpu.backends.launchers.confusion import launch_max_abs_weight

SOURCE = "scores.cu"
# kernels/scores.cu: the block size its reduction scratch is sized for, the
# launch bound of its kernels and of streaming.cu's (kScoreBlockThreads). Its
# top-k limit is metrics_gpu.backends.kernel_sources.SCORE_MAX_TOP_K (kMaxTopK).
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

# The fused pass over (N, K) scores: targets as the training loop gives them,
# every score type, unweighted or float64 weights (others are widened: N
# values next to N * K scores).
SCORE_WEIGHT_TYPES = ("mg::unit_weight", "double")
# The mappings of rows onto threads (score_mapping picks): lanes per row with
# a score per load, a thread per row staged through shared memory (few
# columns), or a tile per row with 16-byte loads (many columns).
SCORE_PASS_KERNELS = ("fused_logits_pass", "fused_logits_staged", "fused_logits_wide")


def score_pass_expression(true_type: str, score_type: str, weight_type: str,
                          kernel: str = "fused_logits_pass") -> str:
    return f"{kernel}<{true_type}, {score_type}, {weight_type}>"


MODULE = KernelModule(SOURCE, tuple(
    score_pass_expression(true_type, score_type, weight_type, kernel)
    for kernel in SCORE_PASS_KERNELS for true_type in SCORE_TARGET_TYPES
    for score_type in SCORE_TYPES.values() for weight_type in SCORE_WEIGHT_TYPES))


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
    kernel: str        # a name of SCORE_PASS_KERNELS
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


class ScoreLaunchers(LaunchBase):
    """The fused pass over ``(N, K)`` scores."""

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
        ignore = ignore_arguments(ignore_index, true.dtype)
        block = min(device.block_threads, SCORE_MAX_BLOCK_THREADS)
        shared_bytes = 3 * n_bins * 8 + top_k_shared_bytes(len(top_k), block)
        mapping = score_mapping(num_columns, row_stride, column_stride,
                                device.data_pointer(values), values.dtype.itemsize, block,
                                shared_bytes)
        group = mapping.group
        shared_bytes += mapping.tile_bytes
        grid = max(1, min(self._grid(n * group, shared_bytes), -(-n * group // block)))
        check_rows_per_block(n, grid)
        slots = score_sums_size(len(top_k), n_bins)
        partials = self.zeros(grid * slots, np.float64)
        limits = device.asarray(np.array(top_k or (0,), dtype=np.int64))
        fixed_bins = bool(n_bins) and (weight is None or deterministic)
        max_weight_bits = None
        if fixed_bins and weight is not None:
            max_weight_bits = launch_max_abs_weight(self, weight, n)
        self.launch(
            SOURCE,
            score_pass_expression(true_type, score_type, weight_type, mapping.kernel), grid, block,
            [true, values, weight, np.int64(n), np.int64(num_columns), np.int64(row_stride),
             np.int64(column_stride), np.int32(group), *ignore, np.int32(bool(from_logits)),
             np.float64(clip_eps), np.int32(bool(one_vs_all)), limits, np.int32(len(top_k)),
             np.int32(n_bins), np.int32(fixed_bins), max_weight_bits, partials],
            shared_bytes,
        )
        buffer = partials.reshape(grid, slots).sum(axis=0)
        return ScoreSums(buffer, top_k, n_bins, num_columns, bool(from_logits))

