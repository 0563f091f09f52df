"""Compile the kernel sources with NVRTC, without a GPU and without CuPy.

This is the CI gate for the CUDA kernels: every template instantiation listed
in :data:`metrics_gpu.backends.launchers.KERNEL_MODULES` is compiled for every entry of
:data:`~metrics_gpu.backends.kernel_sources.SUPPORTED_ARCHITECTURES`, down to a real cubin
(``--gpu-architecture=sm_XX``, so ptxas runs too), so a kernel that fails to
compile for any architecture fails CI rather than a user's first call.

NVRTC, with the same options, is the compiler the ``cuda`` backend calls
through CuPy, so what compiles here compiles there. It is a plain shared
library: a thin :mod:`ctypes` binding is enough, and the
``nvidia-cuda-nvrtc`` wheel installs it on machines without a GPU or a CUDA
toolkit.

A repository tool, not part of the installed package (the runtime compiles
through CuPy): the tests (tests/test_nvrtc_compile.py) and
bench/kernel_resources.py import it from ``tools/``.

Run ``python tools/nvrtc_gate.py`` to compile everything and print one
line per (module, architecture); the exit status is non-zero on any failure.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import ctypes.util
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from metrics_gpu.backends.kernel_sources import (
    NVRTC_OPTIONS,
    SUPPORTED_ARCHITECTURES,
    KernelModule,
    kernel_directory,
)
from metrics_gpu.backends.launchers import KERNEL_MODULES

ENV_VARIABLE = "METRICS_GPU_NVRTC"

# Newest first: a CUDA 13 library knows every architecture we support
# (CUDA 12 before 12.8 knows neither sm_100 nor sm_120).
_LIBRARY_NAMES = ("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so")

# Where the pip wheels put the library, relative to the ``nvidia`` namespace
# package: CUDA 13 wheels (nvidia-cuda-nvrtc 13.x) use cu13/lib, CUDA 12
# wheels (nvidia-cuda-nvrtc-cu12) use cuda_nvrtc/lib.
_WHEEL_LIBRARY_DIRS = ("cu13/lib", "cuda_nvrtc/lib")

_NVRTC_SUCCESS = 0

INSTALL_HINT = (
    "install the NVRTC wheel (pip install 'nvidia-cuda-nvrtc>=13', included in "
    f"the [test] extra on Linux) or set {ENV_VARIABLE} to the path of libnvrtc"
)


class NvrtcNotFoundError(RuntimeError):
    """No usable libnvrtc was found (wheel, ``METRICS_GPU_NVRTC`` or system)."""


class NvrtcError(RuntimeError):
    """An NVRTC call failed for a reason other than the source itself."""


class NvrtcCompileError(NvrtcError):
    """A module failed to compile for one architecture.

    Parameters
    ----------
    module : str
        Name of the compiled source, e.g. ``"confusion.cu"``.
    architecture : str
        The architecture compiled for, e.g. ``"sm_90"``.
    reason : str
        What failed: the NVRTC result code or a missing lowered name.
    log : str
        The full NVRTC program log.
    """

    def __init__(self, module: str, architecture: str, reason: str, log: str):
        self.module = module
        self.architecture = architecture
        self.reason = reason
        self.log = log
        super().__init__(
            f"NVRTC failed to compile {module} for {architecture}: {reason}\n"
            f"--- NVRTC log ---\n{log.rstrip() or '(empty)'}"
        )

    def __reduce__(self):
        # Rebuild from the fields, so errors come back intact from worker processes.
        return type(self), (self.module, self.architecture, self.reason, self.log)


@dataclass(frozen=True)
class KernelResources:
    """ptxas's figures for one kernel on one architecture (``-v``).

    Attributes
    ----------
    registers : int
        Registers per thread.
    stack_bytes : int
        Stack frame per thread (local memory: arrays indexed at run time).
    spill_stores, spill_loads : int
        Bytes of register spills per thread; 0 in a kernel that fits.
    shared_bytes : int
        Static shared memory per block (dynamic shared memory comes on top).
    """

    registers: int
    stack_bytes: int
    spill_stores: int
    spill_loads: int
    shared_bytes: int


# ptxas -v lines, e.g. "ptxas info    : Used 121 registers, used 1 barriers,
# 128 bytes cumulative stack size, 3840 bytes smem" after "Compiling entry
# function '_ZN2mg...' for 'sm_90'" and a "Function properties" block with
# "128 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads".
_PTXAS_INFO = re.compile(r"^ptxas(\s+info\s*:|\s+\.)")
_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def ptxas_resources(log: str) -> dict[str, KernelResources]:
    """Each entry function's resources from a log of ``--ptxas-options=-v``.

    Parameters
    ----------
    log : str
        The NVRTC program log.

    Returns
    -------
    dict of str to KernelResources
        Keyed by mangled name; kernels whose report is incomplete are left out.
    """
    frames: dict[str, tuple[int, int, int]] = {}
    found: dict[str, KernelResources] = {}
    entry = properties = None
    for line in log.splitlines():
        if match := _ENTRY.search(line):
            entry = match.group(1)
        elif match := _PROPERTIES.search(line):
            properties = match.group(1)
        elif match := _FRAME.search(line):
            if properties is not None:
                frames[properties] = tuple(int(g) for g in match.groups())
        elif (match := _USED.search(line)) and entry is not None:
            stack, stores, loads = frames.get(entry, (0, 0, 0))
            shared = _SMEM.search(line)
            found[entry] = KernelResources(
                registers=int(match.group(1)), stack_bytes=stack, spill_stores=stores,
                spill_loads=loads, shared_bytes=int(shared.group(1)) if shared else 0)
            entry = None
    return found


@dataclass(frozen=True)
class CompileResult:
    """One module compiled for one architecture.

    Attributes
    ----------
    module : str
        Name of the compiled source.
    architecture : str
        The architecture compiled for, e.g. ``"sm_90"``.
    lowered_names : dict of str to str
        Mangled symbol of each name expression, in the order given.
    cubin_size : int
        Size in bytes of the cubin NVRTC produced.
    log : str
        The NVRTC program log: warnings, and ptxas's resource lines.
    seconds : float
        Wall time of ``nvrtcCompileProgram``.
    resources : dict of str to KernelResources
        What ptxas reported for each name expression (registers, stack,
        spills, static shared memory).
    cubin : bytes or None
        The compiled cubin, when asked for (``keep_cubin``).
    """

    module: str
    architecture: str
    lowered_names: dict[str, str]
    cubin_size: int
    log: str
    seconds: float
    resources: dict[str, KernelResources] = field(default_factory=dict)
    cubin: bytes | None = None

    @property
    def warnings(self) -> str:
        """The log without ptxas's resource report: empty on a clean compile."""
        return "\n".join(line for line in self.log.splitlines()
                         if line.strip() and not _PTXAS_INFO.match(line))


