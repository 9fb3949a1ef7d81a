"""A run directory: the resolved config, Parquet tables (with CSV copies) and JSON summaries."""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ragray.config import ExperimentConfig
from ragray.errors import InputError
from ragray.rows.base import Row

__all__ = ["RunDir", "default_run_dir", "prepare_run_dir"]


def default_run_dir(command: str, name: str, root: str | Path = "runs") -> Path:
    """``runs/<command>-<name>-<UTC timestamp>``: a fresh directory per run by default."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return Path(root) / f"{command}-{name}-{stamp}"


def prepare_run_dir(path: str | Path) -> Path:
    """``path`` as a folder this process can write in, created if missing; :class:`InputError`
    naming ``--out`` and the path when it cannot be one (a file there or above it, no permission,
    a read-only or virtual file system such as ``/proc``). Called before a run is recorded, so a
    refused start leaves nothing in the history."""
    path = Path(path)
    above = next((p for p in (path, *path.parents) if p.exists()), None)
    if above == path and not path.is_dir():
        raise InputError(f"--out {path}: exists and is a file, not a folder")
    if above is not None and not above.is_dir():
        raise InputError(f"--out {path}: {above} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--out {path}: cannot create a folder in {above} ({exc.strerror or exc})") from None
    try:  # root passes every permission check (os.access); only a write says whether it works
        with tempfile.TemporaryFile(dir=path, prefix=".ragray-probe-"):
            pass
    except OSError as exc:
        raise InputError(f"--out {path}: cannot write in this folder ({exc.strerror or exc})") from None
    return path


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN; "unmeasured" is null
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _flat_for_csv(table: pa.Table) -> pa.Table:
    """CSV has no lists: list<string> columns become one ';'-joined string per cell."""
    columns = []
    for field, col in zip(table.schema, table.columns):
        if pa.types.is_list(field.type):
            col = pa.array([None if v is None else ";".join(map(str, v)) for v in col.to_pylist()], pa.string())
        columns.append(col)
    return pa.Table.from_arrays(columns, names=table.column_names)


class RunDir:
    """Writes the files of one run under ``path``."""

    def __init__(self, path: str | Path) -> None:
        self.path = prepare_run_dir(path)

    def save_config(self, config: ExperimentConfig) -> Path:
        return config.save(self.path / "config.yaml")

    def write_table(self, name: str, rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> Path:
        """``<name>.parquet`` (primary) and ``<name>.csv`` (export) from row mappings."""
        table = pa.Table.from_pylist(list(rows), schema=schema)
        path = self.path / f"{name}.parquet"
        pq.write_table(table, path)
        pacsv.write_csv(_flat_for_csv(table), self.path / f"{name}.csv")
        return path

    def write_rows(self, row_type: type[Row], rows: Sequence[Row], name: str | None = None) -> Path:
        """The table of typed ``rows`` (named ``row_type.table`` unless ``name``), with the schema
        the row class declares."""
        return self.write_table(name or row_type.table, [r.as_dict() for r in rows], row_type.arrow_schema())

    def write_json(self, name: str, data: Mapping[str, Any]) -> Path:
        path = self.path / f"{name}.json"
        path.write_text(json.dumps(_json_safe(data), indent=2, sort_keys=False) + "\n", encoding="utf-8")
        return path
