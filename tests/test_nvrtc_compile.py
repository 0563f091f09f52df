"""CI gate: every kernel instantiation compiles with NVRTC for every architecture.

No GPU is needed: NVRTC (the compiler behind ``cupy.RawModule``) comes from
the ``nvidia-cuda-nvrtc`` wheel in the ``test`` extra. Where it cannot be
found the tests skip with the reason; set ``METRICS_GPU_REQUIRE_NVRTC=1``
(as CI should) to make a missing NVRTC a failure instead of a skip.

A large module takes minutes of CPU per architecture, so the selected
(module, architecture) pairs are compiled once, in parallel processes
(``METRICS_GPU_NVRTC_JOBS``, default: every usable CPU), and each test then
checks its own pair.
"""

from __future__ import annotations

import os
from collections import defaultdict

import pytest

import nvrtc_gate
from metrics_gpu.backends.kernel_sources import SUPPORTED_ARCHITECTURES, KernelModule, kernel_directory
from metrics_gpu.backends.launchers import KERNEL_MODULES
from metrics_gpu.backends.launchers.reduce_metrics import REDUCE_KERNELS
from metrics_gpu.backends.launchers.scores import SCORE_PASS_KERNELS
from metrics_gpu.backends.launchers.streaming import STREAM_RANKING

TINY_KERNEL = "template<typename T> __global__ void k(T* x){x[threadIdx.x]+=1;}\n"
TINY_EXPRESSIONS = ("k<int>", "k<double>")


@pytest.fixture(scope="module")
def nvrtc():
    """The NVRTC version; skips (or fails, if required) when libnvrtc is missing."""
    try:
        return nvrtc_gate.nvrtc_version()
    except nvrtc_gate.NvrtcNotFoundError as error:
        if os.environ.get("METRICS_GPU_REQUIRE_NVRTC"):
            pytest.fail(f"METRICS_GPU_REQUIRE_NVRTC is set but NVRTC is unavailable: {error}")
        pytest.skip(f"NVRTC unavailable: {error}")


@pytest.fixture(scope="module")
def compiled(nvrtc, request):
    """Outcome of every (module, architecture) pair selected for this run."""
    wanted = defaultdict(list)
    for item in request.session.items:
        if getattr(item, "originalname", None) == "test_kernel_module_compiles":
            params = item.callspec.params
            wanted[params["module"]].append(params["architecture"])
    # Usually every module wants every architecture: then one compile_all
    # call runs all pairs side by side.
    by_architectures = defaultdict(list)
    for module, architectures in wanted.items():
        by_architectures[tuple(architectures)].append(module)
    jobs = int(os.environ.get("METRICS_GPU_NVRTC_JOBS", nvrtc_gate.default_jobs()))
    outcomes = {}
    for architectures, modules in by_architectures.items():
        summary = nvrtc_gate.compile_all(architectures, modules, jobs=jobs)
        for outcome in summary.results + summary.failures:
            outcomes[outcome.module, outcome.architecture] = outcome
    return outcomes


def _assert_compiled(result, expressions, architecture):
    assert result.architecture == architecture
    assert tuple(result.lowered_names) == tuple(expressions)
    for expression, lowered in result.lowered_names.items():
        assert lowered, f"no lowered name for {expression!r}"
    assert result.cubin_size > 0


