"""CPU bench: the multilabel metrics on the numpy backend vs scikit-learn and torchmetrics.

    python bench/cpu_multilabel.py [--cases 1e4x10 1e5x10 1e6x10 1e4x100 1e5x100]
        [--repeat 3] [--sklearn-repeat 1] [--torchmetrics-repeat 1] [--torch-threads 1]
        [--sklearn-ranking-samples 1e5] [--auc-samples 1e5]
        [--skip threshold ranking auc torchmetrics] [--seed 0] [--json PATH] [--write-results]

In one run, for every (N, L) case (``--cases NxL``: N = 1e4, 1e5, 1e6 at
L = 10 and N = 1e4, 1e5 at L = 100 by default, about 75 s on 2 cores;
``1e6x100`` adds about 2.5 minutes, ``1e6x1000`` far more), on the same
arrays: ``y_true`` (N, L) int8 0/1
indicators (label j relevant with probability p_j, p_j uniform in
[0.02, 0.4)), ``scores`` (N, L) float32 = sigmoid(N(0, 1) + 2.5 y - 1.5)
rounded to 0.01 (so every row holds tied scores), ``y_pred = scores >= 0.5``
as int8. Ours is ``metrics_gpu`` under ``use_backend("numpy")``; scikit-learn
gets the same NumPy arrays; torchmetrics (CPU) gets zero-copy torch views of
them (``torch.from_numpy``) and ``validate_args=False``:

* the threshold report, what a user computes together from ``y_pred``:
  ``accuracy_score`` (subset accuracy), ``hamming_loss``,
  ``precision_recall_fscore_support`` with ``average`` micro, macro and
  samples, ``multilabel_confusion_matrix`` and ``classification_report(...,
  output_dict=True)``, ``zero_division=0`` throughout; the report's time is
  the sum of the 7 calls' (each library's own calls). torchmetrics:
  ``multilabel_exact_match``, ``multilabel_hamming_distance(average="micro")``,
  ``multilabel_precision`` + ``multilabel_recall`` + ``multilabel_f1_score``
  (micro, macro; samples = ``multidim_average="samplewise"``,
  ``average="micro"``, then the mean over the samples) and
  ``multilabel_confusion_matrix``; it has no classification report, so its
  report time and ratio are over the 6 other calls;
* the ranking metrics on ``scores``: ``label_ranking_average_precision_score``
  (LRAP), ``label_ranking_loss``, ``coverage_error`` (torchmetrics:
  ``multilabel_ranking_average_precision``, ``multilabel_ranking_loss``,
  ``multilabel_coverage_error``). scikit-learn's LRAP and ranking loss, and
  torchmetrics' LRAP, loop over the rows in Python: all three libraries are
  compared on the first ``min(N, --sklearn-ranking-samples)`` rows (the
  ``rows`` column); "ours at N" is our time on all N rows;
* multilabel ``roc_auc_score`` and ``average_precision_score``, macro
  (torchmetrics: ``multilabel_auroc`` / ``multilabel_average_precision``,
  ``thresholds=None``), on the first ``min(N, --auc-samples)`` rows
  (scikit-learn sorts each label's column: O(L N log N)).

Times are wall times (``time.perf_counter``), best of ``--repeat`` runs for
ours, ``--sklearn-repeat`` for scikit-learn and ``--torchmetrics-repeat`` for
torchmetrics, after one untimed call of every function on tiny inputs
(first-call costs out); speedup = their time / ours. torch runs on
``--torch-threads`` threads (default 1: ours and scikit-learn's calls here
are single-threaded too, and torch's thread pool stalls badly when other
processes share the cores); the 1-minute load average is printed at the start
and the end.
``agree``: ours vs scikit-learn, every number (the P/R/F triple, each cell of
the confusion matrices, each entry of the report) within rtol 1e-6, the
integer counts exactly. ``tm agree``: ours vs torchmetrics, only where it
defines the same number: subset accuracy, Hamming loss, P/R/F micro, macro
and samples, the confusion matrices, LRAP, coverage error, ROC AUC and AP
macro; within rtol 1e-4, as torchmetrics returns float32 (and sums its LRAP
row by row in float32). Not compared: its ranking loss (it ranks tied scores
by ``argsort`` order, where scikit-learn counts a tied (relevant, irrelevant)
pair as mis-ordered) and its per-label ``multilabel_accuracy`` (a mean of
per-label accuracies, not subset accuracy, so not used at all).

Targets (project issue), printed PASS/MISS from the measured numbers: on the
CPU, the threshold report >= 10x scikit-learn, and LRAP + ranking loss +
coverage error (their times summed, on the compared rows) >= 100x.

``--write-results`` writes ``bench/results/<date>-cpu-<family>-<n>core-multilabel.json``
and ``.md`` (the output exactly as printed). Exit status: 0 when every value
of ours agrees with scikit-learn's and every call of ours ran, 1 otherwise.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
import warnings
from dataclasses import dataclass

import numpy as np
from _common import (
    Printer,
    add_output_options,
    agree_text,
    best_time,
    case_shape,
    count,
    fmt,
    fmt_n,
    git_commit,
    print_notes,
    print_targets,
    stderr_progress,
    target_verdicts,
    write_outputs,
)
from cpu_scores import cpu_cores, cpu_model, device_slug

import metrics_gpu as mg

DEFAULT_CASES = ((10**4, 10), (10**5, 10), (10**6, 10), (10**4, 100), (10**5, 100))
DEFAULT_RANKING_SAMPLES = 10**5  # rows given to the row loops of scikit-learn / torchmetrics
DEFAULT_AUC_SAMPLES = 10**5
PREVALENCE = (0.02, 0.4)   # label j is relevant with probability p_j ~ U[0.02, 0.4)
SIGNAL, OFFSET = 2.5, -1.5  # score logit: N(0, 1) + SIGNAL * y + OFFSET
TIE_DECIMALS = 2           # scores rounded to 0.01: tied scores within every row
THRESHOLD = 0.5            # y_pred = scores >= THRESHOLD
GENERATION_ELEMENTS = 1 << 22  # scores drawn at a time

RTOL = 1e-6                # ours vs scikit-learn (float64 both)
RTOL_TORCHMETRICS = 1e-4   # ours vs torchmetrics (float32 results, float32 sums)
TARGET_REPORT = 10.0       # threshold report, x scikit-learn
TARGET_RANKING = 100.0     # LRAP + ranking loss + coverage, summed, x scikit-learn

REPORT_ROW = "threshold report: the 7 calls"
RANKING_ROW = "LRAP + ranking loss + coverage"

progress = stderr_progress("cpu_multilabel")


# -- environment -------------------------------------------------------------------


def environment(torch, tm_version) -> dict:
    import sklearn

    model, cores = cpu_model(), cpu_cores()
    return {
        "cpu": model, "cores": cores, "device": device_slug(model, cores),
        "machine": platform.machine(), "python": platform.python_version(),
        "numpy": np.__version__, "sklearn": sklearn.__version__,
        "torch": None if torch is None else torch.__version__,
        "torch_threads": None if torch is None else torch.get_num_threads(),
        "load_average_at_start": load_average(),
        "torchmetrics": tm_version,
        "metrics_gpu": mg.__version__, "commit": git_commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
    }


def load_average():
    """The 1-minute load average (other processes share these cores), or None."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def load_torchmetrics(notes: list[str], threads: int):
    """``(torch, torchmetrics.functional.classification, version)``; Nones with a note."""
    try:
        import torch
        import torchmetrics
        from torchmetrics.functional import classification
    except Exception as error:
        notes.append(f"torch / torchmetrics not importable ({type(error).__name__}: {error}): "
                     "the torchmetrics columns are empty")
        return None, None, None
    if threads:
        torch.set_num_threads(threads)
    return torch, classification, torchmetrics.__version__


