"""The edit test in a real run: the packaged SmolLM2 on ragray's demo set, the option on and
nothing else set but fp32 (so the figures do not depend on the CPU). The lighthouse question's
answer (1871) stands in its gold passage only; the substitute is a year of the data set's own
(same shape, same leading digit), the unedited prompt reproduces the run's answer, and the panel
says what the edit showed. On this prompt SmolLM2 answers 1868 with 1962 in the passage (neither
year): the edit cannot label the passage, and the panel says so rather than showing zeros."""

from __future__ import annotations

import pytest

import ragray

pytestmark = pytest.mark.slow


def test_a_real_run_makes_the_edit_and_the_panel_states_what_it_showed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = ragray.run(limit=1, out=tmp_path / "run", progress=False, history=False,
                     settings={"generation.dtype": "float32", "influence.edit_test": True})
    q = run.questions[0]
    # the unedited prompt and the one case (only the gold passage holds the answer): two generations
    assert q["edit_calls"] == 2 and q["edit_unedited"] == "original" and bool(q["edit_reproduces"])
    p = run.passages.to_pandas().set_index("passage_id")
    labelled = p[p["edit_moved"].notna()]
    assert set(labelled.index) <= {"demo-p001"}  # only the passage that holds the answer can be labelled
    block = run.summary["panel"]["edit_test"]
    assert block["questions_with_edits"] == 1 and block["generations"] == 2
    if block["available"]:
        assert block["passages_labelled"] == 1 and block["marks"]["used"]["measured"] >= 1
    else:
        assert block["passages_labelled"] == 0 and "no passage labelled" in block["reason"]
