"""Launch plans of the functional API: a call with ``validate=False`` and K
known, after the first call of its input layout.

The first call of a layout takes the full path (:func:`metrics_gpu._pipeline.stages.one_pass`:
arguments checked, inputs formatted, a fresh streaming state, one update
launch, one compute launch) and keeps a :class:`FunctionalPlan` here: the
update's launch plan and the compute's recorded launches, with every buffer
they write relocated into one block, and that block's initial contents
(counts zero, checks unset). A later call of the layout reads the layout
from its arrays' attributes, copies the initial block into a fresh buffer of
its own (one allocation, one device copy; torch's allocator for torch
inputs, so that the results need no conversion), and issues the launches on it:
the update (its grid sized from the batch) and the compute. Nothing is read
back; the results are views of the call's buffer, which no later call
writes.

A plan holds only what calls share read-only (configs, the initial block,
the launches' constant arguments), so threads and streams can use one plan
at once. At most :data:`MAX_PLANS` are kept, their initial blocks within
:data:`MAX_PLAN_BYTES` of device memory; the oldest goes first.
"""

from __future__ import annotations

import threading

import numpy as np

from metrics_gpu.backends.selection import get_backend
from metrics_gpu.backends.counting import record
from metrics_gpu.backends.launchers.base import recording_launcher
from metrics_gpu._pipeline.stream_state import StreamState, invalid_count

# Plans kept at once (each holds one state's initial block and configs), and
# the device memory their blocks may hold together (a K x K matrix kept by
# label_report is 32 MiB at K = 2048): the oldest go first.
MAX_PLANS = 32
MAX_PLAN_BYTES = 256 << 20
_plans: dict[tuple, FunctionalPlan] = {}
_plans_lock = threading.Lock()


def array_layout(array):
    """What fixes a launch about one input array (its type, dtype, trailing
    shape, strides and device), read from attributes alone; None for inputs
    without a known address (lists, other types)."""
    kind = type(array)
    if kind is np.ndarray:
        return kind, array.dtype, array.shape[1:], array.strides
    module = kind.__module__
    if module == "torch":
        return kind, array.dtype, array.shape[1:], array.stride(), array.device
    if module.startswith("cupy"):
        return kind, array.dtype, array.shape[1:], array.strides, array.data.device_id
    return None


def input_layout(y_true, preds, sample_weight):
    """The plan key of a batch's inputs (:func:`array_layout` of each), or None."""
    true = array_layout(y_true)
    pred = array_layout(preds)
    if true is None or pred is None:
        return None
    if sample_weight is None:
        return true, pred
    weight = array_layout(sample_weight)
    return None if weight is None else (true, pred, weight)


def address(array) -> int:
    """The address of an array's first element (NumPy, torch, CuPy)."""
    kind = type(array)
    if kind is np.ndarray:
        return array.__array_interface__["data"][0]
    if kind.__module__ == "torch":
        return array.data_ptr()
    return array.data.ptr


def address_reader(array):
    """A function of one argument giving the address of arrays of ``array``'s
    type (what :func:`address` finds, without its type tests)."""
    kind = type(array)
    if kind.__module__ == "torch":
        return kind.data_ptr
    if kind is not np.ndarray and kind.__module__.startswith("cupy"):
        return _cupy_address
    return address


def _cupy_address(array) -> int:
    return array.data.ptr


def plan_key(computes: str, y_true, y_pred, sample_weight, options: tuple):
    """The key of a call's plan: what it computes (``computes`` and
    ``options``, the one-pass arguments), the backend in force and the input
    layout; None for inputs that cannot have one."""
    layout = input_layout(y_true, y_pred, sample_weight)
    return None if layout is None else (computes, options, get_backend(), layout)


