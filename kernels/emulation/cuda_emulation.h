// CUDA semantics on the CPU, for the `emulated` backend (tests without a GPU).
//
// A `.cu` source is compiled by the system C++ compiler with this header
// force-included (-include) and METRICS_GPU_EMULATED defined. Each kernel
// instantiation is exported by METRICS_GPU_EMULATED_ENTRY as a C function that
// the Python launch code calls through ctypes with the same arguments it
// gives cupy.RawKernel.
//
// What is emulated, and how:
// * The blocks of a grid run one after another (so `__shared__`, which
//   becomes `static`, is per block). Launches are serialised by a
//   process-wide mutex. The threads of a block are fibers on the launching
//   thread (a stack switch of a few instructions on x86-64, ucontext
//   elsewhere): each runs until it waits at a barrier or returns, then
//   the next one runs, so a barrier costs a user-space switch per thread. On
//   2 cores OS threads spent most of the emulated tests' time in the
//   kernel's scheduler (futex and sched_yield at every barrier); they are
//   still there, on request (-DMETRICS_GPU_EMULATED_OS_THREADS=1), and the
//   emulator's own tests run both.
// * `__syncthreads` is a barrier over all threads of the block. Warp
//   intrinsics (shuffles, ballot, match_any, syncwarp, any/all) are
//   rendezvous of all lanes of the warp, which must all be present with a
//   full mask: the kernels call them converged, as independent thread
//   scheduling requires.
// * A barrier that can never complete (a thread returned or waits at a
//   different barrier, lanes of a warp at different intrinsics) is reported
//   as a deadlock naming the kernel, the block and the reason, never a hang.
//   With OS threads, a barrier that makes no progress for kStallSeconds is
//   reported too.
// * Atomics are real (GCC __atomic builtins; float/double through CAS).
// * Under AddressSanitizer (METRICS_GPU_EMULATED_SANITIZE=address) every
//   switch is told to it, so that it follows the fibers' stacks.
// * Under ThreadSanitizer (METRICS_GPU_EMULATED_SANITIZE=thread) each fiber
//   is a thread of its own to it, the switches add no order, the emulator's
//   own bookkeeping is hidden from it, and only CUDA's orderings are
//   declared: a barrier orders the threads of the block (a warp intrinsic the
//   lanes of the warp), the end of a block orders it before the next one, a
//   launch orders the host before the kernel and the kernel before the host.
//   Two threads of a block touching the same memory between barriers, one
//   of them writing and not atomically, is then reported as a data race,
//   whatever order the fibers ran in. Blocks run one after another, so races
//   between blocks are not seen.
#pragma once

// Fibers, or OS threads when asked (-DMETRICS_GPU_EMULATED_OS_THREADS=1: the
// emulator's own tests run both).
#if !defined(METRICS_GPU_EMULATED_OS_THREADS)
#define METRICS_GPU_EMULATED_OS_THREADS 0
#endif

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#if !METRICS_GPU_EMULATED_OS_THREADS
#include <sys/mman.h>
#include <unistd.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif
#endif

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __restrict__ __restrict
#define __shared__ static
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

struct uint3 {
  unsigned int x, y, z;
};
struct dim3 {
  unsigned int x, y, z;
};

inline thread_local uint3 threadIdx{0, 0, 0};
inline thread_local uint3 blockIdx{0, 0, 0};
inline thread_local dim3 blockDim{1, 1, 1};
inline thread_local dim3 gridDim{1, 1, 1};
constexpr int warpSize = 32;

using std::max;
using std::min;

