"""Leaderboard files of a sweep: Parquet, CSV, Markdown, HTML, and the best config.

``best_config.yaml`` is the winning trial's full resolved config: ``ragray run
<sweep>/best_config.yaml`` reproduces its metrics (same seed, same data).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

__all__ = ["write_leaderboard", "COLUMNS"]

COLUMNS = [
    "rank", "trial_id", "label", "status", "score", "overall", "overall_low", "overall_high", "confidence",
    "hit_at_k", "recall_at_k", "mrr", "ndcg_at_10", "em", "f1", "answer_similarity", "grounding", "faithful",
    "usage_ndcg", "aligned", "rank_agreement", "not_divergent", "used_context", "chunk_coverage", "chunk_cohesion",
    "mean_rho", "divergent_rate", "mean_dominance", "wasted_context",
    "n_questions", "n_measured", "n_errors", "latency_s", "tokens_per_question", "cost_usd_per_question",
    "trial_seconds", "cache_chunksets_hit", "cache_chunksets_miss", "cache_indexes_hit", "cache_indexes_miss",
    "cache_retrievals_hit", "cache_retrievals_miss", "error", "out",
    # added later, so appended: a table's existing columns keep their places (scripts/same_tables.py)
    "node", "attempts", "gpus",
    # against the winner, paired by question (ragray.adapters.sweep.compare)
    "vs_best", "vs_best_low", "vs_best_high", "p_vs_best", "beaten", "questions_to_decide",
]
_TEXT = {"trial_id", "label", "status", "node", "error", "out", "gpus"}
_INT = {"rank", "n_questions", "n_measured", "n_errors", "attempts", "questions_to_decide",
        *(c for c in COLUMNS if c.startswith("cache_"))}
_BOOL = {"beaten"}


def _table(rows: Sequence[dict[str, Any]]) -> pa.Table:
    fields = [(c, pa.string() if c in _TEXT else pa.int64() if c in _INT else pa.bool_() if c in _BOOL
               else pa.float64()) for c in COLUMNS]
    data = {c: [r.get(c) for r in rows] for c, _ in fields}
    return pa.table(data, schema=pa.schema(fields))


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


SHOWN = ["rank", "label", "score", "overall", "confidence", "f1", "em", "mrr", "recall_at_k", "usage_ndcg", "mean_rho",
         "divergent_rate", "wasted_context", "latency_s", "tokens_per_question", "status", "vs_best", "beaten"]


def markdown(rows: Sequence[dict[str, Any]], title: str, decision: str | None = None) -> str:
    lines = [f"# {title}", "", *([decision, ""] if decision else []),
             "| " + " | ".join(SHOWN) + " |", "|" + "---|" * len(SHOWN)]
    lines += ["| " + " | ".join(_fmt(r.get(c)).replace("|", "\\|") for c in SHOWN) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def html_page(rows: Sequence[dict[str, Any]], title: str, scoring: dict[str, Any], decision: str | None = None) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in SHOWN)
    body = "".join(
        "<tr" + (' class="best"' if r.get("rank") == 1 else "") + ">"
        + "".join(f"<td>{html.escape(_fmt(r.get(c)))}</td>" for c in SHOWN) + "</tr>" for r in rows)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}td:nth-child(2){{text-align:left}}
tr.best{{background:#e8f5e9}}code{{background:#f4f4f4}}</style></head><body>
<h1>{html.escape(title)}</h1>
{f"<p><strong>{html.escape(decision)}</strong></p>" if decision else ""}
<p>score = overall × confidence; weights <code>{html.escape(json.dumps(scoring["weights"]))}</code>
(objective <code>{html.escape(scoring["objective"])}</code>); ties by cost, then latency.</p>
<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></body></html>
"""


def write_leaderboard(out: Path, rows: Sequence[dict[str, Any]], title: str, scoring: dict[str, Any],
                      best_config_yaml: str | None, decision: str | None = None) -> dict[str, Path]:
    """Write every leaderboard file under ``out``; returns their paths by kind."""
    out.mkdir(parents=True, exist_ok=True)
    table = _table(rows)
    paths = {"parquet": out / "leaderboard.parquet", "csv": out / "leaderboard.csv",
             "markdown": out / "leaderboard.md", "html": out / "leaderboard.html"}
    pq.write_table(table, paths["parquet"])
    pacsv.write_csv(table, paths["csv"])
    paths["markdown"].write_text(markdown(rows, title, decision), encoding="utf-8")
    paths["html"].write_text(html_page(rows, title, scoring, decision), encoding="utf-8")
    if best_config_yaml is not None:
        paths["best_config"] = out / "best_config.yaml"
        paths["best_config"].write_text(best_config_yaml, encoding="utf-8")
    return paths
