"""Bad inputs: one test per kind, each a ``ValueError`` naming the argument and
the offending value (and its position where there is one).

Also ``validate=False``: out-of-range labels are left out and counted, never
used as an index, and the metrics equal those of the valid samples.
"""

from __future__ import annotations

import os
import re
import warnings

import numpy as np
import pytest

import metrics_gpu as mg

sklearn_metrics = pytest.importorskip("sklearn.metrics")


def _metric_calls():
    """Entry points that share the label gate, each as f(y_true, y_pred, **kw)."""
    return {
        "accuracy_score": mg.accuracy_score,
        "f1_score-macro": lambda t, p, **kw: mg.f1_score(t, p, average="macro", **kw),
        "precision_recall_fscore_support": mg.precision_recall_fscore_support,
        "confusion_matrix": mg.confusion_matrix,
        "cohen_kappa_score": mg.cohen_kappa_score,
        "matthews_corrcoef": mg.matthews_corrcoef,
        "balanced_accuracy_score": mg.balanced_accuracy_score,
        "jaccard_score-micro": lambda t, p, **kw: mg.jaccard_score(t, p, average="micro", **kw),
        "classification_report": lambda t, p, **kw: mg.classification_report(
            t, p, output_dict=True, **kw),
        "label_report": mg.label_report,
        "multiclass_quality_metrics": mg.multiclass_quality_metrics,
    }


METRICS = _metric_calls()
METRIC_IDS = sorted(METRICS)
# The names each function gives its two label arrays in its messages.
ARRAY_NAMES = {"cohen_kappa_score": ("y1", "y2")}


def _named(metric: str, pattern: str) -> str:
    """``pattern`` with y_true and y_pred as ``metric`` calls them."""
    first, second = ARRAY_NAMES.get(metric, ("y_true", "y_pred"))
    return pattern.replace("y_true", first).replace("y_pred", second)


# -- labels ---------------------------------------------------------------------


@pytest.mark.parametrize("metric", METRIC_IDS)
def test_negative_label_in_y_true(backend, metric):
    with pytest.raises(ValueError, match=_named(metric, r"y_true.*-1\b.*index 3")):
        METRICS[metric](backend.asarray([0, 1, 2, -1, 1]), backend.asarray([0, 1, 2, 1, 1]))


@pytest.mark.parametrize("metric", METRIC_IDS)
def test_negative_label_in_y_pred(backend, metric):
    with pytest.raises(ValueError, match=_named(metric, r"y_pred.*-2\b.*index 1")):
        METRICS[metric](backend.asarray([0, 1, 2]), backend.asarray([0, -2, 1]))


@pytest.mark.parametrize("metric", METRIC_IDS)
def test_label_at_num_classes_in_y_true(backend, metric):
    with pytest.raises(ValueError, match=_named(metric, r"y_true.*\b3\b.*index 4.*num_classes=3")):
        METRICS[metric](backend.asarray([0, 1, 2, 1, 3]), backend.asarray([0, 1, 2, 1, 1]),
                        num_classes=3)


@pytest.mark.parametrize("metric", METRIC_IDS)
def test_label_above_num_classes_in_y_pred(backend, metric):
    with pytest.raises(ValueError, match=_named(metric, r"y_pred.*\b17\b.*index 2.*num_classes=4")):
        METRICS[metric](backend.asarray([0, 1, 2, 3]), backend.asarray([0, 1, 17, 3]),
                        num_classes=4)


def test_unsigned_label_above_num_classes(backend):
    with pytest.raises(ValueError, match=r"y_true.*\b9\b.*index 1"):
        mg.accuracy_score(backend.asarray(np.array([1, 9], dtype=np.uint8)),
                          backend.asarray(np.array([1, 1], dtype=np.uint8)), num_classes=5)


def test_ignore_index_is_not_out_of_range(backend):
    """The ignored target may be out of range (-100, as in PyTorch)."""
    t = backend.asarray([0, -100, 1, 2])
    p = backend.asarray([0, 2, 1, 1])
    assert float(backend.to_numpy(mg.accuracy_score(t, p, ignore_index=-100))) == 2 / 3
    with pytest.raises(ValueError, match=r"y_pred.*-100.*index 1"):
        mg.accuracy_score(p, t, ignore_index=-100)  # only targets are ignored


@pytest.mark.parametrize(
    "y_true, shown",
    [([0.0, 1.0, 1.5], r"1\.5"), ([0.0, 2.25, 1.0], r"2\.25")],
    ids=["1.5-at-2", "2.25-at-1"],
)
def test_float_labels_not_integers(backend, y_true, shown):
    index = next(i for i, v in enumerate(y_true) if v != int(v))
    # Non-integer floats look like scores: no encode_labels advice (issue 13, defect 9).
    with pytest.raises(ValueError, match=rf"y_true.*{shown}.*index {index}.*score or probability"):
        mg.accuracy_score(backend.asarray(np.array(y_true)), backend.asarray([0, 1, 1]))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
