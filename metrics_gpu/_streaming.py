"""In-loop validation: a streaming state that adds batches and computes every
metric at the end, as a training loop needs it.

:class:`ClassificationMetrics` keeps one state per object, on the device of
its first update (NumPy arrays on the host backends, CuPy arrays on a GPU):

* ``counts``: per-class true positives, support, predicted counts and the
  total (3K + 1 cells; uint64 for counts and integer weights, float64 for
  float weights), and ``moments``, the weighted-kappa disagreement sums
  (exact 128-bit words, or two float64);
* ``matrix``: the K x K confusion matrix, while K <= 2048 (or as asked);
* ``scores``: the sums of the fused score pass (kernels/scores.cu layout:
  :data:`metrics_gpu._state.SCORE_SLOTS`, top-k hits, calibration bins);
* ``histogram``: with ``thresholds=H``, each class's probability histogram
  (2, K, H), rows whose target is k then the others (binned ROC AUC, AP);
* ``checks``: samples left out, and the first offending sample of each kind
  (target, prediction, weight) as ``(update ordinal << 40) | sample``.

Every state array adds (``checks`` takes the minimum of its keys), so merge
and distributed sync are one rule for all. On the kernel backends an update
is one launch of ``kernels/streaming.cu`` with no host sync and, after the
first batch of a shape, no allocation; ``compute()`` is two launches. The
NumPy backend runs the reference of the same update
(:func:`metrics_gpu.backends.numpy_backend.stream_update`).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from metrics_gpu import _formulas as F
from metrics_gpu._backend import caller_stream, get_backend_implementation, resolve_backend
from metrics_gpu._kernels import STREAM_NO_ERROR, STREAM_ORDINAL_SHIFT
from metrics_gpu._stages import (
    StreamState,
    keeps_matrix,
    moments_as_float,
    stream_spec,
)
from metrics_gpu._validation import (
    MAX_BINS,
    check_bool,
    check_confusion_matrix_option,
    check_ignore_index,
    check_int_range,
    check_num_classes,
    check_stream_batch,
    check_top_k,
)

SCORE_KINDS = ("logits", "probabilities")
VALIDATE_MODES = ("deferred", "eager", False)
# Thresholds of the binned ranking metrics: a (2, K, H) histogram.
MAX_THRESHOLDS = 1 << 16
CHECKED = ("y_true", "preds", "sample_weight")
STATE_VERSION = 1


class ClassificationMetrics:
    """Every classification metric of a stream of batches: update per batch,
    compute at the end, reset (the torchmetrics way).

    Parameters
    ----------
    num_classes : int
        K: targets and label predictions are class codes 0..K-1.
    top_k : int or sequence of int, default (1, 5)
        Top-k accuracies reported from score batches (at most 8 values).
    n_bins : int, default 15
        Equal-width calibration bins of the top-class probability (ECE, MCE).
    thresholds : int, optional
        H: keep a ``(2, K, H)`` histogram of each class's probability, for the
        binned ROC AUC (binary, one-vs-rest macro / weighted / micro) and
        average precision, in O(K H) memory. The error against the exact
        values of the same scores is reported with them
        (``roc_auc_error_bound``, ``average_precision_error_bound``): for one
        class, |AUC - exact| <= sum_b P_b N_b / (2 P N) and
        |AP - exact| <= sum_b (P_b / P) (P_b + N_b) / (count at or above bin b),
        with P_b, N_b the positives and negatives in bin b; the bounds of the
        averages are the means of the per-class bounds.
    confusion_matrix : {"auto", True, False}, default "auto"
        Keep the K x K matrix: "auto" while K <= 2048. The label metrics never
        need it (they come from O(K) per-class counts).
    ignore_index : int, optional
        Samples with this target are left out (padding, void pixels).
    validate : {"deferred", "eager", False}, default "deferred"
        "deferred": every check runs inside the update pass (no sync) and
        ``compute()`` raises ``ValueError`` naming the argument, the update
        call (its ordinal, from 0) and the first offending sample. "eager":
        ``update`` checks first and raises before adding anything (a few host
        syncs on a GPU). False: no error; bad samples are left out and
        counted (``report.invalid``). In every mode a bad sample adds nothing
        to the state.
    deterministic : bool, default False
        Bit-identical results run to run on a GPU. Counts, integer weights and
        score sums (per-block partials added in block order) are always; float
        weights go through float64 atomics, so with ``deterministic=True``
        they are refused on the kernel backends (pass integer weights).
    scores : {"logits", "probabilities"}, default "logits"
        What ``(N, K)`` predictions are.

    The first update fixes the state's device and kind: labels ``(N,)`` give
    the label metrics; scores ``(N, K)`` or channel-first ``(N, K, d1, ...)``
    (every position a sample, with targets ``(N, d1, ...)``) give the score
    metrics too. Results come back in the framework of the first update's
    ``y_true`` (torch tensors for torch inputs, on CPU or GPU).

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import ClassificationMetrics
    >>> metrics = ClassificationMetrics(3, top_k=(1, 2), n_bins=5)
    >>> for logits, y in [(np.array([[2.0, 0.1, 0.3], [0.2, 1.5, 0.1]]), np.array([0, 2])),
    ...                   (np.array([[0.1, 0.2, 3.0]]), np.array([2]))]:
    ...     metrics.update(y, logits)
    >>> report = metrics.compute()
    >>> round(float(report["accuracy"]), 4), round(float(report["top_2_accuracy"]), 4)
    (0.6667, 0.6667)
    >>> metrics.reset()
    """

    def __init__(self, num_classes, *, top_k=(1, 5), n_bins=15, thresholds=None,
                 confusion_matrix="auto", ignore_index=None, validate="deferred",
                 deterministic=False, scores="logits"):
        num_classes = check_num_classes(num_classes)
        if num_classes is None:
            raise ValueError("num_classes is required: the state is sized by it")
        confusion_matrix = check_confusion_matrix_option(confusion_matrix)
        if not (validate is False or validate in ("deferred", "eager")):
            raise ValueError(f"validate must be one of {VALIDATE_MODES}, got {validate!r}")
        deterministic = check_bool(deterministic, "deterministic")
        if scores not in SCORE_KINDS:
            raise ValueError(f"scores must be one of {SCORE_KINDS}, got {scores!r}")
        keep_matrix = keeps_matrix(confusion_matrix, num_classes)
        self._spec = stream_spec(
            num_classes, top_k=check_top_k(top_k, allow_empty=True),
            n_bins=check_int_range(n_bins, "n_bins", 1, MAX_BINS),
            thresholds=check_int_range(thresholds, "thresholds", 2, MAX_THRESHOLDS,
                                       allow_none=True),
            keep_matrix=keep_matrix, ignore_index=check_ignore_index(ignore_index),
            from_logits=scores == "logits",
        )
        self.validate = validate
        self.deterministic = deterministic
        self.scores = scores
        self.reset()

    # -- state ------------------------------------------------------------------

    @property
    def num_classes(self) -> int:
        return self._spec["num_classes"]

    def reset(self) -> None:
        """Forget every update. The state's buffers, device and kind stay and are
        zeroed in place (memsets: the next epoch's updates allocate nothing)."""
        self._updates = 0
        if getattr(self, "_state", None) is not None:
            self._state.clear()
            return
        self._state: StreamState | None = None
        self._backend = None
        self._like = None

    def _allocate(self, kind: str, integer: bool) -> None:
        self._state = StreamState(self._backend, self._spec, kind, integer)

    @property
    def _kind(self) -> str | None:
        return None if self._state is None else self._state.kind

    # -- update -----------------------------------------------------------------

    def update(self, y_true, preds, sample_weight=None) -> None:
        """Add a batch: targets ``y_true`` and labels ``(N,)`` or scores
        ``(N, K)`` / ``(N, K, d1, ...)`` ``preds``; numpy, torch (CPU or CUDA,
        requiring grad or not), CuPy or JAX arrays. On a GPU: one kernel
        launch on the caller's stream, no host sync."""
        if self._backend is None:
            self._backend = resolve_backend(y_true, preds, sample_weight)
            self._like = y_true
        with caller_stream(y_true):
            self._update(y_true, preds, sample_weight)

    def _update(self, y_true, preds, sample_weight) -> None:
        backend, spec = self._backend, self._spec
        batch = check_stream_batch(
            y_true, preds, sample_weight, num_classes=self.num_classes, backend=backend,
            ignore_index=spec["ignore_index"], eager=self.validate == "eager",
            contiguous=getattr(backend, "contiguous", None))
        kind = "scores" if batch.scores else "labels"
        float_weights = batch.sample_weight is not None and batch.sample_weight.dtype.kind == "f"
        if float_weights and self.deterministic and backend.name != "numpy":
            raise ValueError(
                "sample_weight: float weights are summed with float64 atomics on the kernel "
                "backends, which deterministic=True rules out; pass integer weights, or "
                "deterministic=False")
        if self._state is None:
            self._allocate(kind, integer=not float_weights)
        elif kind != self._kind:
            raise ValueError(
                f"preds: this state holds {self._kind} (set by its first update), got "
                f"{'(N, K) scores' if batch.scores else '(N,) labels'}; use one "
                "ClassificationMetrics per kind of prediction")
        elif float_weights and self._state.integer:
            self._state.promote_to_float()
        self._state.update(batch, self._updates)
        self._updates += 1

    # -- compute ----------------------------------------------------------------

    def first_invalid(self) -> tuple[str, int, int, str, int] | None:
        """The first bad sample added, or None: ``(argument, update call, sample,
        problem, samples left out in all)``; argument is ``"y_true"``,
        ``"preds"`` or ``"sample_weight"``, the update call counts from 0 and
        the sample is its index in that call's batch (one host read)."""
        if self._state is None:
            return None
        checks = np.asarray(self._backend.to_host(self._state.arrays["checks"]))
        invalid = int(checks[0])
        if not invalid:
            return None
        k = self.num_classes
        problems = {
            "y_true": f"a target outside 0..{k - 1} (num_classes={k})",
            "preds": (f"a prediction outside 0..{k - 1}" if self._kind == "labels"
                      else "a row of scores with a NaN or an infinity"),
            "sample_weight": "a negative or non-finite weight",
        }
        found = [(int(key), name) for name, key in zip(CHECKED, checks[1:])
                 if int(key) != STREAM_NO_ERROR]
        key, name = min(found)
        return (name, key >> STREAM_ORDINAL_SHIFT, key & ((1 << STREAM_ORDINAL_SHIFT) - 1), problems[name],
                invalid)

    def _raise_deferred(self) -> None:
        """The first offending sample of each kind, as a ValueError (deferred mode)."""
        first = self.first_invalid()
        if first is None:
            return
        name, call, sample, problem, invalid = first
        raise ValueError(
            f"{name} of update call {call} (counting from 0) holds "
            f"{problem} at sample {sample}; {invalid} "
            "sample(s) were left out in all. The state holds the valid samples only: "
            "reset() to start again, or build it with validate=False to report them as "
            "invalid instead"
        )

    def compute(self) -> StreamingReport:
        """Every metric the state supports, as one :class:`StreamingReport`.

        On the kernel backends at most two launches (one for a state of
        labels), whose values stay on the device until read; with
        ``validate="deferred"`` the four check numbers are read back (one
        sync) to raise for bad input.
        """
        if self._state is None:
            raise ValueError("compute() before any update: there is nothing to report")
        if self.validate == "deferred":
            self._raise_deferred()
        with caller_stream(self._like):
            label_values, score_values = self._state.compute()
        return StreamingReport(self, label_values, score_values)

    # -- combining states ---------------------------------------------------------

    def merge(self, other: ClassificationMetrics) -> None:
        """Add ``other``'s state to this one (the state of both streams together)."""
        if not isinstance(other, ClassificationMetrics) or other._spec != self._spec:
            raise ValueError("other must be a ClassificationMetrics built with the same arguments")
        if other._state is None:
            return
        if self._state is None:
            self._backend, self._like = other._backend, other._like
            self._allocate(other._kind, other._state.integer)
        if other._kind != self._kind:
            raise ValueError(f"cannot merge a state of {other._kind} into one of {self._kind}")
        theirs = {name: _to_numpy(value) for name, value in other._state.arrays.items()}
        if self._state.integer and not other._state.integer:
            self._state.promote_to_float()
        elif other._state.integer and not self._state.integer:
            theirs = _float_arrays(theirs)
        xp = self._backend.xp
        for name, mine in self._state.arrays.items():
            value = self._backend.asarray(theirs[name])
            if name == "checks":
                mine[:1] += value[:1]
                mine[1:] = xp.minimum(mine[1:], value[1:])
            elif name == "moments" and mine.dtype == np.uint64:
                _add_words(mine, value)
            else:
                mine += value
        self._state.moments_fresh = False
        self._updates += other._updates

    def state_dict(self) -> dict[str, Any]:
        """The state as plain arrays (torch tensors for torch inputs, so that
        ``torch.save`` holds it), with the arguments it was built with."""
        out: dict[str, Any] = {"version": STATE_VERSION, "spec": dict(self._spec),
                               "kind": self._kind, "updates": self._updates}
        if self._state is not None:
            for name, value in self._state.arrays.items():
                if value.dtype == np.uint64:
                    value = value.view(np.int64)  # torch has no uint64 arithmetic
                out[name] = self._backend.to_framework(value, self._like)
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` (onto this object's device, or the
        host when it has none yet)."""
        if state.get("version") != STATE_VERSION or dict(state.get("spec", {})) != self._spec:
            raise ValueError("state: not a state_dict of a ClassificationMetrics with these "
                             "arguments")
        if state["kind"] is None:
            self._state, self._updates = None, 0
            return
        if self._backend is None:
            self._backend = get_backend_implementation("numpy")
        self._load_arrays(state)

    def _load_arrays(self, snapshot) -> None:
        arrays = {name: _to_numpy(snapshot[name]) for name in snapshot
                  if name not in ("version", "spec", "kind", "updates")}
        integer = arrays["counts"].dtype.kind in "iu"
        self._allocate(snapshot["kind"], integer)
        for name, mine in self._state.arrays.items():
            value = arrays[name].view(np.uint64) if mine.dtype == np.uint64 else arrays[name]
            mine[...] = self._backend.asarray(value)
        self._updates = int(snapshot["updates"])

    def sync(self, group=None) -> None:
        """All-reduce the state over ``torch.distributed`` (when it is
        initialised; else nothing): SUM of every count and sum (integer counts
        stay exact: they are reduced as int64, the 128-bit moments by 32-bit
        halves), MIN of the check keys. Every rank must call it; a rank
        without any update contributes zeros."""
        torch = sys.modules.get("torch")
        if torch is None or not torch.distributed.is_available() or \
                not torch.distributed.is_initialized():
            return
        dist = torch.distributed
        kinds = [None] * dist.get_world_size(group)
        integer = None if self._state is None else self._state.integer
        dist.all_gather_object(kinds, (self._kind, integer), group=group)
        kind = next((k for k, _ in kinds if k is not None), None)
        if kind is None:
            return
        any_float = any(i is False for _, i in kinds)
        if self._state is None:
            if self._backend is None:
                self._backend = get_backend_implementation("numpy")
            self._allocate(kind, not any_float)
        elif any_float and self._state.integer:
            self._state.promote_to_float()
        for name, value in self._state.arrays.items():
            tensor = _as_torch(value.view(np.int64) if value.dtype == np.uint64 else value)
            if name == "checks":
                dist.all_reduce(tensor[:1], op=dist.ReduceOp.SUM, group=group)
                dist.all_reduce(tensor[1:], op=dist.ReduceOp.MIN, group=group)
            elif name == "moments" and value.dtype == np.uint64:
                _all_reduce_words(tensor, dist, group)
            else:
                dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
        self._state.moments_fresh = False
        updates = torch.tensor([self._updates], dtype=torch.int64)
        dist.all_reduce(updates, group=group)
        self._updates = int(updates[0])

    def to(self, device) -> ClassificationMetrics:
        """Move the state: ``"cpu"`` / ``"numpy"`` to the host (NumPy backend),
        ``"cuda"`` (or a torch device / index) to the current GPU."""
        name = str(getattr(device, "type", device))
        if name.startswith("cuda") or isinstance(device, int):
            target = get_backend_implementation("cuda")
        elif name in ("cpu", "numpy"):
            target = get_backend_implementation("numpy")
        else:
            raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
        snapshot = self.state_dict() if self._state is not None else None
        self._backend = target
        if snapshot is not None:
            self._load_arrays(snapshot)
        return self

    def __repr__(self) -> str:
        where = "empty" if self._state is None else f"{self._kind} on {self._backend.name}"
        return (f"ClassificationMetrics(num_classes={self.num_classes}, updates={self._updates}, "
                f"{where})")


def _to_numpy(value):
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if hasattr(value, "get") and not isinstance(value, np.ndarray):
        return value.get()
    return np.asarray(value)


def _float_arrays(arrays: dict) -> dict:
    """Host arrays of an integer state as a float state's (exact moments as floats)."""
    out = dict(arrays)
    out["moments"] = moments_as_float(arrays["moments"], np)
    for name in ("counts", "matrix", "histogram"):
        if name in out:
            out[name] = out[name].astype(np.float64)
    return out


def _as_torch(array):
    """A state array as a torch tensor sharing its memory (host or device)."""
    import torch

    if isinstance(array, np.ndarray):
        return torch.from_numpy(array)
    return torch.from_dlpack(array)


def _add_words(mine, theirs) -> None:
    """128-bit sums held as (low, high) uint64 word pairs: mine += theirs."""
    for i in (0, 2):
        low = mine[i:i + 1] + theirs[i:i + 1]          # wraps modulo 2^64
        carry = (low < mine[i:i + 1]).astype(np.uint64)
        mine[i + 1:i + 2] += theirs[i + 1:i + 2] + carry
        mine[i:i + 1] = low


def _all_reduce_words(tensor, dist, group) -> None:
    """Sum 128-bit (low, high) words over ranks exactly: the low words are
    split into 32-bit halves (no int64 sum of them can overflow for fewer
    than 2^31 ranks), summed, and carried into the high words."""
    import torch

    words = tensor.cpu().numpy().view(np.uint64).copy()
    parts = torch.tensor([int(words[i]) & 0xFFFFFFFF for i in (0, 2)]
                         + [int(words[i]) >> 32 for i in (0, 2)]
                         + [int(np.int64(words[i].view(np.int64))) for i in (1, 3)],
                         dtype=torch.int64)
    if tensor.is_cuda:
        parts = parts.to(tensor.device)
    dist.all_reduce(parts, group=group)
    parts = [int(v) for v in parts.cpu().tolist()]
    for j, i in enumerate((0, 2)):
        value = parts[j] + (parts[2 + j] << 32) + ((parts[4 + j] % (1 << 64)) << 64)
        value %= 1 << 128
        words[i], words[i + 1] = value & ((1 << 64) - 1), value >> 64
    tensor.copy_(torch.from_numpy(words.view(np.int64)).to(tensor.device))


class StreamingReport:
    """Every metric of a :class:`ClassificationMetrics` state.

    ``report[name]`` (and ``report.metrics``) gives each scalar metric in the
    framework of the state's inputs, without a host sync (0-d CuPy arrays or
    torch tensors on a GPU; NumPy scalars or torch CPU tensors on the host):
    the label metrics of :data:`metrics_gpu.REPORT_METRICS`, and for score
    states ``cross_entropy``, ``perplexity``, ``brier_score``, ``hinge_loss``,
    ``top_{k}_accuracy``, ``expected_calibration_error``,
    ``max_calibration_error`` and, with thresholds, the binned ``roc_auc`` /
    ``average_precision`` (``_macro``, ``_weighted``, ``_micro``,
    ``_error_bound``). ``per_class``, ``calibration`` and
    ``confusion_matrix`` hold the arrays; :meth:`to_dict` reads everything
    back as Python numbers.
    """

    def __init__(self, metrics: ClassificationMetrics, label_values, score_values):
        self._backend = metrics._backend
        self._like = metrics._like
        self._spec = metrics._spec
        self._kind = metrics._kind
        self._label_values = label_values
        self._score_values = score_values
        state = metrics._state.arrays
        k = metrics.num_classes
        counts = state["counts"]
        self._support = (counts.view(np.int64) if counts.dtype == np.uint64 else counts)[k:2 * k]
        matrix = state.get("matrix")
        self._matrix = None if matrix is None else (
            matrix.view(np.int64) if matrix.dtype == np.uint64 else matrix).copy()
        self._checks = state["checks"]
        self._histogram = None if "histogram" not in state else state["histogram"].copy()

    def _out(self, value):
        return self._backend.to_framework(value, self._like)

    @property
    def metrics(self) -> dict[str, Any]:
        """Every scalar metric by name (values in the inputs' framework)."""
        out = {row.name: self._out(self._label_values[F.SLOT[row.name]])
               for row in F.REPORT_METRICS}
        if self._kind != "scores":
            return out
        values = self._score_values
        for name in ("cross_entropy", "perplexity", "brier_score", "hinge_loss"):
            out[name] = self._out(values[F.STREAM_SLOT[name]])
        head = len(F.STREAM_SCORE_SLOTS)
        for i, k in enumerate(self._spec["top_k"]):
            out[f"top_{k}_accuracy"] = self._out(values[head + i])
        out["expected_calibration_error"] = self._out(
            values[F.STREAM_SLOT["expected_calibration_error"]])
        out["max_calibration_error"] = self._out(values[F.STREAM_SLOT["max_calibration_error"]])
        if self._spec["thresholds"]:
            for name in F.STREAM_SCORE_SLOTS[F.STREAM_SLOT["roc_auc"]:]:
                out[name] = self._out(values[F.STREAM_SLOT[name]])
        return out

    def __getitem__(self, name: str):
        metrics = self.metrics
        if name not in metrics:
            raise KeyError(f"{name!r} is not a metric of this report; it has {sorted(metrics)}")
        return metrics[name]

    def keys(self):
        return self.metrics.keys()

    @property
    def total(self):
        """Counted samples (the sum of their weights when weighted)."""
        return self._out(self._label_values[F.SLOT["total"]])

    @property
    def invalid(self):
        """Samples left out (bad targets, predictions, scores or weights)."""
        return self._out(self._checks[:1].view(np.int64)[0])

    @property
    def per_class(self) -> dict[str, Any]:
        """Per-class arrays (K each): precision, recall, f1, specificity,
        jaccard, support, and with thresholds roc_auc and average_precision."""
        k = self._spec["num_classes"]
        columns = F.label_metric_columns(self._label_values, k)
        out = {name: self._out(columns[i]) for i, name in enumerate(F.LABEL_METRIC_COLUMNS)}
        out["support"] = self._out(self._support)
        if self._kind == "scores" and self._spec["thresholds"]:
            head = (len(F.STREAM_SCORE_SLOTS) + len(self._spec["top_k"])
                    + 3 * self._spec["n_bins"])
            out["roc_auc"] = self._out(self._score_values[head:head + k])
            out["average_precision"] = self._out(self._score_values[head + k:head + 2 * k])
        return out

    @property
    def calibration(self) -> dict[str, Any] | None:
        """Per calibration bin: proportion of the weight, mean confidence, accuracy."""
        if self._kind != "scores":
            return None
        b = self._spec["n_bins"]
        head = len(F.STREAM_SCORE_SLOTS) + len(self._spec["top_k"])
        values = self._score_values
        return {name: self._out(values[head + i * b:head + (i + 1) * b])
                for i, name in enumerate(("proportion", "confidence", "accuracy"))}

    @property
    def confusion_matrix(self):
        """The K x K matrix (rows actual, columns predicted), or None when not kept."""
        return None if self._matrix is None else self._out(self._matrix)

    def to_dict(self) -> dict[str, Any]:
        """Every value as Python numbers (one read-back)."""
        def plain(value):
            return np.asarray(_to_numpy(value)).tolist()

        out = {"total": plain(self.total), "invalid": plain(self.invalid),
               "metrics": {name: plain(v) for name, v in self.metrics.items()},
               "per_class": {name: plain(v) for name, v in self.per_class.items()}}
        if self.calibration is not None:
            out["calibration"] = {name: plain(v) for name, v in self.calibration.items()}
        out["confusion_matrix"] = (None if self._matrix is None
                                   else plain(self.confusion_matrix))
        return out

    def __repr__(self) -> str:
        return f"StreamingReport({self._kind}, num_classes={self._spec['num_classes']})"

    # -- pictures (metrics_gpu.plot, the [plot] extra) ----------------------------------

    def plot_confusion_matrix(self, ax=None, normalize=None, max_classes=20, **kwargs):
        """Draw the confusion matrix (:func:`metrics_gpu.plot.plot_confusion_matrix`;
        ``kwargs`` go to it). Returns the matplotlib Axes. Raises ``ValueError``
        when the state kept no matrix."""
        from metrics_gpu.plot import plot_confusion_matrix

        if self._matrix is None:
            raise ValueError("confusion_matrix: this state kept no K x K matrix; build "
                             "ClassificationMetrics with confusion_matrix=True")
        return plot_confusion_matrix(_to_numpy(self._matrix), ax=ax, normalize=normalize,
                                     max_classes=max_classes, **kwargs)

    def plot_reliability(self, ax=None, **kwargs):
        """Draw the reliability diagram of the calibration bins, with the
        expected calibration error (:func:`metrics_gpu.plot.plot_reliability`;
        ``kwargs`` go to it). Returns the matplotlib Axes. States of scores only."""
        from metrics_gpu.plot import plot_reliability

        if self._kind != "scores":
            raise ValueError("preds: a reliability diagram needs a state of (N, K) scores; "
                             "this one holds labels")
        bins = {name: _to_numpy(values) for name, values in self.calibration.items()}
        kwargs.setdefault("expected_calibration_error",
                          float(_to_numpy(self.metrics["expected_calibration_error"])))
        return plot_reliability(bins["proportion"], bins["confidence"], bins["accuracy"],
                                ax=ax, **kwargs)

    @property
    def histogram(self):
        """The ``(2, K, H)`` probability histogram of a state built with
        ``thresholds=H`` (as the state held it at compute), or None."""
        return self._histogram

    def curves(self) -> tuple[list[dict], list[dict]]:
        """Each class's binned ROC and precision-recall curve,
        :func:`metrics_gpu.plot.binned_curves` of the state's histogram (NumPy
        arrays), with ``"auc"`` and ``"average_precision"`` added from
        ``per_class``. Needs a state of scores built with ``thresholds=H``."""
        from metrics_gpu.plot import binned_curves

        if self._histogram is None:
            held = "holds labels" if self._kind != "scores" else "has no score histogram"
            raise ValueError(f"thresholds: this state {held}; build ClassificationMetrics "
                             "with thresholds=H and update it with (N, K) scores for the "
                             "ROC and precision-recall curves")
        roc, pr = binned_curves(_to_numpy(self._histogram))
        per_class = self.per_class
        auc, ap = _to_numpy(per_class["roc_auc"]), _to_numpy(per_class["average_precision"])
        for k, (roc_curve, pr_curve) in enumerate(zip(roc, pr)):
            roc_curve["auc"], pr_curve["average_precision"] = float(auc[k]), float(ap[k])
        return roc, pr

    def plot_roc(self, ax=None, classes=None, **kwargs):
        """Draw the binned ROC curves (:meth:`curves`, through
        :func:`metrics_gpu.plot.plot_roc`; ``kwargs`` go to it): class 1 for
        K = 2, every class and the macro average for K <= 10, the macro
        average of all classes alone beyond, or the class codes ``classes``.
        Returns the matplotlib Axes."""
        from metrics_gpu.plot import chosen_curves, plot_roc

        roc, _ = self.curves()
        return plot_roc(chosen_curves(roc, classes, kwargs), ax=ax, **kwargs)

    def plot_precision_recall(self, ax=None, classes=None, **kwargs):
        """Draw the binned precision-recall curves, as :meth:`plot_roc` draws
        the ROC curves (:func:`metrics_gpu.plot.plot_precision_recall`).
        Returns the matplotlib Axes."""
        from metrics_gpu.plot import chosen_curves, plot_precision_recall

        _, pr = self.curves()
        return plot_precision_recall(chosen_curves(pr, classes, kwargs), ax=ax, **kwargs)


__all__ = ["ClassificationMetrics", "StreamingReport"]
