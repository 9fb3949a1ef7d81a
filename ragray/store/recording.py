"""Recording a command in the run history: ``running``, then ``done`` with its summary, ``failed``
with its error, or ``interrupted`` when Ctrl-C or SIGTERM stopped it or it was cancelled
(:class:`~ragray.cancel.Cancelled`): it can be resumed.

    with recorded_run(config, "run", out) as recording:
        ...                                   # the command's own work
        recording.summary = summary           # stored when the block ends without an error

While the block runs, a daemon thread touches the record's heartbeat every
:data:`~ragray.store.liveness.HEARTBEAT_S` seconds: a process killed without a chance to end its
record (SIGKILL) is then shown as ``interrupted``, not ``running`` forever (:mod:`ragray.store.liveness`).

Recording follows ``config.history`` (``record``, ``url``). It never breaks the run: when the
database cannot be opened or written, a warning is logged and the run goes on unrecorded.

Nested blocks: a block for the same run directory as the enclosing one (a run started over HTTP,
already recorded by the server) adds nothing and hands its summary to the enclosing record; a
block for another directory (a sweep's trial) is recorded with the enclosing run as its parent.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from ragray.cancel import Cancelled
from ragray.config import ExperimentConfig
from ragray.store import liveness
from ragray.store.history import History

__all__ = ["Recording", "recorded_run", "recording"]

log = logging.getLogger(__name__)


class Recording:
    """The history entry of one run while it is going on.

    ``id`` is None when nothing is recorded; set ``summary`` before the block ends.
    """

    def __init__(self, run_id: str | None, out: Path | None) -> None:
        self.id = run_id
        self.out = out
        self.summary: dict[str, Any] | None = None


_ACTIVE: ContextVar[Recording | None] = ContextVar("ragray_recording", default=None)


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _files(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.is_file()) if out.is_dir() else []


def _quietly(what: str, fn: Callable[..., Any], *args: Any) -> None:
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - the history must never break the run
        log.warning("run history: could not %s: %s", what, exc)


class _Heartbeat:
    """A daemon thread that touches the record ``run_id`` every ``every`` seconds until stopped."""

    def __init__(self, history: History, run_id: str, every: float) -> None:
        self.history, self.run_id, self.every = history, run_id, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"ragray-heartbeat-{run_id}", daemon=True)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _beat(self) -> None:
        warned = False
        while not self._stop.wait(self.every):
            try:
                self.history.heartbeat(self.run_id)
            except Exception as exc:  # noqa: BLE001 - the history must never break the run
                if not warned:  # once: a database that is gone stays gone for a while
                    log.warning("run history: could not record that run %s is alive: %s", self.run_id, exc)
                    warned = True


@contextmanager
def recording(history: History, run_id: str, out: str | Path, *, close: bool = False) -> Iterator[Recording]:
    """End the already started record ``run_id`` as done (with ``Recording.summary`` and the files
    in ``out``), interrupted (a ``KeyboardInterrupt``: Ctrl-C, or the CLI's SIGTERM) or failed (any
    other error); the exception is re-raised. Its heartbeat goes on meanwhile."""
    rec = Recording(run_id, Path(out).resolve())
    token = _ACTIVE.set(rec)
    beat = _Heartbeat(history, run_id, liveness.HEARTBEAT_S)
    try:
        with beat:
            yield rec
    except Cancelled as exc:  # stopped on purpose: what it finished is kept, and resumes
        _quietly(f"record run {run_id} as interrupted", history.interrupt_run, run_id, f"interrupted: {exc}")
        raise
    except KeyboardInterrupt as exc:  # stopped, not broken: the record must not stay "running" either
        _quietly(f"record run {run_id} as interrupted", history.interrupt_run, run_id, _error_text(exc))
        raise
    except BaseException as exc:
        _quietly(f"record run {run_id} as failed", history.fail_run, run_id, _error_text(exc))
        raise
    else:
        _quietly(f"record run {run_id} as done", history.finish_run, run_id, rec.summary, _files(rec.out))
    finally:
        _ACTIVE.reset(token)
        if close:
            history.close()


@contextmanager
def recorded_run(
    config: ExperimentConfig,
    kind: str,
    out: str | Path | None,
    *,
    history: History | None = None,
    parent_id: str | None = None,
) -> Iterator[Recording]:
    """Record the run in ``out`` as ``kind`` (see the module docstring).

    ``history`` overrides ``config.history`` (and records even when ``history.record`` is false).
    """
    if out is None:  # a run held in memory (the Python API without out): no folder to record
        yield Recording(None, None)
        return
    path = Path(out).resolve()
    outer = _ACTIVE.get()
    if outer is not None and outer.out == path:
        yield outer
        return
    if outer is not None and parent_id is None:
        parent_id = outer.id
    if history is None and not config.history.record:
        yield Recording(None, path)
        return
    own = history is None
    try:
        hist = history if history is not None else History(config.history.url)
    except Exception as exc:  # noqa: BLE001 - the history must never break the run
        log.warning("run history: not recording this %s: %s", kind, exc)
        hist = None
    run_id = None
    if hist is not None:
        try:
            run_id = hist.start_run(kind, config.name, config, path, parent_id)
        except Exception as exc:  # noqa: BLE001
            log.warning("run history: not recording this %s: %s", kind, exc)
            if own:
                hist.close()
    if hist is None or run_id is None:
        yield Recording(None, path)
        return
    with recording(hist, run_id, path, close=own) as rec:
        yield rec
