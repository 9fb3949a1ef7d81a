"""The one planner every prefill runs: which prompt's KV each prompt reuses, and in which wave.

A question's prompts share long token prefixes (the prompt without passage i is the baseline up to
passage i). In a causal decoder the KV of a prompt cut to ``t`` tokens *is* the KV of its first
``t`` tokens, so a prompt may start from the KV of any prompt it shares a prefix with. One
:class:`Step` type says it: run prompt ``index`` after the first ``reuse`` positions of prompt
``parent``.

- :func:`wave_plan`: the waves of the prompts' token trie, each node computed once. The waves
  follow heavy paths: a prompt waits only for the prompt it branches off, and there are at most
  ``log2(n) + 1`` waves. Drop-one ablations take two: the baseline, then all the others.
- :func:`keyed_waves`: what the prefills call (:mod:`~ragray.generation.transformers.prefills`: a
  wave packed into one row, padded into a batch, or run one prompt at a time): the caller's
  prompts cut into runs that bound the KV held (:func:`plan_groups`), each run's waves, its
  prompts moved onto the KV an earlier call left (``carried``) where that reuses more, and a
  prompt that would reuse only a header's tokens computing them itself (``min_reuse``).
- :func:`plan_prefills` is the sorted chain (each prompt after its sorted predecessor, the LCP-array
  property of sorted strings, Gusfield 1997, §7.14): no engine runs it; its count
  (:func:`trie_tokens`) is the fewest prefill tokens any exact scheme can reach, which the engine
  counts report beside the tokens computed.
- :func:`pack_spans` cuts a wave into packed forwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

__all__ = [
    "MAX_PACKED_TOKENS",
    "MAX_PLAN_TOKENS",
    "Step",
    "common_prefix_len",
    "MIN_REUSE_TOKENS",
    "keyed_runs",
    "keyed_waves",
    "pack_spans",
    "plan_groups",
    "plan_prefills",
    "prefill_token_count",
    "reuse_carried",
    "rewave",
    "trie_tokens",
    "wave_plan",
]

# Rows of one packed forward, at most: bounds the activations (~8 x this x hidden values at once).
MAX_PACKED_TOKENS = 16384
# Prompt tokens of one wave plan, at most: its prompts' KV is all held until its last wave.
MAX_PLAN_TOKENS = 4 * MAX_PACKED_TOKENS
#: a prompt that shares fewer tokens than this with the prompt it branches off computes them itself
#: where a plan asks for it (:func:`rewave`; the padded prefill does): a wave saved is worth more
#: than a header's tokens
MIN_REUSE_TOKENS = 64


@dataclass(frozen=True)
class Step:
    """Prefill prompt ``index`` after the first ``reuse`` positions of prompt ``parent`` (an
    earlier wave's; ``None`` with ``reuse == 0``)."""

    index: int
    parent: int | None
    reuse: int


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Number of leading tokens ``a`` and ``b`` share (lists or numpy arrays)."""
    import numpy as np

    a, b = np.asarray(a), np.asarray(b)
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if differ.size else n


def plan_prefills(
    token_ids: Sequence[Sequence[int]],
    *,
    reuse: bool = True,
    max_reuse: Sequence[int] | None = None,
) -> list[Step]:
    """The order to prefill ``token_ids`` in, and which prefix each step takes from the last.

    ``max_reuse[i]`` caps the reused tokens of prompt ``i`` (default ``len - 1``: at least one
    token is always run, since its logits are needed). With ``reuse=False`` the order is the
    input order and nothing is reused.
    """
    caps = [len(t) - 1 for t in token_ids] if max_reuse is None else list(max_reuse)
    if not reuse:
        return [Step(i, None, 0) for i in range(len(token_ids))]
    order = sorted(range(len(token_ids)), key=lambda i: (list(token_ids[i]), i))
    steps: list[Step] = []
    prev: int | None = None
    for i in order:
        shared = 0 if prev is None else min(common_prefix_len(token_ids[prev], token_ids[i]), caps[i])
        shared = max(shared, 0)
        steps.append(Step(i, prev if shared else None, shared))
        prev = i
    return steps


def prefill_token_count(token_ids: Sequence[Sequence[int]], steps: Sequence[Step]) -> int:
    """Tokens actually run through the model under ``steps`` (vs ``sum(map(len, token_ids))``)."""
    return sum(len(token_ids[s.index]) - s.reuse for s in steps)


def plan_groups(seqs: Sequence[Sequence[int]], limit: int = MAX_PLAN_TOKENS) -> list[list[int]]:
    """Prompt indices in sorted order, cut into runs of at most ``limit`` tokens (one prompt alone
    may exceed it): each run gets its own :func:`wave_plan`, neighbours sharing the most."""
    order = sorted(range(len(seqs)), key=lambda i: (list(seqs[i]), i))
    return [[order[c] for c in chunk] for chunk in pack_spans([len(seqs[i]) for i in order], [0] * len(order), limit)]


def wave_plan(seqs: Sequence[Sequence[int]], caps: Sequence[int], first: int | None = None) -> list[list[Step]]:
    """Waves of prefills over the prefix trie of ``seqs``: a step of wave ``w`` reuses the KV of a
    prompt of an earlier wave. ``caps[j]`` bounds prompt ``j``'s reuse (at most ``len - 1``).
    ``first``: a prompt that must be in wave 0 (the reference a divergence call compares every
    prompt with): the heavy path from the root is the one that ends at it.

    Each trie node is computed by the prompt at the end of its heavy path (the child subtree with
    the most prompts); a prompt on a light branch reuses that prompt's KV up to the branching
    node, so each prompt is one wave after the prompt it branches off. Tokens computed equal the
    sorted chain's (plus one for a prompt that is a strict prefix of others: its last token's
    logits are computed again); waves are at most ``log2(len(seqs)) + 1``.
    """
    n = len(seqs)
    order = sorted(range(n), key=lambda i: (list(seqs[i]), i))
    lcp = [0] + [common_prefix_len(seqs[order[t - 1]], seqs[order[t]]) for t in range(1, n)]
    pinned = order.index(first) if first is not None else None
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
            heavy = next((c for c in children if c[0] <= pinned < c[1]), None) if parent is None and \
                pinned is not None else None
            heavy = heavy or max(children, key=lambda c: c[1] - c[0])
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


def keyed_runs(seqs: dict[int, list[int]], limit: int = MAX_PLAN_TOKENS, first: int | None = None
               ) -> list[list[int]]:
    """The caller's keys in the runs of :func:`plan_groups` (sorted, neighbours sharing the most,
    at most ``limit`` tokens a run unless one prompt alone exceeds it); the run holding the key
    ``first``, if given, first."""
    keys = list(seqs)
    runs = [[keys[j] for j in run] for run in plan_groups([seqs[k] for k in keys], limit)]
    return sorted(runs, key=lambda run: first not in run) if first is not None else runs


def keyed_waves(seqs: dict[int, list[int]], caps: dict[int, int], limit: int = MAX_PLAN_TOKENS,
                first: int | None = None, *, carried: Sequence[Sequence[int]] = (), min_reuse: int = 0
                ) -> list[list[list[Step]]]:
    """The plan every prefill runs: :func:`wave_plan` s over the runs of :func:`plan_groups` of a
    caller's prompts, keyed by the caller's keys (``seqs[key]`` the prompt's ids, ``caps[key]`` its
    reuse bound): one list of waves per run, a run's prompts held until its last wave. ``first``:
    the key run before every other (its run first, in its run's wave 0). ``carried``: prompts whose
    KV an earlier call left, keyed ``-1 - j`` as parents (:func:`reuse_carried`); ``min_reuse``: a
    step that would reuse fewer tokens computes them itself (:func:`rewave`)."""
    plans = []
    for members in keyed_runs(seqs, limit, first):
        pinned = members.index(first) if first in members else None
        waves = wave_plan([seqs[k] for k in members], [caps[k] for k in members], pinned)
        keyed = [Step(members[s.index], None if s.parent is None else members[s.parent], s.reuse)
                 for wave in waves for s in wave]
        if carried:
            keyed = reuse_carried(keyed, seqs, caps, carried, max(min_reuse, 1))
        plans.append(rewave(keyed, min_reuse))
    return plans


def reuse_carried(steps: list[Step], seqs: dict[int, list[int]], caps: dict[int, int],
                  carried: Sequence[Sequence[int]], min_reuse: int = MIN_REUSE_TOKENS) -> list[Step]:
    """``steps`` with each prompt's parent replaced by a carried prompt (key ``-1 - j`` for
    ``carried[j]``) where that gives at least as long a reuse (of at least ``min_reuse``): a scoring
    call then starts from the KV its generate call computed, and its prompts need no wave of their
    own parents. Exact: a prompt's KV cut to a shared prefix is that prefix's KV."""
    entries = sorted([(list(seqs[s.index]), 0, t) for t, s in enumerate(steps)]
                     + [(list(ids), 1, j) for j, ids in enumerate(carried)],
                     key=lambda e: (e[0], e[1], e[2]))
    best: dict[int, tuple[int, int]] = {}  # step position -> (shared tokens, carried key)
    for direction in (entries, entries[::-1]):
        last: tuple[list[int], int] | None = None  # the nearest carried prompt so far
        for ids, is_carried, t in direction:
            if is_carried:
                last = (ids, t)
            elif last is not None:
                shared = common_prefix_len(ids, last[0])
                if shared > best.get(t, (0, 0))[0]:
                    best[t] = (shared, -1 - last[1])
    out = []
    for t, step in enumerate(steps):
        shared, key = best.get(t, (0, 0))
        reuse = min(shared, caps[step.index])
        out.append(Step(step.index, key, reuse) if reuse >= max(step.reuse, min_reuse) else step)
    return out


def rewave(steps: list[Step], min_reuse: int = MIN_REUSE_TOKENS) -> list[list[Step]]:
    """``steps`` (parents first) as waves, a step that would reuse fewer than ``min_reuse`` tokens
    (different questions share only the prompt's header) computing them itself instead: it then
    joins wave 0, not a wave of its own after its parent's. A step whose parent is carried from
    an earlier call (a negative key) is in wave 0. With ``min_reuse`` 0 the waves are
    :func:`wave_plan`'s."""
    wave: dict[int, int] = {}
    waves: list[list[Step]] = []
    for step in steps:
        if step.parent is not None and step.reuse < min_reuse:
            step = Step(step.index, None, 0)
        # a carried parent (a negative key: computed by an earlier call) is before every wave
        wave[step.index] = 0 if step.parent is None else wave.get(step.parent, -1) + 1
        if wave[step.index] == len(waves):
            waves.append([])
        waves[wave[step.index]].append(step)
    return waves


def trie_tokens(seqs: dict[int, list[int]], caps: dict[int, int]) -> int:
    """The fewest prefill tokens any exact scheme computes for a caller's prompts (each reuse capped
    by ``caps``): the sorted chain's count (:func:`plan_prefills`)."""
    keys = list(seqs)
    ids = [seqs[k] for k in keys]
    return prefill_token_count(ids, plan_prefills(ids, max_reuse=[caps[k] for k in keys]))
