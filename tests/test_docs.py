"""docs/architecture.md stays true: its examples (the walk-through that adds
a metric) run as doctests, and every repository path it names exists; the
API reference (docs/api.rst) lists every public name."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
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


@pytest.mark.parametrize("module", ["metrics_gpu", "metrics_gpu.dask", "metrics_gpu.testing"])
def test_api_reference_lists_every_public_name(module):
    if module == "metrics_gpu.dask":
        pytest.importorskip("dask")
    import importlib

    public = set(importlib.import_module(module).__all__)
    listed = api_page_names().get(module, set())
    assert public - listed == set(), f"docs/api.rst leaves out public names of {module}"
    assert listed - public == set(), f"docs/api.rst lists names that {module} does not export"
