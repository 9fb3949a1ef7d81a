"""benchmarks/shared_evidence_collect.py's run_edits goes through ragray.pipeline.edit_test and
keeps its record format: the dict below is what the implementation before that move returned on
these items (the committed records' ``edits`` field), with the scripted model, no real one."""

from __future__ import annotations

from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.shared_evidence_collect import run_edits
from ragray.generation.prompts import get_template
from ragray.generation.scripted import ScriptedGenerator
from ragray.types import Passage

ITEMS = [
    {"id": "dup_exact_squad:t1", "question": "Which ferry sails to Kell?", "answers": ["tern"],
     "passages": [{"id": "a", "title": "Ferry", "text": "The ferry to Kell is the tern. ANSWER=tern"},
                  {"id": "b", "title": "Birds", "text": "Terns are birds; the tern nests on Kell."},
                  {"id": "c", "title": "", "text": "Tickets cost five crowns."}]},
    {"id": "dup_exact_squad:t2", "question": "Where is the capital?", "answers": ["Oslo"],
     "passages": [{"id": "d", "title": "", "text": "Nothing here ANSWER=Bergen"}]},
    {"id": "dup_exact_squad:t3", "question": "Failed?", "answers": ["tern"],
     "passages": [{"id": "e", "title": "", "text": "the tern"}]},
    {"id": "dup_exact_squad:t4", "question": "Which bird sat on the pier?", "answers": ["gull"],
     "passages": [{"id": "x", "title": "Pier", "text": "A gull sat on the pier."},
                  {"id": "y", "title": "Notes", "text": "Birdwatch ANSWER=gull"}]},
]
QUESTIONS = [
    {"question_id": "dup_exact_squad:t1", "error": None, "baseline_answer": "tern"},
    {"question_id": "dup_exact_squad:t2", "error": None, "baseline_answer": "Bergen"},
    {"question_id": "dup_exact_squad:t3", "error": "boom", "baseline_answer": ""},
    {"question_id": "dup_exact_squad:t4", "error": None, "baseline_answer": "seagull"},
]
PASSAGES = [  # the run's retrieval order differs from the items' order
    {"question_id": "dup_exact_squad:t1", "passage_id": "b", "retrieval_rank": 3},
    {"question_id": "dup_exact_squad:t1", "passage_id": "c", "retrieval_rank": 1},
    {"question_id": "dup_exact_squad:t1", "passage_id": "a", "retrieval_rank": 2},
    {"question_id": "dup_exact_squad:t2", "passage_id": "d", "retrieval_rank": 1},
    {"question_id": "dup_exact_squad:t3", "passage_id": "e", "retrieval_rank": 1},
    {"question_id": "dup_exact_squad:t4", "passage_id": "y", "retrieval_rank": 1},
    {"question_id": "dup_exact_squad:t4", "passage_id": "x", "retrieval_rank": 2},
]
#: run_edits' output before it called ragray.pipeline.edit_test (captured from that code)
BEFORE = {
    "dup_exact_squad:t1": {"kind": "phrase", "unedited": "original", "reproduces_run": True, "cases": [
        {"edited": [1], "every_copy": False, "outcome": "substitute"},
        {"edited": [2], "every_copy": False, "outcome": "original"},
        {"edited": [1, 2], "every_copy": True, "outcome": "substitute"}]},
    "dup_exact_squad:t2": {"cases": []},
    "dup_exact_squad:t4": {"kind": "phrase", "unedited": "original", "reproduces_run": False, "cases": [
        {"edited": [1], "every_copy": True, "outcome": "original"}]},
}


def test_run_edits_keeps_its_records(tmp_path):
    pq.write_table(pa.Table.from_pylist(QUESTIONS), tmp_path / "questions.parquet")
    pq.write_table(pa.Table.from_pylist(PASSAGES), tmp_path / "passages.parquet")
    config = SimpleNamespace(generation=SimpleNamespace(template="numbered", system_prompt=None))
    gen = ScriptedGenerator()
    got = run_edits(ITEMS, tmp_path, ["tern", "puffin", "gull", "Oslo", "Bergen", "1984", "yes"], gen, config)
    assert got == BEFORE
    assert [list(v) for v in got.values()] == [list(v) for v in BEFORE.values()]  # the keys' order too
    assert gen.batches == [4, 2]  # per question one call: the unedited prompt, then each case
    template = get_template("numbered")
    shown = [Passage(id=i, text=ITEMS[0]["passages"][j]["text"], title=ITEMS[0]["passages"][j]["title"])
             for i, j in (("c", 2), ("a", 0), ("b", 1))]
    assert gen.calls[0] == template.build(ITEMS[0]["question"], shown, template.system)  # the run's prompt
