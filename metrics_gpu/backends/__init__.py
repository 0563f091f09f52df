"""The backends, and :class:`Backend`: exactly what each one supplies.

* :mod:`.numpy_backend` (``numpy``): the reference, on the host;
* :mod:`.kernel_backend`: the launch code of the CUDA kernels, shared by the
  ``cuda`` device (:mod:`.cuda`, CuPy) and the ``emulated`` one
  (:mod:`.emulated`: the same ``.cu`` sources compiled for the CPU), made of
  one launcher per kernel source (:mod:`.launchers`).

:mod:`metrics_gpu.backends.selection` chooses one per call; every stage above it
(:mod:`metrics_gpu._pipeline.stages`, the metric modules) reaches a backend only
through the members listed here. The streaming state's update and compute
are the one exception: the numpy backend's are module functions of
:mod:`.numpy_backend`, the kernel backend's take its workspace
(:class:`~.launchers.streaming.StreamWorkspace`), and :class:`metrics_gpu._pipeline.stages.StreamState`
calls each by name. ``tests/test_dispatch.py`` holds every backend to the
protocol, signatures included.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

Array = Any  # an array of the backend's namespace (NumPy or CuPy)


@runtime_checkable
class Backend(Protocol):
    """What the stages ask of a backend. Arrays are the backend's own
    (``xp``); results that leave it go through :meth:`to_host` or
    :meth:`to_framework`."""

    name: str                # "numpy", "cuda" or "emulated"
    xp: Any                  # the array namespace: numpy or cupy
    reduces_on_device: bool  # label metrics come back as one device buffer

    # -- arrays ---------------------------------------------------------------
    def asarray(self, array, dtype=None) -> Array:
        """``array`` as this backend's array (a copy only when it must move)."""

    def zeros(self, shape, dtype) -> Array:
        """A zeroed array."""

    def clear(self, array) -> None:
        """Zero ``array`` in place."""

    def copy_into(self, target, source) -> None:
        """Copy ``source`` into ``target`` (same shape) in place."""

    def to_host(self, array) -> Any:
        """A NumPy copy (on a GPU, a sync)."""

    def to_framework(self, value, like) -> Any:
        """``value`` in the framework and on the device of the caller's ``like``."""

    # -- labels -----------------------------------------------------------------
    def argmax_scores(self, scores) -> Any:
        """The row argmax of ``(N, K)`` scores, deferred to the counting pass."""

    def accumulate_confusion(self, y_true, y_pred, *, num_classes, sample_weight=None,
                             ignore_index=None, class_lut=None, guard=False,
                             deterministic=False) -> Any:
        """The dense ``(K, K)`` confusion matrix of one pass (with its checks)."""

    def class_statistics(self, y_true, y_pred, *, num_classes, sample_weight=None,
                         ignore_index=None, class_lut=None, guard=False, moments=False,
                         deterministic=False) -> Any:
        """O(K) per-class statistics of one pass (:class:`metrics_gpu._formulas.state.ClassStatistics`)."""

    def statistics_from_matrix(self, matrix, observed, *, invalid=0, moments=False) -> Any:
        """The per-class statistics of a dense matrix."""

    def label_metrics(self, stats, *, selected=None) -> Any:
        """Every label metric of ``stats`` as one float64 buffer
        (:data:`metrics_gpu._formulas.labels.LABEL_METRIC_SLOTS`)."""

    def label_metrics_from_matrix(self, matrix, observed, *, selected=None, invalid=0,
                                  moments=True) -> Any:
        """:meth:`label_metrics` of a dense matrix's statistics."""

    # -- scores -----------------------------------------------------------------
    def fused_logits_pass(self, y_true, scores, *, sample_weight=None, ignore_index=None,
                          from_logits=True, clip_eps=2.220446049250313e-16, top_k=(),
                          n_bins=0, one_vs_all=False, terms=None,
                          deterministic=False) -> Any:
        """The score metrics' sums from one read of ``(N, K)`` scores
        (:class:`metrics_gpu._formulas.state.ScoreSums`)."""

    # -- ranking ----------------------------------------------------------------
    def label_pair_summary(self, labels) -> tuple:
        """``(lowest, highest, third)``: a binary problem's classes, and
        whether a third value is present."""

    def binary_rank_areas(self, scores, is_positive, sample_weight=None,
                          max_fpr=None) -> Array:
        """``[ROC AUC, average precision]`` of one binary problem (float64)."""

    def label_rank_areas(self, scores, relevant, sample_weight=None, max_fpr=None) -> Array:
        """``(2, L)``: ``[ROC AUC, average precision]`` of each label column of
        ``(N, L)`` scores (float64)."""

    def binary_curve_points(self, scores, is_positive, sample_weight=None) -> tuple:
        """``(fps, tps, negatives_seen, positives_seen, thresholds)``, a point
        per distinct score."""

    # -- the bootstrap ------------------------------------------------------------
    def poisson_table_draws(self, counts, cells, first_replicate: int, num_replicates: int,
                            key: tuple[int, int]) -> Any:
        """Poisson(count) draws per cell and replicate, ``(cells, replicates)``
        int64, counter-based (:mod:`metrics_gpu._formulas.resample`): the same numbers
        on every backend."""
