"""The on-disk kernel cache (metrics_gpu.backends.kernel_cache) and its use by the cuda
backend and `metrics-gpu warmup`, without a GPU: hits and misses, damaged
entries, the switches, writers racing in threads and processes, and a
process restart (a subprocess on the stand-in CuPy of test_cuda_device)."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from metrics_gpu.backends import kernel_cache as _kernel_cache
from metrics_gpu.backends.kernel_cache import (
    CACHE_VARIABLE,
    SWITCH_VARIABLE,
    KernelCache,
    cache_root,
    decode_entry,
    encode_entry,
    entry_name,
)
from test_cuda_device import fake_cupy, fake_device

KEY = {"source": "scores.cu", "expression": "k<int>", "architecture": "90"}


class Compiler:
    """A compile function that counts its calls (optionally slow)."""

    def __init__(self, binary=b"\x7fELF binary \x00\xff", seconds=0.0):
        self.binary, self.seconds, self.calls = binary, seconds, 0

    def __call__(self):
        self.calls += 1
        time.sleep(self.seconds)
        return self.binary, {"lowered_name": "_Z1kIiEvv"}


def test_a_miss_compiles_and_writes_a_hit_reads(tmp_path):
    compiler = Compiler()
    first = KernelCache(tmp_path)
    assert first.get_or_compile(KEY, compiler) == (compiler.binary, {"lowered_name": "_Z1kIiEvv"})
    again = KernelCache(tmp_path)  # another process's cache object: the same folder
    assert again.get_or_compile(KEY, compiler) == (compiler.binary, {"lowered_name": "_Z1kIiEvv"})
    assert compiler.calls == 1
    assert (first.counts.compiled, again.counts.hits) == (1, 1)
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []
    assert again.holds(KEY) and not again.holds({**KEY, "expression": "k<long>"})


@pytest.mark.parametrize("field", ["source", "expression", "architecture", "nvrtc", "sources"])
def test_each_part_of_the_key_names_its_own_entry(tmp_path, field):
    cache, compiler = KernelCache(tmp_path), Compiler()
    cache.get_or_compile(KEY, compiler)
    cache.get_or_compile({**KEY, field: "other"}, compiler)
    assert compiler.calls == 2
    assert entry_name(KEY) != entry_name({**KEY, field: "other"})
    assert entry_name(KEY) == entry_name(dict(reversed(list(KEY.items()))))  # order-free


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[:len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "byte flipped":
        i = len(data) - 3  # in the binary
        path.write_bytes(data[:i] + bytes([data[i] ^ 0x40]) + data[i + 1:])
    elif how == "header flipped":
        i = len(_kernel_cache.MAGIC) + 40  # in the JSON header
        path.write_bytes(data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1:])
    elif how == "other format":
        path.write_bytes(b"0" * 32 + data)  # e.g. CuPy's md5-prefixed cubin


@pytest.mark.parametrize("how", ["truncated", "empty", "byte flipped", "header flipped",
                                 "other format"])
def test_a_damaged_entry_is_compiled_again_and_replaced(tmp_path, how):
    compiler = Compiler()
    KernelCache(tmp_path).get_or_compile(KEY, compiler)
    path = tmp_path / entry_name(KEY)
    _damage(path, how)
    assert decode_entry(path.read_bytes()) is None
    cache = KernelCache(tmp_path)
    assert cache.get_or_compile(KEY, compiler)[0] == compiler.binary
    assert compiler.calls == 2 and cache.counts.damaged == 1 and cache.counts.compiled == 1
    assert decode_entry(path.read_bytes()) == (compiler.binary, {"lowered_name": "_Z1kIiEvv"})
    assert KernelCache(tmp_path).get_or_compile(KEY, compiler)[0] == compiler.binary
    assert compiler.calls == 2


def test_entries_round_trip_any_bytes():
    for binary in (b"", b"\n\n", bytes(range(256)) * 3):
        header = {"lowered_name": "a\nb", "note": "\u00e9"}
        assert decode_entry(encode_entry(binary, header)) == (binary, header)


def test_the_root_and_the_switch(monkeypatch, tmp_path):
    monkeypatch.delenv(CACHE_VARIABLE, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "metrics-gpu"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "metrics-gpu"
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "chosen"))
    assert KernelCache.default("cuda").directory == tmp_path / "chosen" / "cuda"
    for off in ("0", "off", "False", "no"):
        monkeypatch.setenv(SWITCH_VARIABLE, off)
        cache, compiler = KernelCache.default("cuda"), Compiler()
        assert cache.directory is None
        cache.get_or_compile(KEY, compiler)
        cache.get_or_compile(KEY, compiler)
        assert compiler.calls == 2 and not cache.holds(KEY)
    assert not (tmp_path / "chosen").exists()  # nothing written while off
    monkeypatch.setenv(SWITCH_VARIABLE, "1")
    assert KernelCache.default("cuda").directory == tmp_path / "chosen" / "cuda"


def test_threads_filling_one_entry_compile_it_once(tmp_path):
    compiler = Compiler(seconds=0.2)
    caches = [KernelCache(tmp_path) for _ in range(4)]
    barrier = threading.Barrier(len(caches), timeout=30)
    results = []

    def fill(cache):
        barrier.wait()
        results.append(cache.get_or_compile(KEY, compiler))

    threads = [threading.Thread(target=fill, args=(cache,)) for cache in caches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(results) == 4 and len(set(r[0] for r in results)) == 1
    assert compiler.calls == 1
    assert [p for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []


def _fill_in_a_process(directory: str, marks: str, start_at: float) -> bytes:
    """A process's first use of an entry; it leaves a file in ``marks`` when it compiles."""
    def compile_it():
        Path(marks, f"compiled-{os.getpid()}").touch()
        time.sleep(0.3)
        return b"binary of the kernel" * 1000, {"lowered_name": "k"}

    time.sleep(max(0.0, start_at - time.time()))
    return KernelCache(Path(directory)).get_or_compile(KEY, compile_it)[0]


