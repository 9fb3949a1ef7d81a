"""What ``ragray audit`` prints: the seed auditor's report per query (with why a query fails),
then one summary line, then why the FAILs fail — a missed gold document, or only the noise the
formula charges when a query has fewer gold documents than k (then it cannot PASS at this k).

:func:`audit_lines` builds the text (pure, tested); :func:`print_audit` prints it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ragray.audit.integrity import FAIL, PASS, UNSCORED
from ragray.audit.why import fail_words, gold_words
from ragray.console import print_pairs
from ragray.rows.audit import AuditEntry
from ragray.rows.summaries import AuditSummary

__all__ = ["MAX_SHOWN", "audit_lines", "causes_line", "print_audit"]

#: queries printed in full: all of them up to this many, else the first ones that did not pass
MAX_SHOWN = 10
MAX_SHOWN_FAILING = 20
#: the seed's fields, in its order
FIELDS = ("score", "coverage", "precision", "recall", "noise_ratio", "status")


def _shown(entries: Sequence[AuditEntry]) -> list[AuditEntry]:
    if len(entries) <= MAX_SHOWN:
        return list(entries)
    missed = [e for e in entries if e.status == FAIL and not e.found_all]
    noise_only = [e for e in entries if e.status == FAIL and e.found_all]
    return (missed + noise_only + [e for e in entries if e.status == UNSCORED])[:MAX_SHOWN_FAILING]


def causes_line(s: AuditSummary) -> str:
    """The FAILs split by cause: a missed gold document, or only the formula's noise term."""
    return (f"of {s.n_fail} FAIL: {s.n_fail_missed} missed a gold document; {s.n_fail_noise_only} retrieved every "
            "gold document and fail on the noise the formula charges for the other slots")


def _ceiling_line(s: AuditSummary, entries: Sequence[AuditEntry]) -> str | None:
    if not s.cannot_pass:
        return None
    stuck = set(s.cannot_pass)
    by_gold = Counter(len(e.relevant or ()) + len(e.missing or ()) for e in entries if e.query_id in stuck)
    best = {len(e.relevant or ()) + len(e.missing or ()): e.best_score for e in entries if e.query_id in stuck}
    groups = "; ".join(f"{n} with {gold_words(g)} score at most {best[g]}" for g, n in sorted(by_gold.items()))
    fewest = min(by_gold)
    return (f"  {len(stuck)} of {s.n_scored} queries cannot PASS at top-{s.k} whatever is retrieved ({groups}; "
            f"PASS needs {s.pass_score}), so this audit exits 1 at top-{s.k}; at --top-docs {fewest} a query "
            f"with {gold_words(fewest)} passes when {'it comes' if fewest == 1 else 'they come'} first")


def audit_lines(s: AuditSummary, entries: Sequence[AuditEntry], retriever: str, out: object = None) -> list[str]:
    """The console report: the queries (all up to :data:`MAX_SHOWN`, else the first ones that did
    not pass, those that missed a gold document first), the summary line and why the FAILs fail."""
    k, pass_score = s.k or 0, s.pass_score or 0
    lines = ["=== RETRIEVAL INTEGRITY AUDIT ==="]
    shown = _shown(entries)
    for e in shown:
        lines.append(f"query: {e.query}")
        lines += [f"{key}: {'-' if getattr(e, key) is None else getattr(e, key)}" for key in FIELDS]
        if why := fail_words(e, k, pass_score):
            lines.append(f"why: {why}")
        if e.explanation:
            lines.append(f"explanation: {e.explanation}")
        lines.append("")
    if len(shown) < len(entries):
        not_passed = sum(e.status != PASS for e in entries)
        lines.append(f"(showing {len(shown)} of the {not_passed} queries that did not pass, those that missed "
                     "a gold document first; all are in audit_report.json)")
    lines.append(f"ragray audit: {s.n_pass}/{s.n_scored} PASS (pass rate "
                 f"{'-' if s.pass_rate is None else format(s.pass_rate, '.3f')}), {s.n_unscored} unscored, "
                 f"{retriever} top-{s.k} documents" + ("" if out is None else f" -> {out}"))
    if s.n_fail:
        lines.append(f"  {causes_line(s)}")
    if line := _ceiling_line(s, entries):
        lines.append(line)
    return lines


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_audit(s: AuditSummary, entries: Sequence[AuditEntry], retriever: str, out: object) -> None:
    """Print :func:`audit_lines`, then the means."""
    print("\n".join(audit_lines(s, entries, retriever, out)))
    print_pairs([("mean score", _fmt(s.mean_score, ".1f")), ("coverage %", _fmt(s.mean_coverage, ".1f")),
                 ("noise %", _fmt(s.mean_noise_ratio, ".1f")), ("precision", _fmt(s.mean_precision, ".2f")),
                 ("recall", _fmt(s.mean_recall, ".2f"))])