# -- inputs ------------------------------------------------------------------------


@dataclass(frozen=True)
class Inputs:
    """The arrays of one case, and zero-copy torch views of them (None without torch)."""

    y_true: np.ndarray  # (N, L) int8
    y_pred: np.ndarray  # (N, L) int8
    scores: np.ndarray  # (N, L) float32
    y_true_t: object = None
    y_pred_t: object = None
    scores_t: object = None

    @property
    def num_labels(self) -> int:
        return int(self.y_true.shape[1])

    def head(self, rows: int) -> Inputs:
        """The first ``rows`` rows (views)."""
        if rows >= self.y_true.shape[0]:
            return self
        cut = [None if a is None else a[:rows] for a in
               (self.y_true, self.y_pred, self.scores, self.y_true_t, self.y_pred_t,
                self.scores_t)]
        return Inputs(*cut)


def make_inputs(n: int, num_labels: int, seed: int, torch) -> Inputs:
    """int8 indicators, float32 scores rounded to 0.01 (ties), their thresholding."""
    rng = np.random.default_rng(seed)
    prevalence = rng.uniform(*PREVALENCE, num_labels)
    y_true = np.empty((n, num_labels), dtype=np.int8)
    scores = np.empty((n, num_labels), dtype=np.float32)
    rows = max(1, GENERATION_ELEMENTS // num_labels)
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        relevant = rng.random((stop - start, num_labels)) < prevalence
        z = rng.standard_normal((stop - start, num_labels)) + SIGNAL * relevant + OFFSET
        y_true[start:stop] = relevant
        scores[start:stop] = np.round(1.0 / (1.0 + np.exp(-z)), TIE_DECIMALS)
    y_pred = (scores >= THRESHOLD).astype(np.int8)
    if torch is None:
        return Inputs(y_true, y_pred, scores)
    return Inputs(y_true, y_pred, scores, torch.from_numpy(y_true), torch.from_numpy(y_pred),
                  torch.from_numpy(scores))


# -- comparing values ----------------------------------------------------------------


def flat(value):
    """Every number of a result as one 1-d NumPy array: a scalar, a (P, R, F, support)
    tuple (None dropped), an array, a torch tensor, or a report dict (entries in key
    order; the keys kept apart for the comparison)."""
    if value is None:
        return None
    if isinstance(value, dict):
        keys = sorted(value)
        parts = [np.atleast_1d(np.asarray([value[k][m] for m in sorted(value[k])], dtype=float))
                 if isinstance(value[k], dict) else np.atleast_1d(float(value[k]))
                 for k in keys]
        return np.concatenate(parts)
    if isinstance(value, (tuple, list)):
        return np.concatenate([flat(v) for v in value if v is not None])
    if hasattr(value, "detach"):  # torch
        value = value.detach().cpu().numpy()
    return np.asarray(value).reshape(-1)


def same(ours, theirs, rtol: float):
    """Whether every number agrees (integers exactly); None when either is missing."""
    if ours is None or theirs is None:
        return None
    if isinstance(ours, dict) != isinstance(theirs, dict):
        return False
    if isinstance(ours, dict) and (sorted(ours) != sorted(theirs) or any(
            isinstance(ours[k], dict) and sorted(ours[k]) != sorted(theirs[k]) for k in ours)):
        return False
    a, b = flat(ours), flat(theirs)
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "iub" and b.dtype.kind in "iub":
        return bool(np.array_equal(a, b))
    return bool(np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=0,
                            equal_nan=True))


