"""Retrieval benchmark: ragray BM25 vs rank_bm25, and FAISS Flat vs HNSW, side by side.

    python benchmarks/bench_retrieval.py [--faiss-passages N] [--out benchmarks/results/retrieval.json]

Data: SciFact (5183 abstracts, 300 claims) and SQuAD dev (2067 paragraphs, 1000 questions) from
../shared/data. Both BM25 implementations get identical token lists, so the timing compares the
scoring engines; ragray's own analyzer time is reported separately. Top-10 agreement is checked.
FAISS: MiniLM embeddings of the first N SciFact abstracts (default all), kept in
benchmarks/.cache/ after the first run (embedding is not what is measured; its time is recorded).
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import SHARED_DATA, machine_info  # noqa: E402
from ragray.config import BM25Config, DenseConfig  # noqa: E402
from ragray.metrics.retrieval import ndcg_at_k  # noqa: E402
from ragray.retrieval.bm25 import BM25Index  # noqa: E402
from ragray.retrieval.dense import DenseIndex, DenseRetriever  # noqa: E402
from ragray.text.analyzer import Analyzer  # noqa: E402
from ragray.types import Passage, passage_text  # noqa: E402


def read_jsonl(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def load(name: str) -> tuple[list[Passage], list[str]]:
    corpus_path = next(SHARED_DATA.glob(f"{name}.corpus.jsonl*"))
    corpus = [Passage(r["id"], r["text"], r.get("title", "")) for r in read_jsonl(corpus_path)]
    queries = [r["question"] for r in read_jsonl(SHARED_DATA / f"{name}.jsonl")]
    return corpus, queries


def timed(fn, repeats: int = 3):
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def bench_bm25(name: str, corpus: list[Passage], queries: list[str]) -> dict:
    import rank_bm25

    analyzer = Analyzer()
    t_tok, doc_tokens = timed(lambda: analyzer.many([passage_text(p) for p in corpus]), 1)
    query_tokens = analyzer.many(queries)
    cfg = BM25Config()
    t_idx, ours = timed(lambda: BM25Index(corpus, cfg, analyzer, tokens=doc_tokens))
    t_q, scores = timed(lambda: ours.scores_tokens(query_tokens))
    t_ref_idx, ref = timed(lambda: rank_bm25.BM25Okapi(doc_tokens), 1)
    t0 = time.perf_counter()
    ref_scores = np.stack([ref.get_scores(q) for q in query_tokens])
    t_ref_q = time.perf_counter() - t0
    same_top10 = 0
    for a, b in zip(scores, ref_scores):
        ta = set(np.lexsort((np.arange(len(a)), -a))[:10])
        tb = set(np.argsort(b)[::-1][:10])
        # ties at the 10th score may be cut differently; count the list as equal if scores agree
        same_top10 += ta == tb or np.allclose(np.sort(a)[-10:], np.sort(b)[-10:])
    return {
        "dataset": name,
        "n_passages": len(corpus),
        "n_queries": len(queries),
        "analyzer_s": t_tok,
        "ragray": {"index_s": t_idx, "query_s": t_q, "total_s": t_idx + t_q},
        "rank_bm25": {"index_s": t_ref_idx, "query_s": t_ref_q, "total_s": t_ref_idx + t_ref_q},
        "speedup_index_plus_queries": (t_ref_idx + t_ref_q) / (t_idx + t_q),
        "max_abs_score_diff": float(np.abs(scores - ref_scores).max()),
        "identical_top10_share": same_top10 / len(queries),
    }


CACHE = Path(__file__).resolve().parent / ".cache"


def corpus_embeddings(retriever: DenseRetriever, corpus: list[Passage]) -> tuple[np.ndarray, float | None]:
    """The corpus' embeddings, from benchmarks/.cache when an earlier run stored them; with the
    seconds embedding took (``None`` when read from the cache)."""
    import hashlib

    key = hashlib.sha256("\x1f".join(p.id for p in corpus).encode()).hexdigest()[:16]
    path = CACHE / f"emb-{retriever.config.model.replace('/', '_')}-{len(corpus)}-{key}.npy"
    if path.is_file():
        return np.load(path), None
    t_emb, emb = timed(lambda: retriever.encoder.encode_passages(corpus, 64), 1)
    CACHE.mkdir(exist_ok=True)
    np.save(path, np.asarray(emb))
    return emb, t_emb


def gold_ids(name: str) -> list[set[str]]:
    """Each question's gold passage ids, in the order of :func:`load`'s queries."""
    return [set(r["gold_passage_ids"]) for r in read_jsonl(SHARED_DATA / f"{name}.jsonl")]


def bench_faiss(corpus: list[Passage], queries: list[str], golds: list[set[str]],
                ids: list[str], records: Path) -> dict:
    """Flat vs HNSW over the corpus' embeddings, and the flat index's nDCG@10 against the golds
    (all-MiniLM-L6-v2 on the whole SciFact corpus: ~0.645 published by BEIR / MTEB). Each query's
    nDCG@10 and HNSW recall@10 go to ``records`` (gzipped JSON lines, by question id): the means published
    here are recomputed from them (benchmarks/checks/measurements.py)."""
    retriever = DenseRetriever(DenseConfig())
    emb, t_emb = corpus_embeddings(retriever, corpus)
    q = retriever.encoder.encode(queries, 64, normalize=True, cache=False)
    out: dict = {"n_passages": len(corpus), "n_queries": len(queries), "embed_corpus_s": t_emb}
    results = {}
    for kind in ("flat_ip", "hnsw"):
        cfg = DenseConfig(index=kind)
        t_build, idx = timed(lambda: DenseIndex(corpus, emb, retriever.encoder, cfg))
        t_search, (_, found) = timed(lambda: idx._index.search(q, 10))
        results[kind] = found
        out[kind] = {"build_s": t_build, "search_s": t_search, "queries_per_s": len(queries) / t_search}
    doc_ids = [p.doc_id for p in corpus]
    per_query = [{"question_id": qid,
                  "flat_ip_ndcg_at_10": ndcg_at_k([doc_ids[i] for i in flat if i >= 0], gold, 10),
                  "hnsw_recall_at_10_vs_flat": len(set(flat) & set(hnsw)) / 10}
                 for qid, flat, hnsw, gold in zip(ids, results["flat_ip"].tolist(), results["hnsw"].tolist(), golds,
                                                  strict=True)]
    records.parent.mkdir(parents=True, exist_ok=True)
    records.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in per_query).encode(), mtime=0))
    out["records"] = records.relative_to(records.parents[2]).as_posix()
    for key in ("hnsw_recall_at_10_vs_flat", "flat_ip_ndcg_at_10"):
        out[key] = statistics.mean(r[key] for r in per_query)
    out["ndcg_reference"] = "all-MiniLM-L6-v2, BEIR SciFact, whole corpus: 0.645 (sentence-transformers / MTEB)"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--faiss-passages", type=int, help="embed only the first N SciFact abstracts")
    ap.add_argument("--out", default="benchmarks/results/retrieval.json")
    args = ap.parse_args()
    if not SHARED_DATA.is_dir():
        raise SystemExit(f"needs ../shared/data beside the repo ({SHARED_DATA} not found)")
    result = {"machine": machine_info(("rank-bm25", "faiss-cpu", "sentence-transformers", "torch"))}
    result["bm25"] = []
    for name in ("scifact", "squad_v11_dev"):
        corpus, queries = load(name)
        result["bm25"].append(bench_bm25(name, corpus, queries))
        print(json.dumps(result["bm25"][-1], indent=1))
    corpus, queries = load("scifact")
    ids = [r["id"] for r in read_jsonl(SHARED_DATA / "scifact.jsonl")]
    records = Path(args.out).parent / "records" / "retrieval" / "faiss_scifact.jsonl.gz"
    result["faiss_scifact"] = bench_faiss(corpus[: args.faiss_passages], queries, gold_ids("scifact"), ids, records)
    print(json.dumps(result["faiss_scifact"], indent=1))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
