"""ThreadSanitizer on the emulated kernels: races are reported, correct kernels are quiet.

``METRICS_GPU_EMULATED_SANITIZE=thread`` builds the kernels with
``-fsanitize=thread``; the process must preload libtsan (``.ci/run`` runs the
kernel tests so). The emulator declares to ThreadSanitizer what CUDA orders
(barriers, warp intrinsics, the ends of blocks) and nothing else: threads of
a block ordered by ``__syncthreads`` are not reported, threads that touch the
same memory without a barrier or an atomic are. Both ways the emulator runs a
block's threads are checked: fibers (each its own state for ThreadSanitizer,
no order at a switch) and OS threads.

Each case runs in a fresh interpreter with the preload (ThreadSanitizer cannot
be loaded into a running process) and ``halt_on_error``: a race ends it with
exit status 66 and the report on stderr. Skipped where the compiler has no
libtsan.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from metrics_gpu.backends.emulated import find_compiler

SUPPRESSIONS = Path(__file__).with_name("tsan.supp")
RACE_EXIT_STATUS = 66

# Every kernel but the last starts at a barrier, so that all 64 threads are
# running before the accesses under test (OS threads that start after another
# finished would be ordered by the worker pool's mutex, and a race between them
# not seen; fibers see it: racy_global_unsynced).
SOURCE = r"""
#include "common.cuh"

// racy_global with no barrier first: fiber 0 returns before fiber 1 starts.
__global__ void racy_global_unsynced(int* counter) {
  *counter += 1;
}

// Every thread increments one counter without an atomic: a write-write race.
__global__ void racy_global(int* counter) {
  __syncthreads();
  *counter += 1;
}

// Each thread reads the slot its neighbour writes, with no barrier between.
__global__ void racy_shared(int* out) {
  __shared__ int slot[64];
  __syncthreads();
  slot[threadIdx.x] = (int)threadIdx.x;
  out[threadIdx.x] = slot[(threadIdx.x + 1) % blockDim.x];
}

// The same two, correct: an atomic, and a barrier between write and read; and
// a warp reduction through shuffles and a block count.
__global__ void atomic_global(int* counter) {
  __syncthreads();
  atomicAdd(counter, 1);
}

__global__ void synced_shared(int* out) {
  __shared__ int slot[64];
  __syncthreads();
  slot[threadIdx.x] = (int)threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = slot[(threadIdx.x + 1) % blockDim.x];
  int total = out[threadIdx.x];
  for (int offset = 16; offset > 0; offset >>= 1)
    total += __shfl_xor_sync(mg::kFullWarp, total, offset);
  out[threadIdx.x] += __syncthreads_count(total > 0) + __ballot_sync(mg::kFullWarp, 1);
}
"""

PROGRAM = textwrap.dedent("""
    import sys
    import numpy as np
    from metrics_gpu.backends.emulated import EmulatedDevice

    kernel, os_threads = sys.argv[1], sys.argv[3] == "os-threads"
    # One library for the kernels: built by the first case, cached for the others.
    launch = EmulatedDevice().build_module(sys.argv[2], KERNELS, os_threads=os_threads)
    buffer = np.zeros(64, np.int32)
    for _ in range(3):  # a few grids: blocks run one after another
        launch(kernel, 2, 64, [buffer])
    print("finished", kernel)
""").replace("KERNELS", repr(["racy_global", "racy_shared", "atomic_global", "synced_shared",
                          "racy_global_unsynced"]))


def libtsan() -> str | None:
    """The compiler's ThreadSanitizer runtime, or None where it has none."""
    compiler = find_compiler()
    if compiler is None:
        return None
    path = subprocess.run([compiler, "-print-file-name=libtsan.so"], capture_output=True,
                          text=True).stdout.strip()
    return path if os.path.isabs(path) and os.path.exists(path) else None


def tsan_environment(runtime: str) -> dict[str, str]:
    """The variables a process needs to run the emulated kernels under ThreadSanitizer."""
    environment = dict(os.environ)
    environment.update(
        LD_PRELOAD=runtime,
        METRICS_GPU_EMULATED_SANITIZE="thread",
        TSAN_OPTIONS=f"halt_on_error=1 exitcode={RACE_EXIT_STATUS} "
                     f"report_signal_unsafe=0 suppressions={SUPPRESSIONS}",
    )
    return environment


@pytest.fixture(scope="module")
def runtime():
    path = libtsan()
    if path is None:
        pytest.skip("no C++ compiler with libtsan here")
    return path


@pytest.mark.parametrize("threads", ["fibers", "os-threads"])
@pytest.mark.parametrize("kernel, racy", [
    pytest.param("racy_global", True, id="global-counter-without-atomic"),
    pytest.param("racy_shared", True, id="shared-read-without-barrier"),
    pytest.param("racy_global_unsynced", True, id="global-counter-from-the-start"),
    pytest.param("atomic_global", False, id="atomic-counter"),
    pytest.param("synced_shared", False, id="barrier-shuffles-votes"),
])
def test_thread_sanitizer_reports_races_and_only_races(runtime, kernel, racy, threads):
    if kernel == "racy_global_unsynced" and threads == "os-threads":
        pytest.skip("OS threads started one after another are ordered by the pool's mutex")
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM, kernel, SOURCE, threads], capture_output=True, text=True,
        env=tsan_environment(runtime), timeout=300,
    )
    report = result.stdout + result.stderr
    if racy:
        assert result.returncode == RACE_EXIT_STATUS, report
        assert "ThreadSanitizer: data race" in report and kernel in report, report
    else:
        assert result.returncode == 0, report
        assert "ThreadSanitizer" not in report and f"finished {kernel}" in report, report
