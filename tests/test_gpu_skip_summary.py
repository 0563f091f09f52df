"""The line the test run ends with when GPU cases were skipped (conftest)."""

from __future__ import annotations

import types

from conftest import gpu_skip_summary

from metrics_gpu.backends import cuda as cuda_device


def _skipped(reason: str):
    return types.SimpleNamespace(longrepr=("tests/test_x.py", 3, f"Skipped: {reason}"))


def test_counts_the_gpu_skips_only(monkeypatch):
    monkeypatch.setattr(cuda_device, "cuda_unavailable_reason", lambda: "no NVIDIA GPU found")
    reports = [_skipped("backend 'cuda' unavailable: no GPU"),
               _skipped("backend 'cuda' unavailable: no GPU"),
               _skipped("no CUDA device for torch"),
               _skipped("CuPy is importable here")]
    assert gpu_skip_summary(reports) == (
        "metrics-gpu: 3 GPU cases skipped, no GPU here (no NVIDIA GPU found); CI runs the "
        "same kernels on the emulated backend, a GPU machine runs these")


def test_nothing_said_without_gpu_skips():
    assert gpu_skip_summary([_skipped("a GPU is present")]) is None
    assert gpu_skip_summary([]) is None
