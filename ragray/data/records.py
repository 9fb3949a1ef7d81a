"""The native record format: JSONL (or CSV / Parquet with the same columns) plus a corpus file.

Files in RAGAS' schemas, or in any naming given by ``data.columns``, are read too: they are turned
into these records first (:mod:`ragray.data.schemas`).

One record per row::

    {"id": "q1", "question": "...", "answers": ["..."],
     "passages": [{"id": "p1", "title": "...", "text": "...", "meta": {"source": "..."}}],
     "gold_passage_ids": ["p1"], "meta": {...}}

The retrieval corpus is ``DataConfig.corpus`` if given, else ``<name>.corpus.jsonl[.gz]`` beside
the records file, else the union of the records' passages. Every bad row is an
:class:`~ragray.errors.InputError` naming ``file:line`` (for Parquet, the 1-based row number), or
a :class:`~ragray.types.SkippedRow` when ``on_bad_row="skip"``; never a silent drop.

Rules: a non-empty ``question`` is required; a record without ``id`` is ``row-<line>``;
``answers`` may be ``[]``; ``passages`` may be empty only when a corpus file exists (retrieval-only
sets); passage ids are unique within a record and consistent across records; every gold id must
be in the corpus. Unknown record keys go
to ``Question.meta``, unknown passage keys to ``Passage.meta`` (metadata filters read it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ragray.data.schemas import RECORD_SCHEMAS, schema_rows
from ragray.data.tables import (
    RECORD_SUFFIXES,
    Row,
    RowError,
    Table,
    cell,
    iter_jsonl,
    kind,
    read_table,
    record_format,
    rows_table,
)
from ragray.errors import ConfigError, InputError
from ragray.types import Dataset, Passage, Question, SkippedRow, frozen_meta

__all__ = ["BadRows", "RowError", "load_records", "find_corpus", "read_corpus", "iter_jsonl", "rows_dataset",
           "unique_rows", "record_format"]

T = TypeVar("T")

logger = logging.getLogger(__name__)

_QUESTION_KEYS = frozenset({"id", "question", "answers", "passages", "gold_passage_ids", "meta"})
_PASSAGE_KEYS = frozenset({"id", "title", "text", "meta"})


class BadRows:
    """Applies ``on_bad_row``: raise ``InputError("file:line: reason")`` or record a skip."""

    def __init__(self, on_bad_row: str = "error") -> None:
        if on_bad_row not in ("error", "skip"):
            raise ConfigError(f"data.on_bad_row must be one of 'error', 'skip', got {on_bad_row!r}")
        self.skip = on_bad_row == "skip"
        self.skipped: list[SkippedRow] = []

    def __call__(self, source: str, line: int, reason: str, *, where: str = "") -> None:
        """Report one bad row: raises in error mode, records it in skip mode.

        The message reads ``source:line: reason``; ``where`` replaces ``source:line`` for items
        that have no line of their own (a PDF file, the 2nd query of a JSON list).
        """
        where = where or f"{source}:{line}"
        if not self.skip:
            raise InputError(f"{where}: {reason}")
        logger.debug("skipping %s: %s", where, reason)
        self.skipped.append(SkippedRow(source, line, reason))

    def summary(self) -> None:
        """Log one warning with the number of skipped rows and the first reason."""
        if self.skipped:
            first = self.skipped[0]
            where = f"{first.source}:{first.line}" if first.line else first.source
            logger.warning("skipped %d bad row(s) (first: %s: %s)",
                           len(self.skipped), where, first.reason)


def unique_rows(path: Path, bad: BadRows, parse: Callable[[dict[str, Any]], T],
                key: Callable[[T], str]) -> Iterator[T]:
    """``parse`` of each row of a JSONL file, each ``key`` once: a row that is not JSON, does not
    parse (:class:`RowError`) or repeats an id goes to ``bad`` with its line."""
    first: dict[str, int] = {}
    for row in iter_jsonl(path):
        if row.data is None:
            if row.problem:
                bad(str(path), row.line, row.problem)
            continue
        try:
            item = parse(row.data)
            k = key(item)
            if k in first:
                raise RowError(f"duplicate id '{k}' (first seen on line {first[k]})")
        except RowError as exc:
            bad(str(path), row.line, str(exc))
            continue
        first[k] = row.line
        yield item


# ---------------------------------------------------------------------------------------------
# field parsing (raise RowError with the reason only; the caller adds file:line)


def _ident(value: Any, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise RowError(f"{what} must be a string, got {kind(value)}")
    text = str(value).strip()
    if not text:
        raise RowError(f"{what} is empty")
    return text


def _strings(value: Any, key: str, item: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise RowError(f"'{key}' must be a list of strings, got {kind(value)}")
    out = []
    for i, v in enumerate(value, start=1):
        out.append(_ident(v, f"{item} {i}"))
    return tuple(out)


def _opt(raw: Mapping[str, Any], key: str, default: Any) -> Any:
    """An optional field; ``null`` counts as absent (as Parquet nulls do)."""
    value = raw.get(key)
    return default if value is None else value


def _meta(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RowError(f"{what} must be an object, got {kind(value)}")
    return value


def parse_passage(raw: Any, n: int) -> Passage:
    """One inline passage (``n`` is its 1-based position, for messages)."""
    if not isinstance(raw, dict):
        raise RowError(f"'passages' must be a list of objects (passage {n} is {kind(raw)})")
    if "id" not in raw:
        raise RowError(f"passage {n} has no 'id'")
    if "text" not in raw:
        raise RowError(f"passage {n} has no 'text'")
    pid = _ident(raw["id"], f"passage {n} 'id'")
    text, title = raw["text"], _opt(raw, "title", "")
    if not isinstance(text, str):
        raise RowError(f"passage {n} 'text' must be a string, got {kind(text)}")
    if not text.strip():
        raise RowError(f"passage {n} has an empty 'text'")
    if not isinstance(title, str):
        raise RowError(f"passage {n} 'title' must be a string, got {kind(title)}")
    extra = {k: v for k, v in raw.items() if k not in _PASSAGE_KEYS}
    meta = {**extra, **_meta(_opt(raw, "meta", {}), f"passage {n} 'meta'")}
    return Passage(id=pid, text=text, title=title, meta=frozen_meta(meta))


def parse_record(raw: Mapping[str, Any], *, tabular: bool = False) -> Question:
    """One record → :class:`Question`; raises :class:`RowError` with the reason."""
    for key in ("id", "question"):
        if key not in raw:
            raise RowError(f"'{key}' is missing")
    qid = _ident(raw["id"], "'id'")
    question = raw["question"]
    if not isinstance(question, str):
        raise RowError(f"'question' must be a string, got {kind(question)}")
    if not question.strip():
        raise RowError("'question' is empty")
    answers = _strings(cell(_opt(raw, "answers", []), "answers", tabular, True),
                       "answers", "answer")
    gold = _strings(
        cell(_opt(raw, "gold_passage_ids", []), "gold_passage_ids", tabular, True),
        "gold_passage_ids", "gold id",
    )
    items = cell(_opt(raw, "passages", []), "passages", tabular, False)
    if not isinstance(items, list):
        raise RowError(f"'passages' must be a list of objects, got {kind(items)}")
    passages = tuple(parse_passage(p, n) for n, p in enumerate(items, start=1))
    first: dict[str, int] = {}
    for n, p in enumerate(passages, start=1):
        if p.id in first:
            raise RowError(f"passage {n} repeats id '{p.id}' (passage {first[p.id]})")
        first[p.id] = n
    meta = _meta(cell(_opt(raw, "meta", {}), "meta", tabular, False), "'meta'")
    extra = {k: v for k, v in raw.items() if k not in _QUESTION_KEYS}
    return Question(
        id=qid, question=question.strip(), answers=answers, passages=passages,
        gold_passage_ids=gold, meta=frozen_meta({**extra, **meta}),
    )


# ---------------------------------------------------------------------------------------------
# corpus files


def find_corpus(path: str | Path) -> Path | None:
    """``<name>.corpus.jsonl`` or ``<name>.corpus.jsonl.gz`` beside ``path``, if one exists."""
    path = Path(path)
    name = dataset_name(path)
    for suffix in (".corpus.jsonl", ".corpus.jsonl.gz"):
        candidate = path.with_name(name + suffix)
        if candidate.is_file():
            return candidate
    return None


def dataset_name(path: Path) -> str:
    """The file name without its record suffix (``squad.jsonl.gz`` → ``squad``)."""
    for suffix in RECORD_SUFFIXES:
        if path.name.lower().endswith(suffix):
            return path.name[: -len(suffix)]
    return path.stem


def read_corpus(path: str | Path, bad: BadRows | None = None) -> tuple[Passage, ...]:
    """A JSONL(.gz) corpus: ``{"id" | "_id", "title", "text", "meta" | "metadata", ...}`` rows.

    A row with an empty text but a title (common in BEIR corpora) uses the title as its text.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"corpus file not found: {path}")
    passages = list(unique_rows(path, bad or BadRows(), _corpus_passage, lambda p: p.id))
    if not passages:
        raise InputError(f"{path}: the corpus is empty")
    return tuple(passages)


