"""Properties of the label metrics, checked on hypothesis-generated samples.

* relabelling the classes by a permutation permutes the confusion matrix and
  the per-class values and leaves every class-symmetric metric unchanged;
* weights of ones give the unweighted results;
* the :class:`ClassStatistics` of two halves, merged, is the state of the
  whole (dense-matrix path and per-class-statistics path alike), and the two
  paths give the same statistics;
* every public function gives the same values on the per-class-statistics
  path as on the dense path;
* ``ignore_index`` equals dropping those samples.

Counts, and values computed from identical counts, are compared exactly;
values whose summation order legitimately changes (averages after a
permutation, sums of arbitrary float weights) to ``rtol=1e-12`` with
``atol=1e-14`` for quantities that cancel to 0 (MCC, kappa).
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass, fields
from fractions import Fraction
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import metrics_gpu as mg
import metrics_gpu._functional.labels as classification
import metrics_gpu._pipeline.stages as stages
from metrics_gpu._pipeline.stages import accumulate
from metrics_gpu._formulas.state import ClassStatistics
from metrics_gpu._validation import check_label_inputs

RTOL = 1e-12
# Float weights: the statistics path derives true negatives by subtraction
# (total - support - predicted + TP), which leaves about eps x the total weight
# where the dense path sums to an exact 0 (1.2e-14 seen at a total of 42 with
# weights of 0.3); a ratio over a small count scales it up.
ATOL = 1e-12

SETTINGS = settings(
    max_examples=50,
    deadline=None,
    # `backend` is function-scoped but stateless between examples.
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
# Examples per backend of the properties that run every public function per
# example: the emulated runs (exhaustive tier) cost ~1.5 s an example, in
# thread starts, and repeat kernel paths the fast tier covers.
EXAMPLES = {"numpy": 50, "emulated": 20, "cuda": 50}


def _settings(backend) -> settings:
    return settings(SETTINGS, max_examples=EXAMPLES[backend.name])

WEIGHT_KINDS = ("unweighted", "int", "dyadic", "float")


# -- strategies ----------------------------------------------------------------


@dataclass
class Sample:
    k: int
    y_true: np.ndarray
    y_pred: np.ndarray
    weights: np.ndarray | None
    weight_kind: str

    @property
    def exact(self) -> bool:
        """Sums of these weights do not depend on the summation order."""
        return self.weight_kind != "float"

    def __repr__(self):
        w = None if self.weights is None else self.weights.tolist()
        return (f"Sample(k={self.k}, y_true={self.y_true.tolist()}, "
                f"y_pred={self.y_pred.tolist()}, weights={w})")


def _weights(draw, kind, n):
    if kind == "unweighted":
        return None
    if kind == "int":
        return draw(arrays(np.int64, n, elements=st.integers(0, 5)))
    if kind == "dyadic":  # multiples of 1/8: every sum is exact
        return draw(arrays(np.float64, n, elements=st.integers(0, 24).map(lambda v: v / 8)))
    return draw(arrays(
        np.float64, n,
        elements=st.just(0.0) | st.floats(0.01, 10.0, allow_nan=False, allow_infinity=False),
    ))


@st.composite
def samples(draw, *, min_k=2, max_k=12, min_n=1, max_n=150, weight_kinds=WEIGHT_KINDS):
    """Labels in [0, k) where y_true and y_pred each use a drawn subset of the
    classes, so that classes absent from either or both are common."""
    k = draw(st.integers(min_k, max_k))
    n = draw(st.integers(min_n, max_n))
    classes = st.lists(st.integers(0, k - 1), min_size=1, max_size=k, unique=True)
    true_classes, pred_classes = draw(classes), draw(classes)
    y_true = draw(arrays(np.int64, n, elements=st.sampled_from(true_classes)))
    y_pred = draw(arrays(np.int64, n, elements=st.sampled_from(pred_classes)))
    kind = draw(st.sampled_from(weight_kinds))
    return Sample(k, y_true, y_pred, _weights(draw, kind, n), kind)


# -- helpers --------------------------------------------------------------------


def _some_weight(weights) -> bool:
    """The functions compare defined inputs: weights that are all 0 raise
    (tests/test_validation.py), as scikit-learn's do."""
    return weights is None or bool(np.any(weights))


