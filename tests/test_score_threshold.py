"""One threshold rule on every backend (issue 47, item 5).

A multilabel score predicts its label where it is above the threshold
compared by value: the score widened exactly to float64 against the
threshold (probabilities) or against ``log(t / (1 - t))`` computed in float64
(logits), as kernels/multilabel.cu compares them. The NumPy backend compared
with the threshold rounded to the scores' dtype (NumPy's reading of a Python
float beside float32 or float16 scores): a float32 0.3 (0.30000001...) was
not above threshold=0.3 there, and was on the kernels.

The scores here are the neighbours of the cut in each dtype (the value
nearest it, and the next ones down and up), for a threshold whose nearest
value in that dtype lies above it (where a rounded threshold answers
wrongly) and one whose nearest value lies below. The reference is Python's
exact float comparison ``float(score) > cut``, then scikit-learn on those
predictions, for every function that takes ``scores=`` and for
:class:`metrics_gpu.MultilabelMetrics`.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import sklearn.metrics as skm

import metrics_gpu as mg

torch = pytest.importorskip("torch")

RTOL = 1e-12
DTYPES = ("float16", "bfloat16", "float32", "float64")
KINDS = ("probabilities", "logits")
CANDIDATE_THRESHOLDS = (0.3, 0.7, 0.1, 0.2, 0.4, 0.6, 0.8, 0.9, 0.15, 0.35)
# Every functional call that takes scores= (the averages that read each count).
SCORE_CALLS = (("accuracy_score", {}), ("zero_one_loss", {}), ("hamming_loss", {}),
               ("precision_recall_fscore_support", {"average": None}),
               ("precision_score", {"average": "micro"}),
               ("recall_score", {"average": "macro"}),
               ("f1_score", {"average": "samples"}),
               ("fbeta_score", {"beta": 2.0, "average": "weighted"}),
               ("jaccard_score", {"average": "samples"}),
               ("specificity_score", {"average": "macro"}),
               ("classification_report", {"output_dict": True}),
               ("multilabel_confusion_matrix", {}))
Y_TRUE = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0], [0, 0, 1], [1, 0, 0], [0, 1, 0]])


def cut_of(threshold: float, kind: str) -> float:
    """The documented cut: the threshold, or log(t / (1 - t)) in float64."""
    return threshold if kind == "probabilities" else math.log(threshold / (1 - threshold))


def neighbours(cut: float, dtype: str) -> list[float]:
    """The values of ``dtype`` next to ``cut``: the nearest one, and the next
    ones down and up (as float64, exactly)."""
    if dtype == "bfloat16":
        nearest = torch.tensor([cut], dtype=torch.float64).to(torch.bfloat16)
        bits = nearest.view(torch.int16)
        steps = torch.tensor([-1, 0, 1], dtype=torch.int16)
        values = (bits + steps).view(torch.bfloat16).double().tolist()
        return sorted(values)
    kind = np.dtype(dtype).type
    nearest = kind(cut)
    return [float(np.nextafter(nearest, kind(-np.inf))), float(nearest),
            float(np.nextafter(nearest, kind(np.inf)))]


def nearest_side(cut: float, dtype: str) -> int:
    """+1 where ``dtype``'s value nearest ``cut`` lies above it, -1 below, 0 at it."""
    nearest = neighbours(cut, dtype)[1]
    return (nearest > cut) - (nearest < cut)


def thresholds_for(dtype: str, kind: str) -> list[float]:
    """A threshold whose cut rounds up in ``dtype`` and one that rounds down
    (float64 holds every cut: two of them)."""
    chosen = {}
    for threshold in CANDIDATE_THRESHOLDS:
        chosen.setdefault(nearest_side(cut_of(threshold, kind), dtype), threshold)
    if dtype == "float64":
        return [0.3, 0.7]
    assert 1 in chosen and -1 in chosen, (dtype, kind, chosen)
    return [chosen[1], chosen[-1]]


def scores_at(cut: float, dtype: str):
    """(N, 3) scores: each row the three neighbours of ``cut``, each in
    every column somewhere; as float64 values and as the dtype's array
    (a torch tensor for bfloat16)."""
    below, nearest, above = neighbours(cut, dtype)
    rows = [[below, nearest, above], [nearest, above, below], [above, below, nearest],
            [nearest, nearest, below], [above, nearest, nearest], [nearest, below, nearest]]
    values = np.array(rows, dtype=np.float64)
    if dtype == "bfloat16":
        held = torch.tensor(values, dtype=torch.float64).to(torch.bfloat16)
        assert held.double().numpy().tolist() == values.tolist()
        return values, held
    held = values.astype(dtype)
    assert held.astype(np.float64).tolist() == values.tolist()
    return values, held


