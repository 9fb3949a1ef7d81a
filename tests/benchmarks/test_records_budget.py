"""Per-item records stay compressed and within their stated budget (docs/trust.md: 4 MiB for
``benchmarks/results/records/``; a shared-evidence item takes about 0.7 KiB)."""

from __future__ import annotations

import gzip
import json

from benchmarks.machine import REPO

RECORDS = REPO / "benchmarks" / "results" / "records"
BUDGET = 4 * 1024 * 1024


def test_the_records_are_within_budget_and_per_item_files_are_gzip():
    files = [p for p in RECORDS.rglob("*") if p.is_file()]
    assert files, "no records committed"
    assert sum(p.stat().st_size for p in files) <= BUDGET
    for p in RECORDS.rglob("*.jsonl*"):
        if p.name == "sessions.jsonl":
            continue
        assert p.suffix == ".gz", f"{p}: per-item records are gzip"
        with gzip.open(p, "rt", encoding="utf-8") as f:
            first = json.loads(f.readline())
        # text-free: ids, roles and numbers only (the data sets' text never reaches the repo)
        assert not {"question", "text", "answer", "title", "baseline_answer", "scored_answer"} & set(first), p
        if p.parent.name == "lds_lasso64":  # benchmarks/lds_lasso64.py: ids, log-probs and masks
            assert {"question_id", "set", "reproduces", "passage_ids", "masks"} <= set(first), p
            assert all(isinstance(i, str) for i in first["passage_ids"]), p
            continue
        if p.parent.name == "retrieval":  # benchmarks/bench_retrieval.py: ids and per-query figures
            assert set(first) == {"question_id", "flat_ip_ndcg_at_10", "hnsw_recall_at_10_vs_flat"}, p
            continue
        if p.parent.name == "stages":  # benchmarks/bench_stages.py: ids, stages, ranks and log-probs
            assert {"id", "split", "stage", "gold_ranks", "used_ranks", "answer_sha1"} <= set(first), p
            continue
        assert {"id", "split", "passages", "contexts"} <= set(first), p
        assert not {"text", "title"} & set(first["passages"][0])
