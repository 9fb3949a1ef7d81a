"""``load_dataset(config)``: pick the loader for ``DataConfig.format`` (or detect it) and apply
``DataConfig.limit`` (which never cuts the corpus)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from ragray.config import DataConfig
from ragray.data.answerable import mark_unanswerable
from ragray.data.beir import is_beir_folder, load_beir
from ragray.data.named import PUBLIC_SETS, public_set_path
from ragray.data.nq import NQ_DATASET, NQ_DEFAULT_SAMPLES, load_nq
from ragray.data.pdf import load_pdf_folder, pdf_files
from ragray.data.records import load_records, record_format
from ragray.errors import InputError
from ragray.types import Dataset

__all__ = ["load_dataset", "detect_format", "demo_path", "LOADERS"]

logger = logging.getLogger(__name__)

DEMO = "demo"  # DataConfig.path keyword: the packaged demo set
NQ = "nq"  # DataConfig.path keyword: Natural Questions from the hub


def demo_path() -> Path:
    """The packaged demo records file (``ragray/demo/demo.jsonl``)."""
    resource = resources.files("ragray").joinpath("demo", "demo.jsonl")
    if not resource.is_file():
        raise InputError(
            "the packaged demo set ragray/demo/demo.jsonl is missing; reinstall ragray"
        )
    return Path(str(resource))


def detect_format(path: str | Path) -> str:
    """The loader name for ``path``: demo, nq, named, beir, pdf, jsonl, csv or parquet.

    The keywords ``demo`` and ``nq`` always mean the packaged demo set and Natural Questions, and
    ``squad``, ``hotpotqa``, ``pubmedqa``, ``scifact`` the public sets of
    :mod:`ragray.data.named` (write ``./demo`` for a local folder of that name).
    """
    if str(path) in (DEMO, NQ):
        return str(path)
    if str(path) in PUBLIC_SETS:
        return "named"
    p = Path(path)
    if p.is_dir():
        if is_beir_folder(p):
            return "beir"
        if pdf_files(p):
            return "pdf"
        raise InputError(
            f"cannot tell the format of folder {p}: expected a BEIR folder (corpus.jsonl, "
            "queries.jsonl, qrels/) or a folder of PDFs; set data.format"
        )
    if not p.exists():
        raise InputError(f"dataset not found: {p}")
    fmt = record_format(p)
    if fmt is None:
        raise InputError(
            f"unknown dataset file type '{''.join(p.suffixes) or p.name}' for {p}; expected "
            ".jsonl, .jsonl.gz, .csv or .parquet, a BEIR folder or a folder of PDFs "
            "(or set data.format)"
        )
    return fmt


def _demo(config: DataConfig) -> Dataset:
    return load_records(demo_path(), corpus=config.corpus, on_bad_row=config.on_bad_row,
                        name="demo")


def _named(config: DataConfig) -> Dataset:
    return load_records(public_set_path(config.path), corpus=config.corpus,
                        on_bad_row=config.on_bad_row)


def _records(config: DataConfig) -> Dataset:
    fmt = config.format if config.format != "auto" else None
    return load_records(config.path, corpus=config.corpus, on_bad_row=config.on_bad_row,
                        format=fmt, columns=config.columns)


def _beir(config: DataConfig) -> Dataset:
    return load_beir(config.path, split=config.split, on_bad_row=config.on_bad_row)


def _pdf(config: DataConfig) -> Dataset:
    return load_pdf_folder(config.path, queries=config.queries,
                           ground_truth=config.ground_truth, on_bad_row=config.on_bad_row)


def _nq(config: DataConfig) -> Dataset:
    # path "nq" (or the default "demo") means the hub dataset; anything else is a hub id / path
    dataset = NQ_DATASET if config.path in (DEMO, NQ, "") else config.path
    return load_nq(config.split, limit=config.limit or NQ_DEFAULT_SAMPLES, dataset=dataset,
                   on_bad_row=config.on_bad_row)


LOADERS: dict[str, Callable[[DataConfig], Dataset]] = {
    "demo": _demo,
    "jsonl": _records,
    "csv": _records,
    "parquet": _records,
    "beir": _beir,
    "pdf": _pdf,
    "nq": _nq,
    "named": _named,
}


def load_dataset(config: DataConfig, given: Dataset | None = None) -> Dataset:
    """Load the dataset ``config`` describes, mark its unanswerable questions
    (:mod:`ragray.data.answerable`) and keep its first ``config.limit`` questions. ``given``: a data
    set already in memory (the Python API's rows, :func:`~ragray.data.records.rows_dataset`) taken
    in place of ``config.path``, marked and limited the same way."""
    if given is not None:
        return mark_unanswerable(given).limit(config.limit)
    fmt: str = config.format
    if fmt == "auto" or ((config.path == DEMO or config.path in PUBLIC_SETS) and fmt == "jsonl"):
        fmt = detect_format(config.path)
    if config.columns and LOADERS[fmt] is not _records:
        raise InputError(f"data.columns (--columns) renames the columns of a records file (.jsonl, .csv, "
                         f".parquet); {config.path} is read as {fmt}")
    logger.debug("loading %s as %s", config.path, fmt)
    return mark_unanswerable(LOADERS[fmt](config)).limit(config.limit)
