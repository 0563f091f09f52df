"""Issue 13, defects 1, 7, 9 and 10: score inputs with ``labels=`` and
``ignore_index``, float16 precision, errors that name the argument, and the
command line on broken files.

References are scikit-learn 1.9 on the same data (the kept rows for
``ignore_index``) or hand-worked values.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
from sklearn import metrics as skm

import metrics_gpu as mg
from metrics_gpu.cli import main

# -- defect 1: labels= and ignore_index in the score functions ------------------------------

LABELS = np.array([1, 4, 7])


def _score_case(n: int = 12, seed: int = 0):
    rng = np.random.default_rng(seed)
    # Every class present, so that scikit-learn's and our columns agree.
    positions = np.concatenate([np.arange(3), rng.integers(0, 3, n - 3)])
    proba = rng.dirichlet(np.ones(3), n)
    decision = rng.normal(size=(n, 3))
    return positions, proba, decision


# name -> (ours, scikit-learn's, kind of scores); both take (y_true, scores, labels, **options)
SCORE_FUNCTIONS = {
    "log_loss": (
        lambda t, s, labels, **kw: mg.log_loss(t, s, labels=labels, **kw),
        lambda t, s, labels, **kw: skm.log_loss(t, s, labels=labels, **kw), "proba"),
    "brier_score_loss": (
        lambda t, s, labels, **kw: mg.brier_score_loss(t, s, labels=labels, **kw),
        lambda t, s, labels, **kw: skm.brier_score_loss(t, s, labels=labels, **kw), "proba"),
    "hinge_loss": (
        lambda t, s, labels, **kw: mg.hinge_loss(t, s, labels=labels, **kw),
        lambda t, s, labels, **kw: skm.hinge_loss(t, s, labels=labels, **kw), "decision"),
    "top_k_accuracy_score": (
        lambda t, s, labels, **kw: mg.top_k_accuracy_score(t, s, k=2, labels=labels, **kw),
        lambda t, s, labels, **kw: skm.top_k_accuracy_score(t, s, k=2, labels=labels,
                                                           **kw), "decision"),
}

# What ignore_index is, against labels=[1, 4, 7] (columns 0, 1, 2) and against no labels
# (classes = columns 0, 1, 2).
IGNORE_CASES = {
    "none": (None, None),
    "column-position": (2, 2),      # with labels: class 7's column, not a code
    "code-and-column": (1, 1),      # with labels: a code, and class 4's column
    "code-in-labels": (7, 0),       # without labels: a class code is its column
    "code-not-in-labels": (5, 5),
    "negative": (-100, -100),
    "negative-small": (-1, -1),
    "large": (10**12, 10**12),
}


def _targets(positions, labels, ignore_index, every: int = 4):
    """Class codes of ``positions``, with every ``every``-th row's target set to ignore_index."""
    y_true = (positions if labels is None else labels[positions]).astype(np.int64)
    if ignore_index is not None:
        y_true = y_true.copy()
        y_true[1::every] = ignore_index
    return y_true


