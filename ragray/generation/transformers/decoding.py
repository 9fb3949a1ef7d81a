"""Batched decoding loops of the transformers backend, over a stacked, left-padded KV cache.

:meth:`BatchDecoder.one_token` appends one token per row and step (greedy or seeded sampling);
:meth:`BatchDecoder.drafted` verifies guessed tokens in the same step (greedy only, exact; the
guesses come from :mod:`ragray.generation.transformers.drafts`). Both drop finished rows from the batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ragray.generation.transformers.drafts import DraftSource, accepted_count

__all__ = ["BatchDecoder"]


@dataclass
class BatchDecoder:
    """The model call and stopping rules the loops need; ``stats`` counts forward passes, tokens
    and host synchronisations (reads of device values)."""

    model: Any
    torch: Any
    device: str
    eos: frozenset[int]
    temperature: float
    stats: dict[str, int] = field(default_factory=lambda: {"passes": 0, "tokens": 0, "syncs": 0})

    def pick(self, logits: Any, rows: list[int], generators: list[Any]) -> list[int]:
        """Next token per active row: argmax at temperature 0, else a seeded sample."""
        torch = self.torch
        self.stats["syncs"] += 1
        if self.temperature == 0:
            return logits.argmax(dim=-1).tolist()
        probs = torch.softmax(logits.float() / self.temperature, dim=-1).cpu()
        return [int(torch.multinomial(probs[j], 1, generator=generators[r])) for j, r in enumerate(rows)]

    def one_token(self, cache: Any, mask: Any, lengths: list[int], first: Any, budgets: list[int],
                generators: list[Any]) -> list[list[int]]:
        """Decode a batch of prefilled prompts together until EOS or their token budget.

        Row ``b`` of ``cache`` holds prompt ``b`` right-aligned in ``mask``'s columns; each step
        appends one column, and every row keeps its own position ids. Finished rows are dropped.
        """
        torch = self.torch
        positions = torch.tensor(lengths, device=self.device)
        rows = list(range(len(lengths)))  # active row -> slot in the batch
        outputs: list[list[int]] = [[] for _ in lengths]
        logits = first
        while True:
            picked = self.pick(logits, rows, generators)
            keep = []
            for j, (slot, token) in enumerate(zip(rows, picked)):
                outputs[slot].append(token)
                if token not in self.eos and len(outputs[slot]) < budgets[slot]:
                    keep.append(j)
            if not keep:
                return outputs
            tokens = torch.tensor(picked, device=self.device)
            if len(keep) < len(rows):  # drop finished rows: less work for every later step
                index = torch.tensor(keep, device=self.device)
                cache.batch_select_indices(index)
                mask, positions, tokens = mask[index], positions[index], tokens[index]
                rows = [rows[j] for j in keep]
            mask = torch.cat([mask, mask.new_ones((len(rows), 1))], dim=1)
            self.stats["passes"] += 1
            out = self.model(
                input_ids=tokens[:, None],
                attention_mask=mask,
                position_ids=positions[:, None],
                cache_position=torch.tensor([mask.shape[1] - 1], device=self.device),
                past_key_values=cache,
                use_cache=True,
            )
            logits = out.logits[:, -1, :]
            positions = positions + 1

    def drafted(self, cache: Any, mask: Any, lengths: list[int], first: Any, budgets: list[int],
                        drafts: DraftSource) -> list[list[int]]:
        """Greedy decoding of a batch in steps of 1 + k tokens per row: the row's last token and
        ``k`` guessed ones (:class:`DraftSource`), all run in one forward pass.

        Each row keeps its guesses up to the first that differs from the model's greedy prediction
        before it, plus that prediction: the tokens one-token steps would give, in fewer steps.
        Every step appends ``1 + k`` cache columns to every row; the columns of rejected guesses
        (and of other rows' longer guesses) are masked out for the rest of the decoding, exactly
        as left padding is. The step's own block is causal.
        """
        torch = self.torch
        outputs: list[list[int]] = [[t] for t in first.argmax(dim=-1).tolist()]
        self.stats["syncs"] += 1
        positions = torch.tensor(lengths, device=self.device)  # position of each row's last token
        valid = mask.bool()
        rows = list(range(len(lengths)))
        while True:
            keep = [j for j, slot in enumerate(rows)
                    if outputs[slot][-1] not in self.eos and len(outputs[slot]) < budgets[slot]]
            if not keep:
                return outputs
            if len(keep) < len(rows):
                index = torch.tensor(keep, device=self.device)
                cache.batch_select_indices(index)
                valid, positions = valid[index], positions[index]
                rows = [rows[j] for j in keep]
            guesses = [drafts.propose(slot, outputs, budgets[slot] - len(outputs[slot]) - 1) for slot in rows]
            width = 1 + max(map(len, guesses))
            tokens = torch.tensor([[outputs[slot][-1], *g, *[outputs[slot][-1]] * (width - 1 - len(g))]
                                   for slot, g in zip(rows, guesses)], device=self.device)
            block = torch.ones((width, width), dtype=torch.bool, device=self.device).tril()
            attend = torch.cat([valid[:, None, :].expand(-1, width, -1), block.expand(len(rows), -1, -1)], dim=2)
            self.stats["passes"] += 1
            out = self.model(
                input_ids=tokens,
                attention_mask=attend[:, None],
                position_ids=positions[:, None] + torch.arange(width, device=self.device),
                past_key_values=cache,
                use_cache=True,
            )
            predicted = out.logits.argmax(dim=-1).tolist()
            self.stats["syncs"] += 1
            kept = torch.zeros((len(rows), width), dtype=torch.bool, device=self.device)
            for j, (slot, guess) in enumerate(zip(rows, guesses)):
                n = accepted_count(guess, predicted[j])
                kept[j, : n + 1] = True  # the last token and the confirmed guesses are now context
                for token in predicted[j][: n + 1]:
                    outputs[slot].append(token)
                    if token in self.eos or len(outputs[slot]) >= budgets[slot]:
                        break
                positions[j] += n + 1
            valid = torch.cat([valid, kept], dim=1)
