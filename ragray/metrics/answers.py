"""Answer-quality metrics: SQuAD exact match / token F1, embedding metrics, cost, a summary.

Lexical (SQuAD v1.1 official evaluation script; ``norm`` = :func:`normalize_answer`: lowercase,
punctuation and the articles a/an/the removed, whitespace collapsed):

- EM(A, golds) = max_g 1[norm(A) = norm(g)]
- F1(A, golds) = max_g 2·P·R / (P + R), with P = |T_A ∩ T_g| / |T_A|, R = |T_A ∩ T_g| / |T_g|,
  T the token multisets of ``norm(·).split()`` and ∩ the multiset (``Counter``) intersection;
  F1 = 0 when the intersection is empty (so, as in v1.1, two answers that both normalize to
  nothing have EM 1 but F1 0).
- Both are ``None`` when there is no gold answer (never averaged in as 0).
- correct(A, golds) = 1[some norm(g) occurs in norm(A) as whole words] (gold containment): the
  primary "answered correctly" — a sentence such as "It was first lit in 1871." is right for the
  gold "1871" while its EM is 0 and its F1 low. A one-word gold of yes/no sets (PubMedQA) is found
  anywhere in the answer, so "yes, there is no ..." counts for both "yes" and "no": read it with EM.
  Passage markers ("[11]", "[2, 3]": a numbered prompt's citations, or a passage header the model
  echoes) are removed first, so "The Kell Maritime Museum\n\n[11] …" is not right for the gold "11".

Embedding (the evolutionary seed; E an encoder, cos(u, v) = u·v / (‖u‖ ‖v‖) clipped to
[-1, 1], 0 for a zero vector):

- recall@k (cosine) = 1[max_{c ∈ C, g ∈ golds} cos(E(c), E(g)) ≥ τ_recall], τ_recall = 0.75
  by default; ``None`` without a gold text, 0 without contexts
- Sim(A, G)  = max_{g ∈ golds} cos(E(A), E(g));  ``None`` without a gold text
- grounding  Sim(A, C) = cos(E(A), E(c_1 + "\\n\\n" + … + "\\n\\n" + c_n));
  ``None`` without contexts
- hallucination H = 1[Sim(A, G) < τ_h and Sim(A, C) < τ_h]; a ``None`` side is left out of the
  conjunction, both ``None`` → ``None``; the rate is mean H over questions where it is defined
- relevance = cos(E(A), E(Q))

Blank gold answers and blank contexts are dropped (treated as absent); a blank answer (or
question) has similarity 0.0 with everything, so it is never "grounded".

Cost: cost_usd = prompt_tokens / 1000 · prompt_per_1k + completion_tokens / 1000 ·
completion_per_1k; ``None`` when no price is given or a token count is unknown.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from ragray.errors import ConfigError, InputError
from ragray.metrics.similarity import normalize_answer

__all__ = [
    "TextEncoder",
    "contains_gold",
    "exact_match",
    "token_f1",
    "recall_at_k_cosine",
    "sim_answer_gold",
    "grounding",
    "hallucination_flag",
    "relevance",
    "embedding_metrics",
    "cost_usd",
    "summarize_answers",
    "EMBEDDING_KEYS",
]

#: keys of each dict returned by :func:`embedding_metrics`
EMBEDDING_KEYS = (
    "recall_at_k_cosine", "sim_answer_gold", "grounding", "hallucination", "relevance"
)


class TextEncoder(Protocol):
    """Anything that embeds texts like :meth:`ragray.encoders.SentenceEncoder.encode`."""

    def encode(
        self, texts: Sequence[str], *, normalize: bool = ..., cache: bool = ...
    ) -> np.ndarray: ...


# --- lexical: SQuAD v1.1 --------------------------------------------------------------------


def _texts(value: Sequence[str], name: str) -> list[str]:
    """``value`` as a list; a bare string (which would iterate as characters) is an error."""
    if isinstance(value, str):
        raise InputError(f"{name} must be a list of strings, not the string {value!r}")
    return list(value)


def _squad_f1(answer: str, gold: str) -> float:
    pred, ref = normalize_answer(answer).split(), normalize_answer(gold).split()
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def exact_match(answer: str, golds: Sequence[str]) -> float | None:
    """SQuAD v1.1 exact match: 1.0 if ``answer`` normalizes to a gold answer, ``None`` if none."""
    golds = _texts(golds, "golds")
    if not golds:
        return None
    norm = normalize_answer(answer)
    return float(any(norm == normalize_answer(g) for g in golds))


def token_f1(answer: str, golds: Sequence[str]) -> float | None:
    """SQuAD v1.1 token F1, max over gold answers; ``None`` if there is no gold answer."""
    golds = _texts(golds, "golds")
    if not golds:
        return None
    return max(_squad_f1(answer, g) for g in golds)


#: a passage marker: "[3]", "[2, 3]", "[1-4]" (not part of the answer's content)
_MARKER = re.compile(r"\[\s*\d+(?:\s*[,;\-–]\s*\d+)*\s*\]")


def blank_markers(answer: str) -> str:
    """``answer`` with its passage markers blanked to spaces of the same length (positions kept)."""
    return _MARKER.sub(lambda m: " " * len(m.group()), answer)


def contains_gold(answer: str | None, golds: Sequence[str] | None) -> bool | None:
    """The answer is correct by gold containment (see the module docstring); None without a gold
    answer (an empty or punctuation-only gold does not count)."""
    golds = [g for g in golds or () if normalize_answer(g)]
    if not golds:
        return None
    text = f" {normalize_answer(blank_markers(answer or ''))} "
    return any(re.search(rf"(?<!\S){re.escape(normalize_answer(g))}(?!\S)", text) for g in golds)


# --- embedding metrics ----------------------------------------------------------------------


def _present(texts: Iterable[str]) -> list[str]:
    return [t for t in texts if t.strip()]


class _Embedded:
    """Unit-norm embeddings of distinct non-blank texts, computed in one encoder call."""

    def __init__(self, encoder: TextEncoder, texts: Iterable[str]) -> None:
        distinct = list(dict.fromkeys(_present(texts)))
        self.row = {t: i for i, t in enumerate(distinct)}
        if not distinct:
            self.emb = np.zeros((0, 0), dtype=np.float64)
            return
        emb = np.asarray(encoder.encode(distinct, normalize=True, cache=False), dtype=np.float64)
        if emb.shape[0] != len(distinct):
            raise InputError(f"the encoder returned {emb.shape[0]} rows for {len(distinct)} texts")
        norms = np.linalg.norm(emb, axis=1, keepdims=True)
        self.emb = np.divide(emb, norms, out=np.zeros_like(emb), where=norms > 0)

    def cos(self, a: str, b: str) -> float:
        """cos(E(a), E(b)) in [-1, 1]; 0.0 when either text is blank."""
        if not a.strip() or not b.strip():
            return 0.0
        return float(np.clip(self.emb[self.row[a]] @ self.emb[self.row[b]], -1.0, 1.0))

    def max_cos(self, a: str, others: Sequence[str]) -> float:
        return max(self.cos(a, b) for b in others)


def _join(contexts: Sequence[str]) -> str:
    return "\n\n".join(contexts)


def _needed_texts(question: str, answer: str, contexts: list[str], golds: list[str]) -> list[str]:
    """Every text one record's metrics embed (blank ones are skipped by :class:`_Embedded`)."""
    texts = [answer, question, *golds]
    if golds:
        texts += contexts  # for recall@k, context by context
    if contexts and answer.strip():
        texts.append(_join(contexts))  # for grounding
    return texts


