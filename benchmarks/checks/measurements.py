"""The measurement results (timings, rates, engine counts) at the top of ``benchmarks/results/``,
recomputed from the per-run values each file keeps.

A timing benchmark's records are its runs: for each run the count of calls (or questions, prompts,
tokens) and the seconds it took, kept in the same JSON (and for ``gpu_8b_ab_fair.json``/
``gpu_attention.json`` the raw per-process files under ``results/logs/gpu_ab_2026-11-28/``). What is
recomputed here is every figure *derived* from them: rates (calls / seconds), speed-ups and shares
(rate / rate), means, medians, paired changes and their statistics, engine counts per question,
the bounds' calls/s. A run's own count or seconds is the record itself and is not a figure.

Inputs the benchmarks stored rounded (``wall_s`` to 0.01 s, engine totals to 0.001, …) while the
published figure was computed before that rounding: such a figure is recomputed as an interval over
the rounding of its inputs (:class:`Approx`); at the published precision it agrees when it lies in
that interval (the figure's name then says ``[within the rounding of its inputs]``), and otherwise
the interval's midpoint is what is reported.

Aggregates a file keeps without the per-item values behind them (latency percentiles over requests,
shares over questions or queries whose per-item outcomes were not kept) cannot be recomputed; they
are listed in :data:`NOT_REDERIVABLE`, and files made mostly of them were moved to
``benchmarks/results/archive/``.
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from benchmarks.verify import RESULTS, Figure, check, compare_json, leaves, read_json

GPU_AB_LOGS = "logs/gpu_ab_2026-11-28"

#: published figures of the covered files that no kept record can reproduce (aggregates over items
#: whose per-item values were not kept): reported, never compared.
NOT_REDERIVABLE = {
    "generation.json:summary.influence_ranks_bf16_vs_fp32.top1_agreement":
        "share over 3 questions; the per-question top-1 outcomes were not kept",
    "retrieval.json:bm25[*].identical_top10_share": "share over the queries; per-query top-10s not kept",
    "retrieval.json:bm25[*].max_abs_score_diff": "maximum over the queries; per-query scores not kept",
}


# -- recomputing from rounded inputs ---------------------------------------------------------------


@dataclass(frozen=True)
class Approx:
    """A value recomputed from inputs that were stored rounded: it lies in ``[lo, hi]``."""

    mid: float
    lo: float
    hi: float


def stored(value: float, decimals: int | None) -> tuple[float, float]:
    """An input as kept in a JSON: its value and half a unit of its last kept decimal (0: exact)."""
    return value, (0.5 * 10.0 ** -decimals if decimals is not None else 0.0)


def approx(f: Callable[..., float], *inputs: tuple[float, float]) -> Approx:
    """``f`` of ``inputs`` (see :func:`stored`) over every corner of their rounding (``f`` monotonic
    in each input, as rates, ratios, means and changes are)."""
    corners = [f(*c) for c in itertools.product(*[(v - h, v + h) if h else (v,) for v, h in inputs])]
    return Approx(f(*[v for v, _ in inputs]), min(corners), max(corners))


def figure(name: str, published: Any, value: float | Approx | None, digits: int | None = None) -> Figure:
    """``published`` against ``value`` at ``digits`` decimals (the benchmark's own rounding; None:
    unrounded, compared as floats)."""
    if value is None:
        return Figure(name, published, None)
    if isinstance(value, Approx):
        if digits is None:
            raise ValueError(f"{name}: an interval needs the published precision")
        lo, hi = round(value.lo, digits), round(value.hi, digits)
        mid = round(value.mid, digits)
        if (isinstance(published, (int, float)) and not isinstance(published, bool) and published != mid
                and lo - 1e-9 <= published <= hi + 1e-9):
            return Figure(f"{name} [within the rounding of its inputs: {lo}..{hi}]", published, published)
        return Figure(name, published, mid)
    return Figure(name, published, round(value, digits) if digits is not None else value)


def rate(count: float, seconds: float, seconds_decimals: int | None = 2) -> Approx:
    """count / seconds, the seconds kept at ``seconds_decimals``."""
    return approx(lambda c, s: c / s, stored(count, None), stored(seconds, seconds_decimals))


def candidates(value: float | Approx, digits: int) -> list[float]:
    """Every value at ``digits`` decimals that ``value`` may round to (one unless it is an interval
    across a rounding boundary), the midpoint's first."""
    if not isinstance(value, Approx):
        return [round(value, digits)]
    step = 10.0 ** -digits
    lo, hi, mid = round(value.lo, digits), round(value.hi, digits), round(value.mid, digits)
    out = [mid] + [round(lo + i * step, digits) for i in range(int(round((hi - lo) / step)) + 1)]
    return list(dict.fromkeys(out))


def mid(value: float | Approx) -> float:
    return value.mid if isinstance(value, Approx) else value


# -- default_cost.json ---------------------------------------------------------------------------


def default_cost_means(d: dict[str, Any]) -> dict[str, float]:
    """Mean wall seconds of each side's runs (12 demo questions each)."""
    return {side: statistics.fmean(r["wall_s"] for r in runs) for side, runs in d["runs"].items()}


