"""Reliability of the streaming state (ClassificationMetrics) at its edges:
integer weights whose sums pass 2**63, a number of classes no state can hold,
empty batches, sync called more than once, and a state restored where its
arrays live. Each defect has its example and, where it is a class of inputs,
a hypothesis property."""

from __future__ import annotations

import os
import pickle
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import metrics_gpu as mg
import metrics_gpu._streaming as streaming
from metrics_gpu._backend import get_backend_implementation
from metrics_gpu._validation import CLASS_STATISTICS_BYTES, MAX_STATE_BYTES
from conftest import host_array

pytestmark = pytest.mark.kernel_path

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
EXAMPLES = {"numpy": 40, "emulated": 12, "cuda": 40}
LIMIT = 1 << 63  # integer counts are exact below it (int64, as the host reads them)
WRAPPED = r"sample_weight of update call {call} \(counting from 0\).*past 2\*\*63 - 1"


def _value(x):
    return float(host_array(x))


def _accuracy_of(batches):
    """The weighted accuracy and total of ``(y, p, w)`` batches, in exact integers."""
    correct = sum(int(w_i) for y, p, w in batches for y_i, p_i, w_i in zip(y, p, w)
                  if y_i == p_i)
    total = sum(int(w_i) for _, _, w in batches for w_i in w)
    return correct / total if total else float("nan"), total


# -- a number of classes no state can hold --------------------------------------------


def test_stream_refuses_num_classes_label_report_refuses():
    """10**9 classes once allocated ~22 GiB at the first update; now refused at
    construction, with label_report's message."""
    with pytest.raises(ValueError) as refused:
        mg.label_report(np.array([0]), np.array([0]), num_classes=10**9)
    with pytest.raises(ValueError) as stream:
        mg.ClassificationMetrics(10**9)
    assert str(stream.value) == str(refused.value)
    assert "num_classes=1000000000" in str(stream.value) and "GiB" in str(stream.value)


@settings(deadline=None, max_examples=60)
@given(st.integers(1, 10**12))
def test_stream_state_size_limit(num_classes):
    """Refused exactly where the per-class statistics pass the state limit."""
    too_big = CLASS_STATISTICS_BYTES * num_classes > MAX_STATE_BYTES
    if too_big:
        with pytest.raises(ValueError, match=f"num_classes={num_classes} needs"):
            mg.ClassificationMetrics(num_classes, confusion_matrix=False)
    else:
        metrics = mg.ClassificationMetrics(num_classes, confusion_matrix=False)
        assert metrics.num_classes == num_classes  # nothing allocated before an update


# -- empty batches -------------------------------------------------------------------


def _empty_batches(k):
    """Empty batches of every layout an update takes: labels, (0, K) scores,
    channel-first (0, K, d) scores, and weighted."""
    return [
        (np.zeros(0, np.int64), np.zeros(0, np.int64), None),
        (np.zeros(0, np.int64), np.zeros((0, k)), None),
        (np.zeros((0, 4), np.int64), np.zeros((0, k, 4), np.float32), None),
        (np.zeros(0, np.int64), np.zeros((0, k)), np.zeros(0, np.int64)),
        (np.zeros(0, np.int64), np.zeros((0, k)), np.zeros(0)),
    ]


@pytest.mark.parametrize("validate", ["deferred", "eager", False])
def test_empty_batches_add_nothing(backend, validate):
    """A last, empty batch (or a rank without samples) was refused; it adds
    nothing, and a stream that saw only empty batches is a new stream."""
    k = 3
    for y, z, w in _empty_batches(k):
        metrics = mg.ClassificationMetrics(k, validate=validate)
        args = (backend.asarray(y), backend.asarray(z), None if w is None else backend.asarray(w))
        metrics.update(*args)
        fresh = mg.ClassificationMetrics(k, validate=validate)
        with pytest.raises(ValueError, match="compute.. before any update"):
            metrics.compute()
        assert metrics.state_dict()["kind"] is None and metrics.first_invalid() is None
        metrics.merge(fresh)  # still mergeable both ways
        fresh.merge(metrics)
    scores = mg.ClassificationMetrics(k, validate=validate)
    one = (np.array([0, 2]), np.array([[2.0, 0, 0], [0, 1.0, 0]]))
    scores.update(*(backend.asarray(a) for a in one))
    expected = scores.compute().to_dict()
    for y, z, w in _empty_batches(k)[1:]:
        scores.update(backend.asarray(y), backend.asarray(z),
                      None if w is None else backend.asarray(w))
    np.testing.assert_equal(scores.compute().to_dict(), expected)


def test_empty_batches_keep_update_ordinals(backend):
    """An empty update still counts as a call: deferred errors name the call."""
    metrics = mg.ClassificationMetrics(3)
    metrics.update(backend.asarray(np.zeros(0, np.int64)), backend.asarray(np.zeros(0, np.int64)))
    metrics.update(backend.asarray([0, 5]), backend.asarray([0, 1]))
    with pytest.raises(ValueError, match="y_true of update call 1 .* at sample 1"):
        metrics.compute()


def test_functional_api_still_refuses_empty_input():
    with pytest.raises(ValueError, match="empty"):
        mg.label_report(np.zeros(0, np.int64), np.zeros(0, np.int64), num_classes=2,
                        validate=False)