def put(backend, *arrays_):
    return tuple(None if a is None else backend.asarray(a) for a in arrays_)


@contextlib.contextmanager
def statistics_path():
    """Force the O(K) per-class statistics path for every K (the stages and
    kappa's class selection each ask)."""
    with mock.patch.object(classification, "use_dense_matrix", lambda k: False), \
            mock.patch.object(stages, "use_dense_matrix", lambda k: False):
        yield


def all_metrics(backend, y_true, y_pred, **kw):
    """Every public label metric on one input: {name: host value}, plus the
    warnings raised, in order. ``kw`` goes to every function.

    Warnings of every kind (RuntimeWarnings included) are recorded, not
    raised: the properties compare two computations, warnings included, and a
    floating-point problem of one metric (covered by its own tests) must not
    hide whether the property holds for the others.
    """
    out = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        def put_result(name, value):
            out[name] = backend.to_numpy(value)

        put_result("confusion_matrix", mg.confusion_matrix(y_true, y_pred, **kw))
        for normalize in ("true", "pred", "all"):
            put_result(f"confusion_matrix-{normalize}",
                       mg.confusion_matrix(y_true, y_pred, normalize=normalize, **kw))
        for normalize in (True, False):
            put_result(f"accuracy-{normalize}",
                       mg.accuracy_score(y_true, y_pred, normalize=normalize, **kw))
            put_result(f"zero_one_loss-{normalize}",
                       mg.zero_one_loss(y_true, y_pred, normalize=normalize, **kw))
        put_result("hamming_loss", mg.hamming_loss(y_true, y_pred, **kw))
        for adjusted in (False, True):
            put_result(f"balanced_accuracy-{adjusted}",
                       mg.balanced_accuracy_score(y_true, y_pred, adjusted=adjusted, **kw))
        put_result("balanced_accuracy_weighted",
                   mg.balanced_accuracy_weighted(y_true, y_pred, **kw))
        put_result("matthews_corrcoef", mg.matthews_corrcoef(y_true, y_pred, **kw))
        for weights in (None, "linear", "quadratic"):
            put_result(f"cohen_kappa-{weights}",
                       mg.cohen_kappa_score(y_true, y_pred, weights=weights, **kw))
        for average in (None, "micro", "macro", "weighted"):
            for zero_division in ("warn", 1.0, np.nan):
                p, r, f, s = mg.precision_recall_fscore_support(
                    y_true, y_pred, average=average, zero_division=zero_division, **kw)
                tag = f"{average}-{zero_division}"
                for name, value in (("precision", p), ("recall", r), ("f1", f)):
                    put_result(f"{name}-{tag}", value)
                if s is not None:
                    put_result(f"support-{tag}", s)
            put_result(f"precision_score-{average}",
                       mg.precision_score(y_true, y_pred, average=average, **kw))
            put_result(f"recall_score-{average}",
                       mg.recall_score(y_true, y_pred, average=average, **kw))
            put_result(f"f1_score-{average}", mg.f1_score(y_true, y_pred, average=average, **kw))
            put_result(f"fbeta_score-{average}",
                       mg.fbeta_score(y_true, y_pred, beta=0.5, average=average, **kw))
            put_result(f"jaccard_score-{average}",
                       mg.jaccard_score(y_true, y_pred, average=average, **kw))
            put_result(f"specificity_score-{average}",
                       mg.specificity_score(y_true, y_pred, average=average, **kw))
        report = mg.classification_report(y_true, y_pred, output_dict=True, zero_division=0.0,
                                          **kw)
        for row, value in report.items():
            if isinstance(value, dict):
                for column, number in value.items():
                    out[f"report-{row}-{column}"] = np.asarray(number)
            else:
                out[f"report-{row}"] = np.asarray(value)
        out["report-text"] = mg.classification_report(y_true, y_pred, digits=6,
                                                      zero_division=0.0, **kw)
    messages = [(w.category.__name__, str(w.message)) for w in caught]
    return out, messages