# -- timing --------------------------------------------------------------------------


class Run:
    """The options, notes and failures of the run; each call timed with its warnings kept."""

    def __init__(self, args, tm) -> None:
        self.args = args
        self.tm = tm  # torchmetrics.functional.classification, or None
        self.notes: list[str] = []
        self.failures = 0
        self._noted: set[str] = set()

    def note(self, text: str, key: str | None = None) -> None:
        key = text if key is None else key
        if key in self._noted:
            return
        self._noted.add(key)
        self.notes.append(text)
        progress(f"note: {text}")

    def time(self, label: str, function, repeat: int, ours: bool = False):
        """``(best seconds, last result)``; ``(None, None)`` with a note on an error (a
        failure when ``ours``). Warnings are recorded once each as notes."""
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                best, result = best_time(function, repeat)
        except Exception as error:
            if ours:
                self.failures += 1
            self.note(f"{label}: {type(error).__name__}: {error}".splitlines()[0][:300])
            return None, None
        for warning in caught:
            message = str(warning.message).splitlines()[0][:200]
            self.note(f"{label}: {warning.category.__name__}: {message}",
                      key=f"{label.split(',')[0]}|{message}")
        return best, result


def ratio(numerator, denominator):
    return None if numerator is None or denominator is None else numerator / denominator


def total(times):
    return None if not times or any(t is None for t in times) else sum(times)


@dataclass(frozen=True)
class Metric:
    """One row: how each library computes the same number from one case's inputs.

    ``torchmetrics`` is None where it has no such metric; ``tm_compared`` says whether
    its number is the same definition as ours (else timed, not compared).
    """

    name: str
    ours: object
    sklearn: object
    torchmetrics: object = None
    tm_compared: bool = True


