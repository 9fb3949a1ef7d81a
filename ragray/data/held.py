"""Records held in memory for the run that reads them: the Python API's rows without a file.

``ragray.run(df)`` hands its rows to the pipeline as ``data.path: rows:<token>`` while the run
lasts (:func:`held_rows`); :func:`~ragray.data.loading.load_dataset` reads them from here as it
reads a records file. The token names rows of this process only: a config that holds one says the
rows were given in memory (to rerun it elsewhere, save the rows to a file).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ragray.errors import InputError

__all__ = ["HELD_PREFIX", "held_rows", "is_held", "rows_of"]

HELD_PREFIX = "rows:"

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
