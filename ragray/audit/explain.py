"""Optional LLM steps of the audit: the question's aspects and a plain-language verdict.

Both go through the configured generator in one batched call each and are reported beside the
numbers; they never change the score or the status (the audit works without them). A failed call
leaves the field empty and records the error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ragray.audit.why import fail_words
from ragray.generation import Generator
from ragray.generation.base import ChatPrompt, Message
from ragray.rows.audit import AuditEntry

__all__ = ["aspects_prompt", "explanation_prompt", "parse_aspects", "explain_audits"]

_ASPECTS_SYSTEM = (
    "List the distinct pieces of information a complete answer to the question needs, one short "
    "phrase per line, at most five lines, nothing else."
)
_EXPLAIN_SYSTEM = (
    "You explain retrieval audit results to a non-expert in at most two sentences. Say whether "
    "the retrieved documents are sufficient to answer safely and why."
)


def aspects_prompt(question: str) -> ChatPrompt:
    return (Message("system", _ASPECTS_SYSTEM), Message("user", question))


def explanation_prompt(question: str, entry: AuditEntry) -> ChatPrompt:
    facts = (
        f"Question: {question}\nStatus: {entry.status} (score {entry.score}, pass at "
        f"{entry.pass_score})\nCoverage of the expected documents: {entry.coverage}%\n"
        f"Noise among retrieved documents: {entry.noise_ratio}%\n"
        f"Missing expected documents: {', '.join(entry.missing or ()) or 'none'}\n"
        f"Retrieved documents not expected: {', '.join(entry.noise or ()) or 'none'}"
    )
    why = fail_words(entry, len(entry.retrieved or ()), entry.pass_score) if entry.pass_score is not None else None
    if why:  # the formula's ceiling, so a noise-only FAIL is not explained as bad retrieval
        facts += f"\nWhy it fails: {why}"
    return (Message("system", _EXPLAIN_SYSTEM), Message("user", facts))


def parse_aspects(text: str) -> list[str]:
    """Non-empty lines without list markers ("1.", "-", "*"), at most five."""
    out = []
    for line in text.splitlines():
        item = line.strip().lstrip("-*•").strip()
        head, _, rest = item.partition(" ")
        if head.rstrip(".)").isdigit() and rest:
            item = rest.strip()
        if item:
            out.append(item)
    return out[:5]


def explain_audits(generator: Generator, entries: Sequence[AuditEntry]) -> list[AuditEntry]:
    """``entries`` with ``aspects`` (every query), ``explanation`` (scored ones) and ``llm_error``."""
    scored = [i for i, e in enumerate(entries) if e.score is not None]
    aspect_gens = generator.generate([aspects_prompt(e.query or "") for e in entries])
    explain_gens = generator.generate([explanation_prompt(entries[i].query or "", entries[i]) for i in scored])
    out = [replace(e, aspects=tuple(parse_aspects(g.text)) if g.ok else (), llm_error=g.error)
           for e, g in zip(entries, aspect_gens)]
    for i, g in zip(scored, explain_gens):
        out[i] = replace(out[i], explanation=g.text.strip() if g.ok else None,
                         llm_error=out[i].llm_error or g.error)
    return out
