// The fused pass over (N, K) scores: one read of every row gives every score
// metric's weighted sum (metrics_gpu/_formulas/state.py SCORE_SLOTS, same layout):
// argmax correctness, -log p_t (softmax of logits, or clipped probabilities),
// the Brier sum, the Crammer-Singer hinge, CatBoost's one-vs-all log loss,
// the true class's rank for top-k hits, and the calibration bins of the
// max probability. The reference is NumpyBackend.fused_logits_pass.
//
// Two mappings of rows onto threads (the host's score_mapping picks one):
// * fused_logits_pass, any layout: blocks of whole warps (at most
//   kScoreBlockThreads threads); `group` lanes (a power of two <= 32) share
//   a row, each scanning columns lane, lane + group, ... a score per load,
//   and combining with width-`group` shuffles;
// * fused_logits_staged, contiguous rows of few columns: a thread per row,
//   the block's rows copied through shared memory first (see there);
// * fused_logits_wide, contiguous rows of many columns: a warp or the whole
//   block per row, each thread loading 16 bytes at a time (see there).
// Rows are grid-strided; every lane runs the same trips (rows past the end
// are inactive, never an early exit) so shuffles and barriers see every
// thread.
//
// Precision: per-element exponentials in the widened score type (float for
// float/half/bfloat16 scores, double for double), summed in that type over a
// lane's chunk of kScoreUnroll columns; sums over a row and over rows in
// double; a row's exp and log in the widened type (add_row_terms), its
// terms from there in double. With logits, the row's max m and the sums
// over the columns other than the target, sum exp(z_j - m) and
// sum exp(2 (z_j - m)), are kept online (rescaled when a chunk raises the
// max), so the row is read once. The target's term is kept apart so that a
// confident row (p_t near 1) keeps its digits: its Brier term is
// sum_{j != t} p_j^2 + (1 - p_t)^2 with 1 - p_t = (sum_{j != t} e_j) / s, not
// sum p^2 - 2 p_t + 1 (which cancels to the rounding of p_t), and its loss
// log1p of that sum when t holds the max. Squares below the widened type's
// normal range (non-target probabilities under about 1e-19 for float) lose
// digits. Differences of logits that may pass the float range (m - z_t of
// +-3e38) are taken in double, and the one-vs-all softplus terms summed in
// double, the target's as softplus(-z_t) (= softplus(z_t) - z_t) apart.
//
// Output: each block writes its partial sums to partials[block * slots ...]
// (no global atomics); the host adds the rows in a fixed order. The scalar
// slots are reduced in a fixed order within the block, and so are the top-k
// hits, kept per thread in shared memory (top_k_bucket: no register per k
// value, whatever their number). The calibration bins
// are summed per bin within a warp, then added with shared-memory atomics:
// with `fixed_bins` as 64-bit fixed point (integer atomics are associative,
// so the sums are bit-identical run to run: unweighted rows always, weighted
// rows with deterministic=True), else as doubles, whose order may vary run to
// run (the last bits of weighted bin sums only). Unweighted rows count in
// the weight and correct cells as 32-bit integers (native shared atomics;
// 64-bit ones are compare-and-swap loops), the confidence in fixed point.
//
// Bin b holds confidences c with b/B <= c < (b+1)/B, the edges being the
// doubles nearest b/B (1.0 in the last bin): floor(c * B) alone puts c = b/B
// into bin b - 1 when the product rounds down.
//
// Limits: K < 2^31 columns; top_k has at most kMaxTopK entries; dynamic
// shared memory of 3 * n_bins 8-byte bin cells, then (num_top_k + 1) *
// blockDim.x doubles of top-k buckets when num_top_k > 0 (the host checks
// the budget: top_k_shared_bytes);
// max_weight_bits (fixed-point bins of weighted rows) holds max|w| as
// max_abs_weight of confusion.cu leaves it, null for unweighted rows.
#include "common.cuh"

