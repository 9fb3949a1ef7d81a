"""BEIR folders: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``.

Questions are the queries judged in the split, in ``queries.jsonl`` order; their gold ids are the
corpus ids judged with a score > 0 (all graded scores are kept in ``Question.meta["qrels"]`` for
graded nDCG). Questions carry no passages: BEIR is a global-scope, retrieval-only benchmark.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ragray.data.records import BadRows, RowError, read_corpus, unique_rows
from ragray.errors import InputError
from ragray.types import Dataset, Question, frozen_meta

__all__ = ["load_beir", "is_beir_folder"]

logger = logging.getLogger(__name__)


def _first_file(folder: Path, name: str) -> Path | None:
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


def is_beir_folder(path: str | Path) -> bool:
    """True when ``path`` holds ``corpus.jsonl[.gz]`` and ``queries.jsonl[.gz]``."""
    folder = Path(path)
    return bool(_first_file(folder, "corpus.jsonl") and _first_file(folder, "queries.jsonl"))


def load_beir(path: str | Path, *, split: str = "test", on_bad_row: str = "error") -> Dataset:
    """Load a BEIR folder: the queries judged in ``qrels/<split>.tsv`` over ``corpus.jsonl``."""
    folder = Path(path)
    bad = BadRows(on_bad_row)
    if not folder.is_dir():
        raise InputError(f"BEIR folder not found: {folder}")
    corpus_path = _first_file(folder, "corpus.jsonl")
    queries_path = _first_file(folder, "queries.jsonl")
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if corpus_path is None or queries_path is None:
        raise InputError(f"{folder}: a BEIR folder needs corpus.jsonl and queries.jsonl")
    if not qrels_path.is_file():
        splits = sorted(p.stem for p in (folder / "qrels").glob("*.tsv"))
        raise InputError(
            f"{qrels_path} not found (data.split={split!r}; available splits: "
            f"{', '.join(splits) or 'none'})"
        )
    corpus = read_corpus(corpus_path, bad)
    queries = _read_queries(queries_path, bad)
    qrels = _read_qrels(qrels_path, {p.id for p in corpus}, set(queries), bad)
    questions = []
    for qid, (text, meta) in queries.items():
        if qid not in qrels:
            continue
        judged = qrels[qid]
        gold = tuple(doc for doc, score in judged.items() if score > 0)
        questions.append(Question(
            id=qid, question=text, gold_passage_ids=gold,
            meta=frozen_meta({**meta, "qrels": dict(judged)}),
        ))
    bad.summary()
    if not questions:
        raise InputError(f"{qrels_path}: no query of {queries_path.name} is judged in this split")
    logger.info("loaded %d BEIR queries (%s) over %d documents from %s",
                len(questions), split, len(corpus), folder)
    return Dataset(name=folder.name, questions=tuple(questions), corpus=corpus,
                   skipped=tuple(bad.skipped), corpus_name=corpus_path.name)


def _read_queries(path: Path, bad: BadRows) -> dict[str, tuple[str, dict[str, Any]]]:
    return {qid: (text, meta) for qid, text, meta in unique_rows(path, bad, _query, lambda q: q[0])}


def _query(raw: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    key = "_id" if "_id" in raw else "id"
    if key not in raw:
        raise RowError("'_id' is missing")
    qid = raw[key]
    if isinstance(qid, bool) or not isinstance(qid, (str, int)) or not str(qid).strip():
        raise RowError(f"'{key}' must be a non-empty string")
    if "text" not in raw:
        raise RowError("'text' is missing")
    text = raw["text"]
    if not isinstance(text, str) or not text.strip():
        raise RowError("'text' is empty" if isinstance(text, str) else "'text' must be a string")
    meta = raw.get("metadata") or {}
    if not isinstance(meta, dict):
        raise RowError("'metadata' must be an object")
    return str(qid).strip(), text.strip(), meta


def _read_qrels(
    path: Path, corpus_ids: set[str], query_ids: set[str], bad: BadRows
) -> dict[str, dict[str, int]]:
    """``query-id corpus-id score`` lines (tab-separated, optional header) → {qid: {doc: score}}."""
    qrels: dict[str, dict[str, int]] = {}
    first: dict[tuple[str, str], int] = {}
    with path.open("rb") as fh:
        for line, raw in enumerate(fh, start=1):
            try:
                parsed = _qrel(raw, line)
                if parsed is None:
                    continue
                qid, doc, score = parsed
                if qid not in query_ids:
                    raise RowError(f"query id '{qid}' is not in queries.jsonl")
                if doc not in corpus_ids:
                    raise RowError(f"corpus id '{doc}' is not in corpus.jsonl")
                old = qrels.get(qid, {}).get(doc)
                if old is not None and old != score:
                    raise RowError(f"conflicting score for ('{qid}', '{doc}') "
                                   f"(first seen on line {first[(qid, doc)]})")
            except RowError as exc:
                bad(str(path), line, str(exc))
                continue
            first.setdefault((qid, doc), line)
            qrels.setdefault(qid, {})[doc] = score
    return qrels


def _qrel(raw: bytes, line: int) -> tuple[str, str, int] | None:
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise RowError("not UTF-8") from None
    if not text:
        return None
    cells = text.split("\t") if "\t" in text else text.split()
    if len(cells) != 3:
        raise RowError(f"expected 3 columns (query-id, corpus-id, score), got {len(cells)}")
    qid, doc, score = (c.strip() for c in cells)
    try:
        return qid, doc, int(score)
    except ValueError:
        if line == 1:  # the header line ("query-id  corpus-id  score")
            return None
        raise RowError(f"score {score!r} is not an integer") from None
