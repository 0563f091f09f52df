"""What every report object shares: a read-only mapping of its scalar metrics,
plain Python values, strict JSON and a short repr.

:class:`MetricMapping` is the base of :class:`metrics_gpu.LabelReport`,
:class:`metrics_gpu.LogitsReport`, :class:`metrics_gpu.StreamingReport` and
:class:`metrics_gpu.files.PredictionReport`. The entries are the scalar
metrics, by name; the arrays (per-class columns, confusion matrix,
calibration bins) and the counts are attributes, and all of them are in
``to_dict()``. Names and their one-line meanings come from
:mod:`metrics_gpu._formulas.labels` (``REPORT_METRICS``, ``SCORE_METRIC_DESCRIPTIONS``).
"""

from __future__ import annotations

import difflib
import json
import math
import sys
from collections.abc import Iterator, KeysView, Mapping
from typing import Any

import numpy as np

from metrics_gpu._formulas.labels import STREAM_SCORE_SLOTS, STREAM_SLOT, metric_description

# The metrics a repr shows, when the report has them, in this order.
HEADLINE_METRICS = ("accuracy", "macro_f1", "matthews_corrcoef", "cross_entropy",
                    "expected_calibration_error", "roc_auc")


def _host(value: Any) -> Any:
    """A NumPy array of a NumPy, CuPy or torch value (one read-back off a GPU)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if hasattr(value, "get") and type(value).__module__.startswith("cupy"):
        return value.get()
    return np.asarray(value)


def plain(value: Any) -> Any:
    """``value`` as plain Python values for JSON: dicts, lists and tuples walked
    (tuples become lists), arrays and scalars of NumPy, CuPy or torch read
    back to ``int`` / ``float`` / ``bool`` and nested lists, NaN and
    infinities as ``None``. Strings and None are kept."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {key if isinstance(key, (str, int)) else str(key): plain(item)
                for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    array = _host(value)
    if array.dtype.kind in "fc" and array.size and not np.isfinite(array).all():
        kept = array.astype(object)
        kept[~np.isfinite(array)] = None
        return kept.tolist()
    return array.tolist()


def as_lists(value: Any) -> Any:
    """The NumPy values of a nested dict as Python numbers and lists, NaN kept
    (what the reports' ``to_dict`` gave before NaN became None)."""
    if isinstance(value, dict):
        return {name: as_lists(item) for name, item in value.items()}
    return None if value is None else np.asarray(value).tolist()


def strict_json(value: Any, **kwargs: Any) -> str:
    """``value`` as strict JSON text (``kwargs`` go to :func:`json.dumps`):
    :func:`plain` values, NaN and infinities written as ``null``, never as the
    ``NaN`` / ``Infinity`` that strict parsers refuse."""
    kwargs.pop("allow_nan", None)
    return json.dumps(plain(value), allow_nan=False, **kwargs)


def descriptions(names) -> dict[str, str]:
    """Name -> one-line meaning, for the ``names`` that have one."""
    out = {}
    for name in names:
        meaning = metric_description(name)
        if meaning is not None:
            out[name] = meaning
    return out


def format_number(value: Any, digits: int = 4) -> str:
    """A number of a repr or a text table: integers whole, NaN as ``nan``
    (a string as it is)."""
    value = plain(value)
    if isinstance(value, str):
        return value
    if value is None:
        return "nan"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


def whole(value: Any) -> Any:
    """A count as an ``int`` when it is whole (a weight sum may not be)."""
    value = plain(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


class MetricMapping(Mapping):
    """A report as a read-only mapping of its scalar metrics by name.

    Subclasses give :meth:`_metric_names` (known without reading anything back
    from a GPU: ``len``, ``in`` and iteration never sync) and
    :meth:`_metric_value`. Reports compare and hash by identity, as before
    they were mappings (their values may be NaN, or lazy on a GPU).
    """

    __slots__ = ()
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def _metric_names(self) -> tuple[str, ...]:
        raise NotImplementedError

    def _metric_value(self, name: str) -> Any:
        raise NotImplementedError

    def __getitem__(self, name: str) -> Any:
        names = self._metric_names()
        if not isinstance(name, str) or name not in names:
            raise KeyError(missing_metric(name, names, type(self).__name__))
        return self._metric_value(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._metric_names())

    def __len__(self) -> int:
        return len(self._metric_names())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._metric_names()

    def keys(self) -> KeysView[str]:
        """The metric names (reads nothing back; prints as the names)."""
        return dict.fromkeys(self._metric_names()).keys()

    def _headline(self) -> list[tuple[str, Any]]:
        """What the repr shows besides the metrics: sizes, by name."""
        return []

    def __repr__(self) -> str:
        # Reads the shown values back from a GPU (a repr is for people).
        names = self._metric_names()
        shown = [(name, self._metric_value(name)) for name in HEADLINE_METRICS if name in names]
        parts = [f"{name}={format_number(value)}" for name, value in [*self._headline(), *shown]]
        return f"{type(self).__name__}({', '.join(parts)})"


# From the stream's score slots (F.STREAM_SCORE_SLOTS): the ranking metrics
# of the binned histograms, which only a state built with ``thresholds=H``
# counts (the multilabel report adds the averages' bounds), and the score
# metrics, which only a state updated with scores has.
_RANKING_START = STREAM_SLOT["roc_auc"]
BINNED_RANKING_METRICS = frozenset(STREAM_SCORE_SLOTS[_RANKING_START:]) | {
    f"{metric}_{average}_error_bound" for metric in ("roc_auc", "average_precision")
    for average in ("weighted", "micro")}
STREAM_SCORE_METRICS = frozenset(
    STREAM_SCORE_SLOTS[STREAM_SLOT["cross_entropy"]:STREAM_SLOT["total_weight"]])
# The report of each streaming state, by the report's class name.
_STATE_OF_REPORT = {"StreamingReport": "ClassificationMetrics",
                    "MultilabelReport": "MultilabelMetrics"}


def _how_to_get(name: str, names: tuple[str, ...], owner: str) -> str | None:
    """How a streaming state gets a metric its report (of ``names``) lacks, or None."""
    state = _STATE_OF_REPORT.get(owner)
    if state is None:
        return None
    if name in BINNED_RANKING_METRICS:
        return (f"{name!r} is counted only by a state built with thresholds: pass "
                f"thresholds=H to {state} (H bins of the scores, e.g. 200) and update it "
                "with scores")
    if owner != "StreamingReport":
        return None
    scored = "cross_entropy" in names
    top_k = name.startswith("top_") and name.endswith("_accuracy")
    if top_k and scored:
        return (f"{name!r}: the state's top_k does not hold its k, or k is at least the "
                f"number of classes (always 1, left out); pass top_k=(...) to {state}")
    if not scored and (top_k or name in STREAM_SCORE_METRICS):
        return (f"{name!r} needs scores: update {state} with (N, K) scores (logits or "
                "probabilities) rather than labels")
    return None


def missing_metric(name: object, names: tuple[str, ...], owner: str) -> str:
    """The KeyError message of a name a report does not have: how to get it
    where a state built or updated otherwise has it."""
    how = _how_to_get(name, names, owner) if isinstance(name, str) else None
    if how is not None:
        return f"{how} (this {owner} has {len(names)} metrics: see .keys())"
    close = difflib.get_close_matches(str(name), names, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else "."
    listed = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
    return (f"{name!r} is not a metric of this {owner}{hint} It has {len(names)}: {listed} "
            "(see .keys(); arrays such as per_class are attributes)")
