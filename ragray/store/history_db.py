"""The history database itself: its tables, the SQLAlchemy engine for ``history.url`` (SQLite
tuned for several writers: WAL where the file system allows, a busy timeout, ``BEGIN IMMEDIATE``),
columns added to an older database, and the default URL in ragray's data folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.pool import StaticPool

from ragray.errors import InputError


__all__ = ["BUSY_TIMEOUT_S", "history_url"]

BUSY_TIMEOUT_S = 60.0  # how long a SQLite writer waits for the lock before giving up

_meta = sa.MetaData()
_presets = sa.Table(
    "presets", _meta,
    sa.Column("name", sa.String(100), primary_key=True),
    sa.Column("config", sa.Text, nullable=False),
    sa.Column("description", sa.Text),
    sa.Column("created_at", sa.DateTime, nullable=False),
    sa.Column("updated_at", sa.DateTime, nullable=False),
)
_runs = sa.Table(
    "runs", _meta,
    sa.Column("id", sa.String(100), primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False, index=True),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("config", sa.Text, nullable=False),
    sa.Column("out", sa.Text),
    sa.Column("parent_id", sa.String(100), index=True),
    sa.Column("started_at", sa.DateTime, nullable=False, index=True),
    sa.Column("finished_at", sa.DateTime),
    sa.Column("seconds", sa.Float),
    sa.Column("summary", sa.JSON),
    sa.Column("results", sa.JSON),
    sa.Column("error", sa.Text),
    # the process running it (None in records made before these columns existed)
    sa.Column("pid", sa.Integer),
    sa.Column("host", sa.String(255)),
    sa.Column("process_started", sa.Float),
    sa.Column("heartbeat_at", sa.DateTime),
)
_ephemeral = sa.Table(
    "ephemeral_indexes", _meta,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("namespace", sa.String(255), nullable=False, index=True),
    sa.Column("path", sa.Text, nullable=False),
    sa.Column("created_at", sa.DateTime, nullable=False),
    sa.Column("ttl_seconds", sa.Float, nullable=False),
    sa.Column("expires_at", sa.DateTime, nullable=False, index=True),
    sa.Column("deleted_at", sa.DateTime),
)



def history_url(url: str | None = None) -> str:
    """``url``, or the default history: ``history.sqlite`` in ragray's data folder
    (:func:`ragray.paths.data_root`: ``$RAGRAY_HOME`` or ``~/.local/share/ragray``), never the
    working directory unasked."""
    if url:
        return url
    from ragray.paths import data_root

    return f"sqlite:///{(data_root() / 'history.sqlite').resolve()}"



# -- the engine ------------------------------------------------------------------------------------


def _add_missing_columns(conn: Connection) -> None:
    """Add the columns a table of an older ragray lacks (all nullable: its rows keep NULL there)."""
    inspector = sa.inspect(conn)
    for table in _meta.sorted_tables:
        have = {c["name"] for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name not in have:
                name = conn.dialect.identifier_preparer.format_table(table)
                conn.exec_driver_sql(f"ALTER TABLE {name} ADD COLUMN "
                                     f"{sa.schema.CreateColumn(column).compile(dialect=conn.dialect)}")


def _engine(text: str) -> sa.Engine:
    try:
        url = make_url(text)
    except (ArgumentError, ValueError, TypeError):
        raise InputError(
            f"history.url: not a valid SQLAlchemy URL: {text!r} (e.g. sqlite:///runs/history.sqlite)"
        ) from None
    shown = url.render_as_string(hide_password=True)
    kwargs: dict[str, Any] = {}
    sqlite = url.get_backend_name() == "sqlite"
    if sqlite:
        url, kwargs = _sqlite_options(url)
    try:
        engine = sa.create_engine(url, **kwargs)
    except NoSuchModuleError:
        raise InputError(
            f"history.url: unknown database {url.drivername!r} in {shown!r} "
            "(e.g. sqlite:///runs/history.sqlite or postgresql://user@host/db)"
        ) from None
    except ImportError as exc:
        raise InputError(f"history.url {shown!r} needs its database driver: {exc}") from None
    if sqlite:
        _sqlite_events(engine)
    return engine


def _sqlite_options(url: URL) -> tuple[URL, dict[str, Any]]:
    db = url.database
    connect_args: dict[str, Any] = {"timeout": BUSY_TIMEOUT_S, "check_same_thread": False}
    if not db or db == ":memory:" or db.startswith("file:"):
        return url, {"poolclass": StaticPool, "connect_args": connect_args}  # one shared connection
    path = Path(db).expanduser()
    path = path if path.is_absolute() else Path.cwd() / path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"history.url: cannot create the folder of {path}: {exc.strerror or exc}") from None
    return url.set(database=str(path)), {"connect_args": connect_args}


def _sqlite_events(engine: sa.Engine) -> None:
    """WAL (readers never block the writer), a busy timeout, and SQLAlchemy-issued BEGINs.

    pysqlite's own transaction handling starts a transaction lazily at the first write; a
    transaction that read first can then fail at once with "database is locked" instead of
    waiting. SQLAlchemy's documented recipe takes over BEGIN; writes use BEGIN IMMEDIATE.
    """

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, record: Any) -> None:
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            cursor.execute("PRAGMA journal_mode = WAL")  # persistent; in-memory databases answer 'memory'
        finally:
            cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("ragray_write") else "BEGIN")
