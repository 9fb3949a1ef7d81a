"""Batched prefill: the GPU strategy's way to run many prompts' tokens in few, large forward passes.

A GPU is fed by wide batches: one forward pass of 16 x 1,000 tokens costs about what one of 1,000
tokens costs plus its arithmetic, and each pass launches every kernel of every layer. The CPU
engine (:mod:`ragray.generation.transformers.packed`) packs prompts into one row and loops over
them in attention, right for 2 cores; here the prompts of one wave of the prefix trie
(:func:`~ragray.generation.transformers.plan.wave_plan`) go through the model as ONE padded batch:

- each prompt reuses the KV of the prompt it branches off (an earlier wave's) for its shared prefix
  and runs only its own rest; the rest is right-aligned in the batch, so the positions whose logits
  are wanted (a prompt's last token, an answer's tokens) are the batch's last columns and the model
  computes logits only there (``logits_to_keep``), never over the whole prompt;
- one boolean mask ``[B, 1, S, R + S]`` gives row ``b``'s queries its reused prefix (the first
  ``reuse_b`` of ``R`` prefix columns) and its own tokens causally; padding queries see only
  themselves (a fully masked row would give NaN, and NaN times a zero weight is NaN);
- the prompts of a generate call and their KV are carried into the next calls: a prompt that
  shares at least as long a prefix with a carried prompt as with its parent in the trie starts
  from the carried KV instead (a question's scoring prompts are its baseline prompt plus the
  answer, and its ablations: they then run in one wave, none of them computing the baseline again);
- waves are cut into passes of at most ``tokens_per_pass`` tokens (padding included), rows of
  similar rest lengths together (:func:`cut_passes` weighs padding against a pass's fixed cost),
  and, on a GPU, within the device memory a pass may hold, counting the prefix KV it stacks (every
  row gets the pass's longest reused prefix); a pass that runs out of device memory is halved and
  retried, and later passes use the smaller size: no prompt is lost or changed.

A pass's host tensors (ids, positions, the mask's bounds) go onto the device queued behind the
pass before it (:mod:`~ragray.generation.transformers.transfer`): the host builds a pass while the
device runs the last one, and no pass waits for the device.

The prefix KV of a row is copied into its pass's cache (``R`` columns per row): on a GPU that copy
is ~1/1000 of the pass's time (HBM moves a 1,000-token 8B-model KV in well under a millisecond).
The numbers equal a separate forward of each prompt up to the batch shape's rounding: exactly in
float32 on CPU (tested against the CPU strategy), within bf16 rounding on CUDA.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragray.generation.engine_counts import EngineCounts
from ragray.generation.transformers.kv import BatchRow, Piece, cache_layers, kv_bytes, stack_pieces, truncate
from ragray.generation.transformers.plan import MIN_REUSE_TOKENS, keyed_waves
from ragray.generation.transformers.prefills import Consume, Prefill
from ragray.generation.transformers.transfer import to_device

__all__ = ["PASS_OVERHEAD_TOKENS", "BatchedPrefill", "PassRow", "cut_passes"]

#: a pass's fixed cost in tokens, for cutting waves into passes (:func:`cut_passes`): launching every
#: kernel of every layer, and the small kernels that build the pass (its mask, its stacked prefix KV),
#: take about as long as ~1k tokens of an 8B model's prefill on an H100 (~30 ms; an estimate, not
#: measured per device)
PASS_OVERHEAD_TOKENS = 1024



@dataclass(frozen=True)
class PassRow:
    """One prompt of a pass: prompt ``index`` whose first ``reuse`` positions are the KV ``prefix``
    pieces; its other ``len(ids) - reuse`` tokens run in the pass."""

    index: int
    prefix: tuple[Piece, ...]
    reuse: int

    def new(self, seqs: dict[int, list[int]]) -> int:
        return len(seqs[self.index]) - self.reuse


class BatchedPrefill(Prefill):
    """Prefill prompts wave by wave in padded passes (see the module docstring).

    Device memory is counted in bytes held: before each wave, the KV this call holds (every storage
    a held prompt keeps alive, a padded pass's whole cache while any of its rows is held) is
    measured; what exceeds ``plan_bytes`` (the share a plan's held KV was sized for) comes off what
    the wave's passes may hold. A generate call's KV is carried into the next calls only when its
    bytes fit ``plan_bytes``."""

    name = "padded"

    def __init__(self, model: Any, torch: Any, device: str, *, keep_arg: str | None, tokens_per_pass: int,
                 plan_tokens: int, counts: EngineCounts, pad_id: int = 0, memory_tokens: int | None = None,
                 prefix_weight: float = 0.0, plan_bytes: int | None = None, activation_bytes: int | None = None
                 ) -> None:
        super().__init__(model, torch, device, keep_arg=keep_arg, counts=counts, plan_tokens=plan_tokens)
        self.tokens_per_pass = tokens_per_pass
        #: the device memory a pass may hold, in tokens, its stacked prefix columns weighing
        #: ``prefix_weight`` each (:func:`cut_passes`); None: not bounded (a CPU)
        self.memory_tokens, self.prefix_weight = memory_tokens, prefix_weight
        #: the planned pass size: an out-of-memory pass halves ``tokens_per_pass``; each call that
        #: then runs without one doubles it back, up to this
        self.planned_tokens_per_pass = tokens_per_pass
        self._halved = False  # a pass of the current call ran out of memory
        #: the bytes a plan's held KV was sized for, and one token's activations in a pass (bytes):
        #: held KV beyond the first comes off a pass's memory at the second's rate; None: not bounded
        self.plan_bytes, self.activation_bytes = plan_bytes, activation_bytes
        #: bytes of KV this call held when its last wave started (what the memory bound counted)
        self.held_bytes = 0
        self.pad_id = pad_id
        # the last generate call's prompts and their KV pieces (carried into the next calls: their
        # scoring prompts are those prompts plus an answer, and the ablations share their prefixes)
        self._carried: list[tuple[list[int], tuple[Piece, ...]]] = []

    def plan(self, *, tokens_per_pass: int, plan_tokens: int, memory_tokens: int | None = None,
             plan_bytes: int | None = None) -> None:
        """New sizes (read from the memory free at a call's start). A pass size an out-of-memory
        pass shrank stays at most what it shrank to; clean calls double it back up to the new plan."""
        shrunk = self.tokens_per_pass < self.planned_tokens_per_pass
        self.planned_tokens_per_pass, self.plan_tokens = tokens_per_pass, plan_tokens
        self.memory_tokens, self.plan_bytes = memory_tokens, plan_bytes
        self.tokens_per_pass = min(self.tokens_per_pass, tokens_per_pass) if shrunk else tokens_per_pass

    def drop_carried(self) -> None:
        """Free the KV carried from the last generate call (a new generate call replaces it)."""
        self._carried = []

    def release(self) -> None:
        """Drop the model and the KV carried between calls (the generator is closing)."""
        super().release()
        self._carried = []

    def run(self, seqs: dict[int, list[int]], caps: dict[int, int], keep: dict[int, int], consume: Consume,
            *, hold: bool = False, first: int | None = None) -> dict[int, tuple[Piece, ...]]:
        """Run every prompt of ``seqs`` (its reuse capped by ``caps``), hand each pass's logits of
        its rows' last ``keep[i]`` positions to ``consume`` (``first``, if given, in the first pass).
        Returns every prompt's KV as pieces when ``hold`` (to decode from), else nothing (a prompt's
        KV lives while a later wave needs it)."""
        held: dict[int, tuple[Piece, ...]] = {}
        self._halved = False
        if hold:  # a generate call replaces the carried KV: free it before this call's KV is made
            self.drop_carried()
        carried = {-1 - j: pieces for j, (_, pieces) in enumerate(self._carried)}
        for steps in keyed_waves(seqs, caps, self.plan_tokens, first, carried=[ids for ids, _ in self._carried],
                                 min_reuse=MIN_REUSE_TOKENS):
            parents = {s.parent for wave in steps for s in wave if s.parent is not None}
            kv: dict[int, tuple[Piece, ...]] = dict(carried)
            for wave in steps:
                rows = [PassRow(s.index, () if s.parent is None else truncate(kv[s.parent], s.reuse), s.reuse)
                        for s in wave]
                # the KV made by this call and still held (the carried KV was held before it: not free then)
                self.held_bytes = self._bytes([v for k, v in kv.items() if k >= 0] + list(held.values()))
                # ``first`` in a pass of its own ahead of its wave's (passes sort rows longest first)
                parts = [[r for r in rows if r.index == first], [r for r in rows if r.index != first]]
                for part in filter(None, parts):
                    for index, pieces in self._wave(part, seqs, keep, consume):
                        if hold or index in parents:
                            kv[index] = pieces
            if hold:
                held.update((k, v) for k, v in kv.items() if k >= 0)
        if hold and self._fits_plan(held, seqs):
            self._carried = [(seqs[k], held[k]) for k in held]
        if not self._halved and self.tokens_per_pass < self.planned_tokens_per_pass:  # memory came back
            self.tokens_per_pass = min(self.planned_tokens_per_pass, 2 * self.tokens_per_pass)
        return held

    def _bytes(self, held: list[tuple[Piece, ...]]) -> int:
        """Bytes the pieces keep alive, where memory is bounded (else 0: not measured)."""
        return kv_bytes(held) if self.plan_bytes is not None else 0

    def _fits_plan(self, held: dict[int, tuple[Piece, ...]], seqs: dict[int, list[int]]) -> bool:
        """Whether a generate call's KV may be carried: its bytes within ``plan_bytes`` where memory
        is bounded, else its prompt tokens within ``plan_tokens``."""
        if self.plan_bytes is not None:
            return kv_bytes(list(held.values())) <= self.plan_bytes
        return sum(len(seqs[k]) for k in held) <= self.plan_tokens

    def _wave(self, rows: list[PassRow], seqs: dict[int, list[int]], keep: dict[int, int], consume: Consume
              ) -> list[tuple[int, tuple[Piece, ...]]]:
        rows = sorted(rows, key=lambda r: -r.new(seqs))
        out: list[tuple[int, tuple[Piece, ...]]] = []
        # the memory bound shrinks with the pass size after an out-of-memory pass, and grows back with
        # it; held KV beyond what the plan was sized for comes off it
        memory = None
        if self.memory_tokens is not None:
            over = max(0, self.held_bytes - (self.plan_bytes or 0)) / (self.activation_bytes or 1)
            memory = max(0.0, self.memory_tokens * self.tokens_per_pass / self.planned_tokens_per_pass - over)
        for start, end in cut_passes([r.new(seqs) for r in rows], self.tokens_per_pass,
                                     prefixes=[r.reuse for r in rows], memory=memory,
                                     prefix_weight=self.prefix_weight):
            out += self._pass_or_halve(rows[start:end], seqs, keep, consume)
        return out

    def _pass_or_halve(self, rows: list[PassRow], seqs: dict[int, list[int]], keep: dict[int, int],
                       consume: Consume) -> list[tuple[int, tuple[Piece, ...]]]:
        """One pass; out of device memory, two passes of half the rows each (recursively), and a
        smaller ``tokens_per_pass`` until calls run without running out again (:meth:`run` grows it back)."""
        oom = getattr(self.torch, "OutOfMemoryError", None) or self.torch.cuda.OutOfMemoryError
        try:
            return self._pass(rows, seqs, keep, consume)
        except oom:
            if len(rows) == 1:
                raise
        # out of the except block: the exception and its traceback are gone, and with them the
        # failed pass's frames and the activations they hold, before the cache is emptied and the
        # halves run (retried inside the block, both halves would run beside that memory)
        if self.device.startswith("cuda"):
            self.torch.cuda.empty_cache()
        half = len(rows) // 2
        self._halved = True
        self.tokens_per_pass = max(1, min(self.tokens_per_pass, half * rows[0].new(seqs)))
        return (self._pass_or_halve(rows[:half], seqs, keep, consume)
                + self._pass_or_halve(rows[half:], seqs, keep, consume))

    def _pass(self, rows: list[PassRow], seqs: dict[int, list[int]], keep: dict[int, int], consume: Consume
              ) -> list[tuple[int, tuple[Piece, ...]]]:
        torch, dev = self.torch, self.device
        news = [r.new(seqs) for r in rows]
        reuses = [r.reuse for r in rows]
        batch, width, prefix = len(rows), max(news), max(reuses)
        ids = torch.full((batch, width), self.pad_id, dtype=torch.long)
        positions = torch.zeros((batch, width), dtype=torch.long)
        for b, (row, n) in enumerate(zip(rows, news)):
            ids[b, width - n :] = torch.tensor(seqs[row.index][row.reuse :])
            positions[b, width - n :] = torch.arange(row.reuse, row.reuse + n)
        # queued behind the previous pass, not waited for: the host builds this pass while the device runs that one
        ids, positions, bounds = to_device(torch, dev, ids, positions,
                                           torch.tensor([[width - n for n in news], reuses]))
        mask = _pass_mask(torch, bounds[0], bounds[1], width, prefix)
        n_keep = max(keep[r.index] for r in rows)
        kwargs: dict[str, Any] = {self.keep_arg: n_keep} if self.keep_arg else {}
        self.counts.add(forward_passes=1, tokens_computed=batch * width, padding_tokens=batch * width - sum(news))
        out = self.model(
            input_ids=ids,
            position_ids=positions,
            attention_mask=mask,
            past_key_values=self._cache(rows, prefix, width),
            cache_position=torch.arange(prefix, prefix + width, device=dev),
            use_cache=True,
            **kwargs,
        )
        logits = out.logits if self.keep_arg else out.logits[:, -n_keep:]
        consume([r.index for r in rows], logits, [keep[r.index] for r in rows])
        layers = cache_layers(out.past_key_values)
        del out, logits
        return [(row.index, (*row.prefix, (BatchRow(layers, b), prefix + width - n, prefix + width)))
                for b, (row, n) in enumerate(zip(rows, news))]

    def _cache(self, rows: list[PassRow], prefix: int, width: int) -> Any:
        """The pass's cache: row ``b``'s reused prefix in its first ``reuse_b`` of ``prefix``
        columns (zeros after: masked, and finite), with room for the pass's ``width`` new ones."""
        if prefix == 0:
            from transformers import DynamicCache

            return DynamicCache(config=self.model.config)
        return stack_pieces([r.prefix for r in rows], width, left=True)[0]


def cut_passes(lengths: list[int], budget: int, overhead: int = PASS_OVERHEAD_TOKENS, *,
               prefixes: list[int] | None = None, memory: float | None = None,
               prefix_weight: float = 0.0) -> list[tuple[int, int]]:
    """Cut rows of ``lengths`` (sorted longest first) into passes ``[start, end)`` of at most
    ``budget`` tokens each (a longer row alone), at the least cost: a pass costs its rows times
    its longest row (padding included) plus ``overhead``. Dynamic programming over the cuts; where
    rest lengths spread (drop-one rests run from a few to ~1,000 tokens) this keeps padding low
    without a pass per row.

    With ``memory``, a pass also holds its rows' stacked prefix KV: every row gets the pass's
    longest reused prefix (``prefixes[i]`` columns for row ``i``), each column weighing
    ``prefix_weight`` tokens. A pass's tokens plus its prefix columns' weight stay within
    ``memory``: many short rests after long prefixes (a wave of many questions in flight) would
    otherwise stack more KV than a pass may hold."""
    n = len(lengths)
    bounded = memory is not None and prefixes is not None
    best = [0.0] + [float("inf")] * n
    cut = [0] * (n + 1)
    for end in range(1, n + 1):
        widest = 0  # the longest prefix of rows start..end
        for start in range(end - 1, -1, -1):
            size = (end - start) * lengths[start]
            if bounded:
                widest = max(widest, prefixes[start])
            over = size > budget or (bounded and (end - start) * (lengths[start] + prefix_weight * widest) > memory)
            if over and end - start > 1:
                break
            cost = best[start] + overhead + size
            if cost < best[end]:
                best[end], cut[end] = cost, start
    out = []
    end = n
    while end:
        out.append((cut[end], end))
        end = cut[end]
    return out[::-1]


def _pass_mask(torch: Any, starts: Any, reuses: Any, width: int, prefix: int) -> Any:
    """``[B, 1, width, prefix + width]`` booleans, on the device of ``starts``: row ``b``'s query at
    column ``t`` (its rest right-aligned: real from ``starts[b]``) sees the first ``reuses[b]``
    prefix columns and its own real columns up to ``t``; a padding query sees only itself."""
    device = starts.device
    start = starts[:, None, None]
    t = torch.arange(width, device=device)[None, :, None]
    u = torch.arange(width, device=device)[None, None, :]
    padding_query = t < start
    own = ((u <= t) & (u >= start)) | (padding_query & (u == t))
    seen = (torch.arange(prefix, device=device)[None, None, :] < reuses[:, None, None]) & ~padding_query
    return torch.cat([seen, own], dim=2)[:, None]