@check("default_cost", covers=("default_cost.json",))
def default_cost() -> Iterator[Figure]:
    d = read_json("default_cost.json")
    means = default_cost_means(d)
    for side, value in means.items():
        yield figure(f"default_cost.json:mean_wall_s.{side}", d["mean_wall_s"][side], value)
    yield figure("default_cost.json:ratio_work_over_base", d["ratio_work_over_base"], means["work"] / means["base"])


# -- dtype*.json: per-question records -----------------------------------------------------------


@check("dtype", covers=("dtype.json", "dtype_default.json", "dtype_default_epyc.json"))
def dtype() -> Iterator[Figure]:
    from benchmarks.bench_dtype import summarize

    for rel in ("dtype.json", "dtype_default.json", "dtype_default_epyc.json"):
        d = read_json(rel)
        rows = []
        for name, ds in d["datasets"].items():
            rows += ds["questions"]
            fresh = summarize(ds["questions"])
            # the older file (dtype.json) predates the used-marks counts: only what it published
            yield from compare_json(f"{rel}:datasets.{name}.summary", ds["summary"],
                                    {k: fresh[k] for k in ds["summary"] if k in fresh})
        fresh = summarize(rows)
        yield from compare_json(f"{rel}:overall", d["overall"], {k: fresh[k] for k in d["overall"] if k in fresh})


# -- bench_gpu.py results ------------------------------------------------------------------------

ENGINE_PER_QUESTION = (  # figure, numerator total, denominator total (None: questions), decimals
    ("forward_passes_per_question", "forward_passes_total", None, 3),
    ("host_syncs_per_question", "host_syncs_total", None, 3),
    ("tokens_computed_per_question", "tokens_computed_total", None, 1),
    ("computed_over_minimum", "tokens_computed_total", "tokens_minimum_total", 4),
    ("padding_share", "padding_tokens_total", "tokens_computed_total", 4),
)


def _total(x: float) -> tuple[float, float]:
    """An engine total: summed from per-question shares and kept at 0.001 (an int is exact)."""
    return stored(x, None if isinstance(x, int) else 3)


def engine_value(engine: dict[str, Any], key: str) -> Approx:
    """One of ``summary.json``'s per-question engine figures from the run's totals."""
    _, num, den, _ = next(row for row in ENGINE_PER_QUESTION if row[0] == key)
    if den is None:
        return approx(lambda a: a / engine["questions"], _total(engine[num]))
    return approx(lambda a, b: a / b, _total(engine[num]), _total(engine[den]))


def engine_figures(name: str, engine: dict[str, Any]) -> Iterator[Figure]:
    for key, *_, digits in ENGINE_PER_QUESTION:
        if key in engine and engine[key] is not None:
            yield figure(f"{name}.{key}", engine[key], engine_value(engine, key), digits)


def run_figures(name: str, run: dict[str, Any]) -> Iterator[Figure]:
    """A ragray run of bench_gpu (calls, contexts and questions over its wall seconds)."""
    wall = run["wall_s"]
    yield figure(f"{name}.calls_per_s", run["calls_per_s"], rate(run["calls"], wall), 2)
    if "contexts_per_s" in run:
        yield figure(f"{name}.contexts_per_s", run["contexts_per_s"], rate(run["contexts"], wall), 2)
    if "seconds_per_question" in run:
        yield figure(f"{name}.seconds_per_question", run["seconds_per_question"],
                     approx(lambda w: w / run["questions"], stored(wall, 2)), 3)
    if run.get("engine"):
        yield from engine_figures(f"{name}.engine", run["engine"])


def bound_values(d: dict[str, Any]) -> dict[str, Approx]:
    """The bounds' calls/s: the prefill rate over the main run's mean prompt tokens (no reuse) and
    over its per-call exact-reuse minimum."""
    tps = stored(d["bound"]["prefill"]["tokens_per_s"], 1)
    main = d["ragray"]
    out = {"calls_per_s_no_reuse": approx(lambda t: t / main["mean_prompt_tokens"], tps)}
    minimum = (main.get("engine") or {}).get("tokens_minimum_total")
    if minimum:
        out["calls_per_s_exact_reuse"] = approx(lambda t, m: t / (m / main["calls"]), tps, _total(minimum))
    return out