def test_processes_filling_one_entry_compile_it_once_and_read_whole_entries(tmp_path):
    """Writers in several processes at once (DDP ranks, pytest workers): one
    compiles, the others wait for its entry and read it whole."""
    if _kernel_cache.fcntl is None:
        pytest.skip("no fcntl: concurrent writers may each compile (the rename stays atomic)")
    marks = tmp_path / "marks"
    marks.mkdir()
    context = multiprocessing.get_context("spawn")
    start_at = time.time() + 3.0  # after every spawned interpreter has started
    with context.Pool(3) as pool:
        binaries = pool.starmap(_fill_in_a_process,
                                [(str(tmp_path / "cache"), str(marks), start_at)] * 3)
    assert set(binaries) == {b"binary of the kernel" * 1000}
    assert len(list(marks.iterdir())) == 1
    assert [p for p in (tmp_path / "cache").iterdir() if p.suffix == ".tmp"] == []


# -- the cuda backend and warmup, on the stand-in CuPy ---------------------------------


def test_the_cuda_device_keeps_its_kernels_on_disk(tmp_path):
    """A second device (a new process's) compiles nothing: it loads the
    binary and the lowered name the first one wrote."""
    device, records = fake_device(cache_directory=tmp_path)
    device.launch("scores.cu", "fused_logits_pass<int>", 1, 256, [np.int64(5)])
    assert records["compiles"] == 1
    again, again_records = fake_device(cache_directory=tmp_path)
    again.launch("scores.cu", "fused_logits_pass<int>", 1, 256, [np.int64(5)])
    assert "compiles" not in again_records
    assert again_records["loaded"] == records["loaded"] == b"cubin of fused_logits_pass<int>"
    assert again_records["function"].name == "lowered fused_logits_pass<int>"
    assert again.kernel_cache.counts.hits == 1
    again.launch("scores.cu", "fused_logits_pass<long long>", 1, 256, [])  # another one
    assert again_records["compiles"] == 1


_RESTART_SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path[:0] = [{tests!r}, {root!r}]
    import numpy as np
    from metrics_gpu.backends.kernel_cache import KernelCache
    from test_cuda_device import fake_device
    device, records = fake_device(cache_directory=KernelCache.default("cuda").directory)
    device.launch("streaming.cu", "streaming_update<int>", 1, 256, [np.int64(1)])
    print(json.dumps({{"compiles": records.get("compiles", 0),
                      "loaded": records["loaded"].decode()}}))
""")


def test_the_cache_survives_a_process_restart(tmp_path):
    """Two processes, one after the other, with the same cache folder: the
    first compiles, the second compiles nothing."""
    tests = str(Path(__file__).resolve().parent)
    script = _RESTART_SCRIPT.format(tests=tests, root=str(Path(tests).parent))
    environment = {**os.environ, CACHE_VARIABLE: str(tmp_path)}
    environment.pop(SWITCH_VARIABLE, None)
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", script], env=environment,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert [run["compiles"] for run in runs] == [1, 0]
    assert runs[0]["loaded"] == runs[1]["loaded"] == "cubin of streaming_update<int>"
    assert len(list((tmp_path / "cuda").glob("*.bin"))) == 1


def test_warmup_compiles_what_is_missing_once(tmp_path, monkeypatch):
    """metrics-gpu warmup (in one process, on the stand-in CuPy): every
    instantiation of KERNEL_MODULES into the cache, then nothing to do."""
    from metrics_gpu import cli
    from metrics_gpu.backends import warmup as _warmup
    from metrics_gpu.backends import cuda
    from metrics_gpu.backends.launchers import KERNEL_MODULES

    records: dict = {}
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(0, records))
    monkeypatch.setattr(cuda, "cuda_unavailable_reason", lambda: None)
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path))
    monkeypatch.delenv(SWITCH_VARIABLE, raising=False)
    every = sum(len(m.name_expressions) for m in KERNEL_MODULES)
    first = _warmup.warmup(jobs=1)
    assert (first.instantiations, first.already_cached, first.compiled) == (every, 0, every)
    assert records["compiles"] == every
    assert len(list((tmp_path / "cuda").glob("*.bin"))) == every
    assert first.directory == tmp_path / "cuda" and first.architecture == "90"
    (tmp_path / "cuda" / sorted(p.name for p in (tmp_path / "cuda").glob("*.bin"))[0]) \
        .write_bytes(b"damaged")
    assert cli.main(["warmup", "--jobs", "1"]) == 0
    assert records["compiles"] == every + 1  # only the damaged one again
    second = _warmup.warmup()
    assert (second.already_cached, second.compiled) == (every, 0)
    assert "0 compiled" in second.summary()
    monkeypatch.setenv(SWITCH_VARIABLE, "0")
    with pytest.raises(ValueError, match="turns the kernel cache off"):
        _warmup.warmup()


def test_warmup_without_a_gpu_says_why(capsys):
    from metrics_gpu import cli
    from metrics_gpu.backends.cuda import cuda_unavailable_reason

    if cuda_unavailable_reason() is None:
        pytest.skip("a GPU is here")
    assert cli.main(["warmup"]) == 2
    assert "cuda backend cannot run here" in capsys.readouterr().err
