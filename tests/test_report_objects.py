"""Every report type is a read-only mapping of its scalar metrics, with a short
repr, plain to_dict() values and strict JSON (NaN as null)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

import numpy as np
import pytest

import metrics_gpu as mg
from metrics_gpu.cli import main
from metrics_gpu.files import PredictionReport, report_files
from tests.conftest import host_array

Y_TRUE = np.array([0, 1, 2, 2, 1, 0, 2, 1])
Y_PRED = np.array([0, 2, 2, 2, 1, 0, 1, 1])
LOGITS = np.array([[2.0, 0.1, 0.3], [0.2, 0.4, 1.1], [0.1, 0.2, 2.0], [0.0, 0.5, 1.5],
                   [0.3, 1.9, 0.2], [1.2, 0.3, 0.1], [0.2, 1.4, 0.9], [0.1, 2.1, 0.4]])


def _refuse(constant: str):
    raise ValueError(f"strict JSON has no {constant}")


def _walk(value):
    """Every leaf of a to_dict() result."""
    if isinstance(value, dict):
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)
    else:
        yield value


def assert_plain(as_dict: dict) -> None:
    """Python values only, no NaN, and strict JSON round-trips them."""
    for leaf in _walk(as_dict):
        assert leaf is None or type(leaf) in (int, float, bool, str), type(leaf)
        assert not (isinstance(leaf, float) and not math.isfinite(leaf)), leaf
    text = json.dumps(as_dict, allow_nan=False)
    assert json.loads(text, parse_constant=_refuse) == as_dict


def assert_mapping(report, name: str) -> None:
    """The Mapping protocol, consistent with itself and with to_dict()['metrics']."""
    assert isinstance(report, Mapping)
    keys = list(report)
    assert keys and list(report.keys()) == keys and len(report) == len(keys)
    assert len(set(keys)) == len(keys) and all(isinstance(k, str) for k in keys)
    assert all(k in report for k in keys) and "no_such_metric" not in report and 0 not in report
    items = list(report.items())
    assert [k for k, _ in items] == keys and len(list(report.values())) == len(keys)
    as_dict = report.to_dict()
    assert_plain(as_dict)
    # PredictionReport keeps its score metrics under "scores", beside the arrays.
    scalars = {**(as_dict.get("scores") or {}), **as_dict["metrics"]}
    for key, value in items:
        expected = float(host_array(value))
        got = scalars[key]
        assert (got is None) if math.isnan(expected) else got == pytest.approx(expected), key
    with pytest.raises(KeyError, match=r"'acuracy' is not a metric.*did you mean accuracy"):
        report["acuracy"]
    with pytest.raises(KeyError):
        report[0]
    text = repr(report)
    assert text.startswith(f"{name}(") and "accuracy=" in text and len(text) < 300
    assert_plain(json.loads(report.to_json(), parse_constant=_refuse))


def test_label_report(backend):
    report = mg.label_report(backend.asarray(Y_TRUE), backend.asarray(Y_PRED))
    assert_mapping(report, "LabelReport")
    assert list(report) == [row.name for row in mg.REPORT_METRICS]
    assert report["macro_f1"] == report.metrics["macro_f1"]
    assert "samples=8" in repr(report) and "on the device" not in repr(report)
    as_dict = report.to_dict()
    assert as_dict["per_class"]["2"]["support"] == 3 and as_dict["total"] == 8


def test_label_report_undefined_is_none(backend):
    """One class: the kappas are 0/0, NaN in the report, None in to_dict."""
    report = mg.label_report(backend.asarray(np.zeros(4, dtype=np.int64)),
                             backend.asarray(np.zeros(4, dtype=np.int64)))
    assert math.isnan(report["cohen_kappa"])
    assert report.to_dict()["metrics"]["cohen_kappa"] is None
    assert '"cohen_kappa": null' in report.to_json()
    assert_mapping(report, "LabelReport")


def test_logits_report(backend):
    report = mg.logits_report(backend.asarray(Y_TRUE), backend.asarray(LOGITS), top_k=(1, 2),
                              n_bins=4)
    assert_mapping(report, "LogitsReport")
    assert list(report) == ["accuracy", "top_1_accuracy", "top_2_accuracy", "cross_entropy",
                            "perplexity", "brier_score", "hinge_loss",
                            "expected_calibration_error", "max_calibration_error"]
    assert report["top_2_accuracy"] is report.top_k_accuracy[2]
    assert report["cross_entropy"] is report.cross_entropy
    as_dict = report.to_dict()
    assert None in as_dict["calibration"]["confidence"]  # an empty bin
    assert as_dict["total"] == 8 and as_dict["invalid"] == 0
    assert "cross_entropy=" in repr(report)


@pytest.mark.parametrize("kind", ["labels", "scores"])
def test_streaming_report(backend, kind):
    metrics = mg.ClassificationMetrics(3, top_k=(1, 2), n_bins=4, thresholds=8)
    metrics.update(backend.asarray(Y_TRUE), backend.asarray(Y_PRED if kind == "labels"
                                                             else LOGITS))
    report = metrics.compute()
    assert_mapping(report, "StreamingReport")
    assert list(report) == list(report.metrics)
    assert dict(report).keys() == report.to_dict()["metrics"].keys()
    scores = {"cross_entropy", "top_2_accuracy", "roc_auc_macro"}
    assert scores <= set(report) if kind == "scores" else not scores & set(report)
    assert f"kind={kind}" in repr(report) and "classes=3" in repr(report)


def test_logits_and_streaming_reports_share_names(backend):
    logits = mg.logits_report(backend.asarray(Y_TRUE), backend.asarray(LOGITS))
    metrics = mg.ClassificationMetrics(3)
    metrics.update(backend.asarray(Y_TRUE), backend.asarray(LOGITS))
    assert set(logits) <= set(metrics.compute())


def _files(tmp_path, y_true, y_pred, scores=None):
    np.save(tmp_path / "t.npy", y_true)
    np.save(tmp_path / "p.npy", y_pred)
    sources = {"y_true": str(tmp_path / "t.npy"), "y_pred": str(tmp_path / "p.npy"),
               "scores": None, "sample_weight": None}
    if scores is not None:
        np.save(tmp_path / "s.npy", scores)
        sources["scores"] = str(tmp_path / "s.npy")
    return sources


def test_prediction_report(tmp_path):
    report = report_files(_files(tmp_path, Y_TRUE, Y_PRED, LOGITS), backend="numpy",
                          n_bins=4, top_k=(1, 2))
    assert isinstance(report, PredictionReport)
    assert_mapping(report, "PredictionReport")
    assert list(report)[:len(report.labels)] == list(report.labels)
    assert {"cross_entropy", "roc_auc_macro"} <= set(report)
    assert "per_class" not in report and "calibration" not in report
    as_dict = report.to_dict()
    assert as_dict["rows"] == 8 and as_dict["scores"]["per_class"]["roc_auc"]
    assert "rows=8" in repr(report)
    markdown = report.to_markdown()  # one table: the score rows before the legend
    assert markdown.index("| cross_entropy |") < markdown.index("\n\nper-class averages")


def test_json_descriptions_and_groups(tmp_path):
    report = report_files(_files(tmp_path, Y_TRUE, Y_PRED, LOGITS), backend="numpy")
    described = json.loads(report.to_json())
    assert described["descriptions"]["error_rate"] == "mean one-vs-rest error over classes"
    assert "cross_entropy" in described["descriptions"]
    groups = list(described["metric_groups"].values())
    assert "accuracy" in groups[0] and {"average_accuracy", "error_rate"} <= set(groups[1])
    assert "descriptions" not in report.to_dict()


GROUP_CODES = np.array([0, 1, 0, 1, 1, 0, 1, 0])


def _every_report_json(tmp_path, grouped: bool) -> dict[str, dict]:
    """The JSON of each report type that has groups and a legend, with and
    without groups= (``--groups`` for the files' report)."""
    tmp_path.mkdir()
    groups = {"groups": GROUP_CODES} if grouped else {}
    stream = mg.ClassificationMetrics(3, num_groups=2 if grouped else None)
    stream.update(Y_TRUE, LOGITS, **groups)
    sources = _files(tmp_path, Y_TRUE, Y_PRED, LOGITS)
    if grouped:
        np.save(tmp_path / "g.npy", GROUP_CODES)
        sources["groups"] = str(tmp_path / "g.npy")
    return {"LabelReport": json.loads(mg.label_report(Y_TRUE, Y_PRED, **groups).to_json()),
            "StreamingReport": json.loads(stream.compute().to_json()),
            "PredictionReport": json.loads(report_files(sources, backend="numpy").to_json())}


def test_json_keys_say_what_they_hold_and_the_old_ones_stay_a_release(tmp_path):
    """"metric_groups" is the display grouping, "groups" the metrics of each
    group; the old keys ("groups" for the display grouping without groups=,
    "group_metrics") are still there, equal to the new, and "deprecated" names them."""
    for name, plain in _every_report_json(tmp_path / "plain", grouped=False).items():
        assert plain["metric_groups"]["overall (scikit-learn definitions)"][0] == "accuracy", name
        assert plain["groups"] == plain["metric_groups"], name  # old key, same content
        assert set(plain["deprecated"]) == {"groups"}, name
        assert '"metric_groups"' in plain["deprecated"]["groups"], name
        assert "group_metrics" not in plain, name
    for name, grouped in _every_report_json(tmp_path / "grouped", grouped=True).items():
        assert grouped["groups"]["groups"] == [0, 1], name  # the metrics of each group
        assert len(grouped["groups"]["by_group"]["accuracy"]) == 2, name
        assert grouped["group_metrics"] == grouped["groups"], name  # old key, same content
        assert set(grouped["deprecated"]) == {"group_metrics"}, name
        assert '"groups"' in grouped["deprecated"]["group_metrics"], name
        assert grouped["metric_groups"] == plain["metric_groups"], name
    assert "deprecated" not in mg.label_report(Y_TRUE, Y_PRED).to_dict()  # no legend, no groups


def test_json_old_keys_on_the_command_line(tmp_path, capsys):
    sources = _files(tmp_path, Y_TRUE, Y_PRED, LOGITS)
    np.save(tmp_path / "g.npy", GROUP_CODES)
    assert main(["report", "--y-true", sources["y_true"], "--scores", sources["scores"],
                 "--groups", str(tmp_path / "g.npy"), "--format", "json", "--quiet"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["groups"]["counts"] == [4, 4] and printed["group_metrics"] == printed["groups"]
    assert list(printed["deprecated"]) == ["group_metrics"]


def test_text_groups_the_metrics(tmp_path):
    text = mg.label_report(Y_TRUE, Y_PRED).to_text()
    sklearn, onedal = text.index("overall (scikit-learn"), text.index("per-class averages (")
    assert sklearn < text.index("accuracy ") < onedal < text.index("error_rate")
    assert "count true negatives" in " ".join(text.split())  # average_accuracy's legend
    markdown = mg.label_report(Y_TRUE, Y_PRED).to_markdown()
    assert "| error_rate |" in markdown and "one-vs-rest" in markdown


def test_cli_json_is_strict(tmp_path, capsys):
    """One class: undefined kappas and empty calibration bins, written as null."""
    sources = _files(tmp_path, np.zeros(6, dtype=np.int64), np.zeros(6, dtype=np.int64),
                     np.tile([3.0, 0.0], (6, 1)))
    assert main(["report", "--y-true", sources["y_true"], "--y-pred", sources["y_pred"],
                 "--scores", sources["scores"], "--format", "json", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "NaN" not in out and "Infinity" not in out
    report = json.loads(out, parse_constant=_refuse)
    assert report["metrics"]["cohen_kappa"] is None
    assert None in report["scores"]["calibration"]["confidence"]
    assert "descriptions" in report


def test_demo_json_is_strict(capsys):
    assert main(["demo", "--samples", "50", "--classes", "1", "--format", "json",
                 "--backend", "numpy"]) == 0
    report = json.loads(capsys.readouterr().out, parse_constant=_refuse)
    assert report["metrics"]["cohen_kappa"] is None


def test_dask_report_has_the_in_memory_shape():
    da = pytest.importorskip("dask.array")
    import metrics_gpu.dask as mgd

    y, z = da.from_array(Y_TRUE, chunks=3), da.from_array(LOGITS, chunks=(3, 3))
    report = mgd.classification_metrics(y, z, 3, thresholds=8, compute=True)
    metrics = mg.ClassificationMetrics(3, thresholds=8)
    metrics.update(Y_TRUE, LOGITS)
    expected = metrics.compute()
    assert isinstance(report, mg.StreamingReport)
    assert_mapping(report, "DaskStreamingReport")
    assert list(report) == list(expected)
    as_dict, expected_dict = report.to_dict(), expected.to_dict()
    assert as_dict.keys() == expected_dict.keys()
    for name, value in expected_dict["metrics"].items():
        got = as_dict["metrics"][name]
        assert (got is None) if value is None else got == pytest.approx(value, rel=1e-12), name
    with pytest.warns(DeprecationWarning, match="to_dict"):
        assert report["metrics"] == as_dict["metrics"]  # the old dictionary's keys
    labels = mgd.label_report(y, da.from_array(Y_PRED, chunks=3), compute=True)
    assert isinstance(labels, mg.LabelReport)
    assert list(labels) == list(mg.label_report(Y_TRUE, Y_PRED))
    assert labels.to_dict() == mg.label_report(Y_TRUE, Y_PRED).to_dict()


@pytest.mark.parametrize("name, state_options, scores, expected", [
    pytest.param("roc_auc", {}, True, r"'roc_auc' is counted only by a state built with "
                 r"thresholds: pass thresholds=H to ClassificationMetrics", id="binned-auc"),
    pytest.param("average_precision_micro", {}, True, "pass thresholds=H", id="binned-ap"),
    pytest.param("cross_entropy", {}, False, r"'cross_entropy' needs scores: update "
                 r"ClassificationMetrics with \(N, K\) scores", id="labels-only"),
    pytest.param("top_3_accuracy", {"top_k": (1, 2)}, True, r"top_k does not hold its k.*"
                 r"pass top_k=\(\.\.\.\) to ClassificationMetrics", id="top-k-not-asked"),
])
def test_a_missing_stream_metric_says_how_to_get_it(backend, name, state_options, scores,
                                                     expected):
    """Issue 48, item 5: a metric a state was not built (or updated) for names the
    option that gives it, not only the names it has."""
    rng = np.random.default_rng(48)
    metrics = mg.ClassificationMetrics(4, **state_options)
    y = rng.integers(0, 4, 50)
    metrics.update(backend.asarray(y), backend.asarray(
        rng.normal(size=(50, 4)) if scores else rng.integers(0, 4, 50)))
    report = metrics.compute()
    with pytest.raises(KeyError, match=expected):
        report[name]
    # Built with what it names, the state has it.
    if "thresholds" in expected:
        built = mg.ClassificationMetrics(4, thresholds=64, **state_options)
        built.update(backend.asarray(y), backend.asarray(rng.normal(size=(50, 4))))
        assert name in built.compute()


def test_a_missing_multilabel_metric_says_how_to_get_it(backend):
    rng = np.random.default_rng(48)
    y = (rng.random((40, 3)) < 0.5).astype(np.int64)
    scores = rng.normal(size=(40, 3))
    metrics = mg.MultilabelMetrics(num_labels=3)
    metrics.update(backend.asarray(y), backend.asarray(scores))
    with pytest.raises(KeyError, match=r"'roc_auc_macro' is counted only by a state built "
                       r"with thresholds: pass thresholds=H to MultilabelMetrics"):
        metrics.compute()["roc_auc_macro"]
    built = mg.MultilabelMetrics(num_labels=3, thresholds=64)
    built.update(backend.asarray(y), backend.asarray(scores))
    assert "roc_auc_macro" in built.compute()