namespace emu {

#if defined(__SANITIZE_THREAD__)
extern "C" {
void __tsan_acquire(void* address);
void __tsan_release(void* address);
void AnnotateIgnoreSyncBegin(const char* file, int line);
void AnnotateIgnoreSyncEnd(const char* file, int line);
void AnnotateIgnoreReadsBegin(const char* file, int line);
void AnnotateIgnoreReadsEnd(const char* file, int line);
void AnnotateIgnoreWritesBegin(const char* file, int line);
void AnnotateIgnoreWritesEnd(const char* file, int line);
}
namespace tsan {
// The emulator's bookkeeping (one mutex per block, taken by every thread at
// every barrier) would order the threads far more than CUDA does and hide
// races: inside a Quiet scope ThreadSanitizer ignores its accesses and locks.
struct Quiet {
  Quiet() {
    AnnotateIgnoreSyncBegin(__FILE__, __LINE__);
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
  }
  ~Quiet() {
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    AnnotateIgnoreSyncEnd(__FILE__, __LINE__);
  }
  Quiet(const Quiet&) = delete;
  Quiet& operator=(const Quiet&) = delete;
};
inline void release(void* token) { __tsan_release(token); }
inline void acquire(void* token) { __tsan_acquire(token); }
}  // namespace tsan
#else
namespace tsan {
struct Quiet {};
inline void release(void*) {}
inline void acquire(void*) {}
}  // namespace tsan
#endif

// The order a barrier declares: every participant releases into the
// barrier's token on arrival and acquires it on departure. All participants
// meet the same barriers in the same order, so a thread's own count of them
// names the instance; two tokens, alternating, so that a fast thread arriving
// at the next barrier never feeds the departure from the current one.
struct Tokens {
  char token[2] = {0, 0};
  void arrive(unsigned long long count) { tsan::release(&token[count & 1]); }
  void depart(unsigned long long count) { tsan::acquire(&token[count & 1]); }
};
inline thread_local unsigned long long block_barriers_passed = 0;
inline thread_local unsigned long long warp_barriers_passed = 0;

constexpr int kWarpSize = 32;
constexpr int kStallSeconds = 60;
constexpr int kSpinYields = 100;

// Thrown inside a kernel thread to unwind it when its block has failed.
struct Abort {};

struct Warp {
  std::condition_variable released;
  unsigned int size = 0;      // lanes that exist in this warp
  unsigned int live = 0;      // lanes still running the kernel
  unsigned int live_mask = 0; // their bits
  unsigned int arrived = 0;
  unsigned long long generation = 0;
  const char* op = nullptr;   // intrinsic the arrived lanes wait in
  unsigned long long value[kWarpSize];
  long long parameter[kWarpSize];
  unsigned long long result[kWarpSize];
  Tokens order;               // what the rendezvous declares to ThreadSanitizer
};

struct Block {
  std::mutex mutex;
  std::condition_variable released;
  unsigned int threads = 0;
  unsigned int live = 0;      // threads still running the kernel
  unsigned int blocked = 0;   // threads waiting in any barrier
  unsigned int arrived = 0;   // at __syncthreads
  unsigned long long generation = 0;
  long long count = 0;        // __syncthreads_count/or/and accumulator
  long long count_result = 0;
  std::vector<Warp> warps;
  bool failed = false;
  std::string failure;
  const char* kernel = "";
  unsigned int index = 0;
  unsigned char* dynamic_shared = nullptr;
  Tokens order;               // what __syncthreads declares to ThreadSanitizer
};

inline thread_local Block* current_block = nullptr;

inline unsigned int lane_id() { return threadIdx.x % kWarpSize; }
inline Warp& current_warp() { return current_block->warps[threadIdx.x / kWarpSize]; }

inline unsigned int full_mask(const Warp& warp) {
  return warp.size == 32 ? 0xffffffffu : ((1u << warp.size) - 1u);
}

// Called with the block mutex held.
inline void fail(Block& block, const std::string& why) {
  if (!block.failed) {
    block.failed = true;
    block.failure = std::string("kernel ") + block.kernel + ", block " +
                    std::to_string(block.index) + ": " + why;
  }
  block.released.notify_all();
  for (Warp& warp : block.warps) warp.released.notify_all();
}

// Called with the mutex held by a thread about to wait: if every live thread
// is now waiting and none of their barriers can complete, nothing ever will.
inline void check_deadlock(Block& block, const char* where) {
  if (block.blocked == block.live) {
    fail(block, std::string("deadlock: all ") + std::to_string(block.live) +
                    " running threads wait in barriers that cannot complete (last: " + where +
                    "; " + std::to_string(block.threads - block.live) +
                    " threads already returned)");
  }
}

#if !METRICS_GPU_EMULATED_OS_THREADS
#if defined(__SANITIZE_ADDRESS__)
extern "C" {
void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, std::size_t size);
void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old,
                                     std::size_t* size_old);
}
#endif
#if defined(__SANITIZE_THREAD__)
extern "C" {
void* __tsan_get_current_fiber(void);
void* __tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void* fiber);
void __tsan_switch_to_fiber(void* fiber, unsigned flags);
}
#endif

#if defined(__x86_64__)
// A fiber's saved state is its stack pointer: the switch pushes the
// registers the ABI makes callee-saved (rbx, rbp, r12-r15, the SSE and x87
// control words), stores the stack pointer, loads the other one and pops
// the same. glibc's swapcontext also saves the signal mask, a system call
// per switch: a third of the emulated tests' time.
struct FiberContext {
  void* stack_pointer = nullptr;
  const void* stack_bottom = nullptr;  // for AddressSanitizer
  std::size_t stack_size = 0;
  void* tsan_fiber = nullptr;          // ThreadSanitizer's state of the thread
};
extern "C" void metrics_gpu_emulated_fiber_switch(void** save, void* load);
asm(R"(
  .text
  .hidden metrics_gpu_emulated_fiber_switch
  .globl metrics_gpu_emulated_fiber_switch
  .type metrics_gpu_emulated_fiber_switch, @function
metrics_gpu_emulated_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size metrics_gpu_emulated_fiber_switch, .-metrics_gpu_emulated_fiber_switch
)");

inline void raw_fiber_switch(FiberContext& from, FiberContext& to) {
  metrics_gpu_emulated_fiber_switch(&from.stack_pointer, to.stack_pointer);
}

// A stack that the switch "returns" into `entry`: zero registers, this
// thread's control words, then entry's address and a null return address
// below the 16-byte aligned top (so entry starts as if called).
inline void raw_fiber_prepare(FiberContext& context, void* stack, std::size_t bytes,
                              void (*entry)()) {
  std::uintptr_t top = (reinterpret_cast<std::uintptr_t>(stack) + bytes) & ~std::uintptr_t(15);
  void** sp = reinterpret_cast<void**>(top);
  *--sp = nullptr;
  *--sp = reinterpret_cast<void*>(entry);
  for (int i = 0; i < 6; ++i) *--sp = nullptr;
  --sp;
  unsigned int mxcsr;
  unsigned short fpu_control;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpu_control));
  std::memcpy(sp, &mxcsr, 4);
  std::memcpy(reinterpret_cast<char*>(sp) + 4, &fpu_control, 2);
  context.stack_pointer = sp;
}
#else
struct FiberContext {
  ucontext_t context;
  const void* stack_bottom = nullptr;
  std::size_t stack_size = 0;
  void* tsan_fiber = nullptr;
};

