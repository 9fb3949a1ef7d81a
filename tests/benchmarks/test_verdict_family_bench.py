"""bench_verdict_family on a few runs: both rules judged, the false alarms counted at K >= 2 only, and
the one-passage answers faithful (the figures themselves are the benchmark's, 60 runs)."""

import json

from benchmarks import bench_verdict_family


def test_a_small_run_writes_both_rules_for_every_explainer(tmp_path):
    out = tmp_path / "family.json"
    assert bench_verdict_family.main(["--runs", "2", "--questions", "7", "--used-questions", "7",
                                      "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result["noise"]) == set(result["used"]) == {"loo", "logprob", "surrogate"}
    for explainer, rules in result["noise"].items():
        assert set(rules) == {"sign", "rank_holm"}
        assert rules["rank_holm"]["family_wise_false_alarms"]["of"] == 2
    # false alarms count K >= 2 only: a run whose only non-"not shown" verdict is at top-1 is not one
    for rules in result["noise"].values():
        states = rules["rank_holm"]["states"]
        false_at_k2 = sum(n for key, n in states.items() if not key.startswith("top-1")
                          and key.split(": ")[1] in ("faithful", "mixed", "inverted"))
        assert rules["rank_holm"]["family_wise_false_alarms"]["count"] <= false_at_k2
    assert result["used"]["loo"]["rank_holm"] == result["used"]["loo"]["sign"] == {"top-1": "by_construction", "top-3": "faithful",
                                                  "top-20%": "faithful"}
