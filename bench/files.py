"""Bench: `metrics-gpu report` on large prediction files, against reading them.

    python bench/files.py [--rows 2e8] [--classes 10] [--shards 1] [--dir DIR]
                          [--readers 1,N] [--workers N] [--backend auto] [--repeat 1]
                          [--drop-caches] [--json PATH]

Writes (once; kept in ``--dir``, where a marker file records the rows, classes
and shards, so that a rerun of the same layout reuses them) int32 labels
``t``, int32 predicted labels ``p`` (the logits' argmax) and float32 ``(N, K)``
logits ``s``, block by block with plain writes (bounded memory): ``t.npy`` /
``p.npy`` / ``s.npy`` with ``--shards 1``, else the same rows in S files per
column, ``t/part-00000.npy`` ... (the last shards one row shorter where S does
not divide N), which the report reads as directories (``--y-true DIR --scores
DIR``). Then, for each case (labels; labels + scores with ``--auc binned``:
bounded memory), in one run:

* the read bandwidth of the case's files, one column per reader: ``cat FILES
  > /dev/null``; a single-thread NumPy chunked read (``readinto`` into one
  64 MB buffer); ours, the report's reader alone (``open_columns`` with a
  ``ReadThreads(R)`` pool, every chunk into one buffer set, no metrics) for
  each R of ``--readers`` (default: 1 and ``reader_count()``); KvikIO
  (``kvikio.CuFile`` into a 256 MB device buffer, each ``.npy`` from the end
  of its header, KvikIO's own thread pool) where it is installed and CuPy has
  a device, else "n/a (not installed)" / "n/a (no GPU)";
* the fixed start-up: ``metrics-gpu report`` of the case in a fresh process on
  1,000 rows of the same layout (``--dir``/startup): interpreter, imports,
  backend start, worker processes (as many as the large file gets), first
  compile. One untimed run first, so that it finds the caches (compiled
  kernels, the modules' pages) as the large file's report does;
* ``metrics-gpu report`` of the case in a fresh process, timed whole from
  the parent (what a user waits for); its rate raw (rows / report seconds)
  and steady (rows / (report seconds - start-up seconds)); the steady time's
  fraction of ``cat`` and of our fastest read; its peak memory: the report
  process's VmHWM ("peak MB"), and the peak proportional set size (Pss) of
  the report and its worker processes together ("tree MB"), sampled every
  50 ms from the parent in one more run, not timed (the sampling walks
  /proc; a forked worker's own high-water mark would count again the pages
  it shares with the report);
* on the cuda backend also the chunk loop with copies and no update (copy
  alone) against the same loop with the updates (copy + compute): the
  overlap of reading, copying and computing.

``--backend`` and ``--workers N`` are passed to the reports (``--workers``,
or ``METRICS_GPU_CPU_WORKERS`` where the CLI has no such option); the
reports read with their default reader count. ``--repeat N`` keeps the
fastest of N timings of each read and report (the highest peaks). With
``--drop-caches`` (root) every timed read and report starts from a cold page
cache; otherwise the files are read warm (the header says how large they are
against the machine's memory: files larger than it come from the disk
whatever the flag). The header names the commit, machine, cores, backend,
readers, workers, shards and page-cache state; ``--json`` writes it with
every number.

Targets (issue 32), from the page cache: on a GPU (cuda backend) labels, and
labels + scores, each at >= 80% of ``cat``'s bandwidth (steady time); on the
2-core CPU, the NumPy backend's labels + K = 10 scores at >= 20 M rows/s
(steady); peak memory < 1 GB whatever the size (the larger of peak MB and
tree MB). The last line says "met" or "not met" for each, with the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from _common import REPO, count, git_commit, load_gpu, plain, write_json

TARGET_FRACTION_OF_CAT = 0.80
TARGET_NUMPY_ROWS_PER_S = 20e6
TARGET_PEAK_BYTES = 1 << 30
BLOCK_ROWS = 1 << 22  # rows generated at a time while writing (about 0.5 GB at K = 10)
STARTUP_ROWS = 1000
NUMPY_READ_BYTES = 64 << 20
KVIKIO_BUFFER_BYTES = 256 << 20  # device buffer each KvikIO read fills
MEMORY_SAMPLE_S = 0.05
COLUMN_DTYPES = {"t": np.int32, "p": np.int32, "s": np.float32}
LAYOUT_VERSION = 2  # bump when the generated values change


# -- the files ------------------------------------------------------------------------


def shard_sizes(rows: int, shards: int) -> list[int]:
    """Rows of each shard: as equal as can be, the last ones one row shorter."""
    base, extra = divmod(rows, shards)
    return [base + (i < extra) for i in range(shards)]


def column_sources(directory: Path, shards: int) -> dict[str, Path]:
    """Where each column lives: ``t.npy`` (one file), or ``t/`` (a directory of shards)."""
    return {name: directory / (f"{name}.npy" if shards == 1 else name) for name in COLUMN_DTYPES}


def _row_blocks(rows: int, classes: int):
    """The columns' values, ``BLOCK_ROWS`` rows at a time: labels, logits with
    +1.5 on the true class, and their argmax as the predicted labels."""
    rng = np.random.default_rng(0)
    for start in range(0, rows, BLOCK_ROWS):
        n = min(BLOCK_ROWS, rows - start)
        y = rng.integers(0, classes, n, dtype=np.int32)
        logits = rng.standard_normal((n, classes), np.float32)
        logits[np.arange(n), y] += 1.5
        yield {"t": y, "p": logits.argmax(axis=1).astype(np.int32), "s": logits}


def _open_npy(path: Path, dtype, shape: tuple[int, ...]):
    """A new ``.npy`` file with its header written, open for its values' bytes."""
    stream = open(path, "wb")
    np.lib.format.write_array_header_1_0(stream, {
        "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
        "shape": shape})
    return stream


