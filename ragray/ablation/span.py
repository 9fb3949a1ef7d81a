"""The part of a baseline answer that log-prob measures score (``influence.answer_span``).

A 32-token answer often starts with what answers the question and goes on with what the model
invents ("…31 metres tall, painted plain white, and shows a red flash every 15 seconds": the first
clause from the gold passage, the tail from a distractor). Scoring the whole answer lets the
invented tail decide which passage looks used. A span keeps the part that answers:

- ``full``: the whole answer (the default until 2026-11-28);
- ``first_sentence``: up to the first sentence end (``.``, ``!`` or ``?`` followed by a space and
  an upper-case letter, a digit or a quote, or a line break); a decimal point or an abbreviation
  followed by a lower-case word does not end it;
- ``first_line``: up to the first line break;
- ``first_clause``: up to the first line break, sentence end, or comma or semicolon followed by a
  space ("…31 metres tall" of the answer above); a comma inside a number ("3,100") does not end it;
- ``through_gold`` (the default): up to the end of the first gold answer the answer contains ("…is
  31 metres" for the gold "31 metres"), so a right answer is credited for the part that is right;
  the whole answer where it contains no gold answer (a wrong answer, or a question without one).
  Chosen on known truth (docs/trust.md, "What is scored"); ``first_clause`` was tried and cut
  before the answer in bridge questions ("The film starring Roy Rogers and his wife").

A causal LM's log-probability of a prefix does not depend on what follows it, so scoring the span
is exactly scoring the first tokens of the answer (up to where the span's last token ends).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from ragray.metrics.answers import blank_markers, contains_gold

__all__ = ["ANSWER_SPANS", "Span", "answer_span"]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'“(])|\n")
_CLAUSE_END = re.compile(_SENTENCE_END.pattern + r"|[,;](?=\s)")


#: a span: (the baseline answer, the question's gold answers) -> the prefix of the answer scored
Span = Callable[[str, Sequence[str]], str]


def _full(answer: str, golds: Sequence[str] = ()) -> str:
    return answer


def _first_sentence(answer: str, golds: Sequence[str] = ()) -> str:
    text = answer.strip()
    found = _SENTENCE_END.search(text)
    return text[: found.start()].rstrip() if found else text


def _first_clause(answer: str, golds: Sequence[str] = ()) -> str:
    text = answer.strip()
    found = _CLAUSE_END.search(text)
    return (text[: found.start()].rstrip() or text) if found else text


def _gold_pattern(gold: str) -> re.Pattern[str] | None:
    """The gold answer's words in order, any punctuation or spacing between them, a leading article
    optional ("the first Saturday of September" finds "first Saturday of September"; "1.2 km"
    finds "1.2 km")."""
    words = re.findall(r"\w+", gold.lower())
    while words and words[0] in ("a", "an", "the") and len(words) > 1:
        words = words[1:]
    return re.compile(r"(?<!\w)" + r"\W+".join(map(re.escape, words)) + r"(?!\w)", re.I) if words else None


def _through_gold(answer: str, golds: Sequence[str] = ()) -> str:
    text = answer.strip()
    if not golds or not contains_gold(text, golds):
        return answer  # exactly what ``full`` scores
    # where the gold answers occur, passage markers blanked as ``contains_gold`` ignores them
    searched = blank_markers(text)
    found = [m for m in (p.search(searched) for p in map(_gold_pattern, golds) if p is not None) if m]
    if not found:
        return answer
    # the gold answer that starts first, the longest there ("31 metres" rather than "31")
    return text[: min(found, key=lambda m: (m.start(), -m.end())).end()]


def _first_line(answer: str, golds: Sequence[str] = ()) -> str:
    text = answer.strip()
    return text.split("\n", 1)[0].rstrip()


ANSWER_SPANS: dict[str, Span] = {
    "full": _full,
    "first_sentence": _first_sentence,
    "first_line": _first_line,
    "first_clause": _first_clause,
    "through_gold": _through_gold,
}


def answer_span(name: str) -> Span:
    """The span function called ``name`` (an unknown name lists the valid ones)."""
    try:
        return ANSWER_SPANS[name]
    except KeyError:
        raise ValueError(f"influence.answer_span: unknown span '{name}'; valid: {', '.join(ANSWER_SPANS)}") from None
