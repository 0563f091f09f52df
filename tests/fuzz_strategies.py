"""Hypothesis strategies for the differential fuzz tests (tests/test_fuzz.py).

Inputs as users hand them over: every NumPy integer dtype for labels (and
bool for two classes), every float dtype for scores and weights, both byte
orders, strided, reversed, Fortran-ordered and memory-mapped arrays; weights
of floats, of integers up to their dtype's limit, and of zeros; `labels=`,
`num_classes` and `ignore_index` in range, out of range, negative, or equal
to a column position. Each drawn case also carries the plain data
(native int64 labels, float64 or native-dtype scores, float64 weights) that
the reference computes on.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from hypothesis import strategies as st

INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
FLOAT_DTYPES = ("float16", "float32", "float64", "longdouble")
LAYOUTS = ("contiguous", "strided", "reversed", "fortran", "memmap")

_memmap_directory: Path | None = None


def _scratch() -> Path:
    global _memmap_directory
    if _memmap_directory is None:
        _memmap_directory = Path(tempfile.mkdtemp(prefix="metrics-gpu-fuzz-"))
        atexit.register(shutil.rmtree, _memmap_directory, True)
    return _memmap_directory


def dtype_of(name: str, order: str) -> np.dtype:
    """``name`` in byte order ``order`` ('<' or '>'; no-op for 1-byte types)."""
    dtype = np.dtype(name)
    return dtype if dtype.itemsize == 1 else dtype.newbyteorder(order)


@st.composite
def byte_orders(draw):
    return draw(st.sampled_from(("<", ">")))


def lay_out(array: np.ndarray, layout: str) -> np.ndarray:
    """The same values in ``layout``: a view into a larger buffer, a file, ..."""
    if layout == "strided":  # every other element of a buffer twice as long
        buffer = np.zeros((2 * array.shape[0],) + array.shape[1:], dtype=array.dtype)
        buffer[::2] = array
        return buffer[::2]
    if layout == "reversed":  # negative strides
        return array[::-1].copy()[::-1]
    if layout == "fortran":
        return np.asfortranarray(array)
    if layout == "memmap" and array.size:
        handle, name = tempfile.mkstemp(dir=_scratch(), suffix=".bin")
        os.close(handle)  # the memmap opens the file itself; one descriptor per case leaked
        path = Path(name)
        mapped = np.memmap(path, dtype=array.dtype, mode="w+", shape=array.shape)
        mapped[...] = array
        mapped.flush()
        return np.memmap(path, dtype=array.dtype, mode="r", shape=array.shape)
    return np.ascontiguousarray(array)


@dataclass
class Case:
    """One fuzz input: the arrays as given to metrics-gpu, and the reference's plain copies."""

    k: int
    y_true: np.ndarray          # as handed to metrics-gpu
    second: np.ndarray          # y_pred labels, or scores
    weights: np.ndarray | None
    options: dict = field(default_factory=dict)  # num_classes / labels / ignore_index
    plain_true: np.ndarray | None = None   # int64
    plain_second: np.ndarray | None = None
    plain_weights: np.ndarray | None = None  # float64

    def __repr__(self):
        def show(a):
            return None if a is None else f"np.array({a.tolist()!r}, dtype={a.dtype.str!r})"
        layout = {n: (a.flags.c_contiguous, a.flags.f_contiguous, type(a).__name__)
                  for n, a in (("y_true", self.y_true), ("second", self.second))}
        return (f"Case(k={self.k}, y_true={show(self.y_true)}, second={show(self.second)}, "
                f"weights={show(self.weights)}, options={self.options}, layout={layout})")


