"""Command line: ``metrics-gpu report`` on prediction files, ``metrics-gpu demo``,
``metrics-gpu warmup`` (the kernels compiled into the on-disk cache).

Built on the standard library's argparse. The report streams its files in
chunks (:mod:`metrics_gpu.files`): any size, bounded memory, a tqdm progress
bar on a terminal.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

import metrics_gpu
from metrics_gpu.backends.selection import BACKEND_NAMES, BackendUnavailableError, backend_for_host_data
from metrics_gpu._common.extras import install_hint
from metrics_gpu.files import (
    AUC_MODES,
    READERS_ENVIRONMENT,
    SUFFIXES,
    TASKS,
    FileEvaluation,
    FileProblem,
    PredictionReport,
    Source,
    detect_multilabel,
    evaluate_multilabel_files,
    report_files,
    source_files,
)
from metrics_gpu.files.evaluate import histogram_thresholds
from metrics_gpu.files.readers import read_classes_file
from metrics_gpu.intervals import BETA_METHODS
from metrics_gpu._formulas.labels import reported_top_k
from metrics_gpu._streaming.metrics import ClassificationMetrics

FORMATS = ("text", "json", "markdown", "html")
# The report's defaults where None says "not given" (options of one task only).
DEFAULT_TOP_K = (1, 5)
DEFAULT_N_BINS = 15
DEFAULT_THRESHOLDS = 1000
DEFAULT_THRESHOLD = 0.5
# Options of the multiclass report that --task multilabel refuses when given,
# with why: (option, reason).
MULTICLASS_ONLY = {
    "num_classes": ("--num-classes", "a multilabel report takes L, the labels, from the "
                    "files' columns"),
    "top_k": ("--top-k", "a multilabel report has no top-k accuracy"),
    "n_bins": ("--n-bins", "a multilabel report has no calibration bins"),
    "classes": ("--classes", "a multilabel report names its labels by the files' columns")}


def _top_k(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be integers separated by commas, got {text!r}") \
            from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"must be positive integers, got {text!r}")
    return values


def _pred_holds_scores(source: Source | None) -> bool:
    """``--y-pred`` naming (N, K) floating-point scores in .npy files (read as
    ``--scores``, as the command did before it had that option); a sharded
    ``--y-pred`` by its first file."""
    if source is None:
        return False
    try:
        path, _ = source_files(source)[0]
    except FileProblem:
        return False  # the reader says what is wrong with it
    if path.suffix != ".npy" or not path.is_file():
        return False
    try:
        with open(path, "rb") as stream:
            version = np.lib.format.read_magic(stream)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, _, dtype = read_header(stream)
    except (ValueError, OSError, EOFError):
        return False  # the reader says what is wrong with it
    return len(shape) == 2 and shape[1] > 1 and dtype.kind == "f"


def _progress_bars(quiet: bool):
    """Progress bars on stderr (rows, rows/s, ETA) when it is a terminal."""
    bars: list[Any] = []  # tqdm bars
    if quiet or not sys.stderr.isatty():
        return None, bars
    from tqdm import tqdm

    def progress(description: str, total: int | None):
        bar = tqdm(total=total, desc=description, unit="rows", unit_scale=True,
                   file=sys.stderr, leave=False, dynamic_ncols=True)
        bars.append(bar)
        return bar.update

    return progress, bars


def _source(values: list[str] | None) -> Source | None:
    """An input option's values: one source (a file, a directory, a glob), or
    the list of several given after the option (shards, in that order)."""
    if values is None:
        return None
    return values[0] if len(values) == 1 else list(values)


def _command_report(args: argparse.Namespace) -> int:
    sources: dict[str, Source | None] = {
        "y_true": _source(args.y_true), "y_pred": _source(args.y_pred),
        "scores": _source(args.scores), "sample_weight": _source(args.sample_weight)}
    task, detected = args.task, None
    if task is None:
        detected = detect_multilabel(sources)
        task = "multilabel" if detected else "multiclass"
    if task == "multilabel":
        return _command_multilabel_report(args, sources, detected)
    if args.threshold is not None:
        raise ValueError("--threshold is for --task multilabel (multiclass labels are the "
                         "argmax of the scores)")
    _check_interval_method(args, args.interval_method or "percentile")
    sources["groups"] = _source(args.groups)
    scores_option = "--scores"
    if args.scores is None and _pred_holds_scores(sources["y_pred"]):
        # Messages name the option the user wrote.
        sources["y_pred"], sources["scores"] = None, sources["y_pred"]
        scores_option = "--y-pred"
    if sources["y_pred"] is None and sources["scores"] is None:
        raise ValueError("give --y-pred (predicted labels) or --scores (or both)")

    classes = None if args.classes is None else read_classes_file(args.classes)

    def build(progress):
        report = report_files(
            sources, num_classes=args.num_classes, classes=classes,
            ignore_index=args.ignore_index,
            scores_are=args.scores_are,
            top_k=DEFAULT_TOP_K if args.top_k is None else args.top_k,
            n_bins=args.n_bins or DEFAULT_N_BINS, auc=args.auc,
            thresholds=args.thresholds or DEFAULT_THRESHOLDS, backend=args.backend,
            chunk_rows=args.chunk_size, progress=progress,
            curves=args.plot is not None or args.format == "html",
            confidence_level=args.confidence_level,
            method=args.interval_method or "percentile",
            n_resamples=args.n_resamples, rng=args.seed, num_groups=args.num_groups,
            readers=args.readers, workers=args.workers, scores_option=scores_option)
        report.labels.metrics  # read back before the bars close
        return report

    return _run_report(args, build)


def _command_multilabel_report(args: argparse.Namespace, sources: dict[str, Source | None],
                               detected: str | None) -> int:
    """``--task multilabel`` (or files detected as such): (N, L) targets and
    predictions through :class:`metrics_gpu.MultilabelMetrics`."""
    given = [refused for name, refused in MULTICLASS_ONLY.items()
             if getattr(args, name) is not None]
    if given:
        option, reason = given[0]
        raise ValueError(f"{option} is for --task multiclass: {reason}")
    threshold = DEFAULT_THRESHOLD if args.threshold is None else args.threshold
    thresholds = args.thresholds
    if thresholds is None and sources["scores"] is not None and (
            args.plot is not None or args.format == "html"):
        thresholds = DEFAULT_THRESHOLDS  # the curves' histogram, beside exact values
    sources["groups"] = _source(args.groups)
    method = "wilson" if args.interval_method is None else args.interval_method
    if args.confidence_level is not None:
        _check_interval_method(args, method)
    return _run_report(args, lambda progress: evaluate_multilabel_files(
        sources, confidence_level=args.confidence_level, interval_method=method,
        num_groups=args.num_groups, threshold=threshold, scores_are=args.scores_are,
        thresholds=thresholds,
        auc=args.auc,
        ignore_index=args.ignore_index, backend=args.backend, chunk_rows=args.chunk_size,
        detected=detected, progress=progress, readers=args.readers, workers=args.workers))


def _run_report(args: argparse.Namespace, build) -> int:
    """What every report does around ``build(progress)``, which reads the files
    and returns the report: the checks said before any reading, the progress
    bars, the warnings as one line each, the pictures and the output."""
    if args.plot is not None:
        _check_plot_directory(args.plot)
    _check_output(args.output)
    progress, bars = _progress_bars(args.quiet)
    started = _process_seconds()  # interpreter, imports, arguments
    start = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UserWarning)
            report = build(progress)
        elapsed = time.perf_counter() - start
    finally:
        for bar in bars:
            bar.close()
    for warning in caught:  # one line each, as the errors are
        print(f"metrics-gpu: warning: {warning.message}", file=sys.stderr)
    if args.plot is not None:
        written = report.save_plots(args.plot)
    _print_report(report, args.format, args.output, quiet=args.quiet, elapsed=elapsed)
    if args.plot is not None and not args.quiet:
        print(f"metrics-gpu: wrote {len(written)} pictures to {args.plot}", file=sys.stderr)
    if args.verbose:
        print(_timing_line(report, started, elapsed, time.perf_counter() - start - elapsed),
              file=sys.stderr)
    return 0


def _process_seconds() -> float | None:
    """Seconds since this process started (Linux, from /proc; else None)."""
    try:
        with open("/proc/self/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as uptime:
            now = float(uptime.read().split()[0])
        return now - int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _timing_line(report, started: float | None, elapsed: float, output: float) -> str:
    """--verbose: where a report's time went, the fixed costs apart."""
    parts = [] if started is None else [f"start-up {started:.2f} s (interpreter, imports)"]
    evaluation = getattr(report, "evaluation", None)
    timings = dict(getattr(evaluation, "timings", {}))
    threads = {name: timings.pop(name) for name in ("readers", "workers") if name in timings}
    first = timings.pop("first chunk", None)
    for stage, seconds in timings.items():
        text = f"{stage} {seconds:.2f} s"
        if stage == "backend":
            text = f"backend {getattr(evaluation, 'backend', '')} {seconds:.2f} s"
        elif stage == "reading and updating":
            rows = getattr(evaluation, "rows", 0)
            details = [f"{rows / seconds / 1e6:.1f} M rows/s" if seconds > 0 else f"{rows} rows"]
            if first is not None:
                details.append(f"first chunk {first:.2f} s")
            if "workers" in threads:
                details.append("in this process" if threads["workers"] == 1
                               else f"{threads['workers']} worker processes")
            if "readers" in threads:
                details.append(f"{threads['readers']} reader thread"
                               + ("s" if threads["readers"] > 1 else ""))
            text += f" ({'; '.join(details)})"
        parts.append(text)
    if not timings:
        parts.append(f"reading and computing {elapsed:.2f} s")
    parts.append(f"metrics and output {output:.2f} s")
    return "metrics-gpu: timing: " + ", ".join(parts)


