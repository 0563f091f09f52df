// Exact ROC AUC and average precision of one binary problem, or of every
// label of a multilabel one, after a sort (and, below, the points of its ROC
// and precision-recall curves, and the classes of its labels): the
// tie-aware segmented scans of metrics_gpu/_formulas/ranking.py (the
// reference) as two passes over tiles of blockDim.x * kRankItems ranked
// positions, with a scan of the tiles between them.
//
// The host sorts first, one of three ways:
// * unweighted scores of at most 32 bits of one problem: rank_pack_keys
//   packs (score bits, class) into 32-bit keys split by sign, the host sorts
//   the two parts (CUB radix sort), and both passes read the sorted keys in
//   place (rank_packed_tiles, rank_packed_areas);
// * unweighted scores of at most 32 bits of L labels: rank_pack_label_keys
//   packs (label, score bits, class) into 64-bit keys, label-major, the host
//   sorts them once, and both passes read them in place (rank_label_key_*);
// * otherwise `reversed_order` is the stable ascending argsort of the
//   reversed scores (of each label's), so descending position i holds
//   sample n - 1 - reversed_order[n - 1 - i], ties in input order, and
//   pass 1 is rank_gather, which writes ranked copies for pass 2.
//
// A problem of L labels is L segments of n positions, each tiled on its
// own: the grid is L * tiles_per_segment blocks (SegmentTile), so the
// launches do not depend on L.
//
// 1. Pass 1 writes per tile the positive and negative weight sums and the
//    prefix sums before the tile's last group head (-1 when no tie group
//    starts in the tile). A group head is a position whose score differs
//    from the one before it.
// 2. rank_tile_scan (one block per segment) scans the tile sums into
//    exclusive offsets and finds, for each tile, the sums before the head of
//    the group that is open at its first position (the last head in an
//    earlier tile), and the segment's totals.
// 3. Pass 2 (rank_tile_areas): a segmented scan per tile (each thread's
//    kRankItems consecutive positions, then the block) gives every position
//    the cumulative weights T, F and those at its group's head; each group's
//    last position adds its trapezoid (F - F_head)(T + T_head) / 2, its
//    partial-area piece up to max_fpr, and its precision step
//    (T - T_head) T / (T + F), all in normalised rates. Per-tile sums go
//    to tile_areas. Unweighted, the full ROC area is also summed exactly,
//    in 128-bit integers of counts.
// 4. rank_finish (one block per segment) adds the tiles' sums and divides
//    the exact area once by 2 P Q: each segment's ROC AUC and average
//    precision.
//
// Sums are float64 in a fixed order (no atomics): counts are exact up to
// 2^53, and a run is reproducible. Scores compare as their values (-0 == +0;
// the host has rejected NaN).
#include "common.cuh"

