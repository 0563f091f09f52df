"""Parity with scikit-learn for every label metric of the functional API.

scikit-learn is the reference: every case computes the same metric with
``sklearn.metrics`` on host arrays (``labels=np.arange(K)`` where we pass
``num_classes=K``; the filtered arrays where we pass ``ignore_index``; the row
argmax where we pass ``(N, K)`` scores) and compares

* float results to ``rtol=1e-12`` (``atol=1e-14`` only for correlation-type
  values, MCC and kappa, whose zero comes from cancellation),
* counts (confusion matrices, supports) exactly, dtype included: int64 without
  weights or with integer weights, float64 with float weights. Sums of
  arbitrary float weights depend on summation order, so those are compared to
  ``rtol=1e-12``; dyadic weights (multiples of 1/8) sum exactly in any order
  and are compared exactly,
* ``UndefinedMetricWarning`` messages: ours must be emitted exactly when
  scikit-learn's are, with the same text for precision/recall/F/Jaccard.
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest
import sklearn.metrics as skm
from sklearn.exceptions import UndefinedMetricWarning as SkUndefinedMetricWarning

import metrics_gpu as mg

RTOL = 1e-12
# MCC and kappa are differences of nearly equal sums: near 0 only an absolute
# tolerance is meaningful.
ATOL_CANCELLATION = 1e-14

KS = (2, 3, 10, 100)
# K = 100 parity cases cost 1-2 s each on the emulator: there the fast tier's
# K = 100 cases (every parameter value once, so every kernel path of K = 100:
# the weighted matrix past 48 KiB goes to global atomics) run, and their
# reruns (other data with the same instantiations, 1.5 min of CI) do not; on
# numpy every case runs.
pytestmark = pytest.mark.no_emulated_reruns("k", (100,))
WEIGHTS = ("unweighted", "float", "int", "with-zeros")
AVERAGES = (None, "micro", "macro", "weighted")
ZERO_DIVISIONS = ("warn", 0.0, 1.0, np.nan)
CLASS_SETS = ("present", "num_classes")
KAPPA_WEIGHTS = (None, "linear", "quadratic")


def _k_id(k):
    return f"K={k}"


def _average_id(average):
    return "per-class" if average is None else str(average)


def _zd_id(value):
    return f"zd={value}"


# -- data ------------------------------------------------------------------


def class_frequencies(rng, k, distribution):
    if distribution == "uniform":
        return np.full(k, 1.0 / k)
    if distribution == "dirichlet":
        freq = rng.dirichlet(np.full(k, 0.4))
    elif distribution == "zipf":
        freq = rng.permutation(1.0 / np.arange(1, k + 1) ** 1.2)
    else:
        raise AssertionError(distribution)
    freq = np.maximum(freq, 1e-12)
    return freq / freq.sum()


def _drop_classes(rng, values, dropped, k):
    kept = np.setdiff1d(np.arange(k), dropped)
    hit = np.isin(values, dropped)
    values = values.copy()
    values[hit] = rng.choice(kept, size=int(hit.sum()))
    return values


def make_labels(rng, k, n=None, *, distribution="dirichlet", missing="none", hit_rate=0.6):
    """Correlated (y_true, y_pred) int64 codes in [0, k).

    ``missing``: 'none'; 'true' / 'pred' / 'both' (some classes never occur in
    y_true / y_pred / either); 'mixed' (disjoint sets of each kind).
    """
    if n is None:
        n = int(rng.integers(max(50, 20 * k), min(3000, 40 * k) + 1))
    y_true = rng.choice(k, size=n, p=class_frequencies(rng, k, distribution))
    noise = rng.choice(k, size=n, p=class_frequencies(rng, k, distribution))
    y_pred = np.where(rng.random(n) < hit_rate, y_true, noise)
    m = max(1, k // 5)
    order = rng.permutation(k)
    if missing == "none":
        pass
    elif missing == "true":
        y_true = _drop_classes(rng, y_true, order[:m], k)
    elif missing == "pred":
        y_pred = _drop_classes(rng, y_pred, order[:m], k)
    elif missing == "both":
        y_true = _drop_classes(rng, y_true, order[:m], k)
        y_pred = _drop_classes(rng, y_pred, order[:m], k)
    elif missing == "mixed":
        if k == 2:  # a class never predicted: the only zero division binary data has
            y_pred = _drop_classes(rng, y_pred, order[:1], k)
        else:
            # k = 3: no class absent from both, so that some samples can still agree
            only_true, only_pred = order[:m], order[m:2 * m]
            both = order[2 * m:3 * m] if 3 * m < k else order[:0]
            y_true = _drop_classes(rng, y_true, np.concatenate([only_true, both]), k)
            y_pred = _drop_classes(rng, y_pred, np.concatenate([only_pred, both]), k)
    else:
        raise AssertionError(missing)
    return y_true.astype(np.int64), y_pred.astype(np.int64)


def make_weights(rng, kind, n):
    if kind == "unweighted":
        return None
    if kind == "float":
        return rng.uniform(0.05, 3.0, n)
    if kind == "int":
        return rng.integers(0, 6, n)  # zeros included
    if kind == "with-zeros":  # dyadic floats with ~30% exact zeros: sums are exact
        weights = rng.integers(1, 17, n) / 8.0
        weights[rng.random(n) < 0.3] = 0.0
        return weights
    raise AssertionError(kind)


def count_dtype(weights):
    if weights is None or np.asarray(weights).dtype.kind in "iub":
        return np.dtype(np.int64)
    return np.dtype(np.float64)


def support_dtype(weights):
    """Supports of precision_recall_fscore_support: float64 with any
    sample_weight, integer weights included (scikit-learn's dtype, which the
    report prints: "204.0"); int64 without weights."""
    return np.dtype(np.int64 if weights is None else np.float64)


def counts_exact(weight_kind):
    return weight_kind != "float"


def class_kwargs(class_set, k):
    """(our kwargs, scikit-learn kwargs) selecting the class set."""
    if class_set == "num_classes":
        return {"num_classes": k}, {"labels": np.arange(k)}
    return {}, {}


# -- calling and comparing -----------------------------------------------------


def sk_jaccard(y_true, y_pred, *, zero_division="warn", average="binary", labels=None,
               pos_label=1, sample_weight=None):
    """scikit-learn's jaccard_score, extended to ``zero_division=np.nan``.

    scikit-learn accepts NaN for precision/recall/F but not for Jaccard. The
    undefined entries are those where its zero_division=0 and =1 results
    differ; they become NaN and drop out of the averages, as NaN does in
    scikit-learn's other set-wise metrics.
    """
    kw = dict(labels=labels, pos_label=pos_label, sample_weight=sample_weight)
    if not (isinstance(zero_division, float) and math.isnan(zero_division)):
        return skm.jaccard_score(y_true, y_pred, average=average,
                                 zero_division=zero_division, **kw)
    if average in ("micro", "binary"):
        low = skm.jaccard_score(y_true, y_pred, average=average, zero_division=0.0, **kw)
        high = skm.jaccard_score(y_true, y_pred, average=average, zero_division=1.0, **kw)
        return low if low == high else math.nan
    low = skm.jaccard_score(y_true, y_pred, average=None, zero_division=0.0, **kw)
    high = skm.jaccard_score(y_true, y_pred, average=None, zero_division=1.0, **kw)
    per_class = np.where(low == high, low, np.nan)
    if average is None:
        return per_class
    keep = ~np.isnan(per_class)
    if not keep.any():
        return math.nan
    if average == "weighted":
        support = skm.precision_recall_fscore_support(
            y_true, y_pred, average=None, zero_division=0.0, labels=labels,
            sample_weight=sample_weight)[3]
        if support[keep].sum() != 0:
            return float(np.average(per_class[keep], weights=support[keep]))
    return float(np.mean(per_class[keep]))



def put(backend, *arrays):
    return tuple(None if a is None else backend.asarray(a) for a in arrays)


def sk_call(function, *args, **kwargs):
    """scikit-learn's result and its UndefinedMetricWarning / UserWarning messages."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = function(*args, **kwargs)
    undefined = {str(w.message) for w in caught if issubclass(w.category, SkUndefinedMetricWarning)}
    user = {
        str(w.message) for w in caught
        if w.category is UserWarning
        and not str(w.message).startswith("A single label was found")
    }
    return result, undefined, user


def our_call(expected_undefined, function, *args, compare_text=True, expected_user=None,
             **kwargs):
    """Call ours; its UndefinedMetricWarnings must match scikit-learn's.

    ``compare_text``: the message set must equal scikit-learn's (P/R/F/Jaccard,
    whose texts we reproduce); otherwise only "warned or not" must agree.
    ``expected_user``: if given, our plain UserWarnings must equal it.
    """
    if expected_undefined:
        with pytest.warns(mg.UndefinedMetricWarning) as record:
            warnings.simplefilter("always")
            result = function(*args, **kwargs)
        caught = list(record)
    else:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = function(*args, **kwargs)
    undefined = {
        str(w.message) for w in caught if issubclass(w.category, mg.UndefinedMetricWarning)
    }
    if compare_text:
        assert undefined == expected_undefined
    else:
        assert bool(undefined) == bool(expected_undefined), undefined
    if expected_user is not None:
        user = {str(w.message) for w in caught if w.category is UserWarning}
        assert user == expected_user
    return result


