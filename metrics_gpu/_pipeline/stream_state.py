"""The streaming state's arrays on one backend and the launches that update
and compute them (:class:`StreamState`), below the stages that build it
(:mod:`metrics_gpu._pipeline.stages`) and the launch plans that replay it
(:mod:`metrics_gpu._pipeline.planned`), which both read it.
"""

from __future__ import annotations

import numpy as np

from metrics_gpu._formulas import labels as F
from metrics_gpu._formulas.state import (
    ClassStatistics,
    ScoreSums,
    score_sums_size,
    stream_count_cells,
)
from metrics_gpu._validation import StreamBatch, score_dtype_eps
from metrics_gpu.backends.kernel_sources import STREAM_CHECK_SLOTS, STREAM_NO_ERROR
from metrics_gpu.backends.launchers.streaming import StreamWorkspace
from metrics_gpu.backends.numpy_backend import stream_update

def moments_as_float(words, xp):
    """Exact 128-bit kappa moments (low, high uint64 word pairs) as two float64,
    low + high * 2^64, as kernels/streaming.cu write_moments converts them."""
    words = words.astype(np.float64)
    return xp.stack([words[0] + words[1] * 2.0**64, words[2] + words[3] * 2.0**64])


# A check's first offending sample is kept as (update ordinal <<
# STREAM_ORDINAL_SHIFT) | sample (_kernels); ordinals beyond saturate.
MAX_ORDINAL = (1 << 23) - 1


def _clip_eps(batch: StreamBatch) -> float:
    """The probability clip of the batch's score type (bfloat16 read as float32)."""
    return score_dtype_eps(np.float32 if batch.score_dtype == "bfloat16"
                           else batch.score_dtype or np.float64)


