"""The per-question work of each command, built once per process or Ray actor.

A processor takes one question's retrieved hits and returns its record (``question`` row, its
``passages`` / ``calls`` or ``units`` / ``arms`` / ``cases`` / ``curves`` rows, and ``model``); the
executors (:mod:`ragray.pipeline.executors`) run it here or on Ray, and the Serve service runs
the same loops for one ad-hoc question.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ragray.ablation.loop import InfluenceLoop
from ragray.config import ExperimentConfig
from ragray.faithfulness.experiment import FaithfulnessExperiment
from ragray.generation import Generator
from ragray.pipeline.generators import open_generator
from ragray.generation.prompts import get_template, system_message
from ragray.cache.embeddings import embeddings_path
from ragray.metrics.quality import QualityScorer
from ragray.metrics.similarity import all_measures, get_similarity
from ragray.retrieval.stage import QuestionHits
from ragray.rows.faithfulness import FaithfulnessRecord
from ragray.rows.influence import InfluenceRecord

__all__ = ["faithfulness_processor", "influence_processor"]


def influence_processor(
    config: ExperimentConfig, generator: Generator | None = None
) -> Callable[[QuestionHits], InfluenceRecord]:
    """The per-question work of ``ragray run``: baseline, ablations, influence, verdicts."""
    gen = generator or open_generator(config)
    loop = InfluenceLoop(
        gen,
        get_template(config.generation.template),
        get_similarity(config.influence.similarity),
        config.influence,
        system_message(get_template(config.generation.template), config.generation.system_prompt,
                       config.generation.decline),
        quality=QualityScorer(config.metrics, store=embeddings_path(config.cache.dir) if config.cache.embeddings
                              else None, offload=gen.aside),
        model=config.generation.model,
        retrieval_k=config.retrieval.top_k,
    )
    return lambda qh: replace(loop.run(qh), model=gen.model_id)


def faithfulness_processor(
    config: ExperimentConfig, generator: Generator | None = None
) -> Callable[[QuestionHits], FaithfulnessRecord]:
    """The per-question work of ``ragray interpret``: explain, delete, diagnose."""
    fc = config.faithfulness
    gen = generator or open_generator(config)
    experiment = FaithfulnessExperiment(
        gen,
        get_template(config.generation.template),
        all_measures(tuple(dict.fromkeys((fc.similarity, *fc.measures)))),
        fc,
        seed=config.seed,
        system_prompt=system_message(get_template(config.generation.template), config.generation.system_prompt,
                                     config.generation.decline),
    )
    return lambda qh: replace(experiment.run(qh), model=gen.model_id)
