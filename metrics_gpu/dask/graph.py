"""The graph every function of :mod:`metrics_gpu.dask` builds: inputs aligned
to ``y_true``'s chunks -> a state per chunk -> a tree of merges -> a value;
and the argument helpers the label, multilabel and score metrics share.
The one module that imports Dask."""

from __future__ import annotations

import math

import numpy as np

from metrics_gpu._common.extras import install_hint

try:
    import dask
    import dask.array as da
    from dask.delayed import Delayed, delayed
except ImportError as error:  # pragma: no cover - the [dask] extra is missing
    raise ImportError(
        f"metrics_gpu.dask needs Dask: {install_hint('dask')} "
        f"(importing it failed: {error})"
    ) from error

# States merged by one task of the tree: a chunk's state is O(K^2) numbers at
# most (K x K cells, or the streaming state), so eight of them are a small task.
SPLIT_EVERY = 8


# -- the graph: aligned chunks -> a state per chunk -> a tree of merges -> a value ------


def _as_dask(array, name: str, rows=None):
    """``array`` as a Dask array with known chunk sizes along axis 0."""
    if array is None:
        return None
    if not isinstance(array, da.Array):
        shape = np.shape(array)
        # Chunked like y_true when it has as many rows (else the caller names the mismatch).
        array = da.asarray(array) if rows is None or shape[:1] != (sum(rows),) else \
            da.from_array(array, chunks=(rows,) + tuple(-1 for _ in shape[1:]))
    if array.ndim == 0:
        raise ValueError(f"{name} must be an array of one entry per sample, got a scalar")
    if any(math.isnan(size) for size in array.chunks[0]):
        raise ValueError(
            f"{name} has unknown chunk sizes along axis 0 (after boolean indexing, for "
            f"example); call {name}.compute_chunk_sizes() first"
        )
    return array


def _aligned(y_true, others: dict):
    """``y_true`` and the other inputs chunked alike along axis 0 (``y_true``'s
    chunks), whole along the other axes; the first sample of each chunk."""
    y_true = _as_dask(y_true, "y_true")
    rows = y_true.chunks[0]
    n = y_true.shape[0]
    aligned = {}
    for name, array in others.items():
        array = _as_dask(array, name, rows)
        if array is not None:
            if array.shape[0] != n:
                raise ValueError(f"y_true has {n} samples but {name} has {array.shape[0]}")
            array = array.rechunk((rows,) + tuple((size,) for size in array.shape[1:]))
        aligned[name] = array
    y_true = y_true.rechunk((rows,) + tuple((size,) for size in y_true.shape[1:]))
    offsets = tuple(int(v) for v in np.concatenate([[0], np.cumsum(rows)[:-1]]))
    return y_true, aligned, offsets


def _per_chunk(state_of_chunk, arrays, offsets, **options) -> list:
    """One task per chunk: ``state_of_chunk(*chunks, index=, offset=, **options)``."""
    blocks = [None if a is None else a.to_delayed().ravel() for a in arrays]
    return [
        delayed(state_of_chunk, pure=True)(
            *(None if b is None else b[i] for b in blocks), index=i, offset=offsets[i],
            **options)
        for i in range(len(offsets))
    ]


def _tree(states: list, merge, *args):
    """Merge the states ``SPLIT_EVERY`` at a time, level by level, to one
    (``merge(*args, *states)``)."""
    while len(states) > 1:
        states = [
            group[0] if len(group) == 1 else delayed(merge, pure=True)(*args, *group)
            for group in (states[i:i + SPLIT_EVERY] for i in range(0, len(states), SPLIT_EVERY))
        ]
    return states[0]


def _result(merged: Delayed, finish, *args, compute: bool):
    """The value of ``finish(merged state, *args)``: lazily, one more task; with
    ``compute=True`` the merged state is gathered and finished here."""
    if not isinstance(compute, bool):
        raise ValueError(f"compute must be True or False, got {compute!r}")
    if compute:
        (state,) = dask.compute(merged)
        return finish(state, *args)
    return delayed(finish, pure=True)(merged, *args)


def _in_chunk(error: ValueError, index: int, offset: int) -> ValueError:
    return ValueError(f"{error} [positions within chunk {index} along axis 0, which starts at "
                      f"sample {offset} of the whole array]")


# -- arguments read alike by the label, multilabel and score metrics ------------


def _shape(array) -> tuple:
    return tuple(getattr(array, "shape", np.shape(array)))


def _unsupported(name: str, value, supported: str, why: str) -> ValueError:
    return ValueError(f"{name}={value!r} is not supported by metrics_gpu.dask ({why}); "
                      f"{supported}")
