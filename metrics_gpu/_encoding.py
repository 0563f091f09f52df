"""Map arbitrary labels (strings, sparse ids, floats) to class codes 0..K-1."""

from __future__ import annotations

import numpy as np

from metrics_gpu._types import ArrayLike


def encode_labels(*arrays: ArrayLike) -> tuple[np.ndarray, ...]:
    """Encode labels of one or more arrays with one shared, sorted class list.

    Parameters
    ----------
    *arrays : array-like of shape (N_i,) or (N_i, 1)
        Labels of one kind, strings or numbers (sparse ids, floats), read on
        the host; at least one array. A mix of the two kinds, a NaN or any
        other shape raises a ``ValueError``.

    Returns
    -------
    classes : ndarray
        The distinct labels of all the arrays, sorted.
    codes_0, codes_1, ... : ndarray of int64
        One per array: ``classes[codes_i]`` gives back ``arrays[i]``; codes
        are int64 in ``0..len(classes)-1``, in the sorted order of the labels
        (as scikit-learn's ``LabelEncoder``).

    See Also
    --------
    label_report : Every label metric of the codes.
    confusion_matrix : The counts of the codes, ``classes`` naming the rows.

    Examples
    --------
    >>> from metrics_gpu import encode_labels
    >>> classes, y_true, y_pred = encode_labels(["cat", "dog", "cat"], ["dog", "dog", "bird"])
    >>> classes.tolist(), y_true.tolist(), y_pred.tolist()
    (['bird', 'cat', 'dog'], [1, 2, 1], [2, 2, 0])
    """
    if not arrays:
        raise ValueError("encode_labels needs at least one array of labels")
    hosts = []
    for i, values in enumerate(arrays):
        if not hasattr(values, "dtype"):
            _check_one_kind(values, i)
        array = np.asarray(values)
        if array.ndim == 2 and array.shape[1] == 1:
            array = array.reshape(-1)
        if array.ndim != 1:
            raise ValueError(
                f"encode_labels argument {i} must be 1-D, got shape {array.shape}"
            )
        if array.dtype.kind == "f":
            nan = np.isnan(array)
            if nan.any():
                raise ValueError(
                    f"encode_labels argument {i} has NaN at index {int(np.flatnonzero(nan)[0])}"
                )
        hosts.append(array)
    kinds = {"text" if array.dtype.kind in "USO" else "number" for array in hosts if array.size}
    if len(kinds) > 1:
        raise ValueError(
            "encode_labels got a mix of string and number labels; encode one kind only"
        )
    try:
        classes, inverse = np.unique(np.concatenate(hosts), return_inverse=True)
    except TypeError as error:
        raise ValueError(f"labels cannot be sorted together: {error}") from None
    codes, start = [], 0
    for array in hosts:
        codes.append(inverse[start:start + array.size].astype(np.int64).reshape(-1))
        start += array.size
    return (classes, *codes)


def _check_one_kind(values, position: int) -> None:
    """A Python sequence mixing strings and numbers would be stringified by NumPy."""
    kinds = {isinstance(v, (str, bytes)) for v in np.asarray(values, dtype=object).ravel()}
    if len(kinds) > 1:
        raise ValueError(
            f"encode_labels argument {position} mixes string and number labels; "
            "encode one kind only"
        )
