"""The native record format: JSONL (or CSV / Parquet with the same columns) plus a corpus file.

One record per row::

    {"id": "q1", "question": "...", "answers": ["..."],
     "passages": [{"id": "p1", "title": "...", "text": "...", "meta": {"source": "..."}}],
     "gold_passage_ids": ["p1"], "meta": {...}}

The retrieval corpus is ``DataConfig.corpus`` if given, else ``<name>.corpus.jsonl[.gz]`` beside
the records file, else the union of the records' passages. Every bad row is an
:class:`~ragray.errors.InputError` naming ``file:line`` (for Parquet, the 1-based row number), or
a :class:`~ragray.types.SkippedRow` when ``on_bad_row="skip"``; never a silent drop.

Rules: ``id`` and a non-empty ``question`` are required; ``answers`` may be ``[]``; ``passages``
may be empty only when a corpus file exists (retrieval-only sets); passage ids are unique within a
record and consistent across records; every gold id must be in the corpus. Unknown record keys go
to ``Question.meta``, unknown passage keys to ``Passage.meta`` (metadata filters read it).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from ragray.errors import ConfigError, InputError
from ragray.types import Dataset, Passage, Question, SkippedRow, frozen_meta

__all__ = ["BadRows", "RowError", "load_records", "find_corpus", "read_corpus", "iter_jsonl", "unique_rows"]

T = TypeVar("T")

logger = logging.getLogger(__name__)

RECORD_SUFFIXES = (".jsonl.gz", ".jsonl", ".csv", ".parquet")
_QUESTION_KEYS = frozenset({"id", "question", "answers", "passages", "gold_passage_ids", "meta"})
_PASSAGE_KEYS = frozenset({"id", "title", "text", "meta"})


class RowError(Exception):
    """Raised while parsing one row; the loader prefixes ``file:line`` (internal)."""


class Row(NamedTuple):
    """One raw row as read from a file: its 1-based line and its data, or why it is unreadable."""

    line: int
    data: dict[str, Any] | None
    problem: str = ""


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


# ---------------------------------------------------------------------------------------------
# low-level readers: each yields Row(line, dict | None, problem)


def iter_jsonl(path: Path) -> Iterator[Row]:
    """Rows of a JSONL file (``.gz`` decompressed); blank lines are not rows."""
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as fh:
            for line, raw in enumerate(fh, start=1):
                yield _json_row(line, raw)
    except (gzip.BadGzipFile, EOFError) as exc:
        raise InputError(f"{path}: not a valid gzip file ({exc})") from None


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


def _json_row(line: int, raw: bytes) -> Row:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Row(line, None, f"not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})")
    text = text.lstrip("\ufeff").rstrip("\r\n")
    if not text.strip():
        return Row(line, None, "")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return Row(line, None, f"not valid JSON: {exc.msg} (column {exc.colno})")
    if not isinstance(data, dict):
        return Row(line, None, f"not a JSON object (got {_kind(data)})")
    return Row(line, data)


_KEY_COLUMNS = ("id", "question")


def _iter_csv(path: Path, required: Sequence[str] = _KEY_COLUMNS) -> Iterator[Row]:
    # Decode with surrogateescape so one bad byte spoils only its own record, not the file.
    text = path.read_bytes().decode("utf-8", errors="surrogateescape").lstrip("\ufeff")
    # Whole documents in a cell can pass csv's 128 KiB default field limit.
    csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))
    reader = csv.reader(io.StringIO(text, newline=""))
    header: list[str] | None = None
    end = 0
    try:
        for cells in reader:
            start, end = end + 1, reader.line_num
            if not any(c.strip() for c in cells):
                continue
            if header is None:
                header = _csv_header(path, start, cells, required)
                continue
            if any(_has_bad_bytes(c) for c in cells):
                yield Row(start, None, "not UTF-8")
            elif len(cells) != len(header):
                yield Row(start, None, f"has {len(cells)} cells, the header has {len(header)}")
            else:
                yield Row(start, dict(zip(header, cells, strict=True)))
    except csv.Error as exc:
        raise InputError(f"{path}:{reader.line_num}: not valid CSV: {exc}") from None


def _csv_header(path: Path, line: int, cells: list[str], required: Sequence[str]) -> list[str]:
    header = [c.strip() for c in cells]
    if any(_has_bad_bytes(c) for c in header):
        raise InputError(f"{path}:{line}: header is not UTF-8")
    dupes = sorted({c for c in header if header.count(c) > 1})
    if dupes:
        raise InputError(f"{path}:{line}: duplicate column(s) {', '.join(dupes)}")
    _require_columns(path, line, header, required)
    return header


def _iter_parquet(path: Path, required: Sequence[str] = _KEY_COLUMNS) -> Iterator[Row]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"{path}: not a readable Parquet file ({exc})") from None
    _require_columns(path, 0, table.column_names, required)
    for line, data in enumerate(table.to_pylist(), start=1):
        yield Row(line, _drop_nulls(data))


def _require_columns(path: Path, line: int, columns: list[str], required: Sequence[str]) -> None:
    where = f"{path}:{line}" if line else str(path)
    for col in required:
        if col not in columns:
            raise InputError(f"{where}: missing column '{col}' (found: {', '.join(columns)})")


def _drop_nulls(value: Any) -> Any:
    """Parquet nulls mean "absent": drop them from structs (map columns become dicts)."""
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        if value and all(isinstance(x, tuple) and len(x) == 2 for x in value):
            return {k: _drop_nulls(v) for k, v in value if v is not None}
        return [_drop_nulls(v) for v in value]
    return value


def _has_bad_bytes(text: str) -> bool:
    return any("\udc80" <= ch <= "\udcff" for ch in text)


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
             int: "an integer", float: "a number"}
    return names.get(type(value), "null" if value is None else f"a {type(value).__name__}")


_READERS: dict[str, tuple[Callable[[Path], Iterator[Row]], bool]] = {
    # format -> (reader, tabular: cells may hold JSON strings)
    "jsonl": (iter_jsonl, False),
    "csv": (_iter_csv, True),
    "parquet": (_iter_parquet, True),
}


# ---------------------------------------------------------------------------------------------
# field parsing (raise RowError with the reason only; the caller adds file:line)


def _ident(value: Any, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise RowError(f"{what} must be a string, got {_kind(value)}")
    text = str(value).strip()
    if not text:
        raise RowError(f"{what} is empty")
    return text


def _cell(value: Any, key: str, tabular: bool, plain_ok: bool) -> Any:
    """A list/object column; in CSV/Parquet it may be a JSON string (or one plain value)."""
    if not (tabular and isinstance(value, str)):
        return value
    text = value.strip()
    if not text:  # an empty cell means "absent"
        return {} if key == "meta" else []
    if plain_ok and not text.startswith("["):
        return [text]
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RowError(f"'{key}' is not valid JSON: {exc.msg} (column {exc.colno})") from None


def _strings(value: Any, key: str, item: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise RowError(f"'{key}' must be a list of strings, got {_kind(value)}")
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
        raise RowError(f"{what} must be an object, got {_kind(value)}")
    return value


def parse_passage(raw: Any, n: int) -> Passage:
    """One inline passage (``n`` is its 1-based position, for messages)."""
    if not isinstance(raw, dict):
        raise RowError(f"'passages' must be a list of objects (passage {n} is {_kind(raw)})")
    if "id" not in raw:
        raise RowError(f"passage {n} has no 'id'")
    if "text" not in raw:
        raise RowError(f"passage {n} has no 'text'")
    pid = _ident(raw["id"], f"passage {n} 'id'")
    text, title = raw["text"], _opt(raw, "title", "")
    if not isinstance(text, str):
        raise RowError(f"passage {n} 'text' must be a string, got {_kind(text)}")
    if not text.strip():
        raise RowError(f"passage {n} has an empty 'text'")
    if not isinstance(title, str):
        raise RowError(f"passage {n} 'title' must be a string, got {_kind(title)}")
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
        raise RowError(f"'question' must be a string, got {_kind(question)}")
    if not question.strip():
        raise RowError("'question' is empty")
    answers = _strings(_cell(_opt(raw, "answers", []), "answers", tabular, True),
                       "answers", "answer")
    gold = _strings(
        _cell(_opt(raw, "gold_passage_ids", []), "gold_passage_ids", tabular, True),
        "gold_passage_ids", "gold id",
    )
    items = _cell(_opt(raw, "passages", []), "passages", tabular, False)
    if not isinstance(items, list):
        raise RowError(f"'passages' must be a list of objects, got {_kind(items)}")
    passages = tuple(parse_passage(p, n) for n, p in enumerate(items, start=1))
    first: dict[str, int] = {}
    for n, p in enumerate(passages, start=1):
        if p.id in first:
            raise RowError(f"passage {n} repeats id '{p.id}' (passage {first[p.id]})")
        first[p.id] = n
    meta = _meta(_cell(_opt(raw, "meta", {}), "meta", tabular, False), "'meta'")
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


def record_format(path: Path) -> str | None:
    """``jsonl`` / ``csv`` / ``parquet`` from the file name, or None."""
    name = path.name.lower()
    if name.endswith((".jsonl", ".jsonl.gz")):
        return "jsonl"
    if name.endswith(".csv"):
        return "csv"
    if name.endswith(".parquet"):
        return "parquet"
    return None


def load_records(
    path: str | Path,
    *,
    corpus: str | Path | None = None,
    on_bad_row: str = "error",
    format: str | None = None,
    name: str | None = None,
) -> Dataset:
    """Load a native records file (JSONL, JSONL.gz, CSV or Parquet) and its corpus.

    ``format`` forces ``jsonl``/``csv``/``parquet`` regardless of the suffix; ``corpus`` overrides
    the ``<name>.corpus.jsonl[.gz]`` lookup. Raises :class:`InputError` on the first bad row
    (``file:line: reason``) unless ``on_bad_row="skip"``.
    """
    path = Path(path)
    bad = BadRows(on_bad_row)
    if not path.is_file():
        raise InputError(f"dataset file not found: {path}")
    if ".corpus.jsonl" in path.name:
        raise InputError(f"{path} is a corpus file; give the records file beside it instead")
    fmt = format or record_format(path)
    if fmt not in _READERS:
        raise InputError(
            f"unknown dataset file type for {path}; expected .jsonl, .jsonl.gz, .csv or .parquet"
        )
    corpus_path = Path(corpus) if corpus else find_corpus(path)
    corpus_passages = read_corpus(corpus_path, bad) if corpus_path else None
    reader, tabular = _READERS[fmt]
    builder = _Builder(str(path), bad, corpus_path, corpus_passages)
    for row in reader(path):
        builder.add(row, tabular)
    questions = builder.finish()
    bad.summary()
    if not questions:
        skipped = f" ({len(bad.skipped)} bad rows skipped)" if bad.skipped else ""
        raise InputError(f"{path}: no questions{skipped}")
    logger.info(
        "loaded %d questions from %s (corpus: %s)", len(questions), path,
        f"{len(corpus_passages)} passages from {corpus_path}" if corpus_passages else "union",
    )
    return Dataset(
        name=name or dataset_name(path), questions=questions, corpus=corpus_passages,
        skipped=tuple(bad.skipped),
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
