"""Multilabel-indicator input (issue 30): scikit-learn's numbers and warnings.

``(N, L)`` 0/1 matrices of one shape are scikit-learn's "multilabel-indicator"
targets: the set-wise metrics, accuracy (subset accuracy), the zero-one and
Hamming losses, the report and ``multilabel_confusion_matrix`` must give
``sklearn.metrics``' values (counts exactly, floats to 1e-12) and its
UndefinedMetricWarnings; the functions scikit-learn refuses for such input
refuse it with a message that names it, never reading it as label maps.
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

torch = pytest.importorskip("torch")

RTOL = 1e-12
ATOL = 1e-12
# Examples per backend: each runs every multilabel function and scikit-learn's
# twin (~25 ms an example, mostly scikit-learn's checks).
EXAMPLES = {"numpy": 100, "emulated": 40, "cuda": 100}
SETTINGS = settings(deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
AVERAGES = (None, "micro", "macro", "weighted", "samples")
ZERO_DIVISIONS = ("warn", 0.0, 1.0, math.nan)
DTYPES = (np.bool_, np.int64, np.int32, np.uint8, np.float64)


def _settings(backend):
    return settings(SETTINGS, max_examples=EXAMPLES[backend.name])


@st.composite
def multilabel_cases(draw):
    """(y_true, y_pred, sample_weight or None, labels or None), N x L 0/1 matrices
    whose rows and columns often are all 0 or all 1 (the 0/0 cases)."""
    n = draw(st.integers(1, 9))
    n_labels = draw(st.integers(2, 5))
    cells = arrays(np.bool_, (n, n_labels))
    y_true, y_pred = draw(cells), draw(cells)
    for matrix in (y_true, y_pred):
        for row in draw(st.lists(st.integers(0, n - 1), max_size=2)):
            matrix[row] = draw(st.booleans())  # an empty or an all-positive row
        for column in draw(st.lists(st.integers(0, n_labels - 1), max_size=2)):
            matrix[:, column] = False  # a label never true (or never predicted)
    weights, labels = multilabel_weights_and_labels(draw, n, n_labels, 4)
    return y_true, y_pred, weights, labels


def sk_call(function, *args, **kwargs):
    """scikit-learn's result and its UndefinedMetricWarning messages."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = function(*args, **kwargs)
    return result, {str(w.message) for w in caught
                    if issubclass(w.category, SkUndefinedMetricWarning)}


