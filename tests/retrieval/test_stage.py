"""The retrieval stage: scopes, chunked documents, filters, min_score and reranking candidates."""

import numpy as np
import pytest

from ragray.config import load_config
from ragray.errors import InputError
from ragray.rerank.base import Reranker
from ragray.retrieval.stage import RetrievalStage, passes_filters
from ragray.types import Dataset, Passage, Question


def P(pid, text, **meta):
    return Passage(pid, text, meta=meta)


HARBOUR = P("h", "The harbour master logs every ferry arrival at Port Wren.", source="records")
GARDEN = P("g", "The botanical garden grows lavender near the old mill.", source="guide")
MILL = P("m", "The old mill grinds barley; the ferry brings barley from Port Wren.", source="guide")

DATASET = Dataset(
    "t",
    (
        Question("q1", "Who logs ferry arrivals at Port Wren?", passages=(HARBOUR, GARDEN, MILL),
                 gold_passage_ids=("h",)),
        Question("q2", "What grows near the old mill?", passages=(GARDEN, MILL),
                 gold_passage_ids=("g",)),
    ),
)


def stage(*overrides):
    return RetrievalStage(load_config(None, list(overrides)))


def ids(result):
    return [h.passage.id for h in result.hits]


def test_per_question_uses_only_own_passages():
    out = list(stage("retrieval.top_k=5").run(DATASET, progress=False))
    assert ids(out[0])[0] == "h" and set(ids(out[0])) == {"h", "g", "m"}
    assert set(ids(out[1])) == {"g", "m"}  # q2 never sees the harbour passage


def test_global_scope_uses_union_corpus():
    out = list(stage("retrieval.scope=global", "retrieval.top_k=5").run(DATASET, progress=False))
    assert set(ids(out[1])) == {"h", "g", "m"}
    assert [h.rank for h in out[1].hits] == [1, 2, 3]


def test_filters_and_min_score():
    out = list(stage("retrieval.filters={source: guide}").run(DATASET, progress=False))
    assert set(ids(out[0])) == {"g", "m"}
    assert passes_filters(HARBOUR, {"source": ["records", "x"]})
    assert not passes_filters(Passage("n", "no meta"), {"source": "guide"})
    out = list(stage("retrieval.min_score=0.01").run(DATASET, progress=False))
    assert all(h.score >= 0.01 for r in out for h in r.hits)
    assert "g" not in ids(out[0])  # shares no term with q1: BM25 score 0 is dropped


def test_documents_are_chunked_in_auto_mode():
    long_doc = Passage("doc", " ".join(f"word{i}" for i in range(250)) + " lighthouse", title="Doc")
    ds = Dataset("d", (Question("q", "lighthouse", passages=(long_doc,), gold_passage_ids=("doc",)),),
                 documents=True)
    hits = list(stage().run(ds, progress=False))[0].hits
    assert len(hits) == 3 and hits[0].passage.doc_id == "doc" and hits[0].passage.id == "doc#c2"


class ReverseReranker(Reranker):
    """Scores passages by reverse id order: deterministic and opposite to the text match."""

    name = "reverse"

    @classmethod
    def from_config(cls, config):
        return cls()

    def score(self, query, passages):
        self.seen = [p.id for p in passages]
        return np.array([-ord(p.id[0]) for p in passages], dtype=float)


def test_reranker_gets_candidates_and_final_ranks_are_renumbered():
    s = stage("retrieval.top_k=2", "rerank.candidates=3")
    reranker = ReverseReranker()
    s.reranker = reranker
    assert s.first_stage_k == 3
    out = list(s.run(DATASET, progress=False))
    assert sorted(reranker.seen) == ["g", "m"]  # q2's candidates (it has two passages)
    assert ids(out[0]) == ["g", "h"] and [h.rank for h in out[0].hits] == [1, 2]


def test_corpus_only_dataset_rejects_per_question_scope():
    ds = Dataset("c", (Question("q", "x"),), corpus=(HARBOUR,))
    with pytest.raises(InputError, match="no per-question passages.*--scope global"):
        list(stage("retrieval.scope=per_question").run(ds, progress=False))
    (out,) = stage().run(ds, progress=False)  # auto: the corpus is all there is
    assert ids(out) == ["h"]


