"""``ragray score``: quality metrics of an existing pipeline's outputs, nothing re-run.

Reads records (:mod:`ragray.data.outputs`), scores each (:mod:`ragray.metrics.quality`) and
writes ``scores.parquet`` (+ CSV), ``summary.json`` and ``config.yaml`` to the run directory.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragray.config import ExperimentConfig
from ragray.data.outputs import load_outputs
from ragray.metrics.answers import contains_gold, summarize_answers
from ragray.metrics.quality import QualityItem, QualityScorer
from ragray.pipeline.questions import RunResult
from ragray.rows.quality import ScoreRow
from ragray.rows.summaries import ScoreSummary, SkippedRow
from ragray.store.recording import recorded_run
from ragray.store.rundir import RunDir

__all__ = ["run_score"]


def _in_context(contexts: Sequence[str], golds: Sequence[str]) -> bool | None:
    """Some context contains a gold answer as whole words (None without a gold answer)."""
    if contains_gold("", golds) is None:
        return None
    return any(contains_gold(c, golds) for c in contexts)

def run_score(
    config: ExperimentConfig, records: str | Path | Sequence[Mapping[str, Any]], out: str | Path | None, *,
    scorer: QualityScorer | None = None
) -> RunResult:
    """Score a pipeline's own outputs: ``records``, a records file or rows given in memory."""
    start = time.perf_counter()
    run = RunDir(out)  # a refused --out is not recorded
    with recorded_run(config, "score", out) as recording:
        run.save_config(config)
        outputs, skipped = load_outputs(records, config.data.on_bad_row, config.data.columns)
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
        rows = [
            ScoreRow.from_dict({"id": r.id, "question": r.question, "answer": r.answer, "n_contexts": len(r.passages),
                                "golds": list(r.golds), "model": i.model, **s,
                                "answer_correct": contains_gold(r.answer, r.golds),
                                "context_has_gold": _in_context(i.contexts, r.golds)})
            for r, i, s in zip(outputs, items, scores)
        ]
        wrong = [r for r in rows if r.answer_correct is False]
        run.write_rows(ScoreRow, rows)
        labelled = [r.label_noise_ratio for r in rows if r.label_noise_ratio is not None]
        summary = ScoreSummary(
            **summarize_answers([r.as_dict() for r in rows]),
            label_noise_ratio=sum(labelled) / len(labelled) if labelled else None,
            n_with_gold_ids=len(labelled),
            n_correct=sum(r.answer_correct is True for r in rows),
            n_gold_in_context=sum(r.context_has_gold is True for r in rows),
            n_wrong_gold_in_context=sum(r.context_has_gold is True for r in wrong),
            n_wrong_gold_not_in_context=sum(r.context_has_gold is False for r in wrong),
            records=str(records),
            skipped_rows=len(skipped),
            skipped=tuple(SkippedRow(line=s.line, reason=s.reason) for s in skipped),
            encoder=config.metrics.encoder if config.metrics.embedding_on else None,
            tau_recall=config.metrics.tau_recall,
            tau_h=config.metrics.tau_h,
            wall_seconds=time.perf_counter() - start,
        )
        recording.summary = summary.as_dict()
        run.write_json("summary", recording.summary)
    return RunResult(run.path, summary, 0, files=run.all_files() if run.path is None else {}, tables=run.tables)
