"""`ragray score`: bring-your-own records, scored without re-running anything (real MiniLM)."""

import json

import pyarrow.parquet as pq
import pytest

from ragray.adapters.cli import main
from ragray.pipeline import run_score
from ragray.config import load_config
from ragray.data.outputs import load_outputs
from ragray.errors import InputError
from tests.architecture.summaries import check_summary_file

RECORDS = [
    {"question": "Which ferry sails to Kell?", "answer": "The Tern",
     "contexts": ["The ferry to Kell is the Tern.", "Puffins nest on the stacks."], "answers": ["Tern"],
     "latency_s": 1.2, "prompt_tokens": 100, "completion_tokens": 5, "model": "m"},
    {"id": "x2", "question": "Where do puffins nest?", "answer": "Bread is baked on Tuesdays.",
     "passages": [{"id": "ferry", "text": "The ferry sails at noon."},
                  {"id": "birds", "text": "Puffins nest on the north stacks."}],
     "ground_truth": "on the north stacks", "gold_passage_ids": ["birds"]},
    {"id": "x3", "question": "Who rang the bell?", "answer": "", "contexts": []},
]


def write(tmp_path, rows, name="recs.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_score_records(tmp_path):
    config = load_config(None, ["metrics.prices={m: {prompt_per_1k: 0.5, completion_per_1k: 1.0}}"])
    res = run_score(config, write(tmp_path, RECORDS), tmp_path / "o")
    rows = {r["id"]: r for r in pq.read_table(res.out / "scores.parquet").to_pylist()}
    a, b, c = rows["row-1"], rows["x2"], rows["x3"]
    assert (a["em"], a["f1"]) == (1.0, 1.0)  # "The Tern" ~ "Tern" after normalization
    assert a["cost_usd"] == pytest.approx(0.055) and a["latency_s"] == 1.2
    assert a["hallucination"] == 0.0 and a["grounding"] > b["grounding"]
    assert b["em"] == 0.0 and b["hallucination"] == 1.0  # unrelated to both the gold and the context
    assert b["label_noise_ratio"] == 0.5 and b["label_coverage"] == 1.0  # ferry retrieved first
    assert c["em"] is None and c["grounding"] is None and c["hallucination"] is None
    s = res.summary
    assert s.n == 3 and s.n_with_gold == 2 and s.hallucination_rate == 0.5
    assert s.cost_usd_total == pytest.approx(0.055) and s.label_noise_ratio == 0.5
    assert check_summary_file(s, res.out / "summary.json")["n"] == 3
    # a right answer; a wrong one whose passages hold the gold answer (the generator missed it)
    assert (a["answer_correct"], a["context_has_gold"]) == (True, True)
    assert (b["answer_correct"], b["context_has_gold"]) == (False, True)
    assert c["answer_correct"] is None and c["context_has_gold"] is None
    assert (s.n_correct, s.n_gold_in_context, s.n_wrong_gold_in_context, s.n_wrong_gold_not_in_context) == (1, 2, 1, 0)
    from ragray.report.run_console import score_headline

    assert score_headline(s) == ("answered correctly: 1 of 2 with gold answers (the answer contains a gold answer); "
                                 "of the 1 wrong, 1 had a gold answer in their contexts (the generator missed it) "
                                 "and 0 did not (retrieval missed it)")


def test_csv_records_and_cli(tmp_path, capsys):
    path = tmp_path / "recs.csv"
    path.write_text('question,answer,contexts,answers\n"Which ferry?","Tern","[""The ferry is the Tern.""]",Tern\n',
                    encoding="utf-8")
    assert main(["score", "--records", str(path), "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "ragray score: 1 records" in out and "exact match / token F1" in out and "1.000 / 1.000" in out
    assert "answered correctly: 1 of 1 with gold answers" in out and "gold answer in a context (words)  1 of 1" in out


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"answer": "x"}, "'question' is missing"),
        ({"question": "q?"}, "'answer' is missing"),
        ({"question": "q?", "answer": 3}, "'answer' must be a string, got an integer"),
        ({"question": "q?", "answer": "a", "contexts": "c", "passages": []}, "either 'passages' or 'contexts'"),
        ({"question": "q?", "answer": "a", "contexts": [1]}, "'contexts' item 1 must be a string"),
        ({"question": "q?", "answer": "a", "latency_s": "fast"}, "'latency_s' must be a number, got 'fast'"),
        ({"question": "q?", "answer": "a", "prompt_tokens": -1}, "'prompt_tokens' must be >= 0"),
        ({"question": "q?", "answer": "a", "passages": [{"id": "p"}]}, "passage 1 has no 'text'"),
    ],
)
def test_bad_records_say_file_and_line(tmp_path, row, message):
    path = write(tmp_path, [{"question": "fine?", "answer": "yes"}, row])
    with pytest.raises(InputError, match=f"recs.jsonl:2: .*{message}".replace("(", r"\(").replace(")", r"\)")):
        load_outputs(path)
    records, skipped = load_outputs(path, on_bad_row="skip")
    assert len(records) == 1 and skipped[0].line == 2


def test_duplicate_ids_and_missing_files(tmp_path):
    with pytest.raises(InputError, match="duplicate id 'a' \\(first seen on line 1\\)"):
        load_outputs(write(tmp_path, [{"id": "a", "question": "q", "answer": ""}] * 2))
    with pytest.raises(InputError, match="records file not found"):
        load_outputs(tmp_path / "none.jsonl")
    bad = tmp_path / "r.csv"
    bad.write_text("question,text\nq,t\n")
    with pytest.raises(InputError, match="missing column 'answer'"):
        load_outputs(bad)
