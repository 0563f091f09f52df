"""Hand-worked cases of each seed document's formulas.

Every expected value here is worked out in the test itself, as exact
fractions from tp/fp/fn/tn (or matrix cells) written out explicitly, with
plain Python arithmetic: none comes from ``metrics_gpu``'s own formulas.
Sources (see ``shared/seeds/``):

* oneDAL, quality metrics for multi-class classifiers (8 metrics, beta);
* oneDAL, quality metrics for binary classifiers (2 x 2 layout, AUC);
* pyActLearn ``performance`` (13 per-class columns, 9 overall values);
* the overview paper's notes (balanced accuracy weighted, MCC and kappa in
  its c/s/p/t notation, quadratic weighted kappa).
"""

from __future__ import annotations

import math
from fractions import Fraction as Fr

import numpy as np
import pytest

import metrics_gpu as mg


def _labels_of_matrix(cm):
    """Label arrays (truth, prediction) whose confusion matrix is ``cm``."""
    truth, pred = [], []
    for i, row in enumerate(cm):
        for j, count in enumerate(row):
            truth += [i] * count
            pred += [j] * count
    return np.array(truth), np.array(pred)


def _close(actual, expected, *, rel=1e-12):
    """Exact fraction (or NaN) vs a float result."""
    actual = float(actual)
    if isinstance(expected, float) and math.isnan(expected):
        return math.isnan(actual)
    return math.isclose(actual, float(expected), rel_tol=rel, abs_tol=1e-15)


def _nan_or(numerator, denominator):
    """Unguarded division, as oneDAL / pyActLearn: 0/0 is NaN."""
    if denominator == 0:
        return float("nan")
    return Fr(numerator) / Fr(denominator)


def _harmonic(p, r, beta=Fr(1)):
    """(b^2 + 1) P R / (b^2 P + R), unguarded; NaN propagates."""
    if isinstance(p, float) or isinstance(r, float):  # NaN in
        return float("nan")
    b2 = Fr(beta) ** 2
    return _nan_or((b2 + 1) * p * r, b2 * p + r)


# ---------------------------------------------------------------------------
# oneDAL multi-class
# ---------------------------------------------------------------------------

# Each case: confusion matrix and the per-class counts read off it by hand.
# tp_i = c_ii, fp_i = column sum - tp_i, fn_i = row sum - tp_i,
# tn_i = N - tp_i - fp_i - fn_i (the seed's definitions).
ONEDAL_MULTICLASS_CASES = {
    # truth [0,0,1,1,2,2], pred [0,1,1,1,2,2]
    "3cls-smile-example": (
        [[1, 1, 0],
         [0, 2, 0],
         [0, 0, 2]],
        # (tp, fp, fn, tn) per class
        [(1, 0, 1, 4), (2, 1, 0, 3), (2, 0, 0, 4)],
    ),
    "3cls-all-classes-confused": (
        [[5, 2, 0],
         [1, 3, 1],
         [0, 2, 4]],
        [(5, 1, 2, 10), (3, 4, 2, 9), (4, 1, 2, 11)],
    ),
    "4cls-asymmetric": (
        [[7, 0, 2, 1],
         [3, 4, 0, 0],
         [0, 1, 6, 2],
         [1, 0, 0, 3]],
        # N = 30; rows 10, 7, 9, 4; columns 11, 5, 8, 6
        [(7, 4, 3, 16), (4, 1, 3, 22), (6, 2, 3, 19), (3, 3, 1, 23)],
    ),
}


def _onedal_multiclass_expected(counts, beta):
    n_classes = len(counts)
    total = sum(counts[0])
    tp = [c[0] for c in counts]
    fp = [c[1] for c in counts]
    fn = [c[2] for c in counts]
    tn = [c[3] for c in counts]
    micro_p = _nan_or(sum(tp), sum(tp) + sum(fp))
    micro_r = _nan_or(sum(tp), sum(tp) + sum(fn))
    per_p = [_nan_or(tp[i], tp[i] + fp[i]) for i in range(n_classes)]
    per_r = [_nan_or(tp[i], tp[i] + fn[i]) for i in range(n_classes)]
    macro_p = (float("nan") if any(isinstance(v, float) for v in per_p)
               else sum(per_p) / n_classes)
    macro_r = (float("nan") if any(isinstance(v, float) for v in per_r)
               else sum(per_r) / n_classes)
    return {
        "average_accuracy": sum(Fr(tp[i] + tn[i], total) for i in range(n_classes)) / n_classes,
        "error_rate": sum(Fr(fp[i] + fn[i], total) for i in range(n_classes)) / n_classes,
        "micro_precision": micro_p,
        "micro_recall": micro_r,
        "micro_fscore": _harmonic(micro_p, micro_r, beta),
        "macro_precision": macro_p,
        "macro_recall": macro_r,
        "macro_fscore": _harmonic(macro_p, macro_r, beta),
    }


