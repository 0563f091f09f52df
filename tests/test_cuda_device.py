"""The cuda device's compile, launch and placement steps, on a stand-in for CuPy.

No GPU is needed: CuPy's compiler, module, driver and array types are
replaced by recording fakes, so what the device asks of CuPy is checked on
every machine. What the kernels compute on a GPU is the other tests' `cuda`
cases (tools/gpu_session.sh runs them on a lent GPU).
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest

from metrics_gpu.backends.kernel_cache import KernelCache
from metrics_gpu.backends.kernel_sources import NVRTC_OPTIONS
from metrics_gpu.backends.cuda import CudaDevice

SHARED_SIZE, MAX_DYNAMIC_SHARED = 1, 8  # CUfunction_attribute values
DEFAULT_SHARED, OPTIN_SHARED = 48 * 1024, 227 * 1024


class FakeArray:
    """A CuPy array as far as the device looks: ``get`` and ``device``."""

    def __init__(self, host):
        self.host = np.asarray(host)
        self.ndim = self.host.ndim

    def get(self):
        return self.host.copy()


class FakeFunction:
    def __init__(self, name):
        self.name, self.ptr, self.launches = name, 1234, []

    def __call__(self, grid, block, args, shared_mem=0):
        self.launches.append((grid, block, shared_mem))


def fake_cupy(static_shared: int, records: dict):
    attributes = {SHARED_SIZE: static_shared, MAX_DYNAMIC_SHARED: DEFAULT_SHARED - static_shared}

    def compile_using_nvrtc(source, options=(), arch=None, filename="kern.cu",
                            name_expressions=None, **_):
        records["options"] = tuple(options)
        records["compiles"] = records.get("compiles", 0) + 1
        return (b"cubin of " + " ".join(name_expressions).encode(),
                {e: f"lowered {e}" for e in name_expressions})

    class Module:
        def load(self, binary):
            records["loaded"] = binary

        def get_function(self, name):
            records["function"] = function = FakeFunction(name)
            return function

    def set_attribute(pointer, attribute, value):
        records.setdefault("set", []).append((attribute, value))
        attributes[attribute] = value

    driver = SimpleNamespace(
        CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES=SHARED_SIZE,
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES=MAX_DYNAMIC_SHARED,
        funcGetAttribute=lambda attribute, pointer: attributes[attribute],
        funcSetAttribute=set_attribute,
    )
    device_attributes = {"MaxSharedMemoryPerBlock": DEFAULT_SHARED,
                         "MaxSharedMemoryPerBlockOptin": OPTIN_SHARED}
    # No RawModule: the device must not compile through it (it appends -ftz=true).
    class Device:
        compute_capability = "90"

        def __init__(self, index):
            self.attributes = device_attributes

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    return SimpleNamespace(
        __version__="14.fake",
        ndarray=FakeArray,
        cuda=SimpleNamespace(
            compiler=SimpleNamespace(compile_using_nvrtc=compile_using_nvrtc),
            function=SimpleNamespace(Module=Module),
            driver=driver,
            runtime=SimpleNamespace(getDevice=lambda: 0),
            nvrtc=SimpleNamespace(getVersion=lambda: (13, 0)),
            Device=Device,
        ),
    )


def fake_device(static_shared: int = 0, cache_directory=None):
    """A CudaDevice on the fake CuPy; its kernel cache in ``cache_directory``
    (None: none, every new device compiles)."""
    records: dict = {}
    device = object.__new__(CudaDevice)  # __init__ would import CuPy
    device.cupy = device.xp = fake_cupy(static_shared, records)
    device._kernels, device._lock, device._attributes = {}, threading.Lock(), {}
    device.kernel_cache = KernelCache(cache_directory)
    return device, records


def test_kernels_compile_with_exactly_the_project_options():
    """Subnormals kept (--ftz=false, last), no fused multiply-add, the kernels'
    include path: the options the NVRTC gate compiles with, nothing appended."""
    device, records = fake_device()
    device.launch("scores.cu", "fused_logits_pass<int>", 3, 256, [np.int64(5)])
    options = records["options"]
    assert options[:len(NVRTC_OPTIONS)] == NVRTC_OPTIONS
    assert [o for o in options if "ftz" in o] == ["--ftz=false"]
    assert "--fmad=false" in options and any(o.startswith("--include-path=") for o in options)
    assert records["function"].name == "lowered fused_logits_pass<int>"
    assert records["function"].launches == [((3,), (256,), 0)]
    # Compiled once per GPU and instantiation.
    device.launch("scores.cu", "fused_logits_pass<int>", 1, 256, [])
    assert len(records["function"].launches) == 2


def test_a_launch_opts_in_when_static_and_dynamic_shared_memory_pass_48_kib():
    """CUDA gives a block 48 KiB of static and dynamic shared memory together;
    beyond that the kernel must opt in, or the launch fails (invalid argument):
    the staged score kernel's 48 KiB tile plus its static scratch did, on an H200."""
    static = 4096
    device, records = fake_device(static)
    device.launch("scores.cu", "k", 1, 256, [], DEFAULT_SHARED - static)
    assert "set" not in records  # exactly 48 KiB in all: no opt-in
    device.launch("scores.cu", "k", 1, 256, [], DEFAULT_SHARED - static + 8)
    assert records["set"] == [(MAX_DYNAMIC_SHARED, DEFAULT_SHARED - static + 8)]
    device.launch("scores.cu", "k", 1, 256, [], 40_000)
    device.launch("scores.cu", "k", 1, 256, [], DEFAULT_SHARED - static + 8)
    assert len(records["set"]) == 1  # set once, kept for smaller launches
    with pytest.raises(RuntimeError, match="exceed this GPU's"):
        device.launch("scores.cu", "k", 1, 256, [], OPTIN_SHARED - static + 1)


def test_host_inputs_sent_to_the_cuda_backend_get_host_results():
    """NumPy in, NumPy out (README: values come back in the inputs' framework),
    a 0-d result as a NumPy scalar; device inputs keep device results."""
    device, _ = fake_device()
    scalar = device.to_framework(FakeArray(np.float64(0.25)), np.zeros(3))
    assert isinstance(scalar, np.float64) and scalar == 0.25
    vector = device.to_framework(FakeArray(np.arange(3.0)), np.zeros(3))
    assert isinstance(vector, np.ndarray) and vector.tolist() == [0.0, 1.0, 2.0]
    assert device.to_framework(0.5, np.zeros(3)) == 0.5  # not a device array: as it is
