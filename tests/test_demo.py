"""``metrics-gpu demo``: which backend it runs on, where it makes its data,
and what it says about both."""

from __future__ import annotations

import types

import numpy as np
import pytest

from metrics_gpu.backends import selection as _backend
from metrics_gpu.backends.selection import BackendUnavailableError, get_backend_implementation
from metrics_gpu.backends import cuda as cuda_device
from metrics_gpu.cli import main, synthetic_predictions

DEMO = ["demo", "--samples", "20000", "--classes", "5"]


class DeviceModule(types.ModuleType):
    """NumPy dressed as CuPy: the device recipe's lines, run on the host, and
    the stream waits the demo's timings make, counted."""

    def __init__(self):
        super().__init__("fake_cupy")
        self.waits = 0
        stream = types.SimpleNamespace(synchronize=self._wait)
        self.cuda = types.SimpleNamespace(get_current_stream=lambda: stream)

    def _wait(self):
        self.waits += 1

    def __getattr__(self, name):
        return getattr(np, name)


def test_auto_without_a_gpu_runs_numpy_and_says_why(monkeypatch, capsys):
    monkeypatch.setattr(cuda_device, "cuda_unavailable_reason", lambda: "no NVIDIA GPU found")
    assert main(DEMO) == 0
    captured = capsys.readouterr()
    assert "backend auto runs numpy here, no GPU: no NVIDIA GPU found" in captured.err
    summary = captured.out.splitlines()[-1]
    assert summary.startswith("20,000 predictions, 5 classes: full report in ")
    assert "backend numpy; data generated on the CPU in " in summary


def test_auto_with_a_gpu_makes_the_data_there_and_runs_cuda(monkeypatch, capsys):
    """CuPy and a GPU present (faked: the emulated backend stands in for
    cuda, NumPy for CuPy): the data is made by the device recipe, the timings
    wait for the stream, and the summary names cuda."""
    try:
        stand_in = get_backend_implementation("emulated")
    except BackendUnavailableError as error:
        pytest.skip(f"the emulated backend stands in for cuda: {error}")
    device = DeviceModule()
    monkeypatch.setattr(cuda_device, "cuda_unavailable_reason", lambda: None)
    monkeypatch.setitem(_backend._implementations, "cuda", stand_in)
    monkeypatch.setattr("metrics_gpu.cli._array_module",
                        lambda backend: device if backend == "cuda" else np)
    assert main(DEMO) == 0
    captured = capsys.readouterr()
    assert "no GPU" not in captured.err
    assert "backend cuda; data generated on the GPU in " in captured.out.splitlines()[-1]
    assert device.waits == 4  # after the labels, the scores, the update, the report


# `name`, not `backend`: that is the per-backend fixture's name (tests/conftest.py).
@pytest.mark.parametrize("name", ["numpy", "emulated"])
def test_named_backend_is_used_as_it_is(name, monkeypatch, capsys):
    if name == "emulated":
        try:
            get_backend_implementation("emulated")
        except BackendUnavailableError as error:
            pytest.skip(str(error))
    # A GPU present changes nothing for a named backend.
    monkeypatch.setattr(cuda_device, "cuda_unavailable_reason", lambda: None)
    assert main([*DEMO, "--backend", name]) == 0
    captured = capsys.readouterr()
    assert f"backend {name}; data generated on the CPU in " in captured.out
    assert "no GPU" not in captured.err


def test_auto_on_this_machine(capsys):
    """Unpatched: cuda on a GPU machine (data made there), numpy elsewhere."""
    assert main(DEMO) == 0
    expected = "numpy" if cuda_device.cuda_unavailable_reason() is not None else "cuda"
    assert f"backend {expected}; " in capsys.readouterr().out