def assert_same_metrics(ours, reference, *, exact, check_dtype=True):
    assert list(ours) == list(reference)
    for name, expected in reference.items():
        value = ours[name]
        if isinstance(expected, str):
            if exact:
                assert value == expected, name
            continue
        if check_dtype:
            assert value.dtype == expected.dtype, (name, value.dtype, expected.dtype)
        assert value.shape == expected.shape, name
        if exact:
            np.testing.assert_array_equal(value, expected, err_msg=name)
        else:
            np.testing.assert_allclose(value, expected, rtol=RTOL, atol=ATOL, equal_nan=True,
                                       err_msg=name)


def statistics_fields(stats: ClassStatistics) -> dict:
    return {f.name: getattr(stats, f.name) for f in fields(ClassStatistics)}


def assert_same_statistics(backend, ours: ClassStatistics, reference: ClassStatistics, *,
                           exact: bool):
    for name, expected in statistics_fields(reference).items():
        value = getattr(ours, name)
        if expected is None or isinstance(expected, int):
            assert value == expected, name
            continue
        value, expected = backend.to_numpy(value), backend.to_numpy(expected)
        assert value.dtype == expected.dtype, (name, value.dtype, expected.dtype)
        assert value.shape == expected.shape, name
        if exact or value.dtype.kind in "biu":
            np.testing.assert_array_equal(value, expected, err_msg=name)
        else:
            np.testing.assert_allclose(value, expected, rtol=RTOL, err_msg=name)


# -- label permutation -----------------------------------------------------------

SYMMETRIC_SCALARS = (
    ("accuracy", lambda t, p, kw: mg.accuracy_score(t, p, **kw)),
    ("accuracy-count", lambda t, p, kw: mg.accuracy_score(t, p, normalize=False, **kw)),
    ("zero_one_loss", lambda t, p, kw: mg.zero_one_loss(t, p, **kw)),
    ("hamming_loss", lambda t, p, kw: mg.hamming_loss(t, p, **kw)),
    ("balanced_accuracy", lambda t, p, kw: mg.balanced_accuracy_score(t, p, **kw)),
    ("balanced_accuracy-adjusted",
     lambda t, p, kw: mg.balanced_accuracy_score(t, p, adjusted=True, **kw)),
    ("matthews_corrcoef", lambda t, p, kw: mg.matthews_corrcoef(t, p, **kw)),
    ("cohen_kappa", lambda t, p, kw: mg.cohen_kappa_score(t, p, **kw)),
) + tuple(
    (f"{name}-{average}-{zd}",
     lambda t, p, kw, fn=fn, average=average, zd=zd:
         fn(t, p, average=average, zero_division=zd, **kw))
    for name, fn in (
        ("precision", mg.precision_score), ("recall", mg.recall_score), ("f1", mg.f1_score),
        ("jaccard", mg.jaccard_score), ("specificity", mg.specificity_score),
    )
    for average in ("micro", "macro", "weighted")
    for zd in (0.0, np.nan)
)

PER_CLASS = (
    ("precision", mg.precision_score), ("recall", mg.recall_score), ("f1", mg.f1_score),
    ("jaccard", mg.jaccard_score), ("specificity", mg.specificity_score),
)


