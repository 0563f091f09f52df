"""What the bench scripts share: the one copy of each helper two or more of them use.

* running: ``REPO`` (put first on ``sys.path`` on import, so the benches time
  this checkout's metrics_gpu), ``stderr_progress``, ``git_commit``, ``count``
  (the argparse type of sizes written as 1e6), ``best_time``;
* output: ``Printer`` (prints and keeps the lines for the .md), ``fmt``,
  ``fmt_n``, ``agree_text``, ``close``, ``target_verdicts``,
  ``print_targets``, ``print_notes``;
* results: ``plain``, ``slug``, ``write_json``, and ``add_output_options`` with
  ``write_outputs`` (--json, and --write-results: ``bench/results/<stem>.json``
  and ``.md``);
* the GPU benches: ``load_gpu``, ``load_torch``, ``gpu_environment``,
  ``print_gpu_environment``, ``GpuContext``, ``time_gpu``, ``attempt``,
  ``time_copy``, ``guarded``, ``bumped_scores``, ``to_numpy``. CuPy and
  torch are imported by the functions that need them, never here.

A script is run as ``python bench/<script>.py``, which puts bench/ on
``sys.path``: ``from _common import ...`` then works from any directory.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import metrics_gpu as mg  # noqa: E402
from metrics_gpu.backends.selection import CUDA_INSTALL_HINT  # noqa: E402

# -- running -----------------------------------------------------------------


def stderr_progress(bench: str):
    """``progress(message)`` for one bench: ``[bench] message`` on stderr, so that
    stdout holds only the results."""

    def progress(message: str) -> None:
        print(f"[{bench}] {message}", file=sys.stderr, flush=True)

    return progress


def git_commit(dirty: bool = True) -> str | None:
    """The short hash of HEAD, with ``+dirty`` when tracked files changed (``dirty``);
    None outside a checkout or without git. ``METRICS_GPU_COMMIT`` overrides it:
    a lent GPU gets the working tree with stale git metadata, so
    tools/gpu_session.sh is given the commit by the caller."""
    if os.environ.get("METRICS_GPU_COMMIT"):
        return os.environ["METRICS_GPU_COMMIT"]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                              capture_output=True, text=True, timeout=10)
        changed = "" if not dirty else subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO, capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+dirty" if changed.strip() else "")


def count(text: str) -> int:
    """A positive integer, also written as 1e6."""
    try:
        value = float(text) if any(c in text.lower() for c in ".e") else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value != int(value) or value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return int(value)


def case_shape(text: str) -> tuple[int, int]:
    """A bench case ``NxL`` (rows x labels), e.g. 1e6x100 (the multilabel benches)."""
    parts = text.lower().split("x")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"a case is NxL (e.g. 1e6x100), got {text!r}")
    n, num_labels = count(parts[0]), count(parts[1])
    if num_labels < 2:
        raise argparse.ArgumentTypeError(f"L must be >= 2 (the ranking loss), got {text!r}")
    return n, num_labels


def best_time(function, repeat: int) -> tuple[float, object]:
    """``(best wall seconds, last result)`` of ``repeat`` calls."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


# -- output ------------------------------------------------------------------


class Printer:
    """print(), and keep every line for the .md written by --write-results."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.extend(str(text).split("\n"))


def fmt(value, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def fmt_n(n: int, separator: str = ",") -> str:
    """1e9 for a power of ten, else the digits grouped by ``separator``."""
    exponent = len(str(n)) - 1
    return f"1e{exponent}" if n == 10**exponent else f"{n:,}".replace(",", separator)


def agree_text(value) -> str:
    return {True: "true", False: "FALSE", None: "-"}[value]


def close(a, b, rtol: float) -> bool | None:
    if a is None or b is None:
        return None
    return bool(np.isclose(float(a), float(b), rtol=rtol, atol=0))


def target_verdicts(text: str, chosen, key: str, passes, render) -> list[dict]:
    """One verdict per ``(case label, row)`` in ``chosen`` on ``row[key]``; NOT RUN when
    no case was measured."""
    if not chosen:
        return [{"target": text, "case": None, "measured": None, "verdict": "NOT RUN"}]
    verdicts = []
    for label, row in chosen:
        value = row[key]
        verdict = "NOT RUN" if value is None else ("PASS" if passes(value) else "MISS")
        verdicts.append({"target": text, "case": label, "measured": value,
                         "verdict": verdict, "shown": render(value)})
    return verdicts


def print_targets(out: Printer, targets: list[dict], case_width: int = 46,
                  overall: bool = False) -> None:
    """The verdicts under each target; ``overall``: the target's own verdict beside it."""
    out()
    out("targets (project issue), from the numbers above:")
    current = None
    for target in targets:
        if target["target"] != current:
            current = target["target"]
            if overall:
                verdicts = [t["verdict"] for t in targets if t["target"] == current]
                summary = ("PASS" if all(v == "PASS" for v in verdicts)
                           else "MISS" if "MISS" in verdicts else "NOT RUN")
                out(f"  {current}: {summary}")
            else:
                out(f"  {current}")
        if target["case"] is None:
            out(f"    {target['verdict']:<8}(no such case measured)")
        else:
            out(f"    {target['verdict']:<8}{target['case']:<{case_width}}{target['shown']}")


