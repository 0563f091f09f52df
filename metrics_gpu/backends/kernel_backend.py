"""The backend of the ``cuda`` and ``emulated`` devices: the raw kernels of
``kernels/``, launched the same way on both.

A :class:`KernelBackend` is given a *device* (:class:`~.cuda.CudaDevice` on a
GPU, :class:`~.emulated.EmulatedDevice` on the CPU) and does everything else
the same way on both: it picks the kernel from the shape of the problem (K,
weights, the shared-memory budget), sizes the grid from the SM count,
allocates the state, launches, and returns the same state the NumPy backend
returns (:class:`~metrics_gpu._formulas.state.ClassStatistics`, or a dense matrix).

Its methods come from one launcher class per kernel source
(:mod:`metrics_gpu.backends.launchers`: each holds its source's
instantiations, kernel choice and argument packing). Every label metric of
the report comes from one launch of ``reduce_metrics.cu`` (from the matrix
or from the statistics) into one float64 buffer. Nothing here synchronises
with the host: every count stays on the device until the caller converts it.
"""

from __future__ import annotations

from metrics_gpu.backends.launchers.confusion import ConfusionLaunchers
from metrics_gpu.backends.launchers.multilabel import MultilabelLaunchers
from metrics_gpu.backends.launchers.ranking import RankingLaunchers
from metrics_gpu.backends.launchers.reduce_metrics import ReduceLaunchers
from metrics_gpu.backends.launchers.resample import ResampleLaunchers
from metrics_gpu.backends.launchers.scores import ScoreLaunchers
from metrics_gpu.backends.launchers.streaming import StreamingLaunchers


class KernelBackend(ConfusionLaunchers, ReduceLaunchers, ScoreLaunchers, RankingLaunchers,
                    StreamingLaunchers, MultilabelLaunchers, ResampleLaunchers):
    """A backend whose heavy primitives are the raw kernels of ``kernels/``."""

    # The functional API takes its metrics from one reduction launch.
    reduces_on_device = True
