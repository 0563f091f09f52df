// Confusion accumulation: one pass over (y_true, y_pred) builds the dense
// confusion matrix or, for huge K, the per-class statistics.
//
// Every kernel here:
// * reads each label type directly (TrueT/PredT: any 1/2/4/8-byte integer;
//   bool arrives as unsigned char), or, when PredT is a score type, reduces
//   each row of (N, K) scores to its argmax in the same pass ("fused
//   argmax": no (N,) temporary, one read of the scores);
// * drops samples whose target equals ignore_index, maps codes through an
//   optional class lookup table (-1 drops the sample, scikit-learn's
//   labels=), and counts samples with a label outside [0, K) in `invalid`
//   instead of writing anywhere with them;
// * accumulates weights as Accumulator<W, FIXED> (see common.cuh) and marks
//   classes that occur only with zero weight in `zero_weight_seen`;
// * runs a grid-stride loop in which the lanes of a warp always step
//   together (warp intrinsics stay converged), with the grid sized by the
//   host from the SM count.
#include "common.cuh"

namespace mg {

// Launch-wide inputs that every sample needs, read once per thread.
struct SampleRules {
  int64 num_classes;       // K: labels must lie in [0, K)
  const int64* class_lut;  // K entries, position or -1; null = identity
  int64 ignore_index;
  int has_ignore_index;
};

// Classify one sample. Returns true when it is counted, with t/p the matrix
// positions; bumps `invalid` for an out-of-range label.
__device__ __forceinline__ bool count_sample(bool active, int64& t, int64& p,
                                             const SampleRules& rules, uint64& invalid) {
  if (!active) return false;
  if (rules.has_ignore_index && t == rules.ignore_index) return false;
  bool in_range = t >= 0 && t < rules.num_classes && p >= 0 && p < rules.num_classes;
  if (!in_range) {
    invalid++;
    return false;
  }
  if (rules.class_lut != nullptr) {
    t = rules.class_lut[t];
    p = rules.class_lut[p];
    return t >= 0 && p >= 0;
  }
  return true;
}

// Row argmax of scores for a group of `group` lanes (a power of two <= 32)
// per row: each lane scans columns lane, lane + group, ...; the group then
// combines with shuffles. Called by all 32 lanes (converged); a lane whose
// row is inactive scans nothing and keeps the sentinel.
template <typename S>
__device__ __forceinline__ int64 row_argmax(const S* scores, int64 row, bool active,
                                            int64 num_columns, int64 row_stride,
                                            int64 column_stride, int group) {
  typedef typename Widened<S>::type F;
  unsigned int lane = lane_index();
  int64 first = (int64)(lane % (unsigned int)group);
  F best = negative_infinity(F());
  int64 best_index = num_columns;  // sentinel: loses every tie to a real column
  if (active) {
    const S* base = scores + row * row_stride;
    for (int64 c = first; c < num_columns; c += group) {
      F value = widen(base[c * column_stride]);
      if (argmax_beats(value, c, best, best_index)) {
        best = value;
        best_index = c;
      }
    }
  }
  for (int offset = group / 2; offset > 0; offset /= 2) {
    F other;
    int64 other_index;
    if constexpr (sizeof(F) == 4) {
      // float value and 32-bit column in one 64-bit shuffle (K < 2^32).
      uint64 packed = ((uint64)__float_as_uint(best) << 32) | (uint64)(unsigned int)best_index;
      uint64 received = __shfl_xor_sync(kFullWarp, packed, offset, group);
      other = __uint_as_float((unsigned int)(received >> 32));
      other_index = (int64)(unsigned int)(received & 0xffffffffull);
    } else {
      other = __shfl_xor_sync(kFullWarp, best, offset, group);
      other_index = __shfl_xor_sync(kFullWarp, best_index, offset, group);
    }
    if (argmax_beats(other, other_index, best, best_index)) {
      best = other;
      best_index = other_index;
    }
  }
  return best_index;
}

// ---------------------------------------------------------------------------
// The one sample loop shared by every accumulation kernel. It calls
// sink.add(counted, t, p, i) converged (all lanes of a warp together) once per
// sample slot, then sink.finish().
//
// Labels: each thread takes VEC consecutive samples per step through aligned
// vector loads when `vector_loads` (the host checks alignment), then single
// samples for the tail. Scores: `group` lanes per row, one row per group.
// ---------------------------------------------------------------------------
template <typename T, int VEC>
struct __align__(sizeof(T) * VEC) LabelVector {
  T value[VEC];
};

// Labels of a vector added in one unrolled loop (wider vectors: in halves).
constexpr int kUnrolledLabels = 8;

template <typename TrueT, typename PredT>
struct VectorWidth {
  // 16-byte loads of the wider of the two label types.
  static constexpr int value = 16 / (sizeof(TrueT) > sizeof(PredT) ? sizeof(TrueT) : sizeof(PredT));
};

template <typename TrueT, typename PredT, typename Sink>
__device__ __forceinline__ void label_loop(const TrueT* y_true, const PredT* y_pred, int64 n,
                                           int vector_loads, const SampleRules& rules,
                                           Sink& sink, uint64& invalid) {
  constexpr int VEC = VectorWidth<TrueT, PredT>::value;
  const int64 stride = grid_threads();
  const unsigned int lane = lane_index();
  int64 done = 0;
  if (vector_loads) {
    const int64 vectors = n / VEC;
    const LabelVector<TrueT, VEC>* true_vectors =
        reinterpret_cast<const LabelVector<TrueT, VEC>*>(y_true);
    const LabelVector<PredT, VEC>* pred_vectors =
        reinterpret_cast<const LabelVector<PredT, VEC>*>(y_pred);
    for (int64 base = global_warp_base(); base < vectors; base += stride) {
      int64 v = base + lane;
      bool active = v < vectors;
      LabelVector<TrueT, VEC> t_vector;
      LabelVector<PredT, VEC> p_vector;
      if (active) {
        t_vector = true_vectors[v];
        p_vector = pred_vectors[v];
      }
      if constexpr (VEC > kUnrolledLabels) {
        // 1-byte labels: the 16-byte vectors in halves of 8, each half's
        // labels shifted out of a 64-bit word (an unrolled loop of all 16
        // held 66-72 registers).
        static_assert(sizeof(TrueT) == 1 && sizeof(PredT) == 1 && VEC == 2 * kUnrolledLabels,
                      "label_loop: halves of 8 one-byte labels");
        unsigned long long t_words[2], p_words[2];
        memcpy(t_words, &t_vector, sizeof t_words);
        memcpy(p_words, &p_vector, sizeof p_words);
#pragma unroll 1
        for (int half = 0; half < 2; ++half) {
          const unsigned long long t_word = half ? t_words[1] : t_words[0];
          const unsigned long long p_word = half ? p_words[1] : p_words[0];
#pragma unroll
          for (int k = 0; k < kUnrolledLabels; ++k) {
            int64 t = active ? (int64)(TrueT)(unsigned char)(t_word >> (8 * k)) : 0;
            int64 p = active ? (int64)(PredT)(unsigned char)(p_word >> (8 * k)) : 0;
            bool counted = count_sample(active, t, p, rules, invalid);
            sink.add(counted, t, p, v * VEC + half * kUnrolledLabels + k);
          }
        }
      } else {
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          int64 t = active ? (int64)t_vector.value[k] : 0;
          int64 p = active ? (int64)p_vector.value[k] : 0;
          bool counted = count_sample(active, t, p, rules, invalid);
          sink.add(counted, t, p, v * VEC + k);
        }
      }
    }
    done = vectors * VEC;
  }
  for (int64 base = done + global_warp_base(); base < n; base += stride) {
    int64 i = base + lane;
    bool active = i < n;
    int64 t = active ? (int64)y_true[i] : 0;
    int64 p = active ? (int64)y_pred[i] : 0;
    bool counted = count_sample(active, t, p, rules, invalid);
    sink.add(counted, t, p, i);
  }
}

