"""ragray: influence-aware RAG diagnostics on Ray.

The top level is the notebook API: :func:`ragray.attribute` (one question), :func:`ragray.run` /
``interpret`` / ``score`` / ``audit_retrieval`` (many; DataFrames or rows in, tables out, ``.to_pandas()`` for DataFrames),
:class:`ragray.Attributor` (a model loaded once, the same verbs as methods), :func:`ragray.run_retriever` (a LangChain or LlamaIndex retriever), :func:`ragray.load_run`,
:func:`ragray.clear_models`, and the config (see :mod:`ragray.api`). Underneath, import from the
layers' own modules: the pipeline (:mod:`ragray.pipeline`), its typed rows (:mod:`ragray.rows`),
the sweep (:mod:`ragray.adapters.sweep.runner`), simulation (:mod:`ragray.simulate`). Names are imported on
first use, so ``import ragray`` does no work.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

from ragray._moved import install as _install_moved  # noqa: E402 - the adapters' old import paths

_install_moved()

#: the notebook API (public name -> the module that defines it)
_EXPORTS = {
    "attribute": "ragray.api",
    "run": "ragray.api",
    "interpret": "ragray.api",
    "score": "ragray.api",
    "audit_retrieval": "ragray.api",
    "run_retriever": "ragray.api",
    "load_run": "ragray.api",
    "clear_models": "ragray.api",
    "Run": "ragray.api",
    "Attribution": "ragray.api",
    "Attributor": "ragray.attributor",
    "ExperimentConfig": "ragray.config",
    "load_config": "ragray.config",
}

#: names the top level used to export from the layers below the API: still resolved, with a
#: DeprecationWarning naming their module, for one release
_DEPRECATED = {
    "run_influence": "ragray.pipeline",
    "run_interpret": "ragray.pipeline",
    "run_audit": "ragray.pipeline",
    "run_score": "ragray.pipeline",
    "run_retrieve": "ragray.pipeline",
    "run_sweep": "ragray.adapters.sweep.runner",
    "RunResult": "ragray.pipeline",
    "AuditRun": "ragray.pipeline",
    "InfluenceRecord": "ragray.rows.influence",
    "FaithfulnessRecord": "ragray.rows.faithfulness",
    "AuditEntry": "ragray.rows.audit",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    if name in _DEPRECATED:
        import warnings

        warnings.warn(f"ragray.{name} is deprecated and leaves the top level in the next release: "
                      f"from {_DEPRECATED[name]} import {name}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(_DEPRECATED[name]), name)
    raise AttributeError(f"module 'ragray' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