inline void raw_fiber_switch(FiberContext& from, FiberContext& to) {
  swapcontext(&from.context, &to.context);
}

inline void raw_fiber_prepare(FiberContext& context, void* stack, std::size_t bytes,
                              void (*entry)()) {
  if (getcontext(&context.context) != 0) throw std::runtime_error("getcontext failed");
  context.context.uc_stack.ss_sp = stack;
  context.context.uc_stack.ss_size = bytes;
  context.context.uc_link = nullptr;
  makecontext(&context.context, entry, 0);
}
#endif

inline void fiber_prepare(FiberContext& context, void* stack, std::size_t bytes,
                          void (*entry)()) {
  context.stack_bottom = stack;
  context.stack_size = bytes;
  raw_fiber_prepare(context, stack, bytes, entry);
}

// The switch, told to the sanitizers: AddressSanitizer follows the stack;
// ThreadSanitizer keeps a state per fiber and adds no order at the switch
// (no_sync), so that only what CUDA orders (barriers, warp intrinsics, the
// ends of blocks) orders the threads of a block, as with OS threads.
// The contexts are read quietly: the host reuses them after the fiber
// declared its end.
#if defined(__SANITIZE_ADDRESS__)
// The stack that the last switch of this OS thread came from.
inline thread_local const void* resumed_from_bottom = nullptr;
inline thread_local std::size_t resumed_from_size = 0;
#endif

inline void fiber_switch(FiberContext& from, FiberContext& to) {
#if defined(__SANITIZE_ADDRESS__)
  const void* to_bottom;
  std::size_t to_size;
  {
    tsan::Quiet quiet;
    to_bottom = to.stack_bottom;
    to_size = to.stack_size;
  }
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, to_bottom, to_size);
#endif
#if defined(__SANITIZE_THREAD__)
  void* to_fiber;
  {
    tsan::Quiet quiet;
    to_fiber = to.tsan_fiber;
  }
  __tsan_switch_to_fiber(to_fiber, 1 /* __tsan_switch_to_fiber_no_sync */);
#endif
  raw_fiber_switch(from, to);
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(fake_stack, &resumed_from_bottom, &resumed_from_size);
#endif
}

// The fibers of the block being run: their contexts, the scheduler's, and
// which one runs now. One per launching OS thread (launches are serialised).
struct Fibers {
  FiberContext scheduler;
  std::vector<FiberContext*> contexts;  // the OS thread's fibers (FiberPool)
  std::vector<unsigned char> done;
  unsigned int running = 0;
  unsigned int block = 0;
  unsigned long long progress = 0;  // arrivals at barriers, waits ended, returns
  const std::function<void(unsigned int)>* body = nullptr;
  // ThreadSanitizer: the threads of block b acquire order[(b + 1) & 1] when
  // they start (what the previous block, or for block 0 the host, did) and
  // release order[b & 1] when they end; never the token of their own block.
  char order[2] = {0, 0};

  Fibers() {
#if defined(__SANITIZE_THREAD__)
    scheduler.tsan_fiber = __tsan_get_current_fiber();
#endif
  }
  Fibers(const Fibers&) = delete;
  Fibers& operator=(const Fibers&) = delete;
};
inline thread_local Fibers* current_fibers = nullptr;

// A fiber resumed: by the scheduler of the launch now running (which may be
// on another stack than the one that last ran it), the stack to go back to.
inline void learn_scheduler_stack() {
#if defined(__SANITIZE_ADDRESS__)
  tsan::Quiet quiet;
  current_fibers->scheduler.stack_bottom = resumed_from_bottom;
  current_fibers->scheduler.stack_size = resumed_from_size;
#endif
}

// Back to the scheduler until it resumes this thread; the thread's own
// variables (thread-local, shared by the fibers of an OS thread) restored.
inline void fiber_yield() {
  Fibers& fibers = *current_fibers;
  const uint3 thread = threadIdx;
  const unsigned long long block_passed = block_barriers_passed;
  const unsigned long long warp_passed = warp_barriers_passed;
  fiber_switch(*fibers.contexts[fibers.running], fibers.scheduler);
  learn_scheduler_stack();
  threadIdx = thread;
  block_barriers_passed = block_passed;
  warp_barriers_passed = warp_passed;
}

// A waiting thread gives way to the others until its barrier completes:
// the scheduler resumes every unfinished thread in turn, and this one looks
// again each time. No lock is held while others run (they take it too).
template <typename Ready>
inline void wait_until(Block& block, std::condition_variable&,
                       std::unique_lock<std::mutex>& lock, Ready ready, const char* where) {
  block.blocked++;
  check_deadlock(block, where);
  if (block.failed) throw Abort{};
  lock.unlock();
  current_fibers->progress++;  // ran up to here since it was resumed
  while (!ready() && !block.failed) fiber_yield();
  current_fibers->progress++;
  lock.lock();
  if (block.failed) throw Abort{};
}
#else
template <typename Ready>
inline void wait_until(Block& block, std::condition_variable& cv,
                       std::unique_lock<std::mutex>& lock, Ready ready, const char* where) {
  block.blocked++;
  check_deadlock(block, where);
  if (block.failed) throw Abort{};
  // Barriers are short: yield to the threads that still have to arrive
  // (a sleep/wake on the condition variable per rendezvous costs far more),
  // then fall back to sleeping for long waits. 100 yields, not 2000: on 2
  // cores the emulated tests ran 11-15% faster (sched_yield was 88% of
  // their system time), with and without AddressSanitizer.
  lock.unlock();
  for (int spin = 0; spin < kSpinYields && !ready(); ++spin) std::this_thread::yield();
  lock.lock();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kStallSeconds);
  while (!ready() && !block.failed) {
    if (cv.wait_until(lock, deadline) == std::cv_status::timeout && !ready()) {
      fail(block, std::string("no progress for ") + std::to_string(kStallSeconds) +
                      " s in " + where);
    }
  }
  // The releasing thread already took this waiter off `blocked`, so that it
  // never counts as blocked after its barrier completed.
  if (block.failed) throw Abort{};
}
#endif

