"""Per-group label metrics (label_report(groups=...)): each group's values are
the report of its own samples, fairlearn's MetricFrame vocabulary gives
fairlearn's numbers, and the intervals of groups and of their differences
come from one set of paired replicates, the same on every backend."""

from __future__ import annotations

import math
import warnings
from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metrics_gpu import label_report, use_backend
from metrics_gpu.groups import GROUP_METHODS

fairlearn_metrics = pytest.importorskip("fairlearn.metrics")
sklearn_metrics = pytest.importorskip("sklearn.metrics")


def _data(n=4000, k=4, g=5, seed=0):
    rng = np.random.default_rng(seed)
    groups = rng.integers(0, g, n)
    y_true = rng.integers(0, k, n)
    # Each group its own accuracy, so that the groups differ.
    right = rng.random(n) < 0.55 + 0.08 * groups
    y_pred = np.where(right, y_true, rng.integers(0, k, n))
    return y_true, y_pred, groups


@pytest.mark.parametrize("weighted", [False, True])
def test_each_group_is_the_report_of_its_samples(backend, weighted):
    y_true, y_pred, groups = _data()
    weights = None
    if weighted:
        weights = np.random.default_rng(1).integers(0, 3, y_true.size).astype(np.float64)
    put = backend.asarray
    report = label_report(put(y_true), put(y_pred), num_classes=4,
                          sample_weight=None if weights is None else put(weights),
                          groups=put(groups), num_groups=7)
    found = report.groups
    assert found.groups == list(range(7))
    for g in range(5):
        mask = groups == g
        with use_backend("numpy"):
            alone = label_report(y_true[mask], y_pred[mask], num_classes=4,
                                 sample_weight=None if weights is None else weights[mask])
        for name, value in alone.metrics.items():
            assert found.by_group[name][g] == pytest.approx(value, abs=1e-12), (g, name)
        for name, column in alone.per_class.items():
            if name != "support":
                np.testing.assert_allclose(found.per_class[name][g], column, atol=1e-12)
        assert found.counts[g] == pytest.approx(alone.total)
    # Groups 5 and 6 have no sample: their ids stay, their metrics are NaN.
    assert list(found.counts[5:]) == [0, 0]
    assert all(math.isnan(v[5]) and math.isnan(v[6]) for v in found.by_group.values())
    assert found.overall == report.metrics
    assert found.counts.sum() == pytest.approx(float(report.total))


def test_ignored_samples_are_left_out_of_their_group():
    y_true, y_pred, groups = _data(n=1000, k=3)
    y_true = y_true.copy()
    y_true[::7] = -100
    report = label_report(y_true, y_pred, num_classes=3, ignore_index=-100, groups=groups)
    keep = y_true != -100
    for g in range(5):
        mask = keep & (groups == g)
        alone = label_report(y_true[mask], y_pred[mask], num_classes=3)
        assert report.groups.by_group["macro_f1"][g] == pytest.approx(alone.metrics["macro_f1"])
        assert report.groups.counts[g] == mask.sum()


@pytest.mark.parametrize("backend_name", ["numpy", "emulated"])
def test_an_ignore_index_inside_the_classes_is_left_out_of_the_groups(backend_name):
    from metrics_gpu import ClassificationMetrics

    y_true, y_pred, groups = _data(n=1500, k=4, g=3)
    keep = y_true != 2
    with use_backend(backend_name):
        report = label_report(y_true, y_pred, num_classes=4, ignore_index=2, groups=groups)
        stream = ClassificationMetrics(4, ignore_index=2, num_groups=3)
        stream.update(y_true, y_pred, groups=groups)
        streamed = stream.compute()
    for g in range(3):
        mask = keep & (groups == g)
        alone = label_report(y_true[mask], y_pred[mask], num_classes=4)
        for found in (report.groups, streamed.groups):
            assert found.counts[g] == mask.sum()
            assert found.by_group["accuracy"][g] == pytest.approx(alone.metrics["accuracy"])


def test_fairlearn_vocabulary_gives_fairlearn_numbers():
    y_true, y_pred, groups = _data(k=3)
    report = label_report(y_true, y_pred, num_classes=3, groups=groups)
    metrics = {
        "accuracy": sklearn_metrics.accuracy_score,
        "macro_f1": partial(sklearn_metrics.f1_score, average="macro", labels=[0, 1, 2],
                            zero_division=0),
        "matthews_corrcoef": sklearn_metrics.matthews_corrcoef,
        "balanced_accuracy": sklearn_metrics.balanced_accuracy_score,
    }
    frame = fairlearn_metrics.MetricFrame(metrics=metrics, y_true=y_true, y_pred=y_pred,
                                          sensitive_features=groups)
    found = report.groups
    for name in metrics:
        np.testing.assert_allclose(found.by_group[name], frame.by_group[name].to_numpy(),
                                   atol=1e-12)
        assert found.overall[name] == pytest.approx(frame.overall[name], abs=1e-12)
        assert found.group_min()[name] == pytest.approx(frame.group_min()[name], abs=1e-12)
        assert found.group_max()[name] == pytest.approx(frame.group_max()[name], abs=1e-12)
        for method in GROUP_METHODS:
            assert found.difference(method)[name] == pytest.approx(
                frame.difference(method=method)[name], abs=1e-12), (name, method)
            assert found.ratio(method)[name] == pytest.approx(
                frame.ratio(method=method)[name], abs=1e-12), (name, method)
    table = found.to_frame()
    assert list(table.index) == [0, 1, 2, 3, 4] and table["count"].sum() == y_true.size


