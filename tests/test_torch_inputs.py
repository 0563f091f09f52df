"""Tensors as models hand them over (torch on the CPU): requiring grad,
bfloat16, channel-first segmentation batches, in the functional API and the
streaming state; and ClassificationMetrics.sync over a real torch.distributed
process group (gloo, spawned processes)."""

from __future__ import annotations

import functools
import os
import pickle
import tempfile

import numpy as np
import pytest

import metrics_gpu as mg

torch = pytest.importorskip("torch")


def test_functional_takes_grad_and_bfloat16_tensors(rng):
    logits = torch.tensor(rng.normal(size=(50, 4)), dtype=torch.float32, requires_grad=True)
    y = torch.tensor(rng.integers(0, 4, 50))
    accuracy = mg.accuracy_score(y, logits)
    assert isinstance(accuracy, torch.Tensor)
    expected = float(np.mean(logits.detach().numpy().argmax(axis=1) == y.numpy()))
    assert float(accuracy) == pytest.approx(expected)
    half = logits.detach().to(torch.bfloat16)
    report = mg.logits_report(y, half, top_k=(1,))
    widened = half.float().numpy()
    assert float(report.cross_entropy) == pytest.approx(
        float(mg.log_loss(y.numpy(), widened, from_logits=True)), rel=1e-12)


def test_segmentation_batches_are_one_sample_per_pixel(rng):
    n, k, h, w = 2, 3, 5, 4
    logits = torch.tensor(rng.normal(size=(n, k, h, w)), dtype=torch.float32, requires_grad=True)
    target = torch.tensor(rng.integers(0, k, (n, h, w)))
    target[0, 0, :] = 255  # void pixels
    flat_logits = logits.detach().permute(0, 2, 3, 1).reshape(-1, k).numpy()
    flat_target = target.reshape(-1).numpy()
    expected = _macro_iou(flat_target, flat_logits.argmax(axis=1), k, 255)
    iou = mg.jaccard_score(target, logits, average="macro", ignore_index=255, num_classes=k)
    assert isinstance(iou, torch.Tensor) and float(iou) == pytest.approx(expected, rel=1e-12)
    metrics = mg.ClassificationMetrics(k, ignore_index=255)
    for i in range(n):
        metrics.update(target[i:i + 1], logits[i:i + 1])
    report = metrics.compute()
    assert isinstance(report["macro_jaccard"], torch.Tensor)
    assert float(report["macro_jaccard"]) == pytest.approx(expected, rel=1e-12)
    assert float(report.total) == (flat_target != 255).sum()
    with pytest.raises(ValueError, match=r"y_true must have shape \(2, 5, 4\)"):
        mg.jaccard_score(target[:, :4], logits, average="macro", num_classes=k)


def _macro_iou(t, p, k, ignore):
    keep = t != ignore
    t, p = t[keep], p[keep]
    values = []
    for c in range(k):
        union = np.sum((t == c) | (p == c))
        values.append(np.sum((t == c) & (p == c)) / union if union else 0.0)
    return float(np.mean(values))


def test_stream_on_torch_cpu_and_checkpoint(rng):
    metrics = mg.ClassificationMetrics(5, n_bins=4, thresholds=6)
    batches = []
    for size in (13, 7):
        logits = torch.tensor(rng.normal(size=(size, 5)), requires_grad=True)
        y = torch.tensor(rng.integers(0, 5, size))
        metrics.update(y, logits)
        batches.append((y, logits.detach()))
    report = metrics.compute()
    assert isinstance(report["accuracy"], torch.Tensor) and report["accuracy"].device.type == "cpu"
    buffer = pickle.dumps(metrics.state_dict())  # what torch.save holds: plain tensors
    state = pickle.loads(buffer)
    assert all(isinstance(v, torch.Tensor) for k, v in state.items()
               if k not in ("version", "spec", "kind", "updates"))
    restored = mg.ClassificationMetrics(5, n_bins=4, thresholds=6)
    restored.load_state_dict(state)
    # restored onto the host backend (the state's own may be another): to rounding
    again, expected = restored.compute().to_dict(), report.to_dict()
    np.testing.assert_allclose([again["metrics"][k] for k in expected["metrics"]],
                               list(expected["metrics"].values()), rtol=1e-12, atol=1e-12)


