"""In a notebook, ``ragray.run`` shows its table growing: one output, updated as each question
finishes (IPython's display faked; the run is real, with the scripted generator)."""

from __future__ import annotations

import ragray
from ragray.report import notebook_live


class _Handle:
    def __init__(self, shown: list[str]) -> None:
        self.shown = shown

    def update(self, html) -> None:
        self.shown.append(html.data)


def test_a_notebook_run_shows_each_question_as_it_finishes(monkeypatch):
    shown: list[str] = []
    monkeypatch.setattr(notebook_live, "in_notebook", lambda: True)
    import IPython.display

    def display(html, display_id=False):
        shown.append(html.data)
        return _Handle(shown)

    monkeypatch.setattr(IPython.display, "display", display)
    rows = [{"id": f"q{i}", "question": f"Which word does harbour {i} keep?", "answers": [f"word{i}"],
             "passages": [{"id": f"p{i}", "text": f"Harbour {i} keeps one word. ANSWER=word{i}"},
                          {"id": f"d{i}", "text": f"Gulls circle harbour {i} at dawn."}]} for i in (1, 2, 3)]
    run = ragray.run(rows, settings={"generation.backend": "scripted", "metrics.embedding": False})
    assert len(run.questions) == 3
    # the table before any question, then one more row per finished question
    assert [page.count("<tr>") - 1 for page in shown] == [0, 1, 2, 3]
    assert "ragray run: 3 questions (0 resumed)" in shown[0] and "Which word does harbour 3 keep?" in shown[-1]


def test_a_script_gets_no_notebook_display():
    assert notebook_live.in_notebook() is False