def threshold_metrics(tm) -> list[Metric]:
    """The threshold report: what a user computes together from ``y_pred``."""
    from sklearn import metrics as sk

    def prfs(average):
        def theirs(d):
            return sk.precision_recall_fscore_support(d.y_true, d.y_pred, average=average,
                                                      zero_division=0)

        def ours(d):
            return mg.precision_recall_fscore_support(d.y_true, d.y_pred, average=average,
                                                      zero_division=0)

        def torchmetrics(d):
            options = ({"average": "micro", "multidim_average": "samplewise"}
                       if average == "samples" else {"average": average})
            parts = (tm.multilabel_precision, tm.multilabel_recall, tm.multilabel_f1_score)
            values = [f(d.y_pred_t, d.y_true_t, d.num_labels, validate_args=False, **options)
                      for f in parts]
            return tuple(v.mean() for v in values) if average == "samples" else tuple(values)

        return Metric(f"precision_recall_fscore_support {average}", ours, theirs,
                      torchmetrics if tm is not None else None)

    return [
        Metric("accuracy_score (subset accuracy)",
               lambda d: mg.accuracy_score(d.y_true, d.y_pred),
               lambda d: sk.accuracy_score(d.y_true, d.y_pred),
               None if tm is None else lambda d: tm.multilabel_exact_match(
                   d.y_pred_t, d.y_true_t, d.num_labels, validate_args=False)),
        Metric("hamming_loss",
               lambda d: mg.hamming_loss(d.y_true, d.y_pred),
               lambda d: sk.hamming_loss(d.y_true, d.y_pred),
               None if tm is None else lambda d: tm.multilabel_hamming_distance(
                   d.y_pred_t, d.y_true_t, d.num_labels, average="micro", validate_args=False)),
        prfs("micro"), prfs("macro"), prfs("samples"),
        Metric("multilabel_confusion_matrix",
               lambda d: mg.multilabel_confusion_matrix(d.y_true, d.y_pred),
               lambda d: sk.multilabel_confusion_matrix(d.y_true, d.y_pred),
               None if tm is None else lambda d: tm.multilabel_confusion_matrix(
                   d.y_pred_t, d.y_true_t, d.num_labels, validate_args=False)),
        Metric("classification_report (output_dict)",
               lambda d: mg.classification_report(d.y_true, d.y_pred, output_dict=True,
                                                  zero_division=0),
               lambda d: sk.classification_report(d.y_true, d.y_pred, output_dict=True,
                                                  zero_division=0)),
    ]


def ranking_metrics(tm) -> list[Metric]:
    from sklearn import metrics as sk

    def tm_call(name):
        if tm is None:
            return None
        function = getattr(tm, name)
        return lambda d: function(d.scores_t, d.y_true_t, d.num_labels, validate_args=False)

    return [
        Metric("label_ranking_average_precision_score",
               lambda d: mg.label_ranking_average_precision_score(d.y_true, d.scores),
               lambda d: sk.label_ranking_average_precision_score(d.y_true, d.scores),
               tm_call("multilabel_ranking_average_precision")),
        Metric("label_ranking_loss",
               lambda d: mg.label_ranking_loss(d.y_true, d.scores),
               lambda d: sk.label_ranking_loss(d.y_true, d.scores),
               tm_call("multilabel_ranking_loss"), tm_compared=False),
        Metric("coverage_error",
               lambda d: mg.coverage_error(d.y_true, d.scores),
               lambda d: sk.coverage_error(d.y_true, d.scores),
               tm_call("multilabel_coverage_error")),
    ]


def auc_metrics(tm) -> list[Metric]:
    from sklearn import metrics as sk

    return [
        Metric("roc_auc_score macro",
               lambda d: mg.roc_auc_score(d.y_true, d.scores, average="macro"),
               lambda d: sk.roc_auc_score(d.y_true, d.scores, average="macro"),
               None if tm is None else lambda d: tm.multilabel_auroc(
                   d.scores_t, d.y_true_t, d.num_labels, average="macro", thresholds=None,
                   validate_args=False)),
        Metric("average_precision_score macro",
               lambda d: mg.average_precision_score(d.y_true, d.scores, average="macro"),
               lambda d: sk.average_precision_score(d.y_true, d.scores, average="macro"),
               None if tm is None else lambda d: tm.multilabel_average_precision(
                   d.scores_t, d.y_true_t, d.num_labels, average="macro", thresholds=None,
                   validate_args=False)),
    ]