def test_category_and_intersection_groups():
    y_true, y_pred, codes = _data(n=1200, k=3)
    sites = np.array(["north", "south", "east"])[codes % 3]
    devices = np.array(["phone", "tablet"])[codes % 2]
    by_site = label_report(y_true, y_pred, groups=sites).groups
    assert by_site.groups == ["east", "north", "south"]
    mask = sites == "north"
    assert by_site.by_group["accuracy"][1] == pytest.approx(
        np.mean(y_true[mask] == y_pred[mask]))
    both = label_report(y_true, y_pred, groups=[sites, devices]).groups
    assert ("north", "phone") in both.groups
    i = both.groups.index(("north", "phone"))
    mask = (sites == "north") & (devices == "phone")
    assert both.counts[i] == mask.sum()
    assert both.by_group["accuracy"][i] == pytest.approx(np.mean(y_true[mask] == y_pred[mask]))
    assert both.to_frame().index.nlevels == 2


def test_group_intervals_are_paired_and_seeded(backend):
    y_true, y_pred, groups = _data(n=3000, k=3, g=4)
    with use_backend("numpy"):
        reference = label_report(y_true, y_pred, groups=groups, confidence_level=0.9,
                                 n_resamples=400, rng=12).groups.intervals
    put = backend.asarray
    got = label_report(put(y_true), put(y_pred), groups=put(groups), confidence_level=0.9,
                       n_resamples=400, rng=12).groups.intervals
    for kind in ("by_group", "minus_overall", "difference", "difference_to_overall"):
        for name, ci in getattr(reference, kind).items():
            other = getattr(got, kind)[name]
            np.testing.assert_array_equal(other.low, ci.low)
            np.testing.assert_array_equal(other.high, ci.high)
    by_group = reference.by_group["accuracy"]
    accuracy = [np.mean(y_true[groups == g] == y_pred[groups == g]) for g in range(4)]
    assert np.all((by_group.low <= accuracy) & (np.asarray(accuracy) <= by_group.high))
    # Each group's interval is about its own sample: a binomial's width.
    width = by_group.high - by_group.low
    expected = 2 * 1.645 * np.sqrt(np.multiply(accuracy, 1 - np.asarray(accuracy)) / 750)
    np.testing.assert_allclose(width, expected, rtol=0.25)
    overall = np.mean(y_true == y_pred)
    minus = reference.minus_overall["accuracy"]
    np.testing.assert_allclose(minus.value, np.asarray(accuracy) - overall, atol=1e-12)
    assert np.all((minus.low <= minus.value) & (minus.value <= minus.high))
    # Narrower than the group's own: the overall moves with it (paired draws).
    assert np.all(minus.high - minus.low < by_group.high - by_group.low)
    difference = reference.difference["accuracy"]
    assert difference.value == pytest.approx(max(accuracy) - min(accuracy))
    assert math.isnan(difference.low) and math.isnan(difference.high)


def test_group_bca_is_the_jackknife_over_every_sample():
    """BCa's acceleration of each group's value and of each group's value
    minus the overall equals the jackknife over all N samples (recomputing
    the report each time)."""
    from metrics_gpu import groups as G

    y_true, y_pred, groups = _data(n=120, k=2, g=3, seed=4)
    names = ("macro_f1", "matthews_corrcoef")
    full = {name: [] for name in names}
    for i in range(y_true.size):
        keep = np.arange(y_true.size) != i
        found = label_report(y_true[keep], y_pred[keep], num_classes=2, groups=groups[keep],
                             num_groups=3).groups
        for name in names:
            by_group = np.asarray(found.by_group[name])
            full[name].append((by_group, by_group - found.overall[name]))
    report = label_report(y_true, y_pred, num_classes=2, groups=groups, num_groups=3)
    tables = G.group_tables(*_inputs_and_codes(y_true, y_pred, groups))
    cells = np.flatnonzero(tables)
    jackknife = G._group_jackknife(tables, cells, 2)
    counts = tables.reshape(-1)[cells].astype(float)
    for name in names:
        terms = G._group_bca_terms(jackknife, name, report.groups.by_group[name].values,
                                   counts)
        for column in (0, 1):
            values = np.array([f[column] for f in full[name]])            # (N, G)
            u = values.mean(axis=0) - values
            expected = (u ** 3).sum(axis=0) / (6 * ((u ** 2).sum(axis=0)) ** 1.5)
            np.testing.assert_allclose(terms[column]["acceleration"], expected, rtol=1e-9,
                                       err_msg=f"{name} {column}")
    bca = label_report(y_true, y_pred, num_classes=2, groups=groups, confidence_level=0.9,
                       method="bca", n_resamples=300, rng=1).groups.intervals
    assert np.all(bca.by_group["accuracy"].low <= report.groups.by_group["accuracy"])


