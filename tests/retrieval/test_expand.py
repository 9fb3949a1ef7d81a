"""Context expansion: neighbours of a hit's chunk from its source document, merged per document."""

from ragray.config import ChunkingConfig, load_config
from ragray.data.chunking import chunk_passages
from ragray.retrieval.expand import expand_hits, index_documents
from ragray.retrieval.stage import RetrievalStage
from ragray.types import Dataset, Hit, Passage, Question

# 12 words, "w0 .. w11", with doubled spaces and a newline kept as written
DOC = Passage("d", "w0 w1  w2 w3\nw4 w5 w6 w7 w8 w9 w10 w11", title="T", meta={"src": "x"})
OTHER = Passage("o", "alpha beta gamma delta epsilon zeta", title="")


def chunks(*docs, size=2, overlap=0):
    return chunk_passages(docs, ChunkingConfig(method="words", size=size, overlap=overlap), documents=True)


def hit(chunk_set, pid, rank, score=1.0):
    return Hit(next(c for c in chunk_set if c.id == pid), rank, score)


def test_window_widens_a_hit_with_its_neighbours_cut_from_the_source():
    cs = chunks(DOC)  # d#c0 "w0 w1", d#c1 "w2 w3", d#c2 "w4 w5", ...
    out = expand_hits([hit(cs, "d#c2", 1)], index_documents([DOC], cs), window=1)
    (h,) = out
    assert h.passage.id == "d#c1-3" and h.passage.position == 1 and h.passage.doc_id == "d"
    assert h.passage.text == "w2 w3\nw4 w5 w6 w7"  # exactly the source span, newline kept
    assert h.passage.title == "T" and h.passage.meta == {"src": "x"} and h.rank == 1


def test_window_is_clipped_at_document_edges():
    cs = chunks(DOC)
    (first,) = expand_hits([hit(cs, "d#c0", 1)], index_documents([DOC], cs), window=2)
    assert first.passage.id == "d#c0-2" and first.passage.text == "w0 w1  w2 w3\nw4 w5"
    (last,) = expand_hits([hit(cs, "d#c5", 1)], index_documents([DOC], cs), window=3)
    assert last.passage.id == "d#c2-5" and last.passage.text.endswith("w10 w11")


def test_overlapping_chunks_are_not_repeated():
    cs = chunks(DOC, size=4, overlap=2)  # c0 w0-w3, c1 w2-w5, c2 w4-w7, ...
    (h,) = expand_hits([hit(cs, "d#c1", 1)], index_documents([DOC], cs), window=1)
    assert h.passage.text == "w0 w1  w2 w3\nw4 w5 w6 w7"
    assert h.passage.text.split().count("w2") == 1


def test_hits_of_one_document_that_overlap_or_touch_merge_at_the_best_rank():
    cs = chunks(DOC, OTHER)
    docs = index_documents([DOC, OTHER], cs)
    hits = [hit(cs, "d#c4", 1, 0.9), hit(cs, "o#c1", 2, 0.8), hit(cs, "d#c1", 3, 0.7), hit(cs, "d#c2", 4, 0.6)]
    out = expand_hits(hits, docs, window=1)
    # d#c4 -> 3..5, d#c1 -> 0..2 touches it (2+1 = 3), d#c2 -> 1..3: one group, at rank 1
    assert [h.passage.id for h in out] == ["d#c0-5", "o#c0-2"]
    assert [h.rank for h in out] == [1, 2] and [h.score for h in out] == [0.9, 0.8]
    assert out[0].passage.text == DOC.text


def test_far_apart_hits_of_one_document_stay_separate():
    long = Passage("L", " ".join(f"t{i}" for i in range(40)))
    cs = chunks(long)  # 20 chunks
    out = expand_hits([hit(cs, "L#c2", 1), hit(cs, "L#c15", 2)], index_documents([long], cs), window=1)
    assert [h.passage.id for h in out] == ["L#c1-3", "L#c14-16"]


def test_unknown_documents_single_chunks_and_window_zero_pass_through():
    cs = chunks(DOC)
    stray = Hit(Passage("s", "stray text"), 1, 2.0)
    single = Passage("one", "only")
    hits = [stray, hit(cs, "d#c0", 2), Hit(single, 3, 0.5)]
    docs = index_documents([DOC, single], [*cs, single])
    assert "one" not in docs  # a one-chunk document has nothing to add
    out = expand_hits(hits, docs, window=1)
    assert [h.passage.id for h in out] == ["s", "d#c0-1", "one"] and out[0] == stray
    assert expand_hits(hits, docs, window=0) == tuple(hits)


def _dataset():
    text = ("The lighthouse keeper wrote every storm in a ledger. " * 2
            + "The ledger is kept in the museum at Port Wren. "
            + "Visitors may read the ledger on Sundays. " * 2)
    doc = Passage("doc", text.strip(), title="Ledger")
    filler = Passage("fill", "Barley grows in the valley. The mill grinds it into flour every autumn.")
    q = Question("q", "Where is the ledger kept?", passages=(doc, filler), gold_passage_ids=("doc",))
    return Dataset("x", (q,), documents=True)


def test_stage_expands_after_the_cache_and_shares_unwidened_hits(tmp_path):
    base = [f"cache.dir={tmp_path}", "chunking.method=sentences", "chunking.size=1", "chunking.overlap=0",
            "retrieval.top_k=1"]
    plain = RetrievalStage(load_config(None, base))
    (narrow,) = list(plain.run(_dataset(), progress=False))
    assert narrow.hits[0].passage.text == "The ledger is kept in the museum at Port Wren."
    wide_stage = RetrievalStage(load_config(None, [*base, "retrieval.expand.window=1"]))
    (wide,) = list(wide_stage.run(_dataset(), progress=False))
    assert wide_stage.cache_stats.retrievals_hit == 1  # the window is not in the hits key
    (h,) = wide.hits
    assert h.passage.doc_id == "doc" and h.passage.id == f"doc#c{narrow.hits[0].passage.position - 1}-" \
        f"{narrow.hits[0].passage.position + 1}"
    assert h.passage.text == ("The lighthouse keeper wrote every storm in a ledger. The ledger is kept in "
                              "the museum at Port Wren. Visitors may read the ledger on Sundays.")


def test_stage_expands_in_global_scope_too(tmp_path):
    cfg = [f"cache.dir={tmp_path}", "retrieval.scope=global", "chunking.method=sentences", "chunking.size=1",
           "chunking.overlap=0", "retrieval.top_k=2", "retrieval.expand.window=1"]
    (result,) = list(RetrievalStage(load_config(None, cfg)).run(_dataset(), progress=False))
    assert all(h.passage.text in (_dataset().questions[0].passages[0].text + " "
                                  + _dataset().questions[0].passages[1].text) for h in result.hits)
    assert [h.rank for h in result.hits] == list(range(1, len(result.hits) + 1))
    assert any("-" in h.passage.id.split("#c")[1] for h in result.hits)
