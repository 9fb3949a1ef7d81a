"""docs/trust.md: the worked example's table (from its record) and every figure the page states in
prose, each recomputed from the results that ``benchmarks/checks/evidence.py`` rebuilds from the
evidence exports (so the chain runs page → results → per-item exports). The shared-evidence block
is checked by ``benchmarks/checks/shared_evidence.py``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from typing import Any

from benchmarks.verify import REPO, Figure, check, claim, compare_block

PAGE = REPO / "docs" / "trust.md"


@cache
def _evidence() -> dict[str, Any]:
    from benchmarks import bench_evidence

    return bench_evidence.report("test")


@cache
def _tune() -> dict[str, Any]:
    from benchmarks import bench_evidence

    return bench_evidence.report("tune")


@cache
def _used() -> dict[str, Any]:
    from benchmarks import bench_used

    return bench_used.run()


def _ci(m: dict[str, Any], fmt: str = "{:.2f}") -> str:
    return f"{fmt.format(m['mean'])} [{fmt.format(m['low'])}, {fmt.format(m['high'])}]"


@check("trust_worked_example")
def worked_example() -> Iterator[Figure]:
    from benchmarks.lighthouse_example import BEGIN, END, RECORD, block

    yield from compare_block("docs/trust.md#lighthouse", PAGE, BEGIN, END, block(json.loads(RECORD.read_text())))


@check("trust_prose")
def prose() -> Iterator[Figure]:
    tune = _tune()["variants"]["short_full"]
    lds = tune["pooled"]["subsets"]["all"]["metrics"]["lds"]["measures"]
    sec = tune["secondary"]["pooled"]
    diff = sec["lds_minus_surrogate_weight"]
    yield from claim("trust: surrogate_fit gain", PAGE, "raised pooled LDS by {} at no extra pass",
                     f"+{diff['mean']:.3f} [{diff['low']:.3f}, {diff['high']:.3f}]")
    arms = sec["panel"]["subsets"]["all"]["metrics"]["lds"]["measures"]["surrogate_arms"]["mean"]
    yield from claim("trust: surrogate_fit before/after", PAGE, "at no extra pass ({};",
                     f"{lds['surrogate_weight']['mean']:.3f} → {arms:.3f}")
    yield from claim("trust: auto's LDS on tune", PAGE, "(log-prob share, pooled LDS {}); the surrogate's",
                     f"{lds['logprob_share']['mean']:.3f}, vs the raw drop {lds['logprob_drop']['mean']:.3f} and JSD "
                     f"{lds['jsd']['mean']:.3f}")
    yield from claim("trust: surrogate's tune LDS", PAGE, "the surrogate's {} costs ~4x the passes",
                     f"{lds['surrogate_weight']['mean']:.3f}")
    # the used rule against gold (used_rule.json, rebuilt from the exports)
    used = _used()["test"]
    pooled = used["table"]["pooled"]
    yield from claim("trust: used rule, questions", PAGE, "| test split, pooled ({} questions) |", str(pooled["n_questions"]))
    rows = {"s >= 0.75 max": "**s ≥ 0.75 · max (default)**", "s > 0.01": "s > 0.01 (the old rule)",
            "top 1 retrieved": "retriever's top 1 (control)", "top 2 retrieved": "retriever's top 2 (control)"}
    for rule, label in rows.items():
        r = pooled["rules"][rule]
        marked = r["marked_per_question"]["mean"]
        cells = " | ".join(_ci(r[m]) for m in ("precision", "recall", "f1"))
        yield from claim(f"trust: used rule row {rule}", PAGE, "| " + label + " | {} |",
                         f"{cells} | {marked:.1f}" if rule.startswith("s") else f"{cells} | {marked:g}")
    prev = used["chosen_vs_previous_default"]["s > 0.01"]["difference"]
    yield from claim("trust: default vs old rule", PAGE, "the default beats the old rule (F1 {}, precision",
                     f"+{prev['f1']['mean']:.2f} [{prev['f1']['low']:.2f}, {prev['f1']['high']:.2f}]")
    yield from claim("trust: precision vs old rule", PAGE, "precision {}, paired", f"+{prev['precision']['mean']:.2f}")
    for control, where in (("top 1 retrieved", "against the top 1"), ("top 2 retrieved", "against the top 2")):
        d = used["chosen_vs_controls"][control]["difference"]["f1"]
        yield from claim(f"trust: F1 vs {control}", PAGE, "F1 {} " + where if control.startswith("top 1") else "and {} " + where,
                         f"{d['mean']:.2f} [{d['low']:.2f}, {d['high']:.2f}]".replace("-", "−"))
    per_set = used["data"]["per_set"]
    yield from claim("trust: used rule data", PAGE, "test split ({} questions)",
                     f"HotpotQA {per_set['hotpotqa']}, SQuAD {per_set['squad']}, PubMedQA {per_set['pubmedqa']}")
    machines = used["data"]["machine"]
    yield from claim("trust: used rule machines", PAGE, "{} 4 on a 2-core Intel Xeon",
                     f"{machines['NVIDIA H200']} of the {used['data']['units']} questions ran on an NVIDIA H200, "
                     f"{machines['AMD EPYC (2 cores)']} on a 2-core AMD EPYC,")
    # removing the top two (evidence_test.json, frozen, pooled, answered and context-dependent)
    m = _evidence()["variants"]["frozen"]["pooled"]["subsets"]["answered_context_dependent"]["metrics"]["top2_drop"]
    share = m["measures"]["logprob_share"]
    yield from claim("trust: top-2 drop questions", PAGE, "pooled, the {} questions answered correctly", str(m["n"]))
    yield from claim("trust: top-2 drop, share", PAGE, "by {} nats [", f"{share['mean']:.1f}")
    yield from claim("trust: top-2 drop, share CI", PAGE, "lowers the answer's log-probability by {};",
                     f"{share['mean']:.1f} nats [{share['low']:.1f}, {share['high']:.1f}]")
    rank = m["measures"]["retrieval_rank"]
    yield from claim("trust: top-2 drop, retriever", PAGE, "retriever's top two lowers it by {} (difference",
                     f"{rank['mean']:.1f} [{rank['low']:.1f}, {rank['high']:.1f}]")
    d = m["vs_controls"]["logprob_share"]["retrieval_rank"]["difference"]
    yield from claim("trust: top-2 drop, difference", PAGE, "(difference {}, Holm",
                     f"{d['mean']:.1f} [{d['low']:.1f}, {d['high']:.1f}]")
    sim = m["measures"]["answer_similarity"]
    yield from claim("trust: top-2 drop, cosine", PAGE, "comes close ({}; influence",
                     f"{sim['mean']:.1f} [{sim['low']:.1f}, {sim['high']:.1f}]")


@check("trust_shared_evidence_prose")
def shared_evidence_prose() -> Iterator[Figure]:
    """The reading after the shared-evidence block, from the recomputed result."""
    from benchmarks.shared_evidence_report import compute

    published = json.loads((REPO / "benchmarks" / "results" / "shared_evidence.json").read_text())
    r = compute(published["protocol"]["test_reads"])
    new, old = r["test"]["default"], r["test"]["drop_one"]

    def kn(f: dict[str, Any]) -> str:
        return f"{f['k']} of {f['n']}"

    head = new["gold_copy_used_on_right_answers"]
    yield from claim("trust: headline", PAGE, "whose gold passage is copied, is {}: ahead of drop-one",
                     f"{head['share']:.2f} ({kn(head)})")
    yield from claim("trust: headline, drop-one", PAGE, "ahead of drop-one ({}), short of the",
                     f"{old['gold_copy_used_on_right_answers']['share']:.2f}")
    rec, rec_old = new["gold_recall_right_context_dependent"], old["gold_recall_right_context_dependent"]
    pr = r["gold_recall_default_minus_drop_one"]
    same = rec == rec_old and pr["only_first"] == 0 and pr["only_second"] == 0
    yield from claim("trust: recall equal", PAGE, "answers drop-one finds ({} each, not one answer apart)",
                     kn(rec) if same else f"{kn(rec)} against {kn(rec_old)}")
    off, off_old = new["offtopic_marked_used"], old["offtopic_marked_used"]
    yield from claim("trust: off-topic overall", PAGE, "fewer off-topic passages overall ({})",
                     f"{kn(off)} against {kn(off_old)}".replace(" of ", " of ", 1))
    right, right_old = new["offtopic_marked_used_right_answers"], old["offtopic_marked_used_right_answers"]
    yield from claim("trust: off-topic on right answers", PAGE, "marks {} off-topic passages used, where drop-one marked",
                     kn(right))
    yield from claim("trust: off-topic on right answers, drop-one", PAGE, "where drop-one marked {}: the 5% goal",
                     str(right_old["k"]))
    yield from claim("trust: right context-dependent answers", PAGE, "{} right answers cannot decide",
                     {27: "Twenty-seven"}.get(pr["n"], str(pr["n"])))
    e = r["edit_test"]["pooled"]["methods"]
    d = e["default"]
    yield from claim("trust: edit recall", PAGE, "was marked used ({}), and", kn(d["recall"]))
    yield from claim("trust: edit precision", PAGE, "and {} edited passages the default", f"{d['precision']['k']} of the "
                     f"{d['precision']['n']}")
    missed = e["drop_one"]["recall"]["n"] - e["drop_one"]["recall"]["k"]
    yield from claim("trust: edit, drop-one", PAGE, "Drop-one missed {} of the", {1: "one"}.get(missed, str(missed)))
    yield from claim("trust: edit, cosine", PAGE, "answer–passage cosine found {}.", kn(e["answer_similarity_top1"]["recall"]))
    both, both_old = new["bridge_both_supporting_used"], old["bridge_both_supporting_used"]
    yield from claim("trust: bridge", PAGE, "credited on {} right answers", kn(both))
    yield from claim("trust: bridge, drop-one", PAGE, "right answers (drop-one {}), and none", kn(both_old))
    yield from claim("trust: bridge, needed together", PAGE, "and {} reads \"needed together\"",
                     "none" if new["bridge_needed_together"]["k"] == 0 else str(new["bridge_needed_together"]["k"]))
    lds = r["lds"]["pooled"]
    diff = r["lds"]["printed_minus_drop_one"]
    yield from claim("trust: LDS printed", PAGE, "ranks held-out subsets at {} against", f"{lds['credit_w0.25_printed']['mean']:.3f}")
    yield from claim("trust: LDS drop-one", PAGE, "against drop-one's {} (paired", f"{lds['credit_w0']['mean']:.3f}")
    yield from claim("trust: LDS paired", PAGE, "(paired {}), and above", f"{diff['mean']:+.3f} [{diff['ci95'][0]:+.3f}, "
                     f"{diff['ci95'][1]:+.3f}]")
    yield from claim("trust: LDS before", PAGE, "what ragray printed before ({})", f"{lds['credit_w0.5_printed']['mean']:.3f}")
    yield from claim("trust: LDS model", PAGE, "model's own prediction ({})", f"{lds['interactions_model']['mean']:.3f}")
    yield from claim("trust: LDS lasso equal calls", PAGE, "random masks reaches {}, and", f"{lds['lasso_2k2']['mean']:.3f}")
    yield from claim("trust: LDS lasso 24", PAGE, "needs 24 masks to reach {}:", f"{lds['lasso_24']['mean']:.3f}")
