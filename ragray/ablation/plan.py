"""Ablation plans: the arms of one question, each a subset of its retrieved passages.

Drop-one (the influence seed, phase 4): the baseline with all k passages, then k arms each
without exactly one passage. Arms keep retrieval order, so the prompt of "drop i" is identical to
the baseline's up to passage i — backends with prefix reuse compute that shared prefix once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragray.types import Passage

__all__ = ["Arm", "BASELINE", "CONTROL_BASELINE", "CONTROL_DROP", "DROP", "control_plan", "drop_one_plan"]

BASELINE = "baseline"
DROP = "drop"


@dataclass(frozen=True)
class Arm:
    """One call's context: ``passages`` kept (retrieval order) and the ids ``removed``."""

    name: str
    removed: tuple[str, ...]
    passages: tuple[Passage, ...]


def drop_one_plan(passages: Sequence[Passage]) -> list[Arm]:
    """Baseline first, then one arm per passage in retrieval order (k + 1 arms)."""
    passages = tuple(passages)
    arms = [Arm(BASELINE, (), passages)]
    for i, p in enumerate(passages):
        arms.append(Arm(DROP, (p.id,), passages[:i] + passages[i + 1 :]))
    return arms


CONTROL_BASELINE = "control_baseline"
CONTROL_DROP = "control_drop"


def control_plan(passages: Sequence[Passage]) -> list[Arm]:
    """:func:`drop_one_plan` over the passages in the position control's order (arms renamed so
    that readers of the ``drop`` arms see the retrieval order only)."""
    names = {BASELINE: CONTROL_BASELINE, DROP: CONTROL_DROP}
    return [Arm(names[a.name], a.removed, a.passages) for a in drop_one_plan(passages)]
