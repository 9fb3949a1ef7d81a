"""A scripted generator for testing pipelines without a model (like httpx's MockTransport).

It answers from the prompt by rule, so tests know which passages an answer depends on: the answer
is the value of the first ``ANSWER=<word>`` or ``ANSWER="<several words>"`` marker in the
prompt's user message (markers are written into passages), or ``"unknown"`` when none is present. ``fail_on`` makes calls whose prompt
contains that text fail with an error record, to exercise error handling. Never use it to measure
anything: it is registered as ``scripted`` only so orchestration can be tested end to end.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from ragray.generation.base import GENERATORS, ChatPrompt, Generation, Generator

__all__ = ["ScriptedGenerator"]

_MARKER = re.compile(r'ANSWER=(?:"([^"]*)"|(\w+))')


@GENERATORS.register("scripted")
class ScriptedGenerator(Generator):
    name = "scripted"
    cacheable = False  # answers by rule: nothing to save

    def __init__(self, fail_on: str | None = None) -> None:
        self.fail_on = fail_on
        self.calls: list[ChatPrompt] = []
        self.batches: list[int] = []

    @property
    def model_id(self) -> str:
        return "scripted"

    def _answer(self, prompt: ChatPrompt) -> str:
        found = _MARKER.search(prompt[-1].content)
        if found is None:
            return "unknown"
        return found.group(1) if found.group(1) is not None else found.group(2)

    def generate(self, prompts: Sequence[ChatPrompt]) -> list[Generation]:
        self.calls.extend(prompts)
        self.batches.append(len(prompts))
        out = []
        for p in prompts:
            n_prompt = len(p[-1].content.split())
            if self.fail_on is not None and self.fail_on in p[-1].content:
                out.append(Generation("", n_prompt, 0, 0.0, error=f"scripted failure ({self.fail_on})"))
            else:
                out.append(Generation(self._answer(p), n_prompt, 1, 0.0))
        return out

    def logprobs(self, prompts: Sequence[ChatPrompt], answers: Sequence[str]) -> list[float]:
        """0 when the prompt's answer is ``answer`` (else −10), minus 2 nats per ``DISTRACT``
        marker in the prompt: a passage carrying one makes the answer less likely."""
        return [(0.0 if self._answer(p) == a else -10.0) - 2.0 * p[-1].content.count("DISTRACT")
                for p, a in zip(prompts, answers)]

    def answer_length(self, prompt: ChatPrompt, answer: str) -> int | None:
        return len(answer.split())

    def divergence_problem(self) -> str | None:
        return None

    def score_divergence(self, reference: ChatPrompt, prompts: Sequence[ChatPrompt], answer: str
                         ) -> list[tuple[float, float]]:
        """Each answer position has a two-outcome next-token distribution (the answer's token with
        probability exp(score / length), anything else): JSD of those against the reference's."""
        n = max(1, len(answer.split()))

        def dist(prompt: ChatPrompt) -> tuple[float, float]:
            p = math.exp(self.logprobs([prompt], [answer])[0] / n)
            return p, 1.0 - p

        ref = dist(reference)
        out = []
        for prompt, total in zip(prompts, self.logprobs(prompts, [answer] * len(prompts))):
            q = dist(prompt)
            m = [(a + b) / 2 for a, b in zip(ref, q)]
            kl = lambda x: sum(a * math.log(a / c) for a, c in zip(x, m) if a > 0)  # noqa: E731
            out.append((total, n * 0.5 * (kl(ref) + kl(q))))
        return out
