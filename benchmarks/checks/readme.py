"""The figures README.md states in prose, each recomputed from the per-run records of the results
file it comes from (with the functions of :mod:`benchmarks.checks.measurements`) and formatted as
README writes it. Not covered here: the demo transcript (the ```text block) and the sentence on what
"used" means, which have their own owners; README's figures with no record behind them say so in
README ("not re-checkable"): the test suite's wall time, the 4.7 calls/s before the ``gpu`` strategy,
the whole ``gpu_bench.sh run``'s time."""

from __future__ import annotations


from collections.abc import Iterator

from benchmarks.checks.measurements import (Approx, approx, bound_values, candidates, default_cost_means, engine_value,
                                            fair_ab, fair_ab_runs, rate, stored)
from benchmarks.verify import REPO, Figure, check, claim, read_json

README = REPO / "README.md"


def claim_value(name: str, sentence: str, value: float | Approx, digits: int) -> Figure:
    """``sentence`` (``{}`` where the number stands) on README with ``value`` at ``digits`` decimals;
    a value recomputed from rounded inputs may be written as any rounding its interval allows."""
    options = [f"{c:.{digits}f}" for c in candidates(value, digits)]
    for text in options:
        [fig] = claim(name, README, sentence, text)
        if fig.agrees():
            return fig if text == options[0] else Figure(f"{name} [within the rounding of its inputs]",
                                                          fig.published, fig.recomputed)
    return claim(name, README, sentence, options[0])[0]


def _scaled(value: Approx, by: float) -> Approx:
    return Approx(value.mid * by, value.lo * by, value.hi * by)


