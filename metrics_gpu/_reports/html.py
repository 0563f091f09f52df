"""One self-contained HTML page of a report, to share: ``metrics-gpu report
--format html --output report.html``, ``PredictionReport.to_html()`` and
``LabelReport.to_html()``.

The page holds no external reference: the CSS is inline, the pictures are PNG
images embedded as ``data:`` URIs (drawn by :mod:`metrics_gpu.plot` through
the reports' ``plot_*`` methods, rendered in memory with matplotlib's Agg
canvas), there is no script. Without matplotlib (the ``[plot]`` extra) the
page is complete but for the pictures, and says how to get them. Every string
that comes from the user (class names, file paths) is escaped.

Sections, by ``id``: ``summary`` (``overall-metrics``,
``per-class-averages`` and, with scores, ``score-metrics``), ``per-class``
(ordered by support, descending), ``confusion-matrix`` (the most confused
classes only beyond :data:`MAX_MATRIX_CLASSES`), ``score-pictures`` (ROC,
precision-recall, reliability; with scores only) and ``inputs`` (files, how
the scores were read, rows, classes, backend, elapsed time, package version).
"""

from __future__ import annotations

import base64
import datetime
import io
import math
from collections.abc import Mapping
from html import escape
from typing import Any

import numpy as np

from metrics_gpu._common.extras import install_hint
from metrics_gpu._common.options import OPTIONS
from metrics_gpu._common.version import __version__
from metrics_gpu._formulas.labels import (
    PER_CLASS_AVERAGES_GROUP,
    PER_CLASS_AVERAGES_LEGEND,
    label_metric_groups,
    metric_description,
)
from metrics_gpu._validation import check_int_range
from metrics_gpu.groups import DIFFERENCE_WITHOUT_INTERVAL, TEXT_METRICS
from metrics_gpu.intervals import interval_legend
from metrics_gpu.plot import most_confused_classes

# The confusion matrix shows at most this many classes: beyond, the most
# confused ones (largest off-diagonal mass), as metrics_gpu.plot does.
MAX_MATRIX_CLASSES = 20
# The per-class table lists at most this many classes (the largest supports):
# a page of 10^5 rows is no longer read, and --format json has them all.
MAX_TABLE_CLASSES = 1000
PLOT_HINT = f"The pictures need matplotlib, the [plot] extra: {install_hint('plot')}."
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Score metrics printed beside their error bound when ROC AUC / AP are binned.
RANKING_FAMILIES = ("roc_auc", "average_precision")
# The inputs table's line on how a report's scores were read (--scores-are:
# probabilities only when declared, logits by default).
SCORES_READ_AS = {"logits": "logits, softmax taken over each row (--scores-are logits, the "
                            "default)",
                  "probabilities": "probabilities, as given (--scores-are probabilities, "
                                   "declared)"}

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2em auto;
       max-width: 72em; padding: 0 1em; color: #1b1f24; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; border-bottom: 1px solid #d0d7de; padding-bottom: 0.2em;
     margin-top: 1.8em; }
