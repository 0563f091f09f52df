"""``ignore_index`` of multilabel-indicator input (issue 47, item 4): cells left out.

A ``(N, L)`` target holding 0, 1 and ``ignore_index`` beside a 0/1 ``y_pred``
is multilabel input whose ignored cells count nowhere, exactly as
:class:`metrics_gpu.MultilabelMetrics` leaves them out (it was read as label
maps: one two-class problem over every cell). References:

* scikit-learn on the same input with the ignored cells set to 0 in both
  ``y_true`` and ``y_pred``: such a cell is a true negative, which no
  precision, recall, F or Jaccard (per label, micro, macro, weighted, or per
  sample) reads, and which matches (subset accuracy); specificity is the
  recall of the complements, the ignored cells set to 0 in them;
* the masked counts themselves (the confusion matrices' tn, the Hamming
  loss: wrong cells over the cells kept, each weighted by its sample);
* ``MultilabelMetrics(ignore_index=...)`` on the same data (functional ==
  stream), on every backend.

A 2-D target holding any other value beside a 0/1 ``y_pred`` is refused
(scikit-learn refuses it too), with the position and what to pass.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import sklearn.metrics as skm
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.exceptions import UndefinedMetricWarning as SkUndefinedMetricWarning

import metrics_gpu as mg
from fuzz_strategies import multilabel_weights_and_labels

# The calls here are about what they read; scikit-learn's 0/0 warnings are
# compared where they matter (check_case records them itself).
pytestmark = pytest.mark.filterwarnings("ignore::metrics_gpu.UndefinedMetricWarning")

RTOL = 1e-12
ATOL = 1e-12
# Examples per backend (~0.1 s each: every function and scikit-learn's twin).
EXAMPLES = {"numpy": 12, "emulated": 6, "cuda": 12}
AVERAGES = (None, "micro", "macro", "weighted", "samples")
ZERO_DIVISIONS = ("warn", 0.0, 1.0, math.nan)
# (ignore_index, target dtype): padding as models hold it.
IGNORED = ((-100, np.int64), (-100, np.int8), (-1, np.int32), (255, np.uint8),
           (-100, np.float32), (-1, np.float64))
SET_WISE = (("precision_recall_fscore_support", {"beta": 1.0}), ("precision_score", {}),
            ("recall_score", {}), ("f1_score", {}), ("fbeta_score", {"beta": 0.5}),
            ("jaccard_score", {}))


@st.composite
def ignored_cases(draw):
    """(y_true holding -1 where ignored, y_pred, keep mask, weights or None,
    labels or None): rows fully ignored, columns fully ignored, empty rows."""
    n = draw(st.integers(1, 8))
    n_labels = draw(st.integers(2, 5))
    cells = arrays(np.bool_, (n, n_labels))
    y_true, y_pred, ignored = draw(cells), draw(cells), draw(cells)
    for row in draw(st.lists(st.integers(0, n - 1), max_size=2)):
        ignored[row] = True  # a row whose every cell is ignored
    for column in draw(st.lists(st.integers(0, n_labels - 1), max_size=1)):
        ignored[:, column] = True
    for row in draw(st.lists(st.integers(0, n - 1), max_size=2)):
        y_pred[row] = False
    weights, labels = multilabel_weights_and_labels(draw, n, n_labels, 3)
    return y_true.astype(np.int64), y_pred.astype(np.int64), ~ignored, weights, labels


def _held(y_true, keep, ignore_index, dtype):
    """The target as the caller holds it: ``ignore_index`` in the cells left out."""
    held = y_true.astype(dtype)
    held[~keep] = ignore_index
    return held


def _as_host(value):
    if value is None:
        return None
    return np.asarray(value.get() if hasattr(value, "get") else value)


def _assert_close(ours, expected):
    if isinstance(expected, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(expected)
        for a, b in zip(ours, expected):
            _assert_close(a, b)
        return
    if expected is None:
        assert ours is None
        return
    value = _as_host(ours)
    assert value.shape == np.shape(expected)
    np.testing.assert_allclose(value, np.asarray(expected, dtype=np.float64), rtol=RTOL,
                               atol=ATOL, equal_nan=True)


def _call(module, name, *args, **kwargs):
    """A result and its UndefinedMetricWarning messages."""
    category = SkUndefinedMetricWarning if module is skm else mg.UndefinedMetricWarning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = getattr(module, name)(*args, **kwargs)
    return result, {str(w.message) for w in caught if issubclass(w.category, category)}


def _masked_matrices(y_true, y_pred, keep, weights, labels, samplewise):
    """The per-label (or per-sample) [[tn, fp], [fn, tp]] of the kept cells."""
    columns = np.arange(y_true.shape[1]) if labels is None else np.asarray(labels)
    t, p, k = (a[:, columns].astype(bool) for a in (y_true, y_pred, keep))
    w = np.ones(len(t)) if weights is None else np.asarray(weights, dtype=np.float64)
    cells = (~t & ~p & k, ~t & p & k, t & ~p & k, t & p & k)
    if samplewise:
        sums = [c.sum(axis=1) * w for c in cells]
    else:
        sums = [w @ c for c in cells]
    return np.stack(sums, axis=1).reshape(-1, 2, 2)


def check_case(backend, y_true, y_pred, keep, weights, labels, average, zero_division,
               ignore_index, dtype):
    held = _held(y_true, keep, ignore_index, dtype)
    t, p = backend.asarray(held), backend.asarray(y_pred.astype(np.uint8))
    w = None if weights is None else backend.asarray(weights)
    zeroed_true, zeroed_pred = y_true * keep, y_pred * keep
    ours_common = dict(sample_weight=w, ignore_index=ignore_index)
    set_wise = dict(labels=labels, average=average, zero_division=zero_division)
    for name, extra in SET_WISE:
        if name == "jaccard_score" and isinstance(zero_division, float) and \
                math.isnan(zero_division):
            continue  # scikit-learn's Jaccard takes no NaN
        expected, expected_warnings = _call(skm, name, zeroed_true, zeroed_pred,
                                            sample_weight=weights, **set_wise, **extra)
        ours, ours_warnings = _call(mg, name, t, p, **ours_common, **set_wise, **extra)
        assert ours_warnings == expected_warnings, name
        _assert_close(ours, expected)
    if average is None and isinstance(zero_division, str):  # the report: every average
        expected, expected_warnings = _call(skm, "classification_report", zeroed_true,
                                            zeroed_pred, sample_weight=weights, labels=labels,
                                            output_dict=True, zero_division=zero_division)
        ours, ours_warnings = _call(mg, "classification_report", t, p, labels=labels,
                                    output_dict=True, zero_division=zero_division,
                                    **ours_common)
        assert ours_warnings == expected_warnings
        assert ours.keys() == expected.keys()
        for key in expected:
            _assert_close(tuple(ours[key].values()), tuple(expected[key].values()))
    if average != "weighted":  # (weighted by the positives' support, not the negatives')
        # Specificity: the recall of the complements, the ignored cells 0 in them.
        expected, _ = _call(skm, "recall_score", (1 - y_true) * keep, (1 - y_pred) * keep,
                            sample_weight=weights, **set_wise)
        ours, _ = _call(mg, "specificity_score", t, p, **ours_common, **set_wise)
        _assert_close(ours, expected)
    for normalize in (True, False):
        for name in ("accuracy_score", "zero_one_loss"):
            expected = getattr(skm, name)(zeroed_true, zeroed_pred, normalize=normalize,
                                          sample_weight=weights)
            _assert_close(getattr(mg, name)(t, p, normalize=normalize, **ours_common),
                          expected)
    row_weight = np.ones(len(y_true)) if weights is None else weights
    wrong = ((y_true != y_pred) & keep).sum(axis=1) @ row_weight
    kept = keep.sum(axis=1) @ row_weight
    _assert_close(mg.hamming_loss(t, p, **ours_common), wrong / kept if kept else math.nan)
    for samplewise in (False, True):
        ours = _as_host(mg.multilabel_confusion_matrix(t, p, labels=labels,
                                                       samplewise=samplewise,
                                                       **ours_common))
        expected = _masked_matrices(y_true, y_pred, keep, weights, labels, samplewise)
        if weights is None:
            assert ours.dtype == np.int64
            np.testing.assert_array_equal(ours, expected.astype(np.int64))
        else:
            np.testing.assert_allclose(ours, expected, rtol=RTOL, atol=ATOL)


def test_ignored_cells_match_sklearn_on_the_cells_kept(backend):
    @settings(deadline=None, max_examples=EXAMPLES[backend.name],
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(case=ignored_cases(), average=st.sampled_from(AVERAGES),
           zero_division=st.sampled_from(ZERO_DIVISIONS), ignored=st.sampled_from(IGNORED))
    def run(case, average, zero_division, ignored):
        y_true, y_pred, keep, weights, labels = case
        check_case(backend, y_true, y_pred, keep, weights, labels, average, zero_division,
                   *ignored)

    run()


STREAM_SCALARS = ("subset_accuracy", "hamming_loss") + tuple(
    f"{rate}_{average}" for rate in ("precision", "recall", "f1", "jaccard")
    for average in ("micro", "macro", "weighted", "samples"))


def _functional(name, t, p, w, zero_division):
    """The functional twin of a MultilabelMetrics scalar."""
    common = dict(sample_weight=w, ignore_index=-100)
    if name == "subset_accuracy":
        return mg.accuracy_score(t, p, **common)
    if name == "hamming_loss":
        return mg.hamming_loss(t, p, **common)
    rate, average = name.rsplit("_", 1)
    function = {"precision": mg.precision_score, "recall": mg.recall_score,
                "f1": mg.f1_score, "jaccard": mg.jaccard_score}[rate]
    return function(t, p, average=average, zero_division=zero_division, **common)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("zero_division", [0.0, 1.0, math.nan], ids=str)
def test_functional_equals_the_stream(backend, rng, weighted, zero_division):
    """The issue's case: f1_score(..., ignore_index=-100) is the stream's
    value for every average, as are subset accuracy (not the cells'
    accuracy), the Hamming loss and the confusion matrices; a fully ignored
    row and a fully ignored label included."""
    n, n_labels = 60, 7
    y_true = (rng.random((n, n_labels)) < 0.4).astype(np.int64)
    y_pred = (rng.random((n, n_labels)) < 0.4).astype(np.int64)
    y_true[rng.random((n, n_labels)) < 0.25] = -100
    y_true[3] = -100
    y_true[:, 5] = -100
    weight = rng.random(n) + 0.1 if weighted else None
    t, p = backend.asarray(y_true), backend.asarray(y_pred)
    w = None if weight is None else backend.asarray(weight)
    stream = mg.MultilabelMetrics(n_labels, ignore_index=-100, zero_division=zero_division)
    with mg.use_backend(backend.name):
        stream.update(t, p, w)
    report = stream.compute()
    for name in STREAM_SCALARS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", mg.UndefinedMetricWarning)
            ours = float(_as_host(_functional(name, t, p, w, zero_division)))
        assert ours == pytest.approx(float(report[name]), rel=RTOL, abs=ATOL, nan_ok=True), name
    np.testing.assert_allclose(
        _as_host(mg.multilabel_confusion_matrix(t, p, sample_weight=w, ignore_index=-100)),
        _as_host(report.confusion_matrix), rtol=RTOL)


def test_the_issues_numbers_are_not_the_flattened_ones():
    """Issue 47: the flattened reading gave the cells' two-class F1 and
    accuracy; the cells kept give the stream's numbers."""
    y_true = np.array([[1, -100, 0], [0, 1, 1], [-100, -100, 1], [1, 0, -100]])
    y_pred = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1], [1, 1, 0]])
    keep = y_true != -100
    # Subset accuracy: rows 0 and 2 match on their kept cells.
    assert mg.accuracy_score(y_true, y_pred, ignore_index=-100) == 0.5
    # Hamming loss: 3 wrong of the 8 cells kept.
    assert mg.hamming_loss(y_true, y_pred, ignore_index=-100) == pytest.approx(3 / 8, rel=RTOL)
    per_label = [skm.f1_score(y_true[keep[:, j], j], y_pred[keep[:, j], j]) for j in range(3)]
    assert mg.f1_score(y_true, y_pred, average=None, ignore_index=-100) == pytest.approx(
        per_label, rel=RTOL)


