"""The faithfulness experiment of one question: explain, delete, compare, diagnose.

1. **Explain** the retrieved context at ``faithfulness.level``. Flat: every unit of that level.
   Hierarchical: passages first, then only the sentences of the ``hierarchical_top`` passages
   (then only the tokens of the top sentences); coarse stages rank with leave-one-out (or log-prob
   when that is the explainer), so a sentence-level explanation of 10 × 8 sentences costs
   10 + 2 × 8 calls instead of 80.
2. **Phase 1** (one generate call): the baseline (DEL_NONE), the controls that do not depend on
   the explanation (DEL_Q, closed book), leave-one-out per unit and every DEL_RANDOM draw.
   Log-prob importance scores the baseline answer under the same leave-one-out contexts; the
   surrogate is fitted on the random draws (the ranking it is tested with at each K, on the other
   K's draws only). The explainer's ranking gives the buckets.
3. **Phase 2** (one generate call): DEL_MOST / DEL_LEAST per K, the cumulative curves, and the
   position controls (the most influential passage moved to the middle / end).
4. Every answer is compared with the baseline by every measure; each K gets its case
   (:mod:`ragray.faithfulness.cases`).

A backend exception or a failed baseline marks the question ``error`` and the run goes on; a
failed ablation call scores NaN and is left out of its statistics.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from ragray.config import FaithfulnessConfig
from ragray.config.renamed import with_old_columns
from ragray.errors import BackendError
from ragray.faithfulness.answers import AnswerBook, SimilarityBook
from ragray.faithfulness.arms import (
    CLOSED_BOOK,
    CUM_LEAST,
    CUM_MOST,
    CUMULATIVE,
    DEL_LEAST,
    DEL_MOST,
    DEL_NONE,
    DEL_Q,
    DEL_RANDOM,
    LOO,
    Ablation,
    question_rng,
    random_draws,
    resolve_k,
)
from ragray.attribution.base import Changed, Evidence, Scored
from ragray.faithfulness.attribution import attribution_order, explainers, fitted_on_random_arm
from ragray.faithfulness.cases import decide_case
from ragray.faithfulness.verdict import circular
from ragray.faithfulness.importance import (
    buckets,
    normalize,
    rank_units,
)
from ragray.faithfulness.units import Context, Level, units_in
from ragray.generation import Generator
from ragray.generation.prompts import PromptTemplate
from ragray.metrics.similarity import Similarity
from ragray.retrieval.stage import QuestionHits
from ragray.rows.faithfulness import FaithfulnessRecord
from ragray.types import Passage

__all__ = ["FaithfulnessExperiment", "STAGE_LEVELS"]

log = logging.getLogger(__name__)

#: ``faithfulness.level`` -> the levels a hierarchical explanation goes through, coarse to fine
STAGE_LEVELS: dict[str, tuple[Level, ...]] = {
    "passage": ("passage",),
    "sentence": ("passage", "sentence"),
    "token": ("passage", "sentence", "token"),
}


class _QuestionFailed(Exception):
    """The question cannot be measured (failed baseline, too many units)."""


@dataclass(frozen=True)
class FaithfulnessOutcome:
    """Rows of the five result tables for one question."""

    question: dict[str, Any]
    units: list[dict[str, Any]] = field(default_factory=list)
    arms: list[dict[str, Any]] = field(default_factory=list)
    cases: list[dict[str, Any]] = field(default_factory=list)
    curves: list[dict[str, Any]] = field(default_factory=list)

    def record(self) -> FaithfulnessRecord:
        """The typed record of these rows (a key a row class does not know is an error)."""
        return FaithfulnessRecord.from_dict({"question": self.question, "units": self.units, "arms": self.arms,
                                             "cases": self.cases, "curves": self.curves})


@dataclass
class _Stage:
    depth: int
    ctx: Context
    order: list[int]
    importance: dict[str, list[float]]  # normalized, per attribution method
    raw: dict[str, list[float]]  # before normalization (1 − sim, nats, surrogate weights)
    explainer: str
    ablations: list[Ablation]
    #: K label -> the ranking its DEL_MOST / DEL_LEAST use when it is not ``order``: an explainer
    #: fitted on the random arm, fitted again without that K's draws (None: no other K's draws to
    #: fit on, so the K's test is by construction)
    by_k: dict[str, list[int] | None] = field(default_factory=dict)


def _move(n_passages: int, j: int, where: str) -> tuple[int, ...]:
    rest = [i for i in range(n_passages) if i != j]
    at = {"start": 0, "middle": (n_passages - 1) // 2, "end": n_passages - 1}[where]
    return tuple(rest[:at] + [j] + rest[at:])


def _agreement(a: Sequence[float], b: Sequence[float]) -> tuple[float | None, float | None]:
    """Spearman ρ of two attributions and whether their top units agree (None if undefined)."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    ok = ~(np.isnan(x) | np.isnan(y))
    x, y = x[ok], y[ok]
    if len(x) < 2:
        return None, None
    rho = None
    if np.ptp(x) > 0 and np.ptp(y) > 0:
        rho = float(stats.spearmanr(x, y).statistic)
    top = float(int(np.argmax(x)) == int(np.argmax(y))) if x.max() > 0 and y.max() > 0 else None
    return rho, top


