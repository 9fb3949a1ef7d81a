"""A generator that stops when its work is cancelled, and hands the model over between calls.

:class:`CancellableGenerator` wraps the generator one request or run of the HTTP server uses. Before
every call to the model it checks the work's :class:`~ragray.cancel.CancelToken` and raises
:class:`~ragray.cancel.Cancelled` once it is cancelled; a call of more than ``per_call`` prompts
is sent as several calls of at most ``per_call`` each. So a cancelled request stops within one
call of ``per_call`` prompts, and between its calls the shared model's lock is free for the other
clients' requests (a question's ablations go to the backend as one call otherwise: 202 prompts
for 100 passages with a position control). Splitting costs some batching and prefix sharing on a
GPU, which ``serve.max_prompts_per_call`` trades against how soon a cancel or another client gets in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from ragray.cancel import CancelToken
from ragray.generation.base import ChatPrompt, Generation, Generator, GeneratorProxy

__all__ = ["CancellableGenerator"]

T = TypeVar("T")


class CancellableGenerator(GeneratorProxy):
    """``inner`` behind ``token``: each call checks it first; ``per_call`` (0: no limit) caps the
    prompts of one call to ``inner``."""

    def __init__(self, inner: Generator, token: CancelToken, per_call: int = 0) -> None:
        super().__init__(inner)
        self.token = token
        self.per_call = per_call

    def _chunks(self, n: int) -> list[slice]:
        size = self.per_call or max(n, 1)
        return [slice(i, i + size) for i in range(0, n, size)] or [slice(0, 0)]

    def _each(self, n: int, call: Callable[[slice], list[T]]) -> list[T]:
        out: list[T] = []
        for part in self._chunks(n):
            self.token.check()
            out.extend(call(part))
        return out

    def generate(self, prompts: Sequence[ChatPrompt]) -> list[Generation]:
        prompts = list(prompts)
        return self._each(len(prompts), lambda part: self.inner.generate(prompts[part]))

    def logprobs(self, prompts: Sequence[ChatPrompt], answers: Sequence[str]) -> list[float]:
        prompts, answers = list(prompts), list(answers)
        return self._each(len(prompts), lambda part: self.inner.logprobs(prompts[part], answers[part]))

    def score_divergence(self, reference: ChatPrompt, prompts: Sequence[ChatPrompt], answer: str
                         ) -> list[tuple[float, float]]:
        prompts = list(prompts)
        return self._each(len(prompts), lambda part: self.inner.score_divergence(reference, prompts[part], answer))

    def scoring_problem(self) -> str | None:
        self.token.check()  # an endpoint answers it with a probe call
        return self.inner.scoring_problem()

    def close(self) -> None:
        """The inner generator belongs to whoever made it (the server's, or the run's own)."""
