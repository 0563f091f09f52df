"""scikit-learn 1.9's classification functions that came late: ``det_curve``,
``confusion_matrix_at_thresholds``, ``auc``, ``class_likelihood_ratios``,
``d2_log_loss_score``, ``d2_brier_score``, and ``log_loss``'s deprecated
``y_pred`` alias and one-hot ``y_true``.

Each is held to scikit-learn at 1e-12 on hypothesis cases (weights with zeros,
ties, one class present, ``pos_label``) on every backend, with the same
warnings (category and text) where scikit-learn warns and a ValueError where
it refuses. The wide random run is tests/test_fuzz.py.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import sklearn.metrics as skm
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import metrics_gpu as mg

RTOL = 1e-12
SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
EXAMPLES = {"numpy": 25, "emulated": 8, "cuda": 25}


def _settings(backend) -> settings:
    return settings(SETTINGS, max_examples=EXAMPLES[backend.name])


def _run(call):
    """``("value", result, warnings)`` or ``("refused", message, warnings)``; the
    warnings as (category name, text), RuntimeWarnings (NumPy's 0/0) left out."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            outcome = ("value", call())
        except ValueError as error:
            outcome = ("refused", str(error))
    seen = [(w.category.__name__, str(w.message)) for w in caught
            if not issubclass(w.category, RuntimeWarning)]
    return (*outcome, seen)


def _same(backend, call_ours, call_theirs, *, refusal_text: bool = False):
    """Both refuse (with the same text when ``refusal_text``), or both answer the
    same numbers with the same warnings."""
    theirs_kind, theirs, theirs_warned = _run(call_theirs)
    ours_kind, ours, ours_warned = _run(call_ours)
    assert ours_kind == theirs_kind, (ours, theirs)
    if theirs_kind == "refused":
        if refusal_text:
            assert ours == theirs
        return
    assert ours_warned == theirs_warned
    ours = ours if isinstance(ours, tuple) else (ours,)
    theirs = theirs if isinstance(theirs, tuple) else (theirs,)
    assert len(ours) == len(theirs)
    for got, expected in zip(ours, theirs):
        got = backend.to_numpy(got)
        expected = np.asarray(expected)
        assert got.shape == expected.shape, (got, expected)
        if expected.dtype.kind == "f":
            assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64),
                                   rtol=RTOL, atol=RTOL, equal_nan=True)


@st.composite
def binary_cases(draw, max_n: int = 24):
    """0/1 (or 3/7) targets, scores with ties, weights with zeros (or none)."""
    n = draw(st.integers(2, max_n))
    codes = draw(st.sampled_from(((0, 1), (3, 7))))
    one_class = draw(st.booleans()) and draw(st.booleans())
    y_true = np.array(draw(st.lists(st.sampled_from(codes[:1] if one_class else codes),
                                    min_size=n, max_size=n)))
    scores = np.array(draw(st.lists(st.floats(-3, 3, allow_nan=False), min_size=n,
                                    max_size=n)))
    if draw(st.booleans()):
        scores = np.round(scores)  # ties
    kind = draw(st.sampled_from(("none", "ints", "floats")))
    weights = None
    if kind == "ints":
        weights = np.array(draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)), float)
    elif kind == "floats":
        weights = np.array(draw(st.lists(st.one_of(st.just(0.0), st.floats(0.01, 10)),
                                         min_size=n, max_size=n)))
    pos_label = draw(st.sampled_from((None, codes[0], codes[1])))
    return y_true, scores, weights, pos_label


def _put(backend, array):
    return None if array is None else backend.asarray(array)


# -- threshold sweeps: the counts and DET curve of the ranked scan -------------------------


@pytest.mark.parametrize("function", ["det_curve", "confusion_matrix_at_thresholds"])
def test_threshold_sweeps_equal_scikit_learn(backend, function):
    ours, theirs = getattr(mg, function), getattr(skm, function)

    @_settings(backend)
    @given(case=binary_cases(), drop=st.booleans())
    def run(case, drop):
        y_true, scores, weights, pos_label = case
        extra = {"drop_intermediate": drop} if function == "det_curve" else {}
        _same(backend,
              lambda: ours(backend.asarray(y_true), backend.asarray(scores),
                           pos_label=pos_label, sample_weight=_put(backend, weights), **extra),
              lambda: theirs(y_true, scores, pos_label=pos_label, sample_weight=weights,
                             **extra))

    run()


