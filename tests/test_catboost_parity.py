"""``catboost_metric`` against CatBoost's own ``catboost.utils.eval_metric``.

CatBoost takes labels as floats and raw approxes as an (N, K) array, and
returns a list: K values for the per-class metrics, one value otherwise.

Known, deliberate divergence: CatBoost's ``eval_metric`` helper applies the
object weights even with ``use_weights=false``; ``catboost_metric`` follows
CatBoost's documentation ("set all weights to 1"), so for that flag it is
compared with ``eval_metric`` called without weights.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import metrics_gpu as mg

catboost_utils = pytest.importorskip("catboost.utils")

RTOL = 1e-12
ATOL = 1e-13  # every metric here is O(1); absolute slack only for values at 0

PER_CLASS_SPECS = ("Precision", "Recall", "F1", "F:beta=2", "F:beta=0.5")
SCALAR_SPECS = (
    "TotalF1", "TotalF1:average=Weighted", "TotalF1:average=Macro", "TotalF1:average=Micro",
    "MCC", "Accuracy", "HammingLoss", "ZeroOneLoss", "Kappa", "WKappa",
)
LABEL_SPECS = PER_CLASS_SPECS + SCALAR_SPECS
# On the raw approxes, through the fused score pass (kernels/scores.cu).
SCORE_SPECS = ("MultiClass", "MultiClassOneVsAll", "HingeLoss")


def _catboost(y_true, approx, spec, weight=None):
    """CatBoost's own value, as a float64 array."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = catboost_utils.eval_metric(
            np.asarray(y_true, dtype=np.float64), np.asarray(approx, dtype=np.float64), spec,
            weight=None if weight is None else np.asarray(weight, dtype=np.float64),
        )
    return np.asarray(value, dtype=np.float64)


def _ours(backend, spec, y_true, approx, weight=None):
    value = mg.catboost_metric(
        spec, backend.asarray(y_true), backend.asarray(approx),
        weight=None if weight is None else backend.asarray(weight),
    )
    return np.asarray(backend.to_numpy(value), dtype=np.float64)


def _make_case(rng, num_classes, n_samples, *, absent_in_truth=(), never_predicted=(),
               weighted=False):
    approx = rng.normal(scale=2.0, size=(n_samples, num_classes))
    for k in never_predicted:
        approx[:, k] -= 1e3
    y_true = rng.integers(0, num_classes, n_samples)
    allowed = np.setdiff1d(np.arange(num_classes), np.asarray(absent_in_truth, dtype=int))
    bad = np.isin(y_true, absent_in_truth)
    y_true[bad] = rng.choice(allowed, int(bad.sum()))
    # make predictions correlated with the truth so the metrics are not all ~0
    boost = rng.random(n_samples) < 0.5
    approx[boost, y_true[boost]] += 3.0
    for k in never_predicted:  # keep them never predicted after the boost
        approx[:, k] = approx.min() - 1e3
    weight = rng.random(n_samples) * 3.0 if weighted else None
    if weighted:
        weight[rng.random(n_samples) < 0.1] = 0.0
    return y_true.astype(np.float64), approx, weight


# (K, N, classes absent from truth, classes never predicted)
SHAPES = {
    "K2": (2, 60, (), ()),
    "K2-never-pred-1": (2, 40, (), (1,)),
    "K2-absent-0": (2, 40, (0,), ()),
    "K3": (3, 80, (), ()),
    "K3-absent-2": (3, 80, (2,), ()),
    "K3-never-pred-0": (3, 80, (), (0,)),
    "K5": (5, 200, (), ()),
    "K5-absent-1-never-pred-3": (5, 200, (1,), (3,)),
    "K5-absent-and-never-pred-4": (5, 150, (4,), (4,)),
    "K10": (10, 500, (), ()),
    "K10-absent-0,7-never-pred-2,7,9": (10, 500, (0, 7), (2, 7, 9)),
}


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("spec", LABEL_SPECS + SCORE_SPECS)
def test_matches_eval_metric(backend, rng, spec, shape, weighted):
    num_classes, n, absent, never = SHAPES[shape]
    y_true, approx, weight = _make_case(rng, num_classes, n, absent_in_truth=absent,
                                        never_predicted=never, weighted=weighted)
    predicted = approx.argmax(axis=1)
    assert not np.isin(predicted, never).any() and not np.isin(y_true, absent).any()
    expected = _catboost(y_true, approx, spec, weight)
    ours = _ours(backend, spec, y_true, approx, weight)
    if spec in PER_CLASS_SPECS:
        assert ours.shape == (num_classes,), f"{spec}: per-class result shape {ours.shape}"
    else:
        assert ours.shape == (), f"{spec}: scalar result shape {ours.shape}"
        expected = expected.reshape(())
    np.testing.assert_allclose(ours, expected, rtol=RTOL, atol=ATOL, err_msg=spec)


@pytest.mark.parametrize("spec", ["Accuracy", "TotalF1", "TotalF1:average=Macro", "MCC",
                                  "Kappa", "WKappa", "Precision", "F1", "HammingLoss"])
