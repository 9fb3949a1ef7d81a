"""Pre-registered evidence benchmark: does ablation find what the model used?

    python benchmarks/bench_evidence.py --phase tune [--limit 20] [--variants numbered_full ...]
    python benchmarks/bench_evidence.py --phase test            # once, with the frozen config
    python benchmarks/bench_evidence.py --phase test --report --publish   # docs/measurements.md block, goals, validity.json
    python benchmarks/bench_evidence.py --data my.jsonl --name mine --phase test   # any ragray JSONL

Splits (fixed before any result was seen): per data set of ``../shared/data``, ``tune`` is the
first 150 questions and ``test`` the next 400 (HotpotQA has 588: its test split is the other
438). Each record's passages are shuffled with seed 26 before retrieval, so record order cannot
leak into rank ties. Retrieval: BM25 top 6 (HotpotQA: over the question's own 10 paragraphs;
SQuAD and PubMedQA: over the whole corpus) — k = 6 keeps 64 distinct subsets, enough for 24
surrogate subsets and 32 disjoint held-out ones, at a cost the 2-core machines can pay.

Every run computes every measure at once (``influence.mode: jsd``: the drop-one passes give the
raw log-prob drop and the JSD; ``influence.masks`` subsets give the surrogate), the closed-book
pass and the checks (``check_subsets: 32``, ``check_top_k: [1, 2, 3]``); the panel
(:func:`ragray.metrics.evidence.evidence_panel`) compares each measure with every control per
data set and pooled. Variants (prompt × scored span) are compared on the tune split only; the test
split runs once with the variant and settings frozen in ``configs/evidence_frozen.yaml``.

Resumable across sessions: each run directory lives under ``runs/`` (ignored), and after every run
its finished questions are exported WITHOUT dataset text (question and gold answers blanked) to
``benchmarks/results/evidence/<phase>/<variant>/<set>.jsonl``, which is committed; a fresh checkout
starts from that export. The panel restores question text and gold answers from the data set.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import REPO, SHARED_DATA, machine_info, save_result, write_block
from ragray.config import ExperimentConfig, load_config

#: set -> (file, retrieval settings)
DATASETS: dict[str, tuple[str, list[str]]] = {
    "hotpotqa": ("hotpotqa_distractor_dev.jsonl", ["retrieval.scope=per_question"]),
    "squad": ("squad_v11_dev.jsonl", ["retrieval.scope=global"]),
    "pubmedqa": ("pubmedqa_pqal.jsonl", ["retrieval.scope=global"]),
}
SPLITS = {"tune": (0, 150), "test": (150, 550)}
#: the test split's parts (rows of the split, after its shuffle), each its own run: the surrogate's
#: 24 subsets run on the first 150 questions per set (the issue allows >= 150 where its cost
#: demands: ~11 of ~35 s per question on 2 cores), every other measure and check on all 400
PARTS: dict[str, tuple[int, int, list[str]]] = {
    "frozen": (0, 150, []),
    "frozen_no_surrogate": (150, 400, ["influence.masks=0"]),
}
SHUFFLE_SEED = 26
TOP_K = 6
#: prompt template x scored span, compared on the tune split
VARIANTS: dict[str, list[str]] = {
    "numbered_full": ["generation.template=numbered", "influence.answer_span=full"],
    "numbered_first_sentence": ["generation.template=numbered", "influence.answer_span=first_sentence"],
    "short_full": ["generation.template=short", "influence.answer_span=full"],
}
MEASURES = ["influence.mode=jsd", "influence.masks=24", "influence.check_subsets=32",
            "influence.check_top_k=[1,2,3]", "influence.closed_book=true"]
EXPORT = REPO / "benchmarks" / "results" / "evidence"
#: dataset text, and model answers (which often quote the passages), never reach the repo
BLANKED = ("question", "gold_answers", "baseline_answer", "scored_answer")
#: passage text the passages rows carry
BLANKED_PASSAGE = ("title", "text")


def _jsonl(path: Path) -> list[dict]:
    """The records of a JSONL file (blank lines skipped)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def split_rows(source: Path, phase: str) -> list[dict]:
    """The split's records, each one's passages shuffled (seeded, in split order)."""
    start, stop = SPLITS[phase]
    rows = _jsonl(source)[start:stop]
    rng = random.Random(SHUFFLE_SEED)
    for r in rows:
        rng.shuffle(r["passages"])
    return rows


def split_file(source: Path, name: str, phase: str, runs: Path, limit: int | None,
               rows_range: tuple[int, int] | None = None, tag: str = "") -> tuple[Path, dict[str, dict]]:
    """The split's records (passages shuffled; ``rows_range`` of them, the first ``limit`` of
    those) as a JSONL under ``runs``; also id -> record."""
    rows = split_rows(source, phase)
    if rows_range is not None:
        rows = rows[rows_range[0]:rows_range[1]]
    rows = rows[:limit]
    out = runs / "splits" / f"{name}-{phase}{tag}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    corpus = next((p for p in (source.with_name(source.name.replace(".jsonl", ".corpus.jsonl")),
                               source.with_name(source.name.replace(".jsonl", ".corpus.jsonl.gz"))) if p.is_file()), None)
    if corpus is not None:  # the corpus beside the split, under the name ragray looks for
        link = out.with_name(out.name.replace(".jsonl", ".corpus.jsonl" + (".gz" if corpus.suffix == ".gz" else "")))
        if not link.exists():
            link.symlink_to(corpus)
    else:  # the whole set's passages stay the corpus (not only the split's)
        every = {p["id"]: p for row in _jsonl(source) for p in row["passages"]}
        out.with_name(out.name.replace(".jsonl", ".corpus.jsonl")).write_text(
            "".join(json.dumps(p) + "\n" for p in every.values()), encoding="utf-8")
    return out, {r["id"]: r for r in rows}


#: in-process, one question at a time; ``num_cpus`` 1 is the default every run of this benchmark
#: began with (unused by the local executor; pinned since the default became "a share of the node",
#: so a resumed run's config stays the one it was started with)
EXECUTION = ["execution.executor=local", "execution.num_cpus=1"]


def config(path: Path, retrieval: list[str], variant: str, extra: list[str]) -> ExperimentConfig:
    return load_config(None, [f"data.path={path}", "retrieval.retriever=bm25", f"retrieval.top_k={TOP_K}",
                              *retrieval, *EXECUTION, *VARIANTS[variant], *MEASURES, *extra])


def export_path(phase: str, variant: str, name: str, root: Path = EXPORT) -> Path:
    return root / phase / variant / f"{name}.jsonl"


