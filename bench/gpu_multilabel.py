"""GPU bench: the multilabel metrics on torch CUDA tensors (cuda backend) vs torchmetrics.

    python bench/gpu_multilabel.py [--report-cases 1e8x10] [--ranking-cases 1e6x100]
        [--steps 3] [--tm-lrap-samples 5e3] [--skip report ranking auc torchmetrics check]
        [--quick] [--seed 0] [--json PATH] [--write-results]

GPU only (CuPy, torch with CUDA and a GPU; without them it prints why and
exits with 2). The calls of bench/cpu_multilabel.py, made by
``metrics_gpu`` under ``use_backend("cuda")`` on torch CUDA tensors, and
torchmetrics' functional twins on the same tensors (``validate_args=False``),
on one stream (torch's current stream is CuPy's). Inputs are made on the GPU:
``y_true`` (N, L) int8 0/1 indicators (label j relevant with probability
p_j ~ U[0.02, 0.4)), float32 scores sigmoid(N(0, 1) + 2.5 y - 1.5) rounded to
0.01 (ties in every row), ``y_pred = scores >= 0.5`` as int8.

* The threshold report, each ``--report-cases`` NxL (default N = 1e8,
  L = 10): ``accuracy_score`` (subset accuracy), ``hamming_loss``,
  ``precision_recall_fscore_support`` micro, macro and samples,
  ``multilabel_confusion_matrix`` and ``classification_report(...,
  output_dict=True)``, ``zero_division=0``; the report's time is the sum of
  the 7 calls'. torchmetrics: ``multilabel_exact_match``,
  ``multilabel_hamming_distance(average="micro")``, ``multilabel_precision``
  + ``multilabel_recall`` + ``multilabel_f1_score`` (micro, macro; samples =
  ``multidim_average="samplewise"``, ``average="micro"``, then the mean) and
  ``multilabel_confusion_matrix`` (no report: its sum is over the 6 others).
  The bandwidth limit: a device-to-device copy of ``y_true`` and ``y_pred``
  (2 N L bytes). A call reads at least those bytes: its GB/s is 2 N L / its
  time, the report's 2 N L / the 7 calls' summed time (what one fused pass
  would read); the copy's GB/s counts read + write, 2 x bytes / time, so
  "of copy" = our read rate / the copy's DRAM traffic rate (as
  bench/gpu_scores.py). Beside them, not in the sum: one update and compute
  of a fresh ``MultilabelMetrics`` (the report's numbers in one pass,
  checked against the same reference counts).
* The ranking metrics, each ``--ranking-cases`` NxL (default N = 1e6,
  L = 100, float32 scores): ``label_ranking_average_precision_score``,
  ``label_ranking_loss``, ``coverage_error`` and their sum,
  ``label_ranking_metrics`` (the three from one call: one check, one
  launch, one read back), and (unless ``--skip auc``) multilabel
  ``roc_auc_score`` / ``average_precision_score`` macro. torchmetrics:
  ``multilabel_ranking_loss``, ``multilabel_coverage_error``,
  ``multilabel_auroc`` / ``multilabel_average_precision``
  (``thresholds=None``) on all N rows (against ``label_ranking_metrics``:
  its ranking loss + coverage error, their times summed);
  its ``multilabel_ranking_average_precision`` loops over the rows in Python
  (several syncs per row), so it runs on the first ``--tm-lrap-samples`` rows,
  one timed call, against ours on the same rows (an extra line). The copy of
  the scores and ``y_true`` (5 N L bytes) is printed beside them.

Times are CUDA-event times on the current stream around ``--steps`` calls
after a warm-up call, divided by the steps (as bench/gpu_inloop.py's
``timed``), and the host time of issuing them. Checks (``agree``): the
threshold numbers against counts taken here with torch on the device (per
label tp, fp, fn, tn; per row |true & pred|, |true|, |pred|, wrong labels),
the formulas applied in float64 on the host, rtol 1e-9, the confusion
matrices exactly; the ranking numbers against the ``numpy`` backend (checked
against scikit-learn by bench/cpu_multilabel.py and the tests) on host copies,
rtol 1e-9, ROC AUC and AP against torchmetrics only. ``tm agree``: ours vs
torchmetrics (float32) within rtol 1e-4 where it defines the same number: not
its ranking loss (tied scores ranked by ``argsort`` order; scikit-learn counts
a tied (relevant, irrelevant) pair as mis-ordered). Free GPU memory is checked
before each case and torchmetrics call (skipped with a note when short).

Targets (project issue), printed PASS/MISS from the measured numbers:
the threshold report in one pass (``MultilabelMetrics``) at N = 1e8, L = 10
at >= 75% of copy bandwidth; LRAP + ranking loss + coverage error at
N = 1e6, L = 100, float32, <= 2 ms (their GPU times summed).

``--quick`` is a small smoke run (1e6x10 report, 1e5x100 ranking, 2 steps).
``--write-results`` writes ``bench/results/<date>-<gpu>-multilabel.json`` and
``.md`` (the output exactly as printed). Exit status: 0 when every check
agrees and every one of our calls ran, 1 otherwise, 2 when no GPU, torch on
CUDA or ``cuda`` backend is available.
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
    case_shape,
    count,
    fmt,
    fmt_n,
    gpu_environment,
    guarded,
    load_gpu,
    load_torch,
    print_notes,
    print_targets,
    slug,
    stderr_progress,
    target_verdicts,
    to_numpy,
    write_outputs,
)

import metrics_gpu as mg
from metrics_gpu.backends.selection import get_backend_implementation

DEFAULT_REPORT_CASES = ((10**8, 10),)
DEFAULT_RANKING_CASES = ((10**6, 100),)
QUICK_REPORT_CASES = ((10**6, 10),)
QUICK_RANKING_CASES = ((10**5, 100),)
DEFAULT_STEPS, QUICK_STEPS = 3, 2
DEFAULT_TM_LRAP_SAMPLES, QUICK_TM_LRAP_SAMPLES = 5000, 500

PREVALENCE = (0.02, 0.4)   # label j is relevant with probability p_j ~ U[0.02, 0.4)
SIGNAL, OFFSET = 2.5, -1.5  # score logit: N(0, 1) + SIGNAL * y + OFFSET
TIE_DECIMALS = 2           # scores rounded to 0.01: tied scores within every row
THRESHOLD = 0.5            # y_pred = scores >= THRESHOLD

TARGET_RANKING_MS = 2.0            # LRAP + ranking loss + coverage, summed GPU time
TARGET_RANKING_CASE = (10**6, 100)  # ... at this (N, L), float32 scores
TARGET_REPORT_FRACTION = 0.75       # the threshold report in one pass, of copy bandwidth
TARGET_REPORT_CASE = (10**8, 10)    # ... at this (N, L)
ONE_PASS_ROW = "MultilabelMetrics: the report in one pass"
# What the one-pass row returns, in order (MultilabelReport keys; reference_values' "stream").
ONE_PASS_KEYS = ("subset_accuracy", "hamming_loss", "precision_micro", "recall_micro",
                 "f1_micro", "precision_macro", "recall_macro", "f1_macro",
                 "precision_samples", "recall_samples", "f1_samples")

RTOL_REFERENCE = 1e-9      # ours vs the float64 reference / the numpy backend
RTOL_TORCHMETRICS = 1e-4   # ours vs torchmetrics' float32 results

GENERATION_ELEMENTS = 1 << 26  # scores drawn at a time (a 256 MB float32 chunk)
REFERENCE_ELEMENTS = 1 << 26   # indicators counted at a time by the reference
MEMORY_MARGIN = 2 << 30        # free bytes left over after a case's or call's estimate
OURS_BYTES_PER_ELEMENT = 6     # our threshold calls' (N, L) temporaries (bool masks)
TM_BYTES_PER_ELEMENT = 24      # torchmetrics' multilabel_confusion_matrix: int64 bins, twice
COPY_CONVENTION = ("copy GB/s = 2 x bytes / time (read + write); ours GB/s = input bytes read / "
                   "time; 'of copy' = ours GB/s / copy GB/s")

REPORT_ROW = "threshold report: the 7 calls"
RANKING_ROW = "LRAP + ranking loss + coverage"
ONE_CALL_ROW = "label_ranking_metrics: the 3 in one call"
# The single calls label_ranking_metrics returns the values of, in its order (its keys).
RANKING_PARTS = ("label_ranking_average_precision_score", "label_ranking_loss",
                 "coverage_error")

progress = stderr_progress("gpu_multilabel")


# -- set-up ------------------------------------------------------------------


class Context(GpuContext):
    """GpuContext with the device and backend of the run, the timing of gpu_inloop.py,
    and a free-memory check."""

    device = "cuda"   # where the inputs are made
    backend = "cuda"  # the metrics_gpu backend of our calls

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

    def timed(self, function, steps: int):
        """``(GPU ms, host ms, last result)`` per call: CUDA events on the current stream
        around ``steps`` calls after a warm-up call, divided by ``steps``."""
        torch = self.torch
        function()
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        host = time.perf_counter()
        for _ in range(steps):
            result = function()
        host = time.perf_counter() - host
        stop.record()
        torch.cuda.synchronize()
        return start.elapsed_time(stop) / steps, host * 1e3 / steps, result

    def measure(self, label: str, function, convert, steps: int | None = None):
        """Time ``function``; return ``(timing dict, host copy of its result)``.

        Out of memory and any other error give ``ms: None`` and a note.
        """
        if self.announce_timings:
            self.progress(f"  {label}")
        try:
            ms, host_ms, result = self.timed(function, self.args.steps if steps is None else steps)
            value = convert(result)
            del result
            return {"ms": ms, "host_ms": host_ms}, value
        except self.oom_errors:
            self.note(f"{label}: out of GPU memory, recorded null")
            return {"ms": None, "host_ms": None, "error": "out of memory"}, None
        except Exception as error:  # a missing feature of one library must not end the run
            self.note(f"{label}: {type(error).__name__}: {error}".splitlines()[0][:300])
            return {"ms": None, "host_ms": None,
                    "error": f"{type(error).__name__}: {error}"[:1000]}, None
        finally:
            self.free_memory()


# -- inputs ------------------------------------------------------------------


def make_inputs(ctx: Context, n: int, num_labels: int, seed: int, keep_scores: bool):
    """``(y_true, y_pred, scores)`` torch tensors on the device: int8 indicators, their
    thresholded float32 scores (rounded to 0.01: ties) as int8, and the scores when
    ``keep_scores`` (else None: the report case reads only the indicators)."""
    torch = ctx.torch
    generator = torch.Generator(device=ctx.device).manual_seed(seed)
    low, high = PREVALENCE
    prevalence = low + (high - low) * torch.rand(num_labels, generator=generator,
                                                 device=ctx.device)
    y_true = torch.empty((n, num_labels), dtype=torch.int8, device=ctx.device)
    y_pred = torch.empty((n, num_labels), dtype=torch.int8, device=ctx.device)
    scores = (torch.empty((n, num_labels), dtype=torch.float32, device=ctx.device)
              if keep_scores else None)
    rows = max(1, GENERATION_ELEMENTS // num_labels)
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        relevant = torch.rand((stop - start, num_labels), generator=generator,
                              device=ctx.device) < prevalence
        z = torch.randn((stop - start, num_labels), generator=generator, device=ctx.device)
        z += SIGNAL * relevant + OFFSET
        chunk = torch.round(torch.sigmoid(z), decimals=TIE_DECIMALS)
        y_true[start:stop] = relevant
        y_pred[start:stop] = chunk >= THRESHOLD
        if scores is not None:
            scores[start:stop] = chunk
        del relevant, z, chunk
    return y_true, y_pred, scores


# -- results on the host -----------------------------------------------------------


def flat(value):
    """Every number of a result as one 1-d NumPy array: a scalar, a (P, R, F, support)
    tuple (None dropped), an array or tensor, or a report dict (entries in key order)."""
    if value is None:
        return None
    if isinstance(value, dict):
        parts = [np.asarray([value[k][m] for m in sorted(value[k])], dtype=float)
                 if isinstance(value[k], dict) else np.atleast_1d(float(value[k]))
                 for k in sorted(value)]
        return np.concatenate(parts)
    if isinstance(value, (tuple, list)):
        return np.concatenate([flat(v) for v in value if v is not None])
    if hasattr(value, "detach") and value.dtype.is_floating_point:
        value = value.detach().double()
    return np.asarray(to_numpy(value)).reshape(-1)


def host(value):
    """A host copy of a result: dicts as they are, the rest as :func:`flat` arrays."""
    if value is None or isinstance(value, dict):
        return value
    return flat(value)


def same(ours, theirs, rtol: float):
    """Whether every number agrees (integers exactly); None when either is missing."""
    if ours is None or theirs is None:
        return None
    if isinstance(ours, dict) or isinstance(theirs, dict):
        if not (isinstance(ours, dict) and isinstance(theirs, dict)) or sorted(ours) != sorted(
                theirs):
            return False
        ours, theirs = flat(ours), flat(theirs)
    a, b = np.asarray(ours), np.asarray(theirs)
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "iub" and b.dtype.kind in "iub":
        return bool(np.array_equal(a, b))
    return bool(np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=0,
                            equal_nan=True))


def summary(value):
    """A number to keep in the JSON: the value, F of a (P, R, F) triple, the sum of the
    confusion matrices' cells, the samples-average F1 of a report."""
    if value is None:
        return None
    if isinstance(value, dict):
        return float(value["samples avg"]["f1-score"])
    numbers = flat(value)
    return float(numbers[2] if numbers.size == 3 else numbers.sum() if numbers.size > 1
                 else numbers[0])


