"""Sharded inputs (a directory, a glob, a list of files, Hive-partitioned
Parquet) read as one column, and the parallel positional reads of ``.npy``
files: reports equal to the same data in one file, chunks that span shards,
errors that name the shard, and every reader count reading the same bytes."""

from __future__ import annotations

import json
import os
import re
import tracemalloc

import numpy as np
import pytest

from metrics_gpu import files
from metrics_gpu.cli import main
from metrics_gpu.files import (
    FileProblem,
    ReadThreads,
    ShardedReader,
    evaluate_files,
    evaluate_multilabel_files,
    open_column,
    open_columns,
    reader_count,
    report_files,
)
from metrics_gpu.files import readers as file_readers

N, K = 300, 3
CHUNK = 64  # several chunks, the last one short
BACKENDS = ["numpy", "emulated"]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(17)
    y_true = rng.integers(0, K, N)
    logits = rng.normal(size=(N, K)).astype(np.float32)
    logits[np.arange(N), y_true] += 1.0
    y_pred = np.where(rng.random(N) < 0.8, logits.argmax(axis=1), rng.integers(0, K, N))
    weight = rng.integers(1, 4, N).astype(np.float64)
    return {"y_true": y_true, "y_pred": y_pred, "scores": logits, "sample_weight": weight}


def save_shards(directory, stem: str, array: np.ndarray, sizes) -> list[str]:
    """``array`` cut into ``sizes`` as ``directory/stem-<i>.npy`` (no zero padding:
    natural order puts ``-2`` before ``-10``); the paths, in order."""
    directory.mkdir(parents=True, exist_ok=True)
    assert sum(sizes) == len(array)
    bounds = np.cumsum([0, *sizes])
    paths = []
    for i, (start, stop) in enumerate(zip(bounds, bounds[1:])):
        path = directory / f"{stem}-{i}.npy"
        np.save(path, array[start:stop])
        paths.append(str(path))
    return paths


