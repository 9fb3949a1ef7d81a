"""Prefix-reuse planning: hand-checkable token lists (no model needed)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ragray.generation.transformers.kv import supports_prefix_reuse
from ragray.generation.transformers.plan import Step
from ragray.generation.transformers.plan import common_prefix_len, plan_prefills, prefill_token_count


def test_common_prefix_len() -> None:
    assert common_prefix_len([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix_len([1, 2], [1, 2, 3]) == 2
    assert common_prefix_len([], [1]) == 0
    assert common_prefix_len([5], [6]) == 0


def test_plan_sorts_and_reuses_the_predecessor() -> None:
    base = [1, 2, 3, 4, 5]
    drop_a = [1, 2, 4, 5]  # shares [1, 2] with base
    drop_b = [1, 2, 3, 5]  # shares [1, 2, 3] with base
    steps = plan_prefills([base, drop_a, drop_b])
    # token order: base (1,2,3,4,..) < drop_b (1,2,3,5) < drop_a (1,2,4,..)
    assert steps == [
        Step(0, None, 0),  # [1,2,3,4,5]
        Step(2, 0, 3),  # [1,2,3,5] after base: 3 shared
        Step(1, 2, 2),  # [1,2,4,5] after drop_b: 2 shared
    ]
    assert prefill_token_count([base, drop_a, drop_b], steps) == 5 + 1 + 2


def test_plan_reaches_the_trie_size() -> None:
    # the minimum any exact scheme can run is the number of nodes of the token trie
    seqs = [[7, 1, 2], [7, 1, 3], [7, 4], [8], [7, 1, 2, 9]]
    trie = {tuple(s[: i + 1]) for s in seqs for i in range(len(s))}
    assert prefill_token_count(seqs, plan_prefills(seqs)) == len(trie)


def test_plan_always_runs_one_token_and_respects_caps() -> None:
    seqs = [[1, 2, 3], [1, 2, 3]]  # duplicates: the second still runs its last token
    assert plan_prefills(seqs) == [Step(0, None, 0), Step(1, 0, 2)]
    capped = plan_prefills(seqs, max_reuse=[0, 1])
    assert capped[1] == Step(1, 0, 1)
    assert plan_prefills([[1, 2], [1, 3]], max_reuse=[0, 0])[1] == Step(1, None, 0)


def test_plan_without_reuse_keeps_input_order() -> None:
    assert plan_prefills([[2], [1]], reuse=False) == [Step(0, None, 0), Step(1, None, 0)]
    assert plan_prefills([]) == []


def test_supports_prefix_reuse_only_for_global_attention() -> None:
    def cfg(**kw: object) -> SimpleNamespace:
        return SimpleNamespace(**kw)

    assert supports_prefix_reuse(cfg())  # plain llama-style config
    assert supports_prefix_reuse(cfg(layer_types=["full_attention"] * 2))
    assert not supports_prefix_reuse(cfg(layer_types=["full_attention", "sliding_attention"]))
    assert not supports_prefix_reuse(cfg(sliding_window=4096))
    assert supports_prefix_reuse(cfg(sliding_window=4096, use_sliding_window=False))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("q_len", [1, 5, 16, 37, 300])
def test_gqa_attention_equals_the_repeated_heads_to_the_bit(dtype, q_len) -> None:
    """Masked calls (decoding steps, prefills after a reused prefix) skip the head repeat exactly."""
    torch = pytest.importorskip("torch")
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from ragray.generation.transformers.attention import gqa_sdpa_attention

    g = torch.Generator().manual_seed(q_len)
    dt = getattr(torch, dtype)
    k_len = 512
    q = torch.randn(2, 9, q_len, 64, generator=g).to(dt)
    k, v = (torch.randn(2, 3, k_len, 64, generator=g).to(dt) for _ in range(2))
    mask = torch.ones(q_len, k_len, dtype=torch.bool).tril(diagonal=k_len - q_len)[None, None].repeat(2, 1, 1, 1)
    mask[1, :, :, :40] = False  # left padding of the second row
    module = SimpleNamespace(num_key_value_groups=3, is_causal=True, training=False)
    ours, _ = gqa_sdpa_attention(module, q, k, v, mask, scaling=0.125)
    ref, _ = sdpa_attention_forward(module, q, k, v, mask, scaling=0.125)
    assert torch.equal(ours, ref)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize(("cached", "new"), [(40, 600), (300, 400), (1, 64)])
def test_continuation_as_padded_causal_equals_the_masked_call(dtype, cached, new) -> None:
    """A prefill after a reused prefix, run as one causal call over zero rows + the new queries,
    gives the masked call's rows (bit-equal in bf16 on this torch; fp32 to rounding)."""
    torch = pytest.importorskip("torch")
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from ragray.generation.transformers.attention import CONTINUATION, continuation_attention, gqa_sdpa_attention

    g = torch.Generator().manual_seed(cached + new)
    dt = getattr(torch, dtype)
    q = torch.randn(1, 9, new, 64, generator=g).to(dt)
    k, v = (torch.randn(1, 3, cached + new, 64, generator=g).to(dt) for _ in range(2))
    mask = torch.ones(new, cached + new, dtype=torch.bool).tril(diagonal=cached)[None, None]
    module = SimpleNamespace(num_key_value_groups=3, is_causal=True, training=False)
    assert continuation_attention(q, k, v, 0.125) is not None  # these shapes take the padded path
    ours, _ = gqa_sdpa_attention(module, q, k, v, mask, scaling=0.125, **{CONTINUATION: True})
    ref, _ = sdpa_attention_forward(module, q, k, v, mask, scaling=0.125)
    assert ours.shape == ref.shape
    if dt == torch.bfloat16:
        assert torch.equal(ours, ref)
    else:
        torch.testing.assert_close(ours, ref, rtol=0, atol=1e-6)


