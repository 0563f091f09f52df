"""In-loop validation: a streaming state that adds batches and computes every
metric at the end, as a training loop needs it.

:class:`ClassificationMetrics` keeps one state per object, on the device of
its first update (NumPy arrays on the host backends, CuPy arrays on a GPU):

* ``counts``: per-class true positives, support, predicted counts, the
  total and the misclassified weight (3K + 2 cells; uint64 for counts and
  integer weights, float64 for float weights; version 1 states had no
  misclassified cell), and ``moments``, the weighted-kappa disagreement sums
  (exact 128-bit words, or two float64);
* ``matrix``: the K x K confusion matrix, while K <= 2048 (or as asked);
* ``scores``: the sums of the fused score pass (kernels/scores.cu layout:
  :data:`metrics_gpu._formulas.state.SCORE_SLOTS`, top-k hits, calibration bins);
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
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast, get_args

import numpy as np

from metrics_gpu._formulas import labels as F
from metrics_gpu.backends.selection import (
    caller_stream,
    get_backend_implementation,
    is_device_array,
    resolve_backend,
)
from metrics_gpu._common.docs import shared_parameters
from metrics_gpu.backends.kernel_sources import STREAM_CHECK_SLOTS, STREAM_NO_ERROR, STREAM_ORDINAL_SHIFT
from metrics_gpu._pipeline.planned import address, input_layout
from metrics_gpu._pipeline import torch_compile as _torch_compile
from metrics_gpu._formulas.state import stream_total_cell
from metrics_gpu._pipeline.distributed import (
    _add_words,
    _all_reduce_words,
    _as_torch,
    initialised_distributed,
)
from metrics_gpu._pipeline.stages import MAX_THRESHOLDS, keeps_matrix, stream_spec
from metrics_gpu._pipeline.stream_state import MAX_ORDINAL, StreamState, moments_as_float
from metrics_gpu._validation import (
    EXACT_INTEGER_LIMIT,
    MAX_BINS,
    StreamBatch,
    check_bool,
    check_confusion_matrix_option,
    check_groups,
    check_ignore_index,
    check_int_range,
    check_num_classes,
    check_score_kind,
    check_state_size,
    check_stream_batch,
    check_top_k,
    integer_weights_fit,
    score_cut,
    to_numpy,
)
from metrics_gpu._common.types import (
    ArrayLike,
    ConfusionMatrixOption,
    ScoresAre,
    StreamValidate,
)
from metrics_gpu.groups import (
    check_group_cells,
    group_cell_counts,
)
from metrics_gpu.intervals import (
    DEFAULT_RESAMPLES,
    check_interval_options,
)
from metrics_gpu._streaming.probability_check import _first_rows_sample, _warn_if_probability_rows
from metrics_gpu._streaming.report import StepReport, StreamingReport

if TYPE_CHECKING:  # torch is optional, imported only where a caller uses it
    import torch

    from metrics_gpu.backends import Backend
    from metrics_gpu.backends.launchers.base import LaunchBase

SCORE_KINDS = get_args(ScoresAre)
VALIDATE_MODES = get_args(StreamValidate)
# The keys of ``checks`` after its count (kernels/streaming.cu StreamCheck):
# the first bad sample of each argument, then the first update whose integer
# weights took the counts past 2**63 - 1.
CHECKED = ("y_true", "preds", "sample_weight", "overflow")
SAMPLE_CHECKED = CHECKED[:-1]
OVERFLOW_CHECK = 1 + CHECKED.index("overflow")
# 2: counts gained the misclassified weight (kappa's observed disagreement).
STATE_VERSION = 2
# The entries of a state_dict that are not state arrays.
STATE_FIELDS = ("version", "spec", "kind", "updates")


@shared_parameters
class ClassificationMetrics:
    """Every classification metric of a stream of batches.

    Update per batch, compute at the end, reset (the torchmetrics way). The
    first update fixes the state's device and kind: labels ``(N,)`` give
    the label metrics; scores ``(N, K)`` or channel-first ``(N, K, d1, ...)``
    (every position a sample, with targets ``(N, d1, ...)``) give the score
    metrics too, and so does a binary head's ``(N,)`` or ``(N, 1)`` column
    of the positive class's scores with ``num_classes=2``. Results come back in the framework of the first update's
    ``y_true`` (torch tensors for torch inputs, on CPU or GPU).

    Parameters
    ----------
    num_classes : int
        K: targets and label predictions are class codes 0..K-1.
    top_k : int or sequence of int, default (1, 5)
        Top-k accuracies reported from score batches (at most 8 values; a
        k >= K is left out of the report: 1 whatever the scores).
    n_bins : int, default 15
        Equal-width calibration bins of the top-class probability (ECE, MCE).
    thresholds : int, optional
        H: keep a ``(2, K, H)`` histogram of each class's probability, for the
        binned ROC AUC (binary, one-vs-rest macro / weighted / micro) and
        average precision, in O(K H) memory. The error against the exact
        values of the same scores is reported with them
        (``roc_auc_error_bound``, ``average_precision_error_bound``): for one
        class, ``|AUC - exact| <= sum_b P_b N_b / (2 P N)`` and
        with P_b, N_b the positives and negatives in bin b, and for AP the
        range of the exact value over every order of the samples inside the
        bins (``max(upper - AP, AP - lower)``, computed from the bin counts;
        docs/conventions.md); the bounds of the averages are the means of the
        per-class bounds.
    confusion_matrix : {"auto", True, False}, default "auto"
        Keep the K x K matrix: "auto" while K <= 2048. The label metrics never
        need it (they come from O(K) per-class counts).
    {ignore_index}
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
        What ``(N, K)`` predictions are: logits (raw scores, the default) or
        probabilities (in [0, 1], each row summing to 1 within sqrt(eps) of
        its type, at least float32's). A row declared as probabilities that is not is a bad
        sample, as a row with a NaN is: refused by "eager", named by
        ``compute()`` under "deferred" (checked inside the update pass),
        left out and counted with False. Read as logits, a first batch whose
        every row looks like probabilities warns (checked where it costs no
        device sync: on the host, or with ``validate="eager"``).
    num_groups : int, optional
        G: also count a K x K matrix per group (``update(..., groups=)``).
    threshold : float, optional
        For ``num_classes=2`` (a binary head): class 1 is predicted where its
        probability is above ``threshold`` (sigmoid of a logit column, or of
        the logits' margin ``z1 - z0`` for two columns; the probability
        itself for probabilities), as torchmetrics' binary metrics and
        :class:`MultilabelMetrics` decide. The label metrics follow it; the
        score metrics are the probabilities' (top-1 accuracy and calibration
        at the argmax). None or 0.5: the argmax.

    See Also
    --------
    StreamingReport : What :meth:`compute` returns.
    metrics_gpu.label_report, metrics_gpu.logits_report : The same metrics of
        arrays held in memory, in one call.

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

    # Whether a first batch of logits that looks like probabilities warns (a
    # caller that checks every row itself, as the files' readers, turns it off).
    _warns_of_probabilities = True

    def __init__(self, num_classes: int, *, top_k: int | Sequence[int] = (1, 5),
                 n_bins: int = 15, thresholds: int | None = None,
                 confusion_matrix: ConfusionMatrixOption = "auto",
                 ignore_index: int | None = None, validate: StreamValidate = "deferred",
                 deterministic: bool = False, scores: ScoresAre = "logits",
                 num_groups: int | None = None, threshold: float | None = None) -> None:
        checked_classes = check_num_classes(num_classes)
        if checked_classes is None:
            raise ValueError("num_classes is required: the state is sized by it")
        num_classes = checked_classes
        # Refused now, as label_report refuses it, not by the first update's allocation.
        check_state_size(num_classes)
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
        if threshold is not None:
            if num_classes != 2:
                raise ValueError(
                    f"threshold is for num_classes=2 (a binary head), got num_classes="
                    f"{num_classes}: multiclass labels are the argmax of the scores")
            check_score_kind(scores, threshold)
            if not 0.0 <= threshold <= 1.0:
                raise ValueError(f"threshold must be a probability in [0, 1] (class 1 where "
                                 f"its probability passes it), got {threshold!r}")
            if threshold != 0.5:  # 0.5 is the argmax: the spec (and state_dict) as without it
                self._spec["binary_cut"] = score_cut(float(threshold), scores)
        self.threshold = threshold
        groups = check_num_classes(num_groups, "num_groups")
        if groups is not None:
            check_group_cells(groups, num_classes)  # refused now, not by the first update
            # Only then in the spec: the state_dicts of states without groups stay as
            # they were.
            self._spec["num_groups"] = groups
        self.validate = validate
        self.deterministic = deterministic
        self.scores = scores
        # The state and its backend are set together by the first update (or
        # a merge, sync or load); the backend alone by to() on an empty state.
        self._state: StreamState | None = None
        self._backend: Backend | None = None
        self._like: Any = None  # the first update's y_true: results take its framework
        # After sync(): this rank's own (state, updates), kept apart from the
        # synced sum it holds, so that sync is idempotent (torchmetrics'
        # cache); the next update, merge or load drops the sum for it.
        self._local: tuple[StreamState | None, int] | None = None
        self._updates: int = 0  # update calls since the reset (ordinals of deferred checks)
        # Integer counts: a bound of their total known on the host without a
        # read (rows times the largest weight each dtype holds), and whether
        # an update added past it unchecked (its pass then keeps the check,
        # which compute reads).
        self._count_bound = 0
        self._overflow_possible = False
        # The first rows of a GPU state's first batch of logits, copied on the
        # device (validate="deferred") and tested by the next compute().
        self._probability_sample = None
        # The hot path: per input layout, the update's launch worked out by
        # its first batch (_PlannedUpdate); a later batch of the layout only
        # reads its arrays' addresses and launches.
        self._planned: dict[tuple, _PlannedUpdate] = {}
        # Per-step values (__call__): a state of one batch at a time, and the
        # last report of it handed out (computed when first read).
        self._step: ClassificationMetrics | None = None
        self._last_step: StepReport | None = None
        # Of a step state: its report's metric places, kept by its first StepReport.
        self._step_places: dict[str, tuple[bool, int]] | None = None
        self.reset()
        _torch_compile.traceable(self)

    def __getstate__(self) -> dict[str, Any]:
        """What a copy or a pickle holds: the state (and after a sync this
        rank's own) as state_dict arrays and the backend by name, since a
        kernel backend's state holds its device's compiled modules; no launch
        plans (the copy's next batch makes them) and no step state."""
        held = self.__dict__.copy()
        held.update(_planned={}, _step=None, _last_step=None, _probability_sample=None,
                    _backend=None if self._backend is None else self._backend.name,
                    _state=self._arrays_of(self._state, self._updates))
        if self._local is not None:
            held["_local"] = (self._arrays_of(*self._local), self._local[1])
        return held

    def __setstate__(self, held: dict[str, Any]) -> None:
        """A copy or an unpickled object: its arrays on its backend again (as
        :meth:`to` moves them), traceable under its own id."""
        snapshot, local, name = held.pop("_state"), held.pop("_local"), held.pop("_backend")
        self.__dict__.update(held)
        self._state, self._local = None, None
        backend = self._backend = None if name is None else get_backend_implementation(name)
        if local is not None:  # this rank's own state, kept apart from a sync's sum
            own, updates = local
            if own is not None:
                assert backend is not None  # a state has one
                self._load_arrays(own, backend)
            self._local, self._state = (self._state, updates), None
        if snapshot is not None:
            assert backend is not None
            self._load_arrays(snapshot, backend)
        _torch_compile.traceable(self)

    def _arrays_of(self, state: StreamState | None, updates: int) -> dict[str, Any] | None:
        """``state`` as :meth:`state_dict` gives this object's (None: None)."""
        if state is None:
            return None
        held_state, held_updates = self._state, self._updates
        self._state, self._updates = state, updates
        try:
            return self.state_dict()
        finally:
            self._state, self._updates = held_state, held_updates

    # -- state ------------------------------------------------------------------

    @property
    def num_classes(self) -> int:
        """K, the number of classes the state counts."""
        return self._spec["num_classes"]

    def reset(self) -> None:
        """Forget every update.

        The state's buffers, device and kind stay and are zeroed in place
        (memsets: the next epoch's updates allocate nothing).

        Returns
        -------
        None

        See Also
        --------
        update : Add a batch.
        """
        self._updates = 0
        self._local = None
        self._count_bound, self._overflow_possible = 0, False
        self._probability_sample = None
        if self._state is not None:
            self._state.clear()
            return
        self._backend = None
        self._like = None

    def _allocate(self, backend: Backend, kind: str, integer: bool) -> StreamState:
        """A zeroed state of ``kind`` on ``backend``, which becomes this object's."""
        self._backend = backend
        self._state = StreamState(backend, self._spec, kind, integer)
        return self._state

    def _backend_or_host(self) -> Backend:
        """This object's backend, or the NumPy backend when it has none yet."""
        if self._backend is not None:
            return self._backend
        return get_backend_implementation("numpy")

    def _own_state(self) -> None:
        """Back to this rank's own state after a sync (the sum is dropped), so
        that what is added next is not summed twice by the next sync."""
        if self._local is not None:
            (self._state, self._updates), self._local = self._local, None

    def _held_state(self) -> StreamState:
        """The state, or ``ValueError`` before any update (nothing to report)."""
        if self._state is None:
            raise ValueError("compute() before any update with samples: there is nothing to "
                             "report")
        return self._state

    @property
    def _kind(self) -> str | None:
        return None if self._state is None else self._state.kind

    # -- update -----------------------------------------------------------------

    @_torch_compile.inlined
    def update(self, y_true: ArrayLike, preds: ArrayLike,
               sample_weight: ArrayLike | None = None, groups: ArrayLike | None = None) -> None:
        """Add a batch of targets and predictions to the state.

        numpy, torch (CPU or CUDA, requiring grad or not), CuPy or JAX arrays.
        On a GPU: one kernel launch on the caller's stream, no host sync.
        Inside ``torch.compile`` (``fullgraph=True`` included), the update of
        torch tensors is one operator of the graph, ``metrics_gpu::update``,
        which runs this same update when the graph runs.

        A batch of no sample (N = 0: a last short batch, a rank without
        data) adds nothing; a state that saw only such batches is as a new one.

        Parameters
        ----------
        y_true : array-like of shape (N,) or (N, d1, ...)
            Targets: integer class codes 0..K-1 (``(N, d1, ...)`` with
            channel-first scores, or with label maps of that shape).
        preds : array-like of shape (N,), (N, K) or (N, K, d1, ...)
            Predicted class codes (integers, the shape of ``y_true``), or
            floating-point scores ``(N, K)`` / channel-first ``(N, K, d1, ...)``:
            logits or probabilities, as ``scores`` says. With K = 2, a binary
            head's one column of floating-point scores, the positive class's:
            ``(N,)`` or ``(N, 1)`` (``(N, 1, d1, ...)`` or ``(N, d1, ...)``
            for maps); a logit z counts as the row ``[0, z]`` (its softmax is
            ``[1 - sigmoid(z), sigmoid(z)]``), a probability p as ``[1 - p, p]``,
            and class 1 is predicted where z > 0 or p > 1/2.
        sample_weight : array-like, optional
            Non-negative weight of each target (as many as ``y_true`` holds).
            Integer weights keep the counts exact integers while their total
            stays below 2**63 (past it: float64 counts with
            ``validate="eager"``, else :meth:`compute` raises); the first
            float weights turn them into float64.
        groups : array-like of shape (N,), optional
            Each sample's group, an integer code 0..num_groups-1; required
            by (and only for) a state built with ``num_groups``. Adds each
            sample to its group's K x K matrix too (a second pass over the
            batch's labels: one more launch on a GPU); the report's
            ``groups`` then holds every label metric per group.

        Returns
        -------
        None

        Raises
        ------
        ValueError
            Wrong shapes or types; with ``validate="eager"`` also a bad value
            (nothing is then added); a batch of the other kind (labels after
            scores, or scores after labels); float weights with
            ``deterministic=True`` on a kernel backend; GPU arrays for a state
            on the host (``.to("cuda")`` moves it).

        See Also
        --------
        compute : Every metric of the batches added.
        """
        if _torch_compile.compiling():  # Dynamo is tracing: the graph gets an operator
            return _torch_compile.traced_update(self, y_true, preds, sample_weight, groups)
        grouped = "num_groups" in self._spec
        if grouped != (groups is not None):
            raise ValueError(
                f"groups is required: this state counts {self._spec['num_groups']} groups "
                "(num_groups)" if grouped else "groups: this state counts no groups; build "
                "ClassificationMetrics with num_groups=G to count them")
        if self._planned:
            planned = self._planned.get(input_layout(y_true, preds, sample_weight))
            if planned is not None and planned.add(self, y_true, preds, sample_weight):
                return
        if self._local is not None:
            self._own_state()
        backend = self._backend
        fresh = backend is None
        if backend is None:
            backend = self._backend = resolve_backend(y_true, preds, sample_weight)
            self._like = y_true
        try:
            with caller_stream(y_true):
                # The groups are checked before anything is added.
                codes = None if not grouped else self._group_codes(backend, y_true, groups)
                batch = self._update(backend, y_true, preds, sample_weight)
                if codes is not None and batch is not None and batch.n:
                    self._add_groups(backend, batch, codes)
        except TypeError as error:
            # Read only on failure: the host backends meet a GPU array as a
            # TypeError of the array library, which names no remedy.
            if backend.name == "cuda" or not any(
                    is_device_array(a) for a in (y_true, preds, sample_weight)):
                raise
            raise ValueError(
                f"y_true, preds: GPU arrays for a state held on the host ({backend.name} "
                "backend, as its first update or load_state_dict placed it); move the state "
                "with .to('cuda'), or pass host arrays") from error
        if fresh and self._state is None:  # only empty batches: still a new state
            self._backend = self._like = None

    def __call__(self, y_true: ArrayLike, preds: ArrayLike,
                 sample_weight: ArrayLike | None = None,
                 groups: ArrayLike | None = None) -> StepReport:
        """Add a batch, as :meth:`update`, and give that batch's own metrics:
        the value to log at each step (torchmetrics' ``forward``, without its
        second pass over a copy of the state).

        The batch is added twice on a GPU, to the state and to a state of
        one batch kept for the calls (zeroed in place: no allocation after
        the first call): one launch more than :meth:`update`, no host sync.
        The batch's metrics are computed when the report is first read
        (two launches), values 0-d tensors on the inputs' device, still no
        host sync; a report not read before the next call is computed then,
        so every report keeps its batch's values. The step values are this
        process's batch: :meth:`sync` sums the whole state, not them.

        Parameters
        ----------
        y_true, preds, sample_weight, groups
            As :meth:`update`.

        Returns
        -------
        StepReport
            The batch's report: every metric of :meth:`compute`'s report, of
            this batch alone (its ``total`` the batch's samples).

        Raises
        ------
        ValueError
            As :meth:`update`; a batch of no sample (it has no metrics).

        See Also
        --------
        update : Add a batch without its metrics.
        """
        last = self._last_step
        if last is not None:
            last._computed()  # the step state is then zeroed, ready for this batch
        step = self._step
        if step is not None and groups is None and self._planned and step._planned:
            # The hot path: a layout both states have planned, one address
            # read for two launches.
            layout = input_layout(y_true, preds, sample_weight)
            planned, step_planned = self._planned.get(layout), step._planned.get(layout)
            if (planned is not None and step_planned is not None
                    and planned.add(self, y_true, preds, sample_weight)):
                if not step_planned.add(step, y_true, preds, sample_weight):
                    step.update(y_true, preds, sample_weight)
                self._last_step = report = StepReport(step)
                return report
        shape = np.shape(y_true)
        if not shape or shape[0] == 0:
            raise ValueError("y_true: a batch of no sample has no metrics of its own; call "
                             "update for it (it adds nothing)")
        self.update(y_true, preds, sample_weight, groups)
        if step is None:
            step = self._step = self._step_twin()
        step.update(y_true, preds, sample_weight, groups)
        self._last_step = report = StepReport(step)
        return report

    def _step_twin(self) -> ClassificationMetrics:
        """A state built as this one for a batch at a time: no checks to
        raise (the state's own update raises or names them) and no second
        warning."""
        spec = self._spec
        twin = ClassificationMetrics(
            self.num_classes, top_k=spec["top_k"], n_bins=spec["n_bins"],
            thresholds=spec["thresholds"] or None, confusion_matrix=spec["keep_matrix"],
            ignore_index=spec["ignore_index"], validate=False,
            deterministic=self.deterministic, scores=self.scores,
            num_groups=spec.get("num_groups"), threshold=self.threshold)
        twin._warns_of_probabilities = False
        return twin

    def _group_codes(self, backend: Backend, y_true, groups):
        """The checked group codes of a batch of (N,) targets."""
        if getattr(y_true, "ndim", 1) != 1:
            raise ValueError("groups: a state with groups takes (N,) targets, not label maps")
        return check_groups(groups, int(np.shape(y_true)[0]), backend, self._spec["num_groups"],
                            codes_only=True).codes

    def _add_groups(self, backend: Backend, batch: StreamBatch, codes) -> None:
        """The batch's samples into their groups' matrices (left out where the
        state leaves them out)."""
        xp = backend.xp
        k, g = self.num_classes, self._spec["num_groups"]
        # What the state leaves out, the groups leave out too.
        valid = None
        if batch.scores:
            rows, cut = batch.rows(xp), self._spec.get("binary_cut")
            y_pred = (xp.argmax(rows, axis=1) if cut is None else
                      F.binary_decisions(rows, self._spec["from_logits"], cut, xp))
            valid = xp.isfinite(rows).all(axis=1)
        else:
            y_pred = batch.preds
        weights = batch.sample_weight
        if weights is not None:
            good = xp.greater_equal(weights, 0)
            if weights.dtype.kind == "f":
                good = xp.isfinite(weights) & good
            valid = good if valid is None else valid & good
        counts = group_cell_counts(backend, codes, batch.y_true, y_pred, valid, num_classes=k,
                                   num_groups=g, sample_weight=weights,
                                   ignore_index=self._spec["ignore_index"],
                                   deterministic=self.deterministic)
        table = self._held_state().arrays["groups"]
        table += counts.reshape(table.shape).astype(table.dtype)

    def _update(self, backend: Backend, y_true, preds, sample_weight) -> StreamBatch | None:
        spec = self._spec
        batch = check_stream_batch(
            y_true, preds, sample_weight, num_classes=self.num_classes, backend=backend,
            ignore_index=spec["ignore_index"], eager=self.validate == "eager",
            contiguous=getattr(backend, "contiguous", None), allow_empty=True,
            probabilities=not spec["from_logits"])
        kind = "scores" if batch.scores else "labels"
        float_weights = batch.sample_weight is not None and batch.sample_weight.dtype.kind == "f"
        if float_weights and self.deterministic and backend.name != "numpy":
            raise ValueError(
                "sample_weight: float weights are summed with float64 atomics on the kernel "
                "backends, which deterministic=True rules out; pass integer weights, or "
                "deterministic=False")
        state = self._state
        if state is not None and kind != state.kind:
            raise ValueError(
                f"preds: this state holds {state.kind} (set by its first update), got "
                f"{'(N, K) scores' if batch.scores else '(N,) labels'}; use one "
                "ClassificationMetrics per kind of prediction")
        if batch.n == 0:  # nothing to add; the call still has its ordinal
            self._updates += 1
            return batch
        if (self._state is None and batch.scores and spec["from_logits"]
                and self._warns_of_probabilities):
            self._warn_if_probabilities(backend, batch)
        if state is None:
            state = self._allocate(backend, kind, integer=not float_weights)
        elif float_weights and state.integer:
            state.promote_to_float()
        if state.integer:
            bound = self._count_bound + batch.n * batch.weight_limit
            self._count_bound = (bound if bound < EXACT_INTEGER_LIMIT
                                 else self._exact_range(backend, state, batch))
        state.update(batch, self._updates)
        self._updates += 1
        if backend.name != "numpy" and self.validate != "eager" and "num_groups" not in spec:
            self._plan(backend, state, batch, y_true, preds, sample_weight)
        return batch

    def _plan(self, backend: Backend, state: StreamState, batch: StreamBatch, y_true, preds,
              sample_weight) -> None:
        """Keep the launch of this batch's layout for the next batches of it,
        where the kernel read the caller's arrays as they are (no copy or
        conversion) from memory whose address the layout's type gives."""
        layout = input_layout(y_true, preds, sample_weight)
        if layout is None or len(self._planned) >= _MAX_PLANNED_LAYOUTS:
            return
        plan = state.update_plan(batch)
        device = cast("LaunchBase", backend).device  # a kernel backend's
        pointer = device.data_pointer
        scores = plan.scores_of(batch.preds)
        given = (y_true, preds) if sample_weight is None else (y_true, preds, sample_weight)
        read = ((batch.y_true, scores) if sample_weight is None
                else (batch.y_true, scores, batch.sample_weight))
        if plan.float_weights or any(address(a) != pointer(b) for a, b in zip(given, read)):
            return
        samples = int(np.shape(y_true)[0])
        self._planned[layout] = _PlannedUpdate(
            plan=plan, state=state, counts=state.arrays["counts"],
            positions=batch.n // samples if samples else 0, weight_limit=batch.weight_limit,
            integer=state.integer, device=device, weighted=sample_weight is not None)

    def _exact_range(self, backend: Backend, state: StreamState, batch) -> int:
        """Integer counts the host bound no longer proves below 2**63 before
        ``batch``; returns the new bound. ``validate="eager"`` reads the
        state's total and the batch's largest weight (syncs on a GPU) and,
        where the sum can pass 2**63, turns the counts into float64 before
        adding anything, as the functional API counts such weights. The other
        modes never sync an update: its pass checks the sum exactly and keeps
        the update, and compute refuses the state."""
        if self.validate != "eager":
            self._overflow_possible = True
            return self._count_bound
        cell = stream_total_cell(self.num_classes)
        held = int(np.asarray(backend.to_host(state.arrays["counts"][cell:cell + 1]))[0])
        weight = batch.sample_weight
        if (held + batch.n < EXACT_INTEGER_LIMIT if weight is None
                else integer_weights_fit(weight, batch.weight_limit, held)):
            return held + batch.n * batch.weight_limit
        if self.deterministic and backend.name != "numpy":
            raise ValueError(
                "sample_weight: these integer weights can take the counts past 2**63 - 1, "
                "where they are counted in float64, which deterministic=True rules out on "
                "the kernel backends; nothing was added")
        state.promote_to_float()
        return 0

    def _warn_if_probabilities(self, backend: Backend, batch: StreamBatch) -> None:
        """Warn when the first batch of scores read as logits is made of rows of
        probabilities. Here where that costs no device sync: a batch on the
        host, or ``validate="eager"`` (which syncs to check values anyway). Of
        a GPU batch under ``validate="deferred"`` the first rows are copied
        on the device (:func:`_first_rows_sample`: no kernel, no sync) and the
        next :meth:`compute` (which reads the checks anyway) tests them on the
        host; with ``validate=False`` nothing is read."""
        if is_device_array(batch.preds) and self.validate != "eager":
            if self.validate == "deferred":
                self._probability_sample = _first_rows_sample(backend, batch)
            return
        _warn_if_probability_rows(batch.rows(backend.xp), backend, batch.score_dtype,
                                  batch.binary_column)

    # -- compute ----------------------------------------------------------------

    def first_invalid(self) -> tuple[str, int, int, str, int] | None:
        """The first bad sample added, or None: ``(argument, update call, sample,
        problem, samples left out in all)``; argument is ``"y_true"``,
        ``"preds"`` or ``"sample_weight"``, the update call counts from 0 and
        the sample is its index in that call's batch (one host read)."""
        state = self._state
        if state is None:
            return None
        with caller_stream(self._like):  # after the updates queued on the caller's stream
            checks = np.asarray(state.backend.to_host(state.arrays["checks"]))
        return self._first_invalid(checks)

    def _first_invalid(self, checks) -> tuple[str, int, int, str, int] | None:
        state = self._held_state()
        invalid = int(checks[0])
        if not invalid:
            return None
        k = self.num_classes
        problems = {
            "y_true": f"a target outside 0..{k - 1} (num_classes={k})",
            "preds": (f"a prediction outside 0..{k - 1}" if state.kind == "labels"
                      else "a row of scores with a NaN or an infinity"
                      + ("" if self._spec["from_logits"] else
                         ", or that is not probabilities (a value outside [0, 1], or a sum "
                         "off 1 by more than sqrt(eps) of its type, at least 2**-7), as "
                         "scores='probabilities' declares (rows of probabilities that miss "
                         "only the sum: divide each by its sum; for logits, build the state "
                         "with scores='logits')")),
            "sample_weight": "a negative or non-finite weight",
        }
        found = [(int(key), name) for name, key in zip(SAMPLE_CHECKED, checks[1:])
                 if int(key) != STREAM_NO_ERROR]
        key, name = min(found)
        return (name, key >> STREAM_ORDINAL_SHIFT, key & ((1 << STREAM_ORDINAL_SHIFT) - 1), problems[name],
                invalid)

    def _raise_overflow(self, checks) -> None:
        """The first update that took integer counts past 2**63 - 1, as a ValueError."""
        key = int(checks[OVERFLOW_CHECK]) if checks.size > OVERFLOW_CHECK else STREAM_NO_ERROR
        if key == STREAM_NO_ERROR:
            return
        raise ValueError(
            f"sample_weight of update call {key >> STREAM_ORDINAL_SHIFT} (counting from 0): "
            "its integer weights take the counts past 2**63 - 1, beyond exact 64-bit "
            "integers, so the state is not exact. reset() and pass such weights as floats "
            "(counted in float64), or build the state with validate='eager', which turns "
            "the counts into float64 before such a batch"
        )

    def _raise_deferred(self, checks) -> None:
        """The first offending sample of each kind, as a ValueError (deferred mode)."""
        first = self._first_invalid(checks)
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

    def compute(self, *, confidence_level: float | None = None, method: str = "percentile",
                n_resamples: int = DEFAULT_RESAMPLES, rng: Any = None,
                sampling: str = "poisson") -> StreamingReport:
        """Every metric the state supports, as one :class:`StreamingReport`.

        On the kernel backends at most two launches (one for a state of
        labels), whose values stay on the device until read; with
        ``validate="deferred"`` the four check numbers are read back (one
        sync) to raise for bad input.

        With ``confidence_level``, the report's ``intervals`` hold each label
        metric's confidence interval, from the state's confusion matrix (read
        back once; no cost per batch): the arguments are
        :func:`metrics_gpu.label_report`'s, and the state must keep its
        matrix (``confusion_matrix=True``, or "auto" with K <= 2048).

        Returns
        -------
        StreamingReport
            The metrics of every batch added since the last reset, in the
            framework of the first update's ``y_true``.

        Raises
        ------
        ValueError
            Before any update (nothing to report); with
            ``validate="deferred"``, when a bad sample was added (naming the
            argument, the update call and the sample); in every mode, when
            integer weights took the counts past 2**63 - 1 (checked by the
            updates, read here only when the host could not rule it out).

        See Also
        --------
        update : Add a batch.
        first_invalid : The first bad sample added, without raising.
        """
        state = self._held_state()
        # On the caller's stream throughout: the reads below wait for the
        # updates it queued (a torch stream need not order with CuPy's).
        with caller_stream(self._like):
            if self.validate == "deferred" or self._overflow_possible:
                checks = np.asarray(state.backend.to_host(state.arrays["checks"]))
                self._raise_overflow(checks)
                if self.validate == "deferred":
                    self._raise_deferred(checks)
            if self._probability_sample is not None:
                (sample, score_dtype, binary), self._probability_sample = \
                    self._probability_sample, None
                rows = StreamBatch(y_true=None, preds=np.asarray(state.backend.to_host(sample)),
                                   sample_weight=None, n=0, score_dtype=score_dtype,
                                   binary_column=binary).rows(np)
                _warn_if_probability_rows(rows, get_backend_implementation("numpy"),
                                          score_dtype, binary)
            label_values, score_values = state.compute()
        report = StreamingReport(self, label_values, score_values)
        options = None
        if confidence_level is not None:
            options = check_interval_options(confidence_level, method, n_resamples, rng, sampling)
            report._add_intervals(options)
        if "num_groups" in self._spec:
            report._add_groups(options)
        return report

    # -- combining states ---------------------------------------------------------

    def merge(self, other: ClassificationMetrics) -> None:
        """Add ``other``'s state to this one (the state of both streams together).

        Parameters
        ----------
        other : ClassificationMetrics
            Built with the same arguments, holding the same kind (labels or
            scores); left as it is. An empty one adds nothing; into an empty
            one, its state is copied (with its device).

        Returns
        -------
        None

        Raises
        ------
        ValueError
            ``other`` was built with other arguments, or holds the other kind.

        See Also
        --------
        sync : Merge the states of every rank of ``torch.distributed``.
        """
        if not isinstance(other, ClassificationMetrics) or other._spec != self._spec:
            raise ValueError("other must be a ClassificationMetrics built with the same arguments")
        self._own_state()
        other_state = other._state
        if other_state is None:
            return
        state = self._state
        if state is None:
            self._like = other._like
            state = self._allocate(other_state.backend, other_state.kind, other_state.integer)
        if other_state.kind != state.kind:
            raise ValueError(f"cannot merge a state of {other_state.kind} into one of "
                             f"{state.kind}")
        theirs = {name: to_numpy(value) for name, value in other_state.arrays.items()}
        if state.integer and other_state.integer:
            cell = stream_total_cell(self.num_classes)
            total = (int(to_numpy(state.arrays["counts"][cell:cell + 1])[0])
                     + int(theirs["counts"][cell]))
            if total >= EXACT_INTEGER_LIMIT:  # float64 counts, as the functional API
                state.promote_to_float()
            self._count_bound = total
        self._overflow_possible |= other._overflow_possible
        if state.integer and not other_state.integer:
            state.promote_to_float()
        elif other_state.integer and not state.integer:
            theirs = _float_arrays(theirs)
        backend = state.backend
        xp = backend.xp
        for name, mine in state.arrays.items():
            value = backend.asarray(theirs[name])
            if name == "checks":
                mine[:1] += value[:1]
                mine[1:] = xp.minimum(mine[1:], value[1:])
            elif name == "moments" and mine.dtype == np.uint64:
                _add_words(mine, value)
            else:
                mine += value
        state.moments_fresh = False
        self._updates += other._updates

    def state_dict(self) -> dict[str, Any]:
        """The state as plain arrays, with the arguments it was built with.

        Returns
        -------
        dict
            ``"version"``, ``"spec"`` (the arguments), ``"kind"`` (None before
            any update), ``"updates"`` and each state array by name, in the
            framework of the first update's ``y_true`` (torch tensors for torch
            inputs, so that ``torch.save`` holds it; uint64 counts as int64).

        See Also
        --------
        load_state_dict : Restore it.
        """
        out: dict[str, Any] = {"version": STATE_VERSION, "spec": dict(self._spec),
                               "kind": self._kind, "updates": self._updates}
        if self._state is not None:
            backend = self._state.backend
            for name, value in self._state.arrays.items():
                if value.dtype == np.uint64:
                    value = value.view(np.int64)  # torch has no uint64 arithmetic
                out[name] = backend.to_framework(value, self._like)
        return out

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict` onto this object's device or, when it
        has none yet, where the state's arrays live (the backend an update
        with them takes: a GPU's tensors stay on the GPU; results then come
        back in their framework).

        Parameters
        ----------
        state : mapping
            What :meth:`state_dict` of a ClassificationMetrics built with the
            same arguments returned (NumPy, torch or CuPy arrays).

        Returns
        -------
        None

        Raises
        ------
        ValueError
            ``state`` is not a state_dict of a ClassificationMetrics with these
            arguments.

        See Also
        --------
        state_dict : The state as plain arrays.
        """
        state = _upgraded_state(state)
        if state.get("version") != STATE_VERSION or dict(state.get("spec", {})) != self._spec:
            raise ValueError("state: not a state_dict of a ClassificationMetrics with these "
                             "arguments")
        self._local = None
        if state["kind"] is None:
            self._state, self._updates = None, 0
            return
        backend = self._backend
        if backend is None:
            held = [value for name, value in state.items() if name not in STATE_FIELDS]
            backend, self._like = resolve_backend(*held), state["counts"]
        self._load_arrays(state, backend)

    def _load_arrays(self, snapshot: Mapping[str, Any], backend: Backend) -> None:
        arrays = {name: to_numpy(snapshot[name]) for name in snapshot
                  if name not in STATE_FIELDS}
        integer = arrays["counts"].dtype.kind in "iu"
        checks = arrays["checks"].view(np.uint64)
        if checks.size < STREAM_CHECK_SLOTS:  # a state_dict from before the overflow key
            arrays["checks"] = np.concatenate(
                [checks, np.full(STREAM_CHECK_SLOTS - checks.size, STREAM_NO_ERROR, np.uint64)])
        state = self._allocate(backend, snapshot["kind"], integer)
        self._count_bound = (int(arrays["counts"][stream_total_cell(self.num_classes)])
                             if integer else 0)
        self._overflow_possible = int(arrays["checks"][OVERFLOW_CHECK]) != STREAM_NO_ERROR
        self._probability_sample = None
        for name, mine in state.arrays.items():
            value = arrays[name].view(np.uint64) if mine.dtype == np.uint64 else arrays[name]
            mine[...] = backend.asarray(value)
        self._updates = int(snapshot["updates"])

    def sync(self, group: torch.distributed.ProcessGroup | None = None) -> None:
        """All-reduce the state over ``torch.distributed``.

        Nothing when it is not initialised. SUM of every count and sum
        (integer counts stay exact: they are reduced as int64, the 128-bit
        moments by 32-bit halves), MIN of the check keys. Every rank must call
        it; a rank without any update contributes zeros.

        Idempotent: the object then holds the sum over ranks, and keeps its
        own state apart; calling ``sync`` again (on every rank) sums the own
        states again, never the sum. The next ``update`` or ``merge`` goes
        back to the own state first (the sum is dropped), so that a later
        ``sync`` counts every batch once.

        Parameters
        ----------
        group : torch.distributed.ProcessGroup, optional
            The ranks to reduce over (default: the whole world).

        Returns
        -------
        None

        See Also
        --------
        merge : Add one other state (one process).
        """
        dist = initialised_distributed()
        if dist is None:
            return
        torch = sys.modules["torch"]
        local = self._local if self._local is not None else (self._state, self._updates)
        own, own_updates = local
        # Filled by all_gather_object with each rank's (kind, integer, total of
        # integer counts, overflow possible).
        kinds: list[Any] = [None] * dist.get_world_size(group)
        integer = None if own is None else own.integer
        cell = stream_total_cell(self.num_classes)
        total = (int(to_numpy(own.arrays["counts"][cell:cell + 1])[0])
                 if own is not None and integer else 0)
        dist.all_gather_object(kinds, (None if own is None else own.kind, integer, total,
                                       self._overflow_possible), group=group)
        kind = next((k for k, *_ in kinds if k is not None), None)
        if kind is None:
            return
        totals = sum(t for _, _, t, _ in kinds)
        # Integer counts whose sum over ranks would pass 2**63 are reduced as
        # float64 (an int64 all-reduce would wrap).
        any_float = any(i is False for _, i, *_ in kinds) or totals >= EXACT_INTEGER_LIMIT
        self._count_bound = totals
        self._overflow_possible = any(possible for *_, possible in kinds)
        # The sum is reduced in a copy: the own state stays as it was.
        if own is None:
            state = self._allocate(self._backend_or_host(), kind, not any_float)
        else:
            state = self._allocate(own.backend, own.kind, own.integer)
            for name, mine in state.arrays.items():
                mine[...] = own.arrays[name]
            if any_float and state.integer:
                state.promote_to_float()
        for name, value in state.arrays.items():
            tensor = _as_torch(value.view(np.int64) if value.dtype == np.uint64 else value)
            if name == "checks":
                dist.all_reduce(tensor[:1], op=dist.ReduceOp.SUM, group=group)
                dist.all_reduce(tensor[1:], op=dist.ReduceOp.MIN, group=group)
            elif name == "moments" and value.dtype == np.uint64:
                _all_reduce_words(tensor, dist, group)
            else:
                dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
        state.moments_fresh = False
        updates = torch.tensor([own_updates], dtype=torch.int64)
        dist.all_reduce(updates, group=group)
        self._updates = int(updates[0])
        self._local = local

    def to(self, device: str | int | torch.device) -> ClassificationMetrics:
        """Move the state to the host or the current GPU.

        Parameters
        ----------
        device : str, int or torch.device
            ``"cpu"`` / ``"numpy"``: the host (NumPy backend); ``"cuda"`` (or a
            torch device / index): the current GPU.

        Returns
        -------
        ClassificationMetrics
            This object (moved in place).

        Raises
        ------
        ValueError
            ``device`` names neither.
        BackendUnavailableError
            A GPU was asked for where the ``cuda`` backend cannot run.

        See Also
        --------
        state_dict : The state as plain arrays.
        """
        name = str(getattr(device, "type", device))
        if name.startswith("cuda") or isinstance(device, int):
            target = get_backend_implementation("cuda")
        elif name in ("cpu", "numpy"):
            target = get_backend_implementation("numpy")
        else:
            raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
        local = self._local
        if local is not None and local[0] is not None:  # the own state of a sync moves too
            held = self._state, self._updates
            self._state, self._updates = local
            self._load_arrays(self.state_dict(), target)
            local = (self._state, self._updates)
            self._state, self._updates = held
        snapshot = self.state_dict() if self._state is not None else None
        self._backend = target
        if snapshot is not None:
            self._load_arrays(snapshot, target)
        self._local = local
        if self._last_step is not None:
            self._last_step._computed()  # where its batch was
        self._step = None  # the next step state is made where the state now is
        return self

    def __repr__(self) -> str:
        state = self._state
        where = "empty" if state is None else f"{state.kind} on {state.backend.name}"
        return (f"ClassificationMetrics(num_classes={self.num_classes}, updates={self._updates}, "
                f"{where})")


# Layouts a state keeps launch plans for (a loop has one or two: the full
# batches and the last, smaller one of the same layout share a plan).
_MAX_PLANNED_LAYOUTS = 8


class _PlannedUpdate:
    """A state's update of one input layout after its first batch: the
    launch plan (metrics_gpu.backends.launchers.streaming.StreamUpdatePlan)
    and what the host checks of a batch (the rows agree, the count bound)
    before it launches on the arrays' addresses. Value checks are the
    kernel's, as in every deferred update."""

    __slots__ = ("plan", "state", "counts", "positions", "weight_limit", "integer", "device",
                 "weighted")

    def __init__(self, *, plan, state, counts, positions, weight_limit, integer, device,
                 weighted):
        self.plan, self.state, self.counts = plan, state, counts
        self.positions, self.weight_limit, self.integer = positions, weight_limit, integer
        self.device, self.weighted = device, weighted

    def add(self, metrics: ClassificationMetrics, y_true, preds, sample_weight) -> bool:
        """Add the batch as the plan says; False (nothing done) when the full
        path must take it: another state or counts, a row mismatch, an empty
        batch, an unaligned address, or a buffer to make first."""
        state = metrics._state
        if (state is not self.state or state.arrays["counts"] is not self.counts
                or metrics._local is not None):
            return False
        samples = y_true.shape[0]
        if samples == 0 or preds.shape[0] != samples:
            return False
        weight = 0
        if self.weighted:
            if sample_weight.shape[0] != samples:
                return False
            weight = np.uint64(address(sample_weight))
        n = samples * self.positions
        preds_address = address(preds)
        if self.plan.itemsize and preds_address % self.plan.itemsize:
            return False  # an unaligned view: the full path copies it
        if not self.plan.run(np.uint64(address(y_true)), np.uint64(preds_address),
                             weight if self.weighted else None, n,
                             min(metrics._updates, MAX_ORDINAL),
                             self.device.launch_stream(y_true), allocate=False):
            return False
        if self.integer:
            # As the full path (_exact_range, not eager): past what the host
            # bound proves, the kernel's own sum checks the counts.
            bound = metrics._count_bound + n * self.weight_limit
            if bound < EXACT_INTEGER_LIMIT:
                metrics._count_bound = bound
            else:
                metrics._overflow_possible = True
        metrics._updates += 1
        return True


def _upgraded_state(state: Mapping[str, Any]) -> Mapping[str, Any]:
    """A version 1 state_dict as version 2: its counts gain the misclassified
    cell, total - sum(true positives) (exact for integer counts; for float
    weights the best the old state holds). Other states as they are."""
    if state.get("version") != 1:
        return state
    upgraded = dict(state, version=2)
    if state.get("kind") is not None and "counts" in state:
        counts = to_numpy(state["counts"])
        k = (counts.shape[0] - 1) // 3
        missed = counts[3 * k:3 * k + 1] - counts[:k].sum(dtype=counts.dtype)
        upgraded["counts"] = np.concatenate([counts, missed])
    return upgraded


def _float_arrays(arrays: dict) -> dict:
    """Host arrays of an integer state as a float state's (exact moments as floats)."""
    out = dict(arrays)
    out["moments"] = moments_as_float(arrays["moments"], np)
    for name in ("counts", "matrix", "histogram"):
        if name in out:
            out[name] = out[name].astype(np.float64)
    return out


__all__ = ["ClassificationMetrics", "StepReport", "StreamingReport"]
