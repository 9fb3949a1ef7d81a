"""Packed prefill: the new tokens of many prompts that continue prefixes of other prompts, in one
forward pass per wave.

Ablations of one question share long prefixes: drop-one ablations share the baseline up to the
removed passage, random subsets share the passages before their first difference. Run one by one,
the unshared rests (a few hundred to ~1.3k tokens each) give the linear layers small matrices: on
a 2-core AMX Xeon bf16 GEMMs reach ~300 GFLOP/s at 150 rows and ~700 at 4000. Packed, every linear
layer, norm and activation runs once over many prompts' rests, and only attention is done per
prompt: :func:`packed_attention` gives each prompt's queries the cached keys of its shared prefix
(pieces of earlier waves) plus its own new keys, causally, exactly what a separate prefill sees.

:func:`wave_plan` orders the work over the prompts' prefix trie. Every trie edge is computed once,
so the plan runs exactly the tokens of the sorted chain
(:func:`~ragray.generation.kv_prefix.plan_prefills`); but where the chain makes each prompt wait
for its sorted predecessor, the plan follows heavy paths: a prompt waits only for the prompt it
branches off, and there are at most ``log2(n) + 1`` waves. Drop-one ablations take two: the
baseline, then all the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from ragray.generation.kv_prefix import Piece, common_prefix_len

__all__ = [
    "MAX_PACKED_TOKENS",
    "MAX_PLAN_TOKENS",
    "Packed",
    "Span",
    "Step",
    "pack_spans",
    "plan_groups",
    "truncate",
    "wave_plan",
]

# Rows of one packed forward, at most: bounds the activations (~8 x this x hidden values at once).
MAX_PACKED_TOKENS = 16384
# Prompt tokens of one wave plan, at most: its prompts' KV is all held until its last wave.
MAX_PLAN_TOKENS = 4 * MAX_PACKED_TOKENS


@dataclass(frozen=True)
class Span:
    """One prompt in a packed forward: rows ``[start, start + length)`` of the packed input are its
    positions ``[reuse, reuse + length)``; positions below ``reuse`` are the KV ``prefix`` pieces."""

    prefix: tuple[Piece, ...]
    start: int
    length: int

    @property
    def reuse(self) -> int:
        return sum(end - begin for _, begin, end in self.prefix)


@dataclass(frozen=True)
class Packed:
    """What :func:`packed_attention` needs besides q/k/v: the prompts' spans."""

    spans: tuple[Span, ...]


@dataclass(frozen=True)
class Step:
    """Prefill prompt ``index`` after the first ``reuse`` positions of prompt ``parent`` (an
    earlier wave's; ``None`` with ``reuse == 0``)."""

    index: int
    parent: int | None
    reuse: int


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


def plan_groups(seqs: Sequence[Sequence[int]], limit: int = MAX_PLAN_TOKENS) -> list[list[int]]:
    """Prompt indices in sorted order, cut into runs of at most ``limit`` tokens (one prompt alone
    may exceed it): each run gets its own :func:`wave_plan`, neighbours sharing the most."""
    order = sorted(range(len(seqs)), key=lambda i: (list(seqs[i]), i))
    return [[order[c] for c in chunk] for chunk in pack_spans([len(seqs[i]) for i in order], [0] * len(order), limit)]


def wave_plan(seqs: Sequence[Sequence[int]], caps: Sequence[int]) -> list[list[Step]]:
    """Waves of prefills over the prefix trie of ``seqs``: a step of wave ``w`` reuses the KV of a
    prompt of an earlier wave. ``caps[j]`` bounds prompt ``j``'s reuse (at most ``len - 1``).

    Each trie node is computed by the prompt at the end of its heavy path (the child subtree with
    the most prompts); a prompt on a light branch reuses that prompt's KV up to the branching
    node, so each prompt is one wave after the prompt it branches off. Tokens computed equal the
    sorted chain's (plus one for a prompt that is a strict prefix of others: its last token's
    logits are computed again); waves are at most ``log2(len(seqs)) + 1``.
    """
    n = len(seqs)
    order = sorted(range(n), key=lambda i: (list(seqs[i]), i))
    lcp = [0] + [common_prefix_len(seqs[order[t - 1]], seqs[order[t]]) for t in range(1, n)]
    wave: dict[int, int] = {}
    steps: list[Step] = []
    work: list[tuple[int, int, int | None, int]] = [(0, n, None, 0)] if n else []
    while work:
        lo, hi, parent, depth = work.pop()
        lights: list[tuple[int, int, int]] = []
        while hi - lo > 1:  # descend the heavy path, keeping the light branches and their depth
            d = min(lcp[lo + 1 : hi])
            cuts = [lo] + [t for t in range(lo + 1, hi) if lcp[t] == d] + [hi]
            children = list(pairwise(cuts))
            heavy = max(children, key=lambda c: c[1] - c[0])
            lights += [(a, b, d) for a, b in children if (a, b) != heavy]
            lo, hi = heavy
        leaf = order[lo]
        reuse = max(0, min(depth, caps[leaf])) if parent is not None else 0
        wave[leaf] = wave[parent] + 1 if reuse else 0
        steps.append(Step(leaf, parent if reuse else None, reuse))
        work += [(a, b, leaf, d) for a, b, d in lights]
    waves: list[list[Step]] = [[] for _ in range(max(wave.values(), default=-1) + 1)]
    for step in steps:
        waves[wave[step.index]].append(step)
    return waves


def pack_spans(lengths: Sequence[int], reuse: Sequence[int], limit: int = MAX_PACKED_TOKENS) -> list[list[int]]:
    """Prompt indices in packed forwards of at most ``limit`` new tokens (one prompt alone may
    exceed it), in order."""
    chunks: list[list[int]] = []
    size = 0
    for i, (n, r) in enumerate(zip(lengths, reuse)):
        new = n - r
        if chunks and size + new <= limit:
            chunks[-1].append(i)
            size += new
        else:
            chunks.append([i])
            size = new
    return chunks
