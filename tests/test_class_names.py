"""Issue 51, part 2: class names in prediction files. String and
dictionary-encoded label columns (Parquet / Arrow), string labels in CSV and
``.npy``, and names of groups give the same report as their integer-coded
twin, by name; one vocabulary over ``--y-true``, ``--y-pred`` and every
shard (``--classes FILE`` or the sorted names found); and one-line errors
for names that do not fit."""

from __future__ import annotations

import contextlib
import io
import json
import re

import numpy as np
import pytest
from sklearn import metrics as sk

from metrics_gpu.cli import main
from metrics_gpu.files import report_files
from metrics_gpu.files.readers import read_classes_file

pa = pytest.importorskip("pyarrow")
import pyarrow.compute  # noqa: E402
import pyarrow.parquet  # noqa: E402

N = 400
CHUNK = 64  # several chunks, the last one short
# Sorted: their codes in the twin are their positions (the vocabulary found).
NAMES = np.array(["ant", "cat", "sea lion", "zebra"])
REGIONS = np.array(["north", "south", "west"])


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(51)
    k = NAMES.size
    y_true = rng.integers(0, k, N)
    logits = rng.normal(size=(N, k)).astype(np.float32)
    logits[np.arange(N), y_true] += 1.0
    y_pred = np.where(rng.random(N) < 0.75, logits.argmax(axis=1), rng.integers(0, k, N))
    groups = rng.integers(0, REGIONS.size, N)
    weight = rng.integers(1, 4, N).astype(np.float64)
    return {"y_true": y_true, "y_pred": y_pred, "scores": logits, "groups": groups,
            "weight": weight}


@pytest.fixture(scope="module")
def files(tmp_path_factory, data):
    """The same rows as integer codes (the twin) and as names: Parquet plain
    strings, Parquet dictionaries, CSV, ``.npy`` strings; {kind: sources}."""
    d = tmp_path_factory.mktemp("names")
    t, p, g = data["y_true"], data["y_pred"], data["groups"]
    scores = pa.FixedSizeListArray.from_arrays(pa.array(data["scores"].ravel()), NAMES.size)
    pa.parquet.write_table(pa.table({"t": t, "p": p, "g": g, "w": data["weight"],
                                     "s": scores}), d / "codes.parquet")
    pa.parquet.write_table(pa.table({"t": NAMES[t], "p": NAMES[p], "g": REGIONS[g],
                                     "w": data["weight"], "s": scores}), d / "strings.parquet")
    pa.parquet.write_table(pa.table({
        "t": pa.array(NAMES[t]).dictionary_encode(), "p": pa.array(NAMES[p]).dictionary_encode(),
        "g": pa.array(REGIONS[g]).dictionary_encode(), "w": data["weight"], "s": scores}),
        d / "dictionary.parquet", row_group_size=100)
    # A name with a space, quoted, and spaces around the fields (dropped).
    lines = ["t,p,g,w"] + [f' "{NAMES[a]}" , {NAMES[b]},{REGIONS[c]} ,{w}'
                           for a, b, c, w in zip(t, p, g, data["weight"])]
    (d / "names.csv").write_text("\n".join(lines) + "\n")
    np.save(d / "t.npy", NAMES[t])
    np.save(d / "p.npy", NAMES[p].astype("S"))  # bytes: read as ASCII
    np.save(d / "s.npy", data["scores"])
    np.save(d / "w.npy", data["weight"])

    def parquet(path):
        return {"y_true": f"{path}:t", "y_pred": f"{path}:p", "groups": f"{path}:g",
                "sample_weight": f"{path}:w", "scores": f"{path}:s"}

    csv = d / "names.csv"
    return d, {
        "codes": parquet(d / "codes.parquet"),
        "strings": parquet(d / "strings.parquet"),
        "dictionary": parquet(d / "dictionary.parquet"),
        "csv": {"y_true": f"{csv}:t", "y_pred": f"{csv}:p", "groups": f"{csv}:g",
                "sample_weight": f"{csv}:w", "scores": str(d / "s.npy")},
        "npy": {"y_true": str(d / "t.npy"), "y_pred": str(d / "p.npy"),
                "groups": f"{d / 'strings.parquet'}:g", "sample_weight": str(d / "w.npy"),
                "scores": str(d / "s.npy")},
    }


