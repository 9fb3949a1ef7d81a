"""Why each FAIL fails, in the console and the report: a missed gold document, or the noise the
formula charges when a query has fewer gold documents than k (then it cannot PASS at that k)."""

from types import SimpleNamespace

from ragray.pipeline.audit import audit_entry, summarize_audit
from ragray.audit.explain import explanation_prompt
from ragray.audit.why import fail_words
from ragray.report.audit_console import MAX_SHOWN, audit_lines
from ragray.types import Hit, Passage


def hits(*doc_ids):
    return [Hit(Passage(id=d, text="", doc_id=d), rank=i + 1, score=1.0 / (i + 1)) for i, d in enumerate(doc_ids)]


def config(k=3, pass_score=60):
    audit = SimpleNamespace(k=k, pass_score=pass_score)
    return SimpleNamespace(audit=audit, retrieval=SimpleNamespace(retriever="bm25", scope="per_question"),
                           data=SimpleNamespace(path="known-truth"))


ENTRIES = [
    audit_entry("two-gold-pass", "q1", hits("a", "b", "x"), ["a", "b"], 3, 60),  # 60: PASS
    audit_entry("one-gold-found", "q2", hits("a", "x", "y"), ["a"], 3, 60),  # 50: every gold found, cannot pass
    audit_entry("two-gold-missed", "q3", hits("a", "x", "y"), ["a", "b"], 3, 60),  # 15: missed b, could pass
    audit_entry("one-gold-missed", "q4", hits("x", "y", "z"), ["a"], 3, 60),  # -30: missed a, cannot pass anyway
    audit_entry("no-truth", "q5", hits("x", "y", "z"), [], 3, 60),
]


def test_each_fail_says_why():
    by_id = {e.query_id: e for e in ENTRIES}
    assert [by_id[q].status for q in ("two-gold-pass", "one-gold-found", "two-gold-missed")] == ["PASS", "FAIL", "FAIL"]
    assert fail_words(by_id["two-gold-pass"], 3, 60) is None and fail_words(by_id["no-truth"], 3, 60) is None
    assert fail_words(by_id["one-gold-found"], 3, 60) == (
        "every gold document is in the top 3; the formula charges the other 2 as noise: "
        "with 1 gold document, top-3 scores at most 50 (< 60)")
    assert fail_words(by_id["two-gold-missed"], 3, 60) == "missed b (1 of 2 gold documents)"
    assert fail_words(by_id["one-gold-missed"], 3, 60) == (
        "missed a (1 of 1 gold document); even found, with 1 gold document, top-3 scores at most 50 (< 60)")
    assert [e.best_score for e in ENTRIES] == [60, 50, 60, 50, None]
    # the optional LLM explanation is told the same, so it does not blame retrieval for the formula
    facts = explanation_prompt("q2", by_id["one-gold-found"])[1].content
    assert "Why it fails: every gold document is in the top 3; the formula charges the other 2 as noise" in facts
    assert "Why it fails" not in explanation_prompt("q1", by_id["two-gold-pass"])[1].content


def test_summary_counts_fails_by_cause_and_names_the_queries_that_cannot_pass():
    s = summarize_audit(ENTRIES, config())
    assert (s.n_pass, s.n_fail, s.n_unscored) == (1, 3, 1)
    assert (s.n_fail_missed, s.n_fail_noise_only) == (2, 1)
    assert s.cannot_pass == ("one-gold-found", "one-gold-missed")
    text = "\n".join(audit_lines(s, ENTRIES, "bm25", out="runs/a"))
    assert "ragray audit: 1/4 PASS (pass rate 0.250), 1 unscored, bm25 top-3 documents -> runs/a" in text
    assert "of 3 FAIL: 2 missed a gold document; 1 retrieved every gold document" in text
    assert ("2 of 4 queries cannot PASS at top-3 whatever is retrieved (2 with 1 gold document score at most 50; "
            "PASS needs 60), so this audit exits 1 at top-3; at --top-docs 1 a query with 1 gold document passes "
            "when it comes first") in text
    # at k = 1 a one-gold query can pass and a two-gold query cannot (35 at best)
    at1 = [audit_entry(e.query_id, e.query, hits(*e.retrieved), (e.relevant or ()) + (e.missing or ()), 1, 60)
           for e in ENTRIES]
    s1 = summarize_audit(at1, config(k=1))
    assert s1.cannot_pass == ("two-gold-pass", "two-gold-missed") and "cannot PASS" in "\n".join(audit_lines(s1, at1, "bm25"))
    assert {e.query_id: e.status for e in at1}["one-gold-found"] == "PASS"


def test_a_long_audit_shows_the_queries_that_missed_gold_first():
    many = [audit_entry(f"found-{i}", "q", hits("a", "x", "y"), ["a"], 3, 60) for i in range(MAX_SHOWN)]
    many.append(audit_entry("missed", "q", hits("x", "y", "z"), ["a"], 3, 60))
    lines = audit_lines(summarize_audit(many, config()), many, "bm25")
    why = [line for line in lines if line.startswith("why: ")]
    assert why[0].startswith("why: missed a") and len(why) == len(many)
    assert "(showing 11 of the 11 queries" not in "\n".join(lines)  # every query that did not pass is shown
