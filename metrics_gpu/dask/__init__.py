"""Classification metrics of ``dask.array`` inputs: a small state per chunk,
merged in a tree, the metric computed on the merged state.

Install the ``[dask]`` extra: ``pip install '.[dask]'`` in a checkout, or the
wheel file with ``[dask]``. Importing :mod:`metrics_gpu` never imports Dask;
only this module does.

Every function builds a graph of three stages and gathers nothing but the
last, small state:

    one state per chunk (on the worker that holds the chunk, with the chunk's
    array module: NumPy, or CuPy on a GPU) -> a tree of merges (up to
    :data:`SPLIT_EVERY` states per task) -> the metric of the merged state

A chunk of the data never travels to the client: only the per-chunk states,
copied to the host as small NumPy arrays, travel between workers, and the
merged state (or the metric) to the client.

**Label metrics** (:func:`accuracy_score` ... :func:`label_report`) take the
arguments of their in-memory namesakes in :mod:`metrics_gpu` and give the
same results. Each is a function of the weighted confusion matrix, so a
chunk's state is its confusion *cells*: the distinct (true, predicted) pairs
present, each with its sample count and its weight sum (a pair whose weights
are all 0 is present, as in memory). Merging concatenates the cells and sums
the counts and weights of equal pairs. The metric is the in-memory function
applied to the merged cells as samples: ``y_true`` the cells' true codes,
``y_pred`` their predicted codes, ``sample_weight`` their weight sums (their
counts without weights). ``(N, K)`` scores as ``y_pred`` are reduced by a
row argmax in each chunk (ties to the first maximum, as in memory), which
makes K the number of classes. Inputs are validated chunk by chunk with the
in-memory checks (a ``ValueError`` names the chunk and its first sample's
position); what only the whole data decides (``labels=`` present,
``average='binary'`` on multiclass data, weights all 0) is checked on the
merged cells.

**Multilabel input.** ``(N, L)`` 0/1 indicator matrices (L >= 2, chunked
along the rows only: an input chunked along the label axis is refused with
a ``ValueError`` naming it) go to the multilabel forms of
:func:`accuracy_score` (subset accuracy), :func:`zero_one_loss`,
:func:`hamming_loss`, :func:`precision_recall_fscore_support`,
:func:`precision_score`, :func:`recall_score`, :func:`f1_score`,
:func:`fbeta_score`, :func:`jaccard_score`, :func:`specificity_score` and
:func:`multilabel_confusion_matrix` (``samplewise=False`` only), with the
arguments and results of their in-memory namesakes. A chunk's state is O(L):
per selected label its weighted tp, fp, fn and tn; the rows' count (weight)
per number of wrong labels; and for ``average="samples"`` the per-row rates
of the in-memory formulas, summed as the weighted sum where defined, the
weight of the rows where defined and where 0/0, and the number of the latter,
from which every ``zero_division`` gives the in-memory mean. Merging adds
the states; the metric is the in-memory formula of the merged counts. The
row-separable ranking metrics :func:`label_ranking_average_precision_score`,
:func:`label_ranking_loss`, :func:`coverage_error`, :func:`dcg_score` and
:func:`ndcg_score` sum the weighted values of the in-memory row functions
and the weight per chunk. :func:`classification_report` of multilabel input
reads the same merged counts and rate sums (every label's line, the micro,
macro, weighted and samples averages, in the in-memory layout), and the
label functions take (N, L) scores with ``scores="probabilities"`` or
``"logits"`` and ``threshold=``, cut in each chunk as in memory.
:func:`multilabel_metrics` keeps a :class:`metrics_gpu.MultilabelMetrics`
state per chunk, merged with ``merge``, and gives its report (binned ROC AUC
and AP with ``thresholds=H``, the label-ranking metrics with
``ranking=True``); :func:`roc_auc_score` and :func:`average_precision_score`
of (N, L) indicators and scores read it (``thresholds=H``; not
``average="samples"``). Weights all 0 are refused for the whole data, not
per chunk. Not for multilabel input on Dask: ``label_report`` (and what
refuses it in memory).

**Score metrics** (:func:`classification_metrics`, :func:`log_loss`,
:func:`brier_score_loss`, :func:`top_k_accuracy_score`,
:func:`expected_calibration_error`, and the binned :func:`roc_auc_score` and
:func:`average_precision_score`) keep one
:class:`metrics_gpu.ClassificationMetrics` state per chunk, merged with
``merge``; see each function for the arguments the state supports. The
exact ROC AUC and average precision rank every score against every other,
which needs all N scores in one place: on Dask they are the binned values of
``thresholds=H`` probability bins, whose error against the exact values is
bounded (``roc_auc_error_bound``, ``average_precision_error_bound`` in
:func:`classification_metrics`).

Every function is lazy: it returns a ``dask.delayed.Delayed`` whose
``compute()`` gives the value, or the value itself with ``compute=True``
(then only the merged state is gathered, and the metric, with its warnings,
runs in the client). Lazily, the last step runs on a worker: its warnings
(``UndefinedMetricWarning`` ...) are emitted there, and its errors are
raised by ``compute()``. Results are NumPy values on the host.

Chunks and alignment: the data must have known chunk sizes along axis 0.
``y_pred``, scores and ``sample_weight`` are rechunked to ``y_true``'s
chunks along axis 0, and to whole rows along the other axes (rechunking
moves data between workers, not to the client); arrays that are not Dask
arrays are chunked like ``y_true``.

GPUs: start a ``dask_cuda.LocalCUDACluster`` (one worker per GPU) and make
the chunks CuPy arrays, ``x.map_blocks(cupy.asarray)``; each chunk's state is
then computed on its worker's GPU (one pass of the kernels, as in memory)
and copied to the host as a few small arrays. This path is written for CuPy
chunks but is untested here without a GPU.

Examples
--------
>>> import dask.array as da
>>> import numpy as np
>>> from metrics_gpu import dask as mgd
>>> y_true = da.from_array(np.array([0, 1, 2, 2, 1, 0]), chunks=4)
>>> y_pred = da.from_array(np.array([0, 2, 2, 2, 1, 1]), chunks=4)
>>> lazy = mgd.accuracy_score(y_true, y_pred)
>>> round(float(lazy.compute()), 4)
0.6667
>>> mgd.confusion_matrix(y_true, y_pred, compute=True)
array([[1, 1, 0],
       [0, 1, 1],
       [0, 0, 2]])
"""