def _by_name(report: dict, names, groups=None) -> dict:
    """A JSON report of integer codes with its classes (and group codes) named."""
    named = json.loads(json.dumps(report))
    named["per_class"] = {names[int(code)]: row for code, row in report["per_class"].items()}
    named["class_names"] = list(names)
    if groups is not None:
        for key in ("groups", "group_metrics"):  # the metrics of each group; the old key
            named[key]["groups"] = [groups[code] for code in report[key]["groups"]]
    return named


def _assert_close(ours, expected, where="report"):
    """Equal JSON trees, floats to 1e-12 (chunks of another size sum in another order)."""
    if isinstance(expected, dict):
        assert isinstance(ours, dict) and ours.keys() == expected.keys(), where
        for key in expected:
            _assert_close(ours[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(ours, list) and len(ours) == len(expected), where
        for i, (a, b) in enumerate(zip(ours, expected)):
            _assert_close(a, b, f"{where}[{i}]")
    elif isinstance(expected, float) and isinstance(ours, (int, float)):
        assert ours == pytest.approx(expected, rel=1e-12, abs=1e-12), where
    else:
        assert ours == expected, where


def _report(sources, **options) -> dict:
    report = report_files(sources, chunk_rows=CHUNK, **options)
    out = report.to_dict()
    out.pop("backend")
    return out


@pytest.fixture(scope="module")
def twins(files):
    """The integer-coded report on each backend, every metric, with its
    classes and groups named."""
    _, sources = files
    return {backend: _by_name(_report(sources["codes"], backend=backend, auc="exact"),
                              NAMES, REGIONS.tolist()) for backend in ("numpy", "emulated")}


@pytest.fixture(scope="module")
def twin(twins):
    return twins["numpy"]


@pytest.mark.parametrize("kind", ["strings", "dictionary", "csv", "npy"])
@pytest.mark.parametrize("backend", ["numpy", "emulated"])
def test_names_give_the_report_of_their_integer_twin(files, twins, data, kind, backend):
    """Labels and groups given by name: every label metric, per-class row,
    matrix, group table, score metric and exact AUC of the integer-coded
    twin, the classes and groups named (in sorted order)."""
    _, sources = files
    ours = _report(sources[kind], backend=backend, auc="exact")
    _assert_close(ours, twins[backend])
    assert ours["class_names"] == NAMES.tolist()
    assert list(ours["per_class"]) == NAMES.tolist()
    # An independent reference: scikit-learn takes the names as they are.
    t, p, w = NAMES[data["y_true"]], NAMES[data["y_pred"]], data["weight"]
    f1 = sk.f1_score(t, p, average=None, sample_weight=w)  # over the sorted names
    assert [ours["per_class"][name]["f1"] for name in NAMES] == pytest.approx(f1, abs=1e-12)
    assert ours["metrics"]["matthews_corrcoef"] == pytest.approx(
        sk.matthews_corrcoef(t, p, sample_weight=w), abs=1e-12)
    assert ours["confusion_matrix"] == sk.confusion_matrix(t, p, sample_weight=w).tolist()


def test_workers_read_codes_of_names(files, twin):
    """The numpy backend's worker processes update from the codes the
    reader thread made: the same report as one process."""
    _, sources = files
    _assert_close(_report(sources["dictionary"], backend="numpy", auc="exact", workers=2),
                  twin)


def _shard_tables(data, bounds, dictionaries):
    """Rows cut at ``bounds``, each shard's labels a dictionary column whose
    entries are ``dictionaries[i]`` (other orders, other subsets, unused
    entries)."""
    tables = []
    for (start, stop), entries in zip(zip(bounds, bounds[1:]), dictionaries):
        entries = pa.array(entries)
        columns = {}
        for column, codes, names in (("t", data["y_true"], NAMES), ("p", data["y_pred"], NAMES),
                                     ("g", data["groups"], REGIONS)):
            values = names[codes[start:stop]]
            vocabulary = entries if names is NAMES else pa.array(names[::-1])
            indices = pa.compute.index_in(pa.array(values), value_set=vocabulary)
            columns[column] = pa.DictionaryArray.from_arrays(indices, vocabulary)
        columns["w"] = pa.array(data["weight"][start:stop])
        columns["s"] = pa.FixedSizeListArray.from_arrays(
            pa.array(data["scores"][start:stop].ravel()), NAMES.size)
        tables.append(pa.table(columns))
    return tables


def test_shards_with_other_dictionaries_agree(tmp_path, data, twin):
    """Shards whose dictionaries differ (another order, a subset, unused
    entries, plain strings beside dictionaries) read as one column: one
    vocabulary, the single file's report."""
    # The zebras' rows last: the first shard's targets lack one (the
    # vocabulary is the union).
    order = np.argsort(data["y_true"] == 3, kind="stable")
    shuffled = {key: value[order] for key, value in data.items()}
    bounds = [0, 100, 250, N]
    dictionaries = [["zebra", "sea lion", "cat", "ant"],  # reversed
                    ["cat", "ant", "sea lion", "zebra", "unused"],
                    ["sea lion", "zebra", "ant", "cat"]]
    tables = _shard_tables(shuffled, bounds, dictionaries)
    tables[2] = tables[2].set_column(0, "t", tables[2]["t"].cast(pa.string()))  # plain strings
    directory = tmp_path / "shards"
    directory.mkdir()
    for i, table in enumerate(tables):
        pa.parquet.write_table(table, directory / f"part-{i}.parquet")
    assert "zebra" not in tables[0]["t"].to_pylist()
    sources = {"y_true": f"{directory}:t", "y_pred": f"{directory}:p",
               "groups": f"{directory}:g", "sample_weight": f"{directory}:w",
               "scores": f"{directory}:s"}
    ours = _report(sources, backend="numpy", auc="exact")
    pa.parquet.write_table(pa.table({
        "t": shuffled["y_true"], "p": shuffled["y_pred"], "g": shuffled["groups"],
        "w": shuffled["weight"],
        "s": pa.FixedSizeListArray.from_arrays(pa.array(shuffled["scores"].ravel()),
                                               NAMES.size)}), tmp_path / "one.parquet")
    one = {key: f"{tmp_path / 'one.parquet'}:{value.rsplit(':', 1)[1]}"
           for key, value in sources.items()}
    expected = _by_name(_report(one, backend="numpy", auc="exact"), NAMES, REGIONS.tolist())
    _assert_close(ours, expected)
    _assert_close(ours["metrics"], twin["metrics"])  # the same rows, another order


def test_classes_file_fixes_the_order(files, tmp_path, data):
    """``--classes FILE``: class k is line k + 1; no pass to find the names;
    the report is the twin coded in that order."""
    d, sources = files
    order = ["zebra", "ant", "sea lion", "cat"]
    listed = tmp_path / "classes.txt"
    listed.write_text("\n".join(f"  {name} " for name in order) + "\n\n")
    code = {name: k for k, name in enumerate(order)}
    recode = np.array([code[name] for name in NAMES])
    pa.parquet.write_table(pa.table({"t": recode[data["y_true"]], "p": recode[data["y_pred"]],
                                     "w": data["weight"]}), tmp_path / "recoded.parquet")
    expected = _by_name(_report({"y_true": f"{tmp_path / 'recoded.parquet'}:t",
                                 "y_pred": f"{tmp_path / 'recoded.parquet'}:p",
                                 "sample_weight": f"{tmp_path / 'recoded.parquet'}:w"},
                                backend="numpy"), order)
    named = {key: sources["dictionary"][key] for key in ("y_true", "y_pred", "sample_weight")}
    for classes in (order, read_classes_file(listed)):
        ours = _report(named, backend="numpy", classes=classes)
        _assert_close(ours, expected)
        assert ours["class_names"] == order
    # The command line: its text table names the classes in the file's order.
    status, out, err = _main(["--y-true", named["y_true"], "--y-pred", named["y_pred"],
                              "--classes", str(listed), "--format", "text"])
    assert status == 0, err
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"\s*class\s+precision", line))
    header, *table = lines[start:start + 5]
    width = header.index("class") + len("class")  # names right-aligned under "class"
    assert [line[:width].strip() for line in table] == order