def bench_gpu_figures(rel: str, d: dict[str, Any]) -> Iterator[Figure]:
    from benchmarks.bench_gpu import BANDWIDTH

    for key, value in d.items():
        if isinstance(value, dict) and "calls" in value and "wall_s" in value and "calls_per_s" in value:
            yield from run_figures(f"{rel}:{key}", value)  # ragray, ragray_default_measure, ragray_<variant>
    for key in ("naive_logprob", "naive_lean", "seed_loop"):
        if d.get(key) and d[key].get("calls"):
            loop = d[key]
            yield figure(f"{rel}:{key}.calls_per_s", loop["calls_per_s"], rate(loop["calls"], loop["seconds"]), 2)
    # bench_gpu.derive: from the rates as stored
    main_rate = d["ragray"]["calls_per_s"]
    for key, loop in (("x_naive_logprob", "naive_logprob"), ("x_naive_lean", "naive_lean")):
        if d.get(key) is not None:
            yield figure(f"{rel}:{key}", d[key], main_rate / d[loop]["calls_per_s"], 2)
    bound = d.get("bound")
    if bound:
        prefill = bound["prefill"]
        yield figure(f"{rel}:bound.prefill.tflops", prefill["tflops"],
                     approx(lambda t: 2 * d["model"]["parameters"] * t / 1e12, stored(prefill["tokens_per_s"], 1)), 1)
        for key, value in bound_values(d).items():
            yield figure(f"{rel}:bound.{key}", bound[key], value, 2)
            share = f"share_of_{key.removeprefix('calls_per_s_')}_bound"
            if share in d:
                yield figure(f"{rel}:{share}", d[share], main_rate / bound[key], 3)
        step = bound.get("decode_step") or {}
        width = next((v for k, v in BANDWIDTH.items() if k in d["device"]), None)
        if step.get("bandwidth_bound_ms") is not None and width:
            yield figure(f"{rel}:bound.decode_step.bandwidth_bound_ms", step["bandwidth_bound_ms"],
                         approx(lambda g: g * 1e9 / width * 1000, stored(step["weight_gb"], 2)), 2)
    profile = d.get("profile")
    if profile:
        yield figure(f"{rel}:profile.device_busy_share", profile["device_busy_share"],
                     approx(lambda k, w: k / w, stored(profile["kernel_s"], 3), stored(profile["wall_s"], 2)), 3)
    for n, row in (d.get("in_flight") or {}).items():
        yield from engine_figures(f"{rel}:in_flight.{n}.engine", row["engine"])


BENCH_GPU_FILES = ("engine.json", "engine_cpu_tiny.json", "engine_variants.json", "gpu_1b.json", "gpu_8b.json",
                   "gpu_8b_75290db.json", "gpu_8b_first_call.json", "gpu_8b_profile_call.json")


@check("bench_gpu", covers=BENCH_GPU_FILES)
def bench_gpu() -> Iterator[Figure]:
    for rel in BENCH_GPU_FILES:
        yield from bench_gpu_figures(rel, read_json(rel))


@check("engine_in_flight_smollm2", covers=("engine_in_flight_smollm2.json",))
def engine_in_flight_smollm2() -> Iterator[Figure]:
    d = read_json("engine_in_flight_smollm2.json")
    yield from engine_figures("engine_in_flight_smollm2.json:engine", d["engine"])


@check("engine_counts_vs_gpu_record", covers=("engine_counts_vs_gpu_record.json",))
def engine_counts_vs_gpu_record() -> Iterator[Figure]:
    """Exact engine counts of each tree and setting: the record itself. The file derives no figure
    in its numeric fields (its percentages are in the prose of ``reading*``, not checked here), so
    there is nothing to recompute; the check only asserts that the counts are all there."""
    d = read_json("engine_counts_vs_gpu_record.json")
    keys = {"forward_passes_total", "host_syncs_total", "tokens_computed_total", "tokens_minimum_total",
            "padding_tokens_total"}
    for side in ("record", "this", "this_one_scoring_round"):
        for setting, counts in d[side].items():
            if set(counts) != keys:
                raise ValueError(f"engine_counts_vs_gpu_record.json: {side}/{setting} lacks counts")
    return iter(())


@check("ops_per_call_cpu", covers=("ops_per_call_cpu.json",))
def ops_per_call_cpu() -> Iterator[Figure]:
    """Exact operator counts at 2 and 4 layers; the 32-layer figure extrapolated linearly."""
    d = read_json("ops_per_call_cpu.json")
    at32 = {}
    for side in ("head", "base"):
        s = d[side]
        per_layer = (s["ops_4_layers"] - s["ops_2_layers"]) / 2
        fixed = s["ops_2_layers"] - 2 * per_layer
        at32[side] = fixed + 32 * per_layer
        yield figure(f"ops_per_call_cpu.json:{side}.ops_per_layer", s["ops_per_layer"], per_layer)
        yield figure(f"ops_per_call_cpu.json:{side}.fixed_ops", s["fixed_ops"], fixed)
        yield figure(f"ops_per_call_cpu.json:{side}.ops_32_layers_extrapolated", s["ops_32_layers_extrapolated"], at32[side])
    diff = d["difference_32_layers"]
    yield figure("ops_per_call_cpu.json:difference_32_layers.ops", diff["ops"], at32["head"] - at32["base"])
    yield figure("ops_per_call_cpu.json:difference_32_layers.share", diff["share"],
                 (at32["head"] - at32["base"]) / at32["base"], 4)


# -- the GPU A/B files ---------------------------------------------------------------------------


def pct_change(new: float, old: float) -> float:
    return (new / old - 1) * 100


