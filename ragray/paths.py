"""Where ragray keeps files between runs: the one cache-root resolver.

``$RAGRAY_CACHE``, else ``$XDG_CACHE_HOME/ragray``, else ``~/.cache/ragray``. Under it:
``models/`` (packaged generators converted once, :mod:`ragray.generation.packaged`),
``datasets/`` (public sets fetched by name and converted once, :mod:`ragray.data.named`),
``embeddings/`` (:mod:`ragray.encoders`) and the fingerprint caches of :mod:`ragray.cache`
(``cache.dir`` in a config moves those two; ``retrieval.dense.cache_dir`` moves embeddings).

What ragray keeps for the user beyond a cache — the run history (``history.sqlite``) — lives in
the data root: ``$RAGRAY_HOME``, else ``$XDG_DATA_HOME/ragray``, else ``~/.local/share/ragray``,
never in the working directory unasked.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root", "data_root"]


def cache_root() -> Path:
    """``$RAGRAY_CACHE``, else ``$XDG_CACHE_HOME/ragray``, else ``~/.cache/ragray``."""
    env = os.environ.get("RAGRAY_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ragray"


def data_root() -> Path:
    """``$RAGRAY_HOME``, else ``$XDG_DATA_HOME/ragray``, else ``~/.local/share/ragray``."""
    env = os.environ.get("RAGRAY_HOME")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "ragray"
