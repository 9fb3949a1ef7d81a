"""The runs a dashboard shows: the run history's records plus the run directories under a folder.

A run is found two ways, merged by its directory: the history database (``history.url``: kind,
status, times, also for runs whose directory is gone or still being written) and a scan of the
runs folder (any finished run directory, sweep trials included, and uploaded CSVs). Each gets a
stable id: the history id when recorded, else ``dir-`` + a hash of its path.

A question run killed before it could write its summary (SIGKILL, the OOM killer, a lost machine)
leaves ``config.yaml`` and ``progress.jsonl``: listed ``stopped`` (the history says its process is
gone, or, without a history record, its log has not moved for :data:`STALE_AFTER_S`) and opened as
``ragray report DIR`` and ``ragray.load_run`` open it: its finished questions' tables, a summary
marked partial and the report are written from the log first. One whose log still moves is
``running`` and not opened (its own process writes its tables).
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ragray.errors import InputError
from ragray.report.rundata import RunData, load_run
from ragray.store.liveness import STALE_AFTER_S

__all__ = ["Catalog", "Entry", "dir_id"]

log = logging.getLogger(__name__)

_MARKERS = ("summary.json", "audit_report.json", "leaderboard.parquet", "passages.parquet")
_MAX_DEPTH = 4


@dataclass
class Entry:
    id: str
    name: str
    kind: str
    status: str
    path: Path | None
    started: datetime | None = None
    seconds: float | None = None
    source: str = "folder"  # history | folder | upload
    summary: dict[str, Any] | None = None

    @property
    def openable(self) -> bool:
        if self.path is None or not self.path.is_dir():
            return False
        return any((self.path / m).is_file() for m in _MARKERS) or (self.status == "stopped" and unfinished(self.path))


def unfinished(path: Path) -> bool:
    """A question run's folder with finished questions logged and no summary written yet."""
    log_file = path / "progress.jsonl"
    return ((path / "config.yaml").is_file() and log_file.is_file() and log_file.stat().st_size > 0
            and not (path / "summary.json").is_file())


def _unfinished_status(path: Path) -> str:
    """``running`` while the log moved within :data:`STALE_AFTER_S`, else ``stopped``."""
    return "running" if time.time() - (path / "progress.jsonl").stat().st_mtime < STALE_AFTER_S else "stopped"


def dir_id(path: Path) -> str:
    """The id of a run directory that is not in the history (stable: a hash of its path)."""
    return "dir-" + hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]


class Catalog:
    """Runs under ``runs_dir`` and in the history at ``history_url`` (either may be absent)."""

    def __init__(self, runs_dir: str | Path, history_url: str | None = None) -> None:
        self.runs_dir = Path(runs_dir)
        self.history_url = history_url
        self._cache: dict[tuple[str, float, tuple[str, ...] | None], RunData] = {}

    def _scan(self) -> list[Path]:
        found: list[Path] = []

        def walk(d: Path, depth: int) -> None:
            try:
                children = sorted(p for p in d.iterdir() if p.is_dir() and not p.name.startswith("."))
            except OSError:
                return
            if any((d / m).is_file() for m in _MARKERS) or unfinished(d):
                found.append(d)
            if depth < _MAX_DEPTH:
                for child in children:
                    if child.name not in ("tune", "__pycache__"):
                        walk(child, depth + 1)

        if self.runs_dir.is_dir():
            walk(self.runs_dir, 0)
        return found

    def _history(self) -> list[Any]:
        if not self.history_url:
            return []
        try:
            from ragray.store.history import History

            history = History(self.history_url)
            try:
                return history.list_runs(limit=500)
            finally:
                history.close()
        except Exception as exc:  # noqa: BLE001 - the folder scan still works without the database
            log.warning("dashboard: run history unavailable (%s): %s", self.history_url, exc)
            return []

    def entries(self) -> list[Entry]:
        """Every run, newest first (history times, else directory modification times)."""
        by_path: dict[Path, Entry] = {}
        out: list[Entry] = []
        for r in self._history():
            path = Path(r.out).resolve() if r.out else None
            status = "stopped" if r.status == "interrupted" and path is not None and unfinished(path) else r.status
            entry = Entry(r.id, r.name, r.kind, status, path, r.started_at, r.seconds, "history", r.summary)
            out.append(entry)
            if path is not None:
                by_path[path] = entry
        for d in self._scan():
            path = d.resolve()
            if path in by_path:
                continue
            if unfinished(path):
                entry = Entry(dir_id(path), path.name, "run", _unfinished_status(path), path,
                              datetime.fromtimestamp(path.stat().st_mtime, timezone.utc), None, "folder", None)
                by_path[path] = entry
                out.append(entry)
                continue
            try:
                data = self.load_path(path, tables=())  # the list needs the summary only
            except InputError:
                continue
            started = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
            source = "upload" if path.name.startswith("upload-") else "folder"
            status = "partial" if (data.summary or {}).get("partial") else "done"  # stopped early (Ctrl-C, SIGTERM)
            entry = Entry(dir_id(path), data.name, data.kind, status, path, started, None, source, data.summary)
            by_path[path] = entry
            out.append(entry)
        out.sort(key=lambda e: e.started.astimezone(timezone.utc).replace(tzinfo=None) if e.started else datetime.min,
                 reverse=True)
        return out

    def get(self, run_id: str) -> Entry:
        for entry in self.entries():
            if entry.id == run_id:
                return entry
        raise KeyError(run_id)

    def load_path(self, path: Path, tables: tuple[str, ...] | None = None) -> RunData:
        """The run at ``path`` (only ``tables``; default all), cached until one of its files changes."""
        stamp = max((p.stat().st_mtime for p in path.iterdir() if p.is_file()), default=0.0)
        key = (str(path), stamp, tables)
        if key not in self._cache:
            self._cache[key] = load_run(path) if tables is None else load_run(path, tables)
        return self._cache[key]

    def load(self, run_id: str) -> tuple[Entry, RunData]:
        entry = self.get(run_id)
        if not entry.openable:
            raise InputError(f"run {run_id} has no results to show (status {entry.status})")
        if unfinished(entry.path):
            from ragray.pipeline import open_stopped_run

            open_stopped_run(entry.path)  # what `ragray report DIR` does: tables, a partial summary, the report
            entry = self.get(run_id)
        return entry, self.load_path(entry.path)
