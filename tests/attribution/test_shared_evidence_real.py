"""The lighthouse question with its gold passage copied, on the packaged SmolLM2 in fp32 through
``ragray.attribute`` at defaults (issue 43's done-when): drop-one sees neither copy; the default
sees both, groups them, and marks no bee or museum passage used."""

from __future__ import annotations

import json
from importlib import resources

import pytest

import ragray

pytestmark = pytest.mark.slow

#: the gold passage first, then the museum, beekeeping, bee-law and festival passages of demo question 1
ORDER = ("demo-p001", "demo-p057", "demo-p045", "demo-p048", "demo-p068")


def lighthouse():
    rows = [json.loads(line) for line in resources.files("ragray.demo").joinpath("demo.jsonl").read_text().splitlines()
            if line.strip()]
    q = rows[0]
    by_id = {p["id"]: p for p in q["passages"]}
    return q, [by_id[i] for i in ORDER]


def test_a_copied_gold_passage_is_used_as_one_group_and_the_verdict_stands(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    q, passages = lighthouse()
    copy = dict(passages[0], id="demo-p001-copy")
    a = ragray.attribute(q["question"], [*passages, copy], answers=q["answers"],
                         settings={"generation.dtype": "float32"})
    assert a.correct is True and "1871" in a.answer
    t = a.run.passages.to_pandas().set_index("passage_id")
    row = a.run.questions[0]
    # drop-one alone sees neither copy: each leaves less than a nat when removed
    assert abs(t.loc["demo-p001", "logprob_drop"]) < 1.5 and abs(t.loc["demo-p001-copy", "logprob_drop"]) < 1.5
    # each copy alone lifts the answer far above the closed-book answer, and both are used, as one group
    assert t.loc["demo-p001", "keep_alone_gain"] > 5 and t.loc["demo-p001-copy", "keep_alone_gain"] > 5
    assert bool(t.loc["demo-p001", "used"]) and bool(t.loc["demo-p001-copy", "used"])
    assert t.loc["demo-p001", "group"] == t.loc["demo-p001-copy", "group"] and t.loc["demo-p001", "relation"] == "either suffices"
    assert not t.loc[["demo-p057", "demo-p045", "demo-p048", "demo-p068"], "used"].any()  # no museum, bee or festival
    assert row["context_dependent"] and row["state"] == "measured" and "shared_evidence" in list(row["flags"])
    assert a.misaligned is False and a.verdict == "aligned"
