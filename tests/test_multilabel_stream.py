"""MultilabelMetrics: the streaming multilabel state (kernels/multilabel.cu).

Uneven batches against scikit-learn on their concatenation (and against the
functional API), the kernel against its NumPy reference on every input type
and on rows it leaves out, merge / state_dict / reset, the validate modes, the
update's operation counts, and sync over gloo."""

from __future__ import annotations

import os
import pickle
import tempfile

import numpy as np
import pytest
import sklearn.metrics as skm
import torch

import metrics_gpu as mg
from metrics_gpu._multilabel.stream import _ignore_value, multilabel_update_reference
from metrics_gpu._validation import score_cut as _cut
from metrics_gpu.backends.launchers.multilabel import ELEMENT_CODES, NO_ROW, ROW_SLOTS
from metrics_gpu.testing import call_counter, operation_counter

RTOL = 1e-12
STREAM_BACKENDS = ("numpy", "emulated")
# Update calls after a layout's first batch (a planned launch).
UPDATE_CALL_BUDGET = 40


def _batches(n: int, cuts=(0.3, 0.31, 0.8)):
    """Uneven batch bounds of n rows (one of a single row)."""
    bounds = sorted({0, n, *(int(c * n) for c in cuts)})
    return list(zip(bounds[:-1], bounds[1:]))


def _case(rng, n, num_labels, *, weighted, empty_rows=True):
    y = (rng.random((n, num_labels)) < 0.3).astype(np.int64)
    scores = rng.integers(0, 5, (n, num_labels)) / 4.0  # ties at the threshold
    if empty_rows:
        y[0] = 0
        y[1] = 1
        scores[2] = 0.0
    weight = rng.random(n) + 0.1 if weighted else None
    return y, scores.astype(np.float32), weight


def _reference(y, p, weight, zero_division=0.0):
    ref = {"subset_accuracy": skm.accuracy_score(y, p, sample_weight=weight),
           "hamming_loss": skm.hamming_loss(y, p, sample_weight=weight)}
    for average in ("micro", "macro", "weighted", "samples"):
        for name, function in (("precision", skm.precision_score), ("recall", skm.recall_score),
                               ("f1", skm.f1_score), ("jaccard", skm.jaccard_score)):
            if name == "jaccard" and np.isnan(zero_division):
                continue  # scikit-learn's jaccard_score takes 0 and 1 only
            ref[f"{name}_{average}"] = function(y, p, average=average, sample_weight=weight,
                                                zero_division=zero_division)
    return ref


def _assert_matches(report, reference):
    for name, value in reference.items():
        assert float(report[name]) == pytest.approx(float(value), rel=RTOL, abs=1e-15,
                                                    nan_ok=True), name


@pytest.mark.parametrize("backend_name", STREAM_BACKENDS)
@pytest.mark.parametrize("num_labels", [5, 40])  # a thread per row; a warp per row
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("zero_division", [0.0, 1.0, np.nan])
def test_uneven_batches_equal_scikit_learn_on_the_whole(rng, backend_name, num_labels, weighted,
                                                        zero_division):
    y, scores, weight = _case(rng, 83, num_labels, weighted=weighted)
    metrics = mg.MultilabelMetrics(num_labels, zero_division=zero_division,
                                   scores="probabilities")
    with mg.use_backend(backend_name):
        for a, b in _batches(len(y)):
            metrics.update(torch.from_numpy(y[a:b]), torch.from_numpy(scores[a:b]),
                           None if weight is None else torch.from_numpy(weight[a:b]))
        report = metrics.compute()
    predicted = (scores > 0.5).astype(np.int64)
    _assert_matches(report, _reference(y, predicted, weight, zero_division))
    np.testing.assert_allclose(report.confusion_matrix,
                               skm.multilabel_confusion_matrix(y, predicted, sample_weight=weight),
                               rtol=RTOL)
    # The functional API on the concatenation gives the same numbers.
    assert float(report["f1_samples"]) == pytest.approx(float(mg.f1_score(
        y, predicted, average="samples", sample_weight=weight, zero_division=zero_division)),
        rel=RTOL, nan_ok=True)
    assert report.invalid == 0 and float(report.total) == pytest.approx(
        len(y) if weight is None else weight.sum(), rel=RTOL)


