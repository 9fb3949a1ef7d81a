"""Models kept loaded for the Python API: one load per process, reused by later calls.

In a notebook every ``ragray.attribute`` / ``ragray.run`` call used to load its model again (seconds
to minutes each). :func:`kept_generator` loads a backend that can share its loaded model
(``Generator.with_config``: the transformers backend) once per *what defines the load* — backend,
model, dtype, device and the CPU threads it is loaded with — and hands each later call a generator
on that same model with the call's own options (decoding, and the engine's: strategy, batch and
pass sizes build a new engine on the same weights, never a second copy of them; calls through any of
them take turns on the model, one lock per model). At most
:data:`MAX_KEPT` models stay loaded: loading another lets go of the one used longest ago (its
memory is freed once no call still runs on it), so a notebook that tries model after model does
not fill the GPU. :func:`clear_models` closes them all and frees their memory
(``ragray.clear_models()``). The CLI, Serve and Ray actors load per process as before (a command
is one process; a replica or actor holds its own).
"""

from __future__ import annotations

import gc
import logging
import sys
import threading

from ragray.config import GenerationConfig
from ragray.generation.base import GENERATORS, Generator

__all__ = ["MAX_KEPT", "can_keep", "clear_models", "kept_generator", "kept_models"]

log = logging.getLogger(__name__)

#: models kept loaded at once; another load lets go of the one used longest ago
MAX_KEPT = 2

_KEPT: dict[tuple[str, ...], Generator] = {}  # least recently used first
_LOCK = threading.Lock()


def _key(config: GenerationConfig) -> tuple[str, ...]:
    """What defines a load: the rest (template, decoding options, the decline instruction, the
    engine's sizes and strategy) does not. The threads do: the load sets the process's."""
    return (config.backend, str(config.model), str(config.dtype), str(config.device),
            str(config.transformers.threads))


def can_keep(config: GenerationConfig) -> bool:
    """Whether ``config``'s backend can share a loaded model (not vLLM, endpoints, scripted)."""
    return hasattr(GENERATORS.get(config.backend), "with_config")


def kept_generator(config: GenerationConfig) -> Generator | None:
    """A generator for ``config`` on a model this process already loaded (loading it the first
    time); None for a backend that cannot share a loaded model (:func:`can_keep`)."""
    if not can_keep(config):
        return None
    backend = GENERATORS.get(config.backend)
    key = _key(config)
    with _LOCK:
        loaded = _KEPT.pop(key, None)
        if loaded is None:
            oldest = list(_KEPT)[: max(0, len(_KEPT) - MAX_KEPT + 1)]
            for old in oldest:
                # let go before loading: the new weights may need the memory. Not closed: a call
                # may still run on it (its generator holds the model); freed when that ends
                _KEPT.pop(old)
                log.info("let go of the kept model %s to load %s (at most %d stay loaded; "
                         "ragray.clear_models() frees them all)", _name(old), _name(key), MAX_KEPT)
            if oldest:
                _free_memory()
            # the backend says what it loads and from where (the ragray.loads logger)
            loaded = backend.from_config(config)
            log.debug("kept %s for later calls in this process", key)
        _KEPT[key] = loaded  # the most recently used last
    return loaded.with_config(config)  # type: ignore[attr-defined]


def _name(key: tuple[str, ...]) -> str:
    return f"{key[0]}:{key[1]} ({key[2]}, {key[3]})"


def kept_models() -> list[str]:
    """The models kept loaded, as ``backend:model (dtype, device)``."""
    with _LOCK:
        return [_name(k) for k in _KEPT]


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
    if loaded:
        _free_memory()
    return len(loaded)


def _free_memory() -> None:
    """Collect what no one holds any more, and hand the CUDA cache's free blocks back."""
    gc.collect()
    torch = sys.modules.get("torch")  # only if a model was loaded with it
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
