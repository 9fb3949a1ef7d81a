"""Write a :class:`~ragray.types.Dataset` in the native record format (JSONL plus a corpus file).

The inverse of :func:`ragray.data.records.load_records`: one record per line, and the explicit
corpus (if any) as ``<name>.corpus.jsonl[.gz]`` beside it, where the loader looks for it. Files
are written to a temporary name and renamed, so a reader never sees half a file; the corpus is
renamed into place first, so a complete records file always has its corpus.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ragray.types import Dataset, Passage, Question

__all__ = ["write_records", "record_row", "passage_row"]


def _plain(value: Any) -> Any:
    """Frozen metadata and tuples as JSON's dicts and lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def passage_row(p: Passage) -> dict[str, Any]:
    """``{"id", "title", "text"[, "meta"]}``: one passage or corpus line."""
    row: dict[str, Any] = {"id": p.id, "title": p.title, "text": p.text}
    if p.meta:
        row["meta"] = _plain(p.meta)
    return row


def record_row(q: Question) -> dict[str, Any]:
    """One question as a native record."""
    row: dict[str, Any] = {
        "id": q.id, "question": q.question, "answers": list(q.answers),
        "passages": [passage_row(p) for p in q.passages],
        "gold_passage_ids": list(q.gold_passage_ids),
    }
    if q.meta:
        row["meta"] = _plain(q.meta)
    return row


def _write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(tmp, "wt", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_records(dataset: Dataset, path: str | Path, corpus_path: str | Path | None = None) -> Path:
    """Write ``dataset``'s questions to ``path`` and, when it has an explicit corpus, the corpus to
    ``corpus_path`` (default ``<name>.corpus.jsonl`` beside it; ``.gz`` compresses). Returns
    ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if dataset.corpus is not None:
        stem = path.name.removesuffix(".gz").removesuffix(".jsonl")
        target = Path(corpus_path) if corpus_path else path.with_name(f"{stem}.corpus.jsonl")
        _write_jsonl(target, (passage_row(p) for p in dataset.corpus))
    _write_jsonl(path, (record_row(q) for q in dataset.questions))
    return path
