"""Multilabel ranking metrics against scikit-learn: LRAP, ranking loss and
coverage error (metrics_gpu._multilabel.ranking), alone and the three from one
call (label_ranking_metrics), and the multilabel ROC AUC
and average precision of metrics_gpu._functional.ranking, on every backend.

Scores are drawn from a few values so that ties (scikit-learn's "max" ranks,
a tie mis-ordered for the ranking loss) are the common case, and rows with
all or no relevant labels come up often.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pytest
import sklearn.metrics as skm
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import metrics_gpu as mg
import metrics_gpu._multilabel.ranking as multilabel_ranking

RTOL = ATOL = 1e-12
RANKING_METRICS = ("label_ranking_average_precision_score", "label_ranking_loss",
                   "coverage_error")
ALL_THREE = "label_ranking_metrics"  # the three from one call
AVERAGES = ("micro", "macro", "weighted", "samples", None)
# Examples per backend: an emulated example launches the ranking kernels per
# label column.
EXAMPLES = {"numpy": 60, "emulated": 15, "cuda": 60}


def _settings(backend):
    return settings(max_examples=EXAMPLES[backend.name], deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


@dataclass
class Case:
    y_true: np.ndarray
    y_score: np.ndarray
    sample_weight: np.ndarray | None


@st.composite
def indicator_cases(draw, min_labels: int = 2, positive_weights: bool = False):
    """(N, L) indicators with tied scores; weights None, floats, or small
    integers with zeros (never all 0)."""
    n = draw(st.integers(1, 12))
    num_labels = draw(st.integers(min_labels, 6))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    density = draw(st.sampled_from([0.0, 0.2, 0.5, 0.8, 1.0]))
    y_true = (rng.random((n, num_labels)) < density).astype(np.int64)
    if draw(st.booleans()):  # one all-relevant and one all-irrelevant row
        y_true[0] = 1
        y_true[-1] = 0
    levels = draw(st.sampled_from([2, 3, 5, 1000]))
    y_score = rng.integers(0, levels, (n, num_labels)) / levels
    kind = draw(st.sampled_from(["none", "float", "int"]))
    weight = None
    if kind == "float":
        weight = rng.random(n) + (0.1 if positive_weights else 0.0)
    elif kind == "int":
        weight = rng.integers(1 if positive_weights else 0, 3, n).astype(np.float64)
        weight[rng.integers(n)] = 2.0
    return Case(y_true, y_score, weight)


def _ours(backend, name, case, **options):
    weight = None if case.sample_weight is None else backend.asarray(case.sample_weight)
    result = getattr(mg, name)(backend.asarray(case.y_true), backend.asarray(case.y_score),
                               sample_weight=weight, **options)
    if isinstance(result, dict):  # label_ranking_metrics
        return {key: backend.to_numpy(value) for key, value in result.items()}
    return backend.to_numpy(result)


def _outcome(call):
    """The result as float64, or the exception's type (both libraries warn alike)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return np.asarray(call(), dtype=np.float64)
        except (ValueError, ZeroDivisionError) as error:
            return type(error)


def _assert_same(ours, reference, what):
    if isinstance(reference, type) or isinstance(ours, type):
        # scikit-learn raises ZeroDivisionError where weights are all 0; a ValueError here.
        assert isinstance(ours, type) and isinstance(reference, type), (what, ours, reference)
        return
    np.testing.assert_allclose(ours, reference, rtol=RTOL, atol=ATOL, equal_nan=True,
                               err_msg=str(what))


# -- LRAP, ranking loss, coverage error ------------------------------------------------------


@pytest.mark.parametrize("name", RANKING_METRICS)
def test_ranking_metrics_match_sklearn(backend, name):
    @_settings(backend)
    @given(case=indicator_cases(min_labels=1 if name.startswith("label_ranking_average") else 2))
    def check(case):
        ours = _ours(backend, name, case)
        reference = getattr(skm, name)(case.y_true, case.y_score,
                                       sample_weight=case.sample_weight)
        assert ours.dtype == np.float64 and ours.shape == ()
        np.testing.assert_allclose(ours, reference, rtol=RTOL, atol=ATOL, err_msg=repr(case))

    check()


