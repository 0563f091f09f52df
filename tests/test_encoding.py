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
    "uint64-past-2**63-with-int64": (np.array([2**63 + 1, 2**63 + 2], dtype=np.uint64),
                                     np.array([7, 7])),
    "uint64-with-negative-int64": (np.array([2**64 - 1, 5], dtype=np.uint64),
                                   np.array([-1, 5], dtype=np.int64)),
    "uint64-small-with-int64": (np.array([3, 9], dtype=np.uint64), np.array([-2, 3])),
    "int-list-past-2**63-with-negative": ([2**63 + 1, 1], [-1, 2**63 + 2]),
    "int64-past-2**53-with-float": (np.array([2**53 + 1, 2**53]), np.array([2.0**53, 0.5])),
    "object-ints-with-int64": (np.array([10, 20], dtype=object), np.array([20, 10])),
    "object-ints-past-2**64": (np.array([2**70, -2**70], dtype=object), np.array([0, 1])),
    "bools": (np.array([True, False, True]), [False, False]),
    "bools-with-ints": (np.array([True, False]), np.array([2, 1])),
}


@pytest.mark.parametrize("case", sorted(ENCODE_CASES))
def test_encode_shared_sorted_classes_and_round_trip(case):
    arrays = ENCODE_CASES[case]
    classes, *codes = mg.encode_labels(*arrays)
    assert len(codes) == len(arrays)
    # Lists as Python values: np.asarray would round [2**63 + 1, -1] to floats.
    flat = [np.asarray(a, dtype=None if hasattr(a, "dtype") else object).reshape(-1)
            for a in arrays]
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
        (np.array([1, "a"], dtype=object),),
        (np.array([1, 2]), np.array(["a"], dtype=object)),
        (np.array(["a"], dtype=object), np.array([1, 2], dtype=object)),
        (np.array([(1, 2), "a"], dtype=object),),
    ],
    ids=["object-int-str", "int-array-with-object-str", "object-str-with-object-int",
         "tuple-str"],
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


# -- exact labels: 64-bit ids of several types, object arrays of numbers, missing labels --


def test_encode_issue_64_bit_ids_stay_distinct():
    """NumPy promotes uint64 next to int64 to float64, which merged the two ids."""
    classes, ids, other = mg.encode_labels(np.array([2**63 + 1, 2**63 + 2], np.uint64),
                                           np.array([7, 7]))
    assert [int(c) for c in classes] == [7, 2**63 + 1, 2**63 + 2]
    assert ids.tolist() == [1, 2] and other.tolist() == [0, 0]


def test_encode_issue_object_numbers_next_to_numbers():
    """An object column of numbers (pandas' object dtype) is numbers, not strings."""
    classes, a, b = mg.encode_labels(np.array([10, 20], dtype=object), np.array([20, 10]))
    assert classes.tolist() == [10, 20]
    assert a.tolist() == [0, 1] and b.tolist() == [1, 0]


@pytest.mark.parametrize(
    "arrays, pattern",
    [
        ((np.array([1.0, np.nan, np.nan], dtype=object),), r"argument 0 has NaN at index 1;"),
        ((np.array([1, None], dtype=object),), r"argument 0 has None at index 1;"),
        ((np.array(["a", None], dtype=object),), r"argument 0 has None at index 1;"),
        ((["a", "b"], [None, "a"]), r"argument 1 has None at index 0;"),
        (([3, 4], [4, float("nan"), 3]), r"argument 1 has NaN at index 1;"),
        ((np.array([2, np.float32("nan")], dtype=object),), r"argument 0 has NaN at index 1;"),
        ((np.array([[1.0], [np.nan]], dtype=object),), r"argument 0 has NaN at index 1;"),
    ],
    ids=["object-nan", "object-int-None", "object-str-None", "list-None",
         "list-nan", "object-float32-nan", "object-column-nan"],
)
def test_encode_missing_labels_rejected(arrays, pattern):
    """NaN and None are no class (scikit-learn's LabelEncoder makes one of them,
    np.unique of an object array one class per NaN): a ValueError naming the
    array and the position, as for float arrays."""
    with pytest.raises(ValueError, match=pattern):
        mg.encode_labels(*arrays)


def test_encode_pandas_missing_label_rejected():
    pd = pytest.importorskip("pandas")
    with pytest.raises(ValueError, match=r"argument 0 has <NA> at index 1;"):
        mg.encode_labels(np.array(["x", pd.NA], dtype=object))
    with pytest.raises(ValueError, match=r"argument 0 has NaN at index 2;"):
        mg.encode_labels(pd.Series([1, 2, None], dtype="Int64"))


# Labels at the edges where NumPy's promotion rounds: the ends of int64 and
# uint64, 2**53 (the last integer every float64 holds) and its neighbour,
# negatives, and integers past uint64 (Python ints only).
EDGE_LABELS = (0, 1, -1, 7, 2**53, 2**53 + 1, 2**63 - 1, 2**63, 2**63 + 1, 2**63 + 2,
               2**64 - 1, -2**63, -2**63 + 1, 2**70, -2**70, 0.5, 2.0**53, float("inf"))


def _fits_integer(dtype):
    info = np.iinfo(dtype)
    return lambda v: (isinstance(v, int) and not isinstance(v, bool)
                      and info.min <= v <= info.max)


def _fits_float(dtype):
    return lambda v: not isinstance(v, bool) and float(dtype(v)) == v


