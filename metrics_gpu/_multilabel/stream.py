"""``MultilabelMetrics``: the streaming state of multilabel classification.

The state is O(L) and row-separable: per label tp, fp, fn, tn (uint64
counts, float64 once a batch has weights), and sums over rows (the weight,
the rows with every label right, the wrong and counted cells, and for each
set-wise rate of a row its weighted values where defined and the weight of
the rows where it is 0/0: ``average="samples"`` for every ``zero_division``),
plus the checks (rows left out, the first, why). An update is one launch of
``kernels/multilabel.cu`` on a kernel backend (after the first batch of an
input layout: no allocation, no conversion, nothing read back), or
:func:`multilabel_update_reference` on the NumPy backend: the reference the
kernel is tested against. ``compute`` reads the O(L) state back once and
evaluates with the functional API's formulas (:mod:`metrics_gpu._multilabel.counts`,
:mod:`metrics_gpu._formulas.labels`).

A separate class, not a ``task=`` of :class:`~metrics_gpu.ClassificationMetrics`:
the two states share nothing (K x K counts and score sums there, per-label
2 x 2 counts and row sums here), and torchmetrics users know the split
(``MulticlassF1Score`` / ``MultilabelF1Score``).
"""

from __future__ import annotations

import math
import numbers
import sys
from typing import Any, Mapping

import numpy as np

from metrics_gpu._formulas import labels as F
from metrics_gpu._formulas.labels import _averaged_rate, _prfs_of_counts
from metrics_gpu._pipeline import torch_compile as _torch_compile
from metrics_gpu.backends.selection import get_backend_implementation, is_device_array, resolve_backend
from metrics_gpu._pipeline.planned import address, address_reader, array_layout
from metrics_gpu._pipeline.mapping import MetricMapping, missing_metric
from metrics_gpu._multilabel import ranking as R
from metrics_gpu._multilabel.counts import _as_counts, f_score_rate, samples_mean
from metrics_gpu._multilabel.inputs import _ignore_value, kernel_input
from metrics_gpu._pipeline.stages import MAX_THRESHOLDS
from metrics_gpu._pipeline.distributed import initialised_distributed
from metrics_gpu._validation import (
    check_int_range,
    check_score_kind,
    host_tensor,
    label_probabilities_read_as_logits,
    probability_rows,
    score_cut,
    to_numpy,
)
from metrics_gpu.backends.numpy_backend import calibration_bin
from metrics_gpu.backends.launchers.multilabel import (
    BFLOAT16_CODE,
    CHECK_BITS,
    ELEMENT_CODES,
    NO_ROW,
    PREDICTION_MODES,
    ROW,
    ROW_SLOTS,
    WEIGHT_DTYPES,
    launch_update,
    refused_arguments,
)
from metrics_gpu.plot import (
    binned_curves,
    chosen_curves,
    plot_per_label,
    plot_precision_recall,
    plot_roc,
)

# The exact label-ranking metrics (ranking=True): weighted sums of each row's value.
RANKING_SLOTS = R.LABEL_RANKING_METRICS
VALIDATE_MODES = ("deferred", "eager", False)
STATE_VERSION = 2  # 2: the rows with a 0/0 rate (ROW_SLOTS' last three)
AVERAGES = ("micro", "macro", "weighted", "samples")
_MAX_LAYOUTS = 8
# Cells of the binned metrics' (2, L, thresholds) histogram (8 bytes each).
MAX_HISTOGRAM_CELLS = 1 << 28


def multilabel_update_reference(y_true, preds, weight, *, mode: str, cut: float,
                                ignore: float | None, f_beta2: float, row_offset: int = 0,
                                thresholds: int = 0):
    """The kernel's update on NumPy arrays: ``(counts (4, L), row sums,
    checks, histogram (2, L, thresholds) or None)`` of one batch (counts and
    histogram float64 with weights, else uint64).

    ``y_true`` holds 0/1 (or ``ignore``), ``preds`` 0/1 labels (``mode``
    "labels") or scores, positive above ``cut``; a row holding anything else,
    or with a negative or non-finite weight, is left out and counted."""
    raw = np.asarray(y_true)
    # int8 as the kernel reads it (uint8): ignore_index was mapped the same way.
    true = (raw.view(np.uint8) if raw.dtype == np.int8 else raw).astype(np.float64)
    pred = np.asarray(preds).astype(np.float64)
    rows = true.shape[0]
    ignored = (true == ignore) if ignore is not None else np.zeros(true.shape, bool)
    bad_true = ~((true == 0) | (true == 1) | ignored)
    if mode == "labels":
        bad_pred = ~((pred == 0) | (pred == 1))
        positive = pred == 1
    else:
        with np.errstate(invalid="ignore"):
            bad_pred = ~np.isfinite(pred)
            if mode == "probabilities":
                bad_pred |= (pred < 0) | (pred > 1)
            positive = pred > cut
    reasons = np.zeros(rows, np.uint64)
    reasons[bad_true.any(axis=1)] |= np.uint64(1)
    reasons[bad_pred.any(axis=1)] |= np.uint64(2)
    w = np.ones(rows) if weight is None else np.asarray(weight, dtype=np.float64)
    if weight is not None:
        with np.errstate(invalid="ignore"):
            reasons[~(np.isfinite(w) & (w >= 0))] |= np.uint64(4)
    left_out = reasons != 0
    row_weight = w  # every row's, before the rows left out are dropped below
    counted = ~ignored & ~left_out[:, None]
    target = true == 1
    cells = (target & positive, ~target & positive, target & ~positive, ~target & ~positive)
    if weight is None:
        counts = np.stack([(c & counted).sum(axis=0) for c in cells]).astype(np.uint64)
    else:
        wk = np.where(left_out, 0.0, w)
        counts = np.stack([wk @ (c & counted) for c in cells])
    tp, fp, fn, tn = ((c & counted).sum(axis=1).astype(np.float64) for c in cells)
    keep = ~left_out
    tp, fp, fn, tn, w = tp[keep], fp[keep], fn[keep], tn[keep], w[keep]

    def rate(numerator, denominator):
        defined = denominator > 0
        value = np.divide(numerator, denominator, out=np.zeros_like(numerator), where=defined)
        return (w * value).sum(), w[defined].sum()

    sums = np.zeros(len(ROW_SLOTS))
    sums[ROW["weight"]] = w.sum()
    sums[ROW["exact"]] = w[(fp + fn) == 0].sum()
    sums[ROW["wrong_cells"]] = (w * (fp + fn)).sum()
    sums[ROW["counted_cells"]] = (w * (tp + fp + fn + tn)).sum()
    for name, numerator, denominator in (
            ("precision", tp, tp + fp), ("recall", tp, tp + fn),
            ("f_score", (1 + f_beta2) * tp, (1 + f_beta2) * tp + f_beta2 * fn + fp),
            ("jaccard", tp, tp + fp + fn)):
        sums[ROW[name]], sums[ROW[name + "_defined"]] = rate(numerator, denominator)
    sums[ROW["rows"]] = keep.sum()
    # A row of weight 0 has no weighted labels (scikit-learn's samplewise
    # counts are weights times counts): its rates are undefined.
    weightless = w == 0
    sums[ROW["rows_no_predicted"]] = (((tp + fp) == 0) | weightless).sum()
    sums[ROW["rows_no_true"]] = (((tp + fn) == 0) | weightless).sum()
    sums[ROW["rows_no_labels"]] = (((tp + fp + fn) == 0) | weightless).sum()
    checks = np.array([left_out.sum(), NO_ROW, 0], dtype=np.uint64)
    if left_out.any():
        checks[1] = np.uint64(int(np.flatnonzero(left_out)[0]) + row_offset)
        checks[2] = np.bitwise_or.reduce(reasons)
    histogram = None
    if thresholds:
        with np.errstate(over="ignore", invalid="ignore"):
            probability = 1.0 / (1.0 + np.exp(-pred)) if mode == "logits" else pred
        bins = calibration_bin(np.where(counted, probability, 0.0), thresholds)
        cell_weight = np.broadcast_to(np.where(left_out, 0.0, row_weight)[:, None], true.shape)
        histogram = np.zeros((2, true.shape[1], thresholds))
        label = np.broadcast_to(np.arange(true.shape[1]), true.shape)
        for side, target_value in ((0, True), (1, False)):
            chosen = counted & (target == target_value)
            np.add.at(histogram[side], (label[chosen], bins[chosen]), cell_weight[chosen])
        if weight is None:
            histogram = histogram.astype(np.uint64)
    return counts, sums, checks, histogram