@pytest.mark.parametrize("name, expected", [
    ("label_ranking_loss", 1.0),  # torchmetrics gives 0.0: a tie is an error in scikit-learn
    ("label_ranking_average_precision_score", 1.0),  # the one relevant label ranks 2nd of 2
    ("coverage_error", 2.0),
])
def test_a_tie_is_ranked_at_its_worst(backend, name, expected):
    y_true, y_score = np.array([[0, 1]]), np.array([[0.5, 0.5]])
    reference = getattr(skm, name)(y_true, y_score)
    ours = getattr(mg, name)(backend.asarray(y_true), backend.asarray(y_score))
    if name.startswith("label_ranking_average"):
        expected = 0.5
    assert float(backend.to_numpy(ours)) == reference == expected


@pytest.mark.parametrize("name", RANKING_METRICS)
def test_rows_with_every_or_no_relevant_label(backend, name):
    y_true = np.array([[1, 1, 1], [0, 0, 0], [1, 0, 0]])
    y_score = np.array([[0.1, 0.2, 0.3], [0.3, 0.2, 0.1], [0.1, 0.5, 0.5]])
    ours = getattr(mg, name)(backend.asarray(y_true), backend.asarray(y_score))
    assert float(backend.to_numpy(ours)) == pytest.approx(
        getattr(skm, name)(y_true, y_score), rel=RTOL)


@pytest.mark.parametrize("name", RANKING_METRICS)
def test_chunks_of_rows_give_the_same_value(name, monkeypatch, rng):
    y_true = (rng.random((50, 7)) < 0.3).astype(np.int8)
    y_score = rng.integers(0, 4, (50, 7)).astype(np.float32)
    weight = rng.random(50)
    whole = mg.__dict__[name](y_true, y_score, sample_weight=weight)
    monkeypatch.setattr(multilabel_ranking, "CHUNK_ELEMENTS", 20)  # 2 rows a chunk
    assert mg.__dict__[name](y_true, y_score, sample_weight=weight) == pytest.approx(
        whole, rel=RTOL)
    # float64 scores for scikit-learn: some versions rank float32 scores in float32.
    reference = getattr(skm, name)(y_true, y_score.astype(np.float64), sample_weight=weight)
    assert whole == pytest.approx(reference, rel=RTOL)


@pytest.mark.parametrize("staged", [True, False], ids=["staged", "global"])
@pytest.mark.parametrize("score_dtype", ["float32", "float64", "bfloat16", "int64"])
@pytest.mark.parametrize("shape", [(23, 70, 0.9), (37, 41, 0.2), (9, 3, 0.5)],
                         ids=["R-past-a-warp", "wide", "narrow"])
def test_emulated_ranking_kernel_equals_array_path(shape, score_dtype, staged, rng,
                                                   monkeypatch):
    """The emulated kernel's sums (a warp per row, relevant labels queued 32
    at a time: rows with more than 32 and more than 64 of them, tied
    scores, all / no relevant rows, weights with zeros; rows staged in
    shared memory, or read from global memory as rows too long for it are)
    against the NumPy backend's array path, which the other tests hold to
    scikit-learn."""
    from metrics_gpu.backends.launchers import multilabel as launcher

    if not staged:
        monkeypatch.setattr(launcher, "ranking_geometry", lambda device, num_labels: (64, 0))
    n, num_labels, share = shape
    y_true = rng.random((n, num_labels)) < share
    y_true[0], y_true[1] = False, True
    scores = torch.tensor(rng.integers(0, 9, (n, num_labels)) / 8.0)
    scores = scores.to(getattr(torch, score_dtype)) if score_dtype != "int64" else \
        torch.tensor(rng.integers(-3, 4, (n, num_labels)))
    weight = rng.random(n)
    weight[::5] = 0.0
    host_scores = scores.float().numpy() if score_dtype == "bfloat16" else scores.numpy()
    for name in RANKING_METRICS:
        with mg.use_backend("numpy"):
            expected = getattr(mg, name)(y_true, host_scores, sample_weight=weight)
        with mg.use_backend("emulated"):
            ours = getattr(mg, name)(torch.tensor(y_true), scores,
                                     sample_weight=torch.tensor(weight))
        assert float(ours) == pytest.approx(float(expected), rel=RTOL, abs=ATOL), name


