"""GPU bench: the label report with confidence intervals and with groups, vs the plain report.

    python bench/gpu_intervals.py [--sizes 1e7 1e8] [--classes 10] [--resamples 1000 10000]
        [--group-classes 8] [--group-counts 10 1000] [--bootstrapper-resamples 100]
        [--bootstrapper-rows 1e6] [--repeat 3] [--json PATH]

In one run on the cuda backend, for each N of ``--sizes`` (labels: K
classes uniform, 70% predicted right, the rest uniform; int32 CuPy arrays):

* ``label_report`` (every label metric, read back) plain, and with
  ``confidence_level=0.95`` (percentile bootstrap: the matrix's non-empty
  cells drawn Poisson(count) on the device by kernels/resample.cu, the
  replicates' metrics on the host) at each B of ``--resamples``; ``× plain``
  = with intervals / plain (target: <= 1.2 at B = 10,000, N >= 1e7);
* with ``groups=`` (G of ``--group-counts``, K = ``--group-classes`` so that
  G K^2 <= 65,536 at G = 1000 with K = 8): every label metric per group, vs
  the plain report of the same K (target: <= 1.2);
* torchmetrics' ``BootStrapper(MulticlassF1Score(K, average="macro"),
  num_bootstraps=B)`` on the GPU (Poisson sampling) for B of
  ``--bootstrapper-resamples`` on the first ``--bootstrapper-rows`` rows,
  vs ours at the same rows and B (its target: >= 1000x at B = 1000).

Times: wall time of each call with the device synchronised before and after
(``time.perf_counter``), best of ``--repeat`` after one warm-up call.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main() -> None:
    import cupy as cp

    import metrics_gpu as mg
    from _common import interval_ratio_line

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e7, 1e8])
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--resamples", nargs="+", type=int, default=[1000, 10000])
    parser.add_argument("--group-classes", type=int, default=8)
    parser.add_argument("--group-counts", nargs="+", type=int, default=[10, 1000])
    parser.add_argument("--bootstrapper-resamples", nargs="+", type=int, default=[100])
    parser.add_argument("--bootstrapper-rows", type=float, default=1e6)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()

    def timed(function):
        function()
        best = float("inf")
        for _ in range(args.repeat):
            cp.cuda.runtime.deviceSynchronize()
            start = time.perf_counter()
            function()
            cp.cuda.runtime.deviceSynchronize()
            best = min(best, time.perf_counter() - start)
        return best

    def labels(n, k, seed=0):
        rng = cp.random.default_rng(seed)
        y_true = rng.integers(0, k, n, dtype=cp.int32)
        wrong = rng.integers(0, k, n, dtype=cp.int32)
        y_pred = cp.where(rng.random(n) < 0.7, y_true, wrong)
        return y_true, y_pred

    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    rows = []
    k = args.classes
    print(f"\nthe report with intervals vs without (cuda, K = {k}, percentile)")
    print(f"{'N':>10} {'plain':>10} " + " ".join(f"{f'B={b}':>12} {'× plain':>8}"
                                                for b in args.resamples))
    for n in map(int, args.sizes):
        y_true, y_pred = labels(n, k)
        plain = timed(lambda: mg.label_report(y_true, y_pred).metrics)
        line, row = interval_ratio_line(timed, mg.label_report, y_true, y_pred, n, plain,
                                        args.resamples, digits=2)
        print(line)
        rows.append(row)

    kg = args.group_classes
    print(f"\nper-group metrics (K = {kg}) vs the plain report")
    print(f"{'N':>10} {'G':>6} {'G K^2':>8} {'plain':>10} {'groups':>10} {'× plain':>8}")
    for n in map(int, args.sizes):
        y_true, y_pred = labels(n, kg)
        plain = timed(lambda: mg.label_report(y_true, y_pred).metrics)
        for g in args.group_counts:
            groups = cp.random.default_rng(1).integers(0, g, n, dtype=cp.int32)
            t = timed(lambda: mg.label_report(y_true, y_pred, groups=groups,
                                              num_groups=g).groups)
            print(f"{n:>10.0e} {g:>6} {g * kg * kg:>8} {plain * 1e3:>8.2f}ms "
                  f"{t * 1e3:>8.2f}ms {t / plain:>8.2f}")
            rows.append({"n": n, "num_groups": g, "classes": kg, "plain_s": plain,
                         "groups_s": t})

    try:
        import torch
        from torchmetrics.classification import MulticlassF1Score
        from torchmetrics.wrappers import BootStrapper
    except ImportError as error:
        print(f"\ntorchmetrics BootStrapper: not run ({error})")
    else:
        n = int(args.bootstrapper_rows)
        y_true, y_pred = labels(n, k)
        tt, tp = torch.as_tensor(y_true, device="cuda"), torch.as_tensor(y_pred, device="cuda")
        print(f"\nagainst torchmetrics' BootStrapper on the GPU (N = {n:.0e}, K = {k})")
        print(f"{'B':>8} {'ours':>10} {'BootStrapper':>13} {'speedup':>8}")
        for b in args.bootstrapper_resamples:
            def bootstrapper():
                metric = BootStrapper(MulticlassF1Score(k, average="macro",
                                                        validate_args=False).cuda(),
                                      num_bootstraps=b, sampling_strategy="poisson")
                metric.update(tp, tt)
                return metric.compute()
            theirs = timed(bootstrapper)
            ours = timed(lambda: mg.label_report(y_true, y_pred, confidence_level=0.95,
                                                 n_resamples=b, rng=1).intervals)
            print(f"{b:>8} {ours * 1e3:>8.2f}ms {theirs * 1e3:>11.2f}ms {theirs / ours:>8.0f}")
            rows.append({"n": n, "bootstrapper_resamples": b, "ours_s": ours,
                         "bootstrapper_s": theirs})
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"rows": rows}, out, indent=1)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
