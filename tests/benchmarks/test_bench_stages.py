"""The stage benchmark's intervention and figures on records whose answer is known: the gold moved
first keeps every other passage's order; a stage rule that separates the gains is 'shown', one
that reverses them 'misleads', one that does not separate them 'not shown', too few 'too few'."""

from __future__ import annotations

from benchmarks.bench_stages import figures, gold_first


def _p(rank: int, gold: bool = False) -> dict:
    return {"retrieval_rank": rank, "is_gold": gold, "passage_id": f"p{rank}"}


def test_gold_first_moves_only_the_gold_and_keeps_both_orders():
    rows = [_p(3), _p(1), _p(5, True), _p(2), _p(4, True)]
    assert [p["retrieval_rank"] for p in gold_first(rows)] == [4, 5, 1, 2, 3]


def _rec(i: int, stage: str, gain: float, fixed: bool = False, split: str = "test") -> dict:
    return {"id": f"q{i}", "split": split, "stage": stage, "order_changes": True, "gain": gain, "fixed": fixed,
            "reproduces": True}


def _records(rank_gains: list[float], gen_gains: list[float]) -> list[dict]:
    recs = [_rec(i, "ranking", g, fixed=g > 2) for i, g in enumerate(rank_gains)]
    recs += [_rec(100 + i, "generation", g) for i, g in enumerate(gen_gains)]
    recs.append({"id": "right", "split": "test", "stage": "right", "order_changes": False})
    recs.append({"id": "first", "split": "test", "stage": "generation", "order_changes": False})
    recs.append(_rec(200, "ranking", 50.0, split="tune"))  # another split: never counted
    return recs


def test_a_rule_whose_ranking_verdicts_gain_more_is_shown():
    out = figures(_records([3.0, 2.5, 4.0, 3.5, 2.8, 3.1], [0.1, -0.2, 0.3, 0.0, 0.2, -0.1]), "test")
    assert out["decision"].startswith("shown")
    assert out["primary"]["ci95"][0] > 0 and out["mann_whitney_p"] < 0.01
    assert out["per_stage"]["ranking"] == {"n": 6, "mean_gain": out["per_stage"]["ranking"]["mean_gain"],
                                           "median_gain": 3.05, "fixed": 6}
    assert out["stage_counts"]["right"] == 1 and out["stage_counts"]["generation"] == 7
    assert out["generation_gold_already_first"] == 1
    assert out["baseline_rank_only"]["n"] == 12 and out["items"] == 14


def test_a_reversed_rule_misleads_an_equal_one_is_not_shown_and_few_items_are_too_few():
    assert figures(_records([0.1, -0.2, 0.3, 0.0, 0.2], [3.0, 2.5, 4.0, 3.5, 2.8]), "test")["decision"] == \
        "the verdict misleads"
    same = [0.5, -0.5, 1.0, -1.0, 0.0, 0.2]
    assert figures(_records(same, list(reversed(same))), "test")["decision"].startswith("not shown")
    few = figures(_records([3.0, 2.0], [0.0, 0.1, 0.2, 0.3, 0.4]), "test")
    assert few["decision"] == "too few to judge" and "primary" not in few
