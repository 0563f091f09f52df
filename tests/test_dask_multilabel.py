"""metrics_gpu.dask on (N, L) multilabel indicators: every function equals
scikit-learn and its in-memory namesake on the same rows, chunked unevenly
along the rows (chunks of 7, 13, 1 and 29 rows, one of them a single row of
weight 0), with and without weights, for every ``average`` and
``zero_division``; the ranking metrics with ties in the scores. Rows with
every label 0 or 1 make the per-row rates of ``average="samples"`` 0/0.

Counts are compared exactly (type and dtype too, against the in-memory
function), floats with rtol 1e-12, NaN equal. The synchronous scheduler runs
the graphs (tests/test_dask.py runs the label graphs on a real cluster):
the file stays fast.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")

import dask  # noqa: E402
import sklearn.metrics as skm  # noqa: E402
from dask.delayed import Delayed  # noqa: E402

import metrics_gpu as mg  # noqa: E402
from metrics_gpu import dask as mgd  # noqa: E402

CHUNKS = (7, 13, 1, 29)  # the single row (chunk 2) has weight 0
N, L = sum(CHUNKS), 5
RTOL = 1e-12
ZERO_DIVISIONS = ("warn", 0.0, 1.0, np.nan)


@pytest.fixture(autouse=True)
def synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


def _data():
    rng = np.random.default_rng(20261128)
    y_true = (rng.random((N, L)) < 0.4).astype(np.int64)
    y_pred = np.where(rng.random((N, L)) < 0.7, y_true, 1 - y_true)
    y_true[0], y_pred[0] = 0, 0          # nothing true nor predicted: every rate 0/0
    y_true[1], y_pred[1] = 1, 1          # every label right
    y_true[2], y_pred[2] = 1, 0          # no predicted label
    y_true[3], y_pred[3] = 0, 1          # no true label
    y_true[30], y_pred[30] = 0, 0
    weight = rng.random(N) * 3
    weight[20] = 0.0                     # the one-row chunk: all its weights 0
    weight[4] = 0.0
    int_weight = rng.integers(0, 4, N)
    int_weight[20] = 0
    scores = np.round(rng.random((N, L)), 1)  # ties within rows
    scores[5] = 0.5                            # a row tied throughout
    relevance = rng.integers(0, 4, (N, L)).astype(np.float64)
    relevance[6] = 0                           # ideal DCG 0
    return {"y_true": y_true, "y_pred": y_pred, "weight": weight, "int_weight": int_weight,
            "scores": scores, "relevance": relevance}


DATA = _data()


def chunked(array, chunks=CHUNKS):
    return da.from_array(array, chunks=(chunks,) + array.shape[1:])


def assert_same(actual, expected, where: str, *, exact_type: bool = True):
    """Same type and dtype (``exact_type``); counts exact, floats within RTOL
    (NaN equal)."""
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected), where
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{where}[{i}]", exact_type=exact_type)
        return
    if expected is None:
        assert actual is None, where
        return
    if exact_type:
        assert type(actual) is type(expected), f"{where}: {type(actual)} != {type(expected)}"
    a, e = np.asarray(actual), np.asarray(expected)
    assert a.shape == e.shape, f"{where}: {a.shape} != {e.shape}"
    if exact_type:
        assert a.dtype == e.dtype, f"{where}: {a.dtype} != {e.dtype}"
    if e.dtype.kind in "iub" and a.dtype.kind in "iub":
        np.testing.assert_array_equal(a, e, err_msg=where)
    else:
        np.testing.assert_allclose(a, e, rtol=RTOL, atol=0.0, equal_nan=True, err_msg=where)


def recorded(function, *args, **kwargs):
    """``function``'s result and the texts of the warnings it emitted."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = function(*args, **kwargs)
    return result, sorted({str(w.message) for w in caught})


