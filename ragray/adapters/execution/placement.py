"""Where model holders run on a Ray cluster: ``auto`` resources, and the placement each one reports.

A *model holder* is any Ray process that loads a model: a Ray Data actor of ``--executor ray``, a
Tune trial of ``ragray sweep``, a Serve replica of ``ragray serve``. Ray places processes by the
resources they ask for, and a process that asked for no GPU is *not* hidden from the GPUs (its
``CUDA_VISIBLE_DEVICES`` is left unset, so torch sees every GPU of the node): N such actors on a
GPU node would all load onto ``cuda:0`` while Ray thinks they use none. So on a cluster with GPUs
every model holder asks for one (``auto``), and :func:`ragray.worker.assigned_gpus`
makes ``device: auto`` follow what Ray assigned (no GPU assigned: CPU, even on a GPU node).

The ``auto`` rules (explicit numbers are used as given):

- a generator (Ray Data actor, sweep trial, Serve generator replica): **1 GPU** when the cluster has
  GPUs, else none;
- a small model (Serve's reranker with a model, a retriever replica with a dense encoder such as
  MiniLM): **0.25 GPU** (:data:`SMALL_MODEL_GPU`) when the cluster has GPUs, else none. On a single
  GPU the Serve generator then takes what the small models leave (``1 - 0.25·n``) so that all of
  them fit on it (:func:`serve_gpus`);
- Ray Data actors / concurrent sweep trials: **one per GPU** of the cluster (``GPUs / gpus each``),
  else the CPU rule (1);
- CPUs per holder, when not set: the cores of the smallest node that can hold one (a GPU node when
  holders ask for GPUs, so a CPU-only head never counts) over the holders that land on it.

Because a GPU holder asks for a GPU, Ray never puts it on a CPU-only node: a mixed cluster (CPU-only
head, GPU workers) keeps every model off the head.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ragray.rows.placement import idle_gpus, placement_lines, summarize_placements  # re-exported

__all__ = ["SMALL_MODEL_GPU", "ClusterView", "HolderResources", "Placement", "cluster_view", "current_placement",
           "holder_resources", "idle_gpus", "local_view", "placement_lines", "serve_gpus", "summarize_placements"]

log = logging.getLogger(__name__)

#: GPUs an ``auto`` small model (a reranker, the MiniLM encoder) asks for: four share one GPU
SMALL_MODEL_GPU = 0.25


@dataclass(frozen=True)
class NodeView:
    node_id: str
    cpus: float
    gpus: float


@dataclass(frozen=True)
class ClusterView:
    """The alive nodes of a Ray cluster and what each offers (``ray.nodes()``)."""

    nodes: tuple[NodeView, ...]

    @property
    def gpus(self) -> float:
        return sum(n.gpus for n in self.nodes)


def local_view() -> ClusterView:
    """This machine as a one-node cluster: its cores and the CUDA GPUs torch sees (none without torch)."""
    import importlib.util

    gpus = 0
    if importlib.util.find_spec("torch") is not None:
        import torch

        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return ClusterView((NodeView("local", float(len(os.sched_getaffinity(0))), float(gpus)),))


def cluster_view(ray: Any) -> ClusterView:
    """The connected cluster's alive nodes."""
    return ClusterView(tuple(
        NodeView(str(n.get("NodeID", "")), float(n["Resources"].get("CPU", 0.0)), float(n["Resources"].get("GPU", 0.0)))
        for n in ray.nodes() if n.get("Alive")
    ))


@dataclass(frozen=True)
class HolderResources:
    """What each of ``count`` model holders asks Ray for."""

    count: int
    cpus: float
    gpus: float

    def as_dict(self) -> dict[str, float]:
        return {"count": self.count, "cpus": self.cpus, "gpus": self.gpus}


