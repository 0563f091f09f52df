"""The CUDA emulator itself (``kernels/emulation/cuda_emulation.h``).

Tiny purpose-written kernels, compiled with
:meth:`~metrics_gpu.backends.emulated.EmulatedDevice.build_module`, check the
intrinsics the real kernels rely on against CUDA's documented semantics
(warp shuffles with sub-warp widths, votes, ``__match_any_sync``, the
counting ``__syncthreads`` variants, atomics under contention, static and
dynamic shared memory, real concurrency of a block's threads), and that
misuse is reported as an :class:`EmulatedKernelError` naming the kernel and
the block, never as a hang. Every launch runs in a helper thread joined with
a timeout, so a regression fails instead of blocking the test run.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from metrics_gpu.backends.emulated import EmulatedDevice, EmulatedKernelError, find_compiler

pytestmark = pytest.mark.skipif(find_compiler() is None,
                                reason="the emulator needs a C++ compiler (set CXX)")

LAUNCH_TIMEOUT_S = 60.0
FULL = 0xFFFFFFFF

SOURCE = r"""
#include "common.cuh"

// --- warp shuffles: four results per thread ----------------------------------
template <typename T>
__global__ void shuffles(const T* in, T* out, int width, int delta, int src_lane) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  T v = in[i];
  out[4 * i + 0] = __shfl_sync(mg::kFullWarp, v, src_lane, width);
  out[4 * i + 1] = __shfl_down_sync(mg::kFullWarp, v, (unsigned int)delta, width);
  out[4 * i + 2] = __shfl_up_sync(mg::kFullWarp, v, (unsigned int)delta, width);
  out[4 * i + 3] = __shfl_xor_sync(mg::kFullWarp, v, delta, width);
}

// --- votes, matches and block-wide counts ------------------------------------
__global__ void votes(const int* predicate, const int* keys32, const long long* keys64,
                      unsigned int* ballot, int* any_all, unsigned int* match32,
                      unsigned int* match64, int* block_counts) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  int p = predicate[i];
  ballot[i] = __ballot_sync(mg::kFullWarp, p);
  any_all[2 * i] = __any_sync(mg::kFullWarp, p);
  any_all[2 * i + 1] = __all_sync(mg::kFullWarp, p);
  match32[i] = __match_any_sync(mg::kFullWarp, keys32[i]);
  match64[i] = __match_any_sync(mg::kFullWarp, keys64[i]);
  int count = __syncthreads_count(p);
  int any = __syncthreads_or(p);
  int all = __syncthreads_and(p);
  block_counts[3 * i] = count;
  block_counts[3 * i + 1] = any;
  block_counts[3 * i + 2] = all;
}

// --- atomics under contention -------------------------------------------------
__global__ void atomics(int* i32, unsigned long long* u64, double* f64, int* imax,
                        unsigned long long* umax, int* cas_counter, int* cas_slots,
                        int slot_count, int* winners, int iterations) {
  const long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (int k = 0; k < iterations; ++k) {
    atomicAdd(i32, 1);
    atomicAdd(u64, 0x100000001ull);  // carries across the 32-bit halves
    atomicAdd(f64, 0.25);
    int old = atomicAdd(cas_counter, 0);
    int assumed;
    do {  // increment by compare-and-swap, the classic retry loop
      assumed = old;
      old = atomicCAS(cas_counter, assumed, assumed + 1);
    } while (old != assumed);
  }
  atomicMax(imax, (int)((g * 7919) % 100003));
  atomicMax(umax, (unsigned long long)g << 40);
  if (atomicCAS(&cas_slots[g % slot_count], 0, (int)g + 1) == 0) atomicAdd(winners, 1);
}

// --- shared memory ----------------------------------------------------------------
__global__ void static_shared(int* neighbour, unsigned int* block_sum) {
  __shared__ int tile[256];
  __shared__ unsigned int sum;
  if (threadIdx.x == 0) sum = 0;
  tile[threadIdx.x] = blockIdx.x * 1000 + threadIdx.x;
  __syncthreads();
  neighbour[blockIdx.x * blockDim.x + threadIdx.x] = tile[(threadIdx.x + 1) % blockDim.x];
  atomicAdd(&sum, threadIdx.x + blockIdx.x);
  __syncthreads();
  if (threadIdx.x == 0) block_sum[blockIdx.x] = sum;
}

