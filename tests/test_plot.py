"""The pictures (metrics_gpu.plot, the [plot] extra): each plot is rendered to
PNG headless and the image is read back (size, not blank), and the axes are
checked for their labels, titles and legends; the binned curves against
scikit-learn's exact curves of the same scores."""

from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import matplotlib.image  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from sklearn import metrics as skm  # noqa: E402

import metrics_gpu  # noqa: E402
from metrics_gpu import plot  # noqa: E402

DPI = 80


def render(ax) -> np.ndarray:
    """The figure of ``ax`` as PNG pixels, checked: the size asked for, not blank."""
    buffer = io.BytesIO()
    ax.figure.savefig(buffer, format="png", dpi=DPI)
    buffer.seek(0)
    image = matplotlib.image.imread(buffer, format="png")
    width, height = np.round(ax.figure.get_size_inches() * DPI).astype(int)
    assert image.shape[:2] == (height, width)
    colours = np.unique(image[..., :3].reshape(-1, 3), axis=0)
    assert len(colours) > 10 and image[..., :3].std() > 0.05, "a blank picture"
    return image


def legend_texts(ax) -> list[str]:
    return [text.get_text() for text in ax.get_legend().get_texts()]


def softmax(logits):
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def labelled_logits(rng, n, k, signal=1.5):
    y = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k))
    logits[np.arange(n), y] += signal
    return y, logits


# -- importing -------------------------------------------------------------------------


def test_import_leaves_matplotlib_alone_and_drawing_needs_no_pyplot():
    code = (
        "import sys, io\n"
        "import metrics_gpu, metrics_gpu.plot\n"
        "assert 'matplotlib' not in sys.modules, 'imported by the import'\n"
        "ax = metrics_gpu.plot.plot_roc({'m': {'fpr': [0, 1], 'tpr': [0, 1], 'auc': 0.5}})\n"
        "ax.figure.savefig(io.BytesIO(), format='png')\n"
        "assert 'matplotlib' in sys.modules\n"
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_missing_matplotlib_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=r"pip install '\.\[plot\]'"):
        plot.plot_confusion_matrix(np.eye(2))


# -- confusion matrix ------------------------------------------------------------------


@pytest.mark.parametrize("normalize", [None, "true", "pred", "all"], ids=str)
def test_confusion_matrix_normalized_as_sklearn(rng, normalize):
    counts = rng.integers(0, 30, size=(4, 4))
    counts[3] = 0  # a class never true: its row is 0/0, shown as 0
    ax = plot.plot_confusion_matrix(counts, normalize=normalize)
    render(ax)
    shown = np.asarray(ax.images[0].get_array())
    assert ax.get_xlabel() == "Predicted label" and ax.get_ylabel() == "True label"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "2", "3"]
    texts = [t.get_text() for t in ax.texts]
    assert len(texts) == 16
    if normalize is None:
        np.testing.assert_array_equal(shown, counts)
        assert ax.get_title() == "Confusion matrix"
        assert texts == [str(v) for v in counts.ravel()]
        return
    y_true, y_pred = np.nonzero(counts)
    reference = skm.confusion_matrix(np.repeat(y_true, counts[y_true, y_pred]),
                                     np.repeat(y_pred, counts[y_true, y_pred]),
                                     labels=range(4), normalize=normalize)
    np.testing.assert_allclose(shown, reference)
    assert texts == [f"{v:.2f}" for v in reference.ravel()]
    if normalize == "true":
        np.testing.assert_allclose(shown.sum(axis=1), [1, 1, 1, 0])
    elif normalize == "pred":
        np.testing.assert_allclose(shown.sum(axis=0)[counts.sum(axis=0) > 0], 1)
    else:
        assert shown.sum() == pytest.approx(1)
    over = {"true": "true labels", "pred": "predicted labels", "all": "all samples"}[normalize]
    assert ax.get_title() == f"Confusion matrix, normalized over {over}"


def test_confusion_matrix_of_many_classes_shows_the_most_confused(rng):
    k = 200
    counts = np.diag(rng.integers(50, 100, k))
    confused = np.sort(rng.choice(k, 20, replace=False))
    for i, j in zip(confused, np.roll(confused, 1)):
        counts[i, j] = 40
    names = [f"c{i}" for i in range(k)]
    ax = plot.plot_confusion_matrix(counts, class_names=names, max_classes=20, title="Val")
    render(ax)
    assert ax.images[0].get_array().shape == (20, 20)
    assert ax.get_title() == "Val (20 most confused of 200 classes)"
    assert [t.get_text() for t in ax.get_yticklabels()] == [names[c] for c in confused]
    np.testing.assert_array_equal(ax.images[0].get_array(), counts[np.ix_(confused, confused)])
    np.testing.assert_array_equal(plot.most_confused_classes(counts, 20), confused)


