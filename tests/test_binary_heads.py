"""A binary head's scores in ClassificationMetrics(num_classes=2): one column of
the positive class's logits (a sigmoid head) or probabilities, as ``(N,)``,
``(N, 1)`` or a segmentation map's ``(N, 1, H, W)``, on every backend,
against scikit-learn on the whole set.

A column z is read as the two-class row ``[0, z]`` (softmax: ``[1 - sigmoid(z),
sigmoid(z)]``) and a probability p as ``[1 - p, p]``; class 1 is predicted
where z > 0 or p > 1/2.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn import metrics as skm

import metrics_gpu as mg

N = 600
SHAPES = {"(N,)": lambda n: (n,), "(N, 1)": lambda n: (n, 1)}


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _binary_case(rng, n=N):
    y = rng.integers(0, 2, n)
    z = rng.normal(size=n) + 1.5 * (2 * y - 1)
    return y, z, rng.integers(1, 5, n).astype(np.float64)


def _batches(arrays, size=250):
    n = len(arrays[0])
    for start in range(0, n, size):
        yield tuple(None if a is None else a[start:start + size] for a in arrays)


def _assert_equals_sklearn(report, y, p, w, score_rtol=1e-9):
    """The label metrics at 1e-9; the score metrics at ``score_rtol`` (the
    kernels widen half-precision scores to float32, not float64)."""
    predicted = (p > 0.5).astype(int)
    expected = {
        "accuracy": skm.accuracy_score(y, predicted, sample_weight=w),
        "macro_f1": skm.f1_score(y, predicted, average="macro", sample_weight=w),
        "balanced_accuracy": skm.balanced_accuracy_score(y, predicted, sample_weight=w),
        "matthews_corrcoef": skm.matthews_corrcoef(y, predicted, sample_weight=w),
        "cross_entropy": skm.log_loss(y, p, sample_weight=w),
        "brier_score": skm.brier_score_loss(y, p, sample_weight=w),
    }
    for name, value in expected.items():
        rtol = score_rtol if name in ("cross_entropy", "brier_score") else 1e-9
        assert float(report[name]) == pytest.approx(value, rel=rtol, abs=1e-12), name
    # Binned over thresholds=: within the bound the report gives with it.
    exact = skm.roc_auc_score(y, p, sample_weight=w)
    assert abs(float(report["roc_auc"]) - exact) <= float(report["roc_auc_error_bound"]) + 1e-12


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("kind", ["logits", "probabilities"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_binary_column_equals_sklearn(backend, rng, shape, kind, weighted):
    y, z, w = _binary_case(rng)
    p = _sigmoid(z)
    scores = (z if kind == "logits" else p).reshape(SHAPES[shape](N))
    weights = w if weighted else None
    metrics = mg.ClassificationMetrics(2, scores=kind, thresholds=64)
    for batch in _batches((y, scores, weights)):
        metrics.update(*(None if a is None else backend.asarray(a) for a in batch))
    _assert_equals_sklearn(metrics.compute(), y, p, weights)


def test_binary_segmentation_map_equals_sklearn(backend, rng):
    """A (N, 1, H, W) map of logits with (N, H, W) targets: every pixel a sample."""
    y = rng.integers(0, 2, (6, 5, 7))
    z = rng.normal(size=(6, 1, 5, 7)) + 1.5 * (2 * y[:, None] - 1)
    metrics = mg.ClassificationMetrics(2, thresholds=64)
    metrics.update(backend.asarray(y[:4]), backend.asarray(z[:4]))
    metrics.update(backend.asarray(y[4:]), backend.asarray(z[4:, 0]))  # (N, H, W) too
    _assert_equals_sklearn(metrics.compute(), y.reshape(-1), _sigmoid(z).reshape(-1), None)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_sigmoid_head_from_torch(backend, rng, dtype):
    """AMP's float16 and bfloat16 logits of a torch sigmoid head, (N, 1) and
    requiring grad: the metrics of the values the tensor holds."""
    torch = pytest.importorskip("torch")
    if backend.name == "cuda":
        pytest.skip("torch tensors on the host; the cuda case is the device suite's")
    y, z, _ = _binary_case(rng)
    logits = torch.tensor(z, dtype=getattr(torch, dtype)).reshape(-1, 1).requires_grad_()
    metrics = mg.ClassificationMetrics(2, thresholds=64)
    metrics.update(torch.tensor(y), logits)
    held = logits.detach().double().numpy().reshape(-1)
    report = metrics.compute()
    assert isinstance(report["accuracy"], torch.Tensor)
    _assert_equals_sklearn(report, y, _sigmoid(held), None, score_rtol=1e-6)


def test_sigmoid_outputs_read_as_logits_warn_that_labels_are_wrong(backend, rng):
    """The brief's seam: a binary head's probabilities passed with the default
    kind (logits) warn, naming scores='probabilities'."""
    y, z, _ = _binary_case(rng)
    metrics = mg.ClassificationMetrics(2)
    with pytest.warns(UserWarning, match="probabilities of the positive class.*"
                                         "scores='probabilities'"):
        metrics.update(backend.asarray(y), backend.asarray(_sigmoid(z)))
        metrics.compute()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = mg.ClassificationMetrics(2)
        quiet.update(backend.asarray(y), backend.asarray(z))
        quiet.compute()


@pytest.mark.parametrize("validate", ["eager", "deferred"])
def test_a_probability_outside_the_unit_range_is_a_bad_sample(backend, validate):
    y = np.array([0, 1, 1, 0])
    p = np.array([0.2, 0.9, 1.25, 0.1])
    metrics = mg.ClassificationMetrics(2, scores="probabilities", validate=validate)
    if validate == "eager":
        with pytest.raises(ValueError, match="row 2"):
            metrics.update(backend.asarray(y), backend.asarray(p))
        return
    metrics.update(backend.asarray(y), backend.asarray(p))
    with pytest.raises(ValueError, match="preds.*sample 2"):
        metrics.compute()


def test_one_column_is_for_two_classes_only(backend):
    metrics = mg.ClassificationMetrics(3)
    with pytest.raises(ValueError, match="preds"):
        metrics.update(backend.asarray(np.array([0, 1])), backend.asarray(np.array([0.3, 2.0])))


@pytest.mark.parametrize("layout", ["numpy (N,) float64", "torch (N, 1) float32",
                                    "torch (N,) float16 probabilities"])
def test_binary_update_is_the_hot_path(layout):
    """On the emulated backend, after the first batch: a binary head's column
    is read in place by the update kernel (rows built in registers), so an
    update is one launch, no allocation, no host transfer and within the
    update's call budget, as for (N, K) scores."""
    from test_hot_path import assert_updates_take_the_hot_path

    rng = np.random.default_rng(3)
    kind = "probabilities" if "probabilities" in layout else "logits"

    def batch(n):
        y, z, _ = _binary_case(rng, n)
        scores = _sigmoid(z) if kind == "probabilities" else z
        if layout.startswith("numpy"):
            return y, scores
        torch = pytest.importorskip("torch")
        dtype = torch.float16 if "float16" in layout else torch.float32
        scores = torch.tensor(scores, dtype=dtype)
        return torch.tensor(y), scores.reshape(-1, 1) if "(N, 1)" in layout else scores

    with mg.use_backend("emulated"):
        assert_updates_take_the_hot_path(
            mg.ClassificationMetrics(2, thresholds=16, scores=kind, threshold=0.4), batch,
            sizes=(128, 100))


