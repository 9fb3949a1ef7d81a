"""RetrievalStage with the fingerprint caches: identical hits, no rebuilds, rebuilds when due."""

import logging

import pytest

from ragray.cache.store import CacheStore, default_cache_root
from ragray.encoders import SentenceEncoder, default_cache_dir
from ragray.rerank.bi_encoder import BiEncoderReranker
from ragray.retrieval import stage as stage_mod
from ragray.retrieval.bm25 import BM25Index, BM25Retriever
from ragray.retrieval.dense import DenseIndex, DenseRetriever
from ragray.retrieval.hybrid import HybridIndex, HybridRetriever
from ragray.retrieval.stage import RetrievalStage, resolved_retrieval_config
from ragray.types import Dataset, Passage, Question

RETRIEVERS = ["bm25", "dense", "hybrid"]


def run(config, dataset):
    stage = RetrievalStage(config)
    return list(stage.run(dataset, progress=False)), stage.cache_stats


@pytest.mark.parametrize("scope", ["global", "per_question"])
@pytest.mark.parametrize("retriever", RETRIEVERS)
def test_hits_equal_with_cache_off_cold_and_warm(make_config, dataset, snap, minilm, retriever, scope):
    sets = (f"retrieval.retriever={retriever}", f"retrieval.scope={scope}")
    plain, off = run(make_config(*sets, cache=False), dataset)
    cold, cold_stats = run(make_config(*sets), dataset)
    warm, warm_stats = run(make_config(*sets), dataset)
    assert off.as_dict() == dict.fromkeys(off.as_dict(), 0)
    assert snap(plain) == snap(cold) == snap(warm)
    assert plain[0].hits and plain[0].hits[0].passage.id == "harbour"
    assert (cold_stats.retrievals_miss, warm_stats.retrievals_hit, warm_stats.retrievals_miss) == (4, 4, 0)
    if scope == "global":
        assert (cold_stats.chunksets_miss, cold_stats.indexes_miss) == (1, 1)
    assert (warm_stats.indexes_hit, warm_stats.indexes_miss, warm_stats.chunksets_hit) == (0, 0, 0)


@pytest.mark.parametrize("retriever", RETRIEVERS)
def test_hits_equal_with_bi_encoder_reranker(make_config, dataset, snap, minilm, retriever):
    sets = (f"retrieval.retriever={retriever}", "retrieval.scope=global", "rerank.strategy=bi_encoder",
            "rerank.model=minilm")
    plain, _ = run(make_config(*sets, cache=False), dataset)
    cold, _ = run(make_config(*sets), dataset)
    warm, stats = run(make_config(*sets), dataset)
    assert snap(plain) == snap(cold) == snap(warm)
    assert stats.retrievals_hit == 4
    # rerank scores are cosines, not first-stage scores: the reranked hits were what got cached
    assert all(-1 <= h.score <= 1 for r in warm for h in r.hits)


def watch_everything(spy):
    for cls in (BM25Retriever, DenseRetriever, HybridRetriever):
        spy.count(cls, "index")
        spy.count(cls, "load_index")
    for cls in (BM25Index, DenseIndex, HybridIndex):
        spy.count(cls, "search")
    spy.count(SentenceEncoder, "_compute")
    spy.count(BiEncoderReranker, "score")
    spy.count(stage_mod, "chunk_passages")


@pytest.mark.parametrize("scope", ["global", "per_question"])
@pytest.mark.parametrize("retriever", RETRIEVERS)
def test_trial_changing_only_the_generator_builds_and_searches_nothing(
    make_config, dataset, snap, spy, minilm, retriever, scope
):
    sets = (f"retrieval.retriever={retriever}", f"retrieval.scope={scope}",
            "rerank.strategy=bi_encoder", "rerank.model=minilm")
    first, _ = run(make_config(*sets), dataset)
    watch_everything(spy)
    later = make_config(*sets, "generation.model=some/other-model", "generation.max_tokens=99",
                        "generation.temperature=0.7", "influence.epsilon=0.2", "metrics.tau_h=0.3",
                        "faithfulness.random_repeats=5", "execution.actors=3", "seed=7")
    second, stats = run(later, dataset)
    assert snap(second) == snap(first)
    assert sum(spy.calls.values()) == 0, spy.calls  # no chunking, index, load, search, embedding, rerank
    assert stats.as_dict() == {**dict.fromkeys(stats.as_dict(), 0), "retrievals_hit": 4}


