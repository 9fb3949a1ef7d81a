"""The generator a command runs with: the configured backend, behind the persistent call cache.

Every command and adapter builds its generator here (a given one — tests, Serve replicas — is used
as it is), so run, interpret, audit explanations, sweep trials and Ray actors share one cache.
A command may also be handed a :data:`ModelSource` that loads its model only when the first
question needs it (the Python API's kept models, which the CLI goes through too).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Union

from ragray.cache.calls import CachedGenerator, CallStore, calls_path
from ragray.config import ExperimentConfig
from ragray.generation import Generator, build_generator

__all__ = ["ModelSource", "call_cache_counts", "open_generator", "source_generator"]

#: what a command is handed to run on: a generator, or a function that gives one, called when the
#: first question needs a model: a missing dataset, a refused run folder or a finished run resumed
#: then loads no model (a load takes seconds on a laptop, minutes for a large model on a GPU)
ModelSource = Union[Generator, Callable[[], Generator]]


def open_generator(config: ExperimentConfig, loaded: Generator | None = None) -> Generator:
    """``generation.backend`` built from ``config`` (or ``loaded``, a generator on a model this
    process keeps: :mod:`ragray.generation.kept`); behind the call cache when ``cache.calls`` is on
    and the backend's answers are worth keeping (``Generator.cacheable``)."""
    gen = loaded if loaded is not None else build_generator(config.generation)
    if not (config.cache.calls and gen.cacheable):
        return gen
    return CachedGenerator(gen, CallStore(calls_path(config.cache.dir)), config.generation)


def source_generator(source: ModelSource) -> Generator:
    """The generator ``source`` is, or the one it gives now. Either way its caller owns it: the
    command leaves it open."""
    return source if isinstance(source, Generator) else source()


def call_cache_counts(generator: Generator | None) -> dict[str, int]:
    """What ``generator`` counted in this process for the run's ``cache`` block: the call cache's
    hits and misses, and an engine's prefix cache (vLLM: prompt tokens and those served from its
    prefix cache, ``prefix_cache_prompt_tokens`` / ``prefix_cache_hit_tokens``)."""
    out: dict[str, int] = {}
    while generator is not None:
        if isinstance(generator, CachedGenerator):
            out.update(generator.stats.as_dict())
        stats = getattr(generator, "prefix_cache_stats", None)
        if callable(stats):
            got = stats()
            out.update(prefix_cache_prompt_tokens=got.prompt_tokens, prefix_cache_hit_tokens=got.cached_tokens)
        generator = getattr(generator, "inner", None)
    return out
