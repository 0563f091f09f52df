"""`metrics-gpu report` on prediction files: every format, chunked streaming
equal to the in-memory functions, bounded memory, pictures, and one-line
errors for bad files."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import warnings
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as sk

import metrics_gpu
from metrics_gpu.backends.selection import BackendUnavailableError, get_backend_implementation
from metrics_gpu.cli import main
from metrics_gpu.files import FileProblem, exact_auc_bytes, report_files

pa = pytest.importorskip("pyarrow")
import pyarrow.feather  # noqa: E402
import pyarrow.parquet  # noqa: E402

N, K = 5003, 4
CHUNK = 700  # several chunks, the last one short


def softmax(logits):
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    y_true = rng.integers(0, K, N)
    logits = rng.normal(size=(N, K)).astype(np.float32)
    logits[np.arange(N), y_true] += 1.0
    y_pred = logits.argmax(axis=1)
    wrong = rng.random(N) < 0.1
    y_pred[wrong] = rng.integers(0, K, wrong.sum())
    weight = rng.integers(1, 4, N).astype(np.float64)
    return y_true, y_pred, logits, weight


def write_all_formats(directory, y_true, y_pred, logits, weight):
    """The same columns in every format: {format: (y_true, y_pred, scores, weight)} sources."""
    d = directory
    np.save(d / "t.npy", y_true)
    np.save(d / "p.npy", y_pred)
    np.save(d / "s.npy", logits)
    np.save(d / "w.npy", weight)
    np.savez(d / "all.npz", y_true=y_true, y_pred=y_pred, scores=logits, weight=weight)
    np.savez_compressed(d / "packed.npz", y_true=y_true, y_pred=y_pred, scores=logits,
                        weight=weight)
    header = "y_true,y_pred,weight," + ",".join(f"s{k}" for k in range(K))
    rows = np.column_stack([y_true, y_pred, weight, logits])
    np.savetxt(d / "all.csv", rows, delimiter=",", header=header, comments="",
               fmt=["%d", "%d", "%.1f"] + ["%.9g"] * K)
    np.savetxt(d / "t.txt", y_true, fmt="%d")
    np.savetxt(d / "p.txt", y_pred, fmt="%d")
    np.savetxt(d / "s.txt", logits, fmt="%.9g")
    np.savetxt(d / "w.txt", weight, fmt="%.1f")
    columns = {"y_true": pa.array(y_true), "y_pred": pa.array(y_pred),
               "weight": pa.array(weight),
               "scores": pa.FixedSizeListArray.from_arrays(pa.array(logits.ravel()), K)}
    columns.update({f"s{k}": pa.array(logits[:, k]) for k in range(K)})
    table = pa.table(columns)
    pa.parquet.write_table(table, d / "all.parquet", row_group_size=1000)
    listed = table.set_column(3, "scores", pa.array(list(logits.astype(np.float64))))
    pa.parquet.write_table(listed, d / "lists.parquet", row_group_size=1500)
    # Labels and weights as lists of one element (variable and fixed size).
    singles = listed.set_column(0, "y_true", pa.array([[int(v)] for v in y_true]))
    singles = singles.set_column(2, "weight", pa.FixedSizeListArray.from_arrays(
        pa.array(weight), 1))
    pa.parquet.write_table(singles, d / "singles.parquet", row_group_size=1500)
    pa.feather.write_feather(table, d / "all.feather", chunksize=900)
    with pa.ipc.new_stream(d / "all.arrows.arrow", table.schema) as writer:
        for batch in table.to_batches(max_chunksize=1100):
            writer.write_batch(batch)
    scores_columns = ",".join(f"s{k}" for k in range(K))
    return {
        "npy": ("t.npy", "p.npy", "s.npy", "w.npy"),
        "npz": ("all.npz:y_true", "all.npz:y_pred", "all.npz:scores", "all.npz:weight"),
        "npz-compressed": ("packed.npz:y_true", "packed.npz:y_pred", "packed.npz:scores",
                           "packed.npz:weight"),
        "csv": ("all.csv:y_true", "all.csv:y_pred", f"all.csv:{scores_columns}",
                "all.csv:weight"),
        "txt": ("t.txt", "p.txt", "s.txt", "w.txt"),
        "parquet": ("all.parquet:y_true", "all.parquet:y_pred", "all.parquet:scores",
                    "all.parquet:weight"),
        "parquet-lists": ("lists.parquet:y_true", "lists.parquet:y_pred",
                          "lists.parquet:scores", "lists.parquet:weight"),
        "parquet-one-element-lists": ("singles.parquet:y_true", "singles.parquet:y_pred",
                                      "singles.parquet:scores", "singles.parquet:weight"),
        "parquet-columns": ("all.parquet:y_true", "all.parquet:y_pred",
                            f"all.parquet:{scores_columns}", "all.parquet:weight"),
        "feather": ("all.feather:y_true", "all.feather:y_pred", "all.feather:scores",
                    "all.feather:weight"),
        "arrow-stream": ("all.arrows.arrow:y_true", "all.arrows.arrow:y_pred",
                         "all.arrows.arrow:scores", "all.arrows.arrow:weight"),
    }


@pytest.fixture(scope="module")
def formats(tmp_path_factory, data):
    directory = tmp_path_factory.mktemp("formats")
    sources = write_all_formats(directory, *data)
    return {name: tuple(str(directory / s) for s in paths) for name, paths in sources.items()}


def run_json(capsys, *argv) -> dict:
    assert main(["report", "--format", "json", "--quiet", *argv]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def check_label_metrics(report: dict, y_true, y_pred, weight=None):
    expected = metrics_gpu.label_report(y_true, y_pred, sample_weight=weight,
                                        num_classes=K)
    assert report["total"] == pytest.approx(expected.total, rel=1e-12)
    for name, value in expected.metrics.items():
        assert report["metrics"][name] == pytest.approx(value, rel=1e-9, abs=1e-12), name
    np.testing.assert_array_equal(np.array(report["confusion_matrix"]),
                                  sk.confusion_matrix(y_true, y_pred, sample_weight=weight))


def check_score_metrics(scores: dict, y_true, logits, weight=None):
    probabilities = softmax(logits.astype(np.float64))
    assert scores["cross_entropy"] == pytest.approx(
        sk.log_loss(y_true, probabilities, sample_weight=weight), rel=1e-6)
    assert scores["top_2_accuracy"] == pytest.approx(
        sk.top_k_accuracy_score(y_true, probabilities, k=2, sample_weight=weight), rel=1e-12)
    assert scores["roc_auc_macro"] == pytest.approx(
        sk.roc_auc_score(y_true, probabilities, multi_class="ovr", sample_weight=weight),
        rel=1e-6)
    assert scores["roc_auc_weighted"] == pytest.approx(
        sk.roc_auc_score(y_true, probabilities, multi_class="ovr", average="weighted",
                         sample_weight=weight), rel=1e-6)
    onehot = np.eye(K)[y_true]
    assert scores["average_precision_macro"] == pytest.approx(
        sk.average_precision_score(onehot, probabilities, sample_weight=weight), rel=1e-6)


@pytest.mark.parametrize("name", ["npy", "npz", "npz-compressed", "csv", "txt", "parquet",
                                  "parquet-lists", "parquet-one-element-lists",
                                  "parquet-columns", "feather", "arrow-stream"])
def test_every_format_equals_in_memory(formats, data, capsys, name):
    y_true, y_pred, logits, weight = data
    t, p, s, w = formats[name]
    labels_only = run_json(capsys, "--y-true", t, "--y-pred", p, "--chunk-size", str(CHUNK))
    check_label_metrics(labels_only, y_true, y_pred)
    assert "scores" not in labels_only
    report = run_json(capsys, "--y-true", t, "--y-pred", p, "--scores", s, "--sample-weight", w,
                      "--top-k", "1,2", "--auc", "exact", "--chunk-size", str(CHUNK))
    check_label_metrics(report, y_true, y_pred, weight)
    assert report["auc_method"] == "exact"
    check_score_metrics(report["scores"], y_true, logits, weight)


@pytest.mark.parametrize("backend", ["numpy", "emulated"])
def test_scores_only_argmax_labels_and_binned_auc_within_bound(formats, data, capsys, backend):
    y_true, _, logits, _ = data
    t, _, s, _ = formats["npy"]
    report = run_json(capsys, "--y-true", t, "--scores", s, "--auc", "binned", "--top-k", "1,2",
                      "--thresholds", "200", "--backend", backend, "--chunk-size", str(CHUNK))
    check_label_metrics(report, y_true, logits.argmax(axis=1))
    scores = report["scores"]
    assert report["auc_method"] == "binned"
    probabilities = softmax(logits.astype(np.float64))
    exact = sk.roc_auc_score(y_true, probabilities, multi_class="ovr")
    assert 0 < scores["roc_auc_error_bound"] < 0.01
    assert abs(scores["roc_auc_macro"] - exact) <= scores["roc_auc_error_bound"] + 1e-12
    assert scores["cross_entropy"] == pytest.approx(sk.log_loss(y_true, probabilities),
                                                    rel=1e-6)
    in_memory = metrics_gpu.logits_report(y_true, logits, top_k=(1, 2))
    assert scores["expected_calibration_error"] == pytest.approx(
        float(in_memory.expected_calibration_error), rel=1e-6)


def test_big_endian_and_narrow_label_files(tmp_path, capsys, data):
    y_true, y_pred, _, weight = data
    np.save(tmp_path / "t.npy", y_true.astype(">i4"))
    np.save(tmp_path / "p.npy", y_pred.astype(np.uint8))
    np.save(tmp_path / "w.npy", weight.astype(">f8"))
    report = run_json(capsys, "--y-true", str(tmp_path / "t.npy"), "--y-pred",
                      str(tmp_path / "p.npy"), "--sample-weight", str(tmp_path / "w.npy"),
                      "--chunk-size", str(CHUNK))
    check_label_metrics(report, y_true, y_pred, weight)


def test_binary_positive_scores_column(tmp_path, capsys):
    rng = np.random.default_rng(3)
    y_true = rng.integers(0, 2, 3001)
    probability = np.clip(0.3 * y_true + 0.7 * rng.random(3001), 0, 1)
    np.save(tmp_path / "t.npy", y_true)
    np.save(tmp_path / "p.npy", probability)
    report = run_json(capsys, "--y-true", str(tmp_path / "t.npy"), "--scores",
                      str(tmp_path / "p.npy"), "--scores-are", "probabilities",
                      "--chunk-size", "500", "--top-k", "1")
    scores = report["scores"]
    assert scores["roc_auc"] == pytest.approx(sk.roc_auc_score(y_true, probability), rel=1e-12)
    assert scores["average_precision"] == pytest.approx(
        sk.average_precision_score(y_true, probability), rel=1e-12)
    assert report["metrics"]["accuracy"] == pytest.approx(
        sk.accuracy_score(y_true, probability > 0.5), rel=1e-12)


def test_classes_found_by_a_first_pass_equal_label_report(tmp_path, capsys):
    """Without --num-classes: the classes present, as label_report (and sklearn)."""
    rng = np.random.default_rng(5)
    codes = np.array([0, 3, 4, 9])  # 1, 2, 5..8 absent: averages over the 4 present
    y_true = codes[rng.integers(0, 4, 2500)]
    y_pred = np.where(rng.random(2500) < 0.7, y_true, codes[rng.integers(0, 4, 2500)])
    y_true[::97] = 255  # ignored, and 255 is not a class
    np.save(tmp_path / "t.npy", y_true.astype(np.int16))
    np.save(tmp_path / "p.npy", y_pred.astype(np.int16))
    report = run_json(capsys, "--y-true", str(tmp_path / "t.npy"), "--y-pred",
                      str(tmp_path / "p.npy"), "--ignore-index", "255", "--chunk-size", "300")
    keep = y_true != 255
    expected = metrics_gpu.label_report(y_true[keep], y_pred[keep])
    assert report["num_classes"] == 4
    assert list(report["per_class"]) == ["0", "3", "4", "9"]
    for name, value in expected.metrics.items():
        assert report["metrics"][name] == pytest.approx(value, rel=1e-9, abs=1e-12), name
    assert report["confusion_matrix"] == sk.confusion_matrix(y_true[keep], y_pred[keep]).tolist()


def write_large(directory, fmt: str, rows: int, k: int):
    """Labels and (rows, k) float32 logits in ``fmt``, written block by block;
    returns the two sources and the labels."""
    rng = np.random.default_rng(0)
    y_true = rng.integers(0, k, rows, dtype=np.int32)
    blocks = range(0, rows, 250_000)

    def logits(start):
        block = rng.normal(size=(min(250_000, rows - start), k)).astype(np.float32)
        block[np.arange(len(block)), y_true[start:start + len(block)]] += 1
        return block

    if fmt == "npy":
        scores = np.lib.format.open_memmap(directory / "s.npy", "w+", np.float32, (rows, k))
        for start in blocks:
            scores[start:start + 250_000] = logits(start)
        scores.flush()
        del scores
        np.save(directory / "t.npy", y_true)
        return str(directory / "t.npy"), str(directory / "s.npy"), y_true
    schema = pa.schema([("y", pa.int32()), ("s", pa.list_(pa.float32(), k))])
    path = directory / f"all.{fmt}"
    writer = (pa.parquet.ParquetWriter(path, schema) if fmt == "parquet"
              else pa.ipc.new_file(path, schema))
    for start in blocks:
        block = logits(start)
        batch = pa.record_batch([pa.array(y_true[start:start + len(block)]),
                                 pa.FixedSizeListArray.from_arrays(pa.array(block.ravel()), k)],
                                schema=schema)
        writer.write_table(pa.Table.from_batches([batch])) if fmt == "parquet" \
            else writer.write_batch(batch)
    writer.close()
    return f"{path}:y", f"{path}:s", y_true


@pytest.mark.parametrize("fmt", ["npy", "parquet", "arrow"])
def test_file_larger_than_its_memory_streams_in_bounded_memory(tmp_path, fmt):
    """Peak memory does not grow with the file: one process reports a small
    file (its code paths warm), then one of about 100 MB; its peak resident
    memory may grow by 32 MB between the two (chunks of 32k rows). The
    numbers equal the in-memory functions'."""
    rows, k = 2_000_000, 12
    (tmp_path / "small").mkdir()
    (tmp_path / "large").mkdir()
    # The small file holds three of the large one's row groups (250k rows):
    # enough for the reader's steady state (a group read ahead, one converted,
    # one counted), so that what grows after it grows with the file.
    small = write_large(tmp_path / "small", fmt, 750_000, k)
    t, s, y_true = write_large(tmp_path / "large", fmt, rows, k)
    file_bytes = sum(p.stat().st_size for p in (tmp_path / "large").iterdir())
    script = textwrap.dedent(f"""
        import contextlib, io, json, sys
        from metrics_gpu.cli import main
        if {fmt!r} != "npy":
            # pyarrow's decoding threads each keep what they decoded last (a
            # row group: 17-43 MB more or less from run to run on 2 cores,
            # whatever the file's size; 11.5 MB every run with one thread):
            # one thread, so that growth with the file's size shows.
            import pyarrow
            pyarrow.set_cpu_count(1)

        def peak_rss():  # VmHWM: ru_maxrss would carry pytest's across fork and exec
            with open("/proc/self/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) * 1024

        def report(t, s):
            return main(["report", "--y-true", t, "--scores", s, "--auc", "binned",
                         "--format", "json", "--backend", "numpy", "--chunk-size", "32768",
                         "--quiet"])

        with contextlib.redirect_stdout(io.StringIO()):
            report({small[0]!r}, {small[1]!r})
        warm = peak_rss()
        status = report({t!r}, {s!r})
        print(json.dumps({{"status": status, "warm": warm, "peak": peak_rss()}}),
              file=sys.stderr)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600)
    measured = json.loads(done.stderr.strip().splitlines()[-1])
    assert measured["status"] == 0, done.stderr
    report = json.loads(done.stdout)
    grown = measured["peak"] - measured["warm"]
    allowed = 32 << 20
    assert file_bytes > 3 * allowed and grown < allowed, (grown, file_bytes)
    assert report["total"] == rows
    scores = np.load(s) if fmt == "npy" else np.stack(
        (pa.parquet.read_table(s.split(":")[0]) if fmt == "parquet"
         else pa.ipc.open_file(s.split(":")[0]).read_all()).column("s").to_numpy(
            zero_copy_only=False))
    with metrics_gpu.use_backend("numpy"):
        expected = metrics_gpu.logits_report(y_true, scores, top_k=(1, 5))
    assert report["scores"]["cross_entropy"] == pytest.approx(float(expected.cross_entropy),
                                                              rel=1e-9)
    assert report["metrics"]["accuracy"] == pytest.approx(float(expected.accuracy), rel=1e-12)


def test_exact_auc_refused_when_it_does_not_fit(formats, capsys, monkeypatch):
    t, p, s, _ = formats["npy"]
    monkeypatch.setattr("metrics_gpu.files.exact._free_memory", lambda backend: 1000)
    assert main(["report", "--y-true", t, "--scores", s, "--auc", "exact", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert re.match(r"metrics-gpu: error: --scores .*s\.npy: --auc exact needs about "
                    r"[\d.,]+ [KMG]?B for 5,003 x 4 scores, and 1,000 bytes are free", err)
    assert "--auc binned" in err and err.count("\n") == 1
    # auto takes the binned path instead, and says so.
    report = run_json(capsys, "--y-true", t, "--scores", s)
    assert report["auc_method"] == "binned"
    assert exact_auc_bytes(N, K, np.float32) > 1000


def test_plots_written_and_checked(formats, tmp_path, capsys):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.image

    t, p, s, _ = formats["npy"]
    out = tmp_path / "pictures"
    assert main(["report", "--y-true", t, "--y-pred", p, "--scores", s, "--plot", str(out),
                 "--quiet"]) == 0
    names = sorted(path.name for path in out.iterdir())
    assert names == ["confusion_matrix.png", "confusion_matrix_normalized.png",
                     "precision_recall.png", "reliability.png", "roc.png"]
    for path in out.iterdir():
        image = matplotlib.image.imread(path)
        assert image.shape[0] > 200 and image.shape[1] > 200, path
        assert image[..., :3].std() > 0.05, f"{path.name} is blank"


def test_report_object_plots_return_axes(formats):
    pytest.importorskip("matplotlib")
    t, p, s, _ = formats["npy"]
    report = report_files({"y_true": t, "y_pred": p, "scores": s}, curves=True)
    for draw in ("plot_confusion_matrix", "plot_roc", "plot_precision_recall",
                 "plot_reliability"):
        ax = getattr(report, draw)()
        assert ax.get_xlabel() and ax.get_ylabel(), draw
    legend = [text.get_text() for text in report.plot_roc().get_legend().get_texts()]
    auc = report.scores["per_class"]["roc_auc"][0]
    assert any(f"{auc:.2f}" in line for line in legend), legend


# -- bad files: one line on stderr naming the file, exit 2, nothing written --------------


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    np.save(d / "t.npy", np.arange(100) % 3)
    np.save(d / "short.npy", np.arange(90) % 3)
    np.save(d / "float.npy", (np.arange(100) % 3).astype(np.float64) + 0.5)
    nan = (np.arange(100) % 3).astype(np.float64)
    nan[17] = np.nan
    np.save(d / "nan.npy", nan)
    np.save(d / "matrix.npy", np.zeros((100, 2), np.int64))
    np.save(d / "strings.npy", np.array(["a"] * 100))
    np.save(d / "complex.npy", np.ones(100, np.complex64))
    np.save(d / "huge.npy", np.where(np.arange(100) == 50, 1 << 30, np.arange(100) % 3))
    (d / "t.csv").write_text("label\n" + "\n".join(str(i % 3) for i in range(100)) + "\n")
    (d / "short.csv").write_text("label\n" + "\n".join(str(i % 3) for i in range(60)) + "\n")
    (d / "words.csv").write_text("label\n" + "\n".join(["1", "2", "cat"] * 3) + "\n")
    (d / "data.bin").write_bytes(b"\0" * 10)
    pa.parquet.write_table(pa.table({"y": pa.array([0, 1, None, 2] * 25)}), d / "nulls.parquet")
    pa.parquet.write_table(pa.table({"y": pa.array(np.arange(100) % 3)}), d / "t.parquet")
    (d / "broken.parquet").write_bytes(b"PAR1 not really")
    with zipfile.ZipFile(d / "two.npz", "w") as archive:
        archive.writestr("a.npy", b"")
        archive.writestr("b.npy", b"")
    return d


BAD = {
    "missing": (["--y-pred", "{d}/none.npy"], r"--y-pred .*none\.npy: no such file"),
    "suffix": (["--y-pred", "{d}/data.bin"], r"--y-pred .*data\.bin: unsupported file type"),
    "lengths": (["--y-pred", "{d}/short.npy"],
                r"--y-pred .*short\.npy: 90 rows, but --y-true .*t\.npy has 100"),
    "lengths-unknown": (["--y-pred", "{d}/short.csv"],
                        r"--y-pred .*short\.csv: ends after 60 rows, but --y-true .*t\.npy has "
                        r"more"),
    "non-integer": (["--y-pred", "{d}/float.npy"],
                    r"--y-pred .*float\.npy: row 0 holds the non-integer label 0\.5"),
    "nan": (["--y-pred", "{d}/nan.npy"], r"--y-pred .*nan\.npy: row 17 holds nan"),
    "shape": (["--y-pred", "{d}/matrix.npy"], r"--y-pred .*matrix\.npy: labels must be one "
                                              r"column"),
    "dtype": (["--y-pred", "{d}/complex.npy"], r"--y-pred .*complex\.npy: labels must be integer "
                                               r"class codes or class names \(strings\)"),
    # (names and codes: issue 51)
    "mixed": (["--y-pred", "{d}/strings.npy"], r"--y-true .*t\.npy holds integer class codes, "
                                               r"but --y-pred .*strings\.npy holds class names"),
    "unparsable": (["--y-pred", "{d}/words.csv"], r"--y-pred .*words\.csv: cannot parse"),
    "column": (["--y-pred", "{d}/t.parquet:label"],
               r"--y-pred .*t\.parquet: has no column 'label'; its columns are \['y'\]"),
    "null": (["--y-pred", "{d}/nulls.parquet"], r"--y-pred .*nulls\.parquet: column 'y' holds "
                                                r"a null at row 2"),
    "unreadable": (["--y-pred", "{d}/broken.parquet"],
                   r"--y-pred .*broken\.parquet: not a readable parquet file"),
    "npz-name": (["--y-pred", "{d}/two.npz"], r"--y-pred .*two\.npz: name the array"),
    "huge-label": (["--y-pred", "{d}/huge.npy"],
                   r"--y-pred .*huge\.npy: holds the label 1073741824; pass --num-classes"),
    "weights-dtype": (["--y-pred", "{d}/t.npy", "--sample-weight", "{d}/strings.npy"],
                      r"--sample-weight .*strings\.npy: weights must be numbers"),
    "label-range": (["--y-pred", "{d}/t.npy", "--num-classes", "2"],
                    r"--y-true .*t\.npy: row 2 holds a target outside 0\.\.1"),
    "scores-width": (["--scores", "{d}/float.npy", "--num-classes", "3"],
                     r"--scores .*float\.npy: 2 score columns, but --num-classes is 3"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_file_one_line_exit_2_nothing_written(bad_files, tmp_path, capsys, case):
    argv, pattern = BAD[case]
    argv = [a.format(d=bad_files) for a in argv]
    out = tmp_path / "pictures"
    status = main(["report", "--y-true", str(bad_files / "t.npy"), *argv, "--quiet",
                   *(["--plot", str(out)] if _has_matplotlib() else [])])
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.count("\n") == 1, err
    assert re.match(rf"metrics-gpu: error: {pattern}", err), err
    assert not out.exists()


def _has_matplotlib() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def test_missing_pyarrow_names_the_extra(bad_files, capsys, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_pyarrow(name, *args, **kwargs):
        if name.startswith("pyarrow"):
            raise ImportError("No module named 'pyarrow'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    assert main(["report", "--y-true", str(bad_files / "t.parquet"), "--y-pred",
                 str(bad_files / "t.npy"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert re.match(r"metrics-gpu: error: --y-true .*t\.parquet: reading Parquet / Arrow files "
                    r"needs pyarrow: .*pip install '\.\[io\]'", err), err


def test_cuda_backend_without_a_gpu_is_one_line(formats, capsys):
    try:
        get_backend_implementation("cuda")
        pytest.skip("a GPU is present")
    except BackendUnavailableError:
        pass
    t, p, *_ = formats["npy"]
    assert main(["report", "--y-true", t, "--y-pred", p, "--backend", "cuda", "--quiet"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("option, value, message", [
    ("auc", "fast", "auc must be one of"), ("scores_are", "odds", "scores_are must be one of"),
    ("thresholds", 1, "thresholds must be an integer in 2.."),
    ("chunk_rows", 0, "chunk_rows must be an integer in 1.."), ("top_k", (0,), "top_k"),
])
def test_bad_options_name_the_argument(formats, option, value, message):
    t, p, s, _ = formats["npy"]
    with pytest.raises(ValueError, match=message):
        report_files({"y_true": t, "y_pred": p, "scores": s}, **{option: value})


def test_reader_error_type_is_value_error():
    assert issubclass(FileProblem, ValueError)


# -- text files: neither results nor row numbers depend on --chunk-size ---------------


def _write_lines(path, lines, *, newline: str, trailing: bool) -> None:
    text = newline.join(lines) + (newline if trailing else "")
    path.write_bytes(text.encode())


def _text_columns(directory, y_true, y_pred, scores, blanks, *, newline: str,
                  trailing: bool):
    """y_true in a CSV of its own with blank lines at the rows ``blanks``; y_pred
    and the scores in a second CSV without any: the two must stay row-aligned."""
    true_lines = ["y_true"]
    for row, value in enumerate(y_true):
        true_lines += [""] * blanks.count(row) + [str(value)]
    true_lines += [""] * blanks.count(len(y_true))  # blank lines at the end
    _write_lines(directory / "t.csv", true_lines, newline=newline, trailing=trailing)
    pred_lines = ["y_pred,s0,s1,s2"] + [
        f"{p}," + ",".join(f"{v:.9g}" for v in row) for p, row in zip(y_pred, scores)]
    _write_lines(directory / "p.csv", pred_lines, newline=newline, trailing=trailing)
    return {"y_true": str(directory / "t.csv"), "y_pred": str(directory / "p.csv:y_pred"),
            "scores": str(directory / "p.csv:s0,s1,s2")}


@st.composite
def text_files(draw):
    n = draw(st.integers(1, 12))
    y_true = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    y_pred = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    scores = draw(st.lists(st.lists(st.floats(-4, 4, width=32), min_size=3, max_size=3),
                           min_size=n, max_size=n))
    # Positions of blank lines: before row i (0..n-1) or after the last (n).
    blanks = draw(st.lists(st.integers(0, n), max_size=6))
    newline = draw(st.sampled_from(("\n", "\r\n")))
    trailing = draw(st.booleans())
    return np.array(y_true), np.array(y_pred), np.array(scores), blanks, newline, trailing


@settings(max_examples=40, deadline=None)
@given(files=text_files())
def test_text_reports_do_not_depend_on_the_chunk_size(tmp_path_factory, files):
    y_true, y_pred, scores, blanks, newline, trailing = files
    directory = tmp_path_factory.mktemp("chunks")
    sources = _text_columns(directory, y_true, y_pred, scores, blanks, newline=newline,
                            trailing=trailing)
    reports = {chunk: report_files(sources, num_classes=3, backend="numpy", chunk_rows=chunk,
                                   auc="exact").to_dict()
               for chunk in range(1, len(y_true) + 2)}
    first = reports[1]
    assert first["total"] == len(y_true)
    assert first["confusion_matrix"] == sk.confusion_matrix(y_true, y_pred,
                                                            labels=[0, 1, 2]).tolist()
    for chunk, report in reports.items():
        _assert_same_report(report, first, f"chunk_rows={chunk}")


def _assert_same_report(report, expected, where: str) -> None:
    """Counts and the layout equal; floats equal up to the rounding of sums added
    chunk by chunk (a score sum is rounded once per chunk); NaN equals NaN."""
    if isinstance(expected, dict):
        assert report.keys() == expected.keys(), where
        for key in expected:
            _assert_same_report(report[key], expected[key], f"{where}: {key}")
    elif isinstance(expected, list):
        assert len(report) == len(expected), where
        for i, (mine, theirs) in enumerate(zip(report, expected)):
            _assert_same_report(mine, theirs, f"{where}[{i}]")
    elif isinstance(expected, float):
        assert report == pytest.approx(expected, rel=1e-12, abs=1e-15, nan_ok=True), where
    else:
        assert report == expected, where


@settings(max_examples=40, deadline=None)
@given(files=text_files(), data=st.data())
def test_text_errors_name_the_same_row_and_line_for_every_chunk_size(tmp_path_factory, files,
                                                                     data):
    y_true, y_pred, scores, blanks, newline, trailing = files
    bad_row = data.draw(st.integers(0, len(y_true) - 1))
    y_true = y_true.copy()
    y_true[bad_row] = 7  # out of 0..2
    directory = tmp_path_factory.mktemp("rows")
    sources = _text_columns(directory, y_true, y_pred, scores, blanks, newline=newline,
                            trailing=trailing)
    # The line as an editor shows it: the header, then values and blank lines.
    line = 2 + bad_row + sum(1 for b in blanks if b <= bad_row)
    for chunk in range(1, len(y_true) + 2):
        with pytest.raises(FileProblem) as error:
            report_files(sources, num_classes=3, backend="numpy", chunk_rows=chunk)
        assert f"t.csv: row {bad_row} (line {line}) holds a target outside 0..2" \
            in str(error.value), chunk


@pytest.mark.parametrize("backend", ["numpy", "emulated"])
def test_blank_lines_in_a_csv_at_chunk_size_2(tmp_path, capsys, backend):
    # The case reported: blank lines made --chunk-size 2 fail with "ends after 3 rows".
    (tmp_path / "t.csv").write_text("y\n0\n1\n\n2\n1\n")
    (tmp_path / "p.csv").write_text("p\n0\n1\n2\n7\n")
    argv = ["--y-true", str(tmp_path / "t.csv"), "--y-pred", str(tmp_path / "p.csv"),
            "--num-classes", "3", "--backend", backend]
    outputs = []
    for chunk in ("2", "10"):
        assert main(["report", "--quiet", *argv, "--chunk-size", chunk]) == 2
        outputs.append(capsys.readouterr().err)
    assert outputs[0] == outputs[1]
    assert "p.csv: row 3 (line 5) holds a prediction outside 0..2" in outputs[0], outputs[0]
    (tmp_path / "p.csv").write_text("p\n0\n1\n2\n1\n")
    reports = [run_json(capsys, *argv, "--chunk-size", chunk) for chunk in ("1", "2", "10")]
    assert reports[0] == reports[1] == reports[2]
    assert reports[0]["total"] == 4


def test_unparsable_text_names_its_row_and_line(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("y\n0\n1\n1\n2\n")
    (tmp_path / "p.csv").write_text("p\n0\n\n1\ncat\n2\n")
    for chunk in ("1", "2", "3", "10"):
        assert main(["report", "--quiet", "--y-true", str(tmp_path / "t.csv"), "--y-pred",
                     str(tmp_path / "p.csv"), "--num-classes", "3", "--chunk-size", chunk]) == 2
        err = capsys.readouterr().err
        assert "p.csv: cannot parse row 2 (line 5) 'cat'" in err, (chunk, err)


# -- exact ROC AUC / AP of 16- and 32-bit logits: exact ------------------------------


def _exact_reference(y_true, logits, k):
    """scikit-learn's values on the float64 softmax of the logits as stored."""
    probabilities = softmax(logits.astype(np.float64))
    if k == 2:
        return (sk.roc_auc_score(y_true, probabilities[:, 1]),
                sk.average_precision_score(y_true, probabilities[:, 1]))
    return (sk.roc_auc_score(y_true, probabilities, multi_class="ovr"),
            np.mean([sk.average_precision_score(y_true == c, probabilities[:, c])
                     for c in range(k)]))


def _exact_report(tmp_path, capsys, y_true, logits, backend, *extra):
    np.save(tmp_path / "t.npy", y_true)
    np.save(tmp_path / "s.npy", logits)
    report = run_json(capsys, "--y-true", str(tmp_path / "t.npy"), "--scores",
                      str(tmp_path / "s.npy"), "--auc", "exact", "--backend", backend, *extra)
    assert report["auc_method"] == "exact"
    assert report["scores"]["roc_auc_error_bound"] == 0.0
    return report["scores"]


@pytest.mark.parametrize("backend", ["numpy", "emulated"])
@pytest.mark.parametrize("dtype, n, scale", [("float16", 200, 3.0), ("float32", 20_000, 12.0)],
                         ids=["float16", "float32-confident"])
def test_exact_auc_of_narrow_logits_is_exact(tmp_path, capsys, backend, dtype, n, scale):
    # The softmax was stored in the file's type: 200 float16 rows gave 0.809643
    # for 0.809733, and confident float32 rows were off by 6e-6, with a bound of 0.
    rng = np.random.default_rng(11)
    k = 3
    y_true = rng.integers(0, k, n)
    logits = (scale * rng.normal(size=(n, k))).astype(dtype)
    logits[np.arange(n), y_true] += scale / 2
    scores = _exact_report(tmp_path, capsys, y_true, logits, backend)
    auc, ap = _exact_reference(y_true, logits, k)
    assert scores["roc_auc_macro"] == pytest.approx(auc, rel=1e-12)
    assert scores["average_precision_macro"] == pytest.approx(ap, rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(dtype=st.sampled_from(("float16", "float32", "float64")),
       k=st.integers(2, 4), n=st.integers(4, 300), scale=st.sampled_from((0.5, 4.0, 20.0)),
       seed=st.integers(0, 2**32 - 1), chunk=st.integers(1, 301))
def test_exact_auc_equals_sklearn_on_the_float64_softmax(tmp_path_factory, dtype, k, n, scale,
                                                         seed, chunk):
    rng = np.random.default_rng(seed)
    y_true = np.arange(n) % k  # every class present: every AUC defined
    logits = (scale * rng.normal(size=(n, k))).astype(dtype)
    directory = tmp_path_factory.mktemp("exact")
    np.save(directory / "t.npy", y_true)
    np.save(directory / "s.npy", logits)
    report = report_files({"y_true": str(directory / "t.npy"),
                           "scores": str(directory / "s.npy")},
                          auc="exact", backend="numpy", chunk_rows=chunk)
    auc, ap = _exact_reference(y_true, logits, k)
    name = "roc_auc" if k == 2 else "roc_auc_macro"
    assert report.scores[name] == pytest.approx(auc, rel=1e-12, abs=1e-15)
    name = "average_precision" if k == 2 else "average_precision_macro"
    assert report.scores[name] == pytest.approx(ap, rel=1e-12, abs=1e-15)


def test_exact_score_dtype():
    from metrics_gpu.files import exact_score_dtype

    for dtype in (np.float16, np.float32, np.float64):
        assert exact_score_dtype(np.dtype(dtype), True) == np.float64
        assert exact_score_dtype(np.dtype(dtype), False) == dtype


# -- the declared kind of the scores (--scores-are) ------------------------------------


def _probability_case(rng, n, k, dtype="float64"):
    y_true = np.arange(n) % k
    logits = 2 * rng.normal(size=(n, k))
    logits[np.arange(n), y_true] += 1
    return y_true, softmax(logits).astype(dtype)


def _main_err(capsys, *argv):
    status = main(["report", "--quiet", "--format", "json", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize("backend", ["numpy", "emulated"])
def test_probabilities_read_as_logits_warn_and_declared_ones_are_right(tmp_path, capsys,
                                                                       backend):
    rng = np.random.default_rng(5)
    y_true, probabilities = _probability_case(rng, 300, 3)
    np.save(tmp_path / "t.npy", y_true)
    np.save(tmp_path / "p.npy", probabilities)
    argv = ["--y-true", str(tmp_path / "t.npy"), "--scores", str(tmp_path / "p.npy"),
            "--backend", backend, "--chunk-size", "64"]
    status, out, err = _main_err(capsys, *argv)
    assert status == 0, err
    assert err.count("\n") == 1, err
    assert re.match(r"metrics-gpu: warning: --scores .*p\.npy: every row is in \[0, 1\] and "
                    r"sums to 1.*read as logits \(the default\); pass --scores-are "
                    r"probabilities", err), err
    status, out, err = _main_err(capsys, *argv, "--scores-are", "probabilities")
    assert status == 0 and err == "", err
    scores = json.loads(out)["scores"]
    assert scores["cross_entropy"] == pytest.approx(sk.log_loss(y_true, probabilities),
                                                    rel=1e-9)
    assert scores["brier_score"] == pytest.approx(
        sk.brier_score_loss(y_true, probabilities), rel=1e-9)


@pytest.mark.parametrize("backend", ["numpy", "emulated"])
def test_logits_declared_as_probabilities_are_refused(tmp_path, capsys, backend):
    rng = np.random.default_rng(6)
    y_true = np.arange(200) % 3
    np.save(tmp_path / "t.npy", y_true)
    np.save(tmp_path / "z.npy", rng.normal(size=(200, 3)).astype(np.float32))
    status, out, err = _main_err(capsys, "--y-true", str(tmp_path / "t.npy"), "--scores",
                                 str(tmp_path / "z.npy"), "--scores-are", "probabilities",
                                 "--backend", backend)
    assert status == 2 and out == ""
    assert re.match(r"metrics-gpu: error: --scores .*z\.npy: row \d+ holds .*outside \[0, 1\]: "
                    r"not probabilities, as --scores-are probabilities declares", err), err


def test_help_says_the_default_kind(capsys):
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    assert "default logits" in " ".join(capsys.readouterr().out.split())


def _write_scores(directory, fmt: str, values: np.ndarray) -> str:
    if fmt == "npy":
        np.save(directory / "s.npy", values)
        return str(directory / "s.npy")
    if fmt == "csv":
        header = ",".join(f"s{c}" for c in range(values.shape[1]))
        np.savetxt(directory / "s.csv", values, delimiter=",", header=header, comments="",
                   fmt="%.9g")
        return str(directory / "s.csv")
    table = pa.table({"scores": pa.FixedSizeListArray.from_arrays(
        pa.array(values.ravel()), values.shape[1])})
    pa.parquet.write_table(table, directory / "s.parquet", row_group_size=7)
    return str(directory / "s.parquet:scores")


@settings(max_examples=30, deadline=None)
@given(fmt=st.sampled_from(("npy", "csv", "parquet")),
       dtype=st.sampled_from(("float16", "float32", "float64")),
       k=st.integers(2, 4), n=st.integers(4, 40), seed=st.integers(0, 2**32 - 1),
       flaw=st.sampled_from(("none", "negative", "above_one", "sum")), data=st.data())
def test_declared_kind_checked_in_every_chunk(tmp_path_factory, fmt, dtype, k, n, seed, flaw,
                                              data):
    """Rows declared as probabilities that are not are refused, naming the same row
    at every chunk size; rows of probabilities read as logits warn, and only they."""
    rng = np.random.default_rng(seed)
    # Text holds decimals, no type: its probabilities are checked as float64,
    # to float32's tolerance (float16 ones written out may sum farther from 1).
    y_true, probabilities = _probability_case(
        rng, n, k, "float32" if fmt == "csv" and dtype == "float16" else dtype)
    bad_row = data.draw(st.integers(0, n - 1))
    if flaw == "negative":
        probabilities[bad_row, 0] = -0.25
    elif flaw == "above_one":
        probabilities[bad_row, k - 1] = 1.5
    elif flaw == "sum":  # in [0, 1], but the row sums to 1.25
        probabilities[bad_row] = 0.25 + (1 / k) * (probabilities[bad_row] > -1)
    directory = tmp_path_factory.mktemp("kind")
    np.save(directory / "t.npy", y_true)
    sources = {"y_true": str(directory / "t.npy"),
               "scores": _write_scores(directory, fmt, probabilities)}
    for chunk in sorted({1, 3, n - 1, n, n + 1} - {0}):
        options = dict(backend="numpy", chunk_rows=chunk, auc="binned")
        if flaw == "none":
            report_files(sources, scores_are="probabilities", **options)  # no error
            with pytest.warns(UserWarning, match="--scores-are probabilities"):
                report_files(sources, **options)
            continue
        # A sum only: probabilities to renormalise, not logits.
        refusal = ("must sum to 1; .*divide each row by its sum" if flaw == "sum"
                   else r"not probabilities, .*pass --scores-are logits")
        with pytest.raises(FileProblem, match=rf": row {bad_row}( \(line {bad_row + 2}\))? "
                                              rf"holds .*{refusal}"):
            report_files(sources, scores_are="probabilities", **options)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # logits: no warning
            report_files(sources, **options)


@pytest.mark.parametrize("argument", ["--y-true", "--y-pred", "--scores", "--sample-weight"])
def test_a_missing_column_names_what_the_file_has(tmp_path, capsys, argument):
    """Issue 47 item 13: a CSV without the named column lists its columns (as
    Parquet does); one with no header row says it has only unnamed columns."""
    named, unnamed = tmp_path / "named.csv", tmp_path / "unnamed.csv"
    named.write_text("t,p,w\n0,1,1\n1,1,2\n")
    unnamed.write_text("0,1\n1,1\n")
    sources = {"--y-true": f"{named}:t", "--y-pred": f"{named}:p", "--scores": None,
               "--sample-weight": None}
    for path, expected in ((named, "has no column 'q'; its columns are ['t', 'p', 'w']"),
                           (unnamed, "has no header row to find 'q' in: its first line "
                                     "holds 2 unnamed column(s) of numbers")):
        argv = dict(sources, **{argument: f"{path}:q"})
        status, _, err = _main_err(capsys, *(item for option, source in argv.items()
                                             if source is not None
                                             for item in (option, source)))
        assert status == 2, err
        assert err.startswith(f"metrics-gpu: error: {argument} {path}: {expected}"), err


GROUP_VALUES = {
    "strings-npy": np.array(["north", "south", "east"]),
    "floats-npy": np.array([0.5, 1.5, -2.25]),
    "codes-npy": np.array([0, 2, 1]),
    "strings-csv": np.array(["north", "south", "east"]),
    "codes-csv": np.array([0, 2, 1]),
    "strings-parquet": np.array(["north", "south", "east"]),
}


@pytest.mark.parametrize("case", sorted(GROUP_VALUES))
@pytest.mark.parametrize("backend", ["numpy", "emulated"])
def test_groups_of_any_values_as_the_api(tmp_path, capsys, case, backend):
    """Issue 47 item 13: --groups takes what the API's groups= takes: integer
    codes, and categories (strings, fractions) encoded in sorted order, named
    by their values (strings and floats were refused as "labels"); every
    group's metrics equal label_report(..., groups=...)'s."""
    rng = np.random.default_rng(len(case))
    n = 300
    y_true, y_pred = rng.integers(0, 3, n), rng.integers(0, 3, n)
    groups = GROUP_VALUES[case][rng.integers(0, 3, n)]
    suffix = case.split("-")[1]
    if suffix == "npy":
        np.save(tmp_path / "t.npy", y_true)
        np.save(tmp_path / "p.npy", y_pred)
        np.save(tmp_path / "g.npy", groups)
        sources = [f"{tmp_path}/t.npy", f"{tmp_path}/p.npy", f"{tmp_path}/g.npy"]
    elif suffix == "csv":
        lines = ["t,p,g"] + [f"{t},{p},{g}" for t, p, g in zip(y_true, y_pred, groups)]
        (tmp_path / "d.csv").write_text("\n".join(lines) + "\n")
        sources = [f"{tmp_path}/d.csv:{name}" for name in "tpg"]
    else:
        pyarrow.parquet.write_table(pa.table({"t": y_true, "p": y_pred, "g": groups}),
                                    tmp_path / "d.parquet")
        sources = [f"{tmp_path}/d.parquet:{name}" for name in "tpg"]
    status, out, err = _main_err(capsys, "--y-true", sources[0], "--y-pred", sources[1],
                                 "--groups", sources[2], "--backend", backend,
                                 "--chunk-size", "64")
    assert status == 0, err
    ours = json.loads(out)["groups"]
    # (the API takes fractions as categories of an object array)
    reference = groups.astype(object) if groups.dtype.kind == "f" else groups
    expected = json.loads(json.dumps(
        metrics_gpu.label_report(y_true, y_pred, groups=reference,
                                 num_classes=3).groups.to_dict()))
    _assert_json_close(ours, expected)


def _assert_json_close(ours, expected, where="groups"):
    """Equal JSON trees, floats to 1e-12 (the kernels sum in another order)."""
    if isinstance(expected, dict):
        assert isinstance(ours, dict) and ours.keys() == expected.keys(), where
        for key in expected:
            _assert_json_close(ours[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(ours, list) and len(ours) == len(expected), where
        for i, (a, b) in enumerate(zip(ours, expected)):
            _assert_json_close(a, b, f"{where}[{i}]")
    elif isinstance(expected, float) and isinstance(ours, (int, float)):
        assert ours == pytest.approx(expected, rel=1e-12, abs=1e-12), where
    else:
        assert ours == expected, where
