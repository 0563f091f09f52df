"""An (N, L) multilabel input as the multilabel kernels read it: the caller's
memory and its element code where the kernel can read it in place, and
``ignore_index`` as the kernel compares it. Shared by the counts, the ranking
sums and the streaming state.
"""

from __future__ import annotations

import sys

import numpy as np

from metrics_gpu._validation import cell_ignore_value, host_tensor
from metrics_gpu.backends.launchers.multilabel import BFLOAT16_CODE, ELEMENT_CODES


def _ignore_value(ignore_index: int | None, dtype) -> float | None:
    """``ignore_index`` as the kernel compares it for targets of ``dtype``
    (int8 is read as uint8; a value the dtype cannot hold never matches:
    :func:`cell_ignore_value`)."""
    value = cell_ignore_value(ignore_index, dtype)
    if value is None:
        return None
    if dtype.kind in "iu" and dtype.itemsize == 1 and value < 0:
        return float(value + 256)
    return float(value)


def kernel_input(values, backend, name: str):
    """``(array, element code)`` of an (N, L) input as the kernel reads it:
    the caller's memory where its rows are contiguous and its dtype has a
    code (a torch bfloat16 tensor as its 16-bit patterns), else a copy."""
    torch = sys.modules.get("torch")
    code = None
    if torch is not None and isinstance(values, torch.Tensor) and values.dtype == torch.bfloat16:
        values, code = values.view(torch.int16), BFLOAT16_CODE
    # A torch CPU tensor as NumPy: a GPU backend copies host data, not DLPack's.
    array = backend.asarray(host_tensor(values))
    if array.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be numeric, got dtype {array.dtype}")
    if code is None:
        code = ELEMENT_CODES.get(array.dtype.name)
        if code is None:  # int16, uint16 ... read as float64 (exact)
            array, code = array.astype(np.float64), ELEMENT_CODES["float64"]
    if array.strides[1] != array.itemsize or array.strides[0] % array.itemsize:
        array = backend.xp.ascontiguousarray(array)
    return array, code