def hallucination_flag(sim_ag: float | None, sim_ac: float | None, tau_h: float) -> float | None:
    """1.0 if every known similarity (answer–gold, answer–contexts) is below ``tau_h``, else
    0.0; ``None`` when both are unknown."""
    known = [s for s in (sim_ag, sim_ac) if s is not None]
    if not known:
        return None
    return float(all(s < tau_h for s in known))


def _record(
    emb: _Embedded,
    question: str,
    answer: str,
    contexts: list[str],
    golds: list[str],
    tau_recall: float,
    tau_h: float,
) -> dict[str, float | None]:
    recall: float | None = None
    sim_ag: float | None = None
    if golds:
        sim_ag = emb.max_cos(answer, golds)
        hit = any(emb.max_cos(c, golds) >= tau_recall for c in contexts)
        recall = float(hit)
    sim_ac = emb.cos(answer, _join(contexts)) if contexts else None
    return {
        "recall_at_k_cosine": recall,
        "sim_answer_gold": sim_ag,
        "grounding": sim_ac,
        "hallucination": hallucination_flag(sim_ag, sim_ac, tau_h),
        "relevance": emb.cos(answer, question),
    }


def embedding_metrics(
    records: Sequence[Mapping[str, Any]],
    encoder: TextEncoder,
    tau_recall: float = 0.75,
    tau_h: float = 0.5,
) -> list[dict[str, float | None]]:
    """Embedding metrics of each record (keys :data:`EMBEDDING_KEYS`), in record order.

    A record maps ``question`` (str), ``answer`` (str), ``contexts`` (list of str, in rank
    order) and ``golds`` (list of str, possibly empty). Every distinct text of the whole batch
    is embedded in a single ``encoder.encode`` call.
    """
    parsed = []
    for i, r in enumerate(records):
        missing = [k for k in ("question", "answer", "contexts", "golds") if k not in r]
        if missing:
            raise InputError(f"record {i} is missing {', '.join(map(repr, missing))}")
        contexts = _present(_texts(r["contexts"], f"record {i} contexts"))
        golds = _present(_texts(r["golds"], f"record {i} golds"))
        parsed.append((r["question"], r["answer"], contexts, golds))
    emb = _Embedded(encoder, (t for p in parsed for t in _needed_texts(*p)))
    return [_record(emb, *p, tau_recall, tau_h) for p in parsed]