def our_call(expected_warnings, function, *args, **kwargs):
    """Our result; its UndefinedMetricWarning messages must be scikit-learn's."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = function(*args, **kwargs)
    ours = {str(w.message) for w in caught if issubclass(w.category, mg.UndefinedMetricWarning)}
    assert ours == expected_warnings
    return result


def as_host(value):
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        return value.numpy()
    return np.asarray(value.get() if hasattr(value, "get") else value)


def assert_same(ours, expected, *, exact=False):
    if isinstance(expected, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(expected)
        for a, b in zip(ours, expected):
            assert_same(a, b, exact=exact)
        return
    if expected is None:
        assert ours is None
        return
    value, expected = as_host(ours), np.asarray(expected)
    assert value.shape == expected.shape
    if exact:
        assert value.dtype == expected.dtype, (value.dtype, expected.dtype)
        np.testing.assert_array_equal(value, expected)
    else:
        assert value.dtype == np.float64
        np.testing.assert_allclose(value, expected.astype(np.float64), rtol=RTOL, atol=ATOL,
                                   equal_nan=True)


def check_against_sklearn(backend, y_true, y_pred, weights, labels, average, zero_division,
                          dtype=np.bool_):
    t, p = backend.asarray(y_true.astype(dtype)), backend.asarray(y_pred.astype(dtype))
    w = None if weights is None else backend.asarray(weights)
    common = dict(sample_weight=weights)
    ours_common = dict(sample_weight=w)
    set_wise = dict(labels=labels, average=average, zero_division=zero_division)
    for name, extra in (("precision_recall_fscore_support", {"beta": 1.0}),
                        ("precision_score", {}), ("recall_score", {}), ("f1_score", {}),
                        ("fbeta_score", {"beta": 0.5}), ("fbeta_score", {"beta": 2.0})):
        expected, expected_warnings = sk_call(getattr(skm, name), y_true, y_pred,
                                              **common, **set_wise, **extra)
        ours = our_call(expected_warnings, getattr(mg, name), t, p, **ours_common,
                        **set_wise, **extra)
        if name == "precision_recall_fscore_support" and average is None:
            # the support: int64 counts (exact), float64 weights
            assert_same(ours[3], expected[3], exact=weights is None)
            ours, expected = ours[:3], expected[:3]
        assert_same(ours, expected)
    if not (isinstance(zero_division, float) and math.isnan(zero_division)):
        expected, expected_warnings = sk_call(skm.jaccard_score, y_true, y_pred, **common,
                                              **set_wise)
        assert_same(our_call(expected_warnings, mg.jaccard_score, t, p, **ours_common,
                             **set_wise), expected)
    for normalize in (True, False):
        for name in ("accuracy_score", "zero_one_loss"):
            expected = getattr(skm, name)(y_true, y_pred, normalize=normalize, **common)
            assert_same(getattr(mg, name)(t, p, normalize=normalize, **ours_common), expected)
    assert_same(mg.hamming_loss(t, p, **ours_common), skm.hamming_loss(y_true, y_pred, **common))
    for samplewise in (False, True):
        expected = skm.multilabel_confusion_matrix(y_true, y_pred, labels=labels,
                                                   samplewise=samplewise, **common)
        ours = mg.multilabel_confusion_matrix(t, p, labels=labels, samplewise=samplewise,
                                              **ours_common)
        if weights is None:
            assert_same(ours, expected, exact=True)
        else:
            np.testing.assert_allclose(as_host(ours), expected, rtol=RTOL, atol=ATOL)


def test_matches_sklearn(backend):
    @_settings(backend)
    @given(case=multilabel_cases(), average=st.sampled_from(AVERAGES),
           zero_division=st.sampled_from(ZERO_DIVISIONS), dtype=st.sampled_from(DTYPES))
    def run(case, average, zero_division, dtype):
        y_true, y_pred, weights, labels = case
        check_against_sklearn(backend, y_true, y_pred, weights, labels, average, zero_division,
                              dtype)

    run()


EDGE_CASES = {
    # every row empty in y_pred: precision 0/0 everywhere
    "nothing-predicted": (np.array([[1, 0, 1], [0, 1, 0]]), np.zeros((2, 3), int)),
    # nothing true, nothing predicted: P, R and F all 0/0
    "all-empty": (np.zeros((3, 2), int), np.zeros((3, 2), int)),
    "all-positive": (np.ones((3, 4), int), np.ones((3, 4), int)),
    "one-empty-row": (np.array([[0, 0, 0], [1, 1, 0]]), np.array([[0, 0, 0], [1, 0, 1]])),
}


@pytest.mark.parametrize("average", AVERAGES)
@pytest.mark.parametrize("zero_division", ZERO_DIVISIONS, ids=str)
@pytest.mark.parametrize("case", EDGE_CASES, ids=str)
def test_edge_cases_match_sklearn(backend, case, average, zero_division):
    y_true, y_pred = EDGE_CASES[case]
    check_against_sklearn(backend, y_true, y_pred, None, None, average, zero_division, np.int64)


@pytest.mark.parametrize("weights", ["float", "with-zeros"])
def test_wide_rows_match_sklearn(backend, rng, weights):
    """Rows of more labels than a warp has lanes (kernels/multilabel.cu takes
    a warp per row), weighted, rows with weight 0, empty rows, every average
    and zero_division, labels= subsets."""
    n, n_labels = 24, 41
    y_true = rng.random((n, n_labels)) < 0.15
    y_pred = rng.random((n, n_labels)) < 0.2
    y_true[3], y_pred[3] = False, False  # 0/0 everywhere in a row
    y_pred[7] = False
    y_true[11] = False
    weight = rng.random(n) + 0.1
    if weights == "with-zeros":
        weight[::4] = 0.0
    # Each average with "warn" and NaN (its own formula for the sums), 0 and 1
    # for the samples average (the sums' other formula); all labels, then a
    # subset (a gathered copy in the kernel's pass).
    cases = [(average, zero_division) for average in AVERAGES
             for zero_division in ("warn", math.nan)] + [("samples", 0.0), ("samples", 1.0)]
    for i, (average, zero_division) in enumerate(cases):
        check_against_sklearn(backend, y_true, y_pred, weight, [40, 2, 17] if i % 2 else None,
                              average, zero_division, np.uint8)


@pytest.mark.parametrize("zero_division", ZERO_DIVISIONS, ids=str)
def test_rows_of_weight_zero_are_undefined_as_in_sklearn(backend, zero_division):
    """scikit-learn's samplewise counts are a row's counts times its weight: a
    row of weight 0 has no predicted and no true label, so its precision,
    recall, F and Jaccard are 0/0 (warned of), whatever labels it holds. (A
    hypothesis example: the kernel's row sums had taken such a row's rates as
    defined, and warned of recall only.)"""
    cases = [(np.array([[0, 0], [0, 0]]), np.array([[1, 1], [1, 1]])),
             (np.array([[1, 0], [1, 1], [0, 1]]), np.array([[1, 1], [0, 1], [0, 1]]))]
    for (y_true, y_pred), weights in zip(cases, (np.array([1, 0]), np.array([0.5, 0.0, 2.0]))):
        check_against_sklearn(backend, y_true, y_pred, weights, None, "samples", zero_division,
                              np.bool_)


def test_nan_mean_of_rows_weighing_nothing_is_the_plain_mean(backend):
    """zero_division=NaN where every row with labels weighs 0: scikit-learn's
    samplewise counts (counts times weight) leave every row 0/0, and the mean
    is NaN; the kernel's row sums take rows of weight 0 as undefined
    (kernels/multilabel.cu RowSlot)."""
    y_true = np.array([[1, 0, 1], [0, 0, 0], [1, 1, 0]])
    y_pred = np.array([[1, 1, 0], [0, 0, 0], [1, 0, 0]])
    weight = np.array([0.0, 2.0, 0.0])
    for name in ("precision_score", "recall_score", "f1_score"):  # jaccard: no NaN in sklearn
        expected = getattr(skm, name)(y_true, y_pred, average="samples", sample_weight=weight,
                                      zero_division=math.nan)
        ours = getattr(mg, name)(backend.asarray(y_true), backend.asarray(y_pred),
                                 average="samples", sample_weight=backend.asarray(weight),
                                 zero_division=math.nan)
        assert_same(ours, expected)


@pytest.mark.parametrize("function", ["f1_score", "hamming_loss", "multilabel_confusion_matrix"])
def test_unvalidated_bad_weights_are_an_error_not_a_dropped_row(backend, function):
    """A kernel leaves out a row it refuses: unchecked weights it refuses are
    an error there, not a row silently missing (NumPy computes with them, as
    scikit-learn)."""
    if backend.name == "numpy":
        pytest.skip("the NumPy backend computes with unchecked weights, as scikit-learn")
    y = backend.asarray(np.array([[1, 0], [0, 1], [1, 1]]))
    weight = backend.asarray(np.array([1.0, -1.0, np.nan]))
    kwargs = {"average": "samples"} if function == "f1_score" else {}
    with pytest.raises(ValueError, match="sample_weight"):
        getattr(mg, function)(y, y, sample_weight=weight, validate=False, **kwargs)


@pytest.mark.parametrize("weighted", [False, True],
                         ids=["emulated-unweighted", "emulated-weighted"])
def test_kernel_backends_count_in_one_launch_and_read_back_once(weighted):
    """The threshold metrics of (N, L) input on a kernel backend: one launch
    of kernels/multilabel.cu over the caller's arrays, the O(L) sums sent
    and read back once; validate=False reads nothing else."""
    from metrics_gpu.testing import operation_counter

    rng = np.random.default_rng(5)
    y_true = rng.integers(0, 2, (300, 6)).astype(np.int8)
    y_pred = rng.integers(0, 2, (300, 6)).astype(np.int8)
    weight = rng.random(300) if weighted else None
    with mg.use_backend("emulated"):
        for name, kwargs in (("accuracy_score", {}), ("hamming_loss", {}),
                             ("f1_score", {"average": "samples"}),
                             ("precision_recall_fscore_support", {"average": "macro"}),
                             ("multilabel_confusion_matrix", {})):
            with operation_counter() as operations:
                ours = getattr(mg, name)(y_true, y_pred, sample_weight=weight, validate=False,
                                         **kwargs)
            assert operations.launches == 1, name
            assert operations.host_transfers == 1, name  # the sums read back
            expected = getattr(skm, name)(y_true, y_pred, sample_weight=weight, **kwargs)
            if name == "multilabel_confusion_matrix" and not weighted:
                np.testing.assert_array_equal(ours, expected)
            else:
                assert_same(ours, expected)


def test_previously_silent_case_gives_sklearns_numbers():
    """Issue 30: these were read as label maps (0.667 and 0.625)."""
    y_true, y_pred = np.array([[0, 1, 1], [1, 0, 1]]), np.array([[0, 1, 0], [1, 1, 1]])
    assert mg.accuracy_score(y_true, y_pred) == skm.accuracy_score(y_true, y_pred) == 0.0
    assert type(mg.accuracy_score(y_true, y_pred)) is np.float64
    for average in ("micro", "macro", "weighted", "samples"):
        assert mg.f1_score(y_true, y_pred, average=average) == pytest.approx(
            skm.f1_score(y_true, y_pred, average=average), rel=RTOL)
    assert mg.f1_score(y_true, y_pred, average="macro") != pytest.approx(0.625)


@pytest.mark.parametrize("dtype", [torch.bool, torch.int64, torch.float32], ids=str)
def test_torch_inputs_give_tensors(dtype):
    rng = np.random.default_rng(3)
    y_true, y_pred = rng.integers(0, 2, (7, 4)), rng.integers(0, 2, (7, 4))
    t, p = torch.tensor(y_true).to(dtype), torch.tensor(y_pred).to(dtype)
    for name, kwargs in (("accuracy_score", {}), ("hamming_loss", {}),
                         ("f1_score", {"average": "samples"}),
                         ("jaccard_score", {"average": None, "zero_division": 0}),
                         ("multilabel_confusion_matrix", {})):
        ours = getattr(mg, name)(t, p, **kwargs)
        assert isinstance(ours, torch.Tensor), name
        expected = getattr(skm, name)(y_true, y_pred, **kwargs)
        if name == "multilabel_confusion_matrix":
            np.testing.assert_array_equal(ours.numpy(), expected)
        else:
            np.testing.assert_allclose(ours.numpy(), expected, rtol=RTOL)


@pytest.mark.parametrize("weights", [None, np.array([1.0, 0.5, 2.0, 1.5])], ids=["none", "float"])
@pytest.mark.parametrize("labels", [None, [2, 0]], ids=["all", "subset"])
def test_classification_report_matches_sklearn(weights, labels):
    y_true = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 0]])
    y_pred = np.array([[1, 0, 0], [0, 1, 1], [1, 0, 0], [0, 0, 0]])
    kwargs = dict(sample_weight=weights, labels=labels, zero_division=0)
    for output_dict in (False, True):
        expected = skm.classification_report(y_true, y_pred, output_dict=output_dict, **kwargs)
        ours = mg.classification_report(y_true, y_pred, output_dict=output_dict, **kwargs)
        if output_dict:
            assert ours.keys() == expected.keys()
            for key, row in expected.items():
                assert ours[key] == pytest.approx(row, rel=RTOL)
        else:
            assert ours == expected
    names = ["a", "b", "c"][:3 if labels is None else 2]
    assert (mg.classification_report(y_true, y_pred, target_names=names, **kwargs)
            == skm.classification_report(y_true, y_pred, target_names=names, **kwargs))


def test_classification_report_warnings_match_sklearn():
    y_true, y_pred = np.array([[1, 0], [1, 0]]), np.array([[0, 0], [1, 0]])
    expected, expected_warnings = sk_call(skm.classification_report, y_true, y_pred)
    assert expected_warnings
    assert our_call(expected_warnings, mg.classification_report, y_true, y_pred) == expected


def test_specificity_is_the_recall_of_the_negatives():
    """Beyond scikit-learn: specificity per label (and per sample) is the
    recall of the complements."""
    y_true = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 1]])
    y_pred = np.array([[1, 0, 0], [0, 1, 1], [1, 0, 0], [0, 1, 1]])
    for average in (None, "micro", "macro", "samples"):
        np.testing.assert_allclose(
            mg.specificity_score(y_true, y_pred, average=average, zero_division=0),
            skm.recall_score(1 - y_true, 1 - y_pred, average=average, zero_division=0),
            rtol=RTOL)


# -- what stays as it was --------------------------------------------------------


def test_label_maps_with_more_classes_stay_label_maps():
    y_true, y_pred = np.array([[0, 2, 1], [1, 0, 2]]), np.array([[0, 2, 2], [1, 1, 2]])
    assert mg.accuracy_score(y_true, y_pred) == pytest.approx(4 / 6)
    np.testing.assert_array_equal(mg.confusion_matrix(y_true, y_pred),
                                  skm.confusion_matrix(y_true.ravel(), y_pred.ravel()))


def test_one_hot_predictions_beside_class_codes_stay_scores():
    y_true, y_pred = np.array([0, 1, 1]), np.array([[1, 0], [0, 1], [1, 0]])
    assert mg.accuracy_score(y_true, y_pred) == pytest.approx(2 / 3)


def test_binary_label_maps_are_read_as_such_once_flattened():
    y_true, y_pred = np.array([[0, 1, 1], [1, 0, 1]]), np.array([[0, 1, 0], [1, 1, 1]])
    assert mg.accuracy_score(y_true.reshape(-1), y_pred.reshape(-1)) == pytest.approx(4 / 6)


def test_channel_first_binary_targets_stay_channel_first():
    y_true = np.array([[0, 1, 1], [1, 0, 0]])  # (N, d1), 0/1
    scores = np.zeros((2, 2, 3))
    scores[:, 1] = y_true  # class 1 scores higher where the target is 1
    assert mg.accuracy_score(y_true, scores) == 1.0


# -- refusals and errors ---------------------------------------------------------

Y_TRUE, Y_PRED = np.array([[0, 1, 1], [1, 0, 1]]), np.array([[0, 1, 0], [1, 1, 1]])

REFUSALS = {
    "confusion_matrix": (mg.confusion_matrix, {}, "multilabel_confusion_matrix"),
    "confusion_matrix-unvalidated": (mg.confusion_matrix,
                                     {"validate": False, "num_classes": 3},
                                     "multilabel_confusion_matrix"),
    "balanced_accuracy_score": (mg.balanced_accuracy_score, {}, "recall_score"),
    "balanced_accuracy_weighted": (mg.balanced_accuracy_weighted, {}, r"y_true\[:, j\]"),
    "matthews_corrcoef": (mg.matthews_corrcoef, {}, r"y_true\[:, j\]"),
    "matthews_corrcoef-unvalidated": (mg.matthews_corrcoef,
                                      {"validate": False, "num_classes": 3}, r"y_true\[:, j\]"),
    "cohen_kappa_score": (mg.cohen_kappa_score, {}, r"y1\[:, j\]"),
    "label_report": (mg.label_report, {}, "multilabel_confusion_matrix"),
    "label_report-unvalidated": (mg.label_report, {"validate": False, "num_classes": 3},
                                 "multilabel_confusion_matrix"),
    # every other label function: the gate of metrics_gpu._validation.check_label_inputs
    "multiclass_quality_metrics": (mg.multiclass_quality_metrics, {},
                                   "multilabel_confusion_matrix"),
}


@pytest.mark.parametrize("name", REFUSALS)
def test_refusals_name_multilabel_input(name):
    function, kwargs, instead = REFUSALS[name]
    with pytest.raises(ValueError, match="multilabel-indicator") as error:
        function(Y_TRUE, Y_PRED, **kwargs)
    assert "(2, 3)" in str(error.value)
    assert error.match(instead)
    assert error.match("reshape")


@pytest.mark.parametrize("y_pred", [np.array([0, 1]), np.array([[0, 1], [1, 1]]),
                                    np.array([[0.2, 0.9, 0.4], [0.7, 0.1, 0.6]])],
                         ids=["labels", "other-shape", "scores"])
def test_mixed_targets_name_both_shapes(y_pred):
    with pytest.raises(ValueError, match="multilabel-indicator") as error:
        mg.f1_score(Y_TRUE, y_pred, average="macro")
    assert "(2, 3)" in str(error.value) and str(y_pred.shape) in str(error.value)


def test_binary_average_is_refused_as_sklearn_does():
    message = "Target is multilabel-indicator but average='binary'"
    with pytest.raises(ValueError, match=message):
        skm.f1_score(Y_TRUE, Y_PRED)
    with pytest.raises(ValueError, match=message):
        mg.f1_score(Y_TRUE, Y_PRED)
    with pytest.raises(ValueError, match=message):
        mg.jaccard_score(Y_TRUE, Y_PRED)


def test_samples_average_needs_multilabel_input():
    message = "Samplewise metrics are not available outside of multilabel"
    for function in (mg.f1_score, mg.jaccard_score):
        with pytest.raises(ValueError, match=message):
            function(np.array([0, 1, 2]), np.array([0, 2, 2]), average="samples")
    with pytest.raises(ValueError, match=message):
        mg.multilabel_confusion_matrix(np.array([0, 1]), np.array([0, 0]), samplewise=True)


def test_labels_beyond_the_columns_are_refused():
    with pytest.raises(ValueError, match=r"All labels must be in \[0, n labels\).*Got 3 > 2"):
        mg.f1_score(Y_TRUE, Y_PRED, labels=[0, 3], average="macro")


def test_num_classes_must_be_the_number_of_labels():
    assert mg.hamming_loss(Y_TRUE, Y_PRED, num_classes=3) == pytest.approx(2 / 6)
    with pytest.raises(ValueError, match="3 labels.*num_classes=4"):
        mg.hamming_loss(Y_TRUE, Y_PRED, num_classes=4)


@pytest.mark.parametrize("ignore_index", [0, 1])
def test_a_target_value_is_no_ignore_index(ignore_index):
    """ignore_index leaves out cells (issue 47: tests/test_multilabel_ignore.py);
    0 and 1 are the values it would leave out of every label."""
    with pytest.raises(ValueError, match=rf"ignore_index={ignore_index} is a target value of "
                                         "multilabel-indicator input"):
        mg.accuracy_score(Y_TRUE, Y_PRED, ignore_index=ignore_index)


def test_multiclass_multilabel_confusion_matrix_matches_sklearn():
    y_true, y_pred = np.array([0, 1, 2, 2, 1]), np.array([0, 2, 2, 1, 1])
    weights = np.array([1, 2, 1, 3, 1])
    for labels in (None, [2, 0], [0, 1, 2, 3]):
        np.testing.assert_array_equal(
            mg.multilabel_confusion_matrix(y_true, y_pred, labels=labels),
            skm.multilabel_confusion_matrix(y_true, y_pred, labels=labels))
        ours = mg.multilabel_confusion_matrix(y_true, y_pred, labels=labels,
                                              sample_weight=weights)
        expected = skm.multilabel_confusion_matrix(y_true, y_pred, labels=labels,
                                                   sample_weight=weights)
        assert ours.dtype == expected.dtype
        np.testing.assert_array_equal(ours, expected)


def test_detection_reads_a_chunk_at_a_time(monkeypatch):
    """The 0/1 check is chunked (bounded memory for memory-mapped label maps):
    a class code beyond 1 in the last chunk still makes a label map."""
    import metrics_gpu._validation.common as validation_common

    monkeypatch.setattr(validation_common, "CHECK_CHUNK_ELEMENTS", 6)  # two rows of 3 a chunk
    y_true = np.array([[0, 1, 1], [1, 0, 1], [0, 0, 1], [1, 1, 1], [0, 1, 0]])
    y_pred = np.array([[0, 1, 0], [1, 1, 1], [0, 0, 1], [1, 1, 1], [0, 1, 0]])
    assert mg.accuracy_score(y_true, y_pred) == skm.accuracy_score(y_true, y_pred) == 0.6
    label_map = y_pred.copy()
    label_map[-1, -1] = 2
    assert mg.accuracy_score(y_true, label_map) == pytest.approx(
        np.mean(y_true.ravel() == label_map.ravel()))


@pytest.mark.parametrize("function", [mg.accuracy_score, mg.confusion_matrix, mg.label_report],
                         ids=lambda f: f.__name__)
def test_unvalidated_label_maps_of_another_k_are_not_read(function, monkeypatch):
    """validate=False with K known reads nothing back: 2-D int pairs whose
    num_classes is not their number of columns stay label maps, unread."""
    import metrics_gpu._validation.multilabel as validation_multilabel

    def no_read(array, *args):
        raise AssertionError("the values were read")

    monkeypatch.setattr(validation_multilabel, "_is_indicator", no_read)
    function(Y_TRUE, Y_PRED, num_classes=2, validate=False)
    with pytest.raises(AssertionError, match="were read"):
        function(Y_TRUE, Y_PRED, num_classes=2)  # validated: the 0/1 check runs


def test_short_rows_counted_by_blocks_of_rows_give_the_same_counts(monkeypatch, rng):
    """The float32 counts of short rows, in blocks of rows (2**24 - 1 each:
    here 6), against scikit-learn's."""
    from metrics_gpu._multilabel import counts as _multilabel
    monkeypatch.setattr(_multilabel, "_EXACT_FLOAT32_COUNT", 7)
    y_true = rng.integers(0, 2, (40, 5))
    y_pred = rng.integers(0, 2, (40, 5))
    np.testing.assert_array_equal(mg.multilabel_confusion_matrix(y_true, y_pred),
                                  skm.multilabel_confusion_matrix(y_true, y_pred))
    assert mg.hamming_loss(y_true, y_pred) == skm.hamming_loss(y_true, y_pred)
    assert mg.f1_score(y_true, y_pred, average="samples", zero_division=0) == pytest.approx(
        skm.f1_score(y_true, y_pred, average="samples", zero_division=0), rel=1e-12)


