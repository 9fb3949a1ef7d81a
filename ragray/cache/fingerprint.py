"""Stable fingerprints (sha256) of configs, passages, library versions and ragray's own code.

A cache key must change whenever anything that affects the cached result changes, and must not
depend on anything else (dict order, process, platform). Every value is therefore first turned
into one canonical string by :func:`canonical`: JSON with sorted keys and no whitespace, in which
tuples and lists are told apart and only plain JSON types are accepted. A value that cannot be
written exactly (a numpy scalar, a set, an object) raises :class:`Uncacheable`; callers then skip
the cache instead of hashing a ``repr`` that might hide a change (numpy truncates long arrays).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from ragray.types import Passage

__all__ = [
    "CACHE_FORMAT",
    "Fingerprint",
    "Uncacheable",
    "canonical",
    "code_fingerprint",
    "decode_value",
    "encode_value",
    "library_versions",
    "passages_fingerprint",
]

#: part of every key and every stored entry; bump when the layout or meaning of entries changes
CACHE_FORMAT = "ragray-cache-v1"

_SCALARS = (type(None), bool, int, float, str)
# the ragray sources whose behaviour decides chunk sets, indexes and hits (see code_fingerprint)
_CODE_PATHS = ("types.py", "encoders.py", "data/chunking.py", "data/chunkers", "text", "retrieval",
               "rerank", "cache")


_EMPTY_DICT = '{"d":{}}'  # canonical({}), the meta of most passages


class Uncacheable(ValueError):
    """A value has no exact JSON form, so it can be neither fingerprinted nor stored."""


def encode_value(value: Any) -> Any:
    """``value`` as JSON-ready data that :func:`decode_value` turns back into an equal value.

    Scalars stay as they are; a list stays a list; a tuple becomes ``{"t": [...]}`` and a dict
    ``{"d": {...}}``, so decoding restores tuples (PDF ``page_starts``) exactly, and a user's dict
    can never be mistaken for a tuple marker.
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is list:
        return [encode_value(v) for v in value]
    if kind is tuple:
        return {"t": [encode_value(v) for v in value]}
    if kind is dict:
        out = {}
        for key, v in value.items():
            if type(key) is not str:
                raise Uncacheable(f"mapping key {key!r} is not a string")
            out[key] = encode_value(v)
        return {"d": out}
    raise Uncacheable(f"{kind.__name__} values have no exact JSON form")


def decode_value(data: Any) -> Any:
    """The inverse of :func:`encode_value` (mappings come back as plain dicts)."""
    if isinstance(data, list):
        return [decode_value(v) for v in data]
    if isinstance(data, dict):
        (tag, inner), = data.items()  # ValueError on a malformed entry
        if tag == "t":
            return tuple(decode_value(v) for v in inner)
        if tag == "d":
            return {k: decode_value(v) for k, v in inner.items()}
        raise ValueError(f"unknown tag {tag!r} in a cache entry")
    return data


def canonical(value: Any) -> str:
    """The canonical JSON text of ``value`` (see the module docstring)."""
    return json.dumps(encode_value(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class Fingerprint:
    """Incremental sha256 of labelled, length-prefixed canonical parts.

    Length prefixes make the encoding unambiguous (``("ab", "c")`` and ``("a", "bc")`` differ);
    every fingerprint starts with :data:`CACHE_FORMAT` and a ``kind`` so keys of different caches
    never collide.
    """

    def __init__(self, kind: str) -> None:
        self._h = hashlib.sha256()
        self.update("format", CACHE_FORMAT).update("kind", kind)

    def update(self, label: str, value: Any) -> Fingerprint:
        for part in (label, canonical(value)):
            raw = part.encode("utf-8", "surrogatepass")
            self._h.update(len(raw).to_bytes(8, "little") + raw)
        return self

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def passage_record(p: Passage) -> list[Any]:
    """Every field of a passage, in a fixed order (meta included: chunks copy it, filters read it)."""
    return [p.id, p.text, p.title, p.doc_id, p.position, dict(p.meta) if p.meta else {}]


def _field(value: Any) -> bytes:
    """A passage field as tagged bytes: strings directly (the fast, common case), else canonical."""
    if type(value) is str:
        text = "s" + value
    else:
        text = "j" + (_EMPTY_DICT if type(value) is dict and not value else canonical(value))
    raw = text.encode("utf-8", "surrogatepass")
    return len(raw).to_bytes(8, "little") + raw


def passages_fingerprint(passages: Iterable[Passage]) -> str:
    """sha256 of every field of every passage, in order; :class:`Uncacheable` for odd meta.

    Hashes the strings directly rather than through :class:`Fingerprint` (several times faster
    on SciFact's 5183 abstracts), since this runs on the corpus of every trial.
    """
    h = hashlib.sha256()
    h.update(f"{CACHE_FORMAT}\0passages\0".encode())
    n = 0
    for p in passages:
        for value in passage_record(p):
            h.update(_field(value))
        n += 1
    h.update(f"\0count={n}".encode())
    return h.hexdigest()


def _version(names: str | Sequence[str]) -> str | None:
    if isinstance(names, str):
        try:
            return metadata.version(names)
        except metadata.PackageNotFoundError:
            return None
    for name in names:
        found = _version(name)
        if found is not None:
            return f"{name}=={found}"  # which build (faiss-cpu or faiss-gpu) matters too
    return None


def library_versions(*distributions: str | Sequence[str]) -> dict[str, str | None]:
    """Installed versions of the libraries whose numbers end up in a result (no imports).

    A tuple lists alternative distributions of one library (``("faiss-cpu", "faiss-gpu")``),
    labelled by the first; its value names the one installed (``"faiss-cpu==1.15.1"``).
    Missing libraries map to ``None``.
    """
    return {(n if isinstance(n, str) else n[0]): _version(n) for n in distributions}


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """sha256 of the ragray sources retrieval results depend on, plus the package version.

    Part of every key, so editing a chunker, the BM25 scorer or a reranker never serves results
    of the old code (any edit of those files, even a comment, starts fresh entries: a miss is
    always safe, a stale hit never is).
    """
    import ragray

    root = Path(ragray.__file__).resolve().parent
    fp = Fingerprint("code").update("version", ragray.__version__)
    for rel in _CODE_PATHS:
        path = root / rel
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        for f in files:
            if f.is_file():
                fp.update(f.relative_to(root).as_posix(), hashlib.sha256(f.read_bytes()).hexdigest())
    return fp.hexdigest()