def scikit_learn(name: str, *args, **kwargs):
    """scikit-learn's value, or None where it does not take the arguments
    (zero_division=nan of jaccard_score) or has no such function."""
    function = getattr(skm, name, None)
    if function is None or (name == "jaccard_score" and kwargs.get("zero_division") is not None
                            and kwargs["zero_division"] != kwargs["zero_division"]):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args, **kwargs)


def check_label_call(name: str, options: dict, weights: str | None):
    """The Dask function of chunked rows against the in-memory function (value,
    type, dtype, warnings) and scikit-learn (value)."""
    y_true, y_pred = DATA["y_true"], DATA["y_pred"]
    in_memory = dict(options)
    on_dask = dict(options)
    if weights is not None:
        in_memory["sample_weight"] = DATA[weights]
        on_dask["sample_weight"] = chunked(DATA[weights])
    where = f"{name}({options}, weights={weights})"
    expected, expected_warnings = recorded(getattr(mg, name), y_true, y_pred, **in_memory)
    result, result_warnings = recorded(getattr(mgd, name), chunked(y_true), chunked(y_pred),
                                       compute=True, **on_dask)
    assert_same(result, expected, where)
    assert result_warnings == expected_warnings, where
    reference = scikit_learn(name, y_true, y_pred, **in_memory)
    if reference is not None:
        assert_same(result, reference, f"{where} vs scikit-learn", exact_type=False)


SET_WISE = ("precision_recall_fscore_support", "precision_score", "recall_score", "f1_score",
            "jaccard_score", "specificity_score")
AVERAGES = (None, "micro", "macro", "weighted", "samples")
WEIGHTS = (None, "weight", "int_weight")


@pytest.mark.parametrize("weights", WEIGHTS, ids=lambda w: f"weights={w}")
@pytest.mark.parametrize("average", AVERAGES, ids=lambda a: f"average={a}")
@pytest.mark.parametrize("name", SET_WISE)
def test_set_wise_metrics_equal_scikit_learn(name, average, weights):
    for zero_division in ZERO_DIVISIONS:
        check_label_call(name, {"average": average, "zero_division": zero_division}, weights)


@pytest.mark.parametrize("options", [
    {"beta": 0.5}, {"beta": 2.0}, {"beta": 0.0}, {"beta": np.inf},
], ids=lambda o: f"beta={o['beta']}")
@pytest.mark.parametrize("weights", WEIGHTS[:2], ids=lambda w: f"weights={w}")
def test_fbeta_equals_scikit_learn(options, weights):
    for average in AVERAGES:
        for zero_division in ZERO_DIVISIONS:
            check_label_call("fbeta_score", dict(options, average=average,
                                                 zero_division=zero_division), weights)
    check_label_call("precision_recall_fscore_support",
                     dict(options, average="samples", zero_division="warn"), weights)


@pytest.mark.parametrize("labels", [[3, 0], [1], [4, 2, 0, 1, 3]], ids=str)
@pytest.mark.parametrize("weights", WEIGHTS[:2], ids=lambda w: f"weights={w}")
def test_labels_select_columns(labels, weights):
    for name in SET_WISE:
        for average in AVERAGES:
            check_label_call(name, {"labels": labels, "average": average,
                                    "zero_division": "warn"}, weights)
    check_label_call("multilabel_confusion_matrix", {"labels": labels}, weights)


@pytest.mark.parametrize("weights", WEIGHTS, ids=lambda w: f"weights={w}")
@pytest.mark.parametrize("name, options", [
    ("accuracy_score", {}), ("accuracy_score", {"normalize": False}),
    ("zero_one_loss", {}), ("zero_one_loss", {"normalize": False}),
    ("hamming_loss", {}), ("multilabel_confusion_matrix", {}),
], ids=lambda v: v if isinstance(v, str) else str(v))
def test_counting_metrics_equal_scikit_learn(name, options, weights):
    check_label_call(name, options, weights)