// Generations are read without the mutex while spinning: released with
// release/acquire order, so a lane that sees the new generation also sees
// the results written before it.
inline unsigned long long load_generation(const unsigned long long& generation) {
  return __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
}
inline void advance_generation(unsigned long long& generation) {
  __atomic_fetch_add(&generation, 1ull, __ATOMIC_RELEASE);
}

// __syncthreads and its counting variants: every thread of the block.
inline long long block_rendezvous(long long contribution, const char* where) {
  Block& block = *current_block;
  std::unique_lock<std::mutex> lock(block.mutex);
  if (block.failed) throw Abort{};
  block.count += contribution;
  if (++block.arrived == block.threads) {
    block.count_result = block.count;
    block.count = 0;
    block.arrived = 0;
    block.blocked -= block.threads - 1;
    advance_generation(block.generation);
    block.released.notify_all();
    return block.count_result;
  }
  unsigned long long generation = block.generation;
  wait_until(block, block.released, lock,
             [&] { return load_generation(block.generation) != generation; }, where);
  return block.count_result;
}

// The counts of barriers passed are the OS thread's variables, which the
// fibers of a block share (each restores its own when it resumes): read and
// written quietly.
inline unsigned long long passed_quietly(const unsigned long long& count) {
  tsan::Quiet quiet;
  return count;
}

inline long long block_barrier(long long contribution, const char* where) {
  Block& block = *current_block;
  const unsigned long long passed = passed_quietly(block_barriers_passed);
  block.order.arrive(passed);
  long long result;
  {
    tsan::Quiet quiet;
    result = block_rendezvous(contribution, where);
    block_barriers_passed = passed + 1;
  }
  block.order.depart(passed);
  return result;
}

// A rendezvous of all lanes of the warp. Each lane deposits a value and a
// parameter; the last lane to arrive computes every lane's result with
// `compute(warp)` and releases them. Results stay valid until the next
// rendezvous completes, which needs this lane again, so reading after
// release is race-free.
template <typename Compute>
inline unsigned long long warp_rendezvous(const char* op, unsigned int mask,
                                          unsigned long long value, long long parameter,
                                          Compute compute) {
  Block& block = *current_block;
  Warp& warp = current_warp();
  unsigned int lane = lane_id();
  std::unique_lock<std::mutex> lock(block.mutex);
  if (block.failed) throw Abort{};
  if (mask != full_mask(warp)) {
    char text[160];
    std::snprintf(text, sizeof text,
                  "%s with mask 0x%08x in warp %u (lane %u); the emulator needs all %u "
                  "lanes (mask 0x%08x)",
                  op, mask, threadIdx.x / kWarpSize, lane, warp.size, full_mask(warp));
    fail(block, text);
    throw Abort{};
  }
  if (warp.arrived > 0 && std::strcmp(warp.op, op) != 0) {
    fail(block, std::string("warp ") + std::to_string(threadIdx.x / kWarpSize) +
                    " diverged: lanes wait in " + warp.op + " and lane " +
                    std::to_string(lane) + " in " + op);
    throw Abort{};
  }
  warp.op = op;
  warp.value[lane] = value;
  warp.parameter[lane] = parameter;
  if (++warp.arrived == warp.size) {
    compute(warp);
    warp.arrived = 0;
    block.blocked -= warp.size - 1;
    advance_generation(warp.generation);
    warp.released.notify_all();
    return warp.result[lane];
  }
  unsigned long long generation = warp.generation;
  wait_until(block, warp.released, lock,
             [&] { return load_generation(warp.generation) != generation; }, op);
  return warp.result[lane];
}

// Every intrinsic is declared a barrier of the warp (CUDA promises memory
// order for __syncwarp only; taking it for all of them never reports a race
// that a shuffle or vote would order on a GPU).
template <typename Compute>
inline unsigned long long warp_exchange(const char* op, unsigned int mask,
                                        unsigned long long value, long long parameter,
                                        Compute compute) {
  Warp& warp = current_warp();
  const unsigned long long passed = passed_quietly(warp_barriers_passed);
  warp.order.arrive(passed);
  unsigned long long result;
  {
    tsan::Quiet quiet;
    result = warp_rendezvous(op, mask, value, parameter, compute);
    warp_barriers_passed = passed + 1;
  }
  warp.order.depart(passed);
  return result;
}

