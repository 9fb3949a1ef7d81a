"""Which rule should mark a passage "used"? Measured against gold evidence, from the stored exports.

    python benchmarks/bench_used.py                 # benchmarks/results/used_rule.json + a table
    python benchmarks/bench_used.py --export DIR --out FILE

No model runs: the rules are applied to the evidence benchmark's text-free exports
(``benchmarks/results/evidence/<phase>/<variant>/<set>.jsonl``, benchmarks/bench_evidence.py).
The tune split is every tune variant (prompt x scored span, run on the same tune questions); the
test split is both parts of the frozen test run (``frozen`` and ``frozen_no_surrogate``: disjoint
rows of the split, the same settings).

Questions: the evidence panel's primary subset (:data:`ragray.metrics.evidence.PRIMARY`: answered
correctly and context dependent) among those with at least one gold and one non-gold passage and
every passage's log-prob drop measured. Each passage's score is the log-prob share
s = 1 − exp(−max(0, logprob_drop)), what ragray's default log-prob mode calls influence (the
exports were run in jsd mode, so their ``influence`` column is not it).

Rules (:data:`RULES`): ragray's own :func:`ragray.metrics.used.used_marks` (every rule also needs
s > 0.01, ``influence.epsilon``) with absolute, relative and outlier bars, and two free controls,
the retriever's top 1 and top 2. Metrics per rule, per set and pooled: precision against gold
(micro: used and gold / used, over all questions), recall of gold, their F1, the mean number of
passages marked per question, the share of questions with nothing marked, and the mean per-question
F1; 95% percentile-bootstrap intervals, questions resampled (seeded; a tune question run in several
variants is one unit, its variants resampled together).

The rule is chosen on the tune split only: the highest pooled F1; ties go to the simpler family
(absolute, then relative, then outlier), then to fewer passages marked. The test split then reports
every rule, and the chosen one against each control: the paired bootstrap of the F1 difference
(Holm-corrected over the two controls; it *beats* a control when the difference is positive and
the corrected p < 0.05).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_evidence import EXPORT, PARTS, VARIANTS, _jsonl, machines
from benchmarks.machine import REPO, machine_info, save_result
from ragray.metrics.evidence import PRIMARY, holm
from ragray.metrics.used import used_marks

EPSILON = 0.01
N_BOOT = 2000
SEED = 0
#: the exports' sets, in report order
SETS = ("hotpotqa", "squad", "pubmedqa")
#: what each phase is made of: its exported variants
PHASES: dict[str, tuple[str, ...]] = {"tune": tuple(VARIANTS), "test": tuple(PARTS)}
FAMILIES = ("absolute", "relative", "outlier")
CONTROLS = ("top1", "top2")


@dataclass(frozen=True)
class Item:
    """One question of one export, as the rules see it (passages in retrieval order)."""

    set: str
    variant: str
    question_id: str
    share: tuple[float, ...]
    gold: tuple[bool, ...]
    precision: str | None
    machine: str | None

    @property
    def unit(self) -> str:
        """The bootstrap's unit: one question, whatever variants it was run in."""
        return f"{self.set}:{self.question_id}"


@dataclass(frozen=True)
class Rule:
    """A candidate rule (``family`` one of :data:`FAMILIES` with its ``param``) or a control
    (``family`` "control": the retriever's top ``param``)."""

    name: str
    family: str
    param: float

    def marks(self, item: Item) -> list[bool]:
        if self.family == "control":
            return [i < self.param for i in range(len(item.share))]
        return [bool(m) for m in used_marks(item.share, rule=self.family, threshold=self.param, epsilon=EPSILON)]


RULES: tuple[Rule, ...] = (
    *(Rule(f"s > {t:g}", "absolute", t) for t in (0.01, 0.05, 0.1, 0.2, 0.3, 0.5)),
    *(Rule(f"s >= {f:g} max", "relative", f) for f in (0.25, 0.5, 0.75)),
    *(Rule(f"s > median + {k:g} MAD", "outlier", k) for k in (1, 2, 3)),
    Rule("top 1 retrieved", "control", 1),
    Rule("top 2 retrieved", "control", 2),
)


#: ragray's rule before this benchmark: influence above influence.epsilon
PREVIOUS = RULES[0]


def share(drop: float) -> float:
    """The clipped log-prob share 1 − exp(−max(0, drop)): ragray's log-prob-mode influence."""
    return 1.0 - math.exp(-max(0.0, drop))


