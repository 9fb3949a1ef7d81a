"""Per-passage results of another tool (CSV) turned into a ragray run directory.

Required columns: ``question_id``, ``passage_id``, ``retrieval_rank`` (1 = best) and ``influence``
(how much the answer depends on the passage, any non-negative scale: ContextCite scores, attention
or leave-one-out deltas). Optional: ``question``, ``doc_id``, ``retrieval_score``, ``is_gold``
(true/false/1/0), ``answer`` (or ``baseline_answer``). ragray's own ``passages.csv`` qualifies.
Influence ranks, Spearman ρ, dominance and the failure-mode flags are computed exactly as for a
ragray run (:func:`ragray.metrics.influence.analyze_influence`, thresholds from ``influence``), and
the run directory gets the same tables, ``summary.json`` and ``report.html``. Every problem is
reported as ``line N: what is wrong`` (CSV line numbers, the header being line 1).
"""

from __future__ import annotations

import csv
import io
import math
import re
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

from ragray.config import ExperimentConfig
from ragray.errors import InputError
from ragray.metrics.influence import analyze_influence
from ragray.metrics.summary import summarize_run
from ragray.metrics.used import used_marks
from ragray.report.report import write_report
from ragray.store.rundir import RunDir
from ragray.rows.influence import CallRow, InfluenceRecord, PassageRow, QuestionRow

__all__ = ["REQUIRED", "count_uploads", "import_csv", "parse_passages_csv"]

REQUIRED = ("question_id", "passage_id", "retrieval_rank", "influence")
MAX_ROWS = 200_000
_TRUE, _FALSE = {"true", "1", "yes"}, {"false", "0", "no", ""}


def _number(value: str, line: int, column: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise InputError(f"line {line}: {column} is not a number: {value!r}") from None
    if not math.isfinite(x):
        raise InputError(f"line {line}: {column} must be finite, got {value!r}")
    return x


def parse_passages_csv(text: str) -> dict[str, list[dict[str, Any]]]:
    """Rows grouped by question (file order), validated; raises :class:`InputError` on the first problem."""
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in reader.fieldnames or []]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise InputError(f"line 1: missing column(s) {', '.join(missing)}; required: {', '.join(REQUIRED)} "
                         f"(found: {', '.join(header) or 'no header'})")
    reader.fieldnames = header
    by_q: dict[str, list[dict[str, Any]]] = defaultdict(list)
    seen: set[tuple[str, str]] = set()
    ranks: dict[str, set[int]] = defaultdict(set)
    n = 0
    for n, raw in enumerate(reader, start=1):
        line = n + 1
        if n > MAX_ROWS:
            raise InputError(f"more than {MAX_ROWS} rows; split the file")
        row = {k: (v or "").strip() for k, v in raw.items() if k is not None}
        qid, pid = row["question_id"], row["passage_id"]
        if not qid or not pid:
            raise InputError(f"line {line}: question_id and passage_id must not be empty")
        if (qid, pid) in seen:
            raise InputError(f"line {line}: passage {pid!r} of question {qid!r} appears twice")
        seen.add((qid, pid))
        rank = _number(row["retrieval_rank"], line, "retrieval_rank")
        if rank < 1 or not rank.is_integer():
            raise InputError(f"line {line}: retrieval_rank must be an integer >= 1, got {row['retrieval_rank']!r}")
        if int(rank) in ranks[qid]:
            raise InputError(f"line {line}: question {qid!r} has retrieval_rank {int(rank)} twice")
        ranks[qid].add(int(rank))
        influence = _number(row["influence"], line, "influence")
        if influence < 0:
            raise InputError(f"line {line}: influence must be >= 0, got {row['influence']!r}")
        gold = row.get("is_gold", "").lower()
        if gold not in _TRUE | _FALSE:
            raise InputError(f"line {line}: is_gold must be true/false/1/0, got {row['is_gold']!r}")
        score = row.get("retrieval_score", "")
        by_q[qid].append({
            "passage_id": pid, "doc_id": row.get("doc_id") or pid, "retrieval_rank": int(rank),
            "retrieval_score": _number(score, line, "retrieval_score") if score else None,
            "influence": influence, "is_gold": gold in _TRUE,
            "question": row.get("question") or "", "answer": row.get("answer") or row.get("baseline_answer") or "",
        })
    if n == 0:
        raise InputError("the CSV has a header but no rows")
    return dict(by_q)


def _records(by_q: dict[str, list[dict[str, Any]]], config: ExperimentConfig) -> list[InfluenceRecord]:
    records = []
    for qid, rows in by_q.items():
        rows = sorted(rows, key=lambda r: r["retrieval_rank"])
        result = analyze_influence([r["retrieval_rank"] for r in rows], [r["influence"] for r in rows],
                                   config.influence)
        question = QuestionRow.from_dict({
            "question_id": qid, "question": next((r["question"] for r in rows if r["question"]), ""),
            "gold_answers": [], "baseline_answer": next((r["answer"] for r in rows if r["answer"]), ""),
            "n_passages": len(rows), **result.columns(),
            "n_calls": 0, "n_failed_calls": 0, "seconds": 0.0,
            "causal_noise_ratio": sum(1 for r in rows if r["influence"] <= config.influence.epsilon) / len(rows),
        })
        used = used_marks([r["influence"] for r in rows], rule=config.influence.used_rule,
                          threshold=config.influence.used_threshold, epsilon=config.influence.epsilon)
        passages = tuple(PassageRow(
            question_id=qid, passage_id=r["passage_id"], doc_id=r["doc_id"],
            retrieval_rank=r["retrieval_rank"], retrieval_score=r["retrieval_score"],
            influence=r["influence"], influence_rank=rank, is_gold=r["is_gold"], used=mark,
        ) for r, rank, mark in zip(rows, result.influence_rank, used))
        records.append(InfluenceRecord(question, passages, ()))
    return records


def count_uploads(root: str | Path) -> int:
    """How many uploaded runs (``upload-*`` folders) ``root`` holds."""
    try:
        return sum(1 for p in Path(root).iterdir() if p.name.startswith("upload-") and p.is_dir())
    except FileNotFoundError:
        return 0


def import_csv(text: str, root: str | Path, name: str, config: ExperimentConfig | None = None) -> Path:
    """Validate the CSV ``text`` and write it as run directory ``<root>/upload-<name>-<time>``;
    its summary names the file (``uploaded.file``: the name without folders, which the client chose)."""
    config = config or ExperimentConfig()
    by_q = parse_passages_csv(text)
    name = re.split(r"[\\/]", name)[-1][:200] or "upload.csv"
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(name).stem).strip("-")[:60] or "csv"
    out = Path(root) / f"upload-{safe}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{time.time_ns() % 10**6:06d}"
    run = RunDir(out)
    config = config.model_copy(update={"name": f"upload-{safe}"})
    run.save_config(config)
    records = _records(by_q, config)
    run.write_rows(QuestionRow, [r.question for r in records])
    run.write_rows(PassageRow, [p for r in records for p in r.passages])
    run.write_rows(CallRow, [])
    summary = replace(summarize_run(records, config, model_id="uploaded"), backend="uploaded", retriever="uploaded",
                      top_k=max(len(r.passages) for r in records),
                      uploaded={"file": name, "rows": sum(len(v) for v in by_q.values())})
    run.write_json("summary", summary.as_dict())
    write_report(out)
    return out
