"""Run-to-run determinism of every output on every backend.

The same input is evaluated RUNS times:

* unweighted input (counts are integers): every output bit-identical;
* float weights with ``deterministic=True``: bit-identical;
* float weights otherwise (functions without ``deterministic``, or
  ``deterministic=False``): within the bound of a reordered float64 sum. A sum
  of N non-negative terms in any order is within (N - 1)·ε of the exact sum
  (relative), so two orders differ by at most 2·N·ε: the counts and sums
  (confusion cells, score and bin sums) are compared at that bound; metrics
  derived from them (ratios, differences of products) at :data:`DERIVED_RTOL`.

Inputs span several blocks and warps on the emulated device (2 SMs, 64-thread
blocks), so atomics of different threads and blocks do race.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import metrics_gpu as mg

RUNS = 5
N, K = 2000, 7
# Counts and sums of N non-negative float64 terms: two summation orders.
SUM_RTOL = 2 * N * np.finfo(np.float64).eps
# Metrics derived from such sums (ratios, MCC and kappa's differences of products).
DERIVED_RTOL = 1e-9


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(2024)
    y_true = rng.integers(0, K, N)
    logits = rng.standard_normal((N, K)).astype(np.float32)
    logits[np.arange(N), y_true] += 1.5 * rng.random(N).astype(np.float32)
    y_pred = np.argmax(logits, axis=1)
    shifted = logits.astype(np.float64) - logits.max(axis=1, keepdims=True)
    probabilities = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    return dict(
        y_true=y_true, y_pred=y_pred, logits=logits, probabilities=probabilities,
        # Weights over six orders of magnitude: a float sum's order shows in its bits.
        weight=rng.lognormal(0.0, 3.0, N),
        binary_true=(y_true < 3).astype(np.int64),
        binary_score=probabilities[:, :3].sum(axis=1),
        # Multiclass ranking runs a pass per class (or pair): three classes.
        y_true_3=y_true % 3,
        probabilities_3=np.stack([probabilities[:, i::3].sum(axis=1) for i in range(3)], axis=1),
    )


def _leaves(value, case, path=""):
    """``{path: numpy array}`` of a result (reports resolved, device arrays read back)."""
    if hasattr(value, "to_dict"):
        value = value.to_dict()
    if hasattr(value, "__dataclass_fields__"):
        value = {name: getattr(value, name) for name in value.__dataclass_fields__}
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            out.update(_leaves(item, case, f"{path}/{key}"))
        return out
    if isinstance(value, (tuple, list)) and not all(
            isinstance(v, (int, float, str)) for v in value):
        out = {}
        for i, item in enumerate(value):
            out.update(_leaves(item, case, f"{path}/{i}"))
        return out
    return {path: case.to_numpy(value)}


def _bits(leaves):
    return {path: (a.dtype.str, a.shape, a.tobytes()) for path, a in leaves.items()}


def _runs(case, call, d):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ill-defined metrics are part of the output
        return [_leaves(call(d), case) for _ in range(RUNS)]


def _assert_bit_identical(results):
    first = _bits(results[0])
    for run, result in enumerate(results[1:], start=1):
        bits = _bits(result)
        differing = sorted(path for path in first if bits[path] != first[path])
        assert not differing, (
            f"run {run} differs from run 0 in {differing}: "
            + "; ".join(f"{p}: {results[0][p]!r} vs {result[p]!r}" for p in differing[:3])
        )


def _assert_within(results, rtol):
    for result in results[1:]:
        for path, first in results[0].items():
            if first.dtype.kind in "fc":
                np.testing.assert_allclose(result[path], first, rtol=rtol, atol=0,
                                           equal_nan=True, err_msg=path)
            else:
                np.testing.assert_array_equal(result[path], first, err_msg=path)


def _on(case, d):
    return {name: case.asarray(value) for name, value in d.items()}


# -- label metrics ---------------------------------------------------------------------

def _label_calls(weighted: bool, deterministic: bool):
    def kw(d):
        return dict(sample_weight=d["weight"] if weighted else None, deterministic=deterministic)

    return {
        "confusion_matrix": lambda d: mg.confusion_matrix(d["y_true"], d["y_pred"], **kw(d)),
        "confusion_matrix_from_logits": lambda d: mg.confusion_matrix(
            d["y_true"], d["logits"], **kw(d)),
        "accuracy_score": lambda d: mg.accuracy_score(d["y_true"], d["y_pred"], **kw(d)),
        "balanced_accuracy_score": lambda d: mg.balanced_accuracy_score(
            d["y_true"], d["y_pred"], **kw(d)),
        "precision_recall_fscore_support": lambda d: mg.precision_recall_fscore_support(
            d["y_true"], d["y_pred"], **kw(d)),
        "f1_score_macro": lambda d: mg.f1_score(d["y_true"], d["y_pred"], average="macro",
                                                **kw(d)),
        "jaccard_score_weighted": lambda d: mg.jaccard_score(d["y_true"], d["y_pred"],
                                                             average="weighted", **kw(d)),
        "matthews_corrcoef": lambda d: mg.matthews_corrcoef(d["y_true"], d["y_pred"], **kw(d)),
        "cohen_kappa_score_quadratic": lambda d: mg.cohen_kappa_score(
            d["y_true"], d["y_pred"], weights="quadratic", **kw(d)),
        "label_report": lambda d: mg.label_report(d["y_true"], d["y_pred"], **kw(d)),
        "label_report_num_classes": lambda d: mg.label_report(
            d["y_true"], d["y_pred"], num_classes=K + 2, **kw(d)),
        "classification_report": lambda d: mg.classification_report(
            d["y_true"], d["y_pred"], output_dict=True, **kw(d)),
        "multiclass_quality_metrics": lambda d: mg.multiclass_quality_metrics(
            d["y_true"], d["y_pred"], **kw(d)),
    }


LABEL_NAMES = list(_label_calls(False, False))


@pytest.mark.parametrize("name", LABEL_NAMES)
def test_label_outputs_unweighted_are_bit_identical(backend, data, name):
    call = _label_calls(weighted=False, deterministic=False)[name]
    _assert_bit_identical(_runs(backend, call, _on(backend, data)))


@pytest.mark.parametrize("name", LABEL_NAMES)
def test_label_outputs_weighted_deterministic_are_bit_identical(backend, data, name):
    call = _label_calls(weighted=True, deterministic=True)[name]
    _assert_bit_identical(_runs(backend, call, _on(backend, data)))


@pytest.mark.parametrize("name", ["confusion_matrix", "label_report", "matthews_corrcoef",
                                  "cohen_kappa_score_quadratic"])
def test_label_outputs_weighted_are_within_the_bound(backend, data, name):
    call = _label_calls(weighted=True, deterministic=False)[name]
    results = _runs(backend, call, _on(backend, data))
    _assert_within(results, SUM_RTOL if name == "confusion_matrix" else DERIVED_RTOL)


def test_deterministic_matrix_within_its_error_bound(backend, data):
    """``deterministic=True`` is within max|w|·N·2⁻⁶¹ of the float64 sums, per cell
    (README), as well as bit-stable."""
    d = _on(backend, data)
    matrix = backend.to_numpy(mg.confusion_matrix(d["y_true"], d["y_pred"],
                                                  sample_weight=d["weight"], deterministic=True))
    reference = np.zeros((K, K))
    np.add.at(reference, (data["y_true"], data["y_pred"]), data["weight"])
    bound = data["weight"].max() * N * 2.0**-61 + SUM_RTOL * reference
    assert np.all(np.abs(matrix - reference) <= bound)


# -- score functions -------------------------------------------------------------------

def _score_calls(weighted: bool):
    def kw(d):
        return dict(sample_weight=d["weight"] if weighted else None)

    return {
        "log_loss": lambda d: mg.log_loss(d["y_true"], d["probabilities"], **kw(d)),
        "brier_score_loss": lambda d: mg.brier_score_loss(d["y_true"], d["probabilities"],
                                                          **kw(d)),
        "hinge_loss": lambda d: mg.hinge_loss(d["y_true"], d["logits"], **kw(d)),
        "top_k_accuracy_score": lambda d: mg.top_k_accuracy_score(d["y_true"], d["logits"],
                                                                  k=3, **kw(d)),
        "expected_calibration_error": lambda d: mg.expected_calibration_error(
            d["y_true"], d["probabilities"], **kw(d)),
        # Every fused output: accuracy, top-k, cross-entropy from logits, Brier,
        # hinge, ECE, MCE and the calibration bins.
        "logits_report": lambda d: mg.logits_report(d["y_true"], d["logits"], top_k=(1, 3),
                                                    **kw(d)),
        "catboost_multiclass": lambda d: mg.catboost_metric(
            "MultiClass", d["y_true"], d["logits"], weight=d["weight"] if weighted else None),
    }


SCORE_NAMES = list(_score_calls(False))


@pytest.mark.parametrize("name", SCORE_NAMES)
def test_score_outputs_unweighted_are_bit_identical(backend, data, name):
    call = _score_calls(weighted=False)[name]
    _assert_bit_identical(_runs(backend, call, _on(backend, data)))


@pytest.mark.parametrize("name", [n for n in SCORE_NAMES
                                  if n not in ("hinge_loss", "top_k_accuracy_score")])
def test_score_outputs_weighted_are_within_the_bound(backend, data, name):
    # No deterministic= here: sums of weighted terms (non-negative, except
    # the calibration gaps the ECE takes after summing) in some order.
    call = _score_calls(weighted=True)[name]
    results = _runs(backend, call, _on(backend, data))
    _assert_within(results, DERIVED_RTOL)


# -- ranking ---------------------------------------------------------------------------

def _ranking_calls(weighted: bool):
    def kw(d):
        return dict(sample_weight=d["weight"] if weighted else None)

    return {
        "roc_auc_score_binary": lambda d: mg.roc_auc_score(d["binary_true"], d["binary_score"],
                                                           **kw(d)),
        "roc_auc_score_ovr": lambda d: mg.roc_auc_score(d["y_true_3"], d["probabilities_3"],
                                                        multi_class="ovr", **kw(d)),
        "roc_auc_score_ovo": lambda d: mg.roc_auc_score(d["y_true_3"], d["probabilities_3"],
                                                        multi_class="ovo", **kw(d)),
        "average_precision_score_binary": lambda d: mg.average_precision_score(
            d["binary_true"], d["binary_score"], **kw(d)),
        "average_precision_score_multiclass": lambda d: mg.average_precision_score(
            d["y_true_3"], d["probabilities_3"], **kw(d)),
        "roc_curve": lambda d: mg.roc_curve(d["binary_true"], d["binary_score"], **kw(d)),
        "precision_recall_curve": lambda d: mg.precision_recall_curve(
            d["binary_true"], d["binary_score"], **kw(d)),
    }


RANKING_NAMES = list(_ranking_calls(False))


@pytest.mark.parametrize("name", RANKING_NAMES)
def test_ranking_outputs_unweighted_are_bit_identical(backend, data, name):
    call = _ranking_calls(weighted=False)[name]
    _assert_bit_identical(_runs(backend, call, _on(backend, data)))


@pytest.mark.parametrize("name", [n for n in RANKING_NAMES if n != "roc_auc_score_ovo"])
def test_ranking_outputs_weighted_are_within_the_bound(backend, data, name):
    # (one-vs-one ROC AUC takes no weights, as scikit-learn's)
    call = _ranking_calls(weighted=True)[name]
    _assert_within(_runs(backend, call, _on(backend, data)), DERIVED_RTOL)