def measurable(rec: Mapping[str, Any]) -> bool:
    """A context-dependent question without error, with gold and non-gold passages and every drop
    measured (answered or not)."""
    q, ps = rec["question"], rec["passages"]
    gold = sum(bool(p.get("is_gold")) for p in ps)
    return (q.get("error") is None and q.get("context_dependent") is True and 0 < gold < len(ps)
            and all(p.get("logprob_drop") is not None and p["logprob_drop"] == p["logprob_drop"] for p in ps))


def in_subset(rec: Mapping[str, Any]) -> bool:
    """The primary subset: :func:`measurable` and answered correctly (a record read back from an
    export carries ``answered``; a run's question row ``answer_correct``)."""
    q = rec["question"]
    ok = next((v for v in (q.get("answer_correct"), q.get("answered"), rec.get("answered")) if v is not None), None)
    return bool(ok) and measurable(rec)


def load(phase: str, root: Path = EXPORT, keep: Callable[[Mapping[str, Any]], bool] = in_subset,
         ) -> tuple[list[Item], dict[str, int]]:
    """The phase's questions that ``keep`` keeps, and how many questions each export held."""
    items, sizes = [], {}
    for variant in PHASES[phase]:
        for name in SETS:
            path = root / phase / variant / f"{name}.jsonl"
            if not path.is_file():
                continue
            recs = _jsonl(path)
            sizes[f"{variant}/{name}"] = len(recs)
            by_machine = {qid: label for label, ids in machines(path).items() for qid in ids}
            for rec in recs:
                if not keep(rec):
                    continue
                ps = sorted(rec["passages"], key=lambda p: p["retrieval_rank"])
                q = rec["question"]
                items.append(Item(name, variant, q["question_id"], tuple(share(p["logprob_drop"]) for p in ps),
                                  tuple(bool(p.get("is_gold")) for p in ps), q.get("precision") or q.get("dtype"),
                                  by_machine.get(q["question_id"])))
    return items, sizes


#: per-unit sums every metric is a ratio of
COUNTS = ("tp", "marked", "gold", "rows", "none", "f1")


def unit_counts(items: Sequence[Item], rule: Rule) -> tuple[list[str], np.ndarray]:
    """Units (in first-seen order) and their summed counts (columns: :data:`COUNTS`)."""
    units: dict[str, np.ndarray] = {}
    for it in items:
        marks = rule.marks(it)
        tp = sum(m and g for m, g in zip(marks, it.gold))
        marked, gold = sum(marks), sum(it.gold)
        f1 = 2 * tp / (marked + gold) if marked + gold else 0.0
        row = np.array([tp, marked, gold, 1, marked == 0, f1], dtype=float)
        units[it.unit] = units.get(it.unit, 0) + row
    return list(units), np.array(list(units.values())).reshape(-1, len(COUNTS))


def ratios(sums: np.ndarray) -> dict[str, np.ndarray]:
    """Metrics from summed counts (last axis: :data:`COUNTS`); precision NaN where nothing was marked."""
    tp, marked, gold, rows, none, f1 = np.moveaxis(sums, -1, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(marked > 0, tp / marked, np.nan)
        r = tp / gold
        f = np.where(marked + gold > 0, 2 * tp / (marked + gold), 0.0)  # = 2PR / (P + R)
    return {"precision": p, "recall": r, "f1": f, "marked_per_question": marked / rows,
            "share_none_marked": none / rows, "mean_question_f1": f1 / rows}


METRICS = ("precision", "recall", "f1", "marked_per_question", "share_none_marked", "mean_question_f1")


def _ci(point: float, draws: np.ndarray) -> dict[str, float | None]:
    draws = draws[~np.isnan(draws)]
    if math.isnan(point):
        return {"mean": None, "low": None, "high": None}
    return {"mean": float(point), "low": float(np.percentile(draws, 2.5)), "high": float(np.percentile(draws, 97.5))}


def boot_index(n: int, seed: int = SEED, n_boot: int = N_BOOT) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(n_boot, n))


def rule_metrics(counts: np.ndarray, boot: np.ndarray) -> dict[str, Any]:
    """Every metric's point value and bootstrap interval (``boot``: resampled unit indices)."""
    point = ratios(counts.sum(axis=0))
    draws = ratios(counts[boot].sum(axis=1))
    return {"n_questions": int(counts[:, 3].sum()), "n_units": len(counts),
            **{m: _ci(float(point[m]), draws[m]) for m in METRICS}}


