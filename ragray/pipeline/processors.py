"""The per-question work of each command, built once per process or Ray actor.

A processor takes one question's retrieved hits and returns its record (``question`` row, its
``passages`` / ``calls`` or ``units`` / ``arms`` / ``cases`` / ``curves`` rows, and ``model``); the
executors (:mod:`ragray.pipeline.executors`) run it here or on Ray, and the Serve service runs
the same loops for one ad-hoc question.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ragray.ablation.loop import InfluenceLoop
from ragray.config import ExperimentConfig
from ragray.faithfulness.experiment import FaithfulnessExperiment
from ragray.generation import Generator
from ragray.errors import BackendError
from ragray.pipeline.edit_test import edit_test, substitute_pool
from ragray.pipeline.generators import open_generator
from ragray.generation.prompts import get_template, system_message
from ragray.cache.embeddings import embeddings_path
from ragray.metrics.quality import QualityScorer
from ragray.metrics.similarity import Similarity, all_measures, get_similarity
from ragray.retrieval.stage import QuestionHits
from ragray.rows.faithfulness import FaithfulnessRecord
from ragray.rows.influence import InfluenceRecord
from ragray.types import Dataset

__all__ = ["edit_test_inputs", "faithfulness_experiment", "faithfulness_processor", "influence_loop",
           "influence_processor", "with_edit_test"]

log = logging.getLogger(__name__)


def influence_loop(config: ExperimentConfig, generator: Generator, *, similarity: Similarity | None = None,
                   quality: QualityScorer | None = None, retrieval_k: int | None = None) -> InfluenceLoop:
    """The influence loop for ``config`` on ``generator``: the one factory of ``ragray run``'s
    processor and Serve's ``POST /influence`` (which hands in its cached similarity and quality
    scorers and the request's ``top_k_docs``)."""
    template = get_template(config.generation.template)
    if quality is None:
        quality = QualityScorer(config.metrics, store=embeddings_path(config.cache.dir) if config.cache.embeddings
                                else None, offload=generator.aside)
    return InfluenceLoop(
        generator, template, similarity or get_similarity(config.influence.similarity), config.influence,
        system_message(template, config.generation.system_prompt, config.generation.decline),
        quality=quality, model=config.generation.model, retrieval_k=retrieval_k or config.retrieval.top_k,
    )


def faithfulness_experiment(config: ExperimentConfig, generator: Generator, *,
                            measures: Sequence[Similarity] | None = None) -> FaithfulnessExperiment:
    """The deletion experiment for ``config`` on ``generator``: the one factory of ``ragray
    interpret``'s processor and Serve's ``POST /interpretation`` (which hands in its cached measures)."""
    fc = config.faithfulness
    template = get_template(config.generation.template)
    return FaithfulnessExperiment(
        generator, template, measures if measures is not None else all_measures(tuple(dict.fromkeys((fc.similarity, *fc.measures)))),
        fc, seed=config.seed,
        system_prompt=system_message(template, config.generation.system_prompt, config.generation.decline),
    )


def influence_processor(
    config: ExperimentConfig, generator: Generator | None = None, *, substitutes: Sequence[str] | None = None
) -> Callable[[QuestionHits], InfluenceRecord]:
    """The per-question work of ``ragray run``: baseline, ablations, influence, verdicts; then, with
    ``influence.edit_test``, the edit test (:mod:`ragray.pipeline.edit_test`) drawing its substitutes
    from ``substitutes`` (the run's gold answers: :func:`edit_test_inputs`)."""
    gen = generator or open_generator(config)
    loop = influence_loop(config, gen)
    if not config.influence.edit_test:
        return lambda qh: replace(loop.run(qh), model=gen.model_id)
    if substitutes is None:
        log.warning("influence.edit_test is on but no substitutes were given (a run draws them from its data "
                    "set's gold answers): the edit test is skipped")
        return lambda qh: replace(loop.run(qh), model=gen.model_id)
    pool = tuple(substitutes)
    return lambda qh: replace(with_edit_test(loop.run(qh), qh, loop, pool), model=gen.model_id)


def edit_test_inputs(config: ExperimentConfig, dataset: Dataset, given: Dataset | None = None) -> dict[str, Any]:
    """What :func:`influence_processor` takes from the run's data set: with ``influence.edit_test``,
    the substitute pool (every gold answer of the data set, the questions past ``data.limit`` too:
    ``given``, the whole set given in memory, or the set reloaded without the limit); nothing
    without it."""
    if not config.influence.edit_test:
        return {}
    if given is not None:
        dataset = given
    elif config.data.limit is not None:  # the pool is the whole data set's, not the first questions' (--limit 1)
        from ragray.data.loading import load_dataset

        dataset = load_dataset(config.data.model_copy(update={"limit": None}))
    return {"substitutes": substitute_pool(q.answers for q in dataset.questions)}


def with_edit_test(record: InfluenceRecord, qh: QuestionHits, loop: InfluenceLoop,
                   pool: Sequence[str]) -> InfluenceRecord:
    """``record`` with its edit test: ``edit_moved`` per passage, ``edit_calls`` / ``edit_unedited`` /
    ``edit_reproduces`` on the question; as it was where the question failed or has no gold answer."""
    q = qh.question
    if record.question.error is not None or not q.answers:
        return record
    try:
        test = edit_test(q.question, q.answers, [h.passage for h in qh.hits], pool, loop.generator, loop.template,
                         loop.system_prompt, seed=q.id, run_answer=record.question.baseline_answer)
    except BackendError as e:  # the attribution stands; the check is recorded as not made
        log.warning("edit test of question %s failed: %s", q.id, e)
        return record
    labels = test.labels()
    return replace(
        record,
        question=replace(record.question, edit_calls=test.generations, edit_unedited=test.unedited,
                         edit_reproduces=test.reproduces_run),
        passages=tuple(replace(p, edit_moved=labels.get(p.passage_id or "")) for p in record.passages),
    )


def faithfulness_processor(
    config: ExperimentConfig, generator: Generator | None = None
) -> Callable[[QuestionHits], FaithfulnessRecord]:
    """The per-question work of ``ragray interpret``: explain, delete, diagnose."""
    gen = generator or open_generator(config)
    experiment = faithfulness_experiment(config, gen)
    return lambda qh: replace(experiment.run(qh), model=gen.model_id)
