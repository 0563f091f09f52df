"""The in-loop hot path of ClassificationMetrics.update: after the first batch of
an input layout, a batch of that layout costs one launch, no allocation, no host
transfer and at most UPDATE_CALL_BUDGET function calls (metrics_gpu.testing
call_counter, the device's launch counted as one), on the emulated backend that
shares the launch code with cuda; and it adds exactly what the full path adds."""

from __future__ import annotations

import numpy as np
import pytest

import metrics_gpu as mg
from metrics_gpu._streaming import metrics as _streaming
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
    with mg.use_backend("emulated"):
        assert_updates_take_the_hot_path(
            mg.ClassificationMetrics(K, top_k=(1, 3), thresholds=8), _layouts(rng)[layout])


def assert_updates_take_the_hot_path(metrics, make, sizes=(64, 50)) -> None:
    """After a first batch of the layout ``make(n)`` gives (n rows), each
    update (the loop's last, smaller batch too: it shares the layout's plan)
    is one launch, no allocation, no host transfer, within the call budget."""
    metrics.update(*make(sizes[0]))
    for n in sizes:
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


# -- the functional API's launch plans (validate=False, K known) ----------------------

# Function calls of a functional call after the first of its input layout
# (issue 28: the label metrics, label_report and logits_report).
FUNCTIONAL_CALL_BUDGET = 80


def _functional_calls():
    """name -> (call(y_true, preds, weight, preds_are_labels), its sklearn twin or None)."""
    def label_kw(labels):
        return {"num_classes": K} if labels else {}

    def averaged(function, average):
        return lambda y, p, w, labels: function(y, p, average=average, sample_weight=w,
                                                validate=False, **label_kw(labels))

    return {
        "accuracy_score": lambda y, p, w, labels: mg.accuracy_score(
            y, p, sample_weight=w, validate=False, **label_kw(labels)),
        "accuracy_score normalize=False": lambda y, p, w, labels: mg.accuracy_score(
            y, p, normalize=False, sample_weight=w, validate=False, **label_kw(labels)),
        "zero_one_loss": lambda y, p, w, labels: mg.zero_one_loss(
            y, p, sample_weight=w, validate=False, **label_kw(labels)),
        "zero_one_loss normalize=False": lambda y, p, w, labels: mg.zero_one_loss(
            y, p, normalize=False, sample_weight=w, validate=False, **label_kw(labels)),
        "hamming_loss": lambda y, p, w, labels: mg.hamming_loss(
            y, p, sample_weight=w, validate=False, **label_kw(labels)),
        "balanced_accuracy_score": lambda y, p, w, labels: mg.balanced_accuracy_score(
            y, p, sample_weight=w, validate=False, **label_kw(labels)),
        "matthews_corrcoef": lambda y, p, w, labels: mg.matthews_corrcoef(
            y, p, sample_weight=w, validate=False, **label_kw(labels)),
        "cohen_kappa_score quadratic": lambda y, p, w, labels: mg.cohen_kappa_score(
            y, p, weights="quadratic", sample_weight=w, validate=False, **label_kw(labels)),
        "f1_score macro": averaged(mg.f1_score, "macro"),
        "precision_score micro": averaged(mg.precision_score, "micro"),
        "recall_score weighted": averaged(mg.recall_score, "weighted"),
        "precision_recall_fscore_support weighted": lambda y, p, w, labels: (
            mg.precision_recall_fscore_support(y, p, average="weighted", sample_weight=w,
                                               validate=False, **label_kw(labels))[:3]),
        "jaccard_score macro": averaged(mg.jaccard_score, "macro"),
        "specificity_score macro": averaged(mg.specificity_score, "macro"),
        "log_loss from logits": lambda y, p, w, labels: mg.log_loss(
            y, p, from_logits=True, sample_weight=w, validate=False),
        "top_k_accuracy_score": lambda y, p, w, labels: mg.top_k_accuracy_score(
            y, p, k=3, sample_weight=w, validate=False),
        "confusion_matrix": lambda y, p, w, labels: mg.confusion_matrix(
            y, p, sample_weight=w, validate=False, **label_kw(labels)),
        "label_report": lambda y, p, w, labels: mg.label_report(
            y, p, sample_weight=w, confusion_matrix=False, validate=False, **label_kw(labels)),
        "label_report with its matrix": lambda y, p, w, labels: mg.label_report(
            y, p, sample_weight=w, confusion_matrix=True, validate=False, **label_kw(labels)),
    }