def assert_float(backend, ours, expected, *, atol=0.0):
    """A float64 result (scalar or per-class array) equal to scikit-learn's."""
    value = backend.to_numpy(ours)
    expected = np.asarray(expected, dtype=np.float64)
    if backend.name == "numpy":
        if expected.ndim == 0:
            assert type(ours) is np.float64, type(ours)
        else:
            assert isinstance(ours, np.ndarray), type(ours)
    assert value.dtype == np.float64
    assert value.shape == expected.shape
    np.testing.assert_allclose(value, expected, rtol=RTOL, atol=atol, equal_nan=True)


def assert_counts(backend, ours, expected, *, dtype, exact=True):
    """Counts equal to scikit-learn's, with the dtype we promise."""
    value = backend.to_numpy(ours)
    expected = np.asarray(expected)
    assert value.dtype == dtype, (value.dtype, dtype)
    assert value.shape == expected.shape
    if exact:
        np.testing.assert_array_equal(value, expected)
    else:
        np.testing.assert_allclose(value, expected, rtol=RTOL)


def assert_report_dict(ours, expected):
    assert list(ours) == list(expected)
    for key, value in expected.items():
        if isinstance(value, dict):
            assert list(ours[key]) == list(value), key
            for column, number in value.items():
                assert type(ours[key][column]) is float, (key, column)
                np.testing.assert_allclose(
                    ours[key][column], number, rtol=RTOL, equal_nan=True, err_msg=f"{key}/{column}"
                )
        else:
            assert type(ours[key]) is float, key
            np.testing.assert_allclose(ours[key], value, rtol=RTOL, equal_nan=True, err_msg=key)


# -- confusion matrix ---------------------------------------------------------


@pytest.mark.parametrize("class_set", CLASS_SETS)
@pytest.mark.parametrize("missing", ("none", "true", "pred", "both"), ids=lambda m: f"missing={m}")
@pytest.mark.parametrize("weight_kind", WEIGHTS)
@pytest.mark.parametrize("k", KS, ids=_k_id)
def test_confusion_matrix(backend, rng, k, weight_kind, missing, class_set):
    y_true, y_pred = make_labels(rng, k, missing=missing, distribution="zipf")
    weights = make_weights(rng, weight_kind, y_true.size)
    ours_kw, sk_kw = class_kwargs(class_set, k)
    t, p, w = put(backend, y_true, y_pred, weights)

    expected, _, _ = sk_call(skm.confusion_matrix, y_true, y_pred, sample_weight=weights, **sk_kw)
    ours = mg.confusion_matrix(t, p, sample_weight=w, **ours_kw)
    assert_counts(backend, ours, expected, dtype=count_dtype(weights),
                  exact=counts_exact(weight_kind))

    for normalize in ("true", "pred", "all"):
        expected, _, _ = sk_call(skm.confusion_matrix, y_true, y_pred, sample_weight=weights,
                                 normalize=normalize, **sk_kw)
        ours = mg.confusion_matrix(t, p, sample_weight=w, normalize=normalize, **ours_kw)
        assert_float(backend, ours, expected)


@pytest.mark.parametrize("normalize", (None, "true", "pred", "all"), ids=lambda n: f"normalize={n}")
@pytest.mark.parametrize(
    "labels_kind", ("subset", "reversed", "shuffled", "with-absent", "beyond-data")
)
@pytest.mark.parametrize("k", (3, 10, 100), ids=_k_id)
def test_confusion_matrix_labels(backend, rng, k, labels_kind, normalize):
    y_true, y_pred = make_labels(rng, k, missing="both")
    weights = make_weights(rng, "float", y_true.size)
    labels = _labels_argument(rng, k, y_true, y_pred, labels_kind)
    t, p, w = put(backend, y_true, y_pred, weights)
    for sample_weight, wb in ((None, None), (weights, w)):
        expected, _, _ = sk_call(skm.confusion_matrix, y_true, y_pred, labels=labels,
                                 sample_weight=sample_weight, normalize=normalize)
        ours = mg.confusion_matrix(t, p, labels=labels, sample_weight=wb, normalize=normalize)
        if normalize is None:
            assert_counts(backend, ours, expected, dtype=count_dtype(sample_weight),
                          exact=sample_weight is None)
        else:
            assert_float(backend, ours, expected)


def test_confusion_matrix_labels_not_in_y_true(backend):
    y_true, y_pred = np.array([0, 1, 1, 2]), np.array([3, 3, 0, 1])
    with pytest.raises(ValueError, match="At least one label specified must be in y_true"):
        skm.confusion_matrix(y_true, y_pred, labels=[3])
    t, p = put(backend, y_true, y_pred)
    with pytest.raises(ValueError, match="At least one label specified must be in y_true"):
        mg.confusion_matrix(t, p, labels=[3])


# -- counting metrics ---------------------------------------------------------

SCENARIOS = (
    ("uniform", "none"), ("zipf", "true"), ("dirichlet", "pred"), ("uniform", "both"),
    ("dirichlet", "mixed"),
)


def _scenario_id(scenario):
    return f"{scenario[0]}-missing={scenario[1]}"


@pytest.mark.parametrize("class_set", CLASS_SETS)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=_scenario_id)
@pytest.mark.parametrize("weight_kind", WEIGHTS)
@pytest.mark.parametrize("k", KS, ids=_k_id)
def test_counting_metrics(backend, rng, k, weight_kind, scenario, class_set):
    distribution, missing = scenario
    y_true, y_pred = make_labels(rng, k, distribution=distribution, missing=missing)
    weights = make_weights(rng, weight_kind, y_true.size)
    ours_kw, sk_kw = class_kwargs(class_set, k)
    t, p, w = put(backend, y_true, y_pred, weights)

    for normalize in (True, False):
        expected = skm.accuracy_score(y_true, y_pred, normalize=normalize, sample_weight=weights)
        assert_float(backend, mg.accuracy_score(t, p, normalize=normalize, sample_weight=w,
                                                **ours_kw), expected)
        # A loss of 0 is a difference of equal weight sums: absolute tolerance there.
        scale = 1.0 if normalize or weights is None else float(np.sum(weights))
        expected = skm.zero_one_loss(y_true, y_pred, normalize=normalize, sample_weight=weights)
        assert_float(backend, mg.zero_one_loss(t, p, normalize=normalize, sample_weight=w,
                                               **ours_kw), expected,
                     atol=ATOL_CANCELLATION * scale)
    expected = skm.hamming_loss(y_true, y_pred, sample_weight=weights)
    assert_float(backend, mg.hamming_loss(t, p, sample_weight=w, **ours_kw), expected,
                 atol=ATOL_CANCELLATION)

    for adjusted in (False, True):
        expected, _, user = sk_call(skm.balanced_accuracy_score, y_true, y_pred,
                                    sample_weight=weights, adjusted=adjusted)
        ours = our_call(set(), mg.balanced_accuracy_score, t, p, sample_weight=w,
                        adjusted=adjusted, expected_user=user, **ours_kw)
        assert_float(backend, ours, expected, atol=ATOL_CANCELLATION if adjusted else 0.0)

    expected = skm.matthews_corrcoef(y_true, y_pred, sample_weight=weights)
    assert_float(backend, mg.matthews_corrcoef(t, p, sample_weight=w, **ours_kw), expected,
                 atol=ATOL_CANCELLATION)

    for kappa_weights in KAPPA_WEIGHTS:
        expected, undefined, _ = sk_call(skm.cohen_kappa_score, y_true, y_pred,
                                         weights=kappa_weights, sample_weight=weights, **sk_kw)
        ours = our_call(undefined, mg.cohen_kappa_score, t, p, weights=kappa_weights,
                        sample_weight=w, compare_text=False, **ours_kw)
        assert_float(backend, ours, expected, atol=ATOL_CANCELLATION)


KAPPA_UNDEFINED_CASES = {
    # y1 == y2 == one class: kappa 0/0
    "constant-agreeing": ([3] * 20, [3] * 20, None, {}),
    # the same where s - s * s / s rounds to 5.6e-17 instead of 0
    "constant-agreeing-float-weight": ([0], [0], [0.43], {}),
    # one class at position 3 of num_classes=4, float weights: the quadratic
    # expected disagreement must still be exactly 0
    "one-class-at-position-3-float-weights": ([3, 3], [3, 3], [0.1, 0.2], {"num_classes": 4}),
    "one-class-at-position-6-labels-float-weights": (
        [6, 6], [6, 6], [0.1, 0.2], {"labels": list(range(7))}),
    # no sample survives labels=: kappa 0/0
    "labels-disjoint-from-y2": ([0, 1, 2, 0], [3, 3, 3, 3], None, {"labels": [0, 1]}),
    # weighted kappa's expected disagreement is 0
    "one-class-in-common": ([0, 0, 1, 2], [0, 0, 3, 3], None, {"labels": [0, 1]}),
}