def recall_at_k_cosine(
    contexts: Sequence[str], gold_text: str | Sequence[str], encoder: TextEncoder, tau: float = 0.75
) -> float | None:
    """1.0 if some context's embedding has cosine ≥ ``tau`` with the gold text's (any of them);
    ``None`` without a gold text, 0.0 without contexts."""
    golds = _present([gold_text] if isinstance(gold_text, str) else gold_text)
    if not golds:
        return None
    ctx = _present(_texts(contexts, "contexts"))
    emb = _Embedded(encoder, [*ctx, *golds])
    return float(any(emb.max_cos(c, golds) >= tau for c in ctx))


def sim_answer_gold(answer: str, gold: str | Sequence[str], encoder: TextEncoder) -> float | None:
    """cos(E(answer), E(gold)), max over gold texts; ``None`` without a gold text."""
    golds = _present([gold] if isinstance(gold, str) else gold)
    if not golds:
        return None
    return _Embedded(encoder, [answer, *golds]).max_cos(answer, golds)


def grounding(answer: str, contexts: Sequence[str], encoder: TextEncoder) -> float | None:
    """cos(E(answer), E(contexts joined by blank lines)); ``None`` without contexts."""
    ctx = _present(_texts(contexts, "contexts"))
    if not ctx:
        return None
    joined = _join(ctx)
    return _Embedded(encoder, [answer, joined]).cos(answer, joined)


def relevance(answer: str, question: str, encoder: TextEncoder) -> float:
    """cos(E(answer), E(question))."""
    return _Embedded(encoder, [answer, question]).cos(answer, question)


# --- cost and summary -----------------------------------------------------------------------

_PRICE_KEYS = ("prompt_per_1k", "completion_per_1k")


def cost_usd(
    prompt_tokens: int | None, completion_tokens: int | None, price: Mapping[str, float] | None
) -> float | None:
    """Dollar cost of one call at ``price`` (USD per 1000 prompt / completion tokens).

    ``None`` when ``price`` is ``None`` or a token count is unknown.
    """
    if price is None or prompt_tokens is None or completion_tokens is None:
        return None
    missing = [k for k in _PRICE_KEYS if k not in price]
    if missing:
        raise ConfigError(f"price needs {' and '.join(_PRICE_KEYS)}, missing {', '.join(missing)}")
    for key in _PRICE_KEYS:
        if not price[key] >= 0:
            raise ConfigError(f"price.{key} must be >= 0, got {price[key]}")
    return (
        prompt_tokens / 1000 * float(price["prompt_per_1k"])
        + completion_tokens / 1000 * float(price["completion_per_1k"])
    )


#: row key -> summary key for the means of :func:`summarize_answers`
_MEANS = {
    "em": "em",
    "f1": "f1",
    "recall_at_k_cosine": "recall_at_k_cosine",
    "sim_answer_gold": "sim_answer_gold",
    "grounding": "grounding",
    "relevance": "relevance",
    "hallucination": "hallucination_rate",
    "latency_s": "latency_s",
    "prompt_tokens": "prompt_tokens",
    "completion_tokens": "completion_tokens",
}


def _values(rows: Sequence[Mapping[str, Any]], key: str) -> list[float]:
    out = []
    for r in rows:
        v = r.get(key)
        if v is not None and not (isinstance(v, float) and math.isnan(v)):
            out.append(float(v))
    return out


def summarize_answers(rows: Sequence[Mapping[str, Any]]) -> dict[str, float | int | None]:
    """Means over the rows where each metric is defined (``None`` and NaN are left out).

    Row keys read: ``em``, ``f1``, ``recall_at_k_cosine``, ``sim_answer_gold``, ``grounding``,
    ``relevance``, ``hallucination`` (its mean is ``hallucination_rate``), ``latency_s``,
    ``prompt_tokens``, ``completion_tokens``, ``cost_usd`` (summed into ``cost_usd_total``);
    a missing key counts as ``None``. ``n`` counts rows, ``n_with_gold`` the rows with a gold
    answer (``em`` defined). A metric defined for no row is ``None``.
    """
    out: dict[str, float | int | None] = {"n": len(rows), "n_with_gold": len(_values(rows, "em"))}
    for key, name in _MEANS.items():
        values = _values(rows, key)
        out[name] = sum(values) / len(values) if values else None
    costs = _values(rows, "cost_usd")
    out["cost_usd_total"] = sum(costs) if costs else None
    return out
