"""Arrow schemas of the run tables (SPEC §9); the Parquet files always carry exactly these."""

from __future__ import annotations

import pyarrow as pa

__all__ = ["QUESTIONS_SCHEMA", "PASSAGES_SCHEMA", "CALLS_SCHEMA"]

QUESTIONS_SCHEMA = pa.schema(
    [
        ("question_id", pa.string()),
        ("question", pa.string()),
        ("gold_answers", pa.list_(pa.string())),
        ("baseline_answer", pa.string()),
        ("baseline_em", pa.float64()),  # exact match with a gold answer; null without gold
        ("n_passages", pa.int32()),
        # the mode influence was measured in (generate | logprob; null in runs written before
        # influence.mode auto) and, when auto could not have log-prob, why
        ("influence_mode", pa.string()),
        ("influence_mode_note", pa.string()),
        ("state", pa.string()),  # measured | context_ignored | too_few_passages | constant_influence | error
        ("spearman_rho", pa.float64()),  # null = unmeasured
        ("dominance", pa.float64()),
        ("divergent", pa.bool_()),
        ("flags", pa.list_(pa.string())),
        # tie-robust alignment (ragray.metrics.alignment); null = nothing above epsilon, or a run
        # written before these existed
        ("usage_ndcg", pa.float64()),
        ("rbo_alignment", pa.float64()),
        ("top1_used", pa.bool_()),
        ("relies_on_lower_rank", pa.bool_()),
        ("rho_ceiling", pa.float64()),
        ("misaligned", pa.bool_()),
        # position control (ragray.metrics.position); null without it
        ("position_control", pa.string()),  # none | reversed | shuffled
        ("position_sensitivity", pa.float64()),
        ("position_driven", pa.bool_()),
        ("n_calls", pa.int32()),
        ("n_control_calls", pa.int32()),  # calls of the position control's order (in n_calls)
        ("n_failed_calls", pa.int32()),
        ("error", pa.string()),
        ("seconds", pa.float64()),
        # answer quality of the baseline (ragray.metrics.quality); null when not computable
        ("f1", pa.float64()),
        ("recall_at_k_cosine", pa.float64()),
        ("sim_answer_gold", pa.float64()),
        ("grounding", pa.float64()),
        ("hallucination", pa.float64()),
        ("relevance", pa.float64()),
        ("label_noise_ratio", pa.float64()),  # retrieved documents not among the gold ids
        ("label_coverage", pa.float64()),
        ("cost_usd", pa.float64()),
        ("causal_noise_ratio", pa.float64()),  # retrieved passages with influence <= epsilon
    ]
)

PASSAGES_SCHEMA = pa.schema(
    [
        ("question_id", pa.string()),
        ("passage_id", pa.string()),
        ("doc_id", pa.string()),
        ("retrieval_rank", pa.int32()),
        ("retrieval_score", pa.float64()),
        ("influence", pa.float64()),  # NaN = that ablation call failed
        ("influence_rank", pa.float64()),  # 1 = most influential, ties averaged
        ("is_gold", pa.bool_()),
        ("control_slot", pa.int32()),  # 1-based slot in the position control's order
        ("influence_control", pa.float64()),  # influence with the passages in that order
        ("content_influence", pa.float64()),  # mean of the two orders' influence
        ("answer_similarity", pa.float64()),  # cosine of passage and baseline answer (embedding control)
    ]
)

CALLS_SCHEMA = pa.schema(
    [
        ("question_id", pa.string()),
        ("arm", pa.string()),  # baseline | drop | control_baseline | control_drop
        ("removed_passage_ids", pa.list_(pa.string())),
        ("answer", pa.string()),
        ("similarity", pa.float64()),  # to the baseline answer
        ("latency_s", pa.float64()),
        ("prompt_tokens", pa.int32()),
        ("completion_tokens", pa.int32()),
        ("tokens", pa.int32()),
        ("error", pa.string()),
    ]
)