@pytest.mark.parametrize("case", KAPPA_UNDEFINED_CASES)
@pytest.mark.parametrize("replace", (np.nan, 0.0, -1.0), ids=lambda r: f"replace={r}")
def test_cohen_kappa_undefined(backend, case, replace):
    y1, y2, weights, ours_kw = KAPPA_UNDEFINED_CASES[case]
    y1, y2 = np.array(y1), np.array(y2)
    weights = None if weights is None else np.array(weights)
    _, sk_kw = class_kwargs("num_classes", ours_kw["num_classes"]) if "num_classes" in ours_kw \
        else (None, dict(ours_kw))
    t, p, w = put(backend, y1, y2, weights)
    for kappa_weights in KAPPA_WEIGHTS:
        expected, undefined, _ = sk_call(skm.cohen_kappa_score, y1, y2, weights=kappa_weights,
                                         replace_undefined_by=replace, sample_weight=weights,
                                         **sk_kw)
        assert undefined  # these cases are undefined for scikit-learn
        ours = our_call(undefined, mg.cohen_kappa_score, t, p, weights=kappa_weights,
                        replace_undefined_by=replace, sample_weight=w, compare_text=False,
                        **ours_kw)
        assert_float(backend, ours, expected)


@pytest.mark.parametrize("kappa_weights", ("linear", "quadratic"))
@pytest.mark.parametrize("case", (
    "one-true-class-K=100",
    # Emulated: the exhaustive tier's (a minute on the emulator: the 2000 x 2000
    # matrix's reduction; its instantiations are the K = 100 case's).
    pytest.param("ordinal-top-codes-K=2000", marks=pytest.mark.exhaustive_on_emulated)))
def test_cohen_kappa_weighted_high_codes_float_weights(backend, rng, case, kappa_weights):
    """Weighted kappa when the classes in use have high codes (positions).

    The chance-expected disagreement must not lose precision to cancellation
    between terms of size total**2 * K**2 (scikit-learn sums w_ij t_i p_j / s
    directly and is exact to a few ulps)."""
    if case == "one-true-class-K=100":
        k, y_true, y_pred = 100, np.array([99, 99]), np.array([98, 99])
        weights = np.array([0.01, 1.0])
    else:
        k, n = 2000, 300
        y_true = rng.integers(k - 10, k, n)
        y_pred = np.clip(y_true + rng.integers(-1, 2, n), 0, k - 1)
        weights = rng.uniform(0.01, 10.0, n)
    expected = skm.cohen_kappa_score(y_true, y_pred, weights=kappa_weights,
                                     sample_weight=weights, labels=np.arange(k))
    t, p, w = put(backend, y_true, y_pred, weights)
    ours = mg.cohen_kappa_score(t, p, weights=kappa_weights, sample_weight=w, num_classes=k)
    assert_float(backend, ours, expected, atol=ATOL_CANCELLATION)


# One class holds nearly all the weight, and a misclassified weight lies below
# the rounding of that class's float64 counts (weights 2**53 or more apart, or
# a subnormal one): (y1, y2, sample_weight). Found by the long fuzz profile
# (2026-11-26). scikit-learn and the exact value: kappa 0 for every weighting.
KAPPA_ABSORBED_CASES = {
    "below-the-true-class-count": ([0, 0], [0, 1], [1e17, 1.0]),
    "below-the-predicted-class-count": ([0, 1], [0, 0], [1e17, 1.0]),
    "integer-weights": ([0, 0], [0, 1], np.array([10**17, 1], dtype=np.int64)),
    "subnormal-weight": ([0, 0], [0, 1], [1.0, 3.6e-44]),
    # weights lost in both a row and a column of the dominant class: sums of
    # non-negative terms over the statistics give 1/3, the information is gone
    "both-directions": ([2, 2, 2, 0], [2, 2, 0, 2], [1e18, 1e18, 1.0, 2.0]),
}
# K beyond the dense matrix: the per-class statistics path (class_statistics).
STATISTICS_PATH_K = 3000


def _stream_report(y1, y2, weights, num_classes):
    """The report of a ClassificationMetrics fed one batch (on the active backend)."""
    metrics = mg.ClassificationMetrics(num_classes)
    metrics.update(y1, y2, weights)
    return metrics.compute()


@pytest.mark.parametrize("kappa_weights", KAPPA_WEIGHTS, ids=lambda w: f"weights={w}")
@pytest.mark.parametrize("case", KAPPA_ABSORBED_CASES)
def test_cohen_kappa_when_one_class_absorbs_the_disagreement(backend, case, kappa_weights):
    """The float64 support, predicted and total counts of the dominant class
    absorb a misclassified weight below their rounding, so s - sum(tp) and the
    expected disagreement (s s - t.p, or the linear gaps about the totals)
    cancelled to 0: NaN or -inf with a RuntimeWarning (an error here). The
    counting pass now sums w [t != p] itself, and the expected disagreements
    are sums of non-negative terms: on the dense path, the per-class
    statistics path and the stream alike."""
    y1, y2, weights = (np.asarray(v) for v in KAPPA_ABSORBED_CASES[case])
    expected = skm.cohen_kappa_score(y1, y2, weights=kappa_weights, sample_weight=weights)
    assert expected == 0.0
    t, p, w = put(backend, y1, y2, weights)
    for num_classes in (None, STATISTICS_PATH_K):
        ours = mg.cohen_kappa_score(t, p, weights=kappa_weights, sample_weight=w,
                                    num_classes=num_classes)
        assert_float(backend, ours, expected, atol=1e-12)
    slot = {None: "cohen_kappa", "linear": "linear_weighted_kappa",
            "quadratic": "quadratic_weighted_kappa"}[kappa_weights]
    report = _stream_report(t, p, w, 3)
    assert abs(float(backend.to_numpy(report[slot])) - expected) <= 1e-12, slot


# Weights at the ends of float64, where a product of two weights overflows to
# inf or underflows to 0: (y1, y2, weights). The first is the long fuzz run's
# (2026-11-26, after the fixes above): every weight 0 but a subnormal one,
# where t_0 p_1 / s underflowed and kappa was 1 - x/0 (-inf, a RuntimeWarning).
EXTREME_WEIGHT_CASES = {
    "one-subnormal-weight": ([0] * 8, [0, 0, 0, 0, 1, 0, 0, 0], [0.0] * 4 + [5e-324] + [0.0] * 3),
    "subnormal-weights": ([0, 1, 2, 0, 1, 2], [0, 1, 1, 2, 2, 0], [3e-320, 5e-324, 1e-321,
                                                                   2e-322, 7e-323, 4e-319]),
    "tiny-weights": ([0, 1, 2, 0, 1, 2], [0, 1, 1, 2, 2, 0], [3e-300, 1e-310, 2e-305, 1e-300,
                                                              5e-301, 7e-302]),
    # the total stays finite (2.4e307); its square and t_i p_j do not
    "huge-weights": ([0, 1, 2, 0, 1, 2, 0], [0, 1, 1, 2, 2, 0, 0], [1e300, 3e305, 1e307, 2e300,
                                                                    5e306, 1e299, 9e306]),
}


@pytest.mark.parametrize("case", EXTREME_WEIGHT_CASES)
def test_kappa_and_mcc_at_the_ends_of_float64(backend, case):
    """Kappa (every weighting) and MCC against their exact values (rational
    arithmetic) where products of two weights leave float64: the pair sums
    are now taken on weights scaled by the total's power of two (exactly), as
    both metrics are unchanged by scaling the weights. Dense path, statistics
    path and stream."""
    from fractions import Fraction

    from test_fuzz import exact_cohen_kappa, exact_matthews_corrcoef

    y1, y2, weights = EXTREME_WEIGHT_CASES[case]
    rows = (y1, y2, [Fraction(w) for w in weights])
    labels = [0, 1, 2]
    kappas = {kw: exact_cohen_kappa(*rows, labels=labels, kappa_weights=kw)
              for kw in KAPPA_WEIGHTS}
    mcc = exact_matthews_corrcoef(*rows)
    t, p, w = put(backend, np.array(y1), np.array(y2), np.array(weights))
    for num_classes in (3, STATISTICS_PATH_K):
        for kw, exact in kappas.items():
            ours = mg.cohen_kappa_score(t, p, weights=kw, sample_weight=w, num_classes=num_classes)
            assert_float(backend, ours, exact, atol=1e-12)
        ours = mg.matthews_corrcoef(t, p, sample_weight=w, num_classes=num_classes)
        assert_float(backend, ours, mcc, atol=1e-12)
    report = _stream_report(t, p, w, 3)
    for kw, slot in ((None, "cohen_kappa"), ("linear", "linear_weighted_kappa"),
                     ("quadratic", "quadratic_weighted_kappa")):
        assert abs(float(backend.to_numpy(report[slot])) - kappas[kw]) <= 1e-12, slot
    assert abs(float(backend.to_numpy(report["matthews_corrcoef"])) - mcc) <= 1e-12


