"""The CPU engine: each wave of the prefix trie packed into one row, decoded in small groups.

On a few cores the linear layers want many rows at once, and padding costs as much as real tokens:
the new tokens of a wave's prompts run as ONE packed forward (:mod:`~ragray.generation.transformers.packed`,
ragray's attention giving each prompt its own prefix pieces), then the prompts decode in groups of
``generation.transformers.batch_size``. Where packing does not apply (a model without ragray's
attention, sliding-window or recurrent layers, ``packed_prefill: false``, a single prompt) the prompts
run one by one in the chain order of :func:`~ragray.generation.transformers.plan.plan_prefills`, each
reusing its sorted predecessor's KV: the same tokens computed, the same numbers.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ragray.config import GenerationConfig
from ragray.generation.engine_counts import EngineCounts
from ragray.generation.transformers.attention import CONTINUATION, GQA_ATTENTION, PACKED
from ragray.generation.transformers.engine import Decoded, Engine, ScoreJob, Store, use_ragray_attention
from ragray.generation.transformers.kv import KVLayers, Piece, cache_layers, make_cache, truncate
from ragray.generation.transformers.packed import Packed, Span
from ragray.generation.transformers.plan import Step, keyed_chain, keyed_waves, pack_spans
from ragray.generation.transformers.row_chunks import chunk_rows
from ragray.progress import calls_done

__all__ = ["CpuEngine"]

log = logging.getLogger(__name__)


class CpuEngine(Engine):
    name = "cpu"

    def __init__(self, model: Any, torch: Any, device: str, config: GenerationConfig, eos: frozenset[int],
                 counts: EngineCounts) -> None:
        if device == "cpu":
            _prepare(model)
        super().__init__(model, torch, device, config, eos, counts)
        # ragray's attention function reads the continuation hint and packed spans; no other would
        self.continuation = getattr(model.config, "_attn_implementation", None) == GQA_ATTENTION
        self.packing = self.continuation and self.prefix_reuse and self.config.transformers.packed_prefill
        if self.config.transformers.prefix_reuse and not self.prefix_reuse:
            log.warning("%s has non-global attention layers (sliding-window or recurrent): prefix reuse and "
                        "batching are off", getattr(model, "name_or_path", "") or "the model")

    # -- generate --------------------------------------------------------------------------------

    def generate(self, seqs: dict[int, list[int]], budgets: dict[int, int]) -> dict[int, Decoded]:
        out: dict[int, Decoded] = {}
        if self.packing and len(seqs) >= 2:
            for waves in keyed_waves(seqs, {i: len(ids) - 1 for i, ids in seqs.items()}):
                self._generate_packed(waves, seqs, budgets, out)
            return out
        steps = keyed_chain(seqs, reuse=self.prefix_reuse)
        previous: Any = None  # layer list of the last prefilled prompt (the next one's source)
        for start in range(0, len(steps), self.batch_size):
            previous = self._run_group(steps[start : start + self.batch_size], seqs, budgets, previous, out)
        return out

    def _generate_packed(self, waves: list[list[Step]], seqs: dict[int, list[int]], budgets: dict[int, int],
                         out: dict[int, Decoded]) -> None:
        """Prefill the prompts wave by wave in packed forwards, then decode them in groups of
        ``batch_size`` in wave order. The prefill time is charged to the first group."""
        began = time.perf_counter()
        kv, firsts = self._prefill_waves(waves, seqs, dict.fromkeys(seqs, 1))
        steps = [s for wave in waves for s in wave]
        for start in range(0, len(steps), self.batch_size):
            group = steps[start : start + self.batch_size]
            computed = sum(len(seqs[s.index]) - s.reuse for s in group)
            self.decode_group([s.index for s in group], [list(kv[s.index]) for s in group],
                              [firsts[s.index] for s in group], seqs, budgets, out, began, computed)
            began = time.perf_counter()

    def _run_group(self, group: list[Step], seqs: dict[int, list[int]], budgets: dict[int, int], previous: Any,
                   out: dict[int, Decoded]) -> Any:
        """Prefill ``group`` (each step reusing the previous prompt's KV), decode it as one batch;
        return the last prompt's KV layers."""
        began = time.perf_counter()
        caches, firsts = [], []
        for step in group:
            cache, logits = self._prefill(seqs[step.index], previous, step.reuse, 1)
            previous = cache_layers(cache) if self.prefix_reuse else None
            caches.append(cache)
            firsts.append(logits)
        single = None if self.global_attention else caches[0]  # the model's own cache type
        rows = [] if single is not None else [
            [(cache_layers(c), 0, len(seqs[s.index]))] for c, s in zip(caches, group)]
        del caches
        computed = sum(len(seqs[s.index]) - s.reuse for s in group)
        self.decode_group([s.index for s in group], rows, firsts, seqs, budgets, out, began, computed, single=single)
        return previous

    # -- score -----------------------------------------------------------------------------------

    def score_rows(self, job: ScoreJob, store: Store) -> None:
        torch = self.torch

        def consume(i: int, logits: Any) -> None:
            logprobs = torch.log_softmax(logits[:-1].float(), dim=-1)
            store(i, logprobs, torch.tensor(job.target(i), device=logprobs.device))
            calls_done(1)

        if self.packing and len(job.fulls) >= 2:
            for waves in keyed_waves(job.fulls, job.caps, first=job.first):
                for i, logits in sorted(self._prefill_waves(waves, job.fulls, job.keep)[1].items()):
                    consume(i, logits)
            return
        previous: Any = None
        for step in keyed_chain(job.fulls, job.caps, reuse=self.prefix_reuse):
            cache, logits = self._prefill(job.fulls[step.index], previous, step.reuse, job.keep[step.index])
            previous = cache_layers(cache) if self.prefix_reuse else None
            consume(step.index, logits)

    # -- prefill ---------------------------------------------------------------------------------

    def _new_cache(self) -> Any:
        from transformers import DynamicCache

        # with the config, sliding-window models get their own layer types
        return DynamicCache(config=self.model.config)

    def _prefill(self, ids: list[int], source: Any, reuse: int, keep: int) -> tuple[Any, Any]:
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

    def _prefill_packed(self, members: list[tuple[list[int], tuple[Piece, ...], int]]
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

    def _prefill_waves(self, waves: list[list[Step]], seqs: dict[int, list[int]], keep: dict[int, int]
                       ) -> tuple[dict[int, tuple[Piece, ...]], dict[int, Any]]:
        """Run the waves, each in packed forwards of at most ``MAX_PACKED_TOKENS`` new tokens.
        Returns every prompt's KV as pieces and the logits of its last ``keep[i]`` positions."""
        kv: dict[int, tuple[Piece, ...]] = {}
        logits: dict[int, Any] = {}
        for wave in waves:
            prefixes = [() if s.parent is None else truncate(kv[s.parent], s.reuse) for s in wave]
            for chunk in pack_spans([len(seqs[s.index]) for s in wave], [s.reuse for s in wave]):
                members = [(seqs[wave[c].index], prefixes[c], keep[wave[c].index]) for c in chunk]
                layers, spans, rows = self._prefill_packed(members)
                for c, span, row in zip(chunk, spans, rows):
                    i = wave[c].index
                    kv[i] = (*span.prefix, (layers, span.start, span.start + span.length))
                    logits[i] = row
        return kv, logits


def _prepare(model: Any) -> None:
    """ragray's attention and norms and MLPs on cache-sized row blocks
    (:mod:`~ragray.generation.transformers.row_chunks`); both idempotent, so another generator on
    the same model changes nothing."""
    use_ragray_attention(model)
    chunk_rows(model)
