"""Dense retrieval: a sentence-transformers bi-encoder plus a FAISS index.

Index kinds (``retrieval.dense.index``), all over L2-normalized embeddings:

- ``flat_ip``: exhaustive inner product (``IndexFlatIP``); the score is the cosine similarity.
- ``flat_l2``: exhaustive L2 (``IndexFlatL2``); the score is the *negative squared* L2 distance,
  so higher is better like every ragray score. On unit vectors ``-|q-p|² = 2·cos - 2``: the
  ranking equals ``flat_ip``'s.
- ``hnsw``: approximate graph search (``IndexHNSWFlat``, inner-product metric; ``hnsw_m``,
  ``ef_construction``, ``ef_search``); the score is the cosine similarity.

Flat indexes move to the GPU (``index_cpu_to_gpu``) when FAISS was built with GPU support, a
GPU is present and ``device`` is not ``cpu``. HNSW always stays on the CPU: FAISS has no GPU
HNSW (its GPU graph index is CAGRA, a different structure), so copying one raises.

A saved index (the index cache) is the CPU FAISS index written by ``faiss.write_index``; loading
reads it back and recovers the embeddings with ``reconstruct_n`` (flat storage keeps them
exactly), so an HNSW graph is built once per sweep instead of once per trial. ``ef_search`` is a
search-time setting: it is applied after loading and is not part of the index key.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragray._imports import require
from ragray.cache.fingerprint import library_versions
from ragray.config import DenseConfig, RetrievalConfig
from ragray.encoders import SentenceEncoder, model_identity
from ragray.errors import BackendError
from ragray.retrieval.base import RETRIEVERS, Retriever, SearchIndex
from ragray.types import Hit, Passage

__all__ = ["DenseRetriever", "DenseIndex"]

logger = logging.getLogger(__name__)


def _faiss() -> Any:
    _checked_once()
    return require("faiss", extra="dense", feature="dense retrieval", package="faiss-cpu")


@functools.cache
def _checked_once() -> None:
    faiss_clash()


def faiss_clash(installed: Sequence[str] | None = None) -> None:
    """Refuse a machine where faiss-cpu and faiss-gpu are both installed: they install the same
    ``faiss`` module, so which one imports is whichever was installed last (a GPU machine then runs
    its indexes on the CPU, or the other way round). ``installed``: distribution names, for tests."""
    if installed is None:
        from importlib import metadata

        installed = [d.metadata["Name"] or "" for d in metadata.distributions()]
    found = sorted({n.lower() for n in installed} & {"faiss-cpu", "faiss-gpu"})
    if len(found) == 2:
        raise BackendError("faiss-cpu and faiss-gpu are both installed, and both install the `faiss` module: "
                           "keep one (`pip uninstall faiss-cpu` on a GPU machine, which installs ragray[gpu]; "
                           "`pip uninstall faiss-gpu` elsewhere)")


def _gpu_id(device: str) -> int | None:
    """The CUDA ordinal FAISS should use, or ``None`` to stay on the CPU."""
    if not device.startswith("cuda"):
        return None
    faiss = _faiss()
    if not hasattr(faiss, "StandardGpuResources") or faiss.get_num_gpus() < 1:
        return None
    _, _, ordinal = device.partition(":")
    return int(ordinal) if ordinal else 0


class DenseIndex(SearchIndex):
    """FAISS index over passage embeddings; :meth:`search` embeds queries with the same model."""

    def __init__(
        self,
        passages: Sequence[Passage],
        embeddings: np.ndarray,
        encoder: SentenceEncoder,
        config: DenseConfig,
        index: Any = None,
    ) -> None:
        """Index ``embeddings``; ``index`` (a CPU FAISS index already holding them) skips the build."""
        super().__init__(passages)
        self.embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
        self.encoder = encoder
        self.config = config
        self.on_gpu = False
        self._gpu_resources: Any = None  # kept alive as long as the GPU index
        if not len(self.passages):
            self._index = None
        else:
            self._index = self._place(index if index is not None else self._build())

    def _build(self) -> Any:
        faiss = _faiss()
        dim = self.embeddings.shape[1]
        cfg = self.config
        if cfg.index == "hnsw":
            index = faiss.IndexHNSWFlat(dim, cfg.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = cfg.ef_construction
            index.hnsw.efSearch = cfg.ef_search
        elif cfg.index == "flat_l2":
            index = faiss.IndexFlatL2(dim)
        else:
            index = faiss.IndexFlatIP(dim)
        index.add(self.embeddings)
        return index

    def _place(self, index: Any) -> Any:
        """Move a flat CPU index to the GPU when one is usable (see the module docstring)."""
        faiss = _faiss()
        cfg = self.config
        dim = self.embeddings.shape[1]
        gpu = _gpu_id(self.encoder.device) if cfg.index != "hnsw" else None
        if gpu is not None:
            self._gpu_resources = faiss.StandardGpuResources()
            index = faiss.index_cpu_to_gpu(self._gpu_resources, gpu, index)
            self.on_gpu = True
        logger.info(
            "dense %s index: %d passages, dim %d, %s",
            cfg.index,
            len(self.passages),
            dim,
            f"cuda:{gpu}" if self.on_gpu else "cpu",
        )
        return index

    def save(self, directory: Path) -> None:
        """``index.faiss`` (the CPU copy of a GPU index); nothing for an empty index."""
        if self._index is None:
            return
        faiss = _faiss()
        cpu = faiss.index_gpu_to_cpu(self._index) if self.on_gpu else self._index
        faiss.write_index(cpu, str(directory / "index.faiss"))

    @classmethod
    def load(
        cls, directory: Path, passages: Sequence[Passage], encoder: SentenceEncoder, config: DenseConfig
    ) -> DenseIndex:
        """The index :meth:`save` wrote, over ``passages``; ``ValueError`` when they do not fit."""
        passages = tuple(passages)
        if not passages:
            return cls(passages, np.zeros((0, 0), dtype=np.float32), encoder, config)
        faiss = _faiss()
        index = faiss.read_index(str(directory / "index.faiss"))
        if index.ntotal != len(passages):
            raise ValueError(f"saved FAISS index holds {index.ntotal} vectors, not {len(passages)}")
        if config.index == "hnsw":
            index.hnsw.efSearch = config.ef_search
        return cls(passages, index.reconstruct_n(0, index.ntotal), encoder, config, index=index)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """Top ``k`` hits per query (all passages when ``k`` exceeds the corpus), ranks 1..k.

        Hits with equal scores are ordered by corpus position, so results are reproducible.
        """
        queries = list(queries)
        k = min(k, len(self.passages))
        if not queries or k <= 0 or self._index is None:
            return [[] for _ in queries]
        q = self.encoder.encode(queries, self.config.batch_size, normalize=True, cache=False)
        try:
            scores, ids = self._index.search(q, k)
        except RuntimeError as exc:
            raise BackendError(f"FAISS {self.config.index} search failed: {exc}") from exc
        if self.config.index == "flat_l2":
            scores = -scores
        return [self._hits(s, i) for s, i in zip(scores, ids, strict=True)]

    def _hits(self, scores: np.ndarray, ids: np.ndarray) -> list[Hit]:
        keep = ids >= 0  # HNSW pads with -1 when it finds fewer than k neighbours
        scores, ids = scores[keep], ids[keep]
        order = np.lexsort((ids, -scores))
        return [
            Hit(self.passages[int(ids[j])], rank, float(scores[j]))
            for rank, j in enumerate(order, start=1)
        ]


@RETRIEVERS.register("dense")
class DenseRetriever(Retriever):
    """Bi-encoder retrieval (``retrieval.dense``): embed passages once (cached), search FAISS."""

    holds_model = True

    name = "dense"

    def __init__(self, config: DenseConfig, encoder: SentenceEncoder | None = None) -> None:
        self.config = config
        self.encoder = encoder if encoder is not None else SentenceEncoder.from_config(config)

    @classmethod
    def from_config(cls, config: RetrievalConfig) -> DenseRetriever:
        return cls(config.dense)

    def index(self, passages: Sequence[Passage]) -> DenseIndex:
        """Embed ``passages`` (from the embedding cache when seen before) and index them."""
        passages = tuple(passages)
        if passages:
            emb = self.encoder.encode_passages(passages, self.config.batch_size)
        else:
            emb = np.zeros((0, 0), dtype=np.float32)
        return DenseIndex(passages, emb, self.encoder, self.config)

    def index_identity(self) -> dict[str, Any]:
        """Model (by its files), index type, HNSW build parameters, library versions; not
        ``batch_size``, ``device`` or the embedding cache settings."""
        cfg = self.config
        ident: dict[str, Any] = {
            "model": model_identity(self.encoder.model_path),
            "normalize": True,
            "index": cfg.index,
            "libraries": library_versions(
                "numpy", ("faiss-cpu", "faiss-gpu", "faiss"), "torch", "transformers",
                "sentence-transformers",
            ),
        }
        if cfg.index == "hnsw":
            ident.update(hnsw_m=cfg.hnsw_m, ef_construction=cfg.ef_construction)
        return ident

    def search_identity(self) -> dict[str, Any]:
        ident = self.index_identity()
        if self.config.index == "hnsw":
            ident["ef_search"] = self.config.ef_search
        return ident

    def load_index(self, directory: Path, passages: Sequence[Passage]) -> DenseIndex:
        return DenseIndex.load(directory, passages, self.encoder, self.config)