def test_non_finite_float_labels(backend, bad):
    with pytest.raises(ValueError, match=r"y_pred.*(nan|inf).*index 1"):
        mg.accuracy_score(backend.asarray([0, 1, 1]), backend.asarray(np.array([0.0, bad, 1.0])))


def test_integral_float_labels_accepted(backend):
    value = mg.accuracy_score(backend.asarray(np.array([0.0, 1.0, 2.0])),
                              backend.asarray(np.array([0.0, 1.0, 1.0])))
    assert float(backend.to_numpy(value)) == pytest.approx(2 / 3)


def test_float_label_beyond_int64(backend):
    """An integral float too large for int64 must be named as it is, not as the
    wrapped-around int64 (and must not leak a RuntimeWarning from the cast)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ValueError, match=r"y_true.*1e\+20.*index 1"):
            mg.accuracy_score(backend.asarray(np.array([0.0, 1e20])),
                              backend.asarray(np.array([0, 1])), num_classes=2)


@pytest.mark.parametrize(
    "y_true",
    [np.array(["cat", "dog"]), ["cat", "dog"], np.array(["a", "b"], dtype=object)],
    ids=["numpy-str", "list-str", "object"],
)
def test_string_labels_suggest_encode_labels(backend, y_true):
    # strings cannot live on a device: passed as host data on every backend
    with pytest.raises(ValueError, match=r"y_true.*(dtype|<U|object).*encode_labels"):
        mg.accuracy_score(y_true, backend.asarray([0, 1]))


def test_string_predictions_suggest_encode_labels(backend):
    with pytest.raises(ValueError, match=r"y_pred.*encode_labels"):
        mg.f1_score(backend.asarray([0, 1]), np.array(["cat", "dog"]), average="macro")


# -- scores -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "row, column, bad",
    [(1, 2, np.nan), (0, 0, np.inf), (3, 1, -np.inf)],
    ids=["nan-r1-c2", "inf-r0-c0", "-inf-r3-c1"],
)
def test_non_finite_scores(backend, row, column, bad):
    scores = np.arange(12, dtype=np.float64).reshape(4, 3)
    scores[row, column] = bad
    with pytest.raises(ValueError, match=rf"y_pred.*(nan|inf).*row {row}, column {column}"):
        mg.accuracy_score(backend.asarray([0, 1, 2, 0]), backend.asarray(scores))


def test_non_finite_scores_first_one_reported(backend):
    scores = np.zeros((3, 4))
    scores[2, 0] = np.nan
    scores[1, 3] = np.inf
    with pytest.raises(ValueError, match=r"row 1, column 3"):
        mg.confusion_matrix(backend.asarray([0, 1, 2]), backend.asarray(scores))


def test_num_classes_not_matching_score_columns(backend):
    with pytest.raises(ValueError, match=r"y_pred.*3 score columns.*num_classes=4"):
        mg.accuracy_score(backend.asarray([0, 1]), backend.asarray(np.ones((2, 3))),
                          num_classes=4)


# -- lengths, shapes, emptiness ------------------------------------------------------


@pytest.mark.parametrize("metric", METRIC_IDS)
def test_mismatched_lengths(backend, metric):
    with pytest.raises(ValueError, match=_named(metric, r"y_true has 4 samples but y_pred has 3")):
        METRICS[metric](backend.asarray([0, 1, 1, 0]), backend.asarray([0, 1, 1]))


def test_scores_with_wrong_number_of_rows(backend):
    with pytest.raises(ValueError, match=r"y_true has 3 samples but y_pred has 2"):
        mg.accuracy_score(backend.asarray([0, 1, 1]), backend.asarray(np.eye(2)))


def test_two_dimensional_y_true(backend):
    # (A 0/1 matrix is a multilabel indicator: tests/test_multilabel.py.)
    with pytest.raises(ValueError, match=r"y_true.*1-D.*\(2, 2\)"):
        mg.accuracy_score(backend.asarray([[0, 2], [1, 0]]), backend.asarray([0, 1]))


def test_three_dimensional_y_pred(backend):
    with pytest.raises(ValueError, match=r"y_pred.*\(2, 2, 2\)"):
        mg.accuracy_score(backend.asarray([0, 1]), backend.asarray(np.zeros((2, 2, 2))))


def test_column_vectors_accepted(backend):
    """(N, 1) columns are labels, not scores."""
    t = backend.asarray(np.array([[0], [1], [2]]))
    p = backend.asarray(np.array([[0], [1], [1]]))
    assert float(backend.to_numpy(mg.accuracy_score(t, p))) == pytest.approx(2 / 3)


@pytest.mark.parametrize("metric", METRIC_IDS)
def test_empty_input(backend, metric):
    empty = np.array([], dtype=np.int64)
    with pytest.raises(ValueError, match=r"empty"):
        METRICS[metric](backend.asarray(empty), backend.asarray(empty))


def test_empty_scores(backend):
    with pytest.raises(ValueError, match=r"empty"):
        mg.accuracy_score(backend.asarray(np.array([], dtype=np.int64)),
                          backend.asarray(np.zeros((0, 3))))


def test_everything_ignored_is_not_an_error_of_shape(backend):
    """All targets ignored: nothing counted; accuracy is undefined, not a crash."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            value = mg.accuracy_score(backend.asarray([5, 5]), backend.asarray([0, 1]),
                                      ignore_index=5, num_classes=2)
        except ValueError as error:  # an explicit refusal is fine too
            assert "ignore" in str(error) or "empty" in str(error)
        else:
            assert np.isnan(float(backend.to_numpy(value)))


