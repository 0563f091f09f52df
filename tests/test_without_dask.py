"""The README's test command on a machine without Dask (the GPU image has
none): ``--doctest-modules`` over ``metrics_gpu`` (pyproject.toml's
``testpaths``) must not fail on ``metrics_gpu/dask/__init__.py``, the one module that
imports Dask at the top; ``metrics_gpu/conftest.py`` leaves it out then. Run in
a subprocess whose ``dask`` is a package that refuses to import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HIDDEN = "hidden by tests/test_without_dask.py"


def _without_dask(tmp_path: Path) -> dict:
    """An environment whose ``import dask`` raises ImportError."""
    (tmp_path / "dask").mkdir()
    (tmp_path / "dask" / "__init__.py").write_text(
        f'raise ImportError("No module named \'dask\' ({HIDDEN})")\n')
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")]))


def _collect_package(env: dict) -> subprocess.CompletedProcess:
    """Collect the package's doctests as the README's command does (the
    repository's pyproject.toml options, ``--doctest-modules`` included)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0",
         "-p", "no:cacheprovider", "metrics_gpu"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_hidden_dask_cannot_be_imported(tmp_path):
    """The stand-in works: the collection below does run without Dask."""
    probe = subprocess.run([sys.executable, "-c", "import dask.array"], capture_output=True,
                           text=True, env=_without_dask(tmp_path), timeout=60)
    assert probe.returncode != 0 and HIDDEN in probe.stderr


def test_doctest_collection_without_dask(tmp_path):
    """metrics_gpu/dask/__init__.py is left out without an error; the other modules'
    doctests are collected."""
    result = _collect_package(_without_dask(tmp_path))
    report = result.stdout + result.stderr
    assert result.returncode == 0, report
    assert "ERROR" not in report and "Interrupted" not in report, report
    assert "metrics_gpu/dask/__init__.py" not in report, report
    assert "metrics_gpu/_functional/encoding.py::metrics_gpu._functional.encoding.encode_labels" in result.stdout


def test_doctest_collection_with_dask():
    """With Dask, metrics_gpu/dask/__init__.py's doctests are collected (the rule is no blanket
    ignore)."""
    pytest.importorskip("dask.array")
    result = _collect_package(dict(os.environ))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "metrics_gpu/dask/__init__.py::metrics_gpu.dask" in result.stdout
