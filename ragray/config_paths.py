"""Where the relative paths of a config point: the config file's folder, or the working directory.

A relative path written in a config file (``data.path: ../data/qa.jsonl``) names a file beside
that config, so the config runs the same from any folder; the file's loader makes it absolute.
A path given on the command line (``--dataset``, ``--corpus``, ``--set data.path=...``) names one
in the working directory; when it exists there it is made absolute, so the ``config.yaml`` saved
beside a run names it from wherever that config is re-run.

Which settings are paths:

- inputs (:data:`DATA_PATH_KEYS`): ``data.path``, ``data.corpus``, ``data.queries``,
  ``data.ground_truth``. Never a path: a dataset keyword (:data:`ragray.catalog.DATASET_NAMES`:
  ``demo``, ``nq``, ``squad`` ...), a URL, or (with ``data.format: nq``) a hub id that is no
  file beside the config;
- models (:data:`MODEL_PATH_KEYS`: generator, encoders, reranker, tokenizers), which take a
  packaged keyword, a hub id or a local path: a path only when written ``./...`` / ``../...`` or
  when it exists beside the config (``BAAI/bge-reranker-base`` stays a hub id). From the command
  line they are left as given;
- outputs (``serve.runs_dir``, ``cache.dir``, ``history.url`` ...) stay relative to the working
  directory: a run writes where it is started, not into the folder of its config.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragray.catalog import DATASET_NAMES

__all__ = ["DATA_PATH_KEYS", "MODEL_PATH_KEYS", "is_path_keyword", "resolve_file_paths",
           "resolve_dotted", "anchor_cwd_paths"]

DATA_PATH_KEYS = ("data.path", "data.corpus", "data.queries", "data.ground_truth")
MODEL_PATH_KEYS = ("chunking.tokenizer", "retrieval.dense.model", "rerank.model", "generation.model",
                   "generation.openai.tokenizer", "metrics.encoder")


def is_path_keyword(value: str) -> bool:
    """True for values that are never paths: dataset names and URLs (``scheme://...``)."""
    return value in DATASET_NAMES or "://" in value


def _relative(value: Any) -> bool:
    return (isinstance(value, str) and bool(value.strip()) and not is_path_keyword(value)
            and not value.startswith("~") and not Path(value).is_absolute())


def _absolute(folder: Path, value: str) -> str:
    return os.path.normpath(os.path.abspath(folder / value))


def _get(raw: Mapping[str, Any], key: str) -> Any:
    node: Any = raw
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _with(raw: Mapping[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A copy of ``raw`` with ``key`` (dotted, present) set to ``value``; siblings are shared."""
    head, _, rest = key.partition(".")
    out = dict(raw)
    out[head] = _with(raw[head], rest, value) if rest else value
    return out


def _file_value(key: str, value: str, folder: Path, raw: Mapping[str, Any]) -> str:
    candidate = folder / value
    if key in DATA_PATH_KEYS:
        if key == "data.path" and _get(raw, "data.format") == "nq" and not candidate.exists():
            return value  # a hub id: data.format nq streams data.path from the hub
        return _absolute(folder, value)
    if value.startswith(("./", "../")) or candidate.exists():
        return _absolute(folder, value)
    return value  # a packaged keyword or a hub id


def resolve_file_paths(raw: Mapping[str, Any], folder: str | Path) -> dict[str, Any]:
    """``raw`` (a config mapping read from a file in ``folder``) with its relative paths made
    absolute against ``folder``; the input is not modified."""
    folder = Path(folder)
    out = dict(raw)
    for key in (*DATA_PATH_KEYS, *MODEL_PATH_KEYS):
        value = _get(out, key)
        if _relative(value):
            out = _with(out, key, _file_value(key, value, folder, raw))
    return out


def resolve_dotted(values: Mapping[str, Any], folder: str | Path) -> dict[str, Any]:
    """Dotted ``key -> value`` settings written in a file in ``folder`` (a sweep spec's ``set``
    and variants) with their relative paths made absolute against ``folder``."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        nested: dict[str, Any] = {}
        node = nested
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
        out[key] = _get(resolve_file_paths(nested, folder), ".".join(parts))
    return out


def anchor_cwd_paths(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` with each relative data path that exists in the working directory made absolute
    (what the command line gave; a config file's paths are absolute by now). A path that does not
    exist is left as given, so the loader's error names it as the user wrote it."""
    out = dict(raw)
    for key in DATA_PATH_KEYS:
        value = _get(out, key)
        if _relative(value) and Path(value).exists():
            out = _with(out, key, os.path.abspath(value))
    return out
