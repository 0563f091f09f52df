"""The binned average precision's error bound (issue 52): it holds against
the exact value (metrics_gpu.average_precision_score) across score
distributions, with and without weights, is within 5x the actual error on the
median case, and is attained when every bin's positives come first, tied."""

from __future__ import annotations

import numpy as np
import pytest

import metrics_gpu
from metrics_gpu._formulas import labels as F

N = 20_000


def scores_of(kind: str, rng):
    """``(y, s, weight)`` of one distribution of binary scores in [0, 1]."""
    weight = None
    if kind == "uniform":
        s = rng.random(N)
        y = rng.random(N) < s
    elif kind == "beta":
        y = rng.random(N) < 0.3
        s = np.where(y, rng.beta(5, 2, N), rng.beta(2, 5, N))
    elif kind == "skewed":
        y = rng.random(N) < 0.2
        s = np.where(y, rng.beta(1, 0.3, N), rng.beta(0.5, 3, N))
    elif kind == "ties":  # 37 distinct scores, on a grid that is not the bins'
        s = np.round(rng.random(N) * 36) / 36
        y = rng.random(N) < s
    elif kind == "rare":
        y = rng.random(N) < 0.01
        s = np.clip(rng.normal(0.3 + 0.3 * y, 0.15), 0.0, 1.0)
    elif kind == "weights":
        s = rng.random(N)
        y = rng.random(N) < s ** 2
        weight = rng.exponential(size=N)
    elif kind == "integer_weights":
        s = rng.beta(2, 2, N)
        y = rng.random(N) < s
        weight = rng.integers(1, 6, N).astype(np.float64)
    return y.astype(np.int64), s, weight


KINDS = ("uniform", "beta", "skewed", "ties", "rare", "weights", "integer_weights")
THRESHOLDS = (32, 256)


def binned(y, s, weight, thresholds):
    """The binned AP of class 1 and its bound, from the streaming state."""
    metrics = metrics_gpu.ClassificationMetrics(2, thresholds=thresholds, scores="probabilities")
    metrics.update(y, np.column_stack([1.0 - s, s]), sample_weight=weight)
    report = metrics.compute()
    # The per-class columns of the score buffer: AUC, AP, their bounds, positives.
    head = len(F.STREAM_SCORE_SLOTS) + len(metrics._spec["top_k"]) + 3 * metrics._spec["n_bins"]
    values = np.asarray(report._score_values)
    return float(report["average_precision"]), float(values[head + 3 * 2 + 1])


@pytest.fixture(scope="module")
def cases():
    rng = np.random.default_rng(52)
    out = {}
    for kind in KINDS:
        y, s, weight = scores_of(kind, rng)
        exact = float(metrics_gpu.average_precision_score(y, s, sample_weight=weight))
        for thresholds in THRESHOLDS:
            out[kind, thresholds] = (exact, *binned(y, s, weight, thresholds))
    return out


@pytest.mark.parametrize("thresholds", THRESHOLDS)
@pytest.mark.parametrize("kind", KINDS)
def test_the_bound_holds(cases, kind, thresholds):
    exact, ap, bound = cases[kind, thresholds]
    assert abs(ap - exact) <= bound + 1e-12


def test_the_bound_is_within_5x_the_error_on_the_median_case(cases):
    ratios = [bound / abs(ap - exact) for exact, ap, bound in cases.values()
              if abs(ap - exact) > 1e-9]
    assert len(ratios) >= len(cases) - 2
    assert np.median(ratios) <= 5.0, sorted(ratios)


def test_the_bound_is_attained_with_each_bins_positives_first_and_tied():
    # Bins of width 1/4; in each, the positives tied at a higher score than
    # the negatives: the exact AP is the bound's upper end.
    y = np.array([1, 1, 0, 0, 1, 0, 0, 1, 0, 1, 0, 0])
    s = np.array([.95, .95, .9, .8, .7, .6, .55, .45, .3, .2, .1, .05])
    exact = float(metrics_gpu.average_precision_score(y, s))
    ap, bound = binned(y, s, None, 4)
    assert exact > ap
    assert exact - ap == pytest.approx(bound, rel=1e-12)


def test_the_former_bound_was_looser():
    # The bound of issue 52's report: sum_b (P_b / P) (P_b + N_b) / (count at or
    # above b), against which the new one is several times tighter.
    rng = np.random.default_rng(0)
    y, s, _ = scores_of("uniform", rng)
    b = np.minimum((s * 256).astype(int), 255)
    positive = np.bincount(b[y == 1], minlength=256).astype(np.float64)
    negative = np.bincount(b[y == 0], minlength=256).astype(np.float64)
    tp = np.cumsum(positive[::-1])[::-1]
    fp = np.cumsum(negative[::-1])[::-1]
    former = float((positive * (positive + negative) / (tp + fp)).sum() / positive.sum())
    bound = float(F.binned_rank_areas(positive, negative)[3])
    assert bound < former / 5


def test_the_state_reports_the_formulas_bound(backend):
    """Every backend's streaming state (the kernel on emulated and cuda)
    reports the bound of metrics_gpu._formulas.labels.binned_rank_areas."""
    rng = np.random.default_rng(7)
    y, s, weight = scores_of("weights", rng)
    y, s, weight = y[:3000], s[:3000], weight[:3000]
    ap, bound = binned(y, s, weight, 64)
    b = np.minimum((s * 64).astype(int), 63)
    positive = np.bincount(b[y == 1], weight[y == 1], minlength=64)
    negative = np.bincount(b[y == 0], weight[y == 0], minlength=64)
    _, _, want_ap, want_bound = F.binned_rank_areas(positive, negative)
    assert ap == pytest.approx(float(want_ap), rel=1e-9)
    assert bound == pytest.approx(float(want_bound), rel=1e-9)
