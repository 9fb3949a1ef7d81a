"""`ragray score --records` on RAGAS files (current and before 0.2) and through --columns.

No model: the embedding metrics are off (``metrics.embedding=false``), so what is scored is exact
match / token F1 against the gold answers and the label noise ratio from the gold passage ids
(the retrieved contexts that equal a reference context). Files are written by hand in RAGAS'
documented schema (see tests/data/test_schemas.py).
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from ragray.adapters.cli import main
from tests.data.test_schemas import LEGACY, RAGAS, write_jsonl, write_ragas_csv

NO_MODEL = ["--set", "metrics.embedding=false", "--set", "history.record=false", "--no-progress"]


def score(tmp_path, records, *extra: str) -> dict[str, dict]:
    out = tmp_path / "run"
    assert main(["score", "--records", str(records), "--out", str(out), *NO_MODEL, *extra]) == 0
    return {r["id"]: r for r in pq.read_table(out / "scores.parquet").to_pylist()}


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_score_reads_ragas_records(tmp_path, monkeypatch, capsys, fmt):
    monkeypatch.chdir(tmp_path)
    path = (write_jsonl(tmp_path / "ragas.jsonl", RAGAS) if fmt == "jsonl"
            else write_ragas_csv(tmp_path / "ragas.csv", RAGAS))
    rows = score(tmp_path, path)
    first, puffins = rows["row-1" if fmt == "jsonl" else "row-2"], rows["puffins"]
    assert first["answer"] == "The Tern" and first["golds"] == ["the Tern"] and first["n_contexts"] == 3
    assert (first["em"], first["f1"]) == (1.0, 1.0)
    # "On the stacks." vs "on the north stacks": 2 shared tokens of 2 and 3 -> F1 = 2*1*(2/3)/(1+2/3) = 0.8
    assert puffins["em"] == 0.0 and puffins["f1"] == pytest.approx(0.8)
    # gold = the 2nd of 3 retrieved contexts: 2 of 3 documents are noise; puffins' gold is its 1st of 2
    assert first["label_noise_ratio"] == pytest.approx(2 / 3) and first["label_coverage"] == 1.0
    assert puffins["label_noise_ratio"] == 0.5
    assert first["grounding"] is None  # embedding metrics off: no model was loaded
    out = capsys.readouterr().out
    assert "ragray score: 2 records (2 with gold answers, 0 skipped)" in out
    summary = json.loads((tmp_path / "run" / "summary.json").read_text(encoding="utf-8"))
    assert summary["n"] == 2 and summary["n_with_gold_ids"] == 2


def test_score_reads_the_older_ragas_schema(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = score(tmp_path, write_jsonl(tmp_path / "old.jsonl", LEGACY))
    assert rows["row-1"]["golds"] == ["the Tern", "Tern"] and rows["row-1"]["em"] == 1.0
    assert rows["row-2"]["golds"] == ["on the north stacks"] and rows["row-2"]["f1"] == pytest.approx(0.8)


def test_score_with_columns(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write_jsonl(tmp_path / "mine.jsonl", [
        {"query": "Which ferry?", "docs": ["The ferry is the Tern."], "said": "Tern", "truth": ["Tern"]}])
    rows = score(tmp_path, path, "--columns", "question=query,passages=docs,answer=said,answers=truth")
    assert rows["row-1"]["em"] == 1.0 and rows["row-1"]["n_contexts"] == 1


def test_score_names_the_columns_of_a_file_in_no_schema(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = write_jsonl(tmp_path / "mine.jsonl", [{"query": "Which ferry?", "said": "Tern"}])
    assert main(["score", "--records", str(path), "--out", str(tmp_path / "run"), *NO_MODEL]) != 0
    err = capsys.readouterr().err
    assert "the columns match no known record schema; found: query, said" in err
    assert "RAGAS: user_input, retrieved_contexts, response" in err and "--columns question=<col>" in err
