"""Confidence intervals: how sure a metric is, from the pass that computed it.

Every label metric is a function of the confusion matrix, so a bootstrap
replicate of the data set is a replicate of the matrix: one independent
Poisson(n_c) draw per non-empty cell c (the Poisson bootstrap: each sample
drawn Poisson(1) times), B replicates costing O(B x cells) after the one
pass over the data, whatever N is. The replicates' metrics are the report's
own formulas (:mod:`metrics_gpu._formulas.labels`) evaluated over a replicate axis.
The draws are counter-based (:mod:`metrics_gpu._formulas.resample`, Philox4x32-10): a
seed gives the same intervals on every backend and in any chunking.

Methods:

- ``"percentile"``, ``"basic"``, ``"bca"``: bootstrap intervals (scipy's
  definitions; BCa's jackknife has as many distinct leave-one-out values as
  the matrix has non-empty cells, each counted as often as its count);
- ``"wilson"``, ``"clopper-pearson"``, ``"agresti-coull"``, ``"jeffreys"``:
  binomial intervals of the metrics that are proportions of counts (accuracy,
  the error rates, micro precision and recall; per class precision, recall and
  specificity), as statsmodels' ``proportion_confint``;
- ``"delong"``: ROC AUC (:func:`roc_auc_interval`, DeLong et al. 1988, in
  Sun and Xu's O(N log N) form).
"""

from __future__ import annotations

import math
import secrets
import statistics
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from metrics_gpu._formulas import labels as F
from metrics_gpu._formulas import resample as _resample
from metrics_gpu._common.extras import install_hint
from metrics_gpu._formulas.state import ClassStatistics
from metrics_gpu._validation import to_numpy
from metrics_gpu.backends.selection import get_backend_implementation, resolve_backend

BOOTSTRAP_METHODS = ("percentile", "basic", "bca")
PROPORTION_METHODS = ("wilson", "clopper-pearson", "agresti-coull", "jeffreys")
# The methods that take the beta distribution's quantiles: scipy, the [stats] extra.
BETA_METHODS = ("clopper-pearson", "jeffreys")
INTERVAL_METHODS = BOOTSTRAP_METHODS + PROPORTION_METHODS
SAMPLING_METHODS = ("poisson",)
DEFAULT_RESAMPLES = 9999

# Replicate values held at once: the draws of a chunk of replicates are
# (cells, chunk) int64 and each per-class column (K, chunk) float64.
_CHUNK_VALUES = 1 << 22


@dataclass(frozen=True)
class ConfidenceInterval:
    """A metric's value with its confidence interval and standard error.

    The fields are floats for an overall metric and arrays (one entry per
    class) for a per-class column. ``low`` and ``high`` are NaN where the
    method cannot give an interval (the value is undefined, or every
    replicate is); ``standard_error`` is the bootstrap replicates' standard
    deviation, or the binomial sqrt(p (1 - p) / n) for the proportion methods.

    Attributes
    ----------
    value : float or ndarray
        The metric on the data.
    low, high : float or ndarray
        The interval's ends (scipy's names).
    standard_error : float or ndarray
    confidence_level : float
    method : str
        How the interval was computed (see :data:`INTERVAL_METHODS`).
    reason : str or None
        Why there is no interval where none is given on purpose (``low`` and
        ``high`` NaN: a statistic whose bootstrap does not cover at its level,
        such as the max - min of :meth:`metrics_gpu.groups.GroupMetrics.difference`);
        None otherwise.
    """

    value: Any
    low: Any
    high: Any
    standard_error: Any
    confidence_level: float
    method: str
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain Python numbers (lists for per-class arrays); NaN is None."""
        def plain(v):
            if isinstance(v, np.ndarray):
                return [plain(x) for x in v.tolist()]
            v = float(v)
            return v if math.isfinite(v) else None
        out = {"value": plain(self.value), "low": plain(self.low), "high": plain(self.high),
               "standard_error": plain(self.standard_error),
               "confidence_level": self.confidence_level, "method": self.method}
        if self.reason is not None:
            out["reason"] = self.reason
        return out


@dataclass(frozen=True)
class IntervalOptions:
    """Checked interval arguments of a report (see :func:`check_interval_options`)."""

    confidence_level: float
    method: str
    n_resamples: int
    seed: int
    sampling: str = "poisson"

    @property
    def alpha(self) -> float:
        """Each tail's probability: (1 - confidence_level) / 2."""
        return (1.0 - self.confidence_level) / 2.0


def check_interval_options(confidence_level, method="percentile", n_resamples=DEFAULT_RESAMPLES,
                           rng=None, sampling="poisson") -> IntervalOptions | None:
    """The interval arguments checked (None when ``confidence_level`` is None):
    a ``ValueError`` names the argument and the problem."""
    if confidence_level is None:
        return None
    if isinstance(confidence_level, bool) or not isinstance(confidence_level, (int, float)) \
            or not 0.0 < float(confidence_level) < 1.0:
        raise ValueError(f"confidence_level must be a number between 0 and 1 (e.g. 0.95), "
                         f"got {confidence_level!r}")
    if method not in INTERVAL_METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, INTERVAL_METHODS))}, "
                         f"got {method!r}")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) \
            or n_resamples < 2:
        raise ValueError(f"n_resamples must be an integer >= 2, got {n_resamples!r}")
    if sampling not in SAMPLING_METHODS:
        raise ValueError(f"sampling must be one of {', '.join(map(repr, SAMPLING_METHODS))}, "
                         f"got {sampling!r}")
    return IntervalOptions(float(confidence_level), method, int(n_resamples), check_seed(rng),
                           sampling)


