"""Rows of ``ragray run``: ``questions``, ``passages`` and ``calls``, and the record of
one question that the run log holds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from ragray.rows.base import QuestionRecord, Row, doc

__all__ = ["CallRow", "CheckRow", "InfluenceRecord", "PassageRow", "QuestionRow", "SubsetRow"]

_Float = Annotated[float | None, doc("")]


@dataclass(frozen=True)
class QuestionRow(Row):
    """One question of an influence run: its answer, verdicts and quality."""

    table = "questions"
    renamed = {"precision": "dtype"}

    question_id: str
    question: str | None = None
    gold_answers: tuple[str, ...] | None = None
    baseline_answer: str | None = None
    baseline_em: Annotated[float | None, doc("exact match with a gold answer; null without gold")] = None
    n_passages: int | None = None
    influence_mode: Annotated[str | None, doc("interactions | loo | logprob_share | jsd | surrogate: how influence "
                                              "was measured (null in runs written before influence.mode auto; "
                                              "generate and logprob before 0.2.0)")] = None
    influence_mode_note: Annotated[str | None, doc("why influence.mode auto chose loo")] = None
    state: Annotated[str | None, doc("measured | context_ignored (the answer does not depend on the passages) | "
                                     "too_few_passages | constant_influence | error")] = None
    spearman_rho: Annotated[float | None, doc("influence vs retrieval ranks; null = unmeasured")] = None
    dominance: Annotated[float | None, doc("max influence / sum of influence")] = None
    divergent: Annotated[bool | None, doc("rho below influence.divergence_threshold")] = None
    flags: tuple[str, ...] | None = None
    usage_ndcg: Annotated[float | None, doc("tie-robust alignment: nDCG of the retrieval order against "
                                            "influence as gain; null = nothing above epsilon")] = None
    rbo_alignment: Annotated[float | None, doc("rank-biased overlap of the two orders")] = None
    top1_used: Annotated[bool | None, doc("the top retrieved passage has influence above epsilon")] = None
    relies_on_lower_rank: Annotated[bool | None, doc("the most influential passage ranks below the top "
                                                     "and beats the top-ranked one")] = None
    rho_ceiling: Annotated[float | None, doc("the largest rho the influence ties allow")] = None
    misaligned: Annotated[bool | None, doc("the tie-robust misalignment verdict")] = None
    position_control: Annotated[str | None, doc("none | reversed | shuffled")] = None
    position_sensitivity: _Float = None
    position_driven: bool | None = None
    n_calls: int | None = None
    n_control_calls: Annotated[int | None, doc("calls of the position control's order (in n_calls)")] = None
    n_failed_calls: int | None = None
    error: str | None = None
    seconds: float | None = None
    f1: Annotated[float | None, doc("answer quality of the baseline; null when not computable")] = None
    recall_at_k_cosine: float | None = None
    sim_answer_gold: float | None = None
    grounding: float | None = None
    hallucination: float | None = None
    relevance: float | None = None
    label_noise_ratio: Annotated[float | None, doc("retrieved documents not among the gold ids")] = None
    label_coverage: float | None = None
    cost_usd: float | None = None
    causal_noise_ratio: Annotated[float | None, doc("retrieved passages with influence <= epsilon")] = None
    retrieval_k: Annotated[int | None, doc("the k of the ranking metrics (retrieval.top_k)")] = None
    hit_at_k: Annotated[float | None, doc("a gold document among the top k; null without gold ids")] = None
    recall_at_k: float | None = None
    mrr: float | None = None
    ndcg_at_10: float | None = None
    calls_requested: Annotated[int | None, doc("arms asked for (ablation engine: each distinct prompt is "
                                               "paid once)")] = None
    calls_generated: Annotated[int | None, doc("generations the backend made")] = None
    score_passes: Annotated[int | None, doc("teacher-forced scoring passes (log-prob mode)")] = None
    answer_span: Annotated[str | None, doc("influence.answer_span: the part of the answer scored")] = None
    scored_answer: Annotated[str | None, doc("the scored part of the baseline answer (log-prob modes)")] = None
    scored_tokens: Annotated[int | None, doc("its tokens (null where the backend does not say)")] = None
    logprob_all: Annotated[float | None, doc("log p(scored answer | all passages), nats")] = None
    logprob_none: Annotated[float | None, doc("log p(scored answer | no passages): the closed-book pass")] = None
    context_dependent: Annotated[bool | None, doc("logprob_all - logprob_none >= influence.context_threshold: "
                                                  "false = the model gives this answer without the passages, "
                                                  "so no passage is 'used'")] = None
    noise_scale: Annotated[float | None, doc("interactions: 1.4826 x the median |drop-one loss| of the "
                                             "question's passages but the largest, nats (a small model's jitter)")] = None
    used_bar: Annotated[float | None, doc("interactions: the credit a passage needs to count as used, nats "
                                          "(max(influence.min_effect, influence.noise_z x noise_scale, "
                                          "influence.min_share x the passages' gain)); the passage with the "
                                          "largest credit needs only max(influence.min_effect, influence.lead_z x "
                                          "noise_scale, influence.lead_share x the gain); with influence.drop_z "
                                          "set, a passage whose leave-out loss is >= max(0.75 x the largest, "
                                          "influence.drop_z x noise_scale, influence.drop_floor) is used whatever "
                                          "its credit")] = None
    surrogate_passes: Annotated[int | None, doc("scoring passes of the surrogate's random subsets")] = None
    check_passes: Annotated[int | None, doc("scoring passes of the top-k drop and LDS checks")] = None
    seconds_surrogate: Annotated[float | None, doc("seconds of the surrogate's subsets and fit")] = None
    seconds_checks: Annotated[float | None, doc("seconds of the checks")] = None
    answer_correct: Annotated[bool | None, doc("the normalized answer contains a normalized gold answer as "
                                               "whole words; on an unanswerable question, the model declined; "
                                               "null without gold answers")] = None
    dtype: Annotated[str | None, doc("the dtype the model computed in (float32, bfloat16 ...); null "
                                     "where unknown (a remote endpoint)")] = None
    forward_passes: Annotated[float | None, doc("model forward passes for this question (its share of "
                                                "calls merged with other questions in flight); null: the "
                                                "backend does not count (endpoints, vLLM)")] = None
    host_syncs: Annotated[float | None, doc("times the host waited for a device value (its share)")] = None
    tokens_computed: Annotated[float | None, doc("prompt tokens run through the model, padding included "
                                                 "(its share; decoding steps not included)")] = None
    tokens_minimum: Annotated[float | None, doc("the tokens exact prefix reuse of its calls would run")] = None
    padding_tokens: Annotated[float | None, doc("padding among tokens_computed")] = None
    answerable: Annotated[bool | None, doc("false: unanswerable (the row says so, or it has no gold answer in "
                                           "a set whose other rows have one; ragray.data.answerable); true: it "
                                           "has gold answers; null: the set has none")] = None
    declined: Annotated[bool | None, doc("the answer says it cannot answer (ragray.metrics.declines)")] = None
    decline_margin: Annotated[float | None, doc("unanswerable questions, log-prob modes: mean per-token log-prob "
                                                "of the decline phrase minus that of the answer (> 0: declining "
                                                "was likelier per token)")] = None
    carried_by: Annotated[list[int] | None, doc("interactions, diffuse answers (no passage clears the bar): the "
                                                "retrieval ranks of the fewest passages whose influence sums to "
                                                "at least 0.5 — together they carry the answer")] = None
    edit_calls: Annotated[int | None, doc("influence.edit_test: generations of the edit test (the unedited "
                                          "prompt and one per edit; 0: no passage holds a gold answer or no "
                                          "substitute of its kind); null: not run")] = None
    edit_unedited: Annotated[str | None, doc("influence.edit_test: what the unedited prompt's answer holds: "
                                             "original | substitute | both | neither (passages are labelled "
                                             "only on original)")] = None
    edit_reproduces: Annotated[bool | None, doc("influence.edit_test: the unedited prompt gave the run's answer "
                                                "(the edit prompts are the run's)")] = None
    stage: Annotated[str | None, doc("which stage failed (ragray.metrics.stages): right | declined | retrieval "
                                     "(no gold passage retrieved) | ranking (gold below what the answer leaned "
                                     "on) | generation | memory (the answer does not depend on the passages) | "
                                     "made_up (unanswerable, answered) | no_content | not_judged")] = None
    stage_why: Annotated[str | None, doc("the stage in words, with the ranks it rests on")] = None


@dataclass(frozen=True)
class PassageRow(Row):
    """One retrieved passage of a question, with its influence."""

    table = "passages"

    question_id: str
    passage_id: str | None = None
    doc_id: str | None = None
    retrieval_rank: int | None = None
    retrieval_score: float | None = None
    influence: Annotated[float | None, doc("interactions: its share of the passages' positive credit; logprob: "
                                           "share of the answer lost without it; NaN = that ablation call "
                                           "failed")] = None
    influence_rank: Annotated[float | None, doc("1 = most influential, ties averaged")] = None
    is_gold: bool | None = None
    control_slot: Annotated[int | None, doc("1-based slot in the position control's order")] = None
    influence_control: Annotated[float | None, doc("influence with the passages in that order")] = None
    content_influence: Annotated[float | None, doc("mean of the two orders' influence")] = None
    answer_similarity: Annotated[float | None, doc("cosine of passage and baseline answer (embedding "
                                                   "control)")] = None
    logprob_drop: Annotated[float | None, doc("log p(answer | all) - log p(answer | all but this passage), "
                                              "nats, signed and unclipped (negative: the answer is likelier "
                                              "without it)")] = None
    logprob_drop_per_token: Annotated[float | None, doc("logprob_drop / scored_tokens")] = None
    jsd: Annotated[float | None, doc("Jensen-Shannon divergence of the next-token distributions without vs "
                                     "with the passage, summed over the scored answer (jsd mode), nats")] = None
    surrogate_weight: Annotated[float | None, doc("the surrogate's Lasso weight: log-prob the answer gains "
                                                  "when the passage is kept, nats")] = None
    question_similarity: Annotated[float | None, doc("cosine of passage and question (retriever-like "
                                                     "control)")] = None
    random_control: Annotated[float | None, doc("a seeded uniform score (the random control of the "
                                                "checks)")] = None
    keep_alone_gain: Annotated[float | None, doc("log p(answer | this passage alone) - log p(answer | no "
                                                 "passages), nats: does it suffice on its own (interactions)")] = None
    credit: Annotated[float | None, doc("0.25 x keep_alone_gain + 0.75 x logprob_drop, nats (interactions; "
                                        "influence is its share of the positive credit)")] = None
    group: Annotated[int | None, doc("passages with the same number substitute for (either suffices), share "
                                     "evidence with, or complement (needed together) each other; null: alone "
                                     "(interactions)")] = None
    relation: Annotated[str | None, doc("either suffices | share evidence | needed together: how the group's "
                                        "passages relate")] = None
    used: Annotated[bool | None, doc("the answer used this passage: interactions (the default): its credit "
                                     "clears the question's noise bar (used_bar), or it is the leader (or, with "
                                     "influence.drop_z set, the passage the answer misses most; docs/trust.md); other modes: influence.used_rule over the "
                                     "question's influences; never on an answer that does not depend on the "
                                     "passages; null where not measured")] = None
    edit_moved: Annotated[bool | None, doc("influence.edit_test: the answer moved to the substitute when the gold "
                                           "answer was replaced in this passage alone (true: used, by "
                                           "construction), or stayed though no other passage held it (false); "
                                           "null: not labelled (not holding the answer, a copy held it too, an "
                                           "answer holding both or neither, or the test off)")] = None
    title: str | None = None
    text: str | None = None


@dataclass(frozen=True)
class CallRow(Row):
    """One model call (or, in log-prob mode, one scored arm) of a question."""

    table = "calls"

    question_id: str
    arm: Annotated[str | None, doc("baseline | drop | control_baseline | control_drop")] = None
    removed_passage_ids: tuple[str, ...] | None = None
    answer: Annotated[str | None, doc("null: scored, not generated")] = None
    similarity: Annotated[float | None, doc("to the baseline answer (log-prob mode: share of its "
                                            "probability kept)")] = None
    latency_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tokens: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class SubsetRow(Row):
    """One scored context beyond drop-one: the closed-book pass, a surrogate subset, a held-out
    subset or a top-k removal (the raw data of the surrogate and the checks)."""

    table = "subsets"

    question_id: str
    purpose: Annotated[str | None, doc("closed_book | surrogate | heldout | top_k")] = None
    kept_passage_ids: Annotated[tuple[str, ...] | None, doc("passages kept, in the order shown")] = None
    logprob: Annotated[float | None, doc("log p(scored answer | this context), nats; NaN = failed")] = None


@dataclass(frozen=True)
class CheckRow(Row):
    """How faithful one measure's attribution is on one question (:mod:`ragray.metrics.attribution_checks`)."""

    table = "checks"

    question_id: str
    measure: Annotated[str | None, doc("the passages column scored (or retrieval_rank)")] = None
    control: Annotated[bool | None, doc("a control that costs no model call")] = None
    lds: Annotated[float | None, doc("Spearman of the additive prediction vs the actual log-prob over the "
                                     "held-out subsets; null = the answer's log-prob did not vary")] = None
    n_subsets: Annotated[int | None, doc("held-out subsets measured")] = None
    top_k: Annotated[tuple[int, ...] | None, doc("k of each top-k drop")] = None
    top_k_drop: Annotated[tuple[float, ...] | None, doc("log p(y | all) - log p(y | all but the measure's "
                                                         "top k), nats, per k")] = None


@dataclass(frozen=True)
class InfluenceRecord(QuestionRecord):
    """One finished question of an influence run: what ``progress.jsonl`` holds per line."""

    parts = {"passages": PassageRow, "calls": CallRow, "subsets": SubsetRow, "checks": CheckRow}
    optional_parts = frozenset({"subsets", "checks"})  # log-prob mode / influence.check_subsets
    question_type = QuestionRow

    question: QuestionRow
    passages: tuple[PassageRow, ...]
    calls: tuple[CallRow, ...]
    subsets: tuple[SubsetRow, ...] = ()
    checks: tuple[CheckRow, ...] = ()
    model: str | None = None
    worker: dict[str, Any] | None = None  # where it ran (Ray executor): node id and pid