@check("gpu_8b_ab_75290db", covers=("gpu_8b_ab_75290db.json",))
def gpu_8b_ab_75290db() -> Iterator[Figure]:
    """Per-run records (machine call, pair, side): the pairs' changes, their median, the warm runs'
    means (pairs 2 and 3 of each machine)."""
    rel = "gpu_8b_ab_75290db.json"
    d = read_json(rel)
    runs = {(r["machine_call"], r["pair"], r["side"]): r for r in d["runs"]}
    pairs = sorted({(m, p) for m, p, _ in runs})
    change = [pct_change(runs[m, p, "head"]["calls_per_s"], runs[m, p, "base"]["calls_per_s"]) for m, p in pairs]
    s = d["summary"]
    yield figure(f"{rel}:summary.pairs", s["pairs"], len(pairs))
    yield figure(f"{rel}:summary.pairs_head_slower", s["pairs_head_slower"], sum(c < 0 for c in change))
    for i, c in enumerate(change):
        yield figure(f"{rel}:summary.pair_change_pct[{i}]", s["pair_change_pct"][i], c, 1)
    yield figure(f"{rel}:summary.median_pair_change_pct", s["median_pair_change_pct"], statistics.median(change), 1)
    warm = [(m, p) for m, p in pairs if p > 1]
    firsts = [(m, p) for m, p in pairs if p == 1]
    for side in ("base", "head"):
        yield figure(f"{rel}:summary.warm_runs_mean_calls_per_s.{side}", s["warm_runs_mean_calls_per_s"][side],
                     statistics.fmean(runs[m, p, side]["calls_per_s"] for m, p in warm), 2)
        yield figure(f"{rel}:summary.warm_runs_scoring_ms_per_prompt.{side}",
                     s["warm_runs_scoring_ms_per_prompt"][side],
                     statistics.fmean(1000 * runs[m, p, side]["scoring_s"] / runs[m, p, side]["scored_prompts"]
                                      for m, p in warm), 2)
        for i, (m, p) in enumerate(firsts):
            yield figure(f"{rel}:summary.first_pair_of_each_machine_calls_per_s.{side}[{i}]",
                         s["first_pair_of_each_machine_calls_per_s"][side][i], runs[m, p, side]["calls_per_s"])


def _log(name: str) -> dict[str, Any]:
    return read_json(f"{GPU_AB_LOGS}/{name}.json")


def _scoring(seconds: dict[str, Any]) -> Any:
    """The scoring call's seconds: ``logprobs`` since the restructuring, ``score`` before it."""
    v = seconds.get("logprobs", seconds.get("score"))
    return v["seconds"] if isinstance(v, dict) else v


FAIR_PROCESSES = {"head 1": "call3_calls_head_1", "base 1": "call3_calls_base_1",
                  "base 2": "call3_calls_base_2", "head 2": "call3_calls_head_2"}


def fair_ab_runs() -> list[dict[str, Any]]:
    """The fair A/B's measured runs, from each process's own file (call 3, ABBA)."""
    out = []
    for process, log in FAIR_PROCESSES.items():
        for r in _log(log)["runs"]:
            if r["run"].startswith("measured"):
                out.append({"process": process, "run": r["run"], "calls": r["calls"], "calls_per_s": r["calls_per_s"],
                            "wall_s": r["wall_s"], "generate_s": r["model_seconds"]["generate"],
                            "scoring_s": _scoring(r["model_seconds"]),
                            "forward_passes": r["engine"]["forward_passes_total"],
                            "tokens_computed": r["engine"]["tokens_computed_total"]})
    return out