# Kernels must not spill on the architectures the benches measure (the
# figures of bench/kernel_resources.py). Spills elsewhere are printed by that
# bench and left to ptxas.
NO_SPILL_ARCHITECTURES = ("sm_80", "sm_90", "sm_100")
# Every mapping of the fused score pass (lanes per row, a staged tile, and a
# tile per row with 16-byte loads) for every score type, double included,
# weighted or not: 64 registers give 32 resident warps per SM. sm_100's
# ptxas takes up to 80 for the same code. (Double scores took 74-80 on sm_90
# until 2e6529a: kernels/scores.cu ScoreMinBlocks, WideMinBlocks.)
SCORE_PASS_MAX_REGISTERS = {"sm_80": 64, "sm_90": 64}
# Kernels held to 64 registers (32 resident warps per SM) on sm_80 / sm_90
# in every instantiation: the label-metric reductions (REDUCE_KERNELS, the 4
# blocks of 256 threads per SM of their launch bounds, so that the dense
# matrix pass keeps 32 warps on every SM; sm_100's ptxas takes 64-80, where
# 64 would spill), the label statistics pass (1-byte labels took 64-72
# while their 16-byte vectors were unrolled whole; kernels/confusion.cu
# label_loop), the stream's compute (its launch bound; 64-74 without), the
# multilabel update (74 while it held a row's 16 set-wise values at once)
# and the exact ranking's passes after the sort (rank_gather, the tile
# states read from the sorted keys, rank_tile_scan, rank_curve_points: 68-97
# while each thread held its positions' weights and flags through the
# block's barriers).
_HELD_TO_64 = {kernel: 64 for kernel in (
    *REDUCE_KERNELS, "class_statistics", "streaming_compute", "multilabel_update",
    "rank_gather", "rank_packed_tiles", "rank_label_key_tiles", "rank_tile_scan",
    "rank_curve_points")}
# The exact ranking's areas pass, which reads its segment's ranks through a
# functor (ranked copies, or the sorted keys decoded in place): 66-74 (24
# warps per SM, 32 at 64). Holding it to 64 (a launch bound of 4 blocks)
# spilled 8-48 bytes on every architecture; a single read of each score
# (a group closing where the next opens) took 64 with a spill on sm_90.
_RANK_AREAS = {kernel: 74 for kernel in ("rank_areas", "rank_packed_areas",
                                         "rank_label_key_areas")}
KERNEL_MAX_REGISTERS = {"sm_80": {**_HELD_TO_64, **_RANK_AREAS},
                        "sm_90": {**_HELD_TO_64, **_RANK_AREAS}}


# streaming_update (kernels/streaming.cu StreamMinBlocks): at most 64
# registers (32 resident warps per SM) for labels and scores, with the
# thresholds histogram (feature kStreamRanking) or without, double scores
# included (their histogram took 74-80 until 2e6529a). Kept per kind, so
# that a kind that must be let go is named.
_STREAM_UPDATE_KINDS = ("labels", "scores", "double", "histogram", "double histogram")
STREAM_UPDATE_MAX_REGISTERS = {
    "sm_80": {kind: 64 for kind in _STREAM_UPDATE_KINDS},
    "sm_90": {kind: 64 for kind in _STREAM_UPDATE_KINDS}}


def _stream_update_kind(expression: str) -> str | None:
    """What bounds a streaming_update instantiation's registers: "labels",
    "scores", "double", "histogram", "double histogram", or None (another
    kernel)."""
    kernel, _, arguments = expression.partition("<")
    if kernel != "streaming_update":
        return None
    true_type, pred_type, *_, features = (a.strip() for a in arguments.rstrip(">").split(","))
    if pred_type == true_type:
        return "labels"
    kind = "double" if pred_type == "double" else "scores"
    if int(features) & STREAM_RANKING:
        return "histogram" if kind == "scores" else "double histogram"
    return kind


def _score_type(expression: str) -> str | None:
    """The score type of a score pass instantiation (its second template
    argument), None for other kernels."""
    kernel, _, arguments = expression.partition("<")
    if kernel not in SCORE_PASS_KERNELS:
        return None
    return arguments.rstrip(">").split(",")[1].strip()


