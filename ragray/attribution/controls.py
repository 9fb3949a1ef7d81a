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

    def scores(self, evidence: Evidence) -> list[float]:
        values = evidence.side.get(self.name)
        return list(values) if values is not None else [math.nan] * evidence.n


@MEASURES.register("retrieval_rank")
class RetrievalRank(Control):
    name = column = "retrieval_rank"


@MEASURES.register("retrieval_score")
class RetrievalScore(Control):
    name = column = "retrieval_score"


@MEASURES.register("answer_similarity")
class AnswerSimilarity(Control):
    name = column = "answer_similarity"


@MEASURES.register("question_similarity")
class QuestionSimilarity(Control):
    name = column = "question_similarity"


@MEASURES.register("random_control")
class RandomControl(Control):
    name = column = "random_control"


def random_scores(k: int, seed: int, question_id: str) -> list[float]:
    """The random control's seeded uniform scores."""
    return [float(v) for v in rng_for(seed, question_id, "random_control").random(k)]