def _inputs_and_codes(y_true, y_pred, groups):
    from metrics_gpu._validation import check_groups, check_label_inputs

    inputs = check_label_inputs(y_true, y_pred, num_classes=2)
    return inputs, check_groups(groups, y_true.size, inputs.backend, 3)


def test_group_report_in_text_and_json():
    y_true, y_pred, groups = _data(n=800, k=3, g=3)
    report = label_report(y_true, y_pred, groups=groups, confidence_level=0.95,
                          n_resamples=100, rng=0)
    text = report.to_text()
    assert "by group (3 groups):" in text and "difference" in text and "ratio" in text
    data = report.to_dict()["groups"]
    assert data["groups"] == [0, 1, 2] and len(data["by_group"]["accuracy"]) == 3
    assert set(data["difference"]) == {"between_groups", "to_overall"}
    assert len(data["intervals"]["by_group"]["macro_f1"]["low"]) == 3
    wilson = label_report(y_true, y_pred, groups=groups, confidence_level=0.95, method="wilson")
    assert set(wilson.groups.intervals.by_group) == {"accuracy", "hamming_loss", "zero_one_loss"}


@pytest.mark.parametrize("kwargs,match", [
    ({"groups": np.zeros(5, dtype=np.int64)}, "groups must hold one group per sample"),
    ({"groups": np.array([0, 1, -1, 0, 1, 0])}, "groups must hold codes 0..G-1; found -1"),
    ({"groups": np.array([0, 1, 2, 0, 1, 0]), "num_groups": 2},
     "groups must hold codes below num_groups=2"),
    ({"groups": np.linspace(0, 1, 6)}, "groups must hold integer codes or categories"),
    ({"groups": np.array(["a", "b", "a", "a", "b", "a"]), "num_groups": 2},
     "num_groups applies to integer group codes"),
])
def test_group_arguments_are_checked(kwargs, match):
    with pytest.raises(ValueError, match=match):
        label_report(np.array([0, 1, 1, 0, 1, 0]), np.array([0, 1, 0, 0, 1, 1]), **kwargs)


# -- the stream: ClassificationMetrics(num_groups=...) ----------------------------


@pytest.mark.parametrize("kind", ["labels", "scores"])
def test_stream_groups_equal_the_report(backend, kind):
    from metrics_gpu import ClassificationMetrics

    rng = np.random.default_rng(3)
    n = 2500
    y_true, groups = rng.integers(0, 4, n), rng.integers(0, 3, n)
    weights = rng.integers(0, 3, n)
    scores = rng.normal(size=(n, 4))
    y_pred = scores.argmax(axis=1)
    preds = scores if kind == "scores" else y_pred
    put = backend.asarray
    first = ClassificationMetrics(4, num_groups=4)
    second = ClassificationMetrics(4, num_groups=4)
    for start, stop in ((0, 300), (300, 1100), (1100, 1101), (1101, 1101)):
        first.update(put(y_true[start:stop]), put(preds[start:stop]), put(weights[start:stop]),
                     groups=put(groups[start:stop]))
    second.update(put(y_true[1101:]), put(preds[1101:]), put(weights[1101:]),
                  groups=put(groups[1101:]))
    first.merge(second)
    streamed = first.compute(confidence_level=0.9, n_resamples=100, rng=3)
    restored = ClassificationMetrics(4, num_groups=4)
    restored.load_state_dict(first.state_dict())
    again = restored.compute()
    with use_backend("numpy"):
        reference = label_report(y_true, y_pred, num_classes=4, sample_weight=weights,
                                 groups=groups, num_groups=4, confidence_level=0.9,
                                 n_resamples=100, rng=3)
    for name, values in reference.groups.by_group.items():
        np.testing.assert_allclose(streamed.groups.by_group[name], values, atol=1e-12,
                                   err_msg=name)
        np.testing.assert_allclose(again.groups.by_group[name], values, atol=1e-12)
    np.testing.assert_array_equal(streamed.groups.counts, reference.groups.counts)
    for kind in ("by_group", "minus_overall"):
        got = getattr(streamed.groups.intervals, kind)["accuracy"]
        expected = getattr(reference.groups.intervals, kind)["accuracy"]
        np.testing.assert_array_equal(got.low, expected.low)
        np.testing.assert_array_equal(got.high, expected.high)
    assert streamed.to_dict()["groups"]["counts"] == [int(c) for c in reference.groups.counts]


