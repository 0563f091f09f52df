"""How to install an optional extra: the one wording every message uses.

metrics-gpu is not on a package index, so asking pip for an extra by the
project's name answers "No matching distribution found". An extra is
installed from a checkout (``pip install '.[io]'``) or from the wheel file,
which takes the same ``[extra]`` suffix. Imports nothing, so any module may
use it at import.
"""

from __future__ import annotations

WHEEL_FILE = "metrics_gpu-<version>-py3-none-any.whl"


def install_hint(extra: str, *alternatives: str) -> str:
    """The pip command that installs ``extra`` (or one of ``alternatives``).

    Parameters
    ----------
    extra : str
        The extra of ``[project.optional-dependencies]``, e.g. ``"io"``.
    *alternatives : str
        Extras that do the same for another setup (``"cuda13"`` beside
        ``"cuda12"``); named as choices in a checkout.

    Returns
    -------
    str
        A command that works in a checkout, and its form for the wheel file.

    Examples
    --------
    >>> print(install_hint("io"))  # doctest: +NORMALIZE_WHITESPACE
    pip install '.[io]' in a metrics-gpu checkout
    (from the wheel: pip install 'metrics_gpu-<version>-py3-none-any.whl[io]')
    >>> install_hint("cuda12", "cuda13").split(" in a ")[0]
    "pip install '.[cuda12]' (or '.[cuda13]')"
    """
    choices = "".join(f" (or '.[{name}]')" for name in alternatives)
    return (f"pip install '.[{extra}]'{choices} in a metrics-gpu checkout "
            f"(from the wheel: pip install '{WHEEL_FILE}[{extra}]')")
