"""Answers and similarities of one question's experiment, each computed once.

Different arms often build the same prompt (DEL_MOST at K=1 is a leave-one-out call, random
1-subsets are all leave-one-out calls, the cumulative curve starts with DEL_MOST ...). The
:class:`AnswerBook` keys answers by the rendered prompt, sends only prompts it has not seen, and
sends each phase's new prompts in ONE ``generate`` call so backends share their prefixes. It
counts arm calls requested and model calls actually made — the experiment's cost. At temperature
> 0 identical prompts therefore share one sample.

In ``logprob`` mode (SPEC §10) nothing but the baseline is generated: each arm is scored by
the teacher-forced log-probability of the baseline answer under its context, and its
"similarity" is the probability it keeps, exp(min(0, log p(y | arm) − log p(y | all))) ∈ [0, 1].

The :class:`SimilarityBook` scores answers against the baseline answer with every configured
measure, each distinct answer text once, in batches (the semantic encoder embeds a batch at once).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ragray.ablation.engine import SCORERS, CallBook, kept_share
from ragray.faithfulness.arms import DEL_NONE, Ablation
from ragray.faithfulness.units import Context
from ragray.generation import Generation, Generator
from ragray.generation.base import ChatPrompt
from ragray.generation.prompts import PromptTemplate
from ragray.metrics.similarity import Similarity

__all__ = ["AnswerBook", "SimilarityBook"]


class AnswerBook:
    """Answers (``generate`` mode) or baseline-answer log-probabilities (``logprob`` mode) of an
    experiment's ablations, on the ablation engine's :class:`~ragray.ablation.engine.CallBook`
    (each distinct prompt paid once, the cost counted).

    In ``logprob`` mode only the baseline is generated; every other arm is one teacher-forced
    forward pass scoring the baseline answer under that arm's context.
    """

    def __init__(
        self, generator: Generator, template: PromptTemplate, question: str, system: str | None,
        mode: str = "generate",
    ) -> None:
        self.generator = generator
        self.template = template
        self.question = question
        self.system = system
        self.mode = mode
        #: the mode's scorer generates every arm (generate) or only the baseline (logprob)
        self.generates_arms = SCORERS.get(mode).generates_arms
        self.calls = CallBook(generator)
        self.baseline: Generation | None = None

    @property
    def requested(self) -> int:
        return self.calls.requested

    @property
    def generated(self) -> int:
        return self.calls.generated

    @property
    def score_passes(self) -> int:
        return self.calls.score_passes

    def prompt(self, ctx: Context, ab: Ablation) -> ChatPrompt:
        passages = () if ab.closed_book else ctx.without(ab.removed, ab.order)
        return self.template.build(self.question if ab.question else "", passages, self.system)

    def fill(self, ctx: Context, ablations: Sequence[Ablation]) -> None:
        """Answer (or score) every prompt of ``ablations`` not done yet, in one call, in order."""
        self.calls.request(len(ablations))
        if self.baseline is None:
            base = self.prompt(ctx, Ablation(DEL_NONE))
            first = [self.prompt(ctx, a) for a in ablations] if self.generates_arms else [base]
            self.calls.generate(first)
            self.baseline = self.calls.answer(base)
            if self.generates_arms:
                return
        if self.generates_arms:
            self.calls.generate([self.prompt(ctx, a) for a in ablations])
        elif self.baseline.ok:
            self.logprobs(ctx, ablations)

    def get(self, ctx: Context, ab: Ablation) -> Generation | None:
        """The generated answer (None for arms that were only scored)."""
        return self.calls.answer(self.prompt(ctx, ab))

    def known_logprob(self, ctx: Context, ab: Ablation) -> float | None:
        """The arm's baseline-answer log-probability if it was scored, else None."""
        if self.baseline is None:
            return None
        return self.calls.known_score(self.prompt(ctx, ab), self.baseline.text)

    def logprobs(self, ctx: Context, ablations: Sequence[Ablation]) -> list[float]:
        """log p(baseline answer | arm's prompt) per ablation; new prompts scored in one call."""
        assert self.baseline is not None
        prompts = [self.prompt(ctx, ab) for ab in ablations]
        return self.calls.logprobs(prompts, [self.baseline.text] * len(prompts))

    def outcome(self, ctx: Context, ablations: Sequence[Ablation], sims: SimilarityBook,
                primary: str) -> Callable[[Ablation], float]:
        """How much of the baseline each ablation keeps, as the mode measures it: the ``primary``
        similarity of its answer to the baseline (generate; NaN: the call failed) or the share of
        the baseline answer's probability it keeps (logprob)."""
        if not self.generates_arms:
            full = self.logprobs(ctx, [Ablation(DEL_NONE)])[0]
            lps = dict(zip(ablations, self.logprobs(ctx, ablations)))
            return lambda a: kept_share(lps[a], full)
        gens = {a: self.get(ctx, a) for a in ablations}
        sims.ensure([g.text for g in gens.values() if g is not None and g.ok], [primary])
        return lambda a: sims.of(gens[a], primary)


class SimilarityBook:
    """sim(baseline, answer) for every measure; an answer that failed scores NaN."""

    def __init__(self, baseline: str, measures: Mapping[str, Similarity]) -> None:
        self.baseline = baseline
        self.measures = dict(measures)
        self._cache: dict[str, dict[str, float]] = {}

    def ensure(self, answers: Sequence[str], names: Sequence[str] | None = None) -> None:
        names = list(names or self.measures)
        for name in names:
            todo = sorted({a for a in answers if name not in self._cache.get(a, {})})
            if todo:
                values = self.measures[name].many([(self.baseline, a) for a in todo])
                for a, v in zip(todo, values):
                    self._cache.setdefault(a, {})[name] = float(v)

    def of(self, gen: Generation, name: str) -> float:
        if not gen.ok:
            return float("nan")
        if name not in self._cache.get(gen.text, {}):
            self.ensure([gen.text], [name])
        return self._cache[gen.text][name]

    def all(self, gen: Generation) -> dict[str, float]:
        return {name: self.of(gen, name) for name in self.measures}
