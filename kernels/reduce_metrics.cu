// Every label metric of the report in one launch, into one float64 buffer.
//
// label_metrics_from_statistics<C>: one block reads per-class statistics
//   (true positives, support, predicted; C = long long counts or double
//   weights) and evaluates the metrics (evaluate_metrics).
// label_metrics_from_matrix<C>: the grid tiles a dense K x K matrix, each
//   block a tile of kTileColumns columns (a lane each) by `tile_rows` rows (a
//   warp each in turn), sized by the host to two waves of the device's SMs
//   where the matrix has the rows for it. A block writes its tile's diagonal
//   cells, its column sums and row sums as partials, and its kappa moment sums;
//   the last block of each column of tiles (a ticket per column) adds that
//   column's partials in tile order into the predicted counts, the last of each
//   row of tiles (a ticket per row) its row partials into the supports, and the
//   last of those finishers (a ticket counting them) adds the moment partials in
//   block order and evaluates the metrics. One launch, no atomics on values, no
//   dynamic shared memory (any K), and the same result bit for bit run to run.
//
// The buffer holds kSlotCount overall values (the order of
// metrics_gpu._formulas.labels.LABEL_METRIC_SLOTS: the report's metrics, then the
// counts the functional API needs), then kColumnCount per-class columns of K
// values each. Formulas and conventions are those of metrics_gpu._formulas.labels
// (its NumPy code is the reference the tests hold this file to): averages and
// kappa positions run over the `selected` classes (all when null), a 0/0
// per-class rate is 0, and every sum has a fixed order, the same wherever
// unselected classes lie (evaluate_metrics sums over the selected classes
// compacted in rank order): a dense matrix with absent classes and the
// compacted statistics of the same data give the same bits.
#include "common.cuh"

namespace mg {

enum Slot {
  kAccuracy,
  kBalancedAccuracy,
  kMicroPrecision,
  kMicroRecall,
  kMicroF1,
  kMacroPrecision,
  kMacroRecall,
  kMacroF1,
  kMacroF1Harmonic,
  kWeightedPrecision,
  kWeightedRecall,
  kWeightedF1,
  kMacroJaccard,
  kMacroSpecificity,
  kMatthewsCorrcoef,
  kCohenKappa,
  kLinearWeightedKappa,
  kQuadraticWeightedKappa,
  kAverageAccuracy,
  kErrorRate,
  kHammingLoss,
  kZeroOneLoss,
  // Counts behind the functional API's options and scikit-learn's warnings.
  kTotal,
  kCorrect,
  kSelectedClasses,
  kSupportedClasses,
  kUnpredictedClasses,
  kAbsentClasses,
  kClassesWithoutNegatives,
  kKappaUndefined,
  kMisclassified,
  kSlotCount
};

enum Column { kPrecision, kRecall, kF1, kSpecificity, kJaccard, kColumnCount };

// The sums of evaluate_metrics' passes (unnamed: the host reads none of
// them). Rounded sums over the selected classes (pass 4): of the counts, then
// of the per-class rates, in loops that each hold a few of them (so that no
// thread holds them all at once: kRateGroup).
enum { sTp, sSupport, sPredicted, sSupportTimesPredicted, sRecallSupported, kCountSums };
enum {
  sPrecision,
  sRecall,
  sF1,
  sWeightedPrecision,
  sWeightedRecall,
  sWeightedF1,
  sJaccard,
  sSpecificity,
  sClassAccuracy,
  sClassError,
  kRateSums
};
// The rate sums of the first loop: those of precision, recall and F1.
constexpr int kRateGroup = sJaccard;

// Classes counted over the selected ones (pass 4): exact in any order, so
// kept as integers (a register each, not two).
enum {
  cSelected,
  cSupported,
  cPredicted,
  cBoth,
  cUnpredicted,
  cAbsent,
  cNoNegatives,
  kClassCounts
};

// Pair sums of pass 1 (and pass 2's linear one): t p pairs, the linear cross
// sum, sum t * rank, t t pairs / 2, p p pairs / 2.
enum { pTruePredicted, pLinear, pTrueRank, pTrueTrue, pPredictedPredicted, kPairSums };

// Values reduced over the block in one go (the rate sums bound every
// reduction below).
constexpr int kMaxReduced = kRateSums;

__device__ __forceinline__ double quiet_nan() {
  return __longlong_as_double((long long)0x7ff8000000000000ull);
}

// numerator / denominator, `zero` when the denominator is 0 (_formulas.divide).
__device__ __forceinline__ double divide(double numerator, double denominator, double zero) {
  return denominator == 0.0 ? zero : numerator / denominator;
}

// value 2^-exponent with total = m 2^exponent (frexp): weights scaled exactly
// to at most about 1, so that a product of two of them neither overflows
// (huge weights) nor underflows to 0 (subnormal ones), and exact sums stay
// exact (_formulas.scaled_by_total).
__device__ __forceinline__ double scaled(double value, int exponent) {
  return ldexp(value, -exponent);
}

// Inclusive scan of N values over one tile of blockDim.x classes; `carry`
// holds the totals of the tiles before and is advanced past this one. With
// `exclusive`, also the sums of the values before each thread's, summed as
// such (not the inclusive sum less the thread's own value, which cancels when
// that value dominates): the previous lane's inclusive sum within the warp.
template <int N>
__device__ void block_scan(double (&values)[N], double (&carry)[N], double* scratch,
                           double* exclusive = nullptr) {
  const unsigned int lane = lane_index();
  const unsigned int warp = threadIdx.x / kWarpSize;
  const unsigned int warps = blockDim.x / kWarpSize;
  for (int i = 0; i < N; ++i) {
    for (int offset = 1; offset < kWarpSize; offset <<= 1) {
      double before = __shfl_up_sync(kFullWarp, values[i], offset);
      if (lane >= (unsigned int)offset) values[i] += before;
    }
    if (exclusive != nullptr) {
      double previous = __shfl_up_sync(kFullWarp, values[i], 1);
      exclusive[i] = lane > 0 ? previous : 0.0;
    }
    if (lane == kWarpSize - 1) scratch[i * kWarpSize + warp] = values[i];
  }
  __syncthreads();
  for (int i = 0; i < N; ++i) {
    double before = carry[i];
    double tile = 0.0;
    for (unsigned int w = 0; w < warps; ++w) {
      if (w < warp) before += scratch[i * kWarpSize + w];
      tile += scratch[i * kWarpSize + w];
    }
    values[i] += before;
    if (exclusive != nullptr) exclusive[i] += before;
    carry[i] += tile;
  }
  __syncthreads();
}

// Error-free transformations (no fused multiply-add: the kernels build with
// --fmad=false): a + b and a * b as a rounded value and its exact error, for
// covariances whose terms cancel (_formulas.two_product, accurate_sum).
__device__ __forceinline__ void two_sum(double a, double b, double& sum, double& error) {
  sum = a + b;
  const double b_part = sum - a;
  error = (a - (sum - b_part)) + (b - b_part);
}

__device__ __forceinline__ void two_product(double a, double b, double& product,
                                            double& error) {
  const double split = 134217729.0;  // 2^27 + 1 (Veltkamp)
  const double a_big = split * a, b_big = split * b;
  const double a_high = a_big - (a_big - a), b_high = b_big - (b_big - b);
  const double a_low = a - a_high, b_low = b - b_high;
  product = a * b;
  error = ((a_high * b_high - product) + a_high * b_low + a_low * b_high) + a_low * b_low;
}

// (high, low) += value, with value's rounding kept in low.
__device__ __forceinline__ void add_exactly(double& high, double& low, double value) {
  double error;
  two_sum(high, value, high, error);
  low += error;
}

// A block's sum of (high, low) pairs, to about one rounding of the result:
// the highs added with their errors kept, then the lows (every thread gets it).
__device__ void block_sum_exact(double& high, double& low, double* scratch) {
  const unsigned int lane = lane_index();
  const unsigned int warp = threadIdx.x / kWarpSize;
  const unsigned int warps = blockDim.x / kWarpSize;
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    const double other_high = __shfl_xor_sync(kFullWarp, high, offset);
    const double other_low = __shfl_xor_sync(kFullWarp, low, offset);
    add_exactly(high, low, other_high);
    low += other_low;
  }
  if (lane == 0) {
    scratch[warp] = high;
    scratch[kWarpSize + warp] = low;
  }
  __syncthreads();
  high = 0.0;
  low = 0.0;
  for (unsigned int w = 0; w < warps; ++w) {
    add_exactly(high, low, scratch[w]);
    low += scratch[kWarpSize + w];
  }
  __syncthreads();
}