@pytest.mark.parametrize("backend_name", STREAM_BACKENDS)
def test_labels_logits_and_beta(rng, backend_name):
    y, scores, _ = _case(rng, 61, 6, weighted=False)
    logits = np.log(scores + 1e-3) - np.log1p(-scores + 1e-3)
    predicted = (scores > 0.3).astype(np.int64)
    with mg.use_backend(backend_name):
        from_labels = mg.MultilabelMetrics(6, beta=2.0, scores="probabilities")
        from_logits = mg.MultilabelMetrics(6, threshold=0.3, scores="logits", beta=2.0)
        for a, b in _batches(len(y)):
            from_labels.update(y[a:b], predicted[a:b].astype(bool))
            from_logits.update(y[a:b], logits[a:b].astype(np.float64))
    for report in (from_labels.compute(), from_logits.compute()):
        for average in ("micro", "macro", "weighted", "samples"):
            assert float(report[f"f_score_{average}"]) == pytest.approx(skm.fbeta_score(
                y, predicted, beta=2.0, average=average, zero_division=0), rel=RTOL)
        assert "f1_macro" not in report


@pytest.mark.parametrize("weighted", [True, False], ids=["weighted", "unweighted"])
@pytest.mark.parametrize("backend_name", STREAM_BACKENDS)
def test_ignored_cells_count_nowhere(rng, backend_name, weighted):
    y, scores, given_weight = _case(rng, 50, 4, weighted=weighted)
    y[rng.random(y.shape) < 0.2] = -1
    metrics = mg.MultilabelMetrics(4, ignore_index=-1, scores="probabilities")
    with mg.use_backend(backend_name):
        metrics.update(y.astype(np.int8), scores, given_weight)
    weight = np.ones(len(y)) if given_weight is None else given_weight
    report = metrics.compute()
    keep = y != -1
    predicted = scores > 0.5
    tp = ((y == 1) & predicted & keep).astype(float).T @ weight
    fn = ((y == 1) & ~predicted & keep).astype(float).T @ weight
    np.testing.assert_allclose(report.per_label["recall"], np.where(tp + fn > 0, tp / np.where(
        tp + fn > 0, tp + fn, 1), 0.0), rtol=RTOL)
    wrong = ((y == 1) != predicted) & keep
    assert float(report["hamming_loss"]) == pytest.approx(
        (wrong.sum(axis=1) * weight).sum() / (keep.sum(axis=1) * weight).sum(), rel=RTOL)


_DTYPES = {"bool": (np.bool_, None), "int8": (np.int8, None), "int32": (np.int32, None),
           "int64": (np.int64, None), "float32": (np.float32, None),
           "float64": (np.float64, None), "float16": (np.float16, None),
           "bfloat16": (np.float32, torch.bfloat16)}


@pytest.mark.parametrize("true_dtype", ["bool", "int8", "int32", "int64", "float32"])
@pytest.mark.parametrize("pred_dtype", ["bool", "int64", "float32", "float64", "float16",
                                        "bfloat16"])
