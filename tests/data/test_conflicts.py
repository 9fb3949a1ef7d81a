"""Conflicting-source cases: the copy differs only in the answer; the answer's content decides."""

import json

import pytest

from ragray.config import load_config
from ragray.data.conflicts import conflict_cases, taken_source
from ragray.generation.scripted import ScriptedGenerator
from ragray.metrics.evidence import evidence_panel
from ragray.pipeline import run_influence


def records():
    return [
        {"id": "a", "question": "When was the light first lit?", "answers": ["1871"],
         "passages": [], "gold_passage_ids": ["p1"]},
        {"id": "b", "question": "How tall is the tower?", "answers": ["31 metres"],
         "passages": [], "gold_passage_ids": ["p2"]},
        {"id": "c", "question": "Who keeps it?", "answers": ["Mara Quell"], "passages": [], "gold_passage_ids": ["p3"]},
    ]


def corpus():
    return [
        {"id": "p1", "title": "Skerrow", "text": "The light was first lit in 1871, and relit in 1871 after a storm."},
        {"id": "p2", "title": "Skerrow", "text": "The tower is 31 metres tall."},
        {"id": "p3", "title": "Skerrow", "text": "Mara Quell keeps the light."},
        {"id": "p4", "title": "Gulls", "text": "Gulls nest on the cliffs."},
        {"id": "p5", "title": "Ferries", "text": "Ferries sail daily."},
        {"id": "p6", "title": "Kell", "text": "Kell has a harbour."},
    ]


def test_the_copy_replaces_every_occurrence_of_the_answer_and_nothing_else():
    cases = {c.answer: c for c in conflict_cases(records(), corpus(), others=2, seed=0)}
    c = cases["1871"]
    texts = {p["id"]: p["text"] for p in c.record["passages"]}
    assert texts[c.original_id] == corpus()[0]["text"]
    # another numeric answer stands in for 1871, in both places
    assert c.substitute == "31 metres"
    assert texts[c.copy_id] == "The light was first lit in 31 metres, and relit in 31 metres after a storm."
    assert len(c.record["passages"]) == 4 and c.record["gold_passage_ids"] == []
    # distractors contain neither candidate answer
    for pid, text in texts.items():
        if pid not in (c.original_id, c.copy_id):
            assert "1871" not in text and "31 metres" not in text
    # seeded
    again = {c.answer: c for c in conflict_cases(records(), corpus(), others=2, seed=0)}
    assert again["1871"].record == c.record


@pytest.mark.parametrize("answer, expected", [
    ("It was first lit in 1871.", "original"),
    ("In 31 metres", "copy"),
    ("1871 or 31 metres", None),
    ("a long time ago", None),
])
def test_the_taken_source_comes_from_the_answer_content(answer, expected):
    assert taken_source(answer, "1871", "31 metres") == expected


def test_a_model_that_takes_one_source_is_traced_to_it(tmp_path):
    """Known truth end to end: the scripted model answers from the first marked passage shown, so
    the taken source is known and drop-one must find it. (The scripted model is position-driven,
    so here the retriever's order finds it too; the real benchmark shuffles the order.)"""
    rows = []
    for i in range(12):
        taken_first = i % 2 == 0
        one, two = f"ANSWER=alpha{i} the ferry sails at dawn", f"ANSWER=beta{i} the ferry sails at dawn"
        texts = [one, two] if taken_first else [two, one]
        ids = ["orig", "copy"] if taken_first else ["copy", "orig"]
        passages = [{"id": f"q{i}-{pid}", "title": "", "text": t} for pid, t in zip(ids, texts)]
        passages += [{"id": f"q{i}-d{j}", "title": "", "text": f"Gulls nest {j}."} for j in range(3)]
        rows.append({"id": f"q{i}", "question": "When does the ferry sail?", "answers": [f"alpha{i}"],
                     "passages": passages, "gold_passage_ids": [f"q{i}-{ids[0]}"]})
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cfg = load_config(None, [f"data.path={path}", "generation.backend=scripted", "retrieval.retriever=given",
                             "influence.mode=logprob_share", "metrics.embedding=false", "influence.check_subsets=8"])
    res = run_influence(cfg, tmp_path / "r", generator=ScriptedGenerator(), progress=False)
    import pyarrow.parquet as pq

    t = {n: pq.read_table(res.out / f"{n}.parquet").to_pylist() for n in ("questions", "passages", "checks")}
    panel = evidence_panel(t["questions"], t["passages"], t["checks"])
    rec = panel["subsets"]["all"]["metrics"]["recovery_at_1"]
    assert rec["n"] == 12 and rec["measures"]["logprob_drop"]["mean"] == 1.0
    assert rec["measures"]["random_control"]["mean"] == pytest.approx(0.2)  # 1 of 5, its expectation


def test_two_questions_on_one_paragraph_get_copies_of_their_own():
    """Each copy replaces its own question's answer, so each has its own id (a dataset may not
    hold two different passages under one id)."""
    from ragray.data.conflicts import conflict_cases

    gold = {"id": "g", "title": "Ferries", "text": "The ferry Tern sails at 9 from Pier 4 to Holm."}
    others = [{"id": f"d{i}", "title": "Gulls", "text": f"Gulls {i} nest on the cliffs."} for i in range(6)]
    records = [{"id": "q1", "question": "Which ferry?", "answers": ["Tern"], "passages": [gold, *others],
                "gold_passage_ids": ["g"]},
               {"id": "q2", "question": "Which pier?", "answers": ["Pier 4"], "passages": [gold, *others],
                "gold_passage_ids": ["g"]},
               {"id": "q3", "question": "Which boat?", "answers": ["Puffin"], "passages": [dict(gold, id="g3",
                text="The boat Puffin sails to Pier 7.")], "gold_passage_ids": ["g3"]},
               {"id": "q4", "question": "Which harbour?", "answers": ["Pier 9"], "passages": [dict(gold, id="g4",
                text="Harbour is Pier 9.")], "gold_passage_ids": ["g4"]}]
    cases = [c for c in conflict_cases(records, [gold, *others], others=3, seed=1) if c.original_id == "g"]
    assert len(cases) == 2
    assert len({c.copy_id for c in cases}) == 2
    texts = {c.copy_id: next(p["text"] for p in c.record["passages"] if p["id"] == c.copy_id) for c in cases}
    assert len(set(texts.values())) == 2