def test_warn_for_and_pos_label_as_in_memory():
    """prfs's warn_for, and the pos_label warning of a set-wise average."""
    check_label_call("precision_recall_fscore_support",
                     {"average": "samples", "warn_for": ("recall",)}, None)
    check_label_call("f1_score", {"average": "macro", "pos_label": 0}, None)


def test_bool_and_float_indicators():
    y_true, y_pred = DATA["y_true"].astype(bool), DATA["y_pred"].astype(np.float32)
    for name, options in (("f1_score", {"average": "samples", "zero_division": 0.0}),
                          ("hamming_loss", {})):
        expected = getattr(mg, name)(y_true, y_pred, **options)
        result = getattr(mgd, name)(chunked(y_true), chunked(y_pred), compute=True, **options)
        assert_same(result, expected, name)


def test_lazy_result_and_host_inputs():
    """A Delayed by default; a NumPy y_pred is chunked like y_true."""
    options = {"average": "samples", "zero_division": 1.0, "sample_weight": DATA["weight"]}
    lazy = mgd.f1_score(chunked(DATA["y_true"]), DATA["y_pred"], **options)
    assert isinstance(lazy, Delayed)
    assert_same(lazy.compute(), mg.f1_score(DATA["y_true"], DATA["y_pred"], **options),
                "lazy f1_score")
    lazy = mgd.coverage_error(chunked(DATA["y_true"]), DATA["scores"])
    assert isinstance(lazy, Delayed)
    assert_same(lazy.compute(), mg.coverage_error(DATA["y_true"], DATA["scores"]),
                "lazy coverage_error")


def test_one_chunk_and_many_chunks_agree():
    """The merge changes nothing but the order of float sums."""
    y_true, y_pred = DATA["y_true"], DATA["y_pred"]
    for chunks in ((N,), (1,) * N):
        for average in ("samples", "macro"):
            result = mgd.jaccard_score(chunked(y_true, chunks), chunked(y_pred, chunks),
                                       average=average, zero_division=1.0,
                                       sample_weight=chunked(DATA["weight"], chunks),
                                       compute=True)
            assert_same(result, mg.jaccard_score(y_true, y_pred, average=average,
                                                 zero_division=1.0,
                                                 sample_weight=DATA["weight"]),
                        f"jaccard_score(chunks={len(chunks)}, average={average})")


def test_every_row_undefined():
    """No label true nor predicted in any row: every per-row rate is 0/0."""
    zeros = np.zeros((N, L), dtype=np.int64)
    for zero_division in ZERO_DIVISIONS:
        for weights in (None, "weight"):
            options = {"average": "samples", "zero_division": zero_division}
            if weights is not None:
                options["sample_weight"] = DATA[weights]
            expected, expected_warnings = recorded(mg.precision_recall_fscore_support,
                                                   zeros, zeros, **options)
            if weights is not None:
                options["sample_weight"] = chunked(DATA[weights])
            result, result_warnings = recorded(mgd.precision_recall_fscore_support,
                                               chunked(zeros), chunked(zeros), compute=True,
                                               **options)
            where = f"zero_division={zero_division}, weights={weights}"
            assert_same(result, expected, where)
            assert result_warnings == expected_warnings, where


# -- ranking metrics ------------------------------------------------------------------

RANKING_CALLS = [
    ("label_ranking_average_precision_score", "y_true", {}),
    ("label_ranking_loss", "y_true", {}),
    ("coverage_error", "y_true", {}),
    ("dcg_score", "relevance", {}),
    ("dcg_score", "relevance", {"k": 2, "log_base": 10}),
    ("dcg_score", "relevance", {"ignore_ties": True}),
    ("ndcg_score", "relevance", {}),
    ("ndcg_score", "y_true", {"k": 3}),
    ("ndcg_score", "relevance", {"k": 1, "ignore_ties": True}),
]


@pytest.mark.parametrize("weights", WEIGHTS, ids=lambda w: f"weights={w}")
@pytest.mark.parametrize("name, truth, options", RANKING_CALLS,
                         ids=[f"{name}-{truth}-{options}" for name, truth, options in
                              RANKING_CALLS])
