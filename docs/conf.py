"""Sphinx configuration of the metrics-gpu documentation.

Build (CI does the same, warnings as errors):
    pip install '.[docs]'
    python -m sphinx -W --keep-going -b html docs docs/_build/html

Pages are Markdown (MyST) except the generated references (``api.rst``,
``cli.rst``); nothing is executed but the import of the package and the
legend of the report's metric names, written from ``REPORT_METRICS``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent))  # the checkout's package, installed or not

import metrics_gpu  # noqa: E402

project = "metrics-gpu"
author = "the metrics-gpu developers"
copyright = "2026, " + author
release = version = metrics_gpu.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "sphinxarg.ext",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
templates_path = ["_templates"]
exclude_patterns = ["_build", "_generated", "_templates"]
myst_heading_anchors = 3

autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# Docstrings name their types in prose ("array-like of shape (N,)"), not as
# cross-reference targets.
numpydoc_xref_param_type = False
# metrics_gpu.dask imports Dask at import; without the [dask] extra it is mocked.
autodoc_mock_imports = [name for name in ("dask", "distributed")
                        if importlib.util.find_spec(name) is None]

html_theme = "pydata_sphinx_theme"
html_title = "metrics-gpu"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_static_path: list[str] = []


def write_report_legend() -> None:
    """The legend of the report's overall label metrics, from the metric table
    the report itself is built from (so it cannot fall behind it)."""
    systems = (("sklearn", "scikit-learn"), ("onedal", "oneDAL"), ("pyactlearn", "pyActLearn"),
               ("catboost", "CatBoost"), ("overview", "overview paper"))
    lines = ["| name | what | higher is better | the same number elsewhere |",
             "| --- | --- | --- | --- |"]
    for row in metrics_gpu.REPORT_METRICS:
        elsewhere = "; ".join(f"{label}: `{row.sources[key]}`"
                              for key, label in systems if key in row.sources)
        what = row.description.replace("|", "\\|")  # |i - j| inside a table cell
        lines.append(f"| `{row.name}` | {what} | "
                     f"{'yes' if row.higher_is_better else 'no'} | {elsewhere or '—'} |")
    target = DOCS / "_generated" / "report_metrics.md"
    target.parent.mkdir(exist_ok=True)
    text = "\n".join(lines) + "\n"
    if not target.exists() or target.read_text() != text:
        target.write_text(text)


write_report_legend()
