"""Shared fixtures: every test that takes ``backend`` runs once per backend.

Backends that cannot run here (no GPU, no CuPy, not built yet) are skipped
with the reason, so the same files run on CPU CI and on GPU machines.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import pytest

import metrics_gpu
from metrics_gpu._backend import BackendUnavailableError, get_backend_implementation

BACKENDS = ("numpy", "emulated", "cuda")


class BackendCase:
    """A backend under test: moves inputs to it and results back to NumPy."""

    def __init__(self, name: str):
        self.name = name

    def asarray(self, array):
        """Place a host array where this backend computes."""
        array = np.asarray(array)
        # Strings and objects cannot live on a GPU: they reach the library as
        # host arrays, whose errors are the ones under test.
        if self.name == "cuda" and array.dtype.kind not in "OUS":
            import cupy

            return cupy.asarray(array)
        return array

    def to_numpy(self, value):
        if self.name == "cuda" and hasattr(value, "get"):
            return value.get()
        return np.asarray(value)

    def __repr__(self):
        return self.name


def skip_unavailable(name: str) -> None:
    """Skip the test, with the reason, when backend ``name`` cannot run here."""
    try:
        get_backend_implementation(name)
    except BackendUnavailableError as error:
        pytest.skip(f"backend {name!r} unavailable: {error}")


@pytest.fixture(params=BACKENDS)
def backend(request):
    name = request.param
    skip_unavailable(name)
    with metrics_gpu.use_backend(name):
        yield BackendCase(name)


@pytest.fixture
def rng(request):
    """A generator seeded from the test's id, so every case is reproducible."""
    seed = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng(seed)


# -- kernel backends (the `case` fixture): emulated, and cuda on a GPU --------------

KERNEL_BACKENDS = ("emulated", "cuda")


class KernelCase(BackendCase):
    """A kernel backend: its implementation, and moves to and from its memory."""

    def __init__(self, name: str):
        super().__init__(name)
        self.impl = get_backend_implementation(name)
        self.device = self.impl.device

    def put(self, array):
        """A host array on this backend (``cupy.asarray`` on cuda); None stays None."""
        return None if array is None else self.asarray(array)

    def get(self, value):
        """A result as NumPy (``.get()`` on cuda); None stays None."""
        return None if value is None else self.to_numpy(value)


@pytest.fixture(params=KERNEL_BACKENDS)
def case(request):
    skip_unavailable(request.param)
    return KernelCase(request.param)


@dataclass
class Launch:
    expression: str
    grid: int
    block: int
    args: list
    shared_bytes: int

    @property
    def kernel(self) -> str:
        return self.expression.split("<", 1)[0]


@pytest.fixture
def launches(case, monkeypatch):
    """Every kernel launch of the test, in order (the device's launch is wrapped)."""
    records: list[Launch] = []
    original = case.device.launch

    def spy(source, expression, grid, block, args, shared_bytes=0):
        records.append(Launch(expression, grid, block, list(args), shared_bytes))
        return original(source, expression, grid, block, args, shared_bytes)

    monkeypatch.setattr(case.device, "launch", spy)
    return records


def pytest_collection_modifyitems(items):
    # Tests that run once per backend (`backend`, or the kernel backends'
    # `case`) carry the `per_backend` marker, so that
    # CI's second pass (METRICS_GPU_BACKEND=emulated) can select the others.
    for item in items:
        if {"backend", "case"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.per_backend)