def test_confusion_matrix_rejects_bad_arguments():
    with pytest.raises(ValueError, match="K x K"):
        plot.plot_confusion_matrix(np.ones((2, 3)))
    with pytest.raises(ValueError, match="normalize"):
        plot.plot_confusion_matrix(np.eye(2), normalize="rows")
    with pytest.raises(ValueError, match="class_names"):
        plot.plot_confusion_matrix(np.eye(2), class_names=["a"])
    with pytest.raises(ValueError, match="max_classes"):
        plot.plot_confusion_matrix(np.eye(2), max_classes=0)


def test_label_report_draws_its_matrix_with_class_names():
    y_true = np.array([0, 1, 2, 2, 2, 1, 0])
    y_pred = np.array([0, 0, 2, 2, 1, 1, 0])
    report = metrics_gpu.label_report(y_true, y_pred, class_names=["cat", "dog", "emu"],
                                      confusion_matrix=True)
    fig = Figure(figsize=(5, 4))
    target = fig.add_subplot()
    ax = report.plot_confusion_matrix(ax=target, normalize="true")
    assert ax is target
    render(ax)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["cat", "dog", "emu"]
    np.testing.assert_allclose(ax.images[0].get_array().sum(axis=1), 1)
    without = metrics_gpu.label_report(y_true, y_pred, confusion_matrix=False)
    with pytest.raises(ValueError, match="confusion_matrix=True"):
        without.plot_confusion_matrix()


# -- ROC and precision-recall curves -----------------------------------------------------


def exact_curves(y, scores):
    """Per class (class 1 alone for 1-D binary scores): metrics_gpu's exact curves."""
    columns = {1: scores} if scores.ndim == 1 else dict(enumerate(scores.T))
    roc, pr = {}, {}
    for k, column in columns.items():
        fpr, tpr, _ = metrics_gpu.roc_curve(y, column, pos_label=k)
        precision, recall, _ = metrics_gpu.precision_recall_curve(y, column, pos_label=k)
        roc[f"class {k}"] = {"fpr": fpr, "tpr": tpr,
                             "auc": skm.roc_auc_score(y == k, column)}
        pr[f"class {k}"] = {"recall": recall, "precision": precision,
                            "average_precision": skm.average_precision_score(y == k, column)}
    return roc, pr


@pytest.mark.parametrize("k", [2, 4], ids=["binary", "4-class"])
def test_roc_and_precision_recall_of_exact_curves(rng, k):
    y, logits = labelled_logits(rng, 300, k)
    scores = softmax(logits)
    roc, pr = exact_curves(y, scores[:, 1] if k == 2 else scores)

    ax = plot.plot_roc(roc)
    render(ax)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("False Positive Rate", "True Positive Rate")
    assert ax.get_title() == "ROC curve" and ax.get_xlim() == plot.UNIT_LIMITS
    expected = [f"{name} (AUC = {c['auc']:.3f})" for name, c in roc.items()]
    if k > 2:
        mean = np.mean([c["auc"] for c in roc.values()])
        expected.append(f"macro average (AUC = {mean:.3f})")
    assert legend_texts(ax) == expected + ["chance level (AUC = 0.5)"]
    chance = ax.get_lines()[-1]
    assert chance.get_linestyle() == "--" and list(chance.get_xdata()) == [0, 1]

    ax = plot.plot_precision_recall(pr, title="Validation")
    render(ax)
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == \
        ("Recall", "Precision", "Validation")
    expected = [f"{name} (AP = {c['average_precision']:.3f})" for name, c in pr.items()]
    if k > 2:
        mean = np.mean([c["average_precision"] for c in pr.values()])
        expected.append(f"macro average (AP = {mean:.3f})")
    assert legend_texts(ax) == expected
    assert all(line.get_drawstyle() == "steps-post" for line in ax.get_lines()[:len(pr)])


