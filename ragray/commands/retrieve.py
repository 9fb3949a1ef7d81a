"""``ragray retrieve``: top-k hits per question, written to a run directory, with metrics."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from ragray.config import ExperimentConfig
from ragray.data import load_dataset
from ragray.metrics.retrieval import mean_scores, score_ranking
from ragray.retrieval.stage import RetrievalStage
from ragray.store.rundir import RunDir

__all__ = ["HITS_SCHEMA", "QUESTIONS_SCHEMA", "RetrieveResult", "run_retrieve"]

HITS_SCHEMA = pa.schema(
    [
        ("question_id", pa.string()),
        ("passage_id", pa.string()),
        ("doc_id", pa.string()),
        ("position", pa.int32()),
        ("retrieval_rank", pa.int32()),
        ("retrieval_score", pa.float64()),
        ("title", pa.string()),
        ("text", pa.string()),
        ("is_gold", pa.bool_()),
    ]
)

QUESTIONS_SCHEMA = pa.schema(
    [
        ("question_id", pa.string()),
        ("question", pa.string()),
        ("n_hits", pa.int32()),
        ("n_gold", pa.int32()),
        ("hit_at_1", pa.float64()),
        ("hit_at_5", pa.float64()),
        ("hit_at_k", pa.float64()),
        ("recall_at_k", pa.float64()),
        ("mrr", pa.float64()),
        ("ndcg_at_10", pa.float64()),
    ]
)


@dataclass(frozen=True)
class RetrieveResult:
    out: Path
    n_questions: int
    n_skipped_rows: int
    metrics: dict[str, Any]
    seconds: float


def run_retrieve(config: ExperimentConfig, out: str | Path, progress: bool = True) -> RetrieveResult:
    """Load the dataset, retrieve for every question, write hits/questions/metrics to ``out``."""
    start = time.perf_counter()
    run = RunDir(out)
    run.save_config(config)
    dataset = load_dataset(config.data)
    stage = RetrievalStage(config)
    k = config.retrieval.top_k
    hit_rows: list[dict[str, Any]] = []
    q_rows: list[dict[str, Any]] = []
    scores = []
    for result in stage.run(dataset, progress=progress):
        q = result.question
        gold = set(q.gold_passage_ids)
        s = score_ranking(result.hits, gold, k)
        scores.append(s)
        for h in result.hits:
            p = h.passage
            hit_rows.append(
                dict(
                    question_id=q.id, passage_id=p.id, doc_id=p.doc_id, position=p.position,
                    retrieval_rank=h.rank, retrieval_score=h.score, title=p.title, text=p.text,
                    is_gold=p.doc_id in gold,
                )
            )
        q_rows.append(
            dict(
                question_id=q.id, question=q.question, n_hits=len(result.hits), n_gold=len(gold),
                **({} if s is None else {m: getattr(s, m) for m in QUESTIONS_SCHEMA.names[4:]}),
            )
        )
    run.write_table("hits", hit_rows, HITS_SCHEMA)
    run.write_table("questions", q_rows, QUESTIONS_SCHEMA)
    seconds = time.perf_counter() - start
    metrics = mean_scores(scores)
    run.write_json(
        "metrics",
        {
            "dataset": dataset.name,
            "n_questions": len(dataset.questions),
            "n_skipped_rows": len(dataset.skipped),
            "skipped_rows": [asdict(s) for s in dataset.skipped],
            "retriever": config.retrieval.retriever,
            "rerank": config.rerank.strategy,
            "scope": config.retrieval.scope,
            "top_k": k,
            "seconds": seconds,
            **metrics,
        },
    )
    return RetrieveResult(Path(out), len(dataset.questions), len(dataset.skipped), metrics, seconds)
