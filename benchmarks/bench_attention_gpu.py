"""Attention of one scoring pass of the gpu strategy, kernel by kernel, on one GPU.

A padded pass (:mod:`ragray.generation.transformers.batched`) runs ``B`` prompts' rests (right-aligned, width
``S``) over their reused prefixes (left-aligned in ``R`` columns) with one boolean mask. This times
one layer's attention of such a pass (8B shape: 32 query heads, 8 KV heads, head dim 128, bf16):

- ``repeat_kv_masked``: transformers' SDPA path with a mask (K/V repeated to every query head);
- ``gqa_masked``: SDPA with ``enable_gqa`` and the mask (older PyTorch ran it on the math kernel,
  the whole score matrix in float32; on torch 2.11, H200, it took 278 MB extra against the repeat's
  966 MB, equal to the bit, a third faster: ``gpu_attention.json``);
- ``folded_masked``: the ``groups`` query heads of each KV head folded into ``groups x S`` query rows
  of one plain masked call (the mask repeated per group), so each K/V head is read once and never
  copied (what the backend does for decoding steps of up to 16 queries);
- ``causal_no_prefix``: SDPA causal over the rests alone, no prefix: a floor, not the same work;
- ``varlen``: ``torch.nn.attention.varlen.varlen_attn`` (FlashAttention) over the packed rows,
  each row's keys its prefix then its own tokens, causal aligned bottom-right; checked against
  the masked result first (where the installed torch has it).

Usage: ``python -m benchmarks.bench_attention_gpu --out /tmp/attn.json`` (on CPU: tiny sizes, the
check only).
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import machine_info, save_result  # noqa: E402


def _time(fn: Any, cuda: bool, repeat: int = 10) -> float:
    import torch

    fn()
    if cuda:
        torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(repeat):
        fn()
    if cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - began) / repeat * 1000


def _peak_mb(fn: Any, cuda: bool) -> float | None:
    """The device memory one call takes beyond what was allocated before it (MB; None on CPU)."""
    import torch

    if not cuda:
        return None
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return round((torch.cuda.max_memory_allocated() - before) / 2**20, 1)


def varlen_call() -> Any:
    """``varlen_attn`` with causal attention, whatever its keyword in this torch; None if absent."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    params = inspect.signature(varlen_attn).parameters
    causal = {"window_size": (-1, 0)} if "window_size" in params else {"is_causal": True}
    gqa = {"enable_gqa": True} if "enable_gqa" in params else {}
    return lambda q, k, v, cq, ck, mq, mk, scale: varlen_attn(q, k, v, cq, ck, mq, mk, scale=scale, **causal, **gqa)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="/tmp/bench_attention_gpu.json")
    ap.add_argument("--rows", type=int, default=40)
    ap.add_argument("--width", type=int, default=700)
    ap.add_argument("--prefix", type=int, default=400)
    args = ap.parse_args(argv)
    import torch

    from ragray.generation.transformers.batched import _pass_mask

    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    dtype = torch.bfloat16 if cuda else torch.float32
    heads, kv_heads, dim = (32, 8, 128) if cuda else (4, 2, 16)
    rows, width, prefix = (args.rows, args.width, args.prefix) if cuda else (3, 12, 6)
    g = torch.Generator().manual_seed(0)
    # rests between 60% and 100% of the width, reuses so that reuse + rest ~ prefix + width * 0.8
    news = sorted((int(width * (0.6 + 0.4 * torch.rand(1, generator=g).item())) for _ in range(rows)), reverse=True)
    news[0] = width
    reuses = [min(prefix, max(0, int(prefix + width * 0.8) - n)) for n in news]
    scale = dim ** -0.5
    q = torch.randn(rows, heads, width, dim, generator=g).to(dev, dtype)
    k = torch.randn(rows, kv_heads, prefix + width, dim, generator=g).to(dev, dtype)
    v = torch.randn(rows, kv_heads, prefix + width, dim, generator=g).to(dev, dtype)
    mask = _pass_mask(torch, torch.tensor([width - n for n in news], device=dev), torch.tensor(reuses, device=dev),
                      width, prefix)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    groups = heads // kv_heads
    out: dict[str, Any] = {"benchmark": "bench_attention_gpu", "machine": machine_info(("torch",)),
                           "device": torch.cuda.get_device_name(0) if cuda else "cpu",
                           "shape": {"rows": rows, "width": width, "prefix": prefix, "heads": heads,
                                     "kv_heads": kv_heads, "dim": dim, "real_query_tokens": sum(news)}}

    def repeat_kv_masked() -> Any:
        return sdpa(q, k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1), attn_mask=mask, scale=scale)

    def gqa_masked() -> Any:
        return sdpa(q, k, v, attn_mask=mask, scale=scale, enable_gqa=True)

    def folded_masked() -> Any:
        folded = q.reshape(rows, kv_heads, groups * width, dim)
        wide = mask.expand(rows, groups, width, mask.shape[-1]).reshape(rows, 1, groups * width, -1)
        return sdpa(folded, k, v, attn_mask=wide, scale=scale).view(rows, heads, width, dim)

    def causal_no_prefix() -> Any:
        return sdpa(q, k[:, :, prefix:], v[:, :, prefix:], is_causal=True, scale=scale, enable_gqa=True)

    reference = repeat_kv_masked()
    ms, peak_mb, diff = {}, {}, {}
    for name, fn in (("repeat_kv_masked", repeat_kv_masked), ("gqa_masked", gqa_masked),
                     ("folded_masked", folded_masked), ("causal_no_prefix", causal_no_prefix)):
        if name != "causal_no_prefix":  # the real queries' outputs against transformers' path
            diff[name] = max(float((fn()[b, :, width - n :].float() - reference[b, :, width - n :].float()).abs().max())
                             for b, n in enumerate(news))
        peak_mb[name] = _peak_mb(fn, cuda)
        ms[name] = _time(fn, cuda)
    out["max_abs_diff"], out["peak_extra_mb"] = diff, peak_mb
    call = varlen_call()
    if call is None:
        out["varlen"] = "absent in this torch"
    else:
        # pack: row b's queries are its real rest; its keys its reused prefix then its real rest
        qs = torch.cat([q[b, :, width - n :].transpose(0, 1) for b, n in enumerate(news)])
        ks = torch.cat([torch.cat([k[b, :, :r], k[b, :, prefix + width - n :]], 1).transpose(0, 1)
                        for b, (n, r) in enumerate(zip(news, reuses))])
        vs = torch.cat([torch.cat([v[b, :, :r], v[b, :, prefix + width - n :]], 1).transpose(0, 1)
                        for b, (n, r) in enumerate(zip(news, reuses))])
        cq = torch.tensor([0, *torch.tensor(news).cumsum(0).tolist()], dtype=torch.int32, device=dev)
        lk = [n + r for n, r in zip(news, reuses)]
        ck = torch.tensor([0, *torch.tensor(lk).cumsum(0).tolist()], dtype=torch.int32, device=dev)
        try:
            got = call(qs, ks, vs, cq, ck, max(news), max(lk), scale)
            want = torch.cat([reference[b, :, width - n :].transpose(0, 1) for b, n in enumerate(news)])
            out["varlen_max_abs_diff"] = float((got.float() - want.float()).abs().max())
            ms["varlen"] = _time(lambda: call(qs, ks, vs, cq, ck, max(news), max(lk), scale), cuda)
        except Exception as exc:  # noqa: BLE001 - recorded: absent kernels on CPU, other signatures
            out["varlen"] = f"{type(exc).__name__}: {exc}"[:500]
    out["ms_per_layer"] = {key: round(val, 3) for key, val in ms.items()}
    save_result(Path(args.out), out)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
