"""Per-group (sliced) label metrics: every report metric for each group, from
one (G, K, K) table.

``label_report(..., groups=...)`` counts each sample into its group's K x K
confusion matrix (one pass over the labels on the caller's backend: the
statistics pass over the codes (group K + true) K + predicted), then
evaluates the report's formulas (:mod:`metrics_gpu._formulas.labels`) for all G
tables at once on the host. The result speaks fairlearn's ``MetricFrame``
vocabulary: ``overall``, ``by_group``, ``group_min``, ``group_max``,
``difference`` and ``ratio`` (``"between_groups"`` or ``"to_overall"``).
With ``confidence_level``, each group's value and each group's value minus
the overall get intervals from the same bootstrap replicates (paired: one
draw per cell of the (G, K, K) table serves every group and the overall
value). ``difference()`` (a max - min, or the largest ``|group - overall|``)
gets none: see :data:`DIFFERENCE_WITHOUT_INTERVAL`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from metrics_gpu._formulas import resample as _resample
from metrics_gpu._pipeline.mapping import format_number, plain
from metrics_gpu._validation import GroupCodes, LabelInputs
from metrics_gpu.intervals import (
    BOOTSTRAP_METHODS,
    ConfidenceInterval,
    IntervalOptions,
    _bootstrap_interval,
    _evaluate,
    _integer_table,
    _jackknife,
    _proportion_bounds,
    _replicate_statistics,
    _table_statistics,
    replicate_draws,
)
from metrics_gpu.plot import plot_groups

# The (G, K, K) table's cells at most: its statistics pass holds three
# arrays of this many counts (and the host a copy of one).
MAX_GROUP_CELLS = 1 << 22
GROUP_METHODS = ("between_groups", "to_overall")
# Why difference() has no interval (its ConfidenceInterval's reason, and the
# legend of the reports). A simulation (tests/test_groups.py) holds it: with
# equal groups the percentile interval of max - min held the true 0 in 0 of
# 30 data sets, and basic intervals of it go below 0; each group's value and
# group - overall are smooth, and their intervals cover at their level.
DIFFERENCE_WITHOUT_INTERVAL = (
    "no interval for difference (max - min, or the largest |group - overall|): it is not a "
    "smooth statistic, and its bootstrap is biased upward and does not cover at its level "
    "(least of all when the groups are equal); see each group's interval, each group's "
    "interval against the overall (intervals.minus_overall) and the interval of two named "
    "groups' difference (difference_between)")
# The metrics the text report shows per group (the JSON has every one).
TEXT_METRICS = ("accuracy", "balanced_accuracy", "macro_f1", "matthews_corrcoef")


def check_group_cells(num_groups: int, num_classes: int) -> int:
    """G K^2, the counters of the groups' matrices, or a ValueError past
    :data:`MAX_GROUP_CELLS`."""
    size = num_groups * num_classes * num_classes
    if size > MAX_GROUP_CELLS:
        raise ValueError(
            f"groups: {num_groups} groups x {num_classes} x {num_classes} classes need "
            f"{size} counters, more than {MAX_GROUP_CELLS}; use fewer groups (or classes)")
    return size


def group_cell_counts(backend, codes, y_true, y_pred, valid, *, num_classes: int,
                      num_groups: int, sample_weight, ignore_index, deterministic: bool):
    """Each (group, true, predicted) cell's count (weight), a (G K K,) array on
    the backend: the statistics pass over the codes (group K + true) K +
    predicted. Samples whose ``valid`` is False (or None: all valid), whose
    labels are out of range, or whose target is ``ignore_index`` are left out
    (they get the code G K K, which the pass ignores)."""
    xp = backend.xp
    k = num_classes
    size = check_group_cells(num_groups, k)
    y_true, y_pred = y_true.astype(np.int64), y_pred.astype(np.int64)
    inside = (xp.greater_equal(y_true, 0) & xp.less(y_true, k)
              & xp.greater_equal(y_pred, 0) & xp.less(y_pred, k))
    if valid is not None:
        inside &= valid
    if ignore_index is not None:
        inside &= xp.not_equal(y_true, ignore_index)
    group_true = xp.multiply(codes, k) + y_true
    cell = xp.where(inside, xp.multiply(group_true, k) + y_pred, size)
    stats = backend.class_statistics(cell, cell, num_classes=size, sample_weight=sample_weight,
                                     ignore_index=size, guard=False,
                                     deterministic=deterministic)
    return stats.support


def group_tables(inputs: LabelInputs, groups: GroupCodes) -> np.ndarray:
    """The (G, K, K) confusion matrices of the groups (rows true, columns
    predicted), on the host. Samples the report leaves out (``ignore_index``,
    out-of-range labels under ``validate=False``) are left out here too."""
    if getattr(inputs.y_pred, "ndim", 2) != 1:
        raise ValueError("groups: y_pred must be labels (N,) with groups=; pass the "
                         "scores' argmax, scores.argmax(axis=1)")
    k, g = inputs.num_classes, groups.num_groups
    counts = group_cell_counts(inputs.backend, groups.codes, inputs.y_true, inputs.y_pred, None,
                               num_classes=k, num_groups=g, sample_weight=inputs.sample_weight,
                               ignore_index=inputs.ignore_index,
                               deterministic=inputs.deterministic)
    return np.asarray(inputs.backend.to_host(counts)).reshape(g, k, k)


def _group_values(tables: np.ndarray):
    """Every report metric (G,) and per-class column (G, K) of (G, K, K) tables;
    an empty group is NaN throughout."""
    values, columns = _evaluate(_table_statistics(np.moveaxis(tables, 0, -1).astype(np.float64)))
    empty = tables.sum(axis=(1, 2)) == 0
    values = {name: np.where(empty, math.nan, np.broadcast_to(v, empty.shape))
              for name, v in values.items()}
    columns = {name: np.where(empty[:, None], math.nan, v.T) for name, v in columns.items()}
    return values, columns


def _difference(by_group, overall, method: str):
    """fairlearn's difference over the last-but-one axis (groups): max - min, or
    the largest ``|group - overall|``; groups that are NaN are left out."""
    with np.errstate(all="ignore"):
        if method == "between_groups":
            return _nan_extreme(by_group, np.fmax) - _nan_extreme(by_group, np.fmin)
        return _nan_extreme(np.abs(by_group - overall), np.fmax)


def _ratio(by_group, overall, method: str):
    """fairlearn's ratio: min / max, or the smallest group / overall, each
    taken as r where r <= 1 and 1 / r where r > 1 (fairlearn's
    ``ratio_sub_one``: a negative or zero r stays as it is, x / 0 is +-inf
    and 0 / 0 NaN, NaN left out unless every group is)."""
    with np.errstate(all="ignore"):
        if method == "between_groups":
            return _nan_extreme(by_group, np.fmin) / _nan_extreme(by_group, np.fmax)
        ratio = by_group / overall
        return _nan_extreme(np.where(ratio > 1.0, 1.0 / ratio, ratio), np.fmin)


def _nan_extreme(values, function):
    """``function`` (np.fmin / np.fmax) reduced over axis 0: NaN ignored, NaN if all are."""
    return function.reduce(values, axis=0)


class GroupValues(np.lib.mixins.NDArrayOperatorsMixin):
    """One metric's value per group, selected by the group's label, as
    fairlearn's ``MetricFrame.by_group[metric]`` (a pandas Series indexed by
    the groups), without pandas.

    ``values[label]`` is a group's value: an integer code, a category, or a
    tuple of them for an intersection of several columns. Integer codes are
    also positions (groups 0..G-1), so ``values[i]`` selects the i-th group
    there; with other labels an integer that is not one selects by position,
    as a pandas Series did, and so do slices and index arrays. It reads as an
    array everywhere one is taken (``np.asarray(values)``, arithmetic and
    comparisons give plain arrays), iterates over the values (as a Series),
    and ``keys()``, ``items()``, ``in`` and ``index`` speak of the groups.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu.groups import GroupValues
    >>> accuracy = GroupValues(["north", "south"], np.array([0.75, 0.5]))
    >>> float(accuracy["south"]), "east" in accuracy, list(accuracy.keys())
    (0.5, False, ['north', 'south'])
    >>> float(accuracy.max()), (accuracy > 0.6).tolist()
    (0.75, [True, False])
    """

    __slots__ = ("_groups", "_values", "_positions")

    def __init__(self, groups, values):
        self._groups = list(groups)
        self._values = np.asarray(values).view()
        self._values.flags.writeable = False
        if self._values.shape != (len(self._groups),):
            raise ValueError(f"values: {len(self._groups)} groups need {len(self._groups)} "
                             f"values, got shape {self._values.shape}")
        self._positions = {group: i for i, group in enumerate(self._groups)}

    @property
    def index(self) -> list:
        """The group labels, in code order (fairlearn's ``by_group.index``)."""
        return list(self._groups)

    @property
    def values(self) -> np.ndarray:
        """The values in group order (read-only)."""
        return self._values

    def to_numpy(self) -> np.ndarray:
        return self._values.copy()

    def to_dict(self) -> dict:
        """``{group: value}`` in plain floats."""
        return {group: float(v) for group, v in zip(self._groups, self._values)}

    def keys(self) -> list:
        return list(self._groups)

    def items(self):
        return zip(self._groups, self._values)

    def get(self, group, default=None):
        return self[group] if group in self._positions else default

    def max(self):
        """The largest value, NaN (empty groups) left out."""
        return np.fmax.reduce(self._values)

    def min(self):
        """The smallest value, NaN (empty groups) left out."""
        return np.fmin.reduce(self._values)

    def __getitem__(self, key):
        try:
            position = self._positions.get(key)
        except TypeError:  # a slice, an array or a list: positions
            return self._values[key]
        if position is not None:
            return self._values[position]
        if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
            return self._values[key]
        raise KeyError(f"{key!r} is not a group (the groups: "
                       f"{', '.join(repr(g) for g in self._groups[:10])}"
                       f"{', ...' if len(self._groups) > 10 else ''})")

    def __contains__(self, group) -> bool:
        try:
            return group in self._positions
        except TypeError:
            return False

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._groups)

    @property
    def shape(self):
        return self._values.shape

    @property
    def dtype(self):
        return self._values.dtype

    def __array__(self, dtype=None, copy=None):
        return np.array(self._values, dtype=dtype, copy=True if copy else None)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = tuple(x._values if isinstance(x, GroupValues) else x for x in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)

    def tolist(self) -> list:
        return self._values.tolist()

    def __repr__(self) -> str:
        shown = ", ".join(f"{g!r}: {v!r}" for g, v in zip(self._groups[:10],
                                                          self._values[:10].tolist()))
        return f"GroupValues({{{shown}{', ...' if len(self._groups) > 10 else ''}}})"


