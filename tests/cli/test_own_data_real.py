"""Issue 44's done-when on the packaged SmolLM2: a user's question file with its corpus beside it,
answerable and unanswerable rows, run from an empty folder with ``--out`` elsewhere, and two
``ragray.attribute`` calls in one process that load the model once.

The set is built at test time from ``../shared/data``: a SQuAD v1.1 dev question with its own
paragraph, and a HotpotQA question with no gold answer (unanswerable from this corpus: it holds
every SQuAD dev paragraph, in the corpus file beside the questions)."""

import json
import os
import re
import shutil

import pytest

import ragray
from ragray.adapters.cli import main
from ragray.generation.transformers.backend import TransformersGenerator

pytestmark = [pytest.mark.slow, pytest.mark.realdata]


def _rows(shared_data):
    def first(name, n):
        lines = (shared_data / name).read_text(encoding="utf-8").splitlines()[:n]
        return [json.loads(line) for line in lines]

    answerable = first("squad_v11_dev.jsonl", 2)
    unanswerable = [{"id": f"u{i}", "question": r["question"], "answers": []}
                    for i, r in enumerate(first("hotpotqa_distractor_dev.jsonl", 2))]
    # interleaved, as a SQuAD 2.0 file is: --limit 2 takes one of each kind
    return [x for pair in zip(answerable, unanswerable) for x in pair]


def test_a_question_file_with_its_corpus_beside_it_run_from_an_empty_folder(shared_data, tmp_path, monkeypatch, capsys):
    data, work, out = tmp_path / "data", tmp_path / "work", tmp_path / "runs" / "mine"
    data.mkdir()
    work.mkdir()
    (data / "mine.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows(shared_data)), encoding="utf-8")
    shutil.copy(shared_data / "squad_v11_dev.corpus.jsonl", data / "mine.corpus.jsonl")
    monkeypatch.chdir(work)
    ragray.clear_models()  # an earlier test of this process may have kept the model: this run loads it
    code = main(["run", "--dataset", str(data / "mine.jsonl"), "--limit", "2", "--top-k", "3", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    printed = captured.out
    # retrieved from the corpus beside the file, without a flag, and said so
    assert "bm25 top-3 of 2,067 corpus passages (mine.corpus.jsonl)" in printed.splitlines()[0]
    # unanswerable rows are judged by declining and counted apart
    rows = [line for line in printed.split("\n\n")[0].splitlines() if re.match(r"\d+ ", line)]
    marks = [re.split(r"\s{2,}", line)[2] for line in rows]
    assert len(marks) == 2 and set(marks[1::2]) <= {"declined", "answered anyway"}
    assert set(marks[0::2]) <= {"yes", "no"}
    assert "(correct: yes / no = the answer contains a gold answer" in printed and "declined / answered anyway" in printed
    assert re.search(r"answered correctly: \d of 1 answerable .*; declined \d of 1 unanswerable", printed)
    # what loaded, and a bar of model calls
    assert "ragray: loading the generator smollm2 from" in captured.err
    assert "model calls" in captured.err
    # nothing outside --out (the history is in the data folder)
    assert os.listdir(work) == []
    questions = ragray.load_run(out).questions
    assert list(questions["answerable"]) == [True, False]


def test_two_attribute_calls_in_one_process_load_the_model_once(monkeypatch):
    ragray.clear_models()
    real = TransformersGenerator._load.__func__
    loads = []

    def counting(cls, config):
        loads.append(config.model)
        return real(cls, config)

    monkeypatch.setattr(TransformersGenerator, "_load", classmethod(counting))
    passages = ["Skerrow Point Lighthouse was first lit on 14 October 1871.", "The museum opens at ten."]
    try:
        first = ragray.attribute("When was Skerrow Point Lighthouse first lit?", passages, progress=False)
        second = ragray.attribute("When does the museum open?", passages, progress=False)
        assert loads == ["smollm2"]
        assert first.answer and second.answer
    finally:
        assert ragray.clear_models() == 1


def test_the_bar_moves_inside_a_question_with_the_real_model(monkeypatch):
    """The transformers backend reports each prompt as it is scored: one question of the demo (22
    contexts in a handful of backend calls) moves the calls bar many times before it finishes."""
    events = []

    class Recorder:
        def __init__(self, iterable=None, total=None, initial=0, unit="it", **_):
            self.iterable, self.total, self.n, self.unit = iterable, total, initial, unit

        def __iter__(self):
            return iter(self.iterable)

        def update(self, n=1):
            self.n += n
            events.append((self.unit, self.n, self.total))

        def refresh(self):
            pass

        def set_postfix(self, *_a, **_k):
            pass

        def close(self):
            pass

    monkeypatch.setattr("ragray.console._bar_class", lambda: Recorder)
    ragray.run("demo", limit=1, progress=True, history=False)
    units = [u for u, _, _ in events]
    assert "q" in units
    inside = units[: units.index("q")].count("call")
    assert inside >= 15, events  # per prompt, not per backend call (a handful)
