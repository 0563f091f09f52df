// Shared by every kernel family: types, loads, atomics, warp helpers.
//
// The sources compile three ways: NVRTC through cupy.RawModule (the cuda
// backend), NVRTC for each architecture in CI, and the system C++ compiler
// with emulation/cuda_emulation.h (the emulated backend). So they include no
// CUDA toolkit header: the few types they need are defined here.
#pragma once

#ifdef METRICS_GPU_EMULATED
#define MG_DYNAMIC_SHARED(type, name) type* name = reinterpret_cast<type*>(emu_dynamic_shared())
#else
#define MG_DYNAMIC_SHARED(type, name)                 \
  extern __shared__ __align__(16) unsigned char name##_bytes[]; \
  type* name = reinterpret_cast<type*>(name##_bytes)
#endif

namespace mg {

constexpr unsigned int kFullWarp = 0xffffffffu;
constexpr int kWarpSize = 32;

typedef long long int64;
typedef unsigned long long uint64;

// ---------------------------------------------------------------------------
// Score storage types. Half-precision scores arrive as their 16-bit patterns
// and are widened exactly to float, so no cuda_fp16.h / cuda_bf16.h is needed.
// ---------------------------------------------------------------------------
struct bfloat16_bits {
  unsigned short bits;
};
struct float16_bits {
  unsigned short bits;
};

__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ double widen(double x) { return x; }
__device__ __forceinline__ float widen(bfloat16_bits x) {
  return __uint_as_float(((unsigned int)x.bits) << 16);
}
// IEEE binary16 -> binary32, exact for every pattern (subnormals, inf, NaN).
__device__ __forceinline__ float widen(float16_bits x) {
  unsigned int sign = ((unsigned int)x.bits & 0x8000u) << 16;
  unsigned int exponent = ((unsigned int)x.bits >> 10) & 0x1fu;
  unsigned int mantissa = (unsigned int)x.bits & 0x3ffu;
  if (exponent == 0x1fu) return __uint_as_float(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    // Subnormal or zero: mantissa * 2^-24, exact in float.
    float magnitude = (float)mantissa * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  return __uint_as_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// 16 bytes of scores in one load (LDG.128): 16 / sizeof(S) values, widened
// in registers. The address must be 16-byte aligned (a GPU faults
// otherwise; the emulation checks it and fails the launch).
struct alignas(16) Bytes16 {
  unsigned int word[4];
};

__device__ __forceinline__ Bytes16 load_bytes16(const void* address) {
#ifdef METRICS_GPU_EMULATED
  if (reinterpret_cast<std::uintptr_t>(address) % 16u != 0u)
    throw std::runtime_error("misaligned 16-byte load");
  Bytes16 value;
  std::memcpy(&value, address, sizeof(value));  // no type punning for the host compiler
  return value;
#else
  return *reinterpret_cast<const Bytes16*>(address);
#endif
}

// Value i of the 16 bytes as S (little-endian, as on a GPU), widened. The
// pointer argument only picks S.
__device__ __forceinline__ float bytes16_value(const Bytes16& b, int i, const float*) {
  return __uint_as_float(b.word[i]);
}
__device__ __forceinline__ double bytes16_value(const Bytes16& b, int i, const double*) {
  return __longlong_as_double((long long)(((uint64)b.word[2 * i + 1] << 32) | b.word[2 * i]));
}
__device__ __forceinline__ float bytes16_value(const Bytes16& b, int i, const float16_bits*) {
  float16_bits h;
  h.bits = (unsigned short)(b.word[i / 2] >> (16 * (i % 2)));
  return widen(h);
}
__device__ __forceinline__ float bytes16_value(const Bytes16& b, int i, const bfloat16_bits*) {
  bfloat16_bits h;
  h.bits = (unsigned short)(b.word[i / 2] >> (16 * (i % 2)));
  return widen(h);
}

template <typename S>
struct Widened {
  typedef float type;
};
template <>
struct Widened<double> {
  typedef double type;
};

// ---------------------------------------------------------------------------
// Weights. `unit_weight` marks an unweighted instantiation (the pointer is
// null and never read).
// ---------------------------------------------------------------------------
struct unit_weight {};

// What a weighted count accumulates in: exact 64-bit integers for counts and
// integer weights, float64 for float weights, 64-bit fixed point for float
// weights with deterministic=True (integer atomics are associative, so the
// result does not depend on the order of the atomic adds).
template <typename W, bool FIXED>
struct Accumulator {
  typedef double type;
};
template <bool FIXED>
struct Accumulator<unit_weight, FIXED> {
  typedef uint64 type;
};
template <bool FIXED>
struct Accumulator<long long, FIXED> {
  typedef uint64 type;
};
template <>
struct Accumulator<float, true> {
  typedef uint64 type;
};
template <>
struct Accumulator<double, true> {
  typedef uint64 type;
};

// The per-block shared-memory counter: 32 bits for counts (4 bytes per cell
// doubles the K that fits; the host bounds a block's samples below 2^32),
// else the global accumulator's type.
template <typename W, bool FIXED>
struct SharedAccumulator {
  typedef typename Accumulator<W, FIXED>::type type;
};
template <bool FIXED>
struct SharedAccumulator<unit_weight, FIXED> {
  typedef unsigned int type;
};

template <typename W>
__device__ __forceinline__ double weight_value(const W* weight, int64 i) {
  return (double)weight[i];
}
__device__ __forceinline__ double weight_value(const unit_weight*, int64) { return 1.0; }

// Fixed point for deterministic float weights: w -> rint(w * 2^s) with
// s = 62 - e and 2^e > max|w| * N (e from the exponents of max|w| and N, so
// nothing overflows for any finite weight). Every quantised weight is below
// 2^62 / N, so a sum of N of them fits in 63 bits; scaling by a power of two
// (ldexp) is exact, so the only rounding is rint: at most half a unit,
// 2^(e - 63) <= max|w| * N * 2^-61 per weight (2^e <= 4 max|w| N).
__device__ __forceinline__ int fixed_point_shift(const uint64* max_weight_bits,
                                                 int64 total_samples) {
  double largest = __longlong_as_double((long long)*max_weight_bits);
  if (!(largest > 0.0) || total_samples <= 0) return 0;
  int weight_exponent = ilogb(largest) + 1;                      // largest < 2^this
  int count_bits = 64 - __clzll((long long)total_samples);      // N < 2^this
  return 62 - (weight_exponent + count_bits);
}

template <typename W, bool FIXED>
struct WeightCast {
  // unit / integer weights: the exact integer.
  __device__ __forceinline__ static uint64 apply(const W* weight, int64 i, int) {
    return (uint64)(long long)weight_value(weight, i);
  }
};
template <bool FIXED>
struct WeightCast<unit_weight, FIXED> {
  __device__ __forceinline__ static uint64 apply(const unit_weight*, int64, int) { return 1; }
};
template <bool FIXED>
struct WeightCast<long long, FIXED> {
  __device__ __forceinline__ static uint64 apply(const long long* weight, int64 i, int) {
    return (uint64)weight[i];
  }
};
template <>
struct WeightCast<float, false> {
  __device__ __forceinline__ static double apply(const float* weight, int64 i, int) {
    return (double)weight[i];
  }
};
template <>
struct WeightCast<double, false> {
  __device__ __forceinline__ static double apply(const double* weight, int64 i, int) {
    return weight[i];
  }
};
template <>
struct WeightCast<float, true> {
  __device__ __forceinline__ static uint64 apply(const float* weight, int64 i, int shift) {
    return (uint64)llrint(ldexp((double)weight[i], shift));
  }
};
template <>
struct WeightCast<double, true> {
  __device__ __forceinline__ static uint64 apply(const double* weight, int64 i, int shift) {
    return (uint64)llrint(ldexp(weight[i], shift));
  }
};

// A flag that many threads may raise at once: every writer stores 1, which
// is well defined on a GPU. Under emulation the store is a relaxed atomic,
// so that ThreadSanitizer does not take it for a data race.
__device__ __forceinline__ void raise_flag(unsigned char* flag) {
#ifdef METRICS_GPU_EMULATED
  __atomic_store_n(flag, (unsigned char)1, __ATOMIC_RELAXED);
#else
  *flag = 1;
#endif
}

// A word that other threads update with atomics, read once as the first
// guess of a compare-and-swap loop (which checks it): a plain load on a GPU,
// a relaxed atomic load under emulation, so that ThreadSanitizer does not
// take it for a data race.
template <typename T>
__device__ __forceinline__ T relaxed_load(const T* address) {
#ifdef METRICS_GPU_EMULATED
  return __atomic_load_n(address, __ATOMIC_RELAXED);
#else
  return *(const volatile T*)address;
#endif
}

// ---------------------------------------------------------------------------
// 128-bit accumulation of products (exact kappa moments for any N and K).
// ---------------------------------------------------------------------------
struct U128 {
  uint64 low;
  uint64 high;
};

__device__ __forceinline__ void add_product(U128& sum, uint64 a, uint64 b) {
  uint64 low = a * b;
  uint64 high = __umul64hi(a, b);
  sum.low += low;
  sum.high += high + (sum.low < low ? 1ull : 0ull);
}

// sum += a * b * c for a * b * c < 2^128 (the kappa moment w * gap^2).
__device__ __forceinline__ void add_product_3(U128& sum, uint64 a, uint64 b, uint64 c) {
  uint64 ab_low = a * b;
  uint64 ab_high = __umul64hi(a, b);
  uint64 low = ab_low * c;
  uint64 high = __umul64hi(ab_low, c) + ab_high * c;
  sum.low += low;
  sum.high += high + (sum.low < low ? 1ull : 0ull);
}

// Atomically add a 128-bit value into (low, high) words: each wrap of the
// low word is detected by the adder that caused it and carried once.
__device__ __forceinline__ void atomic_add_u128(uint64* words, U128 value) {
  uint64 old = atomicAdd(&words[0], value.low);
  uint64 carry = (old + value.low < old) ? 1ull : 0ull;
  if (value.high + carry != 0) atomicAdd(&words[1], value.high + carry);
}

// A load the compiler can neither hoist nor keep in a register: values other
// blocks wrote before a ticket (read past L1), and a loop's invariants read
// again where used rather than held in registers across it (the shared
// copies of a kernel's settings).
template <typename T>
__device__ __forceinline__ T read_fresh(const T* p) {
  return *(const volatile T*)p;
}

// ---------------------------------------------------------------------------
// Launch geometry helpers. Loops that contain warp intrinsics step all lanes
// of a warp together: every lane of a warp runs the same number of trips and
// lanes past the end carry active = false (no early exit).
// ---------------------------------------------------------------------------
__device__ __forceinline__ int64 global_warp_base() {
  return (int64)blockIdx.x * blockDim.x + (threadIdx.x / kWarpSize) * kWarpSize;
}
__device__ __forceinline__ int64 grid_threads() { return (int64)gridDim.x * blockDim.x; }
__device__ __forceinline__ unsigned int lane_index() { return threadIdx.x % kWarpSize; }

// The warp butterfly of R values a lane (R a power of 2, at most a warp) in
// R - 1 + log2(kWarpSize / R) shuffles rather than R log2(kWarpSize): each
// step keeps half of the values a lane holds, adds its partner's copy of
// them and hands it the other half; a plain butterfly over the lanes left
// then finishes. The same pairs are added at every step as in R butterflies,
// and a + b == b + a, so the bits are theirs. Lane l returns the sum of
// value[l / (kWarpSize / R)]; `value` is used up. Used at R = 4
// (reduce_tile); at R = 16 (tried for multilabel_update's row slots) NVVM
// left the loop over `half` rolled and put `value` on the stack.
template <int R, typename T>
__device__ __forceinline__ T warp_sums(T (&value)[R]) {
  static_assert(R >= 1 && R <= kWarpSize && (R & (R - 1)) == 0,
                "warp_sums: R is a power of 2, at most a warp");
  const unsigned int lane = lane_index();
  int offset = kWarpSize / 2;
#pragma unroll
  for (int half = R / 2; half >= 1; half /= 2, offset /= 2) {
    const bool upper = (lane & (unsigned int)offset) != 0u;
#pragma unroll
    for (int j = 0; j < half; ++j) {
      const T send = upper ? value[j] : value[j + half];
      const T keep = upper ? value[j + half] : value[j];
      value[j] = keep + __shfl_xor_sync(kFullWarp, send, offset);
    }
  }
  T sum = value[0];
#pragma unroll
  for (; offset > 0; offset /= 2) sum += __shfl_xor_sync(kFullWarp, sum, offset);
  return sum;
}

// Sum N values over the block; every thread gets the totals. Fixed order:
// each thread's strided sum, a warp butterfly (commutative steps, so all
// lanes hold the same bits), then the warps in index order.
template <int N, typename T>
__device__ void block_sum(T (&values)[N], T* scratch) {
  const unsigned int lane = lane_index();
  const unsigned int warp = threadIdx.x / kWarpSize;
  const unsigned int warps = blockDim.x / kWarpSize;
  for (int i = 0; i < N; ++i) {
    for (int offset = kWarpSize / 2; offset > 0; offset >>= 1)
      values[i] += __shfl_xor_sync(kFullWarp, values[i], offset);
    if (lane == 0) scratch[i * kWarpSize + warp] = values[i];
  }
  __syncthreads();
  for (int i = 0; i < N; ++i) {
    T total = 0;
    for (unsigned int w = 0; w < warps; ++w) total += scratch[i * kWarpSize + w];
    values[i] = total;
  }
  __syncthreads();
}

// -inf without math.h (NVRTC has none).
__device__ __forceinline__ float negative_infinity(float) { return __uint_as_float(0xff800000u); }
__device__ __forceinline__ double negative_infinity(double) {
  return __longlong_as_double((long long)0xfff0000000000000ull);
}

// Row argmax: does (a, ia) beat (b, ib)? NaN beats numbers, then the larger
// value, ties to the lower index: exactly numpy.argmax's choice.
template <typename F>
__device__ __forceinline__ bool argmax_beats(F a, int64 ia, F b, int64 ib) {
  bool a_nan = a != a;
  bool b_nan = b != b;
  if (a_nan || b_nan) return a_nan && (!b_nan || ia < ib);
  return a > b || (a == b && ia < ib);
}

}  // namespace mg
