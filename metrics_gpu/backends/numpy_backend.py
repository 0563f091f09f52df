"""NumPy backend: the reference implementation and the CPU fallback.

It supplies the array namespace and the heavy primitives, nothing else:

* :meth:`NumpyBackend.accumulate_confusion` - dense K x K matrix in one pass,
* :meth:`NumpyBackend.class_statistics` - O(K) per-class statistics for huge K,
* :meth:`NumpyBackend.argmax_scores` - row argmax of ``(N, K)`` scores,
* :meth:`NumpyBackend.fused_logits_pass` - every score sum of ``(N, K)``
  scores (kernels/scores.cu computes the same),
* :meth:`NumpyBackend.binary_rank_areas` - exact ROC AUC and average
  precision of one binary problem (kernels/ranking.cu computes the same).

Inputs arrive validated (or, with ``validate=False``, guarded here so that an
out-of-range label is counted as invalid and never indexes out of bounds).
Work is done in chunks of :data:`CHUNK_SAMPLES` so that temporaries stay in
cache and memory stays bounded for any N.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import numpy as np

from metrics_gpu._formulas import ranking as _ranking_formulas

from metrics_gpu._formulas import resample as _resample
from metrics_gpu._formulas.labels import binary_decisions, label_metric_values
from metrics_gpu.backends.kernel_sources import STREAM_CHECK_SLOTS, STREAM_NO_ERROR, STREAM_ORDINAL_SHIFT
from metrics_gpu._formulas.state import (
    SCORE_SLOT,
    ClassStatistics,
    RowArgmax,
    ScoreSums,
    score_sums_size,
    statistics_from_matrix,
)
from metrics_gpu._formulas.tolerance import probability_sum_tolerance

# 2**18 samples: the int64 index temporaries of one chunk (2 MiB each) stay in
# L2/L3 cache, and the per-chunk Python overhead is < 1% at this size.
CHUNK_SAMPLES = 1 << 18
# Score rows per chunk: about 2**20 float64 elements (8 MiB) of temporaries.
# Every pass over (N, K) scores reads them this many elements at a time, so
# memory stays bounded for memory-mapped files of any size.
CHUNK_SCORE_ELEMENTS = 1 << 20
# Up to this K a chunk is reduced class-major ((K, n)): each reduction is then
# K long vector operations rather than n short rows (the fused terms 1.3-2x
# faster at K = 10). The transposing copy costs more as K grows; measured on
# 2 Xeon cores, row-major wins from K of about 40.
CLASS_MAJOR_MAX_K = 32


def row_argmax(scores, out=None):
    """Row argmax of ``(N, K)`` scores as intp, ties to the lowest index (NumPy's
    rule), in chunks of :data:`CHUNK_SCORE_ELEMENTS`: ``np.argmax`` copies a
    read-only array whole (a memory-mapped file would be read into memory)."""
    n, k = scores.shape
    if out is None:
        out = np.empty(n, dtype=np.intp)
    rows = max(1, CHUNK_SCORE_ELEMENTS // max(k, 1))
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        np.argmax(scores[start:stop], axis=1, out=out[start:stop])
    return out


def widen_scores(scores, *, class_major: bool = False):
    """Scores as float64 (bfloat16 through float32: NumPy has no direct cast);
    ``class_major`` gives ``(K, n)``, transposed in the same copy."""
    if scores.dtype.name == "bfloat16":
        scores = scores.astype(np.float32)
    if not class_major:
        return np.asarray(scores, dtype=np.float64)
    widened = np.empty(scores.shape[::-1], dtype=np.float64)
    widened[...] = scores.T
    return widened


# The per-row terms of the fused pass; a caller names the ones it reads.
ROW_TERMS = frozenset({"correct", "nll", "brier", "hinge", "one_vs_all", "confidence", "rank"})


def score_row_terms(z, t, *, from_logits: bool, clip_eps: float, one_vs_all: bool,
                    wanted=ROW_TERMS, class_axis: int = 1, m=None, predicted=None,
                    keep_exp: bool = False):
    """Per-sample terms of the fused pass for scores ``z`` and targets ``t``.

    The reference for kernels/scores.cu: argmax (lowest index on ties), -log
    p_t, the Brier sum, the Crammer-Singer hinge, CatBoost's one-vs-all
    log loss (times K), the max probability and the rank of the true class
    (how many classes sort before it: higher score, or equal score and a
    higher index, as scikit-learn's stable argsort reversed). Only the
    ``wanted`` terms are computed (a CPU pays per term; the kernel does not).

    ``z`` is ``(n, K)`` (``class_axis=1``) or ``(K, n)`` (``class_axis=0``):
    NumPy reduces short rows slowly, so the chunked pass hands small K over
    class-major. ``z`` is the caller's scratch copy: each row's target entry
    is overwritten for a moment (and put back), rather than copying it.
    ``m`` (each row's max) and ``predicted`` (each row's argmax), where the
    caller has them, are not computed again. ``keep_exp`` (logits): the
    terms also hold ``exp`` (exp(z - m), shaped as z) and ``sum`` (its row
    sums, the softmax denominators), the probabilities' parts.

    ``z`` may be float32 (scores of 32 bits or fewer, widened exactly): the
    comparisons (max, ranks) run in it, at half the bytes, and every
    arithmetic term in float64, as from float64 scores.
    """
    n = t.shape[0]
    samples = np.arange(n)
    # Each row's target entry, as a position in the flat array (indexing by
    # one flat vector costs a quarter of indexing by a pair).
    index = samples * z.shape[1] + t if class_axis == 1 else t * n + samples
    z = np.ascontiguousarray(z)
    flat = z.reshape(-1)  # a view: writes to it reach z
    z_t_as_given = flat[index]  # z's type: compared with z
    z_t = z_t_as_given.astype(np.float64, copy=False)

    def spread(per_sample):  # a per-sample vector against z
        return np.expand_dims(per_sample, class_axis)

    terms = {}
    if m is None and wanted & {"correct", "nll", "brier", "confidence"}:
        m = z.max(axis=class_axis)
    if "correct" in wanted:
        assert m is not None  # "correct" is one of the terms that take the max
        if predicted is None:
            # t is the argmax when z_t is the max and no lower index has it too.
            correct = z_t_as_given == m
            ties = np.flatnonzero(correct & (_count_along(z == spread(m), class_axis) > 1))
            undecided = np.concatenate([ties, np.flatnonzero(np.isnan(m))])  # argmax's rules
            if undecided.size:
                part = z[undecided] if class_axis == 1 else z[:, undecided]
                correct[undecided] = np.argmax(part, axis=class_axis) == t[undecided]
        else:
            correct = predicted == t
        terms["correct"] = correct
    # As kernels/scores.cu add_row_terms: the target's term kept apart, so
    # that a confident row (p_t near 1) keeps its digits. The Brier term is
    # sum_{j != t} p_j^2 + (1 - p_t)^2 (sum p^2 - 2 p_t + 1 cancels to the
    # rounding of p_t), with 1 - p_t = (sum_{j != t} e_j) / s from logits,
    # and -log p_t = (m - z_t) + log1p(s - 1), s - 1 exact when t holds the max.
    squares = "ij,ij->j" if class_axis == 0 else "ij,ij->i"
    if m is not None:
        m = m.astype(np.float64, copy=False)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if from_logits and (keep_exp or wanted & {"nll", "brier", "confidence"}):
            e = np.subtract(z, spread(m))
            np.exp(e, out=e)
            e_flat = e.reshape(-1)
            e_t = e_flat[index]  # a copy
            e_flat[index] = 0.0
            other = e.sum(axis=class_axis)
            s = other + e_t
            if "nll" in wanted:
                terms["nll"] = (m - z_t) + np.log1p(other + (e_t - 1.0))
            if "confidence" in wanted:
                terms["confidence"] = 1.0 / s
            if "brier" in wanted:
                terms["brier"] = (np.einsum(squares, e, e) + other * other) / (s * s)
            if keep_exp:
                e_flat[index] = e_t
                terms["exp"], terms["sum"] = e, s
        elif not from_logits:
            if "nll" in wanted:
                terms["nll"] = -np.log(np.clip(z_t, clip_eps, 1.0 - clip_eps))
            if "confidence" in wanted:
                terms["confidence"] = m
            if "brier" in wanted:
                flat[index] = 0.0
                miss = 1.0 - z_t
                terms["brier"] = np.einsum(squares, z, z, dtype=np.float64) + miss * miss
                flat[index] = z_t_as_given
        if "hinge" in wanted:
            flat[index] = -np.inf
            others = z.max(axis=class_axis).astype(np.float64, copy=False)
            flat[index] = z_t_as_given
            terms["hinge"] = np.maximum(0.0, 1.0 - (z_t - others))
        if "one_vs_all" in wanted:
            if one_vs_all:
                # sum_j softplus(z_j) - z_t, the target's term as softplus(-z_t):
                # positive terms (the difference cancels for a confident row).
                softplus = np.logaddexp(0.0, z, dtype=np.float64)
                softplus.reshape(-1)[index] = 0.0
                terms["one_vs_all"] = (softplus.sum(axis=class_axis)
                                       + np.logaddexp(0.0, -z_t))
            else:
                terms["one_vs_all"] = np.zeros_like(z_t)
    if "rank" in wanted:
        target = spread(z_t_as_given)
        rank = _count_along(z > target, class_axis)
        # Equal scores at a higher index sort first: only rows with a tie count them.
        equal = z == target
        tied = np.flatnonzero(_count_along(equal, class_axis) > 1)
        if tied.size:
            classes = np.expand_dims(np.arange(z.shape[class_axis]), 1 - class_axis)
            later = classes > np.expand_dims(t[tied], class_axis)
            part = equal[tied] if class_axis == 1 else equal[:, tied]
            rank[tied] += _count_along(part & later, class_axis)
        terms["rank"] = rank
    return terms


def _count_along(mask, axis: int):
    """True values of a boolean array along ``axis`` (add.reduce into a narrow
    integer: several times faster than count_nonzero along an axis)."""
    length = mask.shape[axis]
    dtype = np.uint8 if length < 256 else np.int32 if length < 1 << 31 else np.int64
    return np.add.reduce(mask, axis=axis, dtype=dtype)


def calibration_bin(confidence, n_bins: int):
    """Equal-width bin of each confidence c in [0, 1]: b with ``b/B <= c < (b+1)/B``,
    the edges being the doubles nearest ``b/B`` (1.0 in the last bin; NaN in bin 0).

    ``floor(c * B)`` alone puts ``c = b/B`` into bin ``b - 1`` when the
    product rounds down (15/22 * 22 < 15); one step against the edge itself
    corrects it. kernels/scores.cu ``calibration_bin`` is the same rule.
    """
    c = np.nan_to_num(np.asarray(confidence, dtype=np.float64), nan=0.0)
    index = np.clip(np.floor(c * n_bins), 0, n_bins - 1).astype(np.intp)
    up = (index + 1 < n_bins) & (c >= (index + 1) / n_bins)
    down = ~up & (index > 0) & (c < index / n_bins)
    return index + up - down



# -- the streaming update's pass over score rows -----------------------------------

# Values of a tile of the streaming score update: K * rows values (1 MiB as
# float64) per temporary, so that a tile's few temporaries stay in cache
# between the passes over it, and NumPy's cost per call stays small beside
# the work (measured on 2 cores: 2^17 values 5% faster than 2^16, 2^15 20%
# slower).
SCORE_TILE_ELEMENTS = 1 << 17
# A product p * H (plus its cell's offset) within this fraction of the
# largest cell index of an integer may floor to a cell other than the rule's
# (p * H, the edges b / H and the sum all round, by a few 2^-53 of it): those
# few values are binned by calibration_bin's exact rule.
BIN_ROUNDING_SLACK = 2.0 ** -44


def probability_bins(values, thresholds: int, scale=None, exact=None, offsets=None):
    """calibration_bin(p, thresholds) of each probability p in [0, 1] of
    ``values``, as intp, plus its ``offsets`` (whole numbers against
    ``values``; a cell's place in a histogram): ``p = values`` or, with
    ``scale`` (each row's ``thresholds / s`` against ``values``), ``p = values
    / s``, whose rounded quotients ``exact(flat positions)`` gives for the
    few products near an edge. A product, a sum and a floor per value, not
    calibration_bin's dozen passes."""
    product = np.multiply(values, thresholds if scale is None else scale, dtype=np.float64,
                          order="C")
    largest = thresholds + (0 if offsets is None else float(np.max(offsets)))
    slack = BIN_ROUNDING_SLACK * largest
    # floor(product + offset + slack) is the rule's cell unless the product
    # lies within about the slack of an integer: then the fraction is small.
    shifted = product + (slack if offsets is None else offsets + slack)
    whole = np.floor(shifted)
    np.subtract(shifted, whole, out=shifted)
    near = np.flatnonzero(shifted < 2 * slack)
    bins = whole.astype(np.intp)
    if near.size:
        at = product.reshape(-1)[near]
        base = 0 if offsets is None else np.broadcast_to(offsets, product.shape).reshape(-1)[near]
        # p = 0 and 1 (p * H = 0, H) are bins 0 and H - 1 by the rule itself.
        exact_bins = np.where(at == 0, 0, thresholds - 1)
        inside = np.flatnonzero((at != 0) & (at != thresholds))
        if inside.size:
            p = values.reshape(-1)[near[inside]] if exact is None else exact(near[inside])
            exact_bins[inside] = calibration_bin(p, thresholds)
        bins.reshape(-1)[near] = exact_bins + base
    return bins


class ScoreTileSums:
    """What a streaming update adds from its score rows, kept apart from the
    state until the batch is known to fit: each tile's score sums (the fused
    pass's layout; summed in tile order), the ``(2 K H)`` histogram cells
    (positives first) and, per row, the argmax and whether the row's scores
    passed the checks."""

    def __init__(self, n: int, k: int, *, sums_size: int, thresholds: int, integer: bool):
        self.tile_rows = max(1, SCORE_TILE_ELEMENTS // k)
        self.tiles = -(-n // self.tile_rows)
        self.sums = np.zeros((self.tiles, sums_size))
        # (no cells without thresholds)
        self.histogram = np.zeros(2 * k * thresholds, np.int64 if integer else np.float64)
        self.predicted = np.empty(n, np.int64)
        self.pred_ok = np.empty(n, bool)


def score_tiles(sums: ScoreTileSums, rows, t, scan, w, *, from_logits: bool,
                clip_eps: float, top_k, n_bins: int, thresholds: int, tolerance: float) -> None:
    """A streaming update's ``(n, K)`` scores into ``sums``, tile by tile: each
    tile widened (class-major for small K) once; its max, min, argmax and
    checks, the per-row terms of the rows that count (:func:`score_row_terms`)
    and their probabilities' histogram bins all from that one copy. ``scan``:
    rows whose target counts and lies in [0, K) and whose weight passed; ``w``:
    the weights as the state counts them (int64 or float64), or None."""
    n, k = rows.shape
    class_major = k <= CLASS_MAJOR_MAX_K
    axis = 0 if class_major else 1
    tile_rows = sums.tile_rows
    # 32 bits or fewer: compared in float32 (exact), computed in float64.
    widened = np.empty(k * tile_rows, np.float32 if rows.dtype.itemsize <= 4 else np.float64)
    wanted = {"correct", "nll", "brier", "hinge"}
    if top_k:
        wanted.add("rank")
    if n_bins:
        wanted.add("confidence")
    first_hit = len(SCORE_SLOT)
    first_bin = first_hit + len(top_k)
    if thresholds:
        cells = sums.histogram
        # Each value's cell in (2, K, H): the negatives' half, its class's row.
        offsets = (np.arange(k) * thresholds + k * thresholds).astype(np.float64)
        offsets = offsets[:, None] if class_major else offsets[None, :]
    for tile in range(sums.tiles):
        low = tile * tile_rows
        high = min(n, low + tile_rows)
        z = widened[:k * (high - low)].reshape((k, -1) if class_major else (-1, k))
        block = rows[low:high]
        if block.dtype.name == "bfloat16":
            block = block.astype(np.float32)
        np.copyto(z, block.T if class_major else block)
        m = z.max(axis=axis)  # NaN where a row holds one
        least = z.min(axis=axis)
        with np.errstate(invalid="ignore", over="ignore"):
            # Both finite, in one test: float64 sums of float32 scores cannot
            # overflow (float64 ones can: those rows are looked at again).
            pred_ok = np.isfinite(np.add(m, least, dtype=np.float64))
            if z.dtype == np.float64 and not pred_ok.all():
                pred_ok = np.isfinite(m) & np.isfinite(least)
            if not from_logits:
                pred_ok &= (least >= 0) & (m <= 1) & (
                    np.abs(z.sum(axis=axis, dtype=np.float64) - 1) <= tolerance)
        predicted = _first_max(z, m, axis)
        sums.predicted[low:high] = predicted
        sums.pred_ok[low:high] = pred_ok
        valid = scan[low:high] & pred_ok
        tv = t[low:high]
        wv = None if w is None else w[low:high]
        if not valid.all():
            chosen = np.flatnonzero(valid)
            if not chosen.size:
                continue
            # (z[:, chosen] comes out Fortran-ordered: flat positions need C order)
            z = np.ascontiguousarray(z[:, chosen]) if class_major else z[chosen]
            m, predicted, tv = m[chosen], predicted[chosen], tv[chosen]
            wv = None if wv is None else wv[chosen]
        terms = score_row_terms(z, tv, from_logits=from_logits, clip_eps=clip_eps,
                                one_vs_all=False, wanted=wanted, class_axis=axis, m=m,
                                predicted=predicted, keep_exp=bool(thresholds) and from_logits)
        buffer = sums.sums[tile]
        weight = None if wv is None else wv.astype(np.float64, copy=False)
        if weight is None:
            buffer[SCORE_SLOT["weight"]] = tv.size
            for name in ("correct", "nll", "brier", "hinge"):
                buffer[SCORE_SLOT[name]] = terms[name].sum()
            for i, limit in enumerate(top_k):
                buffer[first_hit + i] = np.count_nonzero(terms["rank"] < limit)
        else:
            buffer[SCORE_SLOT["weight"]] = weight.sum()
            for name in ("correct", "nll", "brier", "hinge"):
                buffer[SCORE_SLOT[name]] = weight @ terms[name]
            for i, limit in enumerate(top_k):
                buffer[first_hit + i] = weight[terms["rank"] < limit].sum()
        if n_bins:
            # Counted rows are finite: s >= 1, so no confidence is NaN.
            confidence = terms["confidence"]
            b = probability_bins(confidence, n_bins)
            bins_slots = buffer[first_bin:first_bin + 3 * n_bins].reshape(3, n_bins)
            if weight is None:  # the count and the correct count from one pass
                pairs = np.bincount(2 * b + terms["correct"], minlength=2 * n_bins)
                bins_slots[0] = pairs[0::2] + pairs[1::2]
                bins_slots[1] = np.bincount(b, confidence, n_bins)
                bins_slots[2] = pairs[1::2]
            else:
                bins_slots[0] = np.bincount(b, weight, n_bins)
                bins_slots[1] = np.bincount(b, weight * confidence, n_bins)
                bins_slots[2] = np.bincount(b, weight * terms["correct"], n_bins)
        if thresholds:
            if from_logits:
                e, s = terms["exp"], terms["sum"]
                scale = thresholds / s
                scale = scale[None, :] if class_major else scale[:, None]

                def exact(near, e=e, s=s):  # the quotients at flat positions of e
                    row = near % s.size if class_major else near // k
                    return e.reshape(-1)[near] / s[row]

                bins = probability_bins(e, thresholds, scale, exact, offsets)
            else:
                bins = probability_bins(z, thresholds, offsets=offsets)
            samples = np.arange(tv.size)
            # Each row's target cell: the positives' half.
            bins.reshape(-1)[tv * tv.size + samples if class_major
                             else samples * k + tv] -= k * thresholds
            if wv is None:
                np.add.at(cells, bins.reshape(-1), 1)
            else:
                spread = wv[None, :] if class_major else wv[:, None]
                np.add.at(cells, bins.reshape(-1),
                          np.broadcast_to(spread, bins.shape).astype(cells.dtype).reshape(-1))


def _first_max(z, m, axis: int):
    """Each row's argmax (the lowest index of its max; NaN rows: any index,
    they are left out) from the max already taken: one comparison pass."""
    k = z.shape[axis]
    if axis == 1 or k > 32:
        return np.argmax(z, axis=axis)
    # The classes at the max as the bits of one word (a sum of distinct
    # powers of two); its lowest set bit is the lowest index.
    word = np.add.reduce((z == m[None, :]) * _CLASS_BIT[:k], axis=0,
                         dtype=np.uint16 if k <= 16 else np.uint32)
    if k <= 16:
        return _lowest_bits().take(word)
    lowest = word & (~word + np.uint32(1))
    lowest[lowest == 0] = 1  # NaN rows
    return np.frexp(lowest)[1].astype(np.int64) - 1  # log2 of a power of two, exactly


_CLASS_BIT = (np.uint32(1) << np.arange(32, dtype=np.uint32))[:, None]


@functools.cache
def _lowest_bits() -> np.ndarray:
    """The lowest set bit of each 16-bit word (0 for none: a NaN row, left out)."""
    words = np.arange(1 << 16)
    return np.maximum(np.frexp(words & -words)[1] - 1, 0).astype(np.int64)


# Integer weights are summed exactly: while every float64 partial sum of a
# chunk stays below 2**53 one np.bincount is exact; beyond, the weights are
# split into 21-bit limbs (a chunk's limb sums stay below 2**21 * CHUNK_SAMPLES
# = 2**39) and recombined in int64, which validation keeps below 2**63.
FLOAT_EXACT_LIMIT = 1 << 53
WEIGHT_LIMB_BITS = 21


def weighted_bincount(index, weights, size: int):
    """``np.bincount(index, weights, size)``: float64 for float weights, exact
    int64 for integer (and bool) weights, int64 counts for no weights."""
    if weights is None:
        return np.bincount(index, minlength=size)
    if weights.dtype.kind not in "iub":
        return np.bincount(index, weights, size)
    w = weights.astype(np.int64, copy=False)
    largest = max(int(w.max()), -int(w.min())) if w.size else 0
    if largest * w.size < FLOAT_EXACT_LIMIT:
        return np.bincount(index, w, size).astype(np.int64)
    mask = (1 << WEIGHT_LIMB_BITS) - 1
    total = np.zeros(size, dtype=np.int64)
    for shift in (0, WEIGHT_LIMB_BITS, 2 * WEIGHT_LIMB_BITS):
        # The top limb keeps the sign (arithmetic shift); every limb is exact.
        limb = w >> shift if shift == 2 * WEIGHT_LIMB_BITS else (w >> shift) & mask
        total += np.bincount(index, limb, size).astype(np.int64) << shift
    return total


class HostArrays:
    """The arrays of a backend or device that computes on the host, shared by
    :class:`NumpyBackend` and the emulated device
    (:class:`~metrics_gpu.backends.emulated.EmulatedDevice`): NumPy arrays in,
    host results out (NumPy, or torch CPU tensors for torch inputs)."""

    xp: Any = np  # the array namespace

    def asarray(self, array, dtype=None) -> np.ndarray:
        return np.asarray(array, dtype=dtype)

    def zeros(self, shape, dtype) -> np.ndarray:
        return np.zeros(shape, dtype=dtype)

    def clear(self, array) -> None:
        array[...] = 0

    def copy_into(self, target, source) -> None:
        target[...] = source

    def to_host(self, array) -> np.ndarray:
        return np.asarray(array)

    def to_framework(self, value, like):
        """Host inputs, host results: NumPy, or torch CPU tensors for torch inputs."""
        return host_framework(value, like)


class NumpyBackend(HostArrays):
    """Reference backend on host NumPy arrays."""

    name = "numpy"
    # Each function evaluates only its own formula (the full reduction costs
    # more than the formula on a CPU).
    reduces_on_device = False

    def poisson_table_draws(self, counts, cells, first_replicate: int, num_replicates: int,
                            key: tuple[int, int]) -> np.ndarray:
        """The bootstrap's draws (kernels/resample.cu's reference)."""
        counts = np.asarray(counts, dtype=np.int64)
        cells = np.asarray(cells, dtype=np.int64)
        replicates = np.arange(first_replicate, first_replicate + num_replicates,
                               dtype=np.uint64)
        shape = (counts.size, num_replicates)
        return _resample.poisson(np.broadcast_to(counts[:, None], shape),
                                 np.broadcast_to(cells[:, None], shape),
                                 np.broadcast_to(replicates[None, :], shape), key)

    def to_host(self, array) -> np.ndarray:
        """A NumPy array; deferred argmax labels (:class:`RowArgmax`) computed."""
        if isinstance(array, RowArgmax):
            return row_argmax(array.scores)
        return super().to_host(array)

    def argmax_scores(self, scores: np.ndarray) -> RowArgmax:
        """Defer the row argmax of ``(N, K)`` scores to the chunked pass (ties go
        to the lowest index, as NumPy's): no ``(N,)`` labels are stored."""
        return RowArgmax(scores)

    # -- the chunked pass ----------------------------------------------------

    def _chunks(self, y_true, y_pred, sample_weight, num_classes, ignore_index,
                class_lut, guard):
        """Yield ``(t, p, w, zero_weight_labels, n_invalid)`` per chunk.

        ``t``/``p`` are intp codes in ``[0, M)`` where M is ``num_classes``, or
        ``len(class_lut)`` positions when ``class_lut`` maps codes to positions
        (-1 drops the sample, as scikit-learn's ``labels=`` does).
        """
        n = y_true.shape[0]
        for start in range(0, n, CHUNK_SAMPLES):
            stop = min(start + CHUNK_SAMPLES, n)
            t = y_true[start:stop]
            p = (row_argmax(y_pred.scores[start:stop]) if isinstance(y_pred, RowArgmax)
                 else y_pred[start:stop])
            w = None if sample_weight is None else sample_weight[start:stop]
            keep = None
            n_invalid = 0
            if ignore_index is not None:
                keep = t != ignore_index
            if guard:
                valid = _in_range(t, num_classes) & _in_range(p, num_classes)
                if keep is not None:
                    n_invalid = int(np.count_nonzero(keep & ~valid))
                    keep &= valid
                else:
                    n_invalid = int(valid.size - np.count_nonzero(valid))
                    keep = valid
            if keep is not None:
                t, p = t[keep], p[keep]
                w = None if w is None else w[keep]
            t = t.astype(np.intp, copy=False)
            p = p.astype(np.intp, copy=False)
            if class_lut is not None:
                t, p = class_lut[t], class_lut[p]
                both = (t >= 0) & (p >= 0)
                if not both.all():
                    t, p = t[both], p[both]
                    w = None if w is None else w[both]
            zero_weight = None
            if w is not None:
                zero = w == 0
                if zero.any():
                    zero_weight = (t[zero], p[zero])
            yield t, p, w, zero_weight, n_invalid

    # -- primitives ----------------------------------------------------------

    def accumulate_confusion(self, y_true, y_pred, *, num_classes, sample_weight=None,
                             ignore_index=None, class_lut=None, guard=False,
                             deterministic=False):
        """Dense confusion matrix (rows actual, columns predicted) in one pass.

        Sums run in a fixed order here, so ``deterministic`` changes nothing.

        Returns ``(matrix, observed, n_invalid)``; the matrix is int64 without
        weights or with integer weights, else float64.
        """
        size = num_classes if class_lut is None else int(class_lut.max(initial=-1)) + 1
        cells = size * size
        weighted = sample_weight is not None
        float_weights = weighted and sample_weight.dtype.kind not in "iub"
        matrix = np.zeros(cells, dtype=np.float64 if float_weights else np.int64)
        observed_zero = np.zeros(size, dtype=bool)
        n_invalid = 0
        for t, p, w, zero_weight, bad in self._chunks(
            y_true, y_pred, sample_weight, num_classes, ignore_index, class_lut, guard
        ):
            n_invalid += bad
            index = t * size
            index += p
            matrix += weighted_bincount(index, w, cells)
            if zero_weight is not None:
                observed_zero[zero_weight[0]] = True
                observed_zero[zero_weight[1]] = True
        matrix = matrix.reshape(size, size)  # int64 for integer weights, as scikit-learn
        observed = (matrix.sum(axis=0) > 0) | (matrix.sum(axis=1) > 0) | observed_zero
        return matrix, observed, n_invalid

    def class_statistics(self, y_true, y_pred, *, num_classes, sample_weight=None,
                         ignore_index=None, class_lut=None, guard=False,
                         moments=False, deterministic=False) -> ClassStatistics:
        """Per-class statistics in O(K) memory, without a K x K matrix.

        The misclassified weight ``sum w [t != p]`` is summed as a count; with
        ``moments=True`` also ``sum w |t - p|`` and ``sum w (t - p)**2`` over
        class positions (exact integers when unweighted).
        """
        size = num_classes if class_lut is None else int(class_lut.max(initial=-1)) + 1
        weighted = sample_weight is not None
        count_dtype = np.float64 if weighted and sample_weight.dtype.kind not in "iub" \
            else np.int64
        true_positives = np.zeros(size, dtype=count_dtype)
        support = np.zeros(size, dtype=count_dtype)
        predicted = np.zeros(size, dtype=count_dtype)
        observed_zero = np.zeros(size, dtype=bool)
        misclassified = count_dtype(0)
        linear = 0 if not weighted else 0.0
        quadratic = 0 if not weighted else 0.0
        n_invalid = 0
        for t, p, w, zero_weight, bad in self._chunks(
            y_true, y_pred, sample_weight, num_classes, ignore_index, class_lut, guard
        ):
            n_invalid += bad
            hit = t == p
            true_positives += weighted_bincount(t[hit], None if w is None else w[hit], size)
            support += weighted_bincount(t, w, size)
            predicted += weighted_bincount(p, w, size)
            miss = ~hit
            misclassified += (np.count_nonzero(miss) if w is None
                              else w[miss].sum(dtype=count_dtype))
            if moments:
                gap = t - p
                np.abs(gap, out=gap)
                if w is None:
                    # Python ints: exact for any N (a chunk's sum fits int64).
                    linear += int(gap.sum())
                    quadratic += int(np.dot(gap, gap))
                else:
                    gap = gap.astype(np.float64)
                    linear += float(np.dot(w, gap))
                    quadratic += float(np.dot(w, gap * gap))
            if zero_weight is not None:
                observed_zero[zero_weight[0]] = True
                observed_zero[zero_weight[1]] = True
        return ClassStatistics(
            true_positives=true_positives,
            support=support,
            predicted=predicted,
            total=support.sum(),
            observed=(support > 0) | (predicted > 0) | observed_zero,
            invalid=n_invalid,
            linear_disagreement=np.float64(linear) if moments else None,
            quadratic_disagreement=np.float64(quadratic) if moments else None,
            misclassified=misclassified,
        )

    def statistics_from_matrix(self, matrix, observed, *, invalid=0, moments=False):
        return statistics_from_matrix(matrix, observed, np, invalid=invalid, moments=moments)

    def label_metrics(self, stats: ClassStatistics, *, selected=None) -> np.ndarray:
        """Every label metric of ``stats`` as one float64 buffer (the reference)."""
        return label_metric_values(stats, selected)

    def label_metrics_from_matrix(self, matrix, observed, *, selected=None, invalid=0,
                                  moments=True):
        """``(buffer, statistics)`` of a dense matrix; see :meth:`label_metrics`."""
        stats = statistics_from_matrix(matrix, observed, np, invalid=invalid, moments=moments,
                                       selected=selected)
        return label_metric_values(stats, selected), stats

    # -- the fused pass over (N, K) scores ------------------------------------

    def fused_logits_pass(self, y_true, scores, *, sample_weight=None, ignore_index=None,
                          from_logits=True, clip_eps=2.220446049250313e-16, top_k=(),
                          n_bins=0, one_vs_all=False, terms=None,
                          deterministic=False) -> ScoreSums:
        """Every score sum of ``(N, K)`` scores in one chunked pass (float64 math).

        Sums run in a fixed order here, so ``deterministic`` changes nothing.

        Rows whose target is ``ignore_index`` are skipped; targets outside
        ``[0, K)`` are counted in the ``invalid`` slot and never index.
        ``terms`` (names of :data:`ROW_TERMS`; None for all) limits the sums
        computed to those the caller reads; the others stay 0. ``top_k`` adds
        the ranks and ``n_bins`` the confidences and correctness.
        """
        wanted = ROW_TERMS if terms is None else frozenset(terms)
        if not wanted <= ROW_TERMS:
            raise ValueError(f"terms must be names from {sorted(ROW_TERMS)}, got "
                             f"{sorted(wanted - ROW_TERMS)}")
        if top_k:
            wanted |= {"rank"}
        if n_bins:
            wanted |= {"confidence", "correct"}
        n, k = scores.shape
        top_k = tuple(int(v) for v in top_k)
        buffer = np.zeros(score_sums_size(len(top_k), n_bins))
        first_hit = len(SCORE_SLOT)
        first_bin = first_hit + len(top_k)
        rows_per_chunk = max(1, CHUNK_SCORE_ELEMENTS // k)
        for start in range(0, n, rows_per_chunk):
            stop = min(n, start + rows_per_chunk)
            t = np.asarray(y_true[start:stop]).astype(np.int64)
            counted = np.ones(t.shape, bool) if ignore_index is None else t != ignore_index
            valid = counted & (t >= 0) & (t < k)
            buffer[SCORE_SLOT["invalid"]] += np.count_nonzero(counted & ~valid)
            w = (np.ones(stop - start) if sample_weight is None
                 else np.asarray(sample_weight[start:stop], dtype=np.float64))[valid]
            z = widen_scores(scores[start:stop][valid], class_major=k <= CLASS_MAJOR_MAX_K)
            row_terms = score_row_terms(z, t[valid], from_logits=from_logits,
                                        clip_eps=clip_eps, one_vs_all=one_vs_all, wanted=wanted,
                                        class_axis=0 if k <= CLASS_MAJOR_MAX_K else 1)
            buffer[SCORE_SLOT["weight"]] += w.sum()
            for name in ("correct", "nll", "brier", "hinge", "one_vs_all"):
                if name in row_terms:
                    buffer[SCORE_SLOT[name]] += w @ row_terms[name]
            for i, limit in enumerate(top_k):
                buffer[first_hit + i] += w[row_terms["rank"] < limit].sum()
            if n_bins:
                confidence = np.nan_to_num(row_terms["confidence"], nan=0.0)
                b = calibration_bin(confidence, n_bins)
                buffer[first_bin:first_bin + n_bins] += np.bincount(b, w, n_bins)
                buffer[first_bin + n_bins:first_bin + 2 * n_bins] += np.bincount(
                    b, w * confidence, n_bins)
                buffer[first_bin + 2 * n_bins:first_bin + 3 * n_bins] += np.bincount(
                    b, w * row_terms["correct"], n_bins)
        return ScoreSums(buffer, top_k, n_bins, k, from_logits)

    # -- ranking -------------------------------------------------------------

    def label_pair_summary(self, labels) -> tuple:
        """``(lowest, highest, third)`` of non-empty labels on the host: whether
        a value other than the least and the greatest is present and, when
        none is, those two (with a third, the kernel backends leave them
        unspecified: present_labels then takes unique)."""
        low, high, third = _ranking_formulas.label_pair_summary(labels, np)
        return low, high, bool(third)

    def binary_curve_points(self, scores, is_positive, sample_weight=None):
        """``(fps, tps, negatives_seen, positives_seen, thresholds)``, one point
        per distinct score (see :func:`metrics_gpu._formulas.ranking.binary_curve_points`)."""
        return _ranking_formulas.binary_curve_points(scores, is_positive, sample_weight, np)

    def binary_rank_areas(self, scores, is_positive, sample_weight=None, max_fpr=None):
        """``[ROC AUC, average precision]`` of ``(N,)`` scores against the
        ``is_positive`` mask, float64 (see :func:`metrics_gpu._formulas.ranking.binary_rank_areas`)."""
        return _ranking_formulas.binary_rank_areas(scores, is_positive, sample_weight, np, max_fpr)

    def label_rank_areas(self, scores, relevant, sample_weight=None, max_fpr=None):
        """``(2, L)``: ``[ROC AUC, average precision]`` of each label column of
        ``(N, L)`` scores against ``relevant`` (one :meth:`binary_rank_areas`
        per column: the reference of the kernel backends' one pass)."""
        return np.stack([self.binary_rank_areas(scores[:, c], relevant[:, c], sample_weight,
                                                max_fpr)
                         for c in range(scores.shape[1])], axis=1)

def host_framework(value, like):
    """``value`` (NumPy) as a torch CPU tensor when ``like`` is a torch tensor
    (shared memory, no copy unless torch cannot share it), else as it is."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(like, torch.Tensor) and isinstance(
            value, (np.ndarray, np.generic)):
        array = value if type(value) is np.ndarray else np.asarray(value)
        if min(array.strides, default=0) < 0 or not array.flags.writeable:
            # torch shares no buffer walked backwards (the curves hand back
            # reversed views of their scans) and warns on a read-only one.
            array = array.copy()
        return torch.from_numpy(array)
    return value


def _in_range(labels: np.ndarray, num_classes: int) -> np.ndarray:
    if labels.dtype.kind == "b":
        return np.ones(labels.shape, dtype=bool) if num_classes >= 2 else ~labels
    if labels.dtype.kind == "u":
        return labels < num_classes
    return (labels >= 0) & (labels < num_classes)


NUMPY_BACKEND = NumpyBackend()



# -- the streaming state (metrics_gpu.ClassificationMetrics) -------------------



def _first_key(mask, ordinal: int) -> int:
    index = np.flatnonzero(mask)
    return (ordinal << STREAM_ORDINAL_SHIFT) | int(index[0]) if index.size else STREAM_NO_ERROR


def _exact_sum(weights, values) -> int:
    """sum(w * v) as a Python int, exact for int64 weights and values."""
    if weights is None:  # sum(v): exact while the largest times the count fits
        largest = max(int(np.abs(values).max(initial=0)), 1)
        if largest * values.size < (1 << 63):
            return int(values.sum())
        return sum(int(v) for v in values.reshape(-1).tolist())
    largest = max(int(np.abs(weights).max(initial=0)), 1) * max(int(values.max(initial=0)), 1)
    if largest * values.size < (1 << 63):
        return int(np.dot(weights, values))
    return sum(int(w) * int(v) for w, v in zip(weights.tolist(), values.tolist()))


def stream_update(state: dict, batch, *, num_classes: int, ignore_index, ordinal: int,
                  from_logits: bool, clip_eps: float, top_k, n_bins: int,
                  thresholds: int, binary_cut: float | None = None) -> None:
    """Add one batch to a streaming state of NumPy arrays: the reference of
    kernels/streaming.cu ``streaming_update`` (same state, same rules).

    A counted sample (its target is not ``ignore_index``) is left out, and
    counted in ``checks[0]``, when its target or prediction is outside
    ``[0, K)``, a score of its row is not finite (or, read as probabilities,
    outside [0, 1], or the row sums farther from 1 than
    :func:`metrics_gpu._formulas.tolerance.probability_sum_tolerance`), or
    its weight is negative or not finite; the first of each kind is kept in
    ``checks[1..3]``. ``binary_cut``: a two-class state built with a
    threshold predicts by it (:func:`metrics_gpu._formulas.labels.binary_decisions`),
    not at the argmax. A batch that would take integer counts past 2^63 - 1
    adds nothing and is kept in ``checks[4]`` (the kernel adds it, wrapped,
    and keeps it there alike: in both, compute refuses the state).
    """
    k = num_classes
    t = batch.y_true.astype(np.int64, copy=False)
    counted = np.ones(t.shape, bool) if ignore_index is None else t != ignore_index
    target_ok = (t >= 0) & (t < k)
    w = batch.sample_weight
    if w is None:
        weight_ok = np.ones(t.shape, bool)
    elif w.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            weight_ok = np.isfinite(w) & (w >= 0)
    else:
        weight_ok = w >= 0
    rows = tiles = None
    integer = state["counts"].dtype.kind == "u"
    if batch.scores and "scores" in state:
        # One tiled pass over the rows: argmax, checks, terms and histogram.
        rows = batch.rows(np)
        scanned = counted & target_ok
        tiles = ScoreTileSums(t.size, k, sums_size=state["scores"].size, thresholds=thresholds,
                              integer=integer)
        tile_weight = None if w is None else w.astype(np.int64 if integer else np.float64,
                                                       copy=False)
        score_tiles(tiles, rows, t, scanned & weight_ok, tile_weight, from_logits=from_logits,
                    clip_eps=clip_eps, top_k=top_k, n_bins=n_bins, thresholds=thresholds,
                    tolerance=probability_sum_tolerance(batch.score_dtype))
        pred_ok = tiles.pred_ok | ~scanned
        p = tiles.predicted
    elif batch.scores:  # the argmax of scores only
        rows = batch.rows(np)
        pred_ok = np.ones(t.shape, bool)
        scanned = counted & target_ok
        pred_ok[scanned] = np.isfinite(rows[scanned]).all(axis=1)
        if not from_logits:
            chosen = widen_scores(rows[scanned]).astype(np.float64)
            with np.errstate(invalid="ignore"):
                tolerance = probability_sum_tolerance(batch.score_dtype)
                pred_ok[scanned] &= ((chosen >= 0).all(axis=1) & (chosen <= 1).all(axis=1)
                                     & (np.abs(chosen.sum(axis=1) - 1) <= tolerance))
        p = np.zeros(t.shape, np.int64)
        p[scanned] = row_argmax(rows[scanned])
    else:
        p = batch.preds.astype(np.int64, copy=False)
        pred_ok = (p >= 0) & (p < k)
    if rows is not None and binary_cut is not None:
        p = np.where(scanned, binary_decisions(rows, from_logits, binary_cut, np), p)
    valid = counted & target_ok & pred_ok & weight_ok
    bad = counted & ~valid
    checks = state["checks"]
    left_out = np.count_nonzero(bad)
    if left_out:
        checks[0] += np.uint64(left_out)
        for slot, mask in ((1, bad & ~target_ok), (2, bad & target_ok & ~pred_ok),
                           (3, bad & ~weight_ok)):
            checks[slot] = min(int(checks[slot]), _first_key(mask, ordinal))
    if valid.all():  # no copies where every sample counts
        tv, pv, wv = t, p, w
    else:
        tv, pv = t[valid], p[valid]
        wv = None if w is None else w[valid]
    if wv is not None:  # integers exactly, floats summed in float64 (as the kernels)
        wv = wv.astype(np.int64 if integer else np.float64, copy=False)
    counts = state["counts"]
    if integer:
        added = tv.size if wv is None else _exact_sum(None, wv)
        if int(counts[3 * k]) + added >= 1 << 63:
            overflow = STREAM_CHECK_SLOTS - 1
            checks[overflow] = min(int(checks[overflow]), ordinal << STREAM_ORDINAL_SHIFT)
            return
    if k * k <= max(MATRIX_COUNT_CELLS, tv.size):
        # Every label count from one pass: the batch's K x K cells.
        _add_label_cells(state, weighted_bincount(tv * k + pv, wv, k * k).reshape(k, k),
                         integer)
    else:
        _add_label_samples(state, tv, pv, wv, integer)
    if tiles is None:  # labels, or the argmax of scores only
        return
    state["scores"] += tiles.sums.sum(axis=0)
    if thresholds:
        histogram = state["histogram"].reshape(-1)
        cells = tiles.histogram
        histogram += cells.astype(histogram.dtype) if integer else cells


# Up to this many K x K cells (or the batch's samples, if more) a streaming
# update counts its labels by one bincount of the cells, not three of the classes.
MATRIX_COUNT_CELLS = 1 << 12


def _class_gaps(k: int) -> np.ndarray:
    """|i - j| of each cell of a K x K matrix, int64, flat."""
    positions = np.arange(k)
    return np.abs(positions[:, None] - positions[None, :]).reshape(-1)


def _add_label_cells(state: dict, cells, integer: bool) -> None:
    """A batch's K x K cells (int64 or float64) into the label counts of ``state``."""
    k = cells.shape[0]
    counts = state["counts"]
    total = _exact_sum(None, cells) if integer else cells.sum()

    def add(target, summed):
        target += summed.astype(target.dtype) if integer else summed

    add(counts[:k], np.diagonal(cells))
    add(counts[k:2 * k], cells.sum(axis=1))
    add(counts[2 * k:3 * k], cells.sum(axis=0))
    flat = cells.reshape(-1)
    gaps = _class_gaps(k)
    if integer:
        counts[3 * k] += np.uint64(total)
        counts[3 * k + 1] += np.uint64(total - _exact_sum(None, np.diagonal(cells)))
        words = state["moments"]
        for i, moment in enumerate((_exact_sum(flat, gaps), _exact_sum(flat, gaps * gaps))):
            value = int(words[2 * i]) + (int(words[2 * i + 1]) << 64) + moment
            words[2 * i], words[2 * i + 1] = value & ((1 << 64) - 1), value >> 64
    else:
        counts[3 * k] += total
        # The misclassified cells summed, not total - correct: a float total
        # absorbs a small weight beside a large one (2^54 + 1 - 2^54 = 0).
        counts[3 * k + 1] += flat[gaps != 0].sum()
        gaps = gaps.astype(np.float64)
        state["moments"] += [np.dot(flat, gaps), np.dot(flat, gaps * gaps)]
    if "matrix" in state:
        add(state["matrix"].reshape(-1), flat)


def _add_label_samples(state: dict, tv, pv, wv, integer: bool) -> None:
    """The label counts of a batch's counted samples, class by class (K too
    large for a K x K matrix per batch)."""
    k = (state["counts"].size - 2) // 3
    counts = state["counts"]
    hit = tv == pv

    def add(target, index, weights, size):
        summed = weighted_bincount(index, weights, size)
        target += summed.astype(target.dtype) if integer else summed

    add(counts[:k], tv[hit], None if wv is None else wv[hit], k)
    add(counts[k:2 * k], tv, wv, k)
    add(counts[2 * k:3 * k], pv, wv, k)
    gap = np.abs(tv - pv)
    miss = ~hit
    if integer:
        counts[3 * k] += np.uint64(tv.size if wv is None else _exact_sum(wv, np.ones_like(tv)))
        counts[3 * k + 1] += np.uint64(np.count_nonzero(miss) if wv is None
                                       else _exact_sum(wv[miss], np.ones_like(tv[miss])))
        words = state["moments"]
        for i, moment in enumerate((_exact_sum(wv, gap), _exact_sum(wv, gap * gap))):
            value = int(words[2 * i]) + (int(words[2 * i + 1]) << 64) + moment
            words[2 * i], words[2 * i + 1] = value & ((1 << 64) - 1), value >> 64
    else:
        # Float counts, from float weights now or in an earlier batch: an
        # unweighted batch weighs 1.0 a sample (the kernels' unit weights).
        weights = np.ones(tv.size) if wv is None else wv
        counts[3 * k] += weights.sum()
        counts[3 * k + 1] += weights[miss].sum()
        gap = gap.astype(np.float64)
        state["moments"] += [np.dot(weights, gap), np.dot(weights, gap * gap)]
    if "matrix" in state:
        add(state["matrix"].reshape(-1), tv * k + pv, wv, k * k)
