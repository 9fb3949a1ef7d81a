"""Run the shared-evidence sets under the evidence protocol and keep per-item records.

    python benchmarks/shared_evidence_collect.py --split tune --per-set 50 --sets offtopic_squad offtopic_hotpot
    python benchmarks/shared_evidence_collect.py --split test --batch 5 --rounds 40   # fresh items, test
    python benchmarks/shared_evidence_collect.py --split reread --per-set 29 --sets bridge_hotpot   # not fresh

Items come from :func:`benchmarks.bench_shared_evidence.build` (sets built from ``../shared/data``
at run time). Each item's split is :func:`benchmarks.protocol.split_of` of its id: the items read
before the protocol are tune for good; fresh items are tune or test by hash. ``--split test`` runs
fresh test items round-robin over the sets (``--batch`` per set per round, twice that for the
off-topic sets), so a session that stops leaves every set at about the same size; each batch ends
with its records written. ``--split reread`` runs read-before items past the tune choice as
``test_not_fresh`` (the bridge set has no fresh items); ``--split tune_next`` runs fresh items whose
hash says tune, kept as ``tune_next`` for the next tune round (no current figure reads them);
``--split test3`` runs version 3's test: hash-test items no record holds (never run, never read);
``--split test4`` runs version 4's the same way, with ``--dup-batch`` items per duplicate set per round;
``--split test5`` and ``--split test6`` run versions 5's and 6's as version 4's.

Per item: one ``ragray.run`` at defaults (``generation.dtype: float32`` pinned, so figures do not
depend on the CPU; everything else, the answer span included, as a user gets it), then the edit
test (:mod:`ragray.pipeline.edit_test`, the code ``influence.edit_test`` runs): one generation per
passage holding the answer, with the answer replaced there by a same-kind substitute, and one with
every such passage edited where there are two or more; plus the unedited prompt, which must
reproduce the run's answer (a check that the edit prompts are the run's).

Records (text-free: ids, roles, log-probs, marks, outcomes; no question, passage or answer text)
go to ``benchmarks/results/records/shared_evidence/<set>.jsonl.gz``, appended per batch (a later
record of an item replaces an earlier one on reading).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import REPO, machine_info  # noqa: E402
from benchmarks.protocol import read_before, split_of  # noqa: E402

BENCHMARK = "shared_evidence"
RECORDS = REPO / "benchmarks" / "results" / "records" / BENCHMARK
RUNS = REPO / "runs" / "shared_evidence_v2"
#: the pinned setting: float32, so the figures do not depend on the CPU's bf16 support
SETTINGS = {"generation.dtype": "float32"}
#: the off-topic sets get this many times ``--batch`` per round: gold recall on right,
#: context-dependent answers (about one item in five) is the figure that needs the most items
OFFTOPIC_WEIGHT = 2
#: ``--split reread``: read-before items from this index on (the first 24 tuned the bar) are run as
#: ``test_not_fresh`` — the bridge set has no fresh items (the shared HotpotQA file holds 77 bridge
#: questions with both supports, all read before the protocol)
REREAD_FROM = 24
#: ``--split test3`` (version 3): the off-topic sets get 1.5 x more again (3 x ``--batch`` per round), as
#: the figures version 3 must settle (false alarms and gold recall on right answers) come from them
TEST3_WEIGHT = 1.5
#: the fresh test splits: hash-test items no record holds when they are run (never run, never read)
FRESH_TESTS = ("test3", "test4", "test5", "test6")


def records_path(name: str) -> Path:
    return RECORDS / f"{name}.jsonl.gz"


def load_records(name: str) -> list[dict[str, Any]]:
    """A set's records, one per item (the last written wins), in the order first written."""
    path = records_path(name)
    if not path.exists():
        return []
    out: dict[str, dict[str, Any]] = {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                out[r["id"]] = r
    return list(out.values())


def append_records(name: str, records: Sequence[dict[str, Any]]) -> None:
    path = records_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "at", encoding="utf-8", compresslevel=9) as f:
        for r in records:
            f.write(json.dumps(r, separators=(",", ":"), sort_keys=True) + "\n")