def print_notes(out: Printer, notes: list[str]) -> None:
    if notes:
        out()
        out("notes:")
        for note in notes:
            out(f"  - {note}")


# -- results -----------------------------------------------------------------


def plain(value):
    """JSON-safe copy: NumPy scalars and arrays to Python values, non-finite floats to null."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def slug(text: str, empty: str) -> str:
    """Lower-case letters and digits joined by '-', for file names; ``empty`` when none."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or empty


def write_json(path, data) -> None:
    Path(path).write_text(json.dumps(data, indent=2) + "\n")


def add_output_options(parser: argparse.ArgumentParser, stem: str) -> None:
    """--json and --write-results (served by ``write_outputs``); ``stem`` is the files'
    name as the help shows it."""
    parser.add_argument("--json", help="also write the results to this JSON file")
    parser.add_argument("--write-results", action="store_true",
                        help=f"write bench/results/{stem}.json and .md (output as printed)")


def write_outputs(args, argv: list[str], results: dict, out: Printer, progress, stem: str,
                  title: str, machine: str) -> None:
    """``--json PATH``: the results. ``--write-results``: ``bench/results/<stem>.json``, and
    ``.md``: ``# <title>, <date>``, ``machine``, the command and the output exactly as printed."""
    if args.json:
        write_json(args.json, plain(results))
    if not args.write_results:
        return
    folder = REPO / "bench" / "results"
    folder.mkdir(parents=True, exist_ok=True)
    json_path, md_path = folder / f"{stem}.json", folder / f"{stem}.md"
    write_json(json_path, plain(results))
    command = shlex.join(["python", f"bench/{results['bench']}.py", *argv])
    md_path.write_text(
        f"# {title}, {results['environment']['date']}\n\n"
        f"{machine}Command: `{command}`. Output as printed:\n\n"
        "```\n" + "\n".join(out.lines).strip("\n") + "\n```\n")
    for path in (json_path, md_path):
        progress(f"wrote {path.relative_to(REPO)}")


# -- the GPU benches: set-up ---------------------------------------------------


def load_gpu():
    """Return ``(cupy, None)``, or ``(None, reason)`` when no GPU can be used."""
    try:
        import cupy
    except Exception as error:  # ImportError, or a broken CUDA install
        return None, (f"CuPy is not importable ({type(error).__name__}: {error}); "
                      f"{CUDA_INSTALL_HINT}")
    try:
        devices = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:
        return None, f"no usable CUDA GPU ({type(error).__name__}: {error})"
    if devices < 1:
        return None, "no CUDA GPU found"
    return cupy, None


def load_torch(cp, notes: list[str], without_torch: str, functions: dict[str, str]):
    """Return ``(torch, torchmetrics_functions)``; either may be None, with a note.

    ``without_torch`` is what the note says is lost without torch on CUDA;
    ``functions`` maps keys of the returned dict to names in
    ``torchmetrics.functional.classification`` (the dict has ``version`` too).
    """
    try:
        import torch
    except Exception as error:
        notes.append(f"torch not importable ({type(error).__name__}): {without_torch}")
        return None, None
    if not torch.cuda.is_available():
        notes.append(f"torch has no CUDA here: {without_torch}")
        return None, None
    # One stream for everything, so that CUDA events bracket torch's work too.
    stream = cp.cuda.get_current_stream()
    if torch.cuda.current_stream().cuda_stream != stream.ptr:
        torch.cuda.set_stream(torch.cuda.ExternalStream(stream.ptr))
    try:
        import torchmetrics
        from torchmetrics.functional import classification
        found = {key: getattr(classification, name) for key, name in functions.items()}
    except Exception as error:
        notes.append(f"torchmetrics not importable ({type(error).__name__}): its columns are null")
        return torch, None
    return torch, {"version": torchmetrics.__version__, **found}


