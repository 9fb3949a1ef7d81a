"""Does the decline instruction help a model decline, and what does it cost answerable questions?
(issue 44: ``generation.decline``)

    python benchmarks/bench_declines.py [--n 60]

Built at run time from ``../shared/data`` (SQuAD v1.1 dev; no text reaches the repo): ``n``
answerable questions, each with its own paragraph, and ``n`` unanswerable ones — other SQuAD
questions shown a paragraph of another article (the known truth: the passage cannot answer them,
as in SQuAD 2.0). Every prompt is generated twice with the packaged SmolLM2 (fp32), without and
with ragray's decline instruction, greedy. Reported: right answers on the answerable questions
(gold containment) with each prompt and the paired exact McNemar p of the difference; the share of
unanswerable questions declined (ragray's detector) with each prompt; and how often the detector
fires on the answerable answers. Writes ``benchmarks/results/declines.json`` (the committed run
kept only the counts: ``benchmarks/results/archive/declines.json``, not re-checkable).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import REPO, SHARED_DATA, machine_info, save_result

RESULT = REPO / "benchmarks" / "results" / "declines.json"


def items(n: int) -> tuple[list[dict], list[dict]]:
    rows = [json.loads(line) for line in (SHARED_DATA / "squad_v11_dev.jsonl").read_text(encoding="utf-8").splitlines()]
    rng = random.Random(44)
    rng.shuffle(rows)
    answerable = rows[:n]
    unanswerable = []
    for r in rows[n: 2 * n]:
        other = next(x for x in rows[2 * n:][rng.randrange(len(rows) - 2 * n):] + rows[2 * n:]
                     if x["passages"][0]["title"] != r["passages"][0]["title"])
        unanswerable.append({**r, "answers": [], "passages": other["passages"]})
    return answerable, unanswerable


def mcnemar(b: int, c: int) -> float:
    """Exact two-sided McNemar p on b and c discordant pairs."""
    from scipy.stats import binomtest

    return 1.0 if b + c == 0 else float(binomtest(b, b + c, 0.5).pvalue)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=60)
    args = ap.parse_args()
    from ragray.config import load_config
    from ragray.generation import build_generator
    from ragray.generation.prompts import get_template, system_message
    from ragray.metrics.answers import contains_gold
    from ragray.metrics.declines import is_decline
    from ragray.types import Passage

    answerable, unanswerable = items(args.n)
    cfg = load_config(None, ["generation.dtype=float32"])
    gen = build_generator(cfg.generation)
    template = get_template(cfg.generation.template)
    out: dict = {}
    began = time.perf_counter()
    for decline in ("never", "always"):
        system = system_message(template, None, decline)

        def answers(rows: list[dict]) -> list[str]:
            prompts = [template.build(r["question"], [Passage(p["id"], p["text"], p.get("title") or "")
                                                      for p in r["passages"]], system) for r in rows]
            return [g.text for g in gen.generate(prompts)]

        a, u = answers(answerable), answers(unanswerable)
        out[decline] = {"right": [bool(contains_gold(x, r["answers"])) for x, r in zip(a, answerable)],
                        "declined_unanswerable": [is_decline(x) for x in u],
                        "declined_answerable": [is_decline(x) for x in a],
                        "examples_unanswerable": u[:5]}
    gen.close()
    never, always = out["never"]["right"], out["always"]["right"]
    lost = sum(x and not y for x, y in zip(never, always))
    gained = sum(y and not x for x, y in zip(never, always))
    result = {
        "benchmark": "declines", "machine": machine_info(("torch", "transformers")),
        "model": "smollm2 (SmolLM2-135M-Instruct), float32, greedy", "n": args.n,
        "answerable_right": {"without_instruction": sum(never), "with_instruction": sum(always), "of": args.n,
                             "lost": lost, "gained": gained, "mcnemar_p": mcnemar(lost, gained)},
        "unanswerable_declined": {d: sum(out[d]["declined_unanswerable"]) for d in out} | {"of": args.n},
        "answerable_declined": {d: sum(out[d]["declined_answerable"]) for d in out} | {"of": args.n},
        "examples_unanswerable_with_instruction": out["always"]["examples_unanswerable"],
        "seconds": time.perf_counter() - began,
    }
    save_result(RESULT, result)
    print(json.dumps({k: v for k, v in result.items() if k not in ("machine", "examples_unanswerable_with_instruction")},
                     indent=1))


if __name__ == "__main__":
    main()