def write_columns(directory: Path, rows: int, classes: int, shards: int) -> dict[str, Path]:
    """The label pair and the logits in ``directory`` (one file per column, or
    ``shards`` files per column), written block by block through plain writes
    (bounded memory); reused when the marker file records the same layout."""
    layout = {"rows": rows, "classes": classes, "shards": shards, "version": LAYOUT_VERSION}
    sources = column_sources(directory, shards)
    marker = directory / ("layout-files.json" if shards == 1 else "layout-shards.json")
    if marker.exists() and json.loads(marker.read_text()) == layout:
        return sources
    marker.unlink(missing_ok=True)
    directory.mkdir(parents=True, exist_ok=True)
    if shards == 1:
        files = {name: [path] for name, path in sources.items()}
    else:
        files = {}
        for name, folder in sources.items():
            folder.mkdir(exist_ok=True)
            for stale in folder.glob("part-*.npy"):  # another shard count's files
                stale.unlink()
            files[name] = [folder / f"part-{i:05d}.npy" for i in range(shards)]
    blocks = _row_blocks(rows, classes)
    block, used = None, 0  # the block being written, and its rows written so far
    for index, size in enumerate(shard_sizes(rows, shards)):
        streams = {name: _open_npy(paths[index], COLUMN_DTYPES[name],
                                   (size, classes) if name == "s" else (size,))
                   for name, paths in files.items()}
        left = size
        while left:
            if block is None or used == len(block["t"]):
                block, used = next(blocks), 0
            n = min(left, len(block["t"]) - used)
            for name, stream in streams.items():
                stream.write(block[name][used:used + n].data.cast("B"))
            used, left = used + n, left - n
        for stream in streams.values():
            stream.close()
    marker.write_text(json.dumps(layout) + "\n")
    return sources


def npy_data_range(path: Path) -> tuple[int, int]:
    """``(first, end)`` byte offsets of a ``.npy`` file's values (after its header)."""
    with open(path, "rb") as stream:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            np.lib.format.read_array_header_1_0(stream)
        else:
            np.lib.format.read_array_header_2_0(stream)
        return stream.tell(), path.stat().st_size