def gpu_environment(cp, torch, tm) -> dict:
    device = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(device.id)
    name = props["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)

    def version(number: int) -> str:
        return f"{number // 1000}.{number % 1000 // 10}"

    free, total = cp.cuda.runtime.memGetInfo()
    return {
        "gpu": name,
        "gpu_memory_bytes": int(total),
        "gpu_free_bytes_at_start": int(free),
        "cupy": cp.__version__,
        "cuda_runtime": version(cp.cuda.runtime.runtimeGetVersion()),
        "cuda_driver": version(cp.cuda.runtime.driverGetVersion()),
        "torch": None if torch is None else torch.__version__,
        "torch_cuda": None if torch is None else torch.version.cuda,
        "torchmetrics": None if tm is None else tm["version"],
        "metrics_gpu": mg.__version__,
        "commit": git_commit(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
    }


def print_gpu_environment(out: Printer, results: dict, copy_convention: str) -> None:
    env = results["environment"]
    out(f"GPU: {env['gpu']} ({env['gpu_memory_bytes'] / 2**30:.0f} GiB)   date: {env['date']}")
    out(f"CuPy {env['cupy']}, CUDA runtime {env['cuda_runtime']} (driver {env['cuda_driver']}), "
        f"torch {env['torch'] or '-'} (CUDA {env['torch_cuda'] or '-'}), "
        f"torchmetrics {env['torchmetrics'] or '-'}, metrics-gpu {env['metrics_gpu']} "
        f"({env['commit'] or 'no commit'})")
    out(f"times: CUDA events, best of {results['settings']['repeat']} after a warm-up; "
        f"{copy_convention}")


class GpuContext:
    """What every GPU case needs: CuPy, the stream, the optional libraries, the notes."""

    def __init__(self, cp, torch, tm, args, notes, progress, announce_timings=False):
        self.cp = cp
        self.torch = torch
        self.tm = tm
        self.args = args
        self.notes = notes
        self.progress = progress
        self.announce_timings = announce_timings  # a progress line before each timed call
        self.stream = cp.cuda.get_current_stream()
        oom = [cp.cuda.memory.OutOfMemoryError]
        if torch is not None:
            oom.append(torch.cuda.OutOfMemoryError)
        self.oom_errors = tuple(oom)
        self.failures = 0  # disagreements and errors of our calls
        self._noted: set[str] = set()

    def note(self, text: str, key: str | None = None) -> None:
        """Add a note for the output; one per ``key`` when a key is given."""
        if key is not None:
            if key in self._noted:
                return
            self._noted.add(key)
        self.notes.append(text)
        self.progress(f"note: {text}")

    def free_memory(self) -> None:
        self.stream.synchronize()
        self.cp.get_default_memory_pool().free_all_blocks()
        if self.torch is not None:
            self.torch.cuda.empty_cache()

    def free_bytes(self) -> int:
        self.free_memory()
        return int(self.cp.cuda.runtime.memGetInfo()[0])


# -- the GPU benches: timing ---------------------------------------------------


def time_gpu(ctx: GpuContext, function, repeat: int):
    """Best CUDA-event time in ms of ``function`` after one warm-up call."""
    cp, stream = ctx.cp, ctx.stream
    result = function()
    stream.synchronize()
    times = []
    for _ in range(repeat):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        result = function()
        end.record(stream)
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    return min(times), times, result


def attempt(ctx: GpuContext, label: str, function, convert):
    """Time ``function``; return ``(timing dict, host copy of its result)``.

    Out of memory (CuPy or torch) and any other error give ``ms: None`` and a
    note; ``convert`` turns the last result into host values after timing.
    """
    if ctx.announce_timings:
        ctx.progress(f"  {label}")
    try:
        best, times, result = time_gpu(ctx, function, ctx.args.repeat)
        host = convert(result)
        del result
        return {"ms": best, "times_ms": times}, host
    except ctx.oom_errors:
        ctx.note(f"{label}: out of GPU memory, recorded null")
        return {"ms": None, "error": "out of memory"}, None
    except Exception as error:  # a missing feature of one library must not end the run
        ctx.note(f"{label}: {type(error).__name__}: {error}".splitlines()[0][:300])
        return {"ms": None, "error": f"{type(error).__name__}: {error}"[:1000]}, None
    finally:
        ctx.free_memory()


def time_copy(ctx: GpuContext, label: str, sources) -> dict:
    """Device-to-device copy of ``sources`` (``(MemoryPointer, nbytes)`` pairs) into one buffer."""
    cp, stream = ctx.cp, ctx.stream
    total = sum(size for _, size in sources)
    target = []  # the copy's destination, dropped before returning
    try:
        target.append(cp.empty(total, dtype=cp.uint8))
    except ctx.oom_errors:
        ctx.note(f"{label}: no memory for a {total / 1e9:.1f} GB copy target, recorded null")
        return {"bytes": total, "ms": None, "gb_per_s": None, "error": "out of memory"}

    def copy():
        offset = 0
        for pointer, size in sources:
            (target[0].data + offset).copy_from_device_async(pointer, size, stream)
            offset += size

    timing, _ = attempt(ctx, label, copy, lambda result: None)
    target.clear()
    ctx.free_memory()
    ms = timing["ms"]
    timing.update(bytes=total, gb_per_s=None if ms is None else 2 * total / (ms * 1e-3) / 1e9)
    return timing


def guarded(ctx: GpuContext, label: str, function, *args):
    """``function(*args)``; an unexpected error becomes a note and a failure, not the end."""
    try:
        return function(*args)
    except Exception as error:
        ctx.failures += 1
        ctx.note(f"{label}: not measured, {type(error).__name__}: {error}".splitlines()[0][:300])
        ctx.free_memory()
        return False


# -- the GPU benches: inputs and results -----------------------------------------


def bumped_scores(ctx: GpuContext, pred, k: int, dtype: str, seed: int, bump: float,
                  chunk: int):
    """(N, K) scores: N(0, 1) plus ``bump`` on each row's ``pred`` class, made about
    ``chunk`` elements at a time, so the row argmax is mostly ``pred``.

    float32: a CuPy array. bfloat16: a torch tensor (CuPy has no bfloat16 of
    its own) filled from the same float32 values, rounded, chunk by chunk, so
    no float32 copy of the whole is held.
    """
    cp, torch = ctx.cp, ctx.torch
    n = pred.shape[0]
    random = cp.random.RandomState(seed + 1)
    if dtype == "float32":
        scores = cp.empty((n, k), dtype=cp.float32)
    else:
        scores = torch.empty((n, k), dtype=torch.bfloat16, device="cuda")
    rows = max(1, chunk // k)
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        block = random.standard_normal((stop - start, k), dtype=cp.float32)
        block[cp.arange(stop - start), pred[start:stop]] += bump
        if dtype == "float32":
            scores[start:stop] = block
        else:
            scores[start:stop].copy_(torch.from_dlpack(block))
        del block
    return scores


def to_numpy(value):
    """A NumPy copy of a torch tensor, CuPy array or host value (None stays None)."""
    if value is None:
        return None
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "detach"):  # torch
        return value.detach().cpu().numpy()
    if hasattr(value, "get") and hasattr(value, "__cuda_array_interface__"):  # CuPy
        return value.get()
    return np.asarray(value)


def interval_ratio_line(time_call, report, y_true, y_pred, n: int, plain: float,
                        resamples, digits: int = 1) -> tuple[str, dict]:
    """One line of the intervals benches (bench/cpu_intervals.py,
    bench/gpu_intervals.py): the plain report's time, then for each B of
    ``resamples`` the report with 95% percentile intervals and its ratio to
    the plain one; ``time_call(function)`` times a call. Returns the line
    and its row of numbers."""
    line = f"{n:>10.0e} {plain * 1e3:>8.{digits}f}ms "
    row = {"n": n, "plain_s": plain}
    for b in resamples:
        t = time_call(lambda: report(y_true, y_pred, confidence_level=0.95, n_resamples=b,
                                     rng=1).intervals)
        row[f"intervals_{b}_s"] = t
        line += f"{t * 1e3:>10.{digits}f}ms {t / plain:>8.2f}"
    return line, row
