"""K = 200,000 classes: every label metric but the dense matrix works from
O(K) per-class statistics, never allocating K * K (docs/conventions.md, "Inputs
and the counts"; docs/gpu.md, "Memory").

NumPy reports its allocations to ``tracemalloc``, so the peak traced memory
of one call bounds what the call allocated on the host. A K x K matrix of
int64 would be 320 GB; the limit here is 200 MiB.

References are independent of the library: scikit-learn's per-class
precision/recall/F (its ``multilabel_confusion_matrix`` path is O(K)), and
hand-written ``np.bincount`` / sample-pair formulas for the metrics whose
scikit-learn implementation needs the dense matrix (MCC, kappa, balanced
accuracy). Calls that must refuse (a dense matrix at this K) run in a
subprocess with a 4 GiB address-space limit, so that a regression fails
instead of exhausting the machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tracemalloc
from fractions import Fraction

import numpy as np
import pytest

import metrics_gpu as mg

sklearn_metrics = pytest.importorskip("sklearn.metrics")

pytestmark = [
    pytest.mark.slow,
    # the sparse data set predicts classes that never occur: scikit-learn's warning
    pytest.mark.filterwarnings("ignore:y_pred contains classes not in y_true:UserWarning"),
]

K = 200_000
PEAK_LIMIT = 200 * 2**20          # bytes; K * K * 8 = 320 GB
DENSE_BYTES = K * K * 8
RTOL = 1e-12


# -- data and independent references ---------------------------------------------


def _all_classes_data():
    """N = 600,000 samples in which every one of the K classes occurs (3 times)."""
    rng = np.random.default_rng(20240611)
    y_true = np.concatenate([rng.permutation(K) for _ in range(3)])
    y_pred = np.where(rng.random(y_true.size) < 0.6, y_true,
                      rng.integers(0, K, y_true.size))
    return y_true, y_pred


def _sparse_classes_data():
    """N = 20,000 samples over 3,000 codes scattered in [0, K), K - 1 included."""
    rng = np.random.default_rng(7)
    codes = np.sort(rng.choice(K - 1, 2999, replace=False))
    codes = np.append(codes, K - 1)
    y_true = codes[rng.integers(0, codes.size, 20_000)]
    near = np.clip(np.searchsorted(codes, y_true) + rng.integers(-2, 3, y_true.size),
                   0, codes.size - 1)
    y_pred = np.where(rng.random(y_true.size) < 0.5, y_true, codes[near])
    return y_true, y_pred


def _pair_disagreement(y_true, y_pred, power):
    """sum_n sum_m |t_n - p_m| ** power over all sample pairs (exact int).

    Expected chance disagreement of weighted kappa is this / N. power 0 means
    the 0/1 (Cohen) weight.
    """
    n = y_true.size
    t = y_true.astype(np.int64)
    p = y_pred.astype(np.int64)
    if power == 0:
        t_counts = np.bincount(t)
        p_counts = np.bincount(p, minlength=t_counts.size)
        t_counts = np.pad(t_counts, (0, p_counts.size - t_counts.size))
        return n * n - int(np.dot(t_counts, p_counts))
    if power == 2:
        return (n * int(np.dot(t, t)) + n * int(np.dot(p, p))
                - 2 * int(t.sum()) * int(p.sum()))
    # power 1: sort the predictions, then every t_n against all p_m at once
    p_sorted = np.sort(p)
    prefix = np.concatenate([[0], np.cumsum(p_sorted)])
    below = np.searchsorted(p_sorted, t, side="left")
    total = int(prefix[-1])
    sum_below = prefix[below]
    per_sample = t * below - sum_below + (total - sum_below) - t * (n - below)
    return int(per_sample.sum())


def _kappa_reference(y_true, y_pred, power):
    """1 - observed / expected disagreement, with class codes as positions."""
    t = y_true.astype(np.int64)
    p = y_pred.astype(np.int64)
    if power == 0:
        observed = int((t != p).sum())
    else:
        observed = int((np.abs(t - p) ** power).sum())
    expected = Fraction(_pair_disagreement(t, p, power), t.size)
    return float(1 - observed / expected)


def _mcc_reference(y_true, y_pred, num_classes):
    tp = int((y_true == y_pred).sum())
    t = np.bincount(y_true, minlength=num_classes)
    p = np.bincount(y_pred, minlength=num_classes)
    s = y_true.size
    cov_tp = tp * s - int(np.dot(t, p))
    cov_pp = s * s - int(np.dot(p, p))
    cov_tt = s * s - int(np.dot(t, t))
    return cov_tp / (cov_pp * cov_tt) ** 0.5


def _class_counts(y_true, y_pred, num_classes):
    hit = y_true == y_pred
    tp = np.bincount(y_true[hit], minlength=num_classes).astype(np.float64)
    support = np.bincount(y_true, minlength=num_classes).astype(np.float64)
    predicted = np.bincount(y_pred, minlength=num_classes).astype(np.float64)
    return tp, support, predicted


def _safe_divide(numerator, denominator):
    out = np.zeros_like(numerator, dtype=np.float64)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out


def _references(y_true, y_pred, num_classes):
    """Every metric's expected value over all ``num_classes`` classes."""
    tp, support, predicted = _class_counts(y_true, y_pred, num_classes)
    n = y_true.size
    p, r, f, s = sklearn_metrics.precision_recall_fscore_support(
        y_true, y_pred, labels=np.arange(num_classes), average=None, zero_division=0)
    has_support = support > 0
    tn = n - support - predicted + tp
    fp = predicted - tp
    accuracy = float(tp.sum() / n)
    return {
        "accuracy": accuracy,
        "balanced_accuracy": float(np.mean(tp[has_support] / support[has_support])),
        "precision": p, "recall": r, "f1": f, "support": s,
        "macro_precision": float(p.mean()),
        "macro_recall": float(r.mean()),
        "macro_f1": float(f.mean()),
        "weighted_precision": float(np.dot(p, s) / s.sum()),
        "weighted_recall": float(np.dot(r, s) / s.sum()),
        "weighted_f1": float(np.dot(f, s) / s.sum()),
        "micro": accuracy,
        "jaccard": _safe_divide(tp, support + predicted - tp),
        "specificity": _safe_divide(tn, tn + fp),
        "matthews_corrcoef": _mcc_reference(y_true, y_pred, num_classes),
        "cohen_kappa": _kappa_reference(y_true, y_pred, 0),
        "linear_weighted_kappa": _kappa_reference(y_true, y_pred, 1),
        "quadratic_weighted_kappa": _kappa_reference(y_true, y_pred, 2),
        "hamming_loss": 1 - accuracy,
        "zero_one_loss": 1 - accuracy,
        "average_accuracy": float(np.mean((tp + tn) / n)),
        "error_rate": float(np.mean((fp + (support - tp)) / n)),
    }


