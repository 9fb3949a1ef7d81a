"""Models kept loaded for the Python API: one load per process, reused by later calls.

In a notebook every ``ragray.attribute`` / ``ragray.run`` call used to load its model again (seconds
to minutes each). :func:`kept_generator` loads a backend that can share its loaded model
(``Generator.with_config``: the transformers backend) once per *what defines the load* — backend,
model, dtype, device and the in-process engine's settings — and hands each later call a generator
on that same model with the call's own decoding options. :func:`clear_models` closes them all and
frees their memory (``ragray.clear_models()``). The CLI, Serve and Ray actors load per process as
before (a command is one process; a replica or actor holds its own).
"""

from __future__ import annotations

import gc
import logging
import threading

from ragray.config import GenerationConfig
from ragray.generation.base import GENERATORS, Generator

__all__ = ["clear_models", "kept_generator", "kept_models"]

log = logging.getLogger(__name__)

_KEPT: dict[tuple[str, ...], Generator] = {}
_LOCK = threading.Lock()


def _key(config: GenerationConfig) -> tuple[str, ...]:
    """What defines a load: the rest (template, decoding options, the decline instruction) does not."""
    return (config.backend, str(config.model), str(config.dtype), str(config.device),
            config.transformers.model_dump_json())


def kept_generator(config: GenerationConfig) -> Generator | None:
    """A generator for ``config`` on a model this process already loaded (loading it the first
    time); None for a backend that cannot share a loaded model (vLLM, endpoints, scripted)."""
    backend = GENERATORS.get(config.backend)
    if not hasattr(backend, "with_config"):
        return None
    key = _key(config)
    with _LOCK:
        loaded = _KEPT.get(key)
        if loaded is None:  # the backend says what it loads and from where (the ragray.loads logger)
            loaded = _KEPT[key] = backend.from_config(config)
            log.debug("kept %s for later calls in this process", key)
    return loaded.with_config(config)  # type: ignore[attr-defined]


def kept_models() -> list[str]:
    """The models kept loaded, as ``backend:model (dtype, device)``."""
    with _LOCK:
        return [f"{k[0]}:{k[1]} ({k[2]}, {k[3]})" for k in _KEPT]


def clear_models() -> int:
    """Close every kept generator and the kept sentence encoders, and free their memory (the CUDA
    cache too); the number of generators closed."""
    with _LOCK:
        loaded = list(_KEPT.values())
        _KEPT.clear()
    for gen in loaded:
        gen.close()
    from ragray.encoders import clear_encoders

    clear_encoders()  # the answer metrics' sentence encoders, kept the same way
    gc.collect()
    try:
        import torch  # only if a model was loaded with it

        if loaded and torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:
        pass
    return len(loaded)
