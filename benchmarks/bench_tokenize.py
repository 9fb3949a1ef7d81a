"""A scoring call's tokenization, side by side: every prompt encoded whole twice (alone and with its
answer: ragray before) against each prompt once and its answer after the template's last special
token (``chat_tokens.encode_scored``). The device waits for this host work at the start of every
scoring call (stop 60's profile: 0.49 s of the 8B record run's scoring call on the H200's host).

    python benchmarks/bench_tokenize.py [--questions 24] [--repeats 5]

The prompts are those ragray's own runs send: each scoring call of a run over the demo questions
is captured (a random-weight tiny model with SmolLM2's tokenizer answers them, so the capture takes
seconds), once at defaults and once with bench_gpu's record workload. Each call's prompts are then
encoded both ways, alternately, ``--repeats`` times; the ids must be equal. Writes
``benchmarks/results/tokenize.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import REPO, machine_info, save_result

RESULT = REPO / "benchmarks" / "results" / "tokenize.json"


def whole_texts(tok: Any, texts: list[str], answers: list[str]) -> list[tuple[list[int], list[int]]]:
    """ragray before: every prompt encoded alone and with its answer, in one batch."""
    from ragray.generation.chat_tokens import _answer_ids, encode_many

    encoded = encode_many(tok, [*texts, *(t + a for t, a in zip(texts, answers))])
    prompts, fulls = encoded[: len(texts)], encoded[len(texts) :]
    return [(ids, _answer_ids(tok, ids, full, a)) for ids, full, a in zip(prompts, fulls, answers)]


def scoring_calls(questions: int, settings: dict[str, Any]) -> tuple[Any, list[tuple[list[str], list[str]]]]:
    """The rendered prompts and answers of each scoring call of a run over ``questions`` demo questions."""
    import ragray
    from benchmarks import bench_gpu as bg
    from ragray.config import GenerationConfig
    from ragray.generation.chat_tokens import render_chat
    from ragray.generation.transformers.backend import TransformersGenerator

    folder = tempfile.mkdtemp(prefix="bench-tokenize-")
    model, tok, _ = bg.build_model("tiny", Path(folder), bg.tokenizer_dir(None), "cpu")
    gen = TransformersGenerator.from_model(model, tok, GenerationConfig(model=folder), path=folder, device="cpu")
    calls: list[tuple[list[str], list[str]]] = []
    scores = gen.logprobs

    def captured(prompts: Any, answers: Any) -> Any:
        calls.append(([render_chat(tok, p) for p in prompts], list(answers)))
        return scores(prompts, answers)

    gen.logprobs = captured  # type: ignore[method-assign]
    ragray.run(progress=False, model=gen, settings={"metrics.embedding": False, "data.limit": questions,
                                                    "execution.max_questions_in_flight": questions,
                                                    "cache.dir": f"{folder}/cache", **settings})
    return tok, calls


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", type=int, default=24)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(RESULT))
    args = ap.parse_args(argv)
    from benchmarks import bench_gpu as bg
    from ragray.generation.chat_tokens import encode_scored

    result: dict[str, Any] = {"machine": machine_info(("transformers", "tokenizers")), "questions": args.questions,
                              "repeats": args.repeats, "workloads": {}}
    for name, settings in (("defaults", {}), ("gpu record workload", bg.WORKLOAD)):
        tok, calls = scoring_calls(args.questions, settings)
        before, after = [], []
        for _ in range(args.repeats):
            for way, times in ((whole_texts, before), (encode_scored, after)):
                began = time.perf_counter()
                got = [way(tok, texts, answers) for texts, answers in calls]
                times.append(time.perf_counter() - began)
                if way is whole_texts:
                    expected = got
                elif got != expected:
                    raise SystemExit(f"{name}: the ids differ from encoding whole texts")
        row = {"scoring_calls": len(calls), "prompts": sum(len(t) for t, _ in calls),
               "prompt_characters": sum(len(x) for t, _ in calls for x in t),
               "whole_texts_s": round(statistics.median(before), 4), "encode_scored_s": round(statistics.median(after), 4),
               "ids_equal": True}
        row["saved"] = round(1 - row["encode_scored_s"] / row["whole_texts_s"], 3)
        result["workloads"][name] = row
        print(name, row, flush=True)
    print("wrote", save_result(args.out, result))


if __name__ == "__main__":
    main()
