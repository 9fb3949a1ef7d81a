"""Does each measure capture what the model used? The top-k drop and the LDS of every measure on
the question's CallBook (SPEC §12).

For every measure and control (:class:`~ragray.attribution.base.Scores`): the answer's log-prob
drop when its top-k passages are removed, and the LDS on held-out random subsets
(:mod:`ragray.metrics.attribution_checks`), all new prompts in ONE backend call. A measure with a
model of its own (``models``: the interaction fit's prediction) is ranked by that model rather
than by the sum of its scores. Held-out subsets are never ones a measure was fitted on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence

from ragray.ablation.engine import CallBook
from ragray.attribution.base import Scores
from ragray.attribution.subsets import Subset, draw_subsets, top_k_removed
from ragray.config import InfluenceConfig
from ragray.generation.base import ChatPrompt
from ragray.metrics.attribution_checks import lds, top_k_drop
from ragray.rows.influence import CheckRow, SubsetRow
from ragray.types import Passage

__all__ = ["heldout_subsets", "run_checks"]

#: a prompt for passages in the order given
Build = Callable[[Sequence[Passage]], ChatPrompt]


def heldout_subsets(k: int, config: InfluenceConfig, question_id: str,
                    exclude: Collection[frozenset[int]] = ()) -> list[Subset]:
    """The LDS check's held-out subsets of one question (seeded: the surrogate can know them before
    the check runs, and leave them out of its fit)."""
    return draw_subsets(k, config.check_subsets, seed=config.check_seed, question_id=question_id,
                        purpose="heldout", exclude=exclude)


def run_checks(book: CallBook, build: Build, passages: Sequence[Passage], question_id: str, answer: str,
               logprob_all: float, measures: Sequence[Scores], config: InfluenceConfig,
               exclude: Collection[frozenset[int]] = (),
               models: Mapping[str, Callable[[Sequence[int]], float]] | None = None,
               ) -> tuple[tuple[CheckRow, ...], tuple[SubsetRow, ...], int, float]:
    """Top-k drop and LDS of every measure: ``(check rows, subset rows, passes, seconds)``."""
    start, before = time.perf_counter(), book.score_passes
    k = len(passages)
    models = models or {}
    heldout = heldout_subsets(k, config, question_id, exclude)
    ks = [n for n in config.check_top_k if n < k]
    removals = {(m.name, n): top_k_removed(m.scores, n) for m in measures for n in ks}
    distinct = list(dict.fromkeys(removals.values()))

    def without(removed: tuple[int, ...]) -> ChatPrompt:
        return build([p for i, p in enumerate(passages) if i not in removed])

    prompts = [build([passages[i] for i in s.shown]) for s in heldout] + [without(r) for r in distinct]
    lps = book.logprobs(prompts, [answer] * len(prompts))
    held_lps, removal_lps = lps[: len(heldout)], dict(zip(distinct, lps[len(heldout):]))
    rows = []
    for m in measures:
        kept = [sorted(s.kept) for s in heldout]
        if not heldout:
            value = None
        elif m.name in models:  # the measure's own model, interactions included
            value = lds(m.scores, kept, held_lps, predicted=[models[m.name](s) for s in kept])
        else:
            value = lds(m.scores, kept, held_lps)
        drops = tuple(top_k_drop(logprob_all, removal_lps[removals[(m.name, n)]]) for n in ks)
        rows.append(CheckRow(question_id, m.name, m.control, value, len(heldout), tuple(ks),
                             tuple(float("nan") if d is None else d for d in drops)))
    subset_rows = [SubsetRow(question_id, "heldout", tuple(passages[i].id for i in s.shown), lp)
                   for s, lp in zip(heldout, held_lps)]
    subset_rows += [SubsetRow(question_id, "top_k", tuple(p.id for i, p in enumerate(passages) if i not in r),
                              removal_lps[r]) for r in distinct]
    return tuple(rows), tuple(subset_rows), book.score_passes - before, time.perf_counter() - start
