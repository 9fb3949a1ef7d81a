"""The attention functions of the transformers backend's exact fast paths.

- :func:`continuation_attention`: a batch-1 prefill that continues a cached prefix, as a padded
  causal call where that is cheaper than the masked one;
- :func:`packed_attention`: a packed prefill (:mod:`ragray.generation.transformers.packed`), each prompt's
  queries attending to its own reused prefix and its own new tokens;
- :func:`gqa_sdpa_attention`: registered with transformers as :data:`GQA_ATTENTION`, it routes a
  forward's attention to the two above (by the :data:`CONTINUATION` / :data:`PACKED` keywords the
  backend passes through the model) or to SDPA with grouped-query folding.

They hold no state and import nothing of ragray: the planners (:mod:`ragray.generation.transformers.kv`,
:mod:`ragray.generation.transformers.packed`) and the backend use them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragray.generation.transformers.packed import Packed

__all__ = [
    "CONTINUATION",
    "GQA_ATTENTION",
    "PACKED",
    "continuation_attention",
    "gqa_sdpa_attention",
    "packed_attention",
    "register_gqa_attention",
]

GQA_ATTENTION = "ragray_sdpa_gqa"
# Keyword a prefill passes through the model to the attention function: "this batch-1 forward
# continues a cached prefix with a plain causal block" (no padding, no other masking).
CONTINUATION = "ragray_continuation"
# Keyword of a packed prefill (:mod:`ragray.generation.transformers.packed`): its :class:`Packed` spans.
PACKED = "ragray_packed"
# Padded-causal pays when (R+S)^2/2 positions at the causal kernel's cost beat S x (R+S) at the
# masked kernel's: measured on torch 2.13 CPU (flash), S x this ratio must exceed R + S.
_PADDED_CAUSAL_RATIO = {"bfloat16": 2.5, "float16": 2.5}
_PADDED_CAUSAL_RATIO_DEFAULT = 2.0
# Masked calls with at most this many queries per row fold the query heads of a KV head into rows.
_FOLD_MAX_QUERIES = 16


def continuation_attention(query: Any, key: Any, value: Any, scale: float | None) -> Any | None:
    """Attention of ``S`` new queries over ``R`` cached + ``S`` new keys (batch 1, each query sees
    every cached key and the new keys up to itself), as a causal call over ``R`` zero queries
    followed by the real ones; ``None`` when the masked kernel is cheaper.

    SDPA's ``is_causal`` aligns the triangle top-left, so with ``R`` leading rows it is exactly the
    continuation mask, and the CPU flash kernel skips the blocks above the diagonal: for the
    ablations that drop an early passage (R small, S long) the masked kernel computes the whole
    ``S x (R+S)`` rectangle, twice the needed work. Row by row the kernel does the same products
    in the same order, so the real rows equal the masked call's output (to the bit on torch 2.13
    CPU in bf16, tested); the zero rows are cut off.
    """
    import torch

    n_new, n_keys = query.shape[-2], key.shape[-2]
    cached = n_keys - n_new
    ratio = _PADDED_CAUSAL_RATIO.get(str(query.dtype).removeprefix("torch."), _PADDED_CAUSAL_RATIO_DEFAULT)
    if query.shape[0] != 1 or cached <= 0 or n_keys >= ratio * n_new:
        return None
    padded = torch.cat([query.new_zeros((1, query.shape[1], cached, query.shape[3])), query], dim=2)
    out = torch.nn.functional.scaled_dot_product_attention(
        padded, key, value, is_causal=True, scale=scale, enable_gqa=query.shape[1] != key.shape[1]
    )
    return out[:, :, cached:]


def gqa_sdpa_attention(
    module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any
) -> Any:
    """transformers' ``sdpa`` attention, except for masked calls of grouped-query models: those
    call SDPA with ``enable_gqa=True`` instead of first repeating every cached key/value head
    ``num_key_value_groups`` times.

    transformers keeps the repeat on CPU whenever a mask is present. A left-padded decoding batch
    always has one: the repeat copied the whole cache every step and layer (~40% of a step for 11
    rows of 1.5k tokens). So does a prefill that continues a reused prefix (the mask is the causal
    one shifted by the prefix): there the repeat cost ~20% of the attention (761 new tokens after
    700 cached, bf16). Both compute the same products in the same order (outputs equal to the bit
    on torch 2.13 CPU, fp32 and bf16, tested). Splitting masked prefills into query chunks gained
    nothing measurable here.

    On CUDA a masked decoding step (1 to 16 queries per row) is folded too, so each cached
    key/value is read once instead of being repeated ``groups`` times first (transformers'
    path with a mask); masked calls of more queries there take transformers' path (SDPA's GQA
    with a mask would run the math kernel).

    Masked calls of 2 to 16 queries per row (decoding steps that verify drafted tokens) fold the
    ``groups`` query heads of each KV head into ``groups x queries`` rows of a plain call: the
    kernel then reads each cached key/value once per KV head instead of once per query head
    (4.98 -> 2.70 ms for 11 rows x 5 queries over 1460 keys, bf16; bit-equal, tested). A single
    query per row keeps the GQA call: the kernel has a faster path for it.

    A packed prefill passes its spans as ``ragray_packed`` (:data:`PACKED`): each prompt's
    queries then attend as in :func:`packed_attention`.

    A prefill that passes ``ragray_continuation=True`` (:data:`CONTINUATION`) may instead run as
    :func:`continuation_attention`'s padded causal call, where that is cheaper.
    """
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    packed = kwargs.pop(PACKED, None)
    if packed is not None:
        return packed_attention(module.layer_idx, query, key, value, packed, kwargs.get("scaling")), None
    if kwargs.pop(CONTINUATION, False) and not kwargs.get("dropout", 0.0):
        out = continuation_attention(query, key, value, kwargs.get("scaling"))
        if out is not None:
            return out.transpose(1, 2).contiguous(), None
    if (
        attention_mask is None
        or attention_mask.dtype != torch.bool
        or getattr(module, "num_key_value_groups", 1) == 1
        or kwargs.get("dropout", 0.0)
        or kwargs.get("position_bias") is not None
    ):
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    mask = attention_mask[:, :, :, : key.shape[-2]]
    batch, heads, n_query, dim = query.shape
    groups = heads // key.shape[1]
    cuda = _on_cuda(query)
    if cuda and n_query > _FOLD_MAX_QUERIES:
        # a padded prefill pass on CUDA: SDPA's GQA with a mask would fall back to the math kernel
        # (the whole score matrix in memory); transformers' path repeats K/V for the efficient one
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    if (1 < n_query or cuda) and n_query <= _FOLD_MAX_QUERIES and mask.shape[1] == 1:
        # a few queries per row (decoding with drafts): the query heads of one KV head become rows
        # of one call, so each cached key/value is read once instead of once per query head
        folded = query.reshape(batch, key.shape[1], groups * n_query, dim)
        mask = mask.expand(batch, groups, n_query, mask.shape[-1]).reshape(batch, 1, groups * n_query, -1)
        out = torch.nn.functional.scaled_dot_product_attention(
            folded, key, value, attn_mask=mask, scale=kwargs.get("scaling")
        ).view(batch, heads, n_query, dim)
    else:
        out = torch.nn.functional.scaled_dot_product_attention(
            query, key, value, attn_mask=mask, scale=kwargs.get("scaling"), enable_gqa=True
        )
    return out.transpose(1, 2).contiguous(), None


def _on_cuda(query: Any) -> bool:
    """Whether the call runs on a GPU (its own function: tests run the CUDA choices on CPU)."""
    return bool(query.is_cuda)


def register_gqa_attention() -> str:
    """Register :func:`gqa_sdpa_attention` (and sdpa's mask builder) under :data:`GQA_ATTENTION`."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(GQA_ATTENTION, gqa_sdpa_attention)
    AttentionMaskInterface.register(GQA_ATTENTION, sdpa_mask)
    return GQA_ATTENTION


def packed_attention(layer: int, query: Any, key: Any, value: Any, packed: Packed, scale: float | None) -> Any:
    """Attention output ``[1, total, heads, dim]`` of a packed forward (``query`` ``[1, H, total, D]``;
    ``key``/``value`` the packed new tokens' ``[1, KV, total, D]``)."""
    import torch

    gqa = query.shape[1] != key.shape[1]
    outs = []
    for span in packed.spans:
        rows = slice(span.start, span.start + span.length)
        q = query[:, :, rows]
        if span.prefix:
            reuse = span.reuse
            k = torch.cat([*(kv[layer][0][:, :, a:b] for kv, a, b in span.prefix), key[:, :, rows]], dim=2)
            v = torch.cat([*(kv[layer][1][:, :, a:b] for kv, a, b in span.prefix), value[:, :, rows]], dim=2)
            out = continuation_attention(q, k, v, scale)
            if out is None:
                mask = torch.ones((span.length, reuse + span.length), dtype=torch.bool,
                                  device=q.device).tril(diagonal=reuse)
                out = torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, attn_mask=mask, scale=scale, enable_gqa=gqa)
        else:
            out = torch.nn.functional.scaled_dot_product_attention(
                q, key[:, :, rows], value[:, :, rows], is_causal=True, scale=scale, enable_gqa=gqa)
        outs.append(out)
    return torch.cat(outs, dim=2).transpose(1, 2).contiguous()
