"""Natural Questions parsing on hand-written rows shaped like `datasets` streaming rows."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from ragray.config import DataConfig
from ragray.data import load_dataset, parse_nq_rows
from ragray.data.nq import document_text
from ragray.errors import InputError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "nq_rows.jsonl"


@pytest.fixture()
def rows() -> list[dict]:
    return [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]


def test_keeps_rows_with_a_human_short_answer(rows):
    ds = parse_nq_rows(rows, limit=10)
    assert [q.id for q in ds.questions] == ["9001", "9003", "9004"]  # 9002 is yes/no only
    assert ds.documents is True and ds.corpus is None and ds.skipped == ()
    assert [q.answers for q in ds.questions] == [
        ("Marrow Bay Company",), ("312 metres",), ("1851",)]
    q = ds.questions[0]
    assert q.question == "who runs the quillon ferry"
    (doc,) = q.passages
    assert (doc.id, doc.title, doc.doc_id) == ("nq:9001", "Quillon Ferry", "nq:9001")
    assert q.gold_passage_ids == ("nq:9001",)
    assert doc.meta["url"] == "https://en.wikipedia.org/wiki/Quillon_Ferry"


def test_html_is_stripped_with_the_is_html_mask(rows):
    doc = parse_nq_rows(rows[:1]).questions[0].passages[0]
    assert doc.text == (
        "Quillon Ferry\n\n"
        "The Quillon Ferry crosses the Ashwater estuary every hour .\n\n"
        "It is run by the Marrow Bay Company since 1966 .\n\n"
        "Crossing : 12 minutes\n\n"
        "Boats : 2"
    )
    assert "<" not in doc.text


def test_answer_spans_point_into_the_document(rows):
    ds = parse_nq_rows(rows)
    for q in ds.questions:
        text = q.passages[0].text
        assert [text[s:e] for s, e in q.meta["answer_spans"]] == list(q.answers)


def test_stops_after_n_valid_samples_without_reading_further(rows):
    consumed = []

    def stream():
        for row in rows:
            consumed.append(row["id"])
            yield row

    ds = parse_nq_rows(stream(), limit=2)
    assert [q.id for q in ds.questions] == ["9001", "9003"]
    assert consumed == ["9001", "9002", "9003"]  # 9004 never pulled from the stream


def test_list_of_dicts_shape_is_accepted_too(rows):
    row = rows[3]
    tokens = row["document"]["tokens"]
    row["document"]["tokens"] = [dict(zip(tokens, cells, strict=True))
                                 for cells in zip(*tokens.values(), strict=True)]
    assert parse_nq_rows([row]).questions[0].answers == ("1851",)


def test_document_text_offsets():
    tokens = {"token": ["<P>", "a", "<B>", "b", "</B>", "</P>", "<P>", "c"],
              "is_html": [True, False, True, False, True, True, True, False]}
    text, spans = document_text(tokens)
    assert text == "a b\n\nc"
    assert spans == {1: (0, 1), 3: (2, 3), 7: (5, 6)}


def test_malformed_row_names_the_row(rows):
    del rows[1]["document"]
    with pytest.raises(InputError, match=r"natural_questions:2: not shaped like a Natural "
                                         r"Questions row \(missing 'document'\)"):
        parse_nq_rows(rows)
    ds = parse_nq_rows(rows, on_bad_row="skip")
    assert [q.id for q in ds.questions] == ["9001", "9003", "9004"]
    assert [(s.source, s.line) for s in ds.skipped] == [("natural_questions", 2)]


def test_no_answerable_row_is_an_error(rows):
    with pytest.raises(InputError, match=r"no row with a human short answer among 1 rows"):
        parse_nq_rows(rows[1:2])
    with pytest.raises(InputError, match=r"must be >= 1, got 0"):
        parse_nq_rows(rows, limit=0)


def test_load_dataset_streams_through_datasets(monkeypatch, rows):
    """The thin wrapper: streaming=True, split mapping, limit as N (no network: a fake module)."""
    calls = []

    def fake_load_dataset(name, split, streaming):
        calls.append((name, split, streaming))
        return iter(rows)

    monkeypatch.setitem(sys.modules, "datasets",
                        types.SimpleNamespace(load_dataset=fake_load_dataset))
    ds = load_dataset(DataConfig(path="nq", split="test", limit=2))
    assert calls == [("google-research-datasets/natural_questions", "validation", True)]
    assert [q.id for q in ds.questions] == ["9001", "9003"]
    ds = load_dataset(DataConfig(path="my/nq-copy", format="nq", split="train"))
    assert calls[-1] == ("my/nq-copy", "train", True)
    assert len(ds.questions) == 3


def test_missing_datasets_names_the_extra(monkeypatch):
    from ragray.data import load_nq
    from ragray.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "datasets", None)  # makes `import datasets` fail
    with pytest.raises(MissingDependencyError, match=r"pip install 'ragray\[data\]'"):
        load_nq()