def test_use_weights_false_ignores_weights(backend, rng, spec):
    """Documented behaviour: use_weights=false sets every weight to 1.
    (eval_metric itself still applies them: compared without weights.)"""
    y_true, approx, weight = _make_case(rng, 4, 120, weighted=True)
    flagged = f"{spec};use_weights=false" if ":" in spec else f"{spec}:use_weights=false"
    expected = _catboost(y_true, approx, spec)  # no weights
    ours = _ours(backend, flagged, y_true, approx, weight)
    np.testing.assert_allclose(ours, expected.reshape(ours.shape), rtol=RTOL, atol=ATOL)
    weighted = _catboost(y_true, approx, spec, weight)
    assert not np.allclose(weighted, expected), "test data: weights must change the value"


@pytest.mark.parametrize("spec", ["Accuracy:use_weights=true", "MCC:use_weights=True",
                                  "TotalF1:average=Macro;use_weights=true"])
def test_use_weights_true_applies_weights(backend, rng, spec):
    y_true, approx, weight = _make_case(rng, 4, 120, weighted=True)
    plain = spec.split(":")[0] + (":average=Macro" if "Macro" in spec else "")
    expected = _catboost(y_true, approx, plain, weight)
    ours = _ours(backend, spec, y_true, approx, weight)
    np.testing.assert_allclose(ours, expected.reshape(ours.shape), rtol=RTOL, atol=ATOL)


DEGENERATE = {
    # everything true class 0 and predicted 0: Kappa / WKappa -1, MCC 0
    "all-correct-one-class": ([0, 0, 0, 0, 0, 0], [[1.0, 0.0, 0.0]] * 6),
    # all predicted class 0, truth mixed: MCC 0 (undefined), kappa 0
    "constant-prediction": ([0, 0, 0, 1, 1, 2], [[1.0, 0.0, 0.0]] * 6),
    # ties everywhere: argmax picks the lowest index
    "all-ties": ([0, 1, 2, 0, 1, 2], [[0.0, 0.0, 0.0]] * 6),
    "perfect": ([0, 1, 2, 1], [[3.0, 0, 0], [0, 3.0, 0], [0, 0, 3.0], [0, 3.0, 0]]),
    "single-sample": ([1], [[0.0, 1.0, 0.5]]),
}


@pytest.mark.parametrize("case", sorted(DEGENERATE))
@pytest.mark.parametrize("spec", LABEL_SPECS)
def test_degenerate_cases_match(backend, spec, case):
    y_true, approx = DEGENERATE[case]
    y_true = np.asarray(y_true, dtype=np.float64)
    approx = np.asarray(approx, dtype=np.float64)
    expected = _catboost(y_true, approx, spec)
    ours = _ours(backend, spec, y_true, approx)
    np.testing.assert_allclose(ours, expected.reshape(ours.shape), rtol=RTOL, atol=ATOL,
                               err_msg=spec)


def test_integer_labels_accepted(backend, rng):
    y_true, approx, _ = _make_case(rng, 3, 50)
    for spec in ("Accuracy", "TotalF1:average=Macro", "Precision"):
        from_float = _ours(backend, spec, y_true, approx)
        from_int = _ours(backend, spec, y_true.astype(np.int64), approx)
        expected = _catboost(y_true, approx, spec)
        np.testing.assert_allclose(from_int, expected.reshape(from_int.shape), rtol=RTOL,
                                   atol=ATOL)
        np.testing.assert_array_equal(from_int, from_float)


def test_known_values(backend):
    """A small case with values worked by hand (and checked against CatBoost)."""
    y_true = np.array([0, 1, 2, 2], dtype=np.float64)
    approx = np.array([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [0.5, 0.2, 0.9], [1.0, 0.0, 0.0]])
    # predictions [0, 1, 2, 0]: tp (1, 1, 1), support (1, 1, 2), predicted (2, 1, 1)
    # TotalF1 per class 2tp/(support+pred) = 2/3, 1, 2/3; macro = 7/9
    ours = _ours(backend, "TotalF1:average=Macro", y_true, approx)
    assert ours == pytest.approx(7 / 9, rel=1e-15)
    # weighted (default) by support: (2/3 + 1 + 2 * 2/3) / 4 = 3/4
    assert _ours(backend, "TotalF1", y_true, approx) == pytest.approx(0.75, rel=1e-15)
    np.testing.assert_allclose(_ours(backend, "Precision", y_true, approx), [0.5, 1.0, 1.0])
    np.testing.assert_allclose(_ours(backend, "Recall", y_true, approx), [1.0, 1.0, 0.5])
    assert _catboost(y_true, approx, "TotalF1:average=Macro")[0] == pytest.approx(7 / 9)