def check_seed(rng) -> int:
    """A 64-bit seed from ``rng``: an integer >= 0, a numpy ``Generator``
    (one integer drawn from it), or None (fresh entropy)."""
    if rng is None:
        return secrets.randbits(64)
    if isinstance(rng, np.random.Generator):
        return int(rng.integers(0, 2 ** 63))
    if isinstance(rng, bool) or not isinstance(rng, (int, np.integer)) or rng < 0:
        raise ValueError(f"rng must be a non-negative integer seed, a numpy Generator or "
                         f"None, got {rng!r}")
    return int(rng)


# -- the normal distribution (no scipy needed) --------------------------------

_NORMAL = statistics.NormalDist()


def normal_quantile(p):
    """Phi^-1 of probabilities (NaN outside (0, 1))."""
    p = np.asarray(p, dtype=np.float64)
    flat = [(_NORMAL.inv_cdf(x) if 0.0 < x < 1.0 else math.nan) for x in p.reshape(-1).tolist()]
    return np.asarray(flat, dtype=np.float64).reshape(p.shape)


def normal_cdf(x):
    """Phi of values (NaN stays NaN)."""
    x = np.asarray(x, dtype=np.float64)
    flat = [(_NORMAL.cdf(v) if not math.isnan(v) else math.nan) for v in x.reshape(-1).tolist()]
    return np.asarray(flat, dtype=np.float64).reshape(x.shape)


# -- binomial proportions -----------------------------------------------------


def proportion_interval(count, nobs, *, confidence_level: float = 0.95,
                        method: str = "wilson") -> ConfidenceInterval:
    """Confidence interval of a binomial proportion ``count / nobs``.

    The same intervals as statsmodels' ``proportion_confint``: ``"wilson"``
    (score interval), ``"clopper-pearson"`` (exact, from the beta
    distribution; statsmodels' ``"beta"``), ``"agresti-coull"`` and
    ``"jeffreys"`` (equal-tailed, beta(count + 1/2, nobs - count + 1/2)).
    ``count`` and ``nobs`` are integers or arrays of them (integer-valued
    floats: frequency weights); where ``nobs`` is 0 the interval is NaN. The
    beta methods need scipy.

    Parameters
    ----------
    count, nobs : int or array_like
        Successes and trials.
    confidence_level : float, default 0.95
    method : {"wilson", "clopper-pearson", "agresti-coull", "jeffreys"}

    Returns
    -------
    ConfidenceInterval
        ``value`` count / nobs; ``standard_error`` sqrt(p (1 - p) / nobs).

    Examples
    --------
    >>> from metrics_gpu.intervals import proportion_interval
    >>> ci = proportion_interval(45, 50, confidence_level=0.95, method="wilson")
    >>> round(ci.low, 4), round(ci.high, 4)
    (0.7864, 0.9565)
    """
    options = check_interval_options(confidence_level, method, rng=0)
    assert options is not None
    if method not in PROPORTION_METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, PROPORTION_METHODS))} "
                         f"for a proportion, got {method!r}")
    count = np.asarray(count, dtype=np.float64)
    nobs = np.asarray(nobs, dtype=np.float64)
    if np.any(~np.isfinite(count)) or np.any(count < 0) or np.any(count != np.floor(count)):
        raise ValueError("count must hold non-negative integers (frequency weights)")
    if np.any(~np.isfinite(nobs)) or np.any(nobs != np.floor(nobs)) or np.any(count > nobs):
        raise ValueError("nobs must hold integers no smaller than count")
    low, high, value, error = _proportion_bounds(count, nobs, options.alpha, method)
    scalar = low.ndim == 0
    convert = float if scalar else np.asarray
    return ConfidenceInterval(convert(value), convert(low), convert(high), convert(error),
                              options.confidence_level, method)


def _proportion_bounds(count, nobs, alpha: float, method: str):
    """(low, high, p, binomial standard error) of count / nobs, NaN where nobs is 0."""
    defined = nobs > 0
    n = np.where(defined, nobs, 1.0)
    q = count / n
    error = np.sqrt(q * (1.0 - q) / n)
    if method in ("wilson", "agresti-coull"):
        crit = -_NORMAL.inv_cdf(alpha)
        crit2 = crit ** 2
        if method == "wilson":
            denominator = 1 + crit2 / n
            center = (q + crit2 / (2 * n)) / denominator
            dist = crit * np.sqrt(q * (1.0 - q) / n + crit2 / (4.0 * n ** 2)) / denominator
        else:
            n_c = n + crit2
            center = (count + crit2 / 2.0) / n_c
            dist = crit * np.sqrt(center * (1.0 - center) / n_c)
        low, high = np.clip(center - dist, 0, 1), np.clip(center + dist, 0, 1)
    else:
        try:
            from scipy import stats
        except ImportError as error_:  # pragma: no cover - scipy comes with the test extra
            raise ImportError(f"method={method!r} needs scipy (the beta distribution's "
                              f"quantiles): {install_hint('stats')}") from error_
        with np.errstate(invalid="ignore"):
            if method == "clopper-pearson":
                low = stats.beta.ppf(alpha, count, n - count + 1)
                high = stats.beta.isf(alpha, count + 1, n - count)
                low = np.where(count == 0, 0.0, low)
                high = np.where(count == n, 1.0, high)
            else:
                low = stats.beta.ppf(alpha, count + 0.5, n - count + 0.5)
                high = stats.beta.isf(alpha, count + 0.5, n - count + 0.5)
    nan = math.nan
    return (np.where(defined, low, nan), np.where(defined, high, nan),
            np.where(defined, q, nan), np.where(defined, error, nan))


