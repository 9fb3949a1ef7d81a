"""Records in RAGAS' schemas (current and before 0.2) and in any naming through data.columns.

The RAGAS files are written by hand in its documented schema (``SingleTurnSample``: user_input,
retrieved_contexts, reference_contexts, response, reference; ``EvaluationDataset.to_csv`` writes
list columns as Python reprs through ``csv.DictWriter``, as :func:`write_ragas_csv` does).
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from ragray.config import DataConfig, load_config
from ragray.data import load_dataset, load_records
from ragray.data.outputs import load_outputs
from ragray.errors import ConfigError, InputError

# two samples: the first has no id, one gold context that was retrieved (2nd) and one that was not
RAGAS = [
    {"user_input": "Which ferry sails to Kell?",
     "retrieved_contexts": ["Puffins nest on the north stacks.", "The ferry to Kell is the Tern.",
                            "Bread is baked on Tuesdays."],
     "reference_contexts": ["The ferry to Kell is the Tern.", "The Tern was built in 1931."],
     "response": "The Tern", "reference": "the Tern"},
    {"id": "puffins", "user_input": "Where do puffins nest?",
     "retrieved_contexts": ["Puffins nest on the north stacks.", "The ferry sails at noon."],
     "reference_contexts": ["Puffins nest on the north stacks."],
     "response": "On the stacks.", "reference": "on the north stacks"},
]
LEGACY = [
    {"question": "Which ferry sails to Kell?", "contexts": ["The ferry to Kell is the Tern.", "Gulls."],
     "answer": "The Tern", "ground_truths": ["the Tern", "Tern"]},
    {"question": "Where do puffins nest?", "contexts": ["Puffins nest on the north stacks."],
     "answer": "On the stacks.", "ground_truth": "on the north stacks"},
]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_ragas_csv(path: Path, rows: list[dict]) -> Path:
    """As RAGAS' ``to_csv`` writes: DictWriter, so lists are their Python repr."""
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        for row in rows:
            writer.writerow(row)
    return path


def _check_ragas(ds, first_id: str) -> None:
    a, b = ds.questions
    assert (a.id, b.id) == (first_id, "puffins")
    assert a.question == "Which ferry sails to Kell?" and b.question == "Where do puffins nest?"
    assert [p.id for p in a.passages] == [f"{first_id}-c1", f"{first_id}-c2", f"{first_id}-c3"]
    assert [p.text for p in a.passages] == RAGAS[0]["retrieved_contexts"]  # rank = list order
    assert a.answers == ("the Tern",) and b.answers == ("on the north stacks",)
    assert a.gold_passage_ids == (f"{first_id}-c2",) and b.gold_passage_ids == ("puffins-c1",)
    assert a.meta["answer"] == "The Tern"  # the pipeline's answer: kept, never generated from
    assert a.meta["unretrieved_reference_contexts"] == 1 and "unretrieved_reference_contexts" not in b.meta


def test_ragas_jsonl(tmp_path):
    _check_ragas(load_records(write_jsonl(tmp_path / "ragas.jsonl", RAGAS)), "row-1")


def test_ragas_csv_with_python_list_literals(tmp_path):
    path = write_ragas_csv(tmp_path / "ragas.csv", RAGAS)
    assert "['Puffins nest" in path.read_text(encoding="utf-8")  # what RAGAS writes: not JSON
    _check_ragas(load_records(path), "row-2")  # the CSV record's line: the header is line 1


def test_ragas_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    columns = list(dict.fromkeys(k for r in RAGAS for k in r))
    pq.write_table(pa.table({c: [r.get(c) for r in RAGAS] for c in columns}), tmp_path / "ragas.parquet")
    _check_ragas(load_records(tmp_path / "ragas.parquet"), "row-1")


def test_ragas_through_load_dataset_and_for_score(tmp_path):
    path = write_jsonl(tmp_path / "ragas.jsonl", RAGAS)
    assert load_dataset(DataConfig(path=str(path))).questions == load_records(path).questions
    records, skipped = load_outputs(path)
    assert skipped == [] and [r.answer for r in records] == ["The Tern", "On the stacks."]
    assert records[0].gold_passage_ids == ("row-1-c2",) and records[1].golds == ("on the north stacks",)