# -- sample_weight -----------------------------------------------------------------


@pytest.mark.parametrize(
    "weight, pattern",
    [
        ([1.0, 2.0, -0.5, 1.0], r"sample_weight.*non-negative.*-0\.5.*index 2"),
        (np.array([1, -3, 1, 1]), r"sample_weight.*non-negative.*-3.*index 1"),
        ([1.0, np.nan, 1.0, 1.0], r"sample_weight.*finite.*nan.*index 1"),
        ([1.0, 1.0, 1.0, np.inf], r"sample_weight.*finite.*inf.*index 3"),
        ([-np.inf, 1.0, 1.0, 1.0], r"sample_weight.*-inf.*index 0"),
        ([1.0, 1.0, 1.0], r"sample_weight has 3 entries but y_true has 4"),
        ([1.0, 1.0, 1.0, 1.0, 1.0], r"sample_weight has 5 entries but y_true has 4"),
        ([[1.0, 1.0, 1.0, 1.0]], r"sample_weight.*1-D.*\(1, 4\)"),
    ],
    ids=["negative", "negative-int", "nan", "inf", "-inf", "short", "long", "2-D"],
)
@pytest.mark.parametrize("metric", ["accuracy_score", "confusion_matrix", "label_report",
                                    "cohen_kappa_score"])
def test_bad_sample_weight(backend, metric, weight, pattern):
    with pytest.raises(ValueError, match=_named(metric, pattern)):
        METRICS[metric](backend.asarray([0, 1, 2, 1]), backend.asarray([0, 1, 1, 1]),
                        sample_weight=backend.asarray(np.asarray(weight)))


Y_ZERO_WEIGHT = np.array([0, 1, 2, 1])
PRED_ZERO_WEIGHT = np.array([0, 1, 1, 1])
PROBA_ZERO_WEIGHT = np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.3, 0.3, 0.4],
                              [0.5, 0.25, 0.25]])
# Every function that scikit-learn 1.9 gives sample_weight, each as (ours, theirs,
# scores, options); with all weights 0 scikit-learn raises (a ValueError, or for
# hinge_loss and a normalised top-k share a ZeroDivisionError from np.average).
ZERO_WEIGHT_CALLS = {
    **{name: (name, PRED_ZERO_WEIGHT, {}) for name in (
        "accuracy_score", "balanced_accuracy_score", "confusion_matrix", "cohen_kappa_score",
        "matthews_corrcoef", "hamming_loss", "zero_one_loss", "classification_report")},
    "f1_score-macro": ("f1_score", PRED_ZERO_WEIGHT, {"average": "macro"}),
    "jaccard_score-micro": ("jaccard_score", PRED_ZERO_WEIGHT, {"average": "micro"}),
    "accuracy_score-count": ("accuracy_score", PRED_ZERO_WEIGHT, {"normalize": False}),
    "log_loss": ("log_loss", PROBA_ZERO_WEIGHT, {}),
    "brier_score_loss": ("brier_score_loss", PROBA_ZERO_WEIGHT, {}),
    "hinge_loss": ("hinge_loss", PROBA_ZERO_WEIGHT, {}),
    "top_k_accuracy_score": ("top_k_accuracy_score", PROBA_ZERO_WEIGHT, {"k": 2}),
    "roc_auc_score-ovr": ("roc_auc_score", PROBA_ZERO_WEIGHT, {"multi_class": "ovr"}),
    "roc_auc_score-micro": ("roc_auc_score", PROBA_ZERO_WEIGHT,
                            {"multi_class": "ovr", "average": "micro"}),
    "average_precision_score": ("average_precision_score", PROBA_ZERO_WEIGHT, {}),
    "average_precision_score-samples": ("average_precision_score", PROBA_ZERO_WEIGHT,
                                        {"average": "samples"}),
    "roc_auc_score-binary": ("roc_auc_score", PROBA_ZERO_WEIGHT[:, 1], {"binary": True}),
    "average_precision_score-binary": ("average_precision_score", PROBA_ZERO_WEIGHT[:, 1],
                                       {"binary": True}),
    "roc_curve": ("roc_curve", PROBA_ZERO_WEIGHT[:, 1], {"binary": True}),
}


