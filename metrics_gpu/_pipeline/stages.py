"""The stages every metric runs through, in one place.

A metric's flow reads: check the arguments and format the inputs
(:mod:`metrics_gpu._validation`) -> update a state (a backend pass) ->
compute from the state (:mod:`metrics_gpu._formulas.labels`, or its one-launch
kernel twin) -> place the result where the inputs live (:func:`output`).

Two kinds of state run through these stages:

* the label pass of the functional API: :func:`accumulate` (statistics on the
  host, plus the dense matrix) and :func:`evaluate` (every label metric of
  one pass, on the device), used by ``_classification``, ``sources``,
  ``report`` and the CLI;
* the streaming state: :class:`StreamState` (:func:`StreamState.update`:
  one kernel launch on the kernel backends, :func:`StreamState.compute`: one
  or two), used by :class:`metrics_gpu.ClassificationMetrics` and by the
  functional API's one-pass path with ``validate=False`` and K known
  (``label_report``, ``logits_report``, the scalar label metrics), so that
  a check or a formula of either exists once; a layout's later calls issue
  the launch plan its first call kept (:mod:`metrics_gpu._pipeline.planned`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from metrics_gpu._formulas import labels as F
from metrics_gpu.backends.selection import resolve_backend
from metrics_gpu._pipeline.planned import keep_plan, plan_key, planned_pass
from metrics_gpu._pipeline.stream_state import StreamState, invalid_count
from metrics_gpu._formulas.state import (
    ClassStatistics,
    use_dense_matrix,
)
from metrics_gpu._validation import (
    LabelInputs,
    check_ignore_index,
    check_label_inputs,
    check_labels_argument,
    check_num_classes,
    check_state_size,
    check_stream_batch,
    integer_weights_fit,
)


def check_label_call(y_true, y_pred, *, num_classes, sample_weight, ignore_index, validate,
                     labels=None, pos_label=None, deterministic=False,
                     names: tuple[str, str] = ("y_true", "y_pred"),
                     ) -> tuple[LabelInputs, np.ndarray | None]:
    """Check the arguments and inputs of a scikit-learn-style label function
    (``names``: what it calls its two label arguments, for the messages)."""
    extra = 0
    if labels is not None:
        host_labels = np.asarray(labels)
        if host_labels.dtype.kind in "iu" and host_labels.size:
            extra = int(host_labels.max()) + 1
    if isinstance(pos_label, (int, np.integer, np.bool_)) and pos_label >= 0:
        extra = max(extra, int(pos_label) + 1)
    inputs = check_label_inputs(
        y_true, y_pred, num_classes=num_classes, sample_weight=sample_weight,
        ignore_index=ignore_index, validate=validate,
        deterministic=deterministic, extra_classes=extra,
        allow_all_zero_weight=False,  # scikit-learn's functions reject no weight at all
        true_name=names[0], pred_name=names[1],
    )
    checked_labels = check_labels_argument(labels, inputs.num_classes, inputs.backend)
    return inputs, checked_labels


def host_counts(inputs: LabelInputs) -> F.Counts:
    stats, _ = accumulate(inputs)
    return F.Counts.from_statistics(stats, np)


def class_positions(classes: np.ndarray, num_classes: int) -> np.ndarray:
    """Map class codes to positions in ``classes``; -1 for codes not selected."""
    lut = np.full(num_classes, -1, dtype=np.intp)
    lut[classes] = np.arange(classes.size, dtype=np.intp)
    return lut


def accumulate(inputs: LabelInputs, *, class_lut=None, moments=False,
               matrix=False) -> tuple[ClassStatistics, Any]:
    """One backend pass: statistics on the host, plus the dense matrix (where the
    backend keeps it) when it is the state."""
    backend = inputs.backend
    size = inputs.num_classes if class_lut is None else int(class_lut.max(initial=-1)) + 1
    common = dict(
        num_classes=inputs.num_classes, sample_weight=inputs.sample_weight,
        ignore_index=inputs.ignore_index, class_lut=class_lut, guard=inputs.guard,
        deterministic=inputs.deterministic,
    )
    if matrix:
        check_state_size(size, matrix=True)
    if matrix or use_dense_matrix(size):
        cm, observed, invalid = backend.accumulate_confusion(
            inputs.y_true, inputs.y_pred, **common
        )
        stats = backend.statistics_from_matrix(cm, observed, invalid=invalid, moments=moments)
        return on_host(stats, backend), cm
    stats = backend.class_statistics(inputs.y_true, inputs.y_pred, moments=moments, **common)
    return on_host(stats, backend), None


@dataclass(frozen=True)
class Evaluation:
    """Every label metric of one pass, where the backend keeps it.

    ``values`` is the float64 buffer of :data:`metrics_gpu._formulas.labels.LABEL_METRIC_SLOTS`
    (then the per-class columns) over the evaluated classes: all
    ``num_classes`` codes when given (or implied by scores), else the classes
    present, as scikit-learn. Per-class arrays are indexed by class code, or
    by position in ``class_codes`` when that is set (huge K, absent classes).
    """

    values: Any
    stats: ClassStatistics
    matrix: Any
    class_codes: np.ndarray | None

    def slot(self, name: str):
        return self.values[F.SLOT[name]]


def evaluate(inputs: LabelInputs, *, moments: bool = True) -> Evaluation:
    """One accumulation pass and one metric reduction (a kernel launch each on a GPU).

    Nothing is read back to the host, except for huge K without
    ``num_classes`` when some classes are absent: their positions (for kappa)
    need the observed classes, and a second pass.
    """
    backend = inputs.backend
    common = dict(
        num_classes=inputs.num_classes, sample_weight=inputs.sample_weight,
        ignore_index=inputs.ignore_index, guard=inputs.guard,
        deterministic=inputs.deterministic,
    )
    if use_dense_matrix(inputs.num_classes):
        cm, observed, invalid = backend.accumulate_confusion(inputs.y_true, inputs.y_pred,
                                                             **common)
        values, stats = backend.label_metrics_from_matrix(
            cm, observed, selected=None if inputs.num_classes_given else observed,
            invalid=invalid, moments=moments,
        )
        return Evaluation(values, stats, cm, None)
    stats = backend.class_statistics(inputs.y_true, inputs.y_pred, moments=moments, **common)
    codes = None
    if not inputs.num_classes_given:
        observed = np.asarray(backend.to_host(stats.observed))
        if not observed.all():
            codes = np.flatnonzero(observed)
            stats = backend.class_statistics(
                inputs.y_true, inputs.y_pred, moments=moments,
                class_lut=class_positions(codes, inputs.num_classes), **common,
            )
    return Evaluation(backend.label_metrics(stats), stats, None, codes)


def reduces_on_device(inputs: LabelInputs) -> bool:
    """Kernel backends take every metric from the one-launch reduction; the
    NumPy backend evaluates only the formula it is asked for (cheaper on a CPU)."""
    return inputs.backend.reduces_on_device


def on_host(stats: ClassStatistics, backend) -> ClassStatistics:
    """The state as NumPy arrays: the formulas below run on the host.

    On the cuda backend this is the one device-to-host copy of a call (O(K)
    numbers, one sync).
    """
    if backend.xp is np:
        return stats
    fields = {name: getattr(stats, name) for name in (
        "true_positives", "support", "predicted", "total", "observed", "invalid",
        "linear_disagreement", "quadratic_disagreement", "misclassified", "negatives")}
    host: dict[str, Any] = {name: (None if value is None else backend.to_host(value))
                            for name, value in fields.items()}
    host["invalid"] = int(host["invalid"])
    return ClassStatistics(**host)




class Placement(Protocol):
    """Where a call's results go: what :func:`output` reads of its inputs
    (:class:`LabelInputs`, :class:`~metrics_gpu._validation.ScoreInputs`,
    :class:`OnePass`)."""

    @property
    def backend(self) -> Any:
        """The backend that computed."""

    @property
    def source(self) -> Any:
        """The caller's ``y_true``: results go back to its framework and device."""