def test_state_dict_of_cuda_tensors_restores_on_the_gpu(rng):
    """A checkpoint of a state fed with CUDA tensors (torch.save / torch.load,
    weights only) restored into a fresh object stays on the GPU (the cuda
    backend, results as CUDA tensors) and goes on counting there; an object
    placed on the CPU restores it on the host. Same values either way."""
    import io

    from conftest import skip_unavailable

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch")
    skip_unavailable("cuda")
    y = torch.tensor(rng.integers(0, 5, 64), device="cuda")
    logits = torch.tensor(rng.normal(size=(64, 5)), dtype=torch.float32, device="cuda")
    metrics = mg.ClassificationMetrics(5, n_bins=4, thresholds=6)
    metrics.update(y, logits)
    expected = metrics.compute().to_dict()["metrics"]
    buffer = io.BytesIO()
    torch.save(metrics.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    assert state["counts"].device.type == "cuda"
    restored = mg.ClassificationMetrics(5, n_bins=4, thresholds=6)
    restored.load_state_dict(state)
    assert restored._state.backend.name == "cuda"
    report = restored.compute()
    assert report["accuracy"].device.type == "cuda"
    assert report.to_dict()["metrics"] == pytest.approx(expected, rel=1e-12, nan_ok=True)
    restored.update(y, logits)  # the same batch again: the same rates
    assert float(restored.compute()["accuracy"]) == pytest.approx(expected["accuracy"])
    host = mg.ClassificationMetrics(5, n_bins=4, thresholds=6)
    host.to("cpu")
    host.load_state_dict(state)
    assert host._state.backend.name == "numpy"
    assert host.compute().to_dict()["metrics"] == pytest.approx(expected, rel=1e-12,
                                                               nan_ok=True)


# -- float16 and bfloat16 scores: read as they are, never widened ---------------

HALF_DTYPES = ["bfloat16", "float16"]


def _report_values(report):
    return [report.accuracy, *report.top_k_accuracy.values(), report.cross_entropy,
            report.brier_score, report.hinge_loss, report.expected_calibration_error,
            *report.calibration_accuracy]



def _read_only(array):
    array.flags.writeable = False
    return array


# Results as the host formulas leave them: views of every layout torch may refuse to share.
HOST_RESULT_LAYOUTS = {
    "reversed": lambda a: a[::-1],
    "reversed-strided": lambda a: a[::-2],
    "reversed-columns": lambda a: a.reshape(2, 6)[:, ::-1],
    "transposed": lambda a: a.reshape(3, 4).T,
    "read-only": lambda a: _read_only(a.copy()),
    "read-only-reversed": lambda a: _read_only(a.copy())[::-1],
    "broadcast": lambda a: np.broadcast_to(a[:1], (4,)),
    "scalar": lambda a: a[3],
    "0-d": lambda a: a[3, ...],
}


@pytest.mark.parametrize("layout", sorted(HOST_RESULT_LAYOUTS))
def test_host_results_become_torch_tensors_in_any_layout(layout):
    """The one conversion of host results to torch CPU tensors takes any
    NumPy layout: the values, as a tensor, without a warning."""
    import warnings

    from metrics_gpu.backends.numpy_backend import host_framework

    value = HOST_RESULT_LAYOUTS[layout](np.arange(12, dtype=np.float64))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tensor = host_framework(value, torch.zeros(1))
    assert isinstance(tensor, torch.Tensor)
    np.testing.assert_array_equal(tensor.numpy(), np.asarray(value))


# name -> (call, whether it takes probabilities rather than logits)
SCORE_CALLS = {
    "logits_report": (lambda y, s: _report_values(mg.logits_report(y, s, top_k=(1, 3),
                                                                    n_bins=5)), False),
    "logits_report_unchecked": (lambda y, s: _report_values(
        mg.logits_report(y, s, top_k=(1, 3), n_bins=5, validate=False)), False),
    "log_loss": (lambda y, s: mg.log_loss(y, s, from_logits=True), False),
    "log_loss_probabilities": (lambda y, s: mg.log_loss(y, s), True),
    "top_k_accuracy_score": (lambda y, s: mg.top_k_accuracy_score(y, s, k=2), False),
    "accuracy_score": (lambda y, s: mg.accuracy_score(y, s), False),
    "channel_first_log_loss": (lambda y, s: mg.log_loss(y, s, from_logits=True), False),
}


def _half_case(rng, dtype, call, device="cpu"):
    """Targets and 16-bit scores (logits, or probabilities whose rows need not
    sum to 1 closely) for ``call``."""
    _, probabilities = SCORE_CALLS[call]
    shape, target_shape = ((3, 7, 5, 4), (3, 5, 4)) if call.startswith("channel") else \
        ((300, 7), (300,))
    logits = torch.tensor(rng.normal(size=shape) * 3, dtype=torch.float32)
    scores = torch.softmax(logits, dim=1) if probabilities else logits
    y = torch.tensor(rng.integers(0, 7, target_shape))
    return y.to(device), scores.to(getattr(torch, dtype)).to(device)


def _as_floats(values):
    values = values if isinstance(values, list) else [values]
    return np.array([float(v) for v in values])


# float16 probabilities keep float16's eps (clip, row-sum tolerance), as scikit-learn
# does: not the widened values' results, by design.
WIDENED_CASES = [(dtype, call) for dtype in HALF_DTYPES for call in SCORE_CALLS
                 if not (dtype == "float16" and SCORE_CALLS[call][1])]


@pytest.mark.kernel_path  # the 16-bit score types are kernel instantiations of their own
@pytest.mark.parametrize(("dtype", "call"), WIDENED_CASES)
def test_half_scores_equal_their_widened_values(backend, rng, dtype, call):
    """float16 and bfloat16 tensors give what the same values widened to float32
    give (every value of either type is exactly a float32), warnings included."""
    import warnings

    device = "cuda" if backend.name == "cuda" else "cpu"
    y, scores = _half_case(rng, dtype, call, device)
    function, _ = SCORE_CALLS[call]
    results = []
    for values in (scores, scores.float()):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            results.append((_as_floats(function(y, values)), [str(w.message) for w in caught]))
    (ours, our_warnings), (widened, widened_warnings) = results
    np.testing.assert_allclose(ours, widened, rtol=1e-12, atol=0)
    assert our_warnings == widened_warnings


@pytest.mark.parametrize("dtype", HALF_DTYPES)
@pytest.mark.parametrize("backend_name", ["numpy", "emulated"])
def test_half_scores_reach_the_backend_in_place(monkeypatch, backend_name, dtype, rng):
    """The scores a backend computes on are the tensor's own memory: 16-bit
    patterns for the kernels, ml_dtypes' bfloat16 for NumPy; validation
    widens no more than a chunk of rows at a time (here 64 values)."""
    from conftest import skip_unavailable
    from metrics_gpu._validation import common as validation_common
    from metrics_gpu._formulas import state as _state
    from metrics_gpu.backends.selection import get_backend_implementation

    skip_unavailable(backend_name)
    implementation = get_backend_implementation(backend_name)
    y, logits = _half_case(rng, dtype, "log_loss")
    probabilities = _half_case(rng, dtype, "log_loss_probabilities")[1]
    memory = {id(t): t.view(torch.int16).numpy() for t in (logits, probabilities)}
    seen = []
    if backend_name == "numpy":
        fused_pass, argmax = implementation.fused_logits_pass, implementation.argmax_scores

        def fused_logits_pass(y_true, scores, **options):
            seen.append(scores)
            return fused_pass(y_true, scores, **options)

        def argmax_scores(scores):
            seen.append(scores)
            return argmax(scores)

        monkeypatch.setattr(implementation, "fused_logits_pass", fused_logits_pass)
        monkeypatch.setattr(implementation, "argmax_scores", argmax_scores)
        expected_dtype = dtype
    else:
        original = implementation.device.launch

        def launch(source, expression, grid, block, args, shared_bytes=0):
            seen.extend(a for a in args if isinstance(a, np.ndarray) and a.shape == logits.shape)
            return original(source, expression, grid, block, args, shared_bytes)

        monkeypatch.setattr(implementation.device, "launch", launch)
        expected_dtype = "uint16"
    widened = []
    original_widened = _state.Bfloat16Bits.widened

    def spy_widened(self):
        widened.append(self.size)
        return original_widened(self)

    monkeypatch.setattr(_state.Bfloat16Bits, "widened", spy_widened)
    monkeypatch.setattr(validation_common, "CHECK_CHUNK_ELEMENTS", 64)
    with mg.use_backend(backend_name):
        for scores, call in ((logits, lambda: mg.logits_report(y, logits, top_k=(1, 2))),
                             (logits, lambda: mg.accuracy_score(y, logits)),
                             (probabilities, lambda: mg.log_loss(y, probabilities))):
            seen.clear()
            call()
            assert seen, "the scores reached no pass"
            for array in seen:
                assert array.dtype.name == expected_dtype
                assert np.shares_memory(array, memory[id(scores)])
    assert max(widened, default=0) <= 64


def test_bfloat16_scores_are_widened_without_ml_dtypes(backend, monkeypatch, rng):
    """Without ml_dtypes NumPy has no bfloat16 type: the scores are widened to
    float32 (one copy), with the same results."""
    from metrics_gpu._validation import common as validation_common

    monkeypatch.setattr(validation_common, "bfloat16_dtype", lambda: None)
    y, scores = _half_case(rng, "bfloat16", "log_loss",
                           "cuda" if backend.name == "cuda" else "cpu")
    assert float(mg.log_loss(y, scores, from_logits=True)) == float(
        mg.log_loss(y, scores.float(), from_logits=True))


@pytest.mark.kernel_path  # bfloat16 patterns are checked on their own path
@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_half_scores_name_the_first_bad_value(backend, monkeypatch, dtype):
    """Checks read 16-bit scores a chunk of rows at a time (here 2) and name
    the row in the whole array."""
    from metrics_gpu._validation import common as validation_common

    monkeypatch.setattr(validation_common, "CHECK_CHUNK_ELEMENTS", 8)
    device = "cuda" if backend.name == "cuda" else "cpu"
    y = torch.zeros(40, dtype=torch.int64).to(device)
    bad = torch.zeros((40, 4), dtype=getattr(torch, dtype))
    bad[33, 2] = -float("inf")
    with pytest.raises(ValueError, match=r"y_proba must hold finite scores; found -inf at "
                                         r"row 33, column 2"):
        mg.log_loss(y, bad.to(device), from_logits=True)
    bad = torch.zeros((40, 4), dtype=getattr(torch, dtype))
    bad[21, 1] = float("nan")
    with pytest.raises(ValueError, match=r"y_pred must hold finite scores; found nan at "
                                         r"row 21, column 1"):
        mg.accuracy_score(y, bad.to(device))
    bad = torch.full((40, 4), 0.25, dtype=getattr(torch, dtype))
    bad[37, 3] = 1.5
    with pytest.raises(ValueError, match=r"found 1.5 at row, column \(37, 3\)"):
        mg.log_loss(y, bad.to(device))


@pytest.mark.kernel_path
@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_stream_of_half_scores_equals_widened(backend, rng, dtype):
    device = "cuda" if backend.name == "cuda" else "cpu"
    ours, widened = (mg.ClassificationMetrics(7, top_k=(1, 2), n_bins=4, validate="eager")
                     for _ in range(2))
    for _ in range(2):
        y, scores = _half_case(rng, dtype, "log_loss", device)
        ours.update(y, scores)
        widened.update(y, scores.float())
    expected = widened.compute().to_dict()["metrics"]
    got = ours.compute().to_dict()["metrics"]
    np.testing.assert_allclose([got[k] for k in expected], list(expected.values()),
                               rtol=1e-12, atol=0)
    bad = scores.clone()
    bad[5, 6] = float("nan")
    with pytest.raises(ValueError, match="must hold finite scores; found nan"):
        ours.update(y, bad)


# -- torch.distributed: sync over gloo ----------------------------------------


def _rank_batches(seed, world_size):
    """Uneven batch counts per rank: rank r gets r + 1 batches of its own sizes."""
    rng = np.random.default_rng(seed)
    ranks = []
    for rank in range(world_size):
        batches = []
        for _ in range(rank + 1):
            n = int(rng.integers(1, 40))
            y = rng.integers(0, 6, n)
            z = rng.normal(size=(n, 6))
            w = rng.integers(1, 4, n) if rank % 2 == 0 else None
            batches.append((y, z, w))
        ranks.append(batches)
    return ranks


def _weights(w, weighted, n):
    """A batch's weights: none, integer, or float (halves); ranks without weights
    send none, which counts as weight 1."""
    if not weighted or w is None:
        return None
    return w * 0.5 if weighted == "float" else w


def _groups_of(y):
    """A batch's groups (per-group counts synced with the rest of the state)."""
    return (y + np.arange(len(y))) % 3


WEIGHTINGS = (None, "int", "float")


def _sync_worker(rank, world_size, directory, seed):
    """One rank: for each weighting, a process group of its own (a fresh init
    file), a fresh stream of this rank's batches, sync(), and its result."""
    import torch.distributed as dist

    for weighted in WEIGHTINGS:
        dist.init_process_group("gloo", init_method=f"file://{directory}/init-{weighted}",
                                rank=rank, world_size=world_size)
        try:
            metrics = mg.ClassificationMetrics(6, n_bins=5, thresholds=10, ignore_index=-1,
                                               num_groups=3)
            for y, z, w in _rank_batches(seed, world_size)[rank]:
                w = _weights(w, weighted, len(y))
                metrics.update(torch.tensor(y), torch.tensor(z),
                               None if w is None else torch.tensor(w),
                               groups=torch.tensor(_groups_of(y)))
            metrics.sync()
            with open(os.path.join(directory, f"{weighted}-{rank}.pkl"), "wb") as out:
                pickle.dump(metrics.compute().to_dict(), out)
        finally:
            dist.destroy_process_group()


@functools.cache
def _synced_results(world_size):
    """{weighting: each rank's result}: the ranks are spawned once per world
    size (a process start imports torch: seconds), each weighting synced over
    a process group of its own."""
    from process_groups import start_ranks

    with tempfile.TemporaryDirectory() as directory:
        start_ranks(_sync_worker, (world_size, directory, 1000 + world_size), world_size)
        results = {}
        for weighted in WEIGHTINGS:
            results[weighted] = []
            for rank in range(world_size):
                with open(os.path.join(directory, f"{weighted}-{rank}.pkl"), "rb") as source:
                    results[weighted].append(pickle.load(source))
    return results


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("weighted", WEIGHTINGS)
def test_sync_over_gloo_equals_one_process(world_size, weighted):
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    seed = 1000 + world_size
    results = _synced_results(world_size)[weighted]
    single = mg.ClassificationMetrics(6, n_bins=5, thresholds=10, ignore_index=-1, num_groups=3)
    for batches in _rank_batches(seed, world_size):
        for y, z, w in batches:
            w = _weights(w, weighted, len(y))
            single.update(y, z, np.ones(len(y), np.int64) if weighted and w is None else w,
                          groups=_groups_of(y))
    expected = single.compute().to_dict()
    for result in results:
        assert result["metrics"].keys() == expected["metrics"].keys()
        np.testing.assert_allclose([result["metrics"][k] for k in expected["metrics"]],
                                   list(expected["metrics"].values()), rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(result["confusion_matrix"], expected["confusion_matrix"])
        assert result["groups"]["counts"] == expected["groups"]["counts"]
        for name, values in expected["groups"]["by_group"].items():
            np.testing.assert_allclose(np.array(result["groups"]["by_group"][name], float),
                                       np.array(values, float), rtol=1e-12, atol=1e-12)