__device__ __forceinline__ bool is_selected(const unsigned char* selected, int64 k) {
  return selected == nullptr || selected[k] != 0;
}

// Largest block the kernels are compiled for (launch bounds) and the shared
// buffers of label_metrics_from_matrix are sized for (cuda: 256, emulated:
// 64; the host's copy: launchers/reduce_metrics.py REDUCE_MAX_BLOCK_THREADS).
constexpr int kMaxBlockThreads = 256;
// Blocks of kMaxBlockThreads per SM the kernels are compiled for: 4, so 64
// registers a thread (an SM's 64K), 32 warps per SM, without spills (the
// passes of evaluate_metrics hold few sums at a time). sm_100 and later:
// ptxas's own choice, 76-80 registers (3 blocks), where 64 spill.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
constexpr int kReduceMinBlocks = 0;
#else
constexpr int kReduceMinBlocks = 4;
#endif

// The per-class rates of _formulas (a 0/0 rate is 0). `negatives` is the
// other classes' supports, summed as such (_formulas.sum_of_others): exactly
// 0 for a class that holds every sample, where total - support may be a
// rounding residue of either sign. tn is at least 0 (fp, a difference of
// sums, can round above the negatives).
struct ClassRates {
  double precision, recall, f1, jaccard, specificity, tn;
};

__device__ __forceinline__ ClassRates class_rates(double tp, double t, double p,
                                                  double negatives) {
  double fp = p - tp;
  double fn = t - tp;
  double tn = fmax(negatives - fp, 0.0);
  return ClassRates{divide(tp, p, 0.0),
                    divide(tp, t, 0.0),
                    divide(2.0 * tp, t + p, 0.0),
                    divide(tp, (tp + fp) + fn, 0.0),
                    divide(tn, negatives, 0.0),
                    tn};
}

// What evaluate_metrics keeps from pass to pass, in shared memory rather
// than in every thread's registers through the passes: the block totals that
// thread 0 reads at the end, the arguments it reads then, and the few values
// the passes share (read after a barrier).
struct Totals {
  double total, misclassified, linear, quadratic;
  int total_exponent;  // total = m 2^total_exponent, m in [0.5, 1) (frexp; 0 for 0)
  int64 selected_classes;
  bool every_class;  // no class selection: the total is the supports' sum (pass 4)
  double count_sums[kCountSums];
  double rate_sums[kRateSums];
  unsigned int counts[kClassCounts];
  double tp_high, tp_low;  // sum t p (scaled), exactly
  double pairs[kPairSums];
  double pairs_high, pairs_low;  // pairs[pTruePredicted], exactly
  double quadratic_cross;
};

// Weighted kappa's moments given (not NaN). Read from shared memory where
// needed rather than kept through the passes (on sm_100 the flag held in a
// register was what spilled).
__device__ __forceinline__ bool has_kappa_moments(const Totals& totals) {
  return !(totals.linear != totals.linear) || !(totals.quadratic != totals.quadratic);
}

