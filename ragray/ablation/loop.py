"""The influence loop for one question: a leave-one-out plan on the ablation engine.

The baseline and the k drop-one arms (:mod:`ragray.ablation.plan`) go through one
:class:`~ragray.ablation.engine.CallBook`, which sends them to the generator in ONE batched call,
baseline first, so backends can share the prompt prefixes (vLLM's prefix cache, the transformers
backend's KV reuse), pays for each distinct prompt once and counts the cost (``calls_requested``,
``calls_generated``, ``score_passes``); the mode's :class:`~ragray.ablation.engine.Scorer`
measures the arms.
A failed baseline marks the question ``error``; a failed ablation leaves that passage's influence
NaN (unmeasured). In ``influence.mode: logprob_share`` only the baseline is generated: each ablation is
one teacher-forced pass scoring the baseline answer, and influence = 1 − exp(min(0, Δ log p)),
the share of the answer's probability lost without the passage (SPEC §10). In
``influence.mode: interactions`` the same call also scores the contexts of the measure's design
(the empty context, each passage kept alone, random subsets up to ``influence.budget``) and
:mod:`ragray.attribution.interactions` fits them: influence, ``used``, ``group``. ``auto`` (the
default) is interactions where the backend can score (:meth:`Generator.scoring_problem`), loo
(regenerated answers) where it cannot; each question records the mode it ran in and why. Backend exceptions are recorded
on the question and the run goes on.

With ``influence.position_control`` (SPEC §11) the same drop-one also runs with the passages in a
second order (reversed or shuffled), in the same backend call, so every passage gets an
influence per order, their mean (content influence) and the question a position sensitivity and
``position_driven`` flag (:mod:`ragray.metrics.position`). With embedding metrics on, each
passage also gets its cosine with the baseline answer: the validity panel's embedding control.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any

from ragray.ablation.columns import (
    QuestionEvidence,
    answer_columns,
    call_row,
    drop_influence,
    exact_match_or_none,
    used_passages,
)
from ragray.ablation.checks import heldout_subsets, run_checks
from ragray.ablation.engine import SCORERS, CallBook, CallCost, Extra, Measured
from ragray.ablation.plan import Arm, control_plan, drop_one_plan
from ragray.ablation.span import answer_span
from ragray.attribution.base import Evidence, Fitted, Measure, Scored, Scores, measure_for_mode, measures, planners
from ragray.attribution.controls import random_scores
from ragray.attribution.subsets import Subset
from ragray.config import InfluenceConfig
from ragray.data.answerable import is_unanswerable
from ragray.errors import BackendError
from ragray.generation import Generation, Generator
from ragray.generation.base import ChatPrompt
from ragray.generation.engine_counts import engine_columns
from ragray.generation.prompts import DECLINE_PHRASE, PromptTemplate
from ragray.metrics.declines import decline_margin
from ragray.metrics.influence import FLAGS, InfluenceResult, analyze_influence, error_result
from ragray.metrics.position import PositionResult, content_influence, control_order, position_analysis
from ragray.metrics.quality import QualityItem, QualityScorer
from ragray.metrics.retrieval import doc_ranking, ranking_metrics
from ragray.metrics.similarity import Similarity
from ragray.metrics.stages import stage_of
from ragray.progress import calls_planned
from ragray.retrieval.stage import QuestionHits
from ragray.rows.influence import CallRow, InfluenceRecord, PassageRow, QuestionRow, SubsetRow
from ragray.types import Passage

__all__ = ["InfluenceLoop", "RUN_QUALITY_KEYS", "resolve_mode"]

#: answer-quality columns of the questions table (:mod:`ragray.metrics.quality`)
RUN_QUALITY_KEYS = (
    "f1", "recall_at_k_cosine", "sim_answer_gold", "grounding", "hallucination", "relevance",
    "label_noise_ratio", "label_coverage", "cost_usd", "causal_noise_ratio",
)

log = logging.getLogger(__name__)


def resolve_mode(mode: str, generator: Generator) -> tuple[str, str | None]:
    """The mode a loop runs in, and why when ``auto`` could not have log-prob: ``auto`` is
    ``interactions`` where the backend can score log-probabilities, ``loo`` (regenerated answers) otherwise.

    ``interactions`` (:mod:`ragray.attribution.interactions`) is the only measure that sees passages
    which substitute for each other and tells use from a small model's jitter; its held-out LDS on the
    evidence benchmark beats drop-one and the surrogate at fewer passes than the surrogate
    (``benchmarks/results/shared_evidence.json``, docs/trust.md)."""
    if mode != "auto":
        return mode, None
    problem = generator.scoring_problem()
    if problem is None:
        return "interactions", None
    log.warning("influence.mode auto: %s; measuring influence by generation instead", problem)
    return "loo", f"auto chose loo (regenerated answers): {problem}"


@dataclass(frozen=True)
class _Calls:
    """What the backend returned for one question: generations per order (log-prob mode: the
    baseline only), each arm's similarity to its order's baseline (log-prob mode: the share of
    the baseline's probability it keeps; ``scored``), the error that stopped the question, and
    what it cost."""

    gens: list[list[Generation]]
    sims: list[list[float]]
    scored: bool
    error: str | None
    cost: CallCost
    book: CallBook | None = None
    measured: Measured | None = None
    #: the calls the question was planned to cost (the progress bar's; corrected at its end)
    planned: int = 0


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
        retrieval_k: int | None = None,
    ) -> None:
        """``retrieval_k``: the k of each question's ranking metrics (default: its number of hits)."""
        self.retrieval_k = retrieval_k
        self.generator = generator
        self.template = template
        self.config = config
        self.system_prompt = system_prompt
        self.quality = quality
        self.model = model
        self.mode, self.mode_note = resolve_mode(config.mode, generator)
        self.measure: Measure = measure_for_mode(self.mode)(config)
        self.scorer = SCORERS.get(self.measure.scorer)(similarity, span=answer_span(config.answer_span))
        #: measures that score contexts of their own: the run's, and those the config asks for beside it
        self.planners = planners(self.measure, config)

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

    def _ranking(self, qh: QuestionHits) -> dict[str, Any]:
        """The retrieval's ranking metrics against the gold ids (null without them), recorded so
        a sweep trial reads them rather than recomputing them from the tables."""
        k = self.retrieval_k or len(qh.hits)
        ranking = ranking_metrics(doc_ranking(qh.hits), qh.question.gold_passage_ids, ks=(k, 10))
        return {"retrieval_k": k} | ({} if ranking is None else {
            "hit_at_k": ranking[f"hit_at_{k}"], "recall_at_k": ranking[f"recall_at_{k}"],
            "mrr": ranking["mrr"], "ndcg_at_10": ranking["ndcg_at_10"]})

    def _prompts(self, qh: QuestionHits, arms: list[Arm]) -> list[ChatPrompt]:
        return [self.template.build(qh.question.question, a.passages, self.system_prompt) for a in arms]

    @property
    def _closed_book(self) -> bool:
        """Whether each question scores its answer with no passages (the closed-book pass)."""
        return bool(self.config.closed_book) or self.measure.needs_closed_book

    def _planned(self, qh: QuestionHits) -> list[tuple[str, Subset]]:
        """``(purpose, subset)`` of every context the run's measures score beyond the drop-one arms."""
        k = len(qh.hits)
        if k < 2 or self.measure.scorer == "generate":
            return []
        return [(m.purpose, s) for m in self.planners for s in m.subsets(k, qh.question.id)]

    def _build(self, qh: QuestionHits, passages: list[Passage]) -> ChatPrompt:
        return self.template.build(qh.question.question, passages, self.system_prompt)

    def _call(self, qh: QuestionHits, orders: list[list[Arm]], planned: list[tuple[str, Subset]]) -> _Calls:
        """Every order's arms through one :class:`~ragray.ablation.engine.CallBook` (baseline of
        each order first in its list), measured by this run's scorer: loo mode compares each
        arm's answer to its order's baseline answer; log-prob mode scores the order's baseline
        answer under each arm (NaN where that baseline failed)."""
        prompts = [self._prompts(qh, arms) for arms in orders]
        passages = [h.passage for h in qh.hits]
        # every context the question scores besides the arms, in the arms' backend call (one
        # engine round, not one each): the planned subsets, the closed book, declining
        extra: list[Extra] = [(self._build(qh, [passages[i] for i in s.shown]), None) for _, s in planned]
        if self._closed_book:
            extra.append((self._build(qh, []), None))
        if is_unanswerable(qh.question):
            extra.append((prompts[0][0], DECLINE_PHRASE))
        # the progress bar's plan: every distinct call, and the held-out subsets of the checks
        expected = self.scorer.planned_calls(prompts, extra)
        if not self.scorer.generates_arms and len(qh.hits) >= 2:
            expected += self.config.check_subsets
        calls_planned(expected)
        book = CallBook(self.generator)
        book.request(sum(map(len, prompts)))
        try:
            m = self.scorer.measure(book, prompts, extra, golds=qh.question.answers)
        except BackendError as exc:
            log.warning("question %s failed: %s", qh.question.id, exc)
            return _Calls([], [[float("nan")] * len(arms) for arms in orders], False, str(exc), book.cost,
                          book, planned=expected)
        return _Calls(m.gens, m.similarities, m.scored, None, book.cost, book, m, planned=expected)

    def _position(
        self, order: list[int], forward: list[float], control_sims: list[float]
    ) -> tuple[list[float], PositionResult | None]:
        """The control order's influence per passage (retrieval order) and the position analysis."""
        by_slot = drop_influence(control_sims)
        control = [float("nan")] * len(order)
        for slot, i in enumerate(order):
            control[i] = by_slot[slot]
        return control, position_analysis(forward, control, order, self.config.position_threshold)

    def _evidence(self, qh: QuestionHits, calls: _Calls, embeddings: dict[str, list[float] | None],
                  planned: list[tuple[str, Subset]]) -> QuestionEvidence:
        """Raw log-prob changes, the closed-book pass, the contexts the measures planned, the
        interaction fit, the surrogate and the checks (log-prob modes; an empty :class:`QuestionEvidence` in
        loo mode or after an error). Every scored context is kept as a ``subsets`` row."""
        m, book = calls.measured, calls.book
        if m is None or book is None or not m.scored or m.logprobs is None or m.scored_answers is None:
            return QuestionEvidence()
        q, hits = qh.question, qh.hits
        passages = [h.passage for h in hits]
        k = len(passages)
        answer, lps = m.scored_answers[0], m.logprobs[0]
        build = lambda ps: self._build(qh, list(ps))  # noqa: E731
        lp_all = lps[0]
        drops = [lp_all - lp for lp in lps[1:]]
        full_prompt = build(passages)
        n_tokens = self.generator.answer_length(full_prompt, answer)
        ev = QuestionEvidence(answer=answer, tokens=n_tokens, logprob_all=lp_all, drops=drops,
                       jsd=m.divergences[0][1:] if m.divergences is not None else None)
        if is_unanswerable(q):  # how likely declining was, beside the answer the model gave
            (lp_decline,) = book.logprobs([full_prompt], [DECLINE_PHRASE])
            ev.decline_margin = decline_margin(lp_decline, self.generator.answer_length(full_prompt, DECLINE_PHRASE),
                                               lp_all, n_tokens)
        full = frozenset(range(k))
        scored = [Scored(full, lp_all, "full"), *(Scored(full - {i}, lp_all - d, "drop") for i, d in enumerate(drops))]
        if self._closed_book:
            (lp_none,) = book.logprobs([build(())], [answer])
            ev.logprob_none = lp_none
            ev.context_dependent = (None if math.isnan(lp_none) or math.isnan(lp_all)
                                    else bool(lp_all - lp_none >= self.config.context_threshold))
            ev.subsets.append(SubsetRow(q.id, "closed_book", (), lp_none))
            scored.append(Scored(frozenset(), lp_none, "closed_book"))
        planned_lps = book.logprobs([build([passages[i] for i in s.shown]) for _, s in planned], [answer] * len(planned))
        known = {o.kept for o in scored}
        drawn = {m.purpose for m in self.planners if m.random_draws}
        for (purpose, sub), lp in zip(planned, planned_lps):
            scored.append(Scored(sub.kept, lp, purpose))
            if sub.kept not in known or purpose in drawn:  # a random draw's row each time it is drawn
                ev.subsets.append(SubsetRow(q.id, purpose, tuple(passages[i].id for i in sub.shown), lp))
        checking = bool(self.config.check_subsets or self.config.check_top_k) and k >= 2
        exclude = {sub.kept for _, sub in planned}
        reserved = frozenset(s.kept for s in heldout_subsets(k, self.config, q.id, exclude)) if checking and \
            self.config.check_subsets else frozenset()
        side = {"jsd": ev.jsd, "retrieval_rank": [(k + 1 - h.rank) / k for h in hits],
                "retrieval_score": [float(h.score) for h in hits] if all(h.score is not None for h in hits) else None,
                **embeddings}
        if checking:
            ev.random = side["random_control"] = random_scores(k, self.config.check_seed, q.id)
        evidence = Evidence(k, tuple(scored), side=side, reserved=reserved)
        fitted = self._fit(evidence, ev, planned)
        if checking:
            # every measure with a result for this question: those fitted on contexts of their own,
            # and those that read only what every question scores (the drop-one contexts, side inputs)
            found = [fitted.get(m.name) if m.own_contexts else m(self.config).fit(evidence) for m in measures()
                     if m.own_contexts or m(self.config).available(evidence)]
            scores = [Scores(f.column, f.scores, f.control) for f in found if f is not None]
            checks, rows, ev.check_passes, ev.seconds_checks = run_checks(
                book, build, passages, q.id, answer, lp_all, scores, self.config, exclude=exclude,
                models={f.column: f.predict for f in found if f is not None and f.predict is not None})
            ev.checks = list(checks)
            ev.subsets.extend(rows)
        return ev

    def _fit(self, evidence: Evidence, ev: QuestionEvidence, planned: list[tuple[str, Subset]]) -> dict[str, Fitted]:
        """The planners' results by measure name, kept on ``ev``: the run's model (its used marks
        and groups), each measure's column, the passes and seconds it took."""
        fitted: dict[str, Fitted] = {}
        for measure in self.planners:
            start = time.perf_counter()
            found = measure.fit(evidence)
            if found is None:
                continue
            fitted[measure.name] = found
            if measure is self.measure:
                ev.result, ev.fit = found, found.model
            if found.predict is None:  # a column of the passages table (a model's are its own columns)
                ev.columns[found.column] = found.scores
            ev.passes[measure.name] = sum(1 for p, _ in planned if p == measure.purpose)
            ev.seconds[measure.name] = time.perf_counter() - start
        return fitted

    def run(self, qh: QuestionHits) -> InfluenceRecord:
        q, hits = qh.question, qh.hits
        passages = [h.passage for h in hits]
        orders = [drop_one_plan(passages)]
        order = None
        if self.config.position_control != "none" and len(hits) >= 2:
            order = control_order(len(hits), self.config.position_control, self.config.position_seed, q.id)
            orders.append(control_plan([passages[i] for i in order]))
        start = time.perf_counter()
        counted = self.generator.engine_counts()
        planned = self._planned(qh)
        calls = self._call(qh, orders, planned)
        baseline = calls.gens[0][0] if calls.gens else None
        error = calls.error
        if baseline is None or not baseline.ok:
            error = error or (baseline.error if baseline else "no generation")
        sims = [[float("nan")] * len(arms) for arms in orders] if error is not None else calls.sims
        embeddings: dict[str, list[float] | None] = {"answer_similarity": None, "question_similarity": None}
        if error is None and self.quality is not None:
            texts = [h.passage.text for h in hits]
            embeddings = {"answer_similarity": self.quality.answer_passage_similarity(baseline.text, texts),
                          "question_similarity": self.quality.question_passage_similarity(q.question, texts)}
        ev = self._evidence(qh, calls, embeddings, planned) if error is None else QuestionEvidence()
        drop_one, infl, result = self._influence(qh, ev, sims[0], error)
        control: list[float | None] = [None] * len(hits)
        content: list[float | None] = [None] * len(hits)
        pos: PositionResult | None = None
        if order is not None and error is None:  # the position control compares drop-one in both orders
            forward = infl if self.measure.influence_in_both_orders else drop_one
            control, pos = self._position(order, forward, sims[1])
            content = content_influence(infl, control)
        flags = list(result.flags)
        if pos is not None and pos.position_driven:
            flags = sorted({*flags, "position_driven"}, key=FLAGS.index)
        gens = [g for gs in calls.gens for g in gs]
        n_calls, n_control = _call_counts(calls, orders, planned, declined=ev.decline_margin is not None)
        question = {
            "question_id": q.id,
            "question": q.question,
            "gold_answers": list(q.answers),
            "baseline_answer": baseline.text if baseline is not None else "",
            "baseline_em": exact_match_or_none(baseline.text, q.answers) if baseline is not None and baseline.ok else None,
            "n_passages": len(hits),
            "influence_mode": self.mode,
            "influence_mode_note": self.mode_note,
            **result.columns(),
            "flags": flags,
            "position_control": self.config.position_control if order is not None else "none",
            "position_sensitivity": pos.position_sensitivity if pos else None,
            "position_driven": pos.position_driven if pos else None,
            "n_calls": n_calls,
            "n_control_calls": n_control,
            "n_failed_calls": sum(1 for g in gens if not g.ok),
            "calls_requested": calls.cost.requested,
            "calls_generated": calls.cost.generated,
            "score_passes": calls.cost.score_passes,
            "error": error,
            "seconds": time.perf_counter() - start,
            **self._ranking(qh),
            **ev.question_columns(self.config.answer_span, [h.rank for h in hits]),
            **answer_columns(q, baseline.text if baseline is not None and baseline.ok else None),
            "dtype": self.generator.precision,
            **engine_columns(self.generator.engine_counts(), counted),
        }
        if error is None:
            question.update(self._quality(qh, baseline, result.influence))
        used = (used_passages(result.influence, result.state, ev.context_dependent, self.config) if ev.fit is None
                else [None if result.state == "error" else bool(u) and result.state != "context_ignored"
                      for u in ev.fit.used])
        passage_rows = _passage_rows(qh, result, used, ev, embeddings, order, control, content)
        stage = stage_of(question, [{"retrieval_rank": r.retrieval_rank, "is_gold": r.is_gold, "used": r.used}
                                    for r in passage_rows])
        question |= {"stage": stage.stage, "stage_why": stage.why}
        calls_planned((calls.book.calls if calls.book is not None else 0) - calls.planned)  # what it did
        return InfluenceRecord(QuestionRow.from_dict(question), passage_rows, _call_rows(q.id, orders, calls, sims),
                               tuple(ev.subsets), tuple(ev.checks))

    def _influence(self, qh: QuestionHits, ev: QuestionEvidence, sims: list[float],
                   error: str | None) -> tuple[list[float], list[float], InfluenceResult]:
        """Drop-one's influence, the measure's (the one users see) and its analysis."""
        q, hits = qh.question, qh.hits
        drop_one = drop_influence(sims)
        infl = drop_one
        fit = ev.fit
        if error is None and self.measure.own_contexts:  # the influence its own result gives
            infl = self.measure.influence(ev.result, len(hits))
        ranks = [h.rank for h in hits]
        if error is not None:
            result: InfluenceResult = error_result(len(hits))
        elif fit is not None:
            result = analyze_influence(ranks, infl, self.config, used=fit.used, group=fit.group,
                                       context_dependent=fit.context_dependent, judged=not is_unanswerable(q))
        else:
            result = analyze_influence(ranks, infl, self.config, context_dependent=ev.context_dependent,
                                       judged=not is_unanswerable(q))
        return drop_one, infl, result


def _passage_rows(qh: QuestionHits, result: InfluenceResult, used: list[bool | None], ev: QuestionEvidence,
                  embeddings: dict[str, list[float] | None], order: list[int] | None,
                  control: list[float | None], content: list[float | None]) -> tuple[PassageRow, ...]:
    """One row per retrieved passage of the question."""
    gold = set(qh.question.gold_passage_ids)
    answer_sim, question_sim = embeddings["answer_similarity"], embeddings["question_similarity"]
    return tuple(
        PassageRow(
            question_id=qh.question.id,
            passage_id=h.passage.id,
            doc_id=h.passage.doc_id,
            retrieval_rank=h.rank,
            retrieval_score=h.score,
            influence=result.influence[i],
            influence_rank=result.influence_rank[i],
            is_gold=h.passage.doc_id in gold,
            control_slot=order.index(i) + 1 if order is not None else None,
            influence_control=control[i],
            content_influence=content[i],
            answer_similarity=answer_sim[i] if answer_sim is not None else None,
            **ev.passage_columns(i),
            **ev.fit_columns(i),
            question_similarity=question_sim[i] if question_sim is not None else None,
            used=used[i],
            title=h.passage.title,
            text=h.passage.text,
        )
        for i, h in enumerate(qh.hits)
    )


def _call_rows(question_id: str, orders: list[list[Arm]], calls: _Calls,
               sims: list[list[float]]) -> tuple[CallRow, ...]:
    """One row per arm of each order: its answer (loo mode) or its score."""
    rows = []
    for o, arms in enumerate(orders):
        gens_o = calls.gens[o] if o < len(calls.gens) else []
        n_rows = len(arms) if calls.scored else len(gens_o)
        rows += [call_row(question_id, arms[j], gens_o[j] if j < len(gens_o) else None, sims[o][j])
                 for j in range(n_rows)]
    return tuple(rows)


def _call_counts(calls: _Calls, orders: list[list[Arm]], planned: list[tuple[str, Subset]], *,
                 declined: bool) -> tuple[int, int]:
    """Model calls of the question and of its position-control order. Generate mode: every
    generation. Log-prob mode: every arm is scored (the first order's baseline counted once as
    generated-and-scored, as before), plus each further order's generated baseline, plus the
    design's contexts beyond the drop-one arms (closed book, kept alone, random). ``declined``: the
    decline's scoring pass ran (one call more)."""
    if not calls.scored:
        n, control = sum(map(len, calls.gens)), sum(len(gs) for gs in calls.gens[1:])
    else:
        extra = len(calls.gens) - 1  # generated baselines of the control orders
        n, control = sum(map(len, orders)) + extra, sum(map(len, orders[1:])) + extra
        k = len(orders[0]) - 1  # the passages: the first order is the baseline and one arm per passage
        arms = {frozenset(range(k)) - {i} for i in range(k)} | {frozenset(range(k))}
        n += len({s.kept for p, s in planned if p == "design"} - arms)
    return n + int(declined), control