def seed_from_export(out: Path, exported: Path) -> None:
    """A fresh checkout resumes from the committed, text-free export."""
    if exported.is_file() and not (out / "progress.jsonl").is_file():
        out.mkdir(parents=True, exist_ok=True)
        (out / "progress.jsonl").write_text(exported.read_text(encoding="utf-8"), encoding="utf-8")


def export(out: Path, exported: Path, annotate: Callable[[dict], dict] | None = None) -> None:
    """Finished questions without text (:data:`BLANKED`, the calls' answers); whether the answer
    contains the gold answer is kept as ``answered`` (a record read back from an export keeps it),
    and ``annotate(record)``'s keys, computed while the text is there."""
    from ragray.metrics.evidence import answered

    lines = []
    for rec in _jsonl(out / "progress.jsonl"):
        q = rec["question"]
        if q.get("baseline_answer") is not None:
            rec["answered"] = answered(q["baseline_answer"], q.get("gold_answers"))
            if annotate is not None:
                rec.update(annotate(rec))
        for key in BLANKED:
            q[key] = None
        for call in rec.get("calls", []):
            call["answer"] = None
        for passage in rec.get("passages", []):
            for key in BLANKED_PASSAGE:
                passage.pop(key, None)
        lines.append(json.dumps(rec, sort_keys=False))
    exported.parent.mkdir(parents=True, exist_ok=True)
    tmp = exported.with_name(f".{exported.name}.{os.getpid()}.tmp")  # a run killed mid-write keeps the last export
    tmp.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    tmp.replace(exported)


def tables(exported: Path, records: Mapping[str, dict]) -> tuple[list[dict], list[dict], list[dict]]:
    """questions, passages, checks of an export, question text and gold answers restored."""
    qs, ps, cs = [], [], []
    for rec in _jsonl(exported):
        q = rec["question"]
        src = records.get(q["question_id"], {})
        q["question"], q["gold_answers"] = src.get("question"), src.get("answers")
        q["answered"] = rec.get("answered")
        qs.append(q)
        ps += rec["passages"]
        cs += rec.get("checks", [])
        if rec.get("checks") and not any(c["measure"] == "logprob_share" for c in rec["checks"]):
            cs.append(share_check(rec))
        q["lds_additive_ceiling"] = additive_ceiling(rec)
        if (arms := arms_check(rec)) is not None:
            weights, row = arms
            for p in rec["passages"]:
                p[SECONDARY] = weights.get(p["passage_id"])
            cs.append(row)
    return qs, ps, cs


#: the secondary measure, chosen on the tune split before any test figure was read (2026-11-26,
#: configs/evidence_frozen.yaml): the surrogate refitted on its masks plus the full context and the
#: drop-one arms, less any held-out subset (ragray's default ``surrogate_fit: masks_and_arms``),
#: from the exported subsets; compared with the controls in a panel of its own (its own Holm
#: family), so the pre-registered primary panel is unchanged
SECONDARY = "surrogate_arms"


def _indexed(rec: Mapping[str, Any]) -> tuple[list[str], dict[str, list[dict]]]:
    ids = [p["passage_id"] for p in sorted(rec["passages"], key=lambda p: p["retrieval_rank"])]
    by: dict[str, list[dict]] = {}
    for sub in rec.get("subsets", []):
        if sub["logprob"] is not None and sub["logprob"] == sub["logprob"]:
            by.setdefault(sub["purpose"], []).append(sub)
    return ids, by


def arms_check(rec: Mapping[str, Any]) -> tuple[dict[str, float], dict[str, Any]] | None:
    """:data:`SECONDARY`'s weights (passage id -> weight) and check row from an exported record
    (None without surrogate masks or held-out subsets): LDS on the same held-out subsets as every
    measure; a top-k drop where that removal was scored (top 1 always is: a drop-one arm), NaN else."""
    from ragray.attribution.measures import lasso_weights
    from ragray.attribution.subsets import top_k_removed
    from ragray.metrics.attribution_checks import lds

    q = rec["question"]
    ids, by = _indexed(rec)
    k, held = len(ids), by.get("heldout", [])
    if len(by.get("surrogate", [])) < 4 or not held or q.get("logprob_all") is None:
        return None
    kept = lambda sub: frozenset(ids.index(x) for x in sub["kept_passage_ids"])  # noqa: E731
    drops = {p["passage_id"]: p["logprob_drop"] for p in rec["passages"]}
    full = frozenset(range(k))
    known = {full: q["logprob_all"], **{full - {i}: q["logprob_all"] - drops[x] for i, x in enumerate(ids)
                                        if drops[x] is not None}}
    reserved = {kept(sub) for sub in held}
    points = [(kept(sub), sub["logprob"]) for sub in by["surrogate"]]
    points += [(s, lp) for s, lp in known.items() if s not in reserved and lp == lp]
    weights = lasso_weights(k, points, 0.01)
    scored = {kept(sub): sub["logprob"] for subs in by.values() for sub in subs} | known
    template = next((c for c in rec.get("checks", []) if c["measure"] == "logprob_drop"), None)
    top = template["top_k"] if template else []
    drop = [q["logprob_all"] - lp if (lp := scored.get(full - set(top_k_removed(weights, n)))) is not None
            else float("nan") for n in top]
    row = {"question_id": q["question_id"], "measure": SECONDARY, "control": False,
           "lds": lds(weights, [sorted(kept(sub)) for sub in held], [sub["logprob"] for sub in held]),
           "n_subsets": len(held), "top_k": top, "top_k_drop": drop}
    return dict(zip(ids, weights)), row


def additive_ceiling(rec: Mapping[str, Any]) -> float | None:
    """The LDS of the best additive model of this question's held-out subsets, fitted on those same
    subsets (least squares, in sample): what no per-passage attribution can beat there, since LDS
    scores an additive prediction and the answer's log-prob is not additive in the passages."""
    import numpy as np

    from ragray.metrics.attribution_checks import lds

    ids, by = _indexed(rec)
    held = by.get("heldout", [])
    if len(held) <= len(ids) + 1:
        return None
    x = np.zeros((len(held), len(ids)))
    for r, sub in enumerate(held):
        x[r, [ids.index(i) for i in sub["kept_passage_ids"]]] = 1.0
    y = np.array([sub["logprob"] for sub in held])
    w = np.linalg.lstsq(np.c_[x, np.ones(len(y))], y, rcond=None)[0][: len(ids)]
    return lds(list(w), [list(np.flatnonzero(row)) for row in x], list(y))


