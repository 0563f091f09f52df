"""The interface between the host and the kernels, in one table.

The ``.cu`` sources and the Python host both spell out some layouts (the
slots of a buffer a kernel writes, the entries of a config vector it reads)
and some limits (block sizes, the top-k cap, the bits of a check's key).
:data:`INTERFACE` lists every such pair: the C++ enum or ``constexpr``
integer, and the Python definition that must equal it. Each Python value is
defined once (other modules import it); this test parses the sources with a
few regular expressions (no compiler) and holds each pair to each other.

An enum's layout is compared by name: each enumerator, less its common prefix
(``kSlot``, ``kCfg``, ...) and in snake_case, must sit at its value's index of
the Python sequence, unless the row renames it; the enum's last enumerator is
its count, the sequence's length. ``skip`` enumerators come before the
sequence's first entry (read by position on the host).
"""

from __future__ import annotations

import ast
import importlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from metrics_gpu.backends.kernel_sources import SCORE_MAX_TOP_K, kernel_directory, kernel_source


@dataclass(frozen=True)
class Mirror:
    """A C++ enum (its layout) or constexpr integer and its Python definition."""

    source: str    # a file of kernels/
    cxx: str       # an enum's name, or a constant's
    module: str    # the module holding the Python definition
    python: str    # its name there
    renames: dict = field(default_factory=dict)  # enumerator -> entry (or entries) named otherwise
    skip: int = 0  # enumerators before the Python sequence's first entry


_STATE, _KERNELS = "metrics_gpu._formulas.state", "metrics_gpu.backends.kernel_sources"
_FORMULAS, _STREAMING = "metrics_gpu._formulas.labels", "metrics_gpu._streaming.metrics"
_LAUNCHERS = "metrics_gpu.backends.launchers"
_BASE, _SCORES = f"{_LAUNCHERS}.base", f"{_LAUNCHERS}.scores"
_REDUCE, _RANKING = f"{_LAUNCHERS}.reduce_metrics", f"{_LAUNCHERS}.ranking"
_STREAM_LAUNCHERS = f"{_LAUNCHERS}.streaming"
_MULTILABEL = f"{_LAUNCHERS}.multilabel"