def test_det_curve_of_one_class_is_refused_as_scikit_learn(backend):
    y_true, scores = np.array([1, 1, 1]), np.array([0.2, 0.4, 0.4])
    with pytest.raises(ValueError, match="Only one class is present in y_true. Detection error "
                                         "tradeoff curve is not defined"):
        mg.det_curve(backend.asarray(y_true), backend.asarray(scores))
    with pytest.raises(ValueError, match="Only one class is present"):
        skm.det_curve(y_true, scores)


def test_det_curve_hand_worked(backend):
    """Scores 0.8 (pos), 0.4 (neg), 0.35 (pos), 0.1 (neg): at 0.35 one false
    positive of two, no false negative; at 0.4 one of each; at 0.8 one false
    negative of two, no false positive."""
    fpr, fnr, thresholds = mg.det_curve(backend.asarray(np.array([0, 0, 1, 1])),
                                        backend.asarray(np.array([0.1, 0.4, 0.35, 0.8])))
    np.testing.assert_array_equal(backend.to_numpy(fpr), [0.5, 0.5, 0.0])
    np.testing.assert_array_equal(backend.to_numpy(fnr), [0.0, 0.5, 0.5])
    np.testing.assert_array_equal(backend.to_numpy(thresholds), [0.35, 0.4, 0.8])


def test_threshold_sweeps_share_the_curve_points_of_roc_curve(backend):
    """The counts are roc_curve's points, not a second ranking: fps / fps[-1]
    is roc_curve's fpr without drop_intermediate (and its first point)."""
    rng = np.random.default_rng(3)
    y_true, scores = rng.integers(0, 2, 60), np.round(rng.random(60), 1)
    weights = rng.choice([0.0, 0.5, 2.0], 60)
    put = backend.asarray
    _, fps, _, tps, thresholds = mg.confusion_matrix_at_thresholds(
        put(y_true), put(scores), sample_weight=put(weights))
    fpr, tpr, roc_thresholds = mg.roc_curve(put(y_true), put(scores), sample_weight=put(weights),
                                            drop_intermediate=False)
    fps, tps = backend.to_numpy(fps), backend.to_numpy(tps)
    np.testing.assert_array_equal(backend.to_numpy(fpr)[1:], fps / fps[-1])
    np.testing.assert_array_equal(backend.to_numpy(tpr)[1:], tps / tps[-1])
    np.testing.assert_array_equal(backend.to_numpy(roc_thresholds)[1:],
                                  backend.to_numpy(thresholds))


# -- auc ------------------------------------------------------------------------------------


@given(x=st.lists(st.floats(-5, 5, allow_nan=False), min_size=0, max_size=12),
       direction=st.sampled_from(("increasing", "decreasing", "as drawn")),
       y_seed=st.integers(0, 2**16))
@settings(max_examples=40, deadline=None)
def test_auc_equals_scikit_learn(x, direction, y_seed):
    x = np.array(x)
    if direction == "increasing":
        x = np.sort(x)
    elif direction == "decreasing":
        x = np.sort(x)[::-1]
    y = np.random.default_rng(y_seed).random(x.shape[0])
    _same(_Host(), lambda: mg.auc(x, y), lambda: skm.auc(x, y), refusal_text=True)


def test_auc_of_a_roc_curve_is_roc_auc_score(backend):
    rng = np.random.default_rng(4)
    y_true, scores = rng.integers(0, 2, 50), np.round(rng.random(50), 1)
    fpr, tpr, _ = mg.roc_curve(backend.asarray(y_true), backend.asarray(scores))
    area = mg.auc(fpr, tpr)
    assert float(backend.to_numpy(area)) == pytest.approx(skm.roc_auc_score(y_true, scores),
                                                          rel=1e-12)


class _Host:
    """The backend case of host-only calls."""

    @staticmethod
    def to_numpy(value):
        return np.asarray(value)


# -- likelihood ratios -------------------------------------------------------------------------


REPLACEMENTS = (np.nan, 1.0, {"LR+": 3.0, "LR-": 0.25}, {"LR+": np.inf, "LR-": np.nan})


