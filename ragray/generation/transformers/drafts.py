"""Draft tokens for exact greedy decoding of a batch of ablation prompts (draft-and-verify).

A greedy decoding step can feed a row its last token *and* a guess of the next few; one forward
pass then yields the model's prediction after each of them, and every guessed token that equals
the prediction before it is exactly what one-token-at-a-time greedy decoding would have produced.
Guesses that are wrong cost only their share of that pass; a decoding step on CPU is dominated by
reading the weights and the KV cache, which a few more tokens per row hardly change.

The guesses come from where an ablation's answer is most likely to be found:

- a **sibling** row of the same batch whose output already extends this row's: the ablations of
  a question mostly give the baseline's answer, or the same alternative one;
- **prompt lookup**: the tokens that followed the latest occurrence, in this row's prompt, of its
  last one to three output tokens (answers copy names and phrases from the passages and question).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["DraftSource", "accepted_count"]


class DraftSource:
    """Proposes up to ``size`` next tokens for the rows of one greedy decoding batch."""

    def __init__(self, prompts: Sequence[Sequence[int]], size: int, max_ngram: int = 3) -> None:
        self.size = size
        self.max_ngram = max_ngram
        self._prompts = [list(p) for p in prompts]
        self._where = [self._index(p) for p in self._prompts]

    def _index(self, prompt: list[int]) -> dict[tuple[int, ...], int]:
        """n-gram (n = 1 .. max_ngram) -> position just after its latest occurrence in ``prompt``."""
        where: dict[tuple[int, ...], int] = {}
        for n in range(1, self.max_ngram + 1):
            for end in range(n, len(prompt)):  # an n-gram ending at the last token has no follower
                where[tuple(prompt[end - n : end])] = end
        return where

    def propose(self, row: int, outputs: Sequence[Sequence[int]], limit: int | None = None) -> list[int]:
        """The guess for ``row`` given every row's output so far (at most ``limit`` tokens)."""
        size = self.size if limit is None else min(self.size, limit)
        if size <= 0:
            return []
        mine = outputs[row]
        n = len(mine)
        best: Sequence[int] = ()
        for other, theirs in enumerate(outputs):
            if other != row and len(theirs) > n + len(best) and list(theirs[:n]) == list(mine):
                best = theirs[n : n + size]
        if best:
            return list(best)
        prompt, where = self._prompts[row], self._where[row]
        for k in range(min(self.max_ngram, n), 0, -1):
            end = where.get(tuple(mine[n - k :]))
            if end is not None:
                return prompt[end : end + size]
        return []


def accepted_count(draft: Sequence[int], predicted: Sequence[int]) -> int:
    """Leading draft tokens the model confirms: ``draft[j]`` stands while it equals
    ``predicted[j]``, the greedy prediction after the input before it."""
    count = 0
    while count < len(draft) and count < len(predicted) and draft[count] == predicted[count]:
        count += 1
    return count
