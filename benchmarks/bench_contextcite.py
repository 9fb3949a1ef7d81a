"""ContextCite (PyPI ``context-cite`` 0.0.4) vs ragray log-prob scoring, same ablations, same tokens.

    benchmarks/.cache/ccvenv/bin/python benchmarks/bench_contextcite.py [--questions 3] [--ablations 32]
        [--max-tokens 32] [--cc-batch-size 1] [--dtypes float32,bfloat16] [--cc-dtypes float32,bfloat16]
        [--out benchmarks/results/contextcite.json]

Run it with a venv that sees the system packages and adds context-cite without touching
torch/transformers (see docs/measurements.md); HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1.

Workload: the first N HotpotQA distractor-dev questions (../shared/data) with their 10 passages,
SmolLM2-135M-Instruct (packaged), CPU. Sources = the 10 passages. Each side runs in each of its
dtypes: ContextCite as shipped (``from_pretrained`` loads float32) and in bfloat16; ragray in float32
(the reference path) and bfloat16 (its fast path). The headline ``speedup`` is ragray's fastest
dtype against ContextCite as shipped; every pair is in ``summary``.

- ContextCite: ``ContextCiter`` with a custom partitioner whose sources are the passages (no nltk
  sentence splitting). It generates the response (greedy, ``max_new_tokens``), then draws its own
  ``num_ablations`` masks (seeds 0..N-1, keep probability 0.5) and scores the response under each
  with one forward pass per prompt, then fits its Lasso on the logit of the response
  probability. ``--cc-batch-size`` > 1 runs that many prompts per forward, left-padded (as
  ContextCite requires for batching).
- ragray: for the SAME N masks, the SAME prompt strings and the SAME response string,
  ``TransformersGenerator.score`` (summed log-probs; each shared prefix computed once, the rest
  packed in waves over the prompts' prefix trie).
  The logit target log p − log(1 − p) is formed from the summed log-prob as ContextCite does.

Identical on both sides: model weights, masks, prompt text and token ids (the user
message is ragray's ``numbered`` template rendering of the kept passages, renumbered; ContextCite
sends a single user turn, so ragray is given that same single-message prompt and SmolLM2's chat
template adds its default system message on both sides), the response tokens (ContextCite's
decoded response, which ends with ``<|im_end|>``; checked token by token). Different: only the
scoring implementation (ContextCite: full forward of every prompt, per-token logit-probs
then summed; ragray: prefix-reusing packed prefills, log_softmax) and the attention kernel
(ragray registers its grouped-query SDPA path). ContextCite's models are other copies of the same
weights, loaded with transformers' defaults. The first ContextCite dtype generates the response
(greedy) and every side scores that response; its attributions are the reference the others'
agreement is measured against.

Timed: the N ablation scorings only (ContextCite ``_compute_masks_and_logit_probs``, which also
tokenizes its prompts; ragray prompt building + ``score``). Model loading and response generation
are excluded. Attribution agreement: Spearman and top-1 between the reference attributions and
(a) ContextCite's own Lasso solver fit on ragray's targets (isolates the scoring numerics) and
(b) ragray's non-negative Lasso surrogate (``fit_lasso(..., positive=True)``) on the same targets.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch
from context_cite import ContextCiter
from context_cite.context_partitioner import BaseContextPartitioner
from context_cite.solver import LassoRegression
from transformers import AutoModelForCausalLM, AutoTokenizer

from benchmarks.contextcite_summary import agreement, summarize
from benchmarks.machine import SHARED_DATA, machine_info
from ragray.config import GenerationConfig
from ragray.attribution.linear import fit_lasso
from ragray.generation import Message, build_generator
from ragray.generation.chat_tokens import answer_token_ids, encode_rendered, render_chat
from ragray.generation.packaged import resolve_generator_model
from ragray.generation.prompts import get_template
from ragray.types import Passage

DATA = SHARED_DATA / "hotpotqa_distractor_dev.jsonl"
TEMPLATE = get_template("numbered")
# ragray's numbered user message with the passage blocks as ContextCite's {context}
PROMPT = "Passages:\n\n{context}\n\nQuestion: {query}\nAnswer with a short phrase."


class PassagePartitioner(BaseContextPartitioner):
    """Sources = passages, rendered as ragray's numbered blocks (renumbered under ablation)."""

    def __init__(self, passages: list[Passage]) -> None:
        self.passages = passages
        super().__init__(self.get_context())

    @property
    def num_sources(self) -> int:
        return len(self.passages)

    def split_context(self) -> None:
        """Nothing to split: the passages are the sources."""

    def get_source(self, index: int) -> str:
        return self.passages[index].text

    def get_context(self, mask: np.ndarray | None = None) -> str:
        kept = self.passages if mask is None else [p for p, m in zip(self.passages, mask) if m]
        blocks = [(f"[{i}] {p.title}\n" if p.title else f"[{i}] ") + p.text for i, p in enumerate(kept, start=1)]
        return "\n\n".join(blocks) if blocks else "(no passages)"


