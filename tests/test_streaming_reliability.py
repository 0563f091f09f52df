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
import metrics_gpu._streaming.metrics as streaming
from metrics_gpu.backends.selection import get_backend_implementation
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


# -- integer weights past 2**63 ---------------------------------------------------


@pytest.mark.parametrize("weight", [2**61, 2**62], ids=["2^61", "2^62"])
@pytest.mark.parametrize("validate", ["deferred", False])
def test_integer_weights_past_2_63_are_refused_at_compute(backend, weight, validate):
    """Four weights of 2**61 summed to 2**63 (accuracy -0.75 on numpy), 2**62
    raised OverflowError half-way on numpy and gave a total of 0 on the
    kernels: now compute names the update, in every mode but eager."""
    metrics = mg.ClassificationMetrics(2, validate=validate)
    metrics.update(backend.asarray([0, 1, 1, 0]), backend.asarray([0, 1, 0, 0]),
                   backend.asarray(np.full(4, weight)))
    with pytest.raises(ValueError, match=WRAPPED.format(call=0)):
        metrics.compute()


@pytest.mark.parametrize("weight", [2**61, 2**62], ids=["2^61", "2^62"])
def test_eager_integer_weights_past_2_63_count_in_float64(backend, weight):
    """validate="eager" decides before adding: float64 counts, as accuracy_score."""
    metrics = mg.ClassificationMetrics(2, validate="eager")
    metrics.update(backend.asarray([0, 1, 1, 0]), backend.asarray([0, 1, 0, 0]),
                   backend.asarray(np.full(4, weight)))
    report = metrics.compute()
    assert _value(report["accuracy"]) == 0.75
    assert _value(report.total) == 4.0 * weight


def test_a_later_batch_past_2_63_is_named(backend):
    """Each batch alone fits; the second takes the running total past 2**63 - 1."""
    metrics = mg.ClassificationMetrics(3)
    y, p = backend.asarray([0, 1, 2]), backend.asarray([0, 1, 1])
    metrics.update(y, p, backend.asarray(np.full(3, 2**61)))
    assert _value(metrics.compute()["accuracy"]) == pytest.approx(2 / 3)
    metrics.update(y, p, backend.asarray(np.full(3, 2**61)))
    with pytest.raises(ValueError, match=WRAPPED.format(call=1)):
        metrics.compute()
    metrics.reset()  # a new start forgets it
    metrics.update(y, p, backend.asarray(np.full(3, 2**61)))
    assert _value(metrics.compute()["accuracy"]) == pytest.approx(2 / 3)


def test_deterministic_eager_refuses_weights_past_2_63():
    """deterministic=True rules out float64 counts on the kernels: the batch is
    refused before anything is added."""
    with mg.use_backend("emulated"):
        metrics = mg.ClassificationMetrics(2, validate="eager", deterministic=True)
        metrics.update(np.array([0, 1]), np.array([0, 1]), np.array([3, 4]))
        with pytest.raises(ValueError, match="sample_weight.*2\\*\\*63 - 1.*deterministic"):
            metrics.update(np.array([0, 1]), np.array([0, 1]), np.full(2, 2**62))
        assert _value(metrics.compute().total) == 7


def test_merged_integer_states_past_2_63_count_in_float64(backend):
    """Two states that each fit, merged past 2**63: float64 counts (dask's tree of
    per-chunk states is such a merge)."""
    halves = [mg.ClassificationMetrics(2) for _ in range(2)]
    for half in halves:
        half.update(backend.asarray([0, 1, 1]), backend.asarray([0, 1, 0]),
                    backend.asarray(np.full(3, 2**61)))
    halves[0].merge(halves[1])
    report = halves[0].compute()
    assert _value(report["accuracy"]) == pytest.approx(2 / 3)
    assert _value(report.total) == 6.0 * 2**61


def test_one_pass_integer_weights_past_2_63(backend):
    """label_report and accuracy_score with validate=False (the one-pass path)
    count such weights in float64, as their checked path."""
    y, p = backend.asarray([0, 1, 1, 0]), backend.asarray([0, 1, 0, 0])
    for weight in (2**61, 2**62):
        w = backend.asarray(np.full(4, weight))
        report = mg.label_report(y, p, sample_weight=w, num_classes=2, validate=False)
        assert report.metrics["accuracy"] == 0.75 and report.total == 4.0 * weight
        assert _value(mg.accuracy_score(y, p, sample_weight=w, num_classes=2,
                                        validate=False)) == 0.75


