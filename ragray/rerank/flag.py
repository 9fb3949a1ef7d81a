"""``bge``: a BGE cross-encoder (``BAAI/bge-reranker-*``) through FlagEmbedding's FlagReranker.

Scores are the model's raw logits (FlagReranker's ``normalize=False``); apply a sigmoid for a
0..1 relevance. fp16 is used only on CUDA, where it is about twice as fast at no ranking cost.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragray._imports import require
from ragray.config import RerankConfig
from ragray.encoders import passage_text, resolve_device, resolve_model_path
from ragray.errors import BackendError
from ragray.rerank.base import RERANKERS, Reranker
from ragray.types import Passage

__all__ = ["BGEReranker", "DEFAULT_BGE_MODEL"]

logger = logging.getLogger(__name__)

DEFAULT_BGE_MODEL = "BAAI/bge-reranker-base"


@RERANKERS.register("bge")
class BGEReranker(Reranker):
    """FlagEmbedding ``FlagReranker`` on ``device``; ``model`` is a hub id or a local folder."""

    name = "bge"

    def __init__(
        self,
        model: str = DEFAULT_BGE_MODEL,
        device: str = "auto",
        batch_size: int = 32,
        max_length: int = 512,
    ) -> None:
        self.model_name = model
        self.device = resolve_device(device)
        self.batch_size = batch_size
        self.max_length = max_length
        self._reranker = self._load(resolve_model_path(model))

    @classmethod
    def from_config(cls, config: RerankConfig) -> BGEReranker:
        return cls(
            config.model or DEFAULT_BGE_MODEL, config.device, config.batch_size, config.max_length
        )

    def _load(self, path: str) -> Any:
        flag = require("FlagEmbedding", extra="rerank", feature="the bge reranker")
        logger.info("loading BGE reranker %s on %s", self.model_name, self.device)
        try:
            return flag.FlagReranker(
                path,
                use_fp16=self.device.startswith("cuda"),
                devices=self.device,
                batch_size=self.batch_size,
                max_length=self.max_length,
                normalize=False,
            )
        except Exception as exc:  # any loader failure (missing folder, hub offline, bad weights)
            raise BackendError(
                f"could not load bge reranker model '{self.model_name}': {exc}"
            ) from exc

    def score(self, query: str, passages: Sequence[Passage]) -> np.ndarray:
        """One logit per passage for ``(query, title + "\\n" + text)``."""
        if not passages:
            return np.zeros(0, dtype=np.float64)
        pairs = [(query, passage_text(p)) for p in passages]
        try:
            scores = self._reranker.compute_score(
                pairs, batch_size=self.batch_size, max_length=self.max_length
            )
        except RuntimeError as exc:
            raise BackendError(f"bge reranker '{self.model_name}' failed: {exc}") from exc
        return np.asarray(scores, dtype=np.float64).reshape(len(passages))
