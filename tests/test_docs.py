"""docs/architecture.md stays true: its examples (the walk-through that adds
a metric) run as doctests, and every repository path it names exists."""

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