def load_questions(n: int, k: int = 10) -> list[tuple[str, str, list[Passage]]]:
    """``(id, question, passages)`` of the first ``n`` questions with ``k`` passages."""
    out = []
    with DATA.open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if len(row["passages"]) == k:
                ps = [Passage(p["id"], p["text"], title=p.get("title", "")) for p in row["passages"]]
                out.append((row["id"], row["question"], ps))
            if len(out) == n:
                break
    return out


def ragray_prompt(question: str, passages: list[Passage], mask: np.ndarray) -> tuple[Message, ...]:
    """ragray's numbered user message of the kept passages, as ContextCite's single user turn."""
    return (Message("user", TEMPLATE.render_user(question, [p for p, m in zip(passages, mask) if m])),)


def logit_target(log_p: np.ndarray) -> np.ndarray:
    """ContextCite's regression target: log p − log(1 − p) of the whole response."""
    log_p = np.minimum(np.asarray(log_p, dtype=np.float64), -1e-12)
    return log_p - np.log1p(-np.exp(log_p))


def cc_targets(cc: ContextCiter) -> np.ndarray:
    """ContextCite's own aggregate of its per-token logit-probs (float64 for comparability)."""
    log_p = -np.logaddexp(0.0, -cc._logit_probs.astype(np.float64)).sum(axis=1)
    return logit_target(log_p)


def check_identical(cc: ContextCiter, gen: Any, question: str, passages: list[Passage]) -> dict[str, Any]:
    """Do both sides score the same token ids (every mask) and the same response tokens?"""
    tok = gen.tokenizer
    same_prompts = all(
        encode_rendered(tok, render_chat(tok, ragray_prompt(question, passages, m))) == cc._get_prompt_ids(mask=m)
        for m in cc._masks
    )
    text = render_chat(tok, ragray_prompt(question, passages, cc._masks[0]))
    ids = encode_rendered(tok, text)
    same_response = answer_token_ids(tok, text, ids, cc.response) == list(cc._response_ids)
    return {"identical_prompt_ids": same_prompts, "identical_response_ids": same_response}


