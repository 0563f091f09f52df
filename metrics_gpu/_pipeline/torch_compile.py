"""Keeps torch.compile's tracer (TorchDynamo) out of metrics_gpu.

The package's calls read pointers, launch kernels through CuPy or a C
library, read values back to check them and keep Python state between
calls: nothing Dynamo can put in a graph, and tracing into them with fake
tensors fails (NumPy calls on fake tensors). With the package's directory on
Dynamo's skip list, a compiled step that calls ``metrics.update(...)`` or a
functional metric breaks its graph at that call and runs it eagerly, with the
result it has without ``torch.compile``.

The list must hold the package before Dynamo traces anything, whichever
public call it meets first, and torch must not be imported for it (``import
metrics_gpu`` never imports torch, and Dynamo alone costs seconds). So the
package is put on the list at ``import metrics_gpu`` when Dynamo's rules are
loaded already, else the moment they are (``torch.compile`` loads them before
it traces): an import watcher on ``sys.meta_path`` that finds nothing itself
and only runs the registration after the rules' module has run.

Two calls are let in: ``ClassificationMetrics.update`` and
``MultilabelMetrics.update``. Dynamo inlines their first lines, which under
tracing (:func:`compiling` is ``torch.compiler.is_compiling`` then) call one
operator, ``metrics_gpu::update`` (a ``torch.library.custom_op``), with the
batch's tensors and the object's number in :data:`_updated_objects`. Its fake
implementation gives nothing (the state is not in the graph) and its real one
is the eager update: one launch on the caller's stream, as without
``torch.compile``. A graph keeps an operator that declares a mutation, so the
operator "mutates" an empty token tensor (a global, so every graph reads it
as an input: an intermediate one would be dropped as dead code). A step that
updates the metrics then compiles with ``fullgraph=True``, and once for every
batch size where the rows are marked dynamic.
"""
from __future__ import annotations

import sys
import weakref
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from typing import Any

__all__ = ["DYNAMO_RULES", "compiling", "inlined", "keep_package_out_of_dynamo", "traceable",
           "traced_update"]

# The module that holds Dynamo's skip list (loaded by torch.compile, never by us).
DYNAMO_RULES = "torch._dynamo.trace_rules"
PACKAGE = __name__.partition(".")[0]
# The operator that stands for an update in a graph.
UPDATE_OPERATOR = f"{PACKAGE}::update"

# Whether Dynamo is tracing: ``bool`` (a call of no Python frame, False) until
# the operator is registered, then ``torch.compiler.is_compiling``, which
# Dynamo reads as True while it traces and is False when the graph runs.
compiling: Any = bool

# The metrics objects an operator call may name (by id): every live
# ClassificationMetrics and MultilabelMetrics, registered by __init__ and by
# __setstate__ (a copy or an unpickled one has an id of its own).
_updated_objects: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()

# Set with the operator: torch, the operator, and the token it mutates.
torch: Any = None
_update_operator: Any = None
_token: Any = None

# The package's functions that Dynamo inlines (the rest of it is skipped).
_inlined: list[Any] = []

UPDATE_SCHEMA = ("(int metrics, Tensor y_true, Tensor preds, Tensor? sample_weight, "
                 "Tensor? groups, Tensor(a!) token) -> ()")


def inlined(function):
    """Mark a function of the package for Dynamo to inline (trace through)
    rather than skip: an update method, whose first lines hand a traced
    call to :func:`traced_update`."""
    _inlined.append(function)
    return function


def traceable(metrics: Any) -> None:
    """Let ``metrics`` be named by the operator of a compiled update."""
    _updated_objects[id(metrics)] = metrics


def traced_update(metrics: Any, y_true, preds, sample_weight, groups) -> None:
    """What Dynamo traces in place of ``metrics.update(...)``: one operator
    call for torch tensors; other inputs (NumPy arrays in a compiled step)
    are added by the eager update, where the graph breaks."""
    tensor = torch.Tensor
    if not (isinstance(y_true, tensor) and isinstance(preds, tensor)
            and (sample_weight is None or isinstance(sample_weight, tensor))
            and (groups is None or isinstance(groups, tensor))):
        _untraced_update(metrics, y_true, preds, sample_weight, groups)
        return
    # The scores of a training step require grad: the update reads their values only.
    _update_operator(id(metrics), y_true, preds.detach(), sample_weight, groups, _token)


def _untraced_update(metrics: Any, y_true, preds, sample_weight, groups) -> None:
    """The eager update (Dynamo skips this function: its graph breaks here)."""
    if groups is None:
        metrics.update(y_true, preds, sample_weight)
    else:
        metrics.update(y_true, preds, sample_weight, groups)


