"""ClassificationMetrics in a real Lightning Trainer (the [lightning] test extra).

A LightningModule's ``validation_step`` updates the state and its
``on_validation_epoch_end`` syncs, computes, logs the report with
``self.log_dict(report)`` as it is, and resets (docs/usage.md, "Lightning").
Two CPU ranks under ``strategy="ddp_spawn"`` (gloo), each validating its
shard: what every rank's logger receives is scikit-learn's value over the
whole validation set, not its own shard's. The example of docs/usage.md runs
as written, in one process.
"""

from __future__ import annotations

import ast
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

import metrics_gpu as mg

torch = pytest.importorskip("torch")
pl = pytest.importorskip("lightning.pytorch")

USAGE = Path(__file__).resolve().parent.parent / "docs" / "usage.md"

NUM_CLASSES = 6
FEATURES = 8
WORLD_SIZE = 2
# 2 ranks x 3 batches of 16: the DistributedSampler splits the set evenly, so
# that it repeats no sample to even out the ranks (it would: they count).
VALIDATION_SAMPLES = 96
BATCH_SIZE = 16
TOP_K = (1, 3)


def _dataset(seed: int, n: int) -> torch.utils.data.TensorDataset:
    """Float64 features (the forward pass of the reference then agrees with
    the ranks' far below 1e-12) and class codes with a skew per half, so
    that the two ranks' shards differ from the whole set."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, NUM_CLASSES, n)
    y[1::2] = rng.choice(NUM_CLASSES, n // 2, p=[0.4, 0.3, 0.1, 0.1, 0.05, 0.05])
    x = rng.normal(size=(n, FEATURES)) + 0.8 * np.eye(NUM_CLASSES, FEATURES)[y]
    return torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y))


class Classifier(pl.LightningModule):
    """The LightningModule of docs/usage.md, "Lightning": validation_step
    updates, on_validation_epoch_end syncs, computes, logs and resets."""

    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Linear(FEATURES, NUM_CLASSES, dtype=torch.float64)
        self.val_metrics = mg.ClassificationMetrics(NUM_CLASSES, top_k=TOP_K)

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.5)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.val_metrics.update(y, self(x))

    def on_validation_epoch_end(self):
        self.val_metrics.sync()
        report = self.val_metrics.compute()
        self.log_dict(report)
        self.val_metrics.reset()


class RankLogger(pl.loggers.Logger):
    """What one rank's loggers receive, a JSON line each call, in
    ``directory/rank-R.jsonl`` (Lightning's own loggers write on rank 0 only)."""

    def __init__(self, directory: str) -> None:
        super().__init__()
        self.directory = directory

    @property
    def name(self) -> str:
        return "ranks"

    @property
    def version(self) -> int:
        return 0

    def log_hyperparams(self, params, *args, **kwargs) -> None:
        pass

    def log_metrics(self, metrics, step=None) -> None:
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        with open(os.path.join(self.directory, f"rank-{rank}.jsonl"), "a") as out:
            out.write(json.dumps({"step": step, "metrics": metrics}) + "\n")


def _quiet_trainer(**kwargs) -> pl.Trainer:
    """A Trainer of one short epoch that writes no checkpoint and no bar."""
    return pl.Trainer(accelerator="cpu", max_epochs=1, limit_train_batches=2,
                      num_sanity_val_steps=1, log_every_n_steps=1, enable_checkpointing=False,
                      enable_progress_bar=False, enable_model_summary=False, **kwargs)


def _sklearn_references(y, logits) -> dict[str, float]:
    """scikit-learn's value of every report metric it has, on (y, logits):
    the label metrics of the calls REPORT_METRICS names, then the score
    metrics of tests/test_scores.py's references."""
    import sklearn.metrics as skm

    predicted = logits.argmax(axis=1)
    expected = {}
    for row in mg.REPORT_METRICS:
        call = row.sources.get("sklearn")
        if call is None:
            continue
        node = ast.parse(call, mode="eval").body
        name = node.func.id if isinstance(node, ast.Call) else node.id
        options = ({word.arg: ast.literal_eval(word.value) for word in node.keywords}
                   if isinstance(node, ast.Call) else {})
        expected[row.name] = getattr(skm, name)(y, predicted, **options)
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities = shifted / shifted.sum(axis=1, keepdims=True)
    labels = np.arange(NUM_CLASSES)
    expected["cross_entropy"] = skm.log_loss(y, probabilities, labels=labels)
    expected["brier_score"] = skm.brier_score_loss(y, probabilities, labels=labels,
                                                   scale_by_half=False)
    expected["hinge_loss"] = skm.hinge_loss(y, logits, labels=labels)
    for k in TOP_K:
        expected[f"top_{k}_accuracy"] = skm.top_k_accuracy_score(y, logits, k=k, labels=labels)
    return {name: float(value) for name, value in expected.items()}


def _assert_logged(logged: dict[str, float], expected: dict[str, float], where: str) -> None:
    for name, value in expected.items():
        assert name in logged, f"{where}: {name} was not logged"
        np.testing.assert_allclose(logged[name], value, rtol=1e-12, atol=1e-12,
                                   err_msg=f"{where}: {name}")


def test_report_is_what_log_dict_takes():
    """Every entry of a report of torch inputs is a 0-d float64 tensor (what
    ``self.log`` takes and keeps in float64; a Python or NumPy float would be
    logged as float32), and no per-class array or count is an entry."""
    data = _dataset(7, 40)
    metrics = mg.ClassificationMetrics(NUM_CLASSES, top_k=TOP_K)
    metrics.update(data.tensors[1], torch.nn.Linear(FEATURES, NUM_CLASSES,
                                                    dtype=torch.float64)(data.tensors[0]))
    report = metrics.compute()
    assert len(report) > 20
    for name, value in report.items():
        assert isinstance(value, torch.Tensor), (name, type(value))
        assert value.dtype == torch.float64 and value.shape == (), (name, value)
    assert {"per_class", "confusion_matrix", "calibration", "total", "invalid"}.isdisjoint(report)


LABELS = 5


class MultilabelClassifier(pl.LightningModule):
    """The same hooks with a MultilabelMetrics state."""

    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Linear(FEATURES, LABELS, dtype=torch.float64)
        self.val_metrics = mg.MultilabelMetrics(LABELS)

    def forward(self, x):
        return self.net(x)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.val_metrics.update(y, self(x))

    def on_validation_epoch_end(self):
        self.val_metrics.sync()
        self.log_dict(self.val_metrics.compute())
        self.val_metrics.reset()


def test_multilabel_report_is_logged_in_float64():
    """A MultilabelMetrics report logged as it is: its entries are 0-d float64
    tensors for torch inputs, as the classification report's are, so
    Lightning keeps them in float64 and they equal scikit-learn's."""
    import sklearn.metrics as skm

    rng = np.random.default_rng(3)
    x = torch.from_numpy(rng.normal(size=(97, FEATURES)))
    y = torch.from_numpy((rng.random((97, LABELS)) < 0.4).astype(np.int64))
    torch.manual_seed(0)
    model = MultilabelClassifier()
    trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                         enable_model_summary=False)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32)
    trainer.validate(model, loader)
    with torch.no_grad():
        predicted = (model(x) > 0).numpy().astype(np.int64)
    expected = {"subset_accuracy": skm.accuracy_score(y.numpy(), predicted),
                "hamming_loss": skm.hamming_loss(y.numpy(), predicted),
                "f1_micro": skm.f1_score(y.numpy(), predicted, average="micro"),
                "f1_macro": skm.f1_score(y.numpy(), predicted, average="macro")}
    logged = trainer.callback_metrics
    for name, value in expected.items():
        assert logged[name].dtype == torch.float64, (name, logged[name].dtype)
        np.testing.assert_allclose(float(logged[name]), value, rtol=1e-12, atol=1e-12,
                                   err_msg=name)


