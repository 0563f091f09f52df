"""CPU bench: confidence intervals of the label report vs torchmetrics' BootStrapper and scipy.

    python bench/cpu_intervals.py [--sizes 1e5 1e6 1e7] [--classes 10]
        [--resamples 1000 10000] [--anchor-sizes 1e4 1e5 1e6] [--anchor-resamples 1000]
        [--scipy-rows 1e5] [--group-sizes 1e6 1e7] [--group-counts 10 1000]
        [--fairlearn-rows 1e6]
        [--repeat 3] [--seed 0] [--skip torchmetrics scipy] [--json PATH]

In one run, on the numpy backend, for each N of ``--sizes`` (labels: K
classes uniform, 70% predicted right, the rest uniform; int64): the plain
``label_report`` and the report with ``confidence_level=0.95`` (percentile
bootstrap, Poisson draws of the confusion matrix's cells) at each B of
``--resamples``; ``× plain`` = the report with intervals / the plain
report (the issue's target: <= 1.2 at B = 10,000, N >= 1e7).

Groups (``--group-sizes`` x ``--group-counts``, groups uniform): the report
with ``groups=`` (every label metric of every group) vs the plain report
(the issue's target on a GPU: <= 1.2x at G K^2 <= 65,536), and fairlearn's
``MetricFrame`` of accuracy, macro F1, MCC and balanced accuracy (the same
values; at N <= ``--fairlearn-rows``; target >= 50x on the CPU).

Against the anchors, on the first N of ``--anchor-sizes`` rows, at B =
``--anchor-resamples`` (they cost O(N B)): torchmetrics'
``BootStrapper(MulticlassF1Score(K, average="macro"), num_bootstraps=B,
sampling_strategy="poisson")`` fed the batch as torch CPU tensors (one
update, one compute: its mean and std; no interval), and
``scipy.stats.bootstrap`` (paired, vectorised macro F1 over the resampled
rows, percentile and BCa; at N <= ``--scipy-rows``: its N x B resamples do
not fit in memory beyond, and its BCa jackknife is quadratic, run at N <=
2e4 only); ours at the same N and B gives every metric's
interval. Times are wall times (best of ``--repeat``, anchors once),
speedup = theirs / ours. The 1-minute load average is printed first and last.
"""

from __future__ import annotations

import argparse
import json
import os
import numpy as np
from _common import best_time, interval_ratio_line

import metrics_gpu as mg


def best(function, repeat):
    """Best wall seconds of ``repeat`` calls."""
    return best_time(function, repeat)[0]


def labels(n, k, seed):
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, k, n)
    y_pred = np.where(rng.random(n) < 0.7, y_true, rng.integers(0, k, n))
    return y_true, y_pred


