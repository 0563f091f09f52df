"""docs/architecture.md stays true: its examples (the walk-through that adds
a metric) run as doctests, and every repository path it names exists; the
API reference (docs/api.rst) lists every public name; docs/conventions.md's
metric table is REPORT_METRICS'; the pages read on the repository's web view;
the Sphinx configuration keeps the options' two hyphens."""

from __future__ import annotations

import doctest
import re
import runpy
from pathlib import Path

import pytest

import metrics_gpu

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def test_architecture_walkthrough_runs():
    result = doctest.testfile(str(ARCHITECTURE), module_relative=False, verbose=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 8
    assert result.failed == 0


PATHS = sorted(set(re.findall(r"`((?:metrics_gpu|kernels|tests|tools|bench|docs|\.ci)/[\w./]+)`",
                              ARCHITECTURE.read_text())))


@pytest.mark.parametrize("path", PATHS)
def test_architecture_names_only_existing_paths(path):
    assert (ROOT / path).exists(), f"docs/architecture.md names {path}, which does not exist"


API_PAGE = ROOT / "docs" / "api.rst"


def api_page_names() -> dict[str, set[str]]:
    """The names docs/api.rst lists under each ``.. currentmodule::``."""
    names: dict[str, set[str]] = {}
    module = None
    for line in API_PAGE.read_text().splitlines():
        if line.startswith(".. currentmodule:: "):
            module = line.split()[-1]
            names.setdefault(module, set())
        elif module and re.fullmatch(r"   [A-Za-z_]\w*", line):
            names[module].add(line.strip())
    return names


@pytest.mark.parametrize("module", ["metrics_gpu", "metrics_gpu.dask", "metrics_gpu.spark",
                                    "metrics_gpu.testing"])
def test_api_reference_lists_every_public_name(module):
    if module == "metrics_gpu.dask":
        pytest.importorskip("dask")
    if module == "metrics_gpu.spark":
        pytest.importorskip("pyspark")
        pytest.importorskip("pyarrow")
    import importlib

    public = set(importlib.import_module(module).__all__)
    listed = api_page_names().get(module, set())
    assert public - listed == set(), f"docs/api.rst leaves out public names of {module}"
    assert listed - public == set(), f"docs/api.rst lists names that {module} does not export"


def report_metrics_table() -> str:
    """The legend of the report's overall label metrics, from the metric table
    the report itself is built from."""
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
    return "\n".join(lines) + "\n"


def test_conventions_holds_the_report_metric_table():
    """docs/conventions.md writes the table out (GitHub's web view renders no
    MyST ``{include}``; it showed the directive raw): it must be REPORT_METRICS'."""
    text = (DOCS / "conventions.md").read_text()
    begin, end = "<!-- REPORT_METRICS: begin -->\n", "<!-- REPORT_METRICS: end -->"
    written = text[text.index(begin) + len(begin):text.index(end)]
    assert written == report_metrics_table(), (
        "docs/conventions.md's metric table is behind metrics_gpu.REPORT_METRICS; write "
        "between its markers:\n" + report_metrics_table())


def test_no_page_uses_a_directive_the_web_view_shows_raw():
    """Every page reads on the repository's web view: no MyST include."""
    pages = sorted(DOCS.glob("*.md")) + [ROOT / "README.md"]
    assert [page.name for page in pages if "{include}" in page.read_text()] == []


def test_the_docs_keep_two_hyphens_in_options():
    """The generated CLI page printed --y-true with an en dash (Sphinx's
    smartquotes), so a copied command failed: the configuration turns them off."""
    namespace = runpy.run_path(str(DOCS / "conf.py"))
    assert namespace["smartquotes"] is False
