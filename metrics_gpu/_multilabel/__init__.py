"""Multilabel classification, one feature in one folder: the per-label counts
and set-wise metrics (``counts``), the ranking metrics (``ranking``), the
inputs as the multilabel kernels read them (``inputs``) and the streaming state
``MultilabelMetrics`` (``stream``). See docs/architecture.md, "The floors"."""
