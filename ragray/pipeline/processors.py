"""The per-question work of each command, built once per process or Ray actor.

A processor takes one question's retrieved hits and returns its record (``question`` row, its
``passages`` / ``calls`` or ``units`` / ``arms`` / ``cases`` / ``curves`` rows, and ``model``); the
executors (:mod:`ragray.pipeline.executors`) run it here or on Ray, and the Serve service runs
the same loops for one ad-hoc question.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from ragray.ablation.loop import InfluenceLoop
from ragray.config import ExperimentConfig
from ragray.faithfulness.experiment import FaithfulnessExperiment
from ragray.generation import Generator
from ragray.pipeline.generators import open_generator
from ragray.generation.prompts import get_template, system_message
from ragray.cache.embeddings import embeddings_path
from ragray.metrics.quality import QualityScorer
from ragray.metrics.similarity import Similarity, all_measures, get_similarity
from ragray.retrieval.stage import QuestionHits
from ragray.rows.faithfulness import FaithfulnessRecord
from ragray.rows.influence import InfluenceRecord

__all__ = ["faithfulness_experiment", "faithfulness_processor", "influence_loop", "influence_processor"]


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
    config: ExperimentConfig, generator: Generator | None = None
) -> Callable[[QuestionHits], InfluenceRecord]:
    """The per-question work of ``ragray run``: baseline, ablations, influence, verdicts."""
    gen = generator or open_generator(config)
    loop = influence_loop(config, gen)
    return lambda qh: replace(loop.run(qh), model=gen.model_id)


def faithfulness_processor(
    config: ExperimentConfig, generator: Generator | None = None
) -> Callable[[QuestionHits], FaithfulnessRecord]:
    """The per-question work of ``ragray interpret``: explain, delete, diagnose."""
    gen = generator or open_generator(config)
    experiment = faithfulness_experiment(config, gen)
    return lambda qh: replace(experiment.run(qh), model=gen.model_id)
