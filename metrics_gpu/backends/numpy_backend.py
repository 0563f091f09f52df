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

import sys
from typing import Any

import numpy as np

from metrics_gpu import _ranking_formulas, _resample
from metrics_gpu._formulas import label_metric_values, softmax_rows
from metrics_gpu._kernels import STREAM_CHECK_SLOTS, STREAM_NO_ERROR, STREAM_ORDINAL_SHIFT
from metrics_gpu._state import (
    SCORE_SLOT,
    ClassStatistics,
    RowArgmax,
    ScoreSums,
    score_sums_size,
    statistics_from_matrix,
)
from metrics_gpu._validation import probability_sum_tolerance

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
                    wanted=ROW_TERMS, class_axis: int = 1):
    """Per-sample terms of the fused pass for float64 scores ``z`` and targets ``t``.

    The reference for kernels/scores.cu: argmax (lowest index on ties), -log
    p_t, the Brier sum, the Crammer-Singer hinge, CatBoost's one-vs-all
    log loss (times K), the max probability and the rank of the true class
    (how many classes sort before it: higher score, or equal score and a
    higher index, as scikit-learn's stable argsort reversed). Only the
    ``wanted`` terms are computed (a CPU pays per term; the kernel does not).

    ``z`` is ``(n, K)`` (``class_axis=1``) or ``(K, n)`` (``class_axis=0``):
    NumPy reduces short rows slowly, so the chunked pass hands small K over
    class-major.
    """
    samples = np.arange(t.shape[0])
    z_t = z[samples, t] if class_axis == 1 else z[t, samples]

    def spread(per_sample):  # a per-sample vector against z
        return np.expand_dims(per_sample, class_axis)

    def set_targets(array, value):  # each row's target entry of an array shaped as z
        if class_axis == 1:
            array[samples, t] = value
        else:
            array[t, samples] = value

    classes = np.expand_dims(np.arange(z.shape[class_axis]), 1 - class_axis)
    terms = {}
    m = z.max(axis=class_axis) if wanted & {"correct", "nll", "brier", "confidence"} else None
    if "correct" in wanted:
        assert m is not None  # "correct" is one of the terms that take the max
        # t is the argmax when z_t is the max and no lower index has it too.
        correct = z_t == m
        ties = np.flatnonzero(correct & (np.count_nonzero(z == spread(m), axis=class_axis) > 1))
        undecided = np.concatenate([ties, np.flatnonzero(np.isnan(m))])  # NaN: argmax's rules
        if undecided.size:
            part = z[undecided] if class_axis == 1 else z[:, undecided]
            correct[undecided] = np.argmax(part, axis=class_axis) == t[undecided]
        terms["correct"] = correct
    # As kernels/scores.cu add_row_terms: the target's term kept apart, so
    # that a confident row (p_t near 1) keeps its digits. The Brier term is
    # sum_{j != t} p_j^2 + (1 - p_t)^2 (sum p^2 - 2 p_t + 1 cancels to the
    # rounding of p_t), with 1 - p_t = (sum_{j != t} e_j) / s from logits,
    # and -log p_t = (m - z_t) + log1p(s - 1), s - 1 exact when t holds the max.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if from_logits and wanted & {"nll", "brier", "confidence"}:
            e = np.exp(z - spread(m))
            e_t = e[samples, t] if class_axis == 1 else e[t, samples]  # a copy
            set_targets(e, 0.0)
            other = e.sum(axis=class_axis)
            s = other + e_t
            if "nll" in wanted:
                terms["nll"] = (m - z_t) + np.log1p(other + (e_t - 1.0))
            if "confidence" in wanted:
                terms["confidence"] = 1.0 / s
            if "brier" in wanted:
                terms["brier"] = ((e * e).sum(axis=class_axis) + other * other) / (s * s)
        elif not from_logits:
            if "nll" in wanted:
                terms["nll"] = -np.log(np.clip(z_t, clip_eps, 1.0 - clip_eps))
            if "confidence" in wanted:
                terms["confidence"] = m
            if "brier" in wanted:
                squares = z * z
                set_targets(squares, 0.0)
                miss = 1.0 - z_t
                terms["brier"] = squares.sum(axis=class_axis) + miss * miss
        if "hinge" in wanted:
            others = z.copy()
            set_targets(others, -np.inf)
            terms["hinge"] = np.maximum(0.0, 1.0 - (z_t - others.max(axis=class_axis)))
        if "one_vs_all" in wanted:
            if one_vs_all:
                # sum_j softplus(z_j) - z_t, the target's term as softplus(-z_t):
                # positive terms (the difference cancels for a confident row).
                softplus = np.logaddexp(0.0, z)
                set_targets(softplus, 0.0)
                terms["one_vs_all"] = (softplus.sum(axis=class_axis)
                                       + np.logaddexp(0.0, -z_t))
            else:
                terms["one_vs_all"] = np.zeros_like(z_t)
    if "rank" in wanted:
        target = spread(z_t)
        rank = np.count_nonzero(z > target, axis=class_axis)
        # Equal scores at a higher index sort first: only rows with a tie count them.
        equal = z == target
        tied = np.flatnonzero(np.count_nonzero(equal, axis=class_axis) > 1)
        if tied.size:
            later = classes > np.expand_dims(t[tied], class_axis)
            part = equal[tied] if class_axis == 1 else equal[:, tied]
            rank[tied] += np.count_nonzero(part & later, axis=class_axis)
        terms["rank"] = rank
    return terms


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
        per distinct score (see :func:`metrics_gpu._ranking_formulas.binary_curve_points`)."""
        return _ranking_formulas.binary_curve_points(scores, is_positive, sample_weight, np)

    def binary_rank_areas(self, scores, is_positive, sample_weight=None, max_fpr=None):
        """``[ROC AUC, average precision]`` of ``(N,)`` scores against the
        ``is_positive`` mask, float64 (see :func:`metrics_gpu._ranking_formulas.binary_rank_areas`)."""
        return _ranking_formulas.binary_rank_areas(scores, is_positive, sample_weight, np, max_fpr)

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
    if weights is None:
        return int(values.sum())
    largest = max(int(np.abs(weights).max(initial=0)), 1) * max(int(values.max(initial=0)), 1)
    if largest * values.size < (1 << 63):
        return int(np.dot(weights, values))
    return sum(int(w) * int(v) for w, v in zip(weights.tolist(), values.tolist()))


def stream_update(state: dict, batch, *, num_classes: int, ignore_index, ordinal: int,
                  from_logits: bool, clip_eps: float, top_k, n_bins: int,
                  thresholds: int) -> None:
    """Add one batch to a streaming state of NumPy arrays: the reference of
    kernels/streaming.cu ``streaming_update`` (same state, same rules).

    A counted sample (its target is not ``ignore_index``) is left out, and
    counted in ``checks[0]``, when its target or prediction is outside
    ``[0, K)``, a score of its row is not finite (or, read as probabilities,
    outside [0, 1], or the row sums farther from 1 than
    :func:`metrics_gpu._validation.probability_sum_tolerance`), or
    its weight is negative or not finite; the first of each kind is kept in
    ``checks[1..3]``. A batch that would take integer counts past 2^63 - 1
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
    rows = None
    if batch.scores:
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
    valid = counted & target_ok & pred_ok & weight_ok
    bad = counted & ~valid
    checks = state["checks"]
    checks[0] += np.uint64(np.count_nonzero(bad))
    for slot, mask in ((1, bad & ~target_ok), (2, bad & target_ok & ~pred_ok),
                       (3, bad & ~weight_ok)):
        checks[slot] = min(int(checks[slot]), _first_key(mask, ordinal))

    tv, pv = t[valid], p[valid]
    wv = None if w is None else w[valid]
    integer = state["counts"].dtype.kind == "u"
    if wv is not None:  # integers exactly, floats summed in float64 (as the kernels)
        wv = wv.astype(np.int64 if integer else np.float64, copy=False)
    counts = state["counts"]
    if integer:
        added = tv.size if wv is None else _exact_sum(wv, np.ones_like(tv))
        if int(counts[3 * k]) + added >= 1 << 63:
            overflow = STREAM_CHECK_SLOTS - 1
            checks[overflow] = min(int(checks[overflow]), ordinal << STREAM_ORDINAL_SHIFT)
            return
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
    if rows is None or "scores" not in state:  # labels, or the argmax of scores only
        return
    chosen = rows[valid]
    sums = NUMPY_BACKEND.fused_logits_pass(
        tv, chosen, sample_weight=None if wv is None else wv.astype(np.float64),
        from_logits=from_logits, clip_eps=clip_eps, top_k=top_k, n_bins=n_bins,
        terms=("correct", "nll", "brier", "hinge"))
    state["scores"] += sums.buffer
    if thresholds:
        z = widen_scores(chosen)
        if from_logits:
            z = softmax_rows(z, np)
        bins = calibration_bin(z, thresholds) + np.arange(k) * thresholds
        histogram = state["histogram"].reshape(2, k * thresholds)
        every = weighted_bincount(bins.reshape(-1), None if wv is None else np.repeat(wv, k),
                                  k * thresholds)
        positive = weighted_bincount(bins[np.arange(tv.size), tv], wv, k * thresholds)
        cast = (lambda a: a.astype(histogram.dtype)) if integer else (lambda a: a)
        histogram[0] += cast(positive)
        histogram[1] += cast(every - positive)
