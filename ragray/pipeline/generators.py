"""The generator a command runs with: the configured backend, behind the persistent call cache.

Every command and adapter builds its generator here (a given one — tests, Serve replicas — is used
as it is), so run, interpret, audit explanations, sweep trials and Ray actors share one cache.
"""

from __future__ import annotations

from ragray.cache.calls import CachedGenerator, CallStore, calls_path
from ragray.config import ExperimentConfig
from ragray.generation import Generator, build_generator

__all__ = ["call_cache_counts", "open_generator"]


def open_generator(config: ExperimentConfig) -> Generator:
    """``generation.backend`` built from ``config``; behind the call cache when ``cache.calls``
    is on and the backend's answers are worth keeping (``Generator.cacheable``)."""
    gen = build_generator(config.generation)
    if not (config.cache.calls and gen.cacheable):
        return gen
    return CachedGenerator(gen, CallStore(calls_path(config.cache.dir)), config.generation)


def call_cache_counts(generator: Generator | None) -> dict[str, int]:
    """The call cache's hits and misses of ``generator`` in this process (empty when not cached)."""
    return generator.stats.as_dict() if isinstance(generator, CachedGenerator) else {}
