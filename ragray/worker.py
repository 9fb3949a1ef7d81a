"""What Ray gave the process running this code: its reserved CPUs and assigned GPUs.

Read by the model holders (the transformers generator's thread count, the encoders' device) and by
Ray's adapters; it never imports Ray: a process that has not loaded Ray is not a Ray worker.
"""

from __future__ import annotations

from typing import Any

__all__ = ["assigned_gpus", "gpu_share", "reserved_cpus"]


def _worker_context() -> Any:
    """Ray's runtime context when this code runs in a Ray worker (task, actor, replica), else None."""
    import sys

    ray = sys.modules.get("ray")  # never imports Ray: a process that has not loaded it is not in a worker
    if ray is None or not ray.is_initialized():
        return None
    ctx = ray.get_runtime_context()
    return ctx if ctx.worker.mode == ray.WORKER_MODE else None


def reserved_cpus() -> int | None:
    """The whole CPUs Ray reserved for the task or actor running this code (a sweep trial's
    ``cpus_per_trial``, a Ray Data worker's ``num_cpus``), or None outside one (a driver, no Ray)
    and for a fraction of a CPU (a Serve replica's 0.5: that is a scheduling weight, not a core
    count). Several trials on one node's cores must each keep to their share: two trials whose
    models each ran every core of a 2-core node took ~3x as long per question
    (``benchmarks/results/archive/sweep-threads.json``)."""
    ctx = _worker_context()
    if ctx is None:
        return None
    cpus = ctx.get_assigned_resources().get("CPU", 0.0)
    return int(cpus) if cpus >= 1 else None


def assigned_gpus() -> list[str] | None:
    """The GPU ids Ray assigned to the task, actor or replica running this code (``[]``: it asked
    for none), or None outside a Ray worker (a driver, no Ray). A worker that asked for no GPU still
    sees every GPU of its node (Ray leaves ``CUDA_VISIBLE_DEVICES`` unset), so this, not what torch
    sees, says whether its model may use one."""
    ctx = _worker_context()
    if ctx is None:
        return None
    return [str(g) for g in ctx.get_accelerator_ids().get("GPU", [])]


def gpu_share() -> float | None:
    """The share of one GPU Ray gave the task, actor or replica running this code when it is less
    than a whole one (``num_gpus: 0.5``: two actors on one device), else None (a whole GPU or more,
    none, outside Ray). Device memory is planned against this share, not the device's free memory:
    the other holder has not allocated its share yet when this one sizes itself."""
    ctx = _worker_context()
    if ctx is None:
        return None
    gpus = ctx.get_assigned_resources().get("GPU", 0.0)
    return float(gpus) if 0 < gpus < 1 else None