def ratio(numerator, denominator):
    return None if numerator is None or denominator is None else numerator / denominator


def total(values):
    return None if not values or any(v is None for v in values) else sum(values)


# -- the threshold report ------------------------------------------------------------


def threshold_calls(ctx: Context, y_true, y_pred, num_labels: int) -> list[tuple]:
    """``(name, ours, torchmetrics or None, reference key)`` of each threshold call."""
    tm = ctx.tm if "torchmetrics" not in ctx.args.skip else None

    def prfs(average):
        def ours():
            return mg.precision_recall_fscore_support(y_true, y_pred, average=average,
                                                      zero_division=0)

        def theirs():
            options = ({"average": "micro", "multidim_average": "samplewise"}
                       if average == "samples" else {"average": average})
            parts = (tm["precision"], tm["recall"], tm["f1"])
            values = [f(y_pred, y_true, num_labels, validate_args=False, **options)
                      for f in parts]
            return tuple(v.mean() for v in values) if average == "samples" else tuple(values)

        return (f"precision_recall_fscore_support {average}", ours,
                None if tm is None else theirs, f"prf {average}")

    def tm_call(key, **options):
        if tm is None:
            return None
        return lambda: tm[key](y_pred, y_true, num_labels, validate_args=False, **options)

    return [
        ("accuracy_score (subset accuracy)", lambda: mg.accuracy_score(y_true, y_pred),
         tm_call("exact_match"), "accuracy"),
        ("hamming_loss", lambda: mg.hamming_loss(y_true, y_pred),
         tm_call("hamming", average="micro"), "hamming"),
        prfs("micro"), prfs("macro"), prfs("samples"),
        ("multilabel_confusion_matrix", lambda: mg.multilabel_confusion_matrix(y_true, y_pred),
         tm_call("confusion_matrix"), "mcm"),
        ("classification_report (output_dict)",
         lambda: mg.classification_report(y_true, y_pred, output_dict=True, zero_division=0),
         None, "report"),
        (ONE_PASS_ROW, lambda: one_pass_report(y_true, y_pred, num_labels), None, "stream"),
    ]


