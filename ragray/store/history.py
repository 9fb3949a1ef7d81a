"""Run history, presets and ephemeral indexes in a SQL database (SQLAlchemy 2 Core).

One database, named by ``history.url`` (any SQLAlchemy URL; SQLite by default), holds three tables:

    presets            name (key), config (resolved YAML), description, created_at, updated_at
    runs               id (key), kind, name, status (running|done|failed|interrupted), config (YAML), out,
                       parent_id (a sweep's id for its trials), started_at, finished_at, seconds,
                       summary (JSON), results (file names in ``out``), error, and the process
                       running it: pid, host, process_started, heartbeat_at
    ephemeral_indexes  namespace, path, created_at, ttl_seconds, expires_at, deleted_at

Tables are created when missing, and columns added since a database was made are added to it
(``ALTER TABLE ... ADD COLUMN``, nullable: older records have none). A run stopped on purpose
(Ctrl-C or SIGTERM of its command, cancelled over HTTP, its server stopping) is stored
``interrupted`` with when and why (:meth:`History.interrupt_run`): it can be resumed, it did not
fail. A run read back as ``running`` whose process is gone (killed without a chance to end its
record, its machine lost: :mod:`ragray.store.liveness`) is shown as ``interrupted`` too; its stored
status stays ``running``.

Several processes write at once (Ray Tune trials, the Serve ingress, CLI runs): SQLite runs in WAL
mode, with a busy timeout, and every write transaction takes the write lock up front (``BEGIN
IMMEDIATE``), so writers queue instead of failing with "database is locked". Times are stored as
naive UTC and returned timezone-aware.
"""

from __future__ import annotations

import math
import re
import shutil
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypedDict

import sqlalchemy as sa
import yaml
from sqlalchemy.engine import Connection
from sqlalchemy.exc import (
    IntegrityError,
    SQLAlchemyError,
)
from sqlalchemy.pool import StaticPool

from ragray.config import ExperimentConfig, validate_config
from ragray.errors import BackendError, InputError
from ragray.store.history_db import (
    _add_missing_columns, _engine, _ephemeral, _meta, _presets, _runs, history_url,
)
from ragray.store.liveness import ProcessInfo, is_gone, this_process

__all__ = [
    "History",
    "history_url",
    "PresetRecord",
    "RunRecord",
    "CleanupCounts",
    "RUN_KINDS",
    "RUN_STATUSES",
    "new_run_id",
    "check_preset_name",
]

RUN_KINDS = ("run", "interpret", "audit", "score", "sweep", "trial")
RUN_STATUSES = ("running", "done", "failed", "interrupted")

_MAX_INT = 2**63 - 1  # SQL BIGINT: larger limits/offsets cannot be sent to the database
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
_NAME_RULE = "1-100 letters, digits, '.', '_' or '-', starting with a letter or digit"


def check_preset_name(name: str) -> str:
    """``name`` if it is a valid preset name, else :class:`InputError` saying what is allowed."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise InputError(f"preset name must be {_NAME_RULE}, got {name!r}")
    return name


def new_run_id(kind: str) -> str:
    """``<kind>-<UTC yyyymmdd-HHMMSS>-<6 hex>``: sortable by start time, unique across processes."""
    return f"{kind}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:6]}"


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _utc(value: datetime | None) -> datetime | None:
    """Stored naive UTC → aware UTC (the database keeps no zone)."""
    return None if value is None else value.replace(tzinfo=timezone.utc)


def _naive_utc(value: datetime) -> datetime:
    return value if value.tzinfo is None else value.astimezone(timezone.utc).replace(tzinfo=None)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _json_safe(value: Any) -> Any:
    """JSON has no NaN/inf (Postgres rejects them): "unmeasured" is stored as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _choice(value: str | None, valid: Sequence[str], what: str) -> str | None:
    if value is not None and value not in valid:
        raise InputError(f"{what} must be one of {', '.join(valid)}, got {value!r}")
    return value


