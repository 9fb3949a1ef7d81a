"""Held-out LDS of a ContextCite-style Lasso fitted on 64 random masks, beside ``lds_credit``'s rows.

    python benchmarks/lds_lasso64.py collect --minutes 30 --order hash   # resumable; the model runs
    python benchmarks/lds_lasso64.py report                              # no model: from the records

``benchmarks/lds_credit.py`` ranks per-passage credits on the evidence benchmark's test exports
(``benchmarks/results/evidence/test/frozen``); its Lasso rows fit at most the 24 masks the run
committed. This adds ``lasso_64``: the same Lasso (α 0.01, :func:`ragray.attribution.measures.
lasso_weights`, random masks only) on 64 fresh masks per question, scored on the SAME held-out
subsets ``lds_credit`` evaluates every other row on (:func:`benchmarks.lds_credit.scored`).

Per question (``collect``): its text is rebuilt from ``../shared/data`` as ``bench_evidence`` built
it (the test split's rows, passages shuffled with seed 26; the ``frozen`` part's config, settings
from ``configs/evidence_frozen.yaml``); its passages are the export's, in retrieval order; its prompt
is the run's (template ``short``; ``generation.decline: never``, since the run predates that setting
and its prompts carry no decline instruction; no call cache). The baseline answer is regenerated
(greedy) and scored (``influence.answer_span: full``) under the full context, the empty context and
the 64 masks, all in ONE batched call of ragray's :class:`~ragray.ablation.engine.CallBook` (each
distinct prompt scored once). A mask keeps each passage with probability ½, shown in retrieval order
(as the held-out subsets were), drawn from ``numpy.random.default_rng(int(sha256(question id)[:8],
16))``; masks equal to the full or empty context, or to one of the question's evaluated held-out
subsets, are redrawn, so no held-out subset the LDS is taken on is ever fitted on. With k = 6 there
are only 62 non-trivial subsets, some 25 of them evaluated, so the 64 masks repeat: they cost as
many scoring passes as they have distinct masks (about 30), and the Lasso sees each as often as drawn.

Reproduction: the rescored full and empty contexts must match the export's ``logprob_all`` and
``logprob_none`` within :data:`TOLERANCE` nats and the answer must have the export's
``scored_tokens`` (each record also compares the baseline prompt's token count with the export's:
the prompt is the run's); a question that does not is recorded with ``reproduces: false`` and left out of
every figure (counted). The report also compares the masks the export happened to score in
retrieval order (drop-one arms, held-out subsets not evaluated, top-k removals) with their rescored
log-probs. The exports were measured on several machines (an Intel Xeon, an AMD EPYC,
an H200; ``sessions.jsonl``): each record names the one its question was exported from.

Records (text-free: ids and numbers) are appended per question to
``benchmarks/results/records/lds_lasso64/records.jsonl.gz``; ``collect`` skips recorded questions, so
it resumes. Its order is fixed (``hash``: the questions ``lds_credit`` has a row for, sorted by
sha256 of the question id), so any prefix is a random subset chosen before anything was read.
:func:`compute` recomputes every reported figure from the records and the exports.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import lds_credit  # noqa: E402
from benchmarks.machine import REPO, machine_info  # noqa: E402

RECORDS = REPO / "benchmarks" / "results" / "records" / "lds_lasso64" / "records.jsonl.gz"
#: where the split files and their corpora are written (ignored by git)
RUNS = REPO / "runs" / "lds_lasso64"
#: the exports read (``lds_credit``'s test part) and the ``bench_evidence`` part they were run as
PART = "test/frozen"
N_MASKS = 64
ALPHA = 0.01
#: nats: how far the rescored full and empty contexts may be from the export's
TOLERANCE = 0.05
#: ``lds_credit``'s rows reported beside ``lasso_64``; the first is what ragray prints
ROWS = ("credit_w0.25_printed", "credit_w0", "lasso_k1", "lasso_2k2", "lasso_24")
PRINTED = ROWS[0]
NEW = "lasso_64"
#: overrides on top of the frozen run's config: the run predates ``generation.decline`` (its prompts
#: carry no decline instruction); no call cache, so every answer and score is this machine's
OVERRIDES = ("generation.decline=never", "cache.calls=false")


@dataclass(frozen=True)
class Item:
    """One exported question ``lds_credit`` has a row for: its set and its export record."""

    set: str
    question_id: str
    export: dict[str, Any]

    @property
    def key(self) -> str:
        return f"{self.set}:{self.question_id}"


def seed_of(question_id: str) -> int:
    """The masks' seed: the first 8 hex digits of the question id's sha256."""
    return int(hashlib.sha256(question_id.encode("utf-8")).hexdigest()[:8], 16)


def sample_masks(question_id: str, k: int, n: int = N_MASKS,
                 exclude: Iterable[frozenset[int]] = ()) -> list[frozenset[int]]:
    """``n`` random masks of ``k`` passages (each kept with probability ½, seeded by the question id),
    in draw order; a draw equal to the full or empty context or to one in ``exclude`` is redrawn.
    Masks may repeat (ContextCite draws them independently)."""
    import numpy as np

    full, empty = frozenset(range(k)), frozenset()
    banned = {full, empty, *exclude}
    if len(banned) >= 2**k:
        raise ValueError(f"no mask of {k} passages is left to draw ({len(banned)} excluded)")
    rng = np.random.default_rng(seed_of(question_id))
    out: list[frozenset[int]] = []
    while len(out) < n:
        kept = frozenset(int(i) for i in np.flatnonzero(rng.random(k) < 0.5))
        if kept not in banned:
            out.append(kept)
    return out


def evaluated(export: dict[str, Any]) -> list[frozenset[int]]:
    """The held-out subsets ``lds_credit`` takes the LDS on for this question (empty: it has no row)."""
    got = lds_credit.scored(export)
    return [] if got is None else [s for s, _ in got.ev]


def question_masks(export: dict[str, Any]) -> list[frozenset[int]]:
    """The question's 64 masks: never an evaluated held-out subset (they are training data only)."""
    ids = passage_ids(export)
    return sample_masks(export["question"]["question_id"], len(ids), exclude=evaluated(export))