def measure(run: Run, metric: Metric, tag: str, compared: Inputs, full: Inputs | None = None,
            kind: str = "function") -> dict:
    """One row: ours, scikit-learn's and torchmetrics' times and agreement on ``compared``;
    with ``full`` (more rows than ``compared``), ours on it too ("ours at N")."""
    args = run.args
    label = f"{metric.name}, {tag}"
    progress(f"  {metric.name}")
    with mg.use_backend("numpy"):
        ours_s, ours = run.time(f"{label}: ours", lambda: metric.ours(compared), args.repeat,
                                ours=True)
        ours_full_s = ours_s
        if full is not None and full is not compared:
            ours_full_s, _ = run.time(f"{label}: ours at N", lambda: metric.ours(full),
                                      args.repeat, ours=True)
    sk_s, theirs = run.time(f"{label}: scikit-learn", lambda: metric.sklearn(compared),
                            args.sklearn_repeat)
    tm_s, tm_value = None, None
    if metric.torchmetrics is not None and "torchmetrics" not in args.skip:
        tm_s, tm_value = run.time(f"{label}: torchmetrics", lambda: metric.torchmetrics(compared),
                                  args.torchmetrics_repeat)
    agree = same(ours, theirs, RTOL)
    tm_agree = same(ours, tm_value, RTOL_TORCHMETRICS) if metric.tm_compared else None
    if agree is False:
        run.failures += 1
        run.note(f"{label}: ours and scikit-learn's values differ")
    if tm_agree is False:
        run.note(f"{label}: ours and torchmetrics' values differ (rtol {RTOL_TORCHMETRICS:g})")
    return {"function": metric.name, "kind": kind, "rows": int(compared.y_true.shape[0]),
            "ours_s": ours_s, "ours_full_s": ours_full_s, "sklearn_s": sk_s,
            "speedup": ratio(sk_s, ours_s), "torchmetrics_s": tm_s,
            "speedup_vs_torchmetrics": ratio(tm_s, ours_s),
            "agree": agree, "torchmetrics_agree": tm_agree, "tm_compared": metric.tm_compared,
            "ours_value": summary(ours), "sklearn_value": summary(theirs),
            "torchmetrics_value": summary(tm_value)}


def summary(value):
    """A number to keep in the JSON: the value, F of a (P, R, F, support) triple,
    the sum of a confusion matrix's cells, the samples-average F1 of a report."""
    if value is None:
        return None
    if isinstance(value, dict):
        return float(value["samples avg"]["f1-score"])
    if isinstance(value, (tuple, list)):
        return float(flat(value[2])[0])
    numbers = flat(value)
    return float(numbers.sum()) if numbers.size > 1 else float(numbers[0])


def set_row(name: str, rows: list[dict], kind: str) -> dict:
    """The sum of ``rows``; torchmetrics' over the rows where it has the metric (and ours
    over the same rows for its ratio)."""
    with_tm = [r for r in rows if r["torchmetrics_s"] is not None]
    ours_s, sk_s = total([r["ours_s"] for r in rows]), total([r["sklearn_s"] for r in rows])
    tm_s = total([r["torchmetrics_s"] for r in with_tm])
    ours_tm_s = total([r["ours_s"] for r in with_tm])
    agrees = [r["agree"] for r in rows]
    tm_agrees = [r["torchmetrics_agree"] for r in rows if r["torchmetrics_agree"] is not None]
    return {"function": name, "kind": kind, "rows": rows[0]["rows"], "ours_s": ours_s,
            "ours_full_s": total([r["ours_full_s"] for r in rows]), "sklearn_s": sk_s,
            "speedup": ratio(sk_s, ours_s), "torchmetrics_s": tm_s,
            "torchmetrics_calls": [r["function"] for r in with_tm],
            "speedup_vs_torchmetrics": ratio(tm_s, ours_tm_s),
            "agree": (False if False in agrees else None if None in agrees else True),
            "torchmetrics_agree": (False if False in tm_agrees else True if tm_agrees else None),
            "tm_compared": bool(tm_agrees)}


# -- the cases -------------------------------------------------------------------------


