"""A test's own ragray cache root (``$RAGRAY_CACHE``), for the test process and every process it starts.

Its call cache (``calls.sqlite``) and answer-metric embeddings (``embeddings.sqlite``) are its own: a
model call one test, a CI step or the tester paid for is never served to another, so a test that says
"the packaged model ran" ran it. The parts that are slow to build and do not stand in for a model
call's answer (converted packaged models, converted datasets, encoder embeddings, chunk sets,
indexes, retrievals) are links to the tester's own cache, shared as before.

Subprocesses inherit the variable; Ray workers get it through ``runtime_env`` (a module's Ray starts
before any test sets it) and ``ray start`` nodes through their environment.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

__all__ = ["SHARED", "own_cache_root", "real_cache_root"]

#: the folders a test's cache root links to the tester's cache (everything else under it is its own)
SHARED = ("models", "datasets", "embeddings", "chunksets", "indexes", "retrievals")


@functools.cache
def real_cache_root() -> Path:
    """The cache root the tester's environment names (resolved once, before any test moves it)."""
    from ragray.paths import cache_root

    return cache_root()


def own_cache_root(path: Path | None = None) -> Path:
    """``path`` (default: a new temporary folder) set up as a cache root of its own: empty but for
    links to the tester's :data:`SHARED` folders."""
    root = Path(tempfile.mkdtemp(prefix="ragray-cache-")) if path is None else path
    root.mkdir(parents=True, exist_ok=True)
    for name in SHARED:
        shared = real_cache_root() / name
        shared.mkdir(parents=True, exist_ok=True)
        link = root / name
        if not link.exists():
            link.symlink_to(shared, target_is_directory=True)
    return root
