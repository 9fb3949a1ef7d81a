"""Exact prefix reuse for a batch of tokenized prompts (the transformers backend's prefix cache).

The ablations of one question share long token prefixes: the prompt without passage i is the
baseline up to passage i. In a causal decoder the keys/values at positions ``< t`` depend only on
tokens ``< t``, so the KV cache of any prompt, cut to ``t`` tokens, *is* the KV cache of its first
``t`` tokens. One forward pass over the baseline therefore yields the KV of every prefix of it.

Which prompt reuses which is planned in :mod:`~ragray.generation.transformers.plan`. The KV helpers
here work on "layer lists": one ``(keys, values)`` pair per decoder layer, each of
shape ``[batch, kv_heads, seq, head_dim]``, with positional encoding (RoPE) already applied to the
keys — which is why cached keys can be moved to other columns (left padding) without recomputation.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from ragray.generation.transformers.transfer import to_device

__all__ = [
    "BatchRow",
    "KVLayers",
    "Piece",
    "cache_layers",
    "kv_bytes",
    "make_cache",
    "stack_pieces",
    "supports_prefix_reuse",
    "truncate",
]

KVLayers = list[tuple[Any, Any]]  # [(keys, values)] per layer, torch tensors
Piece = tuple[KVLayers, int, int]  # positions [start, end) of a layer list


class BatchRow(Sequence):
    """Row ``row`` of a batched layer list, as the batch-1 layer list a :data:`Piece` holds.

    Indexing gives ``(keys[row:row+1], values[row:row+1])`` of a layer, so it reads as any layer
    list; :func:`stack_pieces` copies the pieces of many rows of one batch with a few indexed
    copies per layer instead of a copy per row and layer (a padded pass of the gpu strategy hands
    its rows' KV on this way: no per-row slices of every layer made up front)."""

    __slots__ = ("layers", "row")

    def __init__(self, layers: KVLayers, row: int) -> None:
        self.layers, self.row = layers, row

    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, layer: Any) -> Any:
        if isinstance(layer, slice):
            return [self[i] for i in range(len(self))[layer]]
        keys, values = self.layers[layer]
        return keys[self.row : self.row + 1], values[self.row : self.row + 1]


def truncate(pieces: Sequence[Piece], length: int) -> tuple[Piece, ...]:
    """The pieces covering a prompt's first ``length`` positions."""
    out: list[Piece] = []
    for layers, begin, end in pieces:
        if length <= 0:
            break
        take = min(end - begin, length)
        out.append((layers, begin, begin + take))
        length -= take
    return tuple(out)


def kv_bytes(held: Sequence[Sequence[Piece]]) -> int:
    """Bytes of memory the KV pieces of ``held`` (one prompt's pieces each) keep alive, every storage
    once: a padded pass's rows share their pass's cache, which stays whole while any row is held,
    and a prompt reusing another's KV shares that storage."""
    sources: dict[int, Any] = {}
    for pieces in held:
        for layers, _, _ in pieces:
            source = layers.layers if isinstance(layers, BatchRow) else layers
            sources.setdefault(id(source), source)
    storages: dict[int, int] = {}
    for source in sources.values():
        for pair in source:
            for tensor in pair:
                storage = tensor.untyped_storage()
                storages[storage.data_ptr() or id(tensor)] = storage.nbytes()  # 0: no memory (meta)
    return sum(storages.values())


def supports_prefix_reuse(model_config: Any) -> bool:
    """True when every decoder layer is full (global) causal attention.

    Sliding-window layers keep only the last W positions and recurrent / linear-attention layers
    keep a state instead of per-position KV: cutting those caches to a prefix is not exact.
    """
    get_text = getattr(model_config, "get_text_config", None)
    cfg = get_text(decoder=True) if callable(get_text) else model_config
    layer_types = getattr(cfg, "layer_types", None)
    if layer_types:
        return all(t == "full_attention" for t in layer_types)
    return not (getattr(cfg, "sliding_window", None) and getattr(cfg, "use_sliding_window", True))


def cache_layers(cache: Any) -> KVLayers:
    """The ``(keys, values)`` per layer of a transformers cache (each ``[B, H, seq, D]``)."""
    return [(layer.keys, layer.values) for layer in cache.layers]


@lru_cache(maxsize=1)
def _preallocated_layer() -> type:
    """A full-attention cache layer that writes into buffers sized up front.

    transformers' ``DynamicLayer`` concatenates on every update, copying the whole cache each
    decoding step; for a batch of ~1.5k-token rows that copy costs as much as the step itself.
    The class is built on first use so that importing ragray does not import transformers.
    """
    from transformers.cache_utils import DynamicLayer

    class PreallocatedLayer(DynamicLayer):
        """Positions ``[0, length)`` of ``[B, H, capacity, D]`` buffers are the cache."""

        def __init__(self, key_buffer: Any, value_buffer: Any, length: int) -> None:
            super().__init__()
            self._k, self._v, self._length = key_buffer, value_buffer, length
            self.dtype, self.device = key_buffer.dtype, key_buffer.device
            self.is_initialized = True
            self._expose()

        def _expose(self) -> None:
            self.keys = self._k[:, :, : self._length]
            self.values = self._v[:, :, : self._length]

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            end = self._length + key_states.shape[-2]
            if end > self._k.shape[-2]:  # out of room: grow (not expected when sized from the budget)
                grow = max(end, 2 * self._k.shape[-2]) - self._k.shape[-2]
                self._k = _pad_seq(self._k, grow)
                self._v = _pad_seq(self._v, grow)
            self._k[:, :, self._length : end] = key_states
            self._v[:, :, self._length : end] = value_states
            self._length = end
            self._expose()
            return self.keys, self.values

        def batch_select_indices(self, indices: Any) -> None:
            self._k, self._v = self._k[indices], self._v[indices]
            self._expose()

        def crop(self, tokens_to_remove: int) -> None:
            self._length = max(self._length - abs(tokens_to_remove), 0)
            self._expose()

    return PreallocatedLayer


