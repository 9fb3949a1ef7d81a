"""The three served components — corpus search, reranker, generator — as plain classes.

Each Ray Serve deployment wraps one of these (:mod:`ragray.adapters.serving.app`), and the tests use them
directly. ``Remote*`` proxies give the service the same interface over deployment handles, so
:class:`~ragray.adapters.serving.service.RagService` runs unchanged in-process or on Serve.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from ragray.config import ExperimentConfig, RerankConfig
from ragray.errors import InputError
from ragray.generation import Generator
from ragray.generation.base import ChatPrompt, Generation, GeneratorProxy
from ragray.rerank import build_reranker
from ragray.retrieval import RETRIEVERS, build_retriever
from ragray.retrieval.expand import expand_hits, index_documents
from ragray.retrieval.stage import RetrievalStage
from ragray.types import Hit

__all__ = ["CorpusSearch", "RerankStep", "LockedGenerator", "RemoteSearch", "RemoteRerank", "RemoteGenerator",
           "served_retrievers"]


def served_retrievers() -> list[str]:
    """Retrievers a served corpus can search (``given`` needs a question's own ranked passages)."""
    return [name for name in RETRIEVERS.names() if RETRIEVERS.get(name).ranks_corpus]


class CorpusSearch:
    """Indexes the served corpus (``data`` of the config, chunked) once per retriever name.

    The configured retriever is indexed at start-up; another registered one on first use.
    With ``retrieval.expand.window`` the final hits are widened by :meth:`expand`.
    """

    def __init__(self, config: ExperimentConfig) -> None:
        from ragray.data import load_dataset

        self.config = config
        stage = RetrievalStage(config.model_copy(update={"rerank": RerankConfig()}))
        dataset = load_dataset(config.data)
        self.chunks = stage.chunks(dataset)
        self.window = config.retrieval.expand.window
        self._documents = index_documents(stage.sources(dataset), self.chunks) if self.window else {}
        self._indexes: dict[str, Any] = {config.retrieval.retriever: stage.retriever.index(self.chunks)}
        self._lock = threading.Lock()

    @property
    def retrievers(self) -> list[str]:
        return served_retrievers()

    def size(self) -> int:
        return len(self.chunks)

    def expand(self, hits: Sequence[Hit]) -> list[Hit]:
        """``hits`` widened with their neighbouring chunks (``retrieval.expand.window``; 0: as they are)."""
        return list(expand_hits(hits, self._documents, self.window))

    def search(self, question: str, retriever: str, k: int) -> list[Hit]:
        if retriever not in served_retrievers():
            raise InputError(f"unknown retriever '{retriever}'; valid: {', '.join(served_retrievers())}")
        with self._lock:  # one build per name, even under concurrent first requests
            if retriever not in self._indexes:
                cfg = self.config.retrieval.model_copy(update={"retriever": retriever})
                self._indexes[retriever] = build_retriever(cfg).index(self.chunks)
            index = self._indexes[retriever]
        return list(index.search([question], k)[0])


class RerankStep:
    """The configured reranker (``rerank.strategy``); ``none`` keeps the first-stage order."""

    def __init__(self, config: ExperimentConfig) -> None:
        self.name = config.rerank.strategy
        self.reranker = build_reranker(config.rerank)

    def rerank(self, question: str, hits: Sequence[Hit], k: int) -> list[Hit]:
        return self.reranker.rerank(question, hits, k)


class _TurnLock:
    """A lock taken in the order it was asked for. A plain lock lets the thread that just released
    it take it again at once, so a request calling the model call after call would keep it from
    the others; here each waits its turn (first come, first served)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._next = 0  # the next ticket to hand out
        self._serving = 0  # the ticket whose holder may go
        self._gone: set[int] = set()  # tickets whose holders stopped waiting (an interrupt)

    def __enter__(self) -> None:
        with self._cond:
            ticket, self._next = self._next, self._next + 1
            try:
                self._cond.wait_for(lambda: self._serving == ticket)
            except BaseException:
                self._gone.add(ticket)
                self._advance(0)
                raise

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self._advance(1)

    def _advance(self, by: int) -> None:
        """Move the turn on ``by`` (and past tickets nobody waits on); the caller holds ``_cond``."""
        self._serving += by
        while self._serving in self._gone:
            self._gone.discard(self._serving)
            self._serving += 1
        self._cond.notify_all()


class LockedGenerator(GeneratorProxy):
    """One loaded generator shared by a replica's concurrent requests, one call at a time.

    Serve (and FastAPI) run sync methods in a thread pool; model objects and their KV prefix
    cache are not thread-safe, so calls are serialized, in the order they come: a long request's
    calls (at most ``serve.max_prompts_per_call`` prompts each) take turns with the other
    requests'. A call's prompts still go to the backend as one batch.
    """

    def __init__(self, generator: Generator) -> None:
        super().__init__(generator)
        self._lock = _TurnLock()

    @classmethod
    def from_config(cls, config: Any) -> LockedGenerator:
        """The configured backend (``config``: the whole experiment config) behind the call cache."""
        from ragray.pipeline.generators import open_generator

        return cls(open_generator(config))

    def generate(self, prompts: Sequence[ChatPrompt]) -> list[Generation]:
        with self._lock:
            return self.inner.generate(prompts)

    def logprobs(self, prompts: Sequence[ChatPrompt], answers: Sequence[str]) -> list[float]:
        with self._lock:
            return self.inner.logprobs(prompts, answers)

    def scoring_problem(self) -> str | None:
        with self._lock:
            return self.inner.scoring_problem()


class _Remote:
    """Calls a deployment handle's method and waits (from a worker thread, never the event loop)."""

    def __init__(self, handle: Any, timeout_s: float) -> None:
        self.handle = handle
        self.timeout_s = timeout_s

    def _call(self, method: str, *args: Any) -> Any:
        return getattr(self.handle, method).remote(*args).result(timeout_s=self.timeout_s)


class RemoteSearch(_Remote):
    @property
    def retrievers(self) -> list[str]:
        return served_retrievers()

    def size(self) -> int:
        return self._call("size")

    def search(self, question: str, retriever: str, k: int) -> list[Hit]:
        return self._call("search", question, retriever, k)

    def expand(self, hits: Sequence[Hit]) -> list[Hit]:
        return self._call("expand", list(hits))


class RemoteRerank(_Remote):
    def __init__(self, handle: Any, timeout_s: float, name: str) -> None:
        super().__init__(handle, timeout_s)
        self.name = name

    def rerank(self, question: str, hits: Sequence[Hit], k: int) -> list[Hit]:
        return self._call("rerank", question, list(hits), k)


class RemoteGenerator(_Remote, Generator):
    """A :class:`Generator` whose calls go to the generator deployment."""

    name = "serve"

    @classmethod
    def from_config(cls, config: Any) -> RemoteGenerator:  # pragma: no cover - built from a handle
        raise TypeError("RemoteGenerator is built from a Serve deployment handle")

    def __init__(self, handle: Any, timeout_s: float) -> None:
        super().__init__(handle, timeout_s)
        self._model_id: str | None = None
        self._probed: tuple[str | None] | None = None
        self._precision: tuple[str | None] | None = None

    @property
    def model_id(self) -> str:
        if self._model_id is None:
            self._model_id = self._call("model_id")
        return self._model_id

    def generate(self, prompts: Sequence[ChatPrompt]) -> list[Generation]:
        return self._call("generate", list(prompts))

    def logprobs(self, prompts: Sequence[ChatPrompt], answers: Sequence[str]) -> list[float]:
        return self._call("logprobs", list(prompts), list(answers))

    def scoring_problem(self) -> str | None:
        if self._probed is None:
            self._probed = (self._call("scoring_problem"),)
        return self._probed[0]

    @property
    def precision(self) -> str | None:
        if self._precision is None:
            self._precision = (self._call("precision"),)
        return self._precision[0]
