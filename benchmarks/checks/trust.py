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


@check("trust_prose", slow=True)
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
