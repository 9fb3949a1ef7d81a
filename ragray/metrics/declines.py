"""Did the model decline to answer? The correct response to an unanswerable question.

Two signals:

- **phrases**: the answer says it cannot answer — ragray's own instruction asks for
  :data:`DECLINE_PHRASE`, and models also write "I don't know", "the passages do not mention …",
  "cannot be determined", "no information", "unanswerable" … (:data:`DECLINE_PATTERNS`; matched on the
  lower-cased answer, so "not" inside a real answer such as "Notre Dame" does not count);
- **the log-prob of a decline**: where the backend scores, the mean per-token log-probability of
  :data:`DECLINE_PHRASE` against that of the model's own answer, under the same prompt. A model that
  wrote an answer but found declining about as likely (``decline_margin ≥ −margin``) is counted as
  leaning to decline only in ``decline_margin``; the verdict is the phrase's, so a greedy answer is
  never overruled by a phrase it did not write.
"""

from __future__ import annotations

import math
import re

from ragray.generation.prompts import DECLINE_PHRASE

__all__ = ["DECLINE_PATTERNS", "DECLINE_PHRASE", "decline_margin", "is_decline"]

DECLINE_PATTERNS: tuple[str, ...] = (
    r"\bpassages? (?:do|does|did)(?: not|n't) (?:say|mention|state|contain|provide|specify|include|answer|tell)",
    r"\b(?:text|context|documents?|sources?|information)(?: provided)? (?:do|does|did)(?: not|n't) "
    r"(?:say|mention|state|contain|provide|specify|include|answer|tell)",
    r"\b(?:is|are|was|were)(?: not|n't) (?:mentioned|stated|specified|given|provided|included|available|known)\b",
    r"\bnot (?:mentioned|stated|specified|provided|given) in\b",
    r"\b(?:cannot|can ?not|can't|could not|couldn't|unable to) (?:be )?(?:answer|determine|determined|tell|find|know|say)",
    r"\bno (?:information|mention|answer|data|details?|evidence)\b",
    r"\bi (?:do not|don't) know\b",
    r"^\s*(?:it is |it's )?unknown\s*[.!]?\s*$",
    r"\bunanswerable\b",
    r"\bnot enough information\b",
    r"\binsufficient (?:information|context)\b",
    r"^\s*(?:n/?a|none)\s*[.!]?\s*$",
)
_DECLINE = re.compile("|".join(f"(?:{p})" for p in DECLINE_PATTERNS))


def is_decline(answer: str | None) -> bool:
    """True when ``answer`` says it cannot answer (see :data:`DECLINE_PATTERNS`); an empty answer
    is not a decline (nothing was said)."""
    text = " ".join((answer or "").lower().replace("’", "'").split())
    return bool(text) and _DECLINE.search(text) is not None


def decline_margin(decline_logprob: float | None, decline_tokens: int | None, answer_logprob: float | None,
                   answer_tokens: int | None) -> float | None:
    """Mean per-token log-prob of :data:`DECLINE_PHRASE` minus that of the model's answer (nats per
    token; > 0: declining was the likelier reply per token). None where either was not scored."""
    values = (decline_logprob, decline_tokens, answer_logprob, answer_tokens)
    if any(v is None for v in values) or not decline_tokens or not answer_tokens:
        return None
    if math.isnan(decline_logprob) or math.isnan(answer_logprob):  # type: ignore[arg-type]
        return None
    return decline_logprob / decline_tokens - answer_logprob / answer_tokens  # type: ignore[operator]
