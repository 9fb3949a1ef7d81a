"""The real evaluation sets of ../shared/data load with the counts of its README.

Nothing from those files is copied into the repo: conversions are written to tmp_path only.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from ragray.config import DataConfig
from ragray.data import load_beir, load_dataset
from ragray.types import Dataset

pytestmark = pytest.mark.realdata

# file -> (records, corpus size, corpus comes from a corpus file)
SETS = {
    "squad_v11_dev.jsonl": (1000, 2067, True),
    "hotpotqa_distractor_dev.jsonl": (588, 5716, False),
    "pubmedqa_pqal.jsonl": (1000, 1000, False),
    "scifact.jsonl": (300, 5183, True),
}


@pytest.fixture(scope="module")
def loaded(shared_data: Path) -> dict[str, Dataset]:
    return {name: load_dataset(DataConfig(path=str(shared_data / name))) for name in SETS}


@pytest.mark.parametrize("name", list(SETS))
def test_counts_and_gold_ids_in_corpus(loaded, name):
    ds = loaded[name]
    n_records, n_corpus, has_file = SETS[name]
    assert len(ds.questions) == n_records
    assert len(ds.global_corpus()) == n_corpus
    assert (ds.corpus is not None) == has_file
    assert ds.skipped == () and ds.documents is False
    corpus_ids = {p.id for p in ds.global_corpus()}
    assert len(corpus_ids) == n_corpus
    gold = [g for q in ds.questions for g in q.gold_passage_ids]
    assert gold and all(g in corpus_ids for g in gold)
    assert len({q.id for q in ds.questions}) == n_records


def test_set_specific_shapes(loaded):
    hotpot = loaded["hotpotqa_distractor_dev.jsonl"]
    sizes = [len(q.passages) for q in hotpot.questions]
    assert sizes.count(10) == 577 and min(sizes) == 2  # a few records carry fewer paragraphs
    assert all(len(q.gold_passage_ids) == 2 for q in hotpot.questions)
    for q in hotpot.questions:  # the two supporting paragraphs are among the record's own
        assert set(q.gold_passage_ids) <= {p.id for p in q.passages}
    squad = loaded["squad_v11_dev.jsonl"]
    assert all(q.answers and len(q.passages) == 1 for q in squad.questions)
    assert all(q.answers == () for q in loaded["scifact.jsonl"].questions)
    pubmed = loaded["pubmedqa_pqal.jsonl"]
    assert {a for q in pubmed.questions for a in q.answers} <= {"yes", "no", "maybe"}
    assert all("long_answer" in q.meta for q in pubmed.questions)


def test_limit_never_cuts_the_union_corpus(shared_data):
    ds = load_dataset(DataConfig(path=str(shared_data / "hotpotqa_distractor_dev.jsonl"), limit=5))
    assert len(ds.questions) == 5
    assert len(ds.global_corpus()) == 5716


def test_csv_and_parquet_copies_load_identically(shared_data, tmp_path, loaded):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    src = shared_data / "hotpotqa_distractor_dev.jsonl"
    rows = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines()]
    cols = ["id", "question", "answers", "passages", "gold_passage_ids", "meta"]
    with (tmp_path / "h.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(cols)
        for r in rows:
            writer.writerow([r[c] if isinstance(r[c], str) else json.dumps(r[c]) for c in cols])
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "h.parquet")
    ref = loaded["hotpotqa_distractor_dev.jsonl"].questions
    for name in ("h.csv", "h.parquet"):
        assert load_dataset(DataConfig(path=str(tmp_path / name))).questions == ref


def test_scifact_as_a_beir_folder_matches_the_records(shared_data, tmp_path, loaded):
    """Write SciFact in BEIR layout (tmp only) and check the BEIR loader agrees with the records."""
    ref = loaded["scifact.jsonl"]
    folder = tmp_path / "scifact"
    (folder / "qrels").mkdir(parents=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as fh:
        for p in ref.corpus:
            row = {"_id": p.id, "title": p.title, "text": p.text, "metadata": {}}
            fh.write(json.dumps(row) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as fh, \
            (folder / "qrels" / "test.tsv").open("w", encoding="utf-8") as qrels:
        qrels.write("query-id\tcorpus-id\tscore\n")
        for q in ref.questions:
            fh.write(json.dumps({"_id": q.id, "text": q.question}) + "\n")
            for g in q.gold_passage_ids:
                qrels.write(f"{q.id}\t{g}\t1\n")
    ds = load_beir(folder)
    assert [(q.id, q.question, q.gold_passage_ids) for q in ds.questions] == [
        (q.id, q.question, q.gold_passage_ids) for q in ref.questions]
    assert [p.id for p in ds.corpus] == [p.id for p in ref.corpus]