def _corpus_passage(raw: dict[str, Any]) -> Passage:
    key = "id" if "id" in raw else "_id"
    if key not in raw:
        raise RowError("'id' is missing")
    pid = _ident(raw[key], f"'{key}'")
    text, title = raw.get("text", ""), raw.get("title", "") or ""
    if not isinstance(text, str) or not isinstance(title, str):
        raise RowError("'text' and 'title' must be strings")
    if not text.strip():
        if not title.strip():
            raise RowError("'text' is empty" if "text" in raw else "'text' is missing")
        text = title
    meta: dict[str, Any] = {k: v for k, v in raw.items() if k not in {"id", "_id", "title", "text",
                                                                       "meta", "metadata"}}
    for mkey in ("metadata", "meta"):
        if raw.get(mkey) is not None:
            meta.update(_meta(raw[mkey], f"'{mkey}'"))
    return Passage(id=pid, text=text, title=title, meta=frozen_meta(meta))


# ---------------------------------------------------------------------------------------------
# loading


def load_records(
    path: str | Path,
    *,
    corpus: str | Path | None = None,
    on_bad_row: str = "error",
    format: str | None = None,
    name: str | None = None,
    columns: Mapping[str, str] | None = None,
) -> Dataset:
    """Load a records file (JSONL, JSONL.gz, CSV or Parquet) and its corpus.

    The records may be ragray's or RAGAS' (either schema, :mod:`ragray.data.schemas`);
    ``columns`` (``data.columns``) maps ragray's field names to the file's columns for any other
    naming. ``format`` forces ``jsonl``/``csv``/``parquet`` regardless of the suffix; ``corpus``
    overrides the ``<name>.corpus.jsonl[.gz]`` lookup. Raises :class:`InputError` on the first bad
    row (``file:line: reason``) unless ``on_bad_row="skip"``.
    """
    path = Path(path)
    bad = BadRows(on_bad_row)
    if not path.is_file():
        raise InputError(f"dataset file not found: {path}")
    if ".corpus.jsonl" in path.name:
        raise InputError(f"{path} is a corpus file; give the records file beside it instead")
    fmt = format or record_format(path)
    if fmt is None:
        raise InputError(
            f"unknown dataset file type for {path}; expected .jsonl, .jsonl.gz, .csv or .parquet"
        )
    corpus_path = Path(corpus) if corpus else find_corpus(path)
    corpus_passages = read_corpus(corpus_path, bad) if corpus_path else None
    return _dataset(read_table(path, fmt), str(path), bad, corpus_path, corpus_passages, columns,
                    name or dataset_name(path))