def test_stream_groups_leave_out_what_the_state_leaves_out():
    from metrics_gpu import ClassificationMetrics

    metrics = ClassificationMetrics(3, num_groups=2, validate=False)
    y_true = np.array([0, 1, 7, 2, 1, 0])
    scores = np.eye(3)[[0, 1, 1, 2, 0, 0]].astype(np.float64)
    scores[5, 0] = np.nan
    metrics.update(y_true, scores, groups=np.array([0, 0, 0, 1, 1, 1]))
    report = metrics.compute()
    assert int(report.invalid) == 2
    assert list(report.groups.counts) == [2, 2]
    assert report.groups.by_group["accuracy"][0] == 1.0
    assert report.groups.by_group["accuracy"][1] == 0.5


def test_stream_group_arguments_are_checked():
    from metrics_gpu import ClassificationMetrics

    y, p = np.array([0, 1]), np.array([0, 1])
    with pytest.raises(ValueError, match="groups is required: this state counts 2 groups"):
        ClassificationMetrics(2, num_groups=2).update(y, p)
    with pytest.raises(ValueError, match="groups: this state counts no groups"):
        ClassificationMetrics(2).update(y, p, groups=np.array([0, 1]))
    with pytest.raises(ValueError, match="groups must hold integer codes 0..num_groups-1 in a"):
        ClassificationMetrics(2, num_groups=2).update(y, p, groups=np.array(["a", "b"]))
    with pytest.raises(ValueError, match="groups must hold codes below num_groups=2"):
        ClassificationMetrics(2, num_groups=2).update(y, p, groups=np.array([0, 2]))
    with pytest.raises(ValueError, match="groups: 100000 groups x 10 x 10 classes need"):
        ClassificationMetrics(10, num_groups=100000)
    with pytest.raises(ValueError, match="must be a ClassificationMetrics built with the same"):
        ClassificationMetrics(2, num_groups=2).merge(ClassificationMetrics(2, num_groups=3))


# -- the command line -------------------------------------------------------------


@pytest.mark.parametrize("backend", ["numpy", "emulated"])
def test_command_line_groups_and_intervals(tmp_path, capsys, backend):
    import json

    from metrics_gpu.cli import main

    y_true, y_pred, groups = _data(n=5000, k=3, g=3)
    for name, values in (("t", y_true), ("p", y_pred), ("g", groups)):
        np.save(tmp_path / f"{name}.npy", values)
    assert main(["report", "--y-true", str(tmp_path / "t.npy"), "--y-pred",
                 str(tmp_path / "p.npy"), "--groups", str(tmp_path / "g.npy"), "--num-groups",
                 "4", "--confidence-level", "0.9", "--n-resamples", "200", "--seed", "5",
                 "--chunk-size", "1500", "--backend", backend, "--format", "json",
                 "--quiet"]) == 0
    data = json.loads(capsys.readouterr().out)
    reference = label_report(y_true, y_pred, num_classes=3, groups=groups, num_groups=4,
                             confidence_level=0.9, n_resamples=200, rng=5)
    found = data["groups"]
    assert found["counts"] == [int(c) for c in reference.groups.counts]
    np.testing.assert_allclose(np.array(found["by_group"]["macro_f1"][:3], float),
                               reference.groups.by_group["macro_f1"][:3], atol=1e-12)
    assert found["by_group"]["macro_f1"][3] is None  # an empty group
    assert data["intervals"]["seed"] == 5
    assert data["intervals"]["metrics"]["accuracy"]["low"] == pytest.approx(
        reference.intervals.metrics["accuracy"].low, abs=1e-12)
    np.testing.assert_allclose(
        np.array(found["intervals"]["minus_overall"]["accuracy"]["high"][:3], float),
        reference.groups.intervals.minus_overall["accuracy"].high[:3], atol=1e-12)
    difference = found["intervals"]["difference"]["accuracy"]
    assert difference["low"] is None and difference["high"] is None
    assert difference["reason"].startswith("no interval for difference")


def test_command_line_group_problems(tmp_path, capsys):
    from metrics_gpu.cli import main

    np.save(tmp_path / "t.npy", np.array([0, 1, 1]))
    np.save(tmp_path / "g.npy", np.array([0, -1, 1]))
    np.save(tmp_path / "short.npy", np.array([0, 1]))
    common = ["report", "--y-true", str(tmp_path / "t.npy"), "--y-pred",
              str(tmp_path / "t.npy"), "--quiet"]
    assert main(common + ["--groups", str(tmp_path / "g.npy")]) != 0
    assert "holds the negative group -1 (groups are codes 0..G-1)" in capsys.readouterr().err
    assert main(common + ["--groups", str(tmp_path / "short.npy")]) != 0
    assert "--groups" in capsys.readouterr().err
    assert main(common + ["--groups", str(tmp_path / "t.npy"), "--num-groups", "1"]) != 0
    assert "groups must hold codes below num_groups=1" in capsys.readouterr().err


