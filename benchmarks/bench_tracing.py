"""Source tracing with known truth from real data (issue 26 item 10): two equally relevant
passages, and the answer's content says which one the model took.

    python benchmarks/bench_tracing.py [--sets squad hotpotqa] [--candidates 700] [--usable 150]
    python benchmarks/bench_tracing.py --data my.jsonl --name mine      # any ragray JSONL with gold ids
    python benchmarks/bench_tracing.py --report --candidates 700 --usable 150   # from the exports, no model

Cases (:mod:`ragray.data.conflicts`, seed 26) come from the records after each set's tuning split
(the first 150 questions, which ``bench_evidence`` tunes on): the gold passage, a copy whose answer
is replaced by another question's answer of the same kind, three distractors, shuffled; k = 5, the
``given`` retriever (the order as built). Stage 1 generates only the baseline answer of every
candidate (the call cache keeps it, so stage 2 does not pay for it again) and keeps the *usable*
ones: the answer contains exactly one of the two candidate answers. Stage 2 runs ragray on up to
``--usable`` of them with every measure and check (as ``bench_evidence``), the taken source marked
gold, and the validity panel v2 reports recovery@1 and AUC of the taken source per measure against
the question–passage and answer–passage cosines, the retrieval rank and random, with CIs.

Resumable: stage-1 answers and stage-2 questions are exported without dataset text to
``benchmarks/results/tracing/`` (committed) and read back by a later session.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_evidence import MEASURES, export, record_settings_added_since, seed_from_export
from benchmarks.machine import REPO, SHARED_DATA, cpu_key, machine_info, save_result

SETS = {"squad": "squad_v11_dev.jsonl", "hotpotqa": "hotpotqa_distractor_dev.jsonl"}
TUNE = 150
SEED = 26
K = 5
BLOCK = 400  # records per block of cases (the first block is what --candidates 400 always built)
EXPORT = REPO / "benchmarks" / "results" / "tracing"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _read(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def cases_for(name: str, path: Path, limit: int | None) -> list[Any]:
    from ragray.data.conflicts import conflict_cases

    records = _read(path)[TUNE:]
    corpus_file = next((c for c in (path.with_name(path.name.replace(".jsonl", ".corpus.jsonl")),
                                    path.with_name(path.name.replace(".jsonl", ".corpus.jsonl.gz"))) if c.is_file()), None)
    corpus = _read(corpus_file) if corpus_file else list({p["id"]: p for r in records for p in r["passages"]}.values())
    # built in fixed blocks of records (each its own substitute pool and seed), so a larger
    # --candidates adds cases and never changes one already answered and exported
    n = len(records) if limit is None else min(limit, len(records))
    cases = []
    for b, start in enumerate(range(0, n, BLOCK)):
        wanted = {f"{r['id']}::conflict" for r in records[start:n]}
        built = conflict_cases(records[start : start + BLOCK], corpus, others=K - 2, seed=SEED + b)
        cases += [c for c in built if c.record["id"] in wanted]
    for c in cases:
        c.record["id"] = f"{name}:{c.record['id']}"
    return cases


def _cpu_tag() -> str:
    return _sha(cpu_key())[:8]


def base_config(path: Path, extra: list[str], runs: Path | None = None) -> Any:
    from ragray.config import load_config

    # fp32 pinned: the sessions that run this get different CPUs, and dtype auto then took bf16 on
    # some and fp32 on others (configs/evidence_frozen.yaml says why; auto is fp32 on every CPU
    # since); the call cache is one per CPU, so an answer decoded here is the answer stage 2 ablates here
    cache = [f"cache.dir={runs / ('cache-' + _cpu_tag())}"] if runs is not None else []
    # the whole answer scored, as every exported case was (the default span became through_gold later)
    return load_config(None, [f"data.path={path}", "retrieval.retriever=given", f"retrieval.top_k={K}",
                              "execution.executor=local", "generation.dtype=float32",
                              "influence.answer_span=full", *cache, *extra])


def decode(cases: list[Any], runs: Path, extra: list[str], exported: Path, done: dict[str, dict[str, Any]],
           desc: str, batch: int = 8) -> dict[str, dict[str, Any]]:
    """The baseline answer of each case on this CPU -> ``done`` (id: {answer_sha, taken, cpu, ...}),
    ``exported`` rewritten after every batch (text-free)."""
    from tqdm import tqdm

    from ragray.data.conflicts import taken_source
    from ragray.data.records import parse_record
    from ragray.generation.prompts import get_template
    from ragray.pipeline.generators import open_generator

    if not cases:
        return done
    here = cpu_key()
    path = runs / "candidates.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(c.record) + "\n" for c in cases), encoding="utf-8")
    cfg = base_config(path, extra, runs)
    template = get_template(cfg.generation.template)
    gen = open_generator(cfg)
    try:
        for i in tqdm(range(0, len(cases), batch), desc=desc, unit="batch"):
            group = cases[i : i + batch]
            qs = [parse_record(c.record) for c in group]
            prompts = [template.build(q.question, q.passages[:K], cfg.generation.system_prompt) for q in qs]
            for c, g in zip(group, gen.generate(prompts)):
                taken = taken_source(g.text, c.answer, c.substitute) if g.ok else None
                # the answer's hash, not its text (answers quote the passages)
                done[c.record["id"]] = {"id": c.record["id"], "answer_sha": _sha(g.text), "error": g.error,
                                        "taken": taken, "original_id": c.original_id, "copy_id": c.copy_id,
                                        "cpu": here}
            exported.parent.mkdir(parents=True, exist_ok=True)
            exported.write_text("".join(json.dumps(r) + "\n" for r in done.values()), encoding="utf-8")
    finally:
        gen.close()
    return done


def stage1(cases: list[Any], runs: Path, extra: list[str], batch: int = 8, root: Path = EXPORT
           ) -> dict[str, dict[str, Any]]:
    """Baseline answers of every candidate (resumed from the export) -> id: {answer, taken}."""
    exported = root / "stage1.jsonl"
    done = {r["id"]: r for r in _read(exported)} if exported.is_file() else {}
    return decode([c for c in cases if c.record["id"] not in done], runs, extra, exported, done,
                  "stage 1 (baselines)", batch)


def stage2(cases: list[Any], answers: dict[str, dict[str, Any]], usable: int, runs: Path,
           extra: list[str], root: Path = EXPORT, chunk: int = 20) -> dict[str, Any]:
    """ragray on stage-1 usable cases in rounds of ``chunk`` questions, each exported when it ends
    (a session ends hard; the next resumes from the export), until ``usable`` of them are scored.

    The truth is read again from the answer stage 2 ablates (``taken`` in the export), and a case
    whose new answer names both or neither candidate is left out (counted), never scored against
    stage 1's label. Since a session on another CPU decodes other answers (measured: ~40% of one
    CPU's usable cases are not usable on another), a case whose stage-1 answer came from another
    CPU is decoded again here first (``recheck.jsonl``, ~5 s) and goes to stage 2 (~45 s) only if
    this CPU's answer still names exactly one candidate."""
    from ragray.data.conflicts import taken_source
    from ragray.pipeline import run_influence

    here = cpu_key()
    # a run directory (and call cache) per CPU, seeded from the export: the finished questions of
    # every CPU are the export's
    out, exported, rechecked_file = runs / f"stage2-{_cpu_tag()}", root / "stage2.jsonl", root / "recheck.jsonl"
    seed_from_export(out, exported)
    by_case = {c.record["id"]: c for c in cases}
    ran = [r["question"]["question_id"] for r in _read(exported)] if exported.is_file() else []
    rechecked = {r["id"]: r for r in _read(rechecked_file)} if rechecked_file.is_file() else {}

    def on_this_cpu(i: str) -> dict[str, Any] | None:
        return answers[i] if answers[i].get("cpu") == here else (
            rechecked[i] if rechecked.get(i, {}).get("cpu") == here else None)

    pool = [c for c in cases if answers.get(c.record["id"], {}).get("taken") and c.record["id"] not in set(ran)]
    rows = [by_case[i].record for i in ran]
    path = runs / "usable.jsonl"
    # the surrogate as stage 2 has fitted it since it began (its masks only; configs/evidence_frozen.yaml)
    cfg = base_config(path, [*MEASURES, "influence.surrogate_fit=masks", *extra], runs)
    record_settings_added_since(out / "config.yaml")
    start = time.perf_counter()

    def truth(rec: dict) -> dict:
        c, answer = by_case[rec["question"]["question_id"]], rec["question"]["baseline_answer"] or ""
        return {"taken": taken_source(answer, c.answer, c.substitute), "answer_sha": _sha(answer)}

    def scored() -> int:
        return sum(1 for r in _read(exported) if r.get("taken")) if exported.is_file() else 0

    skipped = 0
    while pool and scored() < usable:
        todo: list[Any] = []
        size = min(chunk, usable - scored())
        while pool and len(todo) < size:
            group, pool = pool[: size - len(todo)], pool[size - len(todo):]
            decode([c for c in group if on_this_cpu(c.record["id"]) is None], runs, extra, rechecked_file,
                   rechecked, "stage 2 (recheck on this CPU)")
            keep = [c for c in group if on_this_cpu(c.record["id"])["taken"]]
            skipped += len(group) - len(keep)
            todo += keep
        if not todo:
            break
        # the same file grows by a round (the config, and so --resume, stay the same)
        rows += [c.record for c in todo]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        run_influence(cfg, out, resume=(out / "progress.jsonl").is_file(), progress=True)
        export(out, exported, annotate=truth)
    by_id = {r["id"]: by_case[r["id"]] for r in rows}
    return {**stage2_panel(by_id, answers, exported, rows), "skipped_on_recheck": skipped,
            "wall_seconds": time.perf_counter() - start}


