"""Score metrics: scikit-learn parity on every backend, the fused pass's
kernel against the NumPy reference, hand-worked calibration, and errors.

References: scikit-learn 1.9 (log_loss, brier_score_loss, hinge_loss,
top_k_accuracy_score); calibration error from its definition, binned here with
``numpy.digitize`` (not the library's binning); the kernel (emulated, and cuda
on a GPU) against ``NumpyBackend.fused_logits_pass``.
"""

from __future__ import annotations

import importlib
import itertools
import warnings
from pathlib import Path

import numpy as np
import pytest
import sklearn.metrics as skm

import metrics_gpu as mg
from metrics_gpu._formulas.state import SCORE_SLOTS
from metrics_gpu.backends.numpy_backend import NUMPY_BACKEND

SLOT_CORRECT = SCORE_SLOTS.index("correct")

RTOL = 1e-12
# float32 probabilities: scikit-learn computes in float32, we in float64.
RTOL_FLOAT32 = 1e-6


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _case(rng, n, k, *, ties=False, weighted=False):
    logits = rng.normal(scale=2.0, size=(n, k))
    if ties:
        logits = np.round(logits)  # many equal scores in a row
    y_true = rng.integers(0, k, n)
    boost = rng.random(n) < 0.5
    logits[boost, y_true[boost]] += 2.0
    weight = None
    if weighted:
        weight = rng.random(n) * 3.0
        weight[rng.random(n) < 0.1] = 0.0
    return y_true, logits, weight


def _close(backend, ours, expected, rtol=RTOL, atol=1e-14):
    value = backend.to_numpy(ours)
    assert value.dtype == np.float64, value.dtype
    np.testing.assert_allclose(value, expected, rtol=rtol, atol=atol)