def _check_method(method: str) -> str:
    if method not in GROUP_METHODS:
        raise ValueError(f"method must be 'between_groups' or 'to_overall', got {method!r}")
    return method


@dataclass(frozen=True)
class GroupIntervals:
    """Confidence intervals of the per-group metrics, from the same replicates.

    Attributes
    ----------
    by_group : dict of str to ConfidenceInterval
        Each group's value (arrays of G, in group order).
    difference, difference_to_overall : dict of str to ConfidenceInterval
        :meth:`GroupMetrics.difference` (``"between_groups"``,
        ``"to_overall"``): the value with no interval (``low`` and ``high``
        NaN, ``reason`` :data:`DIFFERENCE_WITHOUT_INTERVAL`).
    n_resamples, seed : int or None
        The bootstrap's (None for the binomial methods).
    minus_overall : dict of str to ConfidenceInterval
        Each group's value minus the overall value (arrays of G), from paired
        replicates: a smooth statistic, whose interval covers at its level.
    """

    by_group: dict[str, ConfidenceInterval]
    difference: dict[str, ConfidenceInterval]
    difference_to_overall: dict[str, ConfidenceInterval]
    n_resamples: int | None
    seed: int | None
    minus_overall: dict[str, ConfidenceInterval] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class GroupMetrics:
    """Every label metric of every group, in fairlearn's ``MetricFrame`` terms.

    Attributes
    ----------
    groups : list
        The group names, in code order (integer codes: 0..G-1; categories:
        their sorted values; several columns: tuples).
    counts : ndarray of shape (G,)
        Samples (weight) counted in each group; an empty group's metrics are NaN.
    overall : dict of str to float
        The report's metrics over all groups.
    by_group : dict of str to GroupValues
        Each metric's value per group (G values), selected by the group's
        label as fairlearn's ``by_group`` is (``by_group["accuracy"]["north"]``;
        ``np.asarray`` gives the array in group order).
    per_class : dict of str to ndarray
        Each per-class column per group, shape (G, K).
    intervals : GroupIntervals or None
        With ``confidence_level``.
    """

    groups: list
    counts: np.ndarray
    overall: dict[str, float]
    by_group: dict[str, GroupValues]
    per_class: dict[str, np.ndarray]
    intervals: GroupIntervals | None = None
    # (tables, options, backend) of a bootstrap, for difference_between.
    _bootstrap: Any = field(default=None, repr=False)

    def __repr__(self) -> str:
        return f"GroupMetrics({len(self.groups)} groups, {len(self.by_group)} metrics)"

    def group_min(self) -> dict[str, float]:
        """Each metric's smallest value over the groups (empty ones left out)."""
        return {name: float(_nan_extreme(v.values, np.fmin)) for name, v in self.by_group.items()}

    def group_max(self) -> dict[str, float]:
        """Each metric's largest value over the groups (empty ones left out)."""
        return {name: float(_nan_extreme(v.values, np.fmax)) for name, v in self.by_group.items()}

    def difference(self, method: str = "between_groups") -> dict[str, float]:
        """``"between_groups"``: max - min over the groups; ``"to_overall"``: the
        largest ``|group - overall|`` (fairlearn's ``MetricFrame.difference``)."""
        method = _check_method(method)
        return {name: float(_difference(v.values, self.overall[name], method))
                for name, v in self.by_group.items()}

    def difference_between(self, first: Any, second: Any) -> dict[str, ConfidenceInterval]:
        """Each metric of group ``first`` minus group ``second`` (labels, as in
        ``by_group``) with its interval: one pairwise difference is a smooth
        statistic (unlike :meth:`difference`'s max - min) and its interval
        covers at its level. From the same replicates as the groups'
        intervals (the same draws of their cells); needs the report's
        ``confidence_level`` with a bootstrap method."""
        if self._bootstrap is None:
            raise ValueError("difference_between needs the bootstrap's replicates: make the "
                             "report with confidence_level= and method='percentile', 'basic' "
                             "or 'bca'")
        pair = []
        for argument, label in (("first", first), ("second", second)):
            matches = [i for i, group in enumerate(self.groups) if group == label]
            if not matches:
                raise ValueError(f"{argument}: {label!r} is not a group")
            pair.append(matches[0])
        if pair[0] == pair[1]:
            raise ValueError(f"first and second are the same group, {first!r}")
        tables, options, backend = self._bootstrap
        values = {name: v.values for name, v in self.by_group.items()}
        return _pair_intervals(tables, pair, values, options, backend)

    def ratio(self, method: str = "between_groups") -> dict[str, float]:
        """``"between_groups"``: min / max; ``"to_overall"``: the smallest
        min(group / overall, overall / group) (fairlearn's ``MetricFrame.ratio``)."""
        method = _check_method(method)
        return {name: float(_ratio(v.values, self.overall[name], method))
                for name, v in self.by_group.items()}

    def to_frame(self) -> Any:
        """The per-group metrics as a pandas DataFrame (rows: groups; columns:
        ``count``, then the metrics). Needs pandas."""
        try:
            import pandas as pd
        except ImportError as error:  # pragma: no cover - pandas comes with the test extra
            raise ImportError("GroupMetrics.to_frame needs pandas: pip install pandas") from error
        index = pd.MultiIndex.from_tuples(self.groups) if self.groups and isinstance(
            self.groups[0], tuple) else pd.Index(self.groups, name="group")
        data = {"count": self.counts, **{name: v.values for name, v in self.by_group.items()}}
        return pd.DataFrame(data, index=index)

    def to_dict(self) -> dict[str, Any]:
        """Plain Python values (NaN is None; a group named by a tuple is a list)."""
        out: dict[str, Any] = {
            "groups": list(self.groups), "counts": self.counts,
            "by_group": {name: v.values for name, v in self.by_group.items()},
            "per_class": self.per_class, "group_min": self.group_min(),
            "group_max": self.group_max(),
            "difference": {method: self.difference(method) for method in GROUP_METHODS},
            "ratio": {method: self.ratio(method) for method in GROUP_METHODS},
        }
        if self.intervals is not None:
            out["intervals"] = {
                kind: {name: ci.to_dict() for name, ci in getattr(self.intervals, kind).items()}
                for kind in ("by_group", "minus_overall", "difference",
                             "difference_to_overall")}
            out["intervals"].update(n_resamples=self.intervals.n_resamples,
                                    seed=self.intervals.seed)
        return plain(out)

    def plot(self, metric: str = "accuracy", ax: Any = None, **kwargs: Any) -> Any:
        """A bar per group of ``metric``, with the intervals as error bars
        (:func:`metrics_gpu.plot.plot_groups`, the ``[plot]`` extra)."""
        return plot_groups(self, metric, ax=ax, **kwargs)

    def to_text(self, digits: int = 4, max_groups: int = 50) -> str:
        """A table of the groups (count and a few headline metrics), then each
        headline metric's min, max, difference and ratio."""
        names = [name for name in TEXT_METRICS if name in self.by_group]
        labels = [str(g) for g in self.groups]
        column = 18 if self.intervals is None else 30
        width = max([len("group")] + [len(label) for label in labels[:max_groups]])
        lines = [f"{'group':>{width}} {'count':>10} " + " ".join(f"{n:>{column}}" for n in names)]
        intervals = self.intervals
        for i, label in enumerate(labels[:max_groups]):
            cells = []
            for name in names:
                text = format_number(self.by_group[name].values[i], digits)
                if intervals is not None and name in intervals.by_group:
                    ci = intervals.by_group[name]
                    text += (f" [{format_number(ci.low[i], digits)}, "
                             f"{format_number(ci.high[i], digits)}]")
                cells.append(f"{text:>{column}}")
            count = self.counts[i]
            count_text = f"{int(count)}" if float(count).is_integer() else f"{count:.4g}"
            lines.append(f"{label:>{width}} {count_text:>10} " + " ".join(cells))
        if len(labels) > max_groups:
            lines.append(f"({len(labels) - max_groups} more groups: use the JSON report)")
        lines.append("")
        summaries = (("overall", self.overall), ("group_min", self.group_min()),
                     ("group_max", self.group_max()), ("difference", self.difference()),
                     ("ratio", self.ratio()))
        lines.append(f"{'':>{width + 11}} " + " ".join(f"{n:>{column}}" for n in names))
        for title, values in summaries:
            row = []
            for name in names:
                text = format_number(values[name], digits)
                row.append(f"{text:>{column}}")
            lines.append(f"{title:>{width + 11}} " + " ".join(row))
        if intervals is not None and intervals.difference:
            lines.append(f"({DIFFERENCE_WITHOUT_INTERVAL})")
        return "\n".join(lines) + "\n"


