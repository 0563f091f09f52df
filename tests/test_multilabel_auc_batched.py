"""The multilabel ROC AUC and average precision of every label column at once
(metrics_gpu._formulas.ranking.multilabel_rank_areas, which
``_multilabel_average`` calls for average None / 'macro' / 'weighted' and the
full area): against scikit-learn, against the per-label loop it replaces
(``_indicator_binary`` per column: values and warnings), and its cost in
calls, which must not grow with the number of labels.
"""

from __future__ import annotations

import gc
import warnings
from dataclasses import dataclass

import numpy as np
import pytest
import sklearn.metrics as skm
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import metrics_gpu as mg
from metrics_gpu._formulas.ranking import binary_rank_areas, multilabel_rank_areas
from metrics_gpu._functional import ranking as functional_ranking
from metrics_gpu._validation import check_indicator_inputs
from metrics_gpu.testing import call_counter

RTOL = ATOL = 1e-12
METRICS = {"roc_auc": "roc_auc_score", "average_precision": "average_precision_score"}
AVERAGES = (None, "macro", "weighted")
SCORE_DTYPES = (np.float16, np.float32, np.float64, np.int64)
EXAMPLES = {"numpy": 80, "emulated": 30, "cuda": 60}


@dataclass
class Case:
    y_true: np.ndarray
    y_score: np.ndarray
    sample_weight: np.ndarray | None


@st.composite
def cases(draw, min_labels: int = 2, max_n: int = 14):
    """(N, L) indicators, N from 1, with tied scores of one of the score
    dtypes, often a label without positives and one with only positives;
    weights None, floats, or small integers with zeros (never all 0)."""
    n = draw(st.integers(1, max_n))
    num_labels = draw(st.integers(min_labels, 6))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    density = draw(st.sampled_from([0.0, 0.2, 0.5, 0.8, 1.0]))
    y_true = (rng.random((n, num_labels)) < density).astype(np.int64)
    if num_labels >= 2 and draw(st.booleans()):
        y_true[:, 0] = 0
        y_true[:, -1] = 1
    levels = draw(st.sampled_from([1, 2, 3, 5, 1000]))
    dtype = draw(st.sampled_from(SCORE_DTYPES))
    if dtype == np.int64:
        y_score = rng.integers(-levels, levels + 1, (n, num_labels)).astype(np.int64)
    else:
        y_score = (rng.integers(0, levels, (n, num_labels)) / levels).astype(dtype)
    kind = draw(st.sampled_from(["none", "float", "int"]))
    weight = None
    if kind == "float":
        weight = rng.random(n)
    elif kind == "int":
        weight = rng.integers(0, 3, n).astype(np.float64)
        weight[rng.integers(n)] = 2.0
    return Case(y_true, y_score, weight)


