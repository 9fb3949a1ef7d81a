"""Unanswerable questions: which rows are, what the prompt then says, and SQuAD 2.0 by name."""

import json

from ragray.config import load_config
from ragray.data import load_dataset
from ragray.data.answerable import is_unanswerable, mark_unanswerable, resolve_decline
from ragray.data.named import PUBLIC_SETS
from ragray.data.squad import parse_squad_rows
from ragray.generation.prompts import DECLINE_INSTRUCTION, get_template, system_message
from ragray.types import Dataset, Question


def ds(*questions):
    return Dataset("t", tuple(questions))


def test_a_row_without_gold_answer_is_unanswerable_only_in_a_labelled_set():
    answered, empty = Question("a", "x", answers=("y",)), Question("b", "x")
    marked = mark_unanswerable(ds(answered, empty))
    assert [is_unanswerable(q) for q in marked.questions] == [False, True]
    # a set without any gold answer is unlabelled, not unanswerable
    assert not any(is_unanswerable(q) for q in mark_unanswerable(ds(empty, Question("c", "x"))).questions)
    # the row may say so itself (SQuAD 2.0's is_impossible, or answerable: false) ...
    said = Question("d", "x", meta={"is_impossible": True})
    assert is_unanswerable(mark_unanswerable(ds(said)).questions[0])
    # ... or say it is answerable though it carries no gold answer
    kept = Question("e", "x", meta={"answerable": True})
    assert not is_unanswerable(mark_unanswerable(ds(answered, kept)).questions[1])
    plain = ds(answered)
    assert mark_unanswerable(plain) is plain


def test_the_demo_has_its_four_unanswerable_questions_and_the_prompt_says_how_to_decline():
    config = load_config(None, [])
    demo = load_dataset(config.data)
    assert sorted(q.id for q in demo.questions if is_unanswerable(q)) == ["demo-007", "demo-014", "demo-021", "demo-028"]
    assert resolve_decline(config, demo).generation.decline == "always"
    answerable_only = Dataset("t", tuple(q for q in demo.questions if not is_unanswerable(q)))
    assert resolve_decline(config, answerable_only).generation.decline == "never"
    never = load_config(None, ["generation.decline=never"])
    assert resolve_decline(never, demo).generation.decline == "never"  # the user's choice stands
    template = get_template("numbered")
    assert system_message(template, None, "always") == f"{template.system} {DECLINE_INSTRUCTION}"
    assert system_message(template, "Be brief.", "never") == "Be brief."


def test_a_records_file_row_can_say_it_is_unanswerable(tmp_path):
    path = tmp_path / "qa.jsonl"
    rows = [{"id": "a", "question": "q?", "answers": [], "answerable": False,
             "passages": [{"id": "p", "text": "t"}]},
            {"id": "b", "question": "q?", "answers": [], "passages": [{"id": "p", "text": "t"}]}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    loaded = load_dataset(load_config(None, [f"data.path={path}"]).data)
    assert [is_unanswerable(q) for q in loaded.questions] == [True, False]


def test_squad2_rows_keep_their_unanswerable_questions():
    rows = [
        {"id": "1", "title": "Oil", "context": "Oil is produced in many countries.", "question": "Who?",
         "answers": {"text": ["many countries"], "answer_start": [20]}},
        {"id": "2", "title": "Oil", "context": "Oil is produced in many countries.", "question": "When?",
         "answers": {"text": [], "answer_start": []}},
    ]
    d = parse_squad_rows(rows, unanswerable=True, name="squad_v20_dev")
    assert [q.answers for q in d.questions] == [("many countries",), ()]
    assert [q.gold_passage_ids for q in d.questions] == [("Oil#p0",), ()]
    assert [is_unanswerable(q) for q in d.questions] == [False, True]
    assert PUBLIC_SETS["squad2"].file == "squad_v20_dev.jsonl"
    assert PUBLIC_SETS["squad2"].corpus_file == "squad_v20_dev.corpus.jsonl"
    # SQuAD v1.1 keeps refusing a row without an answer
    assert len(parse_squad_rows(rows, on_bad_row="skip").questions) == 1


def test_limit_does_not_change_a_questions_prompt():
    """The decline instruction follows the whole set: the demo's first 3 questions (all answerable)
    get it too, so a question reads the same under --limit 3 and --limit 12."""
    config = load_config(None, ["data.limit=3"])
    first3 = load_dataset(config.data)
    assert not any(is_unanswerable(q) for q in first3.questions) and first3.n_unanswerable == 4
    assert resolve_decline(config, first3).generation.decline == "always"
