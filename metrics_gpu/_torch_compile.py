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
    """Dynamo skips every frame of a file under the package's directory."""
    trace_rules.add(PACKAGE)


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
    else when they are. Called once, at ``import metrics_gpu``."""
    trace_rules = sys.modules.get(DYNAMO_RULES)
    if trace_rules is not None:
        _skip_package(trace_rules)
    elif not any(isinstance(finder, _DynamoRulesWatcher) for finder in sys.meta_path):
        sys.meta_path.insert(0, _DynamoRulesWatcher())
