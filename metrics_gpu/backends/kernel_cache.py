"""Compiled kernels kept on disk, so that a new process does not compile again.

The ``cuda`` backend compiles each kernel instantiation with NVRTC on first
use (about a second each); :class:`KernelCache` keeps the binary under
:func:`cache_root` / ``cuda``, keyed by everything the binary depends on: the
kernel sources (every file of the kernel directory, since they include one
another), the NVRTC options, the instantiation, the GPU architecture, and the
NVRTC and CuPy versions. The ``emulated`` backend keeps its shared libraries
under the same root.

An entry is written to a temporary file of its own and renamed over the
entry's name (atomic on POSIX and Windows), so a reader never sees half an
entry; processes filling the cache at once (DDP ranks, pytest workers) take a
lock per entry where the platform has ``fcntl``, so each entry is compiled
once. Every entry carries a SHA-256 of its contents: a truncated or damaged
one is compiled again and replaced, never loaded.

``METRICS_GPU_CACHE_DIR`` moves the cache; ``METRICS_GPU_KERNEL_CACHE=0``
turns the on-disk cache of the ``cuda`` backend off (each process compiles
again). Without them the root is ``$XDG_CACHE_HOME/metrics-gpu``, else
``~/.cache/metrics-gpu``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: the atomic rename alone (two writers may both compile)
    fcntl = None  # type: ignore[assignment]

CACHE_VARIABLE = "METRICS_GPU_CACHE_DIR"
SWITCH_VARIABLE = "METRICS_GPU_KERNEL_CACHE"

# An entry: MAGIC, the SHA-256 of the rest, a JSON header line, the binary.
MAGIC = b"metrics-gpu kernel 1\n"
_DIGEST_BYTES = 32


def cache_root() -> Path:
    """Where compiled kernels are kept: ``$METRICS_GPU_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/metrics-gpu``, else ``~/.cache/metrics-gpu``."""
    chosen = os.environ.get(CACHE_VARIABLE)
    if chosen:
        return Path(chosen).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "metrics-gpu"


def cache_enabled() -> bool:
    """False when ``METRICS_GPU_KERNEL_CACHE`` is 0, off, false or no."""
    return os.environ.get(SWITCH_VARIABLE, "1").strip().lower() not in ("0", "off", "false", "no")


def entry_name(key: Mapping[str, str]) -> str:
    """The file name of the entry of ``key`` (a digest of its sorted items)."""
    text = json.dumps(dict(key), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:40] + ".bin"


def encode_entry(binary: bytes, header: Mapping[str, str]) -> bytes:
    body = json.dumps(dict(header), sort_keys=True).encode() + b"\n" + bytes(binary)
    return MAGIC + hashlib.sha256(body).digest() + body


def decode_entry(data: bytes) -> tuple[bytes, dict] | None:
    """``(binary, header)`` of an entry, or None when it is not a whole,
    undamaged entry (another format, truncated, or any byte changed)."""
    if not data.startswith(MAGIC):
        return None
    digest = data[len(MAGIC):len(MAGIC) + _DIGEST_BYTES]
    body = data[len(MAGIC) + _DIGEST_BYTES:]
    if len(digest) != _DIGEST_BYTES or hashlib.sha256(body).digest() != digest:
        return None
    header, newline, binary = body.partition(b"\n")
    if not newline:
        return None
    try:
        parsed = json.loads(header)
    except ValueError:
        return None
    return (binary, parsed) if isinstance(parsed, dict) else None


@dataclass
class CacheCounts:
    """What a :class:`KernelCache` did: entries read, compiled (missing or
    turned off), and found damaged (then compiled again)."""

    hits: int = 0
    compiled: int = 0
    damaged: int = 0


@dataclass
class KernelCache:
    """Compiled binaries on disk under ``directory`` (None: compile every time)."""

    directory: Path | None
    counts: CacheCounts = field(default_factory=CacheCounts)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def default(cls, kind: str) -> KernelCache:
        """The cache of a backend's ``kind`` of binaries under :func:`cache_root`,
        or one that keeps nothing when the cache is turned off."""
        return cls(cache_root() / kind if cache_enabled() else None)

    def get_or_compile(self, key: Mapping[str, str],
                       compile: Callable[[], tuple[bytes, dict]]) -> tuple[bytes, dict]:
        """The binary and header of ``key``: read from disk, or made by
        ``compile()`` (which returns them) and written there."""
        if self.directory is None:
            self._count("compiled")
            return compile()
        path = self.directory / entry_name(key)
        found = self._read(path, count_damage=True)
        if found is not None:
            self._count("hits")
            return found
        self.directory.mkdir(parents=True, exist_ok=True)
        with _entry_lock(path):
            found = self._read(path)  # another process may have written it meanwhile
            if found is not None:
                self._count("hits")
                return found
            binary, header = compile()
            _write_atomically(path, encode_entry(binary, header))
        self._count("compiled")
        return binary, header

    def holds(self, key: Mapping[str, str]) -> bool:
        """Whether a whole, undamaged entry of ``key`` is on disk."""
        return self.directory is not None and self._read(self.directory / entry_name(key)) \
            is not None

    def _read(self, path: Path, count_damage: bool = False) -> tuple[bytes, dict] | None:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError:
            return None  # unreadable: compile, and try to replace it
        found = decode_entry(data)
        if found is None and count_damage:
            self._count("damaged")
        return found

    def _count(self, name: str) -> None:
        with self._lock:
            setattr(self.counts, name, getattr(self.counts, name) + 1)


@contextlib.contextmanager
def _entry_lock(path: Path) -> Iterator[None]:
    """One writer per entry across processes (and threads: each opens its
    own descriptor, and flock locks are per open file)."""
    if fcntl is None:
        yield
        return
    with open(path.with_suffix(".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write_atomically(path: Path, data: bytes) -> None:
    """A staging file of its own in the same directory, then a rename over
    ``path``: readers see the old entry or the new one, never a part."""
    handle, staged = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(staged, path)
    except BaseException:
        Path(staged).unlink(missing_ok=True)
        raise