def test_macro_curve_options(rng):
    y, logits = labelled_logits(rng, 200, 3)
    roc, pr = exact_curves(y, softmax(logits))
    assert len(legend_texts(plot.plot_roc(roc, macro=False))) == 4  # 3 classes, chance
    only = legend_texts(plot.plot_roc(roc, macro="only"))
    assert len(only) == 2 and only[0].startswith("macro average (AUC = ")
    one = {"class 0": pr["class 0"]}
    assert len(legend_texts(plot.plot_precision_recall(one))) == 1
    assert legend_texts(plot.plot_precision_recall(one, macro=True))[1].startswith(
        "macro average")
    # The macro curve is the mean of the interpolated curves: each grid value
    # twice, the limits from the left then from the right (np.interp's).
    grid, mean = plot.macro_average_curve([(c["fpr"], c["tpr"]) for c in roc.values()])
    reference = np.mean([np.interp(grid[1::2], c["fpr"], c["tpr"]) for c in roc.values()],
                        axis=0)
    np.testing.assert_allclose(mean[1::2], reference)
    assert (grid[0], mean[0]) == (0, 0) and (grid[-1], mean[-1]) == (1, 1)
    assert np.all(np.diff(mean) >= 0)
    with pytest.raises(ValueError, match="macro"):
        plot.plot_roc(roc, macro="yes")
    with pytest.raises(ValueError, match="tpr"):
        plot.plot_roc({"m": {"fpr": [0, 1]}})


def test_macro_average_curve_keeps_vertical_segments():
    roc = [(np.array([0.0, 0.0, 0.5, 1.0]), np.array([0.0, 0.5, 1.0, 1.0])),
           (np.array([0.0, 0.5, 0.5, 1.0]), np.array([0.0, 0.0, 1.0, 1.0])),
           (np.array([np.nan]), np.array([np.nan]))]  # an undefined class: left out
    grid, mean = plot.macro_average_curve(roc)
    np.testing.assert_array_equal(grid, [0, 0, 0.5, 0.5, 1, 1])
    np.testing.assert_allclose(mean, [0, 0.25, 0.5, 1, 1, 1])
    # Precision-recall: at a tied recall precision falls along the curve.
    pr = [(np.array([0.5, 0.5, 1.0]), np.array([1.0, 0.5, 0.5]))]
    grid, mean = plot.macro_average_curve(pr, rising_ties=False)
    np.testing.assert_allclose(mean, [1.0, 0.5, 0.5, 0.5])
    assert plot.macro_average_curve(roc[2:]) is None


# -- binned curves ---------------------------------------------------------------------------


def histogram_of(y, probabilities, h):
    """The (2, K, H) histogram of ``floor(p * H)`` bins, built here independently."""
    k = probabilities.shape[1]
    bins = np.minimum(np.floor(probabilities * h).astype(int), h - 1)
    out = np.zeros((2, k, h))
    for c in range(k):
        positive = y == c
        out[0, c] = np.bincount(bins[positive, c], minlength=h)
        out[1, c] = np.bincount(bins[~positive, c], minlength=h)
    return out, bins / h


def test_binned_curves_are_the_exact_curves_of_the_binned_scores(rng):
    h = 1000
    y, logits = labelled_logits(rng, 2000, 4, signal=1.0)
    y[y == 3] = 0  # class 3 has no positives: NaN curves
    probabilities = softmax(logits)
    histogram, floored = histogram_of(y, probabilities, h)
    roc, pr = plot.binned_curves(histogram)
    assert len(roc) == len(pr) == 4
    for c in range(3):
        truth = y == c
        area = np.trapezoid(roc[c]["tpr"], roc[c]["fpr"])
        assert area == pytest.approx(skm.roc_auc_score(truth, floored[:, c]), rel=1e-12)
        assert area == pytest.approx(skm.roc_auc_score(truth, probabilities[:, c]), abs=1e-3)
        fpr, tpr, thresholds = skm.roc_curve(truth, floored[:, c], drop_intermediate=False)
        np.testing.assert_allclose(roc[c]["fpr"], fpr, rtol=1e-12)
        np.testing.assert_allclose(roc[c]["tpr"], tpr, rtol=1e-12)
        np.testing.assert_allclose(roc[c]["thresholds"], thresholds)
        precision, recall, _ = skm.precision_recall_curve(truth, floored[:, c])
        # scikit-learn's curve runs the other way and ends with (recall 0, precision 1).
        np.testing.assert_allclose(pr[c]["precision"], precision[-2::-1], rtol=1e-12)
        np.testing.assert_allclose(pr[c]["recall"], recall[-2::-1], rtol=1e-12)
        ap = np.sum(np.diff(pr[c]["recall"], prepend=0) * pr[c]["precision"])
        assert ap == pytest.approx(skm.average_precision_score(truth, floored[:, c]), rel=1e-12)
        assert roc[c]["fpr"][0] == roc[c]["tpr"][0] == 0
        assert roc[c]["fpr"][-1] == roc[c]["tpr"][-1] == 1
    assert np.isnan(roc[3]["fpr"]).all() and np.isnan(roc[3]["tpr"]).all()
    assert np.isnan(pr[3]["precision"]).all() and np.isnan(pr[3]["recall"]).all()
    with pytest.raises(ValueError, match=r"\(2, K, H\)"):
        plot.binned_curves(histogram[0])