class _Layout:
    """An input layout's launch, worked out by its first batch: the element
    codes, row strides and how to read each input's address."""

    __slots__ = ("true_code", "true_stride", "pred_code", "pred_stride", "weight_code",
                 "ignore", "addresses")

    def __init__(self, true_code, true_stride, pred_code, pred_stride, weight_code, ignore,
                 given):
        self.true_code, self.true_stride = true_code, true_stride
        self.pred_code, self.pred_stride = pred_code, pred_stride
        self.weight_code, self.ignore = weight_code, ignore
        self.addresses = tuple(None if a is None else address_reader(a) for a in given)


class MultilabelMetrics:
    """Streaming multilabel metrics for a training loop: one launch per update.

    Accumulates per-label counts and per-row sums of ``(N, L)`` batches, so
    that :meth:`compute` gives scikit-learn's multilabel values (subset
    accuracy, Hamming loss, precision / recall / F-beta / Jaccard with
    ``average`` micro, macro, weighted, samples and per label, and
    ``multilabel_confusion_matrix``) over everything added. The state lives
    where the first batch lives (a GPU's tensors: the ``cuda`` backend).

    Parameters
    ----------
    num_labels : int
        L, the number of labels (columns).
    threshold : float, default 0.5
        Score predictions count as positive above it (probabilities), or
        where ``sigmoid(x)`` is above it (logits: ``x > log(t / (1 - t))``,
        that cut in float64), compared by value: each score widened
        exactly to float64, whatever its dtype, as the functional calls
        compare on every backend. Integer and bool predictions are 0/1
        labels and ignore it.
    scores : {"logits", "probabilities"}, default "logits"
        What float predictions are: declared, never guessed from the values
        (logits by default, as :class:`ClassificationMetrics` and the
        command line). Probabilities must lie in [0, 1]; logits must be
        finite. Scores read as logits of which at least 99% of the rows hold
        values in [0, 1] only warn, once, at the first update (where that
        reads nothing more: a host batch, or ``validate="eager"``): they are
        most likely probabilities.
    beta : float, default 1.0
        The F-beta of ``compute()["f_score"]`` (F1 by default).
    zero_division : {0.0, 1.0, nan}, default 0.0
        A rate's value where it is 0/0, as scikit-learn's.
    ignore_index : int, optional
        A target value to leave out, cell by cell (torchmetrics'): such a
        cell counts in no label and in no row's rates. 0 and 1 are refused.
    thresholds : int, optional
        H >= 2: also each label's binned ROC AUC and average precision (and
        their macro, weighted and micro averages, with a bound of their
        distance to the exact values), from a histogram of each label's
        probability (the sigmoid of a logit) in H equal bins, filled by the
        same launch; ``curves()`` and ``plot_roc`` / ``plot_precision_recall``
        on the report.
    ranking : bool, default False
        Also the exact label-ranking metrics of the scores
        (``label_ranking_average_precision_score``, ``label_ranking_loss``,
        ``coverage_error``, scikit-learn's ties), summed over rows. Each
        update then sorts every row (a few array operations, not the one
        launch); float predictions only, no ``ignore_index``.
    validate : {"deferred", "eager", False}, default "deferred"
        Rows holding a target other than 0/1 (or ``ignore_index``), a
        prediction the declared kind refuses, or a negative or non-finite
        weight are left out of the state and counted. "deferred": the next
        ``compute()`` raises ``ValueError`` naming the first such row and
        argument; "eager": the update raises (one read back per update);
        False: ``compute().invalid`` counts them.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import MultilabelMetrics
    >>> metrics = MultilabelMetrics(3, scores="probabilities")
    >>> metrics.update(np.array([[1, 0, 1], [0, 1, 0]]), np.array([[0.9, 0.2, 0.4], [0.1, 0.8, 0.3]]))
    >>> metrics.update(np.array([[1, 1, 0]]), np.array([[0.7, 0.6, 0.1]]))
    >>> report = metrics.compute()
    >>> round(float(report["subset_accuracy"]), 4), round(float(report["f1_samples"]), 4)
    (0.6667, 0.8889)
    >>> report.confusion_matrix[0]  # label 0: [[tn, fp], [fn, tp]]
    array([[1, 0],
           [0, 2]])
    """

    # Whether the first batch of logits is checked for probabilities (the
    # file readers check every row themselves and warn once).
    _warns_of_probabilities = True

    def __init__(self, num_labels: int, *, threshold: float = 0.5,
                 scores: str = "logits", beta: float = 1.0,
                 zero_division: float = 0.0, ignore_index: int | None = None,
                 thresholds: int | None = None, ranking: bool = False,
                 validate: Any = "deferred") -> None:
        if isinstance(num_labels, bool) or not isinstance(num_labels, numbers.Integral) or \
                num_labels < 1:
            raise ValueError(f"num_labels must be an integer >= 1, got {num_labels!r}")
        check_score_kind(scores, threshold)
        if isinstance(beta, bool) or not isinstance(beta, numbers.Real) or not beta >= 0:
            raise ValueError(f"beta must be a number >= 0, got {beta!r}")
        if not (isinstance(zero_division, numbers.Real) and not isinstance(zero_division, bool)
                and (zero_division in (0, 1) or math.isnan(zero_division))):
            raise ValueError(f"zero_division must be 0.0, 1.0 or nan, got {zero_division!r}")
        if ignore_index is not None and (isinstance(ignore_index, bool) or not isinstance(
                ignore_index, numbers.Integral) or ignore_index in (0, 1)):
            raise ValueError("ignore_index must be an integer other than 0 and 1 (the target "
                             f"values), or None; got {ignore_index!r}")
        if not (validate is False or validate in ("deferred", "eager")):
            raise ValueError(f"validate must be one of {VALIDATE_MODES}, got {validate!r}")
        thresholds = check_int_range(thresholds, "thresholds", 2, MAX_THRESHOLDS,
                                     allow_none=True)
        if thresholds and 2 * int(num_labels) * thresholds > MAX_HISTOGRAM_CELLS:
            raise ValueError(
                f"thresholds={thresholds} with num_labels={num_labels} makes a histogram of "
                f"{2 * int(num_labels) * thresholds} cells, more than the {MAX_HISTOGRAM_CELLS} "
                "(2 GiB) a state may hold: take fewer thresholds")
        if not isinstance(ranking, bool):
            raise ValueError(f"ranking must be True or False, got {ranking!r}")
        if ranking and ignore_index is not None:
            raise ValueError("ranking=True takes no ignore_index: a row's label ranking is over "
                             "all of its L labels")
        self._spec: dict[str, Any] = {"num_labels": int(num_labels), "threshold": float(threshold),
                      "scores": scores, "beta": float(beta),
                      "zero_division": float(zero_division),
                      "ignore_index": None if ignore_index is None else int(ignore_index),
                      "ranking": ranking, "thresholds": thresholds}
        self._thresholds: int = thresholds or 0
        self.validate: Any = validate
        self._cut: float = score_cut(float(threshold), scores)
        self._f_beta2: float = 1.0 if math.isinf(beta) else float(beta) ** 2
        self._backend: Any = None
        self._arrays: dict[str, Any] | None = None
        self._like: Any = None
        self._layouts: dict[tuple, _Layout] = {}
        self._local: tuple[dict[str, Any] | None, int] | None = None
        self.reset()
        _torch_compile.traceable(self)

    def __getstate__(self) -> dict[str, Any]:
        """What a copy or a pickle holds: the backend by name (a kernel
        backend holds its device's compiled modules) and no launch layouts
        (the copy's next batch makes them); the arrays as they are."""
        held = self.__dict__.copy()
        held.update(_layouts={},
                    _backend=None if self._backend is None else self._backend.name)
        return held

    def __setstate__(self, held: dict[str, Any]) -> None:
        """A copy or an unpickled object: its backend again, traceable under
        its own id."""
        self.__dict__.update(held)
        name = held["_backend"]
        self._backend = None if name is None else get_backend_implementation(name)
        _torch_compile.traceable(self)

    @property
    def num_labels(self) -> int:
        """L, the number of labels the state counts."""
        return self._spec["num_labels"]

    # -- state ------------------------------------------------------------------

    def reset(self) -> None:
        """Forget every update (the state's arrays are zeroed in place)."""
        self._updates = 0
        self._rows_seen = 0
        self._local = None
        if self._arrays is None:
            return
        backend = self._backend
        for name, array in self._arrays.items():
            backend.clear(array)
        self._arrays["checks"][1:2] = backend.asarray(np.array([NO_ROW], np.uint64))

    def _allocate(self, backend, weighted: bool) -> dict[str, Any]:
        self._backend = backend
        self._arrays = {
            "counts": backend.zeros(4 * self.num_labels, np.float64 if weighted else np.uint64),
            "rows": backend.zeros(len(ROW_SLOTS), np.float64),
            "checks": backend.asarray(np.array([0, NO_ROW, 0], np.uint64)),
        }
        if self._spec["ranking"]:
            self._arrays["ranking"] = backend.zeros(len(RANKING_SLOTS), np.float64)
        if self._spec["thresholds"]:
            self._arrays["histogram"] = backend.zeros(
                2 * self.num_labels * self._spec["thresholds"],
                np.float64 if weighted else np.uint64)
        return self._arrays

    def _promote(self) -> None:
        """Counts (and the histogram) as float64 from now on (the first
        weighted batch)."""
        arrays = self._arrays
        assert arrays is not None
        if arrays["counts"].dtype != np.float64:
            for name in ("counts", "histogram"):
                if name in arrays:
                    arrays[name] = arrays[name].astype(np.float64)
            self._layouts.clear()  # their launches wrote the uint64 counts

    def _own_state(self) -> None:
        if self._local is not None:
            (self._arrays, self._updates), self._local = self._local, None

    # -- update -----------------------------------------------------------------

    @_torch_compile.inlined
    def update(self, y_true: Any, preds: Any, sample_weight: Any = None) -> None:
        """Add a batch.

        On a GPU: one kernel launch on the caller's stream, no host sync.
        Inside ``torch.compile`` (``fullgraph=True`` included), the update of
        torch tensors is one operator of the graph, ``metrics_gpu::update``,
        which runs this same update when the graph runs.

        Parameters
        ----------
        y_true : array-like of shape (N, L)
            0/1 label indicators (any integer, bool or float dtype), or
            ``ignore_index``.
        preds : array-like of shape (N, L)
            0/1 labels (integer or bool dtype), or scores (float dtype) of
            the declared kind.
        sample_weight : array-like of shape (N,), optional
            Non-negative weights of the rows.

        Returns
        -------
        None

        Raises
        ------
        ValueError
            Shapes that disagree, or L other than ``num_labels``; with
            ``validate="eager"``, a row holding a value the state refuses.
        """
        if _torch_compile.compiling():  # Dynamo is tracing: the graph gets an operator
            return _torch_compile.traced_update(self, y_true, preds, sample_weight, None)
        self._own_state()
        key = (array_layout(y_true), array_layout(preds),
               None if sample_weight is None else array_layout(sample_weight))
        layout = self._layouts.get(key)
        if layout is not None and self._planned_update(layout, y_true, preds, sample_weight):
            return
        self._full_update(key, y_true, preds, sample_weight)

    def _check_shapes(self, y_true, preds, sample_weight) -> int:
        true_shape, pred_shape = tuple(np.shape(y_true)), tuple(np.shape(preds))
        if len(true_shape) != 2 or true_shape != pred_shape:
            raise ValueError(f"y_true and preds must be (N, L) arrays of one shape; got "
                             f"{true_shape} and {pred_shape}")
        if true_shape[1] != self.num_labels:
            raise ValueError(f"y_true has {true_shape[1]} labels (columns); this state counts "
                             f"num_labels={self.num_labels}")
        if sample_weight is not None and tuple(np.shape(sample_weight)) != true_shape[:1]:
            raise ValueError(f"sample_weight must have shape ({true_shape[0]},), got "
                             f"{tuple(np.shape(sample_weight))}")
        return true_shape[0]

    def _planned_update(self, layout: _Layout, y_true, preds, sample_weight) -> bool:
        """The launch of a known layout: addresses read, one launch; False
        (nothing done) where the batch needs the full path."""
        rows = y_true.shape[0]
        if rows == 0 or preds.shape[0] != rows or y_true.shape[1] != self.num_labels or (
                sample_weight is not None and sample_weight.shape[0] != rows):
            return False
        backend, arrays = self._backend, self._arrays
        assert arrays is not None  # a layout is kept only after the first batch
        true_address, pred_address, weight_address = layout.addresses
        weight = None if sample_weight is None else np.uint64(weight_address(sample_weight))
        launch_update(
            backend, np.uint64(true_address(y_true)), layout.true_code, layout.true_stride,
            np.uint64(pred_address(preds)), layout.pred_code, layout.pred_stride,
            self._mode_of(layout.pred_code), self._cut, weight, layout.weight_code,
            layout.ignore, rows, self.num_labels, arrays["counts"].dtype == np.float64,
            self._f_beta2, self._rows_seen, self._thresholds, arrays["counts"], arrays["rows"],
            arrays["checks"], arrays.get("histogram"),
            stream=backend.device.launch_stream(y_true))
        self._rows_seen += rows
        self._updates += 1
        if self.validate == "eager":
            self._raise_invalid()
        return True

    def _warn_if_probabilities(self, backend, preds) -> None:
        """Warn when the first batch of scores read as logits looks like
        per-label probabilities (:func:`metrics_gpu._validation.probability_rows`
        with no row sums): where that reads nothing more, a host batch or
        ``validate="eager"``."""
        if (self._spec["scores"] != "logits" or not self._warns_of_probabilities
                or (is_device_array(preds) and self.validate != "eager")):
            return
        values = _backend_values(preds, backend)
        if values.dtype.kind != "f" and values.dtype.name != "bfloat16":
            return  # 0/1 labels
        found = probability_rows(values, backend, sums=False)
        if found is not None:
            F.warn(label_probabilities_read_as_logits(
                "preds", "scores='probabilities'", rows=found, total=int(values.shape[0])),
                UserWarning)

    def _mode_of(self, pred_code: int) -> int:
        if pred_code in (ELEMENT_CODES["float32"], ELEMENT_CODES["float64"],
                         ELEMENT_CODES["float16"], BFLOAT16_CODE):
            return PREDICTION_MODES[self._spec["scores"]]
        return PREDICTION_MODES["labels"]

    def _full_update(self, key, y_true, preds, sample_weight) -> None:
        rows = self._check_shapes(y_true, preds, sample_weight)
        if rows == 0:
            return
        ranking = self._spec["ranking"]
        if ranking and np.dtype(str(preds.dtype).replace("torch.", "")).kind != "f":
            raise ValueError("ranking=True ranks the labels by their scores: preds must be "
                             f"float scores, got dtype {preds.dtype}")
        backend: Any = self._backend or resolve_backend(y_true, preds, sample_weight)
        if self._arrays is None:
            self._warn_if_probabilities(backend, preds)
            self._like = y_true
            self._allocate(backend, sample_weight is not None)
        elif sample_weight is not None:
            self._promote()
        arrays = self._arrays
        assert arrays is not None
        if backend.name == "numpy":
            true, pred = (_host_values(a) for a in (y_true, preds))
            weight = None if sample_weight is None else _host_values(sample_weight)
            mode = "labels" if pred.dtype.kind in "biu" else self._spec["scores"]
            counts, sums, checks, histogram = multilabel_update_reference(
                true, pred, weight, mode=mode, cut=self._cut,
                ignore=_ignore_value(self._spec["ignore_index"], true.dtype),
                f_beta2=self._f_beta2, row_offset=self._rows_seen,
                thresholds=self._spec["thresholds"] or 0)
            added = {"counts": counts, "rows": sums, "checks": checks}
            if histogram is not None:
                added["histogram"] = histogram
            if "ranking" in arrays:
                added["ranking"] = np.zeros(len(RANKING_SLOTS))
            _add_state(self, added)
        else:
            true, true_code = kernel_input(y_true, backend, "y_true")
            pred, pred_code = kernel_input(preds, backend, "preds")
            weight = None
            if sample_weight is not None:
                weight = backend.asarray(host_tensor(sample_weight))
                if weight.dtype.name not in WEIGHT_DTYPES:
                    weight = weight.astype(np.float64)
            ignore = _ignore_value(self._spec["ignore_index"], true.dtype)
            with _on_stream(backend, y_true):
                backend.multilabel_update(
                    true, true_code, pred, pred_code, weight, mode=self._mode_of(pred_code),
                    cut=self._cut, ignore=ignore, f_beta2=self._f_beta2,
                    row_offset=self._rows_seen, counts=arrays["counts"], row_sums=arrays["rows"],
                    checks=arrays["checks"], histogram=arrays.get("histogram"))
            given = (y_true, preds, sample_weight)
            read = (true, pred, weight)
            pointer = backend.device.data_pointer
            # A plan only where the kernel read the caller's arrays as they are
            # (and the update is the kernel's alone: not with ranking=True).
            if not ranking and all(a is None or address(a) == pointer(b) for a, b in zip(given, read)) and \
                    None not in key[:2] and len(self._layouts) < _MAX_LAYOUTS:
                self._layouts[key] = _Layout(
                    true_code, true.strides[0] // true.itemsize, pred_code,
                    pred.strides[0] // pred.itemsize,
                    0 if weight is None else ELEMENT_CODES[weight.dtype.name], ignore, given)
        if ranking:
            self._add_ranking(backend, y_true, preds, sample_weight)
        self._rows_seen += rows
        self._updates += 1
        if self.validate == "eager":
            self._raise_invalid()

    def _add_ranking(self, backend, y_true, preds, sample_weight) -> None:
        """``ranking=True``: each counted row's LRAP, ranking loss and coverage,
        added as weighted sums: one launch of the ranking kernel on a kernel
        backend, else :mod:`metrics_gpu._multilabel.ranking`'s row functions
        (a sort per row, a chunk of rows at a time). Rows the update kernel
        leaves out weigh 0 here (their scores are set to 0 first, so that a
        NaN reaches no sum)."""
        xp = backend.xp
        true = _backend_values(y_true, backend).astype(np.float64)
        scores = _backend_values(preds, backend).astype(np.float64)
        valid = xp.isfinite(scores)
        if self._spec["scores"] == "probabilities":
            valid &= xp.greater_equal(scores, 0) & xp.less_equal(scores, 1)
        valid = xp.all(valid & (xp.equal(true, 0) | xp.equal(true, 1)), axis=1)
        weight = xp.ones(true.shape[0], dtype=np.float64)
        if sample_weight is not None:
            weight = _backend_values(sample_weight, backend).astype(np.float64)
            valid &= xp.isfinite(weight) & xp.greater_equal(weight, 0)
        weight = xp.where(valid, weight, 0.0)
        scores = xp.where(valid[:, None], scores, 0.0)
        relevant = xp.equal(true, 1)
        sums = self._arrays["ranking"]  # type: ignore[index]
        if backend.name != "numpy":  # the kernel's sums: a warp per row, no sort
            added = backend.zeros(len(RANKING_SLOTS) + 1, np.float64)
            backend.multilabel_ranking(relevant, ELEMENT_CODES["bool"], scores,
                                       ELEMENT_CODES["float64"], weight, added)
            sums += added[:len(RANKING_SLOTS)]
            return
        step = max(1, R.CHUNK_ELEMENTS // self.num_labels)
        for begin in range(0, true.shape[0], step):
            rel, sc = relevant[begin:begin + step], scores[begin:begin + step]
            w = weight[begin:begin + step]
            # One sort of each row for the three (row_label_ranking_metrics).
            sums += xp.stack([xp.sum(per_row * w)
                              for per_row in R.row_label_ranking_metrics(rel, sc, xp)])

    # -- results ----------------------------------------------------------------

    def _host_state(self) -> dict[str, np.ndarray]:
        if self._arrays is None:
            raise ValueError("compute() before any update with samples: there is nothing to "
                             "report")
        backend = self._backend
        return {name: np.asarray(backend.to_host(value)) for name, value in self._arrays.items()}

    def first_invalid(self) -> tuple[int, int, tuple[str, ...]] | None:
        """The rows left out so far: ``(how many, the first as a row of the
        stream (0-based, every update's rows in turn), the arguments that
        held a refused value among them)``, or None when none was (one read
        back of the checks)."""
        checks = self._host_state()["checks"]
        if int(checks[0]) == 0:
            return None
        return (int(checks[0]), int(checks[1]),
                refused_arguments(checks[2]))

    def _raise_invalid(self, state: dict[str, np.ndarray] | None = None) -> None:
        state = self._host_state() if state is None else state
        checks = state["checks"]
        if int(checks[0]) == 0:
            return
        refused = refused_arguments(checks[2])
        arguments = " and ".join(refused)
        kind = self._spec["scores"]
        declared = ""  # logits refused are not finite: no other kind takes them
        if "preds" in refused and kind == "probabilities":  # the kind, and how to change it
            declared = (" The state reads float preds as probabilities "
                        "(scores='probabilities'); for logits, build it with scores='logits'.")
        raise ValueError(
            f"{int(checks[0])} row(s) were left out of the multilabel state: the first is row "
            f"{int(checks[1])} of the stream, holding a value of {arguments} that it refuses "
            "(targets must be 0/1 or ignore_index; label predictions 0/1; probabilities in "
            f"[0, 1]; logits finite; weights finite and >= 0).{declared} Use validate=False "
            "to count such rows instead")

    def compute(self) -> MultilabelReport:
        """The metrics of every batch added (one read back of the O(L) state).

        Returns
        -------
        MultilabelReport
            A mapping of the scalar metrics by name (``subset_accuracy``,
            ``hamming_loss``, ``precision_micro`` ... ``jaccard_samples``,
            ``f_score_*`` with ``beta``, ``f1_*`` as well when beta is 1,
            ``roc_auc_*`` / ``average_precision_*`` (macro, weighted, micro,
            error_bound) with ``thresholds``, the three ranking metrics with
            ``ranking=True``), with ``per_label``, ``confusion_matrix``,
            ``total`` and ``invalid`` as attributes; in the framework and on
            the device of the first update's ``y_true`` (0-d torch tensors
            for torch inputs), as :meth:`ClassificationMetrics.compute` gives.

        Raises
        ------
        ValueError
            No update yet; with ``validate="deferred"``, rows were left out.
        """
        state = self._host_state()
        if self.validate is not False:
            self._raise_invalid(state)
        report = MultilabelReport(state, self._spec)
        report._in_framework_of(self._backend, self._like)
        return report

    # -- merge, state_dict, sync ------------------------------------------------

    def merge(self, other: MultilabelMetrics) -> None:
        """Add ``other``'s state (built with the same arguments) to this one."""
        if not isinstance(other, MultilabelMetrics) or other._spec != self._spec:
            raise ValueError("other must be a MultilabelMetrics built with the same arguments")
        self._own_state()
        if other._arrays is None:
            return
        theirs = other._host_state()
        if self._arrays is None:
            self._like = other._like
            self._allocate(other._backend, theirs["counts"].dtype == np.float64)
        assert self._arrays is not None
        _add_state(self, theirs)
        self._updates += other._updates
        self._rows_seen += other._rows_seen

    def state_dict(self) -> dict[str, Any]:
        """The state as plain arrays with the arguments it was built with
        (torch tensors for torch inputs; uint64 counts as int64)."""
        out: dict[str, Any] = {"version": STATE_VERSION, "spec": dict(self._spec),
                               "updates": self._updates, "rows_seen": self._rows_seen}
        if self._arrays is not None:
            backend = self._backend
            for name, value in self._arrays.items():
                if value.dtype == np.uint64:
                    value = value.view(np.int64)
                out[name] = backend.to_framework(value, self._like)
        return out

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict` of a MultilabelMetrics with these arguments."""
        if state.get("version") != STATE_VERSION or dict(state.get("spec", {})) != self._spec:
            raise ValueError("state: not a state_dict of a MultilabelMetrics with these "
                             "arguments")
        self._local = None
        self._layouts.clear()
        if "counts" not in state:
            self._arrays, self._updates, self._rows_seen = None, 0, 0
            return
        held = {name: _host_values(state[name]) for name in (
            "counts", "rows", "checks", "ranking", "histogram") if name in state}
        backend = self._backend or resolve_backend(state["counts"])
        counts = held["counts"]
        self._like = self._like if self._like is not None else state["counts"]
        arrays = self._allocate(backend, counts.dtype.kind == "f")
        for name, mine in arrays.items():
            value = held[name].view(np.uint64) if mine.dtype == np.uint64 else held[name]
            mine[...] = backend.asarray(value)
        self._updates, self._rows_seen = int(state["updates"]), int(state["rows_seen"])

    def sync(self, group: Any = None) -> None:
        """All-reduce the state over ``torch.distributed`` (nothing when it
        is not initialised): SUM of the counts and row sums (uint64 counts
        as int64, float64 as soon as one rank holds weights), MIN of the
        first left-out row, OR of the reasons. Every rank must call it.
        Idempotent, as :meth:`ClassificationMetrics.sync`: the own state is
        kept apart and the next update goes back to it."""
        dist = initialised_distributed()
        if dist is None:
            return
        torch = sys.modules["torch"]
        local = self._local if self._local is not None else (self._arrays, self._updates)
        own, own_updates = local
        kinds: list[Any] = [None] * dist.get_world_size(group)
        dist.all_gather_object(
            kinds, None if own is None else own["counts"].dtype == np.float64, group=group)
        if all(kind is None for kind in kinds):
            return
        weighted = any(kinds)
        host = {"counts": np.zeros(4 * self.num_labels, np.float64 if weighted else np.uint64),
                "rows": np.zeros(len(ROW_SLOTS)),
                "checks": np.array([0, NO_ROW, 0], np.uint64)}
        if self._spec["ranking"]:
            host["ranking"] = np.zeros(len(RANKING_SLOTS))
        if self._spec["thresholds"]:
            host["histogram"] = np.zeros(2 * self.num_labels * self._spec["thresholds"],
                                         np.float64 if weighted else np.uint64)
        if own is not None:
            backend = self._backend
            for name, value in own.items():
                host[name] = np.asarray(backend.to_host(value)).astype(host[name].dtype)
        device = "cpu"
        if self._like is not None and getattr(self._like, "is_cuda", False):
            device = self._like.device
        elif dist.get_backend(group) == "nccl":
            device = torch.device("cuda", torch.cuda.current_device())
        tensors = {name: torch.from_numpy(value.view(np.int64) if value.dtype == np.uint64
                                          else value).to(device) for name, value in host.items()}
        dist.all_reduce(tensors["counts"], group=group)
        dist.all_reduce(tensors["rows"], group=group)
        for name in ("ranking", "histogram"):
            if name in tensors:
                dist.all_reduce(tensors[name], group=group)
        checks = tensors["checks"]
        dist.all_reduce(checks[0:1], group=group)
        # The first row: MIN as unsigned (NO_ROW is -1 as int64): offset by 2**63.
        # The first row left out: a MIN of uint64 values (NO_ROW is all ones),
        # as int64 with the sign bit flipped, which keeps their order.
        sign = torch.tensor([np.iinfo(np.int64).min], dtype=torch.int64, device=checks.device)
        first = checks[1:2] ^ sign
        dist.all_reduce(first, op=dist.ReduceOp.MIN, group=group)
        checks[1:2] = first ^ sign
        # The reasons: an OR, as a MAX of each bit.
        reasons = checks[2:3]
        for bit in CHECK_BITS:
            flag = ((reasons & bit) != 0).to(torch.int64)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=group)
            reasons |= flag * bit
        updates = torch.tensor([own_updates], dtype=torch.int64, device=device)
        dist.all_reduce(updates, group=group)
        backend = self._backend or get_backend_implementation("numpy")
        summed = {name: tensor.cpu().numpy() for name, tensor in tensors.items()}
        self._allocate(backend, weighted)
        assert self._arrays is not None
        for name, mine in self._arrays.items():
            value = summed[name].view(np.uint64) if mine.dtype == np.uint64 else summed[name]
            mine[...] = backend.asarray(value)
        self._updates = int(updates[0])
        self._local = local

    def __repr__(self) -> str:
        where = "empty" if self._arrays is None else f"on {self._backend.name}"
        return (f"MultilabelMetrics(num_labels={self.num_labels}, updates={self._updates}, "
                f"{where})")


def _host_values(value) -> np.ndarray:
    """A NumPy array of a NumPy, torch or CuPy value (copied off a GPU)."""
    if type(value).__module__ == "torch":
        value = value.detach()
        if value.dtype.is_floating_point and value.element_size() == 2 and \
                str(value.dtype) == "torch.bfloat16":
            value = value.float()
        return value.cpu().numpy()
    if hasattr(value, "get") and type(value).__module__.startswith("cupy"):
        return value.get()
    return np.asarray(value)


def _backend_values(values, backend):
    """``values`` on ``backend`` as numbers (a torch bfloat16 tensor widened:
    NumPy has no bfloat16)."""
    if type(values).__module__ == "torch" and str(values.dtype) == "torch.bfloat16":
        values = values.float()
    if backend.name != "cuda":
        return _host_values(values)
    return backend.asarray(host_tensor(values))  # a torch CPU tensor copied as NumPy


class _on_stream:
    """The caller's stream for a torch CUDA tensor (the cuda backend), else nothing."""

    def __init__(self, backend, like) -> None:
        self.context = None
        stream_of = getattr(backend.device, "stream_of", None)
        if stream_of is not None:
            self.context = stream_of(like)

    def __enter__(self):
        if self.context is not None:
            self.context.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.context is not None:
            self.context.__exit__(*exc)


def _add_state(owner: MultilabelMetrics, host: Mapping[str, np.ndarray]) -> None:
    """Add one state's host arrays (``counts``, ``rows``, ``checks``, and the
    ``histogram`` and ``ranking`` sums where the spec has them) to
    ``owner``'s, on its backend; float64 counts promote uint64 ones."""
    arrays = owner._arrays
    assert arrays is not None
    xp = owner._backend.xp
    if host["counts"].dtype == np.float64:
        owner._promote()
    for name in ("counts", "histogram", "rows", "ranking"):
        if name in arrays:
            mine = arrays[name]
            mine += xp.asarray(np.asarray(host[name]).reshape(-1).astype(mine.dtype))
    theirs = np.asarray(host["checks"], dtype=np.uint64)
    checks = arrays["checks"]
    current = np.asarray(checks.get() if hasattr(checks, "get") else checks)
    checks[...] = xp.asarray(np.array([current[0] + theirs[0], min(current[1], theirs[1]),
                                       current[2] | theirs[2]], dtype=np.uint64))


class MultilabelReport(MetricMapping):
    """The metrics of a :class:`MultilabelMetrics` state.

    Scalar metrics by name (``report["f1_macro"]``); ``per_label`` (a dict of
    (L,) arrays: precision, recall, f_score, jaccard, support),
    ``confusion_matrix`` ((L, 2, 2), ``[[tn, fp], [fn, tp]]`` per label),
    ``total`` and ``invalid`` as attributes. Computed on the host from the
    O(L) state, then given in the framework and on the device of the first
    update's ``y_true`` (0-d torch tensors for torch inputs)."""

    def __init__(self, state: Mapping[str, np.ndarray], spec: Mapping[str, Any]) -> None:
        num_labels = spec["num_labels"]
        counts = state["counts"].reshape(4, num_labels)
        if counts.dtype == np.uint64:
            counts = counts.astype(np.int64)
        tp, fp, fn, tn = counts
        rows = state["rows"]
        zero_division = spec["zero_division"]
        beta = spec["beta"]
        c = _as_counts(tp, fp, fn, tn, np)
        support = tp + fn
        self.confusion_matrix = np.stack([tn, fp, fn, tp], axis=1).reshape(-1, 2, 2)
        values: dict[str, Any] = {}
        weight = rows[ROW["weight"]]
        values["subset_accuracy"] = np.float64(F.divide(
            np.array([rows[ROW["exact"]]]), np.array([weight]), np, math.nan)[0][0])
        values["hamming_loss"] = np.float64(F.divide(
            np.array([rows[ROW["wrong_cells"]]]), np.array([rows[ROW["counted_cells"]]]), np,
            math.nan)[0][0])
        values["zero_one_loss"] = 1.0 - values["subset_accuracy"]
        per_label: dict[str, Any] = {"support": support}
        for average in (None, "micro", "macro", "weighted"):
            precision, recall, f_score, _ = _prfs_of_counts(
                c, support, beta=beta, average=average, warn_for=(),
                zero_division=zero_division)
            jaccard = _averaged_rate(F.jaccard_terms, "Jaccard", "true or predicted", c,
                                     average=average, zero_division=zero_division)
            if average is None:
                per_label.update(precision=precision, recall=recall, f_score=f_score,
                                 jaccard=jaccard)
                continue
            values[f"precision_{average}"] = precision
            values[f"recall_{average}"] = recall
            values[f"f_score_{average}"] = f_score
            values[f"jaccard_{average}"] = np.float64(jaccard)
        f_slot = f_score_rate(beta)
        for name, slot in (("precision", "precision"), ("recall", "recall"),
                           ("f_score", f_slot), ("jaccard", "jaccard")):
            values[f"{name}_samples"] = samples_mean(
                rows[ROW[slot]], rows[ROW[slot + "_defined"]], weight, zero_division)
        if beta == 1.0:
            for average in AVERAGES:
                values[f"f1_{average}"] = values[f"f_score_{average}"]
        if "histogram" in state:
            values.update(_binned_values(state["histogram"], num_labels, per_label))
        if "ranking" in state:
            for name, total in zip(RANKING_SLOTS, state["ranking"]):
                values[name] = np.float64(total / weight if weight > 0 else math.nan)
        self._values = values
        self._total: Any = np.float64(weight)
        self._invalid: Any = np.float64(state["checks"][0])
        self.per_label = per_label
        self.beta = beta
        self._histogram = state.get("histogram")
        self._num_labels = num_labels

    def curves(self) -> tuple[list[dict], list[dict]]:
        """Each label's binned ROC and precision-recall curve
        (:func:`metrics_gpu.plot.binned_curves` of the histogram), with its
        ``"auc"`` / ``"average_precision"``.

        Raises
        ------
        ValueError
            The state was built without ``thresholds=H``.
        """
        if self._histogram is None:
            raise ValueError("thresholds: this state has no score histogram; build "
                             "MultilabelMetrics with thresholds=H for the curves")
        histogram = np.asarray(self._histogram, dtype=np.float64).reshape(
            2, self._num_labels, -1)
        roc, pr = binned_curves(histogram)
        for label, (roc_curve, pr_curve) in enumerate(zip(roc, pr)):
            roc_curve["auc"] = float(self.per_label["roc_auc"][label])
            pr_curve["average_precision"] = float(self.per_label["average_precision"][label])
        return roc, pr

    def plot_roc(self, ax: Any = None, labels: Any = None, **kwargs: Any) -> Any:
        """Draw the binned ROC curves of ``labels`` (default: every label and
        the macro average up to 10 labels, the macro average alone beyond),
        through :func:`metrics_gpu.plot.plot_roc`."""
        return plot_roc(self._chosen(self.curves()[0], labels, kwargs), ax=ax, **kwargs)

    def plot_precision_recall(self, ax: Any = None, labels: Any = None, **kwargs: Any) -> Any:
        """Draw the binned precision-recall curves, as :meth:`plot_roc`."""
        return plot_precision_recall(self._chosen(self.curves()[1], labels, kwargs), ax=ax,
                                     **kwargs)

    @staticmethod
    def _chosen(curves: list[dict], labels, kwargs: dict) -> dict:
        if labels is None and len(curves) == 2:
            labels = range(2)  # two labels are two problems, not one binary one
        chosen = chosen_curves(curves, labels, kwargs)
        return {name.replace("class ", "label "): curve for name, curve in chosen.items()}

    def plot_per_label(self, metric: str = "f_score", ax: Any = None, **kwargs: Any) -> Any:
        """A bar chart of ``per_label[metric]`` (:func:`metrics_gpu.plot.plot_per_label`)."""
        if metric not in self.per_label:
            raise ValueError(f"metric must be one of {sorted(self.per_label)}, got {metric!r}")
        return plot_per_label(to_numpy(self.per_label[metric]), metric=metric, ax=ax, **kwargs)

    @property
    def total(self) -> Any:
        """The counted rows' total weight (their count without weights)."""
        return self._total

    @property
    def invalid(self) -> Any:
        """Rows left out and counted (``validate=False``), as a float."""
        return self._invalid

    def _in_framework_of(self, backend: Any, like: Any) -> None:
        """Every value in the framework and on the device of ``like`` (the
        first update's ``y_true``), as :class:`ClassificationMetrics` gives
        them: 0-d torch tensors for torch inputs, on their device. The
        scalars travel as one float64 array (one copy to a GPU) and become
        0-d views of it. NumPy inputs keep NumPy values."""
        if like is None or isinstance(like, (np.ndarray, np.generic)):
            return
        names = list(self._values)
        scalars = np.array([*(float(self._values[name]) for name in names), self._total,
                            self._invalid], dtype=np.float64)
        placed = backend.to_framework(backend.asarray(scalars), like)
        self._values = {name: placed[i] for i, name in enumerate(names)}
        self._total, self._invalid = placed[len(names)], placed[len(names) + 1]
        self.per_label = {name: backend.to_framework(backend.asarray(np.asarray(value)), like)
                          for name, value in self.per_label.items()}
        self.confusion_matrix = backend.to_framework(backend.asarray(self.confusion_matrix),
                                                     like)

    def _metric_names(self) -> tuple[str, ...]:
        return tuple(self._values)

    def _metric_value(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise KeyError(missing_metric(name, self._metric_names(), "MultilabelReport")) \
                from None

    def _headline(self) -> list[tuple[str, Any]]:
        return [("labels", len(self.per_label["support"])), ("total", self._total)]


def _binned_values(histogram, num_labels: int, per_label: dict) -> dict[str, Any]:
    """ROC AUC and average precision from the (2, L, H) histogram, per label
    (into ``per_label``) and macro / weighted (over the labels where defined,
    weighted by positives) / micro (every label's histogram pooled), with the
    bounds of the binned values against the exact ones."""
    h = np.asarray(histogram, dtype=np.float64).reshape(2, num_labels, -1)
    auc, auc_bound, ap, ap_bound = F.binned_rank_areas(h[0], h[1])
    positives = h[0].sum(axis=1)
    per_label.update(roc_auc=auc, average_precision=ap, roc_auc_error_bound=auc_bound,
                     average_precision_error_bound=ap_bound)
    pooled = F.binned_rank_areas(h[0].sum(axis=0), h[1].sum(axis=0))
    values: dict[str, Any] = {}
    for name, per, bound, micro, micro_bound in (
            ("roc_auc", auc, auc_bound, pooled[0], pooled[1]),
            ("average_precision", ap, ap_bound, pooled[2], pooled[3])):
        macro, weighted = F.defined_averages(per, positives)
        values[f"{name}_macro"], values[f"{name}_weighted"] = np.float64(macro), np.float64(
            weighted)
        values[f"{name}_micro"] = np.float64(micro)
        # Each average's bound: the same average of the labels' bounds
        # (macro: ``_error_bound``), the pooled histogram's for micro.
        macro_bound, weighted_bound = F.defined_averages(bound, positives)
        values[f"{name}_error_bound"] = np.float64(macro_bound)
        values[f"{name}_weighted_error_bound"] = np.float64(weighted_bound)
        values[f"{name}_micro_error_bound"] = np.float64(micro_bound)
    return values
