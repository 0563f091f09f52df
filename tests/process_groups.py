"""Start the ranks of a torch.distributed test: ``torch.multiprocessing``'s
``spawn``, but forked from one fork server per test process.

A spawned rank is a new interpreter that imports torch and metrics-gpu
(seconds each on 2 cores, for every test that starts ranks). The fork server
is such an interpreter, started once, with torch, torch.distributed, NumPy and
metrics-gpu imported: each rank is a fork of it, a process of its own with
nothing of the test process (no thread of the emulator's pool, whose threads
a fork of the test process would not have, no OpenMP state of torch).
"""

from __future__ import annotations

import multiprocessing

PRELOAD = ["torch", "torch.distributed", "numpy", "sklearn.metrics", "metrics_gpu"]


def start_ranks(worker, args: tuple, nprocs: int) -> None:
    """``worker(rank, *args)`` in ``nprocs`` processes, joined; a rank's
    exception is raised here (as ``torch.multiprocessing.spawn``)."""
    import torch.multiprocessing as mp

    multiprocessing.set_forkserver_preload(PRELOAD)  # read when the server starts
    mp.start_processes(worker, args=args, nprocs=nprocs, join=True, start_method="forkserver")