def table(items: Sequence[Item], rules: Sequence[Rule] = RULES) -> dict[str, Any]:
    """Per set and pooled: every rule's metrics (each set's bootstrap seeded alike)."""
    out: dict[str, Any] = {}
    for name in (*SETS, "pooled"):
        part = [it for it in items if name == "pooled" or it.set == name]
        if not part:
            out[name] = {"n_questions": 0}
            continue
        got = {r.name: unit_counts(part, r)[1] for r in rules}
        boot = boot_index(len(next(iter(got.values()))))
        out[name] = {"n_questions": len(part), "rules": {r: rule_metrics(c, boot) for r, c in got.items()}}
    return out


def choose(pooled: Mapping[str, Any], rules: Sequence[Rule] = RULES) -> Rule:
    """The candidate with the highest pooled F1; ties: the simpler family, then fewer marks."""
    candidates = [r for r in rules if r.family != "control"]
    stats = pooled["rules"]
    return min(candidates, key=lambda r: (-round(stats[r.name]["f1"]["mean"], 12), FAMILIES.index(r.family),
                                          stats[r.name]["marked_per_question"]["mean"]))


def paired(items: Sequence[Item], rule: Rule, controls: Sequence[Rule]) -> dict[str, Any]:
    """``rule`` minus each control on the same questions: the F1 difference (paired bootstrap,
    two-sided p, Holm over the controls) and the mean per-question F1 difference."""
    _, mine = unit_counts(items, rule)
    boot = boot_index(len(mine))
    out, pvals = {}, []
    for c in controls:
        _, theirs = unit_counts(items, c)
        diffs = {}
        for metric in ("f1", "mean_question_f1", "precision", "recall"):
            point = float(ratios(mine.sum(0))[metric] - ratios(theirs.sum(0))[metric])
            draws = ratios(mine[boot].sum(1))[metric] - ratios(theirs[boot].sum(1))[metric]
            diffs[metric] = _ci(point, draws)
            if metric == "f1":
                d = draws[~np.isnan(draws)]
                pvals.append(min(1.0, 2 * min(float((d <= 0).mean()), float((d >= 0).mean()))))
        out[c.name] = {"difference": diffs, "p": pvals[-1]}
    for (name, row), adjusted in zip(out.items(), holm(pvals)):
        row["p_holm"] = adjusted
        row["beats"] = bool(row["difference"]["f1"]["mean"] > 0 and adjusted < 0.05)
    return out