INTERFACE = (
    # -- layouts -------------------------------------------------------------
    # The fused score pass's sums (then top-k hits and calibration bins).
    Mirror("scores.cu", "ScoreSlot", _STATE, "SCORE_SLOTS"),
    # The label-metric buffer of reduce_metrics.cu: overall values, then columns of K.
    Mirror("reduce_metrics.cu", "Slot", _FORMULAS, "LABEL_METRIC_SLOTS"),
    Mirror("reduce_metrics.cu", "Column", _FORMULAS, "LABEL_METRIC_COLUMNS"),
    # The streaming state's int64 config vector, packed by the host.
    Mirror("streaming.cu", "StreamConfig", _STREAM_LAUNCHERS, "STREAM_CONFIG",
           renames={"kCfgTopK": tuple(f"top_k_{i}" for i in range(SCORE_MAX_TOP_K))}),
    # The streaming checks: checks[0] counts the rows left out, then the first
    # offending sample of each kind.
    Mirror("streaming.cu", "StreamCheck", _STREAMING, "CHECKED", skip=1,
           renames={"kCheckTarget": "y_true", "kCheckPrediction": "preds",
                    "kCheckWeight": "sample_weight"}),
    # The score metrics streaming_compute writes.
    Mirror("streaming.cu", "StreamScoreSlot", _FORMULAS, "STREAM_SCORE_SLOTS",
           renames={"kOutBrier": "brier_score", "kOutHinge": "hinge_loss",
                    "kOutCalibration": "expected_calibration_error",
                    "kOutMaxCalibration": "max_calibration_error",
                    "kOutRocAucBound": "roc_auc_error_bound",
                    "kOutAveragePrecisionBound": "average_precision_error_bound"}),
    # The multilabel update: input element codes, how predictions are read,
    # its row sums and the arguments its checks name.
    Mirror("multilabel.cu", "ElementCode", _MULTILABEL, "ELEMENT_CODE_NAMES"),
    Mirror("multilabel.cu", "PredictionMode", _MULTILABEL, "PREDICTION_MODE_NAMES"),
    Mirror("multilabel.cu", "RankingSum", _MULTILABEL, "RANKING_SUM_SLOTS",
           renames={"kRankingAveragePrecision": "average_precision"}),
    Mirror("multilabel.cu", "RowSlot", _MULTILABEL, "ROW_SLOTS",
           renames={"kRowCount": "rows", "kRowFScore": "f_score",
                    "kRowFScoreDefined": "f_score_defined",
                    "kRowNoPredicted": "rows_no_predicted", "kRowNoTrue": "rows_no_true",
                    "kRowNoLabels": "rows_no_labels"}),
    Mirror("multilabel.cu", "CheckBit", _MULTILABEL, "CHECKED_ARGUMENTS",
           renames={"kBadTarget": "y_true", "kBadPrediction": "preds",
                    "kBadWeight": "sample_weight"}),
    # -- limits ----------------------------------------------------------------
    Mirror("common.cuh", "kWarpSize", _BASE, "WARP_SIZE"),
    Mirror("scores.cu", "kMaxTopK", _KERNELS, "SCORE_MAX_TOP_K"),
    Mirror("scores.cu", "kScoreBlockThreads", _SCORES, "SCORE_MAX_BLOCK_THREADS"),
    Mirror("reduce_metrics.cu", "kMaxBlockThreads", _REDUCE, "REDUCE_MAX_BLOCK_THREADS"),
    Mirror("reduce_metrics.cu", "kTileColumns", _REDUCE, "REDUCE_TILE_COLUMNS"),
    Mirror("reduce_metrics.cu", "kMatrixMoments", _REDUCE, "MATRIX_MOMENTS"),
    Mirror("ranking.cu", "kRankBlockThreads", _RANKING, "RANK_MAX_BLOCK_THREADS"),
    Mirror("multilabel.cu", "kRankingBlockThreads", _MULTILABEL, "RANKING_MAX_BLOCK_THREADS"),
    Mirror("multilabel.cu", "kUpdateBlockThreads", _MULTILABEL, "UPDATE_MAX_BLOCK_THREADS"),
    Mirror("ranking.cu", "kRankItems", _RANKING, "RANK_ITEMS_PER_THREAD"),
    Mirror("streaming.cu", "kOrdinalShift", _KERNELS, "STREAM_ORDINAL_SHIFT"),
    Mirror("streaming.cu", "kNoError", _KERNELS, "STREAM_NO_ERROR"),
    Mirror("streaming.cu", "kChecks", _KERNELS, "STREAM_CHECK_SLOTS"),
    Mirror("streaming.cu", "kStreamWideRows", _STREAM_LAUNCHERS, "STREAM_WIDE_ROWS"),
    Mirror("streaming.cu", "kStreamRanking", _STREAM_LAUNCHERS, "STREAM_RANKING"),
    Mirror("streaming.cu", "kStreamOneColumn", _STREAM_LAUNCHERS, "STREAM_ONE_COLUMN"),
)


# -- reading the sources -------------------------------------------------------

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"', re.M)
# A named enum's body, or `constexpr <type> <name> = <initialiser>;`.
_DECLARATION = re.compile(
    r"\benum\s+(?P<enum>\w+)\s*\{(?P<body>[^}]*)\}"
    r"|\bconstexpr\s+[\w\s]*?\b(?P<name>\w+)\s*=\s*(?P<value>[^;{}]+);")
_LITERAL = re.compile(r"\b(0[xX][0-9a-fA-F]+|[1-9][0-9]*|0)[uUlL]*\b")
_OPERATORS = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__,
              ast.LShift: int.__lshift__}