template <typename T>
inline unsigned long long to_bits(T value) {
  static_assert(sizeof(T) <= 8, "warp intrinsics take values of at most 8 bytes");
  unsigned long long bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

template <typename T>
inline T from_bits(unsigned long long bits) {
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

// Shuffle: lane l receives the value of lane source(l, parameter), or its own
// value when the source is outside its `width` segment (as on a GPU).
template <typename T, typename Source>
inline T shuffle(const char* op, unsigned int mask, T var, long long parameter, int width,
                 Source source) {
  unsigned long long bits = warp_exchange(
      op, mask, to_bits(var), parameter, [&](Warp& warp) {
        for (unsigned int l = 0; l < warp.size; ++l) {
          long long segment = (long long)(l / width) * width;
          long long from = source((long long)l, warp.parameter[l], segment, width);
          // Lanes may read earlier segments (only __shfl_xor_sync reaches
          // them), never later ones or past the warp.
          bool inside = from >= 0 && from < segment + width && from < (long long)warp.size &&
                        (from >= segment || std::strcmp(op, "__shfl_xor_sync") == 0);
          warp.result[l] = inside ? warp.value[from] : warp.value[l];
        }
      });
  return from_bits<T>(bits);
}

struct Launch {
  static std::mutex& serial() {
    static std::mutex m;
    return m;
  }
};

#if METRICS_GPU_EMULATED_OS_THREADS
// Worker threads kept across launches (starting 64+ OS threads per launch
// would dominate small launches). Launches are serialised, so one job runs
// at a time. The pool is never destroyed: its threads are detached and idle
// at exit.
class Pool {
 public:
  static Pool& instance() {
    static Pool* pool = new Pool();
    return *pool;
  }

  // Run job(0..n-1) on n distinct threads; returns when all have finished.
  // Under ThreadSanitizer the pool's lock is hidden (a thread that starts its
  // job after another finished would otherwise be ordered after it): the
  // caller's writes are declared before every job, every job before the
  // caller's return.
  void run(unsigned int n, const std::function<void(unsigned int)>& job) {
    tsan::release(&jobs_start_);
    run_quietly(n, job);
    tsan::acquire(&jobs_end_);
  }

 private:
  void run_quietly(unsigned int n, const std::function<void(unsigned int)>& job) {
    tsan::Quiet quiet;
    std::unique_lock<std::mutex> lock(mutex_);
    while (threads_ < n) {
      std::thread(&Pool::work, this, threads_).detach();
      threads_++;
    }
    job_ = &job;
    job_threads_ = n;
    finished_ = 0;
    generation_++;
    start_.notify_all();
    done_.wait(lock, [&] { return finished_ == job_threads_; });
    job_ = nullptr;
  }

  void work(unsigned int index) {
    tsan::Quiet quiet;  // for the thread's life, except while it runs a job
    unsigned long long seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      start_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (index >= job_threads_) continue;
      const std::function<void(unsigned int)>* job = job_;
      lock.unlock();
      run_job(*job, index);
      lock.lock();
      if (++finished_ == job_threads_) done_.notify_all();
    }
  }

  void run_job(const std::function<void(unsigned int)>& job, unsigned int index) {
#if defined(__SANITIZE_THREAD__)
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    AnnotateIgnoreSyncEnd(__FILE__, __LINE__);
    tsan::acquire(&jobs_start_);
#endif
    job(index);
#if defined(__SANITIZE_THREAD__)
    tsan::release(&jobs_end_);
    AnnotateIgnoreSyncBegin(__FILE__, __LINE__);
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
#endif
  }

  std::mutex mutex_;
  std::condition_variable start_, done_;
  unsigned int threads_ = 0;
  unsigned int job_threads_ = 0;
  unsigned int finished_ = 0;
  char jobs_start_ = 0, jobs_end_ = 0;  // ThreadSanitizer's tokens for run()
  unsigned long long generation_ = 0;
  const std::function<void(unsigned int)>* job_ = nullptr;
};
#endif

#if !METRICS_GPU_EMULATED_OS_THREADS
inline void fiber_main();

// The fibers of an OS thread, made once per thread index and kept: each
// runs fiber_main, a loop that runs thread `running` of whichever block its
// scheduler starts it for. Stacks: 256 KiB of address space each, committed
// as touched, over a guard page so that an overflow faults instead of
// writing into the next stack. One pool per OS thread: a fiber never moves
// to another (the compiler may keep the address of a thread-local variable
// across a switch). Kept fibers keep ThreadSanitizer's state of each too
// (one made and destroyed per launch is kept by it for its reports:
// gigabytes over a test run), and their shadow call stacks balanced (a
// fiber that ended in its final switch would leave its frames there).
class FiberPool {
 public:
  static constexpr std::size_t kStackBytes = 256 * 1024;
  FiberPool() = default;
  FiberPool(const FiberPool&) = delete;
  FiberPool& operator=(const FiberPool&) = delete;
  ~FiberPool() {
    const std::size_t page = (std::size_t)sysconf(_SC_PAGESIZE);
    for (Fiber& fiber : fibers_) {
      munmap(static_cast<unsigned char*>(fiber.stack) - page, kStackBytes + page);
    }
  }

  FiberContext& context(unsigned int i) {
    while (fibers_.size() <= i) {
      const std::size_t page = (std::size_t)sysconf(_SC_PAGESIZE);
      void* region = mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (region == MAP_FAILED) throw std::runtime_error("mmap of a fiber stack failed");
      mprotect(region, page, PROT_NONE);
      fibers_.emplace_back();
      Fiber& fiber = fibers_.back();
      fiber.stack = static_cast<unsigned char*>(region) + page;
      fiber.context = std::make_unique<FiberContext>();
      fiber_prepare(*fiber.context, fiber.stack, kStackBytes, fiber_main);
#if defined(__SANITIZE_THREAD__)
      fiber.context->tsan_fiber = __tsan_create_fiber(0);
#endif
    }
    return *fibers_[i].context;
  }

 private:
  struct Fiber {
    void* stack = nullptr;
    std::unique_ptr<FiberContext> context;  // its address is kept by the fiber
  };
  std::vector<Fiber> fibers_;
};
inline thread_local FiberPool fiber_pool;

// A fiber's first frame, which never returns: each turn runs the thread the
// scheduler started it for, then switches back, to be resumed for the same
// thread index of a later block or launch.
inline void fiber_main() {
#if defined(__SANITIZE_ADDRESS__)
  // The switch that started this fiber ends here; AddressSanitizer names
  // the stack it came from, the scheduler's.
  __sanitizer_finish_switch_fiber(nullptr, &resumed_from_bottom, &resumed_from_size);
#endif
  learn_scheduler_stack();
  while (true) {
    Fibers* started_by;
    unsigned int thread;
    unsigned int parity;
    {
      // Read and written before this thread acquires the order of the
      // blocks before it: the OS thread's variables (written by every
      // fiber) and the scheduler's.
      tsan::Quiet quiet;
      started_by = current_fibers;
      thread = started_by->running;
      parity = started_by->block & 1;
      threadIdx = {thread, 0, 0};
    }
    Fibers& fibers = *started_by;
    tsan::acquire(&fibers.order[parity ^ 1]);
    (*fibers.body)(thread);  // catches everything the kernel throws
    FiberContext& self = *fibers.contexts[thread];
    tsan::release(&fibers.order[parity]);
    {
      tsan::Quiet quiet;
      fibers.done[thread] = 1;
      fibers.progress++;
    }
    fiber_switch(self, fibers.scheduler);
    learn_scheduler_stack();
  }
}

// Runs block `fibers.block`: fibers.body(0..threads-1), each thread a
// fiber, until all have returned, in rounds over the unfinished threads in
// order, each running until it waits or returns. A round in which no thread
// arrived at a barrier, left one or returned cannot be followed by one that
// does (the deadlock check of the barriers sees it first; this is the guard).
inline void run_fibers(Fibers& fibers, unsigned int threads, Block& block) {
  tsan::Quiet quiet;  // the scheduler's bookkeeping
  if (fibers.contexts.size() < threads) {
    fibers.contexts.resize(threads);
    for (unsigned int t = 0; t < threads; ++t) fibers.contexts[t] = &fiber_pool.context(t);
  }
  fibers.done.assign(threads, 0);
  Fibers* outer = current_fibers;
  current_fibers = &fibers;
  unsigned int remaining = threads;
  while (remaining > 0) {
    const unsigned long long before = fibers.progress;
    for (unsigned int t = 0; t < threads; ++t) {
      if (fibers.done[t]) continue;
      fibers.running = t;
      fiber_switch(fibers.scheduler, *fibers.contexts[t]);
      if (fibers.done[t]) remaining--;
    }
    if (remaining > 0 && fibers.progress == before) {
      std::lock_guard<std::mutex> lock(block.mutex);
      fail(block, "no progress: " + std::to_string(remaining) +
                      " threads wait in barriers that cannot complete");
    }
  }
  current_fibers = outer;
}
#endif

template <typename... Args, std::size_t... I>
inline void call_kernel(void (*kernel)(Args...), void** args, std::index_sequence<I...>) {
  kernel(*static_cast<std::remove_cv_t<std::remove_reference_t<Args>>*>(args[I])...);
}

// Runs `grid` blocks of `threads` threads; returns 0, or 1 with a message.
template <typename... Args>
inline int launch(const char* name, void (*kernel)(Args...), void** args, unsigned int grid,
                  unsigned int threads, unsigned long long shared_bytes, char* error,
                  unsigned long long error_size) {
  std::lock_guard<std::mutex> serial(Launch::serial());
  auto report = [&](const std::string& text) {
    if (error_size > 0) {
      std::snprintf(error, (size_t)error_size, "%s", text.c_str());
    }
    return 1;
  };
  if (threads == 0 || threads > 1024 || grid == 0) {
    return report(std::string("kernel ") + name + ": invalid launch shape grid=" +
                  std::to_string(grid) + " block=" + std::to_string(threads));
  }
  Block block;
  block.threads = threads;
  block.kernel = name;
  block.warps = std::vector<Warp>((threads + kWarpSize - 1) / kWarpSize);
  for (std::size_t w = 0; w < block.warps.size(); ++w) {
    block.warps[w].size = std::min<unsigned int>(kWarpSize, threads - (unsigned int)w * kWarpSize);
  }
  std::vector<unsigned char> dynamic_shared((size_t)shared_bytes + 16);
  block.dynamic_shared = dynamic_shared.data();

  auto reset_block = [&](unsigned int index) {
    block.index = index;
    block.live = threads;
    block.blocked = 0;
    block.arrived = 0;
    block.count = 0;
    for (Warp& warp : block.warps) {
      warp.live = warp.size;
      warp.live_mask = full_mask(warp);
      warp.arrived = 0;
      warp.op = nullptr;
    }
  };
  reset_block(0);

  // One thread of block b: the kernel, then its leaving the block's barriers.
  auto run_thread = [&](unsigned int b, unsigned int thread) {
    {
      tsan::Quiet quiet;  // fibers: the OS thread's variables, written by each
      blockIdx = {b, 0, 0};
      block_barriers_passed = 0;
      warp_barriers_passed = 0;
    }
    try {
      call_kernel(kernel, args, std::index_sequence_for<Args...>{});
    } catch (const Abort&) {
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(block.mutex);
      fail(block, std::string("exception in thread ") + std::to_string(thread) + ": " + e.what());
    }
    std::lock_guard<std::mutex> lock(block.mutex);
    block.live--;
    Warp& warp = block.warps[thread / kWarpSize];
    warp.live--;
    warp.live_mask &= ~(1u << (thread % kWarpSize));
    if (block.live > 0 && !block.failed) check_deadlock(block, "thread returned");
  };

#if METRICS_GPU_EMULATED_OS_THREADS
  // End-of-block barrier (outside the deadlock accounting: every thread gets
  // here, whether its kernel returned or was aborted).
  std::mutex end_mutex;
  std::condition_variable end_cv;
  unsigned int end_arrived = 0;
  unsigned long long end_generation = 0;
  std::string failure;

  auto worker = [&](unsigned int thread) {
    current_block = &block;
    threadIdx = {thread, 0, 0};
    blockDim = {threads, 1, 1};
    gridDim = {grid, 1, 1};
    for (unsigned int b = 0; b < grid; ++b) {
      run_thread(b, thread);
      std::unique_lock<std::mutex> lock(end_mutex);
      if (++end_arrived == threads) {
        end_arrived = 0;
        bool failed = block.failed;
        if (failed && failure.empty()) failure = block.failure;
        if (!failed && b + 1 < grid) reset_block(b + 1);
        end_generation++;
        end_cv.notify_all();
      } else {
        unsigned long long generation = end_generation;
        end_cv.wait(lock, [&] { return end_generation != generation; });
      }
      if (!failure.empty()) break;
    }
  };

  try {
    Pool::instance().run(threads, std::function<void(unsigned int)>(worker));
  } catch (const std::exception& e) {
    return report(std::string("kernel ") + name + ": could not start the block's threads: " +
                  e.what());
  }
  if (!failure.empty()) return report(failure);
  return 0;
#else
  current_block = &block;
  blockDim = {threads, 1, 1};
  gridDim = {grid, 1, 1};
  Fibers fibers;
  const std::function<void(unsigned int)> body = [&](unsigned int thread) {
    run_thread(fibers.block, thread);
  };
  fibers.body = &body;
  std::string failure;
  tsan::release(&fibers.order[1]);  // the host's writes come before block 0
  for (unsigned int b = 0; b < grid && failure.empty(); ++b) {
    {
      tsan::Quiet quiet;  // the host's bookkeeping between blocks
      if (b > 0) reset_block(b);
      fibers.block = b;
    }
    try {
      run_fibers(fibers, threads, block);
    } catch (const std::exception& e) {
      failure = std::string("kernel ") + name + ": could not run the block's threads: " +
                e.what();
    }
    tsan::Quiet quiet;
    if (block.failed) failure = block.failure;
  }
  tsan::acquire(&fibers.order[0]);  // every block comes before the host's return
  tsan::acquire(&fibers.order[1]);
  if (!failure.empty()) return report(failure);
  return 0;
#endif
}

}  // namespace emu

