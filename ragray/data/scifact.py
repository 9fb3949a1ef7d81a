"""SciFact as BEIR publishes it: ``scifact.zip`` (``corpus.jsonl``, ``queries.jsonl``,
``qrels/test.tsv``) from the BEIR download server.

The BEIR folder is read by :func:`ragray.data.beir.load_beir` (its test split: the 300 claims of
SciFact's dev set, judged against 5,183 abstracts). :func:`scifact_records` turns that into
records: ``scifact-<query id>``, the claim as question, no answers (retrieval only), the judged
abstracts as passages and gold ids (graded judgements kept in ``meta["qrels"]``), and every
abstract in the corpus. :func:`fetch_scifact` is the thin network wrapper (download, unzip, read).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import urllib.request
import zipfile
from pathlib import Path

from ragray.data.beir import is_beir_folder, load_beir
from ragray.errors import InputError
from ragray.types import Dataset, Question, frozen_meta

__all__ = ["SCIFACT_URL", "scifact_records", "fetch_scifact"]

logger = logging.getLogger(__name__)

SCIFACT_URL = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/scifact.zip"
_SOURCE = "SciFact (BEIR test queries; gold = BEIR qrels)"


def scifact_records(beir: Dataset, *, name: str = "scifact") -> Dataset:
    """A loaded BEIR SciFact (queries over a corpus) → records with their judged abstracts."""
    corpus = beir.global_corpus()
    by_id = {p.id: p for p in corpus}
    questions = tuple(
        Question(
            id=f"scifact-{q.id}", question=q.question, answers=(),
            passages=tuple(by_id[g] for g in q.gold_passage_ids),
            gold_passage_ids=q.gold_passage_ids, meta=frozen_meta({"source": _SOURCE, **q.meta}),
        )
        for q in beir.questions
    )
    return Dataset(name=name, questions=questions, corpus=corpus, skipped=beir.skipped)


def fetch_scifact(url: str = SCIFACT_URL, *, timeout_s: float = 60.0) -> Dataset:
    """Download BEIR's ``scifact.zip`` from ``url``, unzip it in a temporary folder and convert
    its test split (bad rows skipped)."""
    with tempfile.TemporaryDirectory(prefix="ragray-scifact-") as tmp:
        archive = Path(tmp) / "scifact.zip"
        logger.info("downloading %s", url)
        with urllib.request.urlopen(url, timeout=timeout_s) as response, archive.open("wb") as fh:
            shutil.copyfileobj(response, fh)
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(Path(tmp) / "unzipped")  # zipfile drops absolute and ".." parts
        folders = [p.parent for p in sorted((Path(tmp) / "unzipped").rglob("corpus.jsonl*"))
                   if is_beir_folder(p.parent)]
        if not folders:
            raise InputError(f"{url}: the archive holds no BEIR folder (corpus.jsonl, queries.jsonl)")
        return scifact_records(load_beir(folders[0], split="test", on_bad_row="skip"))
