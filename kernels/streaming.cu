// The streaming state of metrics_gpu.ClassificationMetrics: one launch per
// update adds a batch, one more (with reduce_metrics.cu) computes every metric.
//
// streaming_update<TrueT, PredT, W, C>: one read of a batch of labels, or of
// (N, K) scores (channel-first (N, K, d1, ...) too: every position a row),
// adds to the state the object owns:
// * the per-class counts [true positives | support | predicted | total |
//   misclassified] (3K + 2 cells; the misclassified weight is kappa's observed
//   disagreement, which total - sum(tp) loses when one class holds nearly all
//   the weight) and the weighted-kappa moments, privatised per block in
//   shared memory when they fit (config kCfgPrivatize); with kCfgMatrix also
//   the K x K matrix (global atomics: it is only read for confusion_matrix);
// * for score states, the sums of scores.cu's fused pass (argmax correctness,
//   -log p_t, Brier, hinge, top-k hits, calibration bins) per block, added to
//   the state by the last block in block order, so a batch adds the same bits
//   every run (score_state null: the argmax only, for label states fed scores);
// * with thresholds, the (2, K, H) histogram of each class's probability
//   (rows whose target is k, then the others) for the binned ROC AUC and AP;
// * the checks: rows left out (a target or prediction out of [0, K), a NaN
//   or infinite score, in a state of probabilities a row that is not
//   probabilities, a negative or non-finite weight) are counted, and the
//   first of each kind is kept as (update ordinal << 40 | row) by atomicMin,
//   so compute() can name the update call and the sample. A row left out
//   adds nothing anywhere;
// * for integer counts, whether the batch took them past 2^63 - 1 (int64,
//   as the host reads them): with integer weights each block adds its weight
//   sum modulo 2^64 and as a double into batch_weight (unit weights count
//   rows, fewer than 2^40: their sum cannot wrap), and the last block, from
//   those and the state's total, keeps the first such update (ordinal << 40)
//   in checks[kCheckOverflow]. Every count is at most the total, so the
//   total alone decides; compute() refuses such a state instead of reading
//   counts that wrapped (the batch cannot be taken back without a second
//   pass).
// The last block to finish (a ticket it resets itself) also writes the
// state's kappa moments as two doubles (moments_out), which is all
// label_metrics_from_statistics needs beside the counts: a state of labels
// is computed in one more launch.
// C is the count type: unsigned long long (counts, integer weights: exact)
// or double (float weights). The state is never read back during an update.
//
// streaming_update<TrueT, PredT, W, C, FEATURES>: FEATURES (bits kStream*,
// 0 for labels) compiles in only what a state and input layout use: wide
// rows, or the thresholds histogram (the host instantiates rows, wide rows,
// and rows with the histogram). A score instantiation holds at most 64
// registers on sm_80 / sm_90 (StreamMinBlocks) with no spill: its score
// sums, kappa moments and totals sit in per-thread shared columns
// (ThreadColumn), its config and the addresses of its dynamic shared memory
// (StreamSharedLayout) are read from a shared copy where used, and the
// checks are shared atomics of the rare rows left out.
// Launch shape: blocks of whole warps (<= kScoreBlockThreads); `group` lanes
// per score row as in scores.cu (1 for labels, and for channel-first maps,
// whose consecutive positions are consecutive threads: each class's read is
// coalesced); rows grid-strided, every lane running the same trips.
// Contiguous rows of many columns (kStreamWideRows, group a warp) are read
// 16 bytes a load, as fused_logits_wide reads them with a warp per row.
// Dynamic shared memory: 3 * n_bins BinCells, the top-k buckets of
// scores.cu ((num_top_k + 1) * blockDim.x doubles, score sums with top_k
// only), then the 3K + 2 privatised cells when config kCfgPrivatize is
// set (a label state's 3 ceil(K / splits) + 2 when kCfgClassSplits splits
// its classes between blocks), then the 2 K H cells of the thresholds
// histogram when kCfgPrivateHistogram is (the host sets it where they fit
// and a block has at least 2H rows, so that its flush costs less than the
// global atomics it saves).
// Limits: rows per launch < 2^40 (checks keep the row in 40 bits), update
// ordinals < 2^23; K < 2^31; top_k at most kMaxTopK values.
//
// streaming_compute<C>: one block per 256 classes reads the state and writes
// the score metrics (formulas of metrics_gpu._formulas.labels: score means,
// calibration error, binned ROC AUC / AP and their error bounds) into `out`
// (layout metrics_gpu._formulas.labels.STREAM_SCORE_SLOTS; its NumPy reference is
// stream_score_values), and the kappa moments as two doubles (for a state
// merged, synced or loaded since its last update); the last block (ticket,
// reset by itself) computes the averages over classes in class order.
#include "scores.cu"