// Export one instantiation: `symbol(args, grid, block, shared_bytes, error, error_size)`.
#define METRICS_GPU_EMULATED_ENTRY(symbol, ...)                                          \
  extern "C" int symbol(void** args, unsigned int grid, unsigned int block,              \
                        unsigned long long shared_bytes, char* error,                    \
                        unsigned long long error_size) {                                 \
    return emu::launch(#__VA_ARGS__, &__VA_ARGS__, args, grid, block, shared_bytes,      \
                       error, error_size);                                               \
  }

// ---------------------------------------------------------------------------
// Synchronisation and warp intrinsics
// ---------------------------------------------------------------------------

inline void __syncthreads() { emu::block_barrier(0, "__syncthreads"); }
inline int __syncthreads_count(int predicate) {
  return (int)emu::block_barrier(predicate != 0, "__syncthreads_count");
}
inline int __syncthreads_or(int predicate) {
  return emu::block_barrier(predicate != 0, "__syncthreads_or") != 0;
}
inline int __syncthreads_and(int predicate) {
  return emu::block_barrier(predicate != 0, "__syncthreads_and") == (long long)blockDim.x;
}

inline void __syncwarp(unsigned int mask = 0xffffffffu) {
  emu::warp_exchange("__syncwarp", mask & emu::full_mask(emu::current_warp()), 0, 0,
                     [](emu::Warp&) {});
}

