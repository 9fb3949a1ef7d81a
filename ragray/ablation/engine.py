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

from ragray.ablation.span import Span, answer_span
from ragray.generation.base import ChatPrompt, Generation, Generator
from ragray.metrics.similarity import Similarity
from ragray.registry import Registry
from ragray.progress import calls_done

__all__ = ["SCORERS", "CallBook", "CallCost", "Extra", "GenerateScorer", "JsdScorer", "LogprobScorer", "Measured",
           "Scorer", "kept_share"]


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
        self._divergences: dict[tuple[ChatPrompt, ChatPrompt, str], tuple[float, float]] = {}
        self.requested = 0
        self.generated = 0
        self.score_passes = 0

    @property
    def cost(self) -> CallCost:
        return CallCost(self.requested, self.generated, self.score_passes)

    @property
    def calls(self) -> int:
        """Prompts this book sent to the backend so far (generated and scored)."""
        return self.generated + self.score_passes

    def _report(self, n: int) -> None:
        """The progress bar's count of ``n`` finished calls, where the backend does not report its own."""
        if not getattr(self.generator, "reports_calls", False):
            calls_done(n)

    def request(self, n: int) -> None:
        """Count ``n`` arms asked for (whether or not they cost a call)."""
        self.requested += n

    def generate(self, prompts: Sequence[ChatPrompt]) -> list[Generation]:
        """The answer to each prompt; prompts not answered yet go to the backend in one call."""
        todo = list(dict.fromkeys(p for p in prompts if p not in self._answers))
        if todo:
            self._answers.update(zip(todo, self.generator.generate(todo)))
            self.generated += len(todo)
            self._report(len(todo))
        return [self._answers[p] for p in prompts]

    def record(self, prompt: ChatPrompt, generation: Generation) -> None:
        """Keep (and count) an answer made outside the book (a benchmark's naive loop)."""
        self._answers[prompt] = generation
        self.generated += 1

    def answer(self, prompt: ChatPrompt) -> Generation | None:
        """The answer already generated for ``prompt`` (None: it was not generated)."""
        return self._answers.get(prompt)

    def logprobs(self, prompts: Sequence[ChatPrompt], answers: Sequence[str]) -> list[float]:
        """log p(answer | prompt) per pair; pairs not scored yet go to the backend in one call."""
        pairs = list(zip(prompts, answers))
        todo = list(dict.fromkeys(pair for pair in pairs if pair not in self._logprobs))
        if todo:
            scores = self.generator.logprobs([p for p, _ in todo], [a for _, a in todo])
            self._logprobs.update(zip(todo, scores))
            self.score_passes += len(todo)
            self._report(len(todo))
        return [self._logprobs[pair] for pair in pairs]

    def divergences(self, reference: ChatPrompt, prompts: Sequence[ChatPrompt], answer: str
                    ) -> list[tuple[float, float]]:
        """``(log p(answer | prompt), Σ JSD to reference)`` per prompt (:meth:`Generator.score_divergence`);
        prompts not measured yet against this reference go to the backend in one call (the
        reference itself is ``(its log-prob, 0)`` and costs no pass of its own when alone)."""
        todo = list(dict.fromkeys(p for p in prompts if (reference, p, answer) not in self._divergences))
        if todo:
            got = self.generator.score_divergence(reference, todo, answer)
            for p, (lp, jsd) in zip(todo, got):
                self._divergences[(reference, p, answer)] = (lp, jsd)
                self._logprobs.setdefault((p, answer), lp)
            self.score_passes += len(todo)
            self._report(len(todo))
        return [self._divergences[(reference, p, answer)] for p in prompts]

    def known_score(self, prompt: ChatPrompt, answer: str) -> float | None:
        """log p(answer | prompt) if it was scored, else None."""
        return self._logprobs.get((prompt, answer))


#: a context to score beside the drop-one arms and its answer (None: the first order's scored answer)
Extra = tuple[ChatPrompt, "str | None"]


@dataclass(frozen=True)
class Measured:
    """Per order (a list of prompts whose first is that order's baseline): the generations
    (log-prob mode: the baseline only) and each prompt's similarity to the order's baseline
    answer (log-prob mode: the share of its probability kept; NaN = not measured)."""

    gens: list[list[Generation]]
    similarities: list[list[float]]
    scored: bool = False  # log-prob scoring ran (the first baseline succeeded)
    #: per order and prompt: log p(scored answer | prompt), signed and unclipped (NaN: not scored)
    logprobs: list[list[float]] | None = None
    #: per order and prompt: Σ JSD of the next-token distributions to the order's baseline (jsd mode)
    divergences: list[list[float]] | None = None
    #: per order: the part of its baseline answer that was scored (``influence.answer_span``)
    scored_answers: list[str] | None = None