def test_binned_curves_of_a_class_without_negatives():
    histogram = np.zeros((2, 1, 4))
    histogram[0, 0] = [1, 0, 2, 1]
    roc, pr = plot.binned_curves(histogram)
    assert np.isnan(roc[0]["fpr"]).all()
    np.testing.assert_array_equal(pr[0]["precision"], 1)
    np.testing.assert_allclose(pr[0]["recall"], [0.25, 0.75, 1])


# -- reliability diagram -----------------------------------------------------------------------


def proportion_panel(ax):
    """The proportion-of-samples panel of a reliability diagram: the axes
    sharing its x axis."""
    (panel,) = [other for other in ax.get_shared_x_axes().get_siblings(ax) if other is not ax]
    return panel


def bars(ax, label):
    container = next(c for c in ax.containers if c.get_label() == label)
    return list(container)


def test_reliability_diagram_of_a_logits_report(rng):
    y, logits = labelled_logits(rng, 500, 5)
    report = metrics_gpu.logits_report(y, logits, n_bins=10)
    ax = report.plot_reliability()
    render(ax)
    histogram = proportion_panel(ax)
    assert (ax.get_xlabel(), ax.get_ylabel(), histogram.get_title()) == \
        ("Confidence", "Accuracy", "Reliability diagram")
    ece = float(report.expected_calibration_error)
    assert ax.get_legend().get_title().get_text() == f"ECE = {ece:.4f}"
    assert sorted(legend_texts(ax)) == ["accuracy", "gap", "perfectly calibrated",
                                        "proportion of samples"]
    proportion = np.asarray(report.calibration_proportion)
    accuracy = np.asarray(report.calibration_accuracy)
    drawn = bars(ax, "accuracy")
    assert len(drawn) == np.count_nonzero(proportion)
    np.testing.assert_allclose([b.get_height() for b in drawn], accuracy[proportion > 0])
    np.testing.assert_allclose([b.get_x() for b in drawn],
                               np.flatnonzero(proportion) / 10)
    assert histogram.get_ylabel() == "Proportion of samples"
    np.testing.assert_allclose([b.get_height() for b in histogram.patches], proportion)


def test_reliability_rejects_bins_of_different_lengths():
    with pytest.raises(ValueError, match="one length"):
        plot.plot_reliability([0.5, 0.5], [0.6], [0.7, 0.8])


# -- the streaming report ------------------------------------------------------------------------


def streamed(rng, k, **options):
    metrics = metrics_gpu.ClassificationMetrics(k, **options)
    for n in (300, 200):
        metrics.update(*labelled_logits(rng, n, k))
    return metrics.compute()


def test_streaming_report_draws_every_plot(rng):
    report = streamed(rng, 4, thresholds=64)
    per_class = report.per_class
    roc, pr = report.curves()
    for c in range(4):
        # The curves carry the state's binned values, and their areas are those values.
        assert roc[c]["auc"] == pytest.approx(float(per_class["roc_auc"][c]), rel=1e-12)
        assert np.trapezoid(roc[c]["tpr"], roc[c]["fpr"]) == pytest.approx(roc[c]["auc"],
                                                                          rel=1e-12)
        ap = np.sum(np.diff(pr[c]["recall"], prepend=0) * pr[c]["precision"])
        assert ap == pytest.approx(pr[c]["average_precision"], rel=1e-12)

    ax = report.plot_roc()
    render(ax)
    macro = float(report["roc_auc_macro"])
    assert legend_texts(ax) == [f"class {c} (AUC = {roc[c]['auc']:.3f})" for c in range(4)] + [
        f"macro average (AUC = {macro:.3f})", "chance level (AUC = 0.5)"]
    ax = report.plot_precision_recall(classes=[2])
    render(ax)
    assert legend_texts(ax) == [f"class 2 (AP = {pr[2]['average_precision']:.3f})"]
    ax = report.plot_reliability(title="Epoch 3")
    render(ax)
    ece = float(report["expected_calibration_error"])
    assert proportion_panel(ax).get_title() == "Epoch 3"
    assert ax.get_legend().get_title().get_text() == f"ECE = {ece:.4f}"
    ax = report.plot_confusion_matrix(normalize="pred")
    render(ax)
    np.testing.assert_allclose(ax.images[0].get_array().sum(axis=0), 1)


