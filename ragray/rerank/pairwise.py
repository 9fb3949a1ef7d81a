"""Shared frame of the cross-encoder rerankers: load once, score (query, passage) pairs."""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ragray.config import RerankConfig
from ragray.encoders import resolve_device, resolve_model_path
from ragray.errors import BackendError, RagrayError
from ragray.model_loads import MODEL_LOADS
from ragray.rerank.base import Reranker
from ragray.types import Passage, passage_text

__all__ = ["PairwiseReranker"]

logger = logging.getLogger(__name__)


class PairwiseReranker(Reranker):
    """A cross-encoder: ``model`` (hub id or local folder) loaded at construction, so a bad model
    fails when the pipeline is built; subclasses say how to load and how to predict."""

    default_model: ClassVar[str]

    def __init__(
        self, model: str | None = None, device: str = "auto", batch_size: int = 32, max_length: int = 512
    ) -> None:
        self.model_name = model or self.default_model
        self.device = resolve_device(device)
        self.batch_size = batch_size
        self.max_length = max_length
        logger.info("loading %s reranker %s on %s", self.name, self.model_name, self.device)
        try:
            with MODEL_LOADS:
                self._model = self._load(resolve_model_path(self.model_name))
        except RagrayError:
            raise  # e.g. the missing extra: already says what to install
        except Exception as exc:  # any loader failure (missing folder, hub offline, bad weights)
            raise BackendError(f"could not load {self.name} reranker model '{self.model_name}': {exc}") from exc

    @classmethod
    def from_config(cls, config: RerankConfig) -> PairwiseReranker:
        return cls(config.model, config.device, config.batch_size, config.max_length)

    @abstractmethod
    def _load(self, path: str) -> Any:
        """Load the backend model from a folder or hub id."""

    @abstractmethod
    def _predict(self, pairs: list[tuple[str, str]]) -> Any:
        """Backend scores for ``pairs``."""

    def score(self, query: str, passages: Sequence[Passage]) -> np.ndarray:
        """One score per passage for ``(query, title + "\\n" + text)``."""
        if not passages:
            return np.zeros(0, dtype=np.float64)
        try:
            scores = self._predict([(query, passage_text(p)) for p in passages])
        except RuntimeError as exc:
            raise BackendError(f"{self.name} reranker '{self.model_name}' failed: {exc}") from exc
        return np.asarray(scores, dtype=np.float64).reshape(len(passages))