template <typename TrueT, typename S, typename Sink>
__device__ __forceinline__ void score_loop(const TrueT* y_true, const S* scores, int64 n,
                                           int64 row_stride, int64 column_stride, int group,
                                           const SampleRules& rules, Sink& sink,
                                           uint64& invalid) {
  const int64 rows_per_step = grid_threads() / group;
  const unsigned int lane = lane_index();
  const int64 warp_rows = kWarpSize / group;
  const int64 first_row = global_warp_base() / group;
  for (int64 base = first_row; base < n; base += rows_per_step) {
    int64 row = base + lane / group;
    bool active = row < n;
    int64 p = row_argmax(scores, row, active, rules.num_classes, row_stride, column_stride,
                         group);
    bool leader = (lane % (unsigned int)group) == 0;
    int64 t = (active && leader) ? (int64)y_true[row] : 0;
    bool counted = count_sample(active && leader, t, p, rules, invalid);
    sink.add(counted, t, p, row);
  }
  (void)warp_rows;
}

// ---------------------------------------------------------------------------
// Sinks: where a counted sample goes.
// ---------------------------------------------------------------------------

// A counted sample whose accumulated weight is 0 leaves no trace in the sums,
// so its classes are marked present here: a zero weight, and in fixed point
// (deterministic=True) a weight too small to round to one unit. A class in
// the data is in the results whatever its weight.
template <typename Acc>
__device__ __forceinline__ void mark_if_zero(Acc w, unsigned char* zero_weight_seen, int64 t,
                                             int64 p) {
  if (w == Acc(0)) {
    raise_flag(&zero_weight_seen[t]);
    raise_flag(&zero_weight_seen[p]);
  }
}