def _tally(values: Sequence[str | None]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[str(v)] = out.get(str(v), 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def describe(items: Sequence[Item], sizes: Mapping[str, int]) -> dict[str, Any]:
    """What a phase's subset is made of: exported questions, questions and units in the subset per
    set and variant, the precision (dtype) and machine each ran in."""
    return {"exported": dict(sizes), "in_subset": len(items), "units": len({it.unit for it in items}),
            "per_set": {n: sum(it.set == n for it in items) for n in SETS},
            "per_variant": _tally([it.variant for it in items]),
            "precision": _tally([it.precision for it in items]), "machine": _tally([it.machine for it in items])}


#: the demo example of issue 36: SmolLM2-135M (packaged) in bf16, gold first, beekeeping at 0.14 and 0.47
DEMO = (0.99, 0.28, 0.0, 0.39, 0.16, 0.20, 0.14, 0.47, 0.0, 0.0)


def run(root: Path = EXPORT) -> dict[str, Any]:
    tune, tune_sizes = load("tune", root)
    test, test_sizes = load("test", root)
    if not tune:
        raise SystemExit(f"no tune question in the subset under {root / 'tune'}")
    tune_table = table(tune)
    chosen = choose(tune_table["pooled"])
    result: dict[str, Any] = {
        "source": "benchmarks/bench_used.py (from the evidence benchmark's exports; no model ran)",
        "model": "SmolLM2-135M-Instruct (packaged, greedy)",
        "subset": f"{PRIMARY}, >= 1 gold and >= 1 non-gold passage, every logprob_drop measured",
        "score": "s = 1 - exp(-max(0, logprob_drop)) (ragray's log-prob-mode influence); every candidate "
                 f"rule also needs s > {EPSILON} (influence.epsilon)",
        "metrics": "micro precision/recall/F1 against gold over all questions; marked_per_question; "
                   "share_none_marked; mean_question_f1 (per-question F1, 0 when nothing is marked); "
                   f"95% percentile bootstrap, {N_BOOT} resamples of questions, seed {SEED}",
        "choice": "highest pooled F1 on the tune split; ties: absolute < relative < outlier, then fewer marks",
        "rules": [{"name": r.name, "family": r.family, "param": r.param} for r in RULES],
        "tune": {"data": describe(tune, tune_sizes), "table": tune_table},
        "chosen": {"name": chosen.name, "rule": chosen.family, "threshold": chosen.param,
                   "demo_marks": used_marks(DEMO, rule=chosen.family, threshold=chosen.param, epsilon=EPSILON)
                   if chosen.family != "control" else None, "demo_influence": list(DEMO)},
    }
    if test:
        controls = [r for r in RULES if r.family == "control"]
        test_table = table(test)
        stats = test_table["pooled"]["rules"]
        best = max((r for r in RULES if r.family != "control"), key=lambda r: stats[r.name]["f1"]["mean"])
        result["test"] = {"data": describe(test, test_sizes), "table": test_table,
                          "chosen_vs_controls": paired(test, chosen, controls),
                          "chosen_vs_previous_default": paired(test, chosen, [PREVIOUS]),
                          "best_candidate_in_hindsight": best.name}
    result["precision"] = {
        "tune": result["tune"]["data"]["precision"], "test": result.get("test", {}).get("data", {}).get("precision"),
        "note": "the dtype each question's model ran in (its export's question row): the tune split ran in "
                "bf16 (dtype auto on an AVX-512 BF16 CPU), the test split in float32 "
                "(configs/evidence_frozen.yaml); the machines are under each phase's data.machine"}
    sensitivity = {}
    frozen_only = [it for it in tune if it.variant == "short_full"]
    if frozen_only:
        sensitivity["tune_short_full_only"] = choose(table(frozen_only)["pooled"]).name
    if wide_tune := load("tune", root, keep=measurable)[0]:
        sensitivity["tune_context_dependent_answered_or_not"] = {
            "n_questions": len(wide_tune), "chosen": choose(table(wide_tune)["pooled"]).name}
    result["tune"]["sensitivity"] = sensitivity
    result["machine"] = machine_info()
    return result


def _cell(m: Mapping[str, Any]) -> str:
    if m["mean"] is None:
        return "    -            "
    return f"{m['mean']:.2f} [{m['low']:.2f}, {m['high']:.2f}]"


def lines(result: Mapping[str, Any]) -> list[str]:
    """The short table: pooled tune and test F1, test precision, recall and marks per rule."""
    tune = result["tune"]["table"]["pooled"]["rules"]
    test = result.get("test", {}).get("table", {}).get("pooled", {}).get("rules", {})
    n_tune = result["tune"]["table"]["pooled"]["n_questions"]
    n_test = result.get("test", {}).get("table", {}).get("pooled", {}).get("n_questions", 0)
    out = [(f"{'rule':24} {f'tune F1 (n={n_tune})':22} {f'test F1 (n={n_test})':22} {'test precision':22} "
            f"{'test recall':22} marked  none")]
    for r in RULES:
        t = test.get(r.name)
        star = " <- chosen" if r.name == result["chosen"]["name"] else ""
        out.append(f"{r.name:24} {_cell(tune[r.name]['f1']):22} "
                   + (f"{_cell(t['f1']):22} {_cell(t['precision']):22} {_cell(t['recall']):22} "
                      f"{t['marked_per_question']['mean']:5.2f}  {t['share_none_marked']['mean']:.2f}" if t else "")
                   + star)
    test_result = result.get("test", {})
    for c, row in (test_result.get("chosen_vs_controls", {}) | test_result.get("chosen_vs_previous_default", {})).items():
        d = row["difference"]["f1"]
        p = f"{row['p_holm']:.3g}" if row["p_holm"] >= 1 / N_BOOT else f"< {1 / N_BOOT:g}"
        out.append(f"test F1, chosen minus {c}: {d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}], "
                   f"p (Holm) {p}: {'beats it' if row['beats'] else 'does not beat it'}")
    return out


def main(argv: list[str] | None = None, out_default: Path = REPO / "benchmarks" / "results" / "used_rule.json",
         echo: Callable[[str], None] = print) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--export", type=Path, default=EXPORT, help="the evidence exports' root")
    ap.add_argument("--out", type=Path, default=out_default)
    args = ap.parse_args(argv)
    result = run(args.export)
    save_result(args.out, result)
    echo("\n".join(lines(result)))
    echo(f"chosen on the tune split: {result['chosen']['name']}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