// One class's terms of the rate sums. The one-vs-rest accuracy and error
// divide by the total as (tp + tn) + (fp + fn), from the same cells (at most
// 1; _formulas.class_accuracy).
__device__ __forceinline__ void rate_terms(double tp, double t, double p, double negatives,
                                           double (&terms)[kRateSums]) {
  ClassRates rates = class_rates(tp, t, p, negatives);
  double fp = p - tp;
  double fn = t - tp;
  terms[sPrecision] = rates.precision;
  terms[sRecall] = rates.recall;
  terms[sF1] = rates.f1;
  terms[sWeightedPrecision] = rates.precision * t;
  terms[sWeightedRecall] = rates.recall * t;
  terms[sWeightedF1] = rates.f1 * t;
  terms[sJaccard] = rates.jaccard;
  terms[sSpecificity] = rates.specificity;
  const double right = tp + rates.tn, wrong = fp + fn;
  terms[sClassAccuracy] = divide(right, right + wrong, quiet_nan());
  terms[sClassError] = divide(wrong, right + wrong, quiet_nan());
}

// Rate sums [kFirst, kLast) over the selected classes by rank (pass 4 of
// evaluate_metrics): thread i adds ranks i, i + blockDim.x, ..., then the
// block its threads' sums; thread 0 writes them to `totals`.
template <int kFirst, int kLast>
__device__ void sum_rates(const double* ranked_tp, const double* ranked_t, const double* ranked_p,
                          const double* ranked_negatives, Totals& totals, double* scratch) {
  const int64 selected_classes = totals.selected_classes;
  double sums[kLast - kFirst];
  for (int i = 0; i < kLast - kFirst; ++i) sums[i] = 0.0;
  for (int64 rank = threadIdx.x; rank < selected_classes; rank += blockDim.x) {
    double terms[kRateSums];
    rate_terms(ranked_tp[rank], ranked_t[rank], ranked_p[rank], ranked_negatives[rank], terms);
    for (int i = 0; i < kLast - kFirst; ++i) sums[i] += terms[kFirst + i];
  }
  block_sum(sums, scratch);
  if (threadIdx.x == 0) {
    for (int i = 0; i < kLast - kFirst; ++i) totals.rate_sums[kFirst + i] = sums[i];
  }
}

// The metrics from the block totals (thread 0, after the passes).
__device__ void write_metrics(const Totals& totals, double* out) {
  const bool weighted_kappa = has_kappa_moments(totals);
  const int s_exponent = totals.total_exponent;
  const double misclassified = totals.misclassified;
  const double linear = totals.linear;
  const double quadratic = totals.quadratic;
  const double* sums = totals.count_sums;
  const double* rates = totals.rate_sums;
  const unsigned int* counts = totals.counts;
  const double* pairs = totals.pairs;
  const double s = totals.total;
  const double m = (double)counts[cSelected];
  const double supported = (double)counts[cSupported];
  const double t_total = sums[sSupport];
  const double p_total = sums[sPredicted];
  const bool kappa_undefined =
      s == 0.0 || (counts[cSupported] == 1u && counts[cPredicted] == counts[cBoth] &&
                   counts[cBoth] == 1u);
  const double nan = quiet_nan();
  const double accuracy = divide(sums[sTp], s, nan);
  const double macro_precision = m > 0.0 ? rates[sPrecision] / m : nan;
  const double macro_recall = m > 0.0 ? rates[sRecall] / m : nan;
  // nan_average with support weights: the plain mean when they sum to 0.
  const double weight_sum = t_total;
  out[kAccuracy] = accuracy;
  out[kBalancedAccuracy] = supported > 0.0 ? sums[sRecallSupported] / supported : nan;
  out[kMicroPrecision] = divide(sums[sTp], p_total, 0.0);
  out[kMicroRecall] = divide(sums[sTp], t_total, 0.0);
  out[kMicroF1] = divide(2.0 * sums[sTp], t_total + p_total, 0.0);
  out[kMacroPrecision] = macro_precision;
  out[kMacroRecall] = macro_recall;
  out[kMacroF1] = m > 0.0 ? rates[sF1] / m : nan;
  out[kMacroF1Harmonic] = 2.0 * macro_precision * macro_recall / (macro_precision + macro_recall);
  out[kWeightedPrecision] = m == 0.0 ? nan
                            : weight_sum != 0.0 ? rates[sWeightedPrecision] / weight_sum
                                                : rates[sPrecision] / m;
  out[kWeightedRecall] = m == 0.0 ? nan
                         : weight_sum != 0.0 ? rates[sWeightedRecall] / weight_sum
                                             : rates[sRecall] / m;
  out[kWeightedF1] = m == 0.0 ? nan
                     : weight_sum != 0.0 ? rates[sWeightedF1] / weight_sum : rates[sF1] / m;
  out[kMacroJaccard] = m > 0.0 ? rates[sJaccard] / m : nan;
  out[kMacroSpecificity] = m > 0.0 ? rates[sSpecificity] / m : nan;
  const double observed = misclassified != misclassified ? s - sums[sTp] : misclassified;
  // Matthews from the pairs of classes, without differences of squares (_formulas).
  // The covariance's two forms split s^2 between their terms (c s + m s =
  // sum t p + sum_{i != j} t_i p_j): the one with the smaller terms cancels
  // least (_formulas.matthews_corrcoef).
  // The pair sums are of weights scaled by 2^-s_exponent (scaled), so the
  // terms they meet are too: times s 2^-2 s_exponent.
  const double s_scaled = scaled(s, s_exponent);
  const double correct_s = scaled(sums[sTp], s_exponent) * s_scaled;
  const double misclassified_s = scaled(observed, s_exponent) * s_scaled;
  // The chosen form evaluated exactly from its error-free parts: exact counts
  // (integer weights below 2^53) give the exact covariance however much its
  // terms cancel (_formulas.matthews_corrcoef).
  double cov_high = 0.0, cov_low = 0.0;
  {
    double product, error;
    if (fmax(correct_s, sums[sSupportTimesPredicted]) <=
        fmax(pairs[pTruePredicted], misclassified_s)) {
      two_product(scaled(sums[sTp], s_exponent), s_scaled, product, error);
      add_exactly(cov_high, cov_low, product);
      cov_low += error;
      add_exactly(cov_high, cov_low, -totals.tp_high);
      cov_low -= totals.tp_low;
    } else {
      add_exactly(cov_high, cov_low, totals.pairs_high);
      cov_low += totals.pairs_low;
      two_product(-scaled(observed, s_exponent), s_scaled, product, error);
      add_exactly(cov_high, cov_low, product);
      cov_low += error;
    }
  }
  const double cov_tp = cov_high + cov_low;
  const double cov_pp = pairs[pPredictedPredicted] + pairs[pPredictedPredicted];
  const double cov_tt = pairs[pTrueTrue] + pairs[pTrueTrue];
  const double linear_cross = weighted_kappa ? pairs[pLinear] : 0.0;
  const double quadratic_cross = weighted_kappa ? totals.quadratic_cross : 0.0;
  // A correlation: within [-1, 1] (a perfect prediction's covariance may
  // round a little above its variances).
  const double mcc = divide(cov_tp, sqrt(cov_pp * cov_tt), 0.0);
  out[kMatthewsCorrcoef] = mcc < -1.0 ? -1.0 : mcc > 1.0 ? 1.0 : mcc;
  out[kCohenKappa] = kappa_undefined ? nan : 1.0 - misclassified_s / pairs[pTruePredicted];
  out[kLinearWeightedKappa] =
      kappa_undefined ? nan : 1.0 - scaled(linear, s_exponent) * s_scaled / linear_cross;
  out[kQuadraticWeightedKappa] =
      kappa_undefined ? nan : 1.0 - scaled(quadratic, s_exponent) * s_scaled / quadratic_cross;
  out[kAverageAccuracy] = m > 0.0 ? rates[sClassAccuracy] / m : nan;
  out[kErrorRate] = m > 0.0 ? rates[sClassError] / m : nan;
  out[kHammingLoss] = 1.0 - accuracy;
  out[kZeroOneLoss] = 1.0 - accuracy;
  out[kTotal] = s;
  out[kCorrect] = sums[sTp];
  out[kSelectedClasses] = m;
  out[kSupportedClasses] = supported;
  out[kUnpredictedClasses] = (double)counts[cUnpredicted];
  out[kAbsentClasses] = (double)counts[cAbsent];
  out[kClassesWithoutNegatives] = (double)counts[cNoNegatives];
  out[kKappaUndefined] = kappa_undefined ? 1.0 : 0.0;
  out[kMisclassified] = observed;
}

