"""Confidence intervals (metrics_gpu.intervals): the draws, the formulas over
replicates, the intervals against scipy / statsmodels / a DeLong reference,
their coverage by simulation, and the reports that carry them."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from scipy import stats

from metrics_gpu import ClassificationMetrics, label_report, use_backend
from metrics_gpu._formulas import labels as F
from metrics_gpu._formulas import resample as R
from metrics_gpu import intervals as I

statsmodels_proportion = pytest.importorskip("statsmodels.stats.proportion")


# -- the draws ------------------------------------------------------------------


@pytest.mark.parametrize("counter,key,expected", [
    # Random123's known-answer vectors for philox4x32_10.
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
])
def test_philox_known_answers(counter, key, expected):
    assert tuple(int(w) for w in R.philox4x32(counter, key)) == expected


def test_log_and_log_factorial_are_accurate():
    x = np.concatenate([np.logspace(-300, 300, 4001), np.linspace(0.5, 2.0, 4001),
                        np.arange(1.0, 5000.0), [np.nextafter(1.0, 2.0), np.nextafter(1.0, 0.0)]])
    exact = np.log(x)
    assert np.all(np.abs(R.log(x) - exact) <= np.spacing(np.abs(exact)) + 1e-300)
    k = np.arange(0, 20000)
    exact = np.array([math.lgamma(v + 1.0) for v in k.tolist()])
    np.testing.assert_allclose(R.log_factorial(k), exact, rtol=2e-15, atol=1e-15)


@pytest.mark.parametrize("mean", [1, 4, 9, 10, 37, 5000, 10 ** 9])
def test_poisson_draws_follow_the_distribution(mean):
    n = 40000
    draws = R.poisson(np.full(n, mean), np.full(n, 3), np.arange(n), R.seed_key(2026))
    low, high = stats.poisson.ppf([1e-4, 1 - 1e-4], mean)
    edges = np.unique(np.linspace(low, high + 1, 40).astype(np.int64))
    bins = np.concatenate([[-1], edges, [np.iinfo(np.int64).max]])
    observed = np.histogram(draws, bins=bins)[0]
    expected = np.diff(stats.poisson.cdf(bins - 1, mean)) * n
    keep = expected > 5
    chi2 = ((observed[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-3
    assert abs(draws.mean() - mean) < 5 * math.sqrt(mean / n)


def test_poisson_draws_are_a_function_of_their_counter():
    means = np.array([0, 1, 5, 9, 10, 11, 200, 10 ** 7] * 50)
    cells = np.arange(means.size) * 7919
    replicates = np.arange(means.size) % 13
    key = R.seed_key(99)
    whole = R.poisson(means, cells, replicates, key)
    assert np.all(whole[means == 0] == 0)
    order = np.random.default_rng(0).permutation(means.size)
    shuffled = R.poisson(means[order], cells[order], replicates[order], key)
    np.testing.assert_array_equal(shuffled, whole[order])
    parts = np.concatenate([R.poisson(means[i:i + 17], cells[i:i + 17], replicates[i:i + 17],
                                      key) for i in range(0, means.size, 17)])
    np.testing.assert_array_equal(parts, whole)
    assert not np.array_equal(R.poisson(means, cells, replicates, R.seed_key(100)), whole)


# -- proportions against statsmodels -----------------------------------------------

STATSMODELS_NAMES = {"wilson": "wilson", "clopper-pearson": "beta",
                     "agresti-coull": "agresti_coull", "jeffreys": "jeffreys"}


@pytest.mark.parametrize("method", I.PROPORTION_METHODS)
@pytest.mark.parametrize("level", [0.8, 0.95, 0.999])
def test_proportion_interval_equals_statsmodels(method, level):
    count = np.array([0, 1, 3, 17, 50, 99, 100, 0, 1, 123456, 7])
    nobs = np.array([100, 100, 100, 100, 100, 100, 100, 1, 1, 1000000, 7])
    ci = I.proportion_interval(count, nobs, confidence_level=level, method=method)
    low, high = statsmodels_proportion.proportion_confint(
        count, nobs, alpha=1 - level, method=STATSMODELS_NAMES[method])
    np.testing.assert_allclose(ci.low, low, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ci.high, high, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ci.value, count / nobs, rtol=1e-15)
    single = I.proportion_interval(17, 100, confidence_level=level, method=method)
    assert isinstance(single.low, float) and single.low == pytest.approx(low[3], abs=1e-12)


def test_proportion_interval_refuses_bad_input():
    with pytest.raises(ValueError, match="count must hold non-negative integers"):
        I.proportion_interval(1.5, 10)
    with pytest.raises(ValueError, match="nobs must hold integers no smaller"):
        I.proportion_interval(11, 10)
    with pytest.raises(ValueError, match="confidence_level must be a number between 0 and 1"):
        I.proportion_interval(1, 10, confidence_level=95)
    with pytest.raises(ValueError, match="method must be one of 'wilson'"):
        I.proportion_interval(1, 10, method="bca")
    empty = I.proportion_interval(0, 0)
    assert math.isnan(empty.low) and math.isnan(empty.value)


# -- the formulas over replicates ---------------------------------------------


def _tables():
    rng = np.random.default_rng(5)
    yield np.array([[5, 1, 0], [2, 7, 1], [0, 0, 0]])   # an absent class
    yield np.array([[9, 0], [0, 0]])                      # one class only: kappa undefined
    yield np.array([[0, 4], [6, 0]])                      # all wrong
    yield np.diag([3, 4, 5])
    for k in (2, 4, 7):
        yield rng.integers(0, 30, (k, k)) * (rng.random((k, k)) < 0.7)


@pytest.mark.parametrize("table", list(_tables()), ids=lambda t: f"{t.shape[0]}-classes")
def test_replicate_formulas_equal_the_report_formulas(table):
    """The report's formulas over a (K, B) replicate axis give, column by column,
    what they give for each table alone (the exact-sum refinements of the
    one-table forms aside: 1e-12)."""
    values, columns = I._evaluate(I._table_statistics(table))
    reference = F.label_metric_values(I._table_statistics(table))
    for name, value in values.items():
        assert value == pytest.approx(reference[F.SLOT[name]], abs=1e-12, nan_ok=True), name
    rng = np.random.default_rng(1)
    cells = np.flatnonzero(table)
    draws = rng.poisson(table.reshape(-1)[cells][:, None], (cells.size, 6))
    batch_values, batch_columns = I._evaluate(
        I._replicate_statistics(table.shape[0], cells, draws))
    for b in range(draws.shape[1]):
        one = np.zeros(table.size, dtype=np.int64)
        one[cells] = draws[:, b]
        alone, alone_columns = I._evaluate(I._table_statistics(one.reshape(table.shape)))
        for name, value in alone.items():
            assert np.broadcast_to(batch_values[name], (6,))[b] == pytest.approx(
                value, abs=1e-12, nan_ok=True), name
        for name, column in alone_columns.items():
            np.testing.assert_allclose(batch_columns[name][:, b], column, atol=1e-12)


# -- bootstrap intervals --------------------------------------------------------


def _labels(n, k, accuracy, seed):
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, k, n)
    y_pred = np.where(rng.random(n) < accuracy, y_true, rng.integers(0, k, n))
    return y_true, y_pred


@pytest.mark.parametrize("method", ["percentile", "basic", "bca"])
def test_bootstrap_intervals_agree_with_scipy(method):
    """scipy.stats.bootstrap resamples the rows (multinomial); the Poisson
    bootstrap of the table converges to the same interval: the ends agree
    within the Monte Carlo error of 9999 resamples."""
    y_true, y_pred = _labels(400, 3, 0.7, seed=11)
    report = label_report(y_true, y_pred, confidence_level=0.95, method=method,
                          n_resamples=9999, rng=4)

    def accuracy(t, p, axis=-1):
        return (t == p).mean(axis=axis)

    def macro_f1(t, p, axis=-1):
        scores = []
        for k in range(3):
            tp = ((t == k) & (p == k)).sum(axis=axis)
            scores.append(2 * tp / ((t == k).sum(axis=axis) + (p == k).sum(axis=axis)))
        return np.mean(scores, axis=0)

    for name, statistic in (("accuracy", accuracy), ("macro_f1", macro_f1)):
        reference = stats.bootstrap((y_true, y_pred), statistic, paired=True, vectorized=True,
                                    n_resamples=9999, method=method, confidence_level=0.95,
                                    rng=np.random.default_rng(8))
        ci = report.intervals.metrics[name]
        assert ci.value == pytest.approx(statistic(y_true, y_pred), abs=1e-12)
        se = reference.standard_error
        assert ci.standard_error == pytest.approx(se, rel=0.05)
        # Each end's Monte Carlo error is about se / 30 here; allow 0.25 se.
        assert ci.low == pytest.approx(reference.confidence_interval.low, abs=0.25 * se), name
        assert ci.high == pytest.approx(reference.confidence_interval.high, abs=0.25 * se), name


def test_bca_acceleration_equals_the_full_jackknife():
    """The jackknife over cells (a value per non-empty cell, its count as
    weight) is the jackknife over samples."""
    y_true, y_pred = _labels(120, 3, 0.6, seed=2)
    table = label_report(y_true, y_pred).confusion_matrix
    stats_ = I._table_statistics(table)
    cells = np.flatnonzero(table)
    jackknife, _ = I._jackknife(stats_, 3, cells, table.reshape(-1)[cells])
    full = []
    for i in range(y_true.size):
        keep = np.arange(y_true.size) != i
        full.append(label_report(y_true[keep], y_pred[keep], num_classes=3).metrics["macro_f1"])
    full = np.array(full)
    mean = full.mean()
    reference = ((mean - full) ** 3).sum() / (6 * ((mean - full) ** 2).sum() ** 1.5)
    ours = I._acceleration(jackknife["macro_f1"], table.reshape(-1)[cells].astype(float))
    assert ours == pytest.approx(reference, rel=1e-9)


def test_same_seed_same_intervals_on_every_backend(backend):
    y_true, y_pred = _labels(3000, 5, 0.8, seed=3)
    weights = np.random.default_rng(0).integers(0, 4, y_true.size).astype(np.float64)
    with use_backend("numpy"):
        reference = label_report(y_true, y_pred, sample_weight=weights, confidence_level=0.9,
                                 method="bca", n_resamples=500, rng=77).intervals
    put = backend.asarray
    got = label_report(put(y_true), put(y_pred), sample_weight=put(weights),
                       confidence_level=0.9, method="bca", n_resamples=500, rng=77).intervals
    assert got.seed == 77
    for name, ci in reference.metrics.items():
        other = got.metrics[name]
        assert (other.low, other.high, other.standard_error) == (ci.low, ci.high,
                                                                 ci.standard_error), name
    for name, ci in reference.per_class.items():
        np.testing.assert_array_equal(got.per_class[name].low, ci.low)
        np.testing.assert_array_equal(got.per_class[name].high, ci.high)
    other_seed = label_report(put(y_true), put(y_pred), sample_weight=put(weights),
                              confidence_level=0.9, method="bca", n_resamples=500,
                              rng=78).intervals
    assert other_seed.metrics["accuracy"].low != reference.metrics["accuracy"].low


def test_streaming_intervals_equal_the_report(backend):
    y_true, y_pred = _labels(2000, 4, 0.75, seed=9)
    with use_backend("numpy"):
        report = label_report(y_true, y_pred, num_classes=4, confidence_level=0.95, rng=5,
                              n_resamples=300)
    put = backend.asarray
    first, second = ClassificationMetrics(4), ClassificationMetrics(4)
    first.update(put(y_true[:700]), put(y_pred[:700]))
    second.update(put(y_true[700:]), put(y_pred[700:]))
    first.merge(second)
    streamed = first.compute(confidence_level=0.95, rng=5, n_resamples=300)
    for name, ci in report.intervals.metrics.items():
        other = streamed.intervals.metrics[name]
        # The replicates are the same draws of the same matrix; the values are
        # each backend's own (a reduction kernel's last bit may differ).
        assert (other.low, other.high, other.standard_error) == (ci.low, ci.high,
                                                                 ci.standard_error), name
        assert other.value == pytest.approx(ci.value, abs=1e-12)
    assert streamed.to_dict()["intervals"]["metrics"]["macro_f1"]["low"] == pytest.approx(
        report.intervals.metrics["macro_f1"].low)
    assert first.compute().intervals is None
    plain = ClassificationMetrics(4, confusion_matrix=False)
    plain.update(put(y_true), put(y_pred))
    with pytest.raises(ValueError, match="confidence_level: this state keeps no K x K"):
        plain.compute(confidence_level=0.95)


def test_report_intervals_in_every_format():
    y_true, y_pred = _labels(500, 3, 0.8, seed=1)
    report = label_report(y_true, y_pred, confidence_level=0.9, rng=1, n_resamples=200,
                          confusion_matrix=False)
    assert report.confusion_matrix is None  # kept for the intervals, not shown
    ci = report.intervals.metrics["matthews_corrcoef"]
    assert ci.low < report.metrics["matthews_corrcoef"] < ci.high
    text = report.to_text()
    assert "0.9 confidence intervals (percentile bootstrap, 200 Poisson resamples" in text
    assert f"[{ci.low:.4f}, {ci.high:.4f}]" in text
    assert f"[{ci.low:.4f}, {ci.high:.4f}]" in report.to_markdown()
    data = report.to_dict()["intervals"]
    assert data["seed"] == 1 and data["metrics"]["matthews_corrcoef"]["low"] == ci.low
    assert len(data["per_class"]["f1"]["low"]) == 3
    assert "intervals" not in label_report(y_true, y_pred).to_dict()
    wilson = label_report(y_true, y_pred, confidence_level=0.9, method="wilson")
    assert set(wilson.intervals.metrics) == {"accuracy", "micro_precision", "micro_recall",
                                             "micro_f1", "hamming_loss", "zero_one_loss"}
    accuracy = wilson.intervals.metrics["accuracy"]
    low, high = statsmodels_proportion.proportion_confint(
        int((y_true == y_pred).sum()), y_true.size, alpha=0.1, method="wilson")
    assert (accuracy.low, accuracy.high) == pytest.approx((low, high), abs=1e-12)
    loss = wilson.intervals.metrics["hamming_loss"]
    assert (loss.low, loss.high) == pytest.approx((1 - high, 1 - low), abs=1e-12)
    assert "binomial; only the metrics that are proportions" in wilson.to_text()


@pytest.mark.parametrize("kwargs,match", [
    ({"confidence_level": 1.5}, "confidence_level must be a number between 0 and 1"),
    ({"confidence_level": 0.95, "method": "normal"}, "method must be one of"),
    ({"confidence_level": 0.95, "n_resamples": 1}, "n_resamples must be an integer >= 2"),
    ({"confidence_level": 0.95, "rng": -1}, "rng must be a non-negative integer seed"),
    ({"confidence_level": 0.95, "sampling": "multinomial"}, "sampling must be one of"),
    ({"confidence_level": 0.95, "sample_weight": np.full(6, 0.5)},
     "confidence intervals need integer counts: sample_weight must hold whole numbers"),
])
def test_interval_arguments_are_checked(kwargs, match):
    with pytest.raises(ValueError, match=match):
        label_report(np.array([0, 1, 1, 0, 1, 0]), np.array([0, 1, 0, 0, 1, 1]), **kwargs)


# -- DeLong ----------------------------------------------------------------------


def _delong_reference(y_true, y_score):
    """DeLong et al. (1988) from its definition: placement values by comparing
    every positive with every negative (O(m n))."""
    pos, neg = y_score[y_true == 1], y_score[y_true == 0]
    psi = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    v10, v01 = psi.mean(axis=1), psi.mean(axis=0)
    auc = psi.mean()
    s10 = ((v10 - auc) ** 2).sum() / (pos.size - 1)
    s01 = ((v01 - auc) ** 2).sum() / (neg.size - 1)
    return auc, math.sqrt(s10 / pos.size + s01 / neg.size)


@pytest.mark.parametrize("ties", [False, True])
def test_delong_standard_error_equals_the_definition(ties):
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(4)
    y_true = rng.integers(0, 2, 700)
    y_score = rng.normal(size=700) + 0.8 * y_true
    if ties:
        y_score = np.round(y_score, 1)
    ci = I.roc_auc_interval(y_true, y_score, confidence_level=0.95)
    auc, se = _delong_reference(y_true, y_score)
    assert ci.value == pytest.approx(roc_auc_score(y_true, y_score), abs=1e-12)
    assert ci.value == pytest.approx(auc, abs=1e-12)
    assert ci.standard_error == pytest.approx(se, rel=1e-10)
    z = stats.norm.isf(0.025)
    assert (ci.low, ci.high) == pytest.approx((auc - z * se, auc + z * se), abs=1e-12)


def test_delong_refuses_bad_input():
    with pytest.raises(ValueError, match="y_true must be binary"):
        I.roc_auc_interval(np.array([0, 1, 2]), np.array([0.1, 0.2, 0.3]))
    with pytest.raises(ValueError, match="y_score must be finite"):
        I.roc_auc_interval(np.array([0, 1]), np.array([0.1, np.nan]))
    with pytest.raises(ValueError, match="same length"):
        I.roc_auc_interval(np.array([0, 1]), np.array([0.1]))
    assert math.isnan(I.roc_auc_interval(np.array([1, 1]), np.array([0.1, 0.2])).low)


def _rank_auc(y_true, y_score, axis=-1):
    """ROC AUC from midranks (ties count 1/2), vectorised over resamples."""
    ranks = stats.rankdata(y_score, axis=axis)
    positives = (y_true == 1).sum(axis=axis)
    negatives = (y_true != 1).sum(axis=axis)
    area = np.where(y_true == 1, ranks, 0).sum(axis=axis) - positives * (positives + 1) / 2
    with np.errstate(all="ignore"):
        return area / (positives * negatives)


@pytest.mark.parametrize("method", ["percentile", "basic", "bca"])
def test_bootstrap_roc_auc_agrees_with_scipy(method):
    rng = np.random.default_rng(21)
    y_true = (rng.random(300) < 0.4).astype(np.int64)
    y_score = np.round(rng.normal(size=300) + y_true, 1)  # ties
    ci = I.roc_auc_interval(y_true, y_score, method=method, n_resamples=9999, rng=3)
    reference = stats.bootstrap((y_true, y_score), _rank_auc, paired=True, vectorized=True,
                                n_resamples=9999, method=method, rng=np.random.default_rng(4))
    se = reference.standard_error
    assert ci.value == pytest.approx(_rank_auc(y_true, y_score), abs=1e-12)
    assert ci.standard_error == pytest.approx(se, rel=0.05)
    assert ci.low == pytest.approx(reference.confidence_interval.low, abs=0.25 * se)
    assert ci.high == pytest.approx(reference.confidence_interval.high, abs=0.25 * se)


def test_roc_auc_jackknife_equals_leaving_each_sample_out():
    rng = np.random.default_rng(8)
    y_true = (rng.random(60) < 0.5).astype(np.int64)
    y_score = rng.integers(0, 6, 60).astype(np.float64)
    scores, index = np.unique(y_score, return_inverse=True)
    table = np.zeros((2, scores.size), dtype=np.int64)
    np.add.at(table, (y_true, index), 1)
    cells = np.flatnonzero(table)
    jackknife = I._roc_auc_jackknife(table, cells)
    for j, cell in enumerate(cells.tolist()):
        label, score = divmod(cell, scores.size)
        i = int(np.flatnonzero((y_true == label) & (index == score))[0])
        keep = np.arange(60) != i
        assert jackknife[j] == pytest.approx(_rank_auc(y_true[keep], y_score[keep]), abs=1e-12)


def test_roc_auc_bootstrap_is_seeded_on_every_backend(backend):
    rng = np.random.default_rng(2)
    y_true = (rng.random(500) < 0.3).astype(np.int64)
    y_score = rng.normal(size=500) + y_true
    with use_backend("numpy"):
        reference = I.roc_auc_interval(y_true, y_score, method="bca", n_resamples=300, rng=9)
    got = I.roc_auc_interval(backend.asarray(y_true), backend.asarray(y_score), method="bca",
                             n_resamples=300, rng=9)
    assert (got.low, got.high, got.standard_error) == (reference.low, reference.high,
                                                       reference.standard_error)
    with pytest.raises(ValueError, match="method must be 'delong' or one of"):
        I.roc_auc_interval(y_true, y_score, method="wilson")


# -- coverage ----------------------------------------------------------------------


def _population_values(probabilities):
    """The metrics of the population: the formulas of the joint distribution
    (every label metric is a ratio of counts, so a table of probabilities
    gives the population's value)."""
    values, _ = I._evaluate(I._table_statistics(probabilities))
    return values


def _reuse_last_result(monkeypatch, name, key_of):
    """``I.<name>`` remembering its last result, returned again while its
    arguments stay the same (``key_of(*args)``: their exact contents). The
    replicates are a pure function of (table, seed, size): the percentile and
    BCa intervals of one data set and seed would draw the very same ones."""
    function = getattr(I, name)
    last = {}

    def remembered(*args):
        key = key_of(*args)
        if key not in last:
            last.clear()
            last[key] = function(*args)
        return last[key]

    monkeypatch.setattr(I, name, remembered)


@pytest.mark.slow
def test_interval_coverage_by_simulation(monkeypatch):
    """Over 2000 simulated data sets of known population value, the 95%
    intervals cover it 94-96% of the time. A data set of N labelled samples
    is its confusion matrix: a multinomial draw of N over the population's
    joint probabilities (the label metrics see nothing else). Each data set's
    percentile and BCa intervals (the same seed) share one set of replicates."""
    # _replicates(K, cells, counts, B, key, backend): the label tables' replicates;
    # replicate_draws(backend, counts, cells, start, size, key): ROC AUC's draws.
    _reuse_last_result(monkeypatch, "_replicates", lambda k, cells, counts, b, key, backend=None: (
        k, cells.tobytes(), counts.tobytes(), b, key, backend))
    _reuse_last_result(monkeypatch, "replicate_draws",
                       lambda backend, counts, cells, start, size, key: (
                           backend, counts.tobytes(), cells.tobytes(), start, size, key))
    probabilities = np.array([[0.30, 0.05, 0.02], [0.04, 0.25, 0.06], [0.03, 0.05, 0.20]])
    truth = _population_values(probabilities)
    rng = np.random.default_rng(20261127)
    n_sets, n = 2000, 1500
    names = ("accuracy", "macro_f1", "matthews_corrcoef")
    covered = {(method, name): 0 for method in ("percentile", "bca") for name in names}
    covered.update({("wilson", "accuracy"): 0})
    for s in range(n_sets):
        table = rng.multinomial(n, probabilities.reshape(-1)).reshape(3, 3)
        for method in ("percentile", "bca", "wilson"):
            options = I.check_interval_options(0.95, method, n_resamples=999, rng=s)
            found = I.interval_table(table, options)
            for name in names:
                ci = found.metrics.get(name)
                if (method, name) in covered and ci is not None:
                    covered[method, name] += ci.low <= truth[name] <= ci.high
    rates = {key: hits / n_sets for key, hits in covered.items()}
    # DeLong's interval of ROC AUC: binormal scores, AUC = Phi(d / sqrt 2).
    d = 1.0
    auc_truth = stats.norm.cdf(d / math.sqrt(2))
    hits = 0
    for _ in range(n_sets):
        y_true = rng.random(400) < 0.4
        ci = I.roc_auc_interval(y_true, rng.normal(size=400) + d * y_true)
        hits += ci.low <= auc_truth <= ci.high
    rates["delong", "roc_auc"] = hits / n_sets
    # The bootstrap's intervals of ROC AUC: a 5-point rating scale (the scores
    # of a reader study), AUC = P(X > Y) + P(X = Y) / 2.
    p = np.array([0.05, 0.10, 0.20, 0.30, 0.35])   # positives' ratings
    q = np.array([0.35, 0.30, 0.20, 0.10, 0.05])   # negatives'
    auc_truth = float(np.tril(np.outer(p, q), -1).sum() + 0.5 * (p * q).sum())
    hits = {"percentile": 0, "bca": 0, "delong": 0}
    for s in range(n_sets):
        y_true = rng.random(300) < 0.4
        ratings = np.where(y_true, rng.choice(5, 300, p=p), rng.choice(5, 300, p=q))
        for method in hits:
            ci = I.roc_auc_interval(y_true, ratings, method=method, n_resamples=999, rng=s)
            hits[method] += ci.low <= auc_truth <= ci.high
    rates.update({(method, "roc_auc ratings"): h / n_sets for method, h in hits.items()})
    for key, rate in rates.items():
        assert 0.94 <= rate <= 0.96, (key, rate, rates)


# -- the kernel (kernels/resample.cu) ----------------------------------------------


@pytest.mark.parametrize("first", [0, 7, 2 ** 32 - 64])
def test_poisson_kernel_equals_the_reference(case, first):
    """kernels/resample.cu draws what metrics_gpu._formulas.resample draws, bit for bit:
    every branch (0, the multiplication method below 10, PTRS from 10 up to
    1e12), cell ids past 32 bits, replicate ids up to 2**32 - 1."""
    from metrics_gpu.backends.selection import get_backend_implementation
    from metrics_gpu.testing import operation_counter

    emulated = case.impl
    numpy = get_backend_implementation("numpy")
    counts = np.array([0, 1, 2, 5, 9, 10, 11, 37, 500, 123457, 10 ** 9, 10 ** 12, 3])
    cells = np.arange(counts.size, dtype=np.int64) * 1000003 + (1 << 33)
    key = R.seed_key(2 ** 64 - 5)
    with operation_counter() as counts_of:
        draws = emulated.poisson_table_draws(counts, cells, first, 64, key)
    assert counts_of.launches == 1
    np.testing.assert_array_equal(np.asarray(emulated.to_host(draws)),
                                  numpy.poisson_table_draws(counts, cells, first, 64, key))
    empty = emulated.poisson_table_draws(counts[:0], cells[:0], 0, 5, key)
    assert np.asarray(emulated.to_host(empty)).shape == (0, 5)
    with pytest.raises(ValueError, match="replicate ids must fit in 32 bits"):
        emulated.poisson_table_draws(counts, cells, 2 ** 32 - 3, 5, key)


# -- the cluster bootstrap ------------------------------------------------------------


def test_cluster_bootstrap_resamples_whole_units(backend):
    """Samples of a unit share its errors: the intervals that resample units are
    wider than those that resample samples; with one sample per unit, BCa's
    acceleration is the plain jackknife's."""
    rng = np.random.default_rng(6)
    units = np.repeat(np.arange(60), 50)                 # 60 patients, 50 samples each
    skill = rng.uniform(0.4, 0.95, 60)[units]            # each patient its own accuracy
    y_true = rng.integers(0, 3, units.size)
    y_pred = np.where(rng.random(units.size) < skill, y_true, (y_true + 1) % 3)
    put = backend.asarray
    clustered = label_report(put(y_true), put(y_pred), cluster=put(units),
                             confidence_level=0.95, n_resamples=2000, rng=1).intervals
    naive = label_report(put(y_true), put(y_pred), confidence_level=0.95, n_resamples=2000,
                         rng=1).intervals
    for name in ("accuracy", "macro_f1", "matthews_corrcoef"):
        wide = clustered.metrics[name].high - clustered.metrics[name].low
        narrow = naive.metrics[name].high - naive.metrics[name].low
        assert wide > 2 * narrow, name
    # The accuracy's standard error over units: sd of the unit means / sqrt(60).
    means = np.array([np.mean(y_true[units == u] == y_pred[units == u]) for u in range(60)])
    assert clustered.metrics["accuracy"].standard_error == pytest.approx(
        means.std(ddof=1) / np.sqrt(60), rel=0.15)
    with use_backend("numpy"):
        reference = label_report(y_true, y_pred, cluster=units, confidence_level=0.95,
                                 n_resamples=2000, rng=1).intervals
    assert clustered.metrics["macro_f1"].low == reference.metrics["macro_f1"].low


def test_cluster_bca_with_one_sample_per_unit_is_the_plain_jackknife():
    y_true, y_pred = _labels(300, 3, 0.7, seed=12)
    table = label_report(y_true, y_pred).confusion_matrix
    units = np.zeros((300, 3, 3), dtype=np.int64)
    units[np.arange(300), y_true, y_pred] = 1
    options = I.check_interval_options(0.9, "bca", n_resamples=50, rng=0)
    _, _, jackknife, weights = I._cluster_replicates(table, units, options,
                                                     R.seed_key(0), None)
    cells = np.flatnonzero(table)
    plain, _ = I._jackknife(I._table_statistics(table), 3, cells, None)
    for name in ("macro_f1", "matthews_corrcoef", "cohen_kappa"):
        assert I._acceleration(jackknife[0][name], weights) == pytest.approx(
            I._acceleration(plain[name], table.reshape(-1)[cells].astype(float)), rel=1e-9)


@pytest.mark.parametrize("kwargs,match", [
    ({"cluster": np.arange(6)}, "cluster: the units of the bootstrap; give confidence_level"),
    ({"cluster": np.arange(6), "confidence_level": 0.9, "method": "wilson"},
     "method='wilson' assumes independent samples"),
    ({"cluster": np.arange(6), "groups": np.zeros(6, dtype=int), "confidence_level": 0.9},
     "cluster= with groups= is not made yet"),
    ({"cluster": np.arange(5), "confidence_level": 0.9}, "cluster must hold one group per"),
])
def test_cluster_arguments_are_checked(kwargs, match):
    with pytest.raises(ValueError, match=match):
        label_report(np.array([0, 1, 1, 0, 1, 0]), np.array([0, 1, 0, 0, 1, 1]), **kwargs)


# -- the stream's binned ROC AUC and average precision ---------------------------------


@functools.cache
def _binned_rank_case():
    """The labels, logits and exact percentile interval of ROC AUC (seconds
    each: 3000 resamples of 4000 samples), made once for every backend."""
    rng = np.random.default_rng(30)
    y = (rng.random(4000) < 0.3).astype(np.int64)
    logits = np.stack([np.zeros(4000), rng.normal(size=4000) + 1.2 * y], axis=1)
    exact = I.roc_auc_interval(y, logits[:, 1], method="percentile", n_resamples=3000, rng=4)
    return y, logits, exact


def test_stream_binned_rank_intervals(backend):
    y, logits, exact = _binned_rank_case()
    metrics = ClassificationMetrics(2, thresholds=400)
    metrics.update(backend.asarray(y), backend.asarray(logits))
    report = metrics.compute(confidence_level=0.95, rng=4, n_resamples=3000)
    ci = report.intervals.metrics["roc_auc"]
    assert ci.value == pytest.approx(float(backend.to_numpy(report["roc_auc"])), abs=1e-12)
    assert ci.standard_error == pytest.approx(exact.standard_error, rel=0.1)
    assert ci.low == pytest.approx(exact.low, abs=0.3 * exact.standard_error)
    assert ci.high == pytest.approx(exact.high, abs=0.3 * exact.standard_error)
    ap = report.intervals.metrics["average_precision"]
    assert ap.low < float(backend.to_numpy(report["average_precision"])) < ap.high
    if backend.name == "numpy":
        reference = report.intervals  # the numpy stream's: the one just computed
    else:
        with use_backend("numpy"):
            again = ClassificationMetrics(2, thresholds=400)
            again.update(y, logits)
            reference = again.compute(confidence_level=0.95, rng=4, n_resamples=3000).intervals
    assert (ci.low, ci.high) == (reference.metrics["roc_auc"].low,
                                 reference.metrics["roc_auc"].high)
    assert "roc_auc_macro" not in report.intervals.metrics  # classes' draws are not paired


def test_binned_rank_bca_acceleration_is_the_jackknife_over_samples():
    from metrics_gpu._formulas import labels as F
    rng = np.random.default_rng(31)
    k, h, n = 3, 6, 90
    target = rng.integers(0, k, n)
    bins = rng.integers(0, h, (n, k))            # each sample's bin in each class's histogram
    table = np.zeros((2, k, h), dtype=np.int64)
    for i in range(n):
        for c in range(k):
            table[0 if target[i] == c else 1, c, bins[i, c]] += 1
    cells = np.flatnonzero(table)
    jackknife = I._histogram_jackknife(table, cells)
    ours = I._class_accelerations(jackknife["roc_auc"], cells, table.reshape(-1)[cells], k, h)
    for c in range(k):
        values = []
        for i in range(n):
            left = table[:, c].astype(float).copy()
            left[0 if target[i] == c else 1, bins[i, c]] -= 1
            values.append(F.binned_rank_areas(left[0], left[1])[0])
        values = np.array(values)
        u = values.mean() - values
        assert ours[c] == pytest.approx((u ** 3).sum() / (6 * (u ** 2).sum() ** 1.5), rel=1e-9)


def test_reads_back_once_and_refuses_negative_counts():
    """compute(confidence_level=...) reads the label values, the matrix and the
    draws back, each once (emulated: every read counted); a table with a
    negative count is refused, naming it."""
    from metrics_gpu.testing import operation_counter

    y_true, y_pred = _labels(500, 3, 0.8, seed=2)
    with use_backend("emulated"):
        metrics = ClassificationMetrics(3)
        metrics.update(y_true, y_pred)
        with operation_counter() as counts:
            metrics.compute(confidence_level=0.9, n_resamples=50, rng=0)
    # The checks, the label values, the matrix, then one read of the draws.
    assert counts.host_transfers <= 4
    with pytest.raises(ValueError, match="confusion_matrix: the counts must be non-negative"):
        I.label_intervals(np.array([[3, -1], [0, 2]]))
