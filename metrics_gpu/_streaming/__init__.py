"""The multiclass streaming state for training loops: ClassificationMetrics and its reports."""
