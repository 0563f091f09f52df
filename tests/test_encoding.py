"""``encode_labels``: arbitrary labels to shared, sorted class codes; metrics
on the codes equal scikit-learn's metrics on the raw labels."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metrics_gpu as mg

sklearn_metrics = pytest.importorskip("sklearn.metrics")
sklearn_preprocessing = pytest.importorskip("sklearn.preprocessing")


def _as_list(array):
    return [x.item() if hasattr(x, "item") else x for x in np.asarray(array, dtype=object)]


ENCODE_CASES = {
    "strings": (["cat", "dog", "cat", "emu"], ["dog", "dog", "ant", "cat"]),
    "sparse-ints": ([10, 1000, 7], [7, 7, 10]),
    "negative-and-huge-ints": ([-5, 2**40, 3], [3, 3, -5, 0]),
    "floats": ([0.5, 2.25, -1.0], [2.25, 0.5, 7.0, 0.5]),
    "mixed-lengths": (["a"], ["b", "c", "a", "d", "d"], ["e", "a"]),
    "unicode-and-lengths": (["ä", "zz", "b"], ["éé", "b", "aaaa"]),
    "bytes": (np.array([b"x", b"yy"]), np.array([b"yy", b"a"])),
    "uint8-with-int64": (np.array([3, 200], dtype=np.uint8), np.array([-1, 3], dtype=np.int64)),
    "object-strings": (np.array(["q", "p"], dtype=object), np.array(["r", "p"], dtype=object)),
    "single-array": (["z", "y", "z", "x"],),
    "column-vectors": (np.array([[3], [1]]), np.array([[1], [2]])),
}


@pytest.mark.parametrize("case", sorted(ENCODE_CASES))
def test_encode_shared_sorted_classes_and_round_trip(case):
    arrays = ENCODE_CASES[case]
    classes, *codes = mg.encode_labels(*arrays)
    assert len(codes) == len(arrays)
    flat = [np.asarray(a).reshape(-1) for a in arrays]
    expected_classes = sorted(set(x for a in flat for x in _as_list(a)))
    assert _as_list(classes) == expected_classes
    for original, code in zip(flat, codes):
        assert code.dtype == np.int64
        assert code.shape == original.shape
        assert code.min() >= 0 and code.max() < len(classes)
        assert _as_list(classes[code]) == _as_list(original)


@pytest.mark.parametrize("case", ["strings", "sparse-ints", "floats", "mixed-lengths"])
def test_encode_matches_label_encoder(case):
    arrays = ENCODE_CASES[case]
    encoder = sklearn_preprocessing.LabelEncoder().fit(np.concatenate(
        [np.asarray(a) for a in arrays]))
    classes, *codes = mg.encode_labels(*arrays)
    np.testing.assert_array_equal(classes, encoder.classes_)
    for original, code in zip(arrays, codes):
        np.testing.assert_array_equal(code, encoder.transform(np.asarray(original)))


def test_encode_sparse_ids_example():
    classes, a, b = mg.encode_labels([10, 1000, 7], [7, 7])
    assert classes.tolist() == [7, 10, 1000]
    assert a.tolist() == [1, 2, 0]
    assert b.tolist() == [0, 0]


def test_encode_docstring_example():
    classes, y_true, y_pred = mg.encode_labels(["cat", "dog", "cat"], ["dog", "dog", "bird"])
    assert classes.tolist() == ["bird", "cat", "dog"]
    assert y_true.tolist() == [1, 2, 1]
    assert y_pred.tolist() == [2, 2, 0]


def test_encode_class_only_in_second_array():
    classes, a, b = mg.encode_labels(["b", "b"], ["a", "c"])
    assert classes.tolist() == ["a", "b", "c"]
    assert a.tolist() == [1, 1] and b.tolist() == [0, 2]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.text(alphabet="abcxyz", min_size=0, max_size=3), min_size=1,
                      max_size=30), min_size=1, max_size=4)
)
def test_encode_round_trip_property(arrays):
    classes, *codes = mg.encode_labels(*arrays)
    assert list(classes) == sorted(set(x for a in arrays for x in a))
    for original, code in zip(arrays, codes):
        assert list(classes[code]) == original


# -- errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arrays, pattern",
    [
        (([1.0, np.nan, 2.0],), r"argument 0.*NaN.*index 1"),
        (([1.0, 2.0], [3.0, 4.0, np.nan]), r"argument 1.*NaN.*index 2"),
        ((np.array([np.nan], dtype=np.float32),), r"NaN.*index 0"),
    ],
    ids=["nan-in-first", "nan-in-second", "float32-nan"],
)
def test_encode_nan_rejected(arrays, pattern):
    with pytest.raises(ValueError, match=pattern):
        mg.encode_labels(*arrays)


@pytest.mark.parametrize(
    "arrays",
    [
        (np.array(["a", None], dtype=object),),
        (np.array([1, "a"], dtype=object),),
        (np.array([1, 2]), np.array(["a"], dtype=object)),
        (np.array([(1, 2), "a"], dtype=object),),
    ],
    ids=["str-None", "object-int-str", "int-array-with-object-str", "tuple-str"],
)
def test_encode_unsortable_mix_rejected(arrays):
    with pytest.raises(ValueError, match=r"sort|mix"):
        mg.encode_labels(*arrays)


@pytest.mark.parametrize(
    "arrays",
    [([1, 2], ["a"]), ([1, "a"],), ([1.5], ["x"])],
    ids=["int-list-with-str-list", "int-and-str-in-one-list", "float-list-with-str-list"],
)
def test_encode_number_string_mix_not_silently_stringified(arrays):
    """Numbers and strings do not sort together: either a ValueError, or codes
    that give back the original values (never 1 silently turned into '1').
    (scikit-learn refuses such a mix: 'Mix of label input types'.)"""
    try:
        classes, *codes = mg.encode_labels(*arrays)
    except ValueError:
        return
    for original, code in zip(arrays, codes):
        assert _as_list(classes[code]) == list(original), (
            f"encode_labels{arrays!r} gave classes {classes!r}: the round trip changed "
            "the labels"
        )


def test_encode_needs_an_array():
    with pytest.raises(ValueError, match=r"at least one"):
        mg.encode_labels()


def test_encode_rejects_2d():
    with pytest.raises(ValueError, match=r"argument 0.*1-D.*\(2, 2\)"):
        mg.encode_labels([[1, 2], [3, 4]])


# -- metrics on encoded labels == scikit-learn on raw labels ------------------------------

RAW_CASES = {
    "animals": (["cat", "dog", "cat", "emu", "dog", "cat", "emu", "ant"],
                ["dog", "dog", "cat", "emu", "cat", "cat", "ant", "ant"]),
    "pred-has-extra-class": (["b", "a", "b", "a", "c"], ["b", "a", "z", "a", "c"]),
    "sparse-ids": ([1000, 7, 10, 10, 7, 1000, 42], [1000, 10, 10, 7, 7, 42, 42]),
}


def _random_strings(seed, n=400):
    rng = np.random.default_rng(seed)
    vocabulary = np.array(["apple", "kiwi", "fig", "plum", "pear", "lime", "date"])
    truth = vocabulary[rng.integers(0, vocabulary.size, n)]
    pred = np.where(rng.random(n) < 0.6, truth, vocabulary[rng.integers(0, 6, n)])
    return truth.tolist(), pred.tolist()


RAW_CASES["random-strings"] = _random_strings(0)


@pytest.mark.filterwarnings("ignore:y_pred contains classes not in y_true:UserWarning")
@pytest.mark.parametrize("case", sorted(RAW_CASES))
def test_metrics_on_encoded_equal_sklearn_on_raw(backend, case):
    raw_true, raw_pred = RAW_CASES[case]
    classes, t_codes, p_codes = mg.encode_labels(raw_true, raw_pred)
    t, p = backend.asarray(t_codes), backend.asarray(p_codes)

    def ours(value):
        return backend.to_numpy(value)

    def same(value, expected):
        np.testing.assert_allclose(np.asarray(ours(value), dtype=np.float64),
                                   np.asarray(expected, dtype=np.float64), rtol=1e-12,
                                   atol=1e-15)

    same(mg.accuracy_score(t, p), sklearn_metrics.accuracy_score(raw_true, raw_pred))
    same(mg.balanced_accuracy_score(t, p),
         sklearn_metrics.balanced_accuracy_score(raw_true, raw_pred))
    same(mg.matthews_corrcoef(t, p), sklearn_metrics.matthews_corrcoef(raw_true, raw_pred))
    same(mg.cohen_kappa_score(t, p), sklearn_metrics.cohen_kappa_score(raw_true, raw_pred))
    for average in ("macro", "weighted", "micro", None):
        same(mg.f1_score(t, p, average=average, zero_division=0),
             sklearn_metrics.f1_score(raw_true, raw_pred, average=average, zero_division=0))
        same(mg.precision_score(t, p, average=average, zero_division=0),
             sklearn_metrics.precision_score(raw_true, raw_pred, average=average,
                                             zero_division=0))
        same(mg.recall_score(t, p, average=average, zero_division=0),
             sklearn_metrics.recall_score(raw_true, raw_pred, average=average, zero_division=0))
        same(mg.jaccard_score(t, p, average=average, zero_division=0),
             sklearn_metrics.jaccard_score(raw_true, raw_pred, average=average,
                                           zero_division=0))
    np.testing.assert_array_equal(ours(mg.confusion_matrix(t, p)),
                                  sklearn_metrics.confusion_matrix(raw_true, raw_pred))
    same(mg.hamming_loss(t, p), sklearn_metrics.hamming_loss(raw_true, raw_pred))


@pytest.mark.parametrize("case", sorted(RAW_CASES))
def test_classification_report_on_encoded_with_names(backend, case):
    raw_true, raw_pred = RAW_CASES[case]
    classes, t_codes, p_codes = mg.encode_labels(raw_true, raw_pred)
    names = [str(c) for c in classes.tolist()]
    ours = mg.classification_report(backend.asarray(t_codes), backend.asarray(p_codes),
                                    target_names=names, output_dict=True, zero_division=0)
    theirs = sklearn_metrics.classification_report(raw_true, raw_pred, output_dict=True,
                                                   zero_division=0)
    assert set(ours) == set(theirs)
    for key, value in theirs.items():
        if isinstance(value, dict):
            for column, number in value.items():
                assert ours[key][column] == pytest.approx(number, rel=1e-12), (key, column)
        else:
            assert ours[key] == pytest.approx(value, rel=1e-12), key


def test_label_report_class_names_from_encoding(backend):
    raw_true, raw_pred = RAW_CASES["animals"]
    classes, t_codes, p_codes = mg.encode_labels(raw_true, raw_pred)
    report = mg.label_report(backend.asarray(t_codes), backend.asarray(p_codes),
                             class_names=classes.tolist())
    assert report.class_names == ["ant", "cat", "dog", "emu"]
    f1 = sklearn_metrics.f1_score(raw_true, raw_pred, average=None, labels=classes.tolist())
    np.testing.assert_allclose(report.per_class["f1"], f1, rtol=1e-12)
    as_dict = report.to_dict()
    assert set(as_dict["per_class"]) == {"ant", "cat", "dog", "emu"}