def test_onedal_multiclass_counts_are_read_correctly():
    """The hand-listed (tp, fp, fn, tn) agree with the matrices (test data check)."""
    for name, (cm, counts) in ONEDAL_MULTICLASS_CASES.items():
        cm = np.array(cm)
        total = cm.sum()
        for i, (tp, fp, fn, tn) in enumerate(counts):
            assert (tp, fp, fn, tn) == (
                cm[i, i], cm[:, i].sum() - cm[i, i], cm[i, :].sum() - cm[i, i],
                total - cm[:, i].sum() - cm[i, :].sum() + cm[i, i],
            ), (name, i)


@pytest.mark.parametrize("beta", [Fr(1), Fr(2), Fr(1, 2)], ids=["beta=1", "beta=2", "beta=0.5"])
@pytest.mark.parametrize("case", sorted(ONEDAL_MULTICLASS_CASES))
def test_onedal_multiclass_hand_worked(backend, case, beta):
    cm, counts = ONEDAL_MULTICLASS_CASES[case]
    truth, pred = _labels_of_matrix(cm)
    result = mg.multiclass_quality_metrics(
        backend.asarray(truth), backend.asarray(pred), beta=float(beta)
    )
    np.testing.assert_array_equal(backend.to_numpy(result.confusion_matrix), np.array(cm))
    expected = _onedal_multiclass_expected(counts, beta)
    for name, value in expected.items():
        got = backend.to_numpy(getattr(result, name))
        assert _close(got, value), f"{name}: got {float(got)!r}, expected {float(value)!r}"


def test_onedal_multiclass_explicit_values(backend):
    """The smile example written out: macro F = 80/93, micro F = 5/6."""
    truth = backend.asarray([0, 0, 1, 1, 2, 2])
    pred = backend.asarray([0, 1, 1, 1, 2, 2])
    r = mg.multiclass_quality_metrics(truth, pred)
    # per class (tp, fp, fn, tn): (1,0,1,4) (2,1,0,3) (2,0,0,4), N = 6
    assert _close(backend.to_numpy(r.average_accuracy), Fr(5 + 5 + 6, 18))
    assert _close(backend.to_numpy(r.error_rate), Fr(1 + 1 + 0, 18))
    assert _close(backend.to_numpy(r.micro_precision), Fr(5, 6))
    assert _close(backend.to_numpy(r.micro_recall), Fr(5, 6))
    assert _close(backend.to_numpy(r.micro_fscore), Fr(5, 6))
    assert _close(backend.to_numpy(r.macro_precision), Fr(8, 9))   # (1 + 2/3 + 1) / 3
    assert _close(backend.to_numpy(r.macro_recall), Fr(5, 6))      # (1/2 + 1 + 1) / 3
    assert _close(backend.to_numpy(r.macro_fscore), Fr(80, 93))    # 2 (8/9)(5/6) / (8/9 + 5/6)
    # beta = 2: 5 P R / (4 P + R) = 5 (40/54) / (32/9 + 5/6) = 200/237
    r2 = mg.multiclass_quality_metrics(truth, pred, beta=2.0)
    assert _close(backend.to_numpy(r2.macro_fscore), Fr(200, 237))


def test_onedal_error_rate_is_not_one_minus_accuracy(backend):
    """errorRate = (1/l) sum (fp_i + fn_i) / N = 2 (1 - acc) / l, not 1 - acc."""
    cm = [[5, 2, 0], [1, 3, 1], [0, 2, 4]]  # acc = 12/18, l = 3
    truth, pred = _labels_of_matrix(cm)
    r = mg.multiclass_quality_metrics(backend.asarray(truth), backend.asarray(pred))
    assert _close(backend.to_numpy(r.error_rate), 2 * (1 - Fr(12, 18)) / 3)
    assert _close(backend.to_numpy(r.average_accuracy), 1 - 2 * (1 - Fr(12, 18)) / 3)
    assert not _close(backend.to_numpy(r.error_rate), 1 - Fr(12, 18))


def test_onedal_never_predicted_class_gives_nan_macro_precision(backend):
    """Class 2 is never predicted: tp+fp = 0, no guard in oneDAL -> NaN."""
    truth = backend.asarray([0, 1, 2, 0, 1, 2])
    pred = backend.asarray([0, 1, 1, 0, 0, 1])
    r = mg.multiclass_quality_metrics(truth, pred)
    # (tp, fp, fn, tn): class 0 (2,1,0,3), class 1 (1,2,1,2), class 2 (0,0,2,4)
    assert math.isnan(float(backend.to_numpy(r.macro_precision)))
    assert math.isnan(float(backend.to_numpy(r.macro_fscore)))
    assert _close(backend.to_numpy(r.macro_recall), (Fr(1) + Fr(1, 2) + 0) / 3)
    assert _close(backend.to_numpy(r.micro_precision), Fr(3, 6))
    assert _close(backend.to_numpy(r.micro_fscore), Fr(3, 6))
    assert _close(backend.to_numpy(r.average_accuracy), Fr(5 + 3 + 4, 18))


