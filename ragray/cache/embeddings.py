"""Sentence embeddings of the answer metrics, each text encoded once and off the question's turn.

A question's answer metrics embed its answer, its question, its gold answers and its passages, and
used to do so three times over in three small encoder calls, inside the question's turn (while it
ran, no other question in flight could send its calls). :class:`TextEmbeddings` is a drop-in for
the encoder's ``encode`` that

- embeds each distinct text once: kept in memory for the process, and on disk in
  ``<cache root>/embeddings.sqlite`` (key: the encoder model's identity, ``normalize`` and the
  text; value: the float32 row's bytes, so a rerun reads back exactly what was computed);
- batches across questions: a question that needs new texts queues them, and whoever holds the
  encoder next encodes everything queued by then in ONE call;
- encodes without the question's turn (``offload``: the in-flight executor's wait), so the other
  questions keep sending their calls meanwhile.

Each text gets its own forward pass (``batch_size=1`` inside the one encoder call): in a padded
batch a row's last float32 bits follow its batch-mates, so batching by whoever happens to be in
flight would make the values depend on timing. Per text, a run in flight, one at a time and a
rerun from the file agree to the bit, and encoding is as fast on a CPU (89 demo texts: 1.10 s vs
1.12 s batched, 2-core Xeon). Against the per-question batches used before, embedding components
differ by at most 2.2e-7 and cosines by under 1e-6 (``tests/cache/test_embeddings.py``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ragray.cache.calls import CallStore
from ragray.paths import cache_root

__all__ = ["EMBEDDINGS_FILE", "TextEmbeddings", "embeddings_path"]

EMBEDDINGS_FILE = "embeddings.sqlite"
_FORMAT = 1
R = TypeVar("R")


def embeddings_path(cache_dir: str | Path | None) -> Path:
    """The file under ``cache.dir`` (default: :func:`ragray.paths.cache_root`)."""
    return Path(cache_dir).expanduser() / EMBEDDINGS_FILE if cache_dir else cache_root() / EMBEDDINGS_FILE


def _identity(encoder: Any) -> str:
    path = getattr(encoder, "model_path", None)
    if path is None:
        return f"{type(encoder).__module__}.{type(encoder).__qualname__}"
    from ragray.encoders import model_identity

    return model_identity(path)


class _Request:
    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.done = False


class TextEmbeddings:
    """``encoder`` (anything with ``encode(texts, normalize=..., cache=...)``) behind a per-text
    memo, an optional on-disk ``store`` and a combining lock (see the module docstring)."""

    def __init__(self, encoder: Any, store: CallStore | None = None,
                 offload: Callable[[Callable[[], Any]], Any] | None = None, memory: int = 200_000) -> None:
        self.encoder = encoder
        self.store = store
        self.offload = offload or (lambda call: call())
        self.memory = memory
        self._memo: OrderedDict[tuple[bool, str], np.ndarray] = OrderedDict()
        self._queue: list[tuple[_Request, bool]] = []
        self._queue_lock = threading.Lock()
        self._encoder_lock = threading.Lock()
        self._identity: str | None = None
        #: distinct texts encoded by the model / read from the file (what a run paid)
        self.computed = self.loaded = 0

    def _key(self, normalize: bool, text: str) -> str:
        if self._identity is None:
            self._identity = _identity(self.encoder)
        payload = json.dumps([_FORMAT, self._identity, normalize, text], separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()

    def encode(self, texts: Sequence[str], batch_size: int = 64, normalize: bool = True, *,
               cache: bool = False) -> np.ndarray:
        """A ``(len(texts), dim)`` float32 matrix, each row computed once per distinct text
        (``batch_size`` and ``cache`` are the encoder's arguments, accepted and not needed)."""
        texts = list(texts)
        if not texts:
            return np.asarray(self.encoder.encode([], normalize=normalize, cache=False), dtype=np.float32)
        rows = self._known(texts, normalize)
        if len(rows) < len(set(texts)):
            request = _Request([t for t in dict.fromkeys(texts) if t not in rows])
            with self._queue_lock:
                self._queue.append((request, normalize))
            self.offload(lambda: self._serve(request))
            rows = self._known(texts, normalize)
            missing = [t for t in dict.fromkeys(texts) if t not in rows]
            if missing:  # forgotten already (more texts than the memo holds): encoded for this call
                emb = self.encoder.encode(missing, batch_size=1, normalize=normalize, cache=False)
                rows.update(zip(missing, np.asarray(emb, dtype=np.float32)))
        return np.stack([rows[t] for t in texts]).astype(np.float32, copy=False)

    def _known(self, texts: list[str], normalize: bool) -> dict[str, np.ndarray]:
        with self._queue_lock:
            out = {}
            for t in dict.fromkeys(texts):
                row = self._memo.get((normalize, t))
                if row is not None:
                    self._memo.move_to_end((normalize, t))
                    out[t] = row
            return out

    def _serve(self, request: _Request) -> None:
        """Holding the encoder: encode every queued request (ours, and any queued meanwhile)."""
        with self._encoder_lock:
            if request.done:  # a batch taken by another question covered ours
                return
            with self._queue_lock:
                batch, self._queue = self._queue, []
            for normalize in (True, False):
                wanted = list(dict.fromkeys(t for r, n in batch if n == normalize for t in r.texts))
                if wanted:
                    self._fill(wanted, normalize)
            for r, _ in batch:
                r.done = True

    def _fill(self, texts: list[str], normalize: bool) -> None:
        with self._queue_lock:
            texts = [t for t in texts if (normalize, t) not in self._memo]
        found: dict[str, np.ndarray] = {}
        keys = {t: self._key(normalize, t) for t in texts}
        if self.store is not None and texts:
            stored = self.store.get_many(list(keys.values()))
            for t, k in keys.items():
                if k in stored:
                    try:
                        found[t] = np.frombuffer(base64.b64decode(stored[k]), dtype=np.float32)
                    except (ValueError, TypeError):
                        pass  # an unreadable entry is computed again
        todo = [t for t in texts if t not in found]
        if todo:
            # one text per forward pass: a text's row is then a function of the text alone (in a
            # padded batch its last float32 bits follow its batch-mates), as fast on a CPU
            emb = np.asarray(self.encoder.encode(todo, batch_size=1, normalize=normalize, cache=False),
                             dtype=np.float32)
            fresh = {t: np.ascontiguousarray(emb[i]) for i, t in enumerate(todo)}
            if self.store is not None:
                self.store.put_many({keys[t]: base64.b64encode(v.tobytes()).decode() for t, v in fresh.items()})
            found.update(fresh)
        with self._queue_lock:
            self.loaded += len(texts) - len(todo)
            self.computed += len(todo)
            for t, v in found.items():
                self._memo[(normalize, t)] = v
            while len(self._memo) > self.memory:
                self._memo.popitem(last=False)

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
