"""Typed table rows: one frozen dataclass per row of every table ragray writes.

A row class is the single description of its table. From it come the Arrow schema of the
Parquet file (and so the CSV columns), the HTTP response models (pydantic reads dataclasses and
the ``doc`` descriptions, so ``/openapi.json`` describes every field) and the JSON lines of
``progress.jsonl``. Every column is nullable, as in the Parquet files; ``None`` is "not measured".

Column types: ``str`` → string, ``float`` → float64, ``bool`` → bool, ``int`` → int32 (``INT64``
marks the wider ones), ``tuple[str, ...]`` → list of strings.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

import pyarrow as pa
from pydantic import Field

__all__ = ["INT64", "NOT_STORED", "QuestionRecord", "Row", "arrow_type", "doc", "without_none"]

R = TypeVar("R", bound="Row")


class _Arrow:
    """``Annotated`` metadata: this column's Arrow type, where the default mapping is not it."""

    def __init__(self, type_: pa.DataType) -> None:
        self.type = type_

    def __repr__(self) -> str:
        return f"arrow({self.type})"


#: metadata of an int column stored as int64 (the default int is int32)
INT64 = _Arrow(pa.int64())
#: metadata of a field that the JSON and HTTP forms carry but the Parquet table does not
NOT_STORED = _Arrow(pa.null())


def doc(text: str) -> Any:
    """``Annotated`` metadata: what the column means (the OpenAPI field description)."""
    return Field(description=text)


_SCALARS: dict[type, pa.DataType] = {str: pa.string(), float: pa.float64(), bool: pa.bool_(), int: pa.int32()}


def without_none(hint: Any) -> Any:
    """``X`` for a type hint ``X | None`` (``Optional[X]``); any other hint as it is."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return hint


def arrow_type(hint: Any, where: str) -> pa.DataType:
    metadata = getattr(hint, "__metadata__", ())
    for m in metadata:
        if isinstance(m, _Arrow):
            return m.type
    base = without_none(typing.get_args(hint)[0] if metadata else hint)
    if typing.get_origin(base) in (tuple, list):
        return pa.list_(arrow_type(typing.get_args(base)[0], where))
    if base in _SCALARS:
        return _SCALARS[base]
    raise TypeError(f"{where}: no Arrow type for {hint!r}")


class Row:
    """Base of the row dataclasses (subclasses are ``@dataclass(frozen=True)``)."""

    #: the table's name in a run directory (``questions`` -> questions.parquet), where one is written
    table: ClassVar[str] = ""
    #: old column name -> new one: a log written before the rename still reads
    renamed: ClassVar[dict[str, str]] = {}

    @classmethod
    def arrow_fields(cls) -> list[pa.Field]:
        """Every field with its column type, in order (``NOT_STORED`` ones typed null)."""
        hints = typing.get_type_hints(cls, include_extras=True)
        return [pa.field(f.name, arrow_type(hints[f.name], f"{cls.__name__}.{f.name}"))
                for f in dataclasses.fields(cls)]  # type: ignore[arg-type]

    @classmethod
    @functools.cache
    def arrow_schema(cls) -> pa.Schema:
        """The Parquet schema: the stored fields in order, each with its column type."""
        return pa.schema([f for f in cls.arrow_fields() if f.type != pa.null()])

    @classmethod
    def columns(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]

    @classmethod
    def from_dict(cls: type[R], data: Mapping[str, Any]) -> R:
        """The row of ``data``; keys it lacks (a log written before a column existed) are None,
        keys it has that the row does not are an error (the log is not of this table)."""
        names = cls.columns()
        if cls.renamed and any(old in data for old in cls.renamed):
            data = {cls.renamed.get(k, k): v for k, v in data.items()}
        unknown = set(data) - set(names)
        if unknown:
            raise ValueError(f"{cls.__name__}: unknown fields {sorted(unknown)}")
        return cls(**{n: tuple(v) if isinstance(v := data.get(n), list) else v for n in names})

    def as_dict(self) -> dict[str, Any]:
        """Column -> value (lists for list columns), ready for JSON and Arrow."""
        return {n: list(v) if isinstance(v, tuple) else v for n, v in
                ((f.name, getattr(self, f.name)) for f in dataclasses.fields(self))}  # type: ignore[arg-type]


class QuestionRecord:
    """One finished question of a resumable run; base of the record dataclasses: a ``question``
    row, one tuple of rows per other table (``parts``: field -> row class), the ``model`` and,
    on Ray, the ``worker``. Its JSON form is a line of ``progress.jsonl``."""

    #: the record's tables besides ``question``: field name -> row class
    parts: ClassVar[dict[str, type[Row]]] = {}
    #: parts of features a run may have off: no file is written for them when they have no rows
    optional_parts: ClassVar[frozenset[str]] = frozenset()
    question_type: ClassVar[type[Row]]

    @property
    def question_id(self) -> str:
        return self.question.question_id  # type: ignore[attr-defined]

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"question": self.question.as_dict()}  # type: ignore[attr-defined]
        out.update({name: [r.as_dict() for r in getattr(self, name)] for name in self.parts})
        for key in ("model", "worker"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out

    @classmethod
    def from_dict(cls: type[RecordT], data: Mapping[str, Any]) -> RecordT:
        # a log written before a part existed has none of its rows
        parts = {name: tuple(row.from_dict(r) for r in data.get(name, ())) for name, row in cls.parts.items()}
        return cls(question=cls.question_type.from_dict(data["question"]), **parts,  # type: ignore[call-arg]
                   model=data.get("model"), worker=data.get("worker"))


RecordT = TypeVar("RecordT", bound="QuestionRecord")
