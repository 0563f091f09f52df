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
(read + write) rate of the same bytes. Every mapping's sums must equal the
default's (``disagreement``): the scalar sums (cross-entropy, Brier, hits...)
to rtol 1e-6, as rows are float32 arithmetic in a mapping's order; the
calibration bins to rtol 1e-6 as well, but for the rows whose float64
confidence lies within float32 rounding of a bin edge (``rows_at_bin_edges``),
which either side may hold. Exit status 1 if not.
GPU only.
"""

from __future__ import annotations

import argparse
import sys
import time

from _common import count, git_commit, write_json

import numpy as np

from metrics_gpu.backends.selection import get_backend_implementation
from metrics_gpu._formulas.state import SCORE_SLOTS
from metrics_gpu.backends.launchers import scores as score_launchers

HUGE = 1 << 30
# A row's float32 terms are evaluated in an order that depends on the mapping.
RTOL = 1e-6
# A row's confidence (its max probability, 1 / sum_j exp(z_j - m)) is a
# double quotient of float32 exponentials summed in the mapping's order
# (kernels/scores.cu absorb_columns, merge_softmax, add_row_terms): within
# 3 x 2^-24 of the float64 one on this bench's rows in every mapping (their
# arithmetic simulated in NumPy; CUDA's expf is within 2 ulp), 16 x 2^-24
# here for a margin. A row that close to a bin edge b / n_bins may fall on
# either side, differently in each mapping: at K = 10, N = 5e7 about 5 rows
# are binned otherwise than in float64, and one row moves a bin of 10^6
# rows by 1e-6. Farther from an edge every mapping bins a row as float64
# does.
EDGE_RTOL = 2.0**-20
KERNELS = {"staged": "fused_logits_staged", "lanes": "fused_logits_pass",
           "warp": "fused_logits_wide", "block": "fused_logits_wide"}
# The pass timed: top_k and calibration bins of the logits_report call above.
TOP_K = (1, 5)
N_BINS = 15
# (SCORE_WIDE_COLUMNS, SCORE_BLOCK_ROW_COLUMNS, SCORE_STAGED_COLUMNS) forcing each mapping.
MAPPINGS = {
    "staged": (HUGE, HUGE, HUGE),
    "lanes": (HUGE, HUGE, 0),
    "warp": (1, HUGE, 0),
    "block": (1, 1, 0),
}


def rows_at_bin_edges(xp, logits, n_bins: int, rtol: float = EDGE_RTOL) -> np.ndarray:
    """Rows that float32 arithmetic may put on either side of a calibration
    bin edge: for each edge b / n_bins (b = 0 .. n_bins), the rows of
    ``logits`` (an ``xp`` array, every target valid) whose float64
    confidence lies within ``rtol`` (relative) of it; none at 0 and 1, which
    no bin lies beyond. On the host, int64."""
    n, k = logits.shape
    at_edge = xp.zeros(n_bins + 1, dtype=xp.int64)
    step = max(1, (1 << 24) // k)  # 128 MiB of float64 at a time
    for start in range(0, n, step):
        z = logits[start:start + step].astype(xp.float64)
        z -= z.max(axis=1, keepdims=True)
        confidence = 1.0 / xp.exp(z).sum(axis=1)
        edge = xp.rint(confidence * n_bins)
        near = ((edge > 0) & (edge < n_bins)
                & (xp.abs(confidence - edge / n_bins) <= rtol * confidence))
        at_edge += xp.bincount(edge[near].astype(xp.int64), minlength=n_bins + 1)
    return np.asarray(at_edge.get() if hasattr(at_edge, "get") else at_edge)


def disagreement(values, reference, edge_rows, num_top_k: int, n_bins: int) -> list[str]:
    """The parts of a score pass's sums (host buffers of unweighted rows,
    metrics_gpu._formulas.state layout) that differ from ``reference``'s: the scalar
    slots and top-k hits beyond RTOL; a calibration bin's weight, confidence
    or correct sum beyond RTOL and the rows at its two edges
    (``edge_rows``: rows_at_bin_edges), each of which it may have gained or
    lost, with at most 1 in every cell; the totals over the bins (which
    such moves keep) beyond RTOL."""
    values, reference = np.asarray(values), np.asarray(reference)
    movable = edge_rows[:-1] + edge_rows[1:]  # per bin
    scalars = len(SCORE_SLOTS) + num_top_k
    names = [*SCORE_SLOTS, *(f"top-k hits {i}" for i in range(num_top_k))]
    parts = [name for name, ours, theirs in zip(names, values[:scalars], reference[:scalars])
             if not np.isclose(ours, theirs, rtol=RTOL, atol=0.0, equal_nan=True)]
    for index, cell in enumerate(("weight", "confidence", "correct")):
        start = scalars + index * n_bins
        ours, theirs = values[start:start + n_bins], reference[start:start + n_bins]
        allowed = RTOL * np.abs(theirs) + movable
        parts += [f"bin {b} {cell}" for b in np.flatnonzero(~(np.abs(ours - theirs) <= allowed))]
        if not np.isclose(ours.sum(), theirs.sum(), rtol=RTOL, atol=0.0):
            parts.append(f"bins' {cell}")
    return parts


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
        edge_rows = rows_at_bin_edges(cp, logits, N_BINS)
        row = {"k": k, "n": n, "copy_ms": copy_ms, "ms": {}, "launched": {},
               "rows_at_bin_edges": int(edge_rows.sum())}
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
                        y, logits, from_logits=True, top_k=TOP_K, n_bins=N_BINS), args.repeat)
                except Exception as error:  # e.g. a tile that does not fit
                    row["ms"][mapping] = None
                    row["launched"][mapping] = f"{type(error).__name__}: {error}"[:200]
                    continue
                values = cp.asnumpy(sums.buffer)
                reference = values if reference is None else reference
                parts = disagreement(values, reference, edge_rows, len(TOP_K), N_BINS)
                if parts:
                    failures += 1
                    row.setdefault("disagree", []).append(mapping)
                    row.setdefault("disagreeing", {})[mapping] = parts[:20]
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