def test_ragas_context_ids_name_the_passages(tmp_path):
    row = {"id": 7, "user_input": "q?", "retrieved_contexts": ["a", "", "b"], "retrieved_context_ids": ["d1", "d2", 3],
           "reference_context_ids": ["3", "d9"], "response": "r"}
    (q,) = load_records(write_jsonl(tmp_path / "ids.jsonl", [row])).questions
    assert q.id == "7" and [p.id for p in q.passages] == ["d1", "3"]  # the empty context is skipped
    assert q.gold_passage_ids == ("3",) and q.meta["unretrieved_reference_contexts"] == 1


def test_legacy_schema(tmp_path):
    for path in (write_jsonl(tmp_path / "old.jsonl", LEGACY), write_ragas_csv(tmp_path / "old.csv", LEGACY)):
        a, b = load_records(path).questions
        assert [p.text for p in a.passages] == LEGACY[0]["contexts"] and a.passages[0].id == f"{a.id}-c1"
        assert a.answers == ("the Tern", "Tern") and b.answers == ("on the north stacks",)
        assert a.meta["answer"] == "The Tern" and a.gold_passage_ids == ()
        records, _ = load_outputs(path)
        assert [r.golds for r in records] == [("the Tern", "Tern"), ("on the north stacks",)]


def test_column_mapping(tmp_path):
    rows = [{"qid": "a", "query": "Which ferry?", "docs": ["The ferry is the Tern.", "Gulls."], "gold": "Tern",
             "out": "Tern"}]
    path = write_jsonl(tmp_path / "mine.jsonl", rows)
    columns = {"id": "qid", "question": "query", "passages": "docs", "answers": "gold", "answer": "out"}
    (q,) = load_records(path, columns=columns).questions
    assert (q.id, q.question, q.answers) == ("a", "Which ferry?", ("Tern",))
    assert [(p.id, p.text) for p in q.passages] == [("a-c1", "The ferry is the Tern."), ("a-c2", "Gulls.")]
    (r,), _ = load_outputs(path, columns=columns)
    assert (r.question, r.answer, r.golds) == ("Which ferry?", "Tern", ("Tern",))
    # a CSV through the config setting; without an id column the ids are row-<line>
    csv_path = tmp_path / "mine.csv"
    csv_path.write_text('query,docs\nWhich ferry?,"[""The ferry is the Tern.""]"\n', encoding="utf-8")
    config = DataConfig(path=str(csv_path), columns={"question": "query", "passages": "docs"})
    (q,) = load_dataset(config).questions
    assert q.id == "row-2" and [p.id for p in q.passages] == ["row-2-c1"]


def test_column_mapping_errors(tmp_path):
    csv_path = tmp_path / "mine.csv"
    csv_path.write_text("query,question\nq,r\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"mine\.csv:1: data\.columns reads question from column 'qry', which the "
                                         r"file does not have \(found: query, question\)"):
        load_records(csv_path, columns={"question": "qry"})
    with pytest.raises(InputError, match=r"mine\.csv:1: data\.columns reads question from column 'query', but the "
                                         r"file also has a 'question' column"):
        load_records(csv_path, columns={"question": "query"})
    path = write_jsonl(tmp_path / "m.jsonl", [{"query": "a?", "docs": ["x"]}, {"docs": ["y"], "text": "b?"}])
    with pytest.raises(InputError, match=r"m\.jsonl:2: 'query' is missing \(data\.columns reads question from it\)"):
        load_records(path, columns={"question": "query", "passages": "docs"})
    with pytest.raises(InputError, match=r"data\.columns \(--columns\) renames the columns of a records file"):
        load_dataset(DataConfig(path="demo", columns={"question": "query"}))
    with pytest.raises(ConfigError, match=r"data\.columns: unknown record field\(s\) 'query'; valid: id, question"):
        load_config(None, ["data.columns={query: question}"])
    with pytest.raises(ConfigError, match=r"data\.columns: column 'q' is mapped to both question and answers"):
        load_config(None, ["data.columns={question: q, answers: q}"])


