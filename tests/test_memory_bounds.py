"""Memory of every pass over ``(N, K)`` scores on the NumPy backend is bounded.

Scores often arrive memory-mapped (``np.load(path, mmap_mode="r")``): a pass
that copies or converts them whole reads the file into memory. The file's own
pages count in RSS while mapped, so the tests measure what NumPy allocates
(NumPy reports its allocations to :mod:`tracemalloc`). The chunk constants are
made small so that a file of a few MiB is many chunks long; the peak must stay
under a quarter of the file (a whole-array temporary of any dtype is at least
half of it: a bool mask of float16 scores).
"""

from __future__ import annotations

import tracemalloc

import ml_dtypes
import numpy as np
import pytest

import metrics_gpu as mg
from metrics_gpu._validation import common as validation_common
from metrics_gpu.backends import numpy_backend

N, K = 40_000, 64


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setattr(numpy_backend, "CHUNK_SAMPLES", 1 << 12)
    monkeypatch.setattr(numpy_backend, "CHUNK_SCORE_ELEMENTS", 1 << 14)
    monkeypatch.setattr(validation_common, "CHECK_CHUNK_ELEMENTS", 1 << 14)
    with mg.use_backend("numpy"):
        yield


def _memmap(tmp_path, array):
    """``array`` as a read-only memory-mapped file; bfloat16 through its bits
    (``.npy`` stores it as raw ``V2``)."""
    path = tmp_path / "scores.npy"
    bfloat16 = array.dtype == ml_dtypes.bfloat16
    np.save(path, array.view(np.uint16) if bfloat16 else array)
    mapped = np.load(path, mmap_mode="r")
    return mapped.view(ml_dtypes.bfloat16) if bfloat16 else mapped


def _peak_allocated(call):
    """(result, peak bytes NumPy and Python allocated during ``call()``)."""
    tracemalloc.start()
    try:
        result = call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(13)
    logits = rng.standard_normal((N, K)).astype(np.float32)
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y_true = rng.integers(0, K, N)
    return y_true, logits, probabilities.astype(np.float32)


def _as_dict(value):
    if hasattr(value, "__dataclass_fields__"):
        return {name: _as_dict(getattr(value, name)) for name in value.__dataclass_fields__}
    if isinstance(value, dict):
        return {key: _as_dict(v) for key, v in value.items()}
    return np.asarray(value).tolist()


LABEL_CALLS = {
    "accuracy_score": lambda y, s: mg.accuracy_score(y, s),
    "confusion_matrix": lambda y, s: mg.confusion_matrix(y, s),
    # The report resolves lazily: to_dict() runs its pass inside the measurement.
    "label_report": lambda y, s: mg.label_report(y, s).to_dict(),
    "f1_score_macro": lambda y, s: mg.f1_score(y, s, average="macro"),
    "cohen_kappa_quadratic": lambda y, s: mg.cohen_kappa_score(y, s, weights="quadratic"),
    "catboost_accuracy": lambda y, s: mg.catboost_metric("Accuracy", y, s),
}
LOGIT_CALLS = {
    "log_loss_logits": lambda y, s: mg.log_loss(y, s, from_logits=True),
    "logits_report": lambda y, s: mg.logits_report(y, s),
    "hinge_loss": lambda y, s: mg.hinge_loss(y, s),
    "top_k_accuracy_score": lambda y, s: mg.top_k_accuracy_score(y, s, k=3),
    "catboost_multiclass": lambda y, s: mg.catboost_metric("MultiClass", y, s),
}
PROBABILITY_CALLS = {
    "log_loss": lambda y, s: mg.log_loss(y, s),
    "brier_score_loss": lambda y, s: mg.brier_score_loss(y, s),
    "expected_calibration_error": lambda y, s: mg.expected_calibration_error(y, s),
}


# bfloat16 probabilities are left out: their rows need not sum to 1 closely.
CASES = ([(name, dtype) for name in (*LABEL_CALLS, *LOGIT_CALLS)
          for dtype in ("float32", "bfloat16")]
         + [(name, "float32") for name in PROBABILITY_CALLS])


@pytest.mark.parametrize(("name", "dtype"), CASES)
def test_memmapped_scores_take_bounded_memory(tmp_path, data, name, dtype):
    y_true, logits, probabilities = data
    call = {**LABEL_CALLS, **LOGIT_CALLS, **PROBABILITY_CALLS}[name]
    scores = probabilities if name in PROBABILITY_CALLS else logits
    if dtype == "bfloat16":
        scores = scores.astype(ml_dtypes.bfloat16)
    mapped = _memmap(tmp_path, scores)
    file_bytes = mapped.nbytes
    expected = call(y_true, np.array(scores))  # in memory: the same numbers
    result, peak = _peak_allocated(lambda: call(y_true, mapped))
    np.testing.assert_equal(_as_dict(result), _as_dict(expected))
    assert peak < file_bytes / 4, (
        f"{name} on {file_bytes / 2**20:.1f} MiB of memory-mapped {dtype} scores allocated "
        f"{peak / 2**20:.1f} MiB"
    )


def test_nonfinite_search_is_chunked(tmp_path, data):
    """A NaN is found (and named) without a mask over the whole array."""
    _, logits, _ = data
    scores = logits.copy()
    scores[N - 3, 5] = np.nan
    mapped = _memmap(tmp_path, scores)
    y_true = np.zeros(N, dtype=np.int64)

    def call():
        with pytest.raises(ValueError, match=rf"row {N - 3}, column 5"):
            mg.accuracy_score(y_true, mapped)

    _, peak = _peak_allocated(call)
    assert peak < mapped.nbytes / 4


def test_row_argmax_matches_numpy_in_chunks():
    """Chunked argmax: ties to the lowest index (NumPy's rule), bfloat16 included."""
    rng = np.random.default_rng(5)
    scores = rng.integers(0, 3, size=(5000, 7)).astype(np.float32)  # many ties
    for array in (scores, scores.astype(ml_dtypes.bfloat16), scores.astype(np.float16)):
        np.testing.assert_array_equal(numpy_backend.row_argmax(array),
                                      np.argmax(array, axis=1))
