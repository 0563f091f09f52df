"""Differential fuzzing: every public metric against scikit-learn (or the seed formula).

Hypothesis draws inputs as users hand them over (tests/fuzz_strategies.py:
every integer and float dtype, both byte orders, strided, reversed, Fortran
and memory-mapped arrays, weights up to their dtype's limit and zeros,
`labels=` / `num_classes` / `ignore_index` in range, out of range, negative
or equal to a column position) and each function runs on each backend. The
reference runs on the plain copies of the same data (int64 labels, native
scores, float64 weights), with the rows whose target is `ignore_index`
removed and `num_classes=K` given as `labels=range(K)`. The oracle:

* the reference returns a value: metrics-gpu returns the same value (NaN
  where it is NaN; tolerance by score dtype), never an exception;
* the reference refuses (ValueError, or ZeroDivisionError for weights that
  sum to 0): metrics-gpu raises ValueError too, whatever its message, or
  returns NaN (undefined), or anything when `ignore_index` left no sample;
* where the two values differ past the tolerance for a metric that cancels
  (``zero_one_loss``, ``matthews_corrcoef``, ``cohen_kappa_score``: large
  weights, 1 - accuracy, c*s - t.p, 1 - observed/expected), the value in
  rational arithmetic decides: metrics-gpu must be no farther from it than
  scikit-learn's float64 sums, or within the tolerance of it;
* anything else (another exception, a wrong value) fails, with the shrunk
  input printed.

Profiles (``METRICS_GPU_FUZZ_PROFILE``): ``ci`` (default; a few minutes in
all; the same examples on every run, as every hypothesis test of the test
runs: the ``fixed`` hypothesis profile of tests/conftest.py), ``long``
(>= 10,000 cases per function on numpy, 2,000 on the kernel backends, drawn
anew on every run; run before each release with ``.ci/fuzz-long``, which
records the counts and every failing example in tests/fuzz-results/).
"""

from __future__ import annotations

import json
import math
import decimal
import os
import traceback
import warnings
from collections import Counter
from decimal import Decimal, localcontext
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import sklearn.metrics as skm
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import metrics_gpu as mg
from conftest import map_results, on_host
from fuzz_strategies import Case, binary_score_cases, label_cases, score_cases

PROFILE_VARIABLE = "METRICS_GPU_FUZZ_PROFILE"
REPORT_VARIABLE = "METRICS_GPU_FUZZ_REPORT"
PROFILE = os.environ.get(PROFILE_VARIABLE, "ci")
# Examples per (function, backend): numpy is fast, the kernel backends are not.
EXAMPLES = {
    "ci": {"numpy": 30, "emulated": 4, "cuda": 30},
    "long": {"numpy": 10_000, "emulated": 2_000, "cuda": 10_000},
}[PROFILE]
# METRICS_GPU_FUZZ_EXAMPLES_<BACKEND>=N overrides one backend's count (the
# counts actually run are what tests/fuzz-results records).
EXAMPLES = {backend: int(os.environ.get(f"METRICS_GPU_FUZZ_EXAMPLES_{backend.upper()}", count))
            for backend, count in EXAMPLES.items()}
# (function, backend, outcome) -> examples run; outcome: compared, or refused by both.
COUNTS: Counter = Counter()
# (function, backend, exception type, file and line it was raised at) -> the
# last failing example there, as a record for tests/fuzz-results: hypothesis
# runs the shrunk example of each distinct failure last.
FAILURES: dict = {}


def _settings(backend: str):
    # ci: derandomized by the test run's hypothesis profile (tests/conftest.py);
    # long: fresh examples on every run, whatever the profile.
    fresh = {} if PROFILE == "ci" else {"derandomize": False}
    return settings(
        max_examples=EXAMPLES[backend], deadline=None, **fresh,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                               HealthCheck.data_too_large, HealthCheck.filter_too_much],
        print_blob=True,
    )


@pytest.fixture(scope="module", autouse=True)
def _write_counts():
    """With METRICS_GPU_FUZZ_REPORT=DIR, each process writes its example counts
    there, and its failing examples (shrunk), which .ci/fuzz-long writes down."""
    yield
    directory = os.environ.get(REPORT_VARIABLE)
    if directory:
        Path(directory).mkdir(parents=True, exist_ok=True)
        (Path(directory) / f"counts-{os.getpid()}.json").write_text(json.dumps(
            [[function, backend, outcome, count]
             for (function, backend, outcome), count in sorted(COUNTS.items())]))
        (Path(directory) / f"failures-{os.getpid()}.json").write_text(json.dumps(
            [FAILURES[key] for key in sorted(FAILURES)], indent=1))


