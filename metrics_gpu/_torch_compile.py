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
"""
from __future__ import annotations

import sys
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec

__all__ = ["DYNAMO_RULES", "keep_package_out_of_dynamo"]

# The module that holds Dynamo's skip list (loaded by torch.compile, never by us).
DYNAMO_RULES = "torch._dynamo.trace_rules"
PACKAGE = __name__.partition(".")[0]


def _skip_package(trace_rules) -> None:
    """Dynamo skips every frame of a file under the package's directory, and
    the calls of the package's loaded functions whole: what they call outside
    the package (a recording hook, a user's callback, CuPy's Python code) runs
    without Dynamo too, as a skipped file's callees would not."""
    trace_rules.add(PACKAGE)
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