def test_onedal_class_absent_everywhere_gives_nan_macro_recall(backend):
    """num_classes=4, class 3 never occurs: both macro P and macro R are 0/0."""
    truth = backend.asarray([0, 1, 2, 2])
    pred = backend.asarray([0, 1, 2, 1])
    r = mg.multiclass_quality_metrics(truth, pred, num_classes=4)
    assert backend.to_numpy(r.confusion_matrix).shape == (4, 4)
    assert math.isnan(float(backend.to_numpy(r.macro_precision)))
    assert math.isnan(float(backend.to_numpy(r.macro_recall)))
    assert math.isnan(float(backend.to_numpy(r.macro_fscore)))
    # class 3: tp=fp=fn=0, tn=4 -> its one-vs-rest accuracy is 1
    # (tp, fp, fn, tn): (1,0,0,3) (1,1,0,2) (1,0,1,2) (0,0,0,4)
    assert _close(backend.to_numpy(r.average_accuracy), Fr(4 + 3 + 3 + 4, 16))
    assert _close(backend.to_numpy(r.micro_recall), Fr(3, 4))


def test_onedal_multiclass_integer_weights_equal_repetition(backend):
    """sample_weight (an extension): integer weights act as repeated samples."""
    cm = [[5, 2, 0], [1, 3, 1], [0, 2, 4]]
    _, counts = ONEDAL_MULTICLASS_CASES["3cls-all-classes-confused"]
    # one sample per non-empty cell, weighted by the cell count
    truth, pred, weight = [], [], []
    for i, row in enumerate(cm):
        for j, count in enumerate(row):
            if count:
                truth.append(i)
                pred.append(j)
                weight.append(float(count))
    r = mg.multiclass_quality_metrics(backend.asarray(truth), backend.asarray(pred),
                                      sample_weight=backend.asarray(weight), beta=2.0)
    np.testing.assert_allclose(backend.to_numpy(r.confusion_matrix), np.array(cm, float))
    for name, value in _onedal_multiclass_expected(counts, Fr(2)).items():
        assert _close(backend.to_numpy(getattr(r, name)), value), name


# ---------------------------------------------------------------------------
# oneDAL binary
# ---------------------------------------------------------------------------

# truth [1,1,0,0,1,1,0,1], pred [1,0,0,1,1,1,0,0]:
# class 1 as C1: tp=3, fn=2, fp=1, tn=2.
BINARY_TRUTH = [1, 1, 0, 0, 1, 1, 0, 1]
BINARY_PRED = [1, 0, 0, 1, 1, 1, 0, 0]
BINARY_COUNTS = {1: (3, 2, 1, 2), 0: (2, 1, 2, 3)}  # pos_label -> (tp, fn, fp, tn)


def _onedal_binary_expected(tp, fn, fp, tn, beta):
    b2 = Fr(beta) ** 2
    tpr = _nan_or(tp, tp + fn)
    tnr = _nan_or(tn, fp + tn)
    return {
        "accuracy": Fr(tp + tn, tp + fn + fp + tn),
        "precision": _nan_or(tp, tp + fp),
        "recall": tpr,
        "fscore": _nan_or((b2 + 1) * tp, (b2 + 1) * tp + b2 * fn + fp),
        "specificity": tnr,
        "auc": (float("nan") if isinstance(tpr, float) or isinstance(tnr, float)
                else (tpr + tnr) / 2),
    }


@pytest.mark.parametrize("beta", [Fr(1), Fr(2), Fr(1, 2)], ids=["beta=1", "beta=2", "beta=0.5"])
@pytest.mark.parametrize("pos_label", [1, 0], ids=["pos_label=1", "pos_label=0"])
def test_onedal_binary_hand_worked(backend, pos_label, beta):
    tp, fn, fp, tn = BINARY_COUNTS[pos_label]
    r = mg.binary_quality_metrics(backend.asarray(BINARY_TRUTH), backend.asarray(BINARY_PRED),
                                  beta=float(beta), pos_label=pos_label)
    # oneDAL's layout: row actual C1 = (tp, fn), row actual C2 = (fp, tn)
    np.testing.assert_array_equal(backend.to_numpy(r.confusion_matrix),
                                  np.array([[tp, fn], [fp, tn]]))
    for name, value in _onedal_binary_expected(tp, fn, fp, tn, beta).items():
        got = backend.to_numpy(getattr(r, name))
        assert _close(got, value), f"{name}: got {float(got)!r}, expected {float(value)!r}"


