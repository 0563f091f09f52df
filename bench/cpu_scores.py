"""CPU bench: the score metrics on the numpy backend vs scikit-learn.

    python bench/cpu_scores.py [--samples 1e6] [--classes 10 100] [--dtypes float64 float32]
        [--weights] [--repeat 3] [--sklearn-repeat 1] [--ovr-samples 1e5]
        [--skip ranking set] [--seed 0] [--json PATH] [--write-results]

In one run, for every K and probability dtype, on the same arrays: N (N, K)
probabilities (softmax of N(0, 1) logits rounded to 0.01, so rows hold tied
scores, with one class bumped per row), int64 targets drawn from those
probabilities, and with ``--weights`` sample weights in [0.5, 1.5):

* log_loss, top_k_accuracy_score (k=5) and brier_score_loss on the
  probabilities, hinge_loss on the logits (same dtype): ours
  (``metrics_gpu.<function>``) vs scikit-learn's (``labels=range(K)``);
* the set computed together: ours is one ``logits_report(y, probs,
  from_logits=False, top_k=(1, 5))`` call (cross-entropy, accuracy, top-k,
  Brier, calibration from one pass); scikit-learn's is the sum of its
  separate log_loss, accuracy_score(y, probs.argmax(1)),
  top_k_accuracy_score(k=5) and brier_score_loss times;
* roc_auc_score, when ``metrics_gpu._functional.ranking`` is importable (else a note):
  binary, N scores (rounded to 1e-4, so tied), and multiclass one-vs-rest
  macro at K = 10 on ``--ovr-samples`` rows (scikit-learn is slow there).

Times are wall times (``time.perf_counter``), best of ``--repeat`` runs for
ours and ``--sklearn-repeat`` for scikit-learn, after one untimed call of
every function on tiny inputs (first-call costs out); speedup = scikit-learn time /
ours. ``agree`` compares the values (rtol 1e-6). Targets (project issue),
printed PASS/MISS from the measured numbers: no slower than scikit-learn on
any function (every speedup >= 1.0x), and >= 3x for the set computed together.

``--write-results`` writes ``bench/results/<date>-cpu-<family>-<n>core-scores.json``
and ``.md`` (the output exactly as printed). Exit status: 0 when every value
agrees and every call ran, 1 otherwise.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from _common import (
    Printer,
    add_output_options,
    agree_text,
    best_time,
    close,
    count,
    fmt,
    git_commit,
    print_notes,
    print_targets,
    slug,
    stderr_progress,
    target_verdicts,
    write_outputs,
)

import metrics_gpu as mg

DEFAULT_SAMPLES = 10**6
DEFAULT_CLASSES = (10, 100)
DEFAULT_OVR_SAMPLES = 10**5
OVR_CLASSES = 10
TOP_K = 5
LOGIT_BUMP = 2.0        # added to one random class per row
TIE_DECIMALS = 2        # logits rounded to 0.01: tied scores within rows
BINARY_DECIMALS = 4     # binary AUC scores rounded to 1e-4: tied scores
SAMPLE_CHUNK = 1 << 16  # rows per chunk when drawing targets

RTOL = 1e-6
TARGET_EVERY_FUNCTION = 1.0
TARGET_SET = 3.0


progress = stderr_progress("cpu_scores")


# -- environment -------------------------------------------------------------------


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def cpu_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def device_slug(model: str, cores: int) -> str:
    """``cpu-<family>-<n>core``, as the names of the existing CPU results."""
    lowered = model.lower()
    for family in ("xeon", "epyc", "ryzen", "threadripper", "core", "graviton", "neoverse",
                   "apple", "arm"):
        if family in lowered:
            break
    else:
        family = slug(platform.machine(), "cpu")
    return f"cpu-{family}-{cores}core"


def environment() -> dict:
    import sklearn

    model, cores = cpu_model(), cpu_cores()
    return {
        "cpu": model, "cores": cores, "device": device_slug(model, cores),
        "machine": platform.machine(), "python": platform.python_version(),
        "numpy": np.__version__, "sklearn": sklearn.__version__,
        "metrics_gpu": mg.__version__, "commit": git_commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
    }


# -- inputs ----------------------------------------------------------------------


def softmax_rows(z: np.ndarray) -> np.ndarray:
    """float64 softmax of each row (equal logits give bit-equal probabilities)."""
    p = z - z.max(axis=1, keepdims=True)
    np.exp(p, out=p)
    p /= p.sum(axis=1, keepdims=True)
    return p


def make_scores(n: int, k: int, seed: int):
    """float64 logits (rounded: ties), their softmax and int64 targets drawn from it."""
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((n, k))
    logits[np.arange(n), rng.integers(0, k, n)] += LOGIT_BUMP
    np.round(logits, TIE_DECIMALS, out=logits)
    probs = softmax_rows(logits)
    y = np.empty(n, dtype=np.int64)
    u = rng.random(n)
    for start in range(0, n, SAMPLE_CHUNK):  # inverse CDF, a chunk at a time
        stop = min(n, start + SAMPLE_CHUNK)
        cdf = np.cumsum(probs[start:stop], axis=1)
        y[start:stop] = np.minimum((u[start:stop, None] > cdf).sum(axis=1), k - 1)
    return logits, probs, y


def make_binary(n: int, seed: int):
    """int64 0/1 targets (30% positive) and float64 scores in (0, 1), rounded: ties."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.3).astype(np.int64)
    scores = 1.0 / (1.0 + np.exp(-(rng.standard_normal(n) + 1.2 * y)))
    return y, np.round(scores, BINARY_DECIMALS)


