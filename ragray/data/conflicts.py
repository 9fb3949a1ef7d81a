"""Conflicting sources with known truth: which of two equally relevant passages did the model take?

Gold labels cannot show what causal attribution is for: the gold passage is, by construction, the
one most relevant to the question, so a question–passage cosine finds it for free. Here relevance
cannot decide. From a QA record whose gold passage contains its answer ``a``:

- the **original** gold passage;
- a **copy** with every occurrence of ``a`` replaced by another question's answer ``b`` of the same
  kind (both numeric or both not, similar length) that appears nowhere in the passage: the two
  passages are equally relevant to the question, word for word, except for the answer;
- ``others`` distractors that contain neither ``a`` nor ``b`` (same title first, as SQuAD's other
  paragraphs of the article; then any);

in an order shuffled with a seed. The model's answer then says which source it took: it contains
``a`` and not ``b`` (the original) or ``b`` and not ``a`` (the copy) — :func:`taken_source`. An
answer with both or neither is unusable (the truth must come from the answer's content, never from
a label the model may give at random). Records are the JSONL dict shape ragray reads.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragray.text.normalize import normalize_answer

__all__ = ["ConflictCase", "conflict_cases", "taken_source"]


@dataclass(frozen=True)
class ConflictCase:
    """One constructed record and what tells its sources apart."""

    record: dict[str, Any]
    original_id: str
    copy_id: str
    answer: str  # a: in the original
    substitute: str  # b: in the copy


def _contains(text: str, phrase: str) -> bool:
    """``phrase`` in ``text`` as whole words, both normalized (single spaces between words, so a
    padded substring test is the whole-word match)."""
    norm = normalize_answer(phrase)
    return bool(norm) and f" {norm} " in f" {normalize_answer(text)} "


def taken_source(answer: str, original: str, substitute: str) -> str | None:
    """``original`` or ``copy`` when the answer contains exactly one of the two candidate answers
    (whole words, normalized), else None."""
    a, b = _contains(answer, original), _contains(answer, substitute)
    if a == b:
        return None
    return "original" if a else "copy"


def _kind(answer: str) -> tuple[bool, bool]:
    """Numbers stand in for numbers, names (capitalized) for names, phrases for phrases."""
    digit = any(c.isdigit() for c in answer)
    return digit, not digit and answer[:1].isupper()


def _replace(text: str, old: str, new: str) -> str:
    """``old`` replaced by ``new`` wherever it stands as whole words (any case)."""
    return re.sub(rf"(?<!\w){re.escape(old)}(?!\w)", lambda _: new, text, flags=re.IGNORECASE)


def conflict_cases(records: Sequence[Mapping[str, Any]], corpus: Iterable[Mapping[str, Any]], *,
                   others: int = 3, seed: int = 0) -> list[ConflictCase]:
    """One case per record whose first answer occurs in one of its gold passages and for which a
    substitute and enough distractors exist (the rest are skipped)."""
    rng = random.Random(seed)
    pool = list(corpus)
    by_title: dict[str, list[Mapping[str, Any]]] = {}
    for p in pool:
        by_title.setdefault(p.get("title") or "", []).append(p)
    answers = [(r["answers"][0], _kind(r["answers"][0])) for r in records if r.get("answers")]
    normed = [(b, k, normalize_answer(b)) for b, k in answers]  # normalized once, not once per record
    out = []
    for r in records:
        if not r.get("answers") or not r.get("gold_passage_ids"):
            continue
        a = r["answers"][0]
        gold = next((p for p in (*r.get("passages", ()), *pool)
                     if p["id"] in r["gold_passage_ids"] and _replace(p["text"], a, "\0") != p["text"]), None)
        if gold is None or not normalize_answer(a):
            continue
        kind, na, text = _kind(a), normalize_answer(a), f" {normalize_answer(gold['text'])} "
        subs = [b for b, k, nb in normed if k == kind and nb and f" {nb} " not in text and na not in nb and nb not in na]
        if not subs:
            continue
        b = rng.choice(subs)
        same = [p for p in by_title.get(gold.get("title") or "", []) if p["id"] != gold["id"]]
        rest = rng.sample(pool, min(len(pool), 20 * others))
        picks: list[Mapping[str, Any]] = []
        for p in (*rng.sample(same, len(same)), *rest):
            if len(picks) == others:
                break
            if p["id"] != gold["id"] and p not in picks and not _contains(p["text"], a) and not _contains(p["text"], b):
                picks.append(p)
        if len(picks) < others:
            continue
        # one copy per question: two questions on one paragraph replace different answers in it
        copy_id = f"{gold['id']}::copy::{r['id']}"
        copy = {"id": copy_id, "title": gold.get("title", ""), "text": _replace(gold["text"], a, b)}
        passages = [dict(gold), copy, *(dict(p) for p in picks)]
        rng.shuffle(passages)
        record = {"id": f"{r['id']}::conflict", "question": r["question"], "answers": [a],
                  "passages": passages, "gold_passage_ids": [],
                  "meta": {"original_id": gold["id"], "copy_id": copy_id, "substitute": b}}
        out.append(ConflictCase(record, gold["id"], copy_id, a, b))
    return out