@pytest.mark.parametrize("call", sorted(ZERO_WEIGHT_CALLS))
def test_all_zero_sample_weight_is_rejected_as_sklearn(backend, call):
    name, scores, options = ZERO_WEIGHT_CALLS[call]
    options = dict(options)
    y = (Y_ZERO_WEIGHT > 0).astype(np.int64) if options.pop("binary", False) else Y_ZERO_WEIGHT
    weight = np.zeros(y.size)
    with pytest.raises((ValueError, ZeroDivisionError)), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        getattr(sklearn_metrics, name)(y, scores, sample_weight=weight, **options)
    with pytest.raises(ValueError, match=r"sample_weight must hold at least one non-zero "
                                         r"weight; all 4 are 0"):
        getattr(mg, name)(backend.asarray(y), backend.asarray(scores),
                          sample_weight=backend.asarray(weight), **options)


@pytest.mark.parametrize("call", ["top_k_accuracy_score-count", "roc_auc_score-ovr-weighted",
                                  "average_precision_score-weighted"])
def test_all_zero_sample_weight_where_sklearn_gives_zero(backend, call):
    """The sums scikit-learn returns before it would divide by no weight: 0."""
    name, options = {
        "top_k_accuracy_score-count": ("top_k_accuracy_score", {"k": 2, "normalize": False}),
        "roc_auc_score-ovr-weighted": ("roc_auc_score",
                                       {"multi_class": "ovr", "average": "weighted"}),
        "average_precision_score-weighted": ("average_precision_score",
                                             {"average": "weighted"}),
    }[call]
    weight = np.zeros(Y_ZERO_WEIGHT.size)
    theirs = getattr(sklearn_metrics, name)(Y_ZERO_WEIGHT, PROBA_ZERO_WEIGHT,
                                            sample_weight=weight, **options)
    mine = getattr(mg, name)(backend.asarray(Y_ZERO_WEIGHT), backend.asarray(PROBA_ZERO_WEIGHT),
                             sample_weight=backend.asarray(weight), **options)
    assert theirs == 0
    assert float(backend.to_numpy(mine)) == 0


