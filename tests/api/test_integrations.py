"""ragray.run_retriever and ragray.attribute with the real LangChain and LlamaIndex packages
(``pip install 'ragray[notebook]'``), over the demo corpus, built offline: no network, no API keys,
no LLM from either library. The passages ragray measures must be exactly the ones the retriever
returned, in its order."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import ragray

DEMO = Path(ragray.__file__).parent / "demo" / "demo.jsonl"
RECORDS = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines() if line.strip()]
K = 4
#: the scripted model answers by rule; answer-embedding metrics would only add a model load
FAST = {"backend": "scripted", "progress": False, "settings": {"metrics.embedding": False}}


def _corpus() -> list[dict]:
    """Every passage of the demo records, once, in file order."""
    seen: dict[str, dict] = {}
    for rec in RECORDS:
        for p in rec["passages"]:
            seen.setdefault(p["id"], p)
    return list(seen.values())


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _overlap_ranking(question: str, corpus: list[dict], k: int) -> list[tuple[dict, int]]:
    """The k passages sharing the most words with the question (ties: corpus order)."""
    q = _words(question)
    scored = [(p, len(q & _words(p["title"] + " " + p["text"]))) for p in corpus]
    return sorted(scored, key=lambda ps: -ps[1])[:k]


def _questions(n: int = 3) -> list[dict]:
    return [{"id": r["id"], "question": r["question"], "answers": r["answers"]} for r in RECORDS[:n]]


def _measured(run, question_id: str):
    p = run.passages.to_pandas()
    p = p[p["question_id"] == question_id].sort_values("retrieval_rank")
    return p.reset_index(drop=True)


def test_the_demo_corpus_is_what_the_retrievers_search():
    corpus = _corpus()
    assert len(corpus) > 3 * K and len({p["id"] for p in corpus}) == len(corpus)


# --- LangChain ----------------------------------------------------------------------------------

def _langchain():
    return pytest.importorskip("langchain_core", reason="LangChain not installed: pip install 'ragray[notebook]'")


def _langchain_documents():
    from langchain_core.documents import Document

    return [Document(page_content=p["text"], metadata={"title": p["title"]}, id=p["id"]) for p in _corpus()]


def test_a_langchain_vector_store_retriever_feeds_the_run():
    _langchain()
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    store.add_documents(_langchain_documents())
    retriever = store.as_retriever(search_kwargs={"k": K})
    questions = _questions()
    expected = {q["id"]: retriever.invoke(q["question"]) for q in questions}

    run = ragray.run_retriever(retriever, questions, **FAST)
    assert list(run.questions["question_id"]) == [q["id"] for q in questions]
    for qid, docs in expected.items():
        got = _measured(run, qid)
        assert len(docs) == K
        assert list(got["passage_id"]) == [d.id for d in docs]
        assert list(got["text"]) == [d.page_content for d in docs]
        assert list(got["title"]) == [d.metadata["title"] for d in docs]
        assert list(got["retrieval_rank"]) == list(range(1, K + 1))


def test_a_langchain_retriever_subclass_and_k_cut_the_list():
    _langchain()
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    class Overlap(BaseRetriever):
        """Documents by the number of words they share with the question."""

        docs: list[Document]
        k: int = 6

        def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
            q = _words(query)
            ranked = sorted(self.docs, key=lambda d: -len(q & _words(d.metadata["title"] + " " + d.page_content)))
            return ranked[: self.k]

    retriever = Overlap(docs=_langchain_documents())
    questions = _questions()
    run = ragray.run_retriever(retriever, questions, k=3, **FAST)
    for q in questions:
        want = [p["id"] for p, _ in _overlap_ranking(q["question"], _corpus(), 3)]
        got = _measured(run, q["id"])
        assert list(got["passage_id"]) == want and list(got["retrieval_rank"]) == [1, 2, 3]
    # the overlap ranking finds the gold passage of the first demo question at rank 1
    assert _measured(run, "demo-001")["passage_id"][0] in RECORDS[0]["gold_passage_ids"]


# --- LlamaIndex ---------------------------------------------------------------------------------

def _llama_index():
    return pytest.importorskip("llama_index.core", reason="LlamaIndex not installed: pip install 'ragray[notebook]'")


def _text_nodes():
    from llama_index.core.schema import TextNode

    return [TextNode(text=p["text"], id_=p["id"], metadata={"title": p["title"]}) for p in _corpus()]


def test_a_llamaindex_vector_index_retriever_feeds_the_run():
    _llama_index()
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding

    index = VectorStoreIndex(_text_nodes(), embed_model=MockEmbedding(embed_dim=8))
    retriever = index.as_retriever(similarity_top_k=K)
    questions = _questions()
    expected = {q["id"]: retriever.retrieve(q["question"]) for q in questions}

    run = ragray.run_retriever(retriever, questions, **FAST)
    for qid, nodes in expected.items():
        got = _measured(run, qid)
        assert len(nodes) == K
        assert list(got["passage_id"]) == [n.node.node_id for n in nodes]
        assert list(got["text"]) == [n.node.get_content() for n in nodes]
        assert list(got["retrieval_rank"]) == list(range(1, K + 1))
        assert list(got["retrieval_score"]) == pytest.approx([n.score for n in nodes])


def test_a_llamaindex_retriever_subclass_keeps_its_scores():
    _llama_index()
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle

    class Overlap(BaseRetriever):
        """Nodes scored by the share of the question's words they hold."""

        def __init__(self, nodes, k: int = K) -> None:
            super().__init__()
            self.nodes, self.k = nodes, k

        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            q = _words(query_bundle.query_str)
            scored = [NodeWithScore(node=n, score=len(q & _words(n.metadata["title"] + " " + n.get_content())) / len(q))
                      for n in self.nodes]
            return sorted(scored, key=lambda s: -s.score)[: self.k]

    questions = _questions()
    run = ragray.run_retriever(Overlap(_text_nodes()), questions, **FAST)
    for q in questions:
        want = _overlap_ranking(q["question"], _corpus(), K)
        got = _measured(run, q["id"])
        assert list(got["passage_id"]) == [p["id"] for p, _ in want]
        assert list(got["text"]) == [p["text"] for p, _ in want]
        assert list(got["retrieval_rank"]) == list(range(1, K + 1))
        n_words = len(_words(q["question"]))
        assert list(got["retrieval_score"]) == pytest.approx([n / n_words for _, n in want])
        assert got["retrieval_score"].is_monotonic_decreasing and got["retrieval_score"].iloc[0] > 0


# --- the packaged model -------------------------------------------------------------------------

@pytest.mark.slow
def test_attribute_on_langchain_documents_with_the_packaged_model(tmp_path, monkeypatch):
    _langchain()
    monkeypatch.chdir(tmp_path)
    rec = RECORDS[0]
    from langchain_core.documents import Document

    docs = [Document(page_content=p["text"], metadata={"title": p["title"]}, id=p["id"]) for p in rec["passages"]]
    r = ragray.attribute(rec["question"], docs, answers=rec["answers"])
    assert list(tmp_path.iterdir()) == []  # nothing written
    assert isinstance(r.answer, str) and r.answer.strip()
    assert list(r.passages["passage_id"]) == [d.id for d in docs]
    assert list(r.passages["retrieval_rank"]) == list(range(1, len(docs) + 1))
    assert "used" in r.passages.columns and None not in r.passages["used"]
    assert None not in r.passages["influence"]
    html = r._repr_html_()
    assert "<article class=qcard" in html and rec["passages"][0]["title"] in html
