"""scikit-learn's classification functions, a metric family per module: the
label metrics, the score metrics (one fused read of the scores), the exact
ranking metrics and the label encoding. Each function is a short pipeline of
the stages of :mod:`metrics_gpu._pipeline.stages`; multilabel input goes to
:mod:`metrics_gpu._multilabel`. See docs/architecture.md, "The floors"."""