SCORE_FUNCTIONS = (("accuracy_score", {}), ("zero_one_loss", {}), ("hamming_loss", {}),
                   ("precision_recall_fscore_support", {"average": "samples"}),
                   ("precision_score", {"average": "macro"}),
                   ("recall_score", {"average": "micro"}),
                   ("f1_score", {"average": "weighted"}),
                   ("fbeta_score", {"beta": 2.0, "average": "samples"}),
                   ("jaccard_score", {"average": "samples"}),
                   ("multilabel_confusion_matrix", {}),
                   ("classification_report", {"output_dict": True}))


@pytest.mark.parametrize("kind", ["probabilities", "logits"])
def test_declared_scores_are_cut_at_the_threshold(backend, kind, rng):
    """(N, L) scores with scores= and threshold=: scikit-learn's numbers on
    the predictions ``probability > threshold`` (a logit: its sigmoid)."""
    y_true = rng.random((64, 7)) < 0.3
    probability = np.round(rng.uniform(0.01, 0.99, (64, 7)), 2)  # ties with the threshold
    given = probability if kind == "probabilities" else np.log(probability / (1 - probability))
    weight = rng.random(64)
    for threshold in (0.5, 0.3):
        predicted = probability > threshold
        for name, kwargs in SCORE_FUNCTIONS:
            expected = getattr(skm, name)(y_true, predicted, sample_weight=weight,
                                          zero_division=0, **kwargs) \
                if "average" in kwargs or name == "classification_report" else \
                getattr(skm, name)(y_true, predicted, sample_weight=weight, **kwargs)
            extra = {"zero_division": 0} if "average" in kwargs or \
                name == "classification_report" else {}
            ours = getattr(mg, name)(backend.asarray(y_true), backend.asarray(given),
                                     sample_weight=backend.asarray(weight), scores=kind,
                                     threshold=threshold, **extra, **kwargs)
            if name == "classification_report":
                assert ours.keys() == expected.keys()
                for key in expected:
                    np.testing.assert_allclose(list(ours[key].values()),
                                               list(expected[key].values()), rtol=RTOL)
            else:
                assert_same(ours, expected)


