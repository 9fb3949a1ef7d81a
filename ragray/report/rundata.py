"""A run directory read back: its kind, config, summary and tables (for reports and the dashboard).

Kinds, by the files a command writes: ``run`` (``ragray run`` and ``ragray simulate``: questions,
passages, calls), ``interpret`` (questions, units, arms, cases, curves), ``audit`` (``audit``
table and ``audit_report.json``), ``score`` (``scores`` table), ``retrieve`` (``hits``) and
``sweep`` (``leaderboard.parquet``). Tables are lists of plain dicts; a missing table is an empty list.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from ragray.errors import InputError

__all__ = ["RunData", "clean", "load_run", "read_run"]

_TABLES = ("questions", "passages", "calls", "units", "arms", "cases", "curves", "audit", "leaderboard", "scores",
           "hits")


def clean(value: Any) -> Any:
    """JSON-safe: NaN/inf → None, numpy scalars and arrays → Python, recursively."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if hasattr(value, "tolist"):
        return clean(value.tolist())
    return value


@dataclass
class RunData:
    path: Path | None  # None: a run held in memory (the Python API without out)
    kind: str
    config: dict[str, Any]
    summary: dict[str, Any]
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.config.get("name") or (self.path.name if self.path is not None else "in memory"))

    @property
    def uploaded_file(self) -> str | None:
        """The name of the CSV a run uploaded to the dashboard was made from (None for other runs)."""
        uploaded = self.summary.get("uploaded") if isinstance(self.summary, dict) else None
        return str(uploaded.get("file") or "upload.csv") if isinstance(uploaded, dict) else None

    @property
    def dataset(self) -> str:
        """The data set as the run's config names it (rows a notebook gave in memory: the file the
        run keeps them in); an uploaded run by its file (its config's data section is only the default)."""
        if self.uploaded_file is not None:
            return self.uploaded_file
        path = (self.config.get("data") or {}).get("path")
        if not path:
            return "–"
        return str(path)

    @property
    def simulated(self) -> bool:
        return bool(self.summary.get("simulated"))

    def table(self, name: str) -> list[dict[str, Any]]:
        return self.tables.get(name, [])


#: the kind of a run directory by the first of these tables it holds
_KINDS = (("leaderboard", "sweep"), ("cases", "interpret"), ("audit", "audit"), ("passages", "run"),
          ("scores", "score"), ("hits", "retrieve"))


def _kind(read: Callable[[str], bytes | None], where: str) -> str:
    for table, kind in _KINDS:
        if read(f"{table}.parquet") is not None:
            return kind
    raise InputError(f"{where}: not a finished ragray run directory (no results tables found)")


def load_run(path: str | Path, tables: tuple[str, ...] = _TABLES) -> RunData:
    """Read the run directory at ``path`` (only the named ``tables``)."""
    path = Path(path)
    if not path.is_dir():
        raise InputError(f"run directory not found: {path}")

    def read(name: str) -> bytes | None:
        file = path / name
        return file.read_bytes() if file.is_file() else None

    return read_run(read, path, tables)


def read_run(read: Callable[[str], bytes | None], path: Path | None, tables: tuple[str, ...] = _TABLES,
             built: Mapping[str, pa.Table] | None = None) -> RunData:
    """A run from its files as ``read(name)`` gives them (bytes, or None where absent): a folder's
    or an in-memory run's (``path`` None; ``built``: its tables as built, not read back)."""
    kind = _kind(read, str(path) if path is not None else "the run in memory")
    raw_config = read("config.yaml")
    config = (yaml.safe_load(raw_config.decode("utf-8")) or {}) if raw_config is not None else {}
    summary: dict[str, Any] = {}
    for name in ("summary.json", "audit_report.json", "metrics.json"):
        raw = read(name)
        if raw is not None:
            loaded = json.loads(raw.decode("utf-8"))
            summary = loaded.get("summary", loaded) if name == "audit_report.json" else loaded
            break
    data = RunData(path, kind, config, clean(summary))
    for name in tables:
        arrow = (built or {}).get(name)
        if arrow is None and (raw := read(f"{name}.parquet")) is not None:
            arrow = pq.read_table(pa.BufferReader(raw))
        if arrow is not None:
            data.tables[name] = clean(arrow.to_pylist())
    return data
