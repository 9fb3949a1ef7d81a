"""The worked example of docs/trust.md: demo question 1 with its gold passage copied, on the
packaged SmolLM2 in fp32 at defaults (the case ``tests/attribution/test_shared_evidence_real.py``
checks).

    python benchmarks/lighthouse_example.py run       # the model: writes the record
    python benchmarks/lighthouse_example.py publish   # the docs/trust.md table, from the record

The record (``benchmarks/results/records/lighthouse.json``) keeps every scored context; the table
is ragray's ``fit_at`` (``fit_interactions`` at the defaults) on it, so ``benchmarks/verify.py`` rebuilds it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import REPO, machine_info, write_block  # noqa: E402

RECORD = REPO / "benchmarks" / "results" / "records" / "lighthouse.json"
DOCS = REPO / "docs" / "trust.md"
BEGIN = "<!-- lighthouse:begin (written by: python benchmarks/lighthouse_example.py publish) -->"
END = "<!-- lighthouse:end -->"
ORDER = ("demo-p001", "demo-p057", "demo-p045", "demo-p048", "demo-p068")


def run() -> dict[str, Any]:
    from importlib import resources

    import ragray

    rows = [json.loads(x) for x in resources.files("ragray.demo").joinpath("demo.jsonl").read_text().splitlines() if x.strip()]
    q = rows[0]
    by_id = {p["id"]: p for p in q["passages"]}
    passages = [by_id[i] for i in ORDER]
    copy = dict(passages[0], id="demo-p001-copy")
    a = ragray.attribute(q["question"], [*passages, copy], answers=q["answers"], settings={"generation.dtype": "float32"},
                         progress=False)
    table = a.run.passages.to_pandas().sort_values("retrieval_rank")
    ids = list(table["passage_id"])
    qrow = a.run.questions[0]
    full = list(range(len(ids)))
    contexts = {tuple(full): float(qrow["logprob_all"])}
    for i, d in enumerate(table["logprob_drop"]):
        contexts[tuple(j for j in full if j != i)] = float(qrow["logprob_all"] - d)
    for s in a.run.subsets:
        if s["logprob"] is not None:
            contexts.setdefault(tuple(sorted(ids.index(x) for x in s["kept_passage_ids"])), float(s["logprob"]))
    record = {"question": q["question"], "answer": a.answer, "answer_correct": bool(a.correct),
              "passages": [{"id": pid, "title": t} for pid, t in zip(ids, table["title"])],
              "contexts": [[list(k), v] for k, v in sorted(contexts.items(), key=lambda kv: (len(kv[0]), kv[0]))],
              "printed": {"used": [bool(u) for u in table["used"]], "credit": [float(c) for c in table["credit"]]},
              "machine": machine_info(("torch", "transformers"))}
    RECORD.parent.mkdir(parents=True, exist_ok=True)
    RECORD.write_text(json.dumps(record, indent=1) + "\n")
    return record


def block(record: dict[str, Any]) -> str:
    """The table: per passage, kept alone, left out, credit and the used mark, from the record."""
    from ragray.attribution.interactions import fit_at
    from ragray.config import load_config

    k = len(record["passages"])
    fit = fit_at(load_config().influence, k, [(frozenset(s), v) for s, v in record["contexts"]])
    out = ["| passage | kept alone: gain over no passages (nats) | left out: loss (nats) | credit (nats) | influence | used |",
           "|---|---|---|---|---|---|"]
    for i, p in enumerate(record["passages"]):
        used = f"yes, group {fit.group[i]}" if fit.used[i] and fit.group[i] else "yes" if fit.used[i] else "no"
        name = f"{p['title']} (copy)" if p["id"].endswith("-copy") else p["title"]
        out.append(f"| {name} | {fit.keep_alone[i]:.2f} | {fit.drop_one[i]:.2f} | {fit.credit[i]:.2f} | "
                   f"{fit.influence[i]:.2f} | {used} |")
    out += ["", f"The passages together make the answer {fit.gain:.1f} nats likelier than none (`v(all) − v(none)`); "
            f"the question's jitter σ is {fit.noise:.2f} nats and its bar {fit.bar:.2f} nats. Answer: "
            f"\"{record['answer'].strip()}\" ({'right' if record['answer_correct'] else 'wrong'}); "
            f"{record['machine']['cpu']}, `benchmarks/results/records/lighthouse.json`."]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("action", choices=["run", "publish"])
    args = ap.parse_args()
    record = run() if args.action == "run" else json.loads(RECORD.read_text())
    print(block(record))
    write_block(DOCS, BEGIN, END, block(record))


if __name__ == "__main__":
    main()
