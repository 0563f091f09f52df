"""Per-step values: ``metrics(y_true, preds)`` adds the batch to the state and
gives that batch's own report (torchmetrics' ``forward``), computed on the
device when first read. Each batch's values against scikit-learn on that
batch, the state's against scikit-learn on the whole set, and the in-loop
costs on the emulated backend (the cuda launch code)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics as skm

import metrics_gpu as mg
from metrics_gpu.testing import call_counter, operation_counter
from test_hot_path import UPDATE_CALL_BUDGET

K = 5
SIZES = (64, 64, 40, 64)


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _batches(rng, weighted):
    for n in SIZES:
        y = rng.integers(0, K, n)
        z = rng.normal(size=(n, K)) + 1.2 * np.eye(K)[y]
        yield y, z, (rng.integers(1, 4, n).astype(np.float64) if weighted else None)


def _assert_batch_values(report, y, z, w):
    predicted = z.argmax(axis=1)
    expected = {
        "accuracy": skm.accuracy_score(y, predicted, sample_weight=w),
        "macro_f1": skm.f1_score(y, predicted, average="macro", labels=range(K),
                                 sample_weight=w, zero_division=0),
        "cohen_kappa": skm.cohen_kappa_score(y, predicted, sample_weight=w),
        "cross_entropy": skm.log_loss(y, _softmax(z), labels=range(K), sample_weight=w),
        "top_3_accuracy": skm.top_k_accuracy_score(y, z, k=3, labels=range(K),
                                                   sample_weight=w),
    }
    for name, value in expected.items():
        assert float(report[name]) == pytest.approx(value, rel=1e-9, abs=1e-12), name
    assert float(report.total) == (len(y) if w is None else w.sum())


@pytest.mark.parametrize("read", ["each step", "at the end"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_each_step_gives_its_batch_and_the_state_the_whole(backend, rng, read, weighted):
    """A report read at its step or only after later steps (computed at the
    next call then) holds its own batch's values; the state holds them all."""
    metrics = mg.ClassificationMetrics(K, top_k=(1, 3))
    seen, kept = [], []
    for y, z, w in _batches(rng, weighted):
        report = metrics(backend.asarray(y), backend.asarray(z),
                         None if w is None else backend.asarray(w))
        if read == "each step":
            _assert_batch_values(report, y, z, w)
        kept.append(report)
        seen.append((y, z, w))
    for report, (y, z, w) in zip(kept, seen):
        _assert_batch_values(report, y, z, w)
    y, z = (np.concatenate([part[i] for part in seen]) for i in range(2))
    w = None if not weighted else np.concatenate([part[2] for part in seen])
    _assert_batch_values(metrics.compute(), y, z, w)


def test_step_values_are_float64_tensors_for_torch_and_log_as_they_are():
    """Torch inputs: 0-d float64 tensors on the inputs' device, in a mapping of
    metrics only (what a logger's log_dict takes)."""
    torch = pytest.importorskip("torch")
    metrics = mg.ClassificationMetrics(3, thresholds=8)
    report = metrics(torch.tensor([0, 1, 2, 2]), torch.eye(3)[[0, 1, 2, 1]] * 3)
    values = dict(report)
    assert values and all(isinstance(v, torch.Tensor) and v.ndim == 0
                          and v.dtype == torch.float64 for v in values.values())
    assert float(values["accuracy"]) == 0.75
    assert report.per_class["support"].tolist() == [1, 1, 2]
    assert report.confusion_matrix.tolist() == [[1, 0, 0], [0, 1, 0], [0, 1, 1]]


def test_a_step_call_costs_one_launch_more_than_update(rng):
    """On the emulated backend, after the first batch of a layout: a step call
    is two launches, no allocation, no host transfer and at most the update's
    call budget; reading the report computes it (two launches), still with
    no host transfer until a value is read on the host."""
    torch = pytest.importorskip("torch")
    with mg.use_backend("emulated"):
        metrics = mg.ClassificationMetrics(K, top_k=(1, 3), thresholds=8)
        for y, z, _ in _batches(rng, False):
            y, z = torch.from_numpy(y), torch.from_numpy(z.astype(np.float32))
            with operation_counter() as operations, call_counter() as calls:
                report = metrics(y, z)
            with operation_counter() as reading:
                value = report["accuracy"]
            assert (reading.launches, reading.host_transfers) == (2, 0)
            assert float(value) == skm.accuracy_score(y.numpy(), z.numpy().argmax(1))
        assert (operations.launches, operations.device_allocations,
                operations.host_transfers) == (2, 0, 0)
        assert calls.total <= UPDATE_CALL_BUDGET, calls


def test_a_step_of_no_sample_has_no_metrics(backend):
    metrics = mg.ClassificationMetrics(3)
    metrics(backend.asarray(np.array([0, 1])), backend.asarray(np.eye(3)[:2]))
    with pytest.raises(ValueError, match="no sample"):
        metrics(backend.asarray(np.zeros(0, np.int64)), backend.asarray(np.zeros((0, 3))))


def test_grouped_steps_give_the_batch_groups(backend):
    """A state with groups: the step report's groups are the batch's."""
    metrics = mg.ClassificationMetrics(2, num_groups=2)
    metrics(backend.asarray(np.array([0, 1, 1, 0])), backend.asarray(np.array([0, 1, 0, 0])),
            groups=backend.asarray(np.array([0, 0, 1, 1])))
    report = metrics(backend.asarray(np.array([1, 1])), backend.asarray(np.array([1, 1])),
                     groups=backend.asarray(np.array([1, 1])))
    assert float(report["accuracy"]) == 1.0
    assert float(metrics.compute()["accuracy"]) == pytest.approx(5 / 6)
