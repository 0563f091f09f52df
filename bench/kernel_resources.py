"""Kernel resources without a GPU: registers, stack, spills, shared memory, occupancy.

    python bench/kernel_resources.py [--architectures sm_80 sm_90 sm_100]
        [--modules scores.cu confusion.cu ...] [--jobs N] [--json PATH] [--markdown PATH]
        [--sass KERNEL ...]

Compiles every instantiation of ``metrics_gpu.backends.launchers.KERNEL_MODULES`` with
NVRTC (ptxas through ``--ptxas-options=-v``, as the CI gate compiles them)
for each architecture and prints, per kernel: registers per thread, stack
frame and spill bytes, static shared memory, and the resident warps per SM
that those allow at the block size the backend launches (theoretical
occupancy; dynamic shared memory, which depends on K, is left out), one line
per kernel template and architecture with the range over its instantiations
(n of them); ``--json`` keeps every instantiation. "spill" is the most bytes
stored plus loaded by any one instantiation.

The figures come from the compiler, not a GPU: commit this output with each
kernel change (``bench/results/<date>-kernel-resources.{json,md}``). The hot
kernels' limits (no spills; the score pass's register budget) are tested in
the CI gate, ``tests/test_nvrtc_compile.py``.

``--sass KERNEL ...`` (name expressions, e.g. ``"fused_logits_pass<long long,
float, mg::unit_weight>"``) also disassembles those kernels for sm_90 with
nvdisasm (the ``nvidia-cuda-nvdisasm`` wheel, or NVDISASM=path) and prints
the static instruction counts of its three largest innermost loops that read
global memory (the column loop of the score pass reads kScoreUnroll columns
a trip, so its instructions per load are about those per element). Static
counts: every branch of a body, taken or not (the one-vs-all softplus
included, though most calls skip it).

Exit status: 0 when everything compiled and no kernel spills, 1 otherwise,
2 when NVRTC is missing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

from _common import REPO, git_commit

sys.path.insert(0, str(REPO / "tools"))  # the NVRTC gate: a repository tool, not the package

import nvrtc_gate  # noqa: E402
from metrics_gpu.backends.kernel_sources import kernel_source
from metrics_gpu.backends.launchers import KERNEL_MODULES

# Per-SM limits of the architectures (CUDA C++ Programming Guide, "Technical
# Specifications per Compute Capability"): 64K 32-bit registers, allocated
# per warp in units of 256; threads and blocks per SM; shared memory per SM
# (of which 1 KB per block is reserved by the system).
ARCHITECTURE_LIMITS = {
    "sm_75": {"threads": 1024, "blocks": 16, "shared": 64 * 1024},
    "sm_80": {"threads": 2048, "blocks": 32, "shared": 164 * 1024},
    "sm_86": {"threads": 1536, "blocks": 16, "shared": 100 * 1024},
    "sm_89": {"threads": 1536, "blocks": 24, "shared": 100 * 1024},
    "sm_90": {"threads": 2048, "blocks": 32, "shared": 228 * 1024},
    "sm_100": {"threads": 2048, "blocks": 32, "shared": 228 * 1024},
    "sm_120": {"threads": 1536, "blocks": 32, "shared": 100 * 1024},
}
REGISTERS_PER_SM = 65536
REGISTER_UNIT = 256  # registers are allocated per warp in these units
RESERVED_SHARED_PER_BLOCK = 1024
# Every kernel is launched with blocks of 256 threads on a GPU (the cuda
# backend's block_threads; the launch bounds of the .cu sources).
BLOCK_THREADS = 256


def resident_warps(architecture: str, registers: int, shared_bytes: int, block: int) -> int:
    """Warps per SM for blocks of `block` threads (theoretical occupancy)."""
    limits = ARCHITECTURE_LIMITS[architecture]
    warps_per_block = math.ceil(block / 32)
    per_warp = math.ceil(max(registers, 1) * 32 / REGISTER_UNIT) * REGISTER_UNIT
    by_registers = (REGISTERS_PER_SM // per_warp) // warps_per_block
    by_threads = limits["threads"] // (warps_per_block * 32)
    by_shared = limits["shared"] // (shared_bytes + RESERVED_SHARED_PER_BLOCK)
    return min(by_registers, by_threads, by_shared, limits["blocks"]) * warps_per_block


def template_name(expression: str) -> str:
    return expression.split("<", 1)[0]


def survey(architectures, modules, jobs):
    """Rows of figures, one per (architecture, instantiation), and failures."""
    summary = nvrtc_gate.compile_all(architectures, modules, jobs=jobs)
    rows = []
    for result in summary.results:
        for expression, found in result.resources.items():
            block = BLOCK_THREADS
            warps = resident_warps(result.architecture, found.registers, found.shared_bytes, block)
            max_warps = ARCHITECTURE_LIMITS[result.architecture]["threads"] // 32
            rows.append({
                "module": result.module, "architecture": result.architecture,
                "kernel": expression, "registers": found.registers,
                "stack_bytes": found.stack_bytes, "spill_stores": found.spill_stores,
                "spill_loads": found.spill_loads, "shared_bytes": found.shared_bytes,
                "block_threads": block, "warps_per_sm": warps,
                "occupancy": round(warps / max_warps, 3),
            })
        missing = set(result.lowered_names) - set(result.resources)
        for expression in sorted(missing):
            print(f"warning: ptxas reported nothing for {expression} ({result.architecture})",
                  file=sys.stderr)
    return rows, summary.failures


def grouped(rows):
    """One line per (architecture, kernel template): the range of each figure
    over its instantiations (every row is in the JSON)."""
    groups = defaultdict(list)
    for row in rows:
        groups[(row["architecture"], row["module"], template_name(row["kernel"]))].append(row)
    order = {module.source: i for i, module in enumerate(KERNEL_MODULES)}
    out = []
    for (architecture, module, template), members in sorted(
            groups.items(),
            key=lambda item: (int(item[0][0][3:]), order[item[0][1]], item[0][2])):
        def span(key):
            values = [m[key] for m in members]
            return (min(values), max(values))
        out.append({"module": module, "architecture": architecture, "template": template,
                    "instantiations": len(members), "registers": span("registers"),
                    "stack_bytes": span("stack_bytes"),
                    "spill_bytes": max(m["spill_stores"] + m["spill_loads"] for m in members),
                    "shared_bytes": span("shared_bytes"), "warps_per_sm": span("warps_per_sm"),
                    "occupancy": span("occupancy")})
    return out


def _span(pair, spec="") -> str:
    low, high = pair
    return f"{low:{spec}}" if low == high else f"{low:{spec}}-{high:{spec}}"


def table(groups) -> str:
    header = (f"{'arch':<7}{'kernel':<30}{'n':>4}{'regs':>9}{'stack':>9}{'spill':>7}"
              f"{'smem':>12}{'warps/SM':>10}{'occupancy':>11}")
    lines = [header]
    for g in groups:
        lines.append(
            f"{g['architecture']:<7}{g['template']:<30}{g['instantiations']:>4}"
            f"{_span(g['registers']):>9}{_span(g['stack_bytes']):>9}{g['spill_bytes']:>7}"
            f"{_span(g['shared_bytes']):>12}{_span(g['warps_per_sm']):>10}"
            f"{_span(g['occupancy'], '.2f'):>11}")
    return "\n".join(lines)


def nvdisasm_path() -> str | None:
    if os.environ.get("NVDISASM"):
        return os.environ["NVDISASM"]
    try:
        import nvidia
    except ImportError:
        return shutil.which("nvdisasm")
    for base in nvidia.__path__:
        for candidate in Path(base).glob("*/bin/nvdisasm"):
            return str(candidate)
    return shutil.which("nvdisasm")


_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]+\*/\s*(?:@!?U?P[0-9T]+\s+)?([A-Z][A-Z0-9]*)([.\w]*)")


def innermost_loops(lines: list[str]):
    """(instructions, global loads, opcode counts, load widths) of each
    innermost loop (a label and a backward branch to it, with no loop inside)
    that reads global memory, largest first: the column loop of a score row,
    the sample loop of labels, and the smaller loops of set-up and flush.
    A load's width is its bits (LDG.E.128: 128; LDG.E: 32)."""
    labels, loops = {}, []
    for i, line in enumerate(lines):
        label = re.match(r"^\s*(\.L_x_\d+):", line)
        if label:
            labels[label.group(1)] = i
        branch = re.search(r"BRA `\((\.L_x_\d+)\)", line)
        if branch and labels.get(branch.group(1), i) < i:
            loops.append((labels[branch.group(1)], i))
    found = []
    for start, end in loops:
        if any(start <= a and b <= end and (a, b) != (start, end) for a, b in loops):
            continue  # holds another loop
        matches = [m for m in map(_INSTRUCTION.match, lines[start:end + 1]) if m]
        body = [m.group(1) for m in matches]
        widths = Counter(_load_bits(m.group(2)) for m in matches if m.group(1) == "LDG")
        if widths:
            found.append((len(body), sum(widths.values()), Counter(body), widths))
    return sorted(found, key=lambda loop: -loop[0])