def _fit_two_ranks(directory: Path):
    """One fit of two CPU ranks (ddp_spawn over gloo): the metrics each
    rank's logger received, the model (rank 0's weights, which ddp_spawn
    copies back) and the validation set."""
    torch.manual_seed(0)
    model = Classifier()
    train = torch.utils.data.DataLoader(_dataset(1, 64), batch_size=BATCH_SIZE, shuffle=True)
    validation = _dataset(2, VALIDATION_SAMPLES)
    trainer = _quiet_trainer(devices=WORLD_SIZE, strategy="ddp_spawn",
                             logger=RankLogger(str(directory)), default_root_dir=directory)
    trainer.fit(model, train, torch.utils.data.DataLoader(validation, batch_size=BATCH_SIZE))
    logged = []
    for rank in range(WORLD_SIZE):
        lines = (directory / f"rank-{rank}.jsonl").read_text().splitlines()
        logged.append([json.loads(line)["metrics"] for line in lines])
    return logged, model, validation


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")
def test_ddp_ranks_log_sklearns_values_of_the_whole_set(tmp_path):
    """Each rank validates the shard Lightning's DistributedSampler gives it
    (together the whole set, once; each with metrics of its own), syncs and
    logs: every rank's logger receives scikit-learn's values of the whole set.
    One test, so that the ranks are started once (seconds: each imports
    torch and Lightning)."""
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    from torch.utils.data.distributed import DistributedSampler

    logged, model, validation = _fit_two_ranks(tmp_path)
    y = validation.tensors[1].numpy()
    with torch.no_grad():
        logits = model(validation.tensors[0]).numpy()
    expected = _sklearn_references(y, logits)
    assert {"accuracy", "macro_f1", "matthews_corrcoef", "cohen_kappa",
            "cross_entropy", "top_3_accuracy"} <= expected.keys()
    for rank, calls in enumerate(logged):
        # One epoch, one validation at its end (the sanity check logs nothing).
        assert len(calls) == 1, calls
        _assert_logged(calls[0], expected, f"rank {rank}")
        assert math.isfinite(calls[0]["expected_calibration_error"])
    # A rank that logged without sync() gave its shard's values: they differ.
    shards = [list(DistributedSampler(validation, num_replicas=WORLD_SIZE, rank=rank,
                                      shuffle=False)) for rank in range(WORLD_SIZE)]
    assert sorted(sum(shards, [])) == list(range(VALIDATION_SAMPLES))
    for shard in shards:
        own = _sklearn_references(y[shard], logits[shard])
        assert own["accuracy"] != expected["accuracy"]
        assert own["macro_f1"] != expected["macro_f1"]


