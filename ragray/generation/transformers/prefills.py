"""The prefills an engine composes with a decoder: one interface, three ways to run the plan's waves.

Every prefill runs the one plan (:func:`~ragray.generation.transformers.plan.keyed_waves`: runs of
waves over the prompts' token trie, each prompt after the KV of the prompt it branches off) and
hands the logits of each prompt's last ``keep[i]`` positions to the caller's ``consume(indices,
logits [B, K, vocab], keeps)`` as they come; with ``hold`` it returns every prompt's KV (as
:data:`~ragray.generation.transformers.kv.Piece` s, or the model's own cache: :class:`Native`) for a
decoder to continue from:

- :class:`PackedPrefill`: a wave's new tokens in ONE packed row, attention per prompt
  (:mod:`~ragray.generation.transformers.packed`): right for a few CPU cores;
- :class:`~ragray.generation.transformers.batched.BatchedPrefill` (padded): a wave in padded passes
  sized from device memory: right for a GPU;
- :class:`SinglePrefill`: one prompt per forward pass: any model (sliding-window and recurrent
  layers included, which take no reuse and keep their own cache type), any attention function.

They compute the same numbers (exactly in float32 on CPU, to rounding elsewhere: the tests compare
each against one plain forward per prompt).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ragray.generation.engine_counts import EngineCounts
from ragray.generation.transformers.attention import CONTINUATION, PACKED
from ragray.generation.transformers.kv import KVLayers, Piece, cache_layers, make_cache, truncate
from ragray.generation.transformers.packed import Packed, Span
from ragray.generation.transformers.plan import MAX_PLAN_TOKENS, Step, keyed_waves, pack_spans

__all__ = ["PREFILLS", "Consume", "Native", "PackedPrefill", "Prefill", "SinglePrefill", "first_ahead"]

#: the prefills by name (``generation.transformers.prefill``)
PREFILLS = ("packed", "padded", "single")

#: what a prefill hands its caller as logits arrive: the prompts' keys, the logits of their last
#: ``K`` positions ``[B, K, vocab]`` (right-aligned) and, per prompt, how many of those are its own
Consume = Callable[[list[int], Any, list[int]], None]


@dataclass(frozen=True)
class Native:
    """A prompt's KV in the model's own cache type (sliding-window or recurrent layers: it cannot be
    cut into pieces or stacked; decoded alone, eagerly)."""

    cache: Any


class Prefill:
    """What every prefill offers (see the module docstring)."""

    name = ""
    #: tokens of one forward pass, where a prefill sizes them (the padded one)
    tokens_per_pass: int | None = None

    def __init__(self, model: Any, torch: Any, device: str, *, keep_arg: str | None, counts: EngineCounts,
                 plan_tokens: int = MAX_PLAN_TOKENS) -> None:
        self.model, self.torch, self.device = model, torch, device
        self.keep_arg, self.counts, self.plan_tokens = keep_arg, counts, plan_tokens

    def run(self, seqs: dict[int, list[int]], caps: dict[int, int], keep: dict[int, int], consume: Consume,
            *, hold: bool = False, first: int | None = None) -> dict[int, Any]:
        """Prefill every prompt of ``seqs`` (its reuse capped by ``caps[i]``), handing ``consume``
        the logits of its last ``keep[i]`` positions (``first``, if given, before any other). With
        ``hold``, every prompt's KV, in the order to decode them."""
        raise NotImplementedError

    def plan(self, *, tokens_per_pass: int, plan_tokens: int, memory_tokens: int | None = None,
             plan_bytes: int | None = None) -> None:
        """New sizes, read at a call's start (the padded prefill's; the others keep the plan bound)."""
        self.plan_tokens = plan_tokens

    def drop_carried(self) -> None:
        """Forget KV carried between calls (only the padded prefill carries any)."""

    def release(self) -> None:
        """Drop the model and every KV held (the generator is closing)."""
        self.model = None

    def _new_cache(self) -> Any:
        from transformers import DynamicCache

        # with the config, sliding-window models get their own layer types
        return DynamicCache(config=self.model.config)