def test_device_recipe_has_the_host_recipe_distribution():
    """The GPU's data (the recipe run by NumPy here): int32 codes in range,
    right about ``accuracy`` of the time, the seed's class frequencies, and
    the same values for the same seed."""
    n, k = 200_000, 6
    y_true, y_pred = synthetic_predictions(n, k, seed=4, xp=DeviceModule())
    host_true, host_pred = synthetic_predictions(n, k, seed=4)
    assert y_true.dtype == y_pred.dtype == np.int32
    assert 0 <= y_true.min() and y_true.max() < k and 0 <= y_pred.min() and y_pred.max() < k
    np.testing.assert_allclose(np.bincount(y_true, minlength=k) / n,
                               np.bincount(host_true, minlength=k) / n, atol=0.01)
    np.testing.assert_allclose(np.mean(y_true == y_pred), np.mean(host_true == host_pred),
                               atol=0.01)
    again_true, again_pred = synthetic_predictions(n, k, seed=4, xp=DeviceModule())
    np.testing.assert_array_equal(again_true, y_true)
    np.testing.assert_array_equal(again_pred, y_pred)


def test_demo_is_the_full_report_on_its_generated_scores(monkeypatch, capsys):
    """The demo's JSON is the file report's with scores: label metrics of the
    scores' argmax, cross-entropy, Brier, calibration, top-k and binned ROC
    AUC / AP with their bounds, equal to scikit-learn's on the same generated
    data (the first chunk's scores are seeded seed + 1)."""
    import json

    from scipy.special import softmax
    from sklearn.metrics import accuracy_score, log_loss, roc_auc_score, top_k_accuracy_score

    from metrics_gpu.cli import synthetic_scores

    monkeypatch.setattr(cuda_device, "cuda_unavailable_reason", lambda: None)
    assert main(["demo", "--samples", "20000", "--classes", "10", "--backend", "numpy",
                 "--seed", "3", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines() == ["metrics-gpu demo: backend numpy, named by --backend"]
    report = json.loads(captured.out)
    y_true, y_pred = synthetic_predictions(20_000, 10, seed=3)
    logits = synthetic_scores(y_true, y_pred, 10, seed=4)
    assert logits.dtype == np.float32 and logits.shape == (20_000, 10)
    np.testing.assert_array_equal(logits.argmax(axis=1), y_pred)  # the labels are the argmax
    probabilities = softmax(logits.astype(np.float64), axis=1)
    scores = report["scores"]
    assert report["auc_method"] == "binned" and report["rows"] == 20_000
    assert report["metrics"]["accuracy"] == pytest.approx(accuracy_score(y_true, y_pred))
    assert scores["cross_entropy"] == pytest.approx(log_loss(y_true, probabilities), rel=1e-5)
    assert scores["top_5_accuracy"] == pytest.approx(
        top_k_accuracy_score(y_true, probabilities, k=5, labels=range(10)))
    brier = np.mean(np.sum((probabilities - np.eye(10)[y_true]) ** 2, axis=1))
    assert scores["brier_score"] == pytest.approx(brier, rel=1e-5)
    exact_auc = roc_auc_score(y_true, probabilities, multi_class="ovr", average="macro")
    assert abs(scores["roc_auc_macro"] - exact_auc) <= scores["roc_auc_error_bound"] + 1e-9
    # neither perfect nor chance
    assert 0.9 < exact_auc < 0.995 and 0.6 < report["metrics"]["accuracy"] < 0.9
    assert 0.0 < scores["expected_calibration_error"] < 0.3
    assert len(scores["calibration"]["proportion"]) == 15  # the reliability bins


def test_demo_text_has_the_score_metrics(capsys):
    assert main(["demo", "--samples", "20000", "--backend", "numpy"]) == 0
    out = capsys.readouterr().out
    for name in ("accuracy", "cross_entropy", "brier_score", "expected_calibration_error",
                 "top_5_accuracy"):
        assert f"\n{name} " in out or f"\n  {name} " in out, name
    assert "scores (ROC AUC and average precision: binned, ± the error bound" in out
    assert "roc_auc_macro " in out and " ± " in out


def test_every_demo_option_has_help():
    from metrics_gpu.cli import build_parser

    parser = build_parser()
    commands = next(action for action in parser._actions if action.dest == "command")
    demo = commands.choices["demo"]
    for action in demo._actions:
        assert action.help, action.option_strings