def make_weights(n: int, seed: int):
    return np.random.default_rng(seed).uniform(0.5, 1.5, n)


# -- timing ------------------------------------------------------------------------


class Run:
    """Timings, notes and warnings of the run."""

    def __init__(self, args) -> None:
        self.args = args
        self.notes: list[str] = []
        self.failures = 0
        self._noted: set[str] = set()

    def note(self, text: str, key: str | None = None) -> None:
        key = text if key is None else key
        if key in self._noted:
            return
        self._noted.add(key)
        self.notes.append(text)
        progress(f"note: {text}")

    def best_time(self, label: str, function, repeat: int):
        """``(best seconds, last result)``; ``(None, None)`` with a note on an error.

        Warnings raised by the call are recorded once each as notes.
        """
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                best, result = best_time(function, repeat)
        except Exception as error:
            self.failures += 1
            self.note(f"{label}: {type(error).__name__}: {error}".splitlines()[0][:300])
            return None, None
        for warning in caught:
            message = str(warning.message).splitlines()[0][:200]
            self.note(f"{label.split(':')[0]}: {warning.category.__name__}: {message}",
                      key=f"{label}|{message}")
        return best, result


def row(name: str, ours_s, sklearn_s, ours_value, sklearn_value, kind: str = "function",
        agree=None, **extra) -> dict:
    if agree is None:
        agree = close(ours_value, sklearn_value, RTOL)
    speedup = None if ours_s is None or sklearn_s is None else sklearn_s / ours_s
    return {"function": name, "kind": kind, "ours_s": ours_s, "sklearn_s": sklearn_s,
            "speedup": speedup, "agree": agree,
            "ours_value": None if ours_value is None else float(ours_value),
            "sklearn_value": None if sklearn_value is None else float(sklearn_value), **extra}


# -- the cases -----------------------------------------------------------------------