def test_streaming_report_curves_by_number_of_classes(rng):
    binary = streamed(rng, 2, thresholds=32, top_k=(1,))
    auc = float(binary["roc_auc"])
    assert legend_texts(binary.plot_roc()) == [f"class 1 (AUC = {auc:.3f})",
                                               "chance level (AUC = 0.5)"]
    many = streamed(rng, 12, thresholds=32)
    ax = many.plot_precision_recall()
    render(ax)
    ap = float(many["average_precision_macro"])
    assert legend_texts(ax) == [f"macro average (AP = {ap:.3f})"]


def test_streaming_report_of_torch_inputs(rng):
    torch = pytest.importorskip("torch")
    metrics = metrics_gpu.ClassificationMetrics(3, thresholds=16, top_k=(1,))
    y, logits = labelled_logits(rng, 200, 3)
    metrics.update(torch.from_numpy(y), torch.from_numpy(logits))
    report = metrics.compute()
    assert isinstance(report.per_class["roc_auc"], torch.Tensor)
    for ax in (report.plot_roc(), report.plot_reliability(), report.plot_confusion_matrix()):
        render(ax)


def test_streaming_report_refusals(rng):
    without_thresholds = streamed(rng, 3, top_k=(1,))
    with pytest.raises(ValueError, match="thresholds=H"):
        without_thresholds.plot_roc()
    with pytest.raises(ValueError, match="thresholds=H"):
        without_thresholds.plot_precision_recall()
    labels = metrics_gpu.ClassificationMetrics(3, thresholds=16)
    labels.update(np.array([0, 1, 2, 1]), np.array([0, 2, 2, 1]))
    report = labels.compute()
    with pytest.raises(ValueError, match="thresholds.*holds labels"):
        report.plot_roc()
    with pytest.raises(ValueError, match="scores"):
        report.plot_reliability()
    no_matrix = streamed(rng, 3, top_k=(1,), confusion_matrix=False)
    with pytest.raises(ValueError, match="confusion_matrix=True"):
        no_matrix.plot_confusion_matrix()


# -- every picture at K = 3 and K = 100: colours, overlaps, tick labels (issue 52) ----------

PICTURE_KS = (3, 100)


@pytest.fixture(scope="module")
def pictured():
    """The reports every picture is drawn from, by K: a streaming report with
    score histograms, and a label report with intervals and groups (60 groups
    at K = 100, as many bars as classes would crowd)."""
    rng = np.random.default_rng(52)
    out = {}
    for k in PICTURE_KS:
        n = 3000
        y, logits = labelled_logits(rng, n, k, signal=1.5 if k == 3 else 3.0)
        metrics = metrics_gpu.ClassificationMetrics(k, thresholds=32)
        metrics.update(y, logits)
        groups = rng.integers(0, 4 if k == 3 else 60, n)
        labels = metrics_gpu.label_report(y, logits.argmax(axis=1), num_classes=k,
                                          confidence_level=0.9, n_resamples=20, rng=0,
                                          groups=groups)
        out[k] = (metrics.compute(), labels)
    return out


PICTURES = {
    "confusion_matrix": lambda s, l, k: s.plot_confusion_matrix(),
    "confusion_matrix_all": lambda s, l, k: s.plot_confusion_matrix(normalize="true",
                                                                    max_classes=k),
    "roc": lambda s, l, k: s.plot_roc(),
    "precision_recall": lambda s, l, k: s.plot_precision_recall(),
    "reliability": lambda s, l, k: s.plot_reliability(),
    "per_class": lambda s, l, k: l.plot_per_class("f1", max_classes=k),
    "groups": lambda s, l, k: l.groups.plot("accuracy", max_groups=100),
}


