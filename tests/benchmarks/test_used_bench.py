"""bench_used on a tiny hand-made export: which questions count, the tune-only choice, the test table."""

import json
import math

from benchmarks import bench_used


def share_to_drop(s):
    return -math.log(1.0 - s)


def record(qid, shares, gold, *, answered=True, context_dependent=True, precision="float32"):
    return {"question": {"question_id": qid, "question": None, "error": None, "context_dependent": context_dependent,
                         "precision": precision},
            "answered": answered,
            "passages": [{"question_id": qid, "passage_id": f"{qid}-p{i}", "retrieval_rank": i + 1, "is_gold": g,
                          "influence": 0.5, "logprob_drop": share_to_drop(s)} for i, (s, g) in enumerate(zip(shares, gold))]}


def write(path, recs):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")


def test_the_rule_is_chosen_on_tune_and_reported_on_test(tmp_path):
    gold_first = [True] + [False] * 5
    tune = [record("t1", [0.99, 0.6, 0.6, 0, 0, 0], gold_first, precision="bfloat16"),
            # left out: not answered; not context dependent; every passage gold
            record("t2", [0.99, 0, 0, 0, 0, 0], gold_first, answered=False),
            record("t3", [0.99, 0, 0, 0, 0, 0], gold_first, context_dependent=False),
            record("t4", [0.99, 0.9], [True, True])]
    write(tmp_path / "ex" / "tune" / "short_full" / "squad.jsonl", tune)
    test = [record("q1", [0.99, 0.6, 0.6, 0, 0, 0], gold_first),
            record("q2", [0.0, 0.0, 0.9, 0, 0, 0], [False, False, True, False, False, False])]
    write(tmp_path / "ex" / "test" / "frozen" / "squad.jsonl", test)
    printed = []
    assert bench_used.main(["--export", str(tmp_path / "ex"), "--out", str(tmp_path / "r.json")],
                           echo=printed.append) == 0
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["tune"]["data"]["in_subset"] == 1 and r["tune"]["data"]["precision"] == {"bfloat16": 1}
    # on t1 every absolute bar up to 0.5 marks three passages (F1 0.5); relative 0.75 and outlier 1 MAD
    # (median 0.3, MAD 0.3: bar 0.6, strictly above) mark the gold one only: the tie goes to relative
    tune_rules = r["tune"]["table"]["pooled"]["rules"]
    assert tune_rules["s > 0.5"]["f1"]["mean"] == 0.5 and tune_rules["s > median + 1 MAD"]["f1"]["mean"] == 1.0
    assert r["chosen"]["name"] == "s >= 0.75 max" and (r["chosen"]["rule"], r["chosen"]["threshold"]) == ("relative", 0.75)
    assert r["chosen"]["demo_marks"] == [True] + [False] * 9
    # test: the chosen rule finds both gold passages; top 1 one of two (1 of 2 marks), top 2 one of four
    pooled = r["test"]["table"]["pooled"]["rules"]
    assert pooled["s >= 0.75 max"]["f1"]["mean"] == 1.0
    assert pooled["top 1 retrieved"]["precision"]["mean"] == 0.5 and pooled["top 1 retrieved"]["f1"]["mean"] == 0.5
    assert pooled["top 2 retrieved"]["precision"]["mean"] == 0.25
    assert math.isclose(pooled["top 2 retrieved"]["f1"]["mean"], 1 / 3)
    assert pooled["top 2 retrieved"]["marked_per_question"]["mean"] == 2.0
    # 3 MADs: q1's bar 0.3 + 3 x 0.3 = 1.2 marks nothing; q2's MAD is 0, so its 0.9 stands out
    assert pooled["s > median + 3 MAD"]["share_none_marked"]["mean"] == 0.5
    vs = r["test"]["chosen_vs_controls"]["top 1 retrieved"]["difference"]["f1"]
    assert vs["mean"] == 0.5 and vs["low"] <= vs["mean"] <= vs["high"]
    assert r["test"]["table"]["hotpotqa"] == {"n_questions": 0}
    assert "machine" in r and r["machine"]["versions"]["numpy"]
    assert any(line.startswith("s >= 0.75 max") and "<- chosen" in line for line in printed[0].splitlines())