def test_onedal_binary_explicit_values(backend):
    r = mg.binary_quality_metrics(backend.asarray(BINARY_TRUTH), backend.asarray(BINARY_PRED))
    assert _close(backend.to_numpy(r.accuracy), Fr(5, 8))
    assert _close(backend.to_numpy(r.precision), Fr(3, 4))
    assert _close(backend.to_numpy(r.recall), Fr(3, 5))
    assert _close(backend.to_numpy(r.fscore), Fr(6, 9))       # 2*3 / (2*3 + 2 + 1)
    assert _close(backend.to_numpy(r.specificity), Fr(2, 3))
    assert _close(backend.to_numpy(r.auc), Fr(19, 30))        # (3/5 + 2/3) / 2
    r2 = mg.binary_quality_metrics(backend.asarray(BINARY_TRUTH), backend.asarray(BINARY_PRED),
                                   beta=2.0)
    assert _close(backend.to_numpy(r2.fscore), Fr(15, 24))    # 5*3 / (5*3 + 4*2 + 1)


def test_onedal_binary_bool_labels(backend):
    truth = np.array(BINARY_TRUTH, dtype=bool)
    pred = np.array(BINARY_PRED, dtype=bool)
    r = mg.binary_quality_metrics(backend.asarray(truth), backend.asarray(pred))
    np.testing.assert_array_equal(backend.to_numpy(r.confusion_matrix), [[3, 2], [1, 2]])
    assert _close(backend.to_numpy(r.auc), Fr(19, 30))


def test_onedal_binary_nothing_predicted_positive(backend):
    """tp = fp = 0: precision is 0/0 = NaN (no guard); the seed's count form of
    F is tp-based, (b^2+1)*0 / (0 + b^2 fn + 0) = 0, not NaN."""
    truth = backend.asarray([1, 0, 1, 0, 0])
    pred = backend.asarray([0, 0, 0, 0, 0])
    r = mg.binary_quality_metrics(truth, pred)
    np.testing.assert_array_equal(backend.to_numpy(r.confusion_matrix), [[0, 2], [0, 3]])
    assert math.isnan(float(backend.to_numpy(r.precision)))
    assert _close(backend.to_numpy(r.recall), 0)
    assert _close(backend.to_numpy(r.fscore), 0)
    assert _close(backend.to_numpy(r.specificity), 1)
    assert _close(backend.to_numpy(r.auc), Fr(1, 2))
    assert _close(backend.to_numpy(r.accuracy), Fr(3, 5))


def test_onedal_binary_no_negatives_gives_nan_specificity(backend):
    """All samples are C1: tn + fp = 0 -> specificity and auc NaN."""
    r = mg.binary_quality_metrics(backend.asarray([1, 1, 1]), backend.asarray([1, 0, 1]))
    np.testing.assert_array_equal(backend.to_numpy(r.confusion_matrix), [[2, 1], [0, 0]])
    assert math.isnan(float(backend.to_numpy(r.specificity)))
    assert math.isnan(float(backend.to_numpy(r.auc)))
    assert _close(backend.to_numpy(r.precision), 1)
    assert _close(backend.to_numpy(r.fscore), Fr(4, 5))  # 2*2 / (4 + 1 + 0)


# ---------------------------------------------------------------------------
# pyActLearn
# ---------------------------------------------------------------------------

PYACTLEARN_CASES = {
    # N = 18; rows 7, 5, 6; columns 6, 7, 5
    "3cls": (
        [[5, 2, 0], [1, 3, 1], [0, 2, 4]],
        [(5, 10, 1, 2), (3, 9, 4, 2), (4, 11, 1, 2)],   # (tp, tn, fp, fn)
    ),
    # class 1 never occurs but is predicted once; class 0 holds every sample
    # (fp + tn = 0 for class 0: FPR and specificity guarded to 0).
    "2cls-guards": (
        [[3, 1], [0, 0]],
        [(3, 0, 0, 1), (0, 3, 1, 0)],
    ),
    # class 2 neither occurs nor is predicted
    "3cls-empty-class": (
        [[2, 1, 0], [2, 3, 0], [0, 0, 0]],
        [(2, 3, 2, 1), (3, 2, 1, 2), (0, 8, 0, 0)],
    ),
}


def _guarded(numerator, denominator):
    return Fr(0) if denominator == 0 else Fr(numerator, denominator)


def _pyactlearn_per_class_expected(counts):
    rows = []
    for tp, tn, fp, fn in counts:
        n = tp + tn + fp + fn
        recall = _guarded(tp, tp + fn)
        precision = _guarded(tp, tp + fp)
        f1 = Fr(0) if precision + recall == 0 else 2 * precision * recall / (precision + recall)
        rows.append([
            tp, tn, fp, fn,
            Fr(tp + tn, n),
            Fr(fp + fn, n),
            recall,
            _guarded(fp, fp + tn),
            _guarded(tn, fp + tn),
            precision,
            Fr(tp + fn, n),
            f1,
            math.sqrt(precision * recall),
        ])
    return rows


