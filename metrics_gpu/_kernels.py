"""The kernel sources: where they are, and which template instantiations exist.

``kernels/*.cu`` ship in the wheel as ``metrics_gpu/kernels``; in a source
checkout they are read from ``kernels/``. :data:`KERNEL_MODULES` is the one
table of what gets compiled: the ``cuda`` backend passes each module's
``name_expressions`` to ``cupy.RawModule``, the ``emulated`` backend exports
each of them from its shared library, and CI compiles each of them with NVRTC
for every supported architecture. It also holds the limits the kernels fix
that more than one host module reads (tests/test_kernel_interface.py holds
them, and every other layout and limit the host mirrors, to the sources).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent

# Options common to NVRTC (cuda backend, CI gate); the include path of
# kernel_directory() is added by the caller. No multiply-add contraction: the
# reductions' cancellations (s*s - t.t for an undefined MCC or kappa) must give
# exactly 0 as on the host, and a fused a*b+c rounds differently from the
# NumPy reference and the emulated backend (built with -ffp-contract=off).
# Subnormals kept (NVRTC's default, written out because CuPy's RawModule
# appends -ftz=true, which the cuda backend therefore does not use): flushed,
# a subnormal score compares equal to 0, so it ties with zeros in a ranking
# and an argmax, unlike on the host (seen on an H200, 2026-11-26).
NVRTC_OPTIONS = ("--std=c++17", "--fmad=false", "--ftz=false")

# Architectures CI compiles every instantiation for (NVRTC, no GPU needed).
SUPPORTED_ARCHITECTURES = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")

# -- limits the kernels fix, read by more than one host module -----------------

# top_k values per pass (kernels/scores.cu kMaxTopK): the kernels' top-k
# limits and block reduction scratch are sized for it, and the streaming
# config vector holds this many values (kernels/streaming.cu kCfgTopK).
SCORE_MAX_TOP_K = 8
# A streaming check keeps its first offending sample as one int64 key,
# (update ordinal << STREAM_ORDINAL_SHIFT) | row (kernels/streaming.cu
# kOrdinalShift: an update takes fewer than 2^40 rows), and STREAM_NO_ERROR
# (kNoError, the largest int64) while there is none.
STREAM_ORDINAL_SHIFT = 40
STREAM_NO_ERROR = (1 << 63) - 1


@dataclass(frozen=True)
class KernelModule:
    """One ``.cu`` source and the template instantiations taken from it."""

    source: str
    name_expressions: tuple[str, ...]


def kernel_directory() -> Path:
    """The folder holding the ``.cu`` sources, installed or in a source checkout."""
    for candidate in (_PACKAGE_DIR / "kernels", _PACKAGE_DIR.parent / "kernels"):
        if (candidate / "README.md").is_file():
            return candidate
    raise FileNotFoundError(
        "metrics-gpu kernel sources not found next to the package; reinstall metrics-gpu"
    )


def kernel_source(name: str) -> str:
    """Text of one kernel source file, e.g. ``kernel_source("confusion.cu")``."""
    path = kernel_directory() / name
    if not path.is_file():
        raise FileNotFoundError(f"kernel source {name!r} not found in {kernel_directory()}")
    return path.read_text()


# C++ names of the element types the kernels read. bool labels are read as
# unsigned char; half-precision scores as their 16-bit patterns.
LABEL_TYPES = {
    "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long",
    "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int",
    "uint64": "unsigned long long",
}
SCORE_TYPES = {
    "float32": "float", "float64": "double",
    "float16": "mg::float16_bits", "bfloat16": "mg::bfloat16_bits",
}
# (weight C type, fixed point): unweighted, integer weights (exact int64),
# float weights (float64 atomics), and float64 weights with
# deterministic=True (float32 weights are widened for it: a rare option).
WEIGHT_VARIANTS = (
    ("mg::unit_weight", False), ("long long", False),
    ("float", False), ("double", False), ("double", True),
)
# y_true types read directly next to (N, K) scores: the targets of training
# loops. Others are cast to int64 first (N values, small next to N * K
# scores); every instantiation costs CI compile time on every architecture.
SCORE_TARGET_TYPES = ("int", "long long")
ACCUMULATE_KERNELS = ("confusion_shared", "confusion_global", "class_statistics")


def _bool(value: bool) -> str:
    return "true" if value else "false"


def accumulate_expression(kernel: str, true_type: str, pred_type: str,
                          weight_type: str = "mg::unit_weight", fixed: bool = False) -> str:
    """The instantiation name of one accumulation kernel for C++ element types."""
    if kernel == "confusion_binary":
        return f"confusion_binary<{true_type}, {pred_type}>"
    return f"{kernel}<{true_type}, {pred_type}, {weight_type}, {_bool(fixed)}>"


def _label_pairs():
    # Labels of one dtype each (mixed dtypes are cast to int64 first), and
    # every label type with every score type (the fused argmax).
    for true_type in LABEL_TYPES.values():
        yield true_type, true_type
    for true_type in SCORE_TARGET_TYPES:
        for score_type in SCORE_TYPES.values():
            yield true_type, score_type


def _confusion_expressions() -> tuple[str, ...]:
    names = []
    for true_type, pred_type in _label_pairs():
        names.append(accumulate_expression("confusion_binary", true_type, pred_type))
        for kernel in ACCUMULATE_KERNELS:
            for weight_type, fixed in WEIGHT_VARIANTS:
                names.append(accumulate_expression(kernel, true_type, pred_type, weight_type, fixed))
    names.append("max_abs_weight<double>")
    names.append("fixed_point_to_float64")
    return tuple(names)


# Count types of the metric reduction: int64 counts, float64 weighted counts.
COUNT_TYPES = {"int64": "long long", "float64": "double"}
REDUCE_KERNELS = ("label_metrics_from_statistics", "label_metrics_from_matrix")


def reduce_expression(kernel: str, count_type: str) -> str:
    return f"{kernel}<{count_type}>"


# The fused pass over (N, K) scores: targets as the training loop gives them,
# every score type, unweighted or float64 weights (others are widened: N
# values next to N * K scores).
SCORE_WEIGHT_TYPES = ("mg::unit_weight", "double")


# The mappings of rows onto threads (kernel_backend.score_mapping picks):
# lanes per row with a score per load, a thread per row staged through shared
# memory (few columns), or a tile per row with 16-byte loads (many columns).
SCORE_PASS_KERNELS = ("fused_logits_pass", "fused_logits_staged", "fused_logits_wide")


def score_pass_expression(true_type: str, score_type: str, weight_type: str,
                          kernel: str = "fused_logits_pass") -> str:
    return f"{kernel}<{true_type}, {score_type}, {weight_type}>"


# Exact ranking (kernels/ranking.cu): scores in an order-preserving type
# (other integers are read as int64, other floats as float64), unweighted or
# float64 weights.
RANK_SCORE_TYPES = {
    "float32": "float", "float64": "double", "float16": "mg::float16_bits",
    "int64": "long long",
}
RANK_WEIGHT_TYPES = ("mg::unit_weight", "double")
# Unweighted scores of at most 32 bits take the packed-key path (sorts of
# 32-bit keys, no gather): float32 and float16 as they are, small integers
# and bools as int32. Its ranked scores are 32-bit key bits.
PACKED_RANK_TYPES = {"float32": "float", "float16": "mg::float16_bits", "int32": "int"}
PACKED_RANK_SCORE_TYPE = "unsigned int"


def rank_gather_expression(score_type: str, weight_type: str) -> str:
    return f"rank_gather<{score_type}, {weight_type}>"


def rank_areas_expression(score_type: str) -> str:
    return f"rank_areas<{score_type}>"


def label_summary_expression(label_type: str) -> str:
    """The one-pass distinct-label summary of ranking.cu, for present_labels."""
    return f"label_pair_summary<{label_type}>"


# The streaming state (kernels/streaming.cu): targets as training loops give
# them, predictions as labels of the same type or scores of every type, and
# (weight type, count type): counts and integer weights in exact 64-bit
# integers, float weights in float64. Other types are converted first.
STREAM_WEIGHT_COUNTS = (
    ("mg::unit_weight", "unsigned long long"), ("long long", "unsigned long long"),
    ("float", "double"), ("double", "double"),
)
STREAM_COUNT_TYPES = ("unsigned long long", "double")


def stream_update_expression(true_type: str, pred_type: str, weight_type: str,
                             count_type: str) -> str:
    return f"streaming_update<{true_type}, {pred_type}, {weight_type}, {count_type}>"


def _stream_expressions() -> tuple[str, ...]:
    names = []
    for true_type in SCORE_TARGET_TYPES:
        for pred_type in (true_type, *SCORE_TYPES.values()):
            for weight_type, count_type in STREAM_WEIGHT_COUNTS:
                names.append(stream_update_expression(true_type, pred_type, weight_type,
                                                      count_type))
    names += [f"streaming_compute<{count_type}>" for count_type in STREAM_COUNT_TYPES]
    return tuple(names)


KERNEL_MODULES: tuple[KernelModule, ...] = (
    KernelModule("confusion.cu", _confusion_expressions()),
    KernelModule("reduce_metrics.cu", tuple(
        reduce_expression(kernel, count_type)
        for kernel in REDUCE_KERNELS for count_type in COUNT_TYPES.values())),
    KernelModule("scores.cu", tuple(
        score_pass_expression(true_type, score_type, weight_type, kernel)
        for kernel in SCORE_PASS_KERNELS for true_type in SCORE_TARGET_TYPES
        for score_type in SCORE_TYPES.values() for weight_type in SCORE_WEIGHT_TYPES)),
    KernelModule("ranking.cu", tuple(
        [rank_gather_expression(score_type, weight_type)
         for score_type in RANK_SCORE_TYPES.values() for weight_type in RANK_WEIGHT_TYPES]
        + [rank_areas_expression(score_type)
           for score_type in (*RANK_SCORE_TYPES.values(), PACKED_RANK_SCORE_TYPE)]
        + [f"rank_curve_points<{score_type}>" for score_type in RANK_SCORE_TYPES.values()]
        + [f"rank_pack_keys<{score_type}>" for score_type in PACKED_RANK_TYPES.values()]
        + ["rank_unpack_keys"]
        + [label_summary_expression(label_type) for label_type in LABEL_TYPES.values()])),
    KernelModule("streaming.cu", _stream_expressions()),
)
