"""The short names of settings: what a CLI flag (its argparse ``dest``) or a Python API keyword sets.

One table for both adapters (``ragray run --top-k 5`` and ``ragray.run(..., top_k=5)`` set
``retrieval.top_k``), so the notebook API does not read the CLI's parser; every value is validated
by :mod:`ragray.config`, like ``--set``.
"""

from __future__ import annotations

__all__ = ["FLAG_SETTINGS"]

#: short name -> the config setting it sets
FLAG_SETTINGS: dict[str, str] = {
    "dataset": "data.path", "corpus": "data.corpus", "limit": "data.limit", "columns": "data.columns",
    "top_k": "retrieval.top_k", "retriever": "retrieval.retriever", "scope": "retrieval.scope",
    "backend": "generation.backend", "model": "generation.model", "dtype": "generation.dtype",
    "influence_mode": "influence.mode", "position_control": "influence.position_control",
    "level": "faithfulness.level", "hierarchical": "faithfulness.hierarchical",
    "repeats": "faithfulness.random_repeats", "explainer": "faithfulness.explainer",
    "faithfulness_mode": "faithfulness.mode",
    "executor": "execution.executor", "address": "execution.address",
    "diversity": "metrics.diversity", "chunk_metrics": "metrics.chunking",
    "host": "serve.host", "port": "serve.port", "insecure": "serve.insecure",
    "queries": "data.queries", "ground_truth": "data.ground_truth", "llm": "audit.llm", "audit_k": "audit.k",
}
