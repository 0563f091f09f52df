"""GPU bench: the fused logits pass vs the PyTorch idiom and torchmetrics; exact AUC vs a sort.

    python bench/gpu_scores.py [--cases 1e6x1000 32768x128000 1e8x10]
        [--dtypes float32 bfloat16] [--repeat 5] [--auc-samples 1e8]
        [--skip fused cupy-route torch-route lanes-mapping idiom torchmetrics auc]
        [--quick]
        [--seed 0] [--json PATH] [--write-results]

GPU only (CuPy and a CUDA GPU; without them it prints why and exits with 2).
In one run, for every (N, K) case and logits dtype, on the same GPU arrays
(int64 targets; logits N(0, 1) plus a bump on a predicted class that is the
target ~80% of the time):

* ours: ``metrics_gpu.logits_report(y, logits, from_logits=True, top_k=(1, 5),
  n_bins=15, validate=False)`` (cross-entropy, accuracy, top-5, Brier, hinge,
  15-bin calibration in one read of the logits), on CuPy arrays (float32) and
  on zero-copy torch views of the same memory when torch is importable.
  bfloat16 logits are a torch.bfloat16 CUDA tensor (CuPy has no bfloat16):
  the library reads its 16-bit patterns in place (a DLPack int16 view; the
  kernels widen in registers);
* ours with lanes per row (float32 rows of 256+ columns, route "cupy, lanes
  per row"): the same call with rows read a score per load by the lanes of a
  warp, the mapping before the 16-byte loads of ``fused_logits_wide``, to
  show what they change (a comparison, not a target row);
* ours with ``validate=True`` (route "cupy, validate=True"): the default
  call, the input checks and then the fused pass of kernels/scores.cu
  (``validate=False`` is one streaming update of kernels/streaming.cu
  instead); a comparison, not a target row;
* the PyTorch idiom, on the same torch tensor: ``F.cross_entropy(logits, y)``,
  ``(logits.argmax(1) == y).float().mean()``, top-5 membership from
  ``logits.topk(5, dim=1)``, and ``softmax(logits, 1).max(1)`` binned into a
  15-bin calibration histogram with ``torch.bucketize`` / ``torch.bincount``;
* torchmetrics' functional ``multiclass_accuracy`` (top_k=1 and top_k=5) and
  ``multiclass_calibration_error`` (n_bins=15), ``average='micro'``,
  ``validate_args=False`` (each timed; "tm ms" is their sum);
* the bandwidth limit: a device-to-device copy of the same score bytes. Ours
  reads N * K * itemsize score bytes; its GB/s is that over its time. The
  copy's GB/s counts read + write, 2 x bytes / time, so "of copy" = our read
  rate / the copy's DRAM traffic rate (as bench/gpu_confusion.py).

Then the exact AUC: ``--auc-samples`` float32 scores in [0, 1] (float32
rounding makes ties) with int64 0/1 targets: ``metrics_gpu._functional.ranking.roc_auc_score``
and ``average_precision_score`` on CuPy arrays, ``roc_curve(...,
drop_intermediate=False)`` (every point; timed, not a target),
``roc_auc_score`` again on the scores - 0.5 (decision values of both signs),
``cupy.argsort(scores)`` alone, and torchmetrics' ``binary_auroc(thresholds=None)``
on torch views; checked against an exact tie-averaged rank-sum computed here
(integer arithmetic).

Times are CUDA-event times on the current stream, best of ``--repeat`` after a
warm-up call. Checks: our cross-entropy and accuracy against torch's (rtol
1e-4 for float32, 1e-2 for bfloat16), against a chunked float64 CuPy
reference (rtol 1e-4), the CuPy and torch routes against each other, and
torchmetrics' top-1 accuracy against ours. Free GPU memory is checked before
each case and baseline (skipped with a note when short). Targets (project
issue), printed PASS/MISS from the measured numbers: the fused pass >= 75% of
copy bandwidth; >= 3x the PyTorch idiom; exact ROC AUC and average precision
each <= 1.3x the sort alone.

``--quick`` is a small smoke run (small cases, AUC on 1e6, 2 repeats).
``--write-results`` writes ``bench/results/<date>-<gpu>-scores.json`` and
``.md`` (the output exactly as printed). Exit status: 0 when every check
agrees and every one of our calls ran, 1 otherwise, 2 when no GPU or no
``cuda`` backend is available.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time

from _common import (
    GpuContext,
    Printer,
    add_output_options,
    agree_text,
    attempt,
    bumped_scores,
    close,
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
from metrics_gpu.backends.launchers import scores as score_launchers

DEFAULT_CASES = ((10**6, 1000), (32768, 128000), (10**8, 10))
QUICK_CASES = ((10**5, 1000), (1024, 32000), (10**6, 10))
DEFAULT_AUC_SAMPLES = 10**8
QUICK_AUC_SAMPLES = 10**6
DEFAULT_REPEAT, QUICK_REPEAT = 5, 2
TOP_K = (1, 5)
N_BINS = 15

TARGET_FRACTION = 0.75      # fused pass, of copy bandwidth (K = 10, 1000, 128000; f32, bf16)
TARGET_SPEEDUP_IDIOM = 3.0  # vs the PyTorch idiom
TARGET_AUC_RATIO = 1.3      # exact AUC (and AP) time / cupy.argsort time, N = 1e8

RTOL_TORCH = {"float32": 1e-4, "bfloat16": 1e-2}
RTOL_REFERENCE = 1e-4       # ours vs the float64 CuPy reference
RTOL_ROUTES = 1e-6          # CuPy route vs torch route: the same kernel on the same bytes,
                            # but the torch route returns float32 tensors for float32 logits
RTOL_AUC = 1e-9             # ours vs the exact rank-sum AUC
RTOL_AUC_TORCHMETRICS = 1e-4  # information only

GENERATION_CHUNK = 1 << 24   # elements per chunk when making logits
REFERENCE_CHUNK = 1 << 24    # elements per chunk of the untimed float64 reference
MEMORY_MARGIN = 2 << 30      # free bytes left over after a case's or baseline's estimate
TM_TOP5_BYTES_PER_SCORE = 20  # torchmetrics top_k=5: int32 one-hots x2, int64 one-hot, bools
TM_CALIBRATION_BYTES_PER_SCORE = 3  # its [0, 1] check: three bool temporaries
SCORE_BUMP = 4.0             # added to the logit of the predicted class
ACCURACY = 0.8               # share of rows whose predicted class is the target
AUC_POSITIVE_SHARE = 0.3
COPY_CONVENTION = ("copy GB/s = 2 x bytes / time (read + write); ours GB/s = score bytes read / "
                   "time; 'of copy' = ours GB/s / copy GB/s")
BF16_NOTE = ("bfloat16: logits are a torch.bfloat16 CUDA tensor (CuPy has no bfloat16); the "
             "library reads its 16-bit patterns in place (no float32 copy); GB/s counts the "
             "2-byte bfloat16 scores")


progress = stderr_progress("gpu_scores")


# -- set-up ------------------------------------------------------------------


class Context(GpuContext):
    """GpuContext that says each timed call on stderr, and checks free memory first."""

    def __init__(self, cp, torch, tm, args, notes):
        super().__init__(cp, torch, tm, args, notes, progress, announce_timings=True)

    def fits(self, label: str, need: int) -> bool:
        """Whether ``need`` bytes plus the margin are free; a note when not."""
        free = self.free_bytes()
        if need + MEMORY_MARGIN <= free:
            return True
        self.note(f"{label}: not run (needs about {need / 1e9:.1f} GB, {free / 1e9:.1f} GB of "
                  f"GPU memory free, {MEMORY_MARGIN >> 30} GiB margin)")
        return False


# -- inputs ------------------------------------------------------------------


def make_targets(cp, n: int, k: int, seed: int):
    """int64 targets (uniform) and the predicted class of each row (the target w.p. 0.8)."""
    random = cp.random.RandomState(seed)
    y = random.randint(0, k, size=n).astype(cp.int64, copy=False)
    other = random.randint(0, k, size=n).astype(cp.int64, copy=False)
    pred = cp.where(random.random_sample(n) < ACCURACY, y, other)
    del other
    return y, pred


# -- results on the host -------------------------------------------------------


def to_float(value) -> float:
    if hasattr(value, "detach") and value.dtype.is_floating_point:
        value = value.detach().float()  # NumPy has no bfloat16
    return float(to_numpy(value))


def report_host(report) -> dict:
    return {
        "cross_entropy": to_float(report.cross_entropy),
        "accuracy": to_float(report.accuracy),
        "top5_accuracy": to_float(report.top_k_accuracy[5]),
        "expected_calibration_error": to_float(report.expected_calibration_error),
        "brier_score": to_float(report.brier_score),
        "n_invalid": to_float(report.n_invalid),
    }


def idiom_host(result) -> dict:
    ce, acc, top5, ece, _count = result
    return {"cross_entropy": to_float(ce), "accuracy": to_float(acc),
            "top5_accuracy": to_float(top5), "expected_calibration_error": to_float(ece)}


# -- the fused pass --------------------------------------------------------------

LANES_ROUTE = "cupy, lanes per row"
# The default call (validate=True): the input checks, then the fused score
# pass of kernels/scores.cu (validate=False is one streaming update instead).
VALIDATED_ROUTE = "cupy, validate=True"
COMPARISON_ROUTES = (LANES_ROUTE, VALIDATED_ROUTE)


@contextlib.contextmanager
def lanes_mapping():
    """Rows of any width read by lanes, a score per load (fused_logits_pass;
    the streaming update's scan_row), as before fused_logits_wide."""
    saved = score_launchers.SCORE_WIDE_COLUMNS
    score_launchers.SCORE_WIDE_COLUMNS = 1 << 62
    try:
        yield
    finally:
        score_launchers.SCORE_WIDE_COLUMNS = saved


def make_idiom(ctx: Context, logits, target, k: int):
    """What a PyTorch user writes today: loss, accuracy, top-5 and a calibration histogram."""
    torch = ctx.torch
    functional = torch.nn.functional
    boundaries = torch.linspace(0, 1, N_BINS + 1, device=logits.device)[1:-1].contiguous()
    count = target.numel()

    def idiom():
        ce = functional.cross_entropy(logits, target)
        accuracy = (logits.argmax(1) == target).float().mean()
        top5 = (logits.topk(5, dim=1).indices == target[:, None]).any(1).float().mean()
        confidence, predicted = torch.softmax(logits, dim=1).max(1)
        confidence = confidence.float()
        correct = (predicted == target).float()
        bins = torch.bucketize(confidence, boundaries, right=True)  # [b/B, (b+1)/B)
        in_bin = torch.bincount(bins, minlength=N_BINS)
        confidence_sum = torch.bincount(bins, weights=confidence, minlength=N_BINS)
        correct_sum = torch.bincount(bins, weights=correct, minlength=N_BINS)
        ece = (correct_sum - confidence_sum).abs().sum() / count
        return ce, accuracy, top5, ece, in_bin

    return idiom


def reference(ctx: Context, y, chunk_of, n: int, k: int) -> dict:
    """Untimed float64 cross-entropy and accuracy (CuPy, chunked): the check without torch."""
    cp = ctx.cp
    rows = max(1, REFERENCE_CHUNK // k)
    nll = cp.zeros((), dtype=cp.float64)
    correct = cp.zeros((), dtype=cp.int64)
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        z = chunk_of(start, stop).astype(cp.float64)
        t = y[start:stop]
        top = z.max(axis=1)
        lse = top + cp.log(cp.exp(z - top[:, None]).sum(axis=1))
        nll += (lse - z[cp.arange(stop - start), t]).sum()
        correct += (cp.argmax(z, axis=1) == t).sum()
        del z, lse
    result = {"cross_entropy": float(nll) / n, "accuracy": int(correct) / n}
    ctx.free_memory()
    return result


def score_case(ctx: Context, n: int, k: int, dtype: str, y, pred) -> dict | bool:
    torch = ctx.torch
    short = {"float32": "f32", "bfloat16": "bf16"}[dtype]
    name = f"N={fmt_n(n, separator='')} K={k} {short}"
    if dtype == "bfloat16" and torch is None:
        ctx.note("bfloat16 cases: not run (bfloat16 logits are made with torch)", key="bf16")
        return False
    itemsize = 4 if dtype == "float32" else 2
    score_bytes = n * k * itemsize
    # The logits, plus the idiom's (N, K) temporaries (log_softmax, softmax;
    # more than the copy's target).
    need = 3 * score_bytes
    if not ctx.fits(name, need):
        return False
    progress(f"{name}: making logits")
    logits = bumped_scores(ctx, pred, k, dtype, ctx.args.seed + k, SCORE_BUMP, GENERATION_CHUNK)
    case = {"case": name, "n": n, "k": k, "dtype": dtype, "score_bytes": score_bytes}
    try:
        measure_case(ctx, case, y, logits)
    finally:
        del logits  # the inputs of the case go before the next one is made
        ctx.free_memory()
    return case


def measure_case(ctx: Context, case: dict, y, logits) -> None:
    cp, torch, tm, args = ctx.cp, ctx.torch, ctx.tm, ctx.args
    name, n, k, dtype = case["case"], case["n"], case["k"], case["dtype"]
    score_bytes = case["score_bytes"]
    rtol = RTOL_TORCH[dtype]

    if dtype == "float32":
        logits_cp = logits
        logits_t = None if torch is None else torch.from_dlpack(logits)
        raw = logits
    else:
        logits_cp = None
        logits_t = logits
        raw = cp.from_dlpack(logits.view(torch.int16))  # the same bits, for the copy
    y_t = None if torch is None else torch.from_dlpack(y)

    # -- ours, by each route --
    routes = []
    if logits_cp is not None and "cupy-route" not in args.skip:
        routes.append(("cupy", y, logits_cp))
    if logits_t is not None and ("torch-route" not in args.skip or dtype == "bfloat16"):
        routes.append(("torch (bf16)" if dtype == "bfloat16" else "torch", y_t, logits_t))
    if (logits_cp is not None and "cupy-route" not in args.skip
            and "lanes-mapping" not in args.skip and k >= score_launchers.SCORE_WIDE_COLUMNS):
        # The same call with rows read a score per load by lanes (the mapping
        # before fused_logits_wide): what the 16-byte loads change, measured.
        routes.append((LANES_ROUTE, y, logits_cp))
    if logits_cp is not None and "cupy-route" not in args.skip:
        routes.append((VALIDATED_ROUTE, y, logits_cp))
    case["ours_call"] = (f"logits_report(y, logits, from_logits=True, top_k={TOP_K}, "
                         f"n_bins={N_BINS}, validate=False)")
    case["ours"] = []
    for route, target, scores in routes:
        def call(target=target, scores=scores, lanes=route == LANES_ROUTE,
                 validate=route == VALIDATED_ROUTE):
            with lanes_mapping() if lanes else contextlib.nullcontext():
                return mg.logits_report(target, scores, from_logits=True, top_k=TOP_K,
                                        n_bins=N_BINS, validate=validate)

        with mg.use_backend("cuda"):
            timing, values = attempt(ctx, f"{name}: ours ({route})", call, report_host)
        if values is None:
            ctx.failures += 1
        case["ours"].append({"route": route, **timing, "values": values})

    # -- the PyTorch idiom --
    idiom_values = None
    if torch is None:
        case["idiom"] = {"ms": None, "error": "torch unavailable"}
    elif "idiom" in args.skip:
        case["idiom"] = {"ms": None, "error": "--skip idiom"}
    else:
        case["idiom"], idiom_values = attempt(ctx, f"{name}: PyTorch idiom",
                                              make_idiom(ctx, logits_t, y_t, k), idiom_host)
    case["idiom_values"] = idiom_values

    # -- torchmetrics --
    case["torchmetrics"] = {}
    tm_values = {}
    if tm is not None and "torchmetrics" not in args.skip:
        parts = {
            "multiclass_accuracy(top_k=1)": (0, lambda: tm["accuracy"](
                logits_t, y_t, num_classes=k, top_k=1, average="micro", validate_args=False)),
            "multiclass_accuracy(top_k=5)": (TM_TOP5_BYTES_PER_SCORE * n * k, lambda: tm[
                "accuracy"](logits_t, y_t, num_classes=k, top_k=5, average="micro",
                            validate_args=False)),
            f"multiclass_calibration_error(n_bins={N_BINS})": (
                TM_CALIBRATION_BYTES_PER_SCORE * n * k + score_bytes, lambda: tm["calibration"](
                    logits_t, y_t, num_classes=k, n_bins=N_BINS, norm="l1",
                    validate_args=False)),
        }
        for part, (need, function) in parts.items():
            label = f"{name}: torchmetrics {part}"
            if not ctx.fits(label, need):
                case["torchmetrics"][part] = {"ms": None, "error": "not enough GPU memory"}
                continue
            case["torchmetrics"][part], tm_values[part] = attempt(ctx, label, function, to_float)
    case["torchmetrics_values"] = tm_values
    tm_times = [t["ms"] for t in case["torchmetrics"].values()]
    case["torchmetrics_ms"] = (sum(tm_times) if len(tm_times) == 3
                               and all(t is not None for t in tm_times) else None)

    # -- the copy of the same score bytes --
    case["copy"] = time_copy(ctx, f"{name}: copy", [(raw.data, score_bytes)])
    del raw

    # -- checks --
    if dtype == "float32":
        def chunk_of(a, b):
            return logits_cp[a:b]
    else:
        def chunk_of(a, b):
            return cp.from_dlpack(logits_t[a:b].float())
    progress(f"  {name}: float64 reference")
    case["reference_values"] = reference(ctx, y, chunk_of, n, k)
    check_case(ctx, case, rtol)
    derive(case)


def check_case(ctx: Context, case: dict, rtol: float) -> None:
    """``agree`` per route: ours vs torch's idiom, the reference, the other route, torchmetrics."""
    ref = case["reference_values"]
    idiom = case["idiom_values"]
    top1 = case["torchmetrics_values"].get("multiclass_accuracy(top_k=1)")
    values = [row["values"] for row in case["ours"] if row["values"] is not None]
    for row in case["ours"]:
        mine = row["values"]
        if mine is None:
            row["agree"], row["agree_detail"] = None, {}
            continue
        detail = {}
        for key in ("cross_entropy", "accuracy"):
            detail[f"{key} vs torch"] = close(mine[key], None if idiom is None else idiom[key],
                                              rtol)
            detail[f"{key} vs reference"] = close(mine[key], ref[key], RTOL_REFERENCE)
        detail["accuracy vs torchmetrics top-1"] = close(mine["accuracy"], top1, rtol)
        detail["n_invalid is 0"] = mine["n_invalid"] == 0
        for other in values:
            if other is not mine:
                detail["cupy and torch routes equal"] = all(
                    close(mine[key], other[key], RTOL_ROUTES) for key in mine)
        row["agree_detail"] = detail
        checked = [v for v in detail.values() if v is not None]
        row["agree"] = all(checked)
        if not row["agree"]:
            ctx.failures += 1
            failed = [key for key, value in detail.items() if value is False]
            ctx.note(f"{case['case']} ({row['route']}): disagrees: {', '.join(failed)}")


def derive(case: dict) -> None:
    copy = case["copy"]
    idiom, tm = case["idiom"]["ms"], case["torchmetrics_ms"]
    for row in case["ours"]:
        ms = row["ms"]
        row["gb_per_s"] = None if ms is None else case["score_bytes"] / (ms * 1e-3) / 1e9
        row["fraction_of_copy_bandwidth"] = (
            None if ms is None or copy["gb_per_s"] is None else row["gb_per_s"] / copy["gb_per_s"])
        row["speedup_vs_idiom"] = None if ms is None or idiom is None else idiom / ms
        row["speedup_vs_torchmetrics"] = None if ms is None or tm is None else tm / ms


# -- the exact AUC ------------------------------------------------------------------


def exact_auc(ctx: Context, y, scores) -> float:
    """AUC from tie-averaged ranks, in integers: (2 R - P (P + 1)) / (2 P Q)."""
    cp = ctx.cp
    n = scores.shape[0]
    order = cp.argsort(scores)
    ranked = scores[order]
    positive = y[order]
    del order
    new = cp.empty(n, dtype=cp.bool_)
    new[0] = True
    cp.not_equal(ranked[1:], ranked[:-1], out=new[1:])
    del ranked
    starts = cp.flatnonzero(new)
    group = cp.cumsum(new, dtype=cp.int64) - 1
    del new
    ends = cp.concatenate([starts[1:], cp.array([n], dtype=starts.dtype)])
    twice_rank = (starts + ends + 1)[group]  # 2 x the mean 1-based rank of the tie group
    del starts, ends, group
    twice_sum = int((twice_rank * positive).sum())
    p = int(positive.sum())
    q = n - p
    del twice_rank, positive
    ctx.free_memory()
    return (twice_sum - p * (p + 1)) / (2 * p * q)


def auc_case(ctx: Context, n: int) -> dict | bool:
    cp, torch, tm = ctx.cp, ctx.torch, ctx.tm
    name = f"exact AUC N={fmt_n(n, separator='')} f32"
    # scores + targets, then the sorts' keys, indices and temporaries (ours, argsort, reference).
    if not ctx.fits(name, n * (4 + 8) + 6 * n * 8):
        return False
    progress(f"{name}: making scores")
    random = cp.random.RandomState(ctx.args.seed + 7)
    y = (random.random_sample(n) < AUC_POSITIVE_SHARE).astype(cp.int64)
    scores = random.standard_normal(n, dtype=cp.float32)
    scores *= 0.15
    scores += 0.5 + 0.1 * (2 * y - 1).astype(cp.float32)
    cp.clip(scores, 0, 1, out=scores)
    case = {"case": name, "n": n, "score_dtype": "float32", "target_dtype": "int64"}
    try:
        try:
            from metrics_gpu._functional.ranking import average_precision_score, roc_auc_score, roc_curve
        except Exception as error:
            roc_auc_score = average_precision_score = roc_curve = None
            ctx.note(f"exact AUC: ours not run, metrics_gpu._functional.ranking is not importable "
                     f"({type(error).__name__}: {error})".splitlines()[0][:300])
        if roc_auc_score is None:
            case["ours"], ours = {"ms": None, "error": "metrics_gpu._functional.ranking not importable"}, None
            case["ours_ap"] = {"ms": None, "error": "metrics_gpu._functional.ranking not importable"}
            case["ours_curve"] = {"ms": None, "error": "metrics_gpu._functional.ranking not importable"}
            case["ours_signed"] = {"ms": None, "error": "metrics_gpu._functional.ranking not importable"}
            ours_signed = None
        else:
            with mg.use_backend("cuda"):
                case["ours"], ours = attempt(ctx, f"{name}: ours roc_auc_score",
                                             lambda: roc_auc_score(y, scores), to_float)
                case["ours_ap"], ours_ap = attempt(
                    ctx, f"{name}: ours average_precision_score",
                    lambda: average_precision_score(y, scores), to_float)
                # The whole curve (one point per distinct score), for its cost
                # against the sort; not a target.
                case["ours_curve"], curve_points = attempt(
                    ctx, f"{name}: ours roc_curve",
                    lambda: roc_curve(y, scores, drop_intermediate=False),
                    lambda curve: int(curve[0].shape[0]))
                # Decision values (both signs; the same ranking, so the same
                # AUC): the keys are sorted in two parts, by sign.
                decisions = scores - 0.5
                case["ours_signed"], ours_signed = attempt(
                    ctx, f"{name}: ours roc_auc_score, scores - 0.5",
                    lambda: roc_auc_score(y, decisions), to_float)
                del decisions
            if ours is None or ours_ap is None or curve_points is None or ours_signed is None:
                ctx.failures += 1
        case["argsort"], _ = attempt(ctx, f"{name}: cupy.argsort",
                                     lambda: cp.argsort(scores), lambda result: None)
        theirs = None
        if tm is None:
            case["torchmetrics"] = {"ms": None, "error": "torchmetrics unavailable"}
        elif "torchmetrics" in ctx.args.skip:
            case["torchmetrics"] = {"ms": None, "error": "--skip torchmetrics"}
        else:
            preds_t, target_t = torch.from_dlpack(scores), torch.from_dlpack(y)
            case["torchmetrics"], theirs = attempt(
                ctx, f"{name}: torchmetrics binary_auroc",
                lambda: tm["binary_auroc"](preds_t, target_t, thresholds=None,
                                           validate_args=False),
                to_float)
            del preds_t, target_t
        progress(f"  {name}: exact rank-sum reference")
        exact = exact_auc(ctx, y, scores)
    finally:
        y = scores = None  # frees the device arrays (the lambdas above are done with them)
        ctx.free_memory()
    case.update(ours_value=ours, ours_signed_value=ours_signed, torchmetrics_value=theirs,
                exact_value=exact)
    case["agree"] = close(ours, exact, RTOL_AUC)
    case["signed_agrees"] = close(ours_signed, exact, RTOL_AUC)
    if case["signed_agrees"] is False:
        ctx.failures += 1
        ctx.note(f"{name}: ours on scores - 0.5 {ours_signed!r} != exact {exact!r}")
    case["torchmetrics_agrees"] = close(theirs, exact, RTOL_AUC_TORCHMETRICS)
    if case["agree"] is False:
        ctx.failures += 1
        ctx.note(f"{name}: ours {ours!r} != exact {exact!r}")
    ours_ms, sort_ms, tm_ms = (case[key]["ms"] for key in ("ours", "argsort", "torchmetrics"))
    case["ours_over_argsort"] = None if ours_ms is None or sort_ms is None else ours_ms / sort_ms
    ap_ms = case["ours_ap"]["ms"]
    case["ap_over_argsort"] = None if ap_ms is None or sort_ms is None else ap_ms / sort_ms
    curve_ms = case["ours_curve"]["ms"]
    case["curve_over_argsort"] = (None if curve_ms is None or sort_ms is None
                                  else curve_ms / sort_ms)
    signed_ms = case["ours_signed"]["ms"]
    case["signed_over_argsort"] = (None if signed_ms is None or sort_ms is None
                                   else signed_ms / sort_ms)
    case["speedup_vs_torchmetrics"] = None if ours_ms is None or tm_ms is None else tm_ms / ours_ms
    return case


# -- the run -------------------------------------------------------------------


def run_all(ctx: Context, results: dict) -> None:
    cp, args = ctx.cp, ctx.args
    if "fused" not in args.skip:
        for n, k in args.cases:
            label = f"N={fmt_n(n, separator='')} K={k}"
            if not ctx.fits(f"{label} targets", 2 * n * 8):
                continue
            y, pred = make_targets(cp, n, k, args.seed + k)
            for dtype in args.dtypes:
                case = guarded(ctx, f"{label} {dtype}", score_case, ctx, n, k, dtype, y, pred)
                if isinstance(case, dict):
                    results["cases"].append(case)
            del y, pred
            ctx.free_memory()
    if "auc" not in args.skip and args.auc_samples:
        case = guarded(ctx, "exact AUC", auc_case, ctx, args.auc_samples)
        if isinstance(case, dict):
            results["auc"] = case


# -- output ----------------------------------------------------------------------


def print_table(out: Printer, results: dict) -> None:
    print_gpu_environment(out, results, COPY_CONVENTION)
    out(f"ours: logits_report(y, logits, from_logits=True, top_k=(1, 5), n_bins={N_BINS}, "
        "validate=False), int64 targets; route cupy = CuPy arrays, torch = torch views of them")
    out("idiom: F.cross_entropy + (argmax == y).mean + topk(5) membership + softmax.max(1) and "
        f"a {N_BINS}-bin bucketize/bincount histogram, on the same torch tensor")
    out("tm: torchmetrics multiclass_accuracy(top_k=1) + multiclass_accuracy(top_k=5) + "
        f"multiclass_calibration_error(n_bins={N_BINS}), average='micro', validate_args=False")
    out(BF16_NOTE)
    if results["cases"]:
        out()
        out(f"{'case':<24}{'route':<21}{'ours ms':>10}{'GB/s':>8}{'of copy':>9}"
            f"{'idiom ms':>10}{'vs idiom':>10}{'tm ms':>10}{'vs tm':>8}  agree")
        for case in results["cases"]:
            if not case["ours"]:
                out(f"{case['case']:<24}{'(ours not run)':<21}{'-':>10}{'-':>8}{'-':>9}"
                    f"{fmt(case['idiom']['ms'], '.3f'):>10}{'-':>10}"
                    f"{fmt(case['torchmetrics_ms'], '.3f'):>10}{'-':>8}  -")
            for row in case["ours"]:
                out(f"{case['case']:<24}{row['route']:<21}{fmt(row['ms'], '.3f'):>10}"
                    f"{fmt(row['gb_per_s'], '.0f'):>8}"
                    f"{fmt(row['fraction_of_copy_bandwidth'], '.0%'):>9}"
                    f"{fmt(case['idiom']['ms'], '.3f'):>10}"
                    f"{fmt(row['speedup_vs_idiom'], '.1f', 'x'):>10}"
                    f"{fmt(case['torchmetrics_ms'], '.3f'):>10}"
                    f"{fmt(row['speedup_vs_torchmetrics'], '.1f', 'x'):>8}"
                    f"  {agree_text(row.get('agree'))}")
        out()
        parts = ("multiclass_accuracy(top_k=1)", "multiclass_accuracy(top_k=5)",
                 f"multiclass_calibration_error(n_bins={N_BINS})")
        out(f"{'baselines and copy, ms':<24}{'idiom':>10}{'tm top-1':>10}{'tm top-5':>10}"
            f"{'tm calib':>10}{'score GB':>10}{'copy ms':>10}{'copy GB/s':>11}")
        for case in results["cases"]:
            tm = [case["torchmetrics"].get(part, {}).get("ms") for part in parts]
            copy = case["copy"]
            out(f"{case['case']:<24}{fmt(case['idiom']['ms'], '.3f'):>10}"
                + "".join(f"{fmt(t, '.3f'):>10}" for t in tm)
                + f"{case['score_bytes'] / 1e9:>10.2f}{fmt(copy['ms'], '.3f'):>10}"
                  f"{fmt(copy['gb_per_s'], '.0f'):>11}")
        out()
        out(f"{'values':<24}{'route':<21}{'cross-ent':>11}{'accuracy':>10}{'top-5':>10}"
            f"{'ECE':>10}")
        for case in results["cases"]:
            rows = [(row["route"], row["values"]) for row in case["ours"]]
            rows += [("torch idiom", case["idiom_values"]),
                     ("float64 reference", case["reference_values"])]
            for label, values in rows:
                if values is None:
                    continue
                out(f"{case['case']:<24}{label:<21}"
                    f"{fmt(values.get('cross_entropy'), '.6f'):>11}"
                    f"{fmt(values.get('accuracy'), '.6f'):>10}"
                    f"{fmt(values.get('top5_accuracy'), '.6f'):>10}"
                    f"{fmt(values.get('expected_calibration_error'), '.6f'):>10}")
    auc = results.get("auc")
    if auc:
        out()
        out(f"{auc['case']} scores in [0, 1] (ties from float32 rounding), int64 0/1 targets "
            f"({AUC_POSITIVE_SHARE:.0%} positive), CuPy arrays")
        out(f"  ours roc_auc_score          {fmt(auc['ours']['ms'], '.3f', ' ms'):>12}   "
            f"= {fmt(auc['ours_over_argsort'], '.2f', 'x')} cupy.argsort   "
            f"AUC {fmt(auc['ours_value'], '.9f')}")
        out(f"  ours average_precision      {fmt(auc['ours_ap']['ms'], '.3f', ' ms'):>12}   "
            f"= {fmt(auc['ap_over_argsort'], '.2f', 'x')} cupy.argsort")
        out(f"  ours, on scores - 0.5       {fmt(auc['ours_signed']['ms'], '.3f', ' ms'):>12}   "
            f"= {fmt(auc['signed_over_argsort'], '.2f', 'x')} cupy.argsort   "
            f"AUC {fmt(auc['ours_signed_value'], '.9f')} (both signs: two key sorts)")
        out(f"  ours roc_curve (all points) {fmt(auc['ours_curve']['ms'], '.3f', ' ms'):>12}   "
            f"= {fmt(auc['curve_over_argsort'], '.2f', 'x')} cupy.argsort")
        out(f"  cupy.argsort(scores)        {fmt(auc['argsort']['ms'], '.3f', ' ms'):>12}")
        out(f"  torchmetrics binary_auroc   {fmt(auc['torchmetrics']['ms'], '.3f', ' ms'):>12}   "
            f"ours {fmt(auc['speedup_vs_torchmetrics'], '.1f', 'x')} faster   "
            f"AUC {fmt(auc['torchmetrics_value'], '.9f')}")
        out(f"  exact rank-sum AUC {auc['exact_value']:.12f}: ours agrees {agree_text(auc['agree'])}"
            f", on scores - 0.5 {agree_text(auc['signed_agrees'])}"
            f" (rtol {RTOL_AUC:g}); torchmetrics within rtol {RTOL_AUC_TORCHMETRICS:g}: "
            f"{agree_text(auc['torchmetrics_agrees'])}")


def evaluate_targets(results: dict) -> list[dict]:
    targets = []
    rows = [(f"{case['case']} {row['route']}", row) for case in results["cases"]
            for row in case["ours"] if row["route"] not in COMPARISON_ROUTES]  # comparisons only

    def add(text, chosen, key, passes, render):
        targets.extend(target_verdicts(text, chosen, key, passes, render))

    add(f"fused pass >= {TARGET_FRACTION:.0%} of copy bandwidth", rows,
        "fraction_of_copy_bandwidth", lambda v: v >= TARGET_FRACTION, lambda v: fmt(v, ".1%"))
    add(f">= {TARGET_SPEEDUP_IDIOM:.0f}x the PyTorch idiom", rows, "speedup_vs_idiom",
        lambda v: v >= TARGET_SPEEDUP_IDIOM, lambda v: fmt(v, ".2f", "x"))
    auc = results.get("auc")
    add(f"exact AUC <= {TARGET_AUC_RATIO:g}x the sort alone (cupy.argsort)",
        [] if not auc else [(auc["case"], auc)], "ours_over_argsort",
        lambda v: v <= TARGET_AUC_RATIO, lambda v: fmt(v, ".2f", "x"))
    add(f"exact AUC of scores of both signs <= {TARGET_AUC_RATIO:g}x the sort alone",
        [] if not auc else [(auc["case"] + " - 0.5", auc)], "signed_over_argsort",
        lambda v: v <= TARGET_AUC_RATIO, lambda v: fmt(v, ".2f", "x"))
    add(f"exact average precision <= {TARGET_AUC_RATIO:g}x the sort alone (cupy.argsort)",
        [] if not auc else [(auc["case"], auc)], "ap_over_argsort",
        lambda v: v <= TARGET_AUC_RATIO, lambda v: fmt(v, ".2f", "x"))
    return targets


# -- command line ------------------------------------------------------------------


def case_shape(text: str) -> tuple[int, int]:
    """``NxK``, e.g. 1e6x1000."""
    parts = text.lower().split("x")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"a case is NxK (e.g. 1e6x1000), got {text!r}")
    n, k = count(parts[0]), count(parts[1])
    if k < 5:
        raise argparse.ArgumentTypeError(f"K must be >= 5 (top-5 accuracy), got {text!r}")
    return n, k


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog=f"Targets: fused pass >= {TARGET_FRACTION:.0%} of copy bandwidth; "
               f">= {TARGET_SPEEDUP_IDIOM:g}x the PyTorch idiom; exact AUC and average "
               f"precision <= {TARGET_AUC_RATIO:g}x cupy.argsort alone.")
    parser.add_argument("--cases", type=case_shape, nargs="+", default=None,
                        help="(N, K) cases as NxK (default 1e6x1000 32768x128000 1e8x10; "
                             "--quick: 1e5x1000 1024x32000 1e6x10)")
    parser.add_argument("--dtypes", nargs="+", choices=("float32", "bfloat16"),
                        default=["float32", "bfloat16"],
                        help="logits dtypes (default float32 bfloat16; bfloat16 needs torch)")
    parser.add_argument("--repeat", type=count, default=None,
                        help=f"timed runs per measurement, best kept (default {DEFAULT_REPEAT}; "
                             f"--quick: {QUICK_REPEAT})")
    parser.add_argument("--auc-samples", type=int, default=None,
                        help="N of the exact AUC (default 1e8; --quick: 1e6; 0 skips it)")
    parser.add_argument("--skip", nargs="+", default=[],
                        choices=("fused", "cupy-route", "torch-route", "lanes-mapping",
                                 "idiom", "torchmetrics", "auc"),
                        help="parts not to run (torch-route: float32 only; bfloat16 has no "
                             "other route)")
    parser.add_argument("--quick", action="store_true",
                        help="small smoke run: small cases, AUC on 1e6, 2 repeats")
    parser.add_argument("--seed", type=int, default=0)
    add_output_options(parser, "<date>-<gpu>-scores")
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    if args.cases is None:
        args.cases = list(QUICK_CASES if args.quick else DEFAULT_CASES)
    if args.repeat is None:
        args.repeat = QUICK_REPEAT if args.quick else DEFAULT_REPEAT
    if args.auc_samples is None:
        args.auc_samples = QUICK_AUC_SAMPLES if args.quick else DEFAULT_AUC_SAMPLES
    if args.auc_samples < 0:
        print("gpu_scores: --auc-samples must be >= 0", file=sys.stderr)
        return 2

    cp, reason = load_gpu()
    if cp is None:
        print(f"gpu_scores: needs a CUDA GPU: {reason}", file=sys.stderr)
        return 2
    try:
        get_backend_implementation("cuda")
    except Exception as error:
        print(f"gpu_scores: the metrics_gpu 'cuda' backend cannot run: {error}", file=sys.stderr)
        return 2

    started = time.perf_counter()
    notes: list[str] = []
    torch, tm = load_torch(cp, notes, "the torch route, the PyTorch idiom, torchmetrics and "
                           "bfloat16 cases are not run",
                           {"accuracy": "multiclass_accuracy",
                            "calibration": "multiclass_calibration_error",
                            "binary_auroc": "binary_auroc"})
    ctx = Context(cp, torch, tm, args, notes)
    results = {
        "bench": "gpu_scores",
        "environment": gpu_environment(cp, torch, tm),
        "settings": {
            "cases": [list(c) for c in args.cases], "dtypes": args.dtypes,
            "repeat": args.repeat, "auc_samples": args.auc_samples, "top_k": list(TOP_K),
            "n_bins": N_BINS, "seed": args.seed, "skip": args.skip, "quick": args.quick,
        },
        "conventions": {
            "time": "CUDA events on the current stream, best of repeat after one warm-up call",
            "bandwidth": COPY_CONVENTION,
            "bytes_read": "N * K * itemsize of the logits (2 for bfloat16, 4 for float32)",
            "speedup": "baseline time / our time; torchmetrics: the sum of its three calls",
            "bfloat16": BF16_NOTE,
            "agree": f"cross-entropy and accuracy vs torch's (rtol {RTOL_TORCH}), vs a float64 "
                     f"CuPy reference (rtol {RTOL_REFERENCE:g}); accuracy vs torchmetrics "
                     f"top-1; the two routes equal (rtol {RTOL_ROUTES:g}); n_invalid == 0. "
                     f"AUC: ours vs an exact rank-sum (rtol {RTOL_AUC:g})",
        },
        "targets_spec": {
            "fraction_of_copy": TARGET_FRACTION,
            "speedup_vs_idiom": TARGET_SPEEDUP_IDIOM,
            "auc_over_argsort": TARGET_AUC_RATIO,
        },
        "cases": [], "auc": None,
    }
    run_all(ctx, results)
    results["targets"] = evaluate_targets(results)
    results["notes"] = notes
    results["failures"] = ctx.failures
    results["wall_s"] = time.perf_counter() - started

    out = Printer()
    print_table(out, results)
    print_targets(out, results["targets"])
    print_notes(out, notes)
    out()
    out(f"total wall time {results['wall_s']:.0f} s")

    env = results["environment"]
    write_outputs(args, argv, results, out, progress,
                  f"{env['date']}-{slug(env['gpu'], 'gpu')}-scores", "GPU scores bench",
                  f"GPU: {env['gpu']}. ")
    return 0 if ctx.failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