def score_section(run: Run, n: int, k: int, dtype: str, logits, probs, y, weights) -> dict:
    from sklearn import metrics as sk

    args = run.args
    labels = np.arange(k)
    short = {"float64": "f64", "float32": "f32"}[dtype]
    tag = f"K={k} {short}"
    progress(f"N={n:,} {tag}")
    rows = []
    pairs = {
        "log_loss": (
            lambda: mg.log_loss(y, probs, sample_weight=weights),
            lambda: sk.log_loss(y, probs, labels=labels, sample_weight=weights)),
        f"top_k_accuracy_score (k={TOP_K})": (
            lambda: mg.top_k_accuracy_score(y, probs, k=TOP_K, sample_weight=weights),
            lambda: sk.top_k_accuracy_score(y, probs, k=TOP_K, labels=labels,
                                            sample_weight=weights)),
        "brier_score_loss": (
            lambda: mg.brier_score_loss(y, probs, sample_weight=weights),
            lambda: sk.brier_score_loss(y, probs, labels=labels, sample_weight=weights)),
        "hinge_loss (logits)": (
            lambda: mg.hinge_loss(y, logits, sample_weight=weights),
            lambda: sk.hinge_loss(y, logits, labels=labels, sample_weight=weights)),
    }
    sklearn_values = {}
    sklearn_times = {}
    for name, (ours, theirs) in pairs.items():
        progress(f"  {name}")
        ours_s, ours_value = run.best_time(f"{name}: ours, {tag}", ours, args.repeat)
        sk_s, sk_value = run.best_time(f"{name}: sklearn, {tag}", theirs, args.sklearn_repeat)
        sklearn_values[name], sklearn_times[name] = sk_value, sk_s
        rows.append(row(name, ours_s, sk_s, ours_value, sk_value))

    if "set" not in args.skip:
        progress("  the set: logits_report vs sklearn's 4 calls")
        ours_s, report = run.best_time(
            f"logits_report: ours, {tag}",
            lambda: mg.logits_report(y, probs, from_logits=False, top_k=(1, TOP_K),
                                     sample_weight=weights),
            args.repeat)
        acc_s, acc_value = run.best_time(
            f"accuracy_score: sklearn, {tag}",
            lambda: sk.accuracy_score(y, probs.argmax(axis=1), sample_weight=weights),
            args.sklearn_repeat)
        parts = {"log_loss": ("cross_entropy", "log_loss"),
                 "accuracy": ("accuracy", None),
                 f"top_{TOP_K}": ("top_k", f"top_k_accuracy_score (k={TOP_K})"),
                 "brier": ("brier_score", "brier_score_loss")}
        theirs = {"log_loss": sklearn_values["log_loss"], "accuracy": acc_value,
                  f"top_{TOP_K}": sklearn_values[f"top_k_accuracy_score (k={TOP_K})"],
                  "brier": sklearn_values["brier_score_loss"]}
        times = [sklearn_times["log_loss"], acc_s,
                 sklearn_times[f"top_k_accuracy_score (k={TOP_K})"],
                 sklearn_times["brier_score_loss"]]
        sk_total = None if any(t is None for t in times) else sum(times)
        detail = {}
        mine = {}
        if report is not None:
            mine = {"log_loss": report.cross_entropy, "accuracy": report.accuracy,
                    f"top_{TOP_K}": report.top_k_accuracy[TOP_K], "brier": report.brier_score}
        for part in parts:
            detail[part] = close(mine.get(part), theirs[part], RTOL)
        values = list(detail.values())
        agree = False if False in values else (True if all(values) else None)
        rows.append(row("set: logits_report vs 4 sklearn calls", ours_s, sk_total,
                        None, None, kind="set", agree=agree, agree_detail=detail,
                        ours_values={p: None if v is None else float(v) for p, v in mine.items()},
                        sklearn_values={p: None if v is None else float(v)
                                        for p, v in theirs.items()},
                        sklearn_parts_s={"log_loss": times[0], "accuracy_score": times[1],
                                         "top_k_accuracy_score": times[2],
                                         "brier_score_loss": times[3]}))
    for r in rows:
        if r["agree"] is False:
            run.failures += 1
    return {"n": n, "k": k, "dtype": dtype, "weighted": weights is not None, "rows": rows}


