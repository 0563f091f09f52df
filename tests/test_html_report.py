"""The HTML report: one self-contained page (``--format html``, ``to_html()``)."""

from __future__ import annotations

import base64
import importlib.util
import shutil
import subprocess
import sys
from html import escape
from html.parser import HTMLParser

import numpy as np
import pytest

from metrics_gpu import label_report
from metrics_gpu.cli import main
from metrics_gpu.files import report_files
from metrics_gpu._reports.html import MAX_MATRIX_CLASSES, PLOT_HINT, PNG_SIGNATURE

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
SCORE_SECTIONS = {"score-metrics", "score-pictures"}
LABEL_SECTIONS = {"summary", "overall-metrics", "per-class-averages", "per-class",
                  "confusion-matrix", "inputs"}
# Attributes whose value is fetched by a browser.
FETCHED = {"src", "href", "srcset", "action", "poster", "data", "background", "formaction"}
HOSTILE = "<script>alert('x')</script>"


class Page(HTMLParser):
    """What the tests read of a page: the ids, every tag's attributes, the
    images, and the cells of each table row of the section being read."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.tags: list[tuple[str, dict]] = []
        self.rows: dict[str, list[list[str]]] = {}  # section id -> rows of cell texts
        self._section = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if "id" in attributes:
            self.ids.add(attributes["id"])
        if tag == "section":
            self._section = attributes.get("id")
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append("".join(self._cell))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.setdefault(self._section, []).append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)

    @property
    def images(self) -> list[dict]:
        return [attributes for tag, attributes in self.tags if tag == "img"]

    def body_rows(self, section: str) -> list[list[str]]:
        """The rows of a section's table, without its header row."""
        return self.rows[section][1:]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Labels, predicted labels and scores of 2,000 rows, K = 5 of unequal support."""
    directory = tmp_path_factory.mktemp("html")
    rng = np.random.default_rng(7)
    y_true = rng.choice(5, size=2000, p=[0.4, 0.05, 0.25, 0.2, 0.1])
    scores = rng.normal(size=(2000, 5)).astype(np.float32)
    scores[np.arange(2000), y_true] += 1.5
    paths = {"y_true": directory / "y true.npy", "y_pred": directory / "pred.npy",
             "scores": directory / "scores.npy"}
    np.save(paths["y_true"], y_true)
    np.save(paths["y_pred"], scores.argmax(1))
    np.save(paths["scores"], scores)
    return paths, y_true


@pytest.fixture(scope="module")
def cli_page(files, tmp_path_factory):
    paths, _ = files
    output = tmp_path_factory.mktemp("out") / "report.html"
    assert main(["report", "--y-true", str(paths["y_true"]), "--scores",
                 str(paths["scores"]), "--format", "html", "--output", str(output),
                 "--quiet"]) == 0
    return output.read_text(encoding="utf-8")


def check_self_contained(text: str, page: Page) -> None:
    """No external reference: no script or stylesheet link, nothing fetched but
    anchors of the page and embedded PNG images; no http(s) or // URL anywhere."""
    assert "http:" not in text and "https:" not in text
    assert "url(" not in text
    for tag, attributes in page.tags:
        assert tag not in ("script", "link", "iframe", "object", "embed", "base"), tag
        for name, value in attributes.items():
            value = (value or "").strip()
            assert not value.startswith("//"), (tag, name, value[:40])
            if name in FETCHED:
                assert value.startswith(("#", "data:image/png;base64,")), (tag, name, value[:40])


def check_images(page: Page) -> None:
    for image in page.images:
        src = image["src"]
        assert src.startswith("data:image/png;base64,")
        data = base64.b64decode(src.split(",", 1)[1], validate=True)
        assert data[:8] == PNG_SIGNATURE
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        assert width > 0 and height > 0
        assert (int(image["width"]), int(image["height"])) == (width, height)
        assert image["alt"]


