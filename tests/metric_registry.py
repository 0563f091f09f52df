"""Every public function of :mod:`metrics_gpu` once, with the properties the
common tests (``tests/test_common.py``) hold it to.

The model is scikit-learn's ``sklearn/metrics/tests/test_common.py``, whose
tables (``ALL_METRICS``, ``SYMMETRIC_METRICS``,
``METRICS_WITHOUT_SAMPLE_WEIGHT`` ...) drive one test per property for every
metric. Here each metric is one :class:`Metric` row: how to call it on the
shared small :class:`Case`, and what it promises. A property a function does
not have is a field of its row with the reason in ``notes`` (a test checks
that every "no" has one), never a skip.

Names of :data:`metrics_gpu.__all__` that are not metrics (classes,
constants, the backend switches, the label encoder) are in
:data:`NOT_METRICS`, each with the reason and where it is tested instead.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import sklearn.metrics as skm

import metrics_gpu as mg

# -- the case every metric is called on ----------------------------------------------------

N_SAMPLES = 80
N_CLASSES = 4
SEED = 20261125


@dataclass(frozen=True)
class Case:
    """Small inputs of every kind, drawn once (N = 80 samples, K = 4 classes).

    Every class occurs in ``y_true`` and ``y_pred`` (scikit-learn's log loss
    and one-vs-rest AUC need every column's class in ``y_true``); binary
    scores are rounded to 0.1, so ties (the hard case of every ranking
    metric) are common.
    """

    y_true: np.ndarray          # (N,) int64 in [0, K)
    y_pred: np.ndarray          # (N,) int64 in [0, K), right about 60% of the time
    binary_true: np.ndarray     # (N,) int64 in {0, 1}
    binary_pred: np.ndarray     # (N,) int64 in {0, 1}
    binary_score: np.ndarray    # (N,) float64 in [0, 1.3], rounded to 0.1 (ties)
    probabilities: np.ndarray   # (N, K) float64 rows summing to 1
    logits: np.ndarray          # (N, K) float64 raw scores
    float_weights: np.ndarray   # (N,) float64 in [0.1, 2)
    int_weights: np.ndarray     # (N,) int64 in [1, 3]: repeats of each sample

    @property
    def n(self) -> int:
        return self.y_true.shape[0]

    def confusion_matrix(self) -> np.ndarray:
        """The K x K counts of (y_true, y_pred), rows actual (NumPy only, no metrics_gpu)."""
        k = N_CLASSES
        return np.bincount(self.y_true * k + self.y_pred, minlength=k * k).reshape(k, k)

    def arrays(self, inputs: str) -> tuple[np.ndarray, ...]:
        """The positional arrays of a metric reading ``inputs`` (see :data:`INPUTS`)."""
        return {
            "labels": lambda: (self.y_true, self.y_pred),
            "binary_labels": lambda: (self.binary_true, self.binary_pred),
            "binary_scores": lambda: (self.binary_true, self.binary_score),
            "probabilities": lambda: (self.y_true, self.probabilities),
            "logits": lambda: (self.y_true, self.logits),
            "multilabel_scores": lambda: ((self.logits > 0.5).astype(np.int64),
                                          np.round(self.probabilities, 1)),
            "relevance": lambda: (np.floor(self.probabilities * 4), np.round(self.logits)),
            "confusion_matrix": lambda: (self.confusion_matrix(),),
            "curve": lambda: (np.sort(self.probabilities[:, 0]), self.probabilities[:, 1]),
        }[inputs]()


def make_case(rng: np.random.Generator, n: int = N_SAMPLES, k: int = N_CLASSES) -> Case:
    y_true = rng.integers(0, k, n)
    y_pred = np.where(rng.random(n) < 0.6, y_true, rng.integers(0, k, n))
    y_true[:k] = y_pred[:k] = np.arange(k)  # every class in both
    binary_true = (y_true >= k // 2).astype(np.int64)
    binary_pred = (y_pred >= k // 2).astype(np.int64)
    binary_score = np.round(rng.random(n) + 0.3 * binary_true, 1)
    logits = rng.normal(size=(n, k)) + 1.5 * np.eye(k)[y_true]
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    return Case(
        y_true=y_true, y_pred=y_pred, binary_true=binary_true, binary_pred=binary_pred,
        binary_score=binary_score, probabilities=probabilities, logits=logits,
        float_weights=rng.uniform(0.1, 2.0, n), int_weights=rng.integers(1, 4, n),
    )


# What a metric reads: the positional arrays of its call.
INPUTS = {
    "labels": "(y_true, y_pred): K-class labels",
    "binary_labels": "(y_true, y_pred): 0/1 labels",
    "binary_scores": "(y_true, y_score): 0/1 labels and 1-D scores with ties",
    "probabilities": "(y_true, proba): labels and (N, K) rows summing to 1",
    "logits": "(y_true, scores): labels and (N, K) raw scores",
    "multilabel_scores": "(y_true, y_score): (N, K) 0/1 indicators (logits > 0.5, rows of "
                         "all or no labels included) and (N, K) scores rounded to 0.1 (ties)",
    "relevance": "(y_true, y_score): (N, K) graded relevance 0..3 and (N, K) rounded logits "
                 "(ties)",
    "confusion_matrix": "(cm,): K x K counts, rows actual (pyActLearn)",
    "curve": "(x, y): a curve's points, x increasing (class 0's probabilities sorted), "
             "y any (class 1's)",
}
SAMPLE_INPUTS = frozenset(INPUTS) - {"confusion_matrix"}
# Inputs whose two arrays are both labels: swapping them is meaningful.
SWAPPABLE_INPUTS = frozenset({"labels", "binary_labels"})

# What a metric returns.
OUTPUTS = {
    "scalar": "a float64 (or Python float) scalar",
    "per_class": "an array over the classes",
    "matrix": "a 2-D array (confusion matrix, per-class table)",
    "matrices": "a 3-D array: one 2 x 2 matrix per class or label (multilabel_confusion_matrix)",
    "tuple": "a tuple of arrays (a curve; precision, recall, F, support)",
    "bundle": "a dataclass of scalars and arrays (oneDAL's, LogitsReport)",
    "scalars": "a dict of named float64 scalars (label_ranking_metrics)",
    "report": "a report: classification_report's dict, LabelReport",
}


# -- one row per metric ---------------------------------------------------------------------


@dataclass(frozen=True)
class Metric:
    """One public metric: how the common tests call it, and what it promises.

    ``notes`` holds the reason for every property the metric does not have
    (keys ``"sample_weight"``, ``"sklearn"``, ``"symmetric"``,
    ``"permutation"``, ``"negative_weight"``), and anything else worth saying.
    """

    name: str
    inputs: str
    output: str
    options: Mapping[str, Any] = field(default_factory=dict)
    leading: tuple = ()                 # positional arguments before the arrays (CatBoost's spec)
    weight_arg: str | None = "sample_weight"
    checks_negative_weight: bool = True  # a negative weight raises ValueError naming weight_arg
    sklearn: Callable | None = None     # scikit-learn's namesake
    sklearn_options: Mapping[str, Any] | None = None  # its keyword arguments, if not ``options``
    symmetric: bool | None = None       # f(a, b) == f(b, a); None: the arrays are not both labels
    swap_partner: str | None = None     # the metric g with f(a, b) == g(b, a), when not f itself
    permutation_invariant: bool = True  # the same value for the samples in any order
    exact: bool = False                 # counts: unweighted or integer-weighted, compared ==
    notes: Mapping[str, str] = field(default_factory=dict)
    # Known defects of the package: common test -> what is wrong. The test is an
    # expected failure (strict: it fails once the defect is fixed, to drop the entry).
    defects: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self):
        for name in ("options", "notes", "defects"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    @property
    def func(self) -> Callable:
        return getattr(mg, self.name)

    @property
    def on_samples(self) -> bool:
        """Reads samples (not a matrix of counts): weights and orders apply."""
        return self.inputs in SAMPLE_INPUTS

    def call(self, arrays, weight=None, *, put=lambda a: a, swap=False, **extra):
        """``func(*leading, *arrays, **options)``, arrays (and weight) moved by ``put``."""
        arrays = tuple(put(a) for a in arrays)
        if swap:
            arrays = arrays[::-1]
        options = {**self.options, **extra}
        if weight is not None:
            options[self.weight_arg] = put(weight)
        return self.func(*self.leading, *arrays, **options)

    def call_sklearn(self, arrays, weight=None):
        options = dict(self.options if self.sklearn_options is None else self.sklearn_options)
        if weight is not None:
            options["sample_weight"] = weight
        return self.sklearn(*arrays, **options)

    def __repr__(self):  # pytest ids
        return self.name


_AVERAGED = {"average": "macro", "zero_division": 0.0}
_SCORE_NOT_SYMMETRIC = "the second array holds scores, not labels: swapping is meaningless"
_SOURCE_BUNDLE = "a source system's bundle (no scikit-learn function of that name)"

METRICS: tuple[Metric, ...] = (
    # -- label metrics, scikit-learn's namesakes --------------------------------------------
    Metric("accuracy_score", "labels", "scalar", sklearn=skm.accuracy_score, symmetric=True),
    Metric("balanced_accuracy_score", "labels", "scalar", sklearn=skm.balanced_accuracy_score,
           symmetric=False, notes={"symmetric": "mean recall; swapped it is the mean precision"}),
    Metric("classification_report", "labels", "report",
           options={"output_dict": True, "zero_division": 0.0},
           sklearn=skm.classification_report, symmetric=False,
           notes={"symmetric": "precision and recall trade places; support follows y_true"}),
    Metric("cohen_kappa_score", "labels", "scalar", sklearn=skm.cohen_kappa_score,
           symmetric=True),
    Metric("confusion_matrix", "labels", "matrix", sklearn=skm.confusion_matrix,
           symmetric=False, exact=True,
           notes={"symmetric": "swapping the arrays transposes the matrix",
                  "exact": "unweighted and integer-weighted counts are integers"}),
    Metric("f1_score", "labels", "scalar", options=_AVERAGED, sklearn=skm.f1_score,
           symmetric=True,
           notes={"symmetric": "per-class F1 = 2 tp / (support + predicted); macro over the "
                               "same classes either way"}),
    Metric("fbeta_score", "labels", "scalar", options={**_AVERAGED, "beta": 2.0},
           sklearn=skm.fbeta_score, symmetric=False,
           notes={"symmetric": "beta != 1 weighs recall over precision"}),
    Metric("hamming_loss", "labels", "scalar", sklearn=skm.hamming_loss, symmetric=True),
    Metric("jaccard_score", "labels", "scalar", options=_AVERAGED, sklearn=skm.jaccard_score,
           symmetric=True),
    Metric("matthews_corrcoef", "labels", "scalar", sklearn=skm.matthews_corrcoef,
           symmetric=True),
    Metric("multilabel_confusion_matrix", "labels", "matrices",
           sklearn=skm.multilabel_confusion_matrix, symmetric=False, exact=True,
           notes={"symmetric": "swapping the arrays swaps each matrix's fp and fn",
                  "exact": "unweighted counts are integers (weighted: float64, as scikit-learn)",
                  "multilabel": "(N, L) indicator input: tests/test_multilabel.py"}),
    Metric("precision_recall_fscore_support", "labels", "tuple",
           options={"average": None, "zero_division": 0.0},
           sklearn=skm.precision_recall_fscore_support, symmetric=False,
           notes={"symmetric": "precision and recall trade places; support follows y_true"}),
    Metric("precision_score", "labels", "scalar", options=_AVERAGED, sklearn=skm.precision_score,
           symmetric=False, swap_partner="recall_score",
           notes={"symmetric": "precision(a, b) = recall(b, a)"}),
    Metric("recall_score", "labels", "scalar", options=_AVERAGED, sklearn=skm.recall_score,
           symmetric=False, swap_partner="precision_score",
           notes={"symmetric": "recall(a, b) = precision(b, a)"}),
    Metric("zero_one_loss", "labels", "scalar", sklearn=skm.zero_one_loss, symmetric=True),
    Metric("class_likelihood_ratios", "binary_labels", "tuple",
           sklearn=skm.class_likelihood_ratios, symmetric=False,
           notes={"symmetric": "swapping the arrays swaps fp and fn: LR+ and LR- change"}),
    # -- label metrics without a namesake ---------------------------------------------------
    Metric("balanced_accuracy_weighted", "labels", "scalar",
           options={"class_weight": [1.0, 2.0, 3.0, 4.0]}, symmetric=False,
           notes={"sklearn": "an extension: recall averaged with class weights",
                  "symmetric": "weighted mean recall; swapped, of precision"}),
    Metric("specificity_score", "labels", "scalar", options=_AVERAGED, symmetric=False,
           notes={"sklearn": "scikit-learn has no specificity (imbalanced-learn does)",
                  "symmetric": "tn / (tn + fp); swapped it is tn / (tn + fn)"}),
    Metric("label_report", "labels", "report", symmetric=False,
           notes={"sklearn": "every label metric at once: each one's namesake is checked here",
                  "symmetric": "holds precision, recall and the matrix"}),
    Metric("multiclass_quality_metrics", "labels", "bundle", symmetric=False,
           notes={"sklearn": _SOURCE_BUNDLE + " (oneDAL; tests/test_seeds.py)",
                  "symmetric": "macro precision and recall trade places; the matrix transposes"}),
    Metric("binary_quality_metrics", "binary_labels", "bundle", symmetric=False,
           notes={"sklearn": _SOURCE_BUNDLE + " (oneDAL; tests/test_seeds.py)",
                  "symmetric": "precision and recall trade places"}),
    Metric("catboost_metric", "logits", "scalar", leading=("TotalF1",), weight_arg="weight",
           notes={"sklearn": "CatBoost's metrics (tests/test_catboost_parity.py)",
                  "symmetric": _SCORE_NOT_SYMMETRIC,
                  "weight": "CatBoost's argument is `weight`, rounded to float32 "
                            "(integers exactly)"}),
    # -- confusion-matrix functions (pyActLearn) --------------------------------------------
    Metric("per_class_performance", "confusion_matrix", "matrix", weight_arg=None,
           checks_negative_weight=False,
           notes={"sample_weight": "reads a confusion matrix, not samples: weights and sample "
                                   "order are the matrix builder's",
                  "negative_weight": "no weights",
                  "sklearn": _SOURCE_BUNDLE + " (pyActLearn; tests/test_seeds.py)",
                  "symmetric": "one argument"}),
    Metric("overall_performance", "confusion_matrix", "per_class", weight_arg=None,
           checks_negative_weight=False,
           notes={"sample_weight": "reads a confusion matrix, not samples",
                  "negative_weight": "no weights",
                  "sklearn": _SOURCE_BUNDLE + " (pyActLearn; tests/test_seeds.py)",
                  "symmetric": "one argument",
                  "output": "9 overall values (OVERALL_PERFORMANCE_NAMES), not per class"}),
    # -- score metrics ----------------------------------------------------------------------
    Metric("log_loss", "probabilities", "scalar", sklearn=skm.log_loss,
           notes={"symmetric": _SCORE_NOT_SYMMETRIC}),
    Metric("brier_score_loss", "probabilities", "scalar", sklearn=skm.brier_score_loss,
           notes={"symmetric": _SCORE_NOT_SYMMETRIC}),
    Metric("d2_log_loss_score", "probabilities", "scalar", sklearn=skm.d2_log_loss_score,
           notes={"symmetric": _SCORE_NOT_SYMMETRIC}),
    Metric("d2_brier_score", "probabilities", "scalar", sklearn=skm.d2_brier_score,
           notes={"symmetric": _SCORE_NOT_SYMMETRIC}),
    Metric("hinge_loss", "logits", "scalar", sklearn=skm.hinge_loss,
           notes={"symmetric": _SCORE_NOT_SYMMETRIC}),
    Metric("top_k_accuracy_score", "probabilities", "scalar", options={"k": 2},
           sklearn=skm.top_k_accuracy_score, notes={"symmetric": _SCORE_NOT_SYMMETRIC}),
    Metric("expected_calibration_error", "probabilities", "scalar", options={"n_bins": 10},
           notes={"sklearn": "no scikit-learn function (the seed's formula; tests/test_scores.py)",
                  "symmetric": _SCORE_NOT_SYMMETRIC}),
    Metric("logits_report", "logits", "bundle", options={"top_k": (1, 2), "n_bins": 10},
           notes={"sklearn": "a bundle of score metrics (each namesake is checked here)",
                  "symmetric": _SCORE_NOT_SYMMETRIC}),
    # -- ranking metrics --------------------------------------------------------------------
    Metric("roc_auc_score", "probabilities", "scalar", options={"multi_class": "ovr"},
           sklearn=skm.roc_auc_score, notes={"symmetric": _SCORE_NOT_SYMMETRIC}),
    Metric("average_precision_score", "binary_scores", "scalar",
           sklearn=skm.average_precision_score, notes={"symmetric": _SCORE_NOT_SYMMETRIC}),
    Metric("roc_curve", "binary_scores", "tuple", sklearn=skm.roc_curve,
           notes={"symmetric": _SCORE_NOT_SYMMETRIC}),
    Metric("precision_recall_curve", "binary_scores", "tuple",
           sklearn=skm.precision_recall_curve, notes={"symmetric": _SCORE_NOT_SYMMETRIC}),
    Metric("det_curve", "binary_scores", "tuple", sklearn=skm.det_curve,
           notes={"symmetric": _SCORE_NOT_SYMMETRIC}),
    Metric("confusion_matrix_at_thresholds", "binary_scores", "tuple",
           sklearn=skm.confusion_matrix_at_thresholds,
           notes={"symmetric": _SCORE_NOT_SYMMETRIC}),
    Metric("auc", "curve", "scalar", sklearn=skm.auc, weight_arg=None,
           checks_negative_weight=False, permutation_invariant=False,
           notes={"sample_weight": "reads a curve's points, not samples",
                  "negative_weight": "no weights",
                  "permutation": "the points of a curve are in its order (x monotonic)",
                  "symmetric": "x and y are a curve's axes, not labels"}),
    Metric("multiclass_auc_mu", "probabilities", "scalar",
           notes={"sklearn": "AUC-mu (Kleiman & Page) is CatBoost's, not scikit-learn's "
                             "(tests/test_ranking.py)",
                  "symmetric": _SCORE_NOT_SYMMETRIC}),
    # -- multilabel ranking metrics ---------------------------------------------------------
    Metric("label_ranking_average_precision_score", "multilabel_scores", "scalar",
           sklearn=skm.label_ranking_average_precision_score,
           notes={"symmetric": _SCORE_NOT_SYMMETRIC}),
    Metric("label_ranking_loss", "multilabel_scores", "scalar", sklearn=skm.label_ranking_loss,
           notes={"symmetric": _SCORE_NOT_SYMMETRIC}),
    Metric("coverage_error", "multilabel_scores", "scalar", sklearn=skm.coverage_error,
           notes={"symmetric": _SCORE_NOT_SYMMETRIC}),
    Metric("label_ranking_metrics", "multilabel_scores", "scalars",
           notes={"sklearn": "no scikit-learn function: scikit-learn's "
                             "label_ranking_average_precision_score, label_ranking_loss and "
                             "coverage_error in one dict (each held to its namesake in "
                             "tests/test_multilabel_ranking.py)",
                  "symmetric": _SCORE_NOT_SYMMETRIC}),
    Metric("dcg_score", "relevance", "scalar", sklearn=skm.dcg_score,
           notes={"symmetric": _SCORE_NOT_SYMMETRIC}),
    Metric("ndcg_score", "relevance", "scalar", sklearn=skm.ndcg_score,
           notes={"symmetric": _SCORE_NOT_SYMMETRIC}),
)

REGISTRY: dict[str, Metric] = {metric.name: metric for metric in METRICS}

# Public names that are not metrics, with the reason and where they are tested.
NOT_METRICS: dict[str, str] = {
    "get_backend": "backend switch, not a metric (tests/test_dispatch.py)",
    "set_backend": "backend switch, not a metric (tests/test_dispatch.py)",
    "use_backend": "backend switch, not a metric (tests/test_dispatch.py)",
    "encode_labels": "label encoder: returns codes, not a value (tests/test_encoding.py)",
    "BackendUnavailableError": "exception class (tests/test_dispatch.py)",
    "UndefinedMetricWarning": "warning class (tests/test_sklearn_parity.py)",
    "ClassificationMetrics": "streaming class; streaming == functional is "
                             "tests/test_streaming.py",
    "StreamingReport": "streaming class (tests/test_streaming.py)",
    "StepReport": "one batch's report of the streaming class (tests/test_step_values.py)",
    "MultilabelMetrics": "streaming class; streaming == scikit-learn on the concatenation is "
                         "tests/test_multilabel_stream.py",
    "MultilabelReport": "result class of MultilabelMetrics.compute",
    "LabelReport": "result class of label_report",
    "LogitsReport": "result class of logits_report",
    "BinaryQualityMetrics": "result class of binary_quality_metrics",
    "MulticlassQualityMetrics": "result class of multiclass_quality_metrics",
    "OVERALL_PERFORMANCE_NAMES": "constant: names of overall_performance's values",
    "PER_CLASS_PERFORMANCE_COLUMNS": "constant: columns of per_class_performance",
    "PER_CLASS_METRICS": "constant: label_report's per-class columns",
    "REPORT_METRICS": "constant: label_report's overall metrics",
}


# -- results as flat {path: float64 array} -------------------------------------------------


def flatten(result, path: str = "") -> dict[str, np.ndarray]:
    """Every number of a result, by its path (tuple index, dict key, field name), as
    float64 arrays on the host: one shape for scalars, tuples, dicts, dataclasses and
    reports, so that one comparison serves every output kind."""
    if isinstance(result, mg.LabelReport):
        return flatten({name: getattr(result, name) for name in
                        ("metrics", "per_class", "classes", "total", "confusion_matrix")}, path)
    if hasattr(result, "__dataclass_fields__"):
        return flatten({name: getattr(result, name) for name in result.__dataclass_fields__},
                       path)
    if isinstance(result, dict):
        return {key: value for name, item in result.items()
                for key, value in flatten(item, f"{path}[{name!r}]").items()}
    if isinstance(result, tuple):
        return {key: value for i, item in enumerate(result)
                for key, value in flatten(item, f"{path}[{i}]").items()}
    if result is None:
        return {}
    if hasattr(result, "get") and not isinstance(result, np.ndarray):  # CuPy
        result = result.get()
    return {path or "value": np.asarray(result, dtype=np.float64)}


def leaves(result) -> list:
    """The arrays and scalars of a result as returned (for where they live)."""
    if isinstance(result, mg.LabelReport):
        return [*leaves(result.metrics), *leaves(result.per_class), result.total]
    if hasattr(result, "__dataclass_fields__"):
        return [leaf for name in result.__dataclass_fields__
                for leaf in leaves(getattr(result, name))]
    if isinstance(result, dict):
        return [leaf for item in result.values() for leaf in leaves(item)]
    if isinstance(result, tuple):
        return [leaf for item in result for leaf in leaves(item)]
    return [] if result is None else [result]


def parameters(metric: Metric) -> list[str]:
    return list(inspect.signature(metric.func).parameters)