@st.composite
def weights(draw, n: int):
    """None, float weights (zeros included), integers up to the dtype's limit, or all zeros."""
    kind = draw(st.sampled_from(("none", "float", "int", "int-huge", "zeros")))
    if kind == "none":
        return None, None
    order = draw(byte_orders())
    if kind == "float":
        name = draw(st.sampled_from(FLOAT_DTYPES))
        values = draw(st.lists(st.one_of(st.just(0.0), st.floats(0.0, 1e3)),
                               min_size=n, max_size=n))
        plain = np.array(values, dtype=np.dtype(name)).astype(np.float64)
    elif kind in ("int", "int-huge"):
        name = draw(st.sampled_from(INT_DTYPES))
        # Up to the dtype's limit, or to where the reference's float64 sums stop
        # being exact (2**53 over the N weights), whichever is smaller: past that
        # scikit-learn's own answer is off (a zero-one loss of -2). Sums past
        # 2**53 and 2**63 are checked against Python integers in
        # tests/test_reliability_kernels.py.
        top = min(int(np.iinfo(name).max), (1 << 53) // max(n, 1))
        high = top if kind == "int-huge" else min(top, 10)
        low = top // 2 if kind == "int-huge" and draw(st.booleans()) else 0
        plain = np.array(draw(st.lists(st.integers(low, high), min_size=n, max_size=n)),
                         dtype=object)
    else:
        name = draw(st.sampled_from(FLOAT_DTYPES + INT_DTYPES))
        plain = np.zeros(n, dtype=object)
    given = lay_out(np.array(plain, dtype=dtype_of(name, order)),
                    draw(st.sampled_from(("contiguous", "strided", "memmap"))))
    return given, np.array([float(v) for v in plain], dtype=np.float64)


@st.composite
def label_arrays(draw, k: int, n: int, name: str = "labels"):
    """(N,) class codes in 0..k-1 in a drawn integer dtype, order and layout."""
    values = np.array(draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)),
                      dtype=np.int64)
    if k <= 2 and draw(st.booleans()) and draw(st.booleans()):
        dtype = np.dtype(bool)
    else:
        dtype = dtype_of(draw(st.sampled_from(INT_DTYPES)), draw(byte_orders()))
    layout = draw(st.sampled_from(("contiguous", "strided", "reversed", "memmap")))
    return lay_out(values.astype(dtype), layout), values


def ignore_index_choices(k: int, codes: list[int]) -> st.SearchStrategy:
    """ignore_index: None, a class code, a column position, past the classes, negative."""
    return st.sampled_from([None, codes[0], codes[-1], 0, k - 1, k + 3, 250, -1, -100])


def _inject(draw, values: np.ndarray, ignore_index, dtype: np.dtype) -> np.ndarray:
    """Set some targets to ``ignore_index`` when the label dtype can hold it."""
    if ignore_index is None or values.size == 0 or dtype == np.dtype(bool):
        return values
    info = np.iinfo(dtype)
    if not info.min <= ignore_index <= info.max:
        return values
    mask = np.array(draw(st.lists(st.booleans(), min_size=values.size, max_size=values.size)))
    out = values.copy()
    out[mask] = ignore_index
    return out


@st.composite
def label_cases(draw, *, takes_labels: bool, takes_num_classes: bool = True, max_k: int = 6,
                max_n: int = 40):
    """Labels against labels, with num_classes / labels / ignore_index / weights."""
    k = draw(st.integers(1, max_k))
    n = draw(st.integers(1, max_n))
    y_true, plain_true = draw(label_arrays(k, n))
    y_pred, plain_pred = draw(label_arrays(k, n))
    options = {}
    mode = draw(st.sampled_from(("present",)
                                + (("num_classes",) if takes_num_classes else ())
                                + (("labels",) if takes_labels else ())))
    if mode == "num_classes":
        options["num_classes"] = k + draw(st.integers(0, 2))
    elif mode == "labels":
        pool = list(range(k + 2))
        options["labels"] = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=len(pool),
                                          unique=True))
    if takes_num_classes and draw(st.booleans()):
        ignore = draw(ignore_index_choices(k, list(range(k))))
        if ignore is not None:
            options["ignore_index"] = ignore
            injected = _inject(draw, plain_true, ignore, y_true.dtype)
            if injected is not plain_true:
                plain_true = injected
                y_true = lay_out(injected.astype(y_true.dtype), "contiguous")
    given_w, plain_w = draw(weights(n))
    return Case(k, y_true, y_pred, given_w, options, plain_true, plain_pred, plain_w)