def case(run: Run, n: int, num_labels: int, torch) -> dict:
    args = run.args
    tag = f"N={fmt_n(n)} L={num_labels}"
    progress(f"{tag}: making inputs")
    data = make_inputs(n, num_labels, args.seed + num_labels, torch)
    result = {"n": n, "labels": num_labels, "relevant_share": float(data.y_true.mean()),
              "predicted_share": float(data.y_pred.mean()),
              "rows_without_relevant": float((data.y_true.sum(axis=1) == 0).mean()),
              "threshold": [], "ranking": [], "auc": []}
    if "threshold" not in args.skip:
        progress(f"{tag}: threshold report")
        rows = [measure(run, m, tag, data) for m in threshold_metrics(run.tm)]
        result["threshold"] = rows + [set_row(REPORT_ROW, rows, "report")]
    if "ranking" not in args.skip:
        compared = data.head(args.sklearn_ranking_samples)
        progress(f"{tag}: ranking metrics, compared on {fmt_n(compared.y_true.shape[0])} rows")
        rows = [measure(run, m, tag, compared, data) for m in ranking_metrics(run.tm)]
        result["ranking"] = rows + [set_row(RANKING_ROW, rows, "ranking set")]
    if "auc" not in args.skip:
        compared = data.head(args.auc_samples)
        progress(f"{tag}: ROC AUC and AP macro on {fmt_n(compared.y_true.shape[0])} rows")
        result["auc"] = [measure(run, m, tag, compared) for m in auc_metrics(run.tm)]
        for r in result["auc"]:  # ours is timed on the compared rows only
            r["ours_full_s"] = r["ours_s"] if r["rows"] == n else None
    return result


def warm_up(run: Run, torch) -> None:
    """One untimed call of every function on tiny inputs: first-call costs (lazy imports,
    caches) stay out of the timings."""
    data = make_inputs(200, 10, run.args.seed, torch)
    metrics = threshold_metrics(run.tm) + ranking_metrics(run.tm) + auc_metrics(run.tm)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for metric in metrics:
            calls = [metric.sklearn, metric.torchmetrics]
            for call in calls + [metric.ours]:
                if call is None:
                    continue
                try:
                    with mg.use_backend("numpy"):
                        call(data)
                except Exception:
                    pass  # the timed call reports it


# -- output ------------------------------------------------------------------------


THRESHOLD_HEADER = (f"{'threshold metrics':<41}{'ours (s)':>10}{'sklearn (s)':>13}"
                    f"{'speedup':>9}{'tm (s)':>10}{'vs tm':>9}  agree  tm agree")
RANKING_HEADER = (f"{'ranking metrics':<41}{'rows':>8}{'ours at N (s)':>15}{'ours (s)':>10}"
                  f"{'sklearn (s)':>13}{'speedup':>9}{'tm (s)':>10}{'vs tm':>9}  agree  tm agree")


def tm_agree_text(r: dict) -> str:
    if not r["tm_compared"] and r["torchmetrics_s"] is not None:
        return "(other def.)"
    return agree_text(r["torchmetrics_agree"])