def share_check(rec: Mapping[str, Any]) -> dict[str, Any]:
    """The clipped share's check row, recomputed from a record written before the loop checked it:
    LDS from the held-out subsets; a top-k drop where the removal was scored (top-1 always is: it
    is a drop-one arm), NaN otherwise."""
    import math

    from ragray.attribution.subsets import top_k_removed
    from ragray.metrics.attribution_checks import lds

    q, passages = rec["question"], sorted(rec["passages"], key=lambda p: p["retrieval_rank"])
    ids = [p["passage_id"] for p in passages]
    drops = [p["logprob_drop"] if p["logprob_drop"] is not None else float("nan") for p in passages]
    share = [1.0 - math.exp(-max(0.0, d)) if d == d else float("nan") for d in drops]
    scored = {frozenset(s["kept_passage_ids"]): s["logprob"] for s in rec.get("subsets", [])}
    for i, d in enumerate(drops):
        scored.setdefault(frozenset(ids[:i] + ids[i + 1:]), q["logprob_all"] - d)
    held = [s for s in rec.get("subsets", []) if s["purpose"] == "heldout"]
    value = lds(share, [[ids.index(x) for x in s["kept_passage_ids"]] for s in held], [s["logprob"] for s in held])
    template = next(c for c in rec["checks"] if c["measure"] == "logprob_drop")
    out = []
    for k in template["top_k"]:
        kept = frozenset(x for i, x in enumerate(ids) if i not in top_k_removed(share, k))
        lp = scored.get(kept)
        out.append(float("nan") if lp is None or lp != lp else q["logprob_all"] - lp)
    return {"question_id": q["question_id"], "measure": "logprob_share", "control": False, "lds": value,
            "n_subsets": len(held), "top_k": template["top_k"], "top_k_drop": out}


def costs(questions: list[dict]) -> dict[str, Any]:
    """Seconds and scoring passes per question, per part of the measurement."""
    import numpy as np

    def mean(key: str) -> float | None:
        vals = [q[key] for q in questions if q.get(key) is not None]
        return float(np.mean(vals)) if vals else None

    total = mean("seconds")
    extra = (mean("seconds_surrogate") or 0.0) + (mean("seconds_checks") or 0.0)
    return {"questions": len(questions), "seconds_per_question": total,
            "seconds_drop_one_and_jsd": None if total is None else total - extra,
            "seconds_surrogate": mean("seconds_surrogate"), "seconds_checks": mean("seconds_checks"),
            "passes_drop_one": mean("score_passes"), "passes_surrogate": mean("surrogate_passes"),
            "passes_checks": mean("check_passes")}


def run_one(name: str, source: Path, retrieval: list[str], phase: str, variant: str, runs: Path,
            limit: int | None, extra: list[str], root: Path = EXPORT) -> dict[str, Any]:
    """Run (or resume) one set x variant, export it, and return its tables, panel and cost."""
    from ragray.pipeline import run_influence

    rows_range, part_extra = None, []
    if variant in PARTS:
        first, last, part_extra = PARTS[variant]
        rows_range = (first, last)
    path, records = split_file(source, name, phase, runs, limit, rows_range, tag="" if variant == "frozen" or
                               variant not in PARTS else f"-{variant}")
    out = runs / phase / variant / name
    exported = export_path(phase, variant, name, root)
    seed_from_export(out, exported)
    record_settings_added_since(out / "config.yaml")
    start = time.perf_counter()
    result = run_influence(config(path, retrieval, variant, [*part_extra, *extra]), out,
                           resume=(out / "progress.jsonl").is_file(), progress=True)
    export(out, exported)
    log_session(exported, len(records))
    got = collect(exported, records)
    return got | {"wall_seconds": time.perf_counter() - start, "resumed": result.n_resumed}


#: settings ragray gained after a benchmark run began -> the behaviour that run had (the value it
#: ran with); a run directory saved before a setting existed gets it written in, so resuming with the
#: frozen config (which pins the same value) is not refused as a changed config
ADDED_SETTINGS = {("influence", "surrogate_fit"): "masks"}


def record_settings_added_since(saved: Path) -> None:
    import yaml

    if not saved.is_file():
        return
    data = yaml.safe_load(saved.read_text(encoding="utf-8"))
    missing = {keys: v for keys, v in ADDED_SETTINGS.items() if keys[-1] not in data.get(keys[0], {})}
    if not missing:
        return
    for (section, key), value in missing.items():
        data.setdefault(section, {})[key] = value
    saved.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def _accelerator() -> str | None:
    """The GPU the model ran on (``generation.device: auto`` takes CUDA when present), else None."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_name(0)


def log_session(exported: Path, asked: int) -> None:
    """Append who ran this export how far (CPU, commit, time) to ``sessions.jsonl`` beside it: the
    machines differ between sessions, so every figure can be traced to its CPU."""
    done = _exported(exported)
    info = machine_info(("torch", "transformers"))
    entry = {"set": exported.stem, "questions_done": done, "questions_asked": asked,
             **{k: info[k] for k in ("timestamp_utc", "commit", "cpu", "cores")}, "torch": info["versions"]["torch"],
             "accelerator": _accelerator()}
    if STARTED_AT:  # the code that ran is the process's, not what HEAD became meanwhile
        entry["commit"] = STARTED_AT
    with (exported.parent / "sessions.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry) + "\n")


def collect(exported: Path, records: Mapping[str, dict]) -> dict[str, Any]:
    """An export's tables (text restored from the data set), panel and cost."""
    from ragray.metrics.evidence import evidence_panel

    qs, ps, cs = tables(exported, records)
    by_machine = {label: costs([q for q in qs if q["question_id"] in ids]) for label, ids in machines(exported).items()}
    return {"questions": qs, "passages": ps, "checks": cs, "panel": evidence_panel(qs, ps, cs), "cost": costs(qs),
            "cost_by_machine": by_machine}


def machines(exported: Path) -> dict[str, set[str]]:
    """Which machine ran which of an export's questions, from ``sessions.jsonl`` beside it (each
    entry: the export's size when that machine wrote it; questions are exported in the order they
    ran): label ("NVIDIA H200", "AMD EPYC (2 cores)") -> question ids. Seconds are only comparable
    within one machine, so costs are reported per machine too. Empty when there is no log."""
    log = exported.parent / "sessions.jsonl"
    if not log.is_file() or not exported.is_file():
        return {}
    order = [r["question"]["question_id"] for r in _jsonl(exported)]
    out: dict[str, set[str]] = {}
    done = 0
    for entry in _jsonl(log):
        if entry.get("set") != exported.stem or entry["questions_done"] <= done:
            continue
        label = entry.get("accelerator") or f"{entry.get('cpu')} ({entry.get('cores')} cores)"
        out.setdefault(label, set()).update(order[done:entry["questions_done"]])
        done = entry["questions_done"]
    return out