def test_a_record_may_not_mix_schemas(tmp_path):
    rows = [RAGAS[1], {"user_input": "q?", "passages": [{"id": "a", "text": "t"}], "response": "r"}, LEGACY[0]]
    path = write_jsonl(tmp_path / "mixed.jsonl", rows)
    message = (r"mixed\.jsonl:2: mixes record schemas: it has RAGAS field\(s\) 'response', 'user_input' and "
               r"ragray field\(s\) 'passages'")
    with pytest.raises(InputError, match=message):
        load_records(path)
    ds = load_records(path, on_bad_row="skip")  # one record per schema is fine; the mixed one is skipped
    assert [q.question for q in ds.questions] == ["Where do puffins nest?", "Which ferry sails to Kell?"]
    assert [s.line for s in ds.skipped] == [2]
    csv_path = write_ragas_csv(tmp_path / "mixed.csv", [{"user_input": "q?", "question": "q?", "response": "r"}])
    with pytest.raises(InputError, match=r"mixed\.csv:1: the columns mix record schemas: RAGAS field\(s\) "
                                         r"'response', 'user_input' and ragray field\(s\) 'question'"):
        load_outputs(csv_path)


@pytest.mark.parametrize("name", ["custom.jsonl", "custom.csv"])
def test_no_schema_is_one_error_listing_the_columns(tmp_path, name):
    rows = [{"query": "q?", "docs": "x"}, {"query": "q2?", "docs": "y"}]
    path = write_jsonl(tmp_path / name, rows) if name.endswith("jsonl") else write_ragas_csv(tmp_path / name, rows)
    for load in (load_records, lambda p: load_outputs(p, on_bad_row="skip")):
        with pytest.raises(InputError) as info:
            load(path)
        text = str(info.value)
        assert re.match(rf"\S*{re.escape(name)}:1: the columns match no known record schema; found: query, docs\n",
                        text)
        assert "  ragray: question, " in text and "  RAGAS: user_input, retrieved_contexts, response, " in text
        assert "  RAGAS before 0.2: question, contexts, answer, ground_truth, ground_truths" in text
        assert "--columns question=<col>,passages=<col>" in text


@pytest.mark.parametrize(("row", "message"), [
    ({"user_input": ["hi"], "response": "r"}, "'user_input' is a list of messages: multi-turn samples"),
    ({"user_input": " ", "retrieved_contexts": ["c"]}, "'user_input' is empty"),
    ({"retrieved_contexts": ["c"], "response": "r"}, "'user_input' is missing"),
    ({"user_input": "q", "retrieved_contexts": "c", "retrieved_context_ids": ["a", "b"]},
     "'retrieved_context_ids' has 2 ids for 1 retrieved contexts"),
    ({"user_input": "q", "retrieved_contexts": [1]}, "'retrieved_contexts' item 1 must be a string, got an integer"),
    ({"user_input": "q", "retrieved_contexts": ["c"], "response": 3}, "'response' must be a string, got an integer"),
    ({"question": "q", "contexts": ["c"], "ground_truth": "a", "ground_truths": ["a"]},
     "give either 'ground_truth' or 'ground_truths', not both"),
    ({"id": "x", "text": "t"}, "names no record field: expected 'question'"),
])
def test_bad_rows_name_the_files_fields(tmp_path, row, message):
    path = write_jsonl(tmp_path / "r.jsonl", [RAGAS[1], row])
    with pytest.raises(InputError, match=rf"r\.jsonl:2: .*{re.escape(message)}"):
        load_records(path)


def test_native_files_read_as_before(tmp_path):
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "records"
    ds = load_records(fixtures / "tiny.jsonl")
    assert [q.id for q in ds.questions] == ["q1", "q2", "q3"]
    # a native CSV list cell written as a Python literal reads like the JSON one
    path = tmp_path / "qa.csv"
    path.write_text("id,question,passages,answers\nq1,Who?,\"[{'id': 'p', 'text': 'Edda.'}]\",\"['Edda']\"\n",
                    encoding="utf-8")
    (q,) = load_records(path).questions
    assert q.passages[0].text == "Edda." and q.answers == ("Edda",)
