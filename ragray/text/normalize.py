"""SQuAD's answer normalization, shared by the answer metrics and the data builders."""

from __future__ import annotations

import re
import string

__all__ = ["normalize_answer"]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's answer normalization: lowercase, drop punctuation and articles, squash spaces."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split())