@pytest.mark.parametrize("case", sorted(PYACTLEARN_CASES))
def test_pyactlearn_per_class_hand_worked(backend, case):
    cm, counts = PYACTLEARN_CASES[case]
    table = backend.to_numpy(mg.per_class_performance(backend.asarray(np.array(cm))))
    expected = _pyactlearn_per_class_expected(counts)
    assert table.shape == (len(cm), 13)
    for k, row in enumerate(expected):
        for column, value in enumerate(row):
            name = mg.PER_CLASS_PERFORMANCE_COLUMNS[column]
            assert _close(table[k, column], value), (
                f"class {k} column {column} ({name}): got {table[k, column]!r}, "
                f"expected {float(value)!r}"
            )


def test_pyactlearn_column_names_follow_seed_order():
    assert mg.PER_CLASS_PERFORMANCE_COLUMNS == (
        "true_positive", "true_negative", "false_positive", "false_negative", "accuracy",
        "misclassification", "recall", "false_positive_rate", "specificity", "precision",
        "prevalence", "f1", "g_measure",
    )
    assert len(mg.OVERALL_PERFORMANCE_NAMES) == 9
    assert mg.OVERALL_PERFORMANCE_NAMES[1] == "weighed_accuracy"
    assert mg.OVERALL_PERFORMANCE_NAMES[-1] == "exact_matching_ratio"


def test_pyactlearn_fp_fn_not_swapped(backend):
    """The seed's prose swaps FP and FN; the code (and we) use the standard ones.
    cm [[1, 3], [0, 2]]: class 0 has fp = 0 (column) and fn = 3 (row)."""
    table = backend.to_numpy(mg.per_class_performance(backend.asarray(np.array([[1, 3], [0, 2]]))))
    np.testing.assert_array_equal(table[:, 2], [0, 3])  # false positives
    np.testing.assert_array_equal(table[:, 3], [3, 0])  # false negatives


def _pyactlearn_overall_expected(counts):
    k = len(counts)
    n = sum(counts[0])
    tp = [c[0] for c in counts]
    tn = [c[1] for c in counts]
    fp = [c[2] for c in counts]
    fn = [c[3] for c in counts]
    accuracy = [Fr(tp[i] + tn[i], n) for i in range(k)]
    prevalence = [Fr(tp[i] + fn[i], n) for i in range(k)]
    precision = [_guarded(tp[i], tp[i] + fp[i]) for i in range(k)]
    recall = [_guarded(tp[i], tp[i] + fn[i]) for i in range(k)]
    micro_p = _nan_or(sum(tp), sum(tp) + sum(fp))
    micro_r = _nan_or(sum(tp), sum(tp) + sum(fn))
    macro_p = sum(precision) / k
    macro_r = sum(recall) / k
    return [
        sum(accuracy) / k,
        sum(a * p for a, p in zip(accuracy, prevalence)),  # NOT divided by k
        micro_p,
        micro_r,
        _harmonic(micro_p, micro_r),
        macro_p,
        macro_r,
        _harmonic(macro_p, macro_r),
        Fr(sum(tp), n),
    ]


@pytest.mark.parametrize("case", sorted(PYACTLEARN_CASES))
def test_pyactlearn_overall_hand_worked(backend, case):
    cm, counts = PYACTLEARN_CASES[case]
    values = backend.to_numpy(mg.overall_performance(backend.asarray(np.array(cm))))
    assert values.shape == (9,)
    for i, value in enumerate(_pyactlearn_overall_expected(counts)):
        name = mg.OVERALL_PERFORMANCE_NAMES[i]
        assert _close(values[i], value), f"{name}: got {values[i]!r}, expected {float(value)!r}"


def test_pyactlearn_overall_explicit_values(backend):
    """cm [[3, 1], [0, 0]] worked out fully."""
    values = backend.to_numpy(mg.overall_performance(backend.asarray(np.array([[3, 1], [0, 0]]))))
    expected = [
        Fr(3, 4),   # average accuracy: (3/4 + 3/4) / 2
        Fr(3, 4),   # weighed: 3/4 * 1 + 3/4 * 0
        Fr(3, 4),   # micro P = 3 / (3 + 1)
        Fr(3, 4),   # micro R = 3 / (3 + 1)
        Fr(3, 4),   # micro F
        Fr(1, 2),   # macro P: (1 + 0) / 2 (class 1: 0/1)
        Fr(3, 8),   # macro R: (3/4 + 0) / 2 (class 1: guarded 0)
        Fr(3, 7),   # macro F: 2 (1/2)(3/8) / (1/2 + 3/8)
        Fr(3, 4),   # exact matching ratio
    ]
    for i, value in enumerate(expected):
        assert _close(values[i], value), (mg.OVERALL_PERFORMANCE_NAMES[i], values[i])


