"""The machine's limits for ablation work, and how close ragray's generation gets to them.

    python benchmarks/bench_limits.py [--generation benchmarks/results/generation.json]
        [--out benchmarks/results/limits.json]

Measured on this machine with the torch ragray runs on (threads = every core):

- **matmul peak**: square GEMMs (1024, 2048, 3072) in fp32 and bf16, best of 5, and a *sustained*
  figure: the 90 MLP GEMMs of SmolLM2-135M's 30 layers (1461 x 576 activations, distinct weights per
  layer, as in one prefill), timed as a whole;
- **attention kernel**: SDPA (flash, CPU) at the model's shapes (9 query heads, 3 KV heads, d=64),
  causal and with an explicit mask (a prefill that continues a reused prefix);
- **elementwise**: SiLU on a 1461 x 1536 activation, the kind of op that is not a GEMM;
- **model forward**: SmolLM2-135M prefill of 512 and 1461 tokens, fp32 and bf16 (tokens/s and
  GFLOP/s at 2 x parameters x tokens).

With ``--generation`` (a ``bench_generation.py`` result) the report adds ragray's achieved
**useful** throughput: 2 x parameters x (prefill tokens that must be computed with perfect prefix
reuse + generated tokens) per second, as a fraction of the bf16 peaks above.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import machine_info, save_result  # noqa: E402


def _best(fn: Callable[[], Any], repeat: int = 5) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def matmul_peaks(torch: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("float32", "bfloat16"):
        dt = getattr(torch, name)
        square = {}
        for n in (1024, 2048, 3072):
            a, b = torch.randn(n, n, dtype=dt), torch.randn(n, n, dtype=dt)
            square[str(n)] = round(2 * n**3 / _best(lambda: torch.mm(a, b)) / 1e9, 1)
        weights = [tuple(torch.randn(*shape, dtype=dt) for shape in ((1536, 576), (1536, 576), (576, 1536)))
                   for _ in range(30)]
        x = torch.randn(1461, 576, dtype=dt)

        def mlp() -> None:
            for g, u, d in weights:
                torch.nn.functional.linear(torch.nn.functional.linear(x, g) * torch.nn.functional.linear(x, u), d)

        flops = 30 * 3 * 2 * 1461 * 576 * 1536
        out[name] = {"square_gflops": square, "peak_gflops": max(square.values()),
                     "sustained_model_gemms_gflops": round(flops / _best(mlp, 3) / 1e9, 1)}
    return out


def attention(torch: Any) -> dict[str, Any]:
    f = torch.nn.functional.scaled_dot_product_attention
    out = {}
    for q_len, k_len in ((1461, 1461), (761, 1461)):
        q = torch.randn(1, 9, q_len, 64, dtype=torch.bfloat16)
        k, v = (torch.randn(1, 3, k_len, 64, dtype=torch.bfloat16) for _ in range(2))
        flops = 4 * q_len * k_len * 64 * 9
        if q_len == k_len:
            t = _best(lambda: f(q, k, v, is_causal=True, enable_gqa=True))
            out[f"causal_{q_len}"] = {"ms": round(t * 1e3, 2), "gflops_full_rectangle": round(flops / t / 1e9, 1)}
        mask = torch.ones(q_len, k_len, dtype=torch.bool).tril(diagonal=k_len - q_len)[None, None]
        t = _best(lambda: f(q, k, v, attn_mask=mask, enable_gqa=True))
        out[f"masked_{q_len}x{k_len}"] = {"ms": round(t * 1e3, 2), "gflops_full_rectangle": round(flops / t / 1e9, 1)}
    return out


def elementwise(torch: Any) -> dict[str, Any]:
    out = {}
    for name in ("float32", "bfloat16"):
        x = torch.randn(1461, 1536, dtype=getattr(torch, name))
        t = _best(lambda: torch.nn.functional.silu(x))
        out[name] = {"silu_ms": round(t * 1e3, 3), "gelem_per_s": round(x.numel() / t / 1e9, 2)}
    return out


def model_forward(torch: Any) -> dict[str, Any]:
    from ragray.config import GenerationConfig
    from ragray.generation import build_generator

    out: dict[str, Any] = {}
    for dtype in ("float32", "bfloat16"):
        gen = build_generator(GenerationConfig(dtype=dtype))
        params = sum(p.numel() for p in gen.model.parameters())
        rows = {}
        with torch.inference_mode():
            for n in (512, 1461):
                ids = torch.randint(100, 40000, (1, n))
                t = _best(lambda: gen.model(input_ids=ids, use_cache=False, logits_to_keep=1), 3)
                rows[str(n)] = {"tokens_per_s": round(n / t, 1), "gflops": round(2 * params * n / t / 1e9, 1)}
        out[dtype] = {"parameters": params, "prefill": rows}
        gen.close()
    return out


def achieved(generation: dict[str, Any], params: int, peaks: dict[str, Any],
             forward: dict[str, Any] | None = None) -> dict[str, Any]:
    """ragray's useful FLOP/s per generation section, against the bf16 peaks and (``forward``, the
    :func:`model_forward` figures) the model's own bf16 batched forward at 1461 tokens."""
    out = {}
    for name, sec in generation.get("sections", {}).items():
        tokens = sec.get("prefill_tokens_with_reuse")
        if not tokens or not sec.get("seconds"):
            continue
        # generated tokens: recorded, else at most calls x max_tokens (an upper bound: flagged)
        completion = sec.get("completion_tokens") or sec["calls"] * generation["workload"]["max_tokens"]
        useful = 2 * params * (tokens + completion) / sec["seconds"] / 1e9
        out[name] = {
            "useful_gflops": round(useful, 1),
            "of_bf16_peak": round(useful / peaks["bfloat16"]["peak_gflops"], 3),
            "of_bf16_sustained_model_gemms": round(useful / peaks["bfloat16"]["sustained_model_gemms_gflops"], 3),
            "completion_tokens_assumed_max": sec.get("completion_tokens") is None,
        }
        model = (forward or {}).get("bfloat16", {}).get("prefill", {}).get("1461", {}).get("gflops")
        if model:
            out[name]["of_model_bf16_forward"] = round(useful / model, 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generation", help="a bench_generation.py result to rate against the limits")
    ap.add_argument("--out", default="benchmarks/results/limits.json")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(len(__import__("os").sched_getaffinity(0)))
    result: dict[str, Any] = {"machine": machine_info(("torch", "transformers")), "threads": torch.get_num_threads()}
    for name, fn in (("matmul", matmul_peaks), ("attention", attention), ("elementwise", elementwise),
                     ("model_forward", model_forward)):
        t = time.perf_counter()
        result[name] = fn(torch)
        print(f"{name} ({time.perf_counter() - t:.0f} s): {json.dumps(result[name])}", flush=True)
    if args.generation:
        gen = json.loads(Path(args.generation).read_text())
        params = result["model_forward"]["bfloat16"]["parameters"]
        result["ragray_achieved"] = {"source": args.generation, "generation_commit": gen["machine"].get("commit"),
                                     "sections": achieved(gen, params, result["matmul"],
                                                          result["model_forward"])}
        print(json.dumps(result["ragray_achieved"], indent=1))
    save_result(args.out, result)


if __name__ == "__main__":
    main()