namespace mg {

enum ScoreSlot {
  kSlotWeight = 0,
  kSlotCorrect,
  kSlotNll,
  kSlotBrier,
  kSlotHinge,
  kSlotOneVsAll,
  kSlotInvalid,
  kScalarSlots
};
// The host's copies (metrics_gpu/backends/kernel_sources.py SCORE_MAX_TOP_K, launchers/scores.py
// SCORE_MAX_BLOCK_THREADS; the enum: _state.py SCORE_SLOTS) are held to these
// by tests/test_kernel_interface.py.
constexpr int kMaxTopK = 8;          // top_k values per pass (the host checks)
constexpr int kScoreBlockThreads = 256;  // the launch bound (the host launches no more)
// Block reduction scratch: the scalar slots, or the top-k buckets.
constexpr int kReducedSlots = kScalarSlots > kMaxTopK + 1 ? kScalarSlots : kMaxTopK + 1;

__device__ __forceinline__ float exp_of(float x) { return expf(x); }
__device__ __forceinline__ double exp_of(double x) { return exp(x); }
__device__ __forceinline__ float log_of(float x) { return logf(x); }
__device__ __forceinline__ double log_of(double x) { return log(x); }
__device__ __forceinline__ float log1p_of(float x) { return log1pf(x); }
__device__ __forceinline__ double log1p_of(double x) { return log1p(x); }

// softplus(v) = log(1 + e^v), stable for large |v|.
template <typename F>
__device__ __forceinline__ F softplus(F v) {
  F magnitude = v < F(0) ? -v : v;
  return (v > F(0) ? v : F(0)) + log1p_of(exp_of(-magnitude));
}

// What one lane has seen of its row. Columns are int: K < 2^31.
template <typename F>
struct RowScan {
  F best;            // max score (argmax_beats order), and its column
  int best_index;
  F max_finite;      // logits: running max m of the softmax (ignores -inf)
  // Over the columns j != t (the target's term apart: add_row_terms).
  double other_exp_sum;     // logits: sum exp(z_j - m); probabilities: unused
  double other_square_sum;  // logits: sum exp(2 (z_j - m)); probabilities: sum p_j^2
  F other_max;       // max over columns j != t (hinge)
  int rank;          // columns that sort before t
  double softplus_sum;  // over the columns j != t (add_row_terms adds the target's)
  bool nonfinite;    // a NaN or an infinity in the row (the streaming checks read it)
};

template <typename F>
__device__ __forceinline__ void merge_softmax(F& m, double& s, double& s2, F m_other,
                                              double s_other, double s2_other) {
  // Both parts rescaled to the larger max; an empty part (m = -inf, s = 0) adds 0.
  F top = m_other > m ? m_other : m;
  if (top == negative_infinity(F())) return;
  double scale = m == negative_infinity(F()) ? 0.0 : (double)exp_of(m - top);
  double scale_other = m_other == negative_infinity(F()) ? 0.0 : (double)exp_of(m_other - top);
  s = s * scale + s_other * scale_other;
  s2 = s2 * scale * scale + s2_other * scale_other * scale_other;
  m = top;
}

// The scans of `group` lanes (a power of two <= 32, aligned) merged with
// width-`group` shuffles: every lane of the group ends with the row's scan.
// The whole warp calls it.
template <typename F>
__device__ __forceinline__ void merge_lanes(RowScan<F>& r, int group, bool from_logits,
                                            bool one_vs_all) {
  // Field by field (a whole RowScan shuffled first holds more registers, and
  // streaming_update spills on sm_80).
  for (int offset = group / 2; offset > 0; offset /= 2) {
    F best = __shfl_xor_sync(kFullWarp, r.best, offset, group);
    int best_index = __shfl_xor_sync(kFullWarp, r.best_index, offset, group);
    if (argmax_beats(best, (int64)best_index, r.best, (int64)r.best_index)) {
      r.best = best;
      r.best_index = best_index;
    }
    double s2 = __shfl_xor_sync(kFullWarp, r.other_square_sum, offset, group);
    if (from_logits) {
      F m = __shfl_xor_sync(kFullWarp, r.max_finite, offset, group);
      double s = __shfl_xor_sync(kFullWarp, r.other_exp_sum, offset, group);
      merge_softmax(r.max_finite, r.other_exp_sum, r.other_square_sum, m, s, s2);
    } else {
      r.other_square_sum += s2;
    }
    F other = __shfl_xor_sync(kFullWarp, r.other_max, offset, group);
    if (other > r.other_max) r.other_max = other;
    r.rank += __shfl_xor_sync(kFullWarp, r.rank, offset, group);
    r.nonfinite |= __shfl_xor_sync(kFullWarp, (int)r.nonfinite, offset, group) != 0;
    if (one_vs_all) r.softplus_sum += __shfl_xor_sync(kFullWarp, r.softplus_sum, offset, group);
  }
}

// A lane reads its columns lane, lane + group, ... kScoreUnroll at a time:
// the loads of a chunk are issued before any is used, so each lane keeps
// several in flight (one at a time cannot cover the memory latency). Whole
// chunks take no per-column bounds checks; the last (fewer than kScoreUnroll
// columns of the lane) goes one column at a time. The chunk's terms (the
// target's left out) are summed in F, then added to the row's double sums;
// with logits the running max moves at most once per chunk.
constexpr int kScoreUnroll = 4;

// M columns of a lane (v[u] at column c0 + u * group) folded into its
// RowScan. `lowest` is the lane's running minimum (fminf skips NaN): with
// `best` (NaN beats every number in argmax_beats) it tells whether the row
// holds a NaN or an infinity, without a test per column. t, the target's
// column, is below num_columns (an int) wherever a row is scanned: an int
// compare a column, not a 64-bit value held through the scan.
template <int M, typename F>
__device__ __forceinline__ void absorb_columns(RowScan<F>& r, F& lowest, const F (&v)[M],
                                               int c0, int group, int t, F z_t,
                                               bool from_logits, bool one_vs_all) {
  const F minus_inf = negative_infinity(F());
  F chunk_max = minus_inf;
#pragma unroll
  for (int u = 0; u < M; ++u) {
    const int c = c0 + u * group;
    // argmax_beats within a lane, whose columns come in increasing order: a
    // tie keeps the earlier column, so a value wins when it is greater or is
    // the first NaN. (A lane whose values are all -inf keeps the sentinel;
    // scan_row gives it its first column.)
    if (!(v[u] <= r.best) && r.best == r.best) {
      r.best = v[u];
      r.best_index = c;
    }
    chunk_max = v[u] > chunk_max ? v[u] : chunk_max;
    lowest = v[u] < lowest ? v[u] : lowest;
    if (c != t && v[u] > r.other_max) r.other_max = v[u];
    if (v[u] > z_t || (v[u] == z_t && c > t)) ++r.rank;
    // In double: two float softplus terms of 3e38 overflow their sum.
    if (one_vs_all && c != t) r.softplus_sum += (double)softplus(v[u]);
  }
  F part = F(0), square_part = F(0);
  if (from_logits) {
    if (chunk_max > r.max_finite) {
      double scale = r.max_finite == minus_inf ? 0.0 : (double)exp_of(r.max_finite - chunk_max);
      r.other_exp_sum *= scale;
      r.other_square_sum *= scale * scale;
      r.max_finite = chunk_max;
    }
#pragma unroll
    for (int u = 0; u < M; ++u) {
      if (v[u] != minus_inf && c0 + u * group != t) {
        F e = exp_of(v[u] - r.max_finite);
        part += e;
        square_part += e * e;
      }
    }
    r.other_exp_sum += (double)part;
  } else {
#pragma unroll
    for (int u = 0; u < M; ++u) {
      if (c0 + u * group != t) square_part += v[u] * v[u];
    }
  }
  r.other_square_sum += (double)square_part;
}

// A scan of no columns yet.
template <typename F>
__device__ __forceinline__ RowScan<F> empty_scan(int num_columns) {
  const F minus_inf = negative_infinity(F());
  RowScan<F> r;
  r.best = minus_inf;
  r.best_index = num_columns;  // sentinel: loses every tie to a real column
  r.max_finite = minus_inf;
  r.other_exp_sum = 0.0;
  r.other_square_sum = 0.0;
  r.other_max = minus_inf;
  r.rank = 0;
  r.softplus_sum = 0.0;
  r.nonfinite = false;
  return r;
}

template <typename S>
__device__ __forceinline__ RowScan<typename Widened<S>::type> scan_row(
    const S* __restrict__ row_scores, bool active, int t, typename Widened<S>::type z_t,
    int num_columns, int64 column_stride, int group, bool from_logits, bool one_vs_all) {
  typedef typename Widened<S>::type F;
  const F minus_inf = negative_infinity(F());
  RowScan<F> r = empty_scan<F>(num_columns);
  if (active) {
    F lowest = -minus_inf;
    const int first = (int)(lane_index() % (unsigned int)group);
    const int64 lane_step = (int64)group * column_stride;
    const S* chunk = row_scores + (int64)first * column_stride;
    int c0 = first;
    // A lane whose values are all -inf keeps its first column (no value
    // beats the -inf it starts from); one with no column keeps the sentinel.
    if (first < num_columns) r.best_index = first;
    for (; c0 + (kScoreUnroll - 1) * group < num_columns; c0 += kScoreUnroll * group) {
      F v[kScoreUnroll];
#pragma unroll
      for (int u = 0; u < kScoreUnroll; ++u) v[u] = widen(chunk[u * lane_step]);
      chunk += kScoreUnroll * lane_step;
      absorb_columns(r, lowest, v, c0, group, t, z_t, from_logits, one_vs_all);
    }
    for (; c0 < num_columns; c0 += group) {
      const F v[1] = {widen(*chunk)};
      chunk += lane_step;
      absorb_columns(r, lowest, v, c0, group, t, z_t, from_logits, one_vs_all);
    }
    // NaN makes best NaN, +inf makes it +inf (or NaN), -inf is the lowest.
    r.nonfinite = !(r.best - r.best == F(0)) || lowest == minus_inf;
  }
  merge_lanes(r, group, from_logits, one_vs_all);
  return r;
}

// The scan of a two-column row held in registers, [a, s] (a binary head's
// one column: [0, z] of a logit, [1 - p, p] of a probability, built by the
// caller): scan_row's result for that row with one lane, no loads.
template <typename F>
__device__ __forceinline__ RowScan<F> scan_pair(F a, F s, bool active, int t, F z_t,
                                                bool from_logits) {
  const F minus_inf = negative_infinity(F());
  RowScan<F> r = empty_scan<F>(2);
  if (active) {
    F lowest = -minus_inf;
    r.best_index = 0;
    const F first[1] = {a};
    absorb_columns(r, lowest, first, 0, 1, t, z_t, from_logits, false);
    const F second[1] = {s};
    absorb_columns(r, lowest, second, 1, 1, t, z_t, from_logits, false);
    r.nonfinite = !(r.best - r.best == F(0)) || lowest == minus_inf;
  }
  return r;
}

// Whether c >= RN(k / B), the double nearest the edge k / B (0 < k < B <
// 2^53), without a division: fma(c, B, -k) = B (c - k / B) is exact
// wherever the answer turns on it (c within an ulp of k / B: an integer
// below B times c's ulp), and k / B is never the midpoint of two doubles (a
// dyadic k / B is itself a double). So c >= RN(k / B) exactly when
// c >= k / B, or when c is the double just below k / B and k / B rounds
// down to it (nearer to c than to the next double).
__device__ __forceinline__ bool at_or_past_edge(double c, int k, int n_bins) {
  const double below = fma(c, (double)n_bins, -(double)k);
  if (below >= 0.0) return true;
  const double above = fma(nextafter(c, 2.0), (double)n_bins, -(double)k);
  return above >= 0.0 && -below < above;
}

// The exact rule at an edge: one step against the double nearest b / B
// (the NumPy reference divides; at_or_past_edge decides the same without a
// division).
__device__ __forceinline__ int edge_step(double c, int bin, int n_bins) {
  if (bin + 1 < n_bins && at_or_past_edge(c, bin + 1, n_bins)) return bin + 1;
  if (bin > 0 && !at_or_past_edge(c, bin, n_bins)) return bin - 1;
  return bin;
}
// The same, not inlined: rare, and its registers would count in every
// caller's loop.
__device__ __noinline__ int calibration_bin_at_edge(double c, int bin, int n_bins) {
  return edge_step(c, bin, n_bins);
}

// The calibration bin of confidence c in [0, 1] (NaN: bin 0), edges as the
// header says. NumpyBackend's calibration_bin is the same rule. kInlineEdge:
// the edge rule inlined rather than called, for a loop whose registers a
// call's convention costs more than the rule (the streaming update's
// thresholds histogram: 64 registers with it inlined, 69-80 with the call).
template <bool kInlineEdge = false>
__device__ __forceinline__ int calibration_bin(double confidence, int n_bins) {
  const double c = confidence == confidence ? confidence : 0.0;
  const double scaled = c * (double)n_bins;
  const int bin = scaled < 1.0 ? 0 : (scaled >= (double)(n_bins - 1) ? n_bins - 1 : (int)scaled);
  // Away from an edge, floor(c * B) is the bin and the edge tests are not
  // needed: c * B rounds by at most B 2^-53 and each edge b / B by at most
  // 2^-53, so a fractional part farther than 4 B 2^-53 from 0 and 1 (with
  // c <= 1) leaves no doubt. Only values at or next to an edge (c = 1/2,
  // ties) take the exact rule. (NaN or inf parts fail both compares.)
  const double fraction = scaled - floor(scaled);
  const double doubt = 4.0 * (double)n_bins * 1.1102230246251565e-16;  // 4 B 2^-53
  if (fraction > doubt && fraction < 1.0 - doubt && scaled < (double)n_bins) return bin;
  return kInlineEdge ? edge_step(c, bin, n_bins) : calibration_bin_at_edge(c, bin, n_bins);
}

// A bin sum in shared memory: 64-bit fixed point (value * 2^shift, each row
// rounded to the nearest unit), a double, or a count of unweighted rows
// (the cell's low 32-bit word: a block's rows are fewer than 2^32, which the
// host checks). 64-bit shared atomics compile to compare-and-swap loops;
// 32-bit integer ones are native.
union BinCell {
  unsigned long long fixed;
  double value;
  unsigned int count;
};

__device__ __forceinline__ void add_bin_cell(BinCell* cell, unsigned long long v) {
  atomicAdd(&cell->fixed, v);
}
__device__ __forceinline__ void add_bin_cell(BinCell* cell, double v) {
  atomicAdd(&cell->value, v);
}
__device__ __forceinline__ void add_bin_cell(BinCell* cell, unsigned int v) {
  atomicAdd(&cell->count, v);
}

// A bin cell as a double: counts of unweighted rows (weight and correct
// cells of a unit_weight instantiation), fixed point scaled back (a
// power-of-two scale, exact), or the double.
__device__ __forceinline__ double bin_cell_value(const BinCell& cell, bool count, bool fixed,
                                                 int shift) {
  return count ? (double)cell.count : (fixed ? ldexp((double)cell.fixed, -shift) : cell.value);
}

// Adds (weight, confidence, correct) to calibration bin `bin` (>= 0) of the
// block's shared bins: three shared-memory atomics. TC is the type of the
// weight and correct sums, TV of the confidence sum (unweighted: unsigned
// int counts and fixed point).
template <typename TC, typename TV>
__device__ __forceinline__ void add_to_bin_cells(BinCell* bins, int n_bins, int bin, TC weight,
                                                 TV confidence, TC correct) {
  add_bin_cell(&bins[bin], weight);
  add_bin_cell(&bins[n_bins + bin], confidence);
  add_bin_cell(&bins[2 * n_bins + bin], correct);
}

// Adds (weight, confidence, correct) to calibration bin `bin` of the block's
// shared bins, once per distinct bin in the warp: lanes of one bin (found by
// __match_any_sync) are summed in a tree over their ranks among themselves,
// then the lowest of them adds the sums. Many rows of a warp fall in the same
// few bins (K small, a row per lane or two), and atomics on one shared
// address serialise. Every lane of the warp calls this; bin < 0 adds nothing.
// TC and TV are unsigned int (counts), unsigned long long (fixed point:
// each row rounded before the tree, so the sums are exact integers) or
// double, as add_to_bin_cells.
template <typename TC, typename TV>
__device__ __forceinline__ void add_to_bin(BinCell* bins, int n_bins, int bin, TC weight,
                                           TV confidence, TC correct) {
  const unsigned int lane = lane_index();
  unsigned int peers = __match_any_sync(kFullWarp, bin);
  const bool lowest = (peers & ((1u << lane) - 1u)) == 0u;
  unsigned int rank = __popc(peers & ((1u << lane) - 1u));  // peers below this lane
  peers = bin < 0 ? 0u : peers & ~((2u << lane) - 1u);       // peers above it (lane 31: none)
  while (__any_sync(kFullWarp, peers != 0u)) {
    const int next = __ffs((int)peers) - 1;  // the nearest peer above that is not done
    const int source = next < 0 ? (int)lane : next;
    TC w = __shfl_sync(kFullWarp, weight, source);
    TV c = __shfl_sync(kFullWarp, confidence, source);
    TC k = __shfl_sync(kFullWarp, correct, source);
    if (next >= 0) {
      weight += w;
      confidence += c;
      correct += k;
    }
    // Odd ranks have just been added into their neighbour below: done.
    peers &= ~__ballot_sync(kFullWarp, rank & 1u);
    rank >>= 1;
  }
  if (bin >= 0 && lowest) add_to_bin_cells(bins, n_bins, bin, weight, confidence, correct);
}

__device__ __forceinline__ unsigned long long to_fixed(double value, int shift) {
  return (unsigned long long)llrint(ldexp(value, shift));
}

// The fixed-point scale of the bins: 2^shift with 2^e > max|w| * N as in
// fixed_point_shift (common.cuh), so no block's sum passes 2^62; unweighted
// rows (max_weight_bits null) weigh 1.
__device__ __forceinline__ int bin_fixed_shift(const unsigned long long* max_weight_bits,
                                               int64 n) {
  const unsigned long long one_bits = 0x3ff0000000000000ull;  // 1.0
  return fixed_point_shift(max_weight_bits != nullptr ? max_weight_bits : &one_bits, n);
}

// The softmax's denominator s = sum_j exp(z_j - m) of a scanned row of logits.
template <typename F>
__device__ __forceinline__ double softmax_denominator(const RowScan<F>& r, F z_t) {
  return r.other_exp_sum + (double)exp_of(z_t - r.max_finite);
}

// One scanned row's terms, weighted by w, added to `sums` (ScoreSlot order;
// the top-k hits go to top_k_bucket's buckets): -log p_t (softmax of logits, or the clipped
// probability), the Brier sum, the Crammer-Singer hinge, the argmax hit and
// CatBoost's one-vs-all loss. Returns the row's confidence (its max
// probability) and correctness for the calibration bins. Shared by
// fused_logits_pass and streaming.cu's streaming_update: the formulas live
// here (and in NumpyBackend's score_row_terms, the reference).
// `sums` is a thread's register array (double*) or a ThreadColumn in shared
// memory (streaming_update, whose loop holds no registers for them).
template <typename F, typename Sums>
__device__ __forceinline__ void add_row_terms(const RowScan<F>& r, int64 t, F z_t, double w,
                                              bool from_logits, double clip_eps,
                                              bool one_vs_all, Sums sums, double& confidence,
                                              double& correct) {
  // From logits, a row's exp and log in the scores' widened type F (float for
  // float and narrower scores: their sums already carry float rounding, and
  // double transcendentals cost several times more), the terms in double
  // from there.
  // The confidence stays a double quotient: the calibration bin edges are
  // compared in double, as by the NumPy reference.
  // The Brier term is sum_{j != t} p_j^2 + (1 - p_t)^2 either way: of
  // positive parts, where sum p^2 - 2 p_t + 1 leaves a confident row (p_t
  // near 1) the rounding of p_t.
  // The terms that need no exp or log first, added to the sums before the
  // transcendentals run: fewer values live across them (a wide pass of
  // double scores peaked at log1p).
  const double margin = (double)z_t - (double)r.other_max;
  correct = r.best_index == t ? 1.0 : 0.0;
  sums[kSlotWeight] += w;
  sums[kSlotCorrect] += w * correct;
  sums[kSlotHinge] += w * (1.0 - margin > 0.0 ? 1.0 - margin : 0.0);
  // sum_j softplus(z_j) - z_t as sum_{j != t} softplus(z_j) + softplus(-z_t):
  // positive terms, where the difference of a confident row cancels.
  if (one_vs_all) sums[kSlotOneVsAll] += w * (r.softplus_sum + (double)softplus(-z_t));
  double nll, brier;
  if (from_logits) {
    const F e_t = exp_of(z_t - r.max_finite);  // 1 when t holds the max
    const double other = r.other_exp_sum;      // s (1 - p_t), not s - e_t
    const double s = other + (double)e_t;
    // -log p_t = (m - z_t) + log1p(s - 1). m - z_t in double: the
    // difference of float logits may pass the float range (3e38 - -3e38);
    // s - 1 is `other` exactly when t holds the max, so a small loss keeps
    // its digits.
    nll = ((double)r.max_finite - (double)z_t) +
          (double)log1p_of((F)(other + ((double)e_t - 1.0)));
    confidence = 1.0 / s;
    brier = (r.other_square_sum + other * other) / (s * s);
  } else {
    const double p_t = (double)z_t;
    double clipped = p_t < clip_eps ? clip_eps : (p_t > 1.0 - clip_eps ? 1.0 - clip_eps : p_t);
    nll = -log(clipped);  // one log a row: double, as log_loss of probabilities promises
    confidence = (double)r.best;
    const double miss = 1.0 - p_t;  // exact for p_t >= 1/2 (Sterbenz)
    brier = r.other_square_sum + miss * miss;
  }
  sums[kSlotNll] += w * nll;
  sums[kSlotBrier] += w * brier;
}

// Top-k hits without a register per k value. A row whose true class has
// rank r (columns sorting before it) falls in bucket j = #{i : top_k[i] <= r},
// and it hits top_k[i] exactly when j <= #{l : top_k[l] < top_k[i]} (any
// order, repeats allowed). Each thread adds its rows' weights to its own
// column of the shared buckets (bucket j at buckets[j * blockDim.x + thread]:
// no atomics, no bank conflicts), and top_k_block_hits sums them in a fixed
// order at the end, so the bits are the same every run.
__device__ __forceinline__ int top_k_bucket(int rank, const long long* top_k, int num_top_k) {
  int bucket = 0;
  for (int i = 0; i < num_top_k; ++i) bucket += top_k[i] <= (long long)rank ? 1 : 0;
  return bucket;
}

// The block's hits of each top_k value into out[0 .. num_top_k) (thread 0
// writes). Called by the whole block; scratch holds kReducedSlots * kWarpSize
// doubles and is free (the block has synchronised since its last use).
__device__ void top_k_block_hits(const double* buckets, const long long* top_k, int num_top_k,
                                 double* scratch, double* out) {
  const unsigned int lane = lane_index();
  const unsigned int warp = threadIdx.x / kWarpSize;
  const unsigned int warps = blockDim.x / kWarpSize;
  for (int j = 0; num_top_k > 0 && j <= num_top_k; ++j) {  // no buckets without top_k
    double value = buckets[j * blockDim.x + threadIdx.x];
    for (int offset = kWarpSize / 2; offset > 0; offset >>= 1)
      value += __shfl_xor_sync(kFullWarp, value, offset);
    if (lane == 0) scratch[j * kWarpSize + warp] = value;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 0; i < num_top_k; ++i) {
      int last = 0;  // the buckets that hit top_k[i]: 0 .. last
      for (int l = 0; l < num_top_k; ++l) last += top_k[l] < top_k[i] ? 1 : 0;
      double hits = 0.0;
      for (int j = 0; j <= last; ++j)
        for (unsigned int w = 0; w < warps; ++w) hits += scratch[j * kWarpSize + w];
      out[i] = hits;
    }
  }
  __syncthreads();
}

