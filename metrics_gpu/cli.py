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
from metrics_gpu._backend import BACKEND_NAMES, BackendUnavailableError, resolve_backend
from metrics_gpu.files import AUC_MODES, SUFFIXES, report_files, split_source
from metrics_gpu.report import label_report

FORMATS = ("text", "json", "markdown")


def _top_k(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be integers separated by commas, got {text!r}") \
            from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"must be positive integers, got {text!r}")
    return values


def _pred_holds_scores(source: str | None) -> bool:
    """``--y-pred`` naming (N, K) floating-point scores in a .npy / .npz file (read
    as ``--scores``, as the command did before it had that option)."""
    if source is None:
        return False
    path, selector = split_source(source)
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


def _command_report(args: argparse.Namespace) -> int:
    sources = {"y_true": args.y_true, "y_pred": args.y_pred, "scores": args.scores,
               "sample_weight": args.sample_weight}
    if args.scores is None and _pred_holds_scores(args.y_pred):
        sources["y_pred"], sources["scores"] = None, args.y_pred
    if sources["y_pred"] is None and sources["scores"] is None:
        raise ValueError("give --y-pred (predicted labels) or --scores (or both)")
    if args.plot is not None:
        _check_plot_directory(args.plot)
    progress, bars = _progress_bars(args.quiet)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UserWarning)
            report = report_files(
                sources, num_classes=args.num_classes, ignore_index=args.ignore_index,
                scores_are=args.scores_are, top_k=args.top_k, n_bins=args.n_bins,
                auc=args.auc, thresholds=args.thresholds, backend=args.backend,
                chunk_rows=args.chunk_size, curves=args.plot is not None, progress=progress)
            report.labels.metrics  # read back before the bars close
    finally:
        for bar in bars:
            bar.close()
    for warning in caught:  # one line each, as the errors are
        print(f"metrics-gpu: warning: {warning.message}", file=sys.stderr)
    if args.plot is not None:
        written = report.save_plots(args.plot)
    _print_report(report, args.format)
    if args.plot is not None and not args.quiet:
        print(f"metrics-gpu: wrote {len(written)} pictures to {args.plot}", file=sys.stderr)
    return 0


def _print_report(report, output_format: str) -> None:
    if output_format == "json":
        print(report.to_json(indent=2))
    elif output_format == "markdown":
        print(report.to_markdown(), end="")
    else:
        print(report.to_text(), end="")


def _check_plot_directory(directory: str) -> None:
    """--plot needs matplotlib and a directory it can write: said before any reading."""
    if importlib.util.find_spec("matplotlib") is None:
        raise ValueError("--plot needs matplotlib: pip install 'metrics-gpu[plot]'")
    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise ValueError(f"--plot {directory}: exists and is not a directory")


def synthetic_predictions(n_samples: int, num_classes: int, *, accuracy: float = 0.8,
                          seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Imbalanced labels and predictions that are right with probability ``accuracy``.

    Wrong predictions go to a neighbouring class more often than to a far
    one, so the weighted kappas differ from the plain one.
    """
    rng = np.random.default_rng(seed)
    frequencies = rng.dirichlet(np.full(num_classes, 2.0))
    y_true = rng.choice(num_classes, size=n_samples, p=frequencies).astype(np.int32)
    offsets = rng.geometric(0.5, size=n_samples).astype(np.int32)
    offsets *= rng.choice(np.array([-1, 1], dtype=np.int32), size=n_samples)
    y_pred = (y_true + offsets) % num_classes
    correct = rng.random(n_samples) < accuracy
    y_pred[correct] = y_true[correct]
    return y_true, y_pred.astype(np.int32)


def _command_demo(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    y_true, y_pred = synthetic_predictions(args.samples, args.classes, seed=args.seed)
    generated = time.perf_counter() - start
    with metrics_gpu.use_backend(args.backend):
        start = time.perf_counter()
        report = label_report(y_true, y_pred, num_classes=args.classes)
        elapsed = time.perf_counter() - start
        backend = resolve_backend(y_true, y_pred).name
    _print_report(report, args.format)
    if args.format != "json":
        print(
            f"\n{args.samples:,} predictions, {args.classes} classes: full report in "
            f"{elapsed:.3f} s ({args.samples / elapsed / 1e6:,.0f} M predictions/s, "
            f"backend {backend}; data generated in {generated:.2f} s)"
        )
    return 0


def _command_warmup(args: argparse.Namespace) -> int:
    from metrics_gpu._warmup import warmup

    print(f"metrics-gpu warmup: {warmup(args.jobs).summary()}")
    return 0


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
        f"({', '.join(SUFFIXES)}; Parquet / Arrow need the [io] extra).")
    report.add_argument("--y-true", required=True, metavar="FILE[:COLUMN]",
                        help="true class codes")
    report.add_argument("--y-pred", metavar="FILE[:COLUMN]",
                        help="predicted class codes (an (N, K) float .npy is read as --scores)")
    report.add_argument("--scores", metavar="FILE[:COLUMNS]",
                        help="(N, K) scores (a list column, or COLUMNS as a,b,c), or (N,) "
                        "scores of the positive class")
    report.add_argument("--scores-are", choices=("logits", "probabilities"), default="logits",
                        help="what --scores hold (default logits: raw scores, softmax taken); "
                        "probabilities must be in [0, 1] with rows summing to 1, checked as "
                        "they are read; logits whose every row looks like probabilities are "
                        "warned of")
    report.add_argument("--sample-weight", metavar="FILE[:COLUMN]", help="per-sample weights")
    report.add_argument("--num-classes", type=_positive_int,
                        help="K (default: the scores' width, or the classes present: one "
                        "extra pass over the label files)")
    report.add_argument("--ignore-index", type=int, help="leave out samples with this target")
    report.add_argument("--top-k", type=_top_k, default=(1, 5), metavar="K1,K2",
                        help="top-k accuracies of the scores (default 1,5; values above K "
                        "are left out)")
    report.add_argument("--n-bins", type=_positive_int, default=15,
                        help="calibration bins (default 15)")
    report.add_argument("--auc", choices=AUC_MODES, default="auto",
                        help="ROC AUC / average precision: exact (every score kept in memory), "
                        "binned (--thresholds bins, error bound printed), auto: exact when it "
                        "fits in half the free memory (default)")
    report.add_argument("--thresholds", type=_positive_int, default=1000,
                        help="bins of the binned AUC and of the curves (default 1000)")
    report.add_argument("--format", choices=FORMATS, default="text")
    report.add_argument("--plot", metavar="DIR",
                        help="write the pictures as PNG files (needs the [plot] extra)")
    report.add_argument("--backend", choices=BACKEND_NAMES,
                        help="default: METRICS_GPU_BACKEND, else auto: cuda when CuPy and a "
                        "GPU are present, else numpy")
    report.add_argument("--chunk-size", type=_positive_int, metavar="ROWS",
                        help="rows per chunk (default: up to 2^20, 64 MB per chunk)")
    report.add_argument("--quiet", action="store_true", help="no progress bar")
    report.set_defaults(run=_command_report)

    demo = commands.add_parser("demo", help="the report on generated predictions, timed")
    demo.add_argument("--samples", type=_positive_int, default=10_000_000)
    demo.add_argument("--classes", type=_positive_int, default=10)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--format", choices=FORMATS, default="text")
    demo.add_argument("--backend", choices=BACKEND_NAMES, default="auto")
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
