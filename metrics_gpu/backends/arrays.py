"""Where an array lives, read from the array itself: the test every floor
above uses to send device arrays to the ``cuda`` backend. Imports no array
library: a library that is not imported yet cannot have made the array.
"""

from __future__ import annotations

import sys


def is_device_array(array: object) -> bool:
    """True for arrays that live on a GPU: CuPy, torch CUDA tensors, JAX GPU arrays."""
    # torch first, and its tensors' flag as it is: the in-loop calls' inputs.
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(array, torch.Tensor):
        return array.is_cuda
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(array, cupy.ndarray):
        return True
    jax = sys.modules.get("jax")
    if jax is not None and isinstance(array, jax.Array):
        return any(device.platform == "gpu" for device in array.devices())
    return False
