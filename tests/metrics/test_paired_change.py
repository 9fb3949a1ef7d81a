"""Two runs compared question by question: a known change is 'changed', a reshuffle of the same
counts is not, too few questions decide nothing."""

from ragray.metrics.paired_change import paired_changes


def q(qid, **cols):
    return {"question_id": qid, **cols}


def by_column(changes):
    return {c.column: c for c in changes}


def test_a_change_on_most_questions_is_changed_and_a_reshuffle_is_not():
    n = 20
    a = [q(f"q{i}", misaligned=True, answer_correct=i % 2 == 0, usage_ndcg=0.5, top1_used=i < 10) for i in range(n)]
    # B fixes the misalignment of 16 questions; the same 10 correct answers, on other questions
    b = [q(f"q{i}", misaligned=i >= 16, answer_correct=i % 2 == 1, usage_ndcg=0.5, top1_used=i < 10)
         for i in range(n)]
    c = by_column(paired_changes(a, b))
    assert (c["misaligned"].state, c["misaligned"].n, c["misaligned"].delta) == ("changed", 20, -0.8)
    assert c["misaligned"].p_value < 0.05 and c["misaligned"].test == "McNemar (exact)"
    # 20 discordant pairs, 10 each way: the counts are equal and so is the share
    assert (c["answer_correct"].state, c["answer_correct"].delta) == ("within noise", 0.0)
    assert (c["usage_ndcg"].state, c["usage_ndcg"].p_value) == ("within noise", 1.0)  # no difference at all
    assert c["top1_used"].state == "within noise"


def test_usage_ndcg_shift_is_tested_with_the_signed_rank_test():
    a = [q(f"q{i}", usage_ndcg=0.5 + 0.01 * i) for i in range(12)]
    b = [q(f"q{i}", usage_ndcg=0.8 + 0.01 * i) for i in range(12)]
    c = by_column(paired_changes(a, b))["usage_ndcg"]
    assert (c.state, c.test, c.n) == ("changed", "Wilcoxon signed-rank", 12)
    assert abs(c.delta - 0.3) < 1e-9


def test_few_or_no_common_questions_decide_nothing():
    a = [q(f"q{i}", misaligned=True) for i in range(5)]
    b = [q(f"q{i}", misaligned=False) for i in range(5)]
    c = by_column(paired_changes(a, b))
    # every question flipped, but 5 pairs cannot reach p < 0.05 (2 / 2^5 = 0.0625)
    assert (c["misaligned"].state, c["misaligned"].n) == ("undecided", 5)
    assert by_column(paired_changes(a, [q("other", misaligned=False)]))["misaligned"].state == "no questions in common"


def test_answered_correctly_pairs_answerable_questions_only():
    a = [q(f"q{i}", answer_correct=True, answerable=i >= 3) for i in range(10)]
    b = [q(f"q{i}", answer_correct=False, answerable=i >= 3) for i in range(10)]
    assert by_column(paired_changes(a, b))["answer_correct"].n == 7