# Every instantiation for every architecture: minutes of CPU, so it runs in a
# step of .ci/run of its own (--nvrtc-gate, one process, NVRTC jobs in
# parallel) rather than in every xdist worker of the fast tier.
@pytest.mark.nvrtc_gate
@pytest.mark.parametrize(
    "module, architecture",
    [(module, arch) for module in KERNEL_MODULES for arch in SUPPORTED_ARCHITECTURES],
    ids=lambda value: value.source if isinstance(value, KernelModule) else value,
)
def test_kernel_module_compiles(compiled, module, architecture):
    assert module.name_expressions, f"{module.source} lists no name expressions"
    outcome = compiled[module.source, architecture]
    if isinstance(outcome, nvrtc_gate.NvrtcCompileError):
        pytest.fail(str(outcome), pytrace=False)
    _assert_compiled(outcome, module.name_expressions, architecture)
    assert set(outcome.resources) == set(module.name_expressions), "ptxas -v reported every kernel"
    if architecture in NO_SPILL_ARCHITECTURES:
        spilling = {expression: (found.spill_stores, found.spill_loads)
                    for expression, found in outcome.resources.items()
                    if found.spill_stores or found.spill_loads}
        assert not spilling, f"register spills (bytes stored, loaded) on {architecture}: {spilling}"
    budget = SCORE_PASS_MAX_REGISTERS.get(architecture)
    stream_budgets = STREAM_UPDATE_MAX_REGISTERS.get(architecture, {})
    for expression, found in outcome.resources.items():
        if budget and _score_type(expression) is not None:
            assert found.registers <= budget, (
                f"{expression} uses {found.registers} registers on {architecture}, "
                f"budget {budget}")
        kernel_budget = KERNEL_MAX_REGISTERS.get(architecture, {}).get(
            expression.partition("<")[0])
        if kernel_budget:
            assert found.registers <= kernel_budget, (
                f"{expression} uses {found.registers} registers on {architecture}, "
                f"budget {kernel_budget}")
        stream_budget = stream_budgets.get(_stream_update_kind(expression))
        if stream_budget:
            assert found.registers <= stream_budget, (
                f"{expression} uses {found.registers} registers on {architecture}, "
                f"budget {stream_budget}")


# The runtime compiles each instantiation on its own
# (metrics_gpu/backends/cuda.py compiled_instantiation), the gate a module's
# instantiations together, and ptxas need not agree: a device function that
# several kernels of a module call (evaluate_metrics, called by both
# reductions) is inlined into a lone kernel but called from the module's. At
# e.g. 47fd3b3 the module build of reduce_metrics.cu had no spill and
# label_metrics_from_matrix<long long> alone spilled 16 / 48 bytes on sm_90.
def _assert_alone_within(module: KernelModule, expression: str, architecture: str,
                         budget: int | None) -> None:
    """Compile one instantiation on its own, as the runtime does: no spill,
    and at most `budget` registers where one is given."""
    outcome = nvrtc_gate.compile_module(
        (kernel_directory() / module.source).read_text(), module.source, [expression],
        nvrtc_gate.module_options(), architecture=architecture)
    found = outcome.resources[expression]
    assert not (found.spill_stores or found.spill_loads), (
        f"{expression} alone spills {found.spill_stores} / {found.spill_loads} bytes "
        f"on {architecture}")
    assert budget is None or found.registers <= budget, (
        f"{expression} alone uses {found.registers} registers on {architecture}")


# The reductions, alone, as the runtime builds them:
@pytest.mark.nvrtc_gate
@pytest.mark.parametrize("architecture", NO_SPILL_ARCHITECTURES)
def test_reductions_compiled_alone_do_not_spill(nvrtc, architecture):
    module = next(m for m in KERNEL_MODULES if m.source == "reduce_metrics.cu")
    for expression in module.name_expressions:
        budget = KERNEL_MAX_REGISTERS.get(architecture, {}).get(expression.partition("<")[0])
        _assert_alone_within(module, expression, architecture, budget)


# streaming_update's instantiations nearest their budgets (the thresholds
# histogram's, double scores'), alone as the runtime builds them: the gate's
# module build and these agreed at 4d51d2e, a sample of the 104, as building
# each alone for every architecture would cost minutes.
STREAM_UPDATE_ALONE = (
    "streaming_update<long long, float, mg::unit_weight, unsigned long long, 2>",
    "streaming_update<long long, double, long long, unsigned long long, 2>",
    "streaming_update<int, double, float, double, 0>",
)


