"""A fresh process's first calls on the cuda backend, with a filled kernel
cache: what they import, on the stand-in for CuPy (tests/cupy_stand_in.py),
which runs the cuda device's host code whole on the CPU and copies from CuPy
what made a first ``accuracy_score`` cost 0.37 s on an H100: a CuPy array
reaching NumPy's ufunc (``counts > 0``) loads cupyx, and with it scipy.sparse.

The first call of each public function in common use, on CuPy arrays as in a
training loop, backend ``auto`` (:data:`_FIRST_CALLS`: ``ClassificationMetrics``'
update and compute, ``accuracy_score``, then the label metrics, the score
metrics, the ranking metrics, the reports, and the streaming classes with
``thresholds=``, a binary ``threshold=`` and groups), loads no cupyx: each is checked on its own, and a failure
names the line of the package that handed a CuPy array and a scalar to NumPy.
Each step of them may import the package's own modules and those of
:data:`ALLOWED`, nothing else: no scipy, no cupyx, nothing heavy between
``import metrics_gpu`` and the launch of a kernel already on disk. And the
backend choice does not read the environment on each call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from metrics_gpu.backends import selection as _backend
from metrics_gpu.backends.kernel_cache import CACHE_VARIABLE, SWITCH_VARIABLE, cache_root

TESTS = Path(__file__).resolve().parent

# What a first call may import besides metrics_gpu's modules and CuPy's:
# fcntl (the kernel cache's entry locks, metrics_gpu.backends.kernel_cache).
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

    steps, loaded, loaders = {{}}, set(sys.modules), {{}}

    def first_call(name, call):
        # The call; where it loaded cupyx, the innermost line of the package
        # on the way, and a lazy cupyx again for the next call.
        value = call()
        if cupy_stand_in.cupyx_loaded():
            package = [line[line.find("metrics_gpu/"):]
                       for line in cupy_stand_in.cupyx_loaded_by if "metrics_gpu/" in line]
            loaders[name] = package[-1:]
            cupy_stand_in.reset_cupyx()
        return value

    def step(name, *calls):
        # First calls (name, call) of a step; the modules the step imported.
        global loaded
        values = [first_call(call_name, call) for call_name, call in calls]
        now = set(sys.modules)
        steps[name] = sorted(now - loaded - cupy_stand_in.own_modules)
        loaded = now
        return values

    mg, = step("import metrics_gpu", ("import", lambda: __import__("metrics_gpu")))
    metrics = mg.ClassificationMetrics(10)
    step("first update", ("ClassificationMetrics.update", lambda: metrics.update(y, logits)))
    update_operations = list(cupy_stand_in.operations)
    computed, = step("first compute", ("ClassificationMetrics.compute",
                                       lambda: float(metrics.compute()["accuracy"])))
    accuracy, = step("first accuracy_score",
                     ("accuracy_score", lambda: float(mg.accuracy_score(y, logits))))

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
    weight = cupy.asarray(rng.random(600))
    step("first label metrics", *[(metric.__name__, lambda metric=metric: metric(y, labels))
                                  for metric in (mg.balanced_accuracy_score, mg.matthews_corrcoef,
                                                 mg.cohen_kappa_score, mg.confusion_matrix,
                                                 mg.precision_recall_fscore_support)],
         ("f1_score", lambda: mg.f1_score(y, labels, average="macro")),
         ("f1_score, sample_weight", lambda: mg.f1_score(y, labels, average="macro",
                                                         sample_weight=weight)),
         ("accuracy_score, ignore_index", lambda: mg.accuracy_score(y, labels, ignore_index=3)))

    probabilities = cupy.asarray(rng.dirichlet(np.ones(10), 600))
    binary = cupy.asarray(rng.integers(0, 2, 600))
    binary_scores = cupy.asarray(rng.random(600).astype(np.float32))
    binary_columns = cupy.asarray(rng.integers(0, 2, (600, 4)))
    step("first score metrics",
         ("log_loss", lambda: mg.log_loss(y, probabilities)),
         ("top_k_accuracy_score", lambda: mg.top_k_accuracy_score(y, logits, k=5)),
         ("brier_score_loss", lambda: mg.brier_score_loss(binary, binary_scores)),
         ("expected_calibration_error",
          lambda: mg.expected_calibration_error(y, probabilities)))
    step("first ranking metrics",
         ("roc_auc_score", lambda: mg.roc_auc_score(binary, binary_scores)),
         ("roc_auc_score, ovr", lambda: mg.roc_auc_score(y, probabilities, multi_class="ovr")),
         ("average_precision_score", lambda: mg.average_precision_score(binary, binary_scores)),
         ("roc_curve", lambda: mg.roc_curve(binary, binary_scores)),
         ("precision_recall_curve", lambda: mg.precision_recall_curve(binary, binary_scores)),
         # Every label column at once (the backend's label_rank_areas).
         ("roc_auc_score, multilabel macro",
          lambda: mg.roc_auc_score(binary_columns, probabilities[:, :4])),
         ("average_precision_score, multilabel weighted",
          lambda: mg.average_precision_score(binary_columns, probabilities[:, :4],
                                             average="weighted", sample_weight=weight)))
    step("first reports",
         ("label_report", lambda: mg.label_report(y, labels)),
         ("logits_report", lambda: mg.logits_report(y, logits)))

    indicators = cupy.asarray(rng.integers(0, 2, (600, 5)))
    label_logits = cupy.asarray(rng.standard_normal((600, 5)).astype(np.float32))

    def streamed(metrics, *batch):
        metrics.update(*batch)
        return metrics.compute()

    binary_logits = cupy.asarray(rng.standard_normal((600, 2)).astype(np.float32))
    groups = cupy.asarray(rng.integers(0, 3, 600))
    step("first streaming, thresholds and groups",
         ("ClassificationMetrics(thresholds=)",
          lambda: streamed(mg.ClassificationMetrics(10, thresholds=20), y, logits)),
         ("MultilabelMetrics(thresholds=)",
          lambda: streamed(mg.MultilabelMetrics(5, thresholds=20), indicators, label_logits)),
         ("ClassificationMetrics(2, threshold=, num_groups=)",
          lambda: streamed(mg.ClassificationMetrics(2, threshold=0.3, num_groups=3), binary,
                           binary_logits, weight, groups)))

    device = mg.backends.selection._implementations["cuda"].device
    counts = device.kernel_cache.counts
    print(json.dumps({{
        "steps": steps, "accuracy": accuracy, "computed": computed, "expected": expected,
        "backend": mg.get_backend(), "device": type(device).__name__,
        "cupyx_loaded_by": loaders,
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
    a failure names each call that loaded cupyx, with the line of the package
    that handed a CuPy array and a scalar to NumPy."""
    loaders = first_calls["cupyx_loaded_by"]
    assert loaders == {}, "cupyx loaded by " + "; ".join(
        f"{call} at {' '.join(lines)}" for call, lines in loaders.items())
    assert first_calls["scipy"] == []


STEPS = ["first update", "first compute", "first accuracy_score", "first label metrics",
         "first score metrics", "first ranking metrics", "first reports",
         "first streaming, thresholds and groups"]


@pytest.mark.parametrize("step", STEPS)
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
