"""``ragray score``: quality metrics of an existing pipeline's outputs, nothing re-run.

Reads records (:mod:`ragray.data.outputs`), scores each (:mod:`ragray.metrics.quality`) and
writes ``scores.parquet`` (+ CSV), ``summary.json`` and ``config.yaml`` to the run directory.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from ragray.config import ExperimentConfig
from ragray.data.outputs import load_outputs
from ragray.metrics.answers import summarize_answers
from ragray.metrics.quality import QUALITY_KEYS, QualityItem, QualityScorer
from ragray.pipeline.questions import RunResult
from ragray.store.recording import recorded_run
from ragray.store.rundir import RunDir

__all__ = ["run_score", "SCORES_SCHEMA"]

SCORES_SCHEMA = pa.schema(
    [("id", pa.string()), ("question", pa.string()), ("answer", pa.string()), ("n_contexts", pa.int32()),
     ("golds", pa.list_(pa.string())), ("model", pa.string()),
     *[(k, pa.int64() if k.endswith("_tokens") else pa.float64()) for k in QUALITY_KEYS]]
)


def run_score(
    config: ExperimentConfig, records: str | Path, out: str | Path, *, scorer: QualityScorer | None = None
) -> RunResult:
    start = time.perf_counter()
    with recorded_run(config, "score", out) as recording:
        run = RunDir(out)
        run.save_config(config)
        outputs, skipped = load_outputs(records, config.data.on_bad_row)
        items = [
            QualityItem(
                question=r.question, answer=r.answer, contexts=tuple(p.text for p in r.passages), golds=r.golds,
                doc_ids=tuple(dict.fromkeys(p.doc_id for p in r.passages)), gold_ids=r.gold_passage_ids,
                latency_s=r.latency_s, prompt_tokens=r.prompt_tokens, completion_tokens=r.completion_tokens,
                model=r.model or config.generation.model,
            )
            for r in outputs
        ]
        scores = (scorer or QualityScorer(config.metrics)).score(items)
        rows: list[dict[str, Any]] = [
            {"id": r.id, "question": r.question, "answer": r.answer, "n_contexts": len(r.passages),
             "golds": list(r.golds), "model": i.model, **s}
            for r, i, s in zip(outputs, items, scores)
        ]
        run.write_table("scores", rows, SCORES_SCHEMA)
        labelled = [s["label_noise_ratio"] for s in scores if s["label_noise_ratio"] is not None]
        summary = {
            **summarize_answers(rows),
            "label_noise_ratio": sum(labelled) / len(labelled) if labelled else None,
            "n_with_gold_ids": len(labelled),
            "records": str(records),
            "skipped_rows": len(skipped),
            "skipped": [{"line": s.line, "reason": s.reason} for s in skipped],
            "encoder": config.metrics.encoder if config.metrics.embedding else None,
            "tau_recall": config.metrics.tau_recall,
            "tau_h": config.metrics.tau_h,
            "wall_seconds": time.perf_counter() - start,
        }
        run.write_json("summary", summary)
        recording.summary = summary
    return RunResult(run.path, summary, 0)
