"""Small datasets for the cache tests and a spy that counts index builds, searches and model calls.

(Test modules cannot import this file under ``--import-mode=importlib``: use the fixtures.)
"""

from collections import Counter

import pytest

from ragray.config import load_config
from ragray.types import Dataset, Passage, Question

CORPUS = (
    Passage("harbour", "The harbour master logs every ferry arrival at Port Wren.", title="Harbour",
            meta={"source": "records", "page_starts": (0, 20)}),
    Passage("garden", "The botanical garden grows lavender near the old mill.", meta={"source": "guide"}),
    Passage("mill", "The old mill grinds barley; the ferry brings barley from Port Wren.",
            meta={"source": "guide"}),
    Passage("reef", "The Great Barrier Reef is the largest coral reef system, off Australia."),
    Passage("everest", "Mount Everest is Earth's highest mountain above sea level."),
    Passage("insulin", "A hormone made by the pancreas that lowers blood glucose.", title="Insulin"),
    Passage("photo", "Photosynthesis converts light energy into chemical energy in green plants."),
)
BY_ID = {p.id: p for p in CORPUS}
QUESTIONS = (
    Question("q1", "Who logs ferry arrivals at Port Wren?", passages=tuple(BY_ID[i] for i in ("harbour", "garden", "mill"))),
    Question("q2", "What grows near the old mill?", passages=tuple(BY_ID[i] for i in ("garden", "mill", "reef"))),
    Question("q3", "Which hormone controls blood sugar?", passages=tuple(BY_ID[i] for i in ("insulin", "photo"))),
    Question("q4", "What is the tallest mountain in the world?", passages=tuple(BY_ID[i] for i in ("everest", "reef", "photo"))),
)


@pytest.fixture(scope="session")
def dataset():
    """Seven passages as a corpus, and four questions each with its own passages."""
    return Dataset("cache-test", QUESTIONS, corpus=CORPUS)


@pytest.fixture(scope="session")
def documents():
    """Three ~60-word documents (``documents=True``: ``auto`` chunking splits them by words)."""
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu"]
    docs = tuple(
        Passage(f"doc{d}", " ".join(f"{words[(i * (d + 2)) % len(words)]}{i % 7}" for i in range(60)),
                title=f"Doc {d}")
        for d in range(3)
    )
    questions = (Question("d1", "alpha0 beta1 gamma2"), Question("d2", "kappa3 mu5"))
    return Dataset("docs", questions, corpus=docs, documents=True)


@pytest.fixture
def make_config(tmp_path):
    """``make_config(*sets, cache=True)``: a config caching under this test's ``tmp_path``."""

    def make(*sets, cache=True):
        base = [f"cache.dir={tmp_path / 'cache'}", "retrieval.dense.device=cpu", "rerank.device=cpu",
                "retrieval.top_k=3", "rerank.candidates=5", "retrieval.hybrid.dense_k=5",
                "retrieval.hybrid.sparse_k=5"]
        if not cache:
            base += ["cache.chunksets=false", "cache.indexes=false", "cache.retrievals=false"]
        return load_config(None, base + list(sets))

    return make


class Spy:
    """Counts calls of patched methods (``spy.calls["BM25Retriever.index"]``) or makes them fail."""

    def __init__(self, monkeypatch):
        self.monkeypatch, self.calls = monkeypatch, Counter()

    def count(self, cls, name):
        original = getattr(cls, name)
        label = f"{cls.__name__}.{name}"

        def wrapper(*args, **kwargs):
            self.calls[label] += 1
            return original(*args, **kwargs)

        self.monkeypatch.setattr(cls, name, wrapper)

    def forbid(self, cls, name):
        label = f"{cls.__name__}.{name}"

        def fail(*args, **kwargs):
            raise AssertionError(f"{label} was called")

        self.monkeypatch.setattr(cls, name, fail)


@pytest.fixture
def spy(monkeypatch):
    return Spy(monkeypatch)


def snapshot(results):
    """Everything of a run's results, exactly (scores by repr, meta by value and type)."""
    return [
        (r.question.id, [(h.rank, repr(h.score), h.passage, {k: (v, type(v)) for k, v in h.passage.meta.items()})
                         for h in r.hits])
        for r in results
    ]


@pytest.fixture(scope="session")
def snap():
    return snapshot