// Dense matrix, privatised per block in shared memory (SharedAccumulator:
// 32-bit counters for counts, whose per-block total the host keeps below
// 2^32; 64-bit for integer/fixed-point weights; double for float weights),
// flushed into the 64-bit (or double) global matrix at the end. With
// `aggregate`, lanes of a warp that hit the same cell are merged with
// __match_any_sync and one atomic adds their number (contention is high
// when there are few cells; unweighted only).
template <typename W, bool FIXED, typename SharedT>
struct SharedMatrixSink {
  typedef typename Accumulator<W, FIXED>::type Acc;
  SharedT* cells;
  int64 size;  // M: positions per axis
  const W* weight;
  int shift;  // fixed point: weights are scaled by 2^shift
  unsigned char* zero_weight_seen;
  int aggregate;

  __device__ __forceinline__ void add(bool counted, int64 t, int64 p, int64 i) {
    if (aggregate) {
      long long cell = counted ? t * size + p : -1;
      unsigned int peers = __match_any_sync(kFullWarp, cell);
      unsigned int leader = (unsigned int)(__ffs((int)peers) - 1);
      if (counted && lane_index() == leader) {
        atomicAdd(&cells[cell], (SharedT)__popc(peers));
      }
      return;
    }
    if (!counted) return;
    Acc w = WeightCast<W, FIXED>::apply(weight, i, shift);
    atomicAdd(&cells[t * size + p], (SharedT)w);
    mark_if_zero(w, zero_weight_seen, t, p);
  }
};

// Dense matrix in global memory, one atomic per sample off the diagonal.
// With `diagonal` (the block's size cells in shared memory, flushed at its
// end), correct predictions, most samples of a useful classifier, stay in
// the SM: at 80% accuracy, 0.2 global atomics per sample instead of 1.
template <typename W, bool FIXED, typename SharedT>
struct GlobalMatrixSink {
  typedef typename Accumulator<W, FIXED>::type Acc;
  Acc* matrix;
  int64 size;
  const W* weight;
  int shift;  // fixed point: weights are scaled by 2^shift
  unsigned char* zero_weight_seen;
  SharedT* diagonal;  // null: every sample to the global matrix