def _auc(points: Sequence[tuple[float, float]]) -> float | None:
    pts = [(f, s) for f, s in points if not math.isnan(s)]
    if len(pts) < 2:
        return None
    f, s = zip(*sorted(pts))
    return float(np.trapezoid(s, f) / (f[-1] - f[0]))


class FaithfulnessExperiment:
    """Runs the experiment of :mod:`ragray.faithfulness.experiment` for questions with hits."""

    def __init__(
        self,
        generator: Generator,
        template: PromptTemplate,
        measures: Mapping[str, Similarity],
        config: FaithfulnessConfig,
        *,
        seed: int = 0,
        system_prompt: str | None = None,
        book: type[AnswerBook] = AnswerBook,
    ) -> None:
        """``book``: how answers are obtained and shared (the benchmark swaps in a naive one)."""
        missing = {config.similarity, *config.measures} - set(measures)
        if missing:
            raise ValueError(f"measures missing for {sorted(missing)}")
        self.generator = generator
        self.template = template
        self.measures = dict(measures)
        self.config = config
        self.seed = seed
        self.system_prompt = system_prompt
        self.book = book

    # -- one question ----------------------------------------------------------------------

    def run(self, qh: QuestionHits) -> FaithfulnessRecord:
        q = qh.question
        start = time.perf_counter()
        book = self.book(self.generator, self.template, q.question, self.system_prompt, self.config.mode)
        passages = tuple(h.passage for h in qh.hits)
        row: dict[str, Any] = {
            "question_id": q.id, "question": q.question, "gold_answers": list(q.answers),
            "level": self.config.level, "hierarchical": self.config.hierarchical,
            "explainer": self.config.explainer, "mode": self.config.mode, "n_passages": len(passages),
            "n_units_flat": len(Context.at_level(passages, self.config.level)),
        }
        try:
            outcome = self._run(q.id, passages, book, row)
        except (BackendError, _QuestionFailed) as exc:
            log.warning("question %s failed: %s", q.id, exc)
            row["error"] = str(exc)
            outcome = FaithfulnessOutcome(row)
        row.update(calls_requested=book.requested, calls_generated=book.generated,
                   score_passes=book.score_passes, seconds=time.perf_counter() - start)
        row.setdefault("error", None)
        return outcome.record()

    def _run(self, qid: str, passages: tuple[Passage, ...], book: AnswerBook, row: dict[str, Any]) -> FaithfulnessOutcome:
        fc = self.config
        if not passages:
            raise _QuestionFailed("no retrieved passages to explain")
        controls = [Ablation(DEL_Q, question=False)] if fc.controls.question_removal else []
        controls += [Ablation(CLOSED_BOOK, closed_book=True)] if fc.controls.closed_book else []
        path = STAGE_LEVELS[fc.level] if fc.hierarchical else (fc.level,)
        state = _State(book, qid, self.measures)
        stages: list[_Stage] = []
        for depth, level in enumerate(path):
            if depth == 0:
                ctx = Context.at_level(passages, level)
            else:
                prev = stages[-1]
                parents = [prev.ctx.units[i] for i in prev.order[: fc.hierarchical_top]]
                ctx = Context(passages, units_in(passages, parents, level))
            final = depth == len(path) - 1
            if final and len(ctx) > fc.max_units:
                raise _QuestionFailed(
                    f"{len(ctx)} {level} units exceed faithfulness.max_units={fc.max_units}; "
                    "set faithfulness.hierarchical: true or raise max_units"
                )
            if len(ctx) == 0:
                raise _QuestionFailed(f"no {level} units inside the top units of the previous stage")
            stages.append(self._explain(state, ctx, depth, final, [Ablation(DEL_NONE), *controls] if depth == 0 else []))
        final_stage = stages[-1]
        outcome = self._delete(state, final_stage, row, [Ablation(DEL_NONE), *controls])
        row["explainer_calls"] = state.explainer_calls
        row["n_units"] = len(final_stage.ctx)
        row["baseline_answer"] = state.sims.baseline if state.sims else ""
        for stage in stages:
            outcome.units.extend(self._unit_rows(qid, stage))
        return outcome

    # -- explanation -----------------------------------------------------------------------

    def _explain(self, state: _State, ctx: Context, depth: int, final: bool, extra: list[Ablation]) -> _Stage:
        fc, n = self.config, len(ctx)
        if final:
            attrs, explainer = fc.attributions, fc.explainer
        else:
            # coarse stages rank by the explainer, or by leave-one-out where it fits the random arm
            explainer = "loo" if fitted_on_random_arm(fc.explainer) else fc.explainer
            attrs = (explainer,)
        loo = [Ablation(LOO, (i,), k=1) for i in range(n)]
        randoms: list[Ablation] = []
        if final:
            for label in fc.k_values:
                k = resolve_k(label, n) if label != CUMULATIVE else None
                if k is None:
                    continue
                draws = random_draws(n, k, fc.random_repeats, question_rng(self.seed, state.qid, k))
                state.populations[label] = draws.population
                randoms += [Ablation(DEL_RANDOM, s, label, k, draw=d) for d, s in enumerate(draws.subsets)]
        methods = {name: measure() for name, measure in explainers().items() if name in attrs}
        generated = any(m.needs_generated_arms for m in methods.values())
        phase = extra + (loo if generated else []) + randoms
        state.book.fill(ctx, phase)
        state.start(ctx)
        similarity = state.similarity(ctx, phase, fc.similarity)
        full = frozenset(range(n))
        drops = tuple(Changed(full - set(a.removed), 1.0 - similarity(a), "drop") for a in (loo if generated else []))
        drawn = tuple(Changed(full - set(a.removed), 1.0 - similarity(a), "random") for a in randoms)
        changed = drops + drawn
        raw: dict[str, list[float]] = {}
        for name, method in methods.items():
            try:
                scored: tuple[Scored, ...] = ()
                if method.needs_drop_scores:
                    lps = state.book.logprobs(ctx, [Ablation(DEL_NONE), *loo])
                    scored = (Scored(full, lps[0], "full"),
                              *(Scored(full - {i}, lp, "drop") for i, lp in enumerate(lps[1:])))
                raw[name] = method.scores(Evidence(n, scored, changed))
            except BackendError as exc:
                if name == explainer or not state.book.generates_arms:
                    raise
                # only compared, not needed: an endpoint that cannot score leaves it out
                log.warning("%s attribution skipped for question %s: %s", name, state.qid, exc)
                continue
            state.explainer_calls += method.calls(n) if name == explainer else 0
        importance = {m: normalize(v) for m, v in raw.items()}
        order = rank_units(importance[explainer], question_rng(self.seed, state.qid, 7919, depth))
        by_k: dict[str, list[int] | None] = {}
        if final and fitted_on_random_arm(explainer) and explainer in raw:
            by_k = self._held_out_orders(state.qid, depth, n, methods[explainer], drops,
                                         [(a.k_label, o) for a, o in zip(randoms, drawn)])
        return _Stage(depth, ctx, order, importance, raw, explainer, phase, by_k)

    def _held_out_orders(self, qid: str, depth: int, n: int, method: Any, drops: tuple[Changed, ...],
                         drawn: list[tuple[str | None, Changed]]) -> dict[str, list[int] | None]:
        """Per K, the ranking of an explainer fitted on the random arm, fitted on the other K's
        random draws only. Fitted on all of them, it would know which of this K's own draws changed
        the answer, and where the K's draws are every K-subset (top-1, top-20% of 10 units at 50
        repeats) its top K units *are* one of them: DEL_MOST would beat the random draws by
        construction, as the loo explainer's does at K = 1 (a known-truth run whose answer changes
        at random with the units removed, no unit mattering more than another, got "faithful" at
        top-20% in 14 of 16 questions that way). None where no other K's draws are left."""
        out: dict[str, list[int] | None] = {}
        for label in dict.fromkeys(label for label, _ in drawn):
            others = tuple(o for other, o in drawn if other != label)
            weights = method.scores(Evidence(n, (), drops + others)) if others else [math.nan] * n
            out[label] = (None if all(math.isnan(w) for w in weights)
                          else rank_units(normalize(weights), question_rng(self.seed, qid, 7919, depth)))
        return out

    def _unit_rows(self, qid: str, stage: _Stage) -> list[dict[str, Any]]:
        fc = self.config
        bucket = buckets(stage.order, fc.buckets.most, fc.buckets.least)
        rank = {i: pos + 1 for pos, i in enumerate(stage.order)}
        rows = []
        for i, u in enumerate(stage.ctx.units):
            p = stage.ctx.passages[u.passage]
            r = {
                "question_id": qid, "stage": stage.depth, "level": u.level, "unit_id": u.id,
                "unit_index": i, "passage_id": p.id, "retrieval_rank": u.passage + 1,
                "start": u.span.start, "end": u.span.end, "text": u.text,
                "importance": stage.importance[stage.explainer][i], "rank": rank[i], "bucket": bucket[i],
            }
            for m in attribution_order():
                r[f"importance_{m}"] = stage.importance[m][i] if m in stage.importance else None
            r["loo_change"] = stage.raw["loo"][i] if "loo" in stage.raw else None
            r["logprob_drop"] = stage.raw["logprob_drop"][i] if "logprob_drop" in stage.raw else None
            rows.append(with_old_columns(r))
        return rows

    # -- deletion arms, controls, cases ------------------------------------------------------

    def _delete(
        self, state: _State, stage: _Stage, row: dict[str, Any], fixed: list[Ablation]
    ) -> FaithfulnessOutcome:
        """``fixed``: the baseline and controls (answered in the first stage, whatever its level)."""
        fc, ctx, order, n = self.config, stage.ctx, stage.order, len(stage.ctx)
        carried = [a for a in fixed if a not in stage.ablations]  # answered by an earlier stage
        phase: list[Ablation] = []
        for label in fc.k_values:
            if label == CUMULATIVE:
                phase += [Ablation(CUM_MOST, tuple(sorted(order[:k])), label, k) for k in range(1, n + 1)]
                phase += [Ablation(CUM_LEAST, tuple(sorted(order[n - k :])), label, k) for k in range(1, n + 1)]
                continue
            k = resolve_k(label, n)
            if k is not None:
                ranked = stage.by_k.get(label) or order
                phase.append(Ablation(DEL_MOST, tuple(sorted(ranked[:k])), label, k))
                phase.append(Ablation(DEL_LEAST, tuple(sorted(ranked[n - k :])), label, k))
        # the position control needs an influential passage: none when every importance is 0
        top = order[0]
        top_passage = ctx.units[top].passage if stage.importance[stage.explainer][top] > 0 else None
        if top_passage is not None:
            phase += [Ablation(f"MOVE_{w.upper()}", order=_move(len(ctx.passages), top_passage, w))
                      for w in fc.controls.positions]
        state.book.fill(ctx, phase)
        everything = [*carried, *stage.ablations, *phase]
        sim = state.similarity(ctx, everything, fc.similarity)
        gens = [state.book.get(ctx, a) for a in everything]
        state.sims.ensure([g.text for g in gens if g is not None and g.ok])
        arm_rows = []
        for a, g in zip(everything, gens):
            s = sim(a)
            measured = state.sims.all(g) if g is not None else dict.fromkeys(self.measures)
            arm_rows.append({
                "question_id": state.qid, "arm": a.arm, "k_label": a.k_label, "k": a.k, "draw": a.draw,
                "removed_unit_ids": ctx.unit_ids(a.removed), "answer": g.text if g is not None else None,
                "similarity": s, "changed": None if math.isnan(s) else s < fc.threshold_t,
                "logprob": state.book.known_logprob(ctx, a),
                **{f"sim_{m}": v for m, v in measured.items()},
                "latency_s": g.latency_s if g else None, "prompt_tokens": g.prompt_tokens if g else None,
                "completion_tokens": g.completion_tokens if g else None, "error": g.error if g else None,
            })
        by_arm = {}
        for r in arm_rows:
            by_arm.setdefault((r["arm"], r["k_label"]), []).append(r)
        cases = self._cases(state, by_arm, n, {label for label, ranked in stage.by_k.items() if ranked is None})
        curves, aucs = self._curves(state.qid, by_arm, n)
        self._controls_row(row, by_arm, None if top_passage is None else ctx.passages[top_passage].id)
        row["cases"] = [f"{c['k_label']}:{c['case']}" for c in cases]
        row.update(aucs)
        self._agreement_row(row, stage.importance)
        return FaithfulnessOutcome(row, [], arm_rows, cases, curves)

    def _cases(self, state: _State, by_arm: dict[tuple[str, str | None], list[dict[str, Any]]], n: int,
               own_draws: set[str]) -> list[dict[str, Any]]:
        """One case per K; ``own_draws``: the K labels whose explainer, fitted on the random arm, had
        only that K's draws to be fitted on (their test is by construction)."""
        fc, out = self.config, []
        for label in fc.k_values:
            if label == CUMULATIVE:
                continue
            k = resolve_k(label, n)
            base = {"question_id": state.qid, "k_label": label, "k": k, "n_units": n}
            if k is None:
                out.append({**base, "case": "inconclusive", "reason": f"{label} removes all {n} units"})
                continue
            rand = [r["similarity"] for r in by_arm[(DEL_RANDOM, label)] if not math.isnan(r["similarity"])]
            most, least = by_arm[(DEL_MOST, label)][0]["similarity"], by_arm[(DEL_LEAST, label)][0]["similarity"]
            population = state.populations[label]
            base.update(population=population, exhaustive=population == len(by_arm[(DEL_RANDOM, label)]))
            if len(rand) < 2 or math.isnan(most) or math.isnan(least):
                out.append({**base, "case": "inconclusive", "reason": "failed calls: fewer than 2 random draws or no DEL_MOST/DEL_LEAST answer"})
                continue
            res = decide_case(most, least, rand, population, fc.decision)
            row = {**base, **res.as_row()}
            single = circular(fc.explainer, fc.mode, k)
            row["by_construction"] = single or label in own_draws
            if single:  # the case says how the answer depends on single units
                row["reason"] += (f"; by construction for the {fc.explainer} explainer at K = 1 (its first unit is "
                                  "the single removal that changed the answer most): not a test of the explanation")
            elif label in own_draws:
                row["reason"] += (f"; by construction for the {fc.explainer} explainer at {label}: no other K's random "
                                  "draws to fit it on, so it was fitted on these, and knows which of them changed the "
                                  "answer: not a test of the explanation")
            elif fitted_on_random_arm(fc.explainer):
                row["reason"] += f"; the {fc.explainer} ranking tested here was fitted on the other K's random draws"
            t = fc.threshold_t
            row.update(changed_most=most < t, changed_least=least < t, changed_random=res.random_mean < t,
                       random_changed_share=sum(s < t for s in rand) / len(rand),
                       random_median=statistics.median(rand))
            out.append(row)
        return out

    def _curves(self, qid: str, by_arm: dict[tuple[str, str | None], list[dict[str, Any]]], n: int) -> tuple[list[dict[str, Any]], dict[str, float | None]]:
        rows, aucs = [], {"auc_most": None, "auc_least": None}
        for arm, name in ((CUM_MOST, "most"), (CUM_LEAST, "least")):
            points = by_arm.get((arm, CUMULATIVE))
            if not points:
                continue
            curve = [(0, 1.0)] + [(r["k"], r["similarity"]) for r in points]
            rows += [{"question_id": qid, "order": name, "k": k, "fraction": k / n, "similarity": s} for k, s in curve]
            aucs[f"auc_{name}"] = _auc([(k / n, s) for k, s in curve])
        return rows, aucs

    def _controls_row(self, row: dict[str, Any], by_arm: dict[tuple[str, str | None], list[dict[str, Any]]], top_id: str | None) -> None:
        fc = self.config
        def sim(arm: str) -> float | None:
            rows = by_arm.get((arm, None))
            return rows[0]["similarity"] if rows else None
        cb = by_arm.get((CLOSED_BOOK, None))
        row["closed_book_answer"] = cb[0]["answer"] if cb else None
        row["closed_book_sim"] = sim(CLOSED_BOOK)
        row["parametric"] = None if cb is None or math.isnan(cb[0]["similarity"]) else cb[0]["similarity"] >= fc.threshold_t
        row["del_q_sim"] = sim(DEL_Q)
        row["top_passage_id"] = top_id
        moved = {}
        for where in ("start", "middle", "end"):
            moved[where] = sim(f"MOVE_{where.upper()}")
            row[f"move_{where}_sim"] = moved[where]
        known = [s for s in moved.values() if s is not None and not math.isnan(s)]
        row["position_sensitive"] = any(s < fc.threshold_t for s in known) if known else None

    def _agreement_row(self, row: dict[str, Any], importance: dict[str, list[float]]) -> None:
        order = attribution_order()
        for i, a in enumerate(order):
            for b in order[i + 1 :]:
                rho, top = _agreement(importance[a], importance[b]) if a in importance and b in importance else (None, None)
                row[f"rho_{a}_{b}"], row[f"top1_{a}_{b}"] = rho, top
        row.update(with_old_columns(row))


@dataclass
class _State:
    """Per-question bookkeeping shared by the stages."""

    book: AnswerBook
    qid: str
    measures: Mapping[str, Similarity]
    sims: SimilarityBook | None = None
    explainer_calls: int = 0
    populations: dict[str, int] = field(default_factory=dict)

    def start(self, ctx: Context) -> None:
        """After the first phase: the baseline must have succeeded."""
        baseline = self.book.baseline
        if baseline is None or not baseline.ok:
            raise _QuestionFailed(f"baseline call failed: {baseline.error if baseline else 'no answer'}")
        if self.sims is None:
            self.sims = SimilarityBook(baseline.text, self.measures)

    def similarity(self, ctx: Context, ablations: Sequence[Ablation], primary: str) -> Callable[[Ablation], float]:
        """The primary similarity of each ablation's outcome to the baseline (NaN: call failed)."""
        assert self.sims is not None
        return self.book.outcome(ctx, ablations, self.sims, primary)
