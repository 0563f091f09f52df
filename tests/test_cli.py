"""The command line: report on files, demo, and clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn import metrics as sk

from metrics_gpu.cli import main, synthetic_predictions


@pytest.fixture
def prediction_files(tmp_path):
    y_true, y_pred = synthetic_predictions(5000, 7, seed=3)
    true_path, pred_path = tmp_path / "t.npy", tmp_path / "p.npy"
    np.save(true_path, y_true)
    np.save(pred_path, y_pred)
    return true_path, pred_path, y_true, y_pred


def test_report_json_matches_sklearn(prediction_files, capsys):
    true_path, pred_path, y_true, y_pred = prediction_files
    assert main(["report", "--y-true", str(true_path), "--y-pred", str(pred_path),
                 "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    metrics = report["metrics"]
    assert report["total"] == y_true.size
    assert report["confusion_matrix"] == sk.confusion_matrix(y_true, y_pred).tolist()
    np.testing.assert_allclose(metrics["matthews_corrcoef"],
                               sk.matthews_corrcoef(y_true, y_pred), rtol=1e-12)
    np.testing.assert_allclose(metrics["quadratic_weighted_kappa"],
                               sk.cohen_kappa_score(y_true, y_pred, weights="quadratic"),
                               rtol=1e-12)
    np.testing.assert_allclose(metrics["macro_f1"],
                               sk.f1_score(y_true, y_pred, average="macro"), rtol=1e-12)


def test_report_scores_file_and_text(tmp_path, capsys):
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(300, 4)).astype(np.float32)
    y_true = rng.integers(0, 4, 300)
    np.save(tmp_path / "s.npy", scores)
    np.savetxt(tmp_path / "t.txt", y_true, fmt="%d")
    assert main(["report", "--y-true", str(tmp_path / "t.txt"), "--y-pred",
                 str(tmp_path / "s.npy"), "--num-classes", "4"]) == 0
    out = capsys.readouterr().out
    expected = sk.accuracy_score(y_true, scores.argmax(1))
    assert f"accuracy                  {expected:.4f}" in out
    assert "precision" in out and "support" in out


def test_report_markdown(prediction_files, capsys):
    true_path, pred_path, *_ = prediction_files
    assert main(["report", "--y-true", str(true_path), "--y-pred", str(pred_path),
                 "--format", "markdown"]) == 0
    assert capsys.readouterr().out.startswith("| metric | value |")


def test_demo_runs_and_times(capsys):
    # numpy named: auto runs cuda on a GPU machine (tests/test_demo.py)
    assert main(["demo", "--samples", "20000", "--classes", "5", "--backend", "numpy"]) == 0
    out = capsys.readouterr().out
    assert "20,000 predictions, 5 classes: full report in" in out
    assert "backend numpy" in out


@pytest.mark.parametrize("argv, message", [
    (["report", "--y-true", "missing.npy", "--y-pred", "missing.npy"], "--y-true missing.npy: no such file"),
])
def test_errors_exit_2_with_message(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_out_of_range_label_in_file_is_reported(tmp_path, capsys):
    np.save(tmp_path / "t.npy", np.array([0, 1, 2]))
    np.save(tmp_path / "p.npy", np.array([0, 1, 9]))
    assert main(["report", "--y-true", str(tmp_path / "t.npy"), "--y-pred",
                 str(tmp_path / "p.npy"), "--num-classes", "3"]) == 2
    assert ("--y-pred " + str(tmp_path / "p.npy") + ": row 2 holds a prediction outside 0..2"
            in capsys.readouterr().err)


def test_bad_num_classes_is_rejected_by_the_parser(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["report", "--y-true", "a.npy", "--y-pred", "b.npy", "--num-classes", "0"])
    assert exit_info.value.code == 2
    assert "must be a positive integer" in capsys.readouterr().err


@pytest.mark.parametrize("extra", [[], ["--num-classes", "3"]], ids=["classes-found", "num-classes"])
def test_header_only_file_says_it_has_no_rows(tmp_path, capsys, extra):
    """A CSV with a header and no row names the file and says so (it said
    "every row is --ignore-index None" when the classes were searched for)."""
    (tmp_path / "t.csv").write_text("label\n")
    (tmp_path / "p.csv").write_text("pred\n")
    assert main(["report", "--y-true", f"{tmp_path / 't.csv'}:label", "--y-pred",
                 f"{tmp_path / 'p.csv'}:pred", "--quiet", *extra]) == 2
    err = capsys.readouterr().err
    assert f"--y-true {tmp_path / 't.csv'}: holds no rows" in err and "ignore-index" not in err


@pytest.mark.parametrize("k", [2, 3, 5], ids=["K2", "K3", "K5"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_report_brier_and_top_k_in_every_format(tmp_path, capsys, k, weighted):
    """Issue 47 items 10 and 14: the report's brier_score is scikit-learn's
    brier_score_loss (halved for K = 2, was twice it), said in the legend; the
    default top-k (1, 5) leaves out every k >= K in text, JSON, Markdown and
    HTML; the HTML per-class table says when its support is a weight sum, and
    the inputs table how the scores were read."""
    rng = np.random.default_rng(k)
    logits = rng.normal(size=(400, k))
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y_true = np.arange(400) % k
    weight = rng.integers(1, 4, 400).astype(np.float64)
    np.save(tmp_path / "t.npy", y_true)
    np.save(tmp_path / "p.npy", proba)
    np.save(tmp_path / "w.npy", weight)
    argv = ["report", "--y-true", str(tmp_path / "t.npy"), "--scores", str(tmp_path / "p.npy"),
            "--scores-are", "probabilities", "--quiet"]
    if weighted:
        argv += ["--sample-weight", str(tmp_path / "w.npy")]
    shown = [f"top_{top}_accuracy" for top in (1, 5) if top < k]
    left_out = [f"top_{top}_accuracy" for top in (1, 5) if top >= k]
    pages = {}
    for output_format in ("text", "json", "markdown", "html"):
        assert main(argv + ["--format", output_format]) == 0
        pages[output_format] = capsys.readouterr().out
    report = json.loads(pages["json"])
    expected = sk.brier_score_loss(y_true, proba, sample_weight=weight if weighted else None)
    assert report["scores"]["brier_score"] == pytest.approx(expected, rel=1e-12)
    assert "halved for K = 2" in report["descriptions"]["brier_score"]
    assert [name for name in report["scores"] if name.startswith("top_")] == shown
    for output_format, page in pages.items():
        for name in shown:
            assert name in page, (output_format, name)
        for name in left_out:
            assert name not in page, (output_format, name)
    assert ("<th>support (weighted)</th>" in pages["html"]) == weighted
    assert ("<th>support</th>" in pages["html"]) != weighted
    assert "scores read as</th><td class=\"name\">probabilities, as given (--scores-are " \
        "probabilities, declared)" in pages["html"]
    default = [item for item in argv if item not in ("--scores-are", "probabilities")]
    assert main(default + ["--format", "html"]) == 0
    assert "scores read as</th><td class=\"name\">logits, softmax taken over each row " \
        "(--scores-are logits, the default)" in capsys.readouterr().out