# The report's metrics that are binomial proportions: (successes, trials) of
# the report's counts. Their complements (error rates) are 1 - the interval.
def _proportions(c: F.Counts) -> dict[str, tuple[Any, Any, bool]]:
    correct = c.tp.sum(axis=0)
    predicted = c.predicted.sum(axis=0)
    support = c.support.sum(axis=0)
    return {
        "accuracy": (correct, c.total, False),
        "micro_precision": (correct, predicted, False),
        "micro_recall": (correct, support, False),
        "micro_f1": (correct, c.total, False),
        "hamming_loss": (correct, c.total, True),
        "zero_one_loss": (correct, c.total, True),
    }


_PER_CLASS_PROPORTIONS = {
    "precision": lambda c: (c.tp, c.predicted),
    "recall": lambda c: (c.tp, c.support),
    "specificity": lambda c: (c.tn, c.negatives),
}


# -- the bootstrap of a confusion matrix --------------------------------------


@dataclass(frozen=True)
class LabelIntervals:
    """Intervals of a label report: by metric name and by per-class column."""

    metrics: dict[str, ConfidenceInterval]
    per_class: dict[str, ConfidenceInterval]
    n_resamples: int | None
    seed: int | None


def _integer_table(matrix) -> np.ndarray:
    matrix = np.asarray(matrix)
    if matrix.dtype.kind == "f":
        if not np.all(np.isfinite(matrix)) or np.any(matrix != np.floor(matrix)):
            raise ValueError(
                "confidence intervals need integer counts: sample_weight must hold whole "
                "numbers (frequency weights); a bootstrap of float weights is not a "
                "resampling of the table")
        matrix = matrix.astype(np.int64)
    matrix = matrix.astype(np.int64, copy=False)
    if matrix.size and int(matrix.min()) < 0:
        raise ValueError("confusion_matrix: the counts must be non-negative, found "
                         f"{int(matrix.min())}")
    return matrix


def label_intervals(confusion_matrix, *, confidence_level: float = 0.95,
                    method: str = "percentile", n_resamples: int = DEFAULT_RESAMPLES,
                    rng: Any = None, sampling: str = "poisson") -> LabelIntervals:
    """Confidence intervals of every label metric of a confusion matrix.

    The report's metrics (:data:`metrics_gpu.REPORT_METRICS`) and per-class
    columns of the matrix's K classes, each with its interval: the bootstrap
    draws each non-empty cell Poisson(its count) per replicate, so the cost
    is O(n_resamples x cells) whatever the number of samples behind the
    matrix. :func:`metrics_gpu.label_report` and
    :meth:`metrics_gpu.ClassificationMetrics.compute` call this with their
    matrix (``confidence_level=``).

    Parameters
    ----------
    confusion_matrix : array_like of shape (K, K)
        Counts, rows true and columns predicted (whole numbers: frequency weights).
    confidence_level : float, default 0.95
    method : str, default "percentile"
        ``"percentile"``, ``"basic"``, ``"bca"`` (bootstrap), or ``"wilson"``,
        ``"clopper-pearson"``, ``"agresti-coull"``, ``"jeffreys"`` (the
        proportions only).
    n_resamples : int, default 9999
    rng : int, numpy.random.Generator or None
        The seed: the same seed gives the same intervals on every backend.
    sampling : "poisson"

    Returns
    -------
    LabelIntervals

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu.intervals import label_intervals
    >>> found = label_intervals(np.array([[40, 10], [5, 45]]), rng=0, n_resamples=2000)
    >>> ci = found.metrics["accuracy"]
    >>> ci.value, bool(ci.low < 0.85 < ci.high)
    (0.85, True)
    """
    options = check_interval_options(confidence_level, method, n_resamples, rng, sampling)
    assert options is not None
    backend = resolve_backend(confusion_matrix)
    matrix = np.asarray(backend.to_host(backend.asarray(confusion_matrix)))
    return interval_table(matrix, options, backend=backend)


