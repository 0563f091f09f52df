"""The one place that decides which backend computes a metric.

A backend produces only accumulated state (a confusion matrix or per-class
statistics); every formula after that lives in :mod:`metrics_gpu._formulas.labels`.

Selection order: the innermost :func:`use_backend` context, then
:func:`set_backend`, then the ``METRICS_GPU_BACKEND`` environment variable,
then ``"auto"``. ``"auto"`` picks ``cuda`` for device arrays (CuPy arrays,
torch CUDA tensors, JAX GPU arrays) and ``numpy`` for everything else.

The variable is read once, by the first call that needs it (a metric, or
:func:`get_backend`), not at import and not on every call; ``set_backend(None)``
reads it again.

Device arrays are recognised through ``sys.modules`` so that importing
``metrics_gpu`` never imports CuPy, torch or JAX, nor touches CUDA.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib.util
import os
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from metrics_gpu._common.extras import install_hint
from metrics_gpu.backends.arrays import is_device_array

if TYPE_CHECKING:  # the backends import lazily: CuPy only when asked for
    from metrics_gpu.backends import Backend
    from metrics_gpu.backends.kernel_backend import KernelBackend

Parameters = ParamSpec("Parameters")
Result = TypeVar("Result")

BACKEND_NAMES = ("auto", "numpy", "cuda", "emulated")
ENV_VARIABLE = "METRICS_GPU_BACKEND"

CUDA_INSTALL_HINT = "install CuPy for your CUDA version: " + install_hint("cuda12", "cuda13")

_context_backend: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "metrics_gpu_backend", default=None
)
_global_backend: str | None = None
# METRICS_GPU_BACKEND as the first call that needed it read it (None: not read
# yet). Read on every call, os.environ cost an encode and a lookup through
# os._Environ, about 1 us, in each planned in-loop call (the H100 profile of
# bench/results/2026-11-27-nvidia-h100-profile-882fda6.md). The variable says
# how a process starts (a job script, CI's emulated pass); a program that
# changes backend while it runs has set_backend and use_backend, which win
# over the variable anyway. So it is read once, lazily: a value set after
# `import metrics_gpu` but before the first metric still counts, a bad one
# fails at use and not at import, and set_backend(None) reads it again (a
# test that sets it with monkeypatch, a program that rewrites os.environ),
# rather than a change going unseen with no way to apply it.
_environment_backend: str | None = None


class BackendUnavailableError(RuntimeError):
    """The requested backend cannot run here (no GPU, no CuPy, not built yet)."""


def _check_name(name: object) -> str:
    if not isinstance(name, str) or name.lower() not in BACKEND_NAMES:
        raise ValueError(
            f"backend must be one of {BACKEND_NAMES}, got {name!r}"
        )
    return name.lower()


def set_backend(name: str | None) -> None:
    """Set the process-wide backend: ``"auto"``, ``"numpy"``, ``"cuda"`` or ``"emulated"``.

    The choice holds in every thread and task, under any :func:`use_backend`
    block and over the ``METRICS_GPU_BACKEND`` environment variable. A named
    backend is checked here, not at the first metric. ``None`` drops the
    choice: the environment variable decides again, read anew by the next call
    (it is otherwise read once per process).

    Parameters
    ----------
    name : {"auto", "numpy", "cuda", "emulated"} or None
        The backend, in any case. ``"auto"`` picks ``cuda`` for device arrays
        (CuPy arrays, torch CUDA tensors, JAX GPU arrays) and ``numpy`` for
        everything else, call by call. ``None``: no process-wide choice, and
        ``METRICS_GPU_BACKEND`` read again.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        ``name`` is not one of the backend names, nor None.
    BackendUnavailableError
        The backend cannot run here: ``"cuda"`` without CuPy or an NVIDIA GPU
        (the message says what to install), ``"emulated"`` without a C++
        compiler.

    See Also
    --------
    get_backend : The backend name in force.
    use_backend : A backend for a ``with`` block only.

    Examples
    --------
    >>> import metrics_gpu
    >>> metrics_gpu.set_backend("numpy")
    >>> metrics_gpu.get_backend()
    'numpy'
    >>> metrics_gpu.set_backend(None)  # METRICS_GPU_BACKEND, read again, else "auto"
    """
    global _global_backend, _environment_backend
    if name is None:
        _global_backend = _environment_backend = None
        return
    name = _check_name(name)
    if name != "auto":
        get_backend_implementation(name)  # fail now, not at the first metric
    _global_backend = name


def get_backend() -> str:
    """Return the backend name in force (``"auto"`` unless one was chosen).

    The innermost :func:`use_backend` block decides, then :func:`set_backend`,
    then the ``METRICS_GPU_BACKEND`` environment variable, then ``"auto"``.
    The variable is read by the first call that needs it and kept: a change of
    ``os.environ`` after that is seen after ``set_backend(None)``.

    Returns
    -------
    str
        ``"auto"``, ``"numpy"``, ``"cuda"`` or ``"emulated"``, in lower case.

    Raises
    ------
    ValueError
        ``METRICS_GPU_BACKEND`` is set to something other than a backend name.

    See Also
    --------
    set_backend : Set the process-wide backend.
    use_backend : A backend for a ``with`` block only.

    Examples
    --------
    >>> import metrics_gpu
    >>> with metrics_gpu.use_backend("numpy"):
    ...     metrics_gpu.get_backend()
    'numpy'
    """
    name = _context_backend.get()
    if name is None:
        name = _global_backend
        if name is None:
            name = _environment_backend or _read_environment()
    return name


def _read_environment() -> str:
    """``METRICS_GPU_BACKEND`` as a backend name, kept for the next calls (a
    bad value is not kept: every call raises)."""
    global _environment_backend
    _environment_backend = name = _check_env()
    return name


def _check_env() -> str:
    """The backend ``METRICS_GPU_BACKEND`` names now (``"auto"`` when unset)."""
    value = os.environ.get(ENV_VARIABLE, "").strip()
    if not value:
        return "auto"
    try:
        return _check_name(value)
    except ValueError:
        raise ValueError(
            f"environment variable {ENV_VARIABLE} must be one of {BACKEND_NAMES}, "
            f"got {value!r}"
        ) from None


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[None]:
    """Use a backend inside a ``with`` block (thread- and task-local).

    Inside the block the backend overrides :func:`set_backend` and the
    ``METRICS_GPU_BACKEND`` environment variable; blocks nest, and leaving one
    restores the choice before it. The choice is a context variable: other
    threads and asyncio tasks keep their own. A named backend is checked on
    entering the block.

    Parameters
    ----------
    name : {"auto", "numpy", "cuda", "emulated"}
        The backend, in any case (``"auto"`` as in :func:`set_backend`).

    Returns
    -------
    context manager
        Entering it sets the backend (it yields None); leaving it restores
        the previous one.

    Raises
    ------
    ValueError
        ``name`` is not one of the backend names.
    BackendUnavailableError
        The backend cannot run here (as :func:`set_backend`).

    See Also
    --------
    set_backend : Set the process-wide backend.
    get_backend : The backend name in force.

    Examples
    --------
    >>> import numpy as np, metrics_gpu
    >>> with metrics_gpu.use_backend("numpy"):
    ...     float(metrics_gpu.accuracy_score(np.array([0, 1]), np.array([0, 0])))
    0.5
    """
    name = _check_name(name)
    if name != "auto":
        get_backend_implementation(name)
    token = _context_backend.set(name)
    try:
        yield
    finally:
        _context_backend.reset(token)


def caller_stream(array: object) -> contextlib.AbstractContextManager:
    """Context that orders work on ``array`` with its owner's: its GPU, and for a
    torch tensor torch's current stream there. A no-op for host arrays."""
    if not is_device_array(array):
        return contextlib.nullcontext()
    return _kernel_backend("cuda").device.stream_of(array)


