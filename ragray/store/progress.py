"""An append-only log of finished questions: the part of a run that survives a kill.

Each finished question is one JSON line, flushed and fsync'ed before the next question starts,
so a run killed at any moment keeps every question it finished. A line cut short by the kill is
ignored on reading (that question is simply redone), and a question logged twice (a resumed run
racing a kill) counts once — the last record wins.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from ragray.errors import WriteError

__all__ = ["ProgressLog"]

log = logging.getLogger(__name__)


class ProgressLog:
    """``progress.jsonl`` in a run directory, keyed by ``record['question']['question_id']``; with
    ``path`` None the lines are kept in memory (an in-memory run: nothing to survive, nothing to resume)."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self._lines: list[str] = []

    def text(self) -> str:
        """The in-memory log as the file would hold it."""
        return "".join(line + "\n" for line in self._lines)

    def load(self, repair: bool = False) -> dict[str, dict[str, Any]]:
        """Finished records by question id. A torn last line is skipped; with ``repair`` it is
        also cut off the file, so records appended later start on a line of their own."""
        done: dict[str, dict[str, Any]] = {}
        if self.path is None or not self.path.is_file():
            return done
        good_end = 0
        with open(self.path, "rb") as fh:
            for n, raw in enumerate(fh, start=1):
                try:
                    if not raw.endswith(b"\n"):
                        raise ValueError("no line end")
                    record = json.loads(raw)
                    done[record["question"]["question_id"]] = record
                    good_end = fh.tell()
                except (ValueError, KeyError, TypeError):
                    log.warning("%s:%d: incomplete record ignored (interrupted write)", self.path, n)
        if repair and good_end < self.path.stat().st_size:
            with open(self.path, "r+b") as fh:
                fh.truncate(good_end)
        return done

    def append(self, record: dict[str, Any]) -> None:
        """Add one finished record, on disk before this returns. A write that fails (no space
        left, a quota) is a :class:`WriteError` naming the file, and the part of the line that
        did get written is cut off again: the log keeps exactly the records finished before."""
        line = json.dumps(record, ensure_ascii=False, allow_nan=True)
        if self.path is None:
            self._lines.append(line)
            return
        data = memoryview((line + "\n").encode("utf-8"))
        try:
            with open(self.path, "ab", buffering=0) as fh:
                start = fh.seek(0, os.SEEK_END)
                try:
                    while data:  # an unbuffered write may take only part of it
                        data = data[fh.write(data):]
                    os.fsync(fh.fileno())
                except OSError:
                    with contextlib.suppress(OSError):  # else load() skips the torn line
                        fh.truncate(start)
                    raise
        except OSError as exc:
            raise WriteError(self.path, exc) from exc
