"""A check every command's test runs on its summary: the typed summary is the file."""

from __future__ import annotations

import json
from pathlib import Path

from ragray.rows.summaries import Summary


def check_summary_file(summary: Summary, path: Path, key: str | None = None) -> dict:
    """``path`` (``summary.json``, or ``key`` of a report) holds ``summary``'s JSON form with its keys in
    field order, and reads back as the same typed summary; returns the file's mapping."""
    data = json.loads(path.read_text())
    data = data[key] if key else data
    assert data == json.loads(json.dumps(summary.as_dict())), path
    assert list(data) == [n for n in type(summary).names() if n in data], "keys out of field order"
    assert type(summary).from_dict(data) == summary
    return data
