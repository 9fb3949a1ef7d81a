"""The validity panel's known-truth check: does the ``used`` mark agree with where the answer
follows an edit? (``summary.json`` → ``panel`` → ``edit_test``)

With ``influence.edit_test`` a run replaces the gold answer in each passage holding it and
regenerates (:mod:`ragray.pipeline.edit_test`); the passages table's ``edit_moved`` is ``True`` where
the answer moved with the edit (the passage was used, by construction), ``False`` where the only
passage holding the answer was edited and the answer stayed (it was not), and null elsewhere. Over
the labelled passages, each mark — ``used`` and two free controls, the retriever's top passage and
the passage most similar to the answer (``answer_similarity``) — is scored as a detector of "moved":

- precision: of the labelled passages it marks, the share that moved;
- recall: of the passages that moved, the share it marks;

each as k of n with its Wilson 95% interval (:func:`ragray.metrics.rates.rate`). A passage whose
mark is null (not measured) is left out of that mark's counts. The block is absent (None) when the
option is off, and ``available: false`` with a reason when nothing was labelled: never zeros.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ragray.metrics.rates import rate

__all__ = ["MARKS", "edit_test_block", "edit_test_line"]

Row = Mapping[str, Any]

#: mark -> its name in words
MARKS = {
    "used": "used",
    "retrieval_top1": "the retriever's top 1",
    "answer_similarity_top1": "answer–passage similarity top 1",
}


def _used(rows: Sequence[Row]) -> list[bool | None]:
    return [None if r.get("used") is None else bool(r["used"]) for r in rows]


def _retrieval_top1(rows: Sequence[Row]) -> list[bool | None]:
    return [i == 0 for i in range(len(rows))]  # rows are in retrieval order


def _similarity_top1(rows: Sequence[Row]) -> list[bool | None]:
    """The most similar passage (the first in retrieval order on a tie); None where unmeasured."""
    sims = [r.get("answer_similarity") for r in rows]
    known = [(s, -i) for i, s in enumerate(sims) if s is not None and s == s]  # NaN != NaN
    if not known:
        return [None] * len(rows)
    best = -max(known)[1]
    return [i == best for i in range(len(rows))]


_MARK_FNS: dict[str, Callable[[Sequence[Row]], list[bool | None]]] = {
    "used": _used, "retrieval_top1": _retrieval_top1, "answer_similarity_top1": _similarity_top1}


def _reason(tested: Sequence[Row]) -> str:
    if not tested:
        return "no question with gold answers was tested (all failed, or none has gold answers)"
    with_cases = [q for q in tested if q.get("edit_calls")]
    if not with_cases:
        return (f"in none of the {len(tested)} questions tested does a passage hold a gold answer as whole words "
                "(with a substitute of its kind in the data set)")
    original = sum(q.get("edit_unedited") == "original" for q in with_cases)
    return (f"no passage labelled: {len(with_cases)} of {len(tested)} questions had a passage holding a gold "
            f"answer, {original} of them answered it unedited; every edit left the answer with another copy, "
            "or gave an answer holding both or neither")


def edit_test_block(questions: Sequence[Row], passages: Sequence[Row], enabled: bool) -> dict[str, Any] | None:
    """The ``edit_test`` block of the panel from a run's questions and passages tables (None when
    ``enabled`` — ``influence.edit_test`` — is off)."""
    if not enabled:
        return None
    by_q: dict[str, list[Row]] = defaultdict(list)
    for p in passages:
        by_q[p["question_id"]].append(p)
    tested = [q for q in questions if q.get("edit_calls") is not None]
    with_cases = [q for q in tested if q.get("edit_calls")]
    reproduced = [q["edit_reproduces"] for q in with_cases if q.get("edit_reproduces") is not None]
    counts: dict[str, list[int]] = {m: [0, 0, 0, 0] for m in MARKS}  # marked & moved, marked, moved, measured
    labelled = moved = 0
    for q in tested:
        rows = sorted(by_q.get(q["question_id"], []), key=lambda r: r.get("retrieval_rank") or 0)
        labels = [r.get("edit_moved") for r in rows]
        if all(v is None for v in labels):
            continue
        marks = {m: fn(rows) for m, fn in _MARK_FNS.items()}
        for i, label in enumerate(labels):
            if label is None:
                continue
            labelled += 1
            moved += bool(label)
            for m, c in counts.items():
                mark = marks[m][i]
                if mark is None:
                    continue
                c[0] += bool(mark and label)
                c[1] += bool(mark)
                c[2] += bool(label)
                c[3] += 1
    base = {"questions_tested": len(tested), "questions_with_edits": len(with_cases),
            "generations": sum(q.get("edit_calls") or 0 for q in tested),
            "unedited_reproduces_run": rate(sum(map(bool, reproduced)), len(reproduced)),
            "passages_labelled": labelled, "moved": moved}
    if not labelled:
        return {"available": False, "reason": _reason(tested), **base, "marks": {}}
    return {"available": True, "reason": None, **base,
            "marks": {m: {"name": MARKS[m], "measured": c[3], "precision": rate(c[0], c[1]),
                          "recall": rate(c[0], c[2])} for m, c in counts.items() if c[3]}}


def _rate_text(r: Mapping[str, Any]) -> str:
    if not r.get("n"):
        return f"– ({r.get('k', 0)}/0)"
    lo, hi = r["ci95"]
    return f"{r['share']:.2f} [{lo:.2f}, {hi:.2f}] ({r['k']}/{r['n']})"


def edit_test_line(block: Mapping[str, Any] | None) -> str | None:
    """The block as one line of text (None when absent)."""
    if not block:
        return None
    head = "edit test (does the answer follow an edit of the passage?)"
    if not block.get("available"):
        return f"{head}: not measured — {block.get('reason') or 'nothing labelled'}."
    marks = "; ".join(f"{m['name']}: precision {_rate_text(m['precision'])}, recall {_rate_text(m['recall'])}"
                      for m in block["marks"].values())
    return (f"{head}: {block['passages_labelled']} passages labelled, {block['moved']} moved the answer; "
            f"{marks} (Wilson 95%).")
