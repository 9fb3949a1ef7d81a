"""The plots of a run's report: first the measures ragray recommends, then the older ρ plots.

- usage nDCG per question against the misalignment threshold (questions whose answer used a
  passage), and mean influence by retrieval rank (the same questions);
- further down, as details: Spearman ρ per question, retrieval rank vs influence rank, and
  dominance — kept for comparison with older runs, not to judge a run by.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from ragray.report import svg
from ragray.report.rundata import RunData

__all__ = ["detail_plots", "recommended_plots"]


def _mean(values: Sequence[float]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def _scored(questions: list[dict[str, Any]]) -> set[str]:
    """Questions whose answer used some passage (those with a tie-robust verdict); older runs
    without that column: the measured ones."""
    if any("misaligned" in q for q in questions):
        return {q["question_id"] for q in questions if q.get("misaligned") is not None}
    return {q["question_id"] for q in questions if q.get("state") == "measured"}


def recommended_plots(data: RunData) -> str:
    """Usage nDCG histogram with the threshold, and mean influence per retrieval rank."""
    qs, ps = data.table("questions"), data.table("passages")
    threshold = (data.summary.get("alignment") or {}).get("misalignment_threshold")
    ndcg = [q["usage_ndcg"] for q in qs if q.get("usage_ndcg") is not None]
    scored = _scored(qs)
    by_rank: dict[int, list[float]] = defaultdict(list)
    for p in ps:
        if p["question_id"] in scored and p.get("influence") is not None:
            by_rank[p["retrieval_rank"]].append(p["influence"])
    ranks = sorted(by_rank)
    charts = [
        svg.histogram(ndcg, title=f"Usage nDCG per question ({len(ndcg)})", xlabel="usage nDCG (1 = used passages ranked first)",
                      lo=0, hi=1, bins=10, marker=threshold, marker_label="misaligned below"),
        svg.bars([str(r) for r in ranks], [svg.Series("mean influence", ranks, [_mean(by_rank[r]) for r in ranks])],
                 title=f"Mean influence by retrieval rank ({len(scored)} questions)", xlabel="retrieval rank",
                 ylabel="mean influence"),
    ]
    return ("<h2>Plots</h2><p class=sub>Questions whose answer used some passage. Aligned questions sit right "
            "of the dashed line; influence falling with the rank means the model used what the retriever put "
            "first.</p><div class=charts>" + "".join(charts) + "</div>")


def detail_plots(data: RunData) -> str:
    """The older plots (ρ, rank vs rank, dominance), folded away."""
    s = data.summary
    qs, ps = data.table("questions"), data.table("passages")
    measured = {q["question_id"] for q in qs if q.get("state") == "measured"}
    rhos = [q["spearman_rho"] for q in qs if q["question_id"] in measured and q.get("spearman_rho") is not None]
    doms = [q["dominance"] for q in qs if q["question_id"] in measured and q.get("dominance") is not None]
    k = max((p["retrieval_rank"] for p in ps), default=0)
    pairs: Counter[tuple[float, float]] = Counter()
    for p in ps:
        if p["question_id"] in measured and p.get("influence_rank") is not None:
            pairs[(p["retrieval_rank"], round(p["influence_rank"] * 2) / 2)] += 1
    charts = [
        svg.histogram(rhos, title="Spearman ρ per question", xlabel="ρ (retrieval rank vs influence rank)",
                      lo=-1, hi=1, bins=10, marker=s.get("divergence_threshold"), marker_label="divergent below"),
        svg.bubbles(pairs, k, title="Retrieval rank vs influence rank", xlabel="retrieval rank",
                    ylabel="influence rank") if k else "",
        svg.histogram(doms, title="Dominance per question", xlabel="max influence / total influence",
                      lo=0, hi=1, bins=10),
    ]
    return ("<h2>Details: the Spearman ρ plots</h2><p class=sub>ρ ranks every passage, including those the model "
            "did not use, so ties among unused passages move it; the plots above are the ones to read.</p>"
            "<div class=charts>" + "".join(charts) + "</div>")