def stage2_panel(by_id: dict[str, Any], answers: dict[str, dict[str, Any]], exported: Path,
                 rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The validity panel of the exported stage-2 questions, each scored against the source its
    own (stage-2) answer took."""
    from benchmarks.bench_evidence import tables
    from ragray.metrics.evidence import evidence_panel

    taken = {r["question"]["question_id"]: r for r in _read(exported)}
    qs, ps, cs = tables(exported, {r["id"]: r for r in rows})
    kept = {i for i, r in taken.items() if r.get("taken")}
    gold = {i: (by_id[i].original_id if taken[i]["taken"] == "original" else by_id[i].copy_id) for i in kept}
    qs = [q for q in qs if q["question_id"] in kept]
    ps = [{**p, "is_gold": p["doc_id"] == gold[p["question_id"]]} for p in ps if p["question_id"] in kept]
    cs = [c for c in cs if c["question_id"] in kept]
    return {"n_run": len(taken), "n": len(qs),
            "stage1_answer_reproduced": sum(r.get("answer_sha") == answers[i]["answer_sha"] for i, r in taken.items()),
            "taken_changed": sum(1 for i in kept if taken[i]["taken"] != answers[i]["taken"]),
            "no_longer_usable": len(taken) - len(kept), "panel": evidence_panel(qs, ps, cs)}


def summary(cases: list[Any], answers: dict[str, dict[str, Any]], sources: dict[str, Any]) -> dict[str, Any]:
    """Stage 1's figures: candidates, answered, usable (the answer names exactly one candidate)."""
    asked = [answers[c.record["id"]] for c in cases if c.record["id"] in answers]
    return {
        "seed": SEED, "k": K, "candidates": len(cases), "answered": len(asked),
        "usable": sum(1 for a in asked if a["taken"]),
        "usable_rate": sum(1 for a in asked if a["taken"]) / len(asked) if asked else None,
        "taken_original": sum(1 for a in asked if a["taken"] == "original"),
        "taken_copy": sum(1 for a in asked if a["taken"] == "copy"),
        "per_set": {n: {"candidates": sum(c.record["id"].startswith(f"{n}:") for c in cases),
                        "usable": sum(1 for a in asked if a["taken"] and a["id"].startswith(f"{n}:"))}
                    for n in sources},
    }


def report(candidates: int | None, usable: int, sources: dict[str, Any] | None = None,
           root: Path = EXPORT) -> dict[str, Any]:
    """The results (less ``machine``) from the committed exports alone, no model (``--report``; what
    ``benchmarks/verify.py`` reruns): stage 1's figures, and stage 2's panel so far. The data sets
    rebuild the cases (which passage id is the original, which the copy); no text of theirs enters
    a figure. ``skipped_on_recheck``: the cases rechecked on the stage-2 CPU whose answer there names
    neither or both candidates (``recheck.jsonl``)."""
    sources = {n: SHARED_DATA / f for n, f in SETS.items()} if sources is None else sources
    cases = [c for name, path in sources.items() for c in cases_for(name, Path(path), candidates)]
    answers = {r["id"]: r for r in _read(root / "stage1.jsonl")}
    cases = [c for c in cases if c.record["id"] in answers]
    result = summary(cases, answers, sources)
    if (root / "stage2.jsonl").is_file():
        by_case = {c.record["id"]: c for c in cases}
        ran = [r["question"]["question_id"] for r in _read(root / "stage2.jsonl")]
        by_id = {i: by_case[i] for i in ran}
        panel = stage2_panel(by_id, answers, root / "stage2.jsonl", [c.record for c in by_id.values()])
        rechecked = _read(root / "recheck.jsonl") if (root / "recheck.jsonl").is_file() else []
        result["stage2"] = {**panel, "skipped_on_recheck": sum(1 for r in rechecked if not r.get("taken")),
                            "interim": panel["n"] < usable}
    return result


def main(argv: list[str] | None = None) -> int:
    started = machine_info()["commit"]  # the code that runs is this commit's, whatever HEAD becomes meanwhile
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", nargs="+", choices=list(SETS), default=list(SETS))
    ap.add_argument("--data", type=Path, help="any ragray JSONL with gold ids and answers (instead of --sets)")
    ap.add_argument("--name", default="custom")
    ap.add_argument("--candidates", type=int, default=None, help="at most this many records per set")
    ap.add_argument("--usable", type=int, default=150, help="stage 2 runs until this many cases are scored")
    ap.add_argument("--stage", choices=["1", "2", "both"], default="both")
    ap.add_argument("--runs", type=Path, default=REPO / "runs" / "bench-tracing")
    ap.add_argument("--set", dest="extra", action="append", default=[])
    ap.add_argument("--export", type=Path, default=EXPORT, help="where the text-free exports live (committed)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "tracing.json")
    ap.add_argument("--report", action="store_true",
                    help="no model: the results from the committed exports (stage 2 so far)")
    args = ap.parse_args(argv)
    sources = {args.name: args.data} if args.data else {n: SHARED_DATA / SETS[n] for n in args.sets}
    if args.report:
        result = report(args.candidates, args.usable, sources, args.export)
    else:
        cases = [c for name, path in sources.items() for c in cases_for(name, Path(path), args.candidates)]
        answers = stage1(cases, args.runs, args.extra, root=args.export)
        result = summary(cases, answers, sources)
        if args.stage in ("2", "both"):
            got = stage2(cases, answers, args.usable, args.runs, args.extra, root=args.export)
            result["stage2"] = {**got, "interim": got["n"] < args.usable}
    result["machine"] = machine_info(("torch", "transformers")) | {"commit": started}
    save_result(args.out, result)
    print(json.dumps({k: v for k, v in result.items() if k not in ("stage2", "machine")}, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
