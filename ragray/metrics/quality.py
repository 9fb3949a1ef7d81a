"""Per-question answer quality, shared by ``ragray score`` (bring-your-own outputs) and ``ragray run``.

For each question: SQuAD exact match and token F1 against the gold answers, the embedding
metrics of :mod:`ragray.metrics.answers` (recall@k by cosine, Sim(A,G), grounding Sim(A,C),
hallucination, relevance), latency, tokens and cost (``metrics.prices``), and — when gold
document ids are known — the label-based noise ratio and coverage of the retrieved documents
(:mod:`ragray.audit.integrity`, over every retrieved document). ``ragray run`` adds the causal
noise ratio beside it: the share of retrieved passages whose measured influence is ≤ ε.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragray.audit.integrity import audit_documents
from ragray.config import MetricsConfig
from ragray.metrics.answers import EMBEDDING_KEYS, cost_usd, embedding_metrics, exact_match, token_f1

__all__ = ["QualityItem", "QualityScorer", "QUALITY_KEYS"]

QUALITY_KEYS = (
    "em", "f1", *EMBEDDING_KEYS, "label_noise_ratio", "label_coverage", "latency_s",
    "prompt_tokens", "completion_tokens", "cost_usd",
)


@dataclass(frozen=True)
class QualityItem:
    question: str
    answer: str
    contexts: tuple[str, ...]  # retrieved passage texts, rank order
    golds: tuple[str, ...] = ()
    doc_ids: tuple[str, ...] = ()  # retrieved document ids, rank order
    gold_ids: tuple[str, ...] = ()
    latency_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    model: str | None = None


class QualityScorer:
    """Scores batches of :class:`QualityItem` (one encoder call per batch)."""

    def __init__(self, config: MetricsConfig, encoder: Any = None, *, store: str | Path | None = None,
                 offload: Callable[[Callable[[], Any]], Any] | None = None) -> None:
        """``encoder``: default the configured sentence encoder; either way each distinct text is
        encoded once, batched across the questions in flight and without their turn (``offload``),
        and kept in the ``store`` file when one is given (:mod:`ragray.cache.embeddings`)."""
        self.config = config
        self._given = encoder
        self._store = store
        self._offload = offload
        self._encoder: Any = None

    @property
    def encoder(self) -> Any:
        if self._encoder is None:
            from ragray.cache.calls import CallStore
            from ragray.cache.embeddings import TextEmbeddings

            inner = self._given
            if inner is None:
                from ragray.encoders import SentenceEncoder

                inner = SentenceEncoder(self.config.encoder, cache=False)
            store = CallStore(self._store, label="embedding cache") if self._store is not None else None
            self._encoder = TextEmbeddings(inner, store, self._offload)
        return self._encoder

    def answer_passage_similarity(self, answer: str, passages: Sequence[str]) -> list[float] | None:
        """Cosine of the answer with each passage (the validity panel's no-model-call control);
        None when embedding metrics are off or the answer is empty."""
        if not self.config.embedding_on or not answer.strip() or not passages:
            return None
        emb = self.encoder.encode([answer, *passages], normalize=True, cache=False)
        return [float(v) for v in emb[1:] @ emb[0]]

    def question_passage_similarity(self, question: str, passages: Sequence[str]) -> list[float] | None:
        """Cosine of the question with each passage: what a dense retriever would rank by (the
        control that tells a relevance signal from a usage signal); None as above."""
        return self.answer_passage_similarity(question, passages)

    def score(self, items: Sequence[QualityItem]) -> list[dict[str, Any]]:
        c = self.config
        if c.embedding_on and items:
            records = [{"question": i.question, "answer": i.answer, "contexts": list(i.contexts),
                        "golds": list(i.golds)} for i in items]
            emb = embedding_metrics(records, self.encoder, c.tau_recall, c.tau_h)
        else:
            emb = [dict.fromkeys(EMBEDDING_KEYS) for _ in items]
        rows = []
        for item, e in zip(items, emb):
            label = audit_documents(item.doc_ids, item.gold_ids) if item.gold_ids else None
            price = c.prices.get(item.model) if item.model else None
            rows.append({
                "em": exact_match(item.answer, item.golds),
                "f1": token_f1(item.answer, item.golds),
                **e,
                "label_noise_ratio": label.noise_ratio if label else None,
                "label_coverage": label.coverage if label else None,
                "latency_s": item.latency_s,
                "prompt_tokens": item.prompt_tokens,
                "completion_tokens": item.completion_tokens,
                "cost_usd": cost_usd(item.prompt_tokens, item.completion_tokens,
                                     price.model_dump() if price else None),
            })
        return rows