@pytest.mark.parametrize("ignore_case", list(IGNORE_CASES))
@pytest.mark.parametrize("with_labels", [True, False], ids=["labels", "no-labels"])
@pytest.mark.parametrize("function", list(SCORE_FUNCTIONS))
def test_ignore_index_drops_rows_by_target(backend, function, with_labels, ignore_case):
    ours, reference, kind = SCORE_FUNCTIONS[function]
    labels = LABELS if with_labels else None
    ignore_index = IGNORE_CASES[ignore_case][0 if with_labels else 1]
    positions, proba, decision = _score_case()
    scores = proba if kind == "proba" else decision
    y_true = _targets(positions, labels, ignore_index)
    kept = np.ones(y_true.size, bool) if ignore_index is None else y_true != ignore_index
    # The columns' classes are given to scikit-learn: an ignored code in labels leaves
    # its class without rows.
    expected = reference(y_true[kept], scores[kept], LABELS if with_labels else np.arange(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # rows of float64 noise: not the point
        got = ours(backend.asarray(y_true), backend.asarray(scores), labels,
                   ignore_index=ignore_index)
    np.testing.assert_allclose(float(backend.to_numpy(got)), expected, rtol=1e-12,
                               err_msg=f"{function}, ignore_index={ignore_index}")


@pytest.mark.parametrize("function", list(SCORE_FUNCTIONS))
def test_ignore_index_weighted_with_labels(backend, function):
    """Weights of ignored rows count nowhere, whatever column the ignored code names."""
    ours, reference, kind = SCORE_FUNCTIONS[function]
    positions, proba, decision = _score_case(16, seed=1)
    scores = proba if kind == "proba" else decision
    y_true = _targets(positions, LABELS, 0)   # 0: a column position, not a code
    weight = np.random.default_rng(2).uniform(0.5, 2.0, y_true.size)
    kept = y_true != 0
    expected = reference(y_true[kept], scores[kept], LABELS, sample_weight=weight[kept])
    got = ours(backend.asarray(y_true), backend.asarray(scores), LABELS,
               sample_weight=backend.asarray(weight), ignore_index=0)
    np.testing.assert_allclose(float(backend.to_numpy(got)), expected, rtol=1e-12)


def test_issue_example_log_loss_labels_3_7_ignore_0(backend):
    """The issue's case: labels=[3, 7], ignore_index=0 dropped class 3's rows."""
    y_true = np.array([3, 7, 0, 7, 3, 0])
    proba = np.array([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5], [0.6, 0.4], [0.7, 0.3], [0.1, 0.9]])
    kept = y_true != 0
    expected = skm.log_loss(y_true[kept], proba[kept], labels=[3, 7])
    got = mg.log_loss(backend.asarray(y_true), backend.asarray(proba), labels=[3, 7],
                      ignore_index=0)
    np.testing.assert_allclose(float(backend.to_numpy(got)), expected, rtol=1e-12)


@pytest.mark.parametrize("ignore_index", [5, -5, 2**40])
def test_ignore_index_outside_the_lookup_is_no_index_error(backend, ignore_index):
    y_true = np.array([0, 1, ignore_index, 1, 0])
    proba = np.array([[0.8, 0.2], [0.3, 0.7], [0.5, 0.5], [0.4, 0.6], [0.6, 0.4]])
    kept = y_true != ignore_index
    got = mg.log_loss(backend.asarray(y_true), backend.asarray(proba), labels=[0, 1],
                      ignore_index=ignore_index)
    np.testing.assert_allclose(float(backend.to_numpy(got)),
                               skm.log_loss(y_true[kept], proba[kept], labels=[0, 1]),
                               rtol=1e-12)


def test_code_not_in_labels_still_refused_with_ignore_index(backend):
    """Only the ignored code is skipped: another unknown code is still an error."""
    y_true = np.array([3, 7, 0, 5])
    proba = np.full((4, 2), 0.5)
    with pytest.raises(ValueError, match=r"y_true contains 5 at index 3.*not in labels"):
        mg.log_loss(backend.asarray(y_true), backend.asarray(proba), labels=[3, 7],
                    ignore_index=0)


def test_unchecked_labels_skip_ignored_rows_and_leave_out_unknown_codes(backend):
    """validate=False: the ignored rows are skipped, a code not in labels is left out
    (counted invalid), and neither is read as a column."""
    positions, proba, _ = _score_case(16, seed=3)
    y_true = _targets(positions, LABELS, 2)     # 2: class 7's column, not a code
    y_true[6] = 5                               # not in labels
    counted = (y_true != 2) & (y_true != 5)
    expected = skm.log_loss(y_true[counted], proba[counted], labels=LABELS)
    got = mg.log_loss(backend.asarray(y_true), backend.asarray(proba), labels=LABELS,
                      ignore_index=2, validate=False)
    np.testing.assert_allclose(float(backend.to_numpy(got)), expected, rtol=1e-12)


@pytest.mark.parametrize("with_labels", [True, False], ids=["labels", "no-labels"])
def test_every_row_ignored_is_nan_as_the_label_functions(backend, with_labels):
    """No counted sample: NaN, as accuracy_score with every target ignored."""
    y_true = np.array([7, 7, 7]) if with_labels else np.array([1, 1, 1])
    labels = LABELS if with_labels else None
    ignore = int(y_true[0])
    proba = np.full((3, 3), 1 / 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # 0 / 0
        got = mg.log_loss(backend.asarray(y_true), backend.asarray(proba), labels=labels,
                          ignore_index=ignore)
        accuracy = mg.accuracy_score(backend.asarray(y_true), backend.asarray(proba),
                                     ignore_index=ignore)
    assert math.isnan(float(backend.to_numpy(got)))
    assert math.isnan(float(backend.to_numpy(accuracy)))


# -- defect 7: float16 probabilities ---------------------------------------------------------


def test_log_loss_float16_clips_with_float16_eps(backend):
    """scikit-learn 1.9 clips float16 probabilities at float16's eps (the issue's case)."""
    proba = np.array([[1, 0], [0, 1], [1, 0], [0.5, 0.5]], dtype=np.float16)
    y_true = np.array([0, 1, 1, 0])
    eps = float(np.finfo(np.float16).eps)
    # By hand, in float64: two rows of -log(1 - eps), one of -log(eps), one of log 2.
    expected = (-2 * math.log1p(-eps) - math.log(eps) + math.log(2)) / 4
    got = float(backend.to_numpy(mg.log_loss(backend.asarray(y_true), backend.asarray(proba))))
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    # scikit-learn computes in float16 itself: equal within float16's rounding.
    np.testing.assert_allclose(got, skm.log_loss(y_true, proba), rtol=2 * eps)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_log_loss_clip_follows_each_float_type(backend, dtype):
    proba = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [0.2, 0.3, 0.5]], dtype=dtype)
    y_true = np.array([1, 0, 2, 2])
    eps = float(np.finfo(dtype).eps)
    clipped = np.clip(proba.astype(np.float64), eps, 1 - eps)
    expected = -np.log(clipped[np.arange(4), y_true]).mean()
    got = float(backend.to_numpy(mg.log_loss(backend.asarray(y_true), backend.asarray(proba))))
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def _float16_rows(n: int, k: int, seed: int = 0):
    """Probabilities rounded to float16: their float64 row sums miss 1 by up to ~K eps / 2."""
    rng = np.random.default_rng(seed)
    y_true = np.concatenate([np.arange(k), rng.integers(0, k, n - k)])
    proba = rng.dirichlet(np.ones(k), n).astype(np.float16)
    return y_true, proba


