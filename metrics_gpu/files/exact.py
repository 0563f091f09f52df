"""Exact ROC AUC and average precision of files: the memory they take
(:func:`exact_auc_bytes`, beside the memory free), every row's scores kept
while reading (:class:`_ExactScores`) and their ranking (:func:`exact_ranking`)."""

from __future__ import annotations

import math
import os
from typing import Any, Callable

import numpy as np

from metrics_gpu._formulas.labels import defined_averages, softmax_rows
from metrics_gpu.files.sources import FileProblem
from metrics_gpu.files.staging import _CudaStaging, _HostStaging
from metrics_gpu.backends.selection import resolve_backend
from metrics_gpu.backends.launchers.ranking import LABEL_RANK_CELLS
from metrics_gpu._validation import to_numpy

# Fraction of the free memory (host, or GPU) that exact ranking may take.
EXACT_MEMORY_FRACTION = 0.5


def _free_memory(backend_name: str) -> int:
    """Bytes free where exact ranking would run: the GPU's, or the host's."""
    if backend_name == "cuda":
        import cupy

        return int(cupy.cuda.runtime.memGetInfo()[0])
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def exact_score_dtype(score_dtype, from_logits: bool) -> np.dtype:
    """The dtype in which the exact path keeps the probabilities of scores read
    as ``score_dtype`` (logits or probabilities): the one place that decides
    it, for :class:`_ExactScores` and for the bytes :func:`exact_auc_bytes`
    counts.

    The softmax of logits is formed and kept in float64: rounded to a 16- or
    32-bit type, distinct probabilities would tie (or swap) and the "exact"
    values would carry an error no bound reports. Probabilities given are
    ranked as they are, in their own type (no rounding: exact, and no larger).
    """
    return np.dtype(np.float64) if from_logits else np.dtype(score_dtype)


# The constants of exact_auc_bytes, measured as resident memory (VmHWM) of
# reports on the NumPy backend (tests/test_exact_ranking.py holds the estimate
# to a real run).
#
# Bytes one ranked binary problem takes per score beyond its inputs (scores,
# mask, weights), at its peak. The NumPy reference (_ranking_formulas) holds six
# float64 arrays at once (the tie-group totals, the rates, a trapezoid or
# precision step; the order and ranked scores are gone by then): 48-49 bytes
# allocated (tracemalloc) for float16/32/64, weighted or not, about 54 resident (the
# allocator's reuse of freed blocks is not perfect), 58 with room. The kernels' path
# (kernels/ranking.cu) holds a 32-bit key or an int64 order, the ranked scores,
# class and weight, and per-tile sums: 13-26 bytes allocated on the emulator;
# 40 leaves room for the sort's temporary storage on a GPU (CUB's, not
# measured here).
NUMPY_RANK_BYTES = 58
KERNEL_RANK_BYTES = 40
# Reading, per row of a chunk beside the buffer sets and the softmax's three
# (rows, K) arrays: the states' per-row temporaries (labels, argmax, masks),
# about 112 bytes; and a bound of theirs that does not grow with the chunk
# (the NumPy backend works in sub-chunks of its own).
CHUNK_ROW_TEMPORARY_BYTES = 112
CHUNK_STATE_BYTES = 24 << 20
# The states, the report and the allocator's slack, at any size.
EXACT_OVERHEAD_BYTES = 8 << 20