@pytest.mark.parametrize("spec", SCORE_SPECS)
def test_score_metrics_use_weights_false(backend, rng, spec):
    """use_weights=false: every weight 1, whatever is passed."""
    y_true, approx, weight = _make_case(rng, 4, 120, weighted=True)
    ours = _ours(backend, f"{spec}:use_weights=false", y_true, approx, weight)
    np.testing.assert_allclose(ours, _catboost(y_true, approx, spec)[0], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("auc_type", ["Mu", "OneVsAll"])
@pytest.mark.parametrize("num_classes", [2, 4])
def test_auc_spec_weights_as_catboost(backend, rng, auc_type, num_classes):
    """Through the spec string: AUC ignores weights by default (CatBoost's
    documented ``use_weights=false``) and applies them with
    ``use_weights=true``, as ``eval_metric`` does. Coarse weights with zeros
    and rounded approxes (ties between weighted samples)."""
    y_true, approx, _ = _make_case(rng, num_classes, 90)
    approx = np.round(approx)
    weight = rng.choice([0.0, 0.5, 1.0, 2.0, 3.5], size=y_true.size)
    weighted_spec = f"AUC:use_weights=true;type={auc_type}"
    expected = _catboost(y_true, approx, weighted_spec, weight)
    unweighted = _catboost(y_true, approx, f"AUC:type={auc_type}")
    assert not np.allclose(expected, unweighted)  # the weights matter on this case
    np.testing.assert_allclose(_ours(backend, weighted_spec, y_true, approx, weight).ravel(),
                               expected, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(_ours(backend, f"AUC:type={auc_type}", y_true, approx,
                                     weight).ravel(), unweighted, rtol=RTOL, atol=ATOL)


def test_score_metrics_hand_worked(backend):
    """MultiClass, MultiClassOneVsAll and HingeLoss from the seed's formulas."""
    y_true = np.array([0.0, 2.0])
    approx = np.array([[2.0, 0.0, 0.0], [1.0, 0.0, 1.0]])
    # MultiClass: -mean log softmax(a)[t].
    log_softmax = [2.0 - np.log(np.exp(2.0) + 2.0), 1.0 - np.log(2 * np.e + 1.0)]
    # MultiClassOneVsAll: -(1/K) sum_j [j == t] log s(a_j) + [j != t] log(1 - s(a_j)).
    s = 1.0 / (1.0 + np.exp(-approx))
    one_hot = np.array([[1, 0, 0], [0, 0, 1]])
    ova = -(np.where(one_hot == 1, np.log(s), np.log(1 - s)).sum(axis=1) / 3).mean()
    # HingeLoss: max(0, 1 - (a_t - max_{j != t} a_j)): row 0 margin 2, row 1 margin 0.
    expected = {"MultiClass": -np.mean(log_softmax), "MultiClassOneVsAll": ova,
                "HingeLoss": (0.0 + 1.0) / 2}
    for spec, value in expected.items():
        np.testing.assert_allclose(_ours(backend, spec, y_true, approx), value, rtol=RTOL,
                                   err_msg=spec)
        np.testing.assert_allclose(_catboost(y_true, approx, spec)[0], value, rtol=RTOL,
                                   err_msg=f"CatBoost {spec}")


@pytest.mark.parametrize(
    "spec, match",
    [
        ("Foo", "Foo"),
        ("precision", "precision"),                        # names are case-sensitive
        ("TotalF1:average=Samples", "Samples"),
        ("TotalF1:averge=Macro", "averge"),
        ("Precision:class=1", "class"),                   # CatBoost rejects it too
        ("Accuracy:beta=2", "beta"),
        ("F", "beta"),                                     # F needs beta
        ("F:beta=abc", "beta"),
        ("F:beta=-1", "beta"),
        ("Accuracy:use_weights=maybe", "use_weights"),
        ("MCC:nonsense", "nonsense"),                      # not key=value
        ("", "spec"),
        ("   ", "spec"),
    ],
    ids=lambda value: repr(value) if isinstance(value, str) else None,
)
def test_bad_specs_raise_value_error(backend, spec, match):
    y_true = backend.asarray(np.array([0.0, 1.0, 2.0]))
    approx = backend.asarray(np.eye(3))
    with pytest.raises(ValueError, match=match):
        mg.catboost_metric(spec, y_true, approx)


def test_non_string_spec_raises(backend):
    with pytest.raises(ValueError, match="spec"):
        mg.catboost_metric(None, backend.asarray(np.array([0.0, 1.0])), backend.asarray(np.eye(2)))


@pytest.mark.parametrize("shape", [(4,), (4, 1), (2, 2, 2)], ids=["1-D", "one-column", "3-D"])
def test_approx_must_be_n_by_k(backend, shape):
    with pytest.raises(ValueError, match="approx"):
        mg.catboost_metric("Accuracy", backend.asarray(np.zeros(4)),
                           backend.asarray(np.zeros(shape)))


def test_catboost_rejects_what_we_reject():
    """Sanity check of the reference: CatBoost itself refuses these specs."""
    y_true = np.array([0.0, 1.0, 2.0])
    approx = np.eye(3)
    for spec in ("Foo", "TotalF1:average=Samples", "Precision:class=1"):
        with pytest.raises(Exception):
            catboost_utils.eval_metric(y_true, approx, spec)