def test_class_likelihood_ratios_equal_scikit_learn(backend):

    @_settings(backend)
    @given(case=binary_cases(), replace=st.sampled_from(REPLACEMENTS),
           prediction_seed=st.integers(0, 2**16), labels=st.booleans())
    def run(case, replace, prediction_seed, labels):
        y_true, _, weights, _ = case
        codes = np.unique(y_true)
        pool = np.array([0, 1]) if codes.max() <= 1 else np.array([3, 7])
        y_pred = np.random.default_rng(prediction_seed).choice(pool, y_true.shape[0])
        options = {"replace_undefined_by": replace}
        if labels:
            options["labels"] = pool.tolist()
        _same(backend,
              lambda: mg.class_likelihood_ratios(backend.asarray(y_true), backend.asarray(y_pred),
                                                 sample_weight=_put(backend, weights), **options),
              lambda: skm.class_likelihood_ratios(y_true, y_pred, sample_weight=weights,
                                                  **options))

    run()


@pytest.mark.parametrize("y_true, y_pred", [
    ([0, 0, 1, 1], [0, 0, 0, 0]),   # nothing predicted positive: fp = tp = 0
    ([0, 0, 1, 1], [1, 1, 1, 1]),   # no true negative
    ([0, 0, 0, 0], [0, 1, 0, 1]),   # no positive sample
    ([0, 1, 1, 1], [0, 1, 1, 1]),   # perfect: fp = 0, tp > 0
], ids=["nothing-predicted", "no-tn", "no-positive", "perfect"])
@pytest.mark.parametrize("replace", REPLACEMENTS, ids=["nan", "one", "dict", "inf-nan"])
def test_class_likelihood_ratios_undefined_warn_as_scikit_learn(backend, y_true, y_pred, replace):
    y_true, y_pred = np.array(y_true), np.array(y_pred)
    _same(backend,
          lambda: mg.class_likelihood_ratios(backend.asarray(y_true), backend.asarray(y_pred),
                                             replace_undefined_by=replace),
          lambda: skm.class_likelihood_ratios(y_true, y_pred, replace_undefined_by=replace))


@pytest.mark.parametrize("replace", [0.5, {"LR+": 0.5, "LR-": 0.5}, {"LR+": 2.0},
                                     {"LR+": 2.0, "LR-": 1.5}, "nan"])
def test_class_likelihood_ratios_bad_replacement_is_a_value_error(replace):
    with pytest.raises(ValueError, match="replace_undefined_by"):
        mg.class_likelihood_ratios(np.array([0, 1]), np.array([0, 1]),
                                   replace_undefined_by=replace)


def test_class_likelihood_ratios_refuse_three_classes():
    with pytest.raises(ValueError, match="only supports binary classification"):
        mg.class_likelihood_ratios(np.array([0, 1, 2]), np.array([0, 1, 1]))


# -- D^2 scores --------------------------------------------------------------------------------


@st.composite
def probability_cases(draw, max_n: int = 20):
    """Every class present (scikit-learn's need), probabilities with ties and
    exact 0/1, weights with zeros; binary (N,) columns too."""
    k = draw(st.integers(2, 4))
    n = draw(st.integers(1, max_n))
    y_true = np.array(draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)))
    raw = np.array(draw(st.lists(st.floats(-4, 4, allow_nan=False), min_size=n * k,
                                 max_size=n * k))).reshape(n, k)
    if draw(st.booleans()):
        raw = np.round(raw)
    proba = np.exp(raw) / np.exp(raw).sum(axis=1, keepdims=True)
    if draw(st.booleans()) and draw(st.booleans()):
        proba = np.eye(k)[raw.argmax(axis=1)]
    weights = None
    if draw(st.booleans()):
        weights = np.array(draw(st.lists(st.one_of(st.just(0.0), st.floats(0.01, 10)),
                                         min_size=n, max_size=n)))
    return y_true, proba, weights, k


@pytest.mark.parametrize("function", ["d2_log_loss_score", "d2_brier_score"])
def test_d2_scores_equal_scikit_learn(backend, function):
    ours, theirs = getattr(mg, function), getattr(skm, function)

    @_settings(backend)
    @given(case=probability_cases(), labels=st.booleans(), column=st.booleans())
    def run(case, labels, column):
        y_true, proba, weights, k = case
        if not labels and np.unique(y_true).size < k:
            labels = True  # scikit-learn needs every class named (this package does not)
        options = {"labels": list(range(k))} if labels else {}
        if column and k == 2 and function == "d2_brier_score":
            proba = proba[:, 1]  # the positive class's column
        _same(backend,
              lambda: ours(backend.asarray(y_true), backend.asarray(proba),
                           sample_weight=_put(backend, weights), **options),
              lambda: theirs(y_true, proba, sample_weight=weights, **options))

    run()