def ranking_section(run: Run, n: int, dtype: str, weighted: bool) -> dict | None:
    """roc_auc_score rows, or None (with a note) when metrics_gpu._functional.ranking is missing."""
    try:
        from metrics_gpu._functional.ranking import roc_auc_score
    except Exception as error:  # being written: skip, do not fail
        run.note(f"roc_auc_score: skipped, metrics_gpu._functional.ranking is not importable "
                 f"({type(error).__name__}: {error})".splitlines()[0][:300], key="no-ranking")
        return None
    from sklearn import metrics as sk

    args = run.args
    short = {"float64": "f64", "float32": "f32"}[dtype]
    rows = []

    y, scores = make_binary(n, args.seed + 1)
    scores = scores.astype(dtype)
    w = make_weights(n, args.seed + 2) if weighted else None
    name = f"roc_auc_score binary N={n:,}"
    progress(f"{name} {short}")
    ours_s, ours_value = run.best_time(f"{name}: ours, {short}",
                                       lambda: roc_auc_score(y, scores, sample_weight=w),
                                       args.repeat)
    sk_s, sk_value = run.best_time(f"{name}: sklearn, {short}",
                                   lambda: sk.roc_auc_score(y, scores, sample_weight=w),
                                   args.sklearn_repeat)
    rows.append(row(name, ours_s, sk_s, ours_value, sk_value, kind="ranking"))
    del y, scores, w

    n_ovr = min(n, args.ovr_samples)
    _, probs, y = make_scores(n_ovr, OVR_CLASSES, args.seed + 3)
    probs = probs.astype(dtype)
    w = make_weights(n_ovr, args.seed + 4) if weighted else None
    name = f"roc_auc_score ovr macro K={OVR_CLASSES} N={n_ovr:,}"
    progress(f"{name} {short}")
    ours_s, ours_value = run.best_time(
        f"{name}: ours, {short}",
        lambda: roc_auc_score(y, probs, multi_class="ovr", average="macro", sample_weight=w),
        args.repeat)
    sk_s, sk_value = run.best_time(
        f"{name}: sklearn, {short}",
        lambda: sk.roc_auc_score(y, probs, multi_class="ovr", average="macro", sample_weight=w),
        args.sklearn_repeat)
    rows.append(row(name, ours_s, sk_s, ours_value, sk_value, kind="ranking"))
    for r in rows:
        if r["agree"] is False:
            run.failures += 1
    return {"n": n, "dtype": dtype, "weighted": weighted, "rows": rows}


def warm_up(run: Run) -> None:
    """One untimed call of every function on tiny inputs: first-call costs (lazy imports,
    caches) stay out of the timings, scikit-learn's too (it runs once per row)."""
    from sklearn import metrics as sk

    logits, probs, y = make_scores(200, OVR_CLASSES, run.args.seed)
    labels = np.arange(OVR_CLASSES)
    yb, sb = make_binary(200, run.args.seed)
    calls = [
        lambda: mg.log_loss(y, probs), lambda: sk.log_loss(y, probs, labels=labels),
        lambda: mg.top_k_accuracy_score(y, probs, k=TOP_K),
        lambda: sk.top_k_accuracy_score(y, probs, k=TOP_K, labels=labels),
        lambda: mg.brier_score_loss(y, probs),
        lambda: sk.brier_score_loss(y, probs, labels=labels),
        lambda: mg.hinge_loss(y, logits), lambda: sk.hinge_loss(y, logits, labels=labels),
        lambda: mg.logits_report(y, probs, from_logits=False, top_k=(1, TOP_K)),
        lambda: sk.accuracy_score(y, probs.argmax(axis=1)),
        lambda: sk.roc_auc_score(yb, sb),
        lambda: sk.roc_auc_score(y, probs, multi_class="ovr", average="macro"),
    ]
    try:
        from metrics_gpu._functional.ranking import roc_auc_score
        calls += [lambda: roc_auc_score(yb, sb),
                  lambda: roc_auc_score(y, probs, multi_class="ovr", average="macro")]
    except Exception:
        pass  # noted by the ranking section
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for call in calls:
            try:
                call()
            except Exception:
                pass  # the timed call reports it


