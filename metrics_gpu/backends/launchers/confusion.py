"""Launchers of ``kernels/confusion.cu``: the counting pass over labels (or
the row argmax of scores), its instantiations and its arguments.

Kernel choice for a dense K x K matrix (M = matrix positions):

* M = 2, unweighted: ``confusion_binary`` (ballot/popc, no atomics per sample);
* M*M counters fit the per-block shared-memory budget (with the opt-in beyond
  48 KiB, 227 KiB on an H100): ``confusion_shared`` (privatised per block,
  warp-aggregated increments when M*M <= 64);
* otherwise ``confusion_global`` (global atomics off the diagonal; the
  diagonal per block in shared memory when a block has many more samples
  than classes).

Huge K uses ``class_statistics`` (O(K) memory; the 3K counts per block in
shared memory while they fit). Every count stays on the device until the
caller converts it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from metrics_gpu.backends.kernel_sources import (
    LABEL_TYPES,
    SCORE_TARGET_TYPES,
    SCORE_TYPES,
    KernelModule,
    c_bool,
)
from metrics_gpu._formulas.state import ClassStatistics, RowArgmax, statistics_from_matrix
from metrics_gpu.backends.launchers.base import (
    WARP_SIZE,
    LaunchBase,
    ignore_arguments,
    native_byte_order,
)

SOURCE = "confusion.cu"
# Warp-aggregated shared increments pay off while few cells take every
# sample (K <= 8): merged lanes replace contended atomics on one address.
AGGREGATE_MAX_CELLS = 64

# (weight C type, fixed point): unweighted, integer weights (exact int64),
# float weights (float64 atomics), and float64 weights with
# deterministic=True (float32 weights are widened for it: a rare option).
WEIGHT_VARIANTS = (
    ("mg::unit_weight", False), ("long long", False),
    ("float", False), ("double", False), ("double", True),
)
ACCUMULATE_KERNELS = ("confusion_shared", "confusion_global", "class_statistics")
# max|w| of float64 weights, for the fixed point of deterministic=True (also
# read before scores.cu's fixed-point calibration bins), and its conversion back.
MAX_ABS_WEIGHT = "max_abs_weight<double>"
FIXED_TO_FLOAT = "fixed_point_to_float64"


def accumulate_expression(kernel: str, true_type: str, pred_type: str,
                          weight_type: str = "mg::unit_weight", fixed: bool = False) -> str:
    """The instantiation name of one accumulation kernel for C++ element types."""
    if kernel == "confusion_binary":
        return f"confusion_binary<{true_type}, {pred_type}>"
    return f"{kernel}<{true_type}, {pred_type}, {weight_type}, {c_bool(fixed)}>"


def _label_pairs():
    # Labels of one dtype each (mixed dtypes are cast to int64 first), and
    # every label type with every score type (the fused argmax).
    for true_type in LABEL_TYPES.values():
        yield true_type, true_type
    for true_type in SCORE_TARGET_TYPES:
        for score_type in SCORE_TYPES.values():
            yield true_type, score_type


def _instantiations() -> tuple[str, ...]:
    names = []
    for true_type, pred_type in _label_pairs():
        names.append(accumulate_expression("confusion_binary", true_type, pred_type))
        for kernel in ACCUMULATE_KERNELS:
            for weight_type, fixed in WEIGHT_VARIANTS:
                names.append(accumulate_expression(kernel, true_type, pred_type, weight_type,
                                                   fixed))
    return (*names, MAX_ABS_WEIGHT, FIXED_TO_FLOAT)


MODULE = KernelModule(SOURCE, _instantiations())


def launch_max_abs_weight(backend: LaunchBase, weights, n: int):
    """max|w| of ``n`` float64 weights as float64 bits in a (1,) uint64 device
    array (one launch): the scale of the 64-bit fixed point."""
    max_weight_bits = backend.zeros(1, np.uint64)
    backend.launch(SOURCE, MAX_ABS_WEIGHT, backend._grid(n), backend.device.block_threads,
                   [weights, np.int64(n), max_weight_bits])
    return max_weight_bits


@dataclass(frozen=True)
class Weights:
    """Sample weights as the counting kernels read them."""

    array: Any             # device array, or None
    c_type: str            # weight C type in the instantiation
    fixed: bool            # deterministic fixed point

    @property
    def integer_counts(self) -> bool:
        """Accumulated as 64-bit integers (counts, integer weights, fixed point)."""
        return self.fixed or self.c_type in ("mg::unit_weight", "long long")


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
    weights: Weights
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


class ConfusionLaunchers(LaunchBase):
    """The counting pass: a dense matrix, or O(K) per-class statistics."""

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

    def _weights(self, sample_weight, deterministic: bool) -> Weights:
        if sample_weight is None:
            return Weights(None, "mg::unit_weight", False)
        xp = self.xp
        weight = xp.ascontiguousarray(native_byte_order(sample_weight))
        if weight.dtype.kind in "iub":
            if weight.dtype != np.int64:
                weight = weight.astype(np.int64)
            return Weights(weight, "long long", False)
        if weight.dtype not in (np.float32, np.float64) or (
                deterministic and weight.dtype != np.float64):
            weight = weight.astype(np.float64)
        c_type = "float" if weight.dtype == np.float32 else "double"
        return Weights(weight, c_type, deterministic)

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
            max_weight_bits = launch_max_abs_weight(self, weights.array, n)
        scores = isinstance(y_pred, RowArgmax)
        return _Pass(
            device=self.device, true=true, true_type=true_type, pred=pred, pred_type=pred_type,
            scores=scores, row_stride=row_stride, column_stride=column_stride,
            # Lanes per score row: the power of two >= K, at most a warp.
            group=min(WARP_SIZE, 1 << max(0, (num_classes - 1).bit_length())) if scores else 0,
            weights=weights, num_classes=num_classes,
            size=num_classes if class_lut is None else int(np.max(class_lut, initial=-1)) + 1,
            # Judged on the caller's dtype, before any conversion of the labels.
            ignore=ignore_arguments(ignore_index, y_true.dtype),
            lut=lut, max_weight_bits=max_weight_bits, n=n,
        )

    def _zero_weight_seen(self, weights, size):
        return self.zeros(size if weights.array is not None else 1, np.uint8)

    def _fixed_to_float(self, counts, max_weight_bits, total):
        out = self.zeros(counts.shape, np.float64)
        count = int(np.prod(counts.shape))
        self.launch(SOURCE, FIXED_TO_FLOAT, self._grid(count), self.device.block_threads,
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
        xp, device = self.xp, self.device
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
        # xp.greater, not `> 0`: a device array and a scalar (launchers/base.py).
        observed = xp.greater(matrix.sum(axis=0), 0) | xp.greater(matrix.sum(axis=1), 0)
        if weights.array is not None:
            observed |= seen.astype(bool)
        return matrix, observed, device.scalar(invalid[0])

    def class_statistics(self, y_true, y_pred, *, num_classes, sample_weight=None,
                         ignore_index=None, class_lut=None, guard=False, moments=False,
                         deterministic=False) -> ClassStatistics:
        """Per-class statistics in O(K) memory (``class_statistics`` kernel).

        The misclassified weight is a count of the same type as the others
        (the four share one allocation). The kappa moments are exact 128-bit
        integers for counts, integer weights and ``deterministic=True``;
        float64 sums otherwise.
        """
        del guard
        xp, device = self.xp, self.device
        run = self._prepare(y_true, y_pred, sample_weight, num_classes=num_classes,
                            ignore_index=ignore_index, class_lut=class_lut,
                            deterministic=deterministic)
        weights, size, n, max_bits = run.weights, run.size, run.n, run.max_weight_bits
        integer_counts = weights.integer_counts
        count_dtype = np.uint64 if integer_counts else np.float64
        counts = self.zeros(3 * size + 1, count_dtype)
        true_positives, support, predicted, misclassified = (
            counts[:size], counts[size:2 * size], counts[2 * size:3 * size], counts[3 * size:])
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
                          + [true_positives, support, predicted, misclassified, seen, invalid,
                             np.int32(bool(moments)), exact_moments, float_moments,
                             np.int32(privatize)], shared)
        if weights.fixed or integer_counts:
            counts = (self._fixed_to_float(counts, max_bits, n) if weights.fixed
                      else counts.view(np.int64))
            true_positives, support, predicted, misclassified = (
                counts[:size], counts[size:2 * size], counts[2 * size:3 * size],
                counts[3 * size:])
        observed = xp.greater(support, 0) | xp.greater(predicted, 0)
        if weights.array is not None:
            observed |= seen.astype(bool)
        linear = quadratic = None
        if moments:
            if integer_counts:
                words = exact_moments.astype(np.float64)
                linear = words[0] + xp.multiply(words[1], 2.0**64)
                quadratic = words[2] + xp.multiply(words[3], 2.0**64)
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
            misclassified=misclassified[0],
        )

    def statistics_from_matrix(self, matrix, observed, *, invalid=0, moments=False):
        return statistics_from_matrix(matrix, observed, self.xp, invalid=invalid,
                                      moments=moments)