def macro_f1(k):
    def statistic(t, p, axis=-1):
        scores = []
        for c in range(k):
            tp = ((t == c) & (p == c)).sum(axis=axis)
            scores.append(2 * tp / np.maximum((t == c).sum(axis=axis) + (p == c).sum(axis=axis), 1))
        return np.mean(scores, axis=0)
    return statistic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e5, 1e6, 1e7])
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--resamples", nargs="+", type=int, default=[1000, 10000])
    parser.add_argument("--anchor-sizes", nargs="+", type=float, default=[1e4, 1e5, 1e6])
    parser.add_argument("--anchor-resamples", type=int, default=1000)
    parser.add_argument("--scipy-rows", type=float, default=1e5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--group-sizes", nargs="+", type=float, default=[1e6, 1e7])
    parser.add_argument("--group-counts", nargs="+", type=int, default=[10, 1000])
    parser.add_argument("--fairlearn-rows", type=float, default=1e6)
    parser.add_argument("--skip", nargs="*", default=[],
                        choices=["torchmetrics", "scipy", "fairlearn"])
    parser.add_argument("--json")
    args = parser.parse_args()
    k = args.classes
    print(f"load average (1 min) at start: {os.getloadavg()[0]:.1f}")
    rows = []
    with mg.use_backend("numpy"):
        mg.label_report(*labels(100, k, 0), confidence_level=0.95, n_resamples=10, rng=0)
        print(f"\nthe report with intervals vs without (numpy backend, K = {k}, percentile)")
        print(f"{'N':>10} {'plain':>10} " + " ".join(f"{f'B={b}':>12} {'× plain':>8}"
                                                    for b in args.resamples))
        for n in map(int, args.sizes):
            y_true, y_pred = labels(n, k, args.seed)
            plain = best(lambda: mg.label_report(y_true, y_pred).metrics, args.repeat)
            line, row = interval_ratio_line(lambda call: best(call, args.repeat),
                                            mg.label_report, y_true, y_pred, n, plain,
                                            args.resamples)
            print(line)
            rows.append(row)

        b = args.anchor_resamples
        print(f"\nagainst the anchors at B = {b} (K = {k}; ours: every metric's interval)")
        print(f"{'N':>10} {'ours':>10} {'BootStrapper':>13} {'speedup':>8} "
              f"{'scipy pct':>10} {'speedup':>8} {'scipy BCa':>10} {'speedup':>8}")
        for n in map(int, args.anchor_sizes):
            y_true, y_pred = labels(n, k, args.seed)
            ours = best(lambda: mg.label_report(y_true, y_pred, confidence_level=0.95,
                                                n_resamples=b, rng=1).intervals, args.repeat)
            ours_bca = best(lambda: mg.label_report(y_true, y_pred, confidence_level=0.95,
                                                    method="bca", n_resamples=b,
                                                    rng=1).intervals, args.repeat)
            row = {"n": n, "anchor_resamples": b, "ours_percentile_s": ours, "ours_bca_s": ours_bca}
            cells = [f"{n:>10.0e}", f"{ours * 1e3:>8.1f}ms"]
            if "torchmetrics" not in args.skip:
                import torch
                from torchmetrics.classification import MulticlassF1Score
                from torchmetrics.wrappers import BootStrapper

                torch.set_num_threads(1)
                tt, tp = torch.from_numpy(y_true), torch.from_numpy(y_pred)

                def bootstrapper():
                    metric = BootStrapper(MulticlassF1Score(k, average="macro",
                                                            validate_args=False),
                                          num_bootstraps=b, sampling_strategy="poisson")
                    metric.update(tp, tt)
                    return metric.compute()
                t = best(bootstrapper, 1)
                row["bootstrapper_s"] = t
                cells += [f"{t * 1e3:>11.1f}ms", f"{t / ours:>8.0f}"]
            else:
                cells += [f"{'-':>13}", f"{'-':>8}"]
            if "scipy" not in args.skip and n <= args.scipy_rows:
                from scipy import stats

                for method, mine in (("percentile", ours), ("BCa", ours_bca)):
                    if method == "BCa" and n > 2e4:  # quadratic in N: the jackknife
                        cells += [f"{'-':>10}", f"{'-':>8}"]
                        continue
                    t = best(lambda: stats.bootstrap((y_true, y_pred), macro_f1(k), paired=True,
                                                     vectorized=True, n_resamples=b,
                                                     method=method, rng=1), 1)
                    row[f"scipy_{method}_s"] = t
                    cells += [f"{t * 1e3:>8.1f}ms", f"{t / mine:>8.0f}"]
            print(" ".join(cells))
            rows.append(row)
        print(f"\nper-group metrics (K = {k}): the report with groups= vs the plain "
              "report, and fairlearn's MetricFrame (accuracy, macro F1, MCC, balanced "
              f"accuracy; on the first {args.fairlearn_rows:.0e} rows)")
        print(f"{'N':>10} {'G':>6} {'plain':>10} {'groups':>10} {'× plain':>8} "
              f"{'fairlearn':>11} {'speedup':>8}")
        for n in map(int, args.group_sizes):
            y_true, y_pred = labels(n, k, args.seed)
            plain = best(lambda: mg.label_report(y_true, y_pred).metrics, args.repeat)
            for g in args.group_counts:
                groups = np.random.default_rng(args.seed + 1).integers(0, g, n)
                t = best(lambda: mg.label_report(y_true, y_pred, groups=groups).groups,
                         args.repeat)
                row = {"n": n, "num_groups": g, "plain_s": plain, "groups_s": t}
                cells = [f"{n:>10.0e}", f"{g:>6}", f"{plain * 1e3:>8.1f}ms",
                         f"{t * 1e3:>8.1f}ms", f"{t / plain:>8.2f}"]
                if "fairlearn" not in args.skip and n <= args.fairlearn_rows:
                    import functools

                    from fairlearn.metrics import MetricFrame
                    from sklearn import metrics as sk

                    functions = {
                        "accuracy": sk.accuracy_score,
                        "macro_f1": functools.partial(sk.f1_score, average="macro",
                                                      labels=list(range(k)), zero_division=0),
                        "matthews_corrcoef": sk.matthews_corrcoef,
                        "balanced_accuracy": sk.balanced_accuracy_score,
                    }
                    theirs = best(lambda: MetricFrame(metrics=functions, y_true=y_true,
                                                      y_pred=y_pred,
                                                      sensitive_features=groups).by_group, 1)
                    ours = best(lambda: mg.label_report(y_true, y_pred, num_classes=k,
                                                        groups=groups).groups, args.repeat)
                    row.update(fairlearn_s=theirs, ours_vs_fairlearn_s=ours)
                    cells += [f"{theirs * 1e3:>9.0f}ms", f"{theirs / ours:>8.0f}"]
                print(" ".join(cells))
                rows.append(row)
    print(f"\nload average (1 min) at end: {os.getloadavg()[0]:.1f}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"classes": k, "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main()
