"""Exact ranking metrics: parity with scikit-learn 1.9 and CatBoost, and the input checks.

References:

* scikit-learn's ``roc_curve``, ``precision_recall_curve``, ``roc_auc_score``
  and ``average_precision_score`` on the same host arrays: the numbers (rtol
  1e-12, NaN where scikit-learn has NaN; curve shapes, threshold values and
  dtypes exactly) and the warnings (same category name and text, emitted
  exactly when scikit-learn emits them).
* CatBoost's ``catboost.utils.eval_metric`` for ``AUC:type=Mu`` (with and
  without ``misclass_cost_matrix``) and ``AUC:type=OneVsAll``, rtol 1e-12. Its
  weights are float32, so the weights passed to both are float32 values.
* AUC-mu worked by hand from Kleiman & Page's definition, and a brute-force
  pair count of that definition.

Scores are rounded so that ties are frequent (a tie group is one point of the
curves; ties inside a group count ½ in the AUC).
"""

from __future__ import annotations

import warnings
from fractions import Fraction
from functools import partial
from itertools import combinations

import numpy as np
import pytest
import sklearn.metrics as skm

from metrics_gpu.backends.selection import get_backend_implementation
from metrics_gpu._formulas.labels import UndefinedMetricWarning
from metrics_gpu._functional.ranking import (
    average_precision_score,
    multiclass_auc_mu,
    precision_recall_curve,
    roc_auc_score,
    roc_curve,
)
from metrics_gpu._validation import check_ranking_inputs, present_labels
from metrics_gpu.backends.numpy_backend import NUMPY_BACKEND
from metrics_gpu.sources.catboost import _catboost_auc
from metrics_gpu.testing import operation_counter

RTOL = 1e-12

SIZES = (1, 2, 7, 100, 3000)
TIES = ("distinct", "2-decimals", "1-decimal", "constant")
WEIGHTS = ("unweighted", "float", "int", "with-zeros")


# -- helpers ------------------------------------------------------------------------


def _scores(rng, shape, ties):
    values = rng.random(shape)
    if ties == "2-decimals":
        return np.round(values, 2)
    if ties == "1-decimal":
        return np.round(values, 1)
    if ties == "constant":
        return np.full(shape, 0.5)
    return values


def _weights(rng, n, kind):
    if kind == "unweighted":
        return None
    if kind == "float":
        return rng.uniform(0.1, 3.0, n)
    if kind == "int":
        return rng.integers(1, 5, n)
    weight = rng.uniform(0.0, 2.0, n)
    weight[rng.random(n) < 0.3] = 0.0
    return weight


def _binary_labels(rng, n):
    y = rng.integers(0, 2, n)
    if n >= 2:
        y[:2] = (0, 1)  # both classes, so that most cases are defined
        rng.shuffle(y)
    return y


def _call(function, *args, **kwargs):
    """``function``'s result and its user-facing warnings as (category name, text)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = function(*args, **kwargs)
    runtime = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert not runtime or function.__module__.startswith("sklearn"), runtime
    shown = [(w.category.__name__, str(w.message)) for w in caught
             if issubclass(w.category, UserWarning)]
    return result, shown


def _put(backend, *arrays):
    return [None if a is None else backend.asarray(a) for a in arrays]


def _assert_value(backend, ours, reference):
    ours = np.asarray(backend.to_numpy(ours), dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    assert ours.shape == reference.shape
    np.testing.assert_allclose(ours, reference, rtol=RTOL, atol=0, equal_nan=True)


def _assert_curve(backend, ours, reference):
    for name, mine, theirs in zip(("x", "y", "thresholds"), ours, reference):
        mine = backend.to_numpy(mine)
        assert mine.shape == theirs.shape, name
        assert mine.dtype == theirs.dtype, name
        if name == "thresholds":
            np.testing.assert_array_equal(mine, theirs)
        else:
            np.testing.assert_allclose(mine, theirs, rtol=RTOL, atol=0, equal_nan=True)


def _both(backend, ours, reference, *args, **kwargs):
    """Run our function on the backend and scikit-learn's on the host; return
    both results and check that they warn alike."""
    arrays = [backend.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    device_kwargs = {k: backend.asarray(v) if k == "sample_weight" and v is not None else v
                     for k, v in kwargs.items()}
    mine, my_warnings = _call(ours, *arrays, **device_kwargs)
    theirs, their_warnings = _call(reference, *args, **kwargs)
    assert my_warnings == their_warnings
    return mine, theirs


def _binary_case(rng, n, ties, weights):
    return _binary_labels(rng, n), _scores(rng, n, ties), _weights(rng, n, weights)


BINARY_CASES = [(n, ties, weights) for n in SIZES for ties in TIES for weights in WEIGHTS
                if not (n < 7 and ties != "1-decimal")]


def _binary_id(case):
    n, ties, weights = case
    return f"N={n}-{ties}-{weights}"


# -- binary: parity with scikit-learn -------------------------------------------------


@pytest.mark.parametrize("case", BINARY_CASES, ids=_binary_id)
def test_binary_metrics_match_sklearn(backend, rng, case):
    y, s, w = _binary_case(rng, *case)
    if w is not None and not w.any():
        w[0] = 1.0  # a curve needs a point (all-zero weights: test_curve_of_zero_weights_...)
    for drop in (True, False):
        for ours, reference in ((roc_curve, skm.roc_curve),
                                (precision_recall_curve, skm.precision_recall_curve)):
            mine, theirs = _both(backend, ours, reference, y, s, sample_weight=w,
                                 drop_intermediate=drop)
            _assert_curve(backend, mine, theirs)
    weight = np.ones(y.size) if w is None else w
    both_weighted = weight[y == 0].sum() > 0 and weight[y == 1].sum() > 0
    for max_fpr in (None, 0.3, 1.0):
        if max_fpr is not None and not both_weighted:
            continue  # scikit-learn fails there (test_partial_auc_of_an_undefined_curve_is_nan)
        mine, theirs = _both(backend, roc_auc_score, skm.roc_auc_score, y, s, sample_weight=w,
                             max_fpr=max_fpr)
        _assert_value(backend, mine, theirs)
    mine, theirs = _both(backend, average_precision_score, skm.average_precision_score, y, s,
                         sample_weight=w)
    _assert_value(backend, mine, theirs)


LABEL_SETS = {
    "0/1": (np.array([0, 1]), {}),
    "-1/1": (np.array([-1, 1]), {}),
    "bool": (np.array([False, True]), {}),
    "1/2 pos_label=2": (np.array([1, 2]), {"pos_label": 2}),
    "3/7 pos_label=3": (np.array([3, 7]), {"pos_label": 3}),
}


@pytest.mark.parametrize("labels", LABEL_SETS, ids=str)
def test_binary_labels_and_pos_label_match_sklearn(backend, rng, labels):
    classes, kwargs = LABEL_SETS[labels]
    y = classes[_binary_labels(rng, 300)]
    s = _scores(rng, 300, "2-decimals")
    w = _weights(rng, 300, "float")
    for ours, reference in ((roc_curve, skm.roc_curve),
                            (precision_recall_curve, skm.precision_recall_curve)):
        mine, theirs = _both(backend, ours, reference, y, s, sample_weight=w, **kwargs)
        _assert_curve(backend, mine, theirs)
    mine, theirs = _both(backend, roc_auc_score, skm.roc_auc_score, y, s, sample_weight=w)
    _assert_value(backend, mine, theirs)
    ap_kwargs = kwargs if kwargs or labels == "0/1" else {"pos_label": int(classes[-1])}
    mine, theirs = _both(backend, average_precision_score, skm.average_precision_score, y, s,
                         sample_weight=w, **ap_kwargs)
    _assert_value(backend, mine, theirs)


def test_curves_rank_one_class_of_multiclass_labels_with_pos_label(backend, rng):
    y = rng.integers(0, 4, 500)
    s = _scores(rng, 500, "1-decimal")
    for ours, reference in ((roc_curve, skm.roc_curve),
                            (precision_recall_curve, skm.precision_recall_curve)):
        mine, theirs = _both(backend, ours, reference, y, s, pos_label=2)
        _assert_curve(backend, mine, theirs)


def test_integer_scores_keep_their_dtype_in_precision_recall_thresholds(backend, rng):
    y = _binary_labels(rng, 200)
    s = rng.integers(-5, 5, 200)
    mine, theirs = _both(backend, precision_recall_curve, skm.precision_recall_curve, y, s)
    _assert_curve(backend, mine, theirs)
    mine, theirs = _both(backend, roc_curve, skm.roc_curve, y, s)
    _assert_curve(backend, mine, theirs)


@pytest.mark.parametrize("y", [[0, 0, 0], [1, 1, 1], [2, 2, 2]], ids=lambda y: f"all-{y[0]}")
def test_one_class_warns_and_gives_nan_as_sklearn(backend, y):
    """scikit-learn 1.9 returns NaN with an UndefinedMetricWarning for ROC AUC of
    one class (it no longer raises); the ROC curve's undefined rate is NaN."""
    y, s = np.array(y), np.array([0.1, 0.4, 0.4])
    mine, theirs = _both(backend, roc_auc_score, skm.roc_auc_score, y, s)
    assert np.isnan(theirs)
    _assert_value(backend, mine, theirs)
    kwargs = {"pos_label": 2} if y[0] == 2 else {}
    mine, theirs = _both(backend, roc_curve, skm.roc_curve, y, s, **kwargs)
    _assert_curve(backend, mine, theirs)
    mine, theirs = _both(backend, precision_recall_curve, skm.precision_recall_curve, y, s,
                         **kwargs)
    _assert_curve(backend, mine, theirs)
    mine, theirs = _both(backend, average_precision_score, skm.average_precision_score, y, s,
                         **({"pos_label": 2} if y[0] == 2 else {}))
    _assert_value(backend, mine, theirs)