  __device__ __forceinline__ void add(bool counted, int64 t, int64 p, int64 i) {
    if (!counted) return;
    Acc w = WeightCast<W, FIXED>::apply(weight, i, shift);
    if (diagonal != nullptr && t == p) {
      atomicAdd(&diagonal[t], (SharedT)w);
    } else {
      atomicAdd(&matrix[t * size + p], w);
    }
    mark_if_zero(w, zero_weight_seen, t, p);
  }
};

// K = 2, unweighted: no atomics per sample. Each step, four ballots give the
// warp's counts of (counted, t = 1, p = 1, t = p = 1); lane 0 keeps running
// totals in registers and adds them to the matrix once at the end.
struct BinaryBallotSink {
  uint64 counted_total = 0, true_ones = 0, pred_ones = 0, both_ones = 0;

  __device__ __forceinline__ void add(bool counted, int64 t, int64 p, int64) {
    counted_total += __popc(__ballot_sync(kFullWarp, counted));
    true_ones += __popc(__ballot_sync(kFullWarp, counted && t == 1));
    pred_ones += __popc(__ballot_sync(kFullWarp, counted && p == 1));
    both_ones += __popc(__ballot_sync(kFullWarp, counted && t == 1 && p == 1));
  }
};

// Per-class statistics (O(K) memory): true positives, support and predicted
// counts with atomics on CellT cells (the global Accumulator cells, or the
// block's SharedAccumulator cells in shared memory, flushed at its end), and
// in registers, flushed once per thread, the misclassified weight sum w[t!=p]
// (kappa's observed disagreement: total - sum(tp) loses a misclassified weight
// below the rounding of a dominant class's counts) and the weighted-kappa
// moments sum w|t-p| and sum w(t-p)^2.
template <typename W, bool FIXED, typename CellT>
struct StatisticsSink {
  typedef typename Accumulator<W, FIXED>::type Acc;
  CellT* true_positives;
  CellT* support;
  CellT* predicted;
  const W* weight;
  int shift;  // fixed point: weights are scaled by 2^shift
  unsigned char* zero_weight_seen;
  int moments;
  Acc misclassified = 0;
  U128 linear_exact{0, 0}, quadratic_exact{0, 0};  // integer / fixed-point weights
  double linear_float = 0.0, quadratic_float = 0.0; // float weights

  __device__ __forceinline__ void add(bool counted, int64 t, int64 p, int64 i) {
    if (!counted) return;
    Acc w = WeightCast<W, FIXED>::apply(weight, i, shift);
    if (t == p) atomicAdd(&true_positives[t], (CellT)w);
    atomicAdd(&support[t], (CellT)w);
    atomicAdd(&predicted[p], (CellT)w);
    mark_if_zero(w, zero_weight_seen, t, p);
    if (t != p) {
      misclassified += w;
      if (moments) add_moment(w, (uint64)(t > p ? t - p : p - t));
    }
  }
  __device__ __forceinline__ void add_moment(uint64 w, uint64 gap) {
    add_product(linear_exact, w, gap);
    add_product_3(quadratic_exact, w, gap, gap);
  }
  __device__ __forceinline__ void add_moment(double w, uint64 gap) {
    double g = (double)gap;
    linear_float += w * g;
    quadratic_float += w * g * g;
  }
  __device__ __forceinline__ void flush_misclassified(Acc* total) {
    if (misclassified != Acc(0)) atomicAdd(total, misclassified);
  }
  // One of the two kinds is in use; the other stays zero and adds nothing.
  __device__ __forceinline__ void flush_moments(uint64* exact, double* floats) {
    if (linear_exact.low | linear_exact.high) atomic_add_u128(&exact[0], linear_exact);
    if (quadratic_exact.low | quadratic_exact.high) atomic_add_u128(&exact[2], quadratic_exact);
    if (linear_float != 0.0) atomicAdd(&floats[0], linear_float);
    if (quadratic_float != 0.0) atomicAdd(&floats[1], quadratic_float);
  }
};

