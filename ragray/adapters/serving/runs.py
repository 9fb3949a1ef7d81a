"""Presets (saved in the history database, or YAML files under ``serve.presets_dir``) and whole
runs started over HTTP.

``POST /runs`` records the run in the history database (``history.url``) and starts ``ragray
run|interpret|audit`` in a background thread of the ingress replica, returning at once; the run
writes an ordinary run directory under ``serve.runs_dir`` (resumable with ``ragray run --resume``).
``GET /runs`` reads the same history, so CLI runs and sweep trials are listed too. A run whose
generation section equals the served one shares the generator deployment (no second model load).
A run costing more than ``serve.max_calls_per_request`` model calls is refused before it starts;
``DELETE /runs/{id}`` (and the server stopping) cancels one, which stops at its next model call and
is recorded ``interrupted``, its finished questions kept (:mod:`ragray.adapters.serving.inflight`).
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ragray.cancel import Cancelled, CancelToken
from ragray.config import ExperimentConfig, load_config
from ragray.config_access import ClientPolicy, changed_settings, flatten, is_allowed
from ragray.errors import ConflictError, InputError, RagrayError
from ragray.generation import Generator
from ragray.pipeline.cost import check_cost, command_cost
from ragray.rows.summaries import read_summary
from ragray.adapters.serving import schemas as s
from ragray.adapters.serving.inflight import Inflight, RunModel
from ragray.adapters.serving.secrets import public_model
from ragray.store.history import (
    History,
    PresetRecord,
    RunRecord,
    check_preset_name,
    new_run_id,
)
from ragray.store.recording import recording

__all__ = ["Presets", "RunFailedError", "RunManager", "RunNotRunningError", "nothing_measured"]

log = logging.getLogger("ragray.serve")

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def _describe(name: str, load: Callable[[], ExperimentConfig], **fields: Any) -> s.Preset:
    try:
        cfg = load()
    except RagrayError as exc:
        return s.Preset(name=name, error=str(exc), **fields)
    return s.Preset(name=name, retriever=cfg.retrieval.retriever, rerank=cfg.rerank.strategy,
                    generator=f"{cfg.generation.backend}:{public_model(cfg.generation.model)}", **fields)


def _db_fields(record: PresetRecord) -> dict[str, Any]:
    return {"source": "db", "description": record.description, "created_at": record.created_at,
            "updated_at": record.updated_at}


class Presets:
    """Named configs: every ``*.yaml`` under a folder, addressed by file stem, and the presets of
    the history database (when one is attached).

    The folder's files are the operator's: a run over one takes its whole config, and no client
    can replace, shadow or delete one (a database preset of a file's name is a
    :class:`~ragray.errors.ConflictError`, HTTP 409; should one exist from before the file, the
    file wins). A database preset is a client's choice of settings (``PUT /presets/{name}``): it is
    saved, and used, as the served config with those settings, under the server's :class:`ClientPolicy`.
    """

    def __init__(self, folder: str | Path, history: History | None = None, *,
                 served: ExperimentConfig | None = None, policy: ClientPolicy | None = None) -> None:
        self.folder = Path(folder)
        self.history = history
        self.served = served if served is not None else ExperimentConfig()
        self.policy = policy or ClientPolicy.for_server(self.served)

    @classmethod
    def for_server(cls, config: ExperimentConfig, history: History | None = None) -> Presets:
        """The presets of a server started with ``config`` (its ``serve.presets_dir`` and policy)."""
        return cls(config.serve.presets_dir, history, served=config)

    def use_history(self, history: History) -> None:
        """Attach the history database (kept if one is attached already)."""
        if self.history is None:
            self.history = history

    def _saved(self) -> dict[str, PresetRecord]:
        return {p.name: p for p in self.history.list_presets(limit=None)} if self.history else {}

    def _files(self) -> list[str]:
        return sorted(p.stem for p in self.folder.glob("*.yaml")) if self.folder.is_dir() else []

    def names(self) -> list[str]:
        return sorted(set(self._saved()) | set(self._files()))

    def path(self, name: str) -> Path:
        path = self.folder / f"{name}.yaml"
        if not _NAME.match(name) or not path.is_file():
            raise KeyError(name)
        return path

    def is_file(self, name: str) -> bool:
        """Whether ``name`` is one of the operator's file presets."""
        try:
            self.path(name)
        except KeyError:
            return False
        return True

    def file_configs(self) -> list[ExperimentConfig]:
        """The configs of the file presets that load (what :mod:`~ragray.adapters.serving.secrets` keeps out
        of answers)."""
        out = []
        for name in self._files():
            try:
                out.append(load_config(self.path(name)))
            except (RagrayError, KeyError, OSError):
                continue
        return out

    def _record(self, name: str) -> PresetRecord | None:
        if self.is_file(name):
            return None  # the operator's file wins over a database preset of its name
        try:
            return self.history.get_preset_record(name) if self.history else None
        except KeyError:
            return None

    def load(self, name: str) -> ExperimentConfig:
        """The preset ``name`` as saved (:class:`KeyError` if there is none)."""
        record = self._record(name)
        return record.config() if record is not None else load_config(self.path(name))

    def for_client(self, name: str, overrides: Sequence[str] = ()) -> ExperimentConfig:
        """The config a client's run over preset ``name`` uses, with its ``a.b=value`` overrides,
        both under the policy (:class:`KeyError` if there is no such preset). A file preset is
        the operator's whole config; a database preset is the served config with its settings."""
        record = self._record(name)
        if record is None:
            base = load_config(self.path(name))
        else:
            saved = record.config()
            values = flatten(saved)
            base = self.policy.apply(self.served, {k: values[k] for k in changed_settings(self.served, saved)},
                                     where=f"preset {name}")
        return self.policy.apply_overrides(base, overrides)

    def public(self, name: str) -> dict[str, Any]:
        """What a client may read of preset ``name`` (:class:`KeyError` if there is none): its
        source and description, and as ``settings`` the values of the keys a client may set — a
        database preset's own choices, a file preset's values of those keys — never the rest of
        the operator's config (models, endpoints, paths, variables); ``data.path`` as the served
        dataset's name (omitted when it is none)."""
        record = self._record(name)
        config = record.config() if record is not None else load_config(self.path(name))
        values = flatten(config)
        keys = changed_settings(self.served, config) if record is not None else list(values)
        settings = {k: values[k] for k in keys if is_allowed(k, self.policy.allowed)}
        if "data.path" in settings:
            names = [n for n, path in self.policy.datasets.items() if path == settings["data.path"]]
            settings.pop("data.path")
            if names:
                settings["data.path"] = names[0]
        head = _db_fields(record) if record is not None else {"source": "file", "description": None}
        return {"name": name, **{k: v for k, v in head.items() if k in ("source", "description")},
                "settings": settings}

    def describe(self, name: str, record: PresetRecord | None = None) -> s.Preset:
        record = record or self._record(name)
        if record is not None:
            return _describe(name, record.config, **_db_fields(record))
        path = self.path(name)
        return _describe(name, lambda: load_config(path), source="file")

    def page(self, limit: int, offset: int = 0) -> list[s.Preset]:
        """Database and file presets together, by name (a file's name: the file)."""
        files = set(self._files())
        saved = {n: r for n, r in self._saved().items() if n not in files}
        names = sorted(set(saved) | files)[offset:offset + limit]
        return [self.describe(n, saved.get(n)) for n in names]

    def save(self, name: str, raw: Mapping[str, Any], description: str | None = None) -> s.Preset:
        """Save a client's settings ``raw`` (a config mapping; unset keys keep the served config's
        values) as ``name`` in the database, under the policy (:class:`NotAllowedError` otherwise;
        :class:`ConflictError` for the name of a file preset)."""
        if self.history is None:
            raise InputError("presets cannot be saved: this server has no history database")
        check_preset_name(name)
        self._refuse_file(name, "replaced")
        config = self.policy.apply(self.served, raw, where=f"preset {name}")
        return self.describe(name, self.history.save_preset(name, config, description))

    def delete(self, name: str) -> bool:
        """Delete the database preset ``name``; False if there is none (:class:`ConflictError`
        for a file preset: the operator's)."""
        self._refuse_file(name, "deleted")
        return self.history.delete_preset(name) if self.history else False

    def _refuse_file(self, name: str, what: str) -> None:
        if self.is_file(name):
            raise ConflictError(f"preset {name}: a file preset of the server's operator, which cannot be {what} "
                                "over HTTP; save yours under another name")


