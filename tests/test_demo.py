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
    assert device.waits == 2  # after generating, after the report


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