def run_all(run: Run, results: dict) -> None:
    args = run.args
    warm_up(run)
    n = args.samples
    weights = make_weights(n, args.seed + 5) if args.weights else None
    for k in args.classes:
        progress(f"making N={n:,} K={k} scores")
        logits, probs, y = make_scores(n, k, args.seed + k)
        for dtype in args.dtypes:  # float64 first by default; float32 are casts of it
            z, p = logits.astype(dtype, copy=False), probs.astype(dtype, copy=False)
            results["sections"].append(score_section(run, n, k, dtype, z, p, y, weights))
            del z, p
        del logits, probs, y
    if "ranking" not in args.skip:
        for dtype in args.dtypes:
            section = ranking_section(run, n, dtype, args.weights)
            if section is None:
                break
            results["ranking"].append(section)


# -- output ------------------------------------------------------------------------


TABLE_HEADER = f"{'function':<40}{'ours (s)':>10}{'sklearn (s)':>13}{'speedup':>9}  agree"


def print_row(out: Printer, r: dict) -> None:
    out(f"{r['function']:<40}{fmt(r['ours_s'], '.4f'):>10}{fmt(r['sklearn_s'], '.4f'):>13}"
        f"{fmt(r['speedup'], '.2f', 'x'):>9}  {agree_text(r['agree'])}")


def print_tables(out: Printer, results: dict) -> None:
    env, settings = results["environment"], results["settings"]
    out(f"CPU: {env['cpu']} ({env['cores']} cores)   date: {env['date']}")
    out(f"Python {env['python']}, NumPy {env['numpy']}, scikit-learn {env['sklearn']}, "
        f"metrics-gpu {env['metrics_gpu']} ({env['commit'] or 'no commit'}), numpy backend")
    out(f"times: wall (time.perf_counter), best of {settings['repeat']} (ours) / "
        f"{settings['sklearn_repeat']} (scikit-learn) after a warm-up on tiny inputs; "
        f"speedup = sklearn / ours; "
        f"agree: values equal within rtol {RTOL:g}")
    out(f"inputs: softmax of N(0, 1) logits rounded to 0.01 (ties) with one class +{LOGIT_BUMP:g} "
        f"per row; int64 targets drawn from the probabilities; "
        f"{'sample weights in [0.5, 1.5)' if settings['weights'] else 'no sample weights'}")
    out("set: ours = one logits_report(y, probs, from_logits=False, top_k=(1, 5)); sklearn = "
        "log_loss + accuracy_score(argmax) + top_k_accuracy_score(k=5) + brier_score_loss "
        "(sum of their times)")
    for section in results["sections"]:
        out()
        out(f"N = {section['n']:,}  K = {section['k']}  {section['dtype']} probabilities "
            f"({section['dtype']} logits for hinge_loss), int64 targets")
        out(TABLE_HEADER)
        for r in section["rows"]:
            print_row(out, r)
    for section in results["ranking"]:
        out()
        out(f"ranking: {section['dtype']} scores, int64 targets")
        out(TABLE_HEADER)
        for r in section["rows"]:
            print_row(out, r)


def evaluate_targets(results: dict) -> list[dict]:
    rows = []
    for section in results["sections"] + results["ranking"]:
        short = {"float64": "f64", "float32": "f32"}[section["dtype"]]
        where = f"K={section['k']} {short}" if "k" in section else short
        for r in section["rows"]:
            rows.append((f"{where} {r['function']}", r))
    targets = []

    def add(text, chosen, threshold):
        targets.extend(target_verdicts(text, chosen, "speedup", lambda v: v >= threshold,
                                       lambda v: fmt(v, ".2f", "x")))

    add(f"no slower than scikit-learn on any function (speedup >= {TARGET_EVERY_FUNCTION:.1f}x)",
        [(c, r) for c, r in rows if r["kind"] in ("function", "ranking")], TARGET_EVERY_FUNCTION)
    add(f">= {TARGET_SET:.0f}x scikit-learn for the set computed together",
        [(c, r) for c, r in rows if r["kind"] == "set"], TARGET_SET)
    return targets


