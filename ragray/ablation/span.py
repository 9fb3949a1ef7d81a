"""The part of a baseline answer that log-prob measures score (``influence.answer_span``).

A 32-token answer often starts with what answers the question and goes on with what the model
invents ("…31 metres tall, painted plain white, and shows a red flash every 15 seconds": the first
clause from the gold passage, the tail from a distractor). Scoring the whole answer lets the
invented tail decide which passage looks used. A span keeps the part that answers:

- ``full``: the whole answer (the seed-compatible default);
- ``first_sentence``: up to the first sentence end (``.``, ``!`` or ``?`` followed by a space and
  an upper-case letter, a digit or a quote, or a line break); a decimal point or an abbreviation
  followed by a lower-case word does not end it;
- ``first_line``: up to the first line break.

A causal LM's log-probability of a prefix does not depend on what follows it, so scoring the span
is exactly scoring the first tokens of the answer (up to where the span's last token ends).
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["ANSWER_SPANS", "answer_span"]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'“(])|\n")


def _full(answer: str) -> str:
    return answer


def _first_sentence(answer: str) -> str:
    text = answer.strip()
    found = _SENTENCE_END.search(text)
    return text[: found.start()].rstrip() if found else text


def _first_line(answer: str) -> str:
    text = answer.strip()
    return text.split("\n", 1)[0].rstrip()


ANSWER_SPANS: dict[str, Callable[[str], str]] = {
    "full": _full,
    "first_sentence": _first_sentence,
    "first_line": _first_line,
}


def answer_span(name: str) -> Callable[[str], str]:
    """The span function called ``name`` (an unknown name lists the valid ones)."""
    try:
        return ANSWER_SPANS[name]
    except KeyError:
        raise ValueError(f"influence.answer_span: unknown span '{name}'; valid: {', '.join(ANSWER_SPANS)}") from None
