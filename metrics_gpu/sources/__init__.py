"""The source systems' own metric bundles, each with its own conventions:
oneDAL (:mod:`.onedal`), pyActLearn (:mod:`.pyactlearn`) and CatBoost
(:mod:`.catboost`). The overview paper's (Grandini et al.) metrics are rows of
the label report (:data:`metrics_gpu.REPORT_METRICS`), not a bundle of their own.

Conventions that differ between the sources are not blended: each entry point
follows its source, states how in its docstring, and takes every formula from
:mod:`metrics_gpu._formulas.labels` with that source's zero-division rule.
"""

from metrics_gpu.sources.catboost import catboost_metric, parse_catboost_spec
from metrics_gpu.sources.onedal import (
    BinaryQualityMetrics,
    MulticlassQualityMetrics,
    binary_quality_metrics,
    multiclass_quality_metrics,
)
from metrics_gpu.sources.pyactlearn import (
    OVERALL_PERFORMANCE_NAMES,
    PER_CLASS_PERFORMANCE_COLUMNS,
    overall_performance,
    per_class_performance,
)

__all__ = [
    "BinaryQualityMetrics", "MulticlassQualityMetrics", "OVERALL_PERFORMANCE_NAMES",
    "PER_CLASS_PERFORMANCE_COLUMNS", "binary_quality_metrics", "catboost_metric",
    "multiclass_quality_metrics", "overall_performance", "parse_catboost_spec",
    "per_class_performance",
]