def test_partly_cached_dense_run_equals_an_uncached_one_bit_for_bit(make_config, dataset, snap, tmp_path, minilm):
    sets = ("retrieval.retriever=dense", "retrieval.scope=global")
    plain, _ = run(make_config(*sets, cache=False), dataset)
    run(make_config(*sets), dataset)
    min((tmp_path / "cache" / "retrievals").glob("*/*")).unlink()
    mixed, stats = run(make_config(*sets), dataset)
    assert (stats.retrievals_hit, stats.retrievals_miss, stats.indexes_hit) == (3, 1, 1)
    # the missing query is embedded in the same batch as without the cache, not alone (MiniLM on
    # CPU gives a lone query an embedding ~1e-7 off): the same scores to the last bit
    assert snap(mixed) == snap(plain)


def test_without_result_cache_the_index_is_loaded_not_built(make_config, dataset, snap, spy):
    first, _ = run(make_config("retrieval.scope=global"), dataset)
    spy.count(BM25Retriever, "index")
    spy.count(stage_mod, "chunk_passages")
    second, stats = run(make_config("retrieval.scope=global", "cache.retrievals=false"), dataset)
    assert snap(second) == snap(first)
    assert spy.calls["BM25Retriever.index"] == 0 and spy.calls["chunk_passages"] == 0
    assert (stats.chunksets_hit, stats.indexes_hit) == (1, 1)


def test_top_k_change_reuses_the_index_but_not_the_hits(make_config, dataset):
    run(make_config("retrieval.scope=global"), dataset)
    out, stats = run(make_config("retrieval.scope=global", "retrieval.top_k=2"), dataset)
    assert (stats.indexes_hit, stats.retrievals_miss, stats.retrievals_hit) == (1, 4, 0)
    assert all(len(r.hits) <= 2 for r in out)


def changed_text(ds):
    docs = list(ds.corpus)
    docs[1] = Passage(docs[1].id, docs[1].text.replace("kappa", "omega"), title=docs[1].title)
    return Dataset(ds.name, ds.questions, corpus=tuple(docs), documents=True)


@pytest.mark.parametrize(
    "change, expect",
    [
        (("retrieval.bm25.k1=0.9",), {"chunksets_hit": 1, "indexes_miss": 1}),
        (("retrieval.bm25.stopwords=none",), {"chunksets_hit": 1, "indexes_miss": 1}),
        (("chunking.size=25",), {"chunksets_miss": 1, "indexes_miss": 1}),
        (("chunking.overlap=5",), {"chunksets_miss": 1, "indexes_miss": 1}),
        (("retrieval.filters={source: none}",), {"chunksets_hit": 1, "indexes_miss": 1}),
        ("corpus text", {"chunksets_miss": 1, "indexes_miss": 1}),
    ],
)
def test_changed_inputs_rebuild(make_config, documents, spy, change, expect):
    base = ("retrieval.scope=global", "chunking.size=20")
    run(make_config(*base), documents)
    spy.count(BM25Retriever, "index")
    ds = changed_text(documents) if change == "corpus text" else documents
    sets = base if change == "corpus text" else base + change
    _, stats = run(make_config(*sets), ds)
    assert spy.calls["BM25Retriever.index"] == 1  # rebuilt
    assert stats.retrievals_miss == 2 and stats.retrievals_hit == 0
    for name, value in expect.items():
        assert getattr(stats, name) == value, stats


def test_per_question_corpus_change_misses_only_that_question(make_config, dataset):
    sets = ("retrieval.scope=per_question",)
    run(make_config(*sets), dataset)
    q = dataset.questions[2]
    edited = Passage(q.passages[0].id, q.passages[0].text + " Insulin!", title="Insulin")
    q2 = Question(q.id, q.question, passages=(edited, *q.passages[1:]))
    ds = Dataset(dataset.name, (*dataset.questions[:2], q2, dataset.questions[3]), corpus=dataset.corpus)
    _, stats = run(make_config(*sets), ds)
    assert (stats.retrievals_hit, stats.retrievals_miss) == (3, 1)


def test_damaged_entries_are_recomputed_with_a_warning(make_config, dataset, snap, caplog, tmp_path):
    config = make_config("retrieval.scope=global")
    first, _ = run(config, dataset)
    root = tmp_path / "cache"
    hits_file = min((root / "retrievals").glob("*/*"))
    hits_file.write_bytes(hits_file.read_bytes()[:-5])
    (weights,) = (root / "indexes").glob("*/weights.npz")
    weights.write_bytes(weights.read_bytes()[:100])
    (chunks_file,) = (root / "chunksets").iterdir()
    chunks_file.write_bytes(chunks_file.read_bytes().replace(b"harbour", b"HARBOUR", 1))
    with caplog.at_level(logging.WARNING):
        second, stats = run(config, dataset)
    assert snap(second) == snap(first)
    assert caplog.text.count("ignoring cache entry") == 3
    assert (stats.retrievals_miss, stats.indexes_miss, stats.chunksets_miss) == (1, 1, 1)
    caplog.clear()
    third, stats = run(config, dataset)  # the recomputed entries were stored again
    assert stats.retrievals_hit == 4 and "ignoring" not in caplog.text
    assert snap(third) == snap(first)


