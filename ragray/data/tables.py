"""Low-level readers of record files: JSONL(.gz), CSV and Parquet, each as a :class:`Table`.

A table is its columns (the CSV header or the Parquet schema; ``None`` for JSONL, whose rows
carry their own keys) and its rows, each a :class:`Row` with its 1-based line and its data, or
why it is unreadable. Nothing here knows what the columns mean: the record schemas
(:mod:`ragray.data.schemas`) and the parsers (:mod:`ragray.data.records`,
:mod:`ragray.data.outputs`) do.

Cells of CSV and Parquet files are strings where JSONL has lists and objects: :func:`cell` reads a
list or object cell as a JSON array / object, or as a Python literal (``['a', 'b']``, which RAGAS
and pandas write), through :func:`ast.literal_eval`, never ``eval``.
"""

from __future__ import annotations

import ast
import csv
import gzip
import io
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ragray.errors import InputError

__all__ = ["Row", "RowError", "Table", "READERS", "iter_jsonl", "read_table", "record_format", "rows_table",
           "cell", "kind", "RECORD_SUFFIXES"]

RECORD_SUFFIXES = (".jsonl.gz", ".jsonl", ".csv", ".parquet")


class RowError(Exception):
    """Raised while parsing one row; the loader prefixes ``file:line`` (internal)."""


class Row(NamedTuple):
    """One raw row as read from a file: its 1-based line and its data, or why it is unreadable."""

    line: int
    data: dict[str, Any] | None
    problem: str = ""


@dataclass(frozen=True)
class Table:
    """A file's rows; ``columns`` is the header (CSV, on ``header_line``) or the Parquet schema
    (``header_line`` 0), None for JSONL; ``tabular`` says cells may hold JSON / literal strings."""

    path: Path
    columns: tuple[str, ...] | None
    rows: Iterator[Row]
    tabular: bool
    header_line: int = 0

    @property
    def where(self) -> str:
        """``file:line`` of the header (CSV), or the file (Parquet, JSONL), for messages."""
        return f"{self.path}:{self.header_line}" if self.header_line else str(self.path)


def rows_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    """Rows held in memory (the Python API's) as a table named ``rows``: row ``N`` is the N-th."""
    return Table(Path("rows"), None, iter([Row(n, dict(r)) for n, r in enumerate(rows, start=1)]), tabular=False)


# ---------------------------------------------------------------------------------------------
# JSONL


def iter_jsonl(path: Path) -> Iterator[Row]:
    """Rows of a JSONL file (``.gz`` decompressed); blank lines are not rows."""
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as fh:
            for line, raw in enumerate(fh, start=1):
                yield _json_row(line, raw)
    except (gzip.BadGzipFile, EOFError) as exc:
        raise InputError(f"{path}: not a valid gzip file ({exc})") from None


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
        return Row(line, None, f"not a JSON object (got {kind(data)})")
    return Row(line, data)


def _read_jsonl(path: Path) -> Table:
    return Table(path, None, iter_jsonl(path), tabular=False)


# ---------------------------------------------------------------------------------------------
# CSV


def _read_csv(path: Path) -> Table:
    # Decode with surrogateescape so one bad byte spoils only its own record, not the file.
    text = path.read_bytes().decode("utf-8", errors="surrogateescape").lstrip("\ufeff")
    # Whole documents in a cell can pass csv's 128 KiB default field limit.
    csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))
    reader = csv.reader(io.StringIO(text, newline=""))
    end = 0
    try:
        for cells in reader:
            start, end = end + 1, reader.line_num
            if any(c.strip() for c in cells):
                header = _csv_header(path, start, cells)
                return Table(path, tuple(header), _csv_rows(path, reader, header, end), tabular=True,
                             header_line=start)
    except csv.Error as exc:
        raise InputError(f"{path}:{reader.line_num}: not valid CSV: {exc}") from None
    return Table(path, None, iter(()), tabular=True)  # an empty file: no header, no rows


def _csv_rows(path: Path, reader: Any, header: list[str], end: int) -> Iterator[Row]:
    try:
        for cells in reader:
            start, end = end + 1, reader.line_num
            if not any(c.strip() for c in cells):
                continue
            if any(_has_bad_bytes(c) for c in cells):
                yield Row(start, None, "not UTF-8")
            elif len(cells) != len(header):
                yield Row(start, None, f"has {len(cells)} cells, the header has {len(header)}")
            else:
                yield Row(start, dict(zip(header, cells, strict=True)))
    except csv.Error as exc:
        raise InputError(f"{path}:{reader.line_num}: not valid CSV: {exc}") from None


def _csv_header(path: Path, line: int, cells: list[str]) -> list[str]:
    header = [c.strip() for c in cells]
    if any(_has_bad_bytes(c) for c in header):
        raise InputError(f"{path}:{line}: header is not UTF-8")
    dupes = sorted({c for c in header if header.count(c) > 1})
    if dupes:
        raise InputError(f"{path}:{line}: duplicate column(s) {', '.join(dupes)}")
    return header


def _has_bad_bytes(text: str) -> bool:
    return any("\udc80" <= ch <= "\udcff" for ch in text)


# ---------------------------------------------------------------------------------------------
# Parquet


def _read_parquet(path: Path) -> Table:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"{path}: not a readable Parquet file ({exc})") from None
    rows = (Row(line, _drop_nulls(data)) for line, data in enumerate(table.to_pylist(), start=1))
    return Table(path, tuple(table.column_names), rows, tabular=True)


def _drop_nulls(value: Any) -> Any:
    """Parquet nulls mean "absent": drop them from structs (map columns become dicts)."""
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        if value and all(isinstance(x, tuple) and len(x) == 2 for x in value):
            return {k: _drop_nulls(v) for k, v in value if v is not None}
        return [_drop_nulls(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------------
# formats


READERS: dict[str, Callable[[Path], Table]] = {
    "jsonl": _read_jsonl,
    "csv": _read_csv,
    "parquet": _read_parquet,
}


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


def read_table(path: Path, fmt: str | None = None, what: str = "dataset") -> Table:
    """The :class:`Table` of ``path`` (``fmt`` forces the format; default from the suffix)."""
    fmt = fmt or record_format(path)
    if fmt not in READERS:
        raise InputError(
            f"unknown {what} file type for {path}; expected .jsonl, .jsonl.gz, .csv or .parquet"
        )
    return READERS[fmt](path)


def require_columns(table: Table, required: Sequence[str]) -> None:
    """A CSV / Parquet file must have the ``required`` columns (JSONL rows are checked one by one)."""
    if table.columns is None:
        return
    for col in required:
        if col not in table.columns:
            raise InputError(f"{table.where}: missing column '{col}' (found: {', '.join(table.columns)})")


# ---------------------------------------------------------------------------------------------
# cells


def kind(value: Any) -> str:
    """``an object``, ``a list``, ``a string`` ...: the JSON kind of ``value``, for messages."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
             int: "an integer", float: "a number"}
    return names.get(type(value), "null" if value is None else f"a {type(value).__name__}")


def cell(value: Any, key: str, tabular: bool, plain_ok: bool) -> Any:
    """A list/object column; in CSV/Parquet it may be a JSON or Python-literal string (or, with
    ``plain_ok``, one plain value that is not written as a list)."""
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
        problem = f"'{key}' is not valid JSON: {exc.msg} (column {exc.colno})"
    # Python's repr of a list (['a', "b's"]), as csv.DictWriter and pandas write list columns.
    try:
        literal = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise RowError(problem) from None
    if not isinstance(literal, (list, dict)):
        raise RowError(f"{problem}; as a Python literal it is {kind(literal)}")
    return literal
