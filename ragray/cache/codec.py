"""Passages and hits as JSON, exact enough that a cached result equals a recomputed one.

A passage is stored as ``[id, text, title, doc_id, position, meta]`` with ``meta`` in the tagged
form of :func:`~ragray.cache.fingerprint.encode_value` (tuples stay tuples); a hit as
``[rank, score, passage]``. Scores are Python floats, whose JSON text (``repr``) reads back to
the identical double, so cached scores are bit-for-bit the computed ones.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ragray.cache.fingerprint import decode_value, encode_value, passage_record
from ragray.types import Hit, Passage, frozen_meta

__all__ = ["decode_hits", "decode_passage", "dumps", "encode_hits", "encode_passage", "loads"]


def dumps(data: Any) -> bytes:
    """Compact UTF-8 JSON (lone surrogates from odd source files survive the round trip)."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass")


def loads(raw: bytes) -> Any:
    return json.loads(raw.decode("utf-8", "surrogatepass"))


def encode_passage(p: Passage) -> list[Any]:
    """JSON-ready form; raises :class:`~ragray.cache.fingerprint.Uncacheable` for odd meta."""
    record = passage_record(p)
    record[-1] = encode_value(record[-1])
    return record


def decode_passage(data: Sequence[Any]) -> Passage:
    pid, text, title, doc_id, position, meta = data
    if not all(isinstance(v, str) for v in (pid, text, title, doc_id)) or type(position) is not int:
        raise ValueError("malformed passage record")
    decoded = decode_value(meta)
    if not isinstance(decoded, dict):
        raise ValueError("passage meta is not a mapping")
    return Passage(pid, text, title, doc_id, position, frozen_meta(decoded))


def encode_hits(hits: Sequence[Hit]) -> list[Any]:
    return [[int(h.rank), float(h.score), encode_passage(h.passage)] for h in hits]


def decode_hits(data: Sequence[Any]) -> tuple[Hit, ...]:
    hits = []
    for rank, score, passage in data:
        if type(rank) is not int or not isinstance(score, (int, float)):
            raise ValueError("malformed hit record")
        hits.append(Hit(decode_passage(passage), rank, float(score)))
    return tuple(hits)
