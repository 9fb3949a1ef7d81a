"""Record schemas: which names a records file gives its fields, told from its columns.

Three schemas are read, in every records format (JSONL, CSV, Parquet):

- ``ragray``: ragray's own records (:mod:`ragray.data.records`) and, for ``ragray score``, its
  outputs (:mod:`ragray.data.outputs`);
- ``ragas``: RAGAS' evaluation samples (``SingleTurnSample``, ragas 0.2 and later):
  ``user_input`` → question, ``retrieved_contexts`` → passages (ids ``<record id>-c<i>``, rank =
  list order; ``retrieved_context_ids`` names them when given), ``response`` → the pipeline's
  answer, ``reference`` → gold answer, ``reference_contexts`` → gold passage ids: the retrieved
  contexts whose text equals one exactly (and those ``reference_context_ids`` names);
- ``ragas-legacy``: RAGAS before 0.2: ``question``, ``contexts``, ``answer``, ``ground_truth`` (a
  string) or ``ground_truths`` (a list).

``id`` is optional in both RAGAS schemas (default ``row-<line>``); ``meta``, ``latency_s``,
``prompt_tokens``, ``completion_tokens`` and ``model`` are read in every schema, and other columns
go to the question's ``meta`` as in ragray's records. Empty contexts are skipped (the others keep
their position in the ids).

The schema is told from the file's columns (the CSV header, the Parquet schema, the first JSONL
record); a file that matches none gets one :class:`~ragray.errors.InputError` naming its columns
and those each schema expects. Each record is then read in the schema its own fields name, and a
record whose fields belong to two schemas is a bad row.

``data.columns`` (``--columns question=query,passages=docs``) renames the file's columns to
ragray's field names first. In a file read through it, ids are optional too, passages may be
plain strings (ids ``<record id>-c<i>``) and ``answers`` / ``gold_passage_ids`` one string.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from ragray.config import RECORD_FIELDS
from ragray.data.tables import Row, RowError, Table, cell, kind, require_columns
from ragray.errors import InputError

__all__ = ["Schema", "MixedSchemas", "RECORD_SCHEMAS", "OUTPUT_SCHEMAS", "match_schema", "schema_rows"]

logger = logging.getLogger(__name__)


class Converted(NamedTuple):
    """A record in ragray's field names; of its ``n_gold`` reference contexts, how many matched no
    retrieved one (``unretrieved``)."""

    data: dict[str, Any]
    n_gold: int = 0
    unretrieved: int = 0


class MixedSchemas(RowError):
    """A record (or a header) whose fields belong to two schemas; ``detail`` says which."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"mixes record schemas: it has {detail}; use one schema per record")
        self.detail = detail


@dataclass(frozen=True)
class Schema:
    """One naming of the record fields.

    ``columns`` are its own field names (in the order messages list them), ``required`` those a
    record (and a CSV / Parquet header) must have, ``convert`` turns a record into ragray's names.
    """

    name: str
    label: str
    columns: tuple[str, ...]
    required: tuple[str, ...]
    convert: Callable[[dict[str, Any], int, bool], Converted]

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(self.columns)


# ---------------------------------------------------------------------------------------------
# field readers (the messages name the file's fields)


def _record_id(raw: Mapping[str, Any], line: int) -> str:
    rid = raw.get("id")
    if rid is None or (isinstance(rid, str) and not rid.strip()):
        return f"row-{line}"
    if isinstance(rid, bool) or not isinstance(rid, (str, int)):
        raise RowError(f"'id' must be a string, got {kind(rid)}")
    return str(rid).strip()


def _list(raw: Mapping[str, Any], key: str, tabular: bool, item: type | tuple[type, ...] = str) -> list[Any]:
    """A list-of-strings field (absent: ``[]``; one string: a one-item list)."""
    value = raw.get(key)
    if value is None:
        return []
    value = cell(value, key, tabular, True)
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list):
        raise RowError(f"'{key}' must be a list of strings, got {kind(value)}")
    for i, v in enumerate(value, start=1):
        if isinstance(v, bool) or not isinstance(v, item):
            raise RowError(f"'{key}' item {i} must be a string, got {kind(v)}")
    return value