# -- reading the same files --------------------------------------------------------------


def drop_caches(enabled: bool) -> None:
    if enabled:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")


def time_cat(files: list[Path], cold: bool) -> float:
    drop_caches(cold)
    start = time.perf_counter()
    subprocess.run(["cat", *map(str, files)], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def time_numpy_read(files: list[Path], cold: bool) -> float:
    """One thread, ``readinto`` one 64 MB buffer, file after file."""
    drop_caches(cold)
    buffer = np.empty(NUMPY_READ_BYTES, np.uint8)
    view = buffer.data
    start = time.perf_counter()
    for path in files:
        with open(path, "rb", buffering=0) as stream:
            while stream.readinto(view):
                pass
    return time.perf_counter() - start


def time_our_read(sources: dict[str, Any], readers: int, cold: bool) -> float:
    """The report's reader alone: ``open_columns`` with ``ReadThreads(readers)``,
    every chunk into one buffer set (the report's chunk size), no metrics."""
    from metrics_gpu.files import (
        CHUNK_BYTES,
        MAX_CHUNK_ROWS,
        ReadThreads,
        _row_bytes,
        open_columns,
    )

    drop_caches(cold)
    start = time.perf_counter()
    with ReadThreads(readers) as threads:
        columns = open_columns(sources, threads=threads)
        try:
            chunk_rows = max(1, min(MAX_CHUNK_ROWS, CHUNK_BYTES // _row_bytes(columns)))
            buffers = {name: reader.empty(chunk_rows) for name, reader in columns.items()}
            while all([reader.read(buffers[name]) for name, reader in columns.items()]):
                pass
        finally:
            for reader in columns.values():
                reader.close()
    return time.perf_counter() - start


def fastest(repeat: int, timed, *arguments) -> float:
    """The least of ``repeat`` times that ``timed(*arguments)`` returns."""
    return min(timed(*arguments) for _ in range(repeat))


def load_kvikio():
    """``(kvikio, cupy, None)``, or ``(None, None, why not)``."""
    try:
        import kvikio
    except Exception:
        return None, None, "n/a (not installed)"
    cp, _ = load_gpu()
    if cp is None:
        return None, None, "n/a (no GPU)"
    return kvikio, cp, None


def kvikio_threads(kvikio) -> int | None:
    """KvikIO's thread pool size (its API moved between releases)."""
    defaults = getattr(kvikio, "defaults", None)
    for name in ("get", "num_threads", "get_num_threads"):
        function = getattr(defaults, name, None)
        if function is None:
            continue
        try:
            return int(function("num_threads") if name == "get" else function())
        except Exception:
            continue
    return None


def time_kvikio_read(files: list[Path], cold: bool, kvikio, cp) -> float:
    """Each ``.npy``'s values (its header skipped) into one device buffer with
    ``kvikio.CuFile``, ``KVIKIO_BUFFER_BYTES`` at a time."""
    largest = max(end - first for first, end in map(npy_data_range, files))
    buffer = cp.empty(max(1, min(KVIKIO_BUFFER_BYTES, largest)), cp.uint8)
    cp.cuda.runtime.deviceSynchronize()
    drop_caches(cold)
    start = time.perf_counter()
    for path in files:
        offset, end = npy_data_range(path)
        with kvikio.CuFile(path, "r") as stream:
            while offset < end:
                size = min(buffer.nbytes, end - offset)
                got = stream.pread(buffer[:size], size=size, file_offset=offset).get()
                if not got:
                    raise OSError(f"{path}: KvikIO read nothing at byte {offset:,}")
                offset += got
    cp.cuda.runtime.deviceSynchronize()
    elapsed = time.perf_counter() - start
    del buffer
    cp.get_default_memory_pool().free_all_blocks()
    return elapsed


# -- the report in a fresh process -----------------------------------------------------

# Peak resident memory of the report process: VmHWM (ru_maxrss would carry the
# parent's high-water mark across fork and exec).
REPORT = """
import json, sys, time
from metrics_gpu.cli import main
start = time.perf_counter()
status = main(sys.argv[1:])
elapsed = time.perf_counter() - start
with open("/proc/self/status") as status_file:
    peak = next(int(line.split()[1]) * 1024 for line in status_file
                if line.startswith("VmHWM:"))
print(json.dumps({"status": status, "main_seconds": elapsed, "peak": peak}), file=sys.stderr)
"""


def _process_tree(root: int) -> list[int]:
    """``root`` and its descendants (by the parent ids in ``/proc/*/stat``)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                data = stat.read()
        except OSError:  # ended meanwhile
            continue
        parent = int(data[data.rindex(b")") + 2:].split()[1])
        children.setdefault(parent, []).append(int(name))
    tree, pending = [], [root]
    while pending:
        pid = pending.pop()
        tree.append(pid)
        pending += children.get(pid, [])
    return tree


def _tree_pss(root: int) -> int:
    """Proportional set size of ``root`` and its descendants, in bytes (shared
    pages split between their sharers: summed, each page counts once)."""
    total = 0
    for pid in _process_tree(root):
        try:
            with open(f"/proc/{pid}/smaps_rollup") as rollup:
                total += next(int(line.split()[1]) * 1024 for line in rollup
                              if line.startswith("Pss:"))
        except (OSError, StopIteration):
            continue
    return total


def report_cli_has_workers() -> bool:
    """Whether ``metrics-gpu report`` takes ``--workers`` (else the environment
    variable passes the count)."""
    from metrics_gpu.cli import build_parser

    _, unknown = build_parser().parse_known_args(
        ["report", "--y-true", "x", "--workers", "1"])
    return "--workers" not in unknown


def time_report(argv: list[str], cold: bool, environment: dict[str, str],
                expected_rows: int, sample_memory: bool = False) -> dict:
    """``metrics-gpu report ARGV`` in a fresh process: its wall time from here,
    its ``main()`` time, its VmHWM and, with ``sample_memory``, the sampled
    peak Pss of it and its workers (the sampling walks /proc: a run that
    samples is not timed)."""
    drop_caches(cold)
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        start = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-c", REPORT, "report", "--quiet", "--format", "json", *argv],
            stdout=stdout, stderr=stderr, cwd=REPO, env=environment)
        tree_peak = 0
        while True:
            try:
                process.wait(MEMORY_SAMPLE_S if sample_memory else None)
                break
            except subprocess.TimeoutExpired:
                tree_peak = max(tree_peak, _tree_pss(process.pid))
        seconds = time.perf_counter() - start
        stdout.seek(0)
        stderr.seek(0)
        out, err = stdout.read().decode(), stderr.read().decode()
    lines = err.strip().splitlines()
    try:
        measured = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        raise SystemExit(f"report failed (exit code {process.returncode}):\n{err}") from None
    if measured["status"] != 0:
        raise SystemExit(f"report failed: {err}")
    total = json.loads(out)["total"]
    if total != expected_rows:
        raise SystemExit(f"the report counted {total:,} rows of {expected_rows:,}")
    measured.update(seconds=seconds, tree_peak=tree_peak)
    return measured


def fastest_report(repeat: int, *arguments) -> dict:
    """The fastest of ``repeat`` timed runs of :func:`time_report`, with the
    highest VmHWM of them all and the peak Pss of one more run that samples it."""
    runs = [time_report(*arguments) for _ in range(repeat)]
    sampled = time_report(*arguments, sample_memory=True)
    fastest_run = dict(min(runs, key=lambda run: run["seconds"]))
    fastest_run.update(peak=max(run["peak"] for run in [*runs, sampled]),
                       tree_peak=sampled["tree_peak"])
    return fastest_run


# -- the cuda chunk loop -----------------------------------------------------------------


def time_copy_overlap(sources: dict[str, Any], classes: int) -> dict | None:
    """cuda only: the chunk loop with copies alone, then with the updates."""
    from metrics_gpu.backends.selection import backend_for_host_data, use_backend
    from metrics_gpu._streaming.metrics import ClassificationMetrics
    from metrics_gpu.files import ReadThreads, _stream, open_columns

    if backend_for_host_data("auto") != "cuda":
        return None
    import cupy

    out = {}
    for label, with_state in (("copy alone", False), ("copy + compute", True)):
        state = ClassificationMetrics(classes, validate=False, thresholds=1000) \
            if with_state else None
        chunk = max(1, min(1 << 20, (64 << 20) // (4 * (classes + 1))))
        with ReadThreads() as threads, use_backend("cuda"):
            readers = open_columns(sources, threads=threads)
            try:
                cupy.cuda.get_current_stream().synchronize()
                start = time.perf_counter()
                _stream(readers, "cuda", chunk, None, state, None, None, None, True, classes,
                        None)
                cupy.cuda.get_current_stream().synchronize()
                out[label] = time.perf_counter() - start
            finally:
                for reader in readers.values():
                    reader.close()
    return out


# -- the run -----------------------------------------------------------------------------

# Each case: its columns (report option -> file stem) and its own report options.
CASES = {
    "labels": {"y_true": "t", "y_pred": "p"},
    "labels + scores (binned AUC)": {"y_true": "t", "scores": "s"},
}
SCORES_CASE = "labels + scores (binned AUC)"


def reader_list(text: str) -> list[int]:
    """``--readers``: a comma list of reader thread counts, e.g. 1,2,8."""
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"a comma list of whole numbers, got {text!r}") \
            from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"reader counts are >= 1, got {text!r}")
    return list(dict.fromkeys(counts))


def machine_text() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next(line.split(":", 1)[1].strip() for line in cpuinfo
                         if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{platform.machine()} {model}"


def memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as meminfo:
            return next(int(line.split()[1]) * 1024 for line in meminfo
                        if line.startswith("MemTotal:"))
    except (OSError, StopIteration):
        return None


def shown(value: float | None, spec: str, scale: float = 1.0) -> str:
    return "-" if value is None else f"{value / scale:{spec}}"


@dataclass
class Run:
    """What the cases of one run share."""

    args: argparse.Namespace
    backend: str
    readers: list[int]
    sources: dict[str, Path]  # column stem -> file or directory
    startup_sources: dict[str, Path]  # the same layout, STARTUP_ROWS rows
    files: dict[str, list[Path]]  # column stem -> its files, in reading order
    cli_workers: bool  # whether the report takes --workers (else the environment)
    environment: dict[str, str]  # the reports' environment
    kvikio: Any
    cupy: Any
    kvikio_missing: str | None  # why there is no KvikIO column


def column_argv(columns: dict[str, str], sources: dict[str, Path]) -> list[str]:
    return [item for column, stem in columns.items()
            for item in (f"--{column.replace('_', '-')}", str(sources[stem]))]


def measure_reads(run: Run, columns: dict[str, str], case_files: list[Path]) -> dict:
    """Seconds each reader takes over the case's files (the fastest of --repeat)."""
    repeat, cold = run.args.repeat, run.args.drop_caches
    case_sources = {column: str(run.sources[stem]) for column, stem in columns.items()}
    # Untimed: our reader's first call imports what its checks use.
    time_our_read({column: str(run.startup_sources[stem]) for column, stem in columns.items()},
                  run.readers[0], cold=False)
    reads = {"cat_s": fastest(repeat, time_cat, case_files, cold),
             "numpy_s": fastest(repeat, time_numpy_read, case_files, cold),
             "ours_s": {r: fastest(repeat, time_our_read, case_sources, r, cold)
                        for r in run.readers},
             "kvikio_s": None, "kvikio": run.kvikio_missing}
    if run.kvikio is not None:
        try:
            reads["kvikio_s"] = fastest(repeat, time_kvikio_read, case_files, cold, run.kvikio,
                                        run.cupy)
        except Exception as error:  # a KvikIO set-up problem must not end the run
            reads["kvikio"] = f"n/a ({type(error).__name__}: {error})".splitlines()[0]
    return reads


def measure_case(run: Run, name: str, columns: dict[str, str]) -> dict:
    """The reads of one case, its start-up report and its report."""
    from metrics_gpu.files.workers import WORKERS_ENVIRONMENT, worker_count

    args, rows = run.args, run.args.rows
    case_files = [path for stem in columns.values() for path in run.files[stem]]
    options = ["--auc", "binned"] if "scores" in columns else ["--num-classes",
                                                                str(args.classes)]
    options += ["--backend", run.backend]
    if args.workers is not None and run.cli_workers:
        options += ["--workers", str(args.workers)]
    values = rows * sum(args.classes if column == "scores" else 1 for column in columns)
    workers = worker_count(values, args.workers) if run.backend == "numpy" else None
    # The tiny file starts as many workers as the large one gets.
    startup_options, startup_environment = options, run.environment
    if workers is not None and args.workers is None:
        if run.cli_workers:
            startup_options = [*options, "--workers", str(workers)]
        else:
            startup_environment = {**run.environment, WORKERS_ENVIRONMENT: str(workers)}

    reads = measure_reads(run, columns, case_files)
    # Untimed: the first run fills the caches (compiled kernels, the imported
    # modules' pages) that the timed runs then find, as the large one does.
    time_report([*column_argv(columns, run.startup_sources), *startup_options],
                False, startup_environment, STARTUP_ROWS)
    startup = fastest_report(args.repeat, [*column_argv(columns, run.startup_sources),
                                           *startup_options],
                             args.drop_caches, startup_environment, STARTUP_ROWS)
    report = fastest_report(args.repeat, [*column_argv(columns, run.sources), *options],
                            args.drop_caches, run.environment, rows)
    steady_s = report["seconds"] - startup["seconds"]
    steady_s = steady_s if steady_s > 0 else None
    best_ours = min(reads["ours_s"].values())
    return {
        "case": name, "rows": rows, "classes": args.classes, "shards": args.shards,
        "files": len(case_files), "bytes": sum(path.stat().st_size for path in case_files),
        "workers": workers, "reads": reads,
        "startup_s": startup["seconds"], "startup_main_s": startup["main_seconds"],
        "report_s": report["seconds"], "report_main_s": report["main_seconds"],
        "steady_s": steady_s,
        "rows_per_s": rows / report["seconds"],
        "steady_rows_per_s": None if steady_s is None else rows / steady_s,
        "fraction_of_cat": reads["cat_s"] / report["seconds"],
        "steady_fraction_of_cat": None if steady_s is None else reads["cat_s"] / steady_s,
        "steady_fraction_of_ours": None if steady_s is None else best_ours / steady_s,
        "peak_bytes": report["peak"], "tree_peak_bytes": report["tree_peak"],
        "startup_peak_bytes": startup["peak"]}


def print_reads(results: list[dict], readers: list[int]) -> None:
    print("read bandwidth of the same files, GB/s (ours R: open_columns + ReadThreads(R), "
          "every chunk into one buffer set, no metrics)")
    print(f"{'case':<30}{'files':>6}{'GB':>8}{'cat':>8}{'numpy':>8}"
          + "".join(f"{f'ours R={r}':>11}" for r in readers) + f"{'kvikio':>9}")
    for row in results:
        gb, reads = row["bytes"] / 1e9, row["reads"]
        kvikio = "n/a" if reads["kvikio_s"] is None else f"{gb / reads['kvikio_s']:.2f}"
        print(f"{row['case']:<30}{row['files']:>6}{gb:>8.2f}{gb / reads['cat_s']:>8.2f}"
              f"{gb / reads['numpy_s']:>8.2f}"
              + "".join(f"{gb / reads['ours_s'][r]:>11.2f}" for r in readers)
              + f"{kvikio:>9}")
    missing = next((row["reads"]["kvikio"] for row in results if row["reads"]["kvikio"]), None)
    if missing:
        print(f"kvikio: {missing}")


def print_reports(results: list[dict]) -> None:
    print(f"metrics-gpu report, each in a fresh process timed whole; start-up: the same "
          f"report on {STARTUP_ROWS:,} rows; steady = rows / (report s - start-up s)")
    print(f"{'case':<30}{'rows':>13}{'workers':>8}{'start-up s':>11}{'report s':>10}"
          f"{'M rows/s':>9}{'steady':>8}{'of cat':>8}{'of ours':>8}{'peak MB':>8}"
          f"{'tree MB':>8}")
    for row in results:
        print(f"{row['case']:<30}{row['rows']:>13,}{row['workers'] or '-':>8}"
              f"{row['startup_s']:>11.2f}{row['report_s']:>10.2f}"
              f"{row['rows_per_s'] / 1e6:>9.1f}"
              f"{shown(row['steady_rows_per_s'], '.1f', 1e6):>8}"
              f"{shown(row['steady_fraction_of_cat'], '.0%'):>8}"
              f"{shown(row['steady_fraction_of_ours'], '.0%'):>8}"
              f"{row['peak_bytes'] / 2**20:>8.0f}{row['tree_peak_bytes'] / 2**20:>8.0f}")
    print("of cat / of ours: the read's time over the steady time (ours: its fastest R); "
          "peak MB: the report process's VmHWM; tree MB: the peak Pss of it and its worker "
          f"processes together (shared pages counted once), sampled every "
          f"{MEMORY_SAMPLE_S * 1e3:.0f} ms in a run that is not timed")


def check_targets(results: list[dict], backend: str, classes: int) -> list[dict]:
    """Issue 32's targets for this backend, each met or not, with the numbers."""
    targets = []
    if backend == "cuda":
        for row in results:
            value = row["steady_fraction_of_cat"]
            targets.append({
                "target": f"{row['case']} >= {TARGET_FRACTION_OF_CAT:.0%} of cat (steady)",
                "measured": value,
                "met": value is not None and value >= TARGET_FRACTION_OF_CAT,
                "shown": f"{shown(value, '.0%')}; raw {row['fraction_of_cat']:.0%}"})
    elif backend == "numpy":
        row = next(row for row in results if row["case"] == SCORES_CASE)
        value = row["steady_rows_per_s"]
        targets.append({
            "target": f"labels + K = {classes} scores >= "
                      f"{TARGET_NUMPY_ROWS_PER_S / 1e6:.0f} M rows/s (steady)",
            "measured": value,
            "met": value is not None and value >= TARGET_NUMPY_ROWS_PER_S,
            "shown": f"{shown(value, '.1f', 1e6)} M rows/s; raw {row['rows_per_s'] / 1e6:.1f}"})
    peak = max(max(row["peak_bytes"], row["tree_peak_bytes"]) for row in results)
    targets.append({"target": "peak memory < 1 GB", "measured": peak,
                    "met": peak < TARGET_PEAK_BYTES, "shown": f"{peak / 2**20:.0f} MB"})
    return targets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=count, default=200_000_000)
    parser.add_argument("--classes", type=count, default=10)
    parser.add_argument("--shards", type=count, default=1,
                        help="files per column (1: t.npy ...; S: t/part-00000.npy ...)")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/metrics-gpu-bench-files"))
    parser.add_argument("--readers", type=reader_list,
                        help="our reader's thread counts to time, e.g. 1,2,8 (default: 1 "
                        "and the default count)")
    parser.add_argument("--workers", type=count,
                        help="numpy backend: the reports' worker processes (default: theirs)")
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--repeat", type=count, default=1,
                        help="time each read and report this many times, keep the fastest")
    parser.add_argument("--drop-caches", action="store_true",
                        help="every timed read and report from a cold page cache (root)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.shards > args.rows:
        parser.error(f"--shards {args.shards} is more than --rows {args.rows}")

    import metrics_gpu
    from metrics_gpu.backends.selection import backend_for_host_data
    from metrics_gpu.files.workers import WORKERS_ENVIRONMENT, available_cores
    from metrics_gpu.files import reader_count, source_files

    backend = backend_for_host_data(args.backend)
    readers = args.readers or list(dict.fromkeys([1, reader_count()]))
    for r in readers:
        reader_count(r)  # its range check
    start = time.perf_counter()
    sources = write_columns(args.dir, args.rows, args.classes, args.shards)
    startup_sources = write_columns(args.dir / "startup", STARTUP_ROWS, args.classes,
                                    min(args.shards, STARTUP_ROWS))
    files = {stem: [path for path, _ in source_files(str(source))]
             for stem, source in sources.items()}
    print(f"files ready in {time.perf_counter() - start:.0f} s: " + ", ".join(
        f"{sources[stem].name} {sum(p.stat().st_size for p in paths) / 1e9:.2f} GB"
        + (f" in {len(paths)} files" if args.shards > 1 else "")
        for stem, paths in files.items()))

    cli_workers = report_cli_has_workers()
    environment = dict(os.environ)
    if args.workers is not None and not cli_workers:
        environment[WORKERS_ENVIRONMENT] = str(args.workers)
    kvikio, cupy, kvikio_missing = load_kvikio()
    run = Run(args, backend, readers, sources, startup_sources, files, cli_workers,
              environment, kvikio, cupy, kvikio_missing)

    total_bytes = sum(p.stat().st_size for paths in files.values() for p in paths)
    memory = memory_bytes()
    cache = ("cold (--drop-caches)" if args.drop_caches else "warm") + (
        f", files {total_bytes / 1e9:.2f} GB of {memory / 1e9:.0f} GB memory" if memory else "")
    kvikio_note = kvikio_missing or f"{kvikio_threads(kvikio) or '?'} threads"
    header = (f"commit {git_commit() or 'unknown'}; {machine_text()}, {available_cores()} "
              f"cores; backend {backend}; readers {','.join(map(str, readers))} (report: "
              f"default {reader_count()}); workers "
              f"{'default' if args.workers is None else args.workers}"
              f"{'' if cli_workers else f' (via {WORKERS_ENVIRONMENT})'}; shards {args.shards}; "
              f"page cache {cache}; kvikio {kvikio_note}; metrics-gpu "
              f"{metrics_gpu.__version__}"
              + (f"; fastest of {args.repeat}" if args.repeat > 1 else ""))
    print(header)

    results = [measure_case(run, name, columns) for name, columns in CASES.items()]
    print()
    print_reads(results, readers)
    print()
    print_reports(results)
    overlap = None
    if backend == "cuda":
        overlap = time_copy_overlap({column: str(sources[stem])
                                     for column, stem in CASES[SCORES_CASE].items()},
                                    args.classes)
    if overlap is not None:
        print("cuda chunk loop (labels + scores): " + ", ".join(
            f"{k} {v:.2f} s" for k, v in overlap.items()))
    targets = check_targets(results, backend, args.classes)
    print()
    print("targets (issue 32): " + "; ".join(
        f"{t['target']}: {'met' if t['met'] else 'not met'} ({t['shown']})" for t in targets))
    if args.json:
        write_json(args.json, plain({
            "bench": "files", "header": header,
            "settings": {"rows": args.rows, "classes": args.classes, "shards": args.shards,
                         "readers": readers, "report_readers": reader_count(),
                         "workers": args.workers,
                         "workers_via": "--workers" if cli_workers else WORKERS_ENVIRONMENT,
                         "backend": backend, "repeat": args.repeat,
                         "drop_caches": args.drop_caches, "startup_rows": STARTUP_ROWS},
            "environment": {"commit": git_commit(), "machine": machine_text(),
                            "cores": available_cores(), "memory_bytes": memory,
                            "metrics_gpu": metrics_gpu.__version__, "numpy": np.__version__,
                            "python": platform.python_version(), "kvikio": kvikio_note},
            "results": results, "overlap": overlap, "targets": targets}))


if __name__ == "__main__":
    main()
