// Poisson draws of the bootstrap of count tables (metrics_gpu.intervals).
//
// poisson_table_draws: one thread per (cell, replicate) writes a draw of
// Poisson(count of the cell) to draws[cell * num_replicates + replicate].
// Each draw is a pure function of (key, cell id, replicate): Philox4x32-10
// of the counter (cell id low, cell id high, replicate, attempt) gives two
// uniforms in (0, 1) per attempt. The sampler is numpy's pair (multiplication
// of uniforms below a mean of 10, Hoermann's PTRS from 10 up) with the
// logarithm and log-gamma written out of IEEE operations; NVRTC compiles with
// --fmad=false and the emulation with -ffp-contract=off, so every operation
// rounds as NumPy's does and the draws equal metrics_gpu/_formulas/resample.py's bit
// for bit (its NumPy reference, which states the same order of operations).
#include "common.cuh"

namespace mg {
namespace resample {

constexpr unsigned int kPhiloxM0 = 0xD2511F53u;
constexpr unsigned int kPhiloxM1 = 0xCD9E8D57u;
constexpr unsigned int kPhiloxW0 = 0x9E3779B9u;
constexpr unsigned int kPhiloxW1 = 0xBB67AE85u;
constexpr int kPhiloxRounds = 10;
constexpr long long kMultiplicationLimit = 10;  // _resample.MULTIPLICATION_LIMIT

struct Words {
  unsigned int w0, w1, w2, w3;
};

__device__ __forceinline__ Words philox4x32(Words c, unsigned int k0, unsigned int k1) {
  for (int round = 0; round < kPhiloxRounds; ++round) {
    if (round) {
      k0 += kPhiloxW0;
      k1 += kPhiloxW1;
    }
    const unsigned long long p0 = (unsigned long long)kPhiloxM0 * c.w0;
    const unsigned long long p1 = (unsigned long long)kPhiloxM1 * c.w2;
    const unsigned int hi0 = (unsigned int)(p0 >> 32), lo0 = (unsigned int)p0;
    const unsigned int hi1 = (unsigned int)(p1 >> 32), lo1 = (unsigned int)p1;
    c = Words{hi1 ^ c.w1 ^ k0, lo1, hi0 ^ c.w3 ^ k1, lo0};
  }
  return c;
}

// (m + 1/2) 2^-53 from the top 27 bits of high and the top 26 of low.
__device__ __forceinline__ double open_uniform(unsigned int high, unsigned int low) {
  const unsigned long long bits =
      ((unsigned long long)(high >> 5) << 26) | (unsigned long long)(low >> 6);
  return ((double)bits + 0.5) * 1.1102230246251565404e-16;  // 2^-53
}

struct Pair {
  double first, second;
};

__device__ __forceinline__ Pair uniform_pair(unsigned long long cell, unsigned int replicate,
                                             unsigned int attempt, unsigned int k0,
                                             unsigned int k1) {
  const Words w = philox4x32(
      Words{(unsigned int)cell, (unsigned int)(cell >> 32), replicate, attempt}, k0, k1);
  return Pair{open_uniform(w.w0, w.w1), open_uniform(w.w2, w.w3)};
}

// _resample.log: frexp, then 2 atanh(s) by its series; e ln 2 in two parts.
__device__ __forceinline__ double det_log(double x) {
  const double kLn2High = 6.93147180369123816490e-01;
  const double kLn2Low = 1.90821492927058770002e-10;
  const double kSqrtHalf = 0.70710678118654752440;
  int exponent;
  double mantissa = frexp(x, &exponent);
  if (mantissa < kSqrtHalf) {
    mantissa = mantissa * 2.0;
    exponent -= 1;
  }
  const double e = (double)exponent;
  const double f = mantissa - 1.0;
  const double s = f / (2.0 + f);
  const double z = s * s;
  double series = 1.0 / 25.0;  // 1 / (2 i + 1), i = 12 down to 1
  for (int i = 11; i >= 1; --i) series = series * z + 1.0 / (double)(2 * i + 1);
  const double atanh_tail = s * (z * series);
  return e * kLn2High + ((f - s * f) + (atanh_tail * 2.0 + e * kLn2Low));
}

// _resample.log_factorial: log(k!) by Stirling's series at k + 1 + shift.
__device__ __forceinline__ double log_factorial(double k) {
  const double kTerms[10] = {8.333333333333333e-02, -2.777777777777778e-03,
                             7.936507936507937e-04, -5.952380952380952e-04,
                             8.417508417508418e-04, -1.917526917526918e-03,
                             6.410256410256410e-03, -2.955065359477124e-02,
                             1.796443723688307e-01, -1.39243221690590e+00};
  const double kHalfLogTwoPi = 0.91893853320467274178;
  const double x = k + 1.0;
  double shift = 7.0 - floor(x);
  if (shift < 0.0) shift = 0.0;
  const double x0 = x + shift;
  const double x2 = (1.0 / x0) * (1.0 / x0);
  double series = kTerms[9];
  for (int i = 8; i >= 0; --i) series = series * x2 + kTerms[i];
  double result = series / x0 + kHalfLogTwoPi + (x0 - 0.5) * det_log(x0) - x0;
  for (int step = 1; step <= 6; ++step) {
    if (shift >= (double)step) result = result - det_log(x0 - (double)step);
  }
  return x <= 2.0 ? 0.0 : result;
}

// The multiplication method: uniforms multiplied while the product stays
// above exp(-mean).
__device__ __forceinline__ long long poisson_small(double threshold, unsigned long long cell,
                                                   unsigned int replicate, unsigned int k0,
                                                   unsigned int k1) {
  long long draw = 0;
  double product = 1.0;
  for (unsigned int attempt = 0;; ++attempt) {
    const Pair u = uniform_pair(cell, replicate, attempt, k0, k1);
    product = product * u.first;
    if (!(product > threshold)) return draw;
    ++draw;
    product = product * u.second;
    if (!(product > threshold)) return draw;
    ++draw;
  }
}

// PTRS (Hoermann 1993), numpy's random_poisson_ptrs.
__device__ __forceinline__ long long poisson_ptrs(double lam, unsigned long long cell,
                                                  unsigned int replicate, unsigned int k0,
                                                  unsigned int k1) {
  const double slam = sqrt(lam);
  const double loglam = det_log(lam);
  const double b = 0.931 + 2.53 * slam;
  const double a = -0.059 + 0.02483 * b;
  const double invalpha = 1.1239 + 1.1328 / (b - 3.4);
  const double vr = 0.9277 - 3.6224 / (b - 2.0);
  for (unsigned int attempt = 0;; ++attempt) {
    const Pair uv = uniform_pair(cell, replicate, attempt, k0, k1);
    const double u = uv.first - 0.5;
    const double v = uv.second;
    const double us = 0.5 - fabs(u);
    const double k = floor((2.0 * a / us + b) * u + lam + 0.43);
    if (us >= 0.07 && v <= vr) return (long long)k;
    if (k < 0.0 || (us < 0.013 && v > us)) continue;
    const double lhs = det_log(v) + det_log(invalpha) - det_log(a / (us * us) + b);
    const double rhs = -lam + k * loglam - log_factorial(k);
    if (lhs <= rhs) return (long long)k;
  }
}

}  // namespace resample
}  // namespace mg