def _logits_report_values(report):
    return {"accuracy": report.accuracy, "cross_entropy": report.cross_entropy,
            "brier_score": report.brier_score, "ece": report.expected_calibration_error,
            "top_3": report.top_k_accuracy[3], "total_weight": report.total_weight,
            "n_invalid": report.n_invalid, "bins": np.asarray(report.calibration_accuracy)}


def _plain(value) -> list:
    """A result as one flat list of numbers (tensors, arrays, reports, tuples
    and dicts of them; the matrix of a report that keeps one)."""
    if isinstance(value, mg.LabelReport):
        matrix = value.confusion_matrix
        value = [value.metrics, value.total, value.invalid, value.per_class,
                 [] if matrix is None else matrix]
    if isinstance(value, dict):
        value = [value[k] for k in sorted(value)]
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in _plain(v)]
    value = value.cpu() if isinstance(value, torch.Tensor) else value
    return np.asarray(value, dtype=np.float64).reshape(-1).tolist()


# The functional calls of scores alone (no labels form).
SCORE_CALLS = ("log_loss from logits", "top_k_accuracy_score")


@pytest.mark.parametrize("name, labels", [
    pytest.param(name, labels, id=f"{name}-{'labels' if labels else 'logits'}")
    for name in _functional_calls() for labels in (False, True)
    if not (labels and name in SCORE_CALLS)])
def test_functional_call_after_the_first_of_a_layout_is_two_launches_and_few_calls(
        rng, name, labels):
    call = _functional_calls()[name]
    with mg.use_backend("emulated"):
        for n in (64, 64, 50):
            y = torch.tensor(rng.integers(0, K, n))
            z = torch.tensor(rng.normal(size=(n, K)).astype(np.float32))
            preds = z.argmax(1) if labels else z
            with operation_counter() as operations, call_counter() as calls:
                call(y, preds, None, labels)
        # One update launch and one compute launch (the matrix is the update's).
        launches = 1 if name == "confusion_matrix" else 2
        assert (operations.launches, operations.host_transfers) == (launches, 0), name
        # The call's own block (and the update's partials of score sums).
        assert operations.device_allocations == (2 if name in SCORE_CALLS else 1)
        assert calls.total <= FUNCTIONAL_CALL_BUDGET, calls


def test_logits_report_after_the_first_of_a_layout_is_two_launches_and_few_calls(rng):
    with mg.use_backend("emulated"):
        for n in (64, 64, 50):
            y = torch.tensor(rng.integers(0, K, n))
            z = torch.tensor(rng.normal(size=(n, K)).astype(np.float32))
            with operation_counter() as operations, call_counter() as calls:
                mg.logits_report(y, z, top_k=(1, 3), validate=False)
        assert (operations.launches, operations.host_transfers) == (2, 0)
        assert operations.device_allocations == 2  # the call's block, the update's partials
        assert calls.total <= FUNCTIONAL_CALL_BUDGET, calls


def _functional_batches(rng):
    """Batches whose layout changes between calls (each layout seen more than
    once, so that later calls of it take its plan): (y_true, preds, weight, labels)."""
    def batch(n, kind):
        y = rng.integers(-1, K + 1, n)  # a few targets out of range: left out and counted
        z = rng.normal(size=(n, K))
        if kind == "numpy float64":
            return y, z, None, False
        if kind == "float32 weights":
            return (torch.tensor(y), torch.tensor(z.astype(np.float32)),
                    torch.tensor(rng.random(n).astype(np.float32)), False)
        if kind == "float64 weights, labels":
            return (torch.tensor(y), torch.tensor(z.argmax(1)),
                    torch.tensor(rng.random(n)), True)
        if kind == "int32 labels":
            return (torch.tensor(y.astype(np.int32)),
                    torch.tensor(z.argmax(1).astype(np.int32)), None, True)
        if kind == "float16 strided":
            wide = torch.tensor(np.repeat(z, 2, axis=1).astype(np.float16))
            return torch.tensor(y), wide[:, ::2], None, False
        assert kind == "bfloat16"
        return torch.tensor(y), torch.tensor(z).to(torch.bfloat16), None, False

    kinds = ["numpy float64", "float32 weights", "float64 weights, labels", "int32 labels",
             "float16 strided", "bfloat16"]
    return [batch(int(rng.integers(1, 300)), kinds[i % len(kinds)]) for i in range(18)]


def _score_batches(rng):
    """The batches of :func:`_functional_batches` whose predictions are scores."""
    return [batch for batch in _functional_batches(rng) if not batch[3]]