def test_zero_weight_positives_warn_and_give_nan_as_sklearn(backend):
    y, s = np.array([0, 1, 1, 0, 0]), np.array([0.1, 0.4, 0.4, 0.3, 0.9])
    w = np.array([1.0, 0.0, 0.0, 2.0, 1.0])
    mine, theirs = _both(backend, roc_auc_score, skm.roc_auc_score, y, s, sample_weight=w)
    assert np.isnan(theirs)
    _assert_value(backend, mine, theirs)
    mine, theirs = _both(backend, average_precision_score, skm.average_precision_score, y, s,
                         sample_weight=w)
    _assert_value(backend, mine, theirs)


def test_partial_auc_of_an_undefined_curve_is_nan(backend):
    """Deviation: scikit-learn's partial AUC fails ("At least 2 points are needed")
    when the negatives weigh 0; ours is NaN with the ROC curve's warning."""
    y, s = np.array([0, 1, 1, 0]), np.array([0.1, 0.4, 0.35, 0.8])
    with pytest.warns(UserWarning, match="No negative samples in y_true"):
        value = roc_auc_score(*_put(backend, y, s), max_fpr=0.5,
                              sample_weight=backend.asarray(np.array([0.0, 1.0, 1.0, 0.0])))
    assert np.isnan(backend.to_numpy(value))


# -- the classes of y_true: binary labels without a sort --------------------------------

# y_true whose classes present_labels must find as np.unique does (values and
# dtype): extremes of the dtype, one class, and a third class that is rare,
# last, or between the other two.
PRESENT_LABEL_CASES = {
    "0/1": np.array([1, 0, 0, 1, 1]),
    "-1/1 int8": np.array([-1, 1, 1, -1], dtype=np.int8),
    "one class": np.array([2, 2, 2]),
    "one sample": np.array([7], dtype=np.int32),
    "bool": np.array([True, False, True]),
    "bool all False": np.zeros(4, dtype=bool),
    "bool all True": np.ones(4, dtype=bool),
    "uint64 extremes": np.array([0, 2**64 - 1, 0], dtype=np.uint64),
    "int64 extremes": np.array([2**63 - 1, -2**63, -2**63], dtype=np.int64),
    "float codes": np.array([3.0, 1.0, 3.0]),
    "third class last": np.array([0, 1, 0, 1, 5]),
    "third class between": np.array([0, 9, 9, 4, 0], dtype=np.uint8),
    "four classes": np.array([3, 1, 2, 0, 1], dtype=np.int16),
}


def _spy_on(patch, namespace, names, calls):
    """Record ``(name, size of the first argument)`` for each call of ``namespace.<name>``."""
    def spy(name, original, array, *args, **kwargs):
        calls.append((name, array.size))
        return original(array, *args, **kwargs)

    for name in names:
        patch.setattr(namespace, name, partial(spy, name, getattr(namespace, name)))


@pytest.mark.parametrize("name", PRESENT_LABEL_CASES, ids=str)
def test_present_labels_equal_unique_and_sort_only_a_third_class(backend, monkeypatch, name):
    """The classes equal np.unique's, dtype included. Binary labels cost one
    read-back and no unique; only a third class falls back to unique (and a
    second read-back)."""
    y = PRESENT_LABEL_CASES[name]
    inputs = check_ranking_inputs(backend.asarray(y), backend.asarray(np.zeros(y.size)))
    expected = np.unique(backend.to_numpy(inputs.y_true))
    multiclass = expected.size > 2
    calls = []
    with monkeypatch.context() as patch, operation_counter() as counts:
        _spy_on(patch, inputs.backend.xp, ["unique"], calls)
        classes = present_labels(inputs)
    assert isinstance(classes, np.ndarray) and classes.dtype == expected.dtype
    np.testing.assert_array_equal(classes, expected)
    assert len(calls) == multiclass
    if backend.name != "numpy":  # the NumPy backend's reads are no transfers
        assert counts.host_transfers == 1 + multiclass


def _spread_labels(kind, dtype):
    """5000 labels of 0 whose other values sit where only some blocks see them."""
    y = np.zeros(5000, dtype=dtype)
    if kind == "other last":
        y[-1] = 1
    elif kind == "other first":
        y[0] = 1
    elif kind == "third in another block":  # one block sees {0, 1}, another {0, 2}
        y[[10, 11]] = 1
        y[4000] = 2
    elif kind == "third in the same thread":
        y[[5, 5 + 64 * 16]] = [1, 2]
    elif kind == "extremes":
        info = np.iinfo(dtype)
        y[:] = info.max
        y[2500] = info.min
    return y


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64, np.uint64],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("kind", ["one value", "other last", "other first",
                                  "third in another block", "third in the same thread",
                                  "extremes"])
def test_label_pair_summary_kernel_across_blocks(case, kind, dtype):
    """kernels/ranking.cu label_pair_summary over many blocks (grid-strided):
    an other value one block alone sees, a third value only the host's merge
    of two blocks' rows reveals, the dtype's extremes. Equals NumPy's min, max
    and third check (the least and greatest only matter without a third)."""
    y = _spread_labels(kind, dtype)
    low, high, third = case.impl.label_pair_summary(case.put(y))
    expected = NUMPY_BACKEND.label_pair_summary(y)
    assert third == expected[2] == (np.unique(y).size > 2)
    assert (low.dtype, high.dtype) == (y.dtype, y.dtype)
    if not third:
        assert (low.item(), high.item()) == (expected[0].item(), expected[1].item())


@pytest.mark.parametrize("signs", ["probabilities", "decisions"])
@pytest.mark.parametrize("function", [roc_auc_score, average_precision_score],
                         ids=lambda f: f.__name__)
def test_binary_scores_sort_once_and_read_back_the_classes_once(backend, monkeypatch, rng,
                                                                  function, signs):
    """int64 labels, float32 scores: one sort of the scores (the packed 32-bit
    keys on the kernel backends, in two parts when the scores have both
    signs; the scores' argsort on NumPy) and no unique of the labels; the
    kernel backends launch the label summary, pack, the tile states, their
    scan, the areas and their sum (no CuPy scan or sums around the passes)
    and read back the classes and where the two parts meet. Pins the cost of issue 16's exact
    ranking."""
    n = 1000
    y = _binary_labels(rng, n)
    s = (rng.random(n) if signs == "probabilities" else rng.normal(size=n)).astype(np.float32)
    calls = []
    with monkeypatch.context() as patch, operation_counter() as counts:
        _spy_on(patch, get_backend_implementation(backend.name).xp,
                ["unique", "sort", "argsort", "lexsort"], calls)
        value = function(*_put(backend, y, s))
    if backend.name == "numpy":
        assert [name for name, size in calls if size == n] == ["argsort"]
    else:
        nonnegative = int((s >= 0).sum())
        parts = [nonnegative, n - nonnegative] if signs == "decisions" else [n]
        assert calls == [("sort", size) for size in parts]
        assert (counts.launches, counts.host_transfers) == (6, 2)
    _assert_value(backend, value, getattr(skm, function.__name__)(y, s))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
@pytest.mark.parametrize("signs", ["all-negative", "all-non-negative", "split-at-a-tile",
                                   "signed-zeros", "keys-equal-but-the-sign"])
