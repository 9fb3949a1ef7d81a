"""The decoders an engine composes with a prefill: one interface, three ways to continue prompts.

A decoder takes a group of prefilled prompts (each one's KV as the prefill held it: pieces, or the
model's own cache, :class:`~ragray.generation.transformers.prefills.Native`), the logits of their
last positions, their token budgets and samplers, and returns each prompt's new tokens:

- :class:`EagerDecoder`: one token per row and step over a stacked, left-padded cache, finished
  rows dropped (:meth:`~ragray.generation.transformers.decoding.BatchDecoder.one_token`); the only
  one for a model's own cache (sliding-window, recurrent layers);
- :class:`DraftedDecoder`: greedy, each step verifying guessed tokens in the same pass (exact;
  :meth:`~ragray.generation.transformers.decoding.BatchDecoder.drafted`);
- :class:`~ragray.generation.transformers.static_decode.StaticDecoder`: fixed shapes, each step a
  replayed CUDA graph on CUDA (eager elsewhere, same numbers).

:func:`choose_decoder` picks one from the settings.
"""

from __future__ import annotations

from typing import Any

from ragray.generation.transformers.decoding import BatchDecoder
from ragray.generation.transformers.drafts import DraftSource
from ragray.generation.transformers.kv import stack_pieces
from ragray.generation.transformers.prefills import Native

__all__ = ["DECODERS", "DraftedDecoder", "EagerDecoder", "choose_decoder"]

#: the decoders by name (the run's summary records which one ran)
DECODERS = ("eager", "drafted", "static")


class EagerDecoder:
    """One token per row and step (greedy or each prompt's seeded sampler)."""

    name = "eager"
    #: cache columns a row needs per new token
    columns_per_token = 1

    def __init__(self, batch: BatchDecoder) -> None:
        self.batch = batch

    def decode(self, rows: list[Any], prompts: list[list[int]], first: Any, budgets: list[int],
               generators: list[Any]) -> list[list[int]]:
        lengths = [len(p) for p in prompts]
        if isinstance(rows[0], Native):  # the model's own cache: one prompt, no stacking
            mask = self.batch.torch.ones((1, lengths[0]), dtype=self.batch.torch.long, device=self.batch.device)
            return self.batch.one_token(rows[0].cache, mask, lengths, first, budgets, generators)
        cache, mask = stack_pieces(rows, max(budgets))
        del rows
        return self.batch.one_token(cache, mask, lengths, first, budgets, generators)


class DraftedDecoder:
    """Greedy steps of ``1 + draft_tokens`` tokens per row, the guesses verified in the same pass."""

    name = "drafted"

    def __init__(self, batch: BatchDecoder, draft_tokens: int) -> None:
        self.batch, self.draft_tokens = batch, draft_tokens
        # a step appends 1 + draft_tokens columns to every row
        self.columns_per_token = 1 + draft_tokens

    def decode(self, rows: list[Any], prompts: list[list[int]], first: Any, budgets: list[int],
               generators: list[Any]) -> list[list[int]]:
        # at most max(budgets) steps: cache room for all of them (growing would copy the whole cache)
        cache, mask = stack_pieces(rows, max(budgets) * self.columns_per_token)
        del rows
        drafts = DraftSource(prompts, self.draft_tokens)
        return self.batch.drafted(cache, mask, [len(p) for p in prompts], first, budgets, drafts)


def choose_decoder(batch: BatchDecoder, *, static: bool | None, draft_tokens: int, temperature: float,
                   stacks: bool) -> Any:
    """The decoder the settings name: fixed shapes where ``static`` (None: on CUDA), else drafted
    where greedy with ``draft_tokens``, else eager. ``stacks`` False (the model's own cache: no
    pieces to stack) leaves only eager."""
    from ragray.generation.transformers.static_decode import StaticDecoder

    if not stacks:
        return EagerDecoder(batch)
    if static if static is not None else batch.device.startswith("cuda"):
        return StaticDecoder(batch, graphs=True)
    if draft_tokens and temperature == 0:
        return DraftedDecoder(batch, draft_tokens)
    return EagerDecoder(batch)
