"""What the kernel backends' launch code costs, counted where it is spent.

The shared launch code (:mod:`metrics_gpu.backends.launchers.base`) and the
launch plans call :func:`record` for each kernel launch, device allocation and
host transfer; :func:`operation_counter` (public as
:func:`metrics_gpu.testing.operation_counter`) opens a counter that sees them.
It lives on the backends' floor because the launch code that records is here.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["OperationCounts", "operation_counter", "record"]


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
    for counts in getattr(_local, "counters", ()):
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
