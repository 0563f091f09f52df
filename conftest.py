"""Collection rules for the whole of pytest's ``testpaths``: ``tests`` and
``metrics_gpu``, whose modules are collected for their doctests
(``--doctest-modules``). The fixtures are in ``tests/conftest.py``."""

from __future__ import annotations

try:
    import dask.array  # noqa: F401
    import dask.delayed  # noqa: F401
except ImportError:
    # metrics_gpu/dask.py imports Dask at the top (the optional [dask] extra):
    # without it the module cannot be imported, so its doctests cannot be
    # collected, and a machine without Dask still runs every other test.
    collect_ignore = ["metrics_gpu/dask.py"]
