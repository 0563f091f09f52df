"""The CPU's share of issue 32: chunk updates in worker processes (partial
states merged) give the report of one process, name the same first left-out
row, and hand their errors and deaths to the parent; and the NumPy backend's
tiled score update (exact histogram bins, argmax from one comparison, float32
comparisons) gives what the reference rules give, whatever the tile size."""

from __future__ import annotations

import os

import numpy as np
import pytest

from metrics_gpu import ClassificationMetrics
from metrics_gpu.backends.selection import use_backend
from metrics_gpu.files.workers import MIN_VALUES_PER_WORKER, WorkerFailed, worker_count
from metrics_gpu.backends import numpy_backend
from metrics_gpu.backends.numpy_backend import _first_max, calibration_bin, probability_bins
from metrics_gpu.files import FileProblem, evaluate, evaluate_files, report_files

N, K, CHUNK = 3000, 4, 256  # a dozen chunks: every worker takes several

needs_fork = pytest.mark.skipif(not hasattr(os, "fork") or not os.sys.platform.startswith("linux"),
                                reason="worker processes are forked (Linux)")


@pytest.fixture(scope="module")
def prediction_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("workers")
    rng = np.random.default_rng(5)
    y_true = rng.integers(0, K, N)
    logits = rng.normal(size=(N, K)).astype(np.float32)
    logits[np.arange(N), y_true] += 1.0
    probabilities = np.exp(logits.astype(np.float64))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    y_pred = np.where(rng.random(N) < 0.7, logits.argmax(axis=1), rng.integers(0, K, N))
    arrays = {
        "t": y_true, "p": y_pred, "s": logits, "prob": probabilities,
        "w": rng.integers(1, 5, N), "g": rng.integers(0, 3, N),
        # Class codes with gaps (found by a first pass, remapped), some ignored.
        "codes": np.array([3, 8, 20, -1])[y_true], "pcodes": np.array([3, 8, 20, 30])[y_pred],
    }
    paths = {}
    for name, array in arrays.items():
        paths[name] = str(root / f"{name}.npy")
        np.save(paths[name], array)
    return paths


CASES = {
    "labels and binned logits": (dict(y_true="t", y_pred="p", scores="s"), dict(auc="binned")),
    "exact AUC": (dict(y_true="t", scores="s"), dict(auc="exact")),
    "probabilities, weights": (dict(y_true="t", y_pred="p", scores="prob", sample_weight="w"),
                               dict(auc="binned", scores_are="probabilities")),
    "groups": (dict(y_true="t", y_pred="p", scores="s", groups="g"), dict(auc="binned")),
    "class codes found, one ignored": (dict(y_true="codes", y_pred="pcodes"),
                                       dict(ignore_index=-1)),
}


