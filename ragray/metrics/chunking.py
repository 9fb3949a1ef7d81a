"""Chunking quality: chunk length, cohesion vs separation, and a gold-answer coverage proxy.

For chunks x_1..x_N (their ``text``; the title is not part of a chunk), an encoder E and
cos(u, v) = u·v / (‖u‖ ‖v‖) clipped to [-1, 1] (0 for a zero vector):

- length ℓ_i = number of whitespace-separated words of x_i, or with a tokenizer the number of
  its ``input_ids`` without special tokens; ``tokens_mean`` = mean ℓ, ``tokens_std`` = population
  standard deviation sqrt(mean (ℓ − mean ℓ)²); both over all N chunks.
- cohesion = mean over sampled chunks with m ≥ 2 sentences s_1..s_m
  (:func:`~ragray.data.chunkers.units.sentence_spans`) of
  (2 / (m(m−1))) Σ_{a<b} cos(E(s_a), E(s_b))  — how much a chunk is about one thing.
- separation = mean over pairs (x, next(x)) of cos(E(x), E(next(x))), x a sampled chunk and
  next(x) the chunk that follows it in the same ``doc_id`` (ordered by ``position``) — how much
  neighbouring chunks repeat each other.
- cohesion_minus_separation = cohesion − separation (higher is better).
- coverage = |{a ∈ answers : casefold(a) is a substring of casefold(x_i) for some i}| / |answers|
  over all N chunks and the non-blank answers: the share of gold answers that no chunk boundary
  cut apart. ``None`` without answers.

The embedding parts use a seeded uniform sample of at most ``max_chunks`` chunks (``n_sampled``),
so they stay cheap on large corpora; every text they need is embedded in one encoder call. A
part with nothing to measure (no chunk with two sentences, no consecutive pair) is ``None``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from ragray.data.chunkers.units import sentence_spans
from ragray.errors import InputError
from ragray.metrics.answers import TextEncoder
from ragray.types import Passage

__all__ = ["chunk_metrics"]

Tokenizer = Callable[..., Any]


def _lengths(texts: list[str], tokenizer: Tokenizer | None) -> np.ndarray:
    if tokenizer is None:
        return np.array([len(t.split()) for t in texts], dtype=np.float64)
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    return np.array([len(x) for x in ids], dtype=np.float64)


def _successors(chunks: Sequence[Passage]) -> dict[int, int]:
    """Index of each chunk → index of the next chunk of the same document (by position)."""
    by_doc: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(chunks):
        by_doc[c.doc_id].append(i)
    nxt: dict[int, int] = {}
    for idx in by_doc.values():
        idx.sort(key=lambda i: chunks[i].position)
        nxt.update(pairwise(idx))
    return nxt


def _unit_rows(emb: np.ndarray) -> np.ndarray:
    x = np.asarray(emb, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def _mean_pairwise_cos(unit: np.ndarray) -> float:
    m = unit.shape[0]
    cos = np.clip(unit @ unit.T, -1.0, 1.0)
    return float((cos.sum() - np.trace(cos)) / (m * (m - 1)))


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _coverage(texts: list[str], answers: Sequence[str]) -> float | None:
    wanted = [a.casefold() for a in answers if a.strip()]
    if not wanted:
        return None
    # NUL never occurs in an answer, so a match cannot straddle two chunks
    haystack = "\0".join(t.casefold() for t in texts)
    return sum(a in haystack for a in wanted) / len(wanted)


def _embedding_parts(
    chunks: Sequence[Passage], sample: list[int], encoder: TextEncoder
) -> dict[str, float | int | None]:
    nxt = _successors(chunks)
    pairs = [(i, nxt[i]) for i in sample if i in nxt]
    sentences: dict[int, list[str]] = {}
    for i in sample:
        text = chunks[i].text
        sents = [text[s:e] for s, e in sentence_spans(text)]
        if len(sents) >= 2:
            sentences[i] = sents
    texts = [s for ss in sentences.values() for s in ss]
    texts += [chunks[j].text for pair in pairs for j in pair]
    row = {t: r for r, t in enumerate(dict.fromkeys(texts))}
    unit = _unit_rows(encoder.encode(list(row), normalize=True, cache=False)) if row else None
    cohesion: list[float] = []
    separation: list[float] = []
    if unit is not None:
        cohesion = [_mean_pairwise_cos(unit[[row[s] for s in ss]]) for ss in sentences.values()]
        separation = [
            float(np.clip(unit[row[chunks[a].text]] @ unit[row[chunks[b].text]], -1.0, 1.0))
            for a, b in pairs
        ]
    coh, sep = _mean(cohesion), _mean(separation)
    return {
        "cohesion": coh,
        "separation": sep,
        "cohesion_minus_separation": coh - sep if coh is not None and sep is not None else None,
        "n_cohesion_chunks": len(cohesion),
        "n_separation_pairs": len(separation),
    }


def chunk_metrics(
    chunks: Sequence[Passage],
    encoder: TextEncoder,
    tokenizer: Tokenizer | None = None,
    answers: Sequence[str] = (),
    *,
    max_chunks: int = 2000,
    seed: int = 0,
) -> dict[str, float | int | None]:
    """Quality metrics of a chunked corpus (formulas in the module docstring).

    ``tokenizer`` is ``None`` (whitespace words) or a Hugging Face tokenizer (any callable
    taking a list of texts and ``add_special_tokens=False`` and returning ``{"input_ids": ...}``);
    ``answers`` are gold answers for the coverage proxy. Keys: ``n_chunks``, ``n_sampled``,
    ``tokens_mean``, ``tokens_std``, ``cohesion``, ``separation``,
    ``cohesion_minus_separation``, ``n_cohesion_chunks``, ``n_separation_pairs``, ``coverage``.
    """
    if max_chunks < 1:
        raise InputError(f"max_chunks must be >= 1, got {max_chunks}")
    if isinstance(answers, str):
        raise InputError(f"answers must be a list of strings, not the string {answers!r}")
    texts = [c.text for c in chunks]
    n = len(texts)
    if n > max_chunks:
        rng = np.random.default_rng(seed)
        sample = sorted(int(i) for i in rng.choice(n, size=max_chunks, replace=False))
    else:
        sample = list(range(n))
    lengths = _lengths(texts, tokenizer) if n else np.zeros(0)
    return {
        "n_chunks": n,
        "n_sampled": len(sample),
        "tokens_mean": float(lengths.mean()) if n else None,
        "tokens_std": float(lengths.std()) if n else None,
        **_embedding_parts(chunks, sample, encoder),
        "coverage": _coverage(texts, answers),
    }
