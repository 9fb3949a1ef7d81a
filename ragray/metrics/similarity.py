"""Answer similarity: how much an ablated answer y' still says what the baseline y said.

All similarities are in [0, 1] and share one convention for degenerate inputs: two answers that
are identical (after stripping surrounding whitespace; two empty answers included) have
similarity 1; an empty answer against a non-empty one has similarity 0. Everything else is the
measure's own value (rouge-score itself would return 0 for identical punctuation-only answers).

- ``rouge_l``: ROUGE-L F1 from Google's ``rouge-score`` (its default tokenizer: lowercase,
  non-alphanumerics removed), the influence seed's measure.
- ``exact_match``: 1 if the SQuAD-normalized strings are equal (lowercase, punctuation and
  articles removed, whitespace collapsed), else 0.
- ``token_jaccard``: |A ∩ B| / |A ∪ B| over normalized token sets.
- ``edit``: 1 − Levenshtein(a, b) / max(|a|, |b|) over normalized characters.
"""

from __future__ import annotations

import re
import string
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from ragray._imports import require
from ragray.registry import Registry

__all__ = ["Similarity", "SIMILARITIES", "get_similarity", "normalize_answer"]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's answer normalization: lowercase, drop punctuation and articles, squash spaces."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split())


class Similarity(ABC):
    """sim(a, b) ∈ [0, 1]; :meth:`many` scores pairs."""

    name: ClassVar[str]

    def __call__(self, a: str, b: str) -> float:
        a, b = a.strip(), b.strip()
        if a == b:
            return 1.0
        if not a or not b:
            return 0.0
        return self._score(a, b)

    @abstractmethod
    def _score(self, a: str, b: str) -> float:
        """Similarity of two different, non-empty answers."""

    def many(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        return [self(a, b) for a, b in pairs]


SIMILARITIES: Registry[Similarity] = Registry("similarity")


@SIMILARITIES.register("rouge_l")
class RougeL(Similarity):
    name = "rouge_l"

    def __init__(self) -> None:
        rouge = require("rouge_score.rouge_scorer", extra="generate", feature="ROUGE-L", package="rouge-score")
        self._scorer = rouge.RougeScorer(["rougeL"], use_stemmer=False)

    def _score(self, a: str, b: str) -> float:
        return float(self._scorer.score(a, b)["rougeL"].fmeasure)


@SIMILARITIES.register("exact_match")
class ExactMatch(Similarity):
    name = "exact_match"

    def _score(self, a: str, b: str) -> float:
        return float(normalize_answer(a) == normalize_answer(b))


@SIMILARITIES.register("token_jaccard")
class TokenJaccard(Similarity):
    name = "token_jaccard"

    def _score(self, a: str, b: str) -> float:
        ta, tb = set(normalize_answer(a).split()), set(normalize_answer(b).split())
        union = ta | tb
        return len(ta & tb) / len(union) if union else 1.0  # both only punctuation/articles


def _levenshtein(a: str, b: str) -> int:
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        cur = [i]
        for j, cb in enumerate(b, start=1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


@SIMILARITIES.register("edit")
class EditSimilarity(Similarity):
    name = "edit"

    def _score(self, a: str, b: str) -> float:
        na, nb = normalize_answer(a), normalize_answer(b)
        longest = max(len(na), len(nb))
        return 1.0 - _levenshtein(na, nb) / longest if longest else 1.0


def get_similarity(name: str) -> Similarity:
    """An instance of the similarity registered as ``name`` (error lists the valid names)."""
    return SIMILARITIES.get(name)()
