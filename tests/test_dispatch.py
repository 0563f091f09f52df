"""Backend selection: get_backend / set_backend / use_backend, the
METRICS_GPU_BACKEND variable, 'auto', the CUDA install hint, lazy imports,
and where the kernel sources are found."""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

import metrics_gpu as mg
from metrics_gpu.backends import selection as _backend
from metrics_gpu.backends import kernel_sources as _kernels
ENV = "METRICS_GPU_BACKEND"
HAVE_CUPY = importlib.util.find_spec("cupy") is not None


@pytest.fixture
def clean_state(monkeypatch):
    """No set_backend choice and no environment variable (not read yet); all
    restored after."""
    monkeypatch.setattr(_backend, "_global_backend", None)
    monkeypatch.setattr(_backend, "_environment_backend", None)
    monkeypatch.delenv(ENV, raising=False)
    token = _backend._context_backend.set(None)  # leave any enclosing use_backend
    yield
    _backend._context_backend.reset(token)


def _available(name):
    try:
        _backend.get_backend_implementation(name)
    except mg.BackendUnavailableError:
        return False
    return True


# -- defaults and precedence ------------------------------------------------------------


def test_default_is_auto(clean_state):
    assert mg.get_backend() == "auto"


def test_set_backend_numpy_and_back(clean_state):
    mg.set_backend("numpy")
    assert mg.get_backend() == "numpy"
    mg.set_backend("auto")
    assert mg.get_backend() == "auto"


@pytest.mark.parametrize("spelling", ["NumPy", "NUMPY", "numpy"])
def test_backend_names_case_insensitive(clean_state, spelling):
    mg.set_backend(spelling)
    assert mg.get_backend() == "numpy"
    with mg.use_backend(spelling.swapcase()):
        assert mg.get_backend() == "numpy"


def test_use_backend_restores_previous(clean_state):
    mg.set_backend("numpy")
    with mg.use_backend("auto"):
        assert mg.get_backend() == "auto"
    assert mg.get_backend() == "numpy"


def test_use_backend_nesting(clean_state):
    assert mg.get_backend() == "auto"
    with mg.use_backend("numpy"):
        assert mg.get_backend() == "numpy"
        with mg.use_backend("auto"):
            assert mg.get_backend() == "auto"
            with mg.use_backend("numpy"):
                assert mg.get_backend() == "numpy"
            assert mg.get_backend() == "auto"
        assert mg.get_backend() == "numpy"
    assert mg.get_backend() == "auto"


def test_use_backend_restores_after_exception(clean_state):
    class Boom(Exception):
        pass

    with mg.use_backend("numpy"):
        with pytest.raises(Boom):
            with mg.use_backend("auto"):
                assert mg.get_backend() == "auto"
                raise Boom
        assert mg.get_backend() == "numpy"
    assert mg.get_backend() == "auto"


def test_use_backend_overrides_set_backend_and_env(clean_state, monkeypatch):
    monkeypatch.setenv(ENV, "numpy")
    mg.set_backend("numpy")
    with mg.use_backend("auto"):
        assert mg.get_backend() == "auto"
    assert mg.get_backend() == "numpy"


def test_set_backend_overrides_env(clean_state, monkeypatch):
    monkeypatch.setenv(ENV, "auto")
    mg.set_backend("numpy")
    assert mg.get_backend() == "numpy"


@pytest.mark.parametrize("value, expected",
                         [("numpy", "numpy"), (" NumPy ", "numpy"), ("auto", "auto"),
                          ("", "auto")],
                         ids=["numpy", "padded-mixed-case", "auto", "empty"])
def test_environment_variable(clean_state, monkeypatch, value, expected):
    monkeypatch.setenv(ENV, value)
    assert mg.get_backend() == expected


def test_environment_variable_read_by_the_first_call_and_again_after_set_backend_none(
        clean_state, monkeypatch):
    """Read once (not on every metric call), at the first call that needs it,
    not at import; set_backend(None) reads it again."""
    monkeypatch.setenv(ENV, "numpy")  # after import, before the first call: it counts
    assert mg.get_backend() == "numpy"
    monkeypatch.delenv(ENV)
    assert mg.get_backend() == "numpy"  # kept
    mg.set_backend(None)
    assert mg.get_backend() == "auto"
    monkeypatch.setenv(ENV, "numpy")
    mg.set_backend(None)
    assert mg.get_backend() == "numpy"


def test_set_backend_none_drops_the_process_wide_choice(clean_state, monkeypatch):
    monkeypatch.setenv(ENV, "numpy")
    mg.set_backend("auto")
    assert mg.get_backend() == "auto"
    mg.set_backend(None)
    assert mg.get_backend() == "numpy"
    with mg.use_backend("auto"):  # use_backend still wins
        assert mg.get_backend() == "auto"


