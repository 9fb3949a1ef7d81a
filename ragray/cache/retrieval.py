"""The retrieval stage's caches: chunk sets, indexes and final hits, with hit/miss counts.

:class:`RetrievalCache` only stores and loads; *what* a key contains is decided in
:mod:`ragray.cache.keys`, and *when* to consult the cache in
:class:`~ragray.retrieval.stage.RetrievalStage`. Each kind has its own switch (``cache.chunksets``,
``cache.indexes``, ``cache.retrievals``); a switched-off kind is neither read, written nor counted.

With ``cache.namespace`` the per-question indexes, otherwise never stored, are kept in their own
store ``<root>/ephemeral/<namespace>/`` (:attr:`RetrievalCache.ephemeral_root`): a sweep gives every
trial a namespace, registers the folder with a TTL in the run history and deletes it at the end
(or ``ragray cleanup`` does when the TTL runs out). They count as ``indexes`` hits and misses.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ragray.cache import codec
from ragray.cache.fingerprint import Uncacheable, passages_fingerprint
from ragray.cache.keys import chunkset_key
from ragray.cache.store import UNREADABLE, CacheStore
from ragray.config import CacheConfig, ChunkingConfig
from ragray.types import Hit, Passage

if TYPE_CHECKING:
    from ragray.retrieval.base import Retriever, SearchIndex

__all__ = ["CacheStats", "RetrievalCache"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CacheStats:
    """How often each cache was hit or missed (a sweep reports these per trial)."""

    chunksets_hit: int = 0
    chunksets_miss: int = 0
    indexes_hit: int = 0
    indexes_miss: int = 0
    retrievals_hit: int = 0
    retrievals_miss: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class RetrievalCache:
    """Chunk sets, indexes and hits in a :class:`CacheStore`, each behind its switch."""

    def __init__(
        self,
        root: str | Path | None = None,
        *,
        chunksets: bool = True,
        indexes: bool = True,
        retrievals: bool = True,
        namespace: str | None = None,
    ) -> None:
        self.store = CacheStore(root)
        self.use_chunksets, self.use_indexes, self.use_retrievals = chunksets, indexes, retrievals
        self.namespace = namespace
        self.ephemeral = CacheStore(self.ephemeral_root) if namespace else None
        self._counts: Counter[str] = Counter()

    @property
    def ephemeral_root(self) -> Path | None:
        """The namespace's folder of per-question indexes (``None`` without a namespace)."""
        return self.store.root / "ephemeral" / self.namespace if self.namespace else None

    @classmethod
    def from_config(cls, config: CacheConfig) -> RetrievalCache:
        """The caches of a ``cache`` config section."""
        return cls(config.dir, chunksets=config.chunksets, indexes=config.indexes,
                   retrievals=config.retrievals, namespace=config.namespace)

    @property
    def stats(self) -> CacheStats:
        """A snapshot of the hit/miss counts so far."""
        return CacheStats(**{f: self._counts[f] for f in CacheStats.__dataclass_fields__})

    def _count(self, kind: str, hit: bool) -> None:
        self._counts[f"{kind}_{'hit' if hit else 'miss'}"] += 1

    @staticmethod
    def chunks_key(passages: Sequence[Passage], config: ChunkingConfig, documents: bool) -> str | None:
        """The chunk set key of ``passages`` (:mod:`ragray.cache.keys`); ``None`` when their meta
        holds values with no exact JSON form, so nothing derived from them is cached."""
        try:
            return chunkset_key(passages_fingerprint(passages), config, documents)
        except Uncacheable as exc:
            log.info("not caching retrieval of these passages: %s", exc)
            return None

    # --- chunk sets -----------------------------------------------------------------------

    def chunks(self, key: str | None, compute: Callable[[], tuple[Passage, ...]]) -> tuple[Passage, ...]:
        """The chunk set ``key`` from the cache, else ``compute()`` (then stored)."""
        if key is None or not self.use_chunksets:
            return compute()
        raw = self.store.read_blob("chunksets", key)
        if raw is not None:
            try:
                lines = raw.split(b"\n") if raw else []  # JSON escapes every newline inside strings
                chunks = tuple(codec.decode_passage(codec.loads(line)) for line in lines)
            except UNREADABLE as exc:
                self.store.discard("chunksets", key, f"undecodable ({exc})")
            else:
                self._count("chunksets", True)
                log.info("chunk set %s… loaded from the cache (%d chunks)", key[:12], len(chunks))
                return chunks
        self._count("chunksets", False)
        chunks = compute()
        try:
            payload = b"\n".join(codec.dumps(codec.encode_passage(p)) for p in chunks)
        except Uncacheable as exc:
            log.info("not caching chunk set %s…: %s", key[:12], exc)
        else:
            self.store.write_blob("chunksets", key, payload)
            log.info("chunk set %s… computed and cached (%d chunks)", key[:12], len(chunks))
        return chunks

    # --- indexes --------------------------------------------------------------------------

    def index(self, key: str | None, retriever: Retriever, passages: Sequence[Passage],
              store: CacheStore | None = None) -> SearchIndex:
        """The index ``key`` of ``passages`` from the cache (``store``: another one, such as
        :attr:`ephemeral`), else ``retriever.index`` (then saved)."""
        if key is None or not self.use_indexes:
            return retriever.index(passages)
        store = store or self.store
        loaded = store.load_folder("indexes", key, lambda d: retriever.load_index(d, passages))
        if loaded is not None:
            self._count("indexes", True)
            log.info("%s index %s… loaded from the cache", retriever.name, key[:12])
            return loaded
        self._count("indexes", False)
        index = retriever.index(passages)
        if store.save_folder("indexes", key, index.save):
            log.info("%s index %s… built and cached", retriever.name, key[:12])
        return index

    # --- final hits -----------------------------------------------------------------------

    def hits(self, setup: str, key: str) -> tuple[Hit, ...] | None:
        """One question's cached final hits, or ``None``."""
        if not self.use_retrievals:
            return None
        kind = f"retrievals/{setup}"
        raw = self.store.read_blob(kind, key)
        if raw is not None:
            try:
                hits = codec.decode_hits(codec.loads(raw))
            except UNREADABLE as exc:
                self.store.discard(kind, key, f"undecodable ({exc})")
            else:
                self._count("retrievals", True)
                log.debug("hits %s… from the cache", key[:12])
                return hits
        self._count("retrievals", False)
        log.debug("hits %s… not cached", key[:12])
        return None

    def put_hits(self, setup: str, key: str, hits: Sequence[Hit]) -> None:
        """Store one question's final hits (skipped, with a log line, for odd passage meta)."""
        if not self.use_retrievals:
            return
        try:
            payload = codec.dumps(codec.encode_hits(hits))
        except Uncacheable as exc:
            log.info("not caching hits %s…: %s", key[:12], exc)
            return
        self.store.write_blob(f"retrievals/{setup}", key, payload)
