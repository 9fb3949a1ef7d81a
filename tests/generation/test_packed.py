"""Packed prefill planning and attention (the model-level equality is in test_transformers.py)."""

from __future__ import annotations

import math
import random

import pytest

from ragray.generation.transformers.attention import packed_attention
from ragray.generation.transformers.kv import truncate
from ragray.generation.transformers.packed import Packed, Span
from ragray.generation.transformers.plan import Step, pack_spans, plan_groups, plan_prefills, prefill_token_count, wave_plan


def _drop_one(passages: list[list[int]], head: list[int], tail: list[int]) -> list[list[int]]:
    full = [head + sum(passages, []) + tail]
    return full + [head + sum(passages[:i] + passages[i + 1 :], []) + tail for i in range(len(passages))]


def _check_plan(prompts: list[list[int]], caps: list[int], waves: list[list[Step]]) -> dict[int, int]:
    """Every prompt once; parents in earlier waves; reuse a true shared prefix within the cap."""
    wave_of = {s.index: w for w, wave in enumerate(waves) for s in wave}
    assert sorted(wave_of) == list(range(len(prompts)))
    reuse = {}
    for w, wave in enumerate(waves):
        for s in wave:
            if s.parent is None:
                assert s.reuse == 0 and w == 0
            else:
                assert wave_of[s.parent] < w and 0 < s.reuse <= caps[s.index]
                assert prompts[s.index][: s.reuse] == prompts[s.parent][: s.reuse]
            reuse[s.index] = s.reuse
    return reuse


def test_drop_one_ablations_take_two_waves_after_the_baseline() -> None:
    rng = random.Random(0)
    passages = [[rng.randrange(100, 999) for _ in range(rng.randrange(5, 30))] for _ in range(6)]
    prompts = _drop_one(passages, [1, 2, 3], [7, 8])
    prompts = prompts[3:] + prompts[:3]  # the baseline (was first) is now at index 3
    caps = [len(p) - 1 for p in prompts]
    waves = wave_plan(prompts, caps)
    reuse = _check_plan(prompts, caps, waves)
    assert [[s.index for s in w] for w in waves][0] == [3] and len(waves) == 2
    assert all(s.parent == 3 and s.reuse >= 3 for s in waves[1])  # up to the removed passage
    chain = prefill_token_count(prompts, plan_prefills(prompts))
    assert sum(map(len, prompts)) - sum(reuse.values()) == chain  # as frugal as the sorted chain


@pytest.mark.parametrize("n", [2, 7, 32, 64])
def test_random_subsets_compute_the_chains_tokens_in_few_waves(n) -> None:
    rng = random.Random(n)
    passages = [[rng.randrange(100, 999) for _ in range(20)] for _ in range(10)]
    prompts = [[1, 2] + sum((p for p, keep in zip(passages, mask) if keep), []) + [7, 8]
               for mask in ([rng.random() < 0.5 for _ in passages] for _ in range(n))]
    prompts.append(list(prompts[0]))  # a duplicate reuses all but its last token
    caps = [len(p) - 1 for p in prompts]
    waves = wave_plan(prompts, caps)
    reuse = _check_plan(prompts, caps, waves)
    chain = prefill_token_count(prompts, plan_prefills(prompts))
    assert sum(map(len, prompts)) - sum(reuse.values()) == chain
    assert len(waves) <= math.log2(len(prompts)) + 1
    assert len(waves[0]) == 1  # the chat header is shared by all: one root


