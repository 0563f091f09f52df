// The multilabel state's update: one pass over (N, L) targets and predictions.
//
// multilabel_update adds a batch of 0/1 targets y_true and predictions (0/1
// labels, or scores cut at a threshold) to a state of
//   * per label: tp, fp, fn, tn (uint64 counts, or float64 weighted sums);
//   * over rows (float64, kRowSlotCount): the summed weight, the weight of
//     rows with every label right (subset accuracy), the weighted wrong and
//     counted cells (Hamming loss), and for each set-wise rate of a row
//     (precision, recall, F-beta, Jaccard: average="samples") the weighted
//     sum of its values where defined and the weight of those rows (so
//     that every zero_division option is a formula of the sums: NaN's mean
//     over the defined rows exactly, not as a difference), and the
//     number of rows where each is 0/0 (the warnings);
//   * with thresholds H > 0, the (2, L, H) histogram of each label's
//     probability (sigmoid of a logit), targets 1 then 0: the binned ROC AUC
//     and average precision per label, with their error bounds;
//   * checks (uint64): rows left out, the first of them, and why.
// Element types are codes: the common pairs of (y_true, preds) types are
// instantiations of their own (multilabel_update<TRUE_CODE, PRED_CODE>: each
// cell one load of a known type), the others read the codes at run time
// (<kAnyElement, kAnyElement>: a switch per read, which made the pass bound
// by its instructions, about 170-210 a cell on sm_90, not by memory).
//
// A group of G lanes (1 or 32) takes a row: G = 1 for L <= 32 (a thread per
// row; a warp's rows are one contiguous span), else a warp per row, its lanes
// striding over the labels. A row is read twice, the second time from cache:
// first its checks (a row with a bad value is left out whole and counted),
// then its counts. Per-label counts go to shared memory when 4 L of them fit
// (dynamic shared bytes > 0), else straight to global atomics; with G = 1 and
// no weights a warp adds a ballot's count per label and cell kind, not each
// cell. Row sums are summed over a warp's rows in registers (G = 1), added
// per block in shared memory, then once per block to global memory.
//
// The NumPy reference, which the tests hold this file to, is
// metrics_gpu/_multilabel/stream.py (multilabel_update_reference).
#include "scores.cu"  // calibration_bin: the binned metrics' bins are the calibration bins