def _host(value):
    if isinstance(value, torch.Tensor):
        return value.numpy()
    return np.asarray(value.get() if hasattr(value, "get") else value)


def _sklearn(name, y_true, y_pred, kwargs):
    if name in ("specificity_score",):  # the recall of the complements
        return skm.recall_score(1 - y_true, 1 - y_pred, zero_division=0, **kwargs)
    zero = {} if name in ("accuracy_score", "zero_one_loss", "hamming_loss",
                          "multilabel_confusion_matrix") else {"zero_division": 0}
    return getattr(skm, name)(y_true, y_pred, **zero, **kwargs)


def _assert_same(ours, expected):
    if isinstance(expected, dict):
        assert ours.keys() == expected.keys()
        for key in expected:
            _assert_same(ours[key], expected[key])
        return
    if isinstance(expected, tuple):
        for a, b in zip(ours, expected):
            _assert_same(a, b)
        return
    np.testing.assert_allclose(_host(ours), np.asarray(expected, dtype=np.float64), rtol=RTOL)


def _on(backend, values):
    """``values`` where ``backend`` computes (a torch tensor as it is)."""
    return values if isinstance(values, torch.Tensor) else backend.asarray(values)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_scores_at_the_threshold_compare_by_value(backend, dtype, kind):
    for threshold in thresholds_for(dtype, kind):
        cut = cut_of(threshold, kind)
        values, held = scores_at(cut, dtype)
        predicted = (values > cut).astype(np.int64)  # Python floats: exact
        assert predicted.any() and not predicted.all()
        t, s = backend.asarray(Y_TRUE), _on(backend, held)
        with mg.use_backend(backend.name):
            for name, kwargs in SCORE_CALLS:
                extra = {} if name in ("accuracy_score", "zero_one_loss", "hamming_loss",
                                       "multilabel_confusion_matrix") else {"zero_division": 0}
                ours = getattr(mg, name)(t, s, scores=kind, threshold=threshold, **extra,
                                         **kwargs)
                expected = _sklearn(name, Y_TRUE, predicted,
                                    {k: v for k, v in kwargs.items()})
                _assert_same(ours, expected)
            stream = mg.MultilabelMetrics(3, scores=kind, threshold=threshold)
            stream.update(t, s)
        report = stream.compute()
        np.testing.assert_array_equal(report.confusion_matrix,
                                      skm.multilabel_confusion_matrix(Y_TRUE, predicted))
        assert float(report["hamming_loss"]) == pytest.approx(
            skm.hamming_loss(Y_TRUE, predicted), rel=RTOL)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("threshold", [0.3, 0.7])
def test_the_issues_example(backend, dtype, threshold):
    """0.3 is 0.30000001... in float32 (0.30004883 in float16), above
    threshold=0.3: predicted, so nothing is wrong (it was 0.5 on NumPy); 0.7
    is 0.69999999... in float32, not above 0.7: one label of two wrong (but
    0.70019531 in float16: above), on every backend."""
    y_true = backend.asarray(np.array([[1, 1]]))
    scores = backend.asarray(np.array([[threshold, 0.9]], dtype))
    expected = 0.0 if (threshold, dtype) != (0.7, "float32") else 0.5
    with mg.use_backend(backend.name):
        assert float(_host(mg.hamming_loss(y_true, scores, scores="probabilities",
                                           threshold=threshold))) == expected
        stream = mg.MultilabelMetrics(2, scores="probabilities", threshold=threshold)
        stream.update(y_true, scores)
    assert float(stream.compute()["hamming_loss"]) == expected


def test_scores_above_is_the_exact_comparison():
    """The NumPy comparison (metrics_gpu._validation.scores_above) against
    Python's exact one, for every float dtype, cuts between, at and beyond
    their values (infinite cuts of logits at thresholds 0 and 1 included)."""
    from metrics_gpu._validation import scores_above

    rng = np.random.default_rng(7)
    for dtype in (np.float16, np.float32, np.float64):
        scores = np.concatenate([rng.normal(size=200), rng.uniform(0, 1, 200),
                                 [0.0, -0.0, 1.0, 65504.0, -65504.0]]).astype(dtype)
        cuts = [float(v) for v in scores[:20]] + [0.3, 0.7, -1e10, 1e10, 1e-8, -1e-8,
                                                  math.inf, -math.inf, 0.1 + 1e-17]
        for cut in cuts:
            expected = np.array([float(v) > cut for v in scores])
            np.testing.assert_array_equal(scores_above(scores, cut), expected, err_msg=str(cut))
    integers = np.array([0, 1, 2, -3])
    np.testing.assert_array_equal(scores_above(integers, 0.5), [False, True, True, False])
