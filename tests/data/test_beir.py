"""BEIR folders: judged queries become questions, gold = qrels score > 0, corpus is global."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ragray.config import DataConfig
from ragray.data import detect_format, load_beir, load_dataset
from ragray.errors import InputError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "beir_tiny"


@pytest.fixture()
def beir(tmp_path: Path) -> Path:
    """A writable copy of the tiny BEIR folder."""
    return Path(shutil.copytree(FIXTURE, tmp_path / "beir_tiny"))


def test_load_test_split():
    ds = load_dataset(DataConfig(path=str(FIXTURE)))
    assert detect_format(FIXTURE) == "beir"
    assert ds.name == "beir_tiny"
    assert [q.id for q in ds.questions] == ["1", "2", "3"]  # 4 is judged in dev only, 5 never
    assert [q.gold_passage_ids for q in ds.questions] == [("doc1",), ("doc2", "doc1"), ()]
    assert ds.questions[1].meta["qrels"] == {"doc2": 2, "doc1": 1}
    assert all(q.passages == () and q.answers == () for q in ds.questions)
    assert [p.id for p in ds.corpus] == ["doc1", "doc2", "doc3", "doc4"]
    assert ds.corpus[0].title == "Tansy Brook mill"
    assert ds.corpus[0].meta == {"source": "town-archive"}  # BEIR "metadata" → Passage.meta
    assert ds.questions[0].question == "who built the mill"


def test_other_split_and_limit_keep_the_corpus():
    ds = load_dataset(DataConfig(path=str(FIXTURE), split="dev"))
    assert [(q.id, q.gold_passage_ids) for q in ds.questions] == [("4", ("doc4",))]
    limited = load_dataset(DataConfig(path=str(FIXTURE), limit=1))
    assert len(limited.questions) == 1 and len(limited.global_corpus()) == 4


def test_missing_split_lists_the_available_ones():
    with pytest.raises(InputError, match=r"qrels/train\.tsv not found \(data\.split='train'; "
                                         r"available splits: dev, test\)"):
        load_beir(FIXTURE, split="train")


def test_folder_without_queries_is_not_beir(beir):
    (beir / "queries.jsonl").unlink()
    with pytest.raises(InputError, match="a BEIR folder needs corpus.jsonl and queries.jsonl"):
        load_beir(beir)
    with pytest.raises(InputError, match="cannot tell the format of folder"):
        detect_format(beir)


def append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text)


@pytest.mark.parametrize(("line", "message"), [
    ("5\tdoc1\n", r"test\.tsv:7: expected 3 columns \(query-id, corpus-id, score\), got 2"),
    ("5\tdoc1\thigh\n", r"test\.tsv:7: score 'high' is not an integer"),
    ("9\tdoc1\t1\n", r"test\.tsv:7: query id '9' is not in queries\.jsonl"),
    ("5\tdoc9\t1\n", r"test\.tsv:7: corpus id 'doc9' is not in corpus\.jsonl"),
    ("1\tdoc1\t2\n",
     r"test\.tsv:7: conflicting score for \('1', 'doc1'\) \(first seen on line 2\)"),
])
def test_bad_qrels_line(beir, line, message):
    append(beir / "qrels" / "test.tsv", "\n" + line)  # line 6 is blank: not a row
    with pytest.raises(InputError, match=message):
        load_beir(beir)
    ds = load_beir(beir, on_bad_row="skip")
    assert [q.id for q in ds.questions] == ["1", "2", "3"]
    assert [(s.line, s.source.endswith("test.tsv")) for s in ds.skipped] == [(7, True)]


@pytest.mark.parametrize(("row", "message"), [
    ('{"_id": "6"}', r"queries\.jsonl:6: 'text' is missing"),
    ('{"_id": "6", "text": " "}', r"queries\.jsonl:6: 'text' is empty"),
    ('{"text": "no id"}', r"queries\.jsonl:6: '_id' is missing"),
    ('{"_id": "1", "text": "again"}',
     r"queries\.jsonl:6: duplicate id '1' \(first seen on line 1\)"),
    ('{"_id": "6", "text": ', r"queries\.jsonl:6: not valid JSON"),
])
def test_bad_query_line(beir, row, message):
    append(beir / "queries.jsonl", row + "\n")
    with pytest.raises(InputError, match=message):
        load_beir(beir)
    ds = load_beir(beir, on_bad_row="skip")
    assert len(ds.questions) == 3 and [s.line for s in ds.skipped] == [6]


def test_bad_corpus_line(beir):
    append(beir / "corpus.jsonl", '{"_id": "doc1", "title": "again", "text": "dup"}\n')
    with pytest.raises(InputError,
                       match=r"corpus\.jsonl:5: duplicate id 'doc1' \(first seen on line 1\)"):
        load_beir(beir)


def test_no_judged_query_is_an_error(beir):
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"no query of queries\.jsonl is judged in this split"):
        load_beir(beir)