# -- refusals ---------------------------------------------------------------------

Y_PADDED = np.array([[1, 0, 1], [0, -100, 1]])
Y_PRED = np.array([[1, 0, 0], [0, 1, 1]])

# Every functional call that takes a multilabel-indicator pair.
MULTILABEL_CALLS = {
    "accuracy_score": {}, "zero_one_loss": {}, "hamming_loss": {},
    "precision_recall_fscore_support": {"average": "macro"},
    "precision_score": {"average": "micro"}, "recall_score": {"average": "samples"},
    "f1_score": {"average": "macro"}, "fbeta_score": {"beta": 2.0, "average": "weighted"},
    "jaccard_score": {"average": "samples"}, "specificity_score": {"average": "macro"},
    "classification_report": {}, "multilabel_confusion_matrix": {},
}


@pytest.mark.parametrize("name", MULTILABEL_CALLS)
def test_padding_without_ignore_index_is_refused_with_its_position(backend, name):
    """Not flattened into one two-class problem (it was): the message names
    the cell as (row, column) and the ignore_index to pass."""
    kwargs = MULTILABEL_CALLS[name]
    t, p = backend.asarray(Y_PADDED), backend.asarray(Y_PRED)
    with pytest.raises(ValueError, match=r"y_true holds -100 at row 1, column 1.*"
                                         r"pass ignore_index=-100.*reshape\(-1\)"):
        getattr(mg, name)(t, p, **kwargs)
    getattr(mg, name)(t, p, ignore_index=-100, **kwargs)  # now taken


