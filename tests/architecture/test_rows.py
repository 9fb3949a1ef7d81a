"""The Parquet schemas the row classes declare, pinned column by column: a renamed, retyped or
reordered column must be a deliberate change (the tables users have on disk depend on it).

``ragray/rows`` replaced hand-written Arrow schemas; these strings are those schemas (checked
equal when they were replaced) plus the columns added since, at the ends of the tables."""

from __future__ import annotations

import pytest

import ragray.rows as rows

PINNED = {
    "QuestionRow": "question_id:string question:string gold_answers:list<item: string> baseline_answer:string baseline_em:double n_passages:int32 influence_mode:string influence_mode_note:string state:string spearman_rho:double dominance:double divergent:bool flags:list<item: string> usage_ndcg:double rbo_alignment:double top1_used:bool relies_on_lower_rank:bool rho_ceiling:double misaligned:bool position_control:string position_sensitivity:double position_driven:bool n_calls:int32 n_control_calls:int32 n_failed_calls:int32 error:string seconds:double f1:double recall_at_k_cosine:double sim_answer_gold:double grounding:double hallucination:double relevance:double label_noise_ratio:double label_coverage:double cost_usd:double causal_noise_ratio:double retrieval_k:int32 hit_at_k:double recall_at_k:double mrr:double ndcg_at_10:double calls_requested:int32 calls_generated:int32 score_passes:int32 answer_span:string scored_answer:string scored_tokens:int32 logprob_all:double logprob_none:double context_dependent:bool noise_scale:double used_bar:double surrogate_passes:int32 check_passes:int32 seconds_surrogate:double seconds_checks:double answer_correct:bool dtype:string forward_passes:double host_syncs:double tokens_computed:double tokens_minimum:double padding_tokens:double answerable:bool declined:bool decline_margin:double carried_by:list<item: int32> edit_calls:int32 edit_unedited:string edit_reproduces:bool stage:string stage_why:string",
    "PassageRow": "question_id:string passage_id:string doc_id:string retrieval_rank:int32 retrieval_score:double influence:double influence_rank:double is_gold:bool control_slot:int32 influence_control:double content_influence:double answer_similarity:double logprob_drop:double logprob_drop_per_token:double jsd:double surrogate_weight:double question_similarity:double random_control:double keep_alone_gain:double credit:double group:int32 relation:string used:bool edit_moved:bool title:string text:string",
    "SubsetRow": "question_id:string purpose:string kept_passage_ids:list<item: string> logprob:double",
    "CheckRow": "question_id:string measure:string control:bool lds:double n_subsets:int32 top_k:list<item: int32> top_k_drop:list<item: double>",
    "CallRow": "question_id:string arm:string removed_passage_ids:list<item: string> answer:string similarity:double latency_s:double prompt_tokens:int32 completion_tokens:int32 tokens:int32 error:string",
    "FaithfulnessQuestionRow": "question_id:string question:string gold_answers:list<item: string> baseline_answer:string level:string hierarchical:bool explainer:string mode:string n_passages:int32 n_units:int32 n_units_flat:int32 cases:list<item: string> closed_book_answer:string closed_book_sim:double parametric:bool del_q_sim:double top_passage_id:string move_start_sim:double move_middle_sim:double move_end_sim:double position_sensitive:bool auc_most:double auc_least:double rho_loo_logprob:double rho_loo_surrogate:double rho_logprob_surrogate:double top1_loo_logprob:double top1_loo_surrogate:double top1_logprob_surrogate:double explainer_calls:int32 calls_requested:int32 calls_generated:int32 score_passes:int32 error:string seconds:double rho_loo_logprob_drop:double rho_logprob_drop_surrogate:double top1_loo_logprob_drop:double top1_logprob_drop_surrogate:double",
    "UnitRow": "question_id:string stage:int32 level:string unit_id:string unit_index:int32 passage_id:string retrieval_rank:int32 start:int32 end:int32 text:string importance:double rank:int32 bucket:string importance_loo:double importance_logprob:double importance_surrogate:double loo_change:double logprob_drop:double importance_logprob_drop:double",
    "CaseRow": "question_id:string k_label:string k:int32 n_units:int32 population:int64 exhaustive:bool case:string reason:string random_mean:double random_low:double random_high:double random_sd:double n_random:int32 rank_p_most:double sim_most:double effect_most:double status_most:string sim_least:double effect_least:double status_least:string p_most_below:double p_most_above:double p_least_below:double p_least_above:double changed_most:bool changed_least:bool changed_random:bool random_changed_share:double random_median:double by_construction:bool",
    "CurveRow": "question_id:string order:string k:int32 fraction:double similarity:double",
    "AuditEntry": "query_id:string query:string status:string score:int32 coverage:double precision:double recall:double noise_ratio:double retrieved:list<item: string> relevant:list<item: string> missing:list<item: string> noise:list<item: string> hit_at_k:double mrr:double ndcg_at_10:double aspects:list<item: string> explanation:string llm_error:string best_score:int32",
    "HitRow": "question_id:string passage_id:string doc_id:string position:int32 retrieval_rank:int32 retrieval_score:double title:string text:string is_gold:bool",
    "RetrievalQuestionRow": "question_id:string question:string n_hits:int32 n_gold:int32 hit_at_1:double hit_at_5:double hit_at_k:double recall_at_k:double mrr:double ndcg_at_10:double",
}
ARMS = "question_id:string arm:string k_label:string k:int32 draw:int32 removed_unit_ids:list<item: string> answer:string similarity:double changed:bool logprob:double sim_rouge_l:double sim_semantic:double latency_s:double prompt_tokens:int32 completion_tokens:int32 error:string"


def _text(schema) -> str:
    return " ".join(f"{f.name}:{f.type}" for f in schema)


@pytest.mark.parametrize("name", sorted(PINNED))
def test_row_schemas_are_pinned(name):
    assert _text(getattr(rows, name).arrow_schema()) == PINNED[name]


def test_arms_get_one_column_per_measure():
    assert _text(rows.ArmRow.arrow_schema_for(("rouge_l", "semantic"))) == ARMS
    with pytest.raises(TypeError, match="depend on the measures"):
        rows.ArmRow.arrow_schema()


def test_records_round_trip_through_their_json_form():
    rec = rows.InfluenceRecord(rows.QuestionRow("q", flags=("divergent",), spearman_rho=float("nan")),
                               (rows.PassageRow("q", passage_id="p", influence=0.5),), (), model="m")
    again = rows.InfluenceRecord.from_dict(rec.as_dict())
    assert again.passages == rec.passages and again.model == "m" and again.question.flags == ("divergent",)
    arm = rows.ArmRow("q", arm="DEL_MOST", similarities={"rouge_l": 0.5})
    assert arm.as_dict()["sim_rouge_l"] == 0.5 and rows.ArmRow.from_dict(arm.as_dict()) == arm
    with pytest.raises(ValueError, match="unknown fields"):
        rows.QuestionRow.from_dict({"question_id": "q", "not_a_column": 1})