# How a user hands labels over: name -> (which labels it can hold, the array from a list).
NUMBER_FORMS = {
    "int64": (_fits_integer(np.int64), lambda v: np.array(v, dtype=np.int64)),
    "uint64": (_fits_integer(np.uint64), lambda v: np.array(v, dtype=np.uint64)),
    "int8": (_fits_integer(np.int8), lambda v: np.array(v, dtype=np.int8)),
    "uint32": (_fits_integer(np.uint32), lambda v: np.array(v, dtype=np.uint32)),
    "float64": (_fits_float(np.float64), lambda v: np.array(v, dtype=np.float64)),
    "float32": (_fits_float(np.float32), lambda v: np.array(v, dtype=np.float32)),
    "bool": (lambda v: v in (0, 1), lambda v: np.array(v, dtype=bool)),
    "object": (lambda v: True, lambda v: np.array(v, dtype=object)),
    "list": (lambda v: True, list),
}
STRING_FORMS = {
    "unicode": lambda v: np.array(v, dtype=str),
    "object": lambda v: np.array(v, dtype=object),
    "list": list,
}


@st.composite
def _number_arrays(draw):
    """(as handed over, as Python values): 1 to 4 arrays of forms drawn per
    array, sharing labels drawn from one pool (so that they collide)."""
    pool = draw(st.lists(st.one_of(st.sampled_from(EDGE_LABELS), st.booleans(),
                                   st.integers(-2**65, 2**65),
                                   st.floats(allow_nan=False, width=32)),
                         min_size=1, max_size=6, unique=True))
    arrays = []
    for _ in range(draw(st.integers(1, 4))):
        fits, make = NUMBER_FORMS[draw(st.sampled_from(sorted(NUMBER_FORMS)))]
        usable = [v for v in pool if fits(v)]
        if not usable:  # no label of the pool fits the form: an object array holds any
            make, usable = NUMBER_FORMS["object"][1], pool
        values = draw(st.lists(st.sampled_from(usable), max_size=8))
        arrays.append((make(values), values))
    return arrays


@st.composite
def _string_arrays(draw):
    text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=3)
    pool = draw(st.lists(text, min_size=1, max_size=6, unique=True))
    arrays = []
    for _ in range(draw(st.integers(1, 4))):
        make = STRING_FORMS[draw(st.sampled_from(sorted(STRING_FORMS)))]
        values = draw(st.lists(st.sampled_from(pool), max_size=8))
        arrays.append((make(values), values))
    return arrays


@st.composite
def _bool_arrays(draw):
    arrays = []
    for _ in range(draw(st.integers(1, 3))):
        values = draw(st.lists(st.booleans(), max_size=8))
        make = draw(st.sampled_from([lambda v: np.array(v, dtype=bool), list,
                                     lambda v: np.array(v, dtype=object)]))
        arrays.append((make(values), values))
    return arrays


@settings(max_examples=150, deadline=None)
@given(st.one_of(_number_arrays(), _string_arrays(), _bool_arrays()))
def test_encode_exact_classes_property(drawn):
    """Against Python's own sets of the exact values: as many classes as distinct
    labels (10 in an object array and in an int64 array one class; 2**63 + 1 and
    2**63 + 2 two), sorted, codes shared by every array, and the round trip."""
    arrays = [array for array, _ in drawn]
    values = [list(python) for _, python in drawn]
    expected = sorted(set(v for vs in values for v in vs))
    classes, *codes = mg.encode_labels(*arrays)
    assert len(classes) == len(expected), (classes, expected)
    assert all(c == e for c, e in zip(_as_list(classes), expected)), (classes, expected)
    for vs, code in zip(values, codes):
        assert code.dtype == np.int64 and code.shape == (len(vs),)
        assert all(expected[c] == v for c, v in zip(code.tolist(), vs)), (code, vs)
        assert all(c == v for c, v in zip(_as_list(classes[code]), vs))


MISSING = {"nan": float("nan"), "numpy-nan": np.float64("nan"), "None": None}


@st.composite
def _arrays_with_a_missing_label(draw):
    """Arrays of one kind, one of which holds one missing label at a drawn
    position; the array's form can hold it (a float array NaN, an object array
    or a list either)."""
    kind = draw(st.sampled_from(["numbers", "strings"]))
    pool = draw(st.lists(st.integers(-2**64, 2**64) if kind == "numbers" else
                         st.text("abc", max_size=2), min_size=1, max_size=4, unique=True))
    n_arrays = draw(st.integers(1, 3))
    target = draw(st.integers(0, n_arrays - 1))
    arrays = []
    for i in range(n_arrays):
        values = draw(st.lists(st.sampled_from(pool), min_size=1 if i == target else 0,
                               max_size=6))
        if i != target:
            arrays.append(np.array(values, dtype=object) if kind == "strings" else
                          np.array(values, dtype=object) if draw(st.booleans()) else values)
            continue
        position = draw(st.integers(0, len(values)))
        forms = ["object", "list"] + (["float64"] if kind == "numbers" else [])
        form = draw(st.sampled_from(forms))
        if form == "float64":
            values = [float(v) for v in values]
            missing = "nan"
        else:
            missing = draw(st.sampled_from(sorted(MISSING)))
        values.insert(position, MISSING[missing])
        arrays.append(np.array(values, dtype=np.float64) if form == "float64" else
                      np.array(values, dtype=object) if form == "object" else values)
        where = (target, position, "None" if missing == "None" else "NaN")
    return arrays, where


@settings(max_examples=100, deadline=None)
@given(_arrays_with_a_missing_label())
def test_encode_missing_label_property(drawn):
    """A missing label anywhere, in any form that can hold it: a ValueError naming
    the array, the marker and its position."""
    arrays, (target, position, shown) = drawn
    with pytest.raises(ValueError,
                       match=rf"argument {target} has {shown} at index {position};"):
        mg.encode_labels(*arrays)
