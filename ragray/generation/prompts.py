"""Prompt templates: a question plus numbered passages, as chat messages.

Passages are numbered 1..n in the order given (retrieval order). Under ablation the remaining
passages are renumbered, so every ablated prompt reads like an ordinary prompt and shares its
token prefix with the baseline up to the first removed passage — which is what lets backends
reuse the prefix's KV cache.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ragray.errors import ConfigError
from ragray.generation.base import ChatPrompt, Message
from ragray.types import Passage

__all__ = ["DECLINE_INSTRUCTION", "DECLINE_PHRASE", "PromptTemplate", "TEMPLATES", "closed_book", "get_template",
           "system_message"]

#: what ragray's instruction asks a model to say when the passages do not answer the question
DECLINE_PHRASE = "The passages do not say."
#: added to the system message where a set has unanswerable questions (``generation.decline``)
DECLINE_INSTRUCTION = f'If the passages do not contain the answer, reply only: "{DECLINE_PHRASE}"'


@dataclass(frozen=True)
class PromptTemplate:
    """A system message and a function rendering the user message."""

    name: str
    system: str
    render_user: Callable[[str, Sequence[Passage]], str]

    def build(self, question: str, passages: Sequence[Passage], system: str | None = None) -> ChatPrompt:
        return (Message("system", system or self.system), Message("user", self.render_user(question, passages)))


def _numbered(question: str, passages: Sequence[Passage]) -> str:
    blocks = []
    for i, p in enumerate(passages, start=1):
        head = f"[{i}] {p.title}\n" if p.title else f"[{i}] "
        blocks.append(head + p.text)
    context = "\n\n".join(blocks) if blocks else "(no passages)"
    return f"Passages:\n\n{context}\n\nQuestion: {question}\nAnswer with a short phrase."


def _short(question: str, passages: Sequence[Passage]) -> str:
    return _numbered(question, passages).removesuffix("Answer with a short phrase.") + "Answer in at most five words."


def _plain(question: str, passages: Sequence[Passage]) -> str:
    context = "\n\n".join(p.text for p in passages)
    return f"Context:\n{context}\n\nQuestion: {question}\nAnswer:"


TEMPLATES: dict[str, PromptTemplate] = {
    t.name: t
    for t in (
        PromptTemplate(
            "numbered",
            "You answer questions using only the numbered passages. Reply with the short answer "
            "only, no explanation.",
            _numbered,
        ),
        PromptTemplate("plain", "Answer the question briefly using the context.", _plain),
        # the usual extractive-QA instruction (SQuAD/HotpotQA-style evaluations): a few words, no
        # sentence, so the answer is the part that answers and little is invented after it
        PromptTemplate(
            "short",
            "Answer the question using only the numbered passages. Give only the answer: a few words "
            "(a name, a number, a date, yes or no) copied from the passages, not a sentence.",
            _short,
        ),
    )
}


def get_template(name: str) -> PromptTemplate:
    try:
        return TEMPLATES[name]
    except KeyError:
        raise ConfigError(
            f"generation.template: unknown template '{name}'; valid: {', '.join(sorted(TEMPLATES))}"
        ) from None


def system_message(template: PromptTemplate, system_prompt: str | None, decline: str) -> str:
    """The system message every prompt of a run carries: ``generation.system_prompt`` (else the
    template's), with :data:`DECLINE_INSTRUCTION` where ``generation.decline`` is ``always`` (a
    run resolves ``auto`` from its data set first: :func:`ragray.data.answerable.resolve_decline`)."""
    base = system_prompt or template.system
    return f"{base} {DECLINE_INSTRUCTION}" if decline == "always" else base


def closed_book(template: PromptTemplate, question: str, system: str | None = None) -> ChatPrompt:
    """The question with no passages (the closed-book control)."""
    return template.build(question, (), system)