def output(value, inputs: Placement):
    """A result in the input's framework and on its device (docs/gpu.md,
    "Backends"). Host backends: NumPy, a scalar as ``numpy.float64``. The cuda
    backend: CuPy arrays (torch or JAX through DLPack) on the input's device;
    a value the host computed is copied there (no sync), one from the
    reduction buffer is returned as it is."""
    if is_host_scalar(value):
        value = np.float64(value)
    backend = inputs.backend
    if backend.xp is np:
        return backend.to_framework(value, inputs.source)  # torch CPU inputs: tensors
    if isinstance(value, (np.ndarray, np.generic)):
        value = backend.asarray(np.asarray(value))
    return backend.to_framework(value, inputs.source)


def is_host_scalar(value) -> bool:
    return (isinstance(value, (float, int, np.floating, np.integer))
            or (isinstance(value, np.ndarray) and value.ndim == 0))


# -- the streaming state ----------------------------------------------------------


def keeps_matrix(option, num_classes: int) -> bool:
    """Whether a state keeps the K x K matrix for ``confusion_matrix=option``:
    "auto" while it is the dense state (K <= 2048), else as asked (a matrix
    beyond the state-size limit is refused)."""
    keep = use_dense_matrix(num_classes) if option == "auto" else bool(option)
    if keep:
        check_state_size(num_classes, matrix=True)
    return keep


