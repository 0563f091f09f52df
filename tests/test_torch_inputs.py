"""Tensors as models hand them over (torch on the CPU): requiring grad,
bfloat16, channel-first segmentation batches, in the functional API and the
streaming state; and ClassificationMetrics.sync over a real torch.distributed
process group (gloo, spawned processes)."""

from __future__ import annotations

import os
import pickle
import tempfile

import numpy as np
import pytest

import metrics_gpu as mg

torch = pytest.importorskip("torch")


def test_functional_takes_grad_and_bfloat16_tensors(rng):
    logits = torch.tensor(rng.normal(size=(50, 4)), dtype=torch.float32, requires_grad=True)
    y = torch.tensor(rng.integers(0, 4, 50))
    accuracy = mg.accuracy_score(y, logits)
    assert isinstance(accuracy, torch.Tensor)
    expected = float(np.mean(logits.detach().numpy().argmax(axis=1) == y.numpy()))
    assert float(accuracy) == pytest.approx(expected)
    half = logits.detach().to(torch.bfloat16)
    report = mg.logits_report(y, half, top_k=(1,))
    widened = half.float().numpy()
    assert float(report.cross_entropy) == pytest.approx(
        float(mg.log_loss(y.numpy(), widened, from_logits=True)), rel=1e-12)


def test_segmentation_batches_are_one_sample_per_pixel(rng):
    n, k, h, w = 2, 3, 5, 4
    logits = torch.tensor(rng.normal(size=(n, k, h, w)), dtype=torch.float32, requires_grad=True)
    target = torch.tensor(rng.integers(0, k, (n, h, w)))
    target[0, 0, :] = 255  # void pixels
    flat_logits = logits.detach().permute(0, 2, 3, 1).reshape(-1, k).numpy()
    flat_target = target.reshape(-1).numpy()
    expected = _macro_iou(flat_target, flat_logits.argmax(axis=1), k, 255)
    iou = mg.jaccard_score(target, logits, average="macro", ignore_index=255, num_classes=k)
    assert isinstance(iou, torch.Tensor) and float(iou) == pytest.approx(expected, rel=1e-12)
    metrics = mg.ClassificationMetrics(k, ignore_index=255)
    for i in range(n):
        metrics.update(target[i:i + 1], logits[i:i + 1])
    report = metrics.compute()
    assert isinstance(report["macro_jaccard"], torch.Tensor)
    assert float(report["macro_jaccard"]) == pytest.approx(expected, rel=1e-12)
    assert float(report.total) == (flat_target != 255).sum()
    with pytest.raises(ValueError, match=r"y_true must have shape \(2, 5, 4\)"):
        mg.jaccard_score(target[:, :4], logits, average="macro", num_classes=k)


def _macro_iou(t, p, k, ignore):
    keep = t != ignore
    t, p = t[keep], p[keep]
    values = []
    for c in range(k):
        union = np.sum((t == c) | (p == c))
        values.append(np.sum((t == c) & (p == c)) / union if union else 0.0)
    return float(np.mean(values))


def test_stream_on_torch_cpu_and_checkpoint(rng):
    metrics = mg.ClassificationMetrics(5, n_bins=4, thresholds=6)
    batches = []
    for size in (13, 7):
        logits = torch.tensor(rng.normal(size=(size, 5)), requires_grad=True)
        y = torch.tensor(rng.integers(0, 5, size))
        metrics.update(y, logits)
        batches.append((y, logits.detach()))
    report = metrics.compute()
    assert isinstance(report["accuracy"], torch.Tensor) and report["accuracy"].device.type == "cpu"
    buffer = pickle.dumps(metrics.state_dict())  # what torch.save holds: plain tensors
    state = pickle.loads(buffer)
    assert all(isinstance(v, torch.Tensor) for k, v in state.items()
               if k not in ("version", "spec", "kind", "updates"))
    restored = mg.ClassificationMetrics(5, n_bins=4, thresholds=6)
    restored.load_state_dict(state)
    # restored onto the host backend (the state's own may be another): to rounding
    again, expected = restored.compute().to_dict(), report.to_dict()
    np.testing.assert_allclose([again["metrics"][k] for k in expected["metrics"]],
                               list(expected["metrics"].values()), rtol=1e-12, atol=1e-12)


# -- torch.distributed: sync over gloo ----------------------------------------


def _rank_batches(seed, world_size):
    """Uneven batch counts per rank: rank r gets r + 1 batches of its own sizes."""
    rng = np.random.default_rng(seed)
    ranks = []
    for rank in range(world_size):
        batches = []
        for _ in range(rank + 1):
            n = int(rng.integers(1, 40))
            y = rng.integers(0, 6, n)
            z = rng.normal(size=(n, 6))
            w = rng.integers(1, 4, n) if rank % 2 == 0 else None
            batches.append((y, z, w))
        ranks.append(batches)
    return ranks


def _weights(w, weighted, n):
    """A batch's weights: none, integer, or float (halves); ranks without weights
    send none, which counts as weight 1."""
    if not weighted or w is None:
        return None
    return w * 0.5 if weighted == "float" else w


def _sync_worker(rank, world_size, init_file, out_dir, seed, weighted):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world_size)
    try:
        metrics = mg.ClassificationMetrics(6, n_bins=5, thresholds=10, ignore_index=-1)
        for y, z, w in _rank_batches(seed, world_size)[rank]:
            w = _weights(w, weighted, len(y))
            metrics.update(torch.tensor(y), torch.tensor(z), None if w is None else torch.tensor(w))
        metrics.sync()
        with open(os.path.join(out_dir, f"{rank}.pkl"), "wb") as out:
            pickle.dump(metrics.compute().to_dict(), out)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("weighted", [None, "int", "float"])
def test_sync_over_gloo_equals_one_process(world_size, weighted):
    import torch.multiprocessing as mp

    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    seed = 1000 + world_size
    with tempfile.TemporaryDirectory() as directory:
        init_file = os.path.join(directory, "init")
        mp.spawn(_sync_worker, args=(world_size, init_file, directory, seed, weighted),
                 nprocs=world_size, join=True)
        results = []
        for rank in range(world_size):
            with open(os.path.join(directory, f"{rank}.pkl"), "rb") as source:
                results.append(pickle.load(source))
    single = mg.ClassificationMetrics(6, n_bins=5, thresholds=10, ignore_index=-1)
    for batches in _rank_batches(seed, world_size):
        for y, z, w in batches:
            w = _weights(w, weighted, len(y))
            single.update(y, z, np.ones(len(y), np.int64) if weighted and w is None else w)
    expected = single.compute().to_dict()
    for result in results:
        assert result["metrics"].keys() == expected["metrics"].keys()
        np.testing.assert_allclose([result["metrics"][k] for k in expected["metrics"]],
                                   list(expected["metrics"].values()), rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(result["confusion_matrix"], expected["confusion_matrix"])
