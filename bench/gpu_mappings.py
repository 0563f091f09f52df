"""GPU bench: the fused score pass under each row mapping, to set its thresholds.

    python bench/gpu_mappings.py [--bytes 2e9] [--columns 2 10 32 64 128 256 1000 8192 32768]
        [--repeat 5] [--json PATH]

For each K (columns) of float32 logits, N = --bytes / (4 K) rows (the same
bytes for every K, several times the L2), int64 targets, one call of
``logits_report(y, logits, from_logits=True, top_k=(1, 5), n_bins=15,
validate=True)``'s score pass (the backend's ``fused_logits_pass``; with
``validate=False`` the call is one streaming update, timed by gpu_scores.py)
on CuPy arrays with the mapping forced (the thresholds of
``metrics_gpu.backends.launchers.scores`` patched, as tests/test_scores.py
does): ``staged`` (a thread per row through shared memory, K <= 32 only
where its tile fits), ``lanes`` (score_group lanes per row, a score per
load), ``warp`` and ``block`` (fused_logits_wide: 16-byte loads, a warp or
the block per row), and ``default`` (what the thresholds choose today:
staged up to SCORE_STAGED_COLUMNS, warp from SCORE_WIDE_COLUMNS, block from
SCORE_BLOCK_ROW_COLUMNS). Times: CUDA events, best of --repeat after a
warm-up; "of copy" = score bytes / time over a device-to-device copy's
(read + write) rate of the same bytes. Every mapping's sums (cross-entropy,
hits, bins...) must equal the default's (rtol 1e-6: rows are float32
arithmetic in a mapping's order); exit status 1 if not.
GPU only.
"""

from __future__ import annotations

import argparse
import sys
import time

from _common import count, git_commit, write_json

import numpy as np

from metrics_gpu._backend import get_backend_implementation
from metrics_gpu.backends.launchers import scores as score_launchers

HUGE = 1 << 30
# A row's float32 terms are evaluated in an order that depends on the mapping.
RTOL = 1e-6
KERNELS = {"staged": "fused_logits_staged", "lanes": "fused_logits_pass",
           "warp": "fused_logits_wide", "block": "fused_logits_wide"}
# (SCORE_WIDE_COLUMNS, SCORE_BLOCK_ROW_COLUMNS, SCORE_STAGED_COLUMNS) forcing each mapping.
MAPPINGS = {
    "staged": (HUGE, HUGE, HUGE),
    "lanes": (HUGE, HUGE, 0),
    "warp": (1, HUGE, 0),
    "block": (1, 1, 0),
}


def best_ms(cp, function, repeat: int) -> tuple[float, object]:
    result = function()
    cp.cuda.Stream.null.synchronize()
    times = []
    for _ in range(repeat):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        result = function()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return min(times), result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bytes", type=count, default=2 * 10**9)
    parser.add_argument("--columns", type=int, nargs="+",
                        default=[2, 10, 32, 64, 128, 256, 1000, 8192, 32768])
    parser.add_argument("--repeat", type=count, default=5)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    try:
        import cupy as cp
        cp.cuda.runtime.getDeviceCount()
    except Exception as error:
        print(f"gpu_mappings: needs CuPy and a CUDA GPU ({error})", file=sys.stderr)
        return 2
    started = time.perf_counter()
    defaults = (score_launchers.SCORE_WIDE_COLUMNS, score_launchers.SCORE_BLOCK_ROW_COLUMNS,
                score_launchers.SCORE_STAGED_COLUMNS)
    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"commit {git_commit()}; {name}; float32 logits, {args.bytes / 1e9:g} GB per K; "
          f"thresholds today: wide from {defaults[0]}, block from {defaults[1]}, "
          f"staged up to {defaults[2]} columns")
    print(f"{'K':>6} {'N':>10} {'copy ms':>8} | " + " | ".join(
        f"{m:>14}" for m in ("default", *MAPPINGS)) + " |  chosen   best")
    rows, failures = [], 0
    for k in args.columns:
        n = max(1, int(args.bytes) // (4 * k))
        rng = cp.random.RandomState(k)
        y = rng.randint(0, k, n).astype(cp.int64)
        logits = rng.standard_normal((n, k), dtype=cp.float32)
        logits[cp.arange(n), y] += 2.0
        copy_target = cp.empty_like(logits)
        copy_ms, _ = best_ms(cp, lambda: copy_target.__setitem__(Ellipsis, logits), args.repeat)
        copy_target = None
        row = {"k": k, "n": n, "copy_ms": copy_ms, "ms": {}, "launched": {}}
        reference = None
        launched = []
        backend = get_backend_implementation("cuda")
        device = backend.device
        original_launch = device.launch

        def spy(source, expression, *rest, _launched=launched, _original=original_launch):
            _launched.append(expression.split("<", 1)[0])
            return _original(source, expression, *rest)

        device.launch = spy
        try:
            for mapping, thresholds in [("default", defaults), *MAPPINGS.items()]:
                (score_launchers.SCORE_WIDE_COLUMNS, score_launchers.SCORE_BLOCK_ROW_COLUMNS,
                 score_launchers.SCORE_STAGED_COLUMNS) = thresholds
                launched.clear()
                try:
                    ms, sums = best_ms(cp, lambda: backend.fused_logits_pass(
                        y, logits, from_logits=True, top_k=(1, 5), n_bins=15), args.repeat)
                except Exception as error:  # e.g. a tile that does not fit
                    row["ms"][mapping] = None
                    row["launched"][mapping] = f"{type(error).__name__}: {error}"[:200]
                    continue
                values = cp.asnumpy(sums.buffer)
                reference = values if reference is None else reference
                if not np.allclose(values, reference, rtol=RTOL, atol=0.0, equal_nan=True):
                    failures += 1
                    row.setdefault("disagree", []).append(mapping)
                passes = [name for name in launched if name.startswith("fused_logits")]
                row["launched"][mapping] = passes
                # A mapping the shape does not allow (a staged tile past its
                # budget) falls back to another: not timed as itself.
                wanted = KERNELS.get(mapping)
                row["ms"][mapping] = ms if wanted is None or set(passes) == {wanted} else None
        finally:
            device.launch = original_launch
            (score_launchers.SCORE_WIDE_COLUMNS, score_launchers.SCORE_BLOCK_ROW_COLUMNS,
             score_launchers.SCORE_STAGED_COLUMNS) = defaults
        logits = y = None
        cp.get_default_memory_pool().free_all_blocks()
        timed = {m: v for m, v in row["ms"].items() if v is not None and m != "default"}
        best = min(timed, key=timed.get) if timed else "-"
        chosen = {"fused_logits_staged": "staged", "fused_logits_pass": "lanes"}.get(
            (row["launched"].get("default") or ["?"])[-1], "wide")
        cells = []
        for mapping in ("default", *MAPPINGS):
            ms = row["ms"].get(mapping)
            cells.append(f"{'-':>14}" if ms is None else
                         f"{ms:7.3f} {copy_ms / 2 / ms:5.0%}")
        print(f"{k:>6} {n:>10} {copy_ms:8.3f} | " + " | ".join(cells)
              + f" | {chosen:>7} {best:>6}" + ("  DISAGREE" if row.get("disagree") else ""))
        rows.append(row)
    print("cells: best ms, and score bytes / time as a fraction of the copy's read+write rate; "
          f"total {time.perf_counter() - started:.0f} s")
    if args.json:
        write_json(args.json, {"commit": git_commit(), "gpu": name, "bytes": args.bytes,
                               "thresholds": defaults, "rows": rows})
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
