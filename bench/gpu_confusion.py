"""GPU bench: our confusion kernels vs torchmetrics, cupy.bincount and a memory copy.

    python bench/gpu_confusion.py [--samples 1e6 1e8 1e9] [--classes 2 10 100 1000]
        [--stats-classes 1000 32000] [--dtypes int32 int64] [--repeat 5]
        [--max-score-bytes 8e9] [--skip labels stats scores step]
        [--json PATH] [--write-results] [--baselines-only]

GPU only (CuPy and a CUDA GPU; without them it prints why and exits with 2).
In one run, for every N, K and label dtype, on the same GPU arrays:

* ours: the ``cuda`` backend's ``accumulate_confusion`` (dense K x K), and
  ``class_statistics`` ("statistics" mode, O(K) state: what the report and
  every metric but the matrix itself read) for K = 1,000 and 32,000;
* torchmetrics' ``binary_confusion_matrix`` (K = 2, integer labels) or
  ``multiclass_confusion_matrix`` on zero-copy torch views (``validate_args=False``);
  skipped for the statistics mode (a 32,000^2 int64 matrix is 8 GB);
* the CuPy idiom ``cupy.bincount(y_true.astype(int64) * K + y_pred, minlength=K*K)``
  (with its own casts: that is the point), or three bincounts in statistics mode;
* the bandwidth limit: a device-to-device copy of the same input bytes.
  Ours reads N * (itemsize_true + itemsize_pred) bytes; its GB/s is that over
  its time. The copy's GB/s counts read + write, 2 x bytes / time, so
  "of copy" = our read rate / the copy's DRAM traffic rate (1.0 = a read-only
  pass as fast as the copy moves bytes);
* fused argmax: (N, K) float32 and bfloat16 scores as y_pred (ours fuses the
  row argmax) vs torchmetrics on ``scores.argmax(dim=1)`` and
  ``cupy.argmax`` + bincount, while N * K * itemsize <= ``--max-score-bytes``;
* the in-loop step: ``label_report`` on a 4096 x 1000 float32 logits batch
  with int64 targets (CuPy arrays), GPU time by CUDA events, and whether the
  call waits for the GPU (a long spin kernel is queued first: if the call
  returns before it ends, the call did not wait).

Times are CUDA-event times on the current stream, best of ``--repeat`` after a
warm-up call. Every case checks that our counts equal torchmetrics',
cupy.bincount's and a chunked bincount reference exactly. Inputs are made on
the GPU (imbalanced labels, ~80% right predictions, wrong ones near the true
class, as ``metrics_gpu.cli.synthetic_predictions``). Targets (project issue),
printed PASS/MISS from the measured numbers: the dense matrix >= 80% of copy
bandwidth for K <= 100 at N = 1e9 and >= 50% at K = 1000; the statistics
(report) >= 75% at K = 1000 and >= 60% at K = 32000; >= 5x torchmetrics at
N = 1e8 for K <= 100; the in-loop step <= 50 us of GPU time.

``--write-results`` writes ``bench/results/<date>-<gpu>.json`` and ``.md``
(the output exactly as printed). Exit status: 0 when every count agrees and
every one of our calls ran, 1 otherwise, 2 when no GPU (or, without
``--baselines-only``, no ``cuda`` backend) is available.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from _common import (
    GpuContext,
    Printer,
    add_output_options,
    agree_text,
    attempt,
    bumped_scores,
    count,
    fmt,
    fmt_n,
    gpu_environment,
    guarded,
    load_gpu,
    load_torch,
    print_gpu_environment,
    print_notes,
    print_targets,
    slug,
    stderr_progress,
    target_verdicts,
    time_copy,
    to_numpy,
    write_outputs,
)

import metrics_gpu as mg
from metrics_gpu.backends.selection import get_backend_implementation

DEFAULT_SAMPLES = (10**6, 10**8, 10**9)
DEFAULT_CLASSES = (2, 10, 100, 1000)
DEFAULT_STATS_CLASSES = (1000, 32_000)
STEP_BATCH, STEP_CLASSES = 4096, 1000

TARGET_FRACTION_SMALL_K = 0.80   # dense matrix, K <= 100, N = 1e9
TARGET_FRACTION_K1000 = 0.50     # dense matrix, K = 1000, N = 1e9 (80% accuracy)
TARGET_FRACTION_STATS_K1000 = 0.75   # statistics (report), K = 1000, N = 1e9
TARGET_FRACTION_STATS_K32000 = 0.60  # statistics (report), K = 32000, N = 1e9
TARGET_SPEEDUP_TORCHMETRICS = 5.0  # K <= 100, N = 1e8
TARGET_STEP_US = 50.0

GENERATION_CHUNK = 1 << 24   # samples per chunk when making inputs
REFERENCE_CHUNK = 1 << 26    # samples per chunk of the untimed reference count
MEMORY_MARGIN = 2 << 30      # free bytes left over after the inputs of a size
SCORE_BUMP = 4.0             # added to the score of the predicted class
COPY_CONVENTION = ("copy GB/s = 2 x bytes / time (read + write); ours GB/s = bytes read / time; "
                   "'of copy' = ours GB/s / copy GB/s")

SPIN_SOURCE = r"""
extern "C" __global__ void spin_cycles(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
"""


progress = stderr_progress("gpu_confusion")


# -- set-up ------------------------------------------------------------------


class Context(GpuContext):
    """GpuContext and the backend under test (None with --baselines-only)."""

    def __init__(self, cp, backend, torch, tm, args, notes):
        super().__init__(cp, torch, tm, args, notes, progress)
        self.backend = backend


# -- inputs ------------------------------------------------------------------


def synthetic_labels(cp, n: int, k: int, dtype, accuracy: float, seed: int):
    """GPU version of ``metrics_gpu.cli.synthetic_predictions``: same recipe, made in chunks.

    Dirichlet(2) class frequencies; a wrong prediction is the true class plus
    a geometric(1/2) offset of random sign, modulo K; right with probability
    ``accuracy``. The same seed gives the same values whatever ``dtype``.
    """
    host = np.random.default_rng(seed)
    cdf = cp.asarray(np.cumsum(host.dirichlet(np.full(k, 2.0))))
    random = cp.random.RandomState(seed)
    y_true = cp.empty(n, dtype=dtype)
    y_pred = cp.empty(n, dtype=dtype)
    for start in range(0, n, GENERATION_CHUNK):
        stop = min(start + GENERATION_CHUNK, n)
        size = stop - start
        t = cp.searchsorted(cdf, random.random_sample(size), side="right")
        cp.minimum(t, k - 1, out=t)
        offset = random.geometric(0.5, size=size)
        offset *= random.randint(0, 2, size=size) * 2 - 1
        p = cp.remainder(t + offset, k)
        right = random.random_sample(size) < accuracy
        y_true[start:stop] = t
        y_pred[start:stop] = cp.where(right, t, p)
    return y_true, y_pred


# -- results on the host -------------------------------------------------------


def dense_host(k: int):
    def convert(result):
        return to_numpy(result).reshape(k, k)
    return convert


def ours_dense_host(result):
    matrix, _observed, n_invalid = result
    return {"matrix": to_numpy(matrix), "n_invalid": int(to_numpy(n_invalid))}


def ours_stats_host(result):
    invalid = getattr(result, "invalid", 0)
    return {"tp": to_numpy(result.true_positives), "support": to_numpy(result.support),
            "predicted": to_numpy(result.predicted),
            "n_invalid": 0 if invalid is None else int(to_numpy(invalid))}


def cupy_statistics(cp, y_true, y_pred, k: int):
    """(true positives, support, predicted) with three bincounts, the CuPy idiom."""
    hits = cp.where(y_true == y_pred, y_true, k)
    return (cp.bincount(hits, minlength=k + 1)[:k], cp.bincount(y_true, minlength=k),
            cp.bincount(y_pred, minlength=k))


def stats_host(result):
    return {"tp": to_numpy(result[0]), "support": to_numpy(result[1]),
            "predicted": to_numpy(result[2])}


def reference(ctx: Context, y_true, pred_chunk, k: int, stats: bool):
    """Untimed chunked bincount of the same counts: the check when a baseline is missing."""
    cp = ctx.cp
    n = y_true.shape[0]
    if stats:
        total = [cp.zeros(k, dtype=cp.int64) for _ in range(3)]
    else:
        total = cp.zeros(k * k, dtype=cp.int64)
    for start in range(0, n, REFERENCE_CHUNK):
        stop = min(start + REFERENCE_CHUNK, n)
        t = y_true[start:stop].astype(cp.int64)
        p = pred_chunk(start, stop).astype(cp.int64)
        if stats:
            for acc, part in zip(total, cupy_statistics(cp, t, p, k), strict=True):
                acc += part
        else:
            total += cp.bincount(t * k + p, minlength=k * k)
    host = stats_host(total) if stats else to_numpy(total).reshape(k, k)
    del total
    ctx.free_memory()
    return host


def same(a, b, stats: bool) -> bool:
    if stats:
        return all(np.array_equal(a[name], b[name]) for name in ("tp", "support", "predicted"))
    return bool(np.array_equal(a, b))


def check_agreement(case: dict, ours, baselines: dict, ref, stats: bool) -> None:
    """Fill ``agree`` (ours equals every count there is) and ``agree_detail``."""
    if ours is None:
        case["agree"] = None
        case["agree_detail"] = {name: None for name in ["reference", *baselines]}
        return
    mine = ours if stats else ours["matrix"]
    detail = {"reference": same(mine, ref, stats)}
    for name, value in baselines.items():
        detail[name] = None if value is None else same(mine, value, stats)
    detail["n_invalid_is_zero"] = ours["n_invalid"] == 0
    case["n_invalid"] = ours["n_invalid"]
    case["agree_detail"] = detail
    case["agree"] = all(v for v in detail.values() if v is not None)


def baselines_agree(ctx: Context, case: dict, baselines: dict, ref, stats: bool) -> None:
    """Check the baselines against the reference too; with --baselines-only that is ``agree``."""
    detail = {name: None if value is None else same(value, ref, stats)
              for name, value in baselines.items()}
    case["baselines_agree_with_reference"] = detail
    if ctx.backend is None:
        checked = [v for v in detail.values() if v is not None]
        case["agree"] = all(checked) if checked else None


# -- cases -------------------------------------------------------------------


def derive(case: dict) -> None:
    ours = case["ours"]["ms"]
    tm = case["torchmetrics"]["ms"]
    cupy_ms = case["cupy"]["ms"]
    copy = case["copy"]
    case["ours_gb_per_s"] = None if ours is None else case["bytes_read"] / (ours * 1e-3) / 1e9
    case["copy_gb_per_s"] = copy["gb_per_s"]
    case["fraction_of_copy_bandwidth"] = (
        None if ours is None or copy["gb_per_s"] is None
        else case["ours_gb_per_s"] / copy["gb_per_s"])
    case["copy_time_over_ours"] = (
        None if ours is None or copy["ms"] is None else copy["ms"] / ours)
    case["speedup_vs_torchmetrics"] = None if ours is None or tm is None else tm / ours
    case["speedup_vs_cupy"] = None if ours is None or cupy_ms is None else cupy_ms / ours


def label_case(ctx: Context, n: int, k: int, dtype: str, y_true, y_pred, copy: dict,
               stats: bool) -> dict:
    cp, torch, tm = ctx.cp, ctx.torch, ctx.tm
    mode = "stats" if stats else "labels"
    name = f"N={fmt_n(n)} K={k} {dtype} {mode}"
    progress(name)
    case = {"case": name, "kind": mode, "n": n, "k": k, "label_dtype": dtype,
            "score_dtype": None, "bytes_read": int(y_true.nbytes + y_pred.nbytes),
            "copy": copy}

    ours = None
    if ctx.backend is None:
        case["ours"] = {"ms": None, "error": "--baselines-only"}
    elif stats:
        case["ours"], ours = attempt(
            ctx, f"{name}: ours",
            lambda: ctx.backend.class_statistics(y_true, y_pred, num_classes=k),
            ours_stats_host)
    else:
        case["ours"], ours = attempt(
            ctx, f"{name}: ours",
            lambda: ctx.backend.accumulate_confusion(y_true, y_pred, num_classes=k),
            ours_dense_host)
    if ctx.backend is not None and ours is None:
        ctx.failures += 1

    theirs = None
    if stats:
        case["torchmetrics"] = {"ms": None, "error": "skipped: a K x K int64 matrix"}
        ctx.note(f"K={k} stats: torchmetrics not run (its {k} x {k} int64 matrix would be "
                 f"{k * k * 8 / 1e9:.1f} GB)", key=f"tm-stats-{k}")
    elif tm is None:
        case["torchmetrics"] = {"ms": None, "error": "torchmetrics unavailable"}
    else:
        target, preds = torch.from_dlpack(y_true), torch.from_dlpack(y_pred)
        if k == 2:  # applies to integer labels: target * 2 + preds, no thresholding
            case["torchmetrics_function"] = "binary_confusion_matrix"
            function = lambda: tm["binary"](preds, target, validate_args=False)  # noqa: E731
        else:
            case["torchmetrics_function"] = "multiclass_confusion_matrix"
            function = lambda: tm["multiclass"](  # noqa: E731
                preds, target, num_classes=k, validate_args=False)
        case["torchmetrics"], theirs = attempt(ctx, f"{name}: torchmetrics", function,
                                               dense_host(k))
        del target, preds

    if stats:
        case["cupy_idiom"] = "three cupy.bincount (true positives, support, predicted)"
        case["cupy"], bincount = attempt(
            ctx, f"{name}: cupy", lambda: cupy_statistics(cp, y_true, y_pred, k), stats_host)
    else:
        case["cupy_idiom"] = "cupy.bincount(y_true.astype(int64) * K + y_pred, minlength=K*K)"
        case["cupy"], bincount = attempt(
            ctx, f"{name}: cupy",
            lambda: cp.bincount(y_true.astype(cp.int64) * k + y_pred, minlength=k * k),
            dense_host(k))

    ref = reference(ctx, y_true, lambda a, b: y_pred[a:b], k, stats)
    baselines = {"cupy": bincount} if stats else {"torchmetrics": theirs, "cupy": bincount}
    check_agreement(case, ours, baselines, ref, stats)
    baselines_agree(ctx, case, baselines, ref, stats)
    if case["agree"] is False:
        ctx.failures += 1
    derive(case)
    progress_case(case)
    return case


def score_case(ctx: Context, n: int, k: int, dtype: str, score_dtype: str, y_true,
               y_pred) -> dict | bool:
    """One fused-argmax case; None when over --max-score-bytes, False when skipped (noted)."""
    torch = ctx.torch
    short = {"float32": "f32", "bfloat16": "bf16"}[score_dtype]
    name = f"N={fmt_n(n)} K={k} {dtype} + {short} scores"
    itemsize = 4 if score_dtype == "float32" else 2
    score_bytes = n * k * itemsize
    if score_bytes > ctx.args.max_score_bytes:
        return None  # outside the asked sizes: listed once in the notes by the caller
    if score_dtype == "bfloat16" and torch is None:
        ctx.note("bfloat16 fused cases: not run (bfloat16 scores are made with torch)",
                 key="bf16-no-torch")
        return False
    if ctx.free_bytes() < 2 * score_bytes + MEMORY_MARGIN:
        ctx.note(f"{name}: not run ({score_bytes / 1e9:.1f} GB of scores, twice that "
                 "with the argmax baselines, does not fit in free GPU memory)")
        return False
    progress(name)
    scores = bumped_scores(ctx, y_pred, k, score_dtype, ctx.args.seed + k, SCORE_BUMP,
                           GENERATION_CHUNK)
    case = {"case": name, "kind": "scores", "n": n, "k": k, "label_dtype": dtype,
            "score_dtype": score_dtype, "bytes_read": int(score_bytes + y_true.nbytes)}
    try:
        measure_scores(ctx, case, y_true, scores)
    finally:
        del scores  # the inputs of the case go before the next one is made
        ctx.free_memory()
    progress_case(case)
    return case


def measure_scores(ctx: Context, case: dict, y_true, scores) -> None:
    """The timings and checks of one fused-argmax case (fills ``case``)."""
    cp, torch, tm = ctx.cp, ctx.torch, ctx.tm
    name, k, score_dtype = case["case"], case["k"], case["score_dtype"]
    score_bytes = case["bytes_read"] - int(y_true.nbytes)

    if score_dtype == "float32":
        ours_inputs = (y_true, scores)
        scores_torch = None if torch is None else torch.from_dlpack(scores)
        scores_cupy = scores
        raw = scores
    else:
        ours_inputs = (torch.from_dlpack(y_true), scores)  # torch bf16: both as torch tensors
        scores_torch = scores
        raw = cp.from_dlpack(scores.view(torch.int16))  # the same bits, for the copy
        try:
            scores_cupy = cp.from_dlpack(scores)
        except Exception as error:
            scores_cupy = None
            ctx.note("bfloat16 fused cases: cupy baseline null (CuPy cannot view torch's "
                     f"bfloat16 here: {type(error).__name__}: {error})".splitlines()[0][:300],
                     key="bf16-no-cupy")

    ours = None
    if ctx.backend is None:
        case["ours"] = {"ms": None, "error": "--baselines-only"}
    else:
        backend = ctx.backend
        # The library's own route: argmax_scores defers the argmax to the kernel.
        case["ours_call"] = ("accumulate_confusion(asarray(y_true), "
                             "argmax_scores(asarray(scores)), num_classes=K)")

        def function():
            return backend.accumulate_confusion(
                backend.asarray(ours_inputs[0]),
                backend.argmax_scores(backend.asarray(ours_inputs[1])), num_classes=k)

        case["ours"], ours = attempt(ctx, f"{name}: ours", function, ours_dense_host)
        if ours is None:
            ctx.failures += 1

    theirs = None
    if tm is None:
        case["torchmetrics"] = {"ms": None, "error": "torchmetrics unavailable"}
    else:
        target = torch.from_dlpack(y_true)
        # K = 2 too: binary_confusion_matrix would threshold scores, not take the argmax.
        case["torchmetrics_function"] = "multiclass_confusion_matrix(scores.argmax(dim=1))"
        case["torchmetrics"], theirs = attempt(
            ctx, f"{name}: torchmetrics",
            lambda: tm["multiclass"](scores_torch.argmax(dim=1), target, num_classes=k,
                                     validate_args=False),
            dense_host(k))
        del target

    case["cupy_idiom"] = "cupy.bincount(y_true.astype(int64) * K + cupy.argmax(scores, axis=1))"
    if scores_cupy is None:
        case["cupy"], bincount = {"ms": None, "error": "no bfloat16 in CuPy"}, None
    else:
        case["cupy"], bincount = attempt(
            ctx, f"{name}: cupy",
            lambda: cp.bincount(y_true.astype(cp.int64) * k + cp.argmax(scores_cupy, axis=1),
                                minlength=k * k),
            dense_host(k))

    case["copy"] = time_copy(ctx, f"{name}: copy",
                             [(raw.data, score_bytes), (y_true.data, int(y_true.nbytes))])

    if score_dtype == "float32":
        def pred_chunk(a, b):
            return cp.argmax(scores[a:b], axis=1)
    else:
        def pred_chunk(a, b):
            return cp.from_dlpack(scores[a:b].argmax(dim=1))
    ref = reference(ctx, y_true, pred_chunk, k, stats=False)
    baselines = {"torchmetrics": theirs, "cupy": bincount}
    check_agreement(case, ours, baselines, ref, stats=False)
    baselines_agree(ctx, case, baselines, ref, stats=False)
    if case["agree"] is False:
        ctx.failures += 1
    derive(case)


# -- the in-loop step -----------------------------------------------------------


def make_spinner(ctx: Context):
    """A one-thread kernel that keeps the stream busy for about ``ms`` milliseconds."""
    cp, stream = ctx.cp, ctx.stream
    kernel = cp.RawKernel(SPIN_SOURCE, "spin_cycles")

    def launch(cycles: int) -> None:
        kernel((1,), (1,), (np.int64(cycles),))

    def timed(cycles: int) -> float:
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        launch(cycles)
        end.record(stream)
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end)

    timed(1000)  # compile and load
    cycles = 10_000_000
    per_ms = cycles / max(timed(cycles), 1e-3)

    def spin(ms: float) -> None:
        launch(int(per_ms * ms))

    return spin


def probe_host_wait(ctx: Context, spin, call, usual_host_ms: float) -> dict:
    """Queue a long spin kernel, then ``call``; did the call return before the spin ended?

    It returns early only if it never waited for the GPU (no ``.get()``,
    ``float()``, ``cupy.cuda.Stream.synchronize`` or blocking copy on the stream).
    """
    cp, stream = ctx.cp, ctx.stream
    method = ("a spin kernel of spin_ms is queued on the current stream, then the call: "
              "host_syncs = 0 when the call returned before the spin ended (it waited for no "
              "GPU work); a count of syncs is not measurable here")
    if spin is None:
        return {"host_syncs": "unknown", "blocks_host": None, "method": "spin kernel unavailable"}
    spin_ms = min(2000.0, max(200.0, 20 * usual_host_ms))
    stream.synchronize()
    before_spin, after_spin = cp.cuda.Event(), cp.cuda.Event()
    before_spin.record(stream)
    spin(spin_ms)
    after_spin.record(stream)
    start = time.perf_counter()
    call()
    host_ms = (time.perf_counter() - start) * 1e3
    spin_done = after_spin.done
    stream.synchronize()
    actual_spin_ms = cp.cuda.get_elapsed_time(before_spin, after_spin)
    result = {"spin_ms": actual_spin_ms, "call_host_ms_behind_spin": host_ms,
              "usual_host_ms": usual_host_ms, "method": method}
    if not spin_done:
        result.update(host_syncs=0, blocks_host=False)
    elif 5 * usual_host_ms < actual_spin_ms and host_ms >= 0.5 * actual_spin_ms:
        result.update(host_syncs="unknown", blocks_host=True)  # waited at least once
    else:
        result.update(host_syncs="unknown", blocks_host=None)  # spin too short to tell
    return result


def step_case(ctx: Context) -> list[dict]:
    cp, stream = ctx.cp, ctx.stream
    progress(f"in-loop step: label_report on {STEP_BATCH} x {STEP_CLASSES} float32 logits")
    y_true, y_pred = synthetic_labels(cp, STEP_BATCH, STEP_CLASSES, cp.int64,
                                      ctx.args.accuracy, ctx.args.seed)
    logits = bumped_scores(ctx, y_pred, STEP_CLASSES, "float32", ctx.args.seed, SCORE_BUMP,
                           GENERATION_CHUNK)
    try:
        spin = make_spinner(ctx)
    except Exception as error:
        spin = None
        ctx.note(f"in-loop step: spin kernel unavailable ({type(error).__name__}), "
                         "host_syncs unknown")
    rows = []
    variants = (("label_report(y_true, logits)", {}),
                ("label_report(y_true, logits, validate=False)", {"validate": False}))
    # The backend is chosen once, outside the timed calls (auto would pick cuda for
    # CuPy arrays too, unless METRICS_GPU_BACKEND says otherwise).
    with mg.use_backend("cuda"):
        for call_text, kwargs in variants:
            row = {"call": call_text, "batch": STEP_BATCH, "num_classes": STEP_CLASSES,
                   "logits_dtype": "float32", "target_dtype": "int64"}

            def call(kwargs=kwargs):
                return mg.label_report(y_true, logits, **kwargs)

            try:
                report = call()
                stream.synchronize()
                gpu, host = [], []
                for _ in range(ctx.args.step_repeat):
                    start, end = cp.cuda.Event(), cp.cuda.Event()
                    start.record(stream)
                    began = time.perf_counter()
                    call()
                    host.append((time.perf_counter() - began) * 1e6)
                    end.record(stream)
                    end.synchronize()
                    gpu.append(cp.cuda.get_elapsed_time(start, end) * 1e3)
                row.update(gpu_us=min(gpu), gpu_us_all=gpu, host_us=min(host), host_us_all=host)
                row.update(probe_host_wait(ctx, spin, call, max(host) / 1e3))
                expected = reference(ctx, y_true, lambda a, b: cp.argmax(logits[a:b], axis=1),
                                     STEP_CLASSES, False)
                accuracy = float(np.trace(expected)) / STEP_BATCH
                measured = float(to_numpy(report.metrics["accuracy"]))
                row["accuracy_agrees"] = bool(np.isclose(measured, accuracy, rtol=0, atol=1e-12))
                if not row["accuracy_agrees"]:
                    ctx.failures += 1
            except Exception as error:
                row.update(gpu_us=None, host_us=None, host_syncs="unknown", blocks_host=None,
                           error=f"{type(error).__name__}: {error}"[:1000])
                ctx.note(f"in-loop step {call_text}: {type(error).__name__}: "
                                 f"{error}".splitlines()[0][:300])
                ctx.failures += 1
            rows.append(row)
            ctx.free_memory()
    return rows


# -- the run -------------------------------------------------------------------


def progress_case(case: dict) -> None:
    progress("  ours {} ms, torchmetrics {} ms, cupy {} ms, copy {} ms, agree {}".format(
        *(fmt(case[key]["ms"], ".3f") for key in ("ours", "torchmetrics", "cupy", "copy")),
        case["agree"]))


def run_all(ctx: Context, results: dict) -> None:
    cp, args = ctx.cp, ctx.args
    dtypes = {"int32": cp.int32, "int64": cp.int64}
    classes = [] if "labels" in args.skip else list(args.classes)
    stats_classes = [] if "stats" in args.skip else [k for k in args.stats_classes if k]
    fused = "scores" not in args.skip
    score_dtypes = ("float32", "bfloat16")
    skipped_scores = []
    for n in args.samples:
        for dtype in args.dtypes:
            itemsize = np.dtype(dtype).itemsize
            need = 2 * n * itemsize
            free = ctx.free_bytes()
            if need + MEMORY_MARGIN > free:
                ctx.note(f"N={fmt_n(n)} {dtype}: skipped ({need / 1e9:.1f} GB of labels do not "
                         f"fit in {free / 1e9:.1f} GB of free GPU memory with a "
                         f"{MEMORY_MARGIN >> 30} GiB margin)")
                continue
            copy = None
            for k, stats in [(k, False) for k in classes] + [(k, True) for k in stats_classes]:
                progress(f"making N={fmt_n(n)} K={k} {dtype} labels")
                made = guarded(ctx, f"N={fmt_n(n)} K={k} {dtype} inputs", synthetic_labels,
                               cp, n, k, dtypes[dtype], args.accuracy, args.seed + k)
                if made is False:
                    continue
                y_true, y_pred = made
                del made
                if copy is None:  # the same bytes for every K of this N and dtype
                    copy = time_copy(ctx, f"N={fmt_n(n)} {dtype}: copy",
                                     [(y_true.data, int(y_true.nbytes)),
                                      (y_pred.data, int(y_pred.nbytes))])
                    results["copies"].append({"n": n, "label_dtype": dtype, **copy})
                case = guarded(ctx, f"N={fmt_n(n)} K={k} {dtype}", label_case,
                               ctx, n, k, dtype, y_true, y_pred, copy, stats)
                if isinstance(case, dict):
                    results["cases"].append(case)
                if fused and not stats:
                    for score_dtype in score_dtypes:
                        case = guarded(ctx, f"N={fmt_n(n)} K={k} {dtype} {score_dtype} scores",
                                       score_case, ctx, n, k, dtype, score_dtype, y_true, y_pred)
                        if isinstance(case, dict):
                            results["cases"].append(case)
                        elif case is None and dtype == args.dtypes[0]:
                            skipped_scores.append(f"N={fmt_n(n)} K={k} {score_dtype}")
                del y_true, y_pred
                ctx.free_memory()
    if skipped_scores:
        ctx.note(f"fused-argmax cases not run, N*K*itemsize > --max-score-bytes "
                 f"{args.max_score_bytes:.3g}: " + ", ".join(skipped_scores))
    if "step" not in args.skip:
        if ctx.backend is None:
            ctx.note("in-loop step: not run (--baselines-only)")
        else:
            step = guarded(ctx, "in-loop step", step_case, ctx)
            if step:
                results["step"] = step


# -- output ----------------------------------------------------------------------


def print_table(out: Printer, results: dict) -> None:
    print_gpu_environment(out, results, COPY_CONVENTION)
    if not results["settings"]["baselines_only"]:
        out("fused argmax: ours = backend.accumulate_confusion(y_true, argmax_scores(scores))")
    if results["settings"]["baselines_only"]:
        out("--baselines-only: ours not run; 'agree' = the baselines equal a chunked bincount "
            "reference")
    out()
    header = (f"{'case':<38}{'ours ms':>10}{'GB/s':>8}{'of copy':>9}{'torchm ms':>11}"
              f"{'vs tm':>8}{'cupy ms':>10}{'vs cupy':>9}  agree")
    out(header)
    for case in results["cases"]:
        agree = agree_text(case["agree"])
        out(f"{case['case']:<38}{fmt(case['ours']['ms'], '.3f'):>10}"
            f"{fmt(case['ours_gb_per_s'], '.0f'):>8}"
            f"{fmt(case['fraction_of_copy_bandwidth'], '.0%'):>9}"
            f"{fmt(case['torchmetrics']['ms'], '.3f'):>11}"
            f"{fmt(case['speedup_vs_torchmetrics'], '.1f', 'x'):>8}"
            f"{fmt(case['cupy']['ms'], '.3f'):>10}"
            f"{fmt(case['speedup_vs_cupy'], '.1f', 'x'):>9}  {agree}")
    if results["copies"]:
        out()
        out(f"{'copy of the label bytes':<38}{'bytes':>10}{'ms':>10}{'GB/s (r+w)':>12}")
        for copy in results["copies"]:
            out(f"{'N=' + fmt_n(copy['n']) + ' ' + copy['label_dtype']:<38}"
                f"{copy['bytes'] / 1e9:>8.2f}GB{fmt(copy['ms'], '.3f'):>10}"
                f"{fmt(copy['gb_per_s'], '.0f'):>12}")
    for row in results.get("step", []):
        out()
        out(f"in-loop step: {row['call']}, {row['batch']} x {row['num_classes']} "
            f"{row['logits_dtype']} logits, {row['target_dtype']} targets (CuPy)")
        out(f"  GPU time {fmt(row['gpu_us'], '.1f', ' us')}, host time "
            f"{fmt(row['host_us'], '.1f', ' us')}, host_syncs {row['host_syncs']}, "
            f"waits for the GPU: {fmt(row['blocks_host'], '')}")


def evaluate_targets(results: dict) -> list[dict]:
    labels = [c for c in results["cases"] if c["kind"] == "labels"]
    targets = []

    def add(text, cases, value_key, threshold, render):
        targets.extend(target_verdicts(text, [(case["case"], case) for case in cases], value_key,
                                       lambda v: v >= threshold, render))

    add(f"dense matrix >= {TARGET_FRACTION_SMALL_K:.0%} of copy bandwidth, K <= 100, N = 1e9",
        [c for c in labels if c["n"] == 10**9 and c["k"] <= 100],
        "fraction_of_copy_bandwidth", TARGET_FRACTION_SMALL_K, lambda v: fmt(v, ".1%"))
    add(f"dense matrix >= {TARGET_FRACTION_K1000:.0%} of copy bandwidth, K = 1000, N = 1e9",
        [c for c in labels if c["n"] == 10**9 and c["k"] == 1000],
        "fraction_of_copy_bandwidth", TARGET_FRACTION_K1000, lambda v: fmt(v, ".1%"))
    stats = [c for c in results["cases"] if c["kind"] == "stats"]
    add(f"statistics (report) >= {TARGET_FRACTION_STATS_K1000:.0%} of copy bandwidth, K = 1000, "
        f"N = 1e9", [c for c in stats if c["n"] == 10**9 and c["k"] == 1000],
        "fraction_of_copy_bandwidth", TARGET_FRACTION_STATS_K1000, lambda v: fmt(v, ".1%"))
    add(f"statistics (report) >= {TARGET_FRACTION_STATS_K32000:.0%} of copy bandwidth, "
        f"K = 32000, N = 1e9", [c for c in stats if c["n"] == 10**9 and c["k"] == 32000],
        "fraction_of_copy_bandwidth", TARGET_FRACTION_STATS_K32000, lambda v: fmt(v, ".1%"))
    add(f">= {TARGET_SPEEDUP_TORCHMETRICS:.0f}x torchmetrics, K <= 100, N = 1e8",
        [c for c in labels if c["n"] == 10**8 and c["k"] <= 100],
        "speedup_vs_torchmetrics", TARGET_SPEEDUP_TORCHMETRICS, lambda v: fmt(v, ".2f", "x"))
    text = f"in-loop step <= {TARGET_STEP_US:.0f} us of GPU time (label_report, 4096 x 1000 logits)"
    step = [r for r in results.get("step", []) if r["call"] == "label_report(y_true, logits)"]
    targets.extend(target_verdicts(text, [(row["call"], row) for row in step], "gpu_us",
                                   lambda v: v <= TARGET_STEP_US, lambda v: fmt(v, ".1f", " us")))
    return targets


# -- command line ------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Targets: labels >= 80% of copy bandwidth (K <= 100, N = 1e9), >= 60% "
               "(K = 1000); >= 5x torchmetrics (K <= 100, N = 1e8); in-loop step <= 50 us.")
    parser.add_argument("--samples", type=count, nargs="+", default=list(DEFAULT_SAMPLES),
                        help="N values (default 1e6 1e8 1e9); a size whose labels do not fit "
                             "in free GPU memory is skipped with a note")
    parser.add_argument("--classes", type=count, nargs="+", default=list(DEFAULT_CLASSES),
                        help="dense K values (default 2 10 100 1000)")
    parser.add_argument("--stats-classes", type=int, nargs="+",
                        default=list(DEFAULT_STATS_CLASSES),
                        help="K values of the statistics mode (class_statistics); 0 skips it "
                             "(default 1000 32000)")
    parser.add_argument("--dtypes", nargs="+", choices=("int32", "int64"),
                        default=["int32", "int64"], help="label dtypes (default int32 int64)")
    parser.add_argument("--repeat", type=count, default=5,
                        help="timed runs per measurement, best kept (default 5)")
    parser.add_argument("--step-repeat", type=count, default=50,
                        help="timed runs of the in-loop step (default 50)")
    parser.add_argument("--max-score-bytes", type=count, default=8 * 10**9,
                        help="largest (N, K) score array of the fused-argmax cases, in bytes "
                             "(default 8e9)")
    parser.add_argument("--accuracy", type=float, default=0.8,
                        help="share of right predictions before the offset rule (default 0.8, "
                             "as synthetic_predictions)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip", nargs="+", default=[],
                        choices=("labels", "stats", "scores", "step"),
                        help="parts not to run")
    parser.add_argument("--baselines-only", action="store_true",
                        help="run torchmetrics, cupy and the copy without our backend "
                             "(ours columns null)")
    add_output_options(parser, "<date>-<gpu>")
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    cp, reason = load_gpu()
    if cp is None:
        print(f"gpu_confusion: needs a CUDA GPU: {reason}", file=sys.stderr)
        return 2
    backend = None
    if not args.baselines_only:
        try:
            backend = get_backend_implementation("cuda")
        except Exception as error:
            print(f"gpu_confusion: the metrics_gpu 'cuda' backend cannot run: {error} "
                  "(--baselines-only runs the rest)", file=sys.stderr)
            return 2

    notes: list[str] = []
    torch, tm = load_torch(cp, notes, "torchmetrics columns and bfloat16 scores are null",
                           {"binary": "binary_confusion_matrix",
                            "multiclass": "multiclass_confusion_matrix"})
    ctx = Context(cp, backend, torch, tm, args, notes)
    results = {
        "bench": "gpu_confusion",
        "environment": gpu_environment(cp, torch, tm),
        "settings": {
            "samples": args.samples, "classes": args.classes,
            "stats_classes": args.stats_classes, "dtypes": args.dtypes,
            "repeat": args.repeat, "step_repeat": args.step_repeat,
            "max_score_bytes": args.max_score_bytes, "accuracy": args.accuracy,
            "seed": args.seed, "skip": args.skip, "baselines_only": args.baselines_only,
        },
        "conventions": {
            "time": "CUDA events on the current stream, best of repeat after one warm-up call",
            "bandwidth": COPY_CONVENTION,
            "bytes_read": "labels: N * (itemsize_true + itemsize_pred); scores: "
                          "N * K * itemsize_scores + N * itemsize_true",
            "speedup": "baseline time / our time",
            "step": "gpu_us: CUDA-event time from a record before the call to one after it on "
                    "the current stream (idle gaps while the host launches or waits count); "
                    "host_us: wall time until the call returns",
            "agree": "our counts equal, exactly, those of torchmetrics, cupy and a chunked "
                     "bincount reference (each that ran), and n_invalid == 0",
        },
        "targets_spec": {
            "fraction_of_copy_k_le_100_n_1e9": TARGET_FRACTION_SMALL_K,
            "fraction_of_copy_k_1000_n_1e9": TARGET_FRACTION_K1000,
            "statistics_fraction_of_copy_k_1000_n_1e9": TARGET_FRACTION_STATS_K1000,
            "statistics_fraction_of_copy_k_32000_n_1e9": TARGET_FRACTION_STATS_K32000,
            "speedup_vs_torchmetrics_k_le_100_n_1e8": TARGET_SPEEDUP_TORCHMETRICS,
            "step_gpu_us": TARGET_STEP_US,
        },
        "copies": [], "cases": [],
    }
    run_all(ctx, results)
    results["targets"] = evaluate_targets(results)
    results["notes"] = notes
    results["failures"] = ctx.failures

    out = Printer()
    print_table(out, results)
    print_targets(out, results["targets"])
    print_notes(out, notes)

    env = results["environment"]
    write_outputs(args, argv, results, out, progress, f"{env['date']}-{slug(env['gpu'], 'gpu')}",
                  "GPU confusion bench", f"GPU: {env['gpu']}. ")
    return 0 if ctx.failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