// ptxas's register budget per score type, as blocks of 256 threads an SM
// must hold: none for 32-bit and narrower scores (64 registers on sm_80 /
// sm_90), 4 for double ones (64; 3 on sm_100 and later, whose ptxas spills
// there). Double scores fit since their sums sit in shared memory
// (score_sums), the shift and grid step are read from it where used (they
// took 88-96 registers, 2 blocks), the target's column is an int through
// the scan and a row's terms that need no exp or log are added first
// (add_row_terms; with these the wide rows' and sm_90's lanes per row came
// from 74-80 registers, 3 blocks, to 64). bench/kernel_resources.py shows
// each choice; the NVRTC gate fails on spills.
template <typename S>
struct ScoreMinBlocks {
  static constexpr int value = 0;
};
template <>
struct ScoreMinBlocks<double> {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
  static constexpr int value = 3;
#else
  static constexpr int value = 4;
#endif
};
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
// sm_100's ptxas takes 64 registers for float16 scores with weights and
// spills; at 3 blocks per SM it takes 80, as for the other 16-bit type.
template <>
struct ScoreMinBlocks<float16_bits> {
  static constexpr int value = 3;
};
#endif
// fused_logits_wide's own: ScoreMinBlocks, but on sm_100 and later 3 blocks
// per SM for every score type (left to choose, ptxas takes 48 registers
// there for float scores with weights and spills; double ones spill at 64).
template <typename S>
struct WideMinBlocks {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
  static constexpr int value = 3;
#else
  static constexpr int value = ScoreMinBlocks<S>::value;
#endif
};
// fused_logits_pass's own: sm_100's ptxas, left to choose, takes 64
// registers there for float and bfloat16 scores and spills 8-24 bytes (since
// the target's terms are summed apart); at 3 blocks per SM it takes 72, the
// 24 warps per SM its 80 registers gave before. The other mappings keep
// ScoreMinBlocks (64 registers or fewer, 32 warps, no spill).
template <typename S>
struct ScorePassMinBlocks {
  static constexpr int value = ScoreMinBlocks<S>::value;
};
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
template <>
struct ScorePassMinBlocks<float> {
  static constexpr int value = 3;
};
template <>
struct ScorePassMinBlocks<bfloat16_bits> {
  static constexpr int value = 3;
};
#endif

