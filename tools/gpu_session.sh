#!/usr/bin/env bash
# One lent-GPU session in one call (docs/gpu.md, docs/performance.md): the benches of the
# kernels, then the test suite on the `cuda` backend, under one deadline so that
# everything measured comes back even when a step runs long. Run from the repo
# root on the device machine: `METRICS_GPU_COMMIT=<hash> bash tools/gpu_session.sh
# [SECONDS]` (default 570). The device gets the working tree but not this
# checkout's current git metadata: the hash names what was measured.
# Writes under $OUT (or ./gpu-session): one log per step, and results.tgz with
# the bench/results files the benches wrote (--write-results) and the JSON
# (inloop.json, inloop-steps.json, mappings.json: their .md is their log, as
# printed). inloop-steps is gpu_inloop.py's compiled-step, per-step-values and
# binary-head rows: torch.compile's compiles, so a step of its own.
set -uo pipefail
deadline=$(( SECONDS + ${1:-570} ))
out="${OUT:-gpu-session}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
log="$out/session.log"
started="$(mktemp)"; touch "$started"
say() { echo "[$(date -u +%H:%M:%S) +${SECONDS}s] $*" | tee -a "$log"; }
# step NAME SECONDS COMMAND...: run it with at most SECONDS (and never past the
# deadline less a reserve for the tests and packing), its output in NAME.log.
step() {
    local name=$1 limit=$2; shift 2
    local left=$(( deadline - SECONDS - 20 ))
    (( limit > left )) && limit=$left
    if (( limit < 10 )); then say "$name: skipped, no time left"; return; fi
    say "$name: start (at most ${limit}s): $*"
    timeout --signal=INT --kill-after=10 "$limit" "$@" > "$out/$name.log" 2>&1
    say "$name: exit $? after the step's ${SECONDS}s mark"
}
say "commit ${METRICS_GPU_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo +dirty) (git metadata)}"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv \
    >> "$log" 2>&1
python3 -c "import cupy, torch; print('cupy', cupy.__version__, 'torch', torch.__version__)" \
    >> "$log" 2>&1
timeout_flag=()
python3 -c "import pytest_timeout" 2>/dev/null && timeout_flag=(--timeout 120)

benches() {
    step scores ${GPU_SESSION_SCORES_S:-150} python3 bench/gpu_scores.py --write-results
    step inloop ${GPU_SESSION_INLOOP_S:-90} python3 bench/gpu_inloop.py \
        --only update functional first-calls --json bench/results/inloop.json
    step inloop-steps ${GPU_SESSION_INLOOP_STEPS_S:-150} python3 bench/gpu_inloop.py \
        --only compiled step-values binary --json bench/results/inloop-steps.json
    step mappings ${GPU_SESSION_MAPPINGS_S:-60} python3 bench/gpu_mappings.py --json bench/results/mappings.json
    step confusion ${GPU_SESSION_CONFUSION_S:-180} python3 bench/gpu_confusion.py --write-results
    step intervals ${GPU_SESSION_INTERVALS_S:-120} python3 bench/gpu_intervals.py --json bench/results/intervals.json
}
# Every per-backend case on `cuda` (the kernel tests' `case` and the public API's
# `backend`), then the tests that choose no backend with `cuda` as the default.
tests() {
    step tests-cuda ${GPU_SESSION_TESTS_S:-100000} python3 -m pytest -p no:cacheprovider -v \
        "${timeout_flag[@]}" -k cuda
    step tests-default-cuda ${GPU_SESSION_TESTS_S:-100000} env METRICS_GPU_BACKEND=cuda \
        python3 -m pytest -p no:cacheprovider -v "${timeout_flag[@]}" -m "not per_backend" \
        --ignore=tests/test_nvrtc_compile.py --ignore=tests/test_kernels.py \
        --ignore=tests/test_emulator.py --ignore=tests/test_thread_sanitizer.py
}
# GPU_SESSION_TESTS_FIRST=1: the suite before the benches (a fix to check on a
# GPU with little device time left); a step's *_S=0 skips it.
if [[ "${GPU_SESSION_TESTS_FIRST:-0}" == 1 ]]; then tests; benches; else benches; tests; fi
tar czf "$out/results.tgz" $(find bench/results -type f -newer "$started") 2>>"$log"
say "done; $(tar tzf "$out/results.tgz" 2>/dev/null | tr '\n' ' ')"
for name in tests-cuda tests-default-cuda; do
    [[ -f "$out/$name.log" ]] && { echo "== $name"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/$name.log" | tail -25; }
done