@pytest.mark.nvrtc_gate
@pytest.mark.parametrize("architecture", NO_SPILL_ARCHITECTURES)
def test_streaming_update_compiled_alone_within_budget(nvrtc, architecture):
    from metrics_gpu.backends.launchers.streaming import MODULE

    assert set(STREAM_UPDATE_ALONE) <= set(MODULE.name_expressions)
    budgets = STREAM_UPDATE_MAX_REGISTERS.get(architecture, {})
    for expression in STREAM_UPDATE_ALONE:
        _assert_alone_within(MODULE, expression, architecture,
                             budgets.get(_stream_update_kind(expression)))


# The double score passes nearest their budget, alone as the runtime builds
# them (module and alone agreed when the budget came down to 64; the wide
# rows' with 64-bit labels had spilled 4 bytes in the module build).
SCORE_PASS_ALONE = (
    "fused_logits_wide<long long, double, mg::unit_weight>",
    "fused_logits_pass<int, double, double>",
)


@pytest.mark.nvrtc_gate
@pytest.mark.parametrize("architecture", NO_SPILL_ARCHITECTURES)
def test_double_score_passes_compiled_alone_within_budget(nvrtc, architecture):
    module = next(m for m in KERNEL_MODULES if m.source == "scores.cu")
    assert set(SCORE_PASS_ALONE) <= set(module.name_expressions)
    for expression in SCORE_PASS_ALONE:
        _assert_alone_within(module, expression, architecture,
                             SCORE_PASS_MAX_REGISTERS.get(architecture))


def test_kernel_table_lists_every_cu_file():
    """A ``.cu`` added to kernels/ without a KERNEL_MODULES entry is never compiled."""
    on_disk = {path.name for path in kernel_directory().glob("*.cu")}
    listed = {module.source for module in KERNEL_MODULES}
    assert on_disk <= listed, f"not in KERNEL_MODULES: {sorted(on_disk - listed)}"
    assert listed <= on_disk, f"listed but missing from kernels/: {sorted(listed - on_disk)}"


def test_stream_update_budgets_name_every_instantiation():
    """The gate's register budgets of streaming_update reach every
    instantiation of the table, the thresholds histogram's included."""
    from metrics_gpu.backends.launchers.streaming import MODULE

    kinds = {expression: _stream_update_kind(expression)
             for expression in MODULE.name_expressions if expression.startswith("streaming_update")}
    labels = "streaming_update<int, int, mg::unit_weight, unsigned long long, 0>"
    assert _stream_update_kind(labels) == "labels"
    assert _stream_update_kind("streaming_update<int, float, float, double, 1>") == "scores"
    assert _stream_update_kind("streaming_update<long long, double, double, double, 0>") == "double"
    assert _stream_update_kind("streaming_update<int, float, float, double, 2>") == "histogram"
    assert _stream_update_kind(
        "streaming_update<int, double, float, double, 2>") == "double histogram"
    assert _stream_update_kind("fused_logits_pass<int, float, float>") is None
    for architecture, budgets in STREAM_UPDATE_MAX_REGISTERS.items():
        assert set(kinds.values()) == set(budgets), architecture
    histograms = {e for e, kind in kinds.items() if kind.endswith("histogram")}
    assert histograms == {e for e in kinds if int(e.rstrip(">").rsplit(",", 1)[1]) & STREAM_RANKING}
    # labels, scores without and with the histogram, and a binary head's one
    # column (float16, float32, float64) without and with it
    assert len(kinds) == 8 + 64 + 32 + 48


def test_kernel_table_has_no_duplicates():
    sources = [module.source for module in KERNEL_MODULES]
    assert len(sources) == len(set(sources))
    for module in KERNEL_MODULES:
        assert len(module.name_expressions) == len(set(module.name_expressions)), module.source


@pytest.mark.parametrize("architecture", SUPPORTED_ARCHITECTURES)
def test_tiny_templated_kernel_compiles(nvrtc, architecture):
    """NVRTC and the binding work for each architecture, whatever the table holds."""
    result = nvrtc_gate.compile_module(
        TINY_KERNEL, "tiny.cu", TINY_EXPRESSIONS, ("--std=c++17",), architecture=architecture
    )
    _assert_compiled(result, TINY_EXPRESSIONS, architecture)
    assert result.lowered_names["k<int>"] != result.lowered_names["k<double>"]


