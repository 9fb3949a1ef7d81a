"""The persistent call cache: a model call already paid for is never paid again.

``<cache root>/calls.sqlite`` (``cache.dir`` moves it) maps a call's key to its result:

- a generation: ``sha256`` of the generator's :meth:`~ragray.generation.base.Generator.identity`
  (backend, model, the files' fingerprint or the server's URL, precision), the sampling settings
  (temperature, max_tokens, seed) and the chat prompt → text and token counts;
- a score: the same identity and prompt plus the answer → its log-probability.

Only greedy generations are cached (``temperature: 0``): a sampled answer is not a function of its
key (backends seed by a prompt's place in its batch). Failed calls and NaN scores are never stored,
so a retry asks again. Runs, ``interpret``, sweep trials, Serve and resumes share the file; SQLite
in WAL mode with a busy timeout keeps concurrent processes (Ray actors, parallel trials) safe, and
one connection per thread keeps threads safe. A prompt that several questions in flight ask for at
the same moment is sent once: the others wait for that answer (within one process; two processes
asking at the same instant may both send it, and the file keeps one).

:class:`CachedGenerator` wraps a generator: it looks every prompt up, sends only the misses to the
backend in one call (in order), stores what came back, and counts hits and misses
(:class:`CallCacheStats`, reported in ``summary.json``'s ``cache``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragray.config import GenerationConfig
from ragray.generation.base import ChatPrompt, Generation, Generator, GeneratorProxy
from ragray.paths import cache_root

__all__ = ["CALLS_FILE", "CachedGenerator", "CallCacheStats", "CallStore", "call_key", "calls_path"]

log = logging.getLogger(__name__)

CALLS_FILE = "calls.sqlite"
#: bump when what a key covers or how a value is stored changes
_FORMAT = 1


def calls_path(cache_dir: str | Path | None) -> Path:
    """The cache file under ``cache.dir`` (default: :func:`ragray.paths.cache_root`)."""
    return Path(cache_dir).expanduser() / CALLS_FILE if cache_dir else cache_root() / CALLS_FILE


def call_key(kind: str, identity: dict[str, Any], sampling: dict[str, Any], prompt: ChatPrompt,
             answer: str | None = None) -> str:
    """The cache key of one call: ``kind`` (generate | score | probe), everything that decides its
    result, and the prompt (and the scored answer)."""
    payload = {"format": _FORMAT, "kind": kind, "identity": identity, "sampling": sampling,
               "prompt": [[m.role, m.content] for m in prompt], "answer": answer}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class CallStore:
    """Key → JSON value in one SQLite file, safe for many threads and processes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._local = threading.local()

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=60.0)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            self._local.db = db
        return db

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """The stored values of those ``keys`` that are present (an unreadable one counts as absent)."""
        out: dict[str, Any] = {}
        wanted = list(dict.fromkeys(keys))
        db = self._db()
        for at in range(0, len(wanted), 500):
            chunk = wanted[at : at + 500]
            marks = ",".join("?" * len(chunk))
            for key, value in db.execute(f"SELECT key, value FROM calls WHERE key IN ({marks})", chunk):
                try:
                    out[key] = json.loads(value)
                except ValueError:
                    log.warning("call cache %s: unreadable entry %s ignored", self.path, key[:12])
        return out

    def put_many(self, items: dict[str, Any]) -> None:
        """Store ``items`` (a key already present keeps its value: the key fixes the content)."""
        if not items:
            return
        db = self._db()
        with db:
            db.executemany("INSERT OR IGNORE INTO calls (key, value) VALUES (?, ?)",
                           [(k, json.dumps(v)) for k, v in items.items()])

    def __len__(self) -> int:
        return int(self._db().execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None


@dataclass
class CallCacheStats:
    """Calls this process answered from the cache (``calls_hit``), sent to the backend and stored
    (``calls_miss``), and sent without the cache (``calls_uncached``: sampled generations)."""

    calls_hit: int = 0
    calls_miss: int = 0
    calls_uncached: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class _Pending:
    """A key one thread is asking the backend for; other threads that want it wait here."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None

    def settle(self, value: Any, error: BaseException | None) -> None:
        self._value, self._error = value, error
        self._event.set()

    def wait(self) -> Any:
        self._event.wait()
        if self._error is not None:
            raise self._error
        return self._value


class CachedGenerator(GeneratorProxy):
    """``inner`` behind the call cache ``store`` (see the module docstring); closing it closes ``inner``."""

    def __init__(self, inner: Generator, store: CallStore, config: GenerationConfig) -> None:
        super().__init__(inner)
        self.store = store
        self.sampling = {"temperature": config.temperature, "max_tokens": config.max_tokens, "seed": config.seed}
        self.greedy = config.temperature == 0
        self.stats = CallCacheStats()
        self._lock = threading.Lock()
        self._pending: dict[str, _Pending] = {}  # keys some thread is asking the backend for now
        self._identity: dict[str, Any] | None = None

    def identity(self) -> dict[str, Any]:
        if self._identity is None:
            self._identity = self.inner.identity()
        return self._identity

    def _count(self, **counts: int) -> None:
        with self._lock:
            for name, n in counts.items():
                setattr(self.stats, name, getattr(self.stats, name) + n)

    def _fetch(self, keys: list[str], send: Callable[[list[int]], list[Any]], keep: Callable[[Any], bool],
               load: Callable[[Any], Any]) -> list[Any]:
        """The value of every key: from the file (``load``), from another thread already asking the
        backend for it, or from ``send(indices)`` — one backend call for the keys nobody has, whose
        values are stored where ``keep(value)``. A key asked twice at once is sent once."""
        mine: dict[str, int] = {}
        theirs: dict[str, _Pending] = {}
        with self._lock:  # claim the keys first: another thread either holds a claim or has stored
            for i, key in enumerate(keys):
                if key in mine or key in theirs:
                    continue
                if key in self._pending:
                    theirs[key] = self._pending[key]
                else:
                    mine[key] = i
                    self._pending[key] = _Pending()
        values: dict[str, Any] = {}
        try:
            known = self.store.get_many(list(mine))
            values.update({k: load(v) for k, v in known.items()})
            todo = {k: i for k, i in mine.items() if k not in known}
            fresh = dict(zip(todo, send(list(todo.values())))) if todo else {}
        except BaseException as exc:
            with self._lock:
                for key in mine:
                    self._pending.pop(key).settle(None, exc)
            raise
        self.store.put_many({k: asdict(v) if isinstance(v, Generation) else v for k, v in fresh.items() if keep(v)})
        values.update(fresh)
        with self._lock:
            for key in mine:
                self._pending.pop(key).settle(values[key], None)
        values.update({k: p.wait() for k, p in theirs.items()})
        self._count(calls_hit=len(keys) - len(fresh), calls_miss=len(fresh))
        return [values[k] for k in keys]

    def generate(self, prompts: Sequence[ChatPrompt]) -> list[Generation]:
        if not self.greedy:
            self._count(calls_uncached=len(prompts))
            return self.inner.generate(prompts)
        keys = [call_key("generate", self.identity(), self.sampling, p) for p in prompts]
        # a hit took no time: its latency is 0 (the calls table then shows what this run waited for)
        return self._fetch(keys, lambda idx: self.inner.generate([prompts[i] for i in idx]),
                           lambda g: g.ok, lambda raw: Generation(**{**raw, "latency_s": 0.0}))

    def score(self, prompts: Sequence[ChatPrompt], answers: Sequence[str]) -> list[float]:
        if len(prompts) != len(answers):
            raise ValueError(f"score: {len(prompts)} prompts but {len(answers)} answers")
        keys = [call_key("score", self.identity(), {}, p, a) for p, a in zip(prompts, answers)]
        return self._fetch(keys, lambda idx: self.inner.score([prompts[i] for i in idx], [answers[i] for i in idx]),
                           math.isfinite, float)

    def score_divergence(self, reference: ChatPrompt, prompts: Sequence[ChatPrompt], answer: str
                         ) -> list[tuple[float, float]]:
        ref = {"reference": [list(m) for m in reference]}
        keys = [call_key("divergence", self.identity(), ref, p, answer) for p in prompts]
        return self._fetch(keys, lambda idx: self.inner.score_divergence(reference, [prompts[i] for i in idx], answer),
                           lambda v: all(math.isfinite(x) for x in v), lambda raw: (float(raw[0]), float(raw[1])))

    def scoring_problem(self) -> str | None:
        """The backend's answer, asked once per identity and remembered (an endpoint's probe is a
        paid call too); only "it can score" is remembered, a problem is asked again next time."""
        key = call_key("probe", self.identity(), {}, ())
        if self.store.get_many([key]):
            return None
        problem = self.inner.scoring_problem()
        if problem is None:
            self.store.put_many({key: True})
        return problem

    def close(self) -> None:
        self.inner.close()
        self.store.close()
