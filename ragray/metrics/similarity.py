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
- ``semantic``: cosine of sentence embeddings (the packaged MiniLM by default), clipped to
  [0, 1]; :meth:`Semantic.many` embeds every distinct text of a batch of pairs once.
- ``bleu``: sentence BLEU-4 / 100, equal to sacrebleu's ``sentence_bleu(b, [a])`` with its
  defaults (13a tokenizer, case-sensitive, "exp" smoothing, effective order). Not symmetric:
  ``a`` is the reference (the baseline answer), ``b`` the hypothesis (the ablated answer).

:func:`all_measures` builds several registered measures at once, :func:`score_pairs` scores the
same pairs with each of them.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from ragray._imports import require
from ragray.encoders import SentenceEncoder  # light: torch and the model load on first use
from ragray.registry import Registry
from ragray.text.normalize import normalize_answer  # re-exported: the metrics' normalization

__all__ = [
    "Similarity",
    "SIMILARITIES",
    "get_similarity",
    "all_measures",
    "score_pairs",
    "normalize_answer",
]



def _convention(a: str, b: str) -> float | None:
    """The shared degenerate-input value of two stripped answers, or ``None`` to measure them."""
    if a == b:
        return 1.0
    if not a or not b:
        return 0.0
    return None


def _clip01(x: float) -> float:
    return min(1.0, max(0.0, x))


