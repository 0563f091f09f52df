"""The option types of the public functions, written once: each ``Literal``
here is what a type checker holds callers to, and the option tuples that
:mod:`metrics_gpu._validation` checks at run time are built from it
(``typing.get_args``), so the two cannot drift apart."""

from __future__ import annotations

from typing import Any, Literal, Union

# An array of any supported framework: NumPy, CuPy, torch, JAX, or a sequence.
ArrayLike = Any

# The averages of the label metrics (None: per class); "samples" for
# multilabel-indicator input only.
Average = Literal["micro", "macro", "weighted", "binary", "samples"]
# The averages of ROC AUC and average precision over classes.
RankingAverage = Literal["micro", "macro", "samples", "weighted"]
# confusion_matrix's normalisation: by row, by column, by the total.
Normalize = Literal["true", "pred", "all"]
# Cohen's kappa weights.
KappaWeights = Literal["linear", "quadratic"]
# ROC AUC of multiclass scores: one-vs-rest or one-vs-one.
MultiClass = Literal["raise", "ovr", "ovo"]
# scikit-learn's zero_division: "warn" (0 with a warning), 0, 1 or NaN.
ZeroDivision = Union[Literal["warn"], float]
# What a scores argument holds: raw logits or probabilities.
ScoresAre = Literal["logits", "probabilities"]
# When the streaming state checks its inputs (ClassificationMetrics' validate):
# at compute, at each update, or never (bad samples counted, left out).
StreamValidate = Literal["deferred", "eager", False]
# The norm of the calibration error: expected (l1), root mean square, maximum.
CalibrationNorm = Literal["l1", "l2", "max"]
# Whether label_report builds the K x K matrix.
ConfusionMatrixOption = Union[Literal["auto"], bool]