def test_pyactlearn_weighed_accuracy_not_divided_by_k(backend):
    cm = [[5, 2, 0], [1, 3, 1], [0, 2, 4]]
    values = backend.to_numpy(mg.overall_performance(backend.asarray(np.array(cm))))
    # accuracy_k = (tp + tn) / 18 = 15/18, 12/18, 15/18; prevalence 7/18, 5/18, 6/18
    weighed = Fr(15 * 7 + 12 * 5 + 15 * 6, 18 * 18)
    assert _close(values[1], weighed)
    assert not _close(values[1], weighed / 3)


def test_pyactlearn_unguarded_f_is_nan(backend):
    """No true positive at all: micro/macro P and R are 0, so both F values are
    0/0 = NaN (pyActLearn has no guard there), while per-class F1 and G are
    guarded to 0."""
    cm = backend.asarray(np.array([[0, 1], [1, 0]]))
    values = backend.to_numpy(mg.overall_performance(cm))
    assert values[2] == 0 and values[3] == 0          # micro P, micro R
    assert math.isnan(values[4])                       # micro F
    assert values[5] == 0 and values[6] == 0           # macro P, macro R
    assert math.isnan(values[7])                       # macro F
    assert values[8] == 0
    table = backend.to_numpy(mg.per_class_performance(cm))
    np.testing.assert_array_equal(table[:, 11], [0, 0])  # F1 guarded
    np.testing.assert_array_equal(table[:, 12], [0, 0])  # G


# ---------------------------------------------------------------------------
# The two macro-F conventions side by side
# ---------------------------------------------------------------------------

MACRO_F_CASES = {
    # smile PR #874's example: 0.822222 (sklearn) vs 0.860215 (harmonic)
    "smile-874": ([0, 0, 1, 1, 2, 2], [0, 1, 1, 1, 2, 2], Fr(37, 45), Fr(80, 93)),
    # per class (tp, fp, fn): 0 (2,1,1) 1 (1,2,2) 2 (1,1,1) 3 (1,0,0)
    # P = 2/3, 1/3, 1/2, 1; R = 2/3, 1/3, 1/2, 1; F = same
    # mean F = (2/3 + 1/3 + 1/2 + 1) / 4 = 5/8; macro P = macro R = 5/8 -> 5/8
    "P-equals-R": ([0, 0, 0, 1, 1, 1, 2, 2, 3], [0, 0, 1, 1, 2, 0, 2, 1, 3], Fr(5, 8), Fr(5, 8)),
    # (tp, fp, fn): 0 (3,3,0) 1 (0,0,2) 2 (1,0,1)
    # P = 1/2, 0 (guarded), 1; R = 1, 0, 1/2; F = 2/3, 0, 2/3
    # mean F = 4/9; macro P = 1/2, macro R = 1/2 -> harmonic 1/2
    "class-never-predicted": ([0, 0, 0, 1, 1, 2, 2], [0, 0, 0, 0, 0, 2, 0], Fr(4, 9), Fr(1, 2)),
}


@pytest.mark.parametrize("case", sorted(MACRO_F_CASES))
def test_macro_f_conventions_side_by_side(backend, case):
    truth, pred, mean_of_f, harmonic = MACRO_F_CASES[case]
    t, p = backend.asarray(truth), backend.asarray(pred)
    sk = backend.to_numpy(mg.f1_score(t, p, average="macro", zero_division=0))
    assert _close(sk, mean_of_f), f"f1_score macro {float(sk)!r} != {float(mean_of_f)!r}"
    report = mg.label_report(t, p)
    assert _close(report.metrics["macro_f1"], mean_of_f)
    assert _close(report.metrics["macro_f1_harmonic"], harmonic)
    cm = mg.confusion_matrix(t, p)
    assert _close(backend.to_numpy(mg.overall_performance(cm))[7], harmonic)
    if case != "class-never-predicted":  # oneDAL: unguarded, that one is NaN
        onedal = mg.multiclass_quality_metrics(t, p)
        assert _close(backend.to_numpy(onedal.macro_fscore), harmonic)
    else:
        onedal = mg.multiclass_quality_metrics(t, p)
        assert math.isnan(float(backend.to_numpy(onedal.macro_fscore)))


def test_macro_f_conventions_differ_on_smile_example(backend):
    t = backend.asarray([0, 0, 1, 1, 2, 2])
    p = backend.asarray([0, 1, 1, 1, 2, 2])
    sk = float(backend.to_numpy(mg.f1_score(t, p, average="macro")))
    harmonic = float(backend.to_numpy(mg.multiclass_quality_metrics(t, p).macro_fscore))
    assert round(sk, 6) == 0.822222
    assert round(harmonic, 6) == 0.860215


# ---------------------------------------------------------------------------
# The overview paper
# ---------------------------------------------------------------------------