namespace mg {

// Layout of the int64 config vector the host packs once per state and input
// layout (metrics_gpu/backends/launchers/streaming.py STREAM_CONFIG, same order).
enum StreamConfig {
  kCfgClasses = 0,
  kCfgInner,          // positions per image (1 for (N, K) scores)
  kCfgImageStride,    // score strides in elements: image, position, class
  kCfgInnerStride,
  kCfgColumnStride,
  kCfgGroup,          // lanes per score row
  kCfgIgnoreIndex,
  kCfgHasIgnore,
  kCfgFromLogits,
  kCfgClipEpsBits,    // double bits
  kCfgNumTopK,
  kCfgTopK,           // kMaxTopK values
  kCfgBins = kCfgTopK + kMaxTopK,
  kCfgThresholds,
  kCfgMatrix,         // also keep the K x K matrix
  kCfgPrivatize,      // the 3K + 2 counts in shared memory
  kCfgPrivateHistogram,  // the (2, K, H) histogram in shared memory (kStreamRanking)
  kCfgClassSplits,    // labels with kCfgPrivatize: blocks per row range (class ranges), >= 1
  kCfgBinaryDecision, // K = 2 with a threshold: class 1 where the row's margin passes the cut
  kCfgBinaryCutBits,  // double bits: the threshold t for probabilities, log(t / (1 - t)) for logits
  kCfgSize
};

enum StreamCheck {
  kCheckInvalid = 0,
  kCheckTarget,
  kCheckPrediction,
  kCheckWeight,
  kCheckOverflow,  // integer counts past 2^63 - 1: the update's key, row 0
  kChecks
};
// The host's copies: metrics_gpu/backends/kernel_sources.py STREAM_NO_ERROR, STREAM_ORDINAL_SHIFT
// (tests/test_kernel_interface.py holds them, and the enums here, to this file).
constexpr unsigned long long kNoError = 0x7fffffffffffffffull;
constexpr int kOrdinalShift = 40;  // rows per batch < 2^40; the host caps the ordinal
// A batch's weight sum summed as doubles is within a relative 2^-12 of the
// exact sum (at most 2^40 rows), so below 1.5 * 2^63 the exact sum is below
// 2^64 (its low word is the sum itself), and at or above it past 2^63.
constexpr double kBatchWeightExactBelow = 1.5 * 9223372036854775808.0;

// Counts of type C are exact integers (checked against 2^63), or doubles.
template <typename C>
struct IntegerCounts {
  static constexpr bool value = false;
};
template <>
struct IntegerCounts<unsigned long long> {
  static constexpr bool value = true;
};
// Integer weights into integer counts: a batch's sum may wrap 64 bits, so
// it is also summed as a double (unit weights need neither: no registers).
template <typename W, typename C>
struct SumsWeights {
  static constexpr bool value = false;
};
template <>
struct SumsWeights<long long, unsigned long long> {
  static constexpr bool value = true;
};

// A block's privatised count cells: 32-bit for unweighted labels into
// integer counts (a block reads fewer than 2^31 rows, which the host checks,
// so no cell passes 2^32; half the shared memory, half the class splits),
// the counts' own type otherwise.
template <typename W, typename C, bool kScores>
struct PrivateCell {
  typedef C type;
};
template <>
struct PrivateCell<unit_weight, unsigned long long, false> {
  typedef unsigned int type;
};

// The pred types that are (N, K) scores, not labels.
template <typename T>
struct is_stream_score {
  static constexpr bool value = false;
};
template <>
struct is_stream_score<float> {
  static constexpr bool value = true;
};
template <>
struct is_stream_score<double> {
  static constexpr bool value = true;
};
template <>
struct is_stream_score<float16_bits> {
  static constexpr bool value = true;
};
template <>
struct is_stream_score<bfloat16_bits> {
  static constexpr bool value = true;
};

template <typename PredT, bool SCORES = is_stream_score<PredT>::value>
struct StreamWiden {
  typedef float type;  // labels: unused
};
template <typename PredT>
struct StreamWiden<PredT, true> {
  typedef typename Widened<PredT>::type type;
};

// A row's weight as a count of type C: exact integers for unit and integer
// weights, the double itself for float weights.
template <typename C, typename W>
__device__ __forceinline__ C count_of(const W* weight, int64 row) {
  return (C)weight[row];
}
template <>
__device__ __forceinline__ unsigned long long count_of<unsigned long long, unit_weight>(
    const unit_weight*, int64) {
  return 1ull;
}
template <>
__device__ __forceinline__ unsigned long long count_of<unsigned long long, long long>(
    const long long* weight, int64 row) {
  return (unsigned long long)weight[row];
}

// Kappa moments of a thread: exact 128-bit sums for integer counts, doubles else.
template <typename C>
struct StreamMoments {
  U128 linear{0ull, 0ull}, quadratic{0ull, 0ull};
  __device__ void add(C w, int64 gap) {
    add_product(linear, (uint64)w, (uint64)gap);
    add_product_3(quadratic, (uint64)w, (uint64)gap, (uint64)gap);
  }
  __device__ void flush(uint64* exact, double*) {
    if (linear.low | linear.high) atomic_add_u128(&exact[0], linear);
    if (quadratic.low | quadratic.high) atomic_add_u128(&exact[2], quadratic);
  }
};
template <>
struct StreamMoments<double> {
  double linear = 0.0, quadratic = 0.0;
  __device__ void add(double w, int64 gap) {
    linear += w * (double)gap;
    quadratic += w * (double)gap * (double)gap;
  }
  __device__ void flush(uint64*, double* floats) {
    if (linear != 0.0) atomicAdd(&floats[0], linear);
    if (quadratic != 0.0) atomicAdd(&floats[1], quadratic);
  }
};

__device__ __forceinline__ void keep_first(unsigned long long& first, long long ordinal,
                                           int64 row) {
  unsigned long long key = ((unsigned long long)ordinal << kOrdinalShift) | (unsigned long long)row;
  if (key < first) first = key;
}

// The kappa moments as doubles: the exact 128-bit words (low + high * 2^64),
// or the float sums; read past L1 (other blocks added them atomically).
__device__ __forceinline__ void write_moments(const uint64* exact, const double* floats,
                                              double* out) {
  if (exact != nullptr) {
    out[0] = (double)read_fresh(exact) + (double)read_fresh(exact + 1) * 18446744073709551616.0;
    out[1] = (double)read_fresh(exact + 2) + (double)read_fresh(exact + 3) * 18446744073709551616.0;
  } else {
    out[0] = read_fresh(floats);
    out[1] = read_fresh(floats + 1);
  }
}

// Whether a row of a state of probabilities is one: every value in [0, 1]
// and the sum within `tolerance` of 1 (probability_tolerance). The lanes of
// the row's group read their columns (before the row's scan, which reads
// them again from the cache) and merge with width-`group` shuffles; the
// whole warp calls it. Out of line, and called before the scan: only states
// of probabilities pay its registers, and no scan result is live across the
// call (saved around it, they spilled). A row with a NaN or an infinity
// fails here or in the scan's check alike.
// How far from 1 a row of probabilities may sum: sqrt of the type's eps (the
// clip eps of the launch), at least 2^-7 (bfloat16's eps): probabilities made
// in half precision and widened (AMP or bfloat16 inference, saved as float32)
// sum to 1 only within the half type's rounding, about 3 * 2^-9 at worst for a
// bfloat16 softmax. The host's copy: metrics_gpu/_validation/__init__.py
// probability_sum_tolerance (HALF_PRECISION_SUM_TOLERANCE).
// bfloat16 rows take sqrt of their own eps, 2^-7 (BFLOAT16_EPS on the host):
// 8 significant bits round each probability by up to 2^-9 of itself.
template <typename PredT>
__device__ __forceinline__ double score_type_eps(const PredT*) { return 0.0; }
__device__ __forceinline__ double score_type_eps(const bfloat16_bits*) { return 0.0078125; }

template <typename PredT>
__device__ __forceinline__ double probability_tolerance(double clip_eps, const PredT* type) {
  const double least = 0.0078125;  // 2^-7: a half-precision softmax's rounding, widened
  const double eps = score_type_eps(type) > clip_eps ? score_type_eps(type) : clip_eps;
  const double tolerance = sqrt(eps);
  return tolerance > least ? tolerance : least;
}

// Whether a row of scores is probabilities: in [0, 1], summing to 1 within
// `tolerance`. Inlined: as a call, the values its caller holds across it
// spilled (the histogram of double scores).
template <typename PredT>
__device__ __forceinline__ bool probability_row(const PredT* row_scores, bool scan, int classes,
                                                int64 column_stride, int group,
                                                double tolerance) {
  typedef typename Widened<PredT>::type F;
  double sum = 0.0;
  F lowest = F(0), highest = F(0);
  if (scan) {
    for (int64 c = (int64)(lane_index() % (unsigned int)group); c < classes; c += group) {
      const F v = widen(row_scores[c * column_stride]);
      sum += (double)v;
      lowest = v < lowest ? v : lowest;
      highest = v > highest ? v : highest;
    }
  }
  for (int offset = group / 2; offset > 0; offset /= 2) {
    sum += __shfl_xor_sync(kFullWarp, sum, offset, group);
    const F low = __shfl_xor_sync(kFullWarp, lowest, offset, group);
    lowest = low < lowest ? low : lowest;
    const F high = __shfl_xor_sync(kFullWarp, highest, offset, group);
    highest = high > highest ? high : highest;
  }
  const double gap = sum - 1.0;
  return lowest >= F(0) && highest <= F(1) && (gap < 0.0 ? -gap : gap) <= tolerance;
}

// ThreadColumn (scores.cu): a thread's accumulators in shared memory.

// The kappa moments of a thread of a score instantiation, in its shared
// column: loaded, added to and stored back once a counted row.
template <typename C>
struct ColumnMoments {
  static constexpr int kWords = 4;  // linear, quadratic: low and high words
  ThreadColumn<uint64> words;
  __device__ void zero() {
    for (int i = 0; i < kWords; ++i) words[i] = 0ull;
  }
  __device__ void add(C w, int64 gap) {
    StreamMoments<C> m;
    m.linear = U128{words[0], words[1]};
    m.quadratic = U128{words[2], words[3]};
    m.add(w, gap);
    words[0] = m.linear.low;
    words[1] = m.linear.high;
    words[2] = m.quadratic.low;
    words[3] = m.quadratic.high;
  }
  __device__ StreamMoments<C> sums() const {
    StreamMoments<C> m;
    m.linear = U128{words[0], words[1]};
    m.quadratic = U128{words[2], words[3]};
    return m;
  }
};
template <>
struct ColumnMoments<double> {
  static constexpr int kWords = 2;
  ThreadColumn<uint64> words;  // the doubles' bits
  __device__ void zero() {
    for (int i = 0; i < kWords; ++i) words[i] = 0ull;
  }
  __device__ void add(double w, int64 gap) {
    StreamMoments<double> m = sums();
    m.add(w, gap);
    words[0] = (uint64)__double_as_longlong(m.linear);
    words[1] = (uint64)__double_as_longlong(m.quadratic);
  }
  __device__ StreamMoments<double> sums() const {
    StreamMoments<double> m;
    m.linear = __longlong_as_double((long long)words[0]);
    m.quadratic = __longlong_as_double((long long)words[1]);
    return m;
  }
};

// The config vector as the block copied it to shared memory, read where a
// value is used (volatile: not held in a register across the row loop).
struct StreamSettings {
  const long long* values;
  __device__ long long operator[](int i) const { return read_fresh(values + i); }
};

// The features a score instantiation compiles in (its FEATURES argument; 0
// for labels): what a state does not use costs no registers. The host's
// copies: launchers/streaming.py STREAM_WIDE_ROWS, STREAM_RANKING, STREAM_ONE_COLUMN.
constexpr int kStreamWideRows = 1;  // a warp per row with 16-byte loads (scan_row_wide)
constexpr int kStreamRanking = 2;   // the (2, K, H) thresholds histogram
// K = 2 read from a binary head's one column of scores (a thread per row,
// the row [0, z] or [1 - p, p] built in registers: no (N, 2) copy).
constexpr int kStreamOneColumn = 4;

// ptxas's register budget, as blocks of 256 threads an SM must hold (the
// launch bound's second argument; bench/kernel_resources.py shows each
// choice, and the NVRTC gate fails on a spill on sm_80, sm_90 and sm_100):
// * 4 for scores, double ones included, with the thresholds histogram
//   (kStreamRanking) or without: 64 registers, half the warps of an SM
//   (sm_100's ptxas spills there: 3, 80 registers);
// * 5 for labels (40-48 registers, 40 warps per SM; left to choose, ptxas
//   took 40 for 64-bit labels into float counts on sm_90 and spilled once
//   the classes could be split between blocks), but on sm_100, where it
//   takes 32 and spills: 1 (56-68 registers).
// What keeps the scores within these: the values the row loop does not need
// each row (class and cell counts, flags, bin counts, the shared-memory
// layout, the grid step, the lanes per row, the row's leader lane) are read
// again from shared memory where used; the next grid step is found from the
// row; a row's probability check is inlined (its call's convention spilled
// the values held across it) and a row that fails it is not scanned; the
// histogram's loop bins with the edge rule inlined (a call there held the
// instantiations at 69-80 registers); the thread columns' stride is a
// constant (ThreadColumn). With these the histogram of double scores came
// from 74-80 registers (3 blocks) to 64.
template <typename PredT, int FEATURES>
struct StreamMinBlocks {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
  static constexpr int kLabels = 1, kRows = 3, kRanking = 3;
#else
  static constexpr int kLabels = 5, kRows = 4, kRanking = 4;
#endif
  static constexpr int value = !is_stream_score<PredT>::value            ? kLabels
                               : (FEATURES & kStreamRanking) != 0 ? kRanking
                                                                  : kRows;
};

// The block's dynamic shared memory, in order: 3 n_bins BinCells, the top-k
// buckets ((num_top_k + 1) * blockDim.x doubles, where score sums are kept),
// the 3 span + 2 cells (kCfgPrivatize: span() classes, all K but where a
// label state's classes are split between blocks; PrivateCell's type), the
// (2, K, H) thresholds histogram (kCfgPrivateHistogram). Each part's
// address is found from the shared config where used, not held across the
// row loop: a 64-bit address held there costs score instantiations
// registers (the histogram's spilled).
// Label instantiations have no bins or buckets: their cells start at 0.
template <typename C, bool kScores>
struct StreamSharedLayout {
  unsigned char* dynamic;
  StreamSettings settings;
  bool score_sums;  // score_state given: uniform
  __device__ BinCell* bins() const { return reinterpret_cast<BinCell*>(dynamic); }
  __device__ int top_k_buckets() const {
    const int num_top_k = kScores ? (int)settings[kCfgNumTopK] : 0;
    return score_sums && num_top_k > 0 ? num_top_k + 1 : 0;
  }
  __device__ double* buckets() const {
    return reinterpret_cast<double*>(bins() + (kScores ? 3 * settings[kCfgBins] : 0));
  }
  template <typename P = C>
  __device__ P* cells() const {
    return reinterpret_cast<P*>(buckets() + (size_t)top_k_buckets() * blockDim.x);
  }
  // The classes of a block's privatised cells: ceil(K / kCfgClassSplits)
  // for labels (the block counts range blockIdx.x % splits), K for scores.
  __device__ int64 span() const {
    const int64 splits = kScores ? 1 : settings[kCfgClassSplits];
    return (settings[kCfgClasses] + splits - 1) / splits;
  }
  __device__ C* histogram() const {
    return cells() + (settings[kCfgPrivatize] != 0 ? 3 * span() + 2 : 0);
  }
};

// A counted row into count cells of `span` classes (diagonal, support,
// predicted), t and p relative to the cells' first class: a class outside
// them (another block's range) adds nothing.
template <typename P>
__device__ __forceinline__ void add_row_cells(P* cells, int64 span, int64 t, int64 p, P w) {
  if ((uint64)t < (uint64)span) {
    if (t == p) atomicAdd(&cells[t], w);
    atomicAdd(&cells[span + t], w);
  }
  if ((uint64)p < (uint64)span) atomicAdd(&cells[2 * span + p], w);
}

// The checks of a block: rows left out, and the first of each kind, added
// by shared atomics where a row is left out (rare), flushed once a block.
__device__ __forceinline__ void keep_first_shared(unsigned long long* first, long long ordinal,
                                                  int64 row) {
  atomicMin(first, ((unsigned long long)ordinal << kOrdinalShift) | (unsigned long long)row);
}

template <typename TrueT, typename PredT, typename W, typename C, int FEATURES>
__global__ void __launch_bounds__(kScoreBlockThreads, StreamMinBlocks<PredT, FEATURES>::value)
streaming_update(const TrueT* y_true, const PredT* preds, const W* weight, int64 n,
                 long long ordinal, const long long* config, C* counts, C* matrix,
                 uint64* exact_moments, double* float_moments, C* histogram,
                 double* score_state, double* partials, unsigned int* ticket,
                 unsigned long long* checks, double* moments_out,
                 unsigned long long* batch_weight) {
  constexpr bool kScores = is_stream_score<PredT>::value;
  constexpr bool kWide = kScores && (FEATURES & kStreamWideRows) != 0;
  constexpr bool kRanking = kScores && (FEATURES & kStreamRanking) != 0;
  constexpr bool kOneColumn = kScores && (FEATURES & kStreamOneColumn) != 0;
  typedef typename StreamWiden<PredT>::type F;
  typedef typename PrivateCell<W, C, kScores>::type P;  // the privatised cells' type
  // K, n_bins, num_top_k, the flags and the cell counts: read again after
  // the row loop rather than held across it.
  int64 K = config[kCfgClasses];
  int n_bins = kScores ? (int)config[kCfgBins] : 0;
  bool privatize = config[kCfgPrivatize] != 0;
  int num_top_k = kScores ? (int)config[kCfgNumTopK] : 0;
  __shared__ long long shared_config[kCfgSize];
  for (int i = threadIdx.x; i < kCfgSize; i += blockDim.x) shared_config[i] = config[i];
  const StreamSettings settings{shared_config};

  __shared__ double scratch[kReducedSlots * kWarpSize];
  __shared__ C count_scratch[kWarpSize];
  // Score states: the block's misclassified weight, one shared atomic per
  // misclassified row (beside that row's K columns of work), not a register
  // per thread. Label states keep it in a register, summed by warp.
  __shared__ C misclassified_shared[1];
  __shared__ unsigned long long block_checks[kChecks];  // kCheckOverflow: unused
  __shared__ unsigned int last_block;
  __shared__ long long limits[kMaxTopK];
  MG_DYNAMIC_SHARED(unsigned char, dynamic);
  const StreamSharedLayout<C, kScores> layout{dynamic, settings, score_state != nullptr};
  __syncthreads();  // the shared config, which the layout reads
  const int top_k_buckets = layout.top_k_buckets();
  int64 cell_count = 3 * layout.span() + 2;
  for (int i = threadIdx.x; i < 3 * n_bins; i += blockDim.x) layout.bins()[i].fixed = 0ull;
  for (int i = threadIdx.x; i < num_top_k; i += blockDim.x) limits[i] = config[kCfgTopK + i];
  for (int j = 0; j < top_k_buckets; ++j) layout.buckets()[j * blockDim.x + threadIdx.x] = 0.0;
  if (privatize) {
    P* cells_shared = layout.template cells<P>();
    for (int64 i = threadIdx.x; i < cell_count; i += blockDim.x) cells_shared[i] = P(0);
  }
  int64 histogram_cells = kRanking ? 2 * K * config[kCfgThresholds] : 0;
  bool private_histogram = kRanking && config[kCfgPrivateHistogram] != 0;
  if (private_histogram) {
    C* histogram_shared = layout.histogram();
    for (int64 i = threadIdx.x; i < histogram_cells; i += blockDim.x) histogram_shared[i] = C(0);
  }
  if (threadIdx.x < kChecks) {
    block_checks[threadIdx.x] = threadIdx.x == kCheckInvalid ? 0ull : kNoError;
  }
  if (kScores && threadIdx.x == 0) misclassified_shared[0] = C(0);
  // Score instantiations: the thread's score sums and kappa moments in
  // shared columns (ThreadColumn); label ones keep them in registers.
  __shared__ double sum_columns[kScores ? kScalarSlots * kScoreBlockThreads : 1];
  __shared__ uint64 moment_columns[kScores ? ColumnMoments<C>::kWords * kScoreBlockThreads : 1];
  // The weight total, and with SumsWeights the same as a double, likewise.
  __shared__ C total_column[kScores ? kScoreBlockThreads : 1];
  __shared__ double weight_column[kScores && SumsWeights<W, C>::value ? kScoreBlockThreads : 1];
  const ThreadColumn<double> column_sums{sum_columns + threadIdx.x};
  ColumnMoments<C> column_moments{ThreadColumn<uint64>{moment_columns + threadIdx.x}};
  if constexpr (kScores) {
    for (int i = 0; i < kScalarSlots; ++i) column_sums[i] = 0.0;
    column_moments.zero();
    total_column[threadIdx.x] = C(0);
    if constexpr (SumsWeights<W, C>::value) weight_column[threadIdx.x] = 0.0;
  }
  // Unweighted calibration bins in fixed point (exact, bit-identical);
  // weighted ones as doubles. (Only unit_weight instantiations are launched
  // without weights: the host gives float counts weights of 1.0.)
  bool fixed_bins = CountedBins<W>::value && n_bins > 0;
  const int first_group = kWide ? kWarpSize : (kScores ? (int)config[kCfgGroup] : 1);
  // The bins' fixed-point shift and the rows of a grid step (< 2^31 threads)
  // in shared memory, read where used, like the config: held in registers
  // across the row loop they spilled (thresholds histogram).
  __shared__ int shift;
  __shared__ unsigned int rows_per_step;
  // Label states whose counts do not fit a block's shared memory split the
  // classes between blocks (kCfgClassSplits, the host makes the grid a
  // multiple of it): blocks b, b + 1, ..., b + splits - 1 read the same rows,
  // block b + j counting the classes of range j; the first of them also
  // counts the rest (total, kappa moments, matrix, checks). One split: each
  // block its own rows, as scores.
  const unsigned int splits = kScores ? 1u : (unsigned int)config[kCfgClassSplits];
  const bool counts_rows = kScores || blockIdx.x % splits == 0u;
  if (threadIdx.x == 0) {
    shift = fixed_bins ? bin_fixed_shift(nullptr, n) : 0;
    rows_per_step = kScores ? (unsigned int)grid_threads() / (unsigned int)first_group
                            : gridDim.x / splits * blockDim.x;
  }
  __syncthreads();

  C total[1] = {C(0)};
  double weight_sum = 0.0;  // with SumsWeights: the same sum as a double, which cannot wrap
  C misclassified = C(0);
  StreamMoments<C> moments;  // label instantiations

  // K < 2^31 as an int, and the counts' cells where used: fewer registers
  // held across the row loop.
  const int classes = (int)K;
  const unsigned int lane = lane_index();
  int64 base = kScores ? global_warp_base() / first_group
                       : (int64)(blockIdx.x / splits) * blockDim.x +
                             (threadIdx.x / kWarpSize) * kWarpSize;
  while (base < n) {
    // Lanes per row, read again each row: held across the loop it spilled.
    const int group = kWide ? kWarpSize : (kScores ? (int)settings[kCfgGroup] : 1);
    bool leader = true;  // the row's first lane: set after the scan, where it is used
    const int64 row = base + lane / group;
    const bool active = row < n;
    const int64 t = active ? (int64)y_true[row] : 0;
    const bool counted =
        active && !(settings[kCfgHasIgnore] != 0 && t == (int64)settings[kCfgIgnoreIndex]);
    const bool target_ok = t >= 0 && t < classes;
    int64 p = 0;
    bool pred_ok = true;
    bool valid = false;
    bool weight_ok = true;
    // kStreamRanking: the row's scores, softmax max and denominator, for its histogram.
    const PredT* ranked_row = nullptr;
    double ranked_max = 0.0, ranked_sum = 1.0;
    if constexpr (kScores) {
      const bool scan = counted && target_ok;
      // Rows of (N, K) scores (inner 1) take no division; channel-first
      // maps split the row into image and position.
      const int64 inner = settings[kCfgInner];
      const int64 image = !scan ? 0 : (inner == 1 ? row : row / inner);
      const PredT* row_scores =
          preds + (scan ? image * settings[kCfgImageStride] +
                              (row - image * inner) * settings[kCfgInnerStride]
                        : 0);
      const int64 column_stride = kWide ? 1 : settings[kCfgColumnStride];
      // A row that is not probabilities (when they are asked for) is not
      // scanned: it is left out, and only `scanned` is held past the check.
      bool scanned = scan;
      F z_t = F(0);
      RowScan<F> r;
      if constexpr (kOneColumn) {
        // The row [a, s] of the column's score s: a = 0 for a logit, 1 - s
        // (in F) for a probability, which must be in [0, 1] (the row then
        // sums to 1); NaN fails the test.
        const bool logits = settings[kCfgFromLogits] != 0;
        const F s = scan ? widen(row_scores[0]) : F(0);
        const F a = logits ? F(0) : F(1) - s;
        scanned = scan && (logits || (s >= F(0) && s <= F(1)));
        z_t = t == 1 ? s : a;
        r = scan_pair(a, s, scanned, scanned ? (int)t : 0, z_t, logits);
      } else {
        if (settings[kCfgFromLogits] == 0) {  // uniform: the whole warp takes it
          const double tolerance =
              probability_tolerance(__longlong_as_double(settings[kCfgClipEpsBits]), row_scores);
          scanned = probability_row(row_scores, scan, classes, column_stride, group, tolerance) &&
                    scan;
        }
        z_t = scanned ? widen(row_scores[t * column_stride]) : F(0);
        if constexpr (kWide) {  // contiguous columns
          r = scan_row_wide<1>(row_scores, scanned, scanned ? (int)t : 0, z_t, classes,
                               (int)lane, kWarpSize, settings[kCfgFromLogits] != 0, false);
          merge_lanes(r, kWarpSize, settings[kCfgFromLogits] != 0, false);
        } else {
          r = scan_row(row_scores, scanned, scanned ? (int)t : 0, z_t, classes, column_stride,
                       group, settings[kCfgFromLogits] != 0, false);
        }
      }
      // The weight read after the scan: no registers held across its loads.
      const double w = counted ? weight_value(weight, row) : 1.0;
      weight_ok = w >= 0.0 && w - w == 0.0;  // NaN and infinities fail
      p = r.best_index;
      if (settings[kCfgBinaryDecision] != 0 && scanned) {  // uniform: the whole warp takes it
        // A binary state with a threshold: class 1 where the row's class-1
        // probability passes it, compared in float64 as the margin z1 - z0
        // of logits (sigmoid of it is that probability) or p1 itself; not the
        // argmax. The score metrics (top-k, calibration) stay the argmax's.
        const double s1 = (double)widen(row_scores[kOneColumn ? 0 : column_stride]);
        // One column: the logit's row is [0, z], whose margin is z itself.
        const double margin = settings[kCfgFromLogits] != 0 && !kOneColumn
                                  ? s1 - (double)widen(row_scores[0])
                                  : s1;
        p = margin > __longlong_as_double(settings[kCfgBinaryCutBits]) ? 1 : 0;
      }
      pred_ok = !r.nonfinite && scanned == scan;  // scan: counted && target_ok
      valid = scan && pred_ok && weight_ok;
      // The lanes per row read again: the row's lane offset held across the
      // scan spilled (thresholds histogram of double scores).
      leader = lane % (unsigned int)(kWide ? kWarpSize : (int)settings[kCfgGroup]) == 0;
      double confidence = 0.0, correct = 0.0;
      if (valid && leader) {
        // The per-row terms of fused_logits_pass (scores.cu add_row_terms).
        add_row_terms(r, t, z_t, w, settings[kCfgFromLogits] != 0,
                      __longlong_as_double(settings[kCfgClipEpsBits]), false, column_sums,
                      confidence, correct);
        if (layout.top_k_buckets() > 0) {
          const int bucket = top_k_bucket(r.rank, limits, (int)settings[kCfgNumTopK]);
          layout.buckets()[bucket * blockDim.x + threadIdx.x] += w;
        }
      }
      const int row_bins = (int)settings[kCfgBins];
      if (row_bins > 0) {  // the whole warp: add_to_bin shuffles
        const int bin = valid && leader ? calibration_bin(confidence, row_bins) : -1;
        const double w_confidence = w * (confidence == confidence ? confidence : 0.0);
        if (CountedBins<W>::value) {  // unweighted: 32-bit counts, fixed-point confidence
          add_to_bin(layout.bins(), row_bins, bin, valid && leader ? 1u : 0u,
                     valid && leader ? to_fixed(w_confidence, read_fresh(&shift)) : 0ull,
                     valid && leader && correct != 0.0 ? 1u : 0u);
        } else {
          add_to_bin(layout.bins(), row_bins, bin, valid && leader ? w : 0.0,
                     valid && leader ? w_confidence : 0.0, valid && leader ? w * correct : 0.0);
        }
      }
      if constexpr (kRanking) {  // binned after the counts, where fewer values are live
        ranked_row = row_scores;
        ranked_max = (double)r.max_finite;
        ranked_sum = settings[kCfgFromLogits] != 0 ? softmax_denominator(r, z_t) : 1.0;
      }
    } else {
      const double w = counted ? weight_value(weight, row) : 1.0;
      weight_ok = w >= 0.0 && w - w == 0.0;
      p = active ? (int64)preds[row] : 0;
      pred_ok = p >= 0 && p < classes;
      valid = counted && target_ok && pred_ok && weight_ok;
    }
    if (counted && !valid && leader && counts_rows) {  // rare: shared atomics, no registers
      atomicAdd(&block_checks[kCheckInvalid], 1ull);
      if (!target_ok) keep_first_shared(&block_checks[kCheckTarget], ordinal, row);
      if (target_ok && !pred_ok) keep_first_shared(&block_checks[kCheckPrediction], ordinal, row);
      if (!weight_ok) keep_first_shared(&block_checks[kCheckWeight], ordinal, row);
    }
    if (valid && leader) {
      const C w_count = count_of<C>(weight, row);
      const int64 k = classes;
      if (settings[kCfgMatrix] != 0 && counts_rows) atomicAdd(&matrix[t * k + p], w_count);
      if constexpr (kScores) {
        C* cells = settings[kCfgPrivatize] != 0 ? layout.cells() : counts;
        if (t == p) atomicAdd(&cells[t], w_count);
        atomicAdd(&cells[k + t], w_count);
        atomicAdd(&cells[2 * k + p], w_count);
      } else {
        // The row's classes within the block's range (all of them unless
        // split): unsigned compares, as t - lo or p - lo may be negative.
        if (settings[kCfgPrivatize] != 0) {
          const int64 span = layout.span();
          const int64 lo = (int64)(blockIdx.x % splits) * span;
          add_row_cells(layout.template cells<P>(), span, t - lo, p - lo, (P)w_count);
        } else {
          add_row_cells(counts, k, t, p, w_count);
        }
      }
      const int64 gap = t > p ? t - p : p - t;
      if constexpr (kScores) {
        total_column[threadIdx.x] += w_count;
        if constexpr (SumsWeights<W, C>::value) weight_column[threadIdx.x] += (double)w_count;
        if (t != p) atomicAdd(&misclassified_shared[0], w_count);
        column_moments.add(w_count, gap);
      } else if (counts_rows) {
        total[0] += w_count;
        if constexpr (SumsWeights<W, C>::value) weight_sum += (double)w_count;
        if (t != p) misclassified += w_count;
        moments.add(w_count, gap);
      }
    }
    if constexpr (kRanking) {
      if (valid) {
        // Every lane of the row's group bins its own columns' probabilities.
        const int thresholds = (int)settings[kCfgThresholds];
        const bool from_logits = settings[kCfgFromLogits] != 0;
        const int64 column_stride = kWide ? 1 : settings[kCfgColumnStride];
        const C w_count = count_of<C>(weight, row);
        C* cells_of = settings[kCfgPrivateHistogram] != 0 ? layout.histogram() : histogram;
        // The lanes per row read again, not the row's group held through the
        // counts above (fewer registers across them).
        const int lanes = kWide ? kWarpSize : (int)settings[kCfgGroup];
        for (int64 c = (int64)(lane_index() % (unsigned int)lanes); c < classes; c += lanes) {
          double v;
          if constexpr (kOneColumn) {  // the row [a, s] again, as its scan built it
            const F s = widen(ranked_row[0]);
            v = (double)(c == 1 ? s : (from_logits ? F(0) : F(1) - s));
          } else {
            v = (double)widen(ranked_row[c * column_stride]);
          }
          const double probability = from_logits ? exp(v - ranked_max) / ranked_sum : v;
          const int64 b = calibration_bin<true>(probability, thresholds);
          atomicAdd(cells_of + (c == t ? 0 : (int64)classes * thresholds) + c * thresholds + b,
                    w_count);
        }
      }
    }
    // The next grid step from the row, not a base held across the row's
    // work: one 64-bit value fewer there (the lanes per row read again).
    const int step_group = kWide ? kWarpSize : (kScores ? (int)settings[kCfgGroup] : 1);
    base = row - lane / step_group + read_fresh(&rows_per_step);
  }

  // The block's counts: shared cells to the state, moments, total, checks.
  // The class and cell counts and the privatisation flags read again from
  // the shared config rather than held in registers across the row loop
  // (where the thresholds histogram's instantiations spilled them).
  K = settings[kCfgClasses];
  const int64 span = layout.span();
  cell_count = 3 * span + 2;
  histogram_cells = kRanking ? 2 * K * settings[kCfgThresholds] : 0;
  privatize = settings[kCfgPrivatize] != 0;
  private_histogram = kRanking && settings[kCfgPrivateHistogram] != 0;
  n_bins = kScores ? (int)settings[kCfgBins] : 0;
  num_top_k = kScores ? (int)settings[kCfgNumTopK] : 0;
  fixed_bins = CountedBins<W>::value && n_bins > 0;
  if constexpr (kScores) {
    total[0] = total_column[threadIdx.x];
    weight_sum = weight_column[threadIdx.x];
  }
  block_sum(total, count_scratch);
  if (threadIdx.x == 0 && total[0] != C(0)) {
    if (privatize) {
      atomicAdd(&layout.template cells<P>()[3 * span], (P)total[0]);
    } else {
      atomicAdd(&counts[3 * K], total[0]);
    }
  }
  if constexpr (SumsWeights<W, C>::value) {  // the whole block sums
    double weight_sums[1] = {weight_sum};
    block_sum(weight_sums, scratch);
    if (threadIdx.x == 0 && weight_sums[0] != 0.0) {
      atomicAdd(&batch_weight[0], (unsigned long long)total[0]);
      atomicAdd(reinterpret_cast<double*>(batch_weight + 1), weight_sums[0]);
    }
  }
  // The misclassified weight by warp, not in block_sum beside the total: a
  // second value there costs the update loop registers (ptxas: 56 instead
  // of 48 with integer weights, a quarter of the resident warps).
  if constexpr (!kScores) {
    for (int offset = kWarpSize / 2; offset > 0; offset >>= 1)
      misclassified += __shfl_xor_sync(kFullWarp, misclassified, offset);
    if (lane == 0 && misclassified != C(0)) {
      if (privatize) {
        atomicAdd(&layout.template cells<P>()[3 * span + 1], (P)misclassified);
      } else {
        atomicAdd(&counts[3 * K + 1], misclassified);
      }
    }
    moments.flush(exact_moments, float_moments);
  } else {
    column_moments.sums().flush(exact_moments, float_moments);
  }
  __syncthreads();
  if (threadIdx.x == 0 && block_checks[kCheckInvalid] != 0ull) {
    atomicAdd(&checks[kCheckInvalid], block_checks[kCheckInvalid]);
  }
  if (threadIdx.x > kCheckInvalid && threadIdx.x < kCheckOverflow &&
      block_checks[threadIdx.x] != kNoError) {
    atomicMin(&checks[threadIdx.x], block_checks[threadIdx.x]);
  }
  if (kScores && threadIdx.x == 0 && misclassified_shared[0] != C(0)) {
    atomicAdd(&counts[3 * K + 1], misclassified_shared[0]);
  }
  if (privatize) {
    // Cell i of part i / span (diagonal, support, predicted; then the total
    // and misclassified weight) is class lo + i % span of that part.
    const P* cells_shared = layout.template cells<P>();
    const int64 lo = (int64)(blockIdx.x % splits) * span;
    for (int64 i = threadIdx.x; i < cell_count; i += blockDim.x) {
      const C value = (C)cells_shared[i];
      if (value == C(0)) continue;
      if (i >= 3 * span) {  // the total and the misclassified weight
        atomicAdd(&counts[3 * K + (i - 3 * span)], value);
        continue;
      }
      const int64 part = i / span;
      const int64 c = lo + (i - part * span);  // < K: no row counts past it
      atomicAdd(&counts[part * K + c], value);
    }
  }
  if (private_histogram) {
    const C* histogram_shared = layout.histogram();
    for (int64 i = threadIdx.x; i < histogram_cells; i += blockDim.x) {
      const C value = histogram_shared[i];
      if (value != C(0)) atomicAdd(&histogram[i], value);
    }
  }
  // Score sums (score states only): this block's row of partials.
  const bool score_sums = kScores && score_state != nullptr;  // uniform
  const int slots = kScalarSlots + num_top_k + 3 * n_bins;
  if (score_sums) {
    double* own = partials + (int64)blockIdx.x * slots;
    double sums[kScalarSlots];
    for (int i = 0; i < kScalarSlots; ++i) sums[i] = column_sums[i];
    block_sum(sums, scratch);
    if (threadIdx.x == 0) {
      for (int i = 0; i < kScalarSlots; ++i) own[i] = sums[i];
    }
    top_k_block_hits(layout.buckets(), limits, num_top_k, scratch, own + kScalarSlots);
    for (int i = threadIdx.x; i < 3 * n_bins; i += blockDim.x) {
      const bool count = CountedBins<W>::value && (i < n_bins || i >= 2 * n_bins);
      own[kScalarSlots + num_top_k + i] =
          bin_cell_value(layout.bins()[i], count, fixed_bins, read_fresh(&shift));
    }
  }
  // The last block to finish adds the partials in block order into the state
  // and writes the state's kappa moments as two doubles (what
  // label_metrics_from_statistics reads), then resets the ticket.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last_block = atomicAdd(ticket, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last_block) return;  // block-uniform
  if (score_sums) {
    for (int i = threadIdx.x; i < slots; i += blockDim.x) {
      double sum = 0.0;
      for (unsigned int b = 0; b < gridDim.x; ++b) {
        sum += read_fresh(partials + (int64)b * slots + i);
      }
      score_state[i] += sum;
    }
  }
  if (threadIdx.x == 0) {
    write_moments(exact_moments, float_moments, moments_out);
    if constexpr (IntegerCounts<C>::value) {
      // The state's total was below 2^63 before (else already kept); a batch
      // sum below 2^63 then cannot wrap it, and the total says the rest.
      bool past = (read_fresh((const unsigned long long*)&counts[3 * K]) >> 63) != 0ull;
      if constexpr (SumsWeights<W, C>::value) {
        const double approx = read_fresh(reinterpret_cast<const double*>(batch_weight + 1));
        past = past || approx >= kBatchWeightExactBelow || (read_fresh(batch_weight) >> 63) != 0ull;
        batch_weight[0] = 0ull;
        batch_weight[1] = 0ull;
      }
      if (past) atomicMin(&checks[kCheckOverflow], (unsigned long long)ordinal << kOrdinalShift);
    }
    *ticket = 0u;
  }
}

// ---------------------------------------------------------------------------
// compute: score metrics and binned ranking metrics from the state.
// ---------------------------------------------------------------------------

// Output slots (metrics_gpu._formulas.labels.STREAM_SCORE_SLOTS, same order), then
// top-k accuracies, the calibration proportion / confidence / accuracy per
// bin, and with thresholds the per-class ROC AUC, AP and their error bounds.
enum StreamScoreSlot {
  kOutAccuracy = 0,
  kOutCrossEntropy,
  kOutPerplexity,
  kOutBrier,
  kOutHinge,
  kOutCalibration,
  kOutMaxCalibration,
  kOutTotalWeight,
  kOutRocAuc,
  kOutRocAucMacro,
  kOutRocAucWeighted,
  kOutRocAucMicro,
  kOutRocAucBound,
  kOutAveragePrecision,
  kOutAveragePrecisionMacro,
  kOutAveragePrecisionWeighted,
  kOutAveragePrecisionMicro,
  kOutAveragePrecisionBound,
  kOutSlots
};

__device__ __forceinline__ double stream_nan() {
  return __longlong_as_double(0x7ff8000000000000ll);
}

// ROC AUC and AP of one class from its histogram (bins ascending), by a sweep
// of the thresholds from the top bin down: the trapezoid between thresholds
// (pairs in one bin count 1/2, as tied scores), and AP = sum over bins of
// (positives in bin / P) * precision at its threshold, as scikit-learn's
// step rule. Error bounds against the exact values of the unbinned scores:
// ROC AUC within sum_b P_b N_b / (2 P N); AP within the range of the exact
// AP over every order of the samples inside the bins (below).
struct RankAreas {
  double positives, negatives, auc, auc_bound, ap, ap_bound;
};

template <typename C>
__device__ RankAreas rank_areas(const C* positive, const C* negative, int64 stride, int64 bins) {
  double p_total = 0.0, n_total = 0.0;
  for (int64 b = 0; b < bins; ++b) {
    p_total += (double)positive[b * stride];
    n_total += (double)negative[b * stride];
  }
  // The AP bound: max(upper - AP, AP - lower) / P, the exact AP's range over
  // every order of the samples inside the bins (the reference and its
  // derivation: metrics_gpu._formulas.labels.binned_rank_areas).
  double tp = 0.0, fp = 0.0, area = 0.0, ties = 0.0, ap = 0.0, ap_upper = 0.0, ap_lower = 0.0;
  for (int64 b = bins - 1; b >= 0; --b) {
    const double pb = (double)positive[b * stride], nb = (double)negative[b * stride];
    const double above = tp;
    area += nb * (tp + 0.5 * pb);
    ties += pb * nb;
    tp += pb;
    fp += nb;
    if (pb > 0.0) {
      const double precision = tp / (tp + fp);
      ap += pb * precision;
      ap_upper += pb * (tp / (tp + fp - nb) - precision);
      const double lowest = fp > 0.0 ? pb - fp * log1p(pb / (above + fp)) : pb;
      ap_lower += pb * precision - lowest;
    }
  }
  const double ap_bound = ap_upper > ap_lower ? ap_upper : ap_lower;
  RankAreas r;
  r.positives = p_total;
  r.negatives = n_total;
  const bool defined = p_total > 0.0 && n_total > 0.0;
  r.auc = defined ? area / (p_total * n_total) : stream_nan();
  r.auc_bound = defined ? 0.5 * ties / (p_total * n_total) : stream_nan();
  r.ap = p_total > 0.0 ? ap / p_total : stream_nan();
  r.ap_bound = p_total > 0.0 ? ap_bound / p_total : stream_nan();
  return r;
}

// Blocks of 256 threads per SM streaming_compute is compiled for: 4, so 64
// registers (ptxas's own choice was 64-74 on sm_90); sm_100 and later:
// ptxas's own choice (at 64 it spills).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
constexpr int kComputeMinBlocks = 0;
#else
constexpr int kComputeMinBlocks = 4;
#endif

template <typename C>
__global__ void __launch_bounds__(kScoreBlockThreads, kComputeMinBlocks)
streaming_compute(const long long* config, const double* score_state, const C* histogram,
                  const uint64* exact_moments, const double* float_moments,
                  double* moments_out, double* pooled, unsigned int* ticket, double* out) {
  const int64 K = config[kCfgClasses];
  const int num_top_k = (int)config[kCfgNumTopK];
  const int n_bins = (int)config[kCfgBins];
  const int64 H = config[kCfgThresholds];
  const int64 per_class = kOutSlots + num_top_k + 3 * n_bins;
  __shared__ unsigned int last_block;
  __shared__ double scratch[kReducedSlots * kWarpSize];

  // Per-class ranking areas, and the pooled histogram (micro average).
  if (H > 0) {
    for (int64 k = (int64)blockIdx.x * blockDim.x + threadIdx.x; k < K; k += grid_threads()) {
      RankAreas r = rank_areas(histogram + k * H, histogram + K * H + k * H, 1, H);
      out[per_class + k] = r.auc;
      out[per_class + K + k] = r.ap;
      out[per_class + 2 * K + k] = r.auc_bound;
      out[per_class + 3 * K + k] = r.ap_bound;
      out[per_class + 4 * K + k] = r.positives;
    }
    for (int64 b = (int64)blockIdx.x * blockDim.x + threadIdx.x; b < H; b += grid_threads()) {
      double positive = 0.0, negative = 0.0;
      for (int64 k = 0; k < K; ++k) {
        positive += (double)histogram[k * H + b];
        negative += (double)histogram[K * H + k * H + b];
      }
      pooled[b] = positive;
      pooled[H + b] = negative;
    }
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last_block = atomicAdd(ticket, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last_block) return;

  // Averages over the classes whose AUC (AP) is defined, in class order.
  // AUC: sum, classes, positives-weighted sum, positives, bound sum; AP the same.
  double acc[5] = {0.0, 0.0, 0.0, 0.0, 0.0};
  double ap_acc[5] = {0.0, 0.0, 0.0, 0.0, 0.0};
  if (H > 0) {
    for (int64 k = threadIdx.x; k < K; k += blockDim.x) {
      const double auc = read_fresh(out + per_class + k);
      const double ap = read_fresh(out + per_class + K + k);
      const double positives = read_fresh(out + per_class + 4 * K + k);
      if (auc == auc) {
        acc[0] += auc;
        acc[1] += 1.0;
        acc[2] += positives * auc;
        acc[3] += positives;
        acc[4] += read_fresh(out + per_class + 2 * K + k);
      }
      if (ap == ap) {
        ap_acc[0] += ap;
        ap_acc[1] += 1.0;
        ap_acc[2] += positives * ap;
        ap_acc[3] += positives;
        ap_acc[4] += read_fresh(out + per_class + 3 * K + k);
      }
    }
  }
  block_sum(acc, scratch);
  block_sum(ap_acc, scratch);
  if (threadIdx.x != 0) return;

  const double nan = stream_nan();
  for (int i = 0; i < kOutSlots; ++i) out[i] = nan;
  if (score_state != nullptr) {  // a state of labels has no score sums
    const double weight = score_state[kSlotWeight];
    out[kOutAccuracy] = score_state[kSlotCorrect] / weight;
    out[kOutCrossEntropy] = score_state[kSlotNll] / weight;
    out[kOutPerplexity] = exp(out[kOutCrossEntropy]);
    // Halved for K < 3: scikit-learn's scale_by_half="auto", the rule of
    // metrics_gpu._formulas.labels.brier_halved (the binary case is the mean of (p - y)^2).
    out[kOutBrier] = score_state[kSlotBrier] / (K < 3 ? 2.0 * weight : weight);
    out[kOutHinge] = score_state[kSlotHinge] / weight;
    out[kOutTotalWeight] = weight;
    for (int i = 0; i < num_top_k; ++i) out[kOutSlots + i] = score_state[kScalarSlots + i] / weight;
    const double* bin_weight = score_state + kScalarSlots + num_top_k;
    double* proportion = out + kOutSlots + num_top_k;
    double ece = 0.0, mce = 0.0;
    for (int b = 0; b < n_bins; ++b) {
      const double bw = bin_weight[b];
      proportion[b] = bw / weight;
      proportion[n_bins + b] = bin_weight[n_bins + b] / bw;
      proportion[2 * n_bins + b] = bin_weight[2 * n_bins + b] / bw;
      double gap = proportion[2 * n_bins + b] - proportion[n_bins + b];
      gap = proportion[b] > 0.0 ? (gap < 0.0 ? -gap : gap) : 0.0;
      ece += proportion[b] * gap;
      if (gap > mce || b == 0) mce = gap;
    }
    out[kOutCalibration] = n_bins > 0 ? ece : nan;
    out[kOutMaxCalibration] = n_bins > 0 ? mce : nan;
  }
  if (H > 0) {
    out[kOutRocAucMacro] = acc[0] / acc[1];
    out[kOutRocAucWeighted] = acc[2] / acc[3];
    out[kOutRocAucBound] = acc[4] / acc[1];
    out[kOutAveragePrecisionMacro] = ap_acc[0] / ap_acc[1];
    out[kOutAveragePrecisionWeighted] = ap_acc[2] / ap_acc[3];
    out[kOutAveragePrecisionBound] = ap_acc[4] / ap_acc[1];
    RankAreas micro = rank_areas(pooled, pooled + H, 1, H);
    out[kOutRocAucMicro] = micro.auc;
    out[kOutAveragePrecisionMicro] = micro.ap;
    out[kOutRocAuc] = K == 2 ? out[per_class + 1] : out[kOutRocAucMacro];
    out[kOutAveragePrecision] = K == 2 ? out[per_class + K + 1] : out[kOutAveragePrecisionMacro];
  }
  // The kappa moments as doubles (a state merged, synced or loaded since its
  // last update has not had them written).
  write_moments(exact_moments, float_moments, moments_out);
  *ticket = 0u;
}

}  // namespace mg

using mg::streaming_compute;
using mg::streaming_update;
