"""Launchers of ``kernels/ranking.cu``: exact ranking (a sort, then the
tie-aware segmented scans over tiles of ranked positions) of one binary
problem or of every label of a multilabel one, the packed-key paths, the
curve points, and the one-pass label summary."""

from __future__ import annotations

import numpy as np

from metrics_gpu._formulas import ranking as _ranking_formulas
from metrics_gpu.backends.kernel_sources import LABEL_TYPES, KernelModule
from metrics_gpu.backends.launchers.base import LaunchBase, native_byte_order

SOURCE = "ranking.cu"
# kernels/ranking.cu: positions per thread (kRankItems) and its launch bound
# (kRankBlockThreads); a tile is block * RANK_ITEMS_PER_THREAD positions.
RANK_ITEMS_PER_THREAD = 8
RANK_MAX_BLOCK_THREADS = 256
# Scores in an order-preserving type (other integers are read as int64,
# other floats as float64), unweighted or float64 weights.
RANK_SCORE_TYPES = {
    "float32": "float", "float64": "double", "float16": "mg::float16_bits",
    "int64": "long long",
}
RANK_WEIGHT_TYPES = ("mg::unit_weight", "double")
# Unweighted scores of at most 32 bits take the packed-key path (sorts of
# 32-bit keys, no gather): float32 and float16 as they are, small integers
# and bools as int32. Its ranked scores are 32-bit key bits.
PACKED_RANK_TYPES = {"float32": "float", "float16": "mg::float16_bits", "int32": "int"}
PACKED_RANK_SCORE_TYPE = "unsigned int"
PACKED_TILES = "rank_packed_tiles"
PACKED_AREAS = "rank_packed_areas"
TILE_SCAN = "rank_tile_scan"
FINISH = "rank_finish"
LABEL_KEY_TILES = "rank_label_key_tiles"
LABEL_KEY_AREAS = "rank_label_key_areas"
# Cells of a multilabel problem ranked at a time (the keys or the argsort
# and its ranked copies: 8-40 bytes a cell), so its temporaries stay bounded
# whatever N L; a chunk is whole labels.
LABEL_RANK_CELLS = 1 << 25


def rank_gather_expression(score_type: str, weight_type: str) -> str:
    return f"rank_gather<{score_type}, {weight_type}>"


def rank_areas_expression(score_type: str) -> str:
    return f"rank_areas<{score_type}>"


def curve_points_expression(score_type: str) -> str:
    return f"rank_curve_points<{score_type}>"


def pack_keys_expression(score_type: str) -> str:
    return f"rank_pack_keys<{score_type}>"


def pack_label_keys_expression(score_type: str) -> str:
    return f"rank_pack_label_keys<{score_type}>"


def label_summary_expression(label_type: str) -> str:
    """The one-pass distinct-label summary, for present_labels."""
    return f"label_pair_summary<{label_type}>"


MODULE = KernelModule(SOURCE, (
    *(rank_gather_expression(score_type, weight_type)
      for score_type in RANK_SCORE_TYPES.values() for weight_type in RANK_WEIGHT_TYPES),
    *(rank_areas_expression(score_type)
      for score_type in (*RANK_SCORE_TYPES.values(), PACKED_RANK_SCORE_TYPE)),
    *(curve_points_expression(score_type) for score_type in RANK_SCORE_TYPES.values()),
    *(pack_keys_expression(score_type) for score_type in PACKED_RANK_TYPES.values()),
    PACKED_TILES, PACKED_AREAS, TILE_SCAN, FINISH,
    *(pack_label_keys_expression(score_type) for score_type in PACKED_RANK_TYPES.values()),
    LABEL_KEY_TILES, LABEL_KEY_AREAS,
    *(label_summary_expression(label_type) for label_type in LABEL_TYPES.values()),
))


