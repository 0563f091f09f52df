"""Launchers of ``kernels/streaming.cu``: the streaming state's update and
compute (:class:`metrics_gpu.ClassificationMetrics`), their instantiations,
the config vector the host packs, and the workspace a state owns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from metrics_gpu._formulas.labels import label_metric_size, stream_score_size
from metrics_gpu.backends.kernel_sources import (
    LABEL_TYPES,
    SCORE_MAX_TOP_K,
    SCORE_TARGET_TYPES,
    SCORE_TYPES,
    STREAM_ORDINAL_SHIFT,
    KernelModule,
)
from metrics_gpu._formulas.state import score_sums_size
from metrics_gpu.backends.launchers.base import (
    WARP_SIZE,
    LaunchBase,
    check_rows_per_block,
    ignore_arguments,
)
from metrics_gpu.backends.launchers.reduce_metrics import launch_metrics_from_statistics
from metrics_gpu.backends.launchers.scores import (
    SCORE_MAX_BLOCK_THREADS,
    reads_wide_rows,
    score_group,
    top_k_shared_bytes,
)
from metrics_gpu.backends.stream_batch import StreamBatch

SOURCE = "streaming.cu"
# Targets as training loops give them, predictions as labels of the same
# type or scores of every type, and (weight type, count type): counts and
# integer weights in exact 64-bit integers, float weights in float64. Other
# types are converted first.
STREAM_WEIGHT_COUNTS = (
    ("mg::unit_weight", "unsigned long long"), ("long long", "unsigned long long"),
    ("float", "double"), ("double", "double"),
)
STREAM_COUNT_TYPES = ("unsigned long long", "double")


# kernels/streaming.cu kStreamWideRows, kStreamRanking: what a score
# instantiation compiles in (bits of its last template argument; labels: 0).
STREAM_WIDE_ROWS = 1
STREAM_RANKING = 2
STREAM_ONE_COLUMN = 4  # kStreamOneColumn: a binary head's one column of scores
# The score instantiations' sets of features: rows, wide rows, rows with the
# histogram. Wide rows with the histogram take the rows' instantiation (lanes
# per row, 4-byte loads): their K global atomics a row bound them, not the
# loads, and a fourth set would add a third to the NVRTC gate's time.
STREAM_SCORE_FEATURES = (0, STREAM_WIDE_ROWS, STREAM_RANKING)
# A binary head's column, with and without the histogram: float16, float32
# and float64 (a bfloat16 column is widened to float32 on the host).
STREAM_ONE_COLUMN_FEATURES = (STREAM_ONE_COLUMN, STREAM_ONE_COLUMN | STREAM_RANKING)
ONE_COLUMN_SCORE_TYPES = ("float16", "float32", "float64")


def stream_update_expression(true_type: str, pred_type: str, weight_type: str,
                             count_type: str, features: int = 0) -> str:
    return f"streaming_update<{true_type}, {pred_type}, {weight_type}, {count_type}, {features}>"


def stream_compute_expression(count_type: str) -> str:
    return f"streaming_compute<{count_type}>"


MODULE = KernelModule(SOURCE, (
    *(stream_update_expression(true_type, true_type, weight_type, count_type)
      for true_type in SCORE_TARGET_TYPES
      for weight_type, count_type in STREAM_WEIGHT_COUNTS),
    *(stream_update_expression(true_type, pred_type, weight_type, count_type, features)
      for true_type in SCORE_TARGET_TYPES
      for pred_type in SCORE_TYPES.values()
      for weight_type, count_type in STREAM_WEIGHT_COUNTS
      for features in STREAM_SCORE_FEATURES),
    *(stream_update_expression(true_type, SCORE_TYPES[score_dtype], weight_type, count_type,
                               features)
      for true_type in SCORE_TARGET_TYPES
      for score_dtype in ONE_COLUMN_SCORE_TYPES
      for weight_type, count_type in STREAM_WEIGHT_COUNTS
      for features in STREAM_ONE_COLUMN_FEATURES),
    *(stream_compute_expression(count_type) for count_type in STREAM_COUNT_TYPES),
))

# kernels/streaming.cu enum StreamConfig: the int64 config vector, packed once
# per (state, input layout) and kept on the device.
STREAM_CONFIG = (
    "classes", "inner", "image_stride", "inner_stride", "column_stride", "group",
    "ignore_index", "has_ignore", "from_logits", "clip_eps_bits", "num_top_k",
    *(f"top_k_{i}" for i in range(SCORE_MAX_TOP_K)),
    "bins", "thresholds", "matrix", "privatize", "private_histogram", "class_splits",
    "binary_decision", "binary_cut_bits",
)
# Label states whose 3K + 2 count cells do not fit a block's shared memory
# split the classes between blocks (kernels/streaming.cu kCfgClassSplits):
# each row is then read by `splits` blocks, each adding to its range's cells
# in shared memory. Beyond this many splits the rereads are left to global
# atomics instead.
MAX_CLASS_SPLITS = 8
STREAM_WEIGHT_TYPES = {"int64": "long long", "float32": "float", "float64": "double"}


class StreamWorkspace:
    """What a streaming state owns on a kernel backend besides its state:
    the per-block partials and tickets of the update, the packed configs, and
    the compute outputs. Allocated once; an update allocates nothing more
    unless a batch brings a new input layout (one config) or more rows than
    any before (larger partials)."""

    def __init__(self) -> None:
        # Device arrays (None until the first launch that needs them).
        self.configs: dict[tuple, Any] = {}  # packed config vector per input layout
        self.partials: Any = None
        self.partial_rows = 0
        self.update_ticket: Any = None
        self.moments: Any = None   # the kappa moments as doubles, written by each update
        # An update's weight sum (low 64 bits, and as a double) for the check
        # of integer counts against 2^63; its last block zeroes it again.
        self.batch_weight: Any = None
        self.ones: Any = None      # weights of 1.0 for unweighted batches into float counts
        self.plans: dict[tuple, StreamUpdatePlan] = {}  # the update's launch per input layout
        self.compute: tuple | None = None   # (pooled, ticket): the outputs are fresh each compute


@dataclass
class StreamUpdatePlan:
    """One input layout's ``streaming_update`` launch but the batch: what
    :meth:`StreamingLaunchers.stream_update_plan` worked out once. A batch
    of the layout (its arrays, or their addresses as ``np.uint64``) only
    sizes the grid from its rows and launches (the in-loop hot path,
    :class:`metrics_gpu.ClassificationMetrics`)."""

    launcher: Any
    expression: str
    block: int
    group: int            # threads per row
    score_bytes: int      # shared memory of the score sums per block
    cell_bytes: int
    grid_cap: int         # blocks an SM holds at once with score_bytes each, times SMs
    privatized_grid_cap: int  # the same with the counts in shared memory (0: they do not fit)
    class_splits: int     # blocks that read each row when privatised (MAX_CLASS_SPLITS)
    private_cells: int    # cells a privatised block flushes: 3 ceil(K / class_splits) + 2
    make_config: Any      # (privatize, private_histogram) -> the packed config vector, uploaded
    configs: dict
    # The thresholds histogram in shared memory (kernels/streaming.cu
    # kCfgPrivateHistogram): its cells' bytes, and the rows a block needs
    # for it to pay (0: no histogram, or it does not fit beside the rest).
    histogram_bytes: int
    histogram_rows: int
    # Grid caps and dynamic shared bytes per (privatize, private_histogram).
    grid_caps: dict
    shared: dict
    half: bool            # 16-bit scores, read as their bit patterns
    wide_rows: bool       # rows read 16 bytes a load (needs element-aligned rows)
    itemsize: int         # bytes per score (0: labels)
    float_weights: bool   # integer weights into float counts: converted (no direct launch)
    unit_weights: bool    # float counts without weights: the workspace's ones
    workspace: Any
    state_args: tuple     # the launch's arguments after the config

    def scores_of(self, preds):
        return preds.view(np.uint16) if self.half else preds

    def run(self, y_true, preds, weight, n: int, ordinal: int, stream=None,
            allocate: bool = True, state_args=None) -> bool:
        """Add ``n`` samples: ``y_true``, ``preds`` and ``weight`` as arrays
        of the plan's layout or their device addresses (``np.uint64``); on
        ``stream`` where given (BackendBase.launch). Without ``allocate``,
        launches nothing and returns False where the batch needs a buffer the
        plan does not hold yet (a config, more unit weights): the caller's
        full path, on the caller's device, makes it. ``state_args`` replaces
        the plan's own state (the same arrays elsewhere, as addresses: a
        functional call's fresh buffers, :mod:`metrics_gpu._pipeline.planned`)."""
        if n >= 1 << STREAM_ORDINAL_SHIFT:
            raise ValueError(f"an update takes fewer than 2**{STREAM_ORDINAL_SHIFT} samples, "
                             f"got {n}")
        block_threads = self.launcher.device.block_threads
        # At least one block (no samples still writes the moments and checks).
        grid = min(self.grid_cap, -(-n * self.group // block_threads)) or 1
        # Counts and histogram in shared memory where a block has many more
        # rows than cells to flush at its end (and they fit: a cap > 0).
        key = (self.privatized_grid_cap > 0 and n >= grid * self.private_cells,
               self.histogram_rows > 0 and n >= grid * self.histogram_rows)
        cap = self.grid_caps[key]
        if not cap:  # both do not fit together: the counts alone
            key = (key[0], False)
            cap = self.grid_caps[key]
        if cap < grid:  # no call: the hot path counts them
            grid = cap
        rows_grid = grid
        if key[0] and self.class_splits > 1:
            # Whole groups of blocks, each group reading its rows once per
            # class range (the caps are multiples of the splits).
            rows_grid = max(1, grid // self.class_splits)
            grid = rows_grid * self.class_splits
        check_rows_per_block(n, rows_grid)
        config = self.configs.get(key)
        if config is None:
            if not allocate:
                return False
            config = self.configs[key] = self.make_config(key)
        if self.unit_weights:
            ones = self.workspace.ones
            if not allocate and (ones is None or ones.shape[0] < n):
                return False
            weight = self.launcher._unit_float_weights(self.workspace, n)
        self.launcher.launch(
            SOURCE, self.expression, grid, self.block,
            [y_true, preds, weight, np.int64(n), np.int64(ordinal), config,
             *(self.state_args if state_args is None else state_args)],
            self.shared[key], stream)
        return True

    def layouts(self):
        """The (privatize, private_histogram) shared-memory layouts a batch
        may take (each its own config vector)."""
        return [key for key, cap in self.grid_caps.items() if cap]


def _stream_scalar_args(spec, batch, group, clip_eps, privatize, thresholds, score_sums=True,
                        private_histogram=False, class_splits=1):
    """The config vector of one (state, input layout); ``batch`` None gives
    the one compute reads for a state restored before any update."""
    if batch is None:
        batch = StreamBatch(y_true=np.zeros(0, np.int64), preds=None, sample_weight=None, n=0,
                            score_dtype="float64")
    ignore, has_ignore = ignore_arguments(spec["ignore_index"], batch.y_true.dtype)
    top_k = list(spec["top_k"]) if score_sums else []  # a state without score sums has none
    values = dict(
        classes=spec["num_classes"], inner=batch.inner, image_stride=batch.image_stride,
        inner_stride=batch.inner_stride, column_stride=batch.column_stride, group=group,
        ignore_index=int(ignore), has_ignore=int(has_ignore), from_logits=int(spec["from_logits"]),
        clip_eps_bits=int(np.float64(clip_eps).view(np.int64)), num_top_k=len(top_k),
        bins=spec["n_bins"] if score_sums else 0, thresholds=thresholds if score_sums else 0,
        matrix=int(spec["keep_matrix"]), privatize=int(privatize),
        private_histogram=int(private_histogram), class_splits=class_splits,
        binary_decision=int(spec.get("binary_cut") is not None),
        binary_cut_bits=int(np.float64(spec.get("binary_cut") or 0.0).view(np.int64)),
        **{f"top_k_{i}": v for i, v in enumerate(top_k + [0] * (SCORE_MAX_TOP_K - len(top_k)))},
    )
    return np.array([values[name] for name in STREAM_CONFIG], dtype=np.int64)


class StreamingLaunchers(LaunchBase):
    """One launch per update; at most two per compute."""

    def stream_update(self, state: dict, workspace: StreamWorkspace, batch, *, spec: dict,
                      ordinal: int, clip_eps: float) -> None:
        """One launch of ``streaming_update``: the batch added to ``state``.

        No host sync, and no allocation once the workspace has seen the
        batch's layout and size. The launch's last block also writes the
        state's kappa moments as doubles into the workspace, and for integer
        counts keeps the update in ``checks`` when it took them past 2^63 - 1.
        """
        plan = self.stream_update_plan(state, workspace, batch, spec=spec, clip_eps=clip_eps)
        weight = batch.sample_weight
        if plan.float_weights:
            weight = self.contiguous(weight.astype(np.float64))
        plan.run(batch.y_true, plan.scores_of(batch.preds), weight, batch.n, ordinal)

    def stream_update_plan(self, state: dict, workspace: StreamWorkspace, batch, *, spec: dict,
                           clip_eps: float) -> StreamUpdatePlan:
        """Everything of a batch's ``streaming_update`` launch that its layout
        fixes (instantiation, block, grid limits, the config vectors, the
        state's arrays), made once per layout and kept in the workspace: a
        later batch of the layout only sizes the grid and launches."""
        device = self.device
        k = spec["num_classes"]
        integer = state["counts"].dtype == np.uint64
        score_sums = state.get("scores") is not None
        weight, weight_type, float_weights = batch.sample_weight, "mg::unit_weight", False
        if weight is not None:
            weight_type = STREAM_WEIGHT_TYPES[weight.dtype.name]
            if not integer and weight_type == "long long":
                weight_type, float_weights = "double", True
        elif not integer:
            weight_type = "double"
        count_type = "unsigned long long" if integer else "double"
        true_type = LABEL_TYPES[batch.y_true.dtype.name]
        if batch.scores:
            pred_type = SCORE_TYPES[batch.score_dtype]
            half = batch.score_dtype in ("float16", "bfloat16")
            preds = batch.preds.view(np.uint16) if half else batch.preds
            if (batch.inner > 1 and batch.inner_stride == 1) or batch.binary_column:
                # Channel-first maps: a thread per position, so a warp's
                # reads of each class are 32 consecutive scores. A binary
                # head's column: a thread per row, 32 consecutive scores.
                group = 1
            else:
                group = score_group(k)
            # A warp per row with 16-byte loads, as fused_logits_wide's warp
            # tile (not with the histogram: STREAM_SCORE_FEATURES).
            wide_rows = group == WARP_SIZE and not (score_sums and spec["thresholds"]) and \
                reads_wide_rows(k, batch.column_stride, device.data_pointer(preds),
                                preds.dtype.itemsize)
            itemsize = preds.dtype.itemsize
            features = ((STREAM_WIDE_ROWS if wide_rows else 0)
                        | (STREAM_RANKING if score_sums and spec["thresholds"] else 0)
                        | (STREAM_ONE_COLUMN if batch.binary_column else 0))
        else:
            pred_type, group, wide_rows, half, itemsize, features = (true_type, 1, False, False,
                                                                     0, 0)
        layout = (batch.inner, batch.image_stride, batch.inner_stride, batch.column_stride, group,
                  str(batch.y_true.dtype), clip_eps, batch.scores, wide_rows, features, weight_type,
                  pred_type, count_type,
                  # the weights as given: none, or their type (an int64 array into
                  # float counts is converted, a float64 one is not)
                  None if weight is None else weight.dtype.name)
        plan = workspace.plans.get(layout)
        if plan is not None:
            return plan
        block = min(device.block_threads, SCORE_MAX_BLOCK_THREADS)
        n_bins = spec["n_bins"] if score_sums else 0
        score_bytes = 3 * n_bins * 8 + top_k_shared_bytes(
            len(spec["top_k"]) if score_sums else 0, block)
        limit = device.shared_memory_per_block_optin
        # A block's cells: 32-bit for unweighted labels into integer counts
        # (kernels/streaming.cu PrivateCell), 8 bytes otherwise. Label states
        # split their classes between blocks where the cells do not fit
        # (MAX_CLASS_SPLITS); scores and everything that fits: one.
        cell_size = 4 if not batch.scores and integer and weight is None else 8
        class_splits = 1
        if not batch.scores:
            class_splits = next((s for s in range(1, MAX_CLASS_SPLITS + 1)
                                 if (3 * -(-k // s) + 2) * cell_size + score_bytes <= limit), 1)
        private_cells = 3 * -(-k // class_splits) + 2
        cell_bytes = private_cells * cell_size
        if workspace.update_ticket is None:
            workspace.update_ticket = self.zeros(1, np.uint32)
            workspace.moments = self.zeros(2, np.float64)
            workspace.batch_weight = self.zeros(2, np.uint64)
        huge = 1 << STREAM_ORDINAL_SHIFT
        if score_sums and workspace.partial_rows < self._grid(huge, score_bytes):
            # Sized once for the largest grid this device launches.
            workspace.partial_rows = self._grid(huge, score_bytes)
            workspace.partials = self.zeros(
                workspace.partial_rows * score_sums_size(len(spec["top_k"]), n_bins), np.float64)
        # Privatised counts pay off when a block has many more rows than cells
        # to flush into the state at its end; the thresholds histogram when
        # its rows' K atomics each outnumber its 2 K H cells (2H rows).
        ranking = bool(features & STREAM_RANKING)
        histogram_bytes = 2 * k * spec["thresholds"] * 8 if ranking else 0
        shared = {}
        grid_caps = {}
        for privatize in (False, True):
            for private_histogram in (False, True):
                key = (privatize, private_histogram)
                shared[key] = (score_bytes + (cell_bytes if privatize else 0)
                               + (histogram_bytes if private_histogram else 0))
                fits = shared[key] <= limit and (histogram_bytes > 0 or not private_histogram)
                grid_caps[key] = self._grid(huge, shared[key]) if fits else 0
                if privatize and class_splits > 1 and grid_caps[key]:
                    grid_caps[key] = max(class_splits,
                                         grid_caps[key] // class_splits * class_splits)

        def config(key):
            privatize, private_histogram = key
            return self.upload(_stream_scalar_args(
                spec, batch, group, clip_eps, privatize, spec["thresholds"], score_sums,
                private_histogram, class_splits if privatize else 1))

        plan = workspace.plans[layout] = StreamUpdatePlan(
            launcher=self,
            expression=stream_update_expression(true_type, pred_type, weight_type, count_type,
                                                features),
            block=block, group=group, score_bytes=score_bytes,
            cell_bytes=cell_bytes,
            grid_cap=grid_caps[False, False],
            privatized_grid_cap=grid_caps[True, False],
            class_splits=class_splits, private_cells=private_cells,
            make_config=config, configs={},
            histogram_bytes=histogram_bytes,
            histogram_rows=2 * spec["thresholds"] if grid_caps[False, True] else 0,
            grid_caps=grid_caps, shared=shared,
            half=half, wide_rows=wide_rows, itemsize=itemsize,
            float_weights=float_weights, unit_weights=weight is None and not integer,
            workspace=workspace,
            state_args=(state["counts"], state.get("matrix"),
                        state["moments"] if integer else None,
                        None if integer else state["moments"], state.get("histogram"),
                        state.get("scores"), workspace.partials if score_sums else None,
                        workspace.update_ticket, state["checks"], workspace.moments,
                        workspace.batch_weight))
        return plan

    def _unit_float_weights(self, workspace: StreamWorkspace, n: int):
        """Weights of 1.0 for an unweighted batch into a state of float counts
        (kept and grown in the workspace)."""
        ones = workspace.ones
        if ones is None or ones.shape[0] < n:
            ones = workspace.ones = self.upload(np.ones(max(n, 1), dtype=np.float64))
        return ones[:n]

    def stream_compute(self, state: dict, workspace: StreamWorkspace, *, spec: dict,
                       labels: bool = True, scores: bool = True):
        """A state's metrics in at most two launches: ``streaming_compute``
        (score metrics, binned ranking, and the kappa moments as doubles) when
        ``scores``, then ``label_metrics_from_statistics`` when ``labels``.
        Returns ``(label values, score values)`` on the device (layouts of
        :mod:`metrics_gpu._formulas.labels`)."""
        device = self.device
        k = spec["num_classes"]
        integer = state["counts"].dtype == np.uint64
        score_state = state.get("scores")
        top_k = len(spec["top_k"]) if score_state is not None else 0
        n_bins = spec["n_bins"] if score_state is not None else 0
        thresholds = spec["thresholds"] if score_state is not None else 0
        if workspace.moments is None:
            workspace.moments = self.zeros(2, np.float64)
        if workspace.compute is None:
            workspace.compute = (self.zeros(max(2 * thresholds, 1), np.float64),
                                 self.zeros(1, np.uint32))
        pooled, ticket = workspace.compute
        # The values are the report's own: a later compute of the state (the
        # next epoch's, the next step's) must not change a report already
        # handed out, whose 0-d tensors are views of them.
        score_out = self.zeros(stream_score_size(top_k, n_bins, k, thresholds), np.float64)
        label_out = self.zeros(label_metric_size(k), np.float64)
        if scores:
            # Any config of an update holds what compute reads (K, top_k, bins,
            # thresholds); a state loaded before its first update gets its own.
            config = next(iter(workspace.configs.values()), None)
            if config is None:
                config = workspace.configs[("compute",)] = self.upload(_stream_scalar_args(
                    spec, None, 1, 0.0, False, thresholds, score_state is not None))
            # Classes per block of the binned ranking areas: streaming_compute's
            # launch bound (kScoreBlockThreads).
            block = min(device.block_threads, SCORE_MAX_BLOCK_THREADS)
            grid = max(1, -(-k // block)) if thresholds else 1
            self.launch(
                SOURCE,
                stream_compute_expression("unsigned long long" if integer else "double"),
                grid, block,
                [config, score_state, state.get("histogram") if thresholds else None,
                 state["moments"] if integer else None, None if integer else state["moments"],
                 workspace.moments, pooled, ticket, score_out],
            )
        if labels:
            counts = state["counts"].view(np.int64) if integer else state["counts"]
            launch_metrics_from_statistics(
                self, counts[:k], counts[k:2 * k], counts[2 * k:3 * k], counts[3 * k:3 * k + 1],
                counts[3 * k + 1:3 * k + 2], k, None, workspace.moments[0:1],
                workspace.moments[1:2], label_out)
        return label_out, score_out
