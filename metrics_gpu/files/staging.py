"""The chunks' buffers: a background thread that reads chunk after chunk into
rotating buffer sets (:class:`_Prefetch`), and their staging: on the host as
read, or with cuda through pinned memory and a copy stream."""

from __future__ import annotations

import queue
import threading
from typing import Any

from metrics_gpu.files.columns import OPTIONS
from metrics_gpu.files.readers import ColumnReader
from metrics_gpu.files.sources import FileProblem


class _Prefetch:
    """Reads chunk after chunk into rotating buffer sets in a background thread.

    ``free`` holds the sets the loop has handed back (with, on a GPU, the event
    after which its pinned memory may be written again); ``filled`` the sets
    read, in order. The last item is 0 rows (the end) or the reader's error.
    """

    def __init__(self, readers: dict[str, ColumnReader], buffer_sets: list[dict]):
        self.readers, self.buffer_sets = readers, buffer_sets
        self.free: queue.Queue = queue.Queue()
        self.filled: queue.Queue = queue.Queue()
        for i in range(len(buffer_sets)):
            self.free.put((i, None))
        self.thread = threading.Thread(target=self._run, name="metrics-gpu-reader",
                                       daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while True:
                i, ready = self.free.get()
                if i is None:
                    return
                if ready is not None:
                    ready.synchronize()  # the copy out of this pinned set is done
                rows = {name: reader.read(self.buffer_sets[i][name])
                        for name, reader in self.readers.items()}
                counts = set(rows.values())
                if len(counts) > 1:
                    short = min(rows, key=rows.__getitem__)
                    long_ = max(rows, key=rows.__getitem__)
                    raise FileProblem(
                        f"{OPTIONS[short]} {self.readers[short].path}: ends after "
                        f"{self.readers[short].position:,} rows, but "
                        f"{OPTIONS[long_]} {self.readers[long_].path} has more")
                count = counts.pop()
                self.filled.put((i, count))
                if count == 0:
                    return
        except BaseException as error:  # handed to the loop, raised there
            self.filled.put((None, error))

    def __iter__(self):
        while True:
            i, rows = self.filled.get()
            if i is None:
                raise rows
            if rows == 0:
                return
            yield i, rows

    def release(self, i: int, ready=None) -> None:
        self.free.put((i, ready))

    def close(self) -> None:
        self.free.put((None, None))
        self.thread.join()


class _HostStaging:
    """numpy and emulated backends: the chunk as read is the batch."""

    depth = 2

    def __init__(self, readers: dict[str, ColumnReader], rows: int):
        self.buffer_sets = [{name: r.empty(rows) for name, r in readers.items()}
                            for _ in range(self.depth)]

    def batch(self, i: int, rows: int) -> dict[str, Any]:
        return {name: buffer[:rows] for name, buffer in self.buffer_sets[i].items()}

    def done(self, i: int):
        return None


class _CudaStaging:
    """cuda: pinned host buffers, host-to-device copies on their own stream,
    three buffer sets. The update of chunk i (compute stream), the copy of
    chunk i + 1 (copy stream) and the read of chunk i + 2 (reader threads)
    overlap, each in a set of its own; events order them, the host never
    waits on the GPU in the loop. (On the host backends the reader and the
    update share the CPU's cores: two sets, the read of i + 1 beside the
    update of i, and a third would only add a chunk of memory.)"""

    depth = 3

    def __init__(self, readers: dict[str, ColumnReader], rows: int):
        import cupy
        import cupyx

        self.cupy = cupy
        self.buffer_sets = [{name: cupyx.empty_pinned((rows, *r.shape_tail), r.dtype)
                             for name, r in readers.items()} for _ in range(self.depth)]
        self.device_sets = [{name: cupy.empty((rows, *r.shape_tail), r.dtype)
                             for name, r in readers.items()} for _ in range(self.depth)]
        self.copy_stream = cupy.cuda.Stream(non_blocking=True)
        self.copied = [None] * self.depth
        self.consumed = [None] * self.depth

    def batch(self, i: int, rows: int) -> dict[str, Any]:
        stream = self.copy_stream
        if self.consumed[i] is not None:  # the update that read these device buffers
            stream.wait_event(self.consumed[i])
        out = {}
        for name, host in self.buffer_sets[i].items():
            device = self.device_sets[i][name][:rows]
            device.set(host[:rows], stream=stream)  # async: the source is pinned
            out[name] = device
        self.copied[i] = stream.record()
        self.cupy.cuda.get_current_stream().wait_event(self.copied[i])
        return out

    def done(self, i: int):
        self.consumed[i] = self.cupy.cuda.get_current_stream().record()
        return self.copied[i]  # the pinned set may be refilled once its copy is done