def _evaluate(text: str, names: dict) -> int | None:
    """An integer initialiser (literals with C suffixes, names declared
    before, + - * <<), or None for anything else (a kernel's own business)."""
    try:
        tree = ast.parse(_LITERAL.sub(lambda m: str(int(m.group(1), 0)), text.strip()),
                         mode="eval")
    except SyntaxError:
        return None

    def value(node):
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name) and node.id in names:
            return names[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            left, right = value(node.left), value(node.right)
            return None if left is None or right is None else _OPERATORS[type(node.op)](
                left, right)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            operand = value(node.operand)
            return None if operand is None else -operand
        return None

    return value(tree.body)


def parse_declarations(text: str, included=None) -> tuple[dict, dict]:
    """``(constants, enums)`` of one source: ``{name: int}`` (enumerators
    included, as C++ scopes them) and ``{enum: {enumerator: int}}``, in
    source order; ``included`` resolves ``#include "x"`` to its result."""
    constants, enums = {}, {}
    for name in _INCLUDE.findall(text):
        if included is not None:
            more_constants, more_enums = included(name)
            constants.update(more_constants)
            enums.update(more_enums)
    for match in _DECLARATION.finditer(_COMMENT.sub("", text)):
        if match["enum"]:
            layout, following = {}, 0
            for item in filter(None, (part.strip() for part in match["body"].split(","))):
                name, _, initialiser = (part.strip() for part in item.partition("="))
                value = _evaluate(initialiser, constants) if initialiser else following
                assert value is not None, f"enum {match['enum']}: cannot read {item!r}"
                layout[name] = constants[name] = value
                following = value + 1
            enums[match["enum"]] = layout
        else:
            value = _evaluate(match["value"], constants)
            if value is not None:
                constants[match["name"]] = value
    return constants, enums


def _sources() -> dict[str, tuple[dict, dict]]:
    """Every ``.cu`` and ``.cuh`` of kernels/, parsed with its includes."""
    parsed = {}

    def read(name):
        if name not in parsed:
            parsed[name] = parse_declarations(kernel_source(name), read)
        return parsed[name]

    for path in sorted(kernel_directory().glob("*.cu*")):
        read(path.name)
    return parsed


SOURCES = _sources()


def _snake_case(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def layout_as_python(layout: dict, renames: dict, skip: int) -> tuple:
    """An enum's layout as the Python sequence that must mirror it (None
    where no enumerator names an index)."""
    *members, (_, count) = layout.items()
    names = [name for name, _ in members]
    prefix = os.path.commonprefix(names)
    while prefix and not all(len(n) > len(prefix) and n[len(prefix)].isupper() for n in names):
        prefix = prefix[:-1]
    entries = {}
    for name, value in members:
        if value < skip:
            continue
        renamed = renames.get(name, _snake_case(name[len(prefix):]))
        for offset, entry in enumerate(renamed if isinstance(renamed, tuple) else (renamed,)):
            entries[value - skip + offset] = entry
    size = max(count - skip, max(entries, default=-1) + 1)
    return tuple(entries.get(index) for index in range(size))


# -- the checks ------------------------------------------------------------------


@pytest.mark.parametrize("row", INTERFACE,
                         ids=lambda r: f"{r.source}:{r.cxx}={r.module}.{r.python}")
def test_host_mirrors_kernel(row):
    constants, enums = SOURCES[row.source]
    python = getattr(importlib.import_module(row.module), row.python)
    if row.cxx in enums:
        assert tuple(python) == layout_as_python(enums[row.cxx], row.renames, row.skip), (
            f"{row.module}.{row.python} is not the layout of enum {row.cxx} in "
            f"kernels/{row.source}")
    else:
        assert row.cxx in constants, f"no constexpr integer {row.cxx} in kernels/{row.source}"
        assert python == constants[row.cxx], (
            f"{row.module}.{row.python} = {python!r}, kernels/{row.source} "
            f"{row.cxx} = {constants[row.cxx]}")


def test_every_named_enum_has_a_row():
    """A new layout in the sources gets its row (or its kernels keep it to themselves)."""
    declared = {enum for _, enums in SOURCES.values() for enum in enums}
    assert declared - {row.cxx for row in INTERFACE} == set()


def test_parser_reads_initialisers_comments_and_suffixes():
    text = """
        #include "other.cuh"
        constexpr int kA = 4;  // trailing comment = 9;
        constexpr unsigned long long kNone = 0x7fffffffffffffffull;
        /* constexpr int kHidden = 1; */
        constexpr int kTile = kA * 8;
        constexpr int kSkipped = kA > 2 ? kA : 2;
        enum Layout {
          kFirst = 2,   // a comment, with a comma
          kSecond,
          kBlock,       // kA values
          kAfter = kBlock + kA,
          kCount
        };
        enum Short { kX, kY, };
    """
    constants, enums = parse_declarations(text, lambda name: ({"kOuter": 3}, {}))
    assert enums == {"Layout": {"kFirst": 2, "kSecond": 3, "kBlock": 4, "kAfter": 8, "kCount": 9},
                     "Short": {"kX": 0, "kY": 1}}
    assert (constants["kA"], constants["kNone"], constants["kTile"], constants["kOuter"]) == (
        4, (1 << 63) - 1, 32, 3)
    assert "kHidden" not in constants and "kSkipped" not in constants
    renames = {"kBlock": ("b0", "b1", "b2", "b3")}
    assert layout_as_python(enums["Layout"], renames, 2) == (
        "first", "second", "b0", "b1", "b2", "b3", "after")
    # Without the rename, the indices kBlock's values fill are named by no enumerator.
    assert layout_as_python(enums["Layout"], {}, 2) == (
        "first", "second", "block", None, None, None, "after")
    assert layout_as_python(enums["Short"], {}, 1) == ()  # kY is the count


# -- each source's instantiations and launches in one launcher module -----------


def _launcher_module(source: str):
    return importlib.import_module(f"{_LAUNCHERS}.{source.removesuffix('.cu')}")


def test_each_kernel_source_has_its_launcher_module():
    """kernels/x.cu has metrics_gpu/backends/launchers/x.py, whose MODULE lists
    x.cu's instantiations; KERNEL_MODULES is exactly those MODULEs."""
    from metrics_gpu.backends.launchers import KERNEL_MODULES

    sources = sorted(path.name for path in kernel_directory().glob("*.cu"))
    for source in sources:
        assert _launcher_module(source).MODULE.source == source
    assert sorted(module.source for module in KERNEL_MODULES) == sources
    for module in KERNEL_MODULES:
        assert _launcher_module(module.source).MODULE is module


def _launch_calls(path) -> list:
    """The ``<object>.launch(...)`` calls of one Python file."""
    return [node for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "launch"]


def test_each_kernel_is_launched_from_its_launcher_module():
    """Every launch in the package names its own launcher module's SOURCE, so
    a kernel's arguments are packed next to its instantiations and nowhere
    else (a launcher that needs another source's kernel calls that module's
    function). LaunchBase.launch, which counts and forwards, is the one other."""
    package = Path(importlib.import_module("metrics_gpu").__file__).parent
    launchers = package / "backends" / "launchers"
    found = {}
    for path in sorted(package.rglob("*.py")):
        for call in _launch_calls(path):
            where = f"{path.relative_to(package)}:{call.lineno}"
            first = call.args[0] if call.args else None
            name = first.id if isinstance(first, ast.Name) else ast.dump(first) if first else None
            found[where] = name
            assert path.parent == launchers, f"a kernel launched outside {launchers}: {where}"
            expected = "source" if path.name == "base.py" else "SOURCE"
            assert name == expected, f"{where} launches {name}, not its module's {expected}"
    assert sum(name == "SOURCE" for name in found.values()) >= len(
        list(kernel_directory().glob("*.cu"))), found