def on_caller_stream(function: Callable[Parameters, Result]) -> Callable[Parameters, Result]:
    """Run a public function on the stream and device of its data: the first
    device array among its first two positional arguments (y_true, y_pred)."""

    @functools.wraps(function)
    def wrapper(*args: Parameters.args, **kwargs: Parameters.kwargs) -> Result:
        for data in args[:2]:
            if is_device_array(data):  # caller_stream's context, without its second test
                with _kernel_backend("cuda").device.stream_of(data):
                    return function(*args, **kwargs)
        return function(*args, **kwargs)

    return wrapper


def resolve_backend(*arrays: object) -> Backend:
    """Return the backend implementation that computes on ``arrays``."""
    name = get_backend()
    if name == "auto":
        name = "cuda" if any(is_device_array(a) for a in arrays if a is not None) else "numpy"
    return get_backend_implementation(name)


def backend_for_host_data(name: str) -> str:
    """The backend that computes on data read from the host (files): ``"auto"``
    is ``cuda`` when CuPy and a GPU are present, else ``numpy``; a named one
    must be able to run (:class:`BackendUnavailableError` otherwise)."""
    name = _check_name(name)
    if name == "auto":
        from metrics_gpu.backends.cuda import cuda_unavailable_reason

        return "numpy" if cuda_unavailable_reason() is not None else "cuda"
    get_backend_implementation(name)
    return name


_implementations: dict[str, KernelBackend] = {}
# Creating a kernel backend loads (or builds) libraries: threads asking for
# one at once must share a single instance, so one lock guards creation.
_implementations_lock = threading.Lock()


def get_backend_implementation(name: str) -> Backend:
    """Return the backend object for ``name``, or raise a clear error if it cannot run."""
    if name == "numpy":
        from metrics_gpu.backends.numpy_backend import NUMPY_BACKEND

        return NUMPY_BACKEND
    return _kernel_backend(name)


def _kernel_backend(name: str) -> KernelBackend:
    """The one kernel backend of ``name`` (``"cuda"`` or ``"emulated"``),
    created on first use."""
    if name not in ("cuda", "emulated"):
        raise ValueError(f"backend must be one of {BACKEND_NAMES}, got {name!r}")
    backend = _implementations.get(name)
    if backend is None:
        with _implementations_lock:
            backend = _implementations.get(name)
            if backend is None:
                backend = _implementations[name] = _make_kernel_backend(name)
    return backend


def _make_kernel_backend(name: str) -> KernelBackend:
    from metrics_gpu.backends.kernel_backend import KernelBackend

    if name == "emulated":
        from metrics_gpu.backends.emulated import EmulatedDevice

        try:
            return KernelBackend(EmulatedDevice())
        except FileNotFoundError as error:
            raise BackendUnavailableError(
                f"backend 'emulated' compiles the CUDA kernels for the CPU: {error}"
            ) from None
    if importlib.util.find_spec("cupy") is None:
        raise BackendUnavailableError(
            f"backend 'cuda' needs CuPy and an NVIDIA GPU; {CUDA_INSTALL_HINT}"
        )
    from metrics_gpu.backends.cuda import CudaDevice, cuda_unavailable_reason

    reason = cuda_unavailable_reason()
    if reason is not None:
        raise BackendUnavailableError(f"backend 'cuda' cannot run here: {reason}")
    return KernelBackend(CudaDevice())