def planned_pass(computes: str, y_true, y_pred, sample_weight, options: tuple):
    """``(plan, block)``: the launches of a call whose layout has a plan,
    issued on a fresh block (:meth:`FunctionalPlan.run`); None when it has
    none, or the batch needs the full path (which makes the plan)."""
    key = plan_key(computes, y_true, y_pred, sample_weight, options)
    plan = None if key is None else _plans.get(key)
    if plan is None:
        return None
    block = plan.run(y_true, y_pred, sample_weight)
    return None if block is None else (plan, block)


def keep_plan(key, state, batch, given: tuple, computes: str) -> None:
    """Make and keep the plan of the full path's call (its fresh ``state``
    after the update of ``batch``; ``given``: the caller's arrays), where
    the kernel read the caller's arrays as they are."""
    if key is None or key in _plans:
        return
    plan = FunctionalPlan.make(state, batch, given, computes)
    if plan is None:
        return
    with _plans_lock:  # calls only read the table (one dict lookup); changes take turns
        _plans[key] = plan
        while len(_plans) > MAX_PLANS or (len(_plans) > 1 and sum(
                kept.template.nbytes for kept in _plans.values()) > MAX_PLAN_BYTES):
            _plans.pop(next(iter(_plans)))


def clear_plans() -> None:
    """Forget every plan (tests)."""
    with _plans_lock:
        _plans.clear()


class _Relocated:
    """One launch's arguments with the buffers it writes as block offsets:
    ``args(base, partials)`` gives them for a call's block at ``base``."""

    __slots__ = ("constant", "positions", "offsets", "partials_at")

    def __init__(self, args, ranges, partials):
        self.constant = list(args)
        positions, offsets, self.partials_at = [], [], None
        for position, arg in enumerate(args):
            pointer = _pointer(arg)
            if pointer is None:
                continue
            if partials is not None and _pointer(partials) <= pointer < (
                    _pointer(partials) + partials.nbytes):
                self.partials_at = position
                continue
            for start, stop, offset in ranges:
                if start <= pointer < stop:
                    positions.append(position)
                    offsets.append(offset + pointer - start)
                    break
        for position in (*positions, self.partials_at):
            if position is not None:
                self.constant[position] = None  # each call's own: the recorded one is not kept
        self.positions = positions
        self.offsets = np.array(offsets, dtype=np.uint64)

    def args(self, base, partials) -> list:
        args = self.constant.copy()
        for position, value in zip(self.positions, self.offsets + base):
            args[position] = value
        if self.partials_at is not None:
            args[self.partials_at] = partials
        return args


def _pointer(arg) -> int | None:
    """The address of a device array argument; None for scalars and nulls."""
    if arg is None or isinstance(arg, (int, float, np.generic)):
        return None
    return address(arg)