def interval_table(matrix, options: IntervalOptions, values: dict[str, float] | None = None,
                   columns: dict[str, np.ndarray] | None = None, backend: Any = None,
                   clusters=None) -> LabelIntervals:
    """Intervals of every report metric and per-class column of a K x K
    confusion matrix of counts (rows true, columns predicted, over the
    report's classes). ``values`` / ``columns``: the report's own values
    (computed from the matrix when None). ``clusters``: the (C, K, K)
    matrices of the units the samples belong to (they sum to ``matrix``):
    the bootstrap then draws each unit Poisson(1) times, with all its samples
    (the cluster bootstrap), and BCa's jackknife leaves one unit out."""
    table = _integer_table(matrix)
    if table.ndim != 2 or table.shape[0] != table.shape[1]:
        raise ValueError(f"the confusion matrix must be square, got shape {table.shape}")
    stats = _table_statistics(table)
    # The intervals are computed about the host formulas' values of the table,
    # whichever backend made the report, so that a seed gives the same
    # intervals everywhere (BCa compares replicates with the value: a kernel's
    # last bit must not move one across it); the values shown are the report's.
    own_values, own_columns = _evaluate(stats)
    if values is None or columns is None:
        values = {name: float(v) for name, v in own_values.items()}
        columns = own_columns
    if options.method in PROPORTION_METHODS:
        if clusters is not None:
            raise ValueError(f"method={options.method!r} assumes independent samples; with "
                             "cluster= use 'percentile', 'basic' or 'bca' (the cluster "
                             "bootstrap)")
        return _proportion_intervals(stats, options, values, columns)
    key = _resample.seed_key(options.seed)
    if clusters is not None:
        units = _integer_table(clusters)
        replicate_values, replicate_columns, jackknife, counts = _cluster_replicates(
            table, units, options, key, backend)
    else:
        cells = np.flatnonzero(table)
        counts = table.reshape(-1)[cells]
        replicate_values, replicate_columns = _replicates(table.shape[0], cells, counts,
                                                          options.n_resamples, key, backend)
        jackknife = None
        if options.method == "bca":
            jackknife = _jackknife(stats, table.shape[0], cells, counts)
    metrics = {name: replace(_bootstrap_interval(own_values[name], replicate_values[name],
                                                 options, None if jackknife is None
                                                 else jackknife[0][name], counts),
                             value=float(values[name]))
               for name in replicate_values}
    per_class = {name: replace(_bootstrap_interval(own_columns[name], replicate_columns[name],
                                                   options, None if jackknife is None
                                                   else jackknife[1][name], counts),
                               value=np.asarray(columns[name], dtype=np.float64))
                 for name in replicate_columns}
    return LabelIntervals(metrics, per_class, options.n_resamples, options.seed)


def _table_statistics(table) -> ClassStatistics:
    """ClassStatistics of a (K, K) table, or of (K, K, B) replicate tables."""
    tp = np.diagonal(table, axis1=0, axis2=1)
    if tp.ndim > 1:
        tp = tp.T  # diagonal puts the replicate axis first
    positions = np.arange(table.shape[0])
    gap = positions[:, None] - positions[None, :]
    gap = gap.reshape(gap.shape + (1,) * (table.ndim - 2))
    total = table.sum(axis=(0, 1))
    return ClassStatistics(
        true_positives=np.asarray(tp, dtype=np.float64),
        support=table.sum(axis=1).astype(np.float64),
        predicted=table.sum(axis=0).astype(np.float64),
        total=np.asarray(total, dtype=np.float64), observed=None,
        linear_disagreement=np.asarray((table * np.abs(gap)).sum(axis=(0, 1)), dtype=np.float64),
        quadratic_disagreement=np.asarray((table * gap * gap).sum(axis=(0, 1)),
                                          dtype=np.float64),
        misclassified=np.asarray(total - np.asarray(tp).sum(axis=0), dtype=np.float64))


def _evaluate(stats: ClassStatistics):
    """The report's metrics and per-class columns of statistics whose arrays are
    (K,) or (K, B): the rows of REPORT_METRICS and PER_CLASS_METRICS."""
    c = F.Counts.from_statistics(stats, np)
    per_class = dict(F.PER_CLASS_METRICS)
    with F._quiet(np):
        values = {row.name: row.formula(c, stats) for row in F.REPORT_METRICS}
        columns = {name: per_class[name](c) for name in F.LABEL_METRIC_COLUMNS}
    return values, columns


def _replicate_statistics(num_classes: int, cells, draws, num_groups: int = 1
                          ) -> ClassStatistics:
    """ClassStatistics (K, G b) of replicate tables given as draws (cells, b)
    of the non-empty cells (flat indices into the (G, K, K) tables; G = 1:
    one K x K table); column g b + j is group g's replicate j."""
    k, b = num_classes, draws.shape[1]
    group, cell = np.divmod(cells, k * k)
    rows, cols = np.divmod(cell, k)
    draws = draws.astype(np.float64)

    def sums(index, size, values):
        """(size, b): rows of ``values`` (cells, b) summed by ``index``."""
        out = np.zeros((size, b))
        order = np.argsort(index, kind="stable")
        sorted_index = index[order]
        starts = np.flatnonzero(np.r_[True, sorted_index[1:] != sorted_index[:-1]])
        if sorted_index.size:
            out[sorted_index[starts]] = np.add.reduceat(values[order], starts, axis=0)
        return out

    def per_class(index, values=draws):
        # (G K, b) -> (K, G b): columns by group, then replicate.
        return sums(group * k + index, num_groups * k, values).reshape(num_groups, k, b) \
            .transpose(1, 0, 2).reshape(k, num_groups * b)

    def per_group(weights=None):
        values = draws if weights is None else weights[:, None] * draws
        return sums(group, num_groups, values).reshape(-1)

    diagonal = rows == cols
    gap = (rows - cols).astype(np.float64)
    return ClassStatistics(
        true_positives=per_class(rows, np.where(diagonal[:, None], draws, 0.0)),
        support=per_class(rows), predicted=per_class(cols), total=per_group(), observed=None,
        linear_disagreement=per_group(np.abs(gap)), quadratic_disagreement=per_group(gap * gap),
        misclassified=per_group((~diagonal).astype(np.float64)))