def test_all_zero_sample_weight_on_counted_samples_ignores_ignored_weight(backend):
    """The check is over the counted samples: weight on ``ignore_index``
    samples is dropped with them (as filtering them out first, which scikit-
    learn rejects), and one counted non-zero weight is enough."""
    y_true = np.array([0, 1, -100, 2, -100])
    y_pred = np.array([0, 2, 1, 2, 0])
    zero_on_counted = np.array([0.0, 0.0, 3.0, 0.0, 1.0])
    kept = y_true != -100
    with pytest.raises(ValueError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sklearn_metrics.accuracy_score(y_true[kept], y_pred[kept],
                                       sample_weight=zero_on_counted[kept])
    with pytest.raises(ValueError, match=r"non-zero weight; all 3 are 0"):
        mg.accuracy_score(backend.asarray(y_true), backend.asarray(y_pred),
                          sample_weight=backend.asarray(zero_on_counted), ignore_index=-100)
    one_counted = zero_on_counted.copy()
    one_counted[1] = 2.0  # a counted sample, predicted wrong: accuracy 0
    mine = mg.accuracy_score(backend.asarray(y_true), backend.asarray(y_pred),
                             sample_weight=backend.asarray(one_counted), ignore_index=-100)
    theirs = sklearn_metrics.accuracy_score(y_true[kept], y_pred[kept],
                                            sample_weight=one_counted[kept])
    assert float(backend.to_numpy(mine)) == theirs == 0.0


@pytest.mark.parametrize("metric", ["accuracy_score", "label_report"])
def test_all_zero_sample_weight_without_validation_is_nan(backend, metric):
    """``validate=False`` skips the check (it would read back a flag): a rate
    over no weight is then NaN, never an error."""
    report = METRICS[metric](backend.asarray(Y_ZERO_WEIGHT), backend.asarray(PRED_ZERO_WEIGHT),
                             sample_weight=backend.asarray(np.zeros(4)), validate=False)
    value = report.metrics["accuracy"] if metric == "label_report" else report
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isnan(float(backend.to_numpy(value)))


def test_string_sample_weight(backend):
    with pytest.raises(ValueError, match=r"sample_weight.*dtype"):
        mg.accuracy_score(backend.asarray([0, 1]), backend.asarray([0, 1]),
                          sample_weight=np.array(["a", "b"]))


# -- scalar options -----------------------------------------------------------------


@pytest.mark.parametrize("num_classes", [0, -1, 2.5, True, "3"],
                         ids=["zero", "negative", "float", "bool", "str"])
@pytest.mark.parametrize("metric", ["accuracy_score", "confusion_matrix", "label_report",
                                    "multiclass_quality_metrics"])
def test_bad_num_classes(backend, metric, num_classes):
    with pytest.raises(ValueError, match=r"num_classes.*" + re.escape(repr(num_classes))):
        METRICS[metric](backend.asarray([0, 1]), backend.asarray([0, 1]), num_classes=num_classes)


@pytest.mark.parametrize("ignore_index", [1.5, "x", True, [1]],
                         ids=["float", "str", "bool", "list"])
def test_bad_ignore_index(backend, ignore_index):
    with pytest.raises(ValueError, match=r"ignore_index.*" + re.escape(repr(ignore_index))):
        mg.accuracy_score(backend.asarray([0, 1]), backend.asarray([0, 1]),
                          ignore_index=ignore_index)


@pytest.mark.parametrize("average", ["samples", "Macro", "", 1],
                         ids=["samples", "Macro", "empty", "int"])
@pytest.mark.parametrize("metric", [mg.precision_score, mg.recall_score, mg.f1_score,
                                    mg.jaccard_score, mg.specificity_score,
                                    mg.precision_recall_fscore_support],
                         ids=lambda f: f.__name__)
def test_bad_average(backend, metric, average):
    with pytest.raises(ValueError, match=r"average.*" + re.escape(repr(average))):
        metric(backend.asarray([0, 1, 2]), backend.asarray([0, 1, 1]), average=average)


def test_bad_average_fbeta(backend):
    with pytest.raises(ValueError, match=r"average.*'samples'"):
        mg.fbeta_score(backend.asarray([0, 1]), backend.asarray([0, 1]), beta=2.0,
                       average="samples")


@pytest.mark.parametrize("zero_division", [2, -1, "nan", "zero", True, None],
                         ids=["2", "-1", "str-nan", "str", "bool", "None"])
@pytest.mark.parametrize("metric", [mg.precision_score, mg.f1_score, mg.jaccard_score,
                                    mg.specificity_score, mg.classification_report],
                         ids=lambda f: f.__name__)
def test_bad_zero_division(backend, metric, zero_division):
    kwargs = {} if metric is mg.classification_report else {"average": "macro"}
    with pytest.raises(ValueError, match=r"zero_division.*" + re.escape(repr(zero_division))):
        metric(backend.asarray([0, 1, 2]), backend.asarray([0, 1, 1]),
               zero_division=zero_division, **kwargs)


@pytest.mark.parametrize("beta", [-1.0, float("nan"), "2", True, None],
                         ids=["negative", "nan", "str", "bool", "None"])
@pytest.mark.parametrize(
    "call",
    ["fbeta_score", "precision_recall_fscore_support", "multiclass_quality_metrics",
     "binary_quality_metrics"],
)
def test_bad_beta(backend, call, beta):
    t, p = backend.asarray([0, 1, 1]), backend.asarray([0, 1, 0])
    function = getattr(mg, call)
    kwargs = {"average": "macro"} if call == "fbeta_score" else {}
    with pytest.raises(ValueError, match=r"beta.*" + re.escape(repr(beta))):
        function(t, p, beta=beta, **kwargs)


@pytest.mark.parametrize("normalize", ["rows", "True", True, 1],
                         ids=["rows", "str-True", "bool", "int"])
def test_bad_normalize(backend, normalize):
    with pytest.raises(ValueError, match=r"normalize.*" + re.escape(repr(normalize))):
        mg.confusion_matrix(backend.asarray([0, 1]), backend.asarray([0, 1]),
                            normalize=normalize)


@pytest.mark.parametrize("weights", ["cubic", "Linear", 2, "none"],
                         ids=["cubic", "Linear", "int", "str-none"])
def test_bad_kappa_weights(backend, weights):
    with pytest.raises(ValueError, match=r"weights.*" + re.escape(repr(weights))):
        mg.cohen_kappa_score(backend.asarray([0, 1, 2]), backend.asarray([0, 1, 1]),
                             weights=weights)


@pytest.mark.parametrize("pos_label", [2, -1, "1"], ids=["2", "-1", "str"])
def test_bad_pos_label_binary_quality(backend, pos_label):
    with pytest.raises(ValueError, match=r"pos_label.*" + re.escape(repr(pos_label))):
        mg.binary_quality_metrics(backend.asarray([0, 1]), backend.asarray([0, 1]),
                                  pos_label=pos_label)


def test_bad_validate_flag(backend):
    with pytest.raises(ValueError, match=r"validate.*'no'"):
        mg.accuracy_score(backend.asarray([0, 1]), backend.asarray([0, 1]), validate="no")


# -- labels= --------------------------------------------------------------------------


LABEL_FUNCTIONS = {
    "precision_score": lambda t, p, **kw: mg.precision_score(t, p, average=None, **kw),
    "f1_score": lambda t, p, **kw: mg.f1_score(t, p, average="macro", **kw),
    "confusion_matrix": mg.confusion_matrix,
    "cohen_kappa_score": mg.cohen_kappa_score,
    "classification_report": mg.classification_report,
    "jaccard_score": lambda t, p, **kw: mg.jaccard_score(t, p, average=None, **kw),
}


@pytest.mark.parametrize(
    "labels, num_classes, pattern",
    [
        ([0, -1], None, r"labels.*-1.*index 1"),
        ([2, 0, -5], 3, r"labels.*-5.*index 2"),
        ([0, 3], 3, r"labels.*\b3\b.*index 1.*num_classes=3"),
        ([0, 1, 0], None, r"labels.*distinct.*\[0, 1, 0\]"),
        (["a", "b"], None, r"labels.*integer.*encode_labels"),
        ([], None, r"labels.*non-empty"),
        ([[0, 1]], None, r"labels.*1-D"),
    ],
    ids=["negative", "negative-given-K", "at-K", "duplicates", "strings", "empty", "2-D"],
)
@pytest.mark.parametrize("function", sorted(LABEL_FUNCTIONS))
def test_bad_labels(backend, function, labels, num_classes, pattern):
    with pytest.raises(ValueError, match=pattern):
        LABEL_FUNCTIONS[function](backend.asarray([0, 1, 2]), backend.asarray([0, 1, 1]),
                                  labels=labels, num_classes=num_classes)


# -- class_weight ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "class_weight, pattern",
    [
        ([1.0, 1.0], r"class_weight.*one entry per class \(3\).*\(2,\)"),
        ([1.0, 1.0, 1.0, 1.0], r"class_weight.*\(3\).*\(4,\)"),
        ([1.0, -1.0, 1.0], r"class_weight.*non-negative.*-1\.0.*index 1"),
        ([1.0, 1.0, np.nan], r"class_weight.*nan.*index 2"),
        ([np.inf, 1.0, 1.0], r"class_weight.*inf.*index 0"),
        (["a", "b", "c"], r"class_weight"),
        ([[1.0, 1.0, 1.0]], r"class_weight.*\(1, 3\)"),
    ],
    ids=["short", "long", "negative", "nan", "inf", "strings", "2-D"],
)
def test_bad_class_weight(backend, class_weight, pattern):
    with pytest.raises(ValueError, match=pattern):
        mg.balanced_accuracy_weighted(backend.asarray([0, 1, 2]), backend.asarray([0, 1, 1]),
                                      class_weight=class_weight)


