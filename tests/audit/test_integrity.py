"""The integrity score pinned by hand-computed cases (SPEC §6, the auditor seed)."""

import pytest

from ragray.audit.integrity import FAIL, PASS, UNSCORED, audit_documents


def test_the_seeds_example():
    r = audit_documents(["gdpr.pdf", "finance_rules.pdf", "canteen.pdf"], ["gdpr.pdf", "finance_rules.pdf"])
    assert r.report() == {
        "score": 60, "coverage": 100.0, "precision": 0.67, "recall": 1.0, "noise_ratio": 33.33, "status": PASS,
        "retrieved": ["gdpr.pdf", "finance_rules.pdf", "canteen.pdf"],
        "relevant": ["gdpr.pdf", "finance_rules.pdf"], "missing": [], "noise": ["canteen.pdf"],
    }


@pytest.mark.parametrize(
    ("retrieved", "truth", "score", "status", "coverage", "noise"),
    [
        (["a", "b", "c"], ["a", "b", "c"], 70, PASS, 1.0, 0.0),  # perfect: the maximum is 70
        (["a", "x", "y"], ["a"], 50, FAIL, 1.0, 2 / 3),  # 70 - 20
        (["a", "b", "x"], ["a", "b", "c"], 36, FAIL, 2 / 3, 1 / 3),  # 46.67 - 10 = 36.67 → 36
        (["x", "y", "z"], ["a"], -30, FAIL, 0.0, 1.0),  # all noise: negative score
        (["a", "x"], ["a", "b", "c", "d"], 2, FAIL, 0.25, 0.5),  # 17.5 - 15 = 2.5 → 2
        (["a"], ["a", "b"], 35, FAIL, 0.5, 0.0),
        (list("abcdefghij"), list("abcdefghi"), 67, PASS, 1.0, 0.1),  # exact: the seed's floats give 66
        (["x", "a", "y", "b"], ["a", "b"], 55, FAIL, 1.0, 0.5),  # order does not matter: 70 - 15
    ],
)
def test_hand_computed_scores(retrieved, truth, score, status, coverage, noise):
    r = audit_documents(retrieved, truth)
    assert (r.score, r.status) == (score, status)
    assert r.coverage == pytest.approx(coverage) and r.noise_ratio == pytest.approx(noise)
    assert r.recall == r.coverage
    assert r.precision == pytest.approx(len(set(retrieved) & set(truth)) / len(retrieved))


def test_negative_scores_truncate_toward_zero():
    # 1/3 * 70 - 2/3 * 30 = 23.33 - 20 = 3.33 → 3; 0 * 70 - 1/4 * 30 = -7.5 → -7 (int(), not floor)
    assert audit_documents(["a", "x", "y"], ["a", "b", "c"]).score == 3
    assert audit_documents(["a", "b", "c", "x"], ["z"]).score == -30
    assert audit_documents(["a", "b", "c", "x"], ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]).score == 13


def test_empty_retrieval_fails_with_no_noise():
    r = audit_documents([], ["a", "b"])
    assert (r.score, r.status, r.precision, r.noise_ratio, r.missing) == (0, FAIL, 0.0, 0.0, ("a", "b"))


def test_empty_truth_is_unscored():
    r = audit_documents(["a", "b"], [])
    assert r.status == UNSCORED and r.score is None and r.coverage is None and r.noise == ("a", "b")
    assert r.report()["coverage"] is None


def test_duplicates_count_once_and_pass_score_is_configurable():
    r = audit_documents(["a", "a", "b"], ["a", "a"])
    assert r.retrieved == ("a", "b") and r.truth == ("a",) and r.score == 55
    assert audit_documents(["a", "b"], ["a"], pass_score=50).status == PASS


@pytest.mark.parametrize(
    ("n_truth", "n_retrieved", "best"),
    [
        (1, 3, 50),  # one gold document in the top 3: 70 - 20, below the pass mark whatever is retrieved
        (2, 3, 60),  # the seed's example: 70 - 10
        (1, 1, 70),
        (3, 3, 70),
        (5, 3, 42),  # more gold than slots: coverage 3/5 of 70, no noise
        (1, 10, 43),  # 70 - 27
        (9, 10, 67),
    ],
)
def test_best_score_is_the_formulas_ceiling(n_truth, n_retrieved, best):
    from ragray.audit.integrity import best_score

    assert best_score(n_truth, n_retrieved) == best
    # the ceiling is the score of the best retrieval: every gold document that fits, then noise
    gold = [f"g{i}" for i in range(n_truth)]
    ideal = (gold + [f"x{i}" for i in range(n_retrieved)])[:n_retrieved]
    assert audit_documents(ideal, gold).score == best == audit_documents(ideal, gold).best_score


def test_best_score_is_none_without_truth_or_retrieval():
    assert audit_documents(["a"], []).best_score is None
    assert audit_documents([], ["a"]).best_score is None
    assert audit_documents(["x", "y", "z"], ["a"]).best_score == 50  # missed, and could not pass anyway