class Similarity(ABC):
    """sim(a, b) ∈ [0, 1]; :meth:`many` scores pairs."""

    name: ClassVar[str]

    def __call__(self, a: str, b: str) -> float:
        a, b = a.strip(), b.strip()
        fixed = _convention(a, b)
        return fixed if fixed is not None else self._score(a, b)

    @abstractmethod
    def _score(self, a: str, b: str) -> float:
        """Similarity of two different, non-empty answers."""

    def many(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        return [self(a, b) for a, b in pairs]


SIMILARITIES: Registry[Similarity] = Registry("similarity")  # names: ragray.catalog


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


@SIMILARITIES.register("semantic")
class Semantic(Similarity):
    """Cosine similarity of L2-normalized sentence embeddings, clipped to [0, 1].

    ``model`` and ``device`` are those of :class:`ragray.encoders.SentenceEncoder`; the model
    is loaded on first use and shared with every encoder of the same (model, device). Answers
    are one-off texts, so the embedding cache is not used.
    """

    name = "semantic"

    def __init__(self, model: str = "minilm", device: str = "auto") -> None:
        self.encoder = SentenceEncoder(model, device, cache=False)

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.encoder.encode(list(texts), normalize=True, cache=False)

    def _score(self, a: str, b: str) -> float:
        emb = self._embed([a, b])
        return _clip01(float(emb[0] @ emb[1]))

    def many(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Scores of ``pairs``, embedding every distinct text that needs it in one batch."""
        stripped = [(a.strip(), b.strip()) for a, b in pairs]
        fixed = [_convention(a, b) for a, b in stripped]
        texts = list(
            dict.fromkeys(t for pair, f in zip(stripped, fixed) if f is None for t in pair)
        )
        row = {text: i for i, text in enumerate(texts)}
        emb = self._embed(texts) if texts else np.empty((0, 0), dtype=np.float32)
        return [
            f if f is not None else _clip01(float(emb[row[a]] @ emb[row[b]]))
            for (a, b), f in zip(stripped, fixed)
        ]


# --- BLEU: a re-implementation of sacrebleu 2.x sentence_bleu with its default arguments ------

_BLEU_ORDER = 4
# mteval-v13a.pl's language-independent tokenization, as in sacrebleu's TokenizerRegexp
_TOK13A = [
    (re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])"), r" \1 "),  # symbols and punctuation
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),  # period, comma unless after a digit
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),  # period, comma unless before a digit
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),  # dash after a digit
]


def _tokenize_13a(text: str) -> list[str]:
    """sacrebleu's default ``13a`` tokenizer (mteval-v13a), returning the token list."""
    line = text.rstrip()
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = line.replace("&quot;", '"').replace("&amp;", "&")
        line = line.replace("&lt;", "<").replace("&gt;", ">")
    line = f" {line} "
    for pattern, repl in _TOK13A:
        line = pattern.sub(repl, line)
    return line.split()


def _ngrams(tokens: list[str]) -> Counter[tuple[str, ...]]:
    return Counter(
        tuple(tokens[i : i + n])
        for n in range(1, _BLEU_ORDER + 1)
        for i in range(len(tokens) - n + 1)
    )


def _sentence_bleu(hypothesis: str, reference: str) -> float:
    """BLEU-4 of one hypothesis against one reference, in [0, 1] (sacrebleu's score / 100).

    Papineni et al. (2002): the geometric mean of clipped n-gram precisions (n = 1..4) times the
    brevity penalty exp(1 − r/c) when the hypothesis is shorter (c < r). As sacrebleu does by
    default for a sentence: orders for which the hypothesis has no n-grams at all are dropped
    ("effective order"), and an order with zero matches gets precision 1 / (2^k · total), k
    counting such orders so far ("exp" smoothing, NIST / Chen & Cherry 2014 method 3). No
    match at any order gives 0.
    """
    hyp, ref = _tokenize_13a(hypothesis), _tokenize_13a(reference)
    hyp_ngrams, ref_ngrams = _ngrams(hyp), _ngrams(ref)
    correct = [0] * _BLEU_ORDER
    total = [0] * _BLEU_ORDER
    for gram, count in hyp_ngrams.items():
        total[len(gram) - 1] += count
        correct[len(gram) - 1] += min(count, ref_ngrams.get(gram, 0))
    if not any(correct):
        return 0.0
    c, r = len(hyp), len(ref)
    brevity = math.exp(1 - r / c) if c < r else 1.0  # c > 0 here: some n-gram matched
    log_precisions: list[float] = []
    smooth = 1.0
    for n_correct, n_total in zip(correct, total):
        if n_total == 0:
            break  # the hypothesis is shorter than n: effective order n - 1
        if n_correct == 0:
            smooth *= 2
            log_precisions.append(math.log(100.0 / (smooth * n_total)))
        else:
            log_precisions.append(math.log(100.0 * n_correct / n_total))
    # in sacrebleu's 0-100 scale, so rounding matches it exactly
    return brevity * math.exp(sum(log_precisions) / len(log_precisions)) / 100.0


@SIMILARITIES.register("bleu")
class Bleu(Similarity):
    """Sentence BLEU with ``a`` as the reference and ``b`` as the hypothesis (not symmetric).

    Equals ``sacrebleu.sentence_bleu(b, [a]).score / 100`` (13a tokens, case-sensitive, "exp"
    smoothing, effective order) outside the shared identical / empty convention.
    """

    name = "bleu"

    def _score(self, a: str, b: str) -> float:
        return _clip01(_sentence_bleu(hypothesis=b, reference=a))


def get_similarity(name: str) -> Similarity:
    """An instance of the similarity registered as ``name`` (error lists the valid names)."""
    return SIMILARITIES.get(name)()


def all_measures(names: Sequence[str]) -> dict[str, Similarity]:
    """``{name: instance}`` for each registered name, in the given order (duplicates once).

    An unknown name raises the registry's :class:`~ragray.errors.ConfigError` listing the
    valid names before any measure is built.
    """
    classes = {name: SIMILARITIES.get(name) for name in names}
    return {name: cls() for name, cls in classes.items()}


def score_pairs(
    measures: dict[str, Similarity], pairs: Sequence[tuple[str, str]]
) -> dict[str, list[float]]:
    """``{name: [sim(a, b) for each pair]}``, each measure scoring all pairs with its ``many``."""
    pairs = list(pairs)
    return {name: measure.many(pairs) for name, measure in measures.items()}