class Scorer(ABC):
    """How the ablations of one question are measured against its baseline answer."""

    name: ClassVar[str]
    #: ablated prompts are generated (False: only the baseline is, the rest scored)
    generates_arms: ClassVar[bool]

    @abstractmethod
    def measure(self, book: CallBook, orders: Sequence[Sequence[ChatPrompt]],
                extra: Sequence[Extra] = (), golds: Sequence[str] = ()) -> Measured:
        """Measure every order's prompts (first of each: its baseline); a failed first baseline
        stops the question (its generation is returned, nothing measured). ``extra``: more
        ``(context, answer)`` pairs whose log-probability the caller will ask the book for (answer
        None: the first order's scored answer), scored in the same backend call where the scorer
        scores (one engine round for all of a question's scoring; the generate scorer ignores them).
        ``golds``: the question's gold answers (for the ``through_gold`` span)."""

    def planned_calls(self, orders: Sequence[Sequence[ChatPrompt]], extra: Sequence[Extra] = ()) -> int:
        """The backend calls :meth:`measure` and then the caller's asks for ``extra`` will cost, each
        distinct (prompt, answer) once as the book pays it (the progress bar's plan): each order's
        baseline generated, and every distinct pair scored (an order's prompts score its own
        baseline's answer; an extra's None answer is the first order's)."""
        pairs = {(p, ("order", o)) for o, prompts in enumerate(orders) for p in prompts}
        pairs |= {(p, ("order", 0) if a is None else ("text", a)) for p, a in extra}
        return len({o[0] for o in orders if o}) + len(pairs)


SCORERS: Registry[Scorer] = Registry("scorer", {"generate": __name__, "logprob": __name__, "jsd": __name__})


def _nan(orders: Sequence[Sequence[ChatPrompt]]) -> list[list[float]]:
    return [[float("nan")] * len(o) for o in orders]


@SCORERS.register("generate")
class GenerateScorer(Scorer):
    """Every prompt is generated; similarity is to the baseline answer of the same order."""

    name = "generate"
    generates_arms = True

    def __init__(self, similarity: Similarity, span: Span | None = None) -> None:
        del span  # answers are compared whole
        self.similarity = similarity

    def measure(self, book: CallBook, orders: Sequence[Sequence[ChatPrompt]],
                extra: Sequence[Extra] = (), golds: Sequence[str] = ()) -> Measured:
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

    def planned_calls(self, orders: Sequence[Sequence[ChatPrompt]], extra: Sequence[Extra] = ()) -> int:
        """Every distinct prompt generated once; nothing scored."""
        return len({p for o in orders for p in o})


@SCORERS.register("logprob")
class LogprobScorer(Scorer):
    """Each order's baseline is generated; every prompt of the order scores that answer (its
    ``span``: :mod:`ragray.ablation.span`), keeping :func:`kept_share` of its probability (NaN
    where the order's baseline failed); the raw log-probabilities are kept too."""

    name = "logprob"
    generates_arms = False

    def __init__(self, similarity: Similarity | None = None, span: Span | None = None) -> None:
        del similarity  # log-prob mode compares no answers
        self.span = span or answer_span("full")

    def _measure_order(self, book: CallBook, prompts: Sequence[ChatPrompt], answer: str
                       ) -> tuple[list[float], list[float], list[float] | None]:
        """``(similarities, log-probs, divergences)`` of one order's prompts for its scored answer."""
        lps = book.logprobs(list(prompts), [answer] * len(prompts))
        return [kept_share(lp, lps[0]) for lp in lps], lps, None

    def measure(self, book: CallBook, orders: Sequence[Sequence[ChatPrompt]],
                extra: Sequence[Extra] = (), golds: Sequence[str] = ()) -> Measured:
        baselines = book.generate([o[0] for o in orders])
        if not baselines[0].ok:
            return Measured([[baselines[0]]], _nan(orders[:1]))
        answers = [self.span(b.text, golds) for b in baselines]
        if not self.splits_orders:  # all orders' prompts and the extra contexts in ONE backend call
            ok = [(o, a) for o, a, b in zip(orders, answers, baselines) if b.ok]
            book.logprobs([p for o, _ in ok for p in o] + [p for p, _ in extra],
                          [a for o, a in ok for _ in o] + [answers[0] if a is None else a for _, a in extra])
        sims, lps, divs = [], [], []
        for o, a, b in zip(orders, answers, baselines):
            if not b.ok:
                sims.append([float("nan")] * len(o))
                lps.append([float("nan")] * len(o))
                divs.append(None)
                continue
            s_o, lp_o, d_o = self._measure_order(book, o, a)
            sims.append(s_o)
            lps.append(lp_o)
            divs.append(d_o)
        divergences = None if all(d is None for d in divs) else [
            d if d is not None else [float("nan")] * len(o) for d, o in zip(divs, orders)]
        return Measured([[b] for b in baselines], sims, scored=True, logprobs=lps, divergences=divergences,
                        scored_answers=answers)

    #: each order is measured in its own backend call (jsd: one reference per call)
    splits_orders: ClassVar[bool] = False


@SCORERS.register("jsd")
class JsdScorer(LogprobScorer):
    """Every prompt of an order is scored against the order's baseline answer with its full
    next-token distributions: similarity = 1 − mean JSD per answer token / ln 2 ∈ [0, 1]
    (ARC-JSD, arXiv 2505.16415), so influence = the mean JSD in bits."""

    name = "jsd"
    splits_orders = True

    def _measure_order(self, book: CallBook, prompts: Sequence[ChatPrompt], answer: str
                       ) -> tuple[list[float], list[float], list[float] | None]:
        got = book.divergences(prompts[0], list(prompts), answer)
        n = book.generator.answer_length(prompts[0], answer) or max(1, len(answer.split()))
        lps = [lp for lp, _ in got]
        divs = [d for _, d in got]
        return [1.0 - d / (n * math.log(2.0)) for d in divs], lps, divs