def test_ranking_metrics_equal_scikit_learn(name, truth, options, weights):
    y_true, scores = DATA[truth], DATA["scores"]
    in_memory, on_dask = dict(options), dict(options)
    if weights is not None:
        in_memory["sample_weight"] = DATA[weights]
        on_dask["sample_weight"] = chunked(DATA[weights])
    where = f"{name}({truth}, {options}, weights={weights})"
    result = getattr(mgd, name)(chunked(y_true), chunked(scores), compute=True, **on_dask)
    assert_same(result, getattr(mg, name)(y_true, scores, **in_memory), where)
    assert_same(result, getattr(skm, name)(y_true, scores, **in_memory),
                f"{where} vs scikit-learn", exact_type=False)


# -- errors ---------------------------------------------------------------------------


def test_label_axis_chunking_is_refused_naming_the_argument():
    y_true, y_pred = DATA["y_true"], DATA["y_pred"]
    split = da.from_array(y_true, chunks=(CHUNKS, (2, 3)))
    with pytest.raises(ValueError, match=r"y_true is chunked along the label axis .*"
                                         r"y_true\.rechunk\(\{1: -1\}\)"):
        mgd.f1_score(split, chunked(y_pred), average="macro")
    with pytest.raises(ValueError, match="y_pred is chunked along the label axis"):
        mgd.hamming_loss(chunked(y_true), da.from_array(y_pred, chunks=(CHUNKS, (4, 1))))
    with pytest.raises(ValueError, match="y_score is chunked along the label axis"):
        mgd.label_ranking_loss(chunked(y_true), da.from_array(DATA["scores"],
                                                              chunks=(CHUNKS, (2, 3))))
    with pytest.raises(ValueError, match="y_true is chunked along the label axis"):
        mgd.ndcg_score(split, chunked(DATA["scores"]))


def test_mismatched_shapes_are_refused():
    y_true = chunked(DATA["y_true"])
    with pytest.raises(ValueError, match=r"so y_pred must be one too, of the same shape; got "
                                         r"y_pred of shape \(50, 4\)"):
        mgd.jaccard_score(y_true, chunked(DATA["y_pred"][:, :4]), average="samples")
    with pytest.raises(ValueError, match="y_true has 50 samples but y_pred has 49"):
        mgd.accuracy_score(y_true, DATA["y_pred"][:49])
    with pytest.raises(ValueError, match="y_true has 50 samples but sample_weight has 49"):
        mgd.accuracy_score(y_true, chunked(DATA["y_pred"]), sample_weight=DATA["weight"][:49])
    with pytest.raises(ValueError, match=r"coverage_error: y_true and y_score must have the "
                                         r"same shape \(N, L\); got \(50, 5\) and \(50, 6\)"):
        mgd.coverage_error(y_true, np.zeros((N, L + 1)))


def test_bad_values_name_their_chunk():
    y_true = DATA["y_true"].copy()
    y_true[25, 1] = 2  # chunk 3, which starts at row 21
    with pytest.raises(ValueError, match=r"y_true holds 2 at row 4, column 1: a "
                                         r"multilabel-indicator y_true holds 0 and 1; map .*"
                                         r"chunk 3 along axis 0, which starts at sample 21"):
        mgd.f1_score(chunked(y_true), chunked(DATA["y_pred"]), average="micro", compute=True)
    weight = DATA["weight"].copy()
    weight[10] = -1.0  # chunk 1, which starts at row 7
    with pytest.raises(ValueError, match=r"non-negative; found -1\.0 at index 3 .*chunk 1 "):
        mgd.hamming_loss(chunked(DATA["y_true"]), chunked(DATA["y_pred"]),
                         sample_weight=chunked(weight), compute=True)
    relevance = DATA["relevance"].copy()
    relevance[40, 2] = -1.0
    with pytest.raises(ValueError, match=r"negative y_true values.*chunk 3 "):
        mgd.ndcg_score(chunked(relevance), chunked(DATA["scores"]), compute=True)
    with pytest.raises(ValueError, match=r"0/1 label indicators.*chunk 3 "):
        mgd.label_ranking_loss(chunked(y_true), chunked(DATA["scores"]), compute=True)


