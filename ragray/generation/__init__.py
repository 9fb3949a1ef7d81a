"""Generators: Hugging Face transformers, vLLM and OpenAI-compatible endpoints."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragray.generation import (  # noqa: F401,E402
    openai_compat,
    scripted,
    simulated,
    transformers_backend,
    vllm_backend,
)
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