def _print_report(report, output_format: str, output: str | None = None, *,
                  quiet: bool = False, **html_options: Any) -> None:
    """The report in ``output_format`` on stdout, or written to the file
    ``output``; ``html_options`` go to ``to_html`` (elapsed, inputs)."""
    if output_format == "json":
        text = report.to_json(indent=2) + "\n"
    elif output_format == "markdown":
        text = report.to_markdown()
    elif output_format == "html":
        text = report.to_html(**html_options)
    else:
        text = report.to_text()
    if output is None:
        sys.stdout.write(text)
        return
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as error:
        raise ValueError(f"--output {output}: {error.strerror or error}") from None
    if not quiet:
        print(f"metrics-gpu: wrote the {output_format} report to {output}", file=sys.stderr)


def _check_output(output: str | None) -> None:
    """--output names a file in an existing directory: said before any reading."""
    if output is None:
        return
    path = Path(output)
    if path.is_dir():
        raise ValueError(f"--output {output}: is a directory (name the file to write)")
    if not path.parent.is_dir():
        raise ValueError(f"--output {output}: the directory {path.parent} does not exist")


def _check_plot_directory(directory: str) -> None:
    """--plot needs matplotlib and a directory it can write: said before any reading."""
    if importlib.util.find_spec("matplotlib") is None:
        raise ValueError(f"--plot needs matplotlib: {install_hint('plot')}")
    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise ValueError(f"--plot {directory}: exists and is not a directory")


