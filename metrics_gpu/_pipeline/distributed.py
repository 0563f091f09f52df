"""The all-reduce of a stream's count words over torch.distributed, shared by
the multiclass and multilabel streams."""

from __future__ import annotations

import sys

import numpy as np


def initialised_distributed():
    """``torch.distributed`` when torch is imported and a process group is
    initialised (what ``sync`` reduces over), else None."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.distributed.is_available() or \
            not torch.distributed.is_initialized():
        return None
    return torch.distributed


def _as_torch(array):
    """A state array as a torch tensor sharing its memory (host or device)."""
    import torch

    if isinstance(array, np.ndarray):
        return torch.from_numpy(array)
    return torch.from_dlpack(array)


def _add_words(mine, theirs) -> None:
    """128-bit sums held as (low, high) uint64 word pairs: mine += theirs."""
    for i in (0, 2):
        low = mine[i:i + 1] + theirs[i:i + 1]          # wraps modulo 2^64
        carry = (low < mine[i:i + 1]).astype(np.uint64)
        mine[i + 1:i + 2] += theirs[i + 1:i + 2] + carry
        mine[i:i + 1] = low


def _all_reduce_words(tensor, dist, group) -> None:
    """Sum 128-bit (low, high) words over ranks exactly: the low words are
    split into 32-bit halves (no int64 sum of them can overflow for fewer
    than 2^31 ranks), summed, and carried into the high words."""
    import torch

    words = tensor.cpu().numpy().view(np.uint64).copy()
    parts = torch.tensor([int(words[i]) & 0xFFFFFFFF for i in (0, 2)]
                         + [int(words[i]) >> 32 for i in (0, 2)]
                         + [int(np.int64(words[i].view(np.int64))) for i in (1, 3)],
                         dtype=torch.int64)
    if tensor.is_cuda:
        parts = parts.to(tensor.device)
    dist.all_reduce(parts, group=group)
    summed = [int(v) for v in parts.cpu().tolist()]
    for j, i in enumerate((0, 2)):
        value = summed[j] + (summed[2 + j] << 32) + ((summed[4 + j] % (1 << 64)) << 64)
        value %= 1 << 128
        words[i], words[i + 1] = value & ((1 << 64) - 1), value >> 64
    tensor.copy_(torch.from_numpy(words.view(np.int64)).to(tensor.device))