// The block's shared state of a score pass: calibration bins, then top-k
// buckets (dynamic shared memory), zeroed; the top_k values copied into
// `limits`. The caller synchronises before using them.
__device__ __forceinline__ double* score_block_start(BinCell* bins, int n_bins,
                                                     const long long* top_k, int num_top_k,
                                                     long long* limits) {
  double* buckets = reinterpret_cast<double*>(bins + 3 * n_bins);  // top_k_bucket
  for (int i = threadIdx.x; i < 3 * n_bins; i += blockDim.x) bins[i].fixed = 0ull;
  for (int i = threadIdx.x; i < num_top_k; i += blockDim.x) limits[i] = top_k[i];
  if (num_top_k > 0) {
    for (int j = 0; j <= num_top_k; ++j) buckets[j * blockDim.x + threadIdx.x] = 0.0;
  }
  return buckets;
}

// The block's partial sums into its row of `partials`, in a fixed order:
// the scalar slots, the top-k hits, the bins. Called by the whole block.
__device__ __forceinline__ void score_block_finish(double (&sums)[kScalarSlots], double* scratch,
                                                   const double* buckets,
                                                   const long long* limits, int num_top_k,
                                                   const BinCell* bins, int n_bins,
                                                   bool fixed_bins, bool counted_bins, int shift,
                                                   double* partials) {
  const int slots = kScalarSlots + num_top_k + 3 * n_bins;
  double* out = partials + (int64)blockIdx.x * slots;
  block_sum(sums, scratch);
  if (threadIdx.x == 0) {
    for (int i = 0; i < kScalarSlots; ++i) out[i] = sums[i];
  }
  top_k_block_hits(buckets, limits, num_top_k, scratch, out + kScalarSlots);  // syncs: bins done
  for (int i = threadIdx.x; i < 3 * n_bins; i += blockDim.x) {
    // Fixed point back to double: a power-of-two scale (exact) and one
    // rounding of the block's integer sum, the same every run.
    const bool count = counted_bins && (i < n_bins || i >= 2 * n_bins);  // weight, correct
    out[kScalarSlots + num_top_k + i] = bin_cell_value(bins[i], count, fixed_bins, shift);
  }
}

