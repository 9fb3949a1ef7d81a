"""Questions in flight: keep several questions' prompts with the backend at once.

One question sends its k + 1 prompts together and waits; an endpoint that serves 64 requests at
once then idles. :func:`process_in_flight` runs up to ``n`` questions on worker threads, but lets
only one of them run ragray's own code at a time: a question holds the turn while it plans,
measures and scores, and gives it up only while it waits for the backend
(:class:`TakesTurns`, a generator proxy). The per-question code therefore never runs
concurrently with itself — no thread-safety is asked of the loops, encoders or caches — and each
question's record is the one it would be alone (for a deterministic backend: the same tables).
Records come back as questions finish, in any order; the run logs each the moment it arrives.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

from ragray.config import ExperimentConfig
from ragray.generation.base import ChatPrompt, Generation, Generator

__all__ = ["TakesTurns", "process_in_flight", "questions_in_flight"]

Q = TypeVar("Q")
R = TypeVar("R")


def questions_in_flight(config: ExperimentConfig, generator: Generator) -> int:
    """``execution.max_questions_in_flight``, else the backend's own default."""
    return config.execution.max_questions_in_flight or generator.default_questions_in_flight


class _Turn:
    """The one turn to run ragray code; a thread knows whether it holds it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.local = threading.local()

    def __enter__(self) -> None:
        self.lock.acquire()
        self.local.holding = True

    def __exit__(self, *exc: object) -> None:
        self.local.holding = False
        self.lock.release()

    def waiting(self, call: Callable[[], R]) -> R:
        """Run ``call`` (a backend call) without the turn, if this thread holds it."""
        if not getattr(self.local, "holding", False):
            return call()
        self.__exit__()
        try:
            return call()
        finally:
            self.__enter__()


class TakesTurns(Generator):
    """``inner`` for questions that take turns: each backend call gives the turn up while it waits."""

    def __init__(self, inner: Generator, turn: _Turn) -> None:
        self.inner = inner
        self.turn = turn
        self.name = inner.name

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def precision(self) -> str | None:
        return self.inner.precision

    def identity(self) -> dict[str, Any]:
        return self.inner.identity()

    def generate(self, prompts: Sequence[ChatPrompt]) -> list[Generation]:
        return self.turn.waiting(lambda: self.inner.generate(prompts))

    def score(self, prompts: Sequence[ChatPrompt], answers: Sequence[str]) -> list[float]:
        return self.turn.waiting(lambda: self.inner.score(prompts, answers))

    def scoring_problem(self) -> str | None:
        return self.turn.waiting(self.inner.scoring_problem)

    def close(self) -> None:
        """The inner generator belongs to whoever made it."""


def process_in_flight(items: Iterable[Q], make: Callable[[Generator], Callable[[Q], R]],
                      generator: Generator, n: int) -> Iterator[R]:
    """``make(generator)(item)`` for every item, up to ``n`` at once (see the module docstring),
    yielded as each finishes. Stopping early (an interrupt) lets the questions already with the
    backend finish and drops their results: a resumed run does them again."""
    turn = _Turn()
    with turn:
        process = make(TakesTurns(generator, turn))

    def work(item: Q) -> R:
        with turn:
            return process(item)

    items = iter(items)
    pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="ragray-question")
    running: set[Future[R]] = set()
    try:
        while True:
            with turn:  # reading the next item may retrieve: ragray code, so it takes the turn too
                item = next(items, _END)
            if item is _END:
                break
            running.add(pool.submit(work, item))  # type: ignore[arg-type]
            while len(running) >= n:
                done, running = wait(running, return_when=FIRST_COMPLETED)
                yield from (f.result() for f in done)
        while running:
            done, running = wait(running, return_when=FIRST_COMPLETED)
            yield from (f.result() for f in done)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


_END: Any = object()
