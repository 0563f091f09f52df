"""The test of a stream's first batch of scores read as logits: warn when its
rows are rows of probabilities (a host batch at once; a sample of a GPU
batch kept on the device for the next compute).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from metrics_gpu._formulas import labels as F
from metrics_gpu._validation import StreamBatch, probabilities_read_as_logits, probability_rows

if TYPE_CHECKING:
    from metrics_gpu.backends import Backend


# At most this many scores of a GPU state's first batch are kept for the
# "logits that look like probabilities" test at compute (at least one sample).
PROBABILITY_SAMPLE_SCORES = 1 << 16


def _first_rows_sample(backend: Backend, batch: StreamBatch):
    """``(the batch's first samples' scores, their type)`` copied into a
    buffer of their own by one device-to-device copy (no kernel to compile,
    no sync), for the next compute's host test; None where the scores are not
    contiguous (the test is left out, rather than a copy kernel launched)."""
    preds = batch.preds
    if not preds.flags.c_contiguous:
        return None
    per_sample = math.prod(preds.shape[1:]) or 1
    samples = max(1, min(preds.shape[0], PROBABILITY_SAMPLE_SCORES // per_sample))
    sample = backend.zeros((samples, *preds.shape[1:]), preds.dtype)
    backend.copy_into(sample, preds[:samples])
    return sample, batch.score_dtype, batch.binary_column


def _warn_if_probability_rows(rows, backend: Backend, score_dtype, binary: bool) -> None:
    """Warn when nearly all ``rows`` of scores read as logits are rows of
    probabilities (:func:`metrics_gpu._validation.probability_rows`); of a
    binary head's rows (``binary``: ``[0, z]``), when nearly all its scores z
    are in [0, 1], as the positive class's probabilities are."""
    if binary:
        rows = rows[:, 1:]
    found = probability_rows(rows, backend, score_dtype, sums=not binary)
    if found is not None:
        F.warn(probabilities_read_as_logits("preds", "scores='probabilities'", rows=found,
                                            total=int(rows.shape[0]), binary=binary),
               UserWarning)
