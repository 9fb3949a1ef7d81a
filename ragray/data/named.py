"""Public evaluation sets by name: ``squad``, ``squad2``, ``hotpotqa``, ``pubmedqa``, ``scifact``.

``data.path: squad`` (``--dataset squad``) loads a records file found in this order:

1. ``$RAGRAY_DATA_DIR/<file>`` when the variable is set and the file is there: the file as
   given (it may be a sample of the set), read like any records file, its corpus file beside it;
2. ``<cache>/datasets/<file>`` (``ragray.paths.cache_root()``): a conversion made before;
3. otherwise the set is fetched from its public source, converted to records and written to the
   cache, once; later runs are offline.

With ``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE`` set nothing is fetched: the error says which
file to provide instead. The file names are those of the shared evaluation folder
(``squad_v11_dev.jsonl`` ...), so such a folder can serve as ``RAGRAY_DATA_DIR`` as it is.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ragray.data.hotpotqa import HOTPOTQA_REPO, fetch_hotpotqa
from ragray.data.pubmedqa import PUBMEDQA_REPO, fetch_pubmedqa
from ragray.data.scifact import SCIFACT_URL, fetch_scifact
from ragray.data.squad import SQUAD2_REPO, SQUAD_REPO, fetch_squad, fetch_squad2
from ragray.data.writing import write_records
from ragray.errors import InputError, MissingDependencyError, RagrayError
from ragray.paths import cache_root
from ragray.types import Dataset

__all__ = ["DATA_DIR_ENV", "PublicSet", "PUBLIC_SETS", "datasets_cache", "public_set_path"]

logger = logging.getLogger(__name__)

DATA_DIR_ENV = "RAGRAY_DATA_DIR"
_OFFLINE_ENVS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


@dataclass(frozen=True)
class PublicSet:
    """One named set: its records file (and corpus file), where it comes from, how to fetch it."""

    name: str
    title: str
    file: str
    corpus_file: str | None
    source: str
    fetch: Callable[[], Dataset]
    needs_datasets: bool = True  # fetched through Hugging Face `datasets`


PUBLIC_SETS: Mapping[str, PublicSet] = {
    s.name: s for s in (
        PublicSet("squad", "SQuAD v1.1 dev", "squad_v11_dev.jsonl", "squad_v11_dev.corpus.jsonl",
                  f"Hugging Face hub {SQUAD_REPO} (validation)", fetch_squad),
        PublicSet("squad2", "SQuAD 2.0 dev (with unanswerable questions)", "squad_v20_dev.jsonl",
                  "squad_v20_dev.corpus.jsonl", f"Hugging Face hub {SQUAD2_REPO} (validation)", fetch_squad2),
        PublicSet("hotpotqa", "HotpotQA dev (distractor)", "hotpotqa_distractor_dev.jsonl", None,
                  f"Hugging Face hub {HOTPOTQA_REPO} (distractor, validation)", fetch_hotpotqa),
        PublicSet("pubmedqa", "PubMedQA PQA-L", "pubmedqa_pqal.jsonl", None,
                  f"Hugging Face hub {PUBMEDQA_REPO} (pqa_labeled, train)", fetch_pubmedqa),
        PublicSet("scifact", "SciFact (BEIR)", "scifact.jsonl", "scifact.corpus.jsonl.gz",
                  f"BEIR's {SCIFACT_URL}", fetch_scifact, needs_datasets=False),
    )
}


def datasets_cache() -> Path:
    """Where fetched sets are kept: ``<cache root>/datasets``."""
    return cache_root() / "datasets"


def _files(spec: PublicSet) -> str:
    return spec.file + (f" (and {spec.corpus_file})" if spec.corpus_file else "")


def _unavailable(spec: PublicSet, why: str) -> str:
    return (f"dataset '{spec.name}' ({spec.title}) is not cached and {why}. Fetch it once with network "
            f"access from {spec.source} (it is then kept in {datasets_cache()}), or set "
            f"{DATA_DIR_ENV} to a folder holding {_files(spec)}, or pass a local records file "
            "with --dataset PATH")


def _fetch(spec: PublicSet, folder: Path) -> Path:
    offline = [name for name in _OFFLINE_ENVS if os.environ.get(name, "").lower() in ("1", "true", "yes", "on")]
    if offline:
        raise InputError(_unavailable(spec, f"{offline[0]} is set"))
    if spec.needs_datasets and importlib.util.find_spec("datasets") is None:
        raise MissingDependencyError(
            "datasets", "data", f"fetching dataset '{spec.name}' ({spec.title})",
            install=f"pip install 'ragray[data]' (or set {DATA_DIR_ENV} to a folder holding "
                    f"{_files(spec)}, or pass a local records file with --dataset PATH)",
        )
    logger.warning("dataset '%s' is not cached: fetching %s from %s (once; kept in %s)",
                   spec.name, spec.title, spec.source, folder)
    try:
        dataset = spec.fetch()
    except RagrayError:
        raise
    except (OSError, ValueError, RuntimeError, zipfile.BadZipFile) as exc:  # network, hub, archive
        raise InputError(_unavailable(spec, f"fetching it failed ({type(exc).__name__}: {exc})")) from exc
    corpus = folder / spec.corpus_file if spec.corpus_file else None
    path = write_records(dataset, folder / spec.file, corpus)
    logger.warning("dataset '%s': %d questions written to %s", spec.name, len(dataset.questions), path)
    return path


def public_set_path(name: str) -> Path:
    """The local records file of the public set ``name`` (its corpus file, if any, beside it):
    ``$RAGRAY_DATA_DIR/<file>``, else the cached conversion, else fetched and converted now."""
    spec = PUBLIC_SETS.get(name)
    if spec is None:
        raise InputError(f"unknown dataset name '{name}'; valid: {', '.join(sorted(PUBLIC_SETS))}")
    override = os.environ.get(DATA_DIR_ENV)
    if override:
        candidate = Path(override).expanduser() / spec.file
        if candidate.is_file():
            return candidate
        logger.info("%s=%s has no %s; looking in the cache", DATA_DIR_ENV, override, spec.file)
    cached = datasets_cache() / spec.file
    if cached.is_file():
        return cached
    return _fetch(spec, datasets_cache())
