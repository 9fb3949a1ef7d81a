"""Presets (the configs under ``serve.presets_dir``) and whole runs started over HTTP.

``POST /runs`` starts ``ragray run|interpret|audit`` in a background thread of the ingress
replica and returns at once; the run writes an ordinary run directory under ``serve.runs_dir``
(resumable with ``ragray run --resume``), so its state survives the server. A run whose
generation section equals the served one shares the generator deployment (no second model load).
"""

from __future__ import annotations

import json
import re
import threading
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

from ragray.config import ExperimentConfig, load_config
from ragray.errors import InputError, RagrayError
from ragray.generation import Generator
from ragray.serving import schemas as s

__all__ = ["Presets", "RunManager"]

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_ERROR_FILE = "error.txt"
_FINAL = {"run": "summary.json", "interpret": "summary.json", "audit": "audit_report.json"}


class Presets:
    """Every ``*.yaml`` under a folder, addressed by file stem."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def names(self) -> list[str]:
        return sorted(p.stem for p in self.folder.glob("*.yaml")) if self.folder.is_dir() else []

    def path(self, name: str) -> Path:
        path = self.folder / f"{name}.yaml"
        if not _NAME.match(name) or not path.is_file():
            raise KeyError(name)
        return path

    def load(self, name: str, overrides: tuple[str, ...] | list[str] = ()) -> ExperimentConfig:
        return load_config(self.path(name), list(overrides))

    def describe(self, name: str) -> s.Preset:
        path = self.path(name)
        try:
            cfg = load_config(path)
        except RagrayError as exc:
            return s.Preset(name=name, path=str(path), error=str(exc))
        return s.Preset(name=name, path=str(path), retriever=cfg.retrieval.retriever, rerank=cfg.rerank.strategy,
                        generator=f"{cfg.generation.backend}:{cfg.generation.model}")


class RunManager:
    """Starts runs in threads and reports their state from their run directories."""

    def __init__(self, config: ExperimentConfig, presets: Presets, generator: Generator) -> None:
        self.config = config
        self.presets = presets
        self.generator = generator
        self.root = Path(config.serve.runs_dir)
        self._threads: dict[str, threading.Thread] = {}
        self._commands: dict[str, str] = {}

    def _resolve(self, req: s.RunRequest) -> ExperimentConfig:
        overrides = list(req.overrides) + ([f"data.limit={req.limit}"] if req.limit else [])
        if req.preset is None:
            return _with_overrides(self.config, overrides)
        try:
            return self.presets.load(req.preset, overrides)
        except KeyError:
            raise InputError(f"preset: unknown '{req.preset}'; valid: {', '.join(self.presets.names()) or '(none)'}") from None

    def start(self, req: s.RunRequest) -> s.RunStatus:
        config = self._resolve(req)
        run_id = f"{req.command}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        out = self.root / run_id
        out.mkdir(parents=True)
        (out / "command.json").write_text(json.dumps({"command": req.command, "preset": req.preset}))
        shared = self.generator if config.generation == self.config.generation else None
        thread = threading.Thread(target=self._work, args=(req.command, config, out, shared), daemon=True,
                                  name=f"ragray-{run_id}")
        self._threads[run_id] = thread
        self._commands[run_id] = req.command
        thread.start()
        return self.status(run_id)

    @staticmethod
    def _work(command: str, config: ExperimentConfig, out: Path, generator: Generator | None) -> None:
        from ragray.commands.audit import run_audit
        from ragray.commands.interpret import run_interpret
        from ragray.commands.run import run_influence

        try:
            if command == "audit":
                run_audit(config, out, progress=False, generator=generator)
            else:
                fn = run_influence if command == "run" else run_interpret
                fn(config, out, resume=True, progress=False, generator=generator)
        except Exception as exc:  # recorded for GET /runs/{id}; the thread must not die silently
            (out / _ERROR_FILE).write_text(f"{type(exc).__name__}: {exc}\n\n{traceback.format_exc()}")

    def _command(self, run_id: str, out: Path) -> str:
        if run_id in self._commands:
            return self._commands[run_id]
        try:
            return json.loads((out / "command.json").read_text())["command"]
        except (OSError, ValueError, KeyError):
            return "unknown"

    def status(self, run_id: str) -> s.RunStatus:
        out = self.root / run_id
        if not _NAME.match(run_id) or not out.is_dir():
            raise KeyError(run_id)
        command = self._command(run_id, out)
        final = out / _FINAL.get(command, "summary.json")
        error = out / _ERROR_FILE
        progress = out / "progress.jsonl"
        done = sum(1 for line in progress.read_text().splitlines() if line.strip()) if progress.is_file() else 0
        summary = None
        if error.is_file():
            state, err = "failed", error.read_text().split("\n\n", 1)[0]
        elif final.is_file():
            report = json.loads(final.read_text())
            state, err, summary = "done", None, report.get("summary", report)
        elif run_id in self._threads and self._threads[run_id].is_alive():
            state, err = "running", None
        else:
            state, err = "incomplete", None
        return s.RunStatus(run_id=run_id, command=command, status=state, out=str(out), questions_done=done,
                           summary=summary, error=err)

    def list(self) -> list[s.RunStatus]:
        if not self.root.is_dir():
            return []
        ids = sorted((p.name for p in self.root.iterdir() if (p / "config.yaml").is_file() or p.name in self._threads),
                     reverse=True)
        return [self.status(i) for i in ids]


def _with_overrides(config: ExperimentConfig, overrides: list[str]) -> ExperimentConfig:
    """The served config with ``a.b=value`` overrides, validated like a file."""
    from ragray.config import apply_overrides, validate_config

    if not overrides:
        return config
    return validate_config(apply_overrides(config.model_dump(mode="json"), overrides))