// Unweighted statistics beyond what 32-bit shared cells hold (3K * 4 bytes
// over the block's budget; K = 32,000 takes 192 KB instead of 384 KB): the
// 3K counts as 16-bit fields, two per 32-bit shared word (cell c at word
// c / 2, bits 16 (c % 2) and up). A field counts up to 0xFFFF; the increment
// that would wrap it resets it to 0 in the same compare-and-swap and adds
// 2^16 to the global count, so no field ever carries into its neighbour.
// The base's global pointers receive those carries and, at the block's end,
// the fields (PackedStatisticsSink::flush).
template <bool FIXED>
struct PackedStatisticsSink
    : StatisticsSink<unit_weight, FIXED, typename Accumulator<unit_weight, FIXED>::type> {
  typedef typename Accumulator<unit_weight, FIXED>::type Acc;
  unsigned int* words;  // ceil(3 * size / 2) words: true positives | support | predicted
  int64 size;

  __device__ __forceinline__ void count(int64 cell, Acc* global) {
    unsigned int* word = &words[cell >> 1];
    const unsigned int shift = 16u * (unsigned int)(cell & 1);
    unsigned int seen = relaxed_load(word), assumed, next;
    bool wraps;
    do {
      assumed = seen;
      wraps = ((assumed >> shift) & 0xFFFFu) == 0xFFFFu;
      next = wraps ? assumed & ~(0xFFFFu << shift) : assumed + (1u << shift);
      seen = atomicCAS(word, assumed, next);
    } while (seen != assumed);
    if (wraps) atomicAdd(global, (Acc)0x10000);
  }
  __device__ __forceinline__ void add(bool counted, int64 t, int64 p, int64) {
    if (!counted) return;
    if (t == p) count(t, &this->true_positives[t]);
    count(size + t, &this->support[t]);
    count(2 * size + p, &this->predicted[p]);
    if (t != p) {
      this->misclassified += Acc(1);
      if (this->moments) this->add_moment((uint64)1, (uint64)(t > p ? t - p : p - t));
    }
  }
  // The whole block, after a __syncthreads: each non-zero field to its count.
  __device__ __forceinline__ void flush() {
    const long long cells = 3 * size;
    for (long long c = threadIdx.x; c < cells; c += blockDim.x) {
      const unsigned int value = (words[c >> 1] >> (16u * (unsigned int)(c & 1))) & 0xFFFFu;
      if (value == 0u) continue;
      Acc* global = c < size ? &this->true_positives[c]
                             : (c < 2 * size ? &this->support[c - size]
                                             : &this->predicted[c - 2 * size]);
      atomicAdd(global, (Acc)value);
    }
  }
};

template <typename W>
constexpr bool is_unit_weight = false;
template <>
constexpr bool is_unit_weight<unit_weight> = true;

__device__ __forceinline__ void flush_invalid(uint64* invalid_total, uint64 invalid) {
  if (invalid != 0) atomicAdd(invalid_total, invalid);
}

template <typename W, bool FIXED>
__device__ __forceinline__ int launch_shift(const uint64* max_weight_bits, int64 total_samples) {
  return FIXED ? fixed_point_shift(max_weight_bits, total_samples) : 0;
}

// The pred types that are (N, K) scores, not labels.
template <typename PredT>
constexpr bool is_score = false;
template <> constexpr bool is_score<float> = true;
template <> constexpr bool is_score<double> = true;
template <> constexpr bool is_score<bfloat16_bits> = true;
template <> constexpr bool is_score<float16_bits> = true;

template <typename TrueT, typename PredT, typename Sink>
__device__ __forceinline__ void sample_loop(const TrueT* y_true, const PredT* y_pred, int64 n,
                                            int vector_loads, int64 row_stride,
                                            int64 column_stride, int group,
                                            const SampleRules& rules, Sink& sink,
                                            uint64& invalid) {
  if constexpr (is_score<PredT>) {
    score_loop(y_true, y_pred, n, row_stride, column_stride, group, rules, sink, invalid);
  } else {
    label_loop(y_true, y_pred, n, vector_loads, rules, sink, invalid);
  }
}

}  // namespace mg

