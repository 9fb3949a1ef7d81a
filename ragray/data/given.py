"""Rows a caller gives in memory (the Python API's), kept beside the run that reads them.

``ragray.run(df)`` hands its rows to the pipeline as a data set object
(:func:`~ragray.data.records.rows_dataset`, the ``dataset`` argument of the commands), never
through a file or a name. A finished run keeps the rows among its files as :data:`ROWS_FILE`, and
its ``config.yaml`` names that file (a path beside the config, wherever the run is saved), so a
saved run re-runs and resumes anywhere. With ``out`` the rows are written there first
(:func:`keep_rows`) and the run reads that file: a resume, in this process or from the command
line, reads the same rows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragray.errors import InputError

__all__ = ["ROWS_FILE", "keep_rows", "rows_jsonl"]

#: the rows a run was given in memory, kept in its folder (a records file: one JSON object a line)
ROWS_FILE = "input_rows.jsonl"


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
