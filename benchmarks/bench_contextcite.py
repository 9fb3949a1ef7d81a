"""ContextCite (PyPI ``context-cite`` 0.0.4) vs ragray log-prob scoring, same ablations, same tokens.

    benchmarks/.cache/ccvenv/bin/python benchmarks/bench_contextcite.py [--questions 3] [--ablations 32]
        [--max-tokens 32] [--cc-batch-size 1] [--out benchmarks/results/contextcite.json]

Run it with a venv that sees the system packages and adds context-cite without touching
torch/transformers (see README, "Measured here"); HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1.

Workload: the first N HotpotQA distractor-dev questions (../shared/data) with their 10 passages,
SmolLM2-135M-Instruct (packaged), float32, CPU. Sources = the 10 passages.

- ContextCite: ``ContextCiter`` with a custom partitioner whose sources are the passages (no nltk
  sentence splitting). It generates the response (greedy, ``max_new_tokens``), then draws its own
  ``num_ablations`` masks (seeds 0..N-1, keep probability 0.5) and scores the response under each
  with one forward pass per prompt, then fits its Lasso on the logit of the response
  probability. ``--cc-batch-size`` > 1 runs that many prompts per forward, left-padded (as
  ContextCite requires for batching).
- ragray: for the SAME N masks, the SAME prompt strings and the SAME response string,
  ``TransformersGenerator.score`` (summed log-probs, exact prefix KV reuse between ablations).
  The logit target log p − log(1 − p) is formed from the summed log-prob as ContextCite does.

Identical on both sides: model weights and dtype, masks, prompt text and token ids (the user
message is ragray's ``numbered`` template rendering of the kept passages, renumbered; ContextCite
sends a single user turn, so ragray is given that same single-message prompt and SmolLM2's chat
template adds its default system message on both sides), the response tokens (ContextCite's
decoded response, which ends with ``<|im_end|>``; checked token by token). Different: only the
scoring implementation (ContextCite: full forward of every prompt, per-token logit-probs in
float32 then summed; ragray: prefix-reusing prefills, log_softmax) and the attention kernel
(ragray registers its grouped-query SDPA path). ContextCite's model is a second copy of the same
weights, loaded with transformers' defaults.

Timed: the N ablation scorings only (ContextCite ``_compute_masks_and_logit_probs``, which also
tokenizes its prompts; ragray prompt building + ``score``). Model loading and response generation
are excluded. Attribution agreement: Spearman and top-1 between ContextCite's attributions and
(a) ContextCite's own Lasso solver fit on ragray's targets (isolates the scoring numerics) and
(b) ragray's non-negative Lasso surrogate (``fit_nonnegative_lasso``) on the same targets.
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
from scipy.stats import spearmanr
from transformers import AutoModelForCausalLM, AutoTokenizer

from benchmarks.machine import SHARED_DATA, machine_info
from ragray.config import GenerationConfig
from ragray.faithfulness.surrogate import fit_nonnegative_lasso
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


def agreement(a: np.ndarray, b: np.ndarray) -> dict[str, Any]:
    """Spearman rank correlation and top-1 agreement of two attribution vectors."""
    rho = spearmanr(a, b).statistic
    return {"spearman": None if np.isnan(rho) else float(rho), "top1_agree": int(np.argmax(a) == np.argmax(b))}


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


def run_question(model: Any, tok: Any, gen: Any, args: argparse.Namespace,
                 qid: str, question: str, passages: list[Passage]) -> dict[str, Any]:
    """Both sides on one question; returns timings, targets' agreement and attributions."""
    part = PassagePartitioner(passages)
    cc = ContextCiter(model, tok, part.context, question, partitioner=part, prompt_template=PROMPT,
                      num_ablations=args.ablations, batch_size=args.cc_batch_size,
                      generate_kwargs={"max_new_tokens": args.max_tokens, "do_sample": False})
    response = cc.response  # generation: not timed
    start = time.perf_counter()
    cc._compute_masks_and_logit_probs()
    cc_s = time.perf_counter() - start
    cc_attr = cc.get_attributions(verbose=False)

    masks = cc._masks
    start = time.perf_counter()
    prompts = [ragray_prompt(question, passages, m) for m in masks]
    log_p = np.array(gen.score(prompts, [response] * len(prompts)))
    ragray_s = time.perf_counter() - start

    n_tokens = len(cc._response_ids)
    y_cc, y_rg = cc_targets(cc), logit_target(log_p)
    same_solver, _ = LassoRegression().fit(masks, y_rg, n_tokens)
    removed = (~masks).astype(float)
    nn_lasso, _ = fit_nonnegative_lasso(removed, -y_rg / n_tokens)
    return {
        "id": qid,
        "response": response,
        "response_tokens": n_tokens,
        **check_identical(cc, gen, question, passages),
        "contextcite_s": cc_s,
        "ragray_s": ragray_s,
        "speedup": cc_s / ragray_s,
        "target_max_abs_diff": float(np.max(np.abs(y_cc - y_rg))),
        "contextcite_attributions": [float(v) for v in cc_attr],
        "ragray_same_solver_attributions": [float(v) for v in same_solver],
        "ragray_surrogate_attributions": [float(v) for v in nn_lasso],
        "same_solver": agreement(cc_attr, same_solver),
        "surrogate": agreement(cc_attr, nn_lasso),
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over questions (Spearman over the questions where it is defined)."""
    def mean(key: str, sub: str | None = None) -> float | None:
        vals = [r[key] if sub is None else r[key][sub] for r in rows]
        vals = [v for v in vals if v is not None]
        return float(np.mean(vals)) if vals else None

    cc_total, rg_total = sum(r["contextcite_s"] for r in rows), sum(r["ragray_s"] for r in rows)
    return {
        "questions": len(rows),
        "contextcite_s_per_question": cc_total / len(rows),
        "ragray_s_per_question": rg_total / len(rows),
        "speedup": cc_total / rg_total,
        "all_prompt_ids_identical": all(r["identical_prompt_ids"] for r in rows),
        "all_response_ids_identical": all(r["identical_response_ids"] for r in rows),
        "target_max_abs_diff": max(r["target_max_abs_diff"] for r in rows),
        "same_solver_spearman_mean": mean("same_solver", "spearman"),
        "same_solver_top1_agreement": mean("same_solver", "top1_agree"),
        "surrogate_spearman_mean": mean("surrogate", "spearman"),
        "surrogate_top1_agreement": mean("surrogate", "top1_agree"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=3)
    ap.add_argument("--ablations", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--cc-batch-size", type=int, default=1, help="ContextCite's batch_size (its default: 1)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "contextcite.json"))
    args = ap.parse_args()
    path = resolve_generator_model("smollm2")
    tok = AutoTokenizer.from_pretrained(path)
    tok.padding_side = "left"  # as ContextCiter.from_pretrained sets it
    model = AutoModelForCausalLM.from_pretrained(path, dtype="float32").eval()
    gen = build_generator(GenerationConfig(max_tokens=args.max_tokens, dtype="float32", device="cpu"))
    gen.score([get_template("numbered").build("Warm up?", [])], ["Yes."])  # ContextCite's model warms up generating
    results: dict[str, Any] = {
        "machine": machine_info(("torch", "transformers", "context-cite", "scikit-learn")),
        "workload": vars(args),
        "context_cite_version": md.version("context-cite"),
        "torch_threads": torch.get_num_threads(),
    }
    rows = []
    try:
        for qid, question, passages in load_questions(args.questions):
            rows.append(run_question(model, tok, gen, args, qid, question, passages))
            r = rows[-1]
            print(qid, json.dumps({k: v for k, v in r.items() if not k.endswith("attributions")}), flush=True)
    finally:
        gen.close()
    results["questions"] = rows
    results["summary"] = summarize(rows)
    results["load_1min_after"] = os.getloadavg()[0]
    print("summary", json.dumps(results["summary"]))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