def test_a_bad_environment_variable_is_not_kept(clean_state, monkeypatch):
    monkeypatch.setenv(ENV, "bogus")
    for _ in range(2):
        with pytest.raises(ValueError, match=rf"{ENV} must be one of"):
            mg.get_backend()
    monkeypatch.setenv(ENV, "numpy")  # fixed: the next call reads it
    assert mg.get_backend() == "numpy"


def test_get_backend_does_not_read_the_environment_each_call(clean_state, monkeypatch):
    assert mg.get_backend() == "auto"
    reads = []

    class Environ(dict):
        def get(self, key, default=None):
            reads.append(key)
            return super().get(key, default)

    monkeypatch.setattr(_backend.os, "environ", Environ(os.environ))
    for _ in range(3):
        assert mg.get_backend() == "auto"
        mg.accuracy_score(np.array([0, 1]), np.array([0, 1]))
    assert reads == []


def test_environment_variable_cuda_without_cupy_fails_at_use(clean_state, monkeypatch):
    if HAVE_CUPY:
        pytest.skip("CuPy is importable here")
    monkeypatch.setenv(ENV, "cuda")
    assert mg.get_backend() == "cuda"
    with pytest.raises(mg.BackendUnavailableError, match=r"pip install"):
        mg.accuracy_score(np.array([0, 1]), np.array([0, 1]))


def test_use_backend_is_thread_local(clean_state):
    seen = {}

    def worker():
        seen["thread"] = mg.get_backend()

    with mg.use_backend("numpy"):
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        assert mg.get_backend() == "numpy"
    assert seen["thread"] == "auto"


def test_use_backend_is_task_local(clean_state):
    async def inside(name, gate, results):
        with mg.use_backend(name):
            await gate.wait()
            results[name] = mg.get_backend()

    async def main():
        gate = asyncio.Event()
        results = {}
        tasks = [asyncio.create_task(inside(n, gate, results)) for n in ("numpy", "auto")]
        await asyncio.sleep(0)
        gate.set()
        await asyncio.gather(*tasks)
        return results

    assert asyncio.run(main()) == {"numpy": "numpy", "auto": "auto"}
    assert mg.get_backend() == "auto"


# -- auto ------------------------------------------------------------------------------


def test_auto_picks_numpy_for_numpy_input(clean_state):
    assert _backend.resolve_backend(np.array([0, 1]), np.array([1, 0])).name == "numpy"
    assert _backend.resolve_backend([0, 1], (1, 0), None).name == "numpy"


def test_auto_follows_the_input(backend):
    """Under 'auto', each backend's own arrays are dispatched to it (host arrays,
    as the emulated backend takes, go to numpy)."""
    expected = "cuda" if backend.name == "cuda" else "numpy"
    with mg.use_backend("auto"):
        chosen = _backend.resolve_backend(backend.asarray([0, 1, 2]))
        assert chosen.name == expected
        value = mg.accuracy_score(backend.asarray([0, 1, 2]), backend.asarray([0, 1, 1]))
    assert float(backend.to_numpy(value)) == pytest.approx(2 / 3)


def test_numpy_in_numpy_out(clean_state):
    with mg.use_backend("auto"):
        value = mg.accuracy_score(np.array([0, 1, 2, 2]), np.array([0, 1, 1, 2]))
        cm = mg.confusion_matrix(np.array([0, 1]), np.array([0, 1]))
    assert isinstance(value, (float, np.floating))
    assert float(value) == 0.75
    assert isinstance(cm, np.ndarray)