@pytest.mark.exhaustive_on_emulated  # minutes on the emulator
def test_label_permutation(backend):
    @_settings(backend)
    @given(data=st.data(), num_classes_given=st.booleans())
    def run(data, num_classes_given):
        sample = data.draw(samples(), label="sample")
        assume(_some_weight(sample.weights))
        k = sample.k
        perm = np.array(data.draw(st.permutations(range(k)), label="permutation"))
        kw = {"num_classes": k} if num_classes_given else {}
        t, p, w = put(backend, sample.y_true, sample.y_pred, sample.weights)
        tp_, pp_ = put(backend, perm[sample.y_true], perm[sample.y_pred])
        kw_w = dict(kw, sample_weight=w)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # undefined-metric warnings
            for name, metric in SYMMETRIC_SCALARS:
                before = backend.to_numpy(metric(t, p, kw_w))
                after = backend.to_numpy(metric(tp_, pp_, kw_w))
                np.testing.assert_allclose(after, before, rtol=RTOL, atol=ATOL, equal_nan=True,
                                           err_msg=name)
            if not num_classes_given:
                return
            # Class c becomes perm[c]: matrix cell (i, j) moves to (perm[i], perm[j]).
            cm = backend.to_numpy(mg.confusion_matrix(t, p, **kw_w))
            cm_after = backend.to_numpy(mg.confusion_matrix(tp_, pp_, **kw_w))
            expected = np.empty_like(cm)
            expected[np.ix_(perm, perm)] = cm
            assert cm_after.dtype == cm.dtype
            if cm.dtype.kind == "f":
                # Float weights on the kernel backends are summed by atomics, in
                # an order that changes with the cells' positions.
                np.testing.assert_allclose(cm_after, expected, rtol=1e-12)
            else:
                np.testing.assert_array_equal(cm_after, expected)
            for name, metric in PER_CLASS:
                for zd in (0.0, 1.0, np.nan):
                    options = dict(kw_w, average=None, zero_division=zd)
                    before = backend.to_numpy(metric(t, p, **options))
                    after = backend.to_numpy(metric(tp_, pp_, **options))
                    expected = np.empty_like(before)
                    expected[perm] = before
                    # Per-class sums add the same weights in another row order: equal
                    # to rounding only, so compare with the float tolerance.
                    np.testing.assert_allclose(after, expected, rtol=RTOL, atol=ATOL,
                                               equal_nan=True, err_msg=f"{name}-{zd}")
            support = backend.to_numpy(mg.precision_recall_fscore_support(t, p, **kw_w)[3])
            support_after = backend.to_numpy(
                mg.precision_recall_fscore_support(tp_, pp_, **kw_w)[3])
            expected = np.empty_like(support)
            expected[perm] = support
            np.testing.assert_allclose(support_after, expected, rtol=RTOL, atol=ATOL)

    run()


# -- weights of ones ---------------------------------------------------------------


@pytest.mark.exhaustive_on_emulated  # minutes on the emulator
def test_unit_weights_equal_unweighted(backend):
    @_settings(backend)
    @given(sample=samples(weight_kinds=("unweighted",)), num_classes_given=st.booleans(),
           ones_dtype=st.sampled_from(("float64", "int64", "int8", "bool")))
    def run(sample, num_classes_given, ones_dtype):
        kw = {"num_classes": sample.k} if num_classes_given else {}
        t, p = put(backend, sample.y_true, sample.y_pred)
        ones = backend.asarray(np.ones(sample.y_true.size, dtype=ones_dtype))
        reference, reference_warnings = all_metrics(backend, t, p, **kw)
        weighted, weighted_warnings = all_metrics(backend, t, p, sample_weight=ones, **kw)
        # Values are equal; the dtypes of counts follow the weights' dtype (and so
        # does the report's support column: "4.0" with weights, as scikit-learn).
        del weighted["report-text"], reference["report-text"]
        assert_same_metrics(weighted, reference, exact=True, check_dtype=False)
        assert weighted_warnings == reference_warnings
        cm = weighted["confusion_matrix"]
        assert cm.dtype == (np.float64 if ones_dtype == "float64" else np.int64)

    run()


# -- merging states -------------------------------------------------------------------