# -- confusion-matrix input (pyActLearn) ----------------------------------------------


@pytest.mark.parametrize(
    "cm, pattern",
    [
        (np.zeros((2, 3)), r"cm.*square.*\(2, 3\)"),
        (np.zeros(4), r"cm.*square.*\(4,\)"),
        (np.zeros((0, 0)), r"cm.*\(0, 0\)"),
        (np.zeros((2, 2, 2)), r"cm.*\(2, 2, 2\)"),
        (np.array([[1, -1], [0, 2]]), r"cm.*non-negative.*-1.*row 0, column 1"),
        (np.array([[1.0, 0.0], [np.nan, 2.0]]), r"cm.*nan.*row 1, column 0"),
        (np.array([[1.0, 0.0, 0.0], [0.0, 2.0, np.inf], [0.0, 0.0, 1.0]]),
         r"cm.*inf.*row 1, column 2"),
        (np.array([["a", "b"], ["c", "d"]]), r"cm.*numeric"),
    ],
    ids=["non-square", "1-D", "empty", "3-D", "negative", "nan", "inf", "strings"],
)
@pytest.mark.parametrize("function", [mg.per_class_performance, mg.overall_performance],
                         ids=lambda f: f.__name__)
def test_bad_confusion_matrix_input(backend, function, cm, pattern):
    matrix = cm if cm.dtype.kind == "U" else backend.asarray(cm)
    with pytest.raises(ValueError, match=pattern):
        function(matrix)


# -- report extras -------------------------------------------------------------------


def test_bad_digits(backend):
    with pytest.raises(ValueError, match=r"digits.*-1"):
        mg.classification_report(backend.asarray([0, 1]), backend.asarray([0, 1]), digits=-1)


def test_target_names_wrong_length(backend):
    with pytest.raises(ValueError, match=r"target_names.*1"):
        mg.classification_report(backend.asarray([0, 1]), backend.asarray([0, 1]),
                                 target_names=["only-one"])


def test_class_names_wrong_length(backend):
    with pytest.raises(ValueError, match=r"class_names has 1 names.*2 classes"):
        mg.label_report(backend.asarray([0, 1]), backend.asarray([0, 1]), class_names=["a"])


# -- backend names ---------------------------------------------------------------------


@pytest.fixture
def clean_backend_state(monkeypatch):
    from metrics_gpu.backends import selection as _backend
    monkeypatch.setattr(_backend, "_global_backend", None)
    monkeypatch.setattr(_backend, "_environment_backend", None)  # read again
    monkeypatch.delenv("METRICS_GPU_BACKEND", raising=False)


