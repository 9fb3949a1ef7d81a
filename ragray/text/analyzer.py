"""The lexical analyzer behind BM25: lowercase word tokens, English stop words removed.

The stop-word list is NLTK's English list (179 words), the list the influence seed's BM25 used.
An optional Porter stemmer (PyStemmer's Snowball "porter", as bm25s uses) can be switched on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from ragray._imports import require

__all__ = ["ENGLISH_STOPWORDS", "Analyzer"]

ENGLISH_STOPWORDS: frozenset[str] = frozenset(
    """i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself
    yourselves he him his himself she she's her hers herself it it's its itself they them their
    theirs themselves what which who whom this that that'll these those am is are was were be been
    being have has had having do does did doing a an the and but if or because as until while of
    at by for with about against between into through during before after above below to from up
    down in out on off over under again further then once here there when where why how all any
    both each few more most other some such no nor not only own same so than too very s t can will
    just don don't should should've now d ll m o re ve y ain aren aren't couldn couldn't didn
    didn't doesn doesn't hadn hadn't hasn hasn't haven haven't isn isn't ma mightn mightn't mustn
    mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't weren weren't won won't wouldn
    wouldn't""".split()
)

_TOKEN = re.compile(r"\w+", re.UNICODE)


class Analyzer:
    """Turns text into BM25 terms. Callable: ``analyzer(text) -> list[str]``."""

    def __init__(self, stopwords: str = "english", stemmer: str = "none") -> None:
        self.stopwords: frozenset[str] = ENGLISH_STOPWORDS if stopwords == "english" else frozenset()
        self._stem: Callable[[list[str]], list[str]] | None = None
        if stemmer == "porter":
            stemmer_mod = require("Stemmer", extra="bm25", feature="BM25 stemming", package="PyStemmer")
            self._stem = stemmer_mod.Stemmer("porter").stemWords

    def __call__(self, text: str) -> list[str]:
        stop = self.stopwords
        # apostrophes split words ("don't" -> "don", "t"); both halves are stop words already
        tokens = [t for t in _TOKEN.findall(text.lower()) if t not in stop]
        return self._stem(tokens) if self._stem is not None else tokens

    def many(self, texts: Sequence[str]) -> list[list[str]]:
        return [self(t) for t in texts]
