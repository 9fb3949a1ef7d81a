"""Native records (JSONL / CSV / Parquet + corpus file): happy paths and every bad-row message."""

from __future__ import annotations

import csv
import re
import gzip
import json
import shutil
from pathlib import Path

import pytest

from ragray.config import DataConfig
from ragray.data import find_corpus, load_dataset, load_records
from ragray.errors import InputError
from ragray.types import SkippedRow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "records"


def rec(qid: str = "q1", **kw: object) -> dict:
    """A valid record; keyword arguments replace (or, set to ..., delete) fields."""
    row = {
        "id": qid,
        "question": f"question {qid}?",
        "answers": ["an answer"],
        "passages": [{"id": f"{qid}-p1", "title": "t", "text": "some text"},
                     {"id": f"{qid}-p2", "title": "t", "text": "other text"}],
        "gold_passage_ids": [f"{qid}-p1"],
        "meta": {},
    }
    for key, value in kw.items():
        if value is ...:
            del row[key]
        else:
            row[key] = value
    return row


def write(tmp_path: Path, rows: list, name: str = "qa.jsonl") -> Path:
    """Write rows (dicts become JSON, str/bytes are written raw) one per line."""
    path = tmp_path / name
    with path.open("wb") as fh:
        for row in rows:
            data = row if isinstance(row, bytes) else (
                row.encode() if isinstance(row, str) else json.dumps(row).encode())
            fh.write(data + b"\n")
    return path


def load(path: Path, **kw: object):
    return load_records(path, **kw)


# ---------------------------------------------------------------------------------------------
# happy paths


def test_tiny_jsonl_loads_every_field():
    ds = load(FIXTURES / "tiny.jsonl")
    assert ds.name == "tiny"
    assert [q.id for q in ds.questions] == ["q1", "q2", "q3"]
    q1 = ds.questions[0]
    assert q1.question == "Who built the water mill on Tansy Brook?"
    assert q1.answers == ("Edda Marsh", "the cooper Edda Marsh")
    assert [p.id for p in q1.passages] == ["brook#mill", "brook#bridge", "town#fair"]
    assert q1.passages[0].title == "Tansy Brook mill"
    assert q1.passages[0].doc_id == "brook#mill"
    assert q1.passages[0].meta == {"source": "town-archive"}
    assert q1.gold_passage_ids == ("brook#mill",)
    assert q1.meta == {"topic": "history"}
    assert ds.corpus is None and ds.skipped == () and ds.documents is False
    assert [p.id for p in ds.global_corpus()] == [
        "brook#mill", "brook#bridge", "town#fair", "town#school"]


def _same(a, b) -> None:
    assert a.questions == b.questions
    assert [q.meta for q in a.questions] == [q.meta for q in b.questions]
    assert [p.meta for q in a.questions for p in q.passages] == [
        p.meta for q in b.questions for p in q.passages]


def test_csv_equals_jsonl():
    _same(load(FIXTURES / "tiny.csv"), load(FIXTURES / "tiny.jsonl"))


def test_parquet_with_nested_columns_equals_jsonl(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [json.loads(line) for line in (FIXTURES / "tiny.jsonl").read_text().splitlines()]
    for r in rows:  # an empty struct cannot be written to Parquet: give every meta a key
        r["meta"] = {"topic": r["meta"].get("topic", "none")}
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "tiny.parquet")
    ds = load(tmp_path / "tiny.parquet")
    ref = load(FIXTURES / "tiny.jsonl")
    assert ds.questions == ref.questions
    assert ds.questions[0].passages[0].meta == {"source": "town-archive"}
    assert ds.questions[2].meta == {"topic": "none"}


