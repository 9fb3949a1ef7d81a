"""Typed summaries (ragray.rows.summaries): the JSON form, reading files of any version, the
footer written flat after the measures, and the history's summaries read by kind."""

from __future__ import annotations

import dataclasses

from ragray.rows.summaries import (
    SUMMARY_TYPES,
    AuditSummary,
    FaithfulnessSummary,
    MeanCI,
    RunSummary,
    ScoreSummary,
    SkippedRow,
    read_summary,
)


def test_footer_fields_follow_the_measures_and_are_absent_until_a_run_fills_them():
    names = RunSummary.names()
    assert names[0] == "n_questions" and names.index("divergence_threshold") < names.index("skipped_rows")
    assert names[-15:] == ("skipped_rows", "resumed_questions", "cache", "simulated", "wall_seconds",
                           "backend_settings", "resources", "placement", "passages_from", "short_of_top_k",
                           "partial", "uploaded", "evidence", "panel", "engine")
    assert FaithfulnessSummary.names()[-11:] == ("skipped_rows", "resumed_questions", "cache", "simulated",
                                                 "wall_seconds", "backend_settings", "resources", "placement",
                                                 "passages_from", "short_of_top_k", "partial")
    bare = RunSummary.from_dict({"n_questions": 2})
    assert "skipped_rows" not in bare.as_dict() and "simulated" not in bare.as_dict()  # not made by a run
    ran = dataclasses.replace(bare, skipped_rows=0, wall_seconds=1.5)
    assert ran.as_dict()["skipped_rows"] == 0 and "simulated" not in ran.as_dict()  # 0 is a value, None is absence


def test_score_summary_starts_with_the_answer_means():
    assert ScoreSummary.names()[:3] == ("n", "n_with_gold", "em") and ScoreSummary.names()[-1] == "wall_seconds"


def test_an_old_file_reads_with_none_for_what_it_lacks_and_ignores_what_the_class_lacks():
    old = {"n_questions": 3, "mean_spearman": 0.2, "mean_spearman_ci95": [0.1, 0.3], "some_removed_key": 1,
           "alignment": None, "quality": {"f1": 0.5}}
    s = RunSummary.from_dict(old)
    assert (s.n_questions, s.mean_spearman, s.mean_spearman_ci95) == (3, 0.2, (0.1, 0.3))
    assert s.alignment is None and s.validity is None and s.quality.f1 == 0.5 and s.quality.em is None
    assert "some_removed_key" not in s.as_dict()


def test_nested_blocks_and_tuples_are_typed():
    s = RunSummary.from_dict({"alignment": {"usage_ndcg": {"mean": 0.5, "low": 0.4, "high": 0.6}}})
    assert s.alignment.usage_ndcg == MeanCI(0.5, 0.4, 0.6)
    score = ScoreSummary.from_dict({"n": 1, "skipped": [{"line": 3, "reason": "no answer"}]})
    assert score.skipped == (SkippedRow(3, "no answer"),)
    assert score.as_dict()["skipped"] == [{"line": 3, "reason": "no answer"}]
    audit = AuditSummary.from_dict({"n_scored": 2, "n_fail": 0, "failing": []})
    assert audit.failing == () and audit.exit_code == 0
    assert AuditSummary.from_dict({"n_scored": 0, "n_fail": 0}).exit_code == 1  # nothing scored: not a pass


def test_history_summaries_are_read_by_kind():
    assert set(SUMMARY_TYPES) == {"run", "interpret", "audit", "score"}
    assert isinstance(read_summary("interpret", {"n_questions": 1}), FaithfulnessSummary)
    assert read_summary("sweep", {"n_trials": 4}) == {"n_trials": 4}  # leaderboard columns stay as they are
