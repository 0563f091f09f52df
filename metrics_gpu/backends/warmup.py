"""``metrics-gpu warmup``: every kernel instantiation compiled for the local
GPU into the on-disk kernel cache (:mod:`metrics_gpu.backends.kernel_cache`), so that
no later process (a training job, each DDP rank, ``metrics-gpu report``)
compiles. For Docker images and cluster nodes: run it once where the GPU and
the cache directory are those the jobs will see.

What it compiles is :data:`metrics_gpu.backends.launchers.KERNEL_MODULES`,
every instantiation the backend can launch (the report's, the stream's and
the command line's among them); entries already in the cache are skipped, the
rest are compiled in parallel processes (NVRTC is CPU-bound).
"""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from metrics_gpu.backends.selection import BackendUnavailableError
from metrics_gpu.backends.kernel_cache import SWITCH_VARIABLE, KernelCache


@dataclass(frozen=True)
class WarmupResult:
    """What :func:`warmup` did."""

    instantiations: int   # every instantiation of KERNEL_MODULES
    already_cached: int   # found whole in the cache, left as they were
    compiled: int         # compiled and written by this run
    seconds: float
    jobs: int             # processes that compiled
    architecture: str     # the GPU's compute capability, as the cache keys it
    directory: Path       # the cache's folder

    def summary(self) -> str:
        return (f"{self.instantiations} kernel instantiations for compute capability "
                f"{self.architecture}: {self.already_cached} already cached, {self.compiled} "
                f"compiled in {self.seconds:.1f} s ({self.jobs} process"
                f"{'es' if self.jobs != 1 else ''}); cache: {self.directory}")


def warmup(jobs: int | None = None) -> WarmupResult:
    """Compile every kernel instantiation for the current GPU into the cache.

    ``jobs``: processes that compile (default: one per CPU core, at most one
    per missing instantiation). Raises :class:`BackendUnavailableError`
    without a usable GPU, ``ValueError`` when the cache is turned off.
    """
    from metrics_gpu.backends.cuda import cuda_unavailable_reason, kernel_cache_key
    from metrics_gpu.backends.launchers import KERNEL_MODULES

    reason = cuda_unavailable_reason()
    if reason is not None:
        raise BackendUnavailableError(
            f"warmup compiles the kernels for this machine's GPU, and the cuda backend "
            f"cannot run here: {reason}")
    cache = KernelCache.default("cuda")
    if cache.directory is None:
        raise ValueError(f"{SWITCH_VARIABLE}={os.environ.get(SWITCH_VARIABLE)} turns the "
                         "kernel cache off: warmup would have nowhere to keep the kernels")
    import cupy

    device_id = cupy.cuda.runtime.getDevice()
    architecture = str(cupy.cuda.Device(device_id).compute_capability)
    every = [(m.source, e) for m in KERNEL_MODULES for e in m.name_expressions]
    missing = [item for item in every
               if not cache.holds(kernel_cache_key(cupy, *item, architecture))]
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(missing)))
    start = time.perf_counter()
    if jobs == 1:
        compiled = _compile_share(missing, device_id, architecture)
    else:
        # Every other instantiation to each process: the heavy ones (one
        # source's) spread over all of them. Spawned: CUDA does not survive fork.
        shares = [missing[i::jobs] for i in range(jobs)]
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            compiled = sum(pool.map(_compile_share, shares, [device_id] * jobs,
                                    [architecture] * jobs))
    return WarmupResult(len(every), len(every) - len(missing), compiled,
                        time.perf_counter() - start, jobs, architecture, cache.directory)


def _compile_share(items, device_id: int, architecture: str) -> int:
    """Compile ``items`` (source, expression) into the cache; how many this
    process compiled (another may have written some meanwhile)."""
    import cupy

    from metrics_gpu.backends.cuda import compiled_instantiation

    cache = KernelCache.default("cuda")
    with cupy.cuda.Device(device_id):
        for source, expression in items:
            compiled_instantiation(cupy, cache, source, expression, architecture)
    return cache.counts.compiled
