"""A fresh process's first calls on the cuda backend, with a filled kernel
cache: what they import, on the stand-in for CuPy (tests/cupy_stand_in.py),
which runs the cuda device's host code whole on the CPU and copies from CuPy
what made a first ``accuracy_score`` cost 0.37 s on an H100: a CuPy array
reaching NumPy's ufunc (``counts > 0``) loads cupyx, and with it scipy.sparse.

Each first call (``ClassificationMetrics.update``, its ``compute``, and
``accuracy_score``, on CuPy arrays as in a training loop, backend ``auto``;
then the first balanced accuracy, MCC, kappa and confusion matrix) may import
the package's own modules and those of :data:`ALLOWED`, nothing else: no scipy, no cupyx, nothing heavy between ``import metrics_gpu`` and the
launch of a kernel already on disk. And the backend choice does not read the
environment on each call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from metrics_gpu import _backend
from metrics_gpu._kernel_cache import CACHE_VARIABLE, SWITCH_VARIABLE, cache_root

TESTS = Path(__file__).resolve().parent

# What a first call may import besides metrics_gpu's modules and CuPy's:
# fcntl (the kernel cache's entry locks, metrics_gpu._kernel_cache).
ALLOWED = frozenset({"fcntl"})

_FIRST_CALLS = textwrap.dedent("""
    import json, os, sys
    sys.path[:0] = [{tests!r}, {root!r}]
    import numpy as np
    import cupy_stand_in

    cupy = cupy_stand_in.install()
    rng = np.random.default_rng(7)
    y = cupy.asarray(rng.integers(0, 10, 600))
    logits = cupy.asarray(rng.standard_normal((600, 10)).astype(np.float32))
    expected = float((logits.get().argmax(axis=1) == y.get()).mean())

    steps, loaded = {{}}, set(sys.modules)

    def step(name, call):
        global loaded
        value = call()
        now = set(sys.modules)
        steps[name] = sorted(now - loaded - cupy_stand_in.own_modules)
        loaded = now
        return value

    mg = step("import metrics_gpu", lambda: __import__("metrics_gpu"))
    metrics = mg.ClassificationMetrics(10)
    step("first update", lambda: metrics.update(y, logits))
    update_operations = list(cupy_stand_in.operations)
    computed = step("first compute", lambda: float(metrics.compute()["accuracy"]))
    accuracy = step("first accuracy_score", lambda: float(mg.accuracy_score(y, logits)))

    class CountedEnviron(dict):
        # os.environ for the calls after the first: counts reads of the backend variable.
        reads = 0

        def get(self, key, default=None):
            CountedEnviron.reads += key == "METRICS_GPU_BACKEND"
            return super().get(key, default)

        def __getitem__(self, key):
            CountedEnviron.reads += key == "METRICS_GPU_BACKEND"
            return super().__getitem__(key)

    environ, os.environ = os.environ, CountedEnviron(os.environ)
    metrics.update(y, logits)
    mg.accuracy_score(y, logits)
    mg.get_backend()
    os.environ = environ

    labels = cupy.asarray(rng.integers(0, 10, 600))
    step("first label metrics", lambda: [
        metric(y, labels) for metric in (mg.balanced_accuracy_score, mg.matthews_corrcoef,
                                         mg.cohen_kappa_score, mg.confusion_matrix)])

    device = mg._backend._implementations["cuda"].device
    counts = device.kernel_cache.counts
    print(json.dumps({{
        "steps": steps, "accuracy": accuracy, "computed": computed, "expected": expected,
        "backend": mg.get_backend(), "device": type(device).__name__,
        "cupyx": type(sys.modules["cupyx"]).__name__,
        "cupyx_loaded_by": [line for line in cupy_stand_in.cupyx_loaded_by
                            if "metrics_gpu" in line],
        "scipy": sorted(m for m in sys.modules if m.split(".")[0] == "scipy")[:5],
        "compiled": len(cupy_stand_in.compiled), "launched": cupy_stand_in.launched,
        "hits": counts.hits, "update_operations": update_operations,
        "environment_reads": CountedEnviron.reads,
    }}))
""")


@pytest.fixture(scope="module")
def kernel_cache(tmp_path_factory):
    """A cuda kernel cache of the stand-in's own, beside the emulated libraries
    of this test session (built once, shared: the stand-in's kernels run on them)."""
    try:
        _backend.get_backend_implementation("emulated")
    except _backend.BackendUnavailableError as error:
        pytest.skip(f"the stand-in runs its kernels on the emulated backend: {error}")
    root = tmp_path_factory.mktemp("first-call-cache")
    libraries = cache_root() / "emulated"
    libraries.mkdir(parents=True, exist_ok=True)
    (root / "emulated").symlink_to(libraries, target_is_directory=True)
    return root


def _fresh_process(cache: Path) -> dict:
    script = _FIRST_CALLS.format(tests=str(TESTS), root=str(TESTS.parent))
    environment = {**os.environ, CACHE_VARIABLE: str(cache)}
    for variable in (SWITCH_VARIABLE, _backend.ENV_VARIABLE):
        environment.pop(variable, None)
    done = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def first_calls(kernel_cache) -> dict:
    """The second of two fresh processes: the first filled the kernel cache."""
    filling = _fresh_process(kernel_cache)
    assert filling["compiled"] > 0
    return _fresh_process(kernel_cache)


def test_the_first_calls_run_the_cuda_device_from_a_filled_cache(first_calls):
    assert first_calls["backend"] == "auto" and first_calls["device"] == "CudaDevice"
    assert first_calls["compiled"] == 0 and first_calls["hits"] == len(
        set(first_calls["launched"]))
    assert first_calls["accuracy"] == first_calls["computed"] == first_calls["expected"]


def test_no_first_call_loads_cupyx_or_scipy(first_calls):
    """CuPy's cupyx stays the lazy module `import cupy` left, and scipy unloaded;
    a failure names the line of the package that handed a CuPy array to NumPy."""
    assert first_calls["cupyx"] == "_LazyModule", first_calls["cupyx_loaded_by"]
    assert first_calls["scipy"] == []


@pytest.mark.parametrize("step", ["first update", "first compute", "first accuracy_score",
                                  "first label metrics"])
def test_a_first_call_imports_only_the_package_and_cupy(first_calls, step):
    unexpected = [name for name in first_calls["steps"][step]
                  if name.split(".")[0] not in ("metrics_gpu", "cupy") and name not in ALLOWED]
    assert unexpected == [], f"{step} imported {unexpected}"


def test_the_first_update_runs_only_the_package_kernels(first_calls):
    """The streaming update issues no CuPy kernel of its own (CuPy compiles those
    in each new process: NVRTC on an empty file first, then each module)."""
    assert first_calls["update_operations"] == []


def test_calls_after_the_first_do_not_read_the_environment(first_calls):
    assert first_calls["environment_reads"] == 0
