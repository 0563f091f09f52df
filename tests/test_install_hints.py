"""Every install line we print or document works: metrics-gpu is not on a
package index, so an extra is named after a checkout (``pip install '.[io]'``)
or a wheel file, never after the project's name (pip would answer "No
matching distribution found")."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import metrics_gpu
from metrics_gpu._common.extras import install_hint
from metrics_gpu.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = Path(metrics_gpu.__file__).resolve().parent
# The project's name with an extra: `metrics-gpu[cuda12]`, `metrics_gpu[io]`.
BROKEN_EXTRA = re.compile(r"metrics[-_]gpu\[[\w,-]*\]?")
DOC_SUFFIXES = (".md", ".rst", ".txt", ".py")


def _documents() -> list[Path]:
    """The package's Python files, the README and the docs' sources (not their build)."""
    paths = sorted(PACKAGE.rglob("*.py"))
    paths.append(ROOT / "README.md")
    docs = ROOT / "docs"
    if docs.is_dir():
        paths += sorted(path for path in docs.rglob("*") if path.suffix in DOC_SUFFIXES
                        and "_build" not in path.relative_to(docs).parts)
    return [path for path in paths if path.is_file()]


def _broken_lines(text: str, where: str) -> list[str]:
    return [f"{where}:{text.count(chr(10), 0, match.start()) + 1}: {match.group()}"
            for match in BROKEN_EXTRA.finditer(text)]


def _help_texts() -> dict[str, str]:
    """``metrics-gpu --help`` and every subcommand's ``--help``."""
    parser = build_parser()
    texts = {"metrics-gpu --help": parser.format_help()}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                texts[f"metrics-gpu {name} --help"] = command.format_help()
    return texts


def test_no_install_line_names_the_project_with_an_extra():
    broken = []
    for path in _documents():
        where = str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
        broken += _broken_lines(path.read_text(encoding="utf-8"), where)
    for where, text in _help_texts().items():
        broken += _broken_lines(text, where)
    assert not broken, (
        "install lines that pip cannot resolve (the package is not on an index; "
        f"use metrics_gpu._common.extras.install_hint's form, {install_hint('io')!r}):\n"
        + "\n".join(broken))


def test_the_check_finds_a_broken_line():
    text = "Install it:\n\n    pip install 'metrics-gpu[cuda12]'\n"
    assert _broken_lines(text, "README.md") == ["README.md:3: metrics-gpu[cuda12]"]
    assert not _broken_lines(install_hint("cuda12", "cuda13"), "hint")


def test_missing_matplotlib_names_the_working_install(tmp_path, monkeypatch, capsys):
    """``report --plot`` without matplotlib: the error a user actually sees."""
    np.save(tmp_path / "t.npy", np.array([0, 1, 1]))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # find_spec / import: not installed
    assert main(["report", "--y-true", str(tmp_path / "t.npy"), "--y-pred",
                 str(tmp_path / "t.npy"), "--plot", str(tmp_path / "plots")]) == 2
    error = capsys.readouterr().err
    assert "--plot needs matplotlib" in error
    assert "pip install '.[plot]'" in error
    assert "metrics_gpu-<version>-py3-none-any.whl[plot]" in error


def test_missing_matplotlib_in_the_plot_module(monkeypatch):
    from metrics_gpu import plot

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=re.escape("pip install '.[plot]'")):
        plot._new_axes(None)


@pytest.mark.parametrize("method", ["clopper-pearson", "jeffreys"])
def test_missing_scipy_names_the_stats_extra(tmp_path, monkeypatch, capsys, method):
    """``report --confidence-level 0.95 --interval-method clopper-pearson`` (or
    jeffreys) without scipy: one line naming the [stats] extra, as the other
    missing extras give, not a traceback; the API's ImportError names it too."""
    labels = np.array([0, 1, 1, 0, 1])
    np.save(tmp_path / "t.npy", labels)
    monkeypatch.setitem(sys.modules, "scipy", None)  # find_spec / import: not installed
    monkeypatch.setitem(sys.modules, "scipy.stats", None)
    assert main(["report", "--y-true", str(tmp_path / "t.npy"), "--y-pred",
                 str(tmp_path / "t.npy"), "--confidence-level", "0.95",
                 "--interval-method", method]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1, error
    assert error.startswith(f"metrics-gpu: error: --interval-method {method} needs scipy")
    assert "pip install '.[stats]'" in error
    assert "metrics_gpu-<version>-py3-none-any.whl[stats]" in error
    from metrics_gpu import label_report

    with pytest.raises(ImportError, match=re.escape("pip install '.[stats]'")):
        label_report(labels, labels, confidence_level=0.95, method=method)
