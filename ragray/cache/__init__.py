"""Fingerprint caches shared by runs and sweep trials: chunk sets, indexes and retrieval results.

Trials of a sweep that differ only downstream of retrieval (``generation.*``, ``influence.*`` ...)
reuse every retrieval result; trials that change the chunking or the retriever reuse whatever
still matches. Keys are sha256 fingerprints of every input that affects a result
(:mod:`ragray.cache.keys`), so a changed input never hits; entries are plain files written
atomically (:mod:`ragray.cache.store`), so concurrent trials can share one folder.

Folders under ``cache.dir`` (default :func:`ragray.paths.cache_root`: ``$RAGRAY_CACHE``, else
``$XDG_CACHE_HOME/ragray``, else ``~/.cache/ragray``)::

    embeddings/   passage embeddings (ragray.encoders; retrieval.dense.cache_dir overrides)
    chunksets/    chunked corpora
    indexes/      saved indexes (BM25 arrays, FAISS files)
    retrievals/   final hits per question, one folder per retrieval setup

Deleting any of them (or the whole folder) at any time is safe: entries are recomputed.
"""

from ragray.cache.fingerprint import (
    CACHE_FORMAT,
    Fingerprint,
    Uncacheable,
    code_fingerprint,
)
from ragray.cache.retrieval import CacheStats, RetrievalCache
from ragray.cache.store import CacheStore, default_cache_root

__all__ = [
    "CACHE_FORMAT",
    "CacheStats",
    "CacheStore",
    "Fingerprint",
    "RetrievalCache",
    "Uncacheable",
    "code_fingerprint",
    "default_cache_root",
]