def _string(raw: Mapping[str, Any], key: str) -> str | None:
    value = raw.get(key)
    if value is not None and not isinstance(value, str):
        raise RowError(f"'{key}' must be a string, got {kind(value)}")
    return value


def _passages(texts: Sequence[str], rid: str, ids: Sequence[Any] = ()) -> list[dict[str, str]]:
    """Contexts as passages in list order: ids from ``ids`` or ``<rid>-c<i>``; empty ones skipped."""
    return [{"id": str(ids[i - 1]) if ids else f"{rid}-c{i}", "text": text}
            for i, text in enumerate(texts, start=1) if text.strip()]


def _without(raw: Mapping[str, Any], fields: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in raw.items() if k not in fields}


# ---------------------------------------------------------------------------------------------
# conversions to ragray's field names


def _ragray(raw: dict[str, Any], line: int, tabular: bool) -> Converted:
    """Already ragray's names; an absent id is ``row-<line>`` (as in RAGAS files, and as the
    Python API numbers a DataFrame's rows)."""
    return Converted(raw if raw.get("id") is not None else {**raw, "id": f"row-{line}"})


def _mapped(raw: dict[str, Any], line: int, tabular: bool) -> dict[str, Any]:
    """A record read through data.columns may give passages as plain strings (they become
    ``<id>-c<i>`` passages in list order, empty ones skipped) and one gold answer or gold id as a
    string; ragray's own files need passage objects and lists."""
    out = dict(raw)
    for key in ("answers", "gold_passage_ids"):
        if isinstance(out.get(key), str) and not tabular:
            out[key] = [out[key]] if out[key].strip() else []
    items = cell(out.get("passages"), "passages", tabular, False)
    if isinstance(items, list) and any(isinstance(p, str) for p in items):
        rid = _record_id(out, line)
        out["passages"] = [{"id": f"{rid}-c{n}", "text": p} if isinstance(p, str) else p
                           for n, p in enumerate(items, start=1) if not (isinstance(p, str) and not p.strip())]
    return out


_LEGACY = frozenset({"contexts", "ground_truth", "ground_truths"})


def _ragas_legacy(raw: dict[str, Any], line: int, tabular: bool) -> Converted:
    given = [k for k in ("ground_truth", "ground_truths") if raw.get(k) not in (None, "")]  # "": an empty cell
    if len(given) == 2:
        raise RowError("give either 'ground_truth' or 'ground_truths', not both")
    out = _without(raw, _LEGACY)
    rid = out["id"] = _record_id(raw, line)
    if raw.get("contexts") is not None:
        out["passages"] = _passages(_list(raw, "contexts", tabular), rid)
    out["answers"] = [g for g in _list(raw, given[0], tabular) if g.strip()] if given else []
    return Converted(out)


_RAGAS = frozenset({"user_input", "retrieved_contexts", "retrieved_context_ids", "response", "reference",
                    "reference_contexts", "reference_context_ids"})


def _ragas(raw: dict[str, Any], line: int, tabular: bool) -> Converted:
    question = raw.get("user_input")
    if isinstance(question, list):
        raise RowError("'user_input' is a list of messages: multi-turn samples are not supported")
    out = _without(raw, _RAGAS)
    rid = out["id"] = _record_id(raw, line)
    question = _string(raw, "user_input") or ""
    if not question.strip():
        raise RowError("'user_input' is empty")
    out["question"] = question
    response = _string(raw, "response")
    if response is not None:
        out["answer"] = response
    reference = raw.get("reference")
    if reference is not None:
        golds = [reference] if isinstance(reference, str) else _list(raw, "reference", False)
        out["answers"] = [g for g in golds if g.strip()]
    texts = _list(raw, "retrieved_contexts", tabular)
    ids = _list(raw, "retrieved_context_ids", tabular, (str, int))
    if ids and len(ids) != len(texts):
        raise RowError(f"'retrieved_context_ids' has {len(ids)} ids for {len(texts)} retrieved contexts")
    passages = _passages(texts, rid, ids)
    out["passages"] = passages
    gold_texts = _list(raw, "reference_contexts", tabular)
    gold_ids = {str(g) for g in _list(raw, "reference_context_ids", tabular, (str, int))}
    gold = [p["id"] for p in passages if p["text"] in gold_texts or p["id"] in gold_ids]
    out["gold_passage_ids"] = list(dict.fromkeys(gold))
    retrieved = {p["text"] for p in passages}
    unretrieved = sum(t not in retrieved for t in gold_texts) + len(gold_ids - {p["id"] for p in passages})
    if unretrieved:  # gold the retriever missed: kept in the question's meta, never a gold id
        out["unretrieved_reference_contexts"] = unretrieved
    return Converted(out, len(gold_texts) + len(gold_ids), unretrieved)


