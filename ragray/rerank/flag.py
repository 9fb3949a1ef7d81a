"""``bge``: a BGE cross-encoder (``BAAI/bge-reranker-*``) through FlagEmbedding's FlagReranker.

Scores are the model's raw logits (FlagReranker's ``normalize=False``); apply a sigmoid for a
0..1 relevance. fp16 is used only on CUDA, where it is about twice as fast at no ranking cost.
"""

from __future__ import annotations

from typing import Any

from ragray._imports import require
from ragray.rerank.base import RERANKERS
from ragray.rerank.pairwise import PairwiseReranker

__all__ = ["BGEReranker", "DEFAULT_BGE_MODEL"]

DEFAULT_BGE_MODEL = "BAAI/bge-reranker-base"


@RERANKERS.register("bge")
class BGEReranker(PairwiseReranker):
    """FlagEmbedding ``FlagReranker`` on ``device``; ``model`` is a hub id or a local folder."""

    name = "bge"
    default_model = DEFAULT_BGE_MODEL

    def _load(self, path: str) -> Any:
        flag = require("FlagEmbedding", extra="rerank", feature="the bge reranker")
        return flag.FlagReranker(
            path,
            use_fp16=self.device.startswith("cuda"),
            devices=self.device,
            batch_size=self.batch_size,
            max_length=self.max_length,
            normalize=False,
        )

    def _predict(self, pairs: list[tuple[str, str]]) -> Any:
        return self._model.compute_score(pairs, batch_size=self.batch_size, max_length=self.max_length)