// Arguments shared by the accumulation kernels, in this order:
//   y_true, y_pred (labels, or scores for the fused argmax), weight (null when
//   unweighted), n (samples in this launch), num_classes K, class_lut (null or
//   K int64 positions), size M (matrix positions), ignore_index,
//   has_ignore_index, vector_loads (labels: both pointers 16-byte aligned),
//   row_stride, column_stride, group (scores: strides in elements, lanes per
//   row), max_weight_bits + total_samples (fixed point), then the outputs.
#define MG_ACCUMULATE_PARAMETERS(W)                                                     \
  const TrueT *__restrict__ y_true, const PredT *__restrict__ y_pred,                  \
      const W *__restrict__ weight, long long n, long long num_classes,                \
      const long long *__restrict__ class_lut, long long size, long long ignore_index, \
      int has_ignore_index, int vector_loads, long long row_stride,                    \
      long long column_stride, int group, const unsigned long long *max_weight_bits,   \
      long long total_samples

#define MG_SAMPLE_RULES \
  mg::SampleRules rules{num_classes, class_lut, ignore_index, has_ignore_index}

// Dense matrix in shared memory.
// Launch: 1-D blocks (a multiple of 32 threads), dynamic shared memory of
// size * size * sizeof(SharedAccumulator<W, FIXED>::type) bytes; the host picks this kernel while that
// fits the per-block budget and keeps n / gridDim.x < 2^32 (32-bit counters).
template <typename TrueT, typename PredT, typename W, bool FIXED>
__global__ void confusion_shared(MG_ACCUMULATE_PARAMETERS(W),
                                 typename mg::Accumulator<W, FIXED>::type* __restrict__ matrix,
                                 unsigned char* __restrict__ zero_weight_seen,
                                 unsigned long long* __restrict__ invalid_total, int aggregate) {
  typedef typename mg::Accumulator<W, FIXED>::type Acc;
  typedef typename mg::SharedAccumulator<W, FIXED>::type SharedT;
  MG_SAMPLE_RULES;
  MG_DYNAMIC_SHARED(SharedT, cells);
  const long long cell_count = size * size;
  for (long long c = threadIdx.x; c < cell_count; c += blockDim.x) cells[c] = 0;
  __syncthreads();
  mg::SharedMatrixSink<W, FIXED, SharedT> sink{
      cells, size, weight, mg::launch_shift<W, FIXED>(max_weight_bits, total_samples),
      zero_weight_seen, aggregate};
  unsigned long long invalid = 0;
  mg::sample_loop(y_true, y_pred, n, vector_loads, row_stride, column_stride, group, rules,
                  sink, invalid);
  mg::flush_invalid(invalid_total, invalid);
  __syncthreads();
  for (long long c = threadIdx.x; c < cell_count; c += blockDim.x) {
    if (cells[c] != 0) atomicAdd(&matrix[c], (Acc)cells[c]);
  }
}

