"""Command line: ``metrics-gpu report`` on prediction files, ``metrics-gpu demo``.

Built on the standard library's argparse, so the command needs nothing
beyond NumPy. ``.npy`` files are memory-mapped, so a file larger than memory
is read chunk by chunk by the backend's pass.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import metrics_gpu
from metrics_gpu._backend import BACKEND_NAMES, BackendUnavailableError, resolve_backend
from metrics_gpu.report import label_report

FORMATS = ("text", "json", "markdown")


def _load_array(path: str, argument: str) -> np.ndarray:
    """The array in ``path``; every problem with the file is a ValueError naming it."""
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"{argument}: no such file {path!r}")
    if file.suffix not in (".npy", ".txt", ".csv"):
        raise ValueError(
            f"{argument}: unsupported file type {file.suffix!r} (use .npy, .txt or .csv)"
        )
    try:
        if file.suffix == ".npy":
            array = np.load(file, mmap_mode="r", allow_pickle=False)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "no data": said below
                array = np.loadtxt(file, dtype=np.int64, ndmin=1,
                                   delimiter="," if file.suffix == ".csv" else None)
    except MemoryError:
        raise ValueError(
            f"{argument}: {path!r} ({file.stat().st_size:,} bytes) does not fit in memory"
        ) from None
    except (OSError, EOFError, ValueError) as error:
        raise ValueError(f"{argument}: cannot read {path!r}: {_file_problem(file, error)}") \
            from None
    if array.size == 0:
        raise ValueError(f"{argument}: {path!r} holds no values")
    return array


def _file_problem(file: Path, error: Exception) -> str:
    """What is wrong with ``file``, in a few words, from the error its loader raised."""
    size = file.stat().st_size
    if size == 0:
        return "the file is empty"
    message = str(error)
    if file.suffix == ".npy" and not isinstance(error, PermissionError):
        with open(file, "rb") as stream:
            if stream.read(6) != b"\x93NUMPY":
                return "not a .npy file (it does not start with NumPy's magic string)"
        if isinstance(error, EOFError) or "mmap length" in message or message.startswith("EOF"):
            return f"the file is truncated ({size:,} bytes): its header or data ends early"
    return message or type(error).__name__


def _print_report(report, output_format: str) -> None:
    if output_format == "json":
        print(report.to_json(indent=2))
    elif output_format == "markdown":
        print(report.to_markdown(), end="")
    else:
        print(report.to_text(), end="")


def _command_report(args: argparse.Namespace) -> int:
    y_true = _load_array(args.y_true, "--y-true")
    y_pred = _load_array(args.y_pred, "--y-pred")
    weight = None if args.sample_weight is None else _load_array(args.sample_weight,
                                                                 "--sample-weight")
    with metrics_gpu.use_backend(args.backend):
        report = label_report(y_true, y_pred, num_classes=args.num_classes,
                              sample_weight=weight, ignore_index=args.ignore_index)
    _print_report(report, args.format)
    return 0


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

    report = commands.add_parser("report", help="every label metric of a prediction file")
    report.add_argument("--y-true", required=True, help="true class codes (.npy, .txt, .csv)")
    report.add_argument("--y-pred", required=True,
                        help="predicted class codes, or (N, K) scores (.npy)")
    report.add_argument("--sample-weight", help="per-sample weights (.npy)")
    report.add_argument("--num-classes", type=_positive_int, help="K (default: inferred)")
    report.add_argument("--ignore-index", type=int, help="leave out samples with this target")
    report.add_argument("--format", choices=FORMATS, default="text")
    report.add_argument("--backend", choices=BACKEND_NAMES, default="auto")
    report.set_defaults(run=_command_report)

    demo = commands.add_parser("demo", help="the report on generated predictions, timed")
    demo.add_argument("--samples", type=_positive_int, default=10_000_000)
    demo.add_argument("--classes", type=_positive_int, default=10)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--format", choices=FORMATS, default="text")
    demo.add_argument("--backend", choices=BACKEND_NAMES, default="auto")
    demo.set_defaults(run=_command_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, BackendUnavailableError) as error:
        print(f"metrics-gpu: error: {error}", file=sys.stderr)
        return 2
    except MemoryError as error:
        print(f"metrics-gpu: error: not enough memory for the {args.command} "
              f"({error or 'MemoryError'})", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