CASES = {  # name -> (N, K, ties, weighted)
    "K2": (300, 2, False, False),
    "K3-weighted": (300, 3, False, True),
    "K10-ties": (500, 10, True, False),
    "K10-ties-weighted": (500, 10, True, True),
    "K50-weighted": (200, 50, False, True),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_log_loss_matches_sklearn(backend, rng, name, dtype):
    n, k, ties, weighted = CASES[name]
    y_true, logits, weight = _case(rng, n, k, ties=ties, weighted=weighted)
    proba = _softmax(logits).astype(dtype)
    rtol = RTOL if dtype == np.float64 else RTOL_FLOAT32
    t, p = backend.asarray(y_true), backend.asarray(proba)
    w = None if weight is None else backend.asarray(weight)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # float32 rows: sum within sqrt(eps)
        for normalize in (True, False):
            expected = skm.log_loss(y_true, proba, normalize=normalize, sample_weight=weight,
                                    labels=np.arange(k))
            _close(backend, mg.log_loss(t, p, normalize=normalize, sample_weight=w), expected,
                   rtol)
    # From logits: the softmax in the pass, against scikit-learn on float64 probabilities.
    expected = skm.log_loss(y_true, _softmax(logits), sample_weight=weight, labels=np.arange(k))
    ours = mg.log_loss(t, backend.asarray(logits.astype(dtype)), sample_weight=w,
                       from_logits=True)
    _close(backend, ours, expected, 1e-12 if dtype == np.float64 else 1e-5)


def test_log_loss_clips_and_binary_column(backend, rng):
    y_true = rng.integers(0, 2, 200)
    p1 = rng.random(200)
    p1[:10] = y_true[:10] == 0  # certain and wrong: clipped, not inf
    expected = skm.log_loss(y_true, p1)
    _close(backend, mg.log_loss(backend.asarray(y_true), backend.asarray(p1)), expected)
    # labels= names the classes of the columns: codes 3 and 7.
    codes = np.where(y_true == 1, 7, 3)
    expected = skm.log_loss(codes, np.stack([1 - p1, p1], axis=1), labels=[3, 7])
    ours = mg.log_loss(backend.asarray(codes), backend.asarray(np.stack([1 - p1, p1], axis=1)),
                       labels=[7, 3])
    _close(backend, ours, expected)


@pytest.mark.parametrize("name", sorted(CASES))
def test_brier_hinge_top_k_match_sklearn(backend, rng, name):
    n, k, ties, weighted = CASES[name]
    y_true, logits, weight = _case(rng, n, k, ties=ties, weighted=weighted)
    proba = _softmax(logits)
    t, p, z = backend.asarray(y_true), backend.asarray(proba), backend.asarray(logits)
    w = None if weight is None else backend.asarray(weight)
    labels = np.arange(k)
    for half in ("auto", True, False):
        expected = skm.brier_score_loss(y_true, proba, sample_weight=weight, labels=labels,
                                        scale_by_half=half)
        _close(backend, mg.brier_score_loss(t, p, sample_weight=w, scale_by_half=half), expected)
    # scikit-learn takes K = 2 as one decision column: the margin z_1 - z_0.
    decision = logits[:, 1] - logits[:, 0] if k == 2 else logits
    expected = skm.hinge_loss(y_true, decision, labels=labels, sample_weight=weight)
    _close(backend, mg.hinge_loss(t, z, sample_weight=w), expected)
    for top in sorted({1, 2, 3, k - 1, k}):
        for normalize in (True, False):
            if k == 2:
                # scikit-learn refuses (N, 2) scores for binary targets; its
                # ranking rule by hand: class 1 first on ties.
                hits = (np.where(logits[:, 1] >= logits[:, 0], 1, 0) == y_true) | (top >= 2)
                expected = np.average(hits, weights=weight) if normalize else (
                    hits * (1.0 if weight is None else weight)).sum()
            else:
                expected = skm.top_k_accuracy_score(y_true, logits, k=top, labels=labels,
                                                    normalize=normalize, sample_weight=weight)
            _close(backend, mg.top_k_accuracy_score(t, z, k=top, normalize=normalize,
                                                    sample_weight=w), expected)


@pytest.mark.parametrize("shape, k", [((30, 4), 4), ((30, 4), 6), ((30,), 2)],
                         ids=["k=K", "k>K", "binary-column"])
def test_top_k_of_every_class_warns_as_sklearn(backend, rng, shape, k):
    y_true = rng.integers(0, shape[1] if len(shape) == 2 else 2, shape[0])
    y_true[:4 if len(shape) == 2 else 2] = np.arange(4 if len(shape) == 2 else 2)
    scores = rng.random(shape)
    with pytest.warns(UserWarning, match=r"'k' \(\d\) greater than or equal "
                                         r"to 'n_classes'") as theirs:
        expected = skm.top_k_accuracy_score(y_true, scores, k=k)
    with pytest.warns(mg.UndefinedMetricWarning) as mine:
        _close(backend, mg.top_k_accuracy_score(backend.asarray(y_true), backend.asarray(scores),
                                                k=k), expected)
    assert [str(w.message) for w in mine] == [str(w.message) for w in theirs]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mg.top_k_accuracy_score(backend.asarray(y_true), backend.asarray(scores), k=1)


@pytest.mark.parametrize("scores", ["probabilities", "decision", "ties-at-threshold"])
def test_binary_column_matches_sklearn(backend, rng, scores):
    y_true = rng.integers(0, 2, 400)
    weight = rng.random(400)
    column = rng.random(400) if scores == "probabilities" else rng.normal(size=400)
    if scores == "ties-at-threshold":
        column[::3] = 0.0  # exactly the decision threshold
    t, c, w = backend.asarray(y_true), backend.asarray(column), backend.asarray(weight)
    for top in (1, 2):
        expected = skm.top_k_accuracy_score(y_true, column, k=top, sample_weight=weight)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _close(backend, mg.top_k_accuracy_score(t, c, k=top, sample_weight=w), expected)
    _close(backend, mg.hinge_loss(t, c, sample_weight=w),
           skm.hinge_loss(y_true, column, sample_weight=weight))
    if scores == "probabilities":
        for pos_label in (None, 0, 1):
            expected = skm.brier_score_loss(y_true, column, sample_weight=weight,
                                            pos_label=pos_label)
            _close(backend, mg.brier_score_loss(t, c, sample_weight=w, pos_label=pos_label),
                   expected)
        _close(backend, mg.log_loss(t, c, sample_weight=w),
               skm.log_loss(y_true, column, sample_weight=weight))


def _calibration_reference(y_true, proba, weight, n_bins):
    """ECE / RMS CE / MCE from the definition: np.digitize into [b/B, (b+1)/B)."""
    confidence = proba.max(axis=1)
    correct = (proba.argmax(axis=1) == y_true).astype(float)
    weight = np.ones(len(y_true)) if weight is None else weight
    edges = np.linspace(0.0, 1.0, n_bins + 1)[1:-1]
    index = np.digitize(confidence, edges)
    ece = l2 = mce = 0.0
    for b in range(n_bins):
        members = index == b
        mass = weight[members].sum()
        if mass == 0:
            continue
        gap = abs(np.average(correct[members], weights=weight[members])
                  - np.average(confidence[members], weights=weight[members]))
        ece += mass / weight.sum() * gap
        l2 += mass / weight.sum() * gap * gap
        mce = max(mce, gap)
    return {"l1": ece, "l2": np.sqrt(l2), "max": mce}


@pytest.mark.parametrize("n_bins", [1, 5, 15])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_calibration_error_from_definition(backend, rng, n_bins, weighted):
    y_true, logits, weight = _case(rng, 400, 6, weighted=weighted)
    proba = _softmax(logits)
    expected = _calibration_reference(y_true, proba, weight, n_bins)
    t, p = backend.asarray(y_true), backend.asarray(proba)
    w = None if weight is None else backend.asarray(weight)
    for norm, value in expected.items():
        _close(backend, mg.expected_calibration_error(t, p, n_bins=n_bins, norm=norm,
                                                      sample_weight=w), value, 1e-12)
        ours = mg.expected_calibration_error(t, backend.asarray(logits), n_bins=n_bins,
                                             norm=norm, sample_weight=w, from_logits=True)
        _close(backend, ours, value, 1e-9)


def test_logits_report_agrees_with_each_function(backend, rng):
    y_true, logits, weight = _case(rng, 600, 20, ties=True, weighted=True)
    t, z, w = backend.asarray(y_true), backend.asarray(logits), backend.asarray(weight)
    report = mg.logits_report(t, z, sample_weight=w, top_k=(1, 3, 5), n_bins=10)
    proba = _softmax(logits)
    _close(backend, report.accuracy, skm.accuracy_score(y_true, logits.argmax(axis=1),
                                                       sample_weight=weight))
    for k in (3, 5):
        _close(backend, report.top_k_accuracy[k], skm.top_k_accuracy_score(
            y_true, logits, k=k, labels=np.arange(20), sample_weight=weight))
    ce = skm.log_loss(y_true, proba, sample_weight=weight, labels=np.arange(20))
    _close(backend, report.cross_entropy, ce, 1e-12)
    _close(backend, report.perplexity, np.exp(ce), 1e-12)
    _close(backend, report.brier_score, skm.brier_score_loss(
        y_true, proba, sample_weight=weight, labels=np.arange(20), scale_by_half=False), 1e-12)
    _close(backend, report.hinge_loss, skm.hinge_loss(y_true, logits, labels=np.arange(20),
                                                      sample_weight=weight))
    reference = _calibration_reference(y_true, proba, weight, 10)
    _close(backend, report.expected_calibration_error, reference["l1"], 1e-12)
    _close(backend, report.max_calibration_error, reference["max"], 1e-12)
    _close(backend, report.total_weight, weight.sum())


def test_ignore_index_skips_rows(backend, rng):
    y_true, logits, _ = _case(rng, 300, 5)
    y_true[::4] = -100
    kept = y_true != -100
    ours = mg.log_loss(backend.asarray(y_true), backend.asarray(logits), from_logits=True,
                       ignore_index=-100)
    expected = skm.log_loss(y_true[kept], _softmax(logits[kept]), labels=np.arange(5))
    _close(backend, ours, expected, 1e-12)


# -- the kernel against the NumPy reference -------------------------------------

SCORE_DTYPES = ["float64", "float32", "float16", "bfloat16"]
# Widened scores are the same numbers; the kernel's per-element exponentials
# are float32 for 32-bit and narrower scores (sums in float64).
KERNEL_RTOL = {"float64": 1e-12, "float32": 2e-6, "float16": 2e-6, "bfloat16": 2e-6}


def _scores_of(dtype, values):
    if dtype == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        return values.astype(ml_dtypes.bfloat16)
    return values.astype(dtype)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("from_logits", [True, False], ids=["logits", "probabilities"])
@pytest.mark.parametrize("dtype", SCORE_DTYPES)
@pytest.mark.parametrize("shape", [(257, 2), (130, 3), (97, 33), (40, 1000)],
                         ids=lambda s: f"N{s[0]}-K{s[1]}")
def test_kernel_equals_reference(case, rng, shape, dtype, from_logits, weighted):
    n, k = shape
    y_true, logits, weight = _case(rng, n, k, ties=True, weighted=weighted)
    values = logits if from_logits else _softmax(logits)
    scores = _scores_of(dtype, values)
    y_true[3] = k + 5       # out of range: counted invalid, never read
    y_true[7] = -1          # ignored
    options = dict(from_logits=from_logits, clip_eps=1e-7, top_k=(1, 2, 5), n_bins=7,
                   one_vs_all=True, ignore_index=-1)
    expected = NUMPY_BACKEND.fused_logits_pass(y_true, scores, sample_weight=weight, **options)
    ours = case.impl.fused_logits_pass(case.put(y_true), case.put(scores),
                                       sample_weight=case.put(weight), **options)
    got = case.get(ours.buffer)
    assert got.shape == expected.buffer.shape
    assert got[6] == 1.0, "one out-of-range target"
    np.testing.assert_allclose(got, expected.buffer, rtol=KERNEL_RTOL[dtype],
                               atol=KERNEL_RTOL[dtype])


@pytest.mark.parametrize("terms", [("nll",), ("brier",), ("hinge",), ("one_vs_all",),
                                   ("correct", "confidence"), ()], ids=str)
@pytest.mark.parametrize("from_logits", [True, False], ids=["logits", "probabilities"])
def test_reference_computes_only_the_terms_asked_for(rng, from_logits, terms):
    """A function reads only its own terms; the NumPy pass computes only those,
    and each equals the full pass's (the kernel always computes every term)."""
    y_true, logits, weight = _case(rng, 300, 7, ties=True, weighted=True)
    scores = logits if from_logits else _softmax(logits)
    options = dict(sample_weight=weight, from_logits=from_logits, one_vs_all=True)
    full = NUMPY_BACKEND.fused_logits_pass(y_true, scores, top_k=(1, 3), n_bins=5, **options)
    selected = NUMPY_BACKEND.fused_logits_pass(y_true, scores, terms=terms, **options)
    with_ranks = NUMPY_BACKEND.fused_logits_pass(y_true, scores, terms=terms, top_k=(1, 3),
                                                 n_bins=5, **options)
    for name in ("weight", "invalid", *(t for t in terms if t != "confidence")):
        np.testing.assert_allclose(selected.slot(name), full.slot(name), rtol=RTOL)
    for name in {"nll", "brier", "hinge", "one_vs_all", "correct"} - set(terms):
        assert selected.slot(name) == 0.0, name
    # top_k and n_bins bring their own terms, whatever else was asked for.
    np.testing.assert_allclose(with_ranks.top_k_hits, full.top_k_hits, rtol=RTOL)
    for ours, reference in zip(with_ranks.bins(), full.bins()):
        np.testing.assert_allclose(ours, reference, rtol=RTOL)


def test_reference_rejects_unknown_terms(rng):
    y_true, logits, _ = _case(rng, 10, 3)
    with pytest.raises(ValueError, match="terms must be names"):
        NUMPY_BACKEND.fused_logits_pass(y_true, logits, terms=("nll", "entropy"))


def test_kernel_wide_vocabulary(case, rng):
    """K = 50,000 (a vocabulary): one row per warp, strided columns."""
    n, k = 24, 50_000
    logits = rng.normal(scale=3.0, size=(n, k)).astype(np.float32)
    y_true = rng.integers(0, k, n)
    logits[np.arange(n)[::2], y_true[::2]] += 12.0
    logits[5, 17] = logits[5, y_true[5]]  # a tie with the target
    options = dict(from_logits=True, top_k=(1, 5, 100), n_bins=15, one_vs_all=True)
    expected = NUMPY_BACKEND.fused_logits_pass(y_true, logits, **options)
    ours = case.impl.fused_logits_pass(case.put(y_true), case.put(logits), **options)
    np.testing.assert_allclose(case.get(ours.buffer), expected.buffer, rtol=2e-6, atol=2e-6)


def _mapping_launches(case, launches, rng, dtype, weighted, target_dtype, n, k, width,
                      columns):
    """Scores of (n, width) rows, passed as ``stored[:, columns]`` (k of them),
    with an out-of-range and an ignored target, on the kernel and on the NumPy
    reference, logits and probabilities: the buffers equal, and the launches
    of each pass (returned, one list per pass)."""
    y_true, logits, weight = _case(rng, n, width, ties=True, weighted=weighted)
    y_true = (y_true % k).astype(target_dtype)
    y_true[3] = k                            # out of range: counted, never read
    y_true[6] = -1                           # ignored
    passes = []
    for from_logits in (True, False):
        stored = _scores_of(dtype, logits if from_logits else _softmax(logits))
        options = dict(from_logits=from_logits, clip_eps=1e-7, top_k=(1, 3), n_bins=6,
                       one_vs_all=True, ignore_index=-1)
        expected = NUMPY_BACKEND.fused_logits_pass(
            y_true, np.ascontiguousarray(stored[:, columns]), sample_weight=weight, **options)
        launches.clear()
        ours = case.impl.fused_logits_pass(case.put(y_true), case.put(stored)[:, columns],
                                           sample_weight=case.put(weight), **options)
        np.testing.assert_allclose(case.get(ours.buffer), expected.buffer,
                                   rtol=KERNEL_RTOL[dtype], atol=KERNEL_RTOL[dtype],
                                   err_msg=f"K={k}")
        passes.append(list(launches))
    return passes


@pytest.mark.parametrize("target_dtype", [np.int32, np.int64], ids=["int32", "int64"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("dtype", SCORE_DTYPES)
def test_staged_kernel_on_tiles_of_rows(case, emulated_geometry, rng, launches, dtype, weighted,
                                        target_dtype):
    """fused_logits_staged (a thread per row, the block's rows copied through
    shared memory by column) at K = 1, 2, 7 and 32: many tiles per block and
    a last tile of a few rows, the copy's unrolled and remaining loads, an
    ignored and an out-of-range target. Equals the NumPy reference, logits
    and probabilities."""
    for n, k in ((2500, 1), (2500, 2), (611, 7), (197, 32)):
        for launched in _mapping_launches(case, launches, rng, dtype, weighted, target_dtype,
                                          n, k, k, slice(None)):
            assert [launch.kernel for launch in launched] == ["fused_logits_staged"]


def test_kernel_refuses_more_rows_per_block_than_its_counts_hold(case, rng, monkeypatch):
    """Unweighted calibration bins count a block's rows in 32 bits: a pass
    that would give a block 2**31 rows or more is refused, naming the limit
    (here with the limit lowered to 8 rows)."""
    from metrics_gpu.backends.launchers import base

    monkeypatch.setattr(base, "MAX_SAMPLES_PER_BLOCK", 8)
    y_true, logits, _ = _case(rng, 5000, 3)
    with pytest.raises(ValueError, match="exceed .* blocks x 2\\*\\*31 rows"):
        case.impl.fused_logits_pass(case.put(y_true), case.put(logits), n_bins=4)


# fused_logits_wide's tiles at test sizes: a warp per row from 8 columns, the
# block per row from 40 (the emulated block is 64 threads: two warps merge).
WIDE_TILES = {"warp": (8, 1 << 30), "block": (8, 40)}


@pytest.mark.parametrize("tile", sorted(WIDE_TILES))
@pytest.mark.parametrize("target_dtype", [np.int32, np.int64], ids=["int32", "int64"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("dtype", SCORE_DTYPES)
def test_wide_kernel_on_rows_at_every_alignment(case, rng, monkeypatch, launches, dtype,
                                                weighted, target_dtype, tile):
    """fused_logits_wide (16-byte loads, a tile of threads per row) on rows that
    start anywhere within 16 bytes: a column slice of rows of odd length, so
    each row has its own head (columns before the first 16-byte boundary),
    whole vectors and tail. With K = 9 some rows hold fewer than one load's
    worth of whole vectors; at K = 1100 every thread of a block runs the
    unrolled loads; ties and out-of-range targets too (rows of
    infinities: test_kernel_argmax_and_rank_of_special_rows). Equals the
    NumPy reference, logits and probabilities."""
    from metrics_gpu.backends.launchers import scores as score_launchers

    wide_from, block_from = WIDE_TILES[tile]
    monkeypatch.setattr(score_launchers, "SCORE_WIDE_COLUMNS", wide_from)
    monkeypatch.setattr(score_launchers, "SCORE_BLOCK_ROW_COLUMNS", block_from)
    for n, k, offset in ((37, 9, 1), (23, 61, 3), (19, 130, 0), (11, 1100, 5)):
        # Rows of an odd number of elements: their starts take every offset.
        for launched in _mapping_launches(case, launches, rng, dtype, weighted, target_dtype,
                                          n, k, k + offset + 3, slice(offset, offset + k)):
            wide = [launch for launch in launched if launch.kernel == "fused_logits_wide"]
            assert len(wide) == 1, [launch.expression for launch in launched]
            assert wide[0].args[7] == (wide[0].block if k >= block_from else 32)


@pytest.mark.parametrize("top_k", [(5, 1, 3, 3, 100, 2, 1, 7), (4,), (9, 2)], ids=str)
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_kernel_top_k_in_any_order(case, rng, top_k, weighted):
    """The kernel's top-k buckets (kernels/scores.cu top_k_bucket) give each
    value its own hits whatever the order, with repeats, values past K and
    all kMaxTopK slots used; rows with tied scores rank as the reference."""
    y_true, logits, weight = _case(rng, 301, 9, ties=True, weighted=weighted)
    options = dict(from_logits=True, top_k=top_k, n_bins=4)
    expected = NUMPY_BACKEND.fused_logits_pass(y_true, logits, sample_weight=weight, **options)
    ours = case.impl.fused_logits_pass(case.put(y_true), case.put(logits),
                                       sample_weight=case.put(weight), **options)
    np.testing.assert_allclose(case.get(ours.buffer), expected.buffer, rtol=1e-12, atol=1e-12)
    hits = case.get(ours.top_k_hits)
    order = np.argsort(top_k, kind="stable")
    assert np.all(np.diff(hits[order]) >= 0), "hits grow with k"
    for i, j in itertools.combinations(range(len(top_k)), 2):
        assert top_k[i] != top_k[j] or hits[i] == hits[j], "a repeated value, other hits"


# Thresholds of (fused_logits_wide's warp, its block, fused_logits_staged's
# most columns) for each row mapping, and the kernel it launches.
ROW_MAPPINGS = {
    "lanes": ((1 << 30, 1 << 30, 0), "fused_logits_pass"),
    "staged": ((1 << 30, 1 << 30, 1 << 30), "fused_logits_staged"),
    "warp": ((4, 1 << 30, 0), "fused_logits_wide"),
    "block": ((4, 4, 0), "fused_logits_wide"),
}


def _use_mapping(monkeypatch, mapping):
    from metrics_gpu.backends.launchers import scores as score_launchers

    (wide_from, block_from, staged_up_to), kernel = ROW_MAPPINGS[mapping]
    monkeypatch.setattr(score_launchers, "SCORE_WIDE_COLUMNS", wide_from)
    monkeypatch.setattr(score_launchers, "SCORE_BLOCK_ROW_COLUMNS", block_from)
    monkeypatch.setattr(score_launchers, "SCORE_STAGED_COLUMNS", staged_up_to)
    return kernel


@pytest.mark.parametrize("mapping", sorted(ROW_MAPPINGS))
@pytest.mark.parametrize("k", [5, 40, 300], ids=lambda k: f"K{k}")
def test_kernel_argmax_and_rank_of_special_rows(case, emulated_geometry, rng, monkeypatch,
                                                launches, k, mapping):
    """The scan's argmax and rank (one lane's columns in order, then the
    shuffles) on rows NumPy decides by its own rules: ties of the max in
    several lanes and chunks, the first of several NaN, +inf twice, a row of
    -inf only (argmax 0), -inf next to numbers. Only the argmax hits and the
    top-k hits are compared: the other sums of such rows are NaN or inf.
    Each row mapping: lanes per row, a thread per row staged through shared
    memory (K = 300 does not fit: lanes), a warp per row, the block per row."""
    kernel = _use_mapping(monkeypatch, mapping)
    if mapping == "staged" and k == 300:
        kernel = "fused_logits_pass"  # 300 double columns of a block exceed 48 KiB
    n = 64
    logits = np.round(rng.normal(size=(n, k)))
    y_true = rng.integers(0, k, n)
    far = k - 1
    logits[0, :] = 3.0                                    # every column ties
    logits[1, [2, far]] = 9.0                             # a tie of the max, two lanes
    logits[2, [far, 1]] = np.nan                          # NaN beats numbers: the first
    logits[3, [1, far]] = np.inf                          # +inf twice: the first
    logits[4, :] = -np.inf                                # argmax 0
    logits[5, ::2] = -np.inf                              # -inf beside numbers
    y_true[:6] = [0, 2, 1, 1, 0, 1]
    y_true[6:12] = [far, far, 2, far, 3 % k, 1]           # the same rows, other targets
    logits[6:12] = logits[:6]
    options = dict(from_logits=False, top_k=(1, 2, 3), n_bins=0)
    expected = NUMPY_BACKEND.fused_logits_pass(y_true, logits, **options)
    ours = case.impl.fused_logits_pass(case.put(y_true), case.put(logits), **options)
    got = case.get(ours.buffer)
    assert [launch.kernel for launch in launches] == [kernel]
    assert got[SLOT_CORRECT] == expected.buffer[SLOT_CORRECT]
    np.testing.assert_array_equal(case.get(ours.top_k_hits), expected.top_k_hits)


def _rows_at_bin_edges(rng, n, k, n_bins):
    """(targets, float32 logits) of n rows whose float64 confidence (max
    probability, 1 / sum_j exp(z_j - m)) lies within float32 rounding of a
    calibration bin edge: each row's other logits shifted by the d that
    makes it the edge b / n_bins nearest its own, then rounded to float32."""
    y_true = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k)).astype(np.float32).astype(np.float64)
    logits[np.arange(n), y_true] += 2.0
    ordered = np.sort(logits, axis=1)
    m, second = ordered[:, -1], ordered[:, -2]
    others = np.exp(logits - m[:, None]).sum(axis=1) - 1.0  # s - 1
    edge = np.clip(np.round(n_bins / (1.0 + others)), 1, n_bins - 1)
    d = np.log((n_bins / edge - 1.0) / others)  # 1 + others e^d = n_bins / edge
    d[second + d >= m] = 0.0  # the max stays the max
    logits += np.where(logits < m[:, None], d[:, None], 0.0)
    return y_true, logits.astype(np.float32)


@pytest.mark.parametrize("k", [10, 32], ids=lambda k: f"K{k}")
def test_every_mapping_bins_rows_at_an_edge_within_float32(case, emulated_geometry, rng,
                                                           monkeypatch, launches, k):
    """Each row mapping against the float64 reference and every other, on
    logits whose confidence lies within float32 rounding of a calibration bin
    edge. A row's exp sum is float32 arithmetic in its mapping's order, so
    such a row lands on either side of the edge, differently in each mapping
    (no mapping is wrong; about one random row in 10^7 is binned otherwise
    than in float64, and bench/gpu_mappings.py, holding every bin to rtol
    1e-6, reported staged and the others DISAGREE at K = 10 and 32 on an
    H100, N = 5e7 and 1.6e7). The bench's rule (its ``disagreement``): the
    scalar sums and top-k hits to rtol 1e-6, each bin's cells to rtol 1e-6
    and the rows at its two edges (``rows_at_bin_edges``), the bins' totals
    to rtol 1e-6; a row lost from the sums or from a bin still fails it."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent / "bench"))
    bench = importlib.import_module("gpu_mappings")
    n_bins, top_k = bench.N_BINS, bench.TOP_K
    y_true, logits = _rows_at_bin_edges(rng, 96, k, n_bins)
    edge_rows = bench.rows_at_bin_edges(np, logits, n_bins)
    assert edge_rows.sum() >= 0.8 * y_true.size, edge_rows  # most rows are at an edge

    def disagreement(values, reference):
        return bench.disagreement(values, reference, edge_rows, len(top_k), n_bins)

    options = dict(from_logits=True, top_k=top_k, n_bins=n_bins)
    expected = NUMPY_BACKEND.fused_logits_pass(y_true, logits, **options).buffer
    sums = {}
    for mapping in sorted(ROW_MAPPINGS):
        kernel = _use_mapping(monkeypatch, mapping)
        launches.clear()
        ours = case.impl.fused_logits_pass(case.put(y_true), case.put(logits), **options)
        assert [launch.kernel for launch in launches] == [kernel]
        sums[mapping] = case.get(ours.buffer)
        assert disagreement(sums[mapping], expected) == [], mapping
    for a, b in itertools.combinations(sorted(sums), 2):
        assert disagreement(sums[a], sums[b]) == [], (a, b)
    lost = NUMPY_BACKEND.fused_logits_pass(y_true[1:], logits[1:], **options).buffer
    assert "weight" in disagreement(sums["staged"], lost)
    lost_from_a_bin = sums["staged"].copy()
    first_bin = len(SCORE_SLOTS) + len(top_k)
    lost_from_a_bin[first_bin + np.argmax(expected[first_bin:first_bin + n_bins])] -= 1.0
    assert "bins' weight" in disagreement(lost_from_a_bin, expected)


@pytest.mark.parametrize("n_bins", [1, 2, 3, 7, 10, 15, 22, 100, 1000, 1024])
def test_kernel_calibration_bins_at_and_beside_every_edge(case, n_bins):
    """Each confidence lands in the bin NumPy's calibration_bin picks: the
    doubles nearest b / B, one ulp either side, 0, 1, just past 1, and values
    between edges (the kernel's shortcut away from an edge). K = 1, so a row's
    confidence is its one probability."""
    edges = np.arange(n_bins + 1) / n_bins
    values = np.concatenate([edges, np.nextafter(edges, -np.inf), np.nextafter(edges, np.inf),
                             (np.arange(n_bins) + 0.37) / n_bins, [0.0, 1.0, 1.0 + 1e-12]])
    values = values[(values >= 0) & (values <= 1.0 + 1e-12)]
    y_true = np.zeros(values.size, dtype=np.int64)
    scores = values[:, None]
    options = dict(from_logits=False, n_bins=n_bins)
    expected = NUMPY_BACKEND.fused_logits_pass(y_true, scores, **options)
    ours = case.impl.fused_logits_pass(case.put(y_true), case.put(scores), **options)
    weights = [case.get(part) for part in ours.bins()][0]
    np.testing.assert_array_equal(weights, expected.bins()[0])
    np.testing.assert_allclose(case.get(ours.buffer), expected.buffer, rtol=1e-12, atol=1e-12)


def test_kernel_strided_scores(case, rng):
    """A transposed (column-major) view is read with its strides, not misread."""
    y_true, logits, _ = _case(rng, 64, 9)
    strided = np.asfortranarray(logits)
    expected = NUMPY_BACKEND.fused_logits_pass(y_true, logits, top_k=(2,), n_bins=3)
    ours = case.impl.fused_logits_pass(case.put(y_true), case.put(strided), top_k=(2,),
                                       n_bins=3)
    np.testing.assert_allclose(case.get(ours.buffer), expected.buffer, rtol=1e-12)


# -- errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: mg.log_loss([0, 1], [[0.5, 0.6], [0.2, 1.2]]), r"y_proba.*\[0, 1\].*1\.2"),
        (lambda: mg.log_loss([0, 1], [[0.5, 0.5], [np.nan, 0.5]]), r"y_proba.*finite.*nan"),
        (lambda: mg.log_loss([0, 1, 1], [[0.5, 0.5], [0.5, 0.5]]), r"3 samples.*2 rows"),
        (lambda: mg.log_loss([0, 2], [[0.5, 0.5], [0.5, 0.5]]), r"y_true.*2"),
        (lambda: mg.log_loss([0, 1], [[0.5, 0.5], [0.5, 0.5]], labels=[0, 1, 2]),
         r"labels has 3 classes.*2 columns"),
        (lambda: mg.log_loss([0, 5], [[0.5, 0.5], [0.5, 0.5]], labels=[0, 1]),
         r"y_true contains 5.*not in labels"),
        (lambda: mg.log_loss([0, 1], None), r"y_proba is required"),
        (lambda: mg.log_loss([0, 1], [[0.5, 0.5], [0.5, 0.5]], sample_weight=[1, -1]),
         r"sample_weight"),
        (lambda: mg.top_k_accuracy_score([0, 1], [[1.0, 0.0], [0.0, 1.0]], k=0), r"k must"),
        (lambda: mg.expected_calibration_error([0], [[1.0, 0.0]], n_bins=0), r"n_bins"),
        (lambda: mg.expected_calibration_error([0], [[1.0, 0.0]], norm="l3"), r"norm"),
        (lambda: mg.logits_report([0], [[1.0, 0.0]], top_k=tuple(range(1, 10))), r"top_k"),
        (lambda: mg.brier_score_loss([0, 1], [0.2, 0.7], pos_label=2), r"pos_label"),
        (lambda: mg.hinge_loss([0, 1], np.zeros((2, 2, 2))), r"pred_decision.*shape"),
    ],
    ids=["above-1", "nan", "length", "target-out-of-range", "labels-length",
         "target-not-in-labels", "missing", "negative-weight", "k-0", "bins-0", "norm",
         "too-many-k", "pos-label", "3-d"],
)
def test_bad_input_raises(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_rows_not_summing_to_one_warn(backend):
    with pytest.warns(UserWarning, match="do not sum to one"):
        mg.log_loss(backend.asarray(np.array([0, 1])),
                    backend.asarray(np.array([[0.5, 0.4], [0.2, 0.8]])))


@pytest.mark.parametrize("k", [2, 3, 5], ids=["K2", "K3", "K5"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_every_report_brier_is_sklearns(backend, rng, k, weighted):
    """Issue 47 item 10: a report's ``brier_score`` is scikit-learn's
    ``brier_score_loss`` with its default ``scale_by_half="auto"`` (halved for
    K = 2, was twice it), as this package's own: logits_report's checked pass
    (scores.cu) and its one pass (streaming.cu), ClassificationMetrics'
    compute, and for K = 2 the (N,) scores of class 1."""
    y_true, logits, weight = _case(rng, 120, k, weighted=weighted)
    proba = _softmax(logits)
    expected = skm.brier_score_loss(y_true, proba, sample_weight=weight, labels=np.arange(k))
    t, p = backend.asarray(y_true), backend.asarray(proba)
    w = None if weight is None else backend.asarray(weight)
    _close(backend, mg.brier_score_loss(t, p, sample_weight=w), expected)
    for validate in (True, False):
        report = mg.logits_report(t, p, from_logits=False, sample_weight=w, validate=validate)
        _close(backend, report.brier_score, expected, atol=1e-15)
        assert report["brier_score"] == report.brier_score
    stream = mg.ClassificationMetrics(k, scores="probabilities")
    stream.update(t, p, w)
    _close(backend, stream.compute()["brier_score"], expected)
    if k == 2:
        column = backend.asarray(np.ascontiguousarray(proba[:, 1]))
        _close(backend, mg.logits_report(t, column, from_logits=False,
                                         sample_weight=w).brier_score,
               skm.brier_score_loss(y_true, proba[:, 1], sample_weight=weight))


@pytest.mark.parametrize("k", [1, 2, 3, 5, 6], ids=lambda k: f"K{k}")
def test_reports_leave_out_top_k_of_every_class(backend, rng, k):
    """Issue 47 item 14: a top-k accuracy with k >= K is 1 whatever the scores;
    logits_report (both passes) and ClassificationMetrics' report leave it out
    and keep every k < K, with scikit-learn's value."""
    n = 60
    y_true, logits, _ = _case(rng, n, max(k, 2))
    logits = logits[:, :k]
    y_true = np.minimum(y_true, k - 1)
    ks = (1, 2, 3, 5)
    shown = [top for top in ks if top < k]
    t, z = backend.asarray(y_true), backend.asarray(logits)
    reports = [mg.logits_report(t, z, top_k=ks, validate=validate) for validate in (True, False)
               ] if k > 1 else []
    stream = mg.ClassificationMetrics(k, top_k=ks)
    stream.update(t, z)
    reports.append(stream.compute())
    for report in reports:
        names = [name for name in report if name.startswith("top_")]
        assert names == [f"top_{top}_accuracy" for top in shown], type(report).__name__
        for top in shown if k > 2 else ():  # (scikit-learn refuses (N, 2) binary scores)
            _close(backend, report[f"top_{top}_accuracy"],
                   skm.top_k_accuracy_score(y_true, logits, k=top, labels=np.arange(k)))


@pytest.mark.parametrize("call", ["log_loss", "brier_score_loss", "logits_report",
                                  "expected_calibration_error", "log_loss-lists"])
def test_probabilities_warning_points_at_the_callers_line(backend, call):
    """Issue 47 item 13: rows that do not sum to 1 warn as scikit-learn does,
    attributed to the line that called the metric (was metrics_gpu/backends/selection.py)."""
    y_true = np.array([0, 1, 1, 0])
    proba = np.array([[0.8, 0.1], [0.2, 0.7], [0.3, 0.6], [0.9, 0.2]])
    t, p = backend.asarray(y_true), backend.asarray(proba)
    options = {"logits_report": dict(from_logits=False)}.get(call, {})
    function = getattr(mg, call.split("-")[0])
    if call.endswith("lists"):
        t, p = y_true.tolist(), proba.tolist()
    with pytest.warns(UserWarning, match="do not sum to one") as caught:
        function(t, p, **options)
    assert {Path(w.filename).resolve() for w in caught} == {Path(__file__).resolve()}, \
        [w.filename for w in caught]