// Dense matrix with global atomics (size * size beyond the shared budget;
// contention is low there: many cells). With `shared_diagonal` (uniform),
// the diagonal is kept per block in dynamic shared memory (size
// SharedAccumulator cells; the host keeps a block's samples below 2^31).
template <typename TrueT, typename PredT, typename W, bool FIXED>
__global__ void confusion_global(MG_ACCUMULATE_PARAMETERS(W),
                                 typename mg::Accumulator<W, FIXED>::type* __restrict__ matrix,
                                 unsigned char* __restrict__ zero_weight_seen,
                                 unsigned long long* __restrict__ invalid_total,
                                 int shared_diagonal) {
  typedef typename mg::Accumulator<W, FIXED>::type Acc;
  typedef typename mg::SharedAccumulator<W, FIXED>::type SharedT;
  MG_SAMPLE_RULES;
  MG_DYNAMIC_SHARED(SharedT, diagonal);
  if (shared_diagonal) {
    for (long long c = threadIdx.x; c < size; c += blockDim.x) diagonal[c] = 0;
    __syncthreads();
  }
  mg::GlobalMatrixSink<W, FIXED, SharedT> sink{
      matrix, size, weight, mg::launch_shift<W, FIXED>(max_weight_bits, total_samples),
      zero_weight_seen, shared_diagonal ? diagonal : nullptr};
  unsigned long long invalid = 0;
  mg::sample_loop(y_true, y_pred, n, vector_loads, row_stride, column_stride, group, rules,
                  sink, invalid);
  mg::flush_invalid(invalid_total, invalid);
  if (shared_diagonal) {
    __syncthreads();
    for (long long c = threadIdx.x; c < size; c += blockDim.x) {
      if (diagonal[c] != 0) atomicAdd(&matrix[c * size + c], (Acc)diagonal[c]);
    }
  }
}

// K = 2 (size 2), unweighted: ballot/popc counting, four global atomics per
// warp per launch. Same leading parameters as the other accumulation kernels.
template <typename TrueT, typename PredT>
__global__ void confusion_binary(MG_ACCUMULATE_PARAMETERS(mg::unit_weight),
                                 unsigned long long* __restrict__ matrix,
                                 unsigned long long* __restrict__ invalid_total) {
  // Unweighted only: weight, size and the fixed-point arguments are unused.
  MG_SAMPLE_RULES;
  mg::BinaryBallotSink sink;
  unsigned long long invalid = 0;
  mg::sample_loop(y_true, y_pred, n, vector_loads, row_stride, column_stride, group, rules,
                  sink, invalid);
  mg::flush_invalid(invalid_total, invalid);
  if (mg::lane_index() == 0) {
    unsigned long long c11 = sink.both_ones;
    unsigned long long c10 = sink.true_ones - sink.both_ones;
    unsigned long long c01 = sink.pred_ones - sink.both_ones;
    unsigned long long c00 = sink.counted_total - sink.true_ones - sink.pred_ones + sink.both_ones;
    if (c00) atomicAdd(&matrix[0], c00);
    if (c01) atomicAdd(&matrix[1], c01);
    if (c10) atomicAdd(&matrix[2], c10);
    if (c11) atomicAdd(&matrix[3], c11);
  }
}