// The classes a thread walks in the passes of evaluate_metrics that scan:
// the `position`-th run of `length` = ceil(K / blockDim.x) consecutive
// classes (or none). A thread sums its run, one block scan (block_scan) gives every
// thread the sums of the runs before its own, and the thread walks its run
// again from there: two barriers a pass whatever K (a scan per tile of
// blockDim.x classes took two barriers and a warp scan per tile).
struct ClassRun {
  int64 begin, end;
};

__device__ __forceinline__ ClassRun class_run(int64 K, int64 length, unsigned int position) {
  const int64 begin = (int64)position * length;
  return ClassRun{begin < K ? begin : K, begin + length < K ? begin + length : K};
}

// Every metric from per-class counts, by one block (`scratch`: shared memory
// for the block reductions). `total` < 0 means the sum of the supports;
// `misclassified` is the counting pass's sum w [t != p] (NaN: none, then
// total - sum tp). The passes that scan over the classes walk runs of them
// (class_run), a scan of the runs' sums in between.
//
// The sums over the selected classes in any order (passes 4 and 5) run over
// them compacted in rank order (pass 3 writes them so): thread i adds ranks
// i, i + blockDim.x, ... in turn, then the block adds its threads' sums
// (block_sum), so their bits do not depend on where unselected classes lie.
// The per-class columns of the out buffer hold what passes hand on (each
// class's negatives, the running sums of pass 1, the compacted classes) until
// pass 6 writes them. Each pass keeps its sums in registers only while it
// runs: its block totals wait in shared memory (Totals) for thread 0.
// Not inlined: a call from either kernel, whether NVRTC builds the module's
// instantiations together (the gate) or one alone (the runtime), where
// inlined into a lone label_metrics_from_matrix it spilled on sm_90. The
// call runs once, in one block.
template <typename C>
__device__ __noinline__ void evaluate_metrics(const C* true_positives, const C* support,
                                              const C* predicted, double total,
                                              double misclassified, int64 K,
                                              const unsigned char* selected, double linear,
                                              double quadratic, double* out,
                                              double* scratch /* shared: kMaxReduced * 32 */) {
  double* columns = out + kSlotCount;
  // Each class's negatives, in its specificity cell until pass 6 reads them
  // and writes the rate there.
  double* negatives = columns + kSpecificity * K;
  __shared__ Totals totals;
  __shared__ unsigned int count_scratch[kClassCounts * kWarpSize];
  const int64 run_length = (K + blockDim.x - 1) / blockDim.x;  // class_run
  if (threadIdx.x == 0) {
    totals.total = total;
    totals.every_class = selected == nullptr;
    totals.misclassified = misclassified;
    totals.linear = linear;
    totals.quadratic = quadratic;
  }

  // Pass 0: the supports of the classes after each class, scanned in
  // descending class order (thread i walks the i-th run from the end) and
  // kept in its negatives cell until pass 3 adds those before; another thread
  // of the block may hold the class then, so the barriers of the reductions
  // in between order the two. The scan's total is the total weight (unless
  // given).
  {
    const ClassRun run = class_run(K, run_length, blockDim.x - 1 - threadIdx.x);
    double run_sum[1] = {0.0};
    for (int64 k = run.end; k > run.begin;) run_sum[0] += (double)read_fresh(support + --k);
    double all_support[1] = {0.0}, after[1];
    block_scan(run_sum, all_support, scratch, after);
    for (int64 k = run.end; k > run.begin;) {
      --k;
      negatives[k] = after[0];
      after[0] += (double)read_fresh(support + k);
    }
    if (threadIdx.x == 0) {
      if (totals.total < 0.0) totals.total = all_support[0];
      frexp(totals.total, &totals.total_exponent);
    }
    __syncthreads();
  }

  // Pass 1: sums over pairs of classes i != j as sums of non-negative terms
  // (_formulas.unequal_pairs and kappa_disagreements), positions being ranks
  // among the selected classes: sum_{i != j} t_i p_j = sum_j p_j T_<j + t_j
  // P_<j (kappa's expected disagreement, MCC's covariance), t_i t_j and p_i
  // p_j (MCC's variances, half of them). It also sums t * rank for pass 5,
  // which sums about the mean position of y_true, and (weighted kappa) keeps
  // each selected class's running sums T_<=j and P_<=j for pass 2 in its
  // precision and recall cells.
  double* running_t = columns + kPrecision * K;
  double* running_p = columns + kRecall * K;
  {
    const int s_exponent = totals.total_exponent;
    const ClassRun run = class_run(K, run_length, threadIdx.x);
    // Selected classes, and their scaled weights (scaled: the pair sums are
    // those of s^2 2^-2e), of the run, then (the scan) of the runs before.
    double before[3] = {0.0, 0.0, 0.0};
    for (int64 k = run.begin; k < run.end; ++k) {
      if (!is_selected(selected, k)) continue;
      before[0] += 1.0;
      before[1] += scaled((double)read_fresh(support + k), s_exponent);
      before[2] += scaled((double)read_fresh(predicted + k), s_exponent);
    }
    {
      double carry[3] = {0.0, 0.0, 0.0}, run_sums[3] = {before[0], before[1], before[2]};
      block_scan(run_sums, carry, scratch, before);
    }
    double pairs[kPairSums] = {0.0, 0.0, 0.0, 0.0, 0.0};
    double pairs_high = 0.0, pairs_low = 0.0;  // pairs[pTruePredicted] exactly, for MCC
    for (int64 k = run.begin; k < run.end; ++k) {
      if (!is_selected(selected, k)) continue;
      const double t = scaled((double)read_fresh(support + k), s_exponent);
      const double p = scaled((double)read_fresh(predicted + k), s_exponent);
      double product, error;
      two_product(p, before[1], product, error);
      add_exactly(pairs_high, pairs_low, product);
      pairs_low += error;
      two_product(t, before[2], product, error);
      add_exactly(pairs_high, pairs_low, product);
      pairs_low += error;
      pairs[pTruePredicted] += p * before[1] + t * before[2];
      pairs[pTrueRank] += t * before[0];
      pairs[pTrueTrue] += t * before[1];
      pairs[pPredictedPredicted] += p * before[2];
      before[0] += 1.0;
      before[1] += t;
      before[2] += p;
      if (has_kappa_moments(totals)) {
        running_t[k] = before[1];
        running_p[k] = before[2];
      }
    }
    block_sum(pairs, scratch);
    block_sum_exact(pairs_high, pairs_low, scratch);
    if (threadIdx.x == 0) {
      for (int i = 0; i < kPairSums; ++i) totals.pairs[i] = pairs[i];
      totals.pairs_high = pairs_high;
      totals.pairs_low = pairs_low;
    }
  }

  // Pass 2 (weighted kappa): the linear cross sum, sum_j p_j A_j + t_j B_j
  // with A_j the running sums T_<=m added over the gaps m below j (B likewise
  // for P).
  if (has_kappa_moments(totals)) {
    const int s_exponent = totals.total_exponent;
    double linear_cross[1] = {0.0};
    const ClassRun run = class_run(K, run_length, threadIdx.x);  // pass 1's: its own running sums
    double gaps_before[2] = {0.0, 0.0};
    for (int64 k = run.begin; k < run.end; ++k) {
      if (!is_selected(selected, k)) continue;
      gaps_before[0] += running_t[k];
      gaps_before[1] += running_p[k];
    }
    {
      double carry[2] = {0.0, 0.0}, run_sums[2] = {gaps_before[0], gaps_before[1]};
      block_scan(run_sums, carry, scratch, gaps_before);
    }
    for (int64 k = run.begin; k < run.end; ++k) {
      if (!is_selected(selected, k)) continue;
      const double t = scaled((double)read_fresh(support + k), s_exponent);
      const double p = scaled((double)read_fresh(predicted + k), s_exponent);
      linear_cross[0] += p * gaps_before[0] + t * gaps_before[1];
      gaps_before[0] += running_t[k];
      gaps_before[1] += running_p[k];
    }
    block_sum(linear_cross, scratch);
    if (threadIdx.x == 0) totals.pairs[pLinear] = linear_cross[0];
  }

  // Pass 3: each class's negatives (the supports before it, scanned, plus
  // those after), and the selected classes written in rank order.
  double* ranked_tp = columns + kPrecision * K;
  double* ranked_t = columns + kRecall * K;
  double* ranked_p = columns + kF1 * K;
  double* ranked_negatives = columns + kJaccard * K;
  {
    const ClassRun run = class_run(K, run_length, threadIdx.x);
    // Supports and selected classes of the run, then of the runs before.
    double before[2] = {0.0, 0.0};
    for (int64 k = run.begin; k < run.end; ++k) {
      before[0] += (double)read_fresh(support + k);
      if (is_selected(selected, k)) before[1] += 1.0;
    }
    double carry[2] = {0.0, 0.0};  // then the totals
    {
      double run_sums[2] = {before[0], before[1]};
      block_scan(run_sums, carry, scratch, before);
    }
    double supports_before = before[0];
    int64 rank = (int64)before[1];
    for (int64 k = run.begin; k < run.end; ++k) {
      const double t = (double)read_fresh(support + k);
      const double others = supports_before + negatives[k];
      negatives[k] = others;
      supports_before += t;
      if (!is_selected(selected, k)) continue;
      ranked_tp[rank] = (double)read_fresh(true_positives + k);
      ranked_t[rank] = t;
      ranked_p[rank] = (double)read_fresh(predicted + k);
      ranked_negatives[rank] = others;
      ++rank;
    }
    if (threadIdx.x == 0) totals.selected_classes = (int64)carry[1];
    __syncthreads();  // the ranked classes written
  }

  // Pass 4: the classes counted, and the rounded sums over the selected
  // classes, by rank.
  {
    const int64 selected_classes = totals.selected_classes;
    unsigned int counts[kClassCounts];
    for (int i = 0; i < kClassCounts; ++i) counts[i] = 0u;
    for (int64 rank = threadIdx.x; rank < selected_classes; rank += blockDim.x) {
      const double t = ranked_t[rank], p = ranked_p[rank];
      counts[cSelected] += 1u;
      if (t > 0.0) counts[cSupported] += 1u;
      if (p > 0.0) counts[cPredicted] += 1u;
      if (t > 0.0 && p > 0.0) counts[cBoth] += 1u;
      if (p == 0.0) counts[cUnpredicted] += 1u;
      if (t == 0.0 && p == 0.0) counts[cAbsent] += 1u;
      if (ranked_negatives[rank] == 0.0) counts[cNoNegatives] += 1u;
    }
    block_sum(counts, count_scratch);
    if (threadIdx.x == 0) {
      for (int i = 0; i < kClassCounts; ++i) totals.counts[i] = counts[i];
    }
  }
  {
    const int64 selected_classes = totals.selected_classes;
    const int s_exponent = totals.total_exponent;
    double sums[kCountSums] = {0.0, 0.0, 0.0, 0.0, 0.0};
    // sum t p (scaled) exactly, for MCC's covariance c s - sum t p
    double tp_high = 0.0, tp_low = 0.0;
    for (int64 rank = threadIdx.x; rank < selected_classes; rank += blockDim.x) {
      const double tp = ranked_tp[rank], t = ranked_t[rank], p = ranked_p[rank];
      sums[sTp] += tp;
      sums[sSupport] += t;
      sums[sPredicted] += p;
      double product, error;
      two_product(scaled(t, s_exponent), scaled(p, s_exponent), product, error);
      sums[sSupportTimesPredicted] += product;
      add_exactly(tp_high, tp_low, product);
      tp_low += error;
      if (t > 0.0) sums[sRecallSupported] += tp / t;
    }
    block_sum(sums, scratch);
    block_sum_exact(tp_high, tp_low, scratch);
    if (threadIdx.x == 0) {
      for (int i = 0; i < kCountSums; ++i) totals.count_sums[i] = sums[i];
      totals.tp_high = tp_high;
      totals.tp_low = tp_low;
      // Over every class, the total is the supports' sum by the same
      // additions in the same order as the true positives' (tp <= t each):
      // correct <= total whatever the float weights, so accuracy <= 1 and the
      // losses >= 0 (_formulas.Counts). A total counted apart (a stream's
      // cell) can round below the correct weight. Read by thread 0 only
      // (write_metrics); the scaling exponent stays the given total's. The
      // flag is read from shared memory: `selected` kept live in a register
      // to here spilled on sm_100.
      if (totals.every_class) totals.total = sums[sSupport];
    }
  }
  sum_rates<0, kRateGroup>(ranked_tp, ranked_t, ranked_p, ranked_negatives, totals, scratch);
  sum_rates<kRateGroup, kRateSums>(ranked_tp, ranked_t, ranked_p, ranked_negatives, totals,
                                   scratch);

  // Pass 5 (weighted kappa): the quadratic cross sum about the mean position
  // of y_true, by rank.
  if (has_kappa_moments(totals)) {
    const int64 selected_classes = totals.selected_classes;
    const int s_exponent = totals.total_exponent;
    const double t_total = scaled(totals.count_sums[sSupport], s_exponent);
    const double p_total = scaled(totals.count_sums[sPredicted], s_exponent);
    const double centre = divide(totals.pairs[pTrueRank], t_total, 0.0);
    double moments[4] = {0.0, 0.0, 0.0, 0.0};  // t o^2, p o^2, t o, p o
    for (int64 rank = threadIdx.x; rank < selected_classes; rank += blockDim.x) {
      const double t = scaled(ranked_t[rank], s_exponent);
      const double p = scaled(ranked_p[rank], s_exponent);
      double offset = (double)rank - centre;
      moments[0] += t * (offset * offset);
      moments[1] += p * (offset * offset);
      moments[2] += t * offset;
      moments[3] += p * offset;
    }
    block_sum(moments, scratch);
    if (threadIdx.x == 0)
      totals.quadratic_cross =
          p_total * moments[0] + t_total * moments[1] - 2.0 * moments[2] * moments[3];
  }
  __syncthreads();  // every ranked class read: pass 6 writes over them

  // Pass 6: the per-class columns.
  for (int64 k = threadIdx.x; k < K; k += blockDim.x) {
    ClassRates rates = class_rates((double)read_fresh(true_positives + k),
                                   (double)read_fresh(support + k),
                                   (double)read_fresh(predicted + k), negatives[k]);
    columns[kPrecision * K + k] = rates.precision;
    columns[kRecall * K + k] = rates.recall;
    columns[kF1 * K + k] = rates.f1;
    columns[kSpecificity * K + k] = rates.specificity;
    columns[kJaccard * K + k] = rates.jaccard;
  }
  if (threadIdx.x == 0) write_metrics(totals, out);
}

}  // namespace mg