def test_empty_batches_anywhere_change_nothing(backend):
    """Property: any sequence of batches, some empty, gives the report of the
    same sequence without its empty batches."""

    @settings(SETTINGS, max_examples=EXAMPLES[backend.name])
    @given(st.lists(st.integers(0, 5), min_size=1, max_size=6), st.integers(0, 2**32 - 1))
    def check(sizes, seed):
        rng = np.random.default_rng(seed)
        batches = [(rng.integers(0, 3, n), rng.normal(size=(n, 3)), rng.integers(0, 4, n))
                   for n in sizes]
        with_empty, without = mg.ClassificationMetrics(3), mg.ClassificationMetrics(3)
        for y, z, w in batches:
            args = tuple(backend.asarray(a) for a in (y, z, w))
            with_empty.update(*args)
            if y.size:
                without.update(*args)
        if not any(sizes):
            with pytest.raises(ValueError, match="compute.. before any update"):
                with_empty.compute()
            return
        np.testing.assert_equal(with_empty.compute().to_dict(), without.compute().to_dict())

    check()


# -- a state restored where its arrays live ------------------------------------------


class _GpuOnlyArray:
    """Stands for a CUDA tensor: NumPy cannot read it (torch's TypeError)."""

    def __init__(self, values):
        self.values = np.asarray(values)
        self.shape, self.ndim, self.dtype = self.values.shape, self.values.ndim, self.values.dtype

    def __array__(self, *args, **kwargs):
        raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu()")


def test_gpu_arrays_for_a_host_state_name_the_remedy(monkeypatch):
    """A state on the host (restored there) updated with GPU arrays raised
    NumPy's raw TypeError; now a ValueError saying to move the state."""
    monkeypatch.setattr(streaming, "is_device_array", lambda a: isinstance(a, _GpuOnlyArray))
    source = mg.ClassificationMetrics(3)
    source.update(np.array([0, 1]), np.array([0, 1]))
    restored = mg.ClassificationMetrics(3)
    restored.load_state_dict(source.state_dict())
    with pytest.raises(ValueError, match=r"GPU arrays for a state held on the host.*\.to\('cuda'\)"):
        restored.update(_GpuOnlyArray([0, 1]), _GpuOnlyArray([0, 1]))
    with pytest.raises(TypeError, match="not an array"):  # host data keeps its own error
        restored.update(np.array([0, 1]), _NotAnArray())


class _NotAnArray:
    def __array__(self, *args, **kwargs):
        raise TypeError("not an array")


def test_load_state_dict_places_the_state_where_its_arrays_live(monkeypatch):
    """A fresh object restores a state_dict on the backend its arrays resolve to
    (a GPU's tensors: cuda), not always on the host."""
    seen = []
    emulated = get_backend_implementation("emulated")

    def resolve(*arrays):
        seen.append(arrays)
        return emulated  # stands for the cuda backend of device arrays

    source = mg.ClassificationMetrics(3, n_bins=4)
    source.update(np.array([0, 1, 2]), np.array([[2.0, 0, 0], [0, 1.0, 0], [0, 1.0, 0]]))
    state = source.state_dict()
    monkeypatch.setattr(streaming, "resolve_backend", resolve)
    restored = mg.ClassificationMetrics(3, n_bins=4)
    restored.load_state_dict(state)
    assert restored._state.backend is emulated
    assert any(a is state["counts"] for a in seen[-1])  # asked with the state's arrays
    report = restored.compute().to_dict()
    assert report["metrics"]["accuracy"] == pytest.approx(2 / 3)
    # An object with a device keeps it.
    held = mg.ClassificationMetrics(3, n_bins=4)
    held.to("cpu")
    held.load_state_dict(state)
    assert held._state.backend.name == "numpy"


# -- sync, twice -------------------------------------------------------------------


def _sync_twice_worker(rank, world_size, init_file, out_dir):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world_size)
    try:
        results = []
        metrics = mg.ClassificationMetrics(3, confusion_matrix=False)
        metrics.update(np.array([0, 1, 2, rank]), np.array([0, 1, 1, 0]))
        metrics.sync()
        results.append(metrics.compute().to_dict())
        metrics.sync()  # again, with no update between: the same sum
        results.append(metrics.compute().to_dict())
        metrics.update(np.array([2]), np.array([2]))  # then more of this rank's own
        metrics.sync()
        results.append(metrics.compute().to_dict())
        with open(os.path.join(out_dir, f"{rank}.pkl"), "wb") as out:
            pickle.dump(results, out)
    finally:
        dist.destroy_process_group()


def test_sync_twice_counts_every_batch_once():
    """sync() on 2 ranks, twice, once gave twice the rows; an update after a
    sync then a sync again counts each batch once."""
    torch = pytest.importorskip("torch")
    import torch.multiprocessing as mp

    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    world_size = 2
    with tempfile.TemporaryDirectory() as directory:
        init_file = os.path.join(directory, "init")
        mp.spawn(_sync_twice_worker, args=(world_size, init_file, directory),
                 nprocs=world_size, join=True)
        results = []
        for rank in range(world_size):
            with open(os.path.join(directory, f"{rank}.pkl"), "rb") as source:
                results.append(pickle.load(source))
    for first, again, after in results:
        assert first["total"] == again["total"] == 8
        np.testing.assert_equal(again, first)
        assert after["total"] == 10
        assert after["per_class"]["support"] == [3, 3, 4]
