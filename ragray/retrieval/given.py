"""The ``given`` retriever: the passages in the order the dataset lists them, no search.

For questions whose passages were already retrieved (and ranked) by another system — your own
pipeline's output, a BEIR run file turned into JSONL, ragray's simulation mode — the dataset order
*is* the retrieval ranking: the first passage is rank 1. A passage's score is its
``meta["score"]`` when it is a number, else ``1 / rank``. Needs ``retrieval.scope: per_question``:
a global corpus has no order for a question. Nothing is cached: there is nothing to compute.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Real

from ragray.retrieval.base import RETRIEVERS, Retriever, SearchIndex
from ragray.types import Hit, Passage

__all__ = ["GivenOrder", "GivenRetriever"]


class GivenOrder(SearchIndex):
    """Returns its passages' first ``k``, in order, for any query."""

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        hits = []
        for rank, p in enumerate(self.passages[:k], start=1):
            score = p.meta.get("score")
            ok = isinstance(score, Real) and not isinstance(score, bool)
            hits.append(Hit(p, rank, float(score) if ok else 1.0 / rank))
        return [list(hits) for _ in queries]


@RETRIEVERS.register("given")
class GivenRetriever(Retriever):
    name = "given"
    ranks_corpus = False

    def index(self, passages: Sequence[Passage]) -> GivenOrder:
        return GivenOrder(passages)
