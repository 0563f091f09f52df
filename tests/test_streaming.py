"""The streaming state (ClassificationMetrics) against the functional API on
the concatenated data, merge / state_dict / sync invariants, deferred and
eager validation, and the per-call cost budget on the emulated backend."""

from __future__ import annotations

import contextlib
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metrics_gpu as mg
from metrics_gpu.backends.selection import get_backend_implementation
from metrics_gpu._formulas.labels import REPORT_METRICS
from metrics_gpu.testing import operation_counter
from conftest import host_array

pytestmark = pytest.mark.kernel_path  # each case is a streaming_update instantiation


def _batches(rng, k, sizes, *, weights=None, ignore=None, absent=(), dtype=np.float64):
    """Uneven batches of targets, logits and weights; classes in ``absent`` never occur
    as targets."""
    present = np.setdiff1d(np.arange(k), absent)
    out = []
    for n in sizes:
        y = rng.choice(present, n).astype(np.int64)
        if ignore is not None:
            y[rng.random(n) < 0.2] = ignore
        z = rng.normal(size=(n, k)).astype(dtype)
        z[np.arange(n), np.clip(y, 0, k - 1)] += rng.random(n)  # some skill
        w = None
        if weights == "int":
            w = rng.integers(1, 5, n)
        elif weights == "float":
            w = rng.random(n) + 0.1
        out.append((y, z, w))
    return out


def _concat(batches):
    y = np.concatenate([b[0] for b in batches])
    z = np.concatenate([b[1] for b in batches])
    w = None if batches[0][2] is None else np.concatenate([b[2] for b in batches])
    return y, z, w


def _value(x):
    return float(host_array(x))


