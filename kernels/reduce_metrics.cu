// Every label metric of the report in one launch, into one float64 buffer.
//
// label_metrics_from_statistics<C>: one block reads per-class statistics
//   (true positives, support, predicted; C = long long counts or double
//   weights) and evaluates the metrics.
// label_metrics_from_matrix<C>: every block reduces some rows of a dense K x K
//   matrix (row sums, diagonal, its share of the column sums and of the kappa
//   moments); the last block to finish (a ticket counter) adds the per-block
//   partials in block order and evaluates the metrics. One launch, no atomics
//   on values, so the result is the same bit for bit run to run.
//
// The buffer holds kSlotCount overall values (the order of
// metrics_gpu._formulas.LABEL_METRIC_SLOTS: the report's metrics, then the
// counts the functional API needs), then kColumnCount per-class columns of K
// values each. Formulas and conventions are those of metrics_gpu._formulas
// (its NumPy code is the reference the tests hold this file to): averages and
// kappa positions run over the `selected` classes (all when null), a 0/0
// per-class rate is 0, and every sum has a fixed order, the same wherever
// unselected classes lie (route_selected): a dense matrix with absent classes
// and the compacted statistics of the same data give the same bits.
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

// Values reduced over the block in one go (the widest reduction below).
constexpr int kMaxReduced = 24;

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