@pytest.mark.parametrize("name", RANKING_METRICS)
@pytest.mark.parametrize("label_dtype", [bool, np.uint8, np.int32, np.float32])
@pytest.mark.parametrize("score_dtype", [np.float16, np.float32, np.int64])
def test_dtypes(name, label_dtype, score_dtype, rng):
    y_true = (rng.random((30, 5)) < 0.4).astype(label_dtype)
    y_score = rng.integers(0, 6, (30, 5)).astype(score_dtype)
    ours = getattr(mg, name)(y_true, y_score)
    assert isinstance(ours, np.float64)
    # float64 for scikit-learn: its masked minimum overflows a float16 fill value.
    reference = getattr(skm, name)(y_true.astype(int), y_score.astype(np.float64))
    assert ours == pytest.approx(reference, rel=RTOL)


@pytest.mark.parametrize("name", RANKING_METRICS)
def test_torch_inputs_give_torch_results(name, rng):
    y_true = (rng.random((20, 4)) < 0.5).astype(np.int64)
    y_score = rng.random((20, 4)).astype(np.float32)
    weight = rng.random(20)
    ours = getattr(mg, name)(torch.from_numpy(y_true), torch.from_numpy(y_score),
                             sample_weight=torch.from_numpy(weight))
    assert isinstance(ours, torch.Tensor) and ours.dtype == torch.float64
    assert float(ours) == pytest.approx(
        getattr(skm, name)(y_true, y_score.astype(np.float64), sample_weight=weight), rel=RTOL)


# -- the three from one call -----------------------------------------------------------------


@st.composite
def all_three_cases(draw):
    """:func:`indicator_cases` (L >= 2), the scores as floats or as integers."""
    case = draw(indicator_cases())
    if draw(st.booleans()):
        case.y_score = np.round(case.y_score * 1000).astype(np.int64)
    return case


def test_label_ranking_metrics_match_sklearn(backend):
    @_settings(backend)
    @given(case=all_three_cases())
    def check(case):
        ours = _ours(backend, ALL_THREE, case)
        assert list(ours) == list(RANKING_METRICS)
        for name in RANKING_METRICS:
            reference = getattr(skm, name)(case.y_true, case.y_score,
                                           sample_weight=case.sample_weight)
            assert ours[name].dtype == np.float64 and ours[name].shape == ()
            np.testing.assert_allclose(ours[name], reference, rtol=RTOL, atol=ATOL,
                                       err_msg=repr((name, case)))

    check()


