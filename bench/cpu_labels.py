"""CPU bench: the full label report on the numpy backend vs scikit-learn.

    python bench/cpu_labels.py [--samples 10000000] [--classes 10 1000] [--json PATH]

For each K, in one run: our full report (``label_report``: one pass, every
label metric) and our functions one by one, against the same numbers from
scikit-learn (confusion_matrix, precision_recall_fscore_support,
matthews_corrcoef, cohen_kappa_score, balanced_accuracy_score). Prints each
time (best of ``--repeat`` runs) and the ratio, and checks that the numbers
agree, and the report's read rate as a fraction of a memory copy of the same
bytes (the hardware limit on one core). Target: the full report >= 10x
faster than scikit-learn's five calls.
"""

from __future__ import annotations

import argparse
import platform
import sys

import numpy as np
from _common import best_time, write_json

import metrics_gpu as mg
from metrics_gpu.cli import synthetic_predictions

TARGET_SPEEDUP = 10.0


def bench_one(n_samples: int, num_classes: int, repeat: int, sklearn_repeat: int) -> dict:
    from sklearn import metrics as sk

    y_true, y_pred = synthetic_predictions(n_samples, num_classes, seed=num_classes)
    ours = {
        "confusion_matrix": lambda: mg.confusion_matrix(y_true, y_pred),
        "precision_recall_fscore_support": lambda: mg.precision_recall_fscore_support(
            y_true, y_pred, zero_division=0),
        "matthews_corrcoef": lambda: mg.matthews_corrcoef(y_true, y_pred),
        "cohen_kappa_score": lambda: mg.cohen_kappa_score(y_true, y_pred),
        "balanced_accuracy_score": lambda: mg.balanced_accuracy_score(y_true, y_pred),
    }
    theirs = {
        "confusion_matrix": lambda: sk.confusion_matrix(y_true, y_pred),
        "precision_recall_fscore_support": lambda: sk.precision_recall_fscore_support(
            y_true, y_pred, zero_division=0),
        "matthews_corrcoef": lambda: sk.matthews_corrcoef(y_true, y_pred),
        "cohen_kappa_score": lambda: sk.cohen_kappa_score(y_true, y_pred),
        "balanced_accuracy_score": lambda: sk.balanced_accuracy_score(y_true, y_pred),
    }
    rows = []
    for name in ours:
        our_time, our_value = best_time(ours[name], repeat)
        their_time, their_value = best_time(theirs[name], sklearn_repeat)
        agree = _agree(our_value, their_value)
        rows.append({"function": name, "ours_s": our_time, "sklearn_s": their_time,
                     "speedup": their_time / our_time, "agree": agree})
    report_time, report = best_time(
        lambda: mg.label_report(y_true, y_pred), repeat)
    sklearn_total = sum(row["sklearn_s"] for row in rows)
    # The hardware limit: copying the same bytes (both label arrays) in memory.
    source = np.concatenate([y_true.view(np.uint8), y_pred.view(np.uint8)])
    target = np.empty_like(source)
    copy_time, _ = best_time(lambda: np.copyto(target, source), repeat)
    bytes_read = int(y_true.nbytes + y_pred.nbytes)
    agree = (
        np.isclose(report.metrics["matthews_corrcoef"], sk.matthews_corrcoef(y_true, y_pred),
                   rtol=1e-12)
        and np.array_equal(report.confusion_matrix, sk.confusion_matrix(y_true, y_pred))
    )
    return {
        "n_samples": n_samples, "num_classes": num_classes, "functions": rows,
        "full_report_s": report_time, "sklearn_five_calls_s": sklearn_total,
        "full_report_speedup": sklearn_total / report_time,
        "full_report_agrees": bool(agree),
        "bytes_read": bytes_read,
        "full_report_gb_per_s": bytes_read / report_time / 1e9,
        "copy_gb_per_s": bytes_read / copy_time / 1e9,
        "fraction_of_copy_bandwidth": copy_time / report_time,
    }


def _agree(ours, theirs) -> bool:
    if isinstance(ours, tuple):
        return all(_agree(a, b) for a, b in zip(ours, theirs) if a is not None)
    return bool(np.allclose(np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float),
                            rtol=1e-12, atol=0))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000_000)
    parser.add_argument("--classes", type=int, nargs="+", default=[10, 1000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sklearn-repeat", type=int, default=1)
    parser.add_argument("--json", help="also write the results to this JSON file")
    args = parser.parse_args(argv)

    import sklearn

    results = {
        "bench": "cpu_labels", "machine": platform.machine(), "processor": platform.processor(),
        "python": platform.python_version(), "numpy": np.__version__,
        "sklearn": sklearn.__version__, "metrics_gpu": mg.__version__, "runs": [],
    }
    ok = True
    for num_classes in args.classes:
        run = bench_one(args.samples, num_classes, args.repeat, args.sklearn_repeat)
        results["runs"].append(run)
        print(f"\nN = {run['n_samples']:,}  K = {num_classes}  (int32 labels, numpy backend)")
        print(f"{'function':<34}{'ours (s)':>10}{'sklearn (s)':>13}{'speedup':>9}  agree")
        for row in run["functions"]:
            print(f"{row['function']:<34}{row['ours_s']:>10.4f}{row['sklearn_s']:>13.4f}"
                  f"{row['speedup']:>8.1f}x  {row['agree']}")
        verdict = "meets" if run["full_report_speedup"] >= TARGET_SPEEDUP else "MISSES"
        print(f"{'full report vs the 5 sklearn calls':<34}{run['full_report_s']:>10.4f}"
              f"{run['sklearn_five_calls_s']:>13.4f}{run['full_report_speedup']:>8.1f}x  "
              f"{run['full_report_agrees']}  ({verdict} the {TARGET_SPEEDUP:.0f}x target)")
        print(f"full report reads {run['full_report_gb_per_s']:.2f} GB/s = "
              f"{run['fraction_of_copy_bandwidth']:.0%} of a memory copy of the same bytes "
              f"({run['copy_gb_per_s']:.2f} GB/s)")
        ok &= run["full_report_agrees"] and all(r["agree"] for r in run["functions"])
    if args.json:
        write_json(args.json, results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