# (set_backend(None) is no bad name: it drops the process-wide choice, test_dispatch.)
@pytest.mark.parametrize("name", ["gpu", "torch", "", 1], ids=["gpu", "torch", "empty", "int"])
def test_bad_backend_name_set_backend(clean_backend_state, name):
    with pytest.raises(ValueError, match=r"backend.*" + re.escape(repr(name))):
        mg.set_backend(name)
    assert mg.get_backend() == "auto"


@pytest.mark.parametrize("name", ["tpu", "CUDA12", None], ids=["tpu", "CUDA12", "None"])
def test_bad_backend_name_use_backend(clean_backend_state, name):
    with pytest.raises(ValueError, match=r"backend.*" + re.escape(repr(name))):
        with mg.use_backend(name):
            pass  # pragma: no cover
    assert mg.get_backend() == "auto"


def test_bad_backend_environment_variable(clean_backend_state, monkeypatch):
    monkeypatch.setenv("METRICS_GPU_BACKEND", "bogus")
    with pytest.raises(ValueError, match=r"METRICS_GPU_BACKEND.*'bogus'"):
        mg.get_backend()
    with pytest.raises(ValueError, match=r"METRICS_GPU_BACKEND.*'bogus'"):
        mg.accuracy_score(np.array([0, 1]), np.array([0, 1]))
    assert os.environ["METRICS_GPU_BACKEND"] == "bogus"


# -- validate=False ----------------------------------------------------------------------


def _corrupt(rng, n, num_classes, *, fraction=0.08):
    """Valid (y_true, y_pred) plus copies with some labels out of range."""
    y_true = rng.integers(0, num_classes, n)
    y_pred = np.where(rng.random(n) < 0.5, y_true, rng.integers(0, num_classes, n))
    bad_true = rng.random(n) < fraction
    bad_pred = rng.random(n) < fraction
    t, p = y_true.copy(), y_pred.copy()
    t[bad_true] = rng.choice([-1, -7, num_classes, num_classes + 11], int(bad_true.sum()))
    p[bad_pred] = rng.choice([-3, num_classes, 10 * num_classes], int(bad_pred.sum()))
    bad = bad_true | bad_pred
    return t, p, y_true[~bad], y_pred[~bad], int(bad.sum())


# K = 6 uses the dense matrix, K = 5000 the O(K) statistics path.
@pytest.mark.parametrize("num_classes", [6, 5000], ids=["K6-dense", "K5000-statistics"])
def test_validate_false_label_report_counts_and_filters(backend, rng, num_classes):
    t, p, t_ok, p_ok, n_bad = _corrupt(rng, 3000, num_classes)
    assert n_bad > 0
    report = mg.label_report(backend.asarray(t), backend.asarray(p),
                             num_classes=num_classes, validate=False)
    assert report.invalid == n_bad
    assert report.total == t_ok.size
    reference = mg.label_report(backend.asarray(t_ok), backend.asarray(p_ok),
                                num_classes=num_classes)
    assert reference.invalid == 0
    for name, value in reference.metrics.items():
        np.testing.assert_allclose(report.metrics[name], value, rtol=1e-12, err_msg=name)
    for name, values in reference.per_class.items():
        np.testing.assert_allclose(report.per_class[name], values, rtol=1e-12, err_msg=name)


@pytest.mark.parametrize("num_classes", [6, 5000], ids=["K6-dense", "K5000-statistics"])
def test_validate_false_matches_sklearn_on_valid_samples(backend, rng, num_classes):
    t, p, t_ok, p_ok, _ = _corrupt(rng, 3000, num_classes)
    bt, bp = backend.asarray(t), backend.asarray(p)
    kw = dict(num_classes=num_classes, validate=False)
    labels = np.arange(num_classes)
    assert float(backend.to_numpy(mg.accuracy_score(bt, bp, **kw))) == pytest.approx(
        sklearn_metrics.accuracy_score(t_ok, p_ok), rel=1e-12)
    assert float(backend.to_numpy(mg.matthews_corrcoef(bt, bp, **kw))) == pytest.approx(
        sklearn_metrics.matthews_corrcoef(t_ok, p_ok), rel=1e-12)
    assert float(backend.to_numpy(mg.f1_score(bt, bp, average="weighted", zero_division=0, **kw))) == \
        pytest.approx(sklearn_metrics.f1_score(t_ok, p_ok, average="weighted",
                                               labels=labels, zero_division=0), rel=1e-12)
    if num_classes <= 64:
        np.testing.assert_array_equal(
            backend.to_numpy(mg.confusion_matrix(bt, bp, **kw)),
            sklearn_metrics.confusion_matrix(t_ok, p_ok, labels=labels))
        assert float(backend.to_numpy(mg.cohen_kappa_score(bt, bp, weights="quadratic", **kw))) \
            == pytest.approx(sklearn_metrics.cohen_kappa_score(
                t_ok, p_ok, weights="quadratic", labels=labels), rel=1e-12)


