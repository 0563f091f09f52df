"""Classification metrics of a Spark DataFrame in one pass over its partitions.

Install the ``[spark]`` extra (PySpark and pyarrow; Spark needs a Java
runtime, 17 or later for PySpark 4): ``pip install '.[spark]'`` in a
checkout, or the wheel file with ``[spark]``. Importing :mod:`metrics_gpu`
never imports Spark; only this module does.

:func:`report` is the report of ``metrics-gpu report`` for a DataFrame:

    the classes and groups, where not given, found by one aggregate ->
    one ``mapInArrow`` pass: each task reads its partition's Arrow record
    batches into a :class:`metrics_gpu.ClassificationMetrics` state (or a
    :class:`metrics_gpu.MultilabelMetrics` one), on the executor's GPU
    where CuPy and a device are present, else with NumPy, and returns its
    ``state_dict`` -> the driver merges the states (exactly: ``merge`` adds
    counts) and reports

Only the states travel to the driver (O(K), the K x K matrix, the K x H
histogram of the binned ROC AUC), never a row. Where MLlib's evaluators take
a pass over the data per metric, this is one pass for all of them.

Examples
--------
>>> from metrics_gpu import spark as mgs            # doctest: +SKIP
>>> report = mgs.report(predictions, y_true="label", scores="probability")  # doctest: +SKIP
>>> report["accuracy"], report["f1_weighted"], report["cross_entropy"]  # doctest: +SKIP
>>> print(report.to_text())                         # doctest: +SKIP
"""

# The modules, in layers: partition (a task's batches into the states: Arrow
# and NumPy, no Spark) under driver (the plan, the pass, the merge: the one
# module that imports Spark; first here, for the [spark] extra's error).
from metrics_gpu.spark.driver import TASKS, report

__all__ = ["TASKS", "report"]

report.__module__ = "metrics_gpu.spark"