def test_packed_keys_split_by_sign(case, launches, rng, dtype, signs):
    """The packed-key path puts the scores >= 0 in front and the others behind
    (kernels/ranking.cu rank_pack_keys), sorts each part and restores the
    sign from the position: ROC AUC and average precision equal the NumPy
    scan with one part empty, with the parts meeting exactly at a tile
    boundary of rank_unpack_keys, and with -0 and +0 tied (both rank with
    the scores >= 0), and for two scores whose keys differ only in the bit
    the split leaves out (so the sign must come back from the position)."""
    from metrics_gpu.backends.numpy_backend import NUMPY_BACKEND
    tile = _rank_tile(case)
    n = 3 * tile + 11
    magnitude = rng.integers(0, 40, n)
    if signs == "all-negative":
        scores = -1 - magnitude
    elif signs == "all-non-negative":
        scores = magnitude
    else:  # the first `tile` ranked positions are the scores >= 0
        scores = np.where(np.arange(n) < tile, magnitude, -1 - magnitude)
        scores = rng.permutation(scores)
    scores = scores.astype(dtype)
    if signs == "keys-equal-but-the-sign":
        # 0 and INT_MIN; +inf and the largest negative float32 subnormal
        # (float16 widens to float32 values whose keys never meet so).
        pair = {np.int32: [0, np.iinfo(np.int32).min],
                np.float32: [np.inf, -np.float32(2.0 ** -126) * (1 - 2.0 ** -23)],
                np.float16: [np.inf, -np.inf]}[dtype]
        scores = np.asarray(pair, dtype=dtype)[rng.integers(0, 2, n)]
    if signs == "signed-zeros" and dtype != np.int32:
        scores[rng.random(n) < 0.2] = -0.0
        scores[rng.random(n) < 0.2] = 0.0
    is_positive = rng.random(n) < 0.4
    for max_fpr in (None, 0.3):
        expected = NUMPY_BACKEND.binary_rank_areas(scores, is_positive, None, max_fpr)
        got = case.impl.binary_rank_areas(case.put(scores), case.put(is_positive), None,
                                          max_fpr)
        np.testing.assert_allclose(case.get(got), expected, rtol=RTOL, atol=1e-15)
    assert [launch.kernel for launch in launches] == [
        "rank_pack_keys", "rank_packed_tiles", "rank_tile_scan", "rank_packed_areas",
        "rank_finish"] * 2


BINARY_LABEL_DTYPES = {
    "int8 -1/1": (np.array([-1, 1], dtype=np.int8), {}),
    "uint64 0/1": (np.array([0, 1], dtype=np.uint64), {}),
    "uint8 3/7 pos_label=3": (np.array([3, 7], dtype=np.uint8), {"pos_label": 3}),
    "bool": (np.array([False, True]), {}),
    "float 0/1": (np.array([0.0, 1.0]), {}),
}


@pytest.mark.parametrize("labels", BINARY_LABEL_DTYPES, ids=str)
def test_binary_label_dtypes_match_sklearn_unweighted(backend, rng, labels):
    """Two classes in any label dtype, unweighted (the packed-key path)."""
    classes, kwargs = BINARY_LABEL_DTYPES[labels]
    y = classes[_binary_labels(rng, 300)]
    s = _scores(rng, 300, "2-decimals")
    mine, theirs = _both(backend, roc_curve, skm.roc_curve, y, s, **kwargs)
    _assert_curve(backend, mine, theirs)
    mine, theirs = _both(backend, roc_auc_score, skm.roc_auc_score, y, s)
    _assert_value(backend, mine, theirs)
    ap_kwargs = kwargs or {"pos_label": classes[-1].item()}
    mine, theirs = _both(backend, average_precision_score, skm.average_precision_score, y, s,
                         **ap_kwargs)
    _assert_value(backend, mine, theirs)


def test_one_rare_third_class_is_multiclass_as_sklearn(backend, rng):
    """A single sample of a third class, last: multiclass (the unique fallback),
    with scikit-learn's results and errors."""
    y = np.append(_binary_labels(rng, 200), 2)
    p = np.round(rng.dirichlet(np.ones(3), y.size), 2)
    p[:, 2] = 1 - p[:, 0] - p[:, 1]
    mine, theirs = _both(backend, roc_auc_score, skm.roc_auc_score, y, p, multi_class="ovr")
    _assert_value(backend, mine, theirs)
    mine, theirs = _both(backend, average_precision_score, skm.average_precision_score, y, p)
    _assert_value(backend, mine, theirs)
    with pytest.raises(ValueError, match=r"multi_class must be in .*classes \[0, 1, 2\]"):
        roc_auc_score(*_put(backend, y, p))
    with pytest.raises(ValueError, match=r"Parameter pos_label is fixed to 1 for multiclass"):
        average_precision_score(*_put(backend, y, p), pos_label=2)


# -- multiclass: parity with scikit-learn ---------------------------------------------


def _multiclass_case(rng, n, k, weights, ties=True):
    y = rng.integers(0, k, n)
    y[:k] = np.arange(k)  # every class present
    rng.shuffle(y)
    p = rng.dirichlet(np.full(k, 0.7), n)
    if ties:
        p = np.round(p, 2)
        p[:, -1] = 1.0 - p[:, :-1].sum(axis=1)  # rows still sum to 1 (within allclose)
    return y, p, _weights(rng, n, weights)


MULTICLASS = [(k, n, weights) for k, n in ((3, 60), (5, 800), (50, 2000))
              for weights in ("unweighted", "float", "int")]


def _heavy_k_on_emulator(cases):
    """K = 50 runs the kernels of K = 5 over 10-50x the pairs and columns: on
    the emulator, a case of the exhaustive tier."""
    return [pytest.param(c, marks=pytest.mark.exhaustive_on_emulated) if c[0] >= 50 else c
            for c in cases]


def _multiclass_id(case):
    k, n, weights = case
    return f"K={k}-N={n}-{weights}"


@pytest.mark.parametrize("case", _heavy_k_on_emulator(MULTICLASS), ids=_multiclass_id)
def test_multiclass_roc_auc_ovr_matches_sklearn(backend, rng, case):
    k, n, weights = case
    y, p, w = _multiclass_case(rng, n, k, weights)
    for average in ("macro", "weighted", "micro", None):
        mine, theirs = _both(backend, roc_auc_score, skm.roc_auc_score, y, p, sample_weight=w,
                             multi_class="ovr", average=average)
        _assert_value(backend, mine, theirs)


@pytest.mark.parametrize("case", _heavy_k_on_emulator([c for c in MULTICLASS
                                                        if c[2] == "unweighted"]),
                         ids=_multiclass_id)
def test_multiclass_roc_auc_ovo_matches_sklearn(backend, rng, case):
    k, n, _ = case
    if backend.name == "emulated" and k >= 50:
        # ~60 s on the emulator: 1225 pairs through the binary kernels that
        # K = 3 and 5 run there already.
        pytest.skip("K = 50 one-vs-one on the emulator: K = 3 and 5 cover its kernels")
    y, p, _ = _multiclass_case(rng, n, k, "unweighted")
    for average in ("macro", "weighted"):
        mine, theirs = _both(backend, roc_auc_score, skm.roc_auc_score, y, p, multi_class="ovo",
                             average=average)
        _assert_value(backend, mine, theirs)


@pytest.mark.parametrize("case", _heavy_k_on_emulator(MULTICLASS), ids=_multiclass_id)
def test_multiclass_average_precision_matches_sklearn(backend, rng, case):
    k, n, weights = case
    y, p, w = _multiclass_case(rng, n, k, weights)
    for average in ("macro", "weighted", "micro", "samples", None):
        mine, theirs = _both(backend, average_precision_score, skm.average_precision_score, y, p,
                             sample_weight=w, average=average)
        _assert_value(backend, mine, theirs)


@pytest.mark.parametrize("multi_class", ["ovr", "ovo"])
def test_labels_with_a_class_absent_from_y_true_match_sklearn(backend, rng, multi_class):
    y, p, _ = _multiclass_case(rng, 200, 4, "unweighted")
    y[y == 2] = 3  # class 2 absent: ovr gives it NaN (with a warning), ovo leaves its pairs out
    for average in ("macro", "weighted"):
        mine, theirs = _both(backend, roc_auc_score, skm.roc_auc_score, y, p,
                             multi_class=multi_class, average=average, labels=[0, 1, 2, 3])
        _assert_value(backend, mine, theirs)


