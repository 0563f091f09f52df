"""A stand-in for CuPy on the CPU: the ``cuda`` backend's host code, run whole
in a process without a GPU (tests/test_first_call.py).

:func:`install` puts modules named ``cupy``, ``cupy.cuda``,
``cupy.cuda.compiler`` and ``cupy.cuda.function`` in ``sys.modules`` (importing
this module changes nothing). Its arrays are NumPy arrays held in a wrapper
that behaves as a CuPy array where the backend can tell: no implicit
conversion to NumPy, ``get()``, ``data.ptr``, ``device``, 0-d arrays out of
reductions. A kernel compiled through
``cupy.cuda.compiler.compile_using_nvrtc`` and loaded with
``cupy.cuda.function.Module`` runs, when launched, as the emulated backend's
build of the same instantiation, on the arrays' memory: the counts are real.

What it copies from CuPy 14 is what a first call pays for:

* ``import cupy`` leaves a lazily loaded ``cupyx`` in ``sys.modules``
  (``cupy.random._generator`` registers it so); the first attribute read of
  it loads it, and loading it imports ``scipy.sparse`` (``cupyx.linalg.sparse``
  imports ``cupyx.scipy.sparse``, which imports scipy's): 0.33 s of a first
  ``accuracy_score`` on an H100 (bench/results/2026-11-27-nvidia-h100-profile-882fda6.md);
* NumPy handing a CuPy array to its ``__array_ufunc__`` imports
  ``cupyx.scipy.special`` first, and so loads ``cupyx``. That is not only a
  NumPy ufunc called on a CuPy array, or a NumPy scalar on the left of an
  operator: CuPy's forward operators and comparisons hand an operand that is
  not a CuPy array to NumPy (``a > 0`` is ``numpy.greater(a, 0)``:
  ``__richcmp__`` and ``__add__`` of cupy/_core/core.pyx). CuPy 14.2,
  imported on a machine without a GPU, loads cupyx at ``a > 0`` before it
  reaches the driver; the H100 profile puts the load in
  ``accumulate_confusion``, whose ``matrix.sum(axis=0) > 0`` it was.
  ``cupy.get_array_module`` loads it too;
* every operation for which CuPy compiles (or loads from its own cache) a
  kernel of its own (operators, ufuncs, reductions, ``astype``) is listed in
  :data:`operations`: their first use in a process runs NVRTC on an empty
  file (CuPy's compiler check) and loads each module.

Modules the stand-in imports for itself (the emulated backend that runs the
kernels, and what NumPy imports while it does CuPy's work) are listed in
:data:`own_modules`, so that a test counting a call's imports can leave them
out.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import sys
import threading
import traceback
import types

import numpy as np

VERSION = "14.stand-in"
# What the device reports (cudaDeviceProp names); an SM count and a shared
# memory budget of the emulated device's size, so grids stay small on a CPU.
DEVICE_ATTRIBUTES = {"MultiProcessorCount": 2, "MaxSharedMemoryPerBlock": 48 * 1024,
                     "MaxSharedMemoryPerBlockOptin": 48 * 1024,
                     "MaxSharedMemoryPerMultiprocessor": 96 * 1024}
SHARED_SIZE_BYTES, MAX_DYNAMIC_SHARED_SIZE_BYTES = 1, 8  # CUfunction_attribute values
BINARY_PREFIX = b"stand-in cubin\n"

# CuPy's own kernels run (name of the operation), kernels compiled through
# compile_using_nvrtc, kernels launched, and the modules the stand-in loaded.
operations: list[str] = []
compiled: list[str] = []
launched: list[str] = []
own_modules: set[str] = set()
# Where the lazy cupyx was first loaded from (file:line function, outermost first).
cupyx_loaded_by: list[str] = []

_inside = threading.local()  # depth of stand-in operations on this thread
_emulated_device = None


@contextlib.contextmanager
def _operation(name: str | None):
    """An operation of the stand-in: NumPy calls inside it are CuPy's own work,
    not NumPy reaching a CuPy array from outside, and the modules they import
    are the stand-in's (NumPy's ``unique`` reads ``numpy.ma``; CuPy's does not).
    ``name``: a kernel CuPy runs."""
    depth = getattr(_inside, "depth", 0)
    if name is not None and depth == 0:
        operations.append(name)
    before = set(sys.modules) if depth == 0 else None
    _inside.depth = depth + 1
    try:
        yield
    finally:
        _inside.depth = depth
        if before is not None and len(sys.modules) != len(before):
            own_modules.update(set(sys.modules) - before)


def _load_cupyx() -> None:
    """What CuPy's ``__array_ufunc__`` and ``get_array_module`` do first:
    ``import cupyx.scipy.special``, which loads the lazy ``cupyx``. The first
    time, the caller's frames are kept in :data:`cupyx_loaded_by`."""
    module = sys.modules.get("cupyx")
    if module is None:
        return
    if type(module) is importlib.util._LazyModule and not cupyx_loaded_by:  # type: ignore[attr-defined]
        cupyx_loaded_by.extend(f"{frame.filename}:{frame.lineno} {frame.name}"
                               for frame in traceback.extract_stack()[:-2])
    module.__name__  # noqa: B018 - the attribute read that loads a lazy module