def _load_bits(modifiers: str) -> int:
    """Bits of a global load from its modifiers (.E.128, .E.U16, .E.64 ...)."""
    for part in modifiers.split("."):
        if part in ("64", "128"):
            return int(part)
        if part in ("U8", "S8"):
            return 8
        if part in ("U16", "S16"):
            return 16
    return 32


def kernel_text(lines: list[str], name: str) -> list[str]:
    """The disassembly of the kernels named ``name`` (their ``.text``
    sections): a module's cubin also holds its kernels that are not
    templates, whose loops are not the named kernel's."""
    kept, keep = [], False
    for line in lines:
        section = re.match(r"^\s*\.section\s+\.text\.([^,\s]+)", line)
        if section:
            mangled = section.group(1)
            keep = f"{len(name)}{name}" in mangled  # _Z<length><name>...
        elif keep:
            kept.append(line)
    return kept


def sass_loops(expressions, architecture="sm_90") -> list[str]:
    """One line per kernel: its hot loop's static instruction count."""
    tool = nvdisasm_path()
    if tool is None:
        return ["--sass: nvdisasm not found (pip install nvidia-cuda-nvdisasm, or set NVDISASM)"]
    lines = [f"hot loops ({architecture}, nvdisasm; static counts):"]
    for expression in expressions:
        module = next((m for m in KERNEL_MODULES if expression in m.name_expressions), None)
        if module is None:
            lines.append(f"  {expression}: not in KERNEL_MODULES")
            continue
        result = nvrtc_gate.compile_module(kernel_source(module.source), module.source, [expression],
                                       nvrtc_gate.module_options(), architecture=architecture,
                                       keep_cubin=True)
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "kernel.cubin"
            path.write_bytes(result.cubin)
            text = subprocess.run([tool, "-c", str(path)], capture_output=True, text=True,
                                  check=True).stdout.splitlines()
        loops = innermost_loops(kernel_text(text, template_name(expression)))
        lines.append(f"  {expression}: " + ("no loop reads global memory" if not loops else ""))
        for count, loads, opcodes, widths in loops[:3]:
            common = ", ".join(f"{op} {n}" for op, n in opcodes.most_common(5))
            bits = "+".join(f"{n}x{b}" for b, n in sorted(widths.items(), reverse=True))
            lines.append(f"    {count:5d} instructions a trip, {loads:2d} global loads "
                         f"({bits} bits; {count / loads:.0f} per load): {common}")
    return lines