@pytest.mark.parametrize("name", MULTILABEL_CALLS)
def test_other_values_beside_the_ignored_one_are_refused(backend, name):
    y_true = Y_PADDED.copy()
    y_true[0, 2] = 2
    with pytest.raises(ValueError, match=r"y_true holds 2 at row 0, column 2.*"
                                         r"0, 1 and ignore_index=-100"):
        getattr(mg, name)(backend.asarray(y_true), backend.asarray(Y_PRED), ignore_index=-100,
                          **MULTILABEL_CALLS[name])


def test_declared_scores_take_ignore_index(backend):
    scores = np.array([[0.9, 0.2, 0.4], [0.1, 0.8, 0.7]])
    t, s = backend.asarray(Y_PADDED), backend.asarray(scores)
    expected = mg.f1_score(t, backend.asarray(Y_PRED), average="macro", ignore_index=-100)
    assert float(_as_host(mg.f1_score(t, s, average="macro", ignore_index=-100,
                                      scores="probabilities"))) == float(_as_host(expected))
    with pytest.raises(ValueError, match=r"found -100 at row 1, column 1 \(.*"
                                         r"pass ignore_index=-100\)"):
        mg.f1_score(t, s, average="macro", scores="probabilities")


REFUSING = {
    "confusion_matrix": (mg.confusion_matrix, {}),
    "balanced_accuracy_score": (mg.balanced_accuracy_score, {}),
    "balanced_accuracy_weighted": (mg.balanced_accuracy_weighted, {}),
    "matthews_corrcoef": (mg.matthews_corrcoef, {}),
    "cohen_kappa_score": (mg.cohen_kappa_score, {}),
    "label_report": (mg.label_report, {}),
    "multiclass_quality_metrics": (mg.multiclass_quality_metrics, {}),
}


