"""Bench: `metrics-gpu report` on large prediction files, against reading them.

    python bench/files.py [--rows 200000000] [--classes 10] [--dir DIR] [--backend auto]
                          [--drop-caches] [--json PATH]

Writes (once; kept in ``--dir``) an int32 label pair ``t.npy`` / ``p.npy`` and
float32 ``(N, K)`` logits ``s.npy``, then times, in one run:

* reading the same files: ``cat FILES > /dev/null`` and a NumPy chunked read
  (``readinto`` into one 64 MB buffer), the bandwidth a report cannot beat;
* ``metrics-gpu report`` on the labels, and on labels + scores (``--auc
  binned``: bounded memory), each in a fresh process whose peak resident
  memory is measured;
* on the cuda backend also the chunk loop with copies and no update (copy
  alone) against the same loop with the updates (copy + compute): the
  overlap of reading, copying and computing.

Prints rows/s, the fraction of the read bandwidth of the same files and the
peak memory. Targets (issue 15): >= 80% of the read bandwidth, peak memory
< 1 GB whatever the file size. With ``--drop-caches`` (root) every timed
read starts from a cold page cache; otherwise the files are read warm
(after the first pass they fit in this machine's cache or they do not: the
output says which by the bandwidth).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from _common import REPO, git_commit, write_json

TARGET_FRACTION = 0.80
TARGET_PEAK_BYTES = 1 << 30
BLOCK_ROWS = 1 << 22


def write_files(directory: Path, rows: int, classes: int) -> dict[str, Path]:
    """The label pair and the logits, written block by block (bounded memory)."""
    paths = {name: directory / f"{name}.npy" for name in ("t", "p", "s")}
    shapes = {"t": (rows,), "p": (rows,), "s": (rows, classes)}
    dtypes = {"t": np.int32, "p": np.int32, "s": np.float32}
    complete = directory / f"complete-{rows}-{classes}"
    if complete.exists():
        return paths
    rng = np.random.default_rng(0)
    arrays = {name: np.lib.format.open_memmap(paths[name], "w+", dtypes[name], shapes[name])
              for name in paths}
    for start in range(0, rows, BLOCK_ROWS):
        n = min(BLOCK_ROWS, rows - start)
        y = rng.integers(0, classes, n, dtype=np.int32)
        logits = rng.standard_normal((n, classes), np.float32)
        logits[np.arange(n), y] += 1.5
        arrays["t"][start:start + n] = y
        arrays["p"][start:start + n] = logits.argmax(axis=1)
        arrays["s"][start:start + n] = logits
    for array in arrays.values():
        array.flush()
    del arrays
    complete.touch()
    return paths


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
    drop_caches(cold)
    buffer = np.empty(64 << 20, np.uint8)
    view = memoryview(buffer)
    start = time.perf_counter()
    for path in files:
        with open(path, "rb", buffering=0) as stream:
            while stream.readinto(view):
                pass
    return time.perf_counter() - start


# Peak resident memory of this process: VmHWM (ru_maxrss would carry the
# parent's high-water mark across fork and exec).
PEAK_RSS = """
def peak_rss():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
"""

REPORT = PEAK_RSS + """
import json, sys, time
from metrics_gpu.cli import main
start = time.perf_counter()
status = main(sys.argv[1:])
elapsed = time.perf_counter() - start
print(json.dumps({"status": status, "seconds": elapsed,
                  "peak": peak_rss()}),
      file=sys.stderr)
