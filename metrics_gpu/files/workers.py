"""Chunk updates on every core of a CPU: worker processes with partial states.

The NumPy backend computes in the thread that calls it, and NumPy holds
Python's global lock between (and in some of) its calls, so that threads over
the chunks of a file gain little (measured: 1.0-1.2x on 2 cores). Worker
processes do not share that lock. :class:`UpdateWorkers` forks them (each
inherits the evaluation's empty states), hands them chunks that the reader
thread has put into shared memory, and merges their states at the end: the
per-worker partial states of ``ClassificationMetrics.merge``, the same sums
as one process (integer counts exactly; float sums up to their order).

Each chunk keeps its ordinal (its position in the file), so that the first
left-out row of a file is named as one process names it. Used on Linux (fork)
for the NumPy backend, where the file holds enough values to pay for the start
(:func:`worker_count`); ``$METRICS_GPU_CPU_WORKERS`` sets the count (1: none).
"""

from __future__ import annotations

import math
import mmap
import multiprocessing
import multiprocessing.connection
import os
import sys
import traceback
from typing import Any, Callable

import numpy as np
from metrics_gpu._validation import check_int_range

WORKERS_ENVIRONMENT = "METRICS_GPU_CPU_WORKERS"
# Values (rows x columns of every input) below which one process does the
# file: a fork and a merge cost a few milliseconds, a million values about 10.
MIN_VALUES_PER_WORKER = 1 << 22
MAX_WORKERS = 1024


def available_cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def chosen_count(value: int | None, name: str, variable: str, high: int) -> int | None:
    """A count of threads or processes: ``value`` (checked as ``name``), else
    the environment's ``variable`` (checked as it), else None (the caller's
    default). Each must be a whole number in 1..``high``."""
    if value is not None:
        return check_int_range(value, name, 1, high)
    text = os.environ.get(variable, "").strip()
    if not text:
        return None
    try:
        return check_int_range(int(text), variable, 1, high)
    except ValueError:
        raise ValueError(f"{variable}={text!r}: must be a whole number, 1 to {high}") from None