def _record_failure(function: str, backend: str, case: Case, options, error: Exception):
    """Keep ``case`` as the failing example of its failure (the last one wins)."""
    frame = traceback.extract_tb(error.__traceback__)[-1]
    where = f"{Path(frame.filename).name}:{frame.lineno}"
    FAILURES[(function, backend, type(error).__name__, where)] = {
        "function": function, "backend": backend, "raised": f"{type(error).__name__} at {where}",
        "message": str(error)[:2000], "case": repr(case), "options": repr(options)}


# -- running both sides ---------------------------------------------------------------------


def _quietly(call, refusals=(ValueError,), strict=True):
    """``call()`` -> ("value", result) or ("refused", error); other exceptions propagate.

    ``strict``: a RuntimeWarning (a NaN or overflow computed by accident) is an error.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if strict:
            warnings.simplefilter("error", RuntimeWarning)
        try:
            return "value", call()
        except refusals as error:
            return "refused", error


def _all_nan(value) -> bool:
    if isinstance(value, dict):
        return all(_all_nan(v) for v in value.values())
    if isinstance(value, tuple):
        return all(_all_nan(v) for v in value)
    try:
        return bool(np.all(np.isnan(np.asarray(value, dtype=np.float64))))
    except (TypeError, ValueError):
        return False


def _reference_rows(case: Case):
    """The plain data with the rows whose target is ``ignore_index`` removed."""
    keep = np.ones(case.plain_true.shape[0], dtype=bool)
    ignore = case.options.get("ignore_index")
    if ignore is not None:
        keep = case.plain_true != ignore
    weights = None if case.plain_weights is None else case.plain_weights[keep]
    return case.plain_true[keep], case.plain_second[keep], weights


def _as_plain(value):
    return map_results(value, lambda array: np.asarray(array, dtype=np.float64))


def assert_same(got, expected, rtol, where=""):
    got, expected = _as_plain(got), _as_plain(expected)
    if isinstance(expected, dict):
        assert isinstance(got, dict) and set(got) == set(expected), (where, got, expected)
        for key in expected:
            assert_same(got[key], expected[key], rtol, f"{where}[{key!r}]")
        return
    if isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected), (where, got, expected)
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_same(g, e, rtol, f"{where}[{i}]")
        return
    if expected is None:
        assert got is None, (where, got)
        return
    assert got.shape == expected.shape, f"{where}: shape {got.shape} != {expected.shape}"
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol * 1e-3, equal_nan=True,
                               err_msg=where)


def check(function: str, backend, case: Case, ours, reference, rtol=1e-9, exact=None,
          options=None):
    """Run both; compare by the oracle of the module docstring; count the outcome.

    ``exact``: the value in rational arithmetic (a callable giving a float, or
    None where it is undefined), which decides when the two values differ.
    ``options``: the drawn options (beside ``case.options``), recorded with a
    failing example.
    """
    # CuPy has no extended-precision floats: such an input cannot be on a GPU.
    assume(backend.name != "cuda" or not any(
        array is not None and array.dtype.kind == "f" and array.dtype.itemsize > 8
        for array in (case.y_true, case.second, case.weights)))
    try:
        _check(function, backend, case, ours, reference, rtol, exact)
    except Exception as error:
        _record_failure(function, backend.name, case, options, error)
        raise


def _check(function: str, backend, case: Case, ours, reference, rtol, exact):
    # scikit-learn refuses some inputs with ZeroDivisionError (np.average of zero weights).
    expected_kind, expected = _quietly(reference, (ValueError, ZeroDivisionError), strict=False)
    got_kind, got = _quietly(ours)
    if got_kind == "value":
        got = on_host(got)
    if expected_kind == "refused":
        ignored_all = ("ignore_index" in case.options
                       and not np.any(case.plain_true != case.options["ignore_index"]))
        # Accepted: the same refusal; NaN (undefined) where scikit-learn refuses; any
        # answer when ignore_index left no sample (scikit-learn sees an empty input);
        # 16-bit probability rows that sum to 1 within K * eps of their type, which
        # scikit-learn judges by its float16 running sum (documented difference).
        rounded_rows = (function == "roc_auc_score" and case.second.dtype.itemsize == 2
                        and "probabilities" in str(expected) and np.all(
                            np.abs(case.plain_second.sum(axis=1) - 1)
                            <= case.second.shape[1] * float(np.finfo(np.float16).eps)))
        assert got_kind == "refused" or _all_nan(got) or ignored_all or rounded_rows, (
            f"{function}: scikit-learn refuses ({expected!r}) but metrics-gpu returned {got!r}")
        COUNTS[(function, backend.name, "refused")] += 1
        return
    assert got_kind == "value", f"{function}: metrics-gpu refused ({got}); expected {expected!r}"
    try:
        assert_same(got, expected, rtol, function)
    except AssertionError:
        value = None if exact is None else exact()
        if value is None:
            raise
        ours_off, theirs_off = abs(float(got) - value), abs(float(expected) - value)
        assert ours_off <= max(theirs_off, rtol * abs(value)), (
            f"{function}: metrics-gpu's {float(got)!r} is {ours_off:.3g} from the exact value "
            f"{value!r}, scikit-learn's {float(expected)!r} {theirs_off:.3g}")
    COUNTS[(function, backend.name, "compared")] += 1


def _score_rtol(case: Case) -> float:
    # The reference computes in the scores' own precision (as scikit-learn
    # does); metrics-gpu may widen first. Differences are of that precision.
    return {2: 2e-2, 4: 1e-5}.get(np.dtype(case.second.dtype).itemsize, 1e-9)


# -- label metrics ---------------------------------------------------------------------------

AVERAGES = (None, "micro", "macro", "weighted")
ZERO_DIVISION = ("warn", 0.0, 1.0, np.nan)

# name -> (takes labels=, drawn options, scikit-learn's function)
LABEL_FUNCTIONS = {
    "confusion_matrix": (True, st.just({}), skm.confusion_matrix),
    "accuracy_score": (False, st.fixed_dictionaries({"normalize": st.booleans()}),
                       skm.accuracy_score),
    "zero_one_loss": (False, st.fixed_dictionaries({"normalize": st.booleans()}),
                      skm.zero_one_loss),
    "hamming_loss": (False, st.just({}), skm.hamming_loss),
    "balanced_accuracy_score": (False, st.fixed_dictionaries({"adjusted": st.booleans()}),
                                skm.balanced_accuracy_score),
    "matthews_corrcoef": (False, st.just({}), skm.matthews_corrcoef),
    "cohen_kappa_score": (True, st.fixed_dictionaries(
        {"weights": st.sampled_from((None, "linear", "quadratic"))}), skm.cohen_kappa_score),
    "precision_recall_fscore_support": (True, st.fixed_dictionaries(
        {"average": st.sampled_from(AVERAGES), "zero_division": st.sampled_from(ZERO_DIVISION),
         "beta": st.sampled_from((0.5, 1.0, 2.0))}), skm.precision_recall_fscore_support),
    "precision_score": (True, st.fixed_dictionaries(
        {"average": st.sampled_from(AVERAGES), "zero_division": st.sampled_from(ZERO_DIVISION)}),
        skm.precision_score),
    "recall_score": (True, st.fixed_dictionaries(
        {"average": st.sampled_from(AVERAGES), "zero_division": st.sampled_from(ZERO_DIVISION)}),
        skm.recall_score),
    "f1_score": (True, st.fixed_dictionaries(
        {"average": st.sampled_from(AVERAGES), "zero_division": st.sampled_from(ZERO_DIVISION)}),
        skm.f1_score),
    "fbeta_score": (True, st.fixed_dictionaries(
        {"average": st.sampled_from(AVERAGES), "zero_division": st.sampled_from(ZERO_DIVISION),
         "beta": st.sampled_from((0.5, 2.0))}), skm.fbeta_score),
    "jaccard_score": (True, st.fixed_dictionaries(
        {"average": st.sampled_from(AVERAGES), "zero_division": st.sampled_from((0.0, 1.0))}),
        skm.jaccard_score),
    "classification_report": (True, st.fixed_dictionaries(
        {"output_dict": st.just(True), "zero_division": st.sampled_from(ZERO_DIVISION)}),
        skm.classification_report),
}


def _reference_options(case: Case, options: dict, takes_labels: bool) -> dict:
    reference_options = dict(options)
    if "num_classes" in case.options and takes_labels:
        reference_options["labels"] = list(range(case.options["num_classes"]))
    if "labels" in case.options:
        reference_options["labels"] = case.options["labels"]
    return reference_options


def _label_reference(function, case: Case, options: dict, takes_labels: bool):
    y_true, y_pred, weights = _reference_rows(case)
    reference_options = _reference_options(case, options, takes_labels)
    return lambda: function(y_true, y_pred, sample_weight=weights, **reference_options)


# -- exact values of the metrics that cancel -----------------------------------------------------
# With large weights, 1 - accuracy, MCC's c*s - t.p and kappa's 1 - observed /
# expected lose digits in scikit-learn's float64 sums that metrics-gpu's exact
# integer counts keep (tests/fuzz-results/2026-11-25.md). These follow
# scikit-learn's definitions in rational arithmetic (float64 weights are exact
# fractions) and return None where scikit-learn's value is a convention.


def _exact_rows(case: Case):
    y_true, y_pred, weights = _reference_rows(case)
    weights = ([Fraction(1)] * len(y_true) if weights is None
               else [Fraction(float(w)) for w in weights])
    return y_true.tolist(), y_pred.tolist(), weights


def _exact_confusion(y_true, y_pred, weights, labels) -> list:
    index = {label: i for i, label in enumerate(labels)}
    matrix = [[Fraction(0)] * len(labels) for _ in labels]
    for t, p, w in zip(y_true, y_pred, weights):
        if t in index and p in index:
            matrix[index[t]][index[p]] += w
    return matrix


def exact_zero_one_loss(y_true, y_pred, weights, normalize=True):
    total = sum(weights, Fraction(0))
    wrong = sum((w for t, p, w in zip(y_true, y_pred, weights) if t != p), Fraction(0))
    if not normalize:
        return float(wrong)
    return None if total == 0 else float(wrong / total)


def exact_matthews_corrcoef(y_true, y_pred, weights):
    matrix = _exact_confusion(y_true, y_pred, weights, sorted(set(y_true) | set(y_pred)))
    size = len(matrix)
    true_sums = [sum(row, Fraction(0)) for row in matrix]
    pred_sums = [sum((row[j] for row in matrix), Fraction(0)) for j in range(size)]
    correct = sum((matrix[i][i] for i in range(size)), Fraction(0))
    total = sum(true_sums, Fraction(0))
    covariance = correct * total - sum(t * p for t, p in zip(true_sums, pred_sums))
    spread = ((total * total - sum(p * p for p in pred_sums))
              * (total * total - sum(t * t for t in true_sums)))
    if spread == 0:
        return 0.0  # scikit-learn's convention
    with localcontext() as context:
        context.prec = 60
        ratio = (Decimal(covariance.numerator) / Decimal(covariance.denominator)
                 / (Decimal(spread.numerator) / Decimal(spread.denominator)).sqrt())
        return float(ratio)


def exact_cohen_kappa(y_true, y_pred, weights, labels=None, kappa_weights=None):
    labels = sorted(set(y_true) | set(y_pred)) if labels is None else list(labels)
    matrix = _exact_confusion(y_true, y_pred, weights, labels)
    size = len(matrix)
    true_sums = [sum(row, Fraction(0)) for row in matrix]
    pred_sums = [sum((row[j] for row in matrix), Fraction(0)) for j in range(size)]
    total = sum(pred_sums, Fraction(0))
    if total == 0:
        return None

    def cost(i, j):
        return {None: int(i != j), "linear": abs(i - j), "quadratic": (i - j) ** 2}[kappa_weights]

    observed = sum((cost(i, j) * matrix[i][j] for i in range(size) for j in range(size)),
                   Fraction(0))
    expected = sum((cost(i, j) * pred_sums[i] * true_sums[j] / total
                    for i in range(size) for j in range(size)), Fraction(0))
    return None if expected == 0 else float(1 - observed / expected)


def _exact_label_value(function: str, case: Case, options: dict, takes_labels: bool):
    """A callable giving the exact value of a metric that cancels, or None."""
    if function not in ("zero_one_loss", "matthews_corrcoef", "cohen_kappa_score"):
        return None

    def value():
        y_true, y_pred, weights = _exact_rows(case)
        if function == "zero_one_loss":
            return exact_zero_one_loss(y_true, y_pred, weights, options.get("normalize", True))
        if function == "matthews_corrcoef":
            return exact_matthews_corrcoef(y_true, y_pred, weights)
        reference_options = _reference_options(case, options, takes_labels)
        return exact_cohen_kappa(y_true, y_pred, weights, reference_options.get("labels"),
                                 options.get("weights"))

    return value


@pytest.mark.parametrize("function", list(LABEL_FUNCTIONS))
def test_label_metric_matches_scikit_learn(backend, function):
    takes_labels, drawn_options, reference_function = LABEL_FUNCTIONS[function]

    @_settings(backend.name)
    @given(case=label_cases(takes_labels=takes_labels), options=drawn_options)
    def run(case, options):
        ours = getattr(mg, function)
        call_options = {**case.options, **options}
        check(function, backend, case,
              lambda: ours(backend.asarray(case.y_true), backend.asarray(case.second),
                           sample_weight=None if case.weights is None
                           else backend.asarray(case.weights), **call_options),
              _label_reference(reference_function, case, options, takes_labels),
              exact=_exact_label_value(function, case, options, takes_labels), options=options)

    run()


@pytest.mark.parametrize("seed", range(6))
def test_exact_values_equal_scikit_learn_on_small_weights(seed):
    """The exact references of the oracle against scikit-learn where its
    float64 sums are exact (small integer weights): they follow its
    definitions."""
    rng = np.random.default_rng(seed)
    n, k = 60, 2 + seed % 4
    y_true, y_pred = rng.integers(0, k, n), rng.integers(0, k, n)
    y_pred[: n // 2] = y_true[: n // 2]  # correlated, so that no value is a convention
    weights = rng.integers(0, 7, n).astype(np.float64) if seed % 2 else None
    exact = [Fraction(1)] * n if weights is None else [Fraction(float(w)) for w in weights]
    rows = (y_true.tolist(), y_pred.tolist(), exact)
    for normalize in (True, False):
        assert exact_zero_one_loss(*rows, normalize) == pytest.approx(
            skm.zero_one_loss(y_true, y_pred, normalize=normalize, sample_weight=weights),
            rel=1e-12, abs=1e-12)
    assert exact_matthews_corrcoef(*rows) == pytest.approx(
        skm.matthews_corrcoef(y_true, y_pred, sample_weight=weights), rel=1e-12, abs=1e-12)
    labels = list(range(k + 1))  # one label absent from both
    for kappa_weights in (None, "linear", "quadratic"):
        for label_list in (None, labels):
            assert exact_cohen_kappa(*rows, label_list, kappa_weights) == pytest.approx(
                skm.cohen_kappa_score(y_true, y_pred, labels=label_list, weights=kappa_weights,
                                      sample_weight=weights), rel=1e-12, abs=1e-12)


# -- score metrics ---------------------------------------------------------------------------


def _ece_bins(y_true, proba, n_bins):
    """The seed formula's rows: top-class confidence, whether it is right, its bin
    ([b/B, (b+1)/B), 1.0 in the last)."""
    proba = np.asarray(proba, dtype=np.float64)
    confidence = proba.max(axis=1)
    correct = proba.argmax(axis=1) == y_true
    edges = np.arange(n_bins + 1, dtype=np.float64) / n_bins
    bins = np.clip(np.searchsorted(edges, confidence, side="right") - 1, 0, n_bins - 1)
    return confidence, correct, bins


def _ece_reference(y_true, proba, weights, n_bins, norm):
    """The seed formula in float64."""
    confidence, correct, bins = _ece_bins(y_true, proba, n_bins)
    w = np.ones_like(confidence) if weights is None else weights
    total = w.sum()
    if y_true.size == 0 or total == 0:
        raise ValueError("nothing to bin")
    mass = np.bincount(bins, w, n_bins)
    filled = mass > 0
    conf = np.bincount(bins, w * confidence, n_bins)[filled] / mass[filled]
    acc = np.bincount(bins, w * correct, n_bins)[filled] / mass[filled]
    gap = np.abs(acc - conf)
    if norm == "l1":
        return float(np.sum(mass[filled] / total * gap))
    if norm == "l2":
        return float(math.sqrt(np.sum(mass[filled] / total * gap**2)))
    return float(gap.max())


def exact_expected_calibration_error(y_true, proba, weights, n_bins, norm):
    """The seed formula in rational arithmetic. The float64 one loses a bin's
    mean where products of weights and confidences fall below the smallest
    normal (tests/fuzz-results/2026-12-02-shortened.md: a weight of 5e-324 times 0.576
    rounds to 5e-324, making the bin's mean confidence 1)."""
    confidence, correct, bins = _ece_bins(y_true, proba, n_bins)
    w = [Fraction(1)] * len(bins) if weights is None else [Fraction(float(v)) for v in weights]
    mass = [Fraction(0)] * n_bins
    conf = [Fraction(0)] * n_bins
    acc = [Fraction(0)] * n_bins
    for b, c, right, weight in zip(bins.tolist(), confidence.tolist(), correct.tolist(), w):
        mass[b] += weight
        conf[b] += weight * Fraction(c)
        acc[b] += weight if right else 0
    total = sum(mass, Fraction(0))
    gaps = [(m, abs(a - c) / m) for m, a, c in zip(mass, acc, conf) if m > 0]
    if norm == "l1":
        return float(sum((m / total * g for m, g in gaps), Fraction(0)))
    if norm == "l2":
        return math.sqrt(sum((m / total * g * g for m, g in gaps), Fraction(0)))
    return float(max(g for _, g in gaps))


def _score_reference(name: str, case: Case, options: dict):
    y_true, scores, weights = _reference_rows(case)
    codes = case.options.get("labels", list(range(case.k)))
    if name == "log_loss":
        return lambda: skm.log_loss(y_true, scores, labels=codes, sample_weight=weights)
    if name == "brier_score_loss":
        return lambda: skm.brier_score_loss(y_true, scores, labels=codes, sample_weight=weights)
    if name == "d2_log_loss_score":
        # Clipped at the eps of 16- and 32-bit scores, else of float64
        # (scikit-learn's clip; it reads longdouble as float64), then
        # read as float64: scikit-learn's float16 log of 0.5 is 3e-4 off, which
        # 1 - loss / baseline turns into an absolute error at a score of 0.
        eps = _d2_eps(scores)
        wide = np.clip(scores.astype(np.float64), eps, 1 - eps)
        return lambda: skm.d2_log_loss_score(y_true, wide, labels=codes, sample_weight=weights)
    if name == "d2_brier_score":
        # On the float64 values of the scores: scikit-learn squares 16-bit
        # differences in float16, whose 1e-8 underflow to 0, and a ratio over a
        # baseline of about 0 turns that into NaN against metrics-gpu's -inf
        # (metrics-gpu sums in float64, as its brier_score_loss).
        wide = scores.astype(np.float64)
        return lambda: skm.d2_brier_score(y_true, wide, labels=codes, sample_weight=weights)
    if name == "hinge_loss":
        return lambda: skm.hinge_loss(y_true, scores, labels=codes, sample_weight=weights)
    if name == "top_k_accuracy_score":
        return lambda: skm.top_k_accuracy_score(y_true, scores, labels=codes,
                                                sample_weight=weights, **options)
    if name == "roc_auc_score":
        # labels= changes which classes ROC AUC ranks: passed only when the case has it.
        return lambda: skm.roc_auc_score(y_true, scores, labels=case.options.get("labels"),
                                         sample_weight=weights, **options)
    if name == "expected_calibration_error":
        return lambda: _ece_reference(y_true, scores, weights, **options)
    raise AssertionError(name)


def _d2_eps(scores) -> float:
    """scikit-learn's clip of log loss: the eps of 16- and 32-bit scores, else
    of float64 (it reads longdouble as float64)."""
    return float(np.finfo(scores.dtype if scores.dtype.itemsize <= 4 else np.float64).eps)


def exact_d2_log_loss(y_true, scores, weights, codes):
    """``1 - loss / loss of the weighted class prior`` in 60-digit decimals from
    the exact float64 inputs (probabilities clipped as scikit-learn clips
    them), or None where it is 0/0. Near a prior of 1, log(p) in float64
    keeps only p's rounding: scikit-learn's value is 1e-9 off there."""
    if scores.ndim != 2:
        return None
    context = decimal.Context(prec=60)
    eps = _d2_eps(scores)
    low, high = decimal.Decimal(eps), decimal.Decimal(1 - eps)
    column = {code: i for i, code in enumerate(codes)}
    weights = np.ones(len(y_true)) if weights is None else weights
    loss, class_weight = decimal.Decimal(0), [decimal.Decimal(0)] * len(codes)
    for target, row, weight in zip(y_true, scores.astype(np.float64), weights):
        p = min(max(decimal.Decimal(float(row[column[target]])), low), high)
        loss -= context.multiply(decimal.Decimal(float(weight)), p.ln(context))
        class_weight[column[target]] += decimal.Decimal(float(weight))
    total = sum(class_weight, decimal.Decimal(0))
    baseline = decimal.Decimal(0)
    for weight in class_weight:
        if weight > 0:
            baseline -= context.multiply(
                weight, min(max(context.divide(weight, total), low), high).ln(context))
    return None if baseline == 0 else float(1 - context.divide(loss, baseline))


def _exact_score_value(name: str, case: Case, options: dict):
    """A callable giving the exact value of a score metric whose float reference
    can lose it, or None."""
    if name == "d2_log_loss_score":
        y_true, scores, weights = _reference_rows(case)
        codes = case.options.get("labels", list(range(case.k)))
        return lambda: exact_d2_log_loss(y_true, scores, weights, codes)
    if name != "expected_calibration_error":
        return None
    y_true, scores, weights = _reference_rows(case)

    def value():
        try:
            return exact_expected_calibration_error(y_true, scores, weights, **options)
        except ZeroDivisionError:  # nothing to bin: the refusal is compared instead
            return None
    return value


@pytest.mark.parametrize("seed", range(4))
def test_exact_calibration_error_equals_the_float_formula_on_normal_weights(seed):
    """The exact referee follows the seed formula where float64 loses nothing
    (weights of small integers, or none)."""
    rng = np.random.default_rng(seed)
    n, k = 80, 2 + seed
    proba = rng.dirichlet(np.ones(k), n)
    y_true = rng.integers(0, k, n)
    weights = rng.integers(0, 5, n).astype(np.float64) if seed % 2 else None
    for n_bins in (1, 3, 10):
        for norm in ("l1", "l2", "max"):
            assert exact_expected_calibration_error(y_true, proba, weights, n_bins, norm) == (
                pytest.approx(_ece_reference(y_true, proba, weights, n_bins, norm),
                              rel=1e-12, abs=1e-15))


def test_calibration_error_with_a_subnormal_weight(backend):
    """The long fuzz run's failing example (tests/fuzz-results/2026-12-02-shortened.md):
    one row of weight 2 at confidence 0.333 (right), one of weight 5e-324 at
    0.576 (wrong). The bins' gaps are 0.667 and 0.576 whatever the weight of
    the second, so the max norm is 0.667; the float64 seed formula gives 1 (its
    5e-324 * 0.576 rounds to 5e-324)."""
    third = np.float16(0.333251953125)
    proba = np.array([[third] * 3, [0.2119140625, 0.2119140625, 0.576171875]], np.float16)
    y_true = np.array([0, 0], np.int8)
    weights = np.array([2.0, 5e-324])
    got = mg.expected_calibration_error(backend.asarray(y_true), backend.asarray(proba),
                                        sample_weight=backend.asarray(weights),
                                        n_bins=2, norm="max")
    exact = exact_expected_calibration_error(y_true, proba, weights, 2, "max")
    assert exact == pytest.approx(1 - float(third), rel=1e-15)
    assert float(on_host(got)) == pytest.approx(exact, rel=1e-12)
    assert _ece_reference(y_true, proba, weights, 2, "max") == 1.0  # what the float one loses


# name -> (kind of scores, takes labels=, takes ignore_index, smallest K, drawn options)
SCORE_FUNCTIONS = {
    "log_loss": ("proba", True, True, 2, st.just({})),
    "brier_score_loss": ("proba", True, True, 2, st.just({})),
    "d2_log_loss_score": ("proba", True, False, 2, st.just({})),
    "d2_brier_score": ("proba", True, False, 2, st.just({})),
    "hinge_loss": ("decision", True, True, 3, st.just({})),
    "top_k_accuracy_score": ("decision", True, True, 3,
                             st.fixed_dictionaries({"k": st.integers(1, 3)})),
    "roc_auc_score": ("proba", True, False, 3, st.fixed_dictionaries(
        {"multi_class": st.sampled_from(("ovr", "ovo")),
         "average": st.sampled_from(("macro", "weighted"))})),
    "expected_calibration_error": ("proba", False, True, 2, st.fixed_dictionaries(
        {"n_bins": st.integers(1, 25), "norm": st.sampled_from(("l1", "l2", "max"))})),
}


@pytest.mark.parametrize("function", list(SCORE_FUNCTIONS))
def test_score_metric_matches_reference(backend, function):
    kind, takes_labels, takes_ignore, min_k, drawn_options = SCORE_FUNCTIONS[function]

    @_settings(backend.name)
    @given(case=score_cases(kind=kind, min_k=min_k, labels=takes_labels,
                            ignore_index=takes_ignore),
           options=drawn_options)
    def run(case, options):
        if function == "roc_auc_score" and options["multi_class"] == "ovo" and (
                case.weights is not None):
            options = {**options, "multi_class": "ovr"}  # scikit-learn: ovo takes no weights
        ours = getattr(mg, function)
        check(function, backend, case,
              lambda: ours(backend.asarray(case.y_true), backend.asarray(case.second),
                           sample_weight=None if case.weights is None
                           else backend.asarray(case.weights), **case.options, **options),
              _score_reference(function, case, options), rtol=_score_rtol(case),
              exact=_exact_score_value(function, case, options), options=options)

    run()


# -- binary ranking metrics ------------------------------------------------------------------

BINARY_FUNCTIONS = {
    "roc_auc_score[binary]": (mg.roc_auc_score, skm.roc_auc_score),
    "average_precision_score": (mg.average_precision_score, skm.average_precision_score),
    "roc_curve": (mg.roc_curve, skm.roc_curve),
    "precision_recall_curve": (mg.precision_recall_curve, skm.precision_recall_curve),
    "det_curve": (mg.det_curve, skm.det_curve),
    "confusion_matrix_at_thresholds": (mg.confusion_matrix_at_thresholds,
                                       skm.confusion_matrix_at_thresholds),
}


@pytest.mark.parametrize("function", list(BINARY_FUNCTIONS))
def test_binary_ranking_metric_matches_scikit_learn(backend, function):
    ours, reference = BINARY_FUNCTIONS[function]

    @_settings(backend.name)
    @given(case=binary_score_cases())
    def run(case):
        check(function, backend, case,
              lambda: ours(backend.asarray(case.y_true), backend.asarray(case.second),
                           sample_weight=None if case.weights is None
                           else backend.asarray(case.weights)),
              lambda: reference(case.plain_true, case.plain_second,
                                sample_weight=case.plain_weights),
              rtol=_score_rtol(case))

    run()


# -- binary label metrics ----------------------------------------------------------------------

LIKELIHOOD_REPLACEMENTS = (np.nan, 1.0, {"LR+": 2.0, "LR-": 0.5}, {"LR+": np.inf, "LR-": np.nan})


def test_class_likelihood_ratios_match_scikit_learn(backend):
    """Labels of one or two classes (codes 0, 1 and up to 3 with ``labels=``), any
    weights, each ``replace_undefined_by``."""

    @_settings(backend.name)
    @given(case=label_cases(takes_labels=True, takes_num_classes=False, max_k=2),
           replace=st.sampled_from(LIKELIHOOD_REPLACEMENTS))
    def run(case, replace):
        options = {**case.options, "replace_undefined_by": replace}
        check("class_likelihood_ratios", backend, case,
              lambda: mg.class_likelihood_ratios(
                  backend.asarray(case.y_true), backend.asarray(case.second),
                  sample_weight=None if case.weights is None else backend.asarray(case.weights),
                  **options),
              lambda: skm.class_likelihood_ratios(case.plain_true, case.plain_second,
                                                  sample_weight=case.plain_weights, **options),
              options=options)

    run()