// Reads of values other blocks wrote before the ticket: past L1.
template <typename T>
__device__ __forceinline__ T load_fresh(const T* p) {
  return *(const volatile T*)p;
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

// Largest block the routing buffer below is sized for (cuda: 256, emulated: 64;
// the host's copy: launchers/reduce_metrics.py REDUCE_MAX_BLOCK_THREADS).
constexpr int kMaxBlockThreads = 256;

// One class's counts as a thread holds them: `rank` is its position among the
// selected classes, `present` whether the thread holds a selected class;
// `negatives` the supports of every other class (selected or not).
struct ClassCounts {
  bool present;
  double rank, tp, t, p, negatives;
};

// Values a routed class carries (route_selected's buffer: kRouted per thread).
constexpr int kRouted = 4;

// The per-thread partials of a block sum depend on which thread holds which
// class. For sums over the selected classes to have the same bits whether or
// not unselected classes lie between them (a dense matrix with absent classes
// and the compacted statistics of the same data), each tile hands its selected
// classes to the thread that would hold them were only they laid out: thread
// rank % blockDim.x, which then adds them in rank order. Without a mask rank
// is k and nothing moves. Every thread calls this (it holds barriers);
// `carry` counts the selected classes of the tiles before.
__device__ ClassCounts route_selected(ClassCounts own, int64 k, bool masked, double (&carry)[1],
                                      double* route /* shared, kRouted * kMaxBlockThreads */,
                                      double* scratch) {
  if (!masked) {
    own.rank = (double)k;
    return own;
  }
  double running[1] = {own.present ? 1.0 : 0.0};
  const int64 first = (int64)carry[0];
  block_scan(running, carry, scratch);
  if (own.present) {
    int64 slot = ((int64)running[0] - 1) % blockDim.x;
    route[kRouted * slot] = own.tp;
    route[kRouted * slot + 1] = own.t;
    route[kRouted * slot + 2] = own.p;
    route[kRouted * slot + 3] = own.negatives;
  }
  __syncthreads();
  const int64 block = blockDim.x;
  const int64 offset = ((int64)threadIdx.x - first % block + block) % block;
  ClassCounts mine{offset < (int64)carry[0] - first, (double)(first + offset), 0.0, 0.0, 0.0,
                   0.0};
  if (mine.present) {
    mine.tp = route[kRouted * threadIdx.x];
    mine.t = route[kRouted * threadIdx.x + 1];
    mine.p = route[kRouted * threadIdx.x + 2];
    mine.negatives = route[kRouted * threadIdx.x + 3];
  }
  __syncthreads();  // the next tile writes `route` again
  return mine;
}

// The per-class rates of _formulas (a 0/0 rate is 0). `negatives` is the
// other classes' supports, summed as such (_formulas.sum_of_others): exactly
// 0 for a class that holds every sample, where total - support may be a
// rounding residue of either sign.
struct ClassRates {
  double precision, recall, f1, jaccard, specificity, tn;
};

__device__ __forceinline__ ClassRates class_rates(double tp, double t, double p,
                                                  double negatives) {
  double fp = p - tp;
  double fn = t - tp;
  double tn = negatives - fp;
  return ClassRates{divide(tp, p, 0.0),
                    divide(tp, t, 0.0),
                    divide(2.0 * tp, t + p, 0.0),
                    divide(tp, (tp + fp) + fn, 0.0),
                    divide(tn, negatives, 0.0),
                    tn};
}

// Every metric from per-class counts, by one block (`scratch`: shared memory
// for the block reductions). `total` < 0 means the sum of the supports;
// `misclassified` is the counting pass's sum w [t != p] (NaN: none, then
// total - sum tp). Loops over classes step whole tiles (block-uniform trip
// counts) because they hold barriers.
template <typename C>
__device__ void evaluate_metrics(const C* true_positives, const C* support, const C* predicted,
                                 double total, double misclassified, int64 K,
                                 const unsigned char* selected, double linear, double quadratic,
                                 double* out,
                                 double* scratch /* shared, kMaxReduced * kWarpSize */,
                                 double* route /* shared, kRouted * kMaxBlockThreads */) {
  double* columns = out + kSlotCount;
  const int64 tiles = (K + blockDim.x - 1) / blockDim.x;

  // Pass 0: the supports of the classes after each class, scanned in
  // descending class order and kept in its specificity cell until pass 1 reads
  // them and writes the rate there; another thread of the block may hold the
  // class then, so the barriers of the scans in between order the two.
  {
    double after[1] = {0.0};
    for (int64 tile = 0; tile < tiles; ++tile) {
      int64 k = K - 1 - (tile * blockDim.x + threadIdx.x);
      double running[1] = {k >= 0 ? (double)load_fresh(support + k) : 0.0};
      double before[1];
      block_scan(running, after, scratch, before);
      if (k >= 0) columns[kSpecificity * K + k] = before[0];
    }
  }

  // Pass 1: sums over the selected classes, and the per-class columns.
  enum {
    sTp, sSupport, sPredicted, sSelected, sSupported,
    sRecallSupported, sPrecision, sRecall, sF1, sJaccard, sSpecificity, sWeightedPrecision,
    sWeightedRecall, sWeightedF1, sClassAccuracy, sClassError, sPredictedClasses, sBoth,
    sUnpredicted, sAbsent, sNoNegatives, sSupportTimesPredicted, kPass1
  };
  double pass1[kPass1];
  __shared__ double total_shared;
  {
    double all_support[1] = {0.0};
    for (int64 tile = 0; tile < tiles; ++tile) {
      int64 k = tile * blockDim.x + threadIdx.x;
      if (k < K) all_support[0] += (double)load_fresh(support + k);
    }
    block_sum(all_support, scratch);
    if (threadIdx.x == 0) total_shared = total < 0.0 ? all_support[0] : total;
    __syncthreads();
  }
  const double s = total_shared;
  int s_exponent;
  frexp(s, &s_exponent);  // s = m 2^s_exponent, m in [0.5, 1) (exponent 0 for 0)
  for (int i = 0; i < kPass1; ++i) pass1[i] = 0.0;
  const bool masked = selected != nullptr;
  double rank_carry[1] = {0.0};
  double support_carry[1] = {0.0};
  // sum t p (scaled) exactly, for MCC's covariance c s - sum t p
  double tp_high = 0.0, tp_low = 0.0;
  for (int64 tile = 0; tile < tiles; ++tile) {
    int64 k = tile * blockDim.x + threadIdx.x;
    ClassCounts own{false, 0.0, 0.0, 0.0, 0.0, 0.0};
    double running[1] = {k < K ? (double)load_fresh(support + k) : 0.0};
    double before[1];
    block_scan(running, support_carry, scratch, before);
    if (k < K) {
      own.tp = (double)load_fresh(true_positives + k);
      own.t = (double)load_fresh(support + k);
      own.p = (double)load_fresh(predicted + k);
      own.negatives = before[0] + columns[kSpecificity * K + k];
      own.present = is_selected(selected, k);
      ClassRates rates = class_rates(own.tp, own.t, own.p, own.negatives);
      columns[kPrecision * K + k] = rates.precision;
      columns[kRecall * K + k] = rates.recall;
      columns[kF1 * K + k] = rates.f1;
      columns[kSpecificity * K + k] = rates.specificity;
      columns[kJaccard * K + k] = rates.jaccard;
    }
    ClassCounts c = route_selected(own, k, masked, rank_carry, route, scratch);
    if (!c.present) continue;
    const double tp = c.tp, t = c.t, p = c.p;
    ClassRates rates = class_rates(tp, t, p, c.negatives);
    double fp = p - tp;
    double fn = t - tp;
    pass1[sTp] += tp;
    pass1[sSupport] += t;
    pass1[sPredicted] += p;
    {
      double product, error;
      two_product(scaled(t, s_exponent), scaled(p, s_exponent), product, error);
      pass1[sSupportTimesPredicted] += product;
      add_exactly(tp_high, tp_low, product);
      tp_low += error;
    }
    pass1[sSelected] += 1.0;
    if (t > 0.0) {
      pass1[sSupported] += 1.0;
      pass1[sRecallSupported] += tp / t;
    }
    pass1[sPrecision] += rates.precision;
    pass1[sRecall] += rates.recall;
    pass1[sF1] += rates.f1;
    pass1[sJaccard] += rates.jaccard;
    pass1[sSpecificity] += rates.specificity;
    pass1[sWeightedPrecision] += rates.precision * t;
    pass1[sWeightedRecall] += rates.recall * t;
    pass1[sWeightedF1] += rates.f1 * t;
    pass1[sClassAccuracy] += divide(tp + rates.tn, s, quiet_nan());
    pass1[sClassError] += divide(fp + fn, s, quiet_nan());
    if (p > 0.0) pass1[sPredictedClasses] += 1.0;
    if (t > 0.0 && p > 0.0) pass1[sBoth] += 1.0;
    if (p == 0.0) pass1[sUnpredicted] += 1.0;
    if (t == 0.0 && p == 0.0) pass1[sAbsent] += 1.0;
    if (c.negatives == 0.0) pass1[sNoNegatives] += 1.0;
  }
  block_sum(pass1, scratch);
  block_sum_exact(tp_high, tp_low, scratch);

  const double m = pass1[sSelected];
  const double t_total = pass1[sSupport];
  const double p_total = pass1[sPredicted];
  const bool kappa_undefined =
      s == 0.0 || (pass1[sSupported] == 1.0 && pass1[sPredictedClasses] == pass1[sBoth] &&
                   pass1[sBoth] == 1.0);

  // Pass 2: sums over pairs of classes i != j as sums of non-negative terms
  // (_formulas.unequal_pairs and kappa_disagreements), positions being ranks
  // among the selected classes: sum_{i != j} t_i p_j = sum_j p_j T_<j + t_j
  // P_<j (kappa's expected disagreement, MCC's covariance), t_i t_j and p_i
  // p_j (MCC's variances, half of them), and (weighted kappa) the linear
  // one, sum_j p_j A_j + t_j B_j with A_j the running sums T_<=m added over
  // the gaps m below j (B likewise for P). It also sums t * rank for pass 3,
  // which sums about the mean position of y_true.
  double linear_cross = 0.0, quadratic_cross = 0.0;
  const bool weighted_kappa = !(linear != linear) || !(quadratic != quadratic);
  // t p pairs, linear cross, sum t * rank, t t pairs / 2, p p pairs / 2
  double pass2[5] = {0.0, 0.0, 0.0, 0.0, 0.0};
  double pairs_high = 0.0, pairs_low = 0.0;  // pass2[0] exactly, for MCC
  {
    double carry[3] = {0.0, 0.0, 0.0};
    double gap_carry[2] = {0.0, 0.0};
    for (int64 tile = 0; tile < tiles; ++tile) {
      int64 k = tile * blockDim.x + threadIdx.x;
      bool chosen = k < K && is_selected(selected, k);
      // Scaled weights (scaled): the pair sums are those of s^2 2^-2e.
      double t = chosen ? scaled((double)load_fresh(support + k), s_exponent) : 0.0;
      double p = chosen ? scaled((double)load_fresh(predicted + k), s_exponent) : 0.0;
      double running[3] = {chosen ? 1.0 : 0.0, t, p};
      double before[3];
      block_scan(running, carry, scratch, before);
      if (chosen) {
        double product, error;
        two_product(p, before[1], product, error);
        add_exactly(pairs_high, pairs_low, product);
        pairs_low += error;
        two_product(t, before[2], product, error);
        add_exactly(pairs_high, pairs_low, product);
        pairs_low += error;
        pass2[0] += p * before[1] + t * before[2];
        pass2[2] += t * (running[0] - 1.0);
        pass2[3] += t * before[1];
        pass2[4] += p * before[2];
      }
      if (weighted_kappa) {
        double gaps[2] = {chosen ? running[1] : 0.0, chosen ? running[2] : 0.0};
        double gaps_before[2];
        block_scan(gaps, gap_carry, scratch, gaps_before);
        if (chosen) pass2[1] += p * gaps_before[0] + t * gaps_before[1];
      }
    }
    block_sum(pass2, scratch);
    block_sum_exact(pairs_high, pairs_low, scratch);
  }
  if (weighted_kappa) {
    linear_cross = pass2[1];
    const double centre = divide(pass2[2], scaled(t_total, s_exponent), 0.0);
    double pass3[4] = {0.0, 0.0, 0.0, 0.0};  // t o^2, p o^2, t o, p o
    double route_carry[1] = {0.0};
    for (int64 tile = 0; tile < tiles; ++tile) {
      int64 k = tile * blockDim.x + threadIdx.x;
      ClassCounts own{k < K && is_selected(selected, k), 0.0, 0.0, 0.0, 0.0, 0.0};
      if (own.present) {
        own.t = scaled((double)load_fresh(support + k), s_exponent);
        own.p = scaled((double)load_fresh(predicted + k), s_exponent);
      }
      ClassCounts c = route_selected(own, k, masked, route_carry, route, scratch);
      if (!c.present) continue;
      double offset = c.rank - centre;
      pass3[0] += c.t * (offset * offset);
      pass3[1] += c.p * (offset * offset);
      pass3[2] += c.t * offset;
      pass3[3] += c.p * offset;
    }
    block_sum(pass3, scratch);
    quadratic_cross = scaled(p_total, s_exponent) * pass3[0] +
                      scaled(t_total, s_exponent) * pass3[1] - 2.0 * pass3[2] * pass3[3];
  }

  if (threadIdx.x != 0) return;
  const double nan = quiet_nan();
  const double accuracy = divide(pass1[sTp], s, nan);
  const double macro_precision = m > 0.0 ? pass1[sPrecision] / m : nan;
  const double macro_recall = m > 0.0 ? pass1[sRecall] / m : nan;
  // nan_average with support weights: the plain mean when they sum to 0.
  const double weight_sum = t_total;
  out[kAccuracy] = accuracy;
  out[kBalancedAccuracy] =
      pass1[sSupported] > 0.0 ? pass1[sRecallSupported] / pass1[sSupported] : nan;
  out[kMicroPrecision] = divide(pass1[sTp], p_total, 0.0);
  out[kMicroRecall] = divide(pass1[sTp], t_total, 0.0);
  out[kMicroF1] = divide(2.0 * pass1[sTp], t_total + p_total, 0.0);
  out[kMacroPrecision] = macro_precision;
  out[kMacroRecall] = macro_recall;
  out[kMacroF1] = m > 0.0 ? pass1[sF1] / m : nan;
  out[kMacroF1Harmonic] = 2.0 * macro_precision * macro_recall / (macro_precision + macro_recall);
  out[kWeightedPrecision] = m == 0.0 ? nan
                            : weight_sum != 0.0 ? pass1[sWeightedPrecision] / weight_sum
                                                : pass1[sPrecision] / m;
  out[kWeightedRecall] = m == 0.0 ? nan
                         : weight_sum != 0.0 ? pass1[sWeightedRecall] / weight_sum
                                             : pass1[sRecall] / m;
  out[kWeightedF1] = m == 0.0 ? nan
                     : weight_sum != 0.0 ? pass1[sWeightedF1] / weight_sum : pass1[sF1] / m;
  out[kMacroJaccard] = m > 0.0 ? pass1[sJaccard] / m : nan;
  out[kMacroSpecificity] = m > 0.0 ? pass1[sSpecificity] / m : nan;
  const double observed = misclassified != misclassified ? s - pass1[sTp] : misclassified;
  // Matthews from the pairs of classes, without differences of squares (_formulas).
  // The covariance's two forms split s^2 between their terms (c s + m s =
  // sum t p + sum_{i != j} t_i p_j): the one with the smaller terms cancels
  // least (_formulas.matthews_corrcoef).
  // The pair sums are of weights scaled by 2^-s_exponent (scaled), so the
  // terms they meet are too: times s 2^-2 s_exponent.
  const double s_scaled = scaled(s, s_exponent);
  const double correct_s = scaled(pass1[sTp], s_exponent) * s_scaled;
  const double misclassified_s = scaled(observed, s_exponent) * s_scaled;
  // The chosen form evaluated exactly from its error-free parts: exact counts
  // (integer weights below 2^53) give the exact covariance however much its
  // terms cancel (_formulas.matthews_corrcoef).
  double cov_high = 0.0, cov_low = 0.0;
  {
    double product, error;
    if (fmax(correct_s, pass1[sSupportTimesPredicted]) <= fmax(pass2[0], misclassified_s)) {
      two_product(scaled(pass1[sTp], s_exponent), s_scaled, product, error);
      add_exactly(cov_high, cov_low, product);
      cov_low += error;
      add_exactly(cov_high, cov_low, -tp_high);
      cov_low -= tp_low;
    } else {
      add_exactly(cov_high, cov_low, pairs_high);
      cov_low += pairs_low;
      two_product(-scaled(observed, s_exponent), s_scaled, product, error);
      add_exactly(cov_high, cov_low, product);
      cov_low += error;
    }
  }
  const double cov_tp = cov_high + cov_low;
  const double cov_pp = pass2[4] + pass2[4];
  const double cov_tt = pass2[3] + pass2[3];
  out[kMatthewsCorrcoef] = divide(cov_tp, sqrt(cov_pp * cov_tt), 0.0);
  out[kCohenKappa] = kappa_undefined ? nan : 1.0 - misclassified_s / pass2[0];
  out[kLinearWeightedKappa] =
      kappa_undefined ? nan : 1.0 - scaled(linear, s_exponent) * s_scaled / linear_cross;
  out[kQuadraticWeightedKappa] =
      kappa_undefined ? nan : 1.0 - scaled(quadratic, s_exponent) * s_scaled / quadratic_cross;
  out[kAverageAccuracy] = m > 0.0 ? pass1[sClassAccuracy] / m : nan;
  out[kErrorRate] = m > 0.0 ? pass1[sClassError] / m : nan;
  out[kHammingLoss] = 1.0 - accuracy;
  out[kZeroOneLoss] = 1.0 - accuracy;
  out[kTotal] = s;
  out[kCorrect] = pass1[sTp];
  out[kSelectedClasses] = m;
  out[kSupportedClasses] = pass1[sSupported];
  out[kUnpredictedClasses] = pass1[sUnpredicted];
  out[kAbsentClasses] = pass1[sAbsent];
  out[kClassesWithoutNegatives] = pass1[sNoNegatives];
  out[kKappaUndefined] = kappa_undefined ? 1.0 : 0.0;
  out[kMisclassified] = observed;
}

}  // namespace mg