def _check_interval_method(args: argparse.Namespace, method: str) -> None:
    """The beta methods need scipy (the [stats] extra): said before any reading."""
    if (args.confidence_level is not None and method in BETA_METHODS
            and importlib.util.find_spec("scipy") is None):
        raise ValueError(f"--interval-method {method} needs scipy (the beta "
                         f"distribution's quantiles): {install_hint('stats')}")


def synthetic_predictions(n_samples: int, num_classes: int, *, accuracy: float = 0.8,
                          seed: int = 0, xp: Any = np) -> tuple[Any, Any]:
    """Imbalanced labels and predictions that are right with probability ``accuracy``.

    Wrong predictions go to a neighbouring class more often than to a far
    one, so the weighted kappas differ from the plain one. ``xp`` is the
    array module that makes them: NumPy, or CuPy to generate them on the GPU
    (the same distribution and seed, other values); int32 either way.
    """
    rng = np.random.default_rng(seed)
    frequencies = rng.dirichlet(np.full(num_classes, 2.0))
    if xp is not np:
        return _synthetic_with_random_state(xp, n_samples, frequencies, accuracy, seed)
    y_true = rng.choice(num_classes, size=n_samples, p=frequencies).astype(np.int32)
    offsets = rng.geometric(0.5, size=n_samples).astype(np.int32)
    offsets *= rng.choice(np.array([-1, 1], dtype=np.int32), size=n_samples)
    y_pred = (y_true + offsets) % num_classes
    correct = rng.random(n_samples) < accuracy
    y_pred[correct] = y_true[correct]
    return y_true, y_pred.astype(np.int32)