@pytest.mark.parametrize("threshold", [0.3, 0.8])
@pytest.mark.parametrize("given", ["logit column", "probability column", "two logit columns",
                                   "two probability columns"])
def test_threshold_decides_the_labels_and_leaves_the_scores(backend, rng, threshold, given):
    """With threshold=t, class 1 where its probability passes t: the label
    metrics are scikit-learn's of ``p > t``; cross-entropy and Brier those
    of the probabilities, whatever t."""
    y, z, w = _binary_case(rng)
    p = _sigmoid(z)
    kind = "logits" if "logit" in given else "probabilities"
    scores = {"logit column": z, "probability column": p,
              "two logit columns": np.stack([-z / 2, z / 2], axis=1),
              "two probability columns": np.stack([1 - p, p], axis=1)}[given]
    metrics = mg.ClassificationMetrics(2, scores=kind, threshold=threshold)
    for batch in _batches((y, scores, w)):
        metrics.update(*(backend.asarray(a) for a in batch))
    report = metrics.compute()
    predicted = (p > threshold).astype(int)
    assert float(report["accuracy"]) == pytest.approx(
        skm.accuracy_score(y, predicted, sample_weight=w), rel=1e-12)
    assert float(report["macro_f1"]) == pytest.approx(
        skm.f1_score(y, predicted, average="macro", sample_weight=w), rel=1e-12)
    np.testing.assert_allclose(backend.to_numpy(report.confusion_matrix),
                               skm.confusion_matrix(y, predicted, sample_weight=w), rtol=1e-12)
    assert float(report["cross_entropy"]) == pytest.approx(
        skm.log_loss(y, p, sample_weight=w), rel=1e-9)
    assert float(report["brier_score"]) == pytest.approx(
        skm.brier_score_loss(y, p, sample_weight=w), rel=1e-9)


