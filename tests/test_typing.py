"""A user's type checker sees the package's annotations (the PEP 561 marker
``metrics_gpu/py.typed`` ships with it): mypy, run the way a user runs it,
passes correct code and catches a wrong argument type."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

import metrics_gpu

GOOD = """\
import numpy as np

from metrics_gpu import ClassificationMetrics, LabelReport, accuracy_score, label_report

y_true = np.array([0, 1, 2, 1])
y_pred = np.array([0, 2, 2, 1])
accuracy = float(accuracy_score(y_true, y_pred, num_classes=3))
report: LabelReport = label_report(y_true, y_pred, num_classes=3)
metrics = ClassificationMetrics(3, top_k=(1,))
metrics.update(y_true, y_pred)
reveal_type(metrics.compute())
"""

BAD = """\
from metrics_gpu import ClassificationMetrics

metrics = ClassificationMetrics("3")
"""


def test_marker_is_in_the_package():
    assert (Path(metrics_gpu.__file__).parent / "py.typed").is_file()


@pytest.mark.slow  # about 10-30 s: mypy reads NumPy's stubs
@pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                    reason="mypy is not installed (the [test] extra has it)")
def test_mypy_strict_uses_the_installed_annotations(tmp_path):
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "bad.py").write_text(BAD)
    # An empty configuration of its own: not the checkout's [tool.mypy]. The
    # working directory is tmp_path, so metrics_gpu is found where it is
    # installed (site-packages, or an editable install's path), as for a user.
    (tmp_path / "mypy.ini").write_text("[mypy]\n")
    env = {name: value for name, value in os.environ.items()
           if name not in ("PYTHONPATH", "MYPYPATH")}
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--strict",
         "--cache-dir", str(tmp_path / ".mypy_cache"), "--no-error-summary",
         "good.py", "bad.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    lines = result.stdout.splitlines()
    good = [line for line in lines if line.startswith("good.py")]
    bad = [line for line in lines if line.startswith("bad.py")]
    # Correct code passes; the annotations (not Any) reach the user's code.
    assert good == ['good.py:11: note: Revealed type is '
                    '"metrics_gpu._streaming.report.StreamingReport"'], result.stdout + result.stderr
    # A str where the signature says int is an error.
    assert len(bad) == 1 and "[arg-type]" in bad[0], result.stdout + result.stderr
    assert 'incompatible type "str"; expected "int"' in bad[0]
    assert result.returncode == 1
