"""Ray Serve application: retriever, reranker and generator deployments behind a FastAPI ingress.

``build_app({"config": "configs/x.yaml", "overrides": [...]})`` is the application builder that
``serve run`` / ``serve deploy`` import (``import_path: ragray.adapters.serving.app:build_app``, see
``serve/*.yaml``); ``ragray serve`` calls it too. Replicas, CPUs/GPUs, autoscaling and
``max_ongoing_requests`` / ``max_queued_requests`` of each deployment come from the config's
``serve`` section; a Serve config file's ``deployments:`` list may still override them by name
(``Retriever``, ``Reranker``, ``Generator``, ``RagrayAPI``), as with any Serve app.

GPUs (``num_gpus: auto``, :func:`ragray.adapters.execution.placement.serve_gpus`): none on a cluster
without GPUs; else one per generator replica and a quarter GPU for a retriever with a dense encoder
and a reranker with a model (on a single GPU the generator takes what those leave, so all fit on
it). The cluster is read where the application is built: on the cluster for ``serve deploy`` /
``serve run <config file>`` / ``ragray serve``; ``serve run module:build_app`` builds it before it
connects, so there the GPUs of the machine it runs on decide (use a config file on a cluster).
Each model-holding replica reports where it runs (:meth:`GeneratorDeployment.placement`);
``ragray serve`` prints it and writes ``<serve.runs_dir>/serve-placement.json``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from ragray._imports import require
from ragray.config import DeploymentOptions, ExperimentConfig, load_config, validate_config
from ragray.errors import ConfigError
from ragray.adapters.execution.placement import ClusterView, cluster_view, local_view, serve_gpus
from ragray.adapters.execution.ray_runtime import apply_defaults, connect
from ragray.adapters.serving.exposure import check_exposure, is_loopback
from ragray.adapters.serving.replica_grpc import keep_on_loopback

__all__ = ["build_app", "deployment_options", "app_from_config"]

log = logging.getLogger(__name__)

serve = require("ray.serve", extra="ray", feature="ragray serve")


def deployment_options(opts: DeploymentOptions, num_gpus: float | None = None) -> dict[str, Any]:
    """``DeploymentOptions`` as keyword arguments of ``Deployment.options`` (``num_gpus``: the
    resolved GPUs per replica when ``opts.num_gpus`` is ``auto``)."""
    if num_gpus is None and opts.num_gpus == "auto":
        raise ValueError("num_gpus 'auto' must be resolved against the cluster first (serve_resources)")
    gpus = float(opts.num_gpus) if num_gpus is None else num_gpus
    out: dict[str, Any] = {
        "ray_actor_options": {"num_cpus": opts.num_cpus, "num_gpus": gpus},
        "max_ongoing_requests": opts.max_ongoing_requests,
        "max_queued_requests": opts.max_queued_requests,
    }
    if opts.autoscaling is not None:
        out["autoscaling_config"] = opts.autoscaling.model_dump()
    else:
        out["num_replicas"] = opts.num_replicas
    return out


#: requests a Serve ingress replica takes in (they wait in the app, holding no thread)
INGRESS_ADMITS = 10_000


def _config(config_yaml: str) -> ExperimentConfig:
    return validate_config(yaml.safe_load(config_yaml))


class _Placed:
    """A deployment whose replicas say where they run (node, pid, GPU ids, device)."""

    role = "replica"
    _where: dict[str, Any] = {}

    def _place(self, device: str | None = None, holds_model: bool = True) -> None:
        from ragray.adapters.execution.placement import current_placement

        self._where = current_placement(self.role, device, holds_model).as_dict()

    def placement(self) -> dict[str, Any]:
        return self._where


def _holds_model(config: ExperimentConfig) -> dict[str, bool]:
    """Whether the retriever and the reranker deployments load a model (a dense encoder, a reranker)."""
    from ragray.rerank import RERANKERS
    from ragray.retrieval import RETRIEVERS

    return {"retriever": RETRIEVERS.get(config.retrieval.retriever).holds_model,
            "reranker": not RERANKERS.get(config.rerank.strategy).passthrough}


def serve_resources(config: ExperimentConfig, view: ClusterView) -> dict[str, float]:
    """GPUs per replica of each deployment (``retriever``, ``reranker``, ``generator``, ``ingress``),
    ``auto`` resolved against ``view``: a deployment that loads no model gets none."""
    sc = config.serve
    holds = _holds_model(config)
    small: dict[str, float | str] = {}
    for name, held in holds.items():
        setting = getattr(sc, name).num_gpus
        small[name] = setting if held or setting != "auto" else 0.0
    replicas = sc.generator.autoscaling.max_replicas if sc.generator.autoscaling else sc.generator.num_replicas
    out = serve_gpus(view, generator=sc.generator.num_gpus, generator_replicas=replicas, small=small)
    out["ingress"] = 0.0 if sc.ingress.num_gpus == "auto" else float(sc.ingress.num_gpus)
    return out


@serve.deployment(name="Retriever")
class RetrieverDeployment(_Placed):
    """Holds the served corpus and one index per retriever name."""

    role = "retriever"

    def __init__(self, config_yaml: str) -> None:
        from ragray.adapters.serving.components import CorpusSearch

        keep_on_loopback()
        config = _config(config_yaml)
        self.search_ = CorpusSearch(config)
        self._place(holds_model=_holds_model(config)["retriever"])

    def size(self) -> int:
        return self.search_.size()

    def search(self, question: str, retriever: str, k: int) -> list:
        return self.search_.search(question, retriever, k)

    def expand(self, hits: list) -> list:
        return self.search_.expand(hits)


@serve.deployment(name="Reranker")
class RerankerDeployment(_Placed):
    role = "reranker"

    def __init__(self, config_yaml: str) -> None:
        from ragray.adapters.serving.components import RerankStep

        keep_on_loopback()
        config = _config(config_yaml)
        self.step = RerankStep(config)
        self._place(getattr(self.step.reranker, "device", None), _holds_model(config)["reranker"])

    def rerank(self, question: str, hits: list, k: int) -> list:
        return self.step.rerank(question, hits, k)


@serve.deployment(name="Generator")
class GeneratorDeployment(_Placed):
    """Loads the generator once per replica; on a GPU node ``num_gpus`` places it there.

    Concurrent ``generate`` requests are merged (``serve.batch``, up to ``serve.generator.batch_size``
    requests) into one backend call, so different questions share batched decoding; each
    request's prompts stay together and in order, so one question's ablations still share
    their prefix.
    """

    role = "generator"

    def __init__(self, config_yaml: str) -> None:
        from ragray.adapters.serving.components import LockedGenerator

        keep_on_loopback()
        config = _config(config_yaml)
        self.gen = LockedGenerator.from_config(config)
        self._place(self.gen.resolved_settings().get("device"))
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

    def logprobs(self, prompts: list, answers: list) -> list:
        return self.gen.logprobs(prompts, answers)

    def scoring_problem(self) -> str | None:
        return self.gen.scoring_problem()

    def precision(self) -> str | None:
        return self.gen.precision


@serve.deployment(name="RagrayAPI")
@serve.ingress()
class RagrayAPI:
    """The FastAPI ingress; endpoint code runs in its worker threads and calls the deployments."""

    def __init__(self, config_yaml: str, retriever: Any, reranker: Any, generator: Any) -> None:
        from ragray.adapters.serving.components import RemoteGenerator, RemoteRerank, RemoteSearch
        from ragray.adapters.serving.runs import Presets, RunManager
        from ragray.adapters.serving.service import RagService

        keep_on_loopback()
        config = _config(config_yaml)
        warning = check_exposure(config.serve, _proxy_host() or config.serve.host)
        if warning:  # `serve run` / `serve deploy`: the replica's log is where an operator looks
            log.warning(warning)
        timeout = config.serve.timeout_s
        gen = RemoteGenerator(generator, timeout)
        self.service = RagService(config, RemoteSearch(retriever, timeout),
                                  RemoteRerank(reranker, timeout, config.rerank.strategy), gen)
        self.presets = Presets.for_server(config)
        self.runs = RunManager(config, self.presets, gen)

    def __serve_build_asgi_app__(self) -> Any:
        from ragray.adapters.serving.api import ServeFront, make_app

        return ServeFront(make_app(self.service, self.runs, self.presets, behind_serve=True))


def _proxy_host() -> str | None:
    """The host Serve's HTTP proxies bind (a Serve config file's ``http_options.host``), asked of the
    Serve controller; None where it cannot be read."""
    try:
        from ray.serve.context import _get_global_client

        return str(_get_global_client().http_config.host)
    except Exception as exc:  # a private API of Ray Serve: fall back to serve.host
        log.info("could not read Serve's HTTP host (%s); checking serve.host", exc)
        return None


def _build_view() -> ClusterView:
    """The cluster the app will run on: the connected one, else this machine (module docstring)."""
    import ray

    if ray.is_initialized():
        return cluster_view(ray)
    log.info("Ray is not connected while the app is built: num_gpus auto counts this machine's GPUs")
    return local_view()


def app_from_config(config: ExperimentConfig, view: ClusterView | None = None) -> Any:
    """The bound application for ``config`` (deployment options from its ``serve`` section, ``auto``
    GPUs resolved against ``view``, else the cluster it is built on)."""
    sc = config.serve
    gpus = serve_resources(config, view or _build_view())
    log.info("Serve GPUs per replica: %s", gpus)
    text = config.to_yaml()
    retriever = RetrieverDeployment.options(**deployment_options(sc.retriever, gpus["retriever"])).bind(text)
    reranker = RerankerDeployment.options(**deployment_options(sc.reranker, gpus["reranker"])).bind(text)
    generator = GeneratorDeployment.options(**deployment_options(sc.generator, gpus["generator"])).bind(text)
    # the app enforces serve.ingress itself (ragray.adapters.serving.admission: a JSON 503 with Retry-After);
    # Serve admits every request, or its proxy would answer a full queue in plain text
    ingress = deployment_options(sc.ingress, gpus["ingress"]) | {"max_ongoing_requests": INGRESS_ADMITS,
                                                                 "max_queued_requests": -1}
    return RagrayAPI.options(**ingress).bind(text, retriever, reranker, generator)


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


def replica_placements(name: str = "ragray") -> list[dict[str, Any]]:
    """Where a replica of each model-holding deployment of app ``name`` runs (one answer per
    deployment: the replica the call reached)."""
    return [serve.get_deployment_handle(d, app_name=name).placement.remote().result()
            for d in ("Retriever", "Reranker", "Generator")]


def start_server(config: ExperimentConfig, *, blocking: bool = True, name: str = "ragray") -> Any:
    """Start (or redeploy) the app on Ray Serve at ``serve.host:serve.port``.

    Connects to ``execution.address`` / ``RAY_ADDRESS`` when set, else starts Ray in this process
    (with the dashboard, as Ray users expect; every Ray port on loopback). Once it runs, prints where
    each model holder runs and writes it to ``<serve.runs_dir>/serve-placement.json``, and on a
    non-loopback host says on stderr which of Ray's ports the network reaches
    (:mod:`ragray.adapters.execution.ray_ports`). Returns the ingress handle when not ``blocking``;
    else serves until Ctrl-C.
    """
    from ragray.adapters.execution import ray_ports
    from ragray.adapters.execution.placement import placement_lines

    warning = check_exposure(config.serve)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    ray = connect(config.execution.address, feature="ragray serve")
    serve.start(http_options={"host": config.serve.host, "port": config.serve.port})
    handle = serve.run(app_from_config(config), name=name, route_prefix="/", blocking=False)
    where = replica_placements(name)
    print("placement:\n" + "\n".join(placement_lines(where)), flush=True)
    host, port = config.serve.host, config.serve.port
    if not is_loopback(host):  # the network reaches the API: say whether it reaches Ray too
        http = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        print(ray_ports.report(gcs_address=ray.get_runtime_context().gcs_address, http=http),
              file=sys.stderr, flush=True)
    runs = Path(config.serve.runs_dir)
    runs.mkdir(parents=True, exist_ok=True)
    (runs / "serve-placement.json").write_text(json.dumps(where, indent=1) + "\n", encoding="utf-8")
    if not blocking:
        return handle
    previous = signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM stops it as Ctrl-C does
    try:
        while True:
            time.sleep(10)
    except KeyboardInterrupt:
        # the ingress's lifespan ends with it: its runs stop at their next model call and are
        # recorded interrupted (serve.stop_timeout_s), as with `ragray serve --no-ray`
        serve.shutdown()
        print("ragray serve: stopped (runs still going were recorded interrupted)", file=sys.stderr, flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return None


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
