"""Rows of a Hugging Face hub dataset, streamed through ``datasets`` (the thin network part).

``datasets`` yields a sequence of structs as a dict of lists (``{"title": [...], "sentences":
[...]}``); :func:`struct_list` turns either shape into a list of dicts, so parsers accept rows as
the hub gives them and as hand-written fixtures spell them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ragray._imports import require
from ragray.data.records import RowError

__all__ = ["stream_rows", "struct_list"]


def struct_list(value: Any) -> list[dict[str, Any]]:
    """A ``datasets`` sequence of structs (a dict of lists) or a list of dicts → list of dicts."""
    if isinstance(value, Mapping):
        keys = list(value)
        try:
            return [dict(zip(keys, cells, strict=True))
                    for cells in zip(*(value[k] for k in keys), strict=True)]
        except (TypeError, ValueError):
            raise RowError(f"the columns {keys} are not lists of one length") from None
    if isinstance(value, list) and all(isinstance(v, Mapping) for v in value):
        return [dict(v) for v in value]
    raise RowError(f"expected a sequence of structs, got {type(value).__name__}")


def stream_rows(repo: str, split: str, *, config: str | None = None,
                feature: str) -> Iterable[Mapping[str, Any]]:
    """Stream ``split`` of hub dataset ``repo`` (``config`` names its subset). Needs the network
    and ``pip install 'ragray[data]'``; ``feature`` names what needs it in that error."""
    datasets = require("datasets", extra="data", feature=feature)
    return datasets.load_dataset(repo, config, split=split, streaming=True)