def test_plots_carry_the_intervals():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    y_true, y_pred, groups = _data(n=1500, k=3, g=3)
    report = label_report(y_true, y_pred, groups=groups, confidence_level=0.9,
                          n_resamples=100, rng=0)
    ax = report.plot_per_class("recall")
    bars = [p for p in ax.patches]
    assert len(bars) == 3
    np.testing.assert_allclose([b.get_height() for b in bars], report.per_class["recall"])
    segments = ax.collections[0].get_segments()  # the error bars
    interval = report.intervals.per_class["recall"]
    np.testing.assert_allclose([s[:, 1].min() for s in segments], interval.low)
    np.testing.assert_allclose([s[:, 1].max() for s in segments], interval.high)
    plt.close(ax.figure)
    ax = report.groups.plot("macro_f1")
    assert [b.get_height() for b in ax.patches] == pytest.approx(
        list(report.groups.by_group["macro_f1"]))
    overall = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert overall[0].get_ydata()[0] == pytest.approx(report.metrics["macro_f1"])
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="metric: 'support' is not a per-class rate"):
        report.plot_per_class("support")
    with pytest.raises(ValueError, match="metric: 'nope' is not a metric of the groups"):
        report.groups.plot("nope")


# -- Dask ------------------------------------------------------------------------------


def test_dask_report_groups_and_intervals_equal_in_memory():
    da = pytest.importorskip("dask.array")
    import metrics_gpu.dask as mgd

    y_true, y_pred, groups = _data(n=3000, k=3, g=4)
    sites = np.array(["east", "north", "south"])[groups % 3]
    got = mgd.label_report(da.from_array(y_true, chunks=700), da.from_array(y_pred, chunks=900),
                           groups=da.from_array(groups, chunks=500), num_groups=6,
                           confidence_level=0.9, n_resamples=200, rng=3, compute=True)
    expected = label_report(y_true, y_pred, groups=groups, num_groups=6, confidence_level=0.9,
                            n_resamples=200, rng=3)
    np.testing.assert_array_equal(got.groups.counts, expected.groups.counts)
    for name, values in expected.groups.by_group.items():
        np.testing.assert_allclose(got.groups.by_group[name], values, atol=1e-12)
    assert got.intervals.metrics["macro_f1"] == expected.intervals.metrics["macro_f1"]
    for kind in ("by_group", "minus_overall"):
        np.testing.assert_array_equal(getattr(got.groups.intervals, kind)["accuracy"].low,
                                      getattr(expected.groups.intervals, kind)["accuracy"].low)
    by_site = mgd.label_report(da.from_array(y_true, chunks=700),
                               da.from_array(y_pred, chunks=700), groups=sites,
                               compute=True).groups
    assert by_site.groups == ["east", "north", "south"]
    np.testing.assert_allclose(by_site.by_group["accuracy"],
                               label_report(y_true, y_pred, groups=sites).groups
                               .by_group["accuracy"], atol=1e-12)
    bad = groups.copy()
    bad[2500] = -1
    with pytest.raises(ValueError, match="groups must hold codes 0..G-1"):
        mgd.label_report(da.from_array(y_true, chunks=700), da.from_array(y_pred, chunks=700),
                         groups=da.from_array(bad, chunks=700), compute=True)


