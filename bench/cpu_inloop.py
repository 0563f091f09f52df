"""CPU bench: in-loop validation with the numpy backend vs torchmetrics on the CPU.

    python bench/cpu_inloop.py [--batches 256 4096] [--classes 10 1000] [--steps 20] [--json PATH]

For each (batch size N, classes K), in one run: the cost of one update of a
``ClassificationMetrics`` (label metrics, top-1/top-5 accuracy, calibration
bins, binned ROC AUC with 100 thresholds) fed float32 torch CPU tensors, and of
one update of a torchmetrics ``MetricCollection`` computing the same
(multiclass accuracy top-1 and top-5, macro F1, calibration error, binned
AUROC with 100 thresholds), then one compute of each. Prints the per-update
times (median of ``--steps``), the ratio, and checks that the accuracies
agree. Target (issue 14): >= 3x torchmetrics per update.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

from _common import git_commit, write_json

import metrics_gpu as mg

TARGET_SPEEDUP = 3.0
THRESHOLDS = 100


def per_call(function, steps: int) -> float:
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_one(n: int, k: int, steps: int) -> dict:
    import torch
    import torchmetrics
    from torchmetrics import classification as tmc

    generator = torch.Generator().manual_seed(n + k)
    y = torch.randint(0, k, (n,), generator=generator)
    logits = torch.randn(n, k, generator=generator) + 2.0 * torch.nn.functional.one_hot(y, k)

    ours = mg.ClassificationMetrics(k, top_k=(1, min(5, k)), n_bins=15, thresholds=THRESHOLDS,
                                    validate=False)
    theirs = torchmetrics.MetricCollection({
        "accuracy": tmc.MulticlassAccuracy(k, average="micro"),
        "top5": tmc.MulticlassAccuracy(k, top_k=min(5, k), average="micro"),
        "macro_f1": tmc.MulticlassF1Score(k, average="macro"),
        "ece": tmc.MulticlassCalibrationError(k, n_bins=15),
        "auroc": tmc.MulticlassAUROC(k, thresholds=THRESHOLDS),
    })
    ours.update(y, logits)  # warm-up (allocation)
    theirs.update(logits, y)
    update_ours = per_call(lambda: ours.update(y, logits), steps)
    update_theirs = per_call(lambda: theirs.update(logits, y), steps)
    start = time.perf_counter()
    report = ours.compute()
    values = {name: float(report[name]) for name in ("accuracy", "macro_f1")}
    compute_ours = time.perf_counter() - start
    start = time.perf_counter()
    reference = theirs.compute()
    compute_theirs = time.perf_counter() - start
    # Macro F1 is not compared: torchmetrics leaves out of its macro average the
    # classes with no sample and no prediction, where ours (num_classes given,
    # as scikit-learn's labels=range(K)) counts them as 0.
    checks = {"accuracy": abs(values["accuracy"] - float(reference["accuracy"])) < 1e-6}
    return {
        "batch": n, "classes": k, "update_ours_s": update_ours,
        "update_torchmetrics_s": update_theirs,
        "update_speedup": update_theirs / update_ours, "compute_ours_s": compute_ours,
        "compute_torchmetrics_s": compute_theirs, "agree": checks,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[256, 4096])
    parser.add_argument("--classes", type=int, nargs="+", default=[10, 1000])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    import torch
    import torchmetrics

    torch.set_num_threads(max(1, torch.get_num_threads()))
    commit = git_commit(dirty=False) or ""
    rows = []
    print(f"commit {commit}; {platform.processor() or platform.machine()}, "
          f"torch {torch.__version__}, torchmetrics {torchmetrics.__version__}, "
          f"{torch.get_num_threads()} threads")
    print(f"{'N':>6} {'K':>6} {'update ours':>12} {'torchmetrics':>13} {'ratio':>7} "
          f"{'compute ours':>13} {'torchmetrics':>13}  agree")
    for n in args.batches:
        for k in args.classes:
            row = bench_one(n, k, args.steps)
            rows.append(row)
            print(f"{n:>6} {k:>6} {row['update_ours_s'] * 1e6:>10.0f}us "
                  f"{row['update_torchmetrics_s'] * 1e6:>11.0f}us {row['update_speedup']:>6.1f}x "
                  f"{row['compute_ours_s'] * 1e3:>11.2f}ms "
                  f"{row['compute_torchmetrics_s'] * 1e3:>11.2f}ms"
                  f"  {all(row['agree'].values())}")
    met = all(row["update_speedup"] >= TARGET_SPEEDUP for row in rows)
    print(f"target: update >= {TARGET_SPEEDUP}x torchmetrics: {'met' if met else 'NOT met'}")
    if args.json:
        write_json(args.json, {"commit": commit, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
