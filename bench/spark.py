"""Bench: metrics_gpu.spark's one pass against Spark MLlib's evaluators.

    python bench/spark.py [--rows 1e7] [--classes 2] [--partitions N]
                          [--backend auto] [--repeat 1] [--driver-memory 6g]

One local SparkSession (``local[*]``), one DataFrame of ``--rows`` rows made
by Spark itself (``spark.range``: a ``label`` (double, class 0..K-1), a
``probability`` ML vector of K probabilities leaning to the label, and
``prediction``, its argmax, as MLlib's models write them), cached and counted
before any timing. Then, on that same cached DataFrame:

* MLlib: one ``evaluate()`` per number, each a pass over the data, for the
  numbers a report gives at once: ``MulticlassClassificationEvaluator``'s
  accuracy, weightedFMeasure, precisionByLabel and recallByLabel for each of
  the K classes, logLoss; with K = 2 also ``BinaryClassificationEvaluator``'s
  areaUnderROC and areaUnderPR (MLlib bins them too: numBins=1000);
* ours: ``metrics_gpu.spark.report(df, y_true="label", scores="probability",
  num_classes=K)`` (K given: no aggregate first, one pass), which gives those
  numbers and every other of the report (binned ROC AUC / AP over 1000
  thresholds with their error bound).

Prints each MLlib call's seconds and value beside ours, the totals and the
ratio (MLlib seconds / ours), best of ``--repeat``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from _common import REPO, Printer, best_time, count, fmt_n, git_commit, stderr_progress

progress = stderr_progress("spark")


def session(driver_memory: str):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # The Python workers import this checkout's metrics_gpu.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[*]").appName("bench/spark.py")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.memory", driver_memory)
             .config("spark.sql.shuffle.partitions", str(os.cpu_count() or 2))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def predictions(spark, rows: int, classes: int, partitions: int):
    """label (double), probability (ML vector), prediction (double, its argmax)."""
    from pyspark.ml.functions import array_to_vector
    from pyspark.sql import functions as SF

    df = spark.range(0, rows, numPartitions=partitions)
    df = df.withColumn("label", SF.floor(SF.rand(1) * classes).cast("double"))
    # Each class's score: uniform, the label's raised (a binary model right ~72% of the time).
    raw = [SF.rand(10 + k) + SF.when(SF.col("label") == k, 0.25).otherwise(0.0)
           for k in range(classes)]
    df = df.withColumn("raw", SF.array(*raw))
    total = SF.aggregate("raw", SF.lit(0.0), lambda acc, x: acc + x)
    df = df.withColumn("p", SF.transform("raw", lambda x: x / total))
    df = df.withColumn("prediction",
                       (SF.array_position("p", SF.array_max("p")) - 1).cast("double"))
    return df.select("label", "prediction",
                     array_to_vector("p").alias("probability")).cache()


def mllib_calls(classes: int):
    """(name, evaluator) of every evaluate() the numbers take."""
    from pyspark.ml.evaluation import (
        BinaryClassificationEvaluator,
        MulticlassClassificationEvaluator,
    )

    def multi(metric, **extra):
        return MulticlassClassificationEvaluator(
            labelCol="label", predictionCol="prediction", probabilityCol="probability",
            metricName=metric, **extra)

    calls = [("accuracy", multi("accuracy")), ("weighted F1", multi("weightedFMeasure"))]
    for k in range(classes):
        calls.append((f"precision of class {k}", multi("precisionByLabel", metricLabel=float(k))))
        calls.append((f"recall of class {k}", multi("recallByLabel", metricLabel=float(k))))
    calls.append(("log loss", multi("logLoss")))
    if classes == 2:
        for metric in ("areaUnderROC", "areaUnderPR"):
            calls.append((f"binary {metric}", BinaryClassificationEvaluator(
                labelCol="label", rawPredictionCol="probability", metricName=metric)))
    return calls


def ours_of(report, name: str, classes: int):
    """Our value of an MLlib call's number."""
    labels = report.labels
    if name == "accuracy":
        return report["accuracy"]
    if name == "weighted F1":
        return report["weighted_f1"]
    if name.startswith(("precision", "recall")):
        k = int(name.rsplit(" ", 1)[1])
        return float(labels.per_class[name.split(" ")[0]][k])
    if name == "log loss":
        return report["cross_entropy"]
    if name == "binary areaUnderROC":
        return report["roc_auc"]
    if name == "binary areaUnderPR":
        return report["average_precision"]
    raise KeyError(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=count, default=10_000_000)
    parser.add_argument("--classes", type=count, default=2)
    parser.add_argument("--partitions", type=count, default=None,
                        help="partitions of the DataFrame (default: 2 per core)")
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--repeat", type=count, default=1)
    parser.add_argument("--driver-memory", default="6g")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from metrics_gpu import spark as mgs

    import pyspark

    out = Printer()
    partitions = args.partitions or 2 * (os.cpu_count() or 1)
    spark = session(args.driver_memory)
    progress(f"making and caching {fmt_n(args.rows)} rows")
    df = predictions(spark, args.rows, args.classes, partitions)
    start = time.perf_counter()
    df.count()
    cached = time.perf_counter() - start

    def ours():
        return mgs.report(df, y_true="label", scores="probability",
                          num_classes=args.classes, backend=args.backend)

    progress("ours (one pass; and once first, untimed: the workers' imports)")
    report = ours()
    ours_seconds, report = best_time(ours, args.repeat)
    rows = []
    for name, evaluator in mllib_calls(args.classes):
        progress(f"MLlib: {name}")
        seconds, value = best_time(lambda: evaluator.evaluate(df), args.repeat)
        rows.append((name, seconds, value, ours_of(report, name, args.classes)))
    mllib_seconds = sum(seconds for _, seconds, _, _ in rows)

    out(f"# bench/spark.py at {git_commit()}: metrics_gpu.spark against MLlib's evaluators")
    out("")
    out(f"{fmt_n(args.rows)} rows, K = {args.classes}, {partitions} partitions, local[*] on "
        f"{os.cpu_count()} cores, PySpark {pyspark.__version__}, the DataFrame cached "
        f"({cached:.1f} s to make and cache it, not counted); ours on the "
        f"{report.evaluation.backend} backend; best of {args.repeat}.")
    out("")
    out("| MLlib evaluate() | seconds | MLlib's value | ours |")
    out("| --- | ---: | ---: | ---: |")
    for name, seconds, value, mine in rows:
        out(f"| {name} | {seconds:.2f} | {value:.6f} | {mine:.6f} |")
    out(f"| **{len(rows)} passes in all** | **{mllib_seconds:.2f}** | | |")
    out("")
    out(f"ours, one pass (metrics_gpu.spark.report, every number above and the rest of the "
        f"report): {ours_seconds:.2f} s")
    out(f"ratio (MLlib's {len(rows)} evaluate() calls / our one pass): "
        f"{mllib_seconds / ours_seconds:.2f}x")
    if args.classes == 2:
        out("")
        out(f"binned AUC: ours over {report.streaming.histogram.shape[-1]} thresholds, "
            f"error bound {report['roc_auc_error_bound']:.2e} (ROC), "
            f"{report['average_precision_error_bound']:.2e} (AP); MLlib's curve is "
            "down-sampled to numBins=1000 and its areaUnderPR is the trapezoid area, not "
            "average precision (scikit-learn's step sum), hence the small difference.")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