template <typename T>
__global__ void dynamic_shared(T* out, unsigned long long* misalignment, int per_thread) {
  MG_DYNAMIC_SHARED(T, buffer);
  const int n = blockDim.x * per_thread;
  for (int c = threadIdx.x; c < n; c += blockDim.x) buffer[c] = (T)(blockIdx.x * n + c);
  __syncthreads();
  T total = 0;
  for (int c = 0; c < per_thread; ++c) total += buffer[n - 1 - (threadIdx.x * per_thread + c)];
  out[blockIdx.x * blockDim.x + threadIdx.x] = total;
  if (threadIdx.x == 0) misalignment[blockIdx.x] = (unsigned long long)(size_t)buffer % 16;
}

// --- the threads of a block really run concurrently --------------------------
__global__ void handshake(int* flag, int* seen) {
  if (threadIdx.x == 0) {
    long long spins = 0;
    while (atomicAdd(flag, 0) == 0 && spins < (1ll << 32)) ++spins;  // bounded: never hangs
    seen[0] = atomicAdd(flag, 0);
  } else if (threadIdx.x == blockDim.x - 1) {
    atomicExch(flag, 1);
  }
}

// --- misuse that must be reported -------------------------------------------------
__global__ void early_return(int* out, int bad_block) {
  if (blockIdx.x == bad_block && threadIdx.x == 0) return;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}

__global__ void diverged_warp(unsigned int* out) {
  unsigned int lane = threadIdx.x % 32;
  if (lane < 16) {
    out[threadIdx.x] = __ballot_sync(mg::kFullWarp, 1);
  } else {
    out[threadIdx.x] = (unsigned int)__shfl_sync(mg::kFullWarp, (int)lane, 0);
  }
}

__global__ void partial_mask(unsigned int* out) {
  unsigned int lane = threadIdx.x % 32;
  if (lane < 16) out[threadIdx.x] = __ballot_sync(0x0000ffffu, 1);
}

__global__ void lane_returned(unsigned int* out) {
  if (threadIdx.x % 32 == 5) return;
  out[threadIdx.x] = __ballot_sync(mg::kFullWarp, 1);
}