def _without_plans(call, batch):
    from metrics_gpu._pipeline import planned as _planned
    _planned.clear_plans()
    try:
        return _plain(call(*batch))
    finally:
        _planned.clear_plans()


def _planned_and_full(call, batches, *, layouts: int):
    """``call`` of each batch on the emulated backend, as plain numbers: through
    the plans (a layout's first call makes its plan; ``layouts`` of them), then
    each batch without any."""
    from metrics_gpu._pipeline import planned as _planned
    with mg.use_backend("emulated"):
        _planned.clear_plans()
        planned = [_plain(call(*batch)) for batch in batches]
        assert len(_planned._plans) == layouts
        full = [_without_plans(call, batch) for batch in batches]
    return planned, full


@pytest.mark.parametrize("name", ["accuracy_score", "zero_one_loss normalize=False",
                                  "balanced_accuracy_score", "matthews_corrcoef",
                                  "cohen_kappa_score quadratic",
                                  "precision_recall_fscore_support weighted",
                                  "jaccard_score macro", "confusion_matrix",
                                  "label_report with its matrix"])
def test_planned_functional_calls_equal_the_full_path(rng, name):
    """Layouts changing between calls: each call through its layout's plan
    (all but a layout's first) gives what the full path gives the batch."""
    batches = _functional_batches(rng)
    planned, full = _planned_and_full(_functional_calls()[name], batches, layouts=6)
    for batch, ours, reference in zip(batches, planned, full):
        if batch[2] is None:  # counts: exact
            assert ours == pytest.approx(reference, rel=0, abs=0, nan_ok=True)
        else:  # float weights: float64 atomics, summed in any order
            assert ours == pytest.approx(reference, rel=1e-12, abs=1e-15, nan_ok=True)


@pytest.mark.parametrize("name", SCORE_CALLS)
def test_planned_score_calls_equal_the_full_path(rng, name):
    planned, full = _planned_and_full(_functional_calls()[name], _score_batches(rng), layouts=4)
    assert sum(planned, []) == pytest.approx(sum(full, []), rel=1e-12, abs=1e-15, nan_ok=True)


def test_planned_logits_reports_equal_the_full_path(rng):
    batches = _score_batches(rng)
    with mg.use_backend("emulated"):
        planned = [_plain(_logits_report_values(mg.logits_report(
            y, z, sample_weight=w, top_k=(1, 3), validate=False))) for y, z, w, _ in batches]
        full = [_without_plans(lambda y, z, w, _: _logits_report_values(mg.logits_report(
            y, z, sample_weight=w, top_k=(1, 3), validate=False)), batch) for batch in batches]
    for ours, reference in zip(planned, full):
        assert ours == pytest.approx(reference, rel=1e-12, abs=1e-15, nan_ok=True)


def test_planned_results_are_the_calls_own(rng):
    """A result is never written again by a later call of its layout (each
    call computes into a buffer of its own)."""
    def batch(n):
        y = torch.tensor(rng.integers(0, K, n))
        return y, torch.where(torch.tensor(rng.random(n) < 0.7), y, (y + 1) % K)

    with mg.use_backend("emulated"):
        results = []
        for n in (100, 100, 80, 60):
            y, p = batch(n)
            results.append((mg.accuracy_score(y, p, num_classes=K, validate=False),
                            mg.accuracy_score(y.numpy(), p.numpy())))
        for ours, reference in results:
            assert float(ours) == float(reference)


def test_planned_functional_calls_from_threads(rng):
    """Threads share a layout's plan, each call on buffers of its own."""
    from concurrent.futures import ThreadPoolExecutor

    batches = []
    for n in rng.integers(20, 400, 24):
        y = torch.tensor(rng.integers(0, K, n))
        batches.append((y, torch.tensor(rng.normal(size=(n, K)).astype(np.float32))))

    def call(batch):
        with mg.use_backend("emulated"):
            return float(mg.matthews_corrcoef(*batch, validate=False))

    expected = [float(mg.matthews_corrcoef(y.numpy(), z.numpy().argmax(1)))
                for y, z in batches]
    call(batches[0])  # the layout's plan
    with ThreadPoolExecutor(4) as pool:
        ours = list(pool.map(call, batches * 2))
    assert ours == pytest.approx(expected * 2, rel=1e-12)


def test_functional_plans_are_bounded(rng):
    from metrics_gpu._pipeline import planned as _planned
    with mg.use_backend("emulated"):
        _planned.clear_plans()
        for k in range(2, _planned.MAX_PLANS + 6):
            y = torch.tensor(rng.integers(0, k, 30))
            mg.accuracy_score(y, torch.tensor(rng.normal(size=(30, k))), validate=False)
        assert len(_planned._plans) == _planned.MAX_PLANS
        _planned.clear_plans()