namespace mg {

constexpr int kRankBlockThreads = 256;  // the launch bound (the host launches no more)
constexpr int kRankItems = 8;           // positions per thread (the host's tile size)
constexpr int kRankMaxTile = kRankBlockThreads * kRankItems;

// Scores compare as values: half patterns widened; integers as themselves.
__device__ __forceinline__ long long rank_value(long long x) { return x; }
__device__ __forceinline__ double rank_value(double x) { return x; }
__device__ __forceinline__ float rank_value(float x) { return x; }
__device__ __forceinline__ float rank_value(float16_bits x) { return widen(x); }
__device__ __forceinline__ unsigned int rank_value(unsigned int x) { return x; }  // packed bits

template <typename S>
__device__ __forceinline__ bool same_score(S a, S b) {
  return rank_value(a) == rank_value(b);
}
// Halves are equal as floats where their bits are, but for NaN (never equal)
// and +0 / -0 (equal): compared so, without widening them.
__device__ __forceinline__ bool same_score(float16_bits a, float16_bits b) {
  const unsigned int x = a.bits, y = b.bits;
  if (x == y) return (x & 0x7fffu) <= 0x7c00u;
  return ((x | y) & 0x7fffu) == 0u;
}

// One ranked position as pass 1 reads it.
template <typename S>
struct RankedItem {
  S score;
  unsigned char positive;
  double weight;
};

// Pass 1 after an argsort: gathers ranked position i's score, class and weight.
template <typename S, typename W>
struct GatheredRanks {
  const S* scores;
  const unsigned char* positive;
  const W* weight;
  const int64* reversed_order;
  int64 n;
  __device__ __forceinline__ RankedItem<S> operator()(int64 i) const {
    const int64 source = n - 1 - reversed_order[n - 1 - i];
    return {scores[source], (unsigned char)(positive[source] != 0), weight_value(weight, source)};
  }
};

// Pass 1 on the sorted packed keys of rank_pack_keys: the score's
// descending bits (compared as bits; the top bit from the position), the
// class bit, weight 1.
struct PackedRanks {
  const unsigned int* front_keys;
  const unsigned int* back_keys;
  int64 split;
  __device__ __forceinline__ RankedItem<unsigned int> operator()(int64 i) const {
    const bool back = i >= split;
    const unsigned int key = back ? back_keys[i - split] : front_keys[i];
    return {(key >> 1) | (back ? 0x80000000u : 0u), (unsigned char)(key & 1u), 1.0};
  }
};

// Which segment (a label of a multilabel problem; 0 for one binary problem)
// and which of its tiles this block reads: the grid is segments *
// tiles_per_segment blocks, every segment n positions long.
// A 32-bit division (gridDim.x < 2^31): a 64-bit one is a called routine,
// with its registers and stack.
struct SegmentTile {
  int64 segment, tile;
};
__device__ __forceinline__ SegmentTile segment_tile(int64 tiles_per_segment) {
  const unsigned int segment = blockIdx.x / (unsigned int)tiles_per_segment;
  return {(int64)segment, (int64)(blockIdx.x - segment * (unsigned int)tiles_per_segment)};
}

// Pass 2 on the ranked arrays of rank_gather.
template <typename S>
struct StoredRanks {
  const S* scores;
  const unsigned char* positive;
  const double* weight;  // null: unweighted
  __device__ __forceinline__ RankedItem<S> operator()(int64 i) const {
    return {scores[i], positive[i], weight != nullptr ? weight[i] : 1.0};
  }
};

// Pass 1: reads each ranked position of tile `tile` (strided, so that reads
// and writes are coalesced), writes it to the ranked arrays if they are
// given (null: the areas read the ranks again themselves), and writes the
// tile's state to `state`: (positive sum, negative sum, positive and
// negative sums before the tile's last group head, or -1 for none).
template <typename S, typename Ranks>
__device__ void rank_tile_state(const Ranks& ranks, int64 n, int64 tile, S* ranked_scores,
                                unsigned char* ranked_positive, double* ranked_weight,
                                double* state) {
  __shared__ S tile_scores[kRankMaxTile];
  __shared__ double scratch[4 * kWarpSize];  // block_sum
  __shared__ int last_head;
  const int64 start = tile * blockDim.x * kRankItems;
  if (threadIdx.x == 0) last_head = -1;

  // A position's weight and, as a bit of a mask, whether it is positive
  // (not a positive and a negative weight each: 16 doubles through the
  // barriers; the packed keys' weights are all 1, which the compiler sees).
  double weight[kRankItems];
  unsigned int positive = 0u;
#pragma unroll
  for (int k = 0; k < kRankItems; ++k) {
    const int j = k * blockDim.x + threadIdx.x;
    const int64 i = start + j;
    weight[k] = 0.0;
    if (i >= n) continue;
    const RankedItem<S> item = ranks(i);
    if (ranked_scores != nullptr) {
      ranked_scores[i] = item.score;
      ranked_positive[i] = item.positive;
      if (ranked_weight != nullptr) ranked_weight[i] = item.weight;
    }
    tile_scores[j] = item.score;
    weight[k] = item.weight;
    if (item.positive) positive |= 1u << k;
  }
  // The score ranked before the tile, read again (one per tile).
  const S before_tile = start > 0 ? ranks(start - 1).score : S();
  __syncthreads();

  int my_last_head = -1;
#pragma unroll
  for (int k = 0; k < kRankItems; ++k) {
    const int j = k * blockDim.x + threadIdx.x;
    const int64 i = start + j;
    if (i >= n) continue;
    const bool head = i == 0 || !same_score(j > 0 ? tile_scores[j - 1] : before_tile,
                                            tile_scores[j]);
    if (head) my_last_head = j;  // j grows with k
  }
  atomicMax(&last_head, my_last_head);
  __syncthreads();

  double sums[4] = {0.0, 0.0, 0.0, 0.0};
#pragma unroll
  for (int k = 0; k < kRankItems; ++k) {
    const int j = k * blockDim.x + threadIdx.x;
    const bool is_positive = (positive & (1u << k)) != 0u;
    const double positive_weight = is_positive ? weight[k] : 0.0;
    const double negative_weight = is_positive ? 0.0 : weight[k];
    sums[0] += positive_weight;
    sums[1] += negative_weight;
    if (j < last_head) {
      sums[2] += positive_weight;
      sums[3] += negative_weight;
    }
  }
  block_sum(sums, scratch);
  if (threadIdx.x == 0) {
    state[0] = sums[0];
    state[1] = sums[1];
    state[2] = last_head >= 0 ? sums[2] : -1.0;
    state[3] = last_head >= 0 ? sums[3] : -1.0;
  }
}

// scores, positive, reversed_order: segments of n (each segment's own
// argsort); weight: n, the same for every segment. tile_state: gridDim.x rows.
template <typename S, typename W>
__global__ void __launch_bounds__(kRankBlockThreads)
rank_gather(const S* scores, const unsigned char* positive, const W* weight,
            const int64* reversed_order, int64 n, int64 tiles_per_segment, S* ranked_scores,
            unsigned char* ranked_positive, double* ranked_weight, double* tile_state) {
  const SegmentTile at = segment_tile(tiles_per_segment);
  const int64 base = at.segment * n;
  const GatheredRanks<S, W> ranks = {scores + base, positive + base, weight,
                                     reversed_order + base, n};
  rank_tile_state(ranks, n, at.tile, ranked_scores + base, ranked_positive + base,
                  ranked_weight != nullptr ? ranked_weight + base : ranked_weight,
                  tile_state + 4 * (int64)blockIdx.x);
}

// -- the packed-key path: unweighted scores of at most 32 bits ------------------
//
// A key is the score's bits in descending order, then the class bit: a sort
// of the keys alone (CUB radix sort, no index payload) ranks the scores, and
// both passes read every ranked score and class from the sorted keys
// instead of gathering them. Within a tie group the keys order the classes, which unweighted
// (integer) sums do not see. -0 is packed as +0, so equal scores have equal
// bits.
//
// The 33 bits fit 32 by leaving out the top one (the sign: 0 for a score
// >= 0, which ranks first): rank_pack_keys writes the keys of scores >= 0 to
// the front of `keys` and the others to its back, in no particular order,
// and counts both. The host reads the front count back (the split), sorts
// the two parts as 32-bit keys (half the radix passes and half the bytes of
// 64-bit keys), and PackedRanks puts the top bit back by position.

__device__ __forceinline__ unsigned int ascending_bits(float x) {
  const unsigned int u = __float_as_uint(x == 0.0f ? 0.0f : x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ unsigned int ascending_bits(float16_bits x) {
  return ascending_bits(widen(x));
}
__device__ __forceinline__ unsigned int ascending_bits(int x) {
  return (unsigned int)x ^ 0x80000000u;
}

// The block's exclusive prefix sum of `value` (in thread order) and, in
// *total, the block's sum. Ends with the block synchronised.
__device__ __forceinline__ unsigned int block_exclusive_count(unsigned int value,
                                                              unsigned int* warp_totals,
                                                              unsigned int* total) {
  const unsigned int lane = lane_index();
  const unsigned int warp = threadIdx.x / kWarpSize;
  unsigned int inclusive = value;
  for (unsigned int offset = 1; offset < kWarpSize; offset <<= 1) {
    const unsigned int other = __shfl_up_sync(kFullWarp, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  if (lane == kWarpSize - 1) warp_totals[warp] = inclusive;
  __syncthreads();
  unsigned int before = 0u, all = 0u;
  for (unsigned int w = 0; w < blockDim.x / kWarpSize; ++w) {
    before += w < warp ? warp_totals[w] : 0u;
    all += warp_totals[w];
  }
  *total = all;
  return before + inclusive - value;
}

// split_counts: (keys written to the front, keys written to the back),
// zeroed by the host. Per tile of blockDim.x * kRankItems scores, one atomic
// a side reserves the block's places; the tile's keys are staged in shared
// memory, front keys then back keys, and written out coalesced.
template <typename S>
__global__ void __launch_bounds__(kRankBlockThreads)
rank_pack_keys(const S* scores, const unsigned char* positive, int64 n, unsigned int* keys,
               unsigned long long* split_counts) {
  __shared__ unsigned int tile_keys[kRankMaxTile];
  __shared__ unsigned int warp_totals[kRankBlockThreads / kWarpSize];
  __shared__ unsigned long long bases[2];
  const int64 tile = (int64)blockDim.x * kRankItems;
  for (int64 start = (int64)blockIdx.x * tile; start < n; start += (int64)gridDim.x * tile) {
    unsigned int item_keys[kRankItems];
    unsigned int back_items = 0u;  // bit k: item k goes to the back
    unsigned int counts = 0u;      // front keys in the low 16 bits, back keys above
#pragma unroll
    for (int k = 0; k < kRankItems; ++k) {
      const int64 i = start + k * blockDim.x + threadIdx.x;
      item_keys[k] = 0u;
      if (i >= n) continue;
      const unsigned int descending = ~ascending_bits(scores[i]);
      item_keys[k] = (descending << 1) | (unsigned int)(positive[i] != 0);
      const unsigned int back = descending >> 31;
      back_items |= back << k;
      counts += back ? 0x10000u : 1u;
    }
    unsigned int total;
    const unsigned int before = block_exclusive_count(counts, warp_totals, &total);
    const unsigned int front_total = total & 0xffffu, back_total = total >> 16;
    if (threadIdx.x == 0) {
      bases[0] = atomicAdd(split_counts, (unsigned long long)front_total);
      bases[1] = atomicAdd(split_counts + 1, (unsigned long long)back_total);
    }
    unsigned int front_slot = before & 0xffffu, back_slot = front_total + (before >> 16);
#pragma unroll
    for (int k = 0; k < kRankItems; ++k) {
      const int64 i = start + k * blockDim.x + threadIdx.x;
      if (i >= n) continue;
      tile_keys[(back_items >> k) & 1u ? back_slot++ : front_slot++] = item_keys[k];
    }
    __syncthreads();
    const int64 front_base = (int64)bases[0], back_base = (int64)bases[1];
    for (unsigned int j = threadIdx.x; j < front_total; j += blockDim.x) {
      keys[front_base + j] = tile_keys[j];
    }
    for (unsigned int j = threadIdx.x; j < back_total; j += blockDim.x) {
      keys[n - 1 - (back_base + j)] = tile_keys[front_total + j];
    }
    __syncthreads();  // the tile's shared arrays are reused
  }
}

// Pass 1 of the packed keys: front_keys, the sorted keys of scores >= 0
// (split of them), back_keys the sorted others (n - split), either null when
// empty. Only the tile states are written: rank_packed_areas reads the keys
// again (4 bytes a position), not ranked copies of them.
__global__ void __launch_bounds__(kRankBlockThreads)
rank_packed_tiles(const unsigned int* front_keys, const unsigned int* back_keys, int64 split,
                  int64 n, double* tile_state) {
  const PackedRanks ranks = {front_keys, back_keys, split};
  rank_tile_state(ranks, n, (int64)blockIdx.x, (unsigned int*)nullptr,
                  (unsigned char*)nullptr, (double*)nullptr, tile_state + 4 * (int64)blockIdx.x);
}

// -- multilabel: every label's problem in one sort -----------------------------------
//
// Unweighted scores of at most 32 bits of an (n, labels) matrix: one 64-bit
// key per cell, (label, descending score bits, class) from the top bit
// down, written label-major (segment l holds label l's n keys), so that one
// sort of the keys alone ranks every label's scores within its segment.
// The passes then read the sorted keys in place (LabelKeyRanks), the
// segments' tiles in one grid. Labels below 2^31.

template <typename S>
__global__ void __launch_bounds__(kRankBlockThreads)
rank_pack_label_keys(const S* scores, const unsigned char* positive, int64 n, int64 labels,
                     unsigned long long* keys) {
  const int64 cells = n * labels;
  for (int64 cell = (int64)blockIdx.x * blockDim.x + threadIdx.x; cell < cells;
       cell += grid_threads()) {
    const int64 row = cell / labels, label = cell - row * labels;
    const unsigned long long descending = ~ascending_bits(scores[cell]);
    keys[label * n + row] = ((unsigned long long)label << 33) | (descending << 1) |
                            (unsigned long long)(positive[cell] != 0);
  }
}

// A segment's sorted keys: the score's descending bits (compared as bits),
// the class bit, weight 1.
struct LabelKeyRanks {
  const unsigned long long* keys;
  __device__ __forceinline__ RankedItem<unsigned int> operator()(int64 i) const {
    const unsigned long long key = keys[i];
    return {(unsigned int)(key >> 1), (unsigned char)(key & 1ull), 1.0};
  }
};

__global__ void __launch_bounds__(kRankBlockThreads)
rank_label_key_tiles(const unsigned long long* keys, int64 n, int64 tiles_per_segment,
                     double* tile_state) {
  const SegmentTile at = segment_tile(tiles_per_segment);
  const LabelKeyRanks ranks = {keys + at.segment * n};
  rank_tile_state(ranks, n, at.tile, (unsigned int*)nullptr, (unsigned char*)nullptr,
                  (double*)nullptr, tile_state + 4 * (int64)blockIdx.x);
}

// A run of positions: its weight sums, and the sums before its last group
// head (relative to the run's start) if a group starts in it.
struct RankRun {
  double positive, negative;
  int has_head;
  double head_positive, head_negative;
};

// `earlier` then `later`: sums add; the last head is the later run's if it
// has one. Associative, so any bracketing gives the same value up to the
// rounding of the sums.
__device__ __forceinline__ RankRun combine(const RankRun& earlier, const RankRun& later) {
  RankRun out;
  out.positive = earlier.positive + later.positive;
  out.negative = earlier.negative + later.negative;
  out.has_head = earlier.has_head | later.has_head;
  out.head_positive = later.has_head ? earlier.positive + later.head_positive : earlier.head_positive;
  out.head_negative = later.has_head ? earlier.negative + later.head_negative : earlier.head_negative;
  return out;
}

__device__ __forceinline__ RankRun shuffle_up(const RankRun& run, unsigned int delta) {
  RankRun out;
  out.positive = __shfl_up_sync(kFullWarp, run.positive, delta);
  out.negative = __shfl_up_sync(kFullWarp, run.negative, delta);
  out.has_head = __shfl_up_sync(kFullWarp, run.has_head, delta);
  out.head_positive = __shfl_up_sync(kFullWarp, run.head_positive, delta);
  out.head_negative = __shfl_up_sync(kFullWarp, run.head_negative, delta);
  return out;
}

// The runs of the threads before this one in the block (exclusive scan):
// Kogge-Stone in the warp, then the warps before in index order.
__device__ __forceinline__ RankRun block_exclusive_runs(RankRun run, RankRun* warp_totals) {
  const unsigned int lane = lane_index();
  const unsigned int warp = threadIdx.x / kWarpSize;
  const RankRun empty = {0.0, 0.0, 0, 0.0, 0.0};
  RankRun inclusive = run;
  for (unsigned int offset = 1; offset < kWarpSize; offset <<= 1) {
    RankRun other = shuffle_up(inclusive, offset);
    if (lane >= offset) inclusive = combine(other, inclusive);
  }
  RankRun exclusive = shuffle_up(inclusive, 1);
  if (lane == 0) exclusive = empty;
  if (lane == kWarpSize - 1) warp_totals[warp] = inclusive;
  __syncthreads();
  RankRun before = empty;
  for (unsigned int w = 0; w < warp; ++w) before = combine(before, warp_totals[w]);
  return combine(before, exclusive);
}

// The block's 128-bit sum of `value`, valid in thread 0: a warp butterfly
// with carries, then the warps in index order (fixed order; integer sums are
// exact in any). warp_totals: a U128 a warp. Every thread must call it.
__device__ __forceinline__ U128 block_sum_u128(U128 value, U128* warp_totals) {
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    const uint64 low = __shfl_xor_sync(kFullWarp, value.low, offset);
    const uint64 high = __shfl_xor_sync(kFullWarp, value.high, offset);
    value.low += low;
    value.high += high + (value.low < low ? 1ull : 0ull);
  }
  if (lane_index() == 0) warp_totals[threadIdx.x / kWarpSize] = value;
  __syncthreads();
  U128 total = warp_totals[0];
  for (unsigned int w = 1; w < blockDim.x / kWarpSize; ++w) {
    const U128 part = warp_totals[w];
    total.low += part.low;
    total.high += part.high + (total.low < part.low ? 1ull : 0ull);
  }
  return total;
}

// Between the passes: the scan of one segment's tile states per block
// (gridDim.x segments of tiles_per_segment tiles), in fixed order: chunks of
// blockDim.x tiles one after another, a block scan of RankRuns in each.
// Writes each tile's (positive, negative) sums before it (tile_offsets), the
// sums before the head of the group open at its first position (tile_carry:
// the last head of an earlier tile; tile 0 opens with a head), and the
// segment's totals. One launch for any number of tiles and segments, no
// read-back.
__global__ void __launch_bounds__(kRankBlockThreads)
rank_tile_scan(const double* tile_state, int64 tiles_per_segment, double* tile_offsets,
               double* tile_carry, double* totals) {
  __shared__ RankRun warp_totals[kRankBlockThreads / kWarpSize];
  __shared__ RankRun chunk_total;
  const RankRun empty = {0.0, 0.0, 0, 0.0, 0.0};
  const int64 first = (int64)blockIdx.x * tiles_per_segment;
  RankRun before_chunk = empty;
  for (int64 chunk = 0; chunk < tiles_per_segment; chunk += blockDim.x) {
    const int64 tile = chunk + threadIdx.x;
    RankRun run = empty;
    if (tile < tiles_per_segment) {
      const double* state = tile_state + 4 * (first + tile);
      run = {state[0], state[1], state[2] >= 0.0 ? 1 : 0, state[2], state[3]};
    }
    const RankRun before = combine(before_chunk, block_exclusive_runs(run, warp_totals));
    if (tile < tiles_per_segment) {
      double* offset = tile_offsets + 2 * (first + tile);
      double* carry = tile_carry + 2 * (first + tile);
      offset[0] = before.positive;
      offset[1] = before.negative;
      carry[0] = before.has_head ? before.head_positive : 0.0;
      carry[1] = before.has_head ? before.head_negative : 0.0;
    }
    if (threadIdx.x == blockDim.x - 1) chunk_total = combine(before, run);
    __syncthreads();
    before_chunk = chunk_total;
    __syncthreads();  // warp_totals and chunk_total are written again
  }
  if (threadIdx.x == 0) {
    totals[2 * (int64)blockIdx.x] = before_chunk.positive;
    totals[2 * (int64)blockIdx.x + 1] = before_chunk.negative;
  }
}

// Pass 2 over tile `tile` of a segment of n ranked positions, read through
// `ranks` (the ranked arrays of pass 1, or the sorted keys in place).
// offset, carry: the tile's (positive, negative) sums before it and before
// the head of the group open at its first position; totals: the segment's
// (positive, negative). Writes the tile's (ROC area, ROC area up to max_fpr,
// average precision) to tile_areas and, unweighted (else null), the 128-bit
// integer sum of its (F - F_head)(T + T_head) in counts (low word, high
// word) to tile_twice_area: twice the ROC area times P Q, exact; the host
// adds the rows exactly and divides once.
template <typename S, typename Ranks>
__device__ void rank_tile_areas(const Ranks& ranks, int64 n, int64 tile, const double* offset,
                                const double* carry, const double* totals, double max_fpr,
                                double* tile_areas, unsigned long long* tile_twice_area) {
  __shared__ RankRun warp_totals[kRankBlockThreads / kWarpSize];
  __shared__ double scratch[3 * kWarpSize];  // block_sum
  __shared__ U128 warp_twice_areas[kRankBlockThreads / kWarpSize];
  const int64 start = tile * blockDim.x * kRankItems;
  const int64 first = start + (int64)threadIdx.x * kRankItems;  // blocked: a thread's run

  // Whether each position is positive, opens or closes its tie group: bits
  // of three masks through the block scan, and the weights read again after
  // it (from cache), rather than 16 doubles and 16 flags held (96 registers).
  // (Reading each score once, a group closing where the next opens, took 64
  // registers and a spill on sm_90.)
  unsigned int positive = 0u, head = 0u, tail = 0u;
  RankRun run = {0.0, 0.0, 0, 0.0, 0.0};
#pragma unroll
  for (int k = 0; k < kRankItems; ++k) {
    const int64 i = first + k;
    if (i >= n) continue;
    const RankedItem<S> item = ranks(i);
    const bool opens = i == 0 || !same_score(ranks(i - 1).score, item.score);
    if (opens) head |= 1u << k;
    if (i == n - 1 || !same_score(ranks(i + 1).score, item.score)) tail |= 1u << k;
    const double w = item.weight;
    const bool is_positive = item.positive != 0;
    if (is_positive) positive |= 1u << k;
    if (opens) {
      run.has_head = 1;
      run.head_positive = run.positive;
      run.head_negative = run.negative;
    }
    run.positive += is_positive ? w : 0.0;
    run.negative += is_positive ? 0.0 : w;
  }
  const RankRun before = block_exclusive_runs(run, warp_totals);

  double cumulative_positive = offset[0] + before.positive;
  double cumulative_negative = offset[1] + before.negative;
  double head_positive = before.has_head ? offset[0] + before.head_positive : carry[0];
  double head_negative = before.has_head ? offset[1] + before.head_negative : carry[1];
  const double total_positive = totals[0], total_negative = totals[1];
  // Rates of an undefined total are 0 here; the host returns NaN for them.
  const bool tpr_defined = total_positive > 0.0, fpr_defined = total_negative > 0.0;

  double areas[3] = {0.0, 0.0, 0.0};
  U128 twice_area = {0ull, 0ull};  // counts are exact integers in doubles (< 2^53)
#pragma unroll
  for (int k = 0; k < kRankItems; ++k) {
    if (head & (1u << k)) {
      head_positive = cumulative_positive;
      head_negative = cumulative_negative;
    }
    const int64 i = first + k;
    const double w = i >= n ? 0.0 : ranks(i).weight;
    const bool is_positive = (positive & (1u << k)) != 0u;
    cumulative_positive += is_positive ? w : 0.0;
    cumulative_negative += is_positive ? 0.0 : w;
    if (!(tail & (1u << k))) continue;
    if (tile_twice_area != nullptr) {
      add_product(twice_area, (uint64)(cumulative_negative - head_negative),
                  (uint64)(cumulative_positive + head_positive));
    }
    // Division, not a reciprocal's product: the reference's rounding.
    const double x0 = fpr_defined ? head_negative / total_negative : 0.0;
    const double x1 = fpr_defined ? cumulative_negative / total_negative : 0.0;
    const double y0 = tpr_defined ? head_positive / total_positive : 0.0;
    const double y1 = tpr_defined ? cumulative_positive / total_positive : 0.0;
    const double trapezoid = (x1 - x0) * (y1 + y0) / 2;
    areas[0] += trapezoid;
    if (x1 <= max_fpr) {
      areas[1] += trapezoid;
    } else if (x0 < max_fpr) {
      // The segment that crosses max_fpr, cut there (linear interpolation).
      const double y_cut = (y1 - y0) / (x1 - x0) * (max_fpr - x0) + y0;
      areas[1] += (max_fpr - x0) * (y0 + y_cut) / 2;
    }
    const double predicted = cumulative_positive + cumulative_negative;
    const double precision = predicted > 0.0 ? cumulative_positive / predicted : 0.0;
    areas[2] += (y1 - y0) * precision;
  }
  block_sum(areas, scratch);
  if (threadIdx.x == 0) {
    tile_areas[0] = areas[0];
    tile_areas[1] = areas[1];
    tile_areas[2] = areas[2];
  }
  if (tile_twice_area != nullptr) {  // the same for every thread
    const U128 total = block_sum_u128(twice_area, warp_twice_areas);
    if (threadIdx.x == 0) {
      tile_twice_area[0] = total.low;
      tile_twice_area[1] = total.high;
    }
  }
}

// The ranked arrays of rank_gather (segments of n). tile_offsets,
// tile_carry: gridDim.x rows of 2 (rank_tile_scan); totals: a row of 2 per
// segment; tile_areas: gridDim.x rows of 3; tile_twice_area: gridDim.x rows
// of 2 words, or null (weighted).
template <typename S>
__global__ void __launch_bounds__(kRankBlockThreads)
rank_areas(const S* ranked_scores, const unsigned char* ranked_positive,
           const double* ranked_weight, int64 n, int64 tiles_per_segment,
           const double* tile_offsets, const double* tile_carry, const double* totals,
           double max_fpr, double* tile_areas, unsigned long long* tile_twice_area) {
  const SegmentTile at = segment_tile(tiles_per_segment);
  const int64 base = at.segment * n, row = (int64)blockIdx.x;
  const StoredRanks<S> ranks = {ranked_scores + base, ranked_positive + base,
                                ranked_weight != nullptr ? ranked_weight + base : ranked_weight};
  rank_tile_areas<S>(ranks, n, at.tile, tile_offsets + 2 * row, tile_carry + 2 * row,
                     totals + 2 * at.segment, max_fpr, tile_areas + 3 * row,
                     tile_twice_area != nullptr ? tile_twice_area + 2 * row : tile_twice_area);
}

// The sorted packed keys of one binary problem, read in place (unweighted).
__global__ void __launch_bounds__(kRankBlockThreads)
rank_packed_areas(const unsigned int* front_keys, const unsigned int* back_keys, int64 split,
                  int64 n, const double* tile_offsets, const double* tile_carry,
                  const double* totals, double max_fpr, double* tile_areas,
                  unsigned long long* tile_twice_area) {
  const PackedRanks ranks = {front_keys, back_keys, split};
  const int64 row = (int64)blockIdx.x;
  rank_tile_areas<unsigned int>(ranks, n, row, tile_offsets + 2 * row, tile_carry + 2 * row,
                                totals, max_fpr, tile_areas + 3 * row,
                                tile_twice_area + 2 * row);
}

// The sorted label keys of rank_pack_label_keys, read in place (unweighted).
__global__ void __launch_bounds__(kRankBlockThreads)
rank_label_key_areas(const unsigned long long* keys, int64 n, int64 tiles_per_segment,
                     const double* tile_offsets, const double* tile_carry,
                     const double* totals, double max_fpr, double* tile_areas,
                     unsigned long long* tile_twice_area) {
  const SegmentTile at = segment_tile(tiles_per_segment);
  const LabelKeyRanks ranks = {keys + at.segment * n};
  const int64 row = (int64)blockIdx.x;
  rank_tile_areas<unsigned int>(ranks, n, at.tile, tile_offsets + 2 * row,
                                tile_carry + 2 * row, totals + 2 * at.segment, max_fpr,
                                tile_areas + 3 * row, tile_twice_area + 2 * row);
}

// The end of the areas: per segment (a block each), the tiles' sums added
// in fixed order, the exact unweighted ROC area (tile_twice_area, else
// null: the float sum) divided once by 2 P Q, McClish's standardised
// partial area where `partial`, and NaN / 0 where a class has no weight, as
// metrics_gpu._formulas.ranking.binary_rank_areas (the reference) ends.
// out: (2, gridDim.x): ROC AUC of every segment, then average precision.
// One launch instead of a dozen array operations on the host's side.
__global__ void __launch_bounds__(kRankBlockThreads)
rank_finish(const double* tile_areas, const unsigned long long* tile_twice_area,
            const double* totals, int64 tiles_per_segment, int partial, double max_fpr,
            double* out) {
  __shared__ double scratch[3 * kWarpSize];  // block_sum
  __shared__ U128 warp_twice_areas[kRankBlockThreads / kWarpSize];
  const int64 segment = (int64)blockIdx.x, first = segment * tiles_per_segment;
  double sums[3] = {0.0, 0.0, 0.0};
  U128 twice_area = {0ull, 0ull};
  for (int64 tile = threadIdx.x; tile < tiles_per_segment; tile += blockDim.x) {
    const double* row = tile_areas + 3 * (first + tile);
    sums[0] += row[0];
    sums[1] += row[1];
    sums[2] += row[2];
    if (tile_twice_area != nullptr) {  // 128-bit sums: carries from the low word
      const uint64 low = tile_twice_area[2 * (first + tile)];
      twice_area.low += low;
      twice_area.high += tile_twice_area[2 * (first + tile) + 1] + (twice_area.low < low ? 1ull : 0ull);
    }
  }
  block_sum(sums, scratch);
  if (tile_twice_area != nullptr) {  // the same for every thread
    twice_area = block_sum_u128(twice_area, warp_twice_areas);
  }
  if (threadIdx.x != 0) return;
  const double positive = totals[2 * segment], negative = totals[2 * segment + 1];
  double auc = sums[0];
  if (tile_twice_area != nullptr) {
    // Two roundings: the high word times 2^64, then the sum.
    const double twice = (double)twice_area.high * 18446744073709551616.0 +
                         (double)twice_area.low;
    const double pairs = positive * negative;
    auc = pairs > 0.0 ? twice / (2.0 * pairs) : 0.0;
  }
  if (partial) {
    const double min_area = 0.5 * max_fpr * max_fpr, max_area = max_fpr;
    auc = 0.5 * (1.0 + (sums[1] - min_area) / (max_area - min_area));
  }
  const double not_a_number = __longlong_as_double(0x7ff8000000000000ll);
  out[segment] = positive > 0.0 && negative > 0.0 ? auc : not_a_number;
  out[gridDim.x + segment] = positive > 0.0 ? (sums[2] > 0.0 ? sums[2] : 0.0) : 0.0;
}

// -- curves: one point per tie group -----------------------------------------
//
// roc_curve and precision_recall_curve keep one point per distinct score:
// the cumulative (negative, positive) weights and counts of samples of
// non-zero weight at each tie group's last ranked position
// (metrics_gpu._formulas.ranking.binary_curve_points is the reference). rank_curve_points runs twice over the tiles of
// rank_areas, after pass 1: with `points` null each tile writes its
// (points, positive samples, negative samples) to tile_counts; the host
// scans those (O(tiles)) into count_offsets and reads the total (the
// curve's length: one sync); then each tile writes its points at their
// places, from the same scans as rank_areas but no segments: a thread's
// kRankItems consecutive positions, the block's exclusive sums before it,
// the tile's offsets before the block.

// Exclusive sums of N values over the block's threads, in thread order
// (warp shuffles, then the warps before in index order): fixed order, so
// the same bits every run. warp_totals: N * kWarpSize doubles.
template <int N>
__device__ __forceinline__ void block_exclusive_sums(double (&values)[N], double* warp_totals) {
  const unsigned int lane = lane_index();
  const unsigned int warp = threadIdx.x / kWarpSize;
  double inclusive[N];
#pragma unroll
  for (int v = 0; v < N; ++v) inclusive[v] = values[v];
  for (unsigned int offset = 1; offset < kWarpSize; offset <<= 1) {
#pragma unroll
    for (int v = 0; v < N; ++v) {
      const double other = __shfl_up_sync(kFullWarp, inclusive[v], offset);
      if (lane >= offset) inclusive[v] += other;
    }
  }
#pragma unroll
  for (int v = 0; v < N; ++v) {
    const double exclusive = __shfl_up_sync(kFullWarp, inclusive[v], 1);
    values[v] = lane == 0 ? 0.0 : exclusive;
    if (lane == kWarpSize - 1) warp_totals[v * kWarpSize + warp] = inclusive[v];
  }
  __syncthreads();
#pragma unroll
  for (int v = 0; v < N; ++v) {
    double before = 0.0;
    for (unsigned int w = 0; w < warp; ++w) before += warp_totals[v * kWarpSize + w];
    values[v] += before;
  }
}

// tile_offsets: gridDim.x rows of (positive, negative) weights before the
// tile (_rank_tile_scan); count_offsets: gridDim.x rows of (points, positive
// samples, negative samples) before the tile (int64, the host's scan of
// tile_counts). points: rows of (negative weight, positive weight, negative
// samples, positive samples) up to and with the group; point_positions: the
// ranked position of each group's last sample.
template <typename S>
__global__ void __launch_bounds__(kRankBlockThreads)
rank_curve_points(const S* ranked_scores, const unsigned char* ranked_positive,
                  const double* ranked_weight, int64 n, const double* tile_offsets,
                  const long long* count_offsets, long long* tile_counts, double* points,
                  long long* point_positions) {
  __shared__ double warp_totals[5 * kWarpSize];  // block_exclusive_sums, block_sum
  const int64 start = (int64)blockIdx.x * blockDim.x * kRankItems;
  const int64 first = start + (int64)threadIdx.x * kRankItems;  // blocked: a thread's run
  const bool write = points != nullptr;  // the same for every thread

  // This thread's run: (positive weight, negative weight, positive samples,
  // negative samples, group ends).
  // Which positions end their group: bits of a mask through the block scan.
  double run[5] = {0.0, 0.0, 0.0, 0.0, 0.0};
  unsigned int tail = 0u;
#pragma unroll
  for (int k = 0; k < kRankItems; ++k) {
    const int64 i = first + k;
    if (i >= n) continue;
    const bool ends = i == n - 1 || !same_score(ranked_scores[i + 1], ranked_scores[i]);
    if (ends) tail |= 1u << k;
    const bool is_positive = ranked_positive[i] != 0;
    const double w = ranked_weight != nullptr ? ranked_weight[i] : 1.0;
    const double seen = w > 0.0 ? 1.0 : 0.0;  // samples of some weight
    // Constant indices only (a computed one would put run[] on the stack).
    run[0] += is_positive ? w : 0.0;
    run[1] += is_positive ? 0.0 : w;
    run[2] += is_positive ? seen : 0.0;
    run[3] += is_positive ? 0.0 : seen;
    run[4] += ends ? 1.0 : 0.0;
  }
  if (!write) {
    double counts[3] = {run[4], run[2], run[3]};
    block_sum(counts, warp_totals);
    if (threadIdx.x == 0) {
      long long* out = tile_counts + 3 * (int64)blockIdx.x;
      for (int v = 0; v < 3; ++v) out[v] = (long long)counts[v];
    }
    return;
  }
  block_exclusive_sums(run, warp_totals);
  const double* weight_offset = tile_offsets + 2 * (int64)blockIdx.x;
  const long long* count_offset = count_offsets + 3 * (int64)blockIdx.x;
  double positive = weight_offset[0] + run[0], negative = weight_offset[1] + run[1];
  double positives_seen = (double)count_offset[1] + run[2];
  double negatives_seen = (double)count_offset[2] + run[3];
  int64 point = count_offset[0] + (int64)run[4];
#pragma unroll
  for (int k = 0; k < kRankItems; ++k) {
    const int64 i = first + k;
    if (i >= n) continue;
    const bool is_positive = ranked_positive[i] != 0;
    const double w = ranked_weight != nullptr ? ranked_weight[i] : 1.0;
    (is_positive ? positive : negative) += w;
    (is_positive ? positives_seen : negatives_seen) += w > 0.0 ? 1.0 : 0.0;
    if (!(tail & (1u << k))) continue;
    double* out = points + 4 * point;
    out[0] = negative;
    out[1] = positive;
    out[2] = negatives_seen;
    out[3] = positives_seen;
    point_positions[point] = i;
    ++point;
  }
}

// The distinct values of a label array, as far as a binary problem needs
// them (metrics_gpu._validation.present_labels): its first value a, one
// other value b if any, and whether a third appears, in one read of the
// labels (the min, the max and a third check would be three). Labels are
// compared as 64-bit integers (sign- or zero-extended: one-to-one for every
// label type). Each thread keeps (b, has_b, more) over its grid-strided
// labels, the warp and then the block merge them, and thread 0 writes the
// block's row of `out`: (a, b, has_b, more) as 64-bit words. The host merges
// the rows (gridDim.x of them: one read-back).
struct LabelPair {
  long long other;
  int has_other;
  int more;
};

__device__ __forceinline__ void merge_label_pair(LabelPair& p, const LabelPair& q) {
  p.more |= q.more;
  if (!q.has_other) return;
  if (!p.has_other) {
    p.other = q.other;
    p.has_other = 1;
  } else if (q.other != p.other) {
    p.more = 1;
  }
}

template <typename T>
__global__ void __launch_bounds__(kRankBlockThreads)
label_pair_summary(const T* labels, int64 n, unsigned long long* out) {
  __shared__ LabelPair warp_pairs[kRankBlockThreads / kWarpSize];
  const long long first = (long long)labels[0];  // n >= 1 (the host checks)
  LabelPair p = {first, 0, 0};
  for (int64 i = (int64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += grid_threads()) {
    const long long v = (long long)labels[i];
    if (v != first) merge_label_pair(p, LabelPair{v, 1, 0});
  }
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    LabelPair q;
    q.other = __shfl_xor_sync(kFullWarp, p.other, offset);
    q.has_other = __shfl_xor_sync(kFullWarp, p.has_other, offset);
    q.more = __shfl_xor_sync(kFullWarp, p.more, offset);
    merge_label_pair(p, q);
  }
  if (lane_index() == 0) warp_pairs[threadIdx.x / kWarpSize] = p;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (unsigned int w = 1; w < blockDim.x / kWarpSize; ++w) merge_label_pair(p, warp_pairs[w]);
    unsigned long long* row = out + 4 * (int64)blockIdx.x;
    row[0] = (unsigned long long)first;
    row[1] = (unsigned long long)p.other;
    row[2] = (unsigned long long)p.has_other;
    row[3] = (unsigned long long)p.more;
  }
}

}  // namespace mg

using mg::label_pair_summary;
using mg::rank_areas;
using mg::rank_curve_points;
using mg::rank_finish;
using mg::rank_gather;
using mg::rank_label_key_areas;
using mg::rank_label_key_tiles;
using mg::rank_pack_keys;
using mg::rank_pack_label_keys;
using mg::rank_packed_areas;
using mg::rank_packed_tiles;
using mg::rank_tile_scan;
