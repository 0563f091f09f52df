"""Reliability of the streaming state (ClassificationMetrics) at its edges:
integer weights whose sums pass 2**63, a number of classes no state can hold,
empty batches, sync called more than once, and a state restored where its
arrays live. Each defect has its example and, where it is a class of inputs,
a hypothesis property."""

from __future__ import annotations

import os
import pickle
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import metrics_gpu as mg
import metrics_gpu._streaming as streaming
from metrics_gpu._backend import get_backend_implementation
from metrics_gpu._validation import CLASS_STATISTICS_BYTES, MAX_STATE_BYTES
from conftest import host_array

pytestmark = pytest.mark.kernel_path

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
EXAMPLES = {"numpy": 40, "emulated": 12, "cuda": 40}
LIMIT = 1 << 63  # integer counts are exact below it (int64, as the host reads them)
WRAPPED = r"sample_weight of update call {call} \(counting from 0\).*past 2\*\*63 - 1"


def _value(x):
    return float(host_array(x))


def _accuracy_of(batches):
    """The weighted accuracy and total of ``(y, p, w)`` batches, in exact integers."""
    correct = sum(int(w_i) for y, p, w in batches for y_i, p_i, w_i in zip(y, p, w)
                  if y_i == p_i)
    total = sum(int(w_i) for _, _, w in batches for w_i in w)
    return correct / total if total else float("nan"), total


# -- a number of classes no state can hold --------------------------------------------


def test_stream_refuses_num_classes_label_report_refuses():
    """10**9 classes once allocated ~22 GiB at the first update; now refused at
    construction, with label_report's message."""
    with pytest.raises(ValueError) as refused:
        mg.label_report(np.array([0]), np.array([0]), num_classes=10**9)
    with pytest.raises(ValueError) as stream:
        mg.ClassificationMetrics(10**9)
    assert str(stream.value) == str(refused.value)
    assert "num_classes=1000000000" in str(stream.value) and "GiB" in str(stream.value)


@settings(deadline=None, max_examples=60)
@given(st.integers(1, 10**12))
def test_stream_state_size_limit(num_classes):
    """Refused exactly where the per-class statistics pass the state limit."""
    too_big = CLASS_STATISTICS_BYTES * num_classes > MAX_STATE_BYTES
    if too_big:
        with pytest.raises(ValueError, match=f"num_classes={num_classes} needs"):
            mg.ClassificationMetrics(num_classes, confusion_matrix=False)
    else:
        metrics = mg.ClassificationMetrics(num_classes, confusion_matrix=False)
        assert metrics.num_classes == num_classes  # nothing allocated before an update
