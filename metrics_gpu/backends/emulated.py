"""The ``emulated`` device: the ``.cu`` kernels compiled for the CPU.

The same sources the ``cuda`` backend gives NVRTC are compiled by the system
C++ compiler with ``kernels/emulation/cuda_emulation.h`` force-included, into
a shared library loaded with :mod:`ctypes`. Launches take NumPy arrays and
run with CUDA semantics (see the header): the shared launch code in
:mod:`metrics_gpu.backends.kernel_backend` (its launchers) cannot tell this device from a GPU.
It is a test device: slow, exact.

Libraries are built lazily, one per group of instantiations (for the
accumulation kernels, per ``y_true`` type), and cached under
``emulated`` of the kernel cache's root (:func:`metrics_gpu.backends.kernel_cache.cache_root`:
``$METRICS_GPU_CACHE_DIR``, else ``~/.cache/metrics-gpu``) by a hash of the
sources, the flags and the compiler; processes sharing the cache (pytest-xdist
workers) build each library once. ``METRICS_GPU_EMULATED_SANITIZE=address``
builds with AddressSanitizer (the process must preload libasan),
``METRICS_GPU_EMULATED_SANITIZE=thread`` with ThreadSanitizer (preload
libtsan; the emulation header then declares CUDA's orderings to it, so that a
race between the threads of a block is reported).
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from metrics_gpu.backends.kernel_sources import kernel_directory
from metrics_gpu.backends.kernel_cache import cache_root
from metrics_gpu.backends.launchers import KERNEL_MODULES
from metrics_gpu.backends.numpy_backend import HostArrays

EMULATION_HEADER = "emulation/cuda_emulation.h"
SANITIZE_VARIABLE = "METRICS_GPU_EMULATED_SANITIZE"
_ERROR_BUFFER_BYTES = 4096


class EmulatedKernelError(RuntimeError):
    """A kernel failed under emulation (deadlock, divergent warp, bad launch)."""


def find_compiler() -> str | None:
    """The C++ compiler the emulated backend uses: ``$CXX``, else ``c++``/``g++``/``clang++``."""
    for candidate in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


def _group_key(expression: str) -> str:
    # Instantiations are grouped by their first template argument (the y_true
    # type of the accumulation kernels), and by their last where it is a
    # number (the features of streaming_update's score instantiations), so a
    # test compiles only what it uses.
    match = re.match(r"[\w:]+<([^,>]+)", expression)
    if match is None:
        return "untyped"
    features = re.search(r",\s*(\d+)\s*>$", expression)
    return match.group(1).strip() + (f" {features.group(1)}" if features else "")


def _scalar_ctype(value):
    if isinstance(value, np.generic):
        return np.ctypeslib.as_ctypes_type(value.dtype)(value.item())
    raise TypeError(f"kernel argument of type {type(value).__name__} is not an exact NumPy scalar")


def _run(entry, grid: int, block: int, args, shared_bytes: int) -> None:
    """Call one exported instantiation with ``args`` (arrays, None, NumPy scalars)."""
    holders = []
    for value in args:
        if value is None:
            holders.append(ctypes.c_void_p(None))
        elif isinstance(value, np.ndarray):
            if not value.dtype.isnative:
                # A GPU never sees one (CuPy arrays are native): the launch
                # code must convert it, or the kernel reads swapped bytes.
                raise EmulatedKernelError(
                    f"kernel argument of dtype {value.dtype.str} is not in native byte order")
            holders.append(ctypes.c_void_p(value.ctypes.data))
        else:
            holders.append(_scalar_ctype(value))
    pointers = (ctypes.c_void_p * len(holders))(
        *[ctypes.cast(ctypes.pointer(h), ctypes.c_void_p) for h in holders]
    )
    error = ctypes.create_string_buffer(_ERROR_BUFFER_BYTES)
    status = entry(pointers, grid, block, shared_bytes, error, _ERROR_BUFFER_BYTES)
    if status != 0:
        raise EmulatedKernelError(error.value.decode(errors="replace"))


class _Library:
    """One compiled group: ``symbol`` per instantiation."""

    def __init__(self, path: Path, expressions: tuple[str, ...]):
        self.handle = ctypes.CDLL(str(path))
        self.entries = {}
        for index, expression in enumerate(expressions):
            function = getattr(self.handle, f"mg_emulated_{index}")
            function.restype = ctypes.c_int
            function.argtypes = [
                ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint, ctypes.c_uint,
                ctypes.c_ulonglong, ctypes.c_char_p, ctypes.c_ulonglong,
            ]
            self.entries[expression] = function


class EmulatedDevice(HostArrays):
    """Runs kernels from ``kernels/*.cu`` on NumPy arrays with CUDA semantics.

    Its arrays are the numpy backend's (:class:`~.numpy_backend.HostArrays`)."""

    name = "emulated"
    # A small device: few "SMs" keep grids (and fiber switches) small, while the
    # block shape and the shared-memory budget are a GPU's, so the launch code
    # takes the same decisions as on hardware.
    multiprocessor_count = 2
    shared_memory_per_block = 48 * 1024
    # No opt-in beyond the default (tests raise it to reach those paths), and
    # two default blocks per SM.
    shared_memory_per_block_optin = 48 * 1024
    shared_memory_per_multiprocessor = 96 * 1024
    # Two warps per block: every intrinsic still spans full warps and blocks
    # still have several warps, at a quarter of the threads of a GPU block.
    block_threads = 64

    def __init__(self) -> None:
        compiler = find_compiler()
        if compiler is None:
            raise FileNotFoundError("no C++ compiler found (set CXX, or install g++)")
        self.compiler = compiler
        self._libraries: dict[tuple[str, str], _Library] = {}
        self._lock = threading.Lock()
        self._modules = {m.source: m.name_expressions for m in KERNEL_MODULES}

    # -- arrays (asarray, zeros, clear, copy_into, to_host, to_framework: HostArrays)

    def data_pointer(self, array) -> int:
        return array.ctypes.data

    def tensor_bytes(self, tensor) -> np.ndarray:
        """A contiguous torch CPU tensor's memory as this device's array (a view)."""
        return tensor.numpy()

    def scalar(self, array):
        """A 0-d result as the caller's type: a Python int on the host devices."""
        return int(array)

    # -- kernels -------------------------------------------------------------

    def launch_stream(self, like):
        """No streams on the CPU: kernels run as they are launched."""
        return None

    def launch(self, source: str, expression: str, grid: int, block: int, args,
               shared_bytes: int = 0) -> None:
        _run(self._entry(source, expression), grid, block, args, shared_bytes)

    def build_module(self, source_text: str, expressions, *, os_threads: bool = False):
        """Compile ad-hoc CUDA source text; return ``launch(expression, grid, block, args,
        shared_bytes=0)``.

        For tests of the emulator itself and experiments: ``source_text`` is
        compiled like a file of ``kernels/`` (``#include "common.cuh"``
        works) and each of ``expressions`` (e.g. ``"probe<int>"``) is exported.
        Arguments and errors are those of :meth:`launch`. ``os_threads``:
        the block's threads are OS threads that run concurrently rather than
        fibers (``kernels/emulation/cuda_emulation.h``).
        """
        expressions = tuple(expressions)
        defines = ["-DMETRICS_GPU_EMULATED_OS_THREADS=1"] if os_threads else []
        library = _Library(self._build("adhoc", source_text, expressions, defines), expressions)

        def launch(expression: str, grid: int, block: int, args, shared_bytes: int = 0) -> None:
            try:
                entry = library.entries[expression]
            except KeyError:
                raise KeyError(f"{expression} was not built by this module") from None
            _run(entry, grid, block, args, shared_bytes)

        return launch

    def _entry(self, source: str, expression: str):
        key = (source, _group_key(expression))
        library = self._libraries.get(key)
        if library is None:
            with self._lock:
                library = self._libraries.get(key)
                if library is None:
                    group = tuple(e for e in self._modules[source] if _group_key(e) == key[1])
                    library = _Library(
                        self._build(Path(source).stem, f'#include "{source}"', group), group)
                    self._libraries[key] = library
        try:
            return library.entries[expression]
        except KeyError:
            raise KeyError(f"{expression} is not listed for {source} in KERNEL_MODULES "
                           "(the MODULE of its launcher module)") from None

    def _build(self, name: str, text: str, expressions: tuple[str, ...],
               defines: Sequence[str] = ()) -> Path:
        """Compile the unit ``text`` plus one exported entry per expression."""
        directory = kernel_directory()
        sanitize = os.environ.get(SANITIZE_VARIABLE, "").strip()
        flags = ["-std=c++17", "-O1", "-shared", "-fPIC", "-pthread", "-w", "-ffp-contract=off",
                 "-DMETRICS_GPU_EMULATED", *defines, "-include", str(directory / EMULATION_HEADER),
                 f"-I{directory}"]
        if sanitize:
            # -g1: the line tables a report's stack needs, without the
            # variables' debug information, which took a third of the build
            # (confusion.cu's 80 int instantiations: 15.9 s with -g, 9.7 s).
            flags += [f"-fsanitize={sanitize}", "-fno-omit-frame-pointer", "-g1"]
        unit = [text]
        unit += [f"METRICS_GPU_EMULATED_ENTRY(mg_emulated_{i}, {e})"
                 for i, e in enumerate(expressions)]
        unit_text = "\n".join(unit) + "\n"
        digest = hashlib.sha256()
        for part in (unit_text, " ".join(flags), self._compiler_version,
                     (directory / EMULATION_HEADER).read_text(),
                     *(p.read_text() for p in sorted(directory.glob("*.cu*")))):
            digest.update(part.encode())
        target = cache_root() / "emulated" / f"{name}-{digest.hexdigest()[:20]}.so"
        if target.is_file():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        # One builder per library: others wait for it instead of compiling the same unit.
        with open(target.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not target.is_file():
                self._compile(name, flags, unit_text, target)
        return target

    def _compile(self, name: str, flags: list[str], unit_text: str, target: Path) -> None:
        with tempfile.TemporaryDirectory() as scratch:
            unit_path = Path(scratch) / "unit.cpp"
            unit_path.write_text(unit_text)
            built = Path(scratch) / "kernels.so"
            result = subprocess.run(
                [self.compiler, *flags, str(unit_path), "-o", str(built)],
                capture_output=True, text=True,
            )
            if result.returncode != 0:
                raise EmulatedKernelError(
                    f"compiling {name} for the emulated backend failed:\n{result.stderr}"
                )
            # A staging name of its own per builder (processes and threads of
            # one process alike), then an atomic rename: concurrent builders
            # of one library never see half a file, nor move each other's.
            handle, staged = tempfile.mkstemp(prefix=target.name, suffix=".tmp",
                                              dir=target.parent)
            os.close(handle)
            try:
                shutil.copyfile(built, staged)
                os.replace(staged, target)
            except BaseException:
                Path(staged).unlink(missing_ok=True)
                raise

    @functools.cached_property
    def _compiler_version(self) -> str:
        result = subprocess.run([self.compiler, "--version"], capture_output=True, text=True)
        return result.stdout
