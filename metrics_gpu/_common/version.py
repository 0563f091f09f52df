"""The package's version, in one place: ``metrics_gpu.__version__`` and the
reports that print it read it here (pyproject.toml's ``version`` is the same)."""

__version__ = "0.1.0"