def test_classes_file_names_integer_codes(files, tmp_path, twin):
    """``--classes FILE`` beside integer codes names the codes 0..K-1."""
    _, sources = files
    listed = tmp_path / "classes.txt"
    listed.write_text("\n".join(NAMES) + "\n")
    status, out, err = _main(["--y-true", sources["codes"]["y_true"],
                              "--y-pred", sources["codes"]["y_pred"],
                              "--sample-weight", sources["codes"]["sample_weight"],
                              "--classes", str(listed)])
    assert status == 0, err
    ours = json.loads(out)
    assert ours["class_names"] == NAMES.tolist()
    _assert_close(ours["per_class"], twin["per_class"])


def _main(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["report", "--quiet", "--format", "json", *argv]
                      if "--format" not in argv else ["report", "--quiet", *argv])
    return status, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad-names")
    labels = np.array(["cat", "dog", "emu"] * 10)
    pa.parquet.write_table(pa.table({"y": labels, "codes": np.arange(30) % 3,
                                     "d": pa.array(labels).dictionary_encode(),
                                     "empty": np.where(np.arange(30) == 7, "", labels),
                                     "s": pa.FixedSizeListArray.from_arrays(
                                         pa.array(np.zeros(90)), 3)}), d / "l.parquet")
    pa.parquet.write_table(pa.table({"dog": np.zeros(30), "cat": np.zeros(30),
                                     "emu": np.zeros(30)}), d / "named.parquet")
    (d / "short.txt").write_text("cat\ndog\n")
    (d / "repeat.txt").write_text("cat\ndog\ncat\n")
    (d / "gap.txt").write_text("cat\n\ndog\n")
    (d / "blank.csv").write_text("y\n" + "\n".join(["cat", "dog", " ,", "emu"] * 5) + "\n")
    (d / "late.csv").write_text("y\n" + "\n".join(["1", "2", "cat"] * 3) + "\n")
    shards = d / "shards"
    shards.mkdir()
    pa.parquet.write_table(pa.table({"y": labels[:10]}), shards / "part-0.parquet")
    pa.parquet.write_table(pa.table({"y": np.arange(20) % 3}), shards / "part-1.parquet")
    return d