class RankingLaunchers(LaunchBase):
    """Exact ranking areas and curves of one binary problem, in O(N) memory."""

    def _rank_scores(self, scores):
        """Scores as kernels/ranking.cu reads them (an order-preserving type),
        and the values to sort."""
        xp = self.xp
        scores = xp.ascontiguousarray(native_byte_order(scores))
        if scores.dtype == np.uint64:
            # Flipping the top bit maps unsigned order onto signed order exactly.
            scores = (scores ^ np.uint64(1 << 63)).view(np.int64)
        elif scores.dtype.kind in "iub":
            scores = scores.astype(np.int64)
        elif scores.dtype.name not in RANK_SCORE_TYPES:
            scores = scores.astype(np.float64)
        kernel_view = scores.view(np.uint16) if scores.dtype == np.float16 else scores
        return scores, kernel_view, RANK_SCORE_TYPES[scores.dtype.name]

    def label_pair_summary(self, labels) -> tuple:
        """As :meth:`NumpyBackend.label_pair_summary`, in one read of integer or
        bool labels (kernels/ranking.cu label_pair_summary: the first label,
        one other and whether a third appears, per block) and one read-back
        of the blocks' rows; other dtypes take three reductions."""
        xp = self.xp
        if labels.dtype.name not in LABEL_TYPES and labels.dtype != np.bool_:
            low, high, third = _ranking_formulas.label_pair_summary(labels, xp)
            low, high, third = self.to_host(xp.stack([low, high, third.astype(labels.dtype)]))
            return low, high, bool(third)
        array, label_type = self._labels(labels.reshape(-1))
        n = int(array.size)
        if n == 0:
            raise ValueError("labels is empty: label_pair_summary needs at least one label")
        block = min(self.device.block_threads, RANK_MAX_BLOCK_THREADS)
        grid = self._grid(n)
        rows = xp.empty((grid, 4), dtype=np.uint64)
        self.launch(SOURCE, label_summary_expression(label_type), grid, block,
                    [array, np.int64(n), rows])
        words = np.asarray(self.to_host(rows))
        # (first, other) back from 64-bit words to the labels' dtype (two's
        # complement wraps back to the same bits).
        pairs = words[:, :2].view(np.int64).astype(labels.dtype)
        values = {pairs[0, 0].item(), *pairs[words[:, 2] != 0, 1].tolist()}
        third = bool(words[:, 3].any()) or len(values) > 2
        low, high = min(values), max(values)
        return np.asarray(low, labels.dtype), np.asarray(high, labels.dtype), third

    def binary_rank_areas(self, scores, is_positive, sample_weight=None, max_fpr=None):
        """``[ROC AUC, average precision]`` of ``(N,)`` scores, as
        :meth:`NumpyBackend.binary_rank_areas`: a sort (CuPy/CUB on a GPU),
        then the passes of kernels/ranking.cu over tiles of ranked
        positions with the tiles' scan between them (rank_tile_scan). O(N)
        memory.

        Unweighted scores of at most 32 bits sort packed 32-bit (score,
        class) keys in two parts, scores >= 0 and the others (one read-back:
        where the parts meet), and both passes read the sorted keys in
        place; others take a stable argsort and a gather into ranked copies.
        """
        device, xp = self.device, self.xp
        n = _ranking_formulas.check_rank_arrays(scores, is_positive, sample_weight)
        positive = self._rank_positive(is_positive)
        block = min(device.block_threads, RANK_MAX_BLOCK_THREADS)
        tiles = -(-n // (block * RANK_ITEMS_PER_THREAD))
        tile_state = xp.empty((tiles, 4), dtype=np.float64)
        packed = self._packed_rank_scores(scores) if sample_weight is None else None
        exact_area = sample_weight is None and (max_fpr is None or max_fpr == 1)
        if packed is not None:
            values, packed_type = packed
            # 32-bit keys, those of scores >= 0 in front: the one read-back
            # (the split) says where the two parts to sort meet.
            keys = xp.empty(n, dtype=np.uint32)
            split_counts = self.zeros(2, np.uint64)
            self.launch(SOURCE, pack_keys_expression(packed_type),
                        min(tiles, self._grid(n)), block,
                        [values, positive, np.int64(n), keys, split_counts])
            split = int(self.to_host(split_counts)[0])
            front = xp.sort(keys[:split]) if split > 0 else None
            back = xp.sort(keys[split:]) if split < n else None
            self.launch(SOURCE, PACKED_TILES, tiles, block,
                        [front, back, np.int64(split), np.int64(n), tile_state])
            offsets, carry, totals = self._tile_scan(tile_state, tiles, 1, block)
            tile_areas, tile_twice_area = self._tile_area_arrays(tiles, exact_area=True)
            self.launch(SOURCE, PACKED_AREAS, tiles, block,
                        [front, back, np.int64(split), np.int64(n), offsets, carry, totals,
                         np.float64(1.0 if max_fpr is None else max_fpr), tile_areas,
                         tile_twice_area])
            if not exact_area:
                tile_twice_area = None
        else:
            ranked_positive = xp.empty(n, dtype=np.uint8)
            ranked_scores, ranked_weight, score_type, _ = self._gather_ranked(
                scores, positive, sample_weight, block, tiles, ranked_positive, tile_state)
            offsets, carry, totals = self._tile_scan(tile_state, tiles, 1, block)
            tile_areas, tile_twice_area = self._tile_area_arrays(tiles, exact_area=exact_area)
            self.launch(
                SOURCE, rank_areas_expression(score_type), tiles, block,
                [ranked_scores, ranked_positive, ranked_weight, np.int64(n), np.int64(tiles),
                 offsets, carry, totals, np.float64(1.0 if max_fpr is None else max_fpr),
                 tile_areas, tile_twice_area],
            )
        return self._finish(tile_areas, tile_twice_area, totals, tiles, 1, block,
                            max_fpr).reshape(2)

    def label_rank_areas(self, scores, relevant, sample_weight=None, max_fpr=None):
        """``(2, L)``: the ROC AUC and average precision of every label of
        ``(N, L)`` scores and 0/1 ``relevant`` indicators, as
        :meth:`NumpyBackend.label_rank_areas` (each column's
        :meth:`binary_rank_areas`), NaN where a label's ROC AUC is undefined.

        Every label in the same launches (kernels/ranking.cu's segments: one
        per label), LABEL_RANK_CELLS cells at a time: unweighted scores of at
        most 32 bits sort one 64-bit (label, score, class) key per cell and
        the passes read the sorted keys in place; others take a stable
        argsort of each label's scores (one call over the transposed scores)
        and a gather. The number of launches does not depend on L.
        """
        xp = self.xp
        if scores.ndim != 2 or tuple(relevant.shape) != tuple(scores.shape) or scores.size == 0:
            raise ValueError(f"scores and relevant must be (N, L) alike with N, L >= 1, got "
                             f"{tuple(scores.shape)} and {tuple(relevant.shape)}")
        n, num_labels = (int(size) for size in scores.shape)
        if sample_weight is not None and tuple(sample_weight.shape) != (n,):
            raise ValueError(f"sample_weight must have shape ({n},), got "
                             f"{tuple(sample_weight.shape)}")
        step = max(1, LABEL_RANK_CELLS // n)
        parts = [self._label_chunk_areas(scores[:, first:first + step],
                                         relevant[:, first:first + step], sample_weight,
                                         max_fpr)
                 for first in range(0, num_labels, step)]
        return parts[0] if len(parts) == 1 else xp.concatenate(parts, axis=1)

    def _label_chunk_areas(self, scores, relevant, sample_weight, max_fpr):
        device, xp = self.device, self.xp
        n, num_labels = (int(size) for size in scores.shape)
        block = min(device.block_threads, RANK_MAX_BLOCK_THREADS)
        tiles = -(-n // (block * RANK_ITEMS_PER_THREAD))
        grid = tiles * num_labels
        tile_state = xp.empty((grid, 4), dtype=np.float64)
        packed = self._packed_rank_scores(scores) if sample_weight is None else None
        exact_area = sample_weight is None and (max_fpr is None or max_fpr == 1)
        limit = np.float64(1.0 if max_fpr is None else max_fpr)
        if packed is not None:
            values, packed_type = packed
            positive = self._rank_positive(relevant)
            keys = xp.empty(n * num_labels, dtype=np.uint64)
            self.launch(SOURCE, pack_label_keys_expression(packed_type),
                        self._grid(n * num_labels), block,
                        [values, positive, np.int64(n), np.int64(num_labels), keys])
            keys = xp.sort(keys)
            self.launch(SOURCE, LABEL_KEY_TILES, grid, block,
                        [keys, np.int64(n), np.int64(tiles), tile_state])
            offsets, carry, totals = self._tile_scan(tile_state, tiles, num_labels, block)
            tile_areas, tile_twice_area = self._tile_area_arrays(grid, exact_area=True)
            self.launch(SOURCE, LABEL_KEY_AREAS, grid, block,
                        [keys, np.int64(n), np.int64(tiles), offsets, carry, totals, limit,
                         tile_areas, tile_twice_area])
            if not exact_area:
                tile_twice_area = None
        else:
            # Each label's scores and classes in a row of their own.
            label_scores = xp.ascontiguousarray(scores.T)
            positive = self._rank_positive(xp.ascontiguousarray(relevant.T))
            ranked_positive = xp.empty(n * num_labels, dtype=np.uint8)
            ranked_scores, ranked_weight, score_type, _ = self._gather_ranked(
                label_scores, positive, sample_weight, block, tiles, ranked_positive,
                tile_state)
            offsets, carry, totals = self._tile_scan(tile_state, tiles, num_labels, block)
            tile_areas, tile_twice_area = self._tile_area_arrays(grid, exact_area=exact_area)
            self.launch(
                SOURCE, rank_areas_expression(score_type), grid, block,
                [ranked_scores, ranked_positive, ranked_weight, np.int64(n), np.int64(tiles),
                 offsets, carry, totals, limit, tile_areas, tile_twice_area])
        return self._finish(tile_areas, tile_twice_area, totals, tiles, num_labels, block,
                            max_fpr)

    def _tile_scan(self, tile_state, tiles: int, segments: int, block: int):
        """rank_tile_scan: ``(offsets, carry, totals)`` of ``segments`` runs of
        ``tiles`` tile states (one block each): each tile's (positive,
        negative) sums before it and before the head of the group open at
        its first position, and each segment's totals (segments, 2)."""
        xp = self.xp
        offsets = xp.empty((segments * tiles, 2), dtype=np.float64)
        carry = xp.empty((segments * tiles, 2), dtype=np.float64)
        totals = xp.empty((segments, 2), dtype=np.float64)
        self.launch(SOURCE, TILE_SCAN, segments, block,
                    [tile_state, np.int64(tiles), offsets, carry, totals])
        return offsets, carry, totals

    def _finish(self, tile_areas, tile_twice_area, totals, tiles: int, segments: int, block: int,
                max_fpr):
        """rank_finish: ``(2, segments)`` float64, each segment's ROC AUC (NaN
        where a class has no weight; McClish's standardised partial area
        with ``max_fpr``) and average precision, from the areas pass's tile
        sums (the exact 128-bit area where ``tile_twice_area`` is given)."""
        out = self.xp.empty((2, segments), dtype=np.float64)
        partial = max_fpr is not None and max_fpr != 1
        self.launch(SOURCE, FINISH, segments, block,
                    [tile_areas, tile_twice_area, totals, np.int64(tiles), np.int32(partial),
                     np.float64(max_fpr if partial else 1.0), out])
        return out

    def _tile_area_arrays(self, rows: int, *, exact_area: bool):
        """The areas pass's outputs: per tile (ROC area, area up to max_fpr,
        average precision) and, for the exact unweighted area, its 128-bit
        sum (else None)."""
        xp = self.xp
        tile_areas = xp.empty((rows, 3), dtype=np.float64)
        return tile_areas, xp.empty((rows, 2), dtype=np.uint64) if exact_area else None

    def binary_curve_points(self, scores, is_positive, sample_weight=None):
        """As :meth:`NumpyBackend.binary_curve_points`: a stable argsort and
        pass 1 of kernels/ranking.cu (rank_gather), then rank_curve_points
        twice over the tiles (the points per tile, then the points), with
        O(tiles) scans between them and one read-back (the curve's length).
        No full-length scan on the host side. Cumulative weights are summed
        in a fixed order, not sequentially: weighted sums may differ from a
        sequential scan in their last bits."""
        xp = self.xp
        n = _ranking_formulas.check_rank_arrays(scores, is_positive, sample_weight)
        positive = self._rank_positive(is_positive)
        block = min(self.device.block_threads, RANK_MAX_BLOCK_THREADS)
        tiles = -(-n // (block * RANK_ITEMS_PER_THREAD))
        ranked_positive = xp.empty(n, dtype=np.uint8)
        tile_state = xp.empty((tiles, 4), dtype=np.float64)
        ranked_scores, ranked_weight, score_type, reversed_order = self._gather_ranked(
            scores, positive, sample_weight, block, tiles, ranked_positive, tile_state)
        weight_offsets = self._tile_scan(tile_state, tiles, 1, block)[0]
        expression = curve_points_expression(score_type)
        tile_counts = xp.empty((tiles, 3), dtype=np.int64)
        ranked = [ranked_scores, ranked_positive, ranked_weight, np.int64(n), weight_offsets]
        self.launch(SOURCE, expression, tiles, block,
                    [*ranked, None, tile_counts, None, None])
        inclusive = xp.cumsum(tile_counts, axis=0)
        count_offsets = xp.ascontiguousarray(
            xp.concatenate([xp.zeros((1, 3), dtype=np.int64), inclusive[:-1]]))
        m = int(self.to_host(inclusive[-1, 0]))
        points = xp.empty((m, 4), dtype=np.float64)
        positions = xp.empty(m, dtype=np.int64)
        self.launch(SOURCE, expression, tiles, block,
                    [*ranked, count_offsets, None, points, positions])
        # Ranked position i holds sample n - 1 - reversed_order[n - 1 - i].
        thresholds = scores[(n - 1) - reversed_order[(n - 1) - positions]]
        return (points[:, 0], points[:, 1], points[:, 2].astype(np.int64),
                points[:, 3].astype(np.int64), thresholds)

    def _rank_positive(self, is_positive):
        """The class mask as the rank kernels read it: one byte a sample, 0 or 1."""
        positive = self.xp.ascontiguousarray(native_byte_order(is_positive))
        return positive.view(np.uint8) if positive.dtype == np.bool_ else (
            positive != 0).view(np.uint8)

    def _packed_rank_scores(self, scores):
        """``(scores, C type)`` for the packed-key path, or None: float32 and
        float16 as they are, integers and bools of at most 32 bits as int32."""
        scores = native_byte_order(scores)
        name = scores.dtype.name
        if scores.dtype.kind in "iub" and scores.dtype.itemsize <= 4 and name != "uint32":
            scores, name = scores.astype(np.int32, copy=False), "int32"
        if name not in PACKED_RANK_TYPES:
            return None
        scores = self.xp.ascontiguousarray(scores)
        return (scores.view(np.uint16) if name == "float16" else scores), PACKED_RANK_TYPES[name]

    def _gather_ranked(self, scores, positive, sample_weight, block, tiles, ranked_positive,
                       tile_state):
        """Pass 1 after a stable argsort of ``(N,)`` scores, or of each row of
        ``(L, N)`` scores (a segment per row, ``positive`` alike, the
        ``(N,)`` weights shared): ``(ranked scores, ranked weights, C type,
        the argsort of the reversed scores)``, flat."""
        xp = self.xp
        scores, kernel_scores, score_type = self._rank_scores(scores)
        n = int(scores.shape[-1])
        segments = scores.size // n
        weight, weight_type = None, "mg::unit_weight"
        if sample_weight is not None:
            weight = xp.ascontiguousarray(sample_weight, dtype=np.float64)
            weight_type = "double"
        # Stable ascending order of the reversed scores: read backwards, a
        # stable descending order (ties in input order, as scikit-learn's).
        # float16 is sorted as its exact float32 widening (same order and
        # ties): a type every sort of CuPy's takes.
        keys = scores.astype(np.float32) if scores.dtype == np.float16 else scores
        reversed_order = xp.ascontiguousarray(_ranking_formulas.stable_argsort(
            xp.flip(keys, axis=-1), xp).astype(np.int64, copy=False))
        ranked_scores = xp.empty(scores.size, dtype=kernel_scores.dtype)
        ranked_weight = None if weight is None else xp.empty(scores.size, dtype=np.float64)
        self.launch(
            SOURCE, rank_gather_expression(score_type, weight_type), segments * tiles, block,
            [kernel_scores, positive, weight, reversed_order, np.int64(n), np.int64(tiles),
             ranked_scores, ranked_positive, ranked_weight, tile_state],
        )
        return ranked_scores, ranked_weight, score_type, reversed_order
