"""The ablation engine: prompts in; answers, or the baseline answer's log-probability, out.

Both the influence run (:mod:`ragray.ablation.loop`, a leave-one-out plan over passages) and the
faithfulness experiments (:mod:`ragray.faithfulness`, deletion arms over units) send their
ablated prompts through a :class:`CallBook`:

- every distinct prompt is paid for once: answers are kept by rendered prompt, scores by
  (prompt, answer), and only prompts not seen yet are sent;
- each batch of new prompts goes to the backend in ONE call, in order, so backends share the
  prompts' common prefix;
- it counts the cost: arms requested, model generations made, teacher-forced scoring passes.

How an ablation is measured is a :class:`Scorer` (``SCORERS``: ``generate`` regenerates and
compares answers by a similarity; ``logprob`` generates only the baseline and scores its answer
under every ablated context, keeping :func:`kept_share` of its probability).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from ragray.generation.base import ChatPrompt, Generation, Generator
from ragray.metrics.similarity import Similarity
from ragray.registry import Registry

__all__ = ["SCORERS", "CallBook", "CallCost", "GenerateScorer", "LogprobScorer", "Measured", "Scorer", "kept_share"]


def kept_share(logprob: float, full: float) -> float:
    """Share of the baseline answer's probability an ablated context keeps:
    ``exp(min(0, log p(y | ablated) − log p(y | all)))`` ∈ [0, 1] (a context that makes the answer
    more likely keeps all of it)."""
    return math.exp(min(0.0, logprob - full))


@dataclass(frozen=True)
class CallCost:
    """What one question's ablations cost: arms asked for, generations made, scoring passes."""

    requested: int
    generated: int
    score_passes: int


class CallBook:
    """Answers and baseline-answer log-probabilities per prompt, each computed once."""

    def __init__(self, generator: Generator) -> None:
        self.generator = generator
        self._answers: dict[ChatPrompt, Generation] = {}
        self._logprobs: dict[tuple[ChatPrompt, str], float] = {}
        self.requested = 0
        self.generated = 0
        self.score_passes = 0

    @property
    def cost(self) -> CallCost:
        return CallCost(self.requested, self.generated, self.score_passes)

    def request(self, n: int) -> None:
        """Count ``n`` arms asked for (whether or not they cost a call)."""
        self.requested += n

    def generate(self, prompts: Sequence[ChatPrompt]) -> list[Generation]:
        """The answer to each prompt; prompts not answered yet go to the backend in one call."""
        todo = list(dict.fromkeys(p for p in prompts if p not in self._answers))
        if todo:
            self._answers.update(zip(todo, self.generator.generate(todo)))
            self.generated += len(todo)
        return [self._answers[p] for p in prompts]

    def record(self, prompt: ChatPrompt, generation: Generation) -> None:
        """Keep (and count) an answer made outside the book (a benchmark's naive loop)."""
        self._answers[prompt] = generation
        self.generated += 1

    def answer(self, prompt: ChatPrompt) -> Generation | None:
        """The answer already generated for ``prompt`` (None: it was not generated)."""
        return self._answers.get(prompt)

    def score(self, prompts: Sequence[ChatPrompt], answers: Sequence[str]) -> list[float]:
        """log p(answer | prompt) per pair; pairs not scored yet go to the backend in one call."""
        pairs = list(zip(prompts, answers))
        todo = list(dict.fromkeys(pair for pair in pairs if pair not in self._logprobs))
        if todo:
            scores = self.generator.score([p for p, _ in todo], [a for _, a in todo])
            self._logprobs.update(zip(todo, scores))
            self.score_passes += len(todo)
        return [self._logprobs[pair] for pair in pairs]

    def known_score(self, prompt: ChatPrompt, answer: str) -> float | None:
        """log p(answer | prompt) if it was scored, else None."""
        return self._logprobs.get((prompt, answer))


@dataclass(frozen=True)
class Measured:
    """Per order (a list of prompts whose first is that order's baseline): the generations
    (log-prob mode: the baseline only) and each prompt's similarity to the order's baseline
    answer (log-prob mode: the share of its probability kept; NaN = not measured)."""

    gens: list[list[Generation]]
    similarities: list[list[float]]
    scored: bool = False  # log-prob scoring ran (the first baseline succeeded)


class Scorer(ABC):
    """How the ablations of one question are measured against its baseline answer."""

    name: ClassVar[str]
    #: ablated prompts are generated (False: only the baseline is, the rest scored)
    generates_arms: ClassVar[bool]

    @abstractmethod
    def measure(self, book: CallBook, orders: Sequence[Sequence[ChatPrompt]]) -> Measured:
        """Measure every order's prompts (first of each: its baseline); a failed first baseline
        stops the question (its generation is returned, nothing measured)."""


SCORERS: Registry[Scorer] = Registry("influence mode", {"generate": __name__, "logprob": __name__})


def _nan(orders: Sequence[Sequence[ChatPrompt]]) -> list[list[float]]:
    return [[float("nan")] * len(o) for o in orders]


@SCORERS.register("generate")
class GenerateScorer(Scorer):
    """Every prompt is generated; similarity is to the baseline answer of the same order."""

    name = "generate"
    generates_arms = True

    def __init__(self, similarity: Similarity) -> None:
        self.similarity = similarity

    def measure(self, book: CallBook, orders: Sequence[Sequence[ChatPrompt]]) -> Measured:
        flat = book.generate([p for o in orders for p in o])
        gens, at = [], 0
        for o in orders:
            gens.append(flat[at : at + len(o)])
            at += len(o)
        sims = []
        for gs in gens:
            base = gs[0] if gs else None
            if base is None or not base.ok:
                sims.append([float("nan")] * len(gs))
            else:
                sims.append([self.similarity(base.text, g.text) if g.ok else float("nan") for g in gs])
        return Measured(gens, sims)


@SCORERS.register("logprob")
class LogprobScorer(Scorer):
    """Each order's baseline is generated; every prompt of the order scores that answer, keeping
    :func:`kept_share` of its probability (NaN where the order's baseline failed)."""

    name = "logprob"
    generates_arms = False

    def __init__(self, similarity: Similarity | None = None) -> None:
        del similarity  # log-prob mode compares no answers

    def measure(self, book: CallBook, orders: Sequence[Sequence[ChatPrompt]]) -> Measured:
        baselines = book.generate([o[0] for o in orders])
        if not baselines[0].ok:
            return Measured([[baselines[0]]], _nan(orders[:1]))
        ok = [(o, b.text) for o, b in zip(orders, baselines) if b.ok]
        flat = iter(book.score([p for o, _ in ok for p in o], [a for o, a in ok for _ in o]))
        sims = []
        for o, b in zip(orders, baselines):
            if not b.ok:
                sims.append([float("nan")] * len(o))
                continue
            lps = [next(flat) for _ in o]
            sims.append([kept_share(lp, lps[0]) for lp in lps])
        return Measured([[b] for b in baselines], sims, scored=True)