namespace mg {

// Element codes of the inputs (ELEMENT_CODE_NAMES in
// metrics_gpu/backends/launchers/multilabel.py).
enum ElementCode {
  kUint8,     // bool, uint8 (and int8: 0 and 1 have the same bits)
  kInt32,
  kInt64,
  kFloat32,
  kFloat64,
  kFloat16,   // IEEE half, as bits
  kBfloat16,  // bfloat16, as bits
  kElementCodeCount
};

// How a prediction is read (PREDICTION_MODE_NAMES).
enum PredictionMode {
  kLabels,         // 0/1: 1 is positive
  kProbabilities,  // finite in [0, 1]: positive above the cut
  kLogits,         // finite: positive above the cut (log(t / (1 - t)))
  kPredictionModeCount
};

enum RowSlot {
  kRowWeight,
  kRowExact,
  kRowWrongCells,
  kRowCountedCells,
  kRowPrecision,
  kRowPrecisionDefined,
  kRowRecall,
  kRowRecallDefined,
  kRowFScore,
  kRowFScoreDefined,
  kRowJaccard,
  kRowJaccardDefined,
  kRowCount,
  // Counted rows with a 0/0 rate, of which scikit-learn warns: no predicted
  // label (precision), no true label (recall), neither (F-beta for 0 < beta
  // < inf, and Jaccard); a row of weight 0 for each (scikit-learn's
  // samplewise counts are its counts times its weight: all 0).
  kRowNoPredicted,
  kRowNoTrue,
  kRowNoLabels,
  kRowSlotCount
};

// Why rows were left out: checks[2] has bit 1 << reason set (CHECKED_ARGUMENTS).
enum CheckBit { kBadTarget, kBadPrediction, kBadWeight, kCheckBitCount };

__device__ __forceinline__ double element(const void* base, int code, int64 i) {
  switch (code) {
    case kUint8: return (double)static_cast<const unsigned char*>(base)[i];
    case kInt32: return (double)static_cast<const int*>(base)[i];
    case kInt64: return (double)static_cast<const long long*>(base)[i];
    case kFloat32: return (double)static_cast<const float*>(base)[i];
    case kFloat16: return (double)widen(static_cast<const float16_bits*>(base)[i]);
    case kBfloat16: return (double)widen(static_cast<const bfloat16_bits*>(base)[i]);
    default: return static_cast<const double*>(base)[i];
  }
}

// An instantiation's element type: a code known at compile time (the
// switch folds to one load), or kAnyElement, read at run time.
constexpr int kAnyElement = -1;

template <int CODE>
__device__ __forceinline__ double element_as(const void* base, int code, int64 i) {
  return element(base, CODE == kAnyElement ? code : CODE, i);
}

__device__ __forceinline__ bool is_finite_value(double x) { return x - x == 0.0; }

// A target cell: 1, 0, or -1 for the ignored value (has_ignore) and -2 for
// anything else.
__device__ __forceinline__ int target_of(double value, int has_ignore, double ignore_value) {
  if (has_ignore && value == ignore_value) return -1;
  if (value == 1.0) return 1;
  if (value == 0.0) return 0;
  return -2;
}

// A prediction cell: 1, 0, or -2 for a value the mode refuses.
__device__ __forceinline__ int prediction_of(double value, int mode, double cut) {
  if (mode == kLabels) return value == 1.0 ? 1 : (value == 0.0 ? 0 : -2);
  if (!is_finite_value(value) || (mode == kProbabilities && (value < 0.0 || value > 1.0))) return -2;
  return value > cut ? 1 : 0;
}

// One of a counted row's set-wise values (RowSlot), weighted by w, from its
// cells; the rates 0 where undefined (0/0). A slot at a time: the 16 held
// at once took multilabel_update 74 registers.
__device__ __forceinline__ double row_slot_value(int slot, double w, int tp, int fp, int fn,
                                                 int tn, double f_beta2) {
  const double p_den = tp + fp;
  const double r_den = tp + fn;
  const double f_den = (1.0 + f_beta2) * tp + f_beta2 * fn + fp;
  const double j_den = tp + fp + fn;
  switch (slot) {
    case kRowWeight: return w;
    case kRowExact: return fp + fn == 0 ? w : 0.0;
    case kRowWrongCells: return w * (fp + fn);
    case kRowCountedCells: return w * (tp + fp + fn + tn);
    case kRowPrecision: return p_den > 0.0 ? w * (tp / p_den) : 0.0;
    case kRowPrecisionDefined: return p_den > 0.0 ? w : 0.0;
    case kRowRecall: return r_den > 0.0 ? w * (tp / r_den) : 0.0;
    case kRowRecallDefined: return r_den > 0.0 ? w : 0.0;
    case kRowFScore: return f_den > 0.0 ? w * ((1.0 + f_beta2) * tp / f_den) : 0.0;
    case kRowFScoreDefined: return f_den > 0.0 ? w : 0.0;
    case kRowJaccard: return j_den > 0.0 ? w * (tp / j_den) : 0.0;
    case kRowJaccardDefined: return j_den > 0.0 ? w : 0.0;
    case kRowCount: return 1.0;
    case kRowNoPredicted: return p_den > 0.0 && w != 0.0 ? 0.0 : 1.0;
    case kRowNoTrue: return r_den > 0.0 && w != 0.0 ? 0.0 : 1.0;
    case kRowNoLabels: return j_den > 0.0 && w != 0.0 ? 0.0 : 1.0;
    default: return 0.0;
  }
}

// multilabel_update's launch bound: blocks of at most kUpdateBlockThreads
// (the host's copy: launchers/multilabel.py UPDATE_MAX_BLOCK_THREADS), 4 of
// them per SM, 64 registers (sm_100's ptxas spills there: 3, 80).
constexpr int kUpdateBlockThreads = 256;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
constexpr int kUpdateMinBlocks = 3;
#else
constexpr int kUpdateMinBlocks = 4;
#endif

}  // namespace mg

