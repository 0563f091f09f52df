"""Precision of the score metrics where it is easily lost, on every backend.

Two defect classes of the fused score pass (kernels/scores.cu, shared by
streaming.cu, and its NumPy reference):

* confident rows (p_t near 1): the Brier term sum_j p_j^2 - 2 p_t + 1, the
  loss log(s) next to m - z_t and CatBoost's one-vs-all sum_j softplus(z_j) -
  z_t are differences of nearly equal numbers, which leave the rounding of
  p_t (0.23 % low on 4,000 float32 rows of K = 10, found by the long fuzz
  profile), unless the target's term is kept apart;
* logits whose difference leaves the float range (m - z_t of 3e38 and
  -3e38): the kernels' loss was inf where it is 3e38.

References are exact: Python fractions and 200-digit decimals of the values
as stored, so each backend is held to what its scores' type allows (the
kernels' per-element exponentials are float for 32-bit and narrower
scores), not to another backend.
"""

from __future__ import annotations

import warnings
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import metrics_gpu as mg
from metrics_gpu._validation import score_dtype_eps

SCORE_DTYPES = ("float16", "bfloat16", "float32", "float64")
# 16-bit probabilities need not sum to 1 within the check's tolerance (the
# library warns, as scikit-learn does); the references take them as stored.
NOT_SUMMING = "ignore:The y_prob values do not sum to one:UserWarning"
# Digits of the decimal references: 1 - p_t of a float64 row of logits
# 345 apart is 1e-150, which p_t must hold.
DIGITS = 200


def _stored(values, dtype):
    """float64 ``values`` in the score type ``dtype`` (bfloat16 from ml_dtypes)."""
    if dtype == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        return values.astype(ml_dtypes.bfloat16)
    return values.astype(dtype)


def _exact_means(y_true, scores, weight, *, from_logits, one_vs_all=False, scale_by_half="auto"):
    """The weighted means of the Brier term sum_j (p_j - [j == t])^2, of
    -log p_t (probabilities clipped as log_loss clips them) and (with
    ``one_vs_all``, of logits) of CatBoost's one-vs-all term
    -log sigmoid(z_t) - sum_{j != t} log(1 - sigmoid(z_j)), over the stored
    values. The Brier mean is halved for K = 2 (scikit-learn's
    ``scale_by_half="auto"``: the mean of (p - y)^2 of the positive class;
    ``scale_by_half=False`` keeps the sum over both columns)."""
    eps = Decimal(score_dtype_eps(scores.dtype))
    weights = np.ones(len(y_true)) if weight is None else weight
    totals = [Decimal(0)] * 4  # weight, brier, nll, one-vs-all
    with localcontext() as context:
        context.prec = DIGITS
        for row, t, w in zip(scores, y_true, weights):
            z = [Decimal(float(v)) for v in row]  # exact: a binary float is a finite decimal
            if from_logits:
                m = max(z)
                e = [(v - m).exp() for v in z]
                s = sum(e)
                p = [v / s for v in e]
                nll = s.ln() - (z[t] - m)
            else:
                p = z
                nll = -min(max(z[t], eps), 1 - eps).ln()
            softplus = Decimal(0)
            if one_vs_all:  # -log sigmoid(z_t) - sum_{j != t} log(1 - sigmoid(z_j)), CatBoost's
                softplus = sum(max(v, Decimal(0)) + (1 + (-abs(v)).exp()).ln()
                               for v in (-z[j] if j == t else z[j] for j in range(len(z))))
            if from_logits:
                brier = sum((pj - (j == t)) ** 2 for j, pj in enumerate(p))
            else:  # probabilities: exact in fractions
                brier = Decimal(float(sum((Fraction(float(v)) - (j == t)) ** 2
                                          for j, v in enumerate(row))))
            w = Decimal(float(w))
            for i, term in enumerate((1, brier, nll, softplus)):
                totals[i] += w * term
        halve = 2 if scale_by_half == "auto" and scores.shape[1] == 2 else 1
        return (float(totals[1] / totals[0] / halve),
                *(float(total / totals[0]) for total in totals[2:]))


def _report(backend, y_true, scores, weight, *, from_logits, validate):
    """Brier score and cross-entropy of logits_report, as floats: validate=True
    takes the fused pass (scores.cu), validate=False the streaming update
    (streaming.cu)."""
    report = mg.logits_report(backend.asarray(y_true), backend.asarray(scores),
                              from_logits=from_logits, top_k=(1,), n_bins=5,
                              sample_weight=None if weight is None else backend.asarray(weight),
                              validate=validate)
    return (float(backend.to_numpy(report.brier_score)),
            float(backend.to_numpy(report.cross_entropy)))


def _rtol(backend, dtype, from_logits):
    """The relative error a backend's arithmetic allows: the NumPy backend
    computes in float64; the kernels take exponentials and squares of
    32-bit and narrower scores in float, where z - m rounds by 2^-24 of
    itself (at most 40 here) before its exp."""
    if backend.name == "numpy" or dtype == "float64":
        return 1e-12
    return 1e-5 if from_logits else 1e-6


# -- the examples -------------------------------------------------------------------------