def test_weights_all_zero_are_refused_for_the_whole_data():
    zeros = chunked(np.zeros(N))
    with pytest.raises(ValueError, match="all 50 are 0"):
        mgd.accuracy_score(chunked(DATA["y_true"]), chunked(DATA["y_pred"]),
                           sample_weight=zeros, compute=True)
    with pytest.raises(ValueError, match="all 50 are 0"):
        mgd.label_ranking_average_precision_score(chunked(DATA["y_true"]),
                                                  chunked(DATA["scores"]),
                                                  sample_weight=zeros, compute=True)


@pytest.mark.parametrize("call, pattern", [
    (lambda t, p: mgd.precision_score(t, p), r"Target is multilabel-indicator but "
                                             r"average='binary'"),
    (lambda t, p: mgd.f1_score(t, p, average="macro", labels=[5]),
     r"All labels must be in \[0, n labels\)"),
    (lambda t, p: mgd.recall_score(t, p, average="macro", zero_division=2),
     "zero_division must be"),
    (lambda t, p: mgd.multilabel_confusion_matrix(t, p, samplewise=True),
     r"samplewise=True is not supported by metrics_gpu.dask"),
    (lambda t, p: mgd.classification_report(t, p, digits=-1),
     "digits must be a non-negative integer"),
    (lambda t, p: mgd.matthews_corrcoef(t, p), r"does not take \(N, L\) multilabel-indicator"),
    (lambda t, p: mgd.dcg_score(t, p, k=0), "k must be an integer >= 1"),
], ids=["binary", "labels", "zero_division", "samplewise", "classification_report-digits",
        "matthews_corrcoef", "dcg-k"])
