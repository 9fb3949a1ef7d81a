"""Known truth on real passages: the answer follows the edit.

For a question whose answer string ``a`` stands in some of its passages, replace ``a`` (whole
words, any case) by a same-kind substitute ``b`` (a number for a number, a name for a name, a
phrase for a phrase; one that stands in none of the passages) in one passage, and — as a second
case — in every passage that holds it. Generate again: where the answer moves from ``a`` to ``b``,
the edited passage(s) produced the answer, by construction; where it keeps ``a``, the model did not
take ``a`` from there (another passage, or memory, gave it). An answer that holds both or neither
is unusable (:func:`ragray.data.conflicts.taken_source`).

This module builds the cases; scoring them needs one generation per case
(:mod:`ragray.pipeline.edit_test` makes them).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragray.data.conflicts import _contains, _kind, _replace
from ragray.text.normalize import normalize_answer

__all__ = ["EditCase", "answer_in", "edit_cases", "substitute_for"]


@dataclass(frozen=True)
class EditCase:
    """One edit of a question's passages: ``edited`` (passage ids) had ``answer`` replaced by
    ``substitute``; ``passages`` is the edited list, in the original order."""

    edited: tuple[str, ...]
    answer: str
    substitute: str
    passages: tuple[Mapping[str, Any], ...]
    every_copy: bool  # the edit reached every passage that held the answer


def answer_in(passages: Sequence[Mapping[str, Any]], answers: Sequence[str]) -> tuple[str | None, list[str]]:
    """The first gold answer that stands (whole words) in any passage, and the ids of the passages
    that hold it; ``(None, [])`` when none does."""
    for a in answers:
        if not normalize_answer(a):
            continue
        holding = [p["id"] for p in passages if _contains(p.get("text") or "", a)]
        if holding:
            return a, holding
    return None, []


def substitute_for(answer: str, pool: Sequence[str], passages: Sequence[Mapping[str, Any]], seed: str) -> str | None:
    """A same-kind answer from ``pool`` (other questions' answers) that stands in none of
    ``passages`` and neither contains nor is contained in ``answer`` — for a number, one of the same
    shape where the pool has one; seeded by ``seed``."""
    kind = _kind(answer)
    a = normalize_answer(answer)
    texts = [p.get("text") or "" for p in passages]
    candidates = sorted({b for b in pool if normalize_answer(b) and _kind(b) == kind
                         and a not in normalize_answer(b) and normalize_answer(b) not in a
                         and not any(_contains(t, b) for t in texts)})
    if kind[0]:  # a number: one of the same shape (a year for a year, not "31 metres"), the same leading
        # digit where there is one (1899 for 1871, not 3850: a small model declines an implausible edit)
        candidates = [b for b in candidates if _shape(b) == _shape(answer)] or candidates
        candidates = [b for b in candidates if b.strip()[:1] == answer.strip()[:1]] or candidates
    return random.Random(seed).choice(candidates) if candidates else None


def _shape(text: str) -> str:
    """``text`` with every digit read as 0: "1871" and "1899" share a shape, "2,400" and "31 metres" not."""
    return re.sub(r"\d", "0", text.strip().lower())


def edit_cases(passages: Sequence[Mapping[str, Any]], answers: Sequence[str], pool: Sequence[str],
               seed: str) -> list[EditCase]:
    """One case per passage holding the answer (that passage edited alone) and, where two or more
    hold it, one case with all of them edited; empty when no passage holds a gold answer or no
    substitute exists."""
    a, holding = answer_in(passages, answers)
    if a is None:
        return []
    b = substitute_for(a, pool, passages, seed)
    if b is None:
        return []

    def edited(ids: Sequence[str]) -> tuple[Mapping[str, Any], ...]:
        return tuple(dict(p, text=_replace(p["text"], a, b)) if p["id"] in ids else p for p in passages)

    def clean(case: EditCase) -> bool:  # the answer is gone from every edited passage, the substitute there
        return all(not _contains(p["text"], a) and _contains(p["text"], b) for p in case.passages if p["id"] in case.edited)

    cases = [EditCase((pid,), a, b, edited([pid]), len(holding) == 1) for pid in holding]
    if len(holding) > 1:
        cases.append(EditCase(tuple(holding), a, b, edited(holding), True))
    return [c for c in cases if clean(c)]