# Every kind of result, from the reduction buffer and from the host formulas
# (labels=, per-class arrays, beta != 1, zero_division=1, the source bundles).
T3, P3 = [0, 1, 2, 2, 1, 0, 2], [0, 2, 2, 1, 1, 0, 0]
T2, P2 = [0, 1, 1, 0, 1], [0, 1, 0, 0, 1]
SCORES3 = np.eye(3)[P3] + 0.1
RESULT_CALLS = {
    "confusion_matrix": lambda put: mg.confusion_matrix(put(T3), put(P3)),
    "confusion_matrix-num_classes": lambda put: mg.confusion_matrix(put(T3), put(P3),
                                                                    num_classes=4),
    "confusion_matrix-labels-normalize": lambda put: mg.confusion_matrix(
        put(T3), put(P3), labels=[2, 0], normalize="true"),
    "accuracy_score": lambda put: mg.accuracy_score(put(T3), put(P3)),
    "accuracy_score-count": lambda put: mg.accuracy_score(put(T3), put(P3), normalize=False),
    "balanced_accuracy_weighted": lambda put: mg.balanced_accuracy_weighted(
        put(T3), put(P3), class_weight=[1.0, 2.0, 3.0]),
    "matthews_corrcoef": lambda put: mg.matthews_corrcoef(put(T3), put(P3)),
    "cohen_kappa_score-labels": lambda put: mg.cohen_kappa_score(put(T3), put(P3),
                                                                 labels=[0, 2]),
    "precision_recall_fscore_support": lambda put: mg.precision_recall_fscore_support(
        put(T3), put(P3)),
    "precision_recall_fscore_support-beta": lambda put: mg.precision_recall_fscore_support(
        put(T3), put(P3), beta=2.0, average="macro"),
    "f1_score-macro": lambda put: mg.f1_score(put(T3), put(P3), average="macro"),
    "f1_score-binary": lambda put: mg.f1_score(put(T2), put(P2)),
    "recall_score-zero_division": lambda put: mg.recall_score(put(T3), put(P3),
                                                              average="macro",
                                                              zero_division=1.0),
    "jaccard_score": lambda put: mg.jaccard_score(put(T3), put(P3), average=None),
    "specificity_score": lambda put: mg.specificity_score(put(T3), put(P3), average="macro"),
    "multiclass_quality_metrics": lambda put: mg.multiclass_quality_metrics(put(T3), put(P3)),
    "binary_quality_metrics": lambda put: mg.binary_quality_metrics(put(T2), put(P2)),
    "catboost_metric-Precision": lambda put: mg.catboost_metric("Precision", put(T3),
                                                                put(SCORES3)),
    "catboost_metric-MCC": lambda put: mg.catboost_metric("MCC", put(T3), put(SCORES3)),
    # The curves: reversed views of their scans (which torch cannot share).
    "roc_curve": lambda put: mg.roc_curve(put(T2), put(SCORES3[:5, 1])),
    "precision_recall_curve": lambda put: mg.precision_recall_curve(put(T2),
                                                                    put(SCORES3[:5, 1])),
}


def _leaves(result):
    """Every array or scalar in a result (tuples, the bundles' fields)."""
    if result is None:
        return []
    if isinstance(result, tuple):
        return [leaf for item in result for leaf in _leaves(item)]
    if hasattr(result, "__dataclass_fields__"):
        return [leaf for name in result.__dataclass_fields__
                for leaf in _leaves(getattr(result, name))]
    return [result]


@pytest.mark.parametrize("name", sorted(RESULT_CALLS))
def test_results_live_where_the_inputs_live(backend, name):
    """Results live where the inputs do: numpy in -> numpy scalars/arrays;
    cupy in -> cupy arrays on the input's device. The host backends (numpy,
    emulated) give NumPy."""
    leaves = _leaves(RESULT_CALLS[name](backend.asarray))
    assert leaves
    for leaf in leaves:
        if backend.name == "cuda":
            import cupy

            assert isinstance(leaf, cupy.ndarray), (name, type(leaf))
            assert leaf.device.id == cupy.cuda.Device().id
        else:
            assert isinstance(leaf, (np.float64, np.ndarray)), (name, type(leaf))


@pytest.mark.parametrize("name", sorted(RESULT_CALLS))
def test_torch_in_torch_out(name):
    """torch CUDA tensors in -> torch tensors on the same device out."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not _available("cuda"):
        pytest.skip("needs a GPU with torch and CuPy")

    def put(array):
        return torch.as_tensor(np.asarray(array), device="cuda")

    for leaf in _leaves(RESULT_CALLS[name](put)):
        assert isinstance(leaf, torch.Tensor), (name, type(leaf))
        assert leaf.device.type == "cuda"


def test_is_device_array_false_for_host_data():
    assert not _backend.is_device_array(np.zeros(3))
    assert not _backend.is_device_array([0, 1])
    assert not _backend.is_device_array(None)


# -- unavailable backends ---------------------------------------------------------------


def test_cuda_without_cupy_names_the_fix(clean_state):
    if HAVE_CUPY:
        pytest.skip("CuPy is importable here: the install hint does not apply")
    for enter in (lambda: mg.set_backend("cuda"), lambda: mg.use_backend("cuda").__enter__(),
                  lambda: _backend.get_backend_implementation("cuda")):
        with pytest.raises(mg.BackendUnavailableError) as info:
            enter()
        message = str(info.value)
        assert "pip install" in message
        assert "pip install '.[cuda12]'" in message
    assert mg.get_backend() == "auto"  # nothing changed by the failed requests


def test_failed_set_backend_keeps_previous_choice(clean_state):
    mg.set_backend("numpy")
    for name in ("cuda", "emulated"):
        if _available(name):
            continue
        with pytest.raises(mg.BackendUnavailableError):
            mg.set_backend(name)
        assert mg.get_backend() == "numpy"


def test_failed_use_backend_keeps_previous_choice(clean_state):
    for name in ("cuda", "emulated"):
        if _available(name):
            continue
        with mg.use_backend("numpy"):
            with pytest.raises(mg.BackendUnavailableError):
                with mg.use_backend(name):
                    pass  # pragma: no cover
            assert mg.get_backend() == "numpy"


def test_backend_unavailable_error_is_public():
    assert mg.BackendUnavailableError is _backend.BackendUnavailableError
    assert issubclass(mg.BackendUnavailableError, Exception)
    assert not issubclass(mg.BackendUnavailableError, ValueError)  # not a bad argument


def test_numpy_backend_always_available():
    assert _available("numpy")


# -- imports stay lazy -------------------------------------------------------------------


_LAZY_IMPORT_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import metrics_gpu
    heavy = ("cupy", "torch", "jax", "cupy_backends", "numba", "sklearn")
    loaded = [name for name in heavy if name in sys.modules]
    assert not loaded, f"import metrics_gpu imported {loaded}"
    metrics_gpu.accuracy_score(np.array([0, 1, 2]), np.array([0, 1, 1]))
    metrics_gpu.label_report(np.array([0, 1, 2]), np.array([0, 1, 1]))
    with metrics_gpu.use_backend("auto"):
        metrics_gpu.f1_score(np.array([0, 1, 2]), np.array([0, 1, 1]), average="macro")
    loaded = [name for name in heavy if name in sys.modules]
    assert not loaded, f"computing on NumPy input imported {loaded}"
    print("LAZY-OK")
""")


