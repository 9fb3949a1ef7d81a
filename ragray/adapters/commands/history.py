"""``ragray runs``, ``ragray presets`` and ``ragray cleanup``: the history database (``history.url``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import datetime

import yaml

from ragray.config import load_config
from ragray.console import print_table
from ragray.errors import InputError
from ragray.store.history import History

__all__ = ["HISTORY_COMMANDS", "cleanup_command", "presets_command", "runs_command"]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _history(args: argparse.Namespace) -> History:
    return History(load_config(args.config, args.overrides).history.url)


def _when(value: datetime | None) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    print_table(header, rows)


def runs_command(args: argparse.Namespace) -> int:
    history = _history(args)
    if args.action == "show":
        try:
            record = history.get_run(args.run_id)
        except KeyError:
            raise InputError(f"no run '{args.run_id}' in {history.url}") from None
        print(json.dumps(record.as_dict(), indent=2, default=str))
        return 0
    records = history.list_runs(args.limit, args.offset, kind=args.kind, status=args.status)
    if not records:
        print(f"no runs recorded in {history.url}" + (" (with these filters)" if args.kind or args.status else ""))
        return 0
    _table(["ID", "KIND", "NAME", "STATUS", "STARTED (UTC)", "SECONDS", "OUT"],
           [[r.id, r.kind, r.name, r.status, _when(r.started_at), _seconds(r.seconds), r.out or "-"]
            for r in records])
    return 0


def presets_command(args: argparse.Namespace) -> int:
    if args.action == "save":
        config = load_config(args.config, args.overrides)
        history = History(config.history.url)
        history.save_preset(args.name, config, args.description)
        print(f"ragray presets: saved '{args.name}' in {history.url}")
        return 0
    history = _history(args)
    if args.action == "get":
        try:
            print(history.get_preset_record(args.name).config_yaml, end="")
        except KeyError:
            raise InputError(f"no preset '{args.name}' in {history.url}") from None
    elif args.action == "delete":
        if not history.delete_preset(args.name):
            raise InputError(f"no preset '{args.name}' in {history.url}")
        print(f"ragray presets: deleted '{args.name}' from {history.url}")
    else:
        records = history.list_presets(args.limit, args.offset)
        if not records:
            print(f"no presets saved in {history.url}")
            return 0
        rows = []
        for r in records:
            raw = yaml.safe_load(r.config_yaml) or {}
            gen = raw.get("generation") or {}
            rows.append([r.name, _when(r.updated_at), (raw.get("retrieval") or {}).get("retriever", "-"),
                         f"{gen.get('backend', '-')}:{gen.get('model', '-')}", r.description or ""])
        _table(["NAME", "UPDATED (UTC)", "RETRIEVER", "GENERATOR", "DESCRIPTION"], rows)
    return 0


def cleanup_command(args: argparse.Namespace) -> int:
    history = _history(args)
    counts = history.cleanup_expired()
    print(f"ragray cleanup: {counts['expired_count']} expired, {counts['deleted_count']} deleted, "
          f"{len(counts['errors'])} errors ({history.url})")
    for error in counts["errors"]:
        print(f"  could not delete {error}", file=sys.stderr)
    return 1 if counts["errors"] else 0


HISTORY_COMMANDS = {"runs": runs_command, "presets": presets_command, "cleanup": cleanup_command}
