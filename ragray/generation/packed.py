"""Packed prefill: the new tokens of many prompts that continue prefixes of one "trunk" prompt, in
one forward pass.

Drop-one ablations are the baseline with one passage cut out: each shares with the baseline its
prompt up to the removed passage, and only the rest must be computed. Run one by one, those rests
(a few hundred to ~1.3k tokens each) give the linear layers small matrices: on a 2-core AMX Xeon
bf16 GEMMs reach ~300 GFLOP/s at 150 rows and ~700 at 4000. Packed, every linear layer, norm and
activation runs once over all of them (~8k rows for HotpotQA k = 10), and only attention is done
per prompt: :func:`packed_attention` gives each prompt's queries the trunk's cached keys up to its
shared prefix plus its own new keys, causally, exactly what a separate prefill would see.

The trunk is the prompt that shares the most prefix tokens with the others (the baseline, for
drop-one). :func:`trunk_plan` takes it only when its reuse is about as good as the sorted chain of
:func:`~ragray.generation.kv_prefix.plan_prefills` (random-subset ablations share more with their
sorted neighbours than with any single prompt: those stay on the chain).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragray.generation.kv_prefix import (
    KVLayers,
    common_prefix_len,
    continuation_attention,
)

__all__ = ["MAX_PACKED_TOKENS", "Packed", "Span", "pack_spans", "packed_attention", "trunk_plan"]

# Rows of one packed forward, at most: bounds the activations (~8 x this x hidden values at once).
MAX_PACKED_TOKENS = 16384

@dataclass(frozen=True)
class Span:
    """One prompt in a packed forward: rows ``[start, start + length)`` of the packed input are its
    positions ``[reuse, reuse + length)``; positions below ``reuse`` are the trunk's."""

    reuse: int
    start: int
    length: int


@dataclass(frozen=True)
class Packed:
    """What :func:`packed_attention` needs besides q/k/v: the trunk's KV and the spans."""

    trunk: KVLayers
    spans: tuple[Span, ...]


def trunk_plan(
    seqs: Sequence[Sequence[int]], caps: Sequence[int], chain_tokens: int, slack: float = 1.05
) -> tuple[int, list[int]] | None:
    """``(trunk, reuse)``: the prompt to prefill first and how many of its leading tokens every
    other prompt reuses (``reuse[trunk] == 0``), when that computes at most ``slack`` times the
    ``chain_tokens`` of the chained plan; else ``None``. ``caps[j]`` bounds prompt ``j``'s reuse."""
    import numpy as np

    if len(seqs) < 3:
        return None
    arrays = [np.asarray(s, dtype=np.int64) for s in seqs]
    best: tuple[int, int, list[int]] | None = None
    for t, trunk in enumerate(arrays):
        reuse = [0 if j == t else max(0, min(common_prefix_len(trunk, a), caps[j])) for j, a in enumerate(arrays)]
        tokens = sum(len(s) for s in seqs) - sum(reuse)
        if best is None or tokens < best[0]:
            best = (tokens, t, reuse)
    assert best is not None
    tokens, t, reuse = best
    return (t, reuse) if tokens <= slack * chain_tokens else None


def pack_spans(lengths: Sequence[int], reuse: Sequence[int], limit: int = MAX_PACKED_TOKENS) -> list[list[int]]:
    """Prompt indices in packed forwards of at most ``limit`` new tokens (one prompt alone may
    exceed it), in order."""
    chunks: list[list[int]] = []
    size = 0
    for i, (n, r) in enumerate(zip(lengths, reuse)):
        new = n - r
        if chunks and size + new <= limit:
            chunks[-1].append(i)
            size += new
        else:
            chunks.append([i])
            size = new
    return chunks


def packed_attention(layer: int, query: Any, key: Any, value: Any, packed: Packed, scale: float | None) -> Any:
    """Attention output ``[1, total, heads, dim]`` of a packed forward (``query`` ``[1, H, total, D]``;
    ``key``/``value`` the packed new tokens' ``[1, KV, total, D]``)."""
    import torch

    trunk_k, trunk_v = packed.trunk[layer]
    gqa = query.shape[1] != key.shape[1]
    outs = []
    for span in packed.spans:
        rows = slice(span.start, span.start + span.length)
        q = query[:, :, rows]
        if span.reuse:
            k = torch.cat([trunk_k[:, :, : span.reuse], key[:, :, rows]], dim=2)
            v = torch.cat([trunk_v[:, :, : span.reuse], value[:, :, rows]], dim=2)
            out = continuation_attention(q, k, v, scale)
            if out is None:
                mask = torch.ones((span.length, span.reuse + span.length), dtype=torch.bool,
                                  device=q.device).tril(diagonal=span.reuse)
                out = torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, attn_mask=mask, scale=scale, enable_gqa=gqa)
        else:
            out = torch.nn.functional.scaled_dot_product_attention(
                q, key[:, :, rows], value[:, :, rows], is_causal=True, scale=scale, enable_gqa=gqa)
        outs.append(out)
    return torch.cat(outs, dim=2).transpose(1, 2).contiguous()
