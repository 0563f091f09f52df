"""The in-loop hot path of ClassificationMetrics.update: after the first batch of
an input layout, a batch of that layout costs one launch, no allocation, no host
transfer and at most UPDATE_CALL_BUDGET function calls (metrics_gpu.testing
call_counter, the device's launch counted as one), on the emulated backend that
shares the launch code with cuda; and it adds exactly what the full path adds."""

from __future__ import annotations

import numpy as np
import pytest

import metrics_gpu as mg
from metrics_gpu import _streaming
from metrics_gpu.testing import call_counter, operation_counter

torch = pytest.importorskip("torch")

UPDATE_CALL_BUDGET = 40
K = 7


def _layouts(rng):
    """Batches of one input layout each: makers of (y_true, preds, weight) for n rows."""
    def logits(dtype, framework):
        def make(n):
            y, z = rng.integers(0, K, n), rng.normal(size=(n, K)).astype(dtype)
            return (torch.tensor(y), torch.tensor(z), None) if framework == "torch" else (y, z, None)
        return make

    def labels(n):
        return torch.tensor(rng.integers(0, K, n)), torch.tensor(rng.integers(0, K, n)), None

    def int_weights(n):
        return (rng.integers(0, K, n).astype(np.int32), rng.normal(size=(n, K)),
                rng.integers(0, 4, n))

    def images(n):
        return (torch.tensor(rng.integers(0, K, (n, 3, 2))),
                torch.tensor(rng.normal(size=(n, K, 3, 2)).astype(np.float32)), None)

    def grad_and_bfloat16(n):
        z = torch.tensor(rng.normal(size=(n, K)), dtype=torch.bfloat16, requires_grad=True)
        return torch.tensor(rng.integers(0, K, n)), z, None

    return {"torch float32 logits": logits(np.float32, "torch"),
            "numpy float64 logits": logits(np.float64, "numpy"),
            "torch labels": labels, "int weights": int_weights, "images": images,
            "bfloat16 requiring grad": grad_and_bfloat16}


@pytest.mark.parametrize("layout", ["torch float32 logits", "numpy float64 logits",
                                    "torch labels", "int weights", "images",
                                    "bfloat16 requiring grad"])
def test_update_after_the_first_batch_of_a_layout_is_one_launch_and_few_calls(rng, layout):
    make = _layouts(rng)[layout]
    with mg.use_backend("emulated"):
        metrics = mg.ClassificationMetrics(K, top_k=(1, 3), thresholds=8)
        metrics.update(*make(64))
        for n in (64, 50):  # the loop's last, smaller batch shares the layout's plan
            batch = make(n)
            with operation_counter() as operations, call_counter() as calls:
                metrics.update(*batch)
            assert (operations.launches, operations.device_allocations,
                    operations.host_transfers) == (1, 0, 0)
            assert calls.total <= UPDATE_CALL_BUDGET, calls


def _state_of(metrics):
    state = metrics.state_dict()
    return {k: np.asarray(v) for k, v in state.items() if k not in ("spec", "kind", "version")}


def _with_and_without_plans(monkeypatch, batches):
    """Two states fed ``batches``: with launch plans, then without any."""
    states = []
    for planned in (True, False):
        if not planned:
            monkeypatch.setattr(_streaming, "_MAX_PLANNED_LAYOUTS", 0)
        metrics = mg.ClassificationMetrics(K, top_k=(1, 3), thresholds=8)
        for batch in batches:
            metrics.update(*batch)
        states.append(metrics)
    return states


def test_planned_updates_add_what_the_full_path_adds(rng, monkeypatch):
    """One sequence of batches whose layout changes between calls (and comes
    back), with a float-weighted batch that turns the counts to float64 in
    the middle: the state with plans equals the state without them."""
    makers = _layouts(rng)
    sequence = ["torch float32 logits", "torch float32 logits", "numpy float64 logits",
                "torch float32 logits", "int weights", "numpy float64 logits", "int weights",
                "float weights", "torch float32 logits", "int weights", "torch float32 logits"]
    batches = []
    for i, name in enumerate(sequence):
        if name == "float weights":
            y, z, _ = makers["torch float32 logits"](40)
            batches.append((y, z, torch.rand(40, dtype=torch.float64)))
        else:
            batches.append(makers[name](30 + 7 * i))
    used = []
    add = _streaming._PlannedUpdate.add

    def counted(self, *args):
        done = add(self, *args)
        used.append(done)
        return done

    monkeypatch.setattr(_streaming._PlannedUpdate, "add", counted)
    with mg.use_backend("emulated"):
        states = [(_state_of(metrics), metrics.compute().to_dict())
                  for metrics in _with_and_without_plans(monkeypatch, batches)]
    # The planned path took the repeated layouts (not where the counts had just
    # turned float, nor a batch needing more unit weights than the last).
    assert sum(used) >= 4, used
    (planned_state, planned_report), (full_state, full_report) = states
    assert planned_state.keys() == full_state.keys()
    for name in planned_state:
        np.testing.assert_allclose(planned_state[name], full_state[name], rtol=1e-12, err_msg=name)
    assert planned_report["metrics"] == pytest.approx(full_report["metrics"], rel=1e-12,
                                                      nan_ok=True)