def _synthetic_with_random_state(xp: Any, n_samples: int, frequencies: np.ndarray,
                                 accuracy: float, seed: int) -> tuple[Any, Any]:
    """:func:`synthetic_predictions`' recipe in ``xp``'s own arrays and
    ``xp.random.RandomState`` (CuPy's: made on the GPU, nothing copied but the
    K class frequencies). NumPy runs the same lines in the tests."""
    random = xp.random.RandomState(seed)
    cdf = xp.asarray(np.cumsum(frequencies))
    y_true = xp.searchsorted(cdf, random.random_sample(n_samples), side="right")
    xp.minimum(y_true, frequencies.size - 1, out=y_true)  # a sum of K floats may end below 1
    offsets = random.geometric(0.5, size=n_samples)
    offsets *= random.randint(0, 2, size=n_samples) * 2 - 1
    y_pred = xp.remainder(y_true + offsets, frequencies.size)
    correct = random.random_sample(n_samples) < accuracy
    y_pred = xp.where(correct, y_true, y_pred)
    return y_true.astype(xp.int32), y_pred.astype(xp.int32)


def synthetic_scores(y_true: Any, y_pred: Any, num_classes: int, *, seed: int = 0,
                     xp: Any = np) -> Any:
    """(N, K) float32 logits whose argmax is ``y_pred``, with the true class
    lifted among the others: the score metrics are neither perfect nor chance.

    Each row is uniform noise on [0, 4) with +2 on the true class (so a wrong
    prediction's runner-up is often the truth: top-5 above top-1, ROC AUC
    high), then the predicted class set above the row's largest by a margin
    drawn on [0.5, 3) (confidences spread; at 10 classes the expected
    calibration error is about 0.1). CuPy's ``RandomState`` makes them on
    the GPU (nothing copied), NumPy's ``default_rng`` on the host (float32
    draws); either seeded with ``seed`` modulo 2^32.
    """
    rows = y_true.shape[0]
    if xp is np:  # float32 draws: faster than RandomState's float64
        generator = np.random.default_rng(seed % 2**32)
        scores = generator.random((rows, num_classes), dtype=np.float32)
        margin = generator.random(rows, dtype=np.float32)
    else:
        random = xp.random.RandomState(seed % 2**32)
        scores = random.random_sample((rows, num_classes)).astype(xp.float32)
        margin = random.random_sample(rows).astype(xp.float32)
    scores *= 4.0
    index = xp.arange(rows)
    scores[index, y_true] += 2.0
    margin = margin * 2.5 + 0.5
    scores[index, y_pred] = scores.max(axis=1) + margin
    return scores


# Rows generated and counted at a time: the (rows, K) scores stay small.
DEMO_CHUNK_ROWS = 1 << 20


def _demo_backend(requested: str) -> tuple[str, str | None]:
    """The backend the demo runs on, and, when ``auto`` fell back to numpy, why.

    ``auto`` is cuda when CuPy and a GPU are present (the data is then made on
    the GPU), else numpy; a named backend is used as it is.
    """
    backend = backend_for_host_data(requested)
    if requested != "auto" or backend == "cuda":
        return backend, None
    from metrics_gpu.backends.cuda import cuda_unavailable_reason

    return backend, cuda_unavailable_reason()


def _backend_line(requested: str, backend: str, fallback_reason: str | None) -> str:
    """The one line saying which backend the demo ran and why."""
    if fallback_reason is not None:
        return f"metrics-gpu demo: backend auto runs numpy here, no GPU: {fallback_reason}"
    if requested != "auto":
        return f"metrics-gpu demo: backend {backend}, named by --backend"
    return f"metrics-gpu demo: backend auto runs {backend} here: CuPy and a GPU are present"


def _array_module(backend: str) -> Any:
    """NumPy, or CuPy for the cuda backend (imported only then)."""
    if backend != "cuda":
        return np
    import cupy

    return cupy


def _wait_for(xp: Any) -> None:
    """Wait for the GPU's queued work, so that a timing holds all of it."""
    if xp is not np:
        xp.cuda.get_current_stream().synchronize()


def _demo_state(num_classes: int) -> ClassificationMetrics:
    """The score state of ``metrics-gpu report --scores`` with its defaults
    (top-k, calibration bins, the binned ranking histogram): its labels are
    the scores' argmax, so one pass gives every metric."""
    return ClassificationMetrics(
        num_classes, top_k=reported_top_k(DEFAULT_TOP_K, num_classes), n_bins=DEFAULT_N_BINS,
        thresholds=histogram_thresholds(DEFAULT_THRESHOLDS, num_classes), scores="logits")