@dataclass
class CompileSummary:
    """Every (module, architecture) compiled by :func:`compile_all`.

    Attributes
    ----------
    results : list of CompileResult
        The compilations that succeeded.
    failures : list of NvrtcCompileError
        The compilations that failed, each with its module, architecture and log.
    """

    results: list[CompileResult] = field(default_factory=list)
    failures: list[NvrtcCompileError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every compilation succeeded."""
        return not self.failures


# --------------------------------------------------------------------------
# Finding and binding the library


def _wheel_candidates() -> Iterator[Path]:
    # ``nvidia`` is a namespace package spread over site-packages folders;
    # importing it runs no code and touches no GPU.
    try:
        import nvidia  # type: ignore[import-not-found]
    except ImportError:
        return
    # CUDA 13 first, whichever site-packages folder holds it.
    for sub in _WHEEL_LIBRARY_DIRS:
        for root in getattr(nvidia, "__path__", ()):
            for name in _LIBRARY_NAMES:
                path = Path(root) / sub / name
                if path.is_file():
                    yield path


def _env_candidate(value: str) -> Path:
    path = Path(value).expanduser()
    if path.is_dir():
        for name in _LIBRARY_NAMES:
            if (path / name).is_file():
                return path / name
        raise NvrtcNotFoundError(
            f"{ENV_VARIABLE}={value!r} is a folder without any of {_LIBRARY_NAMES}"
        )
    if not path.is_file():
        raise NvrtcNotFoundError(f"{ENV_VARIABLE}={value!r} does not exist")
    return path


def find_library() -> str:
    """Locate libnvrtc.

    Returns
    -------
    str
        Path (or, for a system library, soname) to load.

    Raises
    ------
    NvrtcNotFoundError
        If ``METRICS_GPU_NVRTC`` is set but wrong, or nothing is found.

    Notes
    -----
    Order: ``METRICS_GPU_NVRTC`` (a file, or a folder holding the library),
    then the ``nvidia-cuda-nvrtc`` pip wheel, then the system loader. An
    explicit but wrong environment variable is an error, not a fallback, so a
    CI job never compiles with a library it did not ask for.
    """
    value = os.environ.get(ENV_VARIABLE)
    if value:
        return str(_env_candidate(value))
    for path in _wheel_candidates():
        return str(path)
    for name in _LIBRARY_NAMES:
        try:
            ctypes.CDLL(name)
        except OSError:
            continue
        return name
    found = ctypes.util.find_library("nvrtc")
    if found:
        return found
    raise NvrtcNotFoundError(f"libnvrtc not found; {INSTALL_HINT}")


_library: ctypes.CDLL | None = None
_library_path: str | None = None


def _bind(lib: ctypes.CDLL) -> None:
    # Declare the signatures: without them ctypes would pass 64-bit pointers
    # and size_t values as 32-bit ints.
    c_int_p = ctypes.POINTER(ctypes.c_int)
    c_char_pp = ctypes.POINTER(ctypes.c_char_p)
    prog_p = ctypes.POINTER(ctypes.c_void_p)
    signatures = {
        "nvrtcGetErrorString": (ctypes.c_char_p, [ctypes.c_int]),
        "nvrtcVersion": (ctypes.c_int, [c_int_p, c_int_p]),
        "nvrtcGetNumSupportedArchs": (ctypes.c_int, [c_int_p]),
        "nvrtcGetSupportedArchs": (ctypes.c_int, [c_int_p]),
        "nvrtcCreateProgram": (
            ctypes.c_int,
            [prog_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, c_char_pp, c_char_pp],
        ),
        "nvrtcDestroyProgram": (ctypes.c_int, [prog_p]),
        "nvrtcAddNameExpression": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]),
        "nvrtcCompileProgram": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, c_char_pp]),
        "nvrtcGetProgramLogSize": (
            ctypes.c_int,
            [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)],
        ),
        "nvrtcGetProgramLog": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]),
        "nvrtcGetLoweredName": (
            ctypes.c_int,
            [ctypes.c_void_p, ctypes.c_char_p, c_char_pp],
        ),
        "nvrtcGetCUBINSize": (
            ctypes.c_int,
            [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)],
        ),
        "nvrtcGetCUBIN": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes


def _preload_builtins(path: str) -> None:
    # libnvrtc dlopen()s libnvrtc-builtins.so.MAJOR.MINOR by soname. Some
    # wheels (nvidia-cuda-nvrtc 13.0.x) do not find it next to themselves
    # unless it is on LD_LIBRARY_PATH; loading it first by full path makes
    # that dlopen() return the already loaded copy.
    folder = Path(path).parent
    if not folder.is_dir() or folder == Path("."):
        return  # a bare soname from the system loader: it finds its builtins
    for builtins in sorted(folder.glob("libnvrtc-builtins.so.*")):
        ctypes.CDLL(str(builtins), mode=ctypes.RTLD_GLOBAL)


def load_library() -> ctypes.CDLL:
    """Load and bind libnvrtc once per process.

    Returns
    -------
    ctypes.CDLL
        The bound library.

    Raises
    ------
    NvrtcNotFoundError
        If no library is found or it cannot be loaded.
    """
    global _library, _library_path
    if _library is None:
        path = find_library()
        try:
            _preload_builtins(path)
            lib = ctypes.CDLL(path)
            _bind(lib)
        except (OSError, AttributeError) as error:
            raise NvrtcNotFoundError(f"cannot load libnvrtc from {path}: {error}") from error
        _library, _library_path = lib, path
    return _library


def library_path() -> str:
    """Path (or soname) of the loaded libnvrtc; loads it if needed."""
    load_library()
    assert _library_path is not None
    return _library_path


def _error_string(lib: ctypes.CDLL, code: int) -> str:
    text = lib.nvrtcGetErrorString(code)
    return text.decode() if text else f"NVRTC error {code}"


def _check(lib: ctypes.CDLL, code: int, call: str) -> None:
    if code != _NVRTC_SUCCESS:
        raise NvrtcError(f"{call} failed: {_error_string(lib, code)}")


def nvrtc_version() -> tuple[int, int]:
    """Version of the loaded NVRTC.

    Returns
    -------
    tuple of int
        ``(major, minor)``, e.g. ``(13, 0)``.
    """
    lib = load_library()
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(lib, lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return major.value, minor.value


def supported_architectures() -> tuple[str, ...]:
    """Architectures the loaded NVRTC can produce cubins for.

    Returns
    -------
    tuple of str
        E.g. ``("sm_75", "sm_80", ..., "sm_120", "sm_121")``.
    """
    lib = load_library()
    count = ctypes.c_int()
    _check(lib, lib.nvrtcGetNumSupportedArchs(ctypes.byref(count)), "nvrtcGetNumSupportedArchs")
    values = (ctypes.c_int * count.value)()
    _check(lib, lib.nvrtcGetSupportedArchs(values), "nvrtcGetSupportedArchs")
    return tuple(f"sm_{value}" for value in values)


# --------------------------------------------------------------------------
# Compiling


def _architecture_from_options(options: Sequence[str]) -> str | None:
    architecture = None
    iterator = iter(options)
    for option in iterator:
        for prefix in ("--gpu-architecture=", "-arch="):
            if option.startswith(prefix):
                architecture = option[len(prefix):]
        if option in ("--gpu-architecture", "-arch"):
            architecture = next(iterator, None)
    return architecture


def _program_log(lib: ctypes.CDLL, program: ctypes.c_void_p) -> str:
    size = ctypes.c_size_t()
    if lib.nvrtcGetProgramLogSize(program, ctypes.byref(size)) != _NVRTC_SUCCESS:
        return ""
    buffer = ctypes.create_string_buffer(max(size.value, 1))
    if lib.nvrtcGetProgramLog(program, buffer) != _NVRTC_SUCCESS:
        return ""
    return buffer.value.decode(errors="replace")


def _failure_log(lib: ctypes.CDLL, source_text: str, name: str, options: Sequence[str]) -> str:
    """The log of a failed compile, run again without ``--ptxas-options=-v``."""
    program = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(program), source_text.encode(), name.encode(), 0,
                              None, None) != _NVRTC_SUCCESS:
        return ""
    try:
        encoded = [option.encode() for option in options]
        lib.nvrtcCompileProgram(program, len(encoded), (ctypes.c_char_p * max(len(encoded), 1))(*encoded))
        return _program_log(lib, program)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(program))


def compile_module(
    source_text: str,
    name: str,
    name_expressions: Iterable[str],
    options: Sequence[str] = (),
    *,
    architecture: str | None = None,
    keep_cubin: bool = False,
) -> CompileResult:
    """Compile one source to a cubin and look up each instantiation's symbol.

    Parameters
    ----------
    source_text : str
        The CUDA C++ source.
    name : str
        Program name, used in NVRTC's messages and ours (e.g. ``"confusion.cu"``).
    name_expressions : iterable of str
        Template instantiations to emit, e.g. ``"accumulate_dense<int, float>"``.
    options : sequence of str, optional
        NVRTC options, e.g. ``("--std=c++17", "--include-path=...")``. May
        carry ``--gpu-architecture=sm_XX`` instead of `architecture`.
    architecture : str, optional
        Real architecture to compile for, e.g. ``"sm_90"``; appended as
        ``--gpu-architecture``. Exactly one of this and an architecture in
        `options` is required.
    keep_cubin : bool, optional
        Return the cubin's bytes too (``CompileResult.cubin``), e.g. to
        disassemble it.

    Returns
    -------
    CompileResult
        Lowered name of every expression, cubin size and log.

    Raises
    ------
    NvrtcCompileError
        If compilation fails or an expression gets no lowered name; the
        message holds the module, the architecture and the full NVRTC log.
    NvrtcNotFoundError
        If libnvrtc cannot be found.
    ValueError
        If no architecture, two architectures, or a virtual one is given.
    """
    expressions = tuple(name_expressions)
    options = tuple(options)
    in_options = _architecture_from_options(options)
    if architecture is not None and in_options is not None:
        raise ValueError(
            f"architecture given twice: {architecture!r} and {in_options!r} in options"
        )
    if architecture is None:
        architecture = in_options
    else:
        options = options + (f"--gpu-architecture={architecture}",)
    # A virtual architecture (compute_XX) or none at all stops at PTX: ptxas
    # never runs, so register or resource errors would slip through the gate.
    if architecture is None or not architecture.startswith("sm_"):
        raise ValueError(
            f"compile for a real architecture such as 'sm_90', got {architecture!r}"
        )

    lib = load_library()
    program = ctypes.c_void_p()
    _check(
        lib,
        lib.nvrtcCreateProgram(
            ctypes.byref(program), source_text.encode(), name.encode(), 0, None, None
        ),
        "nvrtcCreateProgram",
    )
    try:
        for expression in expressions:
            _check(
                lib,
                lib.nvrtcAddNameExpression(program, expression.encode()),
                f"nvrtcAddNameExpression({expression!r})",
            )
        # ptxas reports each kernel's registers, stack and spills in the log.
        encoded = [option.encode() for option in (*options, "--ptxas-options=-v")]
        argv = (ctypes.c_char_p * max(len(encoded), 1))(*encoded)
        start = time.perf_counter()
        code = lib.nvrtcCompileProgram(program, len(encoded), argv)
        seconds = time.perf_counter() - start
        log = _program_log(lib, program)
        if code != _NVRTC_SUCCESS:
            if "error" not in log:
                # ptxas -v reports its resources but drops its error line
                # (e.g. too much shared data): compile again without it.
                log = _failure_log(lib, source_text, name, options) or log
            raise NvrtcCompileError(name, architecture, _error_string(lib, code), log)

        lowered_names = {}
        for expression in expressions:
            lowered = ctypes.c_char_p()
            code = lib.nvrtcGetLoweredName(program, expression.encode(), ctypes.byref(lowered))
            if code != _NVRTC_SUCCESS or not lowered.value:
                raise NvrtcCompileError(
                    name,
                    architecture,
                    f"no lowered name for {expression!r} ({_error_string(lib, code)})",
                    log,
                )
            lowered_names[expression] = lowered.value.decode()

        cubin_size = ctypes.c_size_t()
        code = lib.nvrtcGetCUBINSize(program, ctypes.byref(cubin_size))
        if code != _NVRTC_SUCCESS or cubin_size.value == 0:
            raise NvrtcCompileError(
                name, architecture, f"no cubin produced ({_error_string(lib, code)})", log
            )
        cubin = None
        if keep_cubin:
            buffer = ctypes.create_string_buffer(cubin_size.value)
            _check(lib, lib.nvrtcGetCUBIN(program, buffer), "nvrtcGetCUBIN")
            cubin = buffer.raw
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(program))

    by_symbol = ptxas_resources(log)
    return CompileResult(
        module=name,
        architecture=architecture,
        lowered_names=lowered_names,
        cubin_size=cubin_size.value,
        log=log,
        seconds=seconds,
        resources={expression: by_symbol[symbol]
                   for expression, symbol in lowered_names.items() if symbol in by_symbol},
        cubin=cubin,
    )


def module_options(directory: Path | str | None = None) -> tuple[str, ...]:
    """NVRTC options for the kernel sources, without the architecture.

    Parameters
    ----------
    directory : path, optional
        Folder of the sources; defaults to :func:`kernel_directory`. It is the
        include path, so ``#include "common.cuh"`` resolves.

    Returns
    -------
    tuple of str
        :data:`NVRTC_OPTIONS` plus ``--include-path``.
    """
    directory = kernel_directory() if directory is None else Path(directory)
    return (*NVRTC_OPTIONS, f"--include-path={directory}")


def _compile_task(
    task: tuple[str, str, tuple[str, ...], tuple[str, ...], str],
) -> CompileResult | NvrtcCompileError:
    # Top level, so worker processes can unpickle it; returns the error
    # instead of raising, so one failure does not cancel the other tasks.
    source_text, name, expressions, options, architecture = task
    try:
        return compile_module(source_text, name, expressions, options, architecture=architecture)
    except NvrtcCompileError as error:
        return error


def _compile_each(
    architectures: Iterable[str],
    modules: Iterable[KernelModule],
    directory: Path | str | None,
    jobs: int = 1,
) -> Iterator[CompileResult | NvrtcCompileError]:
    directory = kernel_directory() if directory is None else Path(directory)
    options = module_options(directory)
    architectures = tuple(architectures)
    tasks = [
        (
            (directory / module.source).read_text(),
            module.source,
            tuple(module.name_expressions),
            options,
            architecture,
        )
        for module in modules
        for architecture in architectures
    ]
    jobs = max(1, min(jobs, len(tasks)))
    if jobs == 1:
        yield from map(_compile_task, tasks)
        return
    # Longest first, so that no long compile starts last while the other
    # workers idle (the pairs take 1-100 s each; 2 jobs on 49 pairs in module
    # order left one worker alone for the last minute). Results keep the
    # order of `tasks`.
    order = sorted(range(len(tasks)), key=lambda i: -_compile_cost(*tasks[i][::2]))
    # One compile is single-threaded and takes from milliseconds to minutes
    # (front end and ptxas run again for each architecture), so (module,
    # architecture) pairs run side by side. Processes rather than threads:
    # no reliance on NVRTC being thread-safe, and nothing shared but results.
    load_library()  # fail here, with NvrtcNotFoundError, not in every worker
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {i: pool.submit(_compile_task, tasks[i]) for i in order}
        for i in range(len(tasks)):
            yield futures[i].result()


def _compile_cost(source_text: str, expressions: tuple[str, ...], architecture: str) -> float:
    """A compile's relative cost, for ordering only: source size times
    instantiations (streaming.cu's and confusion.cu's 150-260 took 35-100 s
    per architecture at 5e12882, multilabel.cu's 14 about 2 s), sm_100 and
    later's ptxas about a third slower."""
    newer = int(architecture.removeprefix("sm_").rstrip("af") or 0) >= 100
    return len(source_text) * len(expressions) * (1.3 if newer else 1.0)


def default_jobs() -> int:
    """Number of parallel compiles: the CPUs this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def compile_all(
    architectures: Iterable[str] = SUPPORTED_ARCHITECTURES,
    modules: Iterable[KernelModule] = KERNEL_MODULES,
    directory: Path | str | None = None,
    jobs: int = 1,
) -> CompileSummary:
    """Compile every module for every architecture.

    Parameters
    ----------
    architectures : iterable of str, optional
        Defaults to :data:`SUPPORTED_ARCHITECTURES`.
    modules : iterable of KernelModule, optional
        Defaults to :data:`KERNEL_MODULES`.
    directory : path, optional
        Folder of the sources; defaults to :func:`kernel_directory`.
    jobs : int, optional
        Compilations run in parallel, each in its own process; 1 (the
        default) compiles in this process, one after the other.
        :func:`default_jobs` gives the number of usable CPUs.

    Returns
    -------
    CompileSummary
        Every result and every failure; failures do not stop the others, so
        one CI run reports all of them.

    Raises
    ------
    NvrtcNotFoundError
        If libnvrtc cannot be found.
    """
    summary = CompileSummary()
    for outcome in _compile_each(architectures, modules, directory, jobs):
        if isinstance(outcome, NvrtcCompileError):
            summary.failures.append(outcome)
        else:
            summary.results.append(outcome)
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    """Compile everything, print one line per (module, architecture).

    Parameters
    ----------
    argv : sequence of str, optional
        Command-line arguments: the architectures to compile for, default
        every supported one.

    Returns
    -------
    int
        0 when everything compiled, 1 on any compile failure or on a ``.cu``
        file missing from :data:`KERNEL_MODULES`, 2 when libnvrtc cannot be
        found.
    """
    parser = argparse.ArgumentParser(
        prog="python tools/nvrtc_gate.py",
        description="Compile every kernel instantiation with NVRTC for each architecture.",
    )
    parser.add_argument(
        "architectures",
        nargs="*",
        metavar="sm_XX",
        help=f"architectures to compile for (default: {' '.join(SUPPORTED_ARCHITECTURES)})",
    )
    parser.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=default_jobs(),
        help="compilations run in parallel (default: the number of usable CPUs)",
    )
    arguments = parser.parse_args(argv)
    architectures = tuple(arguments.architectures) or SUPPORTED_ARCHITECTURES
    try:
        major, minor = nvrtc_version()
    except NvrtcNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"NVRTC {major}.{minor} from {library_path()}")
    # A source nobody listed would never be compiled: that is a failure too.
    listed = {module.source for module in KERNEL_MODULES}
    unlisted = sorted(p.name for p in kernel_directory().glob("*.cu") if p.name not in listed)
    for source in unlisted:
        print(f"{source}: FAILED, not listed in KERNEL_MODULES", flush=True)
    if not KERNEL_MODULES:
        print("KERNEL_MODULES is empty: nothing to compile")
        return 1 if unlisted else 0

    failures = len(unlisted)
    start = time.perf_counter()
    for outcome in _compile_each(architectures, KERNEL_MODULES, None, arguments.jobs):
        if isinstance(outcome, NvrtcCompileError):
            failures += 1
            print(f"{outcome.module} {outcome.architecture}: FAILED", flush=True)
            print(str(outcome), file=sys.stderr)
            continue
        warnings = " (with warnings, see log)" if outcome.warnings else ""
        print(
            f"{outcome.module} {outcome.architecture}: "
            f"{len(outcome.lowered_names)} instantiations, "
            f"{outcome.cubin_size} cubin bytes, {outcome.seconds:.2f} s{warnings}"
        )
        if warnings:
            print(outcome.warnings, file=sys.stderr)
    total = len(KERNEL_MODULES) * len(architectures)
    print(
        f"{total - failures + len(unlisted)}/{total} compiled in "
        f"{time.perf_counter() - start:.1f} s with {arguments.jobs} job(s)"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    # Run the importable copy of this module, not __main__: worker processes
    # started by spawn or forkserver (Python 3.14's default) must be able to
    # import _compile_task and the result classes by name.
    from nvrtc_gate import main as _main

    sys.exit(_main(sys.argv[1:]))
