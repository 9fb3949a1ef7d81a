"""Context expansion: widen each retrieved chunk with its neighbours from the same document.

Search works best on small chunks, generation on enough surrounding text ("small-to-big"
retrieval, the seeds' RAG v4). With ``retrieval.expand.window = w`` every final hit — a chunk at
``position`` p of document d — becomes the text of d's chunks p−w … p+w, cut from the source
document itself (chunks of the overlapping chunkers share words; the span is taken once, exactly
as written). Hits of one document whose widened spans overlap or touch are merged into a single
passage at the best rank among them, so no text is handed to the generator twice; ranks are then
renumbered 1..n and each merged passage keeps its best hit's score.

A widened passage keeps ``doc_id`` (gold ids still match), takes ``position`` = its first chunk and
the id ``"{doc_id}#c{first}-{last}"``. A hit whose document is not in the corpus (or a document of
one chunk) stays as it is. Expansion runs after the retrieval cache: hits are cached unwidened, so
configurations that differ only in ``window`` share them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from ragray.types import Hit, Passage

__all__ = ["DocumentChunks", "expand_hits", "index_documents"]


@dataclass(frozen=True)
class DocumentChunks:
    """One source document and the character span of each of its chunks, by position."""

    source: Passage
    spans: tuple[tuple[int, int] | None, ...]  # None: chunk text not found in the source

    def text(self, first: int, last: int) -> str | None:
        """The source text from chunk ``first``'s start to chunk ``last``'s end (None: unknown)."""
        a, b = self.spans[first], self.spans[last]
        if a is None or b is None:
            return None
        return self.source.text[a[0] : max(b[1], a[1])]


def _locate(text: str, chunks: Sequence[Passage]) -> tuple[tuple[int, int] | None, ...]:
    """Each chunk's span in ``text``: chunks are in-order substrings, so each is searched from
    just after the previous chunk's start (overlapping windows start later, never earlier)."""
    spans: list[tuple[int, int] | None] = []
    cursor = 0
    for chunk in chunks:
        at = text.find(chunk.text, cursor)
        if at < 0:
            spans.append(None)
            continue
        spans.append((at, at + len(chunk.text)))
        cursor = at + 1
    return tuple(spans)


def index_documents(sources: Iterable[Passage], chunks: Iterable[Passage]) -> dict[str, DocumentChunks]:
    """``doc_id`` → its source and chunk spans, for the documents with at least two chunks
    (``chunks`` are those retrieval searched; ``sources`` the passages they were cut from)."""
    by_doc: dict[str, list[Passage]] = {}
    for chunk in chunks:
        by_doc.setdefault(chunk.doc_id, []).append(chunk)
    out: dict[str, DocumentChunks] = {}
    for source in sources:
        parts = by_doc.get(source.id)
        if not parts or len(parts) < 2:
            continue
        parts.sort(key=lambda p: p.position)
        if [p.position for p in parts] != list(range(len(parts))):
            continue  # filtered or foreign chunks: positions are not a plain 0..n-1 run
        out[source.id] = DocumentChunks(source, _locate(source.text, parts))
    return out


@dataclass
class _Group:
    doc: DocumentChunks | None
    hit: Hit  # the best-ranked hit of the group
    first: int
    last: int


def expand_hits(hits: Sequence[Hit], documents: dict[str, DocumentChunks], window: int) -> tuple[Hit, ...]:
    """``hits`` widened by ``window`` chunks each side and merged per document (module docstring)."""
    if window <= 0:
        return tuple(hits)
    groups: list[_Group] = []
    for hit in sorted(hits, key=lambda h: h.rank):
        p = hit.passage
        doc = documents.get(p.doc_id)
        if doc is None or not 0 <= p.position < len(doc.spans):
            groups.append(_Group(None, hit, p.position, p.position))
        else:
            first, last = max(0, p.position - window), min(len(doc.spans) - 1, p.position + window)
            groups.append(_Group(doc, hit, first, last))
    _merge(groups)
    return tuple(Hit(_widened(g), rank, g.hit.score) for rank, g in enumerate(groups, start=1))


def _merge(groups: list[_Group]) -> None:
    """Merge groups of one document whose spans overlap or touch into the better-ranked one,
    until none is left (a widened group can bridge to a further one)."""
    merged = True
    while merged:
        merged = False
        for i, g in enumerate(groups):
            for j in range(i + 1, len(groups)):
                h = groups[j]
                if g.doc is not None and h.doc is g.doc and h.first <= g.last + 1 and g.first <= h.last + 1:
                    g.first, g.last = min(g.first, h.first), max(g.last, h.last)
                    del groups[j]
                    merged = True
                    break
            if merged:
                break


def _widened(group: _Group) -> Passage:
    p = group.hit.passage
    if group.doc is None or (group.first == group.last == p.position):
        return p
    text = group.doc.text(group.first, group.last)
    if text is None:
        return p
    return replace(p, id=f"{p.doc_id}#c{group.first}-{group.last}", text=text, position=group.first)