def first_ahead(keys: list[int], first: int | None) -> list[int]:
    """``keys`` with ``first`` (when among them) moved to the front, the rest in their order."""
    return keys if first not in keys else [first, *(k for k in keys if k != first)]


class SinglePrefill(Prefill):
    """One prompt per forward pass, each after the KV of the prompt it branches off in the plan
    (copied into a cache of its own: a source is never written to). ``continuation``: the model runs
    ragray's attention, which may run a continuation as a padded causal call (same numbers);
    ``global_attention`` False: the model's own cache (sliding-window, recurrent), no reuse."""

    name = "single"

    def __init__(self, model: Any, torch: Any, device: str, *, keep_arg: str | None, counts: EngineCounts,
                 continuation: bool, global_attention: bool, plan_tokens: int = MAX_PLAN_TOKENS) -> None:
        super().__init__(model, torch, device, keep_arg=keep_arg, counts=counts, plan_tokens=plan_tokens)
        self.continuation, self.global_attention = continuation, global_attention

    def run(self, seqs: dict[int, list[int]], caps: dict[int, int], keep: dict[int, int], consume: Consume,
            *, hold: bool = False, first: int | None = None) -> dict[int, Any]:
        held: dict[int, Any] = {}
        for waves in keyed_waves(seqs, caps, self.plan_tokens, first):
            parents = {s.parent for wave in waves for s in wave if s.parent is not None}
            kv: dict[int, KVLayers] = {}
            for wave in waves:
                for step in sorted(wave, key=lambda s: s.index != first):
                    ids = seqs[step.index]
                    cache, logits = self.forward(ids, kv.get(step.parent), step.reuse, keep[step.index])
                    consume([step.index], logits[None], [keep[step.index]])
                    layers = cache_layers(cache) if self.global_attention else None
                    if step.index in parents:
                        kv[step.index] = layers
                    if hold:
                        held[step.index] = ((layers, 0, len(ids)),) if layers is not None else Native(cache)
                    del cache
        return held

    def forward(self, ids: list[int], source: KVLayers | None, reuse: int, keep: int) -> tuple[Any, Any]:
        """Run ``ids[reuse:]`` after the first ``reuse`` positions of ``source`` (a layer list).
        Returns the prompt's full cache and the logits of its last ``keep`` positions (``[keep, vocab]``)."""
        torch = self.torch
        cache = make_cache(source, reuse, len(ids)) if reuse else self._new_cache()
        positions = torch.arange(reuse, len(ids), device=self.device)
        kwargs: dict[str, Any] = {self.keep_arg: keep} if self.keep_arg else {}
        self.counts.add(forward_passes=1, tokens_computed=len(ids) - reuse)
        if reuse and self.continuation:  # the attention may run this as a padded causal call
            kwargs[CONTINUATION] = True
        result = self.model(input_ids=torch.tensor([ids[reuse:]], device=self.device), position_ids=positions[None],
                            cache_position=positions, past_key_values=cache, use_cache=True, **kwargs)
        return result.past_key_values, result.logits[0, -keep:, :]