def test_kernel_equals_reference_on_every_dtype(case, launches, rng, true_dtype, pred_dtype):
    """The update equals the NumPy reference for every pair of element types:
    the usual pairs through an instantiation of their own (the types known
    at compile time), the others through the one that reads the codes."""
    from metrics_gpu.backends.launchers.multilabel import (
        UPDATE_ANY_EXPRESSION,
        UPDATE_PRED_TYPES,
        UPDATE_TRUE_TYPES,
    )
    n, num_labels = 37, 9
    y = (rng.random((n, num_labels)) < 0.4)
    scores = rng.integers(0, 5, (n, num_labels)) / 4.0
    labels = pred_dtype in ("bool", "int64")
    if labels:
        scores = (scores > 0.5)
    mode = "labels" if labels else "probabilities"
    weight = rng.random(n).astype(np.float32)
    numpy_true = y.astype(_DTYPES[true_dtype][0])
    numpy_pred = scores.astype(_DTYPES[pred_dtype][0])
    expected = multilabel_update_reference(numpy_true, numpy_pred, weight, mode=mode, cut=0.5,
                                           ignore=None, f_beta2=1.0, thresholds=8)
    true = torch.from_numpy(numpy_true)
    pred = torch.from_numpy(numpy_pred)
    if _DTYPES[pred_dtype][1] is not None:
        pred = pred.to(_DTYPES[pred_dtype][1])
    if case.name == "cuda":
        true, pred = true.cuda(), pred.cuda()
    with mg.use_backend(case.name):
        metrics = mg.MultilabelMetrics(num_labels, validate=False, thresholds=8,
                                       scores="probabilities")
        metrics.update(true, pred, torch.from_numpy(weight).to(true.device))
    state = metrics.state_dict()
    np.testing.assert_allclose(_host(state["counts"]), expected[0].reshape(-1), rtol=1e-6)
    np.testing.assert_allclose(_host(state["rows"]), expected[1], rtol=1e-12)
    np.testing.assert_allclose(_host(state["histogram"]), expected[3].reshape(-1), rtol=1e-6)
    read_as = {"bool": "uint8", "int8": "uint8"}
    specialised = (read_as.get(true_dtype, true_dtype) in UPDATE_TRUE_TYPES
                   and read_as.get(pred_dtype, pred_dtype) in UPDATE_PRED_TYPES)
    updates = [launch.expression for launch in launches if launch.kernel == "multilabel_update"]
    assert len(updates) == 1
    assert (updates[0] != UPDATE_ANY_EXPRESSION) == specialised, updates


@pytest.mark.parametrize("weighted", [False, True], ids=["counts", "weighted"])
@pytest.mark.parametrize("thresholds", [8, 400])
def test_histogram_in_shared_memory_or_global_equals_reference(emulated_geometry, launches, rng,
                                                               thresholds, weighted):
    """The thresholds histogram is privatised per block in shared memory where
    its 2 L H cells fit beside the counts (H = 8 on the emulated geometry),
    else added to global memory cell by cell (H = 400): the same state as the
    NumPy reference either way, over rows that several blocks share."""
    case = emulated_geometry
    n, num_labels = 700, 9
    y = rng.random((n, num_labels)) < 0.4
    scores = rng.random((n, num_labels)).astype(np.float32)
    weight = rng.random(n) if weighted else None
    expected = multilabel_update_reference(y, scores, weight, mode="probabilities", cut=0.5,
                                           ignore=None, f_beta2=1.0, thresholds=thresholds)
    put = case.put
    with mg.use_backend(case.name):
        metrics = mg.MultilabelMetrics(num_labels, validate=False, thresholds=thresholds,
                                       scores="probabilities")
        metrics.update(put(y), put(scores), None if weight is None else put(weight))
    state = metrics.state_dict()
    np.testing.assert_allclose(_host(state["counts"]), expected[0].reshape(-1), rtol=1e-12)
    np.testing.assert_allclose(_host(state["histogram"]), expected[3].reshape(-1), rtol=1e-12)
    update = next(launch for launch in launches if launch.kernel == "multilabel_update")
    # (lanes, shared counts, shared histogram) among the arguments, and the grid
    lanes_at = 14
    assert [int(value) for value in update.args[lanes_at:lanes_at + 3]] == [
        1, 1, int(thresholds == 8)]
    assert update.grid > 1


def _host(value):
    if isinstance(value, torch.Tensor):
        return value.cpu().numpy()
    return value.get() if type(value).__module__.startswith("cupy") else np.asarray(value)


