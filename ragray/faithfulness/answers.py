"""Answers and similarities of one question's experiment, each computed once.

Different arms often build the same prompt (DEL_MOST at K=1 is a leave-one-out call, random
1-subsets are all leave-one-out calls, the cumulative curve starts with DEL_MOST ...). The
:class:`AnswerBook` keys answers by the rendered prompt, sends only prompts it has not seen, and
sends each phase's new prompts in ONE ``generate`` call so backends share their prefixes. It
counts arm calls requested and model calls actually made — the experiment's cost. At temperature
> 0 identical prompts therefore share one sample.

The :class:`SimilarityBook` scores answers against the baseline answer with every configured
measure, each distinct answer text once, in batches (the semantic encoder embeds a batch at once).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ragray.faithfulness.arms import Ablation
from ragray.faithfulness.units import Context
from ragray.generation import Generation, Generator
from ragray.generation.base import ChatPrompt
from ragray.generation.prompts import PromptTemplate
from ragray.metrics.similarity import Similarity

__all__ = ["AnswerBook", "SimilarityBook"]


class AnswerBook:
    def __init__(self, generator: Generator, template: PromptTemplate, question: str, system: str | None) -> None:
        self.generator = generator
        self.template = template
        self.question = question
        self.system = system
        self._answers: dict[ChatPrompt, Generation] = {}
        self.requested = 0
        self.generated = 0
        self.score_passes = 0

    def prompt(self, ctx: Context, ab: Ablation) -> ChatPrompt:
        passages = () if ab.closed_book else ctx.without(ab.removed, ab.order)
        return self.template.build(self.question if ab.question else "", passages, self.system)

    def fill(self, ctx: Context, ablations: Sequence[Ablation]) -> None:
        """Generate every prompt of ``ablations`` not answered yet, in one call, in order."""
        self.requested += len(ablations)
        todo: dict[ChatPrompt, None] = {}
        for ab in ablations:
            p = self.prompt(ctx, ab)
            if p not in self._answers:
                todo.setdefault(p, None)
        if not todo:
            return
        prompts = list(todo)
        gens = self.generator.generate(prompts)
        self.generated += len(prompts)
        self._answers.update(zip(prompts, gens))

    def get(self, ctx: Context, ab: Ablation) -> Generation:
        return self._answers[self.prompt(ctx, ab)]

    def score(self, ctx: Context, ablations: Sequence[Ablation], answer: str) -> list[float]:
        """Teacher-forced log p(answer | prompt) under each ablation (one forward pass each)."""
        prompts = [self.prompt(ctx, ab) for ab in ablations]
        self.score_passes += len(prompts)
        return self.generator.score(prompts, [answer] * len(prompts))


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
