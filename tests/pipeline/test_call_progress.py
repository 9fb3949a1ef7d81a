"""The bar moves inside a question: model calls, done of planned, reported as they finish."""

import json

import pytest

from ragray.config import load_config
from ragray.generation.scripted import ScriptedGenerator
from ragray.pipeline import run_influence
from ragray.progress import calls_bar, calls_done, calls_planned


class Recorder:
    """A tqdm stand-in that logs every event of every bar, in order."""

    events: list = []

    def __init__(self, iterable=None, total=None, initial=0, desc="", unit="it", disable=False, **_):
        self.total, self.n, self.unit, self.disable = total, initial, unit, disable
        self.iterable = iterable

    def __iter__(self):
        return iter(self.iterable)

    def update(self, n=1):
        self.n += n
        Recorder.events.append((self.unit, self.n, self.total))

    def refresh(self):
        Recorder.events.append((self.unit, self.n, self.total))

    def set_postfix(self, *_a, **_k):
        pass

    def close(self):
        pass


@pytest.fixture()
def recorder(monkeypatch):
    Recorder.events = []
    monkeypatch.setattr("ragray.console._bar_class", lambda: Recorder)
    return Recorder


def test_the_calls_bar_counts_done_of_planned_and_is_silent_when_closed(recorder):
    calls_planned(5)
    calls_done(2)  # no bar open: nothing happens
    assert recorder.events == []
    with calls_bar(True):
        calls_planned(4)
        calls_done(3)
        calls_planned(-2)  # the question needed fewer: the total never drops below what is done
        calls_done(2)  # more than planned: the total follows
    assert recorder.events == [("call", 0, 4), ("call", 3, 4), ("call", 3, 3), ("call", 5, 5)]


def test_a_run_reports_each_questions_calls_before_the_question_finishes(recorder, tmp_path):
    rows = [{"id": f"q{i}", "question": "Which ferry sails to Kell?", "answers": ["tern"],
             "passages": [{"id": f"q{i}-p{j}", "text": t} for j, t in
                          enumerate(["The ferry is the Tern ANSWER=tern", "Kell has a lighthouse.", "Tickets."])]}
            for i in range(2)]
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    config = load_config(None, [f"data.path={path}", "generation.backend=scripted"])
    run_influence(config, tmp_path / "r", generator=ScriptedGenerator(), progress=True)
    units = [u for u, _, _ in recorder.events]
    first_question = units.index("q")
    assert units[:first_question].count("call") >= 3  # the calls moved while the first question ran
    calls = [(n, total) for u, n, total in recorder.events if u == "call"]
    assert calls[-1][0] == calls[-1][1] > 0  # done of planned, and the plan met at the end


@pytest.mark.parametrize("settings", [[], ["influence.mode=logprob_share"], ["influence.mode=loo"],
                                      ["influence.mode=jsd"], ["influence.position_control=reversed"],
                                      ["influence.mode=logprob_share", "influence.closed_book=false"]])
def test_each_question_plans_the_calls_it_makes(monkeypatch, tmp_path, settings):
    """The bar's plan is what a question costs, each distinct call once (the drop-one arms and the
    design's contexts overlap: full and left-out contexts are both), an unanswerable question's
    decline scoring included: the correction at its end is 0, so the total never jumps."""
    told: list[int] = []
    monkeypatch.setattr("ragray.ablation.loop.calls_planned", told.append)
    texts = ["The ferry is the Tern ANSWER=tern", "Kell has a lighthouse.", "Tickets.", "Honey ANSWER=sweet"]
    rows = [{"id": "a", "question": "Which ferry sails to Kell?", "answers": ["tern"],
             "passages": [{"id": f"a-p{j}", "text": t} for j, t in enumerate(texts)]},
            {"id": "u", "question": "How much is honey?", "answers": [],
             "passages": [{"id": f"u-p{j}", "text": t} for j, t in enumerate(texts)]}]
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    config = load_config(None, [f"data.path={path}", "generation.backend=scripted", *settings])
    run_influence(config, tmp_path / "r", generator=ScriptedGenerator(), progress=False)
    plans, corrections = told[0::2], told[1::2]
    assert len(plans) == 2 and all(p > 4 for p in plans) and corrections == [0, 0]
