"""Chunkers: split passages (whole documents or long paragraphs) into retrieval-sized chunks.

Every chunker is a small :class:`Chunker` registered in :data:`CHUNKERS` and built from the
``chunking`` config section. A chunk is a :class:`~ragray.types.Passage` whose ``id`` is
``f"{doc_id}#c{position}"``, whose ``doc_id`` is the source passage's id (gold ids are matched
against it), whose ``position`` is the 0-based chunk index, and which keeps the source title and
meta. Chunk texts are exact substrings of the source text (whitespace inside a chunk is kept as
it was), so a chunk can always be located in its document.

Methods (``chunking.method``):

- ``none``: the passage unchanged;
- ``words``: windows of ``size`` words sharing ``overlap`` words (the influence seed's ~100-word
  passages);
- ``sentences``: windows of ``size`` sentences sharing ``overlap`` sentences (regex splitter aware
  of common abbreviations, initials and decimals; no model download);
- ``tokens``: windows of ``size`` tokenizer tokens sharing ``overlap`` tokens, cut on the
  tokenizer's character offsets;
- ``structure``: sections start at headings (markdown ``#``, underlined, or ALL-CAPS lines);
  paragraphs are packed into chunks of at most ``size`` words without crossing a heading;
- ``auto`` (resolved by :func:`resolve_method`): ``words`` for whole documents, ``none`` for
  passages that are already retrieval-sized.

Empty or whitespace-only texts give no chunks, whatever the method. The text units themselves
(word, sentence, token and section spans) live in :mod:`ragray.data.chunkers.units`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from ragray.config import ChunkingConfig
from ragray.data.chunkers.units import Span, sections, sentence_spans, token_spans, word_spans
from ragray.errors import ConfigError
from ragray.registry import Registry
from ragray.types import Passage

__all__ = [
    "Chunker",
    "CHUNKERS",
    "Span",
    "build_chunker",
    "chunk_passages",
    "resolve_method",
    "sentence_spans",
    "sliding_windows",
    "token_spans",
]


class Chunker(ABC):
    """Splits one passage into chunks; receives only the ``chunking`` config section."""

    name: ClassVar[str]

    def __init__(self, config: ChunkingConfig) -> None:
        self.config = config

    @abstractmethod
    def chunk(self, passage: Passage) -> list[Passage]:
        """The chunks of ``passage`` in document order (empty for an empty/blank text)."""


CHUNKERS: Registry[Chunker] = Registry("chunker")


def sliding_windows(n: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """Index ranges ``[i, j)`` of ``size`` units, consecutive ranges sharing ``overlap`` units.

    The last window ends at ``n`` and may be shorter; no window lies entirely inside the
    previous one. ``sliding_windows(250, 100, 20)`` → ``[(0, 100), (80, 180), (160, 250)]``.
    """
    if size < 1 or not 0 <= overlap < size:
        raise ConfigError(
            f"chunking needs size >= 1 and 0 <= overlap < size, got size={size}, overlap={overlap}"
        )
    windows: list[tuple[int, int]] = []
    start = 0
    while start < n:
        end = min(start + size, n)
        windows.append((start, end))
        if end == n:
            break
        start += size - overlap
    return windows


def _chunks_from_spans(
    passage: Passage, spans: Sequence[Span], config: ChunkingConfig
) -> list[Passage]:
    """Group unit spans into sliding windows and cut the source text at their edges."""
    texts = [
        passage.text[spans[i].start : spans[j - 1].end]
        for i, j in sliding_windows(len(spans), config.size, config.overlap)
    ]
    return _make_chunks(passage, texts)


def _make_chunks(
    passage: Passage, texts: Sequence[str], titles: Sequence[str] | None = None
) -> list[Passage]:
    return [
        Passage(
            id=f"{passage.id}#c{position}",
            text=text,
            title=titles[position] if titles is not None else passage.title,
            doc_id=passage.id,
            position=position,
            meta=passage.meta,
        )
        for position, text in enumerate(texts)
    ]


@CHUNKERS.register("none")
class NoChunker(Chunker):
    """Keeps each passage as it is (already retrieval-sized, e.g. HotpotQA paragraphs)."""

    name = "none"

    def chunk(self, passage: Passage) -> list[Passage]:
        return [passage] if passage.text.strip() else []


@CHUNKERS.register("words")
class WordChunker(Chunker):
    """Windows of ``size`` whitespace-separated words sharing ``overlap`` words."""

    name = "words"

    def chunk(self, passage: Passage) -> list[Passage]:
        return _chunks_from_spans(passage, word_spans(passage.text), self.config)


@CHUNKERS.register("sentences")
class SentenceChunker(Chunker):
    """Windows of ``size`` sentences sharing ``overlap`` sentences."""

    name = "sentences"

    def chunk(self, passage: Passage) -> list[Passage]:
        return _chunks_from_spans(passage, sentence_spans(passage.text), self.config)


@CHUNKERS.register("tokens")
class TokenChunker(Chunker):
    """Windows of ``size`` tokenizer tokens sharing ``overlap`` tokens (``chunking.tokenizer``).

    The tokenizer is loaded on first use (``minilm`` is the packaged all-MiniLM-L6-v2 one, which
    matches the default dense encoder). Chunks are cut on the tokens' character offsets, so a
    word split into sub-word tokens may be cut between two chunks.
    """

    name = "tokens"

    def chunk(self, passage: Passage) -> list[Passage]:
        if not passage.text.strip():
            return []
        spans = token_spans(passage.text, self.config.tokenizer)
        return _chunks_from_spans(passage, spans, self.config)


@CHUNKERS.register("structure")
class StructureChunker(Chunker):
    """Heading-aware chunks: paragraphs packed up to ``size`` words, never across a heading.

    A heading starts a new section: a markdown ``#`` line, a line underlined with ``===`` or
    ``---``, or a short ALL-CAPS line on its own. Heading lines are not part of any
    chunk's text; a chunk under a heading gets the title ``"<doc title> — <heading>"`` (or just
    the heading when the document has no title). A single paragraph longer than ``size`` words
    is split like the ``words`` method (``overlap`` applies only there).
    """

    name = "structure"

    def chunk(self, passage: Passage) -> list[Passage]:
        text, size = passage.text, self.config.size
        texts: list[str] = []
        titles: list[str] = []
        for section in sections(text):
            title = self._title(passage.title, section.heading)
            for start, end in self._pack(text, section.paragraphs, size):
                texts.append(text[start:end])
                titles.append(title)
        return _make_chunks(passage, texts, titles)

    @staticmethod
    def _title(doc_title: str, heading: str) -> str:
        if not heading:
            return doc_title
        return f"{doc_title} — {heading}" if doc_title else heading

    def _pack(self, text: str, paragraphs: Sequence[Span], size: int) -> list[Span]:
        """Greedy packing of whole paragraphs; an over-long paragraph is split by words."""
        out: list[Span] = []
        current: Span | None = None
        count = 0
        for para in paragraphs:
            words = word_spans(text, para.start, para.end)
            if len(words) > size:
                if current is not None:
                    out.append(current)
                    current, count = None, 0
                out.extend(
                    Span(words[i].start, words[j - 1].end)
                    for i, j in sliding_windows(len(words), size, self.config.overlap)
                )
            elif current is not None and count + len(words) <= size:
                current, count = Span(current.start, para.end), count + len(words)
            else:
                if current is not None:
                    out.append(current)
                current, count = para, len(words)
        if current is not None:
            out.append(current)
        return out


# --- applying a config ----------------------------------------------------------------------


def resolve_method(config: ChunkingConfig, documents: bool) -> str:
    """The concrete method: ``auto`` is ``words`` for whole documents, ``none`` otherwise."""
    if config.method == "auto":
        return "words" if documents else "none"
    return config.method


def build_chunker(config: ChunkingConfig, documents: bool = False) -> Chunker:
    """The chunker named by ``config.method`` (``auto`` resolved with ``documents``)."""
    return CHUNKERS.get(resolve_method(config, documents))(config)


def chunk_passages(
    passages: Sequence[Passage], config: ChunkingConfig, documents: bool
) -> tuple[Passage, ...]:
    """Chunk every passage with the configured method, keeping passage and chunk order.

    ``documents`` says whether the passages are whole documents (PDF pages, NQ articles), which
    the ``auto`` method splits into ``config.size``-word chunks, or already retrieval-sized
    passages, which ``auto`` keeps as they are.
    """
    chunker = build_chunker(config, documents)
    return tuple(chunk for passage in passages for chunk in chunker.chunk(passage))
