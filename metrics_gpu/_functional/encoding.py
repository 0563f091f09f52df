"""Map arbitrary labels (strings, sparse ids, floats) to class codes 0..K-1."""

from __future__ import annotations

import numpy as np

from metrics_gpu._common.types import ArrayLike
from metrics_gpu._validation import check_label_arrays, float_integer_limit

_INT64_MAX = int(np.iinfo(np.int64).max)


def encode_labels(*arrays: ArrayLike) -> tuple[np.ndarray, ...]:
    """Encode labels of one or more arrays with one shared, sorted class list.

    Parameters
    ----------
    *arrays : array-like of shape (N_i,) or (N_i, 1)
        Labels of one kind, strings or numbers (sparse ids of any integer
        type, floats, bools, Python numbers in object arrays), read on the
        host; at least one array. A mix of the two kinds, a missing label
        (NaN, None) or any other shape raises a ``ValueError`` naming the
        array and the position (scikit-learn's ``LabelEncoder`` would make
        NaN a class; no metric has a class for it).

    Returns
    -------
    classes : ndarray
        The distinct labels of all the arrays, sorted, in a dtype that holds
        each of them exactly: NumPy's promotion of the arrays' dtypes, except
        where it would round distinct ids together (uint64 next to a signed
        integer type promotes to float64): then int64 or uint64 when every
        label fits, else an object array of Python numbers.
    codes_0, codes_1, ... : ndarray of int64
        One per array: ``classes[codes_i]`` gives back ``arrays[i]``; codes
        are int64 in ``0..len(classes)-1``, in the sorted order of the labels
        (as scikit-learn's ``LabelEncoder``). Equal labels share a code
        whatever their types (``10`` in an object array, ``10`` in an int64
        array).

    See Also
    --------
    label_report : Every label metric of the codes.
    confusion_matrix : The counts of the codes, ``classes`` naming the rows.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import encode_labels
    >>> classes, y_true, y_pred = encode_labels(["cat", "dog", "cat"], ["dog", "dog", "bird"])
    >>> classes.tolist(), y_true.tolist(), y_pred.tolist()
    (['bird', 'cat', 'dog'], [1, 2, 1], [2, 2, 0])

    64-bit ids of two integer types stay distinct:

    >>> classes, ids, other = encode_labels(np.array([2**63 + 1, 2**63 + 2], dtype=np.uint64),
    ...                                     np.array([7, 7]))
    >>> classes.tolist(), ids.tolist(), other.tolist()
    ([7, 9223372036854775809, 9223372036854775810], [1, 2], [0, 0])
    """
    hosts = check_label_arrays(arrays)
    present = [array for array in hosts if array.size]
    if not present:
        empty = np.zeros(0, dtype=np.int64)
        return (hosts[0][:0], *(empty for _ in hosts))
    try:
        classes, inverse = np.unique(_exact_concatenation(present), return_inverse=True)
    except TypeError as error:
        raise ValueError(f"labels cannot be sorted together: {error}") from None
    codes, start = [], 0
    for array in hosts:
        codes.append(inverse[start:start + array.size].astype(np.int64).reshape(-1))
        start += array.size
    return (classes, *codes)


def _exact_concatenation(arrays: list[np.ndarray]) -> np.ndarray:
    """The labels of every array in one array whose dtype holds each exactly.

    NumPy promotes an int64 next to a uint64 (or an integer next to a float)
    to float64, which rounds integers past 2**53 and so merges distinct ids:
    the common dtype is then int64 or uint64 when every integer fits, else
    Python objects, which compare exactly (``2**63 + 1 > -1``, ``2**53 + 1 !=
    2.0**53``).
    """
    dtypes = [array.dtype for array in arrays]
    if any(dtype.kind not in "iubfc" for dtype in dtypes):
        return np.concatenate(arrays)  # strings and objects: compared as they are
    promoted = np.result_type(*dtypes)
    common: np.dtype | None = promoted
    integers = [array for array in arrays if array.dtype.kind in "iu"]
    if promoted.kind in "fc" and integers:
        low = min(int(array.min()) for array in integers)
        high = max(int(array.max()) for array in integers)
        if all(dtype.kind in "iub" for dtype in dtypes):  # uint64 next to a signed type
            common = np.dtype(np.int64) if high <= _INT64_MAX else \
                np.dtype(np.uint64) if low >= 0 else None
        elif max(-low, high) > float_integer_limit(promoted):
            common = None  # an integer the floats would round
    if common is None:
        return np.concatenate([array.astype(object) for array in arrays])
    return np.concatenate([array.astype(common, copy=False) for array in arrays])