def _page(limit: int | None, offset: int) -> None:
    if limit is not None and not 1 <= limit <= _MAX_INT:
        raise InputError(f"limit must be >= 1 and <= {_MAX_INT}, got {limit}")
    if not 0 <= offset <= _MAX_INT:
        raise InputError(f"offset must be >= 0 and <= {_MAX_INT}, got {offset}")


@dataclass(frozen=True)
class PresetRecord:
    """A saved preset: its resolved config as YAML, plus when it was saved."""

    name: str
    config_yaml: str = field(repr=False)
    description: str | None
    created_at: datetime
    updated_at: datetime

    def config(self) -> ExperimentConfig:
        """The preset as a validated config (:class:`ConfigError` if it no longer validates)."""
        return validate_config(yaml.safe_load(self.config_yaml) or {}, where=f"preset {self.name}")

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "created_at": _iso(self.created_at),
                "updated_at": _iso(self.updated_at), "config": yaml.safe_load(self.config_yaml)}


@dataclass(frozen=True)
class RunRecord:
    """One recorded run (or sweep, or trial). ``status`` is ``interrupted`` for a run stopped by
    Ctrl-C or SIGTERM, and for a run recorded as running whose process is gone; ``pid``, ``host``
    and ``heartbeat_at`` say which process ran it and when it was last seen alive."""

    id: str
    kind: str
    name: str
    status: str
    config_yaml: str = field(repr=False)
    out: str | None
    parent_id: str | None
    started_at: datetime
    finished_at: datetime | None
    seconds: float | None
    summary: dict[str, Any] | None
    results: list[str] | None
    error: str | None
    pid: int | None = None
    host: str | None = None
    heartbeat_at: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, with the config as a mapping."""
        return {
            "id": self.id, "kind": self.kind, "name": self.name, "status": self.status, "out": self.out,
            "parent_id": self.parent_id, "started_at": _iso(self.started_at),
            "finished_at": _iso(self.finished_at), "seconds": self.seconds, "results": self.results,
            "error": self.error, "pid": self.pid, "host": self.host, "heartbeat_at": _iso(self.heartbeat_at),
            "summary": self.summary, "config": yaml.safe_load(self.config_yaml),
        }


class CleanupCounts(TypedDict):
    """What :meth:`History.cleanup_expired` did (the seed's response body)."""

    expired_count: int
    deleted_count: int
    errors: list[str]


def _preset(row: Mapping[str, Any]) -> PresetRecord:
    return PresetRecord(row["name"], row["config"], row["description"], _utc(row["created_at"]),
                        _utc(row["updated_at"]))


def _status(row: Mapping[str, Any], now: datetime) -> str:
    """The stored status, or ``interrupted`` for a ``running`` record whose process is gone."""
    if row["status"] == "running" and is_gone(row["pid"], row["host"], row["process_started"],
                                              row["heartbeat_at"], now):
        return "interrupted"
    return row["status"]


def _run(row: Mapping[str, Any], now: datetime) -> RunRecord:
    return RunRecord(
        id=row["id"], kind=row["kind"], name=row["name"], status=_status(row, now), config_yaml=row["config"],
        out=row["out"], parent_id=row["parent_id"], started_at=_utc(row["started_at"]),
        finished_at=_utc(row["finished_at"]), seconds=row["seconds"], summary=row["summary"],
        results=row["results"], error=row["error"], pid=row["pid"], host=row["host"],
        heartbeat_at=_utc(row["heartbeat_at"]),
    )


def _remove(path: Path) -> None:
    """Delete a file or a directory tree; a path that is already gone is fine."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
    except FileNotFoundError:  # removed meanwhile (another cleanup): done unless it is still there
        if path.exists():
            raise


class History:
    """Presets, runs and ephemeral indexes in the database at ``url`` (see the module docstring;
    None: :func:`history_url`'s default).

    Relative SQLite paths are resolved against the current directory and their folder is created.
    Bad URLs raise :class:`InputError` naming ``history.url``; database failures while working
    raise :class:`BackendError`.
    """

    def __init__(self, url: str | None = None) -> None:
        self.engine = _engine(history_url(url))
        self.url = self.engine.url.render_as_string(hide_password=True)
        # an in-memory database is one shared connection: its users (a run's heartbeat thread
        # among them) take turns
        self._shared = threading.RLock() if isinstance(self.engine.pool, StaticPool) else None
        self._create_tables()

    @classmethod
    def from_config(cls, config: ExperimentConfig) -> History:
        return cls(config.history.url)

    def close(self) -> None:
        """Release the connection pool (the object can still be used; it reconnects)."""
        self.engine.dispose()

    def __repr__(self) -> str:
        return f"History({self.url!r})"

    # -- plumbing ---------------------------------------------------------------------------------

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._turn(), self._errors(), self.engine.connect() as conn:
            yield conn

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """One write transaction (SQLite: ``BEGIN IMMEDIATE``, so it waits for the lock up front)."""
        with self._turn(), self._errors(), self.engine.connect() as conn:
            conn.execution_options(ragray_write=True)
            with conn.begin():
                yield conn

    def _turn(self) -> AbstractContextManager[Any]:
        return self._shared if self._shared is not None else nullcontext()

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except SQLAlchemyError as exc:
            raise BackendError(f"history database {self.url}: {exc}") from exc

    def _create_tables(self) -> None:
        # SQLite: the check-then-create runs under the write lock, so two processes starting at
        # once cannot both create a table; other databases: retry once after a lost race.
        for attempt in range(2):
            try:
                with self._turn(), self.engine.connect() as conn:
                    conn.execution_options(ragray_write=True)
                    with conn.begin():
                        _meta.create_all(conn)
                        _add_missing_columns(conn)
                return
            except SQLAlchemyError as exc:
                if attempt == 0 and self.engine.dialect.name != "sqlite":
                    continue
                err = getattr(exc, "orig", None) or exc
                if self.engine.dialect.name == "sqlite":
                    raise InputError(f"history.url {self.url}: cannot open the SQLite database: {err}") from None
                raise BackendError(f"history.url {self.url}: cannot use the database: {err}") from exc

    # -- presets ----------------------------------------------------------------------------------

    def save_preset(self, name: str, config: ExperimentConfig, description: str | None = None) -> PresetRecord:
        """Insert or update preset ``name`` (its resolved config). ``description=None`` keeps the
        saved description on update."""
        check_preset_name(name)
        text, now = config.to_yaml(), _now()
        for attempt in range(2):  # an insert racing another process's insert becomes an update
            try:
                with self._write() as conn:
                    found = conn.execute(sa.select(_presets.c.name).where(_presets.c.name == name)).first()
                    if found is None:
                        conn.execute(_presets.insert().values(name=name, config=text, description=description,
                                                              created_at=now, updated_at=now))
                    else:
                        values: dict[str, Any] = {"config": text, "updated_at": now}
                        if description is not None:
                            values["description"] = description
                        conn.execute(_presets.update().where(_presets.c.name == name).values(**values))
                break
            except BackendError as exc:
                if attempt or not isinstance(exc.__cause__, IntegrityError):
                    raise
        return self.get_preset_record(name)

    def get_preset_record(self, name: str) -> PresetRecord:
        """The saved preset ``name`` with its description and times (:class:`KeyError` if absent)."""
        if not isinstance(name, str) or not _NAME.match(name):
            raise KeyError(name)
        with self._read() as conn:
            row = conn.execute(sa.select(_presets).where(_presets.c.name == name)).mappings().first()
        if row is None:
            raise KeyError(name)
        return _preset(row)

    def get_preset(self, name: str) -> ExperimentConfig:
        """The config saved as ``name`` (:class:`KeyError` if there is none)."""
        return self.get_preset_record(name).config()

    def list_presets(self, limit: int | None = 50, offset: int = 0) -> list[PresetRecord]:
        """Presets by name; ``limit=None`` lists them all."""
        _page(limit, offset)
        query = sa.select(_presets).order_by(_presets.c.name).offset(offset).limit(limit)
        with self._read() as conn:
            return [_preset(r) for r in conn.execute(query).mappings()]

    def delete_preset(self, name: str) -> bool:
        """Delete preset ``name``; False if there was none."""
        if not isinstance(name, str) or not _NAME.match(name):
            return False
        with self._write() as conn:
            return conn.execute(_presets.delete().where(_presets.c.name == name)).rowcount > 0

    # -- runs -------------------------------------------------------------------------------------

    def start_run(
        self,
        kind: str,
        name: str,
        config: ExperimentConfig,
        out: str | Path | None,
        parent_id: str | None = None,
        *,
        run_id: str | None = None,
        process: ProcessInfo | None = None,
    ) -> str:
        """Record a run as ``running`` now, by ``process`` (default: this one); returns its id
        (``run_id``, or a new one)."""
        _choice(kind, RUN_KINDS, "run kind")
        run_id = run_id or new_run_id(kind)
        if not _NAME.match(run_id):
            raise InputError(f"run id must be {_NAME_RULE}, got {run_id!r}")
        process = process or this_process()
        now = _now()
        with self._write() as conn:
            conn.execute(_runs.insert().values(
                id=run_id, kind=kind, name=name, status="running", config=config.to_yaml(),
                out=None if out is None else str(Path(out).resolve()), parent_id=parent_id, started_at=now,
                pid=process.pid, host=process.host, process_started=process.started, heartbeat_at=now,
            ))
        return run_id

    def heartbeat(self, run_id: str, at: datetime | None = None) -> None:
        """The run ``run_id`` is still going on (as of ``at``, default now): its ``heartbeat_at``,
        which tells readers on other hosts that its process is alive. A finished run is left alone."""
        when = _naive_utc(at) if at is not None else _now()
        with self._write() as conn:
            conn.execute(_runs.update().where(_runs.c.id == run_id, _runs.c.status == "running")
                         .values(heartbeat_at=when))

    def _end(self, run_id: str, status: str, **values: Any) -> None:
        now = _now()
        with self._write() as conn:
            started = conn.execute(sa.select(_runs.c.started_at).where(_runs.c.id == run_id)).scalar()
            if started is None:
                raise KeyError(run_id)
            conn.execute(_runs.update().where(_runs.c.id == run_id).values(
                status=status, finished_at=now, seconds=(now - started).total_seconds(), **values))

    def finish_run(self, run_id: str, summary: Mapping[str, Any] | None, results: Sequence[str] | None = None) -> None:
        """Mark run ``run_id`` done with its summary (and the files it wrote); :class:`KeyError` if unknown."""
        self._end(run_id, "done", summary=None if summary is None else _json_safe(summary),
                  results=None if results is None else list(results), error=None)

    def fail_run(self, run_id: str, error: str) -> None:
        """Mark run ``run_id`` failed with ``error``; :class:`KeyError` if unknown."""
        self._end(run_id, "failed", error=error)

    def interrupt_run(self, run_id: str, reason: str) -> None:
        """Mark run ``run_id`` interrupted (stopped before its end: Ctrl-C or SIGTERM, cancelled, or its
        server stopping), with ``reason``; what it finished stays in its folder for a resume.
        :class:`KeyError` if unknown."""
        self._end(run_id, "interrupted", error=reason)

    def get_run(self, run_id: str) -> RunRecord:
        """The run ``run_id`` (:class:`KeyError` if absent)."""
        with self._read() as conn:
            row = conn.execute(sa.select(_runs).where(_runs.c.id == run_id)).mappings().first()
        if row is None:
            raise KeyError(run_id)
        return _run(row, _now())

    def list_runs(
        self,
        limit: int | None = 50,
        offset: int = 0,
        kind: str | None = None,
        status: str | None = None,
        parent_id: str | None = None,
    ) -> list[RunRecord]:
        """Runs, newest first, optionally of one kind / status / parent sweep."""
        _page(limit, offset)
        query = sa.select(_runs).order_by(_runs.c.started_at.desc(), _runs.c.id.desc())
        if _choice(kind, RUN_KINDS, "kind") is not None:
            query = query.where(_runs.c.kind == kind)
        if parent_id is not None:
            query = query.where(_runs.c.parent_id == parent_id)
        now = _now()
        if status in ("running", "interrupted"):
            # a run whose process is gone is stored as running: tell them apart here, then page (few
            # runs are running or interrupted)
            with self._read() as conn:
                rows = conn.execute(query.where(_runs.c.status.in_(("running", "interrupted")))).mappings().all()
            found = [r for r in (_run(row, now) for row in rows) if r.status == status]
            return found[offset:] if limit is None else found[offset:offset + limit]
        if _choice(status, RUN_STATUSES, "status") is not None:
            query = query.where(_runs.c.status == status)
        with self._read() as conn:
            return [_run(r, now) for r in conn.execute(query.offset(offset).limit(limit)).mappings()]

    # -- ephemeral indexes ------------------------------------------------------------------------

    def register_ephemeral(self, namespace: str, path: str | Path, ttl_seconds: float) -> int:
        """Track ``path`` (a file or directory) to be deleted ``ttl_seconds`` from now; returns its id.

        Registering a namespace's path again while it is tracked (a resumed sweep) restarts its TTL
        rather than adding a second entry."""
        if not (isinstance(ttl_seconds, (int, float)) and math.isfinite(ttl_seconds) and ttl_seconds >= 0):
            raise InputError(f"ttl_seconds must be a number >= 0, got {ttl_seconds!r}")
        now, where = _now(), str(Path(path).resolve())
        values = {"created_at": now, "ttl_seconds": float(ttl_seconds),
                  "expires_at": now + timedelta(seconds=ttl_seconds)}
        with self._write() as conn:
            existing = conn.execute(sa.select(_ephemeral.c.id).where(
                _ephemeral.c.namespace == namespace, _ephemeral.c.path == where,
                _ephemeral.c.deleted_at.is_(None))).scalar()
            if existing is not None:
                conn.execute(_ephemeral.update().where(_ephemeral.c.id == existing).values(**values))
                return int(existing)
            result = conn.execute(_ephemeral.insert().values(namespace=namespace, path=where, **values))
            return int(result.inserted_primary_key[0])

    def cleanup_expired(self, now: datetime | None = None) -> CleanupCounts:
        """Delete every expired, not yet deleted path and mark it deleted.

        ``expired_count``: entries past their expiry; ``deleted_count``: those removed now (a path
        already gone counts as removed); ``errors``: "path: reason" for each that could not be
        removed (it stays registered and is retried next time). Never raises for a path.
        """
        cutoff = _naive_utc(now) if now is not None else _now()
        return self._delete_where(_ephemeral.c.expires_at <= cutoff)

    def delete_namespace(self, namespace: str) -> CleanupCounts:
        """Delete the namespace's paths now, whatever their TTL (a sweep's cleanup at its end);
        counted as in :meth:`cleanup_expired`, with ``expired_count`` = the entries found."""
        return self._delete_where(_ephemeral.c.namespace == namespace)

    def _delete_where(self, condition: Any) -> CleanupCounts:
        query = sa.select(_ephemeral.c.id, _ephemeral.c.path).where(
            _ephemeral.c.deleted_at.is_(None), condition).order_by(_ephemeral.c.id)
        with self._read() as conn:
            found = conn.execute(query).all()
        deleted, errors = 0, []
        for entry_id, path in found:
            try:
                _remove(Path(path))
            except OSError as exc:
                errors.append(f"{path}: {exc.strerror or exc}")
                continue
            with self._write() as conn:  # a concurrent cleanup may have claimed it: count it once
                claimed = conn.execute(_ephemeral.update().where(
                    _ephemeral.c.id == entry_id, _ephemeral.c.deleted_at.is_(None)).values(deleted_at=_now()))
                deleted += claimed.rowcount
        return CleanupCounts(expired_count=len(found), deleted_count=deleted, errors=errors)