@pytest.mark.filterwarnings(NOT_SUMMING)
def test_brier_score_of_a_confident_float32_row(backend):
    """The long fuzz profile's case: p = (0.998675, 0.00132502) in float32 gave
    1.74211e-06 on the kernels against 1.75567e-06."""
    y_true = np.array([0])
    scores = np.array([[0.998675, 0.00132502]], np.float32)
    expected, _, _ = _exact_means(y_true, scores, None, from_logits=False, scale_by_half=False)
    ours = mg.brier_score_loss(backend.asarray(y_true), backend.asarray(scores),
                               scale_by_half=False)
    assert float(backend.to_numpy(ours)) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("k, n", [(10, 4000), (300, 60)], ids=["K10", "K300"])
@pytest.mark.parametrize("from_logits", [False, True], ids=["probabilities", "logits"])
@pytest.mark.filterwarnings(NOT_SUMMING)
def test_brier_score_and_loss_of_confident_float32_rows(backend, rng, k, n, from_logits):
    """Many confident rows (K = 300: a warp per row on the kernels): the
    kernels' Brier score was 0.23 % low (probabilities) and 2e-4 low
    (logits); the loss of logits lost digits in log(s) of s near 1."""
    y_true = rng.integers(0, k, n)
    rows = np.arange(n)
    if from_logits:
        values = rng.normal(size=(n, k))
        values[rows, y_true] += 9.0
    else:
        values = rng.random((n, k)) * 1e-3 / k
        values[rows, y_true] = 0.0
        values[rows, y_true] = 1.0 - values.sum(axis=1)
    scores = values.astype(np.float32)
    brier, nll, _ = _exact_means(y_true, scores, None, from_logits=from_logits)
    rtol = _rtol(backend, "float32", from_logits)
    for validate in (True, False):
        ours = _report(backend, y_true, scores, None, from_logits=from_logits, validate=validate)
        np.testing.assert_allclose(ours, (brier, nll), rtol=rtol, err_msg=f"validate={validate}")
    if not from_logits:
        ours = mg.brier_score_loss(backend.asarray(y_true), backend.asarray(scores))
        assert float(backend.to_numpy(ours)) == pytest.approx(brier, rel=rtol)


def test_cross_entropy_of_logits_past_the_float_range(backend):
    """m - z_t = 3e38 - (-3e38) overflowed the kernels' float: inf, where the
    loss is 3.0e38 (log_loss, logits_report, ClassificationMetrics)."""
    y_true = np.array([0, 1])
    logits = np.array([[-3e38, 3e38], [0.0, 1.0]], np.float32)
    _, expected, _ = _exact_means(y_true, logits, None, from_logits=True)
    assert 2.9e38 < expected < 3.1e38  # the test's premise: finite in float64
    t, z = backend.asarray(y_true), backend.asarray(logits)
    got = {"log_loss": mg.log_loss(t, z, from_logits=True)}
    for validate in (True, False):
        report = mg.logits_report(t, z, top_k=(1,), validate=validate)
        got[f"logits_report(validate={validate})"] = report.cross_entropy
        assert np.isinf(float(backend.to_numpy(report.perplexity)))  # exp(3e38), no warning
    metrics = mg.ClassificationMetrics(2, top_k=(1,))
    metrics.update(t, z)
    got["ClassificationMetrics"] = metrics.compute()["cross_entropy"]
    for name, value in got.items():
        assert float(backend.to_numpy(value)) == pytest.approx(expected, rel=1e-6), name


def test_one_vs_all_of_logits_past_the_float_range(backend):
    """Two float softplus terms of 3e38 in one chunk overflowed their float
    sum (CatBoost MultiClassOneVsAll: inf for 3.75e37)."""
    y_true = np.array([0, 1])
    logits = np.array([[3e38, 3e38, -1.0, 2.0], [0.0, 1.0, 2.0, 3.0]], np.float32)
    _, _, expected = _exact_means(y_true, logits, None, from_logits=True, one_vs_all=True)
    ours = mg.catboost_metric("MultiClassOneVsAll", backend.asarray(y_true),
                              backend.asarray(logits))
    assert float(backend.to_numpy(ours)) == pytest.approx(expected / 4, rel=1e-6)


def test_one_vs_all_of_confident_rows(backend):
    """sum_j softplus(z_j) - z_t cancels for a confident row (softplus(20) =
    20 + 2e-9 is 20 in float): the kernels gave 9.7e-10 for 2.9e-9 here."""
    y_true = np.array([0, 1, 2])
    logits = np.array([[20.0, -20.0, -25.0], [-30.0, 18.0, -19.0], [-21.0, -22.0, 23.0]],
                      np.float32)
    _, _, expected = _exact_means(y_true, logits, None, from_logits=True, one_vs_all=True)
    ours = mg.catboost_metric("MultiClassOneVsAll", backend.asarray(y_true),
                              backend.asarray(logits))
    assert float(backend.to_numpy(ours)) == pytest.approx(expected / 3, rel=1e-5)


# -- the classes: properties over drawn rows -----------------------------------------------