@st.composite
def score_cases(draw, *, kind: str, max_k: int = 5, max_n: int = 30, min_k: int = 2,
                labels: bool = True, ignore_index: bool = True):
    """Labels against (N, K) scores: probabilities (``kind="proba"``) or decision values.

    ``labels=`` maps the columns to sorted class codes (e.g. [3, 7]); the
    targets are drawn from those codes; ``ignore_index`` is one of them, a
    column position, or neither.
    """
    k = draw(st.integers(min_k, max_k))
    n = draw(st.integers(1, max_n))
    use_labels = labels and draw(st.booleans())
    codes = (sorted(draw(st.lists(st.integers(0, 20), min_size=k, max_size=k, unique=True)))
             if use_labels else list(range(k)))
    plain_true = np.array([codes[i] for i in draw(st.lists(st.integers(0, k - 1),
                                                           min_size=n, max_size=n))],
                          dtype=np.int64)
    label_dtype = dtype_of(draw(st.sampled_from(INT_DTYPES)), draw(byte_orders()))
    if plain_true.max() > np.iinfo(label_dtype).max:
        label_dtype = np.dtype(np.int64)
    options = {"labels": codes} if use_labels else {}
    if ignore_index and draw(st.booleans()):
        ignore = draw(ignore_index_choices(k, codes))
        if ignore is not None:
            options["ignore_index"] = ignore
            plain_true = _inject(draw, plain_true, ignore, label_dtype)
    raw = np.array(draw(st.lists(st.lists(st.floats(-8, 8, allow_nan=False), min_size=k,
                                          max_size=k), min_size=n, max_size=n)),
                   dtype=np.float64).reshape(n, k)
    if draw(st.booleans()):  # ties
        raw = np.round(raw)
    score_name = draw(st.sampled_from(FLOAT_DTYPES))
    if kind == "proba":
        exp = np.exp(raw - raw.max(axis=1, keepdims=True))
        raw = exp / exp.sum(axis=1, keepdims=True)
        choice = draw(st.sampled_from(("smooth", "one-hot", "grid")))
        if choice == "one-hot":  # exact 0/1 probabilities
            raw = np.eye(k)[raw.argmax(axis=1)]
        elif choice == "grid":  # multiples of 1/d: confidences on calibration bin edges b/B
            d = draw(st.integers(2, 30))
            raw = np.floor(raw * d) / d
            raw[:, -1] = 1.0 - raw[:, :-1].sum(axis=1)
    scores = raw.astype(score_name)
    given_scores = lay_out(scores.astype(dtype_of(score_name, draw(byte_orders()))),
                           draw(st.sampled_from(LAYOUTS)))
    given_true = lay_out(plain_true.astype(label_dtype),
                         draw(st.sampled_from(("contiguous", "strided", "memmap"))))
    given_w, plain_w = draw(weights(n))
    return Case(k, given_true, given_scores, given_w, options, plain_true, scores, plain_w)


@st.composite
def binary_score_cases(draw, max_n: int = 40):
    """Binary targets (0/1, or codes) against 1-D scores, for the ranking metrics."""
    n = draw(st.integers(2, max_n))
    plain_true = np.array(draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)),
                          dtype=np.int64)
    label_dtype = (np.dtype(bool) if draw(st.booleans())
                   else dtype_of(draw(st.sampled_from(INT_DTYPES)), draw(byte_orders())))
    score_name = draw(st.sampled_from(FLOAT_DTYPES))
    raw = np.array(draw(st.lists(st.floats(-4, 4, allow_nan=False), min_size=n, max_size=n)))
    if draw(st.booleans()):
        raw = np.round(raw)
    scores = raw.astype(score_name)
    given_scores = lay_out(scores.astype(dtype_of(score_name, draw(byte_orders()))),
                           draw(st.sampled_from(("contiguous", "strided", "reversed", "memmap"))))
    given_true = lay_out(plain_true.astype(label_dtype),
                         draw(st.sampled_from(("contiguous", "strided", "memmap"))))
    given_w, plain_w = draw(weights(n))
    return Case(2, given_true, given_scores, given_w, {}, plain_true, scores, plain_w)


def multilabel_weights_and_labels(draw, n: int, n_labels: int, max_int_weight: int):
    """For the multilabel properties: sample weights (none, integers 0..max
    with one at least nonzero, or floats) and ``labels=`` (None, or some label
    columns in any order), drawn with hypothesis's ``draw``."""
    from hypothesis.extra.numpy import arrays

    weight_kind = draw(st.sampled_from(("none", "int", "float")))
    weights = None
    if weight_kind == "int":
        weights = draw(arrays(np.int64, n, elements=st.integers(0, max_int_weight)))
        if not weights.any():
            weights[0] = 1
    elif weight_kind == "float":
        weights = draw(arrays(np.float64, n, elements=st.floats(0.05, 3.0)))
    labels = None
    if draw(st.booleans()):
        labels = draw(st.permutations(range(n_labels)))[:draw(st.integers(1, n_labels))]
    return weights, labels