// One block. `total` and `misclassified` point at the statistics' total and
// misclassified weight (C; misclassified null when the state has none); the
// moments are float64 scalars, or null when the state has none (weighted
// kappa is NaN).
template <typename C>
__global__ void __launch_bounds__(mg::kMaxBlockThreads, mg::kReduceMinBlocks)
    label_metrics_from_statistics(const C* true_positives, const C* support,
                                              const C* predicted, const C* total,
                                              const C* misclassified, mg::int64 num_classes,
                                              const unsigned char* selected,
                                              const double* linear, const double* quadratic,
                                              double* out) {
  __shared__ double scratch[mg::kMaxReduced * mg::kWarpSize];
  const double nan = mg::quiet_nan();
  mg::evaluate_metrics(true_positives, support, predicted, (double)*total,
                       misclassified == nullptr ? nan : (double)*misclassified, num_classes,
                       selected, linear == nullptr ? nan : *linear,
                       quadratic == nullptr ? nan : *quadratic, out, scratch);
}

namespace mg {

// Columns of a matrix tile: a lane each, so a warp reads a row of the tile in
// one go (256 bytes of int64 or float64 counts; the host's copy:
// launchers/reduce_metrics.py REDUCE_TILE_COLUMNS).
constexpr int kTileColumns = kWarpSize;
// Rows of the tile a warp has in flight: their loads are issued together,
// their sums taken together (a power of 2: warp_sums).
constexpr int kRowsInFlight = 4;
// Lanes that end up holding each of those rows' sums.
constexpr unsigned int kLanesPerRow = kWarpSize / kRowsInFlight;
// Partial sums per block of the matrix: the linear and quadratic kappa
// moments, and the selected cells off the diagonal (the host's copy:
// MATRIX_MOMENTS).
constexpr int kMatrixMoments = 3;

// Selected classes before `row_begin` and before `column_begin` (class
// positions, for the moments), every thread gets both.
__device__ void selected_before(const unsigned char* selected, int64 row_begin,
                                int64 column_begin, double* scratch, double (&before)[2]) {
  before[0] = 0.0;
  before[1] = 0.0;
  const int64 end = row_begin > column_begin ? row_begin : column_begin;
  for (int64 k = threadIdx.x; k < end; k += blockDim.x) {
    if (selected[k] == 0) continue;
    if (k < row_begin) before[0] += 1.0;
    if (k < column_begin) before[1] += 1.0;
  }
  block_sum(before, scratch);
}

// One block's tile of the matrix: rows [row_begin, row_end) of the lane's
// `column` (past K: zeros). Writes the tile's diagonal cells, each row's sum
// over the tile's columns (row_partials: a warp's butterfly) and each column's
// sum over the tile's rows (column_partials: a lane's running sum per warp,
// then the warps in order); returns the moment sums (every thread).
// `row_position` is shared memory for blockDim.x rows' positions.
template <typename C>
__device__ void reduce_tile(const C* matrix, int64 K, const unsigned char* selected,
                            bool moments, int64 row_begin, int64 row_end, int64 column,
                            C* true_positives, C* row_partials, C* column_partials,
                            double* scratch, C* warp_columns, double* row_position,
                            double (&moment)[kMatrixMoments]) {
  const unsigned int lane = lane_index();
  const unsigned int warp = threadIdx.x / kWarpSize;
  const unsigned int warps = blockDim.x / kWarpSize;
  const bool in_column = column < K;
  const bool column_chosen = in_column && is_selected(selected, column);
  const bool masked = selected != nullptr;
  // Positions: ranks among the selected classes (the index when all are).
  double column_position = (double)column;
  double row_carry[1] = {0.0};
  if (masked && moments) {
    double before[2];
    selected_before(selected, row_begin, column - lane, scratch, before);
    row_carry[0] = before[0];
    const unsigned int chosen_lanes = __ballot_sync(kFullWarp, column_chosen);
    column_position = before[1] + (double)__popc(chosen_lanes & ((1u << lane) - 1u));
  }
  C column_sum = 0;
  for (int i = 0; i < kMatrixMoments; ++i) moment[i] = 0.0;
  // Batches of blockDim.x rows: their positions first (a scan), then a warp
  // per row in turn.
  for (int64 batch = row_begin; batch < row_end; batch += blockDim.x) {
    if (masked && moments) {
      const int64 row = batch + threadIdx.x;
      double running[1] = {row < row_end && selected[row] != 0 ? 1.0 : 0.0};
      block_scan(running, row_carry, scratch);
      row_position[threadIdx.x] = running[0] - 1.0;
      __syncthreads();
    }
    const int64 batch_end = batch + blockDim.x < row_end ? batch + blockDim.x : row_end;
    for (int64 first = batch + warp; first < batch_end; first += kRowsInFlight * warps) {
      C value[kRowsInFlight];
#pragma unroll
      for (int u = 0; u < kRowsInFlight; ++u) {
        const int64 row = first + u * warps;
        value[u] = row < batch_end && in_column ? matrix[row * K + column] : C(0);
      }
#pragma unroll
      for (int u = 0; u < kRowsInFlight; ++u) {
        const int64 row = first + u * warps;
        if (row >= batch_end) break;  // warp-uniform
        column_sum += value[u];
        if (column == row) true_positives[row] = value[u];
        if (column_chosen && column != row && is_selected(selected, row)) {
          moment[2] += (double)value[u];
          if (moments) {
            const double row_at = masked ? row_position[row - batch] : (double)row;
            const double gap = row_at > column_position ? row_at - column_position
                                                        : column_position - row_at;
            const double weighted = (double)value[u] * gap;
            moment[0] += weighted;
            moment[1] += weighted * gap;
          }
        }
      }
      // The rows' sums over the tile's columns: a butterfly each, taken
      // together (warp_sums: 6 shuffles for the 4 rows, not 20).
      const C row_sum = warp_sums(value);
      const int64 summed_row = first + (int64)(lane / kLanesPerRow) * warps;
      if (lane % kLanesPerRow == 0u && summed_row < batch_end) row_partials[summed_row] = row_sum;
    }
  }
  warp_columns[threadIdx.x] = column_sum;
  block_sum(moment, scratch);  // its barriers also publish warp_columns
  if (warp == 0 && in_column) {
    C sum = 0;
    for (unsigned int w = 0; w < warps; ++w) sum += warp_columns[w * kWarpSize + lane];
    column_partials[column] = sum;
  }
}

// The predicted counts of one column of tiles (its last block): the row
// tiles' partials of the lane's `column` added in tile order, a warp taking
// every warps-th tile and the warps then in order.
template <typename C>
__device__ void finish_columns(const C* column_partials, int64 K, unsigned int row_tiles,
                               int64 column, C* predicted, C* warp_columns) {
  const unsigned int warp = threadIdx.x / kWarpSize;
  const unsigned int warps = blockDim.x / kWarpSize;
  C sum = 0;
  if (column < K) {
    for (unsigned int tile = warp; tile < row_tiles; tile += warps)
      sum += read_fresh(column_partials + (int64)tile * K + column);
  }
  __syncthreads();  // warp_columns: the tile's sums read
  warp_columns[threadIdx.x] = sum;
  __syncthreads();
  if (warp == 0 && column < K) {
    C total = 0;
    for (unsigned int w = 0; w < warps; ++w) total += warp_columns[w * kWarpSize + lane_index()];
    predicted[column] = total;
  }
}

// The supports of one row of tiles (its last block): each row's partials of
// the column tiles added in tile order.
template <typename C>
__device__ void finish_rows(const C* row_partials, int64 K, unsigned int column_tiles,
                            int64 row_begin, int64 row_end, C* support) {
  for (int64 row = row_begin + threadIdx.x; row < row_end; row += blockDim.x) {
    C sum = 0;
    for (unsigned int tile = 0; tile < column_tiles; ++tile)
      sum += read_fresh(row_partials + (int64)tile * K + row);
    support[row] = sum;
  }
}

}  // namespace mg