def test_left_out_rows_are_counted_and_named(case, rng):
    n, num_labels = 45, 40
    y = (rng.random((n, num_labels)) < 0.5).astype(np.float32)
    p = rng.random((n, num_labels)).astype(np.float32)
    w = rng.random(n)
    y[7, 3] = 2.0       # a target other than 0/1
    p[11, 39] = np.nan  # a probability that is not one
    p[30, 0] = 1.5
    w[20] = -1.0        # a negative weight
    expected = multilabel_update_reference(y, p, w, mode="probabilities", cut=0.5, ignore=None,
                                           f_beta2=1.0, row_offset=10)
    assert list(expected[2]) == [4, 17, 7]
    with mg.use_backend(case.name):
        metrics = mg.MultilabelMetrics(num_labels, validate=False, scores="probabilities")
        metrics.update(case.put(y[:10]), case.put(p[:10]), case.put(w[:10]))
        counted = mg.MultilabelMetrics(num_labels, validate=False, scores="probabilities")
        counted.update(case.put(y[10:]), case.put(p[10:]), case.put(w[10:]))
        metrics.merge(counted)
        assert metrics.compute().invalid == 4
        deferred = mg.MultilabelMetrics(num_labels, scores="probabilities")
        deferred.update(case.put(y), case.put(p), case.put(w))
        with pytest.raises(ValueError, match=r"4 row\(s\).*row 7 .*y_true and preds and "
                                             r"sample_weight"):
            deferred.compute()
        eager = mg.MultilabelMetrics(num_labels, validate="eager", scores="probabilities")
        with pytest.raises(ValueError, match="row 7 "):
            eager.update(case.put(y), case.put(p), case.put(w))
    # Rows are numbered in the stream that saw them: from 0 in `counted`.
    tail = multilabel_update_reference(y[10:], p[10:], w[10:], mode="probabilities", cut=0.5,
                                       ignore=None, f_beta2=1.0)
    assert list(tail[2]) == [3, 1, 6]
    np.testing.assert_array_equal(_host(counted.state_dict()["checks"]).view(np.uint64), tail[2])


def test_counts_past_shared_memory_go_to_global_atomics(case, rng):
    """4 L counters past the block's shared budget: global atomics, same counts."""
    n, num_labels = 5, 1600
    y = (rng.random((n, num_labels)) < 0.5)
    p = rng.random((n, num_labels)) > 0.5
    with mg.use_backend(case.name):
        metrics = mg.MultilabelMetrics(num_labels, scores="probabilities")
        metrics.update(case.put(y), case.put(p))
    report = metrics.compute()
    np.testing.assert_array_equal(report.confusion_matrix,
                                  skm.multilabel_confusion_matrix(y, p))


def test_strided_rows_are_read_in_place(rng):
    y = (rng.random((30, 12)) < 0.5).astype(np.int64)
    p = rng.random((30, 12)).astype(np.float32)
    with mg.use_backend("emulated"):
        metrics = mg.MultilabelMetrics(6, scores="probabilities")
        whole = torch.from_numpy(y)[:, ::2], torch.from_numpy(p)[:, 3:9]
        metrics.update(*whole)
    _assert_matches(metrics.compute(), {"f1_samples": skm.f1_score(
        y[:, ::2], p[:, 3:9] > 0.5, average="samples", zero_division=0)})


@pytest.mark.parametrize("backend_name", STREAM_BACKENDS)
def test_merge_state_dict_and_reset(rng, backend_name):
    y, scores, weight = _case(rng, 70, 8, weighted=True)
    with mg.use_backend(backend_name):
        whole, first, second = (mg.MultilabelMetrics(8, scores="probabilities") for _ in range(3))
        whole.update(torch.from_numpy(y), torch.from_numpy(scores), torch.from_numpy(weight))
        first.update(torch.from_numpy(y[:30]), torch.from_numpy(scores[:30]))  # unweighted
        second.update(torch.from_numpy(y[30:]), torch.from_numpy(scores[30:]),
                      torch.from_numpy(weight[30:]))
        halves = mg.MultilabelMetrics(8, scores="probabilities")
        halves.load_state_dict(first.state_dict())
        halves.merge(second)
        weighted_first = mg.MultilabelMetrics(8, scores="probabilities")
        weighted_first.update(y[:30], scores[:30], weight[:30])
        whole_again = mg.MultilabelMetrics(8, scores="probabilities")
        whole_again.merge(weighted_first)
        whole_again.merge(second)
    assert isinstance(whole.state_dict()["counts"], torch.Tensor)
    _assert_matches(whole_again.compute(), dict(whole.compute()))
    mixed = _reference(y, (scores > 0.5).astype(int), np.concatenate([np.ones(30), weight[30:]]))
    _assert_matches(halves.compute(), mixed)
    whole.reset()
    with pytest.raises(ValueError, match="before any update"):
        mg.MultilabelMetrics(8, scores="probabilities").compute()
    with mg.use_backend(backend_name):
        whole.update(y[:5], scores[:5])
    _assert_matches(whole.compute(), _reference(y[:5], (scores[:5] > 0.5).astype(int), None))
    with pytest.raises(ValueError, match="same arguments"):
        whole.merge(mg.MultilabelMetrics(8, threshold=0.4, scores="probabilities"))
    with pytest.raises(ValueError, match="state_dict of a MultilabelMetrics"):
        mg.MultilabelMetrics(9, scores="probabilities").load_state_dict(whole.state_dict())