def _usage_lightning_block() -> str:
    """The python block of docs/usage.md's "Lightning" section."""
    section = USAGE.read_text().split("\n## Lightning\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_usage_example_runs(tmp_path, monkeypatch):
    """docs/usage.md's example as written, on the CPU (Lightning reads
    ``PL_TRAINER_*`` defaults from the environment): what it logs is
    scikit-learn's on its validation set, in float64."""
    import sklearn.metrics as skm

    for option, value in (("ACCELERATOR", "cpu"), ("DEVICES", "1"),
                          ("DEFAULT_ROOT_DIR", str(tmp_path)),
                          ("ENABLE_PROGRESS_BAR", "False"), ("ENABLE_MODEL_SUMMARY", "False")):
        monkeypatch.setenv(f"PL_TRAINER_{option}", value)
    namespace: dict = {}
    exec(compile(_usage_lightning_block(), str(USAGE), "exec"), namespace)
    trainer, model, loader = namespace["trainer"], namespace["model"], namespace["val_loader"]
    targets, predicted = [], []
    with torch.no_grad():
        for x, y in loader:  # the batches of the validation, so the same logits
            targets.append(y.numpy())
            predicted.append(model(x).argmax(dim=1).numpy())
    y, predicted = np.concatenate(targets), np.concatenate(predicted)
    logged = trainer.callback_metrics
    assert logged["accuracy"].dtype == torch.float64
    np.testing.assert_allclose(float(logged["accuracy"]), skm.accuracy_score(y, predicted),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(float(logged["macro_f1"]),
                               skm.f1_score(y, predicted, average="macro"),
                               rtol=1e-12, atol=1e-12)