// Unweighted rows count in their calibration bins' weight and correct
// cells (32-bit counts, BinCell), weighted ones sum in fixed point or double.
template <typename W>
struct CountedBins {
  static constexpr bool value = false;
};
template <>
struct CountedBins<unit_weight> {
  static constexpr bool value = true;
};

// A thread's accumulators in shared memory: slot i at
// base[i * kScoreBlockThreads] (the columns' length, whatever the block's
// size: a constant offset, where blockDim.x was a value ptxas spilled), so a
// warp's threads touch consecutive words (no bank conflicts) and the row
// loop holds no registers for them. streaming_update's score
// instantiations keep their score sums and kappa moments there, and the
// score passes of double scores their sums (ScoreSums): their row scan needs
// the registers for its loads in flight (sums in registers held
// streaming_update at 120-128 registers, a quarter of an SM's warps, and
// the double score passes at 88-96).
template <typename T>
struct ThreadColumn {
  T* base;
  __device__ T& operator[](int i) const { return base[i * kScoreBlockThreads]; }
};

// Where a score pass keeps a thread's kScalarSlots sums: in registers for
// scores of 32 bits and fewer, in a shared ThreadColumn for double scores
// (columns: kScalarSlots * kScoreBlockThreads doubles, the kernel's; unused
// otherwise). score_block_finish takes them back into registers.
template <typename S>
struct ScoreSumsInShared {
  static constexpr bool value = sizeof(S) == sizeof(double);
};
template <typename S>
__device__ __forceinline__ auto score_sums(double* registers, double* columns) {
  if constexpr (ScoreSumsInShared<S>::value) {
    return ThreadColumn<double>{columns + threadIdx.x};
  } else {
    return registers;
  }
}