"""


def time_report(argv: list[str], cold: bool) -> dict:
    drop_caches(cold)
    done = subprocess.run([sys.executable, "-c", REPORT, "report", "--quiet", "--format",
                           "json", *argv], capture_output=True, text=True, cwd=REPO)
    measured = json.loads(done.stderr.strip().splitlines()[-1])
    if measured["status"] != 0:
        raise SystemExit(f"report failed: {done.stderr}")
    measured["report"] = json.loads(done.stdout)
    return measured


def time_copy_overlap(paths: dict[str, Path], classes: int) -> dict | None:
    """cuda only: the chunk loop with copies alone, then with the updates."""
    from metrics_gpu._backend import backend_for_host_data, use_backend
    from metrics_gpu._streaming import ClassificationMetrics
    from metrics_gpu.files import _stream, open_columns

    if backend_for_host_data("auto") != "cuda":
        return None
    import cupy

    sources = {"y_true": str(paths["t"]), "scores": str(paths["s"])}
    out = {}
    for label, with_state in (("copy alone", False), ("copy + compute", True)):
        readers = open_columns(sources)
        state = ClassificationMetrics(classes, validate=False, thresholds=1000) \
            if with_state else None
        chunk = max(1, min(1 << 20, (64 << 20) // (4 * (classes + 1))))
        with use_backend("cuda"):
            cupy.cuda.get_current_stream().synchronize()
            start = time.perf_counter()
            _stream(readers, "cuda", chunk, None, state, None, None, None, True, classes, None)
            cupy.cuda.get_current_stream().synchronize()
            out[label] = time.perf_counter() - start
        for reader in readers.values():
            reader.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=float, default=2e8)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/metrics-gpu-bench-files"))
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--drop-caches", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows, classes = int(args.rows), args.classes
    args.dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    paths = write_files(args.dir, rows, classes)
    print(f"files ready in {time.perf_counter() - start:.0f} s: " + ", ".join(
        f"{p.name} {p.stat().st_size / 1e9:.2f} GB" for p in paths.values()))

    import metrics_gpu
    from metrics_gpu._backend import backend_for_host_data

    backend = backend_for_host_data(args.backend)
    cases = {
        "labels": ([paths["t"], paths["p"]],
                   ["--y-true", str(paths["t"]), "--y-pred", str(paths["p"]), "--num-classes",
                    str(classes)]),
        "labels + scores (binned AUC)": (
            [paths["t"], paths["s"]],
            ["--y-true", str(paths["t"]), "--scores", str(paths["s"]), "--auc", "binned"]),
    }
    results = []
    header = (f"commit {git_commit(dirty=False) or 'unknown'}; {platform.machine()}, {os.cpu_count()} cores, backend "
              f"{backend}, metrics-gpu {metrics_gpu.__version__}, "
              f"{'cold' if args.drop_caches else 'warm'} page cache")
    print(header)
    print(f"{'case':<30}{'rows':>12}{'GB':>7}{'cat GB/s':>10}{'numpy GB/s':>11}"
          f"{'report s':>10}{'M rows/s':>10}{'of cat':>8}{'of numpy':>9}{'peak MB':>9}")
    for name, (files, argv) in cases.items():
        size = sum(p.stat().st_size for p in files)
        cat = time_cat(files, args.drop_caches)
        numpy_read = time_numpy_read(files, args.drop_caches)
        report = time_report([*argv, "--backend", backend], args.drop_caches)
        assert report["report"]["total"] == rows
        row = {"case": name, "rows": rows, "bytes": size, "cat_s": cat, "numpy_read_s": numpy_read,
               "report_s": report["seconds"], "rows_per_s": rows / report["seconds"],
               "fraction_of_cat": cat / report["seconds"],
               "fraction_of_numpy_read": numpy_read / report["seconds"],
               "peak_bytes": report["peak"]}
        results.append(row)
        print(f"{name:<30}{rows:>12,}{size / 1e9:>7.2f}{size / cat / 1e9:>10.2f}"
              f"{size / numpy_read / 1e9:>11.2f}{report['seconds']:>10.2f}"
              f"{rows / report['seconds'] / 1e6:>10.1f}{row['fraction_of_cat']:>8.0%}"
              f"{row['fraction_of_numpy_read']:>9.0%}{report['peak'] / 2**20:>9.0f}")
    overlap = time_copy_overlap(paths, classes) if backend == "cuda" else None
    if overlap is not None:
        print("cuda chunk loop (labels + scores): " + ", ".join(
            f"{k} {v:.2f} s" for k, v in overlap.items()))
    worst = min(r["fraction_of_numpy_read"] for r in results)
    peak = max(r["peak_bytes"] for r in results)
    print(f"target: >= {TARGET_FRACTION:.0%} of the read bandwidth: "
          f"{'met' if worst >= TARGET_FRACTION else 'not met'} (worst {worst:.0%}); "
          f"peak memory < 1 GB: {'met' if peak < TARGET_PEAK_BYTES else 'not met'} "
          f"({peak / 2**20:.0f} MB)")
    if args.json:
        write_json(args.json, {"header": header, "results": results, "overlap": overlap})


if __name__ == "__main__":
    main()