def group_metrics(tables, names: list, overall: dict[str, float],
                  options: IntervalOptions | None = None, backend: Any = None) -> GroupMetrics:
    """The per-group metrics of (G, K, K) tables (over the report's classes),
    with intervals when ``options`` is given (drawn by ``backend``)."""
    tables = np.asarray(tables)
    values, columns = _group_values(tables)
    counts = tables.sum(axis=(1, 2))
    intervals = None
    if options is not None:
        intervals = _group_intervals(tables, values, overall, options, backend)
    by_group = {name: GroupValues(names, v) for name, v in values.items()}
    bootstrap = None
    if options is not None and options.method in BOOTSTRAP_METHODS:
        bootstrap = (_integer_table(tables), options, backend)
    return GroupMetrics(names, counts, overall, by_group, columns, intervals, bootstrap)


def _group_intervals(tables, values, overall, options: IntervalOptions,
                     backend: Any = None) -> GroupIntervals:
    """Intervals of each group's metrics and of each minus the overall, from
    one set of replicates of the (G, K, K) table (paired draws); the
    differences' values without an interval."""
    table = _integer_table(tables)
    g, k = table.shape[0], table.shape[1]
    if options.method not in BOOTSTRAP_METHODS:
        return _group_proportion_intervals(table, values, options)
    cells = np.flatnonzero(table)
    counts = table.reshape(-1)[cells]
    key = _resample.seed_key(options.seed)
    group_reps: dict[str, list] = {}
    overall_reps: dict[str, list] = {}
    chunk = max(1, min(options.n_resamples, (1 << 22) // max(cells.size, g * k, 1)))
    for start in range(0, options.n_resamples, chunk):
        b = min(chunk, options.n_resamples - start)
        draws = replicate_draws(backend, counts, cells, start, b, key)
        stats = _replicate_statistics(k, cells, draws, g)
        by_group, _ = _evaluate(stats)
        empty = (stats.total == 0).reshape(g, b)
        for name, v in by_group.items():
            v = np.broadcast_to(v, (g * b,)).reshape(g, b)
            group_reps.setdefault(name, []).append(np.where(empty, math.nan, v))
        summed = _sum_groups(stats, g, b)
        whole, _ = _evaluate(summed)
        for name, v in whole.items():
            overall_reps.setdefault(name, []).append(np.broadcast_to(v, (b,)))
    # The intervals about the host formulas' overall values (as the replicates'),
    # whichever backend made the report; the values shown are the report's.
    own_overall, _ = _evaluate(_table_statistics(table.sum(axis=0).astype(np.float64)))
    jackknife = None if options.method != "bca" else _group_jackknife(table, cells, k)
    by_group_ci, minus_overall, between, to_overall = {}, {}, {}, {}
    for name, parts in group_reps.items():
        reps = np.concatenate(parts, axis=1)
        overall_rep = np.concatenate(overall_reps[name])
        whole = float(own_overall[name])
        extra: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
        if jackknife is not None:
            extra = _group_bca_terms(jackknife, name, values[name], counts)
        by_group_ci[name] = _bootstrap_interval(values[name], reps, options, **extra[0])
        minus_overall[name] = replace(_bootstrap_interval(
            values[name] - whole, reps - overall_rep[None, :], options, **extra[1]),
            value=values[name] - overall[name])
        between[name] = _without_interval(
            float(_difference(values[name], overall[name], "between_groups")), options)
        to_overall[name] = _without_interval(
            float(_difference(values[name], overall[name], "to_overall")), options)
    return GroupIntervals(by_group_ci, between, to_overall, options.n_resamples, options.seed,
                          minus_overall)


def _pair_intervals(table, pair, values, options: IntervalOptions, backend: Any = None
                    ) -> dict[str, ConfidenceInterval]:
    """Intervals of group pair[0] minus group pair[1]: the two groups' cells
    drawn as in :func:`_group_intervals` (the same draws, keyed by the cells
    of the whole table), evaluated as a table of two groups."""
    k = table.shape[1]
    cells = np.flatnonzero(table)
    group, local = np.divmod(cells, k * k)
    chosen = np.isin(group, pair)
    cells, group, local = cells[chosen], group[chosen], local[chosen]
    counts = table.reshape(-1)[cells]
    pair_cells = np.where(group == pair[0], 0, 1) * (k * k) + local
    key = _resample.seed_key(options.seed)
    parts: dict[str, list] = {}
    chunk = max(1, min(options.n_resamples, (1 << 22) // max(cells.size, 2 * k * k, 1)))
    for start in range(0, options.n_resamples, chunk):
        b = min(chunk, options.n_resamples - start)
        draws = replicate_draws(backend, counts, cells, start, b, key)
        stats = _replicate_statistics(k, pair_cells, draws, 2)
        found, _ = _evaluate(stats)
        empty = (np.asarray(stats.total) == 0).reshape(2, b)
        for name, v in found.items():
            v = np.where(empty, math.nan, np.broadcast_to(v, (2 * b,)).reshape(2, b))
            parts.setdefault(name, []).append(v[0] - v[1])
    jackknife = None if options.method != "bca" else _group_jackknife(table, cells, k)
    out = {}
    for name, chunks in parts.items():
        value = float(values[name][pair[0]] - values[name][pair[1]])
        extra = {}
        if jackknife is not None:
            # Left out of group pair[0] or pair[1]: its own value moves; any
            # other sample (one value, the rest's weight) leaves the difference.
            own = jackknife.own[name]
            moved = np.where(group == pair[0], own - values[name][pair[1]],
                             values[name][pair[0]] - own)
            rest = float(table.sum() - counts.sum())
            extra = {"jackknife": np.append(moved, value),
                     "weights": np.append(counts.astype(np.float64), rest)}
        out[name] = _bootstrap_interval(value, np.concatenate(chunks), options, **extra)
    return out


def _without_interval(value: float, options: IntervalOptions) -> ConfidenceInterval:
    """A difference's value with no interval, and why (:data:`DIFFERENCE_WITHOUT_INTERVAL`)."""
    return ConfidenceInterval(value, math.nan, math.nan, math.nan, options.confidence_level,
                              options.method, reason=DIFFERENCE_WITHOUT_INTERVAL)


@dataclass(frozen=True)
class _GroupJackknife:
    """Leave-one-out values, one per non-empty cell of the (G, K, K) table (a
    sample of that cell left out): its group, that group's metrics then, and
    the overall metrics then."""

    group: np.ndarray
    own: dict[str, np.ndarray]
    overall: dict[str, np.ndarray]


def _group_jackknife(table, cells, k: int) -> _GroupJackknife:
    group, local = np.divmod(cells, k * k)
    own: dict[str, np.ndarray] = {}
    for g in np.unique(group).tolist():
        chosen = np.flatnonzero(group == g)
        values, _ = _jackknife(_table_statistics(table[g].astype(np.float64)), k,
                               local[chosen], None)
        for name, v in values.items():
            own.setdefault(name, np.full(cells.size, math.nan))[chosen] = v
    overall, _ = _jackknife(_table_statistics(table.sum(axis=0).astype(np.float64)), k, local,
                            None)
    return _GroupJackknife(group, own, overall)


def _group_bca_terms(jackknife: _GroupJackknife, name: str, values, counts):
    """BCa's accelerations for one metric: of each group's value and of each
    group's value minus the overall, from the jackknife over every sample (one
    outside group g leaves g's value as it is, and moves the overall), in
    O(cells + G) sums, without the (G, cells) table of leave-one-out values."""
    group, weights = jackknife.group, counts.astype(np.float64)
    own, whole = jackknife.own[name], jackknife.overall[name]
    size = values.shape[0]
    total = weights.sum()
    with np.errstate(all="ignore"):
        in_group = np.bincount(group, weights, size)
        mean = (np.bincount(group, weights * own, size) + (total - in_group) * values) / total
        u_own, u_other = mean[group] - own, mean - values
        cubes = np.bincount(group, weights * u_own ** 3, size) + (total - in_group) * u_other ** 3
        squares = np.bincount(group, weights * u_own ** 2, size) + (total - in_group) * u_other ** 2
        acceleration = cubes / (6.0 * squares ** 1.5)
        # Group g minus the overall, left out sample in cell c: (own_c if c is
        # in g, else V_g) - O_c. Less the constant V_g - mean(O) (which leaves
        # the acceleration as it is): x_c = -o_c + [c in g] e_c, with o_c =
        # O_c - mean(O) and e_c = own_c - V_g, all small (no cancellation).
        o = whole - (weights * whole).sum() / total
        e = own - values[group]
        o_sums = [(weights * o ** j).sum() for j in range(4)]
        m = (np.bincount(group, weights * e, size) - o_sums[1]) / total  # mean of x, per g
        # sum_c w (m - x_c)^j: over every cell as if no e, then the cells of g corrected.
        shifted = m[group] + o
        squares_minus = (m * m * o_sums[0] + 2 * m * o_sums[1] + o_sums[2]
                         + np.bincount(group, weights * ((shifted - e) ** 2 - shifted ** 2),
                                       size))
        cubes_minus = (m ** 3 * o_sums[0] + 3 * m * m * o_sums[1] + 3 * m * o_sums[2] + o_sums[3]
                       + np.bincount(group, weights * ((shifted - e) ** 3 - shifted ** 3), size))
        acceleration_minus = cubes_minus / (6.0 * squares_minus ** 1.5)
    return {"acceleration": acceleration}, {"acceleration": acceleration_minus}


def _sum_groups(stats, g: int, b: int):
    """The overall replicate statistics (K, b): each group's (K, G b) summed."""
    def fold(array):
        array = np.asarray(array, dtype=np.float64)
        if array.ndim == 2:
            return array.reshape(array.shape[0], g, b).sum(axis=1)
        return array.reshape(g, b).sum(axis=0)

    return replace(stats, true_positives=fold(stats.true_positives), support=fold(stats.support),
                   predicted=fold(stats.predicted), total=fold(stats.total),
                   linear_disagreement=fold(stats.linear_disagreement),
                   quadratic_disagreement=fold(stats.quadratic_disagreement),
                   misclassified=fold(stats.misclassified))


def _group_proportion_intervals(table, values, options: IntervalOptions) -> GroupIntervals:
    """Binomial intervals of each group's accuracy (and its complements); the
    differences are a bootstrap's (none here)."""
    correct = np.trace(table, axis1=1, axis2=2).astype(np.float64)
    total = table.sum(axis=(1, 2)).astype(np.float64)
    low, high, _, error = _proportion_bounds(correct, total, options.alpha, options.method)
    by_group = {"accuracy": ConfidenceInterval(values["accuracy"], low, high, error,
                                               options.confidence_level, options.method)}
    for name in ("hamming_loss", "zero_one_loss"):
        by_group[name] = ConfidenceInterval(values[name], 1.0 - high, 1.0 - low, error,
                                            options.confidence_level, options.method)
    return GroupIntervals(by_group, {}, {}, None, None)