@pytest.mark.parametrize("arguments, message", [
    ({"num_labels": 0}, "num_labels must be an integer >= 1"),
    ({"num_labels": 3, "scores": "auto"}, "scores must be one of"),
    ({"num_labels": 3, "threshold": float("nan")}, "threshold must be a finite number"),
    ({"num_labels": 3, "zero_division": "warn"}, "zero_division must be"),
    ({"num_labels": 3, "ignore_index": 1}, "ignore_index must be an integer other than 0 and 1"),
    ({"num_labels": 3, "validate": True}, "validate must be one of"),
    ({"num_labels": 3, "beta": -1}, "beta must be a number >= 0"),
])
def test_bad_arguments_are_named(arguments, message):
    with pytest.raises(ValueError, match=message):
        mg.MultilabelMetrics(**arguments)


def test_bad_shapes_are_named():
    metrics = mg.MultilabelMetrics(3, scores="probabilities")
    with pytest.raises(ValueError, match="num_labels=3"):
        metrics.update(np.zeros((4, 2)), np.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"one shape; got \(4, 3\) and \(4, 2\)"):
        metrics.update(np.zeros((4, 3)), np.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"sample_weight must have shape \(4,\)"):
        metrics.update(np.zeros((4, 3)), np.zeros((4, 3)), np.ones(3))


def test_threshold_of_logits_is_the_sigmoid_cut():
    assert _cut(0.5, "logits") == 0.0 and _cut(0.3, "probabilities") == 0.3
    assert _cut(0.0, "logits") == -np.inf and _cut(1.0, "logits") == np.inf
    assert _ignore_value(-1, np.dtype(np.int8)) == 255.0
    assert _ignore_value(-1, np.dtype(np.uint8)) is None
    assert _ignore_value(-1, np.dtype(bool)) is None
    assert "rows" in ROW_SLOTS and ELEMENT_CODES["int8"] == ELEMENT_CODES["uint8"]
    assert NO_ROW == 2**64 - 1


def test_update_after_the_first_batch_is_one_launch_and_few_calls(rng):
    with mg.use_backend("emulated"):
        metrics = mg.MultilabelMetrics(10, validate=False, scores="probabilities")
        for n in (64, 64, 50):
            y = torch.from_numpy((rng.random((n, 10)) < 0.3).astype(np.int64))
            scores = torch.from_numpy(rng.random((n, 10)).astype(np.float32))
            weight = torch.from_numpy(rng.random(n).astype(np.float32))
            with operation_counter() as operations, call_counter() as calls:
                metrics.update(y, scores, weight)
    assert (operations.launches, operations.device_allocations, operations.host_transfers) == (
        1, 0, 0)
    assert calls.total <= UPDATE_CALL_BUDGET, calls


def _sync_worker(rank, world_size, init_file, out_dir):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world_size)
    try:
        rng = np.random.default_rng(rank)
        metrics = mg.MultilabelMetrics(5, validate=False, ranking=True, scores="probabilities")
        y = (rng.random((20 + rank, 5)) < 0.4).astype(np.int64)
        scores = rng.random((20 + rank, 5))
        weight = rng.random(20 + rank) if rank == 1 else None
        if rank == 0:
            y[3, 0] = 5  # a row left out: the first of the stream is row 3 of rank 0
        metrics.update(torch.from_numpy(y), torch.from_numpy(scores),
                       None if weight is None else torch.from_numpy(weight))
        metrics.sync()
        metrics.sync()  # idempotent
        with open(os.path.join(out_dir, f"{rank}.pkl"), "wb") as out:
            report = metrics.compute()
            pickle.dump((dict(report), report.confusion_matrix,
                         metrics.state_dict()["checks"].numpy()), out)
    finally:
        dist.destroy_process_group()