def _command_demo(args: argparse.Namespace) -> int:
    _check_output(args.output)
    backend, fallback_reason = _demo_backend(args.backend)
    xp = _array_module(backend)
    start = time.perf_counter()
    y_true, y_pred = synthetic_predictions(args.samples, args.classes, seed=args.seed, xp=xp)
    _wait_for(xp)
    generated = time.perf_counter() - start
    elapsed = 0.0
    with metrics_gpu.use_backend(backend):
        if backend != "numpy":  # kernels compiled or loaded outside the timing
            warm = _demo_state(args.classes)
            warm.update(y_true[:1024], synthetic_scores(y_true[:1024], y_pred[:1024],
                                                        args.classes, xp=xp))
            warm.compute()
        state = _demo_state(args.classes)
        for chunk, first in enumerate(range(0, args.samples, DEMO_CHUNK_ROWS)):
            part = slice(first, first + DEMO_CHUNK_ROWS)
            start = time.perf_counter()
            scores = synthetic_scores(y_true[part], y_pred[part], args.classes,
                                      seed=args.seed + 1 + chunk, xp=xp)
            _wait_for(xp)
            generated += time.perf_counter() - start
            start = time.perf_counter()
            state.update(y_true[part], scores)
            _wait_for(xp)
            elapsed += time.perf_counter() - start
        del scores
        start = time.perf_counter()
        report = PredictionReport(FileEvaluation(
            None, state, None, None, args.samples, backend, "binned", DEMO_CHUNK_ROWS,
            scores_are="logits"))
        _wait_for(xp)
        elapsed += time.perf_counter() - start
    print(_backend_line(args.backend, backend, fallback_reason), file=sys.stderr)
    _print_report(report, args.format, args.output, elapsed=elapsed, inputs={
        "data": f"generated: {args.samples:,} predictions, {args.classes} classes "
                f"(labels and logits), seed {args.seed}"})
    if args.format not in ("json", "html") or args.output is not None:
        made_on = "the CPU" if xp is np else "the GPU"
        print(
            f"\n{args.samples:,} predictions, {args.classes} classes: full report in "
            f"{elapsed:.3f} s ({args.samples / elapsed / 1e6:,.0f} M predictions/s, "
            f"backend {backend}; data generated on {made_on} in {generated:.2f} s)"
        )
    return 0


def _command_warmup(args: argparse.Namespace) -> int:
    from metrics_gpu.backends.warmup import warmup

    print(f"metrics-gpu warmup: {warmup(args.jobs).summary()}")
    return 0


