"""``python benchmarks/verify.py`` recomputes every published figure from the records the
repository keeps and agrees with every one (the run CI makes; it needs ../shared/data for the
evidence checks' set sizes, as CI has it)."""

from __future__ import annotations

import json
import re

import pytest

from benchmarks import verify
from benchmarks.machine import SHARED_DATA


@pytest.mark.slow  # a minute on 2 cores: CI runs it, the fast subset leaves it out
@pytest.mark.skipif(not SHARED_DATA.exists(), reason="needs ../shared/data beside the repository")
def test_every_published_figure_is_recomputed_from_the_records_and_agrees(capsys):
    """Every check runs and recomputes figures (each check's own count, not only the total), none
    differs: the one run of every check in the suite (test_verify_evidence tampers with single
    files; it does not run the checks again)."""
    assert verify.main(["--quiet"]) == 0, capsys.readouterr().out[-4000:]
    out = capsys.readouterr().out
    assert "0 differ; 0 checks could not run; 0 results files uncovered" in out
    counts = {m[1]: (int(m[2]), int(m[3])) for m in re.finditer(r"^== (\S+): (\d+) figures recomputed, (\d+) differ$",
                                                                 out, re.M)}
    verify.load_checks()
    assert set(counts) == set(verify.CHECKS), out[-4000:]
    # a record with no derived figure (engine counts as measured) is only checked complete
    assert {name for name, (n, bad) in counts.items() if n == 0 or bad} == {"engine_counts_vs_gpu_record"}, counts


def test_a_published_figure_that_moved_is_a_difference():
    published = {"a": {"k": 3, "share": 0.75}, "rows": [1.0, 2.0]}
    fresh = json.loads(json.dumps(published))
    assert all(f.agrees() for f in verify.compare_json("x", published, fresh))
    fresh["a"]["share"] = 0.7
    fresh["rows"].append(3.0)
    bad = [f.name for f in verify.compare_json("x", published, fresh) if not f.agrees()]
    assert bad == ["x:a.share", "x:rows[2]"]
    assert [f.name for f in verify.compare_text("t", "0.70 [0.56, 0.82] (31/44)", "0.70 [0.56, 0.82] (30/44)")
            if not f.agrees()] == ["t#4"]


def test_a_results_file_no_check_covers_fails_the_run(tmp_path, monkeypatch, capsys):
    (tmp_path / "orphan.json").write_text("{}")
    monkeypatch.setattr(verify, "RESULTS", tmp_path)
    monkeypatch.setattr(verify, "CHECKS", {})
    monkeypatch.setattr(verify, "load_checks", lambda: None)
    assert verify.main([]) == 1
    assert "orphan.json: no check recomputes it" in capsys.readouterr().out
