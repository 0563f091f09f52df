"""The floors of docs/architecture.md hold: the import contracts of
pyproject.toml ([tool.importlinter]) are kept, and they are not a test that
cannot fail: a lower floor importing a higher one, or a circle made of an
import inside a function, breaks them.

`lint-imports` reads every import statement of the package (grimp's static
graph: inside functions and under TYPE_CHECKING too), so a function-level
import written to dodge a circle counts as the circle it is."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import metrics_gpu

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = Path(metrics_gpu.__file__).resolve().parent
CONFIG = ROOT / "pyproject.toml"


def lint_imports(package_parent: Path | None = None) -> subprocess.CompletedProcess:
    """`lint-imports` on the package found first on the path (``package_parent``
    in front of it, when given), with the repository's contracts."""
    environment = dict(os.environ)
    if package_parent is not None:
        environment["PYTHONPATH"] = os.pathsep.join(
            [str(package_parent), environment.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command; "
         "lint_imports_command()", str(CONFIG), "--no-cache", "--no-logo"],
        # `python -c` puts its working directory first on the path.
        capture_output=True, text=True, env=environment, timeout=120,
        cwd=package_parent or ROOT)


def test_import_contracts_are_kept():
    result = lint_imports()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_every_module_is_on_a_floor():
    """The floors contract is exhaustive: a module of metrics_gpu/ that no
    floor names is an error, so a new module is placed when it is added."""
    # Python 3.10 has no tomllib; lint-imports, which refuses an unplaced
    # module itself, runs there all the same (test_import_contracts_are_kept).
    tomllib = pytest.importorskip("tomllib")
    floors = next(c for c in tomllib.loads(CONFIG.read_text())
                  ["tool"]["importlinter"]["contracts"] if c["id"] == "floors")
    assert floors["exhaustive"] is True
    named = {part.strip() for layer in floors["layers"] for part in layer.split("|")}
    on_disk = {path.stem if path.is_file() else path.name
               for path in PACKAGE.iterdir()
               if (path.suffix == ".py" and path.stem != "__init__")
               or (path.is_dir() and (path / "__init__.py").is_file())}
    assert on_disk - {"conftest"} == named


PLANTED = {
    # The lowest floor reaching up to the files (a module-level import).
    "a formula importing the files": (
        "_formulas/state.py", "from metrics_gpu.files import report_files  # planted\n",
        "metrics_gpu._formulas is not allowed to import metrics_gpu.files"),
    # The launchers reaching up to the checks inside a function, as
    # launchers/streaming.py once did for StreamBatch.
    "a launcher importing the checks in a function": (
        "backends/launchers/base.py",
        "\n\ndef _planted():\n    from metrics_gpu._validation import check_int_range\n",
        "metrics_gpu.backends is not allowed to import metrics_gpu._validation"),
    # A circle inside one floor, closed by an import inside a function.
    "a circle through a function-level import": (
        "_formulas/state.py",
        "\n\ndef _planted():\n    from metrics_gpu._formulas import labels\n",
        "No cycles are allowed in metrics_gpu._formulas"),
}


@pytest.mark.parametrize("case", sorted(PLANTED))
def test_contracts_catch_a_planted_import(tmp_path, case):
    module, planted, message = PLANTED[case]
    copy = tmp_path / "metrics_gpu"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "kernels"))
    with open(copy / module, "a") as source:
        source.write(planted)
    result = lint_imports(tmp_path)
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 1, output
    assert message in output, output
