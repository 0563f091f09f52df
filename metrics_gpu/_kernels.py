"""The kernel sources: where they are, and which template instantiations exist.

``kernels/*.cu`` ship in the wheel as ``metrics_gpu/kernels``; in a source
checkout they are read from ``kernels/``. :data:`KERNEL_MODULES` is the one
table of what gets compiled: the ``cuda`` backend passes each module's
``name_expressions`` to ``cupy.RawModule``, the ``emulated`` backend exports
each of them from its shared library, and CI compiles each of them with NVRTC
for every supported architecture.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent

# Options common to NVRTC (cuda backend, CI gate); the include path of
# kernel_directory() is added by the caller.
NVRTC_OPTIONS = ("--std=c++17",)

# Architectures CI compiles every instantiation for (NVRTC, no GPU needed).
SUPPORTED_ARCHITECTURES = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")


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


def kernel_source(name: str) -> str:
    """Text of one kernel source file, e.g. ``kernel_source("confusion.cu")``."""
    path = kernel_directory() / name
    if not path.is_file():
        raise FileNotFoundError(f"kernel source {name!r} not found in {kernel_directory()}")
    return path.read_text()


KERNEL_MODULES: tuple[KernelModule, ...] = ()
