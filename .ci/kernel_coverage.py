"""Fail when the fast test tier launches fewer kernel instantiations than the exhaustive one.

Usage: python .ci/kernel_coverage.py FAST_DIR EXHAUSTIVE_DIR [EXHAUSTIVE_DIR ...]

Each directory holds the files that tests/conftest.py writes when
METRICS_GPU_RECORD_LAUNCHES=DIR is set: one line per (test id, kernel
instantiation) launched on the emulated backend, e.g.
``tests/test_kernels.py::test_weights[emulated-...]<TAB>confusion_shared<int, int, double, false>``.
The fast tier is the default test run (README); the exhaustive tier is
everything CI adds on the emulated backend (the `emulated_rerun` cases, the
non-per-backend tests with METRICS_GPU_BACKEND=emulated). Every
instantiation launched by the exhaustive tier must be launched by the fast
tier too: otherwise a kernel path lost its emulated coverage in the default
run, and the tests that launched it are listed (mark one `kernel_path`, or
give the test a parameter value that reaches it).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path


def read(directory: Path) -> dict[str, set[str]]:
    """instantiation -> ids of the tests that launched it."""
    launched: dict[str, set[str]] = defaultdict(set)
    files = sorted(directory.glob("launches-*.tsv"))
    if not files:
        raise SystemExit(f"no launch records in {directory} (was METRICS_GPU_RECORD_LAUNCHES set?)")
    for path in files:
        for line in path.read_text().splitlines():
            test, _, expression = line.partition("\t")
            if expression:
                launched[expression].add(test)
    return launched


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    fast = read(Path(argv[0]))
    exhaustive: dict[str, set[str]] = defaultdict(set)
    for directory in argv[1:]:
        for expression, tests in read(Path(directory)).items():
            exhaustive[expression] |= tests
    for expression, tests in fast.items():
        exhaustive[expression] |= tests
    missing = sorted(set(exhaustive) - set(fast))
    kernels = {e.split("<", 1)[0] for e in exhaustive}
    print(f"kernel instantiations launched on the emulated backend: fast tier {len(fast)}, "
          f"exhaustive tier {len(exhaustive)} ({len(kernels)} kernels)")
    if missing:
        print(f"{len(missing)} instantiation(s) launched only by the exhaustive tier:")
        for expression in missing:
            tests = sorted(exhaustive[expression])
            print(f"  {expression}\n      e.g. {tests[0]}" + (f" (+{len(tests) - 1} more)"
                                                             if len(tests) > 1 else ""))
        return 1
    print("every kernel instantiation of the exhaustive tier is launched by the fast tier")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
