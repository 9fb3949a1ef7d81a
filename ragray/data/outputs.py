"""Bring-your-own outputs: records of an existing RAG pipeline, for ``ragray score``.

One record per line (JSONL, JSONL.gz, CSV or Parquet) with the question, what was retrieved and
what was answered; nothing is re-run. Fields:

- ``question`` (required, non-empty string) and ``answer`` (required string, may be empty);
- the context, either ``passages`` (the native format: objects with ``id``, ``text``, optional
  ``title``; their order is the retrieval order) or ``contexts`` (a list of strings, RAGAS-style;
  ids ``c1``, ``c2`` ... in order);
- optional gold: ``answers`` / ``gold_answers`` / ``ground_truth`` (a string or a list of
  strings) and ``gold_passage_ids`` (ids of the passages that should have been retrieved);
- optional ``id`` (default ``row-<line>``), ``latency_s``, ``prompt_tokens``,
  ``completion_tokens`` and ``model`` (for the cost table).

Files in RAGAS' schemas (``user_input``, ``retrieved_contexts``, ``response``, ``reference``,
``reference_contexts``; or ``ground_truths`` before 0.2) and files named through ``data.columns``
are turned into these fields first (:mod:`ragray.data.schemas`).

A bad row raises ``InputError("file:line: reason")``, or is skipped and counted with
``--skip-bad-rows``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragray.data.records import BadRows, parse_passage
from ragray.data.schemas import OUTPUT_SCHEMAS, schema_rows
from ragray.data.tables import RowError, cell, kind, read_table, rows_table
from ragray.errors import InputError
from ragray.types import Passage, SkippedRow

__all__ = ["OutputRecord", "load_outputs"]

_GOLD_KEYS = ("answers", "gold_answers", "ground_truth")


@dataclass(frozen=True)
class OutputRecord:
    id: str
    question: str
    answer: str
    passages: tuple[Passage, ...]
    golds: tuple[str, ...] = ()
    gold_passage_ids: tuple[str, ...] = ()
    latency_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    model: str | None = None


def _text(raw: Mapping[str, Any], key: str, *, allow_empty: bool) -> str:
    if key not in raw or raw[key] is None:
        raise RowError(f"'{key}' is missing")
    value = raw[key]
    if not isinstance(value, str):
        raise RowError(f"'{key}' must be a string, got {kind(value)}")
    if not allow_empty and not value.strip():
        raise RowError(f"'{key}' is empty")
    return value.strip()


def _string_list(value: Any, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,) if value.strip() else ()
    if not isinstance(value, list):
        raise RowError(f"'{key}' must be a string or a list of strings, got {kind(value)}")
    for i, v in enumerate(value, start=1):
        if not isinstance(v, str):
            raise RowError(f"'{key}' item {i} must be a string, got {kind(v)}")
    return tuple(v for v in value if v.strip())


def _number(raw: Mapping[str, Any], key: str, kind: type) -> Any:
    value = raw.get(key)
    if value is None or value == "":
        return None
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise RowError(f"'{key}' must be a number, got {value!r}") from None
    if number < 0:
        raise RowError(f"'{key}' must be >= 0, got {value!r}")
    return number


def _passages(raw: Mapping[str, Any], tabular: bool) -> tuple[Passage, ...]:
    if raw.get("passages") is not None and raw.get("contexts") is not None:
        raise RowError("give either 'passages' or 'contexts', not both")
    if raw.get("contexts") is not None:
        texts = _string_list(cell(raw["contexts"], "contexts", tabular, True), "contexts")
        return tuple(Passage(f"c{i}", t) for i, t in enumerate(texts, start=1))
    items = cell(raw.get("passages") or [], "passages", tabular, False)
    if not isinstance(items, list):
        raise RowError(f"'passages' must be a list of objects, got {kind(items)}")
    return tuple(parse_passage(p, n) for n, p in enumerate(items, start=1))


def parse_output(raw: Mapping[str, Any], line: int, tabular: bool) -> OutputRecord:
    golds: tuple[str, ...] = ()
    for key in _GOLD_KEYS:
        if raw.get(key) is not None:
            golds = _string_list(cell(raw[key], key, tabular, True), key)
            break
    rid = raw.get("id")
    return OutputRecord(
        id=str(rid).strip() if rid not in (None, "") else f"row-{line}",
        question=_text(raw, "question", allow_empty=False),
        answer=_text(raw, "answer", allow_empty=True),
        passages=_passages(raw, tabular),
        golds=golds,
        gold_passage_ids=_string_list(cell(raw.get("gold_passage_ids") or [], "gold_passage_ids", tabular, True),
                                      "gold_passage_ids"),
        latency_s=_number(raw, "latency_s", float),
        prompt_tokens=_number(raw, "prompt_tokens", int),
        completion_tokens=_number(raw, "completion_tokens", int),
        model=str(raw["model"]) if raw.get("model") not in (None, "") else None,
    )


def load_outputs(path: str | Path | Sequence[Mapping[str, Any]], on_bad_row: str = "error",
                 columns: Mapping[str, str] | None = None) -> tuple[list[OutputRecord], list[SkippedRow]]:
    """Records of ``path`` (a records file, or rows given in memory: the Python API's) and the rows
    skipped (``on_bad_row="skip"``); ``columns`` (``data.columns``) maps ragray's field names to
    the file's columns."""
    if not isinstance(path, (str, Path)):  # rows in memory: a bad one is named rows:N
        table = rows_table(path)
        path = table.path
    else:
        path = Path(path)
        if not path.is_file():
            raise InputError(f"records file not found: {path}")
        table = read_table(path, what="records")
    bad = BadRows(on_bad_row)
    out: list[OutputRecord] = []
    seen: dict[str, int] = {}
    for row in schema_rows(table, OUTPUT_SCHEMAS, columns):
        if row.data is None:
            if row.problem:
                bad(str(path), row.line, row.problem)
            continue
        try:
            rec = parse_output(row.data, row.line, table.tabular)
            if rec.id in seen:
                raise RowError(f"duplicate id '{rec.id}' (first seen on line {seen[rec.id]})")
        except RowError as exc:
            bad(str(path), row.line, str(exc))
            continue
        seen[rec.id] = row.line
        out.append(rec)
    bad.summary()
    if not out:
        raise InputError(f"{path}: no records" + (f" ({len(bad.skipped)} bad rows skipped)" if bad.skipped else ""))
    return out, bad.skipped

