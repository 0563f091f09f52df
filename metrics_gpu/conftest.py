"""Collection rules for the package's doctests (``--doctest-modules`` over
``metrics_gpu``, pyproject.toml's ``testpaths``); the fixtures are in
``tests/conftest.py``. Here, not at the repository's root: a second top-level
``conftest`` module would shadow ``tests/conftest.py`` for the tests that
import from it in spawned processes. Left out of the wheel (pyproject.toml)."""

from __future__ import annotations

try:
    import dask.array  # noqa: F401
    import dask.delayed  # noqa: F401
except ImportError:
    # The metrics_gpu.dask package imports Dask at the top (the optional [dask] extra):
    # without it its modules cannot be imported, so their doctests cannot be
    # collected, and a machine without Dask still runs every other test.
    collect_ignore = ["dask"]

try:
    import pyarrow  # noqa: F401
    import pyspark.sql  # noqa: F401
except ImportError:
    # metrics_gpu.spark imports PySpark and pyarrow (the optional [spark] extra),
    # which the [test] extra does not install: tests/test_spark.py runs in a
    # step of its own in CI (.ci/run).
    collect_ignore = [*globals().get("collect_ignore", []), "spark"]
