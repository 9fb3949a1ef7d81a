"""The edit test of one question: does the answer follow an edit of its passages? (known truth)

For a question whose gold answer ``a`` stands in some of the passages shown, ``a`` is replaced by a
same-kind substitute ``b`` in one passage at a time and, where two or more hold it, in all of them
(:func:`ragray.data.edits.edit_cases`); each edited prompt and the unedited one are generated in ONE
batched call, and each answer is read as ``substitute``, ``original``, ``both`` or ``neither``
(:func:`outcome_of`). The unedited prompt is the run's own prompt: its answer should reproduce the
run's (``reproduces_run``), a check that the edit prompts are the run's.

What the outcomes prove (:meth:`EditTest.labels`, the rule of
``benchmarks/shared_evidence_report.py::edit_figures``), on a question whose unedited answer holds
``a``: a passage edited alone whose edit moves the answer to ``b`` produced the answer, by
construction (label ``True``); the only passage holding ``a`` whose edit leaves the answer at ``a``
did not give it (another passage without the exact string, or the model's memory did: ``False``).
Every other case — a copy edited while another copy still holds ``a``, an answer holding both or
neither, the every-copy case — labels no passage.

It costs one generation per passage holding the answer, one more for the every-copy case and one
for the unedited prompt; ``ragray run`` runs it after each question's attribution where
``influence.edit_test`` is on, and ``benchmarks/shared_evidence_collect.py`` on its records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from ragray.data.conflicts import _contains, taken_source
from ragray.data.edits import answer_in, edit_cases
from ragray.generation import Generator
from ragray.generation.base import ChatPrompt
from ragray.generation.prompts import PromptTemplate
from ragray.text.normalize import normalize_answer
from ragray.types import Passage

__all__ = ["EditCaseOutcome", "EditTest", "Outcome", "edit_test", "edit_test_calls", "outcome_of", "substitute_pool"]

#: what an answer holds of the two candidates (whole words, normalized)
Outcome = Literal["substitute", "original", "both", "neither"]


@dataclass(frozen=True)
class EditCaseOutcome:
    """One edit: the passages edited (ids, in the order shown), whether the edit reached every
    passage holding the answer, and where the regenerated answer went."""

    edited: tuple[str, ...]
    every_copy: bool
    outcome: Outcome


@dataclass(frozen=True)
class EditTest:
    """The edit test of one question. ``answer`` is None when no passage holds a gold answer, and
    ``cases`` is empty then or when no substitute exists: no generation was made."""

    answer: str | None = None
    substitute: str | None = None
    unedited: Outcome | None = None
    #: the unedited prompt's answer equals the run's (None: no run answer was given)
    reproduces_run: bool | None = None
    cases: tuple[EditCaseOutcome, ...] = ()

    @property
    def kind(self) -> str | None:
        """``number``, ``name`` (capitalized) or ``phrase``: what the answer and its substitute are."""
        a = self.answer
        if a is None or not self.cases:
            return None
        return "number" if any(c.isdigit() for c in a) else "name" if a[:1].isupper() else "phrase"

    @property
    def generations(self) -> int:
        """Generations the test made: the unedited prompt and one per case (0 without cases)."""
        return len(self.cases) + 1 if self.cases else 0

    def labels(self) -> dict[str, bool]:
        """Passage id -> the answer moved with its edit (``True``) or stayed although it was the only
        passage holding the answer (``False``); passages without a label are absent. Nothing is
        labelled unless the unedited answer holds the original answer alone."""
        if self.unedited != "original":
            return {}
        out: dict[str, bool] = {}
        for case in self.cases:
            if len(case.edited) != 1:
                continue  # the every-copy case says the copies were used together, not which one
            if case.outcome == "substitute":
                out[case.edited[0]] = True
            elif case.outcome == "original" and case.every_copy:
                out[case.edited[0]] = False
        return out


def edit_test_calls(k: int) -> int:
    """Generations the edit test makes, at most, on a question with ``k`` passages: each passage
    edited alone, all of them together (two or more), and the unedited prompt."""
    return k + (2 if k >= 2 else 1) if k >= 1 else 0


def outcome_of(text: str, original: str, substitute: str) -> Outcome:
    """Where an answer went: ``original`` or ``substitute`` when it holds exactly one of the two
    (:func:`ragray.data.conflicts.taken_source`), ``both`` or ``neither`` otherwise."""
    got = taken_source(text, original, substitute)
    if got is not None:
        return "original" if got == "original" else "substitute"
    return "both" if _contains(text, original) and _contains(text, substitute) else "neither"


def substitute_pool(answers: Iterable[Sequence[str]]) -> tuple[str, ...]:
    """Every distinct gold answer of a data set (``answers``: each question's), the substitutes an
    edit draws from; yes / no and answers that normalize to nothing left out."""
    return tuple(sorted({a for group in answers for a in group
                         if normalize_answer(a) and a.strip().lower() not in ("yes", "no")}))


def edit_test(question: str, answers: Sequence[str], passages: Sequence[Passage], pool: Sequence[str],
              generator: Generator, template: PromptTemplate, system: str | None, *, seed: str,
              run_answer: str | None = None) -> EditTest:
    """The edit test of ``question`` over ``passages`` as shown (retrieval order), with substitutes
    from ``pool`` (drawn with ``seed``, the question id), on the run's ``generator``, ``template`` and
    ``system`` message; ``run_answer``: the run's answer, which the unedited prompt should give."""
    shown = [{"id": p.id, "text": p.text} for p in passages]
    cases = edit_cases(shown, answers, pool, seed=seed)
    if not cases:  # no passage holds a gold answer, or no substitute of its kind exists
        return EditTest(answer=answer_in(shown, answers)[0])

    def prompt(texts: Sequence[Mapping[str, Any]]) -> ChatPrompt:
        return template.build(question, [replace(p, text=t["text"]) for p, t in zip(passages, texts)], system)

    gens = generator.generate([prompt(shown), *(prompt(c.passages) for c in cases)])
    texts = [g.text or "" for g in gens]
    a, b = cases[0].answer, cases[0].substitute
    return EditTest(
        answer=a, substitute=b, unedited=outcome_of(texts[0], a, b),
        reproduces_run=None if run_answer is None else texts[0].strip() == run_answer.strip(),
        cases=tuple(EditCaseOutcome(tuple(c.edited), c.every_copy, outcome_of(t, a, b))
                    for c, t in zip(cases, texts[1:])),
    )