def run_question(models: dict[str, Any], tok: Any, gens: dict[str, Any], args: argparse.Namespace,
                 qid: str, question: str, passages: list[Passage]) -> dict[str, Any]:
    """ContextCite in each of its dtypes, ragray in each of its, on one question: timings,
    targets and attributions. The first ContextCite model generates the response all score."""
    part = PassagePartitioner(passages)
    row: dict[str, Any] = {"id": qid, "contextcite": {}, "ragray": {}}
    ref: Any = None
    for dtype, model in models.items():
        cc = ContextCiter(model, tok, part.context, question, partitioner=part, prompt_template=PROMPT,
                          num_ablations=args.ablations, batch_size=args.cc_batch_size,
                          generate_kwargs={"max_new_tokens": args.max_tokens, "do_sample": False})
        if ref is None:
            ref = cc
            row["response"] = cc.response  # generation: not timed
        else:
            cc._cache["output"] = ref._output  # the same response for every side
        start = time.perf_counter()
        cc._compute_masks_and_logit_probs()
        row["contextcite"][dtype] = {"seconds": time.perf_counter() - start,
                                     "targets": cc_targets(cc), "attributions": cc.get_attributions(verbose=False)}
    masks, response, n_tokens = ref._masks, ref.response, len(ref._response_ids)
    row["response_tokens"] = n_tokens
    row.update(check_identical(ref, next(iter(gens.values())), question, passages))
    cc_ref = row["contextcite"][next(iter(models))]
    for dtype, gen in gens.items():
        start = time.perf_counter()
        prompts = [ragray_prompt(question, passages, m) for m in masks]
        log_p = np.array(gen.logprobs(prompts, [response] * len(prompts)))
        seconds = time.perf_counter() - start
        y = logit_target(log_p)
        same_solver, _ = LassoRegression().fit(masks, y, n_tokens)
        nn_lasso, _ = fit_lasso((~masks).astype(float), -y / n_tokens, 0.01, positive=True)
        row["ragray"][dtype] = {
            "seconds": seconds,
            "speedup": {cc_dtype: c["seconds"] / seconds for cc_dtype, c in row["contextcite"].items()},
            "target_max_abs_diff": float(np.max(np.abs(cc_ref["targets"] - y))),
            "same_solver_attributions": [float(v) for v in same_solver],
            "surrogate_attributions": [float(v) for v in nn_lasso],
            "same_solver": agreement(cc_ref["attributions"], same_solver),
            "surrogate": agreement(cc_ref["attributions"], nn_lasso),
        }
    for c in row["contextcite"].values():
        c["attributions"] = [float(v) for v in c.pop("attributions")]
        del c["targets"]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=3)
    ap.add_argument("--ablations", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--cc-batch-size", type=int, default=1, help="ContextCite's batch_size (its default: 1)")
    ap.add_argument("--dtypes", default="float32,bfloat16",
                    help="ragray's dtypes, comma-separated (the first is the reference path)")
    ap.add_argument("--cc-dtypes", default="float32,bfloat16",
                    help="ContextCite's model dtypes; the first (from_pretrained's default, float32) "
                         "generates the response and its attributions are the reference")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "contextcite.json"))
    args = ap.parse_args()
    dtypes, cc_dtypes = args.dtypes.split(","), args.cc_dtypes.split(",")
    for d in (*dtypes, *cc_dtypes):
        if d not in ("float32", "bfloat16"):
            ap.error(f"unknown dtype {d!r}: float32 or bfloat16")
    path = resolve_generator_model("smollm2")
    tok = AutoTokenizer.from_pretrained(path)
    tok.padding_side = "left"  # as ContextCiter.from_pretrained sets it
    models = {d: AutoModelForCausalLM.from_pretrained(path, dtype=d).eval() for d in cc_dtypes}
    gens = {d: build_generator(GenerationConfig(max_tokens=args.max_tokens, dtype=d, device="cpu")) for d in dtypes}
    for gen in gens.values():  # ContextCite's models warm up generating
        gen.logprobs([get_template("numbered").build("Warm up?", [])], ["Yes."])
    results: dict[str, Any] = {
        "machine": machine_info(("torch", "transformers", "context-cite", "scikit-learn")),
        "workload": vars(args),
        "context_cite_version": md.version("context-cite"),
        "torch_threads": torch.get_num_threads(),
    }
    rows = []
    try:
        for qid, question, passages in load_questions(args.questions):
            rows.append(run_question(models, tok, gens, args, qid, question, passages))
            r = rows[-1]
            print(qid, json.dumps({"contextcite_s": {d: c["seconds"] for d, c in r["contextcite"].items()},
                                   "ragray": {d: {k: v for k, v in g.items() if not k.endswith("attributions")}
                                              for d, g in r["ragray"].items()}}), flush=True)
    finally:
        for gen in gens.values():
            gen.close()
    results["questions"] = rows
    results["summary"] = summarize(rows, cc_dtypes[0])
    results["load_1min_after"] = os.getloadavg()[0]
    print("summary", json.dumps(results["summary"]))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