BAD = {
    "unknown": (["--y-true", "{d}/l.parquet:y", "--y-pred", "{d}/l.parquet:d", "--classes",
                 "{d}/short.txt"],
                r"--y-true .*l\.parquet: row 2 holds the label 'emu', not one of the 2 classes "
                r"of --classes .*short\.txt"),
    "unknown-dictionary": (["--y-true", "{d}/l.parquet:d", "--y-pred", "{d}/l.parquet:d",
                            "--classes", "{d}/short.txt"],
                           r"--y-true .*l\.parquet: row 2 holds the label 'emu', not one of"),
    "repeated-class": (["--y-true", "{d}/l.parquet:y", "--y-pred", "{d}/l.parquet:y",
                        "--classes", "{d}/repeat.txt"],
                       r"--classes .*repeat\.txt: line 3 repeats the class name 'cat' of "
                       r"line 1"),
    "empty-line": (["--y-true", "{d}/l.parquet:y", "--y-pred", "{d}/l.parquet:y",
                    "--classes", "{d}/gap.txt"], r"--classes .*gap\.txt: line 2 is empty"),
    "num-classes-found": (["--y-true", "{d}/l.parquet:y", "--y-pred", "{d}/l.parquet:d",
                           "--num-classes", "4"],
                          r"--num-classes is 4, but the label files hold 3 class names"),
    "num-classes-file": (["--y-true", "{d}/l.parquet:y", "--y-pred", "{d}/l.parquet:y",
                          "--classes", "{d}/short.txt", "--num-classes", "3"],
                         r"--num-classes is 3, but --classes .*short\.txt names 2"),
    "num-classes-codes": (["--y-true", "{d}/l.parquet:codes", "--y-pred", "{d}/l.parquet:codes",
                           "--classes", "{d}/short.txt", "--num-classes", "3"],
                          r"--num-classes is 3, but --classes .*short\.txt names 2"),
    "mixed": (["--y-true", "{d}/l.parquet:codes", "--y-pred", "{d}/l.parquet:d"],
              r"--y-true .*l\.parquet holds integer class codes, but --y-pred .*l\.parquet "
              r"holds class names \(strings\): give both as names or both as codes"),
    "mixed-shards": (["--y-true", "{d}/shards:y", "--y-pred", "{d}/shards:y"],
                     r"--y-true .*shards: .*part-0\.parquet holds names \(strings\), but "
                     r".*part-1\.parquet holds numbers"),
    "ignore-index": (["--y-true", "{d}/l.parquet:y", "--y-pred", "{d}/l.parquet:y",
                      "--ignore-index", "0"],
                     r"--ignore-index 0 is a class code, but --y-true .*l\.parquet holds class "
                     r"names"),
    "empty-parquet": (["--y-true", "{d}/l.parquet:empty", "--y-pred", "{d}/l.parquet:y"],
                      r"--y-true .*l\.parquet: row 7 holds an empty label"),
    "empty-csv": (["--y-true", "{d}/blank.csv:y", "--y-pred", "{d}/blank.csv:y"],
                  r"--y-true .*blank\.csv: row 2 \(line 4\) holds an empty label"),
    "codes-then-names": (["--y-true", "{d}/late.csv:y", "--y-pred", "{d}/late.csv:y"],
                         r"--y-true .*late\.csv: cannot parse row 2 \(line 4\) 'cat': .*its "
                         r"first value is a number, so the column holds class codes"),
    "score-order": (["--y-true", "{d}/l.parquet:y", "--scores", "{d}/named.parquet:dog,cat,emu"],
                    r"--scores .*named\.parquet: the score columns \['dog', 'cat', 'emu'\] are "
                    r"the classes in another order"),
    "score-width-file": (["--y-true", "{d}/l.parquet:y", "--scores", "{d}/l.parquet:s",
                          "--classes", "{d}/short.txt"],
                         r"--scores .*l\.parquet: 3 score columns, but --classes .*short\.txt "
                         r"names 2 classes"),
    "score-width-found": (["--y-true", "{d}/l.parquet:y", "--scores",
                           "{d}/named.parquet:dog,cat"],
                          r"--scores .*named\.parquet: 2 score columns, but the label files "
                          r"hold 3 class names"),
    "multilabel": (["--task", "multilabel", "--y-true", "{d}/l.parquet:y", "--y-pred",
                    "{d}/l.parquet:y", "--classes", "{d}/short.txt"],
                   r"--classes is for --task multiclass"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_names_that_do_not_fit_are_one_line_errors(bad, case):
    argv, pattern = BAD[case]
    status, out, err = _main([a.format(d=bad) for a in argv])
    assert status == 2, err
    assert err.count("\n") == 1, err
    assert re.match(rf"metrics-gpu: error: {pattern}", err), err
    assert not out


def test_integer_dictionaries_are_codes(tmp_path):
    """A categorical of integers (a dictionary of int64 values) holds codes."""
    codes = np.arange(40) % 4
    pa.parquet.write_table(pa.table({"y": pa.array(codes).dictionary_encode(), "p": codes}),
                           tmp_path / "c.parquet")
    report = report_files({"y_true": f"{tmp_path / 'c.parquet'}:y",
                           "y_pred": f"{tmp_path / 'c.parquet'}:p"}, backend="numpy")
    assert report["accuracy"] == 1.0 and report.labels.class_names == ["0", "1", "2", "3"]
    assert "class_names" not in report.to_dict()


def test_names_in_the_page_and_the_pictures(files):
    """The HTML page's per-class table and matrix and the pictures' ticks name
    the classes; the group table names the regions."""
    _, sources = files
    report = report_files(sources["dictionary"], backend="numpy", chunk_rows=CHUNK,
                          curves=True)
    page = report.to_html()
    for name in (*NAMES, *REGIONS):
        assert f">{name}<" in page
    pytest.importorskip("matplotlib")
    ax = report.plot_confusion_matrix()
    assert [tick.get_text() for tick in ax.get_xticklabels()] == NAMES.tolist()
    legend = report.plot_roc().get_legend()
    assert any("sea lion" in text.get_text() for text in legend.get_texts())


def test_no_pass_over_integer_labels_with_num_classes(files, monkeypatch):
    """Integer labels with K known take no first pass (the fast path)."""
    from metrics_gpu.files import evaluate

    def refused(*args, **kwargs):
        raise AssertionError("a pass to find names over integer labels")

    monkeypatch.setattr(evaluate, "find_names", refused)
    monkeypatch.setattr(evaluate, "find_classes", refused)
    _, sources = files
    report_files({"y_true": sources["codes"]["y_true"], "y_pred": sources["codes"]["y_pred"]},
                 num_classes=NAMES.size, backend="numpy")
    with pytest.raises(AssertionError, match="a pass to find names"):
        report_files({"y_true": sources["strings"]["y_true"],
                      "y_pred": sources["strings"]["y_pred"]}, backend="numpy")


def test_classes_argument_is_checked():
    with pytest.raises(ValueError, match="class 2 repeats the name 'a' of class 0"):
        report_files({"y_true": "unused.npy", "y_pred": "unused.npy"}, classes=["a", "b", "a"])



@pytest.mark.parametrize("values", [["0", "2", "10"], ["0.5", "1.5", "-2"]],
                         ids=["codes", "fractions"])
def test_groups_of_names_that_are_numbers(tmp_path, values):
    """A groups column of names that are all numbers (a categorical of
    strings, as Hive partition keys and CSV text are) groups as the numbers
    do: whole ones are the group codes, others categories in numeric order."""
    rng = np.random.default_rng(3)
    n = 200
    y_true, y_pred = rng.integers(0, 3, n), rng.integers(0, 3, n)
    picks = rng.integers(0, 3, n)
    names = np.array(values)[picks]
    numbers = names.astype(np.float64)
    pa.parquet.write_table(pa.table({"t": y_true, "p": y_pred,
                                     "g": pa.array(names).dictionary_encode(),
                                     "n": numbers}), tmp_path / "g.parquet")
    path = tmp_path / "g.parquet"
    ours = report_files({"y_true": f"{path}:t", "y_pred": f"{path}:p", "groups": f"{path}:g"},
                        backend="numpy", chunk_rows=CHUNK).to_dict()["groups"]
    expected = report_files({"y_true": f"{path}:t", "y_pred": f"{path}:p",
                             "groups": f"{path}:n"},
                            backend="numpy", chunk_rows=CHUNK).to_dict()["groups"]
    _assert_close(ours, expected)
    assert len(ours["groups"]) == (11 if values[2] == "10" else 3)


def test_an_empty_group_is_an_error_naming_its_row(tmp_path):
    lines = ["t,p,g"] + [f"{i % 3},{i % 3},{'' if i == 5 else 'north'}" for i in range(20)]
    (tmp_path / "g.csv").write_text("\n".join(lines) + "\n")
    status, _, err = _main(["--y-true", f"{tmp_path / 'g.csv'}:t",
                            "--y-pred", f"{tmp_path / 'g.csv'}:p",
                            "--groups", f"{tmp_path / 'g.csv'}:g"])
    assert status == 2
    assert re.match(r"metrics-gpu: error: --groups .*g\.csv: row 5 \(line 7\) holds an empty "
                    r"group", err), err