@pytest.mark.parametrize("pos_label", [None, 0, 1])
def test_d2_brier_score_pos_label(backend, pos_label):
    y_true = np.array([0, 1, 1, 0, 1, 0, 0])
    proba = np.array([0.2, 0.7, 0.9, 0.4, 0.5, 0.1, 0.6])
    weights = np.array([1.0, 0.0, 2.5, 1.0, 0.5, 3.0, 1.0])
    _same(backend,
          lambda: mg.d2_brier_score(backend.asarray(y_true), backend.asarray(proba),
                                    sample_weight=backend.asarray(weights), pos_label=pos_label),
          lambda: skm.d2_brier_score(y_true, proba, sample_weight=weights, pos_label=pos_label))


@pytest.mark.parametrize("function", ["d2_log_loss_score", "d2_brier_score"])
def test_d2_of_one_sample_is_nan_with_scikit_learns_warning(backend, function):
    y_true, proba = np.array([1]), np.array([[0.3, 0.7]])
    _same(backend,
          lambda: getattr(mg, function)(backend.asarray(y_true), backend.asarray(proba),
                                        labels=[0, 1]),
          lambda: getattr(skm, function)(y_true, proba, labels=[0, 1]))


def test_d2_log_loss_score_hand_worked():
    """y = [0, 1, 1], p_true = (0.9, 0.8, 0.7): loss -log(0.504); the prior
    (1/3, 2/3) loses -log(1/3) - 2 log(2/3)."""
    got = mg.d2_log_loss_score(np.array([0, 1, 1]), np.array([[.9, .1], [.2, .8], [.3, .7]]))
    expected = 1 - (-np.log(0.9 * 0.8 * 0.7)) / (-np.log(1 / 3) - 2 * np.log(2 / 3))
    assert float(got) == pytest.approx(expected, rel=1e-14)


# -- log_loss: scikit-learn 1.9's y_pred alias and one-hot y_true ---------------------------------


@pytest.mark.parametrize("function", ["log_loss", "d2_log_loss_score"])
def test_y_pred_is_a_deprecated_alias_of_y_proba(backend, function):
    y_true, proba = np.array([0, 1, 1]), np.array([[.9, .1], [.2, .8], [.3, .7]])
    ours, theirs = getattr(mg, function), getattr(skm, function)
    _same(backend, lambda: ours(backend.asarray(y_true), y_pred=backend.asarray(proba)),
          lambda: theirs(y_true, y_pred=proba))
    _same(backend, lambda: ours(backend.asarray(y_true), backend.asarray(proba),
                                y_pred=backend.asarray(proba)),
          lambda: theirs(y_true, proba, y_pred=proba), refusal_text=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning without the alias
        ours(backend.asarray(y_true), y_proba=backend.asarray(proba))


def test_log_loss_takes_one_hot_y_true(backend):

    @_settings(backend)
    @given(case=probability_cases(), normalize=st.booleans())
    def run(case, normalize):
        y_true, proba, weights, k = case
        one_hot = np.eye(k, dtype=np.int64)[y_true]
        _same(backend,
              lambda: mg.log_loss(backend.asarray(one_hot), backend.asarray(proba),
                                  sample_weight=_put(backend, weights), normalize=normalize),
              lambda: skm.log_loss(one_hot, proba, sample_weight=weights, normalize=normalize))

    run()


@pytest.mark.parametrize("y_true, message", [
    ([[1, 1, 0], [0, 1, 0]], "row 0 is not one-hot"),
    ([[0, 0, 0], [0, 1, 0]], "row 0 is not one-hot"),
    ([[1, 0], [0, 1]], "different number of classes"),
], ids=["two-ones", "no-one", "columns"])
def test_log_loss_refuses_indicator_rows_it_cannot_read(y_true, message):
    proba = np.array([[0.2, 0.3, 0.5], [0.1, 0.8, 0.1]])
    with pytest.raises(ValueError, match=message):
        mg.log_loss(np.array(y_true), proba)


def test_one_hot_y_true_keeps_the_result_in_its_framework():
    torch = pytest.importorskip("torch")
    proba = np.array([[0.9, 0.1], [0.2, 0.8], [0.3, 0.7]])
    one_hot = np.eye(2, dtype=np.int64)[[0, 1, 1]]
    got = mg.log_loss(torch.from_numpy(one_hot), torch.from_numpy(proba))
    assert isinstance(got, torch.Tensor)
    assert float(got) == pytest.approx(skm.log_loss(one_hot, proba), rel=1e-12)