# The modules, in layers (each imports only modules listed above it):
#   graph       inputs aligned, a state per chunk, a tree of merges, a value; the
#               one module that imports Dask (first here: the [dask] extra's error)
#   multilabel  (N, L) indicator input: the label functions' path, ranking metrics
#   labels      multiclass label metrics over confusion cells; the label functions
#   scores      the streaming state: score metrics, binned ROC AUC and AP
from metrics_gpu.dask.graph import SPLIT_EVERY
from metrics_gpu.dask.labels import (
    ConfusionCells,
    accuracy_score,
    balanced_accuracy_score,
    classification_report,
    cohen_kappa_score,
    confusion_matrix,
    f1_score,
    fbeta_score,
    hamming_loss,
    jaccard_score,
    label_report,
    matthews_corrcoef,
    multilabel_confusion_matrix,
    precision_recall_fscore_support,
    precision_score,
    recall_score,
    specificity_score,
    zero_one_loss,
)
from metrics_gpu.dask.multilabel import (
    MultilabelSums,
    coverage_error,
    dcg_score,
    label_ranking_average_precision_score,
    label_ranking_loss,
    multilabel_metrics,
    ndcg_score,
)
from metrics_gpu.dask.scores import (
    DaskStreamingReport,
    average_precision_score,
    brier_score_loss,
    classification_metrics,
    expected_calibration_error,
    log_loss,
    roc_auc_score,
    top_k_accuracy_score,
)

__all__ = [
    "SPLIT_EVERY", "DaskStreamingReport", "accuracy_score", "average_precision_score",
    "balanced_accuracy_score", "brier_score_loss", "classification_metrics",
    "classification_report",
    "cohen_kappa_score", "confusion_matrix", "coverage_error", "dcg_score",
    "expected_calibration_error", "f1_score",
    "fbeta_score", "hamming_loss", "jaccard_score", "label_ranking_average_precision_score",
    "label_ranking_loss", "label_report", "log_loss",
    "matthews_corrcoef", "multilabel_confusion_matrix", "multilabel_metrics", "ndcg_score",
    "precision_recall_fscore_support", "precision_score",
    "recall_score", "roc_auc_score", "specificity_score", "top_k_accuracy_score",
    "zero_one_loss",
]
