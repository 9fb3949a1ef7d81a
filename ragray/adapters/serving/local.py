"""The HTTP API in one process, without Ray: the same service over local components.

Used by the tests and the fuzzer, and by ``ragray serve --no-ray`` for a quick look at the API.
"""

from __future__ import annotations

from typing import Any

from ragray.config import ExperimentConfig
from ragray.generation import Generator
from ragray.pipeline.generators import open_generator
from ragray.adapters.serving.api import make_app
from ragray.adapters.serving.components import CorpusSearch, LockedGenerator, RerankStep
from ragray.adapters.serving.runs import Presets, RunManager
from ragray.adapters.serving.service import RagService

__all__ = ["local_app"]


def local_app(config: ExperimentConfig, generator: Generator | None = None, *, api_key: str | None = None) -> Any:
    """A FastAPI app serving ``config`` in this process (``generator`` overrides the backend)."""
    gen = LockedGenerator(generator or open_generator(config))
    service = RagService(config, CorpusSearch(config), RerankStep(config), gen)
    presets = Presets.for_server(config)
    return make_app(service, RunManager(config, presets, gen), presets, api_key=api_key)