def test_ptxas_resources_are_read_per_kernel(nvrtc):
    """Registers, stack and spills of each instantiation come from ptxas -v."""
    source = ("template<int N> __global__ void k(float* x, int i){"
              " float a[N]; for (int j = 0; j < N; ++j) a[j] = x[j * i];"
              " a[i % N] += 1.0f; float s = 0; for (int j = 0; j < N; ++j) s += a[j] * x[j];"
              " x[0] = s; }\n")
    result = nvrtc_gate.compile_module(source, "stack.cu", ("k<4>", "k<512>"), ("--std=c++17",),
                                   architecture="sm_90", keep_cubin=True)
    assert result.cubin[:4] == b"\x7fELF" and len(result.cubin) == result.cubin_size
    small, large = result.resources["k<4>"], result.resources["k<512>"]
    assert 0 < small.registers <= 255 and large.registers > 0
    assert large.stack_bytes >= 512 * 4 > small.stack_bytes, "an array indexed at run time"
    assert small.spill_stores == small.spill_loads == 0
    assert not result.warnings, "ptxas's report is not a warning"


def test_ptxas_resource_lines_are_parsed():
    log = (
        "ptxas info    : 24 bytes gmem\n"
        "ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90'\n"
        "ptxas info    : Function properties for _Z1kPf\n"
        "ptxas         .     40 bytes stack frame, 12 bytes spill stores, 8 bytes spill loads\n"
        "ptxas info    : Used 64 registers, used 1 barriers, 40 bytes cumulative stack size, "
        "2368 bytes smem\n"
        "ptxas info    : Compiling entry function '_Z1gv' for 'sm_90'\n"
        "ptxas info    : Function properties for _Z1gv\n"
        "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 8 registers\n"
    )
    found = nvrtc_gate.ptxas_resources(log)
    assert found["_Z1kPf"] == nvrtc_gate.KernelResources(64, 40, 12, 8, 2368)
    assert found["_Z1gv"] == nvrtc_gate.KernelResources(8, 0, 0, 0, 0)


def test_every_supported_architecture_is_known_to_nvrtc(nvrtc):
    known = set(nvrtc_gate.supported_architectures())
    missing = [arch for arch in SUPPORTED_ARCHITECTURES if arch not in known]
    assert not missing, f"NVRTC {nvrtc} cannot compile for {missing}; upgrade nvidia-cuda-nvrtc"


def test_broken_source_raises_with_architecture_and_log(nvrtc):
    source = "__global__ void broken(int* x){ x[0] = undefined_identifier; }\n"
    with pytest.raises(nvrtc_gate.NvrtcCompileError) as caught:
        nvrtc_gate.compile_module(source, "broken.cu", ("broken",), architecture="sm_90")
    message = str(caught.value)
    assert "broken.cu" in message
    assert "sm_90" in message
    assert 'identifier "undefined_identifier" is undefined' in message
    assert caught.value.architecture == "sm_90"


def test_ptxas_errors_fail_the_gate(nvrtc):
    """Compiling to a real sm_XX runs ptxas, so resource errors are caught too."""
    source = (
        "__global__ void big(char* x){ __shared__ char s[300000];"
        " s[threadIdx.x] = x[threadIdx.x]; __syncthreads(); x[threadIdx.x] = s[threadIdx.x + 1]; }\n"
    )
    with pytest.raises(nvrtc_gate.NvrtcCompileError, match=r"(?s)sm_75.*ptxas.*too much shared data"):
        nvrtc_gate.compile_module(source, "big.cu", ("big",), architecture="sm_75")


def test_unknown_name_expression_fails(nvrtc):
    with pytest.raises(nvrtc_gate.NvrtcCompileError, match="not_a_type"):
        nvrtc_gate.compile_module(TINY_KERNEL, "tiny.cu", ("k<not_a_type>",), architecture="sm_80")