def test_continuation_falls_back_to_the_mask_where_it_does_not_pay() -> None:
    torch = pytest.importorskip("torch")
    from ragray.generation.transformers.attention import continuation_attention

    def shapes(batch: int, cached: int, new: int, dt=torch.bfloat16):
        return (torch.zeros(batch, 9, new, 64, dtype=dt), torch.zeros(batch, 3, cached + new, 64, dtype=dt),
                torch.zeros(batch, 3, cached + new, 64, dtype=dt), None)

    assert continuation_attention(*shapes(1, 0, 100)) is None  # nothing cached: a plain causal prefill
    assert continuation_attention(*shapes(2, 10, 100)) is None  # batches carry padding masks
    assert continuation_attention(*shapes(1, 1000, 100)) is None  # the zero rows would cost more
    assert continuation_attention(*shapes(1, 100, 100)) is not None  # 200 < 2.5 x 100 (bf16)
    assert continuation_attention(*shapes(1, 100, 100, torch.float32)) is None  # fp32: 200 >= 2 x 100


@pytest.mark.parametrize("left", [False, True])
def test_batch_rows_stack_like_their_per_row_slices(left) -> None:
    """Pieces that are rows of a batch (BatchRow: a padded pass's output) stack exactly as the
    same rows sliced out one by one, mixed with ordinary pieces in one row, either alignment."""
    import torch

    from ragray.generation.transformers.kv import BatchRow, stack_pieces

    g = torch.Generator().manual_seed(3)
    layers = [(torch.randn(4, 2, 9, 3, generator=g), torch.randn(4, 2, 9, 3, generator=g)) for _ in range(3)]
    other = [(torch.randn(1, 2, 5, 3, generator=g), torch.randn(1, 2, 5, 3, generator=g)) for _ in range(3)]

    def sliced(b: int) -> list:
        return [(k[b : b + 1], v[b : b + 1]) for k, v in layers]

    spans = [((2, 1, 7),), ((0, 0, 9),), ((3, 4, 6), "other"), ()]
    rows_fast, rows_slow = [], []
    for row in spans:
        fast, slow = [], []
        for piece in row:
            if piece == "other":
                fast.append((other, 1, 4))
                slow.append((other, 1, 4))
            else:
                b, start, end = piece
                fast.append((BatchRow(layers, b), start, end))
                slow.append((sliced(b), start, end))
        rows_fast.append(tuple(fast))
        rows_slow.append(tuple(slow))
    assert BatchRow(layers, 2)[1][0].shape == (1, 2, 9, 3) and len(BatchRow(layers, 2)) == 3
    fast_cache, fast_mask = stack_pieces(rows_fast, 2, left=left)
    slow_cache, slow_mask = stack_pieces(rows_slow, 2, left=left)
    assert torch.equal(fast_mask, slow_mask)
    width = fast_mask.shape[1]
    for a, b in zip(fast_cache.layers, slow_cache.layers):
        assert torch.equal(a.keys[:, :, :width], b.keys[:, :, :width])
        assert torch.equal(a.values[:, :, :width], b.values[:, :, :width])
    # the row of 6 + 3 positions: its batch piece then the other piece, padding zero
    k = fast_cache.layers[1].keys
    at = 0 if left else width - 5
    assert torch.equal(k[2, :, at : at + 2], layers[1][0][3, :, 4:6])
    assert torch.equal(k[2, :, at + 2 : at + 5], other[1][0][0, :, 1:4])
    assert not k[3, :, :width].any()  # the empty row: all padding
