"""Find the kernel sources: ``metrics_gpu/kernels`` in a wheel, ``kernels/`` in a checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


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
