"""``cross_encoder``: any sentence-transformers ``CrossEncoder`` (hub id or local folder).

Scores are what ``CrossEncoder.predict`` returns with the model's own default activation (the
one saved in its config; sentence-transformers uses a sigmoid for single-label models without
one), so they are comparable to the model card's numbers.
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

__all__ = ["CrossEncoderReranker", "DEFAULT_CROSS_ENCODER"]

logger = logging.getLogger(__name__)

DEFAULT_CROSS_ENCODER = "cross-encoder/ms-marco-MiniLM-L-6-v2"


@RERANKERS.register("cross_encoder")
class CrossEncoderReranker(Reranker):
    """``sentence_transformers.CrossEncoder(model, device=..., max_length=...)``."""

    name = "cross_encoder"

    def __init__(
        self,
        model: str = DEFAULT_CROSS_ENCODER,
        device: str = "auto",
        batch_size: int = 32,
        max_length: int = 512,
    ) -> None:
        self.model_name = model
        self.device = resolve_device(device)
        self.batch_size = batch_size
        self.max_length = max_length
        self._model = self._load(resolve_model_path(model))

    @classmethod
    def from_config(cls, config: RerankConfig) -> CrossEncoderReranker:
        return cls(
            config.model or DEFAULT_CROSS_ENCODER,
            config.device,
            config.batch_size,
            config.max_length,
        )

    def _load(self, path: str) -> Any:
        st = require("sentence_transformers", extra="rerank", feature="the cross_encoder reranker")
        logger.info("loading cross-encoder %s on %s", self.model_name, self.device)
        try:
            return st.CrossEncoder(path, device=self.device, max_length=self.max_length)
        except Exception as exc:  # any loader failure (missing folder, hub offline, bad weights)
            raise BackendError(
                f"could not load cross-encoder model '{self.model_name}': {exc}"
            ) from exc

    def score(self, query: str, passages: Sequence[Passage]) -> np.ndarray:
        """One score per passage for ``(query, title + "\\n" + text)``."""
        if not passages:
            return np.zeros(0, dtype=np.float64)
        pairs = [(query, passage_text(p)) for p in passages]
        try:
            scores = self._model.predict(
                pairs, batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True
            )
        except RuntimeError as exc:
            raise BackendError(f"cross-encoder '{self.model_name}' failed: {exc}") from exc
        return np.asarray(scores, dtype=np.float64).reshape(len(passages))
