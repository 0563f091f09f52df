"""Every public function is documented and typed the same way: numpydoc
Parameters (each parameter of its signature), Returns and See Also sections,
and a type hint on every parameter and on the return (mypy in CI checks that
the hints are true)."""

from __future__ import annotations

import inspect
import re

import pytest

import metrics_gpu as mg

FUNCTIONS = sorted(name for name in mg.__all__ if inspect.isfunction(getattr(mg, name)))
CLASSES = sorted(name for name in mg.__all__ if inspect.isclass(getattr(mg, name)))


def _section(doc: str, title: str) -> str | None:
    """The text of a numpydoc section (up to the next section), or None."""
    match = re.search(rf"^(\s*){title}\n\1-{{{len(title)}}}\n(.*?)(?=^\s*\w[\w ]*\n\s*-{{3,}}\n|\Z)",
                      doc, re.M | re.S)
    return None if match is None else match.group(2)


def _documented_names(parameters: str) -> set[str]:
    """Names a Parameters section documents (``a : type`` or ``a, b : type`` lines)."""
    names = set()
    for line in parameters.splitlines():
        match = re.match(r"^\s*(\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?::|$)", line)
        if match and not line.startswith(" " * 8):
            names.update(name.strip().lstrip("*") for name in match.group(1).split(","))
    return names


def test_every_public_name_is_a_function_or_class():
    assert len(FUNCTIONS) > 30
    assert set(FUNCTIONS) | set(CLASSES) == set(mg.__all__) - {
        "OVERALL_PERFORMANCE_NAMES", "PER_CLASS_METRICS", "PER_CLASS_PERFORMANCE_COLUMNS",
        "REPORT_METRICS"}


@pytest.mark.parametrize("name", FUNCTIONS)
def test_public_function_has_numpydoc_sections(name):
    function = getattr(mg, name)
    doc = inspect.getdoc(function) or ""
    parameters = inspect.signature(function).parameters
    # numpydoc leaves the Parameters section out when there are none.
    for title in ("Parameters", "Returns", "See Also") if parameters else ("Returns", "See Also"):
        assert _section(doc, title) is not None, f"{name}: no {title} section"
    if not parameters:
        assert _section(doc, "Parameters") is None, f"{name}: a Parameters section, no parameter"
        return
    documented = _documented_names(_section(doc, "Parameters"))
    missing = [p for p in parameters if p not in documented]
    assert not missing, f"{name}: parameters not documented: {missing}"
    assert "{" + "num_classes}" not in doc, f"{name}: an unexpanded shared parameter"


@pytest.mark.parametrize("name", FUNCTIONS)
def test_public_function_is_typed(name):
    signature = inspect.signature(inspect.unwrap(getattr(mg, name)))
    untyped = [p.name for p in signature.parameters.values()
               if p.annotation is inspect.Parameter.empty]
    assert not untyped, f"{name}: parameters without a type hint: {untyped}"
    assert signature.return_annotation is not inspect.Signature.empty, f"{name}: no return type"


@pytest.mark.parametrize("name", CLASSES)
def test_public_class_has_a_docstring(name):
    assert (getattr(mg, name).__doc__ or "").strip(), name