def test_an_undecodable_entry_with_a_valid_checksum_is_recomputed(make_config, dataset, caplog, tmp_path):
    config = make_config("retrieval.scope=global")
    run(config, dataset)
    hits_file = min((tmp_path / "cache" / "retrievals").glob("*/*"))
    store = CacheStore(tmp_path / "cache")
    store.write_blob(f"retrievals/{hits_file.parent.name}", hits_file.name, b'[["not", "hits"]]')
    with caplog.at_level(logging.WARNING):
        _, stats = run(config, dataset)
    assert "undecodable" in caplog.text and stats.retrievals_miss == 1


class Reverse(BiEncoderReranker):
    def __init__(self):
        self.calls = 0

    def score(self, query, passages):
        import numpy as np

        self.calls += 1
        return np.array([-ord(p.id[0]) for p in passages], dtype=float)


def test_a_reranker_set_by_hand_bypasses_the_result_cache(make_config, dataset):
    config = make_config("retrieval.scope=global")
    run(config, dataset)  # results of the configured (no) reranker are cached
    stage = RetrievalStage(config)
    stage.reranker = Reverse()
    out = list(stage.run(dataset, progress=False))
    assert stage.reranker.calls == 4
    assert out[0].hits[0].passage.id == "everest"  # the hand-set order, not the cached one
    assert stage.cache_stats.retrievals_hit == 0 and stage.cache_stats.indexes_hit == 1


def test_switched_off_caches_write_and_count_nothing(make_config, dataset, tmp_path):
    _, stats = run(make_config("retrieval.scope=global", cache=False), dataset)
    root = tmp_path / "cache"
    assert not any((root / kind).exists() for kind in ("chunksets", "indexes", "retrievals"))
    assert sum(stats.as_dict().values()) == 0


def test_passages_with_odd_meta_are_retrieved_but_not_cached(make_config, snap, caplog, tmp_path):
    odd = Dataset("odd", (Question("q", "ferry arrivals"),),
                  corpus=(Passage("a", "ferry arrivals", meta={"tags": {"x"}}),))
    with caplog.at_level(logging.INFO, logger="ragray.cache"):
        first, stats = run(make_config("retrieval.scope=global"), odd)
    assert first[0].hits[0].passage.id == "a"
    assert "not caching" in caplog.text and sum(stats.as_dict().values()) == 0
    assert not (tmp_path / "cache" / "retrievals").exists()


def test_chunks_and_global_index_use_the_caches(make_config, documents, spy):
    config = make_config("retrieval.scope=global", "chunking.size=20")
    stage = RetrievalStage(config)
    chunks = stage.chunks(documents)
    assert len(chunks) == 9 and chunks[0].id == "doc0#c0"
    spy.count(stage_mod, "chunk_passages")
    spy.count(BM25Retriever, "index")
    again = RetrievalStage(config)
    assert again.chunks(documents) == chunks
    index = again.global_index(documents)
    assert index.passages == chunks and spy.calls["chunk_passages"] == 0
    assert spy.calls["BM25Retriever.index"] == 1  # built once ...
    RetrievalStage(config).global_index(documents)
    assert spy.calls["BM25Retriever.index"] == 1  # ... then loaded


def test_embedding_folder_follows_cache_dir_unless_dense_cache_dir_is_set(make_config, monkeypatch, tmp_path):
    from ragray.config import load_config

    dense = resolved_retrieval_config(make_config()).dense
    assert dense.cache_dir == str(tmp_path / "cache" / "embeddings")
    explicit = make_config("retrieval.dense.cache_dir=/elsewhere")
    assert resolved_retrieval_config(explicit).dense.cache_dir == "/elsewhere"
    assert resolved_retrieval_config(load_config(None)).dense.cache_dir is None
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == default_cache_root() / "embeddings"


def test_dense_stage_writes_embeddings_under_cache_dir(make_config, dataset, minilm, tmp_path):
    run(make_config("retrieval.retriever=dense", "retrieval.scope=global"), dataset)
    assert len(list((tmp_path / "cache" / "embeddings").glob("*.npy"))) == 1


@pytest.mark.realdata
@pytest.mark.slow
def test_scifact_global_bm25_cached_equals_uncached(shared_data, make_config, snap):
    from ragray.data import load_dataset

    sets = (f"data.path={shared_data / 'scifact.jsonl'}", "retrieval.scope=global", "retrieval.top_k=10")
    config = make_config(*sets)
    ds = load_dataset(config.data)
    plain, _ = run(make_config(*sets, cache=False), ds)
    cold, _ = run(config, ds)
    warm, stats = run(config, ds)
    assert len(plain) == 300 and stats.retrievals_hit == 300
    assert snap(plain) == snap(cold) == snap(warm)