inline unsigned int __activemask() {
  emu::tsan::Quiet quiet;
  emu::Block& block = *emu::current_block;
  std::lock_guard<std::mutex> lock(block.mutex);
  // Lanes that have not returned; the kernels only ask while converged.
  return emu::current_warp().live_mask;
}

inline unsigned int __ballot_sync(unsigned int mask, int predicate) {
  return (unsigned int)emu::warp_exchange(
      "__ballot_sync", mask, predicate != 0, 0, [](emu::Warp& warp) {
        unsigned long long bits = 0;
        for (unsigned int l = 0; l < warp.size; ++l) bits |= (warp.value[l] ? 1ull : 0ull) << l;
        for (unsigned int l = 0; l < warp.size; ++l) warp.result[l] = bits;
      });
}
inline int __any_sync(unsigned int mask, int predicate) {
  return __ballot_sync(mask, predicate) != 0;
}
inline int __all_sync(unsigned int mask, int predicate) {
  return __ballot_sync(mask, predicate) == mask;
}

template <typename T>
inline unsigned int __match_any_sync(unsigned int mask, T value) {
  return (unsigned int)emu::warp_exchange(
      "__match_any_sync", mask, emu::to_bits(value), 0, [](emu::Warp& warp) {
        for (unsigned int l = 0; l < warp.size; ++l) {
          unsigned long long same = 0;
          for (unsigned int j = 0; j < warp.size; ++j) {
            if (warp.value[j] == warp.value[l]) same |= 1ull << j;
          }
          warp.result[l] = same;
        }
      });
}