def test_every_kind_of_weights_in_one_state_equals_numpy(rng):
    """Float, integer and no weights into one state, in turns: a launch plan
    per kind (int64 weights into float counts are converted, float64 ones are
    not, and no weights read the workspace's ones). Found by CI: an int64
    batch after a float64 one reused the float64 plan and read its integers
    as doubles."""
    make = _layouts(rng)["torch float32 logits"]
    kinds = [None, "int64", "float64", "int64", None, "float32", "int32", "float64", None]
    batches = []
    for i, kind in enumerate(kinds):
        y, z, _ = make(20 + i)
        w = None if kind is None else torch.tensor(rng.integers(1, 4, 20 + i)).to(
            getattr(torch, kind))
        batches.append((y, z, w))
    reports = []
    for name in ("numpy", "emulated"):
        with mg.use_backend(name):
            metrics = mg.ClassificationMetrics(K, top_k=(1, 3), thresholds=8)
            for batch in batches:
                metrics.update(*batch)
            reports.append(metrics.compute().to_dict()["metrics"])
    # float32 scores: the kernels take a row's exp and log in float
    assert reports[1] == pytest.approx(reports[0], rel=1e-6, nan_ok=True)


def test_a_planned_update_still_checks_values_in_the_kernel(rng):
    """Deferred checks of a planned batch: a target out of range is named at
    compute() with its update call and sample, and left out."""
    make = _layouts(rng)["torch float32 logits"]
    with mg.use_backend("emulated"):
        metrics = mg.ClassificationMetrics(K)
        metrics.update(*make(20))
        y, z, _ = make(20)
        y[13] = K + 2
        metrics.update(y, z)
        assert metrics._planned  # the second call was the planned one
        with pytest.raises(ValueError, match=r"y_true of update call 1 .* at sample 13"):
            metrics.compute()


def test_plans_follow_the_state(rng):
    """reset keeps the plans (zeroed in place); load_state_dict and .to() make
    a new state, which plans anew; a row mismatch goes to the full path's error."""
    make = _layouts(rng)["torch float32 logits"]
    with mg.use_backend("emulated"):
        metrics = mg.ClassificationMetrics(K)
        first = make(25)
        metrics.update(*first)
        metrics.update(*make(25))
        # state_dict holds references, as torch's does: cloned to keep it.
        snapshot = {k: v.clone() if isinstance(v, torch.Tensor) else v
                    for k, v in metrics.state_dict().items()}
        metrics.reset()
        metrics.update(*first)
        assert int(metrics.compute().total) == 25
        metrics.load_state_dict(snapshot)
        metrics.update(*first)
        assert int(metrics.compute().total) == 75
        y, z, _ = make(25)
        with pytest.raises(ValueError, match="y_true has 24 samples but preds has 25"):
            metrics.update(y[:24], z)
        metrics.to("cpu")  # the numpy backend: no plans there
        metrics.update(*first)
        assert int(metrics.compute().total) == 100


# -- on a GPU (tools/gpu_session.sh runs these; skipped elsewhere) -----------------------


def _cuda_or_skip():
    from conftest import skip_unavailable

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch")
    skip_unavailable("cuda")


def test_cuda_planned_updates_add_what_the_full_path_adds(rng, monkeypatch):
    """torch CUDA tensors, the layout changing between calls: the planned
    path (addresses, the caller's stream) gives the full path's state."""
    _cuda_or_skip()
    batches = []
    for i, dtype in enumerate([torch.float32, torch.float32, torch.bfloat16, torch.float32,
                               torch.bfloat16, torch.float32]):
        n = 300 + 50 * i
        y = torch.tensor(rng.integers(0, K, n), device="cuda")
        z = torch.tensor(rng.normal(size=(n, K)), device="cuda").to(dtype)
        w = torch.tensor(rng.integers(0, 4, n), device="cuda") if i % 2 else None
        batches.append((y, z, w))
    planned, full = _with_and_without_plans(monkeypatch, batches)
    assert planned._planned
    states = [metrics.compute().to_dict()["metrics"] for metrics in (planned, full)]
    assert states[0] == pytest.approx(states[1], rel=1e-12, nan_ok=True)


def test_cuda_update_is_capturable_in_a_cuda_graph(rng):
    """After the first batch of a layout, update allocates nothing, reads
    nothing back and launches once on the caller's stream: torch.cuda.graph
    captures it, and each replay adds the batch again."""
    _cuda_or_skip()
    n = 512
    y = torch.tensor(rng.integers(0, K, n), device="cuda")
    z = torch.tensor(rng.normal(size=(n, K)).astype(np.float32), device="cuda")
    metrics = mg.ClassificationMetrics(K, top_k=(1, 3), validate=False)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        metrics.update(y, z)  # the layout's first batch: plans, allocates
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        metrics.update(y, z)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    eager = mg.ClassificationMetrics(K, top_k=(1, 3), validate=False)
    for _ in range(4):  # the first batch and three replays (capturing runs nothing)
        eager.update(y, z)
    ours = metrics.compute().to_dict()["metrics"]
    assert ours == pytest.approx(eager.compute().to_dict()["metrics"], rel=1e-12, nan_ok=True)
    assert int(metrics.compute().total) == 4 * n