def _state(backend, y_true, y_pred, weights, k, validate):
    t, p, w = put(backend, y_true, y_pred, weights)
    inputs = check_label_inputs(t, p, num_classes=k, sample_weight=w, validate=validate)
    return accumulate(inputs, moments=True)[0]


@st.composite
def merge_cases(draw):
    """A sample, a split point, and (with validate=False) out-of-range labels."""
    sample = draw(samples(min_n=2))
    validate = draw(st.booleans())
    if not validate:
        n = sample.y_true.size
        bad = draw(arrays(np.bool_, n))
        values = draw(arrays(np.int64, n, elements=st.sampled_from((-3, -1, sample.k,
                                                                    sample.k + 7))))
        target = draw(st.sampled_from(("y_true", "y_pred")))
        labels = getattr(sample, target).copy()
        labels[bad] = values[bad]
        setattr(sample, target, labels)
    split = draw(st.integers(1, sample.y_true.size - 1))
    return sample, split, validate


@SETTINGS
@given(case=merge_cases(), path=st.sampled_from(("dense", "statistics")))
def test_merge_halves_equals_whole(backend, case, path):
    sample, split, validate = case
    context = statistics_path() if path == "statistics" else contextlib.nullcontext()
    w = sample.weights
    with context:
        whole = _state(backend, sample.y_true, sample.y_pred, w, sample.k, validate)
        first = _state(backend, sample.y_true[:split], sample.y_pred[:split],
                       None if w is None else w[:split], sample.k, validate)
        second = _state(backend, sample.y_true[split:], sample.y_pred[split:],
                        None if w is None else w[split:], sample.k, validate)
    assert_same_statistics(backend, first.merge(second), whole, exact=sample.exact)
    if not validate:
        t, p = sample.y_true, sample.y_pred
        out_of_range = (t < 0) | (t >= sample.k) | (p < 0) | (p >= sample.k)
        assert whole.invalid == int(out_of_range.sum())


@SETTINGS
@given(case=merge_cases())
def test_dense_and_statistics_paths_same_state(backend, case):
    sample, _, validate = case
    dense = _state(backend, sample.y_true, sample.y_pred, sample.weights, sample.k, validate)
    with statistics_path():
        per_class = _state(backend, sample.y_true, sample.y_pred, sample.weights, sample.k,
                           validate)
    assert_same_statistics(backend, per_class, dense, exact=sample.exact)


def test_statistics_path_is_really_taken(backend):
    """The patch reaches the backend's per-class pass (no dense matrix built)."""
    t, p = put(backend, np.array([0, 1, 2, 2]), np.array([0, 2, 2, 1]))
    inputs = check_label_inputs(t, p, num_classes=3)
    assert accumulate(inputs)[1] is not None
    with statistics_path():
        assert accumulate(inputs)[1] is None


# -- statistics path == dense path, every public function ------------------------------


@pytest.mark.exhaustive_on_emulated  # minutes on the emulator
def test_statistics_path_equals_dense_path(backend):
    @_settings(backend)
    @given(sample=samples(), num_classes_given=st.booleans(), data=st.data())
    def run(sample, num_classes_given, data):
        assume(_some_weight(sample.weights))
        kw = {"num_classes": sample.k} if num_classes_given else {}
        t, p, w = put(backend, sample.y_true, sample.y_pred, sample.weights)
        dense, dense_warnings = all_metrics(backend, t, p, sample_weight=w, **kw)
        with statistics_path():
            per_class, per_class_warnings = all_metrics(backend, t, p, sample_weight=w, **kw)
        assert_same_metrics(per_class, dense, exact=sample.exact)
        assert per_class_warnings == dense_warnings

        # kappa with labels= (positions are the order of labels; absent classes included)
        labels = data.draw(st.lists(st.integers(0, sample.k - 1), min_size=1, max_size=sample.k,
                                    unique=True), label="labels")
        if np.isin(sample.y_true, labels).any():
            for weights in (None, "linear", "quadratic"):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)
                    expected = mg.cohen_kappa_score(t, p, labels=labels, weights=weights,
                                                    sample_weight=w)
                    with statistics_path():
                        value = mg.cohen_kappa_score(t, p, labels=labels, weights=weights,
                                                     sample_weight=w)
                np.testing.assert_allclose(backend.to_numpy(value), backend.to_numpy(expected),
                                           rtol=0 if sample.exact else RTOL,
                                           atol=0 if sample.exact else ATOL, equal_nan=True)

    run()


