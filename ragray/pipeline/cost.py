"""What a command will cost in model calls, from its config, before it starts.

A run's cost is its questions times one question's calls with ``retrieval.top_k`` passages (a
question has at most that many): :func:`~ragray.ablation.cost.influence_calls` for ``run`` (plus
:func:`~ragray.pipeline.edit_test.edit_test_calls` with ``influence.edit_test``),
:func:`~ragray.faithfulness.cost.faithfulness_calls` for ``interpret``, the two explanation calls of
:func:`~ragray.audit.explain.explain_audits` for ``audit`` with ``audit.llm`` (none without). The
questions are ``data.limit``, else the dataset's, read once here. The HTTP server refuses a request
whose cost is over ``serve.max_calls_per_request`` (:meth:`ragray.config.limits.Limits.check_calls`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ragray.ablation.cost import influence_calls
from ragray.config import DataConfig, ExperimentConfig
from ragray.config.limits import Limits
from ragray.errors import RagrayError
from ragray.faithfulness.cost import faithfulness_calls, is_upper_bound
from ragray.pipeline.edit_test import edit_test_calls

__all__ = ["Cost", "check_cost", "command_cost", "question_calls", "questions_of"]

#: model calls of one audited question with ``audit.llm``: its aspects and its explanation
AUDIT_LLM_CALLS = 2


@dataclass(frozen=True)
class Cost:
    """``questions`` of ``what`` (``interpret run``, ``/influence request``), each at most
    ``per_question`` model calls (an estimate rather than a bound where ``upper_bound`` is False)."""

    what: str
    questions: int
    per_question: int
    upper_bound: bool = True

    @property
    def calls(self) -> int:
        return self.questions * self.per_question

    def describe(self) -> str:
        each = "at most" if self.upper_bound else "an estimated"
        what = f"{self.questions} question" + ("s" if self.questions != 1 else "")
        return f"this {self.what} of {what}, {each} {self.per_question} model calls each,"


def question_calls(config: ExperimentConfig, command: str, passages: int) -> tuple[int, bool]:
    """One question's model calls with ``passages`` passages, and whether that is an upper bound."""
    if command == "interpret":
        return faithfulness_calls(config.faithfulness, passages), is_upper_bound(config.faithfulness)
    if command == "audit":
        return (AUDIT_LLM_CALLS if config.audit.llm else 0), True
    edits = edit_test_calls(passages) if config.influence.edit_test else 0
    return influence_calls(config.influence, passages) + edits, True


def questions_of(data: DataConfig) -> int:
    """``data.limit``, else how many questions the dataset holds (0 when it cannot be read: the run
    then fails before any model call)."""
    if data.limit is not None:
        return data.limit
    from ragray.data import load_dataset

    try:
        return len(load_dataset(data).questions)
    except (RagrayError, OSError, ValueError):  # the run fails on it too, with its own message
        return 0


def command_cost(config: ExperimentConfig, command: str, questions: int | None = None,
                 passages: int | None = None, what: str | None = None) -> Cost:
    """The cost of ``command`` (run | interpret | audit) over ``questions`` (default: the config's)
    with ``passages`` passages each (default ``retrieval.top_k``); ``what`` names it in messages."""
    per_question, bound = question_calls(config, command, passages or config.retrieval.top_k)
    n = questions_of(config.data) if questions is None else questions
    return Cost(what or f"{command} run", n, per_question, bound)


def check_cost(cost: Cost, limits: Limits, where: str) -> None:
    """Raise :class:`~ragray.errors.LimitError` when ``cost`` is over ``limits.max_calls``."""
    limits.check_calls(cost.calls, cost.describe(), where)