def rows_dataset(rows: Sequence[Mapping[str, Any]], *, name: str = "rows", on_bad_row: str = "error",
                 columns: Mapping[str, str] | None = None) -> Dataset:
    """A dataset from records held in memory (the Python API's rows), parsed and checked as a
    records file is: a bad row is reported as ``rows:N`` (its 1-based position)."""
    bad = BadRows(on_bad_row)
    return _dataset(rows_table(rows), "rows", bad, None, None, columns, name)


def _dataset(table: Table, source: str, bad: BadRows, corpus_path: Path | None,
             corpus_passages: tuple[Passage, ...] | None, columns: Mapping[str, str] | None, name: str) -> Dataset:
    builder = _Builder(source, bad, corpus_path, corpus_passages)
    for row in schema_rows(table, RECORD_SCHEMAS, columns):
        builder.add(row, table.tabular)
    questions = builder.finish()
    bad.summary()
    if not questions:
        skipped = f" ({len(bad.skipped)} bad rows skipped)" if bad.skipped else ""
        raise InputError(f"{source}: no questions{skipped}")
    logger.info(
        "loaded %d questions from %s (corpus: %s)", len(questions), source,
        f"{len(corpus_passages)} passages from {corpus_path}" if corpus_passages else "union",
    )
    return Dataset(
        name=name, questions=questions, corpus=corpus_passages,
        skipped=tuple(bad.skipped), corpus_name=corpus_path.name if corpus_passages else None,
    )