def print_tables(out: Printer, results: dict) -> None:
    env, settings = results["environment"], results["settings"]
    out(f"CPU: {env['cpu']} ({env['cores']} cores)   date: {env['date']}")
    out(f"Python {env['python']}, NumPy {env['numpy']}, scikit-learn {env['sklearn']}, "
        f"torch {env['torch'] or '-'} ({env['torch_threads'] or '-'} threads), "
        f"torchmetrics {env['torchmetrics'] or '-'}, metrics-gpu {env['metrics_gpu']} "
        f"({env['commit'] or 'no commit'}), numpy backend")
    out(f"times: wall (time.perf_counter), best of {settings['repeat']} (ours) / "
        f"{settings['sklearn_repeat']} (scikit-learn) / {settings['torchmetrics_repeat']} "
        "(torchmetrics, CPU tensors, validate_args=False) after a warm-up on tiny inputs; "
        "speedup = sklearn / ours, vs tm = torchmetrics / ours")
    out(f"agree: ours vs scikit-learn, every number within rtol {RTOL:g} (counts exactly); "
        f"tm agree: ours vs torchmetrics within rtol {RTOL_TORCHMETRICS:g} (float32), only "
        "where it defines the same number ('other def.': timed, not compared)")
    out(f"inputs: y_true (N, L) int8, label j relevant w.p. p_j ~ U[{PREVALENCE[0]}, "
        f"{PREVALENCE[1]}); scores float32 sigmoid(N(0,1) + {SIGNAL} y {OFFSET:+}) rounded to "
        f"0.01 (ties in every row); y_pred = scores >= {THRESHOLD} (int8); zero_division=0")
    out("threshold report: accuracy_score + hamming_loss + precision_recall_fscore_support "
        "(micro, macro, samples) + multilabel_confusion_matrix + classification_report"
        "(output_dict=True), times summed; torchmetrics: exact_match + hamming_distance + "
        "precision + recall + f1 (micro, macro, samplewise mean) + confusion_matrix "
        "(6 calls: it has no report; 'vs tm' over those 6)")
    out(f"ranking: scikit-learn and torchmetrics loop over rows in Python for LRAP (and "
        f"scikit-learn for the ranking loss): every library is compared on the first "
        f"min(N, {fmt_n(settings['sklearn_ranking_samples'])}) rows (--sklearn-ranking-samples, "
        f"'rows'); 'ours at N' is ours on all N rows. ROC AUC / AP macro on the first "
        f"min(N, {fmt_n(settings['auc_samples'])}) rows (--auc-samples). torchmetrics' "
        "ranking loss ranks tied scores by argsort order (scikit-learn: a tie is mis-ordered)")
    for c in results["cases"]:
        out()
        out(f"N = {fmt_n(c['n'])}  L = {c['labels']}   relevant {c['relevant_share']:.1%}, "
            f"predicted {c['predicted_share']:.1%}, rows without a relevant label "
            f"{c['rows_without_relevant']:.1%}")
        if c["threshold"]:
            out(THRESHOLD_HEADER)
            for r in c["threshold"]:
                out(f"{r['function']:<41}{fmt(r['ours_s'], '.4f'):>10}"
                    f"{fmt(r['sklearn_s'], '.4f'):>13}{fmt(r['speedup'], '.2f', 'x'):>9}"
                    f"{fmt(r['torchmetrics_s'], '.4f'):>10}"
                    f"{fmt(r['speedup_vs_torchmetrics'], '.2f', 'x'):>9}  "
                    f"{agree_text(r['agree']):<7}{tm_agree_text(r)}")
        if c["ranking"] or c["auc"]:
            if c["threshold"]:
                out()
            out(RANKING_HEADER)
            for r in c["ranking"] + c["auc"]:
                out(f"{r['function']:<41}{fmt_n(r['rows']):>8}"
                    f"{fmt(r['ours_full_s'], '.4f'):>15}"
                    f"{fmt(r['ours_s'], '.4f'):>10}{fmt(r['sklearn_s'], '.4f'):>13}"
                    f"{fmt(r['speedup'], '.2f', 'x'):>9}{fmt(r['torchmetrics_s'], '.4f'):>10}"
                    f"{fmt(r['speedup_vs_torchmetrics'], '.2f', 'x'):>9}  "
                    f"{agree_text(r['agree']):<7}{tm_agree_text(r)}")


def evaluate_targets(results: dict) -> list[dict]:
    reports, rankings = [], []
    for c in results["cases"]:
        where = f"N={fmt_n(c['n'])} L={c['labels']}"
        reports += [(where, r) for r in c["threshold"] if r["kind"] == "report"]
        rankings += [(f"{where} (on {fmt_n(r['rows'])} rows)", r) for r in c["ranking"]
                     if r["kind"] == "ranking set"]
    targets = []
    targets += target_verdicts(f"threshold report >= {TARGET_REPORT:.0f}x scikit-learn",
                               reports, "speedup", lambda v: v >= TARGET_REPORT,
                               lambda v: fmt(v, ".2f", "x"))
    targets += target_verdicts(f"LRAP + ranking loss + coverage (summed) >= "
                               f"{TARGET_RANKING:.0f}x scikit-learn", rankings, "speedup",
                               lambda v: v >= TARGET_RANKING, lambda v: fmt(v, ".2f", "x"))
    return targets