# -- ignore_index ------------------------------------------------------------------------


@pytest.mark.exhaustive_on_emulated  # minutes on the emulator
def test_ignore_index_equals_filtering(backend):
    @_settings(backend)
    @given(sample=samples(), num_classes_given=st.booleans(), data=st.data())
    def run(sample, num_classes_given, data):
        k = sample.k
        ignore_index = data.draw(st.sampled_from((-1, -100, k, k + 5, *range(k))),
                                 label="ignore_index")
        ignored = data.draw(arrays(np.bool_, sample.y_true.size), label="ignored")
        y_true = np.where(ignored, ignore_index, sample.y_true)
        keep = y_true != ignore_index
        if not keep.any():
            keep[0] = True
            y_true[0] = (ignore_index + 1) % k
        kw = {"num_classes": k} if num_classes_given else {}
        w = sample.weights
        assume(_some_weight(None if w is None else w[keep]))
        t, p, wb = put(backend, y_true, sample.y_pred, w)
        kt, kp, kw_ = put(backend, y_true[keep], sample.y_pred[keep],
                          None if w is None else w[keep])

        filtered, filtered_warnings = all_metrics(backend, kt, kp, sample_weight=kw_, **kw)
        ignored_result, ignored_warnings = all_metrics(backend, t, p, sample_weight=wb,
                                                       ignore_index=ignore_index, **kw)
        assert_same_metrics(ignored_result, filtered, exact=sample.exact)
        assert ignored_warnings == filtered_warnings

    run()


@pytest.mark.parametrize("num_classes", (None, 5), ids=("present", "num_classes=5"))
def test_ignore_index_example(backend, num_classes):
    """A hand-checked case of the property above (ignore_index = -1)."""
    y_true = np.array([0, -1, 1, 2, -1, 2])
    y_pred = np.array([0, 1, 1, 0, 2, 2])
    t, p = put(backend, y_true, y_pred)
    kw = {} if num_classes is None else {"num_classes": num_classes}
    cm = backend.to_numpy(mg.confusion_matrix(t, p, ignore_index=-1, **kw))
    expected = np.zeros((3, 3) if num_classes is None else (5, 5), dtype=np.int64)
    expected[0, 0] = expected[1, 1] = expected[2, 2] = 1
    expected[2, 0] = 1
    np.testing.assert_array_equal(cm, expected)
    assert float(backend.to_numpy(mg.accuracy_score(t, p, ignore_index=-1, **kw))) == 0.75


# -- one class holding nearly all the weight -------------------------------------

# Against the exact value (rational arithmetic), where float64 sums of the
# dominant class's counts absorb every other weight: the metrics that cancel
# (kappa, MCC) are left with rounding of their own terms only.
DOMINATED_TOLERANCE = 1e-9


@st.composite
def dominated_samples(draw):
    """Float weights of 0.01 to 10 (samples()), plus a few correct samples of
    one class with a weight 2**54 to 2**70 times larger: every other weight
    lies below the rounding of that class's support, predicted and total
    counts. Half the time they are misclassified as one other class (nearly
    all the weight off the diagonal: the case where MCC's covariance over
    pairs of classes cancels). Shuffled, so the large weights come anywhere
    in the sums."""
    sample = draw(samples(max_k=6, max_n=30, weight_kinds=("float",)))
    dominant = draw(st.integers(0, sample.k - 1))
    predicted = dominant
    if sample.k > 1 and draw(st.booleans()):
        predicted = (dominant + draw(st.integers(1, sample.k - 1))) % sample.k
    repeats = draw(st.integers(1, 3))
    large = 2.0 ** draw(st.integers(54, 70)) * draw(st.sampled_from((1.0, 1.25, 1.9921875)))
    y_true = np.concatenate([sample.y_true, np.full(repeats, dominant)])
    y_pred = np.concatenate([sample.y_pred, np.full(repeats, predicted)])
    weights = np.concatenate([sample.weights, np.full(repeats, large)])
    order = draw(st.permutations(range(y_true.size)))
    return Sample(sample.k, y_true[order], y_pred[order], weights[order], "float")


