"""A column's files: ``path[:selector]`` split, and the files of a directory,
a glob or a list of sources found in reading order (the shards of a sharded
column); :class:`FileProblem`, the error of every problem with a file."""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence, Union

from metrics_gpu._common.extras import install_hint

ARROW_SUFFIXES = (".parquet", ".pq", ".arrow", ".feather", ".ipc")
TEXT_SUFFIXES = (".csv", ".txt")
SUFFIXES = (".npy", ".npz", *TEXT_SUFFIXES, *ARROW_SUFFIXES)
IO_INSTALL_HINT = f"install the [io] extra: {install_hint('io')}"
# Names a directory's listing skips: hidden files and the marker and metadata
# files that Spark, Hadoop and Dask write beside the data (_SUCCESS, _metadata).
SKIPPED_PREFIXES = (".", "_")

# A column's source: ``path[:selector]`` (a file, a directory, a glob), or a
# list of them (shards read one after the other).
Source = Union[str, "os.PathLike[str]", Sequence[str]]


class FileProblem(ValueError):
    """A prediction file that cannot be used: missing, unreadable, wrong type or shape."""


# -- naming a column --------------------------------------------------------------


def split_source(text: str) -> tuple[Path, str | None]:
    """``"path"`` or ``"path:selector"`` -> ``(path, selector)``. A path that
    exists as given (a file or a directory) is never split (names may hold a
    colon); a glob's selector follows it (``preds/*.parquet:label``)."""
    path = Path(text)
    if path.exists() or ":" not in text:
        return path, None
    head, selector = text.rsplit(":", 1)
    return Path(head), (selector or None)


@dataclass
class _Shard:
    """One file of a sharded column: where it is, how messages name it, and its
    rows once known (from its header up front, else when reading ends it)."""

    path: Path
    selector: str | None
    label: str
    rows: int | None = None
    # A Hive-partitioned Parquet file: its pyarrow.dataset fragment and the
    # dataset's schema (the file's columns and the partition keys).
    fragment: Any = None
    schema: Any = None


def _natural_key(text: str) -> tuple:
    """Sort key of a path in natural order: runs of digits compare as numbers
    (``part-2`` before ``part-10``); the text itself breaks ties (``01`` / ``1``)."""
    parts = re.split(r"(\d+)", text)
    return tuple(int(part) if i % 2 else part for i, part in enumerate(parts)), text


def _is_glob(text: str) -> bool:
    return any(character in text for character in "*?[")


def _skipped(relative: Path) -> bool:
    """Whether a directory listing leaves the file out: a hidden or ``_``-prefixed
    name anywhere in its path below the directory (``_SUCCESS``, ``.part.crc``)."""
    return any(part.startswith(SKIPPED_PREFIXES) for part in relative.parts)


def _source_shards(source: Source, argument: str) -> tuple[str, list[_Shard]] | None:
    """The files of a sharded source, in reading order, and how messages name
    the source: None for one file (or a path that does not exist: the single
    file reader says so). A directory or glob matching no file is a
    :class:`FileProblem` naming it."""
    if not isinstance(source, (str, os.PathLike)):
        items = [os.fspath(item) for item in source]
        if not items:
            raise FileProblem(f"{argument}: no file given")
        if len(items) == 1:
            return _source_shards(items[0], argument)
        shards: list[_Shard] = []
        for item in items:
            sharded = _source_shards(item, argument)
            if sharded is None:
                path, selector = split_source(item)
                shards.append(_Shard(path, selector, str(path)))
            else:  # named by their whole path: two directories may hold part-0.npy
                shards += [_Shard(s.path, s.selector, str(s.path), fragment=s.fragment,
                                  schema=s.schema) for s in sharded[1]]
        name = " ".join(items) if len(items) <= 3 else \
            f"{items[0]} ... {items[-1]} ({len(items):,} sources)"
        return name, shards
    path, selector = split_source(os.fspath(source))
    if path.is_file():
        return None
    if path.is_dir():
        return str(path), _directory_shards(path, selector, argument)
    if _is_glob(str(path)):
        matches = [Path(m) for m in glob.glob(str(path), recursive=True)]
        matches = sorted((m for m in matches if m.is_file() and not _skipped(Path(m.name))),
                         key=lambda m: _natural_key(str(m)))
        if not matches:
            raise FileProblem(f"{argument} {path}: no file matches this pattern")
        return str(path), [_Shard(m, selector, str(m)) for m in matches]
    return None


def _directory_shards(root: Path, selector: str | None, argument: str) -> list[_Shard]:
    """A directory's files with a supported suffix, in the natural order of their
    names; below Hive partition directories (``key=value/``), every Parquet file
    under it, as fragments of one ``pyarrow.dataset`` (the keys are columns)."""
    children = sorted(root.iterdir(), key=lambda child: _natural_key(child.name))
    partitioned = any(child.is_dir() and "=" in child.name and not _skipped(Path(child.name))
                      for child in children)
    if not partitioned:
        files = [child for child in children if child.is_file()
                 and not _skipped(Path(child.name)) and child.suffix.lower() in SUFFIXES]
        if not files:
            raise FileProblem(f"{argument} {root}: the directory holds no file to read "
                              f"({', '.join(SUFFIXES)}; hidden and _ names skipped)")
        return [_Shard(f, selector, f.name) for f in files]
    files = sorted((f for f in root.rglob("*") if f.is_file()
                    and f.suffix.lower() in (".parquet", ".pq")
                    and not _skipped(f.relative_to(root))),
                   key=lambda f: _natural_key(f.relative_to(root).as_posix()))
    if not files:
        raise FileProblem(f"{argument} {root}: the partitioned directory holds no Parquet "
                          "file (hidden and _ names skipped)")
    try:
        pa = _pyarrow()
    except FileProblem as error:
        raise FileProblem(f"{argument} {root}: {error}") from None
    import pyarrow.dataset as ds

    try:
        dataset = ds.dataset([str(f) for f in files], format="parquet",
                             partitioning=ds.partitioning(flavor="hive"),
                             partition_base_dir=str(root))
        fragments = {Path(fragment.path): fragment for fragment in dataset.get_fragments()}
    except (pa.ArrowException, OSError) as error:
        raise FileProblem(f"{argument} {root}: not a readable Parquet dataset ({error})") \
            from None
    return [_Shard(f, selector, f.relative_to(root).as_posix(), fragment=fragments[f],
                   schema=dataset.schema) for f in files]


def source_files(source: Source, argument: str = "") -> list[tuple[Path, str | None]]:
    """The ``(path, selector)`` of each file of ``source`` (one file, a directory,
    a glob or a list of them), in the order they are read."""
    sharded = _source_shards(source, argument)
    if sharded is None:
        return [split_source(os.fspath(source if isinstance(source, (str, os.PathLike))
                                       else source[0]))]
    return [(shard.path, shard.selector) for shard in sharded[1]]


def _pyarrow():
    try:
        import pyarrow
        import pyarrow.compute
        import pyarrow.ipc
        import pyarrow.parquet
    except ImportError:
        raise FileProblem(f"reading Parquet / Arrow files needs pyarrow: {IO_INSTALL_HINT}") \
            from None
    return pyarrow
