"""Generators: Hugging Face transformers, vLLM and OpenAI-compatible endpoints."""

from ragray.generation.base import GENERATORS, ChatPrompt, Generation, Generator, Message
from ragray.generation import openai_compat, scripted, transformers_backend, vllm_backend  # noqa: F401,E402

__all__ = ["GENERATORS", "ChatPrompt", "Generation", "Generator", "Message", "build_generator"]


def build_generator(config: "GenerationConfig") -> Generator:  # noqa: F821
    """The backend named by ``config.backend``, built from the ``generation`` section."""
    return GENERATORS.get(config.backend).from_config(config)