def holder_resources(view: ClusterView, *, gpus: float | str, count: int | str,
                     cpus: float | None) -> HolderResources:
    """``auto`` GPUs per holder (1 on a GPU cluster, else 0), ``auto`` holders (one per GPU, else 1)
    and, when ``cpus`` is None, each holder's share of the cores of the nodes it can land on."""
    each_gpu = (1.0 if view.gpus > 0 else 0.0) if gpus == "auto" else float(gpus)
    if count == "auto":
        count = max(1, int(view.gpus // each_gpu)) if each_gpu > 0 else 1
    count = int(count)
    return HolderResources(count, float(cpus) if cpus else float(_cpus_each(view, count, each_gpu)), each_gpu)


def _cpus_each(view: ClusterView, count: int, gpus_each: float) -> int:
    """Whole cores per holder when none are asked for: on the smallest node that can hold one (a
    GPU node when holders ask for GPUs), its cores over the holders that land there when they
    spread over every such node (at least 1); a lone holder gets the whole node."""
    nodes = [n for n in view.nodes if n.cpus > 0 and (gpus_each <= 0 or n.gpus >= gpus_each)]
    if not nodes:
        return 1
    spread = -(-count // len(nodes))
    shares = []
    for n in nodes:
        fits = int(n.gpus // gpus_each) if gpus_each > 0 else spread
        shares.append(int(n.cpus) // max(1, min(spread, fits)))
    return max(1, min(shares))


def serve_gpus(view: ClusterView, *, generator: float | str, generator_replicas: int,
               small: Mapping[str, float | str]) -> dict[str, float]:
    """GPUs per replica of each Serve deployment: ``generator`` (its ``num_gpus`` setting) and the
    ``small`` model holders (name -> setting; a holder without a model is given 0 by the caller).
    ``auto``: none without GPUs; else 1 per generator replica and :data:`SMALL_MODEL_GPU` per small
    model, except that when the generators would leave no room for the small models (fewer GPUs
    than generator replicas + what the small ones take) the generator replicas share what is left."""
    out = {name: (0.0 if view.gpus <= 0 else SMALL_MODEL_GPU) if v == "auto" else float(v) for name, v in small.items()}
    if generator != "auto":
        out["generator"] = float(generator)
        return out
    if view.gpus <= 0:
        out["generator"] = 0.0
        return out
    room = view.gpus - sum(out.values())
    each = 1.0 if room >= generator_replicas else max(room, SMALL_MODEL_GPU) / max(1, generator_replicas)
    out["generator"] = min(1.0, math.floor(each * 100) / 100)
    return out


@dataclass(frozen=True)
class Placement:
    """Where one model holder ran: its node, process, the GPUs Ray assigned and the device its
    model resolved to (``holds_model``: it loads one; :func:`idle_gpus` says when it holds a model on a
    GPU node without a GPU)."""

    role: str
    node_id: str
    node_ip: str
    pid: int
    gpu_ids: tuple[str, ...]
    cuda_visible_devices: str | None
    device: str | None
    node_gpus: float
    holds_model: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {"role": self.role, "node_id": self.node_id, "node_ip": self.node_ip, "pid": self.pid,
                "gpu_ids": list(self.gpu_ids), "cuda_visible_devices": self.cuda_visible_devices,
                "device": self.device, "node_gpus": self.node_gpus, "holds_model": self.holds_model}

    def warning(self) -> str | None:
        if not idle_gpus(self.as_dict()):
            return None
        return (f"{self.role} on node {self.node_ip} ({self.node_id[:8]}) runs its model on {self.device or 'cpu'} "
                f"with no GPU assigned while its node has {self.node_gpus:g} GPU(s); give it a GPU "
                "(num_gpus auto, or a number > 0)")


def current_placement(role: str, device: str | None = None, holds_model: bool = True) -> Placement:
    """The placement of the Ray worker running this code (call it inside an actor, task or replica);
    logs :meth:`Placement.warning` when it holds a model on a GPU node without a GPU."""
    import ray

    ctx = ray.get_runtime_context()
    node_id = ctx.get_node_id()
    node = next((n for n in ray.nodes() if n.get("NodeID") == node_id), {})
    gpu_ids = tuple(str(g) for g in ctx.get_accelerator_ids().get("GPU", []))
    placement = Placement(role, node_id, str(node.get("NodeManagerAddress", "")), os.getpid(), gpu_ids,
                          os.environ.get("CUDA_VISIBLE_DEVICES"), device,
                          float(node.get("Resources", {}).get("GPU", 0.0)), holds_model)
    if (message := placement.warning()) is not None:
        log.warning(message)
    return placement
