"""`metrics-gpu report --task multilabel`: (N, L) files of every format streamed
in uneven chunks through MultilabelMetrics equal scikit-learn; detection of
the task; one-line errors naming the file and the row."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from sklearn import metrics as sk

from metrics_gpu import MultilabelMetrics
from metrics_gpu.cli import main

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet  # noqa: E402

N = 203
L = 4
CHUNK = "37"  # six chunks, the last one short
FAMILIES = {"precision": sk.precision_score, "recall": sk.recall_score, "f1": sk.f1_score,
            "jaccard": sk.jaccard_score}
AVERAGES = ("micro", "macro", "weighted", "samples")


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    y_true = (rng.random((N, L)) < 0.35).astype(np.int64)
    y_true[5] = 0  # a row with no label: the samples averages' 0/0
    logits = rng.normal(size=(N, L)) + 1.2 * y_true
    weight = rng.integers(1, 4, N).astype(np.float64)
    return y_true, logits, weight


@pytest.fixture(scope="module")
def files(tmp_path_factory, data):
    """The columns in .npy, CSV and Parquet: {format: {column: source}}."""
    y_true, logits, weight = data
    d = tmp_path_factory.mktemp("multilabel")
    labels = (logits > 0).astype(np.int8)
    probabilities = sigmoid(logits)
    for name, values in (("t", y_true), ("p", labels), ("z", logits), ("q", probabilities),
                         ("w", weight)):
        np.save(d / f"{name}.npy", values)
    names = [f"l{k}" for k in range(L)]
    header = ",".join([*names, *(f"p{k}" for k in range(L)), *(f"z{k}" for k in range(L)),
                       *(f"q{k}" for k in range(L)), "weight"])
    np.savetxt(d / "all.csv", np.column_stack([y_true, labels, logits, probabilities, weight]),
               delimiter=",", header=header, comments="",
               fmt=["%d"] * (2 * L) + ["%.17g"] * (2 * L + 1))
    fixed = pa.FixedSizeListArray.from_arrays
    table = pa.table({"y_true": fixed(pa.array(y_true.ravel()), L),
                      "y_pred": pa.array(list(labels)),
                      "logits": fixed(pa.array(logits.ravel()), L),
                      "probabilities": pa.array(list(probabilities)),
                      "weight": pa.array(weight)})
    pyarrow.parquet.write_table(table, d / "all.parquet", row_group_size=50)
    pyarrow.parquet.write_table(pa.table({n: pa.array(y_true[:, k]) for k, n in enumerate(names)}),
                           d / "labels.parquet", row_group_size=64)

    def columns(prefix):
        return "all.csv:" + ",".join(f"{prefix}{k}" for k in range(L))

    sources = {
        "npy": {"y_true": "t.npy", "labels": "p.npy", "logits": "z.npy",
                "probabilities": "q.npy", "weight": "w.npy"},
        "csv": {"y_true": columns("l"), "labels": columns("p"), "logits": columns("z"),
                "probabilities": columns("q"), "weight": "all.csv:weight"},
        "parquet": {"y_true": "all.parquet:y_true", "labels": "all.parquet:y_pred",
                    "logits": "all.parquet:logits",
                    "probabilities": "all.parquet:probabilities",
                    "weight": "all.parquet:weight"},
    }
    out = {fmt: {k: str(d / v) for k, v in cols.items()} for fmt, cols in sources.items()}
    out["parquet-columns"] = dict(out["parquet"], y_true=str(d / "labels.parquet"))
    out["dir"] = d
    return out


def run(capsys, *argv, status=0):
    code = main(["report", "--quiet", *argv])
    captured = capsys.readouterr()
    assert code == status, captured.err
    return captured


def run_json(capsys, *argv) -> dict:
    return json.loads(run(capsys, "--format", "json", *argv).out)


def prediction_argv(sources, kind):
    if kind == "labels":
        return ["--y-pred", sources["labels"]]
    return ["--scores", sources[kind], "--scores-are", kind]


def check_against_sklearn(report, y_true, y_pred, weight):
    metrics = report["metrics"]
    assert report["rows"] == N
    assert report["total"] == pytest.approx(N if weight is None else weight.sum(), abs=1e-9)
    assert metrics["subset_accuracy"] == pytest.approx(
        sk.accuracy_score(y_true, y_pred, sample_weight=weight), abs=1e-12)
    assert metrics["hamming_loss"] == pytest.approx(
        sk.hamming_loss(y_true, y_pred, sample_weight=weight), abs=1e-12)
    for family, score in FAMILIES.items():
        for average in AVERAGES:
            expected = score(y_true, y_pred, average=average, sample_weight=weight,
                             zero_division=0)
            assert metrics[f"{family}_{average}"] == pytest.approx(expected, abs=1e-12), \
                f"{family}_{average}"
        np.testing.assert_allclose(
            report["per_label"][family],
            score(y_true, y_pred, average=None, sample_weight=weight, zero_division=0),
            rtol=0, atol=1e-12, err_msg=family)
    np.testing.assert_allclose(report["confusion_matrix"], sk.multilabel_confusion_matrix(
        y_true, y_pred, sample_weight=weight), rtol=0, atol=1e-9)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("kind", ["labels", "probabilities", "logits"])
@pytest.mark.parametrize("fmt", ["npy", "csv", "parquet", "parquet-columns"])
def test_report_equals_sklearn(files, data, capsys, fmt, kind, weighted):
    y_true, logits, weight = data
    sources = files[fmt]
    argv = ["--task", "multilabel", "--y-true", sources["y_true"],
            *prediction_argv(sources, kind), "--chunk-size", CHUNK]
    if weighted:
        argv += ["--sample-weight", sources["weight"]]
    report = run_json(capsys, *argv)
    assert report["task"] == "multilabel" and report["task_detected"] is None
    assert report["labels"] == L
    assert report["auc_method"] == (None if kind == "labels" else "binned" if fmt == "csv"
                                    else "exact")  # auto: a CSV's rows are not known
    check_against_sklearn(report, y_true, (logits > 0).astype(int),
                          weight if weighted else None)


def test_label_names_from_the_columns(files, capsys):
    report = run_json(capsys, "--y-true", files["csv"]["y_true"], "--y-pred",
                      files["csv"]["labels"])
    assert report["label_names"] == [f"l{k}" for k in range(L)]
    report = run_json(capsys, "--y-true", files["npy"]["y_true"], "--y-pred",
                      files["npy"]["labels"])
    assert report["label_names"] == [str(k) for k in range(L)]


@pytest.mark.parametrize("threshold", ["0.5", "0.7"])
def test_threshold_of_probabilities_and_logits(files, data, capsys, threshold):
    y_true, logits, _ = data
    expected = (sigmoid(logits) > float(threshold)).astype(int)
    for kind in ("probabilities", "logits"):
        report = run_json(capsys, "--y-true", files["npy"]["y_true"],
                          *prediction_argv(files["npy"], kind), "--threshold", threshold)
        assert report["metrics"]["f1_samples"] == pytest.approx(
            sk.f1_score(y_true, expected, average="samples", zero_division=0), abs=1e-12), kind


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_binned_auc_within_its_bounds_and_independent_of_the_chunks(files, data, capsys,
                                                                    weighted):
    y_true, logits, weight = data
    probabilities = sigmoid(logits)
    w = weight if weighted else None
    argv = ["--y-true", files["npy"]["y_true"], "--scores", files["npy"]["logits"],
            "--thresholds", "64", "--auc", "binned"]
    if weighted:
        argv += ["--sample-weight", files["npy"]["weight"]]
    report = run_json(capsys, *argv, "--chunk-size", CHUNK)
    whole = run_json(capsys, *argv)  # one chunk: the same counts, sums within rounding
    assert report["confusion_matrix"] == whole["confusion_matrix"]
    for part in ("metrics", "per_label"):
        assert report[part].keys() == whole[part].keys()
        for name, value in report[part].items():
            np.testing.assert_allclose(value, whole[part][name], rtol=0, atol=1e-12,
                                       err_msg=name)
    assert report["auc_method"] == "binned" and report["thresholds"] == 64
    metrics, per_label = report["metrics"], report["per_label"]
    for name, score in (("roc_auc", sk.roc_auc_score),
                        ("average_precision", sk.average_precision_score)):
        exact = score(y_true, probabilities, average=None, sample_weight=w)
        bounds = np.array(per_label[f"{name}_error_bound"])
        assert (np.abs(np.array(per_label[name]) - exact) <= bounds + 1e-12).all(), name
        for average, bound in (("macro", ""), ("weighted", "weighted_"), ("micro", "micro_")):
            expected = score(y_true, probabilities, average=average, sample_weight=w)
            assert abs(metrics[f"{name}_{average}"] - expected) <= \
                metrics[f"{name}_{bound}error_bound"] + 1e-12, f"{name}_{average}"
    # The per-label values are the state's, fed the whole arrays at once.
    state = MultilabelMetrics(L, scores="logits", thresholds=64)
    state.update(y_true, logits, w)
    np.testing.assert_allclose(per_label["roc_auc"], state.compute().per_label["roc_auc"],
                               rtol=0, atol=1e-12)


def test_ignore_index_cells_left_out(tmp_path, data, capsys):
    y_true, logits, _ = data
    padded = y_true.copy()
    padded[::7, 1] = -1
    np.save(tmp_path / "t.npy", padded)
    np.save(tmp_path / "z.npy", logits)
    report = run_json(capsys, "--y-true", str(tmp_path / "t.npy"), "--scores",
                      str(tmp_path / "z.npy"), "--ignore-index", "-1", "--chunk-size", CHUNK)
    state = MultilabelMetrics(L, scores="logits", ignore_index=-1)
    state.update(padded, logits)
    expected = state.compute()
    for name in ("hamming_loss", "f1_macro", "jaccard_samples", "precision_micro"):
        assert report["metrics"][name] == pytest.approx(float(expected[name]), abs=1e-12), name
    assert report["per_label"]["support"][1] == int(y_true[:, 1][np.arange(N) % 7 != 0].sum())


def test_detection_says_so_and_task_names_it(files, capsys):
    sources = files["npy"]
    out = run(capsys, "--y-true", sources["y_true"], "--y-pred", sources["labels"]).out
    assert out.splitlines()[0] == (
        f"task: multilabel (detected: --y-true holds an (N, {L}) matrix and --y-pred one of "
        "the same shape; pass --task to choose)")
    assert "precision_samples" in out and "support" in out
    out = run(capsys, "--task", "multilabel", "--y-true", sources["y_true"], "--y-pred",
              sources["labels"]).out
    assert out.splitlines()[0] == "task: multilabel"
    report = run_json(capsys, "--y-true", sources["y_true"], "--scores", sources["logits"])
    assert report["task_detected"].startswith(f"--y-true holds an (N, {L}) matrix and --scores")


def test_one_column_labels_stay_multiclass(tmp_path, capsys):
    np.save(tmp_path / "t.npy", np.array([0, 1, 1, 0]))
    np.save(tmp_path / "p.npy", np.array([0, 1, 0, 0]))
    report = run_json(capsys, "--y-true", str(tmp_path / "t.npy"), "--y-pred",
                      str(tmp_path / "p.npy"))
    assert "task" not in report and report["confusion_matrix"] == [[2, 0], [1, 1]]


def test_plots_written(files, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "pictures"
    sources = files["npy"]
    main(["report", "--y-true", sources["y_true"], "--scores", sources["logits"],
          "--thresholds", "32", "--plot", str(out), "--format", "json"])
    captured = capsys.readouterr()
    assert sorted(p.name for p in out.iterdir()) == [
        "per_label_f1.png", "precision_recall.png", "roc.png"]
    assert f"wrote 3 pictures to {out}" in captured.err


def test_probabilities_read_as_logits_are_warned_of(files, capsys):
    sources = files["npy"]
    err = run(capsys, "--y-true", sources["y_true"], "--scores",
              sources["probabilities"]).err
    assert (f"metrics-gpu: warning: --scores {sources['probabilities']}: every score is in "
            "[0, 1]") in err
    assert "warning" not in run(capsys, "--y-true", sources["y_true"], "--scores",
                                sources["logits"]).err


def save(directory, **arrays):
    for name, values in arrays.items():
        np.save(directory / f"{name}.npy", values)
    return {name: str(directory / f"{name}.npy") for name in arrays}


def test_errors_name_the_file_and_the_row(tmp_path, data, capsys):
    y_true, logits, _ = data
    bad = y_true.copy()
    bad[100, 2] = 2
    paths = save(tmp_path, bad=bad, t=y_true, z=logits, q=sigmoid(logits),
                 wide=np.zeros((N, L + 1), np.int64), short=y_true[:-1],
                 one=np.zeros(N, np.int64), half=np.full((N, L), 0.5),
                 w=np.where(np.arange(N) == 150, -1.0, 1.0))
    q_bad = sigmoid(logits)
    q_bad[60, 0] = 1.5
    paths.update(save(tmp_path, q_bad=q_bad))
    (tmp_path / "t.csv").write_text("a,b\n0,1\n\n1,0\n1,3\n")
    (tmp_path / "p.csv").write_text("a,b\n0,1\n1,0\n1,1\n")
    cases = [
        (["--y-true", paths["bad"], "--y-pred", paths["t"]],
         f"--y-true {paths['bad']}: row 100 holds a target other than 0/1 (1 bad rows in all)"),
        (["--y-true", str(tmp_path / "t.csv"), "--y-pred", str(tmp_path / "p.csv"),
          "--chunk-size", "2"],
         f"--y-true {tmp_path / 't.csv'}: row 2 (line 5) holds a target other than 0/1"),
        (["--y-true", paths["t"], "--scores", paths["q_bad"], "--scores-are", "probabilities",
          "--chunk-size", CHUNK],
         f"--scores {paths['q_bad']}: row 60 holds a value outside [0, 1] (or NaN), not a "
         "probability as --scores-are probabilities declares (for logits, pass --scores-are "
         "logits)"),
        (["--y-true", paths["t"], "--y-pred", paths["t"], "--sample-weight", paths["w"]],
         f"--sample-weight {paths['w']}: row 150 holds a negative or non-finite weight"),
        (["--y-true", paths["t"], "--y-pred", paths["wide"]],
         f"--y-true {paths['t']} holds (N, {L}) rows, multilabel targets, but --y-pred "
         f"{paths['wide']} holds {L + 1} column(s)"),
        (["--task", "multilabel", "--y-true", paths["t"], "--y-pred", paths["one"]],
         f"--y-pred {paths['one']}: 1 column(s), but --y-true {paths['t']} has {L}"),
        (["--task", "multilabel", "--y-true", paths["t"], "--y-pred", paths["short"]],
         f"--y-pred {paths['short']}: {N - 1:,} rows, but --y-true {paths['t']} has {N:,}"),
        (["--task", "multilabel", "--y-true", paths["t"], "--y-pred", paths["half"]],
         f"--y-pred {paths['half']}: row 0 holds the non-integer label 0.5 (per-label scores "
         "go in --scores)"),
        (["--task", "multilabel", "--y-true", paths["t"], "--y-pred", paths["t"], "--scores",
          paths["z"]], "takes --y-pred ((N, L) 0/1 predictions) or --scores"),
        (["--task", "multilabel", "--y-true", paths["t"], "--y-pred", paths["t"],
          "--thresholds", "10"], "--thresholds (binned ROC AUC / AP per label) needs --scores"),
        (["--y-true", paths["t"], "--y-pred", paths["t"], "--ignore-index", "1"],
         "--ignore-index 1: with --task multilabel it must be a value other than"),
        (["--y-true", paths["t"], "--y-pred", paths["t"], "--top-k", "1"],
         "--top-k is for --task multiclass"),
        (["--y-true", paths["t"], "--y-pred", paths["t"], "--auc", "exact"],
         "--auc exact (ROC AUC / AP per label) needs --scores"),
        (["--y-true", paths["t"], "--scores", paths["z"], "--auc", "exact", "--ignore-index",
          "-1"], "--auc exact takes no --ignore-index with --task multilabel"),
        (["--task", "multiclass", "--y-true", paths["one"], "--y-pred", paths["one"],
          "--threshold", "0.3"], "--threshold is for --task multilabel"),
    ]
    for argv, message in cases:
        err = run(capsys, *argv, status=2).err
        assert err.startswith("metrics-gpu: error: ") and err.count("\n") == 1, err
        assert message in err, (argv, err)


@pytest.mark.parametrize("option, value, reason", [
    ("--num-classes", "3", "takes L, the labels, from the files' columns"),
    ("--top-k", "1", "has no top-k accuracy"),
    ("--n-bins", "5", "has no calibration bins"),
])
def test_multiclass_options_refused_with_their_reason(tmp_path, data, capsys, option, value,
                                                      reason):
    """Issue 47 item 13: each multiclass option refused on a multilabel file
    says its own reason (--groups and --confidence-level were refused for
    having "no top-k or calibration")."""
    y_true, _, _ = data
    paths = save(tmp_path, t=y_true, g=np.arange(N) % 2)
    err = run(capsys, "--y-true", paths["t"], "--y-pred", paths["t"], option,
              paths["g"] if value is None else value, status=2).err
    assert err == f"metrics-gpu: error: {option} is for --task multiclass: " \
        f"{err.split(': ', 3)[3]}", err
    assert reason in err and err.count("\n") == 1, err
    if option not in ("--top-k", "--n-bins"):
        assert "top-k" not in err and "calibration" not in err, err


# -- parity with the in-memory functions: ranking metrics, exact ROC AUC / AP -------------


def in_memory_scores(y_true, scores, weight):
    """Every score metric of the report from the public in-memory functions."""
    import metrics_gpu as mg

    expected = {name: mg.label_ranking_metrics(y_true, scores, sample_weight=weight)[name]
                for name in ("label_ranking_average_precision_score", "label_ranking_loss",
                             "coverage_error")}
    expected["ndcg_score"] = mg.ndcg_score(y_true, scores, sample_weight=weight)
    per_label = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, function in (("roc_auc", mg.roc_auc_score),
                               ("average_precision", mg.average_precision_score)):
            per_label[name] = function(y_true, scores, average=None, sample_weight=weight)
            for average in ("macro", "weighted", "micro", "samples"):
                expected[f"{name}_{average}"] = function(y_true, scores, average=average,
                                                         sample_weight=weight)
    return expected, per_label


def assert_equal_values(got: dict, expected: dict, names=None):
    for name in names or expected:
        value = math.nan if expected[name] is None else float(expected[name])
        if math.isnan(value):
            assert got[name] is None, name
        else:
            assert got[name] == pytest.approx(value, abs=1e-12, rel=0), name


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("fmt, kind", [("npy", "logits"), ("csv", "probabilities")])
def test_exact_auc_and_ranking_equal_the_in_memory_functions(files, data, capsys, fmt, kind,
                                                             weighted, workers):
    """Issue 51: with scores, the report's ranking metrics, exact ROC AUC / AP
    (every average, every label) and NDCG are the public in-memory functions'
    values of the same arrays, to 1e-12, whatever the chunks, the format (rows
    known or not) and the worker processes."""
    y_true, logits, weight = data
    scores = logits if kind == "logits" else sigmoid(logits)
    w = weight if weighted else None
    argv = ["--y-true", files[fmt]["y_true"], *prediction_argv(files[fmt], kind),
            "--auc", "exact", "--chunk-size", CHUNK, "--backend", "numpy",
            "--workers", workers]
    if weighted:
        argv += ["--sample-weight", files[fmt]["weight"]]
    report = run_json(capsys, *argv)
    assert report["auc_method"] == "exact"
    expected, per_label = in_memory_scores(y_true, scores, w)
    assert_equal_values(report["metrics"], expected)
    for name, values in per_label.items():
        np.testing.assert_allclose(report["per_label"][name], values, rtol=0, atol=1e-12)
    assert set(report["descriptions"]) >= set(expected)


def test_binned_report_has_the_ranking_metrics_of_the_state(files, data, capsys):
    """--auc binned: the ranking metrics still come (from MultilabelMetrics(ranking=True),
    NDCG summed row by row), equal to the in-memory ones, in one process or in
    worker processes; the binned ROC AUC / AP of 1000 thresholds."""
    y_true, logits, weight = data
    expected, _ = in_memory_scores(y_true, logits, weight)
    for workers in ("1", "3"):
        report = run_json(capsys, "--y-true", files["npy"]["y_true"], "--scores",
                          files["npy"]["logits"], "--auc", "binned", "--chunk-size", CHUNK,
                          "--sample-weight", files["npy"]["weight"], "--backend", "numpy",
                          "--workers", workers)
        assert report["auc_method"] == "binned" and report["thresholds"] == 1000
        assert_equal_values(report["metrics"], expected, (
            "label_ranking_average_precision_score", "label_ranking_loss", "coverage_error",
            "ndcg_score"))
        assert "roc_auc_samples" not in report["metrics"]
    out = run(capsys, "--y-true", files["npy"]["y_true"], "--scores", files["npy"]["logits"],
              "--auc", "exact").out
    for line in ("label ranking (each row's labels ranked by their scores):",
                 "ROC AUC and average precision (exact):", "  ndcg_score"):
        assert line in out, out


def test_exact_auc_refused_beyond_the_free_memory(files, capsys, monkeypatch):
    monkeypatch.setattr("metrics_gpu.files.exact._free_memory", lambda backend: 1000)
    err = run(capsys, "--y-true", files["npy"]["y_true"], "--scores", files["npy"]["logits"],
              "--auc", "exact", status=2).err
    assert "--auc exact needs about" in err and f"for {N:,} x {L} scores" in err, err
    report = run_json(capsys, "--y-true", files["npy"]["y_true"], "--scores",
                      files["npy"]["logits"])
    assert report["auc_method"] == "binned"  # auto: what fits


# The estimate against a real run, as tests/test_exact_ranking.py holds the
# multiclass one: a child process reports on a small file (imports warm), then
# on the large one with --auc exact; its peak resident memory (VmHWM) grows by
# `grown`, which the estimate must cover within ESTIMATE_SLACK (measured:
# 1.1-1.3 on these cases).
ESTIMATE_SLACK = 1.5
MEMORY_CASES = {"float32": (200_000, 10, "float32", False),
                "float64-weighted": (150_000, 6, "float64", True)}


@pytest.mark.parametrize("case", MEMORY_CASES)
def test_exact_multilabel_estimate_covers_the_measured_peak(tmp_path, case):
    import subprocess
    import sys
    import textwrap

    rows, labels, dtype, weighted = MEMORY_CASES[case]
    script = textwrap.dedent(f"""
        import contextlib, io, json, sys
        import numpy as np
        from metrics_gpu.files import multilabel
        from metrics_gpu.cli import main

        d = {str(tmp_path)!r}
        rng = np.random.default_rng({rows})
        for stem, n in (("small", 1000), ("large", {rows})):
            y = (rng.random((n, {labels})) < 0.3).astype(np.int8)
            np.save(f"{{d}}/{{stem}}_t.npy", y)
            # Scores of one decimal: ties within and across labels.
            np.save(f"{{d}}/{{stem}}_s.npy",
                    np.round(rng.normal(size=(n, {labels})) + y, 1).astype({dtype!r}))
            np.save(f"{{d}}/{{stem}}_w.npy", rng.integers(0, 4, n).astype(np.float64))

        def peak_rss():  # VmHWM: ru_maxrss would carry pytest's across fork and exec
            with open("/proc/self/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) * 1024

        estimates = []
        estimate = multilabel.exact_multilabel_bytes

        def recorded(*args, **kwargs):
            estimates.append(estimate(*args, **kwargs))
            return estimates[-1]

        multilabel.exact_multilabel_bytes = recorded

        def report(stem):
            argv = ["report", "--y-true", f"{{d}}/{{stem}}_t.npy", "--scores",
                    f"{{d}}/{{stem}}_s.npy", "--auc", "exact", "--backend", "numpy",
                    "--workers", "1", "--format", "json", "--quiet"]
            if {weighted!r}:
                argv += ["--sample-weight", f"{{d}}/{{stem}}_w.npy"]
            with contextlib.redirect_stdout(io.StringIO()) as out:
                status = main(argv)
            return status, out.getvalue()

        report("small")
        warm = peak_rss()
        status, out = report("large")
        print(json.dumps({{"status": status, "grown": peak_rss() - warm,
                          "estimate": estimates[-1],
                          "auc_method": json.loads(out)["auc_method"]}}), file=sys.stderr)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    measured = json.loads(done.stderr.strip().splitlines()[-1])
    assert measured["status"] == 0 and measured["auc_method"] == "exact"
    grown, estimate = measured["grown"], measured["estimate"]
    assert grown <= estimate <= ESTIMATE_SLACK * grown, (
        f"{case}: the exact report grew by {grown / 2**20:.1f} MiB, estimated "
        f"{estimate / 2**20:.1f} MiB")


@pytest.mark.parametrize("kind", ["labels", "logits"])
def test_html_page_holds_every_metric_of_the_json(files, capsys, tmp_path, kind):
    """--format html: one page with every scalar metric of the JSON report
    (its value as the page formats it), every label's row with its 2 x 2
    counts, the inputs, and with scores the curves (the histogram kept beside
    the exact values)."""
    from html import escape

    from metrics_gpu._reports.html import _number

    argv = ["--y-true", files["npy"]["y_true"], *prediction_argv(files["npy"], kind),
            "--sample-weight", files["npy"]["weight"]]
    report = run_json(capsys, *argv)
    page = tmp_path / "report.html"
    run(capsys, *argv, "--format", "html", "--output", str(page))
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "http" not in text.split("<main>")[1]
    for name, value in report["metrics"].items():
        cell = f'<td class="name">{escape(name)}</td><td>'
        assert cell in text, name
        shown = "nan" if value is None else _number(value)  # as the text report
        assert text.split(cell, 1)[1].startswith(shown), (name, shown)
    for name, matrix in zip(report["label_names"], report["confusion_matrix"]):
        counts = "".join(f"<td>{_number(v, count=True)}</td>" for v in np.ravel(matrix))
        assert f'<td class="name">{name}</td>' in text and counts in text, name
    assert f'<td class="name">{files["npy"]["y_true"]}</td>' in text
    if kind == "logits":
        assert "ndcg_score" in report["metrics"] and report["auc_method"] == "exact"
        pytest.importorskip("matplotlib")
        assert text.count('<img src="data:image/png;base64,') == 3


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_groups_equal_the_in_memory_metrics_of_each_group(files, data, capsys, tmp_path,
                                                          weighted, workers):
    """--groups: every metric of every group is that of the in-memory
    functions on the group's rows (scikit-learn's set-wise ones and the
    label-ranking ones of metrics_gpu), with fairlearn's min / max /
    difference / ratio; an empty group (code 3 of --num-groups 5 ... ) is NaN."""
    import metrics_gpu as mg

    y_true, logits, weight = data
    groups = np.random.default_rng(3).integers(0, 3, N)
    groups[groups == 2] = 4  # codes 0, 1, 4 of --num-groups 5: 2 and 3 empty
    np.save(tmp_path / "g.npy", groups)
    argv = ["--y-true", files["npy"]["y_true"], "--scores", files["npy"]["logits"],
            "--groups", str(tmp_path / "g.npy"), "--num-groups", "5", "--chunk-size", CHUNK,
            "--backend", "numpy", "--workers", workers]
    if weighted:
        argv += ["--sample-weight", files["npy"]["weight"]]
    report = run_json(capsys, *argv)["groups"]
    assert report["groups"] == [0, 1, 2, 3, 4]
    by_group = report["by_group"]
    y_pred = (logits > 0).astype(int)
    for g in range(5):
        rows = groups == g
        w = weight[rows] if weighted else None
        if not rows.any():
            assert report["counts"][g] == 0 and by_group["f1_macro"][g] is None
            continue
        assert report["counts"][g] == pytest.approx(w.sum() if weighted else rows.sum())
        t, p, z = y_true[rows], y_pred[rows], logits[rows]
        expected = {
            "subset_accuracy": sk.accuracy_score(t, p, sample_weight=w),
            "hamming_loss": sk.hamming_loss(t, p, sample_weight=w),
            "label_ranking_average_precision_score": float(
                mg.label_ranking_average_precision_score(t, z, sample_weight=w)),
            "label_ranking_loss": float(mg.label_ranking_loss(t, z, sample_weight=w)),
            "coverage_error": float(mg.coverage_error(t, z, sample_weight=w))}
        for family, score in FAMILIES.items():
            for average in AVERAGES:
                expected[f"{family}_{average}"] = score(t, p, average=average, sample_weight=w,
                                                        zero_division=0)
        for name, value in expected.items():
            assert by_group[name][g] == pytest.approx(value, abs=1e-12, rel=0), (g, name)
    present = [v for v in by_group["f1_macro"] if v is not None]
    assert report["group_max"]["f1_macro"] == pytest.approx(max(present), abs=1e-15)
    assert report["difference"]["between_groups"]["f1_macro"] == pytest.approx(
        max(present) - min(present), abs=1e-15)
    out = run(capsys, *argv).out
    assert "by group:" in out and "group_min" in out


def test_group_categories_and_html(files, capsys, tmp_path):
    np.save(tmp_path / "g.npy", np.where(np.arange(N) % 3 == 0, 0.5, 2.5))
    argv = ["--y-true", files["npy"]["y_true"], "--y-pred", files["npy"]["labels"],
            "--groups", str(tmp_path / "g.npy")]
    report = run_json(capsys, *argv)["groups"]
    assert report["groups"] == [0.5, 2.5] and report["counts"] == [68, N - 68]
    page = tmp_path / "groups.html"
    run(capsys, *argv, "--format", "html", "--output", str(page))
    text = page.read_text()
    assert '<section id="groups">' in text and '<td class="name">2.5</td>' in text


@pytest.mark.parametrize("method", ["wilson", "agresti-coull", "clopper-pearson"])
def test_intervals_of_the_proportions(files, data, capsys, tmp_path, method):
    """--confidence-level: the binomial interval of each metric that is a
    proportion of whole counts, from counts taken here of the arrays (whole
    weights: frequency weights); a bootstrap method and fractional weights
    are refused with their reason."""
    from metrics_gpu.intervals import proportion_interval

    if method == "clopper-pearson":
        pytest.importorskip("scipy")
    y_true, logits, weight = data
    y_pred = (logits > 0).astype(int)
    argv = ["--y-true", files["npy"]["y_true"], "--scores", files["npy"]["logits"],
            "--sample-weight", files["npy"]["weight"], "--confidence-level", "0.9",
            "--interval-method", method, "--chunk-size", CHUNK]
    report = run_json(capsys, *argv)
    intervals = report["intervals"]
    w = weight[:, None]
    tp = (w * (y_true & y_pred)).sum(axis=0)
    predicted, support = (w * y_pred).sum(axis=0), (w * y_true).sum(axis=0)
    exact = weight[(y_true == y_pred).all(axis=1)].sum()
    expected = {
        "subset_accuracy": (exact, weight.sum()),
        "hamming_loss": ((w * (y_true != y_pred)).sum(), weight.sum() * L),
        "precision_micro": (tp.sum(), predicted.sum()), "recall_micro": (tp.sum(), support.sum()),
        "per_label_precision": (tp, predicted), "per_label_recall": (tp, support)}
    for name, (count, trials) in expected.items():
        ci = proportion_interval(count, trials, confidence_level=0.9, method=method)
        for end in ("low", "high", "value"):
            np.testing.assert_allclose(intervals[name][end], getattr(ci, end), rtol=0,
                                       atol=1e-12, err_msg=f"{name} {end}")
    low, high = intervals["zero_one_loss"]["low"], intervals["zero_one_loss"]["high"]
    ci = proportion_interval(exact, weight.sum(), confidence_level=0.9, method=method)
    assert (low, high) == pytest.approx((1 - ci.high, 1 - ci.low), abs=1e-12)
    assert low <= report["metrics"]["zero_one_loss"] <= high
    out = run(capsys, *argv).out
    assert f"{report['metrics']['subset_accuracy']:.4f} [{ci.low:.4f}, {ci.high:.4f}]" in out
    np.save(tmp_path / "w.npy", weight + 0.5)
    err = run(capsys, *argv[:6], "--sample-weight", str(tmp_path / "w.npy"),
              "--confidence-level", "0.9", status=2).err
    assert "whole-number weights only" in err
    err = run(capsys, *argv[:4], "--confidence-level", "0.9", "--interval-method", "bca",
              status=2).err
    assert "--interval-method bca is not made for --task multilabel" in err


def test_kernel_backend_report_equals_the_numpy_one(files, capsys, tmp_path):
    """The emulated backend (the cuda path's launches on the CPU): exact ROC AUC /
    AP, the ranking metrics, NDCG and the groups equal the NumPy backend's."""
    from conftest import skip_unavailable

    skip_unavailable("emulated")
    np.save(tmp_path / "g.npy", np.arange(N) % 3)
    argv = ["--y-true", files["npy"]["y_true"], "--scores", files["npy"]["logits"],
            "--sample-weight", files["npy"]["weight"], "--groups", str(tmp_path / "g.npy"),
            "--chunk-size", CHUNK]
    numpy = run_json(capsys, *argv, "--backend", "numpy")
    emulated = run_json(capsys, *argv, "--backend", "emulated")
    assert emulated["backend"] == "emulated" and emulated["auc_method"] == "exact"
    assert_equal_values(emulated["metrics"], numpy["metrics"])
    for name, values in numpy["groups"]["by_group"].items():
        np.testing.assert_allclose(np.array(emulated["groups"]["by_group"][name], float),
                                   np.array(values, float), rtol=0, atol=1e-12, err_msg=name)
