"""The kernel sources: where they are, how they are compiled, and the C
types and limits that more than one host module reads.

``kernels/*.cu`` ship in the wheel as ``metrics_gpu/kernels``; in a source
checkout they are read from ``kernels/``. Which template instantiations of
each source exist is written next to the code that launches them: the
``MODULE`` of each module of :mod:`metrics_gpu.backends.launchers`, gathered
in :data:`metrics_gpu.backends.launchers.KERNEL_MODULES` (the ``cuda``
backend compiles each of them, the ``emulated`` backend exports each from its
shared library, and CI compiles each with NVRTC for every supported
architecture). tests/test_kernel_interface.py holds the limits below, and
every other layout and limit the host mirrors, to the sources.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent.parent

# Options common to NVRTC (cuda backend, CI gate); the include path of
# kernel_directory() is added by the caller. No multiply-add contraction: the
# reductions' cancellations (s*s - t.t for an undefined MCC or kappa) must give
# exactly 0 as on the host, and a fused a*b+c rounds differently from the
# NumPy reference and the emulated backend (built with -ffp-contract=off).
# Subnormals kept (NVRTC's default, written out because CuPy's RawModule
# appends -ftz=true, which the cuda backend therefore does not use): flushed,
# a subnormal score compares equal to 0, so it ties with zeros in a ranking
# and an argmax, unlike on the host (seen on an H200, 2026-11-26).
NVRTC_OPTIONS = ("--std=c++17", "--fmad=false", "--ftz=false")

# Architectures CI compiles every instantiation for (NVRTC, no GPU needed).
SUPPORTED_ARCHITECTURES = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")

# -- limits the kernels fix, read by more than one host module -----------------

# top_k values per pass (kernels/scores.cu kMaxTopK): the kernels' top-k
# limits and block reduction scratch are sized for it, and the streaming
# config vector holds this many values (kernels/streaming.cu kCfgTopK).
SCORE_MAX_TOP_K = 8
# A streaming check keeps its first offending sample as one int64 key,
# (update ordinal << STREAM_ORDINAL_SHIFT) | row (kernels/streaming.cu
# kOrdinalShift: an update takes fewer than 2^40 rows), and STREAM_NO_ERROR
# (kNoError, the largest int64) while there is none.
STREAM_ORDINAL_SHIFT = 40
STREAM_NO_ERROR = (1 << 63) - 1
# The checks array (kernels/streaming.cu kChecks): the rows left out, then a
# key per kind of bad sample, then the first update whose integer weights
# took the counts past 2^63 - 1.
STREAM_CHECK_SLOTS = 5


@dataclass(frozen=True)
class KernelModule:
    """One ``.cu`` source and the template instantiations taken from it."""

    source: str
    name_expressions: tuple[str, ...]


def kernel_directory() -> Path:
    """The folder holding the ``.cu`` sources, installed or in a source checkout."""
    for candidate in (_PACKAGE_DIR / "kernels", _PACKAGE_DIR.parent / "kernels"):
        if (candidate / "README.md").is_file():
            return candidate
    raise FileNotFoundError(
        "metrics-gpu kernel sources not found next to the package; reinstall metrics-gpu"
    )


@functools.cache
def kernel_sources_digest() -> str:
    """SHA-256 of every kernel source and header (they include one another):
    part of each compiled kernel's cache key (metrics_gpu.backends.kernel_cache)."""
    digest = hashlib.sha256()
    directory = kernel_directory()
    for path in sorted(directory.glob("*.cu*")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def kernel_source(name: str) -> str:
    """Text of one kernel source file, e.g. ``kernel_source("confusion.cu")``."""
    path = kernel_directory() / name
    if not path.is_file():
        raise FileNotFoundError(f"kernel source {name!r} not found in {kernel_directory()}")
    return path.read_text()


# C++ names of the element types the kernels read, shared by more than one
# kernel source; each source's own instantiation tables are in its launcher
# module (metrics_gpu/backends/launchers/). bool labels are read as unsigned
# char; half-precision scores as their 16-bit patterns.
LABEL_TYPES = {
    "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long",
    "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int",
    "uint64": "unsigned long long",
}
SCORE_TYPES = {
    "float32": "float", "float64": "double",
    "float16": "mg::float16_bits", "bfloat16": "mg::bfloat16_bits",
}
# y_true types read directly next to (N, K) scores: the targets of training
# loops. Others are cast to int64 first (N values, small next to N * K
# scores); every instantiation costs CI compile time on every architecture.
SCORE_TARGET_TYPES = ("int", "long long")


def c_bool(value: bool) -> str:
    """A bool template argument as C++ spells it."""
    return "true" if value else "false"