class PackedPrefill(Prefill):
    """Each wave's new tokens in packed forwards of at most ``MAX_PACKED_TOKENS`` (ragray's attention
    gives each prompt its own prefix pieces, :mod:`~ragray.generation.transformers.packed`); a call of
    one prompt runs as :class:`SinglePrefill` (nothing to pack). A run's logits go to ``consume``
    when its waves are done, ``first`` first, then by key."""

    name = "packed"

    def __init__(self, model: Any, torch: Any, device: str, *, keep_arg: str | None, counts: EngineCounts,
                 single: SinglePrefill, plan_tokens: int = MAX_PLAN_TOKENS) -> None:
        super().__init__(model, torch, device, keep_arg=keep_arg, counts=counts, plan_tokens=plan_tokens)
        self.single = single

    def plan(self, *, tokens_per_pass: int, plan_tokens: int, memory_tokens: int | None = None,
             plan_bytes: int | None = None) -> None:
        super().plan(tokens_per_pass=tokens_per_pass, plan_tokens=plan_tokens)
        self.single.plan(tokens_per_pass=tokens_per_pass, plan_tokens=plan_tokens)

    def release(self) -> None:
        super().release()
        self.single.release()

    def run(self, seqs: dict[int, list[int]], caps: dict[int, int], keep: dict[int, int], consume: Consume,
            *, hold: bool = False, first: int | None = None) -> dict[int, Any]:
        if len(seqs) < 2:
            return self.single.run(seqs, caps, keep, consume, hold=hold, first=first)
        held: dict[int, Any] = {}
        for waves in keyed_waves(seqs, caps, self.plan_tokens, first):
            kv, logits = self._waves(waves, seqs, keep)
            for i in first_ahead(sorted(logits), first):
                consume([i], logits.pop(i)[None], [keep[i]])
            if hold:
                held.update((s.index, kv[s.index]) for wave in waves for s in wave)
        return held

    def _waves(self, waves: list[list[Step]], seqs: dict[int, list[int]], keep: dict[int, int]
               ) -> tuple[dict[int, tuple[Piece, ...]], dict[int, Any]]:
        """Run the waves in packed forwards. Returns every prompt's KV as pieces and the logits of
        its last ``keep[i]`` positions."""
        kv: dict[int, tuple[Piece, ...]] = {}
        logits: dict[int, Any] = {}
        for wave in waves:
            prefixes = [() if s.parent is None else truncate(kv[s.parent], s.reuse) for s in wave]
            for chunk in pack_spans([len(seqs[s.index]) for s in wave], [s.reuse for s in wave]):
                members = [(seqs[wave[c].index], prefixes[c], keep[wave[c].index]) for c in chunk]
                layers, spans, rows = self._forward(members)
                for c, span, row in zip(chunk, spans, rows):
                    i = wave[c].index
                    kv[i] = (*span.prefix, (layers, span.start, span.start + span.length))
                    logits[i] = row
        return kv, logits

    def _forward(self, members: list[tuple[list[int], tuple[Piece, ...], int]]
                 ) -> tuple[KVLayers, list[Span], list[Any]]:
        """One forward over the new tokens of ``members`` (``(ids, prefix, keep)``: the ids after
        the positions the KV ``prefix`` pieces hold, logits of the last ``keep`` positions wanted).
        Returns the packed KV layers, each member's :class:`Span` in them and its logits."""
        torch = self.torch
        spans, ids, positions, keep = [], [], [], []
        for tokens, prefix, n_keep in members:
            span = Span(prefix, len(ids), len(tokens) - sum(end - begin for _, begin, end in prefix))
            spans.append(span)
            ids += tokens[span.reuse :]
            positions += range(span.reuse, len(tokens))
            keep += range(len(ids) - n_keep, len(ids))
        index = torch.tensor(keep, device=self.device)
        self.counts.add(forward_passes=1, tokens_computed=len(ids))
        kwargs: dict[str, Any] = {PACKED: Packed(tuple(spans))}
        if self.keep_arg:
            kwargs[self.keep_arg] = index
        result = self.model(
            input_ids=torch.tensor([ids], device=self.device),
            position_ids=torch.tensor([positions], device=self.device),
            attention_mask=torch.ones((1, 1, 1, 1), dtype=torch.bool, device=self.device),  # unused
            past_key_values=self._new_cache(),
            use_cache=True,
            **kwargs,
        )
        logits = result.logits[0] if self.keep_arg else result.logits[0, index]
        return cache_layers(result.past_key_values), spans, list(logits.split([m[2] for m in members]))