def _mean_ci(values: list[float], seed: int = 0, n_boot: int = 2000) -> dict[str, Any]:
    import numpy as np

    from ragray.metrics.validity import bootstrap_ci

    v = np.array([x for x in values if x is not None and x == x], dtype=float)
    if not len(v):
        return {"n": 0}
    return {"n": len(v)} | bootstrap_ci(v, np.random.default_rng(seed).integers(0, len(v), (n_boot, len(v))))


def secondary(parts: Mapping[str, Mapping[str, list[dict]]]) -> dict[str, Any]:
    """Per set and pooled: :data:`SECONDARY` against the controls (a panel of its own), its LDS minus
    the primary surrogate's on the same questions (paired), and the additive ceiling of LDS."""
    from ragray.metrics.evidence import evidence_panel

    def one(got: Mapping[str, list[dict]]) -> dict[str, Any]:
        lds = {}
        for c in got["checks"]:
            if c["measure"] in (SECONDARY, "surrogate_weight") and c.get("lds") is not None:
                lds.setdefault(c["question_id"], {})[c["measure"]] = c["lds"]
        pairs = [v[SECONDARY] - v["surrogate_weight"] for v in lds.values() if len(v) == 2]
        return {"panel": evidence_panel(got["questions"], got["passages"], got["checks"], attributions=(SECONDARY,)),
                "lds_minus_surrogate_weight": _mean_ci(pairs),
                "lds_additive_ceiling": _mean_ci([q.get("lds_additive_ceiling") for q in got["questions"]])}

    pooled, _ = pooled_panel(parts, panel=False)
    return {"sets": {n: one(g) for n, g in parts.items()}, "pooled": one(pooled)}


def without(got: Mapping[str, list[dict]], measure: str) -> dict[str, list[dict]]:
    """Tables with one measure dropped (its passage column nulled, its check rows removed): the
    panel of the questions that lack it, e.g. the test split's questions run without the surrogate."""
    return {"questions": list(got["questions"]),
            "passages": [{**p, measure: None} for p in got["passages"]],
            "checks": [c for c in got["checks"] if c["measure"] != measure]}


def pooled_panel(parts: Mapping[str, Mapping[str, list[dict]]], panel: bool = True,
                 ) -> tuple[dict[str, list[dict]], dict[str, Any] | None]:
    """Tables of several sets (question ids made unique as ``set:id``) and their pooled panel."""
    from ragray.metrics.evidence import evidence_panel

    pooled: dict[str, list[dict]] = {"questions": [], "passages": [], "checks": []}
    for name, got in parts.items():
        for key in pooled:
            pooled[key] += [{**r, "question_id": f"{name}:{r['question_id']}"} for r in got[key]]
    return pooled, evidence_panel(pooled["questions"], pooled["passages"], pooled["checks"]) if panel else None


def run_test_parts(sets: Mapping[str, tuple[Path, list[str]]], runs: Path, chunk: int, extra: list[str],
                   root: Path, report_only: bool, parts: list[str] | None = None,
                   stop_after: float | None = None) -> None:
    """The test split, in rounds: every set's next ``chunk`` questions of the first part, then the
    next part; each round ends with the exports written, so a run stopped at any point (a session
    ends hard) has all three sets at about the same size, and resumes from the exports.
    ``parts`` runs only those; after ``stop_after`` seconds no new round begins (a lent machine's
    call has a hard limit: stop at a round's end, exports written)."""
    if report_only:
        return
    start = time.monotonic()
    for variant, (first, last, _) in PARTS.items():
        if parts is not None and variant not in parts:
            continue
        for end in range(chunk, last - first + chunk, chunk):
            for name, (source, retrieval) in sets.items():
                if stop_after is not None and time.monotonic() - start > stop_after:
                    print(f"stopping: --stop-after {stop_after:g} s passed ({variant}, {name}, before row {end})")
                    return
                if _exported(export_path("test", variant, name, root)) >= min(end, last - first):
                    continue  # this round's rows are all done (a resumed run skips straight to its next)
                run_one(name, source, retrieval, "test", variant, runs, min(end, last - first), extra, root)


def test_results(sets: Mapping[str, tuple[Path, list[str]]], root: Path) -> dict[str, Any]:
    """Panels of the test split from the exports: ``frozen`` (every measure, the questions run with
    the surrogate) and ``frozen_all`` (every question of both parts, the surrogate left out)."""
    with_surrogate: dict[str, Any] = {}
    every: dict[str, Any] = {}
    for name, (source, _) in sets.items():
        records = {r["id"]: r for r in split_rows(source, "test")}
        parts = {v: collect(export_path("test", v, name, root), records)
                 for v in PARTS if export_path("test", v, name, root).is_file()}
        if not parts:
            continue
        with_surrogate[name] = parts.get("frozen")
        merged = {key: [r for got in parts.values() for r in without(without(got, "surrogate_weight"), SECONDARY)[key]]
                  for key in ("questions", "passages", "checks")}
        every[name] = merged | {"cost": {v: got["cost"] for v, got in parts.items()},
                                "cost_by_machine": {v: got["cost_by_machine"] for v, got in parts.items()}}
    out: dict[str, Any] = {}
    for label, chosen in (("frozen", {n: g for n, g in with_surrogate.items() if g}), ("frozen_all", every)):
        if not chosen:
            continue
        from ragray.metrics.evidence import evidence_panel

        _, pooled = pooled_panel(chosen)
        out[label] = {"sets": {n: {"panel": evidence_panel(g["questions"], g["passages"], g["checks"]),
                                   "cost": g["cost"], "cost_by_machine": g["cost_by_machine"]}
                               for n, g in chosen.items()},
                      "pooled": pooled, "secondary": secondary(chosen)}
    return out


#: what a record's measurement is made of (timing and cost left out: they differ by machine by design)
COMPARED_QUESTION = ("scored_tokens", "logprob_all", "logprob_none", "f1", "context_dependent", "spearman_rho")
COMPARED_PASSAGE = ("influence", "logprob_drop", "jsd", "surrogate_weight", "answer_similarity", "question_similarity")