def _close(a, b, path="report"):
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            _close(a[key], b[key], f"{path}/{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        # Float sums merged in another order: equal to their last digits.
        assert a == pytest.approx(b, rel=1e-12, abs=1e-15, nan_ok=True), path
    else:
        assert a == b, path


@needs_fork
@pytest.mark.parametrize("case", list(CASES))
def test_workers_give_the_report_of_one_process(prediction_files, case, monkeypatch):
    columns, options = CASES[case]
    sources = {name: prediction_files[stem] for name, stem in columns.items()}
    started = []
    in_workers = evaluate._stream_in_workers

    def spy(readers, workers, *args):
        started.append(workers)
        return in_workers(readers, workers, *args)

    monkeypatch.setattr(evaluate, "_stream_in_workers", spy)
    reports = [report_files(sources, backend="numpy", chunk_rows=CHUNK, workers=workers,
                            **options).to_dict() for workers in (1, 3)]
    assert started == [3]  # the second report's chunks went to 3 processes
    _close(reports[0], reports[1])
    if "sample_weight" not in sources and "ignore_index" not in options:
        assert reports[0]["total"] == N


@needs_fork
def test_workers_name_the_first_left_out_row_as_one_process(tmp_path, prediction_files):
    """A NaN score in chunk 8 and a target out of range in chunk 5: the same
    first row of each kind, whichever worker took its chunk."""
    scores = np.load(prediction_files["s"])
    scores[2100, 1] = np.nan
    labels = np.load(prediction_files["t"])
    labels[1500] = 9
    np.save(tmp_path / "s.npy", scores)
    np.save(tmp_path / "t.npy", labels)
    sources = {"y_true": str(tmp_path / "t.npy"), "scores": str(tmp_path / "s.npy")}
    messages = []
    for workers in (1, 2):
        with pytest.raises(FileProblem) as raised:
            evaluate_files(sources, backend="numpy", num_classes=K, chunk_rows=CHUNK,
                           workers=workers)
        messages.append(str(raised.value))
    assert messages[0] == messages[1]
    assert "1,500" in messages[0] or "1500" in messages[0]


@needs_fork
def test_a_worker_error_is_raised_in_the_parent(prediction_files, monkeypatch):
    update = evaluate._update_chunk

    def failing(batch, *args, **kwargs):
        if kwargs.get("ordinal", args[-1] if len(args) > 4 else None) == 3:
            raise ValueError("chunk 3 could not be added")
        return update(batch, *args, **kwargs)

    monkeypatch.setattr(evaluate, "_update_chunk", failing)  # the workers fork with it
    sources = {"y_true": prediction_files["t"], "y_pred": prediction_files["p"]}
    with pytest.raises(ValueError, match="chunk 3 could not be added"):
        evaluate_files(sources, backend="numpy", num_classes=K, chunk_rows=CHUNK, workers=2)


@needs_fork
def test_a_worker_that_dies_is_named(prediction_files, monkeypatch):
    update = evaluate._update_chunk

    def dying(batch, *args, **kwargs):
        if kwargs.get("ordinal", args[-1] if len(args) > 4 else None) == 2:
            os._exit(7)
        return update(batch, *args, **kwargs)

    monkeypatch.setattr(evaluate, "_update_chunk", dying)
    sources = {"y_true": prediction_files["t"], "y_pred": prediction_files["p"]}
    with pytest.raises(WorkerFailed, match="exit code 7"):
        evaluate_files(sources, backend="numpy", num_classes=K, chunk_rows=CHUNK, workers=2)


def test_worker_count(monkeypatch):
    monkeypatch.delenv("METRICS_GPU_CPU_WORKERS", raising=False)
    forks = hasattr(os, "fork") and os.sys.platform.startswith("linux")
    assert worker_count(None) == 1  # a size known only at the end: one process
    assert worker_count(MIN_VALUES_PER_WORKER - 1) == 1  # too small to pay for a fork
    assert worker_count(10**15) >= 1
    assert worker_count(100, workers=3) == (3 if forks else 1)
    monkeypatch.setenv("METRICS_GPU_CPU_WORKERS", "2")
    assert worker_count(100) == (2 if forks else 1)
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("METRICS_GPU_CPU_WORKERS", bad)
        with pytest.raises(ValueError, match="METRICS_GPU_CPU_WORKERS"):
            worker_count(100)
    monkeypatch.delenv("METRICS_GPU_CPU_WORKERS")
    for bad in (0, True, 1.5):
        with pytest.raises(ValueError, match="workers"):
            worker_count(100, workers=bad)


# -- the tiled score update ---------------------------------------------------------


@pytest.mark.parametrize("thresholds", [2, 3, 10, 15, 22, 1000, 4097])
def test_probability_bins_follow_the_edge_rule(rng, thresholds):
    """At, just below and just above every edge b / H, at 0 and 1, and at
    random values: the bins of calibration_bin's rule (as values, and as the
    quotients e / s of the logits path)."""
    edges = np.arange(thresholds + 1) / thresholds
    values = np.concatenate([edges, np.nextafter(edges, 0), np.nextafter(edges, 1),
                             rng.random(5000), [0.0, 1.0]])
    values = np.clip(values, 0.0, 1.0)
    expected = calibration_bin(values, thresholds)
    np.testing.assert_array_equal(probability_bins(values, thresholds), expected)
    # As quotients: values = e / s with s = 1 / values' row scale (here s = 1,
    # then s = 3 with e = 3 p rounded: the exact quotient is what is binned).
    e = values * 3.0
    s = np.full(values.size, 3.0)
    got = probability_bins(e, thresholds, thresholds / s, lambda near: e[near] / s[near])
    np.testing.assert_array_equal(got, calibration_bin(e / s, thresholds))
    # With each value's cell offset (a histogram's rows; the largest one is
    # where the sum's rounding is coarsest).
    rows = values[: values.size // 4 * 4].reshape(4, -1)
    offsets = (np.array([0, 1, 7, 63]) * thresholds).astype(np.float64)[:, None]
    np.testing.assert_array_equal(probability_bins(rows, thresholds, offsets=offsets),
                                  calibration_bin(rows, thresholds) + offsets.astype(int))


@pytest.mark.parametrize("k", [2, 3, 10, 32, 33])
def test_first_max_is_the_lowest_index_of_the_max(rng, k):
    z = rng.integers(0, 3, size=(k, 2000)).astype(np.float32)  # many ties
    z[:, 5] = np.nan
    m = z.max(axis=0)
    got = _first_max(z, m, 0)
    finite = ~np.isnan(m)
    np.testing.assert_array_equal(got[finite], np.argmax(z, axis=0)[finite])


def _stream_state(y, z, weight, **options):
    with use_backend("numpy"):
        metrics = ClassificationMetrics(z.shape[1], validate="deferred", **options)
        metrics.update(y, z, weight)
        return {name: np.array(value) for name, value in metrics.state_dict().items()
                if isinstance(value, np.ndarray)}


@pytest.mark.parametrize("scores_are", ["logits", "probabilities"])
def test_tile_size_and_score_width_change_nothing(rng, monkeypatch, scores_are):
    """Rows left out inside tiles (NaN, a target out of range, an ignored one,
    a negative weight), ties, tiles of 7 rows or of all: the same state; and
    float32 scores give the state of the same values as float64."""
    n, k = 500, 6
    y = rng.integers(0, k, n)
    z = rng.normal(size=(n, k)).astype(np.float32)
    z[::7] = np.round(z[::7])  # ties
    if scores_are == "probabilities":
        z = np.exp(z)
        z /= z.sum(axis=1, keepdims=True)
        z[:, 0] = 1 - z[:, 1:].sum(axis=1)  # rows that sum to 1 in float32
    z[10, 2] = np.nan
    y[20] = k + 3
    y[30] = -1
    weight = rng.integers(1, 4, n)
    weight[40] = -2
    options = dict(top_k=(1, 3), n_bins=10, thresholds=50, scores=scores_are,
                   ignore_index=-1)
    whole = _stream_state(y, z, weight, **options)
    monkeypatch.setattr(numpy_backend, "SCORE_TILE_ELEMENTS", 7 * k)
    tiled = _stream_state(y, z, weight, **options)
    wide = _stream_state(y, z.astype(np.float64), weight, **options)
    for name in whole:
        np.testing.assert_allclose(tiled[name], whole[name], rtol=1e-13, err_msg=name)
        np.testing.assert_array_equal(wide[name], tiled[name], err_msg=name)
    assert int(whole["checks"][0]) == 3  # the NaN row, the target out of range, the weight


def test_verbose_says_where_the_time_went(prediction_files, capsys):
    """--verbose: the fixed costs (start-up, backend) apart from the reading."""
    from metrics_gpu.cli import main

    status = main(["report", "--y-true", prediction_files["t"], "--scores", prediction_files["s"],
                   "--quiet", "--verbose", "--workers", "1", "--readers", "1",
                   "--backend", "numpy"])
    assert status == 0
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("metrics-gpu: timing: ")
    for part in ("backend numpy", "opening", "reading and updating", "M rows/s",
                 "first chunk", "in this process", "1 reader thread", "metrics and output"):
        assert part in line, part
    if os.path.exists("/proc/self/stat"):
        assert "start-up" in line



@pytest.fixture(scope="module")
def multilabel_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("multilabel-workers")
    rng = np.random.default_rng(9)
    labels = 5
    y_true = (rng.random((N, labels)) < 0.3).astype(np.int8)
    scores = (rng.normal(size=(N, labels)) + 1.5 * y_true).astype(np.float32)
    arrays = {"t": y_true, "p": (scores > 0.7).astype(np.int8), "s": scores,
              "w": rng.integers(1, 4, N)}
    paths = {}
    for name, array in arrays.items():
        paths[name] = str(root / f"{name}.npy")
        np.save(paths[name], array)
    return paths


@needs_fork
@pytest.mark.parametrize("columns, options", [
    (dict(y_true="t", y_pred="p"), {}),
    (dict(y_true="t", scores="s", sample_weight="w"), dict(thresholds=100)),
], ids=["labels", "scores-weights"])
def test_multilabel_workers_give_the_report_of_one_process(multilabel_files, columns, options):
    from metrics_gpu.files import evaluate_multilabel_files

    sources = {name: multilabel_files[stem] for name, stem in columns.items()}
    reports = [evaluate_multilabel_files(sources, backend="numpy", chunk_rows=CHUNK,
                                         workers=workers, **options).to_dict()
               for workers in (1, 3)]
    _close(reports[0], reports[1])


@needs_fork
def test_multilabel_workers_name_the_first_left_out_row(multilabel_files, tmp_path):
    from metrics_gpu.files import evaluate_multilabel_files

    y_true = np.load(multilabel_files["t"])
    y_true[2222, 3] = 2  # not 0/1: left out, in a late chunk
    y_true[1777, 0] = 5
    np.save(tmp_path / "t.npy", y_true)
    sources = {"y_true": str(tmp_path / "t.npy"), "y_pred": multilabel_files["p"]}
    messages = []
    for workers in (1, 2):
        with pytest.raises(FileProblem) as raised:
            evaluate_multilabel_files(sources, backend="numpy", chunk_rows=CHUNK,
                                      workers=workers)
        messages.append(str(raised.value))
    assert messages[0] == messages[1]
    assert "1,777" in messages[0] or "1777" in messages[0]
