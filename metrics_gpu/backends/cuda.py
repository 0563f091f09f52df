"""The ``cuda`` device: CuPy arrays and the raw kernels of ``kernels/*.cu``.

Each kernel instantiation is compiled on first use by NVRTC with exactly
:data:`~metrics_gpu.backends.kernel_sources.NVRTC_OPTIONS` (``cupy.cuda.compiler.compile_using_nvrtc``;
``cupy.RawModule`` would append ``-ftz=true``), kept on disk for the next
process (:mod:`metrics_gpu.backends.kernel_cache`; ``metrics-gpu warmup`` fills it)
and memoised per GPU in a thread-safe table. Launches go to CuPy's current stream on the GPU that
holds the data. Importing this module imports CuPy; ``metrics_gpu`` imports
it only when the ``cuda`` backend is asked for.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from metrics_gpu.backends.arrays import is_device_array
from metrics_gpu.backends.kernel_cache import KernelCache
from metrics_gpu.backends.kernel_sources import (
    NVRTC_OPTIONS,
    kernel_directory,
    kernel_source,
    kernel_sources_digest,
)
from metrics_gpu.backends.numpy_backend import host_framework


def cuda_unavailable_reason() -> str | None:
    """Why the cuda backend cannot run here, or None when it can."""
    try:
        import cupy
    except Exception as error:  # a broken CuPy install is as good as none
        return f"CuPy does not import ({error})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:
        return f"no usable NVIDIA GPU or driver ({error})"
    if count == 0:
        return "no NVIDIA GPU found"
    return None


def nvrtc_options() -> tuple[str, ...]:
    """What NVRTC is given: the project's options and the kernels' include path."""
    return (*NVRTC_OPTIONS, f"--include-path={kernel_directory()}")


def kernel_cache_key(cupy, source: str, expression: str, architecture: str) -> dict[str, str]:
    """Everything a compiled instantiation depends on (metrics_gpu.backends.kernel_cache).

    The NVRTC version is read on a hit too, which loads libnvrtc in a process
    that compiles nothing (about 10 ms): CuPy finds NVRTC by its soname (a pip
    nvidia-cuda-nvrtc wheel, conda, CUDA_PATH, LD_LIBRARY_PATH), so neither
    CuPy's version nor the driver's says which one it is, and a key without it
    would keep serving another NVRTC's binaries after an upgrade. CuPy's own
    kernel cache does the same (and compiles an empty file) at its first
    kernel of a process.
    """
    try:
        nvrtc_version = ".".join(map(str, cupy.cuda.nvrtc.getVersion()))
    except Exception:  # noqa: BLE001 - an unknown version keys entries of its own
        nvrtc_version = "unknown"
    return {"sources": kernel_sources_digest(), "source": source, "expression": expression,
            "options": " ".join(NVRTC_OPTIONS), "architecture": architecture,
            "nvrtc": nvrtc_version, "cupy": str(getattr(cupy, "__version__", "unknown"))}


def compiled_instantiation(cupy, cache: KernelCache, source: str, expression: str,
                           architecture: str) -> tuple[bytes, str]:
    """``(binary, lowered name)`` of one instantiation for ``architecture``
    (the current GPU's, which NVRTC targets), from ``cache`` or compiled into it."""
    def compile_it() -> tuple[bytes, dict]:
        binary, lowered_names = cupy.cuda.compiler.compile_using_nvrtc(
            kernel_source(source), options=nvrtc_options(), filename=f"{source}.cu",
            name_expressions=[expression])
        return bytes(binary), {"lowered_name": lowered_names[expression]}

    binary, header = cache.get_or_compile(
        kernel_cache_key(cupy, source, expression, architecture), compile_it)
    return binary, header["lowered_name"]


@dataclass
class _Kernel:
    """A compiled instantiation and its shared-memory limits on its GPU."""

    function: Any                 # cupy.cuda.function.Function
    static_shared_bytes: int      # its __shared__ arrays
    dynamic_shared_limit: int     # the most dynamic shared memory a launch may ask


_NULL_POINTER = np.uint64(0)


class _OnStream:
    """Context of :meth:`CudaDevice.stream_of` for a torch tensor: its GPU
    (None: the current one already) and the CuPy stream over torch's."""

    __slots__ = ("device", "stream")

    def __init__(self, device, stream) -> None:
        self.device, self.stream = device, stream

    def __enter__(self):
        device = self.device
        if device is not None:
            device.__enter__()
        try:
            self.stream.__enter__()
        except BaseException:
            if device is not None:
                device.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.stream.__exit__(*exc)
        finally:
            if self.device is not None:
                self.device.__exit__(*exc)


class CudaDevice:
    """Allocates, converts and launches on the current (or the data's) GPU."""

    name = "cuda"
    # 8 warps per block: enough to hide memory latency, and 8 such blocks
    # fill an SM's 2048 threads on every supported architecture.
    block_threads = 256

    def __init__(self) -> None:
        import cupy
        import cupy.cuda.compiler  # noqa: F401  (the submodules _compile uses)
        import cupy.cuda.function  # noqa: F401

        self.cupy = cupy
        self.xp = cupy
        self._kernels: dict[tuple[int, str, str], _Kernel] = {}
        self.kernel_cache = KernelCache.default("cuda")
        # (torch stream handle, device) -> the CuPy stream over it (launch_stream, stream_of)
        self._streams: dict[tuple, Any] = {}
        # torch's current raw stream of a device index (_stream_over)
        self._raw_stream: Callable[[int], int] | None = None
        self._lock = threading.Lock()
        self._attributes: dict[int, dict] = {}

    # -- device properties (of the current device) ---------------------------

    def _current_attributes(self) -> dict:
        device_id = self.cupy.cuda.runtime.getDevice()
        attributes = self._attributes.get(device_id)
        if attributes is None:
            attributes = self._attributes[device_id] = self.cupy.cuda.Device(device_id).attributes
        return attributes

    @property
    def multiprocessor_count(self) -> int:
        return int(self._current_attributes()["MultiProcessorCount"])

    @property
    def shared_memory_per_block(self) -> int:
        # The default dynamic budget (no opt-in attribute set): 48 KiB.
        return int(self._current_attributes()["MaxSharedMemoryPerBlock"])

    @property
    def shared_memory_per_block_optin(self) -> int:
        # What a kernel may use once it opts in (launch sets the attribute):
        # 227 KiB on an H100, 163 KiB on an A100.
        return int(self._current_attributes()["MaxSharedMemoryPerBlockOptin"])

    @property
    def shared_memory_per_multiprocessor(self) -> int:
        # 228 KiB on an H100: how many blocks of a given size an SM holds.
        return int(self._current_attributes()["MaxSharedMemoryPerMultiprocessor"])

    # -- arrays --------------------------------------------------------------

    def asarray(self, array, dtype=None):
        """CuPy view of a device array (zero-copy through DLPack); host data is copied."""
        cupy = self.cupy
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(array, torch.Tensor) and array.is_cuda:
            if array.dtype == torch.bfloat16:
                # CuPy has no bfloat16 dtype: widened to float32 (one pass).
                array = array.float()
            array = cupy.from_dlpack(array.detach())
        elif not isinstance(array, cupy.ndarray) and hasattr(array, "__dlpack__") and not isinstance(
                array, np.ndarray):
            array = cupy.from_dlpack(array)
        return cupy.asarray(array, dtype=dtype)

    def to_host(self, array):
        """Copy to a NumPy array (synchronises with the device)."""
        if isinstance(array, self.cupy.ndarray):
            return array.get()
        return np.asarray(array)

    def to_framework(self, value, like):
        """``value`` (a CuPy array) as the framework of ``like``: a torch tensor
        for a torch tensor, a JAX array for a JAX array, else CuPy. Zero-copy
        (DLPack), on the same device, no sync. Host data sent to this backend
        (NumPy, torch CPU tensors: ``like`` not on a GPU) gets host results, as
        the host backends give them: one copy back (a sync), a 0-d value as a
        NumPy scalar. A view whose strides run backwards (a curve's reversed
        scan) is copied first (on the device, no sync): torch shares no such
        buffer."""
        if not isinstance(value, self.cupy.ndarray):
            return value
        if like is not None and not is_device_array(like):
            host = value.get()
            return host_framework(host[()] if host.ndim == 0 else host, like)
        torch = sys.modules.get("torch")
        jax = sys.modules.get("jax")
        shared = (torch is not None and isinstance(like, torch.Tensor)) or (
            jax is not None and isinstance(like, jax.Array))
        if shared and any(stride < 0 for stride in value.strides):
            value = self.cupy.ascontiguousarray(value)
        if torch is not None and isinstance(like, torch.Tensor):
            return torch.from_dlpack(value)
        if jax is not None and isinstance(like, jax.Array):
            return jax.numpy.from_dlpack(value)
        return value

    def stream_of(self, like):
        """Context: the caller's device, and for a torch tensor torch's current
        stream on it (as a CuPy stream, :meth:`_stream_over`), so that every
        launch and CuPy operation is ordered with the training loop's own work."""
        cupy = self.cupy
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(like, torch.Tensor) and like.is_cuda:
            index = like.get_device()
            # A Device context only to switch GPUs: CuPy's keeps its stack on
            # the object, so each call makes its own.
            device = None if cupy.cuda.runtime.getDevice() == index else cupy.cuda.Device(index)
            return _OnStream(device, self._stream_over(torch, index))
        if isinstance(like, cupy.ndarray):
            return like.device
        return contextlib.nullcontext()

    def _stream_over(self, torch, index: int):
        """The CuPy stream over torch's current stream on GPU ``index``, kept
        per stream handle: torch's raw current stream is one C call (its
        ``current_stream()`` builds a Stream object through eight Python
        calls), and the CuPy object is made once per stream. CuPy keeps the
        stack of entered streams per thread, so one object serves every thread."""
        raw_stream = self._raw_stream
        if raw_stream is None:
            raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
                lambda index: torch.cuda.current_stream(index).cuda_stream)
            self._raw_stream = raw_stream
        key = (raw_stream(index), index)  # every device's default stream is handle 0
        found = self._streams.get(key)
        if found is None:
            found = self._streams[key] = self._external_stream(torch.cuda.current_stream(index),
                                                               index)
        return found

    def _external_stream(self, stream, index):
        """torch's stream as a CuPy stream: ``Stream.from_external`` (the CUDA
        stream protocol) where CuPy has it (14+, which deprecates
        ``ExternalStream``), else ``ExternalStream``."""
        cupy = self.cupy
        from_external = getattr(cupy.cuda.Stream, "from_external", None)
        if from_external is not None and hasattr(stream, "__cuda_stream__"):
            return from_external(stream)
        return cupy.cuda.ExternalStream(stream.cuda_stream, index)

    def zeros(self, shape, dtype):
        return self.cupy.zeros(shape, dtype=dtype)

    def data_pointer(self, array) -> int:
        return array.data.ptr

    def tensor_bytes(self, tensor):
        """A contiguous torch CUDA tensor's memory as uint8 CuPy array (a view
        that keeps the tensor alive): three C calls, where DLPack through
        torch's ``__dlpack__`` makes about forty Python ones."""
        cupy = self.cupy
        memory = cupy.cuda.UnownedMemory(tensor.data_ptr(), tensor.nbytes, tensor,
                                         tensor.get_device())
        return cupy.ndarray((tensor.nbytes,), np.uint8, cupy.cuda.MemoryPointer(memory, 0))

    def clear(self, array) -> None:
        """Zero in place: cudaMemsetAsync on the current stream (no kernel)."""
        array.data.memset_async(0, array.nbytes)

    def copy_into(self, target, source) -> None:
        """cudaMemcpyAsync of a contiguous array of the same size (no kernel)."""
        target.data.copy_from_device_async(source.data, source.nbytes)

    def scalar(self, array):
        """A 0-d result stays on the device (no sync)."""
        return array

    # -- kernels -------------------------------------------------------------

    def _kernel(self, source: str, expression: str) -> _Kernel:
        device_id = self.cupy.cuda.runtime.getDevice()
        key = (device_id, source, expression)
        kernel = self._kernels.get(key)
        if kernel is None:
            with self._lock:
                kernel = self._kernels.get(key)
                if kernel is None:
                    kernel = self._kernels[key] = self._compile(source, expression)
        return kernel

    def _compile(self, source: str, expression: str) -> _Kernel:
        """One instantiation for the current GPU with NVRTC_OPTIONS alone, from
        the on-disk kernel cache when a process compiled it before."""
        cupy = self.cupy
        device_id = cupy.cuda.runtime.getDevice()
        architecture = str(cupy.cuda.Device(device_id).compute_capability)
        binary, lowered_name = compiled_instantiation(cupy, self.kernel_cache, source,
                                                      expression, architecture)
        module = cupy.cuda.function.Module()
        module.load(binary)
        function = module.get_function(lowered_name)  # keeps module loaded
        driver = cupy.cuda.driver
        return _Kernel(
            function,
            static_shared_bytes=driver.funcGetAttribute(
                driver.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function.ptr),
            dynamic_shared_limit=driver.funcGetAttribute(
                driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, function.ptr),
        )

    def launch_stream(self, like):
        """The CuPy stream of the caller's torch stream for ``like`` (a torch
        CUDA tensor; :meth:`_stream_over`); None for anything else (CuPy's
        current stream)."""
        torch = sys.modules.get("torch")
        if torch is None or not isinstance(like, torch.Tensor):
            return None
        index = like.get_device()
        return None if index < 0 else self._stream_over(torch, index)

    def launch(self, source: str, expression: str, grid: int, block: int, args,
               shared_bytes: int = 0, stream=None) -> None:
        """Launch on the GPU of the first CuPy array among ``args`` (else the
        current one); None arguments are null pointers. One plain loop over
        the arguments (no generators): a plan's launches run it on every batch."""
        ndarray = self.cupy.ndarray
        device = None
        packed = list(args)
        for position, arg in enumerate(packed):
            if arg is None:
                packed[position] = _NULL_POINTER
            elif device is None and isinstance(arg, ndarray):
                device = arg.device
        if device is None:
            self._issue(source, expression, grid, block, tuple(packed), shared_bytes, stream)
            return
        with device:
            self._issue(source, expression, grid, block, tuple(packed), shared_bytes, stream)

    def _issue(self, source: str, expression: str, grid: int, block: int, packed: tuple,
               shared_bytes: int, stream) -> None:
        kernel = self._kernel(source, expression)
        if shared_bytes > kernel.dynamic_shared_limit:
            # A block gets 48 KiB of shared memory, static and dynamic
            # together, unless its kernel opts in to more (up to the
            # device's opt-in limit; the host sizes what it asks for).
            self._opt_in(kernel, expression, shared_bytes)
        if stream is None:
            kernel.function((grid,), (block,), packed, shared_mem=shared_bytes)
        else:
            kernel.function((grid,), (block,), packed, shared_mem=shared_bytes, stream=stream)

    def _opt_in(self, kernel: _Kernel, expression: str, shared_bytes: int) -> None:
        total = kernel.static_shared_bytes + shared_bytes
        if total > self.shared_memory_per_block_optin:
            raise RuntimeError(
                f"{expression}: {shared_bytes} bytes of dynamic shared memory and "
                f"{kernel.static_shared_bytes} static exceed this GPU's "
                f"{self.shared_memory_per_block_optin} per block (a metrics_gpu bug: "
                "the host sizes its launches within that limit)")
        driver = self.cupy.cuda.driver
        with self._lock:
            if shared_bytes > kernel.dynamic_shared_limit:
                driver.funcSetAttribute(kernel.function.ptr,
                                        driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        shared_bytes)
                kernel.dynamic_shared_limit = shared_bytes