def _finite(x: Any) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def export(name: str, items: Sequence[dict[str, Any]], out: Path, edits: dict[str, dict[str, Any]],
           before: frozenset[str], split: str | None = None) -> list[dict[str, Any]]:
    """Text-free records of one finished batch: per question and passage, what the run printed and
    every context it scored."""
    import pyarrow.parquet as pq

    from benchmarks.bench_shared_evidence import _answer_elsewhere
    from ragray.data.conflicts import _contains
    from ragray.text.normalize import normalize_answer

    qs = {q["question_id"]: q for q in pq.read_table(out / "questions.parquet").to_pylist()}
    ps: dict[str, list[dict[str, Any]]] = {}
    for p in pq.read_table(out / "passages.parquet").to_pylist():
        ps.setdefault(p["question_id"], []).append(p)
    subs: dict[str, list[dict[str, Any]]] = {}
    if (out / "subsets.parquet").exists():
        for s in pq.read_table(out / "subsets.parquet").to_pylist():
            subs.setdefault(s["question_id"], []).append(s)
    records = []
    for item in items:
        q = qs.get(item["id"])
        if q is None:
            continue
        rows = sorted(ps.get(item["id"], []), key=lambda p: p["retrieval_rank"])
        ids = [p["passage_id"] for p in rows]
        text = {p["id"]: f"{p['title']} {p['text']}" for p in item["passages"]}
        roles = item["meta"]["roles"]
        full = list(range(len(ids)))
        contexts: dict[tuple[int, ...], float] = {}
        if q.get("logprob_all") is not None:
            contexts[tuple(full)] = q["logprob_all"]
            for i, p in enumerate(rows):
                if p["logprob_drop"] is not None:
                    contexts.setdefault(tuple(j for j in full if j != i), q["logprob_all"] - p["logprob_drop"])
        for s in subs.get(item["id"], []):
            if s["logprob"] is not None:
                contexts.setdefault(tuple(sorted(ids.index(x) for x in s["kept_passage_ids"])), s["logprob"])
        answer = q.get("baseline_answer") or ""
        records.append({
            "id": item["id"], "set": name, "split": split or split_of(item["id"], before),
            "answer_sha1": hashlib.sha1(normalize_answer(answer).encode()).hexdigest()[:12],
            "answer_correct": q.get("answer_correct"), "context_dependent": q.get("context_dependent"),
            "answer_elsewhere": _answer_elsewhere(item), "state": q.get("state"), "misaligned": q.get("misaligned"),
            "error": q.get("error"), "n_calls": q.get("n_calls"), "seconds": q.get("seconds"),
            "answer_span": q.get("answer_span"), "scored_tokens": q.get("scored_tokens"),
            "logprob_all": q.get("logprob_all"), "logprob_none": q.get("logprob_none"),
            "noise": _finite(q.get("noise_scale")), "bar": _finite(q.get("used_bar")),
            "passages": [{
                "id": p["passage_id"], "rank": p["retrieval_rank"], "role": roles.get(p["passage_id"], "distractor"),
                "holds_answer": any(_contains(text.get(p["passage_id"], ""), a) for a in item["answers"] if a),
                "logprob_drop": _finite(p["logprob_drop"]), "keep_alone_gain": _finite(p.get("keep_alone_gain")),
                "credit": _finite(p.get("credit")), "influence": _finite(p["influence"]), "used": p.get("used"),
                "group": p.get("group"), "relation": p.get("relation"),
                "answer_similarity": _finite(p.get("answer_similarity")),
                "question_similarity": _finite(p.get("question_similarity")),
                "retrieval_score": _finite(p.get("retrieval_score"))} for p in rows],
            "contexts": [[list(k), v] for k, v in sorted(contexts.items(), key=lambda kv: (len(kv[0]), kv[0]))],
            "edits": edits.get(item["id"]),
        })
    return records


def run_edits(items: Sequence[dict[str, Any]], out: Path, pool: Sequence[str], generator: Any, config: Any
              ) -> dict[str, dict[str, Any]]:
    """The edit test of each finished question (:func:`ragray.pipeline.edit_test.edit_test`, the
    one ``ragray run`` runs with ``influence.edit_test``): outcome per case (``substitute`` /
    ``original`` / ``both`` / ``neither``), the edited passages as retrieval ranks (0-based)."""
    import pyarrow.parquet as pq

    from ragray.generation.prompts import get_template, system_message
    from ragray.pipeline.edit_test import edit_test
    from ragray.types import Passage

    template = get_template(config.generation.template)
    system = system_message(template, config.generation.system_prompt, "never")
    qs = {q["question_id"]: q for q in pq.read_table(out / "questions.parquet").to_pylist()}
    order: dict[str, list[str]] = {}
    for p in sorted(pq.read_table(out / "passages.parquet").to_pylist(), key=lambda p: p["retrieval_rank"]):
        order.setdefault(p["question_id"], []).append(p["passage_id"])
    result: dict[str, dict[str, Any]] = {}
    for item in items:
        q = qs.get(item["id"])
        if q is None or q.get("error") or item["id"] not in order:
            continue
        by_id = {p["id"]: p for p in item["passages"]}
        ids = order[item["id"]]
        shown = [Passage(id=pid, text=by_id[pid]["text"], title=by_id[pid].get("title") or "") for pid in ids]
        test = edit_test(item["question"], item["answers"], shown, pool, generator, template, system,
                         seed=item["id"], run_answer=q.get("baseline_answer") or "")
        if not test.cases:
            result[item["id"]] = {"cases": []}
            continue
        result[item["id"]] = {
            "kind": test.kind, "unedited": test.unedited, "reproduces_run": test.reproduces_run,
            "cases": [{"edited": sorted(ids.index(pid) for pid in c.edited), "every_copy": c.every_copy,
                       "outcome": c.outcome} for c in test.cases]}
    return result


