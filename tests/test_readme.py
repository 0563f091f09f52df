"""The README's Python example runs as written."""

from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks(text: str) -> list[str]:
    blocks, inside, current = [], False, []
    for line in text.splitlines():
        if line.strip() == "```python":
            inside, current = True, []
        elif inside and line.strip() == "```":
            inside = False
            blocks.append("\n".join(current))
        elif inside:
            current.append(line)
    return blocks


def test_readme_example_runs():
    """Every python block of the README runs; the Dask ones only where Dask is
    installed (the [dask] extra; the test extra has it, a GPU image may not)."""
    import importlib.util

    blocks = python_blocks(README.read_text())
    assert blocks, "the README has no python example"
    without_dask = importlib.util.find_spec("dask") is None
    needs_dask = [block for block in blocks if "dask" in block]
    for block in blocks:
        if without_dask and block in needs_dask:
            continue
        exec(compile(block, str(README), "exec"), {})
    if without_dask and needs_dask:
        pytest.skip(f"{len(needs_dask)} README block(s) use Dask, which is not "
                    "installed (the others ran)")
