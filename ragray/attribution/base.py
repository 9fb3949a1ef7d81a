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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ragray.attribution.subsets import Subset
from ragray.registry import Registry

__all__ = ["Changed", "Evidence", "Fitted", "MEASURES", "Measure", "Scored", "Scores", "control_names", "measure_for_mode",
           "measures", "planners"]


@dataclass(frozen=True)
class Scored:
    """The answer's log-probability under one context (the units it ``kept``), and why that context
    was scored (``full``, ``drop``, ``closed_book``, ``design``, ``surrogate``, ``heldout``, ``top_k``)."""

    kept: frozenset[int]
    logprob: float
    purpose: str


@dataclass(frozen=True)
class Changed:
    """How far the answer regenerated from one context (the units it ``kept``) moved from the
    answer: ``1 − sim(answer, regenerated)``; ``purpose``: ``drop`` or ``random``."""

    kept: frozenset[int]
    change: float
    purpose: str


@dataclass(frozen=True)
class Scores:
    """One measure's scores for a question's units (retrieval order), higher = more used."""

    name: str
    scores: list[float]
    control: bool


@dataclass(frozen=True)
class Fitted:
    """What a measure found for one question: one score per unit (retrieval order, higher = more
    used), the measure's name and its column, and, for a measure that fits a model of the answer's
    log-probability, what that model predicts for a kept subset (``predict``) and the model itself."""

    name: str
    column: str
    scores: list[float]
    control: bool = False
    predict: Callable[[Sequence[int]], float] | None = None
    model: Any = None


@dataclass(frozen=True)
class Evidence:
    """What one question (or explanation stage) measured, for every measure to read.

    ``scored``: every context whose log-probability of the answer is known; ``changed``: per
    regenerated arm, the units it kept and ``1 − sim(answer, regenerated answer)``; ``side``: per-unit
    inputs that cost no call (retrieval rank and score, embeddings, the JSD of the drop-one arms,
    a random draw); ``reserved``: kept sets a fit must not use (the LDS check's held-out subsets).
    """

    n: int
    scored: tuple[Scored, ...] = ()
    changed: tuple[Changed, ...] = ()
    side: Mapping[str, Sequence[float] | None] = field(default_factory=dict)
    reserved: frozenset[frozenset[int]] = frozenset()

    def logprob(self, kept: frozenset[int]) -> float:
        """The first scored log-probability of ``kept`` (NaN: not scored)."""
        for s in self.scored:
            if s.kept == kept:
                return s.logprob
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
        return [(s.kept, s.logprob) for s in self.scored if s.kept not in self.reserved and not math.isnan(s.logprob)
                and (purposes is None or s.purpose in purposes)]


class Measure(ABC):
    """One way to score how much each unit did for the answer. A measure names itself once, here:
    ``name`` (the registry's key, the config's and the tables' name for it) and what it declares
    below; everything that lists measures (the influence loop, its checks, the faithfulness
    experiments, the cost estimates) reads these, never a table of names."""

    name: ClassVar[str]
    #: the measure's column in the passages and checks tables (default: its name)
    column: ClassVar[str]
    #: a free control (no model call), which every attribution must beat
    control: ClassVar[bool] = False
    #: the :data:`~ragray.ablation.engine.SCORERS` entry that measures the drop-one arms when this
    #: measure is the run's influence (``influence.mode``)
    scorer: ClassVar[str] = "logprob"
    #: offered as the run's influence (``influence.mode: <name>``)
    as_influence: ClassVar[bool] = False
    #: offered in the faithfulness experiments (``faithfulness.attributions`` / ``explainer: <name>``)
    as_explainer: ClassVar[bool] = False
    #: there, fitted on the random-deletion arm's answers (no call of its own)
    fits_random_arm: ClassVar[bool] = False
    #: scores contexts of its own (:meth:`subsets`): it has a result only where the run planned them
    own_contexts: ClassVar[bool] = False
    #: what its contexts are scored for (the ``subsets`` table's ``purpose``; default: its name)
    purpose: ClassVar[str]
    #: its contexts are random draws: each is a point of the fit every time it is drawn (the
    #: ``subsets`` table lists every draw, repeats and contexts other measures scored included)
    random_draws: ClassVar[bool] = False
    #: as the run's influence, the answer with no passages is scored too (the closed-book pass)
    needs_closed_book: ClassVar[bool] = False
    #: as the run's influence, the position control measures it in the other order too (else it
    #: compares drop-one in both orders)
    influence_in_both_orders: ClassVar[bool] = True
    #: reads regenerated answers (``Evidence.changed``): the drop-one arms must be generated
    needs_generated_arms: ClassVar[bool] = False
    #: reads the answer's log-probability without each unit (the drop-one contexts must be scored)
    needs_drop_scores: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            for declared in ("column", "purpose"):
                if declared not in cls.__dict__:
                    setattr(cls, declared, cls.name)

    def __init__(self, config: Any = None) -> None:
        """``config``: the settings section the measure reads (``influence``), if any."""
        self.config = config

    def subsets(self, n: int, question_id: str) -> list[Subset]:
        """Contexts this measure needs scored beyond the full one and the drop-one arms."""
        return []

    @abstractmethod
    def scores(self, evidence: Evidence) -> list[float]:
        """One score per unit, higher = more used (NaN: unmeasured)."""

    def available(self, evidence: Evidence) -> bool:
        """Whether ``evidence`` holds what this measure reads without contexts of its own."""
        return not (self.needs_generated_arms or self.own_contexts)

    def fit(self, evidence: Evidence) -> Fitted | None:
        """This measure's result for one question (None: nothing to report for it)."""
        return Fitted(self.name, self.column, self.scores(evidence), self.control)

    @classmethod
    def wanted(cls, config: Any) -> bool:
        """Whether ``config`` asks for this measure beside the run's influence (it scores contexts
        of its own for it)."""
        return False

    def influence(self, fitted: Fitted | None, n: int) -> list[float]:
        """The run's influence column from this measure's result, where it is the run's measure
        and scores contexts of its own (NaN: no result)."""
        return list(fitted.scores) if fitted is not None else [math.nan] * n

    def calls(self, n: int) -> int:
        """Model calls the measure costs for ``n`` units (0: it reuses what others scored)."""
        return 0


#: the modules of the built-in measures, in the order the checks report them
_MODULES = ("ragray.attribution.measures", "ragray.attribution.interactions", "ragray.attribution.controls")
MEASURES: Registry[Measure] = Registry("attribution", {}, modules=_MODULES)


def measures() -> list[type[Measure]]:
    """Every measure, in the order the checks report them (attributions, then the controls)."""
    return MEASURES.registered()


def measure_for_mode(mode: str) -> type[Measure]:
    """The measure an ``influence.mode`` makes the run's influence."""
    found = [m for m in measures() if m.as_influence and m.name == mode]
    if not found:
        modes = ", ".join(m.name for m in measures() if m.as_influence)
        raise ValueError(f"no measure for influence.mode {mode!r}; modes: {modes}")
    return found[0]


def planners(measure: Measure, config: Any) -> list[Measure]:
    """The measures that score contexts of their own in a run whose influence is ``measure``: it,
    and those ``config`` asks for beside it (:meth:`Measure.wanted`)."""
    return [measure] + [m(config) for m in measures() if m.own_contexts and m is not type(measure) and m.wanted(config)]


def control_names() -> list[str]:
    """The free controls, in the order the checks report them."""
    return [m.name for m in measures() if m.control]
