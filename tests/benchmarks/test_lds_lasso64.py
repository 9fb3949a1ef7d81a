"""lds_lasso64 without a model: the seeded mask draw, the report on a known additive game (every
additive credit ranks its held-out subsets exactly), and a collect that resumes."""

from __future__ import annotations

from itertools import combinations

import pytest

from benchmarks import lds_credit
from benchmarks import lds_lasso64 as lasso64

K = 6
#: powers of two: every subset has its own sum, so an additive credit of the right order ranks exactly
WEIGHTS = [32.0, 16.0, 8.0, 4.0, 2.0, 1.0]


def game(kept) -> float:
    return -70.0 + sum(WEIGHTS[i] for i in kept)


def export(qid: str) -> dict:
    """A text-free export record of the additive game: its design all scored, 2(k + 1) random masks
    and the remaining subsets held out."""
    full = frozenset(range(K))
    ids = [f"{qid}#p{i}" for i in range(K)]
    design = {full, frozenset(), *(full - {i} for i in range(K)), *(frozenset({i}) for i in range(K))}
    others = [frozenset(c) for n in range(K + 1) for c in combinations(range(K), n) if frozenset(c) not in design]
    row = lambda purpose, s: {"question_id": qid, "purpose": purpose,  # noqa: E731
                              "kept_passage_ids": [ids[i] for i in sorted(s)], "logprob": game(s)}
    subsets = [row("closed_book", frozenset())]
    subsets += [row("surrogate", s) for s in others[: 2 * (K + 1)]]
    subsets += [row("heldout", s) for s in [*others[2 * (K + 1):], *(frozenset({i}) for i in range(K))]]
    passages = [{"passage_id": ids[i], "retrieval_rank": i + 1, "logprob_drop": game(full) - game(full - {i})}
                for i in range(K)]
    question = {"question_id": qid, "logprob_all": game(full), "logprob_none": game(frozenset()), "scored_tokens": 3}
    return {"question": question, "passages": passages, "subsets": subsets}


def record(exp: dict, *, reproduces: bool = True, set_name: str = "squad") -> dict:
    """What collect would write for ``exp``, its masks scored by the game."""
    q = exp["question"]
    masks = lasso64.question_masks(exp)
    return {"question_id": q["question_id"], "set": set_name, "reproduces": reproduces, "k": K,
            "logprob_all": q["logprob_all"] + (0.0 if reproduces else 0.5), "logprob_all_exported": q["logprob_all"],
            "logprob_none": q["logprob_none"], "logprob_none_exported": q["logprob_none"],
            "scored_tokens": 3, "scored_tokens_exported": 3, "prompt_tokens": 100, "prompt_tokens_exported": 100,
            "masks": [{"kept": sorted(m), "logprob": game(m)} for m in masks],
            "score_passes": len(set(masks)) + 2, "seconds": 1.5, "cpu": "test cpu"}


def test_the_masks_are_seeded_and_never_full_empty_or_excluded():
    excluded = [frozenset({0, 1}), frozenset({2}), frozenset({3, 4, 5})]
    a = lasso64.sample_masks("q1", K, exclude=excluded)
    assert a == lasso64.sample_masks("q1", K, exclude=excluded)
    assert a != lasso64.sample_masks("q2", K, exclude=excluded)
    assert len(a) == lasso64.N_MASKS == 64
    assert all(0 < len(m) < K and max(m) < K for m in a)
    assert not set(a) & set(excluded)
    # unconditioned, the draw still skips full and empty (with k = 2 half the draws are one of them)
    small = lasso64.sample_masks("q1", 2, n=200)
    assert set(small) <= {frozenset({0}), frozenset({1})}
    with pytest.raises(ValueError):
        lasso64.sample_masks("q1", 2, exclude=[frozenset({0}), frozenset({1})])


def test_a_question_masks_leave_out_its_evaluated_heldout_subsets():
    exp = export("q1")
    ev = lasso64.evaluated(exp)
    assert len(ev) == 2**K - 14 - 14  # every subset but the design and the 2(k + 1) masks
    assert not set(lasso64.question_masks(exp)) & set(ev)


def test_the_report_of_a_known_additive_game(tmp_path):
    path = tmp_path / "records.jsonl.gz"
    exps = {qid: export(qid) for qid in ("q1", "q2", "q3")}
    lasso64.append_record(record(exps["q1"]), path)
    lasso64.append_record(record(exps["q2"]), path)
    lasso64.append_record(record(exps["q3"], reproduces=False), path)
    got = lasso64.compute(path, [("test/frozen/squad", e) for e in exps.values()])
    assert got["records"] == 3 and got["reproduce"] == 2 and got["do_not_reproduce"] == 1
    assert got["not_reproducing"] == ["squad:q3"]
    assert got["masks_are_the_seeded_draw"] is True
    assert got["prompt_tokens_as_exported"] == 3
    # masks the export also scored in retrieval order (drop-one arms, held-out singletons) agree
    assert got["masks_the_export_scored"]["contexts"] > 0
    assert got["masks_the_export_scored"]["max_abs_difference"] == 0.0
    # an additive game: the Lasso on 64 masks, drop-one and the printed credit all rank exactly
    for name in ("lasso_64", "credit_w0", "credit_w0.25_printed"):
        assert got["lds"][name]["mean"] == pytest.approx(1.0) and got["lds"][name]["n"] == 2
    assert got["printed_minus_lasso_64"]["mean"] == pytest.approx(0.0)
    # the other rows are lds_credit's own, on the same questions
    assert got["per_question"]["squad:q1"]["lasso_24"] == lds_credit.per_question(exps["q1"])["lasso_24"]
    assert got["seconds_per_question"]["test cpu"]["mean_seconds"] == pytest.approx(1.5)
    assert any("lasso_64" in line for line in lasso64.report_lines(got))


def test_a_record_whose_masks_are_not_the_seeded_draw_is_caught(tmp_path):
    path = tmp_path / "records.jsonl.gz"
    exp = export("q1")
    bad = record(exp)
    bad["masks"][0]["kept"] = [0, 1, 2, 3, 4]
    lasso64.append_record(bad, path)
    assert lasso64.compute(path, [("test/frozen/squad", exp)])["masks_are_the_seeded_draw"] is False


def test_collect_resumes_skipping_recorded_questions(tmp_path):
    path = tmp_path / "records.jsonl.gz"
    todo = [lasso64.Item("squad", qid, export(qid)) for qid in ("q1", "q2", "q3", "q4")]
    lasso64.append_record(record(todo[0].export), path)
    seen = []

    def measure(item):
        seen.append(item.question_id)
        return record(item.export)

    quiet = lambda line: None  # noqa: E731
    got = lasso64.collect(10, path=path, measure=measure, todo=todo, limit=2, say=quiet)
    assert seen == ["q2", "q3"] and [r["question_id"] for r in got] == ["q2", "q3"]
    lasso64.collect(10, path=path, measure=measure, todo=todo, say=quiet)
    assert seen == ["q2", "q3", "q4"]
    assert sorted(lasso64.load_records(path)) == ["squad:q1", "squad:q2", "squad:q3", "squad:q4"]
    assert lasso64.collect(0, path=path, measure=measure, todo=todo[:1] + [lasso64.Item("squad", "q5", export("q5"))],
                           say=quiet) == []  # no time left: nothing starts


def test_the_order_is_by_hash_of_the_question_id():
    exps = [("test/frozen/squad", export(q)) for q in ("a", "b", "c", "d")]
    order = [it.question_id for it in lasso64.items(exps)]
    assert order == sorted("abcd", key=lambda q: lasso64._hash(q))
