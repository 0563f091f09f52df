"""Shared fixtures: every test that takes ``backend`` runs once per backend.

Backends that cannot run here (no GPU, no CuPy, not built yet) are skipped
with the reason, so the same files run on CPU CI and on GPU machines.
"""

from __future__ import annotations

import os
import re
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings as hypothesis_settings

# The NVRTC gate is a repository tool (tools/nvrtc_gate.py), not part of the
# installed package: tests import it from there.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))

import metrics_gpu
from metrics_gpu.backends.selection import BackendUnavailableError, get_backend_implementation

BACKENDS = ("numpy", "emulated", "cuda")

# Hypothesis: the test runs draw the same examples on every run ("fixed", the
# default: each test's examples seeded from its own source, no example
# database), so that a case found by chance cannot fail an unrelated later
# change; fresh examples are the long fuzz run's (`.ci/fuzz-long`), or any
# run's with `--hypothesis-profile=fresh` (random draws, the example database
# in .hypothesis/). Loaded here, before the test modules build their settings.
hypothesis_settings.register_profile("fixed", derandomize=True, database=None)
hypothesis_settings.register_profile("fresh", hypothesis_settings.get_profile("default"),
                                     derandomize=False)
hypothesis_settings.load_profile("fixed")


def host_array(value):
    """One result as a NumPy array: a CuPy array (the cuda backend's results)
    copied back, anything else through ``np.asarray``."""
    return value.get() if type(value).__module__.startswith("cupy") else np.asarray(value)


def map_results(value, leaf):
    """``leaf`` applied to every array of a result, its dicts and tuples
    walked; None and strings as they are."""
    if isinstance(value, dict):
        return {key: map_results(item, leaf) for key, item in value.items()}
    if isinstance(value, tuple):
        return tuple(map_results(item, leaf) for item in value)
    if value is None or isinstance(value, str):
        return value
    return leaf(value)


def on_host(value):
    """A result with every array on the host (:func:`host_array`)."""
    return map_results(value, host_array)


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
        return host_array(value)

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


@pytest.fixture(autouse=True)
def _functional_plans_of_this_test_only():
    """Each test starts without the functional API's launch plans
    (metrics_gpu._pipeline.planned): a plan an earlier test of the worker kept would
    take later calls of its layout past a test's own patches and counts."""
    from metrics_gpu._pipeline import planned as _planned
    _planned.clear_plans()


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


# What the launch code reads of a device to choose a kernel and its grid.
GEOMETRY = ("multiprocessor_count", "shared_memory_per_block", "shared_memory_per_block_optin",
            "shared_memory_per_multiprocessor", "block_threads")


@pytest.fixture
def emulated_geometry(case, monkeypatch):
    """The emulated device's geometry (2 SMs, 64 threads a block, 48 KiB of
    shared memory, no opt-in) on every kernel backend, for the tests of which
    kernel, grid and shared-memory mode the host chooses: on a GPU the same
    choices are then made, and the kernels run on it with those launches."""
    from metrics_gpu.backends.emulated import EmulatedDevice

    if case.name != "emulated":
        for name in GEOMETRY:  # the cuda device's properties, replaced on its class
            monkeypatch.setattr(type(case.device), name, getattr(EmulatedDevice, name))
    return case


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


# -- tiers: which emulated cases run by default ----------------------------------------
#
# The emulated backend runs the CUDA sources on the CPU, slowly. A test run
# with `backend` or `case` once per backend. On `emulated` the default (fast)
# tier keeps every case of the kernel tests (the `case` fixture) and, of each
# test through the public API (`backend`), the cases that together take every
# value of every parameter at least once (greedy, in collection order, so the
# choice is the same in every xdist worker): every label dtype, weight kind, K
# regime, option... still reaches the kernels, but the cross product of parity
# cases (the same kernel instantiations launched again) is left to the
# exhaustive tier; a test whose combinations of values are kernel paths of
# their own is marked `kernel_path`. The others are marked `emulated_rerun` and deselected unless
# --emulated-exhaustive is given; CI runs them (`-m emulated_rerun
# --emulated-exhaustive`). A test marked `kernel_path` keeps every case.
# Coverage is checked, not assumed: with METRICS_GPU_RECORD_LAUNCHES=DIR every
# launch on the emulated device is written to DIR (test id, kernel
# instantiation), and `.ci/kernel_coverage.py` fails when the fast tier
# launched fewer distinct instantiations than the exhaustive one.

RECORD_VARIABLE = "METRICS_GPU_RECORD_LAUNCHES"


def pytest_addoption(parser):
    group = parser.getgroup("metrics-gpu")
    group.addoption(
        "--emulated-exhaustive", action="store_true", default=False,
        help="run every case of the per-backend tests on the emulated backend, not only the "
             "cases that cover each parameter value (the fast tier)",
    )
    group.addoption(
        "--nvrtc-gate", action="store_true", default=False,
        help="compile every kernel instantiation with NVRTC for every supported architecture "
             "(tests marked nvrtc_gate; minutes of CPU, so a step of .ci/run of its own)",
    )


