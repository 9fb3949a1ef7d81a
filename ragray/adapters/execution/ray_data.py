"""Ray Data executor: questions fan out over generator actors; records stream back to the run log.

Each pending question (its retrieved hits, pickled) is one row. ``map_batches`` with an
``ActorPoolStrategy`` sends batches of rows to ``execution.actors`` actors; each actor opens the
generator once (behind the call cache) and runs the same per-question code as the local executor,
a batch of ``execution.max_questions_in_flight`` questions (the backend's default: 1 for a local
model, 16 for an endpoint) in flight together, so one GPU actor keeps its engine full (all calls
of one question in one actor, so its prompts share their prefix). Records come back as each batch
completes and the driver appends each to ``progress.jsonl`` at once, so a killed run resumes
without redoing them; the
final tables are ordered by the dataset, so they equal the local executor's. Each record also
says where it ran (``record["worker"]``: node id and process id); the tables do not use it.

Node loss: the actors restart elsewhere and the rows they held are retried (``max_restarts=-1``,
``max_task_retries=-1``: Ray Data's defaults for actor pools; passing them explicitly is
deprecated since Ray 2.60, and ``tests/execution/test_multinode.py`` checks the behaviour). The
retries must be unbounded: until the cluster declares the node dead (seconds to a minute) every
retry of a row fails at once with ``ActorUnavailableError`` and uses up a retry. The price: a row that kills its actor each time
(e.g. out of memory) is retried forever. A retried row whose record already came back is dropped
here, so the run log never holds a question twice.

Resources (:mod:`ragray.adapters.execution.placement`): ``execution.num_gpus: auto`` gives each actor one
GPU on a cluster with GPUs (none without), ``execution.actors: auto`` starts one actor per GPU (1
without GPUs), ``execution.num_cpus: null`` shares the cores of the nodes the actors can land on.
Each actor's model then runs on the GPU Ray assigned it (``generation.device: auto`` follows the
assignment), and each record's ``worker`` says where it ran: node, process, GPU ids, device.

Ray starts in-process unless ``execution.address`` or ``RAY_ADDRESS`` names a cluster
(:mod:`ragray.adapters.execution.ray_runtime`).
"""

from __future__ import annotations

import json
import logging
import pickle
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import yaml

from ragray.config import ExperimentConfig, validate_config
from ragray.adapters.execution.placement import HolderResources, cluster_view, current_placement, holder_resources
from ragray.adapters.execution.ray_runtime import connect
from ragray.retrieval.stage import QuestionHits
from ragray.rows.base import QuestionRecord
from ragray.pipeline.executors import EXECUTORS, Executor

__all__ = ["QuestionWorker", "RayExecutor", "actor_resources", "ray_records"]

log = logging.getLogger(__name__)

Builder = Callable[..., Callable[[QuestionHits], QuestionRecord]]  # builder(config, generator)


class QuestionWorker:
    """A Ray Data actor: opens the generator once, then processes batches of questions, up to
    ``execution.max_questions_in_flight`` of them with the backend at once (one engine call for
    all of them on an in-process engine: :mod:`ragray.pipeline.in_flight`)."""

    def __init__(self, config_yaml: str, builder: Builder) -> None:

        from ragray.pipeline.generators import open_generator
        from ragray.pipeline.in_flight import InFlight, questions_in_flight

        config = validate_config(yaml.safe_load(config_yaml))
        self.generator = open_generator(config)
        n = questions_in_flight(config, self.generator)
        self.flight = InFlight(self.generator, n) if n > 1 else None
        self.process = builder(config, self.flight.backend if self.flight else self.generator)
        # Set again when Ray restarts this actor on another node.
        settings = self.generator.resolved_settings()
        self.worker = {**current_placement("actor", settings.get("device")).as_dict(), "settings": settings}

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[str]]:
        from ragray.pipeline.generators import call_cache_counts

        questions: list[QuestionHits] = [pickle.loads(blob) for blob in batch["qh"]]
        done = self.flight.run(questions, self.process) if self.flight else map(self.process, questions)

        before = call_cache_counts(self.generator)
        ids, records = [], []
        for record in done:
            ids.append(record.question_id)
            records.append(json.dumps({**record.as_dict(), "worker": self.worker}))
        after = call_cache_counts(self.generator)
        # this batch's call-cache hits and misses ride on its first row (the driver adds them up)
        counts = [json.dumps({k: v - before.get(k, 0) for k, v in after.items()})] + ["{}"] * (len(ids) - 1)
        return {"question_id": ids, "record": records, "call_counts": counts[: len(ids)]}


def _batch_size(config: ExperimentConfig, gpus: float = 0) -> int:
    """Questions per actor batch: the questions it keeps in flight (the backend's default for an
    actor with ``gpus``, unless set)."""
    from ragray.generation import GENERATORS
    from ragray.pipeline.in_flight import questions_in_flight

    return questions_in_flight(config, GENERATORS.get(config.generation.backend), on_gpu=gpus > 0)


def actor_resources(config: ExperimentConfig, ray: Any) -> HolderResources:
    """The actors of this run and what each asks for, ``auto`` resolved against the cluster."""
    ex = config.execution
    res = holder_resources(cluster_view(ray), gpus=ex.num_gpus, count=ex.actors, cpus=ex.num_cpus)
    log.info("Ray Data: %d actor(s), %g CPU and %g GPU each", res.count, res.cpus, res.gpus)
    return res


def ray_records(
    config: ExperimentConfig, pending: list[QuestionHits], builder: Builder, record_type: type[QuestionRecord],
    call_counts: dict[str, int] | None = None, resources: dict[str, Any] | None = None,
) -> Iterator[QuestionRecord]:
    """Records of ``pending`` questions processed on Ray, in completion order, each at most once
    (each crosses from its actor as JSON and is read back as ``record_type``); the actors'
    call-cache hits and misses are added into ``call_counts``, what each actor asked for into
    ``resources``."""
    if not pending:
        return
    ray = connect(config.execution.address, feature="execution.executor=ray", dashboard=False)
    res = actor_resources(config, ray)
    if resources is not None:
        resources.update(res.as_dict())
    ds = ray.data.from_items(
        [{"qh": pickle.dumps(qh)} for qh in pending], override_num_blocks=len(pending)
    )
    ds = ds.map_batches(
        QuestionWorker,
        fn_constructor_args=(config.to_yaml(), builder),
        batch_size=_batch_size(config, res.gpus),
        compute=ray.data.ActorPoolStrategy(size=res.count),
        num_cpus=res.cpus,
        num_gpus=res.gpus or None,
    )
    seen: set[str] = set()
    for row in ds.iter_rows():
        if call_counts is not None:
            for key, n in json.loads(row["call_counts"]).items():
                call_counts[key] = call_counts.get(key, 0) + n
        if row["question_id"] in seen:
            log.warning("question %s came back twice (a retried row); kept the first record",
                        row["question_id"])
            continue
        seen.add(row["question_id"])
        yield record_type.from_dict(json.loads(row["record"]))


@EXECUTORS.register("ray")
class RayExecutor(Executor):
    """Over ``execution.actors`` Ray Data actors, each holding its own generator
    (:mod:`ragray.adapters.execution.ray_data`)."""

    name = "ray"

    def records(self, config: ExperimentConfig, pending: Iterable[QuestionHits],
                builder: Builder) -> Iterator[QuestionRecord]:
        return ray_records(config, list(pending), builder, self.record_type, self.call_counts, self.resources)