def passage_ids(export: dict[str, Any]) -> list[str]:
    """The question's passage ids in retrieval order (mask indices index this list)."""
    return [p["passage_id"] for p in sorted(export["passages"], key=lambda p: p["retrieval_rank"])]


def _hash(question_id: str) -> str:
    return hashlib.sha256(question_id.encode("utf-8")).hexdigest()


def items(exports: Iterable[tuple[str, dict[str, Any]]] | None = None) -> list[Item]:
    """Every exported question ``lds_credit`` has a row for, in :func:`_hash` order of its id."""
    got = []
    for where, rec in exports if exports is not None else lds_credit.questions((PART,)):
        if lds_credit.per_question(rec) is not None:
            got.append(Item(where.rsplit("/", 1)[-1], rec["question"]["question_id"], rec))
    return sorted(got, key=lambda it: (_hash(it.question_id), it.set))


# -- records -------------------------------------------------------------------------------------


def load_records(path: Path = RECORDS) -> dict[str, dict[str, Any]]:
    """``set:question id`` -> its record (the last written wins)."""
    out: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return out
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                r = json.loads(line)
                out[f"{r['set']}:{r['question_id']}"] = r
    return out


def append_record(record: dict[str, Any], path: Path = RECORDS) -> None:
    """Append one record (its own gzip member, so a run killed later loses nothing written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "at", encoding="utf-8", compresslevel=9) as fh:
        fh.write(json.dumps(record, separators=(",", ":"), sort_keys=True) + "\n")


def reproduces(record: dict[str, Any], tolerance: float = TOLERANCE) -> bool:
    """The answer has the export's token count and full and empty are within ``tolerance`` nats."""
    def close(a: float | None, b: float | None) -> bool:
        return a is not None and b is not None and abs(a - b) <= tolerance

    return (record["scored_tokens"] == record["scored_tokens_exported"]
            and close(record["logprob_all"], record["logprob_all_exported"])
            and close(record["logprob_none"], record["logprob_none_exported"]))


# -- the model run --------------------------------------------------------------------------------