def test_command_line_pictures_and_page_carry_groups_and_intervals(tmp_path):
    pytest.importorskip("matplotlib")
    from metrics_gpu.cli import main

    y_true, y_pred, groups = _data(n=2000, k=3, g=3)
    for name, values in (("t", y_true), ("p", y_pred), ("g", groups)):
        np.save(tmp_path / f"{name}.npy", values)
    common = ["report", "--y-true", str(tmp_path / "t.npy"), "--y-pred",
              str(tmp_path / "p.npy"), "--groups", str(tmp_path / "g.npy"),
              "--confidence-level", "0.9", "--n-resamples", "100", "--seed", "2", "--quiet"]
    assert main(common + ["--plot", str(tmp_path / "plots")]) == 0
    written = {path.name for path in (tmp_path / "plots").iterdir()}
    assert {"per_class_f1.png", "groups_accuracy.png", "groups_macro_f1.png"} <= written
    assert main(common + ["--format", "html", "--output", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    reference = label_report(y_true, y_pred, groups=groups, confidence_level=0.9,
                             n_resamples=100, rng=2)
    ci = reference.intervals.metrics["accuracy"]
    assert f"[{ci.low:.4f}, {ci.high:.4f}]" in page
    assert '<section id="groups">' in page and "0.9 confidence intervals" in page


def test_a_grouped_update_costs_two_launches():
    """The cost of ClassificationMetrics(num_groups=G).update on a kernel
    backend: the state's update and the groups' statistics pass (its arrays
    allocated per call; no launch plan). The plain update stays one launch
    and no allocation."""
    from metrics_gpu import ClassificationMetrics
    from metrics_gpu.testing import operation_counter

    rng = np.random.default_rng(2)
    y, p, g = rng.integers(0, 3, 512), rng.integers(0, 3, 512), rng.integers(0, 4, 512)
    with use_backend("emulated"):
        grouped, plain = ClassificationMetrics(3, num_groups=4), ClassificationMetrics(3)
        grouped.update(y, p, groups=g)
        plain.update(y, p)
        with operation_counter() as with_groups:
            grouped.update(y, p, groups=g)
        with operation_counter() as without:
            plain.update(y, p)
    assert (with_groups.launches, with_groups.host_transfers) == (2, 0)
    assert with_groups.device_allocations <= 5
    assert (without.launches, without.device_allocations, without.host_transfers) == (1, 0, 0)


def test_a_bad_groups_batch_adds_nothing():
    from metrics_gpu import ClassificationMetrics

    metrics = ClassificationMetrics(2, num_groups=2)
    metrics.update(np.array([0, 1]), np.array([0, 1]), groups=np.array([0, 1]))
    with pytest.raises(ValueError, match="groups must hold codes below num_groups=2"):
        metrics.update(np.array([1, 1]), np.array([0, 1]), groups=np.array([0, 5]))
    report = metrics.compute()
    assert float(report.total) == 2 and list(report.groups.counts) == [1, 1]


# -- fairlearn's ratio for metrics of any sign (issue 47, item 7) -----------------------


def _fairlearn_frame(y_true, y_pred, groups):
    metrics = {"cohen_kappa": sklearn_metrics.cohen_kappa_score,
               "matthews_corrcoef": sklearn_metrics.matthews_corrcoef,
               "accuracy": sklearn_metrics.accuracy_score}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # kappa of one class: 0/0, as ours
        return fairlearn_metrics.MetricFrame(metrics=metrics, y_true=y_true, y_pred=y_pred,
                                             sensitive_features=groups)


def _assert_ratios_are_fairlearns(y_true, y_pred, groups):
    frame = _fairlearn_frame(y_true, y_pred, groups)
    found = label_report(y_true, y_pred, num_classes=3, groups=groups).groups
    for name in frame.by_group.columns:
        np.testing.assert_allclose(np.asarray(found.by_group[name], float),
                                   frame.by_group[name].to_numpy(float), atol=1e-12)
        for method in GROUP_METHODS:
            expected = float(frame.ratio(method=method)[name])
            got = found.ratio(method)[name]
            assert got == pytest.approx(expected, abs=1e-12, nan_ok=True), (name, method)
            if expected == 0:  # fairlearn's -0.0 and 0.0 are its own
                assert math.copysign(1, got) == math.copysign(1, expected), (name, method)


def test_ratio_to_overall_of_a_negative_metric_is_fairlearns():
    """kappa by group [-1, 0], overall -1/3: group / overall is 3 and -0.0;
    fairlearn takes 1/3 and -0.0, whose minimum is -0.0 (was -inf, from
    min(r, 1 / r) of -0.0)."""
    y_true, y_pred = np.array([0, 1, 0, 1, 0, 1]), np.array([1, 0, 0, 0, 0, 0])
    groups = np.array(["a", "a", "b", "b", "b", "b"])
    found = label_report(y_true, y_pred, groups=groups).groups
    np.testing.assert_allclose(np.asarray(found.by_group["cohen_kappa"]), [-1.0, 0.0])
    assert found.overall["cohen_kappa"] == pytest.approx(-1 / 3)
    ratio = found.ratio("to_overall")["cohen_kappa"]
    assert ratio == 0 and math.copysign(1, ratio) == -1
    _assert_ratios_are_fairlearns(y_true, y_pred, groups)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.sampled_from("abc")),
                min_size=2, max_size=24))
def test_ratios_are_fairlearns_for_every_sign_and_zero(rows):
    """Kappa and MCC (negative, zero, undefined) and accuracy (zero) of
    random small groups: both ratios equal fairlearn's MetricFrame.ratio."""
    y_true, y_pred, groups = (np.array(column) for column in zip(*rows))
    _assert_ratios_are_fairlearns(y_true, y_pred, groups)


# -- by_group selects a group by its label, as fairlearn's (issue 47, item 15) ----------