def _settings(backend):
    return settings(max_examples=EXAMPLES[backend.name], deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


def _recorded(call):
    """``(value as float64 or the exception's type, [(category, message)])``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = np.asarray(call(), dtype=np.float64)
        except (ValueError, ZeroDivisionError) as error:
            value = type(error)
    return value, [(w.category, str(w.message)) for w in caught]


def _ours(backend, metric, case, average):
    weight = None if case.sample_weight is None else backend.asarray(case.sample_weight)
    return backend.to_numpy(getattr(mg, METRICS[metric])(
        backend.asarray(case.y_true), backend.asarray(case.y_score), sample_weight=weight,
        average=average))


def _sklearn(metric, case, average):
    # float64 scores: the same order, and every scikit-learn version ranks them alike.
    return getattr(skm, METRICS[metric])(case.y_true, case.y_score.astype(np.float64),
                                         sample_weight=case.sample_weight, average=average)


def _assert_same(ours, reference, what):
    if isinstance(reference, type) or isinstance(ours, type):
        # scikit-learn raises ZeroDivisionError where weights are all 0; a ValueError here.
        assert isinstance(ours, type) and isinstance(reference, type), (what, ours, reference)
        return
    np.testing.assert_allclose(ours, reference, rtol=RTOL, atol=ATOL, equal_nan=True,
                               err_msg=str(what))


def _loop(backend, metric, case, average):
    """The per-label loop the batched areas replace: ``_indicator_binary`` per
    column, averaged as ``_multilabel_average`` does."""
    weight = None if case.sample_weight is None else backend.asarray(case.sample_weight)
    inputs = check_indicator_inputs(backend.asarray(case.y_true), backend.asarray(case.y_score),
                                    weight, function=METRICS[metric], allow_all_zero=True)
    xp, relevant, scores = inputs.backend.xp, inputs.y_true, inputs.y_score
    n, num_labels = relevant.shape
    counts = relevant.sum(axis=0)
    as_weight = (relevant.astype(np.float64) if case.sample_weight is None
                 else relevant.astype(np.float64) * weight[:, None])
    weights = np.asarray(backend.to_numpy(as_weight.sum(axis=0)), dtype=np.float64)
    counts = np.asarray(backend.to_numpy(counts))
    total = float(n if case.sample_weight is None else case.sample_weight.sum())
    if average == "weighted" and np.isclose(weights.sum(), 0, rtol=1e-5, atol=1e-8):
        return 0.0
    per_label = xp.stack([
        functional_ranking._indicator_binary(
            inputs.backend, scores[:, c], relevant[:, c], inputs.sample_weight, metric, None,
            int(counts[c]), n, float(weights[c]), total)
        for c in range(num_labels)])
    per_label = np.asarray(backend.to_numpy(per_label))
    if average is None:
        return per_label
    if average == "macro":
        return per_label.mean()
    per_label = np.where(weights == 0, 0.0, per_label)
    return (per_label * weights).sum() / weights.sum()


# -- the public functions: scikit-learn, and the loop ------------------------------


@pytest.mark.parametrize("average", AVERAGES, ids=str)
@pytest.mark.parametrize("metric", METRICS)
def test_matches_sklearn_and_the_per_label_loop(backend, metric, average):
    @_settings(backend)
    @given(case=cases())
    def check(case):
        ours, our_warnings = _recorded(lambda: _ours(backend, metric, case, average))
        reference, _ = _recorded(lambda: _sklearn(metric, case, average))
        _assert_same(ours, reference, (metric, average, case))
        loop, loop_warnings = _recorded(lambda: _loop(backend, metric, case, average))
        _assert_same(ours, loop, (metric, average, case))
        # The same warnings, in the same order, as the loop gave.
        assert our_warnings == loop_warnings, case

    check()


@pytest.mark.parametrize("average", AVERAGES, ids=str)
@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("score_dtype", SCORE_DTYPES, ids=lambda d: np.dtype(d).name)
def test_ties_weights_and_one_class_labels(backend, metric, average, score_dtype, rng):
    n, num_labels = 200, 7
    y_true = rng.random((n, num_labels)) < 0.3
    y_true[:, 1] = False  # no positive
    y_true[:, 2] = True   # all positive
    y_score = rng.integers(0, 4, (n, num_labels)).astype(score_dtype)  # heavy ties
    weight = rng.random(n)
    weight[::7] = 0.0
    for sample_weight in (None, weight):
        case = Case(y_true, y_score, sample_weight)
        ours, our_warnings = _recorded(lambda: _ours(backend, metric, case, average))
        reference, reference_warnings = _recorded(lambda: _sklearn(metric, case, average))
        _assert_same(ours, reference, (metric, average, sample_weight is None))
        loop, loop_warnings = _recorded(lambda: _loop(backend, metric, case, average))
        _assert_same(ours, loop, (metric, average))
        assert our_warnings == loop_warnings
        assert {m for _, m in our_warnings} == {m for _, m in reference_warnings}


@pytest.mark.parametrize("metric", METRICS)
def test_larger_random_scores(backend, metric, rng):
    n, num_labels = 3000, 9
    y_true = rng.random((n, num_labels)) < rng.random(num_labels)
    y_score = rng.random((n, num_labels))
    y_score[:, ::2] = np.round(y_score[:, ::2], 2)
    for sample_weight in (None, rng.random(n)):
        case = Case(y_true, y_score, sample_weight)
        for average in AVERAGES:
            _assert_same(_ours(backend, metric, case, average),
                         _sklearn(metric, case, average), (metric, average))


@pytest.mark.parametrize("metric", METRICS)
def test_one_and_two_samples(backend, metric):
    for y_true, y_score in [
        (np.array([[1, 0, 1]]), np.array([[0.3, 0.2, 0.1]])),
        (np.array([[1, 0, 1], [0, 0, 1]]), np.array([[0.3, 0.2, 0.1], [0.3, 0.5, 0.9]])),
        (np.array([[1, 0], [0, 1]]), np.array([[0.5, 0.5], [0.5, 0.5]])),
    ]:
        for average in AVERAGES:
            case = Case(y_true, y_score, None)
            ours, our_warnings = _recorded(lambda: _ours(backend, metric, case, average))
            reference, _ = _recorded(lambda: _sklearn(metric, case, average))
            _assert_same(ours, reference, (y_true, average))
            assert our_warnings == _recorded(lambda: _loop(backend, metric, case, average))[1]


def test_partial_max_fpr_keeps_the_loop(backend, rng):
    y_true = rng.random((60, 5)) < 0.4
    y_score = rng.integers(0, 6, (60, 5)) / 6
    for average in AVERAGES:
        ours = backend.to_numpy(mg.roc_auc_score(backend.asarray(y_true),
                                                 backend.asarray(y_score), average=average,
                                                 max_fpr=0.3))
        reference = skm.roc_auc_score(y_true, y_score, average=average, max_fpr=0.3)
        np.testing.assert_allclose(ours, reference, rtol=RTOL, atol=ATOL)


# -- the formula itself: L = 1, and each column's binary areas --------------------


@settings(max_examples=150, deadline=None)
@given(case=cases(min_labels=1))
def test_formula_equals_binary_rank_areas_per_column(case):
    relevant = case.y_true.astype(bool)
    batched = multilabel_rank_areas(case.y_score, relevant, case.sample_weight, np)
    assert batched.shape == (2, case.y_true.shape[1]) and batched.dtype == np.float64
    per_column = np.stack([binary_rank_areas(case.y_score[:, c], relevant[:, c],
                                             case.sample_weight, np)
                           for c in range(case.y_true.shape[1])], axis=1)
    np.testing.assert_allclose(batched, per_column, rtol=RTOL, atol=ATOL, equal_nan=True)


@pytest.mark.parametrize("weighted", [False, True])
def test_formula_one_label_against_sklearn(weighted, rng):
    y_true = rng.random((40, 1)) < 0.5
    y_score = rng.integers(0, 5, (40, 1)).astype(np.float32)
    weight = rng.random(40) if weighted else None
    auc, ap = multilabel_rank_areas(y_score, y_true, weight, np)[:, 0]
    assert auc == pytest.approx(skm.roc_auc_score(y_true[:, 0], y_score[:, 0],
                                                  sample_weight=weight), rel=RTOL)
    assert ap == pytest.approx(skm.average_precision_score(y_true[:, 0], y_score[:, 0],
                                                           sample_weight=weight), rel=RTOL)


def test_formula_unweighted_area_is_exact(rng):
    """Without weights twice the area is an integer of counts: the result is
    that integer over 2 P Q, rounded once (Mann-Whitney's count as check)."""
    n = 5000
    y_true = rng.random((n, 3)) < 0.5
    y_score = rng.integers(0, 50, (n, 3))
    auc = multilabel_rank_areas(y_score, y_true, None, np)[0]
    for c in range(3):
        positive, negative = y_score[y_true[:, c], c], y_score[~y_true[:, c], c]
        above = (positive[:, None] > negative[None, :]).sum()
        tied = (positive[:, None] == negative[None, :]).sum()
        pairs = positive.size * negative.size
        assert auc[c] == (2 * int(above) + int(tied)) / (2.0 * pairs)


@pytest.mark.parametrize("block", [1, 7, 40])
def test_numpy_blocks_of_columns_give_the_same_areas(block, monkeypatch, rng):
    """NumPy takes the columns in blocks of HOST_BLOCK_SCORES scores (at least
    a column each): the same areas as one pass."""
    from metrics_gpu._formulas import ranking as formulas

    y_true = rng.random((9, 11)) < 0.4
    y_score = rng.integers(0, 4, (9, 11)).astype(np.float32)
    for weight in (None, rng.random(9)):
        whole = multilabel_rank_areas(y_score, y_true, weight, np)
        monkeypatch.setattr(formulas, "HOST_BLOCK_SCORES", block)
        blocks = multilabel_rank_areas(y_score, y_true, weight, np)
        monkeypatch.undo()
        np.testing.assert_array_equal(blocks, whole)


def test_formula_checks_shapes():
    with pytest.raises(ValueError, match="scores must be"):
        multilabel_rank_areas(np.zeros((0, 2)), np.zeros((0, 2), bool), None, np)
    with pytest.raises(ValueError, match="scores must be"):
        multilabel_rank_areas(np.zeros((3, 2)), np.zeros((3, 3), bool), None, np)
    with pytest.raises(ValueError, match="sample_weight"):
        multilabel_rank_areas(np.zeros((3, 2)), np.zeros((3, 2), bool), np.ones(2), np)


# -- the cost: calls that do not grow with L ---------------------------------------


def _counted(metric, num_labels, weighted, rng, average="macro"):
    n = 256
    y_true = rng.random((n, num_labels)) < 0.4
    y_true[0], y_true[1] = True, False  # every label has both classes
    y_score = rng.random((n, num_labels))
    weight = rng.random(n) + 0.1 if weighted else None
    function = getattr(mg, METRICS[metric])
    function(y_true, y_score, sample_weight=weight, average=average)  # first-call work
    # Without the collector: a collection inside the block runs the gc
    # callbacks others registered (hypothesis's), calls of their own.
    gc.collect()
    gc.disable()
    try:
        with call_counter() as calls:
            function(y_true, y_score, sample_weight=weight, average=average)
    finally:
        gc.enable()
    return calls.total


@pytest.mark.parametrize("backend_name", ["numpy", "emulated"])
@pytest.mark.parametrize("average", AVERAGES, ids=str)
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("metric", METRICS)
def test_calls_do_not_grow_with_the_labels(backend_name, metric, weighted, average, rng):
    with mg.use_backend(backend_name):
        few = _counted(metric, 4, weighted, rng, average)
        many = _counted(metric, 64, weighted, rng, average)
    assert few == many, (few, many)


def test_the_partial_area_loop_grows_with_the_labels(rng):
    """The counter sees a per-label loop: the partial ROC AUC keeps one."""
    def counted(num_labels):
        y_true = rng.random((64, num_labels)) < 0.4
        y_true[0], y_true[1] = True, False
        y_score = rng.random((64, num_labels))
        mg.roc_auc_score(y_true, y_score, max_fpr=0.5)
        gc.collect()
        gc.disable()
        try:
            with call_counter() as calls:
                mg.roc_auc_score(y_true, y_score, max_fpr=0.5)
        finally:
            gc.enable()
        return calls.total

    assert counted(64) > counted(4) + 60
