"""Sphinx configuration of the metrics-gpu documentation.

Build (CI does the same, warnings as errors):
    pip install '.[docs]'
    python -m sphinx -W --keep-going -b html docs docs/_build/html

Pages are Markdown (MyST) except the generated references (``api.rst``,
``cli.rst``); nothing is executed but the import of the package. The legend
of the report's metric names is written out in ``conventions.md`` (readable on
the repository's web view, which renders no MyST include) and checked against
``REPORT_METRICS`` by ``tests/test_docs.py``.
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
exclude_patterns = ["_build", "_templates"]
myst_heading_anchors = 3
# Options such as --y-true stay two hyphens (smartquotes would print an en
# dash in the generated CLI page, and a copied command would fail).
smartquotes = False

autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# Docstrings name their types in prose ("array-like of shape (N,)"), not as
# cross-reference targets.
numpydoc_xref_param_type = False
# metrics_gpu.dask imports Dask at import, metrics_gpu.spark PySpark and pyarrow;
# without the [dask] / [spark] extras they are mocked.
autodoc_mock_imports = [name for name in ("dask", "distributed", "pyspark", "pyarrow")
                        if importlib.util.find_spec(name) is None]

html_theme = "pydata_sphinx_theme"
html_title = "metrics-gpu"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_static_path: list[str] = []
