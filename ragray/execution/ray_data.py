"""Ray Data executor: questions fan out over generator actors; records stream back to the run log.

Each pending question (its retrieved hits, pickled) is one row. ``map_batches`` with an
``ActorPoolStrategy`` sends rows to ``execution.actors`` actors; each actor loads the generator
once and runs the same per-question code as the local executor (all calls of one question in
one actor, so its prompts share their prefix). Records come back as they complete and the driver
appends each to ``progress.jsonl`` at once, so a killed run resumes without redoing them; the
final tables are ordered by the dataset, so they equal the local executor's. Each record also
says where it ran (``record["worker"]``: node id and process id); the tables do not use it.

Node loss: the actors restart elsewhere and the rows they held are retried (``max_restarts=-1``,
``max_task_retries=-1``: Ray Data's defaults for actor pools; passing them explicitly is
deprecated since Ray 2.60, and ``tests/execution/test_multinode.py`` checks the behaviour). The
retries must be unbounded: until the cluster declares the node dead (seconds to a minute) every
retry of a row fails at once with ``ActorUnavailableError`` and uses up a retry. The price: a row that kills its actor each time
(e.g. out of memory) is retried forever. A retried row whose record already came back is dropped
here, so the run log never holds a question twice.

Ray starts in-process (``address="local"``) unless ``execution.address`` or ``RAY_ADDRESS`` names a
cluster: a bare ``ray.init()`` would attach to whatever cluster ``ray start`` last recorded in
``/tmp/ray/ray_current_cluster``, possibly someone else's.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
from collections.abc import Callable, Iterator
from typing import Any

import yaml

from ragray._imports import require
from ragray.config import ExperimentConfig, validate_config
from ragray.retrieval.stage import QuestionHits

__all__ = ["QuestionWorker", "ray_records"]

log = logging.getLogger(__name__)

# Ray on one machine: loopback only, no token auth, no usage stats (ENV.md); users may override.
for _key, _value in {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled",
                     "RAY_USAGE_STATS_ENABLED": "0"}.items():
    os.environ.setdefault(_key, _value)

Builder = Callable[[ExperimentConfig], Callable[[QuestionHits], dict[str, Any]]]


class QuestionWorker:
    """A Ray Data actor: builds the per-question processor once, then processes rows."""

    def __init__(self, config_yaml: str, builder: Builder) -> None:
        import ray

        config = validate_config(yaml.safe_load(config_yaml))
        self.process = builder(config)
        # Set again when Ray restarts this actor on another node.
        self.worker = {"node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[str]]:
        ids, records = [], []
        for blob in batch["qh"]:
            qh: QuestionHits = pickle.loads(blob)
            ids.append(qh.question.id)
            records.append(json.dumps({**self.process(qh), "worker": self.worker}))
        return {"question_id": ids, "record": records}


def _init_ray(config: ExperimentConfig) -> Any:
    ray = require("ray", extra="ray", feature="execution.executor=ray")
    if not ray.is_initialized():
        address = config.execution.address or os.environ.get("RAY_ADDRESS")
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(address="local", include_dashboard=False, log_to_driver=False)
    return ray


def ray_records(
    config: ExperimentConfig, pending: list[QuestionHits], builder: Builder
) -> Iterator[dict[str, Any]]:
    """Records of ``pending`` questions processed on Ray, in completion order, each at most once."""
    if not pending:
        return
    ray = _init_ray(config)
    ex = config.execution
    ds = ray.data.from_items(
        [{"qh": pickle.dumps(qh)} for qh in pending], override_num_blocks=len(pending)
    )
    ds = ds.map_batches(
        QuestionWorker,
        fn_constructor_args=(config.to_yaml(), builder),
        batch_size=1,
        compute=ray.data.ActorPoolStrategy(size=ex.actors),
        num_cpus=ex.num_cpus,
        num_gpus=ex.num_gpus or None,
    )
    seen: set[str] = set()
    for row in ds.iter_rows():
        if row["question_id"] in seen:
            log.warning("question %s came back twice (a retried row); kept the first record",
                        row["question_id"])
            continue
        seen.add(row["question_id"])
        yield json.loads(row["record"])