// y_true, preds: (N, L) with row strides in elements (labels contiguous);
// weight: (N,) or null. Counts: `label_counts` (4 L: tp, fp, fn, tn) of
// uint64 (unweighted) or float64 (weighted: `weighted`), `row_sums`
// (kRowSlotCount float64), `checks` (3 uint64: rows left out, the first of
// them as a row of the batch plus `row_offset`, the CheckBit reasons).
// `f_beta2` is beta^2 of the row F-score. With `thresholds` H > 0,
// `histogram` (2 L H, of the counts' type) bins each counted cell's
// probability; else it is null. Dynamic shared memory: 4 L accumulators of
// 8 bytes when `shared_counts` and 2 L H more when `shared_histogram` (the
// histogram's cells privatised per block: every cell of a batch lands in
// 2 L H cells, which global atomics from every block contended for), else
// none.
template <int TRUE_CODE, int PRED_CODE>
__global__ void __launch_bounds__(mg::kUpdateBlockThreads, mg::kUpdateMinBlocks)
multilabel_update(const void* y_true, int true_code, mg::int64 true_stride,
                                  const void* preds, int pred_code, mg::int64 pred_stride,
                                  int mode, double cut, const void* weight, int weight_code,
                                  int has_ignore, double ignore_value, mg::int64 num_rows,
                                  mg::int64 num_labels, int lanes_per_row, int shared_counts,
                                  int shared_histogram, int weighted, double f_beta2,
                                  mg::int64 row_offset,
                                  int thresholds, void* label_counts, double* row_sums,
                                  unsigned long long* checks, void* histogram) {
  using mg::int64;
  using mg::uint64;
  const int64 L = num_labels;
  MG_DYNAMIC_SHARED(unsigned long long, shared_bits);
  double* shared_weighted = reinterpret_cast<double*>(shared_bits);
  __shared__ double block_rows[mg::kRowSlotCount];
  const int64 H = thresholds;
  // The block's cells in shared memory: 4 L counts, then (shared_histogram,
  // only with shared_counts) the 2 L H histogram cells.
  const int64 shared_cells = shared_counts ? 4 * L + (shared_histogram ? 2 * L * H : 0) : 0;
  for (int64 i = threadIdx.x; i < shared_cells; i += blockDim.x) shared_bits[i] = 0;
  for (int i = threadIdx.x; i < mg::kRowSlotCount; i += blockDim.x) block_rows[i] = 0.0;
  __syncthreads();

  unsigned long long* histogram_bits = static_cast<unsigned long long*>(histogram);
  double* histogram_weighted = static_cast<double*>(histogram);
  unsigned long long* global_bits = static_cast<unsigned long long*>(label_counts);
  double* global_weighted = static_cast<double*>(label_counts);
  const int G = lanes_per_row;
  constexpr unsigned long long kIgnoredCell = 4;  // a cell kind: the ignored target value
  constexpr int kKindsPerWord = 21;               // 3-bit cell kinds in 64 bits
  const unsigned int lane = mg::lane_index();
  const unsigned int group_lane = lane % G;
  const int64 groups_per_block = blockDim.x / G;
  const int64 group_in_block = threadIdx.x / G;
  const int64 group_stride = (int64)gridDim.x * groups_per_block;
  // Whole warps step together: every lane runs the same number of trips.
  const int64 trips = (num_rows + group_stride - 1) / group_stride;
  for (int64 trip = 0; trip < trips; ++trip) {
    const int64 row = trip * group_stride + (int64)blockIdx.x * groups_per_block + group_in_block;
    const bool active = row < num_rows;
    const int64 true_base = row * true_stride;
    const int64 pred_base = row * pred_stride;
    double w = 1.0;
    int bad = 0;
    // G = 1 (L <= 32): each cell's kind, 3 bits a label (0 ... 3: tp, fp, fn,
    // tn; kIgnoredCell), labels 0-20 in `kinds_low`, 21-31 in `kinds_high`, so
    // that the counting trips below read no input again.
    unsigned long long kinds_low = 0, kinds_high = 0;
    if (active) {
      if (weight != nullptr) {
        w = mg::element(weight, weight_code, row);
        if (!mg::is_finite_value(w) || w < 0.0) bad |= 1 << mg::kBadWeight;
      }
      for (int64 l = group_lane; l < L; l += G) {
        const int t = mg::target_of(
            mg::element_as<TRUE_CODE>(y_true, true_code, true_base + l), has_ignore,
            ignore_value);
        const int p = mg::prediction_of(
            mg::element_as<PRED_CODE>(preds, pred_code, pred_base + l), mode, cut);
        if (t == -2) bad |= 1 << mg::kBadTarget;
        if (p == -2) bad |= 1 << mg::kBadPrediction;
        if (G == 1) {
          const unsigned long long kind =
              t == -1 ? kIgnoredCell : (unsigned long long)(t ? (p ? 0 : 2) : (p ? 1 : 3));
          if (l < kKindsPerWord) kinds_low |= kind << (3 * l);
          else kinds_high |= kind << (3 * (l - kKindsPerWord));
        }
      }
    }
    if (G > 1) {
      for (int offset = mg::kWarpSize / 2; offset > 0; offset >>= 1)
        bad |= __shfl_xor_sync(mg::kFullWarp, bad, offset);
    }
    const bool counted = active && bad == 0;
    int tp = 0, fp = 0, fn = 0, tn = 0;  // this row's cells (of this lane, with G > 1)
    // With G = 1 every lane of a warp runs the same L trips (a lane whose row
    // is not counted takes no cell), so that unweighted counts are a ballot
    // per cell kind and label: 4 atomics per 32 rows, not one per cell.
    for (int64 l = G == 1 ? 0 : group_lane; l < L && (G == 1 || counted); l += G) {
      int cell = -1;  // tp, fp, fn, tn: 0 ... 3
      if (counted && G == 1 && H == 0) {
        const unsigned long long kind =
            l < kKindsPerWord ? kinds_low >> (3 * l) : kinds_high >> (3 * (l - kKindsPerWord));
        cell = (kind & 7ull) == kIgnoredCell ? -1 : (int)(kind & 7ull);
      } else if (counted) {
        const int t = mg::target_of(
            mg::element_as<TRUE_CODE>(y_true, true_code, true_base + l), has_ignore,
            ignore_value);
        if (t >= 0) {  // not the ignored value
          const double value = mg::element_as<PRED_CODE>(preds, pred_code, pred_base + l);
          const int p = mg::prediction_of(value, mode, cut);
          if (H > 0) {
            const double probability = mode == mg::kLogits ? 1.0 / (1.0 + exp(-value)) : value;
            const int64 bin = (t ? 0 : L * H) + l * H + mg::calibration_bin(probability, (int)H);
            if (shared_histogram) {  // the block's own cells: no contention in L2
              if (weighted) atomicAdd(&shared_weighted[4 * L + bin], w);
              else atomicAdd(&shared_bits[4 * L + bin], 1ull);
            } else if (weighted) {
              atomicAdd(&histogram_weighted[bin], w);
            } else {
              atomicAdd(&histogram_bits[bin], 1ull);
            }
          }
          cell = t ? (p ? 0 : 2) : (p ? 1 : 3);
        }
      }
      tp += cell == 0;
      fp += cell == 1;
      fn += cell == 2;
      tn += cell == 3;
      if (!weighted && G == 1) {
        const unsigned int tps = __ballot_sync(mg::kFullWarp, cell == 0);
        const unsigned int fps = __ballot_sync(mg::kFullWarp, cell == 1);
        const unsigned int fns = __ballot_sync(mg::kFullWarp, cell == 2);
        const unsigned int tns = __ballot_sync(mg::kFullWarp, cell == 3);
        // Lane k adds the cells of kind k.
        const unsigned int mine = lane == 0 ? tps : lane == 1 ? fps : lane == 2 ? fns : tns;
        if (lane < 4 && mine != 0) {
          const int64 slot = lane * L + l;
          const unsigned long long n = (unsigned long long)__popc(mine);
          if (shared_counts) atomicAdd(&shared_bits[slot], n);
          else atomicAdd(&global_bits[slot], n);
        }
      } else if (cell >= 0) {
        const int64 slot = cell * L + l;
        if (weighted) {
          if (shared_counts) atomicAdd(&shared_weighted[slot], w);
          else atomicAdd(&global_weighted[slot], w);
        } else {
          if (shared_counts) atomicAdd(&shared_bits[slot], 1ull);
          else atomicAdd(&global_bits[slot], 1ull);
        }
      }
    }
    if (G > 1) {
      for (int offset = mg::kWarpSize / 2; offset > 0; offset >>= 1) {
        tp += __shfl_xor_sync(mg::kFullWarp, tp, offset);
        fp += __shfl_xor_sync(mg::kFullWarp, fp, offset);
        fn += __shfl_xor_sync(mg::kFullWarp, fn, offset);
        tn += __shfl_xor_sync(mg::kFullWarp, tn, offset);
      }
    }
    if (active && !counted && group_lane == 0) {
      atomicAdd(&checks[0], 1ull);
      atomicMin(&checks[1], (unsigned long long)(row + row_offset));
      atomicOr(&checks[2], (unsigned long long)bad);
    }
    // The row's set-wise rates over its counted labels (0/0: undefined), zero
    // for a row not counted, a slot at a time: with G = 1 a warp's 32 rows
    // summed by shuffles, then one shared add per slot (32 lanes adding to
    // one address would serialise); with G = 32 lane 0 adds the warp's row.
#pragma unroll 1
    for (int i = 0; i < mg::kRowSlotCount; ++i) {
      double value = counted ? mg::row_slot_value(i, w, tp, fp, fn, tn, f_beta2) : 0.0;
      if (G == 1) {
        for (int offset = mg::kWarpSize / 2; offset > 0; offset >>= 1)
          value += __shfl_xor_sync(mg::kFullWarp, value, offset);
      }
      if (lane == 0 && value != 0.0) atomicAdd(&block_rows[i], value);
    }
  }
  __syncthreads();
  for (int64 i = threadIdx.x; i < shared_cells; i += blockDim.x) {
    // Counts first, then the histogram's cells.
    const int64 j = i < 4 * L ? i : i - 4 * L;
    unsigned long long* bits_out = i < 4 * L ? global_bits : histogram_bits;
    double* weighted_out = i < 4 * L ? global_weighted : histogram_weighted;
    if (weighted) {
      if (shared_weighted[i] != 0.0) atomicAdd(&weighted_out[j], shared_weighted[i]);
    } else if (shared_bits[i] != 0) {
      atomicAdd(&bits_out[j], shared_bits[i]);
    }
  }
  for (int i = threadIdx.x; i < mg::kRowSlotCount; i += blockDim.x) {
    if (block_rows[i] != 0.0) atomicAdd(&row_sums[i], block_rows[i]);
  }
}

