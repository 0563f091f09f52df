"""Pictures of an evaluation: confusion matrix, ROC and precision-recall
curves, reliability diagram (matplotlib, the ``[plot]`` extra).

Every function takes NumPy data, draws on ``ax`` and returns that Axes, so
``ax.figure.savefig(path)`` writes the picture. Without ``ax`` it draws on a
new :class:`matplotlib.figure.Figure` (not pyplot: it runs headless, and no
global figure is left open). matplotlib is imported inside the functions:
importing this module (or :mod:`metrics_gpu`) never imports it. The
conventions are scikit-learn's ``ConfusionMatrixDisplay``,
``RocCurveDisplay`` and ``PrecisionRecallDisplay``.

:func:`binned_curves` turns the ``(2, K, H)`` score histogram of a
:class:`~metrics_gpu.ClassificationMetrics` built with ``thresholds=H``
into each class's ROC and precision-recall curve, consistent with its binned
``roc_auc`` and ``average_precision``. The report objects draw through these
functions: ``LabelReport.plot_confusion_matrix``,
``StreamingReport.plot_confusion_matrix`` / ``plot_roc`` /
``plot_precision_recall`` / ``plot_reliability`` and
``LogitsReport.plot_reliability``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from metrics_gpu.backends.selection import get_backend_implementation, is_device_array
from metrics_gpu._common.extras import install_hint
from metrics_gpu._formulas.labels import normalized_confusion

INSTALL_HINT = f"metrics_gpu.plot needs matplotlib: {install_hint('plot')}"
NORMALIZE_OPTIONS = (None, "true", "pred", "all")
NORMALIZED_TITLES = {"true": "true labels", "pred": "predicted labels", "all": "all samples"}
# Beyond this many rows, cell numbers no longer fit a readable font.
MAX_ANNOTATED_CLASSES = 30
# The report objects draw one curve per class up to this many classes, and
# only the macro average beyond (a legend of more is unreadable).
MAX_CLASS_CURVES = 10
# The macro curve is evaluated on the union of the curves' abscissae while
# that stays small, else on an even grid of this many points (K = 1000
# classes of 1000 thresholds would otherwise interpolate on 10^6 points).
MAX_MACRO_GRID = 10_001
# Axis limits of the unit-square plots, with scikit-learn's small margin so
# that curves along an edge stay visible.
UNIT_LIMITS = (-0.01, 1.01)
# The reliability diagram's colours.
ACCURACY_COLOR = "tab:blue"
GAP_COLOR = "tab:red"
PROPORTION_COLOR = "0.6"
# Tick labels of an axis of classes (or groups): at most this many are
# written, every n-th one beyond (8-point labels need about 0.15 inch each).
MAX_TICK_LABELS = 40


def _host(values, dtype=None) -> np.ndarray:
    """``values`` as a NumPy array: results on a GPU (CuPy, torch CUDA and JAX
    GPU arrays, as the cuda backend returns them) copied to the host first."""
    if is_device_array(values):
        backend = get_backend_implementation("cuda")
        values = backend.to_host(backend.asarray(values))
    return np.asarray(values, dtype=dtype)

def _new_axes(ax, figsize=None):
    """``ax``, or the axes of a new pyplot-free figure."""
    if ax is not None:
        return ax
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError(INSTALL_HINT) from error
    # Constrained layout: long or rotated tick labels and the colour bar stay inside.
    return Figure(figsize=figsize, layout="constrained").add_subplot()


def _diagram_with_panel_above(ax, figsize, height: float = 1 / 3):
    """``(ax, panel)``: an axes and a shorter one above it sharing its x axis,
    ``height`` of its height. Without ``ax``, the two rows of a new
    constrained-layout figure (which makes room for both panels' labels);
    with one, the panel is an inset of ``ax`` outside its frame (it moves
    with ``ax`` in any layout; leave room above ``ax`` for it)."""
    if ax is None:
        figure = _new_axes(None, figsize=figsize).figure
        figure.clear()
        panel, ax = figure.subplots(2, 1, sharex=True,
                                    gridspec_kw={"height_ratios": [height, 1.0]})
        return ax, panel
    return ax, ax.inset_axes([0.0, 1.04, 1.0, height], sharex=ax)


def _tick_positions(n: int) -> np.ndarray:
    """The positions of the tick labels written on an axis of ``n`` classes:
    all of them up to :data:`MAX_TICK_LABELS`, else every ``ceil(n / MAX)``-th
    (so labels never overlap)."""
    return np.arange(0, n, -(-n // MAX_TICK_LABELS))


def _check_max_classes(max_classes) -> int:
    if isinstance(max_classes, bool) or not isinstance(max_classes, (int, np.integer)) \
            or max_classes < 1:
        raise ValueError(f"max_classes must be a positive integer, got {max_classes!r}")
    return int(max_classes)


def most_confused_classes(matrix, max_classes: int) -> np.ndarray:
    """The ``max_classes`` classes with the largest off-diagonal mass (their
    row plus their column of the confusion matrix), in class order; ties go
    to the lower class code."""
    off_diagonal = np.array(matrix, dtype=np.float64)
    np.fill_diagonal(off_diagonal, 0.0)
    mass = off_diagonal.sum(axis=0) + off_diagonal.sum(axis=1)
    return np.sort(np.argsort(-mass, kind="stable")[:max_classes])


def _cell_text(value, values_format, integral: bool) -> str:
    if values_format is not None:
        return format(value.item(), values_format)
    if integral:
        return str(int(round(float(value))))
    return format(float(value), ".2f")


def plot_confusion_matrix(matrix, *, class_names=None, normalize=None, max_classes=20, ax=None,
                          title=None, cmap="Blues", values_format=None):
    """Draw a confusion matrix as a heat map, as scikit-learn's
    ``ConfusionMatrixDisplay``.

    Parameters
    ----------
    matrix : (K, K) array_like
        Counts (or summed weights): rows are the true classes, columns the
        predicted ones.
    class_names : sequence of str, optional
        Tick labels, K of them; default the class codes ``"0"`` .. ``"K-1"``.
    normalize : {None, "true", "pred", "all"}, default None
        Divide by the row sums (true labels), the column sums (predicted
        labels) or the total; 0/0 shows as 0. Computed on the full matrix,
        before any selection of classes (so shown rows of a selection need
        not sum to 1).
    max_classes : int, default 20
        With more classes, only the ``max_classes`` most confused (largest
        off-diagonal mass, row plus column) are shown, in class order, and
        the title says so.
    ax : matplotlib Axes, optional
        Where to draw; default a new figure sized to the shown classes.
    title : str, optional
        Replaces the default title ("Confusion matrix", plus the
        normalisation); the note of a selection of classes is added to it.
    cmap : str or Colormap, default "Blues"
    values_format : str, optional
        Format spec of the cell numbers (as ``format(value, spec)``);
        default whole numbers for integral counts, ``".2f"`` otherwise. Cells
        are annotated while at most 30 classes are shown.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on (the colour bar is an axes of its own in the same
        figure).

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu.plot import plot_confusion_matrix
    >>> ax = plot_confusion_matrix(np.array([[5, 1], [2, 7]]), class_names=["cat", "dog"],
    ...                            normalize="true")
    >>> ax.get_title(), ax.get_ylabel(), ax.get_xlabel()
    ('Confusion matrix, normalized over true labels', 'True label', 'Predicted label')
    >>> [text.get_text() for text in ax.texts]
    ['0.83', '0.17', '0.22', '0.78']
    """
    counts = _host(matrix)
    if counts.ndim != 2 or counts.shape[0] != counts.shape[1]:
        raise ValueError(f"matrix must be a K x K confusion matrix, got shape {counts.shape}")
    if normalize not in NORMALIZE_OPTIONS:
        raise ValueError(f"normalize must be one of {NORMALIZE_OPTIONS}, got {normalize!r}")
    max_classes = _check_max_classes(max_classes)
    k = counts.shape[0]
    names = [str(code) for code in range(k)] if class_names is None \
        else [str(name) for name in class_names]
    if len(names) != k:
        raise ValueError(f"class_names has {len(names)} names for a matrix of {k} classes")

    values = counts if normalize is None else normalized_confusion(
        counts.astype(np.float64), normalize, np)
    shown = np.arange(k) if k <= max_classes else most_confused_classes(counts, max_classes)
    values = values[np.ix_(shown, shown)]
    n = shown.size

    if title is None:
        title = "Confusion matrix" + (
            "" if normalize is None else f", normalized over {NORMALIZED_TITLES[normalize]}")
    if n < k:
        title += f" ({n} most confused of {k} classes)"

    # Cells of about 0.4 inch keep 8-point numbers legible up to 30 classes;
    # beyond, the cells carry no numbers and 0.12 inch will do.
    side = max(4.8, (0.4 if n <= MAX_ANNOTATED_CLASSES else 0.12) * n + 1.5)
    ax = _new_axes(ax, figsize=(side + 1.2, side))
    limits = {"vmin": 0.0, "vmax": 1.0} if normalize is not None else {}
    image = ax.imshow(values, interpolation="nearest", cmap=cmap, **limits)
    ax.figure.colorbar(image, ax=ax, shrink=0.8)
    if n <= MAX_ANNOTATED_CLASSES:
        integral = normalize is None and bool(np.all(np.mod(values, 1) == 0))
        # The colour of the colormap's other end, as scikit-learn: readable on any cell.
        dark, light = image.cmap(1.0), image.cmap(0.0)
        for (i, j), value in np.ndenumerate(values):
            ax.text(j, i, _cell_text(values[i, j], values_format, integral),
                    ha="center", va="center", fontsize=8,
                    color=light if image.norm(value) >= 0.5 else dark)
    ticks = _tick_positions(n)
    labels = [names[code] for code in shown[ticks]]
    rotate = n > 8 or max(len(label) for label in labels) > 6
    ax.set_xticks(ticks, labels=labels, rotation=90 if rotate else 0)
    ax.set_yticks(ticks, labels=labels)
    ax.set(xlabel="Predicted label", ylabel="True label", title=title)
    return ax


# -- curves ---------------------------------------------------------------------------


def _curve_arrays(curves, x_key: str, y_key: str, area_key: str) -> dict:
    """``{name: (x, y, area)}`` of a mapping of curve dicts, checked."""
    if not isinstance(curves, Mapping) or not curves:
        raise ValueError("curves must be a non-empty mapping of name -> curve dict")
    out = {}
    for name, curve in curves.items():
        missing = [key for key in (x_key, y_key) if key not in curve]
        if missing:
            raise ValueError(f"curve {name!r} has no {' or '.join(map(repr, missing))}")
        x = _host(curve[x_key], np.float64).ravel()
        y = _host(curve[y_key], np.float64).ravel()
        if x.shape != y.shape:
            raise ValueError(f"curve {name!r}: {x_key} and {y_key} differ in length "
                             f"({x.size} and {y.size})")
        out[name] = (x, y, curve.get(area_key))
    return out


def _check_macro(macro):
    if macro not in (None, True, False, "only"):
        raise ValueError(f"macro must be None, True, False or 'only', got {macro!r}")
    return macro


def _draws_macro(macro, n_curves: int) -> bool:
    return macro in (True, "only") or (macro is None and n_curves >= 2)


def _label(name, area_name: str, area) -> str:
    if area is None:
        return str(name)
    return f"{name} ({area_name} = {float(area):.3f})"


def _mean_area(areas):
    """The mean of the given areas over the classes where they are defined."""
    given = np.array([float(a) for a in areas if a is not None], dtype=np.float64)
    given = given[np.isfinite(given)]
    return float(given.mean()) if given.size else None


def macro_average_curve(curves, *, rising_ties: bool = True):
    """The mean of ``curves`` (a sequence of ``(x, y)`` pairs) on a common grid of x.

    Parameters
    ----------
    curves : sequence of (x, y) array pairs
        Curves holding a NaN (undefined classes) are left out.
    rising_ties : bool, default True
        The order of the points of one x (a vertical segment) along the
        curve: y rising (ROC curves) or falling (precision-recall curves).

    Returns
    -------
    (grid, mean_y) or None
        Each curve is interpolated (:func:`numpy.interp`) on the union of the
        curves' x (an even grid of 10 001 points when that is larger) from
        the left and from the right, so each grid value appears twice, with
        the mean of the left and then of the right limits: the vertical
        segments of the curves stay vertical in the mean (a mean ROC curve
        starts at (0, 0)). None when no curve is defined.
    """
    defined = [(x, y) for x, y in curves
               if x.size and np.all(np.isfinite(x)) and np.all(np.isfinite(y))]
    if not defined:
        return None
    grid = np.unique(np.concatenate([x for x, _ in defined]))
    if grid.size > MAX_MACRO_GRID:
        grid = np.linspace(grid[0], grid[-1], MAX_MACRO_GRID)
    left, right = np.zeros_like(grid), np.zeros_like(grid)
    for x, y in defined:
        order = np.lexsort((y if rising_ties else -y, x))
        x, y = x[order], y[order]
        right += np.interp(grid, x, y)  # at tied x, np.interp takes the last point
        left += np.interp(-grid, -x[::-1], y[::-1])
    return np.repeat(grid, 2), np.column_stack([left, right]).ravel() / len(defined)


def _draw_macro_average(ax, arrays: dict, macro, area_name: str, *, rising_ties: bool) -> None:
    """The macro-average curve of ``arrays`` (``(x, y, area)`` per curve), when
    ``macro`` asks for it, labelled with the mean of the areas."""
    if not _draws_macro(macro, len(arrays)):
        return
    average = macro_average_curve([(x, y) for x, y, _ in arrays.values()],
                                  rising_ties=rising_ties)
    if average is not None:
        area = _mean_area(area for _, _, area in arrays.values())
        ax.plot(*average, color="navy", linestyle=":", linewidth=3,
                label=_label("macro average", area_name, area))


def _finish_unit_square(ax, xlabel: str, ylabel: str, title: str, legend_loc: str) -> None:
    ax.set(xlim=UNIT_LIMITS, ylim=UNIT_LIMITS, xlabel=xlabel, ylabel=ylabel, title=title)
    ax.set_aspect("equal")
    ax.legend(loc=legend_loc)


def plot_roc(curves, *, ax=None, title=None, macro=None):
    """Draw ROC curves, as scikit-learn's ``RocCurveDisplay``.

    Parameters
    ----------
    curves : mapping of name -> dict
        Each dict holds ``"fpr"`` and ``"tpr"`` (increasing rates, as
        :func:`metrics_gpu.roc_curve` or :func:`binned_curves` give them) and
        ``"auc"`` (a number, or None to leave it out of the legend). One line
        per curve, labelled ``"name (AUC = 0.912)"``; a curve of NaN (an
        undefined class) draws nothing.
    ax : matplotlib Axes, optional
        Where to draw; default a new figure.
    title : str, optional
        Default ``"ROC curve"``.
    macro : {None, True, False, "only"}, default None
        The macro-average curve: the mean true positive rate of the defined
        curves, interpolated on a common false positive rate grid
        (:func:`macro_average_curve`), labelled with the mean of the given AUCs.
        None draws it when there are two curves or more, True always, False
        never; "only" draws it alone (for many classes).

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu.plot import plot_roc
    >>> ax = plot_roc({"model": {"fpr": np.array([0.0, 0.0, 0.5, 1.0]),
    ...                          "tpr": np.array([0.0, 0.5, 1.0, 1.0]), "auc": 0.875}})
    >>> [text.get_text() for text in ax.get_legend().get_texts()]
    ['model (AUC = 0.875)', 'chance level (AUC = 0.5)']
    """
    arrays = _curve_arrays(curves, "fpr", "tpr", "auc")
    macro = _check_macro(macro)
    ax = _new_axes(ax)
    if macro != "only":
        for name, (fpr, tpr, auc) in arrays.items():
            ax.plot(fpr, tpr, label=_label(name, "AUC", auc))
    _draw_macro_average(ax, arrays, macro, "AUC", rising_ties=True)
    ax.plot([0, 1], [0, 1], color="k", linestyle="--", label="chance level (AUC = 0.5)")
    _finish_unit_square(ax, "False Positive Rate", "True Positive Rate",
                        "ROC curve" if title is None else title, "lower right")
    return ax


def plot_precision_recall(curves, *, ax=None, title=None, macro=None):
    """Draw precision-recall curves, as scikit-learn's ``PrecisionRecallDisplay``.

    Parameters
    ----------
    curves : mapping of name -> dict
        Each dict holds ``"recall"`` and ``"precision"`` (points in either
        order of recall: as :func:`metrics_gpu.precision_recall_curve` or as
        :func:`binned_curves` give them) and ``"average_precision"`` (or None).
        One step line per curve (``drawstyle="steps-post"`` with recall
        decreasing, the step rule of average precision), labelled
        ``"name (AP = 0.912)"``.
    ax : matplotlib Axes, optional
        Where to draw; default a new figure.
    title : str, optional
        Default ``"Precision-recall curve"``.
    macro : {None, True, False, "only"}, default None
        The macro-average curve: the mean precision of the defined curves
        interpolated on a common recall grid (recall sorted ascending),
        labelled with the mean of the given average precisions. None draws
        it for two curves or more, True always, False never, "only" alone.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu.plot import plot_precision_recall
    >>> ax = plot_precision_recall({"model": {"recall": np.array([1.0, 0.5, 0.0]),
    ...                                       "precision": np.array([0.5, 1.0, 1.0]),
    ...                                       "average_precision": 0.75}})
    >>> ax.get_xlabel(), ax.get_ylabel(), ax.get_legend().get_texts()[0].get_text()
    ('Recall', 'Precision', 'model (AP = 0.750)')
    """
    arrays = _curve_arrays(curves, "recall", "precision", "average_precision")
    macro = _check_macro(macro)
    ax = _new_axes(ax)
    if macro != "only":
        for name, (recall, precision, ap) in arrays.items():
            if recall.size > 1 and recall[0] < recall[-1]:
                recall, precision = recall[::-1], precision[::-1]
            ax.plot(recall, precision, drawstyle="steps-post", label=_label(name, "AP", ap))
    _draw_macro_average(ax, arrays, macro, "AP", rising_ties=False)
    _finish_unit_square(ax, "Recall", "Precision",
                        "Precision-recall curve" if title is None else title, "lower left")
    return ax


def plot_reliability(proportion, confidence, accuracy, *, ax=None, title=None,
                     expected_calibration_error=None):
    """Draw a reliability diagram of equal-width confidence bins.

    Parameters
    ----------
    proportion, confidence, accuracy : (n,) array_like
        Per bin b, covering ``[b/n, (b+1)/n]``: the share of the weight in
        it, the mean top-class probability and the accuracy of its samples
        (as :func:`metrics_gpu.logits_report` and
        ``StreamingReport.calibration`` give them). Bins of proportion 0 (or
        NaN values) draw nothing.
    ax : matplotlib Axes, optional
        Where to draw; default a new figure.
    title : str, optional
        Default ``"Reliability diagram"``.
    expected_calibration_error : float, optional
        Shown as the legend's title, ``"ECE = 0.0412"``.

    Returns
    -------
    matplotlib.axes.Axes
        The diagram's axes: accuracy bars, the gap to the mean confidence
        (red hatching, unfilled: the bars keep their colour under it), the
        diagonal of perfect calibration, and the legend outside the frame on
        the right. The share of samples per bin is a grey histogram in a
        panel of its own above the diagram, which carries the title: the
        other axes of ``ax.get_shared_x_axes().get_siblings(ax)`` (a row of
        a new figure, or an inset of ``ax`` outside its frame when ``ax`` is
        given).

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu.plot import plot_reliability
    >>> ax = plot_reliability([0.0, 0.25, 0.75], [np.nan, 0.55, 0.9], [np.nan, 0.5, 0.95],
    ...                       expected_calibration_error=0.05)
    >>> ax.get_xlabel(), ax.get_ylabel(), ax.get_legend().get_title().get_text()
    ('Confidence', 'Accuracy', 'ECE = 0.0500')
    """
    proportion, confidence, accuracy = (_host(values, np.float64).ravel()
                                        for values in (proportion, confidence, accuracy))
    n = proportion.size
    if n == 0 or confidence.size != n or accuracy.size != n:
        raise ValueError("proportion, confidence and accuracy must be non-empty and of one "
                         f"length (one value per bin), got {n}, {confidence.size} and "
                         f"{accuracy.size}")
    ax, samples = _diagram_with_panel_above(ax, figsize=(8.0, 6.0))
    left, width = np.arange(n) / n, 1.0 / n
    filled = (proportion > 0) & np.isfinite(accuracy) & np.isfinite(confidence)

    acc, conf = accuracy[filled], confidence[filled]
    # The gap is red hatching without fill, over the bars: each bar keeps its
    # colour up to its accuracy, and the gap shows the legend's red whether it
    # lies above a bar (over-confidence) or inside it (under-confidence). A
    # translucent fill would blend with the bar into a colour of no legend entry.
    ax.bar(left[filled], acc, width=width, align="edge", color=ACCURACY_COLOR,
           edgecolor="black", linewidth=0.5, label="accuracy", zorder=2)
    ax.bar(left[filled], np.abs(conf - acc), bottom=np.minimum(conf, acc), width=width,
           align="edge", facecolor="none", edgecolor=GAP_COLOR, hatch="///",
           linewidth=1.0, label="gap", zorder=3)
    ax.plot([0, 1], [0, 1], color="k", linestyle="--", label="perfectly calibrated", zorder=5)
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="Confidence", ylabel="Accuracy")
    # The share of samples: a histogram in a panel of its own above the
    # diagram (same confidence axis), never over the accuracy bars.
    samples.bar(left, np.nan_to_num(proportion), width=width, align="edge",
                color=PROPORTION_COLOR, edgecolor="black", linewidth=0.5,
                label="proportion of samples")
    samples.set_ylim(0, 1.1 * max(float(np.nanmax(proportion, initial=0.0)), 1e-12))
    samples.set_ylabel("Proportion of samples")
    samples.tick_params(axis="x", labelbottom=False)
    samples.set_title("Reliability diagram" if title is None else title)
    handles, labels = ax.get_legend_handles_labels()
    more_handles, more_labels = samples.get_legend_handles_labels()
    # Outside the frame, on the right: bars can fill any corner of the diagram.
    ax.legend(handles + more_handles, labels + more_labels, loc="upper left",
              bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
              title=None if expected_calibration_error is None
              else f"ECE = {float(expected_calibration_error):.4f}")
    return ax


# -- binned curves ----------------------------------------------------------------------


def binned_curves(histogram):
    """Each class's ROC and precision-recall curve from score histograms.

    Parameters
    ----------
    histogram : (2, K, H) array_like
        ``histogram[0, k, b]``: the weight of the samples of target k whose
        class-k probability falls in bin b, of H equal-width bins over
        [0, 1] (bin H - 1 highest); ``histogram[1, k, b]``: the same for the
        samples of another target. The ``histogram`` state of a
        :class:`~metrics_gpu.ClassificationMetrics` built with
        ``thresholds=H``.

    Returns
    -------
    roc : list of K dicts
        ``roc[k]``: ``"fpr"``, ``"tpr"`` and ``"thresholds"``. The thresholds
        are the lower edges ``b / H`` of the non-empty bins from the top down
        (the samples at or above each are predicted positive), after a first
        point (0, 0) at threshold ``inf``; the last point is (1, 1). As
        scikit-learn treats tied scores, one bin is one threshold, so these
        are exactly ``sklearn.metrics.roc_curve(..., drop_intermediate=False)``
        of the scores rounded down to their bin's edge, and the trapezoid
        area under the curve (``np.trapezoid(tpr, fpr)``) is the binned
        ``roc_auc`` of the state. NaN arrays (same length) for a class
        without positive or without negative weight.
    pr : list of K dicts
        ``pr[k]``: ``"recall"`` (increasing), ``"precision"`` and
        ``"thresholds"`` at the same thresholds, without the (0, 0) start:
        where nothing is predicted positive precision is undefined, and the
        point is left out (scikit-learn's curve ends with precision 1 there
        instead). ``sum(diff(recall, prepend=0) * precision)`` is the
        binned ``average_precision``. NaN arrays for a class without positive
        weight (one without negatives has precision 1 throughout).

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu.plot import binned_curves
    >>> histogram = np.array([[[0, 1, 0, 2]], [[2, 1, 0, 0]]])  # K = 1, H = 4
    >>> roc, pr = binned_curves(histogram)
    >>> roc[0]["thresholds"]
    array([ inf, 0.75, 0.25, 0.  ])
    >>> roc[0]["fpr"] * 3, roc[0]["tpr"] * 3
    (array([0., 0., 1., 3.]), array([0., 2., 3., 3.]))
    >>> pr[0]["recall"] * 3, pr[0]["precision"]
    (array([2., 3., 3.]), array([1.  , 0.75, 0.5 ]))
    """
    counts = _host(histogram)
    if counts.ndim != 3 or counts.shape[0] != 2:
        raise ValueError(f"histogram must have shape (2, K, H), got {counts.shape}")
    counts = counts.astype(np.float64)
    _, k, h = counts.shape
    # Bins from the top down: the weight at or above each lower edge.
    positive, negative = counts[0, :, ::-1], counts[1, :, ::-1]
    true_positives = np.cumsum(positive, axis=1)
    false_positives = np.cumsum(negative, axis=1)
    edges = np.arange(h - 1, -1, -1) / h
    roc, pr = [], []
    for c in range(k):
        # An empty bin is no distinct score: no threshold of its own.
        kept = (positive[c] + negative[c]) > 0
        tp, fp, thresholds = true_positives[c, kept], false_positives[c, kept], edges[kept]
        p_total = tp[-1] if tp.size else 0.0
        n_total = fp[-1] if fp.size else 0.0
        roc_thresholds = np.concatenate([[np.inf], thresholds])
        if p_total > 0 and n_total > 0:
            fpr = np.concatenate([[0.0], fp / n_total])
            tpr = np.concatenate([[0.0], tp / p_total])
        else:
            fpr = tpr = np.full(roc_thresholds.size, np.nan)
        roc.append({"fpr": fpr, "tpr": tpr, "thresholds": roc_thresholds})
        if p_total > 0:
            recall, precision = tp / p_total, tp / (tp + fp)
        else:
            recall = precision = np.full(thresholds.size, np.nan)
        pr.append({"recall": recall, "precision": precision, "thresholds": thresholds})
    return roc, pr


def plot_per_label(values, *, metric: str = "f_score", names=None, max_labels: int = 40,
                   ax=None, title=None, low=None, high=None, axis_name: str = "label"):
    """A bar per label of a per-label metric (a multilabel report's
    ``per_label[metric]``), labels in their order; with more than
    ``max_labels`` labels, the ``max_labels`` lowest (where a model is
    weakest), in their order. Undefined (NaN) values get no bar.

    Parameters
    ----------
    values : (L,) array_like
        The metric of each label.
    metric : str, default "f_score"
        Its name, for the axis.
    names : sequence of str, optional
        Each label's name (default its index).
    max_labels : int, default 40
        The most bars drawn.
    ax : matplotlib Axes, optional
        Where to draw; default a new figure.
    title : str, optional
    low, high : (L,) array_like, optional
        Each value's confidence interval, drawn as an error bar.
    axis_name : str, default "label"
        What a bar stands for ("class", "group").

    Returns
    -------
    matplotlib Axes
    """
    values = _host(values, np.float64).reshape(-1)
    max_labels = _check_max_classes(max_labels)
    names = [str(i) for i in range(values.size)] if names is None else [str(n) for n in names]
    if len(names) != values.size:
        raise ValueError(f"names: {len(names)} names for {values.size} {axis_name}s")
    if (low is None) != (high is None):
        raise ValueError("low and high: give both ends of the intervals, or neither")
    shown = np.arange(values.size)
    if values.size > max_labels:
        order = np.argsort(np.where(np.isnan(values), np.inf, values), kind="stable")
        shown = np.sort(order[:max_labels])
    # Bars of 0.3 inch up to a 16-inch figure; narrower beyond, with thinned labels.
    ax = _new_axes(ax, figsize=(min(16.0, max(5.0, 0.3 * shown.size + 1.5)), 3.5))
    heights = np.nan_to_num(values[shown], nan=0.0)
    error = None
    if low is not None:
        lows = _host(low, np.float64).reshape(-1)[shown]
        highs = _host(high, np.float64).reshape(-1)[shown]
        if lows.size != shown.size or highs.size != shown.size:
            raise ValueError(f"low and high: one end per {axis_name}")
        # Bars without an interval (NaN) get no error bar.
        error = np.nan_to_num(np.vstack([heights - lows, highs - heights]), nan=0.0)
        error = np.maximum(error, 0.0)
    ax.bar(np.arange(shown.size), heights,
           color=["C0" if np.isfinite(v) else "none" for v in values[shown]],
           yerr=error, capsize=3 if error is not None else 0, ecolor="0.2")
    ticks = _tick_positions(shown.size)
    ax.set_xticks(ticks, [names[i] for i in shown[ticks]],
                  rotation=90 if shown.size > 10 else 0)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel(axis_name if shown.size == values.size
                  else f"{axis_name} (the {shown.size} lowest of {values.size})")
    ax.set_ylabel(metric)
    ax.set_title(title if title is not None else f"{metric} per {axis_name}"
                 + (" (with confidence intervals)" if error is not None else ""))
    return ax


def plot_per_class(values, *, metric: str = "f1", names=None, low=None, high=None,
                   max_classes: int = 40, ax=None, title=None):
    """A bar per class of a per-class metric, with its confidence interval as
    an error bar when ``low`` and ``high`` are given (a report's
    ``intervals.per_class[metric]``): :func:`plot_per_label` for classes."""
    return plot_per_label(values, metric=metric, names=names, max_labels=max_classes, ax=ax,
                          title=title, low=low, high=high, axis_name="class")


def plot_groups(groups, metric: str = "accuracy", *, ax=None, title=None, max_groups: int = 40):
    """A bar per group of one metric of a :class:`metrics_gpu.groups.GroupMetrics`
    (a report's ``groups``), with each group's interval as an error bar when it
    has intervals, and the overall value as a line."""
    if metric not in groups.by_group:
        raise ValueError(f"metric: {metric!r} is not a metric of the groups (one of "
                         f"{', '.join(groups.by_group)})")
    interval = None if groups.intervals is None else groups.intervals.by_group.get(metric)
    ax = plot_per_label(groups.by_group[metric], metric=metric,
                        names=[str(g) for g in groups.groups], max_labels=max_groups, ax=ax,
                        title=title, low=None if interval is None else interval.low,
                        high=None if interval is None else interval.high, axis_name="group")
    overall = groups.overall[metric]
    if np.isfinite(overall):
        ax.axhline(overall, color="C1", linestyle="--", label=f"overall {overall:.3f}")
        # Outside the frame, on the right: inside, it would hide bars.
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return ax


__all__ = [
    "chosen_curves",
    "binned_curves", "macro_average_curve", "most_confused_classes", "plot_confusion_matrix",
    "plot_groups", "plot_per_class", "plot_per_label", "plot_precision_recall",
    "plot_reliability", "plot_roc",
]


def chosen_curves(curves: list[dict], classes=None, kwargs: dict | None = None,
                  names=None) -> dict:
    """The per-class curves a report draws, by legend name: ``classes`` (codes)
    when given; else class 1 of a binary problem, every class (and the macro
    curve) up to :data:`MAX_CLASS_CURVES` classes, and beyond that the macro
    curve of all classes alone (sets ``kwargs["macro"] = "only"``).
    ``names``: the name of each class (default its code)."""
    k = len(curves)
    if classes is None:
        classes = [1] if k == 2 else range(k)
        if k > MAX_CLASS_CURVES and kwargs is not None:
            kwargs.setdefault("macro", "only")
    names = [str(c) for c in range(k)] if names is None else list(names)
    return {f"class {names[int(c)]}": curves[int(c)] for c in classes}