def _pad_seq(buffer: Any, extra: int) -> Any:
    import torch

    shape = list(buffer.shape)
    shape[2] = extra
    return torch.cat([buffer, buffer.new_empty(shape)], dim=2)


def _buffer(like: Any, batch: int, capacity: int) -> Any:
    return like.new_empty((batch, like.shape[1], capacity, like.shape[3]))


def make_cache(layers: KVLayers, length: int, capacity: int) -> Any:
    """A cache holding the first ``length`` positions of ``layers`` with room for ``capacity``.

    The source layers are copied, never written to, so one prefilled prompt can seed the caches
    of several others.
    """
    from transformers.cache_utils import Cache

    layer_class = _preallocated_layer()
    out = []
    for keys, values in layers:
        k, v = _buffer(keys, keys.shape[0], capacity), _buffer(values, values.shape[0], capacity)
        k[:, :, :length] = keys[:, :, :length]
        v[:, :, :length] = values[:, :, :length]
        out.append(layer_class(k, v, length))
    return Cache(layers=out)


def stack_pieces(rows: Sequence[Sequence[Piece]], room: int, *, left: bool = False) -> tuple[Any, Any]:
    """Stack rows of KV into one batch, right-aligned (left padding; ``left``: left-aligned, the
    padding after each row); a row is a sequence of pieces of layer lists: one prompt's own
    cache, or the pieces of earlier packed waves it reuses followed by its span of a packed
    prefill (:mod:`ragray.generation.transformers.packed`). A row may be empty (all padding), not every row.

    Returns ``(cache, attention_mask)``: a cache of ``[B, H, width, D]`` per layer (``width`` the
    longest row, with room for ``room`` more positions) and a ``[B, width]`` long mask with 0 on
    the padding columns. Decoding then appends every row's next token in the same column, with the
    row's own ``position_ids``; keys carry their rotary encoding already, so moving them is exact.
    Padding holds zeros: masked weights are exactly 0, and 0 times a finite value stays 0.
    """
    import torch
    from transformers.cache_utils import Cache

    lengths = [sum(end - start for _, start, end in row) for row in rows]
    width, batch = max(lengths), len(rows)
    first = next(row for row in rows if row)[0][0]
    mask = torch.zeros((batch, width), dtype=torch.long, device=first[0][0].device)
    for b, n in enumerate(lengths):
        mask[b, slice(0, n) if left else slice(width - n, width)] = 1
    layer_class = _preallocated_layer()
    keys = [_buffer(first[layer][0], batch, width + room) for layer in range(len(first))]
    values = [_buffer(first[layer][1], batch, width + room) for layer in range(len(first))]
    # padding zeroed whole (one fill per layer); pieces that are rows of one batch (BatchRow)
    # copied with one indexed copy per layer and batch, the others in one foreach call: a loop of
    # copies was ~8k launches per padded pass of an 8B model, ~50 ms of host time, the GPU idle
    torch._foreach_zero_([buf[:, :, :width] for buf in keys + values])
    targets, sources = [], []
    batched: dict[int, tuple[KVLayers, list[tuple[int, int, int, int, int]]]] = {}
    for b, (row, n) in enumerate(zip(rows, lengths)):
        at = 0 if left else width - n
        for source, start, end in row:
            if isinstance(source, BatchRow):
                batched.setdefault(id(source.layers), (source.layers, []))[1].append(
                    (b, at, source.row, start, end - start))
            else:
                span = slice(at, at + end - start)
                for layer, (k, v) in enumerate(source):
                    targets += (keys[layer][b, :, span], values[layer][b, :, span])
                    sources += (k[0, :, start:end], v[0, :, start:end])
            at += end - start
    if targets:
        torch._foreach_copy_(targets, sources)
    for layer_list, spans in batched.values():
        _copy_rows(torch, keys, values, layer_list, spans)
    layers = [layer_class(k, v, width) for k, v in zip(keys, values)]
    return Cache(layers=layers), mask


def _copy_rows(torch: Any, keys: list[Any], values: list[Any], source: KVLayers,
               spans: list[tuple[int, int, int, int, int]]) -> None:
    """Copy ``(b, at, row, start, length)`` spans: positions ``[start, start + length)`` of row
    ``row`` of ``source`` into positions ``[at, at + length)`` of row ``b`` of ``keys``/``values``,
    two indexed copies per layer (gather, scatter) whatever the number of spans."""
    device = keys[0].device
    b, at, row, start, length = torch.tensor(spans, dtype=torch.long).unbind(1)
    total = int(length.sum())
    offset = torch.arange(total) - torch.repeat_interleave(length.cumsum(0) - length, length)
    index = torch.stack([torch.repeat_interleave(b, length), torch.repeat_interleave(at, length) + offset,
                         torch.repeat_interleave(row, length), torch.repeat_interleave(start, length) + offset])
    tb, tc, sb, sc = to_device(torch, str(device), index)[0].unbind(0)
    for layer, (k, v) in enumerate(source):
        # [B, H, S, D] seen as [B, S, H, D]: one (row, position) pair indexes a [H, D] block
        keys[layer].transpose(1, 2)[tb, tc] = k.transpose(1, 2)[sb, sc]
        values[layer].transpose(1, 2)[tb, tc] = v.transpose(1, 2)[sb, sc]
