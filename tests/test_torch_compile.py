"""Public calls inside a ``torch.compile``d function: no crash, the eager result.

metrics_gpu keeps itself out of TorchDynamo's graphs
(``metrics_gpu/_pipeline/torch_compile.py``): a compiled step breaks its graph at a
functional call and runs the call eagerly. The two update methods are the
exception: Dynamo traces them into one operator, ``metrics_gpu::update``,
so that a step updating the metrics compiles whole (``fullgraph=True``). The
first test runs the issue's script in a fresh process (the package imported
before torch, Dynamo loaded by ``torch.compile`` afterwards); the others run
in this process on CPU tensors (CUDA tensors: the ``cuda`` device cases, where
there is a GPU).
"""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import metrics_gpu as mg
from metrics_gpu._pipeline import torch_compile as _torch_compile
from metrics_gpu.testing import call_counter, operation_counter
from metric_registry import METRICS, SEED, flatten, make_case

torch = pytest.importorskip("torch")

CASE = make_case(np.random.default_rng(SEED))
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available() or mg.backends.selection.importlib.util.find_spec("cupy") is None,
    reason="no GPU (CUDA tensors need a GPU and CuPy)"))]


def dynamo_skips_the_package() -> bool:
    from torch._dynamo import trace_rules

    return trace_rules.check_file(mg.__file__).skipped


