"""The README stays true and short: its Python examples run as written, its
set-up block is on the first screen and its demo command runs."""

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
    installed (the [dask] extra; the test extra has it, a GPU image may not).
    The Spark ones run in tests/test_spark.py, on its SparkSession (the
    [spark] extra and Java: CI's own step)."""
    import importlib.util

    blocks = [block for block in python_blocks(README.read_text()) if "pyspark" not in block]
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


def test_readme_is_short():
    """The README is the front door (what, install, set-up, three examples,
    the table, links); the rest lives in docs/."""
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines (at most 200: move detail to docs/)"


def setup_commands() -> list[str]:
    """The commands of the README's "Set-up: two commands" block, in order."""
    text = README.read_text()
    section = text.split("## Set-up: two commands", 1)[1]
    block = section.split("```bash", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_readme_setup_is_on_the_first_screen():
    head = "\n".join(README.read_text().splitlines()[:45])
    assert "## Set-up: two commands" in head
    assert "python -m pytest" in "\n".join(setup_commands()[1:2]), "the second command runs the tests"


def test_readme_demo_command_runs():
    """The set-up block's first command ends in the demo, which runs as written
    (here through this interpreter's console script; the virtualenv and the
    install are what this test runs in)."""
    import os
    import subprocess
    import sys

    demo = setup_commands()[0].split("&&")[-1].split()
    assert demo[0] == ".venv/bin/metrics-gpu", demo
    script = Path(sys.executable).parent / "metrics-gpu"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "metrics_gpu.cli"]
    env = {key: value for key, value in os.environ.items() if key != "METRICS_GPU_BACKEND"}
    result = subprocess.run(command + demo[1:], capture_output=True, text=True, env=env,
                            timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert "full report in" in result.stdout, result.stdout