def _close_to_exact(ours, exact) -> bool:
    return abs(float(ours) - exact) <= DOMINATED_TOLERANCE * max(1.0, abs(exact))


def test_cohen_kappa_and_mcc_when_one_class_holds_nearly_all_weight(backend):
    """Kappa (every weighting) and MCC of dominated samples are their exact
    values on the dense path, the per-class statistics path and the stream:
    the class of the defect where s - sum(tp), s s - t.p, the linear gaps
    about the totals and MCC's differences of squares cancelled to 0 (kappa
    NaN or -inf, MCC 0 where it is 0.7), and where MCC's covariance over
    pairs of classes cancelled when that weight is misclassified."""
    from test_fuzz import exact_cohen_kappa, exact_matthews_corrcoef

    @_settings(backend)
    @given(sample=dominated_samples())
    def run(sample):
        labels = list(range(sample.k))
        exact_weights = [Fraction(float(w)) for w in sample.weights]
        rows = (sample.y_true.tolist(), sample.y_pred.tolist(), exact_weights)
        kappas = {weights: exact_cohen_kappa(*rows, labels=labels, kappa_weights=weights)
                  for weights in ("linear", "quadratic", None)}
        mcc = exact_matthews_corrcoef(*rows)
        t, p, w = put(backend, sample.y_true, sample.y_pred, sample.weights)
        for path in (contextlib.nullcontext, statistics_path):
            with path():
                for weights, exact in kappas.items():
                    if exact is None:
                        continue
                    ours = mg.cohen_kappa_score(t, p, weights=weights, sample_weight=w,
                                                num_classes=sample.k)
                    assert _close_to_exact(backend.to_numpy(ours), exact), (path, weights)
                ours = mg.matthews_corrcoef(t, p, sample_weight=w, num_classes=sample.k)
                assert _close_to_exact(backend.to_numpy(ours), mcc), path
        metrics = mg.ClassificationMetrics(sample.k)
        metrics.update(t, p, w)
        report = metrics.compute()
        for weights, name in ((None, "cohen_kappa"), ("linear", "linear_weighted_kappa"),
                              ("quadratic", "quadratic_weighted_kappa")):
            if kappas[weights] is not None:
                assert _close_to_exact(backend.to_numpy(report[name]), kappas[weights]), name
        assert _close_to_exact(backend.to_numpy(report["matthews_corrcoef"]), mcc)

    run()


def test_mcc_of_exact_counts_is_exact(backend):
    """Integer weights whose sums stay below 2**53 (exact float64 counts): MCC
    within a few roundings of its exact value (relative 1e-12), however much
    the covariance's terms cancel (each form is evaluated with error-free
    products and sums). The class of the long fuzz run's -5.41e-08 for an
    exact -5.38e-08."""
    from test_fuzz import exact_matthews_corrcoef

    @_settings(backend)
    @given(k=st.integers(2, 5), data=st.data())
    def run(k, data):
        n = data.draw(st.integers(2, 25))
        codes = st.lists(st.integers(0, k - 1), min_size=n, max_size=n)
        y_true = np.array(data.draw(codes))
        y_pred = np.array(data.draw(codes))
        weights = np.array(data.draw(st.lists(
            st.one_of(st.integers(0, 3), st.integers(2**40, 2**47)), min_size=n, max_size=n)),
            dtype=np.int64)
        assume(weights.sum() > 0)
        exact = exact_matthews_corrcoef(y_true.tolist(), y_pred.tolist(),
                                        [Fraction(int(w)) for w in weights])
        t, p, w = put(backend, y_true, y_pred, weights)
        for num_classes in (k, None):
            ours = float(backend.to_numpy(mg.matthews_corrcoef(t, p, sample_weight=w,
                                                               num_classes=num_classes)))
            assert abs(ours - exact) <= 1e-12 * abs(exact) + 1e-300, (num_classes, ours, exact)

    run()