# ---------------------------------------------------------------------------------------------
# the schemas each loader reads (ragray's first: a record whose fields fit several is read as it)

_RAGAS_COLUMNS = ("user_input", "retrieved_contexts", "response", "reference", "reference_contexts",
                  "retrieved_context_ids", "reference_context_ids")
_LEGACY_COLUMNS = ("question", "contexts", "answer", "ground_truth", "ground_truths")

RECORD_SCHEMAS: tuple[Schema, ...] = (
    Schema("ragray", "ragray", ("question", "answers", "passages", "gold_passage_ids", "answer"),
           ("question",), _ragray),
    Schema("ragas", "RAGAS", _RAGAS_COLUMNS, ("user_input",), _ragas),
    Schema("ragas-legacy", "RAGAS before 0.2", _LEGACY_COLUMNS, ("question",), _ragas_legacy),
)
OUTPUT_SCHEMAS: tuple[Schema, ...] = (
    Schema("ragray", "ragray", ("question", "answer", "passages", "contexts", "answers", "gold_answers",
                                "ground_truth", "gold_passage_ids"), ("question", "answer"), _ragray),
    Schema("ragas", "RAGAS", _RAGAS_COLUMNS, ("user_input", "response"), _ragas),
    Schema("ragas-legacy", "RAGAS before 0.2", _LEGACY_COLUMNS, ("question", "answer"), _ragas_legacy),
)