def test_declared_scores_are_checked_and_named():
    y_true = np.array([[1, 0], [0, 1]])
    with pytest.raises(ValueError, match=r"probabilities in \[0, 1\]; found 1.5 at row 1"):
        mg.f1_score(y_true, np.array([[0.2, 0.3], [0.1, 1.5]]), average="macro",
                    scores="probabilities")
    with pytest.raises(ValueError, match="y_pred.*finite"):
        mg.hamming_loss(y_true, np.array([[0.2, np.nan], [0.1, 0.5]]), scores="logits")
    with pytest.raises(ValueError, match="y_true must be an .N, L. indicator"):
        mg.f1_score(np.array([0, 1]), np.array([0.2, 0.7]), scores="probabilities")
    with pytest.raises(ValueError, match="of y_true's shape"):
        mg.f1_score(y_true, np.array([[0.2, 0.3, 0.1]] * 2), average="macro",
                    scores="probabilities")
    with pytest.raises(ValueError, match="scores must be one of"):
        mg.accuracy_score(y_true, y_true, scores="probability")
    with pytest.raises(ValueError, match="threshold must be a finite number"):
        mg.accuracy_score(y_true, y_true, scores="probabilities", threshold=math.nan)
    # Undeclared scores stay refused, with the way to declare them.
    with pytest.raises(ValueError, match="scores='probabilities' or 'logits'"):
        mg.f1_score(y_true, np.array([[0.2, 0.3], [0.1, 0.7]]), average="macro")


def test_unchecked_bad_scores_are_an_error_on_a_kernel_backend():
    y_true = np.array([[1, 0], [0, 1], [1, 1]])
    scores = np.array([[0.2, 0.3], [0.1, 1.5], [0.7, 0.9]])
    with mg.use_backend("emulated"), pytest.raises(ValueError, match="y_pred: 1 row"):
        mg.f1_score(y_true, scores, average="macro", scores="probabilities", validate=False)


def test_declared_scores_equal_the_stream(rng):
    y_true = rng.random((90, 5)) < 0.4
    logits = rng.normal(size=(90, 5))
    metrics = mg.MultilabelMetrics(5, threshold=0.6, scores="logits")
    metrics.update(y_true, logits)
    report = metrics.compute()
    for average in ("micro", "macro", "samples"):
        assert float(report[f"f1_{average}"]) == pytest.approx(float(mg.f1_score(
            y_true, logits, average=average, scores="logits", threshold=0.6, zero_division=0)),
            rel=RTOL)
