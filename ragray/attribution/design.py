"""The contexts one question scores for the interaction-aware attribution, within a call budget.

In this order, each in retrieval order: the full context, the empty context (the closed-book
answer), each passage left out, each passage kept alone (a prompt with that passage only: short,
so cheap, and it shows which passages suffice on their own, which leave-one-out cannot), then —
while ``influence.budget`` allows — random subsets in complementary pairs (a subset and the rest),
seeded by the question id. ``2(k + 1)`` contexts without random subsets; the full context is the
baseline's own prompt, scored with the drop-one arms.
"""

from __future__ import annotations

from ragray.attribution.subsets import Subset, rng_for

__all__ = ["design_size", "design_subsets"]


def design_size(k: int) -> int:
    """Contexts of the fixed design: full, empty, k left out, k kept alone (one fewer at k = 1,
    where the one left out is the empty context)."""
    return 2 * (k + 1) if k > 1 else 2


def design_subsets(k: int, question_id: str, budget: int | None = None, seed: int = 0) -> list[Subset]:
    """The design of a question with ``k`` passages, up to ``budget`` contexts (None: the fixed
    design only). The budget never cuts the fixed design."""
    full = tuple(range(k))
    out = [Subset(frozenset(full), full), Subset(frozenset(), ())]
    out += [Subset(frozenset(full) - {i}, tuple(j for j in full if j != i)) for i in range(k)]
    out += [Subset(frozenset({i}), (i,)) for i in range(k)]
    seen: set[frozenset[int]] = set()
    design = []
    for s in out:
        if s.kept not in seen:
            seen.add(s.kept)
            design.append(s)
    if budget is None or budget <= len(design) or k < 4:
        return design
    rng = rng_for(seed, question_id, "design")
    # a budget beyond what k passages allow (2^k subsets, sizes 2..k-2 here) stops at what they allow
    want = min(budget, len(design) + (2**k if k < 30 else budget))
    tries = 0
    while len(design) + 2 <= want and tries < 100 * (want - len(design)):
        tries += 1
        kept = frozenset(int(i) for i in rng.permutation(k)[: int(rng.integers(2, k - 1))])
        rest = frozenset(full) - kept
        if kept in seen or rest in seen:
            continue
        seen |= {kept, rest}
        design += [Subset(kept, tuple(sorted(kept))), Subset(rest, tuple(sorted(rest)))]
    return design