def fair_ab(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Pairs (round r: head r against base r, run by run) and their paired statistics."""
    from scipy.stats import t as student

    by = {(r["process"], r["run"]): r for r in runs}
    pairs = []
    for rnd in (1, 2):
        for run in sorted({r["run"] for r in runs}):
            h, b = by[f"head {rnd}", run], by[f"base {rnd}", run]
            pairs.append({"round": rnd, "run": run, "head": h["calls_per_s"], "base": b["calls_per_s"],
                          "change_pct": pct_change(h["calls_per_s"], b["calls_per_s"]),
                          "scoring_change_pct": pct_change(h["scoring_s"], b["scoring_s"]),
                          "generate_change_pct": pct_change(h["generate_s"], b["generate_s"])})
    change = [p["change_pct"] for p in pairs]
    n, mean, sd = len(change), statistics.fmean(change), statistics.stdev(change)
    half = float(student.ppf(0.95, n - 1)) * sd / math.sqrt(n)
    return {
        "pairs": pairs,
        "calls_per_s_mean": {side: statistics.fmean(r["calls_per_s"] for r in runs if r["process"].startswith(side))
                             for side in ("head", "base")},
        "change_pct_mean": mean, "change_pct_sd": sd, "t": mean / (sd / math.sqrt(n)), "df": n - 1,
        "ci90_pct": [mean - half, mean + half], "pairs_head_slower": sum(c < 0 for c in change),
        "scoring_change_pct_mean": statistics.fmean(p["scoring_change_pct"] for p in pairs),
        "generate_change_pct_mean": statistics.fmean(p["generate_change_pct"] for p in pairs),
        "cold_first_run_calls_per_s": {side: by[f"{side} 1", "measured 1"]["calls_per_s"] for side in ("head", "base")},
    }


@check("gpu_8b_ab_fair", covers=("gpu_8b_ab_fair.json",))
def gpu_8b_ab_fair() -> Iterator[Figure]:
    """From the per-process files under ``results/logs/gpu_ab_2026-11-28/`` (each process's runs as
    profile_calls.py / bench_gpu.py wrote them)."""
    rel = "gpu_8b_ab_fair.json"
    d = read_json(rel)
    runs = fair_ab_runs()
    for r in runs:
        yield figure(f"{GPU_AB_LOGS}:{r['process']} {r['run']}.calls_per_s", r["calls_per_s"],
                     rate(r["calls"], r["wall_s"]), 2)
    pub = d["fair_ab"]
    yield from compare_json(f"{rel}:fair_ab.runs", pub["runs"], [{k: v for k, v in r.items() if k != "calls"} for r in runs])
    fresh = fair_ab(runs)
    digits = {"change_pct": 2, "scoring_change_pct": 2, "generate_change_pct": 2, "calls_per_s_mean": 2,
              "change_pct_mean": 2, "change_pct_sd": 2, "t": 2, "ci90_pct": 2, "scoring_change_pct_mean": 2,
              "generate_change_pct_mean": 2}
    published = dict(leaves({k: pub[k] for k in fresh}))
    for path, value in leaves(fresh):
        key = next((k for k in reversed(path.replace("[", ".").split(".")) if k in digits), None)
        yield figure(f"{rel}:fair_ab.{path}", published.get(path, "<missing>"), value,
                     digits[key] if key and isinstance(value, float) else None)
    # bench_gpu's headline phase per side (calls 1 and 2)
    sides = [(f"call1_base_{i}", f"call1_head_{i}") for i in (1, 2, 3)] + [("call2_base_1", "call2_head_1")]
    for i, (base, head) in enumerate(sides):
        row = d["bench_gpu_ab"]["pairs"][i]
        for side, log in (("base", base), ("head", head)):
            got = _log(log)
            yield figure(f"{rel}:bench_gpu_ab.pairs[{i}].{side}", row[side], got["ragray"]["calls_per_s"])
            yield figure(f"{rel}:bench_gpu_ab.pairs[{i}].{side}_scoring_s", row[f"{side}_scoring_s"],
                         _scoring(got["ragray"]["model_seconds"]))
            if f"{side}_profile_kernel_s" in row:
                yield figure(f"{rel}:bench_gpu_ab.pairs[{i}].{side}_profile_kernel_s", row[f"{side}_profile_kernel_s"],
                             got["profile"]["kernel_s"])
    for side in ("head", "base"):
        calls = [{k: c[k] for k in ("call", "prompts", "wall_s", "kernel_s")} for c in _log(f"call2_calls_{side}")["calls"]]
        yield from compare_json(f"{rel}:per_call_profile.{side}", d["per_call_profile"][side], calls)
    yield from compare_json(f"{rel}:attention", d["attention"], _log("call1_attention"))


@check("gpu_attention", covers=("gpu_attention.json",))
def gpu_attention() -> Iterator[Figure]:
    """A raw record (kernel timings, peak memory, differences): the same run's own file under
    ``results/logs/gpu_ab_2026-11-28/`` must hold every figure."""
    yield from compare_json("gpu_attention.json", read_json("gpu_attention.json"), _log("call1_attention"))


# -- generation.json, limits*.json ---------------------------------------------------------------


def generation_rates(d: dict[str, Any]) -> dict[str, Approx]:
    """Each section's calls over its seconds."""
    return {name: rate(s["calls"], s["seconds"]) for name, s in d["sections"].items() if s.get("seconds")}


@check("generation", covers=("generation.json",))
def generation() -> Iterator[Figure]:
    """Per section: calls and seconds, and every answer (33 each) compared with the naive loop's."""
    rel = "generation.json"
    d = read_json(rel)
    sections, summary = d["sections"], d["summary"]
    naive = sections["naive_hf_generate_fp32"]
    for name, value in generation_rates(d).items():
        yield figure(f"{rel}:sections.{name}.calls_per_s", sections[name]["calls_per_s"], value, 4)
        yield figure(f"{rel}:summary.{name}.calls_per_s", summary[name]["calls_per_s"], value, 4)
    for name, s in sections.items():
        if name == "naive_hf_generate_fp32":
            continue
        speed = s["calls_per_s"] / naive["calls_per_s"]  # bench_generation: from the rates as stored
        same = sum(a == b for a, b in zip(s["answers"], naive["answers"])) / len(s["answers"])
        for where in (f"sections.{name}", f"summary.{name}"):
            src = sections[name] if where.startswith("sections") else summary[name]
            yield figure(f"{rel}:{where}.speedup_vs_naive", src["speedup_vs_naive"], speed, 2)
            yield figure(f"{rel}:{where}.agreement_with_naive", src["agreement_with_naive"], same, 4)
    ranks = summary["influence_ranks_bf16_vs_fp32"]
    per_q = ranks["spearman_per_question"]
    yield figure(f"{rel}:summary.influence_ranks_bf16_vs_fp32.mean_spearman", ranks["mean_spearman"],
                 approx(lambda *r: statistics.fmean(r), *[stored(r, 4) for r in per_q]), 4)


def limits_figures(rel: str, d: dict[str, Any], gen: dict[str, Any]) -> Iterator[Figure]:
    from benchmarks.bench_limits import achieved

    for dtype, m in d["matmul"].items():
        yield figure(f"{rel}:matmul.{dtype}.peak_gflops", m["peak_gflops"], max(m["square_gflops"].values()))
    for key, a in d["attention"].items():
        q, k = (int(x) for x in key.split("_")[1].split("x")) if "x" in key else (int(key.split("_")[1]),) * 2
        flops = 4 * q * k * 64 * 9  # bench_limits.attention: 9 query heads, d = 64
        yield figure(f"{rel}:attention.{key}.gflops_full_rectangle", a["gflops_full_rectangle"],
                     approx(lambda ms: flops / (ms / 1e3) / 1e9, stored(a["ms"], 2)), 1)
    for dtype, e in d["elementwise"].items():
        yield figure(f"{rel}:elementwise.{dtype}.gelem_per_s", e["gelem_per_s"],
                     approx(lambda ms: 1461 * 1536 / (ms / 1e3) / 1e9, stored(e["silu_ms"], 3)), 2)
    for dtype, f in d["model_forward"].items():
        for n, row in f["prefill"].items():
            yield figure(f"{rel}:model_forward.{dtype}.prefill.{n}.gflops", row["gflops"],
                         approx(lambda t: 2 * f["parameters"] * t / 1e9, stored(row["tokens_per_s"], 1)), 1)
    # ragray's useful FLOP/s per generation section: bench_limits.achieved on the generation.json it
    # read (the same run: d08b768) with this file's peaks and forward rate
    fresh = achieved(gen, d["model_forward"]["bfloat16"]["parameters"], d["matmul"], d["model_forward"])
    published = d["ragray_achieved"]["sections"]
    yield figure(f"{rel}:ragray_achieved.generation_commit", d["ragray_achieved"]["generation_commit"],
                 gen["machine"]["commit"])
    for name, row in published.items():
        sec = gen["sections"][name]
        tokens = sec["prefill_tokens_with_reuse"] + sec["completion_tokens"]
        params = d["model_forward"]["bfloat16"]["parameters"]
        useful = approx(lambda s: 2 * params * tokens / s / 1e9, stored(sec["seconds"], 2))
        yield figure(f"{rel}:ragray_achieved.sections.{name}.useful_gflops", row["useful_gflops"], useful, 1)
        for key, den in (("of_bf16_peak", d["matmul"]["bfloat16"]["peak_gflops"]),
                         ("of_bf16_sustained_model_gemms", d["matmul"]["bfloat16"]["sustained_model_gemms_gflops"]),
                         ("of_model_bf16_forward", d["model_forward"]["bfloat16"]["prefill"]["1461"]["gflops"])):
            yield figure(f"{rel}:ragray_achieved.sections.{name}.{key}", row[key],
                         approx(lambda u: u / den, (useful.mid, (useful.hi - useful.lo) / 2)), 3)
        yield figure(f"{rel}:ragray_achieved.sections.{name}.completion_tokens_assumed_max",
                     row["completion_tokens_assumed_max"], fresh[name]["completion_tokens_assumed_max"])


@check("limits", covers=("limits.json", "limits_rerun.json"))
def limits() -> Iterator[Figure]:
    gen = read_json("generation.json")
    for rel in ("limits.json", "limits_rerun.json"):
        yield from limits_figures(rel, read_json(rel), gen)


# -- retrieval, scaling, suite -------------------------------------------------------------------


@check("retrieval", covers=("retrieval.json",))
def retrieval() -> Iterator[Figure]:
    """Index and query seconds per side: the totals and the speed-ups; queries/s of each FAISS index;
    the dense nDCG@10 and HNSW recall@10 as the means of their per-query records. The BM25 shares
    over queries (identical top-10, score differences) are in :data:`NOT_REDERIVABLE`."""
    d = read_json("retrieval.json")
    for i, row in enumerate(d["bm25"]):
        for side in ("ragray", "rank_bm25"):
            yield figure(f"retrieval.json:bm25[{i}].{side}.total_s", row[side]["total_s"],
                         row[side]["index_s"] + row[side]["query_s"])
        ours = row["ragray"]["index_s"] + row["ragray"]["query_s"]
        ref = row["rank_bm25"]["index_s"] + row["rank_bm25"]["query_s"]
        yield figure(f"retrieval.json:bm25[{i}].speedup_index_plus_queries", row["speedup_index_plus_queries"], ref / ours)
    faiss = d["faiss_scifact"]
    for kind in ("flat_ip", "hnsw"):
        yield figure(f"retrieval.json:faiss_scifact.{kind}.queries_per_s", faiss[kind]["queries_per_s"],
                     faiss["n_queries"] / faiss[kind]["search_s"])
    per_query = [json.loads(line) for line in gzip.decompress((RESULTS / faiss["records"]).read_bytes()).splitlines()]
    yield figure("retrieval.json:faiss_scifact.n_queries", faiss["n_queries"], len(per_query))
    for key in ("hnsw_recall_at_10_vs_flat", "flat_ip_ndcg_at_10"):
        yield figure(f"retrieval.json:faiss_scifact.{key}", faiss[key], statistics.mean(r[key] for r in per_query))


def scaling_figures(rel: str, d: dict[str, Any]) -> Iterator[Figure]:
    rows = [(f"questions[{i}]", r) for i, r in enumerate(d.get("questions", []))]
    rows += [(f"executors.{k}", r) for k, r in d.get("executors", {}).items()]
    runs = d.get("cluster", {}).get("runs", {})
    rows += [(f"cluster.runs.{k}", r) for k, r in runs.items()]
    for path, r in rows:
        yield figure(f"{rel}:{path}.calls_per_s_wall", r["calls_per_s_wall"], rate(r["calls"], r["wall_s"]), 4)
    single = runs.get("1_nodes", {}).get("calls_per_s_wall")
    for k, r in runs.items():  # bench_scaling.cluster_runs: from the rates as stored
        yield figure(f"{rel}:cluster.runs.{k}.efficiency_vs_1_node", r["efficiency_vs_1_node"],
                     r["calls_per_s_wall"] / (r["nodes"] * single), 3)


@check("scaling", covers=("scaling.json", "scaling_cluster_12q.json"))
def scaling() -> Iterator[Figure]:
    for rel in ("scaling.json", "scaling_cluster_12q.json"):
        yield from scaling_figures(rel, read_json(rel))


@check("suite", covers=("suite.json",))
def suite() -> Iterator[Figure]:
    """The acceptance figures, recomputed by ``benchmarks/acceptance.py`` from the section files the
    suite ran or kept (each recomputed from its own records by the checks above; contextcite.json by
    its own check). suite.json predates gpu_8b.json, whose figures acceptance() now also reads: only
    the figures the suite published are compared."""
    from benchmarks.acceptance import acceptance

    d = read_json("suite.json")
    sections = d["options"]["sections"] + d["options"]["kept_from_earlier_runs"]
    fresh = acceptance(RESULTS, sections)
    published = d["acceptance"]
    yield from compare_json("suite.json:acceptance", published, {k: v for k, v in fresh.items() if k in published})


# -- endpoint throughput, questions in flight, tokenizing ----------------------------------------


def throughput_figures(rel: str, d: Any, path: str = "", ideal: float | None = None) -> Iterator[Figure]:
    """Every run row under ``d``; ``ideal``: the server's limit / latency of the nearest enclosing
    setting (for the ``cap`` rows the cap / latency)."""
    if not isinstance(d, dict):
        return
    ideal = d.get("ideal_calls_per_s", ideal)
    if "calls_per_s_wall" in d:
        yield figure(f"{rel}:{path}.calls_per_s_wall", d["calls_per_s_wall"], rate(d["calls"], d["wall_s"], 3), 2)
    if "share_of_ideal" in d:
        yield figure(f"{rel}:{path}.share_of_ideal", d["share_of_ideal"], d["server_calls_per_s"] / ideal)
    if "share_of_cap" in d:
        yield figure(f"{rel}:{path}.share_of_cap", d["share_of_cap"], d["server_calls_per_s"] / ideal)
    if "lost_or_duplicated" in d:
        yield figure(f"{rel}:{path}.lost_or_duplicated", d["lost_or_duplicated"],
                     d["calls"] - d["server_answered"] + d["answered_twice"])
    if "runs" in d and "default_in_flight" in d and "cached_rerun" in d["runs"]:
        yield figure(f"{rel}:{path}.runs.cached_rerun.first_run_wall_s", d["runs"]["cached_rerun"]["first_run_wall_s"],
                     d["runs"][str(d["default_in_flight"])]["wall_s"])
    for k, v in d.items():
        yield from throughput_figures(rel, v, f"{path}.{k}" if path else k, ideal)


@check("throughput", covers=("throughput.json",))
def throughput() -> Iterator[Figure]:
    """Every run: its calls over its wall seconds; the server's answers/s (counted at the server) over
    the ideal (limit / latency); the speed-ups over the naive loop and the run before; the calls the
    cache saved; the acceptance flags."""
    rel = "throughput.json"
    d = read_json(rel)
    server = d["server"]
    yield figure(f"{rel}:server.ideal_calls_per_s", server["ideal_calls_per_s"], server["limit"] / server["latency_s"])
    for name in ("defaults", "defaults_before"):
        for key, s in d[name]["settings"].items():
            yield figure(f"{rel}:{name}.settings.{key}.ideal_calls_per_s", s["ideal_calls_per_s"], s["limit"] / s["latency_s"])
    yield figure(f"{rel}:cap.ideal_calls_per_s", d["cap"]["ideal_calls_per_s"], d["cap"]["cap"] / d["cap"]["latency_s"])
    yield from throughput_figures(rel, {k: v for k, v in d.items() if k != "server"}, "", server["ideal_calls_per_s"])
    default = d["default"]
    yield figure(f"{rel}:default.x_seed", default["x_seed"], default["server_calls_per_s"] / d["seed"]["server_calls_per_s"])
    yield figure(f"{rel}:default.x_before", default["x_before"],
                 default["server_calls_per_s"] / d["before"]["server_calls_per_s"])
    emb = d["embedding"]
    yield figure(f"{rel}:embedding.seconds_per_question_client", emb["seconds_per_question_client"],
                 emb["wall_s"] / emb["questions"])  # bench_throughput: from wall_s as stored
    cache = d["cache"]
    yield figure(f"{rel}:cache.calls_saved", cache["calls_saved"],
                 sum(r["calls"] - r["server_answered"] for r in
                     (cache["first_run"], cache["repeat_run"], cache["second_trial_other_similarity"])))
    share = default["server_calls_per_s"] / server["ideal_calls_per_s"]
    fresh = {"share_of_ideal >= 0.90": share >= 0.90,
             "x_seed >= 20": default["server_calls_per_s"] / d["seed"]["server_calls_per_s"] >= 20,
             "tables identical in flight vs one at a time": d["in_flight"]["tables_identical"],
             "rerun sends zero calls": cache["repeat_run"]["server_answered"] == 0,
             "each distinct prompt sent once": cache["first_run"]["answered_twice"] == 0}
    yield from compare_json(f"{rel}:acceptance", d["acceptance"], fresh)
    c = d["cap"]
    fresh = {"fixed cap >= 0.9 of it": c["fixed_cap"]["server_calls_per_s"] / c["ideal_calls_per_s"] >= 0.9,
             "nothing lost or sent twice (fixed, dropping)": all(
                 c[k]["calls"] - c[k]["server_answered"] + c[k]["answered_twice"] == 0 for k in ("fixed_cap", "cap_drops"))
             and c["cap_drops"]["errors"] == 0,
             "followed the drop": ((c["cap_drops"]["backend_settings"] or {}).get("concurrency") or {}).get("limit", 99)
             <= int(c["cap_drops"]["drop"].split("->")[1].split()[0])}
    yield from compare_json(f"{rel}:cap.acceptance", c["acceptance"], fresh)


def in_flight_figures(rel: str, d: dict[str, Any], speedup_key: str) -> Iterator[Figure]:
    runs = d["runs"]
    for n, r in runs.items():
        yield figure(f"{rel}:runs.{n}.calls_per_s", r["calls_per_s"], rate(r["calls"], r["wall_s"]), 4)
        if r.get("prompt_tokens"):
            yield figure(f"{rel}:runs.{n}.prefix_cache_hit_rate", r["prefix_cache_hit_rate"],
                         r["cached_tokens"] / r["prompt_tokens"])
        if r.get("engine_calls"):
            yield figure(f"{rel}:runs.{n}.mean_prompts_per_engine_call", r["mean_prompts_per_engine_call"],
                         r["calls"] / r["engine_calls"], 1)
    first, last = list(runs)[0], list(runs)[-1]
    yield figure(f"{rel}:{speedup_key}", d[speedup_key], runs[last]["calls_per_s"] / runs[first]["calls_per_s"])


@check("in_flight", covers=("vllm_in_flight.json", "transformers_in_flight.json"))
def in_flight() -> Iterator[Figure]:
    """Questions in flight in process: each run's calls over its seconds, the prefix cache's hit rate
    (cached over prompt tokens), prompts per engine call, the speed-up (rates as stored). The
    ceilings are computed from the prompts sent (not kept): records of the run, not figures."""
    yield from in_flight_figures("transformers_in_flight.json", read_json("transformers_in_flight.json"), "speedup_4_vs_1")
    d = read_json("vllm_in_flight.json")
    yield from in_flight_figures("vllm_in_flight.json", d, "speedup_16_vs_1")
    serve = d["vllm_serve"]
    for n, r in serve["runs"].items():
        c = r["prefix_cache_counters"]
        yield figure(f"vllm_in_flight.json:vllm_serve.runs.{n}.calls_per_s", r["calls_per_s"], rate(r["calls"], r["wall_s"]), 4)
        yield figure(f"vllm_in_flight.json:vllm_serve.runs.{n}.prefix_cache_hit_rate", r["prefix_cache_hit_rate"],
                     c["prefix_cache_hits_total"] / c["prefix_cache_queries_total"])
    runs = serve["runs"]
    yield figure("vllm_in_flight.json:vllm_serve.speedup_16_vs_1", serve["speedup_16_vs_1"],
                 runs["16"]["calls_per_s"] / runs["1"]["calls_per_s"])


@check("tokenize", covers=("tokenize.json",))
def tokenize() -> Iterator[Figure]:
    """Per workload the two encodings' seconds (medians of 5 alternated repeats): the share saved."""
    d = read_json("tokenize.json")
    for name, w in d["workloads"].items():
        yield figure(f"tokenize.json:workloads.{name}.saved", w["saved"], 1 - w["encode_scored_s"] / w["whole_texts_s"], 3)


#: every check of this module (``verify.py --only`` takes them)
MEASUREMENT_CHECKS = ("default_cost", "dtype", "bench_gpu", "engine_in_flight_smollm2", "engine_counts_vs_gpu_record",
                      "ops_per_call_cpu", "gpu_8b_ab_75290db", "gpu_8b_ab_fair", "gpu_attention", "generation",
                      "limits", "retrieval", "scaling", "suite", "throughput", "in_flight", "tokenize")
