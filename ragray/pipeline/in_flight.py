"""Questions in flight: keep several questions' prompts with the backend at once.

One question sends its k + 1 prompts together and waits; an endpoint that serves 64 requests at
once, or an engine that batches hundreds of sequences, then idles. :class:`InFlight` runs
up to ``n`` questions on worker threads, but lets only one of them run ragray's own code at a time:
a question holds the turn while it plans, measures and scores, and gives it up only while it
waits for the backend. The per-question code therefore never runs concurrently with itself — no
thread-safety is asked of the loops, encoders or caches — and each question's record is the one
it would be alone (for a deterministic backend: the same tables). Records come back as questions
finish, in any order; the run logs each the moment it arrives.

How the waiting questions reach the backend depends on it (``Generator.concurrent_calls``):

- an endpoint takes calls from many threads: each question's call goes out as it is made
  (:class:`TakesTurns`), and the backend's own limit (``generation.openai.concurrency``) caps the
  requests in flight;
- one in-process engine (vLLM, transformers) is called once for everyone: a question's call
  waits until every question in flight is waiting too, then all their prompts go to the engine
  in ONE call, question by question, so each question's prompts stay together and keep sharing
  their prefix (:class:`Merges`); a wave waits until ``n`` questions (or all that are left) wait.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, TypeVar

from ragray.config import ExperimentConfig
from ragray.generation.base import ChatPrompt, Generation, Generator, GeneratorProxy
from ragray.generation.engine_counts import counts_delta, split_counts

__all__ = ["InFlight", "Merges", "TakesTurns", "questions_in_flight"]

Q = TypeVar("Q")
R = TypeVar("R")


def questions_in_flight(config: ExperimentConfig, generator: Generator | type[Generator], *,
                        on_gpu: bool = False) -> int:
    """``execution.max_questions_in_flight``, else the backend's own default (an instance's, or a
    backend class's where none is built yet: for workers that hold a GPU when ``on_gpu``)."""
    if config.execution.max_questions_in_flight:
        return config.execution.max_questions_in_flight
    if isinstance(generator, type):
        return generator.planned_questions_in_flight(config.generation, on_gpu)
    return generator.default_questions_in_flight


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


class TakesTurns(GeneratorProxy):
    """``inner`` for questions that take turns: each backend call gives the turn up while it waits."""

    def __init__(self, inner: Generator, turn: _Turn) -> None:
        super().__init__(inner)
        self.turn = turn

    def generate(self, prompts: Sequence[ChatPrompt]) -> list[Generation]:
        return self.turn.waiting(lambda: self.inner.generate(prompts))

    def logprobs(self, prompts: Sequence[ChatPrompt], answers: Sequence[str]) -> list[float]:
        return self.turn.waiting(lambda: self.inner.logprobs(prompts, answers))

    def scoring_problem(self) -> str | None:
        return self.turn.waiting(self.inner.scoring_problem)

    def score_divergence(self, reference: ChatPrompt, prompts: Sequence[ChatPrompt], answer: str
                         ) -> list[tuple[float, float]]:
        # not merged across questions (Merges): each question's divergences need its own reference
        return self.turn.waiting(lambda: self.inner.score_divergence(reference, prompts, answer))

    def aside(self, call: Callable[[], R]) -> R:
        return self.turn.waiting(call)

    def close(self) -> None:
        """The inner generator belongs to whoever made it."""

    def started(self) -> None:
        """A question was handed to a worker (counted by :class:`Merges`)."""

    def finished(self) -> None:
        """A question's worker is done with it (or it was cancelled before it started)."""

    def exhausted(self) -> None:
        """No more questions will come (:class:`Merges` stops waiting for a full wave)."""

    def reset(self) -> None:
        """A new batch of questions starts."""


@dataclass
class _Call:
    """One question's waiting call: ``generate`` (prompts) or ``score`` (prompts, answers)."""

    kind: str
    prompts: Sequence[ChatPrompt]
    answers: Sequence[str] = ()
    result: Any = None
    error: BaseException | None = None
    done: bool = False
    counts: dict[str, float] | None = None  # this call's share of the merged engine call's counts


