"""The edit test in a real run: the packaged SmolLM2 on ragray's demo set, the option on and
nothing else set but fp32 (so the figures do not depend on the CPU). The lighthouse question's
answer stands in its gold passage only: editing it there moves the answer, by construction the
passage was used, and the run's ``used`` mark says so."""

from __future__ import annotations

import pytest

import ragray

pytestmark = pytest.mark.slow


def test_a_real_run_labels_the_passage_the_answer_follows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = ragray.run(limit=1, out=tmp_path / "run", progress=False, history=False,
                     settings={"generation.dtype": "float32", "influence.edit_test": True})
    q = run.questions.iloc[0]
    assert q["edit_calls"] >= 2 and q["edit_unedited"] == "original" and bool(q["edit_reproduces"])
    p = run.passages.set_index("passage_id")
    moved = p[p["edit_moved"] == True]  # noqa: E712 (a nullable column)
    assert "demo-p001" in moved.index  # the gold passage: the answer followed its edit
    assert bool(p.loc["demo-p001", "used"])
    block = run.summary["panel"]["edit_test"]
    assert block["passages_labelled"] >= 1 and block["moved"] >= 1
    assert block["marks"]["used"]["recall"]["k"] >= 1
