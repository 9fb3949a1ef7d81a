"""bench_verdict_family on a few runs: both rules judged, the false alarms counted at K >= 2 only, and
the one-passage answers faithful (the figures themselves are the benchmark's, 60 runs)."""

import json

import pytest

from benchmarks import bench_verdict_family


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_a_small_run_writes_both_rules_for_every_explainer(tmp_path):
    out = tmp_path / "family.json"
    assert bench_verdict_family.main(["--runs", "2", "--questions", "7", "--used-questions", "7",
                                      "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result["noise"]) == set(result["used"]) == {"loo", "logprob_drop", "surrogate"}
    for explainer, rules in result["noise"].items():
        assert set(rules) == {"sign", "rank_holm"}
        assert rules["rank_holm"]["family_wise_false_alarms"]["of"] == 2
    assert result["used"]["loo"]["rank_holm"] == result["used"]["loo"]["sign"] == {
        "top-1": "by_construction", "top-3": "faithful", "top-20%": "faithful"}


def test_a_false_alarm_is_a_claim_at_k_2_or_more():
    """At top-1 an explainer may rightly read which single removal changes the answer (the scripted
    log-prob does): only K >= 2 counts."""
    assert not bench_verdict_family.false_alarm({"top-1": "faithful", "top-3": "not_shown", "top-20%": "undecided"})
    for state in ("faithful", "mixed", "inverted"):
        assert bench_verdict_family.false_alarm({"top-1": "by_construction", "top-3": "not_shown", "top-20%": state})