def test_cli_page_with_scores(cli_page, files):
    _, y_true = files
    page = Page(cli_page)
    assert LABEL_SECTIONS | SCORE_SECTIONS <= page.ids
    check_self_contained(cli_page, page)
    check_images(page)
    assert len(page.images) == (4 if HAS_MATPLOTLIB else 0)  # matrix, ROC, PR, reliability
    if not HAS_MATPLOTLIB:
        assert cli_page.count(escape(PLOT_HINT)) == 2

    rows = page.body_rows("per-class")
    support = np.bincount(y_true, minlength=5)
    assert [int(row[1].replace(",", "")) for row in rows] == sorted(support.tolist(), reverse=True)
    assert [row[0] for row in rows] == [str(c) for c in np.argsort(-support, kind="stable")]
    assert len(rows[0]) == 1 + 6 + 2  # class, support + 5 label columns, ROC AUC and AP

    summary = {row[0]: row[1] for row in page.body_rows("summary") if len(row) == 3}
    assert summary["accuracy"] == f"{np.mean(y_true == np.load(files[0]['scores']).argmax(1)):.4f}"
    assert {"macro_f1", "weighted_f1", "cross_entropy", "roc_auc_macro"} <= set(summary)

    inputs = dict(row for row in page.rows["inputs"])
    assert inputs["--y-true"].endswith("y true.npy") and inputs["--scores"].endswith("scores.npy")
    assert inputs["rows read"] == "2,000" and inputs["classes"] == "5"
    assert inputs["backend"] and inputs["elapsed"].endswith(" s")
    from metrics_gpu import __version__

    assert inputs["metrics-gpu version"] == __version__


def test_labels_only_page_has_no_score_parts(files, tmp_path):
    paths, _ = files
    output = tmp_path / "labels.html"
    assert main(["report", "--y-true", str(paths["y_true"]), "--y-pred", str(paths["y_pred"]),
                 "--format", "html", "--output", str(output), "--quiet"]) == 0
    text = output.read_text(encoding="utf-8")
    page = Page(text)
    assert LABEL_SECTIONS <= page.ids and not SCORE_SECTIONS & page.ids
    check_self_contained(text, page)
    check_images(page)
    assert [image["alt"] for image in page.images] == \
        (["Confusion matrix, normalized over true labels"] if HAS_MATPLOTLIB else [])


def test_to_html_escapes_class_names(files):
    paths, _ = files
    names = [HOSTILE, "a & b", '"quoted"', "dog", "cat"]
    report = report_files({"y_true": str(paths["y_true"]), "scores": str(paths["scores"])},
                          class_names=names)
    text = report.to_html(title="<b>my model</b>")
    assert "<script" not in text.lower() and "<b>" not in text
    assert "&lt;script&gt;" in text and "a &amp; b" in text
    page = Page(text)
    check_self_contained(text, page)
    assert {row[0] for row in page.body_rows("per-class")} == set(names)
    matrix_header = page.rows["confusion-matrix"][0]
    assert matrix_header[1:] == names
    if HAS_MATPLOTLIB:  # built without curves=True: the reliability diagram only, and a note
        assert [image["alt"] for image in page.images][1:] == ["Reliability diagram"]
        assert "curves=True" in text


def test_binned_auc_shows_its_error_bound(files):
    paths, _ = files
    report = report_files({"y_true": str(paths["y_true"]), "scores": str(paths["scores"])},
                          auc="binned", thresholds=50)
    page = Page(report.to_html())
    summary = {row[0]: row[1] for row in page.body_rows("summary") if len(row) == 3}
    assert "\N{PLUS-MINUS SIGN}" in summary["roc_auc_macro"]
    assert "\N{PLUS-MINUS SIGN}" not in summary["cross_entropy"]