// A scanned row's terms into the thread's sums, its top-k bucket and the
// block's calibration bins (add_to_bin: the whole warp calls this, rows
// that do not contribute add nothing). For a row per thread or per group of
// lanes (whose leader contributes).
template <typename F, typename W, typename Sums>
__device__ __forceinline__ void add_scanned_row(const RowScan<F>& r, bool contributes,
                                                const W* weight, int64 row, int64 t, F z_t,
                                                bool from_logits, double clip_eps,
                                                bool one_vs_all, Sums sums, double* buckets,
                                                const long long* limits, int num_top_k,
                                                BinCell* bins, int n_bins, bool fixed_bins,
                                                int shift) {
  double w = 0.0, confidence = 0.0, correct = 0.0;
  if (contributes) {
    w = weight_value(weight, row);
    add_row_terms(r, t, z_t, w, from_logits, clip_eps, one_vs_all, sums, confidence, correct);
    if (num_top_k > 0)
      buckets[top_k_bucket(r.rank, limits, num_top_k) * blockDim.x + threadIdx.x] += w;
  }
  if (n_bins > 0) {
    const int bin = contributes ? calibration_bin(confidence, n_bins) : -1;
    const double w_confidence = w * (confidence == confidence ? confidence : 0.0);
    if (CountedBins<W>::value) {  // unweighted (always fixed point): counts
      add_to_bin(bins, n_bins, bin, 1u, to_fixed(w_confidence, shift), correct != 0.0 ? 1u : 0u);
    } else if (fixed_bins) {
      add_to_bin(bins, n_bins, bin, to_fixed(w, shift), to_fixed(w_confidence, shift),
                 to_fixed(w * correct, shift));
    } else {
      add_to_bin(bins, n_bins, bin, w, w_confidence, w * correct);
    }
  }
}

// partials: gridDim.x rows of (kScalarSlots + num_top_k + 3 * n_bins) doubles.
template <typename TrueT, typename S, typename W>
__global__ void __launch_bounds__(kScoreBlockThreads, ScorePassMinBlocks<S>::value)
fused_logits_pass(const TrueT* y_true, const S* scores, const W* weight, int64 n,
                  int64 num_columns, int64 row_stride, int64 column_stride, int group,
                  long long ignore_index, int has_ignore_index, int from_logits,
                  double clip_eps, int one_vs_all, const long long* top_k, int num_top_k,
                  int n_bins, int fixed_bins, const unsigned long long* max_weight_bits,
                  double* partials) {
  typedef typename Widened<S>::type F;
  __shared__ double scratch[kReducedSlots * kWarpSize];  // block_sum, top_k_block_hits
  __shared__ long long limits[kMaxTopK];
  MG_DYNAMIC_SHARED(BinCell, bins);  // weight, confidence, correct: 3 * n_bins
  double* buckets = score_block_start(bins, n_bins, top_k, num_top_k, limits);
  // The fixed-point shift and the rows of a grid step (< 2^31 threads) in
  // shared memory, read where used: held in registers across the row loop
  // they spilled with double scores.
  __shared__ int shift;
  __shared__ unsigned int rows_per_step;
  if (threadIdx.x == 0) {
    shift = fixed_bins ? bin_fixed_shift(max_weight_bits, n) : 0;
    rows_per_step = (unsigned int)grid_threads() / (unsigned int)group;
  }
  __syncthreads();

  double register_sums[kScalarSlots];
  __shared__ double
      sum_columns[ScoreSumsInShared<S>::value ? kScalarSlots * kScoreBlockThreads : 1];
  const auto sums = score_sums<S>(register_sums, sum_columns);
#pragma unroll
  for (int i = 0; i < kScalarSlots; ++i) sums[i] = 0.0;

  const unsigned int lane = lane_index();
  const bool leader = lane % (unsigned int)group == 0;
  for (int64 base = global_warp_base() / group; base < n; base += read_fresh(&rows_per_step)) {
    const int64 row = base + lane / group;
    bool active = row < n;
    int64 t = active ? (int64)y_true[row] : 0;
    bool counted = active && !(has_ignore_index && t == (int64)ignore_index);
    bool valid = counted && t >= 0 && t < num_columns;
    if (counted && !valid && leader) sums[kSlotInvalid] += 1.0;
    const S* row_scores = scores + (valid ? row : 0) * row_stride;
    F z_t = valid ? widen(row_scores[t * column_stride]) : F(0);
    RowScan<F> r = scan_row(row_scores, valid, (int)t, z_t, (int)num_columns, column_stride, group,
                            from_logits != 0, one_vs_all != 0);
    // After the shuffles every lane goes on (no early exit): add_to_bin
    // needs the whole warp.
    add_scanned_row(r, valid && leader, weight, row, t, z_t, from_logits != 0, clip_eps,
                    one_vs_all != 0, sums, buckets, limits, num_top_k, bins, n_bins,
                    fixed_bins != 0, read_fresh(&shift));
  }
#pragma unroll
  for (int i = 0; i < kScalarSlots; ++i) register_sums[i] = sums[i];
  score_block_finish(register_sums, scratch, buckets, limits, num_top_k, bins, n_bins,
                     fixed_bins != 0, CountedBins<W>::value, read_fresh(&shift), partials);
}

// ---------------------------------------------------------------------------
// Rows of few columns: fused_logits_staged
// ---------------------------------------------------------------------------
// The same sums as fused_logits_pass, in the same partials layout, for
// contiguous (N, K) scores of few columns (the host's score_mapping picks
// it; row_stride == K, column_stride == 1). A thread per row. The block
// copies a tile of blockDim.x whole rows (one contiguous range of memory)
// into shared memory with coalesced loads, StageUnroll in flight per
// thread, whatever K, widened and stored by column (pitch blockDim.x + 1, so
// neither the stores nor a thread's reads of its row meet bank conflicts),
// then each thread scans its row there: the target's score is a shared
// read, not a load that waits for the target's. Dynamic shared memory:
// fused_logits_pass's, then K * (blockDim.x + 1) widened scores.
// Loads in flight per thread while staging: 8 (4 of double scores, the same
// 32 bytes, whose 8 doubles in registers spilled at 64).
template <typename S>
struct StageUnroll {
  static constexpr int value = sizeof(S) == sizeof(double) ? 4 : 8;
};

