"""A run directory: the resolved config, Parquet tables (with CSV copies) and JSON summaries."""

from __future__ import annotations

import contextlib
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
from ragray.errors import InputError, WriteError
from ragray.rows.base import Row
from ragray.store.progress import ProgressLog

__all__ = ["RunDir", "default_run_dir", "prepare_run_dir", "read_files"]


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


def read_files(folder: Path) -> dict[str, bytes]:
    """Every file of a run directory by name, sorted (its subfolders aside)."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


class RunDir:
    """Writes the files of one run under ``path``, or (``path`` None) into :attr:`files` in memory:
    the same bytes either way (the Python API keeps a run in memory until ``Run.save``)."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = prepare_run_dir(path) if path is not None else None
        #: name -> bytes of an in-memory run (empty for a run on disk)
        self.files: dict[str, bytes] = {}
        #: name -> the Arrow table an in-memory run's ``<name>.parquet`` holds, as built (the Python
        #: API hands these on without reading the Parquet back; empty for a run on disk)
        self.tables: dict[str, pa.Table] = {}
        self._log: ProgressLog | None = None

    def put(self, name: str, data: bytes) -> Path | None:
        """Write the file ``name`` (atomically on disk: a reader never sees half of it). A write
        that fails (no space left, a quota) is a :class:`WriteError` naming the file; the file's
        earlier content, if any, stays whole and no temporary file is left."""
        if self.path is None:
            self.files[name] = data
            return None
        path = self.path / name
        tmp = path.with_name(f".{name}.tmp")
        try:
            tmp.write_bytes(data)
            tmp.replace(path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise WriteError(path, exc) from exc
        return path

    def read(self, name: str) -> bytes | None:
        if self.path is None:
            return self.files.get(name)
        path = self.path / name
        return path.read_bytes() if path.is_file() else None

    def remove(self, name: str) -> None:
        if self.path is None:
            self.files.pop(name, None)
        else:
            (self.path / name).unlink(missing_ok=True)

    def progress_log(self) -> ProgressLog:
        """The run's ``progress.jsonl`` (in memory: its lines, among :meth:`all_files`)."""
        if self._log is None:
            self._log = ProgressLog(self.path / "progress.jsonl" if self.path is not None else None)
        return self._log

    def save_config(self, config: ExperimentConfig) -> Path | None:
        return self.put("config.yaml", config.to_yaml().encode("utf-8"))

    def write_table(self, name: str, rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> Path | None:
        """``<name>.parquet`` (primary) and ``<name>.csv`` (export) from row mappings."""
        table = pa.Table.from_pylist(list(rows), schema=schema)
        parquet, csv = pa.BufferOutputStream(), pa.BufferOutputStream()
        pq.write_table(table, parquet)
        pacsv.write_csv(_flat_for_csv(table), csv)
        self.put(f"{name}.csv", csv.getvalue().to_pybytes())
        if self.path is None:
            self.tables[name] = table
        return self.put(f"{name}.parquet", parquet.getvalue().to_pybytes())

    def write_rows(self, row_type: type[Row], rows: Sequence[Row], name: str | None = None) -> Path | None:
        """The table of typed ``rows`` (named ``row_type.table`` unless ``name``), with the schema
        the row class declares."""
        return self.write_table(name or row_type.table, [r.as_dict() for r in rows], row_type.arrow_schema())

    def write_json(self, name: str, data: Mapping[str, Any]) -> Path | None:
        text = json.dumps(_json_safe(data), indent=2, sort_keys=False) + "\n"
        return self.put(f"{name}.json", text.encode("utf-8"))

    def all_files(self) -> dict[str, bytes]:
        """Every file of the run by name (an in-memory run's progress log included)."""
        if self.path is None:
            log = self._log.text().encode("utf-8") if self._log is not None else b""
            return {**self.files, **({"progress.jsonl": log} if log else {})}
        return read_files(self.path)