def test_cuda_planned_functional_calls_equal_the_full_path(rng):
    """torch CUDA tensors: calls through a layout's plan give the full path's
    values, on the caller's device, without a host read."""
    _cuda_or_skip()
    calls = _functional_calls()

    def on_cuda(value):
        if value is None or isinstance(value, bool):
            return value
        return (value if isinstance(value, torch.Tensor) else torch.from_numpy(value)).cuda()

    batches = [tuple(on_cuda(value) for value in batch) for batch in _functional_batches(rng)]
    for name in ("accuracy_score", "matthews_corrcoef", "f1_score macro",
                 "label_report with its matrix"):
        call = calls[name]
        planned = [_plain(call(*batch)) for batch in batches]
        full = [_without_plans(call, batch) for batch in batches]
        for batch, ours, reference in zip(batches, planned, full):
            assert ours == pytest.approx(reference, rel=1e-12, abs=1e-15, nan_ok=True), name


def test_a_plan_keeps_none_of_the_first_calls_buffers(rng):
    """The plan relocates the first call's launches into its own block: the
    state that call computed in (its results' buffers) is not kept."""
    import gc
    import weakref

    from metrics_gpu._pipeline import planned as _planned
    from metrics_gpu._pipeline.stages import one_pass

    y = torch.tensor(rng.integers(0, K, 100))
    z = torch.tensor(rng.normal(size=(100, K)).astype(np.float32))
    with mg.use_backend("emulated"):
        _planned.clear_plans()
        passed = one_pass(y, z, kind="scores", validate=False, top_k=(1, 3), n_bins=5)
        assert len(_planned._plans) == 1
        held = [weakref.ref(array) for array in (*passed.state.arrays.values(),
                                                 *passed.state.workspace.compute)]
        del passed
        gc.collect()
        assert all(ref() is None for ref in held)
        _planned.clear_plans()


# -- binary ranking areas without validation: the sort's one read ---------------------


@pytest.mark.parametrize("backend", ["numpy", "emulated"])
@pytest.mark.parametrize("classes", [(0, 1), (-1, 1), (3, 7), (False, True)])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_binary_ranking_areas_without_validation_read_back_only_the_sort(
        rng, backend, classes, weighted):
    """roc_auc_score and average_precision_score with validate=False and (N,)
    scores read no label back: the greatest label (ROC AUC) or pos_label (AP)
    is the positive class; their values are the validated ones, and
    scikit-learn's. At most one read remains: where the packed sort's parts
    meet (unweighted scores of 32 bits)."""
    from sklearn import metrics as skm

    y = np.array(classes)[rng.integers(0, 2, 700)]
    scores = rng.random(700).astype(np.float32)
    weight = rng.random(700) if weighted else None
    tensors = (torch.tensor(y), torch.tensor(scores),
               None if weight is None else torch.tensor(weight))
    positive = max(classes)
    with mg.use_backend(backend):
        with operation_counter() as operations:
            auc = mg.roc_auc_score(*tensors[:2], sample_weight=tensors[2], validate=False)
            ap = mg.average_precision_score(*tensors[:2], sample_weight=tensors[2],
                                            pos_label=positive, validate=False)
        # Two calls: at most one read each.
        assert operations.host_transfers <= (0 if weighted or backend == "numpy" else 2)
        checked = (mg.roc_auc_score(y, scores, sample_weight=weight),
                   mg.average_precision_score(y, scores, sample_weight=weight,
                                              pos_label=positive))
    assert (float(auc), float(ap)) == (float(checked[0]), float(checked[1]))
    assert float(auc) == pytest.approx(skm.roc_auc_score(y, scores, sample_weight=weight),
                                       rel=1e-12)
    assert float(ap) == pytest.approx(skm.average_precision_score(
        y, scores, sample_weight=weight, pos_label=positive), rel=1e-12)


@pytest.mark.parametrize("backend", ["numpy", "emulated"])
def test_binary_ranking_areas_without_validation_of_one_class(rng, backend):
    """Nothing read, nothing warned: one class gives NaN (ROC AUC), no positive 0 (AP)."""
    import warnings

    scores = torch.tensor(rng.random(50))
    with mg.use_backend(backend), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(float(mg.roc_auc_score(torch.ones(50, dtype=torch.int64), scores,
                                               validate=False)))
        assert float(mg.average_precision_score(torch.zeros(50, dtype=torch.int64), scores,
                                                validate=False)) == 0.0