# truth [0,0,0,1,1,2], pred [0,0,1,1,2,2]: recall 2/3, 1/2, 1; accuracy 4/6
BAW_TRUTH = [0, 0, 0, 1, 1, 2]
BAW_PRED = [0, 0, 1, 1, 2, 2]
BAW_RECALL = [Fr(2, 3), Fr(1, 2), Fr(1)]


@pytest.mark.parametrize(
    "class_weight, expected",
    [
        (None, Fr(4, 6)),                               # default: = accuracy
        ([1.0, 1.0, 1.0], sum(BAW_RECALL) / 3),          # = balanced accuracy 13/18
        ([1.0, 2.0, 3.0], (Fr(2, 3) + 2 * Fr(1, 2) + 3) / 6),  # 7/9
        ([0.0, 0.0, 1.0], Fr(1)),
        ([3.0, 2.0, 1.0], (3 * Fr(2, 3) + 2 * Fr(1, 2) + 1) / 6),
    ],
    ids=["default", "uniform", "1-2-3", "only-class-2", "3-2-1"],
)
def test_balanced_accuracy_weighted(backend, class_weight, expected):
    value = mg.balanced_accuracy_weighted(backend.asarray(BAW_TRUTH), backend.asarray(BAW_PRED),
                                          class_weight=class_weight)
    assert _close(backend.to_numpy(value), expected)


def test_balanced_accuracy_weighted_default_is_accuracy(backend, rng):
    truth = rng.integers(0, 7, 500)
    pred = np.where(rng.random(500) < 0.6, truth, rng.integers(0, 7, 500))
    value = backend.to_numpy(mg.balanced_accuracy_weighted(backend.asarray(truth),
                                                           backend.asarray(pred)))
    assert _close(value, Fr(int((truth == pred).sum()), 500))


def test_balanced_accuracy_weighted_skips_class_without_support(backend):
    """num_classes=4; class 3 has no true sample, so no recall: its weight
    drops out (5 on class 3 changes nothing)."""
    value = mg.balanced_accuracy_weighted(backend.asarray(BAW_TRUTH), backend.asarray(BAW_PRED),
                                          class_weight=[1.0, 1.0, 1.0, 5.0], num_classes=4)
    assert _close(backend.to_numpy(value), sum(BAW_RECALL) / 3)


# MCC and kappa in the paper's notation: c = trace, s = total,
# p_k = column sums (predicted), t_k = row sums (true).
PAPER_CASES = {
    # c = 12, s = 18, t = (7, 5, 6), p = (6, 7, 5):
    # sum p t = 42 + 35 + 30 = 107; sum p^2 = sum t^2 = 110
    # kappa = (216 - 107) / (324 - 107) = 109/217; MCC = 109 / 214
    "3cls": ([[5, 2, 0], [1, 3, 1], [0, 2, 4]], Fr(109, 217), Fr(109, 214)),
    # c = 4, s = 10, t = (5, 5), p = (3, 7): sum p t = 50, sum p^2 = 58, sum t^2 = 50
    # kappa = (40 - 50) / (100 - 50) = -1/5; MCC = -10 / sqrt(42 * 50)
    "2cls-negative": ([[1, 4], [2, 3]], Fr(-1, 5), -10 / math.sqrt(42 * 50)),
    # c = 8, s = 12, t = (4, 4, 4), p = (2, 4, 6): sum p t = 48,
    # sum p^2 = 56, sum t^2 = 48; kappa = (96 - 48) / (144 - 48) = 1/2;
    # MCC = 48 / sqrt(88 * 96)
    "3cls-skewed-pred": ([[2, 2, 0], [0, 2, 2], [0, 0, 4]], Fr(1, 2), 48 / math.sqrt(88 * 96)),
}


def _paper_kappa_mcc(cm):
    k = len(cm)
    c = sum(cm[i][i] for i in range(k))
    s = sum(sum(row) for row in cm)
    t = [sum(cm[i]) for i in range(k)]
    p = [sum(cm[i][j] for i in range(k)) for j in range(k)]
    pt = sum(p[i] * t[i] for i in range(k))
    kappa = Fr(c * s - pt, s * s - pt)
    mcc = (c * s - pt) / math.sqrt((s * s - sum(x * x for x in p)) * (s * s - sum(x * x for x in t)))
    return kappa, mcc


@pytest.mark.parametrize("case", sorted(PAPER_CASES))
def test_paper_kappa_and_mcc(backend, case):
    cm, kappa, mcc = PAPER_CASES[case]
    worked_kappa, worked_mcc = _paper_kappa_mcc(cm)
    assert worked_kappa == kappa and math.isclose(worked_mcc, float(mcc))  # hand arithmetic
    truth, pred = _labels_of_matrix(cm)
    t, p = backend.asarray(truth), backend.asarray(pred)
    assert _close(backend.to_numpy(mg.cohen_kappa_score(t, p)), kappa)
    assert _close(backend.to_numpy(mg.matthews_corrcoef(t, p)), mcc)
    report = mg.label_report(t, p)
    assert _close(report.metrics["cohen_kappa"], kappa)
    assert _close(report.metrics["matthews_corrcoef"], mcc)


