"""The small immutable records every ragray stage passes around."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Passage", "Question", "Dataset", "SkippedRow", "Hit", "frozen_meta", "passage_text"]

class FrozenMeta(Mapping[str, Any]):
    """A read-only mapping that, unlike ``MappingProxyType``, pickles (records cross processes:
    Ray actors, multiprocessing)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        self._data = dict(data or {})

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"FrozenMeta({self._data!r})"

    def __reduce__(self) -> tuple[type, tuple[dict[str, Any]]]:
        return FrozenMeta, (self._data,)


_EMPTY: Mapping[str, Any] = FrozenMeta()


def frozen_meta(meta: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A read-only copy of ``meta`` (an empty mapping for ``None``)."""
    return FrozenMeta(meta) if meta else _EMPTY


@dataclass(frozen=True)
class Passage:
    """One retrievable unit of text.

    ``doc_id`` is the document the unit came from: equal to ``id`` for a passage that was not
    chunked, the source document's id for a chunk. ``position`` is the chunk's index inside its
    document (0 for unchunked passages). Gold ids are matched against ``doc_id``.
    """

    id: str
    text: str
    title: str = ""
    doc_id: str = ""
    position: int = 0
    meta: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, compare=False, hash=False)

    def __post_init__(self) -> None:
        if not self.doc_id:
            object.__setattr__(self, "doc_id", self.id)


@dataclass(frozen=True)
class Question:
    """A question with its gold answers, its own passages (may be empty) and gold passage ids."""

    id: str
    question: str
    answers: tuple[str, ...] = ()
    passages: tuple[Passage, ...] = ()
    gold_passage_ids: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, compare=False, hash=False)


@dataclass(frozen=True)
class SkippedRow:
    """A dataset row dropped because the user asked to skip bad rows."""

    source: str
    line: int
    reason: str


@dataclass(frozen=True)
class Dataset:
    """Questions plus an optional explicit corpus.

    ``documents`` is True when passages are whole documents (PDF pages, NQ articles) that the
    ``auto`` chunking mode should split; False when they are already retrieval-sized passages.
    ``corpus_name`` names the set's own corpus (a corpus file beside the questions or named in the
    config, a BEIR folder's ``corpus.jsonl``): retrieval searches it by default (scope ``auto``).
    None: the corpus, if any, is the union of the questions' passages.
    """

    name: str
    questions: tuple[Question, ...]
    corpus: tuple[Passage, ...] | None = None
    skipped: tuple[SkippedRow, ...] = ()
    documents: bool = False
    corpus_name: str | None = None
    #: unanswerable questions in the whole set (:mod:`ragray.data.answerable`), kept by :meth:`limit`
    n_unanswerable: int = 0

    def global_corpus(self) -> tuple[Passage, ...]:
        """The corpus file if there is one, else the union of all questions' passages by id."""
        if self.corpus is not None:
            return self.corpus
        seen: dict[str, Passage] = {}
        for q in self.questions:
            for p in q.passages:
                seen.setdefault(p.id, p)
        return tuple(seen.values())

    @property
    def passage_counts(self) -> tuple[int, int]:
        """The fewest and the most passages a question carries."""
        counts = [len(q.passages) for q in self.questions] or [0]
        return min(counts), max(counts)

    def limit(self, n: int | None) -> Dataset:
        """The first ``n`` questions; the corpus is kept whole (``--limit`` never cuts it)."""
        if n is None or n >= len(self.questions):
            return self
        return Dataset(
            name=self.name,
            questions=self.questions[:n],
            corpus=self.global_corpus(),
            skipped=self.skipped,
            documents=self.documents,
            corpus_name=self.corpus_name,
            n_unanswerable=self.n_unanswerable,
        )


@dataclass(frozen=True)
class Hit:
    """A retrieved passage: ``rank`` is 1-based (1 = best), ``score`` the retriever's score."""

    passage: Passage
    rank: int
    score: float


def passage_text(passage: Passage) -> str:
    """The string every retriever and reranker indexes or scores for a passage:
    ``title + "\n" + text`` when it has a title (as BEIR does), else ``text``."""
    return f"{passage.title}\n{passage.text}" if passage.title else passage.text
