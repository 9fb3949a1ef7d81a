"""The on-disk cache: ``<root>/<kind>/<key>``, safe with many concurrent readers and writers.

The trials of a sweep run in separate processes, possibly at the same moment, and share one
folder. Every entry is therefore written under a private temporary name and renamed into place
(atomic within one file system): a reader sees a whole entry or none, and two writers of one key
both succeed — the key fixes the content, so whichever rename lands last is as good as the other.

Entries are plain files, never pickles:

- *blobs* (chunk sets, retrieval results): one JSON header line ``{"format", "key", "sha256",
  "size"}`` then the payload bytes;
- *folders* (indexes): the index's own files (``.npy``, ``.npz``, JSON, FAISS) plus a
  ``manifest.json`` holding the format, the key and the sha256 of every file.

A missing, truncated, edited or foreign entry fails those checks (or the loader), is logged as
a warning, removed and recomputed. Temporary names start with ``.`` and carry the writer's pid;
ones left by a killed process are harmless and may be deleted at any time.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ragray.cache.fingerprint import CACHE_FORMAT
from ragray.paths import cache_root

__all__ = ["UNREADABLE", "CacheStore", "default_cache_root"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: what a loader may raise on a damaged or incompatible entry (anything else is a bug and raised)
UNREADABLE: tuple[type[BaseException], ...] = (
    OSError, ValueError, KeyError, IndexError, TypeError, RuntimeError, EOFError
)
_MANIFEST = "manifest.json"


def default_cache_root() -> Path:
    """:func:`ragray.paths.cache_root` (embeddings live in its ``embeddings/``)."""
    return cache_root()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _tmp_prefix(name: str) -> str:
    return f".{name}.{os.getpid()}."


class CacheStore:
    """Blobs and folders under ``root``, addressed by ``kind`` (a relative folder) and ``key``."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root).expanduser() if root else default_cache_root()

    def path(self, kind: str, key: str) -> Path:
        return self.root / kind / key

    # --- blobs ----------------------------------------------------------------------------

    def read_blob(self, kind: str, key: str) -> bytes | None:
        """The payload stored under ``key``, or ``None`` (absent, or damaged: then removed)."""
        path = self.path(kind, key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("cannot read cache entry %s (%s); recomputing", path, exc)
            return None
        head, sep, payload = raw.partition(b"\n")
        try:
            header = json.loads(head) if sep else {}
            ok = (
                header.get("format") == CACHE_FORMAT
                and header.get("key") == key
                and header.get("size") == len(payload)
                and header.get("sha256") == hashlib.sha256(payload).hexdigest()
            )
        except (ValueError, AttributeError):
            ok = False
        if not ok:
            self._discard(path, "its header or checksum does not match")
            return None
        return payload

    def write_blob(self, kind: str, key: str, payload: bytes) -> bool:
        """Store ``payload`` atomically; a failed write (read-only disk ...) is logged, not fatal."""
        path = self.path(kind, key)
        header = {"format": CACHE_FORMAT, "key": key, "size": len(payload),
                  "sha256": hashlib.sha256(payload).hexdigest()}
        tmp: str | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=_tmp_prefix(key), dir=path.parent)
            with os.fdopen(fd, "wb") as fh:
                fh.write(json.dumps(header).encode("ascii") + b"\n" + payload)
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("could not write cache entry %s: %s", path, exc)
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
            return False
        return True

    # --- folders --------------------------------------------------------------------------

    def load_folder(self, kind: str, key: str, loader: Callable[[Path], T]) -> T | None:
        """``loader(folder)`` on a verified folder entry, or ``None`` (absent or damaged)."""
        path = self.path(kind, key)
        if not path.is_dir():
            return None
        problem = self._check_manifest(path, key)
        if problem is None:
            try:
                return loader(path)
            except UNREADABLE as exc:
                problem = f"loading it failed: {type(exc).__name__}: {exc}"
        self._discard(path, problem)
        return None

    def save_folder(self, kind: str, key: str, writer: Callable[[Path], None]) -> bool:
        """Run ``writer(folder)`` on a private folder, add the manifest, rename it into place.

        When another process renamed the same key first, its entry is kept and ours dropped.
        """
        path = self.path(kind, key)
        tmp: Path | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=_tmp_prefix(key), dir=path.parent))
            writer(tmp)
            files = {
                f.relative_to(tmp).as_posix(): _sha256(f) for f in sorted(tmp.rglob("*")) if f.is_file()
            }
            manifest = {"format": CACHE_FORMAT, "key": key, "files": files}
            (tmp / _MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
            try:
                os.rename(tmp, path)
            except OSError:
                if not path.is_dir():
                    raise
                log.debug("cache entry %s was written by another process first", path)
                shutil.rmtree(tmp, ignore_errors=True)
        except OSError as exc:
            log.warning("could not write cache entry %s: %s", path, exc)
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            return False
        return True

    def _check_manifest(self, path: Path, key: str) -> str | None:
        """``None`` when the folder matches its manifest, else what is wrong."""
        try:
            manifest = json.loads((path / _MANIFEST).read_text(encoding="utf-8"))
            if manifest.get("format") != CACHE_FORMAT or manifest.get("key") != key:
                return "its manifest names another format or key"
            for rel, digest in manifest["files"].items():
                if _sha256(path / rel) != digest:
                    return f"{rel} does not match its checksum"
        except UNREADABLE as exc:
            return f"its manifest is unreadable ({type(exc).__name__}: {exc})"
        return None

    # --- removal --------------------------------------------------------------------------

    def discard(self, kind: str, key: str, why: str) -> None:
        """Remove an entry whose content turned out unusable (with a warning saying ``why``)."""
        self._discard(self.path(kind, key), why)

    def _discard(self, path: Path, why: str) -> None:
        """Warn, then move the entry aside (one rename, so a concurrent writer can replace it) and delete it."""
        log.warning("ignoring cache entry %s: %s; it is recomputed", path, why)
        trash = path.with_name(f".trash{_tmp_prefix(path.name)}{os.urandom(4).hex()}")
        try:
            os.rename(path, trash)
        except OSError:
            return  # already gone or replaced by another process
        if trash.is_dir():
            shutil.rmtree(trash, ignore_errors=True)
        else:
            trash.unlink(missing_ok=True)
