"""Tools for tests of code that runs in a training loop.

:func:`operation_counter` counts what a call costs on the kernel backends:
kernel launches, device allocations, and host transfers (device-to-host
copies and the syncs they imply). The counts are taken in the launch code
the ``cuda`` and ``emulated`` backends share
(:class:`metrics_gpu.backends.launchers.base.LaunchBase`), so a test on the emulated
backend, on a machine without a GPU, holds the cuda backend to the same
budget.

What is counted: every launch, allocation and read-back the shared launch
code issues itself. Operations of the array library that the launch code does
not issue (a CuPy reduction inside a functional metric, say) are not seen;
the streaming state (:class:`metrics_gpu.ClassificationMetrics`) issues none.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["OperationCounts", "operation_counter"]


@dataclass
class OperationCounts:
    """What the calls inside one :func:`operation_counter` block cost."""

    launches: int = 0
    device_allocations: int = 0
    host_transfers: int = 0


_local = threading.local()


def _counters() -> list[OperationCounts]:
    counters = getattr(_local, "counters", None)
    if counters is None:
        counters = _local.counters = []
    return counters


def record(*, launches: int = 0, device_allocations: int = 0, host_transfers: int = 0) -> None:
    """Add to every counter open in this thread (the launch code calls this)."""
    for counts in _counters():
        counts.launches += launches
        counts.device_allocations += device_allocations
        counts.host_transfers += host_transfers


@contextlib.contextmanager
def operation_counter() -> Iterator[OperationCounts]:
    """Count launches, device allocations and host transfers of the calls inside.

    Counters nest, and each thread counts its own calls.

    Examples
    --------
    >>> import numpy as np
    >>> import metrics_gpu
    >>> from metrics_gpu.testing import operation_counter
    >>> with metrics_gpu.use_backend("numpy"), operation_counter() as counts:
    ...     _ = metrics_gpu.accuracy_score(np.array([0, 1]), np.array([0, 1]))
    >>> counts.launches  # the numpy backend launches nothing
    0
    """
    counts = OperationCounts()
    counters = _counters()
    counters.append(counts)
    try:
        yield counts
    finally:
        counters.remove(counts)