# -- command line --------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog=f"Targets: the threshold report >= {TARGET_REPORT:g}x scikit-learn; LRAP + "
               f"ranking loss + coverage error (summed) >= {TARGET_RANKING:g}x scikit-learn.")
    parser.add_argument("--cases", type=case_shape, nargs="+", default=list(DEFAULT_CASES),
                        help="(N, L) cases as NxL, N rows of L labels (default 1e4x10 1e5x10 "
                             "1e6x10 1e4x100 1e5x100; 1e6x100 adds ~2.5 min, 1e6x1000 far more)")
    parser.add_argument("--repeat", type=count, default=3,
                        help="timed runs of ours, best kept (default 3)")
    parser.add_argument("--sklearn-repeat", type=count, default=1,
                        help="timed runs of scikit-learn, best kept (default 1)")
    parser.add_argument("--torchmetrics-repeat", type=count, default=1,
                        help="timed runs of torchmetrics, best kept (default 1)")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch's CPU threads for torchmetrics (default 1, as ours and "
                             "scikit-learn; 0 keeps torch's default)")
    parser.add_argument("--sklearn-ranking-samples", type=count, default=DEFAULT_RANKING_SAMPLES,
                        help="rows on which the ranking metrics of the three libraries are "
                             "compared (scikit-learn's and torchmetrics' LRAP loop over rows "
                             "in Python; default 1e5)")
    parser.add_argument("--auc-samples", type=count, default=DEFAULT_AUC_SAMPLES,
                        help="rows of the ROC AUC / AP macro comparison (default 1e5)")
    parser.add_argument("--skip", nargs="+", default=[],
                        choices=("threshold", "ranking", "auc", "torchmetrics"),
                        help="parts not to run")
    parser.add_argument("--seed", type=int, default=0)
    add_output_options(parser, "<date>-<cpu>-multilabel")
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    started = time.perf_counter()
    notes: list[str] = []
    torch, tm, tm_version = (None, None, None) if "torchmetrics" in args.skip else \
        load_torchmetrics(notes, args.torch_threads)
    run = Run(args, tm)
    run.notes.extend(notes)
    results = {
        "bench": "cpu_multilabel",
        "environment": environment(torch, tm_version),
        "settings": {"cases": [list(c) for c in args.cases], "repeat": args.repeat,
                     "sklearn_repeat": args.sklearn_repeat,
                     "torchmetrics_repeat": args.torchmetrics_repeat,
                     "torch_threads": args.torch_threads,
                     "sklearn_ranking_samples": args.sklearn_ranking_samples,
                     "auc_samples": args.auc_samples, "skip": args.skip, "seed": args.seed},
        "conventions": {
            "time": "time.perf_counter wall time, best of repeat (ours) / sklearn_repeat / "
                    "torchmetrics_repeat, after one untimed call of every function on tiny "
                    "inputs",
            "speedup": "scikit-learn time / our time; speedup_vs_torchmetrics: torchmetrics "
                       "time / our time",
            "agree": f"ours vs scikit-learn: numpy.allclose(rtol={RTOL:g}, atol=0) over every "
                     "number, integer counts exactly",
            "torchmetrics_agree": f"ours vs torchmetrics, rtol {RTOL_TORCHMETRICS:g}, where it "
                                  "defines the same number (not its ranking loss: ties)",
            "report": "the sum of the 7 threshold calls' times; torchmetrics: of its 6 (no "
                      "classification report), its ratio against ours on the same 6",
            "ranking": "every library on the first min(N, sklearn_ranking_samples) rows; "
                       "ours_full_s: ours on all N rows",
            "inputs": "y_true int8 with per-label prevalence U[0.02, 0.4); float32 scores "
                      "sigmoid(N(0,1) + 2.5 y - 1.5) rounded to 0.01; y_pred = scores >= 0.5",
        },
        "targets_spec": {"report_speedup": TARGET_REPORT, "ranking_speedup": TARGET_RANKING},
        "cases": [],
    }
    warm_up(run, torch)
    for n, num_labels in args.cases:
        results["cases"].append(case(run, n, num_labels, torch))
    results["targets"] = evaluate_targets(results)
    results["notes"] = run.notes
    results["failures"] = run.failures
    results["wall_s"] = time.perf_counter() - started
    results["environment"]["load_average_at_end"] = load_average()

    env = results["environment"]
    out = Printer()
    print_tables(out, results)
    print_targets(out, results["targets"], case_width=36, overall=True)
    print_notes(out, run.notes)
    out()
    out(f"total wall time {results['wall_s']:.0f} s; 1-minute load average "
        f"{fmt(env['load_average_at_start'], '.2f')} at the start, "
        f"{fmt(env['load_average_at_end'], '.2f')} at the end ({env['cores']} cores)")

    write_outputs(args, argv, results, out, progress, f"{env['date']}-{env['device']}-multilabel",
                  "CPU multilabel bench",
                  f"Machine: {env['cpu']} ({env['cores']} cores, no GPU used), "
                  f"Python {env['python']}, NumPy {env['numpy']}, "
                  f"scikit-learn {env['sklearn']}, torch {env['torch'] or '-'}, "
                  f"torchmetrics {env['torchmetrics'] or '-'}.\n")
    return 0 if run.failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