@pytest.mark.parametrize("ignore_index", [None, -100], ids=["no-ignore_index", "ignore_index"])
@pytest.mark.parametrize("name", REFUSING)
def test_functions_without_multilabel_input_refuse_padded_targets(backend, name,
                                                                  ignore_index):
    """A padded (N, L) target beside 0/1 predictions is multilabel input for
    these too: refused, never a two-class label map of the cells."""
    function, kwargs = REFUSING[name]
    if ignore_index is not None:
        kwargs = {**kwargs, "ignore_index": ignore_index}
    with pytest.raises(ValueError, match="does not support multilabel-indicator input") as error:
        function(backend.asarray(Y_PADDED), backend.asarray(Y_PRED), **kwargs)
    assert error.match(r"reshape\(-1\)")
    if ignore_index is None:
        assert error.match("-100 at row 1, column 1")


@pytest.mark.parametrize("name", ["roc_auc_score", "average_precision_score",
                                  "label_ranking_average_precision_score",
                                  "label_ranking_loss", "coverage_error"])
def test_functions_without_ignore_index_say_what_to_do(backend, name):
    scores = np.array([[0.9, 0.2, 0.4], [0.1, 0.8, 0.7]])
    with pytest.raises(ValueError, match=r"found -100 at row 1, column 1\. .*takes no "
                                         r"ignore_index.*y_true\[keep\]"):
        getattr(mg, name)(backend.asarray(Y_PADDED), backend.asarray(scores))


def test_label_map_messages_name_the_position(backend):
    """A 2-D label map (a class code beyond 1 predicted) with padding: the
    message names (row, column), not an index of the flattened cells."""
    y_pred = Y_PRED.copy()
    y_pred[0, 0] = 2
    with pytest.raises(ValueError, match=r"negative label -100 at row 1, column 1;.*"
                                         r"pass ignore_index=-100"):
        mg.accuracy_score(backend.asarray(Y_PADDED), backend.asarray(y_pred))
    assert float(_as_host(mg.accuracy_score(backend.asarray(Y_PADDED), backend.asarray(y_pred),
                                            ignore_index=-100))) == pytest.approx(3 / 5)


def test_dask_refuses_rather_than_miscounting():
    da = pytest.importorskip("dask.array")
    import metrics_gpu.dask as mgd

    t, p = da.from_array(Y_PADDED, chunks=(1, 3)), da.from_array(Y_PRED, chunks=(1, 3))
    with pytest.raises(ValueError, match="ignore_index of .N, L. multilabel-indicator input"):
        mgd.hamming_loss(t, p, ignore_index=-100)