@pytest.mark.parametrize("n", [7, 32])
def test_a_pinned_prompt_is_in_wave_0_and_the_plan_computes_the_same_tokens(n) -> None:
    """``first`` (a divergence call's reference) leads the root's heavy path: it is wave 0's prompt,
    every prompt still reuses a true shared prefix, and the tokens computed are the chain's."""
    from ragray.generation.transformers.plan import keyed_waves

    rng = random.Random(n)
    passages = [[rng.randrange(100, 999) for _ in range(20)] for _ in range(10)]
    prompts = [[1, 2] + sum((p for p, keep in zip(passages, mask) if keep), []) + [7, 8]
               for mask in ([rng.random() < 0.5 for _ in passages] for _ in range(n))]
    caps = [len(p) - 1 for p in prompts]
    chain = prefill_token_count(prompts, plan_prefills(prompts))
    for first in (0, n // 2, n - 1):
        waves = wave_plan(prompts, caps, first)
        reuse = _check_plan(prompts, caps, waves)
        assert [s.index for s in waves[0]] == [first]
        assert sum(map(len, prompts)) - sum(reuse.values()) == chain
    # over runs: the pinned prompt's run goes first, the pinned prompt in its wave 0
    seqs, keyed_caps = {10 + i: p for i, p in enumerate(prompts)}, {10 + i: c for i, c in enumerate(caps)}
    plans = keyed_waves(seqs, keyed_caps, limit=3 * max(map(len, prompts)), first=10 + n - 1)
    assert len(plans) > 1 and [s.index for s in plans[0][0]] == [10 + n - 1]


def test_caps_and_unrelated_prompts() -> None:
    prompts = [[5, 6, 7, 8], [5, 6, 7, 9], [9, 9], [5, 6, 1]]
    waves = wave_plan(prompts, [3, 1, 1, 0])
    reuse = _check_plan(prompts, [3, 1, 1, 0], waves)
    assert reuse == {0: 0, 1: 1, 2: 0, 3: 0}  # capped at 1 and 0; [9, 9] shares nothing
    assert sorted(s.index for s in waves[0]) == [0, 2, 3] and wave_plan([], []) == []


def test_plan_groups_cut_the_sorted_prompts_by_tokens() -> None:
    prompts = [[3] * 10, [1] * 10, [2] * 10, [1, 1] + [0] * 30]
    assert plan_groups(prompts, limit=25) == [[3], [1, 2], [0]]  # [1, 1, 0..] sorts first; alone over the limit


def test_truncate_walks_the_pieces() -> None:
    a, b = object(), object()
    assert truncate([(a, 0, 5), (b, 10, 20)], 8) == ((a, 0, 5), (b, 10, 13))
    assert truncate([(a, 0, 5), (b, 10, 20)], 5) == ((a, 0, 5),)
    assert truncate([(a, 0, 5)], 0) == ()


def test_pack_spans_caps_the_new_tokens_per_forward() -> None:
    assert pack_spans([10, 10, 10], [0, 5, 5], limit=100) == [[0, 1, 2]]
    assert pack_spans([10, 10, 10, 50], [0, 5, 5, 0], limit=15) == [[0, 1], [2], [3]]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_packed_attention_equals_one_prefill_per_prompt(dtype) -> None:
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(3)
    dt = getattr(torch, dtype)

    def layers(n: int) -> list:
        return [(torch.randn(1, 3, n, 64, generator=g).to(dt), torch.randn(1, 3, n, 64, generator=g).to(dt))]

    first, second = layers(300), layers(100)  # two earlier waves' KV
    spans = (Span((), 0, 40),  # fresh
             Span(((first, 0, 20),), 40, 250),  # padded-causal
             Span(((first, 0, 200), (second, 20, 100)), 290, 30))  # masked, prefix from two waves
    total = 320
    q = torch.randn(1, 9, total, 64, generator=g).to(dt)
    k, v = (torch.randn(1, 3, total, 64, generator=g).to(dt) for _ in range(2))
    out = packed_attention(0, q, k, v, Packed(spans), 0.125)
    assert out.shape == (1, total, 9, 64)
    for span in spans:
        rows = slice(span.start, span.start + span.length)
        keys = torch.cat([*(kv[0][0][:, :, a:b] for kv, a, b in span.prefix), k[:, :, rows]], dim=2)
        values = torch.cat([*(kv[0][1][:, :, a:b] for kv, a, b in span.prefix), v[:, :, rows]], dim=2)
        assert keys.shape[2] == span.reuse + span.length
        mask = torch.ones(span.length, span.reuse + span.length, dtype=torch.bool).tril(diagonal=span.reuse)
        ref = torch.nn.functional.scaled_dot_product_attention(
            q[:, :, rows], keys, values, attn_mask=mask, scale=0.125, enable_gqa=True)
        torch.testing.assert_close(out[:, rows], ref.transpose(1, 2), rtol=0, atol=1e-6 if dtype == "float32" else 0)