@pytest.mark.parametrize("kind", ["codes", "categories", "intersections"])
def test_by_group_selects_a_group_by_its_label_as_fairlearn(kind):
    y_true, y_pred, codes = _data(n=900, k=3, g=6, seed=2)
    sites = np.array(["north", "south", "east"])[codes % 3]
    devices = np.array(["phone", "tablet"])[codes % 2]
    groups = {"codes": codes, "categories": sites, "intersections": [sites, devices]}[kind]
    features = {"codes": codes, "categories": sites,
                "intersections": {"site": sites, "device": devices}}[kind]
    found = label_report(y_true, y_pred, num_classes=3, groups=groups).groups
    frame = fairlearn_metrics.MetricFrame(
        metrics={"accuracy": sklearn_metrics.accuracy_score,
                 "matthews_corrcoef": sklearn_metrics.matthews_corrcoef},
        y_true=y_true, y_pred=y_pred, sensitive_features=features)
    for name in ("accuracy", "matthews_corrcoef"):
        expected = frame.by_group[name]
        values = found.by_group[name]
        assert sorted(values.keys()) == sorted(expected.index)
        for label in expected.index:
            assert label in values
            assert values[label] == pytest.approx(expected[label], abs=1e-12), (name, label)
        assert values.to_dict() == pytest.approx(expected.to_dict(), abs=1e-12)
        # Still an array where one is taken, in group order.
        np.testing.assert_allclose(np.asarray(values), [expected[g] for g in found.groups],
                                   atol=1e-12)
        assert list(values) == list(np.asarray(values))
        assert float(values.max()) == pytest.approx(expected.max(), abs=1e-12)
        assert found.to_frame()[name].to_numpy() == pytest.approx(np.asarray(values))
    accuracy = found.by_group["accuracy"]
    if kind == "codes":  # codes are labels and positions at once
        assert accuracy[2] == accuracy.values[2]
    else:  # an integer that is no label is a position, as a pandas Series took it
        assert accuracy[1] == accuracy[found.groups[1]]
    with pytest.raises(KeyError, match="is not a group"):
        accuracy["nowhere"]
    assert (accuracy - 1.0 <= 0).all() and isinstance(accuracy * 2, np.ndarray)


# -- intervals that cover, and none for difference() (issue 47, item 8) -----------------
#
# Simulations: data sets drawn from known cell probabilities (a multinomial of
# each set's cells, passed as integer weights: the table the bootstrap
# resamples), the truth the metric of the probabilities themselves
# (scikit-learn with the probabilities as weights). A 95% interval must hold
# the truth in a number of sets that a binomial(sets, 0.95) allows (two-sided,
# 0.1%).

_BASE = np.array([[0.40, 0.10], [0.15, 0.35]])
_OTHERS = (np.array([[0.45, 0.05], [0.10, 0.40]]), np.array([[0.30, 0.20], [0.20, 0.30]]))
_COVERED = ("accuracy", "macro_f1", "matthews_corrcoef")


def _truth(name, probabilities):
    """``name`` of a K x K table of cell probabilities (scikit-learn, weighted)."""
    k = probabilities.shape[0]
    y_true, y_pred = (a.ravel() for a in np.meshgrid(range(k), range(k), indexing="ij"))
    metric = {"accuracy": sklearn_metrics.accuracy_score,
              "matthews_corrcoef": sklearn_metrics.matthews_corrcoef,
              "macro_f1": partial(sklearn_metrics.f1_score, average="macro")}[name]
    return metric(y_true, y_pred, sample_weight=probabilities.ravel())


def _assert_covers(covered, trials, where):
    from scipy.stats import binom

    low, high = binom.ppf(0.0005, trials, 0.95), binom.isf(0.0005, trials, 0.95)
    assert low <= covered <= high, f"{where}: covered {covered} of {trials}, not in [{low}, {high}]"


def _table_report(tables, rng, n_resamples):
    """label_report of (G, K, K) count tables (cells as weighted rows)."""
    g, k = tables.shape[0], tables.shape[1]
    groups, y_true, y_pred = (a.ravel() for a in np.meshgrid(range(g), range(k), range(k),
                                                               indexing="ij"))
    counts = tables.ravel()
    keep = counts > 0
    return label_report(y_true[keep], y_pred[keep], num_classes=k, sample_weight=counts[keep],
                        groups=groups[keep], num_groups=g, confidence_level=0.95,
                        n_resamples=n_resamples, rng=rng).groups


def test_each_groups_interval_covers_at_its_level():
    """200 independent groups of 150 samples (each group's interval is about
    its own cells only, so the data sets share one report), half of one
    table, half of another."""
    rng = np.random.default_rng(11)
    sets = 100
    tables = np.concatenate([rng.multinomial(150, p.ravel(), size=sets).reshape(-1, 2, 2)
                             for p in (_BASE, _OTHERS[1])])
    found = _table_report(tables, 3, 200).intervals.by_group
    for name in _COVERED:
        truth = np.repeat([_truth(name, p) for p in (_BASE, _OTHERS[1])], sets)
        ci = found[name]
        _assert_covers(int(np.sum((ci.low <= truth) & (truth <= ci.high))), 2 * sets, name)