template <typename TrueT, typename S, typename W>
__global__ void __launch_bounds__(kScoreBlockThreads, ScoreMinBlocks<S>::value)
fused_logits_staged(const TrueT* y_true, const S* scores, const W* weight, int64 n,
                    int64 num_columns, int64 row_stride, int64 column_stride, int group,
                    long long ignore_index, int has_ignore_index, int from_logits,
                    double clip_eps, int one_vs_all, const long long* top_k, int num_top_k,
                    int n_bins, int fixed_bins, const unsigned long long* max_weight_bits,
                    double* partials) {
  typedef typename Widened<S>::type F;
  __shared__ double scratch[kReducedSlots * kWarpSize];  // block_sum, top_k_block_hits
  __shared__ long long limits[kMaxTopK];
  MG_DYNAMIC_SHARED(BinCell, bins);  // weight, confidence, correct: 3 * n_bins
  double* buckets = score_block_start(bins, n_bins, top_k, num_top_k, limits);
  F* tile = reinterpret_cast<F*>(buckets + (num_top_k > 0 ? (num_top_k + 1) * blockDim.x : 0));
  // The fixed-point shift in shared memory, read where used: held across
  // the row loop it spilled with double scores.
  __shared__ int shift;
  if (threadIdx.x == 0) shift = fixed_bins ? bin_fixed_shift(max_weight_bits, n) : 0;
  __syncthreads();
  (void)row_stride;
  (void)column_stride;
  (void)group;

  double register_sums[kScalarSlots];
  __shared__ double
      sum_columns[ScoreSumsInShared<S>::value ? kScalarSlots * kScoreBlockThreads : 1];
  const auto sums = score_sums<S>(register_sums, sum_columns);
#pragma unroll
  for (int i = 0; i < kScalarSlots; ++i) sums[i] = 0.0;

  const int K = (int)num_columns;
  const int pitch = (int)blockDim.x + 1;
  // Each thread's element steps by blockDim.x: in (row, column) terms by
  // (B / K, B % K), with a carry when the column passes K. Its place in the
  // tile (column * pitch + row) moves by `place_step`, and by `carry` more.
  const int column_step = (int)blockDim.x % K;
  // place_step in shared memory, read at each tile: held across the row
  // scan, where it is not used, it spilled with double scores.
  __shared__ int place_steps[1];
  if (threadIdx.x == 0) place_steps[0] = (int)blockDim.x / K + column_step * pitch;
  const int carry = 1 - K * pitch;
  __syncthreads();
  // first_row is the same for the whole block: every thread runs the same
  // trips (the barriers below).
  for (int64 first_row = (int64)blockIdx.x * blockDim.x; first_row < n;
       first_row += (int64)gridDim.x * blockDim.x) {
    const int place_step = read_fresh(place_steps);
    const int rows = n - first_row < (int64)blockDim.x ? (int)(n - first_row) : (int)blockDim.x;
    const S* source = scores + first_row * K;
    const int elements = rows * K;
    int e = threadIdx.x;
    int c = e % K;
    int place = c * pitch + e / K;
    constexpr int kUnroll = StageUnroll<S>::value;
    for (; e + (kUnroll - 1) * (int)blockDim.x < elements; e += kUnroll * (int)blockDim.x) {
      F v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = widen(source[e + u * (int)blockDim.x]);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        tile[place] = v[u];
        place += place_step;
        c += column_step;
        if (c >= K) {
          c -= K;
          place += carry;
        }
      }
    }
    for (; e < elements; e += blockDim.x) {
      tile[place] = widen(source[e]);
      place += place_step;
      c += column_step;
      if (c >= K) {
        c -= K;
        place += carry;
      }
    }
    __syncthreads();
    const int64 row = first_row + threadIdx.x;
    const bool active = row < n;
    const int64 t = active ? (int64)y_true[row] : 0;
    const bool counted = active && !(has_ignore_index && t == (int64)ignore_index);
    const bool valid = counted && t >= 0 && t < num_columns;
    if (counted && !valid) sums[kSlotInvalid] += 1.0;
    const F* row_values = tile + threadIdx.x;  // column c at row_values[c * pitch]
    const F z_t = valid ? row_values[t * pitch] : F(0);
    RowScan<F> scan = scan_row(row_values, valid, (int)t, z_t, K, (int64)pitch, 1, from_logits != 0,
                               one_vs_all != 0);
    add_scanned_row(scan, valid, weight, row, t, z_t, from_logits != 0, clip_eps,
                    one_vs_all != 0, sums, buckets, limits, num_top_k, bins, n_bins,
                    fixed_bins != 0, read_fresh(&shift));
    __syncthreads();  // the tile is free for the next rows
  }
#pragma unroll
  for (int i = 0; i < kScalarSlots; ++i) register_sums[i] = sums[i];
  score_block_finish(register_sums, scratch, buckets, limits, num_top_k, bins, n_bins,
                     fixed_bins != 0, CountedBins<W>::value, read_fresh(&shift), partials);
}

// ---------------------------------------------------------------------------
// Rows of many columns: fused_logits_wide
// ---------------------------------------------------------------------------
// The same sums as fused_logits_pass, in the same partials layout, for rows
// of many contiguous columns (the host's score_mapping picks it). A tile of
// `tile` threads reads each row: a warp (medium K, a thousand classes) or
// the whole block (huge K, a 128k vocabulary). Each thread loads 16 bytes at
// a time (4 float, 8 half or 2 double scores), kWideUnroll loads in flight,
// where fused_logits_pass moves one score per load. A row's start need not
// be 16-byte aligned: its columns before the first boundary (fewer than
// 16 / sizeof(S)) and after its last whole vector go one per thread. A
// thread's columns come in increasing order (head, vectors, tail), as
// absorb_columns's argmax tie rule needs.
constexpr int kWideUnroll = 2;

// The 16 / sizeof(S) scores of one load, at columns c0, c0 + 1, ...: at most
// 4 widened at a time (8 half scores at once hold more registers: spills).
template <typename S, typename F>
__device__ __forceinline__ void absorb_bytes16(RowScan<F>& r, F& lowest, const Bytes16& b, int c0,
                                               int t, F z_t, bool from_logits,
                                               bool one_vs_all) {
  constexpr int V = 16 / sizeof(S);
  constexpr int M = V < 4 ? V : 4;
#pragma unroll
  for (int part = 0; part < V; part += M) {
    F v[M];
#pragma unroll
    for (int u = 0; u < M; ++u) v[u] = bytes16_value(b, part + u, static_cast<const S*>(nullptr));
    absorb_columns(r, lowest, v, c0 + part, 1, t, z_t, from_logits, one_vs_all);
  }
}

// One thread's part of a row (unmerged): thread `lane` of `lanes`, Unroll
// loads in flight.
template <int Unroll, typename S>
__device__ __forceinline__ RowScan<typename Widened<S>::type> scan_row_wide(
    const S* __restrict__ row_scores, bool active, int t, typename Widened<S>::type z_t,
    int num_columns, int lane, int lanes, bool from_logits, bool one_vs_all) {
  typedef typename Widened<S>::type F;
  constexpr int V = 16 / sizeof(S);
  const F minus_inf = negative_infinity(F());
  RowScan<F> r = empty_scan<F>(num_columns);
  if (active) {
    F lowest = -minus_inf;
    const int misaligned = (int)((reinterpret_cast<unsigned long long>(row_scores) % 16u) /
                                 sizeof(S));
    const int head = min(num_columns, (V - misaligned) % V);
    const int vectors = (num_columns - head) / V;
    if (lane < head) {
      const F v[1] = {widen(row_scores[lane])};
      absorb_columns(r, lowest, v, lane, 1, t, z_t, from_logits, one_vs_all);
    }
    const S* body = row_scores + head;  // 16-byte aligned
    int i = lane;
    for (; i + (Unroll - 1) * lanes < vectors; i += Unroll * lanes) {
      Bytes16 b[Unroll];
#pragma unroll
      for (int u = 0; u < Unroll; ++u) b[u] = load_bytes16(body + (int64)(i + u * lanes) * V);
#pragma unroll
      for (int u = 0; u < Unroll; ++u)
        absorb_bytes16<S>(r, lowest, b[u], head + (i + u * lanes) * V, t, z_t, from_logits,
                          one_vs_all);
    }
    for (; i < vectors; i += lanes)
      absorb_bytes16<S>(r, lowest, load_bytes16(body + (int64)i * V), head + i * V, t, z_t,
                        from_logits, one_vs_all);
    const int tail = head + vectors * V;  // first column after the vectors
    if (tail + lane < num_columns) {  // fewer than V < lanes columns
      const F v[1] = {widen(row_scores[tail + lane])};
      absorb_columns(r, lowest, v, tail + lane, 1, t, z_t, from_logits, one_vs_all);
    }
    // A row of -inf only: column 0, which lane 0 holds (a head column, the
    // first vector's, or the first tail column).
    if (r.best_index == num_columns && lane == 0) r.best_index = 0;
    r.nonfinite = !(r.best - r.best == F(0)) || lowest == minus_inf;
  }
  return r;
}