def compare_exports(a: Path, b: Path) -> dict[str, Any]:
    """The questions two exports share (e.g. the same test rows run on a CPU and on a GPU), field by
    field: the largest absolute difference of every number that makes up the measurement (the
    answer's token count and F1, its log-probs, each passage's scores, each subset's log-prob, each
    check's LDS), and how many questions differ in a value that is not a float (an answer of another
    length, another rank order)."""
    def load(path: Path) -> dict[str, dict]:
        return {r["question"]["question_id"]: r for r in _jsonl(path)}

    left, right = load(a), load(b)
    shared = sorted(set(left) & set(right))
    largest: dict[str, float] = {}
    exact_mismatch: dict[str, int] = {}

    def note(key: str, x: Any, y: Any) -> None:
        if isinstance(x, float) and isinstance(y, (int, float)) and not isinstance(y, bool):
            largest[key] = max(largest.get(key, 0.0), abs(x - float(y)))
        elif x != y:  # token counts, booleans, a value only one side has: compared exactly
            exact_mismatch[key] = exact_mismatch.get(key, 0) + 1

    for qid in shared:
        ra, rb = left[qid], right[qid]
        for key in COMPARED_QUESTION:
            note(f"question.{key}", ra["question"].get(key), rb["question"].get(key))
        pa = {p["passage_id"]: p for p in ra["passages"]}
        for p in rb["passages"]:
            for key in COMPARED_PASSAGE:
                note(f"passage.{key}", pa.get(p["passage_id"], {}).get(key), p.get(key))
        sa = {(s["purpose"], tuple(s["kept_passage_ids"])): s["logprob"] for s in ra.get("subsets", [])}
        for sub in rb.get("subsets", []):
            note("subset.logprob", sa.get((sub["purpose"], tuple(sub["kept_passage_ids"]))), sub["logprob"])
        ca = {(c["measure"], c["control"]): c for c in ra.get("checks", [])}
        for c in rb.get("checks", []):
            note("check.lds", ca.get((c["measure"], c["control"]), {}).get("lds"), c.get("lds"))
    return {"a": str(a), "b": str(b), "shared_questions": len(shared), "max_abs_difference": largest,
            "questions_differing_exactly": exact_mismatch}


def _exported(path: Path) -> int:
    """Records in an export (0 when there is none yet)."""
    if not path.is_file():
        return 0
    return sum(1 for line in path.read_text(encoding="utf-8").split("\n") if line.strip())


def progress(sets: Mapping[str, tuple[Path, list[str]]], root: Path) -> dict[str, Any]:
    """Questions exported per part and set against the part's size (its rows of the split), and
    whether every part is complete: no test figure is published before it is (pre-registration)."""
    parts: dict[str, dict[str, dict[str, int]]] = {}
    for part, (first, last, _) in PARTS.items():
        for name, (source, _) in sets.items():
            done = _exported(export_path("test", part, name, root))
            size = max(0, min(last, len(split_rows(source, "test"))) - first)
            parts.setdefault(part, {})[name] = {"done": done, "of": size}
    complete = all(c["done"] >= c["of"] for cells in parts.values() for c in cells.values())
    return {"parts": parts, "complete": complete}


def default_sets(names: list[str] | None = None) -> dict[str, tuple[Path, list[str]]]:
    """The benchmark's data sets (``../shared/data``): name -> (file, retrieval settings)."""
    return {n: (SHARED_DATA / DATASETS[n][0], DATASETS[n][1]) for n in names or DATASETS}


def _tune_variants() -> list[str]:
    """The prompt x span variants (the test split's parts are added to VARIANTS once frozen)."""
    return [v for v in VARIANTS if v not in PARTS]


def _header(phase: str, limit: int | None) -> dict[str, Any]:
    """The settings part of a results JSON; on the test split the frozen settings become its parts'
    variants."""
    results: dict[str, Any] = {"phase": phase, "splits": SPLITS, "top_k": TOP_K, "measures": MEASURES,
                               "shuffle_seed": SHUFFLE_SEED, "limit": limit, "variants": {}}
    if phase == "test":
        frozen = _frozen(REPO / "configs" / "evidence_frozen.yaml")
        for part in PARTS:
            VARIANTS[part] = [f"{k}={v}" for k, v in frozen.items()]
        results |= {"parts": {k: {"rows": [a, b], "settings": VARIANTS[k] + extra} for k, (a, b, extra) in PARTS.items()},
                    "frozen": frozen}
    return results


def _test_report(sets: Mapping[str, tuple[Path, list[str]]], root: Path) -> dict[str, Any]:
    """The test split's progress, panels and session log, from the exports under ``root``."""
    return {"progress": progress(sets, root), "variants": test_results(sets, root),
            "sessions": [entry for v in PARTS if (log := root / "test" / v / "sessions.jsonl").is_file()
                         for entry in _jsonl(log)]}