def pytest_configure(config):
    # (the markers `emulated_rerun` and `kernel_path` are declared in pyproject.toml)
    directory = os.environ.get(RECORD_VARIABLE)
    if directory:
        _record_emulated_launches(Path(directory), config)


def _backend_parameter(item):
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None, None
    for name in ("backend", "case"):
        if name in callspec.params:
            return name, callspec.params[name]
    return None, None


def _value_key(value) -> str:
    """A parameter value as text that is the same in every process (no addresses)."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))[:300]


def _mark_emulated_reruns(items):
    """Mark the emulated cases the fast tier leaves out (see the comment above)."""
    covered: dict[str, set] = {}  # test function -> (parameter, value) pairs run
    for item in items:
        fixture, value = _backend_parameter(item)
        if value == "emulated" and item.get_closest_marker("exhaustive_on_emulated"):
            # Heavy on the emulator (large K or N, many hypothesis examples) and
            # no kernel path of its own: the coverage check holds it to that.
            item.add_marker(pytest.mark.emulated_rerun)
            continue
        # `case` tests are the kernel tests: each case is a kernel path.
        if value != "emulated" or fixture == "case" or item.get_closest_marker("kernel_path"):
            continue
        function = item.nodeid.split("[", 1)[0]
        values = {(name, _value_key(v)) for name, v in item.callspec.params.items()
                  if name != fixture}
        seen = covered.get(function)
        if seen is None or not values <= seen:
            covered[function] = (seen or set()) | values
        else:
            item.add_marker(pytest.mark.emulated_rerun)
            left_out = item.get_closest_marker("no_emulated_reruns")
            if left_out is not None:
                name, kept_out = left_out.args
                if item.callspec.params.get(name) in kept_out:
                    item.add_marker(pytest.mark.emulated_rerun_left_out)


def pytest_collection_modifyitems(config, items):
    # Tests that run once per backend (`backend`, or the kernel backends'
    # `case`) carry the `per_backend` marker, so that
    # CI's second pass (METRICS_GPU_BACKEND=emulated) can select the others.
    for item in items:
        if {"backend", "case"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.per_backend)
    _mark_emulated_reruns(items)
    exhaustive = config.getoption("--emulated-exhaustive")
    gate = config.getoption("--nvrtc-gate")
    kept, dropped = [], []
    for item in items:
        left_out = ((not exhaustive and item.get_closest_marker("emulated_rerun"))
                    or item.get_closest_marker("emulated_rerun_left_out")
                    or (not gate and item.get_closest_marker("nvrtc_gate")))
        (dropped if left_out else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


# -- recording the kernel instantiations launched (the coverage check) -------------------

_current_test = {"id": "(outside a test)"}


def pytest_runtest_logstart(nodeid, location):
    _current_test["id"] = nodeid


def _record_emulated_launches(directory: Path, config) -> None:
    """Append (test id, kernel instantiation) of every emulated launch to a file in ``directory``."""
    from metrics_gpu.backends.emulated import EmulatedDevice

    directory.mkdir(parents=True, exist_ok=True)
    worker = getattr(config, "workerinput", {}).get("workerid", "main")
    path = directory / f"launches-{worker}-{os.getpid()}.tsv"
    seen: set[tuple[str, str]] = set()
    original = EmulatedDevice.launch

    def launch(self, source, expression, grid, block, args, shared_bytes=0):
        key = (_current_test["id"], expression)
        if key not in seen:
            seen.add(key)
            with path.open("a") as out:
                out.write(f"{key[0]}\t{expression}\n")
        return original(self, source, expression, grid, block, args, shared_bytes)

    EmulatedDevice.launch = launch


# -- the GPU cases skipped here, said once at the end ----------------------------------

# Skip reasons of the cases that need a GPU: skip_unavailable("cuda") and the
# tests that need a CUDA device for torch or CuPy's kernel attributes.
GPU_SKIP = re.compile(r"backend 'cuda' unavailable|no CUDA device|needs a GPU|on a GPU only")


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def gpu_skip_summary(reports) -> str | None:
    """One line on the GPU cases among ``reports`` (skipped ones), or None when none."""
    reasons = [reason for reason in map(_skip_reason, reports) if GPU_SKIP.search(reason)]
    if not reasons:
        return None
    from metrics_gpu.backends.cuda import cuda_unavailable_reason

    why = cuda_unavailable_reason()
    where = f"no GPU here ({why})" if why is not None else f"e.g. {reasons[0]}"
    return (f"metrics-gpu: {len(reasons)} GPU cases skipped, {where}; CI runs the same "
            "kernels on the emulated backend, a GPU machine runs these")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if hasattr(config, "workerinput"):  # an xdist worker: the controller says it, once
        return
    line = gpu_skip_summary(terminalreporter.stats.get("skipped", ()))
    if line is not None:
        terminalreporter.write_line(line)