class Merges(TakesTurns):
    """``inner`` for questions that take turns, when the backend is one engine: a call waits until
    every question in flight waits and the wave is full (``wave`` questions, or all that are left),
    then the waiting calls go out as one ``generate`` and one ``score`` call, in the order the
    questions made them."""

    def __init__(self, inner: Generator, turn: _Turn, wave: int) -> None:
        super().__init__(inner, turn)
        self.wave = wave
        self._cond = threading.Condition()
        self._active = 0  # questions handed out and not finished
        self._queue: list[_Call] = []
        self._sending = False
        self._exhausted = False
        self._local = threading.local()  # each question's (thread's) shares of the engine counts

    def started(self) -> None:
        with self._cond:
            self._active += 1

    def finished(self) -> None:
        with self._cond:
            self._active -= 1
            self._cond.notify_all()

    def exhausted(self) -> None:
        with self._cond:
            self._exhausted = True
            self._cond.notify_all()

    def reset(self) -> None:
        with self._cond:
            self._exhausted = False

    def _ready(self) -> bool:
        """Every question in flight waits, and no more will join this wave."""
        full = self._active >= self.wave or self._exhausted
        return bool(self._queue) and not self._sending and full and len(self._queue) >= self._active

    def generate(self, prompts: Sequence[ChatPrompt]) -> list[Generation]:
        return self._call(_Call("generate", prompts)) if prompts else []

    def logprobs(self, prompts: Sequence[ChatPrompt], answers: Sequence[str]) -> list[float]:
        return self._call(_Call("score", prompts, answers)) if prompts else []

    def _call(self, call: _Call) -> Any:
        with self._cond:
            self._queue.append(call)
            self._cond.notify_all()
        self.turn.waiting(lambda: self._wait(call))
        if call.counts:
            self._count_mine(call.counts)
        if call.error is not None:
            raise call.error
        return call.result

    def _wait(self, call: _Call) -> None:
        with self._cond:
            while not call.done:
                if self._ready():
                    batch, self._queue, self._sending = self._queue, [], True
                    self._cond.release()
                    try:
                        self._send(batch)
                    finally:
                        self._cond.acquire()
                        self._sending = False
                        self._cond.notify_all()
                else:
                    self._cond.wait()

    def _send(self, batch: list[_Call]) -> None:
        for kind in ("generate", "score"):
            calls = [c for c in batch if c.kind == kind]
            if calls:
                self._send_merged(calls)

    def _run(self, calls: list[_Call]) -> list[Any]:
        prompts = [p for c in calls for p in c.prompts]
        if calls[0].kind == "generate":
            return self.inner.generate(prompts)
        return self.inner.logprobs(prompts, [a for c in calls for a in c.answers])

    def score_divergence(self, reference: ChatPrompt, prompts: Sequence[ChatPrompt], answer: str
                         ) -> list[tuple[float, float]]:
        before = self.inner.engine_counts()
        try:
            return super().score_divergence(reference, prompts, answer)
        finally:  # not merged: the question's own call (another question's may overlap it)
            self._count_mine(counts_delta(self.inner.engine_counts(), before))

    def _count_mine(self, counts: dict[str, float]) -> None:
        """Add ``counts`` to the calling question's (thread's) shares."""
        mine = self.engine_counts()
        self._local.counts = {k: mine.get(k, 0) + v for k, v in counts.items()}

    def engine_counts(self) -> dict[str, float]:
        """The calling question's shares of the merged calls' engine counts (a merged call's
        counts are shared out by the prompts each question sent)."""
        return dict(getattr(self._local, "counts", {}))

    def _send_merged(self, calls: list[_Call]) -> None:
        """One engine call for ``calls``; if it raises, each question's call again on its own, so a
        failure stays the failing question's (as it would be one question at a time)."""
        before = self.inner.engine_counts()
        try:
            out = self._run(calls)
        except Exception as exc:
            if len(calls) == 1:
                calls[0].error, calls[0].done = exc, True
                return
            for c in calls:
                self._send_merged([c])
            return
        except BaseException as exc:  # the work was cancelled: every question of the call stops, none waits on
            for c in calls:
                c.error, c.done = exc, True
            return
        shares = split_counts(counts_delta(self.inner.engine_counts(), before), [len(c.prompts) for c in calls])
        at = 0
        for c, share in zip(calls, shares):
            c.result, c.counts, c.done = out[at : at + len(c.prompts)], share, True
            at += len(c.prompts)


class InFlight:
    """Up to ``n`` questions with ``generator`` at once (see the module docstring). Build the
    per-question processor once against :attr:`backend`, then :meth:`run` it over any number of
    batches (a Ray actor gets one batch after another)."""

    def __init__(self, generator: Generator, n: int) -> None:
        self.n = n
        self.turn = _Turn()
        #: what the processor calls: the generator, giving the turn up while it waits
        self.backend = TakesTurns(generator, self.turn) if generator.concurrent_calls else Merges(generator, self.turn, n)

    def run(self, items: Iterable[Q], process: Callable[[Q], R]) -> Iterator[R]:
        """``process(item)`` for every item, up to ``n`` at once, yielded as each finishes.
        Stopping early (an interrupt) lets the questions already with the backend finish and drops
        their results: a resumed run does them again."""
        turn, backend = self.turn, self.backend
        backend.reset()

        def work(item: Q) -> R:
            try:
                with turn:
                    return process(item)
            finally:
                backend.finished()

        items = iter(items)
        pool = ThreadPoolExecutor(max_workers=self.n, thread_name_prefix="ragray-question")
        running: set[Future[R]] = set()
        exhausted = False
        try:
            while True:
                while not exhausted and len(running) < self.n:
                    with turn:  # reading the next item may retrieve: ragray code, so it takes the turn
                        item = next(items, _END)
                    if item is _END:
                        exhausted = True
                        backend.exhausted()
                    else:
                        backend.started()
                        running.add(pool.submit(work, item))
                if not running:
                    break
                done, running = wait(running, return_when=FIRST_COMPLETED)
                yield from (f.result() for f in done)
        finally:
            backend.exhausted()  # stopping early: the waiting questions go out with whoever is there
            for f in running:
                if f.cancel():  # never started: no longer awaited by the others
                    backend.finished()
            pool.shutdown(wait=True)


_END: Any = object()
