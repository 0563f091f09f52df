"""metrics_gpu.dask on a real distributed.LocalCluster (two worker processes):
every function equals its in-memory namesake on the same data, chunked
unevenly; the binned AUC is within its reported error bound of scikit-learn's
exact value; nothing but small states reaches the client.

Counts are compared exactly (type and dtype too), floats with rtol 1e-12.
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

import dask  # noqa: E402
import sklearn.metrics as skm  # noqa: E402
from dask.core import get_dependencies  # noqa: E402
from dask.delayed import Delayed  # noqa: E402

import metrics_gpu as mg  # noqa: E402
from metrics_gpu import dask as mgd  # noqa: E402

N, K, CHUNK = 12_000, 5, 997  # 13 chunks, the last one short
RTOL = 1e-12
# A merged streaming state sums in another order than one stream: metrics that
# cancel to near 0 (kappa of random data) differ by a few ulp of their terms.
STREAM_ATOL = 1e-14
IGNORE = -100


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(20261125)
    y_true = rng.integers(0, K, N)
    y_pred = np.where(rng.random(N) < 0.4, y_true, rng.integers(0, K, N))
    scores = rng.normal(size=(N, K))
    tied = rng.random(N) < 0.05  # two equal maxima: the first one wins, as in memory
    scores[tied, 3] = scores[tied].max(axis=1)
    scores[tied, 1] = scores[tied, 3]
    return {"y_true": y_true, "y_pred": y_pred, "scores": scores,
            "weight": rng.random(N) * 3, "int_weight": rng.integers(0, 4, N),
            "ignored": np.where(rng.random(N) < 0.07, IGNORE, y_true)}


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def chunked(array, chunks=CHUNK):
    return da.from_array(array, chunks=(chunks,) + array.shape[1:])


def quietly(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args, **kwargs)


def assert_same(actual, expected, where: str, atol: float = 0.0):
    """Same type and dtype; counts exact, floats within RTOL (NaN equal)."""
    if isinstance(expected, mg.LabelReport):
        assert isinstance(actual, mg.LabelReport), where
        assert_same(actual.to_dict(), expected.to_dict(), where)
        np.testing.assert_array_equal(actual.classes, expected.classes, err_msg=where)
        return
    assert type(actual) is type(expected), f"{where}: {type(actual)} != {type(expected)}"
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), where
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{where}[{i}]", atol)
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), where
        for key in expected:
            assert_same(actual[key], expected[key], f"{where}[{key!r}]", atol)
    elif isinstance(expected, str):
        # Text: the same words; weighted supports are printed whole, so their
        # last digits may differ by the order of the float sums.
        words, expected_words = actual.split(), expected.split()
        assert len(words) == len(expected_words), f"{where}:\n{actual}\n!=\n{expected}"
        for word, expected_word in zip(words, expected_words):
            if word != expected_word:
                np.testing.assert_allclose(float(word), float(expected_word), rtol=RTOL,
                                           err_msg=f"{where}:\n{actual}\n!=\n{expected}")
        assert actual.replace(" ", "").count("\n") == expected.count("\n"), where
    elif expected is None:
        assert actual is None, where
    else:
        a, e = np.asarray(actual), np.asarray(expected)
        assert a.dtype == e.dtype and a.shape == e.shape, f"{where}: {a.dtype}{a.shape} != " \
                                                          f"{e.dtype}{e.shape}"
        if e.dtype.kind in "iub":
            np.testing.assert_array_equal(a, e, err_msg=where)
        else:
            np.testing.assert_allclose(a, e, rtol=RTOL, atol=atol, equal_nan=True, err_msg=where)


# -- label metrics ---------------------------------------------------------------

LABEL_CALLS = [
    ("accuracy_score", {}),
    ("accuracy_score", {"normalize": False}),
    ("balanced_accuracy_score", {}),
    ("balanced_accuracy_score", {"adjusted": True}),
    ("cohen_kappa_score", {}),
    ("cohen_kappa_score", {"weights": "quadratic"}),
    ("cohen_kappa_score", {"labels": [0, 2, 3], "weights": "linear"}),
    ("confusion_matrix", {}),
    ("confusion_matrix", {"normalize": "true"}),
    ("confusion_matrix", {"labels": [3, 0, 2]}),
    ("f1_score", {"average": "macro"}),
    ("f1_score", {"average": None}),
    ("f1_score", {"average": "micro", "labels": [0, 2, 3]}),
    ("fbeta_score", {"beta": 0.5, "average": "weighted"}),
    ("hamming_loss", {}),
    ("jaccard_score", {"average": None}),
    ("jaccard_score", {"average": "macro", "zero_division": 1.0}),
    ("matthews_corrcoef", {}),
    ("precision_recall_fscore_support", {}),
    ("precision_recall_fscore_support", {"average": "weighted", "beta": 2.0}),
    ("precision_score", {"average": "macro", "labels": [1, 4]}),
    ("recall_score", {"average": None}),
    ("specificity_score", {"average": "micro"}),
    ("zero_one_loss", {}),
    ("zero_one_loss", {"normalize": False}),
    ("classification_report", {}),
    ("classification_report", {"output_dict": True}),
    ("classification_report", {"digits": 4, "labels": [0, 1, 2]}),
    ("label_report", {}),
]


def _label_case(data, case):
    """(y_true, y_pred, sample_weight, extra arguments) of one input case, in memory."""
    y_true, y_pred, weight = data["y_true"], data["y_pred"], None
    extra = {}
    if case == "float weights":
        weight = data["weight"]
    elif case == "integer weights":
        weight = data["int_weight"]
    elif case == "ignore_index":
        y_true, weight, extra = data["ignored"], data["weight"], {"ignore_index": IGNORE}
    elif case == "scores":
        y_pred = data["scores"]
    elif case == "num_classes":
        extra = {"num_classes": K + 2}
    elif case == "zero-weight pair":
        # Class K appears only in samples of weight 0: present, as in memory.
        y_true, y_pred, weight = y_true.copy(), y_pred.copy(), data["weight"].copy()
        y_true[[5, 4000]], y_pred[[5, 9000]], weight[[5, 4000, 9000]] = K, K, 0.0
    return y_true, y_pred, weight, extra


LABEL_CASES = ["unweighted", "float weights", "integer weights", "ignore_index", "scores",
               "num_classes", "zero-weight pair"]


@pytest.mark.parametrize("case", LABEL_CASES)
def test_label_metrics_equal_in_memory(client, data, case):
    y_true, y_pred, weight, extra = _label_case(data, case)
    # y_pred chunked otherwise (and scores split across columns): aligned by rechunking.
    dask_pred = da.from_array(y_pred, chunks=(1500,) + ((2,) if y_pred.ndim == 2 else ()))
    dask_weight = None if weight is None else chunked(weight, 2000)
    lazy = [getattr(mgd, name)(chunked(y_true), dask_pred, sample_weight=dask_weight,
                               **kwargs, **extra)
            for name, kwargs in LABEL_CALLS]
    assert all(isinstance(value, Delayed) for value in lazy)
    results = quietly(dask.compute, *lazy)
    for (name, kwargs), result in zip(LABEL_CALLS, results):
        expected = quietly(getattr(mg, name), y_true, y_pred, sample_weight=weight, **kwargs,
                           **extra)
        assert_same(result, expected, f"{name}({kwargs}) [{case}]")


def test_label_metrics_compute_true(client, data):
    """compute=True gives the value (the merged cells are gathered, the metric runs here)."""
    y_true, y_pred = data["y_true"], data["y_pred"]
    for name, kwargs in LABEL_CALLS[::3]:
        result = quietly(getattr(mgd, name), chunked(y_true), chunked(y_pred), compute=True,
                         **kwargs)
        assert_same(result, quietly(getattr(mg, name), y_true, y_pred, **kwargs), name)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_binary_label_metrics(client, data, weighted):
    y_true, y_pred = data["y_true"] % 2, data["y_pred"] % 2
    weight = data["weight"] if weighted else None
    calls = [("f1_score", {}), ("f1_score", {"pos_label": 0}), ("precision_score", {}),
             ("specificity_score", {"pos_label": 0}), ("jaccard_score", {}),
             ("confusion_matrix", {})]
    lazy = [getattr(mgd, name)(chunked(y_true), chunked(y_pred),
                               sample_weight=None if weight is None else chunked(weight), **kw)
            for name, kw in calls]
    for (name, kwargs), result in zip(calls, dask.compute(*lazy)):
        expected = getattr(mg, name)(y_true, y_pred, sample_weight=weight, **kwargs)
        assert_same(result, expected, f"{name}({kwargs})")


def test_label_validation_errors(client, data):
    y_true = data["y_true"].copy()
    y_true[5000] = K + 3
    with pytest.raises(ValueError, match=r"label 8 at index 15, outside 0\.\.4.*chunk 5 "
                                         r"along axis 0, which starts at sample 4985"):
        mgd.accuracy_score(chunked(y_true), chunked(data["y_pred"]), num_classes=K).compute()
    with pytest.raises(ValueError, match="At least one label specified must be in y_true"):
        mgd.confusion_matrix(chunked(data["y_true"]), chunked(data["y_pred"]),
                             labels=[K + 1], compute=True)
    weight = data["weight"].copy()
    weight[7777] = np.nan
    with pytest.raises(ValueError, match="sample_weight must be finite; found nan"):
        mgd.f1_score(chunked(data["y_true"]), chunked(data["y_pred"]),
                     sample_weight=chunked(weight), average="macro", compute=True)
    with pytest.raises(ValueError, match="at least one non-zero weight"):
        mgd.accuracy_score(chunked(data["y_true"]), chunked(data["y_pred"]),
                           sample_weight=chunked(np.zeros(N)), compute=True)
    with pytest.raises(ValueError, match="average='binary'"):
        mgd.f1_score(chunked(data["y_true"]), chunked(data["y_pred"]), compute=True)
    with pytest.raises(ValueError, match="y_true has 12000 samples but y_pred has 11999"):
        mgd.accuracy_score(chunked(data["y_true"]), chunked(data["y_pred"][1:]))


def test_label_report_counts_invalid_samples(client, data):
    """validate=False: out-of-range samples are left out and counted as samples
    (not as distinct pairs), as in memory."""
    y_true = data["y_true"].copy()
    y_true[::50] = K + 1
    for weight in (None, data["weight"]):
        dask_weight = None if weight is None else chunked(weight)
        result = mgd.label_report(chunked(y_true), chunked(data["y_pred"]), num_classes=K,
                                  validate=False, sample_weight=dask_weight, compute=True)
        expected = mg.label_report(y_true, data["y_pred"], num_classes=K, validate=False,
                                   sample_weight=weight)
        assert result.invalid == expected.invalid == N // 50
        assert_same(result, expected, "label_report(validate=False)")


# -- score metrics: the streaming state -----------------------------------------------


def test_classification_metrics_equal_one_stream(client, data):
    y_true, scores, weight = data["ignored"], data["scores"], data["weight"]
    lazy = mgd.classification_metrics(chunked(y_true), chunked(scores), K,
                                      sample_weight=chunked(weight), top_k=(1, 2),
                                      thresholds=64, ignore_index=IGNORE)
    assert isinstance(lazy, Delayed)
    state = mg.ClassificationMetrics(K, top_k=(1, 2), thresholds=64, ignore_index=IGNORE)
    state.update(y_true, scores, weight)
    expected = state.compute()
    report = lazy.compute()  # the in-memory report type: same names, same to_dict()
    assert isinstance(report, mg.StreamingReport), type(report)
    assert list(report) == list(expected)
    assert_same(report.to_dict(), expected.to_dict(), "classification_metrics", STREAM_ATOL)
    labels = mgd.classification_metrics(chunked(data["y_true"]), chunked(data["y_pred"]), K,
                                        compute=True)
    state = mg.ClassificationMetrics(K)
    state.update(data["y_true"], data["y_pred"])
    assert list(labels) == list(state.compute())
    assert_same(labels.to_dict(), state.compute().to_dict(), "classification_metrics(labels)",
                STREAM_ATOL)
    with pytest.warns(DeprecationWarning, match=r"to_dict\(\)\['metrics'\]"):
        assert labels["metrics"] == labels.to_dict()["metrics"]  # the old dictionary's keys


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_score_metrics_equal_in_memory(client, data, weighted):
    y_true, logits = data["y_true"], data["scores"]
    probabilities = softmax(logits)
    weight = data["weight"] if weighted else None
    w = None if weight is None else chunked(weight)
    t, z, p = chunked(y_true), chunked(logits, 1500), chunked(probabilities)
    binary = probabilities[:, 1] / (probabilities[:, 0] + probabilities[:, 1])
    calls = [
        (mgd.log_loss(t, p, sample_weight=w), mg.log_loss(y_true, probabilities,
                                                          sample_weight=weight)),
        (mgd.log_loss(t, z, from_logits=True, sample_weight=w),
         mg.log_loss(y_true, probabilities, sample_weight=weight)),
        (mgd.log_loss(t, p, normalize=False, sample_weight=w),
         mg.log_loss(y_true, probabilities, normalize=False, sample_weight=weight)),
        (mgd.brier_score_loss(t, p, sample_weight=w),
         mg.brier_score_loss(y_true, probabilities, sample_weight=weight)),
        (mgd.brier_score_loss(t % 2, chunked(binary), sample_weight=w),
         mg.brier_score_loss(y_true % 2, binary, sample_weight=weight)),
        (mgd.top_k_accuracy_score(t, z, k=2, sample_weight=w),
         mg.top_k_accuracy_score(y_true, logits, k=2, sample_weight=weight)),
        (mgd.top_k_accuracy_score(t, z, k=3, normalize=False, sample_weight=w),
         mg.top_k_accuracy_score(y_true, logits, k=3, normalize=False, sample_weight=weight)),
        (mgd.expected_calibration_error(t, p, n_bins=10, sample_weight=w),
         mg.expected_calibration_error(y_true, probabilities, n_bins=10, sample_weight=weight)),
        (mgd.expected_calibration_error(t, z, norm="max", from_logits=True, sample_weight=w),
         mg.expected_calibration_error(y_true, logits, norm="max", from_logits=True,
                                       sample_weight=weight)),
    ]
    results = dask.compute(*[lazy for lazy, _ in calls])
    for i, (result, (_, expected)) in enumerate(zip(results, calls)):
        assert_same(result, expected, f"score call {i}")


def test_score_metrics_ignore_index(client, data):
    y_true, probabilities, weight = data["ignored"], softmax(data["scores"]), data["weight"]
    result = mgd.log_loss(chunked(y_true), chunked(probabilities), sample_weight=chunked(weight),
                          ignore_index=IGNORE, compute=True)
    expected = mg.log_loss(y_true, probabilities, sample_weight=weight, ignore_index=IGNORE)
    assert_same(result, expected, "log_loss(ignore_index)")


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_binned_auc_within_its_error_bound(client, data, weighted):
    y_true, probabilities = data["y_true"], softmax(data["scores"] + 2.0 * np.eye(K)[
        data["y_true"]])  # informative scores: AUC well above 0.5
    weight = data["weight"] if weighted else None
    w = None if weight is None else chunked(weight)
    t, p = chunked(y_true), chunked(probabilities)
    h = 128
    report, auc, auc_weighted, auc_classes, ap = dask.compute(
        mgd.classification_metrics(t, p, K, sample_weight=w, thresholds=h,
                                   scores="probabilities"),
        mgd.roc_auc_score(t, p, multi_class="ovr", sample_weight=w, thresholds=h),
        mgd.roc_auc_score(t, p, multi_class="ovr", average="weighted", sample_weight=w,
                          thresholds=h),
        mgd.roc_auc_score(t, p, multi_class="ovr", average=None, sample_weight=w, thresholds=h),
        mgd.average_precision_score(t, p, sample_weight=w, thresholds=h))
    metrics = report.to_dict()["metrics"]
    # Separate graphs: float weights may be summed in another order (last bits).
    assert auc == pytest.approx(metrics["roc_auc_macro"], rel=1e-12)
    assert auc_weighted == pytest.approx(metrics["roc_auc_weighted"], rel=1e-12)
    np.testing.assert_allclose(auc_classes, report.per_class["roc_auc"], rtol=1e-12)
    assert ap == pytest.approx(metrics["average_precision_macro"], rel=1e-12)
    exact_auc = skm.roc_auc_score(y_true, probabilities, multi_class="ovr", sample_weight=weight)
    exact_ap = skm.average_precision_score(y_true, probabilities, sample_weight=weight)
    assert abs(auc - exact_auc) <= metrics["roc_auc_error_bound"]
    assert abs(ap - exact_ap) <= metrics["average_precision_error_bound"]
    # Binary: (N,) probabilities of class 1, class 1's binned AUC.
    binary_true = (y_true == 1).astype(np.int64)
    column = probabilities[:, 1]
    binary_report, binary_auc = dask.compute(
        mgd.classification_metrics(chunked(binary_true),
                                   chunked(np.stack([1 - column, column], axis=1)), 2,
                                   sample_weight=w, thresholds=h, scores="probabilities"),
        mgd.roc_auc_score(chunked(binary_true), chunked(column), sample_weight=w, thresholds=h))
    assert binary_auc == pytest.approx(binary_report["roc_auc"], rel=1e-12)
    exact = skm.roc_auc_score(binary_true, column, sample_weight=weight)
    assert abs(binary_auc - exact) <= binary_report["roc_auc_error_bound"]


def test_refusals_name_the_argument(client, data):
    t, p = chunked(data["y_true"]), chunked(softmax(data["scores"]))
    for function in (mgd.roc_auc_score, mgd.average_precision_score):
        with pytest.raises(ValueError, match=r"needs thresholds=H: the exact value .* all N "
                                             r"scores in one place.*_error_bound"):
            function(t, p)
    with pytest.raises(ValueError, match="norm='l2' is not supported"):
        mgd.expected_calibration_error(t, p, norm="l2")
    with pytest.raises(ValueError, match="max_fpr=0.5 is not supported"):
        mgd.roc_auc_score(t, p[:, 1], max_fpr=0.5, thresholds=16)
    with pytest.raises(ValueError, match="multi_class='ovo' is not supported"):
        mgd.roc_auc_score(t, p, multi_class="ovo", thresholds=16)
    with pytest.raises(ValueError, match="average='samples' is not supported"):
        mgd.average_precision_score(t, p, average="samples", thresholds=16)


# -- labels= of the score functions: as in memory -------------------------------------

LABEL_SETS = {
    "none": None,
    "range": range(3),
    "codes-array": np.arange(3),
    "sparse": [1, 4, 7],
    "sparse-unsorted": [7, 1, 4],
    "sparse-uint8": np.array([1, 4, 7], dtype=np.uint8),
}


def _labelled(labels, n: int = 230, seed: int = 7):
    """Targets among ``labels`` (codes 0..2 without), their column positions,
    probabilities and logits of 3 columns, weights."""
    rng = np.random.default_rng(seed)
    columns = np.sort(np.asarray(range(3) if labels is None else labels)).astype(np.int64)
    positions = np.concatenate([np.arange(3), rng.integers(0, 3, n - 3)])
    logits = rng.normal(size=(n, 3)) + 1.5 * np.eye(3)[positions]
    return columns[positions], positions, softmax(logits), logits, rng.random(n) * 2


def _labelled_calls(labels, t, proba, logits, weight, ignore_index=None):
    """(name, Dask function, in-memory function, arguments): each score function
    taking labels=, over the scores it reads."""
    both = dict(labels=labels, ignore_index=ignore_index)
    binary = proba[:, 1] / (proba[:, 0] + proba[:, 1])
    two = None if labels is None else np.sort(np.asarray(labels))[[0, -1]]
    return [
        ("log_loss", mgd.log_loss, mg.log_loss, (t, proba), dict(both, sample_weight=weight)),
        ("log_loss-logits", mgd.log_loss, mg.log_loss, (t, logits),
         dict(both, from_logits=True)),
        ("log_loss-unchecked", mgd.log_loss, mg.log_loss, (t, proba),
         dict(both, validate=False)),
        ("brier_score_loss", mgd.brier_score_loss, mg.brier_score_loss, (t, proba),
         dict(both, sample_weight=weight)),
        ("brier_score_loss-binary", mgd.brier_score_loss, mg.brier_score_loss,
         (np.where(t == t.max(), t.max(), t.min()) if labels is not None else (t > 0) * 1,
          binary), dict(labels=two, ignore_index=ignore_index)),
        ("top_k_accuracy_score", mgd.top_k_accuracy_score, mg.top_k_accuracy_score,
         (t, logits), dict(both, k=2, sample_weight=weight)),
        ("top_k_accuracy_score-count", mgd.top_k_accuracy_score, mg.top_k_accuracy_score,
         (t, logits), dict(both, k=1, normalize=False)),
    ]


@pytest.mark.parametrize("name", sorted(LABEL_SETS))
def test_score_labels_equal_in_memory(name):
    """labels= as in memory (None, range(K), sparse codes in any order and
    dtype), with ignore_index: the same values (the synchronous scheduler:
    the graph is the cluster's, the test cheap)."""
    labels = LABEL_SETS[name]
    y_true, _, proba, logits, weight = _labelled(labels)
    ignored = y_true.copy()
    ignored[::9] = IGNORE
    with dask.config.set(scheduler="synchronous"):
        for targets, ignore_index in ((y_true, None), (ignored, IGNORE)):
            for call, ours, theirs, arrays, options in _labelled_calls(
                    labels, targets, proba, logits, weight, ignore_index):
                if call == "brier_score_loss-binary" and ignore_index is not None:
                    continue  # its targets are rebuilt from t: no ignored rows
                chunked_options = {key: chunked(value, 70) if key == "sample_weight" else
                                   value for key, value in options.items()}
                result = ours(*(chunked(a, 70) for a in arrays), compute=True,
                              **chunked_options)
                expected = theirs(*arrays, **options)
                assert_same(result, expected, f"{call}(labels={name}, "
                                              f"ignore_index={ignore_index})")


@pytest.mark.parametrize("name", ["range", "sparse", "sparse-uint8"])
def test_roc_auc_labels_equal_their_codes(name):
    """Binned ROC AUC of multiclass scores with labels= equals that of the
    column positions without (the binned value is Dask's own, so the
    reference is the same graph on codes); binary scores ignore labels, as in
    memory."""
    labels = LABEL_SETS[name]
    y_true, positions, proba, _, weight = _labelled(labels)
    with dask.config.set(scheduler="synchronous"):
        for average in ("macro", "weighted", None):
            with_labels = mgd.roc_auc_score(chunked(y_true, 70), chunked(proba, 70),
                                            multi_class="ovr", average=average, labels=labels,
                                            sample_weight=chunked(weight, 70), thresholds=32,
                                            compute=True)
            codes = mgd.roc_auc_score(chunked(positions, 70), chunked(proba, 70),
                                      multi_class="ovr", average=average,
                                      sample_weight=chunked(weight, 70), thresholds=32,
                                      compute=True)
            assert_same(with_labels, codes, f"roc_auc_score(labels={name}, average={average})")
        binary = (positions == 2) * 1
        assert_same(mgd.roc_auc_score(chunked(binary, 70), chunked(proba[:, 2], 70),
                                      labels=labels, thresholds=32, compute=True),
                    mgd.roc_auc_score(chunked(binary, 70), chunked(proba[:, 2], 70),
                                      thresholds=32, compute=True), "binary roc_auc_score")


@pytest.mark.parametrize(
    "call, pattern",
    [
        (lambda t, p: mgd.log_loss(t, p, labels=[1, 4]), r"labels has 2 classes but y_proba "
                                                         r"has 3 columns"),
        (lambda t, p: mgd.brier_score_loss(t, p, labels=[1, 4, 4]), r"labels must be distinct"),
        (lambda t, p: mgd.top_k_accuracy_score(t, p, labels=[-1, 4, 7]),
         r"labels contains the negative code -1"),
        (lambda t, p: mgd.log_loss(t, p, labels=["a", "b", "c"]),
         r"labels must be integer class codes"),
        (lambda t, p: mgd.roc_auc_score(t, p, multi_class="ovr", labels=[7, 1, 4],
                                        thresholds=8), r"'labels' must be ordered"),
    ],
    ids=["log_loss-size", "brier-distinct", "top_k-negative", "log_loss-strings",
         "roc_auc-order"],
)
def test_score_labels_refused_as_in_memory(call, pattern):
    """A bad labels= raises the in-memory message when the graph is built,
    before any data is read."""
    y_true, _, proba, _, _ = _labelled([1, 4, 7])
    with pytest.raises(ValueError, match=pattern):
        call(chunked(y_true, 70), chunked(proba, 70))


def test_score_target_outside_labels_names_its_chunk():
    y_true, _, proba, _, _ = _labelled([1, 4, 7])
    y_true[150] = 5
    with dask.config.set(scheduler="synchronous"):
        with pytest.raises(ValueError, match=r"y_true contains 5 at index 10, which is not in "
                                             r"labels \[1, 4, 7\].*chunk 2 along axis 0"):
            mgd.log_loss(chunked(y_true, 70), chunked(proba, 70), labels=[1, 4, 7],
                         compute=True)


def test_score_validation_errors(client, data):
    y_true = data["y_true"].copy()
    y_true[3000] = K + 4
    with pytest.raises(ValueError, match=r"y_true of chunk 3 along axis 0 holds a target "
                                         r"outside 0\.\.4 \(num_classes=5\) at sample 3000 of "
                                         r"the whole array"):
        mgd.classification_metrics(chunked(y_true), chunked(data["scores"]), K).compute()
    probabilities = softmax(data["scores"])
    probabilities[6001, 2] = 1.5
    with pytest.raises(ValueError, match=r"probabilities in \[0, 1\]; found 1.5 at row, column "
                                         r"\(19, 2\).*chunk 6 along axis 0"):
        mgd.log_loss(chunked(data["y_true"]), chunked(probabilities), compute=True)


# -- the graph: small states only ----------------------------------------------------


def test_only_small_states_reach_the_client(client, data):
    """The last task depends on merges only; the merged state's size depends on
    K, not on N."""
    y_true = da.random.randint(0, K, size=2_000_000, chunks=250_000)  # made on the workers
    y_pred = (y_true + (da.random.random(2_000_000, chunks=250_000) < 0.3)) % K
    lazy = mgd.confusion_matrix(y_true, y_pred)
    graph = dict(lazy.__dask_graph__())
    (merge,) = get_dependencies(graph, lazy.key)
    assert merge.startswith("_merge_cells")
    (cells,) = dask.compute(Delayed(merge, graph))
    assert isinstance(cells, mgd.ConfusionCells) and cells.nbytes <= 3 * 8 * K * K
    assert int(lazy.compute().sum()) == 2_000_000
    scores = mgd.classification_metrics(chunked(data["y_true"]), chunked(data["scores"]), K,
                                        confusion_matrix=False)
    graph = dict(scores.__dask_graph__())
    (merge,) = get_dependencies(graph, scores.key)
    (state,) = dask.compute(Delayed(merge, graph))
    state_bytes = sum(v.nbytes for v in state.values() if isinstance(v, np.ndarray))
    assert state_bytes < data["scores"].nbytes // 100


def test_import_metrics_gpu_does_not_import_dask():
    code = (
        "import sys\n"
        "import metrics_gpu\n"
        "assert 'dask' not in sys.modules, 'import metrics_gpu imported dask'\n"
        "sys.modules['dask'] = None\n"
        "try:\n"
        "    import metrics_gpu.dask\n"
        "except ImportError as error:\n"
        "    assert \"pip install '.[dask]'\" in str(error), error\n"
        "else:\n"
        "    raise AssertionError('no ImportError without dask')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("k", [2, 3], ids=["K2", "K3"])
def test_brier_scale_and_top_k_of_every_class(k):
    """The streaming report's brier_score is halved for K = 2 (scikit-learn's
    "auto"), so the Dask brier_score_loss rescales it for every
    scale_by_half; its top-k accuracy with k >= K (left out of the reports) is
    scikit-learn's perfect score."""
    rng = np.random.default_rng(k)
    logits = rng.normal(size=(90, k))
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y_true = np.arange(90) % k
    weight = rng.random(90)
    with dask.config.set(scheduler="synchronous"):
        for half in ("auto", True, False):
            ours = mgd.brier_score_loss(chunked(y_true, 40), chunked(proba, 40),
                                        sample_weight=chunked(weight, 40),
                                        scale_by_half=half, compute=True)
            np.testing.assert_allclose(ours, skm.brier_score_loss(
                y_true, proba, sample_weight=weight, scale_by_half=half), rtol=1e-12,
                err_msg=f"scale_by_half={half}")
        for normalize in (True, False):
            with pytest.warns(UserWarning, match="greater than or equal"):
                ours = mgd.top_k_accuracy_score(chunked(y_true, 40), chunked(logits, 40), k=k,
                                                normalize=normalize, compute=True)
            assert ours == (1.0 if normalize else 90)