def _seed(text: str) -> int:
    value = int(text)
    if not 0 <= value < 2**31:
        raise argparse.ArgumentTypeError(f"must be an integer from 0 to 2^31 - 1, got {text}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="metrics-gpu",
        description="Classification metrics at the speed of memory.",
    )
    parser.add_argument("--version", action="version",
                        version=f"metrics-gpu {metrics_gpu.__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    report = commands.add_parser(
        "report", help="every metric of prediction files of any size, streamed in chunks",
        description="Every label metric of --y-true vs --y-pred (or the argmax of --scores) "
        "and, with --scores, the score metrics and ROC AUC / average precision, read in "
        "chunks (files larger than memory are fine). A column is PATH or PATH:NAME "
        f"({', '.join(SUFFIXES)}; Parquet / Arrow need the [io] extra); it may be "
        "sharded: PATH a directory (its files in natural order, part-2 before part-10; "
        "Hive partitions key=value/ of Parquet files, the keys selectable as NAME) or a "
        "glob ('preds/part-*.npy', quoted), or several PATHs after the option, read one "
        "after the other. With --task "
        "multilabel, (N, L) 0/1 targets vs (N, L) 0/1 --y-pred or (N, L) --scores "
        "thresholded at --threshold.")
    report.add_argument("--task", choices=TASKS,
                        help="multiclass: one column of class codes; multilabel: --y-true is "
                        "(N, L) 0/1 (a 2-D .npy, L columns of a CSV / Parquet, a list "
                        "column), --y-pred (N, L) 0/1 or --scores (N, L). Default: "
                        "multilabel when --y-true has L >= 2 columns and the predictions as "
                        "many (said in the report), else multiclass")
    report.add_argument("--y-true", required=True, nargs="+", metavar="FILE[:COLUMN]",
                        help="true classes: integer codes, or class names (a Parquet / Arrow "
                        "string or dictionary column, a CSV column whose first value is not "
                        "a number, under a header row); a file, a directory or a glob of "
                        "files, or several files (rows matched by position over the files; "
                        "columns sharded in as many files, file by file)")
    report.add_argument("--y-pred", nargs="+", metavar="FILE[:COLUMN]",
                        help="predicted classes, codes or names as --y-true's (an (N, K) "
                        "float .npy is read as --scores)")
    report.add_argument("--scores", nargs="+", metavar="FILE[:COLUMNS]",
                        help="(N, K) scores (a list column, or COLUMNS as a,b,c), or (N,) "
                        "scores of the positive class; multilabel: (N, L) scores of each label")
    report.add_argument("--scores-are", choices=("logits", "probabilities"), default="logits",
                        help="what --scores hold (default logits: raw scores, softmax taken); "
                        "probabilities must be in [0, 1] with rows summing to 1, checked as "
                        "they are read; logits of which 99%% of the rows look like "
                        "probabilities are warned of (multilabel: sigmoid per label; "
                        "probabilities in [0, 1])")
    report.add_argument("--threshold", type=float, metavar="T",
                        help="multilabel: a label is predicted where its probability (or "
                        "sigmoid of its logit) is above T (default 0.5)")
    report.add_argument("--sample-weight", nargs="+", metavar="FILE[:COLUMN]",
                        help="per-sample weights")
    report.add_argument("--num-classes", type=_positive_int,
                        help="K (default: the scores' width, or the classes present: one "
                        "extra pass over the label files); with class names, it must "
                        "equal their number")
    report.add_argument("--classes", metavar="FILE",
                        help="the class names, one a line, in code order (line 1 is class "
                        "0): labels given as names are coded by it (a name not in it is an "
                        "error; no pass to find them), codes are named by it (K = its "
                        "lines). Default for names: the names found in --y-true and "
                        "--y-pred, sorted (the order of the --scores columns)")
    report.add_argument("--ignore-index", type=int,
                        help="leave out samples with this target (multilabel: the cells "
                        "with this target; not 0 or 1)")
    report.add_argument("--top-k", type=_top_k, metavar="K1,K2",
                        help="top-k accuracies of the scores (default 1,5; values >= K "
                        "are left out: 1 whatever the scores)")
    report.add_argument("--n-bins", type=_positive_int,
                        help="calibration bins (default 15)")
    report.add_argument("--auc", choices=AUC_MODES, default="auto",
                        help="ROC AUC / average precision: exact (every score kept in memory), "
                        "binned (--thresholds bins, error bound printed), auto: exact when it "
                        "fits in half the free memory (default)")
    report.add_argument("--thresholds", type=_positive_int,
                        help="bins of the binned AUC and of the curves (default 1000); "
                        "multilabel: binned ROC AUC / AP per label with their error bounds, "
                        "and the curves, only when given (or --auc binned)")
    report.add_argument("--confidence-level", type=float, metavar="LEVEL",
                        help="give every label metric (and, with --groups, every group's "
                        "value and each minus the overall; not the difference, whose "
                        "bootstrap does not cover) a confidence interval at LEVEL, e.g. "
                        "0.95: a bootstrap of the confusion matrix, whatever the rows")
    report.add_argument("--interval-method",
                        choices=("percentile", "basic", "bca", "wilson", "clopper-pearson",
                                 "agresti-coull", "jeffreys"),
                        help="how the intervals are made (default percentile; the binomial "
                        "ones cover the metrics that are proportions; --task multilabel: "
                        "the binomial ones only, default wilson, of subset accuracy, "
                        "Hamming loss, micro and per-label precision and recall)")
    report.add_argument("--n-resamples", type=_positive_int, metavar="B",
                        help="bootstrap replicates (default 9999)")
    report.add_argument("--seed", type=int, help="the bootstrap's seed (default: drawn, and "
                        "printed with the intervals)")
    report.add_argument("--groups", nargs="+", metavar="FILE[:COLUMN]",
                        help="one group per row: integer codes 0..G-1, or categories (strings, "
                        "Parquet / Arrow dictionaries, other numbers; named by their values, "
                        "in sorted order): every label metric per group, with min, max, "
                        "difference and ratio")
    report.add_argument("--num-groups", type=_positive_int, metavar="G",
                        help="G of integer codes (default: the largest group code + 1, or the "
                        "categories found: one extra pass)")
    report.add_argument("--format", choices=FORMATS, default="text",
                        help="text (default), json (strict JSON: an undefined metric, NaN, "
                        "is null; with a descriptions table of the names), markdown, or "
                        "html: one self-contained "
                        "page (inline CSS, pictures embedded; pictures need the [plot] "
                        "extra), e.g. --format html --output report.html")
    report.add_argument("--output", metavar="PATH",
                        help="write the report to PATH instead of standard output (any "
                        "--format; html on standard output is the same page)")
    report.add_argument("--plot", metavar="DIR",
                        help="write the pictures as PNG files (needs the [plot] extra)")
    report.add_argument("--backend", choices=BACKEND_NAMES,
                        help="default: METRICS_GPU_BACKEND, else auto: cuda when CuPy and a "
                        "GPU are present, else numpy")
    report.add_argument("--chunk-size", type=_positive_int, metavar="ROWS",
                        help="rows per chunk (default: up to 2^20, 64 MB per chunk)")
    report.add_argument("--readers", type=_positive_int, metavar="N",
                        help="threads that read each chunk of a .npy file in pieces at once "
                        f"(default: {READERS_ENVIRONMENT}, else one per core up to 8; 1 "
                        "reads each file as one stream)")
    report.add_argument("--workers", type=_positive_int, metavar="N",
                        help="numpy backend: processes that update the metrics chunk by chunk "
                        "(default: METRICS_GPU_CPU_WORKERS, else one per core for a large "
                        "file; 1: this process alone)")
    report.add_argument("--quiet", action="store_true", help="no progress bar")
    report.add_argument("--verbose", action="store_true",
                        help="say where the time went: start-up (interpreter, imports), "
                        "backend start, opening, reading and updating (the first chunk with "
                        "any kernel compiles), ranking, output")
    report.set_defaults(run=_command_report)

    demo = commands.add_parser(
        "demo", help="the full report (label, score and ranking metrics, calibration) on "
        "generated labels and logits, in one pass, timed",
        description="The full report of `metrics-gpu report --scores` (label metrics of the "
        "scores' argmax, cross-entropy, Brier, calibration, top-k, binned ROC AUC and "
        "average precision with their error bounds) on generated imbalanced labels and "
        "logits, counted in one pass, timed; one line on standard error says which backend "
        "ran and why.")
    demo.add_argument("--samples", type=_positive_int, default=10_000_000, metavar="N",
                      help="predictions to generate (default 10,000,000; made and counted "
                      f"{DEMO_CHUNK_ROWS:,} rows at a time)")
    demo.add_argument("--classes", type=_positive_int, default=10, metavar="K",
                      help="classes (default 10): imbalanced labels, the logits (N, K)")
    demo.add_argument("--seed", type=_seed, default=0,
                      help="the generator's seed, 0 to 2^31 - 1 (default 0): the same seed, "
                      "the same data on a backend")
    demo.add_argument("--format", choices=FORMATS, default="text",
                      help="text (default), json (strict: NaN as null), markdown, or html: "
                      "one self-contained page")
    demo.add_argument("--output", metavar="PATH",
                      help="write the report to PATH instead of standard output")
    demo.add_argument("--backend", choices=BACKEND_NAMES, default="auto",
                      help="default auto: cuda, with the data generated on the GPU, when CuPy "
                      "and a GPU are present, else numpy; one line on standard error names "
                      "the backend that ran and why")
    demo.set_defaults(run=_command_demo)

    warm = commands.add_parser(
        "warmup", help="compile every kernel for this GPU into the on-disk cache",
        description="Compile every kernel instantiation for this machine's GPU into the "
        "kernel cache (METRICS_GPU_CACHE_DIR, default ~/.cache/metrics-gpu), so that no "
        "later process compiles: for Docker images and cluster nodes. Needs the cuda "
        "backend (CuPy and a GPU); instantiations already cached are skipped.")
    warm.add_argument("--jobs", type=_positive_int,
                      help="processes that compile (default: one per CPU core)")
    warm.set_defaults(run=_command_warmup)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except BrokenPipeError:  # the reader of stdout left (| head): not an error of ours
        sys.stdout = open(os.devnull, "w")
        return 0
    except (ValueError, BackendUnavailableError) as error:
        print(f"metrics-gpu: error: {error}", file=sys.stderr)
        return 2
    except MemoryError as error:
        print(f"metrics-gpu: error: not enough memory for the {args.command} "
              f"({error or 'MemoryError'})", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