def test_auto_scope_searches_the_sets_own_corpus_and_says_so():
    """A corpus beside the questions (or named, or a BEIR folder's) is what auto retrieves from;
    rows without one keep their own passages; the run line says which."""
    from ragray.retrieval.stage import describe_sources, resolve_scope

    own = Dataset("rows", (Question("q1", "Who logs ferry arrivals?", passages=(GARDEN,)),
                           Question("q2", "x", passages=(GARDEN, HARBOUR))))
    with_corpus = Dataset("rows", own.questions, corpus=(GARDEN, HARBOUR, MILL), corpus_name="rows.corpus.jsonl")
    r = load_config(None, []).retrieval
    assert resolve_scope(r, own) == "per_question" and resolve_scope(r, with_corpus) == "global"
    assert resolve_scope(r, with_corpus.limit(1)) == "global"  # --limit keeps the corpus (and its name)
    (first, _) = stage("retrieval.top_k=2").run(with_corpus, progress=False)
    assert ids(first) == ["h", "m"]  # from the corpus, not q1's one passage
    assert describe_sources(r, with_corpus) == "bm25 top-10 of 3 corpus passages (rows.corpus.jsonl)"
    assert describe_sources(r, own) == "bm25 top-10 of the rows' own passages (1–2 per question)"
    per_q = load_config(None, ["retrieval.scope=per_question"]).retrieval
    assert resolve_scope(per_q, with_corpus) == "per_question"  # --scope still chooses
    given = load_config(None, ["retrieval.retriever=given"]).retrieval
    assert resolve_scope(given, with_corpus) == "per_question"
    assert describe_sources(given, own) == "the rows' own passages in their given order (1–2 per question)"
    pooled = load_config(None, ["retrieval.scope=global"]).retrieval
    assert describe_sources(pooled, own) == "bm25 top-10 of 2 passages (every question's own, pooled)"


def test_given_retriever_keeps_the_dataset_order_and_scores():
    from ragray.config import load_config as load
    from ragray.errors import ConfigError

    scored = Passage("s", "scored by another system", meta={"score": 7.5})
    ds = Dataset("g", (Question("q", "Who logs ferry arrivals?", passages=(GARDEN, scored, HARBOUR)),))
    (out,) = stage("retrieval.retriever=given", "retrieval.top_k=2").run(ds, progress=False)
    assert ids(out) == ["g", "s"] and [h.rank for h in out.hits] == [1, 2]
    assert [h.score for h in out.hits] == [1.0, 7.5]  # 1/rank unless the passage carries a score
    with pytest.raises(ConfigError, match="needs scope per_question"):
        load(None, ["retrieval.retriever=given", "retrieval.scope=global"])


def test_the_run_line_says_which_questions_got_fewer_passages_than_top_k():
    """Over a corpus, a short question is named on the run line; over the rows' own passages only a
    question with fewer than 2 (no verdict) is, since the line already gives the counts."""
    from types import SimpleNamespace

    from ragray.report.run_console import short_of_top_k_line, sources_words

    corpus = SimpleNamespace(n_questions=6, passages_from="bm25 top-10 of 2,067 corpus passages (x.corpus.jsonl)",
                             short_of_top_k={"1": 1, "3": 3})
    assert short_of_top_k_line(corpus, 10) == (
        "4 of 6 questions got fewer than 10 passages (1 passage: 1; 3 passages: 3); with one passage there is "
        "no retrieval order to check, so no verdict")
    own = SimpleNamespace(n_questions=6, passages_from="bm25 top-10 of the rows' own passages (3–10 per question)",
                          short_of_top_k={"3": 2})
    assert short_of_top_k_line(own, 10) is None
    assert short_of_top_k_line(SimpleNamespace(**{**vars(own), "short_of_top_k": {"1": 1}}), 10).startswith("1 of 6")
    assert short_of_top_k_line(SimpleNamespace(n_questions=6, short_of_top_k=None), 10) is None
    assert sources_words(corpus) == corpus.passages_from
    assert sources_words(SimpleNamespace(retriever="bm25", top_k=5)) == "bm25 top-5"  # a summary from before
