"""Public calls inside a ``torch.compile``d function: no crash, the eager result.

metrics_gpu keeps itself out of TorchDynamo's graphs
(``metrics_gpu/_torch_compile.py``): a compiled step breaks its graph at the
package's call and runs the call eagerly. The first test runs the issue's
script in a fresh process (the package imported before torch, Dynamo loaded
by ``torch.compile`` afterwards); the others run in this process on CPU tensors
(CUDA tensors: the ``cuda`` device cases, where there is a GPU).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import metrics_gpu as mg
from metrics_gpu import _torch_compile
from metric_registry import METRICS, SEED, flatten, make_case

torch = pytest.importorskip("torch")

CASE = make_case(np.random.default_rng(SEED))
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available() or mg._backend.importlib.util.find_spec("cupy") is None,
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
