"""The influence loop for one question: prompts → one batched generate call → influence.

All k + 1 calls of a question go to the generator in ONE ``generate`` call, baseline first, so
backends can share the prompt prefixes (vLLM's prefix cache, the transformers backend's KV reuse).
A failed baseline marks the question ``error``; a failed ablation leaves that passage's influence
NaN (unmeasured). In ``influence.mode: logprob`` only the baseline is generated: each ablation is
one teacher-forced pass scoring the baseline answer, and influence = 1 − exp(min(0, Δ log p)),
the share of the answer's probability lost without the passage (SPEC §10). Backend exceptions are recorded on the question and the run goes on.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any

from ragray.ablation.plan import Arm, drop_one_plan
from ragray.config import InfluenceConfig
from ragray.errors import BackendError
from ragray.generation import Generation, Generator
from ragray.generation.prompts import PromptTemplate
from ragray.metrics.influence import InfluenceResult, analyze_influence, error_result
from ragray.metrics.quality import QualityItem, QualityScorer
from ragray.metrics.retrieval import doc_ranking
from ragray.metrics.similarity import Similarity, normalize_answer
from ragray.retrieval.stage import QuestionHits

__all__ = ["QuestionOutcome", "InfluenceLoop", "RUN_QUALITY_KEYS"]

#: answer-quality columns of the questions table (:mod:`ragray.metrics.quality`)
RUN_QUALITY_KEYS = (
    "f1", "recall_at_k_cosine", "sim_answer_gold", "grounding", "hallucination", "relevance",
    "label_noise_ratio", "label_coverage", "cost_usd", "causal_noise_ratio",
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class QuestionOutcome:
    """Rows of the three result tables for one question (plain dicts, ready for Parquet)."""

    question: dict[str, Any]
    passages: list[dict[str, Any]]
    calls: list[dict[str, Any]]

    def as_record(self) -> dict[str, Any]:
        return {"question": self.question, "passages": self.passages, "calls": self.calls}


def _exact_match(answer: str, gold: tuple[str, ...]) -> float | None:
    if not gold:
        return None
    return float(any(normalize_answer(answer) == normalize_answer(g) for g in gold))


def _call_row(question_id: str, arm: Arm, g: Generation | None, similarity: float) -> dict[str, Any]:
    """One ``calls`` row; ``g`` is None for an arm that was scored (log-prob mode), not generated."""
    return {
        "question_id": question_id,
        "arm": arm.name,
        "removed_passage_ids": list(arm.removed),
        "answer": g.text if g else None,
        "similarity": similarity,
        "latency_s": g.latency_s if g else None,
        "prompt_tokens": g.prompt_tokens if g else None,
        "completion_tokens": g.completion_tokens if g else None,
        "tokens": g.prompt_tokens + g.completion_tokens if g else None,
        "error": g.error if g else None,
    }


class InfluenceLoop:
    """Runs drop-one ablation for questions with their retrieved hits."""

    def __init__(
        self,
        generator: Generator,
        template: PromptTemplate,
        similarity: Similarity,
        config: InfluenceConfig,
        system_prompt: str | None = None,
        quality: QualityScorer | None = None,
        model: str | None = None,
    ) -> None:
        self.generator = generator
        self.template = template
        self.similarity = similarity
        self.config = config
        self.system_prompt = system_prompt
        self.quality = quality
        self.model = model

    def _quality(self, qh: QuestionHits, baseline: Generation, influence: list[float]) -> dict[str, Any]:
        """Answer quality of the baseline, label-based and causal noise (SPEC §6)."""
        q, hits = qh.question, qh.hits
        measured = [v for v in influence if not math.isnan(v)]
        causal = sum(v <= self.config.epsilon for v in measured) / len(measured) if measured else None
        if self.quality is None:
            return {"causal_noise_ratio": causal}
        item = QualityItem(
            question=q.question, answer=baseline.text, contexts=tuple(h.passage.text for h in hits),
            golds=q.answers, doc_ids=tuple(doc_ranking(hits)), gold_ids=q.gold_passage_ids,
            latency_s=baseline.latency_s, prompt_tokens=baseline.prompt_tokens,
            completion_tokens=baseline.completion_tokens, model=self.model,
        )
        (row,) = self.quality.score([item])
        return {k: row[k] for k in RUN_QUALITY_KEYS if k in row} | {"causal_noise_ratio": causal}

    def _call(
        self, qh: QuestionHits, arms: list[Arm]
    ) -> tuple[list[Generation], list[float] | None, str | None]:
        """Generations, and in log-prob mode the share of the baseline answer's probability each
        arm keeps (None in generate mode: similarities are computed from the answers)."""
        prompts = [self.template.build(qh.question.question, a.passages, self.system_prompt) for a in arms]
        try:
            if self.config.mode == "generate":
                return self.generator.generate(prompts), None, None
            (baseline,) = self.generator.generate(prompts[:1])
            if not baseline.ok:
                return [baseline], None, None
            lps = self.generator.score(prompts, [baseline.text] * len(prompts))
            return [baseline], [1.0] + [math.exp(min(0.0, lp - lps[0])) for lp in lps[1:]], None
        except BackendError as exc:
            log.warning("question %s failed: %s", qh.question.id, exc)
            return [], None, str(exc)

    def run(self, qh: QuestionHits) -> QuestionOutcome:
        q, hits = qh.question, qh.hits
        arms = drop_one_plan([h.passage for h in hits])
        start = time.perf_counter()
        gens, retained, error = self._call(qh, arms)
        baseline = gens[0] if gens else None
        if baseline is None or not baseline.ok:
            error = error or (baseline.error if baseline else "no generation")
        if error is not None:
            sims = [float("nan")] * len(arms)
        elif retained is not None:
            sims = retained
        else:
            sims = [self.similarity(baseline.text, g.text) if g.ok else float("nan") for g in gens]
        infl = [1.0 - s if not math.isnan(s) else float("nan") for s in sims[1:]]
        result: InfluenceResult = (
            error_result(len(hits)) if error is not None
            else analyze_influence([h.rank for h in hits], infl, self.config)
        )
        gold = set(q.gold_passage_ids)
        question = {
            "question_id": q.id,
            "question": q.question,
            "gold_answers": list(q.answers),
            "baseline_answer": baseline.text if baseline is not None else "",
            "baseline_em": _exact_match(baseline.text, q.answers) if baseline is not None and baseline.ok else None,
            "n_passages": len(hits),
            "state": result.state,
            "spearman_rho": result.spearman_rho,
            "dominance": result.dominance,
            "divergent": result.divergent,
            "flags": list(result.flags),
            "n_calls": len(gens) if self.config.mode == "generate" else len(arms) if gens else 0,
            "n_failed_calls": sum(1 for g in gens if not g.ok),
            "error": error,
            "seconds": time.perf_counter() - start,
        }
        if error is None:
            question.update(self._quality(qh, baseline, result.influence))
        passages = [
            {
                "question_id": q.id,
                "passage_id": h.passage.id,
                "doc_id": h.passage.doc_id,
                "retrieval_rank": h.rank,
                "retrieval_score": h.score,
                "influence": result.influence[i],
                "influence_rank": result.influence_rank[i],
                "is_gold": h.passage.doc_id in gold,
            }
            for i, h in enumerate(hits)
        ]
        n_rows = len(arms) if self.config.mode == "logprob" and error is None else len(gens)
        calls = [_call_row(q.id, arms[j], gens[j] if j < len(gens) else None, sims[j]) for j in range(n_rows)]
        return QuestionOutcome(question, passages, calls)


