"""The one place that checks inputs.

Every bad input gets a ``ValueError`` that names the argument, the problem and
an offending value with its position. Checks that cost a pass over the data
(ranges, finiteness, signs) are skipped with ``validate=False``; the backends
then guard instead: an out-of-range label is counted as invalid, never used as
an index. Validation never computes a metric.

One submodule per input kind, each above the ones it reads: ``common`` (what
every kind shares), ``multilabel``, ``labels``, ``scores``, ``ranking`` and
``stream``; this module re-exports the names the rest of the package uses.
"""

from __future__ import annotations

from metrics_gpu._formulas.tolerance import probability_sum_tolerance, score_dtype_eps
from metrics_gpu.backends.stream_batch import StreamBatch, binary_score_rows
from metrics_gpu._validation.common import (
    ALL_ZERO_WEIGHT,
    AVERAGE_OPTIONS,
    CLASS_STATISTICS_BYTES,
    EXACT_INTEGER_LIMIT,
    KAPPA_WEIGHTS,
    MAX_BINS,
    MAX_STATE_BYTES,
    NORMALIZE_OPTIONS,
    _first_true,
    _position,
    check_beta,
    check_bins,
    check_bool,
    check_class_weight,
    check_confusion_matrix,
    check_confusion_matrix_option,
    check_ignore_index,
    check_int_range,
    check_k,
    check_likelihood_replacement,
    check_num_classes,
    check_option,
    check_sample_weight,
    check_state_size,
    check_top_k,
    check_zero_division,
    host_tensor,
    integer_weights_fit,
    to_numpy,
)
from metrics_gpu._validation.multilabel import (
    MULTILABEL,
    MULTILABEL_INSTEAD,
    IndicatorInputs,
    MultilabelInputs,
    cell_ignore_value,
    check_indicator_inputs,
    check_log_base,
    check_multilabel_inputs,
    check_rank_cutoff,
    check_score_kind,
    is_label_indicator,
    refuse_multilabel,
    score_cut,
    scores_above,
)
from metrics_gpu._validation.labels import (
    GroupCodes,
    LabelInputs,
    check_groups,
    check_label_arrays,
    check_label_inputs,
    check_labels_argument,
    float_integer_limit,
)
from metrics_gpu._validation.scores import (
    IGNORED_POSITION,
    PROBABILITY_ROWS_SHARE,
    ScoreInputs,
    allowed_non_probability_rows,
    check_score_inputs,
    one_hot_target_codes,
    renamed_proba,
    check_score_labels,
    count_non_probability_rows,
    declared_probabilities_refused,
    first_non_probability_row,
    label_probabilities_read_as_logits,
    probabilities_read_as_logits,
    probability_rows,
)
from metrics_gpu._validation.ranking import (
    RANKING_AVERAGE_OPTIONS,
    _check_label_value,
    check_auc_mu_scores,
    check_average_precision_pos_label,
    check_binary_scores,
    check_catboost_auc_type,
    check_cost_matrix,
    check_curve_pos_label,
    check_drop_intermediate,
    check_max_fpr,
    check_multi_class,
    check_multiclass_roc_labels,
    check_multiclass_roc_labels_argument,
    check_multiclass_scores,
    check_per_class_scores,
    check_ranking_average,
    check_ranking_class_codes,
    check_ranking_inputs,
    check_some_weight,
    present_labels,
)
from metrics_gpu._validation.stream import check_stream_batch