// tile: threads per row, kWarpSize or blockDim.x (which the host makes a
// multiple of it); column_stride is 1 (the host checks).
template <typename TrueT, typename S, typename W>
__global__ void __launch_bounds__(kScoreBlockThreads, WideMinBlocks<S>::value)
fused_logits_wide(const TrueT* y_true, const S* scores, const W* weight, int64 n,
                  int64 num_columns, int64 row_stride, int64 column_stride, int tile,
                  long long ignore_index, int has_ignore_index, int from_logits,
                  double clip_eps, int one_vs_all, const long long* top_k, int num_top_k,
                  int n_bins, int fixed_bins, const unsigned long long* max_weight_bits,
                  double* partials) {
  typedef typename Widened<S>::type F;
  __shared__ double scratch[kReducedSlots * kWarpSize];  // block_sum, top_k_block_hits
  __shared__ long long limits[kMaxTopK];
  __shared__ RowScan<F> warp_scans[kScoreBlockThreads / kWarpSize];  // a block's row
  // Each warp's row sums (ScoreSlot order), added by its leader lane: in
  // shared memory, not in registers, which the loop needs for its loads.
  __shared__ double warp_sums[kScoreBlockThreads / kWarpSize * kScalarSlots];
  MG_DYNAMIC_SHARED(BinCell, bins);  // weight, confidence, correct: 3 * n_bins
  double* buckets = score_block_start(bins, n_bins, top_k, num_top_k, limits);
  const unsigned int warp = threadIdx.x / kWarpSize;
  double* sums = warp_sums + warp * kScalarSlots;
  if (lane_index() < (unsigned int)kScalarSlots) sums[lane_index()] = 0.0;
  // The fixed-point shift in shared memory, read where used: held across
  // the row loop it spilled with double scores.
  __shared__ int shift;
  // The tile's size, likewise: a thread's lane and row are found from it
  // each row, and the row kept in the thread's shared slot for the weight
  // read after the scan (held in registers they spilled with double scores).
  __shared__ int tile_threads;
  __shared__ int64 row_column[kScoreBlockThreads];
  if (threadIdx.x == 0) {
    shift = fixed_bins ? bin_fixed_shift(max_weight_bits, n) : 0;
    tile_threads = tile;
  }
  __syncthreads();
  (void)column_stride;

  const int tiles = (int)(blockDim.x / (unsigned int)tile);
  // base is the same for the whole block: every thread runs the same trips
  // (the block's barriers below).
  for (int64 base = (int64)blockIdx.x * tiles; base < n; base += (int64)gridDim.x * tiles) {
    const unsigned int row_tile = (unsigned int)read_fresh(&tile_threads);
    const int lane = (int)(threadIdx.x % row_tile);
    const bool leader = lane == 0;
    const int64 row = base + (int64)(threadIdx.x / row_tile);
    row_column[threadIdx.x] = row;
    const bool active = row < n;
    const int64 t = active ? (int64)y_true[row] : 0;
    const bool counted = active && !(has_ignore_index && t == (int64)ignore_index);
    const bool valid = counted && t >= 0 && t < num_columns;
    if (counted && !valid && leader) sums[kSlotInvalid] += 1.0;
    const S* row_scores = scores + (valid ? row : 0) * row_stride;
    const F z_t = valid ? widen(row_scores[t]) : F(0);
    RowScan<F> r = scan_row_wide<kWideUnroll>(row_scores, valid, (int)t, z_t, (int)num_columns,
                                               lane, tile, from_logits != 0, one_vs_all != 0);
    merge_lanes(r, kWarpSize, from_logits != 0, one_vs_all != 0);
    if (tile > kWarpSize) {
      // The block's warps merged by warp 0's shuffles (a fixed order, so
      // fixed sums), lanes past the warps holding empty scans: thread 0,
      // the leader, ends with the row's scan.
      if (lane_index() == 0) warp_scans[warp] = r;
      __syncthreads();
      if (warp == 0) {  // the whole warp: merge_lanes shuffles
        r = lane_index() < blockDim.x / kWarpSize ? warp_scans[lane_index()]
                                                   : empty_scan<F>((int)num_columns);
        merge_lanes(r, kWarpSize, from_logits != 0, one_vs_all != 0);
      }
      __syncthreads();  // warp_scans free for the next row
    }
    if (valid && threadIdx.x % (unsigned int)read_fresh(&tile_threads) == 0) {  // the leader
      const double w = weight_value(weight, read_fresh(&row_column[threadIdx.x]));
      double confidence = 0.0, correct = 0.0;
      add_row_terms(r, t, z_t, w, from_logits != 0, clip_eps, one_vs_all != 0, sums,
                    confidence, correct);
      if (num_top_k > 0)
        buckets[top_k_bucket(r.rank, limits, num_top_k) * blockDim.x + threadIdx.x] += w;
      if (n_bins > 0) {
        // One row per tile: no tree within the warp, as add_to_bin makes.
        const int bin = calibration_bin(confidence, n_bins);
        const double w_confidence = w * (confidence == confidence ? confidence : 0.0);
        const int row_shift = read_fresh(&shift);
        if (CountedBins<W>::value) {
          add_to_bin_cells(bins, n_bins, bin, 1u, to_fixed(w_confidence, row_shift),
                           correct != 0.0 ? 1u : 0u);
        } else if (fixed_bins) {
          add_to_bin_cells(bins, n_bins, bin, to_fixed(w, row_shift),
                           to_fixed(w_confidence, row_shift), to_fixed(w * correct, row_shift));
        } else {
          add_to_bin_cells(bins, n_bins, bin, w, w_confidence, w * correct);
        }
      }
    }
  }
  double block_sums[kScalarSlots];  // lane 0 of each warp holds its warp's
#pragma unroll
  for (int i = 0; i < kScalarSlots; ++i) block_sums[i] = lane_index() == 0 ? sums[i] : 0.0;
  score_block_finish(block_sums, scratch, buckets, limits, num_top_k, bins, n_bins,
                     fixed_bins != 0, CountedBins<W>::value, read_fresh(&shift), partials);
}

}  // namespace mg

using mg::fused_logits_pass;
using mg::fused_logits_staged;
using mg::fused_logits_wide;
