"""``ragray retrieve``: top-k hits per question, written to a run directory, with metrics."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


from ragray.config import ExperimentConfig
from ragray.data import load_dataset
from ragray.encoders import SentenceEncoder
from ragray.metrics.chunking import chunk_metrics
from ragray.metrics.retrieval import diversity, doc_ranking, mean_scores, ranking_metrics, score_ranking
from ragray.retrieval.stage import RetrievalStage, describe_sources, resolve_scope
from ragray.rows.retrieval import HitRow, RetrievalQuestionRow
from ragray.store.rundir import RunDir

__all__ = ["RetrieveResult", "run_retrieve"]

@dataclass(frozen=True)
class RetrieveResult:
    out: Path
    n_questions: int
    n_skipped_rows: int
    metrics: dict[str, Any]
    seconds: float
    sources: str = ""  # where the passages came from, in words (the run line)


def _means(rows: list[dict[str, float]]) -> dict[str, float]:
    """Per-key means of the per-question ranking metrics (questions with gold ids only)."""
    return {key: sum(r[key] for r in rows) / len(rows) for key in rows[0]} if rows else {}


def run_retrieve(config: ExperimentConfig, out: str | Path, progress: bool = True) -> RetrieveResult:
    """Load the dataset, retrieve for every question, write hits/questions/metrics to ``out``."""
    start = time.perf_counter()
    run = RunDir(out)
    run.save_config(config)
    dataset = load_dataset(config.data)
    stage = RetrievalStage(config)
    k = config.retrieval.top_k
    hit_rows: list[HitRow] = []
    q_rows: list[RetrievalQuestionRow] = []
    scores = []
    ranking = []
    diversities = []
    encoder = SentenceEncoder(config.metrics.encoder, cache=False) if (
        config.metrics.diversity or config.metrics.chunking) else None
    for result in stage.run(dataset, progress=progress):
        q = result.question
        gold = set(q.gold_passage_ids)
        s = score_ranking(result.hits, gold, k)
        scores.append(s)
        ranking.append(ranking_metrics(doc_ranking(result.hits), gold, sorted({1, 3, 5, 10, k})))
        if config.metrics.diversity:
            d = diversity(encoder.encode([h.passage.text for h in result.hits], cache=False))
            if d is not None:
                diversities.append(d)
        for h in result.hits:
            p = h.passage
            hit_rows.append(HitRow(
                question_id=q.id, passage_id=p.id, doc_id=p.doc_id, position=p.position,
                retrieval_rank=h.rank, retrieval_score=h.score, title=p.title, text=p.text,
                is_gold=p.doc_id in gold,
            ))
        q_rows.append(RetrievalQuestionRow(
            question_id=q.id, question=q.question, n_hits=len(result.hits), n_gold=len(gold),
            **({} if s is None else {m: getattr(s, m) for m in RetrievalQuestionRow.columns()[4:]}),
        ))
    run.write_rows(HitRow, hit_rows)
    run.write_rows(RetrievalQuestionRow, q_rows)
    metrics = mean_scores(scores)
    extra: dict[str, Any] = {"at_k": _means([r for r in ranking if r is not None])}
    if config.metrics.diversity:
        extra["diversity"] = sum(diversities) / len(diversities) if diversities else None
    if config.metrics.chunking:
        answers = [a for q in dataset.questions for a in q.answers[:1]]
        extra["chunking"] = chunk_metrics(stage.chunks(dataset), encoder, answers=answers,
                                          max_chunks=config.metrics.chunking_sample, seed=config.seed)
    seconds = time.perf_counter() - start
    run.write_json(
        "metrics",
        {
            "dataset": dataset.name,
            "n_questions": len(dataset.questions),
            "n_skipped_rows": len(dataset.skipped),
            "skipped_rows": [asdict(s) for s in dataset.skipped],
            "retriever": config.retrieval.retriever,
            "rerank": config.rerank.strategy,
            "scope": resolve_scope(config.retrieval, dataset),
            "top_k": k,
            "seconds": seconds,
            **metrics,
            **extra,
        },
    )
    return RetrieveResult(Path(out), len(dataset.questions), len(dataset.skipped), {**metrics, **extra}, seconds,
                          describe_sources(config.retrieval, dataset))