class RunManager:
    """Starts runs in threads, recorded in the history database, and reports them from it."""

    def __init__(self, config: ExperimentConfig, presets: Presets, generator: Generator,
                 history: History | None = None) -> None:
        self.config = config
        self.presets = presets
        self.generator = generator
        self.root = Path(config.serve.runs_dir)
        self.history = history or presets.history or History(config.history.url)
        presets.use_history(self.history)
        #: the runs (and one-question requests) this process has under way, to cancel
        self.inflight = Inflight()

    def _resolve(self, req: s.RunRequest) -> ExperimentConfig:
        overrides = list(req.overrides) + ([f"data.limit={req.limit}"] if req.limit else [])
        if req.preset is None:
            return self.presets.policy.apply_overrides(self.config, overrides)
        try:
            return self.presets.for_client(req.preset, overrides)
        except KeyError:
            valid = ", ".join(self.presets.names()) or "(none)"
            raise InputError(f"preset: unknown '{req.preset}'; valid: {valid}") from None

    def start(self, req: s.RunRequest) -> s.RunStatus:
        config = self._resolve(req)
        check_cost(command_cost(config, req.command), self.presets.policy.limits, "overrides")
        run_id = new_run_id(req.command)
        out = self.root / run_id
        out.mkdir(parents=True)
        self.history.start_run(req.command, config.name, config, out, run_id=run_id)
        shared = self.generator if config.generation == self.config.generation else None
        token = CancelToken()
        thread = threading.Thread(target=self._work, args=(run_id, req.command, config, out, RunModel(
            config, shared, token)), daemon=True, name=f"ragray-{run_id}")
        self.inflight.add_run(run_id, thread, token)
        thread.start()
        return self.status(run_id)

    def _work(self, run_id: str, command: str, config: ExperimentConfig, out: Path, model: RunModel) -> None:
        from ragray import api

        try:
            with recording(self.history, run_id, out):  # the command's own recording joins this record
                generator = model.open(command)
                if command == "audit":
                    done = api.audit_retrieval(config=config, out=out, progress=False, model=generator)
                else:  # the same functions a notebook calls (ragray.run / ragray.interpret)
                    done = {"run": api.run, "interpret": api.interpret}[command](
                        config=config, out=out, resume=True, progress=False, model=generator)
                reason = nothing_measured(command, done.summary)
                if reason is not None:  # the tables are written; the run is still no result
                    raise RunFailedError(reason)
        except Cancelled as exc:  # recorded interrupted; what it finished stays for a resume
            log.info("run %s interrupted: %s", run_id, exc)
        except Exception:  # recorded as failed for GET /runs/{id}; the thread must not die silently
            log.warning("run %s failed", run_id, exc_info=True)
        finally:
            model.close()
            self.inflight.finished(run_id)

    def cancel(self, run_id: str) -> s.RunStatus:
        """Cancel the run ``run_id`` (``DELETE /runs/{id}``): it stops at its next model call and is
        recorded ``interrupted``. :class:`KeyError` if there is no such run, :class:`RunNotRunningError`
        if it is not going on in this server."""
        record = self.history.get_run(run_id)
        if self.inflight.cancel_run(run_id, "cancelled by DELETE /runs/{id}"):
            return self.status(run_id)
        if record.status == "running":
            raise RunNotRunningError(f"run {run_id} is running, but not in this server (a CLI run, a sweep's "
                                     "trial or another replica's): it cannot be cancelled here")
        raise RunNotRunningError(f"run {run_id} is already {record.status}: nothing to cancel")

    def stop(self) -> None:
        """Cancel every run and request (the server is stopping), wait up to ``serve.stop_timeout_s``
        for the runs, and record the runs still going ``interrupted``."""
        for run_id in self.inflight.stop(self.config.serve.stop_timeout_s):
            try:
                self.history.interrupt_run(run_id, "interrupted: the server stopped before the run did")
            except Exception as exc:  # noqa: BLE001 - the server is going away; say so and go on
                log.warning("run %s: could not record it interrupted: %s", run_id, exc)

    @staticmethod
    def _status(record: RunRecord) -> s.RunStatus:
        progress = Path(record.out or "") / "progress.jsonl"
        try:
            done = sum(1 for line in progress.read_text().splitlines() if line.strip()) if record.out else 0
        except OSError:
            done = 0
        return s.RunStatus(run_id=record.id, command=record.kind, status=record.status,
                           out=Path(record.out).name if record.out else "",
                           questions_done=done, error=record.error, name=record.name,
                           summary=read_summary(record.kind, record.summary) if record.summary else None,
                           parent_id=record.parent_id, started_at=record.started_at,
                           finished_at=record.finished_at, seconds=record.seconds)

    def questions(self, run_id: str, limit: int = 50, offset: int = 0) -> list[s.FinishedQuestion]:
        """The run's finished questions so far, in finishing order (``GET /runs/{id}/questions``:
        readable while it runs). :class:`KeyError` if the history has no such run."""
        record = self.history.get_run(run_id)
        progress = Path(record.out or "") / "progress.jsonl"
        out: list[s.FinishedQuestion] = []
        if not record.out or not progress.is_file():
            return out
        with progress.open(encoding="utf-8") as f:
            for i, line in enumerate(f):
                if i < offset or not line.strip():
                    continue
                if len(out) >= limit:
                    break
                try:
                    raw = json.loads(line)
                except json.JSONDecodeError:  # the line being written as we read
                    break
                out.append(s.FinishedQuestion(question=raw.get("question") or {}, parts={
                    k: v for k, v in raw.items() if isinstance(v, list) and k != "calls"}))
        return out

    def status(self, run_id: str) -> s.RunStatus:
        """The run ``run_id`` (:class:`KeyError` if the history has none)."""
        return self._status(self.history.get_run(run_id))

    def list(self, limit: int = 50, offset: int = 0, kind: str | None = None,
             status: str | None = None) -> list[s.RunStatus]:
        """Recorded runs, newest first."""
        return [self._status(r) for r in self.history.list_runs(limit, offset, kind=kind, status=status)]


class RunFailedError(RagrayError):
    """A run that finished without measuring anything (recorded ``failed`` with the reason)."""


class RunNotRunningError(RagrayError):
    """A run that cannot be cancelled: finished, or not started by this server (HTTP 409)."""


def nothing_measured(command: str, summary: Mapping[str, Any]) -> str | None:
    """Why a finished run of ``command`` measured nothing (its ``summary.json``), else None."""
    n = int(summary.get("n_questions") or 0)
    if command == "run" and n and not summary.get("n_measured"):
        errors = summary.get("error_questions") or ()
        if errors:
            first = errors[0]
            return (f"nothing measured: {len(errors)} of {n} questions failed (first, {first.get('question_id')}: "
                    f"{first.get('error')})")
        states = ", ".join(f"{k}: {v}" for k, v in (summary.get("states") or {}).items() if v)
        return f"nothing measured: none of the {n} questions could be measured ({states or 'no state'})"
    if command == "interpret" and n and int(summary.get("n_failed") or 0) >= n:
        return f"nothing measured: all {n} questions failed (their errors are in questions.parquet)"
    return None