// A grid of row_tiles x column_tiles blocks (the host's), block b the tile of
// rows [i tile_rows, (i + 1) tile_rows) and columns [j kTileColumns, (j + 1)
// kTileColumns) with i = b / column_tiles, j = b % column_tiles, column_tiles
// = ceil(K / kTileColumns). `partials` holds row_tiles x K column sums (a row
// per row tile) then column_tiles x K row sums (a row per column tile);
// `moment_partials` kMatrixMoments per block; `tickets` column_tiles +
// row_tiles + 1 counters, zero at launch and zero again after it.
template <typename C>
__global__ void __launch_bounds__(mg::kMaxBlockThreads, mg::kReduceMinBlocks)
    label_metrics_from_matrix(const C* matrix, mg::int64 num_classes,
                                          const unsigned char* selected, int moments,
                                          mg::int64 tile_rows, C* true_positives, C* support,
                                          C* predicted, C* partials, double* moment_partials,
                                          unsigned int* tickets, double* out) {
  using mg::int64;
  const int64 K = num_classes;
  const unsigned int column_tiles =
      K > 0 ? (unsigned int)((K + mg::kTileColumns - 1) / mg::kTileColumns) : 1u;
  const unsigned int row_tiles = gridDim.x / column_tiles;
  const unsigned int row_tile = blockIdx.x / column_tiles;
  const unsigned int column_tile = blockIdx.x % column_tiles;
  const int64 row_begin = (int64)row_tile * tile_rows;
  const int64 row_end = row_begin + tile_rows < K ? row_begin + tile_rows : K;
  const int64 column = (int64)column_tile * mg::kTileColumns + mg::lane_index();
  C* column_partials = partials;
  C* row_partials = partials + (int64)row_tiles * K;
  __shared__ double scratch[mg::kMaxReduced * mg::kWarpSize];
  __shared__ C warp_columns[mg::kMaxBlockThreads];
  __shared__ double row_position[mg::kMaxBlockThreads];
  __shared__ unsigned int finishes;  // bit 0: its column of tiles, bit 1: its row of tiles
  __shared__ bool last_block;

  double moment[mg::kMatrixMoments];
  mg::reduce_tile(matrix, K, selected, moments != 0, row_begin, row_end, column,
                  true_positives, row_partials + (int64)column_tile * K,
                  column_partials + (int64)row_tile * K, scratch, warp_columns, row_position,
                  moment);
  if (threadIdx.x == 0) {
    for (int i = 0; i < mg::kMatrixMoments; ++i)
      moment_partials[mg::kMatrixMoments * blockIdx.x + i] = moment[i];
  }

  // The last block of each column (row) of tiles finishes it, and the last of
  // those finishers the whole: every thread fences its own writes, and only
  // then (the barrier) does the block take its tickets, so a finisher sees
  // the partials it adds, and the last one everything.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned int finishing = 0u;
    if (atomicAdd(&tickets[column_tile], 1u) == row_tiles - 1) finishing |= 1u;
    if (atomicAdd(&tickets[column_tiles + row_tile], 1u) == column_tiles - 1) finishing |= 2u;
    finishes = finishing;
  }
  __syncthreads();
  const unsigned int finishing = finishes;  // block-uniform
  if (finishing == 0u) return;
  if (finishing & 1u) {
    mg::finish_columns(column_partials, K, row_tiles, column, predicted, warp_columns);
  }
  if (finishing & 2u) {
    mg::finish_rows(row_partials, K, column_tiles, row_begin, row_end, support);
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    // Read from shared memory again rather than kept through the finishing
    // loops (its register was what spilled on sm_90).
    const unsigned int finished = finishes;
    const unsigned int done = (finished & 1u) + (finished >> 1);
    const unsigned int tasks = column_tiles + row_tiles;
    last_block = atomicAdd(&tickets[tasks], done) + done == tasks;
    if (finished & 1u) tickets[column_tile] = 0u;
    if (finished & 2u) tickets[column_tiles + row_tile] = 0u;
    if (last_block) tickets[tasks] = 0u;
  }
  __syncthreads();
  if (!last_block) return;  // block-uniform

  // The moments: each thread adds every blockDim.x-th block's, in block
  // order, then the block adds the threads'.
  for (int i = 0; i < mg::kMatrixMoments; ++i) moment[i] = 0.0;
  for (int64 block = threadIdx.x; block < gridDim.x; block += blockDim.x) {
    for (int i = 0; i < mg::kMatrixMoments; ++i)
      moment[i] += mg::read_fresh(moment_partials + mg::kMatrixMoments * block + i);
  }
  mg::block_sum(moment, scratch);
  const double nan = mg::quiet_nan();
  mg::evaluate_metrics(true_positives, support, predicted, -1.0, moment[2], K, selected,
                       moments ? moment[0] : nan, moments ? moment[1] : nan, out, scratch);
}