def _run_update(metrics: int, y_true, preds, sample_weight, groups, token) -> None:
    """The operator's real implementation: the eager update of the object
    numbered ``metrics``, run where the compiled graph runs (not traced)."""
    held = _updated_objects.get(metrics)
    if held is None:
        raise RuntimeError(
            f"{UPDATE_OPERATOR}: no live metrics object has id {metrics}; the compiled "
            "step names one that was deleted")
    _untraced_update(held, y_true, preds, sample_weight, groups)


def _register_update_operator(trace_rules) -> None:
    """Define ``metrics_gpu::update`` and let Dynamo inline the two update
    methods and :func:`traced_update`; with a torch too old for
    ``torch.library.custom_op`` nothing changes (the update breaks the graph)."""
    global compiling, torch, _update_operator, _token
    import torch as loaded_torch

    custom_op = getattr(loaded_torch.library, "custom_op", None)
    rule_map = getattr(trace_rules, "get_torch_obj_rule_map", None)
    if custom_op is None or rule_map is None or _update_operator is not None:
        return
    from torch._dynamo.variables import UserFunctionVariable

    # Its launch must run each time the graph does, with the host's bookkeeping
    # (call ordinals, count bounds): never replayed from a CUDA graph.
    unsafe = getattr(loaded_torch.Tag, "cudagraph_unsafe", None)
    operator = custom_op(UPDATE_OPERATOR, _run_update, mutates_args=("token",),
                         schema=UPDATE_SCHEMA, **({} if unsafe is None else {"tags": (unsafe,)}))

    @operator.register_fake
    def _no_output(metrics, y_true, preds, sample_weight, groups, token):
        return None

    rules = rule_map()
    for function in (*_inlined, traced_update):
        rules[function] = UserFunctionVariable
    torch = loaded_torch
    _update_operator = getattr(loaded_torch.ops, PACKAGE).update.default
    _token = loaded_torch.empty(0)
    compiling = loaded_torch.compiler.is_compiling


def _skip_package(trace_rules) -> None:
    """Dynamo skips every frame of a file under the package's directory, and
    the calls of the package's loaded functions whole: what they call outside
    the package (a recording hook, a user's callback, CuPy's Python code) runs
    without Dynamo too, as a skipped file's callees would not. The updates'
    operator is registered with it."""
    trace_rules.add(PACKAGE)
    _register_update_operator(trace_rules)
    try:
        from torch._C._dynamo.eval_frame import (
            _FrameAction,
            _FrameExecStrategy,
            set_code_exec_strategy,
        )
    except ImportError:  # an older torch: the skip list alone
        return
    whole = _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.SKIP)
    for code in _package_code():
        set_code_exec_strategy(code, whole)


def _package_code():
    """The code of every function and method of the package's loaded modules."""
    for name, module in list(sys.modules.items()):
        if module is None or (name != PACKAGE and not name.startswith(PACKAGE + ".")):
            continue
        for value in list(vars(module).values()):
            if getattr(value, "__module__", None) != name:
                continue
            members = vars(value).values() if isinstance(value, type) else (value,)
            for member in members:
                for function in (getattr(member, "__func__", member),
                                 getattr(member, "fget", None)):
                    code = getattr(function, "__code__", None)
                    if code is not None:
                        yield code


class _DynamoRulesWatcher(MetaPathFinder):
    """Runs :func:`_skip_package` right after Dynamo's rules are imported; finds
    no module itself (the other finders do), and leaves ``sys.meta_path`` then."""

    def find_spec(self, fullname, path, target=None) -> ModuleSpec | None:
        if fullname != DYNAMO_RULES:
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find_spec = getattr(finder, "find_spec", None)
            spec = find_spec(fullname, path, target) if find_spec is not None else None
            if spec is not None and spec.loader is not None:
                break
        else:
            return None
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_then_skip(module):
            exec_module(module)
            _skip_package(module)

        loader.exec_module = exec_then_skip
        return spec


def keep_package_out_of_dynamo() -> None:
    """Put the package on Dynamo's skip list now if Dynamo's rules are loaded,
    else when they are. Called once, at the end of ``import metrics_gpu``
    (its modules loaded: their functions are skipped whole)."""
    trace_rules = sys.modules.get(DYNAMO_RULES)
    if trace_rules is not None:
        _skip_package(trace_rules)
    elif not any(isinstance(finder, _DynamoRulesWatcher) for finder in sys.meta_path):
        sys.meta_path.insert(0, _DynamoRulesWatcher())
