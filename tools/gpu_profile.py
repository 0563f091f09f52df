"""Where the host time of the in-loop calls goes on a GPU: cProfile of the
planned calls of ``bench/gpu_inloop.py`` (torch CUDA tensors, N = 4096,
K = 1000) and of the first calls of a fresh process with a filled kernel cache.

Run on a GPU machine from the repo root: ``python tools/gpu_profile.py``. It
prints, per call, the functions called (count per call) and the functions
whose own time is largest, so that a session without a GPU can work on what a
GPU run saw. Run ``metrics-gpu warmup`` first for the first-call profile.
"""
from __future__ import annotations

import cProfile
import pstats
import subprocess
import sys

_FIRST_CALLS = """
import cProfile, pstats, time
profile = cProfile.Profile()
start = time.perf_counter()
profile.enable()
import torch
y = torch.randint(0, 1000, (4096,), device="cuda")
logits = torch.randn(4096, 1000, device="cuda")
torch.cuda.synchronize()
profile.disable()
print(f"torch and the inputs: {time.perf_counter() - start:.3f} s")
profile = cProfile.Profile()
for name in ("import", "update", "compute", "accuracy_score"):
    start = time.perf_counter()
    profile.enable()
    if name == "import":
        import metrics_gpu as mg
    elif name == "update":
        metrics = mg.ClassificationMetrics(1000)
        metrics.update(y, logits)
    elif name == "compute":
        metrics.compute()["accuracy"]
    else:
        mg.accuracy_score(y, logits)
    torch.cuda.synchronize()
    profile.disable()
    print(f"first {name}: {time.perf_counter() - start:.3f} s")
stats = pstats.Stats(profile)
stats.sort_stats("cumulative").print_stats(45)
"""


def _profile(label: str, call, steps: int = 200) -> None:
    import torch

    call()
    torch.cuda.synchronize()
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(steps):
        call()
    profile.disable()
    torch.cuda.synchronize()
    stats = pstats.Stats(profile)
    total_calls = sum(entry[1] for entry in stats.stats.values())
    print(f"\n=== {label}: {total_calls / steps:.0f} function calls per call")
    rows = sorted(stats.stats.items(), key=lambda item: -item[1][1])
    for (filename, line, function), (_, ncalls, tottime, cumtime, _) in rows[:60]:
        print(f"{ncalls / steps:6.1f} {tottime / steps * 1e6:8.2f}us {cumtime / steps * 1e6:8.2f}us "
              f"{filename.rsplit('site-packages/', 1)[-1]}:{line}({function})")


def main() -> int:
    import torch
    import metrics_gpu as mg

    n, k = 4096, 1000
    generator = torch.Generator(device="cuda").manual_seed(7)
    y = torch.randint(0, k, (n,), device="cuda", generator=generator)
    logits = torch.randn(n, k, device="cuda", generator=generator)
    labels = logits.argmax(dim=1)
    metrics = mg.ClassificationMetrics(k, validate=False)
    cases = {
        "ClassificationMetrics.update(y, logits)": lambda: metrics.update(y, logits),
        "accuracy_score(y, labels, num_classes=k, validate=False)":
            lambda: mg.accuracy_score(y, labels, num_classes=k, validate=False),
        "f1_score(y, labels, average='macro', num_classes=k, validate=False)":
            lambda: mg.f1_score(y, labels, average="macro", num_classes=k, validate=False),
        "label_report(y, labels, num_classes=k, confusion_matrix=False, validate=False)":
            lambda: mg.label_report(y, labels, num_classes=k, confusion_matrix=False,
                                    validate=False),
    }
    for label, call in cases.items():
        _profile(label, call)
    print("\n=== first calls of a fresh process (the kernel cache as warmup left it)")
    done = subprocess.run([sys.executable, "-c", _FIRST_CALLS], capture_output=True, text=True,
                          timeout=300)
    print(done.stdout[-20000:], done.stderr[-3000:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