namespace mg {

// The sums of multilabel_ranking (RANKING_SUM_SLOTS in
// metrics_gpu/backends/launchers/multilabel.py).
enum RankingSum {
  kRankingAveragePrecision,  // LRAP
  kRankingLoss,
  kRankingCoverage,
  kRankingWeight,
  kRankingSumCount
};

// Relevant labels a warp holds before its lanes take one each.
constexpr int kPendingLabels = 2 * kWarpSize;
// The largest block (RANKING_MAX_BLOCK_THREADS): the warps' queues are
// static shared memory, 256 bytes a warp.
constexpr int kRankingBlockThreads = 256;
constexpr int kMaxWarpsPerBlock = kRankingBlockThreads / kWarpSize;

}  // namespace mg

// multilabel_ranking: each row's label ranking average precision, ranking
// loss and coverage error with scikit-learn's tie rules, weighted, summed
// into `sums` (kRankingSumCount float64: the three, and the weight).
//
// Every one of them is a sum over the row's relevant labels j of counts over
// all labels k: rank_j = #{k : s_k >= s_j} ("max" ranks: a tie at its worst
// position), relevant_rank_j = #{k relevant : s_k >= s_j}. LRAP averages
// relevant_rank_j / rank_j; the ranking loss counts the irrelevant k with
// s_k >= s_j (a tie is mis-ordered), rank_j - relevant_rank_j, over
// R (L - R) pairs; the coverage is max rank_j. Rows with R = 0 or R = L:
// LRAP 1, loss 0 (coverage 0 for R = 0).
//
// A warp takes a row. With `staged` (dynamic shared memory: L doubles and L
// bytes a warp) the warp first copies the row's scores, as doubles (exact
// for every element type), and relevance there, coalesced; else every read
// below goes to global memory (the cache). Its relevant labels are gathered
// 32 at a time (a ballot per 32 labels, compacted in a shared queue), then
// each lane counts one of them against the whole row: about ceil(R / 32) L
// comparisons per lane and row, no sort, any L.
__global__ void multilabel_ranking(const void* y_true, int true_code, mg::int64 true_stride,
                                   const void* scores, int score_code, mg::int64 score_stride,
                                   const void* weight, int weight_code, mg::int64 num_rows,
                                   mg::int64 num_labels, int staged, double* sums) {
  using mg::int64;
  __shared__ int pending[mg::kMaxWarpsPerBlock][mg::kPendingLabels];
  __shared__ double block_sums[mg::kRankingSumCount];
  MG_DYNAMIC_SHARED(double, staged_scores);
  for (int i = threadIdx.x; i < mg::kRankingSumCount; i += blockDim.x) block_sums[i] = 0.0;
  __syncthreads();
  const int64 L = num_labels;
  const unsigned int lane = mg::lane_index();
  const unsigned int warp = threadIdx.x / mg::kWarpSize;
  const int64 warps_per_block = blockDim.x / mg::kWarpSize;
  int* queue = pending[warp];
  double* row_scores = staged_scores + warp * L;
  unsigned char* row_relevant =
      reinterpret_cast<unsigned char*>(staged_scores + warps_per_block * L) + warp * L;
  for (int64 row = (int64)blockIdx.x * warps_per_block + warp; row < num_rows;
       row += (int64)gridDim.x * warps_per_block) {  // the same for the whole warp
    const int64 true_base = row * true_stride;
    const int64 score_base = row * score_stride;
    if (staged) {
      __syncwarp();  // the previous row's reads are done
      for (int64 l = lane; l < L; l += mg::kWarpSize) {
        row_scores[l] = mg::element(scores, score_code, score_base + l);
        row_relevant[l] = mg::element(y_true, true_code, true_base + l) == 1.0;
      }
      __syncwarp();
    }
    double precision_sum = 0.0;  // this lane's labels: sum of relevant_rank / rank
    double misordered = 0.0;     // sum of rank - relevant_rank
    double deepest = 0.0;        // max rank
    int64 relevant = 0;          // R (the same in every lane)
    int queued = 0;              // labels in `queue` (the same in every lane)
    for (int64 base = 0; base < L; base += mg::kWarpSize) {
      const int64 l = base + lane;
      const bool is_relevant =
          l < L && (staged ? row_relevant[l] != 0
                           : mg::element(y_true, true_code, true_base + l) == 1.0);
      const unsigned int found = __ballot_sync(mg::kFullWarp, is_relevant);
      if (is_relevant) queue[queued + __popc(found & ((1u << lane) - 1u))] = (int)l;
      queued += __popc(found);
      relevant += __popc(found);
      const bool last = base + mg::kWarpSize >= L;
      __syncwarp();
      while (queued >= mg::kWarpSize || (last && queued > 0)) {
        const int taken = queued < mg::kWarpSize ? queued : mg::kWarpSize;
        if ((int)lane < taken) {
          const int j = queue[lane];
          int64 rank = 0, relevant_rank = 0;
          if (staged) {
            // Four labels a trip: independent loads and counts.
            const double s = row_scores[j];
            int64 k = 0;
            for (; k + 4 <= L; k += 4) {
              const bool a = row_scores[k] >= s, b = row_scores[k + 1] >= s,
                         c = row_scores[k + 2] >= s, d = row_scores[k + 3] >= s;
              rank += (int)a + (int)b + (int)c + (int)d;
              relevant_rank += (int)(a && row_relevant[k]) + (int)(b && row_relevant[k + 1]) +
                               (int)(c && row_relevant[k + 2]) + (int)(d && row_relevant[k + 3]);
            }
            for (; k < L; ++k) {
              const bool a = row_scores[k] >= s;
              rank += a;
              relevant_rank += a && row_relevant[k];
            }
          } else {
            const double s = mg::element(scores, score_code, score_base + j);
            for (int64 k = 0; k < L; ++k) {
              if (mg::element(scores, score_code, score_base + k) >= s) {
                ++rank;
                relevant_rank += mg::element(y_true, true_code, true_base + k) == 1.0;
              }
            }
          }
          precision_sum += (double)relevant_rank / (double)rank;
          misordered += (double)(rank - relevant_rank);
          deepest = fmax(deepest, (double)rank);
        }
        // The labels past the first 32 move to the front.
        const int rest = queued - taken;
        int moved = 0;
        __syncwarp();
        if ((int)lane < rest) moved = queue[taken + lane];
        __syncwarp();
        if ((int)lane < rest) queue[lane] = moved;
        __syncwarp();
        queued = rest;
      }
    }
    for (int offset = mg::kWarpSize / 2; offset > 0; offset >>= 1) {
      precision_sum += __shfl_xor_sync(mg::kFullWarp, precision_sum, offset);
      misordered += __shfl_xor_sync(mg::kFullWarp, misordered, offset);
      deepest = fmax(deepest, __shfl_xor_sync(mg::kFullWarp, deepest, offset));
    }
    if (lane == 0) {
      const double w = weight == nullptr ? 1.0 : mg::element(weight, weight_code, row);
      const bool mixed = relevant > 0 && relevant < L;
      const double lrap = mixed ? precision_sum / (double)relevant : 1.0;
      const double loss = mixed ? misordered / ((double)relevant * (double)(L - relevant)) : 0.0;
      atomicAdd(&block_sums[mg::kRankingAveragePrecision], w * lrap);
      atomicAdd(&block_sums[mg::kRankingLoss], w * loss);
      atomicAdd(&block_sums[mg::kRankingCoverage], w * deepest);
      atomicAdd(&block_sums[mg::kRankingWeight], w);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < mg::kRankingSumCount; i += blockDim.x) {
    if (block_sums[i] != 0.0) atomicAdd(&sums[i], block_sums[i]);
  }
}