// Per-class statistics (O(K) memory), for every metric but the matrix
// itself, and the misclassified weight (one Accumulator cell, always).
// `moments` selects the weighted-kappa moments: exact 128-bit
// integers (words: linear low/high, quadratic low/high) for counts, integer
// weights and fixed point, float64 (linear, quadratic) for float weights.
// `privatize` (uniform) keeps the 3 * size counts per block in dynamic
// shared memory, added to the global ones at the block's end (non-zero cells
// only): shared atomics per sample instead of three global ones.
// 1: 3 * size SharedAccumulator cells (32-bit counts, whose per-block total
//    the host keeps below 2^31; 64-bit or double for weights);
// 2: unweighted only, 16-bit fields, two per word (PackedStatisticsSink:
//    ceil(3 * size / 2) words), for K up to about 38,000 on an H100.
template <typename TrueT, typename PredT, typename W, bool FIXED>
__global__ void class_statistics(MG_ACCUMULATE_PARAMETERS(W),
                                 typename mg::Accumulator<W, FIXED>::type* __restrict__ true_positives,
                                 typename mg::Accumulator<W, FIXED>::type* __restrict__ support,
                                 typename mg::Accumulator<W, FIXED>::type* __restrict__ predicted,
                                 typename mg::Accumulator<W, FIXED>::type* __restrict__ misclassified,
                                 unsigned char* __restrict__ zero_weight_seen,
                                 unsigned long long* __restrict__ invalid_total, int moments,
                                 unsigned long long* __restrict__ exact_moments,
                                 double* __restrict__ float_moments, int privatize) {
  typedef typename mg::Accumulator<W, FIXED>::type Acc;
  typedef typename mg::SharedAccumulator<W, FIXED>::type SharedT;
  MG_SAMPLE_RULES;
  const int shift = mg::launch_shift<W, FIXED>(max_weight_bits, total_samples);
  unsigned long long invalid = 0;
  if constexpr (mg::is_unit_weight<W>) {
    if (privatize == 2) {
      MG_DYNAMIC_SHARED(unsigned int, words);
      const long long word_count = (3 * size + 1) / 2;
      for (long long c = threadIdx.x; c < word_count; c += blockDim.x) words[c] = 0u;
      __syncthreads();
      mg::PackedStatisticsSink<FIXED> sink{
          {true_positives, support, predicted, weight, shift, zero_weight_seen, moments},
          words, size};
      mg::sample_loop(y_true, y_pred, n, vector_loads, row_stride, column_stride, group, rules,
                      sink, invalid);
      sink.flush_misclassified(misclassified);
      if (moments) sink.flush_moments(exact_moments, float_moments);
      __syncthreads();
      sink.flush();
      mg::flush_invalid(invalid_total, invalid);
      return;
    }
  }
  if (privatize) {
    MG_DYNAMIC_SHARED(SharedT, cells);  // true positives | support | predicted
    const long long cell_count = 3 * size;
    for (long long c = threadIdx.x; c < cell_count; c += blockDim.x) cells[c] = 0;
    __syncthreads();
    mg::StatisticsSink<W, FIXED, SharedT> sink{
        cells, cells + size, cells + 2 * size, weight, shift, zero_weight_seen, moments};
    mg::sample_loop(y_true, y_pred, n, vector_loads, row_stride, column_stride, group, rules,
                    sink, invalid);
    sink.flush_misclassified(misclassified);
    if (moments) sink.flush_moments(exact_moments, float_moments);
    __syncthreads();
    for (long long c = threadIdx.x; c < cell_count; c += blockDim.x) {
      if (cells[c] == 0) continue;
      Acc* cell = c < size ? &true_positives[c]
                           : (c < 2 * size ? &support[c - size] : &predicted[c - 2 * size]);
      atomicAdd(cell, (Acc)cells[c]);
    }
  } else {
    mg::StatisticsSink<W, FIXED, Acc> sink{
        true_positives, support, predicted, weight, shift, zero_weight_seen, moments};
    mg::sample_loop(y_true, y_pred, n, vector_loads, row_stride, column_stride, group, rules,
                    sink, invalid);
    sink.flush_misclassified(misclassified);
    if (moments) sink.flush_moments(exact_moments, float_moments);
  }
  mg::flush_invalid(invalid_total, invalid);
}

// max |w| as float64 bits (non-negative doubles order like their bit
// patterns), for the fixed-point scale of deterministic=True.
// Launch: any 1-D grid; *max_weight_bits must start at 0.
template <typename W>
__global__ void max_abs_weight(const W* __restrict__ weight, long long n,
                               unsigned long long* __restrict__ max_weight_bits) {
  double largest = 0.0;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    double w = (double)weight[i];
    w = w < 0 ? -w : w;
    largest = w > largest ? w : largest;
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    double other = __shfl_xor_sync(mg::kFullWarp, largest, offset);
    largest = other > largest ? other : largest;
  }
  if (mg::lane_index() == 0 && largest > 0.0) {
    atomicMax(max_weight_bits, (unsigned long long)__double_as_longlong(largest));
  }
}

// Fixed-point sums back to float64: value * 2^-shift (exact power-of-two
// division, then one rounding of the 64-bit integer).
__global__ void fixed_point_to_float64(const unsigned long long* __restrict__ fixed,
                                       long long count,
                                       const unsigned long long* __restrict__ max_weight_bits,
                                       long long total_samples, double* __restrict__ out) {
  int shift = mg::fixed_point_shift(max_weight_bits, total_samples);
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x) {
    out[i] = ldexp((double)(long long)fixed[i], -shift);
  }
}
