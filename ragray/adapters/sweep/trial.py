"""One sweep trial: ``ragray run`` on the trial's config, then its step-level metrics.

The trial runs the same pipeline as the CLI (:func:`ragray.pipeline.influence.run_influence`) into
``<sweep>/trials/<id>/`` with ``resume=True``, so a trial restarted after an interruption keeps
its finished questions. Its metrics (see :mod:`ragray.adapters.sweep.catalog`) come from the question
rows the run returns: per question for retrieval (the run records the ranking metrics), generation
and influence, per corpus for chunking; plus cost and latency for tie-breaking.

While it runs, every ``every`` finished questions (resumed ones included) ``on_step`` gets the
running step metrics (:func:`running_metrics`): what Tune's schedulers and TensorBoard see.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ragray.config import ExperimentConfig
from ragray.pipeline.influence import run_influence
from ragray.rows.influence import QuestionRow
from ragray.rows.summaries import RunSummary

__all__ = ["run_trial", "question_metrics", "running_metrics", "trial_summary"]


def _num(value: Any) -> float | None:
    if value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def question_metrics(questions: Sequence[QuestionRow]) -> list[dict[str, Any]]:
    """Per-question values of the catalog's metrics (None where not measurable)."""
    out = []
    for q in questions:
        measured = q.state == "measured"
        rho = _num(q.spearman_rho) if measured else None
        hallucination = _num(q.hallucination)
        noise = _num(q.causal_noise_ratio)
        out.append({
            "question_id": q.question_id,
            "hit_at_k": _num(q.hit_at_k),
            "recall_at_k": _num(q.recall_at_k),
            "mrr": _num(q.mrr),
            "ndcg_at_10": _num(q.ndcg_at_10),
            "em": _num(q.baseline_em),
            "f1": _num(q.f1),
            "answer_similarity": _num(q.sim_answer_gold),
            "grounding": _num(q.grounding),
            "faithful": None if hallucination is None else 1.0 - hallucination,
            "rank_agreement": None if rho is None else (rho + 1) / 2,
            "not_divergent": (0.0 if q.divergent else 1.0) if measured else None,
            "usage_ndcg": _num(q.usage_ndcg),
            "aligned": None if q.misaligned is None else 1.0 - float(q.misaligned),
            "used_context": None if noise is None else 1.0 - noise,
            "seconds": _num(q.seconds),
            "cost_usd": _num(q.cost_usd),
            "error": q.error,
        })
    return out


def _chunking(config: ExperimentConfig) -> dict[str, float | None]:
    """Corpus-level chunking metrics when ``metrics.chunking`` is on (they embed a sample)."""
    if not config.metrics.chunking:
        return {}
    from ragray.data import load_dataset
    from ragray.encoders import SentenceEncoder
    from ragray.metrics.chunking import chunk_metrics
    from ragray.retrieval.stage import RetrievalStage

    stage = RetrievalStage(config)
    dataset = load_dataset(config.data)
    answers = [a for q in dataset.questions for a in q.answers[:1]]
    m = chunk_metrics(stage.chunks(dataset), SentenceEncoder(config.metrics.encoder, cache=False), answers=answers,
                      max_chunks=config.metrics.chunking_sample, seed=config.seed)
    cms = m.get("cohesion_minus_separation")
    return {"chunk_coverage": m.get("coverage"),
            "chunk_cohesion": None if cms is None else min(1.0, max(0.0, (cms + 1) / 2)),
            "n_chunks": m.get("n_chunks"), "chunk_tokens_mean": m.get("tokens_mean")}


def _mean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return float(np.mean(vals)) if vals else None


def trial_summary(per_q: list[dict[str, Any]], run_summary: RunSummary,
                  chunking: dict[str, Any]) -> dict[str, Any]:
    """Step-level means of one trial plus its cost and latency (the leaderboard's columns)."""
    from ragray.adapters.sweep.catalog import METRICS

    out: dict[str, Any] = {name: _mean([q[name] for q in per_q]) for name in METRICS if name in per_q[0]} \
        if per_q else {}
    out.update({k: v for k, v in chunking.items()})
    tokens = (run_summary.mean_prompt_tokens or 0) + (run_summary.mean_completion_tokens or 0)
    calls = run_summary.n_calls or 0
    n = max(1, run_summary.n_questions or len(per_q))
    costs = [q["cost_usd"] for q in per_q if q["cost_usd"] is not None]
    out.update({
        "n_questions": run_summary.n_questions,
        "n_measured": run_summary.n_measured,
        "n_errors": sum(1 for q in per_q if q["error"]),
        "mean_rho": run_summary.mean_spearman,
        "divergent_rate": run_summary.divergent_rate,
        "mean_dominance": run_summary.mean_dominance,
        "wasted_context": run_summary.quality.causal_noise_ratio if run_summary.quality else None,
        "latency_s": _mean([q["seconds"] for q in per_q]),  # per question, all its calls
        "tokens_per_question": tokens * calls / n,
        "cost_usd_per_question": sum(costs) / n if costs else None,
    })
    return out


def running_metrics(per_q: list[dict[str, Any]], weights: Mapping[str, float]) -> dict[str, float]:
    """The step metrics of the questions finished so far, as the leaderboard computes them: each
    catalog metric's mean, ``overall`` with its 95% CI, ``confidence`` and ``score`` (left out
    while unmeasurable, never reported as 0), and ``questions``: how many ran (Tune's time axis)."""
    from ragray.adapters.sweep.catalog import METRICS
    from ragray.adapters.sweep.score import score_trial

    out: dict[str, float] = {"questions": float(len(per_q))}
    for name in METRICS:
        value = _mean([q.get(name) for q in per_q])
        if value is not None:
            out[name] = value
    scored = score_trial(per_q, weights)
    for key in ("score", "overall", "overall_low", "overall_high", "confidence"):
        if scored.get(key) is not None:
            out[key] = float(scored[key])
    return out


def run_trial(config: ExperimentConfig, out: str | Path, *, every: int | None = None,
              on_step: Callable[[dict[str, float]], None] | None = None,
              weights: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Run the trial (resumable) and return ``{"summary": ..., "questions": [...]}``; with
    ``on_step``, the running metrics (scored with ``weights``) after every ``every`` questions."""
    out = Path(out)
    start = time.perf_counter()
    rows: list[QuestionRow] = []

    def step(record: Any) -> None:
        rows.append(record.question)
        if on_step is not None and every and len(rows) % every == 0:
            on_step(running_metrics(question_metrics(rows), weights or {}))

    result = run_influence(config, out, resume=True, progress=False, on_record=step if on_step else None)
    per_q = question_metrics([r.question for r in result.records])  # type: ignore[attr-defined]
    chunking = _chunking(config)
    for q in per_q:
        q.update({k: chunking[k] for k in ("chunk_coverage", "chunk_cohesion") if k in chunking})
    summary = trial_summary(per_q, result.summary, chunking)
    summary.update({f"cache_{k}": v for k, v in (result.summary.cache or {}).items()})
    summary["trial_seconds"] = time.perf_counter() - start
    return {"summary": summary, "questions": per_q, "out": str(out)}