class StreamState:
    """The arrays of a streaming state on one backend (see
    :mod:`metrics_gpu._streaming.metrics` for their layout) and, on a kernel backend,
    the workspace its launches use.

    ``kind`` is ``"labels"`` (labels, or the argmax of scores without score
    sums) or ``"scores"`` (the score sums too).
    """

    def __init__(self, backend, spec: dict, kind: str, integer: bool):
        self.backend, self.spec, self.kind = backend, spec, kind
        k = spec["num_classes"]
        count = np.uint64 if integer else np.float64
        zeros = backend.zeros
        arrays = {
            "counts": zeros(stream_count_cells(k), count),
            "moments": zeros(4 if integer else 2, np.uint64 if integer else np.float64),
            "checks": self.initial_checks(),
        }
        if spec["keep_matrix"]:
            arrays["matrix"] = zeros((k, k), count)
        if spec.get("num_groups"):
            # Each group's K x K matrix (ClassificationMetrics(num_groups=G)).
            arrays["groups"] = zeros((spec["num_groups"], k, k), count)
        if kind == "scores":
            arrays["scores"] = zeros(score_sums_size(len(spec["top_k"]), spec["n_bins"]),
                                     np.float64)
            if spec["thresholds"]:
                arrays["histogram"] = zeros((2, k, spec["thresholds"]), count)
        self.arrays = arrays
        self.workspace = None
        # The kernel backends keep the kappa moments as doubles beside the
        # state, written by each update's last block; a merge, sync or load
        # leaves them stale until a compute launch writes them again.
        self.moments_fresh = False
        if backend.name != "numpy":
            self.workspace = StreamWorkspace()

    @classmethod
    def over(cls, backend, spec: dict, kind: str, arrays: dict) -> StreamState:
        """A state on ``arrays`` as they are (views of a functional call's
        block, :mod:`metrics_gpu._pipeline.planned`): nothing allocated, no workspace;
        its compute is the plan's, already issued."""
        state = cls.__new__(cls)
        state.backend, state.spec, state.kind, state.arrays = backend, spec, kind, arrays
        state.workspace, state.moments_fresh = None, True
        return state

    def initial_checks(self):
        """The check slots of a state without an update: no sample left out,
        no check failed (on the state's device)."""
        checks = np.array([0, *[STREAM_NO_ERROR] * (STREAM_CHECK_SLOTS - 1)], dtype=np.uint64)
        return checks if self.backend.name == "numpy" else self.backend.upload(checks)

    @property
    def integer(self) -> bool:
        return self.arrays["counts"].dtype == np.uint64

    def clear(self) -> None:
        """Zero every count in place: memsets, and the checks' first values
        copied from a copy kept on the device (no allocation, no transfer
        after the first clear)."""
        for name, array in self.arrays.items():
            if name != "checks":
                self.backend.clear(array)
        fresh = self.__dict__.get("_fresh_checks")
        if fresh is None:
            fresh = self._fresh_checks = self.initial_checks()
        self.backend.copy_into(self.arrays["checks"], fresh)
        self.moments_fresh = False

    def promote_to_float(self) -> None:
        """Float weights reach integer counts: the counts become float64 (once),
        the exact moments their float values."""
        arrays = self.arrays
        for name in ("counts", "matrix", "histogram", "groups"):
            if name in arrays:
                arrays[name] = arrays[name].astype(np.float64)
        arrays["moments"] = moments_as_float(arrays["moments"], self.backend.xp)
        self.moments_fresh = False
        if self.workspace is not None:
            self.workspace.plans.clear()  # their launches name the integer arrays

    def update_plan(self, batch: StreamBatch):
        """The kernel backends' launch plan of ``batch``'s layout (kept in the
        workspace), for the streaming object's hot path."""
        return self.backend.stream_update_plan(self.arrays, self.workspace, batch,
                                               spec=self.spec, clip_eps=_clip_eps(batch))

    def update(self, batch: StreamBatch, ordinal: int) -> None:
        """Add one formatted batch: one launch on the kernel backends."""
        spec = self.spec
        clip_eps = _clip_eps(batch)
        ordinal = min(ordinal, MAX_ORDINAL)
        if self.backend.name == "numpy":
            stream_update(self.arrays, batch, num_classes=spec["num_classes"],
                          ignore_index=spec["ignore_index"], ordinal=ordinal,
                          from_logits=spec["from_logits"], clip_eps=clip_eps,
                          top_k=spec["top_k"], n_bins=spec["n_bins"],
                          thresholds=spec["thresholds"], binary_cut=spec.get("binary_cut"))
        else:
            self.backend.stream_update(self.arrays, self.workspace, batch, spec=spec,
                                       ordinal=ordinal, clip_eps=clip_eps)
            self.moments_fresh = True

    def compute(self, *, labels: bool = True, scores: bool = True):
        """``(label values, score values)`` (layouts of :mod:`metrics_gpu._formulas.labels`;
        None for what is not asked or not kept): on the kernel backends
        ``streaming_compute`` when score values are asked (or the moments are
        stale), then ``label_metrics_from_statistics``; nothing is read back."""
        scores = scores and self.kind == "scores"
        if self.backend.name != "numpy":
            result = self.backend.stream_compute(
                self.arrays, self.workspace, spec=self.spec, labels=labels,
                scores=scores or not self.moments_fresh)
            self.moments_fresh = True
            label_values, score_values = result
            return label_values if labels else None, score_values if scores else None
        return (self._numpy_label_values() if labels else None,
                self._numpy_score_values() if scores else None)

    def statistics(self) -> ClassStatistics:
        """The per-class counts as :class:`ClassStatistics` (views, on the state's device)."""
        k = self.spec["num_classes"]
        counts = self.arrays["counts"]
        view = counts.view(np.int64) if counts.dtype == np.uint64 else counts  # integer counts
        return ClassStatistics(true_positives=view[:k], support=view[k:2 * k],
                               predicted=view[2 * k:3 * k], total=view[3 * k],
                               observed=None, invalid=invalid_count(self.arrays["checks"]),
                               misclassified=view[3 * k + 1])

    def _numpy_label_values(self):
        moments = self.arrays["moments"]
        linear, quadratic = moments_as_float(moments, np) if self.integer else moments
        stats = self.statistics()
        stats = ClassStatistics(
            true_positives=stats.true_positives, support=stats.support,
            predicted=stats.predicted, total=stats.total,
            observed=np.ones(self.spec["num_classes"], bool), invalid=int(stats.invalid),
            linear_disagreement=np.float64(linear), quadratic_disagreement=np.float64(quadratic),
            misclassified=stats.misclassified)
        return F.label_metric_values(stats)

    def _numpy_score_values(self):
        spec = self.spec
        sums = ScoreSums(self.arrays["scores"], spec["top_k"], spec["n_bins"],
                         spec["num_classes"], spec["from_logits"])
        return F.stream_score_values(sums, self.arrays.get("histogram"))


# -- the functional API's one-pass path --------------------------------------------


def invalid_count(checks):
    """The samples a streaming state left out: the first check slot, as int64."""
    return checks[:1].view(np.int64)[0]
