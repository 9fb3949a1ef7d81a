"""Ray Serve application: retriever, reranker and generator deployments behind a FastAPI ingress.

``build_app({"config": "configs/x.yaml", "overrides": [...]})`` is the application builder that
``serve run`` / ``serve deploy`` import (``import_path: ragray.serving.app:build_app``, see
``serve/*.yaml``); ``ragray serve`` calls it too. Replicas, CPUs/GPUs, autoscaling and
``max_ongoing_requests`` / ``max_queued_requests`` of each deployment come from the config's
``serve`` section; a Serve config file's ``deployments:`` list may still override them by name
(``Retriever``, ``Reranker``, ``Generator``, ``RagrayAPI``), as with any Serve app.
"""

from __future__ import annotations

import asyncio
from typing import Any

import yaml

from ragray._imports import require
from ragray.config import DeploymentOptions, ExperimentConfig, load_config, validate_config
from ragray.errors import ConfigError
from ragray.execution.ray_runtime import apply_defaults, connect

__all__ = ["build_app", "deployment_options", "app_from_config"]

serve = require("ray.serve", extra="ray", feature="ragray serve")


def deployment_options(opts: DeploymentOptions) -> dict[str, Any]:
    """``DeploymentOptions`` as keyword arguments of ``Deployment.options``."""
    out: dict[str, Any] = {
        "ray_actor_options": {"num_cpus": opts.num_cpus, "num_gpus": opts.num_gpus},
        "max_ongoing_requests": opts.max_ongoing_requests,
        "max_queued_requests": opts.max_queued_requests,
    }
    if opts.autoscaling is not None:
        out["autoscaling_config"] = opts.autoscaling.model_dump()
    else:
        out["num_replicas"] = opts.num_replicas
    return out


def _config(config_yaml: str) -> ExperimentConfig:
    return validate_config(yaml.safe_load(config_yaml))


@serve.deployment(name="Retriever")
class RetrieverDeployment:
    """Holds the served corpus and one index per retriever name."""

    def __init__(self, config_yaml: str) -> None:
        from ragray.serving.components import CorpusSearch

        self.search_ = CorpusSearch(_config(config_yaml))

    def size(self) -> int:
        return self.search_.size()

    def search(self, question: str, retriever: str, k: int) -> list:
        return self.search_.search(question, retriever, k)

    def expand(self, hits: list) -> list:
        return self.search_.expand(hits)


@serve.deployment(name="Reranker")
class RerankerDeployment:
    def __init__(self, config_yaml: str) -> None:
        from ragray.serving.components import RerankStep

        self.step = RerankStep(_config(config_yaml))

    def rerank(self, question: str, hits: list, k: int) -> list:
        return self.step.rerank(question, hits, k)


@serve.deployment(name="Generator")
class GeneratorDeployment:
    """Loads the generator once per replica; on a GPU node ``num_gpus`` places it there.

    Concurrent ``generate`` requests are merged (``serve.batch``, up to ``serve.generator.batch_size``
    requests) into one backend call, so different questions share batched decoding; each
    request's prompts stay together and in order, so one question's ablations still share
    their prefix.
    """

    def __init__(self, config_yaml: str) -> None:
        from ragray.serving.components import LockedGenerator

        config = _config(config_yaml)
        self.gen = LockedGenerator.from_config(config)
        self.batching = config.serve.generator.batch_size > 1
        self._generate_many.set_max_batch_size(config.serve.generator.batch_size)
        self._generate_many.set_batch_wait_timeout_s(config.serve.generator.batch_wait_s)

    def model_id(self) -> str:
        return self.gen.model_id

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.02)
    async def _generate_many(self, requests: list[list]) -> list[list]:
        flat = [p for prompts in requests for p in prompts]
        gens = await asyncio.get_running_loop().run_in_executor(None, self.gen.generate, flat)
        out, start = [], 0
        for prompts in requests:
            out.append(gens[start : start + len(prompts)])
            start += len(prompts)
        return out

    async def generate(self, prompts: list) -> list:
        if self.batching:
            return await self._generate_many(prompts)
        return await asyncio.get_running_loop().run_in_executor(None, self.gen.generate, prompts)

    def score(self, prompts: list, answers: list) -> list:
        return self.gen.score(prompts, answers)

    def scoring_problem(self) -> str | None:
        return self.gen.scoring_problem()

    def precision(self) -> str | None:
        return self.gen.precision


@serve.deployment(name="RagrayAPI")
@serve.ingress()
class RagrayAPI:
    """The FastAPI ingress; endpoint code runs in its worker threads and calls the deployments."""

    def __init__(self, config_yaml: str, retriever: Any, reranker: Any, generator: Any) -> None:
        from ragray.serving.components import RemoteGenerator, RemoteRerank, RemoteSearch
        from ragray.serving.runs import Presets, RunManager
        from ragray.serving.service import RagService

        config = _config(config_yaml)
        timeout = config.serve.timeout_s
        gen = RemoteGenerator(generator, timeout)
        self.service = RagService(config, RemoteSearch(retriever, timeout),
                                  RemoteRerank(reranker, timeout, config.rerank.strategy), gen)
        self.presets = Presets(config.serve.presets_dir)
        self.runs = RunManager(config, self.presets, gen)

    def __serve_build_asgi_app__(self) -> Any:
        from ragray.serving.api import make_app

        return make_app(self.service, self.runs, self.presets)


def app_from_config(config: ExperimentConfig) -> Any:
    """The bound application for ``config`` (deployment options from its ``serve`` section)."""
    sc = config.serve
    text = config.to_yaml()
    retriever = RetrieverDeployment.options(**deployment_options(sc.retriever)).bind(text)
    reranker = RerankerDeployment.options(**deployment_options(sc.reranker)).bind(text)
    generator = GeneratorDeployment.options(**deployment_options(sc.generator)).bind(text)
    return RagrayAPI.options(**deployment_options(sc.ingress)).bind(text, retriever, reranker, generator)


def build_app(args: dict[str, Any]) -> Any:
    """Application builder for ``serve run`` / ``serve deploy``.

    ``args``: ``config`` (a ragray YAML; omitted: the built-in defaults) and ``overrides``
    (a list of ``a.b=value``). Relative paths resolve against the working directory, which
    ``serve run --working-dir`` / a runtime env sets.
    """
    apply_defaults()  # `serve run` calls this builder before it connects to Ray
    unknown = set(args) - {"config", "overrides"}
    if unknown:
        raise ConfigError(f"serve application args: unknown {sorted(unknown)}; valid: config, overrides")
    overrides = args.get("overrides") or []
    if isinstance(overrides, str):
        overrides = [overrides]
    return app_from_config(load_config(args.get("config"), list(overrides)))


def start_server(config: ExperimentConfig, *, blocking: bool = True, name: str = "ragray") -> Any:
    """Start (or redeploy) the app on Ray Serve at ``serve.host:serve.port``.

    Connects to ``execution.address`` / ``RAY_ADDRESS`` when set, else starts Ray in this process
    (with the dashboard, as Ray users expect). Returns the ingress handle when not ``blocking``.
    """
    connect(config.execution.address, feature="ragray serve")
    serve.start(http_options={"host": config.serve.host, "port": config.serve.port})
    return serve.run(app_from_config(config), name=name, route_prefix="/", blocking=blocking)
