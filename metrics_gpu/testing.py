"""Tools for tests of code that runs in a training loop.

:func:`operation_counter` counts what a call costs on the kernel backends:
kernel launches, device allocations, and host transfers (device-to-host
copies and the syncs they imply). The counts are taken in the launch code
the ``cuda`` and ``emulated`` backends share
(:class:`metrics_gpu.backends.launchers.base.LaunchBase`), so a test on the emulated
backend, on a machine without a GPU, holds the cuda backend to the same
budget.

:func:`call_counter` counts the function calls a call makes on the host
(Python functions and built-ins alike), the device's own launch counted as
one: what a per-batch call costs before its launch, which on a GPU is the
whole of its time when the batch is small.

What is counted: every launch, allocation and read-back the shared launch
code issues itself. Operations of the array library that the launch code does
not issue (a CuPy reduction inside a functional metric, say) are not seen;
the streaming state (:class:`metrics_gpu.ClassificationMetrics`) issues none.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from metrics_gpu.backends.counting import OperationCounts, operation_counter

__all__ = ["CallCounts", "OperationCounts", "call_counter", "operation_counter"]


@dataclass
class CallCounts:
    """The function calls made inside one :func:`call_counter` block."""

    python: int = 0    # calls of Python functions
    builtin: int = 0   # calls of built-in (C) functions and methods

    @property
    def total(self) -> int:
        return self.python + self.builtin


def _device_launch_codes() -> set:
    """The code of the devices' ``launch``: below it is the device's own
    business (one driver call on a GPU; the emulator's argument marshalling
    on the CPU), counted as the one call it is."""
    from metrics_gpu.backends.cuda import CudaDevice
    from metrics_gpu.backends.emulated import EmulatedDevice

    return {CudaDevice.launch.__code__, EmulatedDevice.launch.__code__}


class call_counter:  # noqa: N801 - used as a function, like operation_counter
    """Count the function calls of this thread inside the ``with`` block
    (``sys.setprofile``), a device's kernel launch as one call; the block's
    own entry and exit are not counted.

    Not nestable, and it replaces any profile function of the thread while
    open (restored after).

    Examples
    --------
    >>> from metrics_gpu.testing import call_counter
    >>> with call_counter() as calls:
    ...     _ = len([1, 2])
    >>> calls.builtin, calls.python
    (1, 0)
    """

    def __init__(self) -> None:
        self.counts = CallCounts()
        self._launches = _device_launch_codes()
        self._inside: list = []  # the frame of the device launch being run, while it runs
        self._previous: Any = None  # the thread's profile function before the block

    def _profile(self, frame, event, arg) -> None:
        inside = self._inside
        if inside:
            if event == "return" and frame is inside[0]:
                inside.clear()
            return
        if event == "call":
            if frame.f_code is _EXIT_CODE:
                sys.setprofile(self._previous)  # the block ended: nothing more counts
                return
            self.counts.python += 1
            if frame.f_code in self._launches:
                inside.append(frame)
        elif event == "c_call":
            self.counts.builtin += 1

    def __enter__(self) -> CallCounts:
        self._previous = sys.getprofile()
        sys.setprofile(self._profile)
        return self.counts

    def __exit__(self, *exc) -> None:
        sys.setprofile(self._previous)


_EXIT_CODE = call_counter.__exit__.__code__