template <typename T>
inline T __shfl_sync(unsigned int mask, T var, int src_lane, int width = warpSize) {
  return emu::shuffle("__shfl_sync", mask, var, src_lane, width,
                      [](long long, long long src, long long segment, long long w) {
                        return segment + (src % w + w) % w;
                      });
}
template <typename T>
inline T __shfl_down_sync(unsigned int mask, T var, unsigned int delta, int width = warpSize) {
  return emu::shuffle("__shfl_down_sync", mask, var, delta, width,
                      [](long long lane, long long d, long long, long long) { return lane + d; });
}
template <typename T>
inline T __shfl_up_sync(unsigned int mask, T var, unsigned int delta, int width = warpSize) {
  return emu::shuffle("__shfl_up_sync", mask, var, delta, width,
                      [](long long lane, long long d, long long, long long) { return lane - d; });
}
template <typename T>
inline T __shfl_xor_sync(unsigned int mask, T var, int lane_mask, int width = warpSize) {
  return emu::shuffle("__shfl_xor_sync", mask, var, lane_mask, width,
                      [](long long lane, long long m, long long, long long) { return lane ^ m; });
}

inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// ---------------------------------------------------------------------------
// Atomics
// ---------------------------------------------------------------------------

template <typename T>
inline T emu_atomic_cas_update(T* address, T (*update)(T, T), T operand) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "CAS atomics on 4 or 8 bytes");
  using Bits = std::conditional_t<sizeof(T) == 4, unsigned int, unsigned long long>;
  Bits* bits = reinterpret_cast<Bits*>(address);
  Bits old_bits = __atomic_load_n(bits, __ATOMIC_RELAXED);
  while (true) {
    T old_value;
    std::memcpy(&old_value, &old_bits, sizeof(T));
    T new_value = update(old_value, operand);
    Bits new_bits;
    std::memcpy(&new_bits, &new_value, sizeof(T));
    if (__atomic_compare_exchange_n(bits, &old_bits, new_bits, true, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED)) {
      return old_value;
    }
  }
}

template <typename T>
inline T atomicAdd(T* address, T value) {
  if constexpr (std::is_floating_point_v<T>) {
    return emu_atomic_cas_update<T>(address, [](T a, T b) { return a + b; }, value);
  } else {
    return __atomic_fetch_add(address, value, __ATOMIC_RELAXED);
  }
}
template <typename T>
inline T atomicAdd_block(T* address, T value) {
  return atomicAdd(address, value);
}
template <typename T>
inline T atomicSub(T* address, T value) {
  return __atomic_fetch_sub(address, value, __ATOMIC_RELAXED);
}
template <typename T>
inline T atomicMax(T* address, T value) {
  return emu_atomic_cas_update<T>(address, [](T a, T b) { return a > b ? a : b; }, value);
}
template <typename T>
inline T atomicMin(T* address, T value) {
  return emu_atomic_cas_update<T>(address, [](T a, T b) { return a < b ? a : b; }, value);
}
template <typename T>
inline T atomicOr(T* address, T value) {
  return __atomic_fetch_or(address, value, __ATOMIC_RELAXED);
}
template <typename T>
inline T atomicAnd(T* address, T value) {
  return __atomic_fetch_and(address, value, __ATOMIC_RELAXED);
}
template <typename T>
inline T atomicExch(T* address, T value) {
  return __atomic_exchange_n(address, value, __ATOMIC_RELAXED);
}
template <typename T>
inline T atomicCAS(T* address, T compare, T value) {
  __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_RELAXED,
                              __ATOMIC_RELAXED);
  return compare;  // the old value, whether or not it was swapped
}

// ---------------------------------------------------------------------------
// Bit and math intrinsics
// ---------------------------------------------------------------------------

inline int __popc(unsigned int x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned int)x); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
inline float __uint_as_float(unsigned int x) { return emu::from_bits<float>(x); }
inline unsigned int __float_as_uint(float x) { return (unsigned int)emu::to_bits(x); }
inline double __longlong_as_double(long long x) { return emu::from_bits<double>((unsigned long long)x); }
inline long long __double_as_longlong(double x) { return (long long)emu::to_bits(x); }
template <typename T>
inline T __ldg(const T* p) { return *p; }
inline double __ll2double_rn(long long x) { return (double)x; }
inline double __ull2double_rn(unsigned long long x) { return (double)x; }
inline long long __double2ll_rn(double x) { return (long long)std::nearbyint(x); }
using std::isnan;
using std::sqrt;
using std::ldexp;
using std::llrint;
using std::ilogb;

// Dynamic shared memory of the launch (the kernels go through the macro in common.cuh).
inline unsigned char* emu_dynamic_shared() {
  std::uintptr_t p = reinterpret_cast<std::uintptr_t>(emu::current_block->dynamic_shared);
  return reinterpret_cast<unsigned char*>((p + 15) & ~std::uintptr_t(15));
}
