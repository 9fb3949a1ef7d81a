"""Explanation units of a retrieved context and the contexts left after removing some of them.

A unit is a passage, a sentence or a token (a whitespace-separated word) of one retrieved
passage, held as a character span of that passage's text. Removing units cuts exactly their
spans (and the whitespace that followed them) out of the text: everything kept is byte-for-byte
the original, so a changed answer is caused by the removal and nothing else. A passage whose
text is removed entirely is dropped from the prompt, and the template renumbers the rest.

Hierarchical explanation refines only some passages (or sentences): :func:`units_in` builds the
units of a finer level inside chosen parents, and every other part of the context stays fixed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ragray.data.chunkers.units import Span, sentence_spans, word_spans
from ragray.types import Passage

__all__ = ["Level", "Unit", "Context", "units_in", "passage_units"]

Level = Literal["passage", "sentence", "token"]
_SUFFIX = {"sentence": "s", "token": "t"}


@dataclass(frozen=True)
class Unit:
    """One explainable piece: ``span`` of passage ``passage`` (its index in the context)."""

    id: str
    level: Level
    passage: int
    span: Span
    text: str


def passage_units(passages: Sequence[Passage]) -> tuple[Unit, ...]:
    """One unit per passage (the whole text)."""
    return tuple(
        Unit(p.id, "passage", i, Span(0, len(p.text)), p.text) for i, p in enumerate(passages)
    )


def _spans(level: Level, text: str, within: Span) -> list[Span]:
    if level == "sentence":
        return [s for s in sentence_spans(text) if s.start >= within.start and s.end <= within.end]
    return word_spans(text, within.start, within.end)


def units_in(passages: Sequence[Passage], parents: Iterable[Unit], level: Level) -> tuple[Unit, ...]:
    """Units of ``level`` inside each of ``parents`` (passages or sentences), in text order.

    Unit ids extend the parent's: ``<passage id>#s2`` is the third sentence of a passage and
    ``<passage id>#s2.t0`` the first token of that sentence (``<passage id>#t0`` when the
    parent is the passage itself).
    """
    if level == "passage":
        raise ValueError("passage units have no parent; use passage_units")
    out: list[Unit] = []
    for parent in sorted(parents, key=lambda u: (u.passage, u.span.start)):
        text = passages[parent.passage].text
        sep = "." if parent.level != "passage" else "#"
        for j, span in enumerate(_spans(level, text, parent.span)):
            out.append(
                Unit(f"{parent.id}{sep}{_SUFFIX[level]}{j}", level, parent.passage, span, text[span.start : span.end])
            )
    return tuple(out)


def _cut(text: str, spans: Sequence[Span]) -> str:
    """``text`` without ``spans``; each cut also takes the whitespace after it (before it at the end)."""
    keep, pos = [], 0
    for start, end in sorted(spans):
        while end < len(text) and text[end].isspace():
            end += 1
        if end == len(text):
            while start > pos and text[start - 1].isspace():
                start -= 1
        keep.append(text[pos:start])
        pos = max(pos, end)
    keep.append(text[pos:])
    return "".join(keep)


@dataclass(frozen=True)
class Context:
    """The retrieved passages of one question, in retrieval order, and their explained units."""

    passages: tuple[Passage, ...]
    units: tuple[Unit, ...]

    @classmethod
    def at_level(cls, passages: Sequence[Passage], level: Level) -> Context:
        """Flat units of ``level`` over every passage."""
        passages = tuple(passages)
        whole = passage_units(passages)
        return cls(passages, whole if level == "passage" else units_in(passages, whole, level))

    def __len__(self) -> int:
        return len(self.units)

    def unit_ids(self, indices: Iterable[int]) -> list[str]:
        return [self.units[i].id for i in indices]

    def without(self, removed: Collection[int], order: Sequence[int] | None = None) -> tuple[Passage, ...]:
        """The passages with units ``removed`` (indices into :attr:`units`) cut out.

        ``order`` optionally permutes the passages (indices into :attr:`passages`) — the
        position controls. Passages left with no text are dropped.
        """
        cuts: dict[int, list[Span]] = {}
        for i in removed:
            u = self.units[i]
            cuts.setdefault(u.passage, []).append(u.span)
        out = []
        for j in order if order is not None else range(len(self.passages)):
            p = self.passages[j]
            if j not in cuts:
                out.append(p)
                continue
            text = _cut(p.text, cuts[j])
            if text.strip():
                out.append(replace(p, text=text))
        return tuple(out)