__global__ void crossed_barriers(unsigned int* out) {
  // Thread 32 waits at __syncthreads while the rest of its warp waits for it
  // in __ballot_sync: neither barrier can complete.
  if (threadIdx.x == 32) {
    __syncthreads();
    return;
  }
  if (threadIdx.x > 32) out[threadIdx.x] = __ballot_sync(mg::kFullWarp, 1);
  __syncthreads();
}
"""

SHUFFLE_TYPES = {"int32": "int", "int64": "long long", "float32": "float", "float64": "double"}
EXPRESSIONS = tuple(f"shuffles<{c}>" for c in SHUFFLE_TYPES.values()) + (
    "votes", "atomics", "static_shared", "dynamic_shared<int>", "dynamic_shared<double>",
    "handshake", "early_return", "diverged_warp", "partial_mask", "lane_returned",
    "crossed_barriers",
)


@pytest.fixture(scope="module")
def device():
    return EmulatedDevice()


@pytest.fixture(scope="module", params=["fibers", "os-threads"])
def launch(device, request):
    """The test kernels built both ways the emulator runs a block's threads:
    fibers (the default) and OS threads (on request)."""
    launch = device.build_module(SOURCE, EXPRESSIONS, os_threads=request.param == "os-threads")
    launch.os_threads = request.param == "os-threads"
    return launch


def run(launch, expression, grid, block, args, shared_bytes=0):
    """Launch in a helper thread; fail (instead of hanging) if it does not return."""
    outcome = {}

    def target():
        try:
            launch(expression, grid, block, args, shared_bytes)
        except BaseException as error:  # re-raised in the test's thread
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(LAUNCH_TIMEOUT_S)
    assert not thread.is_alive(), f"{expression} did not return within {LAUNCH_TIMEOUT_S} s"
    if "error" in outcome:
        raise outcome["error"]


# -- shuffles ----------------------------------------------------------------------------


def shuffle_model(values, op, parameter, width):
    """CUDA's result per thread (PTX shfl.sync semantics, CUDA Programming Guide):
    idx reads lane (src mod width) of its segment; down/up read lane +/- delta, or
    keep their own value past their segment's end/start; xor reads lane ^ mask unless
    that lies in a *later* segment (earlier segments are readable)."""
    out = np.empty_like(values)
    for warp_start in range(0, values.size, 32):
        for lane in range(32):
            segment = lane // width * width
            if op == "idx":
                source = segment + parameter % width
            elif op == "down":
                source = lane + parameter
                source = source if source < segment + width else lane
            elif op == "up":
                source = lane - parameter
                source = source if source >= segment else lane
            else:
                source = lane ^ parameter
                source = source if source < segment + width else lane
            out[warp_start + lane] = values[warp_start + source]
    return out


def shuffle_inputs(dtype, n):
    rng = np.random.default_rng(n)
    if dtype == "int64":
        return rng.integers(-(2**62), 2**62, n).astype(np.int64)
    if dtype == "int32":
        return rng.integers(-(2**31), 2**31 - 1, n).astype(np.int32)
    return (rng.standard_normal(n) * 1e3).astype(dtype)


def run_shuffles(launch, dtype, width, delta, src_lane, grid=2, block=64):
    values = shuffle_inputs(dtype, grid * block)
    out = np.zeros(4 * values.size, dtype=values.dtype)
    run(launch, f"shuffles<{SHUFFLE_TYPES[dtype]}>", grid, block,
        [values, out, np.int32(width), np.int32(delta), np.int32(src_lane)])
    return values, out.reshape(-1, 4)


@pytest.mark.parametrize("width", [1, 2, 4, 8, 16, 32])
@pytest.mark.parametrize("dtype", list(SHUFFLE_TYPES))
def test_shuffles(launch, dtype, width):
    for delta, src_lane in [(1, 0), (width // 2, width - 1), (3, -1), (width - 1, 37),
                            (5, 1)]:
        values, out = run_shuffles(launch, dtype, width, delta, src_lane)
        what = f"{dtype} width={width} delta={delta} src_lane={src_lane}"
        for column, op, parameter in ((0, "idx", src_lane), (1, "down", delta),
                                      (2, "up", delta)):
            expected = shuffle_model(values, op, parameter, width)
            assert np.array_equal(out[:, column], expected), f"__shfl_{op}: {what}"
        if delta < width:
            expected = shuffle_model(values, "xor", delta, width)
            assert np.array_equal(out[:, 3], expected), f"__shfl_xor_sync: {what}"


def test_shuffle_xor_reads_earlier_segments(launch):
    values, out = run_shuffles(launch, "int32", width=8, delta=8, src_lane=0)
    assert np.array_equal(out[:, 3], shuffle_model(values, "xor", 8, 8))


# -- votes and block counts --------------------------------------------------------------


def test_votes_match_and_block_counts(launch):
    block, grid = 96, 3
    n = block * grid
    rng = np.random.default_rng(5)
    predicate = (rng.random(n) < 0.5).astype(np.int32)
    predicate[32:64] = 1           # block 0, warp 1: all true
    predicate[64:96] = 0           # block 0, warp 2: all false
    predicate[block:2 * block] = 3  # block 1: every thread true (any non-zero)
    predicate[2 * block:] = 0      # block 2: every thread false
    keys32 = (np.arange(n) % 3 - 1).astype(np.int32)  # -1, 0, 1: a negative key too
    # Same low 32 bits, different high bits: must not match.
    keys64 = ((np.arange(n) % 2).astype(np.int64) << 40) | 7
    ballot = np.zeros(n, np.uint32)
    any_all = np.zeros(2 * n, np.int32)
    match32 = np.zeros(n, np.uint32)
    match64 = np.zeros(n, np.uint32)
    counts = np.zeros(3 * n, np.int32)
    run(launch, "votes", grid, block,
        [predicate, keys32, keys64, ballot, any_all, match32, match64, counts])
    any_all, counts = any_all.reshape(-1, 2), counts.reshape(-1, 3)
    for warp in range(n // 32):
        lanes = slice(32 * warp, 32 * warp + 32)
        bits = int(sum(1 << lane for lane in range(32) if predicate[lanes][lane]))
        assert (ballot[lanes] == bits).all(), f"__ballot_sync, warp {warp}"
        assert (any_all[lanes, 0] == int(bits != 0)).all(), f"__any_sync, warp {warp}"
        assert (any_all[lanes, 1] == int(bits == FULL)).all(), f"__all_sync, warp {warp}"
        for keys, out in ((keys32, match32), (keys64, match64)):
            warp_keys = keys[lanes]
            expected = [sum(1 << j for j in range(32) if warp_keys[j] == warp_keys[lane])
                        for lane in range(32)]
            assert out[lanes].tolist() == expected, f"__match_any_sync, warp {warp}"
    for b in range(grid):
        threads = slice(block * b, block * b + block)
        true = int(np.count_nonzero(predicate[threads]))
        assert (counts[threads, 0] == true).all(), f"__syncthreads_count, block {b}"
        assert (counts[threads, 1] == int(true > 0)).all(), f"__syncthreads_or, block {b}"
        assert (counts[threads, 2] == int(true == block)).all(), f"__syncthreads_and, block {b}"


# -- atomics -----------------------------------------------------------------------------


def test_atomics_are_exact_under_contention(launch):
    grid, block, iterations, slots = 4, 128, 50, 100
    threads = grid * block
    i32 = np.zeros(1, np.int32)
    u64 = np.array([2**64 - 3 * 2**32], dtype=np.uint64)  # wraps past 2**64
    f64 = np.zeros(1, np.float64)
    imax = np.full(1, -5, np.int32)
    umax = np.zeros(1, np.uint64)
    cas_counter = np.zeros(1, np.int32)
    cas_slots = np.zeros(slots, np.int32)
    winners = np.zeros(1, np.int32)
    run(launch, "atomics", grid, block,
        [i32, u64, f64, imax, umax, cas_counter, cas_slots, np.int32(slots), winners,
         np.int32(iterations)])
    total = threads * iterations
    assert i32[0] == total, "int atomicAdd"
    expected_u64 = (2**64 - 3 * 2**32 + total * 0x100000001) % 2**64
    assert int(u64[0]) == expected_u64, "unsigned long long atomicAdd (with wrap-around)"
    assert f64[0] == total * 0.25, "double atomicAdd"
    assert cas_counter[0] == total, "atomicCAS retry loop"
    g = np.arange(threads, dtype=np.int64)
    assert imax[0] == int(np.max(g * 7919 % 100003)), "int atomicMax"
    assert int(umax[0]) == (threads - 1) << 40, "unsigned long long atomicMax"
    assert winners[0] == slots, "exactly one atomicCAS winner per slot"
    winner_ids = cas_slots - 1
    assert (winner_ids % slots == np.arange(slots)).all(), "each slot holds one of its claimants"


# -- shared memory -----------------------------------------------------------------------


def test_static_shared_is_per_block(launch):
    grid, block = 3, 128
    neighbour = np.zeros(grid * block, np.int32)
    block_sum = np.zeros(grid, np.uint32)
    run(launch, "static_shared", grid, block, [neighbour, block_sum])
    t = np.arange(block)
    for b in range(grid):
        assert (neighbour[b * block:(b + 1) * block] == b * 1000 + (t + 1) % block).all()
        assert block_sum[b] == t.sum() + b * block, f"block {b}'s __shared__ sum"


@pytest.mark.parametrize("dtype, per_thread", [("int", 3), ("double", 12)])
def test_dynamic_shared(launch, dtype, per_thread):
    grid, block = 2, 64
    np_type = np.int32 if dtype == "int" else np.float64
    shared_bytes = block * per_thread * np.dtype(np_type).itemsize  # 6 KiB for doubles
    out = np.zeros(grid * block, np_type)
    misalignment = np.full(grid, 99, np.uint64)
    run(launch, f"dynamic_shared<{dtype}>", grid, block,
        [out, misalignment, np.int32(per_thread)], shared_bytes)
    assert (misalignment == 0).all(), "MG_DYNAMIC_SHARED must be 16-byte aligned"
    n = block * per_thread
    for b in range(grid):
        buffer = b * n + np.arange(n)
        expected = [buffer[n - 1 - (t * per_thread + np.arange(per_thread))].sum()
                    for t in range(block)]
        assert np.array_equal(out[b * block:(b + 1) * block], np.array(expected, np_type))


def test_block_threads_run_concurrently(launch):
    """Thread 0 spins until the last thread sets a flag: only real threads
    finish. Fibers run one at a time between barriers (the spin would run out
    its bound), so only OS threads are asked."""
    if not launch.os_threads:
        pytest.skip("fibers run one at a time between barriers")
    flag = np.zeros(1, np.int32)
    seen = np.zeros(1, np.int32)
    run(launch, "handshake", 1, 64, [flag, seen])
    assert seen[0] == 1


# -- misuse is reported, not hung ----------------------------------------------------------


def test_early_return_before_syncthreads_is_a_deadlock(launch):
    out = np.zeros(3 * 64, np.int32)
    with pytest.raises(EmulatedKernelError) as error:
        run(launch, "early_return", 3, 64, [out, np.int32(1)])
    message = str(error.value)
    assert "early_return" in message and "block 1" in message and "deadlock" in message, message
    assert out[:64].all(), "block 0 ran to completion"
    assert not out[128:].any(), "no block runs after the failed one"


@pytest.mark.parametrize("kernel, expected", [
    pytest.param("diverged_warp", ("diverged", "block 0", "__ballot_sync", "__shfl_sync"),
                 id="diverged-warp"),
    pytest.param("partial_mask", ("0x0000ffff",), id="partial-mask"),
    pytest.param("lane_returned", ("deadlock",), id="lane-returned-before-intrinsic"),
    pytest.param("crossed_barriers", ("deadlock",), id="crossed-barriers"),
])
def test_warp_misuse_is_reported(launch, kernel, expected):
    out = np.zeros(64, np.uint32)
    with pytest.raises(EmulatedKernelError) as error:
        run(launch, kernel, 1, 64, [out])
    message = str(error.value)
    for text in (kernel, *expected):
        assert text in message, message


def test_invalid_launch_shape_is_reported(launch):
    out = np.zeros(64, np.uint32)
    for grid, block in ((1, 0), (0, 32), (1, 1025)):
        with pytest.raises(EmulatedKernelError, match="invalid launch shape"):
            run(launch, "lane_returned", grid, block, [out])


def test_launches_work_after_a_failed_one(launch):
    with pytest.raises(EmulatedKernelError):
        run(launch, "diverged_warp", 1, 64, [np.zeros(64, np.uint32)])
    neighbour = np.zeros(64, np.int32)
    block_sum = np.zeros(1, np.uint32)
    run(launch, "static_shared", 1, 64, [neighbour, block_sum])
    assert block_sum[0] == np.arange(64).sum()


# -- build_module ------------------------------------------------------------------------

TINY = r"""
#include "common.cuh"
__global__ void constant(int* out) { out[threadIdx.x] = VALUE + (int)mg::kWarpSize; }
"""


def test_build_module_cache_is_keyed_by_the_source(device, tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_GPU_CACHE_DIR", str(tmp_path))
    results = []
    for value in (1, 2, 1):
        launcher = device.build_module(f"#define VALUE {value}\n" + TINY, ["constant"])
        out = np.zeros(32, np.int32)
        run(launcher, "constant", 1, 32, [out])
        results.append(int(out[0]))
    assert results == [33, 34, 33]
    built = sorted(p.name for p in (tmp_path / "emulated").glob("*.so"))
    assert len(built) == 2 and all(name.startswith("adhoc-") for name in built), built
    with pytest.raises(KeyError):
        launcher("missing", 1, 32, [np.zeros(32, np.int32)])


def test_build_module_reports_compile_errors(device, tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_GPU_CACHE_DIR", str(tmp_path))
    with pytest.raises(EmulatedKernelError, match="compiling adhoc"):
        device.build_module("__global__ void broken(int* out) { out[0] = ; }", ["broken"])