def test_roc_auc_ovr_accepts_float16_rows_rounded_from_one(backend):
    y_true, proba = _float16_rows(200, 3)
    sums = proba.astype(np.float64).sum(axis=1)
    assert np.abs(sums - 1).max() > 1e-4, "the case must hold rows off by float16 rounding"
    got = mg.roc_auc_score(backend.asarray(y_true), backend.asarray(proba), multi_class="ovr")
    # Independent reference: the mean of the classes' one-vs-rest binary AUCs.
    expected = np.mean([skm.roc_auc_score(y_true == k, proba[:, k].astype(np.float64))
                        for k in range(3)])
    np.testing.assert_allclose(float(backend.to_numpy(got)), expected, rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_roc_auc_ovr_still_refuses_rows_that_are_not_probabilities(backend, dtype):
    y_true = np.arange(20) % 3
    proba = np.tile(np.array([0.5, 0.25, 0.25], dtype=dtype), (20, 1))  # exact sums of 1
    proba[5] = np.array([0.5, 0.3, 0.3], dtype=dtype)   # sums to 1.1
    with pytest.raises(ValueError, match=r"row 5 of y_score sums to 1\.(09|1)"):
        mg.roc_auc_score(backend.asarray(y_true), backend.asarray(proba), multi_class="ovr")


def test_roc_auc_ovr_float64_tolerance_unchanged(backend):
    """float64 keeps scikit-learn's np.allclose tolerance: 1 + 1e-4 is refused."""
    y_true = np.array([0, 1, 2, 0, 1, 2])
    proba = np.full((6, 3), 1 / 3)
    proba[2, 0] += 1e-4
    with pytest.raises(ValueError, match=r"row 2 of y_score"):
        mg.roc_auc_score(backend.asarray(y_true), backend.asarray(proba), multi_class="ovr")


# -- defect 9: errors that name the argument and say what to do ------------------------------

Y5 = np.array([0, 1, 2, 2, 1])
P5 = np.random.default_rng(5).dirichlet(np.ones(3), 5)


@pytest.mark.parametrize(
    "call, pattern",
    [
        (lambda b: mg.top_k_accuracy_score(b.asarray(Y5), b.asarray(P5), k=2.5),
         r"^k must be a positive integer, got 2\.5$"),
        (lambda b: mg.top_k_accuracy_score(b.asarray(Y5), b.asarray(P5), k=None),
         r"^k must be a positive integer, got None$"),
        (lambda b: mg.top_k_accuracy_score(b.asarray(Y5), b.asarray(P5), k=(1, 2)),
         r"^k must be a positive integer, got \(1, 2\)$"),
        (lambda b: mg.logits_report(b.asarray(Y5), b.asarray(P5), top_k=2.5),
         r"^top_k must be a positive integer or a sequence of them, got 2\.5$"),
        (lambda b: mg.logits_report(b.asarray(Y5), b.asarray(P5), top_k="5"),
         r"^top_k must be a positive integer or a sequence of them, got '5'$"),
    ],
    ids=["k=2.5", "k=None", "k=tuple", "top_k=2.5", "top_k=str"],
)
def test_k_and_top_k_are_named(backend, call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call(backend)


def test_top_k_sequences_still_accepted(backend):
    report = mg.logits_report(backend.asarray(Y5), backend.asarray(P5), from_logits=False,
                              top_k=np.array([1, 2]))
    assert sorted(report.top_k_accuracy) == [1, 2]


NO_COLUMNS = {
    "log_loss": (lambda t, s: mg.log_loss(t, s), "y_proba"),
    "brier_score_loss": (lambda t, s: mg.brier_score_loss(t, s), "y_proba"),
    "hinge_loss": (lambda t, s: mg.hinge_loss(t, s), "pred_decision"),
    "top_k_accuracy_score": (lambda t, s: mg.top_k_accuracy_score(t, s), "y_score"),
    "expected_calibration_error": (lambda t, s: mg.expected_calibration_error(t, s),
                                   "y_proba"),
    "logits_report": (lambda t, s: mg.logits_report(t, s), "scores"),
}


@pytest.mark.parametrize("function", list(NO_COLUMNS))
def test_scores_without_columns_are_named(backend, function):
    call, name = NO_COLUMNS[function]
    with pytest.raises(ValueError, match=rf"^{name} has no score columns \(shape \(5, 0\)\); "
                                         r"scores need at least one column"):
        call(backend.asarray(Y5), backend.asarray(np.zeros((5, 0))))


@pytest.mark.parametrize("spec", ["MultiClass", "Accuracy", "TotalF1:average=Macro",
                                  "AUC:type=Mu", "AUC:type=OneVsAll"])
def test_catboost_nan_in_approx_names_approx(backend, spec):
    approx = np.random.default_rng(0).normal(size=(5, 3))
    approx[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"^approx must hold finite scores; found nan at "
                                         r"row 3, column 1"):
        mg.catboost_metric(spec, backend.asarray(Y5), backend.asarray(approx))


LABEL_FUNCTIONS = {
    "accuracy_score": lambda t, p, k: mg.accuracy_score(t, p, num_classes=k),
    "f1_score": lambda t, p, k: mg.f1_score(t, p, num_classes=k, average="macro"),
    "matthews_corrcoef": lambda t, p, k: mg.matthews_corrcoef(t, p, num_classes=k),
    "cohen_kappa_score": lambda t, p, k: mg.cohen_kappa_score(t, p, num_classes=k),
    "classification_report": lambda t, p, k: mg.classification_report(t, p, num_classes=k),
    "label_report": lambda t, p, k: mg.label_report(t, p, num_classes=k),
    "confusion_matrix": lambda t, p, k: mg.confusion_matrix(t, p, num_classes=k),
    "multiclass_quality_metrics": lambda t, p, k: mg.multiclass_quality_metrics(
        t, p, num_classes=k),
}


@pytest.mark.parametrize("num_classes", [10**15, 2**64, 2**40], ids=["1e15", "2**64", "2**40"])
@pytest.mark.parametrize("function", list(LABEL_FUNCTIONS))
def test_num_classes_beyond_memory_says_what_it_needs(function, num_classes):
    """Refused before any allocation (numpy backend: the check is shared, not per backend)."""
    with pytest.raises(ValueError, match=rf"^num_classes={num_classes} needs per-class "
                                         r"statistics .*\((\d|\.)+ (TiB|PiB|EiB)\), more than "
                                         r"the 8\.0 GiB"):
        LABEL_FUNCTIONS[function](Y5, Y5, num_classes)


def test_confusion_matrix_beyond_memory_says_what_it_needs():
    with pytest.raises(ValueError, match=r"^a confusion matrix of 50000 x 50000 classes needs "
                                         r"2,500,000,000 cells \(18\.6 GiB\).*labels="):
        mg.confusion_matrix(Y5, Y5, num_classes=50_000)


def test_large_num_classes_within_memory_still_works():
    value = mg.accuracy_score(Y5, Y5, num_classes=3_000_000)
    assert float(value) == 1.0


@pytest.mark.parametrize("where", ["y_true", "y_pred"])
@pytest.mark.parametrize("values", ["probabilities", "logits"])
def test_scores_passed_as_labels_get_no_encode_labels_advice(backend, where, values):
    scores = P5[:, 0] if values == "probabilities" else np.array([1.3, -0.2, 2.1, 0.5, -1.7])
    args = (scores, Y5) if where == "y_true" else (Y5, scores)
    with pytest.raises(ValueError) as error:
        mg.accuracy_score(*(backend.asarray(a) for a in args))
    message = str(error.value)
    assert message.startswith(f"{where} must hold integer class codes; found ")
    assert "looks like a score or probability" in message
    assert "encode_labels" not in message
    if where == "y_pred":
        assert "(N, K) scores" in message and "argmax" in message


def test_huge_integral_float_labels_keep_encode_labels_advice(backend):
    with pytest.raises(ValueError, match=r"y_true.*1e\+20.*index 1.*encode_labels"):
        mg.accuracy_score(backend.asarray(np.array([0.0, 1e20])), backend.asarray([0, 1]))


@pytest.mark.parametrize("padding", [-100, -1])
@pytest.mark.parametrize("function", ["accuracy_score", "log_loss", "log_loss-labels"])
def test_negative_targets_point_at_ignore_index(backend, function, padding):
    y_true = Y5.copy()
    y_true[2] = padding
    t = backend.asarray(y_true)
    with pytest.raises(ValueError) as error:
        if function == "accuracy_score":
            mg.accuracy_score(t, backend.asarray(Y5))
        elif function == "log_loss":
            mg.log_loss(t, backend.asarray(P5))
        else:
            mg.log_loss(t, backend.asarray(P5), labels=[0, 1, 2])
    message = str(error.value)
    named = "" if function == "log_loss-labels" else "the negative label "
    assert message.startswith(f"y_true contains {named}{padding} at index 2")
    assert f"pass ignore_index={padding}" in message


def test_negative_predictions_say_ignore_index_is_by_target(backend):
    y_pred = Y5.copy()
    y_pred[2] = -100
    with pytest.raises(ValueError, match=r"^y_pred contains the negative label -100 at index 2;"
                                         r".*ignore_index leaves out samples by their y_true"):
        mg.accuracy_score(backend.asarray(Y5), backend.asarray(y_pred))


LOGITS = np.log(P5) * 3


@pytest.mark.parametrize("function", ["log_loss", "expected_calibration_error",
                                      "logits_report"])
def test_logits_as_probabilities_suggest_from_logits(backend, function):
    name = "scores" if function == "logits_report" else "y_proba"
    options = {"from_logits": False} if function == "logits_report" else {}
    with pytest.raises(ValueError, match=rf"^{name} must hold probabilities in \[0, 1\]; found "
                                         r".*; for logits \(raw scores\), pass from_logits=True$"):
        getattr(mg, function)(backend.asarray(Y5), backend.asarray(LOGITS), **options)


def test_brier_has_no_from_logits_to_suggest(backend):
    with pytest.raises(ValueError, match=r"^y_proba must hold probabilities") as error:
        mg.brier_score_loss(backend.asarray(Y5), backend.asarray(LOGITS))
    assert "from_logits" not in str(error.value)


@pytest.mark.parametrize("function, alternative", [
    ("roc_curve", r"roc_auc_score\(y_true, y_score, multi_class='ovr'\)"),
    ("precision_recall_curve", r"average_precision_score\(y_true, y_score, average='macro'\)"),
])
def test_binary_curves_name_multiclass_y_true(backend, function, alternative):
    y_true = np.arange(10) % 5
    scores = np.random.default_rng(0).dirichlet(np.ones(5), 10)
    with pytest.raises(ValueError, match=rf"^y_true has 5 classes \[0, 1, 2, 3, 4\], but "
                                         rf"{function} is a binary metric: pass pos_label.*"
                                         rf"{alternative}"):
        getattr(mg, function)(backend.asarray(y_true), backend.asarray(scores))


def test_binary_curve_of_two_column_scores_keeps_its_message(backend):
    with pytest.raises(ValueError, match=r"roc_curve needs 1-D y_score for binary y_true"):
        mg.roc_curve(backend.asarray(np.array([0, 1, 1, 0])),
                     backend.asarray(np.full((4, 2), 0.5)))


# -- defect 10: the command line on broken files ----------------------------------------------


@pytest.fixture
def label_files(tmp_path):
    y_true = np.arange(40) % 4
    true_path = tmp_path / "t.npy"
    np.save(true_path, y_true)
    data = true_path.read_bytes()
    files = {
        "empty": b"",
        "truncated-data": data[:-8],       # header intact, the last sample cut
        "truncated-header": data[:40],
        "not-npy": b"y_true,y_pred\n0,1\n",
    }
    paths = {}
    for name, content in files.items():
        paths[name] = tmp_path / f"{name}.npy"
        paths[name].write_bytes(content)
    paths["missing"] = tmp_path / "missing.npy"
    np.save(tmp_path / "no-values.npy", np.zeros(0, dtype=np.int64))
    paths["no-values"] = tmp_path / "no-values.npy"
    return true_path, paths


FILE_PROBLEMS = {
    "empty": r".*empty\.npy: the file is empty",
    "truncated-data": r".*truncated-data\.npy: the file is truncated",
    "truncated-header": r".*truncated-header\.npy: the file is truncated",
    "not-npy": r".*not-npy\.npy: not a \.npy file",
    "missing": r".*missing\.npy: no such file",
    "no-values": r".*no-values\.npy: holds no values",
}


@pytest.mark.parametrize("problem", list(FILE_PROBLEMS))
@pytest.mark.parametrize("argument", ["--y-true", "--y-pred"])
def test_report_file_problem_is_one_line_exit_2(label_files, capsys, problem, argument):
    good, paths = label_files
    files = {"--y-true": good, "--y-pred": good, argument: paths[problem]}
    status = main(["report", "--y-true", str(files["--y-true"]),
                   "--y-pred", str(files["--y-pred"])])
    err = capsys.readouterr().err
    assert status == 2
    assert err.count("\n") == 1, err
    assert re.search(rf"^metrics-gpu: error: {argument} {FILE_PROBLEMS[problem]}", err)


def test_report_out_of_memory_while_computing_is_one_line(label_files, capsys, monkeypatch):
    good, _ = label_files

    def no_memory(*args, **kwargs):
        raise MemoryError()

    monkeypatch.setattr("metrics_gpu.cli.report_files", no_memory)
    assert main(["report", "--y-true", str(good), "--y-pred", str(good)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("metrics-gpu: error: not enough memory for the report") and \
        err.count("\n") == 1


def test_report_truncated_file_in_a_subprocess_has_no_traceback(label_files):
    good, paths = label_files
    done = subprocess.run(
        [sys.executable, "-m", "metrics_gpu.cli", "report", "--y-true", str(good),
         "--y-pred", str(paths["empty"])],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"metrics-gpu: error: --y-pred {paths['empty']}: the file is empty"]