def _quoted(names: Sequence[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def match_schema(keys: Sequence[str], schemas: Sequence[Schema]) -> Schema | None:
    """The first schema whose fields hold every schema field among ``keys``; None when ``keys``
    name no schema field; :class:`MixedSchemas` when no one schema has them all."""
    known = {k for k in keys if any(k in s.fields for s in schemas)}
    if not known:
        return None
    for schema in schemas:
        if known <= schema.fields:
            return schema
    best = max(schemas, key=lambda s: len(known & s.fields))  # the first of equals: ragray
    parts = [f"{best.label} field(s) {_quoted(sorted(known & best.fields))}"]
    rest = known - best.fields
    for schema in schemas:
        own = sorted(rest & schema.fields)
        if own:
            parts.append(f"{schema.label} field(s) {_quoted(own)}")
            rest -= schema.fields
    raise MixedSchemas(" and ".join(parts))


def names_a_field(keys: Sequence[str], schemas: Sequence[Schema]) -> bool:
    """Whether any of ``keys`` is a field of one of ``schemas``."""
    return any(k in s.fields for k in keys for s in schemas)


def no_schema_message(where: str, columns: Sequence[str], schemas: Sequence[Schema]) -> str:
    """The one error for a file in no known schema: its columns, each schema's, the --columns hint."""
    lines = [f"{where}: the columns match no known record schema; found: {', '.join(columns) or '(none)'}",
             "expected one of:"]
    for s in schemas:
        lines.append(f"  {s.label}: {', '.join(s.columns)} (required: {', '.join(s.required)})")
    lines.append("or say which column holds which field: --columns question=<col>,passages=<col>,... "
                 f"(data.columns; fields: {', '.join(RECORD_FIELDS)})")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# reading a table through the schemas


class _Renamer:
    """``data.columns``: field -> the file's column, applied to every row before anything else."""

    def __init__(self, columns: Mapping[str, str]) -> None:
        self.columns = dict(columns)
        self.sources = set(self.columns.values())

    def check_header(self, table: Table) -> tuple[str, ...]:
        """The header in ragray's names; a mapped column the file lacks is an error."""
        assert table.columns is not None
        found = ", ".join(table.columns)
        for field, col in self.columns.items():
            if col not in table.columns:
                raise InputError(f"{table.where}: data.columns reads {field} from column '{col}', which the file "
                                 f"does not have (found: {found})")
            if field in table.columns and field not in self.sources:
                raise InputError(f"{table.where}: data.columns reads {field} from column '{col}', but the file "
                                 f"also has a '{field}' column; map that one too or drop it")
        back = {col: field for field, col in self.columns.items()}
        return tuple(back.get(c, c) for c in table.columns)

    def __call__(self, data: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in data.items() if k not in self.sources}
        for field, col in self.columns.items():
            if field in out:
                raise RowError(f"has a '{field}' field, but data.columns reads {field} from '{col}'")
            if col in data:
                out[field] = data[col]
        return out

    def missing(self, field: str) -> str:
        col = self.columns.get(field)
        return f"'{col}' is missing (data.columns reads {field} from it)" if col else f"'{field}' is missing"


class SchemaRows:
    """The rows of a table in ragray's field names, each record read in its own schema.

    Iterate it once; bad records come out as ``Row(line, None, reason)`` for the loader's
    ``on_bad_row``. ``unretrieved`` counts reference contexts that matched no retrieved context.
    """

    def __init__(self, table: Table, schemas: Sequence[Schema], columns: Mapping[str, str] | None = None) -> None:
        self.table = table
        self.rename = _Renamer(columns) if columns else None
        self.schemas = tuple(schemas)
        self.n_gold = self.unretrieved = 0
        if table.columns is not None:
            self._check_header(self.rename.check_header(table) if self.rename else table.columns)

    def _check_header(self, columns: tuple[str, ...]) -> None:
        """A CSV / Parquet header: in one schema, with its required columns."""
        try:
            schema = match_schema(columns, self.schemas)
        except MixedSchemas as exc:
            raise InputError(f"{self.table.where}: the columns mix record schemas: {exc.detail}; "
                             "use one schema (or --columns to rename)") from None
        if schema is None:
            raise InputError(no_schema_message(self.table.where, columns, self.schemas))
        require_columns(replace(self.table, columns=columns), schema.required)

    def __iter__(self) -> Iterator[Row]:
        first = self.table.columns is None  # a JSONL file's columns: its first record's
        for row in self.table.rows:
            if row.data is None:
                yield row
                continue
            try:
                data = self.rename(row.data) if self.rename else row.data
                if first and not names_a_field(list(data), self.schemas):
                    raise InputError(no_schema_message(f"{self.table.path}:{row.line}", list(data), self.schemas))
                first = False
                yield Row(row.line, self._convert(data, row.line))
            except RowError as exc:
                first = False
                yield Row(row.line, None, str(exc))
        self._log_unretrieved()

    def _convert(self, data: dict[str, Any], line: int) -> dict[str, Any]:
        schema = match_schema(list(data), self.schemas)
        if schema is None:
            raise RowError("names no record field: expected 'question' (ragray, RAGAS before 0.2) or "
                           f"'user_input' (RAGAS); found: {', '.join(data) or '(none)'}")
        for field in schema.required:
            if data.get(field) is None:
                raise RowError(self.rename.missing(field) if self.rename else f"'{field}' is missing")
        if self.rename and schema.name == "ragray":
            data = _mapped(data, line, self.table.tabular)
        converted = schema.convert(data, line, self.table.tabular)
        self.n_gold += converted.n_gold
        self.unretrieved += converted.unretrieved
        return converted.data

    def _log_unretrieved(self) -> None:
        if not self.unretrieved:
            return
        if self.unretrieved == self.n_gold:
            logger.warning("%s: no reference context matches a retrieved context exactly, so no record has "
                           "gold passage ids (they are matched by exact text)", self.table.path)
        else:
            logger.info("%s: %d reference context(s) were not among the retrieved contexts",
                        self.table.path, self.unretrieved)


def schema_rows(table: Table, schemas: Sequence[Schema], columns: Mapping[str, str] | None = None) -> SchemaRows:
    """The rows of ``table`` in ragray's field names (see :class:`SchemaRows`)."""
    return SchemaRows(table, schemas, columns)