@pytest.mark.parametrize("average", ["macro", "weighted"])
def test_ovo_of_one_present_class_is_nan(backend, rng, average):
    """No pair of present classes: scikit-learn averages an empty list (NaN with a
    RuntimeWarning for 'macro', ZeroDivisionError for 'weighted'); ours is NaN
    with an UndefinedMetricWarning for both."""
    _, p, _ = _multiclass_case(rng, 20, 3, "unweighted")
    y = np.full(20, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            theirs = skm.roc_auc_score(y, p, multi_class="ovo", average=average,
                                       labels=[0, 1, 2])
        except ZeroDivisionError:
            theirs = None
    assert (theirs is None) == (average == "weighted")
    assert theirs is None or np.isnan(theirs)
    with pytest.warns(UndefinedMetricWarning, match="no pair of classes"):
        mine = roc_auc_score(*_put(backend, y, p), multi_class="ovo", average=average,
                             labels=[0, 1, 2])
    assert np.isnan(float(backend.to_numpy(mine)))


def test_sparse_class_codes_map_to_sorted_columns_as_sklearn(backend, rng):
    y, p, w = _multiclass_case(rng, 300, 3, "float")
    y = np.array([2, 5, 9])[y]  # the columns are the classes present, sorted
    mine, theirs = _both(backend, roc_auc_score, skm.roc_auc_score, y, p, sample_weight=w,
                         multi_class="ovr", average="weighted")
    _assert_value(backend, mine, theirs)
    mine, theirs = _both(backend, average_precision_score, skm.average_precision_score, y, p,
                         sample_weight=w)
    _assert_value(backend, mine, theirs)


def test_weighted_average_of_zero_weight_gives_zero_as_sklearn(backend, rng):
    y, p, _ = _multiclass_case(rng, 30, 3, "unweighted")
    w = np.zeros(30)
    mine, theirs = _both(backend, roc_auc_score, skm.roc_auc_score, y, p, sample_weight=w,
                         multi_class="ovr", average="weighted")
    _assert_value(backend, mine, theirs)


# -- input checks -------------------------------------------------------------------------


Y4, S4 = np.array([0, 1, 1, 0]), np.array([0.1, 0.4, 0.35, 0.8])
P4 = np.array([[0.2, 0.3, 0.5], [0.1, 0.8, 0.1], [0.6, 0.2, 0.2], [0.3, 0.3, 0.4]])
Y4_MULTI = np.array([2, 1, 0, 2])

SCORE_FUNCTIONS = {
    "roc_curve": roc_curve,
    "precision_recall_curve": precision_recall_curve,
    "roc_auc_score": roc_auc_score,
    "average_precision_score": average_precision_score,
}


@pytest.mark.parametrize("function", SCORE_FUNCTIONS)
def test_nan_score_is_named_with_its_index(backend, function):
    s = S4.copy()
    s[2] = np.nan
    with pytest.raises(ValueError, match=r"y_score must hold finite scores; found nan at index 2"):
        SCORE_FUNCTIONS[function](*_put(backend, Y4, s))


def test_infinite_score_in_a_matrix_is_named_with_its_row_and_column(backend):
    p = P4.copy()
    p[1, 2] = np.inf
    with pytest.raises(ValueError, match=r"y_score.*finite.*inf at row 1, column 2"):
        roc_auc_score(*_put(backend, Y4_MULTI, p), multi_class="ovr")


@pytest.mark.parametrize("function", SCORE_FUNCTIONS)
def test_length_mismatch(backend, function):
    with pytest.raises(ValueError, match=r"y_true has 4 samples but y_score has 3"):
        SCORE_FUNCTIONS[function](*_put(backend, Y4, S4[:3]))


@pytest.mark.parametrize("function", SCORE_FUNCTIONS)
def test_empty_input(backend, function):
    with pytest.raises(ValueError, match=r"empty"):
        SCORE_FUNCTIONS[function](*_put(backend, np.array([], dtype=int), np.array([])))


@pytest.mark.parametrize("function", SCORE_FUNCTIONS)
def test_binary_y_true_needs_one_score_column(backend, function):
    with pytest.raises(ValueError, match=r"1-D y_score for binary y_true.*shape \(4, 2\)"):
        SCORE_FUNCTIONS[function](*_put(backend, Y4, np.stack([1 - S4, S4], axis=1)))


def test_three_dimensional_scores(backend):
    with pytest.raises(ValueError, match=r"y_score must be \(N,\) scores or \(N, K\).*\(4, 1, 2\)"):
        roc_auc_score(*_put(backend, Y4, np.zeros((4, 1, 2))))


@pytest.mark.parametrize("function", SCORE_FUNCTIONS)
def test_negative_weight_is_named_with_its_index(backend, function):
    w = np.array([1.0, -1.0, 1.0, 1.0])
    with pytest.raises(ValueError,
                       match=r"sample_weight must be non-negative; found -1.0 at index 1"):
        SCORE_FUNCTIONS[function](*_put(backend, Y4, S4), sample_weight=backend.asarray(w))


@pytest.mark.parametrize("function", SCORE_FUNCTIONS)
def test_non_finite_weight_is_named_with_its_index(backend, function):
    w = np.array([1.0, 1.0, np.inf, 1.0])
    with pytest.raises(ValueError, match=r"sample_weight must be finite; found inf at index 2"):
        SCORE_FUNCTIONS[function](*_put(backend, Y4, S4), sample_weight=backend.asarray(w))


def test_weight_length_mismatch(backend):
    with pytest.raises(ValueError, match=r"sample_weight has 3 entries but y_true has 4 samples"):
        roc_auc_score(*_put(backend, Y4, S4), sample_weight=backend.asarray(np.ones(3)))


@pytest.mark.parametrize("function", ["roc_curve", "precision_recall_curve"])
def test_curve_of_zero_weights_has_no_points(backend, function):
    with pytest.raises(ValueError, match=r"sample_weight must hold at least one non-zero weight"):
        SCORE_FUNCTIONS[function](*_put(backend, Y4, S4),
                                  sample_weight=backend.asarray(np.zeros(4)))


def test_non_integer_labels(backend):
    with pytest.raises(ValueError,
                       match=r"y_true must hold integer class codes; found 0.5 at index 1"):
        roc_auc_score(*_put(backend, np.array([0.0, 0.5, 1.0, 1.0]), S4))


@pytest.mark.parametrize("function", ["roc_curve", "precision_recall_curve"])
def test_curve_labels_outside_0_1_need_pos_label(backend, function):
    with pytest.raises(ValueError, match=r"y_true takes value in \{1, 2\} and pos_label is not "
                                         r"specified"):
        SCORE_FUNCTIONS[function](*_put(backend, Y4 + 1, S4))


@pytest.mark.parametrize("function", ["roc_curve", "precision_recall_curve"])
def test_curve_of_multiclass_labels_needs_pos_label(backend, function):
    with pytest.raises(ValueError, match=r"multiclass format is not supported"):
        SCORE_FUNCTIONS[function](*_put(backend, np.array([0, 1, 2, 1]), S4))


def test_rows_not_summing_to_one_name_the_row(backend):
    p = P4.copy()
    p[3] = [0.5, 0.5, 0.5]
    with pytest.raises(ValueError, match=r"Target scores need to be probabilities for multiclass "
                                         r"roc_auc.*row 3 of y_score sums to 1.5"):
        roc_auc_score(*_put(backend, Y4_MULTI, p), multi_class="ovr")


def test_multiclass_needs_multi_class(backend):
    with pytest.raises(ValueError, match=r"multi_class must be in \('ovo', 'ovr'\)"):
        roc_auc_score(*_put(backend, Y4_MULTI, P4))


def test_multiclass_has_no_partial_auc(backend):
    with pytest.raises(ValueError, match=r"Partial AUC computation not available in multiclass"):
        roc_auc_score(*_put(backend, Y4_MULTI, P4), multi_class="ovr", max_fpr=0.5)


@pytest.mark.parametrize("max_fpr", [0, -0.1, 1.5, "0.5"], ids=repr)
def test_max_fpr_outside_0_1(backend, max_fpr):
    with pytest.raises(ValueError, match=r"max_fpr must be a number in \(0, 1\] or None"):
        roc_auc_score(*_put(backend, Y4, S4), max_fpr=max_fpr)


def test_ovo_takes_no_sample_weight(backend):
    with pytest.raises(ValueError, match=r"sample_weight is not supported for multiclass "
                                         r"one-vs-one ROC AUC"):
        roc_auc_score(*_put(backend, Y4_MULTI, P4), multi_class="ovo",
                      sample_weight=backend.asarray(np.ones(4)))


def test_ovo_has_no_per_class_values(backend):
    with pytest.raises(NotImplementedError, match=r"average=None is not implemented for "
                                                  r"multi_class='ovo'"):
        roc_auc_score(*_put(backend, Y4_MULTI, P4), multi_class="ovo", average=None)


@pytest.mark.parametrize("call", ["binary", "ovo-micro", "multi_class"])
def test_bad_options(backend, call):
    y, s = _put(backend, Y4, S4)
    if call == "binary":
        with pytest.raises(ValueError, match=r"average must be one of .* got 'binary'"):
            roc_auc_score(y, s, average="binary")
    elif call == "ovo-micro":
        with pytest.raises(ValueError, match=r"average must be one of \('macro', 'weighted', "
                                             r"None\) for multiclass problems, got 'micro'"):
            roc_auc_score(*_put(backend, Y4_MULTI, P4), multi_class="ovo", average="micro")
    else:
        with pytest.raises(ValueError, match=r"multi_class must be one of .* got 'ovx'"):
            roc_auc_score(y, s, multi_class="ovx")


@pytest.mark.parametrize("labels, message", [
    ([0, 1, 1], r"Parameter 'labels' must be unique"),
    ([2, 1, 0], r"Parameter 'labels' must be ordered"),
    ([0, 1, 2, 3],
     r"Number of given labels, 4, not equal to the number of columns in 'y_score', 3"),
    ([0, 1, 3], r"'y_true' contains labels not in parameter 'labels': \[2\]"),
], ids=["repeated", "unordered", "too-many", "missing-2"])
def test_bad_multiclass_labels(backend, labels, message):
    with pytest.raises(ValueError, match=message):
        roc_auc_score(*_put(backend, Y4_MULTI, P4), multi_class="ovr", labels=labels)


def test_classes_must_match_score_columns(backend):
    with pytest.raises(ValueError, match=r"Number of classes in y_true \(3: \[0, 1, 2\]\) "
                                         r"not equal "
                                         r"to the number of columns in 'y_score' \(4\)"):
        roc_auc_score(*_put(backend, Y4_MULTI, np.full((4, 4), 0.25)), multi_class="ovr")


def test_average_precision_pos_label_checks(backend):
    with pytest.raises(ValueError, match=r"pos_label=5 is not a valid label. It should be one of "
                                         r"\[0, 1\]"):
        average_precision_score(*_put(backend, Y4, S4), pos_label=5)
    with pytest.raises(ValueError, match=r"pos_label is fixed to 1 for multiclass y_true"):
        average_precision_score(*_put(backend, Y4_MULTI, P4), pos_label=2)
    with pytest.raises(ValueError, match=r"`y_score` needs to be of shape `\(n_samples, "
                                         r"n_classes\)`.*\(4, 2\)"):
        average_precision_score(*_put(backend, Y4_MULTI, P4[:, :2]))


# -- AUC-mu ----------------------------------------------------------------------------------

# Kleiman & Page's AUC-mu worked by hand. Default costs (1 off the diagonal), so
# d_i - d_j = s_j - s_i: a pair (i, j) ranks its samples by s_j - s_i, and
# A(i, j) = P(a sample of j ranks above one of i) + ½ P(tie).
HAND_Y = np.array([0, 0, 1, 1, 2, 2])
HAND_SCORES = np.array([
    [0.6, 0.3, 0.1],   # class 0: s1 - s0 = -0.3, s2 - s0 = -0.5
    [0.3, 0.3, 0.4],   # class 0: s1 - s0 =  0.0, s2 - s0 =  0.1
    [0.2, 0.5, 0.3],   # class 1: s1 - s0 =  0.3, s2 - s1 = -0.2
    [0.4, 0.4, 0.2],   # class 1: s1 - s0 =  0.0, s2 - s1 = -0.2
    [0.1, 0.3, 0.6],   # class 2: s2 - s0 =  0.5, s2 - s1 =  0.3
    [0.3, 0.2, 0.5],   # class 2: s2 - s0 =  0.2, s2 - s1 =  0.3
])
# A(0, 1): class-1 margins {0.3, 0.0} against class-0 {-0.3, 0.0}: 0.3 beats
# both, 0.0 beats -0.3 and ties 0.0: 3.5 / 4. A(0, 2) = A(1, 2) = 1 (every
# class-2 margin is above). AUC-mu = (3.5 / 4 + 1 + 1) / 3.
HAND_AUC_MU = (3.5 / 4 + 1 + 1) / 3
# Weight 2 on the second sample: A(0, 1) = (1·1 + 1·2 + 1·1 + ½·1·2) / (3 · 2) = 5 / 6.
HAND_WEIGHT = np.array([1.0, 2.0, 1.0, 1.0, 1.0, 1.0])
HAND_AUC_MU_WEIGHTED = (5 / 6 + 1 + 1) / 3


def test_auc_mu_hand_worked_case(backend):
    value = multiclass_auc_mu(*_put(backend, HAND_Y, HAND_SCORES))
    np.testing.assert_allclose(backend.to_numpy(value), HAND_AUC_MU, rtol=RTOL)
    value = multiclass_auc_mu(*_put(backend, HAND_Y, HAND_SCORES),
                              sample_weight=backend.asarray(HAND_WEIGHT))
    np.testing.assert_allclose(backend.to_numpy(value), HAND_AUC_MU_WEIGHTED, rtol=RTOL)


def _auc_mu_by_pairs(y, scores, cost_matrix, weight):
    """The paper's definition, counted pair by pair of samples (quadratic)."""
    k = scores.shape[1]
    costs = scores @ cost_matrix.T
    total = 0.0
    for i, j in combinations(range(k), 2):
        direction = cost_matrix[i, j] + cost_matrix[j, i]
        if direction == 0:  # mistakes between i and j cost nothing: ½ (CatBoost's rule)
            total += 0.5
            continue
        margin = costs[:, i] - costs[:, j]
        if direction < 0:
            margin = -margin
        a, b = np.flatnonzero(y == i), np.flatnonzero(y == j)
        above = margin[b][:, None] > margin[a][None, :]
        tied = margin[b][:, None] == margin[a][None, :]
        pair_weight = weight[b][:, None] * weight[a][None, :]
        total += ((above + 0.5 * tied) * pair_weight).sum() / pair_weight.sum()
    return 2 * total / (k * (k - 1))


def test_auc_mu_matches_the_pairwise_definition(backend, rng):
    # Integer scores and costs: every margin is exact, so ties are the same
    # whatever the order of the sums.
    y = rng.integers(0, 4, 150)
    scores = rng.integers(-3, 4, (150, 4)).astype(np.float64)
    matrix = rng.integers(1, 4, (4, 4)).astype(np.float64)
    np.fill_diagonal(matrix, 0)
    matrix[2, 3] = matrix[3, 2] = 0  # a pair of free mistakes
    weight = rng.integers(1, 4, 150).astype(np.float64)
    value = multiclass_auc_mu(*_put(backend, y, scores), backend.asarray(matrix),
                              sample_weight=backend.asarray(weight))
    np.testing.assert_allclose(backend.to_numpy(value),
                               _auc_mu_by_pairs(y, scores, matrix, weight), rtol=RTOL)


def test_auc_mu_absent_class_counts_zero_and_warns(backend):
    y = np.array([0, 0, 1, 1])
    scores = np.array([[0.9, 0.1, 0.0], [0.6, 0.3, 0.1], [0.2, 0.7, 0.1], [0.3, 0.6, 0.1]])
    with pytest.warns(UserWarning, match=r"classes \[2\] have no samples"):
        value = multiclass_auc_mu(*_put(backend, y, scores))
    # One pair present, perfectly separated; three pairs in the mean.
    np.testing.assert_allclose(backend.to_numpy(value), 1 / 3, rtol=RTOL)


@pytest.mark.parametrize("cost_matrix, message", [
    (np.ones((3, 3)), r"cost_matrix must be 0 on the diagonal.*1.0 at row 0, column 0"),
    (np.zeros((2, 2)), r"cost_matrix must be 3 x 3.*\(2, 2\)"),
    (np.where(np.eye(3) == 1, 0, np.nan),
     r"cost_matrix must be finite; found nan at row 0, column 1"),
], ids=["diagonal", "shape", "nan"])
def test_auc_mu_bad_cost_matrix(backend, cost_matrix, message):
    with pytest.raises(ValueError, match=message):
        multiclass_auc_mu(*_put(backend, HAND_Y, HAND_SCORES), cost_matrix)


def test_auc_mu_label_outside_the_columns(backend):
    with pytest.raises(ValueError, match=r"y_true contains the label 3 at index 5, outside 0..2"):
        multiclass_auc_mu(*_put(backend, np.array([0, 0, 1, 1, 2, 3]), HAND_SCORES))


def test_auc_mu_needs_per_class_scores(backend):
    with pytest.raises(ValueError, match=r"y_score must be \(N, K\) per-class scores with K >= 2"):
        multiclass_auc_mu(*_put(backend, Y4, S4))


# -- CatBoost --------------------------------------------------------------------------------


def _catboost_eval():
    utils = pytest.importorskip("catboost.utils")
    return utils.eval_metric


def _catboost_case(rng, n, k, weights, decimals=1):
    y = rng.integers(0, k, n)
    y[:k] = np.arange(k)
    approx = np.round(rng.normal(0, 2, (n, k)), decimals)  # raw scores, with ties
    weight = None if weights == "unweighted" else rng.uniform(0, 3, n).astype(np.float32)
    return y.astype(np.float64), approx, weight


def _cost_spec(matrix):
    return ";misclass_cost_matrix=" + "/".join(repr(float(v)) for v in matrix.ravel())


def _cost_matrix(rng, k):
    # Negative entries and pairs whose costs cancel: the sign and ½ branches.
    matrix = np.round(rng.uniform(-1, 2, (k, k)), 1)
    np.fill_diagonal(matrix, 0)
    if k > 2:
        matrix[0, 1], matrix[1, 0] = 0.5, -0.5
    return matrix


CATBOOST_CASES = [(k, n, weights, costs) for k, n in ((2, 300), (3, 500), (5, 1000), (50, 3000))
                  for weights in ("unweighted", "float32") for costs in ("default", "matrix")]


def _catboost_id(case):
    k, n, weights, costs = case
    return f"K={k}-N={n}-{weights}-{costs}"


@pytest.mark.parametrize("case", _heavy_k_on_emulator(CATBOOST_CASES), ids=_catboost_id)
def test_auc_mu_matches_catboost(backend, rng, case):
    eval_metric = _catboost_eval()
    k, n, weights, costs = case
    if backend.name == "emulated" and k >= 50 and (weights, costs) != ("unweighted", "matrix"):
        # ~30 s each on the emulator, the per-pair kernels of K = 5, whose
        # weight and cost variants run there: one K = 50 case suffices.
        pytest.skip("K = 50 on the emulator: the unweighted cost-matrix case only")
    y, approx, weight = _catboost_case(rng, n, k, weights)
    matrix = _cost_matrix(rng, k) if costs == "matrix" else None
    spec = "AUC:type=Mu" + ("" if matrix is None else _cost_spec(matrix))
    expected = eval_metric(y, approx, spec, weight=weight)[0]
    ours = multiclass_auc_mu(*_put(backend, y, approx), None if matrix is None else matrix,
                             sample_weight=None if weight is None else backend.asarray(weight))
    np.testing.assert_allclose(backend.to_numpy(ours), expected, rtol=RTOL, atol=0)
    np.testing.assert_allclose(_catboost_auc(y, approx, weight, "Mu", matrix), expected,
                               rtol=RTOL, atol=0)


@pytest.mark.parametrize("case", [c for c in CATBOOST_CASES if c[3] == "default"],
                         ids=lambda c: _catboost_id(c)[:-len("-default")])
def test_one_vs_all_auc_matches_catboost(rng, case):
    """CatBoost ranks its softmax probabilities (fmath exp: ties fall as in CatBoost)."""
    eval_metric = _catboost_eval()
    k, n, weights, _ = case
    y, approx, weight = _catboost_case(rng, n, k, weights)
    expected = eval_metric(y, approx, "AUC:type=OneVsAll", weight=weight)
    ours = _catboost_auc(y, approx, weight, "OneVsAll", None)
    assert isinstance(ours, list) and len(ours) == k
    np.testing.assert_allclose(ours, expected, rtol=RTOL, atol=0)


@pytest.mark.parametrize("case", ["absent-class", "one-class", "zero-weight-class", "far-apart"])
def test_catboost_auc_conventions(rng, case):
    """No positives or no negatives: 0; zero weight: NaN; a row spread beyond
    exp's range (fmath flushes the scalar tail to 0, clamps the vector lanes)."""
    eval_metric = _catboost_eval()
    y, approx, weight = _catboost_case(rng, 200, 5, "float32")
    if case == "absent-class":
        y[y == 3] = 0
    elif case == "one-class":
        y[:] = 2
    elif case == "zero-weight-class":
        weight[y == 1] = 0
    else:
        approx[::3, :] *= 400
    for spec, auc_type in (("AUC:type=Mu", "Mu"), ("AUC:type=OneVsAll", "OneVsAll")):
        expected = eval_metric(y, approx, spec, weight=weight)
        ours = _catboost_auc(y, approx, weight, auc_type, None)
        np.testing.assert_allclose(np.atleast_1d(ours), expected, rtol=RTOL, atol=0,
                                   equal_nan=True)


def test_catboost_auc_reads_catboost_cost_strings(rng):
    eval_metric = _catboost_eval()
    y, approx, weight = _catboost_case(rng, 400, 3, "float32")
    text = "0/0.5/2/1/0/1/0/0.5/0"  # a cost string as CatBoost writes it
    expected = eval_metric(y, approx, "AUC:type=Mu;misclass_cost_matrix=" + text, weight=weight)
    np.testing.assert_allclose(_catboost_auc(y, approx, weight, "Mu", text), expected[0],
                               rtol=RTOL, atol=0)
    with pytest.raises(ValueError, match=r"K \* K numbers \(row by row\), got 8"):
        _catboost_auc(y, approx, weight, "Mu", "0/1/1/1/0/1/1/1")
    with pytest.raises(ValueError, match=r"cost_matrix must be 3 x 3.*\(2, 2\)"):
        _catboost_auc(y, approx, weight, "Mu", "0/1/1/0")
    with pytest.raises(ValueError, match=r"numbers separated by '/'"):
        _catboost_auc(y, approx, weight, "Mu", "0,1,1,0")


def test_catboost_auc_rejects_a_cost_matrix_for_one_vs_all():
    y, approx, _ = _catboost_case(np.random.default_rng(0), 20, 3, "unweighted")
    with pytest.raises(ValueError, match=r"AUC:type=Mu only"):
        _catboost_auc(y, approx, None, "OneVsAll", np.ones((3, 3)) - np.eye(3))
    with pytest.raises(ValueError, match=r"auc_type must be 'Mu' or 'OneVsAll'"):
        _catboost_auc(y, approx, None, "Classic", None)


# -- kernels/ranking.cu against the NumPy reference ----------------------------------

RANK_DTYPES = (np.float32, np.float64, np.float16, np.int32, np.int8, np.uint64, np.bool_)
RANK_LAYOUTS = ("distinct", "groups-across-tiles", "constant")


def _rank_case(rng, n, dtype, layout):
    """Scores of ``dtype`` whose tie groups are single positions, span several
    kernel tiles, or are the whole input; labels with about 30% positives.
    Signed scores have both signs in "distinct" (floats) and in
    "groups-across-tiles", one sign otherwise."""
    if dtype == np.bool_:
        scores = rng.random(n) < (0.0 if layout == "constant" else 0.5)
    elif layout == "constant":
        scores = np.full(n, 3, dtype=dtype)
    elif layout == "groups-across-tiles":
        low = 0 if np.dtype(dtype).kind == "u" else -2
        scores = rng.integers(low, low + 4, n).astype(dtype)
    elif np.dtype(dtype).kind == "f":
        scores = rng.normal(size=n).astype(dtype)
    else:
        scores = rng.permutation(n).astype(dtype)
    if dtype == np.uint64 and layout != "constant":
        scores = scores + np.uint64(2 ** 63 - 2)  # unsigned order above the int64 range
    return scores, rng.random(n) < 0.3


def _rank_tile(case) -> int:
    from metrics_gpu.backends.launchers.ranking import RANK_ITEMS_PER_THREAD, RANK_MAX_BLOCK_THREADS
    return min(case.device.block_threads, RANK_MAX_BLOCK_THREADS) * RANK_ITEMS_PER_THREAD


def _assert_rank_areas_equal_reference(case, scores, is_positive, weight):
    """ROC AUC, partial AUC (max_fpr 0.3) and AP of the kernels equal the
    NumPy ranked scan's."""
    from metrics_gpu.backends.numpy_backend import NUMPY_BACKEND
    for max_fpr in (None, 0.3):
        expected = NUMPY_BACKEND.binary_rank_areas(scores, is_positive, weight, max_fpr)
        got = case.impl.binary_rank_areas(case.put(scores), case.put(is_positive),
                                          case.put(weight), max_fpr)
        np.testing.assert_allclose(case.get(got), expected, rtol=RTOL, atol=1e-15)


@pytest.mark.parametrize("layout", RANK_LAYOUTS)
@pytest.mark.parametrize("weighted", (False, True), ids=("unweighted", "with-zeros"))
@pytest.mark.parametrize("dtype", RANK_DTYPES, ids=lambda d: np.dtype(d).name)
def test_rank_kernels_equal_reference(case, launches, rng, dtype, weighted, layout):
    """ROC AUC, partial AUC and average precision from the two passes of
    kernels/ranking.cu equal the NumPy ranked scan, for ties inside one tile,
    across tile boundaries and over the whole input."""
    n = 3 * _rank_tile(case) + 37  # a partial last tile
    scores, is_positive = _rank_case(rng, n, dtype, layout)
    weight = _weights(rng, n, "with-zeros") if weighted else None
    _assert_rank_areas_equal_reference(case, scores, is_positive, weight)
    # Unweighted scores of at most 32 bits sort packed 32-bit keys, split by
    # sign, and both passes read them in place; others gather. One block
    # scans the tiles between the passes, one adds up their areas.
    packed = not weighted and np.dtype(dtype).itemsize <= 4 and dtype != np.uint64
    path = (["rank_pack_keys", "rank_packed_tiles", "rank_tile_scan", "rank_packed_areas"]
            if packed else ["rank_gather", "rank_tile_scan", "rank_areas"]) + ["rank_finish"]
    assert [launch.kernel for launch in launches] == path * 2
    tiles = -(-n // _rank_tile(case))
    assert [launch.grid for launch in launches[len(path) - 4:len(path)]] == [tiles, 1, tiles, 1]


@pytest.mark.parametrize("weighted", (False, True), ids=("unweighted", "with-zeros"))
@pytest.mark.parametrize("dtype", (np.float16, np.float32), ids=lambda d: np.dtype(d).name)
def test_rank_areas_take_signed_zeros_for_one_score(case, rng, dtype, weighted):
    """+0 and -0 are one score, one tie group, wherever the sort leaves them
    (rank_areas compares halves by their bits, +0 / -0 and NaN apart), as are
    other repeated values; the areas equal the NumPy ranked scan."""
    n = 2 * _rank_tile(case) + 5
    scores = rng.choice(np.array([-0.0, 0.0, 0.5, -1.0, 2.0 ** -20], dtype=dtype), n)
    is_positive = rng.random(n) < 0.4
    weight = _weights(rng, n, "with-zeros") if weighted else None
    _assert_rank_areas_equal_reference(case, scores, is_positive, weight)


@pytest.mark.parametrize("layout", RANK_LAYOUTS)
@pytest.mark.parametrize("weighted", (False, True), ids=("unweighted", "with-zeros"))
@pytest.mark.parametrize("dtype", RANK_DTYPES, ids=lambda d: np.dtype(d).name)
def test_curve_kernels_equal_reference(case, launches, rng, dtype, weighted, layout):
    """The curve points of kernels/ranking.cu (rank_gather, then
    rank_curve_points counting and writing) equal the NumPy ranked scan: the
    cumulative weights and counts at each tie group's end and its score, for
    ties inside one tile, across tiles and over the whole input, zero weights
    included; the curves as scikit-learn's at a few tiles' length."""
    from metrics_gpu.backends.numpy_backend import NUMPY_BACKEND
    n = 3 * _rank_tile(case) + 37  # a partial last tile
    scores, is_positive = _rank_case(rng, n, dtype, layout)
    weight = _weights(rng, n, "with-zeros") if weighted else None
    expected = NUMPY_BACKEND.binary_curve_points(scores, is_positive, weight)
    got = case.impl.binary_curve_points(case.put(scores), case.put(is_positive),
                                        case.put(weight))
    names = ("fps", "tps", "negatives_seen", "positives_seen", "thresholds")
    for name, ours, reference in zip(names, got, expected):
        ours = case.get(ours)
        assert ours.dtype == reference.dtype and ours.shape == reference.shape, name
        if name in ("fps", "tps"):  # sums in a fixed parallel order
            np.testing.assert_allclose(ours, reference, rtol=RTOL, err_msg=name)
        else:
            np.testing.assert_array_equal(ours, reference, err_msg=name)
    assert [launch.kernel for launch in launches] == [
        "rank_gather", "rank_tile_scan"] + ["rank_curve_points"] * 2
    assert launches[2].grid == -(-n // _rank_tile(case))


LABEL_RANK_DTYPES = (np.float32, np.float64, np.float16, np.int32, np.int64)


@pytest.mark.parametrize("weighted", (False, True), ids=("unweighted", "with-zeros"))
@pytest.mark.parametrize("dtype", LABEL_RANK_DTYPES, ids=lambda d: np.dtype(d).name)
def test_label_rank_kernels_equal_reference(case, launches, rng, dtype, weighted):
    """Every label's ROC AUC, partial AUC and average precision from the same
    launches of kernels/ranking.cu (a segment per label) equal the NumPy
    reference, one binary scan per label: labels of distinct scores, of tie
    groups across tiles and of one score, a label without positives and one
    of positives only (NaN AUC; AP 0 and 1). Unweighted scores of at most 32
    bits sort one 64-bit key per cell and read the sorted keys in place;
    others argsort each label's scores (one call) and gather."""
    n = 2 * _rank_tile(case) + 37  # a partial last tile in every segment
    columns = [_rank_case(rng, n, dtype, layout) for layout in RANK_LAYOUTS]
    scores = np.stack([column[0] for column in columns] + [columns[0][0], columns[1][0]],
                      axis=1)
    relevant = np.stack([column[1] for column in columns] + [np.zeros(n, bool),
                                                             np.ones(n, bool)], axis=1)
    weight = _weights(rng, n, "with-zeros") if weighted else None
    for max_fpr in (None, 0.3):
        with np.errstate(divide="ignore", invalid="ignore"):
            expected = NUMPY_BACKEND.label_rank_areas(scores, relevant, weight, max_fpr)
        got = case.impl.label_rank_areas(case.put(scores), case.put(relevant), case.put(weight),
                                         max_fpr)
        np.testing.assert_allclose(case.get(got), expected, rtol=RTOL, atol=1e-15,
                                   equal_nan=True)
    packed = not weighted and np.dtype(dtype).itemsize <= 4
    path = (["rank_pack_label_keys", "rank_label_key_tiles", "rank_tile_scan",
             "rank_label_key_areas"] if packed else ["rank_gather", "rank_tile_scan", "rank_areas"]
            ) + ["rank_finish"]
    assert [launch.kernel for launch in launches] == path * 2
    tiles, labels = -(-n // _rank_tile(case)), scores.shape[1]
    assert [launch.grid for launch in launches[len(path) - 4:len(path)]] == [
        labels * tiles, labels, labels * tiles, labels]


def test_tile_scan_takes_tiles_in_chunks_of_the_block(case, launches, rng):
    """rank_tile_scan scans a segment of more tiles than the block has
    threads in chunks, carrying the sums and the last group head from one
    chunk to the next (tie groups across the chunks' edges): the areas of
    two labels of 2.5 blocks' worth of tiles equal the reference."""
    block = min(case.device.block_threads, 256)
    n = (5 * block // 2) * _rank_tile(case) + 3
    scores = rng.integers(0, 40, (n, 2)).astype(np.float64)
    relevant = rng.random((n, 2)) < 0.3
    weight = rng.random(n)
    for sample_weight in (None, weight):
        expected = NUMPY_BACKEND.label_rank_areas(scores, relevant, sample_weight)
        got = case.impl.label_rank_areas(case.put(scores), case.put(relevant),
                                         case.put(sample_weight))
        np.testing.assert_allclose(case.get(got), expected, rtol=RTOL, atol=1e-15)
    assert [launch.grid for launch in launches if launch.kernel == "rank_tile_scan"] == [2, 2]


@pytest.mark.parametrize("weighted", (False, True), ids=("unweighted", "weighted"))
def test_label_rank_areas_in_chunks_of_labels(case, launches, monkeypatch, rng, weighted):
    """Past LABEL_RANK_CELLS cells the labels go in chunks of whole labels
    (bounded temporaries): 7 labels in chunks of 3 equal the reference, with
    the passes launched once per chunk."""
    from metrics_gpu.backends.launchers import ranking as ranking_launchers
    n = 300
    monkeypatch.setattr(ranking_launchers, "LABEL_RANK_CELLS", 3 * n)
    scores = rng.integers(0, 30, (n, 7)).astype(np.float32)
    relevant = rng.random((n, 7)) < 0.3
    weight = rng.random(n) if weighted else None
    expected = NUMPY_BACKEND.label_rank_areas(scores, relevant, weight)
    got = case.impl.label_rank_areas(case.put(scores), case.put(relevant), case.put(weight))
    np.testing.assert_allclose(case.get(got), expected, rtol=RTOL, atol=1e-15)
    assert [launch.grid for launch in launches if launch.kernel == "rank_finish"] == [3, 3, 1]


def test_label_rank_areas_reject_mismatched_arrays(case):
    put = case.put
    with pytest.raises(ValueError, match="must be \\(N, L\\) alike"):
        case.impl.label_rank_areas(put(np.zeros((5, 2))), put(np.zeros((5, 3), bool)))
    with pytest.raises(ValueError, match="sample_weight must have shape \\(5,\\)"):
        case.impl.label_rank_areas(put(np.zeros((5, 2))), put(np.zeros((5, 2), bool)),
                                   put(np.ones(4)))


@pytest.mark.parametrize("weighted", (False, True), ids=("unweighted", "weighted"))
@pytest.mark.parametrize("function", [roc_auc_score, average_precision_score],
                         ids=lambda f: f.__name__)
def test_multilabel_areas_take_the_same_launches_for_any_number_of_labels(backend, rng,
                                                                          function, weighted):
    """Per-label multilabel ROC AUC and average precision equal scikit-learn's
    (tied scores, weights, a label without positives, one of positives
    only), and on a kernel backend 2 and 9 labels take the same launches
    and read-backs: every label in one segmented pass, not a loop."""
    n = 300
    seen = []
    for num_labels in (2, 9):
        y = rng.random((n, num_labels)) < 0.3
        y[:, 0], y[:, 1] = False, True
        s = rng.integers(0, 20, (n, num_labels)).astype(np.float32)
        w = rng.random(n) if weighted else None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with operation_counter() as counts:
                ours = function(*_put(backend, y, s), sample_weight=_put(backend, w)[0],
                                average=None)
            reference = getattr(skm, function.__name__)(y, s, sample_weight=w, average=None)
        _assert_value(backend, ours, reference)
        seen.append((counts.launches, counts.host_transfers))
    if backend.name != "numpy":
        assert seen[0] == seen[1]


def _exact_auc(scores, is_positive) -> Fraction:
    """The unweighted ROC AUC as a fraction: P(positive > negative) + half the ties."""
    order = np.argsort(-scores.astype(np.float64), kind="stable")
    ranked, positive = scores[order], is_positive[order]
    ends = np.flatnonzero(np.append(ranked[1:] != ranked[:-1], True))
    tps, fps = np.cumsum(positive)[ends], np.cumsum(~positive)[ends]
    twice = sum(int(f1 - f0) * int(t1 + t0) for f0, f1, t0, t1
                in zip(np.append(0, fps[:-1]), fps, np.append(0, tps[:-1]), tps))
    return Fraction(twice, 2 * int(tps[-1]) * int(fps[-1]))


@pytest.mark.parametrize("layout", ("distinct", "groups-across-tiles"))
@pytest.mark.parametrize("dtype", (np.float32, np.float64), ids=lambda d: np.dtype(d).name)
def test_unweighted_roc_area_is_exact(case, rng, dtype, layout):
    """Unweighted, rank_areas sums the trapezoids as 128-bit integers of counts
    and the host divides once: with 2 P Q and the doubled area below 2^53
    (both exact in float64) the AUC is the exact fraction correctly rounded,
    at several tiles of many tie groups (packed keys for float32, the gather
    for float64). Summing rounded trapezoids misses it by an ulp or more."""
    n = 5 * _rank_tile(case) + 11
    scores, is_positive = _rank_case(rng, n, dtype, layout)
    exact = _exact_auc(scores, is_positive)
    positives = int(is_positive.sum())
    assert 2 * positives * (n - positives) < 2 ** 53
    got = float(case.get(case.impl.binary_rank_areas(case.put(scores), case.put(is_positive)))[0])
    assert got == float(exact)


@pytest.mark.parametrize("n_offset", (-1, 0, 1))
def test_rank_kernels_at_tile_edges_and_degenerate_classes(case, rng, n_offset):
    """Inputs of a tile +- 1 and of one sample; all positive or all negative
    (AUC NaN, AP 1 or 0 as the reference); all weight zero on one side."""
    from metrics_gpu.backends.numpy_backend import NUMPY_BACKEND
    n = _rank_tile(case) + n_offset
    scores = np.round(rng.random(n), 2)
    for is_positive, weight in [
        (rng.random(n) < 0.5, None),
        (np.ones(n, bool), None),
        (np.zeros(n, bool), rng.random(n)),
        (rng.random(n) < 0.5, np.where(rng.random(n) < 0.5, 0.0, 1.0) * (rng.random(n) < 0.5)),
        (np.array([True]), None),
    ]:
        values = scores[:is_positive.shape[0]]
        expected = NUMPY_BACKEND.binary_rank_areas(values, is_positive, weight)
        got = case.impl.binary_rank_areas(case.put(values), case.put(is_positive),
                                          case.put(weight))
        np.testing.assert_allclose(case.get(got), expected, rtol=RTOL, atol=1e-15)


def test_rank_reference_matches_a_hand_count():
    """The reference against the pair count: P(pos > neg) + ½ P(tie), weighted,
    and AP as Σ (ΔR) P over the distinct thresholds, worked by hand."""
    from metrics_gpu.backends.numpy_backend import NUMPY_BACKEND
    scores = np.array([0.9, 0.8, 0.8, 0.5, 0.5, 0.1])
    is_positive = np.array([True, False, True, True, False, False])
    weight = np.array([1.0, 2.0, 1.0, 1.0, 1.0, 3.0])
    # Positive weight 3, negative weight 6. Pairs: 0.9 beats all 6; 0.8+ beats
    # 0.5- and 0.1- (4) and ties 0.8- (2 x ½); 0.5+ beats 0.1- (3), ties 0.5- (½).
    auc = (6 + 4 + 1 + 3 + 0.5) / (3 * 6)
    # Thresholds 0.9, 0.8, 0.5: recall 1/3, 2/3, 1; precision 1, 2/4, 3/6.
    ap = (1 / 3) * 1 + (1 / 3) * (2 / 4) + (1 / 3) * (3 / 6)
    got = NUMPY_BACKEND.binary_rank_areas(scores, is_positive, weight)
    np.testing.assert_allclose(got, [auc, ap], rtol=RTOL)


def test_rank_areas_reject_empty_and_mismatched_arrays(case):
    """A kernel sized from one array must never read past another."""
    from metrics_gpu.backends.numpy_backend import NUMPY_BACKEND
    for backend, put in ((NUMPY_BACKEND, np.asarray), (case.impl, case.put)):
        with pytest.raises(ValueError, match="scores must be"):
            backend.binary_rank_areas(put(np.zeros(0)), put(np.zeros(0, bool)))
        with pytest.raises(ValueError, match="is_positive must have shape"):
            backend.binary_rank_areas(put(np.zeros(5)), put(np.zeros(4, bool)))
        with pytest.raises(ValueError, match="sample_weight must have shape"):
            backend.binary_rank_areas(put(np.zeros(5)), put(np.zeros(5, bool)), put(np.ones(6)))


def test_exact_float64_widens_subnormals_from_their_bits():
    """The bit path roc_curve takes for float32 thresholds on a GPU (CuPy's own
    float32 -> float64 conversion flushes subnormals to 0): equal to NumPy's
    exact conversion on every class of float32, subnormals of both signs, -0,
    the extremes, infinities and NaN."""
    from metrics_gpu._functional.ranking import exact_float64

    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**32, 20_000, dtype=np.uint64).astype(np.uint32)
    bits[:4000] &= np.uint32(0x807FFFFF)  # subnormals and zeros, both signs
    special = np.array([0, 0x80000000, 1, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00800000,
                        0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000],
                       dtype=np.uint32)
    values = np.concatenate([special, bits]).view(np.float32)
    values = np.where(np.isnan(values), np.float32(np.nan), values)  # quiet NaN only
    assert np.count_nonzero((values != 0) & (np.abs(values) < np.finfo(np.float32).tiny)) > 3000
    widened = exact_float64(values, np, from_bits=True)
    assert widened.dtype == np.float64
    np.testing.assert_array_equal(widened, values.astype(np.float64))
    assert np.array_equal(np.signbit(widened), np.signbit(values))
