"""The free controls, read as measures: what an attribution must beat without a model call.

``retrieval_rank`` ((k + 1 − rank) / k), ``retrieval_score``, ``answer_similarity`` and
``question_similarity`` (embedding cosines with the answer and the question), ``random_control``
(a seeded uniform draw per question). Each reads its values from ``Evidence.side``; NaN where the
run has none (no retrieval scores, embeddings off).
"""

from __future__ import annotations

import math

from ragray.attribution.base import MEASURES, Evidence, Measure
from ragray.attribution.subsets import rng_for

__all__ = ["AnswerSimilarity", "Control", "QuestionSimilarity", "RandomControl", "RetrievalRank", "RetrievalScore",
           "random_scores"]


class Control(Measure):
    control = True

    def available(self, evidence: Evidence) -> bool:
        return evidence.side.get(self.name) is not None

    def scores(self, evidence: Evidence) -> list[float]:
        values = evidence.side.get(self.name)
        return list(values) if values is not None else [math.nan] * evidence.n


@MEASURES.register()
class RetrievalRank(Control):
    name = "retrieval_rank"


@MEASURES.register()
class RetrievalScore(Control):
    name = "retrieval_score"


@MEASURES.register()
class AnswerSimilarity(Control):
    name = "answer_similarity"


@MEASURES.register()
class QuestionSimilarity(Control):
    name = "question_similarity"


@MEASURES.register()
class RandomControl(Control):
    name = "random_control"


def random_scores(k: int, seed: int, question_id: str) -> list[float]:
    """The random control's seeded uniform scores."""
    return [float(v) for v in rng_for(seed, question_id, "random_control").random(k)]