def test_validate_false_with_weights_and_ignore_index(backend, rng):
    t, p, _, _, _ = _corrupt(rng, 2000, 5)
    w = rng.random(t.size)
    t[::17] = 99  # ignored targets: neither counted nor invalid
    ignored = t == 99
    bad = (~ignored) & ((t < 0) | (t >= 5) | (p < 0) | (p >= 5))
    keep = ~ignored & ~bad
    report = mg.label_report(backend.asarray(t), backend.asarray(p), num_classes=5,
                             sample_weight=backend.asarray(w), ignore_index=99, validate=False)
    assert report.invalid == int(bad.sum())
    assert report.total == pytest.approx(w[keep].sum(), rel=1e-12)
    assert report.metrics["accuracy"] == pytest.approx(
        sklearn_metrics.accuracy_score(t[keep], p[keep], sample_weight=w[keep]), rel=1e-12)


def test_validate_false_unsigned_and_small_dtypes(backend):
    t = np.array([0, 1, 200, 2, 1], dtype=np.uint8)
    p = np.array([0, 1, 1, 255, 2], dtype=np.uint8)
    report = mg.label_report(backend.asarray(t), backend.asarray(p), num_classes=3,
                             validate=False)
    assert report.invalid == 2
    assert report.metrics["accuracy"] == pytest.approx(2 / 3)


def test_validate_false_nan_float_labels_are_invalid(backend):
    """NaN float labels without validation: counted as invalid, no warning leak."""
    t = np.array([0.0, np.nan, 1.0, 2.0])
    p = np.array([0, 1, 1, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        report = mg.label_report(backend.asarray(t), backend.asarray(p), num_classes=3,
                                 validate=False)
    assert report.invalid == 1
    assert report.metrics["accuracy"] == pytest.approx(2 / 3)


def test_bool_true_with_one_class_is_out_of_range(backend):
    t = backend.asarray(np.array([False, True]))
    p = backend.asarray(np.array([False, False]))
    with pytest.raises(ValueError, match=r"y_true contains True \(class 1\) at index 1"):
        mg.accuracy_score(t, p, num_classes=1)


def test_bfloat16_scores(backend, rng):
    # bfloat16 arrives from JAX and torch as ml_dtypes' NumPy dtype (kind 'V').
    ml_dtypes = pytest.importorskip("ml_dtypes")
    if backend.name == "cuda":
        pytest.skip("CuPy has no bfloat16 dtype (torch bfloat16 tensors are widened)")
    scores = rng.normal(size=(500, 6)).astype(ml_dtypes.bfloat16)
    y_true = rng.integers(0, 6, 500)
    expected = np.mean(scores.astype(np.float32).argmax(axis=1) == y_true)
    assert float(mg.accuracy_score(backend.asarray(y_true), backend.asarray(scores))) == expected
    scores[7, 3] = np.nan
    with pytest.raises(ValueError, match="y_pred must hold finite scores; found nan at row 7"):
        mg.accuracy_score(backend.asarray(y_true), backend.asarray(scores))


def test_kappa_messages_name_its_own_arguments(backend):
    """cohen_kappa_score takes y1 and y2 (scikit-learn's names): its messages say
    so, and y1 keeps the targets' role (ignore_index, the float hint)."""
    cases = [
        (([0, 1, 2, 1], [0, 1, 1]), {}, r"y1 has 4 samples but y2 has 3"),
        (([0, 1, 0.5, 1], [0, 1, 1, 1]), {}, r"y1 must hold integer class codes.*y1 takes the "
                                            r"true classes"),
        (([0, -1, 2, 1], [0, 1, 1, 1]), {}, r"y1 contains the negative label -1.*"
                                          r"pass ignore_index=-1"),
        (([0, 1, 2, 1], [0, -1, 1, 1]), {}, r"y2 contains the negative label -1.*"
                                          r"ignore_index leaves out samples by their y1 only"),
        (([0, 1, 2, 1], [0, 1, 1, 1]), {"num_classes": 2}, r"y1 contains the label 2"),
    ]
    for (y1, y2), options, pattern in cases:
        with pytest.raises(ValueError, match=pattern):
            mg.cohen_kappa_score(backend.asarray(np.asarray(y1)), backend.asarray(np.asarray(y2)),
                                 **options)
    # ignore_index still leaves out samples by y1.
    kappa = mg.cohen_kappa_score(backend.asarray(np.array([0, -1, 1, 1])),
                                 backend.asarray(np.array([0, 5, 1, 0])), ignore_index=-1)
    assert float(backend.to_numpy(kappa)) == pytest.approx(
        sklearn_metrics.cohen_kappa_score([0, 1, 1], [0, 1, 0]))