# MCC where one class holds nearly all the weight: (y_true, y_pred, weights,
# the exact value, tests/test_fuzz.py's rational referee). scikit-learn's
# c s - t.p and s^2 - sum p^2 lose the covariance and the variances to the
# dominant class's rounding and give 0 in the first three.
MCC_ABSORBED_CASES = {
    "fn-of-the-dominant-class": ([0, 0, 1], [0, 1, 1], [1e17, 1.0, 1.0], 0.7071067811865476),
    "three-classes": ([0, 0, 1, 2], [0, 1, 1, 2], [1e17, 1.0, 1.0, 1.0], 0.816496580927726),
    "fp-and-fn-of-other-classes": ([1, 1, 0, 2], [1, 2, 0, 1], [1e17, 1.0, 3.0, 2.0],
                                   0.6708203932499369),
    "both-directions": ([2, 2, 2, 0], [2, 2, 0, 2], [1e18, 1e18, 1.0, 2.0],
                        -7.071067811865475e-19),
    "constant-y_pred": ([0, 1], [0, 0], [1e17, 1.0], 0.0),
    # nearly all the weight misclassified (the long fuzz run of 2026-11-26):
    # here the pairs' form cancels (-1.0000000065) and c s - sum t p does not
    "misclassified-dominant": ([0, 1], [1, 0], [153391685.0, 1.0], -1.0),
    "misclassified-dominant-three-classes": ([0, 1, 2, 2], [1, 0, 2, 0],
                                             [1e17, 3.0, 2.0, 1.0], -0.41666666666666663),
    # exact integer counts where both forms' terms (about 1e28) cancel to a
    # covariance of -1.3e14: the full long fuzz run of 2026-11-26 (emulated;
    # scikit-learn -5.3508e-08); now each form is evaluated exactly
    "both-forms-cancel": ([0, 1, 0, 0, 0], [1, 0, 0, 0, 0],
                          [66645498172321.0, 1.0, 1191.0, 122021545197664.0, 2684354560.0],
                          -5.380359077652416e-08),
}


@pytest.mark.parametrize("case", MCC_ABSORBED_CASES)
def test_matthews_corrcoef_when_one_class_holds_nearly_all_weight(backend, case):
    """MCC against its exact value where the covariance c s - sum t p and the
    variances s^2 - sum p^2 cancel in float64 (0 where the exact value is
    0.71): now sums over pairs of unequal classes, and the misclassified
    weight of the counting pass. Dense path, statistics path and stream."""
    y_true, y_pred, weights, exact = MCC_ABSORBED_CASES[case]
    t, p, w = put(backend, np.array(y_true), np.array(y_pred), np.array(weights))
    for num_classes in (None, STATISTICS_PATH_K):
        ours = mg.matthews_corrcoef(t, p, sample_weight=w, num_classes=num_classes)
        assert abs(float(backend.to_numpy(ours)) - exact) <= 1e-12, num_classes
    report = _stream_report(t, p, w, 3)
    assert abs(float(backend.to_numpy(report["matthews_corrcoef"])) - exact) <= 1e-12


def test_specificity_of_a_class_without_negatives_float_weights(backend):
    """Every target 0 and float weights: class 0 has no negatives, so its
    specificity is the zero-division value. With negatives as total - support
    the stream, whose total is summed apart from the supports, gave
    tiny / tiny = 1.0 where label_report gave 0.0 (and on a GPU either,
    run to run). Negatives are now the other classes' supports: exactly 0."""
    weights = np.random.default_rng(20261126).uniform(0.01, 10.0, 20)
    y_true = np.zeros(20, dtype=np.int64)
    y_pred = y_true.copy()
    y_pred[3] = 1
    t, p, w = put(backend, y_true, y_pred, weights)
    report = _stream_report(t, p, w, 2)
    assert backend.to_numpy(report.per_class["specificity"])[0] == 0.0
    assert float(backend.to_numpy(report["macro_specificity"])) == pytest.approx(
        (weights.sum() - weights[3]) / weights.sum() / 2, rel=1e-12)
    assert mg.label_report(t, p, sample_weight=w).per_class["specificity"][0] == 0.0
    for zero_division in (0.0, 1.0):
        per_class = mg.specificity_score(t, p, sample_weight=w, average=None,
                                         zero_division=zero_division)
        assert backend.to_numpy(per_class)[0] == zero_division


MCC_UNDEFINED_CASES = {
    # one true class: the covariance of y_true with itself is 0
    "constant-y_true": ([1, 1, 1, 1, 1], [2, 1, 0, 0, 0], [0.09] * 5),
    # one predicted class
    "constant-y_pred": ([3, 0, 1, 2], [0, 0, 0, 0], [5.69, 5.19, 6.14, 8.78]),
    "constant-y_pred-equal-weights": ([3, 0, 2, 1, 1, 1, 2, 2, 2, 0, 3, 3, 1, 2, 0], [3] * 15,
                                      [8.77] * 15),
}


@pytest.mark.parametrize("case", MCC_UNDEFINED_CASES)
def test_matthews_corrcoef_undefined_float_weights(backend, case):
    """MCC is 0.0 when y_true or y_pred has one class, whatever the weights.

    Float weights must not turn the exact 0 of s**2 - sum(t**2) into a rounding
    residue (a tiny value, or NaN from the square root of a negative one)."""
    y_true, y_pred, weights = (np.array(v) for v in MCC_UNDEFINED_CASES[case])
    expected = skm.matthews_corrcoef(y_true, y_pred, sample_weight=weights)
    assert expected == 0.0
    t, p, w = put(backend, y_true, y_pred, weights)
    assert_float(backend, mg.matthews_corrcoef(t, p, sample_weight=w), expected,
                 atol=ATOL_CANCELLATION)


@pytest.mark.parametrize("weight_dtype", ("float", "int"))
def test_classes_present_only_with_zero_weight(backend, rng, weight_dtype):
    """scikit-learn counts a class as present whatever its samples' weight."""
    y_true = rng.integers(0, 3, 300)
    y_pred = np.where(rng.random(300) < 0.7, y_true, rng.integers(0, 3, 300))
    y_true[:5], y_pred[5:10] = 4, 6  # classes 4 and 6 only on zero-weight samples
    weights = rng.integers(1, 4, 300).astype(np.float64 if weight_dtype == "float" else np.int64)
    weights[:10] = 0
    t, p, w = put(backend, y_true, y_pred, weights)

    expected = skm.confusion_matrix(y_true, y_pred, sample_weight=weights)
    assert_counts(backend, mg.confusion_matrix(t, p, sample_weight=w), expected,
                  dtype=count_dtype(weights))
    for average in AVERAGES:
        expected, undefined, _ = sk_call(skm.precision_recall_fscore_support, y_true, y_pred,
                                         sample_weight=weights, average=average)
        ours = our_call(undefined, mg.precision_recall_fscore_support, t, p, sample_weight=w,
                        average=average)
        _assert_prfs(backend, ours, expected, support_dtype(weights))
    expected, _, user = sk_call(skm.balanced_accuracy_score, y_true, y_pred,
                                sample_weight=weights)
    assert user  # class 4 has no (weighted) support: scikit-learn warns
    ours = our_call(set(), mg.balanced_accuracy_score, t, p, sample_weight=w,
                    expected_user=user)
    assert_float(backend, ours, expected)
    for kappa_weights in KAPPA_WEIGHTS:
        expected = skm.cohen_kappa_score(y_true, y_pred, weights=kappa_weights,
                                         sample_weight=weights)
        assert_float(backend, mg.cohen_kappa_score(t, p, weights=kappa_weights, sample_weight=w),
                     expected, atol=ATOL_CANCELLATION)
    expected, _, _ = sk_call(skm.classification_report, y_true, y_pred, sample_weight=weights,
                             output_dict=True, zero_division=0)
    assert_report_dict(mg.classification_report(t, p, sample_weight=w, output_dict=True,
                                                zero_division=0), expected)


# -- precision, recall, F, Jaccard -----------------------------------------------


def _assert_prfs(backend, ours, expected, support_dtype, *, exact_support=True):
    for ours_value, expected_value in zip(ours[:3], expected[:3]):
        assert_float(backend, ours_value, expected_value)
    if expected[3] is None:
        assert ours[3] is None
    else:
        assert_counts(backend, ours[3], expected[3], dtype=support_dtype, exact=exact_support)