def json_text(commit_id: str, nvrtc: str, rows: list[dict]) -> str:
    """The JSON file: one instantiation per line (thousands of them)."""
    lines = ",\n".join("  " + json.dumps(row) for row in rows)
    return (f'{{"commit": {json.dumps(commit_id)}, "nvrtc": {json.dumps(nvrtc)}, "rows": [\n'
            f"{lines}\n]}}\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--architectures", nargs="+", default=["sm_80", "sm_90", "sm_100"],
                        choices=sorted(ARCHITECTURE_LIMITS))
    parser.add_argument("--modules", nargs="+", default=None,
                        help="kernel sources to compile (default: all)")
    parser.add_argument("--jobs", type=int, default=nvrtc_gate.default_jobs())
    parser.add_argument("--json", type=Path, help="write every row (ungrouped) here")
    parser.add_argument("--markdown", type=Path, help="write the printed output here too")
    parser.add_argument("--sass", nargs="+", default=[], metavar="KERNEL",
                        help="name expressions whose hot loop to count with nvdisasm (sm_90)")
    arguments = parser.parse_args(argv)
    modules = [m for m in KERNEL_MODULES
               if arguments.modules is None or m.source in arguments.modules]
    if not modules:
        parser.error(f"no such module; known: {[m.source for m in KERNEL_MODULES]}")
    try:
        major, minor = nvrtc_gate.nvrtc_version()
    except nvrtc_gate.NvrtcNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    rows, failures = survey(arguments.architectures, modules, arguments.jobs)
    groups = grouped(rows)
    spilling = sorted({(r["architecture"], r["kernel"]) for r in rows
                       if r["spill_stores"] or r["spill_loads"]})
    commit = git_commit(dirty=False) or "unknown"
    head = (f"commit {commit}; NVRTC {major}.{minor} (ptxas -v), options "
            f"{' '.join(nvrtc_gate.module_options()[:-1])}; {len(rows)} kernels compiled, "
            f"{datetime.date.today().isoformat()}")
    lines = [head, "", table(groups), ""]
    lines.append(f"spills: {len(spilling)} kernel(s)"
                 + "".join(f"\n  {arch} {kernel}" for arch, kernel in spilling))
    for failure in failures:
        lines.append(f"FAILED: {failure.module} {failure.architecture}: {failure.reason}")
    if arguments.sass:
        lines += ["", *sass_loops(arguments.sass)]
    text = "\n".join(lines)
    print(text)
    if arguments.json:
        arguments.json.write_text(json_text(commit, f"{major}.{minor}", rows))
    if arguments.markdown:
        arguments.markdown.write_text(
            f"# Kernel resources (ptxas through NVRTC, no GPU)\n\n"
            f"`python bench/kernel_resources.py {' '.join(argv if argv is not None else sys.argv[1:])}`"
            f"\n\nOutput as printed:\n\n```\n{text}\n```\n")
    return 1 if failures or spilling else 0


if __name__ == "__main__":
    sys.exit(main())
