"""The sweep benchmark's verdicts on known truth: which configurations 200 questions cannot tell
from the grid's winner, and how ASHA's choice is judged against the grid (no model, no Ray)."""

import json

from benchmarks import bench_sweep


def fake_sweep(root, per_trial):
    """A sweep directory as ``ragray sweep`` writes it: sweep.json and each trial's per-question metrics."""
    trials = [{"id": f"t{i}", "label": label, "params": {}} for i, label in enumerate(per_trial)]
    (root / "trials").mkdir(parents=True)
    (root / "sweep.json").write_text(json.dumps({"trials": trials, "scoring": {"weights": {"f1": 1.0}}}))
    for t, f1s in zip(trials, per_trial.values()):
        (root / "trials" / t["id"]).mkdir()
        (root / "trials" / t["id"] / "trial.json").write_text(json.dumps(
            {"questions": [{"question_id": f"q{j}", "f1": v} for j, v in enumerate(f1s)]}))


def test_a_configuration_within_noise_of_the_winner_is_undecided_and_a_clear_loser_is_not(tmp_path):
    n = 200
    fake_sweep(tmp_path / "grid", {
        "best": [1.0 if j % 2 else 0.5 for j in range(n)],
        "tied": [1.0 if j % 2 else 0.5 for j in range(n - 2)] + [0.5, 0.5],  # 2 questions worse
        "worse": [0.5 for _ in range(n)],
    })
    got = bench_sweep.decidability({"winner": "best"}, tmp_path / "grid")
    assert got["undecided"] == ["tied"]
    worse = next(r for r in got["vs_winner"] if r["label"] == "worse")
    assert worse["decided"] and worse["difference"] == 0.25 and worse["n"] == n


def test_asha_is_judged_by_where_its_winner_and_its_stopped_trials_stand_in_the_grid(tmp_path):
    n = 200
    fake_sweep(tmp_path / "grid", {
        "best": [1.0 if j % 2 else 0.5 for j in range(n)],
        "tied": [1.0 if j % 2 else 0.5 for j in range(n - 2)] + [0.5, 0.5],
        "worse": [0.5 for _ in range(n)],
    })
    board = [{"rank": 1, "label": "best", "status": "done"}, {"rank": 2, "label": "tied", "status": "done"},
             {"rank": 3, "label": "worse", "status": "done"}]
    result = {"grid": {"winner": "best", "wall_seconds": 100.0, "model_calls": 600, "questions_run": 600,
                       "leaderboard": board},
              "asha": {"winner": "tied", "wall_seconds": 40.0, "model_calls": 300, "questions_run": 300,
                       "leaderboard": [{"label": "tied", "status": "done"}, {"label": "best", "status": "stopped"},
                                       {"label": "worse", "status": "stopped"}]}}
    bench_sweep.compare(result, tmp_path)
    v = result["asha_vs_grid"]
    assert v["wall_saved"] == 0.6 and v["calls_saved"] == 0.5 and v["questions_saved"] == 0.5
    assert not v["same_winner"] and v["asha_winner_grid_rank"] == 2 and v["asha_winner_tied_with_grid_winner"]
    assert v["stopped_grid_ranks"] == [1, 3] and v["stopped_but_tied_with_grid_winner"] == ["best"]
