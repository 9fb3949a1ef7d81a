"""One interface for every attribution: what a measure reads, what it returns, where it is found.

A :class:`Measure` turns a question's :class:`Evidence` (the answer's log-probability under
contexts that were scored, the answers regenerated without units, side inputs that cost no call)
into one score per unit, higher = more used. It says what it needs: the contexts it wants scored
(:meth:`Measure.subsets`) and whether it reads regenerated answers. The influence run, the
faithfulness experiments, the evidence benchmarks and the API look measures up in ``MEASURES``;
controls (retrieval rank, a random draw, embeddings) are measures too, marked ``control``, so the
checks treat them alike.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ragray.attribution.subsets import Subset
from ragray.registry import Registry

__all__ = ["CONTROL_NAMES", "Evidence", "MEASURES", "MODE_MEASURES", "Measure", "Observed", "Scores"]


@dataclass(frozen=True)
class Observed:
    """What one context (the units it kept) did to the answer, and why it was measured
    (``full``, ``drop``, ``closed_book``, ``design``, ``surrogate``, ``random``, ``heldout``, ``top_k``):
    in ``Evidence.scored`` the answer's log-probability, in ``Evidence.changed`` 1 − sim(answer,
    the answer regenerated from that context)."""

    kept: frozenset[int]
    value: float
    purpose: str


@dataclass(frozen=True)
class Scores:
    """One measure's scores for a question's units (retrieval order), higher = more used."""

    name: str
    scores: list[float]
    control: bool


@dataclass(frozen=True)
class Evidence:
    """What one question (or explanation stage) measured, for every measure to read.

    ``scored``: every context whose log-probability of the answer is known; ``changed``: per
    regenerated arm, the units it kept and ``1 − sim(answer, regenerated answer)``; ``side``: per-unit
    inputs that cost no call (retrieval rank and score, embeddings, the JSD of the drop-one arms,
    a random draw); ``reserved``: kept sets a fit must not use (the LDS check's held-out subsets).
    """

    n: int
    scored: tuple[Observed, ...] = ()
    changed: tuple[Observed, ...] = ()
    side: Mapping[str, Sequence[float] | None] = field(default_factory=dict)
    reserved: frozenset[frozenset[int]] = frozenset()

    def logprob(self, kept: frozenset[int]) -> float:
        """The first scored log-probability of ``kept`` (NaN: not scored)."""
        for s in self.scored:
            if s.kept == kept:
                return s.value
        return math.nan

    @property
    def full(self) -> frozenset[int]:
        return frozenset(range(self.n))

    def drops(self) -> list[float]:
        """``log p(y | all) − log p(y | all − i)`` per unit (NaN where either is not scored)."""
        full = self.logprob(self.full)
        return [full - self.logprob(self.full - {i}) for i in range(self.n)]

    def points(self, purposes: Sequence[str] | None = None) -> list[tuple[frozenset[int], float]]:
        """Every scored (kept set, log-prob) not reserved (of ``purposes``, if given), NaN left out."""
        return [(s.kept, s.value) for s in self.scored if s.kept not in self.reserved and not math.isnan(s.value)
                and (purposes is None or s.purpose in purposes)]


class Measure(ABC):
    """One way to score how much each unit did for the answer."""

    name: ClassVar[str]
    #: the measure's column in the passages and checks tables
    column: ClassVar[str]
    #: a free control (no model call), which every attribution must beat
    control: ClassVar[bool] = False
    #: the :data:`~ragray.ablation.engine.SCORERS` entry that measures the drop-one arms when this
    #: measure is the run's influence (``influence.mode``)
    scorer: ClassVar[str] = "logprob"
    #: reads regenerated answers (``Evidence.changed``): the drop-one arms must be generated
    needs_generated_arms: ClassVar[bool] = False
    #: reads the answer's log-probability without each unit (the drop-one contexts must be scored)
    needs_drop_scores: ClassVar[bool] = False

    def __init__(self, config: Any = None) -> None:
        """``config``: the settings section the measure reads (``influence``), if any."""
        self.config = config

    def subsets(self, n: int, question_id: str) -> list[Subset]:
        """Contexts this measure needs scored beyond the full one and the drop-one arms."""
        return []

    @abstractmethod
    def scores(self, evidence: Evidence) -> list[float]:
        """One score per unit, higher = more used (NaN: unmeasured)."""

    def calls(self, n: int) -> int:
        """Model calls the measure costs for ``n`` units (0: it reuses what others scored)."""
        return 0


#: the free controls, in the order the checks report them
CONTROL_NAMES: tuple[str, ...] = ("retrieval_rank", "retrieval_score", "answer_similarity", "question_similarity",
                                  "random_control")
#: every built-in measure, and the module that registers it
_BUILTINS = {
    "interactions": "ragray.attribution.interactions",
    **dict.fromkeys(("loo", "logprob_share", "logprob_drop", "jsd", "surrogate"), "ragray.attribution.measures"),
    **dict.fromkeys(CONTROL_NAMES, "ragray.attribution.controls"),
}
MEASURES: Registry[Measure] = Registry("attribution", _BUILTINS)
#: ``influence.mode`` -> the measure behind the influence column
MODE_MEASURES: dict[str, str] = {"generate": "loo", "logprob": "logprob_share", "jsd": "jsd",
                                 "surrogate": "surrogate", "interactions": "interactions"}
