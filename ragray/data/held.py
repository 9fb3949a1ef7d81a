"""Records held in memory for the run that reads them: the Python API's rows without a file.

``ragray.run(df)`` without ``out`` hands its rows to the pipeline as ``data.path: rows:<token>``
while the run lasts (:func:`held_rows`); :func:`~ragray.data.loading.load_dataset` reads them from
here as it reads a records file. The token names rows of this process only; the finished run keeps
the rows beside its files as :data:`ROWS_FILE` and its ``config.yaml`` names that file
(:func:`with_rows_file`), so a saved run re-runs and resumes anywhere. With ``out`` the rows are
written there first (:func:`keep_rows`) and the run reads that file: a resume, in this process or
from the command line, reads the same rows.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ragray.errors import InputError

__all__ = ["HELD_PREFIX", "ROWS_FILE", "held_rows", "is_held", "keep_rows", "rows_jsonl", "rows_of", "with_rows_file"]

HELD_PREFIX = "rows:"
#: the rows a run was given in memory, kept in its folder (a records file: one JSON object a line)
ROWS_FILE = "input_rows.jsonl"

_LOCK = threading.Lock()
_HELD: dict[str, tuple[Mapping[str, Any], ...]] = {}
_NEXT = itertools.count(1)


def is_held(path: str) -> bool:
    return str(path).startswith(HELD_PREFIX)


@contextmanager
def held_rows(rows: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    """``rows`` readable as ``data.path`` (the yielded ``rows:N``) until the block ends."""
    with _LOCK:
        token = f"{HELD_PREFIX}{next(_NEXT)}"
        _HELD[token] = tuple(rows)
    try:
        yield token
    finally:
        with _LOCK:
            _HELD.pop(token, None)


def rows_of(path: str) -> tuple[Mapping[str, Any], ...]:
    with _LOCK:
        rows = _HELD.get(str(path))
    if rows is None:
        raise InputError(f"data.path: {path} named rows given in memory to a run of another process or one "
                         "that has ended; give the rows again, or save them to a file and name that")
    return rows


def rows_jsonl(rows: Sequence[Mapping[str, Any]]) -> bytes:
    """``rows`` as a records file (one JSON object a line)."""
    return "".join(json.dumps(dict(r), ensure_ascii=False, default=str) + "\n" for r in rows).encode("utf-8")


def keep_rows(out: Path, rows: Sequence[Mapping[str, Any]], *, resume: bool) -> Path:
    """``rows`` written to ``out``/:data:`ROWS_FILE` (the file the run's ``data.path`` names); its
    path. A folder that already holds a run keeps its rows: resuming it with other rows is an error
    that says how to go on; starting over it is refused by the run itself (it holds a run)."""
    from ragray.store.rundir import RunDir

    run = RunDir(out)
    target, data = run.path / ROWS_FILE, rows_jsonl(rows)
    kept = target.read_bytes() if target.is_file() else None
    if kept is not None and kept != data:
        if resume:
            n_kept = kept.count(b"\n")
            raise InputError(f"resume: these {len(rows)} rows differ from the {n_kept} rows {out} was "
                             f"started with (kept in {target}); give the same rows, or data={str(target)!r} to "
                             "continue with those, or a new out for these")
        if run.progress_log().path.exists():
            return target  # the run refuses the folder: it holds a run
    run.put(ROWS_FILE, data)
    return target


def with_rows_file(files: dict[str, bytes], token: str, rows: Sequence[Mapping[str, Any]]) -> dict[str, bytes]:
    """An in-memory run's files with its rows kept as :data:`ROWS_FILE` and its ``config.yaml``
    naming that file (a relative path: beside the config, wherever the run is saved)."""
    out = {**files, ROWS_FILE: rows_jsonl(rows)}
    config = files.get("config.yaml")
    if config is not None:
        out["config.yaml"] = config.replace(f"path: {token}\n".encode(), f"path: {ROWS_FILE}\n".encode())
    return out