# Thresholds of the binned ranking metrics: a (2, K, H) histogram.
MAX_THRESHOLDS = 1 << 16


def stream_spec(num_classes: int, *, top_k=(), n_bins: int = 0, thresholds: int = 0,
                keep_matrix: bool = False, ignore_index=None, from_logits: bool = True) -> dict:
    """What a streaming state is built for (its constant arguments)."""
    return dict(num_classes=num_classes, top_k=tuple(top_k), n_bins=n_bins,
                thresholds=thresholds, keep_matrix=keep_matrix, ignore_index=ignore_index,
                from_logits=from_logits)


def _floating(array) -> bool:
    dtype = getattr(array, "dtype", None)
    if dtype is None:
        return False
    if hasattr(array, "is_floating_point"):  # a torch tensor
        return bool(array.is_floating_point())
    return np.dtype(dtype).kind == "f" or np.dtype(dtype).name == "bfloat16"


def _integral(array) -> bool:
    dtype = getattr(array, "dtype", None)
    if dtype is None:
        return False
    if hasattr(array, "is_floating_point"):
        return not array.is_floating_point() and not array.is_complex()
    return np.dtype(dtype).kind in "iub"


class OnePass:
    """One batch through a fresh streaming state: what a functional call with
    ``validate=False`` and a known K costs on a GPU is one update launch and
    one or two compute launches, with no host sync. ``backend`` and
    ``source`` make it the ``inputs`` of :func:`output`.

    A later call of a layout passes through its launch plan instead
    (:mod:`metrics_gpu._pipeline.planned`): ``plan`` and the call's ``block``, whose
    values the plan's compute wrote already; the state over the block is
    made only when asked for.
    """

    __slots__ = ("backend", "source", "_state", "_plan", "_block", "_bytes")

    def __init__(self, state: StreamState | None, backend, source, plan=None, block=None):
        self._state, self.backend, self.source = state, backend, source
        self._plan, self._block, self._bytes = plan, block, None

    @property
    def state(self) -> StreamState:
        """The streaming state of the pass (views of the block, for a plan's)."""
        if self._state is None:
            self._state = self._plan.state(self.backend_block())
        return self._state

    def backend_block(self):
        """A plan's block as the backend's array: a torch block's view, made once."""
        block = self._bytes
        if block is None:
            plan = self._plan
            block = self._bytes = (self._block if plan.tensor_bytes is None
                                   else plan.tensor_bytes(self._block))
        return block

    def compute(self, *, labels: bool = True, scores: bool = True):
        """``(label values, score values)`` of the pass (:meth:`StreamState.compute`;
        a plan's: what it computes, None for the other)."""
        plan = self._plan
        if plan is None:
            return self.state.compute(labels=labels, scores=scores)
        block = self._bytes if self._bytes is not None else self.backend_block()
        return (None if plan.label_range is None else plan.label_values(block),
                None if plan.score_range is None else plan.score_values(block))

    def invalid(self):
        """The number of samples left out (a 0-d device value)."""
        if self._plan is not None:
            return self._plan.invalid(self.backend_block())
        return invalid_count(self.state.arrays["checks"])

    def results(self, *, labels: bool):
        """``(values, samples left out)`` in the inputs' framework: the label
        values (``labels``) or the score values, and a 0-d int64."""
        plan = self._plan
        if plan is not None:
            return plan.results(self._block, self.source)
        label_values, score_values = self.state.compute(labels=labels, scores=not labels)
        # The count as it is (output() makes host scalars float64).
        return (output(label_values if labels else score_values, self),
                self.backend.to_framework(self.invalid(), self.source))