// One block. `total` and `misclassified` point at the statistics' total and
// misclassified weight (C; misclassified null when the state has none); the
// moments are float64 scalars, or null when the state has none (weighted
// kappa is NaN).
template <typename C>
__global__ void label_metrics_from_statistics(const C* true_positives, const C* support,
                                              const C* predicted, const C* total,
                                              const C* misclassified, mg::int64 num_classes,
                                              const unsigned char* selected,
                                              const double* linear, const double* quadratic,
                                              double* out) {
  __shared__ double scratch[mg::kMaxReduced * mg::kWarpSize];
  __shared__ double route[mg::kRouted * mg::kMaxBlockThreads];
  const double nan = mg::quiet_nan();
  mg::evaluate_metrics(true_positives, support, predicted, (double)*total,
                       misclassified == nullptr ? nan : (double)*misclassified, num_classes,
                       selected, linear == nullptr ? nan : *linear,
                       quadratic == nullptr ? nan : *quadratic, out, scratch, route);
}

// Dynamic shared memory: K counters of C (this block's column sums) and K
// int64 positions. Block b owns rows b, b + gridDim.x, ...; it writes their
// support and diagonal, and its column sums, moment sums and off-diagonal
// sum (the misclassified weight) as partials (kMatrixMoments per block).
// `blocks_done` is zero at launch and zero again after it.
template <typename C>
__global__ void label_metrics_from_matrix(const C* matrix, mg::int64 num_classes,
                                          const unsigned char* selected, int moments,
                                          C* true_positives, C* support, C* predicted,
                                          C* column_partials, double* moment_partials,
                                          unsigned int* blocks_done, double* out) {
  using mg::int64;
  const int64 K = num_classes;
  MG_DYNAMIC_SHARED(C, column);
  int64* position = reinterpret_cast<int64*>(column + K);
  __shared__ double scratch[mg::kMaxReduced * mg::kWarpSize];
  __shared__ double route[mg::kRouted * mg::kMaxBlockThreads];
  __shared__ C row_scratch[mg::kWarpSize];
  __shared__ unsigned int ticket;
  const int64 tiles = (K + blockDim.x - 1) / blockDim.x;

  // Positions of the classes: their ranks among the selected ones.
  double carry[1] = {0.0};
  for (int64 tile = 0; tile < tiles; ++tile) {
    int64 k = tile * blockDim.x + threadIdx.x;
    double running[1] = {k < K && mg::is_selected(selected, k) ? 1.0 : 0.0};
    mg::block_scan(running, carry, scratch);
    if (k < K) {
      position[k] = (int64)running[0] - 1;
      column[k] = 0;
    }
  }
  __syncthreads();

  constexpr int kMatrixMoments = 3;  // linear, quadratic, off the diagonal
  double moment[kMatrixMoments] = {0.0, 0.0, 0.0};
  for (int64 row = blockIdx.x; row < K; row += gridDim.x) {
    C row_sum[1] = {0};
    const C* values = matrix + row * K;
    const bool row_chosen = mg::is_selected(selected, row);
    for (int64 k = threadIdx.x; k < K; k += blockDim.x) {
      C value = values[k];
      column[k] += value;
      row_sum[0] += value;
      if (row_chosen && k != row && mg::is_selected(selected, k)) {
        moment[2] += (double)value;
        if (moments) {
          int64 gap = position[row] > position[k] ? position[row] - position[k]
                                                  : position[k] - position[row];
          double weighted = (double)value * (double)gap;
          moment[0] += weighted;
          moment[1] += weighted * (double)gap;
        }
      }
    }
    mg::block_sum(row_sum, row_scratch);
    if (threadIdx.x == 0) {
      support[row] = row_sum[0];
      true_positives[row] = values[row];
    }
  }
  for (int64 k = threadIdx.x; k < K; k += blockDim.x)
    column_partials[(int64)blockIdx.x * K + k] = column[k];
  mg::block_sum(moment, scratch);
  if (threadIdx.x == 0) {
    for (int i = 0; i < kMatrixMoments; ++i)
      moment_partials[kMatrixMoments * blockIdx.x + i] = moment[i];
  }

  // The last block to arrive finishes: every thread fences its own writes,
  // and only then (the barrier) does the block take its ticket, so the last
  // block sees every other block's partials.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) ticket = atomicAdd(blocks_done, 1u);
  __syncthreads();
  if (ticket != gridDim.x - 1) return;  // block-uniform

  for (int64 k = threadIdx.x; k < K; k += blockDim.x) {
    C sum = 0;
    for (unsigned int b = 0; b < gridDim.x; ++b)
      sum += mg::load_fresh(column_partials + (int64)b * K + k);
    predicted[k] = sum;
  }
  __shared__ double moment_total[kMatrixMoments];
  if (threadIdx.x == 0) {
    for (int i = 0; i < kMatrixMoments; ++i) {
      double sum = 0.0;
      for (unsigned int b = 0; b < gridDim.x; ++b)
        sum += mg::load_fresh(moment_partials + kMatrixMoments * b + i);
      moment_total[i] = sum;
    }
    *blocks_done = 0;
  }
  __threadfence_block();
  __syncthreads();
  const double nan = mg::quiet_nan();
  mg::evaluate_metrics(true_positives, support, predicted, -1.0, moment_total[2], K, selected,
                       moments ? moment_total[0] : nan, moments ? moment_total[1] : nan, out,
                       scratch, route);
}