def _cluster_replicates(table, units, options: IntervalOptions, key, backend):
    """The cluster bootstrap: replicate b counts each unit's matrix w_cb times,
    w_cb Poisson(1) drawn per (unit, replicate); BCa's jackknife leaves one
    unit out (each weighing 1). Returns the replicates' metrics and columns,
    the jackknife (or None) and the jackknife's weights."""
    k = table.shape[0]
    present = np.flatnonzero(units.reshape(units.shape[0], -1).any(axis=1))
    units = units[present]
    cells = np.flatnonzero(units)
    unit_of, local = np.divmod(cells, k * k)
    counts = units.reshape(-1)[cells].astype(np.float64)
    ones = np.ones(present.size, dtype=np.int64)
    chunk = max(1, min(options.n_resamples, _CHUNK_VALUES // max(cells.size, k, 1)))

    def chunks():
        for start in range(0, options.n_resamples, chunk):
            size = min(chunk, options.n_resamples - start)
            weights = replicate_draws(backend, ones, present, start, size, key)
            draws = counts[:, None] * weights[unit_of]
            yield size, _replicate_statistics(k, local, draws)

    replicate_values, replicate_columns = _evaluated_chunks(chunks())
    jackknife = None
    if options.method == "bca":
        left_out = table[None].astype(np.float64) - units
        jackknife = _evaluate(_table_statistics(np.moveaxis(left_out, 0, -1)))
        jackknife = ({name: np.broadcast_to(v, (present.size,))
                      for name, v in jackknife[0].items()}, jackknife[1])
    return replicate_values, replicate_columns, jackknife, np.ones(present.size)


def histogram_intervals(histogram, options: IntervalOptions, backend: Any = None
                        ) -> tuple[dict[str, ConfidenceInterval], dict[str, ConfidenceInterval]]:
    """Intervals of the binned ROC AUC and average precision of each class from
    a stream's (2, K, H) score histogram (rows whose target is k, then the
    others): each sample is in one cell of each class's pair of rows, so a
    replicate draws those cells Poisson(count). Returns ``(metrics,
    per_class)``: ``per_class["roc_auc"]`` and ``["average_precision"]``, and
    for K = 2 the binary ``metrics["roc_auc"]`` / ``["average_precision"]``
    (class 1's). The averages over classes get none: the classes' draws are
    not of the same samples."""
    if options.method in PROPORTION_METHODS:
        return {}, {}
    table = _integer_table(histogram)
    _, k, h = table.shape
    auc, _, ap, _ = F.binned_rank_areas(table[0], table[1])
    values = {"roc_auc": auc, "average_precision": ap}
    cells = np.flatnonzero(table)
    counts = table.reshape(-1)[cells]
    key = _resample.seed_key(options.seed)
    chunk = max(1, min(options.n_resamples, _CHUNK_VALUES // max(table.size, cells.size, 1)))
    parts: dict[str, list] = {"roc_auc": [], "average_precision": []}
    for start in range(0, options.n_resamples, chunk):
        b = min(chunk, options.n_resamples - start)
        draws = replicate_draws(backend, counts, cells, start, b, key)
        dense = np.zeros((table.size, b))
        dense[cells] = draws
        dense = dense.reshape(2, k, h, b).transpose(0, 1, 3, 2)   # (2, K, b, H)
        rep_auc, _, rep_ap, _ = F.binned_rank_areas(dense[0], dense[1])
        parts["roc_auc"].append(rep_auc)
        parts["average_precision"].append(rep_ap)
    jackknife = _histogram_jackknife(table, cells) if options.method == "bca" else None
    per_class = {}
    for name, reps in parts.items():
        per_class[name] = _bootstrap_interval(
            values[name], np.concatenate(reps, axis=1), options,
            acceleration=None if jackknife is None
            else _class_accelerations(jackknife[name], cells, counts, k, h))
    metrics = {}
    if k == 2:
        metrics = {name: ConfidenceInterval(float(ci.value[1]), float(ci.low[1]),
                                            float(ci.high[1]), float(ci.standard_error[1]),
                                            ci.confidence_level, ci.method)
                   for name, ci in per_class.items()}
    return metrics, per_class


def _histogram_jackknife(table, cells) -> dict[str, np.ndarray]:
    """Each class's ROC AUC and AP with one sample of a cell of its rows left
    out: (J,) each, for the cells in ``cells`` order."""
    _, k, h = table.shape
    side, rest = np.divmod(cells, k * h)
    klass, bin_ = np.divmod(rest, h)
    out: dict[str, list] = {"roc_auc": [], "average_precision": []}
    chunk = max(1, _CHUNK_VALUES // max(h, 1))
    for start in range(0, cells.size, chunk):
        s, c, b = side[start:start + chunk], klass[start:start + chunk], bin_[start:start + chunk]
        rows = np.arange(s.size)
        positive = table[0][c].astype(np.float64)
        negative = table[1][c].astype(np.float64)
        positive[rows[s == 0], b[s == 0]] -= 1
        negative[rows[s == 1], b[s == 1]] -= 1
        auc, _, ap, _ = F.binned_rank_areas(positive, negative)
        out["roc_auc"].append(auc)
        out["average_precision"].append(ap)
    return {name: np.concatenate(v) for name, v in out.items()}


def _class_accelerations(values, cells, counts, k: int, h: int) -> np.ndarray:
    """BCa's acceleration of each class's value: the jackknife over its own
    rows' cells (every sample is in exactly one of them)."""
    klass = (cells % (k * h)) // h
    out = np.full(k, math.nan)
    for c in np.unique(klass).tolist():
        mine = klass == c
        with np.errstate(all="ignore"):
            out[c] = _acceleration(values[mine], counts[mine].astype(np.float64))
    return out


def _evaluated_chunks(chunks) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The metrics (B,) and per-class columns (K, B) of (K, b) statistics
    chunks, joined along the replicate axis."""
    values: dict[str, list] = {}
    columns: dict[str, list] = {}
    for size, chunk_stats in chunks:
        chunk_values, chunk_columns = _evaluate(chunk_stats)
        for name, v in chunk_values.items():
            values.setdefault(name, []).append(np.broadcast_to(v, (size,)))
        for name, v in chunk_columns.items():
            columns.setdefault(name, []).append(v)
    return ({name: np.concatenate(v) for name, v in values.items()},
            {name: np.concatenate(v, axis=1) for name, v in columns.items()})


def replicate_draws(backend, counts, cells, start: int, size: int, key) -> np.ndarray:
    """Draws (cells, size) of replicates ``start`` .. ``start + size - 1`` on the
    host, drawn by ``backend`` (kernels/resample.cu on the kernel backends, its
    NumPy reference on numpy: the same numbers)."""
    if backend is None:
        backend = get_backend_implementation("numpy")
    return np.asarray(backend.to_host(backend.poisson_table_draws(counts, cells, start, size,
                                                                  key)))


def _replicates(num_classes: int, cells, counts, n_resamples: int, key, backend=None):
    """Every report metric (B,) and per-class column (K, B) over the replicates."""
    chunk = max(1, min(n_resamples, _CHUNK_VALUES // max(cells.size, num_classes, 1)))

    def chunks():
        for start in range(0, n_resamples, chunk):
            size = min(chunk, n_resamples - start)
            draws = replicate_draws(backend, counts, cells, start, size, key)
            yield size, _replicate_statistics(num_classes, cells, draws)

    return _evaluated_chunks(chunks())


def _jackknife(stats: ClassStatistics, num_classes: int, cells, counts):
    """The leave-one-out values: one per non-empty cell (a sample of that cell
    left out), metrics (J,) and per-class columns (K, J)."""
    rows, cols = np.divmod(cells, num_classes)
    chunk = max(1, _CHUNK_VALUES // max(num_classes, 1))

    def chunks():
        for start in range(0, cells.size, chunk):
            r, c = rows[start:start + chunk], cols[start:start + chunk]
            j = np.arange(r.size)
            tp = np.repeat(stats.true_positives[:, None], r.size, axis=1)
            support = np.repeat(stats.support[:, None], r.size, axis=1)
            predicted = np.repeat(stats.predicted[:, None], r.size, axis=1)
            support[r, j] -= 1
            predicted[c, j] -= 1
            diagonal = r == c
            tp[r[diagonal], j[diagonal]] -= 1
            gap = (r - c).astype(np.float64)
            yield r.size, ClassStatistics(
                true_positives=tp, support=support, predicted=predicted,
                total=np.full(r.size, float(stats.total) - 1), observed=None,
                linear_disagreement=float(stats.linear_disagreement) - np.abs(gap),
                quadratic_disagreement=float(stats.quadratic_disagreement) - gap * gap,
                misclassified=float(stats.misclassified) - (~diagonal))

    return _evaluated_chunks(chunks())


def _bootstrap_interval(value, replicates, options: IntervalOptions, jackknife=None,
                        weights=None, acceleration=None) -> ConfidenceInterval:
    """The interval of one metric from its replicates (last axis), scipy's
    percentile, basic and BCa definitions; NaN replicates (an undefined
    metric in that replicate) are left out. BCa's acceleration is
    ``acceleration`` where given, else that of the ``jackknife`` values (last
    axis) with their ``weights``."""
    replicates = np.asarray(replicates, dtype=np.float64)
    value_array = np.asarray(value, dtype=np.float64)
    alpha = options.alpha
    with np.errstate(all="ignore"):
        defined = ~np.isnan(replicates)
        n_defined = defined.sum(axis=-1)
        error = _nan_std(replicates, defined, n_defined)
        if options.method == "bca":
            below = (replicates < value_array[..., None]).sum(axis=-1)
            at_or_below = (replicates <= value_array[..., None]).sum(axis=-1)
            z0 = normal_quantile((below + at_or_below) / (2.0 * np.maximum(n_defined, 1)))
            if acceleration is None:
                acceleration = _acceleration(np.asarray(jackknife, dtype=np.float64),
                                             np.asarray(weights, dtype=np.float64))
            z_alpha = float(normal_quantile(alpha))
            num1, num2 = z0 + z_alpha, z0 - z_alpha
            levels = (normal_cdf(z0 + num1 / (1 - acceleration * num1)),
                      normal_cdf(z0 + num2 / (1 - acceleration * num2)))
        else:
            levels = (np.full(value_array.shape, alpha), np.full(value_array.shape, 1 - alpha))
        low = _nan_quantile(replicates, levels[0])
        high = _nan_quantile(replicates, levels[1])
        if options.method == "basic":
            low, high = 2 * value_array - high, 2 * value_array - low
    undefined = np.isnan(value_array)
    low, high = np.where(undefined, math.nan, low), np.where(undefined, math.nan, high)
    convert = float if value_array.ndim == 0 else np.asarray
    return ConfidenceInterval(convert(value_array), convert(low), convert(high),
                              convert(error), options.confidence_level, options.method)


def _nan_std(replicates, defined, n_defined):
    mean = np.where(defined, replicates, 0.0).sum(axis=-1) / np.maximum(n_defined, 1)
    squares = np.where(defined, (replicates - mean[..., None]) ** 2, 0.0).sum(axis=-1)
    return np.where(n_defined > 1, np.sqrt(squares / np.maximum(n_defined - 1, 1)), math.nan)


def _nan_quantile(replicates, levels):
    """Each row's quantile at its own level (linear interpolation, numpy's
    default), over the non-NaN replicates; NaN where the level is NaN or
    no replicate is defined."""
    ordered = np.sort(replicates, axis=-1)  # NaN sort last
    n = (~np.isnan(ordered)).sum(axis=-1)
    levels = np.asarray(levels, dtype=np.float64)
    position = levels * (n - 1)
    valid = (n > 0) & ~np.isnan(position)
    position = np.where(valid, position, 0.0)
    lower = np.floor(position).astype(np.int64)
    upper = np.minimum(lower + 1, np.maximum(n - 1, 0))
    fraction = position - lower
    lo = np.take_along_axis(ordered, lower[..., None], axis=-1)[..., 0]
    hi = np.take_along_axis(ordered, upper[..., None], axis=-1)[..., 0]
    return np.where(valid, lo + (hi - lo) * fraction, math.nan)


def _acceleration(jackknife, weights):
    """BCa's acceleration from leave-one-out values (last axis) each standing for
    ``weights`` samples: sum w U^3 / (6 (sum w U^2)^(3/2)), U = mean - value."""
    total = weights.sum()
    mean = (jackknife * weights).sum(axis=-1) / total
    u = mean[..., None] - jackknife
    return (weights * u ** 3).sum(axis=-1) / (6.0 * ((weights * u * u).sum(axis=-1)) ** 1.5)


def _proportion_intervals(stats: ClassStatistics, options: IntervalOptions, values, columns):
    """Binomial intervals of the report's proportions (the others are absent)."""
    c = F.Counts.from_statistics(stats, np)
    metrics = {}
    for name, (successes, trials, complement) in _proportions(c).items():
        low, high, _, error = _proportion_bounds(np.asarray(successes), np.asarray(trials),
                                                 options.alpha, options.method)
        if complement:
            low, high = 1.0 - high, 1.0 - low
        metrics[name] = ConfidenceInterval(values[name], float(low), float(high), float(error),
                                           options.confidence_level, options.method)
    per_class = {}
    for name, terms in _PER_CLASS_PROPORTIONS.items():
        successes, trials = terms(c)
        low, high, _, error = _proportion_bounds(successes, trials, options.alpha,
                                                 options.method)
        # The report's convention for an undefined rate is 0; its interval stays NaN.
        per_class[name] = ConfidenceInterval(np.asarray(columns[name], dtype=np.float64),
                                             low, high, error, options.confidence_level,
                                             options.method)
    return LabelIntervals(metrics, per_class, None, None)


# -- ROC AUC: DeLong ----------------------------------------------------------


def _midranks(values):
    """Ranks 1..n of ``values`` with ties given their mean rank."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    boundaries = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1], True])
    first, last = boundaries[:-1], boundaries[1:]
    mean_rank = (first + last + 1) / 2.0  # ranks first+1 .. last
    ranks = np.empty(values.shape[0])
    ranks[order] = np.repeat(mean_rank, last - first)
    return ranks


def roc_auc_interval(y_true, y_score, *, confidence_level: float = 0.95,
                     method: str = "delong", n_resamples: int = DEFAULT_RESAMPLES,
                     rng: Any = None, pos_label=1) -> ConfidenceInterval:
    """ROC AUC of a binary problem with its confidence interval.

    ``method="delong"``: DeLong, DeLong and Clarke-Pearson's (1988) standard
    error from the placement values, computed from midranks in O(N log N)
    (Sun and Xu 2014); the interval is AUC -/+ z SE, clipped to [0, 1] (as
    pROC). ``"percentile"``, ``"basic"`` or ``"bca"``: the bootstrap of the
    table of (score, label) pairs, each distinct pair a cell drawn
    Poisson(its count) per replicate (the Poisson bootstrap of the samples;
    ties stay ties), the same counter-based draws as the label reports'
    (``rng``: the seed). Its cost is O(n_resamples x distinct pairs): for
    millions of distinct scores, DeLong's.

    Parameters
    ----------
    y_true : array_like of shape (N,)
        Binary labels; ``pos_label`` marks the positives.
    y_score : array_like of shape (N,)
        Scores, higher for the positive class; finite.
    confidence_level : float, default 0.95
    method : {"delong", "percentile", "basic", "bca"}, default "delong"
    n_resamples : int, default 9999
        Bootstrap replicates.
    rng : int, numpy.random.Generator or None
        The bootstrap's seed.
    pos_label : int, default 1

    Returns
    -------
    ConfidenceInterval

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu.intervals import roc_auc_interval
    >>> ci = roc_auc_interval(np.array([0, 0, 1, 1, 0, 1]), np.array([.1, .4, .35, .8, .2, .9]))
    >>> round(ci.value, 4), round(ci.standard_error, 4)
    (0.8889, 0.1571)
    """
    if method not in ("delong",) + BOOTSTRAP_METHODS:
        raise ValueError(f"method must be 'delong' or one of "
                         f"{', '.join(map(repr, BOOTSTRAP_METHODS))} for ROC AUC, got {method!r}")
    options = check_interval_options(confidence_level,
                                     "percentile" if method == "delong" else method,
                                     n_resamples, 0 if method == "delong" else rng)
    assert options is not None
    # The draws are the backend's (the scores are ranked on the host).
    backend = resolve_backend(*(a for a in (y_true, y_score) if hasattr(a, "shape")))
    y_true = _host_vector(y_true, "y_true")
    y_score = _host_vector(y_score, "y_score").astype(np.float64)
    if y_true.shape != y_score.shape:
        raise ValueError(f"y_true and y_score must have the same length, got "
                         f"{y_true.shape[0]} and {y_score.shape[0]}")
    if not np.all(np.isfinite(y_score)):
        raise ValueError("y_score must be finite: it holds a NaN or an infinity")
    classes = np.unique(y_true)
    if classes.size > 2 or (classes.size == 2 and pos_label not in classes.tolist()):
        raise ValueError(f"y_true must be binary with pos_label={pos_label!r} as one of its "
                         f"classes, got classes {classes.tolist()}")
    positive = y_true == pos_label
    m, n = int(positive.sum()), int((~positive).sum())
    if m == 0 or n == 0:
        nan = math.nan
        return ConfidenceInterval(nan, nan, nan, nan, options.confidence_level, method)
    if method != "delong":
        return _bootstrap_roc_auc(y_score, positive, options, backend)
    ranks = _midranks(y_score)
    ranks_pos = _midranks(y_score[positive])
    ranks_neg = _midranks(y_score[~positive])
    v10 = (ranks[positive] - ranks_pos) / n       # share of negatives below each positive
    v01 = 1.0 - (ranks[~positive] - ranks_neg) / m  # share of positives above each negative
    auc = float(v10.mean())
    variance = (v10.var(ddof=1) if m > 1 else 0.0) / m + (v01.var(ddof=1) if n > 1 else 0.0) / n
    error = math.sqrt(variance)
    crit = -_NORMAL.inv_cdf(options.alpha)
    return ConfidenceInterval(auc, max(0.0, auc - crit * error), min(1.0, auc + crit * error),
                              error, options.confidence_level, "delong")


def _bootstrap_roc_auc(y_score, positive, options: IntervalOptions,
                       backend: Any = None) -> ConfidenceInterval:
    """The bootstrap interval of ROC AUC from the (label, distinct score) table."""
    scores, index = np.unique(y_score, return_inverse=True)
    d = scores.size
    index = index.reshape(-1)
    table = np.zeros((2, d), dtype=np.int64)   # row 0 negatives, row 1 positives
    np.add.at(table, (positive.astype(np.int64), index), 1)
    # ROC AUC of counts per distinct score: the binned formula with one bin a score.
    value = float(F.binned_rank_areas(table[1], table[0])[0])
    cells = np.flatnonzero(table)
    counts = table.reshape(-1)[cells]
    key = _resample.seed_key(options.seed)
    chunk = max(1, min(options.n_resamples, _CHUNK_VALUES // max(cells.size, 1)))
    replicates = []
    for start in range(0, options.n_resamples, chunk):
        b = min(chunk, options.n_resamples - start)
        draws = replicate_draws(backend, counts, cells, start, b, key).astype(np.float64)
        flat = np.zeros((2 * d, b))
        flat[cells] = draws
        by_label = flat.reshape(2, d, b).transpose(0, 2, 1)   # (label, replicate, score)
        replicates.append(F.binned_rank_areas(by_label[1], by_label[0])[0])
    jackknife = None
    if options.method == "bca":
        jackknife = _roc_auc_jackknife(table, cells)
    return _bootstrap_interval(value, np.concatenate(replicates), options, jackknife,
                               counts)


def _roc_auc_jackknife(table, cells):
    """ROC AUC with one sample of each non-empty cell left out (the cells' order)."""
    negatives, positives = table[0].astype(np.float64), table[1].astype(np.float64)
    m, n = positives.sum(), negatives.sum()
    below = np.cumsum(negatives) - negatives            # negatives below each score
    above = positives.sum() - np.cumsum(positives)      # positives above each score
    area = (positives * (below + 0.5 * negatives)).sum()
    label, score = np.divmod(cells, table.shape[1])
    with np.errstate(all="ignore"):
        without_positive = (area - (below + 0.5 * negatives)[score]) / ((m - 1) * n)
        without_negative = (area - (above + 0.5 * positives)[score]) / (m * (n - 1))
    return np.where(label == 1, without_positive, without_negative)


def _host_vector(values, name: str) -> np.ndarray:
    array = to_numpy(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {array.shape}")
    return array


def interval_legend(intervals: LabelIntervals) -> str:
    """One line saying what the ``[low, high]`` of a report are."""
    interval = next(iter(intervals.metrics.values()), None)
    if interval is None:
        return "intervals: none"
    what = f"{interval.confidence_level:.4g} confidence intervals ({interval.method}"
    if intervals.n_resamples is not None:
        what += (f" bootstrap, {intervals.n_resamples} Poisson resamples of the confusion "
                 f"matrix, seed {intervals.seed}")
    else:
        what += ", binomial; only the metrics that are proportions"
    return what + ")"


__all__ = [
    "BETA_METHODS", "BOOTSTRAP_METHODS", "ConfidenceInterval", "INTERVAL_METHODS", "LabelIntervals",
    "PROPORTION_METHODS", "label_intervals", "proportion_interval", "roc_auc_interval",
]