def test_parquet_with_json_string_columns(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [json.loads(line) for line in (FIXTURES / "tiny.jsonl").read_text().splitlines()]
    flat = [{k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in r.items()}
            for r in rows]
    pq.write_table(pa.Table.from_pylist(flat), tmp_path / "tiny.parquet")
    _same(load(tmp_path / "tiny.parquet"), load(FIXTURES / "tiny.jsonl"))


def test_retrieval_only_set_with_corpus_file():
    ds = load(FIXTURES / "claims.jsonl")
    assert find_corpus(FIXTURES / "claims.jsonl") == FIXTURES / "claims.corpus.jsonl"
    assert [q.passages for q in ds.questions] == [(), (), ()]
    assert [p.id for p in ds.corpus] == ["d1", "d2", "d3", "d4"]  # "_id" accepted (d2)
    assert ds.corpus[0].meta == {"source": "town-archive"}
    assert ds.corpus[3].text == "Harvest fair"  # empty text: the title stands in
    assert ds.questions[0].answers == ()
    assert ds.questions[2].gold_passage_ids == ()


def test_gz_records_and_gz_corpus(tmp_path):
    for name in ("claims.jsonl", "claims.corpus.jsonl"):
        with gzip.open(tmp_path / f"{name}.gz", "wb") as fh:
            fh.write((FIXTURES / name).read_bytes())
    ds = load(tmp_path / "claims.jsonl.gz")
    assert ds.name == "claims"
    assert len(ds.questions) == 3 and len(ds.corpus) == 4


def test_explicit_corpus_overrides_lookup(tmp_path):
    shutil.copy(FIXTURES / "claims.jsonl", tmp_path / "mine.jsonl")
    with pytest.raises(InputError, match="'passages' is empty and there is no corpus file"):
        load(tmp_path / "mine.jsonl")
    ds = load_dataset(DataConfig(path=str(tmp_path / "mine.jsonl"),
                                 corpus=str(FIXTURES / "claims.corpus.jsonl")))
    assert len(ds.corpus) == 4


def test_extra_keys_go_to_meta_and_answers_may_be_empty(tmp_path):
    row = rec(answers=[], source="PubMed")
    row["passages"][0]["source"] = "PubMed"
    row["passages"][0]["meta"] = {"year": 2001}
    ds = load(write(tmp_path, [row]))
    q = ds.questions[0]
    assert q.answers == () and q.meta == {"source": "PubMed"}
    assert q.passages[0].meta == {"source": "PubMed", "year": 2001}


def test_null_optional_fields_count_as_absent(tmp_path):
    row = rec(answers=None, gold_passage_ids=None, meta=None)
    row["passages"][0].update(title=None, meta=None)
    q = load(write(tmp_path, [row])).questions[0]
    assert (q.answers, q.gold_passage_ids, dict(q.meta)) == ((), (), {})
    assert (q.passages[0].title, dict(q.passages[0].meta)) == ("", {})


def test_int_ids_become_strings_and_blank_lines_are_not_rows(tmp_path):
    row = rec(id=7, passages=[{"id": 1, "text": "x"}], gold_passage_ids=[1])
    ds = load(write(tmp_path, ["", row, "   "]))
    assert ds.questions[0].id == "7" and ds.questions[0].gold_passage_ids == ("1",)
    assert ds.skipped == ()


def test_utf8_bom_is_accepted(tmp_path):
    path = write(tmp_path, [b"\xef\xbb\xbf" + json.dumps(rec()).encode()])
    assert load(path).questions[0].id == "q1"


def test_limit_keeps_the_whole_corpus():
    ds = load_dataset(DataConfig(path=str(FIXTURES / "tiny.jsonl"), limit=1))
    assert [q.id for q in ds.questions] == ["q1"]
    assert len(ds.global_corpus()) == 4  # town#school only appears in q2/q3


# ---------------------------------------------------------------------------------------------
# bad rows: one message each, naming file and 1-based line


BAD_ROWS = [
    (rec(question=...), r"qa\.jsonl:2: 'question' is missing"),
    (rec(question="   "), r"qa\.jsonl:2: 'question' is empty"),
    (rec(question=["x"]), r"qa\.jsonl:2: 'question' must be a string, got a list"),
    (rec(id=""), r"qa\.jsonl:2: 'id' is empty"),
    (rec(id=True), r"qa\.jsonl:2: 'id' must be a string, got a boolean"),
    ('{"id": "q2", "question": ', r"qa\.jsonl:2: not valid JSON: Expecting value \(column 26\)"),
    ("[1, 2]", r"qa\.jsonl:2: not a JSON object \(got a list\)"),
    (b'{"id": "q2", "question": "caf\xe9?"}', r"qa\.jsonl:2: not UTF-8 \(byte 0xe9 at column 30\)"),
    (rec(passages="p1"), r"qa\.jsonl:2: 'passages' must be a list of objects, got a string"),
    (rec(passages=["p1"]), r"qa\.jsonl:2: 'passages' must be a list of objects \(passage 1 is "),
    (rec(passages=[{"id": "a", "text": "x"}, {"id": "b"}]),
     r"qa\.jsonl:2: passage 2 has no 'text'"),
    (rec(passages=[{"text": "x"}]), r"qa\.jsonl:2: passage 1 has no 'id'"),
    (rec(passages=[{"id": "a", "text": "x"}, {"id": "b", "text": " "}]),
     r"qa\.jsonl:2: passage 2 has an empty 'text'"),
    (rec(passages=[{"id": "a", "text": 3}]), r"qa\.jsonl:2: passage 1 'text' must be a string"),
    (rec(passages=[{"id": "a", "text": "x", "title": 5}]),
     r"qa\.jsonl:2: passage 1 'title' must be a string, got an integer"),
    (rec(passages=[{"id": "a", "text": "x", "meta": []}]),
     r"qa\.jsonl:2: passage 1 'meta' must be an object"),
    (rec(passages=[{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], gold_passage_ids=[]),
     r"qa\.jsonl:2: passage 2 repeats id 'a' \(passage 1\)"),
    (rec(passages=[]), r"qa\.jsonl:2: 'passages' is empty and there is no corpus file"),
    (rec(passages=...), r"qa\.jsonl:2: 'passages' is empty and there is no corpus file"),
    (rec(answers="x"), r"qa\.jsonl:2: 'answers' must be a list of strings, got a string"),
    (rec(answers=["a", ""]), r"qa\.jsonl:2: answer 2 is empty"),
    (rec(gold_passage_ids=["q1-p9"]),
     r"qa\.jsonl:2: gold id 'q1-p9' is not among the passages of any record"),
    (rec(meta=[1]), r"qa\.jsonl:2: 'meta' must be an object, got a list"),
    (rec("q0"), r"qa\.jsonl:2: duplicate id 'q0' \(first seen on line 1\)"),
    (rec(passages=[{"id": "q0-p1", "text": "changed"}], gold_passage_ids=[]),
     r"qa\.jsonl:2: passage 1 \(id 'q0-p1'\) differs from the passage with that id on line 1"),
]


@pytest.mark.parametrize(("bad", "message"), BAD_ROWS, ids=[m for _, m in BAD_ROWS])
def test_bad_row_message(tmp_path, bad, message):
    path = write(tmp_path, [rec("q0"), bad, rec("q5")])
    with pytest.raises(InputError, match=message):
        load(path)


@pytest.mark.parametrize(("bad", "message"), BAD_ROWS, ids=[m for _, m in BAD_ROWS])
def test_bad_row_is_skipped_and_recorded(tmp_path, bad, message):
    path = write(tmp_path, [rec("q0"), bad, rec("q5")])
    ds = load(path, on_bad_row="skip")
    assert [q.id for q in ds.questions] == ["q0", "q5"]
    assert len(ds.skipped) == 1
    skipped = ds.skipped[0]
    assert (skipped.source, skipped.line) == (str(path), 2)
    assert f"{skipped.source}:{skipped.line}: {skipped.reason}".startswith(str(path))
    assert re.search(message.split(":2: ", 1)[1], skipped.reason)


def test_gold_id_must_be_in_corpus_file(tmp_path):
    shutil.copy(FIXTURES / "claims.corpus.jsonl", tmp_path / "qa.corpus.jsonl")
    path = write(tmp_path, [rec(passages=[], gold_passage_ids=["d1"]),
                            rec("q2", passages=[], gold_passage_ids=["d9"])])
    with pytest.raises(InputError, match=r"qa\.jsonl:2: gold id 'd9' is not in the corpus "
                                         r"\(.*qa\.corpus\.jsonl\)"):
        load(path)


def test_corpus_file_errors_name_the_corpus_file(tmp_path):
    write(tmp_path, [rec()])
    corpus = [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]
    write(tmp_path, corpus, name="qa.corpus.jsonl")
    with pytest.raises(InputError,
                       match=r"qa\.corpus\.jsonl:2: duplicate id 'a' \(first seen on line 1\)"):
        load(tmp_path / "qa.jsonl")
    write(tmp_path, [{"id": "a", "title": "", "text": ""}], name="qa.corpus.jsonl")
    with pytest.raises(InputError, match=r"qa\.corpus\.jsonl:1: 'text' is empty"):
        load(tmp_path / "qa.jsonl")
    write(tmp_path, [{"title": "x", "text": "y"}], name="qa.corpus.jsonl")
    with pytest.raises(InputError, match=r"qa\.corpus\.jsonl:1: 'id' is missing"):
        load(tmp_path / "qa.jsonl")
    write(tmp_path, [""], name="qa.corpus.jsonl")
    with pytest.raises(InputError, match=r"qa\.corpus\.jsonl: the corpus is empty"):
        load(tmp_path / "qa.jsonl")


# ---------------------------------------------------------------------------------------------
# skip mode: counts, cascades, never a silent drop


def test_skip_mode_counts_every_bad_row(tmp_path):
    rows = [rec("q1"), rec("q2", question=""), "{oops", rec("q1"), rec("q4"),
            rec("q5", passages=[])]
    ds = load_dataset(DataConfig(path=str(write(tmp_path, rows)), on_bad_row="skip"))
    assert [q.id for q in ds.questions] == ["q1", "q4"]
    assert [(s.line, s.reason.split(" (")[0]) for s in ds.skipped] == [
        (2, "'question' is empty"),
        (3, "not valid JSON: Expecting property name enclosed in double quotes"),
        (4, "duplicate id 'q1'"),
        (6, "'passages' is empty and there is no corpus file"),
    ]
    assert all(isinstance(s, SkippedRow) for s in ds.skipped)


def test_skip_cascades_to_rows_whose_gold_lived_in_a_skipped_row(tmp_path):
    shared = {"id": "shared", "text": "the only copy"}
    rows = [
        rec("q1", passages=[{"id": "own", "text": "x"}], gold_passage_ids=["shared"]),
        rec("q2", passages=[shared], answers=["a", ""]),  # bad: its passage goes with it
        rec("q3"),
    ]
    ds = load(write(tmp_path, rows), on_bad_row="skip")
    assert [q.id for q in ds.questions] == ["q3"]
    assert sorted(s.line for s in ds.skipped) == [1, 2]


def test_all_rows_bad_is_an_error_even_when_skipping(tmp_path):
    path = write(tmp_path, [rec(question=""), rec("q2", question="")])
    with pytest.raises(InputError, match=r"qa\.jsonl: no questions \(2 bad rows skipped\)"):
        load(path, on_bad_row="skip")


# ---------------------------------------------------------------------------------------------
# file-level problems


def test_file_level_errors(tmp_path):
    with pytest.raises(InputError, match=r"dataset not found: .*nope\.jsonl"):
        load_dataset(DataConfig(path=str(tmp_path / "nope.jsonl")))
    with pytest.raises(InputError, match=r"dataset file not found"):
        load(tmp_path / "nope.jsonl")
    (tmp_path / "qa.txt").write_text("hello")
    with pytest.raises(InputError, match=r"unknown dataset file type '\.txt'"):
        load_dataset(DataConfig(path=str(tmp_path / "qa.txt")))
    with pytest.raises(InputError, match=r"empty\.jsonl: no questions"):
        load(write(tmp_path, ["", "  "], name="empty.jsonl"))
    with pytest.raises(InputError, match=r"is a corpus file"):
        load(FIXTURES / "claims.corpus.jsonl")
    (tmp_path / "bad.jsonl.gz").write_bytes(b"not gzip at all")
    with pytest.raises(InputError, match=r"bad\.jsonl\.gz: not a valid gzip file"):
        load(tmp_path / "bad.jsonl.gz")
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError, match=r"bad\.parquet: not a readable Parquet file"):
        load(tmp_path / "bad.parquet")


def test_format_override_reads_any_suffix(tmp_path):
    path = tmp_path / "qa.txt"
    path.write_bytes((FIXTURES / "tiny.jsonl").read_bytes())
    ds = load_dataset(DataConfig(path=str(path), format="jsonl"))
    assert len(ds.questions) == 3


# ---------------------------------------------------------------------------------------------
# CSV specifics


HEADER = ["id", "question", "answers", "passages", "gold_passage_ids", "meta"]
PASSAGES = json.dumps([{"id": "p1", "text": "one passage"}], indent=1)  # a 6-line cell


def write_csv(tmp_path: Path, rows: list[list[str]], header: list[str] = HEADER) -> Path:
    path = tmp_path / "qa.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def test_csv_line_is_the_records_first_line(tmp_path):
    rows = [["q1", "first?", "", PASSAGES, "p1", ""],  # spans lines 2-7
            ["q2", " ", "", PASSAGES, "", ""]]  # starts on line 8
    with pytest.raises(InputError, match=r"qa\.csv:8: 'question' is empty"):
        load(write_csv(tmp_path, rows))


def test_csv_plain_cells_and_empty_cells(tmp_path):
    rows = [["q1", "first?", "Paris", PASSAGES, "p1", ""],
            ["q2", "second?", "", PASSAGES, "", ""]]
    ds = load(write_csv(tmp_path, rows))
    assert ds.questions[0].answers == ("Paris",)
    assert ds.questions[0].gold_passage_ids == ("p1",)
    assert ds.questions[0].passages[0].text == "one passage"
    assert ds.questions[1].answers == () and ds.questions[1].meta == {}


def test_a_row_without_an_id_is_row_and_its_line(tmp_path):
    """Only the question is required: a question file a user wrote (``question,answers`` and a
    corpus beside it) runs as it is, its rows named as RAGAS files' are."""
    path = write(tmp_path, [rec("q0"), rec(id=...), rec(id=None, gold_passage_ids=[])])
    assert [q.id for q in load(path).questions] == ["q0", "row-2", "row-3"]
    rows = [["first?", "Paris", PASSAGES, "p1"], ["second?", "", PASSAGES, ""]]
    ds = load(write_csv(tmp_path, rows, header=["question", "answers", "passages", "gold_passage_ids"]))
    assert [q.id for q in ds.questions] == ["row-2", "row-8"]  # each record's first line (a cell spans 6)
    with pytest.raises(InputError, match=r"qa\.jsonl:2: duplicate id 'row-2' \(first seen on line 1\)"):
        load(write(tmp_path, [rec("row-2"), rec(id=..., passages=[{"id": "x", "text": "y"}], gold_passage_ids=[])]))


def test_csv_errors(tmp_path):
    with pytest.raises(InputError,
                       match=r"qa\.csv:1: missing column 'question' \(found: id, answers\)"):
        load(write_csv(tmp_path, [["q1", "a"]], header=["id", "answers"]))
    with pytest.raises(InputError, match=r"qa\.csv:2: 'passages' is not valid JSON"):
        load(write_csv(tmp_path, [["q1", "first?", "", "[{not json", "", ""]]))
    with pytest.raises(InputError, match=r"qa\.csv:2: has 3 cells, the header has 6"):
        load(write_csv(tmp_path, [["q1", "first?", ""]]))
    path = write_csv(tmp_path, [["q1", "first?", "", PASSAGES, "", ""]])
    with path.open("ab") as fh:
        fh.write(b'q2,caf\xe9?,,"[]",,\n')
    with pytest.raises(InputError, match=r"qa\.csv:8: not UTF-8"):
        load(path)
    ds = load(path, on_bad_row="skip")
    assert [q.id for q in ds.questions] == ["q1"] and ds.skipped[0].line == 8


def test_parquet_null_question_names_the_row(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [{"id": "q1", "question": "first?", "passages": '[{"id": "p", "text": "x"}]'},
            {"id": "q2", "question": None, "passages": '[{"id": "p", "text": "x"}]'}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "qa.parquet")
    with pytest.raises(InputError, match=r"qa\.parquet:2: 'question' is missing"):
        load(tmp_path / "qa.parquet")


# ---------------------------------------------------------------------------------------------
# the packaged demo set


def test_demo_keyword_loads_the_packaged_file(monkeypatch):
    import ragray.data.loading as loading

    monkeypatch.setattr(loading, "demo_path", lambda: FIXTURES / "tiny.jsonl")
    ds = load_dataset(DataConfig())  # path="demo" is the default
    assert ds.name == "demo" and len(ds.questions) == 3
    assert load_dataset(DataConfig(path="demo", limit=2)).questions[1].id == "q2"


def test_packaged_demo_file():
    from ragray.data import demo_path

    try:
        path = demo_path()
    except InputError as exc:
        assert "ragray/demo/demo.jsonl is missing" in str(exc)
        pytest.skip("ragray/demo/demo.jsonl is not written yet")
    assert path.name == "demo.jsonl" and path.parent.name == "demo"
    assert len(load_dataset(DataConfig()).questions) >= 1