def test_sync_over_gloo_equals_one_process():
    from process_groups import start_ranks

    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    with tempfile.TemporaryDirectory() as directory:
        start_ranks(_sync_worker, (2, os.path.join(directory, "init"), directory), 2)
        results = [pickle.load(open(os.path.join(directory, f"{r}.pkl"), "rb")) for r in (0, 1)]
    single = mg.MultilabelMetrics(5, validate=False, ranking=True, scores="probabilities")
    for rank in (0, 1):
        rng = np.random.default_rng(rank)
        y = (rng.random((20 + rank, 5)) < 0.4).astype(np.int64)
        scores = rng.random((20 + rank, 5))
        weight = rng.random(20 + rank) if rank == 1 else np.ones(20)
        if rank == 0:
            y[3, 0] = 5
        single.update(y, scores, weight)
    expected = single.compute()
    for values, matrix, checks in results:
        _assert_matches(values, {k: float(v) for k, v in expected.items()})
        np.testing.assert_allclose(matrix, expected.confusion_matrix, rtol=RTOL)
        assert list(checks.view(np.uint64)) == [1, 3, 1]


RANKING = ("label_ranking_average_precision_score", "label_ranking_loss", "coverage_error")


@pytest.mark.parametrize("backend_name", STREAM_BACKENDS)
@pytest.mark.parametrize("weighted", [False, True])
def test_ranking_metrics_over_uneven_batches(rng, backend_name, weighted):
    y, scores, weight = _case(rng, 57, 6, weighted=weighted)
    bad = scores.copy()
    bad[4, 2] = np.nan  # a row left out (validate=False): it weighs nothing
    with mg.use_backend(backend_name):
        metrics = mg.MultilabelMetrics(6, ranking=True, validate=False, scores="probabilities")
        halves = [mg.MultilabelMetrics(6, ranking=True, validate=False, scores="probabilities")
                  for _ in range(2)]
        for a, b in _batches(len(y)):
            batch = (torch.from_numpy(y[a:b]), torch.from_numpy(bad[a:b]),
                     None if weight is None else torch.from_numpy(weight[a:b]))
            metrics.update(*batch)
            halves[a >= 30].update(*batch)
        halves[0].merge(halves[1])
    keep = np.arange(len(y)) != 4
    kept_weight = None if weight is None else weight[keep]
    for report in (metrics.compute(), halves[0].compute()):
        assert report.invalid == 1
        for name in RANKING:
            assert float(report[name]) == pytest.approx(getattr(skm, name)(
                y[keep], scores[keep].astype(np.float64), sample_weight=kept_weight), rel=RTOL)


def test_ranking_needs_scores_and_no_ignore_index():
    with pytest.raises(ValueError, match="ranking=True takes no ignore_index"):
        mg.MultilabelMetrics(3, ranking=True, ignore_index=-1, scores="probabilities")
    with pytest.raises(ValueError, match="preds must be float scores"):
        mg.MultilabelMetrics(3, ranking=True, scores="probabilities").update(
            np.zeros((2, 3), int), np.zeros((2, 3), int))
    with pytest.raises(ValueError, match="ranking must be True or False"):
        mg.MultilabelMetrics(3, ranking=1, scores="probabilities")