# Examples per backend: an emulated example launches the kernels (a few
# hundred ms each on 2 cores).
EXAMPLES = {"numpy": 60, "emulated": 25, "cuda": 60}


def _settings(backend):
    return settings(max_examples=EXAMPLES[backend.name], deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


@st.composite
def confident_rows(draw):
    """(y_true, scores, weight, from_logits, dtype): rows of K = 2..50 whose
    confident class is the target (some rows: another class), drawn by how
    confident (the margin of the other columns, in logits or in decades of
    probability) and how spread; values from a seeded generator."""
    dtype = draw(st.sampled_from(SCORE_DTYPES))
    from_logits = draw(st.booleans())
    k = draw(st.integers(2, 50))
    n = draw(st.integers(1, 40))
    weighted = draw(st.booleans())
    wrong = draw(st.sampled_from((0.0, 0.2)))
    # Deep enough to lose digits, not so deep that a non-target square leaves
    # the normal range of the kernels' float (1e-38): the limit
    # kernels/scores.cu states.
    deepest = (300.0 if dtype == "float64" else 40.0) if from_logits else \
        (150.0 if dtype == "float64" else 7.0 if dtype == "float16" else 18.0)
    margin = draw(st.floats(0.0, deepest * 0.8))
    spread = draw(st.floats(0.0, deepest * 0.2))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    y_true = rng.integers(0, k, n)
    confident = np.where(rng.random(n) < wrong, rng.integers(0, k, n), y_true)
    rows = np.arange(n)
    depth = margin + rng.random((n, k)) * spread
    if from_logits:
        values = rng.uniform(-60.0, 60.0, (n, 1)) - depth
        values[rows, confident] = values[rows, confident] + depth[rows, confident]
    else:
        values = 10.0 ** -(0.5 + depth)
        values[rows, confident] = 0.0
        values *= np.minimum(1.0, 0.5 / values.sum(axis=1, keepdims=True))
        values[rows, confident] = 1.0 - values.sum(axis=1)
    weight = rng.uniform(0.01, 100.0, n) if weighted else None
    return y_true, _stored(values, dtype), weight, from_logits, dtype


@pytest.mark.filterwarnings(NOT_SUMMING)
def test_confident_rows_match_exact_values(backend):
    """Brier score and cross-entropy of confident rows, from probabilities and
    logits, weighted or not, both kernels (validate=True: the fused pass;
    False: the streaming update), within the precision of the scores' type
    of the exact value."""

    @_settings(backend)
    @given(case=confident_rows(), validate=st.booleans())
    def run(case, validate):
        y_true, scores, weight, from_logits, dtype = case
        brier, nll, _ = _exact_means(y_true, scores, weight, from_logits=from_logits)
        ours = _report(backend, y_true, scores, weight, from_logits=from_logits,
                       validate=validate)
        np.testing.assert_allclose(ours, (brier, nll), rtol=_rtol(backend, dtype, from_logits),
                                   atol=0.0, err_msg="(brier, cross-entropy)")

    run()


@st.composite
def extreme_logits(draw):
    """(y_true, logits, dtype): rows of K = 2..12 mixing the type's largest
    magnitudes (float64: 1e300, whose losses stay finite) with ordinary
    values."""
    dtype = draw(st.sampled_from(SCORE_DTYPES))
    if dtype == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        big = float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    else:
        big = 1e300 if dtype == "float64" else float(np.finfo(dtype).max)
    k = draw(st.integers(2, 12))
    n = draw(st.integers(1, 8))
    element = st.one_of(st.sampled_from((big, -big, big / 2, -big / 3, 0.0)),
                        st.floats(-big, big), st.floats(-30.0, 30.0))
    values = np.array(draw(st.lists(st.lists(element, min_size=k, max_size=k),
                                    min_size=n, max_size=n)))
    logits = _stored(values, dtype)
    y_true = np.array(draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)))
    return y_true, logits, dtype


def test_extreme_logits_do_not_overflow(backend):
    """Cross-entropy, Brier score and CatBoost's one-vs-all loss of logits as
    large as their type holds: finite where the exact value is, within the
    precision of the scores' type."""

    @_settings(backend)
    @given(case=extreme_logits(), validate=st.booleans())
    def run(case, validate):
        y_true, logits, dtype = case
        brier, nll, one_vs_all = _exact_means(y_true, logits, None, from_logits=True,
                                              one_vs_all=True)
        rtol = 1e-12 if backend.name == "numpy" or dtype == "float64" else 1e-6
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # no overflow on the way
            ours = _report(backend, y_true, logits, None, from_logits=True, validate=validate)
            ours_one_vs_all = float(backend.to_numpy(mg.catboost_metric(
                "MultiClassOneVsAll", backend.asarray(y_true), backend.asarray(logits))))
        np.testing.assert_allclose(ours[1], nll, rtol=rtol, err_msg="cross-entropy")
        np.testing.assert_allclose(ours[0], brier, rtol=rtol, atol=1e-300, err_msg="brier")
        np.testing.assert_allclose(ours_one_vs_all, one_vs_all / logits.shape[1], rtol=rtol,
                                   err_msg="one-vs-all")

    run()
