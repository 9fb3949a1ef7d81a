"""Generators: Hugging Face transformers, vLLM and OpenAI-compatible endpoints.

Each backend's module is imported when the backend is first built (``GENERATORS`` names them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragray.generation.base import (
    GENERATORS,
    ChatPrompt,
    Generation,
    Generator,
    Message,
)

if TYPE_CHECKING:
    from ragray.config import GenerationConfig

__all__ = ["GENERATORS", "ChatPrompt", "Generation", "Generator", "Message", "build_generator"]


def build_generator(config: GenerationConfig) -> Generator:
    """The backend named by ``config.backend``, built from the ``generation`` section."""
    return GENERATORS.get(config.backend).from_config(config)