# -- command line --------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Targets: no slower than scikit-learn on any function; >= 3x for the set "
               "computed together (logits_report vs 4 sklearn calls).")
    parser.add_argument("--samples", type=count, default=DEFAULT_SAMPLES,
                        help="N, rows of the (N, K) scores and of the binary AUC (default 1e6)")
    parser.add_argument("--classes", type=count, nargs="+", default=list(DEFAULT_CLASSES),
                        help="K values (default 10 100)")
    parser.add_argument("--dtypes", nargs="+", choices=("float64", "float32"),
                        default=["float64", "float32"],
                        help="probability (and logit) dtypes (default float64 float32)")
    parser.add_argument("--weights", action="store_true",
                        help="pass sample weights in [0.5, 1.5) to every call")
    parser.add_argument("--repeat", type=count, default=3,
                        help="timed runs of ours, best kept (default 3)")
    parser.add_argument("--sklearn-repeat", type=count, default=1,
                        help="timed runs of scikit-learn, best kept (default 1)")
    parser.add_argument("--ovr-samples", type=count, default=DEFAULT_OVR_SAMPLES,
                        help="N of the one-vs-rest AUC at K = 10 (default 1e5; at most --samples)")
    parser.add_argument("--skip", nargs="+", default=[], choices=("ranking", "set"),
                        help="parts not to run")
    parser.add_argument("--seed", type=int, default=0)
    add_output_options(parser, "<date>-<cpu>-scores")
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    run = Run(args)
    started = time.perf_counter()
    results = {
        "bench": "cpu_scores",
        "environment": environment(),
        "settings": {"samples": args.samples, "classes": args.classes, "dtypes": args.dtypes,
                     "weights": args.weights, "repeat": args.repeat,
                     "sklearn_repeat": args.sklearn_repeat, "ovr_samples": args.ovr_samples,
                     "ovr_classes": OVR_CLASSES, "top_k": TOP_K, "skip": args.skip,
                     "seed": args.seed},
        "conventions": {
            "time": "time.perf_counter wall time, best of repeat (ours) / sklearn_repeat "
                    "(scikit-learn), after one untimed call of every function on tiny inputs",
            "speedup": "scikit-learn time / our time",
            "agree": f"numpy.isclose(ours, sklearn, rtol={RTOL:g}, atol=0); the set: every "
                     "one of log_loss, accuracy, top-5 accuracy and Brier",
            "set": "ours: one logits_report(y, probs, from_logits=False, top_k=(1, 5)); "
                   "sklearn: the sum of log_loss, accuracy_score(y, probs.argmax(1)), "
                   "top_k_accuracy_score(k=5) and brier_score_loss times",
            "inputs": "softmax of N(0,1) logits (+2 on one random class per row) rounded to "
                      "0.01; int64 targets drawn from the probabilities; sklearn gets "
                      "labels=range(K)",
        },
        "targets_spec": {"speedup_every_function": TARGET_EVERY_FUNCTION,
                         "speedup_set": TARGET_SET},
        "sections": [], "ranking": [],
    }
    run_all(run, results)
    results["targets"] = evaluate_targets(results)
    results["notes"] = run.notes
    results["failures"] = run.failures
    results["wall_s"] = time.perf_counter() - started

    out = Printer()
    print_tables(out, results)
    print_targets(out, results["targets"], case_width=58, overall=True)
    print_notes(out, run.notes)
    out()
    out(f"total wall time {results['wall_s']:.0f} s")

    env = results["environment"]
    write_outputs(args, argv, results, out, progress, f"{env['date']}-{env['device']}-scores",
                  "CPU scores bench",
                  f"Machine: {env['cpu']} ({env['cores']} cores, no GPU used), "
                  f"Python {env['python']}, NumPy {env['numpy']}, "
                  f"scikit-learn {env['sklearn']}.\n")
    return 0 if run.failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