def _variant_report(got_all: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """One tune variant's results from each set's :func:`collect` (plus ``wall_seconds``, ``resumed``)."""
    return {"sets": {name: {"panel": got["panel"], "cost": got["cost"], "wall_seconds": got.get("wall_seconds"),
                            "resumed": got.get("resumed")} for name, got in got_all.items()},
            "pooled": pooled_panel(got_all)[1], "secondary": secondary(got_all)}


def report(phase: str, sets: Mapping[str, tuple[Path, list[str]]] | None = None, root: Path = EXPORT,
           variants: list[str] | None = None, limit: int | None = None) -> dict[str, Any]:
    """The results JSON of ``phase`` rebuilt from the committed exports alone, no model (``--report``;
    what ``benchmarks/verify.py`` reruns), less ``machine``. The data sets only restore question text
    and give the test split's size."""
    sets = default_sets() if sets is None else sets
    results = _header(phase, limit)
    if phase == "test":
        results |= _test_report(sets, root)
    else:
        for variant in variants or _tune_variants():
            got_all = {name: collect(export_path(phase, variant, name, root),
                                     {r["id"]: r for r in split_rows(source, phase)})
                       for name, (source, _) in sets.items()}
            results["variants"][variant] = _variant_report(got_all)
    results["goals"] = {v: goals(got) for v, got in results["variants"].items()}
    results["from_exports"] = True  # no model ran here, the panels are the exports'
    return results


#: the commit this process started on (set by :func:`main`)
STARTED_AT: str | None = None


def main(argv: list[str] | None = None) -> int:
    global STARTED_AT
    STARTED_AT = machine_info()["commit"]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--phase", choices=list(SPLITS), default="tune")
    ap.add_argument("--datasets", nargs="+", choices=list(DATASETS), default=list(DATASETS))
    ap.add_argument("--data", type=Path, help="any ragray JSONL with gold ids (instead of --datasets)")
    ap.add_argument("--name", default="custom", help="its name in the results")
    ap.add_argument("--scope", default="global", choices=["global", "per_question"], help="--data's retrieval scope")
    ap.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=None)
    ap.add_argument("--limit", type=int, default=None, help="only the split's first N questions (a pilot)")
    ap.add_argument("--chunk", type=int, default=10,
                    help="--phase test: questions per set per round (exports written after each)")
    ap.add_argument("--report", action="store_true", help="no model runs: the results from the exports")
    ap.add_argument("--parts", nargs="+", choices=list(PARTS), default=None,
                    help="--phase test: run only these parts (e.g. one process per part and set on a GPU machine)")
    ap.add_argument("--stop-after", type=float, default=None,
                    help="--phase test: begin no new round after this many seconds (exports are written per round)")
    ap.add_argument("--run-only", action="store_true",
                    help="--phase test: run and export, skip the report (processes running parts side by side)")
    ap.add_argument("--publish", action="store_true",
                    help="--phase test: write the docs/measurements.md block (progress until complete) and, once complete, validity.json")
    ap.add_argument("--runs", type=Path, default=REPO / "runs" / "bench-evidence")
    ap.add_argument("--set", dest="extra", action="append", default=[], help="extra config overrides")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--export", type=Path, default=EXPORT, help="where the text-free exports live (committed)")
    ap.add_argument("--compare", type=Path, nargs=2, metavar=("A", "B"),
                    help="compare two exports' shared questions field by field (e.g. CPU vs GPU) and exit")
    ap.add_argument("--table", type=Path, help="print the README table of this results JSON and exit")
    ap.add_argument("--subset", default="all", help="--table: all | answered | answered_context_dependent")
    args = ap.parse_args(argv)
    if args.compare:
        diff = compare_exports(*args.compare)
        print(json.dumps(diff, indent=2))
        if args.out:
            save_result(args.out, diff | {"machine": machine_info(("torch", "transformers"))})
        return 0
    if args.table:
        print(markdown(json.loads(args.table.read_text(encoding="utf-8")), args.subset))
        return 0
    sets = ({args.name: (args.data, [f"retrieval.scope={args.scope}"])} if args.data
            else default_sets(args.datasets))
    sets = {n: (Path(src), r) for n, (src, r) in sets.items()}
    if args.report and args.run_only:
        return 0
    if args.report:  # no model: the panels of what the exports hold
        results = report(args.phase, sets, args.export, args.variants, args.limit)
    else:
        results = _header(args.phase, args.limit)
        if args.phase == "test":
            run_test_parts(sets, args.runs, args.chunk, args.extra, args.export, False, args.parts, args.stop_after)
            if args.run_only:
                return 0
            results |= _test_report(sets, args.export)
        else:
            for variant in args.variants or _tune_variants():
                got_all = {name: run_one(name, source, retrieval, args.phase, variant, args.runs, args.limit,
                                         args.extra, args.export)
                           for name, (source, retrieval) in sets.items()}
                results["variants"][variant] = _variant_report(got_all)
        results["goals"] = {v: goals(got) for v, got in results["variants"].items()}
        results["from_exports"] = False

    results["machine"] = machine_info(("torch", "transformers", "numpy", "scipy"))
    out = args.out or REPO / "benchmarks" / "results" / f"evidence_{args.phase}.json"
    save_result(out, results)
    table = save_table(results, out.with_name(f"{out.stem}_table.csv"))
    print(f"wrote {out} and {table}")
    if args.publish and args.phase == "test":
        publish(results)
    if args.phase == "test" and not results["progress"]["complete"]:
        done = "; ".join(f"{part}: " + ", ".join(f"{n} {c['done']}/{c['of']}" for n, c in cells.items())
                         for part, cells in results["progress"]["parts"].items())
        print(f"the test split is not complete ({done}): its figures are interim, not results")
    else:
        for v, g in results["goals"].items():
            print(f"goals, {v}:")
            print("\n".join(goal_lines(g, influence_mode(results))))
    return 0


#: what the runs' ``influence`` column was, by ``influence.mode``: a reader of "influence" alone
#: cannot tell which measure won
INFLUENCE_IS = {
    "jsd": "the mean JSD per answer token in bits, which orders each question's passages exactly as "
           "`jsd` does, so its figures equal `jsd`'s",
    "logprob_share": "the clipped log-prob share 1 − exp(−max(0, drop)), ordered as `logprob_share`",
}
INFLUENCE_IS["logprob"] = INFLUENCE_IS["logprob_share"]  # the mode's name in results before 0.2.0


def influence_mode(result: Mapping[str, Any]) -> str | None:
    """The ``influence.mode`` the results were measured with (from their ``measures`` settings)."""
    modes = [m.split("=", 1)[1] for m in result.get("measures") or [] if m.startswith("influence.mode=")]
    return modes[-1] if modes else None


def measure_label(measure: str, mode: str | None) -> str:
    """A measure's name as published: ``influence`` says which mode measured it."""
    return f"influence ({mode} mode)" if measure == "influence" and mode else measure


def markdown(result: Mapping[str, Any], subset: str = "all",
             metrics: tuple[str, ...] = ("lds", "top2_drop", "auc", "recovery_at_1")) -> str:
    """The README table of a results JSON: per variant, set (and pooled) and metric, the best
    attribution measure with its 95% CI, and its paired difference to each control (✓ = Holm-
    corrected win)."""
    mode = influence_mode(result)
    lines = ["| variant | set | n | metric | best measure | its mean [95% CI] | minus each control: mean [95% CI] |",
             "|---|---|---|---|---|---|---|"]
    for variant, v in result["variants"].items():
        panels = {**{n: s["panel"] for n, s in v["sets"].items()}, "pooled": v["pooled"]}
        for name, panel in panels.items():
            sub = panel["subsets"][subset]
            for metric in metrics:
                t = sub["metrics"].get(metric)
                if not t or not t.get("best"):
                    continue
                b = t["best"]
                m = t["measures"][b]
                diffs = "; ".join(
                    f"{c}: {d['difference']['mean']:+.2f} [{d['difference']['low']:+.2f}, {d['difference']['high']:+.2f}]"
                    f"{' ✓' if d['beats'] else ''}" for c, d in t["vs_controls"][b].items())
                lines.append(f"| {variant} | {name} | {t['n']} | {metric} | {measure_label(b, mode)} | {m['mean']:.2f} "
                             f"[{m['low']:.2f}, {m['high']:.2f}] | {diffs} |")
    return "\n".join(lines)