def test_threshold_reaches_groups_and_step_values(backend, rng):
    y, z, _ = _binary_case(rng, 200)
    codes = rng.integers(0, 3, 200)
    metrics = mg.ClassificationMetrics(2, threshold=0.7, num_groups=3)
    step = metrics(backend.asarray(y), backend.asarray(z), groups=backend.asarray(codes))
    predicted = (_sigmoid(z) > 0.7).astype(int)
    assert float(step["accuracy"]) == pytest.approx(skm.accuracy_score(y, predicted))
    by_group = metrics.compute().groups.by_group["accuracy"]
    for g in range(3):
        chosen = codes == g
        assert float(by_group[g]) == pytest.approx(
            skm.accuracy_score(y[chosen], predicted[chosen]), rel=1e-12)


def test_threshold_is_for_two_classes_and_a_probability():
    with pytest.raises(ValueError, match="threshold is for num_classes=2"):
        mg.ClassificationMetrics(3, threshold=0.3)
    with pytest.raises(ValueError, match=r"threshold must be a probability in \[0, 1\]"):
        mg.ClassificationMetrics(2, threshold=1.5)
    # 0.5 is the argmax: the state is the one built without it.
    assert mg.ClassificationMetrics(2, threshold=0.5).state_dict()["spec"] == \
        mg.ClassificationMetrics(2).state_dict()["spec"]


def test_binary_column_edges_agree_with_the_reference(backend):
    """The edges of a binary column: a probability exactly at the threshold
    (and a logit of 0 at the default) predicts class 0, as ``p > t`` does; an
    empty batch adds nothing; an ignored target is skipped; with
    validate=False a target outside {0, 1} and a NaN score are left out and
    counted, not read."""
    metrics = mg.ClassificationMetrics(2, scores="probabilities", threshold=0.25,
                                       ignore_index=-1, validate=False)
    metrics.update(backend.asarray(np.zeros(0, np.int64)), backend.asarray(np.zeros(0)))
    y = np.array([0, 1, 1, -1, 7, 1])
    p = np.array([0.25, 0.25, 0.75, 0.9, 0.5, np.nan])
    metrics.update(backend.asarray(y), backend.asarray(p))
    report = metrics.compute()
    # counted: rows 0-2 (row 3 ignored; rows 4 and 5 left out)
    np.testing.assert_array_equal(backend.to_numpy(report.confusion_matrix), [[1, 0], [1, 1]])
    assert float(report.invalid) == 2 and float(report.total) == 3
    assert float(report["cross_entropy"]) == pytest.approx(
        skm.log_loss([0, 1, 1], [0.25, 0.25, 0.75], labels=[0, 1]), rel=1e-12)
    at_zero = mg.ClassificationMetrics(2)
    at_zero.update(backend.asarray(np.array([0, 1])), backend.asarray(np.array([0.0, 0.0])))
    np.testing.assert_array_equal(backend.to_numpy(at_zero.compute().confusion_matrix),
                                  [[1, 0], [1, 0]])
