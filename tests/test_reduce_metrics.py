"""The one-launch metric reduction (``kernels/reduce_metrics.cu``).

Held to two references: the NumPy buffer of
:func:`metrics_gpu._formulas.labels.label_metric_values` (every slot and per-class
column, for every kind of state), and scikit-learn on samples expanded from
the same matrix (independent of our formulas). Runs on each kernel backend
that can run here (``case`` fixture in ``conftest.py``).
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from sklearn import metrics as skm

import metrics_gpu
from metrics_gpu.backends.selection import get_backend_implementation
from metrics_gpu._formulas.labels import (
    LABEL_METRIC_COLUMNS,
    LABEL_METRIC_COUNTS,
    LABEL_METRIC_SLOTS,
    SLOT,
    label_metric_columns,
)
from metrics_gpu.backends.kernel_sources import kernel_source
from metrics_gpu._formulas.state import statistics_from_matrix
from metrics_gpu.backends.launchers.base import BLOCKS_PER_MULTIPROCESSOR, WARP_SIZE
from metrics_gpu.backends.launchers.reduce_metrics import (
    REDUCE_MAX_BLOCK_THREADS,
    REDUCE_TILE_COLUMNS,
    matrix_tiles,
)
from metrics_gpu.backends.launchers.reduce_metrics import SOURCE as REDUCE_SOURCE

NUMPY = get_backend_implementation("numpy")
RTOL = 1e-12


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name[1:]).lower()


def _enum(source: str, name: str) -> list[str]:
    body = re.search(rf"enum {name} \{{(.*?)\}};", source, re.S).group(1)
    body = re.sub(r"//[^\n]*", "", body)
    return [_snake(item.strip()) for item in body.split(",") if item.strip()]


def test_buffer_layout_matches_the_kernel():
    source = kernel_source(REDUCE_SOURCE)
    assert _enum(source, "Slot") == [*LABEL_METRIC_SLOTS, "slot_count"]
    assert _enum(source, "Column") == [*LABEL_METRIC_COLUMNS, "column_count"]


# -- states ---------------------------------------------------------------------------


def _matrix(rng, size, *, weighted, absent=0.0, empty=False):
    if empty:
        return np.zeros((size, size), np.float64 if weighted else np.int64)
    if weighted:
        matrix = rng.random((size, size)) * 3 * (rng.random((size, size)) < 0.6)
    else:
        matrix = rng.integers(0, 6, (size, size)) * (rng.random((size, size)) < 0.6)
    drop = rng.random(size) < absent
    matrix[drop, :] = 0
    matrix[:, drop] = 0
    return matrix


def _observed(matrix):
    return (matrix.sum(axis=0) > 0) | (matrix.sum(axis=1) > 0)


def _assert_buffers(actual, expected, context=""):
    actual = np.asarray(actual)
    assert actual.shape == expected.shape
    close = np.isclose(actual, expected, rtol=RTOL, atol=RTOL, equal_nan=True)
    if not close.all():
        names = [LABEL_METRIC_SLOTS[i] if i < len(LABEL_METRIC_SLOTS) else f"column[{i}]"
                 for i in np.flatnonzero(~close)]
        pytest.fail(f"{context}: {names[:8]} differ: "
                    f"{actual[~close][:8].tolist()} vs {expected[~close][:8].tolist()}")


# K: one class, K = 2, several tiles of the emulated 64-thread block, and more
# rows than the grid has blocks.
SIZES = (1, 2, 3, 17, 65, 150)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("weighted", [False, True], ids=["counts", "weights"])
@pytest.mark.parametrize("selection", ["all", "present"])
def test_from_matrix_equals_reference(case, rng, size, weighted, selection):
    matrix = _matrix(rng, size, weighted=weighted, absent=0.3 if selection == "present" else 0)
    observed = _observed(matrix)
    selected = None if selection == "all" else observed
    values, stats = case.impl.label_metrics_from_matrix(
        case.put(matrix), case.put(observed), selected=case.put(selected))
    expected, expected_stats = NUMPY.label_metrics_from_matrix(matrix, observed, selected=selected)
    _assert_buffers(case.get(values), expected, f"K={size}")
    for field in ("true_positives", "support", "predicted"):
        got = case.get(getattr(stats, field))
        assert got.dtype == getattr(expected_stats, field).dtype
        np.testing.assert_allclose(got, getattr(expected_stats, field), rtol=RTOL)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("weighted", [False, True], ids=["counts", "weights"])
@pytest.mark.parametrize("moments", [True, False], ids=["moments", "no-moments"])
def test_from_statistics_equals_reference(case, rng, size, weighted, moments):
    matrix = _matrix(rng, size, weighted=weighted, absent=0.2)
    observed = _observed(matrix)
    stats = statistics_from_matrix(matrix, observed, np, moments=moments, selected=observed)
    device_stats = type(stats)(**{
        name: (case.put(value) if isinstance(value, np.ndarray) else value)
        for name, value in vars(stats).items()
    })
    values = case.impl.label_metrics(device_stats, selected=case.put(observed))
    expected = NUMPY.label_metrics(stats, selected=observed)
    _assert_buffers(case.get(values), expected, f"K={size}")
    if not moments:  # weighted kappa needs the moments: NaN without them
        kappas = [SLOT["linear_weighted_kappa"], SLOT["quadratic_weighted_kappa"]]
        assert np.isnan(case.get(values)[kappas]).all()


@pytest.mark.parametrize("selection", ["all", "none-selected"])
def test_empty_matrix(case, selection):
    matrix = np.zeros((4, 4), np.int64)
    selected = None if selection == "all" else np.zeros(4, bool)
    values, _ = case.impl.label_metrics_from_matrix(
        case.put(matrix), case.put(np.zeros(4, bool)), selected=case.put(selected))
    expected, _ = NUMPY.label_metrics_from_matrix(matrix, np.zeros(4, bool), selected=selected)
    _assert_buffers(case.get(values), expected)
    got = case.get(values)
    assert np.isnan(got[SLOT["accuracy"]]) and got[SLOT["kappa_undefined"]] == 1.0
    assert got[SLOT["matthews_corrcoef"]] == 0.0


@pytest.mark.parametrize("budget", [
    # The device's own budget: K = 3073 on the emulated device, 9.4 million
    # cells, minutes on the emulator; the exhaustive tier runs it there.
    pytest.param(None, id="device-budget", marks=pytest.mark.exhaustive_on_emulated),
    # A device of 8 KiB a block: K = 513, past that budget, and still one
    # row tile of many column tiles on the emulated device (as K = 3073).
    pytest.param(8 * 1024, id="8KiB-budget"),
])
def test_matrix_past_the_shared_memory_budget_is_one_matrix_launch(case, rng, launches,
                                                                   monkeypatch, budget):
    # K * (8 + 8) bytes would exceed a block's shared memory: the matrix
    # kernel keeps nothing of size K there (tiles of 32 columns, partials in
    # global memory), so it reduces any dense matrix, in one launch.
    if budget is not None:
        for name in ("shared_memory_per_block", "shared_memory_per_block_optin"):
            monkeypatch.setattr(type(case.device), name, budget)
    size = case.device.shared_memory_per_block // 16 + 1
    matrix = np.zeros((size, size), np.int64)
    index = rng.integers(0, size, (2, 5000))
    np.add.at(matrix, (index[0], index[1]), 1)
    observed = _observed(matrix)
    values, _ = case.impl.label_metrics_from_matrix(case.put(matrix), case.put(observed),
                                                    selected=case.put(observed))
    expected, _ = NUMPY.label_metrics_from_matrix(matrix, observed, selected=observed)
    _assert_buffers(case.get(values), expected)
    assert [(launch.kernel, launch.shared_bytes) for launch in launches] == [
        ("label_metrics_from_matrix", 0)]


@pytest.mark.parametrize("size, multiprocessors, block, expected", [
    # An H100's 132 SMs: 32 column tiles of 31 rows, 8 blocks an SM (two
    # waves of the 4 it holds at 64 registers a thread).
    (1000, 132, 256, (31, 33, 32)),
    (2048, 132, 256, (121, 17, 64)),
    # Small matrices: a row per warp at least, so fewer blocks.
    (100, 132, 256, (9, 12, 4)),
    (7, 132, 256, (7, 1, 1)),
    (1, 132, 256, (1, 1, 1)),
    # The emulated device: 2 SMs, 64 threads a block.
    (150, 2, 64, (38, 4, 5)),
    (300, 2, 64, (150, 2, 10)),
])
def test_matrix_tiles_fill_two_waves_where_there_are_rows(size, multiprocessors, block,
                                                          expected):
    tile_rows, row_tiles, column_tiles = matrix_tiles(size, multiprocessors, block)
    assert (tile_rows, row_tiles, column_tiles) == expected
    assert column_tiles == -(-size // REDUCE_TILE_COLUMNS)
    assert (row_tiles - 1) * tile_rows < size <= row_tiles * tile_rows  # no empty tile
    # Two waves, or as many tiles as have a row per warp of the block.
    fewest_rows = block // WARP_SIZE
    assert (row_tiles * column_tiles >= multiprocessors * BLOCKS_PER_MULTIPROCESSOR
            or row_tiles == max(1, size // fewest_rows))


def test_matrix_launch_is_the_tiled_grid(emulated_geometry, rng, launches):
    # The emulated device's geometry on every backend (2 SMs, 64 threads a
    # block): K = 150 is rows enough for two waves of its SMs.
    case = emulated_geometry
    size = 150
    matrix = _matrix(rng, size, weighted=False)
    observed = _observed(matrix)
    case.impl.label_metrics_from_matrix(case.put(matrix), case.put(observed))
    (launch,) = launches
    block = min(case.device.block_threads, REDUCE_MAX_BLOCK_THREADS)
    tile_rows, row_tiles, column_tiles = matrix_tiles(size, case.device.multiprocessor_count,
                                                      block)
    assert (launch.grid, launch.block, launch.shared_bytes) == (row_tiles * column_tiles, block, 0)
    assert launch.args[4] == tile_rows
    assert launch.grid >= 2 * case.device.multiprocessor_count  # two waves at least
    tickets = case.get(launch.args[-2])
    assert tickets.size == row_tiles + column_tiles + 1 and not tickets.any()  # zero again


@pytest.mark.parametrize("size", [12, 65, 300])
@pytest.mark.parametrize("weighted", [False, True], ids=["counts", "dyadic-weights"])
def test_absent_classes_do_not_change_the_bits(case, rng, size, weighted):
    # A dense matrix whose absent classes are masked out, and the compacted
    # statistics of its present classes, are the same data: every slot and the
    # present classes' columns agree bit for bit (exact inputs), however the
    # absent classes fall among the threads' tiles. Skewed data (one dominant
    # cell) makes the centred kappa sums and the rate sums round. Four random
    # placements a case (six cases: 24 in all; eight a case took 63 s of the
    # fast tier on 2 cores).
    for trial in range(4):
        matrix = _matrix(rng, size, weighted=False, absent=0.5)
        matrix[0, size - 1] += 40 * size
        if weighted:
            matrix = matrix * 0.125  # multiples of 1/8: every count sum is exact
        observed = _observed(matrix)
        present = np.flatnonzero(observed)
        dense, _ = case.impl.label_metrics_from_matrix(
            case.put(matrix), case.put(observed), selected=case.put(observed))
        compact = matrix[np.ix_(present, present)]
        stats = statistics_from_matrix(compact, np.ones(present.size, bool), np, moments=True)
        device_stats = type(stats)(**{
            name: (case.put(value) if isinstance(value, np.ndarray) else value)
            for name, value in vars(stats).items()
        })
        compacted = case.get(case.impl.label_metrics(device_stats))
        dense = case.get(dense)
        slots = len(LABEL_METRIC_SLOTS)
        np.testing.assert_array_equal(dense[:slots], compacted[:slots],
                                      err_msg=f"trial {trial}")
        for column in range(len(LABEL_METRIC_COLUMNS)):
            np.testing.assert_array_equal(
                dense[slots + column * size:][present],
                compacted[slots + column * present.size:][:present.size],
                err_msg=f"trial {trial}, column {LABEL_METRIC_COLUMNS[column]}")


def test_deterministic_bits(case, rng):
    matrix = _matrix(rng, 150, weighted=True)
    observed = _observed(matrix)
    runs = [case.get(case.impl.label_metrics_from_matrix(case.put(matrix), case.put(observed))[0])
            for _ in range(3)]
    for run in runs[1:]:
        assert run.tobytes() == runs[0].tobytes()


def test_huge_k_statistics(case, rng):
    # Huge K: 256,000 classes in O(K), one block in one launch.
    size = 256_000
    true = rng.integers(0, size, 20_000)
    pred = np.where(rng.random(true.size) < 0.5, true, rng.integers(0, size, true.size))
    stats = NUMPY.class_statistics(true, pred, num_classes=size, moments=True)
    device_stats = type(stats)(**{
        name: (case.put(value) if isinstance(value, np.ndarray) else value)
        for name, value in vars(stats).items()
    })
    values = case.get(case.impl.label_metrics(device_stats))
    _assert_buffers(values, NUMPY.label_metrics(stats), "K=256000")
    assert values[SLOT["accuracy"]] == pytest.approx(skm.accuracy_score(true, pred), rel=RTOL)


# -- against scikit-learn ----------------------------------------------------------------


def _samples(matrix):
    size = matrix.shape[0]
    rows, columns = np.nonzero(matrix)
    counts = matrix[rows, columns]
    if matrix.dtype.kind == "f":
        return rows, columns, counts  # one weighted sample per cell
    return np.repeat(rows, counts), np.repeat(columns, counts), None


@pytest.mark.parametrize("weighted", [False, True], ids=["counts", "weights"])
@pytest.mark.parametrize("size", [2, 5, 40])
def test_against_scikit_learn(case, rng, weighted, size):
    matrix = _matrix(rng, size, weighted=weighted, absent=0.2)
    matrix[-1, 0] += 1  # never empty (scikit-learn refuses no samples)
    observed = _observed(matrix)
    values, _ = case.impl.label_metrics_from_matrix(case.put(matrix), case.put(observed),
                                                    selected=case.put(observed))
    got = dict(zip(LABEL_METRIC_SLOTS, case.get(values)))
    t, p, w = _samples(matrix)
    warnings.simplefilter("ignore")  # scikit-learn's notes on absent classes (reset by pytest)
    expected = {
        "accuracy": skm.accuracy_score(t, p, sample_weight=w),
        "balanced_accuracy": skm.balanced_accuracy_score(t, p, sample_weight=w),
        "matthews_corrcoef": skm.matthews_corrcoef(t, p, sample_weight=w),
        "cohen_kappa": skm.cohen_kappa_score(t, p, sample_weight=w),
        "linear_weighted_kappa": skm.cohen_kappa_score(t, p, weights="linear", sample_weight=w),
        "quadratic_weighted_kappa": skm.cohen_kappa_score(t, p, weights="quadratic",
                                                          sample_weight=w),
        "hamming_loss": skm.hamming_loss(t, p, sample_weight=w),
    }
    for average in ("micro", "macro", "weighted"):
        expected[f"{average}_precision"] = skm.precision_score(
            t, p, average=average, sample_weight=w, zero_division=0)
        expected[f"{average}_recall"] = skm.recall_score(
            t, p, average=average, sample_weight=w, zero_division=0)
        expected[f"{average}_f1"] = skm.f1_score(
            t, p, average=average, sample_weight=w, zero_division=0)
    expected["macro_jaccard"] = skm.jaccard_score(t, p, average="macro", sample_weight=w,
                                                  zero_division=0)
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, rel=1e-9, abs=1e-12), name
    classes = np.flatnonzero(observed)
    columns = label_metric_columns(case.get(values), size)
    f1 = skm.f1_score(t, p, labels=classes, average=None, sample_weight=w, zero_division=0)
    np.testing.assert_allclose(columns[LABEL_METRIC_COLUMNS.index("f1")][classes], f1,
                               rtol=1e-9)


# -- one launch, no host reads -------------------------------------------------------------


def test_report_is_one_reduction_launch(case, rng, launches):
    true = rng.integers(0, 7, 3000)
    pred = rng.integers(0, 7, 3000)
    with metrics_gpu.use_backend(case.name):
        report = metrics_gpu.label_report(case.put(true), case.put(pred), num_classes=7)
    reductions = [launch for launch in launches if launch.expression.startswith("label_metrics")]
    assert [launch.kernel for launch in reductions] == ["label_metrics_from_matrix"]
    expected = metrics_gpu.label_report(true, pred, num_classes=7)
    for name, value in expected.metrics.items():
        assert report.metrics[name] == pytest.approx(value, rel=RTOL, nan_ok=True), name


def test_functions_read_nothing_back(case, rng, monkeypatch):
    # With num_classes given and validate=False, nothing is read back to the
    # host: the results stay where the kernels wrote them (the report reads
    # them on first access).
    true = rng.integers(0, 5, 2000)
    pred = rng.integers(0, 5, 2000)

    def refuse(*args, **kwargs):
        raise AssertionError("a result was read back to the host")

    monkeypatch.setattr(case.impl, "to_host", refuse)
    monkeypatch.setattr(case.device, "to_host", refuse)
    arguments = dict(num_classes=5, validate=False)
    t, p = case.put(true), case.put(pred)
    with metrics_gpu.use_backend(case.name):
        results = {
            "accuracy": metrics_gpu.accuracy_score(t, p, **arguments),
            "mcc": metrics_gpu.matthews_corrcoef(t, p, **arguments),
            "zero_one": metrics_gpu.zero_one_loss(t, p, normalize=False, **arguments),
            "hamming": metrics_gpu.hamming_loss(t, p, **arguments),
        }
        report = metrics_gpu.label_report(t, p, **arguments)
        # The in-loop step: logits in, every label metric out.
        logits = rng.normal(size=(true.size, 5)).astype(np.float32)
        logits_report = metrics_gpu.label_report(t, case.put(logits), validate=False)
    monkeypatch.undo()
    assert report.metrics["accuracy"] == pytest.approx(skm.accuracy_score(true, pred))
    assert logits_report.metrics["accuracy"] == pytest.approx(
        skm.accuracy_score(true, logits.argmax(axis=1)))
    assert float(case.get(results["accuracy"])) == pytest.approx(skm.accuracy_score(true, pred))
    assert float(case.get(results["mcc"])) == pytest.approx(skm.matthews_corrcoef(true, pred))
    assert float(case.get(results["zero_one"])) == skm.zero_one_loss(true, pred, normalize=False)
    assert float(case.get(results["hamming"])) == pytest.approx(skm.hamming_loss(true, pred))


def test_validation_reads_back_reductions_not_the_data(case, rng, monkeypatch):
    # validate=True checks labels, float labels, weights and scores where they
    # live: what comes back to the host is O(K) (flags, counts), never the N
    # samples or the N x K scores.
    size, classes = 3000, 5
    true = rng.integers(0, classes, size)
    pred = rng.integers(0, classes, size)
    weights = rng.random(size)
    logits = rng.normal(size=(size, classes)).astype(np.float32)
    copied = []
    to_host = case.device.to_host

    def recording(array):
        copied.append(int(np.size(array)))
        return to_host(array)

    monkeypatch.setattr(case.device, "to_host", recording)
    with metrics_gpu.use_backend(case.name):
        values = [
            metrics_gpu.accuracy_score(case.put(true), case.put(pred)),
            metrics_gpu.f1_score(case.put(true.astype(np.float64)), case.put(pred),
                                 average="macro", sample_weight=case.put(weights)),
            metrics_gpu.matthews_corrcoef(case.put(true), case.put(logits)),
        ]
    monkeypatch.undo()
    # Per-class flags, or the reduction's counts behind the warnings.
    assert copied and max(copied) <= max(classes, len(LABEL_METRIC_COUNTS)), copied
    assert float(case.get(values[0])) == pytest.approx(skm.accuracy_score(true, pred))
    assert float(case.get(values[1])) == pytest.approx(
        skm.f1_score(true, pred, average="macro", sample_weight=weights))
    assert float(case.get(values[2])) == pytest.approx(
        skm.matthews_corrcoef(true, logits.argmax(axis=1)))


# -- deterministic= ------------------------------------------------------------------------


def test_deterministic_keyword_takes_the_fixed_point_kernels(case, rng, launches):
    true = rng.integers(0, 4, 3000)
    pred = rng.integers(0, 4, 3000)
    weight = rng.random(3000)
    t, p, w = case.put(true), case.put(pred), case.put(weight)
    with metrics_gpu.use_backend(case.name):
        fixed = [case.get(metrics_gpu.confusion_matrix(t, p, sample_weight=w, num_classes=4,
                                                       deterministic=True)) for _ in range(2)]
        fixed_kernels = {launch.expression for launch in launches}
        launches.clear()
        metrics_gpu.confusion_matrix(t, p, sample_weight=w, num_classes=4)
        float_kernels = {launch.expression for launch in launches}
    assert any(e.endswith("double, true>") for e in fixed_kernels)
    assert not any(e.endswith("true>") for e in float_kernels)
    assert fixed[0].tobytes() == fixed[1].tobytes()
    expected = skm.confusion_matrix(true, pred, sample_weight=weight)
    np.testing.assert_allclose(fixed[0], expected, rtol=0, atol=weight.max() * 3000 * 2.0**-61 * 3000)


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_deterministic_must_be_a_bool(value):
    with pytest.raises(ValueError, match="deterministic must be True or False"):
        metrics_gpu.accuracy_score(np.array([0, 1]), np.array([0, 1]), deterministic=value)


# -- the functional API from the buffer equals the host formulas, warnings included ----------


def _prf_case(rng, kind, size):
    n = int(rng.integers(1, 40))
    true = rng.integers(0, size, n)
    pred = rng.integers(0, size, n)
    if kind == "one-predicted-class":
        pred[:] = 0
    if kind == "one-true-class":
        true[:] = size - 1
    weight = rng.random(n) if kind == "weighted" else None
    return true, pred, weight


@pytest.mark.parametrize("kind", ["plain", "weighted", "one-predicted-class", "one-true-class"])
@pytest.mark.parametrize("size", [2, 3, 6])
@pytest.mark.parametrize("average", ["micro", "macro", "weighted"])
@pytest.mark.parametrize("zero_division", ["warn", 0.0])
@pytest.mark.parametrize("num_classes_given", [False, True])
def test_averaged_scores_equal_host_formulas(case, rng, kind, size, average, zero_division,
                                             num_classes_given):
    true, pred, weight = _prf_case(rng, kind, size)
    arguments = dict(average=average, zero_division=zero_division,
                     num_classes=size if num_classes_given else None)
    results = {}
    for name, (t, p, w) in (("numpy", (true, pred, weight)),
                            (case.name, (case.put(true), case.put(pred), case.put(weight)))):
        with warnings.catch_warnings(record=True) as caught, metrics_gpu.use_backend(name):
            warnings.simplefilter("always")
            scores = metrics_gpu.precision_recall_fscore_support(t, p, sample_weight=w,
                                                                 **arguments)
            f1 = metrics_gpu.f1_score(t, p, sample_weight=w, **arguments)
        values = [float(case.get(v)) for v in (*scores[:3], f1)]
        results[name] = values, sorted(str(w.message) for w in caught)
    np.testing.assert_allclose(results[case.name][0], results["numpy"][0], rtol=RTOL)
    assert results[case.name][1] == results["numpy"][1]