def table_rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every cell of a results JSON's panels, flat: one row per variant, set (and pooled), subset,
    metric and measure (controls too) with its mean and 95% CI, and for each attribution measure
    its paired difference to each control (mean, CI, Holm-corrected p, whether it wins). The
    README shows the best measure per metric; this is the whole table."""
    rows = []
    for variant, v in result["variants"].items():
        panels = {**{n: s["panel"] for n, s in v["sets"].items()}, "pooled": v["pooled"]}
        for name, panel in panels.items():
            for subset, sub in panel["subsets"].items():
                for metric, t in sub["metrics"].items():
                    for measure, m in t["measures"].items():
                        row = {"variant": variant, "set": name, "subset": subset, "metric": metric,
                               "measure": measure, "control": bool(m.get("control")), "n": t["n"],
                               "mean": m["mean"], "low": m["low"], "high": m["high"], "best": t.get("best") == measure}
                        for c, d in (t.get("vs_controls") or {}).get(measure, {}).items():
                            row |= {f"minus_{c}": d["difference"]["mean"], f"minus_{c}_low": d["difference"]["low"],
                                    f"minus_{c}_high": d["difference"]["high"], f"minus_{c}_p_holm": d["p_holm"],
                                    f"beats_{c}": d["beats"]}
                        rows.append(row)
    return rows


def table_csv(result: Mapping[str, Any]) -> str:
    """:func:`table_rows` as CSV text (columns: the union, in first-seen order)."""
    import csv
    import io

    rows = table_rows(result)
    columns = list(dict.fromkeys(k for r in rows for k in r))
    fh = io.StringIO(newline="")
    writer = csv.DictWriter(fh, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    return fh.getvalue()


def save_table(result: Mapping[str, Any], path: Path) -> Path:
    """:func:`table_csv` written to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        fh.write(table_csv(result))
    return path


#: the goals fixed before the test split ran: faithfulness (on each set the best attribution
#: measure's LDS and top-2 drop beat every control, Holm-corrected paired bootstrap, and pooled LDS
#: at least this) and the pooled gold AUC against both cosines, reported with no bar; the third
#: goal, recovery@1 of the source an answer took, is benchmarks/bench_tracing.py's
GOAL_LDS = 0.85
FAITHFULNESS_METRICS = ("lds", "top2_drop")
RELEVANCE_CONTROLS = ("answer_similarity", "question_similarity")


def _best(table: Mapping[str, Any] | None) -> dict[str, Any]:
    """One metric table's best attribution measure, its CI and its weakest paired margin over the
    controls; ``state`` says ``measured`` or why not (no rows; under the panel's verdict minimum)."""
    if not table or not table.get("best"):
        return {"state": "no questions", "n": table["n"] if table else 0}
    best = table["best"]
    margins = table["vs_controls"].get(best, {})
    weakest = min(margins, key=lambda c: margins[c]["difference"]["low"]) if margins else None
    return {"state": "measured" if table.get("best_beats_every_control") is not None else "too few questions",
            "n": table["n"], "measure": best, **{k: table["measures"][best][k] for k in ("mean", "low", "high")},
            "beats_every_control": table.get("best_beats_every_control"),
            "weakest_control": weakest, "weakest_margin": margins[weakest]["difference"] if weakest else None}


def goals(variant: Mapping[str, Any], subsets: tuple[str, ...] = ("all", "answered_context_dependent")) -> dict[str, Any]:
    """The pre-registered goals read off one variant of the results (``frozen`` or ``frozen_all``).

    Faithfulness, per subset: on every set, LDS and top-2 drop of the best attribution measure beat
    every control, and the pooled best LDS >= :data:`GOAL_LDS`; ``met`` is None while any cell lacks
    a verdict. Gold AUC, primary subset, pooled: the best gold-AUC measure minus each relevance
    cosine (reported, no bar)."""
    faith: dict[str, Any] = {}
    for subset in subsets:
        per_set = {name: {m: _best(s["panel"]["subsets"][subset]["metrics"].get(m)) for m in FAITHFULNESS_METRICS}
                   for name, s in variant["sets"].items()}
        pooled = _best(variant["pooled"]["subsets"][subset]["metrics"].get("lds"))
        verdicts = [c.get("beats_every_control") for cells in per_set.values() for c in cells.values()]
        met = None if None in verdicts or pooled["state"] != "measured" else (
            all(verdicts) and pooled["mean"] >= GOAL_LDS)
        faith[subset] = {"per_set": per_set, "pooled_lds": pooled, "lds_goal": GOAL_LDS, "met": met}
    auc = variant["pooled"]["subsets"]["answered_context_dependent"]["metrics"].get("auc")
    gold = _best(auc)
    if gold["state"] != "no questions":
        gold["minus"] = {c: auc["vs_controls"][gold["measure"]][c]["difference"]
                         for c in RELEVANCE_CONTROLS if c in auc["vs_controls"][gold["measure"]]}
    out = {"faithfulness": faith, "gold_auc_primary_pooled": gold}
    if sec := variant.get("secondary"):
        pooled_sec = sec["pooled"]
        out["secondary_pooled"] = {"lds": _best(pooled_sec["panel"]["subsets"]["all"]["metrics"].get("lds")),
                                   "lds_minus_surrogate_weight": pooled_sec["lds_minus_surrogate_weight"],
                                   "lds_additive_ceiling": pooled_sec["lds_additive_ceiling"]}
    return out


