"""Why an audit FAIL fails, in words: a missed gold document, or only the noise the formula
charges when a query has fewer gold documents than k (then it cannot PASS at that k). The
console, the report and the optional LLM explanation all say it the same way."""

from __future__ import annotations

from collections.abc import Sequence

from ragray.audit.integrity import FAIL
from ragray.rows.audit import AuditEntry

__all__ = ["fail_words", "gold_words"]


def gold_words(n: int) -> str:
    return f"{n} gold document{'s' if n != 1 else ''}"


def _ids(ids: Sequence[str], most: int = 3) -> str:
    shown = ", ".join(ids[:most])
    return shown + (f" and {len(ids) - most} more" if len(ids) > most else "")


def fail_words(e: AuditEntry, k: int, pass_score: int) -> str | None:
    """Why a FAIL fails, in words (None for a PASS or an unscored query)."""
    if e.status != FAIL:
        return None
    n_gold = len(e.relevant or ()) + len(e.missing or ())
    ceiling = (f"with {gold_words(n_gold)}, top-{k} scores at most {e.best_score} (< {pass_score})"
               if e.cannot_pass(pass_score) else None)
    if e.found_all:
        n_noise = len(e.noise or ())
        return (f"every gold document is in the top {k}; the formula charges the other {n_noise} as noise"
                + (f": {ceiling}" if ceiling else ""))
    words = f"missed {_ids(e.missing or ())} ({len(e.missing or ())} of {gold_words(n_gold)})"
    return words + (f"; even found, {ceiling}" if ceiling else "")