def one_pass(y_true, y_pred, *, kind: str, num_classes=None, sample_weight=None,
             ignore_index=None, validate=True, deterministic=False, keep_matrix=False,
             top_k=(), n_bins=0, from_logits=True, pred_name="y_pred",
             computes: str | None = None) -> OnePass | None:
    """Run ``y_pred`` through the streaming update when the call allows it:
    ``validate=False``, integer targets, and K known without reading the data
    (``(N, K)`` or channel-first scores, or labels with ``num_classes``);
    ``kind="scores"`` needs scores. Returns None otherwise (the caller takes
    its usual path). Samples a check would have refused (targets or labels
    out of range, non-finite score rows, with ``from_logits=False`` rows that
    are not probabilities, negative or non-finite weights) are left out and
    counted, as :class:`metrics_gpu.ClassificationMetrics` does.

    ``computes`` (what a layout's launch plan computes after the update):
    ``"labels"`` (the label values, the default for ``kind="labels"``),
    ``"scores"`` (the score values, the default for ``kind="scores"``) or
    ``"matrix"`` (nothing: the state's matrix is the result).
    """
    if validate is not False:
        return None
    options = one_pass_options(num_classes, ignore_index, deterministic, top_k, n_bins,
                               from_logits, keep_matrix)
    computes = computes or kind
    planned = planned_pass(computes, y_true, y_pred, sample_weight, options)
    if planned is not None:  # a later call of a layout: its plan's launches, issued
        plan, block = planned
        return OnePass(None, plan.backend, y_true, plan, block)
    if not _integral(y_true):
        return None
    ndim = getattr(y_pred, "ndim", 0)
    scores = ndim >= 2 and y_pred.shape[1] > 1 and _floating(y_pred)
    labels = ndim == 1 and _integral(y_pred) and num_classes is not None
    if not (scores or (labels and kind == "labels")):
        return None
    num_classes = check_num_classes(num_classes)
    k = num_classes if num_classes is not None else int(y_pred.shape[1])
    backend = resolve_backend(y_true, y_pred, sample_weight)
    batch = check_stream_batch(y_true, y_pred, sample_weight, num_classes=k, backend=backend,
                               ignore_index=check_ignore_index(ignore_index),
                               contiguous=getattr(backend, "contiguous", None),
                               pred_name=pred_name)
    float_weights = batch.sample_weight is not None and batch.sample_weight.dtype.kind == "f"
    # Integer weights whose sums could pass 2**63 are counted in float64, as
    # the checked path counts them (a read of max|w| where the dtype cannot
    # prove it).
    as_float = float_weights or (batch.sample_weight is not None and not integer_weights_fit(
        batch.sample_weight, batch.weight_limit))
    if deterministic and as_float and backend.name != "numpy":
        return None  # fixed-point weights: the accumulation path has them
    keep_matrix = keeps_matrix(keep_matrix, k)
    spec = stream_spec(k, top_k=top_k, n_bins=n_bins, keep_matrix=keep_matrix,
                       ignore_index=check_ignore_index(ignore_index), from_logits=from_logits)
    state = StreamState(backend, spec, kind, integer=not as_float)
    state.update(batch, 0)
    if backend.name != "numpy":
        keep_plan(plan_key(computes, y_true, y_pred, sample_weight, options), state, batch,
                  (y_true, y_pred, sample_weight), computes)
    return OnePass(state, backend, y_true)


def one_pass_options(num_classes, ignore_index, deterministic, top_k=(), n_bins=0,
                     from_logits=True, keep_matrix=False) -> tuple:
    """The arguments of :func:`one_pass` that a launch plan is kept for
    (:mod:`metrics_gpu._pipeline.planned`), as its key holds them."""
    return (num_classes, ignore_index, deterministic, tuple(top_k), n_bins, from_logits,
            keep_matrix)


def planned_label_values(y_true, y_pred, sample_weight, num_classes, ignore_index,
                         deterministic):
    """The label values (:data:`metrics_gpu._formulas.labels.LABEL_METRIC_SLOTS`) of
    a ``validate=False`` call whose layout has a launch plan, in the inputs'
    framework; None when it has none (:func:`one_pass` makes it)."""
    planned = planned_pass("labels", y_true, y_pred, sample_weight,
                           one_pass_options(num_classes, ignore_index, deterministic))
    if planned is None:
        return None
    plan, block = planned
    return plan.results(block, y_true)[0]