def test_paper_mcc_and_kappa_agree_with_sklearn(backend):
    """A second, independent reference for the hand-worked values."""
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    for name, (cm, kappa, mcc) in PAPER_CASES.items():
        truth, pred = _labels_of_matrix(cm)
        assert _close(sklearn_metrics.cohen_kappa_score(truth, pred), kappa, rel=1e-12), name
        assert _close(sklearn_metrics.matthews_corrcoef(truth, pred), mcc, rel=1e-12), name


# Quadratic weighted kappa, worked by hand on the 3 x 3 matrix
# O = [[5, 2, 0], [1, 3, 1], [0, 2, 4]], t = (7, 5, 6), p = (6, 7, 5), s = 18,
# weights (i - j)^2 (the 1/(K-1)^2 normalisation cancels):
#   sum w O = 1*2 + 4*0 + 1*1 + 1*1 + 4*0 + 1*2 = 6
#   sum w t_i p_j = 7*7*1 + 7*5*4 + 5*6*1 + 5*5*1 + 6*6*4 + 6*7*1 = 430
#   E = t p / s, so kappa_q = 1 - 6 / (430/18) = 1 - 108/430 = 161/215
# linear weights |i - j|:
#   sum w O = 6; sum w t_i p_j = 49 + 70 + 30 + 25 + 72 + 42 = 288
#   kappa_l = 1 - 6 / (288/18) = 5/8
QWK_CM = [[5, 2, 0], [1, 3, 1], [0, 2, 4]]


def test_quadratic_weighted_kappa_hand_worked(backend):
    truth, pred = _labels_of_matrix(QWK_CM)
    t, p = backend.asarray(truth), backend.asarray(pred)
    assert _close(backend.to_numpy(mg.cohen_kappa_score(t, p, weights="quadratic")), Fr(161, 215))
    assert _close(backend.to_numpy(mg.cohen_kappa_score(t, p, weights="linear")), Fr(5, 8))
    report = mg.label_report(t, p)
    assert _close(report.metrics["quadratic_weighted_kappa"], Fr(161, 215))
    assert _close(report.metrics["linear_weighted_kappa"], Fr(5, 8))


def _weighted_kappa_by_cells(cm, power):
    """The paper's recipe: O, w, E = outer(t, p) / s, kappa = 1 - sum wO / sum wE."""
    k = len(cm)
    s = sum(sum(row) for row in cm)
    t = [sum(cm[i]) for i in range(k)]
    p = [sum(cm[i][j] for i in range(k)) for j in range(k)]
    observed = sum(abs(i - j) ** power * cm[i][j] for i in range(k) for j in range(k))
    expected = sum(abs(i - j) ** power * Fr(t[i] * p[j], s) for i in range(k) for j in range(k))
    return 1 - observed / expected


@pytest.mark.parametrize(
    "cm",
    [
        [[5, 2, 1], [1, 3, 1], [2, 2, 4]],
        [[10, 0, 0, 3], [2, 5, 1, 0], [0, 4, 6, 1], [1, 0, 2, 9]],
        [[0, 3], [4, 1]],
    ],
    ids=["3cls-corners", "4cls", "2cls-disagree"],
)
@pytest.mark.parametrize("power, weights", [(1, "linear"), (2, "quadratic")],
                         ids=["linear", "quadratic"])
def test_weighted_kappa_cells_recipe(backend, cm, power, weights):
    expected = _weighted_kappa_by_cells(cm, power)
    truth, pred = _labels_of_matrix(cm)
    value = mg.cohen_kappa_score(backend.asarray(truth), backend.asarray(pred), weights=weights)
    assert _close(backend.to_numpy(value), expected)


def test_overview_micro_f1_equals_accuracy(backend):
    """The paper: micro F1 = micro P = micro R = accuracy for single-label data."""
    cm = [[5, 2, 0], [1, 3, 1], [0, 2, 4]]
    truth, pred = _labels_of_matrix(cm)
    t, p = backend.asarray(truth), backend.asarray(pred)
    for average_value in (
        mg.f1_score(t, p, average="micro"),
        mg.precision_score(t, p, average="micro"),
        mg.recall_score(t, p, average="micro"),
        mg.accuracy_score(t, p),
    ):
        assert _close(backend.to_numpy(average_value), Fr(12, 18))
    assert _close(backend.to_numpy(mg.balanced_accuracy_score(t, p)),
                  (Fr(5, 7) + Fr(3, 5) + Fr(4, 6)) / 3)