def exact_auc_bytes(rows: int, num_classes: int, score_dtype, *, weighted: bool = False,
                    ignore_index: bool = False, backend: str = "numpy", chunk_rows: int = 0,
                    row_bytes: int = 0) -> int:
    """Peak memory of a report with exact ROC AUC / AP over ``rows`` x K scores,
    beyond what the process held before it, where the backend computes.

    Kept while reading: every row's target (int64), probabilities (``score_dtype``,
    see :func:`exact_score_dtype`) and weight (float64). Then the larger of
    reading (the buffer sets of ``chunk_rows`` rows of ``row_bytes`` and the
    chunk's temporaries) and ranking: the micro average ranks the N K pooled
    scores in one problem (their one-vs-rest mask, the weights repeated, and
    the ranking's own arrays, :data:`NUMPY_RANK_BYTES` or
    :data:`KERNEL_RANK_BYTES` a score); a class's problem is N of them, less.
    With ``ignore_index`` the rows kept are copied first.
    """
    score_bytes = np.dtype(score_dtype).itemsize
    weight_bytes = 8 if weighted else 0
    kept = rows * (8 + num_classes * score_bytes + weight_bytes)
    rank_bytes = NUMPY_RANK_BYTES if backend == "numpy" else KERNEL_RANK_BYTES
    ranking = rows * num_classes * (1 + weight_bytes + rank_bytes)
    if ignore_index:
        ranking += rows + kept  # the mask, then the rows kept
    # A chunk's pages are touched only as far as rows are read into them: one
    # buffer set for a file of one chunk, at most the staging's depth.
    chunk = min(chunk_rows, rows)
    depth = _CudaStaging.depth if backend == "cuda" else _HostStaging.depth
    buffer_sets = min(depth, -(-rows // chunk)) if chunk else 1
    reading = CHUNK_STATE_BYTES + chunk * (buffer_sets * row_bytes
                                           + 3 * num_classes * score_bytes
                                           + CHUNK_ROW_TEMPORARY_BYTES)
    return EXACT_OVERHEAD_BYTES + kept + max(reading, ranking)


def _format_bytes(count: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if count < 1024 or unit == "TB":
            return f"{count:,.0f} {unit}" if unit == "bytes" else f"{count:,.1f} {unit}"
        count /= 1024
    return ""


class KeptRows:
    """Every row's arrays, kept where the backend computes, for the exact
    ranking metrics at the end: one buffer per array, of ``rows`` rows and
    the ``(tail, dtype)`` of ``layouts`` (None: an array not given, such as
    unweighted rows' weights), filled chunk by chunk. Where the rows are not
    known (text files, Arrow streams) each chunk's arrays are kept and joined
    at the end."""

    def __init__(self, xp, rows: int | None, layouts):
        self.xp, self.filled = xp, 0
        self.layouts = tuple(layouts)
        self.parts: list[tuple] | None = None if rows is not None else []
        self.buffers: tuple[Any, ...] = ()
        if rows is not None:
            self.buffers = tuple(None if layout is None else
                                 xp.empty((rows, *layout[0]), layout[1])
                                 for layout in self.layouts)

    def add(self, *arrays) -> None:
        if self.parts is not None:
            # Copies: the chunk's buffers are read into again.
            self.parts.append(tuple(None if layout is None else array.astype(layout[1])
                                    for array, layout in zip(arrays, self.layouts)))
            return
        stop = self.filled + len(arrays[0])
        for buffer, array in zip(self.buffers, arrays):
            if buffer is not None:
                buffer[self.filled:stop] = array
        self.filled = stop

    def arrays(self) -> tuple:
        if self.parts is not None:
            return tuple(None if layout is None else
                         self.xp.concatenate([part[i] for part in self.parts])
                         for i, layout in enumerate(self.layouts))
        return self.buffers


class _ExactScores(KeptRows):
    """Every row's targets, probabilities and weights, for the exact ranking
    metrics of a multiclass file. ``dtype`` is the kept probabilities'
    (:func:`exact_score_dtype`)."""

    def __init__(self, xp, rows: int | None, num_classes: int, dtype, weighted: bool,
                 from_logits: bool):
        self.from_logits, self.dtype = from_logits, np.dtype(dtype)
        super().__init__(xp, rows, (((), np.int64), ((num_classes,), self.dtype),
                                    ((), np.float64) if weighted else None))

    def add(self, y_true, scores, weight) -> None:
        probabilities = (softmax_rows(scores.astype(self.dtype), self.xp) if self.from_logits
                         else scores)
        super().add(y_true, probabilities, weight)


def exact_or_binned(auc: str, needed: int, backend: str, score_reader, shape: str) -> str:
    """"exact" where ``needed`` bytes fit in the share of free memory the exact
    ranking may take, else "binned" (``auc="auto"``), or a :class:`FileProblem`
    (``auc="exact"``) that says what it needs, what is free and what to do."""
    free = _free_memory(backend)
    fits = needed <= EXACT_MEMORY_FRACTION * free
    if auc == "exact" and not fits:
        where = "the GPU" if backend == "cuda" else "this machine"
        raise FileProblem(
            f"{score_reader.argument} {score_reader.path}: --auc exact needs about "
            f"{_format_bytes(needed)} for {shape} scores, and {_format_bytes(free)} are free on "
            f"{where} (it takes at most {EXACT_MEMORY_FRACTION:.0%}); use --auc binned (the "
            "error bound is printed beside each value)")
    return "exact" if fits else "binned"


def _ranked_scores(rows: int, num_classes: int) -> int:
    """Scores :func:`exact_ranking` ranks: each class's column, then all N K pooled."""
    return 2 * rows * num_classes


def exact_ranking(y_true, probabilities, sample_weight=None, *, ignore_index=None,
                  progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Exact ROC AUC and average precision of every class against the rest, and
    their averages, with the names and conventions of the binned ones of
    :class:`metrics_gpu.StreamingReport`: macro over the classes where a value
    is defined, weighted by the positives' weight, micro over every class's
    one-vs-rest pairs pooled; ``roc_auc`` / ``average_precision`` are class
    1's for K = 2, else the macro averages. Error bounds are 0.

    One ranking of every class's scores gives both of their values (the
    backend's ``label_rank_areas``: one segmented pass on a kernel backend),
    and one sort of the N K pooled scores both micro averages
    (``binary_rank_areas``).
    ``progress`` is told the scores ranked, :func:`_ranked_scores` in all.
    """
    backend = resolve_backend(probabilities)
    xp = backend.xp
    # Host arrays may resolve to a GPU backend (set_backend, METRICS_GPU_BACKEND).
    y_true, probabilities = backend.asarray(y_true), backend.asarray(probabilities)
    if sample_weight is not None:
        sample_weight = backend.asarray(sample_weight)
    rows, k = probabilities.shape
    if ignore_index is not None:
        keep = y_true != ignore_index
        y_true, probabilities = y_true[keep], probabilities[keep]
        sample_weight = None if sample_weight is None else sample_weight[keep]
        del keep
    positives = np.asarray(to_numpy(xp.bincount(y_true, sample_weight, minlength=k)),
                           dtype=np.float64)[:k]
    negatives = positives.sum() - positives
    # [ROC AUC, AP] of every class, LABEL_RANK_CELLS scores at a time (the
    # backend's label_rank_areas: on a kernel backend the same launches for
    # any number of classes in a group), where the scores live.
    group = max(1, LABEL_RANK_CELLS // max(1, len(y_true)))
    parts = []
    for first in range(0, k, group):
        columns = xp.arange(first, min(first + group, k))
        parts.append(backend.label_rank_areas(probabilities[:, first:first + group],
                                              xp.equal(y_true[:, None], columns[None, :]),
                                              sample_weight))
        if progress is not None:
            progress(rows * int(columns.shape[0]))
    per_class = np.asarray(to_numpy(xp.concatenate(parts, axis=1)), dtype=np.float64)
    del parts
    scored = positives > 0
    ap = np.where(scored, per_class[1], math.nan)
    auc = np.where(scored & (negatives > 0), per_class[0], math.nan)
    # The pooled problem: the sample's own class is the positive of its K scores.
    onehot = (y_true[:, None] == xp.arange(k)[None, :]).reshape(-1)
    flat_weight = None if sample_weight is None else xp.repeat(sample_weight, k)
    micro = np.asarray(to_numpy(backend.binary_rank_areas(
        probabilities.reshape(-1), onehot, flat_weight)), dtype=np.float64)
    del onehot, flat_weight
    if progress is not None:
        progress(rows * k)
    out: dict[str, Any] = {}
    for name, values, micro_value in (("roc_auc", auc, micro[0]),
                                      ("average_precision", ap, micro[1])):
        macro, weighted = defined_averages(values, positives)
        out[name] = values[1] if k == 2 else macro
        out[f"{name}_macro"], out[f"{name}_weighted"] = macro, weighted
        out[f"{name}_micro"], out[f"{name}_error_bound"] = float(micro_value), 0.0
        out[f"per_class_{name}"] = values
    return out