h3 { font-size: 1.05em; margin: 1em 0 0.4em; }
nav a { margin-right: 1em; }
.subtitle, .note { color: #57606a; }
.groups { display: flex; flex-wrap: wrap; gap: 2em; align-items: flex-start; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 0.2em 0.6em; border-bottom: 1px solid #eaeef2; text-align: right; }
th { background: #f6f8fa; }
td.name, th.name { text-align: left; }
td.meaning { text-align: left; color: #57606a; font-size: 0.9em; }
.scroll { overflow-x: auto; max-width: 100%; }
table.matrix td { min-width: 2.5em; border: 1px solid #eaeef2; }
table.matrix td.diagonal { font-weight: bold; outline: 1px solid #1f77b4; }
figure { display: inline-block; margin: 0.5em 1em 0.5em 0; vertical-align: top; }
figure img { max-width: 100%; height: auto; }
figcaption { color: #57606a; font-size: 0.9em; }
"""


def render_html(report, *, title: str | None = None, elapsed: float | None = None,
                inputs: Mapping[str, Any] | None = None, max_classes: int = MAX_MATRIX_CLASSES,
                max_table_classes: int = MAX_TABLE_CLASSES, dpi: int = 100) -> str:
    """The report as one self-contained HTML page.

    Parameters
    ----------
    report : PredictionReport or LabelReport
        A report of files (:func:`metrics_gpu.files.report_files`: label and
        score metrics, the files read) or a label report
        (:func:`metrics_gpu.label_report`).
    title : str, optional
        The page's heading; default "metrics-gpu report".
    elapsed : float, optional
        Seconds the evaluation took, listed with the inputs.
    inputs : mapping of str to object, optional
        More lines for the inputs table (name -> value), e.g. how generated
        data was made.
    max_classes : int, default 20
        The confusion matrix shows the ``max_classes`` most confused classes
        when there are more (and says so).
    max_table_classes : int, default 1000
        The per-class table lists the classes of largest support up to this
        many (and says so).
    dpi : int, default 100
        Resolution of the embedded pictures.

    Returns
    -------
    str
        The page (UTF-8 text, no external reference).

    Examples
    --------
    >>> import numpy as np
    >>> from metrics_gpu import label_report
    >>> page = label_report(np.array([0, 1, 1]), np.array([0, 1, 0]),
    ...                     class_names=["<cat>", "dog"]).to_html()
    >>> page.startswith("<!DOCTYPE html>"), "&lt;cat&gt;" in page, "<cat>" in page
    (True, True, False)
    """
    max_classes = check_int_range(max_classes, "max_classes", 1, 1 << 20)
    max_table_classes = check_int_range(max_table_classes, "max_table_classes", 1, 1 << 30)
    dpi = check_int_range(dpi, "dpi", 10, 1200)
    # A file report (metrics_gpu.files.PredictionReport) holds a label report and
    # a score report; a label report is the labels' part itself.
    if getattr(report, "labels", None) is not None:
        labels, scores, auc_method = report.labels, report.scores, report.auc
    else:
        labels, scores, auc_method = report, None, None
    matplotlib_present = _has_matplotlib()
    heading = "metrics-gpu report" if title is None else str(title)
    sections = [
        _summary_section(labels, scores, auc_method),
        _per_class_section(labels, scores, max_table_classes, _weighted(report, labels)),
        _confusion_section(labels, max_classes, matplotlib_present, dpi),
    ]
    if getattr(labels, "groups", None) is not None:
        sections.append(_groups_section(labels.groups))
    if scores is not None:
        sections.append(_score_pictures_section(report, matplotlib_present, dpi))
    sections.append(_inputs_section(report, labels, elapsed, inputs))
    return _page(heading, f"{_number(labels.total, count=True)} samples, "
                 f"{labels.classes.size:,} classes.", sections)


def _page(heading: str, counts: str, sections: list) -> str:
    """One self-contained page: the heading, a subtitle of ``counts``, the
    version and the time, a link to each ``(id, name, html)`` section, the
    sections."""
    nav = " ".join(f'<a href="#{section_id}">{escape(name)}</a>'
                   for section_id, name, _ in sections)
    subtitle = f"{counts} metrics-gpu {__version__}, generated {_now()}."
    body = "\n".join(html for _, _, html in sections)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(heading)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        f"<header>\n<h1>{escape(heading)}</h1>\n"
        f'<p class="subtitle">{escape(subtitle)}</p>\n<nav>{nav}</nav>\n</header>\n'
        f"<main>\n{body}\n</main>\n</body>\n</html>\n"
    )


def render_multilabel_html(report, *, title: str | None = None, elapsed: float | None = None,
                           inputs: Mapping[str, Any] | None = None,
                           max_table_classes: int = MAX_TABLE_CLASSES, dpi: int = 100) -> str:
    """A multilabel report as one self-contained HTML page, as :func:`render_html`:
    the metrics by group (``summary``), the per-label table with each label's
    tn / fp / fn / tp (``per-label``), the pictures (``pictures``: per-label F1
    and, with a score histogram, the ROC and precision-recall curves) and the
    inputs (``inputs``); with groups, their table (``groups``).

    ``report`` is a :class:`metrics_gpu.files.MultilabelFileReport` (read
    through ``metric_rows``, ``label_names``, ``per_label``,
    ``label_columns``, ``confusion_matrix``, ``figures``, ``input_rows`` and
    ``groups`` / ``group_table``);
    the other arguments as :func:`render_html`'s.
    """
    max_table_classes = check_int_range(max_table_classes, "max_table_classes", 1, 1 << 30)
    dpi = check_int_range(dpi, "dpi", 10, 1200)
    heading = "metrics-gpu multilabel report" if title is None else str(title)
    groups = [_metric_group(f"metrics-{i}", group[:1].upper() + group[1:], "", rows)
              for i, (group, rows) in enumerate(report.metric_rows())]
    sections = [("summary", "Summary", '<section id="summary">\n<h2>Summary</h2>\n'
                 f'<div class="groups">\n{"".join(groups)}</div>\n</section>'),
                _per_label_section(report, max_table_classes)]
    if getattr(report, "groups", None) is not None:
        table = report.group_table()
        head = "".join(f"<th>{escape(cell)}</th>" for cell in table[0][1:])
        cells = "".join(f'<tr><td class="name">{escape(row[0])}</td>'
                        + "".join(f"<td>{escape(cell)}</td>" for cell in row[1:]) + "</tr>\n"
                        for row in table[1:])
        sections.append(("groups", "By group", (
            '<section id="groups">\n<h2>By group</h2>\n<p class="note">difference: the '
            "largest minus the smallest value over the groups; ratio: the smallest over the "
            "largest (fairlearn's); every metric of every group is in --format json.</p>\n"
            f'<table>\n<thead><tr><th class="name">{escape(table[0][0])}</th>{head}</tr>'
            f"</thead>\n<tbody>\n{cells}</tbody>\n</table>\n</section>")))
    matplotlib_present = _has_matplotlib()
    parts = ['<section id="pictures">\n<h2>Pictures</h2>\n']
    if not matplotlib_present:
        parts.append(f'<p class="note">{escape(PLOT_HINT)}</p>\n')
    else:
        captions = {"per_label_f1": "F1 per label", "roc": "ROC curves (binned)",
                    "precision_recall": "Precision-recall curves (binned)",
                    "groups_subset_accuracy": "Subset accuracy by group",
                    "groups_f1_macro": "Macro F1 by group"}
        for name, draw in report.figures().items():
            parts.append(_figure(draw().figure, captions.get(name, name), dpi))
    parts.append("</section>")
    sections.append(("pictures", "Pictures", "".join(parts)))
    rows = [(str(name), str(value)) for name, value in report.input_rows()]
    rows += [(str(name), str(value)) for name, value in (inputs or {}).items()]
    if elapsed is not None:
        rows.append(("elapsed", f"{elapsed:.3f} s"))
    rows += [("metrics-gpu version", str(__version__)), ("generated", _now())]
    body = "".join(f'<tr><th class="name">{escape(name)}</th>'
                   f'<td class="name">{escape(value)}</td></tr>\n' for name, value in rows)
    sections.append(("inputs", "Inputs", '<section id="inputs">\n<h2>Inputs</h2>\n'
                     f"<table>\n<tbody>\n{body}</tbody>\n</table>\n</section>"))
    return _page(heading, f"{_number(report.rows)} rows, {len(report.label_names):,} labels.",
                 sections)


def _per_label_section(report, max_table_classes: int) -> tuple[str, str, str]:
    """Each label's metrics and its 2 x 2 counts, largest support first."""
    columns = [c for c in report.label_columns() if c != "support"]
    support = np.asarray(report.per_label["support"])
    matrix = np.asarray(report.confusion_matrix)
    order = np.argsort(-support.astype(np.float64), kind="stable")
    shown = order[:max_table_classes]
    header = "".join(f"<th>{escape(name)}</th>"
                     for name in ["support", *columns, "tn", "fp", "fn", "tp"])
    body = []
    for i in shown.tolist():
        cells = [_number(support[i], count=True)]
        cells += [_number(report.per_label[c][i]) for c in columns]
        cells += [_number(v, count=True) for v in matrix[i].reshape(-1).tolist()]
        body.append(f'<tr><td class="name">{escape(str(report.label_names[i]))}</td>'
                    + "".join(f"<td>{escape(cell)}</td>" for cell in cells) + "</tr>\n")
    note = "Ordered by support, largest first; tn / fp / fn / tp: the label's 2 x 2 counts."
    if shown.size < support.size:
        note += (f" The {shown.size:,} labels of largest support of {support.size:,} are "
                 "listed; --format json holds them all.")
    html = ('<section id="per-label">\n<h2>Per-label metrics</h2>\n'
            f'<p class="note">{escape(note)}</p>\n<div class="scroll"><table>\n'
            f'<thead><tr><th class="name">label</th>{header}</tr></thead>\n'
            f'<tbody>\n{"".join(body)}</tbody>\n</table></div>\n</section>')
    return "per-label", "Per label", html


# -- sections: (id, navigation name, html) --------------------------------------------


def _summary_section(labels, scores, auc_method) -> tuple[str, str, str]:
    values = labels.metrics
    intervals = getattr(labels, "intervals", None)

    def shown(name):
        interval = None if intervals is None else intervals.metrics.get(name)
        if interval is None:
            return _number(values[name])
        return f"{_number(values[name])} [{_number(interval.low)}, {_number(interval.high)}]"

    # The groups of the text and JSON reports: scikit-learn's definitions,
    # then the per-class averages of oneDAL and pyActLearn.
    group_ids = ["overall-metrics", "per-class-averages"]
    groups = []
    for group_id, (heading, names) in zip(group_ids, label_metric_groups()):
        rows = [(name, shown(name), metric_description(name) or "")
                for name in names if name in values]
        if not rows:
            continue
        note = PER_CLASS_AVERAGES_LEGEND if heading == PER_CLASS_AVERAGES_GROUP else ""
        if intervals is not None and group_id == "overall-metrics":
            note = interval_legend(intervals)
        groups.append(_metric_group(group_id, heading[:1].upper() + heading[1:], note, rows))
    if scores is not None:
        note = "From the scores."
        if auc_method is not None:
            note += f" ROC AUC and average precision: {auc_method}"
            note += (", \N{PLUS-MINUS SIGN} the error bound of the binning."
                     if auc_method == "binned" else ".")
        rows = [(name, text, metric_description(name) or "")
                for name, text in _score_values(scores, auc_method)]
        groups.append(_metric_group("score-metrics", "Score metrics", note, rows))
    invalid = ""
    if labels.invalid:
        invalid = (f'<p class="note">{labels.invalid:,} samples with invalid labels were '
                   "left out.</p>\n")
    html = (f'<section id="summary">\n<h2>Summary</h2>\n{invalid}'
            f'<div class="groups">\n{"".join(groups)}</div>\n</section>')
    return "summary", "Summary", html


def _groups_section(groups) -> tuple[str, str, str]:
    """Every headline metric per group, then min, max, difference and ratio."""
    names = [name for name in TEXT_METRICS if name in groups.by_group]
    head = "".join(f"<th>{escape(name)}</th>" for name in names)
    intervals = groups.intervals

    def cell(name, i):
        text = _number(groups.by_group[name][i])
        if intervals is not None and name in intervals.by_group:
            ci = intervals.by_group[name]
            text += f" [{_number(ci.low[i])}, {_number(ci.high[i])}]"
        return f"<td>{escape(text)}</td>"

    rows = "".join(
        f'<tr><td class="name">{escape(str(group))}</td>'
        f"<td>{escape(_number(groups.counts[i], count=True))}</td>"
        + "".join(cell(name, i) for name in names) + "</tr>\n"
        for i, group in enumerate(groups.groups))
    summaries = (("group_min", groups.group_min()), ("group_max", groups.group_max()),
                 ("difference", groups.difference()), ("ratio", groups.ratio()))
    summary_rows = "".join(
        f'<tr><td class="name">{title}</td><td></td>'
        + "".join(f"<td>{escape(_number(values[name]))}</td>" for name in names) + "</tr>\n"
        for title, values in summaries)
    html = ('<section id="groups">\n<h2>By group</h2>\n'
            '<p class="note">difference: the largest minus the smallest value over the '
            "groups; ratio: the smallest over the largest (fairlearn's)."
            + ("" if intervals is None else f" ({escape(DIFFERENCE_WITHOUT_INTERVAL)}.)")
            + "</p>\n"
            f'<table>\n<thead><tr><th class="name">group</th><th>count</th>{head}</tr>'
            f"</thead>\n<tbody>\n{rows}{summary_rows}</tbody>\n</table>\n</section>")
    return "groups", "By group", html


def _metric_group(group_id: str, heading: str, note: str, rows) -> str:
    cells = "".join(
        f'<tr><td class="name">{escape(name)}</td><td>{escape(value)}</td>'
        f'<td class="meaning">{escape(meaning)}</td></tr>\n'
        for name, value, meaning in rows)
    note_html = f'<p class="note">{escape(note)}</p>\n' if note else ""
    return (f'<div id="{group_id}">\n<h3>{escape(heading)}</h3>\n{note_html}'
            '<table>\n<thead><tr><th class="name">metric</th><th>value</th>'
            f'<th class="name">meaning</th></tr></thead>\n<tbody>\n{cells}</tbody>\n'
            "</table>\n</div>\n")


def _score_values(scores: Mapping[str, Any], auc_method) -> list[tuple[str, str]]:
    """The scalar score metrics as text, ROC AUC / AP with their error bound
    when binned."""
    rows = []
    for name, value in scores.items():
        if name in ("per_class", "calibration") or name.endswith("_error_bound") \
                or not isinstance(value, (int, float)):
            continue
        text = _number(value)
        family = next((f for f in RANKING_FAMILIES if name.startswith(f)), None)
        bound = None if family is None else scores.get(f"{family}_error_bound")
        if auc_method == "binned" and bound is not None and not math.isnan(bound):
            text += f" \N{PLUS-MINUS SIGN} {_number(bound)}"
        rows.append((name, text))
    return rows


def _per_class_section(labels, scores, max_table_classes: int,
                       weighted: bool) -> tuple[str, str, str]:
    columns = dict(labels.per_class)
    support = np.asarray(columns.pop("support"))
    extra = {}
    if scores is not None:
        for name, values in (scores.get("per_class") or {}).items():
            if values is not None and len(values) == support.size:
                extra[name] = np.asarray(values, dtype=np.float64)
    # Largest support first; ties in class order (a stable sort).
    order = np.argsort(-support.astype(np.float64), kind="stable")
    shown = order[:max_table_classes]
    names = labels.class_names
    support_name = "support (weighted)" if weighted else "support"
    header = "".join(f"<th>{escape(name)}</th>" for name in [support_name, *columns, *extra])
    body = []
    for i in shown.tolist():
        cells = [_number(support[i], count=True)]
        cells += [_number(values[i]) for values in columns.values()]
        cells += [_number(values[i]) for values in extra.values()]
        body.append(f'<tr><td class="name">{escape(str(names[i]))}</td>'
                    + "".join(f"<td>{escape(cell)}</td>" for cell in cells) + "</tr>\n")
    note = "Ordered by support, largest first."
    if weighted:
        note += " Support is the sum of the sample weights of each class's samples."
    if shown.size < support.size:
        note += (f" The {shown.size:,} classes of largest support of {support.size:,} are "
                 "listed; --format json holds them all.")
    html = ('<section id="per-class">\n<h2>Per-class metrics</h2>\n'
            f'<p class="note">{escape(note)}</p>\n<div class="scroll"><table>\n'
            f'<thead><tr><th class="name">class</th>{header}</tr></thead>\n'
            f'<tbody>\n{"".join(body)}</tbody>\n</table></div>\n</section>')
    return "per-class", "Per class", html


def _confusion_section(labels, max_classes: int, matplotlib_present: bool,
                       dpi: int) -> tuple[str, str, str]:
    matrix = labels.confusion_matrix
    parts = ['<section id="confusion-matrix">\n<h2>Confusion matrix</h2>\n']
    if matrix is None:
        parts.append(f'<p class="note">This report kept no K x K matrix ('
                     f"{labels.classes.size:,} classes).</p>\n</section>")
        return "confusion-matrix", "Confusion matrix", "".join(parts)
    matrix = np.asarray(matrix)
    k = matrix.shape[0]
    shown = np.arange(k) if k <= max_classes else most_confused_classes(matrix, max_classes)
    note = ("Rows: true class, columns: predicted class. A cell's shade is its share of "
            "its row (the true class's samples).")
    if shown.size < k:
        note += (f" Only the {shown.size} most confused of {k:,} classes are shown (the "
                 "largest off-diagonal mass, row plus column), in class order.")
    parts.append(f'<p class="note">{escape(note)}</p>\n')
    parts.append(_matrix_table(matrix, shown, labels.class_names))
    if not matplotlib_present:
        parts.append(f'<p class="note">{escape(PLOT_HINT)}</p>\n')
    else:
        ax = labels.plot_confusion_matrix(normalize="true", max_classes=max_classes)
        parts.append(_figure(ax.figure, "Confusion matrix, normalized over true labels", dpi))
    parts.append("</section>")
    return "confusion-matrix", "Confusion matrix", "".join(parts)


def _matrix_table(matrix: np.ndarray, shown: np.ndarray, class_names) -> str:
    rows_total = matrix.sum(axis=1).astype(np.float64)
    names = [escape(str(class_names[i])) for i in shown.tolist()]
    header = "".join(f"<th>{name}</th>" for name in names)
    body = []
    for row, i in enumerate(shown.tolist()):
        cells = []
        for j in shown.tolist():
            value = matrix[i, j]
            share = float(value) / rows_total[i] if rows_total[i] > 0 else 0.0
            # Blue of matplotlib's default cycle, opaque for a whole row.
            style = f"background: rgba(31, 119, 180, {share:.3f});"
            if share > 0.55:
                style += " color: #fff;"
            kind = ' class="diagonal"' if i == j else ""
            cells.append(f'<td{kind} style="{style}" title="{share:.1%} of the row">'
                         f"{escape(_number(value, count=True))}</td>")
        body.append(f'<tr><th class="name">{names[row]}</th>{"".join(cells)}</tr>\n')
    return ('<div class="scroll"><table class="matrix">\n'
            f'<thead><tr><th class="name">true \\ predicted</th>{header}</tr></thead>\n'
            f'<tbody>\n{"".join(body)}</tbody>\n</table></div>\n')


def _score_pictures_section(report, matplotlib_present: bool, dpi: int) -> tuple[str, str, str]:
    parts = ['<section id="score-pictures">\n<h2>ROC, precision-recall and calibration</h2>\n']
    if not matplotlib_present:
        parts.append(f'<p class="note">{escape(PLOT_HINT)}</p>\n')
    else:
        drawings = report.figures()
        captions = {"roc": "ROC curves", "precision_recall": "Precision-recall curves",
                    "reliability": "Reliability diagram"}
        for name, caption in captions.items():
            if name in drawings:
                parts.append(_figure(drawings[name]().figure, caption, dpi))
        if "roc" not in drawings:
            parts.append('<p class="note">The ROC and precision-recall curves were not kept '
                         "(report_files(..., curves=True) keeps them).</p>\n")
    parts.append("</section>")
    return "score-pictures", "Curves", "".join(parts)


def _inputs_section(report, labels, elapsed, inputs) -> tuple[str, str, str]:
    rows: list[tuple[str, str]] = []
    evaluation = getattr(report, "evaluation", None)
    if evaluation is not None:
        for name, reader in evaluation.readers.items():
            source = str(reader.path)
            if reader.selector is not None:
                source += f":{reader.selector}"
            rows.append((OPTIONS.get(name, name), source))
        if evaluation.scores_are is not None:
            rows.append(("scores read as", SCORES_READ_AS[evaluation.scores_are]))
        rows.append(("rows read", _number(evaluation.rows)))
    rows.append(("samples counted", _number(labels.total, count=True)))
    if labels.invalid:
        rows.append(("invalid (left out)", _number(labels.invalid)))
    rows.append(("classes", _number(labels.classes.size)))
    if evaluation is not None:
        rows.append(("backend", str(evaluation.backend)))
        if evaluation.auc is not None:
            rows.append(("ROC AUC / average precision", str(evaluation.auc)))
        rows.append(("rows per chunk", _number(evaluation.chunk_rows)))
    for name, value in (inputs or {}).items():
        rows.append((str(name), str(value)))
    if elapsed is not None:
        rows.append(("elapsed", f"{elapsed:.3f} s"))
    rows.append(("metrics-gpu version", str(__version__)))
    rows.append(("generated", _now()))
    body = "".join(f'<tr><th class="name">{escape(name)}</th>'
                   f'<td class="name">{escape(value)}</td></tr>\n' for name, value in rows)
    html = ('<section id="inputs">\n<h2>Inputs</h2>\n'
            f"<table>\n<tbody>\n{body}</tbody>\n</table>\n</section>")
    return "inputs", "Inputs", html


# -- helpers -----------------------------------------------------------------------------


def _weighted(report, labels) -> bool:
    """Whether the report's samples were weighted (its supports are weight sums)."""
    evaluation = getattr(report, "evaluation", None)
    if evaluation is not None:
        return "sample_weight" in evaluation.readers
    return bool(getattr(labels, "weighted", False))


def _has_matplotlib() -> bool:
    try:
        import matplotlib.backends.backend_agg  # noqa: F401
    except ImportError:
        return False
    return True


def png_data_uri(figure, dpi: int = 100) -> str:
    """A matplotlib figure as a ``data:image/png;base64,...`` URI, rendered in
    memory on the Agg canvas (no display, no file)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight",
                   metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _png_size(uri: str) -> tuple[int, int]:
    """Width and height in pixels of a PNG data URI (its IHDR chunk)."""
    data = base64.b64decode(uri.split(",", 1)[1][:44])  # the first 33 bytes
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def _figure(figure, caption: str, dpi: int) -> str:
    uri = png_data_uri(figure, dpi)
    width, height = _png_size(uri)
    return (f'<figure><img src="{uri}" alt="{escape(caption)}" width="{width}" '
            f'height="{height}"><figcaption>{escape(caption)}</figcaption></figure>\n')


def _number(value, count: bool = False) -> str:
    """A value for the page: integers (and, for a ``count``, whole floats:
    summed weights) with thousands separators, other floats with 4 decimals,
    NaN as "n/a"."""
    if value is None:
        return "n/a"
    value = np.asarray(value).item()
    if count and isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, (bool, int)):
        return f"{int(value):,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        return f"{value:.4f}"
    return str(value)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


__all__ = ["MAX_MATRIX_CLASSES", "MAX_TABLE_CLASSES", "png_data_uri", "render_html",
           "render_multilabel_html"]
