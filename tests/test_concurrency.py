"""Thread safety: the backend choice is per thread and per context, concurrent
calls give the serial results, and the emulated device builds each library
once however many threads ask for it first.
"""

from __future__ import annotations

import contextvars
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import metrics_gpu as mg
from metrics_gpu.backends import selection as _backend
from metrics_gpu.backends.kernel_cache import CACHE_VARIABLE
from metrics_gpu.backends import emulated
from conftest import skip_unavailable

THREADS = 8


# -- the backend choice -------------------------------------------------------------


def test_use_backend_is_per_thread():
    """A thread's ``use_backend`` is not seen by another thread, running at the same time."""
    inside = threading.Barrier(2, timeout=30)
    seen = {}

    def chooser():
        with mg.use_backend("numpy"):
            seen["chooser"] = mg.get_backend()
            inside.wait()  # the other thread reads while this one is inside
            inside.wait()
        seen["chooser after"] = mg.get_backend()

    def reader():
        inside.wait()
        seen["reader"] = mg.get_backend()
        inside.wait()

    threads = [threading.Thread(target=chooser), threading.Thread(target=reader)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    default = _backend._check_env() if _backend._global_backend is None else _backend._global_backend
    assert seen == {"chooser": "numpy", "reader": default, "chooser after": default}


def test_threads_start_with_a_fresh_context():
    """A worker thread does not inherit the use_backend of the thread that started it."""
    with mg.use_backend("numpy"):
        with ThreadPoolExecutor(1) as pool:
            in_worker = pool.submit(mg.get_backend).result()
    assert in_worker == mg.get_backend()


def test_use_backend_is_per_context():
    """Inside a copied context (as asyncio tasks run), a use_backend stays there."""
    outside = mg.get_backend()

    def task():
        with mg.use_backend("numpy"):
            return mg.get_backend()

    assert contextvars.copy_context().run(task) == "numpy"
    assert mg.get_backend() == outside


def test_set_backend_is_process_wide(monkeypatch):
    monkeypatch.setattr(_backend, "_global_backend", None)
    mg.set_backend("numpy")
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(mg.get_backend).result() == "numpy"


def test_kernel_backend_is_created_once(monkeypatch):
    """Threads asking for a kernel backend at once share one instance (and so one
    emulated device, whose lock keeps each library built once)."""
    skip_unavailable("emulated")
    monkeypatch.setattr(_backend, "_implementations", {})
    make = _backend._make_kernel_backend

    def slow_make(name):
        time.sleep(0.05)  # creation takes a while: every thread is inside it at once
        return make(name)

    monkeypatch.setattr(_backend, "_make_kernel_backend", slow_make)
    start = threading.Barrier(THREADS, timeout=30)

    def get():
        start.wait()
        return _backend.get_backend_implementation("emulated")

    with ThreadPoolExecutor(THREADS) as pool:
        instances = list(pool.map(lambda _: get(), range(THREADS)))
    assert len({id(instance) for instance in instances}) == 1


# -- concurrent calls give the serial results ------------------------------------------


def _plain(value):
    """A result as nested lists, dicts and floats (reports resolved)."""
    if hasattr(value, "to_dict"):
        value = value.to_dict()
    if hasattr(value, "__dataclass_fields__"):
        value = {name: getattr(value, name) for name in value.__dataclass_fields__}
    if isinstance(value, dict):
        return {key: _plain(v) for key, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return np.asarray(value).tolist()


def _inputs(seed, n=700, k=5):
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, k, n)
    logits = rng.standard_normal((n, k))
    logits[np.arange(n), y_true] += rng.random(n) * 2  # better than chance
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y_pred = np.argmax(logits, axis=1)
    weight = rng.integers(0, 4, n)
    return dict(y_true=y_true, y_pred=y_pred, logits=logits, probabilities=probabilities,
                weight=weight, binary_true=(y_true == 0).astype(np.int8),
                binary_score=probabilities[:, 0])


CALLS = {
    "accuracy_score": lambda d: mg.accuracy_score(d["y_true"], d["y_pred"]),
    "accuracy_score_from_logits": lambda d: mg.accuracy_score(d["y_true"], d["logits"]),
    "confusion_matrix": lambda d: mg.confusion_matrix(d["y_true"], d["y_pred"],
                                                      sample_weight=d["weight"]),
    "f1_score": lambda d: mg.f1_score(d["y_true"], d["y_pred"], average="macro"),
    "precision_recall_fscore_support": lambda d: mg.precision_recall_fscore_support(
        d["y_true"], d["y_pred"]),
    "matthews_corrcoef": lambda d: mg.matthews_corrcoef(d["y_true"], d["y_pred"]),
    "cohen_kappa_score": lambda d: mg.cohen_kappa_score(d["y_true"], d["y_pred"],
                                                        weights="quadratic"),
    "balanced_accuracy_score": lambda d: mg.balanced_accuracy_score(d["y_true"], d["y_pred"]),
    "label_report": lambda d: mg.label_report(d["y_true"], d["y_pred"]),
    "classification_report": lambda d: mg.classification_report(d["y_true"], d["y_pred"],
                                                                output_dict=True),
    "log_loss": lambda d: mg.log_loss(d["y_true"], d["probabilities"]),
    "brier_score_loss": lambda d: mg.brier_score_loss(d["y_true"], d["probabilities"]),
    "top_k_accuracy_score": lambda d: mg.top_k_accuracy_score(d["y_true"], d["logits"], k=2),
    "logits_report": lambda d: mg.logits_report(d["y_true"], d["logits"]),
    "roc_auc_score_ovr": lambda d: mg.roc_auc_score(d["y_true"], d["probabilities"],
                                                    multi_class="ovr"),
    "average_precision_score": lambda d: mg.average_precision_score(d["binary_true"],
                                                                    d["binary_score"]),
    "catboost_metric": lambda d: mg.catboost_metric("MultiClass", d["y_true"], d["logits"]),
}


def _run(task):
    backend, name, seed, data = task
    with mg.use_backend(backend):
        return _plain(CALLS[name](data))


def test_concurrent_calls_give_the_serial_results():
    """Every function, on the numpy and emulated backends (chosen inside each
    task), from 8 threads at once: the results of the same calls made one by one."""
    backends = ["numpy"]
    try:
        skip_unavailable("emulated")
        backends.append("emulated")
    except pytest.skip.Exception:
        pass
    datasets = {seed: _inputs(seed) for seed in (1, 2)}
    # The emulated backend serialises its launches and is slow: one data set.
    tasks = [(backend, name, seed, datasets[seed])
             for backend in backends for name in CALLS
             for seed in (datasets if backend == "numpy" else (1,))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ill-defined metrics of small classes
        serial = [_run(task) for task in tasks]
        order = np.random.default_rng(0).permutation(len(tasks))
        with ThreadPoolExecutor(THREADS) as pool:
            concurrent = list(pool.map(lambda i: _run(tasks[i]), order))
    for i, result in zip(order, concurrent):
        backend, name, seed, _ = tasks[i]
        np.testing.assert_equal(result, serial[i], err_msg=f"{name} on {backend}, data {seed}")


def test_concurrent_calls_leave_warning_filters_alone():
    """No call changes the process's warning filters, even when calls overlap
    (warnings.catch_warnings is process-wide: saving and restoring it from
    several threads at once can leave another thread's filters in place)."""
    data = _inputs(3, n=50, k=3)
    data["y_pred"][:] = 0  # classes never predicted: undefined per-class values
    before = list(warnings.filters)

    def call(_):
        with mg.use_backend("numpy"):
            for _ in range(20):
                mg.label_report(data["y_true"], data["y_pred"]).to_dict()
                mg.multiclass_quality_metrics(data["y_true"], data["y_pred"], num_classes=4)
        return list(warnings.filters)

    with ThreadPoolExecutor(THREADS) as pool:
        seen = list(pool.map(call, range(THREADS)))
    assert list(warnings.filters) == before
    assert all(filters == before for filters in seen)


# -- the emulated device builds under concurrency ----------------------------------------


def test_first_build_from_several_threads(tmp_path, monkeypatch):
    """Threads building the same library into a fresh cache at once: one of them
    compiles (the others wait on the library's file lock), each gets a working
    library, and no staging file is left behind."""
    skip_unavailable("emulated")
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path))
    builders = 3
    started = threading.Barrier(builders, timeout=60)
    compiles = []
    compile_unit = emulated.EmulatedDevice._compile

    def counted_compile(self, *args):
        compiles.append(args[0])
        return compile_unit(self, *args)

    monkeypatch.setattr(emulated.EmulatedDevice, "_compile", counted_compile)
    device = emulated.EmulatedDevice()
    source = "__global__ void probe(long long* out) { out[threadIdx.x] = threadIdx.x + 1; }"

    def build(_):
        started.wait()  # every builder asks at once
        launch = device.build_module(source, ["probe"])
        out = np.zeros(64, dtype=np.int64)
        launch("probe", 1, 64, [out])
        return out

    with ThreadPoolExecutor(builders) as pool:
        results = list(pool.map(build, range(builders)))
    for out in results:
        np.testing.assert_array_equal(out, np.arange(1, 65))
    assert len(compiles) == 1
    names = sorted(p.suffix for p in (tmp_path / "emulated").iterdir())
    assert names == [".lock", ".so"]


def test_each_library_is_built_once(tmp_path, monkeypatch):
    """Kernels of one library launched first from many threads at once: one build."""
    skip_unavailable("emulated")
    device = emulated.EmulatedDevice()
    builds = []

    def fake_build(name, text, expressions):
        builds.append(expressions)
        time.sleep(0.05)  # every thread asks while the build runs
        return tmp_path / name

    class FakeLibrary:
        def __init__(self, path, expressions):
            self.entries = {expression: path for expression in expressions}

    monkeypatch.setattr(device, "_build", fake_build)
    monkeypatch.setattr(emulated, "_Library", FakeLibrary)
    source = "confusion.cu"
    expressions = [e for e in device._modules[source]][:THREADS * 4]
    start = threading.Barrier(THREADS, timeout=30)

    def entries(offset):
        start.wait()
        return [device._entry(source, e) for e in expressions[offset::THREADS]]

    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(entries, range(THREADS)))
    groups = {emulated._group_key(e) for e in expressions}
    assert len(builds) == len(groups)