class Measurer:
    """Rebuilds questions' text and prompts as ``bench_evidence``'s frozen test part did and scores
    them on one generator (loaded on the first question)."""

    def __init__(self, runs: Path = RUNS) -> None:
        self.runs = runs
        self._generator: Any = None
        self._sets: dict[str, tuple[Any, dict[str, Any], dict[str, Any]]] = {}
        self._machine = machine_info(("torch", "transformers"))
        from benchmarks.bench_evidence import DATASETS, export_path, machines

        #: set -> question id -> the machine its export was measured on (``sessions.jsonl``)
        self._exported_on = {name: {qid: label for label, ids in machines(export_path("test", "frozen", name)).items()
                                    for qid in ids} for name in DATASETS}

    def config(self, name: str, path: Path) -> Any:
        """The frozen test part's config for set ``name`` with data ``path`` (``bench_evidence.config``
        with the frozen settings and the part's own settings), plus :data:`OVERRIDES`."""
        from benchmarks.bench_evidence import DATASETS, EXECUTION, MEASURES, PARTS, TOP_K, _frozen
        from ragray.config import load_config

        frozen = [f"{k}={v}" for k, v in _frozen(REPO / "configs" / "evidence_frozen.yaml").items()]
        return load_config(None, [f"data.path={path}", "retrieval.retriever=bm25", f"retrieval.top_k={TOP_K}",
                                  *DATASETS[name][1], *EXECUTION, *frozen, *MEASURES, *PARTS["frozen"][2],
                                  *OVERRIDES])

    def _set(self, name: str) -> tuple[Any, dict[str, Any], dict[str, Any]]:
        """Set ``name``'s config, questions by id and passages by id (the retrieval scope's)."""
        if name not in self._sets:
            from benchmarks.bench_evidence import DATASETS, PARTS, split_file
            from benchmarks.machine import SHARED_DATA
            from ragray.data import load_dataset
            from ragray.data.chunking import chunk_passages

            first, last, _ = PARTS["frozen"]
            path, _ = split_file(SHARED_DATA / DATASETS[name][0], name, "test", self.runs, None, (first, last))
            cfg = self.config(name, path)
            dataset = load_dataset(cfg.data)
            questions = {q.id: q for q in dataset.questions}
            corpus: dict[str, Any] = {}
            if cfg.retrieval.scope == "global":
                corpus = {p.id: p for p in chunk_passages(dataset.global_corpus(), cfg.chunking, dataset.documents)}
            self._sets[name] = (cfg, questions, corpus)
        return self._sets[name]

    def generator(self, cfg: Any) -> Any:
        if self._generator is None:
            from ragray.pipeline.generators import open_generator

            self._generator = open_generator(cfg)
        return self._generator

    def __call__(self, item: Item) -> dict[str, Any]:
        from ragray.ablation.engine import CallBook
        from ragray.ablation.span import answer_span
        from ragray.data.chunking import chunk_passages
        from ragray.generation.prompts import get_template, system_message

        cfg, questions, corpus = self._set(item.set)
        q = questions[item.question_id]
        if cfg.retrieval.scope == "per_question":
            corpus = {p.id: p for p in chunk_passages(q.passages, cfg.chunking, False)}
        ids = passage_ids(item.export)
        passages = [corpus[i] for i in ids]
        template = get_template(cfg.generation.template)
        system = system_message(template, cfg.generation.system_prompt, cfg.generation.decline)

        def build(kept: Iterable[int]) -> Any:
            return template.build(q.question, [passages[i] for i in sorted(kept)], system)

        k = len(ids)
        masks = question_masks(item.export)
        gen = self.generator(cfg)
        start = time.perf_counter()
        book = CallBook(gen)
        (baseline,) = book.generate([build(range(k))])
        if not baseline.ok:
            raise RuntimeError(f"{item.key}: the baseline failed: {baseline.error}")
        answer = answer_span(cfg.influence.answer_span)(baseline.text, q.answers)
        contexts = [frozenset(range(k)), frozenset(), *masks]
        lps = book.logprobs([build(c) for c in contexts], [answer] * len(contexts))
        seconds = time.perf_counter() - start
        eq = item.export["question"]
        base_call = next((c for c in item.export.get("calls", []) if c["arm"] == "baseline"), {})
        record = {
            "question_id": item.question_id, "set": item.set, "part": PART, "k": k, "passage_ids": ids,
            "scored_tokens": gen.answer_length(build(range(k)), answer),
            "scored_tokens_exported": eq.get("scored_tokens"),
            "prompt_tokens": baseline.prompt_tokens, "prompt_tokens_exported": base_call.get("prompt_tokens"),
            "completion_tokens": baseline.completion_tokens,
            "completion_tokens_exported": base_call.get("completion_tokens"),
            "logprob_all": lps[0], "logprob_all_exported": eq.get("logprob_all"),
            "logprob_none": lps[1], "logprob_none_exported": eq.get("logprob_none"),
            "tolerance": TOLERANCE, "seed": seed_of(item.question_id),
            "masks": [{"kept": sorted(m), "logprob": lp} for m, lp in zip(masks, lps[2:])],
            "distinct_masks": len(set(masks)), "score_passes": book.score_passes, "seconds": seconds,
            "exported_on": self._exported_on.get(item.set, {}).get(item.question_id),
            "cpu": self._machine["cpu"], "cores": self._machine["cores"], "commit": self._machine["commit"],
            "torch": self._machine["versions"].get("torch"),
            "transformers": self._machine["versions"].get("transformers"),
            "dtype": gen.precision, "timestamp_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        record["reproduces"] = reproduces(record)
        return record


def collect(minutes: float, *, limit: int | None = None, path: Path = RECORDS,
            measure: Callable[[Item], dict[str, Any]] | None = None,
            todo: Sequence[Item] | None = None, say: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Measure the questions not yet recorded, in :func:`items` order, appending each record as it
    finishes; no question starts after ``minutes``; at most ``limit`` questions. Returns the new records."""
    start = time.monotonic()
    done = load_records(path)
    pending = [it for it in (todo if todo is not None else items()) if it.key not in done]
    if limit is not None:
        pending = pending[:limit]
    say(f"{len(done)} questions recorded; {len(pending)} to measure in this session")
    measure = measure or Measurer()
    new = []
    for it in pending:
        if time.monotonic() - start >= minutes * 60:
            say(f"stopping: {minutes:g} minutes passed")
            break
        record = measure(it)
        append_record(record, path)
        new.append(record)
        say(f"{it.key}: reproduces {record['reproduces']} (full {record['logprob_all']:.4f} vs "
            f"{record['logprob_all_exported']:.4f}, empty {record['logprob_none']:.4f} vs "
            f"{record['logprob_none_exported']:.4f}, tokens {record['scored_tokens']} vs "
            f"{record['scored_tokens_exported']}, prompt tokens {record['prompt_tokens']} vs "
            f"{record['prompt_tokens_exported']}), {record['score_passes']} passes, {record['seconds']:.1f} s")
    return new


# -- the report -----------------------------------------------------------------------------------


def lasso_64(record: dict[str, Any], export: dict[str, Any]) -> float | None:
    """``lasso_64``'s LDS on ``lds_credit``'s held-out subsets of the question (None: no row or no fit)."""
    from ragray.attribution.measures import lasso_weights

    got = lds_credit.scored(export)
    if got is None:
        return None
    w = lasso_weights(got.k, [(frozenset(m["kept"]), m["logprob"]) for m in record["masks"]], ALPHA)
    return None if any(math.isnan(v) for v in w) else lds_credit.additive_lds(w, got.ev)


def exported_in_order(export: dict[str, Any]) -> dict[frozenset[int], float]:
    """The contexts the export scored with their passages in retrieval order, as the masks are shown:
    the drop-one arms, the closed book, the held-out and top-k subsets (not the surrogate's masks,
    which were shown shuffled) -> log-prob."""
    ids = passage_ids(export)
    full, q = frozenset(range(len(ids))), export["question"]
    ps = sorted(export["passages"], key=lambda p: p["retrieval_rank"])
    out = {full - {i}: q["logprob_all"] - p["logprob_drop"] for i, p in enumerate(ps) if p["logprob_drop"] is not None}
    for sub in export["subsets"]:
        if sub["purpose"] in ("heldout", "top_k", "closed_book") and sub["logprob"] is not None:
            out.setdefault(frozenset(ids.index(x) for x in sub["kept_passage_ids"]), sub["logprob"])
    return out


def compute(path: Path = RECORDS, exports: Iterable[tuple[str, dict[str, Any]]] | None = None) -> dict[str, Any]:
    """Every reported figure from the records and the exports: on the recorded questions that
    reproduce, the mean LDS of ``lasso_64`` and of ``lds_credit``'s :data:`ROWS` (bootstrap 95%
    intervals), and the paired difference :data:`PRINTED` − ``lasso_64``; the counts, and checks that
    each record's masks are the seeded draw and none is an evaluated held-out subset."""
    records = load_records(path)
    by_key = {it.key: it.export for it in items(exports)}
    rows: dict[str, dict[str, float | None]] = {}
    failed, unknown, masks_ok, deltas = [], [], True, {"logprob_all": 0.0, "logprob_none": 0.0}
    shared = {"contexts": 0, "max_abs_difference": 0.0}
    for key, r in sorted(records.items()):
        export = by_key.get(key)
        if export is None:
            unknown.append(key)
            continue
        expected = question_masks(export)
        drawn = [frozenset(m["kept"]) for m in r["masks"]]
        masks_ok &= drawn == expected and not set(drawn) & set(evaluated(export))
        if not r["reproduces"]:
            failed.append(key)
            continue
        for name in deltas:
            deltas[name] = max(deltas[name], abs(r[name] - r[f"{name}_exported"]))
        known = exported_in_order(export)
        for kept, lp in {frozenset(m["kept"]): m["logprob"] for m in r["masks"]}.items():
            if kept in known:
                shared["contexts"] += 1
                shared["max_abs_difference"] = max(shared["max_abs_difference"], abs(lp - known[kept]))
        row = lds_credit.per_question(export) or {}
        rows[key] = {**{name: row.get(name) for name in ROWS}, NEW: lasso_64(r, export)}
    means = {}
    for name in (NEW, *ROWS):
        vals = [row[name] for row in rows.values() if row.get(name) is not None]
        means[name] = lds_credit.summary(vals) if vals else {"n": 0}
    return {
        "records": len(records), "reproduce": len(rows), "do_not_reproduce": len(failed),
        "not_reproducing": failed, "not_in_exports": unknown, "tolerance": TOLERANCE,
        "max_abs_difference_reproducing": deltas, "masks_are_the_seeded_draw": masks_ok,
        "masks_the_export_scored": shared,
        "prompt_tokens_as_exported": sum(r.get("prompt_tokens") == r.get("prompt_tokens_exported")
                                         for r in records.values()),
        "lds": means,
        "printed_minus_lasso_64": lds_credit.paired(rows, PRINTED, NEW) if len(rows) > 1 else {"n": len(rows)},
        "per_question": rows,
        "seconds_per_question": _seconds(records.values()),
    }


def _seconds(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Mean seconds and scoring passes per question, per CPU (timings are only comparable within one)."""
    out: dict[str, Any] = {}
    for r in records:
        cell = out.setdefault(r["cpu"], {"questions": 0, "seconds": 0.0, "passes": 0})
        cell["questions"] += 1
        cell["seconds"] += r["seconds"]
        cell["passes"] += r["score_passes"]
    return {cpu: {"questions": c["questions"], "mean_seconds": c["seconds"] / c["questions"],
                  "mean_passes": c["passes"] / c["questions"]} for cpu, c in out.items()}


def report_lines(result: dict[str, Any]) -> Iterator[str]:
    yield (f"{result['records']} questions recorded; {result['reproduce']} reproduce (full and empty within "
           f"{result['tolerance']} nats, same answer length), {result['do_not_reproduce']} do not (left out)")
    if result["not_in_exports"]:
        yield f"records of questions the exports do not give a row: {', '.join(result['not_in_exports'])}"
    d = result["max_abs_difference_reproducing"]
    yield f"largest |rescored - exported| on those: full {d['logprob_all']:.4f}, empty {d['logprob_none']:.4f} nats"
    m = result["masks_the_export_scored"]
    yield (f"distinct masks the export also scored (in retrieval order): {m['contexts']}, largest |difference| "
           f"{m['max_abs_difference']:.4f} nats")
    yield (f"prompts of the export's length (baseline prompt tokens): {result['prompt_tokens_as_exported']} of "
           f"{result['records']}")
    yield f"masks are the seeded draw, none an evaluated held-out subset: {result['masks_are_the_seeded_draw']}"
    yield "held-out LDS on the same subsets (mean [95% bootstrap CI], n):"
    for name, s in result["lds"].items():
        yield (f"  {name:22s} {s['mean']:.3f} [{s['ci95'][0]:.3f}, {s['ci95'][1]:.3f}] n={s['n']}" if s["n"]
               else f"  {name:22s} no questions")
    p = result["printed_minus_lasso_64"]
    if p.get("n", 0) > 1 and "mean" in p:
        yield f"paired {PRINTED} - {NEW}: {p['mean']:+.3f} [{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}] n={p['n']}"
    for cpu, c in result["seconds_per_question"].items():
        yield (f"seconds per question on {cpu}: {c['mean_seconds']:.1f} ({c['mean_passes']:.1f} scoring passes), "
               f"n={c['questions']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="score questions not yet recorded (the model runs)")
    c.add_argument("--minutes", type=float, required=True, help="start no question after this many minutes")
    c.add_argument("--order", choices=["hash"], default="hash",
                   help="hash: sha256 of the question id (any prefix is a random subset)")
    c.add_argument("--limit", type=int, default=None, help="at most this many questions")
    sub.add_parser("report", help="the figures from the records (no model)")
    args = ap.parse_args(argv)
    if args.command == "collect":
        collect(args.minutes, limit=args.limit)
        return 0
    print("\n".join(report_lines(compute())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
