"""``ragray audit``: retrieval integrity per query, a JSON report and a CI-friendly exit code.

For every query: retrieve ``audit.fetch`` passages, collapse them to documents in rank order,
keep the top ``audit.k`` documents and score them against the gold document ids
(:mod:`ragray.audit.integrity`), next to the ranking metrics at k. Writes ``audit_report.json``
(``summary`` + one entry per query, the seed's fields plus the document lists), ``audit.parquet``
(+ CSV) and ``config.yaml``. Exit status 0 when every scored query passes (and at least one was
scored), 1 otherwise; queries without ground truth are reported as UNSCORED.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ragray.audit.explain import explain_audits
from ragray.audit.integrity import FAIL, PASS, UNSCORED, audit_documents
from ragray.config import ExperimentConfig
from ragray.data import load_dataset
from ragray.pipeline.generators import ModelSource, call_cache_counts, open_generator, source_generator
from ragray.metrics.retrieval import doc_ranking, score_ranking
from ragray.report.report import write_report
from ragray.retrieval.stage import RetrievalStage, resolve_scope
from ragray.rows.audit import AuditEntry
from ragray.rows.summaries import AuditSummary
from ragray.store.recording import recorded_run
from ragray.store.rundir import RunDir
from ragray.types import Dataset, Hit

__all__ = ["AuditRun", "audit_entry", "run_audit", "summarize_audit"]

@dataclass(frozen=True)
class AuditRun:
    """An audit's run directory, its summary and one entry per query (``audit_report.json``)."""

    out: Path | None  # None: the audit is in memory (the Python API without out)
    summary: AuditSummary
    entries: tuple[AuditEntry, ...]
    #: an in-memory audit's files by name (empty on disk: they are in ``out``)
    files: Mapping[str, bytes] = field(default_factory=dict, repr=False)
    #: an in-memory audit's tables as built
    tables: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def exit_code(self) -> int:
        return self.summary.exit_code

    def report(self) -> dict[str, Any]:
        """``audit_report.json``'s content."""
        return {"summary": self.summary.as_dict(), "queries": [e.report_entry() for e in self.entries]}


def _mean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return round(sum(vals) / len(vals), 4) if vals else None


def audit_entry(qid: str, query: str, hits: Sequence[Hit], relevant_ids: Sequence[str], k: int,
                pass_score: int) -> AuditEntry:
    """One query's audit row: the top ``k`` documents of ``hits`` scored against ``relevant_ids``
    (:mod:`ragray.audit.integrity`), with the ranking metrics at ``k``; the LLM fields empty."""
    audit = audit_documents(doc_ranking(hits)[:k], relevant_ids, pass_score)
    ranking = score_ranking(hits, relevant_ids, k)
    return AuditEntry.from_dict({
        "query_id": qid, "query": query, **audit.report(), "pass_score": pass_score, "best_score": audit.best_score,
        "hit_at_k": ranking.hit_at_k if ranking else None, "mrr": ranking.mrr if ranking else None,
        "ndcg_at_10": ranking.ndcg_at_10 if ranking else None,
    })


def summarize_audit(entries: Sequence[AuditEntry], config: ExperimentConfig, scope: str | None = None,
                    **footer: Any) -> AuditSummary:
    """``audit_report.json``'s summary: PASS/FAIL counts and the means over scored queries."""
    counts = Counter(e.status for e in entries)
    scored = [e for e in entries if e.status != UNSCORED]
    failed = [e for e in entries if e.status == FAIL]
    pass_score = config.audit.pass_score
    return AuditSummary(
        n_queries=len(entries),
        n_scored=len(scored),
        n_pass=counts.get(PASS, 0),
        n_fail=counts.get(FAIL, 0),
        n_unscored=counts.get(UNSCORED, 0),
        pass_rate=counts.get(PASS, 0) / len(scored) if scored else None,
        mean_score=_mean([e.score for e in scored]),
        mean_coverage=_mean([e.coverage for e in scored]),  # percent
        mean_precision=_mean([e.precision for e in scored]),
        mean_recall=_mean([e.recall for e in scored]),
        mean_noise_ratio=_mean([e.noise_ratio for e in scored]),  # percent
        hit_at_k=_mean([e.hit_at_k for e in scored]),
        mrr=_mean([e.mrr for e in scored]),
        ndcg_at_10=_mean([e.ndcg_at_10 for e in scored]),
        failing=tuple(e.query_id for e in entries if e.status == FAIL),
        unscored=tuple(e.query_id for e in entries if e.status == UNSCORED),
        n_fail_missed=sum(not e.found_all for e in failed),
        n_fail_noise_only=sum(e.found_all for e in failed),
        cannot_pass=tuple(e.query_id for e in scored if e.cannot_pass(pass_score)),
        k=config.audit.k,
        pass_score=pass_score,
        retriever=config.retrieval.retriever,
        scope=scope or config.retrieval.scope,
        dataset=config.data.path,
        **footer,
    )


def run_audit(
    config: ExperimentConfig, out: str | Path | None, *, progress: bool = True, generator: ModelSource | None = None,
    dataset: Dataset | None = None
) -> AuditRun:
    """Audit every query of ``config.data`` (see the module docstring); ``dataset``: a data set
    given in memory in its place."""
    start = time.perf_counter()
    run = RunDir(out)  # a refused --out is not recorded
    with recorded_run(config, "audit", out) as recording:
        run.save_config(config)
        ac = config.audit
        fetch = max(ac.k, ac.fetch)
        retrieval = config.retrieval.model_copy(update={"top_k": fetch})
        stage = RetrievalStage(config.model_copy(update={"retrieval": retrieval}))
        dataset = load_dataset(config.data, given=dataset)
        entries = [audit_entry(qh.question.id, qh.question.question, qh.hits, qh.question.gold_passage_ids,
                               ac.k, ac.pass_score) for qh in stage.run(dataset, progress=progress)]
        calls: dict[str, int] | None = None  # the LLM steps' call-cache hits and misses
        if ac.llm and entries:
            gen = source_generator(generator) if generator is not None else open_generator(config)
            try:
                entries = explain_audits(gen, entries)
            finally:
                calls = call_cache_counts(gen)
                if generator is None:
                    gen.close()
        summary = summarize_audit(entries, config, resolve_scope(config.retrieval, dataset),
                                  skipped_rows=len(dataset.skipped), wall_seconds=time.perf_counter() - start,
                                  cache=calls or None)
        result = AuditRun(run.path, summary, tuple(entries))
        run.write_json("audit_report", result.report())
        run.write_rows(AuditEntry, entries)
        write_report(run)
        recording.summary = summary.as_dict()
    return replace(result, files=run.all_files(), tables=run.tables) if run.path is None else result