def test_without_matplotlib_the_page_names_the_extra(files, monkeypatch):
    paths, _ = files
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    report = report_files({"y_true": str(paths["y_true"]), "scores": str(paths["scores"])})
    text = report.to_html()
    page = Page(text)
    assert LABEL_SECTIONS | SCORE_SECTIONS <= page.ids
    assert page.images == [] and text.count(escape(PLOT_HINT)) == 2
    assert "pip install &#x27;.[plot]&#x27;" in text


def test_many_classes_show_the_most_confused(monkeypatch):
    # Pictures are left out (as without matplotlib): the table is what is tested.
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    k = 30
    rng = np.random.default_rng(1)
    y_true = rng.integers(0, k, 2000)
    y_pred = np.where(rng.random(2000) < 0.7, y_true, rng.integers(0, k, 2000))
    text = label_report(y_true, y_pred, num_classes=k).to_html()
    page = Page(text)
    assert page.images == [] and escape(PLOT_HINT) in text
    matrix = page.body_rows("confusion-matrix")
    assert len(matrix) == MAX_MATRIX_CLASSES and len(matrix[0]) == MAX_MATRIX_CLASSES + 1
    assert f"Only the {MAX_MATRIX_CLASSES} most confused of {k} classes are shown" in text
    assert len(page.body_rows("per-class")) == k
    assert "inputs" in page.ids and "score-pictures" not in page.ids


def test_html_on_stdout_and_demo(tmp_path, capsys):
    assert main(["demo", "--samples", "2000", "--classes", "3", "--format", "html"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("<!DOCTYPE html>") and out.rstrip().endswith("</html>")
    page = Page(out)
    assert LABEL_SECTIONS <= page.ids
    inputs = dict(row for row in page.rows["inputs"])
    assert inputs["data"].startswith("generated: 2,000 predictions, 3 classes")


def test_output_directory_must_exist(files, tmp_path, capsys):
    paths, _ = files
    missing = tmp_path / "missing" / "report.html"
    assert main(["report", "--y-true", str(paths["y_true"]), "--y-pred", str(paths["y_pred"]),
                 "--format", "html", "--output", str(missing)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not missing.exists()


BROWSER = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                if shutil.which(name)), None)


@pytest.mark.skipif(BROWSER is None, reason="no headless chromium on this machine")
def test_headless_browser_screenshot(cli_page, tmp_path):
    page_path, shot = tmp_path / "report.html", tmp_path / "shot.png"
    page_path.write_text(cli_page, encoding="utf-8")
    subprocess.run([BROWSER, "--headless", "--disable-gpu", "--no-sandbox",
                    f"--screenshot={shot}", "--window-size=1200,2400",
                    page_path.as_uri()], check=True, timeout=60, capture_output=True)
    assert shot.read_bytes()[:8] == PNG_SIGNATURE


@pytest.mark.parametrize("option, value", [("max_classes", 0), ("max_table_classes", -1),
                                           ("dpi", 2.5)])
def test_bad_page_options_name_themselves(option, value):
    report = label_report(np.array([0, 1, 1]), np.array([0, 1, 0]))
    with pytest.raises(ValueError, match=option):
        report.to_html(**{option: value})


@pytest.mark.parametrize("weights", [None, "int", "float"])
def test_support_column_says_when_it_sums_weights(weights):
    """Issue 47 item 14: with sample weights the per-class "support" is a sum of
    weights; the page's column says so (label_report's page; the files' page
    is checked in tests/test_cli.py)."""
    rng = np.random.default_rng(5)
    y_true, y_pred = rng.integers(0, 3, 60), rng.integers(0, 3, 60)
    weight = {None: None, "int": rng.integers(1, 4, 60),
              "float": rng.random(60) + 0.5}[weights]
    page = label_report(y_true, y_pred, sample_weight=weight).to_html()
    assert ("<th>support (weighted)</th>" in page) == (weights is not None)
    assert ("<th>support</th>" in page) == (weights is None)
    assert ("sum of the sample weights" in page) == (weights is not None)
