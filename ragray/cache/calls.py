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
one connection per store, shared under a lock, keeps threads safe. A prompt that several questions in flight ask for at
the same moment is sent once: the others wait for that answer (within one process; two processes
asking at the same instant may both send it, and the file keeps one).

:class:`CachedGenerator` wraps a generator: it looks every prompt up, sends only the misses to the
backend in one call (in order), stores what came back, and counts hits and misses
(:class:`CallCacheStats`, reported in ``summary.json``'s ``cache``).
"""

from __future__ import annotations

import hashlib
import json
import re
import logging
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragray.config import GenerationConfig
from ragray.generation.base import ChatPrompt, Generation, Generator, GeneratorProxy
from ragray.cache.filesystems import sqlite_journal_mode
from ragray.paths import cache_root
from ragray.progress import calls_done

__all__ = ["CALLS_FILE", "CachedGenerator", "CallCacheStats", "CallStore", "call_key", "calls_path"]

log = logging.getLogger(__name__)

CALLS_FILE = "calls.sqlite"
#: bump when what a key covers or how a value is stored changes
_FORMAT = 1


#: chat-template markup as user text may hold it (ChatML/Llama 3 ``<|...|>``, Llama 2 ``[INST]``
#: and ``<s>``, Gemma's turns): such prompts' keys changed when it became plain text
_MARKUP = re.compile(r"<\|[^\s<>|]{1,40}\|>|</?s>|\[/?INST\]|<(?:start|end)_of_turn>")


def calls_path(cache_dir: str | Path | None) -> Path:
    """The cache file under ``cache.dir`` (default: :func:`ragray.paths.cache_root`)."""
    return Path(cache_dir).expanduser() / CALLS_FILE if cache_dir else cache_root() / CALLS_FILE


def call_key(kind: str, identity: dict[str, Any], sampling: dict[str, Any], prompt: ChatPrompt,
             answer: str | None = None) -> str:
    """The cache key of one call: ``kind`` (generate | score | probe), everything that decides its
    result, and the prompt (and the scored answer)."""
    payload = {"format": _FORMAT, "kind": kind, "identity": identity, "sampling": sampling,
               "prompt": [[m.role, m.content] for m in prompt], "answer": answer}
    if any(_MARKUP.search(t) for t in [*(m.content for m in prompt), answer or ""]):
        # since issue 64 chat markup in user text is tokenized as plain text: a result cached
        # before then (the text read as markup) is another prompt's, and must not answer
        payload["user_text"] = "plain"
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


#: SQLite's words for a file that is not (or no longer) a sound database
_DAMAGED = ("malformed", "not a database", "file is encrypted", "disk image", "database corrupt")


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except OSError:
        return None


def _damaged(exc: sqlite3.Error) -> bool:
    return isinstance(exc, sqlite3.DatabaseError) and any(w in str(exc).lower() for w in _DAMAGED)


#: one lock per cache file in this process: every store of a file opens, uses and sets it aside
#: under it (SQLite names a file's -wal/-shm by path: a connection still open on a file that was
#: moved away, or opening while it is moved, would take over, truncate or delete the new file's)
_FILE_LOCKS: dict[str, threading.RLock] = {}
_FILE_LOCKS_GUARD = threading.Lock()


def _file_lock(path: Path) -> threading.RLock:
    key = str(path.expanduser().absolute())
    with _FILE_LOCKS_GUARD:
        return _FILE_LOCKS.setdefault(key, threading.RLock())


class CallStore:
    """Key → JSON value in one SQLite file, safe for many threads and processes.

    One connection per store, shared by its threads under the file's lock (a read or write takes
    milliseconds next to a model call); processes share the file through SQLite's WAL and busy
    timeout. The cache never stops a run. A file SQLite finds damaged (malformed, truncated, not
    SQLite) is set aside as ``calls.sqlite.corrupt-<UTC time>`` (with its ``-wal``/``-shm``) and a
    new one is started; a file that cannot be opened or written (read-only directory, a full disk)
    leaves the run uncached; a database locked by another process past ``timeout`` seconds turns
    that one read into misses or skips that one write. Each says so once, with the file and what
    was done; the answers of a failed write are still returned, so only their caching is lost."""

    def __init__(self, path: str | Path, timeout: float = 60.0, label: str = "call cache") -> None:
        self.path = Path(path)
        self.timeout = timeout
        self.label = label
        self._lock = _file_lock(self.path)
        self._conn: sqlite3.Connection | None = None
        self._inode: int | None = None  # the file the connection was opened on
        self.disabled: str | None = None  # why the run goes on uncached
        self.set_aside: Path | None = None
        self._warned: set[str] = set()
        #: WAL on a local disk; the rollback journal where other hosts share the file (NFS, ...)
        self.journal_mode = sqlite_journal_mode(self.path)

    def _warn(self, what: str, message: str) -> None:
        if what in self._warned:
            return
        self._warned.add(what)
        log.warning("%s %s: %s", self.label, self.path, message)

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=self.timeout, check_same_thread=False)
        try:  # WAL needs every writer on one host: a shared cache.dir on NFS uses the rollback journal
            db.execute(f"PRAGMA journal_mode={self.journal_mode}")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            db.execute("SELECT key, value FROM calls LIMIT 1").fetchall()
        except BaseException:
            db.close()
            raise
        return db

    def _db(self) -> sqlite3.Connection | None:
        """The store's connection (the caller holds the lock), None while the store is disabled."""
        if self.disabled is not None:
            return None
        if self._conn is not None and self._inode != _inode(self.path):
            self._drop()  # another store or process set the file aside: use the new one
        if self._conn is None:
            self._inode = _inode(self.path)
            try:
                self._conn = self._connect()
            except (sqlite3.Error, OSError) as exc:
                return self._failed(exc, "opening it")
            self._inode = _inode(self.path)
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _failed(self, exc: BaseException, doing: str) -> None:
        """Deal with an error of ``doing``: set a damaged file aside (and reconnect on the next
        use), go uncached when the file cannot be used, pass over a lock."""
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc).lower():
            self._warn("locked", f"locked by another process for over {self.timeout:g} s while {doing}; "
                                 "those calls go uncached")
            return None
        if isinstance(exc, sqlite3.Error) and _damaged(exc):
            self._set_aside(exc)
            return None
        self.disabled = f"{type(exc).__name__}: {exc}"
        self._warn("disabled", f"cannot be used ({self.disabled}) while {doing}; the run continues uncached")
        return None

    def _set_aside(self, exc: BaseException) -> None:
        """Move the damaged file aside, unless the file at the path is no longer the one this store
        opened (another store or process moved it already): then only reconnect."""
        self._drop()
        now = _inode(self.path)
        if now is None or now != self._inode:
            return
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        n = 1
        while target.exists():  # set aside twice within a second: keep both
            target, n = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{n}"), n + 1
        try:
            for suffix in ("-wal", "-shm", ""):
                part = Path(f"{self.path}{suffix}")
                if part.exists():
                    part.replace(Path(f"{target}{suffix}"))
        except OSError as err:
            self.disabled = f"damaged ({exc}) and could not be moved ({err})"
            self._warned.add("damaged")
            log.warning("%s %s: %s; the run continues uncached", self.label, self.path, self.disabled)
            return
        self.set_aside = target
        self._warned.add("damaged")
        log.warning("%s %s: damaged (%s); moved to %s and started anew", self.label, self.path, exc, target.name)

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """The stored values of those ``keys`` that are present (an unreadable one counts as absent;
        so does every key while the file cannot be read)."""
        out: dict[str, Any] = {}
        wanted = list(dict.fromkeys(keys))
        with self._lock:
            for _ in range(2):  # a second try on the new file after a damaged one was set aside
                db = self._db()
                if db is None:
                    return out
                try:
                    for at in range(0, len(wanted), 500):
                        chunk = wanted[at : at + 500]
                        marks = ",".join("?" * len(chunk))
                        for key, value in db.execute(f"SELECT key, value FROM calls WHERE key IN ({marks})", chunk):
                            try:
                                out[key] = json.loads(value)
                            except ValueError:
                                log.warning("%s %s: unreadable entry %s ignored", self.label, self.path, key[:12])
                    return out
                except sqlite3.Error as exc:
                    out.clear()
                    self._failed(exc, "reading")
                    if not _damaged(exc):
                        return out
        return out

    def put_many(self, items: dict[str, Any]) -> None:
        """Store ``items`` (a key already present keeps its value: the key fixes the content). A
        write that fails is passed over: those calls are simply not cached."""
        if not items:
            return
        rows = [(k, json.dumps(v)) for k, v in items.items()]
        with self._lock:
            for _ in range(2):
                db = self._db()
                if db is None:
                    return
                try:
                    with db:
                        db.executemany("INSERT OR IGNORE INTO calls (key, value) VALUES (?, ?)", rows)
                    return
                except sqlite3.Error as exc:
                    self._failed(exc, "writing")
                    if not _damaged(exc):
                        return

    def __len__(self) -> int:
        with self._lock:
            db = self._db()
            if db is None:
                return 0
            try:
                return int(db.execute("SELECT COUNT(*) FROM calls").fetchone()[0])
            except sqlite3.Error as exc:
                self._failed(exc, "counting")
                return 0

    def close(self) -> None:
        with self._lock:
            self._drop()


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
        if self.reports_calls:  # the backend reported its own prompts; the ones answered here, now
            calls_done(len(keys) - len(fresh))
        return [values[k] for k in keys]

    def generate(self, prompts: Sequence[ChatPrompt]) -> list[Generation]:
        if not self.greedy:
            self._count(calls_uncached=len(prompts))
            return self.inner.generate(prompts)
        keys = [call_key("generate", self.identity(), self.sampling, p) for p in prompts]
        # a hit took no time: its latency is 0 (the calls table then shows what this run waited for)
        return self._fetch(keys, lambda idx: self.inner.generate([prompts[i] for i in idx]),
                           lambda g: g.ok, lambda raw: Generation(**{**raw, "latency_s": 0.0}))

    def logprobs(self, prompts: Sequence[ChatPrompt], answers: Sequence[str]) -> list[float]:
        if len(prompts) != len(answers):
            raise ValueError(f"score: {len(prompts)} prompts but {len(answers)} answers")
        keys = [call_key("score", self.identity(), {}, p, a) for p, a in zip(prompts, answers)]
        return self._fetch(keys, lambda idx: self.inner.logprobs([prompts[i] for i in idx], [answers[i] for i in idx]),
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
