"""metrics-gpu: classification metrics at the speed of memory.

Importing this package never imports CuPy, torch or JAX, nor touches CUDA.
"""

from metrics_gpu.backends.selection import (
    BackendUnavailableError,
    get_backend,
    set_backend,
    use_backend,
)
from metrics_gpu._functional.confusion import confusion_matrix, multilabel_confusion_matrix
from metrics_gpu._functional.labels import (
    accuracy_score,
    balanced_accuracy_score,
    balanced_accuracy_weighted,
    class_likelihood_ratios,
    classification_report,
    cohen_kappa_score,
    hamming_loss,
    matthews_corrcoef,
    zero_one_loss,
)
from metrics_gpu._functional.rates import (
    f1_score,
    fbeta_score,
    jaccard_score,
    precision_recall_fscore_support,
    precision_score,
    recall_score,
    specificity_score,
)
from metrics_gpu._functional.encoding import encode_labels
from metrics_gpu._multilabel.ranking import (
    coverage_error,
    dcg_score,
    label_ranking_average_precision_score,
    label_ranking_loss,
    label_ranking_metrics,
    ndcg_score,
)
from metrics_gpu._formulas.labels import PER_CLASS_METRICS, REPORT_METRICS, UndefinedMetricWarning
from metrics_gpu.sources import (
    OVERALL_PERFORMANCE_NAMES,
    PER_CLASS_PERFORMANCE_COLUMNS,
    BinaryQualityMetrics,
    MulticlassQualityMetrics,
    binary_quality_metrics,
    catboost_metric,
    multiclass_quality_metrics,
    overall_performance,
    per_class_performance,
)
from metrics_gpu._functional.ranking import (
    average_precision_score,
    multiclass_auc_mu,
    precision_recall_curve,
    roc_auc_score,
    roc_curve,
)
from metrics_gpu._functional.thresholds import auc, confusion_matrix_at_thresholds, det_curve
from metrics_gpu._functional.scores import (
    LogitsReport,
    brier_score_loss,
    d2_brier_score,
    d2_log_loss_score,
    expected_calibration_error,
    hinge_loss,
    log_loss,
    logits_report,
    top_k_accuracy_score,
)
from metrics_gpu._multilabel.stream import MultilabelMetrics, MultilabelReport
from metrics_gpu._streaming.metrics import ClassificationMetrics, StepReport, StreamingReport
from metrics_gpu._reports.labels import LabelReport, label_report

from metrics_gpu._common.version import __version__

__all__ = [
    "BackendUnavailableError", "BinaryQualityMetrics", "ClassificationMetrics", "LabelReport", "LogitsReport",
    "MulticlassQualityMetrics", "MultilabelMetrics", "MultilabelReport",
    "OVERALL_PERFORMANCE_NAMES", "PER_CLASS_METRICS",
    "PER_CLASS_PERFORMANCE_COLUMNS", "REPORT_METRICS", "UndefinedMetricWarning",
    "accuracy_score", "auc", "average_precision_score", "balanced_accuracy_score",
    "balanced_accuracy_weighted",
    "binary_quality_metrics", "brier_score_loss", "catboost_metric", "class_likelihood_ratios", "classification_report",
    "cohen_kappa_score", "confusion_matrix", "confusion_matrix_at_thresholds", "coverage_error", "d2_brier_score", "d2_log_loss_score", "dcg_score", "det_curve", "encode_labels", "f1_score",
    "fbeta_score",
    "expected_calibration_error", "get_backend", "hamming_loss", "hinge_loss", "jaccard_score",
    "label_ranking_average_precision_score", "label_ranking_loss", "label_ranking_metrics",
    "label_report", "log_loss", "logits_report", "matthews_corrcoef", "multiclass_auc_mu",
    "multiclass_quality_metrics", "multilabel_confusion_matrix", "ndcg_score",
    "overall_performance",
    "per_class_performance",
    "precision_recall_curve", "precision_recall_fscore_support", "precision_score",
    "recall_score", "roc_auc_score", "roc_curve", "set_backend",
    "specificity_score", "StepReport", "StreamingReport", "top_k_accuracy_score", "use_backend",
    "zero_one_loss",
]

# Last (the modules loaded): torch.compile must find the package on its skip
# list whenever it traces.
from metrics_gpu._pipeline.torch_compile import keep_package_out_of_dynamo  # noqa: E402

keep_package_out_of_dynamo()