def test_unsupported_architecture_fails(nvrtc):
    with pytest.raises(nvrtc_gate.NvrtcCompileError, match=r"(?s)sm_35.*gpu-architecture"):
        nvrtc_gate.compile_module(TINY_KERNEL, "tiny.cu", ("k<int>",), architecture="sm_35")


def test_virtual_or_missing_architecture_is_rejected():
    with pytest.raises(ValueError, match="real architecture"):
        nvrtc_gate.compile_module(TINY_KERNEL, "tiny.cu", ("k<int>",), architecture="compute_90")
    with pytest.raises(ValueError, match="real architecture"):
        nvrtc_gate.compile_module(TINY_KERNEL, "tiny.cu", ("k<int>",))


def test_compile_all_resolves_shared_header_and_reports_failures(nvrtc, tmp_path):
    """compile_all passes the include path and collects every failure, not only the first."""
    (tmp_path / "common.cuh").write_text("template<typename T> __device__ T twice(T v){return v + v;}\n")
    (tmp_path / "good.cu").write_text(
        '#include "common.cuh"\n'
        "template<typename T> __global__ void scale(T* x){x[threadIdx.x] = twice(x[threadIdx.x]);}\n"
    )
    (tmp_path / "bad.cu").write_text('#include "common.cuh"\n__global__ void f(){ nope(); }\n')
    modules = (
        KernelModule("good.cu", ("scale<float>", "scale<long long>")),
        KernelModule("bad.cu", ("f",)),
    )
    summary = nvrtc_gate.compile_all(("sm_80", "sm_120"), modules, directory=tmp_path, jobs=2)
    assert not summary.ok
    assert [(r.module, r.architecture) for r in summary.results] == [
        ("good.cu", "sm_80"),
        ("good.cu", "sm_120"),
    ]
    assert [(f.module, f.architecture) for f in summary.failures] == [
        ("bad.cu", "sm_80"),
        ("bad.cu", "sm_120"),
    ]
    assert all('"nope" is undefined' in f.log for f in summary.failures)


def test_env_variable_pointing_nowhere_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv(nvrtc_gate.ENV_VARIABLE, str(tmp_path / "libnvrtc.so.13"))
    with pytest.raises(nvrtc_gate.NvrtcNotFoundError, match=nvrtc_gate.ENV_VARIABLE):
        nvrtc_gate.find_library()


def test_main_prints_one_line_per_module_and_architecture(nvrtc, monkeypatch, tmp_path, capsys):
    # A tiny stand-in table: the real one is compiled by the tests above.
    (tmp_path / "tiny.cu").write_text(TINY_KERNEL)
    monkeypatch.setattr(nvrtc_gate, "kernel_directory", lambda: tmp_path)
    monkeypatch.setattr(nvrtc_gate, "KERNEL_MODULES", (KernelModule("tiny.cu", TINY_EXPRESSIONS),))
    assert nvrtc_gate.main(["sm_80", "sm_120", "--jobs", "2"]) == 0
    out = capsys.readouterr().out
    assert f"NVRTC {nvrtc[0]}.{nvrtc[1]}" in out
    assert "tiny.cu sm_80: 2 instantiations, " in out
    assert "tiny.cu sm_120: 2 instantiations, " in out
    assert "2/2 compiled" in out

    (tmp_path / "unlisted.cu").write_text(TINY_KERNEL)
    assert nvrtc_gate.main(["sm_80", "--jobs", "1"]) == 1
    assert "unlisted.cu: FAILED, not listed in KERNEL_MODULES" in capsys.readouterr().out

    (tmp_path / "unlisted.cu").unlink()
    (tmp_path / "tiny.cu").write_text("__global__ void k(){ nope(); }\n")
    assert nvrtc_gate.main(["sm_80"]) == 1
    captured = capsys.readouterr()
    assert "tiny.cu sm_80: FAILED" in captured.out
    assert '"nope" is undefined' in captured.err
