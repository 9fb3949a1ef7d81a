"""One model load at a time in a process, each one whole on its device before it is used.

Loading a model with transformers (or sentence-transformers, FlagEmbedding, vLLM) sets state that
the whole process shares while it runs: models are first built on the meta device and the default
dtype is switched. Two loads in threads of one process (concurrent ``POST /runs`` in a server's
ingress, each with its own generator) then corrupt each other: "Cannot copy out of meta tensor",
"expected m1 and m2 to have the same dtype, float != BFloat16". Every loader in ragray holds
:data:`MODEL_LOADS`, and a generator checks that no weight is left on the meta device.
"""

from __future__ import annotations

import threading
from typing import Any

from ragray.errors import BackendError

__all__ = ["MODEL_LOADS", "check_materialized"]

#: held while any model is built, converted or moved to its device (re-entrant: a load may convert)
MODEL_LOADS = threading.RLock()


def check_materialized(model: Any, what: str) -> None:
    """Raise :class:`BackendError` if a parameter or buffer of ``model`` is still on the meta device."""
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        if getattr(tensor, "is_meta", False):
            raise BackendError(f"{what}: '{name}' was left on the meta device after loading (a load raced "
                               "another one, or the checkpoint lacks it)")
