"""Decoding with fixed shapes: every step the same tensors, so on CUDA a step is one graph replay.

A decoding step of a 7-8B model on a GPU should cost about the time to read its weights (~3.5 ms
for 16 GB at ~4.8 TB/s); run eagerly from Python it costs several times that, most of it the host
launching each layer's kernels one by one. transformers' answer is a static cache and a captured
graph (``torch.compile(mode="reduce-overhead")`` or CUDA graphs). Here:

- the prefilled prompts are stacked right-aligned in ``[B, H, W + room, D]`` buffers per layer
  (:func:`~ragray.generation.transformers.kv.stack_pieces`); a step writes its keys/values into column
  ``W + step`` with ``index_copy_`` at a position held in a device tensor, and attention always
  reads the whole buffer under a ``[B, 1, 1, W + room]`` mask whose next column is switched on
  before the step: the shapes never change;
- rows that have finished keep running (their tokens are ignored): dropping a row would change
  the shapes, and a decoding step costs the same for 1 or 32 rows;
- on CUDA the step is captured once per batch as a CUDA graph (after two warm-up steps on a side
  stream, as PyTorch documents) and replayed; if capture fails the steps run eagerly (same
  numbers) and the next tries wait 1, 2, 4, ... decode runs (graphs come back once capture works). Elsewhere the steps run eagerly: the CPU tests check
  the fixed-shape arithmetic against the reference decoder.

Greedy, or sampled with each prompt's seeded generator (the same picks as
:class:`~ragray.generation.transformers.decoding.BatchDecoder`); one host wait per step (the picked tokens, to
stop at end of sequence).
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any

from ragray.generation.transformers.decoding import BatchDecoder
from ragray.generation.transformers.kv import Piece, stack_pieces
from ragray.generation.transformers.transfer import to_device

__all__ = ["StaticDecoder"]

log = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def _static_layer() -> type:
    """A cache layer over fixed buffers, written at a device-held column (built on first use, so
    importing ragray does not import transformers)."""
    from transformers.cache_utils import DynamicLayer

    class StaticColumnLayer(DynamicLayer):
        def __init__(self, keys: Any, values: Any, column: Any) -> None:
            super().__init__()
            self.keys, self.values, self._column = keys, values, column
            self.dtype, self.device = keys.dtype, keys.device
            self.is_initialized = True

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            self.keys.index_copy_(2, self._column, key_states)
            self.values.index_copy_(2, self._column, value_states)
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self.keys.shape[-2]

    return StaticColumnLayer


class StaticDecoder:
    """Fixed-shape batched decoding (see the module docstring); counts into ``decoder.stats``."""

    name = "static"
    #: cache columns a row needs per new token
    columns_per_token = 1

    def __init__(self, decoder: BatchDecoder, *, graphs: bool) -> None:
        self.decoder = decoder
        self.graphs = graphs and decoder.device.startswith("cuda")
        # after a failed capture, decode runs left to go eagerly before the next try, and how many
        # the next failure waits (doubles each failure in a row: a capture that keeps failing costs
        # a few tries in a long run, one that failed for lack of memory comes back once it is free)
        self._skip, self._backoff = 0, 1
        #: capture tries
        self.captures = 0

    def _capture_now(self) -> bool:
        """Whether this decode run tries CUDA graphs (counts down the wait after a failure)."""
        if not self.graphs:
            return False
        if self._skip:
            self._skip -= 1
            return False
        return True

    def decode(self, rows: list[list[Piece]], prompts: list[list[int]], first: Any, budgets: list[int],
               generators: list[Any]) -> list[list[int]]:
        """The decoders' interface (:mod:`~ragray.generation.transformers.decoders`): :meth:`run`."""
        return self.run(rows, [len(p) for p in prompts], first, budgets, generators)

    def run(self, rows: list[list[Piece]], lengths: list[int], first: Any, budgets: list[int],
            generators: list[Any]) -> list[list[int]]:
        """Decode prefilled prompts (their KV as ``rows`` of pieces, ``first`` the logits of their
        last positions) until end of sequence or their budget; the tokens per prompt."""
        from transformers.cache_utils import Cache

        d = self.decoder
        torch, dev = d.torch, d.device
        room = max(budgets)
        stacked, pad_mask = stack_pieces(rows, room)
        width = pad_mask.shape[1]
        # queued behind the prefill, not waited for (the first pick below is the first host wait)
        column, positions = to_device(torch, dev, torch.tensor([width]), torch.tensor(lengths)[:, None])
        layer = _static_layer()
        for lay in stacked.layers:  # attention reads the unwritten columns too (masked): they must be
            lay._k[:, :, width:].zero_()  # finite, since a zero weight times NaN is NaN
            lay._v[:, :, width:].zero_()
        cache = Cache(layers=[layer(lay._k, lay._v, column) for lay in stacked.layers])
        del stacked
        batch = len(rows)
        mask = torch.zeros((batch, 1, 1, width + room), dtype=torch.bool, device=dev)
        mask[:, 0, 0, :width] = pad_mask.bool()
        tokens = torch.zeros((batch, 1), dtype=torch.long, device=dev)

        def step() -> Any:
            return d.model(input_ids=tokens, attention_mask=mask, position_ids=positions, cache_position=column,
                           past_key_values=cache, use_cache=True, logits_to_keep=1).logits[:, -1, :]

        outputs: list[list[int]] = [[] for _ in rows]
        live = list(range(batch))
        logits, replay = first, None
        capture = self._capture_now()
        for n in range(room):
            picked = d.pick(logits, list(range(batch)), generators)
            for b in live:
                outputs[b].append(picked[b])
            live = [b for b in live if picked[b] not in d.eos and len(outputs[b]) < budgets[b]]
            if not live:
                break
            tokens.copy_(to_device(torch, dev, torch.tensor(picked)[:, None])[0])
            mask[:, 0, 0, width + n] = True
            column.fill_(width + n)
            if n:
                positions.add_(1)
            d.stats["passes"] += 1
            if replay is None and capture:
                capture = False  # one try per run
                replay = self._try_capture(step)
            logits = replay() if replay is not None else step()
        return outputs

    def _try_capture(self, step: Any) -> Any:
        """``step`` captured as a CUDA graph (:meth:`_capture`), or ``None`` when capture fails: this
        run goes eagerly (same numbers) and the next tries wait 1, 2, 4, ... decode runs."""
        self.captures += 1
        try:
            replay = self._capture(step)
        except Exception as exc:  # noqa: BLE001 - any capture failure: run eagerly, same numbers
            log.warning("CUDA graph capture of the decoding step failed (%s): decoding eagerly, trying "
                        "again after %d decode run(s)", exc, self._backoff)
            self._skip, self._backoff = self._backoff, 2 * self._backoff
            return None
        self._backoff = 1
        return replay

    def _capture(self, step: Any) -> Any:
        """``step`` captured as a CUDA graph after warm-up on a side stream; its replay. Warm-up steps
        write the step's own column: the replay rewrites it."""
        torch = self.decoder.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = step()

        def replay() -> Any:
            graph.replay()
            return out

        return replay