def _items_for(name: str, split: str, per_set: int, start: int, before: frozenset[str]) -> Iterator[dict[str, Any]]:
    from benchmarks.bench_shared_evidence import build

    if split in ("tune", "reread"):  # read-before items: the first ones tune the bar, later ones are re-read
        yield from [i for i in build(name, len([x for x in before if x.startswith(name + ":")])) if i["id"] in before][
            start: start + per_set]
        return
    n = len([x for x in before if x.startswith(name + ":")])
    if split in FRESH_TESTS:  # versions 3 and 4: hash-test items no record holds (never run, never read), in build order
        yield from [i for i in build(name, 10**6)[n:] if split_of(i["id"], before) == "test"]
        return
    want = "tune" if split == "tune_next" else "test"  # tune_next: fresh hash-tune items for the next tune round
    got = 0
    size = n + 4 * (start + per_set) + 40
    for item in build(name, size)[n:]:
        if split_of(item["id"], before) != want:
            continue
        if got >= start:
            yield item
        got += 1
        if got >= start + per_set:
            return


def answer_pool(name: str) -> list[str]:
    """Every gold answer of the set's source data (substitutes come from here)."""
    from benchmarks.bench_shared_evidence import _jsonl
    from benchmarks.machine import SHARED_DATA

    src = "squad_v11_dev.jsonl" if name.endswith("_squad") else "hotpotqa_distractor_dev.jsonl"
    return sorted({a for r in _jsonl(SHARED_DATA / src) for a in r["answers"][:1] if a and a.lower() not in ("yes", "no")})


def collect(names: Sequence[str], split: str, per_set: int, rounds: int, batch: int, dup_batch: int | None = None) -> None:
    import ragray
    from benchmarks.bench_shared_evidence import SETS
    from ragray.config import load_config
    from ragray.pipeline.generators import open_generator

    before = read_before(BENCHMARK)
    config = load_config(values=SETTINGS)
    generator = open_generator(config)
    pools = {name: answer_pool(name) for name in names}
    done = {name: {r["id"] for r in load_records(name)} for name in names}
    log = RECORDS / "sessions.jsonl"
    for r in range(rounds):
        for name in names:
            assert name in SETS
            size = batch * (OFFTOPIC_WEIGHT if name.startswith("offtopic_") else 1)
            size = int(size * (TEST3_WEIGHT if split in FRESH_TESTS and name.startswith("offtopic_") else 1))
            if split in ("test4", "test5", "test6") and dup_batch is not None and not name.startswith("offtopic_"):
                size = dup_batch
            start = r * size if split in ("test", "tune_next") else REREAD_FROM if split == "reread" else 0
            want = size if split in ("test", "tune_next") else per_set
            items = [i for i in _items_for(name, split, want, start, before) if i["id"] not in done[name]]
            items = items[:size] if split in FRESH_TESTS else items
            if not items:
                continue
            out = RUNS / f"{name}.{split}.{items[0]['id'].split(':', 1)[1]}"
            began = time.perf_counter()
            ragray.run(items, out=out, resume=(out / "progress.jsonl").exists(), settings=SETTINGS,
                       top_k=max(len(i["passages"]) for i in items), history=False, progress=False)
            edits = run_edits(items, out, pools[name], generator, config)
            recs = export(name, items, out, edits, before,
                          {"reread": "test_not_fresh", "tune_next": "tune_next", **{t: t for t in FRESH_TESTS}}.get(split))
            append_records(name, recs)
            done[name] |= {x["id"] for x in recs}
            seconds = time.perf_counter() - began
            with log.open("a") as f:
                f.write(json.dumps({"set": name, "split": split, "items": len(recs), "seconds": round(seconds, 1),
                                    **{k: machine_info(("torch", "transformers"))[k] for k in ("cpu", "commit")}}) + "\n")
            print(f"{name} {split}: {len(recs)} items in {seconds:.0f} s", flush=True)
        if split not in ("test", "tune_next", *FRESH_TESTS):
            return


def main() -> None:
    from benchmarks.bench_shared_evidence import SETS

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", choices=["tune", "test", "reread", "tune_next", *FRESH_TESTS], required=True)
    ap.add_argument("--per-set", type=int, default=15, help="tune: items per set")
    ap.add_argument("--batch", type=int, default=5, help="test: items per set per round")
    ap.add_argument("--rounds", type=int, default=1, help="test: rounds")
    ap.add_argument("--dup-batch", type=int, default=None, help="test4 to test6: items per duplicate set per round")
    ap.add_argument("--sets", nargs="*", default=list(SETS), choices=SETS)
    args = ap.parse_args()
    collect(args.sets, args.split, args.per_set, args.rounds, args.batch, args.dup_batch)


if __name__ == "__main__":
    main()