def write_hive(root, columns: dict[str, np.ndarray], partitions: dict[int, list[int]],
               key: str = "part") -> np.ndarray:
    """``columns`` as Parquet files under ``root/key=value/chunk-<j>.parquet``,
    partitions in the order they are read (natural order of the paths, the
    caller's dict in that order); the partition value of each row."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    start = 0
    keys = []
    for value, sizes in partitions.items():
        (root / f"{key}={value}").mkdir(parents=True)
        for j, size in enumerate(sizes):
            part = {name: values[start:start + size] for name, values in columns.items()}
            table = pa.table({name: (pa.FixedSizeListArray.from_arrays(
                pa.array(values.ravel()), values.shape[1]) if values.ndim == 2
                else pa.array(values)) for name, values in part.items()})
            pq.write_table(table, root / f"{key}={value}" / f"chunk-{j}.parquet")
            keys += [value] * size
            start += size
    (root / "_SUCCESS").write_bytes(b"")
    return np.array(keys)


def one_file_sources(directory, data, names) -> dict[str, str]:
    directory.mkdir(exist_ok=True)
    sources = {}
    for name in names:
        np.save(directory / f"{name}.npy", data[name])
        sources[name] = str(directory / f"{name}.npy")
    return sources


COLUMN_SETS = {
    "labels": (("y_true", "y_pred"), {}),
    "scores-binned": (("y_true", "scores"), {"auc": "binned", "thresholds": 50}),
    "scores-exact": (("y_true", "y_pred", "scores"), {"auc": "exact"}),
    "weighted": (("y_true", "y_pred", "scores", "sample_weight"),
                 {"auc": "binned", "thresholds": 50}),
}
DIRECTORY_SIZES = [30, 0, 17, 64, 1, 40, 25, 33, 0, 50, 20, 20]  # 12 shards, two empty


def sharded_sources(tmp_path, layout: str, data, names) -> dict:
    """The columns ``names`` sharded as ``layout``."""
    if layout == "directory":
        for name in names:
            save_shards(tmp_path / name, "part", data[name], DIRECTORY_SIZES)
        return {name: str(tmp_path / name) for name in names}
    if layout == "glob":
        for name in names:
            save_shards(tmp_path / "all", name, data[name], [100, 0, 120, 80])
        return {name: str(tmp_path / "all" / f"{name}-*.npy") for name in names}
    if layout == "list":
        return {name: save_shards(tmp_path / name, "part", data[name], [150, 50, 100])
                for name in names}
    if layout == "mixed":  # labels in one file, the scores in 3 shards
        sources = one_file_sources(tmp_path / "one", data, [n for n in names if n != "scores"])
        if "scores" in names:
            save_shards(tmp_path / "scores", "part", data["scores"], [99, 101, 100])
            sources["scores"] = str(tmp_path / "scores")
        return sources
    assert layout == "hive"
    write_hive(tmp_path / "hive", {name: data[name] for name in names},
               {1: [40, 35], 2: [60], 10: [100, 65]})
    return {name: f"{tmp_path / 'hive'}:{name}" for name in names}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("columns", list(COLUMN_SETS))
@pytest.mark.parametrize("layout", ["directory", "glob", "list", "mixed", "hive"])
def test_sharded_report_equals_one_file(tmp_path, data, layout, columns, backend):
    names, options = COLUMN_SETS[columns]
    one = report_files(one_file_sources(tmp_path / "single", data, names), backend=backend,
                       chunk_rows=CHUNK, **options)
    sharded = report_files(sharded_sources(tmp_path, layout, data, names), backend=backend,
                           chunk_rows=CHUNK, **options)
    assert sharded.rows == N
    assert sharded.to_dict() == one.to_dict()


def test_hive_partition_keys_are_columns(tmp_path, data):
    """``DIR:key`` selects a partition key: here the groups of a grouped report."""
    groups = write_hive(tmp_path / "hive", {"y_true": data["y_true"], "y_pred": data["y_pred"]},
                        {0: [50, 50], 1: [120], 2: [80]}, key="g")
    np.save(tmp_path / "g.npy", groups)
    single = one_file_sources(tmp_path, data, ("y_true", "y_pred"))
    one = report_files({**single, "groups": str(tmp_path / "g.npy")}, backend="numpy")
    hive = str(tmp_path / "hive")
    sharded = report_files({"y_true": f"{hive}:y_true", "y_pred": f"{hive}:y_pred",
                            "groups": f"{hive}:g"}, backend="numpy", chunk_rows=CHUNK)
    assert sharded.to_dict() == one.to_dict()
    assert sharded.to_dict()["groups"] is not None


def test_natural_order_and_skipped_names(tmp_path):
    for name in ("part-10.npy", "part-2.npy", "part-1.npy", ".hidden.npy", "_SUCCESS",
                 "notes.md"):
        np.save(tmp_path / "x.npy", np.array([int(re.sub(r"\D", "", name) or 99)]))
        os.replace(tmp_path / "x.npy", tmp_path / name)
    reader = open_column(str(tmp_path), "--y-true", "labels")
    try:
        assert [shard.path.name for shard in reader.shards] == ["part-1.npy", "part-2.npy",
                                                                "part-10.npy"]
        out = reader.empty(10)
        assert reader.read(out) == 3
        assert out[:3].tolist() == [1, 2, 10]
    finally:
        reader.close()


# -- chunks across shard boundaries ---------------------------------------------------

BOUNDARY_CHUNK = 8
BOUNDARIES = {
    "below-equal-above-a-chunk": [7, 8, 9, 8],
    "shorter-than-a-chunk": [3, 20, 2, 5],
    "empty-at-start-middle-end": [0, 5, 0, 0, 12, 0],
    "a-chunk-spans-three-shards": [2, 3, 2, 9],
    "one-row-shards": [1] * 11,
}


@pytest.mark.parametrize("readers", [1, 3])
@pytest.mark.parametrize("case", list(BOUNDARIES))
def test_chunks_read_across_shards(tmp_path, case, readers, monkeypatch):
    monkeypatch.setattr(file_readers, "READ_PIECE_BYTES", 5)  # uneven pieces of every chunk
    sizes = BOUNDARIES[case]
    rng = np.random.default_rng(len(sizes))
    scores = rng.normal(size=(sum(sizes), K)).astype(np.float32)
    save_shards(tmp_path, "s", scores, sizes)
    with ReadThreads(readers) as threads:
        reader = open_column(str(tmp_path), "--scores", "scores", threads=threads)
        try:
            assert isinstance(reader, ShardedReader)
            assert reader.rows == len(scores) and reader.width == K
            out, chunks = reader.empty(BOUNDARY_CHUNK), []
            while got := reader.read(out):
                chunks.append(out[:got].copy())
                assert reader.position == sum(len(c) for c in chunks)
        finally:
            reader.close()
    assert [len(c) for c in chunks[:-1]] == [BOUNDARY_CHUNK] * (len(chunks) - 1)
    np.testing.assert_array_equal(np.concatenate(chunks), scores)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(BOUNDARIES))
def test_boundary_reports_equal_one_file(tmp_path, data, case, backend):
    sizes = BOUNDARIES[case]
    rows = sum(sizes)
    part = {name: values[:rows] for name, values in data.items()}
    names = ("y_true", "y_pred", "scores", "sample_weight")
    one = report_files(one_file_sources(tmp_path / "one", part, names), backend=backend,
                       chunk_rows=BOUNDARY_CHUNK, auc="exact", num_classes=K)
    # Labels and scores sharded alike (matched file by file), weights in one file.
    sources = {name: str(tmp_path / name) for name in ("y_true", "y_pred", "scores")}
    for name in sources:
        save_shards(tmp_path / name, "part", part[name], sizes)
    sources["sample_weight"] = one_file_sources(tmp_path / "w", part,
                                                ["sample_weight"])["sample_weight"]
    sharded = report_files(sources, backend=backend, chunk_rows=BOUNDARY_CHUNK, auc="exact",
                           num_classes=K)
    assert sharded.to_dict() == one.to_dict()


def test_progress_counts_the_rows_of_every_shard(tmp_path, data):
    save_shards(tmp_path / "t", "part", data["y_true"], [100, 100, 100])
    save_shards(tmp_path / "p", "part", data["y_pred"], [100, 100, 100])
    totals, counted = [], []

    def progress(description, total):
        totals.append((description, total))
        return counted.append

    evaluate_files({"y_true": str(tmp_path / "t"), "y_pred": str(tmp_path / "p")},
                   num_classes=K, backend="numpy", chunk_rows=CHUNK, progress=progress)
    assert totals == [("reading", N)]
    assert sum(counted) == N


def test_multilabel_sharded_equals_one_file(tmp_path):
    rng = np.random.default_rng(3)
    y_true = rng.integers(0, 2, (200, 4))
    scores = rng.normal(size=(200, 4)).astype(np.float32)
    np.save(tmp_path / "t.npy", y_true)
    np.save(tmp_path / "s.npy", scores)
    save_shards(tmp_path / "st", "part", y_true, [50, 0, 150])
    save_shards(tmp_path / "ss", "part", scores, [120, 80])
    one = evaluate_multilabel_files({"y_true": str(tmp_path / "t.npy"),
                                     "scores": str(tmp_path / "s.npy")},
                                    thresholds=20, backend="numpy", chunk_rows=33)
    sharded = evaluate_multilabel_files({"y_true": str(tmp_path / "st"),
                                         "scores": str(tmp_path / "ss" / "part-*.npy")},
                                        thresholds=20, backend="numpy", chunk_rows=33,
                                        readers=2)
    assert sharded.to_dict() == one.to_dict()


# -- errors name the shard --------------------------------------------------------------


def test_corresponding_shards_of_unequal_rows_name_both(tmp_path, data):
    save_shards(tmp_path / "t", "part", data["y_true"][:15], [5, 5, 5])
    save_shards(tmp_path / "s", "part", data["scores"][:15], [5, 4, 6])  # the same total
    with pytest.raises(FileProblem, match=r"^--scores .*s/part-1\.npy: 4 rows, but --y-true "
                                          r".*t/part-1\.npy has 5 \(file 2 of 3"):
        open_columns({"y_true": str(tmp_path / "t"), "scores": str(tmp_path / "s")})


def test_corresponding_text_shards_checked_when_a_shard_ends(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "p").mkdir()
    for i, (true_rows, pred_rows) in enumerate([(3, 3), (4, 2), (2, 4)]):
        (tmp_path / "t" / f"part-{i}.csv").write_text("y\n" + "0\n" * true_rows)
        (tmp_path / "p" / f"part-{i}.csv").write_text("p\n" + "1\n" * pred_rows)
    for chunk in (1, 4, 100):
        with pytest.raises(FileProblem, match=r"^--y-pred .*p/part-1\.csv: 2 rows, but --y-true "
                                              r".*t/part-1\.csv has 4"):
            report_files({"y_true": str(tmp_path / "t"), "y_pred": str(tmp_path / "p")},
                         num_classes=2, backend="numpy", chunk_rows=chunk)


@pytest.mark.parametrize("second, message", [
    (np.zeros((4, 4), np.float32), r"part-1\.npy holds float32 values, 4 per row, but "
                                   r"part-0\.npy holds float32 values, 3 per row"),
    (np.zeros((4, 3), np.float64), r"part-1\.npy holds float64 values, 3 per row, but "
                                   r"part-0\.npy holds float32 values, 3 per row"),
], ids=["width", "dtype"])
def test_shards_of_another_layout_name_both(tmp_path, second, message):
    (tmp_path / "s").mkdir()
    np.save(tmp_path / "s" / "part-0.npy", np.zeros((4, 3), np.float32))
    np.save(tmp_path / "s" / "part-1.npy", second)
    with pytest.raises(FileProblem, match=rf"^--scores .*s: {message}"):
        open_column(str(tmp_path / "s"), "--scores", "scores")


def test_glob_without_a_match_is_named(tmp_path, capsys):
    np.save(tmp_path / "t.npy", np.arange(3))
    pattern = str(tmp_path / "preds" / "part-*.npy")
    assert main(["report", "--quiet", "--y-true", str(tmp_path / "t.npy"), "--y-pred",
                 pattern]) == 2
    err = capsys.readouterr().err
    assert err == f"metrics-gpu: error: --y-pred {pattern}: no file matches this pattern\n"


def test_directory_without_files_is_named(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "_SUCCESS").write_bytes(b"")
    with pytest.raises(FileProblem, match=r"^--y-true .*d: the directory holds no file"):
        open_column(str(tmp_path / "d"), "--y-true", "labels")


def test_bad_value_in_the_third_shard_names_its_path_and_row(tmp_path, data):
    y_true = data["y_true"][:30].copy()
    y_pred = data["y_pred"][:30].astype(np.float64)
    y_pred[23] = 0.5  # row 3 of the third shard
    y_true[24] = 7  # row 4 of the third shard: outside 0..K-1
    save_shards(tmp_path / "t", "part", y_true, [10, 10, 10])
    save_shards(tmp_path / "p", "part", y_pred, [10, 10, 10])
    with pytest.raises(FileProblem, match=r"^--y-pred .*p/part-2\.npy: row 3 holds the "
                                          r"non-integer label 0\.5"):
        report_files({"y_true": str(tmp_path / "t"), "y_pred": str(tmp_path / "p")},
                     num_classes=K, backend="numpy", chunk_rows=7)
    y_pred[23] = 1
    save_shards(tmp_path / "p", "part", y_pred, [10, 10, 10])
    with pytest.raises(FileProblem, match=r"^--y-true .*t: part-2\.npy row 4 holds a target "
                                          r"outside 0\.\.2"):
        report_files({"y_true": str(tmp_path / "t"), "y_pred": str(tmp_path / "p")},
                     num_classes=K, backend="numpy", chunk_rows=7)


def test_bad_value_in_a_text_shard_names_its_line(tmp_path):
    (tmp_path / "t").mkdir()
    for i, body in enumerate(["0\n1\n", "1\n\n0\n", "1\n9\n"]):
        (tmp_path / "t" / f"part-{i}.csv").write_text("y\n" + body)
    np.save(tmp_path / "p.npy", np.zeros(6, np.int64))
    with pytest.raises(FileProblem, match=r"--y-true .*t: part-2\.csv row 1 \(line 3\) holds a "
                                          r"target outside 0\.\.1"):
        report_files({"y_true": str(tmp_path / "t"), "y_pred": str(tmp_path / "p.npy")},
                     num_classes=2, backend="numpy", chunk_rows=4)


def test_empty_shards_and_empty_files(tmp_path):
    (tmp_path / "d").mkdir()
    np.save(tmp_path / "d" / "part-0.npy", np.zeros(0, np.int64))
    (tmp_path / "d" / "part-1.csv").write_bytes(b"")
    with pytest.raises(FileProblem, match=r"^--y-true .*d: holds no rows .*its 2 files are "
                                          r"all empty"):
        open_column(str(tmp_path / "d"), "--y-true", "labels")
    # One empty file alone stays an error of its own.
    with pytest.raises(FileProblem, match=r"part-0\.npy: holds no values"):
        open_column(str(tmp_path / "d" / "part-0.npy"), "--y-true", "labels")


def test_truncated_shard_is_named(tmp_path):
    paths = save_shards(tmp_path / "s", "part", np.zeros((30, 3), np.float32), [10, 10, 10])
    size = os.path.getsize(paths[2])
    os.truncate(paths[2], size - 20)
    with pytest.raises(FileProblem, match=r"^--scores .*s/part-2\.npy: the file is truncated"):
        open_column(str(tmp_path / "s"), "--scores", "scores")


# -- parallel positional reads ------------------------------------------------------------


def read_all(source: str, role: str, threads: ReadThreads, chunk: int) -> np.ndarray:
    reader = open_column(source, "--scores", role, threads=threads)
    try:
        out, parts = reader.empty(chunk), []
        while got := reader.read(out):
            parts.append(out[:got].copy())
        return np.concatenate(parts)
    finally:
        reader.close()


@pytest.mark.parametrize("readers", [1, 2, 7])
def test_every_reader_count_reads_the_same(tmp_path, data, readers, monkeypatch):
    # 13 rows of 12 bytes: 156-byte chunks, in pieces of uneven sizes.
    monkeypatch.setattr(file_readers, "READ_PIECE_BYTES", 5)
    np.save(tmp_path / "s.npy", data["scores"])
    np.save(tmp_path / "t.npy", data["y_true"].astype(">i4"))  # converted after the read
    with ReadThreads(readers) as threads:
        assert threads.count == readers
        np.testing.assert_array_equal(read_all(str(tmp_path / "s.npy"), "scores", threads, 13),
                                      data["scores"])
        np.testing.assert_array_equal(read_all(str(tmp_path / "t.npy"), "labels", threads, 13),
                                      data["y_true"])
    sources = {"y_true": str(tmp_path / "t.npy"), "scores": str(tmp_path / "s.npy")}
    report = report_files(sources, backend="numpy", chunk_rows=13, readers=readers)
    expected = report_files(sources, backend="numpy", chunk_rows=13, readers=1)
    assert report.to_dict() == expected.to_dict()


def test_short_reads_are_read_again(tmp_path, data, monkeypatch):
    monkeypatch.setattr(file_readers, "READ_PIECE_BYTES", 64)
    real_preadv = os.preadv
    calls = []

    def preadv_a_few_bytes(fd, buffers, offset):
        calls.append(offset)
        return real_preadv(fd, [buffers[0][:7]], offset)

    monkeypatch.setattr(os, "preadv", preadv_a_few_bytes)
    np.save(tmp_path / "s.npy", data["scores"])
    with ReadThreads(3) as threads:
        got = read_all(str(tmp_path / "s.npy"), "scores", threads, 50)
    np.testing.assert_array_equal(got, data["scores"])
    assert len(calls) >= data["scores"].nbytes // 7


def test_pread_and_copy_where_preadv_is_missing(tmp_path, data, monkeypatch):
    monkeypatch.setattr(file_readers, "READ_PIECE_BYTES", 100)
    monkeypatch.delattr(os, "preadv")
    np.save(tmp_path / "s.npy", data["scores"])
    with ReadThreads(4) as threads:
        np.testing.assert_array_equal(read_all(str(tmp_path / "s.npy"), "scores", threads, 40),
                                      data["scores"])


@pytest.mark.parametrize("readers", [1, 4])
def test_truncated_npy_with_parallel_readers(tmp_path, data, readers, monkeypatch):
    monkeypatch.setattr(file_readers, "READ_PIECE_BYTES", 16)
    path = tmp_path / "s.npy"
    np.save(path, data["scores"])
    header = os.path.getsize(path) - data["scores"].nbytes
    with ReadThreads(readers) as threads:
        reader = open_column(str(path), "--scores", "scores", threads=threads)
        try:
            os.truncate(path, header + 12 * 20 + 5)  # ends inside row 20, after the open
            out = reader.empty(13)
            assert reader.read(out) == 13
            with pytest.raises(FileProblem, match=r"^--scores .*s\.npy: the file is truncated: "
                                                  r"it ends inside row 20$"):
                reader.read(out)
        finally:
            reader.close()
        with pytest.raises(FileProblem, match=r"s\.npy: the file is truncated: \d[\d,]* bytes "
                                              r"where its header promises"):
            open_column(str(path), "--scores", "scores", threads=threads)


def test_one_reader_pool_per_evaluation(tmp_path, data, monkeypatch):
    import concurrent.futures

    made = []

    class CountedPool(concurrent.futures.ThreadPoolExecutor):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(concurrent.futures, "ThreadPoolExecutor", CountedPool)
    save_shards(tmp_path / "t", "part", data["y_true"], [100, 200])
    np.save(tmp_path / "p.npy", data["y_pred"])
    np.save(tmp_path / "g.npy", data["y_true"] % 2)
    # Three passes (the classes, the groups, the report) over many chunks.
    report_files({"y_true": str(tmp_path / "t"), "y_pred": str(tmp_path / "p.npy"),
                  "groups": str(tmp_path / "g.npy")}, backend="numpy", chunk_rows=16,
                 readers=3)
    assert len(made) == 1
    assert made[0]._shutdown
    report_files({"y_true": str(tmp_path / "t"), "y_pred": str(tmp_path / "p.npy")},
                 backend="numpy", readers=1)
    assert len(made) == 1  # one reader: no pool


def _peak_bytes(sources, **options) -> int:
    tracemalloc.start()
    try:
        evaluate_files(sources, **options)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_parallel_reads_keep_memory_bounded(tmp_path):
    """Pieces are read straight into the chunk buffers: the peak does not grow
    with the file (four times the rows, the same peak within a few KB)."""
    rng = np.random.default_rng(0)
    peaks = {}
    for rows in (4000, 16000):
        np.save(tmp_path / f"t{rows}.npy", rng.integers(0, K, rows))
        np.save(tmp_path / f"s{rows}.npy", rng.normal(size=(rows, K)).astype(np.float32))
        sources = {"y_true": str(tmp_path / f"t{rows}.npy"),
                   "scores": str(tmp_path / f"s{rows}.npy")}
        options = dict(backend="numpy", chunk_rows=500, readers=4, auc="binned", thresholds=50)
        _peak_bytes(sources, **options)  # warm: caches and plans made once
        peaks[rows] = _peak_bytes(sources, **options)
    grown = peaks[16000] - peaks[4000]
    file_grown = 12000 * (8 + 4 * K)
    assert grown < file_grown / 8, (peaks, file_grown)


def test_reader_count(monkeypatch):
    monkeypatch.delenv(files.READERS_ENVIRONMENT, raising=False)
    assert 1 <= reader_count() <= files.MAX_DEFAULT_READERS
    assert reader_count(3) == 3
    monkeypatch.setenv(files.READERS_ENVIRONMENT, "5")
    assert reader_count() == 5
    assert reader_count(2) == 2  # the argument first
    monkeypatch.setenv(files.READERS_ENVIRONMENT, "many")
    with pytest.raises(ValueError, match="METRICS_GPU_READERS='many'"):
        reader_count()
    with pytest.raises(ValueError, match="readers"):
        reader_count(0)


# -- the command line ---------------------------------------------------------------------


def run_json(capsys, *argv) -> dict:
    assert main(["report", "--format", "json", "--quiet", *argv]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_cli_directory_glob_and_several_files(tmp_path, data, capsys):
    single = one_file_sources(tmp_path / "one", data, ("y_true", "y_pred", "scores"))
    expected = run_json(capsys, "--y-true", single["y_true"], "--y-pred", single["y_pred"],
                        "--scores", single["scores"], "--chunk-size", "50")
    save_shards(tmp_path / "t", "part", data["y_true"], [120, 0, 180])
    # Sharded in 3, 4 and 2 files: matched by position only.
    save_shards(tmp_path / "s", "part", data["scores"], [100, 100, 50, 50])
    predicted = save_shards(tmp_path / "p", "part", data["y_pred"], [10, 290])
    for readers in ("1", "3"):
        report = run_json(capsys, "--y-true", str(tmp_path / "t"), "--y-pred", *predicted,
                          "--scores", str(tmp_path / "s" / "part-*.npy"), "--chunk-size", "50",
                          "--readers", readers)
        assert report == expected


def test_cli_directory_of_float_predictions_is_read_as_scores(tmp_path, data, capsys):
    np.save(tmp_path / "t.npy", data["y_true"])
    np.save(tmp_path / "s.npy", data["scores"])
    expected = run_json(capsys, "--y-true", str(tmp_path / "t.npy"), "--scores",
                        str(tmp_path / "s.npy"))
    save_shards(tmp_path / "s", "part", data["scores"], [150, 150])
    report = run_json(capsys, "--y-true", str(tmp_path / "t.npy"), "--y-pred",
                      str(tmp_path / "s"))
    assert report == expected


def test_cli_help_names_the_sharded_inputs(capsys):
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "glob" in text and "directory" in text and "--readers N" in text