def worker_count(values: int | None, workers: int | None = None) -> int:
    """Worker processes for a file of ``values`` values (None: unknown, as a
    text file's): ``workers``, else ``$METRICS_GPU_CPU_WORKERS``, else one per
    core while each has :data:`MIN_VALUES_PER_WORKER` (one for an unknown
    size); 1 means no workers (the calling process updates). 1 where there is
    no fork."""
    workers = chosen_count(workers, "workers", WORKERS_ENVIRONMENT, MAX_WORKERS)
    if not hasattr(os, "fork") or not sys.platform.startswith("linux"):
        return 1
    if workers is not None:
        return workers
    if values is None:  # a size known only at the end (text): one process
        return 1
    return max(1, min(available_cores(), values // MIN_VALUES_PER_WORKER))


def shared_empty(shape: tuple[int, ...], dtype) -> np.ndarray:
    """An array in anonymous shared memory: what the parent writes there, a
    forked worker reads (no copy, no name to clean up)."""
    dtype = np.dtype(dtype)
    size = max(1, math.prod(shape) * dtype.itemsize)
    memory = mmap.mmap(-1, size)
    return np.frombuffer(memory, dtype, math.prod(shape)).reshape(shape)


class WorkerFailed(RuntimeError):
    """A worker process ended without its result (killed, or out of memory)."""


class UpdateWorkers:
    """``workers`` forked processes that run ``apply(i, rows, ordinal, first_row)``
    on the buffer set ``i`` the parent names, and ``finish()`` once at the end, whose
    value (picklable) :meth:`close` returns, one per worker.

    The parent :meth:`submit` s a filled set and waits in :meth:`completed`
    for the sets a worker is done with (to hand them back to the reader).
    A worker's exception is raised in the parent, as it was raised.
    """

    def __init__(self, workers: int, apply: Callable[[int, int, int, int], None],
                 finish: Callable[[], Any]):
        context = multiprocessing.get_context("fork")
        self.tasks = context.SimpleQueue()
        self.results = context.SimpleQueue()
        self.processes = [context.Process(target=_work, name=f"metrics-gpu-worker-{i}",
                                          args=(self.tasks, self.results, apply, finish),
                                          daemon=True) for i in range(workers)]
        for process in self.processes:
            process.start()
        self.in_flight = 0

    def submit(self, i: int, rows: int, ordinal: int, first_row: int) -> None:
        self.tasks.put((i, rows, ordinal, first_row))
        self.in_flight += 1

    def completed(self, block: bool) -> list[tuple[int, int]]:
        """``(set, rows)`` of the chunks done: waits for one when ``block``."""
        done = []
        while self.in_flight and (block or self._ready(0)):
            kind, *payload = self._get()
            if kind != "done":
                raise RuntimeError(f"a worker answered {kind!r} to a chunk")
            done.append(tuple(payload))
            self.in_flight -= 1
            block = False
        return done

    def close(self) -> list[Any]:
        """Every worker's ``finish()`` (after the chunks in flight)."""
        while self.in_flight:
            self.completed(block=True)
        for _ in self.processes:
            self.tasks.put(None)
        results = []
        for _ in self.processes:
            kind, *payload = self._get()
            if kind != "finished":
                raise RuntimeError(f"a worker answered {kind!r} at the end")
            results.append(payload[0])
        for process in self.processes:
            process.join()
        return results

    def terminate(self) -> None:
        """Stop every worker now (the parent is leaving on an error)."""
        for process in self.processes:
            if process.is_alive():
                process.terminate()
        for process in self.processes:
            process.join()

    def _ready(self, timeout: float | None) -> bool:
        reader = self.results._reader  # type: ignore[attr-defined]
        return bool(multiprocessing.connection.wait([reader], timeout))

    def _get(self) -> tuple:
        reader = self.results._reader  # type: ignore[attr-defined]
        while True:
            sentinels = [p.sentinel for p in self.processes]
            ready = multiprocessing.connection.wait([reader, *sentinels])
            if reader in ready:
                message = self.results.get()
                if message[0] == "error":
                    error, text = message[1], message[2]
                    if isinstance(error, BaseException):
                        raise error
                    raise RuntimeError(f"a worker failed:\n{text}")
                return message
            dead = [p for p in self.processes if p.sentinel in ready and p.exitcode]
            if dead:
                raise WorkerFailed(f"worker process {dead[0].name} ended with exit code "
                                   f"{dead[0].exitcode} (out of memory, or killed)")


# glibc's mallopt parameters (malloc.h).
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
# A chunk's temporaries (a few arrays of its rows, up to tens of MB) from the
# heap, kept between chunks: by default glibc maps each large array afresh and
# returns the heap's top to the system, so that every chunk faults its pages
# in again (measured: 8 ns a row of system time, 10% of the update).
ALLOCATOR_SETTINGS = ((M_MMAP_THRESHOLD, 32 << 20), (M_TRIM_THRESHOLD, 1 << 30),
                      (M_TOP_PAD, 64 << 20))


def _keep_heap() -> None:
    """In a worker (this process only): :data:`ALLOCATOR_SETTINGS`, where the C
    library is glibc (elsewhere nothing)."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return
    for parameter, value in ALLOCATOR_SETTINGS:
        mallopt(parameter, value)


def _work(tasks, results, apply, finish) -> None:
    """A worker's loop: chunks until None, then its finish()."""
    _keep_heap()
    while True:
        task = tasks.get()
        try:
            if task is None:
                results.put(("finished", finish()))
                return
            i, rows, ordinal, first_row = task
            apply(i, rows, ordinal, first_row)
            results.put(("done", i, rows))
        except BaseException as error:  # handed to the parent, raised there
            try:
                results.put(("error", error, traceback.format_exc()))
            except Exception:  # an error that does not pickle: its text
                results.put(("error", None, traceback.format_exc()))
            return