def test_dask_classification_metrics_past_2_63():
    da = pytest.importorskip("dask.array")
    from metrics_gpu.dask import classification_metrics

    y = da.from_array(np.array([0, 1, 1, 0, 1, 1]), chunks=3)
    p = da.from_array(np.array([0, 1, 0, 0, 1, 1]), chunks=3)
    w = da.from_array(np.full(6, 2**61), chunks=3)
    report = classification_metrics(y, p, 2, sample_weight=w, compute=True)
    assert report["accuracy"] == pytest.approx(5 / 6)


# Weights near the powers of two where sums pass 2**63 within a few samples.
_BIG_WEIGHTS = st.lists(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2),
                       st.sampled_from([0, 1, 3, 2**40, 2**60 + 7, 2**61, 2**62 - 1, 2**62,
                                        2**63 - 1])),
             min_size=0, max_size=6),
    min_size=1, max_size=5)


@pytest.mark.parametrize("validate", ["deferred", "eager", False])
def test_integer_weight_sums_never_wrap(backend, validate):
    """The class of the defect: over any sequence of batches of integer weights,
    a stream gives the exact integer counts, float64 counts within rounding
    (eager), or ValueError naming the first update whose running total passes
    2**63 - 1; never a wrapped count, never a half-added batch."""

    @settings(SETTINGS, max_examples=EXAMPLES[backend.name])
    @given(_BIG_WEIGHTS)
    def check(rows):
        batches = [tuple(np.array([r[i] for r in batch], np.int64) for i in range(3))
                   for batch in rows]
        metrics = mg.ClassificationMetrics(3, validate=validate)
        for y, p, w in batches:
            metrics.update(backend.asarray(y), backend.asarray(p), backend.asarray(w))
        running, first_past = 0, None
        for call, (_, _, w) in enumerate(batches):
            running += sum(int(v) for v in w)
            if running >= LIMIT and first_past is None:
                first_past = call
        accuracy, total = _accuracy_of(batches)
        if total == 0:
            return  # nothing counted: no metric to compare
        if first_past is not None and validate != "eager":
            with pytest.raises(ValueError, match=WRAPPED.format(call=first_past)):
                metrics.compute()
            return
        report = metrics.compute()
        support = host_array(report.per_class["support"])
        if first_past is None and validate != "eager":  # exact integers
            assert support.dtype.kind == "i"
            assert [int(s) for s in support] == [
                sum(int(w_i) for b in batches for y_i, w_i in zip(b[0], b[2]) if y_i == c)
                for c in range(3)]
        assert _value(report.total) == pytest.approx(float(total), rel=1e-12)
        assert _value(report["accuracy"]) == pytest.approx(accuracy, rel=1e-12)

    check()


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
    with mg.use_backend("numpy"):  # a state on the host, whatever the default backend
        source = mg.ClassificationMetrics(3)
        source.update(np.array([0, 1]), np.array([0, 1]))
        restored = mg.ClassificationMetrics(3)
        restored.load_state_dict(source.state_dict())
        with pytest.raises(ValueError,
                           match=r"GPU arrays for a state held on the host.*\.to\('cuda'\)"):
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
        metrics.to("cpu")  # moves the sum and the own state kept beside it
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
    from process_groups import start_ranks

    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    world_size = 2
    with tempfile.TemporaryDirectory() as directory:
        init_file = os.path.join(directory, "init")
        start_ranks(_sync_twice_worker, (world_size, init_file, directory), world_size)
        results = []
        for rank in range(world_size):
            with open(os.path.join(directory, f"{rank}.pkl"), "rb") as source:
                results.append(pickle.load(source))
    for first, again, after in results:
        assert first["total"] == again["total"] == 8
        np.testing.assert_equal(again, first)
        assert after["total"] == 10
        assert after["per_class"]["support"] == [3, 3, 4]