@pytest.mark.parametrize("equal", [True, False], ids=["equal groups", "unequal groups"])
def test_each_group_minus_the_overall_covers_at_its_level(equal):
    """Three groups (shares 0.3, 0.3, 0.4) of 600 samples: each group's value
    minus the overall (the truth 0 for equal groups), and the difference of
    groups 0 and 1 (difference_between), are held at their level.
    The groups' intervals of the tables straight (group_metrics: the report's
    own intervals of the overall metrics are not under test here)."""
    from metrics_gpu import groups as G
    from metrics_gpu.intervals import check_interval_options

    rng = np.random.default_rng(12 + equal)
    sets, share = 120, np.array([0.3, 0.3, 0.4])
    tables_p = np.array([_BASE, _BASE, _BASE] if equal else [_BASE, *_OTHERS])
    joint = tables_p * share[:, None, None]
    truth = {name: np.array([_truth(name, p) for p in tables_p]) - _truth(name, joint.sum(0))
             for name in _COVERED}
    pair_truth = {name: truth[name][0] - truth[name][1] for name in _COVERED}
    covered = {name: np.zeros(3, int) for name in _COVERED}
    pair_covered = {name: 0 for name in _COVERED}
    for s in range(sets):
        tables = rng.multinomial(600, joint.ravel()).reshape(3, 2, 2)
        whole, _ = G._group_values(tables.sum(axis=0)[None])
        report = G.group_metrics(tables, [0, 1, 2], {n: float(v[0]) for n, v in whole.items()},
                                 check_interval_options(0.95, n_resamples=100, rng=s))
        found, pair = report.intervals.minus_overall, report.difference_between(0, 1)
        for name in _COVERED:
            ci = found[name]
            covered[name] += (ci.low <= truth[name]) & (truth[name] <= ci.high)
            pair_covered[name] += pair[name].low <= pair_truth[name] <= pair[name].high
    for name in _COVERED:
        for g in range(3):
            _assert_covers(int(covered[name][g]), sets, f"{name}, group {g}")
        _assert_covers(pair_covered[name], sets, f"{name}, group 0 - group 1")


@pytest.mark.parametrize("method", ["percentile", "basic", "bca"])
def test_difference_between_two_named_groups(method):
    """difference_between(a, b): by label, the value a - b of by_group, an
    interval about it from the groups' own draws; errors name the argument."""
    y_true, y_pred, codes = _data(n=900, k=3, g=3, seed=5)
    sites = np.array(["north", "south", "east"])[codes]
    report = label_report(y_true, y_pred, groups=sites, confidence_level=0.9, method=method,
                          n_resamples=200, rng=4).groups
    found = report.difference_between("south", "north")
    for name in ("accuracy", "macro_f1", "cohen_kappa"):
        ci = found[name]
        expected = report.by_group[name]["south"] - report.by_group[name]["north"]
        assert ci.value == pytest.approx(expected, abs=1e-12)
        assert ci.low < ci.high and ci.reason is None, name
        assert ci.low <= ci.value <= ci.high or method == "basic", name
    # Paired: a difference's replicates are the two groups' own replicates.
    own = report.intervals.by_group["accuracy"]
    widest = own.high[2] - own.low[2] + own.high[1] - own.low[1]
    assert found["accuracy"].high - found["accuracy"].low < widest
    with pytest.raises(ValueError, match="second: 'west' is not a group"):
        report.difference_between("north", "west")
    with pytest.raises(ValueError, match="first and second are the same group"):
        report.difference_between("north", "north")
    plain = label_report(y_true, y_pred, groups=sites).groups
    with pytest.raises(ValueError, match="difference_between needs the bootstrap"):
        plain.difference_between("south", "north")


@pytest.mark.parametrize("equal", [True, False], ids=["equal groups", "unequal groups"])
@pytest.mark.parametrize("method", ["percentile", "basic", "bca"])
def test_difference_has_no_interval_and_says_why(equal, method):
    """max - min (and the largest |group - overall|) is not smooth: its
    bootstrap held the true 0 of equal groups in 0 of 30 data sets, and basic
    intervals went below 0. No interval, and the reason, in the result, the
    JSON and the text report."""
    from metrics_gpu.groups import DIFFERENCE_WITHOUT_INTERVAL

    y_true, y_pred, groups = _data(n=600, k=3, g=3)
    if equal:
        groups = np.random.default_rng(1).integers(0, 3, y_true.size)
    report = label_report(y_true, y_pred, groups=groups, confidence_level=0.95,
                          method=method, n_resamples=100, rng=0)
    found = report.groups
    for kind, method_name in (("difference", "between_groups"),
                              ("difference_to_overall", "to_overall")):
        for name, ci in getattr(found.intervals, kind).items():
            assert math.isnan(ci.low) and math.isnan(ci.high), (kind, name)
            assert ci.reason == DIFFERENCE_WITHOUT_INTERVAL
            assert ci.value == pytest.approx(found.difference(method_name)[name], nan_ok=True)
            assert ci.to_dict()["reason"] == DIFFERENCE_WITHOUT_INTERVAL
    assert not any(np.isnan(found.intervals.by_group["accuracy"].low))
    assert not any(np.isnan(found.intervals.minus_overall["accuracy"].low))
    text = report.to_text()
    assert DIFFERENCE_WITHOUT_INTERVAL in text
    difference_line = next(line for line in text.splitlines()
                           if line.strip().startswith("difference"))
    assert "[" not in difference_line
    from html import escape

    assert escape(DIFFERENCE_WITHOUT_INTERVAL) in report.to_html()