def test_import_does_not_load_gpu_frameworks():
    env = {k: v for k, v in os.environ.items() if k != ENV}
    done = subprocess.run([sys.executable, "-c", _LAZY_IMPORT_SCRIPT], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "LAZY-OK" in done.stdout


def test_import_does_not_touch_cuda():
    """No CUDA driver library is loaded by importing the package."""
    script = textwrap.dedent("""
        import metrics_gpu
        with open("/proc/self/maps") as maps:
            libraries = [line for line in maps if "libcuda" in line or "libcudart" in line]
        assert not libraries, libraries
        print("NO-CUDA-OK")
    """)
    if not Path("/proc/self/maps").exists():
        pytest.skip("needs /proc")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_import_with_bad_environment_variable_does_not_fail():
    """A bad METRICS_GPU_BACKEND is reported when used, not at import."""
    env = dict(os.environ, **{ENV: "bogus"})
    done = subprocess.run(
        [sys.executable, "-c", "import metrics_gpu; print('IMPORTED')"],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert done.returncode == 0 and "IMPORTED" in done.stdout, done.stderr


# -- kernel sources ---------------------------------------------------------------------


def test_kernel_directory_found():
    directory = _kernels.kernel_directory()
    assert isinstance(directory, Path)
    assert directory.is_dir()
    assert (directory / "README.md").is_file()


def test_kernel_directory_in_checkout_or_package():
    directory = _kernels.kernel_directory().resolve()
    package = Path(mg.__file__).resolve().parent
    assert directory in (package / "kernels", package.parent / "kernels")


def test_kernel_source_reads_files():
    text = _kernels.kernel_source("README.md")
    assert "kernel" in text.lower()
    for cu in sorted(_kernels.kernel_directory().glob("*.cu")):
        assert _kernels.kernel_source(cu.name) == cu.read_text()


def test_kernel_source_missing_file():
    with pytest.raises(FileNotFoundError, match="no_such_kernel.cu"):
        _kernels.kernel_source("no_such_kernel.cu")


def _parameters(function, drop_self: bool) -> list:
    parameters = list(inspect.signature(function).parameters.values())
    return [(p.name, p.kind, p.default) for p in parameters[1 if drop_self else 0:]]


@pytest.mark.parametrize("name", ["numpy", "emulated", "kernel backend class"])
def test_every_backend_supplies_the_backend_protocol(name):
    """Every member of metrics_gpu.backends.Backend, with the protocol's
    parameters (names, kinds, defaults): the numpy and emulated backends, and
    the kernel backend's class, which the cuda backend shares."""
    from metrics_gpu.backends import Backend
    from metrics_gpu.backends.kernel_backend import KernelBackend

    if name == "kernel backend class":
        implementation, bound = KernelBackend, False
    else:
        implementation, bound = _backend.get_backend_implementation(name), True
        assert isinstance(implementation, Backend)
        for attribute in ("name", "xp", "reduces_on_device"):
            assert hasattr(implementation, attribute), attribute
        assert implementation.name == name
    methods = {member: value for member, value in vars(Backend).items()
               if callable(value) and not member.startswith("_")}
    assert len(methods) == 18
    for member, protocol_method in methods.items():
        supplied = getattr(implementation, member, None)
        assert callable(supplied), f"{name} lacks {member}"
        assert _parameters(supplied, drop_self=not bound) == _parameters(
            protocol_method, drop_self=True), f"{name}.{member} differs from the protocol"
