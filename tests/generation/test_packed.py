"""Packed prefill planning and attention (the model-level equality is in test_transformers.py)."""

from __future__ import annotations

import random

import pytest

from ragray.generation.kv_prefix import plan_prefills, prefill_token_count
from ragray.generation.packed import Packed, Span, pack_spans, packed_attention, trunk_plan


def _drop_one(passages: list[list[int]], head: list[int], tail: list[int]) -> list[list[int]]:
    full = [head + sum(passages, []) + tail]
    return full + [head + sum(passages[:i] + passages[i + 1 :], []) + tail for i in range(len(passages))]


def test_the_baseline_is_the_trunk_of_drop_one_ablations() -> None:
    rng = random.Random(0)
    passages = [[rng.randrange(100, 999) for _ in range(rng.randrange(5, 30))] for _ in range(6)]
    prompts = _drop_one(passages, [1, 2, 3], [7, 8])
    prompts = prompts[3:] + prompts[:3]  # the baseline (was first) is now at index 3
    chain = prefill_token_count(prompts, plan_prefills(prompts))
    trunk, reuse = trunk_plan(prompts, [len(p) - 1 for p in prompts], chain)
    assert trunk == 3 and reuse[3] == 0
    assert sum(map(len, prompts)) - sum(reuse) == chain  # as frugal as the sorted chain
    head = 3
    for i, prompt in enumerate(prompts):
        if i != trunk:  # each ablation reuses the baseline up to its removed passage
            assert prompt[: reuse[i]] == prompts[trunk][: reuse[i]]
            assert reuse[i] >= head


def test_random_subsets_stay_on_the_chain() -> None:
    rng = random.Random(1)
    passages = [[rng.randrange(100, 999) for _ in range(20)] for _ in range(10)]
    prompts = [sum((p for p, keep in zip(passages, mask) if keep), [])
               for mask in ([rng.random() < 0.5 for _ in passages] for _ in range(32))]
    chain = prefill_token_count(prompts, plan_prefills(prompts))
    assert trunk_plan(prompts, [len(p) - 1 for p in prompts], chain) is None
    assert trunk_plan(prompts[:2], [0, 0], 10**6) is None  # too few prompts to pack


def test_pack_spans_caps_the_new_tokens_per_forward() -> None:
    assert pack_spans([10, 10, 10], [0, 5, 5], limit=100) == [[0, 1, 2]]
    assert pack_spans([10, 10, 10, 50], [0, 5, 5, 0], limit=15) == [[0, 1], [2], [3]]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_packed_attention_equals_one_prefill_per_prompt(dtype) -> None:
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(3)
    dt = getattr(torch, dtype)
    trunk = [(torch.randn(1, 3, 300, 64, generator=g).to(dt), torch.randn(1, 3, 300, 64, generator=g).to(dt))]
    spans = (Span(0, 0, 40), Span(20, 40, 250), Span(280, 290, 30))  # fresh, padded-causal, masked
    total = 320
    q = torch.randn(1, 9, total, 64, generator=g).to(dt)
    k, v = (torch.randn(1, 3, total, 64, generator=g).to(dt) for _ in range(2))
    out = packed_attention(0, q, k, v, Packed(trunk, spans), 0.125)
    assert out.shape == (1, total, 9, 64)
    for span in spans:
        rows = slice(span.start, span.start + span.length)
        keys = torch.cat([trunk[0][0][:, :, : span.reuse], k[:, :, rows]], dim=2)
        values = torch.cat([trunk[0][1][:, :, : span.reuse], v[:, :, rows]], dim=2)
        mask = torch.ones(span.length, span.reuse + span.length, dtype=torch.bool).tril(diagonal=span.reuse)
        ref = torch.nn.functional.scaled_dot_product_attention(
            q[:, :, rows], keys, values, attn_mask=mask, scale=0.125, enable_gqa=True)
        torch.testing.assert_close(out[:, rows], ref.transpose(1, 2), rtol=0, atol=1e-6 if dtype == "float32" else 0)
