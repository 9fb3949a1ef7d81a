"""``cross_encoder``: any sentence-transformers ``CrossEncoder`` (hub id or local folder).

Scores are what ``CrossEncoder.predict`` returns with the model's own default activation (the
one saved in its config; sentence-transformers uses a sigmoid for single-label models without
one), so they are comparable to the model card's numbers.
"""

from __future__ import annotations

from typing import Any

from ragray._imports import require
from ragray.rerank.base import RERANKERS
from ragray.rerank.pairwise import PairwiseReranker

__all__ = ["CrossEncoderReranker", "DEFAULT_CROSS_ENCODER"]

DEFAULT_CROSS_ENCODER = "cross-encoder/ms-marco-MiniLM-L-6-v2"


@RERANKERS.register("cross_encoder")
class CrossEncoderReranker(PairwiseReranker):
    """``sentence_transformers.CrossEncoder(model, device=..., max_length=...)``."""

    name = "cross_encoder"
    default_model = DEFAULT_CROSS_ENCODER

    def _load(self, path: str) -> Any:
        st = require("sentence_transformers", extra="rerank", feature="the cross_encoder reranker")
        return st.CrossEncoder(path, device=self.device, max_length=self.max_length)

    def _predict(self, pairs: list[tuple[str, str]]) -> Any:
        return self._model.predict(
            pairs, batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True
        )