def _check_set_wise(backend, y_true, y_pred, weights, *, average, zero_division,
                    ours_kw, sk_kw, exact_support, betas=(0.5, 2.0)):
    """Every set-wise function on one case, values and warnings."""
    t, p, w = put(backend, y_true, y_pred, weights)
    common_sk = dict(sample_weight=weights, average=average, zero_division=zero_division, **sk_kw)
    common = dict(sample_weight=w, average=average, zero_division=zero_division, **ours_kw)

    expected, undefined, _ = sk_call(skm.precision_recall_fscore_support, y_true, y_pred,
                                     **common_sk)
    ours = our_call(undefined, mg.precision_recall_fscore_support, t, p, **common)
    _assert_prfs(backend, ours, expected, support_dtype(weights), exact_support=exact_support)

    for sk_function, our_function in (
        (skm.precision_score, mg.precision_score),
        (skm.recall_score, mg.recall_score),
        (skm.f1_score, mg.f1_score),
        (sk_jaccard, mg.jaccard_score),
    ):
        expected, undefined, _ = sk_call(sk_function, y_true, y_pred, **common_sk)
        ours = our_call(undefined, our_function, t, p, **common)
        assert_float(backend, ours, expected)
    for beta in betas:
        expected, undefined, _ = sk_call(skm.fbeta_score, y_true, y_pred, beta=beta, **common_sk)
        ours = our_call(undefined, mg.fbeta_score, t, p, beta=beta, **common)
        assert_float(backend, ours, expected)


# (weights, class set) pairs: every weight kind, both class sets, half the cases.
WEIGHTS_X_CLASS_SETS = (
    ("unweighted", "present"), ("float", "num_classes"), ("int", "present"),
    ("with-zeros", "num_classes"),
)


@pytest.mark.parametrize("zero_division", ZERO_DIVISIONS, ids=_zd_id)
@pytest.mark.parametrize("average", AVERAGES, ids=_average_id)
@pytest.mark.parametrize("weight_kind, class_set", WEIGHTS_X_CLASS_SETS,
                         ids=lambda v: str(v))
@pytest.mark.parametrize("k", KS, ids=_k_id)
def test_set_wise_zero_division(backend, rng, k, weight_kind, class_set, average, zero_division):
    """Classes never predicted, never true and absent from both."""
    y_true, y_pred = make_labels(rng, k, missing="mixed")
    weights = make_weights(rng, weight_kind, y_true.size)
    ours_kw, sk_kw = class_kwargs(class_set, k)
    _check_set_wise(backend, y_true, y_pred, weights, average=average,
                    zero_division=zero_division, ours_kw=ours_kw, sk_kw=sk_kw,
                    exact_support=counts_exact(weight_kind), betas=(0.5,))


@pytest.mark.parametrize("distribution", ("dirichlet", "zipf"))
@pytest.mark.parametrize("average", AVERAGES, ids=_average_id)
@pytest.mark.parametrize("weight_kind", WEIGHTS)
@pytest.mark.parametrize("k", KS, ids=_k_id)
def test_set_wise_imbalanced(backend, rng, k, weight_kind, average, distribution):
    y_true, y_pred = make_labels(rng, k, distribution=distribution)
    weights = make_weights(rng, weight_kind, y_true.size)
    _check_set_wise(backend, y_true, y_pred, weights, average=average, zero_division="warn",
                    ours_kw={}, sk_kw={}, exact_support=counts_exact(weight_kind))


@pytest.mark.parametrize("zero_division", ZERO_DIVISIONS, ids=_zd_id)
@pytest.mark.parametrize("average", AVERAGES, ids=_average_id)
@pytest.mark.parametrize("beta", (0.0, math.inf), ids=lambda b: f"beta={b}")
def test_fbeta_extreme_beta(backend, beta, average, zero_division):
    """beta=0 is precision and beta=inf is recall. scikit-learn then warns only
    through precision/recall (so fbeta_score alone does not warn at all)."""
    # class 2 never predicted (precision 0/0), class 3 never true (recall 0/0)
    y_true = np.array([0, 1, 1, 2, 2, 0, 1])
    y_pred = np.array([0, 1, 0, 1, 0, 3, 3])
    t, p = put(backend, y_true, y_pred)
    kw = dict(beta=beta, average=average, zero_division=zero_division)
    for sk_function, our_function in (
        (skm.fbeta_score, mg.fbeta_score),
        (skm.precision_recall_fscore_support, mg.precision_recall_fscore_support),
    ):
        expected, undefined, _ = sk_call(sk_function, y_true, y_pred, **kw)
        ours = our_call(undefined, our_function, t, p, **kw)
        if sk_function is skm.fbeta_score:
            assert_float(backend, ours, expected)
        else:
            _assert_prfs(backend, ours, expected, np.dtype(np.int64))


