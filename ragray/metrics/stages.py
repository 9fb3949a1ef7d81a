"""Which stage failed: one question's answer traced to retrieval, ranking or generation.

The alignment verdict (SPEC §11) says whether the retriever's order matches what the answer
leaned on; a user who came to learn what to fix — retriever, reranker, top-k, prompt or model —
needs the stage. Where gold passages (``hit_at_k`` not null) or gold answers are known, one
question's stage, read from its row and its passages' rows:

- ``right``: the answer contains a gold answer; ``declined``: an unanswerable question the model
  declined (right too).
- ``made_up``: an unanswerable question answered anyway.
- ``no_content``: no answer (an error, or nothing generated).
- ``retrieval``: a wrong answer, and no gold passage among those retrieved (recall: top-k, the
  retriever, the corpus).
- ``memory``: a wrong answer the passages do not change (``context_dependent`` false: the model
  gives it without them; or state ``context_ignored``: no passage left out changes it), the gold
  retrieved or not known.
- ``ranking``: a wrong answer; a gold passage was retrieved, but ranked below every passage the
  answer leaned on (the reranker, or the prompt's order).
- ``generation``: a wrong answer; a gold passage was retrieved and ranked above what the answer
  leaned on, or was itself used, or no passage stands out (the model or the prompt).
- ``not_judged``: no gold answer to judge by; the reason says what use alone can say.

Retrieval is named first: a model that answers from memory because the gold was never retrieved
failed at retrieval. ``used`` (ragray's mark, a group counted by its members) is "leaned on".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["FAILURES", "STAGES", "Stage", "stage_counts", "stage_of"]

#: every stage, in the order a headline counts them
STAGES = ("right", "declined", "retrieval", "ranking", "generation", "memory", "made_up", "no_content", "not_judged")
#: the stages that are failures, in the order the headline names them
FAILURES = ("retrieval", "ranking", "generation", "memory", "made_up", "no_content")


@dataclass(frozen=True)
class Stage:
    """One question's stage and why, in words a user reads first."""

    stage: str
    why: str


def _ranks(passages: Sequence[Mapping[str, Any]], key: str) -> list[int]:
    return sorted(int(p["retrieval_rank"]) for p in passages if p.get(key) and p.get("retrieval_rank") is not None)


def _hash(ranks: Sequence[int]) -> str:
    return " ".join(f"#{r}" for r in ranks)


def stage_of(q: Mapping[str, Any], passages: Sequence[Mapping[str, Any]]) -> Stage:
    """The stage of one question (its row) from its passages' rows (``retrieval_rank``, ``used``,
    ``is_gold``)."""
    if q.get("error"):
        return Stage("no_content", "no answer: the question failed")
    if q.get("answerable") is False:
        if q.get("declined"):
            return Stage("declined", "unanswerable, and the model declined")
        return Stage("made_up", "unanswerable, and the model answered anyway")
    if not str(q.get("baseline_answer") or "").strip():
        return Stage("no_content", "no answer: the model generated nothing")
    used = _ranks(passages, "used")
    right = q.get("answer_correct")
    # the answer does not depend on the passages: the closed book gives it, or (loo mode) no
    # passage left out changes it
    ignored = q.get("context_dependent") is False or q.get("state") == "context_ignored"
    if right is None:
        if ignored:
            return Stage("not_judged", "no gold answer; the model gives this answer without the passages")
        if used:
            return Stage("not_judged", f"no gold answer; the answer leaned on {_hash(used)}")
        return Stage("not_judged", "no gold answer; no passage stands out")
    if right:
        return Stage("right", "right" + (", from the passages" if used else ""))
    gold_known = q.get("hit_at_k") is not None
    gold = _ranks(passages, "is_gold") if gold_known else []
    if gold_known and not gold:
        return Stage("retrieval", "no gold passage retrieved")
    if ignored:
        return Stage("memory", "the model gives this answer without the passages")
    if not gold_known:
        where = f"the answer leaned on {_hash(used)}" if used else "no passage stands out"
        return Stage("not_judged", f"wrong; no gold passages to tell retrieval from generation ({where})")
    gold_used = _ranks([p for p in passages if p.get("is_gold")], "used")
    if gold_used:
        return Stage("generation", f"the answer leaned on the gold ({_hash(gold_used)}) and is still wrong")
    if not used:
        return Stage("generation", f"gold retrieved at {_hash(gold)}; no passage stands out")
    if gold[0] > used[0]:
        return Stage("ranking", f"gold ranked {_hash(gold)}, below {_hash(used)} that the answer leaned on")
    return Stage("generation", f"gold ranked {_hash(gold)}, above {_hash(used)} that the answer leaned on")


def stage_counts(stages: Sequence[Stage]) -> dict[str, int]:
    """Questions per stage, every stage present (0 where none)."""
    out = dict.fromkeys(STAGES, 0)
    for s in stages:
        out[s.stage] += 1
    return out