def goal_lines(g: Mapping[str, Any], mode: str | None = None) -> list[str]:
    """The goals as plain sentences (console, README); ``mode``: the runs' ``influence.mode``, so
    that a best measure ``influence`` says what it was."""
    def cell(c: Mapping[str, Any]) -> str:
        if c["state"] == "no questions":
            return "no questions"
        margin = c["weakest_margin"]
        verdict = {True: "beats every control", False: "does not beat every control",
                   None: "no verdict (too few questions)"}[c["beats_every_control"]]
        return (f"{measure_label(c['measure'], mode)} {c['mean']:.2f} [{c['low']:.2f}, {c['high']:.2f}], "
                f"n = {c['n']}, {verdict}"
                + (f" (weakest margin: {c['weakest_control']} {margin['mean']:+.2f} [{margin['low']:+.2f}, "
                   f"{margin['high']:+.2f}])" if margin else ""))

    lines = []
    for subset, f in g["faithfulness"].items():
        state = {True: "MET", False: "NOT MET", None: "UNDECIDED"}[f["met"]]
        lines.append(f"faithfulness, subset {subset}: {state} (the goal: on every set the best measure's LDS "
                     f"and top-2 drop beat every control, and pooled LDS >= {f['lds_goal']})")
        for name, cells in f["per_set"].items():
            for metric, c in cells.items():
                lines.append(f"    {name} {metric}: {cell(c)}")
        lines.append(f"    pooled lds: {cell(f['pooled_lds'])}")
    gold = g["gold_auc_primary_pooled"]
    lines.append(f"gold AUC (reported, no bar), answered and context-dependent, pooled: {cell(gold)}")
    for c, d in gold.get("minus", {}).items():
        lines.append(f"    minus {c}: {d['mean']:+.2f} [{d['low']:+.2f}, {d['high']:+.2f}]")
    if sec := g.get("secondary_pooled"):
        ci = lambda d: f"{d['mean']:.3f} [{d['low']:.3f}, {d['high']:.3f}], n = {d['n']}" if d.get("n") else "no questions"  # noqa: E731
        lines.append(f"secondary (chosen on the tune split), pooled, subset all: {cell(sec['lds'])}")
        lines.append(f"    its LDS minus the frozen surrogate's: {ci(sec['lds_minus_surrogate_weight'])}")
        lines.append(f"    the additive ceiling of LDS (in-sample fit of the held-out subsets): {ci(sec['lds_additive_ceiling'])}")
    return lines


README_BEGIN = "<!-- evidence-test:begin (written by: python benchmarks/bench_evidence.py --phase test --report --publish) -->"
README_END = "<!-- evidence-test:end -->"
#: the gold-evidence panel of the test split (the validity panel v2), for readers of the old validity.json
VALIDITY = REPO / "benchmarks" / "results" / "validity.json"
GOLD_METRICS = ("recovery_at_1", "auc")


def legend(result: Mapping[str, Any], mode: str | None) -> list[str]:
    """What the block's names mean, and which machines measured its records (each record names its
    machine; the results file's ``machine`` is where the report was built, not where questions ran)."""
    lines = []
    if "frozen" in result["variants"]:
        lines.append("- `frozen`: the test questions run with every measure, the surrogate included; "
                     "`frozen_all`: every test question of both parts, the surrogate left out.")
    if mode:
        what = INFLUENCE_IS.get(mode)
        lines.append(f"- `influence ({mode} mode)`: the runs' `influence` column, measured with "
                     f"`influence.mode={mode}`" + (f": {what}." if what else "."))
    counts: dict[str, int] = {}
    for s in result["variants"].get("frozen_all", {}).get("sets", {}).values():
        for by_machine in (s.get("cost_by_machine") or {}).values():
            for name, cost in by_machine.items():
                counts[name] = counts.get(name, 0) + cost.get("questions", 0)
    if counts:
        ran = ", ".join(f"{name} {n}" for name, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        built = result.get("machine") or {}
        lines.append(f"- Questions measured per machine: {ran}; this report built from the exports on "
                     f"{built.get('cpu', 'an unrecorded machine')} ({built.get('cores', '?')} cores), "
                     f"{str(built.get('timestamp_utc', ''))[:10] or 'undated'}.")
    return lines


def readme_block(result: Mapping[str, Any]) -> str:
    """The test-split block of docs/measurements.md: progress only until every part is complete (no interim
    figure is published: pre-registration), then the goals and the tables."""
    prog = result["progress"]
    done = sum(c["done"] for cells in prog["parts"].values() for c in cells.values())
    size = sum(c["of"] for cells in prog["parts"].values() for c in cells.values())
    parts = "; ".join(f"`{part}` " + ", ".join(f"{n} {c['done']}/{c['of']}" for n, c in cells.items())
                      for part, cells in prog["parts"].items())
    if not prog["complete"]:
        return (f"Test split: **{done} of {size} questions run** ({parts}). Its figures are published here "
                "when every part is complete, not before (pre-registered).")
    mode = influence_mode(result)
    out = [(f"Test split complete: {size} questions ({parts}). `benchmarks/results/evidence_test.json`; "
            "gold-evidence panel also in `benchmarks/results/validity.json`."), "", *legend(result, mode), ""]
    for variant, g in result["goals"].items():
        out += [f"Goals, `{variant}`:", "", "```", *goal_lines(g, mode), "```", ""]
    for variant_subset, metrics in ((("all", ("lds", "top2_drop", "top1_drop", "top3_drop"))),
                                    ("answered_context_dependent", ("auc", "recovery_at_1", "lds", "top2_drop"))):
        out += [f"Subset `{variant_subset}`:", "", markdown(result, variant_subset, metrics), ""]
    return "\n".join(out).rstrip()


def publish(result: Mapping[str, Any], readme: Path = REPO / "docs" / "measurements.md", validity: Path = VALIDITY) -> None:
    """Write the docs/measurements.md block (always: the progress line until the split is complete) and, once it
    is complete, ``validity.json`` (the gold-evidence metrics of every measure and control)."""
    write_block(readme, README_BEGIN, README_END, readme_block(result))
    if not result["progress"]["complete"]:
        return
    save_result(validity, validity_result(result))


def validity_result(result: Mapping[str, Any]) -> dict[str, Any]:
    """``validity.json`` of a complete test-split result: the gold-evidence metrics of every measure
    and control."""
    gold = {variant: {name: {subset: {m: panel["subsets"][subset]["metrics"].get(m) for m in GOLD_METRICS}
                             for subset in panel["subsets"]}
                      for name, panel in {**{n: s["panel"] for n, s in v["sets"].items()}, "pooled": v["pooled"]}.items()}
            for variant, v in result["variants"].items()}
    return {"source": "benchmarks/bench_evidence.py --phase test (pre-registered test split)",
            "model": "SmolLM2-135M-Instruct (packaged, greedy)", "frozen": result["frozen"],
            "progress": result["progress"], "goals": result["goals"], "gold": gold,
            "machine": result.get("machine")}


def _frozen(path: Path) -> dict[str, Any]:
    """The settings the tune split chose (``configs/evidence_frozen.yaml``, flat dotted keys)."""
    import yaml

    if not path.is_file():
        raise SystemExit(f"{path} is missing: run --phase tune, choose, and freeze the settings first")
    return yaml.safe_load(path.read_text(encoding="utf-8"))["settings"]


if __name__ == "__main__":
    sys.exit(main())