@pytest.mark.parametrize("chunked", [False, True], ids=["one-chunk", "chunks-of-2-rows"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("score_dtype", [np.float32, np.int64], ids=["float32", "int64"])
def test_label_ranking_metrics_equal_the_single_calls(backend, score_dtype, weighted, chunked,
                                                      monkeypatch, rng):
    """Bit for bit: the same per-row formulas and the same weighted mean (the
    NumPy backend, a chunk of rows at a time too), the same kernel sums (the
    emulated backend). On cuda each launch adds its float64 atomics in its
    own order: equal to the tolerance."""
    if chunked:
        monkeypatch.setattr(multilabel_ranking, "CHUNK_ELEMENTS", 14)  # 2 rows a chunk
    y_true = (rng.random((41, 7)) < 0.3).astype(np.int8)
    y_true[0], y_true[1] = 1, 0  # every and no label relevant
    y_score = rng.integers(0, 5, (41, 7)).astype(score_dtype)  # ties
    weight = None
    if weighted:
        weight = rng.random(41)
        weight[::4] = 0.0
        weight = backend.asarray(weight)
    y_true, y_score = backend.asarray(y_true), backend.asarray(y_score)
    together = mg.label_ranking_metrics(y_true, y_score, sample_weight=weight)
    for name in RANKING_METRICS:
        alone = getattr(mg, name)(y_true, y_score, sample_weight=weight)
        assert type(together[name]) is type(alone), name
        if backend.name == "cuda":
            np.testing.assert_allclose(backend.to_numpy(together[name]),
                                       backend.to_numpy(alone), rtol=RTOL, atol=ATOL,
                                       err_msg=name)
        else:
            assert backend.to_numpy(together[name]) == backend.to_numpy(alone), name


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_label_ranking_metrics_is_one_launch_and_one_read_back(weighted):
    """On a kernel backend the three cost what one of them does: one launch
    of kernels/multilabel.cu, one read back of its sums (the three single
    calls: three of each)."""
    from metrics_gpu.testing import operation_counter

    rng = np.random.default_rng(11)
    y_true = torch.from_numpy((rng.random((200, 9)) < 0.3).astype(np.int8))
    y_score = torch.from_numpy(rng.integers(0, 6, (200, 9)).astype(np.float32))
    weight = torch.from_numpy(rng.random(200)) if weighted else None
    with mg.use_backend("emulated"):
        mg.label_ranking_metrics(y_true, y_score, sample_weight=weight)  # compiled here
        with operation_counter() as together:
            values = mg.label_ranking_metrics(y_true, y_score, sample_weight=weight)
        with operation_counter() as alone:
            expected = {name: getattr(mg, name)(y_true, y_score, sample_weight=weight)
                        for name in RANKING_METRICS}
    assert (together.launches, together.host_transfers) == (1, 1)
    assert (alone.launches, alone.host_transfers) == (3, 3)
    assert together.device_allocations * 3 == alone.device_allocations
    for name in RANKING_METRICS:
        assert isinstance(values[name], torch.Tensor) and values[name].dtype == torch.float64
        assert float(values[name]) == float(expected[name]), name


def test_label_ranking_metrics_refuses_one_label_column():
    """LRAP alone takes one column (it is 1 there); the three together need
    two, as the ranking loss and coverage error do."""
    with pytest.raises(ValueError, match=r"label_ranking_metrics: y_true has 1 label "
                                         r"column\(s\); at least 2 are needed"):
        mg.label_ranking_metrics(np.array([[0], [1]]), np.array([[0.1], [0.2]]))


# -- multilabel ROC AUC and average precision -------------------------------------------------


@pytest.mark.parametrize("average", AVERAGES, ids=str)
@pytest.mark.parametrize("metric", ["roc_auc", "roc_auc_max_fpr", "average_precision"])
def test_multilabel_areas_match_sklearn(backend, metric, average):
    name = "average_precision_score" if metric == "average_precision" else "roc_auc_score"
    options = {"max_fpr": 0.5} if metric == "roc_auc_max_fpr" else {}

    # With max_fpr, scikit-learn raises where a label's negatives all weigh 0
    # (a partial area of one point); the binary path gives NaN there.
    @_settings(backend)
    @given(case=indicator_cases(positive_weights=bool(options)))
    def check(case):
        ours = _outcome(lambda: _ours(backend, name, case, average=average, **options))
        reference = _outcome(lambda: getattr(skm, name)(
            case.y_true, case.y_score, sample_weight=case.sample_weight, average=average,
            **options))
        _assert_same(ours, reference, (case, average))

    check()


@pytest.mark.parametrize("average", AVERAGES, ids=str)
def test_multilabel_areas_warn_as_sklearn(average):
    y_true = np.array([[0, 1, 1], [0, 0, 1], [0, 1, 1]])  # label 0 absent, label 2 always
    y_score = np.array([[0.1, 0.9, 0.5], [0.2, 0.3, 0.5], [0.3, 0.4, 0.1]])
    for name in ("roc_auc_score", "average_precision_score"):
        with warnings.catch_warnings(record=True) as ours_seen:
            warnings.simplefilter("always")
            ours = np.asarray(getattr(mg, name)(y_true, y_score, average=average))
        with warnings.catch_warnings(record=True) as reference_seen:
            warnings.simplefilter("always")
            reference = getattr(skm, name)(y_true, y_score, average=average)
        np.testing.assert_allclose(ours, reference, rtol=RTOL, equal_nan=True)
        assert {str(w.message)[:30] for w in ours_seen} == {
            str(w.message)[:30] for w in reference_seen}, name


def test_weighted_average_without_positive_weight_is_zero():
    y_true = np.array([[0, 1], [1, 0]])
    y_score = np.array([[0.2, 0.8], [0.6, 0.4]])
    for name in ("roc_auc_score", "average_precision_score"):
        assert getattr(mg, name)(y_true, y_score, average="weighted",
                                 sample_weight=[0.0, 0.0]) == 0.0
        with pytest.raises(ValueError, match="at least one non-zero weight"):
            getattr(mg, name)(y_true, y_score, average="macro", sample_weight=[0.0, 0.0])


def test_multilabel_areas_of_torch_inputs(rng):
    y_true = (rng.random((15, 3)) < 0.5).astype(np.int64)
    y_true[0], y_true[1] = 1, 0
    y_score = rng.random((15, 3))
    for name in ("roc_auc_score", "average_precision_score"):
        ours = getattr(mg, name)(torch.from_numpy(y_true), torch.from_numpy(y_score),
                                 average=None)
        assert isinstance(ours, torch.Tensor) and ours.shape == (3,)
        np.testing.assert_allclose(ours.numpy(), getattr(skm, name)(y_true, y_score,
                                                                   average=None), rtol=RTOL)


def test_an_indicator_column_stays_binary():
    """(N, 1) y_true is a column of binary labels, as before."""
    y_true = np.array([[0], [1], [1], [0]])
    y_score = np.array([0.1, 0.8, 0.3, 0.4])
    assert mg.roc_auc_score(y_true, y_score) == skm.roc_auc_score(y_true.ravel(), y_score)


# -- errors -----------------------------------------------------------------------------------


GOOD_Y = np.array([[0, 1, 1], [1, 0, 0]])
GOOD_S = np.array([[0.1, 0.9, 0.5], [0.2, 0.3, 0.5]])


@pytest.mark.parametrize("name", RANKING_METRICS + (ALL_THREE, "roc_auc_score",
                                                   "average_precision_score"))
@pytest.mark.parametrize("y_true, y_score, sample_weight, message", [
    (np.array([[0, 2, 1], [1, 0, 0]]), GOOD_S, None,
     r"y_true must hold 0/1 label indicators; found 2 at row 0, column 1"),
    (np.array([[0, 0.5, 1], [1, 0, 0]]), GOOD_S, None, r"found 0\.5 at row 0, column 1"),
    (GOOD_Y, GOOD_S[:, :2], None, r"same shape \(N, L\); got \(2, 3\) and \(2, 2\)"),
    (GOOD_Y, np.array([[0.1, np.nan, 0.5], [0.2, 0.3, 0.5]]), None,
     r"y_score must hold finite scores; found nan at row 0, column 1"),
    (GOOD_Y, np.array([["a", "b", "c"], ["a", "b", "c"]]), None, r"numeric scores"),
    (GOOD_Y, GOOD_S, [1.0, -1.0], r"sample_weight must be non-negative; found -1\.0 at index 1"),
    (GOOD_Y, GOOD_S, [1.0, np.inf], r"sample_weight must be finite"),
    (GOOD_Y, GOOD_S, [1.0, 1.0, 1.0], r"sample_weight has 3 entries but y_true has 2 samples"),
    (GOOD_Y, GOOD_S, [0.0, 0.0], r"at least one non-zero weight"),
], ids=["label-2", "label-half", "shapes", "nan-score", "string-score", "negative-weight",
        "inf-weight", "weight-length", "zero-weights"])
def test_bad_input_is_named(name, y_true, y_score, sample_weight, message):
    with pytest.raises(ValueError, match=message):
        getattr(mg, name)(y_true, y_score, sample_weight=sample_weight)


@pytest.mark.parametrize("name", RANKING_METRICS + (ALL_THREE,))
def test_y_true_must_be_a_matrix(name):
    with pytest.raises(ValueError, match=r"y_true must be an \(N, L\) label indicator matrix"):
        getattr(mg, name)(np.array([0, 1, 1]), np.array([0.1, 0.2, 0.3]))


@pytest.mark.parametrize("name", ["label_ranking_loss", "coverage_error"])
def test_one_label_column_is_refused_as_sklearn(name):
    with pytest.raises(ValueError, match="at least 2 are needed"):
        getattr(mg, name)(np.array([[0], [1]]), np.array([[0.1], [0.2]]))
    with pytest.raises(ValueError, match="binary format is not supported"):
        getattr(skm, name)(np.array([[0], [1]]), np.array([[0.1], [0.2]]))


def test_lrap_of_one_label_column_is_one_as_sklearn():
    y_true, y_score = np.array([[0], [1]]), np.array([[0.1], [0.2]])
    assert mg.label_ranking_average_precision_score(y_true, y_score) == \
        skm.label_ranking_average_precision_score(y_true, y_score) == 1.0


def test_multilabel_average_precision_takes_pos_label_one_only():
    with pytest.raises(ValueError, match="pos_label is fixed to 1 for multilabel-indicator"):
        mg.average_precision_score(GOOD_Y, GOOD_S, pos_label=0)


# -- DCG and NDCG ------------------------------------------------------------------------------


@st.composite
def relevance_cases(draw):
    """(N, L) graded relevance (small integers, often 0, or floats) with tied
    or continuous scores; ``ignore_ties`` only with continuous scores (its
    order of a tie is NumPy's argsort's, left unspecified)."""
    n = draw(st.integers(1, 10))
    num_labels = draw(st.integers(2, 6))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):
        y_true = rng.integers(0, 4, (n, num_labels)) * (rng.random((n, num_labels)) < 0.6)
    else:
        y_true = rng.random((n, num_labels))
    ignore_ties = draw(st.booleans())
    y_score = (rng.random((n, num_labels)) if ignore_ties
               else rng.integers(0, draw(st.sampled_from([2, 3, 10])), (n, num_labels)) / 4)
    weight = rng.random(n) + 0.01 if draw(st.booleans()) else None
    k = draw(st.sampled_from([None, 1, 2, 3, 10]))
    return Case(y_true, y_score, weight), k, ignore_ties


@pytest.mark.parametrize("name", ["dcg_score", "ndcg_score"])
def test_discounted_gains_match_sklearn(backend, name):
    @_settings(backend)
    @given(drawn=relevance_cases(), log_base=st.sampled_from([2, 10, 1.5]))
    def check(drawn, log_base):
        case, k, ignore_ties = drawn
        options = {"k": k, "ignore_ties": ignore_ties}
        if name == "dcg_score":
            options["log_base"] = log_base
        ours = _ours(backend, name, case, **options)
        reference = getattr(skm, name)(case.y_true, case.y_score,
                                       sample_weight=case.sample_weight, **options)
        np.testing.assert_allclose(ours, reference, rtol=RTOL, atol=ATOL,
                                   err_msg=repr((case, options)))

    check()


def test_dcg_of_tied_scores_averages_their_orders():
    y_true = np.array([[10, 0, 0, 1, 5]])
    tied = np.array([[1, 0, 0, 0, 1]])  # 10 and 5 share ranks 1 and 2
    assert mg.dcg_score(y_true, tied, k=1) == skm.dcg_score(y_true, tied, k=1) == 7.5
    assert mg.ndcg_score(y_true, tied, k=1) == skm.ndcg_score(y_true, tied, k=1) == 0.75


def test_discounted_gains_of_torch_inputs(rng):
    y_true, y_score = rng.integers(0, 3, (8, 4)), rng.random((8, 4))
    for name in ("dcg_score", "ndcg_score"):
        ours = getattr(mg, name)(torch.from_numpy(y_true), torch.from_numpy(y_score))
        assert isinstance(ours, torch.Tensor)
        assert float(ours) == pytest.approx(getattr(skm, name)(y_true, y_score), rel=RTOL)


@pytest.mark.parametrize("name, options, y_true, message", [
    ("dcg_score", {"k": 0}, GOOD_Y, r"k must be an integer >= 1 or None, got 0"),
    ("ndcg_score", {"k": 1.5}, GOOD_Y, r"k must be an integer >= 1 or None, got 1\.5"),
    ("dcg_score", {"log_base": 0}, GOOD_Y, r"log_base must be a number > 0, got 0"),
    ("dcg_score", {"ignore_ties": "yes"}, GOOD_Y, r"ignore_ties"),
    ("ndcg_score", {}, np.array([[0, -1, 1], [1, 0, 0]]),
     r"should not be used on negative y_true values; found -1\.0 at row 0, column 1"),
    ("dcg_score", {}, np.array([[0, np.nan, 1], [1, 0, 0]]),
     r"y_true must hold finite relevance values; found nan at row 0, column 1"),
    ("ndcg_score", {}, np.array([1, 0]), r"y_true must be an \(N, L\) matrix of true relevance"),
    ("ndcg_score", {}, np.array([[1], [0]]), r"at least 2 are needed"),
], ids=["k-0", "k-float", "log-base", "ignore-ties", "negative", "nan", "1-d", "one-column"])
def test_bad_discounted_gain_input_is_named(name, options, y_true, message):
    y_score = GOOD_S[:, :y_true.shape[1]] if y_true.ndim == 2 else GOOD_S[:, 0]
    with pytest.raises(ValueError, match=message):
        getattr(mg, name)(y_true, y_score, **options)
