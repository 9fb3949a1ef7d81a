"""A run directory read back: its kind, config, summary and tables (for reports and the dashboard).

Kinds, by the files a command writes: ``run`` (``ragray run`` and ``ragray simulate``: questions,
passages, calls), ``interpret`` (questions, units, arms, cases, curves), ``audit`` (``audit``
table and ``audit_report.json``), ``score`` (``scores`` table), ``retrieve`` (``hits``) and
``sweep`` (``leaderboard.parquet``). Tables are lists of plain dicts; a missing table is an empty list.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import yaml

from ragray.errors import InputError

__all__ = ["RunData", "clean", "load_run"]

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
    path: Path
    kind: str
    config: dict[str, Any]
    summary: dict[str, Any]
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.config.get("name") or self.path.name)

    @property
    def simulated(self) -> bool:
        return bool(self.summary.get("simulated"))

    def table(self, name: str) -> list[dict[str, Any]]:
        return self.tables.get(name, [])


#: the kind of a run directory by the first of these tables it holds
_KINDS = (("leaderboard", "sweep"), ("cases", "interpret"), ("audit", "audit"), ("passages", "run"),
          ("scores", "score"), ("hits", "retrieve"))


def _kind(path: Path) -> str:
    for table, kind in _KINDS:
        if (path / f"{table}.parquet").is_file():
            return kind
    raise InputError(f"{path}: not a finished ragray run directory (no results tables found)")


def load_run(path: str | Path, tables: tuple[str, ...] = _TABLES) -> RunData:
    """Read the run directory at ``path`` (only the named ``tables``)."""
    path = Path(path)
    if not path.is_dir():
        raise InputError(f"run directory not found: {path}")
    kind = _kind(path)
    config = {}
    if (path / "config.yaml").is_file():
        config = yaml.safe_load((path / "config.yaml").read_text(encoding="utf-8")) or {}
    summary: dict[str, Any] = {}
    for name in ("summary.json", "audit_report.json", "metrics.json"):
        if (path / name).is_file():
            raw = json.loads((path / name).read_text(encoding="utf-8"))
            summary = raw.get("summary", raw) if name == "audit_report.json" else raw
            break
    data = RunData(path, kind, config, clean(summary))
    for name in tables:
        file = path / f"{name}.parquet"
        if file.is_file():
            data.tables[name] = clean(pq.read_table(file).to_pylist())
    return data