def test_kappa_and_mcc_do_not_see_a_power_of_two_scaling_of_the_weights(backend):
    """Scaling every weight by 2**k (exact) leaves kappa (every weighting) and
    MCC as they were, from weights about 1e-303 to 1e302: their
    pair sums are taken on weights scaled by the total's power of two, so
    that products of two weights neither overflow nor underflow (the class
    of the long fuzz run's subnormal kappa, 1 - x/0)."""

    @_settings(backend)
    @given(sample=samples(max_k=6, max_n=40, weight_kinds=("float",)),
           exponent=st.integers(-1000, 1000))
    def run(sample, exponent):
        assume(_some_weight(sample.weights))  # all-zero weights are refused
        results = []
        for scale in (1.0, 2.0 ** exponent):
            t, p, w = put(backend, sample.y_true, sample.y_pred, sample.weights * scale)
            values = [mg.cohen_kappa_score(t, p, weights=kw, sample_weight=w,
                                           num_classes=sample.k)
                      for kw in (None, "linear", "quadratic")]
            values.append(mg.matthews_corrcoef(t, p, sample_weight=w, num_classes=sample.k))
            results.append([float(backend.to_numpy(v)) for v in values])
        # Bit for bit on numpy; the kernels add float weights with atomics,
        # in an order that changes from run to run.
        np.testing.assert_allclose(results[0], results[1], rtol=1e-12, atol=1e-12)

    run()


def test_specificity_of_a_class_without_negatives(backend):
    """A class that every target belongs to has no negatives: its specificity
    is the zero-division value on every path (stream, label_report,
    specificity_score), whatever the float weights and the order they were
    added in; the other classes' specificities are their exact values."""

    @_settings(backend)
    @given(sample=samples(max_k=6, max_n=60, weight_kinds=("float",)),
           target=st.integers(0, 5))
    def run(sample, target):
        k = sample.k
        target %= k
        assume(_some_weight(sample.weights))
        y_true = np.full(sample.y_pred.size, target)
        t, p, w = put(backend, y_true, sample.y_pred, sample.weights)
        exact_weights = [Fraction(float(v)) for v in sample.weights]
        total = sum(exact_weights, Fraction(0))
        exact = [float(sum((v for v, q in zip(exact_weights, sample.y_pred) if q != j),
                           Fraction(0)) / total) for j in range(k)]
        metrics = mg.ClassificationMetrics(k)
        metrics.update(t, p, w)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", mg.UndefinedMetricWarning)
            paths = {
                "stream": metrics.compute().per_class["specificity"],
                "label_report": mg.label_report(t, p, sample_weight=w, num_classes=k)
                .per_class["specificity"],
                "specificity_score": mg.specificity_score(t, p, sample_weight=w, num_classes=k,
                                                          average=None, zero_division=0.0),
            }
        for name, per_class in paths.items():
            per_class = backend.to_numpy(per_class)
            assert per_class[target] == 0.0, name
            others = [j for j in range(k) if j != target]
            np.testing.assert_allclose(per_class[others], np.array(exact)[others], rtol=1e-12,
                                       err_msg=name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", mg.UndefinedMetricWarning)
            ones = mg.specificity_score(t, p, sample_weight=w, num_classes=k, average=None,
                                        zero_division=1.0)
        assert backend.to_numpy(ones)[target] == 1.0

    run()
