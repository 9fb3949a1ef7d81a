"""The attribution methods that explain an answer, behind one base class and a registry.

Each method turns what the experiment measured into one raw importance per unit
(:mod:`ragray.faithfulness.importance` normalizes and ranks them), the way ContextCite injects its
partitioner and solver: the experiment asks every configured method in ``ATTRIBUTION_ORDER``, and
a method says which ablations it needs.

- ``loo``: 1 − sim(y, y′ᵢ), the answer regenerated without unit i (needs the leave-one-out arms);
- ``logprob``: log p(y | all) − log p(y | all − i), clipped at 0 (scores the leave-one-out
  contexts: one teacher-forced pass each, no generation);
- ``surrogate``: the weights of a non-negative sparse linear model of the random-deletion arm
  (:mod:`ragray.faithfulness.surrogate`), fitted on answers already generated.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from ragray.faithfulness.arms import DEL_NONE, Ablation
from ragray.faithfulness.importance import logprob_scores, loo_scores
from ragray.faithfulness.surrogate import surrogate_weights
from ragray.registry import Registry

__all__ = ["ATTRIBUTIONS", "ATTRIBUTION_ORDER", "Attribution", "Evidence"]

#: the methods in the order the experiment runs and reports them
ATTRIBUTION_ORDER = ("loo", "logprob", "surrogate")


@dataclass(frozen=True)
class Evidence:
    """What one explanation stage measured: ``n`` units, their leave-one-out and random-deletion
    arms, each arm's similarity to the baseline, and the baseline answer's log-probability under
    arms (scored on demand)."""

    n: int
    loo: Sequence[Ablation]
    randoms: Sequence[Ablation]
    similarity: Callable[[Ablation], float]
    logprobs: Callable[[Sequence[Ablation]], list[float]]


class Attribution(ABC):
    """One way to score each unit's importance for the answer."""

    name: ClassVar[str]
    #: the leave-one-out arms must be generated in the stage's phase (not only scored)
    needs_loo_arms: ClassVar[bool] = False

    @abstractmethod
    def raw(self, evidence: Evidence) -> list[float]:
        """One raw importance per unit (NaN: unmeasured)."""

    def calls(self, n: int) -> int:
        """Model calls this method costs when it is the explainer (0: reuses other arms)."""
        return 0


ATTRIBUTIONS: Registry[Attribution] = Registry("attribution", dict.fromkeys(ATTRIBUTION_ORDER, __name__))


@ATTRIBUTIONS.register("loo")
class LeaveOneOut(Attribution):
    name = "loo"
    needs_loo_arms = True

    def raw(self, evidence: Evidence) -> list[float]:
        return loo_scores([evidence.similarity(a) for a in evidence.loo])

    def calls(self, n: int) -> int:
        return n


@ATTRIBUTIONS.register("logprob")
class LogProbDrop(Attribution):
    name = "logprob"

    def raw(self, evidence: Evidence) -> list[float]:
        lps = evidence.logprobs([Ablation(DEL_NONE), *evidence.loo])
        return logprob_scores(lps[0], lps[1:])

    def calls(self, n: int) -> int:
        return n + 1


@ATTRIBUTIONS.register("surrogate")
class Surrogate(Attribution):
    name = "surrogate"

    def raw(self, evidence: Evidence) -> list[float]:
        randoms = evidence.randoms
        return surrogate_weights(evidence.n, [a.removed for a in randoms], [evidence.similarity(a) for a in randoms])