def _labels_argument(rng, k, y_true, y_pred, kind):
    present = np.union1d(y_true, y_pred)
    if kind == "subset":
        labels = rng.choice(present, size=max(1, present.size // 2), replace=False)
        return np.sort(labels).tolist()
    if kind == "reversed":
        return present[::-1].tolist()
    if kind == "shuffled":
        return rng.permutation(present).tolist()
    if kind == "with-absent":  # every class code, some absent from the data
        return rng.permutation(k).tolist()
    if kind == "beyond-data":  # codes above anything in the data
        return rng.permutation(np.concatenate([present, [k, k + 3]])).tolist()
    if kind == "single":
        return [int(rng.choice(present))]
    if kind == "absent-only":  # no selected class occurs: all supports are 0
        return [k + 1, k]
    raise AssertionError(kind)


LABEL_KINDS = ("subset", "reversed", "shuffled", "with-absent", "beyond-data", "single",
               "absent-only")


@pytest.mark.parametrize("average", AVERAGES, ids=_average_id)
@pytest.mark.parametrize("labels_kind", LABEL_KINDS)
@pytest.mark.parametrize("k", (3, 10, 100), ids=_k_id)
def test_set_wise_labels(backend, rng, k, labels_kind, average):
    y_true, y_pred = make_labels(rng, k, missing="mixed")
    weights = make_weights(rng, "float", y_true.size)
    labels = _labels_argument(rng, k, y_true, y_pred, labels_kind)
    for sample_weight, zero_division in ((None, "warn"), (weights, np.nan)):
        _check_set_wise(backend, y_true, y_pred, sample_weight, average=average,
                        zero_division=zero_division, ours_kw={"labels": labels},
                        sk_kw={"labels": labels}, exact_support=sample_weight is None)


@pytest.mark.parametrize("labels_kind", LABEL_KINDS[:-1])
@pytest.mark.parametrize("k", (3, 10, 100), ids=_k_id)
def test_cohen_kappa_labels(backend, rng, k, labels_kind):
    y_true, y_pred = make_labels(rng, k, missing="both")
    weights = make_weights(rng, "float", y_true.size)
    labels = _labels_argument(rng, k, y_true, y_pred, labels_kind)
    if not np.isin(y_true, labels).any():
        labels = labels + [int(y_true[0])]
    t, p, w = put(backend, y_true, y_pred, weights)
    for kappa_weights in KAPPA_WEIGHTS:
        for sample_weight, wb in ((None, None), (weights, w)):
            expected, undefined, _ = sk_call(skm.cohen_kappa_score, y_true, y_pred,
                                             labels=labels, weights=kappa_weights,
                                             sample_weight=sample_weight)
            ours = our_call(undefined, mg.cohen_kappa_score, t, p, labels=labels,
                            weights=kappa_weights, sample_weight=wb, compare_text=False)
            assert_float(backend, ours, expected, atol=ATOL_CANCELLATION)


@pytest.mark.parametrize("k", (3, 10), ids=_k_id)
def test_labels_with_num_classes(backend, rng, k):
    """labels= selects among num_classes codes; num_classes no longer matters."""
    y_true, y_pred = make_labels(rng, k, missing="both")
    weights = make_weights(rng, "with-zeros", y_true.size)
    labels = rng.permutation(k)[: max(2, k // 2)].tolist()
    if not np.isin(y_true, labels).any():
        labels.append(int(y_true[0]))
    t, p, w = put(backend, y_true, y_pred, weights)
    kw = dict(labels=labels, num_classes=k + 2)
    expected = skm.confusion_matrix(y_true, y_pred, labels=labels, sample_weight=weights)
    assert_counts(backend, mg.confusion_matrix(t, p, sample_weight=w, **kw), expected,
                  dtype=np.dtype(np.float64))
    for average in AVERAGES:
        expected = skm.precision_recall_fscore_support(
            y_true, y_pred, labels=labels, sample_weight=weights, average=average,
            zero_division=0.0)
        ours = mg.precision_recall_fscore_support(t, p, sample_weight=w, average=average,
                                                  zero_division=0.0, **kw)
        _assert_prfs(backend, ours, expected, support_dtype(weights))
    for kappa_weights in KAPPA_WEIGHTS:
        expected = skm.cohen_kappa_score(y_true, y_pred, labels=labels, weights=kappa_weights,
                                         sample_weight=weights)
        assert_float(backend, mg.cohen_kappa_score(t, p, weights=kappa_weights, sample_weight=w,
                                                   **kw), expected, atol=ATOL_CANCELLATION)
    expected = skm.classification_report(y_true, y_pred, labels=labels, sample_weight=weights,
                                         zero_division=0.0)
    assert mg.classification_report(t, p, sample_weight=w, zero_division=0.0, **kw) == expected


def test_cohen_kappa_labels_not_in_y1(backend):
    y1, y2 = np.array([0, 1, 1, 2]), np.array([3, 3, 0, 1])
    with pytest.raises(ValueError, match="At least one label in `labels` must be present"):
        skm.cohen_kappa_score(y1, y2, labels=[3])
    t, p = put(backend, y1, y2)
    with pytest.raises(ValueError, match="At least one label in `labels` must be present"):
        mg.cohen_kappa_score(t, p, labels=[3])


# -- binary ---------------------------------------------------------------------

BINARY_DATA = ("both-classes", "only-0", "only-1", "never-predicted-1", "never-true-0")


def _binary_data(rng, kind, n=200):
    y_true = rng.integers(0, 2, n)
    y_pred = np.where(rng.random(n) < 0.7, y_true, 1 - y_true)
    if kind == "only-0":
        y_true[:], y_pred[:] = 0, 0
    elif kind == "only-1":
        y_true[:], y_pred[:] = 1, 1
    elif kind == "never-predicted-1":
        y_pred[:] = 0
    elif kind == "never-true-0":
        y_true[:] = 1
    return y_true, y_pred


@pytest.mark.parametrize("class_set", CLASS_SETS)
@pytest.mark.parametrize("zero_division", ZERO_DIVISIONS, ids=_zd_id)
@pytest.mark.parametrize("weight_kind", ("unweighted", "float"))
@pytest.mark.parametrize("pos_label", (0, 1), ids=lambda v: f"pos_label={v}")
@pytest.mark.parametrize("data", BINARY_DATA)
def test_binary_pos_label(backend, rng, data, pos_label, weight_kind, zero_division, class_set):
    y_true, y_pred = _binary_data(rng, data)
    weights = make_weights(rng, weight_kind, y_true.size)
    ours_kw = {"num_classes": 2} if class_set == "num_classes" else {}
    t, p, w = put(backend, y_true, y_pred, weights)
    common_sk = dict(sample_weight=weights, average="binary", pos_label=pos_label,
                     zero_division=zero_division)
    common = dict(sample_weight=w, average="binary", pos_label=pos_label,
                  zero_division=zero_division, **ours_kw)
    expected, undefined, _ = sk_call(skm.precision_recall_fscore_support, y_true, y_pred,
                                     **common_sk)
    ours = our_call(undefined, mg.precision_recall_fscore_support, t, p, **common)
    _assert_prfs(backend, ours, expected, support_dtype(weights))
    for sk_function, our_function in (
        (skm.precision_score, mg.precision_score), (skm.recall_score, mg.recall_score),
        (skm.f1_score, mg.f1_score), (sk_jaccard, mg.jaccard_score),
    ):
        expected, undefined, _ = sk_call(sk_function, y_true, y_pred, **common_sk)
        ours = our_call(undefined, our_function, t, p, **common)
        assert_float(backend, ours, expected)
    expected, undefined, _ = sk_call(skm.fbeta_score, y_true, y_pred, beta=0.5, **common_sk)
    assert_float(backend, our_call(undefined, mg.fbeta_score, t, p, beta=0.5, **common), expected)


@pytest.mark.parametrize(
    "y_true, y_pred, pos_label",
    (
        ([0, 1, 2, 2, 1], [0, 1, 2, 1, 1], 1),  # multiclass data
        ([0, 3, 3, 0], [0, 3, 0, 0], 1),  # binary codes {0, 3}: 1 is not one of them
    ),
    ids=("multiclass", "pos_label-not-present"),
)
def test_binary_average_errors(backend, y_true, y_pred, pos_label):
    y_true, y_pred = np.array(y_true), np.array(y_pred)
    with pytest.raises(ValueError):
        skm.f1_score(y_true, y_pred, average="binary", pos_label=pos_label)
    t, p = put(backend, y_true, y_pred)
    for function in (mg.f1_score, mg.precision_score, mg.recall_score, mg.jaccard_score):
        with pytest.raises(ValueError):
            function(t, p, average="binary", pos_label=pos_label)


def test_binary_average_other_codes(backend):
    """Binary data coded {0, 3} with pos_label=3 works as in scikit-learn."""
    y_true, y_pred = np.array([0, 3, 3, 0, 3]), np.array([0, 3, 0, 0, 3])
    t, p = put(backend, y_true, y_pred)
    for sk_function, our_function in (
        (skm.precision_score, mg.precision_score), (skm.recall_score, mg.recall_score),
        (skm.f1_score, mg.f1_score), (sk_jaccard, mg.jaccard_score),
    ):
        assert_float(backend, our_function(t, p, pos_label=3),
                     sk_function(y_true, y_pred, pos_label=3))


@pytest.mark.parametrize("pos_label", (True, False, 1, 0), ids=lambda v: f"pos_label={v!r}")
def test_bool_labels_pos_label(backend, rng, pos_label):
    """Bool labels with a bool pos_label, as scikit-learn takes them."""
    y_true, y_pred = _binary_data(rng, "both-classes")
    y_true, y_pred = y_true.astype(bool), y_pred.astype(bool)
    t, p = put(backend, y_true, y_pred)
    for sk_function, our_function in (
        (skm.precision_score, mg.precision_score), (skm.recall_score, mg.recall_score),
        (skm.f1_score, mg.f1_score), (skm.jaccard_score, mg.jaccard_score),
    ):
        assert_float(backend, our_function(t, p, pos_label=pos_label),
                     sk_function(y_true, y_pred, pos_label=pos_label))


@pytest.mark.parametrize("average", ("micro", "macro", "weighted", None), ids=_average_id)
def test_pos_label_ignored_warning(backend, rng, average):
    y_true, y_pred = make_labels(rng, 3)
    expected, _, user = sk_call(skm.f1_score, y_true, y_pred, average=average, pos_label=0)
    assert user
    t, p = put(backend, y_true, y_pred)
    ours = our_call(set(), mg.f1_score, t, p, average=average, pos_label=0, expected_user=user)
    assert_float(backend, ours, expected)


# -- ignore_index -------------------------------------------------------------------


@pytest.mark.parametrize("class_set", CLASS_SETS)
@pytest.mark.parametrize("weight_kind", ("unweighted", "float"))
@pytest.mark.parametrize("ignore", ("-1", "-100", "above", "in-range"),
                         ids=lambda v: f"ignore={v}")
@pytest.mark.parametrize("k", (3, 10), ids=_k_id)
def test_ignore_index(backend, rng, k, ignore, weight_kind, class_set):
    y_true, y_pred = make_labels(rng, k, missing="mixed")
    weights = make_weights(rng, weight_kind, y_true.size)
    # in range: the rarest class of y_true, so that other classes' samples remain
    values, counts = np.unique(y_true, return_counts=True)
    rarest = int(values[counts.argmin()]) if values.size > 1 else k + 1
    ignore_index = {"-1": -1, "-100": -100, "above": k + 5, "in-range": rarest}[ignore]
    ignored = rng.random(y_true.size) < 0.25
    y_true = np.where(ignored, ignore_index, y_true)
    keep = y_true != ignore_index
    assert keep.any()
    kt, kp = y_true[keep], y_pred[keep]
    kw = None if weights is None else weights[keep]
    ours_kw, sk_kw = class_kwargs(class_set, k)
    ours_kw["ignore_index"] = ignore_index
    t, p, w = put(backend, y_true, y_pred, weights)
    exact = weights is None

    expected = skm.confusion_matrix(kt, kp, sample_weight=kw, **sk_kw)
    assert_counts(backend, mg.confusion_matrix(t, p, sample_weight=w, **ours_kw), expected,
                  dtype=count_dtype(weights), exact=exact)
    assert_float(backend, mg.accuracy_score(t, p, sample_weight=w, **ours_kw),
                 skm.accuracy_score(kt, kp, sample_weight=kw))
    assert_float(backend, mg.zero_one_loss(t, p, sample_weight=w, normalize=False, **ours_kw),
                 skm.zero_one_loss(kt, kp, sample_weight=kw, normalize=False))
    assert_float(backend, mg.hamming_loss(t, p, sample_weight=w, **ours_kw),
                 skm.hamming_loss(kt, kp, sample_weight=kw))
    expected, _, user = sk_call(skm.balanced_accuracy_score, kt, kp, sample_weight=kw)
    assert_float(backend, our_call(set(), mg.balanced_accuracy_score, t, p, sample_weight=w,
                                   expected_user=user, **ours_kw), expected)
    assert_float(backend, mg.matthews_corrcoef(t, p, sample_weight=w, **ours_kw),
                 skm.matthews_corrcoef(kt, kp, sample_weight=kw), atol=ATOL_CANCELLATION)
    for kappa_weights in KAPPA_WEIGHTS:
        expected = skm.cohen_kappa_score(kt, kp, weights=kappa_weights, sample_weight=kw, **sk_kw)
        assert_float(backend, mg.cohen_kappa_score(t, p, weights=kappa_weights, sample_weight=w,
                                                   **ours_kw), expected, atol=ATOL_CANCELLATION)
    for average in AVERAGES:
        expected, undefined, _ = sk_call(skm.precision_recall_fscore_support, kt, kp,
                                         sample_weight=kw, average=average, **sk_kw)
        ours = our_call(undefined, mg.precision_recall_fscore_support, t, p, sample_weight=w,
                        average=average, **ours_kw)
        _assert_prfs(backend, ours, expected, support_dtype(weights), exact_support=exact)
        expected, undefined, _ = sk_call(sk_jaccard, kt, kp, sample_weight=kw,
                                         average=average, **sk_kw)
        ours = our_call(undefined, mg.jaccard_score, t, p, sample_weight=w, average=average,
                        **ours_kw)
        assert_float(backend, ours, expected)
    expected, _, _ = sk_call(skm.classification_report, kt, kp, sample_weight=kw,
                             output_dict=True, zero_division=0.0, **sk_kw)
    assert_report_dict(mg.classification_report(t, p, sample_weight=w, output_dict=True,
                                                zero_division=0.0, **ours_kw), expected)


# -- (N, K) scores -------------------------------------------------------------------


@pytest.mark.parametrize(
    "score_dtype, ties",
    (("float64", False), ("float32", False), ("float64", True), ("int32", True)),
    ids=("float64", "float32", "float64-ties", "int32-ties"),
)
@pytest.mark.parametrize("weight_kind", ("unweighted", "float"))
# K = 100 on the emulator: the full-warp rows of K = 10's lanes, 20 launches a case.
@pytest.mark.parametrize("k", [pytest.param(k, marks=pytest.mark.exhaustive_on_emulated)
                               if k == 100 else k for k in KS], ids=_k_id)
@pytest.mark.kernel_path  # score dtype x weights: each a fused-argmax instantiation
def test_scores_input(backend, rng, k, weight_kind, score_dtype, ties):
    """(N, K) scores: scikit-learn on the row argmax (ties to the lowest index)."""
    if backend.name == "emulated" and k == 100 and (score_dtype, ties) != ("float64", True):
        # ~20 s a case on the emulator; every score dtype x weights runs there at
        # K = 10 (the same instantiations): K = 100 keeps the tied float64 case.
        pytest.skip("K = 100 on the emulator: the tied float64 cases only")
    y_true, _ = make_labels(rng, k, missing="both")
    n = y_true.size
    scores = rng.normal(size=(n, k))
    scores[np.arange(n), y_true] += 1.5 * (rng.random(n) < 0.5)
    if ties or score_dtype == "int32":
        scores = np.round(scores)  # many exact ties
    scores = scores.astype(score_dtype)
    y_pred = scores.argmax(axis=1)
    if ties:
        assert (scores == scores.max(axis=1, keepdims=True)).sum(axis=1).max() > 1
    weights = make_weights(rng, weight_kind, n)
    labels = np.arange(k)
    t, s, w = put(backend, y_true, scores, weights)

    expected, _, _ = sk_call(skm.confusion_matrix, y_true, y_pred, labels=labels,
                             sample_weight=weights)
    assert_counts(backend, mg.confusion_matrix(t, s, sample_weight=w), expected,
                  dtype=count_dtype(weights), exact=weights is None)
    assert_float(backend, mg.accuracy_score(t, s, sample_weight=w),
                 skm.accuracy_score(y_true, y_pred, sample_weight=weights))
    expected, _, user = sk_call(skm.balanced_accuracy_score, y_true, y_pred,
                                sample_weight=weights)
    assert_float(backend, our_call(set(), mg.balanced_accuracy_score, t, s, sample_weight=w,
                                   expected_user=user), expected)
    assert_float(backend, mg.matthews_corrcoef(t, s, sample_weight=w),
                 skm.matthews_corrcoef(y_true, y_pred, sample_weight=weights),
                 atol=ATOL_CANCELLATION)
    for kappa_weights in KAPPA_WEIGHTS:
        expected = skm.cohen_kappa_score(y_true, y_pred, labels=labels, weights=kappa_weights,
                                         sample_weight=weights)
        assert_float(backend, mg.cohen_kappa_score(t, s, weights=kappa_weights, sample_weight=w),
                     expected, atol=ATOL_CANCELLATION)
    for average in AVERAGES:
        expected, undefined, _ = sk_call(skm.precision_recall_fscore_support, y_true, y_pred,
                                         labels=labels, sample_weight=weights, average=average,
                                         zero_division=0.0)
        ours = mg.precision_recall_fscore_support(t, s, sample_weight=w, average=average,
                                                  zero_division=0.0)
        _assert_prfs(backend, ours, expected, support_dtype(weights), exact_support=weights is None)
    expected, _, _ = sk_call(skm.classification_report, y_true, y_pred, labels=labels,
                             sample_weight=weights, output_dict=True, zero_division=0.0)
    assert_report_dict(mg.classification_report(t, s, sample_weight=w, output_dict=True,
                                                zero_division=0.0), expected)


# -- label dtypes --------------------------------------------------------------------

DTYPE_CASES = (
    ("bool", "bool"), ("int8", "int8"), ("uint8", "uint8"), ("int32", "int32"),
    ("uint64", "uint64"), ("int8", "uint64"), ("bool", "int64"), ("uint8", "int32"),
    ("float64", "float32"),  # integral float codes
)


@pytest.mark.parametrize("class_set", CLASS_SETS)
@pytest.mark.parametrize("weight_kind", ("unweighted", "int"))
@pytest.mark.parametrize("dtypes", DTYPE_CASES, ids=lambda d: f"{d[0]}-{d[1]}")
@pytest.mark.kernel_path  # label dtypes x weight kind: each an accumulation instantiation
def test_label_dtypes(backend, rng, dtypes, weight_kind, class_set):
    true_dtype, pred_dtype = dtypes
    k = 2 if "bool" in dtypes else 10
    y_true, y_pred = make_labels(rng, k, missing="true" if k > 2 else "none")
    weights = make_weights(rng, weight_kind, y_true.size)
    ours_kw, sk_kw = class_kwargs(class_set, k)
    t, p, w = put(backend, y_true.astype(true_dtype), y_pred.astype(pred_dtype), weights)
    exact = weight_kind != "float"

    expected = skm.confusion_matrix(y_true, y_pred, sample_weight=weights, **sk_kw)
    assert_counts(backend, mg.confusion_matrix(t, p, sample_weight=w, **ours_kw), expected,
                  dtype=count_dtype(weights), exact=exact)
    assert_float(backend, mg.accuracy_score(t, p, sample_weight=w, **ours_kw),
                 skm.accuracy_score(y_true, y_pred, sample_weight=weights))
    assert_float(backend, mg.matthews_corrcoef(t, p, sample_weight=w, **ours_kw),
                 skm.matthews_corrcoef(y_true, y_pred, sample_weight=weights),
                 atol=ATOL_CANCELLATION)
    expected, _, user = sk_call(skm.balanced_accuracy_score, y_true, y_pred,
                                sample_weight=weights)
    assert_float(backend, our_call(set(), mg.balanced_accuracy_score, t, p, sample_weight=w,
                                   expected_user=user, **ours_kw), expected)
    for kappa_weights in KAPPA_WEIGHTS:
        expected = skm.cohen_kappa_score(y_true, y_pred, weights=kappa_weights,
                                         sample_weight=weights, **sk_kw)
        assert_float(backend, mg.cohen_kappa_score(t, p, weights=kappa_weights, sample_weight=w,
                                                   **ours_kw), expected, atol=ATOL_CANCELLATION)
    for average in AVERAGES + (("binary",) if k == 2 else ()):
        expected, undefined, _ = sk_call(skm.precision_recall_fscore_support, y_true, y_pred,
                                         sample_weight=weights, average=average, **sk_kw)
        ours = our_call(undefined, mg.precision_recall_fscore_support, t, p, sample_weight=w,
                        average=average, **ours_kw)
        _assert_prfs(backend, ours, expected, support_dtype(weights), exact_support=exact)
    expected, _, _ = sk_call(skm.classification_report, y_true, y_pred, sample_weight=weights,
                             zero_division=0.0, **sk_kw)
    if weight_kind == "unweighted":  # weighted text: test_classification_report_*
        assert mg.classification_report(t, p, sample_weight=w, zero_division=0.0,
                                        **ours_kw) == expected


@pytest.mark.parametrize(
    "dtype, ignore_index", (("uint8", 255), ("int8", -1), ("uint64", 2**64 - 1)),
    ids=("uint8-255", "int8--1", "uint64-max"),
)
def test_label_dtypes_ignore_index(backend, rng, dtype, ignore_index):
    y_true, y_pred = make_labels(rng, 10)
    ignored = rng.random(y_true.size) < 0.2
    keep = ~ignored
    t_host = y_true.astype(dtype)
    t_host[ignored] = np.array(ignore_index).astype(dtype)
    t, p = put(backend, t_host, y_pred.astype(dtype))
    expected = skm.confusion_matrix(y_true[keep], y_pred[keep])
    assert_counts(backend, mg.confusion_matrix(t, p, ignore_index=ignore_index), expected,
                  dtype=np.dtype(np.int64))
    expected = skm.f1_score(y_true[keep], y_pred[keep], average="macro")
    assert_float(backend, mg.f1_score(t, p, average="macro", ignore_index=ignore_index),
                 expected)


# -- classification_report -------------------------------------------------------------

REPORT_VARIANTS = (
    "plain", "num_classes", "labels-subset", "labels-with-absent", "target_names",
    "labels-and-target_names",
)


def _report_arguments(rng, k, y_true, y_pred, variant):
    """(our kwargs, scikit-learn kwargs)."""
    present = np.union1d(y_true, y_pred)
    if variant == "plain":
        return {}, {}
    if variant == "num_classes":
        return {"num_classes": k + 1}, {"labels": np.arange(k + 1)}
    if variant == "labels-subset":
        labels = _labels_argument(rng, k, y_true, y_pred, "subset")
        return {"labels": labels}, {"labels": labels}
    if variant == "labels-with-absent":
        labels = rng.permutation(k + 2).tolist()
        return {"labels": labels}, {"labels": labels}
    names = ["a", "class with a long name", "é-accented", "x" * 15, "b c"]
    if variant == "target_names":
        target_names = [names[i % len(names)] + str(i) for i in range(present.size)]
        return {"target_names": target_names}, {"target_names": target_names}
    if variant == "labels-and-target_names":
        labels = rng.permutation(present).tolist()
        target_names = [names[i % len(names)] + str(i) for i in range(len(labels))]
        kw = {"labels": labels, "target_names": target_names}
        return kw, dict(kw)
    raise AssertionError(variant)


def make_report_labels(rng, k, missing):
    """make_labels with at least one true positive (see
    test_classification_report_no_true_positives for why)."""
    while True:
        y_true, y_pred = make_labels(rng, k, missing=missing)
        if (y_true == y_pred).any():
            return y_true, y_pred


def _check_report(backend, y_true, y_pred, weights, *, ours_kw, sk_kw, **kw):
    """Text identical to scikit-learn's, dictionary equal to tolerance, same warnings."""
    t, p, w = put(backend, y_true, y_pred, weights)
    expected, undefined, _ = sk_call(skm.classification_report, y_true, y_pred,
                                     sample_weight=weights, **kw, **sk_kw)
    ours = our_call(undefined, mg.classification_report, t, p, sample_weight=w, **kw, **ours_kw)
    assert ours == expected
    kw.pop("digits", None)
    expected, undefined, _ = sk_call(skm.classification_report, y_true, y_pred,
                                     sample_weight=weights, output_dict=True, **kw, **sk_kw)
    ours = our_call(undefined, mg.classification_report, t, p, sample_weight=w,
                    output_dict=True, **kw, **ours_kw)
    assert_report_dict(ours, expected)


@pytest.mark.parametrize(
    "weight_kind, digits", (("unweighted", 2), ("with-zeros", 4), ("unweighted", 0)),
    ids=("unweighted-digits=2", "with-zeros-digits=4", "unweighted-digits=0"),
)
@pytest.mark.parametrize("variant", REPORT_VARIANTS)
@pytest.mark.parametrize("missing", ("none", "mixed"), ids=lambda m: f"missing={m}")
@pytest.mark.parametrize("k", (2, 3, 10), ids=_k_id)
def test_classification_report(backend, rng, k, missing, variant, digits, weight_kind):
    y_true, y_pred = make_report_labels(rng, k, missing)
    weights = make_weights(rng, weight_kind, y_true.size)
    ours_kw, sk_kw = _report_arguments(rng, k, y_true, y_pred, variant)
    _check_report(backend, y_true, y_pred, weights, ours_kw=ours_kw, sk_kw=sk_kw,
                  digits=digits)


@pytest.mark.parametrize("zero_division", ZERO_DIVISIONS, ids=_zd_id)
@pytest.mark.parametrize("weight_kind", ("unweighted", "with-zeros"))
@pytest.mark.parametrize("k", (2, 3, 10), ids=_k_id)
def test_classification_report_zero_division(backend, rng, k, weight_kind, zero_division):
    y_true, y_pred = make_report_labels(rng, k, "mixed")
    weights = make_weights(rng, weight_kind, y_true.size)
    _check_report(backend, y_true, y_pred, weights, ours_kw={}, sk_kw={}, digits=3,
                  zero_division=zero_division)


@pytest.mark.parametrize("variant", ("plain", "labels-subset"))
@pytest.mark.parametrize("k", (2, 10), ids=_k_id)
def test_classification_report_integer_weights(backend, rng, k, variant):
    """scikit-learn's supports are float64 for any sample_weight, so its text
    prints integer-weighted supports as "204.0"."""
    y_true, y_pred = make_labels(rng, k)
    weights = make_weights(rng, "int", y_true.size)
    ours_kw, sk_kw = _report_arguments(rng, k, y_true, y_pred, variant)
    _check_report(backend, y_true, y_pred, weights, ours_kw=ours_kw, sk_kw=sk_kw,
                  zero_division=0.0)


@pytest.mark.parametrize("zero_division", ("warn", 0.0), ids=_zd_id)
def test_classification_report_no_true_positives(backend, zero_division):
    """Divergence kept on purpose (see the report of this test file's author).

    When no sample at all is a true positive, scikit-learn's
    multilabel_confusion_matrix takes a "pathological case" branch that returns
    float64 zeros for every count, so its unweighted supports become float64
    and its report prints "4.0" where it prints "4" as soon as one sample is
    correct. Our supports stay int64 (counts are int64 without weights). The
    numbers agree; only the support column's formatting differs.
    """
    y_true, y_pred = np.array([1, 1, 2, 2, 2, 1]), np.array([0, 2, 1, 0, 0, 0])
    t, p = put(backend, y_true, y_pred)
    expected, undefined, _ = sk_call(skm.precision_recall_fscore_support, y_true, y_pred,
                                     zero_division=zero_division)
    assert expected[3].dtype == np.float64  # scikit-learn's quirk, still there?
    ours = our_call(undefined, mg.precision_recall_fscore_support, t, p,
                    zero_division=zero_division)
    _assert_prfs(backend, ours, expected, np.dtype(np.int64))

    expected, undefined, _ = sk_call(skm.classification_report, y_true, y_pred,
                                     output_dict=True, zero_division=zero_division)
    assert_report_dict(our_call(undefined, mg.classification_report, t, p, output_dict=True,
                                zero_division=zero_division), expected)
    expected, undefined, _ = sk_call(skm.classification_report, y_true, y_pred,
                                     zero_division=zero_division)
    ours = our_call(undefined, mg.classification_report, t, p, zero_division=zero_division)
    # Same text once scikit-learn's float supports ("      4.0") print as integers.
    assert ours == re.sub(r" ?(\d+)\.0$", lambda m: f"   {m.group(1)}"[-len(m.group(0)):],
                          expected, flags=re.M)
    assert ours != expected


@pytest.mark.parametrize("k", KS, ids=_k_id)
def test_classification_report_float_weights(backend, rng, k):
    """Arbitrary float weights: the dictionary to tolerance (the text prints
    supports with every digit, where summation order shows)."""
    y_true, y_pred = make_labels(rng, k, missing="mixed")
    weights = make_weights(rng, "float", y_true.size)
    t, p, w = put(backend, y_true, y_pred, weights)
    expected, _, _ = sk_call(skm.classification_report, y_true, y_pred, sample_weight=weights,
                             output_dict=True, zero_division=0.0)
    assert_report_dict(mg.classification_report(t, p, sample_weight=w, output_dict=True,
                                                zero_division=0.0), expected)
    expected, _, _ = sk_call(skm.classification_report, y_true, y_pred, sample_weight=weights,
                             digits=4, zero_division=0.0)
    ours = mg.classification_report(t, p, sample_weight=w, digits=4, zero_division=0.0)
    # Every column but support must print identically.
    strip = [line.rsplit(None, 1)[0] if line.strip() else line
             for text in (ours, expected) for line in text.splitlines()]
    half = len(strip) // 2
    assert strip[:half] == strip[half:]


def test_classification_report_target_names_mismatch(backend, rng):
    y_true, y_pred = make_labels(rng, 3)
    t, p = put(backend, y_true, y_pred)
    with pytest.raises(ValueError, match="Number of classes, 3, does not match size of target"):
        skm.classification_report(y_true, y_pred, target_names=["a", "b"])
    with pytest.raises(ValueError, match="Number of classes, 3, does not match size of target"):
        mg.classification_report(t, p, target_names=["a", "b"])
    expected, _, user = sk_call(skm.classification_report, y_true, y_pred, labels=[0, 1, 2],
                                target_names=["a", "b"], zero_division=0.0)
    assert user
    ours = our_call(set(), mg.classification_report, t, p, labels=[0, 1, 2],
                    target_names=["a", "b"], zero_division=0.0, expected_user=user)
    assert ours == expected