def test_the_package_imported_before_torch_is_skipped_once_compile_loads_dynamo():
    """The issue's script, in a process of its own: ``import metrics_gpu`` before
    torch, then a compiled validation step (the default, inductor, backend)
    updating the stream and calling a functional metric: no crash, the eager
    numbers, and the step's own output."""
    script = textwrap.dedent("""
        import sys
        import metrics_gpu as mg
        assert "torch._dynamo.trace_rules" not in sys.modules
        import torch
        m, eager = mg.ClassificationMetrics(num_classes=10), mg.ClassificationMetrics(num_classes=10)
        step = torch.compile(lambda y, z: (m.update(y, z), mg.accuracy_score(y, z.argmax(1)),
                                           z.sum()), backend="aot_eager")
        gen = torch.Generator().manual_seed(0)
        for n in (64, 32, 17):
            y, z = torch.randint(0, 10, (n,), generator=gen), torch.randn(n, 10, generator=gen)
            _, accuracy, total = step(y, z)
            eager.update(y, z)
            assert float(accuracy) == float(mg.accuracy_score(y, z.argmax(1)))
            torch.testing.assert_close(total, z.sum())
        got, want = m.compute(), eager.compute()
        for name in ("accuracy", "macro_f1", "cross_entropy", "top_5_accuracy"):
            assert float(got[name]) == float(want[name]), name
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_the_package_imported_after_dynamo_is_skipped_at_once():
    """Dynamo's rules loaded before the registration runs (as when ``import
    metrics_gpu`` follows a ``torch.compile``): the registration puts the package
    on the list at once, and twice is harmless."""
    from torch._dynamo import trace_rules

    _torch_compile.keep_package_out_of_dynamo()
    _torch_compile.keep_package_out_of_dynamo()
    assert dynamo_skips_the_package()
    assert not any(isinstance(f, _torch_compile._DynamoRulesWatcher) for f in sys.meta_path)
    assert trace_rules.check_file(torch.__file__).skipped  # the rest of the list kept


def assert_same_numbers(got, expected, what):
    got, expected = flatten(got), flatten(expected)
    assert got.keys() == expected.keys(), what
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=f"{what}{key}")


@pytest.mark.parametrize("metric", METRICS, ids=lambda metric: metric.name)
def test_every_metric_under_torch_compile_gives_the_eager_result(metric):
    """Each public metric called inside a compiled function on CPU tensors: no
    crash, the numbers of the eager call. Dynamo's ``eager`` backend: the
    tracing (where the package would crash) is the default backend's, without
    its code generation."""
    import torch._dynamo

    arrays = tuple(torch.from_numpy(a) for a in CASE.arrays(metric.inputs))
    expected = metric.call(arrays)
    torch._dynamo.reset()  # each case compiled afresh, not from the last one's cache
    got = torch.compile(lambda *a: metric.call(a), backend="eager")(*arrays)
    assert_same_numbers(got, expected, metric.name)
    assert dynamo_skips_the_package()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_compiled_step_updates_the_streams(device, weighted):
    """``update`` of both streams inside a compiled step as batch sizes change,
    ``compute`` and ``merge`` inside compiled functions: the step's own output
    unchanged, and every number that of the same calls made eagerly."""
    import torch._dynamo

    torch._dynamo.reset()
    m, eager = (mg.ClassificationMetrics(num_classes=10) for _ in range(2))
    ml, ml_eager = (mg.MultilabelMetrics(num_labels=5, scores="logits") for _ in range(2))

    def step(y, z, w, yl, zl):
        m.update(y, z, w)
        ml.update(yl, zl)
        return z.sum()

    step = torch.compile(step, backend="eager")
    gen = torch.Generator().manual_seed(0)
    for n in (64, 32, 17, 64):
        y, z = torch.randint(0, 10, (n,), generator=gen), torch.randn(n, 10, generator=gen)
        w = torch.rand(n, generator=gen, dtype=torch.float64) if weighted else None
        yl, zl = torch.randint(0, 2, (n, 5), generator=gen), torch.randn(n, 5, generator=gen)
        y, z, yl, zl = (t.to(device) for t in (y, z, yl, zl))
        w = None if w is None else w.to(device)
        torch.testing.assert_close(step(y, z, w, yl, zl), z.sum())
        eager.update(y, z, w)
        ml_eager.update(yl, zl)
    got, want = torch.compile(m.compute, backend="eager")(), eager.compute()
    for name in ("accuracy", "macro_f1", "cross_entropy", "top_5_accuracy"):
        assert float(got[name]) == float(want[name]), name
    got, want = torch.compile(ml.compute, backend="eager")(), ml_eager.compute()
    for name in ("subset_accuracy", "hamming_loss", "f1_macro"):
        assert float(got[name]) == float(want[name]), name
    merged = mg.ClassificationMetrics(num_classes=10)
    torch.compile(lambda: (merged.merge(m), merged.merge(eager)), backend="eager")()
    twice = mg.ClassificationMetrics(num_classes=10)
    twice.merge(eager)
    twice.merge(eager)
    # Float weights on a kernel backend: atomics add in any order (an ulp apart).
    np.testing.assert_allclose(np.asarray(torch.as_tensor(merged.compute().confusion_matrix).cpu()),
                               np.asarray(torch.as_tensor(twice.compute().confusion_matrix).cpu()),
                               rtol=1e-12, atol=0)


# -- the update as an operator of the graph -------------------------------------------


def _compile_count() -> int:
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


def _fresh_dynamo() -> None:
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()


def _batches(device, sizes=(64, 33, 17)):
    """Rows of 10 classes (logits requiring grad, as a training step holds
    them, and float weights) and of 5 labels, the rows marked dynamic."""
    gen = torch.Generator().manual_seed(1)
    for n in sizes:
        batch = (torch.randint(0, 10, (n,), generator=gen),
                 torch.randn(n, 10, generator=gen).requires_grad_(),
                 torch.rand(n, generator=gen, dtype=torch.float64),
                 torch.randint(0, 2, (n, 5), generator=gen), torch.randn(n, 5, generator=gen))
        batch = tuple(t.to(device) for t in batch)
        for tensor in batch:
            torch._dynamo.mark_dynamic(tensor, 0)
        yield batch


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("compiler", ["aot_eager", "inductor"])
def test_fullgraph_step_updates_both_streams_in_one_graph(device, compiler):
    """A step that updates ClassificationMetrics and MultilabelMetrics, compiled
    with ``fullgraph=True``: Dynamo's explain finds no graph break, three batch
    sizes compile once, the step's output is its own, and every number equals
    the eager updates' and scikit-learn's on the whole set."""
    from sklearn import metrics as skm

    m, eager = (mg.ClassificationMetrics(num_classes=10) for _ in range(2))
    ml, ml_eager = (mg.MultilabelMetrics(num_labels=5, scores="logits") for _ in range(2))

    def step(y, z, w, yl, zl):
        m.update(y, z, w)
        ml.update(yl, zl)
        return (2 * z).sum()

    _fresh_dynamo()
    explained = torch._dynamo.explain(step)(*next(_batches(device, (8,))))
    assert (explained.graph_break_count, explained.graph_count) == (0, 1), \
        explained.break_reasons
    m.reset()
    ml.reset()
    _fresh_dynamo()
    compiled = torch.compile(step, fullgraph=True, backend=compiler)
    seen = []
    for batch in _batches(device):
        y, z, w, yl, zl = batch
        torch.testing.assert_close(compiled(*batch), (2 * z).sum())
        eager.update(y, z, w)
        ml_eager.update(yl, zl)
        seen.append(tuple(t.detach().cpu().numpy() for t in batch))
    assert _compile_count() == 1
    y, z, w, yl, zl = (np.concatenate(parts) for parts in zip(*seen))
    got, want = m.compute(), eager.compute()
    for name in ("accuracy", "macro_f1", "cross_entropy", "top_5_accuracy", "cohen_kappa"):
        assert float(got[name]) == float(want[name]), name
    assert float(got["accuracy"]) == pytest.approx(
        skm.accuracy_score(y, z.argmax(1), sample_weight=w), rel=1e-12, abs=0)
    assert float(got["macro_f1"]) == pytest.approx(
        skm.f1_score(y, z.argmax(1), average="macro", sample_weight=w), rel=1e-12, abs=0)
    got, want = ml.compute(), ml_eager.compute()
    for name in ("subset_accuracy", "hamming_loss", "f1_macro", "f1_micro"):
        assert float(got[name]) == float(want[name]), name
    assert float(got["f1_macro"]) == pytest.approx(
        skm.f1_score(yl, (zl > 0).astype(int), average="macro"), rel=1e-12, abs=0)


def test_compiled_update_costs_one_launch_and_our_calls_stay_in_budget():
    """On the emulated backend, after a layout's first batch: a compiled
    step's update is one launch, no allocation and no host transfer; the
    operator's own calls (its Python calls less those of a no-op operator of
    the same schema, torch's dispatch) stay within the eager update's budget."""
    from test_hot_path import UPDATE_CALL_BUDGET

    @torch.library.custom_op("metrics_gpu_test::noop", mutates_args=("token",),
                             schema=_torch_compile.UPDATE_SCHEMA)
    def noop(metrics, y_true, preds, sample_weight, groups, token):
        return None

    gen = torch.Generator().manual_seed(2)
    with mg.use_backend("emulated"):
        m = mg.ClassificationMetrics(num_classes=7)
        _fresh_dynamo()
        step = torch.compile(lambda y, z: m.update(y, z), fullgraph=True, backend="aot_eager")
        for _ in range(3):
            y, z = torch.randint(0, 7, (48,), generator=gen), torch.randn(48, 7, generator=gen)
            with operation_counter() as operations:
                step(y, z)
        assert (operations.launches, operations.device_allocations,
                operations.host_transfers) == (1, 0, 0)
        arguments = (y, z, None, None, _torch_compile._token)
        with call_counter() as ours:
            torch.ops.metrics_gpu.update.default(id(m), *arguments)
        with call_counter() as dispatch:
            torch.ops.metrics_gpu_test.noop.default(id(m), *arguments)
    assert ours.total - dispatch.total <= UPDATE_CALL_BUDGET, (ours, dispatch)
    assert m._updates == 4


@pytest.mark.parametrize("copied", ["deepcopy", "pickle"])
def test_a_copied_state_compiles_its_own_update(copied):
    """A copy has an id of its own (as a module holding the metrics that Lightning
    or an EMA deep-copies): the compiled step of the copy adds to the copy only."""
    original = mg.ClassificationMetrics(num_classes=3)
    original.update(np.array([0, 1]), np.array([0, 0]))
    copy_of = (copy.deepcopy(original) if copied == "deepcopy"
               else pickle.loads(pickle.dumps(original)))
    _fresh_dynamo()
    torch.compile(lambda y, z: copy_of.update(y, z), fullgraph=True, backend="eager")(
        torch.tensor([2, 2]), torch.tensor([2, 2]))
    assert float(original.compute()["accuracy"]) == 0.5
    assert float(copy_of.compute()["accuracy"]) == 0.75


def test_a_bad_batch_in_a_compiled_step_raises_the_eager_error():
    """Shapes are checked when the graph runs (the fake implementation checks
    nothing): the step raises the ValueError of the eager update, and the
    state adds nothing."""
    m = mg.ClassificationMetrics(num_classes=10, validate="eager")
    _fresh_dynamo()
    step = torch.compile(lambda y, z: m.update(y, z), fullgraph=True, backend="aot_eager")
    with pytest.raises(ValueError, match="9 score columns but num_classes=10"):
        step(torch.randint(0, 10, (8,)), torch.randn(8, 9))
    assert m._state is None


def test_numpy_batches_in_a_compiled_step_are_added_by_the_operator():
    """Dynamo reads NumPy arrays as tensors (its NumPy support): their update
    is the operator too, with no graph break, and adds the same rows."""
    m, eager = mg.ClassificationMetrics(num_classes=4), mg.ClassificationMetrics(num_classes=4)

    def step(y, z, x):
        m.update(y, z)
        return x * 2

    y, z = np.array([0, 1, 2, 3, 3]), 3 * np.eye(5, 4)
    _fresh_dynamo()
    explained = torch._dynamo.explain(step)(y, z, torch.ones(2))
    assert explained.graph_break_count == 0, explained.break_reasons
    eager.update(y, z)
    for name in ("accuracy", "macro_f1", "cross_entropy"):
        assert float(m.compute()[name]) == float(eager.compute()[name]), name