@check("readme")
def readme() -> Iterator[Figure]:
    # -- the demo run on a 2-core CPU: default_cost.json (12 demo questions, 2 runs per commit) ----
    cost = read_json("default_cost.json")
    means = default_cost_means(cost)
    walls = [r["wall_s"] for runs in cost["runs"].values() for r in runs]
    lo, hi = min(walls) / 60, max(walls) / 60
    # README gives a range ("about 2-4 minutes"): it holds when every measured run lies inside it
    yield from claim("README:demo run minutes", README, "About {} minutes on a 2-core CPU.",
                     "2-4" if 2 <= lo and hi <= 4 else f"{lo:.1f}-{hi:.1f}")
    yield from claim("README:default cost questions", README, "(README command 1: {} questions in", str(cost["limit"]))
    # this default's runs ("work"; the base commit c5ccbc0 ran log-prob influence, not this default)
    work = [r["wall_s"] for r in cost["runs"]["work"]]
    yield from claim("README:default cost seconds", README, "(README command 1: 12 questions in {} s over two runs,",
                     f"{round(min(work))}–{round(max(work))}")
    yield from claim("README:default cost per question", README, "takes about {} s with SmolLM2 on a 2-core CPU",
                     str(round(means["work"] / cost["limit"])))

    # -- one H200, 8B shape: gpu_8b.json -----------------------------------------------------------
    gpu = read_json("gpu_8b.json")
    main, default = gpu["ragray"], gpu["ragray_default_measure"]
    contexts = default["contexts"] / default["questions"]
    for name, sentence in (("demo", "each passage alone ({} contexts per question)"),
                           ("cost", "(10 passages, {} contexts) takes about"),
                           ("H200", "runs a question of the default ({} contexts) in")):
        yield from claim(f"README:contexts per question ({name})", README, sentence, f"{contexts:.0f}")
    yield claim_value("README:H200 default seconds per question", "contexts) in {} s,",
                      approx(lambda w: w / default["questions"], stored(default["wall_s"], 2)), 2)
    yield claim_value("README:H200 default contexts/s", "s, {} contexts/s (", rate(default["contexts"], default["wall_s"]), 1)
    yield from claim("README:H200 questions", README, "(bf16), {} demo questions, k = 10", str(main["questions"]))
    yield claim_value("README:H200 calls/s first run", "ragray did {} calls/s in the benchmark's first measured run",
                      rate(main["calls"], main["wall_s"]), 1)
    again = gpu["ragray_static_decode"]
    yield claim_value("README:H200 calls/s again", "and {} when the same settings ran again later",
                      rate(again["calls"], again["wall_s"]), 1)
    naive, lean = gpu["naive_logprob"], gpu["naive_lean"]

    def over(loop: dict) -> Approx:
        return approx(lambda c, w, n, s: (c / w) / (n / s), stored(main["calls"], None), stored(main["wall_s"], 2),
                      stored(loop["calls"], None), stored(loop["seconds"], 2))

    yield claim_value("README:H200 x naive log-prob loop", "in the process: {}x the naive log-prob loop", over(naive), 1)
    yield claim_value("README:H200 naive loop calls/s", "call ({} calls/s, waiting once per question;",
                      rate(naive["calls"], naive["seconds"]), 2)
    yield claim_value("README:H200 x lean loop", "waiting once per question; {}x a leaner one", over(lean), 1)
    bound = bound_values(gpu)["calls_per_s_no_reuse"]
    share = approx(lambda c, w, t: (c / w) / (t / main["mean_prompt_tokens"]), stored(main["calls"], None),
                   stored(main["wall_s"], 2), stored(gpu["bound"]["prefill"]["tokens_per_s"], 1))
    yield claim_value("README:H200 share of the prefill bound", "answer) and {} of the model's own prefill rate", share, 2)
    yield claim_value("README:H200 prefill bound calls/s", "prefill rate without reuse ({} calls/s)", bound, 1)
    # engine counts of the first measured run (24 questions, all in flight at once)
    engine = main["engine"]
    in_flight = min(main["questions"], main["backend_settings"]["questions_in_flight"])
    yield from claim("README:H200 questions in flight", README, "(on the H200, 8B, {} in flight:", str(in_flight))
    yield claim_value("README:H200 forward passes per question", "in flight: {} forward passes",
                      engine_value(engine, "forward_passes_per_question"), 1)
    yield claim_value("README:H200 host waits per question", "forward passes and {} host waits per question",
                      engine_value(engine, "host_syncs_per_question"), 1)
    yield claim_value("README:H200 tokens over the exact-reuse minimum",
                      "per question, {} of the per-call exact-reuse minimum of tokens",
                      engine_value(engine, "computed_over_minimum"), 2)
    yield claim_value("README:H200 padding", "exact-reuse minimum of tokens, {}% padding)",
                      _scaled(engine_value(engine, "padding_share"), 100), 1)

    # -- before/after the restructuring: the fair A/B (gpu_8b_ab_fair.json's per-process files) -----
    runs = fair_ab_runs()
    ab = fair_ab(runs)
    yield claim_value("README:A/B change", "it was {}% slower", abs(ab["change_pct_mean"]), 1)
    yield from claim("README:A/B runs per side", README, "slower ({} runs each;",
                     str(len([r for r in runs if r["process"].startswith("head")])))

    # -- the 1B shape: gpu_1b.json ------------------------------------------------------------------
    one_b = read_json("gpu_1b.json")["ragray"]
    yield claim_value("README:1B calls/s", "The 1B shape (measured before the restructuring): {} calls/s.",
                      rate(one_b["calls"], one_b["wall_s"]), 1)

    # -- how well it works: the test split ------------------------------------------------------------
    # TODO evidence check recomputes evidence_test.json: these read its published goals for now
    test = read_json("evidence_test.json")
    rows = test["parts"]["frozen"]["rows"]
    yield from claim("README:test split questions per set", README, "PubMedQA ({} questions each,", str(rows[1] - rows[0]))
    yield from claim("README:test split top-k", README, "SmolLM2-135M, BM25 top {})", str(test["top_k"]))
    per_set = test["goals"]["frozen"]["faithfulness"]["all"]["per_set"]
    lds = [per_set[s]["lds"] for s in ("hotpotqa", "squad", "pubmedqa")]
    yield from claim("README:test split LDS", README, "(linear datamodeling score of the best one: {} —",
                     f"{lds[0]['mean']:.2f}, {lds[1]['mean']:.2f} and {lds[2]['mean']:.2f}")
    # README names the best measure of each set: the raw log-prob drop, the same, the surrogate
    yield Figure("README:test split best LDS measures", ("logprob_drop", "logprob_drop", "surrogate_weight"),
                 tuple(x["measure"] for x in lds))
    # "better than every free control ... with paired 95% intervals above zero"
    yield Figure("README:test split LDS beats every control", True,
                 all(x["beats_every_control"] and x["weakest_margin"]["low"] > 0 for x in lds))