@pytest.mark.parametrize("backend_name", STREAM_BACKENDS)
@pytest.mark.parametrize("scores_are", ["probabilities", "logits"])
def test_binned_roc_auc_and_average_precision(rng, backend_name, scores_are):
    """The (2, L, H) histogram against one made here from the bins, and the
    binned values within their bounds of scikit-learn's exact ones."""
    from metrics_gpu._formulas import labels as F
    from metrics_gpu.backends.numpy_backend import calibration_bin

    n, num_labels, thresholds = 90, 5, 20
    y, scores, weight = _case(rng, n, num_labels, weighted=True)
    scores = (scores + rng.random(scores.shape).astype(np.float32) / 8) / 1.125
    given = np.log(scores) - np.log1p(-scores) if scores_are == "logits" else scores
    given = given.astype(np.float64)
    with mg.use_backend(backend_name):
        metrics = mg.MultilabelMetrics(num_labels, scores=scores_are, thresholds=thresholds)
        for a, b in _batches(n):
            metrics.update(torch.from_numpy(y[a:b]), torch.from_numpy(given[a:b]),
                           torch.from_numpy(weight[a:b]))
    report = metrics.compute()
    probability = 1 / (1 + np.exp(-given)) if scores_are == "logits" else given
    bins = calibration_bin(probability, thresholds)
    histogram = np.zeros((2, num_labels, thresholds))
    for row in range(n):
        for label in range(num_labels):
            histogram[0 if y[row, label] else 1, label, bins[row, label]] += weight[row]
    auc, auc_bound, ap, _ = F.binned_rank_areas(histogram[0], histogram[1])
    np.testing.assert_allclose(report.per_label["roc_auc"], auc, rtol=1e-12)
    np.testing.assert_allclose(report.per_label["average_precision"], ap, rtol=1e-12)
    exact = skm.roc_auc_score(y, given, average=None, sample_weight=weight)
    assert np.all(np.abs(report.per_label["roc_auc"].numpy() - exact) <= auc_bound + 1e-12)
    assert float(report["roc_auc_macro"]) == pytest.approx(auc.mean(), rel=1e-12)
    assert abs(float(report["roc_auc_macro"]) - skm.roc_auc_score(
        y, given, sample_weight=weight)) <= float(report["roc_auc_error_bound"]) + 1e-12
    for average in ("micro", "weighted"):
        assert abs(float(report[f"roc_auc_{average}"]) - skm.roc_auc_score(
            y, given, average=average, sample_weight=weight)) <= float(
            report[f"roc_auc_{average}_error_bound"]) + 1e-12
    with pytest.raises(ValueError, match="thresholds=65536 with num_labels=4096"):
        mg.MultilabelMetrics(4096, thresholds=65536, scores="probabilities")


def test_curves_and_pictures(rng):
    pytest.importorskip("matplotlib")
    y, scores, _ = _case(rng, 60, 12, weighted=False)
    metrics = mg.MultilabelMetrics(12, thresholds=10, scores="probabilities")
    metrics.update(y, scores)
    report = metrics.compute()
    roc, pr = report.curves()
    assert len(roc) == len(pr) == 12
    assert roc[3]["auc"] == pytest.approx(report.per_label["roc_auc"][3])
    ax = report.plot_roc(labels=[0, 5])
    assert [line.get_label().split(" (")[0] for line in ax.get_lines()][:2] == ["label 0",
                                                                                 "label 5"]
    report.plot_precision_recall()  # 12 labels: the macro curve alone
    bars = report.plot_per_label("f_score", max_labels=5)
    assert len(bars.patches) == 5
    shown = [int(tick.get_text()) for tick in bars.get_xticklabels()]
    f_score = np.nan_to_num(report.per_label["f_score"], nan=np.inf)
    assert sorted(shown) == shown and set(shown) == set(np.argsort(f_score, kind="stable")[:5])
    with pytest.raises(ValueError, match="metric must be one of"):
        report.plot_per_label("accuracy")
    plain = mg.MultilabelMetrics(12, scores="probabilities")
    plain.update(y, scores)
    with pytest.raises(ValueError, match="thresholds=H for the curves"):
        plain.compute().curves()


def test_first_invalid_names_the_rows_left_out():
    metrics = mg.MultilabelMetrics(2, validate=False, scores="probabilities")
    metrics.update(np.array([[1, 0], [0, 1]]), np.array([[0.2, 0.9], [0.4, 0.6]]))
    assert metrics.first_invalid() is None
    metrics.update(np.array([[1, 0], [3, 1]]), np.array([[0.2, 0.9], [0.4, 1.5]]))
    assert metrics.first_invalid() == (1, 3, ("y_true", "preds"))