def drawn(ax):
    """The figure of ``ax`` rendered (checked by :func:`render`) and drawn on
    an Agg canvas: its renderer, with which text extents are final."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    render(ax)
    canvas = FigureCanvasAgg(ax.figure)
    canvas.draw()
    return canvas.get_renderer()


def same_colour(a, b) -> bool:
    return np.allclose(matplotlib.colors.to_rgba(a), matplotlib.colors.to_rgba(b))


def legend_artists(ax) -> dict:
    """The artists behind each legend entry, by label, over ``ax`` and its child axes."""
    artists = {}
    for axes in ax.get_shared_x_axes().get_siblings(ax):
        handles, labels = axes.get_legend_handles_labels()
        artists.update(zip(labels, handles))
    return artists


def assert_legend_colours_are_the_artists(ax) -> None:
    """Each legend entry shows the colours of what it labels: a line's colour,
    a bar's face and edge (hatching is drawn in the edge colour)."""
    legend = ax.get_legend()
    artists = legend_artists(ax)
    for handle, text in zip(legend.legend_handles, legend.get_texts()):
        artist = artists[text.get_text()]
        if isinstance(artist, matplotlib.container.BarContainer):
            for bar in artist:
                assert same_colour(bar.get_facecolor(), handle.get_facecolor()), text.get_text()
                assert same_colour(bar.get_edgecolor(), handle.get_edgecolor()), text.get_text()
                assert bar.get_hatch() == handle.get_hatch()
        else:
            assert same_colour(artist.get_color(), handle.get_color()), text.get_text()


def assert_tick_labels_apart(ax, axis: str, renderer) -> None:
    """At most MAX_TICK_LABELS labels on the axis, and no two overlapping."""
    labels = [t for t in getattr(ax, f"get_{axis}ticklabels")() if t.get_text()]
    assert 0 < len(labels) <= plot.MAX_TICK_LABELS
    boxes = sorted((t.get_window_extent(renderer) for t in labels),
                   key=lambda b: b.x0 if axis == "x" else b.y0)
    for first, second in zip(boxes, boxes[1:]):
        assert not first.overlaps(second), f"{axis} tick labels overlap"


@pytest.mark.parametrize("k", PICTURE_KS)
@pytest.mark.parametrize("name", list(PICTURES))
def test_every_picture_is_readable(pictured, name, k):
    streaming, labels = pictured[k]
    ax = PICTURES[name](streaming, labels, k)
    renderer = drawn(ax)
    if ax.get_legend() is not None:
        assert_legend_colours_are_the_artists(ax)
    if name.startswith("confusion_matrix"):
        assert_tick_labels_apart(ax, "x", renderer)
        assert_tick_labels_apart(ax, "y", renderer)
        # Cell numbers only while they fit; none over another.
        assert (len(ax.texts) > 0) == (ax.images[0].get_array().shape[0] <= 30)
    if name in ("per_class", "groups"):
        assert_tick_labels_apart(ax, "x", renderer)
        assert len(ax.patches) == (k if name == "per_class" else (4 if k == 3 else 60))
    if name in ("reliability", "groups"):
        # The legend sits outside the frame: it covers no bar.
        legend = ax.get_legend().get_window_extent(renderer)
        assert legend.x0 >= ax.get_window_extent(renderer).x1


def test_reliability_histogram_beside_the_bars_and_gap_in_legend_colours(pictured):
    streaming, _ = pictured[100]
    ax = streaming.plot_reliability()
    renderer = drawn(ax)
    histogram = proportion_panel(ax)
    # The proportion bars are in their own axes, above the diagram, not over its bars.
    assert bars(histogram, "proportion of samples")
    assert histogram.get_window_extent(renderer).y0 >= ax.get_window_extent(renderer).y1
    assert not [c for c in ax.containers if c.get_label() == "proportion of samples"]
    # The gap is unfilled red hatching over the accuracy bars (no translucent
    # fill to blend with them), and the legend shows it so.
    gap = bars(ax, "gap")
    assert gap and all(bar.get_facecolor()[3] == 0 and bar.get_hatch() for bar in gap)
    assert all(same_colour(bar.get_edgecolor(), "tab:red") for bar in gap)
    assert all(bar.zorder > accuracy.zorder
               for bar, accuracy in zip(gap, bars(ax, "accuracy")))
    handle = dict(zip(legend_texts(ax), ax.get_legend().legend_handles))["gap"]
    assert handle.get_facecolor()[3] == 0 and same_colour(handle.get_edgecolor(), "tab:red")
