"""The retrieval stage of the pipeline: chunk → filter → index → search → rerank → top-k.

Scope (``retrieval.scope``):
- ``per_question``: each question's own passages (chunked) form its corpus, as in NQ and HotpotQA;
  one small index per question.
- ``global``: one index over the dataset's corpus (the corpus file, or the union of all records'
  passages), searched with every question in batches.

Metadata filters (``retrieval.filters``: meta key → allowed value or values) remove passages before
indexing; ``retrieval.min_score`` drops hits scoring below it at the final stage (after reranking
when a reranker is on). With a reranker, ``rerank.candidates`` first-stage hits are reranked and the
best ``retrieval.top_k`` kept; hit ranks are always 1..n of the final order.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from tqdm.auto import tqdm

from ragray.config import ExperimentConfig
from ragray.data.chunking import chunk_passages
from ragray.errors import InputError
from ragray.rerank import build_reranker
from ragray.retrieval import build_retriever
from ragray.types import Dataset, Hit, Passage, Question

__all__ = ["QuestionHits", "RetrievalStage", "passes_filters"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class QuestionHits:
    """One question and its final ranked hits."""

    question: Question
    hits: tuple[Hit, ...]


def passes_filters(passage: Passage, filters: Mapping[str, str | Sequence[str]]) -> bool:
    """True when every filtered meta key of ``passage`` has an allowed value."""
    for key, allowed in filters.items():
        value = passage.meta.get(key)
        if value is None:
            return False
        options = (allowed,) if isinstance(allowed, str) else tuple(allowed)
        if str(value) not in options:
            return False
    return True


class RetrievalStage:
    """Retrieves the top-k hits per question, in either scope, as configured."""

    def __init__(self, config: ExperimentConfig) -> None:
        self.config = config
        self.retriever = build_retriever(config.retrieval)
        self.reranker = build_reranker(config.rerank) if config.rerank.strategy != "none" else None

    @property
    def first_stage_k(self) -> int:
        k = self.config.retrieval.top_k
        return max(k, self.config.rerank.candidates) if self.reranker else k

    def _corpus(self, passages: Sequence[Passage], documents: bool) -> tuple[Passage, ...]:
        chunks = chunk_passages(passages, self.config.chunking, documents)
        filters = self.config.retrieval.filters
        return tuple(p for p in chunks if passes_filters(p, filters)) if filters else chunks

    def _finish(self, question: Question, hits: Sequence[Hit]) -> QuestionHits:
        cfg = self.config.retrieval
        if self.reranker is not None:
            hits = self.reranker.rerank(question.question, hits, cfg.top_k)
        hits = list(hits)[: cfg.top_k]
        if cfg.min_score is not None:
            hits = [h for h in hits if h.score >= cfg.min_score]
        return QuestionHits(question, tuple(hits))

    def chunks(self, dataset: Dataset) -> tuple[Passage, ...]:
        """The chunked passages retrieval searches: the global corpus, or every question's own."""
        if self.config.retrieval.scope == "global":
            return self._corpus(dataset.global_corpus(), dataset.documents)
        seen: dict[str, Passage] = {}
        for q in dataset.questions:
            for p in q.passages:
                seen.setdefault(p.id, p)
        return self._corpus(tuple(seen.values()), dataset.documents)

    def run(self, dataset: Dataset, progress: bool = True) -> Iterator[QuestionHits]:
        """Yield each question's hits, in dataset order."""
        if self.config.retrieval.scope == "global":
            yield from self._run_global(dataset, progress)
        else:
            yield from self._run_per_question(dataset, progress)

    def _run_per_question(self, dataset: Dataset, progress: bool) -> Iterator[QuestionHits]:
        if dataset.questions and not any(q.passages for q in dataset.questions):
            raise InputError(
                f"dataset '{dataset.name}' has no per-question passages (a corpus-only set such as "
                "BEIR); use retrieval.scope=global (--scope global)"
            )
        bar = tqdm(dataset.questions, desc="retrieve", unit="q", disable=not progress)
        for q in bar:
            index = self.retriever.index(self._corpus(q.passages, dataset.documents))
            yield self._finish(q, index.search([q.question], self.first_stage_k)[0])

    def _run_global(self, dataset: Dataset, progress: bool) -> Iterator[QuestionHits]:
        corpus = self._corpus(dataset.global_corpus(), dataset.documents)
        log.info("indexing %d passages with %s", len(corpus), self.config.retrieval.retriever)
        index = self.retriever.index(corpus)
        questions = dataset.questions
        batch = 64
        bar = tqdm(total=len(questions), desc="retrieve", unit="q", disable=not progress)
        for start in range(0, len(questions), batch):
            chunk = questions[start : start + batch]
            for q, hits in zip(chunk, index.search([q.question for q in chunk], self.first_stage_k)):
                yield self._finish(q, hits)
                bar.update(1)
        bar.close()
