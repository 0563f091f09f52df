"""Silent wrong answers of the kernel paths, and the classes of input behind them.

Each test names the defect class it guards: byte order on the kernel
backends, integer weights past 2**63, classes carried only by weights that
round to 0 in fixed point, run-to-run determinism of the calibration bins,
and the calibration bin edges. References: scikit-learn, Python integers,
and the rule the docstrings state.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import sklearn.metrics as skm

import metrics_gpu as mg
from metrics_gpu.backends.numpy_backend import NUMPY_BACKEND, calibration_bin

# -- byte order ---------------------------------------------------------------

LABEL_ORDERS = (">i4", ">i8", ">u2")
FLOAT_ORDERS = (">f4", ">f8")


def _big_endian(array, dtype):
    return np.asarray(array).astype(np.dtype(dtype))


def _labels_and_scores(rng, n=300, k=4):
    y_true = rng.integers(0, k, n)
    scores = rng.dirichlet(np.ones(k), n)
    y_pred = np.where(rng.random(n) < 0.6, y_true, rng.integers(0, k, n))
    weight = rng.random(n) + 0.1
    return y_true, y_pred, scores, weight


@pytest.mark.parametrize("label_dtype", LABEL_ORDERS)
def test_big_endian_labels_and_weights_read_as_their_values(backend, rng, label_dtype):
    y_true, y_pred, _, weight = _labels_and_scores(rng)
    t = backend.asarray(_big_endian(y_true, label_dtype))
    p = backend.asarray(_big_endian(y_pred, label_dtype))
    for weight_dtype in (None, ">f8", ">f4", ">i8"):
        w = None if weight_dtype is None else _big_endian(
            weight if weight_dtype[1] == "f" else np.round(weight * 10), weight_dtype)
        native_w = None if w is None else w.astype(w.dtype.newbyteorder("="))
        expected = skm.accuracy_score(y_true, y_pred, sample_weight=native_w)
        got = mg.accuracy_score(t, p, sample_weight=None if w is None else backend.asarray(w))
        assert float(backend.to_numpy(got)) == pytest.approx(expected, rel=1e-12), weight_dtype
        matrix = backend.to_numpy(mg.confusion_matrix(
            t, p, sample_weight=None if w is None else backend.asarray(w)))
        np.testing.assert_allclose(
            matrix, skm.confusion_matrix(y_true, y_pred, sample_weight=native_w), rtol=1e-12)
    report = mg.label_report(t, p)
    assert float(report.metrics["matthews_corrcoef"]) == pytest.approx(
        skm.matthews_corrcoef(y_true, y_pred), rel=1e-12)


@pytest.mark.parametrize("score_dtype", FLOAT_ORDERS)
def test_big_endian_scores_read_as_their_values(backend, rng, score_dtype):
    y_true, _, scores, weight = _labels_and_scores(rng)
    z = backend.asarray(_big_endian(scores, score_dtype))
    t = backend.asarray(_big_endian(y_true, ">i4"))
    w = backend.asarray(_big_endian(weight, ">f8"))
    native = scores.astype(np.dtype(score_dtype).newbyteorder("="))
    expected_loss = skm.log_loss(y_true, native, sample_weight=weight)
    assert float(backend.to_numpy(mg.log_loss(t, z, sample_weight=w))) == pytest.approx(
        expected_loss, rel=1e-5)
    assert float(backend.to_numpy(mg.accuracy_score(t, z))) == pytest.approx(
        skm.accuracy_score(y_true, native.argmax(axis=1)))
    ece = float(backend.to_numpy(mg.expected_calibration_error(t, z)))
    with mg.use_backend("numpy"):
        assert ece == pytest.approx(float(mg.expected_calibration_error(y_true, native)),
                                    rel=1e-9)
    binary = y_true % 2
    assert float(backend.to_numpy(mg.roc_auc_score(
        backend.asarray(_big_endian(binary, ">i8")),
        backend.asarray(_big_endian(scores[:, 1], score_dtype)),
        sample_weight=w))) == pytest.approx(
        skm.roc_auc_score(binary, native[:, 1], sample_weight=weight), rel=1e-9)
    assert float(backend.to_numpy(mg.average_precision_score(
        backend.asarray(_big_endian(binary, ">u2")),
        backend.asarray(_big_endian(scores[:, 1], score_dtype))))) == \
        pytest.approx(skm.average_precision_score(binary, native[:, 1]), rel=1e-9)


def test_kernel_primitives_convert_big_endian_arrays(case, rng):
    """Every way into the kernels, not only the validated one, reads values."""
    y_true, y_pred, scores, weight = _labels_and_scores(rng)
    t, p = case.put(_big_endian(y_true, ">i8")), case.put(_big_endian(y_pred, ">i8"))
    w = case.put(_big_endian(weight, ">f8"))
    expected, _, _ = NUMPY_BACKEND.accumulate_confusion(y_true, y_pred, num_classes=4,
                                                        sample_weight=weight)
    matrix, _, _ = case.impl.accumulate_confusion(t, p, num_classes=4, sample_weight=w)
    np.testing.assert_allclose(case.get(matrix), expected, rtol=1e-12)
    stats = case.impl.class_statistics(t, p, num_classes=4)
    np.testing.assert_array_equal(case.get(stats.support), np.bincount(y_true, minlength=4))
    sums = case.impl.fused_logits_pass(t, case.put(_big_endian(scores, ">f4")), n_bins=3)
    reference = NUMPY_BACKEND.fused_logits_pass(y_true, scores.astype(np.float32), n_bins=3)
    np.testing.assert_allclose(case.get(sums.buffer), reference.buffer, rtol=1e-5, atol=1e-9)
    areas = case.impl.binary_rank_areas(case.put(_big_endian(scores[:, 0], ">f8")),
                                        case.put(y_true == 0))
    np.testing.assert_allclose(
        case.get(areas), NUMPY_BACKEND.binary_rank_areas(scores[:, 0], y_true == 0), rtol=1e-12)


def test_emulated_launch_refuses_non_native_arguments():
    from metrics_gpu.backends.selection import get_backend_implementation
    from metrics_gpu.backends.emulated import EmulatedKernelError

    device = get_backend_implementation("emulated").device
    weight = np.arange(8, dtype=">f8")
    with pytest.raises(EmulatedKernelError, match="byte order"):
        device.launch("confusion.cu", "max_abs_weight<double>", 1, 32,
                      [weight, np.int64(8), np.zeros(1, np.uint64)])


# -- integer weights past 2**63 -------------------------------------------------

def _sklearn_float(function, y_true, y_pred, weight, **options):
    return function(y_true, y_pred, sample_weight=np.asarray(weight, dtype=np.float64),
                    **options)


@pytest.mark.parametrize("weight", [
    pytest.param(np.full(5, 2**61, dtype=np.int64), id="sum-past-2^63"),
    pytest.param(np.full(5, np.iinfo(np.uint64).max, dtype=np.uint64), id="uint64-max"),
    pytest.param(np.array([2**63 + 5, 1, 2, 3, 4], dtype=np.uint64), id="uint64-above-int64"),
    pytest.param(np.array([2**62, 2**62, 2**62, 1, 1], dtype=np.int64), id="cell-reaches-2^63"),
])
def test_integer_weights_never_wrap(backend, weight):
    y_true = np.array([0, 0, 0, 1, 2])
    y_pred = np.array([0, 0, 0, 1, 1])
    w = backend.asarray(weight)
    t, p = backend.asarray(y_true), backend.asarray(y_pred)
    for function in (mg.accuracy_score, mg.matthews_corrcoef, mg.balanced_accuracy_score):
        got = float(backend.to_numpy(function(t, p, sample_weight=w)))
        if function is mg.matthews_corrcoef:
            # scikit-learn's float64 covariance cancels here (one class holds
            # nearly all the weight: it gives 0); the exact value is the reference.
            from test_fuzz import exact_matthews_corrcoef

            expected = exact_matthews_corrcoef(y_true.tolist(), y_pred.tolist(),
                                               [Fraction(int(v)) for v in weight])
        else:
            expected = _sklearn_float(getattr(skm, function.__name__), y_true, y_pred, weight)
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-12), function.__name__
    matrix = backend.to_numpy(mg.confusion_matrix(t, p, sample_weight=w))
    expected = _sklearn_float(skm.confusion_matrix, y_true, y_pred, weight)
    assert matrix.shape == (3, 3)
    np.testing.assert_allclose(matrix.astype(np.float64), expected, rtol=1e-12)
    assert (matrix >= 0).all()


def test_integer_weights_counted_exactly_below_2_63(backend):
    """Sums past 2**53 (where float64 rounds) but below 2**63 stay exact int64."""
    weight = np.array([2**60 + 1, 2**60 + 3, 2**59 + 7, 5, 2**60 + 11], dtype=np.int64)
    y_true = np.array([0, 0, 1, 1, 0])
    y_pred = np.array([0, 0, 1, 0, 1])
    matrix = backend.to_numpy(mg.confusion_matrix(
        backend.asarray(y_true), backend.asarray(y_pred), sample_weight=backend.asarray(weight)))
    expected = np.zeros((2, 2), dtype=object)
    for t, p, w in zip(y_true, y_pred, weight.tolist()):
        expected[t, p] += w
    assert matrix.dtype == np.int64
    assert matrix.tolist() == expected.tolist()


def test_large_integer_weights_at_scale_match_float_reference(backend, rng):
    """N = 20,000 weights of 1e15: max|w| * N passes 2**63, counted in float64."""
    n = 20_000
    y_true = rng.integers(0, 3, n)
    y_pred = np.where(rng.random(n) < 0.7, y_true, rng.integers(0, 3, n))
    weight = rng.integers(10**14, 10**15, n, dtype=np.int64)
    got = float(backend.to_numpy(mg.accuracy_score(
        backend.asarray(y_true), backend.asarray(y_pred), sample_weight=backend.asarray(weight))))
    assert got == pytest.approx(
        _sklearn_float(skm.accuracy_score, y_true, y_pred, weight), rel=1e-12)


# -- deterministic=True keeps every class ----------------------------------------

def test_deterministic_keeps_classes_of_tiny_weights(backend):
    y_true = np.array([0, 0, 1, 2, 2, 0])
    y_pred = np.array([0, 2, 1, 2, 2, 0])
    weight = np.array([1e12, 1e12, 1e-12, 1e12, 1e12, 1e12])
    t, p, w = (backend.asarray(a) for a in (y_true, y_pred, weight))
    for deterministic in (False, True):
        matrix = backend.to_numpy(mg.confusion_matrix(t, p, sample_weight=w,
                                                       deterministic=deterministic))
        assert matrix.shape == (3, 3)
        assert matrix[1, 1] == pytest.approx(1e-12, abs=3e12 * 6 * 2.0**-61)
        # Per-class results keep class 1 (its rates are 0/0 in fixed point,
        # where its weight rounds to 0, within the stated bound of its cells).
        precision = backend.to_numpy(mg.precision_score(
            t, p, sample_weight=w, average=None, deterministic=deterministic, zero_division=0))
        expected = skm.precision_score(y_true, y_pred, sample_weight=weight, average=None)
        assert precision.shape == expected.shape == (3,)
        keep = [0, 2] if deterministic and backend.name != "numpy" else [0, 1, 2]
        np.testing.assert_allclose(precision[keep], expected[keep], rtol=1e-9)
        kappa = float(backend.to_numpy(mg.cohen_kappa_score(
            t, p, sample_weight=w, weights="linear", deterministic=deterministic)))
        assert kappa == pytest.approx(
            skm.cohen_kappa_score(y_true, y_pred, sample_weight=weight, weights="linear"),
            rel=1e-9)


def test_deterministic_keeps_classes_on_the_statistics_path(backend, rng):
    """K above the dense-matrix limit: every class of the data is reported."""
    k = 2100
    y_true = np.arange(k)
    y_pred = np.where(rng.random(k) < 0.5, y_true, rng.integers(0, k, k))
    weight = np.exp(rng.normal(0, 1, k))
    tiny = rng.choice(k, 40, replace=False)
    weight[tiny] = 1e-30
    t, p, w = (backend.asarray(a) for a in (y_true, y_pred, weight))
    recall = backend.to_numpy(mg.recall_score(t, p, sample_weight=w, average=None,
                                              deterministic=True, zero_division=0))
    expected = skm.recall_score(y_true, y_pred, sample_weight=weight, average=None,
                                zero_division=0)
    assert recall.shape == expected.shape == (k,)
    # A class whose only weight rounds to 0 in fixed point is present with
    # rates 0/0 (zero_division); every other class matches.
    carried = np.ones(k, bool)
    carried[y_true[tiny]] = carried[y_pred[tiny]] = False
    np.testing.assert_allclose(recall[carried], expected[carried], rtol=1e-9, atol=1e-12)


# -- calibration bins: determinism and edges ------------------------------------

def _calibration_outputs(backend, y_true, probabilities, **options):
    report = mg.logits_report(backend.asarray(y_true), backend.asarray(probabilities),
                              from_logits=False, n_bins=15, **options)
    return np.concatenate([np.atleast_1d(backend.to_numpy(v)).astype(np.float64) for v in (
        report.expected_calibration_error, report.max_calibration_error,
        report.calibration_proportion, report.calibration_confidence,
        report.calibration_accuracy)])


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted-deterministic"])
def test_calibration_bins_are_bit_identical_run_to_run(backend, rng, weighted):
    n, k = 4000, 5
    y_true = rng.integers(0, k, n)
    probabilities = rng.dirichlet(np.ones(k) * 0.7, n)
    options = {"sample_weight": backend.asarray(rng.random(n)), "deterministic": True} \
        if weighted else {}
    # Six runs: the emulator schedules a block's threads afresh each run (twelve
    # took 31 s of the fast tier on 2 cores).
    runs = {_calibration_outputs(backend, y_true, probabilities, **options).tobytes()
            for _ in range(6)}
    assert len(runs) == 1


def test_unweighted_calibration_counts_are_exact(backend, rng):
    n, k, bins = 5000, 3, 10
    y_true = rng.integers(0, k, n)
    probabilities = rng.dirichlet(np.ones(k), n)
    report = mg.logits_report(backend.asarray(y_true), backend.asarray(probabilities),
                              from_logits=False, n_bins=bins)
    confidence = probabilities.max(axis=1)
    counts = np.bincount(calibration_bin(confidence, bins), minlength=bins)
    proportion = backend.to_numpy(report.calibration_proportion)
    np.testing.assert_array_equal(proportion, counts / n)
    correct = probabilities.argmax(axis=1) == y_true
    hits = np.bincount(calibration_bin(confidence, bins), weights=correct, minlength=bins)
    accuracy = backend.to_numpy(report.calibration_accuracy)
    filled = counts > 0
    np.testing.assert_array_equal(accuracy[filled], hits[filled] / counts[filled])


def _rows_of_confidence(confidence, n_bins):
    """Probability rows whose largest entry is exactly ``confidence``."""
    rest = (1.0 - confidence) / n_bins
    rows = np.empty((confidence.size, n_bins + 1))
    rows[:, 0] = confidence
    rows[:, 1:] = rest[:, None]
    return rows


def test_calibration_bin_edges_follow_the_docstring(backend):
    """Bin b holds [b/B, (b+1)/B): a confidence equal to b/B is in bin b, the
    double just below it in bin b - 1 (B < 60, every b)."""
    for n_bins in range(2, 60):
        edges = np.arange(1, n_bins) / n_bins
        for confidence, first in ((edges, 1), (np.nextafter(edges, 0.0), 0)):
            rows = _rows_of_confidence(confidence, n_bins)
            report = mg.logits_report(backend.asarray(np.zeros(rows.shape[0], np.int64)),
                                      backend.asarray(rows), from_logits=False,
                                      n_bins=n_bins, top_k=(1,))
            counts = np.rint(backend.to_numpy(report.calibration_proportion) * rows.shape[0])
            expected = np.zeros(n_bins)
            expected[first:first + n_bins - 1] = 1
            np.testing.assert_array_equal(counts, expected, err_msg=f"n_bins={n_bins}")


def test_calibration_bin_rule_against_edges():
    """The NumPy rule against the definition itself: the number of edges
    fl(j/B), j = 1..B-1, at or below c."""
    rng = np.random.default_rng(7)
    for n_bins in (1, 2, 3, 7, 10, 15, 22, 59, 100, 1024):
        edges = np.arange(1, n_bins) / n_bins
        confidence = np.concatenate([rng.random(500), edges, np.nextafter(edges, 0),
                                     np.nextafter(edges, 1), [0.0, 1.0]])
        expected = np.searchsorted(edges, confidence, side="right")
        np.testing.assert_array_equal(calibration_bin(confidence, n_bins), expected)


@pytest.mark.parametrize("dtype", [np.float16, np.longdouble, np.float32, np.uint8, np.bool_])
def test_weights_of_every_numpy_type(backend, dtype):
    if backend.name == "cuda" and dtype == np.longdouble:
        pytest.skip("a GPU array has no long double")
    y_true = np.array([0, 1, 1, 2, 2, 0])
    y_pred = np.array([0, 1, 2, 2, 1, 0])
    weight = np.array([1, 2, 1, 3, 0, 1]).astype(dtype)
    expected = skm.accuracy_score(y_true, y_pred, sample_weight=weight.astype(np.float64))
    got = mg.accuracy_score(backend.asarray(y_true), backend.asarray(y_pred),
                            sample_weight=backend.asarray(weight))
    assert float(backend.to_numpy(got)) == pytest.approx(expected, rel=1e-12)


def test_labels_absent_from_counted_targets_are_refused(backend):
    """scikit-learn's "at least one label in y_true" looks at the counted
    samples: a target equal to ignore_index is not in y_true."""
    y_true, y_pred = backend.asarray(np.array([0, 0, 1])), backend.asarray(np.array([0, 0, 0]))
    with pytest.raises(ValueError, match="At least one label"):
        mg.confusion_matrix(y_true, y_pred, labels=[0], ignore_index=0)
    assert backend.to_numpy(mg.confusion_matrix(y_true, y_pred, labels=[0])).tolist() == [[2]]


# -- subnormal scores -----------------------------------------------------------


@pytest.mark.parametrize("dtype, tiny", [(np.float32, 1.7e-44), (np.float64, 5e-324)],
                         ids=["float32", "float64"])
def test_subnormal_scores_are_not_zero(backend, dtype, tiny):
    """A subnormal score ranks above 0 and wins an argmax against 0, as on the
    host. Kernels built to flush subnormals (CuPy's RawModule adds -ftz=true)
    read it as 0, so it tied with the zeros: AUC 0.5 for 1.0 (seen on an H200)."""
    y = np.zeros(40, np.int64)
    y[-1] = 1
    scores = np.zeros(40, dtype)
    scores[-1] = tiny
    assert scores[-1] > 0  # the test's own premise: a subnormal, not 0
    t, s = backend.asarray(y), backend.asarray(scores)
    for weight in (None, np.full(40, 0.5)):
        w = None if weight is None else backend.asarray(weight)
        assert float(backend.to_numpy(mg.roc_auc_score(t, s, sample_weight=w))) == \
            skm.roc_auc_score(y, scores, sample_weight=weight) == 1.0
        assert float(backend.to_numpy(mg.average_precision_score(t, s, sample_weight=w))) == \
            skm.average_precision_score(y, scores, sample_weight=weight) == 1.0
    fpr, tpr, thresholds = (backend.to_numpy(a) for a in mg.roc_curve(t, s))
    expected = skm.roc_curve(y, scores)
    for got, want in zip((fpr, tpr, thresholds), expected):
        np.testing.assert_array_equal(got, want)
    # The fused argmax: rows (0, tiny) predict class 1, and their top-1 is the target.
    rows = np.zeros((16, 2), dtype)
    rows[:, 1] = tiny
    targets = np.ones(16, np.int64)
    assert float(backend.to_numpy(mg.accuracy_score(backend.asarray(targets),
                                                    backend.asarray(rows)))) == 1.0
    report = mg.logits_report(backend.asarray(targets), backend.asarray(rows), top_k=(1,))
    assert float(backend.to_numpy(report.accuracy)) == 1.0
    assert float(backend.to_numpy(report.top_k_accuracy[1])) == 1.0