def _unwrap(value):
    if isinstance(value, ndarray):
        return value._host
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v) for v in value)
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    return value


def _wrap(value):
    """NumPy results as CuPy's: arrays and NumPy scalars (0-d arrays in CuPy)."""
    if isinstance(value, np.ndarray):
        return ndarray._of(value)
    if isinstance(value, np.generic):
        return ndarray._of(np.asarray(value))
    if isinstance(value, tuple):
        return tuple(_wrap(v) for v in value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


# Methods of an array that CuPy runs as kernels of its own; the others
# (view, reshape, ravel of a contiguous array, transpose, item, ...) are not.
_KERNEL_METHODS = frozenset({
    "all", "any", "argmax", "argmin", "astype", "clip", "copy", "cumprod", "cumsum", "dot",
    "fill", "max", "mean", "min", "nonzero", "prod", "round", "sort", "std", "sum", "take",
    "var"})


class _Memory:
    """``ndarray.data``: the pointer, and the memset and copy the device issues."""

    device_id = 0

    def __init__(self, host: np.ndarray) -> None:
        self._host = host
        self.ptr = host.ctypes.data

    def memset_async(self, value: int, size: int) -> None:
        ctypes.memset(self.ptr, value, size)

    def copy_from_device_async(self, source: _Memory, size: int) -> None:
        ctypes.memmove(self.ptr, source.ptr, size)


class _Synchronous:
    """A context that changes nothing and a synchronize that waits for
    nothing: the stand-in's kernels have run when their launch returns."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False

    def synchronize(self) -> None:
        pass


class Device(_Synchronous):
    """``cupy.cuda.Device``: one GPU, of compute capability 9.0."""

    compute_capability = "90"

    def __init__(self, device: int = 0) -> None:
        self.id = device
        self.attributes = dict(DEVICE_ATTRIBUTES)


class ndarray:  # noqa: N801 - CuPy's name
    """A CuPy array as far as the backend can tell, over a NumPy array."""

    __module__ = "cupy"  # as CuPy's type says
    __array_priority__ = 100

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C") -> None:
        if memptr is not None:
            raise NotImplementedError("the stand-in makes arrays over its own memory only")
        self._host = np.zeros(shape, dtype=dtype, order=order)

    @classmethod
    def _of(cls, host: np.ndarray) -> ndarray:
        array = cls.__new__(cls)
        array._host = host
        return array

    # -- what CuPy has and NumPy has not ---------------------------------------

    def get(self, stream=None, order="C", out=None) -> np.ndarray:
        """A host copy (a device-to-host copy and a sync on a GPU)."""
        return np.array(self._host, order=order)

    @property
    def data(self) -> _Memory:
        return _Memory(self._host)

    @property
    def device(self) -> Device:
        return Device(0)

    def __array__(self, *args, **kwargs):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. "
                        "Please use `.get()` to construct a NumPy array explicitly.")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if getattr(_inside, "depth", 0) == 0:
            _load_cupyx()
        with _operation(f"numpy {ufunc.__name__}.{method}"):
            return _wrap(getattr(ufunc, method)(*_unwrap(inputs), **_unwrap(kwargs)))

    def __array_function__(self, func, types, args, kwargs):
        # CuPy runs its own function of the same name (no cupyx).
        with _operation(None if func.__name__ in _NO_KERNEL else f"numpy {func.__name__}"):
            return _wrap(func(*_unwrap(args), **_unwrap(kwargs)))

    # -- NumPy's attributes and methods, on the device ---------------------------

    shape = property(lambda self: self._host.shape)
    dtype = property(lambda self: self._host.dtype)
    ndim = property(lambda self: self._host.ndim)
    size = property(lambda self: self._host.size)
    nbytes = property(lambda self: self._host.nbytes)
    itemsize = property(lambda self: self._host.itemsize)
    strides = property(lambda self: self._host.strides)
    flags = property(lambda self: self._host.flags)
    T = property(lambda self: ndarray._of(self._host.T))

    def __getattr__(self, name: str):
        if name == "_host":  # not set yet (copy and pickle make the object first)
            raise AttributeError(name)
        attribute = getattr(self._host, name)
        if not callable(attribute):
            return _wrap(attribute)
        kernel = name if name in _KERNEL_METHODS else None

        def method(*args, **kwargs):
            with _operation(kernel and f"ndarray.{kernel}"):
                return _wrap(attribute(*_unwrap(args), **_unwrap(kwargs)))

        return method

    def __getitem__(self, key):
        return _wrap(self._host[_unwrap(key)])

    def __setitem__(self, key, value) -> None:
        with _operation("ndarray.__setitem__"):
            self._host[_unwrap(key)] = _unwrap(value)

    def __len__(self) -> int:
        return len(self._host)

    def __iter__(self):
        return (ndarray._of(np.asarray(row)) for row in self._host)

    def __bool__(self) -> bool:
        return bool(self._host)

    def __int__(self) -> int:
        return int(self._host)

    def __float__(self) -> float:
        return float(self._host)

    def __repr__(self) -> str:
        return f"stand-in cupy {self._host!r}"


def _operator(name: str):
    # CuPy's forward binary operators and comparisons hand any operand that is
    # not a CuPy array (a Python or NumPy scalar) to NumPy's ufunc
    # (`a > 0` is numpy.greater(a, 0)), which calls __array_ufunc__;
    # reflected arithmetic (`2.0 * a` is a.__rmul__(2.0)), in-place and unary
    # operators run CuPy's ufunc directly. A comparison has no reflected form:
    # `0 < a` is a.__gt__(0), through NumPy as `a > 0`.
    reflected = name.startswith("__r") and name != "__rshift__"
    through_numpy = not (reflected or name.startswith("__i")) and name not in _UNARY

    def apply(self, *others):
        if through_numpy and not all(isinstance(o, ndarray) for o in others) \
                and getattr(_inside, "depth", 0) == 0:
            _load_cupyx()
        with _operation(f"ndarray.{name}"):
            result = getattr(self._host, name)(*_unwrap(others))
        if result is NotImplemented:
            return result
        if name.startswith("__i"):  # in place: the array itself
            return self
        return _wrap(result)

    apply.__name__ = name
    return apply


_UNARY = frozenset({"__neg__", "__pos__", "__abs__", "__invert__"})
for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
              "lshift", "rshift", "matmul"):
    for _form in ("__{}__", "__r{}__", "__i{}__"):
        setattr(ndarray, _form.format(_name), _operator(_form.format(_name)))
for _name in ("lt", "le", "gt", "ge", "eq", "ne", "neg", "pos", "abs", "invert"):
    setattr(ndarray, f"__{_name}__", _operator(f"__{_name}__"))
ndarray.__hash__ = None  # type: ignore[assignment]  # as NumPy's and CuPy's arrays


# -- the namespace ----------------------------------------------------------------------


def asarray(array, dtype=None, order=None, *, blocking=False):
    """A device array: host data copied, a device array kept (cast if asked)."""
    if isinstance(array, ndarray):
        if dtype is None or np.dtype(dtype) == array.dtype:
            return array
        return array.astype(dtype)
    if hasattr(array, "__cuda_array_interface__") or (
            hasattr(array, "__dlpack_device__") and not isinstance(array, np.ndarray)):
        raise NotImplementedError("the stand-in takes host data and its own arrays")
    return ndarray._of(np.array(array, dtype=dtype, order=order or "K", copy=True))


def ascontiguousarray(array, dtype=None):
    array = asarray(array, dtype)
    if array._host.flags.c_contiguous:
        return array
    with _operation("ascontiguousarray"):
        return ndarray._of(np.ascontiguousarray(array._host))


def zeros(shape, dtype=float, order="C"):
    # CuPy allocates and memsets: no kernel.
    return ndarray._of(np.zeros(shape, dtype=dtype, order=order))


def empty(shape, dtype=float, order="C"):
    return ndarray._of(np.empty(shape, dtype=dtype, order=order))


def get_array_module(*args):
    _load_cupyx()  # CuPy's imports cupyx first
    return sys.modules["cupy"] if any(isinstance(a, ndarray) for a in args) else np


def from_dlpack(array):
    raise NotImplementedError("the stand-in takes host data and its own arrays")


# NumPy functions that run no kernel in CuPy (they read dtypes and shapes).
_NO_KERNEL = frozenset({"dtype", "iinfo", "finfo", "result_type", "can_cast", "promote_types",
                        "issubdtype", "isscalar", "ndim", "shape"})


def _namespace_attribute(name: str):
    """``cupy.<name>`` for what the stand-in does not define: NumPy's, on the device."""
    attribute = getattr(np, name)
    if isinstance(attribute, type) or not callable(attribute):
        return attribute  # dtypes, scalar types, constants
    kernel = None if name in _NO_KERNEL else name

    def function(*args, **kwargs):
        with _operation(kernel):
            return _wrap(attribute(*_unwrap(args), **_unwrap(kwargs)))

    function.__name__ = name
    return function


# -- kernels: compiled through "NVRTC", launched on the emulated device --------------------


def compile_using_nvrtc(source, options=(), arch=None, filename="kern.cu",
                        name_expressions=None, log_stream=None, cache_in_memory=False,
                        jitify=False):
    """A "binary" naming the source file; lowered names as NVRTC's stand in
    for the instantiations. (The device names the unit ``<source>.cu``, its
    source being ``confusion.cu`` and the like.)"""
    source_file = filename[:-len(".cu")] if filename.endswith(".cu.cu") else filename
    expressions = list(name_expressions or ())
    compiled.extend(expressions)
    binary = BINARY_PREFIX + json.dumps({"source": source_file, "options": list(options)}).encode()
    return binary, {expression: f"_stand_in_{expression}" for expression in expressions}


class Function:
    """One instantiation, launched as the emulated backend's build of it."""

    ptr = 0x5EED

    def __init__(self, source: str, expression: str) -> None:
        self.source, self.expression = source, expression
        self.attributes = {SHARED_SIZE_BYTES: 0,
                           MAX_DYNAMIC_SHARED_SIZE_BYTES: DEVICE_ATTRIBUTES["MaxSharedMemoryPerBlock"]}

    def __call__(self, grid, block, args, shared_mem=0, stream=None) -> None:
        launched.append(self.expression)
        host_args = [a._host if isinstance(a, ndarray) else a for a in args]
        _emulated().launch(self.source, self.expression, int(grid[0]), int(block[0]),
                           host_args, int(shared_mem))


class Module:
    """``cupy.cuda.function.Module``: ``load`` a binary, ``get_function``."""

    def __init__(self) -> None:
        self.source: str | None = None

    def load(self, binary: bytes) -> None:
        if not bytes(binary).startswith(BINARY_PREFIX):
            raise ValueError("not a binary of the stand-in's compile_using_nvrtc")
        self.source = json.loads(bytes(binary)[len(BINARY_PREFIX):])["source"]

    def get_function(self, name: str) -> Function:
        assert self.source is not None and name.startswith("_stand_in_"), name
        return Function(self.source, name[len("_stand_in_"):])


def _emulated():
    """The emulated device that runs the kernels; the modules it imports are
    the stand-in's own (:data:`own_modules`)."""
    global _emulated_device
    if _emulated_device is None:
        before = set(sys.modules)
        from metrics_gpu.backends.emulated import EmulatedDevice

        _emulated_device = EmulatedDevice()
        np.ctypeslib.as_ctypes_type  # noqa: B018 - loaded by the emulated launches
        own_modules.update(set(sys.modules) - before)
    return _emulated_device


def _function_attribute(attribute: int, pointer: int) -> int:
    return Function("", "").attributes[attribute]


def _set_function_attribute(pointer: int, attribute: int, value: int) -> None:
    raise NotImplementedError("the stand-in's kernels take the default shared memory only")


class Stream(_Synchronous):
    """``cupy.cuda.Stream``: kernels run as they are launched on the CPU."""

    def __init__(self, *args, **kwargs) -> None:
        self.ptr = 0


# -- the lazy cupyx ---------------------------------------------------------------------


class _CupyxLoader(importlib.abc.Loader):
    """Runs the stand-in ``cupyx``: as CuPy's, it imports scipy.sparse."""

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        try:
            import scipy.sparse  # noqa: F401 - what loading CuPy's cupyx costs
        except ImportError:
            pass


def _lazy_cupyx() -> types.ModuleType:
    """``cupyx`` as ``cupy.random._generator`` registers it: a lazy module."""
    loader = importlib.util.LazyLoader(_CupyxLoader())
    spec = importlib.machinery.ModuleSpec("cupyx", loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules["cupyx"] = module
    loader.exec_module(module)
    return module


def cupyx_loaded() -> bool:
    """Whether the lazy ``cupyx`` has been loaded (by :func:`_load_cupyx`)."""
    lazy = importlib.util._LazyModule  # type: ignore[attr-defined]
    module = sys.modules.get("cupyx")
    return module is not None and type(module) is not lazy


def reset_cupyx() -> None:
    """A lazy ``cupyx`` again, and :data:`cupyx_loaded_by` emptied: the next
    load is seen, and where, as the first was (a test of many first calls in
    one process names each call that loads it; scipy.sparse stays imported)."""
    cupyx_loaded_by.clear()
    _lazy_cupyx()


# -- install ----------------------------------------------------------------------------


def _module(name: str, **attributes) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
    module.__dict__.update(attributes)
    sys.modules[name] = module
    return module


def install() -> types.ModuleType:
    """Put the stand-in in ``sys.modules`` as ``cupy`` (and its submodules,
    and a lazy ``cupyx``); returns the ``cupy`` module."""
    driver = _module(
        "cupy.cuda.driver", CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES=SHARED_SIZE_BYTES,
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES=MAX_DYNAMIC_SHARED_SIZE_BYTES,
        funcGetAttribute=_function_attribute, funcSetAttribute=_set_function_attribute)
    runtime = _module("cupy.cuda.runtime", getDevice=lambda: 0, getDeviceCount=lambda: 1)
    nvrtc = _module("cupy.cuda.nvrtc", getVersion=lambda: (13, 0))
    compiler = _module("cupy.cuda.compiler", compile_using_nvrtc=compile_using_nvrtc)
    function = _module("cupy.cuda.function", Module=Module, Function=Function)
    cuda = _module("cupy.cuda", driver=driver, runtime=runtime, nvrtc=nvrtc, compiler=compiler,
                   function=function, Device=Device, Stream=Stream,
                   get_current_stream=lambda: Stream())
    cupy = _module(
        "cupy", __version__=VERSION, ndarray=ndarray, asarray=asarray, array=asarray,
        ascontiguousarray=ascontiguousarray, zeros=zeros, empty=empty,
        get_array_module=get_array_module, from_dlpack=from_dlpack, cuda=cuda,
        __getattr__=_namespace_attribute)
    _lazy_cupyx()
    return cupy