@pytest.fixture(scope="module")
def all_classes():
    y_true, y_pred = _all_classes_data()
    return y_true, y_pred, _references(y_true, y_pred, K)


@pytest.fixture(scope="module")
def sparse_classes():
    y_true, y_pred = _sparse_classes_data()
    return y_true, y_pred, _references(y_true, y_pred, K)


DATASETS = ("all_classes", "sparse_classes")


def _traced(function, *args, **kwargs):
    """Run ``function`` under tracemalloc; return (result, peak bytes)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = function(*args, **kwargs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


def _check_peak(peak, what):
    assert peak < PEAK_LIMIT, (
        f"{what} allocated {peak / 2**20:.1f} MiB at K={K} (limit "
        f"{PEAK_LIMIT / 2**20:.0f} MiB; a dense matrix is {DENSE_BYTES / 1e9:.0f} GB)"
    )


# -- the reference helpers are right (on sizes where brute force works) -------------------


@pytest.mark.parametrize("power", [0, 1, 2], ids=["cohen", "linear", "quadratic"])
def test_pair_disagreement_helper_against_brute_force(power):
    rng = np.random.default_rng(power)
    t = rng.integers(0, 50, 300)
    p = rng.integers(0, 50, 300)
    diff = np.abs(t[:, None] - p[None, :])
    brute = int((diff != 0).sum()) if power == 0 else int((diff ** power).sum())
    assert _pair_disagreement(t, p, power) == brute


@pytest.mark.parametrize("weights, power", [(None, 0), ("linear", 1), ("quadratic", 2)])
def test_kappa_reference_helper_against_sklearn(weights, power):
    rng = np.random.default_rng(3)
    t = rng.integers(0, 30, 2000)
    p = np.where(rng.random(2000) < 0.5, t, rng.integers(0, 30, 2000))
    assert _kappa_reference(t, p, power) == pytest.approx(
        sklearn_metrics.cohen_kappa_score(t, p, weights=weights), rel=1e-12)
    assert _mcc_reference(t, p, 30) == pytest.approx(
        sklearn_metrics.matthews_corrcoef(t, p), rel=1e-12)


# -- scalar metrics ---------------------------------------------------------------------

SCALAR_CASES = {
    "accuracy_score": (lambda t, p: mg.accuracy_score(t, p, num_classes=K), "accuracy"),
    "balanced_accuracy_score": (
        lambda t, p: mg.balanced_accuracy_score(t, p, num_classes=K), "balanced_accuracy"),
    "balanced_accuracy_weighted": (
        lambda t, p: mg.balanced_accuracy_weighted(t, p, num_classes=K), "accuracy"),
    "precision-macro": (lambda t, p: mg.precision_score(
        t, p, average="macro", num_classes=K, zero_division=0), "macro_precision"),
    "recall-macro": (lambda t, p: mg.recall_score(
        t, p, average="macro", num_classes=K, zero_division=0), "macro_recall"),
    "f1-macro": (lambda t, p: mg.f1_score(
        t, p, average="macro", num_classes=K, zero_division=0), "macro_f1"),
    "precision-weighted": (lambda t, p: mg.precision_score(
        t, p, average="weighted", num_classes=K, zero_division=0), "weighted_precision"),
    "recall-weighted": (lambda t, p: mg.recall_score(
        t, p, average="weighted", num_classes=K, zero_division=0), "weighted_recall"),
    "f1-weighted": (lambda t, p: mg.f1_score(
        t, p, average="weighted", num_classes=K, zero_division=0), "weighted_f1"),
    "precision-micro": (lambda t, p: mg.precision_score(
        t, p, average="micro", num_classes=K), "micro"),
    "recall-micro": (lambda t, p: mg.recall_score(t, p, average="micro", num_classes=K), "micro"),
    "f1-micro": (lambda t, p: mg.f1_score(t, p, average="micro", num_classes=K), "micro"),
    "matthews_corrcoef": (lambda t, p: mg.matthews_corrcoef(t, p, num_classes=K),
                          "matthews_corrcoef"),
    "kappa": (lambda t, p: mg.cohen_kappa_score(t, p, num_classes=K), "cohen_kappa"),
    "kappa-linear": (lambda t, p: mg.cohen_kappa_score(t, p, weights="linear", num_classes=K),
                     "linear_weighted_kappa"),
    "kappa-quadratic": (lambda t, p: mg.cohen_kappa_score(
        t, p, weights="quadratic", num_classes=K), "quadratic_weighted_kappa"),
    "hamming_loss": (lambda t, p: mg.hamming_loss(t, p, num_classes=K), "hamming_loss"),
    "zero_one_loss": (lambda t, p: mg.zero_one_loss(t, p, num_classes=K), "zero_one_loss"),
}


# Emulated: the exhaustive tier's (minutes on the emulator; the other tests of
# this file launch every instantiation these do, which the coverage check holds).
@pytest.mark.exhaustive_on_emulated
@pytest.mark.parametrize("case", sorted(SCALAR_CASES))
@pytest.mark.parametrize("dataset", DATASETS)
def test_scalar_metric_huge_k(backend, request, dataset, case):
    y_true, y_pred, reference = request.getfixturevalue(dataset)
    function, key = SCALAR_CASES[case]
    t, p = backend.asarray(y_true), backend.asarray(y_pred)
    value, peak = _traced(function, t, p)
    _check_peak(peak, case)
    assert float(backend.to_numpy(value)) == pytest.approx(reference[key], rel=RTOL, abs=1e-14)


@pytest.mark.parametrize("dataset", DATASETS)
def test_macro_jaccard_and_specificity_huge_k(backend, request, dataset):
    y_true, y_pred, reference = request.getfixturevalue(dataset)
    t, p = backend.asarray(y_true), backend.asarray(y_pred)
    jaccard, peak = _traced(mg.jaccard_score, t, p, average="macro", num_classes=K,
                            zero_division=0)
    _check_peak(peak, "jaccard_score")
    assert float(backend.to_numpy(jaccard)) == pytest.approx(reference["jaccard"].mean(), rel=RTOL)
    specificity, peak = _traced(mg.specificity_score, t, p, average="macro", num_classes=K,
                                zero_division=0)
    _check_peak(peak, "specificity_score")
    assert float(backend.to_numpy(specificity)) == pytest.approx(
        reference["specificity"].mean(), rel=RTOL)


@pytest.mark.parametrize("dataset", DATASETS)
def test_per_class_arrays_huge_k(backend, request, dataset):
    y_true, y_pred, reference = request.getfixturevalue(dataset)
    t, p = backend.asarray(y_true), backend.asarray(y_pred)
    (precision, recall, f1, support), peak = _traced(
        mg.precision_recall_fscore_support, t, p, num_classes=K, zero_division=0)
    _check_peak(peak, "precision_recall_fscore_support")
    for name, got in (("precision", precision), ("recall", recall), ("f1", f1)):
        got = backend.to_numpy(got)
        assert got.shape == (K,), name
        np.testing.assert_allclose(got, reference[name], rtol=RTOL, err_msg=name)
    np.testing.assert_array_equal(backend.to_numpy(support), reference["support"])
    jaccard, peak = _traced(mg.jaccard_score, t, p, average=None, num_classes=K,
                            zero_division=0)
    _check_peak(peak, "jaccard_score(average=None)")
    np.testing.assert_allclose(backend.to_numpy(jaccard), reference["jaccard"], rtol=RTOL)
    specificity, peak = _traced(mg.specificity_score, t, p, average=None, num_classes=K,
                                zero_division=0)
    _check_peak(peak, "specificity_score(average=None)")
    np.testing.assert_allclose(backend.to_numpy(specificity), reference["specificity"],
                               rtol=RTOL)


# -- reports ----------------------------------------------------------------------------


def _report_dict_reference(reference):
    """scikit-learn's ``classification_report(output_dict=True, labels=range(K),
    zero_division=0)`` of the all-classes data set, from the fixture's
    scikit-learn per-class precision, recall, F1 and support: a row per class,
    their mean and support-weighted mean, and the accuracy (every class is
    present, so no micro average). Calling classification_report itself costs
    four more precision_recall_fscore_support passes at this K (about 20 s a
    backend on 2 cores); its rows' layout is compared with ours at small K in
    tests/test_sklearn_parity.py."""
    columns = {"precision": reference["precision"], "recall": reference["recall"],
               "f1-score": reference["f1"], "support": reference["support"]}
    expected = {str(label): {name: column[label] for name, column in columns.items()}
                for label in range(K)}
    support = reference["support"]
    expected["accuracy"] = reference["accuracy"]
    expected["macro avg"] = {name: float(np.mean(column)) for name, column in columns.items()}
    expected["weighted avg"] = {name: float(np.dot(column, support) / support.sum())
                                for name, column in columns.items()}
    expected["macro avg"]["support"] = expected["weighted avg"]["support"] = int(support.sum())
    return expected


# Emulated: the exhaustive tier's (its one kernel instantiation, the counting
# pass of unit weights, is launched by the other huge-K tests; most of its
# time is the report's 200,000 rows built under tracemalloc).
@pytest.mark.exhaustive_on_emulated
def test_classification_report_dict_huge_k(backend, all_classes):
    y_true, y_pred, reference = all_classes
    t, p = backend.asarray(y_true), backend.asarray(y_pred)
    report, peak = _traced(mg.classification_report, t, p, output_dict=True, num_classes=K,
                           zero_division=0)
    _check_peak(peak, "classification_report(output_dict=True)")
    expected = _report_dict_reference(reference)
    assert set(report) == set(expected)
    assert report["accuracy"] == pytest.approx(expected.pop("accuracy"), rel=RTOL)
    keys = sorted(expected)
    columns = ("precision", "recall", "f1-score", "support")
    ours = np.array([[report[key][column] for column in columns] for key in keys])
    theirs = np.array([[expected[key][column] for column in columns] for key in keys])
    for j, column in enumerate(columns):
        np.testing.assert_allclose(ours[:, j], theirs[:, j], rtol=RTOL, atol=1e-15,
                                   err_msg=column)


LABEL_REPORT_KEYS = (
    "accuracy", "balanced_accuracy", "macro_precision", "macro_recall", "macro_f1",
    "weighted_precision", "weighted_recall", "weighted_f1", "matthews_corrcoef",
    "cohen_kappa", "linear_weighted_kappa", "quadratic_weighted_kappa", "hamming_loss",
    "zero_one_loss", "average_accuracy", "error_rate",
)


@pytest.mark.parametrize("dataset", DATASETS)
def test_label_report_huge_k(backend, request, dataset):
    y_true, y_pred, reference = request.getfixturevalue(dataset)
    t, p = backend.asarray(y_true), backend.asarray(y_pred)
    report, peak = _traced(mg.label_report, t, p, num_classes=K)
    _check_peak(peak, "label_report")
    assert report.confusion_matrix is None
    assert report.classes.size == K
    assert report.invalid == 0
    assert report.total == y_true.size
    for key in LABEL_REPORT_KEYS:
        assert report.metrics[key] == pytest.approx(reference[key], rel=RTOL, abs=1e-14), key
    for key in ("micro_precision", "micro_recall", "micro_f1"):
        assert report.metrics[key] == pytest.approx(reference["micro"], rel=RTOL), key
    assert report.metrics["macro_jaccard"] == pytest.approx(reference["jaccard"].mean(), rel=RTOL)
    assert report.metrics["macro_specificity"] == pytest.approx(
        reference["specificity"].mean(), rel=RTOL)
    for key in ("precision", "recall", "f1", "jaccard", "specificity"):
        np.testing.assert_allclose(report.per_class[key], reference[key], rtol=RTOL, err_msg=key)
    np.testing.assert_array_equal(report.per_class["support"], reference["support"])


def test_label_report_inferred_classes_huge_codes(backend, sparse_classes):
    """No num_classes, codes up to K - 1 with most absent: the report covers the
    present classes (positions = rank among them), as scikit-learn on the
    compact label set."""
    y_true, y_pred, _ = sparse_classes
    present, compact = np.unique(np.concatenate([y_true, y_pred]), return_inverse=True)
    ct, cp = compact[:y_true.size], compact[y_true.size:]
    m = present.size
    t, p = backend.asarray(y_true), backend.asarray(y_pred)
    report, peak = _traced(mg.label_report, t, p)
    _check_peak(peak, "label_report (inferred K)")
    np.testing.assert_array_equal(report.classes, present)
    assert report.confusion_matrix is None or report.confusion_matrix.shape == (m, m)
    expected = {
        "accuracy": sklearn_metrics.accuracy_score(ct, cp),
        "balanced_accuracy": sklearn_metrics.balanced_accuracy_score(ct, cp),
        "macro_f1": sklearn_metrics.f1_score(ct, cp, average="macro", zero_division=0),
        "weighted_f1": sklearn_metrics.f1_score(ct, cp, average="weighted", zero_division=0),
        "macro_precision": sklearn_metrics.precision_score(ct, cp, average="macro",
                                                           zero_division=0),
        "matthews_corrcoef": sklearn_metrics.matthews_corrcoef(ct, cp),
        "cohen_kappa": sklearn_metrics.cohen_kappa_score(ct, cp),
        "linear_weighted_kappa": sklearn_metrics.cohen_kappa_score(ct, cp, weights="linear"),
        "quadratic_weighted_kappa": sklearn_metrics.cohen_kappa_score(ct, cp,
                                                                      weights="quadratic"),
    }
    for key, value in expected.items():
        assert report.metrics[key] == pytest.approx(value, rel=RTOL), key


def test_inferred_k_all_classes_present(backend, all_classes):
    """No num_classes: K = max + 1 = 200,000 inferred from the data, every class
    present, so the values are those over all K classes."""
    y_true, y_pred, reference = all_classes
    t, p = backend.asarray(y_true), backend.asarray(y_pred)
    report, peak = _traced(mg.label_report, t, p)
    _check_peak(peak, "label_report (inferred K)")
    assert report.classes.size == K
    for key in LABEL_REPORT_KEYS:
        assert report.metrics[key] == pytest.approx(reference[key], rel=RTOL, abs=1e-14), key
    value, peak = _traced(mg.cohen_kappa_score, t, p, weights="quadratic")
    _check_peak(peak, "cohen_kappa_score (inferred K)")
    assert float(backend.to_numpy(value)) == pytest.approx(
        reference["quadratic_weighted_kappa"], rel=RTOL)
    value, peak = _traced(mg.f1_score, t, p, average="macro", zero_division=0)
    _check_peak(peak, "f1_score (inferred K)")
    assert float(backend.to_numpy(value)) == pytest.approx(reference["macro_f1"], rel=RTOL)


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_kappa_inferred_classes_huge_codes(backend, sparse_classes, weights):
    """cohen_kappa_score without num_classes: positions are ranks of present codes."""
    y_true, y_pred, _ = sparse_classes
    _, compact = np.unique(np.concatenate([y_true, y_pred]), return_inverse=True)
    ct, cp = compact[:y_true.size], compact[y_true.size:]
    value, peak = _traced(mg.cohen_kappa_score, backend.asarray(y_true),
                          backend.asarray(y_pred), weights=weights)
    _check_peak(peak, f"cohen_kappa_score(weights={weights})")
    assert float(backend.to_numpy(value)) == pytest.approx(
        sklearn_metrics.cohen_kappa_score(ct, cp, weights=weights), rel=RTOL)


def test_weighted_samples_huge_k(backend, all_classes):
    y_true, y_pred, _ = all_classes
    rng = np.random.default_rng(11)
    w = rng.random(y_true.size)
    t, p, bw = backend.asarray(y_true), backend.asarray(y_pred), backend.asarray(w)
    value, peak = _traced(mg.f1_score, t, p, average="weighted", num_classes=K,
                          sample_weight=bw, zero_division=0)
    _check_peak(peak, "weighted f1_score")
    assert float(backend.to_numpy(value)) == pytest.approx(sklearn_metrics.f1_score(
        y_true, y_pred, average="weighted", labels=np.arange(K), sample_weight=w,
        zero_division=0), rel=1e-10)
    value, peak = _traced(mg.accuracy_score, t, p, num_classes=K, sample_weight=bw)
    _check_peak(peak, "weighted accuracy_score")
    assert float(backend.to_numpy(value)) == pytest.approx(
        sklearn_metrics.accuracy_score(y_true, y_pred, sample_weight=w), rel=1e-12)


# -- the dense matrix is refused, with advice -------------------------------------------


def test_confusion_matrix_subset_of_labels_huge_k(backend, sparse_classes):
    y_true, y_pred, _ = sparse_classes
    labels = [int(y_true[0]), int(y_true[1]), K - 1]
    labels = list(dict.fromkeys(labels))
    cm, peak = _traced(mg.confusion_matrix, backend.asarray(y_true), backend.asarray(y_pred),
                       num_classes=K, labels=labels)
    _check_peak(peak, "confusion_matrix(labels=...)")
    np.testing.assert_array_equal(backend.to_numpy(cm),
                                  sklearn_metrics.confusion_matrix(y_true, y_pred, labels=labels))


_REFUSAL_SCRIPT = textwrap.dedent("""
    import resource, sys
    limit = 4 * 2**30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import numpy as np
    import metrics_gpu as mg
    K = {K}
    y = np.arange(0, K, 997)
    call = {call}
    try:
        call()
    except ValueError as error:
        message = str(error)
        print("VALUEERROR", message)
        sys.exit(0)
    except MemoryError as error:
        print("MEMORYERROR", error)
        sys.exit(3)
    print("NO ERROR")
    sys.exit(4)
