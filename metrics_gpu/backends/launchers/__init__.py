"""The launchers of the CUDA kernels: one module per ``kernels/*.cu`` source.

Each module holds, for its source, the template instantiations that exist
(its ``MODULE``), the launch code that picks one (kernel choice, grid,
shared memory), and the packing of its arguments, so a kernel's interface is
read in one file. :class:`metrics_gpu.backends.kernel_backend.KernelBackend`
is made of their launcher classes; :class:`.base.LaunchBase` holds what they
share (arrays, counted launches, grid, inputs as the kernels read them).

* :mod:`.confusion`: the counting pass (dense matrix or per-class statistics);
* :mod:`.reduce_metrics`: every label metric in one launch;
* :mod:`.scores`: the fused pass over ``(N, K)`` scores;
* :mod:`.ranking`: exact ranking areas and curves;
* :mod:`.streaming`: the streaming state's update and compute;
* :mod:`.multilabel`: the multilabel state's update;
* :mod:`.resample`: the bootstrap's Poisson draws.

:data:`KERNEL_MODULES` is the one table of what gets compiled: the ``cuda``
device compiles each module's ``name_expressions``, the ``emulated`` device
exports each from its shared library, and CI compiles each with NVRTC for
every supported architecture (``tools/nvrtc_gate.py``). A ``.cu`` file
without a module here is never compiled, and CI fails on it.
"""

from __future__ import annotations

from metrics_gpu.backends.kernel_sources import KernelModule
from metrics_gpu.backends.launchers import (
    confusion,
    multilabel,
    ranking,
    reduce_metrics,
    resample,
    scores,
    streaming,
)

KERNEL_MODULES: tuple[KernelModule, ...] = (
    confusion.MODULE,
    reduce_metrics.MODULE,
    scores.MODULE,
    ranking.MODULE,
    streaming.MODULE,
    multilabel.MODULE,
    resample.MODULE,
)
