"""The built-in components' names, by kind, and the module that registers each.

What config validation reads: checking ``generation.backend: vllm`` or ``generation.template:
short`` imports no component (so the config layer, which every component imports for its
settings, depends on none of them, at any depth). The registries (:class:`ragray.registry.Registry`)
take their built-ins from here; a name a plugin registers at run time is known to its registry,
which is loaded by then (the plugin imported it to register), and :func:`check_name` asks it.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from ragray.errors import ConfigError

__all__ = ["CATALOG", "DATASET_NAMES", "LIVE", "check_name", "known_names", "ranks_corpus"]

CATALOG: Mapping[str, Mapping[str, str]] = {
    "generator": {
        "transformers": "ragray.generation.transformers.backend",
        "vllm": "ragray.generation.vllm_backend",
        "openai": "ragray.generation.openai_compat",
        "scripted": "ragray.generation.scripted",
        "simulated": "ragray.generation.simulated",
    },
    "retriever": {
        "bm25": "ragray.retrieval.bm25",
        "dense": "ragray.retrieval.dense",
        "given": "ragray.retrieval.given",
        "hybrid": "ragray.retrieval.hybrid",
    },
    "reranker": {
        "none": "ragray.rerank.none",
        "cross_encoder": "ragray.rerank.cross_encoder",
        "bi_encoder": "ragray.rerank.bi_encoder",
        "bge": "ragray.rerank.flag",
    },
    "similarity": dict.fromkeys(("rouge_l", "exact_match", "token_jaccard", "edit", "semantic", "bleu"),
                                "ragray.metrics.similarity"),
    "template": dict.fromkeys(("numbered", "plain", "short"), "ragray.generation.prompts"),
}

#: ``data.path`` keywords that name a dataset instead of a file: the packaged demo set, Natural
#: Questions from the hub, and the public sets of :mod:`ragray.data.named` (a test keeps this in
#: step with that module). Never resolved as paths (write ``./squad`` for a local file of that name).
DATASET_NAMES: frozenset[str] = frozenset({"demo", "nq", "squad", "squad2", "hotpotqa", "pubmedqa", "scifact"})

#: built-in retrievers that rank no corpus (their class says ``ranks_corpus = False``; a test
#: keeps the two in step): they keep each question's own passages
_RANK_NO_CORPUS = frozenset({"given"})

#: kind -> its registry, once the registry's module is loaded (:class:`ragray.registry.Registry`
#: adds itself): it knows the names plugins registered at run time
LIVE: dict[str, Any] = {}


def known_names(kind: str) -> list[str]:
    """Built-in names and those registered at run time (by registries already loaded)."""
    live = LIVE.get(kind)
    extra = set(live.names()) if live is not None else set()
    if kind == "template" and (prompts := sys.modules.get("ragray.generation.prompts")) is not None:
        extra |= set(prompts.TEMPLATES)
    return sorted({*CATALOG[kind], *extra})


def check_name(kind: str, name: str, where: str | None = None) -> str:
    """``name`` when it is a known ``kind`` (imports no component), else a ConfigError listing the
    valid names (``where`` prefixes it, e.g. ``generation.template``)."""
    if name in CATALOG[kind]:
        return name
    valid = known_names(kind)
    if name in valid:
        return name
    prefix = f"{where}: " if where else ""
    raise ConfigError(f"{prefix}unknown {kind} '{name}'; valid: {', '.join(valid)}")


def ranks_corpus(retriever: str) -> bool:
    """Whether the retriever ranks a corpus (``Retriever.ranks_corpus``), known without importing
    a built-in one; a plugin's class is asked (its registry is loaded: it registered there)."""
    if retriever in CATALOG["retriever"]:
        return retriever not in _RANK_NO_CORPUS
    live = LIVE.get("retriever")
    return True if live is None or retriever not in live else bool(live.get(retriever).ranks_corpus)