""")


@pytest.mark.parametrize(
    "call",
    [
        "lambda: mg.confusion_matrix(y, y, num_classes=K)",
        "lambda: mg.confusion_matrix(np.arange(K), np.arange(K)[::-1])",
        "lambda: mg.confusion_matrix(y, y, num_classes=K, normalize='true')",
        "lambda: mg.multiclass_quality_metrics(y, y, num_classes=K)",
    ],
    ids=["given-K", "inferred-K", "normalized", "onedal-multiclass"],
)
def test_dense_matrix_refused_huge_k(call):
    """The K x K matrix is refused with a clear ValueError, before allocating
    (run under a 4 GiB address-space limit)."""
    script = _REFUSAL_SCRIPT.format(K=K, call=call)
    # CUDA cannot start under that limit: a forced cuda backend (a GPU run of the suite)
    # is left out, and the host inputs go to the numpy backend as by default.
    env = {k: v for k, v in os.environ.items()
           if not (k == "METRICS_GPU_BACKEND" and v == "cuda")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          timeout=120)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"expected a ValueError, got: {output.strip()[-600:]}"
    assert "VALUEERROR" in output
    assert "200000" in output.replace(",", ""), f"the message should name K: {output}"


def test_confusion_matrix_refusal_allocates_nothing(backend):
    """In process as well: the refusal happens before any large allocation."""
    y = np.arange(0, K, 997)
    t, p = backend.asarray(y), backend.asarray(y)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"200,?000 x 200,?000"):
            mg.confusion_matrix(t, p, num_classes=K)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    _check_peak(peak, "refused confusion_matrix")