class _Builder:
    """Collects questions, applying the checks that span rows (duplicates, gold ids)."""

    def __init__(
        self, source: str, bad: BadRows, corpus_path: Path | None,
        corpus: tuple[Passage, ...] | None,
    ) -> None:
        self.source, self.bad, self.corpus_path = source, bad, corpus_path
        self.corpus_ids = {p.id for p in corpus} if corpus is not None else None
        self.rows: list[tuple[int, Question]] = []
        self.first_line: dict[str, int] = {}
        self.passages: dict[str, tuple[int, Passage]] = {}

    def add(self, row: Row, tabular: bool) -> None:
        if row.data is None:
            if row.problem:
                self.bad(self.source, row.line, row.problem)
            return
        try:
            q = parse_record(row.data, tabular=tabular)
            self._check(row.line, q)
        except RowError as exc:
            self.bad(self.source, row.line, str(exc))
            return
        self.first_line[q.id] = row.line
        for p in q.passages:
            self.passages.setdefault(p.id, (row.line, p))
        self.rows.append((row.line, q))

    def _check(self, line: int, q: Question) -> None:
        if q.id in self.first_line:
            raise RowError(f"duplicate id '{q.id}' (first seen on line {self.first_line[q.id]})")
        if not q.passages and self.corpus_ids is None:
            raise RowError("'passages' is empty and there is no corpus file")
        for n, p in enumerate(q.passages, start=1):
            seen = self.passages.get(p.id)
            if seen and (seen[1].text, seen[1].title) != (p.text, p.title):
                raise RowError(
                    f"passage {n} (id '{p.id}') differs from the passage with that id "
                    f"on line {seen[0]}"
                )
        if self.corpus_ids is not None:
            for gid in q.gold_passage_ids:
                if gid not in self.corpus_ids:
                    raise RowError(f"gold id '{gid}' is not in the corpus ({self.corpus_path})")

    def finish(self) -> tuple[Question, ...]:
        """Without a corpus file, gold ids must be among the passages of the kept records."""
        rows = self.rows
        while self.corpus_ids is None:  # repeat: a skipped row can take another's gold with it
            known = {p.id for _, q in rows for p in q.passages}
            kept = []
            for line, q in rows:
                missing = [g for g in q.gold_passage_ids if g not in known]
                if missing:
                    self.bad(self.source, line,
                             f"gold id '{missing[0]}' is not among the passages of any record")
                else:
                    kept.append((line, q))
            if len(kept) == len(rows):
                break
            rows = kept
        return tuple(q for _, q in rows)