def one_pass_report(y_true, y_pred, num_labels: int):
    """The report's numbers from one update of a fresh MultilabelMetrics and
    its compute (one launch, one read back)."""
    metrics = mg.MultilabelMetrics(num_labels, zero_division=0.0)
    metrics.update(y_true, y_pred)
    report = metrics.compute()
    return np.array([report[key] for key in ONE_PASS_KEYS], dtype=np.float64)


def reference_counts(ctx: Context, y_true, y_pred) -> dict:
    """Per label tp, fp, fn, tn and the per-row sums (of P, R, F, exact rows), counted
    with torch on the device a chunk of rows at a time; NumPy int64 / float64."""
    torch = ctx.torch
    n, num_labels = y_true.shape
    tp = torch.zeros(num_labels, dtype=torch.int64, device=y_true.device)
    fp, fn = torch.zeros_like(tp), torch.zeros_like(tp)
    sums = torch.zeros(4, dtype=torch.float64, device=y_true.device)  # P, R, F, exact rows
    rows = max(1, REFERENCE_ELEMENTS // num_labels)

    def divide(a, b):  # zero_division=0
        return torch.where(b > 0, a / b.clamp(min=1), torch.zeros_like(a))

    for start in range(0, n, rows):
        t, p = y_true[start:start + rows].bool(), y_pred[start:start + rows].bool()
        both = t & p
        tp += both.sum(0)
        fp += (p & ~t).sum(0)
        fn += (t & ~p).sum(0)
        row_tp = both.sum(1, dtype=torch.float64)
        row_true = t.sum(1, dtype=torch.float64)
        row_pred = p.sum(1, dtype=torch.float64)
        exact = (t == p).all(1)
        del t, p, both
        sums += torch.stack([divide(row_tp, row_pred).sum(), divide(row_tp, row_true).sum(),
                             divide(2 * row_tp, row_true + row_pred).sum(),
                             exact.sum(dtype=torch.float64)])
    tp, fp, fn = (to_numpy(a).astype(np.int64) for a in (tp, fp, fn))
    return {"n": n, "tp": tp, "fp": fp, "fn": fn, "tn": n - tp - fp - fn,
            "row_sums": to_numpy(sums)}


def reference_values(counts: dict) -> dict:
    """scikit-learn's formulas (zero_division=0, F from counts) over the counts."""
    n, tp, fp, fn, tn = (counts[k] for k in ("n", "tp", "fp", "fn", "tn"))
    num_labels = tp.shape[0]

    def divide(a, b):
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        return np.divide(a, b, out=np.zeros_like(a), where=b > 0)

    precision, recall = divide(tp, tp + fp), divide(tp, tp + fn)
    f1 = divide(2 * tp, 2 * tp + fp + fn)
    support = tp + fn
    micro = (divide(tp.sum(), tp.sum() + fp.sum()), divide(tp.sum(), tp.sum() + fn.sum()),
             divide(2 * tp.sum(), 2 * tp.sum() + fp.sum() + fn.sum()))
    macro = (precision.mean(), recall.mean(), f1.mean())
    weighted = tuple(divide((v * support).sum(), support.sum()) for v in (precision, recall, f1))
    row_p, row_r, row_f, exact = counts["row_sums"]
    samples = (row_p / n, row_r / n, row_f / n)
    report = {str(j): {"precision": precision[j], "recall": recall[j], "f1-score": f1[j],
                       "support": float(support[j])} for j in range(num_labels)}
    for heading, values in (("micro avg", micro), ("macro avg", macro),
                            ("weighted avg", weighted), ("samples avg", samples)):
        report[heading] = {"precision": float(values[0]), "recall": float(values[1]),
                           "f1-score": float(values[2]), "support": float(support.sum())}
    return {
        "accuracy": np.array([exact / n]),
        "hamming": np.array([(fp.sum() + fn.sum()) / (n * num_labels)]),
        "prf micro": np.array(micro, dtype=np.float64),
        "prf macro": np.array(macro, dtype=np.float64),
        "prf samples": np.array(samples, dtype=np.float64),
        "mcm": np.stack([tn, fp, fn, tp], axis=1).reshape(-1),  # [[tn, fp], [fn, tp]] each
        "report": report,
        "stream": np.array([exact / n, (fp.sum() + fn.sum()) / (n * num_labels), *micro,
                            *macro, *samples], dtype=np.float64),
    }


def report_case(ctx: Context, n: int, num_labels: int) -> dict | bool:
    args = ctx.args
    name = f"N={fmt_n(n, separator='')} L={num_labels}"
    input_bytes = 2 * n * num_labels
    if not ctx.fits(f"report {name}", input_bytes * (1 + OURS_BYTES_PER_ELEMENT // 2)):
        return False
    progress(f"report {name}: making inputs")
    y_true, y_pred, _ = make_inputs(ctx, n, num_labels, args.seed + num_labels, False)
    case = {"case": name, "n": n, "labels": num_labels, "input_bytes": input_bytes,
            "rows": []}
    try:
        reference = None
        if "check" not in args.skip:
            progress(f"report {name}: reference counts")
            reference = reference_values(reference_counts(ctx, y_true, y_pred))
            ctx.free_memory()
        for label, ours, theirs, key in threshold_calls(ctx, y_true, y_pred, num_labels):
            with mg.use_backend(ctx.backend):
                timing, mine = ctx.measure(f"{name}: ours {label}", ours, host)
            if mine is None:
                ctx.failures += 1
            tm_timing, tm_value = {"ms": None}, None
            need = TM_BYTES_PER_ELEMENT * n * num_labels if key == "mcm" else input_bytes
            if theirs is not None and ctx.fits(f"{name}: torchmetrics {label}", need):
                tm_timing, tm_value = ctx.measure(f"{name}: torchmetrics {label}", theirs, flat)
            agree = None if reference is None else same(mine, reference[key], RTOL_REFERENCE)
            if agree is False:
                ctx.failures += 1
                ctx.note(f"{name} {label}: ours differs from the reference counts' value")
            tm_agree = same(flat(mine), tm_value, RTOL_TORCHMETRICS)
            if tm_agree is False:
                ctx.note(f"{name} {label}: ours differs from torchmetrics' "
                         f"(rtol {RTOL_TORCHMETRICS:g})")
            case["rows"].append({
                "function": label, "kind": "one pass" if key == "stream" else "function",
                "ours": timing,
                "torchmetrics": tm_timing, "agree": agree, "torchmetrics_agree": tm_agree,
                "tm_compared": theirs is not None,
                "ours_value": summary(mine), "torchmetrics_value": summary(tm_value)})
        case["copy"] = copy_baseline(ctx, f"{name}: copy of y_true and y_pred", y_true, y_pred)
    finally:
        y_true = y_pred = None  # frees the inputs (the lambdas above are done with them)
        ctx.free_memory()
    derive_report(case)
    return case


def copy_baseline(ctx: Context, label: str, *tensors) -> dict:
    """Device-to-device copy of ``tensors``' bytes into one buffer (the bandwidth limit);
    GB/s = 2 x bytes / time (read + write)."""
    torch = ctx.torch
    sources = [t.reshape(-1).view(torch.uint8) for t in tensors]
    size = sum(s.numel() for s in sources)
    if not ctx.fits(label, size):
        return {"bytes": size, "ms": None, "gb_per_s": None, "error": "not enough GPU memory"}
    target = torch.empty(size, dtype=torch.uint8, device=ctx.device)

    def copy():
        offset = 0
        for source in sources:
            target[offset:offset + source.numel()].copy_(source)
            offset += source.numel()

    timing, _ = ctx.measure(label, copy, lambda result: None)
    ms = timing["ms"]
    timing.update(bytes=size, gb_per_s=None if ms is None else 2 * size / (ms * 1e-3) / 1e9)
    return timing


def derive_report(case: dict) -> None:
    copy = case["copy"]
    rows = [r for r in case["rows"] if r["kind"] == "function"]
    ours = [r["ours"]["ms"] for r in rows]
    with_tm = [r for r in rows if r["tm_compared"]]
    agrees = [r["agree"] for r in rows]
    tm_agrees = [r["torchmetrics_agree"] for r in rows if r["torchmetrics_agree"] is not None]
    case["rows"].append({
        "function": REPORT_ROW, "kind": "report",
        "ours": {"ms": total(ours), "host_ms": total([r["ours"]["host_ms"] for r in rows])},
        "torchmetrics": {"ms": total([r["torchmetrics"]["ms"] for r in with_tm])},
        "ours_ms_where_torchmetrics": total([r["ours"]["ms"] for r in with_tm]),
        "agree": False if False in agrees else None if None in agrees else True,
        "torchmetrics_agree": False if False in tm_agrees else True if tm_agrees else None,
        "tm_compared": bool(with_tm)})
    for r in case["rows"]:
        ms = r["ours"]["ms"]
        r["gb_per_s"] = None if ms is None else case["input_bytes"] / (ms * 1e-3) / 1e9
        r["fraction_of_copy_bandwidth"] = ratio(r["gb_per_s"], copy["gb_per_s"])
        tm_ms = r["torchmetrics"]["ms"]
        r["speedup_vs_torchmetrics"] = ratio(tm_ms, r.get("ours_ms_where_torchmetrics", ms))


# -- the ranking metrics ---------------------------------------------------------------


def ranking_calls(ctx: Context, y_true, scores, num_labels: int) -> list[tuple]:
    """``(name, ours, torchmetrics or None, compared with torchmetrics, numpy reference)``."""
    tm = ctx.tm if "torchmetrics" not in ctx.args.skip else None

    def tm_call(key, **options):
        if tm is None:
            return None
        return lambda: tm[key](scores, y_true, num_labels, validate_args=False, **options)

    calls = [
        ("label_ranking_average_precision_score", mg.label_ranking_average_precision_score, {},
         None, True),  # torchmetrics' LRAP: the row loop, timed apart on fewer rows
        ("label_ranking_loss", mg.label_ranking_loss, {}, tm_call("ranking_loss"), False),
        ("coverage_error", mg.coverage_error, {}, tm_call("coverage"), True),
    ]
    if "auc" not in ctx.args.skip:
        calls += [
            ("roc_auc_score macro", mg.roc_auc_score, {"average": "macro"},
             tm_call("auroc", average="macro", thresholds=None), True),
            ("average_precision_score macro", mg.average_precision_score, {"average": "macro"},
             tm_call("average_precision", average="macro", thresholds=None), True),
        ]
    return calls


def ranking_case(ctx: Context, n: int, num_labels: int) -> dict | bool:
    args = ctx.args
    name = f"N={fmt_n(n, separator='')} L={num_labels} f32"
    input_bytes = 5 * n * num_labels  # float32 scores, int8 y_true
    if not ctx.fits(f"ranking {name}", 4 * input_bytes):
        return False
    progress(f"ranking {name}: making inputs")
    y_true, _, scores = make_inputs(ctx, n, num_labels, args.seed + 7 * num_labels, True)
    case = {"case": name, "n": n, "labels": num_labels, "input_bytes": input_bytes, "rows": []}
    try:
        y_host = scores_host = None
        expected_parts: dict = {}  # the numpy backend's values of RANKING_PARTS (the check)
        if "check" not in args.skip:
            y_host, scores_host = y_true.cpu(), scores.cpu()
        for label, function, options, theirs, tm_compared in ranking_calls(
                ctx, y_true, scores, num_labels):
            with mg.use_backend(ctx.backend):
                timing, mine = ctx.measure(f"{name}: ours {label}",
                                           lambda: function(y_true, scores, **options), host)
            if mine is None:
                ctx.failures += 1
            tm_timing, tm_value = {"ms": None}, None
            if theirs is not None and ctx.fits(f"{name}: torchmetrics {label}", input_bytes):
                tm_timing, tm_value = ctx.measure(f"{name}: torchmetrics {label}", theirs, flat)
            agree = None
            if scores_host is not None and label in RANKING_PARTS:
                progress(f"  {name}: {label} on the numpy backend (the check)")
                with mg.use_backend("numpy"):
                    expected = flat(function(y_host, scores_host, **options))
                expected_parts[label] = expected
                agree = same(mine, expected, RTOL_REFERENCE)
            tm_agree = same(mine, tm_value, RTOL_TORCHMETRICS) if tm_compared else None
            if agree is None and tm_agree is not None:
                agree = tm_agree  # ROC AUC, AP: checked against torchmetrics only
            if agree is False:
                ctx.failures += 1
                ctx.note(f"{name} {label}: ours differs from its check")
            if tm_agree is False:
                ctx.note(f"{name} {label}: ours differs from torchmetrics' "
                         f"(rtol {RTOL_TORCHMETRICS:g})")
            case["rows"].append({
                "function": label, "kind": "function", "rows": n, "ours": timing,
                "torchmetrics": tm_timing, "agree": agree, "torchmetrics_agree": tm_agree,
                "tm_compared": tm_compared and theirs is not None,
                "ours_value": summary(mine), "torchmetrics_value": summary(tm_value)})
        del y_host, scores_host
        case["rows"].insert(3, one_call_row(ctx, name, y_true, scores, expected_parts))
        case["rows"].append(lrap_row_loop(ctx, name, y_true, scores, num_labels))
        case["copy"] = copy_baseline(ctx, f"{name}: copy of the scores and y_true", scores,
                                     y_true)
    finally:
        y_true = scores = None
        ctx.free_memory()
    derive_ranking(case)
    return case


def one_call_row(ctx: Context, name: str, y_true, scores, expected_parts: dict) -> dict:
    """``label_ranking_metrics`` on all N rows, checked against the numpy backend's
    values of the single calls (``expected_parts``; none with ``--skip check``). Its
    torchmetrics time, the sum of its ranking loss and coverage error, is
    :func:`derive_ranking`'s."""

    def values(result):
        return np.array([float(result[part]) for part in RANKING_PARTS])

    with mg.use_backend(ctx.backend):
        timing, mine = ctx.measure(f"{name}: ours {ONE_CALL_ROW}",
                                   lambda: mg.label_ranking_metrics(y_true, scores), values)
    if mine is None:
        ctx.failures += 1
    agree = None
    if mine is not None and len(expected_parts) == len(RANKING_PARTS):
        agree = same(mine, np.concatenate([expected_parts[part] for part in RANKING_PARTS]),
                     RTOL_REFERENCE)
    if agree is False:
        ctx.failures += 1
        ctx.note(f"{name} {ONE_CALL_ROW}: ours differs from the numpy backend's three")
    return {"function": ONE_CALL_ROW, "kind": "one call", "rows": y_true.shape[0],
            "ours": timing, "torchmetrics": {"ms": None}, "agree": agree,
            "torchmetrics_agree": None, "tm_compared": False, "ours_value": None,
            "ours_values": None if mine is None else dict(zip(RANKING_PARTS, mine.tolist())),
            "torchmetrics_value": None}


def lrap_row_loop(ctx: Context, name: str, y_true, scores, num_labels: int) -> dict:
    """torchmetrics' LRAP (a Python loop over rows) on the first ``--tm-lrap-samples``
    rows, one timed call, and ours on the same rows."""
    rows = min(ctx.args.tm_lrap_samples, y_true.shape[0])
    label = f"LRAP, first {fmt_n(rows)} rows"
    head_true, head_scores = y_true[:rows], scores[:rows]
    with mg.use_backend(ctx.backend):
        timing, mine = ctx.measure(f"{name}: ours {label}",
                                   lambda: mg.label_ranking_average_precision_score(
                                       head_true, head_scores), host)
    if mine is None:
        ctx.failures += 1
    tm_timing, tm_value = {"ms": None}, None
    if ctx.tm is not None and "torchmetrics" not in ctx.args.skip:
        tm_timing, tm_value = ctx.measure(
            f"{name}: torchmetrics {label} (row loop)",
            lambda: ctx.tm["lrap"](head_scores, head_true, num_labels, validate_args=False),
            flat, steps=1)
    tm_agree = same(mine, tm_value, RTOL_TORCHMETRICS)
    if tm_agree is False:
        ctx.note(f"{name} {label}: ours differs from torchmetrics' (rtol {RTOL_TORCHMETRICS:g})")
    return {"function": label, "kind": "row loop", "rows": rows, "ours": timing,
            "torchmetrics": tm_timing, "agree": None, "torchmetrics_agree": tm_agree,
            "tm_compared": True,
            "ours_value": summary(mine), "torchmetrics_value": summary(tm_value)}


def derive_ranking(case: dict) -> None:
    parts = case["rows"][:3]  # LRAP, ranking loss, coverage on all N rows
    agrees = [r["agree"] for r in parts]
    ours_ms = total([r["ours"]["ms"] for r in parts])
    # label_ranking_metrics against torchmetrics' ranking loss + coverage error: its LRAP
    # loops over the rows (not run on all N), so the sum leaves it out.
    one_call = case["rows"][3]
    with_tm = [r for r in parts if r["torchmetrics"]["ms"] is not None]
    one_call["torchmetrics"] = {"ms": total([r["torchmetrics"]["ms"] for r in with_tm])}
    one_call["torchmetrics_parts"] = [r["function"] for r in with_tm]
    # No torchmetrics sum: its LRAP on all N rows would be a loop over a million rows.
    case["rows"].insert(3, {
        "function": RANKING_ROW, "kind": "ranking set", "rows": case["n"],
        "ours": {"ms": ours_ms, "host_ms": total([r["ours"]["host_ms"] for r in parts])},
        "ours_ms": ours_ms, "torchmetrics": {"ms": None},
        "agree": False if False in agrees else None if None in agrees else True,
        "torchmetrics_agree": None, "tm_compared": False})
    for r in case["rows"]:
        r["speedup_vs_torchmetrics"] = ratio(r["torchmetrics"]["ms"],
                                             r.get("ours_ms_where_torchmetrics", r["ours"]["ms"]))


# -- the run -------------------------------------------------------------------


def warm_up(ctx: Context) -> None:
    """One untimed call of each of ours on tiny inputs: CuPy's kernels compile (or load
    from its cache) here, not in a case's warm-up call."""
    y_true, y_pred, scores = make_inputs(ctx, 512, 10, ctx.args.seed, True)
    calls = [call for _, call, _, _ in threshold_calls(ctx, y_true, y_pred, 10)]
    calls += [lambda f=f, o=o: f(y_true, scores, **o)
              for _, f, o, _, _ in ranking_calls(ctx, y_true, scores, 10)]
    calls.append(lambda: mg.label_ranking_metrics(y_true, scores))
    with mg.use_backend(ctx.backend):
        for call in calls:
            try:
                call()
            except Exception:
                pass  # the timed call reports it
    ctx.free_memory()


def run_all(ctx: Context, results: dict) -> None:
    args = ctx.args
    progress("warm-up on tiny inputs")
    warm_up(ctx)
    if "report" not in args.skip:
        for n, num_labels in args.report_cases:
            case = guarded(ctx, f"report N={fmt_n(n)} L={num_labels}", report_case, ctx, n,
                           num_labels)
            if isinstance(case, dict):
                results["report"].append(case)
    if "ranking" not in args.skip:
        for n, num_labels in args.ranking_cases:
            case = guarded(ctx, f"ranking N={fmt_n(n)} L={num_labels}", ranking_case, ctx, n,
                           num_labels)
            if isinstance(case, dict):
                results["ranking"].append(case)


# -- output ----------------------------------------------------------------------


def tm_agree_text(r: dict) -> str:
    if not r["tm_compared"] and r["torchmetrics"]["ms"] is not None:
        return "(other def.)"
    return agree_text(r["torchmetrics_agree"])


def print_tables(out: Printer, results: dict) -> None:
    env, settings = results["environment"], results["settings"]
    out(f"GPU: {env['gpu']} ({env['gpu_memory_bytes'] / 2**30:.0f} GiB)   date: {env['date']}")
    out(f"CuPy {env['cupy']}, CUDA runtime {env['cuda_runtime']} (driver {env['cuda_driver']}), "
        f"torch {env['torch'] or '-'} (CUDA {env['torch_cuda'] or '-'}), "
        f"torchmetrics {env['torchmetrics'] or '-'}, metrics-gpu {env['metrics_gpu']} "
        f"({env['commit'] or 'no commit'})")
    out(f"times: CUDA events around {settings['steps']} calls after a warm-up call, per call "
        f"(host ms: issuing them); {COPY_CONVENTION}")
    out(f"inputs: torch CUDA tensors; y_true (N, L) int8, label j relevant w.p. p_j ~ "
        f"U[{PREVALENCE[0]}, {PREVALENCE[1]}); scores float32 sigmoid(N(0,1) + {SIGNAL} y "
        f"{OFFSET:+}) rounded to 0.01 (ties); y_pred = scores >= {THRESHOLD} (int8); "
        "zero_division=0; ours: use_backend('cuda'); tm: torchmetrics, validate_args=False")
    out(f"agree: threshold numbers vs counts taken with torch (float64 formulas, rtol "
        f"{RTOL_REFERENCE:g}, matrices exactly); LRAP, ranking loss, coverage vs the numpy "
        f"backend (rtol {RTOL_REFERENCE:g}); ROC AUC, AP vs torchmetrics; tm agree: rtol "
        f"{RTOL_TORCHMETRICS:g}, where it defines the same number ('other def.': its ranking "
        "loss ranks ties by argsort order)")
    for case in results["report"]:
        out()
        out(f"threshold report {case['case']}: y_true + y_pred = "
            f"{case['input_bytes'] / 1e9:.2f} GB; tm report = its 6 calls (no "
            "classification report), 'vs tm' against ours on those 6")
        out(f"{'call':<41}{'ours ms':>10}{'host ms':>10}{'GB/s':>8}{'of copy':>9}"
            f"{'tm ms':>10}{'vs tm':>9}  agree  tm agree")
        for r in case["rows"]:
            out(f"{r['function']:<41}{fmt(r['ours']['ms'], '.3f'):>10}"
                f"{fmt(r['ours']['host_ms'], '.3f'):>10}{fmt(r['gb_per_s'], '.0f'):>8}"
                f"{fmt(r['fraction_of_copy_bandwidth'], '.0%'):>9}"
                f"{fmt(r['torchmetrics']['ms'], '.3f'):>10}"
                f"{fmt(r['speedup_vs_torchmetrics'], '.1f', 'x'):>9}  "
                f"{agree_text(r['agree']):<7}{tm_agree_text(r)}")
        copy = case["copy"]
        out(f"copy of y_true + y_pred: {fmt(copy['ms'], '.3f', ' ms')}, "
            f"{fmt(copy['gb_per_s'], '.0f', ' GB/s')}")
    for case in results["ranking"]:
        out()
        out(f"ranking {case['case']}: scores + y_true = {case['input_bytes'] / 1e9:.2f} GB; "
            f"torchmetrics' LRAP loops over rows: timed on the first rows only (one call), "
            f"so the set has no tm time and label_ranking_metrics' tm time is its ranking "
            f"loss + coverage error")
        out(f"{'call':<41}{'rows':>8}{'ours ms':>10}{'host ms':>10}{'tm ms':>11}{'vs tm':>9}"
            f"  agree  tm agree")
        for r in case["rows"]:
            out(f"{r['function']:<41}{fmt_n(r['rows']):>8}{fmt(r['ours']['ms'], '.3f'):>10}"
                f"{fmt(r['ours']['host_ms'], '.3f'):>10}"
                f"{fmt(r['torchmetrics']['ms'], '.3f'):>11}"
                f"{fmt(r['speedup_vs_torchmetrics'], '.1f', 'x'):>9}  "
                f"{agree_text(r['agree']):<7}{tm_agree_text(r)}")
        copy = case["copy"]
        out(f"copy of scores + y_true: {fmt(copy['ms'], '.3f', ' ms')}, "
            f"{fmt(copy['gb_per_s'], '.0f', ' GB/s')}")


def evaluate_targets(results: dict) -> list[dict]:
    n, num_labels = TARGET_REPORT_CASE
    one_pass = [(case["case"], r) for case in results["report"]
                if (case["n"], case["labels"]) == TARGET_REPORT_CASE
                for r in case["rows"] if r["kind"] == "one pass"]
    verdicts = target_verdicts(
        f"threshold report in one pass >= {TARGET_REPORT_FRACTION:.0%} of copy bandwidth at "
        f"N={fmt_n(n)} L={num_labels}", one_pass, "fraction_of_copy_bandwidth",
        lambda v: v >= TARGET_REPORT_FRACTION, lambda v: fmt(v, ".0%"))
    n, num_labels = TARGET_RANKING_CASE
    chosen = [(case["case"], r) for case in results["ranking"]
              if (case["n"], case["labels"]) == TARGET_RANKING_CASE
              for r in case["rows"] if r["kind"] == "ranking set"]
    return verdicts + target_verdicts(
        f"LRAP + ranking loss + coverage <= {TARGET_RANKING_MS:g} ms at N={fmt_n(n)} "
        f"L={num_labels} float32", chosen, "ours_ms", lambda v: v <= TARGET_RANKING_MS,
        lambda v: fmt(v, ".3f", " ms"))


# -- command line ------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog=f"Targets: LRAP + ranking loss + coverage error <= {TARGET_RANKING_MS:g} ms at "
               f"N = 1e6, L = 100, float32; the threshold report in one pass >= "
               f"{TARGET_REPORT_FRACTION:.0%} of copy bandwidth at N = 1e8, L = 10.")
    parser.add_argument("--report-cases", type=case_shape, nargs="+", default=None,
                        help="(N, L) cases of the threshold report as NxL (default 1e8x10; "
                             "--quick: 1e6x10)")
    parser.add_argument("--ranking-cases", type=case_shape, nargs="+", default=None,
                        help="(N, L) cases of the ranking metrics as NxL (default 1e6x100; "
                             "--quick: 1e5x100)")
    parser.add_argument("--steps", type=count, default=None,
                        help=f"timed calls per measurement after a warm-up call (default "
                             f"{DEFAULT_STEPS}; --quick: {QUICK_STEPS})")
    parser.add_argument("--tm-lrap-samples", type=count, default=None,
                        help=f"rows of torchmetrics' row-loop LRAP (default "
                             f"{fmt_n(DEFAULT_TM_LRAP_SAMPLES)}; --quick: "
                             f"{QUICK_TM_LRAP_SAMPLES})")
    parser.add_argument("--skip", nargs="+", default=[],
                        choices=("report", "ranking", "auc", "torchmetrics", "check"),
                        help="parts not to run (check: the reference counts and the numpy "
                             "backend's values)")
    parser.add_argument("--quick", action="store_true",
                        help="small smoke run: 1e6x10 report, 1e5x100 ranking, 2 steps")
    parser.add_argument("--seed", type=int, default=0)
    add_output_options(parser, "<date>-<gpu>-multilabel")
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    if args.report_cases is None:
        args.report_cases = list(QUICK_REPORT_CASES if args.quick else DEFAULT_REPORT_CASES)
    if args.ranking_cases is None:
        args.ranking_cases = list(QUICK_RANKING_CASES if args.quick else DEFAULT_RANKING_CASES)
    if args.steps is None:
        args.steps = QUICK_STEPS if args.quick else DEFAULT_STEPS
    if args.tm_lrap_samples is None:
        args.tm_lrap_samples = QUICK_TM_LRAP_SAMPLES if args.quick else DEFAULT_TM_LRAP_SAMPLES

    cp, reason = load_gpu()
    if cp is None:
        print(f"gpu_multilabel: needs a CUDA GPU: {reason}", file=sys.stderr)
        return 2
    try:
        get_backend_implementation("cuda")
    except Exception as error:
        print(f"gpu_multilabel: the metrics_gpu 'cuda' backend cannot run: {error}",
              file=sys.stderr)
        return 2

    started = time.perf_counter()
    notes: list[str] = []
    torch, tm = load_torch(cp, notes, "nothing can be run (the inputs are torch tensors)",
                           {"exact_match": "multilabel_exact_match",
                            "hamming": "multilabel_hamming_distance",
                            "precision": "multilabel_precision",
                            "recall": "multilabel_recall", "f1": "multilabel_f1_score",
                            "confusion_matrix": "multilabel_confusion_matrix",
                            "lrap": "multilabel_ranking_average_precision",
                            "ranking_loss": "multilabel_ranking_loss",
                            "coverage": "multilabel_coverage_error",
                            "auroc": "multilabel_auroc",
                            "average_precision": "multilabel_average_precision"})
    if torch is None:
        print(f"gpu_multilabel: needs torch with CUDA: {notes[-1]}", file=sys.stderr)
        return 2
    ctx = Context(cp, torch, tm, args, notes)
    results = {
        "bench": "gpu_multilabel",
        "environment": gpu_environment(cp, torch, tm),
        "settings": {
            "report_cases": [list(c) for c in args.report_cases],
            "ranking_cases": [list(c) for c in args.ranking_cases], "steps": args.steps,
            "tm_lrap_samples": args.tm_lrap_samples, "seed": args.seed, "skip": args.skip,
            "quick": args.quick,
        },
        "conventions": {
            "time": "CUDA events on the current stream around steps calls after one warm-up "
                    "call, divided by steps; host_ms: wall time of issuing them",
            "bandwidth": COPY_CONVENTION,
            "bytes_read": "report: y_true + y_pred (2 N L bytes, int8); ranking: scores + "
                          "y_true (5 N L bytes)",
            "report": "the sum of the 7 threshold calls' times; torchmetrics: its 6 calls, "
                      "against ours on the same 6",
            "agree": f"threshold: vs counts taken with torch, float64 formulas (rtol "
                     f"{RTOL_REFERENCE:g}, matrices exactly); LRAP, ranking loss, coverage: vs "
                     f"the numpy backend (rtol {RTOL_REFERENCE:g}); ROC AUC, AP: vs "
                     f"torchmetrics (rtol {RTOL_TORCHMETRICS:g})",
            "torchmetrics_agree": f"rtol {RTOL_TORCHMETRICS:g}, not its ranking loss (ties)",
            "one_call": "label_ranking_metrics: the three in one call, checked against the "
                        "numpy backend's three; torchmetrics: its ranking loss + coverage "
                        "error (its LRAP loops over rows)",
        },
        "targets_spec": {"ranking_ms": TARGET_RANKING_MS,
                         "ranking_case": list(TARGET_RANKING_CASE)},
        "report": [], "ranking": [],
    }
    run_all(ctx, results)
    results["targets"] = evaluate_targets(results)
    results["notes"] = notes
    results["failures"] = ctx.failures
    results["wall_s"] = time.perf_counter() - started

    out = Printer()
    print_tables(out, results)
    print_targets(out, results["targets"])
    print_notes(out, notes)
    out()
    out(f"total wall time {results['wall_s']:.0f} s")

    env = results["environment"]
    write_outputs(args, argv, results, out, progress,
                  f"{env['date']}-{slug(env['gpu'], 'gpu')}-multilabel", "GPU multilabel bench",
                  f"GPU: {env['gpu']}. ")
    return 0 if ctx.failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