class FunctionalPlan:
    """One layout's launches of a functional call, on buffers of each call's own."""

    __slots__ = ("backend", "spec", "kind", "update", "compute", "state_args", "template",
                 "partials_size", "positions", "weighted", "itemsize", "label_range",
                 "score_range", "arrays", "torch_dtypes", "torch_template", "tensor_bytes", "addresses")

    def __init__(self, *, backend, spec: dict, kind: str, update, compute: list,
                 state_args: _Relocated, template, partials_size: int, positions: int,
                 weighted: bool, itemsize: int, label_range: tuple[int, int] | None,
                 score_range: tuple[int, int] | None, arrays: dict, given: tuple):
        self.backend, self.spec, self.kind = backend, spec, kind
        self.update = update            # the update's StreamUpdatePlan (its state relocated)
        self.compute = compute          # the compute's launches, relocated
        self.state_args = state_args    # the update's state arguments, relocated
        self.template = template        # the block's initial contents (uint64 words)
        self.partials_size = partials_size  # float64 per-block partials of an update (scores)
        self.positions = positions      # samples per y_true row (channel-first: H x W)
        self.weighted, self.itemsize = weighted, itemsize
        # Byte ranges of the compute's outputs in the block (None: not computed).
        self.label_range, self.score_range = label_range, score_range
        self.arrays = arrays            # the state's arrays: name -> (start, stop, dtype, shape)
        # The layout fixes the inputs' types: how to read each one's address
        # (y_true, preds, weight), and for torch inputs the dtypes of the
        # results' views of the block, which is converted once per call.
        self.addresses = tuple(None if array is None else address_reader(array)
                               for array in given)
        self.torch_dtypes = self.torch_template = self.tensor_bytes = None
        if type(given[0]).__module__ == "torch":
            import torch

            self.torch_dtypes = (torch.float64, torch.int64)
            # Torch inputs get blocks of torch's allocator (on the caller's
            # stream): the results are views of the call's block, without a
            # conversion. Plans exist only where the kernels read the
            # caller's tensors as they are, so this is their device.
            self.torch_template = backend.to_framework(template.view(np.uint8), given[0])
            # A torch block as the backend's array (a view), for the state's readers.
            self.tensor_bytes = backend.device.tensor_bytes

    @classmethod
    def make(cls, state, batch, given: tuple, computes: str) -> FunctionalPlan | None:
        """The plan of the full path's ``state`` (fresh, after its one update,
        of ``batch``) and of its compute (``computes``: "labels", "scores" or
        "matrix", nothing); None where a later call could not launch on the
        caller's arrays as they are (a conversion, integer weights). The
        state's buffers only give the launches' layout: the plan keeps its
        own initial block, and takes over the state's update plan (the
        state is never updated again)."""
        backend = state.backend
        samples = int(np.shape(given[0])[0])
        if backend.name == "numpy" or samples == 0:
            return None
        weight = batch.sample_weight
        if weight is not None and weight.dtype.kind != "f":
            return None  # integer weights: the full path bounds their sums first
        update = state.update_plan(batch)  # the update's own, kept in the workspace
        read = (batch.y_true, update.scores_of(batch.preds), weight)
        pointer = backend.device.data_pointer
        if update.float_weights or update.unit_weights or any(
                a is not None and address(a) != pointer(b) for a, b in zip(given, read)):
            return None  # the kernel read a conversion, not the caller's arrays
        for key in update.layouts():
            update.configs.setdefault(key, update.make_config(key))
        # The compute's launches, listed rather than issued (the caller's
        # compute of this state issues them after): they allocate the
        # compute's buffers, which the block then holds too.
        backend_of_state, launches = state.backend, []
        label_out = score_out = None
        if computes != "matrix":
            state.backend, launches = recording_launcher(backend)
        try:
            label_out, score_out = state.compute(labels=computes == "labels",
                                                 scores=computes == "scores")
        finally:
            state.backend = backend_of_state
        workspace = state.workspace
        assert workspace is not None and workspace.compute is not None  # a kernel backend's
        pooled, ticket = workspace.compute
        written = [*state.arrays.values(), workspace.update_ticket, workspace.moments,
                   workspace.batch_weight, pooled, ticket,
                   *(out for out in (score_out, label_out) if out is not None)]
        # Each written buffer's (start, stop) address and its offset in the block.
        ranges, words = [], 0
        for array in written:
            start = pointer(array)
            ranges.append((start, start + array.nbytes, words * 8))
            words += -(-array.nbytes // 8)
        # The initial block: zero, but the checks (no sample refused yet).
        template = backend.zeros(words, np.uint64)
        checks = list(state.arrays).index("checks")
        _, _, offset = ranges[checks]
        backend.copy_into(template[offset // 8:offset // 8 + written[checks].size],
                          state.initial_checks())
        partials = workspace.partials if state.kind == "scores" else None

        def byte_range(out):
            _, _, offset = ranges[next(i for i, a in enumerate(written) if a is out)]
            return offset, offset + out.nbytes

        state_args = _Relocated(update.state_args, ranges, partials)
        # The plan launches on each call's block: the state and its
        # workspace are not kept (only the configs and the template are).
        update.state_args, update.workspace = (), None
        return cls(
            backend=backend, spec=state.spec, kind=state.kind, update=update,
            compute=[(source, expression, grid, block, _Relocated(args, ranges, partials),
                      shared) for source, expression, grid, block, args, shared in launches],
            state_args=state_args, template=template,
            partials_size=0 if partials is None else partials.size,
            positions=batch.n // samples, weighted=weight is not None, itemsize=update.itemsize,
            label_range=byte_range(label_out) if computes == "labels" else None,
            score_range=byte_range(score_out) if computes == "scores" else None,
            arrays={name: (offset, offset + array.nbytes, array.dtype,
                           array.shape if array.ndim > 1 else None)
                    for (name, array), (_, _, offset) in zip(state.arrays.items(), ranges)},
            given=given)

    def run(self, y_true, preds, sample_weight):
        """Issue the plan on a fresh block (its bytes: a backend array, or a
        torch tensor for torch inputs); None
        (nothing issued) where the batch needs the full path: no samples,
        rows that disagree, an unaligned view."""
        samples = y_true.shape[0]
        if samples == 0 or preds.shape[0] != samples:
            return None
        true_address, preds_address, weight_address = self.addresses
        weight = None
        if self.weighted:
            if sample_weight.shape[0] != samples:
                return None
            weight = np.uint64(weight_address(sample_weight))
        preds_address = preds_address(preds)
        if self.itemsize and preds_address % self.itemsize:
            return None
        torch_template = self.torch_template
        if torch_template is None:
            block = self.template.copy().view(np.uint8)
            base = np.uint64(address(block))
        else:
            block = torch_template.clone()
            base = np.uint64(block.data_ptr())
        record(device_allocations=1)
        partials = None
        if self.partials_size:
            partials = self.backend.zeros(self.partials_size, np.float64)
        if not self.update.run(np.uint64(true_address(y_true)), np.uint64(preds_address), weight,
                               samples * self.positions, 0, allocate=False,
                               state_args=self.state_args.args(base, partials)):
            return None
        launch = self.backend.launch
        for source, expression, grid, threads, args, shared in self.compute:
            launch(source, expression, grid, threads, args.args(base, partials), shared)
        return block


    def label_values(self, block):
        """The label values the compute wrote into ``block`` (its
        :meth:`OnePass.backend_block`; float64, a view)."""
        start, stop = self.label_range
        return block[start:stop].view(np.float64)

    def score_values(self, block):
        """The score values the compute wrote into ``block`` (its
        :meth:`OnePass.backend_block`; float64, a view)."""
        start, stop = self.score_range
        return block[start:stop].view(np.float64)

    def invalid(self, block):
        """The samples the update left out (a 0-d view of the checks of
        ``block``, its :meth:`OnePass.backend_block`)."""
        start, stop, _, _ = self.arrays["checks"]
        return invalid_count(block[start:stop].view(np.uint64))

    def results(self, block, like):
        """``(values, samples left out)`` in the framework of the caller's
        ``like``: the computed values (float64) and a 0-d int64, views of
        ``block``, which is in the caller's framework (torch's for torch inputs)."""
        start, stop = self.label_range or self.score_range
        checks = self.arrays["checks"][0]
        dtypes = self.torch_dtypes
        if dtypes is None:  # NumPy and CuPy
            return block[start:stop].view(np.float64), block[checks:checks + 8].view(np.int64)[0]
        return block[start:stop].view(dtypes[0]), block[checks:checks + 8].view(dtypes[1])[0]

    def state(self, block):
        """The streaming state in ``block`` (views of its
        :meth:`OnePass.backend_block`), as the full path's consumers read it
        (statistics, the matrix)."""
        arrays = {name: block[start:stop].view(dtype) if shape is None
                  else block[start:stop].view(dtype).reshape(shape)
                  for name, (start, stop, dtype, shape) in self.arrays.items()}
        return StreamState.over(self.backend, self.spec, self.kind, arrays)