@pytest.mark.parametrize("k", [2, 6])
@pytest.mark.parametrize("weights", [None, "int", "float"])
@pytest.mark.parametrize("ignore", [None, -100])
def test_stream_equals_functional(backend, rng, k, weights, ignore):
    batches = _batches(rng, k, (17, 40, 1, 63), weights=weights, ignore=ignore,
                       absent=(k - 1,) if k > 2 else ())
    top = min(2, k - 1)  # a k >= K is left out of the reports
    metrics = mg.ClassificationMetrics(k, top_k=(1, top), n_bins=7, ignore_index=ignore)
    for y, z, w in batches:
        metrics.update(backend.asarray(y), backend.asarray(z),
                       None if w is None else backend.asarray(w))
    report = metrics.compute()
    y, z, w = _concat(batches)
    labels = mg.label_report(y, z, sample_weight=w, ignore_index=ignore)
    scores = mg.logits_report(y, z, sample_weight=w, ignore_index=ignore, top_k=(1, top),
                              n_bins=7)
    for row in REPORT_METRICS:
        np.testing.assert_allclose(_value(report[row.name]), labels.metrics[row.name],
                                   rtol=1e-12, atol=1e-12, err_msg=row.name)
    for name, expected in (("cross_entropy", scores.cross_entropy),
                           ("perplexity", scores.perplexity), ("brier_score", scores.brier_score),
                           ("hinge_loss", scores.hinge_loss),
                           (f"top_{top}_accuracy", scores.top_k_accuracy[top]),
                           ("expected_calibration_error", scores.expected_calibration_error),
                           ("max_calibration_error", scores.max_calibration_error)):
        np.testing.assert_allclose(_value(report[name]), _value(expected), rtol=1e-12,
                                   atol=1e-12, err_msg=name)
    np.testing.assert_allclose(host_array(report.calibration["accuracy"]),
                               host_array(scores.calibration_accuracy), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(host_array(report.per_class["f1"]), labels.per_class["f1"],
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(host_array(report.confusion_matrix),
                               mg.confusion_matrix(y, z, sample_weight=w, ignore_index=ignore),
                               rtol=1e-12)  # exact for counts and integer weights
    assert _value(report.total) == pytest.approx(float(labels.total), rel=1e-12)


def test_labels_stream_equals_functional(backend, rng):
    k = 5
    metrics = mg.ClassificationMetrics(k, confusion_matrix=False)
    ys, ps = [], []
    for n in (9, 30, 2):
        y, p = rng.integers(0, k, n), rng.integers(0, k, n)
        metrics.update(backend.asarray(y), backend.asarray(p))
        ys.append(y)
        ps.append(p)
    report = metrics.compute()
    expected = mg.label_report(np.concatenate(ys), np.concatenate(ps), num_classes=k)
    for row in REPORT_METRICS:
        np.testing.assert_allclose(_value(report[row.name]), expected.metrics[row.name],
                                   rtol=1e-12, atol=1e-12, err_msg=row.name)
    assert report.confusion_matrix is None and "cross_entropy" not in report.keys()
    # Merged halves (their moments written by no update since): the same kappas.
    halves = [mg.ClassificationMetrics(k, confusion_matrix=False) for _ in range(2)]
    for i, (y, p) in enumerate(zip(ys, ps)):
        halves[i % 2].update(backend.asarray(y), backend.asarray(p))
    halves[0].merge(halves[1])
    merged = halves[0].compute()
    for name in ("linear_weighted_kappa", "quadratic_weighted_kappa", "macro_f1"):
        assert _value(merged[name]) == pytest.approx(expected.metrics[name], rel=1e-12)


@pytest.mark.parametrize("target_dtype", ["int32", "int64"])
@pytest.mark.parametrize("pred_kind", ["labels", "float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("weight_dtype", [None, "int64", "float32", "float64"])
def test_every_update_instantiation_agrees_with_numpy(rng, target_dtype, pred_kind,
                                                      weight_dtype):
    """Each streaming_update instantiation (target type x labels or score type x
    weight type) on the emulated backend against the NumPy reference, with
    thresholds, bins and an ignored target."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    k = 4
    (y, z, _), = _batches(rng, k, (45,), ignore=-1,
                          dtype=ml_dtypes.bfloat16 if pred_kind == "bfloat16" else
                          np.float64 if pred_kind == "labels" else np.dtype(pred_kind))
    preds = np.argmax(z.astype(np.float64), axis=1).astype(target_dtype) \
        if pred_kind == "labels" else z
    w = None if weight_dtype is None else (rng.integers(1, 4, y.size) if weight_dtype == "int64"
                                           else rng.random(y.size) + 0.25).astype(weight_dtype)
    reports = {}
    for name in ("numpy", "emulated"):
        with mg.use_backend(name):
            metrics = mg.ClassificationMetrics(k, top_k=(1, 2), n_bins=5, thresholds=4,
                                               ignore_index=-1)
            metrics.update(y.astype(target_dtype), preds, w)
            reports[name] = metrics.compute().to_dict()
    tolerance = 1e-12 if pred_kind in ("labels", "float64") else (
        1e-6 if pred_kind == "float32" else 1e-3)
    _assert_reports_equal(reports["emulated"], reports["numpy"], rtol=tolerance)


def test_merge_and_state_dict(backend, rng):
    batches = _batches(rng, 4, (20, 11, 30, 7), weights="int")
    whole = mg.ClassificationMetrics(4, n_bins=6, thresholds=8)
    first, second = (mg.ClassificationMetrics(4, n_bins=6, thresholds=8) for _ in range(2))
    for i, (y, z, w) in enumerate(batches):
        args = (backend.asarray(y), backend.asarray(z), backend.asarray(w))
        whole.update(*args)
        (first if i % 2 else second).update(*args)
    first.merge(second)
    expected = whole.compute().to_dict()
    _assert_reports_equal(first.compute().to_dict(), expected)  # score sums in another order
    restored = mg.ClassificationMetrics(4, n_bins=6, thresholds=8)
    restored.update(*(backend.asarray(a) for a in batches[0]))  # on this backend, then replaced
    restored.load_state_dict(whole.state_dict())
    _assert_reports_equal(restored.compute().to_dict(), expected, rtol=0)
    host = mg.ClassificationMetrics(4, n_bins=6, thresholds=8)
    host.load_state_dict(whole.state_dict())  # no device yet: the host
    _assert_reports_equal(host.compute().to_dict(), expected)
    with pytest.raises(ValueError, match="same arguments"):
        first.merge(mg.ClassificationMetrics(5))


@pytest.mark.parametrize("weights", ("int", "float"))
def test_version_1_state_dict_loads(backend, rng, weights):
    """A state_dict of version 1 (counts without the misclassified cell) still
    loads: the cell is total - sum(tp), exact for integer counts, the value
    version 1 computed kappa from for float ones."""
    whole = mg.ClassificationMetrics(4)
    for y, z, w in _batches(rng, 4, (20, 11), weights=weights):
        whole.update(backend.asarray(y), backend.asarray(z), backend.asarray(w))
    state = whole.state_dict()
    old = dict(state, version=1, counts=backend.to_numpy(state["counts"])[:-1])
    restored = mg.ClassificationMetrics(4)
    restored.load_state_dict(old)
    counts = backend.to_numpy(restored.state_dict()["counts"])
    np.testing.assert_allclose(counts, backend.to_numpy(state["counts"]), rtol=1e-15)
    _assert_reports_equal(restored.compute().to_dict(), whole.compute().to_dict())


def _assert_reports_equal(actual, expected, rtol=1e-12):
    assert actual.keys() == expected.keys()
    for key, value in expected.items():
        if isinstance(value, dict):
            _assert_reports_equal(actual[key], value, rtol)
        else:
            np.testing.assert_allclose(host_array(actual[key]).astype(float),
                                       host_array(value).astype(float), rtol=rtol, atol=rtol,
                                       err_msg=key)


def test_binned_ranking_within_its_bound(rng):
    """Binned ROC AUC and AP lie within their stated bounds of scikit-learn's exact values."""
    sklearn = pytest.importorskip("sklearn.metrics")
    k, n = 4, 3000
    y = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k)) + 1.5 * np.eye(k)[y]
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    for thresholds in (10, 100):
        metrics = mg.ClassificationMetrics(k, thresholds=thresholds, scores="probabilities")
        metrics.update(y, probabilities)
        report = metrics.compute()
        onehot = np.eye(k)[y]
        for c in range(k):
            exact_auc = sklearn.roc_auc_score(onehot[:, c], probabilities[:, c])
            exact_ap = sklearn.average_precision_score(onehot[:, c], probabilities[:, c])
            bounds = report.to_dict()
            auc = bounds["per_class"]["roc_auc"][c]
            ap = bounds["per_class"]["average_precision"][c]
            assert abs(auc - exact_auc) <= F_bound(metrics, report, c, "roc_auc") + 1e-12
            assert abs(ap - exact_ap) <= F_bound(metrics, report, c, "average_precision") + 1e-12
        macro = sklearn.roc_auc_score(y, probabilities, multi_class="ovr")
        assert abs(_value(report["roc_auc_macro"]) - macro) <= _value(
            report["roc_auc_error_bound"]) + 1e-12
        micro = sklearn.roc_auc_score(np.eye(k)[y].ravel(), probabilities.ravel())
        assert abs(_value(report["roc_auc_micro"]) - micro) < 0.05


def F_bound(metrics, report, c, name):
    """The per-class error bound of the report's score buffer."""
    from metrics_gpu._formulas import labels as F
    spec = metrics._spec
    k = spec["num_classes"]
    head = len(F.STREAM_SCORE_SLOTS) + len(spec["top_k"]) + 3 * spec["n_bins"]
    column = 2 if name == "roc_auc" else 3
    return float(host_array(report._score_values)[head + column * k + c])


def test_deferred_validation_names_update_and_sample(backend):
    metrics = mg.ClassificationMetrics(3)
    good = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    metrics.update(backend.asarray(np.array([0, 1])), backend.asarray(good))
    metrics.update(backend.asarray(np.array([0, 5, 1])),
                   backend.asarray(np.vstack([good, good[:1]])))
    with pytest.raises(ValueError, match=r"y_true of update call 1 .* outside 0\.\.2 .* sample 1"):
        metrics.compute()
    bad_scores = good.copy()
    bad_scores[1, 2] = np.nan
    metrics.reset()
    metrics.update(backend.asarray(np.array([0, 1])), backend.asarray(bad_scores))
    with pytest.raises(ValueError, match=r"preds of update call 0 .* NaN .* sample 1"):
        metrics.compute()
    weighted = mg.ClassificationMetrics(3)
    weighted.update(backend.asarray(np.array([0, 1])), backend.asarray(good),
                    backend.asarray(np.array([1.0, -2.0])))
    with pytest.raises(ValueError, match=r"sample_weight of update call 0 .* sample 1"):
        weighted.compute()


def test_bad_samples_add_nothing(backend):
    """validate=False: bad samples are left out and counted; eager raises first."""
    y = np.array([0, 7, 1, 2])
    z = np.array([[2.0, 0, 0], [0, 1.0, 0], [0, 3.0, 0], [0, 0, np.inf]])
    lax = mg.ClassificationMetrics(3, validate=False)
    lax.update(backend.asarray(y), backend.asarray(z))
    report = lax.compute()
    assert int(host_array(report.invalid)) == 2 and _value(report.total) == 2
    assert _value(report["accuracy"]) == 1.0
    eager = mg.ClassificationMetrics(3, validate="eager")
    with pytest.raises(ValueError, match="y_true contains the label 7 at index 1"):
        eager.update(backend.asarray(y), backend.asarray(z))
    with pytest.raises(ValueError, match="compute.. before any update"):
        eager.compute()


def test_arguments_are_checked():
    for kwargs, message in ((dict(top_k=0), "top_k"), (dict(n_bins=0), "n_bins"),
                            (dict(thresholds=1), "thresholds"), (dict(validate="yes"), "validate"),
                            (dict(scores="odds"), "scores"), (dict(confusion_matrix="x"),
                                                              "confusion_matrix"),
                            (dict(confusion_matrix=1), "confusion_matrix")):
        with pytest.raises(ValueError, match=message):
            mg.ClassificationMetrics(3, **kwargs)
    metrics = mg.ClassificationMetrics(3)
    metrics.update(np.array([0, 1]), np.array([0, 1]))
    with pytest.raises(ValueError, match="holds labels"):
        metrics.update(np.array([0]), np.zeros((1, 3)))
    with pytest.raises(ValueError, match="3 score columns|score columns"):
        mg.ClassificationMetrics(4).update(np.array([0]), np.zeros((1, 3)))


def test_a_report_keeps_its_values_after_later_updates_and_computes(backend, rng):
    """A report's values (0-d views on a GPU) are its own: the state's next
    update and compute leave them as they were (the kernel backends once
    wrote every compute into one buffer of the state, so an epoch's report
    changed with the next epoch's compute)."""
    metrics = mg.ClassificationMetrics(3, thresholds=8)
    y = backend.asarray(np.array([0, 1, 2, 2]))
    right = backend.asarray(np.eye(3)[[0, 1, 2, 2]] * 4)
    metrics.update(y, right)
    first = metrics.compute()
    held = (first["accuracy"], first["cross_entropy"], first.per_class["recall"])
    expected = [backend.to_numpy(value).copy() for value in held]
    metrics.update(y, backend.asarray(np.eye(3)[[1, 2, 0, 0]] * 4))
    second = metrics.compute()
    assert float(second["accuracy"]) == 0.5
    assert float(first["accuracy"]) == 1.0
    for value, before in zip(held, expected):
        np.testing.assert_array_equal(backend.to_numpy(value), before)


def test_update_costs_one_launch(rng):
    """The latency budget, held on the emulated backend (the cuda code path)."""
    with mg.use_backend("emulated"):
        for thresholds in (None, 16):
            metrics = mg.ClassificationMetrics(10, thresholds=thresholds)
            batches = _batches(rng, 10, (64, 64, 64), dtype=np.float32)
            metrics.update(*batches[0][:2])  # warm-up: the state and its workspace
            for y, z, _ in batches[1:]:
                with operation_counter() as counts:
                    metrics.update(y, z)
                assert (counts.launches, counts.host_transfers, counts.device_allocations) == \
                    (1, 0, 0)
            with operation_counter() as counts:
                metrics.compute()
            assert counts.launches <= 2
            # deferred validation reads its four check numbers back, once
            assert counts.host_transfers == 1
        labels = mg.ClassificationMetrics(10, validate=False)
        labels.update(np.arange(10), np.arange(10))
        labels.compute()
        with operation_counter() as counts:
            labels.update(np.arange(10), np.arange(10)[::-1].copy())
            labels.compute()  # labels: the update wrote the moments, one launch is left
        # A compute's outputs are its report's own (two arrays): the next
        # compute must not change the values a report handed out.
        assert (counts.launches, counts.host_transfers, counts.device_allocations) == (2, 0, 2)
        labels.reset()  # zeroed in place: the next epoch allocates nothing
        with operation_counter() as counts:
            labels.update(np.arange(10), np.arange(10))
        assert (counts.launches, counts.host_transfers, counts.device_allocations) == (1, 0, 0)
        assert float(labels.compute()["accuracy"]) == 1.0


def test_deterministic_refuses_float_weights_on_kernels():
    with mg.use_backend("emulated"):
        metrics = mg.ClassificationMetrics(3, deterministic=True)
        with pytest.raises(ValueError, match="sample_weight.*deterministic"):
            metrics.update(np.array([0, 1]), np.array([0, 1]), np.array([0.5, 1.0]))
        metrics.update(np.array([0, 1]), np.array([0, 1]), np.array([2, 3]))


def test_weights_promote_an_integer_state(backend, rng):
    """An unweighted first batch, then float weights: counts become float64."""
    batches = _batches(rng, 3, (10, 12))
    metrics = mg.ClassificationMetrics(3)
    metrics.update(backend.asarray(batches[0][0]), backend.asarray(batches[0][1]))
    w = rng.random(12) + 0.5
    metrics.update(backend.asarray(batches[1][0]), backend.asarray(batches[1][1]),
                   backend.asarray(w))
    y, z, _ = _concat(batches)
    expected = mg.label_report(y, z, sample_weight=np.concatenate([np.ones(10), w]))
    np.testing.assert_allclose(_value(metrics.compute()["macro_f1"]),
                               expected.metrics["macro_f1"], rtol=1e-12)


def test_unweighted_batch_after_float_weights_counts_ones(backend, rng):
    """Float weights, then a batch without weights: its samples weigh 1.0 each
    (the numpy state once failed on it), on labels and on scores."""
    batches = _batches(rng, 3, (10, 12))
    w = rng.random(10) + 0.5
    y, z, _ = _concat(batches)
    expected = mg.label_report(y, z, sample_weight=np.concatenate([w, np.ones(12)]))
    for preds in (z, z.argmax(axis=1)):  # scores, then labels
        metrics = mg.ClassificationMetrics(3)
        metrics.update(backend.asarray(batches[0][0]), backend.asarray(preds[:10]),
                       backend.asarray(w))
        metrics.update(backend.asarray(batches[1][0]), backend.asarray(preds[10:]))
        np.testing.assert_allclose(_value(metrics.compute()["macro_f1"]),
                                   expected.metrics["macro_f1"], rtol=1e-12)


# -- the functional API's one-pass path (validate=False, K known) ----------------------


@pytest.mark.parametrize("weights", [None, "int", "float"])
@pytest.mark.parametrize("ignore", [None, 3])
def test_one_pass_functions_equal_checked_path(backend, rng, weights, ignore):
    """validate=False with K known takes one pass of the streaming state: on valid
    input it gives what the checked path gives."""
    (y, z, w), = _batches(rng, 5, (70,), weights=weights, ignore=ignore)
    args = [backend.asarray(a) for a in (y, z)]
    weight = None if w is None else backend.asarray(w)
    fast = mg.label_report(*args, sample_weight=weight, ignore_index=ignore, validate=False)
    checked = mg.label_report(*args, sample_weight=weight, ignore_index=ignore)
    for row in REPORT_METRICS:
        assert fast.metrics[row.name] == pytest.approx(checked.metrics[row.name], rel=1e-12,
                                                       abs=1e-12), row.name
    np.testing.assert_allclose(fast.confusion_matrix, checked.confusion_matrix, rtol=1e-12)
    assert fast.total == pytest.approx(checked.total, rel=1e-12)
    fast_scores = mg.logits_report(*args, sample_weight=weight, ignore_index=ignore,
                                   validate=False, top_k=(1, 3), n_bins=6)
    checked_scores = mg.logits_report(*args, sample_weight=weight, ignore_index=ignore,
                                      top_k=(1, 3), n_bins=6)
    for name in ("accuracy", "cross_entropy", "perplexity", "brier_score", "hinge_loss",
                 "expected_calibration_error", "max_calibration_error", "total_weight"):
        assert _value(getattr(fast_scores, name)) == pytest.approx(
            _value(getattr(checked_scores, name)), rel=1e-12, abs=1e-12), name
    assert _value(fast_scores.top_k_accuracy[3]) == pytest.approx(
        _value(checked_scores.top_k_accuracy[3]), rel=1e-12)
    labels = backend.asarray(np.argmax(z, axis=1))
    assert _value(mg.accuracy_score(args[0], labels, sample_weight=weight, num_classes=5,
                                    ignore_index=ignore, validate=False)) == pytest.approx(
        _value(mg.accuracy_score(args[0], args[1], sample_weight=weight,
                                 ignore_index=ignore)), rel=1e-12)


def test_one_pass_leaves_bad_samples_out(backend):
    """validate=False: out-of-range targets, NaN rows and negative weights are
    counted as invalid, on every backend alike."""
    y = np.array([0, 1, 9, 2, 1])
    z = np.array([[3.0, 0, 0], [0, 2.0, 0], [1.0, 0, 0], [0, np.nan, 1.0], [0, 0, 1.0]])
    w = np.array([1.0, 2.0, 1.0, 1.0, -1.0])
    report = mg.label_report(backend.asarray(y), backend.asarray(z),
                             sample_weight=backend.asarray(w), validate=False)
    assert report.invalid == 3 and report.total == 3.0
    assert report.metrics["accuracy"] == 1.0
    scores = mg.logits_report(backend.asarray(y), backend.asarray(z), validate=False)
    assert _value(scores.n_invalid) == 2 and _value(scores.total_weight) == 3.0


def test_one_pass_budget(rng, monkeypatch):
    """label_report, logits_report and accuracy_score with validate=False: at most
    two launches, no host transfer, and no K x K buffer unless asked."""
    k = 100
    (y, z, _), = _batches(rng, k, (96,), dtype=np.float32)
    with mg.use_backend("emulated"):
        backend = mg.backends.selection.get_backend_implementation("emulated")
        shapes = []
        original = type(backend).zeros

        def zeros(self, shape, dtype):
            shapes.append(shape)
            return original(self, shape, dtype)

        monkeypatch.setattr(type(backend), "zeros", zeros)
        calls = {
            "label_report": lambda: mg.label_report(y, z, validate=False, confusion_matrix=False),
            "logits_report": lambda: mg.logits_report(y, z, validate=False),
            "accuracy_score": lambda: mg.accuracy_score(y, z, validate=False),
        }
        for name, call in calls.items():
            shapes.clear()
            with operation_counter() as counts:
                result = call()
            assert counts.launches <= 2 and counts.host_transfers == 0, name
            assert all(np.prod(shape) < k * k for shape in shapes), (name, shapes)
        assert result is not None
        report = mg.label_report(y, z, validate=False, confusion_matrix=False)
        assert report.confusion_matrix is None


@pytest.mark.parametrize("thresholds", [None, 4])
@pytest.mark.parametrize("weight_dtype", [None, "float64"])
@pytest.mark.parametrize("pred_kind", ["float32", "float64", "float16", "bfloat16"])
def test_emulated_wide_rows_update_agrees_with_numpy(rng, monkeypatch, pred_kind, weight_dtype,
                                                     thresholds):
    """Rows of many columns read 16 bytes a load (feature wide_rows, a warp per
    row: kernels/scores.cu scan_row_wide) on the emulated backend, against the
    NumPy reference: rows of 300 columns starting at every offset from a
    16-byte boundary (a column slice of rows of odd length), with bins,
    top-k, an ignored target and a NaN row left out (and counted:
    validate=False); with thresholds, the same rows go to the rows'
    instantiation with the histogram (lanes per row)."""
    from metrics_gpu.backends.launchers import streaming as streaming_launchers

    ml_dtypes = pytest.importorskip("ml_dtypes")
    k, offset = 300, 3
    dtype = ml_dtypes.bfloat16 if pred_kind == "bfloat16" else np.dtype(pred_kind)
    (y, z, _), = _batches(rng, k + offset + 2, (45,), ignore=-1, dtype=dtype)
    y[y >= 0] %= k
    z[5, offset + 7] = np.nan  # left out, counted
    scores = z[:, offset:offset + k]
    w = None if weight_dtype is None else rng.random(y.size) + 0.25
    configs = []

    # On the device object, not its class: pytest's undo of another test's
    # patch of the object's launch leaves a bound method there that would
    # shadow a patch of the class.
    device = get_backend_implementation("emulated").device
    launch = device.launch

    def spy(source, expression, grid, block, args, shared_bytes=0):
        if expression.startswith("streaming_update"):
            configs.append(expression)
        return launch(source, expression, grid, block, args, shared_bytes)

    monkeypatch.setattr(device, "launch", spy)
    reports = {}
    for name in ("numpy", "emulated"):
        with mg.use_backend(name):
            metrics = mg.ClassificationMetrics(k, top_k=(1, 5), n_bins=5, thresholds=thresholds,
                                               ignore_index=-1, validate=False)
            metrics.update(y, scores, w)
            reports[name] = metrics.compute().to_dict()
    # Wide rows, or with the thresholds histogram the rows' instantiation.
    features = (streaming_launchers.STREAM_RANKING if thresholds
                else streaming_launchers.STREAM_WIDE_ROWS)
    assert [expression.endswith(f", {features}>") for expression in configs] == [True]
    tolerance = 1e-12 if pred_kind == "float64" else (1e-6 if pred_kind == "float32" else 1e-3)
    _assert_reports_equal(reports["emulated"], reports["numpy"], rtol=tolerance)


@pytest.mark.parametrize("thresholds", [2, 3, 7, 10, 22, 100, 1000])
def test_emulated_histogram_bins_at_and_beside_every_edge(thresholds):
    """The thresholds histogram bins each probability as NumPy's
    calibration_bin does at the doubles nearest b / H, one ulp either side
    and between edges (the kernel decides an edge without a division:
    kernels/scores.cu at_or_past_edge). Two classes: a row's probabilities
    are p and 1 - p. (From logits, a row's softmax may round an ulp apart
    from NumPy's, and a row at an edge then lands a bin apart: not a case
    of the rule.)"""
    edges = np.arange(1, thresholds) / thresholds
    p = np.concatenate([edges, np.nextafter(edges, 0.0), np.nextafter(edges, 1.0),
                        (np.arange(thresholds) + 0.37) / thresholds])
    y = np.arange(p.size) % 2
    histograms = {}
    for name in ("numpy", "emulated"):
        with mg.use_backend(name):
            metrics = mg.ClassificationMetrics(2, thresholds=thresholds, scores="probabilities")
            metrics.update(y, np.stack([p, 1.0 - p], axis=1))
            histograms[name] = np.asarray(metrics.state_dict()["histogram"]).copy()
    np.testing.assert_array_equal(histograms["emulated"], histograms["numpy"])
    assert histograms["numpy"].sum() == 2 * p.size


@pytest.mark.parametrize("weights", [None, "int", "float"])
def test_emulated_histogram_in_shared_memory_equals_global_atomics(rng, monkeypatch, weights):
    """The thresholds histogram is added per block in shared memory and
    flushed once (config private_histogram) when a block has at least 2H
    rows, by global atomics otherwise: a batch of each kind, the same rows
    in both, gives the NumPy reference's histogram and binned ROC AUC / AP."""
    from metrics_gpu.backends.launchers import streaming as streaming_launchers

    k, h = 6, 5
    (y, z, w), = _batches(rng, k, (900,), weights=weights)
    device = get_backend_implementation("emulated").device
    launch = device.launch
    private = []

    def spy(source, expression, grid, block, args, shared_bytes=0):
        if expression.startswith("streaming_update"):
            config = np.array(args[5])
            private.append(int(config[streaming_launchers.STREAM_CONFIG.index(
                "private_histogram")]))
        return launch(source, expression, grid, block, args, shared_bytes)

    monkeypatch.setattr(device, "launch", spy)
    histograms, reports = {}, {}
    for name in ("numpy", "emulated"):
        with mg.use_backend(name):
            metrics = mg.ClassificationMetrics(k, thresholds=h)
            metrics.update(y, z, w)                     # many rows a block: shared memory
            for start in range(0, 24, 3):               # 3 rows: global atomics
                metrics.update(y[start:start + 3], z[start:start + 3],
                               None if w is None else w[start:start + 3])
            histograms[name] = np.asarray(metrics.state_dict()["histogram"]).copy()
            reports[name] = metrics.compute().to_dict()
    assert private[0] == 1 and set(private[1:]) == {0}, private
    # Counts exactly; float weights as sums in another order.
    np.testing.assert_allclose(histograms["emulated"], histograms["numpy"],
                               rtol=1e-12 if weights == "float" else 0)
    _assert_reports_equal(reports["emulated"], reports["numpy"], rtol=1e-9)


# (classes, weights): the class splits of a block's 24 KiB, with 32-bit
# cells for unweighted counts and 8-byte ones for weights.
SPLIT_CASES = [(3000, None, 2), (5000, None, 3), (3000, "int", 3), (5000, "float", 5)]


@pytest.mark.parametrize("k, weights, splits", SPLIT_CASES)
def test_emulated_label_counts_split_between_blocks(rng, monkeypatch, weights, k, splits):
    """Label counts whose 3K + 2 cells pass a block's shared memory (24 KiB
    here) are split by class range between blocks (config class_splits;
    5000 classes leave the last range short of its span): each of a group's
    blocks reads the same rows and counts its range in shared memory (32-bit
    cells unweighted, the counts' type with weights), the first also the
    total, the kappa moments, the matrix and the rows left out. The state
    equals the NumPy reference's, with ignored targets and (validate=False)
    targets and predictions out of range; a small batch takes global
    atomics."""
    from metrics_gpu.backends.launchers import streaming as streaming_launchers

    n = 90_000
    y = rng.integers(0, k, n)
    y[rng.random(n) < 0.1] = -1                       # ignored
    p = np.where(rng.random(n) < 0.5, y, rng.integers(0, k, n))
    p[y < 0] = rng.integers(0, k, int((y < 0).sum()))
    y[:3], p[:3] = (0, k - 1, k // 2), (0, k - 1, k // 2 + 1)  # both range ends
    y[[10, 500, 70_000]] = (k, k + 7, -3)                # out of range: left out
    y[[20, 600, 80_000]], p[[20, 600, 80_000]] = 1, (k, -1, 2 * k)
    w = None if weights is None else (rng.integers(1, 5, n) if weights == "int"
                                      else rng.random(n) + 0.1)
    device = get_backend_implementation("emulated").device
    monkeypatch.setattr(device, "shared_memory_per_block_optin", 24 * 1024)
    # Room for several blocks an SM: several groups of `splits` blocks.
    monkeypatch.setattr(device, "shared_memory_per_multiprocessor", 4 * 48 * 1024)
    launch = device.launch
    seen = []

    def spy(source, expression, grid, block, args, shared_bytes=0):
        if expression.startswith("streaming_update"):
            config = np.array(args[5])
            seen.append((int(config[streaming_launchers.STREAM_CONFIG.index("privatize")]),
                         int(config[streaming_launchers.STREAM_CONFIG.index("class_splits")]),
                         grid))
        return launch(source, expression, grid, block, args, shared_bytes)

    monkeypatch.setattr(device, "launch", spy)
    states, reports = {}, {}
    for name in ("numpy", "emulated"):
        with mg.use_backend(name):
            metrics = mg.ClassificationMetrics(k, ignore_index=-1, confusion_matrix=True,
                                               validate=False)
            metrics.update(y, p, w)                     # split between blocks
            metrics.update(y[:50], p[:50], None if w is None else w[:50])  # global atomics
            states[name] = {key: np.asarray(value).copy()
                            for key, value in metrics.state_dict().items()
                            if isinstance(value, np.ndarray)}
            reports[name] = metrics.compute().to_dict()
    # Rows left out: 6 in the first batch, rows 10 and 20 again in the second.
    assert int(states["numpy"]["checks"][0]) == 8, states["numpy"]["checks"]
    (private, split, grid), (small_private, small_split, _) = seen
    assert (private, split, small_private, small_split) == (1, splits, 0, 1), seen
    assert grid % splits == 0 and grid > splits, grid  # groups of whole ranges
    for key, value in states["numpy"].items():
        np.testing.assert_allclose(states["emulated"][key], value,
                                   rtol=1e-12 if weights == "float" else 0, err_msg=key)
    _assert_reports_equal(reports["emulated"], reports["numpy"], rtol=1e-9)


@pytest.mark.parametrize("thresholds", [None, 6])
def test_emulated_channel_first_maps_read_a_thread_per_position(rng, monkeypatch, thresholds):
    """Segmentation maps (N, K, H, W) whose positions are contiguous go to
    streaming_update with one thread per position (group 1: a warp's reads
    of each class are 32 consecutive scores), rows of (N, K) scores of the
    same K with lanes per row; both equal the NumPy reference, with an
    ignored target, a NaN position left out, weights, bins, top-k and the
    thresholds histogram."""
    from metrics_gpu.backends.launchers import streaming as streaming_launchers

    n, k, h, w = 2, 21, 5, 6  # 21 classes: lanes per row of (N, K) scores
    logits = rng.normal(size=(n, k, h, w)).astype(np.float32)
    target = rng.integers(0, k, (n, h, w))
    target[0, 1, 2] = -1
    logits[1, 3, 4, 5] = np.nan  # left out, counted
    weight = rng.random((n, h, w)) + 0.5
    rows = np.moveaxis(logits, 1, -1).reshape(-1, k)
    groups = []
    device = get_backend_implementation("emulated").device
    launch = device.launch

    def spy(source, expression, grid, block, args, shared_bytes=0):
        if expression.startswith("streaming_update"):
            groups.append(int(np.array(args[5])[streaming_launchers.STREAM_CONFIG.index("group")]))
        return launch(source, expression, grid, block, args, shared_bytes)

    monkeypatch.setattr(device, "launch", spy)
    reports = {}
    layouts = {"maps": (target, logits, weight),
               "rows": (target.reshape(-1), rows, weight.reshape(-1))}
    for name in ("numpy", "emulated"):
        for layout, (targets, scores, weights) in layouts.items():
            with mg.use_backend(name):
                metrics = mg.ClassificationMetrics(k, top_k=(1, 2), n_bins=4,
                                                   thresholds=thresholds, ignore_index=-1,
                                                   validate=False)
                metrics.update(targets, scores, weights)
                reports[name, layout] = metrics.compute().to_dict()
    assert groups[0] == 1 and groups[1] > 1, groups
    expected = reports["numpy", "maps"]
    _assert_reports_equal(reports["numpy", "rows"], expected, rtol=1e-12)
    for layout in ("maps", "rows"):
        _assert_reports_equal(reports["emulated", layout], expected, rtol=1e-6)


def test_layouts_and_huge_k(backend, rng):
    """Channel-first scores whose positions one stride walks (read in place) or
    not (one copy), targets given as a column, and K past the dense matrix."""
    n, k, h, w = 3, 4, 6, 5
    logits = rng.normal(size=(n, k, h, w))
    target = rng.integers(0, k, (n, h, w))
    flat = np.moveaxis(logits, 1, -1).reshape(-1, k)
    expected = mg.label_report(target.reshape(-1), flat)
    for scores, targets in ((logits, target),                           # contiguous
                            (logits[:, :, ::2], target[:, ::2]),        # one stride per position
                            (np.swapaxes(logits, 2, 3), np.swapaxes(target, 1, 2))):  # a copy
        metrics = mg.ClassificationMetrics(k)
        metrics.update(backend.asarray(targets), backend.asarray(scores))
        reference = mg.label_report(targets.reshape(-1),
                                    np.moveaxis(scores, 1, -1).reshape(-1, k))
        assert _value(metrics.compute()["macro_f1"]) == pytest.approx(
            reference.metrics["macro_f1"], rel=1e-12)
    column = mg.ClassificationMetrics(k)
    column.update(backend.asarray(target.reshape(-1, 1)), backend.asarray(flat))
    assert _value(column.compute()["accuracy"]) == pytest.approx(expected.metrics["accuracy"])
    huge = 2500
    y, p = rng.integers(0, huge, 400), rng.integers(0, huge, 400)
    metrics = mg.ClassificationMetrics(huge)
    metrics.update(backend.asarray(y), backend.asarray(p))
    report = metrics.compute()
    assert report.confusion_matrix is None
    reference = mg.label_report(y, p, num_classes=huge)
    for name in ("macro_f1", "quadratic_weighted_kappa", "balanced_accuracy"):
        assert _value(report[name]) == pytest.approx(reference.metrics[name], rel=1e-12), name


def test_moves_between_host_and_backend(rng):
    """to("cpu") carries an emulated state to the host backend unchanged."""
    (y, z, w), = _batches(rng, 3, (40,), weights="int")
    with mg.use_backend("emulated"):
        metrics = mg.ClassificationMetrics(3, thresholds=5)
        metrics.update(y, z, w)
        expected = metrics.compute().to_dict()
    metrics.to("cpu")
    assert "numpy" in repr(metrics)
    _assert_reports_equal(metrics.compute().to_dict(), expected)
    with pytest.raises(ValueError, match="device must be"):
        metrics.to("tpu")


# -- the declared kind of the scores ---------------------------------------------------


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _first_non_probability(rows: np.ndarray, tolerance: float):
    """The first row that is not probabilities, by brute force (the reference)."""
    for i, row in enumerate(rows.astype(np.float64)):
        if (row < 0).any() or (row > 1).any() or abs(row.sum() - 1) > tolerance:
            return i
    return None


def test_eager_refuses_rows_that_are_not_probabilities(backend, rng):
    y = np.array([0, 1, 2, 1])
    probabilities = _softmax(rng.normal(size=(4, 3)))
    # A value outside [0, 1]: not probabilities (logits, which scores='logits'
    # reads); a sum only: probabilities to renormalise, never "pass logits".
    for row, bad, problem in (
            (2, [0.5, 0.6, -0.1], r"-0\.1 in column 2, outside \[0, 1\]: not probabilities, "
                                  r"as scores='probabilities' declares \(for logits, build the "
                                  r"state with scores='logits'\)"),
            (1, [0.5, 0.6, 0.1], r"summing to 1\.2, not 1 \(within 0\.0078\): rows of "
                                 r"probabilities, as scores='probabilities' declares, must sum "
                                 r"to 1; .*divide each row by its sum")):
        scores = probabilities.copy()
        scores[row] = bad
        metrics = mg.ClassificationMetrics(3, scores="probabilities", validate="eager")
        with pytest.raises(ValueError, match=rf"preds row {row} .*holds .*{problem}") as error:
            metrics.update(backend.asarray(y), backend.asarray(scores))
        assert ("scores='logits'" in str(error.value)) == (row == 2), str(error.value)
        with pytest.raises(ValueError, match="compute.. before any update"):
            metrics.compute()  # nothing was added
    metrics = mg.ClassificationMetrics(3, scores="probabilities", validate="eager")
    metrics.update(backend.asarray(y), backend.asarray(probabilities))
    assert _value(metrics.compute()["cross_entropy"]) == pytest.approx(
        float(mg.log_loss(y, probabilities)), rel=1e-12)


PROBABILITIES_AS_LOGITS = (r"preds: every row is in \[0, 1\] and sums to 1.*"
                           r"pass scores='probabilities'")


@pytest.mark.parametrize("validate", ["deferred", "eager", False])
def test_probabilities_read_as_logits_warn_once(backend, rng, validate):
    """Host batches and validate="eager" warn in the first update; a GPU batch
    under "deferred" at the first compute() (the test queued, no sync in the
    update), and under validate=False not at all (nothing read)."""
    y = np.array([0, 1, 2, 1])
    probabilities = _softmax(rng.normal(size=(4, 3)))
    metrics = mg.ClassificationMetrics(3, validate=validate)
    on_gpu = backend.name == "cuda" and validate != "eager"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        metrics.update(backend.asarray(y), backend.asarray(probabilities))
    assert len(caught) == (not on_gpu), [str(w.message) for w in caught]
    if on_gpu and validate == "deferred":
        with pytest.warns(UserWarning, match=PROBABILITIES_AS_LOGITS):
            metrics.compute()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        metrics.update(backend.asarray(y), backend.asarray(probabilities))  # once
        metrics.compute()
        logits = mg.ClassificationMetrics(3, validate=validate)
        logits.update(backend.asarray(y), backend.asarray(np.log(probabilities)))
        declared = mg.ClassificationMetrics(3, validate=validate, scores="probabilities")
        declared.update(backend.asarray(y), backend.asarray(probabilities))


def _flawed_probabilities(rng, n, k, dtype, flaws):
    """n softmax rows of ``dtype``, each ``(row, flaw)`` applied: a negative
    value, a value above 1, the row halved (not probabilities), "nudged"
    within the type's tolerance (still probabilities), or scaled by 1 + 0.6 or
    1 + 1.6 times 2**-7 ("half_rounded", "off_sum": about the sum errors of a
    half-precision softmax, and past them; the reference decides)."""
    rows = _softmax(3 * rng.normal(size=(n, k))).astype(dtype)
    for row, flaw in flaws:
        row %= n
        if flaw == "negative":
            rows[row, 0] = -0.5
        elif flaw == "above_one":
            rows[row, -1] = 1.25
        elif flaw == "scaled":
            rows[row] = rows[row] * 0.5
        elif flaw in ("half_rounded", "off_sum"):
            gap = (0.6 if flaw == "half_rounded" else 1.6) * 2.0**-7
            rows[row] = rows[row] * (1 - gap if row % 2 else 1 + gap)
        else:
            rows[row, 0] = min(1.0, rows[row, 0] + 0.2 * float(np.finfo(dtype).eps))
    return rows


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from(("float16", "float32", "float64")), k=st.integers(2, 5),
       n=st.integers(1, 20), seed=st.integers(0, 2**32 - 1),
       flaws=st.lists(st.tuples(st.integers(0, 19), st.sampled_from(
           ("negative", "above_one", "scaled", "nudged", "half_rounded", "off_sum"))),
           max_size=3))
def test_declared_kind_property(dtype, k, n, seed, flaws):
    """Eager states refuse exactly the batches with a row that is not probabilities,
    naming the first; logits warn exactly when every row is probabilities."""
    rng = np.random.default_rng(seed)
    rows = _flawed_probabilities(rng, n, k, dtype, flaws)
    # sqrt(eps) of the type, at least bfloat16's eps (2**-7): rows made in half
    # precision and widened are probabilities.
    tolerance = max(float(np.sqrt(np.finfo(dtype).eps)), 2.0**-7)
    first = _first_non_probability(rows, tolerance)
    y = rng.integers(0, k, n)
    eager = mg.ClassificationMetrics(k, scores="probabilities", validate="eager")
    if first is None:
        eager.update(y, rows)
    else:
        with pytest.raises(ValueError, match=rf"preds row {first} "):
            eager.update(y, rows)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        logits = mg.ClassificationMetrics(k)
        logits.update(y, rows)
        logits.compute()  # where a GPU state (the default backend's) warns
    caught = [str(w.message) for w in caught if "as probabilities do" in str(w.message)]
    assert len(caught) == (first is None), caught


def test_deferred_probabilities_checked_in_the_pass(backend, rng):
    """validate="deferred": rows that are not probabilities are left out inside the
    update (no sync) and named at compute(); validate=False counts them."""
    y = np.array([0, 1, 2, 1, 0])
    good = _softmax(rng.normal(size=(5, 3)))
    bad = good.copy()
    bad[3] = [0.5, 0.6, 0.1]   # sums to 1.2
    bad[4] = [1.5, -0.2, -0.3]  # sums to 1, outside [0, 1]
    metrics = mg.ClassificationMetrics(3, scores="probabilities")
    metrics.update(backend.asarray(y), backend.asarray(good))
    metrics.update(backend.asarray(y), backend.asarray(bad))
    with pytest.raises(ValueError, match=r"preds of update call 1 .* not probabilities .*"
                                         r"at sample 3; 2 sample\(s\) were left out"):
        metrics.compute()
    lax = mg.ClassificationMetrics(3, scores="probabilities", validate=False)
    lax.update(backend.asarray(y), backend.asarray(bad))
    report = lax.compute()
    assert int(host_array(report.invalid)) == 2 and _value(report.total) == 3
    assert _value(report["cross_entropy"]) == pytest.approx(
        float(mg.log_loss(y[:3], bad[:3], labels=[0, 1, 2])), rel=1e-12)
    logits = mg.ClassificationMetrics(3, validate=False)  # logits: any finite value
    logits.update(backend.asarray(y), backend.asarray(bad))
    assert int(host_array(logits.compute().invalid)) == 0


@pytest.mark.parametrize("backend_name", ["numpy", "emulated"])
def test_gpu_batch_of_probabilities_read_as_logits_warns_at_compute(monkeypatch, rng,
                                                                    backend_name):
    """A GPU batch (here host arrays taken for one) under validate="deferred":
    the update copies its first rows and reads nothing; the first compute()
    warns, once; NaN rows, logits and a declared state do not warn."""
    from metrics_gpu._streaming import metrics as _streaming
    monkeypatch.setattr(_streaming, "is_device_array", lambda array: True)
    y = np.array([0, 1, 2, 1])
    probabilities = _softmax(rng.normal(size=(4, 3)))
    with_nan = probabilities.copy()
    with_nan[2, 1] = np.nan
    with mg.use_backend(backend_name):
        metrics = mg.ClassificationMetrics(3)
        with warnings.catch_warnings(), operation_counter() as counts:
            warnings.simplefilter("error", UserWarning)
            metrics.update(y, probabilities)
        assert counts.host_transfers == 0
        with pytest.warns(UserWarning, match=PROBABILITIES_AS_LOGITS):
            metrics.compute()
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            metrics.compute()  # once
            metrics.reset()
            metrics.update(y, probabilities)
            metrics.compute()
            for scores, options in ((np.log(probabilities), {}), (with_nan, {}),
                                    (probabilities, {"scores": "probabilities"}),
                                    (probabilities, {"validate": False})):
                other = mg.ClassificationMetrics(3, **options)
                other.update(y, scores)
                if options.get("validate", True):
                    with contextlib.suppress(ValueError):  # NaN rows: named at compute
                        other.compute()


@pytest.mark.parametrize("layout", ["bfloat16", "images", "column slice"])
def test_gpu_batch_sample_of_probabilities_keeps_the_layout(monkeypatch, rng, layout):
    """The rows copied from a GPU batch for the test at compute: bfloat16
    scores as their bit patterns, channel-first images (a class per channel),
    and no test (no warning, no copy kernel) for scores that are not
    contiguous."""
    torch = pytest.importorskip("torch")
    from metrics_gpu._streaming import metrics as _streaming
    monkeypatch.setattr(_streaming, "is_device_array", lambda array: True)
    probabilities = _softmax(rng.normal(size=(6, 3)))
    y = np.array([0, 1, 2, 1, 0, 2])
    if layout == "bfloat16":
        scores = torch.tensor(probabilities, dtype=torch.bfloat16)
    elif layout == "images":  # (2 images, 3 classes, 3 positions)
        scores = np.ascontiguousarray(probabilities.reshape(2, 3, 3, order="F"))
        scores = scores / scores.sum(axis=1, keepdims=True)
        y = y.reshape(2, 3)
    else:
        scores = np.concatenate([probabilities, probabilities], axis=1)[:, :3]
    with mg.use_backend("emulated"):
        metrics = mg.ClassificationMetrics(3)
        metrics.update(y, scores)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UserWarning)
            metrics.compute()
    messages = [str(w.message) for w in caught if "as probabilities do" in str(w.message)]
    assert len(messages) == (layout != "column slice"), messages


@pytest.mark.parametrize("backend_name", ["numpy", "emulated"])
def test_deferred_probabilities_property(backend_name):
    """Deferred states of probabilities leave out exactly the rows that are not
    probabilities (the brute-force reference), on every row layout of the
    kernel (a lane, lanes or a warp per row: K = 2 .. 300), and name the first."""

    @settings(max_examples=25 if backend_name == "numpy" else 12, deadline=None)
    @given(dtype=st.sampled_from(("float16", "float32", "float64")),
           k=st.sampled_from((2, 5, 20, 300)), n=st.integers(1, 12),
           seed=st.integers(0, 2**32 - 1),
           flaws=st.lists(st.tuples(st.integers(0, 11), st.sampled_from(
               ("negative", "above_one", "scaled", "half_rounded", "off_sum"))),
               max_size=3))
    def check(dtype, k, n, seed, flaws):
        rng = np.random.default_rng(seed)
        rows = _flawed_probabilities(rng, n, k, dtype, flaws)
        tolerance = max(float(np.sqrt(np.finfo(dtype).eps)), 2.0**-7)  # see above
        bad = [i for i in range(n) if _first_non_probability(rows[i:i + 1], tolerance) == 0]
        y = rng.integers(0, k, n)
        with mg.use_backend(backend_name):
            lax = mg.ClassificationMetrics(k, scores="probabilities", validate=False)
            lax.update(y, rows)
            assert int(host_array(lax.compute().invalid)) == len(bad)
            deferred = mg.ClassificationMetrics(k, scores="probabilities")
            deferred.update(y, rows)
            first = deferred.first_invalid()
        assert (first is None) == (not bad)
        if bad:
            assert first[:3] == ("preds", 0, bad[0])

    check()


@pytest.mark.parametrize("validate", ["deferred", "eager"])
def test_widened_float32_probabilities_are_probabilities(backend, rng, validate):
    """A float32 softmax widened to float64 sums to 1 within float32's rounding
    only: still rows of probabilities (the least tolerance is float32's)."""
    y = np.arange(64) % 7
    rows = _softmax(rng.normal(size=(64, 7)).astype(np.float32) * 4).astype(np.float32)
    widened = rows.astype(np.float64)
    assert np.abs(widened.sum(axis=1) - 1).max() > np.sqrt(np.finfo(np.float64).eps)
    metrics = mg.ClassificationMetrics(7, scores="probabilities", validate=validate)
    metrics.update(backend.asarray(y), backend.asarray(widened))
    report = metrics.compute()
    assert int(host_array(report.invalid)) == 0 and _value(report.total) == 64


@pytest.mark.parametrize("validate", ["deferred", False, "eager"])
def test_bfloat16_probabilities_are_probabilities(backend, rng, validate):
    """bfloat16 keeps 8 significant bits: a softmax rounded to it sums to 1
    within about 2**-8, past float32's tolerance; its rows are still
    probabilities (their own eps sets the tolerance), on every path."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    y = np.arange(256) % 5
    y[:2] = 1
    rows = _softmax(rng.normal(size=(256, 5)) * 3).astype(ml_dtypes.bfloat16)
    rows[:2, :2] = np.array([[0.048584, 0.953125], [0.287109, 0.710938]])
    rows[:2, 2:] = 0
    gaps = np.abs(rows.astype(np.float64).sum(axis=1) - 1)
    assert gaps.max() > np.sqrt(np.finfo(np.float32).eps)
    metrics = mg.ClassificationMetrics(5, scores="probabilities", validate=validate)
    metrics.update(backend.asarray(y), backend.asarray(rows))
    report = metrics.compute()
    assert int(host_array(report.invalid)) == 0 and _value(report.total) == 256


def test_one_pass_leaves_out_rows_that_are_not_probabilities(backend):
    """logits_report(from_logits=False, validate=False) runs the streaming update:
    a row that is not probabilities is left out and counted, as a NaN row is."""
    y = np.array([0, 1, 2])
    p = np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.5, 0.6, 0.1]])
    report = mg.logits_report(backend.asarray(y), backend.asarray(p), from_logits=False,
                              validate=False)
    assert int(host_array(report.n_invalid)) == 1
    assert _value(report.cross_entropy) == pytest.approx(-np.log(0.8), rel=1e-12)


@pytest.mark.parametrize("copied", ["deepcopy", "pickle"])
def test_states_copy_and_pickle_on_every_backend(backend, rng, copied):
    """Both streaming states (a kernel backend's holds its device's compiled
    modules): a copy computes what the original does, and each then goes on
    alone, its launch plans made anew."""
    import copy
    import pickle

    def duplicate(metrics):
        return copy.deepcopy(metrics) if copied == "deepcopy" else pickle.loads(
            pickle.dumps(metrics))

    y, z = rng.integers(0, 4, 50), rng.normal(size=(50, 4))
    yl, zl = rng.integers(0, 2, (50, 3)), rng.normal(size=(50, 3))
    streams = [(mg.ClassificationMetrics(4, thresholds=8), (y, z), "macro_f1"),
               (mg.MultilabelMetrics(3, thresholds=8), (yl, zl), "f1_macro")]
    for metrics, (target, scores), name in streams:
        for _ in range(2):  # the second batch takes a planned launch
            metrics.update(backend.asarray(target), backend.asarray(scores))
        twin = duplicate(metrics)
        assert float(twin.compute()[name]) == float(metrics.compute()[name])
        twin.update(backend.asarray(target), backend.asarray(scores))
        metrics.update(backend.asarray(target[:10]), backend.asarray(scores[:10]))
        assert float(twin.compute().total) == 150 and float(metrics.compute().total) == 110
