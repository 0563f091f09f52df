"""Backend selection: get_backend / set_backend / use_backend, the
METRICS_GPU_BACKEND variable, 'auto', the CUDA install hint, lazy imports,
and where the kernel sources are found."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

import metrics_gpu as mg
from metrics_gpu import _backend, _kernels

ENV = "METRICS_GPU_BACKEND"
HAVE_CUPY = importlib.util.find_spec("cupy") is not None


@pytest.fixture
def clean_state(monkeypatch):
    """No set_backend choice and no environment variable; both restored after."""
    monkeypatch.setattr(_backend, "_global_backend", None)
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


def test_environment_variable_read_at_call_time(clean_state, monkeypatch):
    assert mg.get_backend() == "auto"
    monkeypatch.setenv(ENV, "numpy")
    assert mg.get_backend() == "numpy"
    monkeypatch.delenv(ENV)
    assert mg.get_backend() == "auto"


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
        assert "metrics-gpu[cuda12]" in message
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
