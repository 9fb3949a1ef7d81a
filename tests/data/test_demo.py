"""Invariants of the packaged demo set, read with plain json (independent of the loaders)."""

from __future__ import annotations

import json
import re
from collections import Counter
from importlib import resources
from typing import Any

import pytest

KINDS = {
    "single": (12, 1),
    "multi_hop": (7, 2),
    "redundant": (4, 2),
    "conflict": (5, 1),
    "lexical_gap": (4, 1),
    "unanswerable": (4, 0),
}  # kind -> (number of questions, number of gold passages)
STOPWORDS = set(
    "a an the of in on at to for is was were be by and or what which who when where how many much"
    " does did do are from with that this it its as ever".split()
)


def contains(text: str, answer: str) -> bool:
    """``answer`` occurs in ``text`` as whole words ("31" does not match "1931" or "3,100")."""
    pattern = r"(?<![\w,.])" + re.escape(answer.lower()) + r"(?![\w]|,\d)"
    return re.search(pattern, text.lower()) is not None


def content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOPWORDS}


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    path = resources.files("ragray").joinpath("demo", "demo.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    rows = []
    for n, line in enumerate(lines, start=1):
        row = json.loads(line)
        assert isinstance(row, dict), f"line {n} is not a JSON object"
        rows.append(row)
    return rows


def passages_of(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for r in records for p in r["passages"]]


def test_record_shape(records: list[dict[str, Any]]) -> None:
    assert len(records) == 36
    assert sorted(r["id"] for r in records) == [f"demo-{n:03d}" for n in range(1, 37)]  # order: see below
    for r in records:
        assert set(r) == {"id", "question", "answers", "passages", "gold_passage_ids", "meta"}
        assert r["question"].strip().endswith("?")
        assert all(isinstance(a, str) and a.strip() for a in r["answers"])
        assert len(r["passages"]) == 10, r["id"]
        ids = [p["id"] for p in r["passages"]]
        assert len(set(ids)) == 10, f"{r['id']}: duplicate passage ids"
        assert set(r["gold_passage_ids"]) <= set(ids), f"{r['id']}: gold id not among passages"
        assert set(r["meta"]) <= {"topic", "kind", "superseded_passage_ids"}
        for p in r["passages"]:
            assert set(p) <= {"id", "title", "text", "meta"} and {"id", "title", "text"} <= set(p)
            assert re.fullmatch(r"demo-p\d{3}", p["id"])


def test_kinds_and_gold_counts(records: list[dict[str, Any]]) -> None:
    counts = Counter(r["meta"]["kind"] for r in records)
    assert counts == {kind: n for kind, (n, _) in KINDS.items()}
    for r in records:
        kind = r["meta"]["kind"]
        assert len(r["gold_passage_ids"]) == KINDS[kind][1], r["id"]
        assert (r["answers"] == []) == (kind == "unanswerable"), r["id"]
        assert r["meta"]["topic"]


def test_passage_lengths(records: list[dict[str, Any]]) -> None:
    lengths = [len(p["text"].split()) for p in passages_of(records)]
    assert 40 <= min(lengths) and max(lengths) <= 110


def test_shared_passages_are_identical(records: list[dict[str, Any]]) -> None:
    seen: dict[str, dict[str, Any]] = {}
    for p in passages_of(records):
        assert seen.setdefault(p["id"], p) == p, f"passage {p['id']} differs between records"
    texts = Counter(p["text"] for p in seen.values())
    assert max(texts.values()) == 1, "the same text under two ids"
    assert len(seen) == 80


def test_gold_passages_hold_the_answer(records: list[dict[str, Any]]) -> None:
    for r in records:
        by_id = {p["id"]: p for p in r["passages"]}
        gold = [by_id[g]["text"] for g in r["gold_passage_ids"]]
        with_answer = [any(contains(t, a) for a in r["answers"]) for t in gold]
        kind = r["meta"]["kind"]
        if kind == "multi_hop":
            assert sum(with_answer) == 1, r["id"]  # one hop names the answer, the other links it
        elif kind != "unanswerable":
            assert all(with_answer), r["id"]
        for pid, p in by_id.items():
            if pid not in r["gold_passage_ids"]:
                hits = [a for a in r["answers"] if contains(p["text"], a)]
                assert not hits, f"{r['id']}: non-gold {pid} contains {hits}"


def test_conflicts_name_a_superseded_passage(records: list[dict[str, Any]]) -> None:
    for r in records:
        superseded = r["meta"].get("superseded_passage_ids", [])
        assert bool(superseded) == (r["meta"]["kind"] == "conflict"), r["id"]
        ids = {p["id"] for p in r["passages"]}
        assert set(superseded) <= ids - set(r["gold_passage_ids"])


def test_lexical_gap_gold_shares_no_content_word(records: list[dict[str, Any]]) -> None:
    for r in (r for r in records if r["meta"]["kind"] == "lexical_gap"):
        (gold,) = [p for p in r["passages"] if p["id"] in r["gold_passage_ids"]]
        shared = content_words(r["question"]) & content_words(gold["title"] + " " + gold["text"])
        assert not shared, f"{r['id']}: gold shares {shared} with the question"


def test_sources_for_metadata_filters(records: list[dict[str, Any]]) -> None:
    unique = {p["id"]: p for p in passages_of(records)}.values()
    sources = Counter(p["meta"]["source"] for p in unique if "meta" in p)
    assert all(isinstance(s, str) for s in sources)
    assert {"harbour-records", "visitor-guide"} <= set(sources)
    assert 20 <= sum(sources.values()) < len(unique)


def test_the_first_twelve_are_two_of_each_kind(records: list[dict[str, Any]]) -> None:
    """README command 1 runs ``--limit 12``: every kind of question must be among them, twice."""
    kinds = Counter(r["meta"]["kind"] for r in records[:12])
    assert kinds == {k: 2 for k in ("single", "multi_hop", "redundant", "conflict", "lexical_gap", "unanswerable")}