@pytest.mark.parametrize("backend_name", STREAM_BACKENDS)
def test_empty_batches_add_nothing(backend_name):
    """A batch of 0 rows (a last, empty shard) changes nothing, weighted or
    not; a state that saw only empty batches has nothing to report."""
    metrics = mg.MultilabelMetrics(3, ranking=True, thresholds=4, scores="probabilities")
    with mg.use_backend(backend_name):
        metrics.update(np.zeros((0, 3), np.int8), np.zeros((0, 3), np.float32))
        with pytest.raises(ValueError, match="nothing to report"):
            metrics.compute()
        y, scores = np.array([[1, 0, 1], [0, 1, 0]], np.int8), np.array(
            [[0.9, 0.2, 0.4], [0.3, 0.8, 0.6]], np.float32)
        metrics.update(y, scores)
        before = metrics.compute()
        metrics.update(torch.zeros((0, 3), dtype=torch.int8), torch.zeros((0, 3)),
                       torch.zeros(0))
        after = metrics.compute()
    assert after.keys() == before.keys()
    for key in before:
        np.testing.assert_equal(np.asarray(after[key]), np.asarray(before[key]))
    assert after.total == 2


@pytest.mark.parametrize("backend_name", STREAM_BACKENDS)
def test_compute_gives_the_framework_of_the_inputs(backend_name):
    """As ClassificationMetrics: torch inputs give 0-d float64 torch tensors
    (per-label arrays and the confusion matrix as tensors too), NumPy inputs
    NumPy values; the row total and the rows left out are attributes, not
    metrics, in both states."""
    torch = pytest.importorskip("torch")
    y = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0]], np.int8)
    scores = np.array([[2.0, -1.0, 0.5], [-0.3, 1.2, 0.4], [0.1, -0.2, -3.0]])
    with mg.use_backend(backend_name):
        from_torch = mg.MultilabelMetrics(3, validate=False)
        from_torch.update(torch.from_numpy(y), torch.from_numpy(scores))
        from_numpy = mg.MultilabelMetrics(3, validate=False)
        from_numpy.update(y, scores)
        classes = mg.ClassificationMetrics(3)
        classes.update(torch.tensor([0, 1, 2]), torch.from_numpy(scores))
    report, host = from_torch.compute(), from_numpy.compute()
    for name in report:
        value = report[name]
        assert isinstance(value, torch.Tensor) and value.dtype == torch.float64, name
        assert value.ndim == 0 and value.device.type == "cpu", name
        assert float(value) == pytest.approx(float(host[name]), nan_ok=True), name
        assert isinstance(host[name], (float, np.floating)), name
    assert all(isinstance(v, torch.Tensor) for v in report.per_label.values())
    assert isinstance(report.confusion_matrix, torch.Tensor)
    assert float(report.total) == 3 and float(report.invalid) == 0
    for state in (report, classes.compute()):
        assert "total" not in state and "invalid" not in state
        assert isinstance(state.total, torch.Tensor)


def test_binned_histogram_with_rows_left_out_on_the_reference():
    """thresholds= and rows left out (validate=False): the histogram counts the
    rows kept only (the reference once broadcast the kept rows' weights
    against every row's mask, and failed past one row kept)."""
    y_true = np.array([[0, 1], [1, 0], [1, 1], [0, 0]])
    preds = np.array([[0.2, 1.5], [0.3, 0.4], [0.9, 0.8], [0.1, 0.6]])
    metrics = mg.MultilabelMetrics(2, scores="probabilities", thresholds=8, validate=False)
    metrics.update(y_true, preds, np.array([1.0, 2.0, 3.0, 4.0]))
    kept = mg.MultilabelMetrics(2, scores="probabilities", thresholds=8)
    kept.update(y_true[1:], preds[1:], np.array([2.0, 3.0, 4.0]))
    got, expected = metrics.compute(), kept.compute()
    assert float(got.invalid) == 1.0
    for name in ("roc_auc_macro", "average_precision_micro"):
        assert float(got[name]) == float(expected[name]), name
