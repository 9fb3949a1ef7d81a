"""The retrieval stage of the pipeline: chunk → filter → index → search → rerank → top-k.

Scope (``retrieval.scope``; ``auto``, the default, is ``global`` where the set has its own corpus —
a corpus file beside the questions or named in ``data.corpus``, a BEIR folder — or no question
carries passages, else ``per_question``; :func:`resolve_scope`):
- ``per_question``: each question's own passages (chunked) form its corpus, as in NQ and HotpotQA;
  one small index per question.
- ``global``: one index over the dataset's corpus (the corpus file, or the union of all records'
  passages), searched with every question in batches.

Metadata filters (``retrieval.filters``: meta key → allowed value or values) remove passages before
indexing; ``retrieval.min_score`` drops hits scoring below it at the final stage (after reranking
when a reranker is on). With a reranker, ``rerank.candidates`` first-stage hits are reranked and the
best ``retrieval.top_k`` kept; hit ranks are always 1..n of the final order.

Context expansion (``retrieval.expand.window``, :mod:`ragray.retrieval.expand`) widens the final
hits with neighbouring chunks of their documents; it runs on the final hits, cached or not.

Caching (``cache.*``, :mod:`ragray.cache`): the chunked global corpus, its index and every
question's final hits are stored under fingerprints of everything they depend on, so the trials
of a sweep share them and a trial that changes only ``generation.*`` (or anything else after
retrieval) chunks, embeds, indexes, searches and reranks nothing. Per-question indexes are not
cached: each covers a handful of passages, cheaper to rebuild than to write and read back, and a
question's cached hits skip its index anyway — unless ``cache.namespace`` names an ephemeral
store for them (:mod:`ragray.cache.retrieval`; sweeps with ``ephemeral.namespace``). A retriever
or reranker swapped in by hand (``stage.reranker = ...``) is not described by the config, so the
stage then bypasses the index and result caches rather than serve hits of the configured
components.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ragray.console import progress_bar

from ragray.cache import CacheStats, RetrievalCache
from ragray.cache.keys import hits_key, index_key, rerank_identity, setup_key
from ragray.catalog import ranks_corpus
from ragray.config import ExperimentConfig, RetrievalConfig
from ragray.data.chunking import chunk_passages
from ragray.errors import InputError
from ragray.rerank import build_reranker, reranks
from ragray.retrieval import build_retriever
from ragray.retrieval.base import SearchIndex
from ragray.retrieval.expand import DocumentChunks, expand_hits, index_documents
from ragray.retrieval.tail import finish_hits, first_stage_k
from ragray.types import Dataset, Hit, Passage, Question

__all__ = ["QuestionHits", "RetrievalStage", "describe_sources", "passes_filters", "resolve_scope",
           "resolved_retrieval_config"]

log = logging.getLogger(__name__)

_GLOBAL_BATCH = 64


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


def resolve_scope(retrieval: RetrievalConfig, dataset: Dataset) -> str:
    """``per_question`` or ``global``: ``retrieval.scope`` as set, or what ``auto`` means for
    ``dataset`` — its own corpus when it has one (and the retriever ranks a corpus: ``given``
    keeps each question's passages), or when no question carries passages; else each question's own."""
    if retrieval.scope != "auto":
        return retrieval.scope
    if not ranks_corpus(retrieval.retriever):
        return "per_question"
    if dataset.corpus_name is not None:
        return "global"
    if dataset.corpus and not any(q.passages for q in dataset.questions):  # a corpus is all there is
        return "global"
    return "per_question"


def describe_sources(retrieval: RetrievalConfig, dataset: Dataset) -> str:
    """Where each question's passages come from, in words for the run line: ``bm25 top-10 of 2,067
    corpus passages (squad.corpus.jsonl)`` or ``bm25 top-10 of the rows' own passages (1–10 per
    question)``."""
    fewest, most = dataset.passage_counts
    own = f"{fewest}" if fewest == most else f"{fewest}–{most}"
    if not ranks_corpus(retrieval.retriever):
        return f"the rows' own passages in their given order ({own} per question)"
    head = f"{retrieval.retriever} top-{retrieval.top_k}"
    if resolve_scope(retrieval, dataset) == "per_question":
        return f"{head} of the rows' own passages ({own} per question)"
    n = len(dataset.global_corpus())
    where = (f"corpus passages ({dataset.corpus_name})" if dataset.corpus_name is not None
             else "passages (every question's own, pooled)")
    return f"{head} of {n:,} {where}"


def resolved_retrieval_config(config: ExperimentConfig) -> RetrievalConfig:
    """``retrieval`` with the embedding cache folder resolved, so every cache shares one root.

    ``retrieval.dense.cache_dir`` wins when set; otherwise ``<cache.dir>/embeddings`` when
    ``cache.dir`` is set; otherwise the encoder's default ``~/.cache/ragray/embeddings``, which is
    the ``embeddings/`` folder of the default ``cache.dir``. (``retrieval.dense.cache: false``
    turns the embedding cache off whatever the folder.)
    """
    retrieval = config.retrieval
    if retrieval.dense.cache_dir is not None or config.cache.dir is None:
        return retrieval
    folder = str(Path(config.cache.dir).expanduser() / "embeddings")
    return retrieval.model_copy(update={"dense": retrieval.dense.model_copy(update={"cache_dir": folder})})


class RetrievalStage:
    """Retrieves the top-k hits per question, in either scope, as configured (and cached)."""

    def __init__(self, config: ExperimentConfig, cache: RetrievalCache | None = None) -> None:
        """``cache`` defaults to the caches of ``config.cache``."""
        self.config = config
        self.retriever = build_retriever(resolved_retrieval_config(config))
        self.reranker = build_reranker(config.rerank) if reranks(config.rerank.strategy) else None
        self.cache = cache if cache is not None else RetrievalCache.from_config(config.cache)
        self._configured = (self.retriever, self.reranker)
        self._setup: dict[str, str | None] = {}  # per scope, computed on first use

    @property
    def first_stage_k(self) -> int:
        return first_stage_k(self.config.retrieval.top_k, self.reranker is not None, self.config.rerank.candidates)

    @property
    def cache_stats(self) -> CacheStats:
        """Chunk set, index and retrieval cache hits and misses of this stage so far."""
        return self.cache.stats

    # --- cache keys -----------------------------------------------------------------------

    def _configured_retriever(self) -> bool:
        return self.retriever is self._configured[0]

    def _chunks_key(self, passages: Sequence[Passage], documents: bool) -> str | None:
        c = self.cache
        if not (c.use_chunksets or c.use_indexes or c.use_retrievals):
            return None
        return c.chunks_key(passages, self.config.chunking, documents)

    def _index_key(self, chunks_key: str | None) -> str | None:
        if chunks_key is None or not self.cache.use_indexes or not self._configured_retriever():
            return None
        return index_key(chunks_key, self.config.retrieval.filters, self.retriever)

    def _setup_key(self, scope: str) -> str | None:
        """Key of the retrieval setup in ``scope`` (``None``: results are not cached)."""
        if not self.cache.use_retrievals:
            return None
        if (self.retriever, self.reranker) != self._configured:
            log.debug("retriever or reranker replaced by hand: results are not cached")
            return None
        if scope not in self._setup:
            cfg = self.config.retrieval
            self._setup[scope] = setup_key(scope, cfg.top_k, cfg.min_score, cfg.filters, self.retriever,
                                           rerank_identity(self.config.rerank))
        return self._setup[scope]

    # --- corpus and index -----------------------------------------------------------------

    def _filtered(self, chunks: tuple[Passage, ...]) -> tuple[Passage, ...]:
        filters = self.config.retrieval.filters
        return tuple(p for p in chunks if passes_filters(p, filters)) if filters else chunks

    def _corpus(
        self, passages: Sequence[Passage], documents: bool, key: str | None = None
    ) -> tuple[Passage, ...]:
        """Chunked, filtered ``passages``; with a chunk set ``key`` the chunks come from the cache."""
        compute: Callable[[], tuple[Passage, ...]] = lambda: chunk_passages(
            passages, self.config.chunking, documents
        )
        chunks = self.cache.chunks(key, compute) if key is not None else compute()
        return self._filtered(chunks)

    def sources(self, dataset: Dataset) -> tuple[Passage, ...]:
        """The unchunked passages retrieval draws on: the global corpus, or every question's own."""
        if resolve_scope(self.config.retrieval, dataset) == "global":
            return dataset.global_corpus()
        seen: dict[str, Passage] = {}
        for q in dataset.questions:
            for p in q.passages:
                seen.setdefault(p.id, p)
        return tuple(seen.values())

    def chunks(self, dataset: Dataset) -> tuple[Passage, ...]:
        """The chunked passages retrieval searches: the global corpus, or every question's own."""
        source = self.sources(dataset)
        return self._corpus(source, dataset.documents, self._chunks_key(source, dataset.documents))

    def global_index(self, dataset: Dataset) -> SearchIndex:
        """The configured retriever's index over :meth:`chunks` (from the index cache if there)."""
        source = self.sources(dataset)
        return self._index_over(source, dataset.documents, self._chunks_key(source, dataset.documents))

    def _index_over(
        self, source: Sequence[Passage], documents: bool, chunks_key: str | None
    ) -> SearchIndex:
        corpus = self._corpus(source, documents, chunks_key)
        log.info("index of %d passages with %s", len(corpus), self.config.retrieval.retriever)
        return self.cache.index(self._index_key(chunks_key), self.retriever, corpus)

    def _question_index(self, question: Question, corpus: tuple[Passage, ...], documents: bool) -> SearchIndex:
        """One question's index: built in memory, or with ``cache.namespace`` kept in (and
        loaded from) the namespace's ephemeral store."""
        ephemeral = self.cache.ephemeral
        if ephemeral is None:
            return self.retriever.index(corpus)
        own = self.cache.chunks_key(question.passages, self.config.chunking, documents)
        return self.cache.index(self._index_key(own), self.retriever, corpus, store=ephemeral)

    # --- running --------------------------------------------------------------------------

    def _widen(self, result: QuestionHits, documents: Mapping[str, DocumentChunks]) -> QuestionHits:
        """``result`` after context expansion (``retrieval.expand``; a no-op when off)."""
        window = self.config.retrieval.expand.window
        if not window:
            return result
        return QuestionHits(result.question, expand_hits(result.hits, dict(documents), window))

    def _finish(self, question: Question, hits: Sequence[Hit]) -> QuestionHits:
        cfg = self.config.retrieval
        return QuestionHits(question, finish_hits(question.question, hits, self.reranker, cfg.top_k, cfg.min_score))

    def run(self, dataset: Dataset, progress: bool = True) -> Iterator[QuestionHits]:
        """Yield each question's hits, in dataset order."""
        before = self.cache_stats
        if resolve_scope(self.config.retrieval, dataset) == "global":
            yield from self._run_global(dataset, progress)
        else:
            yield from self._run_per_question(dataset, progress)
        after = self.cache_stats
        hit, miss = after.retrievals_hit - before.retrievals_hit, after.retrievals_miss - before.retrievals_miss
        if hit or miss:
            log.info("retrieval cache: %d of %d questions' hits reused", hit, hit + miss)

    def _run_per_question(self, dataset: Dataset, progress: bool) -> Iterator[QuestionHits]:
        if dataset.questions and not any(q.passages for q in dataset.questions):
            raise InputError(
                f"dataset '{dataset.name}' has no per-question passages (a corpus-only set such as "
                "BEIR); use retrieval.scope=global or auto (--scope global)"
            )
        setup = self._setup_key("per_question")
        expand = bool(self.config.retrieval.expand.window)
        bar = progress_bar(dataset.questions, desc="retrieve", unit="q", disable=not progress)
        for q in bar:
            own = self.cache.chunks_key(q.passages, self.config.chunking, dataset.documents) if setup else None
            key = hits_key(setup, own, q.question) if setup and own else None
            cached = self.cache.hits(setup, key) if setup and key else None
            corpus: tuple[Passage, ...] = ()
            if cached is not None:
                result = QuestionHits(q, cached)
                if expand:
                    corpus = self._corpus(q.passages, dataset.documents)
            else:
                corpus = self._corpus(q.passages, dataset.documents)
                index = self._question_index(q, corpus, dataset.documents)
                result = self._finish(q, index.search([q.question], self.first_stage_k)[0])
                if setup and key:
                    self.cache.put_hits(setup, key, result.hits)
            yield self._widen(result, index_documents(q.passages, corpus) if expand else {})

    def _run_global(self, dataset: Dataset, progress: bool) -> Iterator[QuestionHits]:
        """Cached questions are answered from the cache; the index is loaded or built only for
        the first batch holding a question that is not (a fully cached run never touches it)."""
        source = dataset.global_corpus()
        chunks_key = self._chunks_key(source, dataset.documents)
        setup = self._setup_key("global") if chunks_key else None
        index: SearchIndex | None = None
        documents: dict[str, DocumentChunks] | None = None
        expand = bool(self.config.retrieval.expand.window)
        questions = dataset.questions
        bar = progress_bar(total=len(questions), desc="retrieve", unit="q", disable=not progress)
        for start in range(0, len(questions), _GLOBAL_BATCH):
            batch = questions[start : start + _GLOBAL_BATCH]
            keys = [hits_key(setup, chunks_key, q.question) if setup and chunks_key else None
                    for q in batch]
            found = [self.cache.hits(setup, k) if setup and k else None for k in keys]
            searched: list[list[Hit]] = []
            if any(f is None for f in found):
                if index is None:
                    index = self._index_over(source, dataset.documents, chunks_key)
                # the whole batch, so queries are embedded in the same batches as without the
                # cache (sentence-transformers' output moves in the last bits with batch makeup)
                searched = index.search([q.question for q in batch], self.first_stage_k)
            for i, (q, key, cached) in enumerate(zip(batch, keys, found)):
                if cached is not None:
                    result = QuestionHits(q, cached)
                else:
                    result = self._finish(q, searched[i])
                    if setup and key:
                        self.cache.put_hits(setup, key, result.hits)
                if expand and documents is None:
                    documents = index_documents(source, self._corpus(source, dataset.documents, chunks_key))
                yield self._widen(result, documents or {})
                bar.update(1)
        bar.close()