def test_refused_arguments(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call(chunked(DATA["y_true"]), chunked(DATA["y_pred"]))


def test_graphs_and_states_pickle():
    """What a distributed cluster ships: the graph's tasks, and the states
    (the processes of tests/test_dask.py's cluster would cost seconds here)."""
    import pickle

    y_true, y_pred = chunked(DATA["y_true"]), chunked(DATA["y_pred"])
    options = {"average": "samples", "zero_division": np.nan}
    for lazy, expected in (
            (mgd.precision_recall_fscore_support(y_true, y_pred, **options),
             mg.precision_recall_fscore_support(DATA["y_true"], DATA["y_pred"], **options)),
            (mgd.dcg_score(chunked(DATA["relevance"]), chunked(DATA["scores"]), k=2),
             mg.dcg_score(DATA["relevance"], DATA["scores"], k=2))):
        assert_same(pickle.loads(pickle.dumps(lazy)).compute(), expected, "unpickled graph")
    state = mgd.multilabel._multilabel_of_chunk(
        DATA["y_true"], DATA["y_pred"], DATA["weight"], index=0, offset=0, columns=None,
        rates=("precision", "jaccard"), beta=1.0, num_classes=None, ignore_index=None,
        validate=True)
    assert pickle.loads(pickle.dumps(state)).rates.keys() == state.rates.keys()


def test_class_codes_give_one_vs_rest_matrices():
    """(N,) class codes: multilabel_confusion_matrix's one-vs-rest matrices,
    from the confusion cells, as in memory (int64 without weights)."""
    rng = np.random.default_rng(3)
    y_true, y_pred = rng.integers(0, 4, N), rng.integers(0, 4, N)
    for options in ({}, {"labels": [3, 1]}):
        for weights in (None, "weight"):
            in_memory, on_dask = dict(options), dict(options)
            if weights is not None:
                in_memory["sample_weight"] = DATA[weights]
                on_dask["sample_weight"] = chunked(DATA[weights])
            result = mgd.multilabel_confusion_matrix(chunked(y_true), chunked(y_pred),
                                                     compute=True, **on_dask)
            where = f"multilabel_confusion_matrix(codes, {options}, weights={weights})"
            assert_same(result, mg.multilabel_confusion_matrix(y_true, y_pred, **in_memory),
                        where)
            assert_same(result, skm.multilabel_confusion_matrix(y_true, y_pred, **in_memory),
                        f"{where} vs scikit-learn", exact_type=False)


# -- issue 51: classification_report and scores= of multilabel input ---------------------


@pytest.mark.parametrize("weights", WEIGHTS, ids=lambda w: f"weights={w}")
@pytest.mark.parametrize("options", [{}, {"output_dict": True},
                                     {"labels": [3, 0], "target_names": ["d", "a"],
                                      "digits": 4},
                                     {"zero_division": 1.0, "output_dict": True}],
                         ids=["text", "dict", "labels", "zero_division"])
def test_classification_report_equals_in_memory(options, weights):
    """(N, L) indicators: every label's line and the micro, macro, weighted and
    samples averages, as the in-memory report (text, or its dictionary within
    RTOL: a weighted support is summed chunk by chunk)."""
    y_true, y_pred = DATA["y_true"], DATA["y_pred"]
    in_memory, on_dask = dict(options), dict(options)
    if weights is not None:
        in_memory["sample_weight"] = DATA[weights]
        on_dask["sample_weight"] = chunked(DATA[weights])
    expected, expected_warnings = recorded(mg.classification_report, y_true, y_pred,
                                           **in_memory)
    result, result_warnings = recorded(mgd.classification_report, chunked(y_true),
                                       chunked(y_pred), compute=True, **on_dask)
    assert result_warnings == expected_warnings
    if not options.get("output_dict"):
        if weights != "weight":
            assert result == expected
            return
        # Float supports are printed in full: the last column within RTOL.
        for got, want in zip(result.splitlines(), expected.splitlines(), strict=True):
            *got_cells, got_support = got.split() or [""]
            *want_cells, want_support = want.split() or [""]
            assert got_cells == want_cells, (got, want)
            if want_support not in ("", "support"):
                assert float(got_support) == pytest.approx(float(want_support), rel=RTOL)
        return
    assert result.keys() == expected.keys()
    for key, line in expected.items():
        for column, value in line.items():
            assert result[key][column] == pytest.approx(value, rel=RTOL, nan_ok=True), \
                (key, column)
    reference = scikit_learn("classification_report", y_true, y_pred, **in_memory)
    for key in ("micro avg", "samples avg"):
        assert result[key]["f1-score"] == pytest.approx(reference[key]["f1-score"], abs=1e-12)


@pytest.mark.parametrize("kind, threshold", [("probabilities", 0.5), ("probabilities", 0.3),
                                             ("logits", 0.5)])
@pytest.mark.parametrize("name, options", [
    ("f1_score", {"average": "samples"}), ("precision_score", {"average": "macro"}),
    ("jaccard_score", {"average": None}), ("accuracy_score", {}), ("hamming_loss", {}),
    ("multilabel_confusion_matrix", {}), ("classification_report", {"output_dict": True})])
def test_scores_argument_as_in_memory(name, options, kind, threshold):
    """scores= / threshold=: (N, L) score predictions cut as in memory, in each chunk."""
    y_true, weight = DATA["y_true"], DATA["weight"]
    scores = DATA["scores"] if kind == "probabilities" else DATA["scores"] * 8 - 4
    arguments = dict(options, scores=kind, threshold=threshold)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = getattr(mg, name)(y_true, scores, sample_weight=weight, **arguments)
        result = getattr(mgd, name)(chunked(y_true), chunked(scores),
                                    sample_weight=chunked(weight), compute=True, **arguments)
    if isinstance(expected, dict):
        for key, line in expected.items():
            for column, value in line.items():
                assert result[key][column] == pytest.approx(value, rel=RTOL), (key, column)
        return
    assert_same(result, expected, f"{name}({arguments})")


@pytest.mark.parametrize("kind", ["probabilities", "logits", "labels"])
@pytest.mark.parametrize("weights", [None, "weight"], ids=lambda w: f"weights={w}")
def test_multilabel_metrics_equal_the_in_memory_state(kind, weights):
    """multilabel_metrics: a MultilabelMetrics state per chunk, merged: every
    value of the in-memory state fed all the rows (binned ROC AUC / AP and the
    label-ranking metrics with scores)."""
    y_true = DATA["y_true"]
    preds = {"probabilities": DATA["scores"], "logits": DATA["scores"] * 8 - 4,
             "labels": DATA["y_pred"]}[kind]
    options = {} if kind == "labels" else dict(scores=kind, thresholds=50, ranking=True)
    weight = None if weights is None else DATA[weights]
    state = mg.MultilabelMetrics(L, **options)
    state.update(y_true, preds, weight)
    expected = state.compute()
    result = mgd.multilabel_metrics(chunked(y_true), chunked(preds), L, compute=True,
                                    sample_weight=None if weight is None else chunked(weight),
                                    **options)
    assert isinstance(result, mg.MultilabelReport) and result.keys() == expected.keys()
    for name in expected:
        assert float(result[name]) == pytest.approx(float(expected[name]), rel=RTOL,
                                                    abs=1e-15, nan_ok=True), name
    for name, values in expected.per_label.items():
        np.testing.assert_allclose(result.per_label[name], values, rtol=RTOL, equal_nan=True)
    np.testing.assert_allclose(result.confusion_matrix, expected.confusion_matrix, rtol=RTOL)
    lazy = mgd.multilabel_metrics(chunked(y_true), chunked(preds), L, **options)
    assert isinstance(lazy, Delayed)


@pytest.mark.parametrize("average", [None, "macro", "weighted", "micro"])
@pytest.mark.parametrize("name", ["roc_auc", "average_precision"])
def test_multilabel_binned_auc_of_dask_arrays(name, average):
    """roc_auc_score / average_precision_score of (N, L) indicators and scores:
    the binned state's values, within its error bound of the exact in-memory ones."""
    y_true, scores, weight = DATA["y_true"], DATA["scores"], DATA["weight"]
    function = getattr(mgd, f"{name}_score")
    result = function(chunked(y_true), chunked(scores), average=average, thresholds=256,
                      sample_weight=chunked(weight), compute=True)
    state = mg.MultilabelMetrics(L, scores="probabilities", thresholds=256)
    state.update(y_true, scores, weight)
    report = state.compute()
    if average is None:
        np.testing.assert_allclose(result, report.per_label[name], rtol=RTOL)
        bound = report.per_label[f"{name}_error_bound"]
    else:
        assert result == pytest.approx(float(report[f"{name}_{average}"]), rel=RTOL)
        bound = report[f"{name}_{'' if average == 'macro' else average + '_'}error_bound"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exact = getattr(mg, f"{name}_score")(y_true, scores, average=average,
                                             sample_weight=weight)
    assert np.all(np.abs(np.asarray(result) - exact) <= np.asarray(bound) + 1e-12)


def test_multilabel_state_errors_name_the_chunk_and_row():
    bad = DATA["scores"].copy()
    bad[25, 1] = 1.5  # chunk 3 starts at row 21
    with pytest.raises(ValueError, match=r"chunk 3 along axis 0 .* row 25 of the whole array"):
        mgd.roc_auc_score(chunked(DATA["y_true"]), chunked(bad), thresholds=16, compute=True)
    with pytest.raises(ValueError, match="average='samples' of \\(N, L\\) roc_auc"):
        mgd.roc_auc_score(chunked(DATA["y_true"]), chunked(bad), thresholds=16,
                          average="samples")