// counts, cells: (num_cells,) the table's non-empty cells (counts >= 0, their
// flat ids); exp_minus: exp(-n) for n < 10 (the multiplication method's
// thresholds, as the NumPy reference holds them); draws: (num_cells,
// num_replicates) int64, replicate ids first_replicate + 0 .. num_replicates - 1.
extern "C" __global__ void poisson_table_draws(const long long* __restrict__ counts,
                                               const long long* __restrict__ cells,
                                               const double* __restrict__ exp_minus,
                                               long long num_cells,
                                               unsigned int first_replicate,
                                               int num_replicates, unsigned int key0,
                                               unsigned int key1,
                                               long long* __restrict__ draws) {
  using namespace mg::resample;
  const long long total = num_cells * (long long)num_replicates;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const long long cell = i / num_replicates;
    const unsigned int replicate = first_replicate + (unsigned int)(i - cell * num_replicates);
    const long long mean = counts[cell];
    const unsigned long long id = (unsigned long long)cells[cell];
    long long draw = 0;
    if (mean >= kMultiplicationLimit) {
      draw = poisson_ptrs((double)mean, id, replicate, key0, key1);
    } else if (mean > 0) {
      draw = poisson_small(exp_minus[mean], id, replicate, key0, key1);
    }
    draws[i] = draw;
  }
}
